//! `--eval-script dataset`: a dataset row carrying a reference-style
//! `eval_script` (tests/fixtures/dataset-script/eval_script.sh: conda
//! activation, `git diff`/`git checkout` at the base commit by its id, an
//! online-style `pip install -e .`) run unchanged by the real binary in
//! patchgrade's image on the real Docker engine, offline.
//!
//! Without a daemon the Docker test skips, printing why, unless
//! PATCHGRADE_REQUIRE_DOCKER=1 (set by .ci/run), where it fails.

mod common;

use patchgrade::exit;

use common::widgets::*;
use common::*;
use serde_json::Value;
use sha2::{Digest, Sha256};

const SHAPE: &str = include_str!("fixtures/dataset-script/eval_script.sh");

/// An installable package (legacy setup.py: pip builds it with setuptools,
/// which the eval can only do offline without build isolation).
const SETUP_PY: &str =
    "from setuptools import setup\nsetup(name='widgets', version='0.1', packages=['widgets'])\n";

/// The spec builds the env offline too; its `env` and `eval_commands` run
/// before the dataset's script.
const SPEC: &str = "repo: acme/widgets\nversions:\n  \"*\":\n    python: \"3.11\"\n    install: python -m pip install --no-index --no-build-isolation -e .\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n    eval_commands: [\"export WIDGETS_EVAL_COMMAND=ran\"]\n    env:\n      WIDGETS_FROM_SPEC: \"yes\"\n";

/// The fixture's script for this instance.
fn eval_script(w: &Widgets, test_cmd: &str) -> String {
    SHAPE
        .replace("{base_commit}", &w.base)
        .replace("{test_files}", "tests/test_core.py")
        .replace("{test_patch}", &w.test_patch)
        .replace("{test_cmd}", test_cmd)
}

const TEST_CMD: &str = "test \"$WIDGETS_FROM_SPEC $WIDGETS_EVAL_COMMAND\" = 'yes ran' && python -m unittest -v tests.test_core";

fn sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn row(w: &Widgets, id: &str, script: Option<&str>) -> Value {
    let mut r = instance(
        id,
        "acme/widgets",
        &w.base,
        &w.gold,
        &w.test_patch,
        &[F2P],
        &[P2P],
    );
    if let Some(s) = script {
        r["eval_script"] = Value::String(s.to_string());
    }
    r
}

fn run(w: &Widgets, run_id: &str, extra: &[&str]) -> std::process::Output {
    let mut a = docker_args("run", "preds.jsonl", run_id);
    a.extend(["--max-workers", "2"]);
    a.extend_from_slice(extra);
    w.sb.run(&a)
}

fn test_log(w: &Widgets, run_id: &str, model: &str, id: &str) -> String {
    let p =
        w.sb.path()
            .join("logs/run_evaluation")
            .join(run_id)
            .join(model)
            .join(id)
            .join("test_output.txt");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_dataset_script_runs_unchanged_offline_and_keys_the_cache() {
    if !available(
        "a Docker daemon",
        "PATCHGRADE_REQUIRE_DOCKER",
        docker_answers(),
    ) {
        return;
    }
    let w = Widgets::new(SPEC, &[("setup.py", SETUP_PY.as_bytes())]);
    let script = eval_script(&w, TEST_CMD);
    // Gold with the test file tampered with: only the script's `git checkout
    // <base_commit> tests/test_core.py` (the base commit by its id) puts it
    // back, so that the test patch applies and test_low passes.
    let tests_broken = TESTS_BASE.replace("clamp(-5, 0, 3), 0)", "clamp(-5, 0, 3), 99)");
    let tampered = w.repo.diff_of(
        &[
            ("widgets/core.py", Some(CORE_FIXED.as_bytes())),
            ("tests/test_core.py", Some(tests_broken.as_bytes())),
        ],
        false,
    );
    w.sb.write(
        "dataset.jsonl",
        &jsonl(&[row(&w, "acme__widgets-1", Some(&script))]),
    );
    w.sb.write(
        "preds.jsonl",
        &jsonl(&[
            prediction("acme__widgets-1", "gold-model", Some(&w.gold)),
            prediction("acme__widgets-1", "wrong-model", Some(&w.wrong)),
            prediction("acme__widgets-1", "tamper-model", Some(&tampered)),
        ]),
    );

    let out = run(&w, "ds", &["--eval-script", "dataset"]);
    assert_eq!(out.status.code(), Some(exit::OK));
    let id = "acme__widgets-1";
    assert_eq!(w.sb.outcome("ds", "gold-model", id), "resolved");
    assert_eq!(w.sb.outcome("ds", "wrong-model", id), "unresolved");
    assert_eq!(w.sb.outcome("ds", "tamper-model", id), "resolved");
    let rec = w.sb.record("ds", "gold-model", id);
    assert_eq!(rec["eval_script"]["source"], "dataset");
    assert_eq!(rec["eval_script"]["sha256"], sha256(&script).as_str());
    // The script went in unchanged but for the test exit code recorded
    // around its End marker (as the reference's harness does), and ran as
    // the log shows.
    let dir =
        w.sb.path()
            .join("logs/run_evaluation/ds/gold-model")
            .join(id);
    let written = std::fs::read_to_string(dir.join("eval.sh")).unwrap();
    let end = ": '>>>>> End Test Output'\n";
    let (head, tail) = script.split_once(end).unwrap();
    let recorded = format!(
        "{head}PATCHGRADE_TEST_EXIT_CODE=$?\n{end}echo \">>>>> Test Exit Code: $PATCHGRADE_TEST_EXIT_CODE\"\n{tail}"
    );
    assert!(written.contains(&recorded), "{written}");
    assert_eq!(rec["test_exit_code"], 0, "{rec}");
    let log = test_log(&w, "ds", "gold-model", id);
    assert!(log.contains("running the dataset's eval_script"), "{log}");
    // `git diff <base_commit>` found the base by its id: the candidate's change.
    assert!(
        log.contains("diff --git a/widgets/core.py b/widgets/core.py"),
        "{log}"
    );
    // The conda lines found the stand-in.
    for bad in ["fatal:", "command not found", "No such file or directory"] {
        assert!(!log.contains(bad), "{bad}: {log}");
    }
    // The reinstall ran offline (no index, no build isolation) and worked.
    assert!(log.contains("Successfully installed widgets"), "{log}");
    assert!(!log.contains("No matching distribution"), "{log}");
    assert!(log.contains("+ : '>>>>> Start Test Output'"), "{log}");
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("../../run.json")).unwrap())
            .unwrap();
    assert_eq!(meta["setup"]["eval_script"], "dataset", "{meta}");

    // Same inputs: reused. The spec's script in the same run folder: not
    // the same inputs, evaluated again (and agreeing).
    let out = run(&w, "ds", &["--eval-script", "dataset"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("(reused)"));
    let out = run(&w, "ds", &[]);
    assert_eq!(out.status.code(), Some(exit::OK));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("(reused)"));
    let rec = w.sb.record("ds", "gold-model", id);
    assert!(rec.get("eval_script").is_none(), "{rec}");
    assert_eq!(rec["outcome"], "resolved");
    assert_eq!(w.sb.outcome("ds", "wrong-model", id), "unresolved");

    // Another eval_script is another input: evaluated again. This one runs
    // no tests: ungradable, so unresolved.
    let other = eval_script(&w, "echo no tests run by this script");
    w.sb.write(
        "dataset.jsonl",
        &jsonl(&[row(&w, "acme__widgets-1", Some(&other))]),
    );
    let out = run(&w, "ds", &["--eval-script", "dataset"]);
    assert_eq!(out.status.code(), Some(exit::OK));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("(reused)"));
    let rec = w.sb.record("ds", "gold-model", id);
    assert_eq!(rec["eval_script"]["sha256"], sha256(&other).as_str());
    assert_eq!(rec["outcome"], "unresolved", "{rec}");
    assert_eq!(rec["ungradable"]["kind"], "suite_did_not_run", "{rec}");

    // validate runs base and gold through the dataset's script too.
    w.sb.write(
        "dataset.jsonl",
        &jsonl(&[row(&w, "acme__widgets-1", Some(&script))]),
    );
    let out = w.sb.run(&[
        "validate",
        "--dataset",
        "dataset.jsonl",
        "--run-id",
        "ds-validate",
        "--gold-runs",
        "1",
        "--backend",
        "docker",
        "--specs",
        "specs",
        "--mirror-dir",
        "mirrors",
        "--base-image",
        "none",
        "--eval-script",
        "dataset",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(exit::OK));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["counts"]["valid"], 1, "{report}");
}

#[test]
fn an_instance_without_eval_script_or_a_local_backend_is_refused_before_anything_runs() {
    let w = Widgets::new(SPEC, &[]);
    let script = eval_script(&w, TEST_CMD);
    w.sb.write(
        "dataset.jsonl",
        &jsonl(&[
            row(&w, "acme__widgets-1", Some(&script)),
            row(&w, "acme__widgets-2", None),
        ]),
    );
    let base = [
        "run",
        "--dataset",
        "dataset.jsonl",
        "--predictions",
        "gold",
        "--run-id",
        "refused",
        "--specs",
        "specs",
        "--mirror-dir",
        "mirrors",
    ];
    let out =
        w.sb.run(&[&base[..], &["--eval-script", "dataset"]].concat());
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("dataset.jsonl: --eval-script dataset needs an eval_script field (a non-empty string) in every instance it runs; without one: acme__widgets-2\n"),
        "{err}"
    );
    assert!(!w.sb.path().join("logs/run_evaluation/refused").exists());

    // The instance that has one, on the local backend: refused too.
    let out = w.sb.run(
        &[
            &base[..],
            &[
                "--instance-ids",
                "acme__widgets-1",
                "--eval-script",
                "dataset",
                "--backend",
                "local",
            ],
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(exit::BAD_INPUT));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "--eval-script dataset runs each instance's eval_script in patchgrade's Docker images"
        ),
        "{err}"
    );
}
