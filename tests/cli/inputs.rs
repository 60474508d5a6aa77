//! `patchgrade run` on bad and hostile inputs: odd patches each get their
//! outcome, malformed files stop the run before any work (with file and
//! line), `--instance-ids` filters and rejects unknown ids, and a log that
//! lost its markers is unresolved with its last line quoted.

use super::*;
use patchgrade::exit;

#[test]
fn hostile_and_odd_inputs_each_get_their_outcome() {
    let w = widgets();
    let sb = &w.sb;
    // A patch that writes outside the tree.
    let escape = "diff --git a/../escaped.txt b/../escaped.txt\nnew file mode 100644\n--- /dev/null\n+++ b/../escaped.txt\n@@ -0,0 +1 @@\n+pwned\n";
    // A binary file the fix adds and the test reads.
    let blob: Vec<u8> = (0u8..=255).collect();
    let bin_gold = w.repo.diff_of(&[("widgets/data.bin", Some(&blob))], true);
    let bin_tests = format!(
        "{TESTS_BASE}\n    def test_data(self):\n        with open('widgets/data.bin', 'rb') as f:\n            self.assertEqual(f.read(), bytes(range(256)))\n"
    );
    let bin_test_patch = w
        .repo
        .diff_of(&[("tests/test_core.py", Some(bin_tests.as_bytes()))], false);
    // Tests that print bytes that are not UTF-8.
    let noisy_tests = format!(
        "{TESTS_BASE}\n    def test_high(self):\n        import sys\n        sys.stdout.buffer.write(b'\\xff\\xfe\\x00 not utf-8\\n')\n        sys.stdout.flush()\n        self.assertEqual(clamp(9, 0, 3), 3)\n"
    );
    let noisy_test_patch = w.repo.diff_of(
        &[("tests/test_core.py", Some(noisy_tests.as_bytes()))],
        false,
    );
    // A test that hangs.
    let hang_tests = format!(
        "{TESTS_BASE}\n    def test_high(self):\n        import time\n        time.sleep(600)\n"
    );
    let hang_test_patch = w.repo.diff_of(
        &[("tests/test_core.py", Some(hang_tests.as_bytes()))],
        false,
    );

    let rows = vec![
        w.row("w-escape"),
        instance(
            "w-binary",
            "acme/widgets",
            &w.base,
            &bin_gold,
            &bin_test_patch,
            &["tests.test_core.TestClamp.test_data"],
            &[P2P],
        ),
        instance(
            "w-noisy",
            "acme/widgets",
            &w.base,
            &w.gold,
            &noisy_test_patch,
            &[F2P],
            &[P2P],
        ),
        instance(
            "w-hang",
            "acme/widgets",
            &w.base,
            &w.gold,
            &hang_test_patch,
            &[F2P],
            &[P2P],
        ),
        w.row("w-empty"),
    ];
    sb.write("dataset.jsonl", &jsonl(&rows));
    let preds = vec![
        prediction("w-escape", "m", Some(escape)),
        prediction("w-binary", "m", Some(&bin_gold)),
        prediction("w-noisy", "m", Some(&w.gold)),
        prediction("w-hang", "m", Some(&w.gold)),
        prediction("w-empty", "m", None),
    ];
    sb.write("preds.jsonl", &jsonl(&preds));
    let out = sb.run(&w.args("odd", "preds.jsonl", &["--timeout", "5"]));
    assert_eq!(out.status.code(), Some(exit::OK));
    assert_eq!(sb.outcome("odd", "m", "w-escape"), "patch_apply_failed");
    assert!(!sb.path().join("escaped.txt").exists());
    assert_eq!(sb.outcome("odd", "m", "w-binary"), "resolved");
    assert_eq!(sb.outcome("odd", "m", "w-noisy"), "resolved");
    let noisy_log = std::fs::read(
        sb.path()
            .join("logs/run_evaluation/odd/m/w-noisy/test_output.txt"),
    )
    .unwrap();
    assert!(
        String::from_utf8(noisy_log).unwrap().contains('\u{FFFD}'),
        "non-UTF-8 bytes are replaced, not fatal"
    );
    assert_eq!(sb.outcome("odd", "m", "w-hang"), "tests_timed_out");
    assert_eq!(sb.outcome("odd", "m", "w-empty"), "empty_patch");
    let s = sb.summary("m", "odd");
    assert_eq!(
        s["resolved_ids"],
        serde_json::json!(["w-binary", "w-noisy"])
    );
    assert_eq!(s["error_ids"], serde_json::json!(["w-escape", "w-hang"]));
    assert_eq!(s["empty_patch_ids"], serde_json::json!(["w-empty"]));
    assert_eq!(s["patchgrade"]["outcomes"]["tests_timed_out"], 1);
    // As in the reference: no report.json for apply failures and timeouts.
    assert!(!sb
        .path()
        .join("logs/run_evaluation/odd/m/w-hang/report.json")
        .exists());
    let hang_log = std::fs::read_to_string(
        sb.path()
            .join("logs/run_evaluation/odd/m/w-hang/test_output.txt"),
    )
    .unwrap();
    assert!(
        hang_log.contains("Timeout error: 5 seconds exceeded."),
        "{hang_log}"
    );
}

#[test]
fn bad_inputs_stop_before_any_work_with_file_and_line() {
    let w = widgets();
    let sb = &w.sb;
    let good = w.row("acme__widgets-1").to_string();
    sb.write("malformed.jsonl", &format!("{good}\n{{\"instance_id\": \n"));
    let out = sb.run(&[
        "run",
        "--dataset",
        "malformed.jsonl",
        "--predictions",
        "gold",
        "--run-id",
        "x",
        "--backend",
        "local",
    ]);
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("malformed.jsonl:2:"), "{err}");
    assert!(!sb.path().join("logs").exists(), "no work was done");

    sb.write(
        "missing.jsonl",
        "{\"instance_id\": \"a\", \"repo\": \"o/r\"}\n",
    );
    let out = sb.run(&[
        "run",
        "--dataset",
        "missing.jsonl",
        "--predictions",
        "gold",
        "--run-id",
        "x",
        "--backend",
        "local",
    ]);
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("missing.jsonl:1:") && err.contains("base_commit"),
        "{err}"
    );

    sb.write("dataset.jsonl", &format!("{good}\n"));
    sb.write(
        "preds.jsonl",
        &jsonl(&[
            prediction("acme__widgets-1", "m", Some("x")),
            prediction("nope-9", "m", Some("x")),
        ]),
    );
    let out = sb.run(&[
        "run",
        "--dataset",
        "dataset.jsonl",
        "--predictions",
        "preds.jsonl",
        "--run-id",
        "x",
        "--backend",
        "local",
    ]);
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope-9"));
    assert!(!sb.path().join("logs").exists(), "no work was done");
}

#[test]
fn instance_ids_filter_and_unknown_ids() {
    let w = widgets();
    let rows = vec![w.row("w-1"), w.row("w-2")];
    w.sb.write("dataset.jsonl", &jsonl(&rows));
    let out = w.sb.run(&w.args("f", "gold", &["--instance-ids", "w-2"]));
    assert_eq!(out.status.code(), Some(exit::OK));
    let s = w.sb.summary("gold", "f");
    assert_eq!(s["total_instances"], 1);
    assert_eq!(s["resolved_ids"], serde_json::json!(["w-2"]));
    assert!(!w.sb.path().join("logs/run_evaluation/f/gold/w-1").exists());
    let out = w.sb.run(&w.args("f2", "gold", &["--instance-ids", "w-3"]));
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT));
    assert!(String::from_utf8_lossy(&out.stderr).contains("w-3"));
}

/// A script killed before its end marker: unresolved as in the reference,
/// and the detail quotes how far the log got.
#[test]
fn a_log_without_its_markers_is_unresolved_and_says_where_it_stopped() {
    let spec = "repo: acme/widgets\nversions:\n  \"*\":\n    test_cmd: python3 -m unittest -v; kill -9 $$\n    log_parser: unittest\n";
    let w = Widgets::new(spec, &[]);
    w.sb.write("dataset.jsonl", &jsonl(&[w.row("acme__widgets-1")]));
    let out = w.sb.run(&w.args("km", "gold", &[]));
    assert_eq!(
        out.status.code(),
        Some(exit::OK),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rec = w.sb.record("km", "gold", "acme__widgets-1");
    assert_eq!(rec["outcome"], "unresolved", "{rec}");
    assert_eq!(rec["ungradable"]["kind"], "missing_markers", "{rec}");
    let detail = rec["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with("ungradable log: test output markers missing; its last line: + kill -9"),
        "{rec}"
    );
}
