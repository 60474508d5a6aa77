//! The service's own records in its run folder (`patchgrade serve`): every
//! accepted evaluation as `.serve/accepted/<id>.json`, written atomically
//! before the request is acknowledged, and `.serve/cancelled/<id>` for the
//! ones cancelled. Whether an accepted evaluation finished is not recorded
//! here: its `patchgrade.json` (written last by the runner) says so, so a
//! kill between the two can neither lose nor duplicate it.
//!
//! Ended evaluations live only here (the service keeps the live ones in
//! memory): [`ServeDir::known`] answers whether a submission was accepted
//! before, and `.serve/keys/<hash of the key>` names the evaluation that
//! holds a key (model, instance, sample), so another patch under the same
//! key is refused without an index in memory.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::atomic::{write_atomic, write_json_atomic};
use super::eval_dir::EvalDir;
use super::{RunDir, RunDirError};
use crate::dataset::{sha256_hex, Prediction};
use crate::key::EvalKey;
use crate::settings::Overrides;

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
    /// The request's own settings (absent: the service's).
    #[serde(default, skip_serializing_if = "Overrides::is_default")]
    pub options: Overrides,
}

impl Accepted {
    /// The evaluation of `patch` for `instance_id` by `model` as `sample`;
    /// without a sample id, the sample is named by the patch's hash (and
    /// the options, when any), so distinct patches or options for one
    /// instance are distinct samples.
    pub fn new(
        instance_id: &str,
        model: &str,
        sample: Option<&str>,
        patch: Option<&str>,
        options: Overrides,
    ) -> Self {
        let patch = patch.filter(|p| !p.trim().is_empty()).map(str::to_string);
        let patch_sha256 = patch.as_deref().map(sha256_hex);
        let mut sample_id = match (sample, &patch_sha256) {
            (Some(s), _) => s.to_string(),
            (None, Some(sha)) => format!("p{}", &sha[..12]),
            (None, None) => "empty".into(),
        };
        let opts = options_text(&options);
        if sample.is_none() && !opts.is_empty() {
            sample_id.push_str(&format!("-o{}", &sha256_hex(&opts)[..8]));
        }
        let id = eval_id(
            model,
            instance_id,
            &sample_id,
            patch_sha256.as_deref(),
            &opts,
        );
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
            options,
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

    /// The file name of its key in `.serve/keys`.
    fn key_name(&self) -> String {
        sha256_hex(&self.key().to_string())[..16].to_string()
    }
}

/// The options as they join an id: empty for the service's own, so ids
/// of submissions without options stay as they were.
fn options_text(options: &Overrides) -> String {
    if options.is_default() {
        String::new()
    } else {
        serde_json::to_string(options).unwrap_or_default()
    }
}

/// An evaluation's id: the first 16 hex digits of the SHA-256 of its key,
/// its patch's hash and its options, so the same submission always gets
/// the same id.
pub fn eval_id(
    model: &str,
    instance_id: &str,
    sample: &str,
    patch_sha: Option<&str>,
    options: &str,
) -> String {
    let mut text = format!(
        "{model}\0{instance_id}\0{sample}\0{}",
        patch_sha.unwrap_or("-")
    );
    if !options.is_empty() {
        text.push('\0');
        text.push_str(options);
    }
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

/// What the folder knows of a submission (before it is accepted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Known {
    /// Never accepted, and its key is free.
    Absent,
    /// Accepted earlier; how it stands.
    Accepted(Stored),
    /// Its key (model, instance, sample) is this other evaluation's.
    KeyTaken(String),
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

    fn key_path(&self, a: &Accepted) -> PathBuf {
        self.root().join("keys").join(a.key_name())
    }

    /// Written (atomically, synced) before the submission is acknowledged,
    /// with its key's file.
    pub fn write_accepted(&self, a: &Accepted) -> std::io::Result<()> {
        write_json_atomic(&self.accepted_path(&a.id), a)?;
        self.write_key(a)?;
        // A resubmission of a cancelled evaluation queues it again.
        match std::fs::remove_file(self.cancelled_path(&a.id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// `.serve/keys/<key>` names `a`. Not synced: a start rebuilds what a
    /// crash lost ([`ServeDir::ensure_key`]), and a key naming an
    /// evaluation never accepted is ignored.
    fn write_key(&self, a: &Accepted) -> std::io::Result<()> {
        let path = self.key_path(a);
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(".tmp-{}", a.id));
        std::fs::write(&tmp, &a.id)?;
        std::fs::rename(&tmp, &path)
    }

    /// On start: the key's file names `a` (a crash may have lost it).
    pub fn ensure_key(&self, a: &Accepted) -> std::io::Result<()> {
        match std::fs::read_to_string(self.key_path(a)) {
            Ok(id) if id == a.id => Ok(()),
            _ => self.write_key(a),
        }
    }

    /// The accepted evaluation `id`, if there is one (without its patch
    /// when `patch` is false).
    pub fn read(&self, id: &str, patch: bool) -> Result<Option<Accepted>, RunDirError> {
        let path = self.accepted_path(id);
        if !path.exists() {
            return Ok(None);
        }
        let mut a = read_accepted(&path)?;
        if !patch {
            a.model_patch = None;
        }
        Ok(Some(a))
    }

    /// Whether `a` was accepted before (and how it stands), or its key is
    /// another evaluation's.
    pub fn known(&self, a: &Accepted) -> Result<Known, RunDirError> {
        if self.accepted_path(&a.id).exists() {
            return Ok(Known::Accepted(self.stored(a)?));
        }
        let owner = match std::fs::read_to_string(self.key_path(a)) {
            Ok(id) => id,
            Err(_) => return Ok(Known::Absent),
        };
        if owner != a.id && is_eval_id(&owner) && self.accepted_path(&owner).exists() {
            return Ok(Known::KeyTaken(owner));
        }
        Ok(Known::Absent)
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

    /// The ids of every accepted evaluation, in no order.
    pub fn ids(&self) -> Result<Vec<String>, RunDirError> {
        let dir = self.root().join("accepted");
        let entries = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(RunDirError::Io { path: dir, source }),
        };
        Ok(entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let id = name.strip_suffix(".json")?;
                is_eval_id(id).then(|| id.to_string())
            })
            .collect())
    }

    /// Every accepted evaluation with how it stands, oldest first (by
    /// acceptance time, then id). Only pending ones keep their patch, so
    /// a folder of many finished ones is read in little memory. An error
    /// names the file that cannot be read.
    pub fn accepted(&self) -> Result<Vec<(Accepted, Stored)>, RunDirError> {
        let mut out = Vec::new();
        for id in self.ids()? {
            let Some(mut a) = self.read(&id, true)? else {
                continue;
            };
            let stored = self.stored(&a)?;
            if stored != Stored::Pending {
                a.model_patch = None;
            }
            out.push((a, stored));
        }
        out.sort_by(|(a, _), (b, _)| (a.accepted_at, &a.id).cmp(&(b.accepted_at, &b.id)));
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
        let a = Accepted::new("i-1", "m", None, Some("diff a"), Default::default());
        let b = Accepted::new("i-1", "m", None, Some("diff b"), Default::default());
        assert_eq!(
            a.id,
            Accepted::new("i-1", "m", None, Some("diff a"), Default::default()).id
        );
        assert_ne!(a.id, b.id);
        assert_ne!(a.sample_id, b.sample_id);
        assert!(is_eval_id(&a.id) && !is_eval_id("../x"));
        let named = Accepted::new("i-1", "m", Some("3"), Some("diff a"), Default::default());
        assert_eq!(named.sample_id, "3");
        assert_ne!(named.id, a.id);
        let empty = Accepted::new("i-1", "m", None, Some("  \n"), Default::default());
        assert_eq!(
            (empty.sample_id.as_str(), empty.model_patch),
            ("empty", None)
        );
    }

    #[test]
    fn options_make_another_evaluation_and_sample() {
        let plain = Accepted::new("i-1", "m", None, Some("diff a"), Overrides::default());
        let opts = Overrides {
            timeout_seconds: Some(30),
            audit: false,
        };
        let with = Accepted::new("i-1", "m", None, Some("diff a"), opts.clone());
        assert_ne!(plain.id, with.id);
        assert!(with
            .sample_id
            .starts_with(&format!("{}-o", plain.sample_id)));
        // Named sample: the same folder, another id (a conflict to refuse).
        let named = Accepted::new("i-1", "m", Some("3"), Some("diff a"), opts);
        assert_eq!(named.sample_id, "3");
        // Without options the record has no `options` field, as before.
        let text = serde_json::to_string(&plain).unwrap();
        assert!(!text.contains("options"), "{text}");
        let back: Accepted = serde_json::from_str(&serde_json::to_string(&with).unwrap()).unwrap();
        assert_eq!(back, with);
    }

    #[test]
    fn the_folder_knows_what_was_accepted_and_who_holds_a_key() {
        let d = tempfile::tempdir().unwrap();
        let serve = ServeDir::new(RunDir::new(d.path(), "svc"));
        let a = Accepted::new("i-1", "m", Some("1"), Some("diff a"), Default::default());
        assert_eq!(serve.known(&a).unwrap(), Known::Absent);
        serve.write_accepted(&a).unwrap();
        assert_eq!(serve.known(&a).unwrap(), Known::Accepted(Stored::Pending));
        let other = Accepted::new("i-1", "m", Some("1"), Some("diff b"), Default::default());
        assert_eq!(serve.known(&other).unwrap(), Known::KeyTaken(a.id.clone()));
        // A lost key file is rebuilt on start.
        std::fs::remove_dir_all(d.path().join("svc/.serve/keys")).unwrap();
        assert_eq!(serve.known(&other).unwrap(), Known::Absent);
        serve.ensure_key(&a).unwrap();
        assert_eq!(serve.known(&other).unwrap(), Known::KeyTaken(a.id.clone()));
        let read = serve.read(&a.id, false).unwrap().unwrap();
        assert_eq!((read.id.as_str(), read.model_patch), (a.id.as_str(), None));
        assert!(serve.read("0123456789abcdef", false).unwrap().is_none());
        assert_eq!(serve.ids().unwrap(), vec![a.id.clone()]);
    }

    #[test]
    fn accepted_evaluations_are_pending_until_their_record_or_cancel() {
        let d = tempfile::tempdir().unwrap();
        let serve = ServeDir::new(RunDir::new(d.path(), "svc"));
        let a = Accepted::new("i-1", "m", None, Some("diff a"), Default::default());
        let b = Accepted::new("i-2", "m", None, Some("diff b"), Default::default());
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
