//! Line mapping between the base tree and the patched tree of one file.
//!
//! A linter run on both trees reports findings by line; to tell a finding the
//! patch introduced from one that was already there and only moved (a hunk
//! inserted above it shifts it down), every base line is mapped to its line
//! in the patched file, and every patched line back to its base line.
//!
//! Pure diff semantics say a modified line is a removal plus an addition. For
//! blame that is too strict (re-indenting a line that already broke a rule is
//! not a new error), so within a change block (a run of removed and added
//! lines) the k-th removed line is paired with the k-th added line, and the
//! map reports the pairing beside the plain answer.

use serde::Serialize;

use crate::patch::{ChangeKind, PatchError};

// (Also `patch::hunks::LineKind`, crate-private, a hunk body's line.)
/// A line's role in a hunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LineKind {
    Context,
    Add,
    Remove,
}

/// One hunk line with its numbers on each side (1-based; `None` on the side
/// it is not in).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiffLine {
    pub kind: LineKind,
    pub old_no: Option<usize>,
    pub new_no: Option<usize>,
    pub text: String,
}

/// One hunk, with its lines numbered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiffHunk {
    /// Number of the hunk's first line on the base side (for a hunk with no
    /// base line: the line it is inserted before).
    pub old_first: usize,
    /// Number of its first line on the patched side (likewise).
    pub new_first: usize,
    /// Text after the closing `@@` (often the enclosing function).
    pub section: String,
    pub lines: Vec<DiffLine>,
}

/// One file of a patch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiffFile {
    /// Path before the change; `None` for an added file.
    pub old_path: Option<String>,
    /// Path after the change; `None` for a deleted file.
    pub new_path: Option<String>,
    pub binary: bool,
    pub hunks: Vec<DiffHunk>,
}

impl DiffFile {
    /// The new path, or the old one for a deletion.
    pub fn path(&self) -> &str {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or("")
    }

    /// The map of this file's lines.
    pub fn line_map(&self) -> LineMap {
        LineMap::from_hunks(&self.hunks)
    }

    /// Added lines as (new line number, text).
    pub fn added(&self) -> impl Iterator<Item = (usize, &str)> {
        self.hunks
            .iter()
            .flat_map(|h| &h.lines)
            .filter(|l| l.kind == LineKind::Add)
            .filter_map(|l| Some((l.new_no?, l.text.as_str())))
    }
}

/// Reads the files of a patch with patchgrade's patch parser and its
/// normalisation (prose cut, CRLF undone, hunk counts repaired, new starts
/// derived from old ones as git apply reads them), then numbers the hunk
/// lines of the normalised text, whose i-th `diff --git` section is the
/// parser's i-th file.
pub fn parse_diff(raw: &str) -> Result<Vec<DiffFile>, PatchError> {
    let patch = crate::patch::Patch::parse(raw)?;
    let mut bodies: Vec<Vec<&str>> = Vec::new();
    for line in patch.text.lines() {
        if line.starts_with("diff --git ") {
            bodies.push(Vec::new());
        } else if let Some(b) = bodies.last_mut() {
            b.push(line);
        }
    }
    Ok(patch
        .files
        .iter()
        .zip(
            bodies
                .iter()
                .map(Vec::as_slice)
                .chain(std::iter::repeat(&[][..])),
        )
        .map(|(f, body)| {
            let (old_path, new_path) = match &f.kind {
                ChangeKind::Added => (None, Some(f.path.clone())),
                ChangeKind::Deleted => (Some(f.path.clone()), None),
                ChangeKind::Modified => (Some(f.path.clone()), Some(f.path.clone())),
                ChangeKind::Renamed { from } | ChangeKind::Copied { from } => {
                    (Some(from.clone()), Some(f.path.clone()))
                }
            };
            DiffFile {
                old_path,
                new_path,
                binary: f.binary,
                hunks: hunks_of(body),
            }
        })
        .collect())
}

/// The hunks of one section of normalised text.
fn hunks_of(body: &[&str]) -> Vec<DiffHunk> {
    let mut out = Vec::new();
    let mut header: Option<(usize, usize, usize, usize, String)> = None;
    let mut lines: Vec<(LineKind, String)> = Vec::new();
    let mut flush = |h: Option<(usize, usize, usize, usize, String)>, l: &mut Vec<_>| {
        if let Some((os, ol, ns, nl, sec)) = h {
            out.push(number(os, ol, ns, nl, l.drain(..), &sec));
        }
    };
    for line in body {
        if let Some(h) = hunk_header(line) {
            flush(header.take(), &mut lines);
            header = Some(h);
        } else if header.is_some() {
            let kind = match line.as_bytes().first() {
                Some(b'+') => LineKind::Add,
                Some(b'-') => LineKind::Remove,
                Some(b' ') => LineKind::Context,
                _ => continue,
            };
            lines.push((kind, line[1..].to_string()));
        }
    }
    flush(header.take(), &mut lines);
    out
}

/// `@@ -a,b +c,d @@ section` as normalisation writes it.
fn hunk_header(line: &str) -> Option<(usize, usize, usize, usize, String)> {
    let rest = line.strip_prefix("@@ -")?;
    let end = rest.find(" @@")?;
    let (old, new) = rest[..end].split_once(" +")?;
    let range = |r: &str| -> Option<(usize, usize)> {
        match r.split_once(',') {
            Some((s, l)) => Some((s.parse().ok()?, l.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (os, ol) = range(old)?;
    let (ns, nl) = range(new)?;
    Some((os, ol, ns, nl, rest[end + 3..].to_string()))
}

/// Numbers a hunk's lines from its header's starts. An empty side (`-5,0`)
/// names the line before the hunk, so its first line is one further.
fn number(
    old_start: usize,
    old_len: usize,
    new_start: usize,
    new_len: usize,
    lines: impl Iterator<Item = (LineKind, String)>,
    section: &str,
) -> DiffHunk {
    let old_first = if old_len == 0 {
        old_start + 1
    } else {
        old_start.max(1)
    };
    let new_first = if new_len == 0 {
        new_start + 1
    } else {
        new_start.max(1)
    };
    let (mut old, mut new) = (old_first, new_first);
    let lines = lines
        .map(|(kind, text)| {
            let (o, n) = match kind {
                LineKind::Context => (Some(old), Some(new)),
                LineKind::Add => (None, Some(new)),
                LineKind::Remove => (Some(old), None),
            };
            old += usize::from(o.is_some());
            new += usize::from(n.is_some());
            DiffLine {
                kind,
                old_no: o,
                new_no: n,
                text,
            }
        })
        .collect();
    DiffHunk {
        old_first,
        new_first,
        section: section.trim().to_string(),
        lines,
    }
}

/// Where a base line went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "fate", content = "line")]
pub enum Fate {
    /// Unchanged, now at this new line.
    Kept(usize),
    /// Removed, and paired with this added line of its change block.
    Replaced(usize),
    /// Removed with no added line to pair it with.
    Removed,
}

impl Fate {
    /// The new line, if the base line survives or was replaced.
    pub fn new_line(self) -> Option<usize> {
        match self {
            Fate::Kept(n) | Fate::Replaced(n) => Some(n),
            Fate::Removed => None,
        }
    }
}

// (Also `audit::leakage::fragments::Origin`, where a code fragment came from.)
/// Where a patched line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "origin", content = "line")]
pub enum Origin {
    /// Unchanged from this base line.
    Unchanged(usize),
    /// Added, replacing this base line of its change block.
    Changed(usize),
    /// Added with no removed line to pair it with.
    Added,
}

impl Origin {
    /// Whether the patch wrote this line (added or changed).
    pub fn is_touched(self) -> bool {
        !matches!(self, Origin::Unchanged(_))
    }

    /// The base line, if the line is unchanged or replaces one.
    pub fn base_line(self) -> Option<usize> {
        match self {
            Origin::Unchanged(b) | Origin::Changed(b) => Some(b),
            Origin::Added => None,
        }
    }
}

/// The stretch of both files one hunk covers, with a table per side.
#[derive(Debug, Clone)]
struct Span {
    old_first: usize,
    new_first: usize,
    /// Fate of old lines `old_first..old_first + old.len()`.
    old: Vec<Fate>,
    /// Origin of new lines `new_first..new_first + new.len()`.
    new: Vec<Origin>,
}

impl Span {
    fn old_end(&self) -> usize {
        self.old_first + self.old.len()
    }
    fn new_end(&self) -> usize {
        self.new_first + self.new.len()
    }
}

/// Maps lines of one file between base and patched; lines outside every
/// hunk shift by the balance of the hunks before them.
#[derive(Debug, Clone, Default)]
pub struct LineMap {
    spans: Vec<Span>,
}

impl LineMap {
    /// The map of a file's hunks (numbered as [`parse_diff`] numbers them).
    pub fn from_hunks(hunks: &[DiffHunk]) -> LineMap {
        let mut spans: Vec<Span> = hunks.iter().map(span_of).collect();
        spans.sort_by_key(|s| s.old_first);
        LineMap { spans }
    }

    /// The map between two texts, from a line diff of them (for a patch
    /// applied with an offset or fuzz, where the hunk headers lie).
    pub fn from_texts(old: &str, new: &str) -> LineMap {
        let diff = similar::TextDiff::from_lines(old, new);
        let lines = diff.iter_all_changes().map(|c| {
            let kind = match c.tag() {
                similar::ChangeTag::Equal => LineKind::Context,
                similar::ChangeTag::Insert => LineKind::Add,
                similar::ChangeTag::Delete => LineKind::Remove,
            };
            (kind, String::new())
        });
        let hunk = number(1, 1, 1, 1, lines, "");
        LineMap::from_hunks(&[hunk])
    }

    /// Where base line `base` (1-based) is in the patched file.
    pub fn fate(&self, base: usize) -> Fate {
        let i = self.spans.partition_point(|s| s.old_first <= base);
        if i == 0 {
            return Fate::Kept(base);
        }
        let s = &self.spans[i - 1];
        if base < s.old_end() {
            return s.old[base - s.old_first];
        }
        Fate::Kept(shift(base, s.old_end(), s.new_end()))
    }

    /// Where patched line `new` (1-based) came from.
    pub fn origin(&self, new: usize) -> Origin {
        // Spans are ordered by old start, hence by new start too.
        let i = self.spans.partition_point(|s| s.new_first <= new);
        if i == 0 {
            return Origin::Unchanged(new);
        }
        let s = &self.spans[i - 1];
        if new < s.new_end() {
            return s.new[new - s.new_first];
        }
        Origin::Unchanged(shift(new, s.new_end(), s.old_end()))
    }

    /// Every patched line the patch wrote (added or changed), ascending.
    pub fn touched(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .spans
            .iter()
            .flat_map(|s| {
                s.new
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| o.is_touched())
                    .map(move |(k, _)| s.new_first + k)
            })
            .collect();
        out.sort_unstable();
        out
    }
}

/// `line - from + to`, without underflow on inconsistent input.
fn shift(line: usize, from: usize, to: usize) -> usize {
    (line + to).saturating_sub(from).max(1)
}

fn span_of(h: &DiffHunk) -> Span {
    let mut old = Vec::new();
    let mut new = Vec::new();
    // The current change block: removed old numbers, added new numbers.
    let mut removed: Vec<usize> = Vec::new();
    let mut added: Vec<usize> = Vec::new();
    let flush =
        |old: &mut Vec<Fate>, new: &mut Vec<Origin>, r: &mut Vec<usize>, a: &mut Vec<usize>| {
            for (k, _) in r.iter().enumerate() {
                old.push(a.get(k).map_or(Fate::Removed, |&n| Fate::Replaced(n)));
            }
            for (k, _) in a.iter().enumerate() {
                new.push(r.get(k).map_or(Origin::Added, |&o| Origin::Changed(o)));
            }
            r.clear();
            a.clear();
        };
    for l in &h.lines {
        match (l.kind, l.old_no, l.new_no) {
            (LineKind::Context, Some(o), Some(n)) => {
                flush(&mut old, &mut new, &mut removed, &mut added);
                old.push(Fate::Kept(n));
                new.push(Origin::Unchanged(o));
            }
            (LineKind::Remove, Some(o), _) => removed.push(o),
            (LineKind::Add, _, Some(n)) => added.push(n),
            _ => {}
        }
    }
    flush(&mut old, &mut new, &mut removed, &mut added);
    Span {
        old_first: h.old_first,
        new_first: h.new_first,
        old,
        new,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INSERT_ABOVE: &str = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,6 @@\n import os\n+import sys\n+\n+X = 1\n \n def f():\n@@ -8,3 +11,4 @@ def f():\n     a = 1\n-    b = 2\n+    b = 3\n+    c = 4\n     return a\n";

    #[test]
    fn base_lines_below_an_inserted_hunk_move_down() {
        let files = parse_diff(INSERT_ABOVE).unwrap();
        assert_eq!(files.len(), 1);
        let m = files[0].line_map();
        // Before any hunk, and the context of the first.
        assert_eq!(m.fate(1), Fate::Kept(1));
        assert_eq!(m.fate(2), Fate::Kept(5));
        assert_eq!(m.fate(3), Fate::Kept(6));
        // Between the hunks: shifted by the 3 inserted lines.
        assert_eq!(m.fate(5), Fate::Kept(8));
        assert_eq!(m.fate(8), Fate::Kept(11));
        // The changed line is paired with its replacement.
        assert_eq!(m.fate(9), Fate::Replaced(12));
        assert_eq!(m.fate(10), Fate::Kept(14));
        // Below the last hunk: shifted by 3 + 1.
        assert_eq!(m.fate(40), Fate::Kept(44));

        assert_eq!(m.origin(1), Origin::Unchanged(1));
        assert_eq!(m.origin(2), Origin::Added);
        assert_eq!(m.origin(4), Origin::Added);
        assert_eq!(m.origin(5), Origin::Unchanged(2));
        assert_eq!(m.origin(8), Origin::Unchanged(5));
        assert_eq!(m.origin(12), Origin::Changed(9));
        assert_eq!(m.origin(13), Origin::Added);
        assert_eq!(m.origin(14), Origin::Unchanged(10));
        assert_eq!(m.origin(44), Origin::Unchanged(40));
        assert_eq!(m.touched(), vec![2, 3, 4, 12, 13]);
        // The two directions agree on every unchanged line.
        for b in 1..60 {
            if let Fate::Kept(n) = m.fate(b) {
                assert_eq!(m.origin(n), Origin::Unchanged(b), "base line {b}");
            }
        }
    }

    #[test]
    fn removals_without_replacement_and_empty_sides() {
        // Zero-context hunks, as `git diff -U0` writes them: a pure deletion
        // (`+3,0`) and a pure insertion (`-6,0`).
        let p = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -4,2 +3,0 @@\n-x\n-y\n@@ -6,0 +5,2 @@\n+p\n+q\n";
        let f = &parse_diff(p).unwrap()[0];
        assert_eq!(f.hunks[0].old_first, 4);
        assert_eq!(f.hunks[1].new_first, 5);
        let m = f.line_map();
        assert_eq!(m.fate(3), Fate::Kept(3));
        assert_eq!(m.fate(4), Fate::Removed);
        assert_eq!(m.fate(5), Fate::Removed);
        assert_eq!(m.fate(6), Fate::Kept(4));
        assert_eq!(m.fate(7), Fate::Kept(7));
        assert_eq!(m.origin(4), Origin::Unchanged(6));
        assert_eq!(m.origin(5), Origin::Added);
        assert_eq!(m.origin(6), Origin::Added);
        assert_eq!(m.origin(7), Origin::Unchanged(7));
    }

    #[test]
    fn added_deleted_and_renamed_files() {
        let p = "diff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n@@ -0,0 +1,2 @@\n+a\n+b\ndiff --git a/d.py b/d.py\ndeleted file mode 100644\n--- a/d.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-q\ndiff --git a/old.py b/new.py\nsimilarity index 90%\nrename from old.py\nrename to new.py\n--- a/old.py\n+++ b/new.py\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n";
        let f = parse_diff(p).unwrap();
        assert_eq!(f.len(), 3);
        assert_eq!((f[0].old_path.as_deref(), f[0].path()), (None, "n.py"));
        assert_eq!(f[0].added().collect::<Vec<_>>(), vec![(1, "a"), (2, "b")]);
        assert_eq!(f[0].line_map().origin(2), Origin::Added);
        assert_eq!((f[1].new_path.as_deref(), f[1].path()), (None, "d.py"));
        assert_eq!(f[1].line_map().fate(1), Fate::Removed);
        assert_eq!(f[2].old_path.as_deref(), Some("old.py"));
        assert_eq!(f[2].path(), "new.py");
        assert_eq!(f[2].line_map().origin(1), Origin::Changed(1));
    }

    #[test]
    fn miscounted_hunks_are_read_as_normalised() {
        // A model's patch: wrong counts and a wrong new start.
        let p = "--- a/m.py\n+++ b/m.py\n@@ -2,1 +9,9 @@\n a\n+b\n c\n";
        let m = parse_diff(p).unwrap()[0].line_map();
        assert_eq!(m.fate(2), Fate::Kept(2));
        assert_eq!(m.origin(3), Origin::Added);
        assert_eq!(m.fate(3), Fate::Kept(4));
    }

    #[test]
    fn map_from_texts_agrees_with_the_hunks() {
        let old = "import os\n\ndef f():\n    return 1\n";
        let new = "import os\nimport sys\n\ndef f():\n    return 2\n";
        let m = LineMap::from_texts(old, new);
        assert_eq!(m.fate(1), Fate::Kept(1));
        assert_eq!(m.origin(2), Origin::Added);
        assert_eq!(m.fate(3), Fate::Kept(4));
        assert_eq!(m.fate(4), Fate::Replaced(5));
        assert_eq!(m.origin(5), Origin::Changed(4));
        assert_eq!(m.touched(), vec![2, 5]);
    }
}
