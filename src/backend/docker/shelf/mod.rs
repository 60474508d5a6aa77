//! The shelf: instance images kept out of the engine, in the cache folder,
//! as zstd-compressed thin archives (the manifest, the config and the
//! image's own layers; [`thin`]). A run with `--shelve` puts the instance
//! images it used there at its end and removes them from the engine; any
//! run that needs an instance image the engine lacks loads it from the
//! shelf when the engine holds its parent's layers, instead of building it.
//!
//! Layout: `<cache>/docker/shelf/<repository>/<tag>.tar.zst` and, written
//! last, `<tag>.json` (a [`Shelved`]); an archive without its record is
//! unfinished and ignored. [`moves`] moves images between the engine and
//! the shelf.

pub mod moves;
pub mod thin;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The record of one shelved image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shelved {
    /// `repository:tag`.
    pub name: String,
    /// The image id the archive loads back as.
    pub id: String,
    /// Every layer of the image (diff ids), base first: the first
    /// `layers.len() - own` must be in the engine (its parent's) to load it.
    pub layers: Vec<String>,
    /// How many of `layers` the archive holds (the top ones).
    pub own: usize,
    /// The image it was built on when shelved.
    pub parent: String,
    /// The dataset repository of its instance (`owner/name`).
    pub repo: String,
    /// Bytes of its own layers, uncompressed.
    pub raw_bytes: u64,
    /// Bytes of the archive.
    pub stored_bytes: u64,
    /// When it was shelved (ms since the epoch).
    pub shelved_ms: u64,
}

impl Shelved {
    /// The layers the engine must hold for the archive to load.
    pub fn parent_layers(&self) -> &[String] {
        &self.layers[..self.layers.len().saturating_sub(self.own)]
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ShelfError {
    #[error("shelf {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("shelf record {path}: {source}")]
    Record {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(transparent)]
    Thin(#[from] thin::ThinError),
}

/// The shelf folder of a cache folder's Docker state.
#[derive(Debug, Clone)]
pub struct Shelf {
    dir: PathBuf,
}

impl Shelf {
    /// The shelf in `docker_cache` (`<cache>/docker`).
    pub fn new(docker_cache: &Path) -> Shelf {
        Shelf {
            dir: docker_cache.join("shelf"),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `(archive, record)` paths of image `name`.
    pub fn paths(&self, name: &str) -> (PathBuf, PathBuf) {
        let (repository, tag) = name.rsplit_once(':').unwrap_or((name, "latest"));
        let folder = self.dir.join(repository.replace('/', "_"));
        (
            folder.join(format!("{tag}.tar.zst")),
            folder.join(format!("{tag}.json")),
        )
    }

    /// The record of `name`, if it is shelved (a record whose archive is
    /// gone counts as not shelved).
    pub fn find(&self, name: &str) -> Result<Option<Shelved>, ShelfError> {
        let (archive, record) = self.paths(name);
        let data = match std::fs::read(&record) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(ShelfError::Io {
                    path: record,
                    source,
                })
            }
        };
        if !archive.is_file() {
            return Ok(None);
        }
        serde_json::from_slice(&data)
            .map(Some)
            .map_err(|source| ShelfError::Record {
                path: record,
                source,
            })
    }

    /// Every shelved image (records that cannot be read are skipped).
    pub fn list(&self) -> Vec<Shelved> {
        let mut out = Vec::new();
        let Ok(folders) = std::fs::read_dir(&self.dir) else {
            return out;
        };
        for folder in folders.flatten() {
            let Ok(files) = std::fs::read_dir(folder.path()) else {
                continue;
            };
            for f in files.flatten() {
                let p = f.path();
                if p.extension().is_some_and(|e| e == "json")
                    && p.with_extension("tar.zst").is_file()
                {
                    if let Some(s) = std::fs::read(&p)
                        .ok()
                        .and_then(|d| serde_json::from_slice::<Shelved>(&d).ok())
                    {
                        out.push(s);
                    }
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Removes the spill files a killed shelving left (`.layer-<pid>-<n>.tar`
    /// of a process that is gone).
    pub fn clear_stale_spills(&self) {
        let Ok(files) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for f in files.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix(".layer-")
                .and_then(|r| r.split('-').next())
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(pid) = pid {
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = std::fs::remove_file(f.path());
                }
            }
        }
    }

    /// Removes `name` from the shelf (the record first: an archive alone is
    /// ignored).
    pub fn remove(&self, name: &str) {
        let (archive, record) = self.paths(name);
        let _ = std::fs::remove_file(record);
        let _ = std::fs::remove_file(archive);
    }

    /// Writes `name`'s archive from `cut` (compressed), then its record;
    /// both through a temporary name, so a crash leaves no half archive
    /// under the real one.
    pub fn put(
        &self,
        cut: &thin::Cut,
        wanted: &thin::Wanted,
        mut record: Shelved,
    ) -> Result<Shelved, ShelfError> {
        let (archive, path) = self.paths(&record.name);
        let folder = archive.parent().unwrap_or(&self.dir).to_owned();
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| ShelfError::Io { path, source }
        };
        std::fs::create_dir_all(&folder).map_err(io(&folder))?;
        let tmp = tempfile::NamedTempFile::new_in(&folder).map_err(io(&folder))?;
        let mut z =
            zstd::Encoder::new(std::io::BufWriter::new(tmp), ZSTD_LEVEL).map_err(io(&archive))?;
        record.raw_bytes = cut.write_thin(wanted, &mut z)?;
        let tmp = z
            .finish()
            .map_err(io(&archive))?
            .into_inner()
            .map_err(|e| ShelfError::Io {
                path: archive.clone(),
                source: e.into_error(),
            })?;
        record.stored_bytes = tmp.as_file().metadata().map_err(io(&archive))?.len();
        tmp.persist(&archive).map_err(|e| ShelfError::Io {
            path: archive.clone(),
            source: e.error,
        })?;
        let data = serde_json::to_vec_pretty(&record).expect("a record serialises");
        crate::rundir::atomic::write_atomic(&path, &data).map_err(io(&path))?;
        Ok(record)
    }
}

/// One repository's shelved images.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShelfGroup {
    /// `owner__name`.
    pub repo: String,
    pub images: usize,
    pub raw_bytes: u64,
    pub stored_bytes: u64,
}

/// `shelved` per repository, by name.
pub fn by_repository(shelved: &[Shelved]) -> Vec<ShelfGroup> {
    let mut groups: std::collections::BTreeMap<String, ShelfGroup> = Default::default();
    for s in shelved {
        let repo = s.repo.replace('/', "__");
        let g = groups
            .entry(repo.to_string())
            .or_insert_with(|| ShelfGroup {
                repo: repo.to_string(),
                images: 0,
                raw_bytes: 0,
                stored_bytes: 0,
            });
        g.images += 1;
        g.raw_bytes += s.raw_bytes;
        g.stored_bytes += s.stored_bytes;
    }
    groups.into_values().collect()
}

/// zstd's default level: 29-47% of the layers' size on a sample of
/// Verified's instance layers (docs/verified.md, session 19), at hundreds
/// of MB/s on one core.
const ZSTD_LEVEL: i32 = 3;

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str) -> Shelved {
        Shelved {
            name: name.into(),
            id: "sha256:1".into(),
            layers: vec!["sha256:p".into(), "sha256:o".into()],
            own: 1,
            parent: "env:1".into(),
            repo: "a/b".into(),
            raw_bytes: 0,
            stored_bytes: 0,
            shelved_ms: 0,
        }
    }

    #[test]
    fn a_record_without_its_archive_is_not_shelved_and_names_map_to_files() {
        let dir = tempfile::tempdir().unwrap();
        let shelf = Shelf::new(dir.path());
        let name = "patchgrade.eval.x86_64.a__b-1:abc";
        let (archive, rec) = shelf.paths(name);
        assert!(archive.ends_with("shelf/patchgrade.eval.x86_64.a__b-1/abc.tar.zst"));
        std::fs::create_dir_all(rec.parent().unwrap()).unwrap();
        std::fs::write(&rec, serde_json::to_vec(&record(name)).unwrap()).unwrap();
        assert_eq!(shelf.find(name).unwrap(), None);
        assert!(shelf.list().is_empty());
        std::fs::write(&archive, b"x").unwrap();
        assert_eq!(shelf.find(name).unwrap(), Some(record(name)));
        assert_eq!(shelf.list().len(), 1);
        assert_eq!(record(name).parent_layers(), ["sha256:p"]);
        shelf.remove(name);
        assert_eq!(shelf.find(name).unwrap(), None);
        let mut other = record("patchgrade.eval.x86_64.a__b-2:d");
        other.stored_bytes = 5;
        let mut third = record("patchgrade.eval.x86_64.c__d-7:e");
        third.repo = "c/d".into();
        third.raw_bytes = 9;
        assert_eq!(
            by_repository(&[record(name), other, third]),
            [
                ShelfGroup {
                    repo: "a__b".into(),
                    images: 2,
                    raw_bytes: 0,
                    stored_bytes: 5
                },
                ShelfGroup {
                    repo: "c__d".into(),
                    images: 1,
                    raw_bytes: 9,
                    stored_bytes: 0
                }
            ]
        );
        std::fs::write(&rec, b"{").unwrap();
        std::fs::write(&archive, b"x").unwrap();
        assert!(matches!(shelf.find(name), Err(ShelfError::Record { .. })));

        // A killed shelving's spill file goes; a live process's stays.
        let dead = shelf.dir().join(".layer-4194305-0.tar");
        let live = shelf
            .dir()
            .join(format!(".layer-{}-0.tar", std::process::id()));
        std::fs::write(&dead, b"x").unwrap();
        std::fs::write(&live, b"x").unwrap();
        shelf.clear_stale_spills();
        assert!(!dead.exists() && live.exists());
    }
}
