//! Unit tests of `review::lint` (a file of their own: lint.rs stays short).

use super::*;
use crate::review::lines::parse_diff;

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/review")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn brief(f: &[LintFinding]) -> Vec<(String, usize, usize, String)> {
    f.iter()
        .map(|x| (x.file.clone(), x.line, x.col, x.rule.clone()))
        .collect()
}

// The recorded outputs are of tests/fixtures/review/linted.py, linted as
// pkg/mod.py in /tmp/lintrec by ruff 0.17.6, flake8 7.3.0, pylint 3.3.9.

#[test]
fn reads_recorded_ruff_json() {
    let f = parse_ruff(&fixture("ruff-0.17.6.json"), Path::new("/tmp/lintrec")).unwrap();
    assert_eq!(
        brief(&f),
        vec![
            ("pkg/mod.py".into(), 1, 8, "F401".into()),
            ("pkg/mod.py".into(), 6, 5, "F841".into()),
            ("pkg/mod.py".into(), 9, 5, "F841".into()),
        ]
    );
    assert_eq!(f[0].message, "`os` imported but unused");
    assert!(parse_ruff("[{]", Path::new("/")).is_err());
    assert!(parse_ruff("[]", Path::new("/")).unwrap().is_empty());
}

#[test]
fn reads_recorded_flake8_text() {
    let f = parse_flake8(&fixture("flake8-7.3.0.txt"), Path::new("/tmp/lintrec")).unwrap();
    assert_eq!(
        brief(&f),
        vec![
            ("pkg/mod.py".into(), 1, 1, "F401".into()),
            ("pkg/mod.py".into(), 6, 5, "F841".into()),
            ("pkg/mod.py".into(), 7, 10, "E711".into()),
            ("pkg/mod.py".into(), 9, 5, "F841".into()),
            ("pkg/mod.py".into(), 9, 5, "E741".into()),
        ]
    );
    assert_eq!(
        f[2].message,
        "comparison to None should be 'if cond is None:'"
    );
    // A path with a colon, and a bad line named by number.
    let f = parse_flake8("./a:b.py:3:7: W291 trailing whitespace\n", Path::new(".")).unwrap();
    assert_eq!(brief(&f), vec![("a:b.py".into(), 3, 7, "W291".into())]);
    let e = parse_flake8("a.py:1:1: F401 x\nnot a finding\n", Path::new(".")).unwrap_err();
    assert!(e.to_string().contains("line 2"), "{e}");
}

#[test]
fn reads_recorded_pylint_json() {
    let f = parse_pylint(&fixture("pylint-3.3.9.json"), Path::new("/tmp/lintrec")).unwrap();
    assert_eq!(f.len(), 8);
    assert_eq!(
        brief(&f[2..4]),
        vec![
            ("pkg/mod.py".into(), 7, 8, "C0121".into()),
            ("pkg/mod.py".into(), 6, 5, "W0612".into()),
        ]
    );
    assert!(f[7].message.ends_with("(unused-import)"));
}

fn finding(file: &str, line: usize, rule: &str) -> LintFinding {
    LintFinding {
        tool: Tool::Ruff,
        rule: rule.into(),
        file: file.into(),
        line,
        col: 1,
        message: String::new(),
    }
}

#[test]
fn delta_blames_only_what_the_patch_wrote() {
    // Three lines inserted at the top; a changed line at base 9.
    let p = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,6 @@\n import os\n+import sys\n+\n+X = 1\n \n def f():\n@@ -8,3 +11,4 @@ def f():\n     a = 1\n-    b = 2\n+    b = 3\n+    c = 4\n     return a\n";
    let files = parse_diff(p).unwrap();
    let base = vec![
        finding("m.py", 1, "F401"), // import os, still unused
        finding("m.py", 9, "F841"), // b, changed line, still unused
        finding("m.py", 8, "E501"), // fixed by... nothing: line kept, finding gone
        finding("other.py", 3, "F401"),
    ];
    let patched = vec![
        finding("m.py", 1, "F401"),
        finding("m.py", 2, "F401"),  // import sys: new
        finding("m.py", 12, "F841"), // b: pairs with base 9, kept
        finding("m.py", 13, "F841"), // c: new, same rule, same file
        finding("m.py", 14, "F821"), // unchanged line, new rule: induced
        finding("other.py", 3, "F401"),
    ];
    let d = delta(&base, &patched, &files);
    assert_eq!(
        brief(&d.new),
        vec![
            ("m.py".into(), 2, 1, "F401".into()),
            ("m.py".into(), 13, 1, "F841".into())
        ]
    );
    assert_eq!(
        brief(&d.induced),
        vec![("m.py".into(), 14, 1, "F821".into())]
    );
    assert_eq!(brief(&d.fixed), vec![("m.py".into(), 8, 1, "E501".into())]);
    assert_eq!(d.kept, 3);
    // Order of the inputs does not matter.
    let mut rp = patched.clone();
    rp.reverse();
    assert_eq!(delta(&base, &rp, &files), d);
}

#[test]
fn the_fallback_reads_no_configuration_and_says_why() {
    let a = ruff_isolated_args(&["m.py"]);
    assert_eq!(a[..2], ["check".to_string(), "--isolated".to_string()]);
    assert!(a.windows(2).any(|w| w == ["--select", DEFAULT_SELECT]));
    assert_eq!(a.last().map(String::as_str), Some("m.py"));
    // ruff 0.17.6's message for a pyproject.toml with `show-source`.
    let stderr = "ruff failed\n  Cause: Failed to parse /testbed/pyproject.toml\n  Cause: TOML parse error at line 1, column 1\n  |\n1 | [tool.ruff]\n  | ^^^^^^^^^^^\nunknown field `show-source`\n";
    assert_eq!(
        fallback_note(Some(2), stderr),
        format!("ruff rejected the project's configuration (exit 2: ruff failed; Cause: Failed to parse /testbed/pyproject.toml; Cause: TOML parse error at line 1, column 1; unknown field `show-source`); linted with --isolated and the default selection ({DEFAULT_SELECT})")
    );
}

#[test]
fn configured_linters_are_found_from_the_projects_files() {
    let d = tempfile::tempdir().unwrap();
    assert!(configured(d.path()).is_empty());
    assert!(!ruff_configured(d.path()));
    assert!(ruff_check_args(&["a.py"], false).contains(&DEFAULT_SELECT.to_string()));
    std::fs::write(
        d.path().join("pyproject.toml"),
        "[project]\nname = \"x\"\n[tool.ruff.lint]\nselect = [\"E\"]\n",
    )
    .unwrap();
    assert!(ruff_configured(d.path()));
    assert!(!ruff_check_args(&["a.py"], true)
        .iter()
        .any(|a| a == "--select"));
    std::fs::write(
        d.path().join("setup.cfg"),
        "[metadata]\nname = x\n\n[flake8]\nmax-line-length = 100\n",
    )
    .unwrap();
    assert_eq!(configured(d.path()), vec![Tool::Flake8]);
    std::fs::write(
        d.path().join("pyproject.toml"),
        "[tool.pylint.messages_control]\ndisable = [\"C0114\"]\n",
    )
    .unwrap();
    assert_eq!(configured(d.path()), vec![Tool::Flake8, Tool::Pylint]);
    assert_eq!(flake8_args(&["a.py"]), vec!["--exit-zero", "a.py"]);
    assert_eq!(pylint_args(&["a.py"])[0], "--output-format=json");
}

#[test]
fn two_findings_of_a_rule_on_one_line_count() {
    let p = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = a + b\n+x = a + b + c\n";
    let files = parse_diff(p).unwrap();
    let base = vec![finding("m.py", 1, "F821")];
    let patched = vec![finding("m.py", 1, "F821"), finding("m.py", 1, "F821")];
    let d = delta(&base, &patched, &files);
    assert_eq!((d.new.len(), d.kept), (1, 1));
}

#[test]
fn renamed_and_deleted_files() {
    let p = "diff --git a/old.py b/new.py\nsimilarity index 90%\nrename from old.py\nrename to new.py\n--- a/old.py\n+++ b/new.py\n@@ -1,2 +1,3 @@\n a\n+b\n c\ndiff --git a/gone.py b/gone.py\ndeleted file mode 100644\n--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-q\n";
    let files = parse_diff(p).unwrap();
    let base = vec![finding("old.py", 2, "E711"), finding("gone.py", 1, "F401")];
    let patched = vec![finding("new.py", 3, "E711"), finding("new.py", 2, "E711")];
    let d = delta(&base, &patched, &files);
    assert_eq!(brief(&d.new), vec![("new.py".into(), 2, 1, "E711".into())]);
    assert_eq!(
        brief(&d.fixed),
        vec![("gone.py".into(), 1, 1, "F401".into())]
    );
    assert_eq!(d.kept, 1);
}
