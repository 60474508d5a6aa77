//! Images moved between the engine and the shelf: `unshelve` (an instance
//! image the engine lacks, loaded from its archive) and `shelve_used` (the
//! instance images a `--shelve` run used, saved in one `docker save` and
//! cut into thin archives).

use std::collections::HashMap;
use std::io::Read;
use std::time::Instant;

use bollard::query_parameters::ImportImageOptionsBuilder;
use bytes::Bytes;
use futures_util::StreamExt;

use super::thin::{self, Wanted};
use super::{ShelfError, Shelved};
use crate::backend::docker::chunks::{ChunkSender, CHUNKS_IN_FLIGHT};
use crate::backend::docker::engine::call;
use crate::backend::docker::events::ImageEvent;
use crate::backend::docker::{cache, locked, DockerBackend};

/// Limit on one save to the shelf or one load from it. Docker 20.10 writes
/// a whole `docker save` to its data root before it sends anything (the 275
/// images of a django and sphinx run timed out at the client's default 120
/// s).
const SHELF_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

impl DockerBackend {
    /// `name` loaded from the shelf: its id and digest, or None when it is
    /// not shelved, or the engine lacks its parent `parent`'s layers (the
    /// record is dropped: it will be built), or the load failed (said).
    pub(in crate::backend::docker) async fn unshelve(
        &self,
        name: &str,
        parent: &str,
    ) -> Option<(String, Option<String>)> {
        let record = match self.shelf.find(name) {
            Ok(Some(r)) => r,
            Ok(None) => return None,
            Err(e) => {
                self.tell(ImageEvent::ShelfSkipped {
                    name: name.to_string(),
                    reason: e.to_string(),
                });
                self.shelf.remove(name);
                return None;
            }
        };
        let docker = self.docker().await.ok()?;
        let layers = match call("inspect image", docker.inspect_image(parent)).await {
            Ok(i) => i.root_fs.and_then(|r| r.layers).unwrap_or_default(),
            // No parent to load it over: both are built (the parent with new
            // layers, which makes the record stale; a later --shelve
            // replaces it).
            Err(_) => return None,
        };
        if layers != record.parent_layers() {
            self.tell(ImageEvent::ShelfSkipped {
                name: name.to_string(),
                reason: format!("{parent} is not the image it was shelved over"),
            });
            self.shelf.remove(name);
            return None;
        }
        let started = Instant::now();
        match self.load_archive(&record).await {
            Ok(found) => {
                locked(&self.unshelved).insert(name.to_string());
                tracing::debug!("{name} loaded from the shelf in {:?}", started.elapsed());
                Some(found)
            }
            Err(reason) => {
                self.tell(ImageEvent::ShelfSkipped {
                    name: name.to_string(),
                    reason,
                });
                self.shelf.remove(name);
                None
            }
        }
    }

    /// Streams `record`'s archive, decompressed, into the engine's load,
    /// then checks the image is there with its id.
    async fn load_archive(&self, record: &Shelved) -> Result<(String, Option<String>), String> {
        let (archive, _) = self.shelf.paths(&record.name);
        let (tx, mut rx) = tokio::sync::mpsc::channel(CHUNKS_IN_FLIGHT);
        let reader = tokio::task::spawn_blocking(move || {
            let mut to_engine = ChunkSender::new(tx.clone());
            let sent = std::fs::File::open(&archive)
                .and_then(zstd::Decoder::new)
                .and_then(|mut z| std::io::copy(&mut z, &mut to_engine))
                .and_then(|_| to_engine.send());
            if let Err(e) = sent {
                // The engine must not take a cut archive for a whole one.
                let _ = tx.blocking_send(Err(e));
            }
        });
        let body = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let docker = self.docker().await.map_err(|e| e.to_string())?;
        let docker = docker.clone().with_timeout(SHELF_TIMEOUT);
        let opts = ImportImageOptionsBuilder::default().quiet(true).build();
        let mut load = docker.import_image_stream(opts, body, None);
        let mut failed = None;
        while let Some(item) = load.next().await {
            match item {
                Ok(info) => {
                    if let Some(e) = info.error_detail.and_then(|d| d.message) {
                        failed.get_or_insert(e);
                    }
                }
                Err(e) => {
                    failed.get_or_insert(e.to_string());
                }
            }
        }
        let _ = reader.await;
        if let Some(e) = failed {
            return Err(format!("loading its archive failed: {e}"));
        }
        match self.inspect(&record.name).await {
            Ok(Some((id, digest))) if id == record.id => Ok((id, digest)),
            Ok(Some((id, _))) => Err(format!("its archive loaded as {id}, not {}", record.id)),
            Ok(None) => Err("absent after loading its archive".into()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// `--shelve`: the instance images this run used, shelved (those not
    /// yet on the shelf with the same id saved in one `docker save`);
    /// returns the names now on the shelf, which the caller removes from
    /// the engine. On a failure the images stay in the engine (said).
    pub(in crate::backend::docker) async fn shelve_used(&self) -> Vec<String> {
        let used: Vec<String> = locked(&self.used)
            .iter()
            .filter(|u| u.tier == crate::backend::docker::images::Tier::Instance)
            .map(|u| u.name.clone())
            .collect();
        let parents = locked(&self.parents).clone();
        let Ok(docker) = self.docker().await else {
            return Vec::new();
        };
        // Many instance images share a parent (a snapshot, an env).
        let mut parent_layers: HashMap<String, Option<Vec<String>>> = HashMap::new();
        let mut shelved = Vec::new();
        let mut to_save: Vec<(Wanted, Shelved)> = Vec::new();
        for name in used {
            let Some((parent, repo)) = parents.get(&name) else {
                continue;
            };
            if !parent_layers.contains_key(parent) {
                let layers = self.entry_of(docker, parent).await.map(|e| e.layers);
                parent_layers.insert(parent.clone(), layers);
            }
            let (Some(entry), Some(Some(under))) = (
                self.entry_of(docker, &name).await,
                parent_layers.get(parent),
            ) else {
                continue;
            };
            let (id, layers) = (entry.id, entry.layers);
            if layers.len() <= under.len() || layers[..under.len()] != under[..] {
                continue;
            }
            if matches!(self.shelf.find(&name), Ok(Some(r)) if r.id == id) {
                shelved.push(name);
                continue;
            }
            let own = layers[under.len()..].to_vec();
            let record = Shelved {
                name: name.clone(),
                id,
                own: own.len(),
                layers,
                parent: parent.clone(),
                repo: repo.clone(),
                raw_bytes: 0,
                stored_bytes: 0,
                shelved_ms: cache::now_ms(),
            };
            to_save.push((Wanted { name, own }, record));
        }
        if to_save.is_empty() {
            return shelved;
        }
        self.tell(ImageEvent::Shelving {
            images: to_save.len(),
        });
        let started = Instant::now();
        match self.save_to_shelf(docker, to_save).await {
            Ok(records) => {
                self.tell(ImageEvent::Shelved {
                    images: records.len(),
                    raw: records.iter().map(|r| r.raw_bytes).sum(),
                    stored: records.iter().map(|r| r.stored_bytes).sum(),
                    secs: started.elapsed().as_secs_f64(),
                });
                shelved.extend(records.into_iter().map(|r| r.name));
            }
            Err(e) => self.tell(ImageEvent::ShelfFailed {
                error: e.to_string(),
            }),
        }
        shelved
    }

    /// One `docker save` of the wanted images, read as it streams (each
    /// layer hashed, the wanted ones kept), then an archive per image.
    async fn save_to_shelf(
        &self,
        docker: &bollard::Docker,
        to_save: Vec<(Wanted, Shelved)>,
    ) -> Result<Vec<Shelved>, ShelfError> {
        let names: Vec<String> = to_save.iter().map(|(w, _)| w.name.clone()).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        // The engine writes the whole save to its own disk before the
        // first byte is sent: minutes, past the client's default timeout.
        let docker = docker.clone().with_timeout(SHELF_TIMEOUT);
        let mut stream = docker.export_images(&refs);
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, String>>(8);
        let shelf = self.shelf.clone();
        let spill = shelf.dir().to_owned();
        let cutter = tokio::task::spawn_blocking(move || -> Result<Vec<Shelved>, ShelfError> {
            std::fs::create_dir_all(&spill).map_err(|source| ShelfError::Io {
                path: spill.clone(),
                source,
            })?;
            shelf.clear_stale_spills();
            let wanted: Vec<Wanted> = to_save.iter().map(|(w, _)| w.clone()).collect();
            let cut = thin::read_save(ChannelReader::new(rx), &wanted, &spill)?;
            let mut out = Vec::new();
            for (w, record) in to_save {
                out.push(shelf.put(&cut, &w, record)?);
            }
            Ok(out)
        });
        while let Some(chunk) = stream.next().await {
            let item = chunk.map_err(|e| e.to_string());
            let stop = item.is_err();
            if tx.send(item).await.is_err() || stop {
                break;
            }
        }
        drop(tx);
        cutter.await.map_err(|e| ShelfError::Io {
            path: self.shelf.dir().to_owned(),
            source: std::io::Error::other(e.to_string()),
        })?
    }
}

/// The save's chunks, read as one stream (an engine error ends it with an
/// error).
struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<Result<Bytes, String>>,
    chunk: Bytes,
}

impl ChannelReader {
    fn new(rx: tokio::sync::mpsc::Receiver<Result<Bytes, String>>) -> ChannelReader {
        ChannelReader {
            rx,
            chunk: Bytes::new(),
        }
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.chunk.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(c)) => self.chunk = c,
                Some(Err(e)) => return Err(std::io::Error::other(format!("docker save: {e}"))),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk[..n]);
        self.chunk = self.chunk.slice(n..);
        Ok(n)
    }
}
