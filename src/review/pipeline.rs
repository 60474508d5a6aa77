//! The review of a run's predictions ([`run`]): the static rubric in each
//! instance's container (and the LLM judge when configured), review.json
//! per evaluation, review.json and review.md per run. Driven by the
//! engine: its worker limit, its reporter, its Ctrl-C.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde::Serialize;
use tokio::sync::{mpsc, watch};

use super::container::{self, ToolsError, TOOLS_BIN};
use super::judge::{self, client::Client, rubric::Rubric, JudgeConfig, JudgeInput};
use super::quality::{self, QualitySummary, Reviewed};
use super::script::{self, ScriptSpec};
use super::{assemble, hygiene, lines::parse_diff, StaticReview};
use crate::backend::docker::images::TESTBED;
use crate::backend::{BackendKind, Workspace};
use crate::engine::Engine;
use crate::outcome::Outcome;
use crate::patch::{apply_in_tree, Patch};
use crate::rundir::atomic::{write_atomic, write_json_atomic};
use crate::runner::jobs::Job;
use crate::runner::{Notice, RunEvent, Runner};

/// The LLM judge's setup.
#[derive(Debug, Clone)]
pub struct JudgeSetup {
    pub config: JudgeConfig,
    pub rubric: Rubric,
    /// Against gold, in both orders, instead of pointwise.
    pub pairwise: bool,
}

/// What to review and how.
#[derive(Debug, Clone)]
pub struct ReviewOptions {
    /// Read the hints with the problem statement.
    pub with_hints: bool,
    /// Only the predictions whose evaluation in the run folder ended resolved.
    pub resolved_only: bool,
    /// None: no judge.
    pub judge: Option<JudgeSetup>,
    /// The cache folder: the review tools are installed under it.
    pub cache: PathBuf,
}

/// A review could not be made or its files not written.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("review runs the linters in the instances' containers and needs the docker backend (no Docker daemon answers, or --backend local was given)")]
    NeedsDocker,
    #[error(transparent)]
    Tools(#[from] ToolsError),
    #[error("tools task: {0}")]
    Task(String),
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Ctrl-C: the reviews that finished are written, the run's are not.
    #[error("interrupted")]
    Interrupted,
}

/// A run's reviews, written.
#[derive(Debug)]
pub struct Reviews {
    /// One per non-empty patch reviewed, in input order.
    pub reviewed: Vec<Reviewed>,
    pub summary: QualitySummary,
    /// The run's review.json and review.md.
    pub json: PathBuf,
    pub markdown: PathBuf,
}

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
    opts: ReviewOptions,
    say: mpsc::UnboundedSender<RunEvent>,
    cancel: watch::Receiver<bool>,
}

/// A review stopped by Ctrl-C: nothing is written for it.
struct Stopped;

/// Reviews every job's patch, at most the engine's worker limit at once,
/// and writes the files. The first Ctrl-C stops running reviews (nothing
/// written for them), the second returns at once.
pub async fn run(
    engine: &Engine,
    jobs: Vec<Job>,
    opts: ReviewOptions,
) -> Result<Reviews, ReviewError> {
    if engine.backend != BackendKind::Docker {
        return Err(ReviewError::NeedsDocker);
    }
    let cache = opts.cache.clone();
    let tools = tokio::task::spawn_blocking(move || container::ensure_tools(&cache))
        .await
        .map_err(|e| ReviewError::Task(e.to_string()))??;
    let runner = engine.runner.clone();
    let mut session = engine.session();
    runner.backend.start().await;
    let shared = Arc::new(Shared {
        runner: runner.clone(),
        tools,
        opts,
        say: session.events(),
        cancel: session.cancel(),
    });
    let workers = runner.cfg.max_workers.max(1);
    let reviewing = futures_util::stream::iter(jobs)
        .map(|job| {
            let shared = shared.clone();
            async move { review_job(&shared, &job).await }
        })
        .buffered(workers)
        .collect::<Vec<Option<Reviewed>>>();
    let Some(reviewed) = session.drive(reviewing).await else {
        return Err(ReviewError::Interrupted);
    };
    let interrupted = session.stop_watching().await;
    runner.backend.finish().await;
    drop(shared);
    session.close().await;
    if interrupted {
        return Err(ReviewError::Interrupted);
    }
    let reviewed: Vec<Reviewed> = reviewed.into_iter().flatten().collect();
    let summary = quality::summarise(&reviewed);
    let run_dir = runner.cfg.rundir.path();
    let json = run_dir.join("review.json");
    write_json_atomic(&json, &summary).map_err(|source| ReviewError::Write {
        path: json.clone(),
        source,
    })?;
    let markdown = run_dir.join("review.md");
    write_atomic(&markdown, quality::markdown(&summary, &reviewed).as_bytes()).map_err(
        |source| ReviewError::Write {
            path: markdown.clone(),
            source,
        },
    )?;
    Ok(Reviews {
        reviewed,
        summary,
        json,
        markdown,
    })
}

/// Reviews one prediction; `None` for an empty patch, one not to review,
/// or one stopped by Ctrl-C.
async fn review_job(shared: &Shared, job: &Job) -> Option<Reviewed> {
    if *shared.cancel.borrow() {
        return None;
    }
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
    if shared.opts.resolved_only && outcome != Some(Outcome::Resolved) {
        return None;
    }
    let issue = if shared.opts.with_hints && !inst.hints_text.is_empty() {
        format!("{}\n{}", inst.problem_statement, inst.hints_text)
    } else {
        inst.problem_statement.clone()
    };
    let (review, environment) = static_review(shared, job, &patch, &issue, dir.path())
        .await
        .ok()?;
    let (judged, judge_error) = match &shared.opts.judge {
        None => (None, None),
        Some(setup) => {
            let setup = setup.clone();
            let (inst2, patch2, issue2) = (inst.clone(), patch.clone(), issue.clone());
            let r = tokio::task::spawn_blocking(move || {
                let client = Client::new(&setup.config);
                judge::judge(
                    &client,
                    &setup.config,
                    &setup.rubric,
                    &JudgeInput {
                        instance_id: &inst2.instance_id,
                        issue: &issue2,
                        candidate: &patch2,
                        gold: setup.pairwise.then_some(inst2.patch.as_str()),
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
    let path = dir.path().join("review.json");
    let written = dir.create().and_then(|()| write_json_atomic(&path, &file));
    if let Err(e) = written {
        let _ = shared.say.send(RunEvent::Notice(Notice::Unwritten {
            path,
            error: e.to_string(),
        }));
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
) -> Result<(StaticReview, Option<String>), Stopped> {
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
            return Ok((assemble(h, None, Vec::new(), vec![note]), None));
        }
    };
    let fail = |h, why: String| {
        Ok((
            assemble(h, None, Vec::new(), vec![format!("linters not run: {why}")]),
            None,
        ))
    };
    let (base, new, written, deleted) = script::paths_of(&files);
    if base.is_empty() && new.is_empty() {
        return Ok((
            assemble(
                h,
                None,
                Vec::new(),
                vec!["no Python file touched: nothing to lint (the rubric's linters are Python's; other languages are not linted yet)".into()],
            ),
            None,
        ));
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
        rs.pretend_version(v);
    }
    let text = container::container_script(&spec, &files);
    if std::fs::create_dir_all(dir).is_ok() {
        let _ = write_atomic(&dir.join("review.sh"), text.as_bytes());
    }
    let env = match runner.backend.prepare_env(&rs, inst, dir).await {
        Ok(env) => env,
        Err(e) => return fail(h, format!("environment: {e}")),
    };
    if *shared.cancel.borrow() {
        return Err(Stopped);
    }
    let ws = Workspace {
        root: runner.cfg.work_root.clone(),
        tree: runner.cfg.work_root.clone(),
        applied: Some(changes),
    };
    let timeout: Duration = runner.cfg.timeout;
    let out = match runner
        .backend
        .run(&env, &rs, &ws, &text, timeout, shared.cancel.clone())
        .await
    {
        Ok(o) if o.cancelled => return Err(Stopped),
        Ok(o) => o,
        Err(e) => return fail(h, format!("container: {e}")),
    };
    let log = String::from_utf8_lossy(&out.log).into_owned();
    let _ = write_atomic(&dir.join("review.log"), log.as_bytes());
    if out.timed_out {
        return fail(h, format!("timed out after {}s", timeout.as_secs()));
    }
    let result = script::parse_log(&log, &spec);
    Ok((
        script::review_from(&result, &spec, &files, h),
        Some(env.environment().to_string()),
    ))
}
