//! Faults of the inputs and the disk: rows patchgrade must load or refuse
//! clearly, a prediction file of 100,000 rows, the log folder's disk full.

use patchgrade::exit;
use std::process::Command;
use std::time::Instant;

use crate::support::*;

/// A spec with no Python env: the local backend runs the host's python3.
const HOST_SPEC: &str = "repo: acme/widgets\nversions:\n  \"*\":\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";

#[test]
fn invalid_utf8_in_a_patch_is_an_error_at_its_line() {
    let c = Corpus::new("fu");
    let id = c.id("gold");
    let rows = [instance(
        &id,
        "acme/widgets",
        &c.w.base,
        &c.w.gold,
        &c.w.test_patch,
        &[F2P],
        &[P2P],
    )];
    c.w.sb.write("dataset.jsonl", &jsonl(&rows));
    let good = prediction(&id, "m", Some(&c.w.gold)).to_string();
    // Line 2: a patch in Latin-1 ("café" with a raw 0xE9 byte).
    let bad = good
        .replace("min(hi", "caf\u{e9}(hi")
        .replace('\u{e9}', "\u{0}");
    let mut bytes = format!("{good}\n").into_bytes();
    bytes.extend(bad.bytes().map(|b| if b == 0 { 0xE9 } else { b }));
    bytes.push(b'\n');
    std::fs::write(c.path().join("preds.jsonl"), &bytes).unwrap();
    let out = c.run("utf8", &["--backend", "local"], &[]);
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT), "bad input");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("preds.jsonl:2: invalid UTF-8"), "{err}");
    assert!(
        !c.path().join("logs/run_evaluation/utf8").exists(),
        "nothing was run"
    );
}

/// Peak RSS (KiB) and exit code of a child, from wait4(2).
fn run_measured(mut cmd: Command) -> (i64, Option<i32>, String) {
    let err_path = std::env::temp_dir().join(format!("pg-rss-{}.stderr", std::process::id()));
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let child = cmd.spawn().expect("start patchgrade");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value; wait4 on our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4");
    std::mem::forget(child);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = std::fs::remove_file(&err_path);
    (usage.ru_maxrss, code, err)
}

#[test]
fn a_hundred_thousand_empty_or_identical_predictions_stay_under_300_mib() {
    let c = Corpus::new("fh");
    c.w.sb.write("specs/widgets.yaml", HOST_SPEC);
    let ids: Vec<String> = (0..10).map(|i| c.id(&format!("i{i}"))).collect();
    let rows: Vec<_> = ids
        .iter()
        .map(|id| {
            instance(
                id,
                "acme/widgets",
                &c.w.base,
                &c.w.gold,
                &c.w.test_patch,
                &[F2P],
                &[P2P],
            )
        })
        .collect();
    c.w.sb.write("dataset.jsonl", &jsonl(&rows));
    let mut preds = String::new();
    for k in 0..10_000 {
        for id in &ids {
            let patch = (k % 2 == 0).then_some(c.w.gold.as_str());
            preds.push_str(&prediction(id, "m", patch).to_string());
            preds.push('\n');
        }
    }
    c.w.sb.write("preds.jsonl", &preds);
    // 100,000 result folders: on tmpfs where there is one (fsync per file
    // on a busy disk would make this minutes; the RSS is what is measured).
    let shm = std::path::Path::new("/dev/shm");
    let logs = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir_in(c.path()).unwrap()
    };
    let log_dir = logs.path().display().to_string();
    let args = c.args(
        "big",
        &[
            "--backend",
            "local",
            "--no-sandbox",
            "--max-workers",
            "2",
            "--log-dir",
            &log_dir,
        ],
    );
    let t = Instant::now();
    let (rss_kib, code, err) = run_measured(c.command(&args));
    eprintln!(
        "100,000 predictions: peak RSS {} MiB, {:?}",
        rss_kib / 1024,
        t.elapsed()
    );
    assert_eq!(code, Some(exit::OK), "{err}");
    assert!(rss_kib <= 300 * 1024, "peak RSS {} MiB", rss_kib / 1024);
    // Every row recorded (the summary has one verdict per instance; the
    // progress lines have one per row).
    let lines = |suffix: &str| err.lines().filter(|l| l.ends_with(suffix)).count();
    assert_eq!(
        lines(" empty_patch"),
        50_000,
        "{}",
        &err[..err.len().min(2000)]
    );
    assert_eq!(lines(" resolved") + lines(" resolved (reused)"), 50_000);
    // Deduplicated: one evaluation per instance, the rest copies of it.
    let rec_path = logs
        .path()
        .join(format!("big/m/{}@2/patchgrade.json", ids[3]));
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(rec_path).unwrap()).unwrap();
    assert_eq!(rec["evaluated_as"], "0", "{rec}");
    // One evaluation per instance; the other 4,999 identical samples of
    // each are copies of its result.
    assert_eq!(lines(" resolved"), 10);
    assert_eq!(lines(" resolved (reused)"), 49_990);
}

#[test]
fn a_half_written_record_is_never_read_as_finished() {
    let mut c = Corpus::new("fw");
    c.w.sb.write("specs/widgets.yaml", HOST_SPEC);
    let (gold, wrong) = (c.w.gold.clone(), c.w.wrong.clone());
    c.add("gold", HIGH, &gold);
    c.add("wrong", HIGH, &wrong);
    c.write();
    let run = "half";
    let extra = ["--backend", "local", "--no-sandbox"];
    let out = c.run(run, &extra, &[]);
    assert_eq!(out.status.code(), Some(exit::OK));
    // The record cut short, as a copy interrupted by a crash leaves it.
    let rec_path = c.eval_dir(run, "gold").join("patchgrade.json");
    let text = std::fs::read_to_string(&rec_path).unwrap();
    std::fs::write(&rec_path, &text[..text.len() / 2]).unwrap();
    // Commands that read the run name the file.
    let rep =
        c.w.sb
            .run(&["report", &format!("logs/run_evaluation/{run}")]);
    assert_eq!(rep.status.code(), Some(exit::BAD_INPUT));
    let err = String::from_utf8_lossy(&rep.stderr);
    assert!(
        err.contains(&format!("{}/patchgrade.json", c.id("gold"))),
        "{err}"
    );
    // A rerun evaluates it again, reuses the other.
    let out = c.run(run, &extra, &[]);
    assert_eq!(out.status.code(), Some(exit::OK));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{} resolved\n", c.id("gold"))),
        "{err}"
    );
    assert!(
        err.contains(&format!("{} unresolved (reused)", c.id("wrong"))),
        "{err}"
    );
    assert_eq!(c.record(run, "gold")["outcome"], "resolved");
    c.assert_nothing_left_on_host();
}

#[test]
fn a_record_that_cannot_be_written_is_named_and_exits_3() {
    let mut c = Corpus::new("fx");
    c.w.sb.write("specs/widgets.yaml", HOST_SPEC);
    let (gold, wrong) = (c.w.gold.clone(), c.w.wrong.clone());
    c.add("gold", HIGH, &gold);
    c.add("wrong", HIGH, &wrong);
    c.write();
    let run = "unwritable";
    // A folder where the record goes: the final rename onto it fails.
    let blocked = c.eval_dir(run, "gold").join("patchgrade.json");
    std::fs::create_dir_all(blocked.join("occupied")).unwrap();
    let out = c.run(run, &["--backend", "local", "--no-sandbox"], &[]);
    assert_eq!(
        out.status.code(),
        Some(exit::INFRA),
        "infrastructure failure"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("results could not be written")
            && err.contains(&format!("{}: cannot write its results to", c.id("gold")))
            && err.contains(&format!("{}/m/{}", run, c.id("gold"))),
        "{err}"
    );
    // Nothing of it reads as finished: no report.json beside the failure.
    assert!(!c.eval_dir(run, "gold").join("report.json").exists());
    assert_eq!(c.record(run, "wrong")["outcome"], "unresolved");
    c.assert_nothing_left_on_host();
}
