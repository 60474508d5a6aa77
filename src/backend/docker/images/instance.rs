//! The instance tier's inputs: the base tree in the mirror (and the trees
//! of its submodules), and the instance image over a shared snapshot
//! ([`super::snapshot`]) when the base commit has one.

use std::path::Path;

use super::plans::{delta_instance_plan, snapshot_plan, TreeSource};
use super::{snapshot, ImageError, Tier};
use crate::backend::docker::{DockerBackend, DockerError};
use crate::backend::EnvError;
use crate::dataset::Instance;
use crate::spec::Spec;

impl DockerBackend {
    /// The base commit's tree in the mirror (no checkout needed), and the
    /// trees of the spec's submodules that the base tree records (each
    /// from its own mirror, at the commit recorded).
    pub(super) async fn base_tree(
        &self,
        inst: &Instance,
        spec: &Spec,
    ) -> Result<(TreeSource, Vec<(String, TreeSource)>), EnvError> {
        let (repos, repo, commit, wanted) = (
            self.repos.clone(),
            inst.repo.clone(),
            inst.base_commit.clone(),
            spec.submodules.clone(),
        );
        tokio::task::spawn_blocking(move || {
            let mirror = repos
                .ensure(&repo, &[&commit])
                .map_err(|e| EnvError::Infra(e.to_string()))?;
            let r =
                git2::Repository::open_bare(&mirror).map_err(|e| EnvError::Infra(e.to_string()))?;
            let base = git2::Oid::from_str(&commit)
                .and_then(|o| r.find_commit(o))
                .and_then(|c| c.tree())
                .map_err(|e| EnvError::Other(format!("base commit {commit} of {repo}: {e}")))?;
            let mut submodules = Vec::new();
            for (path, sub_repo) in &wanted {
                // A version without the submodule there has nothing to fill.
                let Ok(entry) = base.get_path(Path::new(path)) else {
                    continue;
                };
                if entry.kind() != Some(git2::ObjectType::Commit) {
                    continue;
                }
                let at = entry.id().to_string();
                let failed = |e: String| {
                    EnvError::Other(format!(
                        "submodule {path} ({sub_repo} at {at}): {e}; put a clone named {} in --mirror-dir",
                        sub_repo.replace('/', "__")
                    ))
                };
                let sub_mirror = repos
                    .ensure(sub_repo, &[&at])
                    .map_err(|e| failed(e.to_string()))?;
                let sr = git2::Repository::open_bare(&sub_mirror)
                    .map_err(|e| failed(e.to_string()))?;
                let tree = sr
                    .find_commit(entry.id())
                    .map(|c| c.tree_id())
                    .map_err(|e| failed(e.to_string()))?;
                submodules.push((
                    path.clone(),
                    TreeSource {
                        repo: sub_mirror,
                        tree,
                    },
                ));
            }
            Ok((
                TreeSource {
                    repo: mirror,
                    tree: base.id(),
                },
                submodules,
            ))
        })
        .await
        .map_err(|e| EnvError::Infra(format!("tree task: {e}")))?
    }

    /// The anchor tree of `inst`'s snapshot image ([`snapshot::anchor`]);
    /// None when its history starts in its window.
    pub(super) async fn snapshot_anchor(
        &self,
        inst: &Instance,
        base: &TreeSource,
    ) -> Result<Option<git2::Oid>, EnvError> {
        let (mirror, commit) = (base.repo.clone(), inst.base_commit.clone());
        tokio::task::spawn_blocking(move || {
            let r = git2::Repository::open_bare(&mirror)?;
            let Some(anchor) = snapshot::anchor(&r, git2::Oid::from_str(&commit)?)? else {
                return Ok(None);
            };
            let tree = r.find_commit(anchor)?.tree_id();
            Ok(Some(tree))
        })
        .await
        .map_err(|e| EnvError::Infra(format!("snapshot anchor task: {e}")))?
        .map_err(|e: git2::Error| {
            EnvError::Infra(format!("the snapshot of {}: {e}", inst.instance_id))
        })
    }

    /// The instance image of `inst` over the snapshot of tree `anchor`. A
    /// warm run only finds it; when it must be built, the snapshot is found
    /// or built first, then the differences are computed.
    pub(super) async fn delta_instance(
        &self,
        env: &str,
        inst: &Instance,
        spec: &Spec,
        base: TreeSource,
        anchor: git2::Oid,
    ) -> Result<(String, (String, Option<String>)), EnvError> {
        let snap = snapshot_plan(
            env,
            &inst.repo,
            TreeSource {
                repo: base.repo.clone(),
                tree: anchor,
            },
        );
        let plan = delta_instance_plan(&snap.name, &inst.instance_id, spec, base.tree);
        let name = plan.name.clone();
        let found = self
            .ensure_named(Tier::Instance, &name, || async move {
                self.ensure_built(&snap).await?;
                tokio::task::spawn_blocking(move || {
                    let git = |source| ImageError::Git {
                        what: format!("the changes from tree {anchor} to {}", base.tree),
                        source,
                    };
                    let r = git2::Repository::open_bare(&base.repo).map_err(git)?;
                    let delta = snapshot::tree_delta(&r, anchor, base.tree).map_err(git)?;
                    let pack =
                        snapshot::missing_objects_pack(&r, anchor, base.tree).map_err(git)?;
                    Ok(plan.with_delta(base.repo.clone(), delta, pack))
                })
                .await
                .map_err(|e| DockerError::Config(format!("instance delta task: {e}")))?
            })
            .await?;
        Ok((name, found))
    }
}
