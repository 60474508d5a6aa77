//! Every Python from 3.6 to 3.11 in a Docker image, on the real engine: the
//! provider chain picks the interpreter (a suite's own python3 for 3.9 and
//! 3.11, a pyenv build copied into bookworm for 3.6, 3.7, 3.8 and 3.10), the
//! python image is built from it with the pinned pip, and a tiny package (a
//! repository made here) is installed into an instance image and its tests
//! run in a container without network.
//!
//! Without a daemon the tests skip, printing why, unless
//! PATCHGRADE_REQUIRE_DOCKER=1, where they fail; so does a missing
//! interpreter then. Building the python images needs PyPI (the pinned
//! tools); the instance installs and the tests run offline.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use common::available;
use patchgrade::backend::docker::images::plans::{self as image, ImagePlan, Root, TreeSource};
use patchgrade::backend::docker::images::python as pyimage;
use patchgrade::backend::docker::images::{bootstrap_image, Suite, BOOTSTRAP_SCRIPT};
use patchgrade::python::{self, HostSearch, PyVersion, PythonError};
use patchgrade::spec::Spec;

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

fn docker(args: &[&str]) -> std::process::Output {
    Command::new("docker")
        .args(args)
        .output()
        .expect("run docker")
}

fn inspect(name: &str, format: &str) -> Option<String> {
    let out = docker(&["image", "inspect", "--format", format, name]);
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn image_id(name: &str) -> Option<String> {
    inspect(name, "{{.Id}}")
}

fn image_size(name: &str) -> u64 {
    inspect(name, "{{.Size}}")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no size for {name}"))
}

/// The root of a suite as the backend finds it: its bootstrapped root or
/// `debian:{suite}-slim` in the engine, else bootstrapped here with
/// harness-scripts/bootstrap-base.sh (debootstrap) and imported.
fn root(suite: Suite) -> Root {
    for name in [
        bootstrap_image(suite),
        format!("debian:{}-slim", suite.name()),
    ] {
        if let Some(id) = image_id(&name) {
            return Root { name, id };
        }
    }
    let name = bootstrap_image(suite);
    let d = tempfile::tempdir().unwrap();
    let script = d.path().join("bootstrap-base.sh");
    std::fs::write(&script, BOOTSTRAP_SCRIPT).unwrap();
    let archive = d.path().join("root.tar");
    let started = Instant::now();
    let out = Command::new("bash")
        .arg(&script)
        .arg(suite.name())
        .arg(&archive)
        .output()
        .expect("run bash");
    assert!(
        out.status.success(),
        "bootstrapping {}: {}",
        suite.name(),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = docker(&["import", &archive.display().to_string(), &name]);
    assert!(out.status.success(), "docker import: {out:?}");
    eprintln!(
        "bootstrapped {name} in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    let id = image_id(&name).expect("imported root");
    Root { name, id }
}

/// The CA bundle the backend installs by default.
fn ca_bundle() -> Option<Vec<u8>> {
    ["SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE"]
        .iter()
        .filter_map(std::env::var_os)
        .map(std::path::PathBuf::from)
        .chain([std::path::PathBuf::from(
            "/etc/ssl/certs/ca-certificates.crt",
        )])
        .find(|p| p.is_file())
        .map(|p| std::fs::read(p).unwrap())
}

/// `docker build` of a plan's context, unless the image exists. Returns
/// the seconds the build took (None: it was there).
fn ensure_built(plan: &ImagePlan) -> Option<f64> {
    if image_id(&plan.name).is_some() {
        return None;
    }
    let started = Instant::now();
    let context = plan.context_tar().expect("context");
    let mut child = Command::new("docker")
        .args(["build", "--rm", "--force-rm", "-t", &plan.name])
        .args([
            "--label",
            &format!("patchgrade.tier={}", plan.tier.log_dir()),
        ])
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("docker build");
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&context));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().expect("send the context");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "building {} failed:\n{log}",
        plan.name
    );
    if let Some(line) = log.lines().find(|l| l.contains("patchgrade python:")) {
        eprintln!("{}: {line}", plan.name);
    }
    Some(started.elapsed().as_secs_f64())
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
const TINY: &str = "import sys\n\n\ndef add(a, b):\n    return a + b\n\n\ndef version():\n    return \"%d.%d\" % sys.version_info[:2]\n";
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

/// The tiny package as a tree in a bare repository (a mirror).
fn tiny_repo(dir: &Path) -> TreeSource {
    let repo = git2::Repository::init_bare(dir.join("acme__tiny.git")).unwrap();
    let blob = |s: &str| repo.blob(s.as_bytes()).unwrap();
    let mut pkg = repo.treebuilder(None).unwrap();
    pkg.insert("__init__.py", blob(TINY), 0o100644).unwrap();
    pkg.insert("_speed.c", blob(SPEED_C), 0o100644).unwrap();
    let pkg = pkg.write().unwrap();
    let mut tests = repo.treebuilder(None).unwrap();
    tests.insert("__init__.py", blob(""), 0o100644).unwrap();
    tests.insert("test_tiny.py", blob(TESTS), 0o100644).unwrap();
    let tests = tests.write().unwrap();
    let mut root = repo.treebuilder(None).unwrap();
    root.insert("setup.py", blob(SETUP_PY), 0o100644).unwrap();
    root.insert("tiny", pkg, 0o040000).unwrap();
    root.insert("tests", tests, 0o040000).unwrap();
    let tree = root.write().unwrap();
    TreeSource {
        repo: dir.join("acme__tiny.git"),
        tree,
    }
}

fn tiny_spec(version: &str) -> Spec {
    serde_yaml_ng::from_str(&format!(
        "python: \"{version}\"\n\
         install: python -m pip install --no-build-isolation --no-index -e .\n\
         test_cmd: python -m unittest -v\n\
         log_parser: unittest\n"
    ))
    .unwrap()
}

#[test]
fn every_python_from_3_6_to_3_11_builds_an_image_and_runs_a_package() {
    if !docker_ready("every_python_from_3_6_to_3_11_builds_an_image_and_runs_a_package") {
        return;
    }
    if !available(
        "PyPI (the python images install pinned pip, setuptools and wheel)",
        "PATCHGRADE_REQUIRE_PYPI",
        common::pypi_reachable(),
    ) {
        return;
    }
    let started = Instant::now();
    let search = HostSearch::from_env(vec![]);
    let mut interps = Vec::new();
    for v in ["3.6", "3.7", "3.8", "3.10", "3.9", "3.11"] {
        match python::resolve(v, &search) {
            Ok(i) => interps.push(i),
            Err(e @ PythonError::NotFound { .. }) if !required() => {
                eprintln!("SKIPPED Python {v}: {e}")
            }
            Err(e) => panic!("Python {v}: {e}"),
        }
    }
    // The chain: a suite's python3 where one ships it, else a host build.
    for i in &interps {
        let by_suite = python::suite_shipping(i.version).is_some();
        assert_eq!(i.is_copied(), !by_suite, "{i:?}");
        if i.is_copied() {
            assert_eq!(i.suite, Suite::Bookworm);
        }
    }

    let ca = ca_bundle();
    let scratch = tempfile::tempdir().unwrap();
    let tree = tiny_repo(scratch.path());
    let mut report = Vec::new();
    let mut instances = RemoveOnDrop(Vec::new());
    for interp in &interps {
        let root = root(interp.suite);
        let base = image::base_plan(interp.suite, &root, ca.as_deref());
        let base_secs = ensure_built(&base);
        // What every evaluation pays to name the image: a stat walk.
        let naming = Instant::now();
        let manifest = pyimage::manifest(interp).unwrap();
        let name = pyimage::python_image_name(interp, &base.name, manifest.as_ref());
        let naming = naming.elapsed().as_secs_f64() * 1000.0;
        let py_secs = if image_id(&name).is_some() {
            None
        } else {
            let plan = pyimage::python_plan(interp, &base.name).unwrap();
            assert_eq!(plan.name, name);
            ensure_built(&plan)
        };
        let labels = inspect(&name, "{{json .Config.Labels}}").unwrap();
        let labels: serde_json::Value = serde_json::from_str(&labels).unwrap();
        assert_eq!(
            labels["patchgrade.python.provider"],
            interp.provider.name(),
            "{labels}"
        );
        assert_eq!(labels["patchgrade.python.pip"], interp.tools.pip);

        // The tiny package installed offline into an instance image.
        let v = interp.version.to_string();
        let spec = tiny_spec(&v);
        let id = format!("acme__tiny-py{v}");
        let inst = image::instance_plan(&name, &id, &spec, tree.clone());
        let inst_secs = ensure_built(&inst).unwrap_or(0.0);
        instances.0.push(inst.name.clone());
        let run = Instant::now();
        let out = docker(&[
            "run",
            "--rm",
            "--network",
            "none",
            "-e",
            &format!("WANT={v}"),
            &inst.name,
            "bash",
            "-c",
            "source /opt/venv/bin/activate && python -m pip --version && python -m unittest -v 2>&1",
        ]);
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("--- Python {v} ({}):\n{log}", interp.provider.name());
        assert!(out.status.success(), "tests failed on Python {v}:\n{log}");
        assert!(
            log.contains("Ran 4 tests") && log.contains("\nOK"),
            "Python {v}:\n{log}"
        );
        assert!(
            log.contains(&format!("pip {} ", interp.tools.pip)),
            "Python {v}: wrong pip\n{log}"
        );
        let layer = image_size(&name) - image_size(&base.name);
        report.push(format!(
            "Python {v:5} {:13} {:8} base {:>6} python image {:>6} (+{:>4} MiB; copied {:>4} MiB, {:>5} entries, named in {:.0} ms) instance {:4.1}s run {:4.1}s",
            interp.provider.name(),
            interp.suite.name(),
            secs(base_secs),
            secs(py_secs),
            layer >> 20,
            manifest.as_ref().map(|m| m.size() >> 20).unwrap_or(0),
            manifest.as_ref().map(|m| m.entries()).unwrap_or(0),
            naming,
            inst_secs,
            run.elapsed().as_secs_f64(),
        ));
    }
    eprintln!(
        "python images ({} interpreters) in {:.0}s:\n{}",
        interps.len(),
        started.elapsed().as_secs_f64(),
        report.join("\n")
    );
    assert!(!interps.is_empty(), "no interpreter was found at all");
}

/// Images removed at the end, a failed assertion included.
struct RemoveOnDrop(Vec<String>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = docker(&["rmi", name]);
        }
    }
}

fn secs(s: Option<f64>) -> String {
    s.map(|s| format!("{s:.0}s"))
        .unwrap_or_else(|| "reused".into())
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
