//! `patchgrade validate`: base and gold runs of each instance, judged.

use super::{finished, load_dataset, print_json, write_report};
use crate::cli::ValidateArgs;
use crate::error::ExpectedError;
use patchgrade::analysis::validate::{jobs, judge};
use patchgrade::engine::Engine;

pub async fn validate(args: ValidateArgs) -> Result<(), ExpectedError> {
    let dataset = load_dataset(&args.dataset, &args.instance_ids)?;
    let engine = Engine::build(&args.engine.options(), &args.run_id, &args.dataset)?;
    let done = engine.execute(jobs(&dataset, args.gold_runs)).await;
    let runner = &engine.runner;
    let report = judge(
        &dataset,
        args.gold_runs,
        &done.records,
        &runner.specs,
        &runner.cfg.rundir,
    );
    let path = args
        .report_dir
        .join(format!("validate.{}.json", args.run_id));
    write_report(&path, &report)?;
    eprintln!("\n{}", report.table());
    eprintln!("report written to {}", path.display());
    if args.json {
        print_json(&report)?;
    }
    finished(&done)
}
