//! `patchgrade regrade`: a run's saved logs graded again, the changes said,
//! the reports and summaries rewritten (the previous ones kept).

use serde::Serialize;

use super::{print_json, write_report};
use crate::cli::RegradeArgs;
use crate::error::ExpectedError;
use patchgrade::analysis::regrade::{self, LogLayout, Regrade};
use patchgrade::dataset::{Dataset, Prediction};
use patchgrade::outcome::Outcome;
use patchgrade::report::{model_summaries, RunInfo};
use patchgrade::rundir::RunDir;
use patchgrade::spec::SpecSet;
use patchgrade::table::{render, Layout as TableLayout};

/// One verdict that changed, as printed and as JSON.
#[derive(Debug, Serialize)]
struct Change {
    model: String,
    instance_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    sample_id: Option<String>,
    /// None: a reference log that had no record of patchgrade's.
    before: Option<Outcome>,
    after: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<String>,
}

#[derive(Debug, Serialize)]
struct RegradeReport {
    run_dir: String,
    regraded: usize,
    /// Records whose content changed (a verdict, statuses, or the detail).
    rewritten: usize,
    changes: Vec<Change>,
    /// Evaluations left as they were, with the reason.
    skipped: Vec<(String, String)>,
    written: bool,
}

pub fn regrade(args: RegradeArgs) -> Result<(), ExpectedError> {
    if !args.run_dir.is_dir() {
        return Err(ExpectedError::bad(anyhow::anyhow!(
            "{} is not a run folder",
            args.run_dir.display()
        )));
    }
    let run = RunDir::at(&args.run_dir);
    let dataset_path = match (&args.dataset, run.meta().and_then(|m| m.dataset_path())) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => p,
        (None, None) => {
            return Err(ExpectedError::bad(anyhow::anyhow!(
                "{} has no run.json naming its dataset: give --dataset",
                args.run_dir.display()
            )))
        }
    };
    let dataset = Dataset::open(&dataset_path).map_err(ExpectedError::bad)?;
    let mut specs = SpecSet::builtin().map_err(ExpectedError::bad)?;
    for p in &args.specs {
        specs.add_path(p).map_err(ExpectedError::bad)?;
    }
    let done = regrade::regrade(&run, &dataset, &specs).map_err(ExpectedError::bad)?;
    let changes = changes_of(&done);
    if !args.dry_run {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        regrade::write(&done, stamp).map_err(ExpectedError::infra)?;
        write_summaries(&args, &run, &dataset, &done, stamp)?;
    }
    let report = RegradeReport {
        run_dir: args.run_dir.display().to_string(),
        regraded: done.evaluations.len(),
        rewritten: done.evaluations.iter().filter(|e| e.changed).count(),
        changes,
        skipped: done
            .skipped
            .iter()
            .map(|s| (s.dir.display().to_string(), s.reason.clone()))
            .collect(),
        written: !args.dry_run,
    };
    print_table(&report, &done);
    if args.print.json {
        print_json(&report)?;
    }
    Ok(())
}

fn changes_of(done: &Regrade) -> Vec<Change> {
    done.verdict_changes()
        .map(|e| Change {
            model: e.record.model_name_or_path.clone(),
            instance_id: e.record.instance_id.clone(),
            sample_id: e.record.sample_id.clone(),
            before: e.before,
            after: e.record.outcome,
            why: e.record.detail.clone(),
        })
        .collect()
}

fn print_table(report: &RegradeReport, done: &Regrade) {
    if !report.changes.is_empty() {
        let mut rows: Vec<Vec<String>> = vec![["model", "instance", "verdict", "why"]
            .map(String::from)
            .to_vec()];
        rows.extend(report.changes.iter().map(|c| {
            let id = match &c.sample_id {
                Some(s) => format!("{}@{s}", c.instance_id),
                None => c.instance_id.clone(),
            };
            vec![
                c.model.clone(),
                id,
                format!(
                    "{} -> {}",
                    c.before.map_or("(no record)", Outcome::name),
                    c.after
                ),
                c.why.clone().unwrap_or_default(),
            ]
        }));
        let layout = TableLayout {
            indent: "",
            min_widths: &[],
            trim: true,
        };
        eprint!("{}", render(&rows, layout));
    }
    let from_reference = done
        .evaluations
        .iter()
        .filter(|e| e.layout == LogLayout::Reference)
        .count();
    eprintln!(
        "{} evaluations regraded ({} from reference logs), {} verdicts changed, {} records rewritten, {} left as they were{}",
        report.regraded,
        from_reference,
        report.changes.len(),
        report.rewritten,
        report.skipped.len(),
        if report.written { "" } else { " (dry run: nothing written)" }
    );
}

/// One summary per model over every record of the run, beside the earlier
/// one (kept as `<name>.<stamp>.prev`).
fn write_summaries(
    args: &RegradeArgs,
    run: &RunDir,
    dataset: &Dataset,
    done: &Regrade,
    stamp: u64,
) -> Result<(), ExpectedError> {
    let records = regrade::records(done);
    // The summary counts the instances the run evaluated: the run's own
    // `--instance-ids` filter is not recorded, its evaluations are.
    let mut ds = dataset.clone();
    let ids: Vec<String> = records
        .keys()
        .map(|key| key.instance_id.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    ds.filter(&ids).map_err(ExpectedError::bad)?;
    let preds: Vec<Prediction> = records
        .values()
        .map(|r| Prediction {
            instance_id: r.instance_id.clone(),
            model_name_or_path: r.model_name_or_path.clone(),
            model_patch: None,
            sample_id: r.sample_id.clone(),
            extra: Default::default(),
        })
        .collect();
    let pred_refs: Vec<&Prediction> = preds.iter().collect();
    let info = RunInfo {
        run_id: run.recorded_run_id(),
        // The backend the run recorded; none for another harness's logs.
        backend: run
            .meta()
            .and_then(|m| m.setup.and_then(|s| s.backend))
            .or_else(|| records.values().find_map(|r| r.backend.backend())),
        wall_seconds: 0.0,
    };
    for m in model_summaries(&ds, &pred_refs, &records, &info, run) {
        let path = args.report_dir.join(run.summary_name(&m.model));
        if path.exists() {
            let prev = path.with_extension(format!("json.{stamp}.prev"));
            std::fs::copy(&path, &prev).map_err(|e| {
                ExpectedError::infra(anyhow::anyhow!("cannot keep {}: {e}", path.display()))
            })?;
        }
        write_report(&path, &m.summary)?;
        eprintln!("summary written to {}", path.display());
    }
    Ok(())
}
