//! Containers left by a killed patchgrade process: every test container is
//! labelled with its run id and process id, so the next process on the same
//! run id (holding the run folder's lock, hence alone) finds and removes
//! them. Without this they would run until their in-container watchdog.

use std::collections::HashMap;

use bollard::query_parameters::ListContainersOptionsBuilder;

use super::engine::{call, remove_container};
use super::DockerBackend;

/// Labels of every test container.
pub const RUN_LABEL: &str = "patchgrade.run_id";
pub const PID_LABEL: &str = "patchgrade.pid";

impl DockerBackend {
    /// Remove containers of `run_id` created by another process; returns
    /// how many. An engine that does not answer is only logged (the run
    /// itself will say so).
    pub async fn remove_stale(&self, run_id: &str) -> usize {
        let docker = match self.docker().await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!("cannot look for containers left by earlier runs: {e}");
                return 0;
            }
        };
        let filters = HashMap::from([("label", vec![format!("{RUN_LABEL}={run_id}")])]);
        let opts = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let listed = match call("list containers", docker.list_containers(Some(opts))).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!("cannot list containers of run {run_id}: {e}");
                return 0;
            }
        };
        let me = std::process::id().to_string();
        let mut removed = 0;
        for c in listed {
            let pid = c.labels.as_ref().and_then(|l| l.get(PID_LABEL)).cloned();
            let Some(id) = c.id else { continue };
            if pid.as_deref() == Some(me.as_str()) {
                continue;
            }
            tracing::warn!(
                "removing container {id} left by an earlier process on run {run_id} (pid {})",
                pid.as_deref().unwrap_or("?")
            );
            remove_container(docker, &id).await;
            removed += 1;
        }
        removed
    }
}
