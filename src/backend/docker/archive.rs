//! The tars sent to the engine: entries with the send time as mtime, a git
//! tree as files (instance build contexts), and the run archive of one
//! evaluation (the candidate's changed files, the eval script, its launcher).

use std::path::{Path, PathBuf};

use std::os::unix::ffi::OsStrExt;

use super::images::TESTBED;
use crate::patch::TreeChanges;
use crate::script::quote;

/// What one evaluation changed relative to the checkout: files to upload,
/// paths to delete.
#[derive(Debug, Default)]
pub struct Changes {
    pub upload: Vec<PathBuf>,
    pub delete: Vec<PathBuf>,
}

/// Files the candidate changed, added or deleted in `tree`, found with git2
/// against the checkout's HEAD (ignored files included: a patch may add one).
pub fn candidate_changes(tree: &Path) -> Result<Changes, git2::Error> {
    use std::os::unix::ffi::OsStrExt;
    let repo = git2::Repository::open(tree)?;
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(true)
        .recurse_ignored_dirs(true)
        .exclude_submodules(true)
        .renames_head_to_index(false)
        .renames_index_to_workdir(false);
    let mut out = Changes::default();
    for e in repo.statuses(Some(&mut opts))?.iter() {
        let rel = PathBuf::from(std::ffi::OsStr::from_bytes(e.path_bytes()));
        if tree.join(&rel).symlink_metadata().is_ok() {
            out.upload.push(rel);
        } else {
            out.delete.push(rel);
        }
    }
    out.upload.sort();
    out.delete.sort();
    Ok(out)
}

/// The one archive uploaded at `/` before the container starts: the changed
/// files of the checkout `tree` under `testbed/`, the eval script and its
/// launcher.
pub(crate) fn run_archive(
    tree: &Path,
    changes: &Changes,
    script: &str,
    watchdog: u64,
    blackhole: bool,
) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::PermissionsExt;
    let mut files = Vec::new();
    for rel in &changes.upload {
        let full = tree.join(rel);
        let meta = full.symlink_metadata()?;
        let path = rel.to_string_lossy().into_owned();
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&full)?;
            files.push((path, target.as_os_str().as_bytes().to_vec(), MODE_SYMLINK));
        } else if meta.is_file() {
            let mode = if meta.permissions().mode() & 0o111 != 0 {
                0o100755
            } else {
                0o100644
            };
            files.push((path, std::fs::read(&full)?, mode));
        }
    }
    let applied = TreeChanges {
        write: files,
        delete: changes
            .delete
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect(),
    };
    applied_archive(&applied, script, watchdog, blackhole)
}

const MODE_SYMLINK: u32 = 0o120000;

/// [`run_archive`] from a candidate applied in memory (no checkout).
pub(crate) fn applied_archive(
    applied: &TreeChanges,
    script: &str,
    watchdog: u64,
    blackhole: bool,
) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    for (rel, data, mode) in &applied.write {
        let dest = Path::new("testbed").join(rel);
        if *mode == MODE_SYMLINK {
            let target = std::ffi::OsStr::from_bytes(data);
            append_symlink(&mut b, &dest, Path::new(target))?;
        } else {
            let mode = if *mode == 0o100755 { 0o755 } else { 0o644 };
            append_file(&mut b, &dest, data, mode)?;
        }
    }
    append_file(&mut b, "eval.sh", script.as_bytes(), 0o644)?;
    let deletes: Vec<String> = applied.delete.iter().map(|p| quote(p)).collect();
    let launcher = format!(
        "#!/bin/bash\n# patchgrade: remove what the candidate deleted, then run the eval script\n\
         # (stderr into stdout so that xtrace markers and test output keep their order).\n\
         cd {testbed} || exit 1\n{rm}{route}\
         if command -v timeout >/dev/null 2>&1; then exec timeout -s KILL {watchdog} bash /eval.sh 2>&1; fi\n\
         exec bash /eval.sh 2>&1\n",
        testbed = TESTBED,
        rm = if deletes.is_empty() { String::new() } else { format!("rm -f -- {}\n", deletes.join(" ")) },
        // Spec `blackhole_routes` (NET_ADMIN is granted only then).
        route = if blackhole { format!("{}\n", crate::backend::BLACKHOLE_ROUTES) } else { String::new() },
    );
    append_file(&mut b, "patchgrade-run.sh", launcher.as_bytes(), 0o755)?;
    b.into_inner()
}

/// Archives up to this size go in the container's command instead of an
/// upload (base64, under Linux's 128 KiB limit on one argument): one engine
/// call and one mount of the container's file system fewer.
pub(crate) const INLINE_MAX: usize = 90 << 10;

/// The container command that unpacks `archive` (given inline) at `/` and
/// runs the launcher; the archive's text is gone from the process list once
/// the launcher is exec'd.
pub(crate) fn inline_command(archive: &[u8]) -> Vec<String> {
    vec![
        "bash".into(),
        "-c".into(),
        "printf %s \"$1\" | base64 -d | tar -x -C / || { echo 'patchgrade: unpacking the candidate failed' >&2; exit 97; }\n\
         exec bash /patchgrade-run.sh"
            .into(),
        "patchgrade-unpack".into(),
        base64(archive),
    ]
}

/// Standard base64 with padding.
fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= c.len() {
                out.push(A[(n >> shift) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A regular file entry.
pub fn append_file<W: std::io::Write>(
    b: &mut tar::Builder<W>,
    path: impl AsRef<Path>,
    data: &[u8],
    mode: u32,
) -> std::io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(data.len() as u64);
    h.set_mode(mode);
    h.set_mtime(mtime());
    b.append_data(&mut h, path, data)
}

/// A symlink entry.
pub fn append_symlink<W: std::io::Write>(
    b: &mut tar::Builder<W>,
    path: impl AsRef<Path>,
    target: &Path,
) -> std::io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_size(0);
    h.set_mode(0o777);
    h.set_mtime(mtime());
    b.append_link(&mut h, path, target)
}

/// A directory entry.
pub fn append_dir<W: std::io::Write>(b: &mut tar::Builder<W>, path: &str) -> std::io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_size(0);
    h.set_mode(0o755);
    h.set_mtime(mtime());
    b.append_data(&mut h, format!("{path}/"), std::io::empty())
}

/// Files get the time they were sent, rounded up to the next second (build
/// tools compare mtimes, and a tar's are whole seconds): rounded down, a
/// patched file sent in the same second as the image's install build ended
/// looked older than that build's outputs, and cargo kept the stale test
/// binary (gold graded unresolved on a fast machine).
fn mtime() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() + 1)
        .unwrap_or(1)
}

/// Why a git tree could not be written into a tar.
pub(crate) enum TreeError {
    Git(git2::Error),
    Io(std::io::Error),
}

/// A git tree as files under `prefix`, modes and symlinks kept; submodules
/// become empty folders, as in a checkout without them.
pub(crate) fn append_tree<W: std::io::Write>(
    b: &mut tar::Builder<W>,
    repo: &git2::Repository,
    tree: git2::Oid,
    prefix: &str,
) -> Result<(), TreeError> {
    let tree = repo.find_tree(tree).map_err(TreeError::Git)?;
    for entry in tree.iter() {
        let Some(name) = entry.name() else {
            continue; // not UTF-8: no such path in a checkout either
        };
        let path = format!("{prefix}/{name}");
        match entry.kind() {
            Some(git2::ObjectType::Tree) => {
                append_dir(b, &path).map_err(TreeError::Io)?;
                append_tree(b, repo, entry.id(), &path)?;
            }
            Some(git2::ObjectType::Blob) => {
                let blob = repo.find_blob(entry.id()).map_err(TreeError::Git)?;
                match entry.filemode() {
                    0o120000 => {
                        let target = String::from_utf8_lossy(blob.content()).into_owned();
                        append_symlink(b, &path, Path::new(&target)).map_err(TreeError::Io)?
                    }
                    0o100755 => {
                        append_file(b, &path, blob.content(), 0o755).map_err(TreeError::Io)?
                    }
                    _ => append_file(b, &path, blob.content(), 0o644).map_err(TreeError::Io)?,
                }
            }
            Some(git2::ObjectType::Commit) => append_dir(b, &path).map_err(TreeError::Io)?,
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_as_coreutils_writes_it() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob\xff\x00"), "Zm9vYv8A");
    }

    #[test]
    fn changes_cover_added_modified_deleted_and_ignored_files() {
        let d = tempfile::tempdir().unwrap();
        let r = git2::Repository::init(d.path()).unwrap();
        for (p, body) in [
            ("a.py", "a\n"),
            ("gone.py", "g\n"),
            (".gitignore", "build/\n"),
            ("bin/run", "#!/bin/sh\n"),
        ] {
            let full = d.path().join(p);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, body).unwrap();
        }
        let mut idx = r.index().unwrap();
        idx.add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        idx.write().unwrap();
        let tree = r.find_tree(idx.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@t").unwrap();
        r.commit(Some("HEAD"), &sig, &sig, "base", &tree, &[])
            .unwrap();
        assert!(candidate_changes(d.path()).unwrap().upload.is_empty());

        std::fs::write(d.path().join("a.py"), "b\n").unwrap();
        std::fs::remove_file(d.path().join("gone.py")).unwrap();
        std::fs::create_dir_all(d.path().join("new/deep")).unwrap();
        std::fs::write(d.path().join("new/deep/n.py"), "n\n").unwrap();
        std::fs::create_dir_all(d.path().join("build")).unwrap();
        std::fs::write(d.path().join("build/x.py"), "x\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            d.path().join("bin/run"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let c = candidate_changes(d.path()).unwrap();
        let up: Vec<String> = c.upload.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(up, ["a.py", "bin/run", "build/x.py", "new/deep/n.py"]);
        assert_eq!(c.delete, [PathBuf::from("gone.py")]);

        let bytes = run_archive(d.path(), &c, "echo hi\n", 99, false).unwrap();
        let mut ar = tar::Archive::new(bytes.as_slice());
        let mut names = Vec::new();
        let mut launcher = String::new();
        for e in ar.entries().unwrap() {
            let mut e = e.unwrap();
            let p = e.path().unwrap().display().to_string();
            if p == "testbed/bin/run" {
                assert_eq!(e.header().mode().unwrap(), 0o755);
            }
            if p == "patchgrade-run.sh" {
                std::io::Read::read_to_string(&mut e, &mut launcher).unwrap();
            }
            names.push(p);
        }
        assert!(
            names.contains(&"eval.sh".to_string())
                && names.contains(&"testbed/new/deep/n.py".to_string()),
            "{names:?}"
        );
        assert!(
            launcher.contains("rm -f -- 'gone.py'") && launcher.contains("timeout -s KILL 99"),
            "{launcher}"
        );
    }
}
