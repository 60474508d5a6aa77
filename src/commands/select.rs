//! `patchgrade select`: best-of-n over a run's samples.

use std::path::PathBuf;

use anyhow::Context;

use super::{finished_all, print_json, reused_options, write_report};
use crate::cli::reuse::Given;
use crate::cli::SelectArgs;
use crate::error::ExpectedError;
use patchgrade::analysis::select::score::SelectionReport;
use patchgrade::analysis::select::Selection;
use patchgrade::dataset::{load_predictions, Dataset};
use patchgrade::engine::Engine;
use patchgrade::passk::samples::load_run;
use patchgrade::rundir::atomic::write_atomic;
use patchgrade::rundir::RunDir;
use patchgrade::runner::jobs::jobs_for_predictions;

pub async fn select(args: SelectArgs, given: &Given) -> Result<(), ExpectedError> {
    let run = load_run(&args.run_dir).map_err(ExpectedError::bad)?;
    let dataset_path: PathBuf = args
        .dataset
        .clone()
        .or_else(|| run.dataset.clone())
        .ok_or_else(|| {
            ExpectedError::bad(anyhow::anyhow!(
                "no --dataset, and RUN_DIR/run.json names none"
            ))
        })?;
    let dataset = Dataset::open(&dataset_path).map_err(ExpectedError::bad)?;
    let preds = load_predictions(&args.predictions, &dataset).map_err(ExpectedError::bad)?;
    // The same sample ids as the run gave them.
    let jobs = jobs_for_predictions(&dataset, preds).map_err(ExpectedError::bad)?;
    // Named after the run id run.json records (the folder's name without one).
    let source = RunDir::at(&args.run_dir).sibling(&run.run_id);
    let select_run_id = args
        .select_run_id
        .clone()
        .unwrap_or_else(|| source.select_run_id());
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| source.selected_predictions_name());
    let opts = reused_options(
        &args.engine,
        args.print,
        &RunDir::at(&args.run_dir),
        given,
        &dataset_path,
    );
    let engine = Engine::build(&opts, &select_run_id, &dataset_path)?;
    let runner = &engine.runner;
    let selection = Selection::new(jobs, &runner.specs);
    let done = engine.execute(selection.jobs()).await;
    super::abandoned(&done)?;
    let rundir = &runner.cfg.rundir;
    let (chosen, models) = selection.decide(&run, &done.records, rundir, &runner.specs);
    let mut lines = String::new();
    for p in &chosen {
        let line = serde_json::to_string(p)
            .map_err(|e| ExpectedError::Internal(format!("cannot serialise a prediction: {e}")))?;
        lines.push_str(&line);
        lines.push('\n');
    }
    write_atomic(&output, lines.as_bytes())
        .with_context(|| format!("cannot write {}", output.display()))
        .map_err(ExpectedError::infra)?;
    let select_dir = rundir.path();
    let report = SelectionReport {
        run_dir: args.run_dir.display().to_string(),
        select_run_dir: select_dir.display().to_string(),
        output: output.display().to_string(),
        models,
    };
    let report_path = select_dir.join("select.json");
    write_report(&report_path, &report)?;
    eprintln!("\n{}", report.table());
    eprintln!(
        "chosen predictions written to {}; report to {}",
        output.display(),
        report_path.display()
    );
    if args.print.json {
        print_json(&report)?;
    }
    finished_all(&done, "the selection")
}
