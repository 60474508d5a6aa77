//! A spec with a conda environment file and a source tree, through the real
//! binary (`patchgrade run --backend docker`) on the real engine: the file is
//! read from the mirror at the environment setup commit and translated by
//! rule (a conda pin in pip syntax, a system library as its Debian package,
//! a skipped package left out, a name the spec pins taken from the pin, the
//! `pip:` section as it is), the source tree comes from a second mirrored
//! repository, a submodule is filled from a third at the commit the base
//! tree records, and tests inside the container check each of these.
//!
//! Without a daemon the test skips, printing why, unless
//! PATCHGRADE_REQUIRE_DOCKER=1, where it fails; it needs PyPI for the env
//! (PATCHGRADE_REQUIRE_PYPI likewise).

mod common;

use std::process::Command;

use common::widgets::*;
use common::*;

fn docker_ready() -> bool {
    let ok = Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    available("a Docker daemon", "PATCHGRADE_REQUIRE_DOCKER", ok)
}

const ENVIRONMENT_YML: &str = r#"# conda env create -f ci/environment.yml
name: widgets-dev
channels:
  - conda-forge
dependencies:
  - python=3.11
  - pip
  - six=1.16          # conda's fuzzy equality: six==1.16.*
  - iniconfig>=1      # the spec pins it: the pin wins
  - pkg-config        # a system tool: its Debian package
  - gtk4              # in the spec's conda_skip
  - pip:
      - packaging==23.1
"#;

const ENV_TESTS: &str = r#"import importlib.metadata as md
import os
import shutil
import unittest


class TestEnv(unittest.TestCase):
    def test_conda_pin_in_pip_syntax(self):
        self.assertTrue(md.version("six").startswith("1.16."), md.version("six"))

    def test_the_specs_pin_wins(self):
        self.assertEqual(md.version("iniconfig"), "2.0.0")

    def test_pip_section(self):
        self.assertEqual(md.version("packaging"), "23.1")

    def test_system_library_from_debian(self):
        self.assertIsNotNone(shutil.which("pkg-config"))

    def test_skipped_package_left_out(self):
        self.assertFalse(os.path.exists("/usr/share/doc/libgtk-4-1"))

    def test_source_tree_copied_by_pre_install(self):
        with open("/testbed/widgets/vendored.txt") as f:
            self.assertEqual(f.read(), "vendored 1.0\n")

    def test_submodule_filled_at_the_recorded_commit(self):
        with open("/testbed/helpers/helper.txt") as f:
            self.assertEqual(f.read(), "helpers v2\n")
"#;

const ENV_P2P: [&str; 7] = [
    "tests.test_env.TestEnv.test_submodule_filled_at_the_recorded_commit",
    "tests.test_env.TestEnv.test_conda_pin_in_pip_syntax",
    "tests.test_env.TestEnv.test_the_specs_pin_wins",
    "tests.test_env.TestEnv.test_pip_section",
    "tests.test_env.TestEnv.test_system_library_from_debian",
    "tests.test_env.TestEnv.test_skipped_package_left_out",
    "tests.test_env.TestEnv.test_source_tree_copied_by_pre_install",
];

#[test]
fn a_conda_environment_file_and_a_source_tree_build_the_env() {
    if !docker_ready() || !available("PyPI", "PATCHGRADE_REQUIRE_PYPI", pypi_reachable()) {
        return;
    }
    let w = Widgets::new(
        "",
        &[
            ("ci/environment.yml", ENVIRONMENT_YML.as_bytes()),
            ("tests/test_env.py", ENV_TESTS.as_bytes()),
        ],
    );
    // A submodule at `helpers`, recorded at the second of two commits of
    // acme/helpers (the first would fail the test).
    let helpers = FixtureRepo::new(&w.sb, "acme/helpers");
    helpers.commit(&[("helper.txt", Some("helpers v1\n".as_bytes()))], "v1");
    let recorded = helpers.commit(&[("helper.txt", Some("helpers v2\n".as_bytes()))], "v2");
    helpers.commit(&[("helper.txt", Some("helpers v3\n".as_bytes()))], "v3");
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(w.repo.repo.workdir().unwrap())
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{recorded},helpers"),
    ]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.invalid",
        "commit",
        "-q",
        "-m",
        "submodule",
    ]);
    let base = w.repo.head();
    let vendored = FixtureRepo::new(&w.sb, "acme/vendored");
    let source = vendored.commit(&[("data.txt", Some("vendored 1.0\n".as_bytes()))], "v1.0");
    w.sb.write(
        "specs/widgets.yaml",
        &format!(
            r#"repo: acme/widgets
versions:
  "*":
    python: "3.11"
    environment_yml: ci/environment.yml
    conda_skip: [gtk4]
    pip_packages: [iniconfig==2.0.0]
    submodules:
      helpers: acme/helpers
    sources:
      vendored-1.0: {{repo: acme/vendored, commit: {source}}}
    pre_install:
      - cp /opt/patchgrade/sources/vendored-1.0/data.txt /testbed/widgets/vendored.txt
    test_cmd: python3 -m unittest -v
    test_directives: none
    log_parser: unittest
"#
        ),
    );
    let mut p2p = vec![P2P];
    p2p.extend(ENV_P2P);
    w.sb.write(
        "dataset.jsonl",
        &jsonl(&[instance(
            "acme__widgets-1",
            "acme/widgets",
            &base,
            &w.gold,
            &w.test_patch,
            &[F2P],
            &p2p,
        )]),
    );
    let out = w.sb.run(
        &[
            docker_args("run", "gold", "conda"),
            vec!["--max-workers", "1"],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{out:?}");
    let rec = w.sb.record("conda", "gold", "acme__widgets-1");
    assert_eq!(rec["outcome"], "resolved", "{rec:#}");

    // What the env image installed, kept beside its build log.
    let env_dir = w.sb.path().join("logs/build_images/env");
    let envtxt = std::fs::read_dir(&env_dir)
        .unwrap_or_else(|e| panic!("{}: {e}", env_dir.display()))
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("environment.txt")).ok())
        .next()
        .expect("environment.txt beside the env build log");
    assert!(
        envtxt.starts_with(&format!("# translated from ci/environment.yml at {base}")),
        "{envtxt}"
    );
    let lines: Vec<&str> = envtxt.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines, ["six==1.16.*", "packaging==23.1"], "{envtxt}");
    for dropped in [
        "# dropped gtk4: listed in the spec's conda_skip",
        "# dropped iniconfig: pinned by the spec's pip_packages",
        "# dropped python: provided by the python image",
    ] {
        assert!(envtxt.contains(dropped), "{dropped} in {envtxt}");
    }

    // A source commit missing from the mirrors: the env cannot be built,
    // and the reason names the source and where to put it.
    w.sb.write(
        "specs/widgets.yaml",
        &std::fs::read_to_string(w.sb.path().join("specs/widgets.yaml"))
            .unwrap()
            .replace(&source, &"0".repeat(40)),
    );
    let out = w.sb.run(
        &[
            docker_args("run", "gold", "conda-missing"),
            vec!["--max-workers", "1"],
        ]
        .concat(),
    );
    let rec = w.sb.record("conda-missing", "gold", "acme__widgets-1");
    assert_eq!(
        rec["outcome"], "environment_build_failed",
        "{rec:#} {out:?}"
    );
    let reason = rec.to_string();
    assert!(
        reason.contains("source vendored-1.0") && reason.contains("acme__vendored"),
        "{reason}"
    );
}
