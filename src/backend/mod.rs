//! Where the eval script runs: on the host (local) or in containers (docker).
//!
//! A backend prepares an environment for a spec (cached, shared across
//! instances) and runs one eval script against one candidate tree with a
//! timeout. Everything else (checkout, patching, grading, reports) is the
//! runner's and is the same for every backend.

pub mod local;

use std::path::PathBuf;
use std::time::Duration;

use crate::dataset::Instance;
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
}

/// Where an evaluation's files live while it runs.
#[derive(Debug)]
pub struct Workspace {
    /// Root of this evaluation's scratch space (removed afterwards).
    pub root: PathBuf,
    /// The candidate tree (a git checkout).
    pub tree: PathBuf,
}

pub use local::{LocalBackend, LocalEnv};

/// The backends patchgrade can run on.
#[derive(Debug)]
pub enum Backend {
    Local(LocalBackend),
}

/// A prepared environment, by backend.
#[derive(Debug, Clone)]
pub enum Env {
    Local(LocalEnv),
}

impl Env {
    /// What to record in reports: env path or image id.
    pub fn describe(&self) -> String {
        match self {
            Env::Local(e) => e.describe(),
        }
    }
}

impl Backend {
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Local(_) => "local",
        }
    }

    /// The path at which the tree is seen by the eval script.
    pub fn testbed(&self, ws: &Workspace) -> String {
        match self {
            Backend::Local(_) => ws.tree.display().to_string(),
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
        }
    }
}
