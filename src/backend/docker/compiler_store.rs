//! The compiler cache store: one ccache storage in the cache folder
//! (`<cache>/docker/ccache`), shared by every image build on this host
//! that compiles through ccache (the snapshots and instance images of
//! `snapshot_build` specs), served to the builds over HTTP as ccache's
//! remote storage.
//!
//! A snapshot's own compiler cache (`images::setup::COMPILER_CACHE`) only
//! helps the instances over it: every other snapshot of the repository
//! compiled everything from nothing (matplotlib's 13: 862 s; scikit-learn's
//! 9: about 1,580 s), although a window's sources are mostly the previous
//! window's. Through the store a snapshot finds what earlier snapshots and
//! instances compiled, and a second cold run (images removed, the cache
//! folder kept) finds everything. A classic build cannot mount a folder, so
//! the store is served on the engine's bridge gateway, which build
//! containers reach; each process serves it under a secret path segment
//! (the build reads it from a file its setup removes), so a test container
//! with network cannot read or write it. A hit is ccache's own check: the
//! key covers the preprocessed source, the compiler and its arguments.
//! Cython's translated modules are kept here too, in a `cython/` folder
//! (`images::setup`'s Cython hook fetches and stores them under Cython's
//! own fingerprint).
//!
//! The store itself ([`Store`]) is plain file code: entries written
//! atomically, their times the LRU order, trimmed to [`STORE_MAX`].

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use bollard::models::IpamConfig;

/// The store's folder in `<cache>/docker`.
pub const STORE_DIR: &str = "ccache";

/// Largest the store may grow; the least recently used entries go first
/// when a run starts above it. A cold run of all of Verified stores far
/// less (a snapshot's whole cache is 5 MiB for matplotlib).
pub const STORE_MAX: u64 = 4 << 30;

/// Largest entry a build may store (ccache's result files: an object file,
/// compressed).
const ENTRY_MAX: usize = 512 << 20;

/// What the store holds, or what a trim removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    pub files: u64,
    pub bytes: u64,
}

/// The store's folder and its entries, named by the path ccache asks for.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The store of a cache folder's `docker` folder.
    pub fn new(docker_cache: &Path) -> Store {
        Store {
            dir: docker_cache.join(STORE_DIR),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of entry `key` (ccache's URL path below the store's, e.g.
    /// `3f/0b…R` with `layout=subdirs`); None for anything else: at most
    /// two segments of letters, digits, `.`, `_` and `-`, none starting
    /// with a dot (temporary files do).
    fn path_of(&self, key: &str) -> Option<PathBuf> {
        let segments: Vec<&str> = key.split('/').collect();
        let good = |s: &&str| {
            !s.is_empty()
                && s.len() <= 200
                && !s.starts_with('.')
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        };
        (segments.len() <= 2 && segments.iter().all(good))
            .then(|| segments.iter().fold(self.dir.clone(), |p, s| p.join(s)))
    }

    /// Entry `key`'s bytes, marked used now; None when absent or not a key.
    pub fn get(&self, key: &str) -> std::io::Result<Option<Vec<u8>>> {
        let Some(path) = self.path_of(key) else {
            return Ok(None);
        };
        match std::fs::read(&path) {
            Ok(data) => {
                touch(&path);
                Ok(Some(data))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn contains(&self, key: &str) -> bool {
        self.path_of(key).is_some_and(|p| p.is_file())
    }

    /// Stores `data` as entry `key`: written beside it, then renamed, so a
    /// reader (another build, another process) never sees half an entry.
    /// False when `key` is not a key.
    pub fn put(&self, key: &str, data: &[u8]) -> std::io::Result<bool> {
        let Some(path) = self.path_of(key) else {
            return Ok(false);
        };
        let parent = path.parent().unwrap_or(&self.dir);
        std::fs::create_dir_all(parent)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".put")
            .tempfile_in(parent)?;
        std::io::Write::write_all(&mut tmp, data)?;
        tmp.persist(&path).map_err(|e| e.error)?;
        Ok(true)
    }

    /// Removes entry `key`; whether it was there.
    pub fn remove(&self, key: &str) -> std::io::Result<bool> {
        let Some(path) = self.path_of(key) else {
            return Ok(false);
        };
        match std::fs::remove_file(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every entry with its size and last use.
    fn entries(&self) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
        let mut out = Vec::new();
        let mut dirs = vec![self.dir.clone()];
        while let Some(d) = dirs.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let Ok(m) = e.metadata() else { continue };
                if m.is_dir() {
                    dirs.push(e.path());
                } else if m.is_file() {
                    let used = m.modified().unwrap_or(std::time::UNIX_EPOCH);
                    out.push((e.path(), m.len(), used));
                }
            }
        }
        out
    }

    pub fn usage(&self) -> Usage {
        self.entries()
            .iter()
            .fold(Usage::default(), |u, (_, len, _)| Usage {
                files: u.files + 1,
                bytes: u.bytes + len,
            })
    }

    /// Removes the least recently used entries until the store holds at
    /// most `max` bytes; what was removed.
    pub fn trim(&self, max: u64) -> Usage {
        let mut entries = self.entries();
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        entries.sort_by_key(|e| e.2);
        let mut removed = Usage::default();
        for (path, len, _) in entries {
            if total <= max {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
                removed.files += 1;
                removed.bytes += len;
            }
        }
        removed
    }
}

/// Marks an entry used now (its time is the LRU order); a failure only
/// makes it older.
fn touch(path: &Path) {
    if let Ok(f) = std::fs::File::options().append(true).open(path) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
}

/// What builds asked of the store while it was served.
#[derive(Debug, Default)]
pub struct Counters {
    pub looked_up: AtomicU64,
    pub found: AtomicU64,
    pub stored: AtomicU64,
    pub refused: AtomicU64,
}

struct Shared {
    store: Store,
    secret: String,
    counters: Arc<Counters>,
}

/// The store served over HTTP until dropped.
pub struct Served {
    remote: String,
    counters: Arc<Counters>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Served {
    /// Serves `store` on `ip` (a port the system picks) under a new secret
    /// path segment. Fails when `ip` is not this host's.
    pub async fn start(store: Store, ip: IpAddr) -> std::io::Result<Served> {
        std::fs::create_dir_all(store.dir())?;
        let listener = tokio::net::TcpListener::bind((ip, 0)).await?;
        let addr = listener.local_addr()?;
        let secret = new_secret()?;
        let counters = Arc::new(Counters::default());
        let shared = Arc::new(Shared {
            store,
            secret: secret.clone(),
            counters: counters.clone(),
        });
        let app = Router::new()
            .route("/{secret}/{*key}", any(entry))
            .layer(DefaultBodyLimit::max(ENTRY_MAX))
            .with_state(shared);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let served = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(e) = served.await {
                tracing::warn!("the compiler cache store stopped: {e}");
            }
        });
        Ok(Served {
            // ccache's remote storage line: keys as <2 chars>/<rest>, the
            // connection kept open between a build's compiler runs.
            remote: format!("http://{addr}/{secret}|layout=subdirs|keep-alive=true"),
            counters,
            stop: Some(stop),
        })
    }

    /// ccache's `remote_storage` value for a build (holds the secret).
    pub fn remote_storage(&self) -> &str {
        &self.remote
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }
}

// Not derived: the address holds the secret.
impl std::fmt::Debug for Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Served").finish_non_exhaustive()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// 128 random bits as hex, from the system's random source.
fn new_secret() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// One request of ccache's HTTP storage protocol: GET and HEAD read,
/// PUT stores, DELETE removes; 404 for a wrong secret or a bad key.
async fn entry(
    State(shared): State<Arc<Shared>>,
    UrlPath((secret, key)): UrlPath<(String, String)>,
    method: Method,
    body: Bytes,
) -> Response {
    let c = &shared.counters;
    if secret != shared.secret {
        c.refused.fetch_add(1, Ordering::Relaxed);
        return StatusCode::NOT_FOUND.into_response();
    }
    let store = shared.store.clone();
    let counters = shared.counters.clone();
    let done = tokio::task::spawn_blocking(move || -> std::io::Result<Response> {
        let c = &counters;
        Ok(match method {
            Method::GET => {
                c.looked_up.fetch_add(1, Ordering::Relaxed);
                match store.get(&key)? {
                    Some(data) => {
                        c.found.fetch_add(1, Ordering::Relaxed);
                        data.into_response()
                    }
                    None => StatusCode::NOT_FOUND.into_response(),
                }
            }
            Method::HEAD => match store.contains(&key) {
                true => StatusCode::OK.into_response(),
                false => StatusCode::NOT_FOUND.into_response(),
            },
            Method::PUT => match store.put(&key, &body)? {
                true => {
                    c.stored.fetch_add(1, Ordering::Relaxed);
                    StatusCode::CREATED.into_response()
                }
                false => StatusCode::NOT_FOUND.into_response(),
            },
            Method::DELETE => match store.remove(&key)? {
                true => StatusCode::NO_CONTENT.into_response(),
                false => StatusCode::NOT_FOUND.into_response(),
            },
            _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
        })
    })
    .await;
    match done {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            tracing::warn!("the compiler cache store: {e}");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
        Err(e) => {
            tracing::warn!("the compiler cache store: {e}");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

impl super::DockerBackend {
    /// ccache's remote storage line for a build that compiles through the
    /// store, which is trimmed and served on first use. None when the
    /// engine's bridge gateway is not this host's (a remote engine) or the
    /// store cannot be served: the build then compiles as without it.
    pub(super) async fn compiler_remote(&self) -> Option<String> {
        let served = self
            .compiler_store
            .get_or_init(|| async {
                match self.serve_compiler_store().await {
                    Ok(s) => Some(s),
                    Err(e) => {
                        // Every compile is then cold: a run's builds take
                        // several times longer, so it is said.
                        tracing::warn!("builds compile without the compiler cache store: {e}");
                        None
                    }
                }
            })
            .await;
        served.as_ref().map(|s| s.remote_storage().to_string())
    }

    /// [`Self::compiler_remote`] for a build of `spec`'s images: only a
    /// `snapshot_build` spec's builds compile through the store.
    pub(super) async fn compiler_remote_for(&self, spec: &crate::spec::Spec) -> Option<String> {
        match spec.snapshot_build {
            true => self.compiler_remote().await,
            false => None,
        }
    }

    async fn serve_compiler_store(&self) -> Result<Served, String> {
        let docker = self.docker().await.map_err(|e| e.to_string())?;
        let bridge = super::engine::call(
            "inspect the bridge network",
            docker.inspect_network("bridge", None),
        )
        .await
        .map_err(|e| e.to_string())?;
        let configs = bridge.ipam.and_then(|i| i.config).unwrap_or_default();
        let gateway = bridge_gateway(&configs)
            .ok_or("the bridge network has neither a gateway nor an IPv4 subnet")?;
        let store = Store::new(&self.scratch);
        let trim = store.clone();
        let removed = tokio::task::spawn_blocking(move || trim.trim(STORE_MAX))
            .await
            .map_err(|e| e.to_string())?;
        if removed.files > 0 {
            tracing::info!(
                "the compiler cache store: {} least recently used entries removed ({} MiB)",
                removed.files,
                removed.bytes >> 20
            );
        }
        let served = Served::start(store, gateway)
            .await
            .map_err(|e| format!("serving it on {gateway}: {e}"))?;
        tracing::info!("the compiler cache store is served to builds on {gateway}");
        Ok(served)
    }

    /// What the run's builds asked of the store, for the log.
    pub(super) fn compiler_store_said(&self) {
        if let Some(Some(s)) = self.compiler_store.get() {
            let c = s.counters();
            tracing::info!(
                "the compiler cache store: {} looked up, {} found, {} stored",
                c.looked_up.load(Ordering::Relaxed),
                c.found.load(Ordering::Relaxed),
                c.stored.load(Ordering::Relaxed)
            );
        }
    }
}

/// The address builds reach the host on: the bridge network's gateway,
/// from its IPAM configurations. An engine whose
/// default bridge lists only its subnet (dockerd 20.10 started where
/// `docker0` already had its address) gives its bridge the subnet's first
/// host address, as Docker's IPAM does.
fn bridge_gateway(configs: &[IpamConfig]) -> Option<IpAddr> {
    let given = configs
        .iter()
        .find_map(|c| c.gateway.as_deref()?.parse::<IpAddr>().ok());
    given.or_else(|| {
        configs.iter().find_map(|c| {
            let (net, _) = c.subnet.as_deref()?.split_once('/')?;
            let net: std::net::Ipv4Addr = net.parse().ok()?;
            Some(IpAddr::V4(std::net::Ipv4Addr::from(u32::from(net) + 1)))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_is_the_given_one_or_the_subnets_first_host() {
        let c = |g: Option<&str>, n: Option<&str>| IpamConfig {
            gateway: g.map(String::from),
            subnet: n.map(String::from),
            ..Default::default()
        };
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert_eq!(
            bridge_gateway(&[c(Some("172.18.0.1"), Some("172.18.0.0/16"))]),
            ip("172.18.0.1")
        );
        // dockerd 20.10's default bridge on this machine: a subnet alone.
        assert_eq!(
            bridge_gateway(&[c(None, Some("172.17.0.0/16"))]),
            ip("172.17.0.1")
        );
        // A given gateway wins over any subnet; an IPv6 subnet is not used.
        assert_eq!(
            bridge_gateway(&[c(None, Some("10.1.0.0/24")), c(Some("10.2.0.1"), None)]),
            ip("10.2.0.1")
        );
        assert_eq!(bridge_gateway(&[c(None, Some("fd00::/64"))]), None);
        assert_eq!(bridge_gateway(&[]), None);
    }

    #[test]
    fn keys_are_at_most_two_plain_segments() {
        let s = Store::new(Path::new("/c"));
        assert_eq!(
            s.path_of("ab/cdefR"),
            Some(PathBuf::from("/c/ccache/ab/cdefR"))
        );
        assert_eq!(
            s.path_of("abcdefM"),
            Some(PathBuf::from("/c/ccache/abcdefM"))
        );
        for bad in [
            "", "a/b/c", "../x", "ab/..", "ab/.putX", "a b", "ab//c", "/ab",
        ] {
            assert_eq!(s.path_of(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn an_entry_is_stored_read_and_removed() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::new(t.path());
        assert_eq!(s.get("ab/cd").unwrap(), None);
        assert!(s.put("ab/cd", b"object").unwrap());
        assert!(s.contains("ab/cd"));
        assert_eq!(s.get("ab/cd").unwrap().as_deref(), Some(&b"object"[..]));
        assert!(!s.put("../cd", b"x").unwrap());
        assert_eq!(s.usage(), Usage { files: 1, bytes: 6 });
        assert!(s.remove("ab/cd").unwrap());
        assert!(!s.remove("ab/cd").unwrap());
        assert_eq!(s.usage(), Usage::default());
    }

    #[test]
    fn a_trim_removes_the_least_recently_used_first() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::new(t.path());
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for (i, key) in ["aa/1", "bb/2", "cc/3"].iter().enumerate() {
            s.put(key, &[0u8; 100]).unwrap();
            let f = std::fs::File::options()
                .append(true)
                .open(s.path_of(key).unwrap())
                .unwrap();
            f.set_modified(old + std::time::Duration::from_secs(i as u64))
                .unwrap();
        }
        // Reading the oldest makes it the newest.
        s.get("aa/1").unwrap();
        assert_eq!(
            s.trim(150),
            Usage {
                files: 2,
                bytes: 200
            }
        );
        assert!(s.contains("aa/1"));
        assert!(!s.contains("bb/2") && !s.contains("cc/3"));
        assert_eq!(s.trim(150), Usage::default());
    }

    /// ccache's protocol against the real server: what a build stores is
    /// read back; a request without the secret neither reads nor writes.
    #[tokio::test]
    async fn the_store_is_served_only_under_its_secret() {
        let t = tempfile::tempdir().unwrap();
        let store = Store::new(t.path());
        let served = Served::start(store.clone(), "127.0.0.1".parse().unwrap())
            .await
            .unwrap();
        let url = served
            .remote_storage()
            .split('|')
            .next()
            .unwrap()
            .to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        let (base, secret) = url.rsplit_once('/').unwrap();
        assert_eq!(secret.len(), 32);
        let wrong = format!("{base}/{}", "0".repeat(32));
        store.put("ab/cdR", b"object").unwrap();
        let (url2, wrong2) = (url.clone(), wrong.clone());
        let statuses = tokio::task::spawn_blocking(move || {
            let status = |r: Result<ureq::http::Response<ureq::Body>, ureq::Error>| match r {
                Ok(r) => r.status().as_u16(),
                Err(ureq::Error::StatusCode(c)) => c,
                Err(e) => panic!("{e}"),
            };
            let mut got = ureq::get(format!("{url2}/ab/cdR")).call().unwrap();
            let body = got.body_mut().read_to_vec().ok();
            vec![
                status(ureq::get(format!("{url2}/ab/missing")).call()),
                status(ureq::put(format!("{wrong2}/ab/evilR")).send(&b"bad"[..])),
                status(ureq::get(format!("{wrong2}/ab/cdR")).call()),
                status(ureq::put(format!("{url2}/ab/..%2Fx")).send(&b"x"[..])),
                status(ureq::put(format!("{url2}/ab/newR")).send(&b"new object"[..])),
                status(ureq::head(format!("{url2}/ab/newR")).call()),
                body.map_or(0, |b| b.len() as u16),
            ]
        });
        let statuses = statuses.await.unwrap();
        assert_eq!(statuses, vec![404, 404, 404, 404, 201, 200, 6]);
        assert!(!store.contains("ab/evilR"));
        assert_eq!(
            store.get("ab/newR").unwrap().as_deref(),
            Some(&b"new object"[..])
        );
        let c = served.counters();
        assert_eq!(c.stored.load(Ordering::Relaxed), 1);
        assert_eq!(c.refused.load(Ordering::Relaxed), 2);
    }
}
