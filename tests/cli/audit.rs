//! The audit of resolved passes from the command line: the static checks
//! during `run`, `patchgrade audit --rerun` (held-out tests, differential
//! testing against gold) and the future-history check inside the
//! environment.

use super::*;
use patchgrade::exit;

/// Resolved passes are audited: a fix that also edits the tests' setup, or
/// that copies the issue's code, is resolved but suspect, with evidence.
#[test]
fn resolved_passes_are_audited_clean_or_suspect() {
    let w = widgets();
    let mut leaky = w.row("w-leak");
    leaky["problem_statement"] =
        serde_json::json!("clamp ignores hi. This fixes it:\n```python\ndef clamp(x, lo, hi):\n    return min(hi, max(lo, x))\n```\n");
    let rows = vec![w.row("w-clean"), w.row("w-tamper"), leaky];
    w.sb.write("dataset.jsonl", &jsonl(&rows));
    // The fix plus a new conftest.py (diffs taken against HEAD, which holds
    // the future fix, so the two parts are made apart).
    let conftest = w.repo.diff_of(
        &[(
            "tests/conftest.py",
            Some(b"import pytest\n\ncollect_ignore = ['test_core.py']\n"),
        )],
        false,
    );
    let tamper = format!("{}{conftest}", w.gold);
    let preds = vec![
        prediction("w-clean", "m", Some(&w.gold)),
        prediction("w-tamper", "m", Some(&tamper)),
        prediction("w-leak", "m", Some(&w.gold)),
    ];
    w.sb.write("preds.jsonl", &jsonl(&preds));
    let out = w.sb.run(&w.args("a", "preds.jsonl", &[]));
    assert_eq!(out.status.code(), Some(exit::OK));
    for id in ["w-clean", "w-tamper", "w-leak"] {
        assert_eq!(w.sb.outcome("a", "m", id), "resolved", "{id}");
    }
    assert_eq!(
        w.sb.record("a", "m", "w-clean")["audit"]["verdict"],
        "clean"
    );
    let t = w.sb.record("a", "m", "w-tamper");
    assert_eq!(t["audit"]["verdict"], "suspect");
    let reason = &t["audit"]["reasons"][0];
    assert_eq!(reason["kind"], "test_tampering");
    assert_eq!(reason["evidence"][0]["file"], "tests/conftest.py");
    let l = w.sb.record("a", "m", "w-leak");
    assert_eq!(l["audit"]["verdict"], "suspect");
    assert!(
        l["audit"]["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["kind"] == "issue_leakage"),
        "{l}"
    );
    let s = w.sb.summary("m", "a");
    assert_eq!(s["patchgrade"]["audit"]["resolved"], 3);
    assert_eq!(s["patchgrade"]["audit"]["clean_resolved"], 1);
    assert_eq!(s["patchgrade"]["audit"]["suspect_resolved"], 2);
    assert_eq!(s["patchgrade"]["audit"]["reasons"]["test_tampering"], 1);
    // report.json keeps the reference keys and carries the audit under `patchgrade`.
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(
            w.sb.path()
                .join("logs/run_evaluation/a/m/w-tamper/report.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(report["w-tamper"]["resolved"], true);
    assert_eq!(
        report["w-tamper"]["patchgrade"]["audit"]["verdict"],
        "suspect"
    );
}

/// `patchgrade audit --rerun`: held-out tests catch an overfitted fix, and
/// differential testing against gold catches a fix that breaks a test the
/// instance's PASS_TO_PASS list does not name. Both pass the official tests.
#[test]
fn audit_rerun_finds_held_out_failures_and_gold_divergence() {
    let sb = Sandbox::new();
    let repo = FixtureRepo::new(&sb, "acme/shapes");
    let core =
        "def clamp(x, lo, hi):\n    return max(lo, x)\n\n\ndef scale(x, k):\n    return x * k\n";
    let tests = "import unittest\nfrom shapes.core import clamp, scale\n\n\nclass TestShapes(unittest.TestCase):\n    def test_low(self):\n        self.assertEqual(clamp(-5, 0, 3), 0)\n\n    def test_scale(self):\n        self.assertEqual(scale(2, 3), 6)\n";
    repo.commit(
        &[
            ("shapes/__init__.py", Some(b"")),
            ("shapes/core.py", Some(core.as_bytes())),
            ("tests/__init__.py", Some(b"")),
            ("tests/test_core.py", Some(tests.as_bytes())),
        ],
        "initial",
    );
    let base = repo.head();
    let fixed = core.replace("return max(lo, x)", "return min(hi, max(lo, x))");
    let gold = repo.diff_of(&[("shapes/core.py", Some(fixed.as_bytes()))], false);
    let diverging = repo.diff_of(
        &[(
            "shapes/core.py",
            Some(fixed.replace("return x * k", "return x + k").as_bytes()),
        )],
        false,
    );
    let overfit = repo.diff_of(
        &[(
            "shapes/core.py",
            Some(
                core.replace("return max(lo, x)", "return 3 if x == 9 else max(lo, x)")
                    .as_bytes(),
            ),
        )],
        false,
    );
    let with_high =
        format!("{tests}\n    def test_high(self):\n        self.assertEqual(clamp(9, 0, 3), 3)\n");
    let test_patch = repo.diff_of(&[("tests/test_core.py", Some(with_high.as_bytes()))], false);
    let held = format!(
        "{tests}\n    def test_high_far(self):\n        self.assertEqual(clamp(100, 0, 3), 3)\n"
    );
    let held_patch = repo.diff_of(&[("tests/test_core.py", Some(held.as_bytes()))], false);
    let f2p = ["tests.test_core.TestShapes.test_high"];
    let p2p = ["tests.test_core.TestShapes.test_low"];
    let mut s_gold = instance(
        "s-gold",
        "acme/shapes",
        &base,
        &gold,
        &test_patch,
        &f2p,
        &p2p,
    );
    s_gold["HELD_OUT_TESTS"] = serde_json::json!(["tests.test_core.TestShapes.test_high_far"]);
    s_gold["held_out_test_patch"] = serde_json::json!(held_patch);
    let rows = vec![
        s_gold,
        instance(
            "s-div",
            "acme/shapes",
            &base,
            &gold,
            &test_patch,
            &f2p,
            &p2p,
        ),
        instance(
            "s-over",
            "acme/shapes",
            &base,
            &gold,
            &test_patch,
            &f2p,
            &p2p,
        ),
    ];
    sb.write("dataset.jsonl", &jsonl(&rows));
    sb.write(
        "held.jsonl",
        &(serde_json::json!({"instance_id": "s-over", "HELD_OUT_TESTS": ["tests.test_core.TestShapes.test_high_far"], "held_out_test_patch": held_patch}).to_string() + "\n"),
    );
    sb.write(
        "specs/shapes.yaml",
        &SPEC.replace("acme/widgets", "acme/shapes"),
    );
    let preds = vec![
        prediction("s-gold", "m", Some(&gold)),
        prediction("s-div", "m", Some(&diverging)),
        prediction("s-over", "m", Some(&overfit)),
    ];
    sb.write("preds.jsonl", &jsonl(&preds));
    let common = [
        "--backend",
        "local",
        "--specs",
        "specs",
        "--mirror-dir",
        "mirrors",
    ];
    let mut args = vec![
        "run",
        "--dataset",
        "dataset.jsonl",
        "--predictions",
        "preds.jsonl",
        "--run-id",
        "dyn",
    ];
    args.extend(common);
    assert_eq!(sb.run(&args).status.code(), Some(exit::OK));
    for id in ["s-gold", "s-div", "s-over"] {
        assert_eq!(
            sb.outcome("dyn", "m", id),
            "resolved",
            "{id} passes the official tests"
        );
    }
    // Static re-audit alone changes nothing for these.
    let mut args = vec!["audit", "logs/run_evaluation/dyn"];
    args.extend(common);
    assert_eq!(sb.run(&args).status.code(), Some(exit::OK));
    assert_eq!(sb.record("dyn", "m", "s-div")["audit"]["verdict"], "clean");

    let mut args = vec![
        "audit",
        "logs/run_evaluation/dyn",
        "--rerun",
        "--held-out",
        "held.jsonl",
        "--json",
    ];
    args.extend(common);
    let out = sb.run(&args);
    assert_eq!(out.status.code(), Some(exit::OK));
    assert_eq!(sb.record("dyn", "m", "s-gold")["audit"]["verdict"], "clean");
    let div = sb.record("dyn", "m", "s-div");
    assert_eq!(div["audit"]["verdict"], "suspect", "{div}");
    let r = &div["audit"]["reasons"][0];
    assert_eq!(r["kind"], "gold_divergence");
    assert_eq!(
        r["evidence"][0]["test_ids"],
        serde_json::json!(["tests.test_core.TestShapes.test_scale"])
    );
    let over = sb.record("dyn", "m", "s-over");
    assert_eq!(over["audit"]["verdict"], "suspect", "{over}");
    let r = &over["audit"]["reasons"][0];
    assert_eq!(r["kind"], "fails_held_out");
    assert_eq!(
        r["evidence"][0]["test_ids"],
        serde_json::json!(["tests.test_core.TestShapes.test_high_far"])
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["models"]["m"]["suspect_resolved"], 2);
}

/// The future-history check runs inside the environment the tests ran in
/// (so it also covers prebuilt images patchgrade did not make): a setup step
/// that leaves a newer commit behind makes every pass suspect; patchgrade's
/// own checkouts come out clean.
#[test]
fn history_newer_than_the_base_is_found_inside_the_environment() {
    let w = widgets();
    let row = w.row("w-1");
    w.sb.write("dataset.jsonl", &jsonl(&[row]));
    let out = w.sb.run(&w.args("h1", "gold", &[]));
    assert_eq!(out.status.code(), Some(exit::OK));
    let clean = w.sb.record("h1", "gold", "w-1");
    assert_eq!(clean["audit"]["verdict"], "clean", "{clean}");
    let log = std::fs::read_to_string(
        w.sb.path()
            .join("logs/run_evaluation/h1/gold/w-1/test_output.txt"),
    )
    .unwrap();
    assert!(
        log.contains(">>>>> History: 0 newer commits, 0 newer tags"),
        "{log}"
    );

    // An environment that carries a commit from after the base (as a full
    // clone would), left by a setup step.
    let leaky = format!(
        "{SPEC}    pre_install:\n      - \"git -c user.email=dev@upstream.invalid -c user.name=dev commit -q --allow-empty -m 'the fix'\"\n      - \"git tag v9.9\"\n"
    );
    w.sb.write("specs-leaky/widgets.yaml", &leaky);
    let mut args = w.args("h2", "gold", &[]);
    let pos = args.iter().position(|a| *a == "specs").unwrap();
    args[pos] = "specs-leaky";
    assert_eq!(w.sb.run(&args).status.code(), Some(exit::OK));
    let rec = w.sb.record("h2", "gold", "w-1");
    assert_eq!(rec["outcome"], "resolved");
    assert_eq!(rec["audit"]["verdict"], "suspect", "{rec}");
    assert!(
        rec["audit"]["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["kind"] == "future_history"),
        "{rec}"
    );
}
