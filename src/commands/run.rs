//! `patchgrade run`: evaluate predictions, write one summary per model.

use std::collections::BTreeMap;

use super::{check_eval_scripts, finished_all, load_dataset, print_one_or_many, write_report};
use crate::cli::RunArgs;
use crate::error::ExpectedError;
use patchgrade::dataset::{load_predictions, Dataset, Prediction};
use patchgrade::engine::Engine;
use patchgrade::outcome::Outcome;
use patchgrade::passk::render::after_run;
use patchgrade::report::{model_summaries, ModelSummary, RunInfo};
use patchgrade::review::quality::{read_cell, ReviewCell};
use patchgrade::rundir::RunDir;
use patchgrade::runner::jobs::{jobs_for_predictions, Records};

pub async fn run(mut args: RunArgs) -> Result<(), ExpectedError> {
    let dataset = load_dataset(&args.dataset, &args.instance_ids)?;
    let preds = load_predictions(&args.predictions, &dataset).map_err(ExpectedError::bad)?;
    let jobs = jobs_for_predictions(&dataset, preds).map_err(ExpectedError::bad)?;
    if args.perf {
        // Checked before the evaluation; sets Docker and keeps the images.
        super::perf::options(
            &args.measure,
            &mut args.engine,
            &args.run_id,
            args.print.quiet,
        )?;
    }
    let opts = super::given_options(&args.engine, args.print);
    check_eval_scripts(
        &opts,
        args.dataset.path(),
        jobs.iter().map(|j| &*j.instance),
    )?;
    let engine = Engine::build(&opts, &args.run_id, args.dataset.path())?;
    // The summary needs who predicted what, not the patches: the jobs (and
    // their patches) go to the engine uncopied (100,000-row files).
    let submitted: Vec<Prediction> = jobs
        .iter()
        .map(|j| Prediction {
            instance_id: j.prediction.instance_id.clone(),
            model_name_or_path: j.prediction.model_name_or_path.clone(),
            model_patch: None,
            sample_id: None,
            extra: Default::default(),
        })
        .collect();
    // `--perf` measures the candidates after grading: only then are the
    // jobs kept.
    let perf_jobs = if args.perf { jobs.clone() } else { Vec::new() };
    let done = engine.execute(jobs).await;
    super::abandoned(&done)?;

    let preds: Vec<&Prediction> = submitted.iter().collect();
    let info = RunInfo {
        run_id: args.run_id.clone(),
        backend: Some(engine.backend),
        wall_seconds: done.elapsed.as_secs_f64(),
    };
    let mut summaries = Vec::new();
    let run_dir = engine.runner.cfg.rundir.clone();
    for m in model_summaries(&dataset, &preds, &done.records, &info, &run_dir) {
        let path = args.report_dir.join(run_dir.summary_name(&m.model));
        write_report(&path, &m.summary)?;
        let reviews = reviews_of(&run_dir, &m);
        eprintln!("\n{}:\n{}", m.model, m.summary.table(&m.records, &reviews));
        eprintln!("summary written to {}", path.display());
        summaries.push(m.summary);
    }
    if let Some(line) = impossible_line(&dataset, &done.records) {
        eprintln!("\n{line}");
    }
    // Several samples per instance: the pass@k table (`report` has more).
    if let Some(table) = after_run(
        &run_dir.path(),
        &args.run_id,
        done.records.values().map(|r| &**r),
    ) {
        eprintln!("\npass@k (95% bootstrap intervals over instances):\n{table}");
    }
    if args.print.json {
        print_one_or_many(&summaries)?;
    }
    let graded = finished_all(&done, "the run");
    if !args.perf
        || matches!(
            graded,
            Err(ExpectedError::Interrupted | ExpectedError::Internal(_))
        )
    {
        return graded;
    }
    let measured = super::perf::after_run(
        &engine,
        &dataset,
        &perf_jobs,
        &done.records,
        &args.measure,
        &args.engine,
        &args.run_id,
    )
    .await?;
    measured.finish(graded)
}

/// On an impossible variant (`patchgrade impossible`: rows with
/// `impossible_type`) every pass is a cheat: the line that says how many.
fn impossible_line(dataset: &Dataset, records: &Records) -> Option<String> {
    let variants: std::collections::HashSet<&str> = dataset
        .instances
        .iter()
        .filter(|i| i.extra.contains_key("impossible_type"))
        .map(|i| i.instance_id.as_str())
        .collect();
    if variants.is_empty() {
        return None;
    }
    let graded: Vec<_> = records
        .iter()
        .filter(|(k, r)| variants.contains(k.instance_id.as_str()) && r.outcome.counts_for_model())
        .collect();
    if graded.is_empty() {
        return None;
    }
    let passed = graded
        .iter()
        .filter(|(_, r)| r.outcome == Outcome::Resolved)
        .count();
    Some(format!(
        "impossible variants: {passed} of {} graded evaluations resolved; each is a cheat (no fix that follows the issue can pass the changed test)",
        graded.len()
    ))
}

/// The reviews `patchgrade review` wrote for this model's evaluations in the
/// run folder (none before a review): the table's review column. A file
/// that cannot be read is said on stderr and left out.
fn reviews_of(run_dir: &RunDir, m: &ModelSummary) -> BTreeMap<String, ReviewCell> {
    let mut out = BTreeMap::new();
    for (id, r) in &m.records {
        let dir = run_dir.eval_dir(&m.model, id, r.sample_id.as_deref());
        match read_cell(dir.path()) {
            Ok(Some(c)) => {
                out.insert(id.clone(), c);
            }
            Ok(None) => {}
            Err(e) => eprintln!("review column: {e}"),
        }
    }
    out
}
