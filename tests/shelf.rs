//! The shelf on the real engine: `--shelve` puts the instance images a run
//! used in the cache folder as thin zstd archives and removes them from the
//! engine; a later run loads one back (the same image id, no build) instead
//! of building it; an archive that does not load is dropped and the image
//! built, with a warning, and the evaluation ends as it would have.
//!
//! Without a daemon this test skips, printing why, unless
//! PATCHGRADE_REQUIRE_DOCKER=1 (set by .ci/run), where it fails.

mod common;

use patchgrade::exit;
use serde_json::Value;

use common::widgets::*;
use common::*;

const SPEC: &str = "repo: acme/widgets\nversions:\n  \"*\":\n    python: \"3.11\"\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";

/// The shelf record of image `name` (`repository:tag`) in `cache`, if any.
fn shelf_record(cache: &std::path::Path, name: &str) -> Option<Value> {
    let (repository, tag) = name.rsplit_once(':').unwrap();
    let dir = cache.join("docker/shelf").join(repository);
    let archive = dir.join(format!("{tag}.tar.zst"));
    let record = std::fs::read(dir.join(format!("{tag}.json"))).ok()?;
    assert!(archive.is_file(), "{} has its record", archive.display());
    Some(serde_json::from_slice(&record).unwrap())
}

#[test]
fn shelved_instance_images_load_back_instead_of_being_built() {
    if !available(
        "a Docker daemon",
        "PATCHGRADE_REQUIRE_DOCKER",
        docker_answers(),
    ) {
        return;
    }
    let w = Widgets::new(SPEC, &[]);
    let pid = std::process::id();
    let mut rows = Vec::new();
    let mut ids = Vec::new();
    for k in ["a", "b"] {
        let file = format!("data/{k}{pid}.txt");
        let body = format!("{k} {pid}\n").repeat(20_000);
        let base = w.repo.commit(&[(file.as_str(), Some(body.as_bytes()))], k);
        let id = format!("acme__widgets-shelf{pid}{k}");
        rows.push(instance(
            &id,
            "acme/widgets",
            &base,
            &w.gold,
            &w.test_patch,
            &[F2P],
            &[P2P],
        ));
        ids.push(id);
    }
    w.sb.write("dataset.jsonl", &jsonl(&rows));
    let run = |run_id: &str, only: &[&str], extra: &[&str]| {
        let mut a = docker_args("run", "gold", run_id);
        a.push("--instance-ids");
        a.extend_from_slice(only);
        a.extend_from_slice(extra);
        let out = w.sb.run(&a);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(exit::OK), "{run_id}: {err}");
        let mut images = Vec::new();
        for id in only {
            assert_eq!(w.sb.outcome(run_id, "gold", id), "resolved", "{err}");
            let rec = w.sb.record(run_id, "gold", id);
            let env = rec["environment"].as_str().unwrap().to_string();
            let mut words = env.split_whitespace().skip(1);
            let image = words.next().unwrap().to_string();
            let image_id = words.next().unwrap().trim_end_matches(';').to_string();
            images.push((image, image_id));
        }
        (images, err)
    };
    let (a, b) = (ids[0].as_str(), ids[1].as_str());

    // Built, then shelved and removed from the engine.
    let (first, err) = run("s1", &[a, b], &["--shelve"]);
    assert!(err.contains("shelved 2 instance images"), "{err}");
    assert!(err.contains("(--shelve: on the shelf)"), "{err}");
    for (image, image_id) in &first {
        assert!(!image_present(image), "{image} left the engine: {err}");
        let rec = shelf_record(&w.sb.cache(), image).expect("shelved");
        assert_eq!(rec["id"], image_id.as_str(), "{rec}");
        let own = rec["own"].as_u64().unwrap();
        assert!(
            own >= 1 && own < rec["layers"].as_array().unwrap().len() as u64,
            "{rec}"
        );
        assert!(rec["stored_bytes"].as_u64().unwrap() > 0, "{rec}");
    }

    // `patchgrade images` shows the shelf, and counts both instances as
    // warm: on the shelf over the env the engine holds.
    let out =
        w.sb.run(&["images", "--dataset", "dataset.jsonl", "--json"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(exit::OK), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["shelf"]["images"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["shelf"]["groups"][0]["repo"], "acme__widgets", "{v}");
    assert_eq!(v["cold_run"]["total"]["shelved"], 2, "{v}");
    assert!(err.contains("on the shelf ("), "{err}");

    // Loaded back, not built: the same image id, the same verdict.
    let (again, err) = run("s2", &[a], &[]);
    assert!(
        err.contains("1 instance images reused (1 from the shelf), 0 built"),
        "{err}"
    );
    assert_eq!(again[0], first[0], "{err}");
    assert!(image_present(&first[0].0), "{err}");

    // Shelved already with that id: removed from the engine, not saved again.
    let (_, err) = run("s3", &[a], &["--shelve"]);
    assert!(!err.contains("shelving "), "{err}");
    assert!(
        err.contains("removing 1 images (--shelve: on the shelf)"),
        "{err}"
    );
    assert!(!image_present(&first[0].0), "{err}");

    // An archive that does not load: said, dropped from the shelf, built.
    let (archive_dir, tag) = first[1].0.rsplit_once(':').unwrap();
    let archive =
        w.sb.cache()
            .join("docker/shelf")
            .join(archive_dir)
            .join(format!("{tag}.tar.zst"));
    std::fs::write(&archive, b"not an archive").unwrap();
    let (rebuilt, err) = run("s4", &[b], &[]);
    assert!(
        err.contains(&format!("shelved image {} not loaded", first[1].0)),
        "{err}"
    );
    assert!(err.contains("0 instance images reused, 1 built"), "{err}");
    assert_eq!(rebuilt[0].0, first[1].0, "{err}");
    assert!(shelf_record(&w.sb.cache(), &first[1].0).is_none(), "{err}");

    // Another run of this cache folder is going (its lease is held here):
    // b is shelved, but stays in the engine, as eviction would.
    let lease = hold_lease(&w.sb.cache().join("docker/images.lock"));
    let (_, err) = run("s5", &[b], &["--shelve"]);
    assert!(err.contains("shelved 1 instance images"), "{err}");
    assert!(err.contains("eviction left to the last run"), "{err}");
    assert!(image_present(&first[1].0), "{err}");
    assert!(shelf_record(&w.sb.cache(), &first[1].0).is_some(), "{err}");
    drop(lease);
}
