//! The docker backend applies a candidate in memory, against the base tree
//! in the mirror, and makes a host checkout only when that cannot decide
//! (the fuzzy fallback). Whichever way, the outcome and `apply_strategy`
//! must be those of the local backend, which always applies on a checkout:
//! this test runs the same predictions on both and compares the records.
//!
//! Without a daemon this test skips, printing why, unless
//! PATCHGRADE_REQUIRE_DOCKER=1 (set by .ci/run), where it fails.

mod common;

use patchgrade::exit;
use std::process::Command;

use common::widgets::*;
use common::*;

const SPEC: &str = "repo: acme/widgets\nversions:\n  \"*\":\n    python: \"3.11\"\n    test_cmd: python3 -m unittest -v\n    log_parser: unittest\n";

#[test]
fn docker_in_memory_apply_matches_the_checkout_apply() {
    if !available(
        "a Docker daemon",
        "PATCHGRADE_REQUIRE_DOCKER",
        docker_answers(),
    ) {
        return;
    }
    let w = Widgets::new(SPEC, &[("widgets/legacy.py", b"OLD = True\n")]);
    let id = format!("acme__widgets-apply{}", std::process::id());
    // The gold hunk claims line 4 of a two-line file: libgit2 refuses it,
    // the fuzzy applier finds it at its offset.
    assert!(w.gold.contains("@@ -1,2 +1,2 @@"), "{}", w.gold);
    let shifted = w.gold.replace("@@ -1,2 +1,2 @@", "@@ -4,2 +4,2 @@");
    // Deletes a file, adds one and fixes the bug.
    let reshaped = w.repo.diff_of(
        &[
            ("widgets/core.py", Some(CORE_FIXED.as_bytes())),
            ("widgets/legacy.py", None),
            ("widgets/extra.py", Some(b"NEW = 1\n")),
        ],
        false,
    );
    let mismatched = w.gold.replace("return max(lo, x)", "return max(lo, y)");
    w.sb.write(
        "dataset.jsonl",
        &jsonl(&[instance(
            &id,
            "acme/widgets",
            &w.base,
            &w.gold,
            &w.test_patch,
            &[F2P],
            &[P2P],
        )]),
    );
    let models = [
        ("strict", w.gold.clone()),
        ("fuzzy", shifted),
        ("reshaped", reshaped),
        ("wrong", w.wrong.clone()),
        ("mismatched", mismatched),
    ];
    let preds: Vec<_> = models
        .iter()
        .map(|(m, p)| prediction(&id, m, Some(p)))
        .collect();
    w.sb.write("preds.jsonl", &jsonl(&preds));
    let run = |run_id: &str, backend: &str| {
        let out = w.sb.run(&[
            "run",
            "--dataset",
            "dataset.jsonl",
            "--predictions",
            "preds.jsonl",
            "--run-id",
            run_id,
            "--backend",
            backend,
            "--specs",
            "specs",
            "--mirror-dir",
            "mirrors",
            "--max-workers",
            "2",
            "--base-image",
            "none",
            "--no-sandbox",
        ]);
        assert!(
            out.status.code().is_some_and(|c| c <= exit::INTERNAL),
            "{run_id}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run("dock", "docker");
    run("host", "local");
    let expected = [
        ("strict", "resolved", Some("strict")),
        ("fuzzy", "resolved", Some("fuzzy")),
        ("reshaped", "resolved", Some("strict")),
        ("wrong", "unresolved", Some("strict")),
        ("mismatched", "patch_apply_failed", None),
    ];
    for (model, outcome, strategy) in expected {
        let d = w.sb.record("dock", model, &id);
        let h = w.sb.record("host", model, &id);
        assert_eq!(d["outcome"], outcome, "docker {model}: {d}");
        assert_eq!(d["outcome"], h["outcome"], "{model}");
        assert_eq!(
            d["apply_strategy"].as_str(),
            strategy,
            "docker {model}: {d}"
        );
        assert_eq!(d["apply_strategy"], h["apply_strategy"], "{model}");
        assert_eq!(d["detail"], h["detail"], "{model}");
        let log = std::fs::read_to_string(w.sb.path().join(format!(
            "logs/run_evaluation/dock/{model}/{id}/run_instance.log"
        )))
        .unwrap();
        // Only what libgit2 refuses needs a checkout.
        assert_eq!(
            log.contains("checked out"),
            strategy != Some("strict"),
            "{model}: {log}"
        );
    }
    let _ = Command::new("docker")
        .args(["images", "-q", &format!("patchgrade.eval.*.{id}")])
        .output()
        .map(|o| {
            for img in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                let _ = Command::new("docker").args(["rmi", "-f", img]).output();
            }
        });
}
