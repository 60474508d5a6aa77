//! The inventory on the engine: the images listed and inspected, the
//! containers that hold them, and eviction by the cache's rule
//! ([`cache::plan_eviction`]: least recently used first, to fit the budget,
//! never an image a container was made from or one a kept image is built
//! on). Only images in the cache folder's index are ever candidates, as in
//! a run: images no run of this cache folder used are not ours to remove.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use bollard::query_parameters::{ListContainersOptionsBuilder, ListImagesOptionsBuilder};
use bollard::Docker;
use futures_util::StreamExt;
use serde::Serialize;

use super::super::cache::{self, Budget, Index};
use super::super::engine::{self, call};
use super::super::evict::flock;
use super::{held, Held, InventoryError, Kind, Listed};

/// The patchgrade images the engine holds. `ids` maps `name_part(instance
/// id)` to its repository key where a dataset says it.
pub async fn holdings(
    docker: &Docker,
    ids: &HashMap<String, String>,
) -> Result<Vec<Held>, InventoryError> {
    let opts = ListImagesOptionsBuilder::default().all(false).build();
    let images = call("list images", docker.list_images(Some(opts)))
        .await
        .map_err(super::super::DockerError::from)?;
    let copts = ListContainersOptionsBuilder::default().all(true).build();
    let containers = call("list containers", docker.list_containers(Some(copts)))
        .await
        .map_err(super::super::DockerError::from)?;
    // Stopped containers count: removing their image fails, or would
    // leave them without one.
    let busy: HashSet<String> = containers.into_iter().filter_map(|c| c.image_id).collect();
    let mut named: Vec<(String, String, u64)> = Vec::new();
    for i in images {
        for t in &i.repo_tags {
            if Kind::of(t).is_some() {
                named.push((t.clone(), i.id.clone(), i.size.max(0) as u64));
            }
        }
    }
    // The layers, once per id: what tells a parent from a child.
    let ids_wanted: HashSet<String> = named.iter().map(|(_, id, _)| id.clone()).collect();
    let layers: HashMap<String, Vec<String>> = futures_util::stream::iter(ids_wanted)
        .map(|id| async move {
            let r = call("inspect image", docker.inspect_image(&id)).await;
            (id, r)
        })
        .buffer_unordered(8)
        .filter_map(|(id, r)| async move {
            match r {
                Ok(i) => Some((id, i.root_fs.and_then(|r| r.layers).unwrap_or_default())),
                // Removed meanwhile: it is not held.
                Err(e) if e.is_status(&[404]) => None,
                Err(e) => {
                    tracing::warn!("{e}");
                    None
                }
            }
        })
        .collect()
        .await;
    let listed: Vec<Listed> = named
        .into_iter()
        .filter_map(|(name, id, size)| {
            let l = layers.get(&id)?.clone();
            Some(Listed {
                in_use: busy.contains(&id),
                name,
                id,
                size,
                layers: l,
            })
        })
        .collect();
    Ok(held(listed, ids))
}

/// What eviction would remove now.
#[derive(Debug, Clone, Serialize)]
pub struct EvictionPlan {
    pub index: PathBuf,
    pub budget: u64,
    pub rule: String,
    /// The indexed images' disk now, shared layers once.
    pub usage: u64,
    pub indexed: usize,
    /// Patchgrade images in the engine no run of this cache folder used:
    /// never candidates.
    pub not_indexed: usize,
    /// Indexed images a container holds: kept.
    pub in_use: usize,
    /// Removal waves: an image's children in an earlier wave than it.
    pub waves: Vec<Vec<String>>,
    /// Disk freed once they are gone (the index's own sizes).
    pub freed: u64,
    /// Another run of this cache folder holds its lease.
    pub leased: bool,
}

fn lock_path(cache_dir: &Path) -> PathBuf {
    cache_dir.join("docker/images.lock")
}

/// The eviction `budget` (`--cache-budget`; else the runs' default rule)
/// asks for, over the index of `cache_dir` as the engine holds it now.
pub async fn plan(
    docker: &Docker,
    cache_dir: &Path,
    budget: Option<u64>,
    held: &[Held],
) -> Result<(EvictionPlan, Index), InventoryError> {
    let path = cache_dir.join("docker/images.json");
    let mut index = Index::load(&path)?;
    // As a run does: entries gone from the engine, or re-tagged, drop.
    let present: HashMap<&str, &str> = held
        .iter()
        .map(|h| (h.name.as_str(), h.id.as_str()))
        .collect();
    let gone: Vec<String> = index
        .images
        .iter()
        .filter(|(n, e)| present.get(n.as_str()) != Some(&e.id.as_str()))
        .map(|(n, _)| n.clone())
        .collect();
    for n in gone {
        index.images.remove(&n);
        index.forgotten.insert(n);
    }
    let in_use: HashSet<String> = held
        .iter()
        .filter(|h| h.in_use && index.images.contains_key(&h.name))
        .map(|h| h.name.clone())
        .collect();
    let usage = cache::usage(&index.images);
    let root = match call("info", docker.info()).await {
        Ok(info) => info.docker_root_dir,
        Err(e) => {
            tracing::warn!("{e}");
            None
        }
    };
    let free = root
        .as_deref()
        .and_then(|r| cache::free_space(Path::new(r)).map(|f| (f, r)));
    let Budget { bytes, rule } = cache::budget(budget, free, usage);
    let waves = cache::plan_eviction(&index.images, &in_use, bytes);
    let mut kept = index.images.clone();
    for n in waves.iter().flatten() {
        kept.remove(n);
    }
    let leased = match std::fs::File::open(lock_path(cache_dir)) {
        // Taken and let go at once: only to ask.
        Ok(f) => !flock(&f, libc::LOCK_EX | libc::LOCK_NB).unwrap_or(true),
        Err(_) => false,
    };
    let plan = EvictionPlan {
        index: path,
        budget: bytes,
        rule,
        usage,
        indexed: index.images.len(),
        not_indexed: held
            .iter()
            .filter(|h| !index.images.contains_key(&h.name))
            .count(),
        in_use: in_use.len(),
        freed: usage.saturating_sub(cache::usage(&kept)),
        waves,
        leased,
    };
    Ok((plan, index))
}

/// How one removal went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Removal {
    Removed { name: String },
    Failed { name: String, error: String },
}

/// Removes what `plan` says, wave after wave, holding the cache folder's
/// lease exclusively (refused while a run holds it), then writes the index
/// without the images removed.
pub async fn evict(
    docker: &Docker,
    cache_dir: &Path,
    plan: &EvictionPlan,
    mut index: Index,
) -> Result<Vec<Removal>, InventoryError> {
    let lock = lock_path(cache_dir);
    let io = |source| InventoryError::Io {
        path: lock.clone(),
        source,
    };
    if let Some(dir) = lock.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let lease = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock)
        .map_err(io)?;
    if !flock(&lease, libc::LOCK_EX | libc::LOCK_NB).map_err(io)? {
        return Err(InventoryError::Leased {
            cache: cache_dir.to_owned(),
            lock,
        });
    }
    let mut out = Vec::new();
    let mut removed = HashSet::new();
    // Never forced: the engine refuses an image a container was made from
    // since the plan.
    engine::remove_images(docker, plan.waves.clone(), |name, r| {
        out.push(match r {
            Ok(()) => {
                removed.insert(name.clone());
                Removal::Removed { name }
            }
            Err(e) => Removal::Failed {
                name,
                error: e.to_string(),
            },
        })
    })
    .await;
    index.images.retain(|n, _| !removed.contains(n));
    index.save(&removed)?;
    drop(lease);
    Ok(out)
}
