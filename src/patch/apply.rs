//! Applying a patch to a worktree: libgit2 first, then the fuzzy fallback,
//! with a snapshot of every touched path so that a failure leaves the tree
//! exactly as it was.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::parse::Section;
use super::safety::MODE_SYMLINK;
use super::{fuzzy, normalise, safety, ApplyStrategy, PatchError};

fn io_err(path: &Path, source: std::io::Error) -> PatchError {
    PatchError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Content and git mode of a file (for symlinks, the content is the target).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileState {
    pub content: Vec<u8>,
    pub mode: u32,
}

/// Reads a worktree path as git sees it; `None` when absent.
fn read_state(workdir: &Path, rel: &str) -> Result<Option<FileState>, PatchError> {
    let full = workdir.join(rel);
    let meta = match fs::symlink_metadata(&full) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // A path through a regular file ("a/b" where "a" is a file) is absent.
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Ok(None),
        Err(e) => return Err(io_err(&full, e)),
    };
    if meta.file_type().is_symlink() {
        let t = fs::read_link(&full).map_err(|e| io_err(&full, e))?;
        return Ok(Some(FileState {
            content: t.as_os_str().as_bytes().to_vec(),
            mode: MODE_SYMLINK,
        }));
    }
    if meta.is_dir() {
        return Err(io_err(
            &full,
            std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory"),
        ));
    }
    let content = fs::read(&full).map_err(|e| io_err(&full, e))?;
    let mode = if meta.permissions().mode() & 0o111 != 0 {
        0o100755
    } else {
        0o100644
    };
    Ok(Some(FileState { content, mode }))
}

/// What was on disk before we wrote, to put it back on failure.
struct Snapshot {
    workdir: PathBuf,
    saved: Vec<(String, Option<FileState>, u32)>,
    /// Directories that did not exist, deepest last.
    missing_dirs: Vec<PathBuf>,
}

impl Snapshot {
    fn take(workdir: &Path, paths: &[String]) -> Result<Snapshot, PatchError> {
        let mut saved = Vec::new();
        let mut missing_dirs = Vec::new();
        for p in paths {
            // A directory where the patch wants a file is left alone; the
            // appliers report it.
            if fs::symlink_metadata(workdir.join(p)).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            let state = read_state(workdir, p)?;
            let perms = match &state {
                Some(s) if s.mode != MODE_SYMLINK => fs::metadata(workdir.join(p))
                    .map(|m| m.permissions().mode())
                    .unwrap_or(0o644),
                _ => 0,
            };
            saved.push((p.clone(), state, perms));
            let mut dir = workdir.join(p);
            let mut chain = Vec::new();
            while let Some(parent) = dir.parent() {
                if parent == workdir || !parent.starts_with(workdir) {
                    break;
                }
                if fs::symlink_metadata(parent).is_err() {
                    chain.push(parent.to_path_buf());
                }
                dir = parent.to_path_buf();
            }
            chain.reverse();
            for d in chain {
                if !missing_dirs.contains(&d) {
                    missing_dirs.push(d);
                }
            }
        }
        Ok(Snapshot {
            workdir: workdir.to_path_buf(),
            saved,
            missing_dirs,
        })
    }

    /// Puts every saved path back; best effort on each, first error returned.
    fn restore(&self) -> Result<(), PatchError> {
        let mut first: Option<PatchError> = None;
        let mut note = |r: Result<(), PatchError>| {
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        };
        for (p, state, perms) in &self.saved {
            let full = self.workdir.join(p);
            if read_state(&self.workdir, p).ok().flatten().as_ref() == state.as_ref() {
                continue;
            }
            note(remove_entry(&full));
            if let Some(s) = state {
                note(write_state(&full, s, Some(*perms)));
            }
        }
        for d in self.missing_dirs.iter().rev() {
            // Only empty ones: anything else in them is not ours to delete.
            let _ = fs::remove_dir(d);
        }
        first.map_or(Ok(()), Err)
    }
}

fn remove_entry(full: &Path) -> Result<(), PatchError> {
    match fs::symlink_metadata(full) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => fs::remove_file(full).map_err(|e| io_err(full, e)),
        Err(_) => Ok(()),
    }
}

fn write_state(full: &Path, s: &FileState, perms: Option<u32>) -> Result<(), PatchError> {
    if let Some(parent) = full.parent() {
        fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
    }
    if s.mode == MODE_SYMLINK {
        let target = std::ffi::OsStr::from_bytes(&s.content);
        return std::os::unix::fs::symlink(target, full).map_err(|e| io_err(full, e));
    }
    fs::write(full, &s.content).map_err(|e| io_err(full, e))?;
    let cur = fs::metadata(full)
        .map_err(|e| io_err(full, e))?
        .permissions()
        .mode();
    let mode = match perms {
        Some(p) => p,
        // Like git: executable means +x wherever the file is readable.
        None if s.mode == 0o100755 => cur | ((cur & 0o444) >> 2),
        None => cur & !0o111,
    };
    fs::set_permissions(full, fs::Permissions::from_mode(mode)).map_err(|e| io_err(full, e))
}

/// Every path the patch reads or writes, as we and libgit2 read it.
pub(crate) fn touched_paths(sections: &[Section], text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |p: &str| {
        if !out.iter().any(|q| q == p) {
            out.push(p.to_string());
        }
    };
    for s in sections {
        for p in [&s.old_path, &s.new_path].into_iter().flatten() {
            push(p);
        }
    }
    if let Ok(diff) = git2::Diff::from_buffer(text.as_bytes()) {
        for d in diff.deltas() {
            for f in [d.old_file(), d.new_file()] {
                if let Some(b) = f.path_bytes() {
                    push(&String::from_utf8_lossy(b));
                }
            }
        }
    }
    out
}

/// Aligns modes the patch only implies with the worktree, as git apply does
/// (it warns, libgit2 refuses): `deleted file mode` (normalisation writes
/// 100644 when the input only had `+++ /dev/null`), and the mode on an
/// `index` line of a plain modification (models copy `100644` there for
/// executables too).
fn align_modes(workdir: &Path, sections: &[Section]) -> Vec<Section> {
    align_modes_with(sections, &|p| {
        read_state(workdir, p).ok().flatten().map(|s| s.mode)
    })
}

/// [`align_modes`] with the current mode of a path from `mode_of` (the
/// worktree, or a tree in the object database).
pub(crate) fn align_modes_with(
    sections: &[Section],
    mode_of: &dyn Fn(&str) -> Option<u32>,
) -> Vec<Section> {
    let mut out = sections.to_vec();
    for s in &mut out {
        let plain_modify = s.index_mode.is_some()
            && s.old_mode.is_none()
            && s.new_mode.is_none()
            && !s.is_added()
            && !s.is_deleted()
            && s.old_path == s.new_path;
        if !(s.is_deleted() || plain_modify) {
            continue;
        }
        let Some(mode) = s.old_path.as_deref().and_then(mode_of) else {
            continue;
        };
        if s.is_deleted() && s.deleted_file_mode != Some(mode) {
            let line = format!("deleted file mode {:o}", mode);
            for e in s
                .ext
                .iter_mut()
                .filter(|e| e.starts_with("deleted file mode "))
            {
                e.clone_from(&line);
            }
            s.deleted_file_mode = Some(mode);
        }
        if plain_modify && s.index_mode != Some(mode) {
            for e in s.ext.iter_mut().filter(|e| e.starts_with("index ")) {
                if let Some((hashes, _)) = e.rsplit_once(' ') {
                    *e = format!("{hashes} {:o}", mode);
                }
            }
            s.index_mode = Some(mode);
        }
    }
    out
}

pub(crate) fn apply(workdir: &Path, sections: &[Section]) -> Result<ApplyStrategy, PatchError> {
    let sections = &align_modes(workdir, sections);
    let text = normalise::emit(sections);
    // Alignment changed headers: check again what libgit2 will now read.
    safety::check_sections(sections)?;
    safety::check_git2(&text)?;
    safety::check_disk(workdir, sections)?;
    let repo = git2::Repository::open(workdir)?;
    let workdir = repo
        .workdir()
        .ok_or_else(|| git2::Error::from_str("repository has no worktree"))?
        .to_path_buf();
    let touched = touched_paths(sections, &text);
    let snap = Snapshot::take(&workdir, &touched)?;

    let strict = match apply_strict(&repo, &text) {
        Ok(()) => return Ok(ApplyStrategy::Strict),
        Err(e) => e.message().to_string(),
    };
    // libgit2 writes only after every hunk applied, but a checkout can fail
    // half-way; put the tree back before trying again.
    snap.restore()?;

    let plan = match plan_fuzzy(&repo, &workdir, sections) {
        Ok(plan) => plan,
        Err(fuzzy) => return Err(PatchError::DoesNotApply { strict, fuzzy }),
    };
    if let Err(e) = write_plan(&workdir, &plan) {
        snap.restore()?;
        return Err(e);
    }
    Ok(ApplyStrategy::Fuzzy)
}

fn apply_strict(repo: &git2::Repository, text: &str) -> Result<(), git2::Error> {
    let diff = git2::Diff::from_buffer(text.as_bytes())?;
    repo.apply(&diff, git2::ApplyLocation::WorkDir, None)
}

type FilePlan = BTreeMap<String, Option<FileState>>;

/// Computes every touched file's final state in memory; the error says which
/// file and hunk failed.
fn plan_fuzzy(
    repo: &git2::Repository,
    workdir: &Path,
    sections: &[Section],
) -> Result<FilePlan, String> {
    let mut plan: FilePlan = BTreeMap::new();
    for s in sections {
        let old = s.old_path.as_deref();
        let new = s.new_path.as_deref();
        let current = |plan: &FilePlan, p: &str| -> Result<Option<FileState>, String> {
            match plan.get(p) {
                Some(st) => Ok(st.clone()),
                None => read_state(workdir, p).map_err(|e| format!("{p}: {e}")),
            }
        };
        if s.is_deleted() {
            let p = old.unwrap_or_default();
            // As libgit2 does, the deleted content is not compared.
            if current(&plan, p)?.is_none() {
                return Err(format!("{p}: cannot delete, file does not exist"));
            }
            plan.insert(p.to_string(), None);
            continue;
        }
        let new = new.unwrap_or_default();
        let base = if s.is_added() {
            if current(&plan, new)?.is_some() {
                return Err(format!("{new}: cannot create, file already exists"));
            }
            None
        } else {
            let from = old.unwrap_or(new);
            let st = current(&plan, from)?.ok_or_else(|| format!("{from}: file does not exist"))?;
            if from != new && current(&plan, new)?.is_some() {
                return Err(format!(
                    "{new}: cannot rename or copy onto an existing file"
                ));
            }
            Some((from, st))
        };
        let content = if s.binary.is_some() {
            apply_binary(repo, s, base.as_ref().map(|(p, st)| (*p, st)), new)
                .map_err(|e| format!("{new}: {e}"))?
        } else {
            let empty = Vec::new();
            let pre = base.as_ref().map_or(&empty, |(_, st)| &st.content);
            fuzzy::apply_hunks(pre, &s.hunks).map_err(|e| format!("{new}: {e}"))?
        };
        let mode = s
            .new_mode
            .or(s.new_file_mode)
            .or(base.as_ref().map(|(_, st)| st.mode))
            .unwrap_or(0o100644);
        if !matches!(mode, 0o100644 | 0o100755 | MODE_SYMLINK) {
            return Err(format!(
                "{new}: mode {mode:o} is not supported by the fuzzy applier"
            ));
        }
        if s.rename_from.is_some() {
            if let Some((from, _)) = &base {
                plan.insert((*from).to_string(), None);
            }
        }
        plan.insert(new.to_string(), Some(FileState { content, mode }));
    }
    Ok(plan)
}

/// Binary hunks are not fuzzed: libgit2 applies the one section to a tree
/// holding just the file's current content, in memory.
fn apply_binary(
    repo: &git2::Repository,
    s: &Section,
    base: Option<(&str, &FileState)>,
    new: &str,
) -> Result<Vec<u8>, git2::Error> {
    let mut index = git2::Index::new()?;
    if let Some((path, st)) = base {
        let entry = git2::IndexEntry {
            ctime: git2::IndexTime::new(0, 0),
            mtime: git2::IndexTime::new(0, 0),
            dev: 0,
            ino: 0,
            mode: st.mode,
            uid: 0,
            gid: 0,
            file_size: 0,
            id: git2::Oid::zero(),
            flags: 0,
            flags_extended: 0,
            path: path.as_bytes().to_vec(),
        };
        index.add_frombuffer(&entry, &st.content)?;
    }
    let tree = repo.find_tree(index.write_tree_to(repo)?)?;
    let diff = git2::Diff::from_buffer(normalise::emit(std::slice::from_ref(s)).as_bytes())?;
    let out = repo.apply_to_tree(&tree, &diff, None)?;
    let entry = out
        .get_path(Path::new(new), 0)
        .ok_or_else(|| git2::Error::from_str("binary patch produced no file"))?;
    Ok(repo.find_blob(entry.id)?.content().to_vec())
}

/// Writes a plan: deletions first (a file may become a directory), then
/// writes; emptied directories are removed as git does.
fn write_plan(workdir: &Path, plan: &FilePlan) -> Result<(), PatchError> {
    for (p, st) in plan {
        if st.is_none() {
            let full = workdir.join(p);
            remove_entry(&full)?;
            let mut dir = full.parent().map(Path::to_path_buf);
            while let Some(d) = dir {
                if d == workdir || !d.starts_with(workdir) || fs::remove_dir(&d).is_err() {
                    break;
                }
                dir = d.parent().map(Path::to_path_buf);
            }
        }
    }
    for (p, st) in plan {
        if let Some(st) = st {
            let full = workdir.join(p);
            let keep_perms = read_state(workdir, p)?
                .is_some_and(|old| old.mode == st.mode && st.mode != MODE_SYMLINK);
            let perms = if keep_perms {
                fs::metadata(&full).ok().map(|m| m.permissions().mode())
            } else {
                None
            };
            remove_entry(&full)?;
            write_state(&full, st, perms)?;
        }
    }
    Ok(())
}
