//! `patchgrade review`: the static rubric in each instance's container (and
//! the LLM judge when asked), review.json per evaluation, a summary and a
//! Markdown quality section per run (`patchgrade::review::run`).

use std::path::Path;
use std::time::{Duration, Instant};

use super::{load_dataset, print_json};
use crate::cli::{JudgeArgs, ReviewArgs};
use crate::error::ExpectedError;
use patchgrade::dataset::load_predictions;
use patchgrade::engine::Engine;
use patchgrade::review::judge::{rubric::Rubric, JudgeConfig};
use patchgrade::review::quality;
use patchgrade::review::{self, JudgeSetup, ReviewError, ReviewOptions};
use patchgrade::runner::jobs::jobs_for_predictions;

pub async fn review(args: ReviewArgs) -> Result<(), ExpectedError> {
    let started = Instant::now();
    let dataset = load_dataset(&args.dataset, &args.instance_ids)?;
    let preds = load_predictions(&args.predictions, &dataset).map_err(ExpectedError::bad)?;
    let jobs = jobs_for_predictions(&dataset, preds).map_err(ExpectedError::bad)?;
    let opts = super::given_options(&args.engine, args.print);
    let cache = opts.sources.cache();
    let judge = judge_setup(&args.judge, &cache)?;
    // Reviewing a finished run's folder must not change what its run.json
    // records (the setup `audit --rerun` and `select` reuse).
    let engine = Engine::attach(&opts, &args.run_id, args.dataset.path())?;
    let reviewed = review::run(
        &engine,
        jobs,
        ReviewOptions {
            with_hints: args.with_hints,
            resolved_only: args.resolved_only,
            judge,
            cache,
        },
    )
    .await
    .map_err(|e| match e {
        ReviewError::NeedsDocker => ExpectedError::bad(e),
        ReviewError::Interrupted => ExpectedError::Interrupted,
        ReviewError::Task(t) => ExpectedError::Internal(format!("tools task: {t}")),
        ReviewError::Tools(_) | ReviewError::Write { .. } => ExpectedError::infra(e),
    })?;
    if args.resolved_only && reviewed.reviewed.is_empty() {
        eprintln!(
            "--resolved-only: no evaluation in {} ended resolved (run `patchgrade run` with the same --run-id first)",
            engine.runner.cfg.rundir.path().display()
        );
    }
    for r in &reviewed.reviewed {
        eprintln!("{}", quality::line(r));
    }
    eprintln!("\n{}", quality::table(&reviewed.summary));
    eprintln!(
        "review written to {} and {} ({:.1}s)",
        reviewed.json.display(),
        reviewed.markdown.display(),
        started.elapsed().as_secs_f64()
    );
    if args.print.json {
        print_json(&reviewed.reviewed)?;
    }
    Ok(())
}

/// The judge's setup from the flags; none without --judge-url.
fn judge_setup(a: &JudgeArgs, cache: &Path) -> Result<Option<JudgeSetup>, ExpectedError> {
    let (Some(url), Some(model)) = (&a.judge_url, &a.judge_model) else {
        return Ok(None);
    };
    let mut config = JudgeConfig::new(url, model);
    config.key_env = a.judge_key_env.clone();
    config.samples = a.judge_samples.max(1);
    config.temperature = a.judge_temperature;
    config.timeout = Duration::from_secs(a.judge_timeout);
    config.price_in = a.judge_price_in;
    config.price_out = a.judge_price_out;
    config.max_context_tokens = a.judge_max_context;
    config.cache_dir = Some(cache.join("judge"));
    let rubric = match &a.judge_rubric {
        Some(p) => Rubric::load(p).map_err(ExpectedError::bad)?,
        None => Rubric::default_rubric(),
    };
    Ok(Some(JudgeSetup {
        config,
        rubric,
        pairwise: a.judge_pairwise,
    }))
}
