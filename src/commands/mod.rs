//! The subcommands: each reads its arguments, calls the library, prints
//! tables on stderr and JSON on stdout, and says how it ended. The only code
//! that prints results or picks exit codes.

mod audit;
mod images;
mod impossible;
mod perf;
mod regrade;
mod report;
mod review;
mod run;
mod select;
mod serve;
mod validate;

use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::cli::engine_args::EngineArgs;
use crate::cli::reuse::Given;
use crate::cli::{Command, DatasetArg, OutputArgs};
use crate::error::ExpectedError;
use patchgrade::dataset::{Dataset, Instance};
use patchgrade::engine::{EngineOptions, Executed};
use patchgrade::rundir::atomic::write_json_atomic;
use patchgrade::rundir::{file_sha256, RunDir};
use patchgrade::script::dataset::{check_all, ScriptSource};
use patchgrade::task_repo;

/// `given`: the flags given on the command line; commands that evaluate a
/// run again use the run's recorded setup for the others.
pub async fn dispatch(command: Command, given: Given) -> Result<(), ExpectedError> {
    match command {
        Command::Run(args) => run::run(args).await,
        Command::Validate(args) => validate::validate(args, &given).await,
        Command::Audit(args) => audit::audit(args, &given).await,
        Command::Report(args) => report::report(args),
        Command::Regrade(args) => regrade::regrade(args),
        Command::Select(args) => select::select(args, &given).await,
        Command::Perf(args) => perf::perf(args).await,
        Command::Review(args) => review::review(args).await,
        Command::Serve(args) => serve::serve(args).await,
        Command::Impossible(args) => impossible::impossible(args).await,
        Command::Images(args) => images::images(args).await,
    }
}

/// The engine options for evaluating `rundir`'s run again: its run.json's
/// setup under the flags given; a dataset changed since is said (unless
/// `--quiet`).
fn reused_options(
    engine: &EngineArgs,
    print: OutputArgs,
    rundir: &RunDir,
    given: &Given,
    dataset: &Path,
) -> EngineOptions {
    let source = rundir.path().join("run.json");
    let meta = rundir.meta();
    if let Some(want) = meta.as_ref().and_then(|m| m.dataset_sha256.as_deref()) {
        if !print.quiet && file_sha256(dataset).as_deref().is_some_and(|h| h != want) {
            eprintln!(
                "warning: {} changed since the run ({} records sha256 {want})",
                dataset.display(),
                source.display()
            );
        }
    }
    let mut opts = engine
        .over_setup(meta.as_ref().and_then(|m| m.setup.as_ref()), given, &source)
        .options();
    opts.quiet = print.quiet;
    opts
}

/// The engine options as given; `--quiet` silences the engine's reporter.
fn given_options(engine: &EngineArgs, print: OutputArgs) -> EngineOptions {
    let mut opts = engine.options();
    opts.quiet = print.quiet;
    opts
}

/// `--eval-script dataset` runs each instance's own script: an instance
/// without one is bad input, named before anything runs.
fn check_eval_scripts<'a>(
    opts: &EngineOptions,
    dataset: &Path,
    instances: impl IntoIterator<Item = &'a Instance>,
) -> Result<(), ExpectedError> {
    if opts.eval_script != ScriptSource::Dataset {
        return Ok(());
    }
    check_all(instances)
        .map_err(|e| ExpectedError::bad(anyhow::anyhow!("{}: {e}", dataset.display())))
}

/// Load a dataset (or task repository) and keep `--instance-ids` (space-
/// or comma-separated).
fn load_dataset(source: &DatasetArg, instance_ids: &[String]) -> Result<Dataset, ExpectedError> {
    let mut dataset = match &source.task_repo {
        Some(dir) if !dir.is_dir() => {
            return Err(ExpectedError::bad(anyhow::anyhow!(
                "--task-repo {}: not a directory",
                dir.display()
            )))
        }
        Some(dir) => task_repo::load(dir).map_err(ExpectedError::bad)?,
        None => Dataset::open(source.path()).map_err(ExpectedError::bad)?,
    };
    let ids = split_ids(instance_ids);
    // As the reference: named ids from any split, else the test split.
    if ids.is_empty() && task_repo::is_task_repo(source.path()) {
        task_repo::keep_split(&mut dataset, source.path(), task_repo::DEFAULT_SPLIT)
            .map_err(ExpectedError::bad)?;
    }
    dataset.filter(&ids).map_err(ExpectedError::bad)?;
    Ok(dataset)
}

/// `--instance-ids` values, each space- or comma-separated (clap splits the
/// commas).
fn split_ids(instance_ids: &[String]) -> Vec<String> {
    instance_ids
        .iter()
        .flat_map(|s| s.split_whitespace().map(String::from))
        .collect()
}

/// A report file, written atomically.
fn write_report(path: &Path, value: &impl Serialize) -> Result<(), ExpectedError> {
    write_json_atomic(path, value)
        .with_context(|| format!("cannot write {}", path.display()))
        .map_err(ExpectedError::infra)
}

/// Pretty JSON on stdout.
fn print_json(value: &impl Serialize) -> Result<(), ExpectedError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| ExpectedError::Internal(format!("cannot serialise the report: {e}")))?;
    println!("{text}");
    Ok(())
}

/// One item as itself, several as a list (summaries, reports).
fn print_one_or_many<T: Serialize>(items: &[T]) -> Result<(), ExpectedError> {
    match items {
        [one] => print_json(one),
        many => print_json(&many),
    }
}

/// How a command that ran evaluations ended, when evaluations that ended in
/// environment or infrastructure failures (after the runner's retry) leave
/// its results inconclusive: exit 4, naming them.
fn finished_all(done: &Executed, what: &str) -> Result<(), ExpectedError> {
    finished(done)?;
    let failed: Vec<String> = done
        .records
        .iter()
        .filter(|(_, r)| !r.outcome.counts_for_model())
        .map(|(key, r)| {
            let (who, model) = (key.name(), &key.model);
            let why = r
                .detail
                .as_deref()
                .and_then(|d| d.lines().find(|l| !l.trim().is_empty()))
                .map(|l| format!(": {}", l.chars().take(200).collect::<String>()))
                .unwrap_or_default();
            format!("{who} ({model}) {}{why}", r.outcome)
        })
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(ExpectedError::Inconclusive(format!(
        "{} of {} evaluation(s) of {what} ended in environment or infrastructure failures after the retry: {}",
        failed.len(),
        done.records.len(),
        list(&failed, 10)
    )))
}

/// At most `max` items joined by "; ", with a count of the rest.
fn list(items: &[String], max: usize) -> String {
    let mut out = items
        .iter()
        .take(max)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if items.len() > max {
        out.push_str(&format!("; and {} more", items.len() - max));
    }
    out
}

/// How a command that ran evaluations ended.
/// A second Ctrl-C: the command ends now (exit 130), writing nothing more.
fn abandoned(done: &Executed) -> Result<(), ExpectedError> {
    if done.abandoned {
        return Err(ExpectedError::Interrupted);
    }
    Ok(())
}

fn finished(done: &Executed) -> Result<(), ExpectedError> {
    if done.failed_tasks > 0 {
        return Err(ExpectedError::Internal(format!(
            "{} evaluation tasks failed outside their evaluation; nothing was recorded for them",
            done.failed_tasks
        )));
    }
    if done.interrupted {
        return Err(ExpectedError::Interrupted);
    }
    if !done.unwritten.is_empty() {
        // Nothing was recorded for these: a rerun evaluates them again.
        return Err(ExpectedError::infra(anyhow::anyhow!(
            "{} results could not be written (nothing recorded for them):\n  {}",
            done.unwritten.len(),
            done.unwritten.join("\n  ")
        )));
    }
    Ok(())
}
