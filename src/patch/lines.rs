//! The numbered input lines that the section reader (`parse`) and the hunk
//! reader (`hunks`) both walk, and what both say of them: where a file
//! section starts, and the error for a malformed line.

use super::PatchError;

/// One input line with its 1-based number in the raw text, for error messages.
#[derive(Debug, Clone)]
pub(crate) struct SrcLine {
    pub no: usize,
    pub text: String,
}

pub(super) fn malformed(line: usize, reason: impl Into<String>) -> PatchError {
    PatchError::Malformed {
        line,
        reason: reason.into(),
    }
}

/// Whether a file section starts at line `i`: a `diff --git` header, or a
/// plain `---`/`+++` pair.
pub(super) fn is_section_start(lines: &[SrcLine], i: usize) -> bool {
    let t = &lines[i].text;
    t.starts_with("diff --git ")
        || (t.starts_with("--- ") && lines.get(i + 1).is_some_and(|n| n.text.starts_with("+++ ")))
}
