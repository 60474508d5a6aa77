//! Instance images as a delta over a shared snapshot of their repository.
//!
//! A whole base tree per instance image (django: 36 MiB of files and 15 MiB
//! of git objects) made the instance tier most of the image set. Instances
//! whose base commits are close share one **snapshot** image (env + the
//! tree of an older commit at `/testbed`, its objects packed under
//! [`SNAPSHOT_OBJECTS`]), and each instance image adds only what differs:
//! the paths to delete, the files that changed, and a pack of the base
//! tree's objects the snapshot lacks. Its `/testbed` is the same one-commit
//! repository as before (the snapshot's objects reached through git's
//! alternates, never through a ref). A spec that builds nothing in its
//! snapshot gets those objects as a pack made here from the mirror
//! ([`tree_pack`]); a `snapshot_build` snapshot commits its tree in the
//! image, for its setup.
//!
//! The snapshot's commit, the **anchor**, is the newest first-parent
//! ancestor of the base commit committed before the window (91 days unless
//! the spec's `snapshots` says otherwise) the base commit falls in. Being an
//! ancestor, it holds nothing newer than the base (no future code in the
//! image, even unreachable); being fixed per window, base commits of the
//! same window and branch share it.
//!
//! With a spec's `snapshots.chain` above 1, a snapshot is built over the
//! snapshot of its own anchor (the previous window's) when both lie in one
//! chain span, holding only the files that changed and a pack of their
//! objects ([`chain`]): the history alone fixes every link, whichever
//! instances a run holds.
//!
//! Plain git2 code; [`super::build`] decides when to use it.

use std::collections::{BTreeSet, HashMap, HashSet};

use git2::{Delta, DiffOptions, ObjectType, Oid, Repository, Tree};

use crate::spec::SnapshotRule;

/// Where a snapshot image keeps its git objects (an alternate of every
/// instance repository built on it).
pub const SNAPSHOT_OBJECTS: &str = "/opt/patchgrade/snapshot-objects";

/// The window anchors are chosen by when a spec does not say (its
/// `snapshots`): base commits of one window share one.
pub const WINDOW_SECS: i64 = 91 * 24 * 3600;

const DAY_SECS: i64 = 24 * 3600;

/// A spec's [`SnapshotRule`] in seconds: how anchors and chains are cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    /// Seconds per window.
    pub secs: i64,
    /// Windows per chain span (1: no chains).
    pub chain: i64,
}

impl Windows {
    /// The rule of a spec (`None`: 91-day windows, no chains).
    pub fn of(rule: Option<SnapshotRule>) -> Windows {
        match rule {
            Some(r) => Windows {
                secs: i64::from(r.window_days.max(1)) * DAY_SECS,
                chain: i64::from(r.chain.max(1)),
            },
            None => Windows {
                secs: WINDOW_SECS,
                chain: 1,
            },
        }
    }
}

/// At most this many first-parent steps back to the anchor; a longer walk
/// (a window with that many commits) gives no anchor.
const MAX_WALK: usize = 20_000;

/// The snapshot commit of `base`: its newest first-parent ancestor committed
/// before `base`'s window began. None when the history (as the mirror has
/// it) starts inside the window.
pub fn anchor(repo: &Repository, base: Oid, w: Windows) -> Result<Option<Oid>, git2::Error> {
    let mut c = repo.find_commit(base)?;
    let start = c.time().seconds().div_euclid(w.secs) * w.secs;
    for _ in 0..MAX_WALK {
        if c.time().seconds() < start {
            return Ok(Some(c.id()));
        }
        c = match c.parent(0) {
            Ok(p) => p,
            // A root, or a parent the mirror does not have.
            Err(_) => return Ok(None),
        };
    }
    Ok(None)
}

/// The snapshots the snapshot of `anchor` is built from, oldest first and
/// ending with `anchor`: the first is a whole tree, each later one built
/// over the one before. A link's predecessor is its own [`anchor`], kept
/// while both fall in one span of `w.chain` windows; each step goes back a
/// window at least, so a chain has at most `w.chain` links.
pub fn chain(repo: &Repository, anchor_commit: Oid, w: Windows) -> Result<Vec<Oid>, git2::Error> {
    let span = w.secs * w.chain;
    let span_of = |c: Oid| -> Result<i64, git2::Error> {
        Ok(repo.find_commit(c)?.time().seconds().div_euclid(span))
    };
    let mut links = vec![anchor_commit];
    if w.chain > 1 {
        let own = span_of(anchor_commit)?;
        let mut link = anchor_commit;
        while let Some(prev) = anchor(repo, link, w)? {
            if span_of(prev)? != own {
                break;
            }
            links.push(prev);
            link = prev;
        }
    }
    links.reverse();
    Ok(links)
}

/// One file of the base tree an instance image writes over the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// Path in the repository.
    pub path: String,
    pub blob: Oid,
    /// Git file mode: 0o100644, 0o100755, 0o120000 (symlink), 0o160000
    /// (submodule: an empty folder, as in a checkout without it).
    pub mode: u32,
}

/// What turns the snapshot's tree into the base tree.
#[derive(Debug, Default, Clone)]
pub struct TreeDelta {
    /// Removed (`rm -rf`): paths gone, and paths whose type changes (a
    /// file becoming a folder or a symlink, and the reverse). A folder
    /// that disappears is one entry.
    pub delete: Vec<String>,
    /// Written: added and modified files (content or mode); see
    /// [`TreeDelta::split_writes`] for the order.
    pub write: Vec<Write>,
}

impl TreeDelta {
    /// The writes split by where the instance image puts them: most in
    /// place, and those on a path it deletes (a type change: a file,
    /// folder or symlink that becomes another kind) beside the tree, moved
    /// into place after the deletes. The image writes before it deletes
    /// (one `COPY`, then one `RUN`), and a copy must never depend on how
    /// the builder replaces one kind with another.
    pub fn split_writes(self) -> (Vec<Write>, Vec<Write>) {
        let deleted: HashSet<&str> = self.delete.iter().map(String::as_str).collect();
        self.write.into_iter().partition(|w| {
            !deleted.contains(w.path.as_str()) && !ancestors(&w.path).any(|a| deleted.contains(a))
        })
    }

    /// The delete list as the instance image reads it: NUL-separated.
    pub fn delete_list(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for p in &self.delete {
            out.extend_from_slice(p.as_bytes());
            out.push(0);
        }
        out
    }
}

/// The delta from tree `from` (the snapshot's) to tree `to` (the base's).
/// Paths that are not UTF-8 are left out, as [`super::super::archive`]
/// leaves them out of whole trees.
pub fn tree_delta(repo: &Repository, from: Oid, to: Oid) -> Result<TreeDelta, git2::Error> {
    let (old, new) = (repo.find_tree(from)?, repo.find_tree(to)?);
    let mut opts = DiffOptions::new();
    // A file that becomes a folder (or the reverse) shows as the file
    // deleted and the folder's files added: both removed first below.
    opts.include_typechange(true);
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), Some(&mut opts))?;
    let mut delete = BTreeSet::new();
    let mut write = Vec::new();
    for d in diff.deltas() {
        let (o, n) = (d.old_file(), d.new_file());
        match d.status() {
            Delta::Deleted => {
                if let Some(p) = o.path().and_then(|p| p.to_str()) {
                    delete.insert(topmost_gone(&new, p));
                }
            }
            Delta::Added | Delta::Modified | Delta::Typechange => {
                let Some(p) = n.path().and_then(|p| p.to_str()) else {
                    continue;
                };
                if d.status() == Delta::Typechange {
                    delete.insert(p.to_string());
                }
                write.push(Write {
                    path: p.to_string(),
                    blob: n.id(),
                    mode: u32::from(n.mode()),
                });
            }
            _ => {}
        }
    }
    // A folder removed whole is removed once.
    let delete: Vec<String> = delete
        .iter()
        .filter(|p| !ancestors(p).any(|a| delete.contains(a)))
        .cloned()
        .collect();
    Ok(TreeDelta { delete, write })
}

/// The shallowest ancestor folder of `path` that `tree` no longer has (the
/// whole folder goes), else `path` itself.
fn topmost_gone(tree: &Tree, path: &str) -> String {
    let mut dirs: Vec<&str> = ancestors(path).collect();
    dirs.reverse();
    for dir in dirs {
        let present = tree
            .get_path(std::path::Path::new(dir))
            .map(|e| e.kind() == Some(ObjectType::Tree))
            .unwrap_or(false);
        if !present {
            return dir.to_string();
        }
    }
    path.to_string()
}

/// `a/b/c` -> `a/b`, `a`.
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut rest = path;
    std::iter::from_fn(move || {
        let (parent, _) = rest.rsplit_once('/')?;
        rest = parent;
        Some(parent)
    })
}

/// A pack of the objects of tree `to` (trees and blobs) that tree `from`
/// does not hold: with `from`'s objects as an alternate, the base tree is
/// complete. Not thin: every delta's base is in the pack.
pub fn missing_objects_pack(repo: &Repository, from: Oid, to: Oid) -> Result<Vec<u8>, git2::Error> {
    let mut have = HashSet::new();
    collect(repo, from, &mut have)?;
    pack_of(repo, &have, to)
}

/// A pack of every object of `tree` (its trees and blobs; a submodule's
/// commit is not one): the git objects of a snapshot image, made from the
/// mirror. Committing the tree in the image instead (`git add`, commit,
/// repack) took 13 s of a django snapshot's build under load, this 3.4 s.
pub fn tree_pack(repo: &Repository, tree: Oid) -> Result<Vec<u8>, git2::Error> {
    pack_of(repo, &HashSet::new(), tree)
}

/// A pack of the objects of tree `to` not in `have`.
fn pack_of(repo: &Repository, have: &HashSet<Oid>, to: Oid) -> Result<Vec<u8>, git2::Error> {
    let mut pb = repo.packbuilder()?;
    pb.set_threads(1);
    let mut stack = vec![to];
    let mut queued = HashSet::new();
    while let Some(id) = stack.pop() {
        if have.contains(&id) || !queued.insert(id) {
            continue;
        }
        pb.insert_object(id, None)?;
        for e in repo.find_tree(id)?.iter() {
            match e.kind() {
                Some(ObjectType::Tree) => stack.push(e.id()),
                Some(ObjectType::Blob) if !have.contains(&e.id()) && queued.insert(e.id()) => {
                    pb.insert_object(e.id(), None)?;
                }
                _ => {}
            }
        }
    }
    let mut buf = git2::Buf::new();
    pb.write_buf(&mut buf)?;
    Ok(buf.to_vec())
}

/// Every tree and blob id of `tree` that the snapshot image holds. A tree
/// with a submodule (a gitlink) in it, or under it, is not one: the
/// snapshot's checkout has an empty folder there, which `git add` leaves
/// out, so the snapshot's own tree of that folder differs (sharkdp/bat's
/// `assets/syntaxes`).
fn collect(repo: &Repository, tree: Oid, out: &mut HashSet<Oid>) -> Result<(), git2::Error> {
    let mut memo = HashMap::new();
    collect_into(repo, tree, out, &mut memo).map(|_| ())
}

/// Whether `tree` is reproduced by `git add` of its checkout; its objects
/// that are, added to `out`.
fn collect_into(
    repo: &Repository,
    tree: Oid,
    out: &mut HashSet<Oid>,
    memo: &mut HashMap<Oid, bool>,
) -> Result<bool, git2::Error> {
    if let Some(done) = memo.get(&tree) {
        return Ok(*done);
    }
    let mut whole = true;
    for e in repo.find_tree(tree)?.iter() {
        match e.kind() {
            Some(ObjectType::Tree) => whole &= collect_into(repo, e.id(), out, memo)?,
            Some(ObjectType::Blob) => {
                out.insert(e.id());
            }
            Some(ObjectType::Commit) => whole = false,
            _ => {}
        }
    }
    if whole {
        out.insert(tree);
    }
    memo.insert(tree, whole);
    Ok(whole)
}

#[cfg(test)]
#[path = "snapshot_tests.rs"]
mod tests;
