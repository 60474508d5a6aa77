//! Issue 10: an audit that could not run is never "clean", and runs
//! remember their setup. Real binary, real git repositories made here, real
//! unittest runs on the local backend.

mod common;

use patchgrade::exit;
use std::process::Command;

use common::shapes::{shapes, Shapes, SHAPES_SPEC};
use common::{docker_args, instance, jsonl, prediction, FixtureRepo, Sandbox};
use serde_json::{json, Value};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn checks(rec: &Value) -> Vec<(String, String)> {
    rec["audit"]["checks"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["check"].as_str().unwrap_or("").to_string(),
                        c["status"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn reason_kinds(rec: &Value) -> Vec<String> {
    rec["audit"]["reasons"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| r["kind"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// `run --specs S --mirror-dir M`, then `audit RUN_DIR --rerun` with no
/// other flags: the audit reuses the run's setup and flags the planted
/// held-out failure. With the environment made unbuildable, the same audit
/// is inconclusive (exit 4, naming the instance and the cause), never clean.
#[test]
fn audit_rerun_reuses_the_run_setup_and_is_inconclusive_when_the_env_breaks() {
    let Shapes { sb, gold, overfit } = shapes();
    sb.write(
        "preds.jsonl",
        &jsonl(&[
            prediction("s-over", "m", Some(&overfit)),
            prediction("s-gold", "m", Some(&gold)),
        ]),
    );
    let out = sb.run(&[
        "run",
        "--dataset",
        "dataset.jsonl",
        "--predictions",
        "preds.jsonl",
        "--run-id",
        "rel",
        "--backend",
        "local",
        "--specs",
        "specs",
        "--mirror-dir",
        "mirrors",
        "--timeout",
        "300",
    ]);
    assert_eq!(out.status.code(), Some(exit::OK), "{}", stderr(&out));
    for id in ["s-over", "s-gold"] {
        assert_eq!(sb.outcome("rel", "m", id), "resolved");
    }

    // run.json holds the setup and the dataset's hash.
    let meta: Value = serde_json::from_str(
        &std::fs::read_to_string(sb.path().join("logs/run_evaluation/rel/run.json")).unwrap(),
    )
    .unwrap();
    let setup = &meta["setup"];
    let abs = |rel: &str| {
        std::path::absolute(sb.path().join(rel))
            .unwrap()
            .display()
            .to_string()
    };
    assert_eq!(setup["specs"], json!([abs("specs")]), "{meta}");
    assert_eq!(setup["mirror_dir"], json!(abs("mirrors")), "{meta}");
    assert_eq!(setup["cache_dir"], json!(abs("cache")), "{meta}");
    assert_eq!(setup["backend"], "local");
    assert_eq!(setup["timeout_secs"], 300);
    assert_eq!(setup["docker"]["memory"], "4g");
    assert_eq!(setup["docker"]["pids_limit"], 1024);
    let want_hash = {
        use sha2::{Digest, Sha256};
        let bytes = std::fs::read(sb.path().join("dataset.jsonl")).unwrap();
        format!("{:x}", Sha256::digest(&bytes))
    };
    assert_eq!(meta["dataset_sha256"], json!(want_hash));

    // No other flags: the run's specs and mirrors are used.
    let audit = ["audit", "logs/run_evaluation/rel", "--rerun", "--json"];
    let out = sb.run(&audit);
    assert_eq!(out.status.code(), Some(exit::OK), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("using the setup logs/run_evaluation/rel/run.json recorded"),
        "{}",
        stderr(&out)
    );
    let over = sb.record("rel", "m", "s-over");
    assert_eq!(over["audit"]["verdict"], "suspect", "{over}");
    assert_eq!(reason_kinds(&over), ["fails_held_out"]);
    assert_eq!(
        over["audit"]["reasons"][0]["evidence"][0]["test_ids"],
        json!(["tests.test_core.TestShapes.test_high_far"])
    );
    let good = sb.record("rel", "m", "s-gold");
    assert_eq!(good["audit"]["verdict"], "clean", "{good}");
    assert_eq!(
        checks(&good),
        [
            ("held_out".to_string(), "ran".to_string()),
            ("gold_divergence".to_string(), "ran".to_string())
        ]
    );
    let counts: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(counts["models"]["m"]["suspect_resolved"], 1);
    assert_eq!(counts["models"]["m"]["clean_resolved"], 1);

    // An unbuildable environment given on the command line: the override is
    // said, and no check can run.
    let broken =
        format!("{SHAPES_SPEC}    pre_install:\n      - \"echo the build breaks >&2; exit 3\"\n");
    sb.write("specs-broken/shapes.yaml", &broken);
    let out = sb.run(&[
        "audit",
        "logs/run_evaluation/rel",
        "--rerun",
        "--specs",
        "specs-broken",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(exit::INCONCLUSIVE), "{err}");
    assert!(
        err.contains(&format!(
            "using --specs specs-broken from the command line instead of run.json's {}",
            abs("specs")
        )),
        "{err}"
    );

    // The same audit, no flags, with the run's own spec broken in place.
    sb.write("specs/shapes.yaml", &broken);
    let out = sb.run(&["audit", "logs/run_evaluation/rel", "--rerun", "--json"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(exit::INCONCLUSIVE), "{err}");
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.starts_with("patchgrade: completed, but some results are inconclusive: 2 audit(s)"),
        "{last}"
    );
    for id in ["s-over", "s-gold"] {
        assert!(
            last.contains(&format!("m {id}: held_out: gold's held-out run")),
            "{last}"
        );
        let rec = sb.record("rel", "m", id);
        assert_eq!(rec["audit"]["verdict"], "inconclusive", "{rec}");
        assert!(reason_kinds(&rec).is_empty(), "{rec}");
        let c = &rec["audit"]["checks"][0];
        assert_eq!(c["check"], "held_out");
        assert_eq!(c["status"], "could_not_run");
        assert_eq!(c["outcome"], "environment_build_failed", "{rec}");
        assert_eq!(rec["audit"]["checks"][1]["status"], "could_not_run");
    }
    assert!(last.contains("environment_build_failed"), "{last}");
    let counts: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &counts["models"]["m"];
    assert_eq!(m["inconclusive_resolved"], 2, "{counts}");
    assert_eq!(m["clean_resolved"], 0);
    assert_eq!(m["suspect_resolved"], 0);
    assert_eq!(m["inconclusive_ids"], json!(["s-gold", "s-over"]));
    let written: Value = serde_json::from_str(
        &std::fs::read_to_string(sb.path().join("logs/run_evaluation/rel/audit.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(written["models"]["m"]["inconclusive_resolved"], 2);
    assert!(err.contains("m  s-gold  inconclusive  held_out: "), "{err}");
}

/// A stand-in for Django's tests/runtests.py: dotted labels only (a file
/// path is refused with Django's own error), unittest's verbose output.
const RUNTESTS: &str = r#"import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
labels = [a for a in sys.argv[1:] if not a.startswith("-") and a != "2"]
for label in labels:
    if label.endswith(".py") or os.path.isfile(label):
        raise RuntimeError(
            "One of the test labels is a path to a file: %r, which is not "
            "supported. Use a dotted module name or path to a directory "
            "instead." % label
        )
sys.path.insert(0, here)
sys.path.insert(1, os.path.dirname(here))
suite = unittest.defaultTestLoader.loadTestsFromNames(labels)
result = unittest.TextTestRunner(verbosity=2).run(suite)
sys.exit(0 if result.wasSuccessful() else 1)
"#;
const DJ_SPEC: &str = "repo: acme/djlike\nversions:\n  \"*\":\n    test_cmd: python3 tests/runtests.py --verbosity 2\n    log_parser: django\n    test_directives: django\n";
const OPS: &str =
    "def clamp(x, lo, hi):\n    return max(lo, x)\n\n\ndef scale(x, k):\n    return x * k\n";
const OPS_TESTS: &str = "import unittest\n\nfrom calc.ops import clamp, scale\n\n\nclass OpsTests(unittest.TestCase):\n    def test_low(self):\n        \"\"\"Values under the range are raised to it.\"\"\"\n        self.assertEqual(clamp(-5, 0, 3), 0)\n\n    def test_scale(self):\n        \"\"\"Scaling multiplies.\"\"\"\n        self.assertEqual(scale(2, 3), 6)\n";

/// unittest's name line of a docstring test, as this host's python3 prints
/// it (3.11 added the method to the parenthesis).
fn name_id(method: &str) -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.version_info >= (3, 11))"])
        .output()
        .expect("python3");
    if String::from_utf8_lossy(&out.stdout).trim() == "True" {
        format!("{method} (ops.tests.OpsTests.{method})")
    } else {
        format!("{method} (ops.tests.OpsTests)")
    }
}

/// A django-style project (runtests.py with dotted labels, tests with
/// docstrings, the `django` parser and directive rule): the divergence check
/// runs on dotted labels, the held-out check matches name-form ids, and a
/// held-out test that gold fails (or an id that matches nothing) leaves the
/// check inconclusive, never clean.
#[test]
fn django_style_project_dotted_labels_name_ids_and_gold_baseline() {
    let sb = Sandbox::new();
    let repo = FixtureRepo::new(&sb, "acme/djlike");
    repo.commit(
        &[
            ("calc/__init__.py", Some(b"")),
            ("calc/ops.py", Some(OPS.as_bytes())),
            ("tests/runtests.py", Some(RUNTESTS.as_bytes())),
            ("tests/ops/__init__.py", Some(b"")),
            ("tests/ops/tests.py", Some(OPS_TESTS.as_bytes())),
        ],
        "initial",
    );
    let base = repo.head();
    // The stand-in refuses a file path as Django does (what the divergence
    // runs passed before issue 10).
    let refused = Command::new("python3")
        .args(["tests/runtests.py", "tests/ops/tests.py"])
        .current_dir(repo.repo.workdir().unwrap())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("RuntimeError: One of the test labels is a path to a file"),
        "{refused:?}"
    );
    let fixed = OPS.replace("return max(lo, x)", "return min(hi, max(lo, x))");
    let gold = repo.diff_of(&[("calc/ops.py", Some(fixed.as_bytes()))], false);
    let overfit = OPS.replace("return max(lo, x)", "return 3 if x == 9 else max(lo, x)");
    let overfit = repo.diff_of(&[("calc/ops.py", Some(overfit.as_bytes()))], false);
    let diverging = fixed.replace("return x * k", "return x + k");
    let diverging = repo.diff_of(&[("calc/ops.py", Some(diverging.as_bytes()))], false);
    let method = |name: &str, doc: &str, body: &str| {
        format!("\n    def {name}(self):\n        \"\"\"{doc}\"\"\"\n        {body}\n")
    };
    let adding = |extra: &str| {
        let text = format!("{OPS_TESTS}{extra}");
        repo.diff_of(&[("tests/ops/tests.py", Some(text.as_bytes()))], false)
    };
    let test_patch = adding(&method(
        "test_high",
        "Values over the range are lowered to it.",
        "self.assertEqual(clamp(9, 0, 3), 3)",
    ));
    let far = method(
        "test_far",
        "Values far over the range are lowered too.",
        "self.assertEqual(clamp(100, 0, 3), 3)",
    );
    let wrong = method(
        "test_wrong",
        "An expectation gold does not meet.",
        "self.assertEqual(clamp(5, 0, 3), 5)",
    );
    let held_far = adding(&far);
    let held_wrong = adding(&format!("{far}{wrong}"));
    // FAIL_TO_PASS in the reference's docstring form, PASS_TO_PASS by name.
    let f2p = ["Values over the range are lowered to it."];
    let low = name_id("test_low");
    let p2p = [low.as_str()];
    let mut rows = Vec::new();
    for (id, held, ids) in [
        ("dj-over", &held_far, vec![name_id("test_far")]),
        ("dj-div", &held_far, vec![name_id("test_far")]),
        (
            "dj-goldfail",
            &held_wrong,
            vec![
                name_id("test_far"),
                name_id("test_wrong"),
                name_id("test_missing"),
            ],
        ),
    ] {
        let mut row = instance(id, "acme/djlike", &base, &gold, &test_patch, &f2p, &p2p);
        row["HELD_OUT_TESTS"] = json!(ids);
        row["held_out_test_patch"] = json!(held);
        rows.push(row);
    }
    sb.write("dataset.jsonl", &jsonl(&rows));
    sb.write("specs/djlike.yaml", DJ_SPEC);
    sb.write(
        "preds.jsonl",
        &jsonl(&[
            prediction("dj-over", "m", Some(&overfit)),
            prediction("dj-div", "m", Some(&diverging)),
            prediction("dj-goldfail", "m", Some(&gold)),
        ]),
    );
    let out = sb.run(&[
        "run",
        "--dataset",
        "dataset.jsonl",
        "--predictions",
        "preds.jsonl",
        "--run-id",
        "dj",
        "--backend",
        "local",
        "--specs",
        "specs",
        "--mirror-dir",
        "mirrors",
    ]);
    assert_eq!(out.status.code(), Some(exit::OK), "{}", stderr(&out));
    for id in ["dj-over", "dj-div", "dj-goldfail"] {
        let rec = sb.record("dj", "m", id);
        assert_eq!(rec["outcome"], "resolved", "{rec}");
    }

    let out = sb.run(&["audit", "logs/run_evaluation/dj", "--rerun", "--json"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(exit::INCONCLUSIVE), "{err}");
    let audit_dir = sb.path().join("logs/run_evaluation/dj.audit");
    // Divergence runs selected tests by dotted label, and the runner took them.
    let script =
        std::fs::read_to_string(audit_dir.join("divergence-gold-1/dj-over/eval.sh")).unwrap();
    assert!(script.contains("--verbosity 2 'ops.tests'"), "{script}");
    for leaf in ["divergence-gold-1/dj-over", "divergence-1-m@dj-div/dj-div"] {
        let log = std::fs::read_to_string(audit_dir.join(leaf).join("test_output.txt")).unwrap();
        assert!(!log.contains("path to a file"), "{leaf}: {log}");
        assert!(log.contains("Scaling multiplies. ... "), "{leaf}: {log}");
    }

    // Held-out by name form: flagged.
    let over = sb.record("dj", "m", "dj-over");
    assert_eq!(over["audit"]["verdict"], "suspect", "{over}");
    assert_eq!(reason_kinds(&over), ["fails_held_out"]);
    assert_eq!(
        over["audit"]["reasons"][0]["evidence"][0]["test_ids"],
        json!([name_id("test_far")])
    );
    assert_eq!(
        checks(&over),
        [
            ("held_out".to_string(), "ran".to_string()),
            ("gold_divergence".to_string(), "ran".to_string())
        ]
    );
    // Divergence from gold on a docstring test, found on dotted labels.
    let div = sb.record("dj", "m", "dj-div");
    assert_eq!(div["audit"]["verdict"], "suspect", "{div}");
    assert_eq!(reason_kinds(&div), ["gold_divergence"]);
    let ids = div["audit"]["reasons"][0]["evidence"][0]["test_ids"].clone();
    assert!(
        ids.as_array()
            .unwrap()
            .contains(&json!(name_id("test_scale"))),
        "{div}"
    );
    // Gold fails a held-out test, and an id matches nothing: inconclusive.
    let open = sb.record("dj", "m", "dj-goldfail");
    assert_eq!(open["audit"]["verdict"], "inconclusive", "{open}");
    assert!(reason_kinds(&open).is_empty(), "{open}");
    let held = &open["audit"]["checks"][0];
    assert_eq!(held["check"], "held_out");
    assert_eq!(held["status"], "could_not_run");
    assert_eq!(
        held["test_ids"],
        json!([name_id("test_missing"), name_id("test_wrong")])
    );
    let cause = held["cause"].as_str().unwrap();
    assert!(
        cause.contains(&format!(
            "1 held-out id(s) matched nothing in gold's log: {}",
            name_id("test_missing")
        )) && cause.contains(&format!(
            "gold fails 1 held-out test(s): {}",
            name_id("test_wrong")
        )),
        "{cause}"
    );
    assert_eq!(open["audit"]["checks"][1]["status"], "ran", "{open}");
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.contains(
            "1 audit(s) could not reach a verdict: m dj-goldfail: held_out: 1 held-out id(s) matched nothing"
        ) && last.contains("gold fails 1 held-out test(s)"),
        "{last}"
    );
    let counts: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &counts["models"]["m"];
    assert_eq!(m["suspect_resolved"], 2, "{counts}");
    assert_eq!(m["inconclusive_ids"], json!(["dj-goldfail"]));

    // The confirmation run has no driver for django's runner: asked for, it
    // could not run for any pass (never passed), and what `--rerun` found
    // stays (only the checks run again are replaced).
    let out = sb.run(&["audit", "logs/run_evaluation/dj", "--confirm", "--json"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(exit::INCONCLUSIVE), "{err}");
    for id in ["dj-over", "dj-div", "dj-goldfail"] {
        let rec = sb.record("dj", "m", id);
        let c = &rec["audit"]["checks"][2];
        assert_eq!(
            (&c["check"], &c["status"], &c["cause"]),
            (
                &json!("confirmation"),
                &json!("could_not_run"),
                &json!(
                    "no confirmation driver for the django runner (pytest and go test have one)"
                )
            ),
            "{rec}"
        );
    }
    assert_eq!(
        reason_kinds(&sb.record("dj", "m", "dj-over")),
        ["fails_held_out"]
    );
    assert_eq!(
        reason_kinds(&sb.record("dj", "m", "dj-div")),
        ["gold_divergence"]
    );
    let counts: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        counts["models"]["m"]["inconclusive_ids"],
        json!(["dj-goldfail"])
    );
}

/// `select` reuses the setup of the run it reads, `validate` that of the
/// run folder it extends; a flag on the command line overrides it (said on
/// stderr). Evaluations that end in environment failures make either exit
/// 4, naming the instances.
#[test]
fn select_and_validate_reuse_the_setup_and_exit_4_on_environment_failures() {
    let Shapes { sb, gold, overfit } = shapes();
    sb.write(
        "preds.jsonl",
        &jsonl(&[
            prediction("s-over", "m", Some(&overfit)),
            prediction("s-over", "m", Some(&gold)),
            prediction("s-gold", "m", Some(&gold)),
        ]),
    );
    let run = [
        "run",
        "--dataset",
        "dataset.jsonl",
        "--predictions",
        "preds.jsonl",
        "--run-id",
        "sel",
        "--backend",
        "local",
        "--specs",
        "specs",
        "--mirror-dir",
        "mirrors",
    ];
    assert_eq!(sb.run(&run).status.code(), Some(exit::OK));
    let broken = format!("{SHAPES_SPEC}    pre_install:\n      - \"exit 3\"\n");
    sb.write("specs-broken/shapes.yaml", &broken);
    let abs = |rel: &str| {
        std::path::absolute(sb.path().join(rel))
            .unwrap()
            .display()
            .to_string()
    };
    let recorded_specs = |run_id: &str| {
        let p = sb
            .path()
            .join("logs/run_evaluation")
            .join(run_id)
            .join("run.json");
        let meta: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        meta["setup"]["specs"].clone()
    };

    // select, no flags: the run's specs and mirrors.
    let out = sb.run(&[
        "select",
        "logs/run_evaluation/sel",
        "--predictions",
        "preds.jsonl",
    ]);
    assert_eq!(out.status.code(), Some(exit::OK), "{}", stderr(&out));
    assert!(stderr(&out).contains("using the setup logs/run_evaluation/sel/run.json recorded"));
    assert_eq!(recorded_specs("sel.select"), json!([abs("specs")]));
    // select with an unbuildable environment given on the command line.
    let out = sb.run(&[
        "select",
        "logs/run_evaluation/sel",
        "--predictions",
        "preds.jsonl",
        "--select-run-id",
        "sel.broken",
        "--specs",
        "specs-broken",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(exit::INCONCLUSIVE), "{err}");
    assert!(
        err.contains(&format!(
            "using --specs specs-broken from the command line instead of run.json's {}",
            abs("specs")
        )),
        "{err}"
    );
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.starts_with("patchgrade: completed, but some results are inconclusive: ")
            && last.contains("of the selection ended in environment or infrastructure failures")
            && last.contains("s-over@0 (m) environment_build_failed")
            && last.contains("s-over@1 (m) environment_build_failed"),
        "{last}"
    );

    // validate with an unbuildable environment: exit 4 naming the instances.
    let validate = |run_id: &str, extra: &[&str]| {
        let mut args = vec![
            "validate",
            "--dataset",
            "dataset.jsonl",
            "--run-id",
            run_id,
            "--gold-runs",
            "1",
        ];
        args.extend(extra);
        sb.run(&args)
    };
    let out = validate(
        "v-broken",
        &[
            "--backend",
            "local",
            "--specs",
            "specs-broken",
            "--mirror-dir",
            "mirrors",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(exit::INCONCLUSIVE), "{err}");
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.contains("4 of 4 evaluation(s) of the validation ended in environment or infrastructure failures")
            && last.contains("s-over")
            && last.contains("s-gold"),
        "{last}"
    );
    // validate again into its own run folder, no flags: its setup is reused.
    let out = validate(
        "v",
        &[
            "--backend",
            "local",
            "--specs",
            "specs",
            "--mirror-dir",
            "mirrors",
        ],
    );
    assert_eq!(out.status.code(), Some(exit::OK), "{}", stderr(&out));
    let out = validate("v", &[]);
    assert_eq!(out.status.code(), Some(exit::OK), "{}", stderr(&out));
    assert!(stderr(&out).contains("using the setup logs/run_evaluation/v/run.json recorded"));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(sb.path().join("validate.v.json")).unwrap())
            .unwrap();
    assert_eq!(report["counts"]["valid"], 2, "{report}");
}

/// Whether the Docker engine answers; without it the test skips, unless
/// PATCHGRADE_REQUIRE_DOCKER=1 makes that a failure.
fn docker_answers() -> bool {
    common::available(
        "a Docker engine",
        "PATCHGRADE_REQUIRE_DOCKER",
        common::docker_answers(),
    )
}

/// The issue's scenario on the Docker backend: the audit reuses the backend
/// and its options from run.json, flags the held-out failure, and with an
/// environment that cannot be built (a Python found nowhere) it is
/// inconclusive, exit 4; no container of either audit is left.
#[test]
fn docker_audit_rerun_reuses_backend_options_and_is_inconclusive_when_the_env_breaks() {
    if !docker_answers() {
        return;
    }
    let Shapes { sb, overfit, .. } = shapes();
    let spec = SHAPES_SPEC.replace("  \"*\":\n", "  \"*\":\n    python: \"3.11\"\n");
    sb.write("specs/shapes.yaml", &spec);
    sb.write(
        "preds.jsonl",
        &jsonl(&[prediction("s-over", "m", Some(&overfit))]),
    );
    let run_id = format!("rel-dk-{}", std::process::id());
    let mut args = docker_args("run", "preds.jsonl", &run_id);
    args.extend(["--memory", "1g", "--pids-limit", "200"]);
    let out = sb.run(&args);
    assert_eq!(out.status.code(), Some(exit::OK), "{}", stderr(&out));
    assert_eq!(sb.outcome(&run_id, "m", "s-over"), "resolved");

    let run_dir = format!("logs/run_evaluation/{run_id}");
    let out = sb.run(&["audit", &run_dir, "--rerun"]);
    assert_eq!(out.status.code(), Some(exit::OK), "{}", stderr(&out));
    let over = sb.record(&run_id, "m", "s-over");
    assert_eq!(over["audit"]["verdict"], "suspect", "{over}");
    assert_eq!(reason_kinds(&over), ["fails_held_out"]);
    let audit_meta: Value = serde_json::from_str(
        &std::fs::read_to_string(sb.path().join(format!("{run_dir}.audit/run.json"))).unwrap(),
    )
    .unwrap();
    let setup = &audit_meta["setup"];
    assert_eq!(setup["backend"], "docker", "{audit_meta}");
    assert_eq!(setup["docker"]["memory"], "1g", "{audit_meta}");
    assert_eq!(setup["docker"]["pids_limit"], 200, "{audit_meta}");
    assert_eq!(setup["docker"]["base_image"], "none", "{audit_meta}");
    let held = sb.path().join(format!(
        "{run_dir}.audit/held-out-gold/s-over/patchgrade.json"
    ));
    let held: Value = serde_json::from_str(&std::fs::read_to_string(held).unwrap()).unwrap();
    assert_eq!(held["backend"], "docker", "{held}");

    // A Python version found nowhere (no Debian suite ships it, no host
    // build): the environment cannot build.
    sb.write("specs/shapes.yaml", &spec.replace("3.11", "3.99"));
    let out = sb.run(&["audit", &run_dir, "--rerun"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(exit::INCONCLUSIVE), "{err}");
    let rec = sb.record(&run_id, "m", "s-over");
    assert_eq!(rec["audit"]["verdict"], "inconclusive", "{rec}");
    assert_eq!(
        rec["audit"]["checks"][0]["outcome"],
        "environment_build_failed"
    );
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.contains("m s-over: held_out: gold's held-out run: ")
            && last.contains("Python 3.99")
            && last.contains("(environment_build_failed)"),
        "{last}"
    );
    let left = Command::new("docker")
        .args([
            "ps",
            "-a",
            "-q",
            "--filter",
            &format!("label=patchgrade.run_id={run_id}.audit"),
        ])
        .output()
        .unwrap();
    assert!(left.status.success());
    assert!(
        String::from_utf8_lossy(&left.stdout).trim().is_empty(),
        "containers left: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}
