//! The docker backend: every evaluation runs in a container of an image
//! built for its instance (see [`crate::image`] for the tiers), through the
//! Docker Engine API (bollard), with no registry needed.
//!
//! Run path, per (instance, prediction): create a container of the instance
//! image (no network unless the spec opts in; memory, CPU and pids limits;
//! `--init`), upload the candidate's changed files and the eval script as one
//! tar, attach, start, read the output until the script exits, remove. The
//! container's command is the eval script itself, so there is no idle main
//! process to stop: removal is immediate. A timeout, an interrupt, an error
//! or a dropped future all remove the container.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, BuildImageOptionsBuilder, CreateContainerOptionsBuilder,
    CreateImageOptionsBuilder, ListImagesOptionsBuilder, RemoveContainerOptionsBuilder,
    RemoveImageOptionsBuilder, StartContainerOptions, UploadToContainerOptionsBuilder,
};
use bollard::{body_full, Docker};
use futures_util::StreamExt;

use super::{EnvError, InfraError, RunOutput, Workspace};
use crate::dataset::Instance;
use crate::image::{self, CacheLevel, ImageError, ImagePlan, Root, Suite, Tier, TreeSource};
use crate::repo::RepoCache;
use crate::script::quote;
use crate::spec::ResolvedSpec;

/// Limit on one short engine call (create, upload, start, remove, inspect).
const API_TIMEOUT: Duration = Duration::from_secs(120);
/// Limit on finding out whether a daemon answers.
const PING_TIMEOUT: Duration = Duration::from_secs(5);
/// Limit on pulling a root image before falling back to debootstrap.
const ROOT_PULL_TIMEOUT: Duration = Duration::from_secs(120);
/// At most this much test output is kept (the rest is dropped, noted).
const MAX_LOG: usize = 256 << 20;
/// Grace after `--timeout` before the in-container watchdog kills the
/// script on its own (for when patchgrade itself is killed).
const WATCHDOG_GRACE: u64 = 60;

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
    Pull { image: String, reason: String },
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

fn endpoint() -> String {
    std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into())
}

/// Whether a daemon answers `GET /_ping` at DOCKER_HOST or the local
/// socket, within a couple of seconds. Sync: used to pick the backend.
pub fn daemon_answers() -> Result<(), DockerError> {
    ping(&endpoint())
}

/// `GET /_ping` at a `unix://` or `tcp://` endpoint.
fn ping(ep: &str) -> Result<(), DockerError> {
    let unreachable = |reason: String| DockerError::Unreachable {
        endpoint: ep.to_string(),
        reason,
    };
    let limit = Some(Duration::from_secs(3));
    let request = b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n";
    let mut reply = Vec::new();
    if let Some(path) = ep.strip_prefix("unix://") {
        let s = std::os::unix::net::UnixStream::connect(path)
            .map_err(|e| unreachable(e.to_string()))?;
        s.set_read_timeout(limit)
            .and_then(|_| s.set_write_timeout(limit))
            .and_then(|_| exchange(s, request, &mut reply))
            .map_err(|e| unreachable(e.to_string()))?;
    } else if let Some(addr) = ep.strip_prefix("tcp://") {
        let addr = addr.trim_end_matches('/');
        let sock = std::net::ToSocketAddrs::to_socket_addrs(addr)
            .map_err(|e| unreachable(e.to_string()))?
            .next()
            .ok_or_else(|| unreachable("no address".into()))?;
        let s = std::net::TcpStream::connect_timeout(&sock, Duration::from_secs(3))
            .map_err(|e| unreachable(e.to_string()))?;
        s.set_read_timeout(limit)
            .and_then(|_| s.set_write_timeout(limit))
            .and_then(|_| exchange(s, request, &mut reply))
            .map_err(|e| unreachable(e.to_string()))?;
    } else {
        // ssh:// and the like: let the client find out.
        return Ok(());
    }
    let head = String::from_utf8_lossy(&reply[..reply.len().min(64)]).into_owned();
    if head.starts_with("HTTP/1.") && head.split_whitespace().nth(1) == Some("200") {
        Ok(())
    } else {
        Err(unreachable(format!(
            "unexpected answer to /_ping: {:?}",
            head.lines().next().unwrap_or("")
        )))
    }
}

/// Send a request on a connected stream and read the whole reply.
fn exchange(
    mut s: impl std::io::Read + std::io::Write,
    request: &[u8],
    reply: &mut Vec<u8>,
) -> std::io::Result<()> {
    s.write_all(request)?;
    s.read_to_end(reply).map(|_| ())
}

/// Connect to the engine (DOCKER_HOST or the local socket) and check that it
/// answers, with the API version both sides speak.
pub async fn connect() -> Result<Docker, DockerError> {
    let unreachable = |reason: String| DockerError::Unreachable {
        endpoint: endpoint(),
        reason,
    };
    let docker = Docker::connect_with_defaults().map_err(|e| unreachable(e.to_string()))?;
    let docker = match tokio::time::timeout(PING_TIMEOUT, docker.negotiate_version()).await {
        Ok(Ok(d)) => d,
        Ok(Err(e)) => return Err(unreachable(e.to_string())),
        Err(_) => {
            return Err(unreachable(format!(
                "no answer within {}s",
                PING_TIMEOUT.as_secs()
            )))
        }
    };
    match tokio::time::timeout(PING_TIMEOUT, docker.ping()).await {
        Ok(Ok(_)) => Ok(docker),
        Ok(Err(e)) => Err(unreachable(e.to_string())),
        Err(_) => Err(unreachable(format!(
            "no answer within {}s",
            PING_TIMEOUT.as_secs()
        ))),
    }
}

/// The CA bundle to install in images, per `--ca-cert` and the environment.
fn ca_bundle(flag: Option<&str>) -> Result<Option<(PathBuf, Vec<u8>)>, DockerError> {
    let path = match flag {
        Some("none") | Some("") => return Ok(None),
        Some(p) => PathBuf::from(p),
        None => {
            let from_env = ["SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE"]
                .iter()
                .filter_map(std::env::var_os)
                .map(PathBuf::from)
                .find(|p| p.is_file());
            match from_env.or_else(|| {
                Some(PathBuf::from("/etc/ssl/certs/ca-certificates.crt")).filter(|p| p.is_file())
            }) {
                Some(p) => p,
                None => return Ok(None),
            }
        }
    };
    let data = std::fs::read(&path).map_err(io_err(&path))?;
    Ok(Some((path, data)))
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

/// What one evaluation changed relative to the checkout: files to upload,
/// paths to delete.
#[derive(Debug, Default)]
pub struct Changes {
    pub upload: Vec<PathBuf>,
    pub delete: Vec<PathBuf>,
}

/// Files the candidate changed, added or deleted in `tree`, found with git2
/// against the checkout's HEAD (ignored files included: a patch may add one).
pub fn candidate_changes(tree: &Path) -> Result<Changes, git2::Error> {
    use std::os::unix::ffi::OsStrExt;
    let repo = git2::Repository::open(tree)?;
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(true)
        .recurse_ignored_dirs(true)
        .exclude_submodules(true)
        .renames_head_to_index(false)
        .renames_index_to_workdir(false);
    let mut out = Changes::default();
    for e in repo.statuses(Some(&mut opts))?.iter() {
        let rel = PathBuf::from(std::ffi::OsStr::from_bytes(e.path_bytes()));
        if tree.join(&rel).symlink_metadata().is_ok() {
            out.upload.push(rel);
        } else {
            out.delete.push(rel);
        }
    }
    out.upload.sort();
    out.delete.sort();
    Ok(out)
}

/// The one archive uploaded at `/` before the container starts: the changed
/// files under `testbed/`, the eval script and its launcher.
fn run_archive(
    tree: &Path,
    changes: &Changes,
    script: &str,
    watchdog: u64,
    blackhole: bool,
) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::PermissionsExt;
    let mut b = tar::Builder::new(Vec::new());
    for rel in &changes.upload {
        let full = tree.join(rel);
        let meta = full.symlink_metadata()?;
        let dest = Path::new("testbed").join(rel);
        if meta.file_type().is_symlink() {
            image::append_symlink(&mut b, &dest, &std::fs::read_link(&full)?)?;
        } else if meta.is_file() {
            let mode = if meta.permissions().mode() & 0o111 != 0 {
                0o755
            } else {
                0o644
            };
            image::append_file(&mut b, &dest, &std::fs::read(&full)?, mode)?;
        }
    }
    image::append_file(&mut b, "eval.sh", script.as_bytes(), 0o644)?;
    let deletes: Vec<String> = changes
        .delete
        .iter()
        .map(|p| quote(&p.to_string_lossy()))
        .collect();
    let launcher = format!(
        "#!/bin/bash\n# patchgrade: remove what the candidate deleted, then run the eval script\n\
         # (stderr into stdout so that xtrace markers and test output keep their order).\n\
         cd {testbed} || exit 1\n{rm}{route}\
         if command -v timeout >/dev/null 2>&1; then exec timeout -s KILL {watchdog} bash /eval.sh 2>&1; fi\n\
         exec bash /eval.sh 2>&1\n",
        testbed = image::TESTBED,
        rm = if deletes.is_empty() { String::new() } else { format!("rm -f -- {}\n", deletes.join(" ")) },
        // Spec `blackhole_routes`: packets to non-local addresses vanish
        // (connects time out) instead of failing at once; needs NET_ADMIN,
        // which is granted only then, inside the container's own namespace.
        route = if blackhole { "ip route add default dev lo 2>/dev/null || true\n" } else { "" },
    );
    image::append_file(&mut b, "patchgrade-run.sh", launcher.as_bytes(), 0o755)?;
    b.into_inner()
}

fn is_status(e: &bollard::errors::Error, codes: &[u16]) -> bool {
    matches!(e, bollard::errors::Error::DockerResponseServerError { status_code, .. } if codes.contains(status_code))
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
        let ca = match ca_bundle(args.ca_cert.as_deref())? {
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
                let docker = connect().await?;
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
        let mut m = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(key.to_string()).or_default().clone()
    }

    fn note_used(&self, tier: Tier, name: &str) {
        self.used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(Used {
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
            Ok(Err(e)) if is_status(&e, &[404]) => Ok(None),
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

    /// Pull `name`; Err(reason) when no registry gives it.
    async fn pull(&self, name: &str, limit: Duration) -> Result<(), String> {
        let opts = CreateImageOptionsBuilder::default()
            .from_image(name)
            .build();
        let docker = self.docker().await.map_err(|e| e.to_string())?;
        let mut stream = docker.create_image(Some(opts), None, None);
        let pulled = tokio::time::timeout(limit, async {
            while let Some(item) = stream.next().await {
                item.map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        })
        .await;
        match pulled {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {}s", limit.as_secs())),
        }
    }

    pub async fn prepare_env(
        &self,
        rs: &ResolvedSpec,
        inst: &Instance,
        _log_dir: &Path,
    ) -> Result<DockerEnv, EnvError> {
        if let Some(ns) = &self.args.namespace {
            return Ok(self.namespace_env(ns, inst).await?);
        }
        let spec = &rs.spec;
        let suite = Suite::for_python(spec.python.as_deref()).map_err(DockerError::from)?;
        let root = self.root(suite).await?;
        let base = image::base_plan(suite, &root, self.ca.as_deref());
        self.ensure_built(&base).await?;
        let requirements = match &spec.requirements {
            Some(path) => {
                let (repos, inst2, path) = (self.repos.clone(), inst.clone(), path.clone());
                let text = tokio::task::spawn_blocking(move || {
                    super::read_requirements(&repos, &inst2, &path)
                })
                .await
                .map_err(|e| EnvError::Infra(format!("requirements task: {e}")))??;
                Some(super::filter_requirements(&text))
            }
            None => None,
        };
        let env = image::env_plan(suite, &base.name, spec, requirements.as_deref());
        self.ensure_built(&env).await?;
        let tree = self.base_tree(inst).await?;
        let plan = image::instance_plan(&env.name, &inst.instance_id, spec, tree);
        let (id, digest) = self.ensure_built(&plan).await?;
        Ok(DockerEnv {
            image: plan.name,
            id,
            digest,
        })
    }

    async fn namespace_env(&self, ns: &str, inst: &Instance) -> Result<DockerEnv, DockerError> {
        let name = image::namespace_image(ns, &inst.instance_id, &self.args.instance_image_tag);
        let lock = self.lock_for(&name);
        let _g = lock.lock().await;
        if self.inspect(&name).await?.is_none() {
            tracing::info!("pulling {name}");
            self.pull(&name, Duration::from_secs(self.args.build_timeout))
                .await
                .map_err(|reason| DockerError::Pull {
                    image: name.clone(),
                    reason,
                })?;
        }
        let (id, digest) = self
            .inspect(&name)
            .await?
            .ok_or_else(|| DockerError::Pull {
                image: name.clone(),
                reason: "absent after the pull".into(),
            })?;
        self.note_used(Tier::Instance, &name);
        Ok(DockerEnv {
            image: name,
            id,
            digest,
        })
    }

    /// The base commit's tree in the mirror (no checkout needed).
    async fn base_tree(&self, inst: &Instance) -> Result<TreeSource, EnvError> {
        let (repos, repo, commit) = (
            self.repos.clone(),
            inst.repo.clone(),
            inst.base_commit.clone(),
        );
        tokio::task::spawn_blocking(move || {
            let mirror = repos
                .ensure(&repo, &[&commit])
                .map_err(|e| EnvError::Infra(e.to_string()))?;
            let r =
                git2::Repository::open_bare(&mirror).map_err(|e| EnvError::Infra(e.to_string()))?;
            let tree = git2::Oid::from_str(&commit)
                .and_then(|o| r.find_commit(o))
                .map(|c| c.tree_id())
                .map_err(|e| EnvError::Other(format!("base commit {commit} of {repo}: {e}")))?;
            Ok(TreeSource { repo: mirror, tree })
        })
        .await
        .map_err(|e| EnvError::Infra(format!("tree task: {e}")))?
    }

    /// The root image of a suite: `--base-image` from the engine or a
    /// registry, else bootstrapped with debootstrap. Chosen once per run.
    async fn root(&self, suite: Suite) -> Result<Root, DockerError> {
        let lock = self.lock_for(&format!("root:{}", suite.name()));
        let _g = lock.lock().await;
        if let Some(r) = self
            .roots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&suite)
        {
            return Ok(r.clone());
        }
        let wanted = self.args.base_image.replace("{suite}", suite.name());
        let mut why = String::from("--base-image none");
        if self.args.base_image != "none" {
            if let Some((id, _)) = self.inspect(&wanted).await? {
                tracing::info!(
                    "base images for {}: from {wanted} (in the engine)",
                    suite.name()
                );
                return Ok(self.chose_root(suite, Root { name: wanted, id }));
            }
            match self.pull(&wanted, ROOT_PULL_TIMEOUT).await {
                Ok(()) => {
                    if let Some((id, _)) = self.inspect(&wanted).await? {
                        tracing::info!("base images for {}: pulled {wanted}", suite.name());
                        return Ok(self.chose_root(suite, Root { name: wanted, id }));
                    }
                    why = format!("{wanted} absent after its pull");
                }
                Err(e) => why = format!("pulling {wanted} failed: {e}"),
            }
        }
        let name = image::bootstrap_image(suite);
        if let Some((id, _)) = self.inspect(&name).await? {
            tracing::info!(
                "base images for {}: bootstrapped {name} (in the engine; {why})",
                suite.name()
            );
            return Ok(self.chose_root(suite, Root { name, id }));
        }
        tracing::warn!(
            "base images for {}: bootstrapping {name} with debootstrap ({why})",
            suite.name()
        );
        let id = self.bootstrap(suite, &name).await?;
        Ok(self.chose_root(suite, Root { name, id }))
    }

    fn chose_root(&self, suite: Suite, root: Root) -> Root {
        self.note_used(Tier::Base, &root.name);
        self.roots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(suite, root.clone());
        root
    }

    /// Run harness-scripts/bootstrap-base.sh and import its archive.
    async fn bootstrap(&self, suite: Suite, name: &str) -> Result<String, DockerError> {
        let dir = self
            .build_logs
            .join(Tier::Base.log_dir())
            .join(name.replace(':', "__"));
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        std::fs::create_dir_all(&self.scratch).map_err(io_err(&self.scratch))?;
        let script = dir.join("bootstrap-base.sh");
        std::fs::write(&script, image::BOOTSTRAP_SCRIPT).map_err(io_err(&script))?;
        let log = dir.join("build_image.log");
        let out_file = std::fs::File::create(&log).map_err(io_err(&log))?;
        let err_file = out_file.try_clone().map_err(io_err(&log))?;
        let archive =
            self.scratch
                .join(format!("root-{}-{}.tar", suite.name(), std::process::id()));
        let fail = |reason: String| DockerError::Bootstrap {
            suite: suite.name(),
            reason,
            log: log.clone(),
        };
        let mut child = tokio::process::Command::new("bash")
            .arg(&script)
            .arg(suite.name())
            .arg(&archive)
            .stdin(std::process::Stdio::null())
            .stdout(out_file)
            .stderr(err_file)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| fail(format!("cannot run bash: {e}")))?;
        let status =
            match tokio::time::timeout(Duration::from_secs(self.args.build_timeout), child.wait())
                .await
            {
                Ok(s) => s.map_err(|e| fail(e.to_string()))?,
                Err(_) => {
                    return Err(fail(format!(
                        "not done within --build-timeout {}s",
                        self.args.build_timeout
                    )))
                }
            };
        if !status.success() {
            let _ = std::fs::remove_file(&archive);
            return Err(fail(format!("{} exited {status}", script.display())));
        }
        let bytes = tokio::fs::read(&archive).await.map_err(io_err(&archive));
        let _ = std::fs::remove_file(&archive);
        let bytes = bytes?;
        let (repo, tag) = name.rsplit_once(':').unwrap_or((name, "latest"));
        let opts = CreateImageOptionsBuilder::default()
            .from_src("-")
            .repo(repo)
            .tag(tag)
            .build();
        let mut stream =
            self.docker()
                .await?
                .create_image(Some(opts), Some(body_full(bytes.into())), None);
        let imported = tokio::time::timeout(API_TIMEOUT * 5, async {
            while let Some(item) = stream.next().await {
                item?;
            }
            Ok::<(), bollard::errors::Error>(())
        })
        .await;
        match imported {
            Ok(Ok(())) => {}
            Ok(Err(source)) => {
                return Err(DockerError::Api {
                    op: format!("import {name}"),
                    source,
                })
            }
            Err(_) => {
                return Err(DockerError::Timeout {
                    op: format!("import {name}"),
                    secs: API_TIMEOUT.as_secs() * 5,
                })
            }
        }
        let (id, _) = self
            .inspect(name)
            .await?
            .ok_or_else(|| fail("the imported image is absent".into()))?;
        self.built
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string());
        Ok(id)
    }

    /// The image of `plan`, built unless it exists (and `--force-rebuild`
    /// did not ask for a fresh one). Concurrent callers wait for one build.
    async fn ensure_built(
        &self,
        plan: &ImagePlan,
    ) -> Result<(String, Option<String>), DockerError> {
        let lock = self.lock_for(&plan.name);
        let _g = lock.lock().await;
        let fresh = self
            .built
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&plan.name);
        if !self.args.force_rebuild || fresh {
            if let Some(found) = self.inspect(&plan.name).await? {
                self.note_used(plan.tier, &plan.name);
                return Ok(found);
            }
        }
        self.build(plan).await?;
        self.note_used(plan.tier, &plan.name);
        self.built
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(plan.name.clone());
        self.inspect(&plan.name)
            .await?
            .ok_or_else(|| DockerError::Build {
                image: plan.name.clone(),
                reason: "the image is absent after its build".into(),
                log: self.build_dir(plan).join("build_image.log"),
            })
    }

    fn build_dir(&self, plan: &ImagePlan) -> PathBuf {
        self.build_logs
            .join(plan.tier.log_dir())
            .join(plan.log_name())
    }

    async fn build(&self, plan: &ImagePlan) -> Result<(), DockerError> {
        use std::io::Write;
        let dir = self.build_dir(plan);
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        // What built it, for people: Dockerfile and scripts (not the tree).
        for (name, data) in std::iter::once(("Dockerfile", plan.dockerfile.as_bytes())).chain(
            plan.files
                .iter()
                .map(|f| (f.path.as_str(), f.data.as_slice())),
        ) {
            let p = dir.join(name);
            std::fs::write(&p, data).map_err(io_err(&p))?;
        }
        let log_path = dir.join("build_image.log");
        let mut log = std::fs::File::create(&log_path).map_err(io_err(&log_path))?;
        tracing::info!("building {}", plan.name);
        let started = Instant::now();
        let plan2 = plan.clone();
        let context = tokio::task::spawn_blocking(move || plan2.context_tar())
            .await
            .map_err(|e| DockerError::Config(format!("context task: {e}")))??;
        let opts = BuildImageOptionsBuilder::default()
            .t(&plan.name)
            .rm(true)
            .forcerm(true)
            .nocache(self.args.force_rebuild)
            .labels(&HashMap::from([("patchgrade.tier", plan.tier.log_dir())]))
            .build();
        let docker = self.docker().await?;
        let mut stream = docker.build_image(opts, None, Some(body_full(context.into())));
        let mut tail: Vec<String> = Vec::new();
        let fail = |reason: String| DockerError::Build {
            image: plan.name.clone(),
            reason,
            log: log_path.clone(),
        };
        let limit = Duration::from_secs(self.args.build_timeout);
        let result = tokio::time::timeout(limit, async {
            while let Some(item) = stream.next().await {
                match item {
                    Ok(info) => {
                        if let Some(s) = info.stream.or(info.status) {
                            let _ = log.write_all(s.as_bytes());
                            tail.extend(
                                s.lines().filter(|l| !l.trim().is_empty()).map(String::from),
                            );
                            if tail.len() > 5 {
                                tail.drain(..tail.len() - 5);
                            }
                        }
                    }
                    Err(bollard::errors::Error::DockerStreamError { error }) => {
                        let _ = writeln!(log, "ERROR: {error}");
                        return Err(fail(format!("{error} (last output: {})", tail.join(" | "))));
                    }
                    Err(source) => {
                        return Err(DockerError::Api {
                            op: format!("build {}", plan.name),
                            source,
                        })
                    }
                }
            }
            Ok(())
        })
        .await;
        let _ = writeln!(
            log,
            "\n# patchgrade: build of {} took {:.1}s",
            plan.name,
            started.elapsed().as_secs_f64()
        );
        match result {
            Ok(r) => r,
            Err(_) => Err(fail(format!(
                "not done within --build-timeout {}s",
                self.args.build_timeout
            ))),
        }
    }

    pub async fn run(
        &self,
        env: &DockerEnv,
        rs: &ResolvedSpec,
        ws: &Workspace,
        script: &str,
        timeout: Duration,
        mut cancel: tokio::sync::watch::Receiver<bool>,
    ) -> Result<RunOutput, InfraError> {
        if *cancel.borrow() {
            return Ok(RunOutput {
                log: Vec::new(),
                timed_out: false,
                cancelled: true,
                elapsed: Duration::ZERO,
            });
        }
        let tree = ws.tree.clone();
        let script2 = script.to_string();
        let watchdog = timeout.as_secs() + WATCHDOG_GRACE;
        let blackhole = !rs.spec.network && rs.spec.blackhole_routes;
        let archive = tokio::task::spawn_blocking(move || {
            let changes = candidate_changes(&tree)
                .map_err(|e| InfraError::Other(format!("listing the candidate's changes: {e}")))?;
            run_archive(&tree, &changes, &script2, watchdog, blackhole).map_err(|source| {
                InfraError::Io {
                    path: tree.clone(),
                    source,
                }
            })
        })
        .await
        .map_err(|e| InfraError::Other(format!("archive task: {e}")))??;

        let started = Instant::now();
        let docker = self.docker().await?;
        let container = self.create_container(env, rs).await?;
        let guard = ContainerGuard {
            docker: docker.clone(),
            id: container.clone(),
            live: self.live.clone(),
            armed: true,
        };
        let upload = UploadToContainerOptionsBuilder::default().path("/").build();
        self.call(
            "upload to container",
            docker.upload_to_container(&container, Some(upload), body_full(archive.into())),
        )
        .await?;
        let attach = AttachContainerOptionsBuilder::default()
            .stream(true)
            .stdout(true)
            .stderr(true)
            .logs(false)
            .build();
        let mut output = self
            .call("attach", docker.attach_container(&container, Some(attach)))
            .await?
            .output;
        self.call(
            "start container",
            docker.start_container(&container, None::<StartContainerOptions>),
        )
        .await?;

        let mut log: Vec<u8> = Vec::new();
        let mut dropped = 0usize;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let interrupted = async move {
            let fired = cancel.wait_for(|c| *c).await.is_ok();
            if !fired {
                // No sender any more: nothing can interrupt this run.
                std::future::pending::<()>().await;
            }
        };
        tokio::pin!(interrupted);
        let (timed_out, cancelled) = loop {
            tokio::select! {
                item = output.next() => match item {
                    Some(Ok(chunk)) => {
                        let bytes = chunk.into_bytes();
                        if log.len() + bytes.len() <= MAX_LOG {
                            log.extend_from_slice(&bytes);
                        } else {
                            dropped += bytes.len();
                        }
                    }
                    Some(Err(e)) => {
                        guard.remove().await;
                        return Err(InfraError::Other(format!("docker attach to the test container: {e}")));
                    }
                    None => break (false, false),
                },
                _ = &mut deadline => break (true, false),
                _ = &mut interrupted => break (false, true),
            }
        };
        let elapsed = started.elapsed();
        drop(output);
        guard.remove().await;
        if dropped > 0 {
            log.extend_from_slice(
                format!("\n[patchgrade: {dropped} bytes of output past {MAX_LOG} dropped]\n")
                    .as_bytes(),
            );
        }
        Ok(RunOutput {
            log,
            timed_out,
            cancelled,
            elapsed,
        })
    }

    async fn create_container(
        &self,
        env: &DockerEnv,
        rs: &ResolvedSpec,
    ) -> Result<String, DockerError> {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let short = env
            .image
            .split(':')
            .next()
            .unwrap_or("x")
            .rsplit('/')
            .next()
            .unwrap_or("x");
        let run: String = self
            .run_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        let name = format!("{short}.{run}.{}-{n}", std::process::id());
        let host = HostConfig {
            init: Some(true),
            network_mode: Some(if rs.spec.network { "bridge" } else { "none" }.into()),
            memory: Some(self.memory),
            memory_swap: Some(self.memory),
            nano_cpus: Some(self.nano_cpus),
            pids_limit: Some(self.args.pids_limit),
            cap_add: (!rs.spec.network && rs.spec.blackhole_routes)
                .then(|| vec!["NET_ADMIN".to_string()]),
            // Removed by the engine once the script ends, even if patchgrade
            // is gone by then; patchgrade also removes it on every path.
            auto_remove: Some(true),
            log_config: Some(HostConfigLogConfig {
                typ: Some("none".into()),
                config: None,
            }),
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(env.id.clone()),
            cmd: Some(vec!["bash".into(), "/patchgrade-run.sh".into()]),
            working_dir: Some(image::TESTBED.into()),
            labels: Some(HashMap::from([
                ("patchgrade.run_id".to_string(), self.run_id.clone()),
                ("patchgrade.image".to_string(), env.image.clone()),
            ])),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            network_disabled: Some(!rs.spec.network),
            host_config: Some(host),
            ..Default::default()
        };
        let opts = CreateContainerOptionsBuilder::default().name(&name).build();
        let created = self
            .call(
                "create container",
                self.docker().await?.create_container(Some(opts), body),
            )
            .await?;
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(created.id.clone());
        Ok(created.id)
    }

    /// Remove every container this backend has running (second Ctrl-C).
    pub async fn kill_running(&self) {
        let Some(conn) = self.conn.get() else { return };
        let ids: Vec<String> = self
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect();
        for id in ids {
            remove_container(&conn.docker, &id).await;
        }
    }

    /// End of run: remove images per `--cache-level` and `--clean`.
    pub async fn finish(&self) {
        self.kill_running().await;
        let Some(conn) = self.conn.get() else { return };
        let used: Vec<Used> = self
            .used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect();
        // Instances first: a tier's images hold up its parents.
        for u in used.iter().rev() {
            if !image::should_remove(
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

/// Force-remove a container, waiting until it is gone.
async fn remove_container(docker: &Docker, id: &str) {
    let opts = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    for _ in 0..50 {
        match tokio::time::timeout(API_TIMEOUT, docker.remove_container(id, Some(opts.clone())))
            .await
        {
            Ok(Ok(())) => return,
            Ok(Err(e)) if is_status(&e, &[404]) => return,
            // 409: the engine is removing it already (auto-remove); wait.
            Ok(Err(e)) if is_status(&e, &[409]) => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Ok(Err(e)) => {
                tracing::warn!("could not remove container {id}: {e}");
                return;
            }
            Err(_) => {
                tracing::warn!(
                    "removing container {id}: no answer within {}s",
                    API_TIMEOUT.as_secs()
                );
                return;
            }
        }
    }
}

/// Removes its container when dropped without [`ContainerGuard::remove`]
/// (an error path, a panic, a cancelled future).
struct ContainerGuard {
    docker: Docker,
    id: String,
    live: Arc<Mutex<HashSet<String>>>,
    armed: bool,
}

impl ContainerGuard {
    async fn remove(mut self) {
        self.armed = false;
        remove_container(&self.docker, &self.id).await;
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (docker, id, live) = (self.docker.clone(), self.id.clone(), self.live.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                remove_container(&docker, &id).await;
                live.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_needs_a_200_from_the_socket() {
        use std::io::{Read, Write};
        let d = tempfile::tempdir().unwrap();
        let sock = d.path().join("d.sock");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let server = std::thread::spawn(move || {
            for answer in [
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK",
                "HTTP/1.1 500 Internal Server Error\r\n\r\n",
            ] {
                let (mut c, _) = listener.accept().unwrap();
                let mut buf = [0u8; 256];
                let _ = c.read(&mut buf).unwrap();
                c.write_all(answer.as_bytes()).unwrap();
            }
        });
        let ep = format!("unix://{}", sock.display());
        ping(&ep).unwrap();
        let e = ping(&ep).unwrap_err().to_string();
        assert!(e.contains("500") && e.contains("d.sock"), "{e}");
        server.join().unwrap();
        let e = ping(&format!("unix://{}", d.path().join("none.sock").display())).unwrap_err();
        assert!(matches!(e, DockerError::Unreachable { .. }), "{e}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4g").unwrap(), 4 << 30);
        assert_eq!(parse_size("512m").unwrap(), 512 << 20);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_size("1024").unwrap(), 1024);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("-1g").is_err());
    }

    #[test]
    fn changes_cover_added_modified_deleted_and_ignored_files() {
        let d = tempfile::tempdir().unwrap();
        let r = git2::Repository::init(d.path()).unwrap();
        for (p, body) in [
            ("a.py", "a\n"),
            ("gone.py", "g\n"),
            (".gitignore", "build/\n"),
            ("bin/run", "#!/bin/sh\n"),
        ] {
            let full = d.path().join(p);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, body).unwrap();
        }
        let mut idx = r.index().unwrap();
        idx.add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        idx.write().unwrap();
        let tree = r.find_tree(idx.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@t").unwrap();
        r.commit(Some("HEAD"), &sig, &sig, "base", &tree, &[])
            .unwrap();
        assert!(candidate_changes(d.path()).unwrap().upload.is_empty());

        std::fs::write(d.path().join("a.py"), "b\n").unwrap();
        std::fs::remove_file(d.path().join("gone.py")).unwrap();
        std::fs::create_dir_all(d.path().join("new/deep")).unwrap();
        std::fs::write(d.path().join("new/deep/n.py"), "n\n").unwrap();
        std::fs::create_dir_all(d.path().join("build")).unwrap();
        std::fs::write(d.path().join("build/x.py"), "x\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            d.path().join("bin/run"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let c = candidate_changes(d.path()).unwrap();
        let up: Vec<String> = c.upload.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(up, ["a.py", "bin/run", "build/x.py", "new/deep/n.py"]);
        assert_eq!(c.delete, [PathBuf::from("gone.py")]);

        let bytes = run_archive(d.path(), &c, "echo hi\n", 99, false).unwrap();
        let mut ar = tar::Archive::new(bytes.as_slice());
        let mut names = Vec::new();
        let mut launcher = String::new();
        for e in ar.entries().unwrap() {
            let mut e = e.unwrap();
            let p = e.path().unwrap().display().to_string();
            if p == "testbed/bin/run" {
                assert_eq!(e.header().mode().unwrap(), 0o755);
            }
            if p == "patchgrade-run.sh" {
                std::io::Read::read_to_string(&mut e, &mut launcher).unwrap();
            }
            names.push(p);
        }
        assert!(
            names.contains(&"eval.sh".to_string())
                && names.contains(&"testbed/new/deep/n.py".to_string()),
            "{names:?}"
        );
        assert!(
            launcher.contains("rm -f -- 'gone.py'") && launcher.contains("timeout -s KILL 99"),
            "{launcher}"
        );
    }
}
