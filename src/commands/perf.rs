//! `patchgrade perf` and `run --perf`: grade first (the correctness gate and
//! the instance images come from a normal evaluation), then measure
//! (`patchgrade::perf::measure`: base, an A/A copy of base, gold and the
//! candidates of each instance in one container of its image, perf.json
//! files and RUN_DIR/perf/report.md), the table on stderr and, with
//! `--json`, the records on stdout.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::{check_eval_scripts, finished_all, list, load_dataset, print_json};
use crate::cli::engine_args::{BackendArg, CacheLevelArg, EngineArgs};
use crate::cli::perf_args::{MeasureArgs, PerfArgs};
use crate::error::ExpectedError;
use patchgrade::dataset::{load_predictions, Dataset, GOLD};
use patchgrade::engine::Engine;
use patchgrade::perf::container::MeasureOptions;
use patchgrade::perf::record::PerfRecord;
use patchgrade::perf::{self, render, Aggregate, AnalysisOptions, MeasureError, Measurements};
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
    let (mopts, aopts) = options(
        &args.measure,
        &mut args.engine,
        &args.run_id,
        args.print.quiet,
    )?;
    let opts = super::given_options(&args.engine, args.print);
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
    if args.print.json {
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
) -> Result<MeasuredRun, ExpectedError> {
    let mut e = engine_args.clone();
    // What options() has to say was said before the grading.
    let (mopts, aopts) = options(measure, &mut e, run_id, true)?;
    measure_run(engine, dataset, jobs, records, &mopts, &aopts, true).await
}

/// The measuring options, and the engine options `perf` needs: the Docker
/// backend, and instance images kept after the grading (the measurement
/// runs in them).
pub fn options(
    measure: &MeasureArgs,
    engine: &mut EngineArgs,
    run_id: &str,
    quiet: bool,
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
        if !quiet {
            eprintln!("perf: keeping the instance images after grading (--cache-level instance): the measurement runs in them");
        }
        engine.docker.cache_level = Some(CacheLevelArg::Instance);
    }
    let bad = |e: String| ExpectedError::bad(anyhow::anyhow!(e));
    let mopts = measure
        .measure_options(engine, &RunDir::new(&engine.log_dir, run_id).perf_run_id())
        .map_err(bad)?;
    let aopts = measure.analysis_options().map_err(bad)?;
    Ok((mopts, aopts))
}

/// What measuring a run gave, and how the command ends with it.
pub struct MeasuredRun(Measurements);

#[derive(Serialize)]
struct PerfJson<'a> {
    records: &'a [PerfRecord],
    aggregates: &'a BTreeMap<String, Aggregate>,
    not_measured: &'a [String],
}

impl MeasuredRun {
    fn json(&self) -> impl Serialize + '_ {
        PerfJson {
            records: &self.0.records,
            aggregates: &self.0.aggregates,
            not_measured: &self.0.failed,
        }
    }

    /// Exit: an instance that could not be measured leaves the results
    /// inconclusive (too noisy is a result); then the grading's own end.
    pub fn finish(self, graded: Result<(), ExpectedError>) -> Result<(), ExpectedError> {
        let failed = &self.0.failed;
        if failed.is_empty() {
            return graded;
        }
        let mut msg = format!(
            "{} instance(s) could not be measured: {}",
            failed.len(),
            list(failed, 10)
        );
        if let Err(ExpectedError::Inconclusive(g)) = graded {
            msg = format!("{g}; {msg}");
        }
        Err(ExpectedError::Inconclusive(msg))
    }
}

/// Measures the graded run (`patchgrade::perf::measure`), then the table
/// on stderr.
async fn measure_run(
    engine: &Engine,
    dataset: &Dataset,
    jobs: &[Job],
    records: &Records,
    mopts: &MeasureOptions,
    aopts: &AnalysisOptions,
    only_resolved: bool,
) -> Result<MeasuredRun, ExpectedError> {
    let m = perf::measure(engine, dataset, jobs, records, mopts, aopts, only_resolved)
        .await
        .map_err(|e| match e {
            MeasureError::Interrupted => ExpectedError::Interrupted,
            MeasureError::Render(_) => ExpectedError::Internal(e.to_string()),
            MeasureError::NotDocker(_) => ExpectedError::bad(e),
            _ => ExpectedError::infra(e),
        })?;
    if !m.records.is_empty() {
        eprintln!("\nperf:\n{}", render::table(&m.records));
    }
    for f in &m.failed {
        eprintln!("perf: not measured: {f}");
    }
    eprintln!(
        "perf report written to {}",
        m.dir.join("report.md").display()
    );
    Ok(MeasuredRun(m))
}
