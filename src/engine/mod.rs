//! The engine: builds the backend and the runner for a run, executes jobs
//! with progress on the terminal, and handles Ctrl-C. Commands that run
//! tests (`run`, `validate`, `audit --rerun`, `select`) go through it.

mod leftovers;
mod progress;
mod session;

pub use session::Session;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::backend::docker::daemon::answers as daemon_answers;
use crate::backend::docker::{DockerBackend, DockerError, DockerOptions};
use crate::backend::swarm::{SwarmError, SwarmOptions};
use crate::backend::{Backend, BackendKind, LocalBackend, SwarmBackend};
use crate::key::EvalKey;
use crate::repo::{RepoCache, RepoSources};
use crate::rundir::{DockerSetup, RunDir, RunDirError, RunLock, RunMeta, RunSetup};
use crate::runner::jobs::Job;
use crate::runner::jobs::Records;
use crate::runner::schedule::Durations;
use crate::runner::{Notice, RunConfig, RunEvent, Runner};
use crate::script::dataset::ScriptSource;
use crate::spec::{SpecError, SpecSet};

/// Which backend runs the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// Docker when a daemon answers, else local.
    Auto,
    Docker,
    Local,
    /// Docker Swarm services, images from a registry.
    Swarm,
}

/// The backend that ran a run, chosen again.
impl From<BackendKind> for BackendChoice {
    fn from(kind: BackendKind) -> BackendChoice {
        match kind {
            BackendKind::Docker => BackendChoice::Docker,
            BackendKind::Local => BackendChoice::Local,
            BackendKind::Swarm => BackendChoice::Swarm,
        }
    }
}

/// Where repositories and specs come from, where caches live.
#[derive(Debug, Clone)]
pub struct Sources {
    /// Extra spec files or folders; they override the built-ins.
    pub specs: Vec<PathBuf>,
    /// Folder of local clones named `<owner>__<name>[.git]`.
    pub mirror_dir: Option<PathBuf>,
    /// URL to clone repositories missing from the cache, `{repo}` = owner/name.
    pub repo_url_template: String,
    /// Cache folder; default [`default_cache_dir`].
    pub cache_dir: Option<PathBuf>,
}

/// The user's cache folder for patchgrade.
pub fn default_cache_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(x).join("patchgrade");
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".cache/patchgrade"),
        None => std::env::temp_dir().join("patchgrade-cache"),
    }
}

impl Sources {
    pub fn cache(&self) -> PathBuf {
        self.cache_dir.clone().unwrap_or_else(default_cache_dir)
    }

    /// The built-in specs with the extra ones over them.
    pub fn spec_set(&self) -> Result<SpecSet, SpecError> {
        let mut specs = SpecSet::builtin()?;
        for p in &self.specs {
            specs.add_path(p)?;
        }
        Ok(specs)
    }

    /// The mirror cache; fast-export streams are looked for in `repos/`
    /// beside the dataset.
    pub fn repo_cache(&self, dataset: &Path) -> RepoCache {
        let ds_dir = dataset.parent().map(Path::to_path_buf).unwrap_or_default();
        RepoCache::new(RepoSources {
            cache: self.cache().join("repos"),
            mirror_dir: self.mirror_dir.clone(),
            export_dirs: vec![ds_dir.join("repos")],
            url_template: self.repo_url_template.clone(),
        })
    }
}

/// How evaluations run: backend, limits, logs, caches.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    pub backend: BackendChoice,
    pub max_workers: usize,
    /// Per-evaluation time limit.
    pub timeout: Duration,
    /// Root of the run folders (`<log_dir>/<run_id>/...`).
    pub log_dir: PathBuf,
    /// Re-evaluate even when a finished result with the same inputs exists.
    pub force: bool,
    /// Local backend: use bubblewrap where it is installed.
    pub sandbox: bool,
    pub docker: DockerOptions,
    pub swarm: SwarmOptions,
    pub sources: Sources,
    /// Where the eval script comes from: the spec (default) or the
    /// instance's own `eval_script` (Docker and swarm backends only).
    pub eval_script: ScriptSource,
    /// The reporter shows no progress and no notices (`--quiet`).
    pub quiet: bool,
}

impl EngineOptions {
    /// What run.json records of these options (`backend`: the one used).
    pub fn setup(&self, backend: BackendKind) -> RunSetup {
        let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
        let d = &self.docker;
        RunSetup {
            specs: self.sources.specs.iter().map(|p| abs(p)).collect(),
            mirror_dir: self.sources.mirror_dir.as_deref().map(abs),
            repo_url_template: Some(self.sources.repo_url_template.clone()),
            cache_dir: Some(abs(&self.sources.cache())),
            backend: Some(backend),
            sandbox: Some(self.sandbox),
            timeout_secs: Some(self.timeout.as_secs()),
            eval_script: (self.eval_script != ScriptSource::Spec).then_some(self.eval_script),
            docker: Some(DockerSetup {
                namespace: d.namespace.clone(),
                instance_image_tag: d.instance_image_tag.clone(),
                base_image: d.base_image.clone(),
                ca_cert: d.ca_cert.clone(),
                cache_level: d.cache_level,
                cache_budget: d.cache_budget.clone(),
                shelve: d.shelve,
                python_dirs: d
                    .python_dirs
                    .iter()
                    .map(|p| format!("{}={}", p.version, p.prefix.display()))
                    .collect(),
                memory: d.memory.clone(),
                cpus: d.cpus,
                pids_limit: d.pids_limit,
                build_timeout_secs: d.build_timeout,
            }),
        }
    }
}

/// The engine could not be built.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("--run-id must be non-empty and contain no '/'")]
    RunId,
    #[error(transparent)]
    Specs(#[from] SpecError),
    /// `--backend docker` and no daemon answers.
    #[error(transparent)]
    NoDaemon(DockerError),
    /// The Docker options cannot be used.
    #[error(transparent)]
    DockerConfig(DockerError),
    /// Another process runs in the same run folder (or its lock cannot be
    /// taken).
    #[error(transparent)]
    Locked(RunDirError),
    /// The swarm options cannot be used.
    #[error(transparent)]
    SwarmConfig(SwarmError),
    /// `--eval-script dataset` on the local backend.
    #[error("--eval-script dataset runs each instance's eval_script in patchgrade's Docker images, and the local backend has none{why}: use --backend docker")]
    DatasetScriptBackend { why: String },
    #[error("cannot create {what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl EngineError {
    /// The user can fix it by changing the arguments or the input files.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            EngineError::RunId
                | EngineError::Specs(_)
                | EngineError::DockerConfig(_)
                | EngineError::Locked(RunDirError::Locked { .. })
                | EngineError::SwarmConfig(_)
                | EngineError::DatasetScriptBackend { .. }
        )
    }
}

/// Whether building an engine writes run.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Meta {
    Write,
    /// An existing run.json stays as it is.
    Keep,
}

/// A runner ready to execute jobs, with its scratch space.
pub struct Engine {
    pub runner: Arc<Runner>,
    /// The backend chosen (`--backend auto` resolved).
    pub backend: BackendKind,
    /// What the engine has to say before the run (shown when it starts).
    notices: Vec<Notice>,
    /// The reporter shows nothing.
    quiet: bool,
    _work: tempfile::TempDir,
    /// Held while the engine lives: one process per run folder.
    _lock: RunLock,
}

/// What executing jobs gave.
pub struct Executed {
    pub records: Records,
    pub interrupted: bool,
    /// A second Ctrl-C: the evaluations were left running-or-not and the
    /// containers removed; the command ends now (exit 130), writing nothing.
    pub abandoned: bool,
    /// Evaluation tasks that panicked (a bug; nothing recorded for them).
    pub failed_tasks: usize,
    /// Results that could not be written (what failed, naming the path);
    /// nothing is recorded for those evaluations.
    pub unwritten: Vec<String>,
    pub elapsed: Duration,
}

impl Engine {
    /// What is known only once evaluations ran, into run.json: the
    /// interpreters the run's images got (resolved as evaluations need
    /// them) and the node that ran each evaluation (swarm). A failure to
    /// write is logged: the results are already recorded.
    fn record_after_run(
        &self,
        records: &Records,
        chosen_tests: &BTreeSet<EvalKey>,
        say: &mpsc::UnboundedSender<RunEvent>,
    ) {
        // The next run's start order: this run's seconds over what the file
        // holds (`save` merges); a run of reused results changes nothing,
        // and runs of chosen test files (audits) say nothing of the suite.
        let mut durations = Durations::empty(self.runner.durations.path());
        durations.record(records, |key| !chosen_tests.contains(key));
        if let Err(e) = durations.save() {
            let _ = say.send(RunEvent::Notice(Notice::DurationsUnsaved(e.to_string())));
        }
        let pythons: Vec<_> = self
            .runner
            .backend
            .interpreters()
            .iter()
            .map(|i| i.record())
            .collect();
        let nodes = placements(records);
        let toolchains: Vec<_> = self
            .runner
            .backend
            .toolchains()
            .iter()
            .map(|t| t.record())
            .collect();
        if pythons.is_empty() && toolchains.is_empty() && nodes.is_empty() {
            return;
        }
        let rundir = &self.runner.cfg.rundir;
        let Some(mut meta) = rundir.meta() else {
            return;
        };
        if !pythons.is_empty() {
            meta.pythons = pythons;
        }
        if !toolchains.is_empty() {
            meta.toolchains = toolchains;
        }
        meta.nodes.extend(nodes);
        if let Err(e) = rundir.write_meta(&meta) {
            tracing::warn!("cannot record the interpreters and nodes in run.json: {e}");
        }
    }

    /// An engine for a run: its run.json records this setup.
    pub fn build(
        opts: &EngineOptions,
        run_id: &str,
        dataset_path: &Path,
    ) -> Result<Engine, EngineError> {
        Engine::open(opts, run_id, dataset_path, Meta::Write)
    }

    /// An engine over a run folder whose run.json, when there is one, stays
    /// as it is: `review` reads a finished run, whose recorded setup
    /// `audit --rerun` and `select` reuse.
    pub fn attach(
        opts: &EngineOptions,
        run_id: &str,
        dataset_path: &Path,
    ) -> Result<Engine, EngineError> {
        Engine::open(opts, run_id, dataset_path, Meta::Keep)
    }

    fn open(
        opts: &EngineOptions,
        run_id: &str,
        dataset_path: &Path,
        meta: Meta,
    ) -> Result<Engine, EngineError> {
        if run_id.trim().is_empty() || run_id.contains('/') {
            return Err(EngineError::RunId);
        }
        let specs = opts.sources.spec_set()?;
        let cache = opts.sources.cache();
        let repos = opts.sources.repo_cache(dataset_path);
        let mut no_daemon = None;
        let use_docker = match opts.backend {
            BackendChoice::Local => false,
            BackendChoice::Docker | BackendChoice::Swarm => {
                daemon_answers().map_err(EngineError::NoDaemon)?;
                true
            }
            BackendChoice::Auto => match daemon_answers() {
                Ok(()) => true,
                Err(e) => {
                    tracing::info!("--backend auto: {e}; using the local backend");
                    no_daemon = Some(e.to_string());
                    false
                }
            },
        };
        // The dataset's scripts assume an image (/testbed, a conda stand-in
        // at /opt/miniconda3): refused before anything runs.
        if opts.eval_script == ScriptSource::Dataset && !use_docker {
            return Err(EngineError::DatasetScriptBackend {
                why: no_daemon
                    .map(|e| format!(" (--backend auto chose it: {e})"))
                    .unwrap_or_default(),
            });
        }
        let rundir = RunDir::new(&opts.log_dir, run_id);
        let backend = if opts.backend == BackendChoice::Swarm {
            let b = SwarmBackend::new(
                opts.docker.clone(),
                opts.swarm.clone(),
                &cache,
                &rundir,
                repos.clone(),
            )
            .map_err(EngineError::SwarmConfig)?;
            Backend::Swarm(Box::new(b))
        } else if use_docker {
            let b = DockerBackend::new(opts.docker.clone(), &cache, &rundir, repos.clone())
                .map_err(EngineError::DockerConfig)?;
            Backend::Docker(Box::new(b))
        } else {
            Backend::Local(LocalBackend::new(&cache, repos.clone(), opts.sandbox))
        };
        let lock = rundir.lock().map_err(EngineError::Locked)?;
        // Holding the lock: scratch of an earlier process on this run
        // folder is a killed run's.
        leftovers::remove_stale_scratch(&rundir.path());
        let work = leftovers::scratch(&rundir.path()).map_err(|source| EngineError::Io {
            what: "a scratch folder".into(),
            source,
        })?;
        let cfg = RunConfig {
            rundir: rundir.clone(),
            work_root: work.path().to_owned(),
            max_workers: opts.max_workers,
            timeout: opts.timeout,
            force: opts.force,
            eval_script: opts.eval_script,
        };
        let backend_kind = backend.kind();
        let durations_path = cache.join("durations.json");
        let mut notices = Vec::new();
        if let Some(e) = &no_daemon {
            notices.push(Notice::LocalFallback(e.clone()));
        }
        let durations = Durations::load(&durations_path).unwrap_or_else(|e| {
            notices.push(Notice::DurationsUnreadable(e.to_string()));
            Durations::empty(&durations_path)
        });
        let runner = Arc::new(Runner {
            cfg,
            specs,
            repos,
            backend,
            durations,
            unwritten: Default::default(),
            preparing: Default::default(),
        });
        let keep = meta == Meta::Keep && rundir.has_meta();
        rundir
            .create()
            .and_then(|()| {
                if keep {
                    return Ok(());
                }
                let mut meta = RunMeta::new(run_id, dataset_path);
                meta.setup = Some(opts.setup(backend_kind));
                rundir.write_meta(&meta)
            })
            .map_err(|source| EngineError::Io {
                what: opts.log_dir.display().to_string(),
                source,
            })?;
        Ok(Engine {
            runner,
            backend: backend_kind,
            notices,
            quiet: opts.quiet,
            _work: work,
            _lock: lock,
        })
    }

    /// For a caller that evaluates jobs as they come through
    /// [`Runner::evaluate_job`] (`serve`): the backend started as
    /// [`Engine::execute`] starts it, and what a killed earlier process on
    /// this run id left running removed.
    pub async fn start(&self) {
        self.runner.backend.start().await;
        self.runner
            .backend
            .remove_stale(self.runner.cfg.rundir.run_id())
            .await;
    }

    /// The end of such a caller's evaluations: the backend's end-of-run
    /// work (Docker: images removed per the cache level and budget).
    pub async fn finish(&self) {
        self.runner.backend.finish().await;
    }

    /// Run jobs with progress on stderr; Ctrl-C stops running evaluations
    /// (their results are not recorded), a second Ctrl-C removes the
    /// containers and returns at once, `abandoned`.
    pub async fn execute(&self, jobs: Vec<Job>) -> Executed {
        let mut session = self.session();
        let (say, cancel) = (session.events(), session.cancel());
        for notice in &self.notices {
            let _ = say.send(RunEvent::Notice(notice.clone()));
        }
        let started = Instant::now();
        let chosen_tests: BTreeSet<EvalKey> = jobs
            .iter()
            .filter(|j| j.directives.is_some())
            .map(Job::key)
            .collect();
        let running = async {
            // Before the progress display: the docker backend states its
            // cache budget; containers of a killed earlier process go.
            self.start().await;
            self.runner.clone().run(jobs, say.clone(), cancel).await
        };
        // A second Ctrl-C drops the running evaluations (their tasks are
        // aborted with the runner's task set) and returns at once.
        let Some(ran) = session.drive(running).await else {
            return Executed {
                records: Records::new(),
                interrupted: true,
                abandoned: true,
                failed_tasks: 0,
                unwritten: Vec::new(),
                elapsed: started.elapsed(),
            };
        };
        let interrupted = session.stop_watching().await;
        self.finish().await;
        self.record_after_run(&ran.records, &chosen_tests, &say);
        // The reporter ends once nothing holds a sender of it.
        drop(say);
        session.close().await;
        Executed {
            records: ran.records,
            interrupted,
            abandoned: false,
            failed_tasks: ran.failed_tasks,
            unwritten: ran.unwritten,
            elapsed: started.elapsed(),
        }
    }
}

/// `<model>/<instance>[@<sample>]` → node, for records a backend placed.
fn placements(records: &Records) -> BTreeMap<String, String> {
    records
        .iter()
        .filter_map(|(key, record)| {
            let node = record.environment.as_ref()?.node()?;
            Some((key.to_string(), node.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Environment, EvalRecord};

    #[test]
    fn placements_key_evaluations_and_skip_unplaced_ones() {
        let mut records = BTreeMap::new();
        let mut placed = EvalRecord::new("a__b-1", "m", crate::settings::BackendKind::Swarm);
        placed.environment = Some(Environment::parse(
            "image a:b sha256:1 (r:5000/a@sha256:2) on node host1/n1",
        ));
        records.insert(EvalKey::new("m", "a__b-1", None), Box::new(placed.clone()));
        records.insert(EvalKey::new("m", "a__b-2", Some("3")), Box::new(placed));
        let mut local = EvalRecord::new("a__b-4", "m", crate::settings::BackendKind::Docker);
        local.environment = Some(Environment::Venv("/env/y".into()));
        records.insert(EvalKey::new("m", "a__b-4", None), Box::new(local));
        let nodes = placements(&records);
        assert_eq!(
            nodes.into_iter().collect::<Vec<_>>(),
            vec![
                ("m/a__b-1".to_string(), "host1/n1".to_string()),
                ("m/a__b-2@3".to_string(), "host1/n1".to_string()),
            ]
        );
    }
}
