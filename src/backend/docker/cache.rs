//! The image cache between runs: which images the runs of one cache folder
//! used and when (`<cache>/docker/images.json`, written atomically), what
//! each adds on disk, the budget, and which images to evict.
//!
//! Docker keeps no last-use time for images, hence the index. An image's
//! own size is what it adds over the longest indexed image whose layers are
//! a prefix of its own (an instance image over its env image, an env image
//! over its base): the cache's usage is the sum of those, so shared layers
//! count once. Only indexed images are ever evicted: images this cache's
//! runs never used (another cache folder's, another tool's) are not ours.
//!
//! The planning here is plain code; `mod.rs` talks to the engine.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The default budget's ceiling.
pub const BUDGET_CAP: u64 = 50 << 30;

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("image cache index {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("image cache index {path} is not valid JSON: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
}

// (Also `review::judge::cache::Entry`: each cache file has its own entry.)
/// One image of the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Image id (`sha256:...`).
    pub id: String,
    /// When a run last used it: milliseconds since the epoch.
    pub last_used: u64,
    /// Its layers' diff ids, bottom first (what it shares with its parents).
    pub layers: Vec<String>,
    /// Its whole size, parents' layers included, bytes.
    pub size: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct IndexFile {
    images: BTreeMap<String, Entry>,
}

/// The index of one cache folder, by image name (`repository:tag`).
#[derive(Debug)]
pub struct Index {
    path: PathBuf,
    pub images: BTreeMap<String, Entry>,
    /// Names dropped since loading (gone from the engine): not merged back
    /// from the file on saving.
    pub forgotten: HashSet<String>,
}

impl Index {
    /// The index at `path`; none yet is an empty one.
    pub fn load(path: &Path) -> Result<Index, CacheError> {
        let images = match std::fs::read(path) {
            Ok(bytes) => {
                serde_json::from_slice::<IndexFile>(&bytes)
                    .map_err(|source| CacheError::Json {
                        path: path.to_owned(),
                        source,
                    })?
                    .images
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => {
                return Err(CacheError::Io {
                    path: path.to_owned(),
                    source,
                })
            }
        };
        Ok(Index {
            path: path.to_owned(),
            images,
            forgotten: HashSet::new(),
        })
    }

    /// An index with nothing in it (to replace an unreadable one).
    pub fn empty(path: &Path) -> Index {
        Index {
            path: path.to_owned(),
            images: BTreeMap::new(),
            forgotten: HashSet::new(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the index atomically. A run that ended meanwhile may have
    /// written its own uses: entries only here or newer here win, the
    /// others are kept, except those in `removed`.
    pub fn save(&mut self, removed: &HashSet<String>) -> Result<(), CacheError> {
        let io = |source| CacheError::Io {
            path: self.path.clone(),
            source,
        };
        if let Ok(disk) = Index::load(&self.path) {
            for (name, e) in disk.images {
                if removed.contains(&name) || self.forgotten.contains(&name) {
                    continue;
                }
                match self.images.get(&name) {
                    Some(mine) if mine.last_used >= e.last_used => {}
                    _ => {
                        self.images.insert(name, e);
                    }
                }
            }
        }
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let file = IndexFile {
            images: self.images.clone(),
        };
        let text = serde_json::to_vec_pretty(&file).map_err(|source| CacheError::Json {
            path: self.path.clone(),
            source,
        })?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
        std::io::Write::write_all(&mut tmp, &text).map_err(io)?;
        tmp.persist(&self.path).map_err(|e| io(e.error))?;
        Ok(())
    }
}

/// Whether `a`'s layers are a proper prefix of `b`'s (b is built on a).
fn is_parent(a: &Entry, b: &Entry) -> bool {
    a.layers.len() < b.layers.len() && b.layers.starts_with(&a.layers)
}

/// Bytes each image adds over its nearest indexed parent; images sharing
/// an id (two tags) count once.
pub fn own_sizes(images: &BTreeMap<String, Entry>) -> BTreeMap<String, u64> {
    let mut seen = HashSet::new();
    let mut out = BTreeMap::new();
    for (name, e) in images {
        if !seen.insert(e.id.as_str()) {
            out.insert(name.clone(), 0);
            continue;
        }
        let parent = images
            .values()
            .filter(|p| is_parent(p, e))
            .max_by_key(|p| p.layers.len())
            .map_or(0, |p| p.size);
        out.insert(name.clone(), e.size.saturating_sub(parent));
    }
    out
}

/// Disk the indexed images take, shared layers once.
pub fn usage(images: &BTreeMap<String, Entry>) -> u64 {
    own_sizes(images).values().sum()
}

/// The images to remove so that the cache fits `budget`: least recently
/// used first, never one in `in_use` (or sharing its id), never one another
/// kept image is built on (removing it would only untag it). The result is
/// in removal waves: an image's children come in an earlier wave than it.
pub fn plan_eviction(
    images: &BTreeMap<String, Entry>,
    in_use: &HashSet<String>,
    budget: u64,
) -> Vec<Vec<String>> {
    let busy_ids: HashSet<&str> = in_use
        .iter()
        .filter_map(|n| images.get(n))
        .map(|e| e.id.as_str())
        .collect();
    let mut order: Vec<&String> = images
        .iter()
        .filter(|(n, e)| !in_use.contains(*n) && !busy_ids.contains(e.id.as_str()))
        .map(|(n, _)| n)
        .collect();
    // Oldest first; at the same time, children before their parents.
    order.sort_by_key(|n| {
        let e = &images[*n];
        (e.last_used, std::cmp::Reverse(e.layers.len()), (*n).clone())
    });
    let mut kept = images.clone();
    let mut evict: Vec<String> = Vec::new();
    while usage(&kept) > budget {
        let pick = order.iter().position(|n| {
            let e = &kept[*n];
            !kept.iter().any(|(m, c)| m != *n && is_parent(e, c))
        });
        let Some(i) = pick else { break };
        let name = order.remove(i);
        kept.remove(name);
        evict.push(name.clone());
    }
    waves(images, evict)
}

/// Splits removals so that no image goes in the same wave as, or before,
/// an image built on it.
fn waves(images: &BTreeMap<String, Entry>, mut left: Vec<String>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    while !left.is_empty() {
        let (now, later): (Vec<String>, Vec<String>) = left.iter().cloned().partition(|n| {
            !left
                .iter()
                .any(|m| m != n && is_parent(&images[n], &images[m]))
        });
        if now.is_empty() {
            out.push(later);
            break;
        }
        out.push(now);
        left = later;
    }
    out
}

/// The cache budget and the rule that gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    pub bytes: u64,
    pub rule: String,
}

/// `--cache-budget` when given; else min(50 GiB, half of the free space on
/// Docker's data root plus what the cache already takes there).
pub fn budget(flag: Option<u64>, free: Option<(u64, &str)>, usage: u64) -> Budget {
    if let Some(bytes) = flag {
        return Budget {
            bytes,
            rule: "--cache-budget".into(),
        };
    }
    match free {
        Some((free, root)) => Budget {
            bytes: BUDGET_CAP.min((free + usage) / 2),
            rule: format!(
                "min(50 GiB, half of ({} free on {root} + {} cached))",
                human(free),
                human(usage)
            ),
        },
        None => Budget {
            bytes: BUDGET_CAP,
            rule: "50 GiB: Docker's data root is not on this host".into(),
        },
    }
}

/// Free bytes on the file system holding `path`, if it is on this host.
pub fn free_space(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable struct.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

/// `3.1 GiB`, `420.0 MiB`.
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.1} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    } else {
        format!("{:.1} KiB", b / 1024.0)
    }
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, last_used: u64, layers: &[&str], size: u64) -> Entry {
        Entry {
            id: id.into(),
            last_used,
            layers: layers.iter().map(|l| l.to_string()).collect(),
            size,
        }
    }

    /// base (100) <- env (150) <- instances a, b, c (+10, +20, +30).
    fn cache() -> BTreeMap<String, Entry> {
        BTreeMap::from([
            ("base".into(), entry("1", 9, &["r"], 100)),
            ("env".into(), entry("2", 9, &["r", "e"], 150)),
            ("a".into(), entry("3", 1, &["r", "e", "a"], 160)),
            ("b".into(), entry("4", 3, &["r", "e", "b"], 170)),
            ("c".into(), entry("5", 2, &["r", "e", "c"], 180)),
        ])
    }

    #[test]
    fn shared_layers_count_once() {
        let c = cache();
        let own = own_sizes(&c);
        assert_eq!(own["env"], 50);
        assert_eq!(own["c"], 30);
        assert_eq!(usage(&c), 100 + 50 + 10 + 20 + 30);
    }

    #[test]
    fn least_recently_used_go_first_and_only_as_many_as_needed() {
        let c = cache();
        // 210 in use; a (last used 1) then c (2) must go for 170.
        let plan = plan_eviction(&c, &HashSet::new(), 170);
        assert_eq!(plan, vec![vec!["a".to_string(), "c".to_string()]]);
        assert!(plan_eviction(&c, &HashSet::new(), 210).is_empty());
    }

    #[test]
    fn images_in_use_and_parents_of_kept_images_stay() {
        let c = cache();
        let in_use = HashSet::from(["a".to_string()]);
        // Even a zero budget keeps a, and so its env and base.
        let plan = plan_eviction(&c, &in_use, 0);
        assert_eq!(plan, vec![vec!["c".to_string(), "b".to_string()]]);
        // Nothing in use: children go in a wave before their parents.
        let plan = plan_eviction(&c, &HashSet::new(), 0);
        assert_eq!(plan.len(), 3, "{plan:?}");
        assert_eq!(plan[1], vec!["env".to_string()]);
        assert_eq!(plan[2], vec!["base".to_string()]);
    }

    #[test]
    fn default_budget_rule() {
        let b = budget(None, Some((40 << 30, "/var/lib/docker")), 2 << 30);
        assert_eq!(b.bytes, 21 << 30);
        assert!(b.rule.contains("/var/lib/docker"), "{}", b.rule);
        assert_eq!(budget(None, Some((400 << 30, "/d")), 0).bytes, BUDGET_CAP);
        assert_eq!(budget(Some(5), None, 0).bytes, 5);
        assert_eq!(budget(None, None, 0).bytes, BUDGET_CAP);
    }

    #[test]
    fn index_round_trip_keeps_newer_uses_of_other_runs() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("docker/images.json");
        let mut a = Index::load(&p).unwrap();
        assert!(a.images.is_empty());
        a.images = cache();
        a.save(&HashSet::new()).unwrap();
        let mut b = Index::load(&p).unwrap();
        b.images.get_mut("a").unwrap().last_used = 50;
        b.images.remove("b");
        b.save(&HashSet::from(["b".to_string()])).unwrap();
        // `a` writes again with its older view: the newer use of a stays,
        // and b, removed by the other run, does not come back... unless
        // `a` itself still knows it (it used it): then it is kept.
        a.images.remove("b");
        a.save(&HashSet::new()).unwrap();
        let c = Index::load(&p).unwrap();
        assert_eq!(c.images["a"].last_used, 50);
        assert!(!c.images.contains_key("b"));
        std::fs::write(&p, "{").unwrap();
        let e = Index::load(&p).unwrap_err().to_string();
        assert!(e.contains("images.json"), "{e}");
    }
}
