//! The engine: builds the backend and the runner for a run, executes jobs
//! with progress on the terminal, and handles Ctrl-C. Commands that run
//! tests (`run`, `validate`, `audit --rerun`, `select`) go through it.

mod progress;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::backend::docker::daemon::answers as daemon_answers;
use crate::backend::docker::{DockerBackend, DockerError, DockerOptions};
use crate::backend::swarm::{SwarmError, SwarmOptions};
use crate::backend::{Backend, LocalBackend, SwarmBackend};
use crate::outcome::EvalRecord;
use crate::repo::{RepoCache, RepoSources};
use crate::rundir::{RunDir, RunMeta};
use crate::runner::jobs::{Job, RecordKey};
use crate::runner::{RunConfig, Runner};
use crate::spec::{SpecError, SpecSet};

/// The exit status of a process stopped by Ctrl-C (128 + SIGINT); a second
/// Ctrl-C exits with it at once.
pub const EXIT_INTERRUPTED: i32 = 130;

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
    /// The swarm options cannot be used.
    #[error(transparent)]
    SwarmConfig(SwarmError),
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
                | EngineError::SwarmConfig(_)
        )
    }
}

/// A runner ready to execute jobs, with its scratch space.
pub struct Engine {
    pub runner: Arc<Runner>,
    pub backend_name: String,
    _work: tempfile::TempDir,
}

/// What executing jobs gave.
pub struct Executed {
    pub records: BTreeMap<RecordKey, EvalRecord>,
    pub interrupted: bool,
    /// Evaluation tasks that panicked (a bug; nothing recorded for them).
    pub failed_tasks: usize,
    pub elapsed: Duration,
}

impl Engine {
    pub fn build(
        opts: &EngineOptions,
        run_id: &str,
        dataset_path: &Path,
    ) -> Result<Engine, EngineError> {
        if run_id.trim().is_empty() || run_id.contains('/') {
            return Err(EngineError::RunId);
        }
        let specs = opts.sources.spec_set()?;
        let cache = opts.sources.cache();
        let repos = opts.sources.repo_cache(dataset_path);
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
                    false
                }
            },
        };
        let backend = if opts.backend == BackendChoice::Swarm {
            let b = SwarmBackend::new(
                opts.docker.clone(),
                opts.swarm.clone(),
                &cache,
                &opts.log_dir,
                repos.clone(),
                run_id,
            )
            .map_err(EngineError::SwarmConfig)?;
            Backend::Swarm(Box::new(b))
        } else if use_docker {
            let b = DockerBackend::new(
                opts.docker.clone(),
                &cache,
                &opts.log_dir,
                repos.clone(),
                run_id,
            )
            .map_err(EngineError::DockerConfig)?;
            Backend::Docker(Box::new(b))
        } else {
            Backend::Local(LocalBackend::new(&cache, repos.clone(), opts.sandbox))
        };
        let work = tempfile::Builder::new()
            .prefix("patchgrade-")
            .tempdir()
            .map_err(|source| EngineError::Io {
                what: "a scratch folder".into(),
                source,
            })?;
        let rundir = RunDir::new(&opts.log_dir, run_id);
        let cfg = RunConfig {
            rundir: rundir.clone(),
            work_root: work.path().to_owned(),
            max_workers: opts.max_workers,
            timeout: opts.timeout,
            force: opts.force,
        };
        let backend_name = backend.name().to_string();
        let runner = Arc::new(Runner {
            cfg,
            specs,
            repos,
            backend,
        });
        rundir
            .create()
            .and_then(|()| rundir.write_meta(&RunMeta::new(run_id, dataset_path)))
            .map_err(|source| EngineError::Io {
                what: opts.log_dir.display().to_string(),
                source,
            })?;
        Ok(Engine {
            runner,
            backend_name,
            _work: work,
        })
    }

    /// Run jobs with progress on stderr; Ctrl-C stops running evaluations
    /// (their results are not recorded), a second Ctrl-C exits.
    pub async fn execute(&self, jobs: Vec<Job>) -> Executed {
        let (cancel_tx, cancel_rx) = watch::channel(false);
        let interrupted = Arc::new(AtomicBool::new(false));
        let watcher = {
            let interrupted = interrupted.clone();
            let runner = self.runner.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    interrupted.store(true, Ordering::SeqCst);
                    eprintln!("\ninterrupted: stopping running evaluations (finished results are kept); Ctrl-C again to exit now");
                    let _ = cancel_tx.send(true);
                    if tokio::signal::ctrl_c().await.is_ok() {
                        // Containers would outlive the process: remove them first.
                        let _ = tokio::time::timeout(
                            Duration::from_secs(10),
                            runner.backend.kill_running(),
                        )
                        .await;
                        std::process::exit(EXIT_INTERRUPTED);
                    }
                }
            })
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let reporter = tokio::spawn(progress::terminal(rx));
        let started = Instant::now();
        let ran = self.runner.clone().run(jobs, tx, cancel_rx).await;
        let _ = reporter.await;
        watcher.abort();
        self.runner.backend.finish().await;
        Executed {
            records: ran.records,
            interrupted: interrupted.load(Ordering::SeqCst),
            failed_tasks: ran.failed_tasks,
            elapsed: started.elapsed(),
        }
    }
}
