//! Hunks: their headers, their bodies (with the repairs models need: wrong
//! counts, stripped context spaces, prose after the last line) and their
//! new-side starts.

use super::lines::{is_section_start, malformed, SrcLine};
use super::PatchError;

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

/// A hunk header, `@@ -a[,b] +c[,d] @@ section`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HunkHeader {
    pub old_start: usize,
    pub old_len: usize,
    pub new_start: usize,
    pub new_len: usize,
    /// Text after the closing `@@`, as written (its leading space kept).
    pub section: String,
}

impl HunkHeader {
    /// As git reads a header: both ranges and the closing `@@`.
    pub(crate) fn parse(t: &str) -> Option<HunkHeader> {
        HunkHeader::read(t, false)
    }

    /// As a lenient reader of a malformed candidate (the audit) takes it:
    /// the closing `@@` may be missing and numbers may be padded.
    pub(crate) fn parse_lenient(t: &str) -> Option<HunkHeader> {
        HunkHeader::read(t, true)
    }

    fn read(t: &str, lenient: bool) -> Option<HunkHeader> {
        let rest = t.strip_prefix("@@ -")?;
        let (ranges, section) = match rest.find(" @@") {
            Some(end) => (&rest[..end], &rest[end + 3..]),
            None if lenient => (rest, ""),
            None => return None,
        };
        let (old, new) = ranges.split_once(" +")?;
        let num = |n: &str| if lenient { n.trim() } else { n }.parse::<usize>().ok();
        let range = |r: &str| -> Option<(usize, usize)> {
            match r.split_once(',') {
                Some((s, l)) => Some((num(s)?, num(l)?)),
                None => Some((num(r)?, 1)),
            }
        };
        let (old_start, old_len) = range(old)?;
        let (new_start, new_len) = range(new)?;
        Some(HunkHeader {
            old_start,
            old_len,
            new_start,
            new_len,
            section: section.to_string(),
        })
    }
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

pub(super) fn parse_hunks(
    lines: &[SrcLine],
    mut i: usize,
) -> Result<(Vec<Hunk>, usize), PatchError> {
    let mut hunks = Vec::new();
    while i < lines.len() && lines[i].text.starts_with("@@") {
        let head = &lines[i];
        let (declared, start, section) = match HunkHeader::parse(&head.text) {
            Some(h) => (Some((h.old_len, h.new_len)), Some(h.old_start), h.section),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunk_headers_strict_and_lenient() {
        let h = HunkHeader::parse("@@ -1,2 +3,4 @@ def f():").unwrap();
        assert_eq!(
            (
                h.old_start,
                h.old_len,
                h.new_start,
                h.new_len,
                h.section.as_str()
            ),
            (1, 2, 3, 4, " def f():")
        );
        let h = HunkHeader::parse("@@ -7 +8 @@").unwrap();
        assert_eq!((h.old_len, h.new_len, h.section.as_str()), (1, 1, ""));
        for t in ["@@ -1,2 +3,4", "@@ -1, 2 +3,4 @@", "@@ -x +1 @@", "@@ @@"] {
            assert_eq!(HunkHeader::parse(t), None, "{t}");
        }
        let h = HunkHeader::parse_lenient("@@ -1, 2 +3,4").unwrap();
        assert_eq!((h.old_len, h.new_start, h.section.as_str()), (2, 3, ""));
        assert_eq!(HunkHeader::parse_lenient("@@ -x +1 @@"), None);
    }
}
