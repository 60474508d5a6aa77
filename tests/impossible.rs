//! `patchgrade impossible` on the hack corpus's pytest project
//! (instances/hacks, `patchgrade/hack-shop`): the variants' test patches
//! apply with real git; with `--validate` (Docker) gold fails every variant,
//! and the corpus's honest controls, graded on the variants, resolve none.
//!
//! Without a daemon or PyPI the Docker test skips, unless
//! PATCHGRADE_REQUIRE_DOCKER=1 / PATCHGRADE_REQUIRE_PYPI=1.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use patchgrade::exit;
use serde_json::Value;

fn corpus() -> PathBuf {
    project_root().join("instances/hacks")
}

fn rows(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn git(dir: &Path, args: &[&str], stdin: Option<&Path>) -> std::process::Output {
    let mut c = Command::new("git");
    c.args(args).current_dir(dir);
    if let Some(f) = stdin {
        c.stdin(std::fs::File::open(f).unwrap());
    }
    c.output().unwrap()
}

/// The shop's repository from the corpus's fast-export stream, in a
/// mirror folder (`--mirror-dir`) of its own.
fn shop_repo(sb: &Sandbox) -> PathBuf {
    let dir = sb.path().join("mirrors/patchgrade__hack-shop");
    std::fs::create_dir_all(&dir).unwrap();
    assert!(git(&dir, &["init", "-q"], None).status.success());
    let stream = corpus().join("repos/patchgrade__hack-shop.fi");
    let out = git(&dir, &["fast-import", "--quiet"], Some(&stream));
    assert!(out.status.success(), "{out:?}");
    dir
}

#[test]
fn variants_change_one_assertion_and_still_apply() {
    let sb = Sandbox::new();
    let repo = shop_repo(&sb);
    for mode in ["oneoff", "conflicting"] {
        let out_path = sb.path().join(format!("{mode}.jsonl"));
        let out = sb.run(&[
            "impossible",
            "--dataset",
            corpus().join("dataset.jsonl").to_str().unwrap(),
            "--mode",
            mode,
            "--out",
            out_path.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(out.status.code(), Some(exit::OK));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        // The Go instance has no rule yet, and says so.
        let skipped = report["skipped"].as_array().unwrap();
        assert!(
            skipped
                .iter()
                .any(|s| s["instance_id"].as_str().unwrap().contains("gocalc")
                    && s["reason"].as_str().unwrap().contains(".go")),
            "{report}"
        );
        let variants = rows(&out_path);
        let shop = rows(&corpus().join("dataset.jsonl"))
            .into_iter()
            .filter(|r| r["repo"] == "patchgrade/hack-shop")
            .count();
        assert_eq!(variants.len(), shop, "{report}");
        for v in &variants {
            let id = v["instance_id"].as_str().unwrap();
            assert_eq!(v["impossible_type"], mode);
            assert_ne!(v["test_patch"], v["original_test_patch"], "{id}");
            let m = &v["impossible"];
            assert_ne!(m["before"], m["after"], "{id}");
            // The new test patch applies to the base commit, and the file
            // then holds the changed line where the record says.
            let wt = sb.path().join(format!("wt-{mode}-{id}"));
            let base = v["base_commit"].as_str().unwrap();
            let out = git(
                &repo,
                &["worktree", "add", "-q", wt.to_str().unwrap(), base],
                None,
            );
            assert!(out.status.success(), "{out:?}");
            let patch = sb.write(
                &format!("{mode}-{id}.diff"),
                v["test_patch"].as_str().unwrap(),
            );
            let out = git(&wt, &["apply", patch.to_str().unwrap()], None);
            assert!(out.status.success(), "{id}: {out:?}");
            let file = std::fs::read_to_string(wt.join(m["file"].as_str().unwrap())).unwrap();
            let line = file.lines().nth(m["line"].as_u64().unwrap() as usize - 1);
            let after = m["after"].as_str().unwrap();
            assert_eq!(line, after.lines().next(), "{id}");
            if mode == "conflicting" {
                assert!(file.contains(m["before"].as_str().unwrap()), "{id}");
            } else {
                assert!(
                    !file.contains(&format!("{}\n", m["before"].as_str().unwrap())),
                    "{id}"
                );
            }
        }
    }
}

#[test]
fn validated_variants_fail_gold_and_honest_fixes() {
    if !docker_ready("validated_variants_fail_gold_and_honest_fixes")
        || !available("PyPI", "PATCHGRADE_REQUIRE_PYPI", pypi_reachable())
    {
        return;
    }
    let sb = Sandbox::new();
    let out_path = sb.path().join("oneoff.jsonl");
    // The variants are written outside instances/hacks, so the stream
    // beside the corpus's dataset is not found: a mirror folder instead.
    let repo = shop_repo(&sb);
    let mirrors = repo.parent().unwrap().to_str().unwrap().to_string();
    let base = [
        "--mirror-dir",
        &mirrors,
        "--backend",
        "docker",
        "--base-image",
        "none",
        "--max-workers",
        "2",
    ];
    let ds = corpus().join("dataset.jsonl");
    let mut args = vec![
        "impossible",
        "--dataset",
        ds.to_str().unwrap(),
        "--mode",
        "oneoff",
        "--out",
        out_path.to_str().unwrap(),
        "--validate",
        "--json",
    ];
    args.extend(base);
    let out = sb.run(&args);
    assert_eq!(out.status.code(), Some(exit::OK));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let v = &report["validation"];
    let checked = v["checked"].as_array().unwrap();
    assert!(!checked.is_empty(), "{report}");
    assert_eq!(v["valid"].as_u64(), Some(checked.len() as u64), "{report}");
    for c in checked {
        assert_eq!(c["gold"], "unresolved", "{c}");
        assert!(!c["failed"].as_array().unwrap().is_empty(), "{c}");
    }
    let variants = rows(&out_path);
    assert_eq!(variants.len(), checked.len());

    // The corpus's honest controls fix the issue; on the variants none can
    // pass: the changed test now contradicts the fix.
    let controls: Vec<Value> = rows(&corpus().join("expected.jsonl"))
        .into_iter()
        .filter(|e| e["family"] == "control" && e["instance_id"].as_str().unwrap().contains("shop"))
        .collect();
    assert!(controls.len() >= 4);
    let preds: String = rows(&corpus().join("predictions.jsonl"))
        .into_iter()
        .filter(|p| {
            controls
                .iter()
                .any(|c| c["instance_id"] == p["instance_id"] && c["sample_id"] == p["sample_id"])
        })
        .map(|p| format!("{p}\n"))
        .collect();
    let preds = sb.write("controls.jsonl", &preds);
    let mut args = vec![
        "run",
        "--dataset",
        out_path.to_str().unwrap(),
        "--predictions",
        preds.to_str().unwrap(),
        "--run-id",
        "controls-on-variants",
    ];
    args.extend(base);
    let out = sb.run(&args);
    assert_eq!(out.status.code(), Some(exit::OK));
    let table = String::from_utf8_lossy(&out.stderr);
    assert!(
        table.contains(&format!(
            "impossible variants: 0 of {} graded evaluations resolved",
            controls.len()
        )),
        "{table}"
    );
    for c in &controls {
        let id = format!(
            "{}@{}",
            c["instance_id"].as_str().unwrap(),
            c["sample_id"].as_str().unwrap()
        );
        let r = sb.record("controls-on-variants", "hack-corpus", &id);
        assert_eq!(r["outcome"], "unresolved", "{id}: {r}");
    }
}
