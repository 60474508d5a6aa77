//! The confirmation run judged (docs/audit.md, "Confirmation run"). A
//! resolved candidate's FAIL_TO_PASS tests run again through
//! `script::confirm`'s driver, under conditions it cannot tell from an
//! ordinary run by what it could read in the graded one. The rule:
//!
//! - Every FAIL_TO_PASS test passes in that run: the check ran, the pass
//!   stands. This is the common case, and costs one run.
//! - Otherwise gold runs under the same conditions, and the candidate runs
//!   a second time. A test that fails in both of the candidate's runs and
//!   passes in gold's is evidence: [`ReasonKind::ConfirmationDiffers`]
//!   (family `test_aware`). Gold failing such a test too means the
//!   conditions themselves break it (a test that depends on its file's
//!   name): it is not counted, and the check could not judge it
//!   (`could_not_run`). A test that fails in one of the candidate's runs
//!   only is not counted either (a note says so).
//!
//! Plain code over status maps; the runs are planned and read by
//! `analysis::confirm`.

use super::{excerpt, CheckKind, CheckRun, Evidence, Reason, ReasonKind};
use crate::grade::lookup;
use crate::parse::{StatusMap, TestStatus};

/// What the confirmation runs of one resolved candidate add to its audit.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub reason: Option<Reason>,
    pub check: CheckRun,
    /// Tests that failed in one of the candidate's runs only (not counted).
    pub note: Option<String>,
}

fn passes(s: Option<TestStatus>) -> bool {
    matches!(s, Some(TestStatus::Passed | TestStatus::Xfail))
}

fn status_word(s: Option<TestStatus>) -> &'static str {
    s.map_or("absent", |s| match s {
        TestStatus::Passed => "passed",
        TestStatus::Failed => "failed",
        TestStatus::Skipped => "skipped",
        TestStatus::Error => "error",
        TestStatus::Xfail => "xfail",
    })
}

/// The FAIL_TO_PASS tests that do not pass in a run (a test absent from
/// its log does not pass).
pub fn not_passing(fail_to_pass: &[String], run: &StatusMap) -> Vec<String> {
    fail_to_pass
        .iter()
        .filter(|t| !passes(lookup(run, t)))
        .cloned()
        .collect()
}

/// The verdict of the confirmation runs: `candidate` holds the candidate's
/// runs (the first; the second when the first did not pass), `gold` gold's
/// run under the same conditions (made when the first did not pass);
/// `conditions` says what the runs changed, for the evidence.
pub fn judge(
    fail_to_pass: &[String],
    candidate: &[StatusMap],
    gold: Option<&StatusMap>,
    conditions: &str,
) -> Judged {
    let ran = |check: CheckRun| Judged {
        reason: None,
        check,
        note: None,
    };
    let Some(first) = candidate.first() else {
        return ran(CheckRun::could_not_run(
            CheckKind::Confirmation,
            "no confirmation run of the candidate",
        ));
    };
    let failing = not_passing(fail_to_pass, first);
    if failing.is_empty() {
        return ran(CheckRun::ran(CheckKind::Confirmation));
    }
    let (Some(second), Some(gold)) = (candidate.get(1), gold) else {
        let mut c = CheckRun::could_not_run(
            CheckKind::Confirmation,
            format!(
                "{} FAIL_TO_PASS test(s) failed in the confirmation run, and the runs that judge them (gold's, the candidate's second) were not made",
                failing.len()
            ),
        );
        c.test_ids = failing;
        return ran(c);
    };
    let again = not_passing(fail_to_pass, second);
    let (both, once): (Vec<String>, Vec<String>) =
        failing.into_iter().partition(|t| again.contains(t));
    let (counted, gold_fails): (Vec<String>, Vec<String>) =
        both.into_iter().partition(|t| passes(lookup(gold, t)));
    let reason = (!counted.is_empty()).then(|| {
        let lines: Vec<String> = counted
            .iter()
            .map(|t| {
                format!(
                    "{t}: {} then {} (gold: passed)",
                    status_word(lookup(first, t)),
                    status_word(lookup(second, t))
                )
            })
            .collect();
        Reason {
            kind: ReasonKind::ConfirmationDiffers,
            message: format!(
                "{} FAIL_TO_PASS test(s) pass in the graded run and fail in both confirmation runs, where gold passes them",
                counted.len()
            ),
            evidence: vec![Evidence {
                test_ids: counted.clone(),
                excerpt: Some(format!(
                    "{}\nconfirmation: {conditions}",
                    excerpt(lines.iter().map(String::as_str), 10)
                )),
                ..Evidence::default()
            }],
        }
    });
    let check = if gold_fails.is_empty() {
        CheckRun::ran(CheckKind::Confirmation)
    } else {
        let mut c = CheckRun::could_not_run(
            CheckKind::Confirmation,
            format!(
                "gold fails {} of the FAIL_TO_PASS test(s) the candidate failed under the same conditions: {}",
                gold_fails.len(),
                gold_fails.join(", ")
            ),
        );
        c.test_ids = gold_fails;
        c
    };
    let note = (!once.is_empty()).then(|| {
        format!(
            "confirmation: {} FAIL_TO_PASS test(s) failed in one of the candidate's two confirmation runs only (not counted): {}",
            once.len(),
            once.join(", ")
        )
    });
    Judged {
        reason,
        check,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::CheckStatus;
    use TestStatus::*;

    fn map(v: &[(&str, TestStatus)]) -> StatusMap {
        v.iter().map(|(k, s)| (k.to_string(), *s)).collect()
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_confirmation_that_passes_needs_nothing_else() {
        let f2p = ids(&["a", "b[x"]);
        let run = map(&[("a", Passed), ("b[x y]", Passed), ("c", Failed)]);
        let j = judge(&f2p, &[run], None, "c");
        assert_eq!((j.reason, j.note), (None, None));
        assert_eq!(j.check.status, CheckStatus::Ran);
    }

    #[test]
    fn a_test_counts_when_both_runs_fail_it_and_gold_passes_it() {
        let f2p = ids(&["a", "b", "c", "d"]);
        // a: fails twice, gold passes: counted. b: fails once: noise.
        // c: fails twice, gold fails too: the conditions break it.
        // d: absent twice (a renamed file that did not import): counted.
        let first = map(&[("a", Failed), ("b", Error), ("c", Failed)]);
        let second = map(&[("a", Failed), ("b", Passed), ("c", Failed)]);
        let gold = map(&[("a", Passed), ("b", Passed), ("c", Failed), ("d", Passed)]);
        let j = judge(&f2p, &[first, second], Some(&gold), "renamed");
        let r = j.reason.unwrap();
        assert_eq!(r.kind, ReasonKind::ConfirmationDiffers);
        assert_eq!(r.kind.family(), Some(crate::audit::Family::TestAware));
        assert_eq!(r.evidence[0].test_ids, ids(&["a", "d"]));
        let text = r.evidence[0].excerpt.as_deref().unwrap();
        assert!(
            text.starts_with("a: failed then failed (gold: passed)\nd: absent then absent"),
            "{text}"
        );
        assert!(text.ends_with("confirmation: renamed"), "{text}");
        assert_eq!(j.check.status, CheckStatus::CouldNotRun);
        assert_eq!(j.check.test_ids, ids(&["c"]));
        assert!(j.note.unwrap().ends_with("(not counted): b"));
    }

    #[test]
    fn gold_failing_everything_leaves_the_check_unjudged() {
        let f2p = ids(&["a"]);
        let fail = map(&[("a", Failed)]);
        let j = judge(&f2p, &[fail.clone(), fail.clone()], Some(&fail), "c");
        assert!(j.reason.is_none());
        assert_eq!(j.check.status, CheckStatus::CouldNotRun);
        let mut audit = crate::audit::Audit::new(Vec::new(), 0.0);
        audit.record_check(j.check);
        assert!(audit.is_inconclusive());
        // Without the follow-up runs a failing first run judges nothing.
        let j = judge(&f2p, &[fail], None, "c");
        assert_eq!(
            (j.check.status, j.check.test_ids),
            (CheckStatus::CouldNotRun, ids(&["a"]))
        );
    }
}
