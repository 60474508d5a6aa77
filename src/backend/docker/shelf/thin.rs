//! Thin image archives cut from one `docker save` stream: for each image,
//! the manifest, its config and only its own layers, which is all `docker
//! load` needs when the engine holds the parent's layers (a missing parent
//! makes the load fail, and nothing is made).
//!
//! One save of many images writes each layer once, but the engine's tar
//! names a layer by a legacy id, not its digest, and lists the manifest
//! last, so a layer's owner is known only by hashing it: every layer is
//! hashed as it streams (in memory, or spilled to a file when large), and
//! kept in a spill file until the manifest comes only when its digest is
//! one of the wanted images' own layers.
//! Plain sync code over `Read`/`Write`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A layer larger than this is spilled to a file while it is hashed.
const IN_MEMORY: u64 = 256 << 20;
/// Files up to this size are kept by path: a config is one of them.
const SMALL: usize = 1 << 20;

/// One image wanted from the stream: its name and the digests (`sha256:…`,
/// the engine's diff ids) of its own layers, the top of its chain.
#[derive(Debug, Clone)]
pub struct Wanted {
    pub name: String,
    pub own: Vec<String>,
}

/// One image's entry of `manifest.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ManifestItem {
    pub config: String,
    #[serde(default)]
    pub repo_tags: Option<Vec<String>>,
    pub layers: Vec<String>,
}

/// A file read from the stream, while it is hashed.
enum Kept {
    Memory(Vec<u8>),
    Spilled(PathBuf),
}

/// What was read of the stream: the kept layers by path in the archive
/// (with their digests), small files (configs, the manifest) by path, and
/// links between layer paths (a layer the engine wrote twice).
#[derive(Default)]
pub struct Cut {
    layers: HashMap<String, (String, PathBuf)>,
    small: HashMap<String, Vec<u8>>,
    links: HashMap<String, String>,
    manifest: Vec<ManifestItem>,
}

#[derive(Debug, thiserror::Error)]
pub enum ThinError {
    #[error("reading the saved images: {0}")]
    Read(#[source] io::Error),
    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("the saved images have no readable manifest.json: {0}")]
    Manifest(String),
    #[error("{name} is not in the saved images")]
    Absent { name: String },
    #[error("{name}: layer {digest} is not in the saved images")]
    MissingLayer { name: String, digest: String },
}

/// Reads a `docker save` tar, keeping the layers whose digest is in
/// `wanted` (spilled under `spill` when large).
pub fn read_save(stream: impl Read, wanted: &[Wanted], spill: &Path) -> Result<Cut, ThinError> {
    let own: HashSet<&str> = wanted
        .iter()
        .flat_map(|w| w.own.iter().map(String::as_str))
        .collect();
    let mut cut = Cut::default();
    let mut archive = tar::Archive::new(stream);
    for entry in archive.entries().map_err(ThinError::Read)? {
        let mut entry = entry.map_err(ThinError::Read)?;
        let path = entry
            .path()
            .map_err(ThinError::Read)?
            .to_string_lossy()
            .into_owned();
        let kind = entry.header().entry_type();
        if kind.is_symlink() {
            if let Some(target) = entry.link_name().map_err(ThinError::Read)? {
                let dir = Path::new(&path).parent().unwrap_or(Path::new(""));
                let real = resolve(dir, &target);
                cut.links.insert(path, real);
            }
            continue;
        }
        if !kind.is_file() {
            continue;
        }
        // Every file is a candidate (a layer's name does not tell whose it
        // is); small ones (configs, the manifest) are also kept by path.
        let (digest, kept) = hash_layer(&mut entry, spill, cut.layers.len())?;
        if own.contains(digest.as_str()) {
            // Kept layers wait on disk for the manifest: 275 instance images
            // held in memory took 3.9 GB.
            let file = to_disk(kept, spill, cut.layers.len())?;
            cut.layers.insert(path, (digest, file));
            continue;
        }
        match kept {
            Kept::Memory(data) if path == "manifest.json" => {
                cut.manifest = serde_json::from_slice(&data)
                    .map_err(|e| ThinError::Manifest(e.to_string()))?;
            }
            Kept::Memory(data) if data.len() <= SMALL => {
                cut.small.insert(path, data);
            }
            Kept::Memory(_) => {}
            Kept::Spilled(p) => {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    if cut.manifest.is_empty() {
        return Err(ThinError::Manifest("none found".into()));
    }
    Ok(cut)
}

/// `target` of a link in `dir`, as a path from the archive's root.
fn resolve(dir: &Path, target: &Path) -> String {
    let mut parts: Vec<String> = dir
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    for c in target.components() {
        match c {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    parts.join("/")
}

/// Streams one layer through sha256, keeping its bytes in memory or, when
/// large, in a spill file (the caller drops it if the layer is not wanted).
fn hash_layer(entry: &mut impl Read, spill: &Path, n: usize) -> Result<(String, Kept), ThinError> {
    let mut hasher = Sha256::new();
    let mut memory = Vec::new();
    let mut file: Option<(PathBuf, File)> = None;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let got = entry.read(&mut buf).map_err(ThinError::Read)?;
        if got == 0 {
            break;
        }
        hasher.update(&buf[..got]);
        if file.is_none() && (memory.len() + got) as u64 > IN_MEMORY {
            let path = spill_path(spill, n);
            let mut f = File::create(&path).map_err(|source| ThinError::Write {
                path: path.clone(),
                source,
            })?;
            f.write_all(&memory).map_err(|source| ThinError::Write {
                path: path.clone(),
                source,
            })?;
            memory = Vec::new();
            file = Some((path, f));
        }
        match &mut file {
            Some((path, f)) => f
                .write_all(&buf[..got])
                .map_err(|source| ThinError::Write {
                    path: path.clone(),
                    source,
                })?,
            None => memory.extend_from_slice(&buf[..got]),
        }
    }
    let digest = format!("sha256:{:x}", hasher.finalize());
    Ok(match file {
        Some((path, _)) => (digest, Kept::Spilled(path)),
        None => (digest, Kept::Memory(memory)),
    })
}

/// The spill file holding `kept`, written if it is in memory.
fn to_disk(kept: Kept, spill: &Path, n: usize) -> Result<PathBuf, ThinError> {
    let data = match kept {
        Kept::Spilled(path) => return Ok(path),
        Kept::Memory(data) => data,
    };
    let path = spill_path(spill, n);
    std::fs::write(&path, &data).map_err(|source| ThinError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

fn spill_path(spill: &Path, n: usize) -> PathBuf {
    spill.join(format!(".layer-{}-{n}.tar", std::process::id()))
}

impl Cut {
    /// The manifest entry naming `name`.
    pub fn item(&self, name: &str) -> Option<&ManifestItem> {
        self.manifest.iter().find(|m| {
            m.repo_tags
                .as_ref()
                .is_some_and(|t| t.iter().any(|t| t == name))
        })
    }

    /// Writes `w`'s thin archive (an uncompressed tar) to `out`; returns
    /// the bytes of its own layers.
    pub fn write_thin(&self, w: &Wanted, out: impl Write) -> Result<u64, ThinError> {
        let item = self.item(&w.name).ok_or_else(|| ThinError::Absent {
            name: w.name.clone(),
        })?;
        let config = self
            .small
            .get(&item.config)
            .ok_or_else(|| ThinError::Manifest(format!("{}: no config {}", w.name, item.config)))?;
        let one = vec![ManifestItem {
            config: item.config.clone(),
            repo_tags: Some(vec![w.name.clone()]),
            layers: item.layers.clone(),
        }];
        let manifest = serde_json::to_vec(&one).expect("a manifest serialises");
        let mut tar = tar::Builder::new(out);
        let write_err = |source| ThinError::Write {
            path: PathBuf::from(&w.name),
            source,
        };
        append(
            &mut tar,
            "manifest.json",
            &mut &manifest[..],
            manifest.len() as u64,
        )
        .map_err(write_err)?;
        append(
            &mut tar,
            &item.config,
            &mut &config[..],
            config.len() as u64,
        )
        .map_err(write_err)?;
        // The own layers are the chain's top; a layer path the engine wrote
        // as a link is written whole under the manifest's path.
        let mut by_digest: BTreeMap<&str, &str> = BTreeMap::new();
        for path in &item.layers {
            let real = self.links.get(path).map(String::as_str).unwrap_or(path);
            if let Some((digest, _)) = self.layers.get(real) {
                by_digest.insert(digest.as_str(), path.as_str());
            }
        }
        let mut written = HashSet::new();
        let mut raw = 0;
        for digest in &w.own {
            let Some(path) = by_digest.get(digest.as_str()) else {
                return Err(ThinError::MissingLayer {
                    name: w.name.clone(),
                    digest: digest.clone(),
                });
            };
            if !written.insert(*path) {
                continue;
            }
            let real = self.links.get(*path).map(String::as_str).unwrap_or(path);
            let (_, file) = &self.layers[real];
            let mut f = File::open(file).map_err(write_err)?;
            let len = f.metadata().map_err(write_err)?.len();
            append(&mut tar, path, &mut f, len).map_err(write_err)?;
            raw += len;
        }
        tar.into_inner()
            .map_err(write_err)?
            .flush()
            .map_err(write_err)?;
        Ok(raw)
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        for (_, file) in self.layers.values() {
            let _ = std::fs::remove_file(file);
        }
    }
}

fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    path: &str,
    data: &mut impl Read,
    len: u64,
) -> io::Result<()> {
    let mut h = tar::Header::new_ustar();
    h.set_size(len);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mtime(0);
    tar.append_data(&mut h, path, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(files: &[(&str, &str)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (p, c) in files {
            append(&mut b, p, &mut c.as_bytes(), c.len() as u64).unwrap();
        }
        b.into_inner().unwrap()
    }

    fn digest(data: &[u8]) -> String {
        format!("sha256:{:x}", Sha256::digest(data))
    }

    /// A save of two images over one parent layer, in the engine's legacy
    /// layout: layer folders by legacy id, one layer written as a link to
    /// another folder's, the manifest last.
    fn save(parent: &[u8], a: &[u8], b: &[u8]) -> Vec<u8> {
        let mut t = tar::Builder::new(Vec::new());
        for (dir, data) in [("p0", parent), ("a1", a), ("b1", b)] {
            let path = format!("{dir}/layer.tar");
            append(&mut t, &path, &mut &data[..], data.len() as u64).unwrap();
        }
        // image b names the same content as a1 once more, as a link
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        t.append_link(&mut h, "b2/layer.tar", "../a1/layer.tar")
            .unwrap();
        for (name, data) in [("ca.json", "{\"a\":1}"), ("cb.json", "{\"b\":1}")] {
            append(&mut t, name, &mut data.as_bytes(), data.len() as u64).unwrap();
        }
        let manifest = serde_json::json!([
            {"Config": "ca.json", "RepoTags": ["img:a"], "Layers": ["p0/layer.tar", "a1/layer.tar"]},
            {"Config": "cb.json", "RepoTags": ["img:b"], "Layers": ["p0/layer.tar", "b1/layer.tar", "b2/layer.tar"]}
        ])
        .to_string();
        append(
            &mut t,
            "manifest.json",
            &mut manifest.as_bytes(),
            manifest.len() as u64,
        )
        .unwrap();
        t.into_inner().unwrap()
    }

    fn entries(archive: &[u8]) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        for e in tar::Archive::new(archive).entries().unwrap() {
            let mut e = e.unwrap();
            let p = e.path().unwrap().to_string_lossy().into_owned();
            let mut d = Vec::new();
            e.read_to_end(&mut d).unwrap();
            out.insert(p, d);
        }
        out
    }

    #[test]
    fn each_image_keeps_its_manifest_config_and_own_layers_only() {
        let (parent, a, b) = (
            layer(&[("usr/lib/big", "parent")]),
            layer(&[("testbed/a.py", "a")]),
            layer(&[("testbed/b.py", "b")]),
        );
        let dir = tempfile::tempdir().unwrap();
        let wanted = vec![
            Wanted {
                name: "img:a".into(),
                own: vec![digest(&a)],
            },
            Wanted {
                name: "img:b".into(),
                own: vec![digest(&b), digest(&a)],
            },
        ];
        let cut = read_save(&save(&parent, &a, &b)[..], &wanted, dir.path()).unwrap();
        let mut thin_a = Vec::new();
        assert_eq!(
            cut.write_thin(&wanted[0], &mut thin_a).unwrap(),
            a.len() as u64
        );
        let got = entries(&thin_a);
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            ["a1/layer.tar", "ca.json", "manifest.json"]
        );
        assert_eq!(got["a1/layer.tar"], a);
        let m: Vec<ManifestItem> = serde_json::from_slice(&got["manifest.json"]).unwrap();
        assert_eq!(m[0].repo_tags.as_deref(), Some(&["img:a".to_string()][..]));
        assert_eq!(m[0].layers, ["p0/layer.tar", "a1/layer.tar"]);

        // b's second own layer was a link in the save: written whole.
        let mut thin_b = Vec::new();
        cut.write_thin(&wanted[1], &mut thin_b).unwrap();
        let got = entries(&thin_b);
        assert_eq!(got["b1/layer.tar"], b);
        assert_eq!(got["b2/layer.tar"], a);
        assert!(!got.contains_key("p0/layer.tar"));
    }

    #[test]
    fn a_layer_the_save_lacks_or_an_image_it_lacks_is_an_error() {
        let (parent, a, b) = (
            layer(&[("x", "p")]),
            layer(&[("y", "a")]),
            layer(&[("z", "b")]),
        );
        let dir = tempfile::tempdir().unwrap();
        let odd = Wanted {
            name: "img:a".into(),
            own: vec![digest(&layer(&[("q", "other")]))],
        };
        let cut = read_save(
            &save(&parent, &a, &b)[..],
            std::slice::from_ref(&odd),
            dir.path(),
        )
        .unwrap();
        let err = cut.write_thin(&odd, Vec::new()).unwrap_err();
        assert!(matches!(err, ThinError::MissingLayer { .. }), "{err}");
        let absent = Wanted {
            name: "img:c".into(),
            own: Vec::new(),
        };
        assert!(matches!(
            cut.write_thin(&absent, Vec::new()).unwrap_err(),
            ThinError::Absent { .. }
        ));
        assert!(matches!(
            read_save(&layer(&[("a", "b")])[..], &[], dir.path()),
            Err(ThinError::Manifest(_))
        ));
    }

    #[test]
    fn a_large_layer_is_spilled_and_removed_with_the_cut() {
        let big = "x".repeat((IN_MEMORY + 1000) as usize);
        let (parent, a, b) = (
            layer(&[("x", "p")]),
            layer(&[("big", &big)]),
            layer(&[("z", "b")]),
        );
        let dir = tempfile::tempdir().unwrap();
        let w = Wanted {
            name: "img:a".into(),
            own: vec![digest(&a)],
        };
        let cut = read_save(
            &save(&parent, &a, &b)[..],
            std::slice::from_ref(&w),
            dir.path(),
        )
        .unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let mut thin = Vec::new();
        cut.write_thin(&w, &mut thin).unwrap();
        assert_eq!(entries(&thin)["a1/layer.tar"], a);
        drop(cut);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
