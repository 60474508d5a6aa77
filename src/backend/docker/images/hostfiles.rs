//! A folder of the host that goes into an image (a CPython build, a Rust or
//! Go toolchain, a JDK): its file list, walked once with a filter (stat
//! only, nothing read), a fingerprint of that list for image tags, and the
//! files themselves for a build context, symlinks and modes kept.

use std::path::{Path, PathBuf};

use crate::backend::docker::archive::{append_dir, append_file, append_symlink};

/// One entry of a folder's file list.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FileKind {
    Dir,
    File { size: u64, mode: u32, mtime: i64 },
    Symlink(PathBuf),
}

/// A path and the error met there.
pub type WalkError = (PathBuf, std::io::Error);

/// The files of a host folder that go into an image, in a stable order.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub prefix: PathBuf,
    entries: Vec<(PathBuf, FileKind)>,
}

impl Manifest {
    /// Walk the folder at `prefix` (stat only, nothing read), leaving out
    /// every path (relative to `prefix`) for which `keep` is false, and a
    /// left-out folder with everything under it.
    pub fn walk(prefix: &Path, keep: &dyn Fn(&Path) -> bool) -> Result<Manifest, WalkError> {
        let mut entries = Vec::new();
        walk(prefix, Path::new(""), keep, &mut entries)?;
        Ok(Manifest {
            prefix: prefix.to_path_buf(),
            entries,
        })
    }

    /// The same list with the files `exec` names made executable: the Go
    /// module proxy's toolchain zips keep no modes (`go` itself marks
    /// `bin/` and `pkg/tool/` executable after a download).
    pub fn with_exec(mut self, exec: &dyn Fn(&Path) -> bool) -> Manifest {
        for (rel, kind) in &mut self.entries {
            if let FileKind::File { mode, .. } = kind {
                if exec(rel) {
                    *mode |= 0o555;
                }
            }
        }
        self
    }

    /// Bytes of the regular files.
    pub fn size(&self) -> u64 {
        self.entries
            .iter()
            .map(|(_, k)| match k {
                FileKind::File { size, .. } => *size,
                _ => 0,
            })
            .sum()
    }

    pub fn entries(&self) -> usize {
        self.entries.len()
    }

    /// Identifies the folder's contents by names, sizes, modes and mtimes:
    /// a rebuilt or changed folder gives another image.
    pub fn fingerprint(&self) -> Vec<u8> {
        let mut s = String::new();
        for (rel, kind) in &self.entries {
            let line = match kind {
                FileKind::Dir => format!("d {}\n", rel.display()),
                FileKind::File { size, mode, mtime } => {
                    format!("f {} {size} {mode:o} {mtime}\n", rel.display())
                }
                FileKind::Symlink(t) => format!("l {} {}\n", rel.display(), t.display()),
            };
            s.push_str(&line);
        }
        s.into_bytes()
    }

    /// The folder as a tar archive of absolute paths (without the leading
    /// `/`), to be unpacked at `/` in the image.
    pub fn tar(&self) -> Result<Vec<u8>, WalkError> {
        let base = self.prefix.strip_prefix("/").unwrap_or(&self.prefix);
        let mut b = tar::Builder::new(Vec::new());
        b.mode(tar::HeaderMode::Deterministic);
        self.append_to(&mut b, base)?;
        b.into_inner().map_err(|e| (self.prefix.clone(), e))
    }

    /// The files appended to `b` under `dest` (a path inside the archive),
    /// one file read at a time: a Rust toolchain is 600 MB.
    pub fn append_to<W: std::io::Write>(
        &self,
        b: &mut tar::Builder<W>,
        dest: &Path,
    ) -> Result<(), WalkError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |e| (path, e)
        };
        for (rel, kind) in &self.entries {
            let to = dest.join(rel);
            let full = self.prefix.join(rel);
            match kind {
                FileKind::Dir => {
                    let name = to.to_str().ok_or_else(|| {
                        (full.clone(), std::io::Error::other("path is not UTF-8"))
                    })?;
                    append_dir(b, name.trim_end_matches('/')).map_err(io(&full))?
                }
                FileKind::File { mode, .. } => {
                    let data = std::fs::read(&full).map_err(io(&full))?;
                    append_file(b, &to, &data, *mode).map_err(io(&full))?
                }
                FileKind::Symlink(target) => append_symlink(b, &to, target).map_err(io(&full))?,
            }
        }
        Ok(())
    }
}

fn walk(
    prefix: &Path,
    rel: &Path,
    keep: &dyn Fn(&Path) -> bool,
    out: &mut Vec<(PathBuf, FileKind)>,
) -> Result<(), WalkError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = prefix.join(rel);
    out.push((rel.to_path_buf(), FileKind::Dir));
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| (dir.clone(), e))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .map_err(|e| (dir.clone(), e))?;
    names.sort();
    for name in names {
        let child = rel.join(&name);
        if !keep(&child) {
            continue;
        }
        let full = prefix.join(&child);
        let meta = full.symlink_metadata().map_err(|e| (full.clone(), e))?;
        let ft = meta.file_type();
        if ft.is_symlink() {
            let target = std::fs::read_link(&full).map_err(|e| (full.clone(), e))?;
            out.push((child, FileKind::Symlink(target)));
        } else if ft.is_dir() {
            walk(prefix, &child, keep, out)?;
        } else if ft.is_file() {
            out.push((
                child,
                FileKind::File {
                    size: meta.len(),
                    mode: meta.permissions().mode() & 0o7777,
                    mtime: meta.mtime(),
                },
            ));
        }
        // Sockets, fifos and devices have no place in an image.
    }
    Ok(())
}
