//! End to end, one test per language whose toolchain is on this machine:
//! a tiny repository made by the test (a Rust crate, a Go module, a Node.js
//! package, a C library built with autotools, a C++ library; none with dependencies from a registry, so the
//! images build offline too; the Java project's JUnit and Maven plugins
//! come from Maven Central when its image is built), a dataset row and a spec with `toolchains:`
//! written by the test, gold and a wrong patch graded by the real binary on
//! the Docker backend with the real test runner (`cargo test`, `go test
//! -v`, `node --test` with its TAP reporter, automake's `make check` read by
//! the jq parser, `mvn test -Dtest=…` one
//! class at a time as the dataset's Java rows run it, a GoogleTest binary built with
//! Debian's g++ and libgtest-dev), the verdicts and the recorded toolchain
//! checked.
//!
//! Without a daemon, or without the toolchain on the host, a test skips,
//! printing why, unless PATCHGRADE_REQUIRE_DOCKER=1 (CI), where it fails.
//! They run one at a time (a lock): the base image is shared.

mod common;

use std::path::Path;
use std::sync::Mutex;

use common::*;
use serde_json::{json, Value};

static SERIAL: Mutex<()> = Mutex::new(());

/// Whether the host has what the language's provider copies: a test that
/// needs it fails instead of skipping under PATCHGRADE_REQUIRE_DOCKER=1.
fn toolchain_ready(what: &str, present: bool) -> bool {
    available(what, "PATCHGRADE_REQUIRE_DOCKER", present)
}

/// A rustup toolchain of a release (not nightly) with cargo and rustc.
fn host_rust() -> bool {
    let home = std::env::var_os("RUSTUP_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(&std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".rustup")
        });
    std::fs::read_dir(home.join("toolchains"))
        .map(|rd| {
            rd.filter_map(|e| e.ok()).any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with(|c: char| c.is_ascii_digit()) && e.path().join("bin/cargo").is_file()
            })
        })
        .unwrap_or(false)
}

/// One repository, its row and spec, and the two predictions.
struct Case {
    sb: Sandbox,
    id: String,
}

impl Case {
    /// `repo` with `base` committed; gold makes `fixed`; the test patch
    /// adds `tests` (`(path, body)`); the wrong patch makes `wrong`.
    #[allow(clippy::too_many_arguments)]
    fn new(
        repo: &str,
        spec: &str,
        base: &[(&str, &str)],
        fixed: (&str, &str),
        wrong: (&str, &str),
        tests: (&str, &str),
        f2p: &[&str],
        p2p: &[&str],
    ) -> Case {
        let sb = Sandbox::new();
        let fx = FixtureRepo::new(&sb, repo);
        let files: Vec<(&str, Option<&[u8]>)> =
            base.iter().map(|(p, b)| (*p, Some(b.as_bytes()))).collect();
        let commit = fx.commit(&files, "base");
        let gold = fx.diff_of(&[(fixed.0, Some(fixed.1.as_bytes()))], false);
        let bad = fx.diff_of(&[(wrong.0, Some(wrong.1.as_bytes()))], false);
        let test_patch = fx.diff_of(&[(tests.0, Some(tests.1.as_bytes()))], false);
        let id = format!("{}-1", repo.replace('/', "__"));
        let row = instance(&id, repo, &commit, &gold, &test_patch, f2p, p2p);
        sb.write("dataset.jsonl", &jsonl(&[row]));
        sb.write("specs/spec.yaml", spec);
        let preds = [
            prediction(&id, "gold", Some(&gold)),
            prediction(&id, "wrong", Some(&bad)),
        ];
        sb.write("preds.jsonl", &jsonl(&preds));
        Case { sb, id }
    }

    fn run(&self, run_id: &str) -> std::process::Output {
        let mut a = docker_args("run", "preds.jsonl", run_id);
        a.extend(["--max-workers", "1"]);
        self.sb.run(&a)
    }

    fn record(&self, run_id: &str, model: &str) -> Value {
        self.sb.record(run_id, model, &self.id)
    }

    /// The toolchains run.json records.
    fn run_toolchains(&self, run_id: &str) -> Value {
        let p = self.sb.path().join("logs").join(run_id).join("run.json");
        let text = std::fs::read_to_string(&p)
            .or_else(|_| {
                // Wherever the run folder is, run.json is under the run id.
                find(self.sb.path(), run_id, "run.json")
                    .map(std::fs::read_to_string)
                    .unwrap_or_else(|| Err(std::io::Error::other("no run.json")))
            })
            .unwrap_or_else(|e| panic!("run.json of {run_id}: {e}"));
        serde_json::from_str::<Value>(&text).unwrap()["toolchains"].clone()
    }
}

/// `<...>/<run_id>/<file>` under `root`.
fn find(root: &Path, run_id: &str, file: &str) -> Option<std::path::PathBuf> {
    walk(root).into_iter().find(|e| {
        e.file_name().and_then(|n| n.to_str()) == Some(file)
            && e.parent()
                .and_then(|p| p.file_name())
                .and_then(|n| n.to_str())
                == Some(run_id)
    })
}

fn walk(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.filter_map(|e| e.ok()) {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Gold resolves, the wrong patch does not, and the record and run.json
/// name the toolchain the provider chose.
fn check(case: &Case, run_id: &str, language: &str, asked: &str) {
    let out = case.run(run_id);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let gold = case.record(run_id, "gold");
    let wrong = case.record(run_id, "wrong");
    assert_eq!(
        (gold["outcome"].as_str(), wrong["outcome"].as_str()),
        (Some("resolved"), Some("unresolved")),
        "gold {gold}\nwrong {wrong}\n{stderr}"
    );
    let env = gold["environment"].as_str().unwrap_or_default();
    assert!(env.contains(&format!("; {language} ")), "{env}");
    let tc = case.run_toolchains(run_id);
    let rec = &tc[0];
    assert_eq!(rec["language"], json!(language), "{tc}");
    assert_eq!(rec["asked"], json!(asked), "{tc}");
    let given = rec["given"].as_str().unwrap();
    assert!(env.contains(&format!("{language} {given} (")), "{env}");
    // A release other than the one asked is a listed deviation.
    let same = given.starts_with(asked);
    assert_eq!(rec["deviation"].is_null(), same, "{tc}");
}

const RUST_SPEC: &str = "repo: acme/calc\nversions:\n  \"*\":\n    toolchains: {rust: \"1.81\"}\n    install: cargo test --no-run\n    eval_install: \"\"\n    test_cmd: cargo test --no-fail-fast\n    log_parser: cargo\n    test_directives: none\n";

#[test]
fn a_rust_crate_is_graded_with_the_host_toolchain_offline() {
    if !docker_ready("a_rust_crate_is_graded_with_the_host_toolchain_offline")
        || !toolchain_ready("a rustup release toolchain on the host", host_rust())
    {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lib = "pub fn add(a: i64, b: i64) -> i64 {\n    a - b\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn zero() {\n        assert_eq!(super::add(0, 0), 0);\n    }\n}\n";
    let case = Case::new(
        "acme/calc",
        RUST_SPEC,
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
            ),
            ("src/lib.rs", lib),
            (".gitignore", "/target\n"),
        ],
        ("src/lib.rs", &lib.replace("a - b", "a + b")),
        ("src/lib.rs", &lib.replace("a - b", "a * b")),
        (
            "tests/add.rs",
            "#[test]\nfn adds_two() {\n    assert_eq!(calc::add(2, 3), 5);\n}\n",
        ),
        &["adds_two"],
        &["tests::zero"],
    );
    check(&case, "ml-rust", "rust", "1.81");
}

fn host_go() -> bool {
    Path::new("/usr/local/go/bin/go").is_file()
}

const GO_SPEC: &str = "repo: acme/gocalc\nversions:\n  \"*\":\n    toolchains: {go: \"1.26\"}\n    install: go test -c -o /dev/null .\n    eval_install: \"\"\n    test_cmd: go test -v .\n    log_parser: gotest\n    test_directives: none\n";

#[test]
fn a_go_module_is_graded_with_go_offline() {
    if !docker_ready("a_go_module_is_graded_with_go_offline")
        || !toolchain_ready("Go in /usr/local/go", host_go())
    {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let code = "package calc\n\nfunc Add(a, b int) int {\n\treturn a - b\n}\n";
    let case = Case::new(
        "acme/gocalc",
        GO_SPEC,
        &[
            ("go.mod", "module example.com/calc\n\ngo 1.21\n"),
            ("calc.go", code),
            (
                "zero_test.go",
                "package calc\n\nimport \"testing\"\n\nfunc TestZero(t *testing.T) {\n\tif Add(0, 0) != 0 {\n\t\tt.Fatal(\"zero\")\n\t}\n}\n",
            ),
        ],
        ("calc.go", &code.replace("a - b", "a + b")),
        ("calc.go", &code.replace("a - b", "a * b")),
        (
            "add_test.go",
            "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(Add(2, 3))\n\t}\n}\n",
        ),
        &["TestAdd"],
        &["TestZero"],
    );
    check(&case, "ml-go", "go", "1.26");
}

fn host_node() -> bool {
    Path::new("/usr/bin/node").is_file() && Path::new("/usr/lib/node_modules/npm").is_dir()
}

// Node's own runner and the reference's TAP parser (`parse_log_tap`); the
// test files are named, not globbed: Node 20 and 22 search folders
// differently.
const NODE_SPEC: &str = "repo: acme/nodecalc\nversions:\n  \"*\":\n    toolchains: {node: \"20\"}\n    install: node --version\n    eval_install: \"\"\n    test_cmd: node --test --test-reporter=tap test/zero.test.js test/add.test.js\n    log_parser: tap\n    test_directives: none\n";

#[test]
fn a_node_package_is_graded_with_node_offline() {
    if !docker_ready("a_node_package_is_graded_with_node_offline")
        || !toolchain_ready("Node.js and npm in /usr", host_node())
    {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let code = "exports.add = (a, b) => a - b;\n";
    let test = |name: &str, body: &str| {
        format!("const test = require('node:test');\nconst assert = require('node:assert');\nconst {{ add }} = require('../calc');\n\ntest('{name}', () => {{\n  {body}\n}});\n")
    };
    let zero = test("zero", "assert.strictEqual(add(0, 0), 0);");
    let add = test("adds two", "assert.strictEqual(add(2, 3), 5);");
    let case = Case::new(
        "acme/nodecalc",
        NODE_SPEC,
        &[
            (
                "package.json",
                "{\n  \"name\": \"calc\",\n  \"version\": \"0.1.0\",\n  \"private\": true\n}\n",
            ),
            ("calc.js", code),
            ("test/zero.test.js", &zero),
        ],
        ("calc.js", &code.replace("a - b", "a + b")),
        ("calc.js", &code.replace("a - b", "a * b")),
        ("test/add.test.js", &add),
        // The reference's TAP ids keep everything after the number, the
        // `- ` of Node's `ok 1 - adds two` included.
        &["- adds two"],
        &["- zero"],
    );
    check(&case, "ml-node", "node", "20");
}

// C and C++ need no toolchain tier: Debian's compilers and GoogleTest
// (libgtest-dev) are installed as `apt_packages` in the env image, which
// the record names instead of a toolchain.
const CPP_SPEC: &str = "repo: acme/cppcalc\nversions:\n  \"*\":\n    apt_packages: [g++, libgtest-dev]\n    install: \"true\"\n    eval_install: \"\"\n    test_cmd: g++ -std=c++17 -o /tmp/calc_test calc.cc test/*.cc -lgtest -lgtest_main -pthread && /tmp/calc_test\n    log_parser: googletest\n    test_directives: none\n";

#[test]
fn a_cpp_library_is_graded_with_googletest() {
    if !docker_ready("a_cpp_library_is_graded_with_googletest") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let code = "#include \"calc.h\"\n\nint add(int a, int b) { return a - b; }\n";
    let test = |name: &str, body: &str| {
        format!(
            "#include <gtest/gtest.h>\n#include \"../calc.h\"\n\nTEST(Calc, {name}) {{ {body} }}\n"
        )
    };
    let zero = test("Zero", "EXPECT_EQ(add(0, 0), 0);");
    let add = test("AddsTwo", "EXPECT_EQ(add(2, 3), 5);");
    let case = Case::new(
        "acme/cppcalc",
        CPP_SPEC,
        &[
            ("calc.h", "int add(int a, int b);\n"),
            ("calc.cc", code),
            ("test/zero_test.cc", &zero),
        ],
        ("calc.cc", &code.replace("a - b", "a + b")),
        ("calc.cc", &code.replace("a - b", "a * b")),
        ("test/add_test.cc", &add),
        &["Calc.AddsTwo"],
        &["Calc.Zero"],
    );
    let out = case.run("ml-cpp");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let gold = case.record("ml-cpp", "gold");
    let wrong = case.record("ml-cpp", "wrong");
    assert_eq!(
        (gold["outcome"].as_str(), wrong["outcome"].as_str()),
        (Some("resolved"), Some("unresolved")),
        "gold {gold}\nwrong {wrong}\n{stderr}"
    );
    assert_eq!(
        wrong["statuses"]["Calc.AddsTwo"],
        json!("FAILED"),
        "{wrong}"
    );
}

// C the way jq is built and tested: autotools from Debian's packages, and
// automake's own test harness (`make check`), whose `PASS:`/`FAIL:` lines
// the jq parser reads.
const C_SPEC: &str = "repo: acme/ccalc\nversions:\n  \"*\":\n    apt_packages: [gcc, make, autoconf, automake]\n    install: \"autoreconf -fi && ./configure && make\"\n    eval_install: \"make\"\n    test_cmd: make check\n    log_parser: jq\n    test_directives: none\n";

// ARFLAGS `cr`: Debian's ar warns about automake's default `cru` on stderr,
// and a warning interleaved with a `PASS:` line would change its test name.
const CONFIGURE_AC: &str = "AC_INIT([ccalc], [0.1])\nAM_INIT_AUTOMAKE([foreign subdir-objects])\nAC_PROG_CC\nAC_PROG_RANLIB\nAC_SUBST([ARFLAGS], [cr])\nAC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n";

const MAKEFILE_AM: &str = "noinst_LIBRARIES = libcalc.a\nlibcalc_a_SOURCES = calc.c calc.h\ncheck_PROGRAMS = tests/zero tests/add\ntests_zero_LDADD = libcalc.a\ntests_add_LDADD = libcalc.a\nTESTS = $(check_PROGRAMS)\n";

#[test]
fn a_c_library_is_graded_with_automake_check() {
    if !docker_ready("a_c_library_is_graded_with_automake_check") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let code = "#include \"calc.h\"\n\nint add(int a, int b) { return a - b; }\n";
    let test = |body: &str| {
        format!("#include \"../calc.h\"\n\nint main(void) {{ return {body} ? 0 : 1; }}\n")
    };
    let zero = test("add(0, 0) == 0");
    let add = test("add(2, 3) == 5");
    let case = Case::new(
        "acme/ccalc",
        C_SPEC,
        &[
            ("configure.ac", CONFIGURE_AC),
            ("Makefile.am", MAKEFILE_AM),
            ("calc.h", "int add(int a, int b);\n"),
            ("calc.c", code),
            ("tests/zero.c", &zero),
        ],
        ("calc.c", &code.replace("a - b", "a + b")),
        ("calc.c", &code.replace("a - b", "a * b")),
        ("tests/add.c", &add),
        &["tests/add"],
        &["tests/zero"],
    );
    let out = case.run("ml-c");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let gold = case.record("ml-c", "gold");
    let wrong = case.record("ml-c", "wrong");
    assert_eq!(
        (gold["outcome"].as_str(), wrong["outcome"].as_str()),
        (Some("resolved"), Some("unresolved")),
        "gold {gold}\nwrong {wrong}\n{stderr}"
    );
    assert_eq!(wrong["statuses"]["tests/add"], json!("FAILED"), "{wrong}");
    assert_eq!(wrong["statuses"]["tests/zero"], json!("PASSED"), "{wrong}");
}

// Java 17 is bookworm's JDK (a Debian package in the toolchain image, whose
// trust store gets the --ca-cert bundle there); Maven is Debian's. The
// install runs the base's tests once, so that surefire's JUnit provider
// (resolved only when tests run) is in the local repository; the eval runs
// Maven offline, one `-Dtest=` command per class (the reference's maven
// parser pairs each with its BUILD line).
const JAVA_SPEC: &str = "repo: acme/javacalc\nversions:\n  \"*\":\n    toolchains: {java: \"17\"}\n    apt_packages: [maven]\n    install: \"(mvn -B -q test)\"\n    eval_install: \"\"\n    test_cmd: \"mvn test -B -o -Dtest=com.example.ZeroTest; mvn test -B -o -Dtest=com.example.AddTest\"\n    log_parser: maven\n    test_directives: none\n";

const POM: &str = r#"<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>com.example</groupId>
  <artifactId>calc</artifactId>
  <version>0.1.0</version>
  <properties>
    <maven.compiler.source>17</maven.compiler.source>
    <maven.compiler.target>17</maven.compiler.target>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>junit</groupId>
      <artifactId>junit</artifactId>
      <version>4.13.2</version>
      <scope>test</scope>
    </dependency>
  </dependencies>
</project>
"#;

#[test]
fn a_maven_project_is_graded_with_java_offline() {
    if !docker_ready("a_maven_project_is_graded_with_java_offline") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let code = "package com.example;\n\npublic class Calc {\n    public static int add(int a, int b) {\n        return a - b;\n    }\n}\n";
    let test = |class: &str, body: &str| {
        format!("package com.example;\n\nimport static org.junit.Assert.assertEquals;\n\nimport org.junit.Test;\n\npublic class {class} {{\n    @Test\n    public void check() {{\n        {body}\n    }}\n}}\n")
    };
    let zero = test("ZeroTest", "assertEquals(0, Calc.add(0, 0));");
    let add = test("AddTest", "assertEquals(5, Calc.add(2, 3));");
    let main = "src/main/java/com/example/Calc.java";
    let case = Case::new(
        "acme/javacalc",
        JAVA_SPEC,
        &[
            ("pom.xml", POM),
            (main, code),
            ("src/test/java/com/example/ZeroTest.java", &zero),
            (".gitignore", "/target\n"),
        ],
        (main, &code.replace("a - b", "a + b")),
        (main, &code.replace("a - b", "a * b")),
        ("src/test/java/com/example/AddTest.java", &add),
        &["com.example.AddTest"],
        &["com.example.ZeroTest"],
    );
    check(&case, "ml-java", "java", "17");
}
