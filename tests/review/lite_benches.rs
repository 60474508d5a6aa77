//! Ignored benchmarks over SWE-bench Lite, run by harness-scripts/: the
//! static audit of a whole submission (bench-static-audit.sh) and the
//! review script with real linters on this host (bench-review-host.sh).

use super::*;

/// `harness-scripts/bench-static-audit.sh`: the static audit of a whole
/// submission over SWE-bench Lite (`PATCHGRADE_LITE`), for the gold patches
/// and, with `PATCHGRADE_PREDICTIONS`, a real submission. Prints figures.
#[test]
#[ignore = "benchmark: needs SWE-bench Lite (PATCHGRADE_LITE)"]
fn bench_submission_audit_lite() {
    use patchgrade::dataset::{load_predictions, Dataset};
    use patchgrade::review::submission::{audit_submission, SubmissionOptions};
    use std::time::Instant;

    let Some(lite) = std::env::var_os("PATCHGRADE_LITE").map(PathBuf::from) else {
        eprintln!("SKIPPED: set PATCHGRADE_LITE to SWE-bench Lite's test.jsonl");
        return;
    };
    let t_load = Instant::now();
    let ds = Dataset::load(&lite).unwrap();
    println!("dataset loaded in {:.3} s", t_load.elapsed().as_secs_f64());
    let mut sources = vec![PathBuf::from("gold")];
    if let Some(p) = std::env::var_os("PATCHGRADE_PREDICTIONS") {
        sources.push(PathBuf::from(p));
    }
    for src in sources {
        let t_load = Instant::now();
        let preds = load_predictions(std::slice::from_ref(&src), &ds).unwrap();
        println!(
            "{} loaded in {:.3} s",
            src.display(),
            t_load.elapsed().as_secs_f64()
        );
        for with_hints in [false, true] {
            let t0 = Instant::now();
            let a = audit_submission(
                &ds,
                &preds,
                &SubmissionOptions {
                    with_hints,
                    ..SubmissionOptions::default()
                },
            );
            let wall = t0.elapsed().as_secs_f64();
            let s = a.summary();
            println!(
                "{} ({} predictions, hints {}): {:.3} s wall; {} empty, {} suspect; mean score {:.1}",
                src.display(),
                s.predictions,
                if with_hints { "on" } else { "off" },
                wall,
                s.empty,
                s.suspect,
                s.mean_score.unwrap_or(f64::NAN)
            );
            println!("  reasons:  {:?}", s.reasons);
            println!("  findings: {:?}", s.findings);
            let mut buckets = [0usize; 5];
            for p in &a.predictions {
                if let Some(r) = &p.review {
                    let b = match r.score.score {
                        x if x >= 100.0 => 0,
                        x if x >= 90.0 => 1,
                        x if x >= 75.0 => 2,
                        x if x >= 50.0 => 3,
                        _ => 4,
                    };
                    buckets[b] += 1;
                }
            }
            println!(
                "  scores: 100: {}, [90,100): {}, [75,90): {}, [50,75): {}, <50: {}",
                buckets[0], buckets[1], buckets[2], buckets[3], buckets[4]
            );
            if std::env::var_os("PATCHGRADE_BENCH_VERBOSE").is_some() {
                for p in &a.predictions {
                    for f in p.review.iter().flat_map(|r| &r.findings) {
                        println!(
                            "    {} {} {} {}",
                            p.instance_id,
                            f.kind,
                            f.location(),
                            f.message
                        );
                    }
                }
            }
        }
    }
}

/// `harness-scripts/bench-review-host.sh`: the review script with real
/// linters over one repository's SWE-bench Lite instances, on this host (no
/// container): base trees from a mirror (`PATCHGRADE_MIRROR`, a git
/// directory), gold and, with `PATCHGRADE_PREDICTIONS`, a submission's
/// patches. Prints score distributions, findings and timings.
#[test]
#[ignore = "benchmark: needs SWE-bench Lite and a repository mirror"]
fn bench_review_host_lite() {
    use patchgrade::dataset::{load_predictions, Dataset};
    use patchgrade::patch::{self, Patch};
    use patchgrade::review::hygiene::{self, Context};
    use patchgrade::review::script::{self, ScriptSpec};
    use patchgrade::review::{FindingKind, StaticReview};
    use std::collections::BTreeMap;
    use std::time::Instant;

    let (Some(lite), Some(mirror), Some(repo)) = (
        std::env::var_os("PATCHGRADE_LITE").map(PathBuf::from),
        std::env::var_os("PATCHGRADE_MIRROR").map(PathBuf::from),
        std::env::var("PATCHGRADE_REPO").ok(),
    ) else {
        eprintln!("SKIPPED: set PATCHGRADE_LITE, PATCHGRADE_MIRROR and PATCHGRADE_REPO");
        return;
    };
    let tool_bin = std::env::var("PATCHGRADE_TOOL_BIN").unwrap_or_else(|_| {
        let out = Command::new("sh")
            .args(["-c", "command -v ruff"])
            .output()
            .unwrap();
        let p = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        p.parent().unwrap().display().to_string()
    });
    let limit: usize = std::env::var("PATCHGRADE_BENCH_LIMIT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(usize::MAX);
    let ds = Dataset::load(&lite).unwrap();
    let mut subs: Vec<(String, BTreeMap<String, String>)> = vec![(
        "gold".into(),
        ds.instances
            .iter()
            .map(|i| (i.instance_id.clone(), i.patch.clone()))
            .collect(),
    )];
    if let Some(p) = std::env::var_os("PATCHGRADE_PREDICTIONS") {
        let preds = load_predictions(&[PathBuf::from(p)], &ds).unwrap();
        let name = preds
            .first()
            .map_or("predictions".into(), |p| p.model_name_or_path.clone());
        subs.push((
            name,
            preds
                .into_iter()
                .filter(|p| !p.is_empty_patch())
                .map(|p| (p.instance_id, p.model_patch.unwrap_or_default()))
                .collect(),
        ));
    }
    let mirror_s = mirror.display().to_string();
    let mut results: BTreeMap<String, Vec<(String, StaticReview, f64)>> = BTreeMap::new();
    let mut not_applied: BTreeMap<String, usize> = BTreeMap::new();
    let t_all = Instant::now();
    for inst in ds.instances.iter().filter(|i| i.repo == repo).take(limit) {
        let work = tempfile::tempdir().unwrap();
        let root = work.path().join("testbed");
        std::fs::create_dir(&root).unwrap();
        let sh = |cmd: &str| {
            let out = Command::new("bash")
                .arg("-c")
                .arg(cmd)
                .current_dir(&root)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{cmd}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        sh(&format!(
            "git --git-dir='{mirror_s}' archive {} | tar -x && git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm base",
            inst.base_commit
        ));
        let extra = lint::configured(&root);
        let ctx = Context {
            issue: &inst.problem_statement,
            gold_patch: Some(&inst.patch),
        };
        for (label, patches) in &subs {
            let Some(text) = patches.get(&inst.instance_id) else {
                continue;
            };
            let t0 = Instant::now();
            let applied = Patch::parse(text)
                .ok()
                .filter(|p| patch::apply(&root, p).is_ok());
            if applied.is_none() {
                *not_applied.entry(label.clone()).or_default() += 1;
                continue;
            }
            let files = parse_diff(text).unwrap();
            let (base_paths, new_paths, written, deleted) = script::paths_of(&files);
            let new_dir = work.path().join(format!("new-{label}"));
            for p in &written {
                let (src, dst) = (root.join(p), new_dir.join(p));
                std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
                if src.is_file() {
                    std::fs::copy(src, dst).unwrap();
                }
            }
            sh("git checkout -q -- . && git clean -qfdx");
            let (root_s, new_s) = (root.display().to_string(), new_dir.display().to_string());
            let spec = ScriptSpec {
                root: &root_s,
                tool_bin: &tool_bin,
                patched_dir: &new_s,
                base_paths,
                new_paths,
                written,
                deleted,
                extra: extra.clone(),
                ruff_configured: lint::ruff_configured(&root),
            };
            let out = Command::new("bash")
                .arg("-c")
                .arg(script::build(&spec))
                .output()
                .unwrap();
            let r = script::parse_log(&String::from_utf8_lossy(&out.stdout), &spec);
            let review = script::review_from(&r, &spec, &files, hygiene::check(text, &ctx));
            sh("git checkout -q -- . && git clean -qfdx");
            results.entry(label.clone()).or_default().push((
                inst.instance_id.clone(),
                review,
                t0.elapsed().as_secs_f64(),
            ));
        }
    }
    println!("{repo}: {:.1} s in all", t_all.elapsed().as_secs_f64());
    for (label, rows) in &results {
        let n = rows.len();
        let mut scores: Vec<f64> = rows.iter().map(|r| r.1.score.score).collect();
        scores.sort_by(f64::total_cmp);
        let secs: Vec<f64> = rows.iter().map(|r| r.2).collect();
        let mut kinds: BTreeMap<FindingKind, usize> = BTreeMap::new();
        let mut rules: BTreeMap<String, usize> = BTreeMap::new();
        let mut notes = 0;
        for (_, r, _) in rows {
            let ks: std::collections::BTreeSet<FindingKind> =
                r.findings.iter().map(|f| f.kind).collect();
            for k in ks {
                *kinds.entry(k).or_default() += 1;
            }
            for f in r.lint.iter().flat_map(|d| &d.new) {
                *rules
                    .entry(format!("{} {}", f.tool.name(), f.rule))
                    .or_default() += 1;
            }
            notes += usize::from(r.notes.iter().any(|n| n.starts_with("not run")));
        }
        let bucket = |lo: f64, hi: f64| scores.iter().filter(|s| **s >= lo && **s < hi).count();
        println!(
            "{label}: {n} reviewed ({} not applied), {notes} with a linter that did not run; mean score {:.1}, median {:.0}; 100: {}, [90,100): {}, [75,90): {}, [50,75): {}, <50: {}; {:.2} s per patch (max {:.2})",
            not_applied.get(label).copied().unwrap_or(0),
            scores.iter().sum::<f64>() / n.max(1) as f64,
            scores.get(n / 2).copied().unwrap_or(f64::NAN),
            bucket(100.0, 101.0),
            bucket(90.0, 100.0),
            bucket(75.0, 90.0),
            bucket(50.0, 75.0),
            bucket(0.0, 50.0),
            secs.iter().sum::<f64>() / n.max(1) as f64,
            secs.iter().copied().fold(0.0, f64::max),
        );
        println!("  patches with the finding: {kinds:?}");
        println!("  new lint findings by rule: {rules:?}");
        if std::env::var_os("PATCHGRADE_BENCH_VERBOSE").is_some() {
            for (id, r, _) in rows {
                for f in &r.findings {
                    println!("    {id} {} {} {}", f.kind, f.location(), f.message);
                }
                for n in &r.notes {
                    println!("    {id} note: {n}");
                }
            }
        }
    }
}
