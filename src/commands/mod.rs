//! The subcommands: each reads its arguments, calls the library, prints
//! tables on stderr and JSON on stdout, and says how it ended. The only code
//! that prints results or picks exit codes.

mod audit;
mod report;
mod run;
mod select;
mod validate;

use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::cli::Command;
use crate::error::ExpectedError;
use patchgrade::dataset::Dataset;
use patchgrade::engine::Executed;
use patchgrade::rundir::atomic::write_json_atomic;

pub async fn dispatch(command: Command) -> Result<(), ExpectedError> {
    match command {
        Command::Run(args) => run::run(args).await,
        Command::Validate(args) => validate::validate(args).await,
        Command::Audit(args) => audit::audit(args).await,
        Command::Report(args) => report::report(args),
        Command::Select(args) => select::select(args).await,
    }
}

/// Load a dataset and keep `--instance-ids` (space- or comma-separated).
fn load_dataset(path: &Path, instance_ids: &[String]) -> Result<Dataset, ExpectedError> {
    let mut dataset = Dataset::load(path).map_err(ExpectedError::bad)?;
    let ids: Vec<String> = instance_ids
        .iter()
        .flat_map(|s| s.split_whitespace().map(String::from))
        .collect();
    dataset.filter(&ids).map_err(ExpectedError::bad)?;
    Ok(dataset)
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

/// How a command that ran evaluations ended.
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
