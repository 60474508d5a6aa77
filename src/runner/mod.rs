//! The runner: evaluates every job and emits typed events.
//!
//! One task per evaluation, at most `max_workers` at once, started in input
//! order. Each evaluation ends in an [`Outcome`]; nothing one evaluation
//! does can stop the others. Results are written through [`crate::rundir`]
//! as each evaluation finishes, so a crash loses only the evaluations in
//! flight, and a rerun reuses every finished result whose inputs (patch,
//! instance, spec) are unchanged.

mod evaluate;
pub mod jobs;
mod machinery;
pub mod preparing;
pub mod schedule;

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch, Semaphore};

use crate::backend::Backend;
use crate::dataset::sha256_hex;
use crate::key::EvalKey;
use crate::outcome::Outcome;
use crate::record::EvalRecord;
use crate::repo::RepoCache;
use crate::rundir::eval_dir::EvalDir;
use crate::rundir::RunDir;
use crate::runner::jobs::Records;
use crate::script::dataset::{eval_script_of, ScriptSource};
use crate::spec::{hex, SpecSet};
use crate::VERSION;
use evaluate::Evaluated;
use jobs::{group_identical, Job};

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
        finished: Finished,
        reused: bool,
    },
    /// An evaluation stopped by an interrupt; nothing was recorded for it.
    InstanceCancelled {
        instance_id: String,
    },
    Finished {
        elapsed: Duration,
    },
    /// The docker backend's image cache: budget, removals, what the run
    /// reused and built (at the start, the end, or when it connects).
    Images(crate::backend::docker::events::ImageEvent),
    /// Something the engine says about the run itself.
    Notice(Notice),
}

/// The engine's own messages, shown by the reporters.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// The first Ctrl-C: running evaluations stop, finished ones are kept.
    Interrupted,
    /// The recorded test durations could not be read: evaluations start in
    /// input order.
    DurationsUnreadable(String),
    /// This run's test durations could not be saved for the next run.
    DurationsUnsaved(String),
    /// A file of finished work could not be written.
    Unwritten {
        path: std::path::PathBuf,
        error: String,
    },
    /// `perf` starts measuring an instance.
    Measuring {
        instance_id: String,
        variants: usize,
        rounds: usize,
    },
    /// `run --perf`: nothing the run resolved for this instance.
    NothingToMeasure { instance_id: String },
    /// `--backend auto` found no Docker daemon and grades locally: said, so
    /// that a run meant for the images does not quietly run in venvs.
    LocalFallback(String),
}

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Notice::Interrupted => f.write_str(
                "\ninterrupted: stopping running evaluations (finished results are kept); Ctrl-C again to exit now",
            ),
            Notice::DurationsUnreadable(e) => {
                write!(f, "warning: {e}; evaluations start in input order")
            }
            Notice::DurationsUnsaved(e) => write!(f, "warning: {e}"),
            Notice::Unwritten { path, error } => {
                write!(f, "cannot write {}: {error}", path.display())
            }
            Notice::Measuring {
                instance_id,
                variants,
                rounds,
            } => write!(
                f,
                "perf: measuring {instance_id}: {variants} variant(s) x {rounds} round(s)"
            ),
            Notice::NothingToMeasure { instance_id } => {
                write!(f, "perf: {instance_id}: no resolved patch to measure")
            }
            Notice::LocalFallback(e) => write!(
                f,
                "--backend auto: {e}; grading with the local backend (venvs and bubblewrap); --backend docker requires the engine"
            ),
        }
    }
}

/// What reporters are told of a finished evaluation. Not the whole record:
/// a reporter that falls behind (a slow terminal, a 100,000-row run) must
/// not hold every record twice.
#[derive(Debug, Clone)]
pub struct Finished {
    pub instance_id: String,
    pub outcome: crate::outcome::Outcome,
    /// The record's `environment` (image, interpreter, node).
    pub environment: Option<crate::record::Environment>,
}

impl Finished {
    fn of(record: &EvalRecord) -> Finished {
        Finished {
            instance_id: record.instance_id.clone(),
            outcome: record.outcome,
            environment: record.environment.clone(),
        }
    }
}

/// Settings of one run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Where results go.
    pub rundir: RunDir,
    /// Scratch space for workspaces.
    pub work_root: PathBuf,
    pub max_workers: usize,
    pub timeout: Duration,
    /// Re-evaluate even when a finished result with the same inputs exists.
    pub force: bool,
    /// Where the eval script of jobs that run the instance's own tests
    /// comes from (`--eval-script`).
    pub eval_script: ScriptSource,
}

/// Everything an evaluation needs, shared by all tasks.
pub struct Runner {
    pub cfg: RunConfig,
    pub specs: SpecSet,
    pub repos: RepoCache,
    pub backend: Backend,
    /// Earlier runs' test seconds: the order evaluations start in.
    pub durations: schedule::Durations,
    /// Results that could not be written in the current run.
    pub unwritten: Mutex<Vec<String>>,
    /// The evaluations of [`Runner::run`] still preparing their
    /// environment: which one a free worker starts.
    pub preparing: preparing::Preparing,
}

/// How long a retry waits for an engine that stopped answering.
const ENGINE_RETURN_LIMIT: Duration = Duration::from_secs(180);

/// What a run gave.
pub struct Ran {
    /// By (model, instance id, sample).
    pub records: Records,
    /// Evaluation tasks that failed outside an evaluation (a bug); nothing
    /// recorded for them. A panic inside an evaluation is its infra_error.
    pub failed_tasks: usize,
    /// Results that could not be written (what failed, naming the path).
    pub unwritten: Vec<String>,
}

type TaskResult = Result<Option<Vec<(EvalKey, EvalRecord)>>, tokio::task::JoinError>;

impl Ran {
    fn collect(&mut self, res: TaskResult) {
        match res {
            Ok(Some(rs)) => self
                .records
                .extend(rs.into_iter().map(|(k, r)| (k, Box::new(r)))),
            Ok(None) => {}
            Err(e) => {
                tracing::error!("an evaluation task failed: {e}");
                self.failed_tasks += 1;
            }
        }
    }
}

/// The key that says "these inputs produced that result". `dataset_script`:
/// the job runs the instance's own eval script (its text, or None when the
/// instance has none); spec-driven keys are as they always were.
fn cache_key(
    job: &Job,
    patch_sha: Option<&str>,
    spec_hash: Option<&str>,
    backend: &str,
    dataset_script: Option<Option<&str>>,
) -> String {
    let i = &job.instance;
    let mut h = Sha256::new();
    if let Some(script) = dataset_script {
        h.update(b"eval_script=dataset\0");
        h.update(script.map(sha256_hex).unwrap_or_default().as_bytes());
        h.update([0]);
    }
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
    // Only overridden settings join the key: other records stay reusable.
    if !job.overrides.is_default() {
        h.update(b"overrides=");
        h.update(
            serde_json::to_string(&job.overrides)
                .unwrap_or_default()
                .as_bytes(),
        );
        h.update([0]);
    }
    // Only when set, so the keys of other jobs stay as they were.
    if job.confirm {
        h.update(b"confirm=1\0");
    }
    // A candidate that touches the test machinery is graded with it set
    // aside (`script::machinery`): records made before that rule are not
    // reused for it. Other candidates' keys stay as they were.
    if job
        .prediction
        .model_patch
        .as_deref()
        .is_some_and(crate::script::machinery::touched)
    {
        h.update(b"set_aside=1\0");
    }
    // Only when present, so the keys of instances without it stay as they were.
    if !i.covering_tests.is_empty() {
        h.update(serde_json::to_string(&i.covering_tests).unwrap_or_default());
        h.update([0]);
    }
    hex(&h.finalize())
}

impl Runner {
    /// Run every job; events go to `events`. `cancel` turning true stops new
    /// work and kills running evaluations. Samples of one instance with
    /// identical patches are evaluated once and the result recorded for each.
    pub async fn run(
        self: Arc<Self>,
        jobs: Vec<Job>,
        events: mpsc::UnboundedSender<RunEvent>,
        cancel: watch::Receiver<bool>,
    ) -> Ran {
        let started = Instant::now();
        let workers = self.cfg.max_workers.max(1);
        let _ = events.send(RunEvent::Started {
            total: jobs.len(),
            workers,
        });
        let sem = Arc::new(Semaphore::new(workers));
        let mut set = tokio::task::JoinSet::new();
        let mut ran = Ran {
            records: BTreeMap::new(),
            failed_tasks: 0,
            unwritten: Vec::new(),
        };
        let mut groups = group_identical(jobs);
        schedule::order(&mut groups, &self.durations);
        let mut pending = std::collections::VecDeque::from(groups);
        loop {
            // Finished tasks are collected as we go: a finished task keeps
            // its (large) state until joined, 100,000 of them gigabytes.
            while let Some(res) = set.try_join_next() {
                ran.collect(res);
            }
            if pending.is_empty() {
                break;
            }
            // Taken here, not in the task, so evaluations start in schedule
            // order (but for a version still preparing: `preparing`).
            let Ok(permit) = sem.clone().acquire_owned().await else {
                break;
            };
            let Some((primary, followers)) = self.preparing.take_next(&mut pending) else {
                break;
            };
            self.preparing.start(&primary);
            let (this, events, cancel) = (self.clone(), events.clone(), cancel.clone());
            set.spawn(async move {
                let _permit = permit;
                let cancelled = *cancel.borrow();
                let record = match cancelled {
                    true => None,
                    false => this.evaluate_with_retry(&primary, &events, cancel).await,
                };
                // Cancelled, reused, or ended before its environment was ready.
                this.preparing.done(&primary.key());
                let record = record?;
                let mut out = vec![(primary.key(), record.clone())];
                for f in followers {
                    let copy = this.record_for_follower(&primary, &f, &record);
                    let _ = events.send(RunEvent::InstanceFinished {
                        finished: Finished::of(&copy),
                        reused: true,
                    });
                    out.push((f.key(), copy));
                }
                Some(out)
            });
        }
        while let Some(res) = set.join_next().await {
            ran.collect(res);
        }
        ran.unwritten = std::mem::take(&mut *self.unwritten_list());
        let _ = events.send(RunEvent::Finished {
            elapsed: started.elapsed(),
        });
        ran
    }

    fn unwritten_list(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.unwritten.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A result that could not be written: logged, and kept for the exit
    /// status (the run then ends as an infrastructure failure).
    fn note_unwritten(&self, id: &str, dir: &EvalDir, e: &std::io::Error) {
        let msg = format!(
            "{id}: cannot write its results to {}: {e}",
            dir.path().display()
        );
        tracing::error!("{msg}");
        self.unwritten_list().push(msg);
    }

    fn eval_dir(&self, job: &Job) -> EvalDir {
        job.eval_dir(&self.cfg.rundir)
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
        let (from, to) = (self.eval_dir(primary), self.eval_dir(follower));
        let written = to
            .copy_files_from(&from)
            .and_then(|()| to.write_result(&copy, follower.prediction.model_patch.is_none()));
        if let Err(e) = written {
            self.note_unwritten(&copy.instance_id, &to, &e);
        }
        copy
    }

    /// One job evaluated on its own, for a caller that schedules jobs
    /// itself and holds the worker limit (`serve`): as in [`Runner::run`],
    /// a finished result with the same inputs is reused (`true`), an infra
    /// error retried once, a panic recorded; None when `cancel` stopped it.
    pub async fn evaluate_job(
        &self,
        job: &Job,
        events: &mpsc::UnboundedSender<RunEvent>,
        cancel: watch::Receiver<bool>,
    ) -> Option<(EvalRecord, bool)> {
        if let Some(prev) = self.reuse(job, events) {
            return Some((prev, true));
        }
        self.evaluate_fresh(job, events, cancel)
            .await
            .map(|r| (r, false))
    }

    async fn evaluate_with_retry(
        &self,
        job: &Job,
        events: &mpsc::UnboundedSender<RunEvent>,
        cancel: watch::Receiver<bool>,
    ) -> Option<EvalRecord> {
        if let Some(prev) = self.reuse(job, events) {
            return Some(prev);
        }
        self.evaluate_fresh(job, events, cancel).await
    }

    /// The reusable finished result of this job, said as reused.
    fn reuse(&self, job: &Job, events: &mpsc::UnboundedSender<RunEvent>) -> Option<EvalRecord> {
        let prev = self.reusable(job, &self.eval_dir(job))?;
        let _ = events.send(RunEvent::InstanceFinished {
            finished: Finished::of(&prev),
            reused: true,
        });
        Some(prev)
    }

    async fn evaluate_fresh(
        &self,
        job: &Job,
        events: &mpsc::UnboundedSender<RunEvent>,
        cancel: watch::Receiver<bool>,
    ) -> Option<EvalRecord> {
        let id = job.instance.instance_id.clone();
        let dir = self.eval_dir(job);
        let _ = events.send(RunEvent::InstanceStarted {
            instance_id: id.clone(),
            model: job.prediction.model_name_or_path.clone(),
        });
        let mut attempt = 0;
        loop {
            attempt += 1;
            if attempt > 1 {
                // An engine that went away (restarted, overloaded) is waited
                // for before the retry, which would fail the same way.
                self.backend.wait_ready(ENGINE_RETURN_LIMIT).await;
            }
            let evaluation = async {
                fault_injection_panic(&id);
                self.evaluate(job, &dir, cancel.clone()).await
            };
            let evaluated = match AssertUnwindSafe(evaluation).catch_unwind().await {
                Ok(e) => e,
                Err(payload) => self.panicked(job, payload.as_ref()),
            };
            match evaluated {
                Evaluated::Done(record, _)
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
                }
                Evaluated::Done(record, log) => {
                    let written = dir.create().and_then(|()| {
                        dir.write_instance_log(&log)?;
                        dir.write_result(&record, job.prediction.model_patch.is_none())
                    });
                    if let Err(e) = written {
                        self.note_unwritten(&id, &dir, &e);
                    }
                    let _ = events.send(RunEvent::InstanceFinished {
                        finished: Finished::of(&record),
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

    /// The record of an evaluation that panicked (a bug in patchgrade, not
    /// the candidate's doing): an infra error with the panic message.
    fn panicked(&self, job: &Job, payload: &(dyn std::any::Any + Send)) -> Evaluated {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic with no message".into());
        let mut record = EvalRecord {
            sample_id: job.sample.clone(),
            cache_key: self.cache_key(job),
            patch_sha256: job.prediction.patch_sha256(),
            spec_hash: self.spec_hash(job),
            ..EvalRecord::new(
                &job.instance.instance_id,
                &job.prediction.model_name_or_path,
                self.backend.kind(),
            )
        };
        record.outcome = Outcome::InfraError;
        record.detail = Some(format!("the evaluation panicked: {msg}"));
        let log = format!(
            "evaluating {} for {}\nthe evaluation panicked: {msg}\n",
            job.instance.instance_id, job.prediction.model_name_or_path
        );
        Evaluated::Done(Box::new(record), log)
    }

    /// A finished result for exactly these inputs, if one exists.
    fn reusable(&self, job: &Job, dir: &EvalDir) -> Option<EvalRecord> {
        if self.cfg.force {
            return None;
        }
        let prev = dir.record().ok()??;
        (prev.cache_key == self.cache_key(job) && prev.outcome.counts_for_model()).then_some(prev)
    }

    fn spec_hash(&self, job: &Job) -> Option<String> {
        self.specs
            .for_instance(&job.instance)
            .ok()
            .map(|s| s.spec.hash())
    }

    fn cache_key(&self, job: &Job) -> String {
        cache_key(
            job,
            job.prediction.patch_sha256().as_deref(),
            self.spec_hash(job).as_deref(),
            self.backend.name(),
            self.runs_dataset_script(job)
                .then(|| eval_script_of(&job.instance)),
        )
    }

    /// Whether this job runs the instance's own eval script: under
    /// `--eval-script dataset`, every job that runs the instance's own
    /// tests. Jobs that choose test files (audit reruns, `select`) or
    /// confirm a pass run the spec's script, since a dataset script cannot
    /// select tests or change its runner.
    fn runs_dataset_script(&self, job: &Job) -> bool {
        self.cfg.eval_script == ScriptSource::Dataset && job.directives.is_none() && !job.confirm
    }
}

/// Fault-injection hook for the fault corpus (docs/faults.md): with
/// `PATCHGRADE_FAULT_PANIC=<instance_id>` in the environment, every
/// evaluation of that instance panics, as a bug in patchgrade would.
fn fault_injection_panic(instance_id: &str) {
    if std::env::var("PATCHGRADE_FAULT_PANIC").is_ok_and(|v| v == instance_id) {
        panic!("fault injection: PATCHGRADE_FAULT_PANIC={instance_id}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{Instance, Prediction};

    #[test]
    fn the_dataset_script_is_part_of_the_cache_key_and_spec_keys_are_unchanged() {
        let inst: Instance = serde_json::from_value(serde_json::json!({
            "instance_id": "o__r-1", "repo": "o/r", "base_commit": "abc", "eval_script": "a"
        }))
        .unwrap();
        let job = Job::new(Arc::new(inst), Prediction::new("o__r-1", "m", None));
        let key = |script| cache_key(&job, Some("p"), Some("s"), "docker", script);
        let spec = key(None);
        let (a, b, none) = (key(Some(Some("a"))), key(Some(Some("b"))), key(Some(None)));
        assert!(spec != a && a != b && a != none && spec != none);
        assert_eq!(a, key(Some(Some("a"))));
        // The spec-driven key is the one earlier versions wrote: results
        // recorded before `--eval-script` existed are still reused.
        let mut h = Sha256::new();
        for part in [
            VERSION,
            "docker",
            "o__r-1",
            "abc",
            "",
            "[[],[]]",
            "p",
            "s",
            "[null,false]",
        ] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        assert_eq!(spec, hex(&h.finalize()));
    }
}
