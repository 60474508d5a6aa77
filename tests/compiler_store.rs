//! The compiler cache store on the real engine (backend::docker::
//! compiler_store): snapshots of different windows, and a second cold run
//! with the images removed, compile (ccache) and translate (Cython) through
//! what earlier builds stored in the cache folder, as do instance images
//! sent their whole tree (no snapshot); no image keeps the store's address.
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

/// The Cython modules a build log says it took from the store.
fn cython_from_store(log: &str) -> usize {
    log.matches("patchgrade: Cython module from the store: _fast.c-")
        .count()
}

/// The calc package as `acme/<name>` in the sandbox's mirrors, committed
/// once per `(script, time)` of `commits`, and its spec (`BUILD_SPEC`);
/// the dataset is two instances, `acme__<name>-1` and `-2`, at the last
/// two commits, whose gold makes `add` right.
fn calc_instances(sb: &Sandbox, name: &str, commits: &[(&str, i64)]) {
    let repo = sb.mirrors().join(format!("acme__{name}"));
    let tests = "import unittest\nfrom calc import _other, _speed, _fast\n\nclass T(unittest.TestCase):\n    def test_other(self):\n        self.assertEqual((_other.other(), _speed.speed(), _fast.fast()), (7, 1, 3))\n";
    write_calc_repo(&repo, SETUP_PY, tests);
    let bases: Vec<String> = commits
        .iter()
        .map(|(script, t)| commit_at(&repo, script, *t))
        .collect();
    let gold = calc_gold(&repo);
    let test_patch = diff_of_write(
        &repo,
        "tests/test_calc.py",
        &format!("{tests}\n    def test_add(self):\n        from calc import add\n        self.assertEqual(add(2, 3), 5)\n"),
    );
    let rows: Vec<Value> = bases[bases.len() - 2..]
        .iter()
        .enumerate()
        .map(|(i, base)| {
            instance(
                &format!("acme__{name}-{}", i + 1),
                &format!("acme/{name}"),
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
        &format!("specs/{name}.yaml"),
        &BUILD_SPEC.replace("repo: acme/cext", &format!("repo: acme/{name}")),
    );
}

#[test]
fn docker_snapshots_compile_through_what_earlier_builds_stored() {
    if !docker_ready("docker_snapshots_compile_through_what_earlier_builds_stored") {
        return;
    }
    remove_images_of("acme__cstore");
    let sb = Sandbox::new();
    // Three windows, the same compiled sources in all: instance 1 is over
    // the snapshot of c0, instance 2 over the snapshot of b1.
    calc_instances(
        &sb,
        "cstore",
        &[
            ("true", T0 + 100),
            ("echo one > NOTES", T0 + W + 100),
            ("echo two > NOTES", T0 + 2 * W + 100),
        ],
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

    // A gold run of both instances, 1 worker; both resolve.
    let cold_run = |run_id: &str| {
        let mut args = docker_args("run", "gold", run_id);
        args.extend(["--max-workers", "1", "--cache-level", "instance"]);
        let out = sb.run(&args);
        assert_eq!(out.status.code(), Some(exit::OK));
        for id in ["acme__cstore-1", "acme__cstore-2"] {
            assert_eq!(sb.outcome(run_id, "gold", id), "resolved", "{id}");
        }
    };

    // Cold: the first snapshot compiles the three units and stores them;
    // the second finds all three in the store.
    cold_run("cold1");
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
    // Cython's module too: translated by one, found in the store by the
    // other (its fingerprint is the same: the same sources and Cython).
    let mut found: Vec<usize> = logs.iter().map(|l| cython_from_store(l)).collect();
    found.sort();
    assert_eq!(found, vec![0, 1], "{logs:#?}");
    assert_eq!(files_in(&store.join("cython")), 1);
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
    remove_images_of("acme__cstore");
    std::fs::remove_dir_all(sb.path().join("logs/build_images")).unwrap();
    cold_run("cold2");
    let logs = snapshot_build_logs(sb.path());
    assert_eq!(logs.len(), 2, "two snapshots built again");
    for log in &logs {
        assert_eq!(cache_hits(log), 3, "{log}");
        assert_eq!(cython_from_store(log), 1, "{log}");
        assert!(
            log.contains("Found compiled calc/_fast.pyx in cache"),
            "{log}"
        );
    }
    assert_eq!(files_in(&store), stored, "nothing new to store");
    remove_images_of("acme__cstore");
}

#[test]
fn docker_whole_tree_instances_compile_through_the_store() {
    if !docker_ready("docker_whole_tree_instances_compile_through_the_store") {
        return;
    }
    remove_images_of("acme__cwhole");
    let sb = Sandbox::new();
    // Both commits in the history's first window: no anchor, so no
    // snapshot; each instance image is sent its whole tree (as astropy's
    // trees with submodules are).
    calc_instances(
        &sb,
        "cwhole",
        &[("true", T0 + 100), ("echo two > NOTES", T0 + 200)],
    );
    // One worker: instance 1 is built first and stores what it compiles.
    let mut args = docker_args("run", "gold", "whole");
    args.extend(["--max-workers", "1", "--cache-level", "instance"]);
    let out = sb.run(&args);
    assert_eq!(out.status.code(), Some(exit::OK));
    for id in ["acme__cwhole-1", "acme__cwhole-2"] {
        assert_eq!(sb.outcome("whole", "gold", id), "resolved", "{id}");
    }
    assert!(
        !images("patchgrade.snap.")
            .iter()
            .any(|i| i.contains("cwhole")),
        "no snapshot"
    );
    let (first, second) = (
        instance_build_log(sb.path(), "acme__cwhole-1"),
        instance_build_log(sb.path(), "acme__cwhole-2"),
    );
    for log in [&first, &second] {
        assert!(
            log.contains("patchgrade: compiling through the compiler cache store"),
            "{log}"
        );
    }
    assert_eq!((cache_hits(&first), cache_hits(&second)), (0, 3));
    assert_eq!(
        (cython_from_store(&first), cython_from_store(&second)),
        (0, 1)
    );
    // Neither image keeps a cache, the objects or the store's address.
    for image in images("patchgrade.eval.")
        .iter()
        .filter(|i| i.contains("cwhole"))
    {
        let seen = in_image(
            image,
            "ls -d /tmp/patchgrade-ccache /tmp/patchgrade-cycache /testbed/build/temp.* /testbed/.git/patchgrade-ccache-remote 2>/dev/null | wc -l; env | grep -c CCACHE || true",
        );
        assert_eq!(seen, "0\n0", "{image}");
    }
    remove_images_of("acme__cwhole");
}
