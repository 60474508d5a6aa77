//! The runner: evaluates every (instance, prediction) and emits typed events.
//!
//! One task per evaluation, at most `max_workers` at once. Each evaluation
//! ends in an [`Outcome`]; nothing one evaluation does can stop the others.
//! Results are written as each evaluation finishes, so a crash loses only the
//! evaluations in flight, and a rerun reuses every finished result whose
//! inputs (patch, instance, spec) are unchanged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch, Semaphore};

use crate::backend::{Backend, Workspace};
use crate::dataset::{Instance, Prediction};
use crate::grade;
use crate::outcome::{EvalRecord, Outcome, Timings};
use crate::patch::Patch;
use crate::repo::RepoCache;
use crate::report::{instance_report, write_atomic, write_json_atomic};
use crate::script::EvalScript;
use crate::spec::{hex, SpecSet};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What the runner tells its reporters.
#[derive(Debug, Clone)]
pub enum RunEvent {
    Started {
        total: usize,
        workers: usize,
    },
    InstanceStarted {
        instance_id: String,
        model: String,
    },
    InstanceFinished {
        record: Box<EvalRecord>,
        reused: bool,
    },
    /// An evaluation stopped by an interrupt; nothing was recorded for it.
    InstanceCancelled {
        instance_id: String,
    },
    Finished {
        elapsed: Duration,
    },
}

/// Settings of one run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub run_id: String,
    pub log_root: PathBuf,
    pub work_root: PathBuf,
    pub max_workers: usize,
    pub timeout: Duration,
    /// Re-evaluate even when a finished result with the same inputs exists.
    pub force: bool,
}

/// One unit of work.
#[derive(Debug, Clone)]
pub struct Job {
    pub instance: Arc<Instance>,
    pub prediction: Prediction,
    /// Set when the model has several samples per instance.
    pub sample: Option<String>,
    /// Runner arguments instead of the test patch's files (validation and
    /// audits run chosen test files).
    pub directives: Option<Vec<String>>,
    /// Run the tests even when the patch is empty (the base tree as is),
    /// instead of recording `empty_patch`.
    pub run_without_patch: bool,
}

/// Records are keyed by (model, instance id, sample id).
pub type RecordKey = (String, String, Option<String>);

impl Job {
    /// `<log_root>/<run_id>/<model>/<instance_id>[@<sample>]`: the
    /// reference's layout for single samples, one folder per sample otherwise.
    pub fn log_dir(&self, cfg: &RunConfig) -> PathBuf {
        let leaf = match &self.sample {
            Some(s) => format!("{}@{s}", self.instance.instance_id),
            None => self.instance.instance_id.clone(),
        };
        cfg.log_root
            .join(&cfg.run_id)
            .join(self.prediction.model_dir())
            .join(leaf)
    }

    pub fn key(&self) -> RecordKey {
        (
            self.prediction.model_name_or_path.clone(),
            self.instance.instance_id.clone(),
            self.sample.clone(),
        )
    }
}

/// Everything an evaluation needs, shared by all tasks.
pub struct Runner {
    pub cfg: RunConfig,
    pub specs: SpecSet,
    pub repos: RepoCache,
    pub backend: Backend,
}

/// The key that says "these inputs produced that result".
fn cache_key(job: &Job, patch_sha: Option<&str>, spec_hash: Option<&str>, backend: &str) -> String {
    let i = &job.instance;
    let mut h = Sha256::new();
    for part in [
        VERSION,
        backend,
        &i.instance_id,
        &i.base_commit,
        &i.test_patch,
        &serde_json::to_string(&(&i.fail_to_pass, &i.pass_to_pass)).unwrap_or_default(),
        patch_sha.unwrap_or("-"),
        spec_hash.unwrap_or("-"),
        &serde_json::to_string(&(&job.directives, job.run_without_patch)).unwrap_or_default(),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    hex(&h.finalize())
}

/// Per-instance run log (`run_instance.log`), kept in memory and written
/// with the result.
#[derive(Default)]
struct InstanceLog(String);

impl InstanceLog {
    fn line(&mut self, msg: impl AsRef<str>) {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        self.0
            .push_str(&format!("[{:.3}] {}\n", t.as_secs_f64(), msg.as_ref()));
    }
}

/// `<log_root>/<run_id>/run.json`: what a run was, for commands that read
/// finished runs (the dataset path as given to the run).
#[derive(Serialize, Deserialize)]
pub struct RunMeta {
    pub run_id: String,
    pub patchgrade_version: String,
    pub dataset: String,
    pub created_at: u64,
}

impl RunMeta {
    /// The run.json of a run folder, if it is there and readable.
    pub fn read(run_dir: &Path) -> Option<RunMeta> {
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).ok()?).ok()
    }

    /// The dataset path it names, if any.
    pub fn dataset_path(&self) -> Option<PathBuf> {
        (!self.dataset.is_empty()).then(|| PathBuf::from(&self.dataset))
    }
}

impl Runner {
    /// Run every job; events go to `events`. Returns the records by
    /// (model, instance id, sample). `cancel` turning true stops new work and
    /// kills running evaluations. Samples of one instance with identical
    /// patches are evaluated once and the result recorded for each.
    pub async fn run(
        self: Arc<Self>,
        jobs: Vec<Job>,
        events: mpsc::UnboundedSender<RunEvent>,
        cancel: watch::Receiver<bool>,
    ) -> BTreeMap<RecordKey, EvalRecord> {
        let started = Instant::now();
        let workers = self.cfg.max_workers.max(1);
        let _ = events.send(RunEvent::Started {
            total: jobs.len(),
            workers,
        });
        let sem = Arc::new(Semaphore::new(workers));
        let mut set = tokio::task::JoinSet::new();
        for (primary, followers) in group_identical(jobs) {
            // Taken here, not in the task, so evaluations start in input order.
            let Ok(permit) = sem.clone().acquire_owned().await else {
                break;
            };
            let (this, events, cancel) = (self.clone(), events.clone(), cancel.clone());
            set.spawn(async move {
                let _permit = permit;
                if *cancel.borrow() {
                    return None;
                }
                let record = this.evaluate_with_retry(&primary, &events, cancel).await?;
                let mut out = vec![(primary.key(), record.clone())];
                for f in followers {
                    let copy = this.record_for_follower(&primary, &f, &record);
                    let _ = events.send(RunEvent::InstanceFinished {
                        record: Box::new(copy.clone()),
                        reused: true,
                    });
                    out.push((f.key(), copy));
                }
                Some(out)
            });
        }
        let mut records = BTreeMap::new();
        while let Some(res) = set.join_next().await {
            match res {
                Ok(Some(rs)) => records.extend(rs),
                Ok(None) => {}
                Err(e) => tracing::error!("an evaluation task failed: {e}"),
            }
        }
        let _ = events.send(RunEvent::Finished {
            elapsed: started.elapsed(),
        });
        records
    }

    /// The primary's result recorded for a sample with the same patch: its
    /// files copied into the follower's folder.
    fn record_for_follower(
        &self,
        primary: &Job,
        follower: &Job,
        record: &EvalRecord,
    ) -> EvalRecord {
        let mut copy = record.clone();
        copy.sample_id = follower.sample.clone();
        copy.evaluated_as = primary.sample.clone();
        let (from, to) = (primary.log_dir(&self.cfg), follower.log_dir(&self.cfg));
        let copy_files = || -> std::io::Result<()> {
            std::fs::create_dir_all(&to)?;
            for f in [
                "patch.diff",
                "eval.sh",
                "test_output.txt",
                "run_instance.log",
            ] {
                if from.join(f).exists() {
                    std::fs::copy(from.join(f), to.join(f))?;
                }
            }
            let report = to.join("report.json");
            if copy.outcome.has_reference_report() {
                write_json_atomic(
                    &report,
                    &instance_report(&copy, follower.prediction.model_patch.is_none()),
                )?;
            } else if report.exists() {
                std::fs::remove_file(&report)?;
            }
            write_json_atomic(&to.join("patchgrade.json"), &copy)
        };
        if let Err(e) = copy_files() {
            tracing::error!(
                "{}: failed to write results to {}: {e}",
                copy.instance_id,
                to.display()
            );
        }
        copy
    }

    async fn evaluate_with_retry(
        &self,
        job: &Job,
        events: &mpsc::UnboundedSender<RunEvent>,
        cancel: watch::Receiver<bool>,
    ) -> Option<EvalRecord> {
        let id = job.instance.instance_id.clone();
        let log_dir = job.log_dir(&self.cfg);
        if let Some(prev) = self.reusable(job, &log_dir) {
            let _ = events.send(RunEvent::InstanceFinished {
                record: Box::new(prev.clone()),
                reused: true,
            });
            return Some(prev);
        }
        let _ = events.send(RunEvent::InstanceStarted {
            instance_id: id.clone(),
            model: job.prediction.model_name_or_path.clone(),
        });
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = self.evaluate(job, &log_dir, cancel.clone()).await;
            match result {
                Evaluated::Done(record, log)
                    if record.outcome == Outcome::InfraError
                        && attempt == 1
                        && !*cancel.borrow() =>
                {
                    // Infra errors are often transient (a busy daemon, a full
                    // disk freed since): one retry before recording.
                    tracing::warn!(
                        "{id}: infra error, retrying once: {}",
                        record.detail.as_deref().unwrap_or("")
                    );
                    drop(log);
                    continue;
                }
                Evaluated::Done(record, log) => {
                    if let Err(e) = self.persist(job, &log_dir, &record, &log) {
                        tracing::error!(
                            "{id}: failed to write its results to {}: {e}",
                            log_dir.display()
                        );
                    }
                    let _ = events.send(RunEvent::InstanceFinished {
                        record: record.clone(),
                        reused: false,
                    });
                    return Some(*record);
                }
                Evaluated::Cancelled => {
                    let _ = events.send(RunEvent::InstanceCancelled { instance_id: id });
                    return None;
                }
            }
        }
    }

    /// A finished result for exactly these inputs, if one exists.
    fn reusable(&self, job: &Job, log_dir: &Path) -> Option<EvalRecord> {
        if self.cfg.force {
            return None;
        }
        let text = std::fs::read_to_string(log_dir.join("patchgrade.json")).ok()?;
        let prev: EvalRecord = serde_json::from_str(&text).ok()?;
        let (patch_sha, spec_hash) = self.inputs(job);
        let key = cache_key(
            job,
            patch_sha.as_deref(),
            spec_hash.as_deref(),
            self.backend.name(),
        );
        (prev.cache_key == key && prev.outcome.is_final()).then_some(prev)
    }

    fn inputs(&self, job: &Job) -> (Option<String>, Option<String>) {
        let patch_sha = job
            .prediction
            .model_patch
            .as_deref()
            .filter(|p| !p.trim().is_empty())
            .map(|p| hex(&Sha256::digest(p.as_bytes())));
        let spec_hash = self
            .specs
            .lookup(&job.instance.repo, &job.instance.version)
            .ok()
            .map(|s| s.spec.hash());
        (patch_sha, spec_hash)
    }

    fn persist(
        &self,
        job: &Job,
        log_dir: &Path,
        record: &EvalRecord,
        log: &InstanceLog,
    ) -> std::io::Result<()> {
        std::fs::create_dir_all(log_dir)?;
        write_atomic(&log_dir.join("run_instance.log"), log.0.as_bytes())?;
        let report = log_dir.join("report.json");
        if record.outcome.has_reference_report() {
            write_json_atomic(
                &report,
                &instance_report(record, job.prediction.model_patch.is_none()),
            )?;
        } else if report.exists() {
            // A stale report from other inputs would be read as this result.
            std::fs::remove_file(&report)?;
        }
        // Last: its presence marks the evaluation as finished.
        write_json_atomic(&log_dir.join("patchgrade.json"), record)
    }

    async fn evaluate(
        &self,
        job: &Job,
        log_dir: &Path,
        cancel: watch::Receiver<bool>,
    ) -> Evaluated {
        let t0 = Instant::now();
        let inst = &job.instance;
        let mut log = InstanceLog::default();
        let mut timings = Timings::default();
        let (patch_sha, spec_hash) = self.inputs(job);
        let mut record = EvalRecord {
            instance_id: inst.instance_id.clone(),
            model_name_or_path: job.prediction.model_name_or_path.clone(),
            sample_id: job.sample.clone(),
            evaluated_as: None,
            outcome: Outcome::InfraError,
            detail: None,
            cache_key: cache_key(
                job,
                patch_sha.as_deref(),
                spec_hash.as_deref(),
                self.backend.name(),
            ),
            patch_sha256: patch_sha,
            spec_hash,
            apply_strategy: None,
            grade: None,
            ungradable: None,
            test_exit_code: None,
            audit: None,
            backend: self.backend.name().into(),
            environment: None,
            timings: Timings::default(),
            patchgrade_version: VERSION.into(),
        };
        let finish = |mut record: EvalRecord,
                      outcome: Outcome,
                      detail: Option<String>,
                      mut log: InstanceLog,
                      mut timings: Timings| {
            record.outcome = outcome;
            record.detail = detail;
            timings.total = t0.elapsed().as_secs_f64();
            record.timings = timings;
            log.line(format!(
                "outcome: {outcome}{}",
                record
                    .detail
                    .as_deref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            ));
            Evaluated::Done(Box::new(record), log)
        };
        // End the evaluation early with an outcome and why.
        macro_rules! stop {
            ($outcome:expr, $detail:expr) => {
                return finish(record, $outcome, Some($detail), log, timings)
            };
        }
        log.line(format!(
            "evaluating {} for {}",
            inst.instance_id, job.prediction.model_name_or_path
        ));

        let empty = job.prediction.is_empty_patch();
        if empty && !job.run_without_patch {
            return finish(record, Outcome::EmptyPatch, None, log, timings);
        }
        let raw_patch = job.prediction.model_patch.clone().unwrap_or_default();
        if let Err(e) = std::fs::create_dir_all(log_dir)
            .and_then(|_| write_atomic(&log_dir.join("patch.diff"), raw_patch.as_bytes()))
        {
            stop!(
                Outcome::InfraError,
                format!("cannot write {}: {e}", log_dir.display())
            )
        }
        let mut rs = match self.specs.lookup(&inst.repo, &inst.version) {
            Ok(rs) => rs.clone(),
            Err(e) => {
                stop!(Outcome::EnvironmentBuildFailed, e.to_string())
            }
        };
        log.line(format!(
            "spec {} version {} ({}), hash {}",
            inst.repo,
            rs.version_key,
            rs.source.display(),
            rs.spec.hash()
        ));

        // Candidate patch: parse and refuse unsafe paths before any checkout.
        let candidate = match (
            empty,
            Patch::parse(&raw_patch).and_then(|p| p.check_safe().map(|_| p)),
        ) {
            (true, _) => None,
            (false, Ok(p)) => Some(p),
            (false, Err(e)) => {
                log.line(format!(">>>>> Patch Apply Failed: {e}"));
                stop!(Outcome::PatchApplyFailed, e.to_string())
            }
        };
        let test_changes = if inst.test_patch.trim().is_empty() {
            Vec::new()
        } else {
            match Patch::parse(&inst.test_patch) {
                Ok(p) => p.files,
                Err(e) => {
                    stop!(
                        Outcome::EnvironmentBuildFailed,
                        format!("the instance's test_patch is unusable: {e}")
                    )
                }
            }
        };

        // Checkout of the base tree into a fresh workspace.
        let t = Instant::now();
        let ws_root = match tempfile::Builder::new()
            .prefix(&format!("{}-", inst.instance_id))
            .tempdir_in(&self.cfg.work_root)
        {
            Ok(d) => d,
            Err(e) => {
                stop!(
                    Outcome::InfraError,
                    format!(
                        "cannot create a workspace in {}: {e}",
                        self.cfg.work_root.display()
                    )
                )
            }
        };
        let ws = Workspace {
            root: ws_root.path().to_owned(),
            tree: ws_root.path().join("testbed"),
        };
        let (repos, repo, commit, tree) = (
            self.repos.clone(),
            inst.repo.clone(),
            inst.base_commit.clone(),
            ws.tree.clone(),
        );
        let checkout = tokio::task::spawn_blocking(move || {
            repos.ensure(&repo, &[&commit])?;
            repos.checkout(&repo, &commit, &tree)
        })
        .await;
        match checkout {
            Ok(Ok(co)) => {
                if let Some(v) = co.version_tag {
                    log.line(format!("version from upstream tags: {v}"));
                    rs.spec
                        .env
                        .entry("SETUPTOOLS_SCM_PRETEND_VERSION".into())
                        .or_insert(v);
                }
            }
            Ok(Err(e)) => {
                stop!(Outcome::InfraError, e.to_string())
            }
            Err(e) => {
                stop!(Outcome::InfraError, format!("checkout task: {e}"))
            }
        }
        timings.checkout = t.elapsed().as_secs_f64();
        log.line(format!(
            "checked out {}@{} in {:.2}s",
            inst.repo, inst.base_commit, timings.checkout
        ));

        // Environment (cached per spec) and per-workspace setup.
        let t = Instant::now();
        let env = match self.backend.prepare_env(&rs, inst, log_dir).await {
            Ok(env) => env,
            Err(e) => {
                let outcome = if e.is_infra() {
                    Outcome::InfraError
                } else {
                    Outcome::EnvironmentBuildFailed
                };
                return finish(record, outcome, Some(e.to_string()), log, timings);
            }
        };
        record.environment = Some(env.describe());
        let activate = match self.backend.prepare_workspace(&env, &rs, &ws).await {
            Ok(a) => a,
            Err(e) => {
                // The workspace is removed afterwards: keep its setup logs.
                salvage_logs(&ws.root, log_dir);
                stop!(Outcome::EnvironmentBuildFailed, e.to_string())
            }
        };
        timings.env = t.elapsed().as_secs_f64();

        // Apply the candidate on the host tree.
        let t = Instant::now();
        let tree = ws.tree.clone();
        let applied = match candidate {
            Some(c) => {
                tokio::task::spawn_blocking(move || crate::patch::apply(&tree, &c).map(Some)).await
            }
            None => Ok(Ok(None)),
        };
        timings.apply = t.elapsed().as_secs_f64();
        match applied {
            Ok(Ok(None)) => log.line("no candidate patch: testing the base tree"),
            Ok(Ok(Some(strategy))) => {
                record.apply_strategy = Some(strategy);
                log.line(format!(">>>>> Applied Patch ({strategy:?})"));
            }
            Ok(Err(e)) => {
                log.line(format!(">>>>> Patch Apply Failed: {e}"));
                stop!(Outcome::PatchApplyFailed, e.to_string())
            }
            Err(e) => {
                stop!(Outcome::InfraError, format!("apply task: {e}"))
            }
        }

        let script = EvalScript {
            testbed: &self.backend.testbed(&ws),
            activate,
            spec: &rs.spec,
            install: rs.spec.eval_install(),
            test_patch: &inst.test_patch,
            test_changes: &test_changes,
            directives: job.directives.clone(),
            base_time: crate::audit::history::base_commit_time(
                &self.repos.mirror_path(&inst.repo),
                &inst.base_commit,
            ),
        }
        .render();
        if let Err(e) = write_atomic(&log_dir.join("eval.sh"), script.as_bytes()) {
            stop!(Outcome::InfraError, format!("cannot write eval.sh: {e}"))
        }

        let t = Instant::now();
        let out = match self
            .backend
            .run(&env, &rs, &ws, &script, self.cfg.timeout, cancel)
            .await
        {
            Ok(o) => o,
            Err(e) => {
                stop!(Outcome::InfraError, e.to_string())
            }
        };
        timings.tests = t.elapsed().as_secs_f64();
        // Setup output (install, venv) is worth reading whatever the verdict.
        salvage_logs(&ws.root, log_dir);
        if out.cancelled {
            return Evaluated::Cancelled;
        }
        // Tests may print anything; the log is text for grading, lossy.
        let mut text = String::from_utf8_lossy(&out.log).into_owned();
        if out.timed_out {
            text.push_str(&format!(
                "\n\nTimeout error: {} seconds exceeded.\n",
                self.cfg.timeout.as_secs()
            ));
        }
        if let Err(e) = write_atomic(&log_dir.join("test_output.txt"), text.as_bytes()) {
            stop!(
                Outcome::InfraError,
                format!("cannot write test_output.txt: {e}")
            )
        }
        log.line(format!(
            "eval script finished in {:.2}s",
            out.elapsed.as_secs_f64()
        ));
        if out.timed_out {
            stop!(
                Outcome::TestsTimedOut,
                format!("exceeded --timeout {}s", self.cfg.timeout.as_secs())
            )
        }
        record.test_exit_code = grade::recorded_exit_code(&text);
        match grade::logs_eval(rs.spec.log_parser, &text) {
            Ok(map) => {
                let g = grade::grade(&map, &inst.fail_to_pass, &inst.pass_to_pass);
                let outcome = if g.resolution == grade::Resolution::Full {
                    Outcome::Resolved
                } else {
                    Outcome::Unresolved
                };
                let detail = (outcome == Outcome::Unresolved).then(|| {
                    format!(
                        "FAIL_TO_PASS {}/{} passed, PASS_TO_PASS {}/{} passed{}",
                        g.fail_to_pass.success.len(),
                        g.fail_to_pass.success.len() + g.fail_to_pass.failure.len(),
                        g.pass_to_pass.success.len(),
                        g.pass_to_pass.success.len() + g.pass_to_pass.failure.len(),
                        if g.unmatched.is_empty() {
                            String::new()
                        } else {
                            format!("; {} expected ids not in the log", g.unmatched.len())
                        }
                    )
                });
                if !g.unmatched.is_empty() {
                    log.line(format!(
                        "expected test ids that matched nothing in the log: {}",
                        g.unmatched.join(", ")
                    ));
                }
                record.grade = Some(g);
                if !empty {
                    let mut input = crate::audit::AuditInput::new(inst, &raw_patch);
                    input.test_log = Some(&text);
                    input.log_parser = Some(rs.spec.log_parser);
                    input.checkout = Some(&ws.tree);
                    input.base_time = crate::audit::history::base_commit_time(
                        &self.repos.mirror_path(&inst.repo),
                        &inst.base_commit,
                    );
                    let audit = crate::audit::audit_static(&input);
                    if audit.is_suspect() {
                        let kinds: Vec<String> = audit
                            .reasons
                            .iter()
                            .map(|r| format!("{:?}", r.kind))
                            .collect();
                        log.line(format!("audit: suspect ({})", kinds.join(", ")));
                    }
                    record.audit = Some(audit);
                }
                finish(record, outcome, detail, log, timings)
            }
            Err(u) => {
                let detail = format!("ungradable log: {u}");
                record.ungradable = Some(u.clone());
                // Reference semantics: a report exists, nothing resolved.
                finish(record, Outcome::Unresolved, Some(detail), log, timings)
            }
        }
    }

    pub fn write_run_meta(&self, dataset: &Path) -> std::io::Result<()> {
        let meta = RunMeta {
            run_id: self.cfg.run_id.clone(),
            patchgrade_version: VERSION.into(),
            dataset: dataset.display().to_string(),
            created_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        };
        write_json_atomic(
            &self.cfg.log_root.join(&self.cfg.run_id).join("run.json"),
            &meta,
        )
    }
}

/// Copy the `*.log` files of a workspace into the instance's log folder
/// (`setup.log` → `workspace-setup.log`), so failures can be read after the
/// workspace is gone. Best effort: a failure to copy is only logged.
fn salvage_logs(ws_root: &Path, log_dir: &Path) {
    let Ok(rd) = std::fs::read_dir(ws_root) else {
        return;
    };
    for entry in rd.flatten() {
        let p = entry.path();
        if p.extension().is_some_and(|e| e == "log") {
            let name = format!("workspace-{}", entry.file_name().to_string_lossy());
            if let Err(e) = std::fs::copy(&p, log_dir.join(name)) {
                tracing::warn!("cannot keep {}: {e}", p.display());
            }
        }
    }
}

/// Jobs grouped so that samples of one (model, instance) with the same
/// non-empty patch run once: (primary, followers), in input order.
fn group_identical(jobs: Vec<Job>) -> Vec<(Job, Vec<Job>)> {
    let mut groups: Vec<(Job, Vec<Job>)> = Vec::new();
    let mut index: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for job in jobs {
        let patch = job.prediction.model_patch.as_deref().unwrap_or("");
        if job.sample.is_none() || patch.trim().is_empty() {
            groups.push((job, Vec::new()));
            continue;
        }
        let key = (
            job.prediction.model_name_or_path.clone(),
            job.instance.instance_id.clone(),
            hex(&Sha256::digest(patch.as_bytes())),
        );
        match index.get(&key) {
            Some(&i) => groups[i].1.push(job),
            None => {
                index.insert(key, groups.len());
                groups.push((job, Vec::new()));
            }
        }
    }
    groups
}

enum Evaluated {
    Done(Box<EvalRecord>, InstanceLog),
    Cancelled,
}
