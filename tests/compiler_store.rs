//! The compiler cache store on the real engine (backend::docker::
//! compiler_store): snapshots of different windows, and a second cold run
//! with the images removed, compile through what earlier builds stored in
//! the cache folder; no image keeps the store's address.
//!
//! Skips without a daemon unless PATCHGRADE_REQUIRE_DOCKER=1 (CI).

mod common;

use patchgrade::exit;
use serde_json::Value;

use common::cext::*;
use common::layers::images;
use common::*;

/// The build logs of the acme/cstore snapshot images under the sandbox, in
/// the order of their folders' names.
fn snapshot_build_logs(root: &std::path::Path) -> Vec<String> {
    let dir = root.join("logs/build_images/env");
    let mut dirs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("patchgrade.snap.x86_64.acme__cstore__")
        })
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs.iter()
        .map(|d| std::fs::read_to_string(d.join("build_image.log")).unwrap())
        .collect()
}

fn remove_cstore_images() {
    for old in images("patchgrade.")
        .iter()
        .filter(|i| i.contains("acme__cstore"))
    {
        docker_out(&["rmi", old]);
    }
}

#[test]
fn docker_snapshots_compile_through_what_earlier_builds_stored() {
    if !docker_ready("docker_snapshots_compile_through_what_earlier_builds_stored") {
        return;
    }
    remove_cstore_images();
    let sb = Sandbox::new();
    let repo = sb.mirrors().join("acme__cstore");
    std::fs::create_dir_all(repo.join("calc")).unwrap();
    std::fs::create_dir_all(repo.join("tests")).unwrap();
    run(&repo, "git", &["init", "-q"], &[]);
    run(&repo, "git", &["config", "user.name", "t"], &[]);
    run(&repo, "git", &["config", "user.email", "t@t"], &[]);
    std::fs::write(repo.join("setup.py"), SETUP_PY).unwrap();
    std::fs::write(
        repo.join(".gitignore"),
        "build/\n*.so\n*.egg-info/\ncalc/_fast.c\n",
    )
    .unwrap();
    std::fs::write(repo.join("calc/_fast.pyx"), pyx_module(3)).unwrap();
    std::fs::write(repo.join("calc/_speed.c"), c_module("speed", 1)).unwrap();
    std::fs::write(repo.join("calc/_other.c"), c_module("other", 7)).unwrap();
    std::fs::write(
        repo.join("calc/__init__.py"),
        "def add(a, b):\n    return a - b\n",
    )
    .unwrap();
    std::fs::write(repo.join("tests/__init__.py"), "").unwrap();
    let tests = "import unittest\nfrom calc import _other, _speed, _fast\n\nclass T(unittest.TestCase):\n    def test_other(self):\n        self.assertEqual((_other.other(), _speed.speed(), _fast.fast()), (7, 1, 3))\n";
    std::fs::write(repo.join("tests/test_calc.py"), tests).unwrap();
    // Three windows, the same compiled sources in all: instance 1 is over
    // the snapshot of c0, instance 2 over the snapshot of b1.
    commit_at(&repo, "true", T0 + 100);
    let b1 = commit_at(&repo, "echo one > NOTES", T0 + W + 100);
    let b2 = commit_at(&repo, "echo two > NOTES", T0 + 2 * W + 100);
    let gold = {
        std::fs::write(
            repo.join("calc/__init__.py"),
            "def add(a, b):\n    return a + b\n",
        )
        .unwrap();
        let d = run(&repo, "git", &["diff"], &[]);
        run(&repo, "git", &["checkout", "-q", "--", "."], &[]);
        d
    };
    let test_patch = {
        std::fs::write(
            repo.join("tests/test_calc.py"),
            format!("{tests}\n    def test_add(self):\n        from calc import add\n        self.assertEqual(add(2, 3), 5)\n"),
        )
        .unwrap();
        let d = run(&repo, "git", &["diff"], &[]);
        run(&repo, "git", &["checkout", "-q", "--", "."], &[]);
        d
    };
    let rows: Vec<Value> = [("acme__cstore-1", &b1), ("acme__cstore-2", &b2)]
        .iter()
        .map(|(id, base)| {
            instance(
                id,
                "acme/cstore",
                base,
                &gold,
                &test_patch,
                &["tests.test_calc.T.test_add"],
                &["tests.test_calc.T.test_other"],
            )
        })
        .collect();
    sb.write("dataset.jsonl", &jsonl(&rows));
    sb.write(
        "specs/cstore.yaml",
        &BUILD_SPEC.replace("repo: acme/cext", "repo: acme/cstore"),
    );
    let store = sb.cache().join("docker/ccache");
    let files_in = |dir: &std::path::Path| {
        run(
            std::path::Path::new("/"),
            "bash",
            &["-c", &format!("find {} -type f | wc -l", dir.display())],
            &[],
        )
        .parse::<u64>()
        .unwrap()
    };

    // Cold: the first snapshot compiles the three units and stores them;
    // the second finds all three in the store.
    let mut args = docker_args("run", "gold", "cold1");
    args.extend(["--max-workers", "1", "--cache-level", "instance"]);
    let out = sb.run(&args);
    assert_eq!(out.status.code(), Some(exit::OK));
    for id in ["acme__cstore-1", "acme__cstore-2"] {
        assert_eq!(sb.outcome("cold1", "gold", id), "resolved", "{id}");
    }
    let logs = snapshot_build_logs(sb.path());
    assert_eq!(logs.len(), 2, "two snapshots");
    for log in &logs {
        assert!(
            log.contains("patchgrade: compiling through the compiler cache store"),
            "{log}"
        );
    }
    let mut hits: Vec<u64> = logs.iter().map(|l| cache_hits(l)).collect();
    hits.sort();
    assert_eq!(hits, vec![0, 3], "{logs:#?}");
    let stored = files_in(&store);
    assert!(stored >= 3, "{stored} files in {}", store.display());
    // `patchgrade images` says what the store holds.
    let out = sb.run(&["images", "--json"]);
    assert_eq!(out.status.code(), Some(exit::OK));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["compiler_store"]["files"], stored, "{v}");
    assert!(v["compiler_store"]["bytes"].as_u64().unwrap() > 0, "{v}");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!(
        "compiler cache store ({}): {stored} entries",
        store.display()
    )));

    // No image holds the store's address: the setups removed the file
    // and no variable names it.
    for image in images("patchgrade.")
        .iter()
        .filter(|i| i.contains("cstore"))
    {
        let seen = in_image(
            image,
            "ls -a /testbed/.git 2>/dev/null | grep -c ccache-remote; env | grep -c CCACHE || true",
        );
        assert_eq!(seen, "0\n0", "{image}");
    }

    // A new cold run on the same cache folder: both snapshots and both
    // instances built again, every unit found in the store.
    remove_cstore_images();
    std::fs::remove_dir_all(sb.path().join("logs/build_images")).unwrap();
    let mut args = docker_args("run", "gold", "cold2");
    args.extend(["--max-workers", "1", "--cache-level", "instance"]);
    let out = sb.run(&args);
    assert_eq!(out.status.code(), Some(exit::OK));
    for id in ["acme__cstore-1", "acme__cstore-2"] {
        assert_eq!(sb.outcome("cold2", "gold", id), "resolved", "{id}");
    }
    let logs = snapshot_build_logs(sb.path());
    assert_eq!(logs.len(), 2, "two snapshots built again");
    for log in &logs {
        assert_eq!(cache_hits(log), 3, "{log}");
    }
    assert_eq!(files_in(&store), stored, "nothing new to store");
    remove_cstore_images();
}
