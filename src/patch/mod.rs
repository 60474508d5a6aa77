//! Candidate patches: normalisation, path safety, applying with git2.
//!
//! A model's patch is normalised (prose, fences, CRLF, prefixes, hunk counts;
//! see `normalise.rs`), checked for paths that leave the tree (`safety.rs`),
//! then applied to the worktree by libgit2 (`Strict`) or, if that fails, by
//! our own offset/whitespace/fuzz search (`Fuzzy`, `fuzzy.rs`). Either way the
//! worktree is unchanged when applying fails, and a patch that is already
//! applied is a failure: nothing is ever applied in reverse.

mod apply;
mod fuzzy;
pub(crate) mod hunks;
mod in_tree;
mod lines;
mod normalise;
mod parse;
pub(crate) mod paths;
mod safety;
#[cfg(test)]
mod tests;

use std::path::Path;

use sha2::{Digest, Sha256};

pub use in_tree::{apply_in_tree, TreeChanges};

/// How a file changes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    Deleted,
    Modified,
    Renamed { from: String },
    Copied { from: String },
}

/// One file a patch touches.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileChange {
    /// New path, or the old path for deletions.
    pub path: String,
    pub kind: ChangeKind,
    pub binary: bool,
    pub old_mode: Option<u32>,
    pub new_mode: Option<u32>,
}

/// A patch after normalisation, with the files it touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub text: String,
    pub files: Vec<FileChange>,
}

/// Why a patch could not be read or applied.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("no diff found in the patch text")]
    NoDiff,
    #[error("malformed patch at line {line}: {reason}")]
    Malformed { line: usize, reason: String },
    #[error("refused unsafe path '{path}': {reason}")]
    UnsafePath { path: String, reason: String },
    #[error("patch does not apply (strict: {strict}; fuzzy: {fuzzy})")]
    DoesNotApply {
        /// libgit2's message.
        strict: String,
        /// Why the fuzzy fallback failed: file and hunk.
        fuzzy: String,
    },
    #[error("i/o error on '{path}'")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("git error: {0}")]
    Git(#[from] git2::Error),
}

/// Which strategy applied a patch.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ApplyStrategy {
    /// libgit2, exactly as `git apply` would (hunks at their stated lines).
    Strict,
    /// Our fallback: hunks found at an offset, ignoring trailing whitespace,
    /// or with up to two context lines dropped at each end.
    Fuzzy,
}

impl Patch {
    /// Normalise then parse headers; errors on text that holds no diff.
    pub fn parse(raw: &str) -> Result<Patch, PatchError> {
        let sections = read_sections(raw)?;
        let files = sections.iter().map(file_change).collect();
        Ok(Patch {
            text: normalise::emit(&sections),
            files,
        })
    }

    /// Refuses paths that escape the tree (absolute, `..`, `.git`) and
    /// symlinks whose target does, as we and libgit2 read the headers.
    pub fn check_safe(&self) -> Result<(), PatchError> {
        let sections = read_sections(&self.text)?;
        safety::check_sections(&sections)?;
        safety::check_git2(&normalise::emit(&sections))
    }

    /// SHA-256 of the normalised text, lowercase hex.
    pub fn sha256(&self) -> String {
        Sha256::digest(self.text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// Apply to the worktree of the git repository at `workdir`. Atomic: on error
/// the worktree is as before. Runs [`Patch::check_safe`] and worktree checks
/// (no writing below a symlink) first, so an unsafe patch writes nothing.
pub fn apply(workdir: &Path, patch: &Patch) -> Result<ApplyStrategy, PatchError> {
    let sections = read_sections(&patch.text)?;
    safety::check_sections(&sections)?;
    safety::check_git2(&normalise::emit(&sections))?;
    safety::check_disk(workdir, &sections)?;
    apply::apply(workdir, &sections)
}

/// Normalises a model's patch text into a git diff libgit2 accepts; text that
/// cannot be parsed comes back only cleaned (prose cut, CRLF, final newline),
/// and text with no diff at all comes back empty.
pub fn normalise(raw: &str) -> String {
    match parse::clean_lines(raw) {
        Ok(lines) => match parse::parse_sections(&lines) {
            Ok(sections) => normalise::emit(&sections),
            Err(_) => lines.iter().map(|l| format!("{}\n", l.text)).collect(),
        },
        Err(_) => String::new(),
    }
}

pub(crate) fn read_sections(raw: &str) -> Result<Vec<parse::Section>, PatchError> {
    parse::parse_sections(&parse::clean_lines(raw)?)
}

fn file_change(s: &parse::Section) -> FileChange {
    let old = s.old_path.clone().unwrap_or_default();
    let kind = if s.rename_from.is_some() {
        ChangeKind::Renamed { from: old }
    } else if s.copy_from.is_some() {
        ChangeKind::Copied { from: old }
    } else if s.is_added() {
        ChangeKind::Added
    } else if s.is_deleted() {
        ChangeKind::Deleted
    } else {
        ChangeKind::Modified
    };
    FileChange {
        path: s.display_path().to_string(),
        kind,
        binary: s.binary.is_some(),
        old_mode: s.effective_old_mode(),
        new_mode: s.effective_new_mode(),
    }
}
