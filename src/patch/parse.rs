//! Line-level diff parser shared by normalisation, the safety check and the
//! fuzzy applier, so that all three agree on which headers a patch has.
//!
//! The grammar follows git's (and libgit2's) reading of a diff: a file section
//! starts at `diff --git` or at a `---`/`+++` pair, extended headers follow,
//! then hunks or a binary body. Text between sections is ignored, as git does
//! with e-mail prose. This module reads the sections; [`super::hunks`] reads
//! their hunks and [`super::paths`] the paths in their headers.

use super::hunks::{parse_hunks, renumber, Hunk};
use super::lines::{is_section_start, malformed, SrcLine};
use super::paths::{dash_path, detect_prefix, header_path, split_git_line, strip_first};
use super::PatchError;

/// One file's part of a patch, after prefix stripping.
#[derive(Debug, Clone, Default)]
pub(crate) struct Section {
    pub line_no: usize,
    /// Path before the change, `None` for `/dev/null`.
    pub old_path: Option<String>,
    /// Path after the change, `None` for `/dev/null`.
    pub new_path: Option<String>,
    /// Every path string as written in a header (unquoted, prefix kept), so
    /// the safety check also sees what a prefix-stripping reader would use.
    pub raw_paths: Vec<String>,
    /// Extended header lines, verbatim and in input order.
    pub ext: Vec<String>,
    pub old_mode: Option<u32>,
    pub new_mode: Option<u32>,
    pub new_file_mode: Option<u32>,
    pub deleted_file_mode: Option<u32>,
    pub index_mode: Option<u32>,
    pub rename_from: Option<String>,
    pub rename_to: Option<String>,
    pub copy_from: Option<String>,
    pub copy_to: Option<String>,
    pub hunks: Vec<Hunk>,
    /// `GIT binary patch` or `Binary files ... differ` body, verbatim.
    pub binary: Option<Vec<String>>,
}

impl Section {
    pub fn is_added(&self) -> bool {
        self.new_file_mode.is_some()
    }
    pub fn is_deleted(&self) -> bool {
        self.deleted_file_mode.is_some()
    }
    /// Mode before the change, where the patch says it.
    pub fn effective_old_mode(&self) -> Option<u32> {
        if self.is_added() {
            return None;
        }
        self.old_mode.or(self.deleted_file_mode).or(self.index_mode)
    }
    /// Mode after the change, where the patch says it.
    pub fn effective_new_mode(&self) -> Option<u32> {
        if self.is_deleted() {
            return None;
        }
        self.new_mode.or(self.new_file_mode).or(self.index_mode)
    }
    /// The path a reader of this section touches last: the new path, or
    /// the old one for deletions.
    pub fn display_path(&self) -> &str {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or("")
    }
}

/// Splits raw text into lines, repairs CRLF transport mangling and drops
/// everything before the first file header.
///
/// CRLF is only undone when the diff's own header lines (`diff --git`, `@@`)
/// end in `\r`: git never writes those with CR, so a CR there means the whole
/// text went through a LF->CRLF conversion. When headers are clean, a CR on a
/// content line is real file content (a CRLF file) and is kept.
pub(crate) fn clean_lines(raw: &str) -> Result<Vec<SrcLine>, PatchError> {
    let raw = raw.strip_prefix('\u{feff}').unwrap_or(raw);
    let mut pieces: Vec<&str> = raw.split('\n').collect();
    if pieces.last() == Some(&"") {
        pieces.pop();
    }
    let mangled = pieces
        .iter()
        .any(|l| (l.starts_with("diff --git ") || l.starts_with("@@ ")) && l.ends_with('\r'));
    let lines: Vec<SrcLine> = pieces
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let text = if mangled {
                l.strip_suffix('\r').unwrap_or(l)
            } else {
                l
            };
            SrcLine {
                no: i + 1,
                text: text.to_string(),
            }
        })
        .collect();
    let start = (0..lines.len()).find(|&i| is_section_start(&lines, i));
    match start {
        Some(s) => Ok(lines[s..].to_vec()),
        None => match lines.iter().find(|l| l.text.starts_with("@@ -")) {
            Some(l) => Err(malformed(l.no, "hunk without a file header")),
            None => Err(PatchError::NoDiff),
        },
    }
}

/// Parses cleaned lines into file sections.
pub(crate) fn parse_sections(lines: &[SrcLine]) -> Result<Vec<Section>, PatchError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].text.starts_with("diff --git ") {
            let (sec, next) = parse_git_section(lines, i)?;
            out.push(sec);
            i = next;
        } else if is_section_start(lines, i) {
            let (sec, next) = parse_plain_section(lines, i)?;
            out.push(sec);
            i = next;
        } else if lines[i].text.starts_with("@@ ") {
            return Err(malformed(lines[i].no, "hunk without a file header"));
        } else {
            // Prose between files: ignored, as git does.
            i += 1;
        }
    }
    if out.is_empty() {
        return Err(PatchError::NoDiff);
    }
    Ok(out)
}

const EXT_PREFIXES: &[&str] = &[
    "old mode ",
    "new mode ",
    "deleted file mode ",
    "new file mode ",
    "similarity index ",
    "dissimilarity index ",
    "rename from ",
    "rename to ",
    "rename old ",
    "rename new ",
    "copy from ",
    "copy to ",
    "index ",
];

fn parse_mode(s: &str, line: usize) -> Result<u32, PatchError> {
    let s = s.trim();
    if s.is_empty() || s.len() > 7 {
        return Err(malformed(line, format!("bad file mode '{s}'")));
    }
    // Only modes git writes; libgit2 (and git2's bindings) choke on others.
    match u32::from_str_radix(s, 8) {
        Ok(m @ (0o100644 | 0o100664 | 0o100755 | 0o120000 | 0o160000)) => Ok(m),
        _ => Err(malformed(line, format!("bad file mode '{s}'"))),
    }
}

fn parse_git_section(lines: &[SrcLine], start: usize) -> Result<(Section, usize), PatchError> {
    let head = &lines[start];
    let rest = &head.text["diff --git ".len()..];
    let (ga, gb) =
        split_git_line(rest).ok_or_else(|| malformed(head.no, "unreadable diff --git paths"))?;
    let mut sec = Section {
        line_no: head.no,
        ..Section::default()
    };
    sec.raw_paths.push(ga.clone());
    sec.raw_paths.push(gb.clone());
    let mut i = start + 1;
    while i < lines.len() {
        let l = &lines[i];
        let t = l.text.as_str();
        let Some(p) = EXT_PREFIXES.iter().find(|p| t.starts_with(**p)) else {
            break;
        };
        let val = t[p.len()..].trim_end();
        match *p {
            "old mode " => sec.old_mode = Some(parse_mode(val, l.no)?),
            "new mode " => sec.new_mode = Some(parse_mode(val, l.no)?),
            "deleted file mode " => sec.deleted_file_mode = Some(parse_mode(val, l.no)?),
            "new file mode " => sec.new_file_mode = Some(parse_mode(val, l.no)?),
            "rename from " | "rename old " => {
                sec.rename_from = Some(header_path(val).map_err(|r| malformed(l.no, r))?)
            }
            "rename to " | "rename new " => {
                sec.rename_to = Some(header_path(val).map_err(|r| malformed(l.no, r))?)
            }
            "copy from " => sec.copy_from = Some(header_path(val).map_err(|r| malformed(l.no, r))?),
            "copy to " => sec.copy_to = Some(header_path(val).map_err(|r| malformed(l.no, r))?),
            "index " => {
                if let Some((_, m)) = val.split_once(' ') {
                    sec.index_mode = Some(parse_mode(m, l.no)?);
                }
            }
            _ => {}
        }
        sec.ext.push(t.to_string());
        i += 1;
    }
    for p in [
        &sec.rename_from,
        &sec.rename_to,
        &sec.copy_from,
        &sec.copy_to,
    ]
    .into_iter()
    .flatten()
    {
        sec.raw_paths.push(p.clone());
    }
    if sec.rename_from.is_some() != sec.rename_to.is_some() {
        return Err(malformed(
            head.no,
            "rename needs both 'rename from' and 'rename to'",
        ));
    }
    if sec.copy_from.is_some() != sec.copy_to.is_some() {
        return Err(malformed(
            head.no,
            "copy needs both 'copy from' and 'copy to'",
        ));
    }
    if sec.new_file_mode.is_some() && sec.deleted_file_mode.is_some() {
        return Err(malformed(head.no, "file is both new and deleted"));
    }

    let mut dashes: Option<(Option<String>, Option<String>)> = None;
    if i + 1 < lines.len()
        && lines[i].text.starts_with("--- ")
        && lines[i + 1].text.starts_with("+++ ")
    {
        let o = dash_at(lines, i)?;
        let n = dash_at(lines, i + 1)?;
        sec.raw_paths.extend(o.iter().cloned());
        sec.raw_paths.extend(n.iter().cloned());
        dashes = Some((o, n));
        i += 2;
    }

    // Decide how to strip prefixes: from ---/+++ when present, else from the
    // diff --git line (whose halves always carry both sides' prefixes).
    let strip = match &dashes {
        Some((o, n)) if o.is_some() || n.is_some() => {
            detect_prefix(o.as_deref(), n.as_deref()) || detect_prefix(Some(&ga), Some(&gb))
        }
        _ => detect_prefix(Some(&ga), Some(&gb)),
    };
    let fix = |p: &str| if strip { strip_first(p) } else { p.to_string() };

    match &dashes {
        Some((o, n)) => {
            if o.is_none() && n.is_none() {
                return Err(malformed(head.no, "both sides are /dev/null"));
            }
            sec.old_path = o.as_deref().map(fix);
            sec.new_path = n.as_deref().map(fix);
            // A git section whose ---/+++ say /dev/null but which lacks the
            // matching mode line: libgit2 then reports mismatched names, so
            // record it as the addition/deletion the patch means.
            if sec.old_path.is_none() && sec.new_file_mode.is_none() {
                sec.new_file_mode = Some(0o100644);
                sec.ext.insert(0, "new file mode 100644".to_string());
            }
            if sec.new_path.is_none() && sec.deleted_file_mode.is_none() {
                sec.deleted_file_mode = Some(0o100644);
                sec.ext.insert(0, "deleted file mode 100644".to_string());
            }
        }
        None => {
            sec.old_path = Some(fix(&ga));
            sec.new_path = Some(fix(&gb));
        }
    }
    if sec.is_added() {
        sec.old_path = None;
        if sec.new_path.is_none() {
            sec.new_path = Some(fix(&gb));
        }
    }
    if sec.is_deleted() {
        sec.new_path = None;
        if sec.old_path.is_none() {
            sec.old_path = Some(fix(&ga));
        }
    }
    // libgit2 refuses ---/+++ names that disagree with the rename/copy
    // lines; say so here rather than guess which one is meant.
    let moved = sec.rename_from.as_ref().zip(sec.rename_to.as_ref());
    let copied = sec.copy_from.as_ref().zip(sec.copy_to.as_ref());
    if let (Some((f, t)), Some((o, n))) = (moved.or(copied), &dashes) {
        if o.as_deref().map(fix).as_ref() != Some(f) || n.as_deref().map(fix).as_ref() != Some(t) {
            return Err(malformed(
                head.no,
                "---/+++ paths do not match the rename or copy lines",
            ));
        }
    }
    if let (Some(f), Some(t)) = (&sec.rename_from, &sec.rename_to) {
        sec.old_path = Some(f.clone());
        sec.new_path = Some(t.clone());
    }
    if let (Some(f), Some(t)) = (&sec.copy_from, &sec.copy_to) {
        sec.old_path = Some(f.clone());
        sec.new_path = Some(t.clone());
    }

    if i < lines.len() && lines[i].text.starts_with("GIT binary patch") {
        let (body, next) = take_binary(lines, i)?;
        sec.binary = Some(body);
        i = next;
    } else if i < lines.len() && lines[i].text.starts_with("Binary files ") {
        sec.binary = Some(vec![lines[i].text.clone()]);
        i += 1;
    } else {
        let (hunks, next) = parse_hunks(lines, i)?;
        sec.hunks = hunks;
        i = next;
    }
    validate(&mut sec)?;
    Ok((sec, i))
}

fn parse_plain_section(lines: &[SrcLine], start: usize) -> Result<(Section, usize), PatchError> {
    let o = dash_at(lines, start)?;
    let n = dash_at(lines, start + 1)?;
    let mut sec = Section {
        line_no: lines[start].no,
        ..Section::default()
    };
    sec.raw_paths.extend(o.iter().cloned());
    sec.raw_paths.extend(n.iter().cloned());
    if o.is_none() && n.is_none() {
        return Err(malformed(lines[start].no, "both sides are /dev/null"));
    }
    let strip = detect_prefix(o.as_deref(), n.as_deref());
    let fix = |p: &str| if strip { strip_first(p) } else { p.to_string() };
    let mut old = o.as_deref().map(fix);
    let mut new = n.as_deref().map(fix);
    if let (Some(a), Some(b)) = (&old, &new) {
        if a != b {
            // A plain diff names one file twice (e.g. `x.orig` and `x`): pick
            // the way GNU patch does, fewest components, then shortest
            // basename, then shortest name.
            let key = |p: &str| {
                (
                    p.split('/').count(),
                    p.rsplit('/').next().map_or(0, str::len),
                    p.len(),
                )
            };
            let pick = if key(b) < key(a) {
                b.clone()
            } else {
                a.clone()
            };
            old = Some(pick.clone());
            new = Some(pick);
        }
    }
    sec.old_path = old;
    sec.new_path = new;
    if sec.old_path.is_none() {
        sec.new_file_mode = Some(0o100644);
        sec.ext.push("new file mode 100644".to_string());
    }
    if sec.new_path.is_none() {
        sec.deleted_file_mode = Some(0o100644);
        sec.ext.push("deleted file mode 100644".to_string());
    }
    let (hunks, next) = parse_hunks(lines, start + 2)?;
    sec.hunks = hunks;
    validate(&mut sec)?;
    Ok((sec, next))
}

fn validate(sec: &mut Section) -> Result<(), PatchError> {
    let l = sec.line_no;
    if sec.is_added() {
        // A new file's hunks insert into nothing: old start 0, whatever the
        // model wrote.
        for h in &mut sec.hunks {
            h.old_start = 0;
        }
        renumber(&mut sec.hunks);
    }
    if sec.old_path.as_deref().is_some_and(str::is_empty)
        || sec.new_path.as_deref().is_some_and(str::is_empty)
    {
        return Err(malformed(l, "empty path"));
    }
    let mode_change = matches!((sec.old_mode, sec.new_mode), (Some(a), Some(b)) if a != b);
    let has_body = !sec.hunks.is_empty() || sec.binary.is_some();
    if !has_body
        && !mode_change
        && !sec.is_added()
        && !sec.is_deleted()
        && sec.rename_from.is_none()
        && sec.copy_from.is_none()
    {
        return Err(malformed(
            l,
            format!("no changes for '{}'", sec.display_path()),
        ));
    }
    if sec.is_added() && sec.hunks.iter().any(|h| h.old_len != 0) {
        return Err(malformed(l, "new file with hunks that remove lines"));
    }
    if sec.is_deleted() && sec.hunks.iter().any(|h| h.new_len != 0) {
        return Err(malformed(l, "deleted file with hunks that add lines"));
    }
    Ok(())
}

/// The path on the `---`/`+++` line `lines[i]`.
fn dash_at(lines: &[SrcLine], i: usize) -> Result<Option<String>, PatchError> {
    dash_path(&lines[i].text[4..]).map_err(|r| malformed(lines[i].no, r))
}

/// Consumes a `GIT binary patch` body: one or two `literal N`/`delta N`
/// blocks of base85 lines, each ended by an empty line.
fn take_binary(lines: &[SrcLine], start: usize) -> Result<(Vec<String>, usize), PatchError> {
    let mut body = vec![lines[start].text.clone()];
    let mut i = start + 1;
    let mut blocks = 0;
    while i < lines.len() && blocks < 2 {
        let t = lines[i].text.as_str();
        let is_block = t
            .strip_prefix("literal ")
            .or_else(|| t.strip_prefix("delta "));
        let Some(size) = is_block else { break };
        if size.trim().parse::<u64>().is_err() {
            return Err(malformed(lines[i].no, "bad binary block size"));
        }
        body.push(t.to_string());
        i += 1;
        while i < lines.len() && !lines[i].text.is_empty() {
            let d = lines[i].text.as_bytes();
            // Each data line starts with a length letter; anything else ends
            // the block early (a truncated patch), which libgit2 reports.
            if !d[0].is_ascii_alphabetic() {
                break;
            }
            body.push(lines[i].text.clone());
            i += 1;
        }
        body.push(String::new());
        if i < lines.len() && lines[i].text.is_empty() {
            i += 1;
        }
        blocks += 1;
    }
    if blocks == 0 {
        return Err(malformed(lines[start].no, "GIT binary patch without data"));
    }
    Ok((body, i))
}
