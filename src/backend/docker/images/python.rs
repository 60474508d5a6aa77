//! The python image: a base image plus the interpreter an [`Interpreter`]
//! names and a venv at [`VENV`] with its pinned tools
//! (`harness-scripts/docker/python.Dockerfile`, `setup_python.sh`). Pure
//! code: it reads the host build to make the build context, and never talks
//! to the engine.
//!
//! A copied build travels as `python.tar` in the context (`ADD` unpacks it
//! at `/`), so symlinks (`bin/python3`, `libpythonX.Y.so`) and modes are
//! kept. Left out: site-packages (pyenv's own pip and whatever was installed
//! on the host), the standard library's test suites, `__pycache__` folders
//! (compiled once in the image instead) and the static libpython (the image
//! links against the shared one).

use std::path::{Component, Path};

pub use super::hostfiles::Manifest;
use super::lines::label_lines;
use super::plans::{ContextFile, ImagePlan};
use super::{arch, tag_of, Tier, VENV};
use crate::python::{Interpreter, PythonError};
use crate::script::quote;

const PYTHON_DOCKERFILE: &str =
    include_str!("../../../../harness-scripts/docker/python.Dockerfile");
const SETUP_PYTHON: &str = include_str!("../../../../harness-scripts/docker/setup_python.sh");

/// Bookworm packages with the shared libraries a CPython built on bookworm
/// needs at run time (readelf -d of libpython and lib-dynload/*.so of
/// pyenv's 3.6–3.13 builds), Tk aside.
pub const RUNTIME_PACKAGES: [&str; 13] = [
    "libssl3",
    "libffi8",
    "libsqlite3-0",
    "zlib1g",
    "libbz2-1.0",
    "liblzma5",
    "libreadline8",
    "libncursesw6",
    "libtinfo6",
    "libuuid1",
    "libtirpc3",
    "libnsl2",
    "libcrypt1",
];

/// What of `lib/pythonX.Y/test/` stays: what other projects' tests import
/// (`test.support`), as Debian's libpython3-stdlib keeps it.
const TEST_KEPT: [&str; 4] = ["__init__.py", "support", "libregrtest", "regrtest.py"];

/// Whether `rel` (a path under the build's prefix) goes into the image.
/// A folder for which this is false is skipped with everything under it.
pub fn keep(rel: &Path, exe_name: &str) -> bool {
    let parts: Vec<&str> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect();
    if parts.contains(&"__pycache__") {
        return false;
    }
    let stdlib = match parts.as_slice() {
        ["lib", lib, rest @ ..] if *lib == exe_name => rest,
        _ => return true,
    };
    match stdlib {
        ["site-packages", _, ..] => false,
        ["test", name, ..] => TEST_KEPT.contains(name),
        [config, file] if config.starts_with("config-") => !file.ends_with(".a"),
        [_, rest @ ..] => !rest
            .iter()
            .any(|p| matches!(*p, "test" | "tests" | "idle_test")),
        [] => true,
    }
}

/// The image setup script for `interp`.
pub fn setup_python_script(interp: &Interpreter) -> String {
    let exe = interp.executable.display().to_string();
    let prefix = interp
        .host_prefix
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let apt: Vec<String> = RUNTIME_PACKAGES.iter().map(|p| quote(p)).collect();
    let tools: Vec<String> = interp
        .tools
        .requirements()
        .iter()
        .map(|t| quote(t))
        .collect();
    SETUP_PYTHON
        .replace("{{python}}", &quote(&exe))
        .replace("{{version}}", &quote(&interp.version.to_string()))
        .replace("{{copied}}", if interp.is_copied() { "1" } else { "0" })
        .replace("{{prefix}}", &quote(&prefix))
        .replace("{{apt_packages}}", &apt.join(" "))
        .replace("{{venv}}", VENV)
        .replace("{{tools}}", &tools.join(" "))
}

/// The python image's Dockerfile on `base`.
pub fn python_dockerfile(interp: &Interpreter, base: &str) -> String {
    let add = if interp.is_copied() {
        "ADD python.tar /".to_string()
    } else {
        format!("# the Debian suite's own {}", interp.executable.display())
    };
    PYTHON_DOCKERFILE
        .replace("{{base}}", base)
        .replace("{{add_interpreter}}", &add)
        .replace("{{labels}}", &label_lines(&interp.labels()))
}

/// The host build's file list, for a copied interpreter.
pub fn manifest(interp: &Interpreter) -> Result<Option<Manifest>, PythonError> {
    interp
        .host_prefix
        .as_ref()
        .map(|p| {
            let exe = interp.version.exe_name();
            Manifest::walk(p, &|rel: &Path| keep(rel, &exe))
                .map_err(|(path, source)| PythonError::Io { path, source })
        })
        .transpose()
}

/// The python image's name (`patchgrade.base.py3.6.<arch>.bookworm:<tag>`),
/// the tag a hash of the base, the Dockerfile, the script and the build's
/// file list: cheap (stat only), so it can be asked before every build.
pub fn python_image_name(interp: &Interpreter, base: &str, manifest: Option<&Manifest>) -> String {
    let (dockerfile, script) = (python_dockerfile(interp, base), setup_python_script(interp));
    let files = manifest.map(Manifest::fingerprint).unwrap_or_default();
    // Addressed like every plan, but by the build's file list (stat only)
    // instead of its bytes, so naming it never reads the build.
    let tag = tag_of(&[
        base.as_bytes(),
        dockerfile.as_bytes(),
        script.as_bytes(),
        &files,
    ]);
    format!(
        "patchgrade.base.py{}.{}.{}:{tag}",
        interp.version,
        arch(),
        interp.suite.name(),
    )
}

/// Everything needed to build the python image of `interp` on `base` (the
/// base image of `interp.suite`), `manifest` its host build's file list
/// ([`manifest`]). Reads the whole build for a copied one.
pub fn python_plan(
    interp: &Interpreter,
    base: &str,
    manifest: Option<&Manifest>,
) -> Result<ImagePlan, PythonError> {
    let mut files = vec![ContextFile {
        path: "setup_python.sh".into(),
        data: setup_python_script(interp).into_bytes(),
        mode: 0o644,
    }];
    if let Some(m) = manifest {
        files.push(ContextFile {
            path: "python.tar".into(),
            data: m
                .tar()
                .map_err(|(path, source)| PythonError::Io { path, source })?,
            mode: 0o644,
        });
    }
    Ok(ImagePlan {
        tier: Tier::Base,
        name: python_image_name(interp, base, manifest),
        dockerfile: python_dockerfile(interp, base),
        files,
        trees: Vec::new(),
        blobs: Vec::new(),
        hosts: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::{resolve, HostSearch};
    use std::collections::BTreeMap;

    #[test]
    fn what_of_a_build_goes_into_the_image() {
        let k = |p: &str| keep(Path::new(p), "python3.6");
        for yes in [
            "bin/python3.6",
            "lib/libpython3.6m.so.1.0",
            "lib/python3.6/os.py",
            "lib/python3.6/site-packages",
            "lib/python3.6/test",
            "lib/python3.6/test/__init__.py",
            "lib/python3.6/test/support/__init__.py",
            "lib/python3.6/ensurepip/_bundled/pip-18.1-py2.py3-none-any.whl",
            "lib/python3.6/config-3.6m-x86_64-linux-gnu/Makefile",
            "lib/python3.6/unittest/case.py",
            "include/python3.6m/Python.h",
            // Another version's folder is not this build's stdlib.
            "lib/python3.7/test/test_os.py",
        ] {
            assert!(k(yes), "{yes} should be kept");
        }
        for no in [
            "lib/python3.6/site-packages/pip",
            "lib/python3.6/site-packages/README.txt",
            "lib/python3.6/test/test_os.py",
            "lib/python3.6/test/audiodata",
            "lib/python3.6/lib2to3/tests",
            "lib/python3.6/distutils/tests/test_core.py",
            "lib/python3.6/idlelib/idle_test",
            "lib/python3.6/unittest/test",
            "lib/python3.6/__pycache__/os.cpython-36.pyc",
            "lib/python3.6/config-3.6m-x86_64-linux-gnu/libpython3.6m.a",
        ] {
            assert!(!k(no), "{no} should be left out");
        }
    }

    #[test]
    fn the_context_holds_the_build_with_links_modes_and_no_left_outs() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let prefix = d.path().join("pyenv/versions/3.8.18");
        crate::python::find::tests::fake_build(&prefix, "3.8.18");
        let w = |rel: &str, body: &str| {
            let p = prefix.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        };
        w("lib/libpython3.8.so.1.0", "elf");
        w("lib/python3.8/site-packages/pip/__init__.py", "");
        w("lib/python3.8/test/test_os.py", "");
        w("lib/python3.8/test/support/__init__.py", "");
        w("lib/python3.8/__pycache__/os.cpython-38.pyc", "");
        std::fs::set_permissions(
            prefix.join("bin/python3.8"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::os::unix::fs::symlink("python3.8", prefix.join("bin/python3")).unwrap();
        std::os::unix::fs::symlink("libpython3.8.so.1.0", prefix.join("lib/libpython3.8.so"))
            .unwrap();

        let search = HostSearch {
            python_dirs: vec![],
            uv_dirs: vec![],
            pyenv_roots: vec![d.path().join("pyenv")],
        };
        let interp = resolve("3.8", &search).unwrap();
        let m = manifest(&interp).unwrap();
        let plan = python_plan(
            &interp,
            "patchgrade.base.py.x86_64.bookworm:abc",
            m.as_ref(),
        )
        .unwrap();
        assert_eq!(plan.tier, Tier::Base);
        assert!(
            plan.name
                .starts_with(&format!("patchgrade.base.py3.8.{}.bookworm:", arch())),
            "{}",
            plan.name
        );
        assert!(plan.dockerfile.contains("ADD python.tar /"));
        assert!(plan
            .dockerfile
            .contains("\"patchgrade.python.provider\"=\"pyenv\""));
        let script = String::from_utf8_lossy(&plan.files[0].data).into_owned();
        assert!(
            script.contains("'pip==25.0.1'") && script.contains("copied=1"),
            "{script}"
        );
        assert!(!script.contains("{{"), "{script}");

        let tar = &plan.files[1].data;
        let mut seen = BTreeMap::new();
        for e in tar::Archive::new(tar.as_slice()).entries().unwrap() {
            let e = e.unwrap();
            let p = e.path().unwrap().display().to_string();
            let link = e.link_name().unwrap().map(|l| l.display().to_string());
            seen.insert(p, (e.header().mode().unwrap(), link));
        }
        let base = prefix.strip_prefix("/").unwrap().display().to_string();
        let has = |rel: &str| seen.get(&format!("{base}/{rel}")).cloned();
        assert_eq!(has("bin/python3.8").unwrap().0, 0o755);
        assert_eq!(has("bin/python3").unwrap().1.as_deref(), Some("python3.8"));
        assert!(has("lib/libpython3.8.so").unwrap().1.is_some());
        assert!(has("lib/python3.8/test/support/__init__.py").is_some());
        assert!(has("lib/python3.8/site-packages/").is_some());
        for gone in [
            "lib/python3.8/site-packages/pip/__init__.py",
            "lib/python3.8/test/test_os.py",
            "lib/python3.8/__pycache__/os.cpython-38.pyc",
        ] {
            assert!(has(gone).is_none(), "{gone} in {seen:?}");
        }

        // The name follows the build: a changed file, another image.
        let m = manifest(&interp).unwrap();
        let name = python_image_name(&interp, "b:1", m.as_ref());
        assert_eq!(name, python_image_name(&interp, "b:1", m.as_ref()));
        assert_ne!(name, python_image_name(&interp, "b:2", m.as_ref()));
        w("lib/python3.8/os.py", "changed");
        let m2 = manifest(&interp).unwrap();
        assert_ne!(name, python_image_name(&interp, "b:1", m2.as_ref()));
        // Left-out files do not count.
        w("lib/python3.8/test/test_os.py", "changed too");
        let m3 = manifest(&interp).unwrap();
        assert_eq!(
            python_image_name(&interp, "b:1", m2.as_ref()),
            python_image_name(&interp, "b:1", m3.as_ref())
        );
    }

    #[test]
    fn a_suite_python_gets_a_venv_and_no_copy() {
        let interp = resolve("3.9", &HostSearch::default()).unwrap();
        let plan = python_plan(&interp, "base:1", None).unwrap();
        assert_eq!(plan.files.len(), 1);
        assert!(plan.name.contains(".py3.9.") && plan.name.contains(".bullseye:"));
        assert!(!plan.dockerfile.contains("ADD"));
        let script = String::from_utf8_lossy(&plan.files[0].data).into_owned();
        assert!(script.contains("py='/usr/bin/python3.9'") && script.contains("copied=0"));
        assert!(
            script.contains(&format!("\"$py\" -m venv {VENV}")),
            "{script}"
        );
    }
}
