//! Code review of candidate patches: would a maintainer merge it?
//!
//! Two layers (docs/review.md): cheap, reproducible static findings, and an
//! optional model reading the diff against a rubric.
//!
//! - [`lines`]: line mapping base ↔ patched through a diff's hunks.
//! - [`lint`]: typed linter findings (ruff, flake8, pylint) and the delta
//!   that blames a patch only for what it introduced.
//! - [`complexity`]: cyclomatic complexity of the touched functions, before
//!   and after (ruff's C901).
//! - [`hygiene`]: findings read from the diff alone (debug prints,
//!   commented-out code, TODOs, whitespace churn, unrelated files, tests)
//!   and the patch's size against gold's.
//! - [`score`]: one number per patch from the findings, with documented
//!   weights.
//! - [`script`]: the review script (lint base, put the patched files in
//!   place, lint again) that containers and hosts run, and its log's reader.
//! - [`container`]: the tools and the script the `review` command sends
//!   into the instance's container.
//! - [`local`]: the static rubric on two trees on this host.
//! - [`pipeline`]: [`run`], the review of a run's predictions in their
//!   containers under the engine (the `review` command).
//! - [`judge`]: the LLM judge (an OpenAI-compatible endpoint, only when
//!   configured).
//! - [`submission`]: the static audit of a whole predictions file, no
//!   container needed.

pub mod complexity;
pub mod container;
pub mod hygiene;
pub mod judge;

pub mod lines;
pub mod lint;
pub mod local;
pub mod pipeline;
pub mod quality;
pub mod score;
pub mod script;
pub mod submission;

use serde::{Deserialize, Serialize};

pub use pipeline::{run, JudgeSetup, ReviewError, ReviewOptions, Reviews};

/// What a review finding reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// A linter finding on a line the patch wrote, not there before.
    NewLint,
    /// The patched file does not parse.
    NewSyntaxError,
    /// A touched function's cyclomatic complexity went up.
    ComplexityIncrease,
    /// `print(` in library code, `console.log(` in JS/TS.
    DebugPrint,
    /// `breakpoint()`, `pdb`/`ipdb`, `IPython.embed`, `debugger;`.
    DebuggerCall,
    /// Comment lines that read as code.
    CommentedOutCode,
    /// A TODO/FIXME/XXX/HACK comment added.
    TodoAdded,
    /// A hunk whose changes are only whitespace.
    WhitespaceOnlyHunk,
    /// Changed lines that differ from the base only in whitespace, inside
    /// hunks that also change something else.
    WhitespaceChurn,
    /// A file neither the issue text nor gold's footprint suggests.
    UnrelatedFile,
    /// An existing test file edited (beside the audit's tampering check).
    TestEdited,
    /// Test functions or test files added (information, no penalty).
    TestsAdded,
    /// Many more changed lines than gold.
    LargerThanGold,
    /// More non-test files than gold.
    MoreFilesThanGold,
    /// The patch text holds no readable diff.
    Unreadable,
}

impl FindingKind {
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::NewLint => "new_lint",
            FindingKind::NewSyntaxError => "new_syntax_error",
            FindingKind::ComplexityIncrease => "complexity_increase",
            FindingKind::DebugPrint => "debug_print",
            FindingKind::DebuggerCall => "debugger_call",
            FindingKind::CommentedOutCode => "commented_out_code",
            FindingKind::TodoAdded => "todo_added",
            FindingKind::WhitespaceOnlyHunk => "whitespace_only_hunk",
            FindingKind::WhitespaceChurn => "whitespace_churn",
            FindingKind::UnrelatedFile => "unrelated_file",
            FindingKind::TestEdited => "test_edited",
            FindingKind::TestsAdded => "tests_added",
            FindingKind::LargerThanGold => "larger_than_gold",
            FindingKind::MoreFilesThanGold => "more_files_than_gold",
            FindingKind::Unreadable => "unreadable",
        }
    }
}

impl std::fmt::Display for FindingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One review finding, with file:line evidence (lines of the patched file).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Finding {
    pub kind: FindingKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<usize>,
    pub message: String,
    /// The offending lines, or the linter's rule and message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
}

impl Finding {
    /// `file:line` of the first line, or the file, or nothing.
    pub fn location(&self) -> String {
        match (&self.file, self.lines.first()) {
            (Some(f), Some(l)) => format!("{f}:{l}"),
            (Some(f), None) => f.clone(),
            _ => String::new(),
        }
    }
}

/// The static review of one patch: diff-only findings, and the linter and
/// complexity deltas when the linters ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StaticReview {
    pub score: score::Score,
    /// Every finding, sorted (kind, file, lines).
    pub findings: Vec<Finding>,
    pub footprint: hygiene::Footprint,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gold_footprint: Option<hygiene::Footprint>,
    pub tests_added: usize,
    /// The lint delta, when a linter ran on both trees.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lint: Option<lint::Delta>,
    /// Touched functions' complexity, when it was measured.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub complexity: Vec<complexity::ComplexityChange>,
    /// Checks that could not run, and why; they never count as passed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Puts a patch's findings together and scores them.
pub fn assemble(
    hygiene: hygiene::Hygiene,
    lint: Option<lint::Delta>,
    complexity: Vec<complexity::ComplexityChange>,
    notes: Vec<String>,
) -> StaticReview {
    let mut findings = hygiene.findings;
    if let Some(d) = &lint {
        findings.extend(lint::findings_of(d));
    }
    findings.extend(complexity::findings_of(&complexity));
    findings.sort();
    StaticReview {
        score: score::score(&findings),
        findings,
        footprint: hygiene.footprint,
        gold_footprint: hygiene.gold_footprint,
        tests_added: hygiene.tests_added,
        lint,
        complexity,
        notes,
    }
}
