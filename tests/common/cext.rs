//! A package with C and Cython extensions built through the compiler cache
//! (`snapshot_build`), in git repositories whose commits fall in chosen
//! snapshot windows: for the tests of snapshots and the compiler cache.

use std::path::Path;
use std::process::Command;

/// 91 days: the snapshot window.
pub const W: i64 = 91 * 24 * 3600;
/// The start of a window, in 2023.
pub const T0: i64 = 1_700_000_000 / W * W;

pub fn run(dir: &Path, cmd: &str, args: &[&str], env: &[(&str, String)]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Run `script` in the worktree with bash, then commit everything at unix
/// time `t`; the commit id.
pub fn commit_at(dir: &Path, script: &str, t: i64) -> String {
    run(dir, "bash", &["-euc", script], &[]);
    let date = format!("@{t} +0000");
    let env = [
        ("GIT_AUTHOR_DATE", date.clone()),
        ("GIT_COMMITTER_DATE", date),
    ];
    run(dir, "git", &["add", "-A"], &[]);
    run(dir, "git", &["commit", "-q", "-m", "c"], &env);
    run(dir, "git", &["rev-parse", "HEAD"], &[])
}

pub fn docker_out(args: &[&str]) -> String {
    run(Path::new("/"), "docker", args, &[])
}

/// `script` run by bash in a throwaway container of `image`, offline.
pub fn in_image(image: &str, script: &str) -> String {
    docker_out(&[
        "run",
        "--rm",
        "--network",
        "none",
        image,
        "bash",
        "-c",
        script,
    ])
}

/// A spec whose snapshot runs the install through the compiler cache
/// (`snapshot_build`): a package with two C extensions and a Cython module.
pub const BUILD_SPEC: &str = "repo: acme/cext\nversions:\n  \"*\":\n    python: \"3.11\"\n    snapshot_build: true\n    pip_packages: [setuptools, cython]\n    install: python -m pip install -v --no-build-isolation -e .\n    eval_install: python -m pip install -v --no-build-isolation --no-deps --no-index -e .\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";

/// Two C extensions and one Cython module.
pub const SETUP_PY: &str = "from setuptools import setup, Extension\nfrom Cython.Build import cythonize\nsetup(name='calc', version='1.0', packages=['calc'], ext_modules=[Extension('calc._speed', ['calc/_speed.c']), Extension('calc._other', ['calc/_other.c'])] + cythonize([Extension('calc._fast', ['calc/_fast.pyx'])]))\n";

/// The Cython module `_fast`, whose `fast()` returns `value`.
pub fn pyx_module(value: i64) -> String {
    format!("def fast():\n    return {value}\n")
}

/// A C extension module `name` whose function `name()` returns `value`.
pub fn c_module(name: &str, value: i64) -> String {
    format!(
        "#include <Python.h>\nstatic PyObject *f(PyObject *s, PyObject *a) {{ return PyLong_FromLong({value}); }}\n\
         static PyMethodDef m[] = {{{{\"{name}\", f, METH_NOARGS, \"\"}}, {{0}}}};\n\
         static struct PyModuleDef d = {{PyModuleDef_HEAD_INIT, \"_{name}\", 0, -1, m}};\n\
         PyMODINIT_FUNC PyInit__{name}(void) {{ return PyModule_Create(&d); }}\n"
    )
}

/// The build log of the one instance image of `id` under the sandbox.
pub fn instance_build_log(root: &Path, id: &str) -> String {
    let dir = root.join("logs/build_images/instances");
    let entry = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("patchgrade.eval.x86_64.{id}__"))
        })
        .unwrap_or_else(|| panic!("no build folder of {id} in {}", dir.display()));
    std::fs::read_to_string(entry.path().join("build_image.log")).unwrap()
}

/// ccache's count of hits in a build log (`ccache --show-stats`: a line
/// `Hits: N / M`), for the setup's one report.
pub fn cache_hits(log: &str) -> u64 {
    log.lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix("Hits:")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no ccache statistics in the build log:\n{log}"))
}

/// `repo` (a folder of the sandbox's mirrors) made a git repository
/// holding the calc package, uncommitted: `setup_py`, the two C
/// extensions (`_speed` returning 1, `_other` 7), the Cython `_fast` (3),
/// a wrong `add` and `tests/test_calc.py` holding `tests`.
pub fn write_calc_repo(repo: &Path, setup_py: &str, tests: &str) {
    std::fs::create_dir_all(repo.join("calc")).unwrap();
    std::fs::create_dir_all(repo.join("tests")).unwrap();
    run(repo, "git", &["init", "-q"], &[]);
    run(repo, "git", &["config", "user.name", "t"], &[]);
    run(repo, "git", &["config", "user.email", "t@t"], &[]);
    let files = [
        ("setup.py", setup_py.to_string()),
        (
            ".gitignore",
            "build/\n*.so\n*.egg-info/\ncalc/_fast.c\n".into(),
        ),
        ("calc/_fast.pyx", pyx_module(3)),
        ("calc/_speed.c", c_module("speed", 1)),
        ("calc/_other.c", c_module("other", 7)),
        (
            "calc/__init__.py",
            "def add(a, b):\n    return a - b\n".into(),
        ),
        ("tests/__init__.py", String::new()),
        ("tests/test_calc.py", tests.to_string()),
    ];
    for (path, text) in files {
        std::fs::write(repo.join(path), text).unwrap();
    }
}

/// The diff of writing `text` to `path` in `repo`'s worktree, which is
/// then put back.
pub fn diff_of_write(repo: &Path, path: &str, text: &str) -> String {
    std::fs::write(repo.join(path), text).unwrap();
    let d = run(repo, "git", &["diff"], &[]);
    run(repo, "git", &["checkout", "-q", "--", "."], &[]);
    d
}

/// The gold patch of the calc package: `add` made right.
pub fn calc_gold(repo: &Path) -> String {
    diff_of_write(
        repo,
        "calc/__init__.py",
        "def add(a, b):\n    return a + b\n",
    )
}

/// Removes patchgrade's images whose names hold `part` (an earlier, failed
/// run's images would be found, not built).
pub fn remove_images_of(part: &str) {
    for old in super::layers::images("patchgrade.")
        .iter()
        .filter(|i| i.contains(part))
    {
        docker_out(&["rmi", old]);
    }
}
