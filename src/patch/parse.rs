//! Line-level diff parser shared by normalisation, the safety check and the
//! fuzzy applier, so that all three agree on which headers a patch has.
//!
//! The grammar follows git's (and libgit2's) reading of a diff: a file section
//! starts at `diff --git` or at a `---`/`+++` pair, extended headers follow,
//! then hunks or a binary body. Text between sections is ignored, as git does
//! with e-mail prose.

use super::PatchError;

/// One input line with its 1-based number in the raw text, for error messages.
#[derive(Debug, Clone)]
pub(crate) struct SrcLine {
    pub no: usize,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineKind {
    Context,
    Add,
    Remove,
}

#[derive(Debug, Clone)]
pub(crate) struct HunkLine {
    pub kind: LineKind,
    pub text: String,
    /// Followed by `\ No newline at end of file`.
    pub no_eol: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Hunk {
    pub old_start: usize,
    pub old_len: usize,
    pub new_start: usize,
    pub new_len: usize,
    /// Text after the closing `@@`, kept for readability of the output.
    pub section: String,
    pub lines: Vec<HunkLine>,
    /// Source line of the `@@` header.
    pub line_no: usize,
}

impl Hunk {
    pub fn header(&self) -> String {
        format!(
            "@@ -{},{} +{},{} @@{}",
            self.old_start, self.old_len, self.new_start, self.new_len, self.section
        )
    }
}

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

fn malformed(line: usize, reason: impl Into<String>) -> PatchError {
    PatchError::Malformed {
        line,
        reason: reason.into(),
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

fn is_section_start(lines: &[SrcLine], i: usize) -> bool {
    let t = &lines[i].text;
    t.starts_with("diff --git ")
        || (t.starts_with("--- ") && lines.get(i + 1).is_some_and(|n| n.text.starts_with("+++ ")))
}

/// True for a line that can continue a hunk body (an empty line counts: it is
/// a context line whose leading space was stripped by an editor or a model).
fn is_body_line(t: &str) -> bool {
    t.is_empty() || t.starts_with([' ', '+', '-', '\\'])
}

/// Lines that suggest the text is still diff, not prose.
fn looks_like_hunk(t: &str) -> bool {
    t.starts_with([' ', '+', '-', '\\']) || t.starts_with("@@")
}

fn is_fence(t: &str) -> bool {
    t.starts_with("```") || t.starts_with("~~~")
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
            "rename from " | "rename old " => sec.rename_from = Some(header_path(val, l.no)?),
            "rename to " | "rename new " => sec.rename_to = Some(header_path(val, l.no)?),
            "copy from " => sec.copy_from = Some(header_path(val, l.no)?),
            "copy to " => sec.copy_to = Some(header_path(val, l.no)?),
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
        let o = dash_path(&lines[i].text[4..], lines[i].no)?;
        let n = dash_path(&lines[i + 1].text[4..], lines[i + 1].no)?;
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
    let o = dash_path(&lines[start].text[4..], lines[start].no)?;
    let n = dash_path(&lines[start + 1].text[4..], lines[start + 1].no)?;
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

fn parse_hunks(lines: &[SrcLine], mut i: usize) -> Result<(Vec<Hunk>, usize), PatchError> {
    let mut hunks = Vec::new();
    while i < lines.len() && lines[i].text.starts_with("@@") {
        let head = &lines[i];
        let (declared, start, section) = match parse_full_header(&head.text) {
            Some((os, ol, nl, section)) => (Some((ol, nl)), Some(os), section),
            None => match bare_header(&head.text) {
                Some(section) => (None, None, section),
                None => return Err(malformed(head.no, "unreadable hunk header")),
            },
        };
        i += 1;
        let body_start = i;
        let mut body: Vec<(usize, &str)> = Vec::new();
        while i < lines.len() {
            let t = lines[i].text.as_str();
            if t.starts_with("diff --git ") || t.starts_with("@@") || !is_body_line(t) {
                break;
            }
            if t.starts_with("--- ") && lines.get(i + 1).is_some_and(|n| n.text.starts_with("+++ "))
            {
                // `--- x` then `+++ y` is the next file's header unless the
                // declared counts say this hunk still needs lines (a removed
                // `-- x` followed by an added `++ y`); an `@@` right after the
                // pair settles it as a header.
                let (o, n) = count(&body);
                let satisfied = declared.is_none_or(|(d_o, d_n)| o >= d_o && n >= d_n);
                let next_is_hunk = lines.get(i + 2).is_some_and(|l| l.text.starts_with("@@ -"));
                if satisfied || next_is_hunk {
                    break;
                }
            }
            body.push((lines[i].no, t));
            i += 1;
        }
        // Trailing empty lines are ambiguous (blank context or a separator):
        // keep only as many as the declared counts ask for.
        let trailing = body.iter().rev().take_while(|(_, t)| t.is_empty()).count();
        let (o, n) = count(&body[..body.len() - trailing]);
        let keep = declared
            .and_then(|(d_o, d_n)| (0..=trailing).find(|j| o + j == d_o && n + j == d_n))
            .unwrap_or(0);
        body.truncate(body.len() - trailing + keep);
        i = body_start + body.len();
        let (o, n) = count(&body);

        let mut j = i;
        while j < lines.len() && lines[j].text.is_empty() {
            j += 1;
        }
        let junk = j < lines.len()
            && !lines[j].text.starts_with("@@")
            && !lines[j].text.starts_with("diff --git ")
            && !is_section_start(lines, j);
        if junk
            && !is_fence(&lines[j].text)
            && declared.is_some_and(|(d_o, d_n)| o < d_o || n < d_n)
        {
            // The body stopped at text while the header promised more lines.
            // If diff-looking lines follow, a line lost its prefix; skipping
            // the rest as prose would silently drop changes.
            let mut k = j;
            while k < lines.len() && !is_section_start(lines, k) && !is_fence(&lines[k].text) {
                if looks_like_hunk(&lines[k].text) {
                    return Err(malformed(
                        lines[j].no,
                        format!("line is not part of a hunk: '{}'", truncate(&lines[j].text)),
                    ));
                }
                k += 1;
            }
        }

        let mut hl: Vec<HunkLine> = Vec::with_capacity(body.len());
        for (no, t) in &body {
            let (kind, text) = match t.as_bytes().first() {
                None => (LineKind::Context, ""),
                Some(b' ') => (LineKind::Context, &t[1..]),
                Some(b'+') => (LineKind::Add, &t[1..]),
                Some(b'-') => (LineKind::Remove, &t[1..]),
                _ => {
                    // `\ No newline at end of file` (its text may be localised).
                    match hl.last_mut() {
                        Some(last) => last.no_eol = true,
                        None => {
                            return Err(malformed(*no, "no-newline marker with no line before it"))
                        }
                    }
                    continue;
                }
            };
            hl.push(HunkLine {
                kind,
                text: text.to_string(),
                no_eol: false,
            });
        }
        if hl.is_empty() {
            return Err(malformed(head.no, "empty hunk"));
        }
        let old_start = match start {
            Some(s) if o == 0 => s,
            Some(s) => s.max(1),
            None => usize::from(o != 0),
        };
        hunks.push(Hunk {
            old_start,
            old_len: o,
            new_start: 0,
            new_len: n,
            section,
            lines: hl,
            line_no: head.no,
        });
        if junk {
            // Prose ends the section; the caller skips it and refuses any
            // `@@` that follows without a file header.
            i = j;
            break;
        }
        i = j;
    }
    renumber(&mut hunks);
    Ok((hunks, i))
}

/// Sets each hunk's new start from its old start and the line balance of the
/// hunks before it. libgit2 positions a hunk by its *new* start, while git
/// apply and GNU patch use the old one; models often get the new start wrong
/// after miscounting an earlier hunk, so deriving it makes libgit2 read the
/// hunk as git would.
pub(crate) fn renumber(hunks: &mut [Hunk]) {
    // Saturating: absurd starts from bad input must not overflow.
    let mut delta: i128 = 0;
    for h in hunks {
        let base = h.old_start as i128 + delta;
        let ns = if h.new_len == 0 {
            base - 1
        } else if h.old_len == 0 {
            base + 1
        } else {
            base
        };
        h.new_start = usize::try_from(ns.max(0)).unwrap_or(usize::MAX);
        delta += h.new_len as i128 - h.old_len as i128;
    }
}

/// Parses `@@ -a[,b] +c[,d] @@ section` into (old start, old len, new len,
/// section).
fn parse_full_header(t: &str) -> Option<(usize, usize, usize, String)> {
    let rest = t.strip_prefix("@@ -")?;
    let end = rest.find(" @@")?;
    let ranges = &rest[..end];
    let section = rest[end + 3..].to_string();
    let (old, new) = ranges.split_once(" +")?;
    let range = |r: &str| -> Option<(usize, usize)> {
        match r.split_once(',') {
            Some((s, l)) => Some((s.parse().ok()?, l.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (os, ol) = range(old)?;
    let (_, nl) = range(new)?;
    Some((os, ol, nl, section))
}

/// A hunk header with no usable ranges, `@@ ... @@ section` or `@@`.
fn bare_header(t: &str) -> Option<String> {
    let rest = t.strip_prefix("@@")?;
    if rest.trim().is_empty() {
        return Some(String::new());
    }
    let rest = rest.strip_prefix(' ')?;
    let end = rest.find("@@")?;
    // Refuse anything that tried to give ranges: those must parse.
    if rest[..end].chars().any(|c| c.is_ascii_digit()) {
        return None;
    }
    Some(rest[end + 2..].to_string())
}

fn count(body: &[(usize, &str)]) -> (usize, usize) {
    let mut o = 0;
    let mut n = 0;
    for (_, t) in body {
        match t.as_bytes().first() {
            None | Some(b' ') => {
                o += 1;
                n += 1;
            }
            Some(b'-') => o += 1,
            Some(b'+') => n += 1,
            _ => {}
        }
    }
    (o, n)
}

fn truncate(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// Path on a `---`/`+++` line; `None` for `/dev/null`. GNU diff appends a tab
/// and a timestamp, which are dropped.
fn dash_path(rest: &str, line: usize) -> Result<Option<String>, PatchError> {
    let p = if rest.starts_with('"') {
        let (p, _) = unquote(rest).ok_or_else(|| malformed(line, "bad quoted path"))?;
        p
    } else {
        let p = rest.split('\t').next().unwrap_or("").trim_end();
        p.to_string()
    };
    if p.is_empty() {
        return Err(malformed(line, "empty path"));
    }
    if p == "/dev/null" {
        return Ok(None);
    }
    Ok(Some(p))
}

/// Path on a `rename from`/`copy to` line: unprefixed, maybe quoted.
fn header_path(val: &str, line: usize) -> Result<String, PatchError> {
    let p = if val.starts_with('"') {
        unquote(val)
            .ok_or_else(|| malformed(line, "bad quoted path"))?
            .0
    } else {
        val.to_string()
    };
    if p.is_empty() {
        return Err(malformed(line, "empty path"));
    }
    Ok(p)
}

/// Splits the text after `diff --git ` into its two paths. Unquoted names can
/// hold spaces, so prefer the split whose halves name the same file.
fn split_git_line(rest: &str) -> Option<(String, String)> {
    let rest = rest.trim_end();
    if rest.starts_with('"') {
        let (a, tail) = unquote(rest)?;
        let tail = tail.trim_start();
        let b = if tail.starts_with('"') {
            unquote(tail)?.0
        } else {
            tail.to_string()
        };
        return (!b.is_empty()).then_some((a, b));
    }
    if let Some(k) = rest.find(" \"") {
        let b = unquote(&rest[k + 1..])?.0;
        return Some((rest[..k].to_string(), b));
    }
    let spaces: Vec<usize> = rest.match_indices(' ').map(|(k, _)| k).collect();
    let halves = |k: usize| (&rest[..k], &rest[k + 1..]);
    if let Some(&k) = spaces.iter().find(|&&k| {
        let (a, b) = halves(k);
        !a.is_empty() && (a == b || strip_first(a) == strip_first(b))
    }) {
        let (a, b) = halves(k);
        return Some((a.to_string(), b.to_string()));
    }
    if let Some(&k) = spaces
        .iter()
        .find(|&&k| rest[..k].starts_with("a/") && rest[k + 1..].starts_with("b/"))
    {
        let (a, b) = halves(k);
        return Some((a.to_string(), b.to_string()));
    }
    let &k = spaces.first()?;
    let (a, b) = halves(k);
    (!a.is_empty() && !b.is_empty()).then(|| (a.to_string(), b.to_string()))
}

/// True when the pair carries one leading directory of prefix on each side
/// (git's `a/` `b/`, or custom ones like `i/` `w/` or `orig/` `new/`).
fn detect_prefix(o: Option<&str>, n: Option<&str>) -> bool {
    match (o, n) {
        (None, None) => false,
        (Some(o), None) => o.starts_with("a/"),
        (None, Some(n)) => n.starts_with("b/"),
        (Some(o), Some(n)) => {
            if o.starts_with("a/") && n.starts_with("b/") {
                return true;
            }
            match (o.split_once('/'), n.split_once('/')) {
                (Some((po, ro)), Some((pn, rn))) => {
                    !po.is_empty() && !pn.is_empty() && po != pn && ro == rn && !ro.is_empty()
                }
                _ => false,
            }
        }
    }
}

/// Removes one leading path component, as `patch -p1` and libgit2 do.
pub(crate) fn strip_first(p: &str) -> String {
    match p.split_once('/') {
        Some((_, rest)) => rest.to_string(),
        None => p.to_string(),
    }
}

/// Reads a C-style quoted string as git writes it; returns it and the rest.
pub(crate) fn unquote(s: &str) -> Option<(String, &str)> {
    let b = s.as_bytes();
    if b.first() != Some(&b'"') {
        return None;
    }
    let mut out = Vec::new();
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let text = String::from_utf8(out).ok()?;
                return Some((text, &s[i + 1..]));
            }
            b'\\' => {
                let c = *b.get(i + 1)?;
                i += 2;
                let v = match c {
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'r' => b'\r',
                    b'a' => 7,
                    b'b' => 8,
                    b'f' => 12,
                    b'v' => 11,
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'0'..=b'3' => {
                        let d1 = *b.get(i)?;
                        let d2 = *b.get(i + 1)?;
                        if !(b'0'..=b'7').contains(&d1) || !(b'0'..=b'7').contains(&d2) {
                            return None;
                        }
                        i += 2;
                        (c - b'0') * 64 + (d1 - b'0') * 8 + (d2 - b'0')
                    }
                    _ => return None,
                };
                out.push(v);
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    None
}

/// Quotes a path the way git does when it holds bytes a reader could split
/// on or misread; spaces are quoted too so libgit2 splits `diff --git` right.
pub(crate) fn quote(p: &str) -> String {
    let needs = p
        .bytes()
        .any(|c| c < 0x21 || c == b'"' || c == b'\\' || c >= 0x7f);
    if !needs {
        return p.to_string();
    }
    let mut out = String::from("\"");
    for c in p.bytes() {
        match c {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            b' ' => out.push(' '),
            c if !(0x20..0x7f).contains(&c) => out.push_str(&format!("\\{c:03o}")),
            c => out.push(c as char),
        }
    }
    out.push('"');
    out
}
