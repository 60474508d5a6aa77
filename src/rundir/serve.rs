//! The service's own records in its run folder (`patchgrade serve`): every
//! accepted evaluation as `.serve/accepted/<id>.json`, written atomically
//! before the request is acknowledged, and `.serve/cancelled/<id>` for the
//! ones cancelled. Whether an accepted evaluation finished is not recorded
//! here: its `patchgrade.json` (written last by the runner) says so, so a
//! kill between the two can neither lose nor duplicate it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::atomic::{write_atomic, write_json_atomic};
use super::eval_dir::EvalDir;
use super::{RunDir, RunDirError};
use crate::dataset::{sha256_hex, Prediction};
use crate::key::EvalKey;

/// One accepted evaluation: what it grades, with the patch (kept so a
/// restart can evaluate what was still queued).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Accepted {
    pub id: String,
    pub instance_id: String,
    pub model_name_or_path: String,
    pub sample_id: String,
    /// None: an empty patch (recorded `empty_patch`).
    pub model_patch: Option<String>,
    pub patch_sha256: Option<String>,
    /// Unix milliseconds.
    pub accepted_at: u64,
}

impl Accepted {
    /// The evaluation of `patch` for `instance_id` by `model` as `sample`;
    /// without a sample id, the sample is named by the patch's hash, so
    /// distinct patches for one instance are distinct samples.
    pub fn new(instance_id: &str, model: &str, sample: Option<&str>, patch: Option<&str>) -> Self {
        let patch = patch.filter(|p| !p.trim().is_empty()).map(str::to_string);
        let patch_sha256 = patch.as_deref().map(sha256_hex);
        let sample_id = match (sample, &patch_sha256) {
            (Some(s), _) => s.to_string(),
            (None, Some(sha)) => format!("p{}", &sha[..12]),
            (None, None) => "empty".into(),
        };
        let id = eval_id(model, instance_id, &sample_id, patch_sha256.as_deref());
        Accepted {
            id,
            instance_id: instance_id.to_string(),
            model_name_or_path: model.to_string(),
            sample_id,
            model_patch: patch,
            patch_sha256,
            accepted_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
        }
    }

    pub fn key(&self) -> EvalKey {
        EvalKey::new(
            &self.model_name_or_path,
            &self.instance_id,
            Some(&self.sample_id),
        )
    }

    /// The prediction the runner evaluates.
    pub fn prediction(&self) -> Prediction {
        let mut p = Prediction::new(
            &self.instance_id,
            &self.model_name_or_path,
            self.model_patch.clone(),
        );
        p.sample_id = Some(self.sample_id.clone());
        p
    }
}

/// An evaluation's id: the first 16 hex digits of the SHA-256 of its key
/// and its patch's hash, so the same submission always gets the same id.
pub fn eval_id(model: &str, instance_id: &str, sample: &str, patch_sha: Option<&str>) -> String {
    let text = format!(
        "{model}\0{instance_id}\0{sample}\0{}",
        patch_sha.unwrap_or("-")
    );
    sha256_hex(&text)[..16].to_string()
}

/// Whether a text can be an evaluation id (what a URL may name).
pub fn is_eval_id(text: &str) -> bool {
    text.len() == 16 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// How an accepted evaluation stands on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Its record is there, for this patch.
    Finished,
    Cancelled,
    /// Neither: still to evaluate.
    Pending,
}

/// The service's records in a run folder.
#[derive(Debug, Clone)]
pub struct ServeDir {
    run: RunDir,
}

impl ServeDir {
    pub fn new(run: RunDir) -> ServeDir {
        ServeDir { run }
    }

    fn root(&self) -> PathBuf {
        self.run.path().join(".serve")
    }

    fn accepted_path(&self, id: &str) -> PathBuf {
        self.root().join("accepted").join(format!("{id}.json"))
    }

    fn cancelled_path(&self, id: &str) -> PathBuf {
        self.root().join("cancelled").join(id)
    }

    /// Written (atomically, synced) before the submission is acknowledged.
    pub fn write_accepted(&self, a: &Accepted) -> std::io::Result<()> {
        write_json_atomic(&self.accepted_path(&a.id), a)?;
        // A resubmission of a cancelled evaluation queues it again.
        match std::fs::remove_file(self.cancelled_path(&a.id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    pub fn write_cancelled(&self, id: &str) -> std::io::Result<()> {
        write_atomic(&self.cancelled_path(id), b"")
    }

    /// The evaluation's folder in the run folder.
    pub fn eval_dir(&self, a: &Accepted) -> EvalDir {
        self.run
            .eval_dir(&a.model_name_or_path, &a.instance_id, Some(&a.sample_id))
    }

    /// Where an accepted evaluation stands: its record, for this very
    /// patch, means finished (whatever its outcome: it is never graded
    /// again).
    pub fn stored(&self, a: &Accepted) -> Result<Stored, RunDirError> {
        if let Some(r) = self.eval_dir(a).record()? {
            if r.patch_sha256 == a.patch_sha256 {
                return Ok(Stored::Finished);
            }
        }
        if self.cancelled_path(&a.id).exists() {
            return Ok(Stored::Cancelled);
        }
        Ok(Stored::Pending)
    }

    /// The finished record's JSON as written (the run folder's
    /// `patchgrade.json`), if there is one.
    pub fn record_json(&self, a: &Accepted) -> Option<serde_json::Value> {
        let path = self.eval_dir(a).path().join(super::eval_dir::RECORD_FILE);
        let text = std::fs::read_to_string(path).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Every accepted evaluation, oldest first (by acceptance time, then
    /// id); an error names the file that cannot be read.
    pub fn accepted(&self) -> Result<Vec<Accepted>, RunDirError> {
        let dir = self.root().join("accepted");
        let entries = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(RunDirError::Io { path: dir, source }),
        };
        let mut out = Vec::new();
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "json") {
                out.push(read_accepted(&path)?);
            }
        }
        out.sort_by(|a, b| (a.accepted_at, &a.id).cmp(&(b.accepted_at, &b.id)));
        Ok(out)
    }
}

fn read_accepted(path: &Path) -> Result<Accepted, RunDirError> {
    let text = std::fs::read_to_string(path).map_err(|source| RunDirError::Io {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| RunDirError::Record {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::EvalRecord;

    #[test]
    fn ids_name_the_key_and_the_patch_and_samples_default_to_the_patch() {
        let a = Accepted::new("i-1", "m", None, Some("diff a"));
        let b = Accepted::new("i-1", "m", None, Some("diff b"));
        assert_eq!(a.id, Accepted::new("i-1", "m", None, Some("diff a")).id);
        assert_ne!(a.id, b.id);
        assert_ne!(a.sample_id, b.sample_id);
        assert!(is_eval_id(&a.id) && !is_eval_id("../x"));
        let named = Accepted::new("i-1", "m", Some("3"), Some("diff a"));
        assert_eq!(named.sample_id, "3");
        assert_ne!(named.id, a.id);
        let empty = Accepted::new("i-1", "m", None, Some("  \n"));
        assert_eq!(
            (empty.sample_id.as_str(), empty.model_patch),
            ("empty", None)
        );
    }

    #[test]
    fn accepted_evaluations_are_pending_until_their_record_or_cancel() {
        let d = tempfile::tempdir().unwrap();
        let serve = ServeDir::new(RunDir::new(d.path(), "svc"));
        let a = Accepted::new("i-1", "m", None, Some("diff a"));
        let b = Accepted::new("i-2", "m", None, Some("diff b"));
        serve.write_accepted(&a).unwrap();
        serve.write_accepted(&b).unwrap();
        assert_eq!(serve.accepted().unwrap().len(), 2);
        assert_eq!(serve.stored(&a).unwrap(), Stored::Pending);
        serve.write_cancelled(&b.id).unwrap();
        assert_eq!(serve.stored(&b).unwrap(), Stored::Cancelled);
        // Resubmitted: queued again.
        serve.write_accepted(&b).unwrap();
        assert_eq!(serve.stored(&b).unwrap(), Stored::Pending);

        let mut r = EvalRecord::new("i-1", "m", crate::settings::BackendKind::Local);
        r.patch_sha256 = a.patch_sha256.clone();
        let dir = serve.eval_dir(&a);
        dir.create().unwrap();
        dir.write_result(&r, false).unwrap();
        assert_eq!(serve.stored(&a).unwrap(), Stored::Finished);
        assert_eq!(serve.record_json(&a).unwrap()["instance_id"], "i-1");
        // A record of another patch in the folder is not this evaluation's.
        r.patch_sha256 = Some("other".into());
        dir.write_result(&r, false).unwrap();
        assert_eq!(serve.stored(&a).unwrap(), Stored::Pending);
    }
}
