//! One evaluation's container: create it from the instance image (no
//! network unless the spec opts in; memory, CPU and pids limits; `--init`)
//! with the candidate's changed files and the eval script as one tar
//! (inside the command when small, else uploaded before start), attach,
//! start, read the output until the script exits, remove (after the result
//! is returned; `finish` awaits the removals). The
//! container's command is the eval script itself, so there is no idle main
//! process to stop: removal is immediate. A timeout, an interrupt, an error
//! or a dropped future all remove the container.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder,
    StartContainerOptions, UploadToContainerOptionsBuilder,
};
use bollard::{body_full, Docker};
use futures_util::StreamExt;

use super::archive::{applied_archive, candidate_changes, inline_command, run_archive, INLINE_MAX};
use super::capped::CappedLog;
use super::daemon::is_status;
use super::exits::{Ended, ExitWatch};
use super::images::TESTBED;
use super::stale::{PID_LABEL, RUN_LABEL};
use super::{locked, DockerBackend, DockerEnv, DockerError, API_TIMEOUT};
use crate::backend::{InfraError, RunOutput, Workspace};
use crate::outcome::ContainerTimings;
use crate::spec::ResolvedSpec;

/// At most this much test output is kept (its first and last halves; the
/// middle is dropped, noted in the log and the record).
const MAX_LOG: usize = 256 << 20;

/// The log cap: [`MAX_LOG`], or `PATCHGRADE_MAX_LOG` bytes (for tests that
/// check the cap without writing 256 MiB; docs/faults.md).
fn max_log() -> usize {
    std::env::var("PATCHGRADE_MAX_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MAX_LOG)
}
/// Grace after `--timeout` before the in-container watchdog kills the
/// script on its own (for when patchgrade itself is killed).
const WATCHDOG_GRACE: u64 = 60;

impl DockerBackend {
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
                container: None,
                oom_killed_at: None,
                capped: None,
            });
        }
        let t = Instant::now();
        let archive = run_archive_of(ws, rs, script, timeout).await?;
        let mut phases = ContainerTimings {
            archive: t.elapsed().as_secs_f64(),
            ..Default::default()
        };

        let started = Instant::now();
        let docker = self.docker().await?;
        let t = Instant::now();
        let inline = (archive.len() <= INLINE_MAX).then(|| inline_command(&archive));
        let uploads = inline.is_none();
        let container = self.create_container(env, rs, inline).await?;
        phases.create = t.elapsed().as_secs_f64();
        let guard = ContainerGuard {
            docker: docker.clone(),
            id: container.clone(),
            live: self.live.clone(),
            armed: true,
        };
        if uploads {
            let t = Instant::now();
            let upload = UploadToContainerOptionsBuilder::default().path("/").build();
            self.call(
                "upload to container",
                docker.upload_to_container(&container, Some(upload), body_full(archive.into())),
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
        let mut output = self
            .call("attach", docker.attach_container(&container, Some(attach)))
            .await?
            .output;
        phases.attach = t.elapsed().as_secs_f64();
        let watch = ExitWatch::start(docker, &container);
        let t = Instant::now();
        self.call(
            "start container",
            docker.start_container(&container, None::<StartContainerOptions>),
        )
        .await?;
        phases.start = t.elapsed().as_secs_f64();
        let t = Instant::now();

        let mut log = CappedLog::new(max_log());
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
                        log.push(&chunk.into_bytes());
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
        phases.run = t.elapsed().as_secs_f64();
        let elapsed = started.elapsed();
        drop(output);
        // The output ended by itself: the events say whether the kernel
        // OOM-killed something, or the engine went away (then the log is
        // cut short by the engine, an infra error, not the candidate's).
        let mut oom_killed_at = None;
        if !timed_out && !cancelled {
            match watch.ended(Duration::from_secs(10)).await {
                Ended::Died {
                    killed: Some(signal),
                    ..
                } => {
                    guard.remove().await;
                    return Err(InfraError::Other(format!(
                        "the test container was stopped from outside (signal {signal}) while the tests ran: the Docker engine shut down or someone stopped it"
                    )));
                }
                Ended::Died { oom, killed: None } => {
                    if oom {
                        oom_killed_at = Some(self.args.memory.clone());
                    }
                }
                Ended::EngineLost(why) => {
                    guard.remove().await;
                    return Err(InfraError::Other(format!(
                        "the Docker engine went away while the tests ran: {why}"
                    )));
                }
                Ended::Unknown => tracing::warn!("container {container}: no exit event"),
            }
        }
        // The result does not wait for the removal: `finish` awaits it.
        let removal = tokio::spawn(guard.remove());
        {
            let mut pending = locked(&self.removals);
            pending.retain(|h| !h.is_finished());
            pending.push(removal);
        }
        let (log, capped) = log.finish();
        Ok(RunOutput {
            log,
            timed_out,
            cancelled,
            elapsed,
            container: Some(phases),
            oom_killed_at,
            capped,
        })
    }

    /// `inline`: a command that unpacks the run archive itself (see
    /// [`inline_command`]); `None`: the archive is uploaded before start.
    async fn create_container(
        &self,
        env: &DockerEnv,
        rs: &ResolvedSpec,
        inline: Option<Vec<String>>,
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
            cmd: Some(inline.unwrap_or_else(|| vec!["bash".into(), "/patchgrade-run.sh".into()])),
            working_dir: Some(TESTBED.into()),
            labels: Some(HashMap::from([
                (RUN_LABEL.to_string(), self.run_id.clone()),
                (PID_LABEL.to_string(), std::process::id().to_string()),
                ("patchgrade.image".to_string(), env.image.clone()),
            ])),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            // No `network_disabled`: network mode "none" already leaves only
            // loopback, and a disabled network also drops the engine's
            // /etc/hosts, so `localhost` stops resolving (Django's live
            // server tests bind to it: django__django-13809).
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
        locked(&self.live).insert(created.id.clone());
        Ok(created.id)
    }

    /// Remove every container this backend has running (second Ctrl-C).
    pub async fn kill_running(&self) {
        let Some(conn) = self.conn.get() else { return };
        let ids: Vec<String> = locked(&self.live).drain().collect();
        for id in ids {
            remove_container(&conn.docker, &id).await;
        }
    }
}

/// Force-remove a container, waiting until it is gone.
pub(super) async fn remove_container(docker: &Docker, id: &str) {
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
        locked(&self.live).remove(&self.id);
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
                locked(&live).remove(&id);
            });
        }
    }
}

/// The run archive of an evaluation: the candidate's changed files (applied
/// in memory, or read from the checkout) and the eval script with its
/// launcher. Shared by the docker and swarm backends.
pub(crate) async fn run_archive_of(
    ws: &Workspace,
    rs: &ResolvedSpec,
    script: &str,
    timeout: Duration,
) -> Result<Vec<u8>, InfraError> {
    let tree = ws.tree.clone();
    let applied = ws.applied.clone();
    let script = script.to_string();
    let watchdog = timeout.as_secs() + WATCHDOG_GRACE;
    let blackhole = !rs.spec.network && rs.spec.blackhole_routes;
    tokio::task::spawn_blocking(move || {
        let io = |source| InfraError::Io {
            path: tree.clone(),
            source,
        };
        if let Some(applied) = applied {
            return applied_archive(&applied, &script, watchdog, blackhole).map_err(io);
        }
        let changes = candidate_changes(&tree)
            .map_err(|e| InfraError::Other(format!("listing the candidate's changes: {e}")))?;
        run_archive(&tree, &changes, &script, watchdog, blackhole).map_err(io)
    })
    .await
    .map_err(|e| InfraError::Other(format!("archive task: {e}")))?
}
