//! Every Python from 3.6 to 3.11 builds an env image and runs a tiny
//! repository's tests, through the real binary (`patchgrade run --backend
//! docker`) on the real engine: the provider chain picks each interpreter
//! (bookworm's python3 for 3.11, a host build copied into bookworm for the
//! others, pyenv's on this machine kind, bullseye's python3 for 3.9 only
//! on a host without a 3.9 build), the python image
//! gets the venv with pinned pip, the env and instance images are built on
//! it, the package (with a C extension) is installed offline and gold
//! resolves. A spec saying 3.5 runs on 3.6 as the listed deviation.
//!
//! Without a daemon the test skips, printing why, unless
//! PATCHGRADE_REQUIRE_DOCKER=1, where it fails; so does a missing
//! interpreter then. Building the python images needs PyPI (the pinned
//! tools); the installs and the tests run offline.

mod common;

use patchgrade::exit;
use std::process::Command;
use std::time::Instant;

use common::*;
use patchgrade::python::{self, HostSearch, Provider, PyVersion, PythonDir, PythonError};

fn required() -> bool {
    std::env::var("PATCHGRADE_REQUIRE_DOCKER").as_deref() == Ok("1")
}

/// Whether the engine answers; panics instead of skipping when required.
fn docker_ready(test: &str) -> bool {
    let out = Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .output();
    let why = match out {
        Ok(o) if o.status.success() => return true,
        Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
        Err(e) => format!("cannot run docker: {e}"),
    };
    if required() {
        panic!("{test}: PATCHGRADE_REQUIRE_DOCKER=1 but no Docker daemon answers: {why}");
    }
    eprintln!("SKIPPED {test}: no Docker daemon answers ({why}); set PATCHGRADE_REQUIRE_DOCKER=1 to make this a failure");
    false
}

/// The image labels of `name` (inherited from the python image).
fn labels(name: &str) -> serde_json::Value {
    let out = Command::new("docker")
        .args([
            "image",
            "inspect",
            "--format",
            "{{json .Config.Labels}}",
            name,
        ])
        .output()
        .expect("docker");
    assert!(out.status.success(), "inspect {name}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

// A C extension too: the copied build's headers and sysconfig must compile
// one (astropy, scikit-learn and matplotlib build theirs at setup).
const SETUP_PY: &str = r#"from setuptools import Extension, setup

setup(
    name="tiny",
    version="1.0",
    packages=["tiny"],
    ext_modules=[Extension("tiny._speed", ["tiny/_speed.c"])],
)
"#;
const SPEED_C: &str = r#"#include <Python.h>

static PyObject *twice(PyObject *self, PyObject *arg) {
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred()) return NULL;
    return PyLong_FromLong(2 * v);
}

static PyMethodDef methods[] = {{"twice", twice, METH_O, "2 * x"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef speed = {PyModuleDef_HEAD_INIT, "_speed", NULL, -1, methods};

PyMODINIT_FUNC PyInit__speed(void) { return PyModule_Create(&speed); }
"#;
const TESTS: &str = r#"import os
import unittest

import tiny


class TestTiny(unittest.TestCase):
    def test_add(self):
        self.assertEqual(tiny.add(2, 3), 5)

    def test_interpreter(self):
        self.assertEqual(tiny.version(), os.environ["WANT"])
        # The editable install points at the tree.
        self.assertTrue(tiny.__file__.startswith("/testbed/"), tiny.__file__)

    def test_c_extension(self):
        from tiny import _speed
        self.assertEqual(_speed.twice(21), 42)
        self.assertTrue(_speed.__file__.startswith("/testbed/tiny/"), _speed.__file__)

    def test_runtime_modules(self):
        import bz2, ctypes, lzma, sqlite3, ssl, zlib
        self.assertEqual(zlib.decompress(zlib.compress(b"x" * 10)), b"x" * 10)
        self.assertEqual(bz2.decompress(bz2.compress(b"y")), b"y")
        self.assertEqual(lzma.decompress(lzma.compress(b"z")), b"z")
        self.assertEqual(sqlite3.connect(":memory:").execute("select 1").fetchone(), (1,))
        self.assertTrue(ssl.create_default_context().cert_store_stats()["x509_ca"] > 0)
        self.assertEqual(ctypes.c_int(7).value, 7)
"#;

const TINY_BUGGY: &str = "import sys\n\n\ndef add(a, b):\n    return a - b\n\n\ndef version():\n    return \"%d.%d\" % sys.version_info[:2]\n";
const ADD_TEST: &str = "import unittest\n\nimport tiny\n\n\nclass TestAdd(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(tiny.add(2, 3), 5)\n";
const F2P: &str = "tests.test_add.TestAdd.test_add";
const P2P: [&str; 3] = [
    "tests.test_tiny.TestTiny.test_interpreter",
    "tests.test_tiny.TestTiny.test_c_extension",
    "tests.test_tiny.TestTiny.test_runtime_modules",
];

/// The spec: one version per Python, each its own `python`; `WANT` is the
/// version the tests expect to run on.
fn tiny_spec(versions: &[(&str, PyVersion)]) -> String {
    let mut s = String::from(
        "repo: acme/tiny\ndefaults:\n  install: python -m pip install --no-build-isolation --no-index -e .\n  \
         test_cmd: python -m unittest -v\n  test_directives: none\n  log_parser: unittest\nversions:\n",
    );
    for (v, runs_on) in versions {
        s.push_str(&format!(
            "  \"{v}\":\n    python: \"{v}\"\n    env:\n      WANT: \"{runs_on}\"\n"
        ));
    }
    s
}

#[test]
fn every_python_from_3_6_to_3_11_builds_an_env_image_and_resolves() {
    let test = "every_python_from_3_6_to_3_11_builds_an_env_image_and_resolves";
    if !docker_ready(test) {
        return;
    }
    let mut dir_args: Vec<String> = Vec::new();
    if !available(
        "PyPI (the python images install pinned pip, setuptools and wheel)",
        "PATCHGRADE_REQUIRE_PYPI",
        common::pypi_reachable(),
    ) {
        return;
    }
    // What the chain will find here, to check the records against. 3.7 is
    // given as --python-dir (its bin/python3.7) when the host has a build,
    // so that the flag is used too.
    let mut python_dirs = Vec::new();
    if let Ok(i) = python::resolve("3.7", &HostSearch::from_env(vec![])) {
        if let Some(prefix) = &i.host_prefix {
            let arg = format!("3.7={}", prefix.join("bin/python3.7").display());
            python_dirs.push(PythonDir::parse(&arg).unwrap());
            dir_args.push(arg);
        }
    }
    let search = HostSearch::from_env(python_dirs);
    let mut interps = Vec::new();
    for v in ["3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.5"] {
        match python::resolve(v, &search) {
            Ok(i) => interps.push((v, i)),
            Err(e @ PythonError::NotFound { .. }) if !required() => {
                eprintln!("SKIPPED Python {v}: {e}")
            }
            Err(e) => panic!("Python {v}: {e}"),
        }
    }
    assert!(!interps.is_empty(), "no interpreter was found at all");

    let sb = Sandbox::new();
    let repo = FixtureRepo::new(&sb, "acme/tiny");
    repo.commit(
        &[
            ("setup.py", Some(SETUP_PY.as_bytes())),
            ("tiny/__init__.py", Some(TINY_BUGGY.as_bytes())),
            ("tiny/_speed.c", Some(SPEED_C.as_bytes())),
            ("tests/__init__.py", Some(b"")),
            ("tests/test_tiny.py", Some(TESTS.as_bytes())),
        ],
        "tiny",
    );
    let base = repo.head();
    let fixed = TINY_BUGGY.replace("a - b", "a + b");
    let gold = repo.diff_of(&[("tiny/__init__.py", Some(fixed.as_bytes()))], false);
    let test_patch = repo.diff_of(&[("tests/test_add.py", Some(ADD_TEST.as_bytes()))], false);
    let versions: Vec<(&str, PyVersion)> = interps.iter().map(|(v, i)| (*v, i.version)).collect();
    sb.write("specs/tiny.yaml", &tiny_spec(&versions));
    let id = |v: &str| format!("acme__tiny-py{}", v.replace('.', ""));
    let rows: Vec<_> = interps
        .iter()
        .map(|(v, _)| {
            let mut row = instance(&id(v), "acme/tiny", &base, &gold, &test_patch, &[F2P], &P2P);
            row["version"] = (*v).into();
            row
        })
        .collect();
    sb.write("dataset.jsonl", &jsonl(&rows));

    let started = Instant::now();
    let mut args = vec![
        "run",
        "--dataset",
        "dataset.jsonl",
        "--predictions",
        "gold",
        "--run-id",
        "pythons",
        "--backend",
        "docker",
        "--specs",
        "specs",
        "--mirror-dir",
        "mirrors",
        "--max-workers",
        "2",
        "--base-image",
        "none",
        // Instance images kept for a look at their labels, removed below.
        "--cache-level",
        "instance",
        "-v",
    ];
    for a in &dir_args {
        args.extend(["--python-dir", a.as_str()]);
    }
    let out = sb.run(&args);
    let secs = started.elapsed().as_secs_f64();
    let mut images = RemoveOnDrop(Vec::new());
    assert_eq!(out.status.code(), Some(exit::OK), "patchgrade run failed");

    let records: Vec<_> = interps
        .iter()
        .map(|(v, _)| sb.record("pythons", "gold", &id(v)))
        .collect();
    // Each record's image first, so that all are removed whatever fails.
    for rec in &records {
        let image = rec["environment"]
            .as_str()
            .and_then(|e| e.strip_prefix("image "))
            .and_then(|s| s.split_whitespace().next());
        images.0.extend(image.map(String::from));
    }
    let mut report = Vec::new();
    for ((v, interp), rec) in interps.iter().zip(&records) {
        assert_eq!(rec["outcome"], "resolved", "Python {v}: {rec:#}");
        // The record names the interpreter: its release (or version for a
        // suite's python3), its provider and where it came from.
        let env = rec["environment"].as_str().unwrap();
        let shown = interp
            .release
            .clone()
            .unwrap_or_else(|| interp.version.to_string());
        assert!(
            env.contains(&format!("python {shown} ({}", interp.provider.name())),
            "Python {v}: {env}"
        );
        match &interp.host_prefix {
            Some(p) => {
                assert!(env.contains(&p.display().to_string()), "{env}");
                assert_ne!(interp.provider, Provider::Suite);
            }
            None => assert!(env.contains(interp.suite.name()), "{env}"),
        }
        if interp.requested != interp.version {
            assert!(env.contains("spec says 3.5, runs on 3.6"), "{env}");
        }
        // The instance image (kept by --cache-level instance, removed at
        // the end) carries the python image's labels.
        let image = env
            .strip_prefix("image ")
            .and_then(|s| s.split_whitespace().next())
            .unwrap_or_else(|| panic!("no image in {env}"));
        let l = labels(image);
        assert_eq!(
            l["patchgrade.python.version"],
            interp.version.to_string(),
            "{l}"
        );
        assert_eq!(
            l["patchgrade.python.requested"],
            interp.requested.to_string(),
            "{l}"
        );
        assert_eq!(
            l["patchgrade.python.provider"],
            interp.provider.name(),
            "{l}"
        );
        assert_eq!(l["patchgrade.python.pip"], interp.tools.pip, "{l}");
        report.push(format!("{v:5} {env}"));
    }
    // run.json names every interpreter the run's images got, and records
    // the --python-dir given, so that audit --rerun and select reuse it.
    let meta_path = sb.path().join("logs/run_evaluation/pythons/run.json");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    let recorded: Vec<&str> = meta["pythons"]
        .as_array()
        .unwrap_or_else(|| panic!("no pythons in {meta}"))
        .iter()
        .map(|p| p["version"].as_str().unwrap())
        .collect();
    for (v, interp) in &interps {
        assert!(
            recorded.contains(&interp.version.to_string().as_str()),
            "Python {v} not in run.json's {recorded:?}"
        );
    }
    let dirs = meta["setup"]["docker"]["python_dirs"].as_array();
    for a in &dir_args {
        let version = a.split('=').next().unwrap();
        assert!(
            dirs.is_some_and(|d| d
                .iter()
                .any(|x| x.as_str().unwrap().starts_with(&format!("{version}=")))),
            "--python-dir {a} not recorded: {meta}"
        );
    }
    eprintln!(
        "{} interpreters through patchgrade run in {secs:.0}s:\n{}",
        interps.len(),
        report.join("\n")
    );
}

/// A bad `--python-dir` is bad input: exit 2, naming the argument and why,
/// before anything runs.
#[test]
fn a_bad_python_dir_is_refused_with_the_reason() {
    let sb = Sandbox::new();
    let not_a_build = sb.path().join("empty");
    std::fs::create_dir_all(not_a_build.join("bin")).unwrap();
    for (arg, why) in [
        ("3.6".to_string(), "expected X.Y=PATH"),
        (format!("three={}", not_a_build.display()), "MAJOR.MINOR"),
        (
            format!("3.6={}", sb.path().join("absent").display()),
            "absent",
        ),
        (format!("3.6={}", not_a_build.display()), "python3.6"),
    ] {
        let out = sb.run(&[
            "run",
            "--dataset",
            "none.jsonl",
            "--predictions",
            "gold",
            "--run-id",
            "x",
            "--python-dir",
            &arg,
        ]);
        assert_eq!(out.status.code(), Some(exit::BAD_INPUT), "{arg}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--python-dir") && err.contains(why),
            "{arg}: {err}"
        );
    }
}

/// Images removed at the end, a failed assertion included.
struct RemoveOnDrop(Vec<String>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = Command::new("docker").args(["rmi", name]).output();
        }
    }
}

/// The pins of `python::tools_for` are the rule evaluated on PyPI: each
/// tool's newest release whose Requires-Python admits the version, capped.
#[test]
fn pinned_tools_are_the_last_releases_for_each_python() {
    if !available("PyPI", "PATCHGRADE_REQUIRE_PYPI", common::pypi_reachable()) {
        return;
    }
    let key = |s: &str| -> Vec<u32> { s.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    for v in ["3.6", "3.7", "3.8", "3.9", "3.13"] {
        let tools = python::tools_for(PyVersion::parse(v).unwrap()).unwrap();
        for (tool, pin, cap) in [
            ("pip", tools.pip, python::TOOLS_CAP.pip),
            ("setuptools", tools.setuptools, python::TOOLS_CAP.setuptools),
            ("wheel", tools.wheel, python::TOOLS_CAP.wheel),
        ] {
            let out = Command::new("python3")
                .args(["-m", "pip", "index", "versions", tool])
                .args(["--python-version", v, "--only-binary=:all:"])
                .args(["--disable-pip-version-check", "--timeout", "20"])
                .env_remove("PIP_FIND_LINKS")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let newest = text
                .lines()
                .next()
                .and_then(|l| l.split_once('(')?.1.split_once(')').map(|x| x.0))
                .unwrap_or_else(|| panic!("pip index versions {tool} for {v}: {out:?}"));
            let expected = if key(newest) < key(cap) { newest } else { cap };
            assert_eq!(
                pin, expected,
                "{tool} for Python {v} (newest there: {newest})"
            );
        }
    }
}
