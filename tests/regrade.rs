//! `patchgrade regrade`: saved logs graded again without running anything.
//! A run graded with the wrong parser, regraded with the right one, gives
//! the verdicts of a fresh run with the right one; an edited log changes
//! its verdict and the previous report is kept; the reference's layout
//! (logs only) gets reports; a dry run writes nothing.

mod common;

use patchgrade::exit;
use std::path::Path;

use common::widgets::*;
use common::*;
use serde_json::json;

const SPEC: &str = "repo: acme/widgets\nversions:\n  \"*\":\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";
/// The same spec with a parser that cannot read unittest's output.
const WRONG_PARSER: &str = "repo: acme/widgets\nversions:\n  \"*\":\n    test_cmd: python3 -m unittest -v\n    log_parser: pytest\n";

fn setup() -> Widgets {
    let w = Widgets::new(WRONG_PARSER, &[]);
    w.sb.write("right/widgets.yaml", SPEC);
    let rows = vec![w.row("w-gold"), w.row("w-wrong"), w.row("w-empty")];
    w.sb.write("dataset.jsonl", &jsonl(&rows));
    let preds = vec![
        prediction("w-gold", "m", Some(&w.gold)),
        prediction("w-wrong", "m", Some(&w.wrong)),
        prediction("w-empty", "m", None),
    ];
    w.sb.write("preds.jsonl", &jsonl(&preds));
    w
}

fn run(sb: &Sandbox, run_id: &str, specs: &str) {
    let out = sb.run(&local_args(run_id, "preds.jsonl", specs));
    assert_eq!(out.status.code(), Some(exit::OK));
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn regrading_with_the_fixed_parser_gives_the_fresh_runs_verdicts() {
    let w = setup();
    let sb = &w.sb;
    run(sb, "before", "specs");
    // Read with pytest's parser, unittest's log resolves nothing.
    assert_eq!(sb.outcome("before", "m", "w-gold"), "unresolved");
    assert_eq!(sb.summary("m", "before")["resolved_ids"], json!([]));
    run(sb, "fresh", "right");
    assert_eq!(sb.outcome("fresh", "m", "w-gold"), "resolved");

    let dry = sb.run(&[
        "regrade",
        "logs/run_evaluation/before",
        "--specs",
        "right",
        "--dry-run",
    ]);
    assert_eq!(dry.status.code(), Some(exit::OK));
    assert!(
        stderr(&dry).contains("(dry run: nothing written)"),
        "{}",
        stderr(&dry)
    );
    assert_eq!(sb.outcome("before", "m", "w-gold"), "unresolved");

    let out = sb.run(&[
        "regrade",
        "logs/run_evaluation/before",
        "--specs",
        "right",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(exit::OK));
    let err = stderr(&out);
    assert!(
        err.contains("w-gold") && err.contains("unresolved -> resolved"),
        "{err}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["changes"].as_array().unwrap().len(), 1, "{report}");
    assert_eq!(report["changes"][0]["instance_id"], "w-gold");
    // The empty patch has no test verdict: left as it was, still counted.
    assert_eq!(report["skipped"].as_array().unwrap().len(), 1, "{report}");

    for id in ["w-gold", "w-wrong", "w-empty"] {
        let regraded = sb.record("before", "m", id);
        let fresh = sb.record("fresh", "m", id);
        assert_eq!(regraded["outcome"], fresh["outcome"], "{id}");
        assert_eq!(regraded["statuses"], fresh["statuses"], "{id}");
        assert_eq!(regraded["grade"], fresh["grade"], "{id}");
    }
    let (before, fresh) = (sb.summary("m", "before"), sb.summary("m", "fresh"));
    for key in [
        "resolved_ids",
        "unresolved_ids",
        "empty_patch_ids",
        "error_ids",
        "completed_ids",
    ] {
        assert_eq!(before[key], fresh[key], "{key}");
    }
    // The reference's per-instance report follows, the previous one kept.
    let dir = sb.path().join("logs/run_evaluation/before/m/w-gold");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["w-gold"]["resolved"], true);
    assert_eq!(kept(&dir, "report.json"), 1);
    assert_eq!(kept(&dir, "patchgrade.json"), 1);
    assert_eq!(kept(sb.path(), "m.before.json"), 1);

    // Regrading again changes nothing and rewrites nothing.
    let again = sb.run(&["regrade", "logs/run_evaluation/before", "--specs", "right"]);
    assert_eq!(again.status.code(), Some(exit::OK));
    assert!(
        stderr(&again).contains("0 verdicts changed, 0 records rewritten"),
        "{}",
        stderr(&again)
    );
}

/// How many kept copies of `name` are in `dir`.
fn kept(dir: &Path, name: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(&format!("{name}.")) && n.ends_with(".prev")
        })
        .count()
}

#[test]
fn an_edited_log_and_the_reference_layout_are_graded_from_the_log() {
    let w = setup();
    let sb = &w.sb;
    run(sb, "ok", "right");
    assert_eq!(sb.outcome("ok", "m", "w-wrong"), "unresolved");
    // The failing test's status lines say it passed now, and the runner's
    // exit code agrees.
    let log_path = sb
        .path()
        .join("logs/run_evaluation/ok/m/w-wrong/test_output.txt");
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("FAIL: test_high"), "{log}");
    let edited: String = log
        .lines()
        .filter(|l| !l.starts_with("FAIL: test_high"))
        .map(|l| {
            if l.starts_with("test_high") {
                l.replace("FAIL", "ok")
            } else if l.starts_with(">>>>> Test Exit Code: ") {
                ">>>>> Test Exit Code: 0".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&log_path, edited).unwrap();
    let out = sb.run(&["regrade", "logs/run_evaluation/ok", "--specs", "right"]);
    assert_eq!(out.status.code(), Some(exit::OK));
    assert_eq!(sb.outcome("ok", "m", "w-wrong"), "resolved");

    // The reference's layout: only the test logs of the other run, no
    // record of patchgrade's.
    let theirs = sb.path().join("logs/run_evaluation/theirs/agent");
    for id in ["w-gold", "w-wrong"] {
        std::fs::create_dir_all(theirs.join(id)).unwrap();
        std::fs::copy(
            sb.path()
                .join("logs/run_evaluation/ok/m")
                .join(id)
                .join("test_output.txt"),
            theirs.join(id).join("test_output.txt"),
        )
        .unwrap();
    }
    let no_dataset = sb.run(&["regrade", "logs/run_evaluation/theirs", "--specs", "right"]);
    assert_eq!(no_dataset.status.code(), Some(exit::BAD_INPUT));
    assert!(
        stderr(&no_dataset).contains("give --dataset"),
        "{}",
        stderr(&no_dataset)
    );
    let out = sb.run(&[
        "regrade",
        "logs/run_evaluation/theirs",
        "--dataset",
        "dataset.jsonl",
        "--specs",
        "right",
    ]);
    assert_eq!(out.status.code(), Some(exit::OK));
    assert!(
        stderr(&out).contains("2 from reference logs"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sb.outcome("theirs", "agent", "w-gold"), "resolved");
    assert_eq!(sb.outcome("theirs", "agent", "w-wrong"), "resolved");
    let s = sb.summary("agent", "theirs");
    assert_eq!(s["resolved_ids"], json!(["w-gold", "w-wrong"]));
    assert_eq!(s["total_instances"], 2);
}
