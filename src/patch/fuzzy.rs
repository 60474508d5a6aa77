//! In-memory hunk placement for the fuzzy fallback.
//!
//! Each hunk's preimage (context + removed lines) is searched for, in this
//! order, taking the first level that matches:
//! 1. exact, anywhere after the previous hunk, nearest the expected line;
//! 2. the same, ignoring trailing whitespace (incl. a CR);
//! 3. with 1, then 2, lines of leading/trailing context dropped (GNU patch
//!    `--fuzz=2`), exact then whitespace-insensitive.
//!
//! Hunks go in order and never overlap. A hunk whose postimage is already at
//! the found place is refused as already applied; nothing is ever reversed.
//! Context lines keep the file's own text, so whitespace drift in the patch
//! does not rewrite untouched lines.

use super::hunks::{Hunk, HunkLine, LineKind};

/// A file split into lines (without `\n`), and whether it ends in `\n`.
struct Image<'a> {
    lines: Vec<&'a [u8]>,
    eol: bool,
}

fn split(content: &[u8]) -> Image<'_> {
    if content.is_empty() {
        return Image {
            lines: Vec::new(),
            eol: true,
        };
    }
    let eol = content.ends_with(b"\n");
    let body = if eol {
        &content[..content.len() - 1]
    } else {
        content
    };
    Image {
        lines: body.split(|&b| b == b'\n').collect(),
        eol,
    }
}

fn trim_ws(l: &[u8]) -> &[u8] {
    let mut end = l.len();
    while end > 0 && matches!(l[end - 1], b' ' | b'\t' | b'\r' | 0x0b | 0x0c) {
        end -= 1;
    }
    &l[..end]
}

fn same(a: &[u8], b: &[u8], ws: bool) -> bool {
    if ws {
        trim_ws(a) == trim_ws(b)
    } else {
        a == b
    }
}

fn matches_at(img: &Image<'_>, at: usize, want: &[&[u8]], ws: bool) -> bool {
    at + want.len() <= img.lines.len()
        && want
            .iter()
            .enumerate()
            .all(|(k, w)| same(img.lines[at + k], w, ws))
}

/// Where a hunk goes: first file line of the trimmed preimage, context lines
/// dropped at each end, and whether whitespace was ignored.
struct Placement {
    at: usize,
    lead: usize,
    trail: usize,
    ws: bool,
}

fn describe(idx: usize, h: &Hunk) -> String {
    format!(
        "hunk #{} ({}, patch line {})",
        idx + 1,
        h.header().trim_end(),
        h.line_no
    )
}

/// Applies `hunks` to `content`; the error names the failing hunk.
pub(crate) fn apply_hunks(content: &[u8], hunks: &[Hunk]) -> Result<Vec<u8>, String> {
    let img = split(content);
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(img.lines.len() + 16);
    let mut cursor = 0usize;
    // Where hunks were found relative to their headers; i128 so absurd
    // header numbers cannot overflow.
    let mut offset: i128 = 0;
    let mut eol = img.eol;
    for (idx, h) in hunks.iter().enumerate() {
        let p =
            place(&img, h, cursor, offset).map_err(|why| format!("{}: {why}", describe(idx, h)))?;
        let body = trimmed_body(&h.lines, p.lead, p.trail);
        out.extend(img.lines[cursor..p.at].iter().map(|l| l.to_vec()));
        let add_cr = p.ws && wants_cr(&img, p.at, body);
        let mut k = p.at;
        for l in body {
            match l.kind {
                LineKind::Context => {
                    out.push(img.lines[k].to_vec());
                    k += 1;
                }
                LineKind::Remove => k += 1,
                LineKind::Add => {
                    let mut t = l.text.as_bytes().to_vec();
                    if add_cr {
                        t.push(b'\r');
                    }
                    out.push(t);
                }
            }
        }
        if k == img.lines.len() && p.trail == 0 {
            // The hunk reaches the end of the file, so its last postimage
            // line decides the final newline.
            eol = !h
                .lines
                .iter()
                .rev()
                .find(|l| l.kind != LineKind::Remove)
                .is_some_and(|l| l.no_eol);
        }
        offset = p.at as i128 - p.lead as i128 - (h.old_start as i128 - 1);
        cursor = k;
    }
    out.extend(img.lines[cursor..].iter().map(|l| l.to_vec()));
    let mut bytes = out.join(&b"\n"[..]);
    if eol && !out.is_empty() {
        bytes.push(b'\n');
    }
    Ok(bytes)
}

/// The hunk body without `lead` leading and `trail` trailing context lines.
fn trimmed_body(lines: &[HunkLine], lead: usize, trail: usize) -> &[HunkLine] {
    &lines[lead..lines.len() - trail]
}

/// A CRLF file patched by an LF patch (found only by ignoring whitespace):
/// give added lines the file's CR so line endings stay uniform.
fn wants_cr(img: &Image<'_>, at: usize, body: &[HunkLine]) -> bool {
    let n = body.iter().filter(|l| l.kind != LineKind::Add).count();
    let file = &img.lines[at..(at + n).min(img.lines.len())];
    !file.is_empty()
        && file.iter().all(|l| l.ends_with(b"\r"))
        && !body.iter().any(|l| l.text.ends_with('\r'))
}

fn place(img: &Image<'_>, h: &Hunk, cursor: usize, offset: i128) -> Result<Placement, String> {
    let pre: Vec<&[u8]> = pick(&h.lines, LineKind::Add);
    let post: Vec<&[u8]> = pick(&h.lines, LineKind::Remove);
    if pre.is_empty() {
        // Pure insertion with no context (new file, or `diff -U0`): the
        // header's line is all there is to go on.
        let at = h.old_start.min(img.lines.len());
        if at < cursor {
            return Err("overlaps the previous hunk".into());
        }
        if !img.lines.is_empty() && matches_at(img, at, &post, false) {
            return Err("already applied".into());
        }
        return Ok(Placement {
            at,
            lead: 0,
            trail: 0,
            ws: false,
        });
    }
    let lead_ctx = h
        .lines
        .iter()
        .take_while(|l| l.kind == LineKind::Context)
        .count();
    let trail_ctx = if lead_ctx == h.lines.len() {
        0
    } else {
        h.lines
            .iter()
            .rev()
            .take_while(|l| l.kind == LineKind::Context)
            .count()
    };
    let has_change = h.lines.iter().any(|l| l.kind != LineKind::Context);
    let expected = usize::try_from((h.old_start as i128 - 1 + offset).max(0)).unwrap_or(usize::MAX);
    let mut tried: Vec<(usize, usize)> = Vec::new();
    for fuzz in 0..=2usize {
        let lead = fuzz.min(lead_ctx);
        let trail = fuzz.min(trail_ctx);
        if tried.contains(&(lead, trail)) {
            continue;
        }
        tried.push((lead, trail));
        let want = &pre[lead..pre.len() - trail];
        // Keep at least one context line around a pure insertion, else it
        // would match anywhere.
        let removes = h.lines.iter().any(|l| l.kind == LineKind::Remove);
        if want.is_empty() || (!removes && lead == lead_ctx && trail == trail_ctx && fuzz > 0) {
            continue;
        }
        for ws in [false, true] {
            let exp = expected.saturating_add(lead);
            let last = img.lines.len().saturating_sub(want.len());
            let best = (cursor..=last)
                .filter(|&at| matches_at(img, at, want, ws))
                .min_by_key(|&at| at.abs_diff(exp));
            if let Some(at) = best {
                let post_t = &post[lead..post.len() - trail];
                if has_change && matches_at(img, at, post_t, ws) && post_t.len() > want.len() {
                    return Err("already applied (its added lines are already there)".into());
                }
                return Ok(Placement {
                    at,
                    lead,
                    trail,
                    ws,
                });
            }
        }
    }
    let last = img.lines.len().saturating_sub(post.len());
    if has_change && !post.is_empty() && (cursor..=last).any(|at| matches_at(img, at, &post, true))
    {
        return Err("already applied (its result is already in the file)".into());
    }
    Err("context and removed lines not found".into())
}

/// Lines of a hunk without those of kind `skip`: the preimage skips added
/// lines, the postimage skips removed ones.
fn pick(lines: &[HunkLine], skip: LineKind) -> Vec<&[u8]> {
    lines
        .iter()
        .filter(|l| l.kind != skip)
        .map(|l| l.text.as_bytes())
        .collect()
}
