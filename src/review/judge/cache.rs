//! On-disk cache of the judge's valid replies.
//!
//! One file per request, `<dir>/<aa>/<sha256>.json`, named by the hash of its
//! key: patch hash, rubric hash, model, prompt version, temperature and
//! sample index (plus the mode, the pairwise order, and a hash of the exact
//! messages, so an edited issue or truncation setting is never served a
//! stale reply). Only replies that passed the schema are stored; a malformed
//! or failed request is asked again on the next run. Writes are atomic.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::client::TokenUsage;
use super::rubric::hex;

/// What a cached reply was asked with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheKey {
    pub patch_sha256: String,
    pub rubric_sha256: String,
    pub model: String,
    pub prompt_version: u32,
    /// Written as text so the key is exact.
    pub temperature: String,
    pub sample: u32,
    /// `pointwise`, `pairwise_candidate_first`, `pairwise_gold_first`.
    pub mode: String,
    pub messages_sha256: String,
}

impl CacheKey {
    /// The file name hash.
    pub fn digest(&self) -> String {
        let json = serde_json::to_string(self).expect("a key serialises");
        hex(&Sha256::digest(json.as_bytes()))
    }
}

// (Also `backend::docker::cache::Entry`: each cache file has its own entry.)
/// A stored reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub key: CacheKey,
    pub content: String,
    pub usage: Option<TokenUsage>,
}

/// SHA-256 of a text, hex.
pub fn sha256(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

fn path_of(dir: &Path, key: &CacheKey) -> PathBuf {
    let d = key.digest();
    dir.join(&d[..2]).join(format!("{d}.json"))
}

/// The stored reply for `key`; a missing, unreadable or mismatched file is
/// a miss.
pub fn get(dir: &Path, key: &CacheKey) -> Option<Entry> {
    let text = std::fs::read_to_string(path_of(dir, key)).ok()?;
    let e: Entry = serde_json::from_str(&text).ok()?;
    (e.key == *key).then_some(e)
}

/// Stores a reply; errors are returned for the caller to note (a cache that
/// cannot be written never fails a judgement).
pub fn put(dir: &Path, entry: &Entry) -> std::io::Result<()> {
    let path = path_of(dir, &entry.key);
    let parent = path.parent().expect("cache paths have a parent");
    std::fs::create_dir_all(parent)?;
    let mut tmp = tempfile::NamedTempFile::new_in(parent)?;
    serde_json::to_writer_pretty(&mut tmp, entry)?;
    tmp.persist(&path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_key_sensitivity() {
        let dir = tempfile::tempdir().unwrap();
        let key = CacheKey {
            patch_sha256: sha256("p"),
            rubric_sha256: sha256("r"),
            model: "m".into(),
            prompt_version: 1,
            temperature: "0.2".into(),
            sample: 0,
            mode: "pointwise".into(),
            messages_sha256: sha256("msgs"),
        };
        assert!(get(dir.path(), &key).is_none());
        let e = Entry {
            key: key.clone(),
            content: "{}".into(),
            usage: Some(TokenUsage {
                prompt_tokens: 5,
                completion_tokens: 2,
            }),
        };
        put(dir.path(), &e).unwrap();
        assert_eq!(get(dir.path(), &key), Some(e));
        for other in [
            CacheKey {
                sample: 1,
                ..key.clone()
            },
            CacheKey {
                temperature: "0.3".into(),
                ..key.clone()
            },
            CacheKey {
                model: "n".into(),
                ..key.clone()
            },
            CacheKey {
                prompt_version: 2,
                ..key.clone()
            },
            CacheKey {
                rubric_sha256: sha256("r2"),
                ..key.clone()
            },
            CacheKey {
                patch_sha256: sha256("p2"),
                ..key.clone()
            },
        ] {
            assert!(get(dir.path(), &other).is_none(), "{other:?}");
        }
    }
}
