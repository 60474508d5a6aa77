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

pub mod fragments;

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use similar::{capture_diff_slices, Algorithm, DiffOp, TextDiff};

use super::diff::{self, DLine, FileDiff, Kind};
use super::text::prose_lines;
use super::{excerpt, Evidence, Reason, ReasonKind};
use crate::dataset::Instance;
use fragments::{bracket_delta, issue_lines, normalise, IssueLine, Part, MAX_JOIN};

/// Two normalised lines match when their character similarity
/// (`2·matches / (len_a + len_b)`) is at least this.
pub const LINE_SIMILARITY: f64 = 0.85;
/// Lines shorter than this (normalised) match only exactly.
pub const FUZZY_MIN_LEN: usize = 12;

/// A candidate is flagged when at least this share of its scored lines...
pub const CANDIDATE_SHARE: f64 = 0.34;
/// ...and at least this many lines are found in the issue text,
pub const CANDIDATE_MIN_MATCHED: usize = 1;
/// or when a run of this many consecutive lines is.
pub const CANDIDATE_RUN: usize = 4;

/// An instance "leaks its solution" when its gold patch scores at least
/// this share...
pub const GOLD_SHARE: f64 = 0.34;
/// ...with at least this many matched lines, or has a run of
/// [`GOLD_RUN`] lines.
pub const GOLD_MIN_MATCHED: usize = 1;
pub const GOLD_RUN: usize = 4;

/// How much of a patch is in the issue text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LeakScore {
    /// Non-trivial added lines of code files.
    pub total: usize,
    /// Of those, found in the issue text.
    pub matched: usize,
    /// Of the matched, found verbatim (after normalisation), as a line or
    /// inside one.
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
    how: How,
}

impl LineMatch {
    /// Line `l` of file `file`, found as issue line `issue` per `how`.
    fn new(file: usize, l: &DLine, (issue, similarity, how): (usize, f64, How)) -> LineMatch {
        LineMatch {
            file,
            new_no: l.new_no,
            text: l.text.clone(),
            similarity,
            issue,
            how,
        }
    }
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
    check(
        instance,
        files,
        ReasonKind::IssueLeakage,
        LeakScore::flags_candidate,
        |s| {
            format!(
            "{:.0}% of the candidate's {} scored added lines ({} lines, {} verbatim) are in the issue text; longest run {} lines",
            s.share * 100.0,
            s.total,
            s.matched,
            s.exact,
            s.longest_run
        )
        },
    )
}

/// The instance check: the gold patch measured the same way.
pub(crate) fn check_instance(instance: &Instance) -> Option<Reason> {
    if instance.patch.trim().is_empty() {
        return None;
    }
    check(
        instance,
        &diff::read(&instance.patch),
        ReasonKind::SolutionInIssue,
        LeakScore::flags_gold,
        |s| {
            format!(
            "the instance leaks its solution: {:.0}% of the gold patch's {} scored added lines ({} lines) are in the issue text; longest run {} lines",
            s.share * 100.0,
            s.total,
            s.matched,
            s.longest_run
        )
        },
    )
}

/// `files` scored against the instance's issue text: a reason of `kind`,
/// said by `message`, when `flags` holds for the score.
fn check(
    instance: &Instance,
    files: &[FileDiff],
    kind: ReasonKind,
    flags: fn(&LeakScore) -> bool,
    message: impl FnOnce(&LeakScore) -> String,
) -> Option<Reason> {
    let issue = issue_lines(&instance.problem_statement, &instance.hints_text);
    let s = score_files(&issue, files);
    if !flags(&s.score) {
        return None;
    }
    Some(reason(kind, message(&s.score), &s, files, &issue))
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
                    "{}  <= {part} line {} ({:?}, {:?}, {:.2})",
                    m.text.trim(),
                    il.line,
                    il.origin,
                    m.how,
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

/// Candidate keys at least this long (normalised) also match when they are
/// contained in an issue line (a fix quoted inside a sentence).
pub const CONTAIN_MIN_LEN: usize = 24;

/// How a candidate line matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    Exact,
    Contained,
    Similar,
}

/// The issue lines a patch is matched against, with lookup helpers.
struct Matcher<'a> {
    issue: &'a [IssueLine],
    /// Unique usable key -> first issue index.
    first: HashMap<&'a str, usize>,
    /// (issue index, length, histogram) of keys long enough for fuzzy use.
    fuzzy: Vec<(usize, usize, [u16; 128])>,
}

impl<'a> Matcher<'a> {
    fn new(issue: &'a [IssueLine], existing: &HashSet<String>) -> Matcher<'a> {
        let mut first: HashMap<&str, usize> = HashMap::new();
        for (i, l) in issue.iter().enumerate() {
            if !existing.contains(&l.key) {
                first.entry(l.key.as_str()).or_insert(i);
            }
        }
        let mut fuzzy: Vec<(usize, usize, [u16; 128])> = first
            .values()
            .map(|&i| (i, issue[i].key.chars().count(), histogram(&issue[i].key)))
            .filter(|(_, n, _)| *n >= FUZZY_MIN_LEN && *n <= FUZZY_MAX_LEN)
            .collect();
        // Deterministic evidence whatever the hash order.
        fuzzy.sort_by_key(|(i, _, _)| *i);
        Matcher {
            issue,
            first,
            fuzzy,
        }
    }

    fn find(&self, key: &str) -> Option<(usize, f64, How)> {
        if let Some(&i) = self.first.get(key) {
            return Some((i, 1.0, How::Exact));
        }
        let n = key.chars().count();
        if n >= CONTAIN_MIN_LEN {
            let mut hits: Vec<usize> = self
                .first
                .iter()
                .filter(|(k, _)| k.len() > key.len() && k.contains(key))
                .map(|(_, &i)| i)
                .collect();
            hits.sort_unstable();
            if let Some(&i) = hits.first() {
                return Some((i, 1.0, How::Contained));
            }
        }
        if !(FUZZY_MIN_LEN..=FUZZY_MAX_LEN).contains(&n) {
            return None;
        }
        let h = histogram(key);
        let mut best: Option<(usize, f64, How)> = None;
        for (i, m, hi) in &self.fuzzy {
            // The length ratio alone bounds the similarity.
            let len_bound = 2.0 * n.min(*m) as f64 / (n + m) as f64;
            if len_bound < LINE_SIMILARITY || ratio_bound(&h, n, hi, *m) < LINE_SIMILARITY {
                continue;
            }
            let r = TextDiff::from_chars(key, self.issue[*i].key.as_str()).ratio() as f64;
            if r >= LINE_SIMILARITY && best.is_none_or(|(_, b, _)| r > b) {
                best = Some((*i, r, How::Similar));
            }
        }
        best
    }
}

/// A stretch of added lines matched as one: a logical line (a statement
/// continued over brackets) or a single line.
struct TextUnit<'a> {
    file: usize,
    /// Non-trivial lines with their keys.
    lines: Vec<(&'a DLine, String)>,
    /// Normalised text of the whole logical line.
    joined: Option<String>,
}

fn units_of<'a>(fi: usize, f: &'a FileDiff) -> Vec<TextUnit<'a>> {
    let prose = prose_lines(f);
    let mut out: Vec<TextUnit> = Vec::new();
    let mut group: Vec<&DLine> = Vec::new();
    let mut depth = 0;
    let close = |group: &mut Vec<&'a DLine>, out: &mut Vec<TextUnit<'a>>| {
        if group.is_empty() {
            return;
        }
        let lines: Vec<(&DLine, String)> = group
            .iter()
            .filter_map(|l| normalise(&l.text).map(|k| (*l, k)))
            .collect();
        let joined = (group.len() > 1)
            .then(|| {
                let text: Vec<&str> = group.iter().map(|l| l.text.as_str()).collect();
                normalise(&text.join(" "))
            })
            .flatten();
        if !lines.is_empty() {
            out.push(TextUnit {
                file: fi,
                lines,
                joined,
            });
        }
        group.clear();
    };
    for (li, l) in f.lines.iter().enumerate() {
        if l.kind != Kind::Add || prose[li] {
            continue;
        }
        let continues = group
            .last()
            .is_some_and(|p| p.hunk == l.hunk && p.new_no + 1 == l.new_no)
            && depth > 0
            && group.len() < MAX_JOIN;
        if !continues {
            close(&mut group, &mut out);
            depth = 0;
        }
        group.push(l);
        depth += bracket_delta(&l.text);
        if depth <= 0 {
            close(&mut group, &mut out);
            depth = 0;
        }
    }
    close(&mut group, &mut out);
    out
}

fn score_files(issue: &[IssueLine], files: &[FileDiff]) -> Scored {
    // Code the patch shows as already there (removed and context lines):
    // an issue quoting it (a traceback's buggy line, say) shows the problem,
    // not the fix, so those issue lines are not matched.
    let existing: HashSet<String> = files
        .iter()
        .flat_map(|f| f.lines.iter())
        .filter(|l| l.kind != Kind::Add)
        .filter_map(|l| normalise(&l.text))
        .collect();
    let matcher = Matcher::new(issue, &existing);

    let mut total = 0;
    let mut matches = Vec::new();
    // The candidate as a sequence of match units for the line diff: a
    // matched unit takes its issue line's key so the diff sees it as equal;
    // the weight is its number of scored lines.
    let mut seq: Vec<(Option<&str>, usize)> = Vec::new();
    let mut seq_text: Vec<Vec<&str>> = Vec::new();
    for (fi, f) in files.iter().enumerate() {
        if is_doc_file(&f.path) {
            continue;
        }
        for u in units_of(fi, f) {
            total += u.lines.len();
            let whole = u.joined.as_deref().and_then(|k| matcher.find(k));
            if let Some((i, sim, how)) = whole {
                for (l, _) in &u.lines {
                    matches.push(LineMatch::new(u.file, l, (i, sim, how)));
                }
                seq.push((Some(issue[i].key.as_str()), u.lines.len()));
                seq_text.push(u.lines.iter().map(|(l, _)| l.text.as_str()).collect());
                continue;
            }
            for (l, key) in &u.lines {
                match matcher.find(key) {
                    Some(found) => {
                        matches.push(LineMatch::new(u.file, l, found));
                        seq.push((Some(issue[found.0].key.as_str()), 1));
                    }
                    None => seq.push((None, 1)),
                }
                seq_text.push(vec![l.text.as_str()]);
            }
        }
    }
    // Keys for the line diff: unmatched candidate units and excluded issue
    // lines get unique tokens, so they never compare equal.
    let cand_seq: Vec<Result<&str, (u8, usize)>> = seq
        .iter()
        .enumerate()
        .map(|(i, (k, _))| k.ok_or((0, i)))
        .collect();
    let issue_seq: Vec<Result<&str, (u8, usize)>> = issue
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if existing.contains(&l.key) {
                Err((1, i))
            } else {
                Ok(l.key.as_str())
            }
        })
        .collect();
    // (first unit, units, lines) of the longest run.
    let mut longest = (0, 0, 0);
    if !matches.is_empty() {
        for op in capture_diff_slices(Algorithm::Myers, &issue_seq, &cand_seq) {
            if let DiffOp::Equal { new_index, len, .. } = op {
                let lines: usize = seq[new_index..new_index + len].iter().map(|(_, w)| w).sum();
                if lines > longest.2 {
                    longest = (new_index, len, lines);
                }
            }
        }
    }
    let matched = matches.len();
    let exact = matches.iter().filter(|m| m.how != How::Similar).count();
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
            longest_run: longest.2,
        },
        matches,
        run: seq_text[longest.0..longest.0 + longest.1]
            .iter()
            .flatten()
            .map(|s| s.to_string())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
