//! One evaluation's container: create it from the instance image (no
//! network unless the spec opts in; memory, CPU and pids limits; `--init`)
//! with the candidate's changed files and the eval script as one tar
//! (inside the command when small, else uploaded before start), attach,
//! start, read the output until the script exits, remove (after the result
//! is returned; `finish` awaits the removals), through [`super::engine`]. The
//! container's command is the eval script itself, so there is no idle main
//! process to stop: removal is immediate. A timeout, an interrupt, an error
//! or a dropped future all remove the container.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bollard::container::LogOutput;

use super::archive::{applied_archive, candidate_changes, inline_command, run_archive, INLINE_MAX};
use super::capped::CappedLog;
use super::engine::{self, ContainerId, ContainerSpec, Removable, RunFailure, RunPlan, Stop};
use super::exits::Ended;
use super::images::TESTBED;
use super::stale::{PID_LABEL, RUN_LABEL};
use super::{locked, DockerBackend, DockerEnv, DockerError};
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
        cancel: tokio::sync::watch::Receiver<bool>,
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
        let upload = inline.is_none().then_some(archive);
        let container = engine::create(docker, &self.container_spec(env, rs, inline), &self.live)
            .await
            .map_err(DockerError::from)?;
        phases.create = t.elapsed().as_secs_f64();
        let mut log = CappedLog::new(max_log());
        let mut push = |chunk: LogOutput| log.push(&chunk.into_bytes());
        let plan = RunPlan {
            upload,
            deadline: Some(timeout),
            cancel: Some(cancel),
            watch_exit: true,
            wait_code: false,
            output: &mut push,
        };
        let ran = match container.run(plan).await {
            Ok(ran) => ran,
            Err(RunFailure::Call(e)) => return Err(DockerError::from(e).into()),
            Err(RunFailure::Stream(e)) => {
                container.remove().await;
                return Err(InfraError::Other(format!(
                    "docker attach to the test container: {e}"
                )));
            }
        };
        phases.upload = ran.phases.upload;
        phases.attach = ran.phases.attach;
        phases.start = ran.phases.start;
        phases.run = ran.phases.run;
        let elapsed = ran.stopped_at.duration_since(started);
        // The output ended by itself: the events say whether the kernel
        // OOM-killed something, or the engine went away (then the log is
        // cut short by the engine, an infra error, not the candidate's).
        let mut oom_killed_at = None;
        match ran.ended {
            Some(Ended::Died {
                killed: Some(signal),
                ..
            }) => {
                container.remove().await;
                return Err(InfraError::Other(format!(
                    "the test container was stopped from outside (signal {signal}) while the tests ran: the Docker engine shut down or someone stopped it"
                )));
            }
            Some(Ended::Died {
                oom: true,
                killed: None,
            }) => oom_killed_at = Some(self.args.memory.clone()),
            Some(Ended::Died {
                oom: false,
                killed: None,
            }) => {}
            Some(Ended::EngineLost(why)) => {
                container.remove().await;
                return Err(InfraError::Other(format!(
                    "the Docker engine went away while the tests ran: {why}"
                )));
            }
            Some(Ended::Unknown) => tracing::warn!("container {}: no exit event", container.id),
            None => {}
        }
        // The result does not wait for the removal: `finish` awaits it.
        if let Some(removal) = container.remove_later() {
            let mut pending = locked(&self.removals);
            pending.retain(|h| !h.is_finished());
            pending.push(removal);
        }
        let (log, capped) = log.finish();
        Ok(RunOutput {
            log,
            timed_out: ran.stop == Stop::TimedOut,
            cancelled: ran.stop == Stop::Cancelled,
            elapsed,
            container: Some(phases),
            oom_killed_at,
            capped,
        })
    }

    /// `inline`: a command that unpacks the run archive itself (see
    /// [`inline_command`]); `None`: the archive is uploaded before start.
    fn container_spec(
        &self,
        env: &DockerEnv,
        rs: &ResolvedSpec,
        inline: Option<Vec<String>>,
    ) -> ContainerSpec {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let short = env
            .image
            .split(':')
            .next()
            .unwrap_or("x")
            .rsplit('/')
            .next()
            .unwrap_or("x");
        ContainerSpec {
            name: self.rundir.container_name(short, std::process::id(), n),
            image: env.id.clone(),
            cmd: inline.unwrap_or_else(|| vec!["bash".into(), "/patchgrade-run.sh".into()]),
            working_dir: TESTBED.into(),
            labels: HashMap::from([
                (RUN_LABEL.to_string(), self.run_id().to_string()),
                (PID_LABEL.to_string(), std::process::id().to_string()),
                ("patchgrade.image".to_string(), env.image.clone()),
            ]),
            network: rs.spec.network,
            net_admin: !rs.spec.network && rs.spec.blackhole_routes,
            memory: self.memory,
            nano_cpus: Some(self.nano_cpus),
            cpuset: None,
            pids_limit: self.args.pids_limit,
            // The container's command is the eval script: it ends by itself.
            auto_remove: true,
        }
    }

    /// Remove every container this backend has running (second Ctrl-C).
    pub async fn kill_running(&self) {
        let Some(conn) = self.conn.get() else { return };
        let ids: Vec<ContainerId> = locked(&self.live).drain().collect();
        ContainerId::remove_all(&conn.docker, ids).await;
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
