//! Unit tests of the pass@k report: tables, estimates, comparison, slices.

use std::path::Path;

use serde_json::json;

use super::build::{build_report, ReportOptions};
use super::compare::{compare, DiffOrNote};
use super::samples::RunSamples;
use super::slices::SliceSource;
use crate::metrics::aggregate::InstanceSamples;
use crate::record::EvalRecord;

fn rec(model: &str, id: &str, sample: &str, outcome: &str, suspect: bool) -> EvalRecord {
    let mut v = json!({
        "instance_id": id, "model_name_or_path": model, "sample_id": sample,
        "outcome": outcome, "cache_key": "x", "backend": "local",
        "patch_sha256": null, "spec_hash": null, "patchgrade_version": "0.1.0",
        "timings": {"checkout": 0.0, "env": 0.0, "apply": 0.0, "tests": 0.0, "total": 0.0},
    });
    if suspect {
        v["audit"] = json!({"verdict": "suspect"});
    }
    serde_json::from_value(v).unwrap()
}

fn run() -> RunSamples {
    let vals = vec![
        rec("m", "o__r-1", "0", "resolved", false),
        rec("m", "o__r-1", "1", "resolved", true),
        rec("m", "o__r-1", "2", "unresolved", false),
        rec("m", "o__r-1", "10", "infra_error", false),
        rec("m", "o__r-2", "0", "empty_patch", false),
        rec("m", "o__r-2", "1", "resolved", false),
        rec("m", "o__s-3", "0", "environment_build_failed", false),
    ];
    RunSamples::from_records(Path::new("/x"), "r", &vals)
}

#[test]
fn tables_exclude_environment_failures_and_count_clean_passes() {
    let r = run();
    let m = &r.models["m"];
    assert!(m.has_samples());
    assert_eq!(
        m.table(false),
        vec![
            InstanceSamples::new("o__r-1", 3, 2),
            InstanceSamples::new("o__r-2", 2, 1)
        ]
    );
    assert_eq!(m.table(true)[0], InstanceSamples::new("o__r-1", 3, 1));
    assert_eq!(m.unusable_instances(), vec!["o__s-3".to_string()]);
    assert_eq!(m.excluded_samples().count(), 2);
    assert_eq!(m.suspect_passes(), 1);
    // Sample ids sort numerically.
    let ids: Vec<_> = m.by_instance["o__r-1"]
        .iter()
        .map(|s| s.sample_id.clone().unwrap())
        .collect();
    assert_eq!(ids, ["0", "1", "2", "10"]);
}

#[test]
fn report_numbers_and_withheld_k() {
    let r = run();
    let opts = ReportOptions {
        ks: vec![1, 2, 3],
        resamples: 200,
        ..ReportOptions::default()
    };
    let rep = build_report(&r, &opts, &SliceSource::default()).unwrap();
    let m = &rep.models["m"];
    // pass@1 = (2/3 + 1/2) / 2; clean (1/3 + 1/2) / 2.
    let v = m.metrics.get("pass@1").unwrap().estimate.value.unwrap();
    assert!((v - (2.0 / 3.0 + 0.5) / 2.0).abs() < 1e-12);
    let c = m.clean.get("pass@1").unwrap().estimate.value.unwrap();
    assert!((c - (1.0 / 3.0 + 0.5) / 2.0).abs() < 1e-12);
    // pass^2: (C(2,2)/C(3,2) + 0) / 2 = 1/6.
    let h = m.metrics.get("pass^2").unwrap().estimate.value.unwrap();
    assert!((h - 1.0 / 6.0).abs() < 1e-12);
    // o__r-2 has n = 2 < 3.
    let p3 = m.metrics.get("pass@3").unwrap();
    assert_eq!(p3.estimate.value, None);
    assert_eq!(p3.estimate.short_instances, vec!["o__r-2".to_string()]);
    let table = rep.table(true);
    assert!(table.contains("pass@3  not reported"), "{table}");
    assert!(table.contains("o__r-2"), "{table}");
    assert!(table.contains("2 samples excluded"), "{table}");
    // Repo slices from instance ids without a dataset.
    let repos: Vec<_> = m.slices.get("repo").unwrap().keys().cloned().collect();
    assert_eq!(repos, ["o/r"]);
    assert_eq!(m.curve.len(), 2, "k = 1..n_min");
}

#[test]
fn default_ks_stop_at_the_largest_n() {
    let rep = build_report(&run(), &ReportOptions::default(), &SliceSource::default()).unwrap();
    assert_eq!(rep.ks, vec![1, 2]);
}

#[test]
fn compare_pairs_single_models_and_uses_shared_instances() {
    let a = run();
    let vals = vec![
        rec("other", "o__r-1", "0", "unresolved", false),
        rec("other", "o__r-1", "1", "unresolved", false),
        rec("other", "o__r-2", "0", "resolved", false),
        rec("other", "o__r-2", "1", "resolved", false),
        rec("other", "o__r-9", "0", "resolved", false),
    ];
    let b = RunSamples::from_records(Path::new("/y"), "s", &vals);
    let opts = ReportOptions {
        ks: vec![1],
        resamples: 200,
        ..ReportOptions::default()
    };
    let c = compare(&a, &b, &opts);
    assert_eq!(c.pairs.len(), 1);
    let p = &c.pairs[0];
    assert_eq!(
        (p.instances, p.only_in_b.clone()),
        (2, vec!["o__r-9".to_string()])
    );
    // A: (2/3, 1/2); B: (0, 1) -> diff = (2/3 - 1/2) / 2.
    let d = match p.metrics.get("pass@1") {
        Some(DiffOrNote::Diff(d)) => d.diff,
        other => panic!("{other:?}"),
    };
    assert!((d - (2.0 / 3.0 - 0.5) / 2.0).abs() < 1e-12, "{d}");
    assert!(c.table().contains("pass@1"));
}

#[test]
fn metadata_join_and_fields() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("meta.jsonl");
    std::fs::write(
        &p,
        "{\"id\": \"o__r-1\", \"difficulty\": \"easy\"}\n{\"instance_id\": \"o__r-2\", \"difficulty\": 3}\n",
    )
    .unwrap();
    let mut s = SliceSource::default();
    assert_eq!(s.add_metadata(&p).unwrap(), 2);
    assert_eq!(s.group("o__r-1", "difficulty"), "easy");
    assert_eq!(s.group("o__r-2", "difficulty"), "3");
    assert_eq!(s.group("o__r-3", "difficulty"), "(missing)");
    std::fs::write(&p, "{\"difficulty\": 1}\n").unwrap();
    let e = s.add_metadata(&p).unwrap_err().to_string();
    assert!(e.contains("meta.jsonl:1"), "{e}");
}
