//! Unit tests of `perf::integrity` through `perf::analyse`, on driver
//! output built in the test (times from a seeded generator).

use super::super::record::{
    Change, FinalSweep, Fingerprint, LeftFile, RunEvidence, StateRead, SweptFile,
};
use super::super::{aggregate, analyse, render, Status};
use super::*;
use crate::metrics::rng::SplitMix64;

fn fingerprint() -> Fingerprint {
    Fingerprint {
        cpu_model: "test".into(),
        cores: Some(2),
        cpus_allowed: Some(1),
        kernel: "Linux".into(),
        python: "3.11".into(),
        load_before: None,
        load_after: None,
        driver_rss_kb: None,
        instructions: "unavailable: test".into(),
        own_timer: Some("cpu".into()),
        defences: None,
    }
}

/// A variant's runs: per round, the reported figure and the process CPU
/// time around given medians (±2%), and the output digest.
struct Spec<'a> {
    name: &'a str,
    reported: f64,
    cpu: f64,
    digest: &'a str,
}

fn runs(s: &Spec, seed: u64) -> Vec<RunSample> {
    let mut rng = SplitMix64::new(seed);
    let mut jitter = move || 1.0 + 0.02 * (2.0 * rng.next_f64() - 1.0);
    (0..8)
        .map(|round| RunSample {
            variant: s.name.into(),
            item: "workload".into(),
            item_index: 0,
            round,
            position: 0,
            wall_s: s.cpu * jitter(),
            user_s: s.cpu,
            sys_s: 0.0,
            cpu_s: s.cpu * jitter(),
            max_rss_kb: 1,
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            instructions: None,
            reported_s: Some(s.reported * jitter()),
            output_tail: None,
            evidence: RunEvidence {
                output_sha256: Some(s.digest.into()),
                output_sample: Some(format!("output {}", s.digest)),
                ..RunEvidence::default()
            },
        })
        .collect()
}

fn info(name: &str, role: Role) -> VariantInfo {
    VariantInfo {
        name: name.into(),
        role,
        model: (role == Role::Candidate).then(|| "m".to_string()),
        resolved: (role != Role::Base && role != Role::BaseCopy).then_some(true),
    }
}

fn role_of(name: &str) -> Role {
    match name {
        "base" => Role::Base,
        "base-aa" => Role::BaseCopy,
        "gold" => Role::Gold,
        _ => Role::Candidate,
    }
}

/// The hack workload's shape: 3 timed repetitions of 90 ms at base in a
/// 330 ms process.
fn measure(specs: &[Spec]) -> (Vec<VariantInfo>, DriverOutput) {
    let infos = specs
        .iter()
        .map(|s| info(s.name, role_of(s.name)))
        .collect();
    let mut all = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        all.extend(runs(s, i as u64 + 1));
    }
    let out = DriverOutput {
        fingerprint: fingerprint(),
        builds: vec![],
        warmups: vec![],
        runs: all,
        sweep: None,
    };
    (infos, out)
}

fn reported() -> AnalysisOptions {
    AnalysisOptions {
        metric: Metric::Reported,
        ..AnalysisOptions::default()
    }
}

fn base_specs() -> Vec<Spec<'static>> {
    vec![
        Spec {
            name: "base",
            reported: 0.090,
            cpu: 0.330,
            digest: "g",
        },
        Spec {
            name: "base-aa",
            reported: 0.090,
            cpu: 0.330,
            digest: "g",
        },
        Spec {
            name: "gold",
            reported: 0.001,
            cpu: 0.063,
            digest: "g",
        },
    ]
}

fn variant<'a>(
    a: &'a super::super::InstanceAnalysis,
    name: &str,
) -> &'a super::super::VariantResult {
    a.variants.iter().find(|v| v.name == name).unwrap()
}

#[test]
fn a_reported_speedup_the_processes_do_not_show_is_refused() {
    let mut specs = base_specs();
    // A patched clock: reports 50x, the processes as slow as base.
    specs.push(Spec {
        name: "clock",
        reported: 0.0018,
        cpu: 0.325,
        digest: "g",
    });
    // Honest, written differently: as fast as gold.
    specs.push(Spec {
        name: "ctl",
        reported: 0.0012,
        cpu: 0.066,
        digest: "g",
    });
    // Real but smaller than claimed: saves 0.1 s of the 0.27 s its three
    // repetitions claim.
    specs.push(Spec {
        name: "half",
        reported: 0.001,
        cpu: 0.230,
        digest: "g",
    });
    let (infos, out) = measure(&specs);
    let a = analyse(&infos, &out, 1, 8, true, &reported());
    let gold = variant(&a, "gold");
    let t = gold.timing.as_ref().unwrap();
    assert_eq!(t.outcome, TimingOutcome::Confirmed, "{t}");
    assert_eq!(t.repetitions, 1.0, "gold is checked at one repetition");
    assert_eq!(gold.status, Status::Scored);
    let clock = variant(&a, "clock");
    assert_eq!(
        clock.status,
        Status::Suspect {
            reasons: vec![Reason::ReportedNotMeasured]
        }
    );
    let Refusal::ReportedNotMeasured(t) = &clock.integrity[0] else {
        panic!("{:?}", clock.integrity)
    };
    // Gold's runs show about three repetitions per process.
    assert!((t.repetitions - 3.0).abs() < 0.3, "{t}");
    assert!(t.reported_speedup > 40.0 && t.measured_speedup < 1.1, "{t}");
    assert_eq!(variant(&a, "ctl").status, Status::Scored);
    assert_eq!(
        variant(&a, "ctl").timing.as_ref().unwrap().outcome,
        TimingOutcome::Confirmed
    );
    assert_eq!(
        variant(&a, "half").timing.as_ref().unwrap().outcome,
        TimingOutcome::Refuted
    );
    // Not under the other metrics: a patched clock cannot reach them.
    let cpu = AnalysisOptions {
        metric: Metric::Cpu,
        ..AnalysisOptions::default()
    };
    let a = analyse(&infos, &out, 1, 8, true, &cpu);
    assert!(variant(&a, "clock").timing.is_none());
    assert_eq!(variant(&a, "clock").status, Status::Scored);
}

#[test]
fn the_timing_check_stands_aside_when_gold_fails_it_and_notes_inconclusive_ones() {
    // Repetitions that scale with speed (timeit's autorange): gold's own
    // reported speedup does not show in its processes either.
    let mut specs = base_specs();
    specs[2].cpu = 0.330;
    specs.push(Spec {
        name: "c",
        reported: 0.001,
        cpu: 0.330,
        digest: "g",
    });
    let (infos, out) = measure(&specs);
    let a = analyse(&infos, &out, 1, 8, true, &reported());
    assert!(a.variants.iter().all(|v| v.integrity.is_empty()));
    assert!(
        a.notes
            .iter()
            .any(|n| n.starts_with("timing check not applicable")),
        "{:?}",
        a.notes
    );
    // A claim the processes neither show nor rule out: credited, noted.
    let mut specs = base_specs();
    specs.push(Spec {
        name: "noisy",
        reported: 0.001,
        cpu: 0.330,
        digest: "g",
    });
    let (infos, mut out) = measure(&specs);
    let mut rng = SplitMix64::new(9);
    for r in out.runs.iter_mut().filter(|r| r.variant == "noisy") {
        r.cpu_s = 0.03 + 0.6 * rng.next_f64();
    }
    let a = analyse(&infos, &out, 1, 8, true, &reported());
    let n = variant(&a, "noisy");
    assert_eq!(
        n.timing.as_ref().unwrap().outcome,
        TimingOutcome::Inconclusive
    );
    assert!(n.integrity.is_empty());
    assert!(a
        .notes
        .iter()
        .any(|x| x.starts_with("noisy: timing check inconclusive")));
}

fn read(path: &str, by: &str, round: usize) -> StateRead {
    StateRead {
        path: path.into(),
        left_by: RunRef {
            variant: by.into(),
            kind: RunKind::Warmup,
            round,
        },
    }
}

#[test]
fn state_read_across_runs_is_refused_unless_base_does_the_same() {
    let mut specs = base_specs();
    for name in ["cache", "writer", "reader", "logger"] {
        specs.push(Spec {
            name,
            reported: 0.001,
            cpu: 0.06,
            digest: "g",
        });
    }
    let (infos, mut out) = measure(&specs);
    for r in out.runs.iter_mut() {
        let e = &mut r.evidence;
        match r.variant.as_str() {
            // The workload's own output file: every variant writes and
            // reads it, base included.
            "base" | "gold" => {
                e.left_state.push(LeftFile {
                    path: "/testbed/out.txt".into(),
                    change: Change::Changed,
                });
                e.read_state.push(read("/testbed/out.txt", &r.variant, 0));
            }
            "cache" => e.read_state.push(read("/tmp/cache", "cache", 0)),
            // One candidate reads what another left.
            "reader" => e.read_state.push(read("/tmp/shared", "writer", 0)),
            "logger" => e.left_state.push(LeftFile {
                path: "/tmp/log".into(),
                change: Change::Changed,
            }),
            _ => {}
        }
    }
    out.sweep = Some(FinalSweep {
        elapsed_s: 0.3,
        files: vec![SweptFile {
            path: "/usr/lib/site/cache".into(),
            written_by: RunRef {
                variant: "writer".into(),
                kind: RunKind::Warmup,
                round: 0,
            },
            read_by: Some(RunRef {
                variant: "writer".into(),
                kind: RunKind::Run,
                round: 0,
            }),
        }],
        more: 0,
    });
    let a = analyse(&infos, &out, 1, 8, true, &AnalysisOptions::default());
    let suspect = Status::Suspect {
        reasons: vec![Reason::StateAcrossRuns],
    };
    for name in ["cache", "writer", "reader"] {
        assert_eq!(variant(&a, name).status, suspect, "{name}");
    }
    assert_eq!(variant(&a, "gold").status, Status::Scored, "as base does");
    assert_eq!(
        variant(&a, "logger").status,
        Status::Scored,
        "left, not read"
    );
    assert!(a
        .notes
        .iter()
        .any(|n| n == "logger: its runs left files no later run read: /tmp/log"));
    // The first read of each file is listed, the others counted.
    let Refusal::StateAcrossRuns { reads, more } = &variant(&a, "cache").integrity[0] else {
        panic!()
    };
    assert_eq!((reads.len(), *more), (1, 7));
    let w = variant(&a, "writer").integrity[0].to_string();
    assert!(
        w.contains("/usr/lib/site/cache") && w.contains("/tmp/shared"),
        "{w}"
    );
}

#[test]
fn output_unlike_gold_and_base_is_refused_where_their_outputs_agree() {
    let mut specs = base_specs();
    // Base prints "b", gold "g": both are accepted.
    specs[0].digest = "b";
    specs[1].digest = "b";
    specs.push(Spec {
        name: "like-base",
        reported: 0.001,
        cpu: 0.06,
        digest: "b",
    });
    specs.push(Spec {
        name: "wrong",
        reported: 0.0005,
        cpu: 0.03,
        digest: "w",
    });
    let (infos, out) = measure(&specs);
    let a = analyse(&infos, &out, 1, 8, true, &AnalysisOptions::default());
    assert_eq!(variant(&a, "like-base").status, Status::Scored);
    let wrong = variant(&a, "wrong");
    assert_eq!(
        wrong.status,
        Status::Suspect {
            reasons: vec![Reason::OutputDiffers]
        }
    );
    assert_eq!(
        wrong.integrity[0],
        Refusal::OutputDiffers {
            item: "workload".into(),
            runs: 8,
            differing: 8,
            expected: "output g".into(),
            got: "output w".into(),
        }
    );
    // Tests as the workload: no output check (they print their timings).
    let a = analyse(&infos, &out, 1, 8, false, &AnalysisOptions::default());
    assert_eq!(variant(&a, "wrong").status, Status::Scored);
    // Gold's and base's outputs vary between runs: nothing to compare with.
    let (infos, mut out) = measure(&specs);
    for (i, r) in out.runs.iter_mut().enumerate() {
        if matches!(r.variant.as_str(), "base" | "base-aa" | "gold") {
            r.evidence.output_sha256 = Some(format!("v{i}"));
        }
    }
    let a = analyse(&infos, &out, 1, 8, true, &AnalysisOptions::default());
    assert_eq!(variant(&a, "wrong").status, Status::Scored);
    assert!(a
        .notes
        .iter()
        .any(|n| n.starts_with("output check not applicable to workload")));
}

#[test]
fn a_suspect_gold_is_no_reference_and_suspects_are_counted_and_shown() {
    let mut specs = base_specs();
    specs[2].digest = "g";
    specs.push(Spec {
        name: "wrong",
        reported: 0.0005,
        cpu: 0.03,
        digest: "w",
    });
    specs.push(Spec {
        name: "ctl",
        reported: 0.001,
        cpu: 0.06,
        digest: "g",
    });
    let (infos, mut out) = measure(&specs);
    for r in out.runs.iter_mut().filter(|r| r.variant == "gold") {
        r.evidence
            .read_state
            .push(read("/tmp/gold-cache", "gold", 0));
    }
    let a = analyse(&infos, &out, 1, 8, true, &AnalysisOptions::default());
    assert!(matches!(variant(&a, "gold").status, Status::Suspect { .. }));
    let ctl = variant(&a, "ctl").comparison.as_ref().unwrap();
    assert_eq!(ctl.relative_to_expert, None, "no expert reference");
    let agg = aggregate([&a]);
    assert_eq!(agg["m"].not_credited, 1);
    assert_eq!(agg["m"].suspect, 1);
    assert_eq!(agg["gold"].suspect, 1);
    // perf.json keeps the reasons and the evidence.
    let json = serde_json::to_value(variant(&a, "wrong")).unwrap();
    assert_eq!(json["status"], "suspect");
    assert_eq!(json["reasons"], serde_json::json!(["output_differs"]));
    assert_eq!(json["integrity"][0]["reason"], "output_differs");
    let back: super::super::VariantResult = serde_json::from_value(json).unwrap();
    assert_eq!(&back, variant(&a, "wrong"));
    // The table says it.
    let rec = super::super::record::PerfRecord {
        schema_version: 1,
        instance_id: "i".into(),
        workload_source: super::super::workload::WorkloadSource::Workload,
        items: vec!["workload".into()],
        repeat: 8,
        warmup: 0,
        seed: 1,
        cpuset: None,
        options: AnalysisOptions::default(),
        variants: infos,
        fingerprint: fingerprint(),
        builds: vec![],
        warmups: vec![],
        runs: vec![],
        elapsed_s: None,
        overhead_per_run_s: None,
        sweep: None,
        analysis: a,
    };
    let t = render::table(std::slice::from_ref(&rec));
    assert!(
        t.contains("suspect: output differs from gold's and base's"),
        "{t}"
    );
    assert!(
        t.contains("suspect wrong: 8 of 8 runs of workload printed"),
        "{t}"
    );
}
