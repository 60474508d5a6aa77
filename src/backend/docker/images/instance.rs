//! The instance tier's inputs: the base tree in the mirror (and the trees
//! of its submodules), and the instance image over a shared snapshot
//! ([`super::snapshot`]) when the base commit has one.

use std::path::Path;

use super::build::Over;
use super::chain::snapshot_link_plan;
use super::plans::{delta_instance_plan, snapshot_plan, ImagePlan, TreeSource};
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
        let (repos, repo, commit, wanted, absent) = (
            self.repos.clone(),
            inst.repo.clone(),
            inst.base_commit.clone(),
            spec.submodules.clone(),
            spec.absent_files.clone(),
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
            let (stand_in, left_out) = without_absent(&r, base.id(), &absent)
                .map_err(|e| EnvError::Infra(format!("base tree of {repo} at {commit}: {e}")))?;
            for path in &left_out {
                tracing::warn!(
                    "{repo} at {commit}: the mirror lacks {path} (the spec's absent_files): the image's tree leaves it out"
                );
            }
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
                    tree: stand_in,
                },
                submodules,
            ))
        })
        .await
        .map_err(|e| EnvError::Infra(format!("tree task: {e}")))?
    }

    /// The anchor of `inst`'s snapshot image ([`snapshot::anchor`]); None
    /// when its history starts in its window.
    pub(super) async fn snapshot_anchor(
        &self,
        inst: &Instance,
        spec: &Spec,
        base: &TreeSource,
    ) -> Result<Option<Anchor>, EnvError> {
        let (mirror, commit) = (base.repo.clone(), inst.base_commit.clone());
        let (repos, repo) = (self.repos.clone(), inst.repo.clone());
        let absent = spec.absent_files.clone();
        // Only a snapshot that runs the setup needs the anchor's version.
        let versioned = spec.snapshot_build;
        let windows = snapshot::Windows::of(spec.snapshots);
        tokio::task::spawn_blocking(move || {
            let r = git2::Repository::open_bare(&mirror)?;
            let base = git2::Oid::from_str(&commit)?;
            let Some(anchor) = snapshot::anchor(&r, base, windows)? else {
                return Ok(None);
            };
            let version = match versioned {
                true => repos
                    .base_version(&repo, &anchor.to_string())
                    .ok()
                    .flatten(),
                false => None,
            };
            let mut links = Vec::new();
            for c in snapshot::chain(&r, anchor, windows)? {
                let tree = r.find_commit(c)?.tree_id();
                links.push(without_absent(&r, tree, &absent)?.0);
            }
            Ok(Some(Anchor { links, version }))
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
        anchor: Anchor,
    ) -> Result<(String, (String, Option<String>)), EnvError> {
        let Anchor { links, version } = anchor;
        let (first, later) = links.split_first().ok_or_else(|| {
            EnvError::Infra(format!("the snapshot of {}: no tree", inst.instance_id))
        })?;
        let anchor = *links.last().unwrap_or(first);
        let snap = snapshot_plan(
            env,
            &inst.repo,
            &spec.at_version(version),
            TreeSource {
                repo: base.repo.clone(),
                tree: *first,
            },
        );
        // Each later link of the chain over the one before, with its tree.
        let mut chained: Vec<(ImagePlan, git2::Oid)> = Vec::new();
        let mut snap_name = snap.name.clone();
        for tree in later {
            let link = snapshot_link_plan(&snap_name, &inst.repo, *tree);
            snap_name = link.name.clone();
            chained.push((link, *tree));
        }
        let plan = delta_instance_plan(&snap_name, &inst.instance_id, spec, base.tree);
        let name = plan.name.clone();
        let first = *first;
        let found = self
            .ensure_over(
                Tier::Instance,
                &name,
                Some(Over::new(&snap_name, inst)),
                || async move {
                    // A build that compiles goes through the store, if served.
                    let remote = self.compiler_remote_for(spec).await;
                    let snap_plan = snap.with_compiler_remote(remote.clone());
                    let first_name = snap_plan.name.clone();
                    let (mirror, pure) = (base.repo.clone(), !spec.snapshot_build);
                    self.ensure_named(Tier::Env, &first_name, || async move {
                        if !pure {
                            return Ok(snap_plan);
                        }
                        // Its objects, packed from the mirror only when it
                        // is built.
                        let pack = tokio::task::spawn_blocking(move || {
                            let r = git2::Repository::open_bare(&mirror)?;
                            snapshot::tree_pack(&r, first)
                        })
                        .await
                        .map_err(|e| DockerError::Config(format!("snapshot pack task: {e}")))?
                        .map_err(|source| ImageError::Git {
                            what: format!("the objects of tree {first}"),
                            source,
                        })?;
                        Ok(snap_plan.with_objects_pack(pack))
                    })
                    .await?;
                    let mut below = first;
                    for (link, tree) in chained {
                        let mirror = base.repo.clone();
                        let link_name = link.name.clone();
                        self.ensure_named(Tier::Env, &link_name, || async move {
                            link_changes(link, mirror, below, tree).await
                        })
                        .await?;
                        below = tree;
                    }
                    tokio::task::spawn_blocking(move || {
                        let git = |source| ImageError::Git {
                            what: format!("the changes from tree {anchor} to {}", base.tree),
                            source,
                        };
                        let r = git2::Repository::open_bare(&base.repo).map_err(git)?;
                        let delta = snapshot::tree_delta(&r, anchor, base.tree).map_err(git)?;
                        let pack =
                            snapshot::missing_objects_pack(&r, anchor, base.tree).map_err(git)?;
                        Ok(plan
                            .with_delta(base.repo.clone(), delta, pack)
                            .with_compiler_remote(remote))
                    })
                    .await
                    .map_err(|e| DockerError::Config(format!("instance delta task: {e}")))?
                },
            )
            .await?;
        Ok((name, found))
    }
}

/// The commits a snapshot image is made of: the trees (without the spec's
/// absent files) of its chain's links, oldest first, the last its own
/// ([`snapshot::chain`]; one without chains) and, for a `snapshot_build`
/// spec, its upstream version.
pub(super) struct Anchor {
    pub links: Vec<git2::Oid>,
    pub version: Option<String>,
}

/// A chain link's plan completed with its changes over the snapshot of tree
/// `below`: computed from the mirror only when the link is built.
async fn link_changes(
    link: ImagePlan,
    mirror: std::path::PathBuf,
    below: git2::Oid,
    tree: git2::Oid,
) -> Result<ImagePlan, DockerError> {
    tokio::task::spawn_blocking(move || {
        let git = |source| ImageError::Git {
            what: format!("the changes from tree {below} to {tree}"),
            source,
        };
        let r = git2::Repository::open_bare(&mirror).map_err(git)?;
        let delta = snapshot::tree_delta(&r, below, tree).map_err(git)?;
        let pack = snapshot::missing_objects_pack(&r, below, tree).map_err(git)?;
        Ok(link.with_link_changes(mirror, tree, delta, pack))
    })
    .await
    .map_err(|e| DockerError::Config(format!("snapshot link task: {e}")))?
}

/// `tree`, or a tree written beside it without the `absent` files whose
/// content the mirror lacks (a snapshot's left-out large files), and the
/// paths left out. A mirror that holds a file keeps it.
pub(crate) fn without_absent(
    r: &git2::Repository,
    tree: git2::Oid,
    absent: &[String],
) -> Result<(git2::Oid, Vec<String>), git2::Error> {
    let t = r.find_tree(tree)?;
    let odb = r.odb()?;
    let mut left_out = Vec::new();
    let mut update = git2::build::TreeUpdateBuilder::new();
    for path in absent {
        let Ok(entry) = t.get_path(Path::new(path)) else {
            continue;
        };
        if entry.kind() == Some(git2::ObjectType::Blob) && !odb.exists(entry.id()) {
            update.remove(path.as_str());
            left_out.push(path.clone());
        }
    }
    if left_out.is_empty() {
        return Ok((tree, left_out));
    }
    Ok((update.create_updated(r, &t)?, left_out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository whose tree names a blob its object store lacks, as a
    /// snapshot that left out a large file: the blob is written, the tree
    /// made, then the blob's loose object removed.
    fn with_missing_blob() -> (tempfile::TempDir, git2::Repository, git2::Oid) {
        let dir = tempfile::tempdir().unwrap();
        let r = git2::Repository::init_bare(dir.path()).unwrap();
        let kept = r.blob(b"kept\n").unwrap();
        let lost = r.blob(b"a large release tool\n").unwrap();
        let tree = {
            let mut sub = r.treebuilder(None).unwrap();
            sub.insert("big.jar", lost, 0o100644).unwrap();
            sub.insert("tool.sh", kept, 0o100755).unwrap();
            let sub = sub.write().unwrap();
            let mut root = r.treebuilder(None).unwrap();
            root.insert("scripts", sub, 0o040000).unwrap();
            root.insert("README", kept, 0o100644).unwrap();
            root.write().unwrap()
        };
        let hex = lost.to_string();
        std::fs::remove_file(dir.path().join("objects").join(&hex[..2]).join(&hex[2..])).unwrap();
        let r = git2::Repository::open_bare(dir.path()).unwrap();
        assert!(!r.odb().unwrap().exists(lost));
        (dir, r, tree)
    }

    #[test]
    fn a_listed_file_the_mirror_lacks_is_left_out_and_the_rest_kept() {
        let (_d, r, tree) = with_missing_blob();
        let absent = vec!["scripts/big.jar".to_string(), "not/there".to_string()];
        let (stand_in, left_out) = without_absent(&r, tree, &absent).unwrap();
        assert_eq!(left_out, vec!["scripts/big.jar".to_string()]);
        let t = r.find_tree(stand_in).unwrap();
        assert!(t.get_path(Path::new("scripts/big.jar")).is_err());
        assert!(t.get_path(Path::new("scripts/tool.sh")).is_ok());
        assert!(t.get_path(Path::new("README")).is_ok());
        // Every blob of the stand-in can be read: an image can be made of it.
        let mut missing = 0;
        t.walk(git2::TreeWalkMode::PreOrder, |_, e| {
            if e.kind() == Some(git2::ObjectType::Blob) && r.find_blob(e.id()).is_err() {
                missing += 1;
            }
            git2::TreeWalkResult::Ok
        })
        .unwrap();
        assert_eq!(missing, 0);
    }

    #[test]
    fn a_file_the_mirror_holds_or_the_spec_does_not_list_is_kept() {
        let (_d, r, tree) = with_missing_blob();
        // Listed but present: kept, the tree is the base's own.
        let (same, left_out) = without_absent(&r, tree, &["README".to_string()]).unwrap();
        assert_eq!((same, left_out.len()), (tree, 0));
        // Missing but not listed: not this function's to hide.
        let (same, left_out) = without_absent(&r, tree, &[]).unwrap();
        assert_eq!((same, left_out.len()), (tree, 0));
    }
}
