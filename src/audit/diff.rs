//! The audit's view of a patch: files with their kinds, and every hunk line
//! with its line numbers, read leniently.
//!
//! The file list and kinds come from [`Patch::parse`] when the patch parses;
//! the hunks are read here from its normalised text (hunk counts repaired),
//! or from the raw text when it does not parse, so a malformed candidate is
//! still audited as far as it can be read.

use crate::patch::hunks::HunkHeader;
use crate::patch::{paths, ChangeKind, Patch};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Context,
    Add,
    Remove,
}

/// One hunk line. `new_no` is the line in the new file (for removed lines:
/// the new-file line the removal sits before).
#[derive(Debug, Clone)]
pub(crate) struct DLine {
    pub kind: Kind,
    pub new_no: usize,
    pub text: String,
    /// Index of the hunk this line is in, within its file.
    pub hunk: usize,
}

/// One file a patch touches.
#[derive(Debug, Clone)]
pub(crate) struct FileDiff {
    /// New path, or the old path for deletions.
    pub path: String,
    /// Old path of a rename or copy.
    pub from: Option<String>,
    pub kind: ChangeKind,
    /// Hunk header trailers (`@@ ... @@ <section>`), by hunk index.
    pub sections: Vec<String>,
    pub lines: Vec<DLine>,
}

impl FileDiff {
    pub fn added(&self) -> impl Iterator<Item = &DLine> {
        self.lines.iter().filter(|l| l.kind == Kind::Add)
    }

    /// Base name of the path.
    pub fn name(&self) -> &str {
        basename(&self.path)
    }

    /// Every path the change involves (a rename's source too).
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.path.as_str()).chain(self.from.as_deref())
    }
}

pub(crate) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Reads a patch; empty for text with no diff in it.
pub(crate) fn read(raw: &str) -> Vec<FileDiff> {
    if raw.trim().is_empty() {
        return Vec::new();
    }
    match Patch::parse(raw) {
        Ok(p) => {
            let mut scanned = scan(&p.text);
            // The parser's file list and kinds are authoritative; the scan
            // supplies the lines. Match them by path, in order.
            let mut out = Vec::with_capacity(p.files.len());
            for f in p.files {
                let pos = scanned.iter().position(|s| s.path == f.path);
                let lines_of = pos.map(|i| scanned.remove(i));
                let from = match &f.kind {
                    ChangeKind::Renamed { from } | ChangeKind::Copied { from } => {
                        Some(from.clone())
                    }
                    _ => None,
                };
                let (sections, lines) = lines_of.map(|s| (s.sections, s.lines)).unwrap_or_default();
                out.push(FileDiff {
                    path: f.path,
                    from,
                    kind: f.kind,
                    sections,
                    lines,
                });
            }
            out
        }
        Err(_) => scan(raw),
    }
}

#[derive(Default)]
struct Building {
    old: Option<String>,
    new: Option<String>,
    git_old: Option<String>,
    git_new: Option<String>,
    added: bool,
    deleted: bool,
    rename_from: Option<String>,
    rename_to: Option<String>,
    copy: bool,
    sections: Vec<String>,
    lines: Vec<DLine>,
}

impl Building {
    fn finish(self) -> Option<FileDiff> {
        let new = self
            .rename_to
            .clone()
            .or(self.new.clone())
            .or(self.git_new.clone());
        let old = self
            .rename_from
            .clone()
            .or(self.old.clone())
            .or(self.git_old.clone());
        let deleted = self.deleted;
        let path = if deleted {
            old.clone().or(new.clone())?
        } else {
            new.clone().or(old.clone())?
        };
        let from = match (&self.rename_from, &old) {
            (Some(f), _) => Some(f.clone()),
            (None, Some(o)) if self.copy && Some(o) != new.as_ref() => Some(o.clone()),
            _ => None,
        };
        let kind = if let Some(f) = &from {
            if self.copy {
                ChangeKind::Copied { from: f.clone() }
            } else {
                ChangeKind::Renamed { from: f.clone() }
            }
        } else if self.added {
            ChangeKind::Added
        } else if deleted {
            ChangeKind::Deleted
        } else {
            ChangeKind::Modified
        };
        Some(FileDiff {
            path,
            from,
            kind,
            sections: self.sections,
            lines: self.lines,
        })
    }
}

/// `a/x` -> `x`: the scan takes git's default prefixes off.
fn unprefixed(p: String) -> String {
    match p.strip_prefix("a/").or_else(|| p.strip_prefix("b/")) {
        Some(rest) => rest.to_string(),
        None => p,
    }
}

/// The path of a `---`/`+++` line as the patch parser reads it; None for
/// `/dev/null` or a path that cannot be read.
fn side_path(rest: &str) -> Option<String> {
    paths::dash_path(rest).ok().flatten().map(unprefixed)
}

/// The path of a `rename from`/`copy to` line.
fn ext_path(rest: &str) -> Option<String> {
    paths::header_path(rest.trim_end()).ok()
}

/// The two paths of a `diff --git` line.
fn git_paths(rest: &str) -> (Option<String>, Option<String>) {
    match paths::split_git_line(rest) {
        Some((a, b)) => (Some(unprefixed(a)), Some(unprefixed(b))),
        None => (None, None),
    }
}

/// Line scan of a diff: sections at `diff --git` or at a `---`/`+++` pair
/// outside a hunk; hunk lines counted against the header, or (when counts
/// are wrong) until a line that cannot be a hunk line.
fn scan(text: &str) -> Vec<FileDiff> {
    let mut files = Vec::new();
    let mut cur: Option<Building> = None;
    // Remaining (old, new) line counts of the open hunk.
    let mut remaining: Option<(usize, usize)> = None;
    let mut new_no = 0usize;
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].strip_suffix('\r').unwrap_or(lines[i]);
        i += 1;
        if let Some((ro, rn)) = remaining {
            let in_hunk = ro > 0 || rn > 0;
            let first = line.chars().next();
            let hunk_line = matches!(first, Some(' ' | '+' | '-' | '\\') | None);
            let header_like = line.starts_with("diff --git ")
                || line.starts_with("@@ -")
                || (line.starts_with("--- ")
                    && lines.get(i).is_some_and(|n| n.starts_with("+++ ")));
            if in_hunk && hunk_line && !header_like {
                let b = cur.get_or_insert_with(Building::default);
                let hunk = b.sections.len().saturating_sub(1);
                let kind = match first {
                    Some('\\') => continue,
                    Some('+') => Kind::Add,
                    Some('-') => Kind::Remove,
                    _ => Kind::Context,
                };
                b.lines.push(DLine {
                    kind,
                    new_no,
                    text: line.get(1..).unwrap_or("").to_string(),
                    hunk,
                });
                // Added and context lines take a new-side line, removed and
                // context lines an old-side one.
                let (old_side, new_side) = (kind != Kind::Add, kind != Kind::Remove);
                if new_side {
                    new_no += 1;
                }
                remaining = Some((
                    if old_side { ro.saturating_sub(1) } else { ro },
                    if new_side { rn.saturating_sub(1) } else { rn },
                ));
                continue;
            }
            if !in_hunk && line.starts_with('\\') {
                continue;
            }
            remaining = None;
        }
        if let Some(rest) = line.strip_prefix("diff --git ") {
            if let Some(f) = cur.take().and_then(Building::finish) {
                files.push(f);
            }
            let (o, n) = git_paths(rest);
            cur = Some(Building {
                git_old: o,
                git_new: n,
                ..Building::default()
            });
        } else if let Some(rest) = line.strip_prefix("--- ") {
            let starts_new = match &cur {
                None => true,
                Some(b) => !b.lines.is_empty() || !b.sections.is_empty() || b.old.is_some(),
            };
            if starts_new {
                if let Some(f) = cur.take().and_then(Building::finish) {
                    files.push(f);
                }
                cur = Some(Building::default());
            }
            if let Some(b) = cur.as_mut() {
                b.old = side_path(rest);
                if b.old.is_none() {
                    b.added = true;
                }
            }
        } else if let Some(rest) = line.strip_prefix("+++ ") {
            let b = cur.get_or_insert_with(Building::default);
            b.new = side_path(rest);
            if b.new.is_none() {
                b.deleted = true;
            }
        } else if line.starts_with("@@ -") {
            if let Some(h) = HunkHeader::parse_lenient(line) {
                let b = cur.get_or_insert_with(Building::default);
                b.sections.push(h.section.trim().to_string());
                new_no = h.new_start.max(1);
                // An empty side starts at the line before (`+5,0`).
                if h.new_len == 0 {
                    new_no = h.new_start + 1;
                }
                remaining = Some((h.old_len, h.new_len));
            }
        } else if let Some(b) = cur.as_mut() {
            if line.starts_with("new file mode") {
                b.added = true;
            } else if line.starts_with("deleted file mode") {
                b.deleted = true;
            } else if let Some(p) = line.strip_prefix("rename from ") {
                b.rename_from = ext_path(p);
            } else if let Some(p) = line.strip_prefix("rename to ") {
                b.rename_to = ext_path(p);
            } else if let Some(p) = line.strip_prefix("copy from ") {
                b.rename_from = ext_path(p);
                b.copy = true;
            } else if let Some(p) = line.strip_prefix("copy to ") {
                b.rename_to = ext_path(p);
                b.copy = true;
            }
        }
    }
    if let Some(f) = cur.take().and_then(Building::finish) {
        files.push(f);
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_numbers_of_added_lines() {
        let p = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,4 @@ def f():\n a\n-b\n+B\n+C\n c\n@@ -10,2 +11,2 @@\n y\n-z\n+Z\n";
        let f = read(p);
        assert_eq!(f.len(), 1);
        let added: Vec<(usize, &str)> = f[0].added().map(|l| (l.new_no, l.text.as_str())).collect();
        assert_eq!(added, vec![(2, "B"), (3, "C"), (12, "Z")]);
        assert_eq!(f[0].sections, vec!["def f():".to_string(), String::new()]);
        assert_eq!(f[0].kind, ChangeKind::Modified);
    }

    #[test]
    fn new_and_deleted_files() {
        let p = "diff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n@@ -0,0 +1,2 @@\n+x\n+y\ndiff --git a/d.py b/d.py\ndeleted file mode 100644\n--- a/d.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-q\n";
        let f = read(p);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].kind, ChangeKind::Added);
        assert_eq!(
            f[0].added().map(|l| l.new_no).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(f[1].kind, ChangeKind::Deleted);
        assert_eq!(f[1].path, "d.py");
    }

    #[test]
    fn malformed_patches_are_read_leniently_and_never_panic() {
        // Wrong hunk counts, no `diff --git`, garbage: the scan keeps going.
        let p = "--- a/x.py\n+++ b/x.py\n@@ -1,1 +1,1 @@\n-a\n+b\n+c\n+d\n";
        let f = read(p);
        assert_eq!(f.len(), 1);
        assert!(f[0].added().count() >= 1);
        for junk in [
            "",
            "@@",
            "@@ -x +y @@",
            "diff --git",
            "+++ ",
            "--- \n+++ \n@@ -1 +1 @@\n+",
            "\u{feff}diff --git a/ b/\n",
        ] {
            let _ = read(junk);
        }
    }
}
