//! Rewrites a parsed patch as a canonical git diff that libgit2 accepts.
//!
//! What changes between input and output (see `parse.rs` for the reading):
//! - prose and ``` fences around or after the diff are gone;
//! - CRLF-mangled transport is undone (only when the headers themselves carry
//!   CR, so CRLF file content survives);
//! - every section has a `diff --git a/X b/Y` line, `a/` `b/` prefixes, and
//!   `new file mode`/`deleted file mode` when a side is `/dev/null`, because
//!   libgit2 only parses git-style headers;
//! - hunk headers are recounted from their bodies. Models routinely miscount
//!   `@@ -a,b +c,d @@` (the same repair aider, SWE-agent and others apply);
//!   the new start is derived from the old start, as git apply reads it;
//! - empty body lines become ` ` context lines and the text ends in `\n`.

use super::hunks::LineKind;
use super::parse::Section;
use super::paths::quote;

/// Renders sections as a git diff.
pub(crate) fn emit(sections: &[Section]) -> String {
    let mut out = String::new();
    for s in sections {
        emit_section(s, &mut out);
    }
    out
}

fn emit_section(s: &Section, out: &mut String) {
    let old = s
        .old_path
        .as_deref()
        .or(s.new_path.as_deref())
        .unwrap_or("");
    let new = s
        .new_path
        .as_deref()
        .or(s.old_path.as_deref())
        .unwrap_or("");
    out.push_str(&format!(
        "diff --git {} {}\n",
        quote(&format!("a/{old}")),
        quote(&format!("b/{new}"))
    ));
    for e in &s.ext {
        out.push_str(e);
        out.push('\n');
    }
    // libgit2 cannot parse git's own output for an empty new or deleted
    // file (the header ends at `index`); a `---`/`+++` pair fixes that.
    let empty_add_del = s.binary.is_none() && (s.is_added() || s.is_deleted());
    if !s.hunks.is_empty() || empty_add_del {
        let o = s
            .old_path
            .as_ref()
            .map_or_else(|| "/dev/null".to_string(), |p| quote(&format!("a/{p}")));
        let n = s
            .new_path
            .as_ref()
            .map_or_else(|| "/dev/null".to_string(), |p| quote(&format!("b/{p}")));
        out.push_str(&format!("--- {o}\n+++ {n}\n"));
    }
    for h in &s.hunks {
        out.push_str(&h.header());
        out.push('\n');
        for l in &h.lines {
            out.push(match l.kind {
                LineKind::Context => ' ',
                LineKind::Add => '+',
                LineKind::Remove => '-',
            });
            out.push_str(&l.text);
            out.push('\n');
            if l.no_eol {
                out.push_str("\\ No newline at end of file\n");
            }
        }
    }
    if let Some(b) = &s.binary {
        for l in b {
            out.push_str(l);
            out.push('\n');
        }
    }
}
