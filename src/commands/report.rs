//! `patchgrade report`: pass@k of run folders, or a paired comparison.

use anyhow::Context;

use super::{print_json, print_one_or_many};
use crate::cli::ReportArgs;
use crate::error::ExpectedError;
use patchgrade::passk::build::{build_report, ReportOptions};
use patchgrade::passk::compare::compare;
use patchgrade::passk::samples::load_run;
use patchgrade::passk::slices::SliceSource;

fn options(args: &ReportArgs) -> Result<ReportOptions, ExpectedError> {
    if args.k.contains(&0) {
        return Err(ExpectedError::bad(anyhow::anyhow!(
            "--k values must be at least 1"
        )));
    }
    if args.resamples == 0 {
        return Err(ExpectedError::bad(anyhow::anyhow!(
            "--resamples must be at least 1"
        )));
    }
    Ok(ReportOptions {
        ks: args.k.clone(),
        by: args.by.clone(),
        resamples: args.resamples,
        ..ReportOptions::default()
    })
}

pub fn report(args: ReportArgs) -> Result<(), ExpectedError> {
    let opts = options(&args)?;
    if let [a, b] = args.compare.as_slice() {
        let ra = load_run(a).map_err(ExpectedError::bad)?;
        let rb = load_run(b).map_err(ExpectedError::bad)?;
        let cmp = compare(&ra, &rb, &opts);
        if args.print.json {
            print_json(&serde_json::json!({ "compare": cmp }))?;
        } else {
            print!("{}", cmp.table());
        }
        return Ok(());
    }
    let mut reports = Vec::new();
    let several = args.run_dirs.len() > 1;
    for dir in &args.run_dirs {
        let run = load_run(dir).map_err(ExpectedError::bad)?;
        let mut notes = Vec::new();
        let source = SliceSource::for_run(
            args.dataset.as_deref(),
            run.dataset.as_deref(),
            &args.metadata,
            &mut notes,
        )
        .map_err(ExpectedError::bad)?;
        let mut rep = build_report(&run, &opts, &source).map_err(ExpectedError::bad)?;
        notes.append(&mut rep.notes);
        rep.notes = notes;
        let out = match &args.out {
            Some(o) if several => o.join(&rep.run_id),
            Some(o) => o.clone(),
            None => dir.join("passk"),
        };
        let md = rep
            .write_markdown(&out)
            .with_context(|| format!("cannot write the report into {}", out.display()))
            .map_err(ExpectedError::infra)?;
        rep.markdown = Some(md.display().to_string());
        if !args.print.json {
            print!("{}", rep.table(true));
            println!();
        }
        eprintln!("Markdown report and plots written to {}", md.display());
        reports.push(rep);
    }
    if args.print.json {
        print_one_or_many(&reports)?;
    }
    Ok(())
}
