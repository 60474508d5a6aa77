//! `patchgrade perf` and `run --perf`: grade first (the correctness gate and
//! the instance images come from a normal evaluation), then time base, an
//! A/A copy of base, gold and the candidates of each instance in one
//! container of its image (`perf::instance::measure_instance`), and write
//! `RUN_DIR/perf/<instance>/perf.json`, `RUN_DIR/perf/report.md` with its
//! SVG plots, the table on stderr and, with `--json`, the records on stdout.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

use super::{check_eval_scripts, finished_all, list, load_dataset, print_json, write_report};
use crate::cli::engine_args::{BackendArg, CacheLevelArg, EngineArgs};
use crate::cli::perf_args::{MeasureArgs, PerfArgs};
use crate::error::ExpectedError;
use patchgrade::backend::docker::daemon;
use patchgrade::dataset::{load_predictions, Dataset, GOLD};
use patchgrade::engine::Engine;
use patchgrade::key::EvalKey;
use patchgrade::outcome::Outcome;
use patchgrade::perf::container::MeasureOptions;
use patchgrade::perf::instance::{measure_instance, PerfJob};
use patchgrade::perf::record::{PerfRecord, Role, VariantInfo};
use patchgrade::perf::variants::PatchVariant;
use patchgrade::perf::{aggregate, render, Aggregate, AnalysisOptions};
use patchgrade::record::EvalRecord;
use patchgrade::rundir::atomic::write_atomic;
use patchgrade::rundir::RunDir;
use patchgrade::runner::jobs::Records;
use patchgrade::runner::jobs::{jobs_for_predictions, Job};

pub async fn perf(mut args: PerfArgs) -> Result<(), ExpectedError> {
    let dataset = load_dataset(&args.dataset, &args.instance_ids)?;
    // Gold is the expert reference: graded (its image, its correctness)
    // and measured whatever the predictions are.
    if !args.predictions.iter().any(|p| p.as_os_str() == GOLD) {
        args.predictions.push(PathBuf::from(GOLD));
    }
    let preds = load_predictions(&args.predictions, &dataset).map_err(ExpectedError::bad)?;
    let jobs = jobs_for_predictions(&dataset, preds).map_err(ExpectedError::bad)?;
    let (mopts, aopts) = options(&args.measure, &mut args.engine, &args.run_id)?;
    let opts = args.engine.options();
    check_eval_scripts(
        &opts,
        args.dataset.path(),
        jobs.iter().map(|j| &*j.instance),
    )?;
    let engine = Engine::build(&opts, &args.run_id, args.dataset.path())?;
    let done = engine.execute(jobs.clone()).await;
    super::abandoned(&done)?;
    let graded = finished_all(&done, "the grading");
    if matches!(
        graded,
        Err(ExpectedError::Interrupted | ExpectedError::Internal(_))
    ) {
        return graded;
    }
    let measured = measure_run(
        &engine,
        &dataset,
        &jobs,
        &done.records,
        &mopts,
        &aopts,
        false,
    )
    .await?;
    if args.json {
        print_json(&measured.json())?;
    }
    measured.finish(graded)
}

/// `run --perf`: the run's resolved patches, after its evaluation.
pub async fn after_run(
    engine: &Engine,
    dataset: &Dataset,
    jobs: &[Job],
    records: &Records,
    measure: &MeasureArgs,
    engine_args: &EngineArgs,
    run_id: &str,
) -> Result<Measured, ExpectedError> {
    let mut e = engine_args.clone();
    let (mopts, aopts) = options(measure, &mut e, run_id)?;
    measure_run(engine, dataset, jobs, records, &mopts, &aopts, true).await
}

/// The measuring options, and the engine options `perf` needs: the Docker
/// backend, and instance images kept after the grading (the measurement
/// runs in them).
pub fn options(
    measure: &MeasureArgs,
    engine: &mut EngineArgs,
    run_id: &str,
) -> Result<(MeasureOptions, AnalysisOptions), ExpectedError> {
    if engine.backend == BackendArg::Local {
        return Err(ExpectedError::bad(anyhow::anyhow!(
            "perf measures in containers: it needs --backend docker (or auto with a Docker daemon)"
        )));
    }
    engine.backend = BackendArg::Docker;
    // Without --cache-level the images stay (the cache budget never evicts
    // what this run used); a level that drops instance images is raised.
    if matches!(engine.docker.cache_level, Some(l) if l != CacheLevelArg::Instance) {
        eprintln!("perf: keeping the instance images after grading (--cache-level instance): the measurement runs in them");
        engine.docker.cache_level = Some(CacheLevelArg::Instance);
    }
    let bad = |e: String| ExpectedError::bad(anyhow::anyhow!(e));
    let mopts = measure
        .measure_options(engine, &RunDir::new(&engine.log_dir, run_id).perf_run_id())
        .map_err(bad)?;
    let aopts = measure.analysis_options().map_err(bad)?;
    Ok((mopts, aopts))
}

// (Also `perf::container::Measured`, one container's measurement.)
/// What measuring a run gave.
pub struct Measured {
    pub records: Vec<PerfRecord>,
    pub aggregates: BTreeMap<String, Aggregate>,
    /// Instances that could not be measured, with why.
    pub failed: Vec<String>,
    pub dir: PathBuf,
}

#[derive(Serialize)]
struct PerfJson<'a> {
    records: &'a [PerfRecord],
    aggregates: &'a BTreeMap<String, Aggregate>,
    not_measured: &'a [String],
}

impl Measured {
    fn json(&self) -> impl Serialize + '_ {
        PerfJson {
            records: &self.records,
            aggregates: &self.aggregates,
            not_measured: &self.failed,
        }
    }

    /// Exit: an instance that could not be measured leaves the results
    /// inconclusive (too noisy is a result); then the grading's own end.
    pub fn finish(self, graded: Result<(), ExpectedError>) -> Result<(), ExpectedError> {
        if self.failed.is_empty() {
            return graded;
        }
        let mut msg = format!(
            "{} instance(s) could not be measured: {}",
            self.failed.len(),
            list(&self.failed, 10)
        );
        if let Err(ExpectedError::Inconclusive(g)) = graded {
            msg = format!("{g}; {msg}");
        }
        Err(ExpectedError::Inconclusive(msg))
    }
}

/// The id of the instance image an evaluation ran in.
fn image_of(r: &EvalRecord) -> Option<String> {
    let id = r.environment.as_ref()?.image_id()?;
    id.starts_with("sha256:").then(|| id.to_string())
}

/// A variant's name as the container's folders allow it (letters, digits,
/// `.`, `_`, `-`), unique among the instance's variants; the model is
/// recorded beside it.
fn variant_name(want: &str, taken: &[PatchVariant]) -> String {
    let clean: String = want
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let clean = clean.trim_start_matches('.').to_string();
    let clean = if clean.is_empty() {
        "candidate".to_string()
    } else {
        clean
    };
    let free = |n: &str| taken.iter().all(|v| v.info.name != n);
    if free(&clean) {
        return clean;
    }
    (2..)
        .map(|i| format!("{clean}-{i}"))
        .find(|n| free(n))
        .unwrap()
}

/// Measures every instance of `jobs`, one after the other (measurements
/// must not compete for the CPU), and writes the reports.
async fn measure_run(
    engine: &Engine,
    dataset: &Dataset,
    jobs: &[Job],
    records: &Records,
    mopts: &MeasureOptions,
    aopts: &AnalysisOptions,
    only_resolved: bool,
) -> Result<Measured, ExpectedError> {
    let runner = &engine.runner;
    let dir = runner.cfg.rundir.path().join("perf");
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create {}", dir.display()))
        .map_err(ExpectedError::infra)?;
    let models: BTreeSet<&str> = jobs
        .iter()
        .map(|j| j.prediction.model_name_or_path.as_str())
        .filter(|m| *m != GOLD)
        .collect();
    let docker = daemon::connect().await.map_err(ExpectedError::infra)?;
    let resolved = |k: &EvalKey| records.get(k).map(|r| r.outcome == Outcome::Resolved);
    let mut out = Measured {
        records: Vec::new(),
        aggregates: BTreeMap::new(),
        failed: Vec::new(),
        dir: dir.clone(),
    };
    for inst in &dataset.instances {
        let id = &inst.instance_id;
        let mine: Vec<&Job> = jobs
            .iter()
            .filter(|j| &j.instance.instance_id == id)
            .collect();
        if mine.is_empty() {
            continue;
        }
        let gold_key = EvalKey::new(GOLD, id, None);
        let mut variants = vec![
            PatchVariant::base(),
            PatchVariant::base_copy(),
            PatchVariant {
                info: VariantInfo {
                    name: "gold".into(),
                    role: Role::Gold,
                    model: None,
                    resolved: resolved(&gold_key),
                },
                patch: Some(inst.patch.clone()),
            },
        ];
        let mut skipped = Vec::new();
        for j in mine
            .iter()
            .filter(|j| j.prediction.model_name_or_path != GOLD)
        {
            let model = &j.prediction.model_name_or_path;
            let name = variant_name(
                &match (&j.sample, models.len()) {
                    (Some(s), 1) => s.clone(),
                    (Some(s), _) => format!("{model}.{s}"),
                    (None, _) => model.clone(),
                },
                &variants,
            );
            let ok = resolved(&j.key());
            if j.prediction.is_empty_patch() || (only_resolved && ok != Some(true)) {
                skipped.push(name);
                continue;
            }
            variants.push(PatchVariant {
                info: VariantInfo {
                    name,
                    role: Role::Candidate,
                    model: Some(model.clone()),
                    resolved: ok,
                },
                patch: j.prediction.model_patch.clone(),
            });
        }
        // `run --perf`: nothing the run resolved, nothing to measure.
        if only_resolved && variants.len() == 3 && resolved(&gold_key) != Some(true) {
            eprintln!("perf: {id}: no resolved patch to measure");
            continue;
        }
        // The image of the instance, from any of its evaluations.
        let image = records
            .get(&gold_key)
            .and_then(|r| image_of(r))
            .or_else(|| {
                mine.iter()
                    .find_map(|j| records.get(&j.key()).and_then(|r| image_of(r)))
            });
        let Some(image) = image else {
            out.failed.push(format!(
                "{id}: no evaluation left an instance image to measure in"
            ));
            continue;
        };
        let spec = match runner.specs.lookup(&inst.repo, &inst.version) {
            Ok(s) => &s.spec,
            Err(e) => {
                out.failed.push(format!("{id}: {e}"));
                continue;
            }
        };
        let work = tempfile::Builder::new()
            .prefix("patchgrade-perf-")
            .tempdir()
            .context("cannot create a scratch folder")
            .map_err(ExpectedError::infra)?;
        let job = PerfJob {
            image: &image,
            repos: &runner.repos,
            instance: inst,
            spec,
            variants: &variants,
            workdir: work.path(),
        };
        let opts = mopts.clone().with_spec(
            spec,
            Some(patchgrade::backend::docker::images::activate_line()),
        );
        eprintln!(
            "perf: measuring {id}: {} variant(s) x {} round(s)",
            variants.len(),
            opts.repeat
        );
        // Ctrl-C drops the measurement, which removes its container.
        let result = tokio::select! {
            r = measure_instance(&docker, job, &opts, aopts) => r,
            _ = tokio::signal::ctrl_c() => return Err(ExpectedError::Interrupted),
        };
        match result {
            Ok(mut record) => {
                if !skipped.is_empty() {
                    let why = if only_resolved {
                        "not resolved or empty"
                    } else {
                        "empty patch"
                    };
                    record
                        .analysis
                        .notes
                        .push(format!("not measured ({why}): {}", skipped.join(", ")));
                }
                let path = dir.join(id).join("perf.json");
                write_report(&path, &record)?;
                out.records.push(record);
            }
            Err(e) => out.failed.push(e.to_string()),
        }
    }
    out.aggregates = aggregate(out.records.iter().map(|r| &r.analysis));
    write_reports(&out, runner.cfg.rundir.run_id())?;
    Ok(out)
}

/// The table on stderr, report.md and its plots in RUN_DIR/perf.
fn write_reports(m: &Measured, run_id: &str) -> Result<(), ExpectedError> {
    if !m.records.is_empty() {
        eprintln!("\nperf:\n{}", render::table(&m.records));
    }
    for f in &m.failed {
        eprintln!("perf: not measured: {f}");
    }
    let files =
        render::report_files(&format!("Efficiency: {run_id}"), &m.records, &m.aggregates)
            .map_err(|e| ExpectedError::Internal(format!("cannot render the perf report: {e}")))?;
    for (i, (name, text)) in files.iter().enumerate() {
        let name = if i == 0 { "report.md" } else { name.as_str() };
        write_file(&m.dir.join(name), text)?;
    }
    eprintln!(
        "perf report written to {}",
        m.dir.join("report.md").display()
    );
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<(), ExpectedError> {
    write_atomic(path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
        .map_err(ExpectedError::infra)
}

#[cfg(test)]
mod tests {
    use super::*;
    use patchgrade::record::Environment;

    #[test]
    fn variant_names_are_safe_and_unique() {
        let taken = vec![PatchVariant::base(), PatchVariant::base_copy()];
        assert_eq!(variant_name("org/model@s 1", &taken), "org_model_s_1");
        assert_eq!(variant_name("base", &taken), "base-2");
        assert_eq!(variant_name("..", &taken), "candidate");
        assert_eq!(variant_name("a.b_c-d", &taken), "a.b_c-d");
    }

    #[test]
    fn the_image_is_read_from_the_environment() {
        let mut r = EvalRecord::new("i", "m", "docker");
        r.environment = Some(Environment::parse(
            "image sweb.eval.x:latest sha256:abc; python 3.11 (debian-suite)",
        ));
        assert_eq!(image_of(&r).as_deref(), Some("sha256:abc"));
        r.environment = Some(Environment::parse("venv /x/y"));
        assert_eq!(image_of(&r), None);
    }
}
