//! What the engine holds of patchgrade's images, by kind and repository
//! (`patchgrade images`), what a cold run of a dataset would still have to
//! build ([`estimate`], from the build logs of earlier runs: [`builds`]),
//! and eviction by the cache's rule on request ([`engine`]).
//!
//! Disk is measured as the image cache measures it ([`cache::own_sizes`]):
//! each image counts what it adds over the largest patchgrade image whose
//! layers are a prefix of its own, so a parent's layers count once however
//! many images are built on it. Two limits, said in the output: layers
//! shared by siblings without a common parent image (env images that share
//! an apt layer through the build cache) count once per image, and a root
//! image counts the Debian image it came from.
//!
//! Everything here but [`engine`] is plain code.

pub mod builds;
pub mod engine;
pub mod estimate;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use super::cache::{self, Entry};
use super::images::name_part;
pub use super::images::Kind;

#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error(transparent)]
    Docker(#[from] super::DockerError),
    #[error(transparent)]
    Cache(#[from] cache::CacheError),
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("a run of the cache folder {cache} is going (it holds {lock}): eviction is left to the last run to end")]
    Leased {
        cache: std::path::PathBuf,
        lock: std::path::PathBuf,
    },
}

/// The repository key (`owner__name`, as image names spell it) an image
/// belongs to: snapshots and instances have one, the shared tiers none.
/// An instance's comes from `ids` (`name_part(instance id)` to the repo's
/// key, from a dataset) when known, else from its id: SWE-bench's ids are
/// `<owner>__<name>-<number>`.
pub fn repo_of(kind: Kind, rest: &str, ids: &HashMap<String, String>) -> Option<String> {
    // `rest` is `<arch>.<what>`: the arch has no dot.
    let what = rest.split_once('.').map_or(rest, |(_, w)| w);
    match kind {
        Kind::Snapshot => Some(what.to_string()),
        Kind::Instance => Some(ids.get(what).cloned().unwrap_or_else(
            || match what.rsplit_once('-') {
                Some((repo, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                    repo.to_string()
                }
                _ => what.to_string(),
            },
        )),
        _ => None,
    }
}

/// A dataset's repository (`owner/name`) as image names spell it.
pub fn repo_key(repo: &str) -> String {
    name_part(&repo.replace('/', "__"))
}

/// The repository (before the tag) of an image name.
pub fn repository(name: &str) -> &str {
    match name.rsplit_once(':') {
        // A registry port has a `/` after it; a tag never does.
        Some((r, tag)) if !tag.contains('/') => r,
        _ => name,
    }
}

/// One patchgrade image the engine holds (one name: an id with two tags
/// is two of these, the second adding nothing).
#[derive(Debug, Clone, Serialize)]
pub struct Held {
    pub name: String,
    pub id: String,
    pub kind: Kind,
    /// `owner__name`: a snapshot's or instance's own; for the other kinds,
    /// the one repository whose images are built on it. None: several, or
    /// none (see `serves`).
    pub repo: Option<String>,
    /// How many repositories' images are built on it (or are it).
    pub serves: usize,
    /// Its whole size, parents included, bytes.
    pub size: u64,
    /// What it adds over its nearest patchgrade parent, bytes.
    pub own: u64,
    /// A container (running or not) was made from it: never evicted.
    pub in_use: bool,
    #[serde(skip)]
    pub layers: Vec<String>,
}

/// An image as the engine lists it, before sizes are shared out.
#[derive(Debug, Clone)]
pub struct Listed {
    pub name: String,
    pub id: String,
    pub size: u64,
    pub layers: Vec<String>,
    pub in_use: bool,
}

/// The patchgrade images of `listed`, with their own sizes.
pub fn held(listed: Vec<Listed>, ids: &HashMap<String, String>) -> Vec<Held> {
    let ours: Vec<(Listed, Kind, Option<String>)> = listed
        .into_iter()
        .filter_map(|l| {
            let (kind, rest) = Kind::of(&l.name)?;
            let repo = repo_of(kind, rest, ids);
            Some((l, kind, repo))
        })
        .collect();
    let entries: BTreeMap<String, Entry> = ours
        .iter()
        .map(|(l, _, _)| {
            let e = Entry {
                id: l.id.clone(),
                last_used: 0,
                layers: l.layers.clone(),
                size: l.size,
            };
            (l.name.clone(), e)
        })
        .collect();
    let own = cache::own_sizes(&entries);
    let mut out: Vec<Held> = ours
        .into_iter()
        .map(|(l, kind, repo)| Held {
            own: own.get(&l.name).copied().unwrap_or(0),
            name: l.name,
            id: l.id,
            kind,
            repo,
            size: l.size,
            in_use: l.in_use,
            layers: l.layers,
            serves: 0,
        })
        .collect();
    // A shared tier's image belongs to the one repository whose images are
    // built on it, if one: most env images are one repository's.
    let serves: Vec<BTreeSet<String>> = out
        .iter()
        .map(|h| match &h.repo {
            Some(r) => BTreeSet::from([r.clone()]),
            None => out
                .iter()
                .filter(|c| c.layers.len() > h.layers.len() && c.layers.starts_with(&h.layers))
                .filter_map(|c| c.repo.clone())
                .collect(),
        })
        .collect();
    for (h, repos) in out.iter_mut().zip(serves) {
        h.serves = repos.len();
        if h.repo.is_none() && repos.len() == 1 {
            h.repo = repos.into_iter().next();
        }
    }
    out.sort_by(|a, b| (a.kind, &a.repo, &a.name).cmp(&(b.kind, &b.repo, &b.name)));
    out
}

/// The images of one kind and repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    pub kind: Kind,
    pub tier: &'static str,
    /// None: images of the shared tiers that several repositories' images
    /// are built on (`serves` > 0), or none (`serves` 0: nothing held is
    /// built on them).
    pub repo: Option<String>,
    pub serves: bool,
    pub images: usize,
    /// The sum of their own sizes, bytes.
    pub bytes: u64,
    pub in_use: usize,
}

/// `held` per kind and repository, lowest kind first.
pub fn groups(held: &[Held]) -> Vec<Group> {
    let mut map: BTreeMap<(Kind, Option<String>, bool), Group> = BTreeMap::new();
    for h in held {
        let serves = h.serves > 0;
        let g = map
            .entry((h.kind, h.repo.clone(), serves))
            .or_insert_with(|| Group {
                kind: h.kind,
                tier: h.kind.tier().name(),
                repo: h.repo.clone(),
                serves,
                images: 0,
                bytes: 0,
                in_use: 0,
            });
        g.images += 1;
        g.bytes += h.own;
        g.in_use += usize::from(h.in_use);
    }
    map.into_values().collect()
}

/// Per kind: images and bytes.
pub fn by_kind(groups: &[Group]) -> BTreeMap<Kind, (usize, u64)> {
    let mut out: BTreeMap<Kind, (usize, u64)> = BTreeMap::new();
    for g in groups {
        let e = out.entry(g.kind).or_default();
        e.0 += g.images;
        e.1 += g.bytes;
    }
    out
}

#[cfg(test)]
mod tests;
