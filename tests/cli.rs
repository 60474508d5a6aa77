//! End-to-end tests of `patchgrade run` with the local backend.
//!
//! The widgets fixture and the run arguments are here, with the runs of
//! gold, wrong, repeated and sampled patches, the demo and the local venv
//! and sandbox. Bad and hostile inputs are in tests/cli/inputs.rs, the
//! audit of resolved passes (static, `--rerun`, history) in
//! tests/cli/audit.rs, the start order of evaluations in tests/cli/schedule.rs,
//! a sandbox that fails to start in tests/cli/sandbox.rs.

#[path = "cli/audit.rs"]
mod audit;
mod common;
#[path = "cli/inputs.rs"]
mod inputs;
#[path = "cli/sandbox.rs"]
mod sandbox;
#[path = "cli/schedule.rs"]
mod schedule;

use common::widgets::*;
use common::*;
use patchgrade::exit;
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
        let mut a = local_args(run_id, preds, "specs");
        a.extend(["--max-workers", "2"]);
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
    assert_eq!(out.status.code(), Some(exit::OK));
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
    assert_eq!(out.status.code(), Some(exit::OK));
    let rec = w.sb.record("w", "m", "acme__widgets-1");
    assert_eq!(rec["outcome"], "unresolved");
    assert_eq!(
        rec["grade"]["fail_to_pass"]["failure"],
        serde_json::json!([F2P])
    );
}

#[test]
fn quiet_keeps_the_results_and_drops_the_progress() {
    let w = widgets();
    let row = w.row("acme__widgets-1");
    w.sb.write("dataset.jsonl", &jsonl(&[row]));
    let loud = w.sb.run(&w.args("loud", "gold", &[]));
    assert_eq!(loud.status.code(), Some(exit::OK));
    let loud_err = String::from_utf8_lossy(&loud.stderr);
    assert!(loud_err.contains("evaluating 1 predictions"), "{loud_err}");
    let out = w.sb.run(&w.args("q", "gold", &["--quiet", "--json"]));
    assert_eq!(out.status.code(), Some(exit::OK));
    assert_eq!(w.sb.outcome("q", "gold", "acme__widgets-1"), "resolved");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("evaluating 1 predictions"), "{err}");
    assert!(!err.contains("[1/1]"), "{err}");
    assert!(err.contains("summary written to"), "{err}");
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["resolved_ids"],
        serde_json::json!(["acme__widgets-1"])
    );
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
        Some(exit::OK)
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
    assert_eq!(out.status.code(), Some(exit::OK));
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
    assert_eq!(out.status.code(), Some(exit::OK));
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
        assert_eq!(out.status.code(), Some(exit::OK), "{mode}");
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
    assert_eq!(out.status.code(), Some(exit::OK));
    assert_eq!(w.sb.outcome("sbx", "gold", "w-probe"), "resolved");
    assert!(!outside.exists());
    // The same probe without the sandbox reaches both: the test can fail.
    let out = w.sb.run(&w.args("nosbx", "gold", &["--no-sandbox"]));
    assert_eq!(out.status.code(), Some(exit::OK));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsandboxed"));
    assert_eq!(w.sb.outcome("nosbx", "gold", "w-probe"), "unresolved");
    assert!(outside.exists());
    drop(listener);
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
    assert_eq!(out.status.code(), Some(exit::OK));
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
        Some(exit::OK)
    );
    assert_eq!(w.sb.outcome("s2", "m2", "acme__widgets-1@7"), "resolved");
    w.sb.write("dup.jsonl", &jsonl(&[a, b]));
    let out = w.sb.run(&w.args("s3", "dup.jsonl", &[]));
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sample id 7"));
}
