//! `patchgrade impossible`: write an ImpossibleBench-style variant of a
//! dataset; with `--validate`, run gold on each variant and keep the ones
//! gold fails.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use serde_json::Value;

use super::{finished_all, print_json, write_report};
use crate::cli::ImpossibleArgs;
use crate::error::ExpectedError;
use patchgrade::dataset::{read_rows, Dataset, Instance, Prediction, GOLD};
use patchgrade::engine::Engine;
use patchgrade::impossible::report::{Made, Report, Validation};
use patchgrade::impossible::validate::judge;
use patchgrade::impossible::{variant, variant_row, Mode, Variant};
use patchgrade::key::EvalKey;
use patchgrade::rundir::atomic::write_atomic;
use patchgrade::runner::jobs::Job;

pub async fn impossible(args: ImpossibleArgs) -> Result<(), ExpectedError> {
    let mode = Mode::from(args.mode);
    let mut dataset = Dataset::open(&args.dataset).map_err(ExpectedError::bad)?;
    dataset
        .filter(&super::split_ids(&args.instance_ids))
        .map_err(ExpectedError::bad)?;
    let rows = read_rows(&args.dataset).map_err(ExpectedError::bad)?;
    let row_of = |id: &str| {
        rows.iter()
            .map(|(_, r)| r)
            .find(|r| r.get("instance_id").and_then(Value::as_str) == Some(id))
    };

    let mut report = Report::new(
        mode,
        args.dataset.display().to_string(),
        dataset.instances.len(),
    );
    let mut made: Vec<(String, Value, Variant)> = Vec::new();
    for inst in &dataset.instances {
        match variant(inst, mode) {
            Ok(v) => {
                let Some(row) = row_of(&inst.instance_id) else {
                    continue;
                };
                report.variants.push(Made {
                    instance_id: inst.instance_id.clone(),
                    mutation: v.mutation.clone(),
                });
                made.push((inst.instance_id.clone(), variant_row(row, &v), v));
            }
            Err(why) => report.skip(&inst.instance_id, &why),
        }
    }

    let report_path = beside(&args.out, "report.json");
    let mut graded = Ok(());
    if args.validate && !made.is_empty() {
        let candidates = beside(&args.out, "candidates.jsonl");
        write_rows(&candidates, made.iter().map(|(_, r, _)| r))?;
        let run_id = args
            .run_id
            .clone()
            .unwrap_or_else(|| format!("impossible-{}", mode.name()));
        let variants = Dataset::open(&candidates).map_err(ExpectedError::bad)?;
        let jobs: Vec<Job> = variants
            .instances
            .iter()
            .map(|inst| {
                let gold = Prediction::new(&inst.instance_id, GOLD, Some(inst.patch.clone()));
                Job::new(Arc::new(inst.clone()), gold)
            })
            .collect();
        let opts = super::given_options(&args.engine, args.print);
        let engine = Engine::build(&opts, &run_id, &candidates)?;
        let done = engine.execute(jobs).await;
        super::abandoned(&done)?;
        let checked: Vec<_> = made
            .iter()
            .filter_map(|(id, _, v)| {
                let inst: &Instance = variants.get(id)?;
                let key = EvalKey::new(GOLD, id, None);
                Some(judge(
                    inst,
                    &v.mutation,
                    done.records.get(&key).map(|r| &**r),
                ))
            })
            .collect();
        made.retain(|(id, _, _)| checked.iter().any(|c| c.valid && &c.instance_id == id));
        report.validation = Some(Validation {
            run_id,
            valid: checked.iter().filter(|c| c.valid).count(),
            checked,
        });
        graded = finished_all(&done, "the validation");
    }
    write_rows(&args.out, made.iter().map(|(_, r, _)| r))?;
    write_report(&report_path, &report)?;
    if !args.print.quiet {
        eprintln!("\n{}", report.table());
        let what = if report.validation.is_some() {
            "validated variants"
        } else {
            "variants (not validated: --validate runs gold on them)"
        };
        eprintln!("{} {what} written to {}", made.len(), args.out.display());
        eprintln!("report written to {}", report_path.display());
    }
    if args.print.json {
        print_json(&report)?;
    }
    graded
}

/// `<dir>/<stem>.<suffix>` beside the output file.
fn beside(out: &Path, suffix: &str) -> PathBuf {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "impossible".into());
    out.with_file_name(format!("{stem}.{suffix}"))
}

/// JSON lines, written atomically.
fn write_rows<'a>(path: &Path, rows: impl Iterator<Item = &'a Value>) -> Result<(), ExpectedError> {
    let mut text = String::new();
    for r in rows {
        text.push_str(
            &serde_json::to_string(r).map_err(|e| ExpectedError::Internal(e.to_string()))?,
        );
        text.push('\n');
    }
    write_atomic(path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
        .map_err(ExpectedError::infra)
}
