//! The docker backend: every evaluation runs in a container of an image
//! built for its instance, through the Docker Engine API (bollard), with no
//! registry needed.
//!
//! - [`daemon`]: finding and connecting to the engine.
//! - [`images`]: the image tiers, their plans and how they are built, pulled
//!   or bootstrapped.
//! - [`containers`]: one evaluation's container, from creation to removal.
//! - [`archive`]: the tars sent to the engine (build contexts, the
//!   candidate's changes).
//!
//! This module holds the backend's state and options, preparing an
//! environment and the cleanup at the end of a run.

pub mod archive;
pub mod capped;
pub mod containers;
pub mod daemon;
pub mod exits;
pub mod images;
pub mod stale;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bollard::query_parameters::{ListImagesOptionsBuilder, RemoveImageOptionsBuilder};
use bollard::Docker;

use super::{EnvError, InfraError};
use crate::repo::RepoCache;
use images::plans::Root;
use images::{CacheLevel, ImageError, Suite, Tier};

/// Limit on one short engine call (create, upload, start, remove, inspect).
const API_TIMEOUT: Duration = Duration::from_secs(120);

/// Options of the Docker backend (the command line's Docker flags, in `cli`).
#[derive(Debug, Clone)]
pub struct DockerOptions {
    /// Prebuilt instance images NS/sweb.eval.<arch>.<id>:<tag> instead of building.
    pub namespace: Option<String>,
    /// Tag of the `namespace` instance images.
    pub instance_image_tag: String,
    /// Image base images start from (`{suite}` replaced); `none` bootstraps.
    pub base_image: String,
    /// CA bundle installed in every image; `None`: from the environment.
    pub ca_cert: Option<String>,
    pub cache_level: CacheLevel,
    /// Also remove images that existed before the run (per `cache_level`).
    pub clean: bool,
    pub force_rebuild: bool,
    /// Memory limit of each test container (e.g. 4g, 512m).
    pub memory: String,
    pub cpus: f64,
    pub pids_limit: i64,
    /// Time limit of one image build, seconds.
    pub build_timeout: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    #[error("no Docker daemon answers at {endpoint}: {reason}")]
    Unreachable { endpoint: String, reason: String },
    #[error("docker {op}: {source}")]
    Api {
        op: String,
        source: bollard::errors::Error,
    },
    #[error("docker {op} did not answer within {secs}s")]
    Timeout { op: String, secs: u64 },
    #[error("building image {image} failed: {reason}; see {log}")]
    Build {
        image: String,
        reason: String,
        log: PathBuf,
    },
    #[error("bootstrapping a Debian {suite} root failed: {reason}; see {log}")]
    Bootstrap {
        suite: &'static str,
        reason: String,
        log: PathBuf,
    },
    #[error("image {image} is not in the engine and pulling it failed: {reason}")]
    Pull { image: String, reason: PullFailure },
    #[error("io error at {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid docker option: {0}")]
    Config(String),
    #[error(transparent)]
    Image(#[from] ImageError),
}

/// Why a pull gave no image. The registry's error is kept in the message,
/// not as a source, so that it is printed once.
#[derive(Debug, thiserror::Error)]
pub enum PullFailure {
    #[error("{error}")]
    Registry { error: bollard::errors::Error },
    #[error("no answer within {secs}s")]
    Timeout { secs: u64 },
    #[error("absent after the pull")]
    Absent,
}

impl DockerError {
    /// Whether the failure is the engine's (worth a retry) rather than the
    /// environment's.
    pub fn is_infra(&self) -> bool {
        matches!(
            self,
            DockerError::Unreachable { .. }
                | DockerError::Api { .. }
                | DockerError::Timeout { .. }
                | DockerError::Io { .. }
        )
    }
}

impl From<DockerError> for EnvError {
    fn from(e: DockerError) -> EnvError {
        if e.is_infra() {
            EnvError::Infra(e.to_string())
        } else {
            EnvError::Other(e.to_string())
        }
    }
}

impl From<DockerError> for InfraError {
    fn from(e: DockerError) -> InfraError {
        InfraError::Other(e.to_string())
    }
}

/// The data behind a mutex; a panic elsewhere while it was held leaves
/// nothing half-done here (sets and maps of names), so poison is ignored.
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> DockerError + '_ {
    move |source| DockerError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Parse `4g`, `512m`, `1024k` or plain bytes.
pub fn parse_size(s: &str) -> Result<i64, DockerError> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_suffix('b').unwrap_or(&t);
    let (num, mul) = match t.char_indices().last() {
        Some((i, 'k')) => (&t[..i], 1i64 << 10),
        Some((i, 'm')) => (&t[..i], 1 << 20),
        Some((i, 'g')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .filter(|n| *n > 0.0)
        .map(|n| (n * mul as f64) as i64)
        .ok_or_else(|| {
            DockerError::Config(format!(
                "--memory {s:?}: expected a size such as 4g or 512m"
            ))
        })
}

/// A prepared docker environment: the instance image to run.
#[derive(Debug, Clone)]
pub struct DockerEnv {
    /// Image name (`repository:tag`).
    pub image: String,
    /// Image id (`sha256:...`): what the containers are created from.
    pub id: String,
    /// Registry digest, for pulled images.
    pub digest: Option<String>,
}

impl DockerEnv {
    pub fn describe(&self) -> String {
        match &self.digest {
            Some(d) => format!("image {} {} ({d})", self.image, self.id),
            None => format!("image {} {}", self.image, self.id),
        }
    }
}

#[derive(Debug)]
struct Conn {
    docker: Docker,
    /// Image names present when the run started (`--cache-level` keeps them).
    prior: HashSet<String>,
}

/// An image this run used, for the cleanup at its end.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Used {
    tier: Tier,
    name: String,
}

#[derive(Debug)]
pub struct DockerBackend {
    /// Connected on first use (version negotiated, images listed).
    conn: tokio::sync::OnceCell<Conn>,
    args: DockerOptions,
    memory: i64,
    nano_cpus: i64,
    repos: RepoCache,
    run_id: String,
    /// `logs/build_images`.
    build_logs: PathBuf,
    /// Scratch for bootstrapped root archives.
    scratch: PathBuf,
    ca: Option<Vec<u8>>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Roots chosen per suite, so a failed pull is tried once per run.
    roots: Mutex<HashMap<Suite, Root>>,
    /// Images built in this run (`--force-rebuild` builds each once).
    built: Mutex<HashSet<String>>,
    used: Mutex<BTreeSet<Used>>,
    /// Containers alive now, removed by [`DockerBackend::kill_running`].
    live: Arc<Mutex<HashSet<String>>>,
    seq: AtomicU64,
}

impl DockerBackend {
    /// Set up; the engine is connected on first use. `log_root` is
    /// `logs/run_evaluation`; build logs go beside it in `logs/build_images`.
    pub fn new(
        args: DockerOptions,
        cache: &Path,
        log_root: &Path,
        repos: RepoCache,
        run_id: &str,
    ) -> Result<DockerBackend, DockerError> {
        if args.namespace.is_some() && args.force_rebuild {
            return Err(DockerError::Config(
                "--force-rebuild builds images locally; it cannot be used with --namespace".into(),
            ));
        }
        if args.pids_limit < 16 {
            return Err(DockerError::Config(format!(
                "--pids-limit {} is too small to run a test suite",
                args.pids_limit
            )));
        }
        let memory = parse_size(&args.memory)?;
        let host_cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1) as f64;
        if args.cpus.is_nan() || args.cpus <= 0.0 {
            return Err(DockerError::Config(format!(
                "--cpus {} must be positive",
                args.cpus
            )));
        }
        let nano_cpus = (args.cpus.min(host_cpus) * 1e9) as i64;
        let ca = match images::build::ca_bundle(args.ca_cert.as_deref())? {
            Some((path, data)) => {
                tracing::info!("installing the CA bundle {} in images", path.display());
                Some(data)
            }
            None => None,
        };
        let build_logs = log_root
            .parent()
            .map(|p| p.join("build_images"))
            .unwrap_or_else(|| PathBuf::from("build_images"));
        Ok(DockerBackend {
            conn: tokio::sync::OnceCell::new(),
            args,
            memory,
            nano_cpus,
            repos,
            run_id: run_id.to_string(),
            build_logs,
            scratch: cache.join("docker"),
            ca,
            locks: Mutex::default(),
            roots: Mutex::default(),
            built: Mutex::default(),
            used: Mutex::default(),
            live: Arc::default(),
            seq: AtomicU64::new(0),
        })
    }

    async fn conn(&self) -> Result<&Conn, DockerError> {
        self.conn
            .get_or_try_init(|| async {
                let docker = daemon::connect().await?;
                let opts = ListImagesOptionsBuilder::default().all(false).build();
                let images = tokio::time::timeout(API_TIMEOUT, docker.list_images(Some(opts)))
                    .await
                    .map_err(|_| DockerError::Timeout {
                        op: "list images".into(),
                        secs: API_TIMEOUT.as_secs(),
                    })?
                    .map_err(|source| DockerError::Api {
                        op: "list images".into(),
                        source,
                    })?;
                let prior = images.into_iter().flat_map(|i| i.repo_tags).collect();
                Ok(Conn { docker, prior })
            })
            .await
    }

    async fn docker(&self) -> Result<&Docker, DockerError> {
        Ok(&self.conn().await?.docker)
    }

    fn lock_for(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut m = locked(&self.locks);
        m.entry(key.to_string()).or_default().clone()
    }

    fn note_used(&self, tier: Tier, name: &str) {
        locked(&self.used).insert(Used {
            tier,
            name: name.to_string(),
        });
    }

    /// One engine call with a hard time limit.
    async fn call<T>(
        &self,
        op: &str,
        fut: impl Future<Output = Result<T, bollard::errors::Error>>,
    ) -> Result<T, DockerError> {
        match tokio::time::timeout(API_TIMEOUT, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(source)) => Err(DockerError::Api {
                op: op.to_string(),
                source,
            }),
            Err(_) => Err(DockerError::Timeout {
                op: op.to_string(),
                secs: API_TIMEOUT.as_secs(),
            }),
        }
    }

    /// The image's id and first registry digest, or None when it is absent.
    async fn inspect(&self, name: &str) -> Result<Option<(String, Option<String>)>, DockerError> {
        match tokio::time::timeout(API_TIMEOUT, self.docker().await?.inspect_image(name)).await {
            Ok(Ok(i)) => Ok(Some((
                i.id.unwrap_or_default(),
                i.repo_digests.and_then(|d| d.into_iter().next()),
            ))),
            Ok(Err(e)) if daemon::is_status(&e, &[404]) => Ok(None),
            Ok(Err(source)) => Err(DockerError::Api {
                op: format!("inspect image {name}"),
                source,
            }),
            Err(_) => Err(DockerError::Timeout {
                op: format!("inspect image {name}"),
                secs: API_TIMEOUT.as_secs(),
            }),
        }
    }

    /// End of run: remove images per `--cache-level` and `--clean`.
    pub async fn finish(&self) {
        self.kill_running().await;
        let Some(conn) = self.conn.get() else { return };
        let used: Vec<Used> = locked(&self.used).iter().cloned().collect();
        // Instances first: a tier's images hold up its parents.
        for u in used.iter().rev() {
            if !images::should_remove(
                u.tier,
                self.args.cache_level,
                self.args.clean,
                conn.prior.contains(&u.name),
            ) {
                continue;
            }
            let opts = RemoveImageOptionsBuilder::default().force(false).build();
            match self
                .call(
                    "remove image",
                    conn.docker.remove_image(&u.name, Some(opts), None),
                )
                .await
            {
                Ok(_) => tracing::info!(
                    "removed image {} (--cache-level {:?})",
                    u.name,
                    self.args.cache_level
                ),
                Err(e) => tracing::warn!("could not remove image {}: {e}", u.name),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4g").unwrap(), 4 << 30);
        assert_eq!(parse_size("512m").unwrap(), 512 << 20);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_size("1024").unwrap(), 1024);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("-1g").is_err());
    }
}
