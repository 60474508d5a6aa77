//! Path safety: a candidate patch must not write outside the worktree or into
//! `.git`, directly or through a symlink.
//!
//! Checks run on every path a header names (both sides of `diff --git`,
//! `---`/`+++`, rename and copy lines, prefixed and stripped), and on libgit2's
//! own reading of the normalised text, so that no reader of the patch can be
//! pointed somewhere the check did not look.

use std::collections::BTreeSet;
use std::path::Path;

use super::hunks::LineKind;
use super::parse::Section;
use super::paths::strip_first;
use super::PatchError;

pub(crate) const MODE_SYMLINK: u32 = 0o120000;

fn unsafe_path(path: &str, reason: impl Into<String>) -> PatchError {
    PatchError::UnsafePath {
        path: path.to_string(),
        reason: reason.into(),
    }
}

/// True for a component git refuses to check out: `.git` in any case, plus
/// the spellings Windows and macOS file systems fold onto it.
fn is_git_dir(comp: &str) -> bool {
    let trimmed = comp.trim_end_matches(['.', ' ']);
    trimmed.eq_ignore_ascii_case(".git") || comp.eq_ignore_ascii_case("git~1")
}

/// Refuses absolute paths and `..`, `.git` or NUL anywhere. `strict` also
/// refuses `.` components (kept off for raw, prefixed header paths, where a
/// `./` prefix is common and stripped).
fn check_path(path: &str, strict: bool) -> Result<(), PatchError> {
    if path.is_empty() {
        return Err(unsafe_path(path, "empty path"));
    }
    if path.contains('\0') {
        return Err(unsafe_path(path, "path contains a NUL byte"));
    }
    if path.starts_with('/') || path.starts_with('\\') {
        return Err(unsafe_path(path, "absolute path"));
    }
    // `\` is a separator for Windows checkouts of the same tree.
    for comp in path.split(['/', '\\']) {
        if comp == ".." {
            return Err(unsafe_path(path, "path climbs out of the tree with '..'"));
        }
        if is_git_dir(comp) {
            return Err(unsafe_path(path, "path goes into the .git directory"));
        }
        if strict && comp == "." {
            return Err(unsafe_path(path, "path has a '.' component"));
        }
    }
    Ok(())
}

/// Textual checks on parsed sections.
pub(crate) fn check_sections(sections: &[Section]) -> Result<(), PatchError> {
    for s in sections {
        for raw in &s.raw_paths {
            check_path(raw, false)?;
            // What a prefix-stripping reader (libgit2, patch -p1) would use.
            check_path(&strip_first(raw.trim_start_matches('/')), false)?;
        }
        for p in [&s.old_path, &s.new_path].into_iter().flatten() {
            check_path(p, true)?;
        }
    }
    let created = created_symlinks(sections);
    for s in sections {
        check_symlink_section(s, &|p: &str| created.contains(p))?;
    }
    Ok(())
}

/// Paths the patch leaves as symlinks.
fn created_symlinks(sections: &[Section]) -> BTreeSet<String> {
    sections
        .iter()
        .filter(|s| s.effective_new_mode() == Some(MODE_SYMLINK))
        .filter_map(|s| s.new_path.clone())
        .collect()
}

/// Refuses a symlink the patch creates or retargets when its target is
/// absolute, climbs out of the tree, reaches into `.git`, or cannot be read.
fn check_symlink_section(s: &Section, is_link: &dyn Fn(&str) -> bool) -> Result<(), PatchError> {
    if s.effective_new_mode() != Some(MODE_SYMLINK) {
        return Ok(());
    }
    let Some(path) = s.new_path.as_deref() else {
        return Ok(());
    };
    if s.binary.is_some() {
        return Err(unsafe_path(
            path,
            "symlink with a binary target that cannot be checked",
        ));
    }
    let old = s.effective_old_mode();
    if old.is_some() && old != Some(MODE_SYMLINK) {
        // A file turned into a symlink in place: the target would be the
        // file's patched content, which the patch does not show in full.
        return Err(unsafe_path(path, "file changed into a symlink in place"));
    }
    // A symlink's content is one line, its target; every added line is a
    // candidate target.
    for l in s.hunks.iter().flat_map(|h| &h.lines) {
        if l.kind == LineKind::Add {
            check_link_target(path, &l.text, is_link)?;
        }
    }
    Ok(())
}

/// Resolves `target` lexically from the directory of `link` and refuses it if
/// it leaves the tree. Stepping `..` out of a directory that is itself a
/// symlink is refused too, since the real parent is then elsewhere.
pub(crate) fn check_link_target(
    link: &str,
    target: &str,
    is_link: &dyn Fn(&str) -> bool,
) -> Result<(), PatchError> {
    let reason = |r: &str| unsafe_path(link, format!("symlink target '{target}' {r}"));
    if target.is_empty() {
        return Err(reason("is empty"));
    }
    if target.starts_with('/') || target.starts_with('\\') {
        return Err(reason("is absolute"));
    }
    if target.contains('\0') {
        return Err(reason("contains a NUL byte"));
    }
    let mut stack: Vec<&str> = link.split('/').filter(|c| !c.is_empty()).collect();
    stack.pop();
    for comp in target.split(['/', '\\']) {
        match comp {
            "" | "." => {}
            ".." => {
                if stack.is_empty() {
                    return Err(reason("points outside the tree"));
                }
                if is_link(&stack.join("/")) {
                    return Err(reason("climbs out of a directory that is a symlink"));
                }
                stack.pop();
            }
            c if is_git_dir(c) => return Err(reason("points into the .git directory")),
            c => stack.push(c),
        }
    }
    Ok(())
}

/// Checks libgit2's reading of the text: the paths it will write and the
/// targets of symlinks it will create. Text libgit2 cannot parse is left to
/// the strict applier, which then fails without writing.
pub(crate) fn check_git2(text: &str) -> Result<(), PatchError> {
    let Ok(diff) = git2::Diff::from_buffer(text.as_bytes()) else {
        return Ok(());
    };
    for (i, delta) in diff.deltas().enumerate() {
        for f in [delta.old_file(), delta.new_file()] {
            let Some(bytes) = f.path_bytes() else {
                continue;
            };
            let p = String::from_utf8_lossy(bytes);
            check_path(&p, true)?;
        }
        if delta.new_file().mode() == git2::FileMode::Link {
            let link = delta
                .new_file()
                .path_bytes()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            let Ok(Some(patch)) = git2::Patch::from_diff(&diff, i) else {
                return Err(unsafe_path(&link, "symlink whose target cannot be read"));
            };
            if delta.flags().is_binary() {
                return Err(unsafe_path(
                    &link,
                    "symlink with a binary target that cannot be checked",
                ));
            }
            for h in 0..patch.num_hunks() {
                let n = patch.num_lines_in_hunk(h).unwrap_or(0);
                for l in 0..n {
                    let Ok(line) = patch.line_in_hunk(h, l) else {
                        continue;
                    };
                    if line.origin() == '+' {
                        let t = String::from_utf8_lossy(line.content());
                        let t = t.strip_suffix('\n').unwrap_or(&t);
                        check_link_target(&link, t, &|_| false)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Checks against the worktree: no touched path may sit below a symlink
/// (writing there would follow it; git refuses "beyond a symbolic link"), an
/// existing symlink the patch touches must stay inside the tree (libgit2
/// reads through it), and new symlinks may not climb out of on-disk ones.
pub(crate) fn check_disk(workdir: &Path, sections: &[Section]) -> Result<(), PatchError> {
    let created = created_symlinks(sections);
    let on_disk_link = |p: &str| {
        std::fs::symlink_metadata(workdir.join(p)).is_ok_and(|m| m.file_type().is_symlink())
    };
    for s in sections {
        for p in [&s.old_path, &s.new_path].into_iter().flatten() {
            let comps: Vec<&str> = p.split('/').filter(|c| !c.is_empty()).collect();
            for k in 1..comps.len() {
                let prefix = comps[..k].join("/");
                if on_disk_link(&prefix) {
                    return Err(unsafe_path(p, format!("'{prefix}' is a symlink")));
                }
            }
            let full = workdir.join(p);
            if let Ok(target) = std::fs::read_link(&full) {
                let t = target.to_string_lossy();
                check_link_target(p, &t, &on_disk_link).map_err(|_| {
                    unsafe_path(
                        p,
                        format!("existing symlink points outside the tree ('{t}')"),
                    )
                })?;
            }
        }
        let is_link = |p: &str| created.contains(p) || on_disk_link(p);
        check_symlink_section(s, &is_link)?;
        // A symlink already in the tree stays one whatever the headers say
        // (its mode comes from disk): check what it will point to from where
        // it will be, after a rename, a copy, or a hunk that retargets it.
        if let (Some(old), false) = (s.old_path.as_deref(), s.is_deleted()) {
            if let Ok(cur) = std::fs::read_link(workdir.join(old)) {
                let new = s.new_path.as_deref().unwrap_or(old);
                check_link_target(new, &cur.to_string_lossy(), &is_link)?;
                for l in s.hunks.iter().flat_map(|h| &h.lines) {
                    if l.kind == LineKind::Add {
                        check_link_target(new, &l.text, &is_link)?;
                    }
                }
            }
        }
    }
    Ok(())
}
