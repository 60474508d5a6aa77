//! The image cache budget on the real engine: with no `--cache-level`,
//! instance images stay after a run, and when the cache passes
//! `--cache-budget` the least recently used go first, never one the run is
//! using, and none while another run of the same cache folder is going.
//! Only images this cache folder's runs used are candidates, so the test
//! cannot evict anyone else's.
//!
//! Without a daemon this test skips, printing why, unless
//! PATCHGRADE_REQUIRE_DOCKER=1 (set by .ci/run), where it fails.

mod common;

use patchgrade::exit;

use common::layers::tagged_ancestors;
use common::widgets::*;
use common::*;

const SPEC: &str = "repo: acme/widgets\nversions:\n  \"*\":\n    python: \"3.11\"\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";

/// `n` bytes that do not compress, different per `seed`.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The bytes the cache held when the run started, from its first line.
fn usage_at_start(stderr: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("image cache: "))
        .unwrap_or_else(|| panic!("no cache line in:\n{stderr}"));
    let open = line.find('(').unwrap();
    let close = line[open..].find(" bytes)").unwrap();
    line[open + 1..open + close].parse().unwrap()
}

#[test]
fn cache_budget_evicts_least_recently_used_images_not_in_use() {
    if !available(
        "a Docker daemon",
        "PATCHGRADE_REQUIRE_DOCKER",
        docker_answers(),
    ) {
        return;
    }
    let w = Widgets::new(SPEC, &[]);
    // Four base commits, each with its own incompressible file: instance
    // images that differ in size (a: 3 MiB, the others 1 MiB).
    let pid = std::process::id();
    let mut rows = Vec::new();
    let mut prev: Option<String> = None;
    for (k, mib) in [("a", 3), ("b", 1), ("c", 1), ("d", 1)] {
        let file = format!("data/{k}.bin");
        let data = noise(
            mib << 20,
            pid as u64 + mib as u64 + k.len() as u64 * 7 + k.as_bytes()[0] as u64,
        );
        let mut files: Vec<(&str, Option<&[u8]>)> = vec![(file.as_str(), Some(data.as_slice()))];
        let old = prev.clone();
        if let Some(p) = old.as_deref() {
            files.push((p, None));
        }
        let base = w.repo.commit(&files, k);
        prev = Some(file.clone());
        let id = format!("acme__widgets-lru{pid}{k}");
        rows.push(instance(
            &id,
            "acme/widgets",
            &base,
            &w.gold,
            &w.test_patch,
            &[F2P],
            &[P2P],
        ));
    }
    w.sb.write("dataset.jsonl", &jsonl(&rows));
    let ids: Vec<String> = ["a", "b", "c", "d"]
        .iter()
        .map(|k| format!("acme__widgets-lru{pid}{k}"))
        .collect();
    let run = |run_id: &str, id: &str, extra: &[&str]| {
        let mut a = docker_args("run", "gold", run_id);
        a.extend(["--instance-ids", id]);
        a.extend_from_slice(extra);
        let out = w.sb.run(&a);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(exit::OK), "{run_id}: {err}");
        assert_eq!(w.sb.outcome(run_id, "gold", id), "resolved", "{err}");
        let rec = w.sb.record(run_id, "gold", id);
        let env = rec["environment"].as_str().unwrap().to_string();
        let image = env.split_whitespace().nth(1).unwrap().to_string();
        (image, err)
    };

    // Default flags: the instance image stays after the run.
    let (img_a, err) = run("ra", &ids[0], &[]);
    assert!(image_present(&img_a), "kept by default: {err}");
    assert!(err.contains("1 built"), "{err}");
    let (img_b, _) = run("rb", &ids[1], &[]);
    let (img_c, _) = run("rc", &ids[2], &[]);
    // A second run of c reuses its image and says so; its first line
    // gives the cache's size before d exists.
    let (_, err) = run("rc2", &ids[2], &[]);
    assert!(err.contains("1 instance images reused, 0 built"), "{err}");
    let before_d = usage_at_start(&err);

    // d is built, the cache passes the budget by d's size: the least
    // recently used image (a, 3 MiB) goes, and that is enough.
    let budget = (before_d + 1).to_string();
    let (img_d, err) = run("rd", &ids[3], &["--cache-budget", &budget]);
    assert!(err.contains(&format!("removed {img_a}")), "{err}");
    assert!(!image_present(&img_a), "a evicted: {err}");
    for img in [&img_b, &img_c, &img_d] {
        assert!(image_present(img), "{img} kept: {err}");
    }

    // Another run of this cache folder is still going (its lease is held
    // here): nothing is evicted, whatever the budget, since that run may be
    // about to use any of these images; the last run to end evicts.
    let lease = hold_lease(&w.sb.cache().join("docker/images.lock"));
    let (_, err) = run("rd1", &ids[3], &["--cache-budget", "1"]);
    assert!(err.contains("eviction left to the last run"), "{err}");
    assert!(!err.contains("removing "), "{err}");
    assert!(image_present(&img_b) && image_present(&img_c), "{err}");
    drop(lease);

    // A budget of one byte: everything not in use goes (b, c), but d and
    // its env, base and root images, used by this run, stay.
    let (_, err) = run("rd2", &ids[3], &["--cache-budget", "1"]);
    assert!(!image_present(&img_b) && !image_present(&img_c), "{err}");
    assert!(image_present(&img_d), "in use: {err}");
    for tier in ["patchgrade.env.", "patchgrade.base.", "patchgrade.root."] {
        assert!(
            !tagged_ancestors(&img_d, tier).is_empty(),
            "the {tier}* image d was built on stays: {err}"
        );
    }
    assert!(err.contains("removing 2 images"), "{err}");

    // --cache-level keeps its meaning when given: the instance image goes.
    let (_, err) = run("rd3", &ids[3], &["--cache-level", "env", "--clean"]);
    assert!(
        !image_present(&img_d),
        "--cache-level env removes it: {err}"
    );
    assert!(
        !err.contains("image cache: "),
        "no budget with --cache-level: {err}"
    );
}
