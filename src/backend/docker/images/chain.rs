//! The images of a snapshot chain's later links (a spec's
//! `snapshots.chain`, [`super::snapshot::chain`]): each over the snapshot
//! before it, holding the files that changed since that snapshot's tree and
//! a pack of the objects the earlier snapshots lack. The chain's first link
//! is an ordinary snapshot ([`super::plans::snapshot_plan`]).

use std::path::PathBuf;

use super::plans::{ContextFile, ImagePlan, SNAPSHOT_PACK};
use super::setup::{DELTA_DELETE_LIST, DELTA_MOVED};
use super::snapshot::{TreeDelta, SNAPSHOT_OBJECTS};
use super::Tier;

const LINK_DOCKERFILE: &str =
    include_str!("../../../../harness-scripts/docker/snapshot-link.Dockerfile");

/// The name of a link's pack under [`SNAPSHOT_OBJECTS`]`/pack`: one per
/// link, beside the packs of the links below it.
fn link_pack(tree: git2::Oid) -> String {
    format!("{SNAPSHOT_PACK}-{tree}")
}

/// The snapshot image of `repo` at `tree` over the snapshot image `parent`,
/// named but without its changes: [`ImagePlan::with_link_changes`] adds
/// them when it is built. Its name holds the parent's and the tree's, so
/// the history alone fixes it.
pub fn snapshot_link_plan(parent: &str, repo: &str, tree: git2::Oid) -> ImagePlan {
    let dockerfile = LINK_DOCKERFILE
        .replace("{{parent}}", parent)
        .replace("{{objects}}", SNAPSHOT_OBJECTS)
        .replace("{{delete}}", DELTA_DELETE_LIST)
        .replace("{{moved}}", DELTA_MOVED)
        .replace("{{pack}}", &link_pack(tree));
    let tree_id = tree.to_string();
    ImagePlan::addressed(
        Tier::Env,
        super::plans::snapshot_repository(repo),
        &[dockerfile.as_bytes(), tree_id.as_bytes()],
        dockerfile.clone(),
        Vec::new(),
        Vec::new(),
    )
}

impl ImagePlan {
    /// A link's plan with what its build sends: the changes from the parent
    /// snapshot's tree to `tree` (in `repo`, the mirror) and `pack`, the
    /// objects of `tree` the parent's tree lacks
    /// ([`super::snapshot::missing_objects_pack`]). Its name does not
    /// change: the parent's tree and `tree` determine both.
    pub fn with_link_changes(
        self,
        repo: PathBuf,
        tree: git2::Oid,
        delta: TreeDelta,
        pack: Vec<u8>,
    ) -> ImagePlan {
        let pack = ContextFile::new(
            &format!("snapshot-objects/pack/{}.pack", link_pack(tree)),
            pack,
        );
        self.with_changes(repo, delta, pack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_named_by_its_parent_and_tree_and_sends_a_pack_of_its_own() {
        let t1 = git2::Oid::from_str("1111111111111111111111111111111111111111").unwrap();
        let t2 = git2::Oid::from_str("2222222222222222222222222222222222222222").unwrap();
        let a = snapshot_link_plan("patchgrade.snap.x86_64.acme__w:aaaa", "acme/w", t1);
        assert!(a.name.starts_with("patchgrade.snap."), "{}", a.name);
        assert!(a
            .dockerfile
            .contains("FROM patchgrade.snap.x86_64.acme__w:aaaa\n"));
        assert_eq!(
            a.name,
            snapshot_link_plan("patchgrade.snap.x86_64.acme__w:aaaa", "acme/w", t1).name
        );
        // Another parent or another tree is another image.
        let other_parent = snapshot_link_plan("patchgrade.snap.x86_64.acme__w:bbbb", "acme/w", t1);
        let other_tree = snapshot_link_plan("patchgrade.snap.x86_64.acme__w:aaaa", "acme/w", t2);
        assert_ne!(a.name, other_parent.name);
        assert_ne!(a.name, other_tree.name);
        // The changes do not rename it; its pack is named by its tree.
        let name = a.name.clone();
        let b = a.with_link_changes(PathBuf::from("/m"), t1, TreeDelta::default(), vec![1]);
        assert_eq!(b.name, name);
        let pack = format!("snapshot-objects/pack/{SNAPSHOT_PACK}-{t1}.pack");
        assert!(b.files.iter().any(|f| f.path == pack), "{:?}", b.files);
        assert!(b.dockerfile.contains(&format!(
            "git index-pack {SNAPSHOT_OBJECTS}/pack/{SNAPSHOT_PACK}-{t1}.pack"
        )));
    }
}
