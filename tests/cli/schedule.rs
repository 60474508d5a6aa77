//! The order evaluations start in: instances never seen first, then the
//! longest tests of earlier runs (`<cache>/durations.json`) first; a free
//! worker skips a version still preparing its environment.

use super::*;
use patchgrade::exit;

/// Instance ids in the order the progress lines name them.
fn finished_order(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.starts_with('['))
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
        .collect()
}

#[test]
fn evaluations_start_with_the_unknown_then_the_longest_earlier_tests() {
    let w = widgets();
    let ids = ["acme__widgets-s1", "acme__widgets-s2", "acme__widgets-s3"];
    let rows: Vec<Value> = ids.iter().map(|id| w.row(id)).collect();
    w.sb.write("dataset.jsonl", &jsonl(&rows));
    let one_worker = |run_id: &'static str| {
        let mut a = w.args(run_id, "gold", &[]);
        let at = a.iter().position(|x| *x == "--max-workers").unwrap();
        a[at + 1] = "1";
        a
    };
    // A first run records each instance's test seconds in the cache folder.
    let out = w.sb.run(&one_worker("first"));
    assert_eq!(out.status.code(), Some(exit::OK));
    let path = w.sb.cache().join("durations.json");
    let recorded: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for id in ids {
        let secs = recorded["tests"][id].as_f64();
        assert!(secs.is_some_and(|s| s > 0.0), "{id}: {recorded}");
    }
    assert_eq!(
        finished_order(&String::from_utf8_lossy(&out.stderr)),
        ids,
        "nothing known: input order"
    );
    // An audit's reruns run chosen test files: they say nothing of how
    // long the suite takes, and leave the file as it was.
    let before = std::fs::read_to_string(&path).unwrap();
    let out = w.sb.run(&["audit", "logs/run_evaluation/first", "--rerun"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("dynamic audit: "), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);

    // Earlier runs say s2 took longest, then s3, then s1; s4 is new.
    std::fs::write(
        &path,
        r#"{"tests": {"acme__widgets-s1": 1.0, "acme__widgets-s2": 50.0, "acme__widgets-s3": 10.0}}"#,
    )
    .unwrap();
    let mut rows = rows;
    rows.push(w.row("acme__widgets-s4"));
    w.sb.write("dataset.jsonl", &jsonl(&rows));
    let out = w.sb.run(&one_worker("second"));
    assert_eq!(out.status.code(), Some(exit::OK));
    assert_eq!(
        finished_order(&String::from_utf8_lossy(&out.stderr)),
        [
            "acme__widgets-s4",
            "acme__widgets-s2",
            "acme__widgets-s3",
            "acme__widgets-s1"
        ]
    );
    // And the run recorded what it measured over what was there.
    let recorded: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(
        recorded["tests"]["acme__widgets-s2"].as_f64().unwrap() < 50.0,
        "{recorded}"
    );
    assert!(
        recorded["tests"]["acme__widgets-s4"].as_f64().is_some(),
        "{recorded}"
    );
}

/// When an evaluation starts, from the first line of its run_instance.log
/// (`[unix seconds] evaluating ...`).
fn started_at(w: &Widgets, run_id: &str, id: &str) -> f64 {
    let log = w.sb.path().join(format!(
        "logs/run_evaluation/{run_id}/gold/{id}/run_instance.log"
    ));
    let text = std::fs::read_to_string(&log).unwrap();
    let first = text.lines().next().unwrap_or_default();
    first
        .strip_prefix('[')
        .and_then(|l| l.split(']').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{}: {first:?}", log.display()))
}

#[test]
fn a_free_worker_starts_another_version_while_one_is_preparing() {
    let w = widgets();
    // a1 and a2 share version 1.0 (its env); b1 is 2.0. Two workers: the
    // first starts a1, and the second, free at once while a1 prepares,
    // starts b1 before a2 (input order: a1, a2, b1).
    let mut b1 = w.row("acme__widgets-b1");
    b1["version"] = "2.0".into();
    let rows = [w.row("acme__widgets-a1"), w.row("acme__widgets-a2"), b1];
    w.sb.write("dataset.jsonl", &jsonl(&rows));
    let out = w.sb.run(&w.args("versions", "gold", &[]));
    assert_eq!(out.status.code(), Some(exit::OK));
    let at = |id| started_at(&w, "versions", id);
    let (a1, a2, b1) = (
        at("acme__widgets-a1"),
        at("acme__widgets-a2"),
        at("acme__widgets-b1"),
    );
    assert!(a1 <= b1 && b1 < a2, "a1 {a1}, b1 {b1}, a2 {a2}");
}
