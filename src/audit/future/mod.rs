//! Copies of the future: the candidate's changes reproduce a commit that
//! came after the base commit (the fix itself, or a later one).
//!
//! Agents run elsewhere, often in images whose repository still holds the
//! later history (SWE-bench #465, mini-swe-agent #787). patchgrade's mirror
//! has that history, so the check reads it: the commits after the base on
//! the first-parent history of every branch, the first [`MAX_TOUCHING`]
//! that touch one of the candidate's files, and for each how many of the
//! candidate's changed lines (added and removed, whitespace removed) its
//! change explains, alone or as the run of commits from the base up to it.
//!
//! Sharing lines with the fix is not enough: an honest fix of a one-line
//! bug is often byte for byte the gold line. A line counts as evidence only
//! when an independent fix would not share it ([`Beyond`]): prose (a
//! comment, a docstring, a docs or changelog line), a test line, or a line
//! the gold patch does not have (material of a later commit, or of the fix
//! commit outside gold). Removed lines are the base's text and never count,
//! and neither does what an independent fix shares with the fix without
//! reading it: a line the agent could read at the base (anywhere in the
//! base tree, or in the issue's text), an import, a numpydoc parameter
//! line (`name : type`, which the signature dictates), a test line that rewrites
//! an existing one (an expected value the new behaviour dictates), and test
//! lines outside a block of [`MIN_TEST_RUN`] reproduced together (a test's
//! name and one assertion are shared by any test of the same behaviour).
//! A candidate is flagged when one commit or run explains at least
//! [`MIN_SHARE`] of its lines and at least [`MIN_BEYOND`] of the matched
//! lines are such evidence, one of them free-worded (prose, docs or a test
//! block: code alone is what threading the same names through the same
//! functions gives).

mod lines;
mod walk;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use git2::{Oid, Repository};
use serde::Serialize;

use super::diff::FileDiff;
use super::history::iso8601;
use super::{excerpt, Evidence, Reason, ReasonKind};
use crate::dataset::Instance;
use lines::{explain, gold_keys, issue_keys, scored, share, Scored};
use walk::{in_base_tree, Bounds, Touching};

/// Commits that touch the candidate's files, oldest first, read per
/// candidate: the fix is nearly always among the first few after the base,
/// and an image built later still shows the later commits an agent would
/// read with `git log -p <file>`; 64 keeps the cost to a fraction of a
/// second on the largest mirrors here (django, sympy).
pub const MAX_TOUCHING: usize = 64;
/// First-parent commits read over every branch before the walk stops.
pub const MAX_WALKED: usize = 200_000;
/// Commits after the base looked at, oldest first, for those that touch
/// the files: a fix merged more than this many commits after its base is
/// not looked for (SWE-bench's bases are the fix's parent or the PR's
/// merge base, days to weeks before it).
pub const MAX_EXAMINED: usize = 2_000;
/// The share of the candidate's lines one commit (or run) must explain.
pub const MIN_SHARE: f64 = 0.5;
/// The matched lines beyond the minimal fix needed to flag.
pub const MIN_BEYOND: usize = 2;
/// A line shorter than this (whitespace removed) is no evidence: `return x`,
/// `# noqa`, `break;` are written the same way by anyone.
pub const MIN_KEY: usize = 12;
/// Test lines are evidence only in a block of at least this many reproduced
/// together (consecutive changed lines of one hunk, all matched): an
/// independent test of the same behaviour shares single lines with the
/// fix's (its name, from the issue or the file's naming; an assertion), a
/// copied test shares blocks.
pub const MIN_TEST_RUN: usize = 3;

/// Why the future-copy check could not run.
#[derive(Debug, thiserror::Error)]
pub enum FutureError {
    #[error("cannot open the mirror at {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: git2::Error,
    },
    #[error("base commit {0} is not in the mirror")]
    BaseMissing(String),
    #[error("git error: {0}")]
    Git(#[from] git2::Error),
}

/// Why a reproduced line is not what an independent fix would share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Beyond {
    /// A comment or docstring line: wording is chosen freely.
    Prose,
    /// A docs or changelog file's line.
    Docs,
    /// A test file's line (the fix's own tests are not shown to agents).
    Test,
    /// A code line the gold patch does not have: a later commit's, or the
    /// fix commit's outside gold.
    NotInGold,
}

impl Beyond {
    /// Wording the author chooses (prose, docs, a test block), unlike code,
    /// whose lines the names and the language dictate.
    pub fn free_worded(self) -> bool {
        self != Beyond::NotInGold
    }

    pub fn name(self) -> &'static str {
        match self {
            Beyond::Prose => "comment or docstring",
            Beyond::Docs => "docs or changelog",
            Beyond::Test => "test",
            Beyond::NotInGold => "not in gold",
        }
    }
}

/// A commit, as evidence names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommitRef {
    pub id: String,
    pub time: i64,
    pub summary: String,
}

impl CommitRef {
    fn of(t: &Touching) -> CommitRef {
        CommitRef {
            id: t.id.to_string(),
            time: t.time,
            summary: t.summary.clone(),
        }
    }

    fn short(&self) -> String {
        format!(
            "{} {}",
            &self.id[..12.min(self.id.len())],
            iso8601(self.time)
        )
    }
}

/// A candidate line some commit reproduces.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Match {
    pub path: String,
    pub line: usize,
    pub removed: bool,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beyond: Option<Beyond>,
}

/// How much of the candidate one commit, or the run from the base up to a
/// commit, explains.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// The commit; for a run, its last commit.
    pub commit: CommitRef,
    /// For a run: the commits touching the candidate's files in it (more
    /// than one); empty for a single commit.
    pub run: Vec<CommitRef>,
    /// The candidate's scored lines.
    pub scored: usize,
    pub matched: Vec<Match>,
    pub share: f64,
}

impl Explanation {
    /// Matched lines beyond the minimal fix.
    pub fn beyond(&self) -> usize {
        self.matched.iter().filter(|m| m.beyond.is_some()).count()
    }

    /// The rule: most of the candidate, and enough that no independent fix
    /// would share, some of it free-worded.
    pub fn flagged(&self) -> bool {
        self.share >= MIN_SHARE
            && self.beyond() >= MIN_BEYOND
            && self
                .matched
                .iter()
                .any(|m| m.beyond.is_some_and(Beyond::free_worded))
    }
}

/// What the check found in the mirror.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Scan {
    /// First-parent commits read.
    pub walked: usize,
    /// Commits after the base touching the candidate's files (at most
    /// [`MAX_TOUCHING`]).
    pub touching: usize,
    /// The candidate's scored lines.
    pub scored: usize,
    /// The first commit that explains the most of the gold patch (half of
    /// it at least): the fix as the mirror has it.
    pub fix: Option<CommitRef>,
    /// One per touching commit, then one per run of two or more.
    pub explanations: Vec<Explanation>,
}

impl Scan {
    /// The flagged explanation to report: a single commit before a run,
    /// then the most evidence, then the largest share, then the earliest.
    pub fn flagged(&self) -> Option<&Explanation> {
        let mut best: Option<&Explanation> = None;
        for e in self.explanations.iter().filter(|e| e.flagged()) {
            let rank = |x: &Explanation| (x.run.is_empty(), x.beyond(), x.share);
            best = match best {
                Some(b) if rank(b) >= rank(e) => Some(b),
                _ => Some(e),
            };
        }
        best
    }

    /// The explanation with the largest share (the first of equals), flagged
    /// or not: what the rule would see without its evidence condition.
    pub fn best_share(&self) -> Option<&Explanation> {
        let mut best: Option<&Explanation> = None;
        for e in &self.explanations {
            if best.is_none_or(|b| e.share > b.share) {
                best = Some(e);
            }
        }
        best
    }
}

/// Scans the mirror for commits after `base_commit` that explain the
/// candidate (`files`); `gold` is the instance's patch and test patch.
pub(crate) fn scan_repo(
    repo: &Repository,
    base_commit: &str,
    files: &[FileDiff],
    gold: &[FileDiff],
    issue: &HashSet<String>,
) -> Result<Scan, FutureError> {
    let base = Oid::from_str(base_commit)
        .ok()
        .and_then(|o| repo.find_commit(o).ok())
        .ok_or_else(|| FutureError::BaseMissing(base_commit.to_string()))?;
    let keys = gold_keys(gold);
    let mut lines = scored(files, &keys, issue);
    let gold_lines = scored(gold, &keys, issue);
    let mut scan = Scan {
        scored: lines.len(),
        ..Scan::default()
    };
    if lines.is_empty() {
        return Ok(scan);
    }
    let bounds = Bounds {
        max_touching: MAX_TOUCHING,
        max_walked: MAX_WALKED,
        max_examined: MAX_EXAMINED,
    };
    let (commits, walked) =
        walk::future_commits(repo, base.id(), walk::commit_time(&base), bounds)?;
    scan.walked = walked;
    let mut paths: Vec<String> = files.iter().chain(gold).map(|f| f.path.clone()).collect();
    paths.sort();
    paths.dedup();
    let touching = walk::touching(repo, &base, &commits, &paths, bounds)?;
    scan.touching = touching.len();
    let mut fix_share = 0.0;
    for t in &touching {
        let g = share(explain(&gold_lines, &t.single).len(), gold_lines.len());
        if g > fix_share && g >= 0.5 {
            fix_share = g;
            scan.fix = Some(CommitRef::of(t));
        }
    }
    scan.explanations = explanations(&lines, &touching);
    if scan.flagged().is_some() {
        // What the agent could read in its checkout is no evidence: looked
        // up in the base tree only now, for a candidate the rule flags.
        let wanted: HashSet<&str> = lines
            .iter()
            .filter(|l| l.beyond.is_some())
            .map(|l| l.key.as_str())
            .collect();
        let seen = in_base_tree(repo, &base.tree()?, &wanted)?;
        if !seen.is_empty() {
            for l in &mut lines {
                if seen.contains(&l.key) {
                    l.beyond = None;
                }
            }
            scan.explanations = explanations(&lines, &touching);
        }
    }
    Ok(scan)
}

/// One explanation per touching commit, then one per run of two or more.
fn explanations(lines: &[Scored], touching: &[Touching]) -> Vec<Explanation> {
    let mut out = Vec::new();
    for (i, t) in touching.iter().enumerate() {
        let single = explain(lines, &t.single);
        out.push(Explanation {
            commit: CommitRef::of(t),
            run: Vec::new(),
            scored: lines.len(),
            share: share(single.len(), lines.len()),
            matched: single,
        });
        if i > 0 {
            let run = explain(lines, &t.cumulative);
            out.push(Explanation {
                commit: CommitRef::of(t),
                run: touching[..=i].iter().map(CommitRef::of).collect(),
                scored: lines.len(),
                share: share(run.len(), lines.len()),
                matched: run,
            });
        }
    }
    out
}

/// Scans the mirror at `mirror` for commits after the instance's base that
/// explain `candidate_patch`, flagged by the rule or not (for measuring it).
pub fn scan(
    mirror: &Path,
    instance: &Instance,
    candidate_patch: &str,
) -> Result<Scan, FutureError> {
    scan_files(mirror, instance, &super::diff::read(candidate_patch))
}

fn scan_files(mirror: &Path, instance: &Instance, files: &[FileDiff]) -> Result<Scan, FutureError> {
    let repo = Repository::open(mirror).map_err(|source| FutureError::Open {
        path: mirror.display().to_string(),
        source,
    })?;
    let mut gold = super::diff::read(&instance.patch);
    gold.extend(super::diff::read(&instance.test_patch));
    scan_repo(
        &repo,
        &instance.base_commit,
        files,
        &gold,
        &issue_keys(instance),
    )
}

/// The check: a `future_copy` reason when a commit after the base explains
/// the candidate by the rule above.
pub(crate) fn check(
    mirror: &Path,
    instance: &Instance,
    files: &[FileDiff],
) -> Result<Option<Reason>, FutureError> {
    let scan = scan_files(mirror, instance, files)?;
    Ok(scan.flagged().map(|e| reason(e, scan.fix.as_ref())))
}

fn reason(e: &Explanation, fix: Option<&CommitRef>) -> Reason {
    let mut by_kind: BTreeMap<Beyond, usize> = BTreeMap::new();
    for m in &e.matched {
        if let Some(b) = m.beyond {
            *by_kind.entry(b).or_default() += 1;
        }
    }
    let kinds: Vec<String> = by_kind
        .iter()
        .map(|(b, n)| format!("{n} {}", b.name()))
        .collect();
    let what = if !e.run.is_empty() {
        format!(
            "the {} commits from the base up to {}",
            e.run.len(),
            e.commit.short()
        )
    } else {
        format!("commit {}", e.commit.short())
    };
    let relation = match fix {
        Some(f) if f.id == e.commit.id && e.run.is_empty() => " (the fix commit)".to_string(),
        Some(f) if e.commit.time > f.time => format!(" (after the fix commit {})", f.short()),
        _ => String::new(),
    };
    let message = format!(
        "the candidate reproduces {what}{relation}: it explains {} of {} changed lines ({:.0}%), {} of them beyond the minimal fix ({}), which an independent fix would not share",
        e.matched.len(),
        e.scored,
        e.share * 100.0,
        e.beyond(),
        kinds.join(", ")
    );
    let mut commits = vec![format!("{} {}", e.commit.short(), e.commit.summary)];
    for c in e.run.iter().rev().skip(1) {
        commits.push(format!("{} {}", c.short(), c.summary));
    }
    let mut evidence = vec![Evidence {
        score: Some(e.share),
        excerpt: Some(excerpt(commits.iter().map(String::as_str), 8)),
        ..Evidence::default()
    }];
    let mut by_file: BTreeMap<&str, Vec<&Match>> = BTreeMap::new();
    for m in &e.matched {
        by_file.entry(m.path.as_str()).or_default().push(m);
    }
    for (path, ms) in by_file {
        let mut lines: Vec<usize> = ms.iter().map(|m| m.line).collect();
        lines.sort_unstable();
        lines.dedup();
        let shown: Vec<String> = ms
            .iter()
            .filter_map(|m| Some(format!("[{}] {}", m.beyond?.name(), m.text)))
            .collect();
        evidence.push(Evidence {
            file: Some(path.to_string()),
            lines,
            score: Some(ms.len() as f64),
            excerpt: (!shown.is_empty()).then(|| excerpt(shown.iter().map(String::as_str), 8)),
            ..Evidence::default()
        });
    }
    Reason {
        kind: ReasonKind::FutureCopy,
        message,
        evidence,
    }
}

#[cfg(test)]
mod tests;
