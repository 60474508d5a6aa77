//! End-to-end tests of `patchgrade run` with the local backend.

mod common;

use common::widgets::*;
use common::*;
use serde_json::Value;

const SPEC: &str = "repo: acme/widgets\nversions:\n  \"*\":\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";

/// The widgets fixture with a later commit holding the fix: the checkout
/// must not expose it.
fn widgets() -> Widgets {
    let w = Widgets::new(SPEC, &[]);
    w.repo.commit(
        &[("widgets/core.py", Some(CORE_FIXED.as_bytes()))],
        "the future fix",
    );
    w
}

impl Widgets {
    fn args<'a>(&'a self, run_id: &'a str, preds: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut a = vec![
            "run",
            "--dataset",
            "dataset.jsonl",
            "--predictions",
            preds,
            "--run-id",
            run_id,
            "--backend",
            "local",
            "--specs",
            "specs",
            "--mirror-dir",
            "mirrors",
            "--max-workers",
            "2",
        ];
        a.extend_from_slice(extra);
        a
    }
}

#[test]
fn gold_resolves_and_a_wrong_patch_does_not() {
    let w = widgets();
    let row = w.row("acme__widgets-1");
    w.sb.write("dataset.jsonl", &jsonl(&[row]));
    let out = w.sb.run(&w.args("g", "gold", &["--json"]));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(w.sb.outcome("g", "gold", "acme__widgets-1"), "resolved");
    // --json prints the summary on stdout, reference keys included.
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["resolved_ids"],
        serde_json::json!(["acme__widgets-1"])
    );
    assert_eq!(summary["schema_version"], 2);
    assert_eq!(summary, w.sb.summary("gold", "g"));
    // report.json in the reference schema.
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(
            w.sb.path()
                .join("logs/run_evaluation/g/gold/acme__widgets-1/report.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let r = &report["acme__widgets-1"];
    assert_eq!(r["resolved"], true);
    assert_eq!(r["patch_successfully_applied"], true);
    assert_eq!(
        r["tests_status"]["FAIL_TO_PASS"]["success"],
        serde_json::json!([F2P])
    );
    assert_eq!(
        r["tests_status"]["PASS_TO_PASS"]["success"],
        serde_json::json!([P2P])
    );
    for f in [
        "patch.diff",
        "eval.sh",
        "test_output.txt",
        "run_instance.log",
    ] {
        assert!(
            w.sb.path()
                .join("logs/run_evaluation/g/gold/acme__widgets-1")
                .join(f)
                .is_file(),
            "{f}"
        );
    }

    w.sb.write(
        "wrong.jsonl",
        &jsonl(&[prediction("acme__widgets-1", "m", Some(&w.wrong))]),
    );
    let out = w.sb.run(&w.args("w", "wrong.jsonl", &[]));
    assert_eq!(out.status.code(), Some(0));
    let rec = w.sb.record("w", "m", "acme__widgets-1");
    assert_eq!(rec["outcome"], "unresolved");
    assert_eq!(
        rec["grade"]["fail_to_pass"]["failure"],
        serde_json::json!([F2P])
    );
}

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
    assert_eq!(out.status.code(), Some(0));
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
    assert_eq!(out.status.code(), Some(2));
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
    assert_eq!(out.status.code(), Some(2));
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
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope-9"));
    assert!(!sb.path().join("logs").exists(), "no work was done");
}

#[test]
fn rerun_reuses_results_only_for_the_same_patch() {
    let w = widgets();
    let sb = &w.sb;
    let row = w.row("acme__widgets-1");
    sb.write("dataset.jsonl", &jsonl(&[row]));
    sb.write(
        "preds.jsonl",
        &jsonl(&[prediction("acme__widgets-1", "m", Some(&w.gold))]),
    );
    assert_eq!(
        sb.run(&w.args("r", "preds.jsonl", &[])).status.code(),
        Some(0)
    );
    let first = sb.record("r", "m", "acme__widgets-1");
    let out = sb.run(&w.args("r", "preds.jsonl", &[]));
    assert!(String::from_utf8_lossy(&out.stderr).contains("(reused)"));
    assert_eq!(
        sb.record("r", "m", "acme__widgets-1"),
        first,
        "reused result is untouched"
    );

    // Same run id, different patch: evaluated again (the reference would
    // wrongly reuse the old report).
    sb.write(
        "preds.jsonl",
        &jsonl(&[prediction("acme__widgets-1", "m", Some(&w.wrong))]),
    );
    let out = sb.run(&w.args("r", "preds.jsonl", &[]));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("(reused)"));
    assert_eq!(sb.outcome("r", "m", "acme__widgets-1"), "unresolved");
}

#[test]
fn demo_gives_the_expected_outcome_for_every_instance() {
    let sb = Sandbox::new();
    let demo = project_root().join("instances/demo");
    let ds = demo.join("dataset.jsonl");
    let preds = demo.join("predictions.jsonl");
    let out = sb.run(&[
        "run",
        "--dataset",
        ds.to_str().unwrap(),
        "--predictions",
        preds.to_str().unwrap(),
        "--run-id",
        "demo",
        "--backend",
        "local",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = std::fs::read_to_string(&preds).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for line in text.lines() {
        let p: Value = serde_json::from_str(line).unwrap();
        let id = p["instance_id"].as_str().unwrap();
        let expected = p["expected_outcome"].as_str().unwrap();
        assert_eq!(sb.outcome("demo", "demo-agent", id), expected, "{id}");
        seen.insert(expected.to_string());
    }
    for needed in [
        "resolved",
        "unresolved",
        "patch_apply_failed",
        "empty_patch",
    ] {
        assert!(seen.contains(needed), "the demo covers {needed}");
    }
    // Instance 3 is the broken PASS_TO_PASS case.
    let rec = sb.record("demo", "demo-agent", "patchgrade__demo-calc-3");
    assert!(!rec["grade"]["pass_to_pass"]["failure"]
        .as_array()
        .unwrap()
        .is_empty());
    assert!(rec["grade"]["fail_to_pass"]["failure"]
        .as_array()
        .unwrap()
        .is_empty());

    // Gold resolves every demo instance.
    let out = sb.run(&[
        "run",
        "--dataset",
        ds.to_str().unwrap(),
        "--predictions",
        "gold",
        "--run-id",
        "demo-gold",
        "--backend",
        "local",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let s = sb.summary("gold", "demo-gold");
    assert_eq!(s["resolved_instances"], 5, "{s}");
}

/// A pytest project installed into a cached venv from PyPI: editable (the
/// eval skips the reinstall) and non-editable (the eval reinstalls offline).
/// Either way the tests must see the candidate's code.
#[test]
fn local_venv_tests_the_candidate_code_editable_or_not() {
    if !available("PyPI", "PATCHGRADE_REQUIRE_PYPI", pypi_reachable()) {
        return;
    }
    let sb = Sandbox::new();
    let repo = FixtureRepo::new(&sb, "acme/pyproj");
    let pyproject = "[build-system]\nrequires = [\"setuptools>=70\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"pyproj\"\nversion = \"0.1\"\n\n[tool.setuptools]\npackages = [\"pyproj\"]\n";
    let tests = "from pyproj import area\n\n\ndef test_square():\n    assert area(2) == 4\n";
    repo.commit(
        &[
            ("pyproject.toml", Some(pyproject.as_bytes())),
            (
                "pyproj/__init__.py",
                Some(b"def area(side):\n    return side + side\n"),
            ),
            ("tests/test_area.py", Some(tests.as_bytes())),
        ],
        "initial",
    );
    let base = repo.head();
    let gold = repo.diff_of(
        &[(
            "pyproj/__init__.py",
            Some(b"def area(side):\n    return side * side\n"),
        )],
        false,
    );
    let wrong = repo.diff_of(
        &[(
            "pyproj/__init__.py",
            Some(b"def area(side):\n    return side ** 3\n"),
        )],
        false,
    );
    // Gold again, by way of a new module: a file list that changes, which
    // only a reinstall with pip gets right.
    let gold_new_file = repo.diff_of(
        &[
            (
                "pyproj/__init__.py",
                Some(b"from pyproj.sq import area  # noqa: F401\n"),
            ),
            (
                "pyproj/sq.py",
                Some(b"def area(side):\n    return side * side\n"),
            ),
        ],
        false,
    );
    let new_tests = format!("{tests}\n\ndef test_three():\n    assert area(3) == 9\n");
    let test_patch = repo.diff_of(&[("tests/test_area.py", Some(new_tests.as_bytes()))], false);
    let f2p = ["tests/test_area.py::test_three"];
    sb.write(
        "dataset.jsonl",
        &jsonl(&[
            instance(
                "acme__pyproj-1",
                "acme/pyproj",
                &base,
                &gold,
                &test_patch,
                &f2p,
                &[],
            ),
            instance(
                "acme__pyproj-2",
                "acme/pyproj",
                &base,
                &gold,
                &test_patch,
                &f2p,
                &[],
            ),
            instance(
                "acme__pyproj-3",
                "acme/pyproj",
                &base,
                &gold,
                &test_patch,
                &f2p,
                &[],
            ),
        ]),
    );
    for (mode, install) in [
        ("editable", "python -m pip install -e ."),
        ("copy", "python -m pip install ."),
    ] {
        let spec = format!(
            "repo: acme/pyproj\nversions:\n  \"*\":\n    python: \"3.11\"\n    pip_packages: [\"pytest==8.3.3\", \"setuptools>=70\", \"wheel\"]\n    install: {install}\n    test_cmd: pytest -rA\n    log_parser: pytest\n"
        );
        sb.write(&format!("specs-{mode}/pyproj.yaml"), &spec);
        sb.write(
            "preds.jsonl",
            &jsonl(&[
                prediction("acme__pyproj-1", "m", Some(&gold)),
                prediction("acme__pyproj-2", "m", Some(&wrong)),
                prediction("acme__pyproj-3", "m", Some(&gold_new_file)),
            ]),
        );
        let specs = format!("specs-{mode}");
        let out = sb.run(&[
            "run",
            "--dataset",
            "dataset.jsonl",
            "--predictions",
            "preds.jsonl",
            "--run-id",
            mode,
            "--backend",
            "local",
            "--specs",
            &specs,
            "--mirror-dir",
            "mirrors",
        ]);
        assert_eq!(out.status.code(), Some(0), "{mode}");
        assert_eq!(
            sb.outcome(mode, "m", "acme__pyproj-1"),
            "resolved",
            "{mode}"
        );
        assert_eq!(
            sb.outcome(mode, "m", "acme__pyproj-2"),
            "unresolved",
            "{mode}"
        );
        assert_eq!(
            sb.outcome(mode, "m", "acme__pyproj-3"),
            "resolved",
            "{mode}"
        );
        // The tests import the installed copy (tests/ has no __init__.py):
        // the copy of a modified file stands in for the reinstall, which a
        // new file forces.
        let log = |id: &str| {
            std::fs::read_to_string(
                sb.path()
                    .join("logs/run_evaluation")
                    .join(mode)
                    .join("m")
                    .join(id)
                    .join("test_output.txt"),
            )
            .unwrap()
        };
        for id in ["acme__pyproj-1", "acme__pyproj-2"] {
            assert_eq!(
                log(id).contains("patchgrade: copied 1 changed file(s) into the install"),
                mode == "copy",
                "{mode} {id}: {}",
                log(id)
            );
        }
        assert_eq!(
            log("acme__pyproj-3").contains(
                "patchgrade: reinstalling with pip, the candidate adds, deletes or renames files"
            ),
            mode == "copy",
            "{mode}: {}",
            log("acme__pyproj-3")
        );
        let script = std::fs::read_to_string(
            sb.path()
                .join("logs/run_evaluation")
                .join(mode)
                .join("m/acme__pyproj-1/eval.sh"),
        )
        .unwrap();
        assert_eq!(
            script.contains("--no-deps --no-build-isolation --no-index"),
            mode == "copy",
            "{script}"
        );
    }
    // Both runs share one cached env per spec: two env folders, not four.
    assert_eq!(
        std::fs::read_dir(sb.cache().join("envs"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().is_dir())
            .count(),
        2
    );
}

/// Under bubblewrap the tests have no network: a server listening on the
/// host's loopback cannot be reached from inside, and files outside the
/// workspace cannot be written.
#[test]
fn local_sandbox_cuts_network_and_protects_the_host() {
    if !available("bubblewrap", "PATCHGRADE_REQUIRE_SANDBOX", bwrap_works()) {
        return;
    }
    let w = widgets();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let outside = w.sb.path().join("outside.txt");
    let probe = format!(
        "{TESTS_BASE}\n    def test_high(self):\n        import socket\n        try:\n            socket.create_connection(('127.0.0.1', {port}), timeout=3).close()\n            reached = True\n        except OSError:\n            reached = False\n        try:\n            open({outside:?}, 'w').write('x')\n            wrote = True\n        except OSError:\n            wrote = False\n        self.assertEqual((reached, wrote), (False, False))\n"
    );
    let probe_patch = w
        .repo
        .diff_of(&[("tests/test_core.py", Some(probe.as_bytes()))], false);
    let row = instance(
        "w-probe",
        "acme/widgets",
        &w.base,
        &w.gold,
        &probe_patch,
        &[F2P],
        &[P2P],
    );
    w.sb.write("dataset.jsonl", &jsonl(&[row]));
    let out = w.sb.run(&w.args("sbx", "gold", &[]));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(w.sb.outcome("sbx", "gold", "w-probe"), "resolved");
    assert!(!outside.exists());
    // The same probe without the sandbox reaches both: the test can fail.
    let out = w.sb.run(&w.args("nosbx", "gold", &["--no-sandbox"]));
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsandboxed"));
    assert_eq!(w.sb.outcome("nosbx", "gold", "w-probe"), "unresolved");
    assert!(outside.exists());
    drop(listener);
}

#[test]
fn instance_ids_filter_and_unknown_ids() {
    let w = widgets();
    let rows = vec![w.row("w-1"), w.row("w-2")];
    w.sb.write("dataset.jsonl", &jsonl(&rows));
    let out = w.sb.run(&w.args("f", "gold", &["--instance-ids", "w-2"]));
    assert_eq!(out.status.code(), Some(0));
    let s = w.sb.summary("gold", "f");
    assert_eq!(s["total_instances"], 1);
    assert_eq!(s["resolved_ids"], serde_json::json!(["w-2"]));
    assert!(!w.sb.path().join("logs/run_evaluation/f/gold/w-1").exists());
    let out = w.sb.run(&w.args("f2", "gold", &["--instance-ids", "w-3"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("w-3"));
}

/// Several samples per instance: each is evaluated on its own, identical
/// patches once, and every sample gets its record.
#[test]
fn samples_are_evaluated_each_and_identical_patches_once() {
    let w = widgets();
    let row = w.row("acme__widgets-1");
    w.sb.write("dataset.jsonl", &jsonl(&[row]));
    let preds = vec![
        prediction("acme__widgets-1", "m", Some(&w.gold)),
        prediction("acme__widgets-1", "m", Some(&w.wrong)),
        prediction("acme__widgets-1", "m", Some(&w.gold)),
        prediction("acme__widgets-1", "m", None),
    ];
    w.sb.write("preds.jsonl", &jsonl(&preds));
    let out = w.sb.run(&w.args("s", "preds.jsonl", &[]));
    assert_eq!(out.status.code(), Some(0));
    let outcomes: Vec<String> = (0..4)
        .map(|k| w.sb.outcome("s", "m", &format!("acme__widgets-1@{k}")))
        .collect();
    assert_eq!(
        outcomes,
        ["resolved", "unresolved", "resolved", "empty_patch"]
    );
    let third = w.sb.record("s", "m", "acme__widgets-1@2");
    assert_eq!(third["sample_id"], "2");
    assert_eq!(
        third["evaluated_as"], "0",
        "the identical patch was evaluated once"
    );
    assert!(w
        .sb
        .path()
        .join("logs/run_evaluation/s/m/acme__widgets-1@2/report.json")
        .is_file());
    // Explicit sample ids name the folders; a repeated one is an error.
    let mut a = prediction("acme__widgets-1", "m2", Some(&w.gold));
    a["sample_id"] = serde_json::json!(7);
    let mut b = prediction("acme__widgets-1", "m2", Some(&w.wrong));
    b["sample_id"] = serde_json::json!("7");
    w.sb.write("dup.jsonl", &jsonl(&[a.clone()]));
    assert_eq!(
        w.sb.run(&w.args("s2", "dup.jsonl", &[])).status.code(),
        Some(0)
    );
    assert_eq!(w.sb.outcome("s2", "m2", "acme__widgets-1@7"), "resolved");
    w.sb.write("dup.jsonl", &jsonl(&[a, b]));
    let out = w.sb.run(&w.args("s3", "dup.jsonl", &[]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sample id 7"));
}

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
    assert_eq!(out.status.code(), Some(0));
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
    assert_eq!(sb.run(&args).status.code(), Some(0));
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
    assert_eq!(sb.run(&args).status.code(), Some(0));
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
    assert_eq!(out.status.code(), Some(0));
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
    assert_eq!(out.status.code(), Some(0));
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
    assert_eq!(w.sb.run(&args).status.code(), Some(0));
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
