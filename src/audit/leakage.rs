//! Issue-text leakage: the candidate's added lines are in the issue text.
//!
//! SWE-Bench+ found that a third of "resolved" patches copied a fix the issue
//! or its comments already spelled out. This check takes the code in the
//! problem statement and hints (fenced ``` / ~~~ blocks, indented blocks,
//! `>>>` sessions, inline `code`, and bare lines, since many issues paste
//! code unformatted), normalises lines (whitespace removed, trailing comment
//! cut, prompts and diff prefixes stripped; blank, comment-only and trivial
//! lines such as `else:`, `return`, `pass`, imports and brackets dropped) and
//! matches the candidate's normalised added lines against them: exactly, or
//! by character similarity ([`similar`]) of at least [`LINE_SIMILARITY`].
//!
//! Scores: `share` = matched / non-trivial added lines of code files (docs
//! and changelogs are not scored), and `longest_run` = the longest stretch of
//! consecutive candidate lines found consecutively in the issue, from a
//! [`similar`] line diff of the two sequences. The thresholds below were
//! chosen from the gold patches of all 300 SWE-bench Lite instances; see
//! docs/audit.md for the distribution behind them.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use similar::{capture_diff_slices, Algorithm, DiffOp, TextDiff};

use super::diff::{self, FileDiff};
use super::{excerpt, Evidence, Reason, ReasonKind};
use crate::dataset::Instance;

/// Two normalised lines match when their character similarity
/// (`2·matches / (len_a + len_b)`) is at least this.
pub const LINE_SIMILARITY: f64 = 0.85;
/// Lines shorter than this (normalised) match only exactly.
pub const FUZZY_MIN_LEN: usize = 12;

/// A candidate is flagged when at least this share of its scored lines...
pub const CANDIDATE_SHARE: f64 = 0.5;
/// ...and at least this many lines are found in the issue text,
pub const CANDIDATE_MIN_MATCHED: usize = 2;
/// or when a run of this many consecutive lines is.
pub const CANDIDATE_RUN: usize = 4;

/// An instance "leaks its solution" when its gold patch scores at least
/// this share...
pub const GOLD_SHARE: f64 = 0.5;
/// ...with at least this many matched lines, or has a run of
/// [`GOLD_RUN`] lines.
pub const GOLD_MIN_MATCHED: usize = 2;
pub const GOLD_RUN: usize = 4;

/// Where in the issue text a fragment was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// In a ``` or ~~~ (or Trac `{{{`) block.
    Fenced,
    /// An indented block or a `>>>` session line.
    Indented,
    /// An inline `code` span.
    Inline,
    /// A line with no markup.
    Bare,
}

/// Which text a fragment comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    ProblemStatement,
    Hints,
}

/// A normalised code fragment of the issue text.
#[derive(Debug, Clone)]
pub struct IssueLine {
    pub key: String,
    pub origin: Origin,
    pub part: Part,
    /// 1-based line in its part.
    pub line: usize,
}

/// How much of a patch is in the issue text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LeakScore {
    /// Non-trivial added lines of code files.
    pub total: usize,
    /// Of those, found in the issue text.
    pub matched: usize,
    /// Of the matched, found verbatim (after normalisation).
    pub exact: usize,
    /// matched / total (0 when total is 0).
    pub share: f64,
    /// Longest run of consecutive candidate lines found consecutively.
    pub longest_run: usize,
}

impl LeakScore {
    /// The candidate rule.
    pub fn flags_candidate(&self) -> bool {
        (self.matched >= CANDIDATE_MIN_MATCHED && self.share >= CANDIDATE_SHARE)
            || self.longest_run >= CANDIDATE_RUN
    }

    /// The instance rule, applied to the gold patch.
    pub fn flags_gold(&self) -> bool {
        (self.matched >= GOLD_MIN_MATCHED && self.share >= GOLD_SHARE)
            || self.longest_run >= GOLD_RUN
    }
}

/// One matched candidate line.
#[derive(Debug, Clone)]
struct LineMatch {
    file: usize,
    new_no: usize,
    text: String,
    similarity: f64,
    issue: usize,
}

/// A scored patch with the matches behind the score.
struct Scored {
    score: LeakScore,
    matches: Vec<LineMatch>,
    /// Candidate texts of the longest run.
    run: Vec<String>,
}

/// Score of `patch` against an issue's problem statement and hints.
pub fn score(problem_statement: &str, hints: &str, patch: &str) -> LeakScore {
    let issue = issue_lines(problem_statement, hints);
    score_files(&issue, &diff::read(patch)).score
}

/// The candidate check.
pub(crate) fn check_candidate(instance: &Instance, files: &[FileDiff]) -> Option<Reason> {
    let issue = issue_lines(&instance.problem_statement, &instance.hints_text);
    let s = score_files(&issue, files);
    if !s.score.flags_candidate() {
        return None;
    }
    Some(reason(
        ReasonKind::IssueLeakage,
        format!(
            "{:.0}% of the candidate's {} scored added lines ({} lines, {} verbatim) are in the issue text; longest run {} lines",
            s.score.share * 100.0,
            s.score.total,
            s.score.matched,
            s.score.exact,
            s.score.longest_run
        ),
        &s,
        files,
        &issue,
    ))
}

/// The instance check: the gold patch measured the same way.
pub(crate) fn check_instance(instance: &Instance) -> Option<Reason> {
    if instance.patch.trim().is_empty() {
        return None;
    }
    let issue = issue_lines(&instance.problem_statement, &instance.hints_text);
    let files = diff::read(&instance.patch);
    let s = score_files(&issue, &files);
    if !s.score.flags_gold() {
        return None;
    }
    Some(reason(
        ReasonKind::SolutionInIssue,
        format!(
            "the instance leaks its solution: {:.0}% of the gold patch's {} scored added lines ({} lines) are in the issue text; longest run {} lines",
            s.score.share * 100.0,
            s.score.total,
            s.score.matched,
            s.score.longest_run
        ),
        &s,
        &files,
        &issue,
    ))
}

/// Whether an instance's gold patch is largely in its issue text, with the
/// score (for dataset lints and reports).
pub fn solution_in_issue(instance: &Instance) -> (bool, LeakScore) {
    let s = score(
        &instance.problem_statement,
        &instance.hints_text,
        &instance.patch,
    );
    (s.flags_gold(), s)
}

fn reason(
    kind: ReasonKind,
    message: String,
    s: &Scored,
    files: &[FileDiff],
    issue: &[IssueLine],
) -> Reason {
    let mut evidence = vec![Evidence {
        score: Some(round3(s.score.share)),
        excerpt: Some(format!(
            "longest run ({} lines):\n{}",
            s.score.longest_run,
            excerpt(s.run.iter().map(String::as_str), 12)
        )),
        ..Evidence::default()
    }];
    for (fi, f) in files.iter().enumerate() {
        let ms: Vec<&LineMatch> = s.matches.iter().filter(|m| m.file == fi).collect();
        if ms.is_empty() {
            continue;
        }
        let shown: Vec<String> = ms
            .iter()
            .map(|m| {
                let il = &issue[m.issue];
                let part = match il.part {
                    Part::ProblemStatement => "problem statement",
                    Part::Hints => "hints",
                };
                format!(
                    "{}  <= {part} line {} ({:?}, {:.2})",
                    m.text.trim(),
                    il.line,
                    il.origin,
                    m.similarity
                )
            })
            .collect();
        let mean = ms.iter().map(|m| m.similarity).sum::<f64>() / ms.len() as f64;
        evidence.push(Evidence {
            file: Some(f.path.clone()),
            lines: ms.iter().map(|m| m.new_no).collect(),
            score: Some(round3(mean)),
            excerpt: Some(excerpt(shown.iter().map(String::as_str), 12)),
            ..Evidence::default()
        });
    }
    Reason {
        kind,
        message,
        evidence,
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Files whose lines are prose, not code: not scored.
fn is_doc_file(path: &str) -> bool {
    let name = diff::basename(path).to_ascii_lowercase();
    let doc_ext = [".rst", ".txt", ".md", ".markdown", ".adoc", ".po"]
        .iter()
        .any(|e| name.ends_with(e));
    let doc_dir = path
        .split('/')
        .rev()
        .skip(1)
        .any(|d| matches!(d, "doc" | "docs" | "changelog" | "changes" | "news"));
    let doc_name = ["changes", "changelog", "authors", "news", "history"]
        .iter()
        .any(|n| name == *n || name.starts_with(&format!("{n}.")));
    doc_ext || doc_dir || doc_name
}

static INLINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"``?([^`]+?)``?").expect("valid regex"));
static IMPORT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(from\S+import|import)\S*$").expect("valid regex"));

/// Lines that say nothing about a solution once whitespace is gone.
const TRIVIAL: [&str; 30] = [
    "else:",
    "try:",
    "finally:",
    "pass",
    "break",
    "continue",
    "return",
    "returnNone",
    "returnTrue",
    "returnFalse",
    "returnself",
    "returnresult",
    "raise",
    "yield",
    "None",
    "True",
    "False",
    "self",
    "except:",
    "exceptException:",
    "exceptExceptionase:",
    "@property",
    "@classmethod",
    "@staticmethod",
    "def__init__(self):",
    "super().__init__()",
    "else{",
    "}else{",
    "end",
    "...",
];

/// Cuts a `#` comment that is outside quotes.
fn cut_comment(s: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match quote {
            Some(q) => {
                if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => {
                if c == '#' {
                    return &s[..i];
                }
                if c == '\'' || c == '"' {
                    quote = Some(c);
                }
            }
        }
    }
    s
}

/// The comparison key of a line, or None for a blank, comment-only or
/// trivial line.
pub fn normalise(line: &str) -> Option<String> {
    let t = line.trim();
    if t.starts_with('#') || t.starts_with("//") {
        return None;
    }
    let t = cut_comment(t);
    let key: String = t.chars().filter(|c| !c.is_whitespace()).collect();
    if key.chars().count() < 5 || !key.chars().any(char::is_alphanumeric) {
        return None;
    }
    if TRIVIAL.contains(&key.as_str()) || IMPORT.is_match(&key) {
        return None;
    }
    Some(key)
}

/// The code fragments of an issue: problem statement, then hints.
pub fn issue_lines(problem_statement: &str, hints: &str) -> Vec<IssueLine> {
    let mut out = Vec::new();
    collect(problem_statement, Part::ProblemStatement, &mut out);
    collect(hints, Part::Hints, &mut out);
    out
}

fn collect(text: &str, part: Part, out: &mut Vec<IssueLine>) {
    let mut fence: Option<&str> = None;
    let mut push = |raw: &str, origin: Origin, line: usize, out: &mut Vec<IssueLine>| {
        let t = raw.trim();
        // Sessions and suggested diffs: keep the code after the prompt or
        // the +/- (both forms are kept for diff-like lines).
        let mut variants = vec![t];
        for p in [">>> ", "... ", "$ "] {
            if let Some(rest) = t.strip_prefix(p) {
                variants.push(rest);
            }
        }
        if let Some(rest) = t.strip_prefix('+').or_else(|| t.strip_prefix('-')) {
            if !rest.starts_with(['+', '-']) {
                variants.push(rest);
            }
        }
        let mut seen: Vec<String> = Vec::new();
        for v in variants {
            if let Some(key) = normalise(v) {
                if !seen.contains(&key) {
                    seen.push(key.clone());
                    out.push(IssueLine {
                        key,
                        origin,
                        part,
                        line,
                    });
                }
            }
        }
    };
    for (i, raw) in text.lines().enumerate() {
        let no = i + 1;
        let t = raw.trim_start();
        if let Some(f) = fence {
            if t.starts_with(f) || (f == "{{{" && t.starts_with("}}}")) {
                fence = None;
            } else {
                push(raw, Origin::Fenced, no, out);
            }
            continue;
        }
        if t.starts_with("```") {
            fence = Some("```");
            continue;
        }
        if t.starts_with("~~~") {
            fence = Some("~~~");
            continue;
        }
        if t.starts_with("{{{") {
            fence = Some("{{{");
            continue;
        }
        let origin = if raw.starts_with("    ") || raw.starts_with('\t') || t.starts_with(">>> ")
        {
            Origin::Indented
        } else {
            Origin::Bare
        };
        push(raw, origin, no, out);
        if origin == Origin::Bare {
            for c in INLINE.captures_iter(raw) {
                push(&c[1], Origin::Inline, no, out);
            }
        }
    }
}

/// Character histogram for the similarity upper bound.
fn histogram(s: &str) -> [u16; 128] {
    let mut h = [0u16; 128];
    for c in s.chars() {
        let b = (c as u32).min(127) as usize;
        h[b] = h[b].saturating_add(1);
    }
    h
}

/// `2·Σ min(count_a, count_b) / (len_a + len_b)`: an upper bound of the
/// diff ratio, which counts only matches in order.
fn ratio_bound(a: &[u16; 128], la: usize, b: &[u16; 128], lb: usize) -> f64 {
    let common: usize = a.iter().zip(b).map(|(x, y)| (*x.min(y)) as usize).sum();
    2.0 * common as f64 / (la + lb) as f64
}

/// Lines longer than this are compared exactly only.
const FUZZY_MAX_LEN: usize = 400;

fn score_files(issue: &[IssueLine], files: &[FileDiff]) -> Scored {
    // Unique issue keys, first occurrence kept for evidence.
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, l) in issue.iter().enumerate() {
        first.entry(l.key.as_str()).or_insert(i);
    }
    let fuzzy_pool: Vec<(usize, usize, [u16; 128])> = first
        .values()
        .map(|&i| (i, issue[i].key.chars().count(), histogram(&issue[i].key)))
        .filter(|(_, n, _)| *n >= FUZZY_MIN_LEN && *n <= FUZZY_MAX_LEN)
        .collect();

    let mut total = 0;
    let mut matches = Vec::new();
    // The candidate as a sequence of keys; a fuzzy match takes the issue
    // line's key so the line diff sees it as equal.
    let mut seq: Vec<&str> = Vec::new();
    let mut seq_text: Vec<&str> = Vec::new();
    for (fi, f) in files.iter().enumerate() {
        if is_doc_file(&f.path) {
            continue;
        }
        for l in f.added() {
            let Some(key) = normalise(&l.text) else {
                continue;
            };
            total += 1;
            let n = key.chars().count();
            let mut best: Option<(usize, f64)> = first.get(key.as_str()).map(|&i| (i, 1.0));
            if best.is_none() && (FUZZY_MIN_LEN..=FUZZY_MAX_LEN).contains(&n) {
                let h = histogram(&key);
                for (i, m, hi) in &fuzzy_pool {
                    // The length ratio alone bounds the similarity.
                    if 2.0 * n.min(*m) as f64 / (n + m) as f64 < LINE_SIMILARITY
                        || ratio_bound(&h, n, hi, *m) < LINE_SIMILARITY
                    {
                        continue;
                    }
                    let r = TextDiff::from_chars(key.as_str(), issue[*i].key.as_str()).ratio()
                        as f64;
                    if r >= LINE_SIMILARITY && best.is_none_or(|(_, b)| r > b) {
                        best = Some((*i, r));
                    }
                }
            }
            match best {
                Some((i, sim)) => {
                    matches.push(LineMatch {
                        file: fi,
                        new_no: l.new_no,
                        text: l.text.clone(),
                        similarity: sim,
                        issue: i,
                    });
                    seq.push(issue[i].key.as_str());
                }
                None => seq.push(""),
            }
            seq_text.push(l.text.as_str());
        }
    }
    // Unmatched candidate lines must never equal an issue line.
    let issue_seq: Vec<&str> = issue.iter().map(|l| l.key.as_str()).collect();
    let cand_seq: Vec<Option<&str>> = seq
        .iter()
        .map(|k| (!k.is_empty()).then_some(*k))
        .collect();
    let issue_opt: Vec<Option<&str>> = issue_seq.iter().map(|k| Some(*k)).collect();
    let mut longest = (0, 0);
    if !matches.is_empty() {
        for op in capture_diff_slices(Algorithm::Myers, &issue_opt, &cand_seq) {
            if let DiffOp::Equal { new_index, len, .. } = op {
                if len > longest.1 {
                    longest = (new_index, len);
                }
            }
        }
    }
    let matched = matches.len();
    let exact = matches.iter().filter(|m| m.similarity >= 1.0).count();
    Scored {
        score: LeakScore {
            total,
            matched,
            exact,
            share: if total == 0 {
                0.0
            } else {
                matched as f64 / total as f64
            },
            longest_run: longest.1,
        },
        matches,
        run: seq_text[longest.0..longest.0 + longest.1]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation() {
        assert_eq!(normalise("    x = foo(a, b)  # fix"), Some("x=foo(a,b)".into()));
        assert_eq!(normalise("s = '#not a comment'"), Some("s='#notacomment'".into()));
        for t in ["", "   # only", "else:", "return", "pass", ")", "]),", "import re", "from a.b import c"] {
            assert_eq!(normalise(t), None, "{t:?}");
        }
    }

    #[test]
    fn fragments_of_an_issue() {
        let text = "Title\nUse `foo.bar(x=1)` here.\n```python\n>>> frob(1, 2)\n+    return value.strip()\n```\n    indented_call(arg)\n";
        let lines = issue_lines(text, "");
        let keys: Vec<(&str, Origin)> = lines.iter().map(|l| (l.key.as_str(), l.origin)).collect();
        assert!(keys.contains(&("foo.bar(x=1)", Origin::Inline)), "{keys:?}");
        assert!(keys.contains(&("frob(1,2)", Origin::Fenced)), "{keys:?}");
        assert!(keys.contains(&("returnvalue.strip()", Origin::Fenced)), "{keys:?}");
        assert!(keys.contains(&("indented_call(arg)", Origin::Indented)), "{keys:?}");
    }

    #[test]
    fn scores_share_and_run() {
        let issue = "Fix:\n```\nif value is None:\n    value = default_value()\nresult = compute(value)\n```\n";
        let patch = "--- a/m.py\n+++ b/m.py\n@@ -1 +1,5 @@\n a\n+if value is None:\n+    value = default_value()\n+result = compute(value)\n+log_the_result(result, level=3)\n";
        let s = score(issue, "", patch);
        assert_eq!((s.total, s.matched, s.longest_run), (4, 3, 3));
        assert!(s.flags_candidate());
        let s = score("Nothing here", "", patch);
        assert_eq!(s.matched, 0);
        assert!(!s.flags_candidate());
    }
}
