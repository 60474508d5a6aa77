//! Instance images go to `--registry` once per run and are referenced by
//! digest: a node pulls exactly the bytes built here, and layers it already
//! holds (the shared base and env tiers) are not sent again.
//!
//! A layer goes up once: a push waits while another push of this run sends
//! a layer it has too (the instance images of one env share its layers;
//! pushed at once, each sent all of them, to repositories of their own).
//! Once a layer is in the registry, the engine mounts it from there.

use bollard::query_parameters::{
    PushImageOptionsBuilder, RemoveImageOptionsBuilder, TagImageOptionsBuilder,
};
use bollard::Docker;
use futures_util::StreamExt;

use super::{locked, SwarmBackend, SwarmError};
use crate::backend::docker::engine::call;
use crate::backend::docker::DockerEnv;

/// Pushing one image may take long (a first push sends the base layers).
const PUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

/// `name:tag` split at the tag's colon (a registry port has a colon too).
pub fn split_tag(image: &str) -> (&str, &str) {
    match image.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => (name, tag),
        _ => (image, "latest"),
    }
}

impl SwarmBackend {
    /// Tag the image under the registry, push it, and return
    /// `registry/name@sha256:...`.
    pub(super) async fn publish(&self, env: &DockerEnv) -> Result<String, SwarmError> {
        if let Some(r) = locked(&self.pushed).get(&env.id) {
            return Ok(r.clone());
        }
        let lock = {
            let mut m = locked(&self.push_locks);
            m.entry(env.id.clone()).or_default().clone()
        };
        let _held = lock.lock().await;
        if let Some(r) = locked(&self.pushed).get(&env.id) {
            return Ok(r.clone());
        }
        let docker = self.docker().await?;
        let sending = self.layers_to_send(docker, &env.id).await?;
        let (name, tag) = split_tag(&env.image);
        let repo = format!("{}/{}", self.registry, name);
        let opts = TagImageOptionsBuilder::default()
            .repo(&repo)
            .tag(tag)
            .build();
        call("tag image", docker.tag_image(&env.id, Some(opts))).await?;
        let push_failed = |reason: String| SwarmError::Push {
            image: env.image.clone(),
            registry: self.registry.clone(),
            reason,
        };
        let opts = PushImageOptionsBuilder::default().tag(tag).build();
        let mut stream = docker.push_image(&repo, Some(opts), None);
        let pushed = tokio::time::timeout(PUSH_TIMEOUT, async {
            while let Some(item) = stream.next().await {
                let info = item.map_err(|e| push_failed(e.to_string()))?;
                if let Some(detail) = info.error_detail {
                    return Err(push_failed(detail.message.unwrap_or_default()));
                }
            }
            Ok(())
        })
        .await;
        match pushed {
            Ok(r) => r?,
            Err(_) => {
                return Err(push_failed(format!(
                    "no end within {}s",
                    PUSH_TIMEOUT.as_secs()
                )))
            }
        }
        let tagged = format!("{repo}:{tag}");
        let inspected = call("inspect image", docker.inspect_image(&tagged)).await?;
        let prefix = format!("{repo}@");
        let reference = inspected
            .repo_digests
            .unwrap_or_default()
            .into_iter()
            .find(|d| d.starts_with(&prefix))
            .ok_or_else(|| push_failed("the engine recorded no digest for the push".into()))?;
        tracing::info!("pushed {} as {reference}", env.image);
        locked(&self.pushed).insert(env.id.clone(), reference.clone());
        for mut sent in sending {
            *sent = true;
        }
        Ok(reference)
    }

    /// The gates of the image's layers that no push of this run has sent
    /// yet, held: a push that shares one waits until this one ends. Taken
    /// in the order of the layers' digests, one order for every push, so no
    /// two pushes can each hold a gate the other waits for. Set once the
    /// push succeeded; a failed push leaves them for the next to send.
    async fn layers_to_send(
        &self,
        docker: &Docker,
        image: &str,
    ) -> Result<Vec<tokio::sync::OwnedMutexGuard<bool>>, SwarmError> {
        let inspected = call("inspect image", docker.inspect_image(image)).await?;
        let mut layers = inspected.root_fs.and_then(|r| r.layers).unwrap_or_default();
        layers.sort();
        layers.dedup();
        let mut held = Vec::new();
        for layer in layers {
            let gate = locked(&self.layer_gates).entry(layer).or_default().clone();
            let sent = gate.lock_owned().await;
            if !*sent {
                held.push(sent);
            }
        }
        Ok(held)
    }
}

/// Remove the registry tag this run added (the image itself stays, per
/// `--cache-level`, under its own name).
pub(super) async fn untag(docker: &Docker, reference: &str) {
    let Some((repo, _)) = reference.split_once('@') else {
        return;
    };
    let Ok(image) = call("inspect image", docker.inspect_image(reference)).await else {
        return;
    };
    for t in image.repo_tags.unwrap_or_default() {
        if split_tag(&t).0 == repo {
            let opts = RemoveImageOptionsBuilder::default().noprune(true).build();
            if let Err(e) = call("untag image", docker.remove_image(&t, Some(opts), None)).await {
                tracing::warn!("could not remove the tag {t}: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_split_after_the_port() {
        assert_eq!(split_tag("a.b:1f"), ("a.b", "1f"));
        assert_eq!(
            split_tag("127.0.0.1:5000/a.b:1f"),
            ("127.0.0.1:5000/a.b", "1f")
        );
        assert_eq!(
            split_tag("127.0.0.1:5000/a.b"),
            ("127.0.0.1:5000/a.b", "latest")
        );
    }
}
