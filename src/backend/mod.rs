//! Where the eval script runs: on the host (local), in containers (docker)
//! or in swarm services across machines (swarm).
//!
//! A backend prepares an environment for a spec (cached, shared across
//! instances) and runs one eval script against one candidate tree with a
//! timeout. Everything else (checkout, patching, grading, reports) is the
//! runner's and is the same for every backend.

pub mod docker;
pub mod local;
mod setup_files;
pub mod swarm;

use std::path::PathBuf;
use std::time::Duration;

/// Spec `blackhole_routes`, as shell run with NET_ADMIN inside the test's
/// own network namespace: packets to non-local addresses vanish (connects
/// time out, as the tests expect) instead of failing at once; the name
/// servers alone stay unreachable, or every name lookup would wait out the
/// resolver's timeouts (20 s of psf__requests-3362's test run).
pub const BLACKHOLE_ROUTES: &str = "ip route add default dev lo 2>/dev/null; \
     for ns in $(awk '/^nameserver/ {print $2}' /etc/resolv.conf 2>/dev/null); do \
     ip route add unreachable \"$ns\" 2>/dev/null; done";

use crate::dataset::Instance;
use crate::record::Environment;
use crate::spec::ResolvedSpec;

#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("{0}")]
    Unsupported(String),
    #[error("no Python {version} interpreter found on PATH (tried {tried})")]
    PythonNotFound { version: String, tried: String },
    #[error("environment setup failed: `{command}` exited {status}; see {log}")]
    Command {
        command: String,
        status: String,
        log: PathBuf,
    },
    #[error("environment setup failed: {0}")]
    Other(String),
    /// The engine or host failed, not the environment: an infra error,
    /// retried once by the runner.
    #[error("{0}")]
    Infra(String),
}

impl EnvError {
    /// Whether the failure says nothing about the environment itself.
    pub fn is_infra(&self) -> bool {
        matches!(self, EnvError::Infra(_))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InfraError {
    #[error("io error at {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    /// bubblewrap could not set the sandbox up: the script never ran, so
    /// its (empty) log says nothing of the candidate.
    #[error("the sandbox did not start: {message}")]
    SandboxFailed { message: String },
    #[error("{0}")]
    Other(String),
}

/// The result of running one eval script.
#[derive(Debug)]
pub struct RunOutput {
    /// stdout and stderr interleaved, as written.
    pub log: Vec<u8>,
    pub timed_out: bool,
    /// Whether the run was stopped by an interrupt (no result to record).
    pub cancelled: bool,
    pub elapsed: Duration,
    /// Docker: the container's phases.
    pub container: Option<crate::outcome::ContainerTimings>,
    /// The kernel OOM-killed a process of the run: the memory limit it hit,
    /// as given (`--memory`).
    pub oom_killed_at: Option<String>,
    /// Output past the log cap was dropped.
    pub capped: Option<LogCap>,
}

/// The test log hit its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogCap {
    /// Bytes kept.
    pub cap: usize,
    /// Bytes dropped past it.
    pub dropped: u64,
}

/// Where an evaluation's files live while it runs.
#[derive(Debug)]
pub struct Workspace {
    /// Root of this evaluation's scratch space (removed afterwards).
    pub root: PathBuf,
    /// The candidate tree (a git checkout); absent while `applied` is set.
    pub tree: PathBuf,
    /// The candidate applied in memory to the base tree (docker, when no
    /// checkout was needed): what goes to the container instead of `tree`.
    pub applied: Option<crate::patch::TreeChanges>,
}

pub use docker::{DockerBackend, DockerEnv};
pub use local::{LocalBackend, LocalEnv};
pub use setup_files::{
    environment_for, filter_requirements, read_requirements, source_failed, source_mirror, EnvFile,
};
pub use swarm::{SwarmBackend, SwarmEnv};

pub use crate::settings::{BackendKind, UnknownBackend};

/// The backends patchgrade can run on.
#[derive(Debug)]
pub enum Backend {
    Local(LocalBackend),
    Docker(Box<DockerBackend>),
    Swarm(Box<SwarmBackend>),
}

/// A prepared environment, by backend.
#[derive(Debug, Clone)]
pub enum Env {
    Local(LocalEnv),
    Docker(DockerEnv),
    Swarm(SwarmEnv),
}

impl Env {
    /// What to record in reports: env path or image id.
    pub fn environment(&self) -> Environment {
        match self {
            Env::Local(e) => e.environment(),
            Env::Docker(e) => e.environment(),
            Env::Swarm(e) => e.environment(),
        }
    }
}

impl Backend {
    pub fn kind(&self) -> BackendKind {
        match self {
            Backend::Local(_) => BackendKind::Local,
            Backend::Docker(_) => BackendKind::Docker,
            Backend::Swarm(_) => BackendKind::Swarm,
        }
    }

    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// The interpreters the run's Docker images got, one per spec `python`
    /// value (for run.json: `Interpreter::record()` of each); empty for the
    /// local backend, whose venvs use the host's `pythonX.Y`.
    pub fn interpreters(&self) -> Vec<crate::python::Interpreter> {
        match self {
            Backend::Local(_) => Vec::new(),
            Backend::Docker(b) => b.interpreters(),
            Backend::Swarm(b) => b.interpreters(),
        }
    }

    /// Whether the candidate may be applied in memory, without a checkout:
    /// the docker backend sends only the changed files into the image's own
    /// tree.
    pub fn applies_in_memory(&self) -> bool {
        matches!(self, Backend::Docker(_))
    }

    /// Where the images of a container backend keep the tree and the env;
    /// `None` for the local backend.
    pub fn image_layout(&self) -> Option<docker::ImageLayout> {
        match self {
            Backend::Local(_) => None,
            Backend::Docker(_) | Backend::Swarm(_) => Some(docker::ImageLayout::of_images()),
        }
    }

    /// The toolchains the run's Docker images got, one per spec
    /// `toolchains:` entry (for run.json); empty for the local backend.
    pub fn toolchains(&self) -> Vec<crate::toolchain::Toolchain> {
        match self {
            Backend::Local(_) => Vec::new(),
            Backend::Docker(b) => b.toolchains(),
            Backend::Swarm(b) => b.toolchains(),
        }
    }

    /// The eval's install step ([`crate::script::install_step`]); in a
    /// container backend, a `snapshot_build` spec's rebuild goes through
    /// the caches its images hold.
    pub fn install_step(
        &self,
        spec: &crate::spec::Spec,
        candidate: &[crate::patch::FileChange],
    ) -> Option<String> {
        let step = crate::script::install_step(spec, candidate)?;
        Some(match self {
            Backend::Docker(_) | Backend::Swarm(_) => {
                docker::images::setup::container_install_step(spec, step)
            }
            Backend::Local(_) => step,
        })
    }

    /// The path at which the tree is seen by the eval script.
    pub fn testbed(&self, ws: &Workspace) -> String {
        match self {
            Backend::Local(_) => ws.tree.display().to_string(),
            Backend::Docker(_) | Backend::Swarm(_) => docker::images::TESTBED.to_string(),
        }
    }

    pub async fn prepare_env(
        &self,
        spec: &ResolvedSpec,
        inst: &Instance,
        log_dir: &std::path::Path,
    ) -> Result<Env, EnvError> {
        match self {
            Backend::Local(b) => b.prepare_env(spec, inst, log_dir).await.map(Env::Local),
            Backend::Docker(b) => b.prepare_env(spec, inst, log_dir).await.map(Env::Docker),
            Backend::Swarm(b) => b.prepare_env(spec, inst, log_dir).await.map(Env::Swarm),
        }
    }

    /// Per-evaluation setup inside the workspace before the candidate patch
    /// is applied (e.g. an overlay venv, pre_install commands).
    pub async fn prepare_workspace(
        &self,
        env: &Env,
        spec: &ResolvedSpec,
        ws: &Workspace,
    ) -> Result<Option<String>, EnvError> {
        match (self, env) {
            (Backend::Local(b), Env::Local(e)) => b.prepare_workspace(e, spec, ws).await,
            // pre_install and install ran in the instance image.
            (Backend::Docker(_), Env::Docker(_)) | (Backend::Swarm(_), Env::Swarm(_)) => {
                Ok(Some(docker::images::activate_line()))
            }
            _ => Err(EnvError::Other("environment of another backend".into())),
        }
    }

    pub async fn run(
        &self,
        env: &Env,
        spec: &ResolvedSpec,
        ws: &Workspace,
        script: &str,
        timeout: Duration,
        cancel: tokio::sync::watch::Receiver<bool>,
    ) -> Result<RunOutput, InfraError> {
        match (self, env) {
            (Backend::Local(b), Env::Local(e)) => b.run(e, spec, ws, script, timeout, cancel).await,
            (Backend::Docker(b), Env::Docker(e)) => {
                b.run(e, spec, ws, script, timeout, cancel).await
            }
            (Backend::Swarm(b), Env::Swarm(e)) => b.run(e, spec, ws, script, timeout, cancel).await,
            _ => Err(InfraError::Other("environment of another backend".into())),
        }
    }

    /// Where the docker and swarm backends send their image events from
    /// now on (`None`: nowhere); the local backend has none.
    pub fn report_to(&self, events: Option<docker::events::ImageEvents>) {
        match self {
            Backend::Docker(b) => b.report_to(events),
            Backend::Swarm(b) => b.report_to(events),
            Backend::Local(_) => {}
        }
    }

    /// Start of a run: the docker backend connects (and says its cache
    /// budget); the swarm backend also checks its manager and removes what
    /// killed runs of this host left. A failure here is met again, and
    /// reported, at first use.
    pub async fn start(&self) {
        match self {
            Backend::Docker(b) => b.start().await,
            Backend::Swarm(b) => b.start().await,
            Backend::Local(_) => {}
        }
    }

    /// End of a run: the docker backend removes images per `--cache-level`.
    pub async fn finish(&self) {
        match self {
            Backend::Docker(b) => b.finish().await,
            Backend::Swarm(b) => b.finish().await,
            Backend::Local(_) => {}
        }
    }

    /// Where the evaluation in `ws` ran, for backends with several machines
    /// (asked once, after `run`).
    pub fn placement(&self, ws: &Workspace) -> Option<String> {
        match self {
            Backend::Swarm(b) => b.placement(ws),
            _ => None,
        }
    }

    /// Wait (at most `limit`) until the engine answers; true when it does.
    /// The local backend is always there.
    pub async fn wait_ready(&self, limit: Duration) -> bool {
        match self {
            Backend::Local(_) => true,
            // The swarm's manager is the engine at DOCKER_HOST.
            Backend::Docker(_) | Backend::Swarm(_) => docker::daemon::wait_answers(limit).await,
        }
    }

    /// Remove what killed earlier processes of this run id left running
    /// (their containers, found by label). Only call it holding the run
    /// folder's lock.
    pub async fn remove_stale(&self, run_id: &str) {
        if let Backend::Docker(b) = self {
            b.remove_stale(run_id).await;
        }
    }

    /// Stop everything running now (second Ctrl-C): removes containers.
    pub async fn kill_running(&self) {
        match self {
            Backend::Docker(b) => b.kill_running().await,
            Backend::Swarm(b) => b.kill_running().await,
            Backend::Local(_) => {}
        }
    }
}
