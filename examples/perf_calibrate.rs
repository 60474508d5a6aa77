//! Calibration of the perf method on the perf demo (issue 13), until the
//! `perf` command exists: N independent measurements of base, an A/A copy,
//! gold and the demo's three candidates in one container each, every one
//! analysed with wall time and with CPU time; prints one line per
//! measurement and metric, then the counts the "done when" asks
//! for. Run by harness-scripts/perf/calibrate.sh, which builds the image.
//!
//! Usage: perf_calibrate RUNS IMAGE OUT_DIR [REPEAT]

use std::path::PathBuf;
use std::time::Duration;

use patchgrade::dataset::Dataset;
use patchgrade::perf::container::MeasureOptions;
use patchgrade::perf::instance::{measure_instance, PerfJob};
use patchgrade::perf::record::{DriverOutput, PerfRecord, Role, VariantInfo};
use patchgrade::perf::stats::Verdict;
use patchgrade::perf::variants::PatchVariant;
use patchgrade::perf::{analyse, AnalysisOptions, InstanceAnalysis, Metric, Status};
use patchgrade::repo::{RepoCache, RepoSources};
use patchgrade::spec::SpecSet;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: perf_calibrate RUNS IMAGE OUT_DIR [REPEAT]".into());
    }
    let runs: usize = args[1].parse()?;
    let image = &args[2];
    let out_dir = PathBuf::from(&args[3]);
    let repeat: usize = args.get(4).map(|r| r.parse()).transpose()?.unwrap_or(10);
    std::fs::create_dir_all(&out_dir)?;
    let demo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("instances/perf-demo");
    let inst = Dataset::load(&demo.join("dataset.jsonl"))?.instances[0].clone();
    let preds: Vec<serde_json::Value> = std::fs::read_to_string(demo.join("predictions.jsonl"))?
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let patch_of = |s: &str| -> String {
        preds
            .iter()
            .find(|p| p["sample_id"] == s)
            .and_then(|p| p["model_patch"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    // Correctness as `patchgrade run` grades the demo (checked by
    // instances/perf-demo/build_dataset.py and tests/perf_docker.rs).
    let patched = |name: &str, role: Role, patch: String, resolved: bool| PatchVariant {
        info: VariantInfo {
            name: name.into(),
            role,
            model: (role == Role::Candidate).then(|| "demo-perf-agent".into()),
            resolved: Some(resolved),
        },
        patch: Some(patch),
    };
    let variants = vec![
        PatchVariant::base(),
        PatchVariant::base_copy(),
        patched("gold", Role::Gold, inst.patch.clone(), true),
        patched("a", Role::Candidate, patch_of("a"), true),
        patched("b", Role::Candidate, patch_of("b"), true),
        patched("c", Role::Candidate, patch_of("c"), false),
    ];
    let specs = SpecSet::builtin()?;
    let spec = &specs.lookup(&inst.repo, &inst.version)?.spec;
    let work = tempfile::tempdir()?;
    let repos = RepoCache::new(RepoSources {
        cache: work.path().join("cache"),
        mirror_dir: None,
        export_dirs: vec![demo.join("repos")],
        url_template: "file:///nonexistent/{repo}".into(),
    });
    let rt = tokio::runtime::Runtime::new()?;
    let docker = bollard::Docker::connect_with_local_defaults()?;
    let metrics = [Metric::Wall, Metric::Cpu];
    let mut analyses: Vec<Vec<InstanceAnalysis>> = vec![Vec::new(); metrics.len()];
    let mut overheads = Vec::new();
    for i in 0..runs {
        let mopts = MeasureOptions {
            repeat,
            warmup: 1,
            seed: 1000 + i as u64,
            cpuset: Some("1".into()),
            run_id: "perf-calibrate".into(),
            timeout: Duration::from_secs(1800),
            ..MeasureOptions::default()
        }
        .with_spec(spec, None);
        let job = PerfJob {
            image,
            repos: &repos,
            instance: &inst,
            spec,
            variants: &variants,
            workdir: &work.path().join(format!("trees-{i}")),
        };
        let rec: PerfRecord = rt.block_on(measure_instance(
            &docker,
            job,
            &mopts,
            &AnalysisOptions::default(),
        ))?;
        std::fs::write(
            out_dir.join(format!("perf-{i}.json")),
            serde_json::to_string_pretty(&rec)?,
        )?;
        let out = DriverOutput {
            fingerprint: rec.fingerprint.clone(),
            builds: rec.builds.clone(),
            warmups: rec.warmups.clone(),
            runs: rec.runs.clone(),
        };
        for (m, metric) in metrics.iter().enumerate() {
            let opts = AnalysisOptions {
                metric: *metric,
                ..AnalysisOptions::default()
            };
            let a = analyse(&rec.variants, &out, rec.items.len(), repeat, true, &opts);
            let load = |l: &Option<Vec<f64>>| l.as_ref().and_then(|v| v.first().copied());
            let mut line = format!(
                "run {i:2} {metric:?}: noise floor {:.3}{} load {:?}/{:?}",
                a.noise_floor.unwrap_or(f64::NAN),
                if a.too_noisy { " TOO NOISY" } else { "" },
                load(&rec.fingerprint.load_before),
                load(&rec.fingerprint.load_after)
            );
            for v in &a.variants {
                if let Some(c) = &v.comparison {
                    line.push_str(&format!(
                        " {}={:.3}[{:.3},{:.3}]{}",
                        v.name,
                        c.speedup.point,
                        c.speedup.low,
                        c.speedup.high,
                        match c.verdict {
                            Verdict::Faster => "F",
                            Verdict::Slower => "S",
                            Verdict::NoMeasurableChange => "-",
                        }
                    ));
                }
            }
            println!("{line}");
            analyses[m].push(a);
        }
        overheads.push(rec.overhead_per_run_s.unwrap_or(f64::NAN));
    }
    println!("\nover {runs} measurements ({repeat} rounds, 1 warm-up, one CPU):");
    for (m, metric) in metrics.iter().enumerate() {
        let all = &analyses[m];
        let scored_with = |name: &str, verdict: Verdict| {
            all.iter()
                .filter(|a| {
                    a.variants.iter().any(|v| {
                        v.name == name
                            && v.status == Status::Scored
                            && v.comparison.as_ref().map(|c| c.verdict) == Some(verdict)
                    })
                })
                .count()
        };
        let c_scored = all
            .iter()
            .filter(|a| {
                a.variants
                    .iter()
                    .any(|v| v.name == "c" && v.status == Status::Scored)
            })
            .count();
        let aa_covers = all
            .iter()
            .filter(|a| a.aa.as_ref().is_some_and(|i| i.contains(1.0)))
            .count();
        println!(
            "  {metric:?}: too noisy {}; gold faster {} (target >= 19); a faster {} (>= 18); \
             b slower {} (>= 18); c scored {} (must be 0); A/A interval contains 1.0 {} (>= 17)",
            all.iter().filter(|a| a.too_noisy).count(),
            scored_with("gold", Verdict::Faster),
            scored_with("a", Verdict::Faster),
            scored_with("b", Verdict::Slower),
            c_scored,
            aa_covers
        );
    }
    overheads.sort_by(f64::total_cmp);
    if let (Some(lo), Some(hi)) = (overheads.first(), overheads.last()) {
        println!("  overhead per variant and run: {lo:.4} s to {hi:.4} s");
    }
    Ok(())
}
