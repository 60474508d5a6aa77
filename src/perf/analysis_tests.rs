//! Unit tests of `perf::analyse` and `perf::aggregate` on driver output
//! built in the test (times from a seeded generator around known medians).

use super::record::{BuildResult, DriverOutput, Fingerprint, RunSample};
use super::*;
use crate::metrics::rng::SplitMix64;

fn fingerprint(load: f64) -> Fingerprint {
    Fingerprint {
        cpu_model: "test cpu".into(),
        cores: Some(2),
        cpus_allowed: Some(1),
        kernel: "Linux test".into(),
        python: "3.11".into(),
        load_before: Some(vec![load, 0.0, 0.0]),
        load_after: Some(vec![load, 0.0, 0.0]),
        driver_rss_kb: Some(10_000),
        instructions: "unavailable: test".into(),
        own_timer: None,
        defences: None,
    }
}

/// Runs of `name`: `repeat` rounds, times `median * (1 + noise)` with noise
/// uniform in ±`spread`.
fn runs(name: &str, median: f64, spread: f64, repeat: usize, seed: u64) -> Vec<RunSample> {
    let mut rng = SplitMix64::new(seed);
    (0..repeat)
        .map(|round| {
            let t = median * (1.0 + spread * (2.0 * rng.next_f64() - 1.0));
            RunSample {
                variant: name.into(),
                item: "workload".into(),
                item_index: 0,
                round,
                position: 0,
                wall_s: t,
                user_s: t * 0.9,
                sys_s: t * 0.05,
                cpu_s: t * 0.95,
                max_rss_kb: 30_000,
                exit_code: Some(0),
                signal: None,
                timed_out: false,
                instructions: None,
                reported_s: None,
                output_tail: None,
                evidence: Default::default(),
            }
        })
        .collect()
}

fn info(name: &str, role: Role, resolved: Option<bool>) -> VariantInfo {
    VariantInfo {
        name: name.into(),
        role,
        model: (role == Role::Candidate).then(|| "agent".to_string()),
        resolved,
    }
}

fn demo(aa_spread: f64) -> (Vec<VariantInfo>, DriverOutput) {
    let variants = vec![
        info("base", Role::Base, None),
        info("base-aa", Role::BaseCopy, None),
        info("gold", Role::Gold, Some(true)),
        info("a", Role::Candidate, Some(true)),
        info("b", Role::Candidate, Some(true)),
        info("c", Role::Candidate, Some(false)),
    ];
    let mut all = Vec::new();
    all.extend(runs("base", 0.40, 0.01, 10, 1));
    all.extend(runs("base-aa", 0.40, aa_spread, 10, 2));
    all.extend(runs("gold", 0.08, 0.01, 10, 3));
    all.extend(runs("a", 0.35, 0.01, 10, 4));
    all.extend(runs("b", 0.50, 0.01, 10, 5));
    all.extend(runs("c", 0.05, 0.01, 10, 6));
    let out = DriverOutput {
        fingerprint: fingerprint(0.5),
        builds: Vec::new(),
        warmups: Vec::new(),
        runs: all,
        sweep: None,
    };
    (variants, out)
}

fn by_name<'a>(a: &'a InstanceAnalysis, name: &str) -> &'a VariantResult {
    a.variants.iter().find(|v| v.name == name).unwrap()
}

#[test]
fn demo_shape_gets_the_expected_verdicts_and_gate() {
    let (variants, out) = demo(0.01);
    let a = analyse(&variants, &out, 1, 10, true, &AnalysisOptions::default());
    assert!(!a.too_noisy && !a.under_load, "{:?}", a.notes);
    let aa = a.aa.as_ref().unwrap();
    assert!(aa.contains(1.0), "{aa:?}");
    assert!(a.noise_floor.unwrap() < 0.05);

    let gold = by_name(&a, "gold");
    assert_eq!(gold.status, Status::Scored);
    let g = gold.comparison.as_ref().unwrap();
    assert_eq!(g.verdict, Verdict::Faster);
    assert!((g.speedup.point - 5.0).abs() < 0.2, "{}", g.speedup.point);
    // Ten fully separated values per side: the exact one-sided p is 1/C(20,10).
    assert_eq!(g.method, MwuMethod::Exact);
    assert!((g.p_faster - 1.0 / 184_756.0).abs() < 1e-12);
    assert_eq!(g.reaches_expert, Some(true));

    let ca = by_name(&a, "a").comparison.clone().unwrap();
    assert_eq!(ca.verdict, Verdict::Faster);
    assert_eq!(ca.reaches_expert, Some(false));
    let sr = ca.relative_to_expert.unwrap();
    assert!((sr - (0.40 / 0.35) / 5.0).abs() < 0.02, "{sr}");

    assert_eq!(
        by_name(&a, "b").comparison.as_ref().unwrap().verdict,
        Verdict::Slower
    );
    // Fast but wrong: measured and reported, never credited.
    let c = by_name(&a, "c");
    assert!(matches!(c.status, Status::NotCredited { .. }));
    assert_eq!(c.comparison.as_ref().unwrap().verdict, Verdict::Faster);
    assert_eq!(c.comparison.as_ref().unwrap().reaches_expert, Some(false));
    assert_eq!(by_name(&a, "base").status, Status::Reference);

    let agg = aggregate([&a]);
    let agent = &agg["agent"];
    assert_eq!(
        (
            agent.variants,
            agent.scored,
            agent.not_credited,
            agent.faster,
            agent.slower
        ),
        (3, 2, 1, 1, 1)
    );
    assert_eq!(agent.share_faster, Some(0.5));
    assert_eq!(agent.share_reaching_expert, Some(0.0));
    // hmean over scored {a, b}; "all" adds c as 1/gold.
    let (sa, sb) = (
        by_name(&a, "a")
            .comparison
            .as_ref()
            .unwrap()
            .relative_to_expert
            .unwrap(),
        by_name(&a, "b")
            .comparison
            .as_ref()
            .unwrap()
            .relative_to_expert
            .unwrap(),
    );
    let hm = 2.0 / (1.0 / sa + 1.0 / sb);
    assert!((agent.hmean_relative_to_expert.unwrap() - hm).abs() < 1e-12);
    let gs = g.speedup.point;
    let hm_all = 3.0 / (1.0 / sa + 1.0 / sb + gs);
    assert!((agent.hmean_relative_to_expert_all.unwrap() - hm_all).abs() < 1e-12);
    assert_eq!(agg["gold"].faster, 1);
    // Opt@K: none of the agent's three attempts reaches gold; gold does.
    assert_eq!(opt_at_k([&a], "agent", 1), Some(0.0));
    assert_eq!(opt_at_k([&a], "agent", 3), Some(0.0));
    assert_eq!(opt_at_k([&a], "agent", 4), None, "fewer attempts than k");
    assert_eq!(opt_at_k([&a], "gold", 1), Some(1.0));
}

#[test]
fn opt_at_k_counts_attempts_that_reach_the_expert() {
    let (mut variants, mut out) = demo(0.01);
    // A fourth attempt as fast as gold: 1 of 4 reaches the expert.
    variants.push(info("d", Role::Candidate, Some(true)));
    out.runs.extend(runs("d", 0.079, 0.01, 10, 7));
    let a = analyse(&variants, &out, 1, 10, true, &AnalysisOptions::default());
    assert_eq!(opt_at_k([&a], "agent", 1), Some(0.25));
    // pass@2 with n = 4, c = 1: 1 - C(3,2)/C(4,2) = 0.5
    assert!((opt_at_k([&a], "agent", 2).unwrap() - 0.5).abs() < 1e-12);
    assert_eq!(
        aggregate([&a])["agent"].share_reaching_expert,
        Some(1.0 / 3.0)
    );
}

#[test]
fn a_noisy_instance_is_reported_not_scored() {
    let (variants, out) = demo(0.5);
    let a = analyse(&variants, &out, 1, 10, true, &AnalysisOptions::default());
    assert!(a.too_noisy, "floor {:?}", a.noise_floor);
    for name in ["gold", "a", "b"] {
        assert_eq!(
            by_name(&a, name).status,
            Status::NotScored {
                reason: "instance too noisy".into()
            }
        );
        // The figures are still there for the reader.
        assert!(by_name(&a, name).comparison.is_some());
    }
    assert!(a.notes.iter().any(|n| n.starts_with("too noisy")));
    assert_eq!(aggregate([&a])["agent"].scored, 0);
    assert_eq!(aggregate([&a])["agent"].share_faster, None);
}

#[test]
fn failed_builds_aborted_runs_and_load_are_flagged() {
    let (variants, mut out) = demo(0.01);
    out.builds.push(BuildResult {
        variant: "a".into(),
        ok: false,
        exit_code: Some(2),
        wall_s: 1.0,
        timed_out: false,
        output_tail: None,
    });
    out.runs.retain(|r| r.variant != "a");
    let r = out.runs.iter_mut().find(|r| r.variant == "b").unwrap();
    r.timed_out = true;
    r.signal = Some(9);
    out.fingerprint = fingerprint(3.5);
    let a = analyse(&variants, &out, 1, 10, true, &AnalysisOptions::default());
    assert!(a.under_load);
    assert_eq!(
        by_name(&a, "a").status,
        Status::NotScored {
            reason: "build failed (exit 2)".into()
        }
    );
    assert_eq!(
        by_name(&a, "b").status,
        Status::NotScored {
            reason: "run of workload in round 0 timed out".into()
        }
    );
    assert_eq!(by_name(&a, "gold").status, Status::Scored);
}

#[test]
fn failing_tests_are_counted_not_fatal_but_a_failing_script_is() {
    let (variants, mut out) = demo(0.01);
    for r in out.runs.iter_mut().filter(|r| r.variant == "base") {
        r.exit_code = Some(1);
    }
    let tests = analyse(&variants, &out, 1, 10, false, &AnalysisOptions::default());
    assert_eq!(
        by_name(&tests, "base")
            .stats
            .as_ref()
            .unwrap()
            .nonzero_exits,
        10
    );
    assert_eq!(by_name(&tests, "gold").status, Status::Scored);
    assert!(tests.notes.contains(
        &"gold: 0 runs exited non-zero (base: 10); failing and passing runs are timed alike"
            .to_string()
    ));
    let script = analyse(&variants, &out, 1, 10, true, &AnalysisOptions::default());
    assert!(script.notes[0].starts_with("base could not be measured: workload workload failed"));
    assert!(matches!(
        by_name(&script, "gold").status,
        Status::NotScored { .. }
    ));
}

#[test]
fn outliers_are_dropped_before_the_statistics() {
    let (variants, mut out) = demo(0.01);
    // One very slow round of gold (a hiccup) is dropped by the IQR rule.
    out.runs
        .iter_mut()
        .find(|r| r.variant == "gold" && r.round == 3)
        .unwrap()
        .wall_s = 3.0;
    let a = analyse(&variants, &out, 1, 10, true, &AnalysisOptions::default());
    let s = by_name(&a, "gold").stats.clone().unwrap();
    assert_eq!(s.dropped, vec![3.0]);
    assert_eq!(s.times.len(), 10);
    assert!(s.median < 0.1);
    let none = AnalysisOptions {
        outliers: stats::OutlierRule { iqr_k: None },
        ..AnalysisOptions::default()
    };
    let b = analyse(&variants, &out, 1, 10, true, &none);
    assert!(by_name(&b, "gold")
        .stats
        .as_ref()
        .unwrap()
        .dropped
        .is_empty());
}

#[test]
fn cpu_metric_and_missing_aa() {
    let (mut variants, out) = demo(0.01);
    variants.retain(|v| v.role != Role::BaseCopy);
    let opts = AnalysisOptions {
        metric: Metric::Cpu,
        ..AnalysisOptions::default()
    };
    let a = analyse(&variants, &out, 1, 10, true, &opts);
    assert_eq!(a.noise_floor, None);
    assert!(!a.too_noisy);
    assert!(a.notes.iter().any(|n| n.contains("no A/A")));
    let base = by_name(&a, "base").stats.clone().unwrap();
    assert!((base.median - 0.40 * 0.95).abs() < 0.01);
}

#[test]
fn reported_metric_reads_the_workloads_own_figure() {
    // Process times are dominated by a 0.5 s start-up that every variant
    // pays; the workload's own `Mean:` figures carry the 4x speedup.
    let (variants, mut out) = demo(0.01);
    for r in &mut out.runs {
        let own = match r.variant.as_str() {
            "gold" => 0.002,
            _ => 0.008,
        };
        r.reported_s = Some(own * (1.0 + 0.001 * r.round as f64));
        // The demo's seeded noise, scaled down, keeps the process times apart.
        r.cpu_s = 0.5 + own + 0.01 * r.wall_s;
    }
    let opts = |metric| AnalysisOptions {
        metric,
        ..AnalysisOptions::default()
    };
    let a = analyse(&variants, &out, 1, 10, true, &opts(Metric::Reported));
    let g = by_name(&a, "gold").comparison.clone().unwrap();
    assert!((g.speedup.point - 4.0).abs() < 0.01, "{}", g.speedup.point);
    assert_eq!(g.verdict, Verdict::Faster);
    let cpu = analyse(&variants, &out, 1, 10, true, &opts(Metric::Cpu));
    let g = by_name(&cpu, "gold").comparison.clone().unwrap();
    assert!(
        g.speedup.point > 1.0 && g.speedup.point < 1.03,
        "{}",
        g.speedup.point
    );

    // A run without the figure makes that variant unmeasurable under this
    // metric (never a silent zero), and says which run.
    let r = out
        .runs
        .iter_mut()
        .find(|r| r.variant == "a" && r.round == 3)
        .unwrap();
    r.reported_s = None;
    let a = analyse(&variants, &out, 1, 10, true, &opts(Metric::Reported));
    match &by_name(&a, "a").status {
        Status::NotScored { reason } => assert!(
            reason.contains("round 3 reported no time of its own"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    // The other metrics do not need it.
    let a = analyse(&variants, &out, 1, 10, true, &opts(Metric::Cpu));
    assert_eq!(by_name(&a, "a").status, Status::Scored);
}
