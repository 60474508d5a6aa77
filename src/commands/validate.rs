//! `patchgrade validate`: base and gold runs of each instance, judged.

use super::{
    check_eval_scripts, finished_all, load_dataset, print_json, reused_options, write_report,
};
use crate::cli::reuse::Given;
use crate::cli::ValidateArgs;
use crate::error::ExpectedError;
use patchgrade::analysis::validate::{jobs, judge};
use patchgrade::engine::Engine;
use patchgrade::rundir::RunDir;

pub async fn validate(args: ValidateArgs, given: &Given) -> Result<(), ExpectedError> {
    let dataset = load_dataset(&args.dataset, &args.instance_ids)?;
    // A validation run again on the same dataset extends its own run
    // folder: same setup.
    let rundir = RunDir::new(&args.engine.log_dir, &args.run_id);
    let same_dataset = rundir
        .meta()
        .is_some_and(|m| m.dataset_path().as_deref() == Some(args.dataset.path()));
    let opts = if same_dataset {
        reused_options(
            &args.engine,
            args.print,
            &rundir,
            given,
            args.dataset.path(),
        )
    } else {
        super::given_options(&args.engine, args.print)
    };
    check_eval_scripts(&opts, args.dataset.path(), &dataset.instances)?;
    let engine = Engine::build(&opts, &args.run_id, args.dataset.path())?;
    let done = engine.execute(jobs(&dataset, args.gold_runs)).await;
    super::abandoned(&done)?;
    let runner = &engine.runner;
    let report = judge(
        &dataset,
        args.gold_runs,
        &done.records,
        &runner.specs,
        &runner.cfg.rundir,
    );
    let path = args.report_dir.join(rundir.validate_report_name());
    write_report(&path, &report)?;
    eprintln!("\n{}", report.table());
    eprintln!("report written to {}", path.display());
    if args.print.json {
        print_json(&report)?;
    }
    finished_all(&done, "the validation")
}
