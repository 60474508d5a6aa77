//! One evaluation, as a pipeline of named steps: write the patch, resolve
//! the spec, parse the candidate and the test patch, check out the base
//! tree, prepare the environment, apply the candidate, write the eval
//! script, run the tests, grade (and audit) the log. A step that cannot go
//! on ends the evaluation with an outcome and why.

use std::time::Instant;

use tokio::sync::watch;

use super::{Job, Runner};
use crate::backend::{Env, Workspace};
use crate::outcome::{Outcome, Timings};
use crate::patch::{apply_in_tree, ApplyStrategy, FileChange, Patch, TreeChanges};
use crate::record::EvalRecord;
use crate::rundir::eval_dir::EvalDir;
use crate::script::dataset::{self, DatasetScript};
use crate::script::EvalScript;
use crate::spec::ResolvedSpec;

mod grading;

pub(super) enum Evaluated {
    /// The record, and the per-instance log (`run_instance.log`).
    Done(Box<EvalRecord>, String),
    Cancelled,
}

/// Why the pipeline stopped before grading.
enum Halt {
    Outcome(Outcome, Option<String>),
    Cancelled,
}

fn stop(outcome: Outcome, detail: impl Into<String>) -> Halt {
    Halt::Outcome(outcome, Some(detail.into()))
}

type Step<T> = Result<T, Halt>;

/// The workspace, removed when dropped. Its checkout (`ws.tree`) exists
/// only once made: the docker backend skips it when it can.
struct ScratchTree {
    _root: tempfile::TempDir,
    ws: Workspace,
    made: bool,
}

/// An evaluation in progress: the record so far, its log and timings.
struct EvalSteps<'a> {
    runner: &'a Runner,
    job: &'a Job,
    dir: &'a EvalDir,
    record: EvalRecord,
    log: String,
    timings: Timings,
    started: Instant,
    /// The commit time of the base, for history checks (script and audit).
    base_time: Option<i64>,
    /// The memory limit the kernel OOM-killed the tests at, if it did.
    oom_killed_at: Option<String>,
    /// Said in the record's detail whatever the outcome (the log cap).
    note: Option<String>,
}

impl Runner {
    pub(super) async fn evaluate(
        &self,
        job: &Job,
        dir: &EvalDir,
        cancel: watch::Receiver<bool>,
    ) -> Evaluated {
        let mut ev = EvalSteps::new(self, job, dir);
        ev.line(format!(
            "evaluating {} for {}",
            job.instance.instance_id, job.prediction.model_name_or_path
        ));
        let ended = ev.pipeline(cancel).await;
        match ended {
            Ok((outcome, detail)) | Err(Halt::Outcome(outcome, detail)) => {
                ev.finish(outcome, detail)
            }
            Err(Halt::Cancelled) => Evaluated::Cancelled,
        }
    }
}

impl<'a> EvalSteps<'a> {
    fn new(runner: &'a Runner, job: &'a Job, dir: &'a EvalDir) -> EvalSteps<'a> {
        let record = EvalRecord {
            sample_id: job.sample.clone(),
            cache_key: runner.cache_key(job),
            patch_sha256: job.prediction.patch_sha256(),
            spec_hash: runner.spec_hash(job),
            ..EvalRecord::new(
                &job.instance.instance_id,
                &job.prediction.model_name_or_path,
                runner.backend.kind(),
            )
        };
        EvalSteps {
            runner,
            job,
            dir,
            record,
            log: String::new(),
            timings: Timings::default(),
            started: Instant::now(),
            base_time: None,
            oom_killed_at: None,
            note: None,
        }
    }

    /// A timestamped line of `run_instance.log`.
    fn line(&mut self, msg: impl AsRef<str>) {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        self.log
            .push_str(&format!("[{:.3}] {}\n", t.as_secs_f64(), msg.as_ref()));
    }

    fn finish(mut self, outcome: Outcome, detail: Option<String>) -> Evaluated {
        let detail = match (detail, self.note.take()) {
            (Some(d), Some(n)) => Some(format!("{d}; {n}")),
            (d, n) => d.or(n),
        };
        self.record.outcome = outcome;
        self.record.detail = detail;
        self.timings.total = self.started.elapsed().as_secs_f64();
        self.record.timings = self.timings.clone();
        let why = self
            .record
            .detail
            .as_deref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default();
        self.line(format!("outcome: {outcome}{why}"));
        Evaluated::Done(Box::new(self.record), self.log)
    }

    async fn pipeline(&mut self, cancel: watch::Receiver<bool>) -> Step<(Outcome, Option<String>)> {
        let empty = self.job.prediction.is_empty_patch();
        if empty && !self.job.run_without_patch {
            return Ok((Outcome::EmptyPatch, None));
        }
        let raw_patch = self.job.prediction.model_patch.clone().unwrap_or_default();
        self.write_patch(&raw_patch)?;
        let mut rs = self.resolve_spec()?;
        if self.runner.runs_dataset_script(self.job)
            && dataset::eval_script_of(&self.job.instance).is_none()
        {
            let e = dataset::MissingScripts {
                ids: vec![self.job.instance.instance_id.clone()],
            };
            return Err(stop(Outcome::EnvironmentBuildFailed, e.to_string()));
        }
        let candidate = if empty {
            None
        } else {
            Some(self.parse_candidate(&raw_patch)?)
        };
        let test_changes = self.parse_test_patch()?;
        // Docker tests run on the instance image's own tree: the host needs
        // a checkout only to apply a candidate that cannot be applied in
        // memory (the fuzzy fallback), or to say what broke a failed
        // environment in the order a checkout-first run would.
        let in_memory = self.runner.backend.applies_in_memory();
        let mut co = self.workspace(&mut rs, !in_memory).await?;
        // A Ctrl-C stops an image build too (the engine stops a build whose
        // request ends); a dropped sender (no watcher) never does.
        let mut stopped = cancel.clone();
        let prepared = tokio::select! {
            p = self.prepare_environment(&rs, &co.ws) => p,
            Ok(_) = stopped.wait_for(|c| *c) => return Err(Halt::Cancelled),
        };
        let (env, activate) = match prepared {
            Ok(v) => v,
            Err(stop) => {
                if !co.made {
                    self.make_checkout(&mut co).await?;
                }
                return Err(stop);
            }
        };
        let changed: Vec<FileChange> = candidate
            .as_ref()
            .map(|c| c.files.clone())
            .unwrap_or_default();
        self.apply_candidate(candidate, &mut co).await?;
        let set_aside = self.set_aside(&changed, &test_changes, &co.ws);
        let script =
            self.write_script(&rs, &co.ws, activate, &changed, &test_changes, set_aside)?;
        let text = self.run_tests(&env, &rs, &co.ws, &script, cancel).await?;
        let tree = co.made.then_some(co.ws.tree.as_path());
        let graded = self.grade(&rs, &text, (!empty).then_some(raw_patch.as_str()), tree);
        Ok(match self.oom_killed_at.take() {
            // The run did not finish within its limits: whatever the log
            // says, the candidate's tests did not pass (and it is not an
            // infra error, which would be retried and left out of its score).
            Some(limit) => {
                let why = format!("OOM-killed at {limit}");
                let detail = match graded.1 {
                    Some(d) => format!("{why}; {d}"),
                    None => why,
                };
                (Outcome::Unresolved, Some(detail))
            }
            None => graded,
        })
    }

    fn write_patch(&mut self, raw_patch: &str) -> Step<()> {
        self.dir.write_patch(raw_patch).map_err(|e| {
            stop(
                Outcome::InfraError,
                format!("cannot write {}: {e}", self.dir.path().display()),
            )
        })
    }

    fn resolve_spec(&mut self) -> Step<ResolvedSpec> {
        let inst = &self.job.instance;
        let rs = match self.runner.specs.for_instance(inst) {
            Ok(rs) => rs.into_owned(),
            Err(e) => return Err(stop(Outcome::EnvironmentBuildFailed, e.to_string())),
        };
        if let Some(why) = &rs.spec.unavailable {
            let detail = format!("{} version {}: {why}", inst.repo, rs.version_key);
            return Err(stop(Outcome::EnvironmentBuildFailed, detail));
        }
        self.line(format!(
            "spec {} version {} ({}), hash {}",
            inst.repo,
            rs.version_key,
            rs.source.display(),
            rs.spec.hash()
        ));
        Ok(rs)
    }

    /// The candidate parsed, unsafe paths refused, before any checkout.
    fn parse_candidate(&mut self, raw_patch: &str) -> Step<Patch> {
        match Patch::parse(raw_patch).and_then(|p| p.check_safe().map(|_| p)) {
            Ok(p) => Ok(p),
            Err(e) => {
                self.line(format!(">>>>> Patch Apply Failed: {e}"));
                Err(stop(Outcome::PatchApplyFailed, e.to_string()))
            }
        }
    }

    fn parse_test_patch(&self) -> Step<Vec<FileChange>> {
        let test_patch = &self.job.instance.test_patch;
        if test_patch.trim().is_empty() {
            return Ok(Vec::new());
        }
        Patch::parse(test_patch).map(|p| p.files).map_err(|e| {
            stop(
                Outcome::EnvironmentBuildFailed,
                format!("the instance's test_patch is unusable: {e}"),
            )
        })
    }

    /// A fresh workspace, with the base tree checked out when `checkout`;
    /// a version read from upstream tags goes to the spec's environment.
    async fn workspace(&mut self, rs: &mut ResolvedSpec, checkout: bool) -> Step<ScratchTree> {
        let inst = &self.job.instance;
        let work_root = &self.runner.cfg.work_root;
        let root = tempfile::Builder::new()
            .prefix(&format!("{}-", inst.instance_id))
            .tempdir_in(work_root)
            .map_err(|e| {
                stop(
                    Outcome::InfraError,
                    format!("cannot create a workspace in {}: {e}", work_root.display()),
                )
            })?;
        let ws = Workspace {
            root: root.path().to_owned(),
            tree: root.path().join("testbed"),
            applied: None,
        };
        let mut co = ScratchTree {
            _root: root,
            ws,
            made: false,
        };
        let version = if checkout {
            self.make_checkout(&mut co).await?
        } else {
            self.base_only().await?
        };
        if let Some(v) = version {
            self.line(format!("version from upstream tags: {v}"));
            rs.pretend_version(v);
        }
        Ok(co)
    }

    /// The base commit found in the mirror, with no checkout; returns the
    /// upstream's version tag.
    async fn base_only(&mut self) -> Step<Option<String>> {
        let inst = &self.job.instance;
        let t = Instant::now();
        let (repos, repo, commit) = (
            self.runner.repos.clone(),
            inst.repo.clone(),
            inst.base_commit.clone(),
        );
        let found = tokio::task::spawn_blocking(move || {
            repos.ensure(&repo, &[&commit])?;
            repos.base_version(&repo, &commit)
        })
        .await;
        let version = match found {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => return Err(stop(Outcome::InfraError, e.to_string())),
            Err(e) => return Err(stop(Outcome::InfraError, format!("checkout task: {e}"))),
        };
        self.timings.checkout = t.elapsed().as_secs_f64();
        self.line(format!(
            "base {}@{} found in the mirror in {:.2}s (no checkout)",
            inst.repo, inst.base_commit, self.timings.checkout
        ));
        Ok(version)
    }

    /// The base tree checked out at `co.ws.tree`; returns the upstream's
    /// version tag.
    async fn make_checkout(&mut self, co: &mut ScratchTree) -> Step<Option<String>> {
        let inst = &self.job.instance;
        let t = Instant::now();
        let (repos, repo, commit, tree) = (
            self.runner.repos.clone(),
            inst.repo.clone(),
            inst.base_commit.clone(),
            co.ws.tree.clone(),
        );
        let checkout = tokio::task::spawn_blocking(move || {
            repos.ensure(&repo, &[&commit])?;
            repos.checkout(&repo, &commit, &tree)
        })
        .await;
        let version = match checkout {
            Ok(Ok(c)) => c.version_tag,
            Ok(Err(e)) => return Err(stop(Outcome::InfraError, e.to_string())),
            Err(e) => return Err(stop(Outcome::InfraError, format!("checkout task: {e}"))),
        };
        co.made = true;
        let secs = t.elapsed().as_secs_f64();
        self.timings.checkout += secs;
        self.line(format!(
            "checked out {}@{} in {secs:.2}s",
            inst.repo, inst.base_commit
        ));
        Ok(version)
    }

    /// The environment (cached per spec) and the workspace's own setup;
    /// returns the env and its activation line.
    async fn prepare_environment(
        &mut self,
        rs: &ResolvedSpec,
        ws: &Workspace,
    ) -> Step<(Env, Option<String>)> {
        let backend = &self.runner.backend;
        let t = Instant::now();
        let env = backend
            .prepare_env(rs, &self.job.instance, self.dir.path())
            .await;
        // Its version's shared images are built (or could not be): a free
        // worker may start another evaluation of that version now.
        self.runner.preparing.done(&self.job.key());
        let env = match env {
            Ok(env) => env,
            Err(e) => {
                let outcome = if e.is_infra() {
                    Outcome::InfraError
                } else {
                    Outcome::EnvironmentBuildFailed
                };
                return Err(stop(outcome, e.to_string()));
            }
        };
        self.record.environment = Some(env.environment());
        let activate = match backend.prepare_workspace(&env, rs, ws).await {
            Ok(a) => a,
            Err(e) => {
                // The workspace is removed afterwards: keep its setup logs.
                self.dir.keep_workspace_logs(&ws.root);
                return Err(stop(Outcome::EnvironmentBuildFailed, e.to_string()));
            }
        };
        self.timings.env = t.elapsed().as_secs_f64();
        Ok((env, activate))
    }

    /// The candidate applied in memory to the base tree when there is no
    /// checkout and that is decidable there, else on the checkout (made
    /// now if needed); none: the base tree as is.
    async fn apply_candidate(
        &mut self,
        candidate: Option<Patch>,
        co: &mut ScratchTree,
    ) -> Step<()> {
        let t = Instant::now();
        if !co.made {
            let Some(c) = candidate.clone() else {
                co.ws.applied = Some(TreeChanges::default());
                self.line("no candidate patch: testing the base tree");
                return Ok(());
            };
            let inst = &self.job.instance;
            let mirror = self.runner.repos.mirror_path(&inst.repo);
            let commit = inst.base_commit.clone();
            let applied =
                tokio::task::spawn_blocking(move || apply_in_tree(&mirror, &commit, &c)).await;
            if let Ok(Some(changes)) = applied {
                self.timings.apply = t.elapsed().as_secs_f64();
                self.record.apply_strategy = Some(ApplyStrategy::Strict);
                self.line(format!(">>>>> Applied Patch ({:?})", ApplyStrategy::Strict));
                self.line(format!(
                    "applied in memory: {} files written, {} deleted",
                    changes.write.len(),
                    changes.delete.len()
                ));
                co.ws.applied = Some(changes);
                return Ok(());
            }
            self.line("the candidate does not apply strictly in memory: applying on a checkout");
            self.make_checkout(co).await?;
        }
        let t = Instant::now();
        let tree = co.ws.tree.clone();
        let applied = match candidate {
            Some(c) => {
                tokio::task::spawn_blocking(move || crate::patch::apply(&tree, &c).map(Some)).await
            }
            None => Ok(Ok(None)),
        };
        self.timings.apply = t.elapsed().as_secs_f64();
        match applied {
            Ok(Ok(None)) => self.line("no candidate patch: testing the base tree"),
            Ok(Ok(Some(strategy))) => {
                self.record.apply_strategy = Some(strategy);
                self.line(format!(">>>>> Applied Patch ({strategy:?})"));
            }
            Ok(Err(e)) => {
                self.line(format!(">>>>> Patch Apply Failed: {e}"));
                return Err(stop(Outcome::PatchApplyFailed, e.to_string()));
            }
            Err(e) => return Err(stop(Outcome::InfraError, format!("apply task: {e}"))),
        }
        Ok(())
    }

    fn write_script(
        &mut self,
        rs: &ResolvedSpec,
        ws: &Workspace,
        activate: Option<String>,
        changed: &[FileChange],
        test_changes: &[FileChange],
        set_aside: String,
    ) -> Step<String> {
        let inst = &self.job.instance;
        self.base_time = crate::audit::history::base_commit_time(
            &self.runner.repos.mirror_path(&inst.repo),
            &inst.base_commit,
        );
        let script = if self.runner.runs_dataset_script(self.job) {
            self.dataset_script(rs)?
        } else {
            self.spec_script(rs, ws, activate, changed, test_changes, set_aside)
        };
        self.dir
            .write_script(&script)
            .map_err(|e| stop(Outcome::InfraError, format!("cannot write eval.sh: {e}")))?;
        Ok(script)
    }

    fn spec_script(
        &self,
        rs: &ResolvedSpec,
        ws: &Workspace,
        activate: Option<String>,
        changed: &[FileChange],
        test_changes: &[FileChange],
        set_aside: String,
    ) -> String {
        let inst = &self.job.instance;
        EvalScript {
            testbed: &self.runner.backend.testbed(ws),
            activate,
            spec: &rs.spec,
            install: self.runner.backend.install_step(&rs.spec, changed),
            test_patch: &inst.test_patch,
            test_changes,
            directives: self.job.directives.clone().or_else(|| {
                crate::script::covering_directives(&inst.covering_tests, rs.spec.test_directives)
            }),
            base_time: self.base_time,
            set_aside: Some(set_aside),
            test_cmd: self.job.test_cmd(&rs.spec),
        }
        .render()
    }

    /// The candidate's test machinery set aside (`runner::machinery`):
    /// recorded and logged; returns the script's commands for it.
    fn set_aside(
        &mut self,
        changed: &[FileChange],
        tests: &[FileChange],
        ws: &Workspace,
    ) -> String {
        let inst = &self.job.instance;
        let mirror = self.runner.repos.mirror_path(&inst.repo);
        let (set, commands) = super::machinery::set_aside(
            &mirror,
            &inst.base_commit,
            &inst.patch,
            changed,
            tests,
            ws,
        );
        for s in &set {
            let action = crate::script::machinery::action_name(s.action);
            self.line(format!("test machinery: {} {action}", s.path));
        }
        self.record.set_aside = set;
        commands
    }

    /// The instance's own eval script in its wrapper (`--eval-script
    /// dataset`); the record says which script ran.
    fn dataset_script(&mut self, rs: &ResolvedSpec) -> Step<String> {
        let job = self.job;
        let inst = &job.instance;
        let Some(text) = dataset::eval_script_of(inst) else {
            let e = dataset::MissingScripts {
                ids: vec![inst.instance_id.clone()],
            };
            return Err(stop(Outcome::EnvironmentBuildFailed, e.to_string()));
        };
        let used = dataset::used(text);
        self.line(format!(
            "eval script: the dataset's eval_script (sha256 {})",
            used.sha256
        ));
        self.record.eval_script = Some(used);
        // The engine refuses `--eval-script dataset` on the local backend.
        let Some(layout) = self.runner.backend.image_layout() else {
            return Err(stop(
                Outcome::EnvironmentBuildFailed,
                "the dataset's eval_script runs in images; this backend has none",
            ));
        };
        Ok(DatasetScript {
            testbed: layout.testbed,
            venv: layout.venv,
            base_commit: &inst.base_commit,
            activate: &layout.activate,
            script: text,
            spec: &rs.spec,
            base_time: self.base_time,
        }
        .render())
    }

    /// Runs the script; returns the test log (written to the folder).
    async fn run_tests(
        &mut self,
        env: &Env,
        rs: &ResolvedSpec,
        ws: &Workspace,
        script: &str,
        cancel: watch::Receiver<bool>,
    ) -> Step<String> {
        let timeout = self.job.overrides.timeout(self.runner.cfg.timeout);
        let t = Instant::now();
        let out = self
            .runner
            .backend
            .run(env, rs, ws, script, timeout, cancel)
            .await
            .map_err(|e| stop(Outcome::InfraError, e.to_string()))?;
        if let Some(node) = self.runner.backend.placement(ws) {
            self.line(format!("ran on node {node}"));
            if let Some(env) = self.record.environment.as_mut() {
                env.set_node(&node);
            }
        }
        self.timings.tests = t.elapsed().as_secs_f64();
        self.timings.container = out.container.clone();
        // Setup output (install, venv) is worth reading whatever the verdict.
        self.dir.keep_workspace_logs(&ws.root);
        if out.cancelled {
            return Err(Halt::Cancelled);
        }
        if let Some(cap) = out.capped {
            let msg = format!(
                "test output capped at {} bytes ({} bytes dropped)",
                cap.cap, cap.dropped
            );
            self.line(&msg);
            self.note = Some(msg);
        }
        if let Some(limit) = &out.oom_killed_at {
            self.line(format!(
                "the kernel OOM-killed a test process at --memory {limit}"
            ));
            self.oom_killed_at = Some(limit.clone());
        }
        // Tests may print anything; the log is text for grading, lossy.
        let mut text = String::from_utf8_lossy(&out.log).into_owned();
        if out.timed_out {
            text.push_str(&format!(
                "\n\nTimeout error: {} seconds exceeded.\n",
                timeout.as_secs()
            ));
        }
        self.dir.write_test_log(&text).map_err(|e| {
            stop(
                Outcome::InfraError,
                format!(
                    "cannot write {}: {e}",
                    self.dir.path().join("test_output.txt").display()
                ),
            )
        })?;
        self.line(format!(
            "eval script finished in {:.2}s",
            out.elapsed.as_secs_f64()
        ));
        if out.timed_out {
            return Err(stop(
                Outcome::TestsTimedOut,
                format!("exceeded --timeout {}s", timeout.as_secs()),
            ));
        }
        Ok(text)
    }
}
