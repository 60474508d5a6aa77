//! One evaluation as a swarm job: the run archive (the docker backend's:
//! the candidate's changed files, the eval script, its launcher) as configs,
//! a `replicated-job` service with one task that unpacks them and runs the
//! launcher, polling until the task ends, its logs, and the removal of the
//! service and configs on every path (a dropped future included: an
//! [`engine::Guard`](crate::backend::docker::engine::Guard)).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bollard::models::{
    ConfigSpec, Limit, NetworkAttachmentConfig, ResourceObject, ServiceSpec, ServiceSpecMode,
    ServiceSpecModeReplicated, ServiceSpecModeReplicatedJob, TaskSpec, TaskSpecContainerSpec,
    TaskSpecContainerSpecConfigs, TaskSpecContainerSpecFile1, TaskSpecLogDriver, TaskSpecResources,
    TaskSpecRestartPolicy, TaskSpecRestartPolicyConditionEnum, TaskState,
};
use bollard::query_parameters::{
    ListContainersOptionsBuilder, ListTasksOptionsBuilder, LogsOptionsBuilder,
};
use bollard::Docker;
use futures_util::StreamExt;

use super::cluster::{create_network, ensure_network, NET_OPEN};
use super::objects::Object;
use super::{locked, SwarmBackend, SwarmEnv, SwarmError};
use crate::backend::docker::containers::run_archive_of;
use crate::backend::docker::engine::{call, within, Guard};
use crate::backend::docker::images::TESTBED;
use crate::backend::{InfraError, RunOutput, Workspace};
use crate::spec::ResolvedSpec;

/// The most one swarm config may hold is 1000 KiB; chunks stay below it.
pub const CONFIG_CHUNK: usize = 1000 * 1000;
/// At most this many configs per evaluation (a run archive of ~32 MB).
pub const MAX_CHUNKS: usize = 32;
/// Where the configs are mounted in the task.
const CONFIG_DIR: &str = "/patchgrade-configs";
/// Printed by the task when the archive cannot be unpacked.
const UNPACK_FAILED: &str = "PATCHGRADE-SWARM-UNPACK-FAILED";
/// Printed by the task after the launcher, with its exit status: a log
/// without it was cut short by the node (its engine stopped, the machine
/// died), not ended by the script. Removed from the log.
const EXIT_MARK: &str = "PATCHGRADE-SWARM-EXIT";
/// Limit on reading a task's logs (a node that left never answers).
const LOG_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the task's state is read.
const POLL: Duration = Duration::from_millis(100);
/// How often the running task's node is checked.
const NODE_CHECK: Duration = Duration::from_secs(2);
/// At most this much test output is kept (as the docker backend).
const MAX_LOG: usize = 256 << 20;

/// The run archive cut into config-sized chunks.
pub fn chunks(archive: &[u8]) -> Result<Vec<&[u8]>, SwarmError> {
    if archive.len() > CONFIG_CHUNK * MAX_CHUNKS {
        return Err(SwarmError::TooLarge {
            bytes: archive.len(),
            max: CONFIG_CHUNK * MAX_CHUNKS,
            chunks: MAX_CHUNKS,
            chunk: CONFIG_CHUNK,
        });
    }
    Ok(archive.chunks(CONFIG_CHUNK).collect())
}

/// The task's command: join the chunks, unpack at `/`, run the launcher.
fn command() -> Vec<String> {
    let script = format!(
        "set -o pipefail; cat {CONFIG_DIR}/run.tar.* | tar -xf - -C / || {{ echo {UNPACK_FAILED}; exit 1; }}; \
         bash /patchgrade-run.sh; printf '\\n{EXIT_MARK} %d\\n' $?"
    );
    vec!["bash".into(), "-c".into(), script]
}

/// Remove the exit line the task printed last; false when there is none.
fn strip_exit(log: &mut Vec<u8>) -> bool {
    let mark = format!("\n{EXIT_MARK} ");
    let Some(at) = log.windows(mark.len()).rposition(|w| w == mark.as_bytes()) else {
        return false;
    };
    let rest = &log[at + mark.len()..];
    let ok = rest
        .strip_suffix(b"\n")
        .is_some_and(|code| !code.is_empty() && code.iter().all(u8::is_ascii_digit));
    if ok {
        log.truncate(at);
    }
    ok
}

/// How the task ended.
enum TaskEnded {
    Finished,
    TimedOut,
    Cancelled,
}

impl SwarmBackend {
    pub async fn run(
        &self,
        env: &SwarmEnv,
        rs: &ResolvedSpec,
        ws: &Workspace,
        script: &str,
        timeout: Duration,
        mut cancel: tokio::sync::watch::Receiver<bool>,
    ) -> Result<RunOutput, InfraError> {
        let cancelled = |elapsed| RunOutput {
            log: Vec::new(),
            timed_out: false,
            cancelled: true,
            elapsed,
            container: None,
            oom_killed_at: None,
            capped: None,
        };
        if *cancel.borrow() {
            return Ok(cancelled(Duration::ZERO));
        }
        let archive = run_archive_of(ws, rs, script, timeout).await?;
        let parts = chunks(&archive)?;

        let started = Instant::now();
        let docker = self.docker().await?;
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let name = format!("patchgrade-{}-{}-{n}", self.owner.pid, nonce());
        let mut guard = Guard::new(docker, &self.live);
        let labels = self.owner.labels(self.docker.run_id());
        // Without network: an `--internal` overlay of its own, so the task
        // reaches neither the outside nor other evaluations' tasks.
        let network = if rs.spec.network {
            ensure_network(docker, NET_OPEN, false).await?;
            NET_OPEN.to_string()
        } else {
            let id = create_network(docker, &name, labels.clone()).await?;
            guard.add(Object::Network(id.clone()));
            id
        };
        let mut configs = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let spec = ConfigSpec {
                name: Some(format!("{name}.{i:03}")),
                labels: Some(labels.clone()),
                data: Some(base64::engine::general_purpose::STANDARD.encode(part)),
                ..Default::default()
            };
            let id = call("create config", docker.create_config(spec)).await?.id;
            guard.add(Object::Config(id.clone()));
            configs.push(TaskSpecContainerSpecConfigs {
                file: Some(TaskSpecContainerSpecFile1 {
                    name: Some(format!("{CONFIG_DIR}/run.tar.{i:03}")),
                    uid: Some("0".into()),
                    gid: Some("0".into()),
                    mode: Some(0o444),
                }),
                config_id: Some(id),
                config_name: Some(format!("{name}.{i:03}")),
                ..Default::default()
            });
        }
        let spec = self.service_spec(&name, env, rs, &network, configs, labels);
        let service = call("create service", docker.create_service(spec, None))
            .await?
            .id
            .ok_or_else(|| {
                InfraError::Other("docker create service: no id in the answer".into())
            })?;
        guard.add(Object::Service(service.clone()));
        // Its task's container goes after it: waited for at the end.
        locked(&self.removed).push(service.clone());
        let created = started.elapsed();

        let (ended, node) = match self.follow(&service, timeout, &mut cancel).await {
            Ok(v) => v,
            Err(e) => {
                remove(guard).await;
                return Err(e.into());
            }
        };
        if let TaskEnded::Cancelled = ended {
            remove(guard).await;
            return Ok(cancelled(started.elapsed()));
        }
        let elapsed = started.elapsed();
        let log = self.logs(&service).await;
        let logged = started.elapsed();
        remove(guard).await;
        tracing::debug!(
            "swarm evaluation {name}: created in {:.3}s, ended at {:.3}s, logs at {:.3}s, removed at {:.3}s",
            created.as_secs_f64(),
            elapsed.as_secs_f64(),
            logged.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
        let mut log = log?;
        if matches!(ended, TaskEnded::Finished) && !strip_exit(&mut log) {
            return Err(SwarmError::TaskLost {
                node: node.unwrap_or_else(|| "(none)".into()),
                state: "ended".into(),
                reason: "the script was stopped from outside (its output has no exit line)".into(),
            }
            .into());
        }
        let head = &log[..log.len().min(64 << 10)];
        if String::from_utf8_lossy(head)
            .lines()
            .any(|l| l == UNPACK_FAILED)
        {
            return Err(SwarmError::Unpack(String::from_utf8_lossy(head).into_owned()).into());
        }
        let mut capped = None;
        if log.len() > MAX_LOG {
            let dropped = log.len() - MAX_LOG;
            capped = Some(crate::backend::LogCap {
                cap: MAX_LOG,
                dropped: dropped as u64,
            });
            log.truncate(MAX_LOG);
            log.extend_from_slice(
                format!("\n[patchgrade: {dropped} bytes of output past {MAX_LOG} dropped]\n")
                    .as_bytes(),
            );
        }
        if let Some(node) = node {
            locked(&self.placed).insert(ws.root.clone(), node);
        }
        Ok(RunOutput {
            log,
            timed_out: matches!(ended, TaskEnded::TimedOut),
            cancelled: false,
            elapsed,
            container: None,
            oom_killed_at: None,
            capped,
        })
    }

    fn service_spec(
        &self,
        name: &str,
        env: &SwarmEnv,
        rs: &ResolvedSpec,
        network: &str,
        configs: Vec<TaskSpecContainerSpecConfigs>,
        labels: HashMap<String, String>,
    ) -> ServiceSpec {
        let container = TaskSpecContainerSpec {
            image: Some(env.reference.clone()),
            labels: Some(labels.clone()),
            command: Some(command()),
            dir: Some(TESTBED.into()),
            init: Some(true),
            configs: Some(configs),
            capability_add: (!rs.spec.network && rs.spec.blackhole_routes)
                .then(|| vec!["CAP_NET_ADMIN".to_string()]),
            ..Default::default()
        };
        let task = TaskSpec {
            container_spec: Some(container),
            resources: Some(TaskSpecResources {
                limits: Some(Limit {
                    nano_cpus: Some(self.nano_cpus),
                    memory_bytes: Some(self.memory),
                    pids: Some(self.pids_limit),
                }),
                reservations: Some(ResourceObject {
                    nano_cpus: Some(self.nano_cpus),
                    memory_bytes: Some(self.memory),
                    generic_resources: None,
                }),
                ..Default::default()
            }),
            // A non-zero exit is the tests' result, never a reason to rerun.
            restart_policy: Some(TaskSpecRestartPolicy {
                condition: Some(TaskSpecRestartPolicyConditionEnum::NONE),
                ..Default::default()
            }),
            networks: Some(vec![NetworkAttachmentConfig {
                target: Some(network.to_string()),
                ..Default::default()
            }]),
            // The output is read back from the task's logs.
            log_driver: Some(TaskSpecLogDriver {
                name: Some("json-file".into()),
                options: None,
            }),
            ..Default::default()
        };
        ServiceSpec {
            name: Some(name.to_string()),
            labels: Some(labels),
            task_template: Some(task),
            mode: Some(if self.jobs.load(Ordering::Relaxed) {
                ServiceSpecMode {
                    replicated_job: Some(ServiceSpecModeReplicatedJob {
                        max_concurrent: Some(1),
                        total_completions: Some(1),
                    }),
                    ..Default::default()
                }
            } else {
                // One task, never restarted (restart condition none): a job
                // in all but name, whose container the engine removes.
                ServiceSpecMode {
                    replicated: Some(ServiceSpecModeReplicated { replicas: Some(1) }),
                    ..Default::default()
                }
            }),
            ..Default::default()
        }
    }

    /// Poll the service's task until it ends, the time limit (counted from
    /// when it runs, not while it waits for a node) passes, or an interrupt.
    /// Returns how it ended and the node's name.
    async fn follow(
        &self,
        service: &str,
        timeout: Duration,
        cancel: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Result<(TaskEnded, Option<String>), SwarmError> {
        let docker = self.docker().await?;
        let filters = HashMap::from([("service", vec![service])]);
        let mut running_since: Option<Instant> = None;
        let mut node_checked = Instant::now();
        let mut node: Option<(String, String)> = None;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                fired = async { cancel.wait_for(|c| *c).await.is_ok() } => if fired {
                    return Ok((TaskEnded::Cancelled, node.map(|n| n.1)));
                } else {
                    // No sender any more: nothing can interrupt this run.
                    tokio::time::sleep(POLL).await;
                },
            }
            let opts = ListTasksOptionsBuilder::default().filters(&filters).build();
            let tasks = call("list tasks", docker.list_tasks(Some(opts))).await?;
            let Some(task) = tasks.into_iter().next() else {
                continue;
            };
            if let (None, Some(id)) = (&node, &task.node_id) {
                node = Some((id.clone(), self.node_name(id).await));
            }
            let node_name = || node.as_ref().map(|n| n.1.clone());
            let status = task.status.unwrap_or_default();
            let state = status.state.unwrap_or(TaskState::NEW);
            let reason = status.err.or(status.message).unwrap_or_default();
            match state {
                TaskState::COMPLETE => return Ok((TaskEnded::Finished, node_name())),
                // The script's own non-zero exit: a result like any other.
                TaskState::FAILED if reason.starts_with("task: non-zero exit") => {
                    return Ok((TaskEnded::Finished, node_name()))
                }
                TaskState::FAILED
                | TaskState::REJECTED
                | TaskState::ORPHANED
                | TaskState::SHUTDOWN
                | TaskState::REMOVE => {
                    return Err(SwarmError::TaskLost {
                        node: node_name().unwrap_or_else(|| "(none)".into()),
                        state: state.to_string(),
                        reason,
                    })
                }
                TaskState::RUNNING => {
                    running_since.get_or_insert_with(Instant::now);
                }
                _ => {}
            }
            if running_since.is_some_and(|t| t.elapsed() >= timeout) {
                return Ok((TaskEnded::TimedOut, node_name()));
            }
            if let Some((id, name)) = &node {
                if node_checked.elapsed() >= NODE_CHECK {
                    node_checked = Instant::now();
                    let (_, status) = self.node(id).await?;
                    if status != bollard::models::NodeState::READY {
                        return Err(SwarmError::NodeLeft {
                            node: name.clone(),
                            status: status.to_string(),
                        });
                    }
                }
            }
        }
    }

    /// The task's output (stdout and stderr as the engine stored them).
    async fn logs(&self, service: &str) -> Result<Vec<u8>, SwarmError> {
        let docker = self.docker().await?;
        let opts = LogsOptionsBuilder::default()
            .stdout(true)
            .stderr(true)
            .follow(false)
            .tail("all")
            .build();
        let mut stream = docker.service_logs(service, Some(opts));
        let mut log = Vec::new();
        let read = async {
            while let Some(item) = stream.next().await {
                let chunk = item?;
                // Past the limit the rest is only counted (then dropped).
                if log.len() <= MAX_LOG {
                    log.extend_from_slice(&chunk.into_bytes());
                }
            }
            Ok::<(), bollard::errors::Error>(())
        };
        within("service logs", LOG_TIMEOUT, read).await?;
        Ok(log)
    }
}

/// Distinguishes this process's services from those of a process with the
/// same pid on another host.
fn nonce() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32))
        .unwrap_or(0);
    format!("{t:08x}")
}

/// Wait (at most 30 s in all) until the tasks of removed services are gone
/// from the swarm and their containers from this engine: they hold the
/// images that the end of a run may remove.
pub async fn wait_gone(docker: &Docker, services: &[String], pid: u32) {
    let until = Instant::now() + Duration::from_secs(30);
    for id in services {
        let filters = HashMap::from([("service", vec![id.as_str()])]);
        while Instant::now() < until {
            let opts = ListTasksOptionsBuilder::default().filters(&filters).build();
            match call("list tasks", docker.list_tasks(Some(opts))).await {
                Ok(t) if !t.is_empty() => tokio::time::sleep(POLL).await,
                _ => break,
            }
        }
    }
    let label = format!("{}={pid}", super::cluster::LABEL_PID);
    let filters = HashMap::from([("label", vec![label.as_str()])]);
    while Instant::now() < until {
        let opts = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        match call("list containers", docker.list_containers(Some(opts))).await {
            Ok(c) if !c.is_empty() => tokio::time::sleep(POLL).await,
            _ => break,
        }
    }
}

/// Services and configs now; the network in the background, as it is
/// freed only once the node removed the task's container.
async fn remove(mut guard: Guard<Object>) {
    let networks = guard.split_off(|o| matches!(o, Object::Network(_)));
    guard.remove().await;
    networks.remove_later();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archives_are_cut_into_config_sized_chunks_or_refused_naming_the_size() {
        let small = vec![1u8; 10];
        assert_eq!(chunks(&small).unwrap().len(), 1);
        let big = vec![2u8; CONFIG_CHUNK * 2 + 5];
        let parts = chunks(&big).unwrap();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [CONFIG_CHUNK, CONFIG_CHUNK, 5]
        );
        assert_eq!(parts.concat(), big);
        let huge = vec![0u8; CONFIG_CHUNK * MAX_CHUNKS + 1];
        let e = chunks(&huge).unwrap_err().to_string();
        assert!(
            e.contains(&(CONFIG_CHUNK * MAX_CHUNKS + 1).to_string()),
            "{e}"
        );
    }

    #[test]
    fn the_exit_line_is_removed_and_its_absence_seen() {
        let mut log = b"ok\nlast".to_vec();
        log.extend_from_slice(format!("\n{EXIT_MARK} 1\n").as_bytes());
        assert!(strip_exit(&mut log));
        assert_eq!(log, b"ok\nlast");
        let mut cut = b"ok\nhalf a li".to_vec();
        assert!(!strip_exit(&mut cut));
        assert_eq!(cut, b"ok\nhalf a li");
        let mut printed = format!("\n{EXIT_MARK} 0\nmore after\n").into_bytes();
        assert!(
            !strip_exit(&mut printed),
            "a marker the tests printed mid-log"
        );
    }

    #[test]
    fn the_command_joins_the_chunks_in_order() {
        let c = command();
        assert!(c[2].contains("cat /patchgrade-configs/run.tar.*"), "{c:?}");
    }
}
