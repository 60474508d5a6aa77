//! The swarm as a whole: the manager check, the networks services join,
//! node names, and the removal of services and configs that a killed run
//! of this host left behind (found by label).

use std::collections::HashMap;

use bollard::models::{LocalNodeState, NetworkCreateRequest, NodeState};
use bollard::query_parameters::{
    ListConfigsOptionsBuilder, ListNetworksOptionsBuilder, ListServicesOptionsBuilder,
};
use bollard::Docker;

use super::objects::Object;
use super::{locked, Owner, SwarmBackend, SwarmError};
use crate::backend::docker::engine::{call, is_status, ApiError, Removable};

/// The overlay of specs that opt into network.
pub const NET_OPEN: &str = "patchgrade-open";

/// Labels every object of the backend carries.
pub const LABEL: &str = "patchgrade.swarm";
pub const LABEL_HOST: &str = "patchgrade.host";
pub const LABEL_PID: &str = "patchgrade.pid";
pub const LABEL_RUN: &str = "patchgrade.run_id";

impl Owner {
    /// `run_id`: the run's, which the Docker backend holds.
    pub(super) fn labels(&self, run_id: &str) -> HashMap<String, String> {
        HashMap::from([
            (LABEL.to_string(), "1".to_string()),
            (LABEL_HOST.to_string(), self.host.clone()),
            (LABEL_PID.to_string(), self.pid.to_string()),
            (LABEL_RUN.to_string(), run_id.to_string()),
        ])
    }
}

/// This machine's name, as labels record it.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// Whether a process of this host with that pid is alive.
fn alive(pid: u32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The engine must be an active manager: services are created there.
/// Returns the engine's major version.
pub(super) async fn check_manager(docker: &Docker) -> Result<u32, SwarmError> {
    let info = call("info", docker.info()).await?;
    let swarm = info.swarm.unwrap_or_default();
    let state = swarm.local_node_state.unwrap_or(LocalNodeState::EMPTY);
    if state != LocalNodeState::ACTIVE || swarm.control_available != Some(true) {
        return Err(SwarmError::NotManager {
            state: format!(
                "{state}, manager: {}",
                swarm.control_available == Some(true)
            ),
        });
    }
    let version = info.server_version.unwrap_or_default();
    Ok(version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0))
}

/// Some ready node must be able to hold one evaluation's reservation, or
/// its tasks would wait in the swarm's queue for ever.
pub(super) async fn check_capacity(
    docker: &Docker,
    nano_cpus: i64,
    memory: i64,
) -> Result<(), SwarmError> {
    let nodes = call(
        "list nodes",
        docker.list_nodes(None::<bollard::query_parameters::ListNodesOptions>),
    )
    .await?;
    let mut seen = Vec::new();
    for n in &nodes {
        let ready = n.status.as_ref().and_then(|s| s.state) == Some(NodeState::READY);
        let res = n
            .description
            .as_ref()
            .and_then(|d| d.resources.clone())
            .unwrap_or_default();
        let (cpus, mem) = (res.nano_cpus.unwrap_or(0), res.memory_bytes.unwrap_or(0));
        if ready && cpus >= nano_cpus && mem >= memory {
            return Ok(());
        }
        seen.push(format!(
            "{} cpus, {} MiB{}",
            cpus as f64 / 1e9,
            mem >> 20,
            if ready { "" } else { " (not ready)" }
        ));
    }
    Err(SwarmError::NoNodeFits {
        cpus: nano_cpus as f64 / 1e9,
        memory_mib: memory >> 20,
        nodes: seen.join("; "),
    })
}

/// Whether a labelled object was left by a dead process of this host (a
/// live one's, or another host's, are not ours to judge).
fn stale(labels: &HashMap<String, String>, owner: &Owner) -> bool {
    labels.get(LABEL_HOST) == Some(&owner.host)
        && labels
            .get(LABEL_PID)
            .and_then(|p| p.parse::<u32>().ok())
            .is_some_and(|pid| pid != owner.pid && !alive(pid))
}

/// Remove services, configs and networks that killed runs of this host left.
pub(super) async fn remove_stale(docker: &Docker, owner: &Owner) {
    let filters = HashMap::from([("label", vec![LABEL])]);
    let opts = ListServicesOptionsBuilder::default()
        .filters(&filters)
        .build();
    let services = call("list services", docker.list_services(Some(opts)))
        .await
        .unwrap_or_else(|e| {
            tracing::warn!("cannot look for services of killed runs: {e}");
            Vec::new()
        });
    let mut objects = Vec::new();
    for s in services {
        let labels = s
            .spec
            .as_ref()
            .and_then(|sp| sp.labels.clone())
            .unwrap_or_default();
        if let (true, Some(id)) = (stale(&labels, owner), s.id) {
            objects.push(Object::Service(id));
        }
    }
    let opts = ListConfigsOptionsBuilder::default()
        .filters(&filters)
        .build();
    let configs = call("list configs", docker.list_configs(Some(opts)))
        .await
        .unwrap_or_default();
    for c in configs {
        let labels = c
            .spec
            .as_ref()
            .and_then(|sp| sp.labels.clone())
            .unwrap_or_default();
        if let (true, Some(id)) = (stale(&labels, owner), c.id) {
            objects.push(Object::Config(id));
        }
    }
    let opts = ListNetworksOptionsBuilder::default()
        .filters(&filters)
        .build();
    let networks = call("list networks", docker.list_networks(Some(opts)))
        .await
        .unwrap_or_default();
    for n in networks {
        if let (true, Some(id)) = (stale(&n.labels.clone().unwrap_or_default(), owner), n.id) {
            objects.push(Object::Network(id));
        }
    }
    if !objects.is_empty() {
        tracing::warn!(
            "removing {} services, configs and networks left by killed runs",
            objects.len()
        );
        Object::remove_all(docker, objects).await;
    }
}

/// An evaluation's own overlay: `--internal`, labelled as its service.
pub(super) async fn create_network(
    docker: &Docker,
    name: &str,
    labels: HashMap<String, String>,
) -> Result<String, SwarmError> {
    let req = NetworkCreateRequest {
        name: name.to_string(),
        driver: Some("overlay".into()),
        internal: Some(true),
        attachable: Some(false),
        labels: Some(labels),
        ..Default::default()
    };
    let created = call("create network", docker.create_network(req)).await?;
    Ok(created.id)
}

/// Create the overlay network `name` unless it exists.
pub(super) async fn ensure_network(
    docker: &Docker,
    name: &str,
    internal: bool,
) -> Result<(), SwarmError> {
    let filters = HashMap::from([("name", vec![name])]);
    let opts = ListNetworksOptionsBuilder::default()
        .filters(&filters)
        .build();
    let found = call("list networks", docker.list_networks(Some(opts))).await?;
    if found.iter().any(|n| n.name.as_deref() == Some(name)) {
        return Ok(());
    }
    let req = NetworkCreateRequest {
        name: name.to_string(),
        driver: Some("overlay".into()),
        internal: Some(internal),
        attachable: Some(false),
        labels: Some(HashMap::from([(LABEL.to_string(), "1".to_string())])),
        ..Default::default()
    };
    match docker.create_network(req).await {
        Ok(_) => Ok(()),
        // Another run made it at the same moment.
        Err(e) if is_status(&e, &[409]) => Ok(()),
        Err(source) => Err(ApiError::Api {
            op: format!("create network {name}"),
            source,
        }
        .into()),
    }
}

impl SwarmBackend {
    /// A node's name (`hostname/id`, its first 12 characters: hostnames
    /// need not differ) and whether it is still ready.
    pub(super) async fn node(&self, id: &str) -> Result<(String, NodeState), SwarmError> {
        let docker = self.docker().await?;
        let node = call("inspect node", docker.inspect_node(id)).await?;
        let host = node
            .description
            .and_then(|d| d.hostname)
            .unwrap_or_default();
        let name = format!("{host}/{}", &id[..id.len().min(12)]);
        locked(&self.nodes).insert(id.to_string(), name.clone());
        let state = node
            .status
            .and_then(|s| s.state)
            .unwrap_or(NodeState::UNKNOWN);
        Ok((name, state))
    }

    /// A node's hostname, from the cache when known.
    pub(super) async fn node_name(&self, id: &str) -> String {
        if let Some(n) = locked(&self.nodes).get(id) {
            return n.clone();
        }
        match self.node(id).await {
            Ok((name, _)) => name,
            Err(_) => id.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_dead_processes_of_this_host_are_stale() {
        let me = Owner {
            host: "h1".into(),
            pid: std::process::id(),
        };
        let mut labels = me.labels("r");
        assert!(!stale(&labels, &me), "this process's own objects");
        labels.insert(LABEL_PID.into(), "1".into());
        assert!(!stale(&labels, &me), "pid 1 is alive");
        // A pid above the kernel's maximum cannot be alive.
        labels.insert(LABEL_PID.into(), "4194305".into());
        assert!(stale(&labels, &me));
        labels.insert(LABEL_HOST.into(), "h2".into());
        assert!(!stale(&labels, &me), "another host's");
    }
}
