//! The one layer over the Docker Engine API that the docker backend, the
//! swarm backend and perf share: an engine call with a hard time limit and
//! its error ([`call`], [`ApiError`]), removal on every path ([`Guard`]:
//! what it holds is removed when it is dropped, on an error path, a panic
//! or a cancelled future), and one script run in one container of an image
//! ([`create`], then [`Container::run`]: upload or inline archive, attach,
//! start, output, exit; then [`Container::remove`]).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder,
    RemoveImageOptionsBuilder, StartContainerOptions, UploadToContainerOptionsBuilder,
    WaitContainerOptions,
};
use bollard::{body_full, Docker};
use futures_util::StreamExt;

use super::exits::{Ended, ExitWatch};
use super::locked;

/// Limit on one short engine call (create, upload, start, remove, inspect).
pub const API_TIMEOUT: Duration = Duration::from_secs(120);

/// One engine call failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("docker {op}: {source}")]
    Api {
        op: String,
        source: bollard::errors::Error,
    },
    #[error("docker {op} did not answer within {secs}s")]
    Timeout { op: String, secs: u64 },
}

impl ApiError {
    /// Whether the engine answered with one of these HTTP status codes.
    pub fn is_status(&self, codes: &[u16]) -> bool {
        matches!(self, ApiError::Api { source, .. } if is_status(source, codes))
    }
}

impl From<ApiError> for crate::backend::InfraError {
    fn from(e: ApiError) -> Self {
        crate::backend::InfraError::Other(e.to_string())
    }
}

/// One engine call named `op`, with a hard time limit ([`API_TIMEOUT`]).
pub async fn call<T>(
    op: &str,
    fut: impl Future<Output = Result<T, bollard::errors::Error>>,
) -> Result<T, ApiError> {
    within(op, API_TIMEOUT, fut).await
}

/// One engine call named `op`, with the time limit `limit`.
pub async fn within<T>(
    op: &str,
    limit: Duration,
    fut: impl Future<Output = Result<T, bollard::errors::Error>>,
) -> Result<T, ApiError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(source)) => Err(ApiError::Api {
            op: op.to_string(),
            source,
        }),
        Err(_) => Err(ApiError::Timeout {
            op: op.to_string(),
            secs: limit.as_secs(),
        }),
    }
}

/// Whether the engine answered with one of these HTTP status codes.
pub fn is_status(e: &bollard::errors::Error, codes: &[u16]) -> bool {
    matches!(e, bollard::errors::Error::DockerResponseServerError { status_code, .. } if codes.contains(status_code))
}

/// Something on the engine that a [`Guard`] removes.
pub trait Removable: Clone + Eq + Hash + Send + Sync + 'static {
    /// Removes `items`, in an order the engine accepts, waiting until each
    /// is gone or cannot be removed (then only logged: removal is best
    /// effort on every path).
    fn remove_all(docker: &Docker, items: Vec<Self>) -> impl Future<Output = ()> + Send;
}

/// What a backend has on the engine now, for removing it all at once
/// (second Ctrl-C, the end of a run).
pub type Live<T> = Arc<Mutex<HashSet<T>>>;

/// Removes what it holds when dropped without [`Guard::remove`] (an error
/// path, a panic, a cancelled future); keeps `live` up to date.
pub struct Guard<T: Removable> {
    docker: Docker,
    items: Vec<T>,
    live: Live<T>,
}

impl<T: Removable> Guard<T> {
    pub fn new(docker: &Docker, live: &Live<T>) -> Guard<T> {
        Guard {
            docker: docker.clone(),
            items: Vec::new(),
            live: live.clone(),
        }
    }

    /// Holds `item` from now on (and lists it as live).
    pub fn add(&mut self, item: T) {
        locked(&self.live).insert(item.clone());
        self.items.push(item);
    }

    /// The items `pick` chooses, moved to a guard of their own.
    pub fn split_off(&mut self, pick: impl Fn(&T) -> bool) -> Guard<T> {
        let (picked, kept) = std::mem::take(&mut self.items).into_iter().partition(pick);
        self.items = kept;
        Guard {
            docker: self.docker.clone(),
            items: picked,
            live: self.live.clone(),
        }
    }

    /// Removes everything held, waiting until it is gone.
    pub async fn remove(mut self) {
        let items = std::mem::take(&mut self.items);
        remove_listed(&self.docker, items, &self.live).await;
    }

    /// Removes everything held in the background (on the current runtime).
    pub fn remove_later(mut self) -> Option<tokio::task::JoinHandle<()>> {
        let items = std::mem::take(&mut self.items);
        spawn_removal(&self.docker, items, &self.live)
    }
}

impl<T: Removable> Drop for Guard<T> {
    fn drop(&mut self) {
        let items = std::mem::take(&mut self.items);
        spawn_removal(&self.docker, items, &self.live);
    }
}

async fn remove_listed<T: Removable>(docker: &Docker, items: Vec<T>, live: &Live<T>) {
    if items.is_empty() {
        return;
    }
    T::remove_all(docker, items.clone()).await;
    let mut live = locked(live);
    for i in &items {
        live.remove(i);
    }
}

fn spawn_removal<T: Removable>(
    docker: &Docker,
    items: Vec<T>,
    live: &Live<T>,
) -> Option<tokio::task::JoinHandle<()>> {
    if items.is_empty() {
        return None;
    }
    let (docker, live) = (docker.clone(), live.clone());
    let rt = tokio::runtime::Handle::try_current().ok()?;
    Some(rt.spawn(async move { remove_listed(&docker, items, &live).await }))
}

/// A container, by id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ContainerId(pub String);

impl Removable for ContainerId {
    async fn remove_all(docker: &Docker, items: Vec<Self>) {
        for ContainerId(id) in items {
            remove_container(docker, &id).await;
        }
    }
}

/// Removes images, never forced (the engine refuses one a container was
/// made from), a few at once, wave after wave (children's waves first);
/// `each` hears every image's outcome as it comes. Removals of images that
/// share untagged parents race in the engine (Docker 20.10 refused 3 of 275
/// with "unrecognized image ID", and such an image was gone afterwards), so
/// a refused one is tried once more, alone, after its wave; gone by then
/// (404) counts as removed.
pub async fn remove_images(
    docker: &Docker,
    waves: Vec<Vec<String>>,
    mut each: impl FnMut(String, Result<(), ApiError>),
) {
    let remove = |name: String| async move {
        let opts = RemoveImageOptionsBuilder::default().force(false).build();
        let r = call("remove image", docker.remove_image(&name, Some(opts), None)).await;
        (name, r.map(drop))
    };
    for wave in waves {
        let mut results = futures_util::stream::iter(wave)
            .map(remove)
            .buffer_unordered(4);
        let mut refused = Vec::new();
        while let Some((name, r)) = results.next().await {
            match r {
                Ok(()) => each(name, Ok(())),
                Err(_) => refused.push(name),
            }
        }
        for name in refused {
            let (name, r) = remove(name).await;
            match r {
                Err(e) if e.is_status(&[404]) => each(name, Ok(())),
                r => each(name, r),
            }
        }
    }
}

/// Force-remove a container, waiting until it is gone.
pub async fn remove_container(docker: &Docker, id: &str) {
    let opts = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    for _ in 0..50 {
        match call(
            "remove container",
            docker.remove_container(id, Some(opts.clone())),
        )
        .await
        {
            Ok(()) => return,
            Err(e) if e.is_status(&[404]) => return,
            // 409: the engine is removing it already (auto-remove); wait.
            Err(e) if e.is_status(&[409]) => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(ApiError::Api { source, .. }) => {
                tracing::warn!("could not remove container {id}: {source}");
                return;
            }
            Err(ApiError::Timeout { secs, .. }) => {
                tracing::warn!("removing container {id}: no answer within {secs}s");
                return;
            }
        }
    }
}

/// One container to create: what runs in it, from which image, with which
/// limits and labels. Its output is attached, never logged by the engine.
#[derive(Debug, Clone)]
pub struct ContainerSpec {
    pub name: String,
    /// Image id or name.
    pub image: String,
    pub cmd: Vec<String>,
    pub working_dir: String,
    pub labels: HashMap<String, String>,
    /// Bridge network; else none (loopback only).
    pub network: bool,
    /// NET_ADMIN, for the spec's `blackhole_routes`.
    pub net_admin: bool,
    /// Memory limit, swap included, bytes.
    pub memory: i64,
    pub nano_cpus: Option<i64>,
    pub cpuset: Option<String>,
    pub pids_limit: i64,
    /// The engine removes it once its command ends, even if patchgrade is
    /// gone by then (patchgrade also removes it on every path).
    pub auto_remove: bool,
}

impl ContainerSpec {
    fn body(&self) -> ContainerCreateBody {
        let host = HostConfig {
            init: Some(true),
            network_mode: Some(if self.network { "bridge" } else { "none" }.into()),
            memory: Some(self.memory),
            memory_swap: Some(self.memory),
            nano_cpus: self.nano_cpus,
            cpuset_cpus: self.cpuset.clone(),
            pids_limit: Some(self.pids_limit),
            cap_add: self.net_admin.then(|| vec!["NET_ADMIN".to_string()]),
            auto_remove: self.auto_remove.then_some(true),
            log_config: Some(HostConfigLogConfig {
                typ: Some("none".into()),
                config: None,
            }),
            ..Default::default()
        };
        ContainerCreateBody {
            image: Some(self.image.clone()),
            cmd: Some(self.cmd.clone()),
            working_dir: Some(self.working_dir.clone()),
            labels: Some(self.labels.clone()),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            // No `network_disabled`: network mode "none" already leaves only
            // loopback, and a disabled network also drops the engine's
            // /etc/hosts, so `localhost` stops resolving (Django's live
            // server tests bind to it: django__django-13809).
            host_config: Some(host),
            ..Default::default()
        }
    }
}

/// A created container, removed on every path (see [`Guard`]).
pub struct Container {
    docker: Docker,
    pub id: String,
    guard: Guard<ContainerId>,
}

/// Creates the container `spec` describes; it is listed in `live` until it
/// is removed.
pub async fn create(
    docker: &Docker,
    spec: &ContainerSpec,
    live: &Live<ContainerId>,
) -> Result<Container, ApiError> {
    let opts = CreateContainerOptionsBuilder::default()
        .name(&spec.name)
        .build();
    let created = call(
        "create container",
        docker.create_container(Some(opts), spec.body()),
    )
    .await?;
    let mut guard = Guard::new(docker, live);
    guard.add(ContainerId(created.id.clone()));
    Ok(Container {
        docker: docker.clone(),
        id: created.id,
        guard,
    })
}

/// How a [`Container::run`] goes.
pub struct RunPlan<'a> {
    /// A tar uploaded at `/` before the start; `None` when the command
    /// carries its files itself.
    pub upload: Option<Vec<u8>>,
    /// Limit on the output, from the start; `None`: none here.
    pub deadline: Option<Duration>,
    /// Stops the run when it turns true.
    pub cancel: Option<tokio::sync::watch::Receiver<bool>>,
    /// Watch the engine's events to say how the container ended.
    pub watch_exit: bool,
    /// Ask the engine for the command's exit code once the output ends.
    pub wait_code: bool,
    /// Every chunk of output, as it comes.
    pub output: &'a mut (dyn FnMut(LogOutput) + Send),
}

/// How the output stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The command ended (the output stream closed).
    Ended,
    TimedOut,
    Cancelled,
}

/// Seconds each phase of a run took.
#[derive(Debug, Clone, Copy, Default)]
pub struct Phases {
    pub upload: f64,
    pub attach: f64,
    pub start: f64,
    /// Start to the end of the output.
    pub run: f64,
}

/// What one container run gave.
#[derive(Debug)]
pub struct ContainerRan {
    pub stop: Stop,
    pub phases: Phases,
    /// When the output stopped.
    pub stopped_at: Instant,
    /// From the engine's events (with `watch_exit`, once the command ended).
    pub ended: Option<Ended>,
    /// The command's exit code (with `wait_code`, once it ended).
    pub code: Option<i64>,
}

/// A run that did not finish.
#[derive(Debug)]
pub enum RunFailure {
    /// An engine call failed.
    Call(ApiError),
    /// The output stream broke.
    Stream(bollard::errors::Error),
}

impl From<ApiError> for RunFailure {
    fn from(e: ApiError) -> Self {
        RunFailure::Call(e)
    }
}

impl Container {
    /// Uploads, attaches, starts, and reads the output until the command
    /// ends, the deadline passes or `cancel` fires; the container stays
    /// (see [`Container::remove`]).
    pub async fn run(&self, plan: RunPlan<'_>) -> Result<ContainerRan, RunFailure> {
        let (docker, id) = (&self.docker, self.id.as_str());
        let mut phases = Phases::default();
        if let Some(archive) = plan.upload {
            let t = Instant::now();
            let upload = UploadToContainerOptionsBuilder::default().path("/").build();
            call(
                "upload to container",
                docker.upload_to_container(id, Some(upload), body_full(archive.into())),
            )
            .await?;
            phases.upload = t.elapsed().as_secs_f64();
        }
        let t = Instant::now();
        let attach = AttachContainerOptionsBuilder::default()
            .stream(true)
            .stdout(true)
            .stderr(true)
            .logs(false)
            .build();
        let mut output = call("attach", docker.attach_container(id, Some(attach)))
            .await?
            .output;
        phases.attach = t.elapsed().as_secs_f64();
        let watch = plan.watch_exit.then(|| ExitWatch::start(docker, id));
        let t = Instant::now();
        call(
            "start container",
            docker.start_container(id, None::<StartContainerOptions>),
        )
        .await?;
        phases.start = t.elapsed().as_secs_f64();
        let t = Instant::now();

        let deadline = async {
            match plan.deadline {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(deadline);
        let mut cancel = plan.cancel;
        let interrupted = async move {
            let fired = match cancel.as_mut() {
                Some(c) => c.wait_for(|c| *c).await.is_ok(),
                None => false,
            };
            if !fired {
                // No sender any more: nothing can interrupt this run.
                std::future::pending::<()>().await;
            }
        };
        tokio::pin!(interrupted);
        let stop = loop {
            tokio::select! {
                item = output.next() => match item {
                    Some(Ok(chunk)) => (plan.output)(chunk),
                    Some(Err(e)) => return Err(RunFailure::Stream(e)),
                    None => break Stop::Ended,
                },
                _ = &mut deadline => break Stop::TimedOut,
                _ = &mut interrupted => break Stop::Cancelled,
            }
        };
        phases.run = t.elapsed().as_secs_f64();
        let stopped_at = Instant::now();
        drop(output);
        let mut ran = ContainerRan {
            stop,
            phases,
            stopped_at,
            ended: None,
            code: None,
        };
        if stop != Stop::Ended {
            return Ok(ran);
        }
        if let Some(watch) = watch {
            ran.ended = Some(watch.ended(Duration::from_secs(10)).await);
        }
        if plan.wait_code {
            let mut wait = docker.wait_container(id, None::<WaitContainerOptions>);
            ran.code = match wait.next().await {
                Some(Ok(r)) => Some(r.status_code),
                Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => {
                    Some(code)
                }
                _ => None,
            };
        }
        Ok(ran)
    }

    /// Removes the container, waiting until it is gone.
    pub async fn remove(self) {
        self.guard.remove().await;
    }

    /// Removes the container in the background.
    pub fn remove_later(self) -> Option<tokio::task::JoinHandle<()>> {
        self.guard.remove_later()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ContainerSpec {
        ContainerSpec {
            name: "n".into(),
            image: "sha256:1".into(),
            cmd: vec!["bash".into(), "/run.sh".into()],
            working_dir: "/testbed".into(),
            labels: HashMap::from([("k".to_string(), "v".to_string())]),
            network: false,
            net_admin: true,
            memory: 1 << 30,
            nano_cpus: Some(2_000_000_000),
            cpuset: None,
            pids_limit: 64,
            auto_remove: true,
        }
    }

    #[test]
    fn a_spec_gives_the_limits_and_keeps_localhost() {
        let body = spec().body();
        let host = body.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        // Swap is the memory limit itself: no swap on top.
        assert_eq!(
            (host.memory, host.memory_swap),
            (Some(1 << 30), Some(1 << 30))
        );
        assert_eq!(host.cap_add, Some(vec!["NET_ADMIN".to_string()]));
        assert_eq!((host.init, host.auto_remove), (Some(true), Some(true)));
        assert_eq!(host.log_config.unwrap().typ.as_deref(), Some("none"));
        // A disabled network would drop /etc/hosts, and `localhost` with it.
        assert_eq!(body.network_disabled, None);
        assert_eq!(body.working_dir.as_deref(), Some("/testbed"));

        let open = ContainerSpec {
            network: true,
            net_admin: false,
            auto_remove: false,
            nano_cpus: None,
            cpuset: Some("1".into()),
            ..spec()
        }
        .body()
        .host_config
        .unwrap();
        assert_eq!(open.network_mode.as_deref(), Some("bridge"));
        assert_eq!((open.cap_add, open.auto_remove), (None, None));
        assert_eq!(
            (open.nano_cpus, open.cpuset_cpus.as_deref()),
            (None, Some("1"))
        );
    }

    #[tokio::test]
    async fn a_call_past_its_limit_names_the_call_and_the_limit() {
        let slow = async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<(), bollard::errors::Error>(())
        };
        let e = within("inspect image x", Duration::from_secs(1), slow)
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "docker inspect image x did not answer within 1s"
        );
        assert!(!e.is_status(&[404]));
        let refused = async {
            Err::<(), _>(bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                message: "no such image".into(),
            })
        };
        let e = call("inspect image x", refused).await.unwrap_err();
        assert!(e.is_status(&[404]) && !e.is_status(&[409]), "{e}");
        assert!(e.to_string().starts_with("docker inspect image x: "), "{e}");
    }
}
