//! The docker backend: every evaluation runs in a container of an image
//! built for its instance, through the Docker Engine API (bollard), with no
//! registry needed.
//!
//! - [`daemon`]: finding and connecting to the engine.
//! - [`engine`]: the one layer over the engine's API (timed calls, removal
//!   on every path, a script run in a container), shared with swarm and perf.
//! - [`events`]: what the backend tells about its images.
//! - [`images`]: the image tiers, their plans and how they are built, pulled
//!   or bootstrapped.
//! - [`containers`]: one evaluation's container, from creation to removal.
//! - [`archive`]: the tars sent to the engine (build contexts, the
//!   candidate's changes).
//! - [`inventory`]: what the engine holds of patchgrade's images, what a
//!   cold run would build, eviction on request (`patchgrade images`).
//! - [`shelf`]: instance images kept compressed in the cache folder
//!   (`--shelve`), loaded back instead of built.
//! - [`compiler_store`]: the compiler cache in the cache folder, served to
//!   the builds that compile through ccache.
//!
//! This module holds the backend's state and options, preparing an
//! environment and the cleanup at the end of a run.

pub mod archive;
pub mod cache;
pub mod capped;
pub mod chunks;
pub mod compiler_store;
pub mod containers;
pub mod daemon;
pub mod engine;
pub mod events;
mod evict;
pub mod exits;
pub mod images;
pub mod inventory;
pub mod shelf;
pub mod stale;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

use bollard::query_parameters::ListImagesOptionsBuilder;
use bollard::Docker;

use super::{EnvError, InfraError};
use engine::{call, ApiError, ContainerId, Live};
use events::{ImageEvent, ImageEvents};
// Image builds and pulls set their own limits from it.
use crate::python::{HostSearch, Interpreter, PythonDir, PythonError};
use crate::record::{Environment, ImageEnv};
use crate::repo::RepoCache;
use crate::rundir::RunDir;
use engine::API_TIMEOUT;
use images::plans::Root;
use images::{CacheLevel, ImageError, Suite, Tier};

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
    /// Images kept after the run, by tier (the reference's meaning); `None`
    /// (the default): keep them all within the cache budget, evicting the
    /// least recently used.
    pub cache_level: Option<CacheLevel>,
    /// The cache budget (`--cache-budget`, e.g. `20g`); `None`: the default
    /// rule of [`cache::budget`].
    pub cache_budget: Option<String>,
    /// Also remove images that existed before the run (per `cache_level`).
    pub clean: bool,
    /// Put the instance images the run used on the shelf at its end, and
    /// remove them from the engine.
    pub shelve: bool,
    pub force_rebuild: bool,
    /// Memory limit of each test container (e.g. 4g, 512m).
    pub memory: String,
    pub cpus: f64,
    pub pids_limit: i64,
    /// Time limit of one image build, seconds.
    pub build_timeout: u64,
    /// `--python-dir` entries, searched first for a Python no suite ships.
    pub python_dirs: Vec<PythonDir>,
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
    #[error(transparent)]
    Python(#[from] PythonError),
    #[error(transparent)]
    Toolchain(#[from] crate::toolchain::ToolchainError),
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

impl From<ApiError> for DockerError {
    fn from(e: ApiError) -> DockerError {
        match e {
            ApiError::Api { op, source } => DockerError::Api { op, source },
            ApiError::Timeout { op, secs } => DockerError::Timeout { op, secs },
        }
    }
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
    /// The interpreter of the image's venv (None: no Python env, or a
    /// `--namespace` image).
    pub python: Option<Interpreter>,
    /// The toolchains of the image (a spec's `toolchains:`).
    pub toolchains: Vec<crate::toolchain::Toolchain>,
}

impl DockerEnv {
    /// What the record says of it.
    pub fn environment(&self) -> Environment {
        Environment::Image(ImageEnv {
            image: self.image.clone(),
            id: self.id.clone(),
            digest: self.digest.clone(),
            python: self.python.as_ref().map(Interpreter::describe),
            toolchains: self.toolchains.iter().map(|t| t.describe()).collect(),
            node: None,
        })
    }
}

/// Where things are in every image the Docker and swarm backends run, for
/// scripts written outside the backend (the dataset's eval script).
#[derive(Debug, Clone)]
pub struct ImageLayout {
    /// The repository's tree.
    pub testbed: &'static str,
    /// patchgrade's env.
    pub venv: &'static str,
    /// Shell that activates the image's env.
    pub activate: String,
}

impl ImageLayout {
    pub fn of_images() -> ImageLayout {
        ImageLayout {
            testbed: images::TESTBED,
            venv: images::VENV,
            activate: images::activate_line(),
        }
    }
}

/// The interpreter chosen for a spec's `python` value, with the host
/// build's file list (walked once per run).
#[derive(Debug)]
pub(crate) struct ChosenPython {
    pub interp: Interpreter,
    pub manifest: Option<images::python::Manifest>,
}

#[derive(Debug)]
struct Conn {
    docker: Docker,
    /// Image names present when the run started (`--cache-level` keeps them).
    prior: HashSet<String>,
    /// Budget mode (no `--cache-level`): the budget in force.
    budget: Option<cache::Budget>,
    /// Image ids by name when the run started.
    present: HashMap<String, String>,
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
    /// The run folder: its run id labels and names the containers.
    rundir: RunDir,
    /// `logs/build_images`.
    build_logs: PathBuf,
    /// Scratch for bootstrapped root archives.
    scratch: PathBuf,
    ca: Option<Vec<u8>>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Roots chosen per suite, so a failed pull is tried once per run.
    roots: Mutex<HashMap<Suite, Root>>,
    /// Where host Python builds are looked for (`--python-dir`, uv, pyenv).
    python_search: HostSearch,
    /// Interpreters chosen per spec `python` value, once per run.
    pythons: Mutex<BTreeMap<String, Arc<ChosenPython>>>,
    /// Where toolchains are looked for (host folders, registries).
    toolchain_search: crate::toolchain::Search,
    /// Toolchains chosen per (language, version asked), once per run.
    toolchains: tokio::sync::Mutex<
        BTreeMap<(crate::toolchain::Language, String), Arc<images::toolchain::ChosenToolchain>>,
    >,
    /// Images built in this run (`--force-rebuild` builds each once).
    built: Mutex<HashSet<String>>,
    used: Mutex<BTreeSet<Used>>,
    /// Containers alive now, removed by [`DockerBackend::kill_running`].
    live: Live<ContainerId>,
    seq: AtomicU64,
    /// `--cache-budget`, parsed.
    budget_flag: Option<u64>,
    /// The image cache index (budget mode), loaded on connecting.
    index: Mutex<Option<cache::Index>>,
    /// The cache folder's lease (budget mode; see `evict`).
    lease: Mutex<Option<std::fs::File>>,
    /// Containers being removed off the critical path, awaited by `finish`.
    removals: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Where its [`ImageEvent`]s go; `None`: nowhere.
    events: Mutex<Option<ImageEvents>>,
    /// `<cache>/docker/shelf`.
    shelf: shelf::Shelf,
    /// The image each instance image of this run is built on, and its
    /// dataset repository (to shelve it).
    parents: Mutex<HashMap<String, (String, String)>>,
    /// Instance images this run loaded from the shelf.
    unshelved: Mutex<HashSet<String>>,
    /// The compiler cache store, served from the first build that compiles
    /// through it; `None` inside: builds cannot reach it.
    compiler_store: tokio::sync::OnceCell<Option<compiler_store::Served>>,
}

impl DockerBackend {
    /// Set up; the engine is connected on first use. The run folder's
    /// root is `logs/run_evaluation`; build logs go beside it in
    /// `logs/build_images`.
    pub fn new(
        mut args: DockerOptions,
        cache: &Path,
        rundir: &RunDir,
        repos: RepoCache,
    ) -> Result<DockerBackend, DockerError> {
        if args.namespace.is_some() && args.force_rebuild {
            return Err(DockerError::Config(
                "--force-rebuild builds images locally; it cannot be used with --namespace".into(),
            ));
        }
        if args.shelve
            && (args.namespace.is_some() || args.cache_level == Some(CacheLevel::Instance))
        {
            return Err(DockerError::Config(
                "--shelve moves the instance images patchgrade built out of the engine; it cannot be used with --namespace or --cache-level instance".into(),
            ));
        }
        if args.pids_limit < 16 {
            return Err(DockerError::Config(format!(
                "--pids-limit {} is too small to run a test suite",
                args.pids_limit
            )));
        }
        let memory = parse_size(&args.memory)?;
        // `--clean` alone asks for the reference's cleanup: its default level.
        if args.clean && args.cache_level.is_none() && args.cache_budget.is_none() {
            args.cache_level = Some(CacheLevel::Env);
        }
        let budget_flag = match &args.cache_budget {
            None => None,
            Some(_) if args.cache_level.is_some() => {
                return Err(DockerError::Config(
                    "--cache-budget applies when no --cache-level is given".into(),
                ))
            }
            Some(s) => Some(parse_size(s).map(|b| b as u64).map_err(|_| {
                DockerError::Config(format!(
                    "--cache-budget {s:?}: expected a size such as 50g or 800m"
                ))
            })?),
        };
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
        let python_search = HostSearch::from_env(args.python_dirs.clone());
        let build_logs = rundir
            .log_root()
            .parent()
            .map(|p| p.join("build_images"))
            .unwrap_or_else(|| PathBuf::from("build_images"));
        Ok(DockerBackend {
            conn: tokio::sync::OnceCell::new(),
            args,
            memory,
            nano_cpus,
            repos,
            rundir: rundir.clone(),
            build_logs,
            scratch: cache.join("docker"),
            ca,
            locks: Mutex::default(),
            roots: Mutex::default(),
            python_search,
            pythons: Mutex::default(),
            toolchain_search: crate::toolchain::Search::from_env(Some(cache.join("toolchains"))),
            toolchains: tokio::sync::Mutex::default(),
            built: Mutex::default(),
            used: Mutex::default(),
            live: Arc::default(),
            seq: AtomicU64::new(0),
            budget_flag,
            index: Mutex::default(),
            lease: Mutex::default(),
            removals: Mutex::default(),
            events: Mutex::default(),
            shelf: shelf::Shelf::new(&cache.join("docker")),
            parents: Mutex::default(),
            unshelved: Mutex::default(),
            compiler_store: tokio::sync::OnceCell::new(),
        })
    }

    /// The run id its containers are labelled with.
    pub fn run_id(&self) -> &str {
        self.rundir.run_id()
    }

    /// Sends the backend's [`ImageEvent`]s to `events` from now on (`None`:
    /// nowhere).
    pub fn report_to(&self, events: Option<ImageEvents>) {
        *locked(&self.events) = events;
    }

    fn tell(&self, event: ImageEvent) {
        let sink = locked(&self.events).clone();
        if let Some(sink) = sink {
            sink.tell(event);
        }
    }

    async fn conn(&self) -> Result<&Conn, DockerError> {
        self.conn
            .get_or_try_init(|| async {
                let docker = daemon::connect().await?;
                let opts = ListImagesOptionsBuilder::default().all(false).build();
                let images = call("list images", docker.list_images(Some(opts))).await?;
                let present: HashMap<String, String> = images
                    .into_iter()
                    .flat_map(|i| {
                        let id = i.id;
                        i.repo_tags.into_iter().map(move |t| (t, id.clone()))
                    })
                    .collect();
                let budget = match self.args.cache_level {
                    Some(_) => None,
                    None => Some(self.open_index(&docker, &present).await),
                };
                let prior = present.keys().cloned().collect();
                Ok(Conn {
                    docker,
                    prior,
                    budget,
                    present,
                })
            })
            .await
    }

    /// The interpreters this run chose for its specs (one per `python`
    /// value asked for, in version order), for run.json: `Interpreter::record()` of each.
    pub fn interpreters(&self) -> Vec<Interpreter> {
        let mut v: Vec<Interpreter> = locked(&self.pythons)
            .values()
            .map(|c| c.interp.clone())
            .collect();
        v.sort_by_key(|i| i.requested);
        v
    }

    /// The toolchains this run chose for its specs, for run.json.
    pub fn toolchains(&self) -> Vec<crate::toolchain::Toolchain> {
        match self.toolchains.try_lock() {
            Ok(m) => m.values().map(|c| c.toolchain.clone()).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The interpreter for a spec's `python` value: the provider chain,
    /// run once per value and run.
    fn python(&self, requested: &str) -> Result<Arc<ChosenPython>, PythonError> {
        let key = requested.trim().to_string();
        if let Some(c) = locked(&self.pythons).get(&key) {
            return Ok(c.clone());
        }
        let interp = crate::python::resolve(&key, &self.python_search)?;
        let manifest = images::python::manifest(&interp)?;
        if let Some(m) = &manifest {
            tracing::info!(
                "Python {key}: {} {} ({} files, {} MiB copied into images)",
                interp.provider.name(),
                m.prefix.display(),
                m.entries(),
                m.size() >> 20
            );
        }
        let chosen = Arc::new(ChosenPython { interp, manifest });
        locked(&self.pythons).insert(key, chosen.clone());
        Ok(chosen)
    }

    /// The engine's connection (made on first use): `perf` measures over it.
    pub async fn docker(&self) -> Result<&Docker, DockerError> {
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

    /// The image's id and first registry digest, or None when it is absent.
    async fn inspect(&self, name: &str) -> Result<Option<(String, Option<String>)>, DockerError> {
        let op = format!("inspect image {name}");
        match call(&op, self.docker().await?.inspect_image(name)).await {
            Ok(i) => Ok(Some((
                i.id.unwrap_or_default(),
                i.repo_digests.and_then(|d| d.into_iter().next()),
            ))),
            Err(e) if e.is_status(&[404]) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Start of a run: connect, so that the cache budget is shown first.
    pub async fn start(&self) {
        if let Err(e) = self.conn().await {
            tracing::debug!("not connected at the start: {e}");
        }
    }

    /// End of run: containers still being removed are awaited, then images
    /// are removed per `--cache-level` and `--clean`, or (by default) the
    /// least recently used evicted to fit the budget; one line says what
    /// the run reused, built and removed.
    pub async fn finish(&self) {
        self.kill_running().await;
        self.compiler_store_said();
        self.await_removals().await;
        let Some(conn) = self.conn.get() else { return };
        let used: Vec<Used> = locked(&self.used).iter().cloned().collect();
        let built = locked(&self.built).clone();
        let instances: Vec<&Used> = used.iter().filter(|u| u.tier == Tier::Instance).collect();
        let fresh = instances.iter().filter(|u| built.contains(&u.name)).count();
        let mut removed = 0;
        if self.args.shelve {
            let shelved = self.shelve_used().await;
            // As with eviction: another run of this cache folder may be
            // about to use them.
            if self.sole_user() {
                let gone = self
                    .remove_images(&conn.docker, vec![shelved], "--shelve: on the shelf")
                    .await;
                removed += gone.len();
                locked(&self.used).retain(|u| !gone.contains(&u.name));
            } else if !shelved.is_empty() {
                self.tell(ImageEvent::EvictionLeft);
            }
        }
        removed += match self.args.cache_level {
            Some(level) => self.remove_per_level(conn, level).await,
            None => self.evict(conn).await,
        };
        self.tell(ImageEvent::Summary {
            reused: instances.len() - fresh,
            unshelved: locked(&self.unshelved).len(),
            built_instances: fresh,
            built: built.len(),
            removed,
        });
    }
}

#[cfg(test)]
mod tests;
