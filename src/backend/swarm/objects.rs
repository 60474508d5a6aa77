//! The swarm objects of one evaluation (its service, configs and own
//! network) and their removal, in the order the swarm accepts, waiting for
//! each to be free; held by an [`engine::Guard`](crate::backend::docker::engine::Guard).

use std::time::Duration;

use bollard::Docker;

use crate::backend::docker::engine::{call, Removable};

/// A service, config or network of this backend, by id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Object {
    Service(String),
    Config(String),
    /// An evaluation's own overlay: freed on its node only after the task's
    /// container is gone, so removed in the background (and at the end).
    Network(String),
}

impl Removable for Object {
    /// Services first (a config or network in use cannot go), then
    /// configs, then networks.
    async fn remove_all(docker: &Docker, objects: Vec<Object>) {
        let rank = |o: &Object| match o {
            Object::Service(_) => 0,
            Object::Config(_) => 1,
            Object::Network(_) => 2,
        };
        let mut objects = objects;
        objects.sort_by_key(rank);
        for o in &objects {
            remove(docker, o).await;
        }
    }
}

async fn remove(docker: &Docker, o: &Object) {
    // A network waits for its task's container to leave it on the node.
    let attempts = if matches!(o, Object::Network(_)) {
        300
    } else {
        50
    };
    for attempt in 1..=attempts {
        let r = match o {
            Object::Service(id) => call("remove service", docker.delete_service(id)).await,
            Object::Config(id) => call("remove config", docker.delete_config(id)).await,
            Object::Network(id) => call("remove network", docker.remove_network(id)).await,
        };
        match r {
            Ok(()) => return,
            Err(e) if e.is_status(&[404]) => return,
            // In use by a service being removed: wait.
            Err(e) if e.is_status(&[400, 403, 409, 500]) && attempt < attempts => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => {
                tracing::warn!("could not remove {o:?}: {e}");
                return;
            }
        }
    }
}
