//! The swarm backend: every evaluation is a Docker Swarm service in
//! `replicated-job` mode (one task, never restarted), scheduled by the swarm
//! on whichever node has the CPU and memory it reserves.
//!
//! Images are made by the docker backend on the engine patchgrade talks to
//! (`DOCKER_HOST`, a swarm manager), pushed to `--registry` and referenced
//! by digest, so every node runs the same bytes. The candidate's changed
//! files and the eval script (the docker backend's run archive) go in as
//! swarm configs; the output comes back through the task's logs.
//!
//! - [`registry`]: tagging and pushing an instance image, its digest.
//! - [`jobs`]: one evaluation's configs and service, from creation to
//!   removal, and where it ran.
//! - [`cluster`]: the networks the services join, the removal of what a
//!   killed run left, node names.
//! - [`objects`]: services, configs and networks, and their removal.

pub mod cluster;
pub mod jobs;
pub mod objects;
pub mod registry;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

use bollard::Docker;

use super::docker::engine::{ApiError, Live, Removable};
use super::docker::{parse_size, DockerBackend, DockerEnv, DockerError, DockerOptions};
use super::{EnvError, InfraError};
use crate::dataset::Instance;
use crate::record::{Environment, ImageEnv};
use crate::repo::RepoCache;
use crate::rundir::RunDir;
use crate::spec::ResolvedSpec;

/// Options of the swarm backend (the command line's swarm flags).
#[derive(Debug, Clone, Default)]
pub struct SwarmOptions {
    /// `HOST:PORT` of the registry every node pulls from.
    pub registry: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SwarmError {
    #[error("--backend swarm needs --registry HOST:PORT (a registry every node can reach)")]
    NoRegistry,
    #[error("--registry {0:?}: expected HOST:PORT")]
    BadRegistry(String),
    #[error("the engine at DOCKER_HOST is not a swarm manager (swarm state {state}); run `docker swarm init` there or point DOCKER_HOST at a manager")]
    NotManager { state: String },
    #[error("no ready node of the swarm can reserve --cpus {cpus} --memory {memory_mib}m (nodes: {nodes})")]
    NoNodeFits {
        cpus: f64,
        memory_mib: i64,
        nodes: String,
    },
    #[error(transparent)]
    Engine(#[from] ApiError),
    #[error("pushing {image} to {registry} failed: {reason}")]
    Push {
        image: String,
        registry: String,
        reason: String,
    },
    #[error("the run archive is {bytes} bytes; swarm configs carry at most {max} bytes ({chunks} configs of {chunk} bytes)")]
    TooLarge {
        bytes: usize,
        max: usize,
        chunks: usize,
        chunk: usize,
    },
    #[error(
        "the evaluation's task on node {node} ended without running the script: {state}: {reason}"
    )]
    TaskLost {
        node: String,
        state: String,
        reason: String,
    },
    #[error("node {node} left the swarm (status {status}) while it ran the evaluation")]
    NodeLeft { node: String, status: String },
    #[error("the task could not unpack its run archive: {0}")]
    Unpack(String),
    #[error(transparent)]
    Docker(#[from] DockerError),
}

impl From<SwarmError> for InfraError {
    fn from(e: SwarmError) -> InfraError {
        InfraError::Other(e.to_string())
    }
}

impl From<SwarmError> for EnvError {
    fn from(e: SwarmError) -> EnvError {
        match e {
            SwarmError::Docker(d) => d.into(),
            SwarmError::NoRegistry | SwarmError::BadRegistry(_) | SwarmError::NoNodeFits { .. } => {
                EnvError::Other(e.to_string())
            }
            e => EnvError::Infra(e.to_string()),
        }
    }
}

/// The data behind a mutex; poison is ignored (sets and maps of names).
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A prepared swarm environment: the instance image and its registry
/// reference by digest.
#[derive(Debug, Clone)]
pub struct SwarmEnv {
    pub image: DockerEnv,
    /// `HOST:PORT/name@sha256:...`: what the services run.
    pub reference: String,
}

impl SwarmEnv {
    /// What the record says of it: the image, by its registry reference.
    pub fn environment(&self) -> Environment {
        Environment::Image(ImageEnv {
            image: self.image.image.clone(),
            id: self.image.id.clone(),
            digest: Some(self.reference.clone()),
            python: None,
            toolchains: Vec::new(),
            node: None,
        })
    }
}

/// What this process labels its services and configs with, so that a
/// later run can tell its leftovers from another live run's.
#[derive(Debug, Clone)]
struct Owner {
    host: String,
    pid: u32,
}

#[derive(Debug)]
pub struct SwarmBackend {
    /// Builds the images, on the same engine.
    docker: DockerBackend,
    conn: tokio::sync::OnceCell<Docker>,
    /// Whether the manager's engine removes a deleted `replicated-job`
    /// service's tasks (23.0 and later, swarmkit#3112); before, jobs left
    /// their containers behind, so one-replica services that never
    /// restart are used instead.
    jobs: std::sync::atomic::AtomicBool,
    registry: String,
    memory: i64,
    nano_cpus: i64,
    pids_limit: i64,
    owner: Owner,
    /// Registry references by local image id, pushed once per run.
    pushed: Mutex<HashMap<String, String>>,
    push_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Each layer pushed in this run (true once in the registry); held
    /// while a push sends it.
    layer_gates: Mutex<HashMap<String, Arc<tokio::sync::Mutex<bool>>>>,
    /// Services and configs alive now, removed by `kill_running`.
    live: Live<objects::Object>,
    /// Services removed in this run, whose task containers the nodes
    /// remove afterwards (waited for at the end of the run).
    removed: Arc<Mutex<Vec<String>>>,
    /// Node that ran each workspace's evaluation, taken by `placement`.
    placed: Mutex<HashMap<PathBuf, String>>,
    /// Node hostnames by id.
    nodes: Mutex<HashMap<String, String>>,
    seq: AtomicU64,
}

impl SwarmBackend {
    /// The interpreters the images got (they are built by the Docker backend).
    pub fn interpreters(&self) -> Vec<crate::python::Interpreter> {
        self.docker.interpreters()
    }

    /// Where the image events of the docker backend that builds the images go.
    pub fn report_to(&self, events: Option<crate::backend::docker::events::ImageEvents>) {
        self.docker.report_to(events);
    }

    /// The toolchains the images got (built by the Docker backend).
    pub fn toolchains(&self) -> Vec<crate::toolchain::Toolchain> {
        self.docker.toolchains()
    }
}

impl SwarmBackend {
    pub fn new(
        args: DockerOptions,
        swarm: SwarmOptions,
        cache: &Path,
        rundir: &RunDir,
        repos: RepoCache,
    ) -> Result<SwarmBackend, SwarmError> {
        let registry = swarm.registry.ok_or(SwarmError::NoRegistry)?;
        let valid = registry
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && !h.contains('/') && p.parse::<u16>().is_ok());
        if !valid {
            return Err(SwarmError::BadRegistry(registry));
        }
        let memory = parse_size(&args.memory)?;
        // Not clamped to this host's cores: the tasks run on other nodes.
        let nano_cpus = (args.cpus * 1e9) as i64;
        let pids_limit = args.pids_limit;
        let docker = DockerBackend::new(args, cache, rundir, repos)?;
        Ok(SwarmBackend {
            docker,
            conn: tokio::sync::OnceCell::new(),
            jobs: std::sync::atomic::AtomicBool::new(false),
            registry,
            memory,
            nano_cpus,
            pids_limit,
            owner: Owner {
                host: cluster::hostname(),
                pid: std::process::id(),
            },
            pushed: Mutex::default(),
            push_locks: Mutex::default(),
            layer_gates: Mutex::default(),
            live: Arc::default(),
            removed: Arc::default(),
            placed: Mutex::default(),
            nodes: Mutex::default(),
            seq: AtomicU64::new(0),
        })
    }

    /// The manager's connection; on first use, checks that it is a manager,
    /// removes what killed runs of this host left and makes the networks.
    async fn docker(&self) -> Result<&Docker, SwarmError> {
        self.conn
            .get_or_try_init(|| async {
                let docker = super::docker::daemon::connect().await?;
                let major = cluster::check_manager(&docker).await?;
                self.jobs
                    .store(major >= 23, std::sync::atomic::Ordering::Relaxed);
                cluster::check_capacity(&docker, self.nano_cpus, self.memory).await?;
                cluster::remove_stale(&docker, &self.owner).await;
                Ok(docker)
            })
            .await
    }

    pub async fn prepare_env(
        &self,
        spec: &ResolvedSpec,
        inst: &Instance,
        log_dir: &Path,
    ) -> Result<SwarmEnv, EnvError> {
        let image = self.docker.prepare_env(spec, inst, log_dir).await?;
        let reference = self.publish(&image).await?;
        Ok(SwarmEnv { image, reference })
    }

    /// Start of a run (or of `serve`): the image engine connects, then the
    /// manager is checked and what killed runs of this host left (services,
    /// configs, networks) is removed, before any evaluation. A failure is
    /// logged here and met again, as the evaluations' error, at first use.
    pub async fn start(&self) {
        self.docker.start().await;
        if let Err(e) = self.docker().await {
            tracing::warn!("the swarm at the start: {e}");
        }
    }

    /// The node that ran the evaluation in `ws`, once.
    pub fn placement(&self, ws: &super::Workspace) -> Option<String> {
        locked(&self.placed).remove(&ws.root)
    }

    /// End of run: services and configs still alive are removed, then the
    /// registry tags of this run and the docker backend's image cleanup.
    pub async fn finish(&self) {
        self.kill_running().await;
        if let Some(docker) = self.conn.get() {
            let removed: Vec<String> = locked(&self.removed).drain(..).collect();
            jobs::wait_gone(docker, &removed, self.owner.pid).await;
        }
        // Tags first: a registry tag would keep an image the docker
        // backend's cleanup removes.
        if let Some(docker) = self.conn.get() {
            let tags: Vec<String> = locked(&self.pushed).values().cloned().collect();
            for reference in tags {
                registry::untag(docker, &reference).await;
            }
        }
        self.docker.finish().await;
    }

    /// Remove every service, config and network of this run (second
    /// Ctrl-C, end).
    pub async fn kill_running(&self) {
        let Some(docker) = self.conn.get() else {
            return;
        };
        let objects: Vec<objects::Object> = locked(&self.live).drain().collect();
        objects::Object::remove_all(docker, objects).await;
    }
}
