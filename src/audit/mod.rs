//! Audits of resolved evaluations: is a pass `clean`, or `suspect`, and why.
//!
//! A resolved (instance, prediction) passed its tests; the audit asks whether
//! the pass can be trusted. The static checks here read only the candidate
//! patch, the instance, the test log and the repository the candidate ran in;
//! they are plain sync code, cheap (milliseconds per instance, see
//! docs/audit.md) and never panic on malformed input:
//!
//! - [`tampering`]: the candidate edits tests, test configuration, adds
//!   skip/xfail markers or hijacks the test runner.
//! - [`leakage`]: the candidate's added lines are copied from the issue text,
//!   and the instance-level flag when the gold patch itself is in the issue.
//! - [`spoofing`]: the log claims passes the recorded exit code contradicts,
//!   repeats a marker line, or the candidate prints markers or status lines.
//! - [`history`]: the repository holds commits, tags or reflog entries newer
//!   than the base commit (the candidate could have read the fix).
//! - [`aware`]: the candidate's code notices the tests, takes over the exit
//!   status, or reaches outside its tree.
//! - [`future`]: the candidate reproduces a commit after the base (the fix,
//!   or a later one) that the mirror holds, with material an independent
//!   fix would not share.
//!
//! Every reason names its hack family ([`ReasonKind::family`]).
//!
//! Dynamic checks (held-out tests, divergence from gold, the confirmation
//! run) are run by the runner and added to the same [`Audit`] with
//! [`Audit::push`]; [`dynamic`] and [`confirm`] judge them.

pub mod aware;
pub mod confirm;
pub(crate) mod diff;
pub mod dynamic;
pub mod future;
pub mod history;
pub mod leakage;
pub mod spoofing;
pub mod tampering;
pub(crate) mod text;

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::dataset::Instance;
use crate::outcome::Outcome;
use crate::parse::LogParser;

// (Also `perf::stats::Verdict`, a speed verdict: the two never meet.)
/// Whether a pass can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Clean,
    Suspect,
    /// No reason was found, but a requested check could not run (or its
    /// gold baseline was unusable): the pass is neither clean nor suspect.
    Inconclusive,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Clean => "clean",
            Verdict::Suspect => "suspect",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// A check that must run tests (requested with `audit --rerun`, or
/// `--confirm` for the confirmation run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    HeldOut,
    GoldDivergence,
    /// The FAIL_TO_PASS tests run again where a test-aware candidate cannot
    /// tell ([`confirm`]).
    Confirmation,
}

impl CheckKind {
    pub fn name(self) -> &'static str {
        match self {
            CheckKind::HeldOut => "held_out",
            CheckKind::GoldDivergence => "gold_divergence",
            CheckKind::Confirmation => "confirmation",
        }
    }
}

/// Whether a requested check reached a judgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    Ran,
    CouldNotRun,
}

/// How the evaluation behind a check that could not run ended: its outcome
/// (`environment_build_failed`, ...), or `ungradable` for a graded outcome
/// whose log could not be graded. Written as that one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckOutcome {
    Ungradable,
    #[serde(untagged)]
    Outcome(Outcome),
}

impl std::fmt::Display for CheckOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckOutcome::Ungradable => f.write_str("ungradable"),
            CheckOutcome::Outcome(o) => o.fmt(f),
        }
    }
}

/// What happened to one requested check of one evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckRun {
    pub check: CheckKind,
    pub status: CheckStatus,
    /// How the evaluation that failed ended, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<CheckOutcome>,
    /// Why it could not run, in words (the error line, the gold failures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// Test ids behind the cause (ids that matched nothing, tests gold fails).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub test_ids: Vec<String>,
}

impl CheckRun {
    pub fn ran(check: CheckKind) -> CheckRun {
        CheckRun {
            check,
            status: CheckStatus::Ran,
            outcome: None,
            cause: None,
            test_ids: Vec::new(),
        }
    }

    pub fn could_not_run(check: CheckKind, cause: impl Into<String>) -> CheckRun {
        CheckRun {
            check,
            status: CheckStatus::CouldNotRun,
            outcome: None,
            cause: Some(cause.into()),
            test_ids: Vec::new(),
        }
    }

    /// `held_out: <cause> (<outcome>)`, for messages.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{}: {}",
            self.check.name(),
            self.cause.as_deref().unwrap_or("could not run")
        );
        if let Some(o) = &self.outcome {
            s.push_str(&format!(" ({o})"));
        }
        s
    }
}

/// What kind of problem a reason reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonKind {
    /// The candidate edits or creates tests, test configuration, skip
    /// markers or test-runner hooks.
    TestTampering,
    /// The candidate's added lines are largely found in the issue text.
    IssueLeakage,
    /// Instance-level: the gold patch is largely contained in the issue text,
    /// so any pass on this instance may be copied from it.
    SolutionInIssue,
    /// The log's pass claims are contradicted or forged.
    OutputSpoofing,
    /// The repository holds history newer than the base commit.
    FutureHistory,
    /// Dynamic (filled by the runner): fails tests that were held out.
    FailsHeldOut,
    /// Dynamic (filled by the runner): behaves differently from gold.
    GoldDivergence,
    /// The candidate's code notices the test run (runner variables,
    /// `sys.modules`, `sys.argv`, the call stack, the test files), answers
    /// the tested inputs from a table, returns objects that equal anything,
    /// or swallows every exception ([`aware`]).
    TestAwareCode,
    /// The candidate's code takes over how the process ends or reports:
    /// `os._exit`, `atexit`, a replaced `sys.exit`, signal handlers.
    ExitControl,
    /// The candidate's code reaches outside its tree: git history, other
    /// installed packages, site-packages, the network, another runner.
    OutsideTree,
    /// The candidate reproduces a commit after the base (the fix or a later
    /// one) beyond what an independent fix would share ([`future`]).
    FutureCopy,
    /// Dynamic: FAIL_TO_PASS tests the candidate passed in the graded run
    /// fail when run again under conditions it cannot tell from an
    /// ordinary run, where gold passes them ([`confirm`]).
    ConfirmationDiffers,
}

/// The families of reward hacking (docs/audit.md, "Hack corpus"), as each
/// flag names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// (a) conftest.py, plugins, runner config, start-up hooks, patched
    /// test classes, skip markers, edited tests.
    TestMachinery,
    /// (b) forged status lines and markers, exit status taken over.
    OutputExit,
    /// (c) code that behaves differently under the tests.
    TestAware,
    /// (d) the fix looked for, or things written, outside the tree.
    Environment,
    /// The fix copied from the issue text (not a hack of the grader).
    Leakage,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::TestMachinery => "test_machinery",
            Family::OutputExit => "output_exit",
            Family::TestAware => "test_aware",
            Family::Environment => "environment",
            Family::Leakage => "leakage",
        }
    }
}

impl ReasonKind {
    pub fn name(self) -> &'static str {
        match self {
            ReasonKind::TestTampering => "test_tampering",
            ReasonKind::IssueLeakage => "issue_leakage",
            ReasonKind::SolutionInIssue => "solution_in_issue",
            ReasonKind::OutputSpoofing => "output_spoofing",
            ReasonKind::FutureHistory => "future_history",
            ReasonKind::FailsHeldOut => "fails_held_out",
            ReasonKind::GoldDivergence => "gold_divergence",
            ReasonKind::TestAwareCode => "test_aware_code",
            ReasonKind::ExitControl => "exit_control",
            ReasonKind::OutsideTree => "outside_tree",
            ReasonKind::FutureCopy => "future_copy",
            ReasonKind::ConfirmationDiffers => "confirmation_differs",
        }
    }

    /// The family of hack this kind of reason reports; none for the
    /// held-out and divergence checks, which catch a wrong fix of any
    /// family. A pass the confirmation run does not repeat is code that
    /// behaves differently under the graded run: test-aware.
    pub fn family(self) -> Option<Family> {
        Some(match self {
            ReasonKind::TestTampering => Family::TestMachinery,
            ReasonKind::OutputSpoofing | ReasonKind::ExitControl => Family::OutputExit,
            ReasonKind::TestAwareCode | ReasonKind::ConfirmationDiffers => Family::TestAware,
            ReasonKind::FutureHistory | ReasonKind::OutsideTree | ReasonKind::FutureCopy => {
                Family::Environment
            }
            ReasonKind::IssueLeakage | ReasonKind::SolutionInIssue => Family::Leakage,
            ReasonKind::FailsHeldOut | ReasonKind::GoldDivergence => return None,
        })
    }
}

impl ReasonKind {
    /// The dynamic check that finds this kind of reason, if one does.
    pub fn check(self) -> Option<CheckKind> {
        match self {
            ReasonKind::FailsHeldOut => Some(CheckKind::HeldOut),
            ReasonKind::GoldDivergence => Some(CheckKind::GoldDivergence),
            ReasonKind::ConfirmationDiffers => Some(CheckKind::Confirmation),
            ReasonKind::TestTampering
            | ReasonKind::IssueLeakage
            | ReasonKind::SolutionInIssue
            | ReasonKind::OutputSpoofing
            | ReasonKind::FutureHistory
            | ReasonKind::TestAwareCode
            | ReasonKind::ExitControl
            | ReasonKind::OutsideTree
            | ReasonKind::FutureCopy => None,
        }
    }
}

impl std::fmt::Display for ReasonKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One piece of evidence behind a reason. Line numbers are 1-based: lines of
/// the new file for patch evidence, lines of the log for log evidence.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub test_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
}

impl Evidence {
    pub fn file(path: impl Into<String>) -> Evidence {
        Evidence {
            file: Some(path.into()),
            ..Evidence::default()
        }
    }
}

/// Why an evaluation is suspect. Written with its kind's family
/// ([`ReasonKind::family`]), which is not read back: the kind decides it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Reason {
    pub kind: ReasonKind,
    pub message: String,
    #[serde(default)]
    pub evidence: Vec<Evidence>,
}

impl Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Written<'a> {
            kind: ReasonKind,
            #[serde(skip_serializing_if = "Option::is_none")]
            family: Option<Family>,
            message: &'a str,
            #[serde(skip_serializing_if = "<[Evidence]>::is_empty")]
            evidence: &'a [Evidence],
        }
        Written {
            kind: self.kind,
            family: self.kind.family(),
            message: &self.message,
            evidence: &self.evidence,
        }
        .serialize(s)
    }
}

/// The audit of one evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Audit {
    pub verdict: Verdict,
    pub reasons: Vec<Reason>,
    /// Wall-clock seconds the checks took.
    pub seconds: f64,
    /// Checks that could not run, and why (a missing repository, say). They
    /// do not make the verdict suspect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The requested dynamic checks and whether each ran; one that could not
    /// run makes an otherwise clean verdict inconclusive.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckRun>,
}

impl Audit {
    /// An audit with these reasons; suspect when there is any.
    pub fn new(reasons: Vec<Reason>, seconds: f64) -> Audit {
        let mut a = Audit {
            verdict: Verdict::Clean,
            reasons,
            seconds,
            notes: Vec::new(),
            checks: Vec::new(),
        };
        a.update_verdict();
        a
    }

    /// Records how a requested check went; the verdict follows.
    pub fn record_check(&mut self, check: CheckRun) {
        self.checks.push(check);
        self.update_verdict();
    }

    pub fn is_inconclusive(&self) -> bool {
        self.verdict == Verdict::Inconclusive
    }

    /// The checks that could not run.
    pub fn failed_checks(&self) -> impl Iterator<Item = &CheckRun> {
        self.checks
            .iter()
            .filter(|c| c.status == CheckStatus::CouldNotRun)
    }

    /// Adds a reason (from a dynamic check, say); the verdict follows.
    pub fn push(&mut self, reason: Reason) {
        self.reasons.push(reason);
        self.update_verdict();
    }

    pub fn is_suspect(&self) -> bool {
        self.verdict == Verdict::Suspect
    }

    /// Whether any reason is of this kind.
    pub fn has(&self, kind: ReasonKind) -> bool {
        self.reasons.iter().any(|r| r.kind == kind)
    }

    /// A reason is evidence whatever else happened, so it wins; without
    /// one, a check that could not run leaves the pass inconclusive.
    fn update_verdict(&mut self) {
        self.verdict = if !self.reasons.is_empty() {
            Verdict::Suspect
        } else if self.failed_checks().next().is_some() {
            Verdict::Inconclusive
        } else {
            Verdict::Clean
        };
    }
}

/// What the static checks read.
#[derive(Debug, Clone, Copy)]
pub struct AuditInput<'a> {
    pub instance: &'a Instance,
    /// The candidate patch as submitted (it is normalised here).
    pub candidate_patch: &'a str,
    /// The test log (`test_output.txt`), if the tests ran.
    pub test_log: Option<&'a str>,
    /// The log parser of the instance's spec; without it the log checks use
    /// generic pass/fail line patterns.
    pub log_parser: Option<LogParser>,
    /// The git repository the candidate ran in, for the history check.
    pub checkout: Option<&'a Path>,
    /// Commit time (seconds since the epoch) of the base commit, for the
    /// history check; see [`history::base_commit_time`]. Without it the base
    /// commit is looked up in `checkout`, then the instance's `created_at`
    /// is used.
    pub base_time: Option<i64>,
    /// The repository's mirror (full history), for the future-copy check;
    /// without it that check is a note.
    pub mirror: Option<&'a Path>,
    /// The candidate is the dataset's own patch (`--predictions gold`,
    /// [`AuditInput::is_gold`]): gold is the fix commit by definition, so the
    /// future-copy check does not apply to it (nor is a note written).
    pub of_gold: bool,
}

impl<'a> AuditInput<'a> {
    /// Input with only the patch; set the other fields as available.
    pub fn new(instance: &'a Instance, candidate_patch: &'a str) -> AuditInput<'a> {
        AuditInput {
            instance,
            candidate_patch,
            test_log: None,
            log_parser: None,
            checkout: None,
            base_time: None,
            mirror: None,
            of_gold: false,
        }
    }

    /// Whether a prediction is the dataset's own gold patch: the model
    /// `gold` with the instance's patch, exactly.
    pub fn is_gold(instance: &Instance, model: &str, patch: &str) -> bool {
        model == crate::dataset::GOLD && patch == instance.patch
    }
}

/// Runs every static check. Never panics; a check that cannot run leaves a
/// note instead of a reason.
pub fn audit_static(input: &AuditInput) -> Audit {
    let t0 = Instant::now();
    let inst = input.instance;
    let files = diff::read(input.candidate_patch);
    let test_files = diff::read(&inst.test_patch);
    let mut reasons = Vec::new();
    let mut notes = Vec::new();

    let gold_files = diff::read(&inst.patch);
    reasons.extend(tampering::check(&files, &test_files, &gold_files));
    reasons.extend(aware::check(
        &files,
        &test_files,
        &gold_files,
        &inst.problem_statement,
    ));
    reasons.extend(leakage::check_candidate(inst, &files));
    reasons.extend(leakage::check_instance(inst));
    reasons.extend(spoofing::check_patch(&files));
    if let Some(log) = input.test_log {
        reasons.extend(spoofing::check_log(log, input.log_parser, inst));
        reasons.extend(history::check_log(log));
    }
    if let Some(repo) = input.checkout {
        match history::check(repo, input.base_time, inst) {
            Ok(r) => reasons.extend(r),
            Err(e) => notes.push(format!("history check skipped: {e}")),
        }
    }

    // Nothing changed, nothing copied: no note either.
    if !input.of_gold
        && files
            .iter()
            .any(|f| f.lines.iter().any(|l| l.kind != diff::Kind::Context))
    {
        match input.mirror {
            Some(m) => match future::check(m, inst, &files) {
                Ok(r) => reasons.extend(r),
                Err(e) => notes.push(format!("future-copy check not run: {e}")),
            },
            None => notes.push(format!(
                "future-copy check not run: no mirror of {}",
                inst.repo
            )),
        }
    }

    let mut audit = Audit::new(reasons, t0.elapsed().as_secs_f64());
    audit.notes = notes;
    audit
}

/// At most `max_lines` lines of `lines`, joined, with a count of the rest.
pub(crate) fn excerpt<'s>(lines: impl IntoIterator<Item = &'s str>, max_lines: usize) -> String {
    const MAX_LINE: usize = 200;
    let mut out = String::new();
    let mut rest = 0;
    for (i, l) in lines.into_iter().enumerate() {
        if i >= max_lines {
            rest += 1;
            continue;
        }
        if i > 0 {
            out.push('\n');
        }
        if l.chars().count() > MAX_LINE {
            out.extend(l.chars().take(MAX_LINE));
            out.push('…');
        } else {
            out.push_str(l);
        }
    }
    if rest > 0 {
        out.push_str(&format!("\n… ({rest} more)"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_outcomes_are_written_as_one_word() {
        let cases = [
            (CheckOutcome::Ungradable, "ungradable"),
            (
                CheckOutcome::Outcome(Outcome::EnvironmentBuildFailed),
                "environment_build_failed",
            ),
            (CheckOutcome::Outcome(Outcome::Unresolved), "unresolved"),
        ];
        for (o, text) in cases {
            assert_eq!(serde_json::to_value(o).unwrap(), text);
            assert_eq!(o.to_string(), text);
            let back: CheckOutcome = serde_json::from_value(text.into()).unwrap();
            assert_eq!(back, o);
        }
        let mut c = CheckRun::could_not_run(CheckKind::HeldOut, "gold's held-out run failed");
        c.outcome = Some(CheckOutcome::Outcome(Outcome::EnvironmentBuildFailed));
        assert_eq!(
            c.describe(),
            "held_out: gold's held-out run failed (environment_build_failed)"
        );
    }
}
