//! `patchgrade review`: the static rubric in each instance's container (and
//! the LLM judge when asked), review.json per evaluation, a summary and a
//! Markdown quality section per run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde::Serialize;

use super::{load_dataset, print_json, write_report};
use crate::cli::{JudgeArgs, ReviewArgs};
use crate::error::ExpectedError;
use patchgrade::backend::docker::events::ImageEvents;
use patchgrade::backend::docker::images::TESTBED;
use patchgrade::backend::{BackendKind, Workspace};
use patchgrade::dataset::load_predictions;
use patchgrade::engine::Engine;
use patchgrade::outcome::Outcome;
use patchgrade::patch::{apply_in_tree, Patch};
use patchgrade::review::container::{self, TOOLS_BIN};
use patchgrade::review::judge::{self, client::Client, rubric::Rubric, JudgeConfig, JudgeInput};
use patchgrade::review::quality::{self, Reviewed};
use patchgrade::review::script::{self, ScriptSpec};
use patchgrade::review::{assemble, hygiene, lines::parse_diff, StaticReview};
use patchgrade::rundir::RunDir;
use patchgrade::runner::jobs::{jobs_for_predictions, Job};
use patchgrade::runner::Runner;

/// One patch's review file.
#[derive(Debug, Serialize)]
struct ReviewFile<'a> {
    instance_id: &'a str,
    model_name_or_path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    sample_id: Option<&'a str>,
    review: &'a StaticReview,
    #[serde(skip_serializing_if = "Option::is_none")]
    judge: Option<&'a judge::JudgeResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    judge_error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    environment: Option<&'a str>,
    seconds: f64,
}

struct Shared {
    runner: Arc<Runner>,
    tools: PathBuf,
    with_hints: bool,
    resolved_only: bool,
    judge: Option<(JudgeConfig, Rubric, bool)>,
    timeout: Duration,
}

pub async fn review(args: ReviewArgs) -> Result<(), ExpectedError> {
    let started = Instant::now();
    let dataset = load_dataset(&args.dataset, &args.instance_ids)?;
    let preds = load_predictions(&args.predictions, &dataset).map_err(ExpectedError::bad)?;
    let jobs = jobs_for_predictions(&dataset, preds).map_err(ExpectedError::bad)?;
    let judge = judge_config(&args.judge, &args.engine.options().sources.cache())?;
    let opts = args.engine.options();
    // Reviewing a finished run's folder must not change what its run.json
    // records (the setup `audit --rerun` and `select` reuse).
    let run_json = RunDir::new(&opts.log_dir, &args.run_id)
        .path()
        .join("run.json");
    let recorded = std::fs::read(&run_json).ok();
    let engine = Engine::build(&opts, &args.run_id, args.dataset.path())?;
    if let Some(bytes) = recorded {
        std::fs::write(&run_json, bytes).map_err(|e| {
            ExpectedError::infra(anyhow::anyhow!(
                "cannot restore {}: {e}",
                run_json.display()
            ))
        })?;
    }
    if engine.backend != BackendKind::Docker {
        return Err(ExpectedError::bad(anyhow::anyhow!(
            "review runs the linters in the instances' containers and needs the docker backend (no Docker daemon answers, or --backend local was given)"
        )));
    }
    let cache = opts.sources.cache();
    let tools = tokio::task::spawn_blocking(move || container::ensure_tools(&cache))
        .await
        .map_err(|e| ExpectedError::Internal(format!("tools task: {e}")))?
        .map_err(ExpectedError::infra)?;
    let runner = engine.runner.clone();
    runner
        .backend
        .report_to(Some(ImageEvents::new(|e| eprintln!("{e}"))));
    runner.backend.start().await;
    let shared = Arc::new(Shared {
        runner: runner.clone(),
        tools,
        with_hints: args.with_hints,
        resolved_only: args.resolved_only,
        judge,
        timeout: opts.timeout,
    });
    let workers = opts.max_workers.max(1);
    let reviewed: Vec<Option<Reviewed>> = futures_util::stream::iter(jobs)
        .map(|job| {
            let shared = shared.clone();
            async move { review_job(&shared, &job).await }
        })
        .buffered(workers)
        .collect()
        .await;
    runner.backend.finish().await;
    let reviewed: Vec<Reviewed> = reviewed.into_iter().flatten().collect();
    if args.resolved_only && reviewed.is_empty() {
        eprintln!(
            "--resolved-only: no evaluation in {} ended resolved (run `patchgrade run` with the same --run-id first)",
            runner.cfg.rundir.path().display()
        );
    }
    for r in &reviewed {
        eprintln!("{}", quality::line(r));
    }
    let summary = quality::summarise(&reviewed);
    eprintln!("\n{}", quality::table(&summary));
    let run_dir = runner.cfg.rundir.path();
    let path = run_dir.join("review.json");
    write_report(&path, &summary)?;
    let md = run_dir.join("review.md");
    std::fs::write(&md, quality::markdown(&summary, &reviewed))
        .map_err(|e| ExpectedError::infra(anyhow::anyhow!("cannot write {}: {e}", md.display())))?;
    eprintln!(
        "review written to {} and {} ({:.1}s)",
        path.display(),
        md.display(),
        started.elapsed().as_secs_f64()
    );
    if args.json {
        print_json(&reviewed)?;
    }
    Ok(())
}

/// The judge's configuration from the flags; none without --judge-url.
fn judge_config(
    a: &JudgeArgs,
    cache: &Path,
) -> Result<Option<(JudgeConfig, Rubric, bool)>, ExpectedError> {
    let (Some(url), Some(model)) = (&a.judge_url, &a.judge_model) else {
        return Ok(None);
    };
    let mut cfg = JudgeConfig::new(url, model);
    cfg.key_env = a.judge_key_env.clone();
    cfg.samples = a.judge_samples.max(1);
    cfg.temperature = a.judge_temperature;
    cfg.timeout = Duration::from_secs(a.judge_timeout);
    cfg.price_in = a.judge_price_in;
    cfg.price_out = a.judge_price_out;
    cfg.max_context_tokens = a.judge_max_context;
    cfg.cache_dir = Some(cache.join("judge"));
    let rubric = match &a.judge_rubric {
        Some(p) => Rubric::load(p).map_err(ExpectedError::bad)?,
        None => Rubric::default_rubric(),
    };
    Ok(Some((cfg, rubric, a.judge_pairwise)))
}

/// Reviews one prediction; `None` for an empty patch.
async fn review_job(shared: &Shared, job: &Job) -> Option<Reviewed> {
    let patch = job
        .prediction
        .model_patch
        .clone()
        .filter(|_| !job.prediction.is_empty_patch())?;
    let t = Instant::now();
    let inst = job.instance.clone();
    let dir = job.eval_dir(&shared.runner.cfg.rundir);
    // The test run's verdict, when this run folder has one.
    let outcome = dir.record().ok().flatten().map(|r| r.outcome);
    if shared.resolved_only && outcome != Some(Outcome::Resolved) {
        return None;
    }
    let issue = if shared.with_hints && !inst.hints_text.is_empty() {
        format!("{}\n{}", inst.problem_statement, inst.hints_text)
    } else {
        inst.problem_statement.clone()
    };
    let (review, environment) = static_review(shared, job, &patch, &issue, dir.path()).await;
    let (judged, judge_error) = match &shared.judge {
        None => (None, None),
        Some((cfg, rubric, pairwise)) => {
            let (cfg, rubric, pairwise) = (cfg.clone(), rubric.clone(), *pairwise);
            let (inst2, patch2, issue2) = (inst.clone(), patch.clone(), issue.clone());
            let r = tokio::task::spawn_blocking(move || {
                let client = Client::new(&cfg);
                judge::judge(
                    &client,
                    &cfg,
                    &rubric,
                    &JudgeInput {
                        instance_id: &inst2.instance_id,
                        issue: &issue2,
                        candidate: &patch2,
                        gold: pairwise.then_some(inst2.patch.as_str()),
                    },
                )
            })
            .await;
            match r {
                Ok(Ok(j)) => (Some(j), None),
                Ok(Err(e)) => (None, Some(e.to_string())),
                Err(e) => (None, Some(format!("judge task: {e}"))),
            }
        }
    };
    let seconds = t.elapsed().as_secs_f64();
    let file = ReviewFile {
        instance_id: &inst.instance_id,
        model_name_or_path: &job.prediction.model_name_or_path,
        sample_id: job.sample.as_deref(),
        review: &review,
        judge: judged.as_ref(),
        judge_error: judge_error.as_deref(),
        environment: environment.as_deref(),
        seconds,
    };
    let written = dir.create().map_err(|e| e.to_string()).and_then(|()| {
        patchgrade::rundir::atomic::write_json_atomic(&dir.path().join("review.json"), &file)
            .map_err(|e| e.to_string())
    });
    if let Err(e) = written {
        eprintln!("cannot write {}/review.json: {e}", dir.path().display());
    }
    Some(Reviewed {
        instance_id: inst.instance_id.clone(),
        model: job.prediction.model_name_or_path.clone(),
        sample: job.sample.clone(),
        review,
        judge_overall: judged
            .as_ref()
            .and_then(|j| j.overall.as_ref().map(|s| s.mean)),
        outcome,
        seconds,
    })
}

/// The static rubric: hygiene from the diff; linters and complexity in the
/// instance's container. Whatever could not run is a note, never a pass.
async fn static_review(
    shared: &Shared,
    job: &Job,
    patch: &str,
    issue: &str,
    dir: &Path,
) -> (StaticReview, Option<String>) {
    let inst = &job.instance;
    let h = hygiene::check(
        patch,
        &hygiene::Context {
            issue,
            gold_patch: Some(&inst.patch),
        },
    );
    let files = match parse_diff(patch) {
        Ok(f) => f,
        Err(e) => {
            let note = format!("linters not run: the patch does not parse ({e})");
            return (assemble(h, None, Vec::new(), vec![note]), None);
        }
    };
    let fail = |h, why: String| {
        (
            assemble(h, None, Vec::new(), vec![format!("linters not run: {why}")]),
            None,
        )
    };
    let (base, new, written, deleted) = script::paths_of(&files);
    if base.is_empty() && new.is_empty() {
        return (
            assemble(
                h,
                None,
                Vec::new(),
                vec!["no Python file touched: nothing to lint (the rubric's linters are Python's; other languages are not linted yet)".into()],
            ),
            None,
        );
    }
    let runner = &shared.runner;
    let mut rs = match runner.specs.lookup(&inst.repo, &inst.version) {
        Ok(rs) => rs.clone(),
        Err(e) => return fail(h, e.to_string()),
    };
    // The base in the mirror, the patch applied in memory, the projects'
    // linter configuration read from the base tree, the tools' files.
    let (repos, inst2, patch2, tools) = (
        runner.repos.clone(),
        inst.clone(),
        patch.to_string(),
        shared.tools.clone(),
    );
    let prepared = tokio::task::spawn_blocking(move || -> Result<_, String> {
        let mirror = repos
            .ensure(&inst2.repo, &[&inst2.base_commit])
            .map_err(|e| e.to_string())?;
        // As `run` does: the upstream's version for setuptools_scm, part of
        // the environment, so the evaluation's instance image is the one found.
        let version = repos
            .base_version(&inst2.repo, &inst2.base_commit)
            .map_err(|e| e.to_string())?;
        let parsed = Patch::parse(&patch2)
            .and_then(|p| p.check_safe().map(|_| p))
            .map_err(|e| e.to_string())?;
        let mut changes = apply_in_tree(&mirror, &inst2.base_commit, &parsed).ok_or(
            "the patch does not apply strictly to the base tree (review reads strict applies only)",
        )?;
        let (extra, ruff_cfg) = container::configured_in_tree(&mirror, &inst2.base_commit)
            .map_err(|e| format!("reading the project's linter configuration: {e}"))?;
        let files = container::tool_files(&tools, !extra.is_empty()).map_err(|e| e.to_string())?;
        changes.write.extend(files);
        Ok((changes, extra, ruff_cfg, version))
    })
    .await;
    let (changes, extra, ruff_configured, version) = match prepared {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return fail(h, e),
        Err(e) => return fail(h, format!("task: {e}")),
    };
    let spec = ScriptSpec {
        root: TESTBED,
        tool_bin: TOOLS_BIN,
        patched_dir: container::PATCHED,
        base_paths: base,
        new_paths: new,
        written,
        deleted,
        extra,
        ruff_configured,
    };
    if let Some(v) = version {
        rs.spec
            .env
            .entry("SETUPTOOLS_SCM_PRETEND_VERSION".into())
            .or_insert(v);
    }
    let text = container::container_script(&spec, &files);
    if std::fs::create_dir_all(dir).is_ok() {
        let _ = std::fs::write(dir.join("review.sh"), &text);
    }
    let env = match runner.backend.prepare_env(&rs, inst, dir).await {
        Ok(env) => env,
        Err(e) => return fail(h, format!("environment: {e}")),
    };
    let ws = Workspace {
        root: runner.cfg.work_root.clone(),
        tree: runner.cfg.work_root.clone(),
        applied: Some(changes),
    };
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let out = match runner
        .backend
        .run(&env, &rs, &ws, &text, shared.timeout, rx)
        .await
    {
        Ok(o) => o,
        Err(e) => return fail(h, format!("container: {e}")),
    };
    let log = String::from_utf8_lossy(&out.log).into_owned();
    let _ = std::fs::write(dir.join("review.log"), &log);
    if out.timed_out {
        return fail(h, format!("timed out after {}s", shared.timeout.as_secs()));
    }
    let result = script::parse_log(&log, &spec);
    (
        script::review_from(&result, &spec, &files, h),
        Some(env.environment().to_string()),
    )
}
