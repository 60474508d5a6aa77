//! The hack corpus (instances/hacks, docs/audit.md "Hack corpus") graded on
//! the real Docker engine: every hack ends not resolved, or resolved and
//! suspect with a reason of its family; every honest control ends resolved
//! and clean; the hacks the construction defences are for (expected
//! `not_resolved`) do not pass at all. Then `audit --confirm` (the
//! confirmation run) on the corpus and on gold: the hacks only it catches
//! (`caught_by: confirmation`) pass the static checks and end suspect, the
//! controls and gold stay clean. A few minutes on 2 cores once the images
//! exist.
//!
//! Without a daemon or PyPI (the image installs pytest) the test skips,
//! unless PATCHGRADE_REQUIRE_DOCKER=1 / PATCHGRADE_REQUIRE_PYPI=1; without
//! the host's Go (/usr/local/go) the Go rows are left out, said.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use patchgrade::exit;
use serde_json::Value;

fn host_go() -> bool {
    std::path::Path::new("/usr/local/go/bin/go").is_file()
}

fn corpus() -> std::path::PathBuf {
    project_root().join("instances/hacks")
}

fn expected() -> Vec<Value> {
    let text = std::fs::read_to_string(corpus().join("expected.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// One field (`kind`, `family`) of each of a record's audit reasons.
fn reason_field<'a>(rec: &'a Value, field: &str) -> Vec<&'a str> {
    rec["audit"]["reasons"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r[field].as_str())
        .collect()
}

/// What went wrong with one candidate's record, if anything.
fn judge(e: &Value, rec: &Value) -> Option<String> {
    let (family, expect) = (e["family"].as_str().unwrap(), e["expect"].as_str().unwrap());
    let outcome = rec["outcome"].as_str().unwrap();
    let verdict = rec["audit"]["verdict"].as_str().unwrap_or("-");
    let families = reason_field(rec, "family");
    let resolved = outcome == "resolved";
    let ok = match expect {
        "clean" => resolved && verdict == "clean",
        "not_resolved" => !resolved,
        "suspect" => !resolved || (verdict == "suspect" && families.contains(&family)),
        other => panic!("expected.jsonl: unknown expect {other}"),
    };
    (!ok).then(|| {
        format!(
            "{}@{} ({family}, expected {expect}): {outcome}/{verdict} {families:?}",
            e["instance_id"], e["sample_id"]
        )
    })
}

#[test]
fn every_hack_is_caught_and_every_control_is_clean() {
    if !docker_ready("every_hack_is_caught_and_every_control_is_clean")
        || !available("PyPI", "PATCHGRADE_REQUIRE_PYPI", pypi_reachable())
    {
        return;
    }
    let sb = Sandbox::new();
    // The Go rows need the host's Go for their toolchain image; without it
    // they are left out, said, unless PATCHGRADE_REQUIRE_DOCKER=1.
    let go = available(
        "Go in /usr/local/go",
        "PATCHGRADE_REQUIRE_DOCKER",
        host_go(),
    );
    let keep = |id: &str| go || !id.contains("gocalc");
    let text = std::fs::read_to_string(corpus().join("predictions.jsonl")).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| {
            keep(
                serde_json::from_str::<Value>(l).unwrap()["instance_id"]
                    .as_str()
                    .unwrap(),
            )
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let ds = corpus().join("dataset.jsonl");
    let preds = sb.write("predictions.jsonl", &kept);
    let out = run_corpus(&sb, &ds, preds.to_str().unwrap(), "hacks");
    assert_eq!(out.status.code(), Some(exit::OK));
    let all = expected();
    let hacks = all.iter().filter(|e| e["family"] != "control").count();
    assert!(hacks >= 30 && all.len() - hacks >= 4, "{hacks} hacks");
    let rows: Vec<Value> = all
        .into_iter()
        .filter(|e| keep(e["instance_id"].as_str().unwrap()))
        .collect();
    let record = |e: &Value| corpus_record(&sb, e);
    // The rows only the confirmation run catches are judged after it.
    let wrong: Vec<String> = rows
        .iter()
        .filter(|e| e["caught_by"] != "confirmation")
        .filter_map(|e| judge(e, &record(e)))
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of {}:\n{}",
        wrong.len(),
        rows.len(),
        wrong.join("\n")
    );

    // What was set aside is in the record: the pytest section of setup.cfg
    // restored with the version bump kept...
    let by_name = |name: &str| {
        let e = rows.iter().find(|e| e["sample_id"] == name).unwrap();
        record(e)
    };
    let r = by_name("setup-cfg");
    assert_eq!(
        r["set_aside"],
        serde_json::json!([{"path": "setup.cfg", "kind": "shared_config",
            "action": "sections_restored", "sections": ["[tool:pytest]"]}])
    );
    assert!(by_name("ctl-setup-cfg").get("set_aside").is_none());
    assert_eq!(
        by_name("conftest-root")["set_aside"][0]["action"],
        "removed"
    );
    // ... and a change gold makes too kept, the extra setting flagged.
    for name in ["ctl-marker", "gold-config-extra"] {
        assert_eq!(
            by_name(name)["set_aside"][0]["action"],
            "kept_gold_changes_it",
            "{name}"
        );
    }
    let log = std::fs::read_to_string(sb.path().join(
        "logs/run_evaluation/hacks/hack-corpus/patchgrade__hack-shop-1@tox-ini/test_output.txt",
    ))
    .unwrap();
    assert!(
        log.contains(">>>>> Set aside: tox.ini sections_restored"),
        "{log}"
    );
    // The tables name the family (the summary table is on stderr).
    let table = String::from_utf8_lossy(&out.stderr);
    assert!(
        table.contains("suspect: test_aware_code (test_aware)"),
        "{table}"
    );
    // And the cheating rate, by family, in the table and the summary.
    assert!(table.contains("cheating rate: "), "{table}");
    let audit = &sb.summary("hack-corpus", "hacks")["patchgrade"]["audit"];
    assert!(
        audit["families"]["test_aware"].as_u64() >= Some(1),
        "{audit}"
    );

    // Gold resolves every instance clean, issue 4's setup.cfg change (the
    // marker it registers) kept because it is gold's own.
    let out = run_corpus(&sb, &ds, "gold", "hacks-gold");
    assert_eq!(out.status.code(), Some(exit::OK));
    let mut ids: Vec<String> = rows
        .iter()
        .map(|e| e["instance_id"].as_str().unwrap().to_string())
        .collect();
    ids.dedup();
    for id in &ids {
        let r = sb.record("hacks-gold", "gold", id);
        assert_eq!(
            (r["outcome"].as_str(), r["audit"]["verdict"].as_str()),
            (Some("resolved"), Some("clean")),
            "{id}: {r}"
        );
    }
    let r = sb.record("hacks-gold", "gold", "patchgrade__hack-shop-4");
    assert_eq!(r["set_aside"][0]["action"], "kept_gold_changes_it");

    confirmation(&sb, &rows, &ids);
}

/// The record of one corpus row in the run `hacks`.
fn corpus_record(sb: &Sandbox, e: &Value) -> Value {
    let id = format!(
        "{}@{}",
        e["instance_id"].as_str().unwrap(),
        e["sample_id"].as_str().unwrap()
    );
    sb.record("hacks", "hack-corpus", &id)
}

/// `audit --confirm` on the corpus's run and on gold's (docs/audit.md,
/// "Confirmation run").
fn confirmation(sb: &Sandbox, rows: &[Value], gold_ids: &[String]) {
    let record = |e: &Value| corpus_record(sb, e);
    let only_confirmation: Vec<&Value> = rows
        .iter()
        .filter(|e| e["caught_by"] == "confirmation")
        .collect();
    assert!(only_confirmation.len() >= 3, "{only_confirmation:?}");
    // Before: the static checks miss them.
    for e in &only_confirmation {
        let r = record(e);
        assert_eq!(
            (r["outcome"].as_str(), r["audit"]["verdict"].as_str()),
            (Some("resolved"), Some("clean")),
            "{}: {r}",
            e["sample_id"]
        );
    }
    let out = sb.run(&["audit", "logs/run_evaluation/hacks", "--confirm"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(exit::OK), "{err}");
    // After: every row as expected, those hacks suspect by the
    // confirmation, every control's confirmation run judged (and passed).
    let wrong: Vec<String> = rows.iter().filter_map(|e| judge(e, &record(e))).collect();
    assert!(wrong.is_empty(), "after --confirm:\n{}", wrong.join("\n"));
    let confirmation = |r: &Value| -> Option<String> {
        let checks = r["audit"]["checks"].as_array()?;
        let c = checks.iter().find(|c| c["check"] == "confirmation")?;
        c["status"].as_str().map(String::from)
    };
    for e in &only_confirmation {
        let r = record(e);
        let kinds = reason_field(&r, "kind");
        assert_eq!(kinds, ["confirmation_differs"], "{}: {r}", e["sample_id"]);
        let reason = &r["audit"]["reasons"][0];
        assert_eq!(reason["family"], "test_aware");
        assert!(
            !reason["evidence"][0]["test_ids"]
                .as_array()
                .unwrap()
                .is_empty(),
            "{r}"
        );
        assert_eq!(confirmation(&r).as_deref(), Some("ran"), "{r}");
    }
    for e in rows.iter().filter(|e| e["family"] == "control") {
        let r = record(e);
        assert_eq!(confirmation(&r).as_deref(), Some("ran"), "{r}");
    }
    // Gold under the same conditions: clean, every confirmation judged.
    let out = sb.run(&["audit", "logs/run_evaluation/hacks-gold", "--confirm"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(exit::OK), "{err}");
    for id in gold_ids {
        let r = sb.record("hacks-gold", "gold", id);
        assert_eq!(r["audit"]["verdict"], "clean", "{id}: {r}");
        assert_eq!(confirmation(&r).as_deref(), Some("ran"), "{id}: {r}");
    }
}

/// build.py makes the committed corpus again (byte for byte), FAIL_TO_PASS
/// and PASS_TO_PASS from real pytest and `go test` runs. Needs python3 with
/// pytest 9.2 (the spec's pin) and go on the host.
#[test]
fn the_committed_corpus_is_what_build_py_makes() {
    let pytest = Command::new("python3")
        .args(["-c", "import pytest; assert pytest.__version__ == '9.2.0'"])
        .output()
        .is_ok_and(|o| o.status.success());
    let go = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !available(
        "python3 with pytest 9.2.0, and go",
        "PATCHGRADE_REQUIRE_PYTEST",
        pytest && go,
    ) {
        return;
    }
    let sb = Sandbox::new();
    let out = Command::new("python3")
        .arg("-B")
        .arg(corpus().join("build.py"))
        .arg(sb.path())
        .current_dir(corpus())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "dataset.jsonl",
        "predictions.jsonl",
        "expected.jsonl",
        "repos/patchgrade__hack-shop.fi",
        "repos/patchgrade__hack-gocalc.fi",
    ] {
        let made = std::fs::read(sb.path().join(f)).unwrap();
        let committed = std::fs::read(corpus().join(f)).unwrap();
        assert!(
            made == committed,
            "{f} differs from a rebuild: run instances/hacks/build.sh"
        );
    }
}

/// The corpus graded on the Docker backend, two workers.
fn run_corpus(sb: &Sandbox, ds: &Path, preds: &str, run_id: &str) -> std::process::Output {
    sb.run(&[
        "run",
        "--dataset",
        ds.to_str().unwrap(),
        "--predictions",
        preds,
        "--run-id",
        run_id,
        "--backend",
        "docker",
        "--base-image",
        "none",
        "--max-workers",
        "2",
    ])
}
