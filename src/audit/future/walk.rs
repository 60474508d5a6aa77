//! The mirror's side of the future-copy check: the commits after the base
//! that touch the candidate's files, and what each changed there, as
//! whitespace-free line keys; and which lines the base tree already has.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use git2::{Commit, Oid, Repository, Tree};

/// Base-tree files larger than this are not read for the lines an agent
/// could see at the base (generated data, not code it copies from).
const MAX_BLOB: usize = 2 << 20;

/// Line keys with their counts (a multiset).
pub(super) type Counts = HashMap<String, usize>;

/// What one change did to one file: keys added and removed, counted.
#[derive(Debug, Default)]
pub(super) struct Delta {
    pub added: Counts,
    pub removed: Counts,
}

/// A commit after the base that touches one of the candidate's files.
#[derive(Debug)]
pub(super) struct Touching {
    pub id: Oid,
    pub time: i64,
    pub summary: String,
    /// Its change against its first parent, by candidate path.
    pub single: BTreeMap<String, Delta>,
    /// The base's files against this commit's: the run of commits up to it.
    pub cumulative: BTreeMap<String, Delta>,
}

/// The walk's bounds (docs/audit.md, "Copies of the future").
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    /// Commits kept that touch the candidate's files, oldest first.
    pub max_touching: usize,
    /// First-parent commits read in all, over every branch.
    pub max_walked: usize,
    /// Commits after the base looked at for touching, oldest first.
    pub max_examined: usize,
}

/// How far a first-parent walk goes below the base's date before it stops:
/// dates are not monotonic along history, a month of skew is.
const SLACK: i64 = 30 * 86_400;

/// A line's key: its text with every whitespace character removed; None
/// for a line with no letter or digit (`}`, `)`, blank), which explains
/// nothing.
pub(super) fn key(text: &str) -> Option<String> {
    let k: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    k.chars().any(char::is_alphanumeric).then_some(k)
}

/// The later of author and committer time (a rebased fix keeps an old
/// author date).
pub(super) fn commit_time(c: &Commit) -> i64 {
    c.time().seconds().max(c.author().when().seconds())
}

/// Commits dated after `base_time` on the first-parent history of every
/// branch (`refs/heads/*`, `refs/remotes/*`, `HEAD`), oldest first, and how
/// many commits were read. Pull-request refs are left out: a mirror holds
/// thousands, and a merged one's change is on a branch.
pub(super) fn future_commits(
    repo: &Repository,
    base: Oid,
    base_time: i64,
    bounds: Bounds,
) -> Result<(Vec<(Oid, i64)>, usize), git2::Error> {
    let mut tips = Vec::new();
    for r in repo.references()?.flatten() {
        let Some(name) = r.name() else { continue };
        if name.starts_with("refs/heads/") || name.starts_with("refs/remotes/") {
            if let Ok(c) = r.peel_to_commit() {
                tips.push(c.id());
            }
        }
    }
    if let Ok(c) = repo.head().and_then(|h| h.peel_to_commit()) {
        tips.push(c.id());
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut walked = 0;
    for tip in tips {
        let mut cur = repo.find_commit(tip).ok();
        while let Some(c) = cur {
            // A commit seen before: its first-parent history was walked.
            if c.id() == base || !seen.insert(c.id()) || walked >= bounds.max_walked {
                break;
            }
            walked += 1;
            let t = commit_time(&c);
            if t < base_time - SLACK {
                break;
            }
            if t > base_time {
                out.push((c.id(), t));
            }
            cur = c.parent(0).ok();
        }
    }
    out.sort_by_key(|(id, t)| (*t, *id));
    Ok((out, walked))
}

/// Key counts of blobs, read once each.
#[derive(Default)]
struct Blobs {
    by_id: HashMap<Oid, Rc<Counts>>,
    empty: Rc<Counts>,
}

impl Blobs {
    /// The keys of `path` in `tree`: none when it is absent or binary.
    fn at(&mut self, repo: &Repository, tree: &Tree, path: &str) -> Rc<Counts> {
        let Ok(entry) = tree.get_path(std::path::Path::new(path)) else {
            return self.empty.clone();
        };
        let id = entry.id();
        if let Some(c) = self.by_id.get(&id) {
            return c.clone();
        }
        let mut counts = Counts::new();
        if let Ok(blob) = repo.find_blob(id) {
            if !blob.is_binary() {
                for line in String::from_utf8_lossy(blob.content()).lines() {
                    if let Some(k) = key(line) {
                        *counts.entry(k).or_default() += 1;
                    }
                }
            }
        }
        let rc = Rc::new(counts);
        self.by_id.insert(id, rc.clone());
        rc
    }
}

/// Whether `path` differs between two trees, read top down: most commits
/// leave a top folder as it was, which settles it without reading further.
fn differs(repo: &Repository, a: &Tree, b: &Tree, path: &str) -> bool {
    if a.id() == b.id() {
        return false;
    }
    let parts: Vec<&str> = path.split('/').collect();
    let (mut a, mut b) = (a.clone(), b.clone());
    for (i, part) in parts.iter().enumerate() {
        let (ea, eb) = (
            a.get_name(part).map(|e| e.id()),
            b.get_name(part).map(|e| e.id()),
        );
        if ea == eb {
            return false;
        }
        let (Some(ea), Some(eb)) = (ea, eb) else {
            return true;
        };
        if i + 1 == parts.len() {
            return true;
        }
        match (repo.find_tree(ea), repo.find_tree(eb)) {
            (Ok(ta), Ok(tb)) => (a, b) = (ta, tb),
            _ => return true,
        }
    }
    false
}

/// Ancestors of the base dated after it (a skewed clock): they are not the
/// future, whatever their date. The walk stops at the base's date less the
/// slack, so it reads only recent history.
fn skewed_ancestors(base: &Commit, base_time: i64) -> HashSet<Oid> {
    let mut out = HashSet::new();
    let mut stack: Vec<Commit> = base.parents().collect();
    let mut seen = HashSet::new();
    while let Some(c) = stack.pop() {
        if !seen.insert(c.id()) || commit_time(&c) < base_time - SLACK || seen.len() > 10_000 {
            continue;
        }
        if commit_time(&c) > base_time {
            out.insert(c.id());
        }
        stack.extend(c.parents());
    }
    out
}

fn delta(old: &Counts, new: &Counts) -> Delta {
    let over = |a: &Counts, b: &Counts| -> Counts {
        a.iter()
            .filter_map(|(k, n)| {
                let d = n.saturating_sub(b.get(k).copied().unwrap_or(0));
                (d > 0).then(|| (k.clone(), d))
            })
            .collect()
    };
    Delta {
        added: over(new, old),
        removed: over(old, new),
    }
}

/// The first `bounds.max_touching` of `commits` (oldest first) whose change
/// against their first parent touches one of `paths`, with their deltas.
/// Only the first `bounds.max_examined` commits are looked at. Root commits
/// and ancestors of the base (a skewed date) are skipped.
pub(super) fn touching(
    repo: &Repository,
    base: &Commit,
    commits: &[(Oid, i64)],
    paths: &[String],
    bounds: Bounds,
) -> Result<Vec<Touching>, git2::Error> {
    let base_tree = base.tree()?;
    let skewed = skewed_ancestors(base, commit_time(base));
    let mut blobs = Blobs::default();
    let mut out = Vec::new();
    for (id, t) in commits.iter().take(bounds.max_examined) {
        if out.len() >= bounds.max_touching {
            break;
        }
        let c = repo.find_commit(*id)?;
        let Ok(parent) = c.parent(0) else { continue };
        let (tree, ptree) = (c.tree()?, parent.tree()?);
        let changed: Vec<&String> = paths
            .iter()
            .filter(|p| differs(repo, &tree, &ptree, p))
            .collect();
        if changed.is_empty() || skewed.contains(id) {
            continue;
        }
        let mut single = BTreeMap::new();
        for p in changed {
            let (old, new) = (blobs.at(repo, &ptree, p), blobs.at(repo, &tree, p));
            single.insert(p.clone(), delta(&old, &new));
        }
        let mut cumulative = BTreeMap::new();
        for p in paths {
            let (old, new) = (blobs.at(repo, &base_tree, p), blobs.at(repo, &tree, p));
            cumulative.insert(p.clone(), delta(&old, &new));
        }
        out.push(Touching {
            id: *id,
            time: *t,
            summary: c.summary().unwrap_or("").chars().take(100).collect(),
            single,
            cumulative,
        });
    }
    Ok(out)
}

/// Which of `keys` are a line of some file of the base tree: what the
/// agent could read in its checkout (an idiom of the repository, another
/// class's docstring) is no copy of the future. Read only for a candidate
/// the rule would flag.
pub(super) fn in_base_tree(
    repo: &Repository,
    tree: &Tree,
    keys: &HashSet<&str>,
) -> Result<HashSet<String>, git2::Error> {
    let mut found = HashSet::new();
    if keys.is_empty() {
        return Ok(found);
    }
    let mut failed = None;
    tree.walk(git2::TreeWalkMode::PreOrder, |_, entry| {
        if entry.kind() != Some(git2::ObjectType::Blob) {
            return git2::TreeWalkResult::Ok;
        }
        let blob = match repo.find_blob(entry.id()) {
            Ok(b) => b,
            Err(e) => {
                failed = Some(e);
                return git2::TreeWalkResult::Abort;
            }
        };
        if blob.size() > MAX_BLOB || blob.is_binary() {
            return git2::TreeWalkResult::Ok;
        }
        for line in String::from_utf8_lossy(blob.content()).lines() {
            if let Some(k) = key(line) {
                if keys.contains(k.as_str()) {
                    found.insert(k);
                }
            }
        }
        if found.len() == keys.len() {
            git2::TreeWalkResult::Abort
        } else {
            git2::TreeWalkResult::Ok
        }
    })
    .or_else(|e| {
        // Abort is reported as an error by libgit2: not one here.
        if e.code() == git2::ErrorCode::User {
            Ok(())
        } else {
            Err(e)
        }
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(found),
    }
}
