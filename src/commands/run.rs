//! `patchgrade run`: evaluate predictions, write one summary per model.

use std::collections::BTreeMap;

use super::{finished, load_dataset, print_one_or_many, write_report};
use crate::cli::RunArgs;
use crate::error::ExpectedError;
use patchgrade::dataset::{load_predictions, model_dir, Prediction};
use patchgrade::engine::Engine;
use patchgrade::outcome::EvalRecord;
use patchgrade::report::{Summary, SummaryExtra};
use patchgrade::runner::jobs::jobs_for_predictions;

pub async fn run(args: RunArgs) -> Result<(), ExpectedError> {
    let dataset = load_dataset(&args.dataset, &args.instance_ids)?;
    let preds = load_predictions(&args.predictions, &dataset).map_err(ExpectedError::bad)?;
    let jobs = jobs_for_predictions(&dataset, preds).map_err(ExpectedError::bad)?;
    let opts = args.engine.options();
    let engine = Engine::build(&opts, &args.run_id, &args.dataset)?;
    let done = engine.execute(jobs.clone()).await;

    // One summary per model, as the reference names them.
    let mut models: Vec<String> = Vec::new();
    for j in &jobs {
        if !models.contains(&j.prediction.model_name_or_path) {
            models.push(j.prediction.model_name_or_path.clone());
        }
    }
    let mut summaries = Vec::new();
    for model in &models {
        let preds: Vec<&Prediction> = jobs
            .iter()
            .filter(|j| &j.prediction.model_name_or_path == model)
            .map(|j| &j.prediction)
            .collect();
        // The reference's summary has one verdict per instance: with samples,
        // the first sample stands for it (pass@k is reported separately).
        let mut recs: BTreeMap<String, EvalRecord> = BTreeMap::new();
        for ((m, id, _), r) in &done.records {
            if m == model {
                recs.entry(id.clone()).or_insert_with(|| r.clone());
            }
        }
        let extra = SummaryExtra {
            version: patchgrade::VERSION.into(),
            run_id: args.run_id.clone(),
            model_name_or_path: model.clone(),
            backend: engine.backend_name.clone(),
            outcomes: BTreeMap::new(),
            ids_by_outcome: BTreeMap::new(),
            audit: Default::default(),
            wall_seconds: done.elapsed.as_secs_f64(),
        };
        let summary = Summary::build(&dataset, &preds, &recs, extra);
        let path = args
            .report_dir
            .join(Summary::file_name(&model_dir(model), &args.run_id));
        write_report(&path, &summary)?;
        eprintln!("\n{model}:\n{}", summary.table(&recs));
        eprintln!("summary written to {}", path.display());
        summaries.push(summary);
    }
    // Several samples per instance: the pass@k table (`report` has more).
    let run_dir = engine.runner.cfg.rundir.path();
    if let Some(table) =
        patchgrade::passk::render::after_run(&run_dir, &args.run_id, done.records.values())
    {
        eprintln!("\npass@k (95% bootstrap intervals over instances):\n{table}");
    }
    if args.json {
        print_one_or_many(&summaries)?;
    }
    finished(&done)
}
