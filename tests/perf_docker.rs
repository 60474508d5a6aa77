//! `perf::container` on the real Docker engine: the perf demo's instance
//! image is built by `patchgrade run --backend docker` (debootstrap path,
//! as tests/docker.rs), the candidates are graded by that run, then base, an
//! A/A copy, gold and the three candidates are measured in one container
//! with the timing driver, and analysed.
//!
//! Without a daemon this test skips, printing why, unless
//! PATCHGRADE_REQUIRE_DOCKER=1 (set by .ci/run), where it fails.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use patchgrade::dataset::{Dataset, Instance};
use patchgrade::perf::container::{measure, ContainerError, MeasureOptions, VariantFiles};
use patchgrade::perf::instance::{measure_instance, PerfJob};
use patchgrade::perf::record::{PerfRecord, Role, VariantInfo};
use patchgrade::perf::stats::{OutlierRule, Verdict};
use patchgrade::perf::variants::{prepare, PatchVariant};
use patchgrade::perf::workload::workload_of;
use patchgrade::perf::{aggregate, analyse, render, AnalysisOptions, Metric, Status};
use patchgrade::repo::{RepoCache, RepoSources};
use patchgrade::spec::SpecSet;
use serde_json::Value;

fn docker_ready(test: &str) -> bool {
    let ok = Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .output();
    let why = match ok {
        Ok(o) if o.status.success() => return true,
        Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
        Err(e) => format!("cannot run docker: {e}"),
    };
    if std::env::var("PATCHGRADE_REQUIRE_DOCKER").as_deref() == Ok("1") {
        panic!("{test}: PATCHGRADE_REQUIRE_DOCKER=1 but no Docker daemon answers: {why}");
    }
    eprintln!("SKIPPED {test}: no Docker daemon answers ({why}); set PATCHGRADE_REQUIRE_DOCKER=1 to make this a failure");
    false
}

fn containers_of(run_id: &str) -> String {
    let out = Command::new("docker")
        .args([
            "ps",
            "-a",
            "-q",
            "--filter",
            &format!("label=patchgrade.run_id={run_id}"),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn perf_demo_is_measured_in_one_container_per_instance() {
    if !docker_ready("perf_demo_is_measured_in_one_container_per_instance") {
        return;
    }
    let sb = Sandbox::new();
    let demo = project_root().join("instances/perf-demo");
    let dataset = demo.join("dataset.jsonl");
    let preds = demo.join("predictions.jsonl");
    // The instance image, and the correctness of gold and the candidates.
    for (run, p) in [
        ("perf-gold", "gold"),
        ("perf-cands", preds.to_str().unwrap()),
    ] {
        let out = sb.run(&[
            "run",
            "--dataset",
            dataset.to_str().unwrap(),
            "--predictions",
            p,
            "--run-id",
            run,
            "--backend",
            "docker",
            "--base-image",
            "none",
            "--cache-level",
            "instance",
        ]);
        assert!(out.status.success());
    }
    let id = "patchgrade__demo-perf-1";
    let gold_rec = sb.record("perf-gold", "gold", id);
    assert_eq!(gold_rec["outcome"], "resolved");
    // "image NAME sha256:..." (see DockerEnv::describe).
    let env = gold_rec["environment"].as_str().unwrap().to_string();
    let image = env.split_whitespace().nth(2).unwrap().to_string();
    assert!(image.starts_with("sha256:"), "{env}");
    let cand_dir = sb
        .path()
        .join("logs/run_evaluation/perf-cands/demo-perf-agent");
    let resolved_of = |sample: &str| -> bool {
        // One folder per sample; find the one whose patch is this sample's.
        let preds: Vec<Value> = std::fs::read_to_string(&preds)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let patch = preds.iter().find(|p| p["sample_id"] == sample).unwrap()["model_patch"]
            .as_str()
            .unwrap()
            .to_string();
        for e in std::fs::read_dir(&cand_dir).unwrap() {
            let d = e.unwrap().path();
            if std::fs::read_to_string(d.join("patch.diff"))
                .ok()
                .as_deref()
                == Some(&patch)
            {
                let r: Value = serde_json::from_str(
                    &std::fs::read_to_string(d.join("patchgrade.json")).unwrap(),
                )
                .unwrap();
                return r["outcome"] == "resolved";
            }
        }
        panic!("no evaluation of sample {sample} in {}", cand_dir.display());
    };
    let resolved: Vec<(String, bool)> = ["a", "b", "c"]
        .iter()
        .map(|s| (s.to_string(), resolved_of(s)))
        .collect();
    assert_eq!(
        resolved,
        [("a".into(), true), ("b".into(), true), ("c".into(), false)]
    );

    // Host side: one checkout per variant, from the demo's shipped history.
    let inst: Instance = Dataset::load(&dataset).unwrap().get(id).unwrap().clone();
    let repos = RepoCache::new(RepoSources {
        cache: sb.cache(),
        mirror_dir: None,
        export_dirs: vec![demo.join("repos")],
        url_template: "file:///nonexistent/{repo}".into(),
    });
    let preds_v: Vec<Value> = std::fs::read_to_string(&preds)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let patch_of = |s: &str| {
        preds_v.iter().find(|p| p["sample_id"] == s).unwrap()["model_patch"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let patched = |name: &str, role: Role, patch: String, resolved: bool| PatchVariant {
        info: VariantInfo {
            name: name.into(),
            role,
            model: (role == Role::Candidate).then(|| "demo-perf-agent".to_string()),
            resolved: Some(resolved),
        },
        patch: Some(patch),
    };
    let plan = vec![
        PatchVariant::base(),
        PatchVariant::base_copy(),
        patched("gold", Role::Gold, inst.patch.clone(), true),
        patched("a", Role::Candidate, patch_of("a"), resolved[0].1),
        patched("b", Role::Candidate, patch_of("b"), resolved[1].1),
        patched("c", Role::Candidate, patch_of("c"), resolved[2].1),
    ];
    let infos: Vec<VariantInfo> = plan.iter().map(|v| v.info.clone()).collect();
    // A candidate whose patch does not apply is left out, with a note.
    let mut with_broken = plan.clone();
    with_broken.push(patched(
        "x",
        Role::Candidate,
        "diff --git a/wordfreq/core.py b/wordfreq/core.py\n--- a/wordfreq/core.py\n+++ b/wordfreq/core.py\n@@ -1 +1 @@\n-no such line\n+x\n".into(),
        false,
    ));

    let specs = SpecSet::builtin().unwrap();
    let spec = &specs.lookup(&inst.repo, &inst.version).unwrap().spec;
    let run_id = format!("perf-test-{}", std::process::id());
    let opts = MeasureOptions {
        repeat: 5,
        warmup: 1,
        seed: 7,
        cpuset: Some("0".into()),
        run_id: run_id.clone(),
        timeout: Duration::from_secs(600),
        ..MeasureOptions::default()
    }
    .with_spec(spec, None);
    // CPU time: the machine running the tests is shared, and wall time
    // under load says more about the neighbours than about the patch.
    // No outlier rule: with five rounds it may drop two values a side, and
    // 3 against 3 cannot reach p < 0.05 whatever the effect.
    let aopts = AnalysisOptions {
        metric: Metric::Cpu,
        outliers: OutlierRule { iqr_k: None },
        ..AnalysisOptions::default()
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let docker = bollard::Docker::connect_with_local_defaults().unwrap();
    let job = PerfJob {
        image: &image,
        repos: &repos,
        instance: &inst,
        spec,
        variants: &with_broken,
        workdir: &sb.path().join("trees"),
    };
    let record = rt
        .block_on(measure_instance(&docker, job, &opts, &aopts))
        .unwrap_or_else(|e| panic!("measure: {e}"));
    assert_eq!(containers_of(&run_id), "", "the container is removed");
    let f = &record.fingerprint;
    assert_eq!(f.cpus_allowed, Some(1), "--cpuset-cpus 0");
    assert!(
        f.instructions == "available" || f.instructions.starts_with("unavailable: "),
        "{}",
        f.instructions
    );
    assert_eq!(record.variants, infos, "x is not measured");
    assert_eq!(record.runs.len(), 6 * 5);
    assert_eq!(record.warmups.len(), 6);
    // Printed, not asserted: speed is for benchmarks, not tests.
    eprintln!(
        "elapsed {:?} s, overhead per variant and run {:?} s",
        record.elapsed_s, record.overhead_per_run_s
    );
    assert!(
        record.runs.iter().all(|r| r.exit_code == Some(0)),
        "{record:?}"
    );
    let a = &record.analysis;
    assert!(
        a.notes
            .iter()
            .any(|n| n.starts_with("not measured: variant x: its patch cannot be used")),
        "{:?}",
        a.notes
    );
    let v = |n: &str| a.variants.iter().find(|v| v.name == n).unwrap();
    let gold = v("gold").comparison.clone().unwrap();
    assert_eq!(gold.verdict, Verdict::Faster, "{a:#?}");
    assert!(gold.speedup.point > 3.0, "{:?}", gold.speedup);
    assert_eq!(v("b").comparison.as_ref().unwrap().verdict, Verdict::Slower);
    assert!(matches!(v("c").status, Status::NotCredited { .. }));
    assert!(v("c").comparison.as_ref().unwrap().speedup.point > 3.0);
    // Candidate a (about 10% faster) is measured; its verdict is not
    // asserted at five rounds on a shared machine.
    assert!(v("a").stats.is_some());
    // perf.json reads back (floats to the last bit or so: serde_json's
    // default parser is not correctly rounded); the reports render.
    let json = serde_json::to_string_pretty(&record).unwrap();
    let back: PerfRecord = serde_json::from_str(&json).unwrap();
    assert_eq!(back.variants, record.variants);
    assert_eq!(back.runs.len(), record.runs.len());
    for (x, y) in back.analysis.variants.iter().zip(&record.analysis.variants) {
        assert_eq!(x.status, y.status);
        assert_eq!(
            x.comparison.as_ref().map(|c| c.verdict),
            y.comparison.as_ref().map(|c| c.verdict)
        );
    }
    eprintln!("{}", render::table(std::slice::from_ref(&record)));
    let files = render::report_files(
        "perf demo",
        std::slice::from_ref(&record),
        &aggregate([&record.analysis]),
    )
    .unwrap();
    assert_eq!(files.len(), 2);

    // Without a `workload` field the tests are the workload, one process
    // per test, with the test patch in every tree (base included); a build
    // step runs in each tree first.
    let mut by_tests = inst.clone();
    by_tests.extra.remove("workload");
    let tests = workload_of(&by_tests, spec).unwrap();
    let workload = workload_of(&inst, spec).unwrap();
    assert!(tests.needs_test_patch());
    assert_eq!(tests.items.len(), 6, "{:?}", tests.items);
    let subset: Vec<PatchVariant> = plan
        .iter()
        .filter(|v| ["base", "gold", "c"].contains(&v.info.name.as_str()))
        .cloned()
        .collect();
    let tv: Vec<VariantFiles> = prepare(&repos, &inst, &sb.path().join("trees-t"), &subset, true)
        .unwrap()
        .into_iter()
        .map(|v| v.unwrap())
        .collect();
    let topts = MeasureOptions {
        repeat: 2,
        warmup: 0,
        build: Some("python3 -m compileall -q wordfreq && touch built-here".into()),
        run_id: format!("{run_id}-tests"),
        ..opts.clone()
    };
    let m = rt
        .block_on(measure(&docker, &image, &tv, &tests, &topts))
        .unwrap_or_else(|e| panic!("measure by tests: {e}"));
    assert_eq!(containers_of(&topts.run_id), "");
    let o = &m.output;
    assert_eq!(o.builds.len(), 3);
    assert!(o.builds.iter().all(|b| b.ok), "{:?}", o.builds);
    assert_eq!(o.runs.len(), 3 * 6 * 2);
    let f2p = &inst.fail_to_pass[0];
    for r in &o.runs {
        // The FAIL_TO_PASS test fails at base and with c, passes with gold;
        // every other test passes everywhere.
        let fails = &r.item == f2p && r.variant != "gold";
        assert_eq!(r.exit_code == Some(0), !fails, "{r:?}");
    }
    let infos_t: Vec<VariantInfo> = infos
        .iter()
        .filter(|i| ["base", "gold", "c"].contains(&i.name.as_str()))
        .cloned()
        .collect();
    let at = analyse(&infos_t, o, tests.items.len(), 2, false, &aopts);
    let base_t = at.variants.iter().find(|v| v.name == "base").unwrap();
    assert_eq!(base_t.stats.as_ref().unwrap().nonzero_exits, 2);

    // A measurement past its time limit is stopped, and its container goes.
    // Twenty rounds of base alone take about 7 s of CPU: well past 3 s
    // however quiet the machine (five rounds took 3.0 s once, and passed).
    let short = MeasureOptions {
        timeout: Duration::from_secs(3),
        repeat: 20,
        run_id: format!("{run_id}-short"),
        ..opts.clone()
    };
    let e = rt
        .block_on(measure(&docker, &image, &tv, &workload, &short))
        .unwrap_err();
    assert!(matches!(e, ContainerError::Timeout(_)), "{e}");
    assert_eq!(containers_of(&short.run_id), "");
}
