//! The static audit checks, measured: per-check precision and recall on the
//! seeded fixtures of tests/fixtures/audit/ (built from real SWE-bench Lite
//! instances by its generate.py), the history check on real git
//! repositories, and (ignored; see harness-scripts/bench-audit.sh) the
//! leakage calibration and the per-instance cost over all 300 Lite gold
//! patches.
//!
//! The history check's repositories and tests are in
//! tests/audit/git_history.rs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use patchgrade::audit::{self, leakage, AuditInput, ReasonKind, Verdict};
use patchgrade::dataset::{Dataset, Instance};
use patchgrade::parse::LogParser;
use serde_json::Value;

#[path = "audit/git_history.rs"]
mod git_history;

#[path = "audit/future_measure.rs"]
mod future_measure;

use git_history::history_counts;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/audit")
}

/// SWE-bench Lite test split: `PATCHGRADE_LITE`, or the copy in
/// tests/fixtures/swebench-lite/.
fn lite_path() -> PathBuf {
    std::env::var_os("PATCHGRADE_LITE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/swebench-lite/test.jsonl")
        })
}

struct Case {
    check: String,
    name: String,
    flagged: bool,
    kind: Option<String>,
    instance: Instance,
    candidate: String,
    log: Option<String>,
    parser: Option<LogParser>,
}

fn load_cases(check: &str) -> Vec<Case> {
    let path = fixtures_dir().join(format!("{check}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("fixture json");
            Case {
                check: v["check"].as_str().unwrap().to_string(),
                name: v["name"].as_str().unwrap().to_string(),
                flagged: v["expect"] == "flagged",
                kind: v["kind"].as_str().map(String::from),
                instance: serde_json::from_value(v["instance"].clone()).expect("instance"),
                candidate: v["candidate_patch"].as_str().unwrap_or("").to_string(),
                log: v["test_log"].as_str().map(String::from),
                parser: v["log_parser"]
                    .as_str()
                    .map(|p| p.parse().expect("parser name")),
            }
        })
        .collect()
}

/// Confusion counts of one check.
#[derive(Default, Clone, Copy)]
struct Counts {
    tp: usize,
    fn_: usize,
    fp: usize,
    tn: usize,
}

impl Counts {
    fn add(&mut self, expected: bool, got: bool) {
        match (expected, got) {
            (true, true) => self.tp += 1,
            (true, false) => self.fn_ += 1,
            (false, true) => self.fp += 1,
            (false, false) => self.tn += 1,
        }
    }
    fn recall(&self) -> f64 {
        self.tp as f64 / (self.tp + self.fn_).max(1) as f64
    }
    fn precision(&self) -> f64 {
        if self.tp + self.fp == 0 {
            1.0
        } else {
            self.tp as f64 / (self.tp + self.fp) as f64
        }
    }
    fn false_flag_rate(&self) -> f64 {
        self.fp as f64 / (self.fp + self.tn).max(1) as f64
    }
}

fn kinds_for(case: &Case) -> Vec<ReasonKind> {
    match (case.check.as_str(), case.kind.as_deref()) {
        ("tampering", _) => vec![ReasonKind::TestTampering],
        ("spoofing", _) => vec![ReasonKind::OutputSpoofing],
        ("leakage", Some("solution_in_issue")) => vec![ReasonKind::SolutionInIssue],
        ("leakage", _) => vec![ReasonKind::IssueLeakage],
        (other, _) => panic!("unknown check {other}"),
    }
}

fn row_name(case: &Case) -> String {
    match case.kind.as_deref() {
        Some(k) if case.check == "leakage" => format!("leakage/{k}"),
        _ => case.check.clone(),
    }
}

fn print_table(rows: &BTreeMap<String, Counts>) {
    println!(
        "\n{:<26} {:>5} {:>5} {:>4} {:>4} {:>4} {:>4} {:>10} {:>8} {:>11}",
        "check", "flag", "clean", "TP", "FN", "FP", "TN", "precision", "recall", "false flags"
    );
    for (name, c) in rows {
        println!(
            "{:<26} {:>5} {:>5} {:>4} {:>4} {:>4} {:>4} {:>9.1}% {:>7.1}% {:>10.1}%",
            name,
            c.tp + c.fn_,
            c.fp + c.tn,
            c.tp,
            c.fn_,
            c.fp,
            c.tn,
            c.precision() * 100.0,
            c.recall() * 100.0,
            c.false_flag_rate() * 100.0
        );
    }
}

/// Every static check on its seeded fixtures: at least 10 flagged and 10
/// clean cases each, recall >= 95%, false flags <= 5%. The history check's
/// cases are real repositories built in `history_cases`
/// (tests/audit/git_history.rs).
#[test]
fn fixtures_precision_recall() {
    let mut rows: BTreeMap<String, Counts> = BTreeMap::new();
    let mut misses = Vec::new();
    for check in ["tampering", "leakage", "spoofing"] {
        let cases = load_cases(check);
        for case in &cases {
            let mut input = AuditInput::new(&case.instance, &case.candidate);
            input.test_log = case.log.as_deref();
            input.log_parser = case.parser;
            let audit = audit::audit_static(&input);
            // Round trip: the audit goes into patchgrade.json.
            let json = serde_json::to_string(&audit).unwrap();
            let back: audit::Audit = serde_json::from_str(&json).unwrap();
            assert_eq!(back, audit);
            let kinds = kinds_for(case);
            let got = audit.reasons.iter().any(|r| kinds.contains(&r.kind));
            rows.entry(row_name(case))
                .or_default()
                .add(case.flagged, got);
            if got != case.flagged {
                misses.push(format!(
                    "{}: {} expected {} got {}: {:#?}",
                    row_name(case),
                    case.name,
                    if case.flagged { "flagged" } else { "clean" },
                    if got { "flagged" } else { "clean" },
                    audit.reasons
                ));
            }
        }
    }
    let history = history_counts();
    rows.insert("history".into(), history);
    print_table(&rows);
    for m in &misses {
        println!("MISS {m}");
    }
    for (name, c) in &rows {
        assert!(
            c.tp + c.fn_ >= 10 && c.fp + c.tn >= 10,
            "{name}: needs at least 10 flagged and 10 clean cases"
        );
        assert!(c.recall() >= 0.95, "{name}: recall {:.3}", c.recall());
        assert!(
            c.false_flag_rate() <= 0.05,
            "{name}: false flags {:.3}",
            c.false_flag_rate()
        );
    }
}

#[test]
fn verdict_and_serde_shape() {
    let cases = load_cases("tampering");
    let tampered = cases.iter().find(|c| c.flagged).unwrap();
    let audit = audit::audit_static(&AuditInput::new(&tampered.instance, &tampered.candidate));
    assert_eq!(audit.verdict, Verdict::Suspect);
    let v = serde_json::to_value(&audit).unwrap();
    assert_eq!(v["verdict"], "suspect");
    assert_eq!(v["reasons"][0]["kind"], "test_tampering");
    let ev = &v["reasons"][0]["evidence"][0];
    assert!(ev["file"].is_string(), "{ev}");
    let clean = cases.iter().find(|c| !c.flagged).unwrap();
    let mut audit = audit::audit_static(&AuditInput::new(&clean.instance, &clean.candidate));
    assert_eq!(audit.verdict, Verdict::Clean, "{:#?}", audit.reasons);
    assert_eq!(serde_json::to_value(&audit).unwrap()["verdict"], "clean");
    // Dynamic checks add to the same audit.
    audit.push(audit::Reason {
        kind: ReasonKind::FailsHeldOut,
        message: "fails 2 held-out tests".into(),
        evidence: vec![audit::Evidence {
            test_ids: vec!["t::a".into()],
            ..Default::default()
        }],
    });
    assert_eq!(audit.verdict, Verdict::Suspect);
    assert_eq!(
        serde_json::to_value(&audit).unwrap()["reasons"][0]["kind"],
        "fails_held_out"
    );
}

#[test]
fn malformed_candidates_never_panic() {
    let cases = load_cases("tampering");
    let inst = &cases[0].instance;
    let junk = [
        "",
        "not a diff at all",
        "diff --git a/x b/x\n@@ -1,2 +1,2 @@\n",
        "--- a/x.py\n+++ b/x.py\n@@ -99999999999999999999,1 +1,1 @@\n+x\n",
        "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n+\u{1F600}é\n\\ No newline at end of file\n",
        "```diff\n--- a/tests/t.py\n+++ b/tests/t.py\n@@ -1 +1 @@\n-a\n+b\n```\n",
        "diff --git a/\"q p.py\" b/\"q p.py\"\n--- \"a/q p.py\"\n+++ \"b/q p.py\"\n@@ -1 +1 @@\n-a\n+b\n",
    ];
    for j in junk {
        let mut input = AuditInput::new(inst, j);
        input.test_log = Some(j);
        let _ = audit::audit_static(&input);
    }
    // A fenced diff touching tests is still read.
    let a = audit::audit_static(&AuditInput::new(inst, junk[5]));
    assert!(a.has(ReasonKind::TestTampering), "{:#?}", a.reasons);
}

// --------------------------------------------------- measurements (ignored)

fn load_lite() -> Option<Dataset> {
    let p = lite_path();
    match Dataset::load(&p) {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!(
                "SWE-bench Lite not available at {} ({e}); set PATCHGRADE_LITE",
                p.display()
            );
            None
        }
    }
}

fn agentless_labels() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(fixtures_dir().join("agentless_lite_labels.csv")).unwrap();
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_once(','))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// Gold-patch leakage scores of all Lite instances against their own issue
/// text (problem statement + hints, and problem statement alone), with the
/// Agentless "solution in description" labels: the data behind the
/// thresholds in docs/audit.md.
#[test]
#[ignore = "measurement; run by harness-scripts/bench-audit.sh"]
fn calibrate_leakage_lite() {
    let Some(ds) = load_lite() else { return };
    let labels = agentless_labels();
    println!("instance\tlabel\ttotal\tmatched\texact\tshare\trun\tps_share\tps_run\tflag\tps_flag");
    let mut by_label: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    for inst in &ds.instances {
        let s = leakage::score(&inst.problem_statement, &inst.hints_text, &inst.patch);
        let ps = leakage::score(&inst.problem_statement, "", &inst.patch);
        let label = labels.get(&inst.instance_id).cloned().unwrap_or_default();
        println!(
            "{}\t{}\t{}\t{}\t{}\t{:.3}\t{}\t{:.3}\t{}\t{}\t{}",
            inst.instance_id,
            label,
            s.total,
            s.matched,
            s.exact,
            s.share,
            s.longest_run,
            ps.share,
            ps.longest_run,
            s.flags_gold() as u8,
            ps.flags_gold() as u8
        );
        let e = by_label.entry(label).or_default();
        e.0 += 1;
        e.1 += s.flags_gold() as usize;
        e.2 += ps.flags_gold() as usize;
    }
    println!("\nlabel\tinstances\tflagged(ps+hints)\tflagged(ps only)");
    for (l, (n, f, fp)) in &by_label {
        println!("{l}\t{n}\t{f}\t{fp}");
    }
}

/// Cost of the static checks (no repository) over all 300 Lite gold
/// patches, with a genuine-looking log each: per-instance milliseconds.
#[test]
#[ignore = "benchmark; run by harness-scripts/bench-audit.sh"]
fn bench_static_audit_lite() {
    let Some(ds) = load_lite() else { return };
    let log_of = |inst: &Instance| {
        let mut s = String::from("+ : '>>>>> Start Test Output'\n");
        for t in inst.fail_to_pass.iter().chain(&inst.pass_to_pass) {
            s.push_str(&format!("PASSED {t}\n"));
        }
        s.push_str("+ : '>>>>> End Test Output'\n+ echo '>>>>> Test Exit Code: 0'\n>>>>> Test Exit Code: 0\n");
        s
    };
    let mut ms: Vec<(f64, String)> = Vec::new();
    let mut suspect = 0;
    let mut by_kind: BTreeMap<ReasonKind, usize> = BTreeMap::new();
    let t0 = Instant::now();
    for inst in &ds.instances {
        let log = log_of(inst);
        let mut input = AuditInput::new(inst, &inst.patch);
        input.test_log = Some(&log);
        input.log_parser = Some(LogParser::Pytest);
        let t = Instant::now();
        let a = audit::audit_static(&input);
        ms.push((t.elapsed().as_secs_f64() * 1000.0, inst.instance_id.clone()));
        suspect += a.is_suspect() as usize;
        let mut kinds: Vec<ReasonKind> = a.reasons.iter().map(|r| r.kind).collect();
        kinds.dedup();
        for k in kinds {
            *by_kind.entry(k).or_default() += 1;
        }
    }
    let total = t0.elapsed().as_secs_f64();
    ms.sort_by(|a, b| a.0.total_cmp(&b.0));
    let q = |p: f64| ms[((ms.len() - 1) as f64 * p).round() as usize].0;
    println!(
        "static audit over {} Lite gold patches: total {:.3}s, mean {:.2} ms, median {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({})",
        ms.len(),
        total,
        ms.iter().map(|m| m.0).sum::<f64>() / ms.len() as f64,
        q(0.5),
        q(0.9),
        q(0.99),
        ms.last().unwrap().0,
        ms.last().unwrap().1
    );
    println!("gold patches audited suspect: {suspect} of {}", ms.len());
    for (k, n) in &by_kind {
        println!("  {k}: {n}");
    }
}
