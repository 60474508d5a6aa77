//! Budget mode on the engine (no `--cache-level`): the index is opened and
//! the budget shown when the run connects; at its end the run's images are
//! recorded as used now and the least recently used others evicted until
//! the cache fits (see [`super::cache`] for the rules). The removals of a
//! run's end (eviction, `--cache-level`, `--shelve`) go through
//! `remove_images`, with an event per image.
//!
//! Runs of one cache folder may overlap, and one run's index does not know
//! which images another live run is about to use. So each run holds
//! `<cache>/docker/images.lock` shared while it runs, and evicts only if it
//! can take it exclusively: the last run to end evicts for all of them.

use std::collections::{HashMap, HashSet};
use std::os::fd::AsRawFd;

use bollard::Docker;
use futures_util::StreamExt;

use super::cache::{self, human, Budget, Entry, Index};
use super::engine::{self, call};
use super::events::ImageEvent;
use super::images::{self, CacheLevel, Tier};
use super::{locked, Conn, DockerBackend, Used};

impl DockerBackend {
    fn index_path(&self) -> std::path::PathBuf {
        self.scratch.join("images.json")
    }

    /// Takes the cache folder's lease (shared), waiting while another run
    /// evicts, so this run never starts on images being removed.
    async fn take_lease(&self) {
        let path = self.scratch.join("images.lock");
        let events = locked(&self.events).clone();
        let taken = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(path.parent().unwrap_or(std::path::Path::new(".")))?;
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)?;
            if !flock(&file, libc::LOCK_SH | libc::LOCK_NB)? {
                if let Some(events) = &events {
                    events.tell(ImageEvent::LeaseWait);
                }
                flock(&file, libc::LOCK_SH)?;
            }
            Ok::<_, std::io::Error>(file)
        })
        .await;
        match taken {
            Ok(Ok(file)) => *locked(&self.lease) = Some(file),
            Ok(Err(e)) => self.tell(ImageEvent::LeaseFailed {
                error: e.to_string(),
            }),
            Err(e) => self.tell(ImageEvent::LeaseFailed {
                error: e.to_string(),
            }),
        }
    }

    /// Whether this run may evict: no other run holds the lease. Without a
    /// lease (it could not be taken) the run evicts as before.
    pub(super) fn sole_user(&self) -> bool {
        match locked(&self.lease).as_ref() {
            Some(file) => flock(file, libc::LOCK_EX | libc::LOCK_NB).unwrap_or(true),
            None => true,
        }
    }

    /// Loads the index (images gone from the engine, or re-tagged, are
    /// dropped), works out the budget and tells both.
    pub(super) async fn open_index(
        &self,
        docker: &Docker,
        present: &HashMap<String, String>,
    ) -> Budget {
        self.take_lease().await;
        let path = self.index_path();
        let mut index = Index::load(&path).unwrap_or_else(|e| {
            self.tell(ImageEvent::IndexUnreadable {
                error: e.to_string(),
            });
            Index::empty(&path)
        });
        let gone: Vec<String> = index
            .images
            .iter()
            .filter(|(name, e)| present.get(*name) != Some(&e.id))
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            index.images.remove(&name);
            index.forgotten.insert(name);
        }
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
            .and_then(|r| cache::free_space(std::path::Path::new(r)).map(|f| (f, r)));
        let budget = cache::budget(self.budget_flag, free, usage);
        self.tell(ImageEvent::Budget {
            usage,
            images: index.images.len(),
            budget: budget.bytes,
            rule: budget.rule.clone(),
        });
        *locked(&self.index) = Some(index);
        budget
    }

    /// Records this run's images as used now, evicts to fit the budget and
    /// writes the index; returns how many images were removed.
    pub(super) async fn evict(&self, conn: &Conn) -> usize {
        let Some(budget) = conn.budget.clone() else {
            return 0;
        };
        let Some(mut index) = locked(&self.index).take() else {
            return 0;
        };
        let now = cache::now_ms();
        let used: Vec<String> = locked(&self.used).iter().map(|u| u.name.clone()).collect();
        // An image indexed under the id it had at the start needs no
        // inspection; one built (or rebuilt) by this run does.
        let index_ref = &index;
        let known: Vec<(String, Option<Entry>)> = futures_util::stream::iter(used.clone())
            .map(|name| async move {
                let e = match (index_ref.images.get(&name), conn.present.get(&name)) {
                    (Some(e), Some(id)) if &e.id == id && !locked(&self.built).contains(&name) => {
                        Some(e.clone())
                    }
                    _ => self.entry_of(&conn.docker, &name).await,
                };
                (name, e)
            })
            .buffer_unordered(8)
            .collect()
            .await;
        for (name, e) in known {
            match e {
                Some(e) => {
                    index.forgotten.remove(&name);
                    index.images.insert(
                        name,
                        Entry {
                            last_used: now,
                            ..e
                        },
                    );
                }
                None => {
                    index.images.remove(&name);
                    index.forgotten.insert(name);
                }
            }
        }
        let in_use: HashSet<String> = used.into_iter().collect();
        let removed = if self.sole_user() {
            let waves = cache::plan_eviction(&index.images, &in_use, budget.bytes);
            let why = format!(
                "over the cache budget of {}: least recently used first",
                human(budget.bytes)
            );
            self.remove_images(&conn.docker, waves, &why).await
        } else {
            self.tell(ImageEvent::EvictionLeft);
            HashSet::new()
        };
        index.images.retain(|n, _| !removed.contains(n));
        let usage = cache::usage(&index.images);
        self.tell(ImageEvent::Usage {
            usage,
            images: index.images.len(),
            budget: budget.bytes,
        });
        if let Err(e) = index.save(&removed) {
            self.tell(ImageEvent::IndexNotSaved {
                error: e.to_string(),
            });
        }
        locked(&self.lease).take();
        removed.len()
    }

    /// The index entry of an image now in the engine (time not set).
    pub(super) async fn entry_of(&self, docker: &Docker, name: &str) -> Option<Entry> {
        match call("inspect image", docker.inspect_image(name)).await {
            Ok(i) => Some(Entry {
                id: i.id.unwrap_or_default(),
                last_used: 0,
                layers: i.root_fs.and_then(|r| r.layers).unwrap_or_default(),
                size: i.size.unwrap_or(0).max(0) as u64,
            }),
            Err(e) => {
                tracing::warn!("{e}");
                None
            }
        }
    }

    /// Waits for containers still being removed off the critical path.
    pub(super) async fn await_removals(&self) {
        let pending: Vec<_> = locked(&self.removals).drain(..).collect();
        for h in pending {
            let _ = h.await;
        }
    }

    /// `--cache-level`: images of the tiers it does not keep go.
    pub(super) async fn remove_per_level(&self, conn: &Conn, level: CacheLevel) -> usize {
        let used: Vec<Used> = locked(&self.used).iter().cloned().collect();
        let goes = |u: &&Used| {
            images::should_remove(u.tier, level, self.args.clean, conn.prior.contains(&u.name))
        };
        // Children before parents: a tier's images hold up its parents.
        let wave = |pick: &dyn Fn(&Used) -> bool| -> Vec<String> {
            used.iter()
                .filter(goes)
                .filter(|u| pick(u))
                .map(|u| u.name.clone())
                .collect()
        };
        let root = |u: &Used| {
            u.name
                .rsplit('/')
                .next()
                .unwrap_or("")
                .starts_with("patchgrade.root.")
        };
        let waves = vec![
            wave(&|u| u.tier == Tier::Instance),
            wave(&|u| u.tier == Tier::Env),
            wave(&|u| u.tier == Tier::Base && !root(u)),
            wave(&|u| u.tier == Tier::Base && root(u)),
        ];
        let why = format!("--cache-level {level}");
        self.remove_images(&conn.docker, waves, &why).await.len()
    }

    /// Removes images through [`engine::remove_images`], with an event per
    /// image; returns those removed.
    pub(super) async fn remove_images(
        &self,
        docker: &Docker,
        waves: Vec<Vec<String>>,
        why: &str,
    ) -> HashSet<String> {
        let total: usize = waves.iter().map(Vec::len).sum();
        let mut removed = HashSet::new();
        if total == 0 {
            return removed;
        }
        self.tell(ImageEvent::Removing {
            total,
            why: why.to_string(),
        });
        let mut done = 0;
        engine::remove_images(docker, waves, |name, r| {
            done += 1;
            match r {
                Ok(()) => {
                    self.tell(ImageEvent::Removed {
                        name: name.clone(),
                        done,
                        total,
                    });
                    removed.insert(name);
                }
                Err(e) => self.tell(ImageEvent::NotRemoved {
                    name,
                    done,
                    total,
                    error: e.to_string(),
                }),
            }
        })
        .await;
        removed
    }
}

/// flock(2) on `file`; false when it would block (with LOCK_NB).
pub(super) fn flock(file: &std::fs::File, op: libc::c_int) -> std::io::Result<bool> {
    // SAFETY: flock(2) on a descriptor `file` owns for the whole call.
    if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.kind() == std::io::ErrorKind::WouldBlock {
        Ok(false)
    } else {
        Err(e)
    }
}
