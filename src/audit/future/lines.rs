//! The candidate's side of the future-copy check: which changed lines are
//! scored, which of them an independent fix would not share ([`Beyond`]),
//! and which of them a commit's change explains.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;

use super::super::diff::{self, FileDiff, Kind};
use super::super::{tampering, text};
use super::walk::{self, Counts, Delta};
use super::{Beyond, Match, MIN_KEY, MIN_TEST_RUN};
use crate::dataset::Instance;

/// One changed line of a patch, as the check scores it.
#[derive(Debug, Clone)]
pub(super) struct Scored {
    pub path: String,
    /// New-file line (for a removal: where it sits), as in all evidence.
    pub line: usize,
    /// The hunk it is in, within its file (test blocks do not cross hunks).
    pub hunk: usize,
    pub removed: bool,
    pub key: String,
    pub text: String,
    pub beyond: Option<Beyond>,
}

pub(super) fn is_docs(path: &str) -> bool {
    let name = diff::basename(path).to_ascii_uppercase();
    let doc_ext = [".MD", ".RST", ".TXT", ".ADOC"];
    doc_ext.iter().any(|e| name.ends_with(e))
        || ["CHANGE", "NEWS", "HISTORY", "RELEASE"]
            .iter()
            .any(|p| name.starts_with(p))
        || path.split('/').any(|d| d == "doc" || d == "docs")
}

/// C-family languages, whose `#` starts a preprocessor line, not a comment.
fn slash_comments(path: &str) -> bool {
    let ext = path.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    [
        "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "go", "rs", "js", "jsx", "ts", "tsx", "mjs",
        "cjs", "java", "kt", "scala", "swift", "cs", "php", "vue", "dart",
    ]
    .contains(&ext)
}

pub(super) fn is_comment(path: &str, line: &str) -> bool {
    let t = line.trim_start();
    if slash_comments(path) {
        t.starts_with("//") || t.starts_with("/*") || t.starts_with('*')
    } else {
        t.starts_with('#') || t.starts_with("--") || t.starts_with("//")
    }
}

/// Gold's added keys per file (the patch and its tests).
pub(super) fn gold_keys(gold: &[FileDiff]) -> HashMap<&str, Counts> {
    let mut out: HashMap<&str, Counts> = HashMap::new();
    for f in gold {
        let e = out.entry(f.path.as_str()).or_default();
        for k in f.added().filter_map(|l| walk::key(&l.text)) {
            *e.entry(k).or_default() += 1;
        }
    }
    out
}

/// A docstring line that declares a parameter or a return value the numpydoc
/// way (`antialiased : bool`, `X : array-like, shape (n_samples,)`): the
/// signature and the repository's conventions dictate it, it is not prose.
pub(super) static PARAM_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*\*{0,2}[A-Za-z_]\w*(\s*,\s*\*{0,2}[A-Za-z_]\w*)*\s+:(\s.*)?$")
        .expect("valid regex")
});

/// An import line: anyone who needs the name writes it the same way.
pub(super) fn is_import(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("import ")
        || (t.starts_with("from ") && t.contains(" import "))
        || t.starts_with("#include")
}

/// The keys of the issue's lines (problem statement and hints), as they
/// are and with a console prompt or a diff sign cut: an agent reads these
/// at the base, so a line copied from them is not a copy of the future.
pub(super) fn issue_keys(inst: &Instance) -> HashSet<String> {
    let mut out = HashSet::new();
    for line in inst
        .problem_statement
        .lines()
        .chain(inst.hints_text.lines())
    {
        let t = line.trim();
        for cut in [t, t.trim_start_matches(['+', '-', '>', '.', '$', ' '])] {
            if let Some(k) = walk::key(cut) {
                out.insert(k);
            }
        }
    }
    out
}

/// For each line of `f`: whether it is an added line that rewrites an
/// existing one. In a change block (the changed lines between two context
/// lines of a hunk) that removes `r` non-blank lines, the first `r`
/// non-blank added lines replace them; the rest are new.
pub(super) fn rewrites(f: &FileDiff) -> Vec<bool> {
    let mut out = vec![false; f.lines.len()];
    let mut i = 0;
    while i < f.lines.len() {
        if f.lines[i].kind == Kind::Context {
            i += 1;
            continue;
        }
        let hunk = f.lines[i].hunk;
        let start = i;
        while i < f.lines.len() && f.lines[i].kind != Kind::Context && f.lines[i].hunk == hunk {
            i += 1;
        }
        let block = &f.lines[start..i];
        let mut left = block
            .iter()
            .filter(|l| l.kind == Kind::Remove && !l.text.trim().is_empty())
            .count();
        for (j, l) in block.iter().enumerate() {
            if left > 0 && l.kind == Kind::Add && !l.text.trim().is_empty() {
                out[start + j] = true;
                left -= 1;
            }
        }
    }
    out
}

/// The changed lines of `files` that the check scores, each with what
/// would make it evidence; `issue`: the issue's line keys.
pub(super) fn scored(
    files: &[FileDiff],
    gold: &HashMap<&str, Counts>,
    issue: &HashSet<String>,
) -> Vec<Scored> {
    let mut out = Vec::new();
    for f in files {
        let prose = text::prose_lines(f);
        let rewrite = rewrites(f);
        let (docs, test) = (
            is_docs(&f.path),
            tampering::test_path_kind(&f.path).is_some(),
        );
        for (i, l) in f.lines.iter().enumerate() {
            if l.kind == Kind::Context {
                continue;
            }
            let Some(key) = walk::key(&l.text) else {
                continue;
            };
            let removed = l.kind == Kind::Remove;
            let beyond = if removed
                || key.chars().count() < MIN_KEY
                || issue.contains(&key)
                || is_import(&l.text)
            {
                None
            } else if docs {
                Some(Beyond::Docs)
            } else if test {
                // An expected value rewritten is what the new behaviour
                // dictates to any fix that updates the test.
                (!rewrite[i]).then_some(Beyond::Test)
            } else if (text::is_python(&f.path) && prose[i]) || is_comment(&f.path, &l.text) {
                (!PARAM_LINE.is_match(&l.text)).then_some(Beyond::Prose)
            } else if !gold
                .get(f.path.as_str())
                .is_some_and(|g| g.contains_key(&key))
            {
                Some(Beyond::NotInGold)
            } else {
                None
            };
            out.push(Scored {
                path: f.path.clone(),
                line: l.new_no,
                hunk: l.hunk,
                removed,
                key,
                text: l.text.trim().to_string(),
                beyond,
            });
        }
    }
    out
}

/// The lines of `lines` that `deltas` explain, each commit line used once.
/// Test lines stay evidence only in a block of [`MIN_TEST_RUN`]: consecutive
/// scored lines of one hunk, all explained.
pub(super) fn explain(lines: &[Scored], deltas: &BTreeMap<String, Delta>) -> Vec<Match> {
    let mut left: HashMap<(&str, bool), HashMap<&str, usize>> = HashMap::new();
    for (p, d) in deltas {
        for (removed, counts) in [(false, &d.added), (true, &d.removed)] {
            let m = left.entry((p.as_str(), removed)).or_default();
            for (k, n) in counts {
                m.insert(k.as_str(), *n);
            }
        }
    }
    let mut hit = vec![false; lines.len()];
    for (i, l) in lines.iter().enumerate() {
        let Some(n) = left
            .get_mut(&(l.path.as_str(), l.removed))
            .and_then(|m| m.get_mut(l.key.as_str()))
            .filter(|n| **n > 0)
        else {
            continue;
        };
        *n -= 1;
        hit[i] = true;
    }
    // Blocks of explained lines; a test line counts in a block that has
    // MIN_TEST_RUN test lines.
    let mut test_block = vec![false; lines.len()];
    let mut i = 0;
    while i < lines.len() {
        if !hit[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i + 1 < lines.len()
            && hit[i + 1]
            && lines[i + 1].path == lines[start].path
            && lines[i + 1].hunk == lines[start].hunk
        {
            i += 1;
        }
        let tests = lines[start..=i]
            .iter()
            .filter(|l| l.beyond == Some(Beyond::Test))
            .count();
        test_block[start..=i].fill(tests >= MIN_TEST_RUN);
        i += 1;
    }
    lines
        .iter()
        .enumerate()
        .filter(|(i, _)| hit[*i])
        .map(|(i, l)| Match {
            path: l.path.clone(),
            line: l.line,
            removed: l.removed,
            text: l.text.clone(),
            beyond: l.beyond.filter(|b| *b != Beyond::Test || test_block[i]),
        })
        .collect()
}

pub(super) fn share(matched: usize, scored: usize) -> f64 {
    if scored == 0 {
        0.0
    } else {
        matched as f64 / scored as f64
    }
}
