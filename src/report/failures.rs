//! Why an evaluation that did not resolve failed, by the reference's rule
//! (5.0.2 `infra_failure.py`, #586): signatures matched in the test log and
//! the instance log, first hit wins. The reference adds what this finds to
//! its summary (`infra_failure_*`, `ambiguous_failure_*`, `failure_reasons`)
//! without taking the ids out of `unresolved_ids`/`error_ids`, so the
//! denominator is unchanged; patchgrade's own typed outcomes stay beside it
//! under the `patchgrade` key.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

/// How sure the classification is that the environment, not the patch,
/// broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureTier {
    /// Cannot plausibly be caused by patching repository source.
    Environment,
    /// Could be the environment or a bad patch.
    Ambiguous,
}

/// A signature's name, as the reference writes it in `failure_reasons`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureReason {
    BrowserLaunchFailed,
    DisplayUnavailable,
    OutOfMemory,
    ContainerUnavailable,
    NetworkUnreachable,
    MissingModule,
    NoTestsCollected,
    TestsTimedOut,
}

impl FailureReason {
    pub fn tier(self) -> FailureTier {
        match self {
            FailureReason::MissingModule
            | FailureReason::NoTestsCollected
            | FailureReason::TestsTimedOut => FailureTier::Ambiguous,
            _ => FailureTier::Environment,
        }
    }
}

/// The reference's signatures in its order (Python `re.MULTILINE`).
static SIGNATURES: LazyLock<Vec<(FailureReason, Regex)>> = LazyLock::new(|| {
    use FailureReason::*;
    [
        (
            BrowserLaunchFailed,
            r"Failed to launch|Failed to connect to the bus",
        ),
        (
            DisplayUnavailable,
            r"cannot open display|Missing X server|unable to open X display",
        ),
        (
            OutOfMemory,
            r"Cannot allocate memory|OutOfMemoryError|^Killed$",
        ),
        (
            ContainerUnavailable,
            r"Error response from daemon|Cannot connect to the Docker daemon",
        ),
        (
            NetworkUnreachable,
            r"Could not resolve host|Temporary failure in name resolution",
        ),
        (
            MissingModule,
            r"Cannot find module|MODULE_NOT_FOUND|ModuleNotFoundError",
        ),
        (NoTestsCollected, r"no tests ran|collected 0 items"),
        (TestsTimedOut, r"Timeout error: \d+ seconds exceeded"),
    ]
    .into_iter()
    .map(|(reason, pattern)| {
        // Python's `$` in MULTILINE matches before a `\n`, not before `\r`:
        // the same as Rust's `(?m)$` without CRLF mode. `\d` is ASCII-only
        // here and Unicode in Python; the signatures' digits are ASCII.
        let re = Regex::new(&format!("(?m){pattern}")).expect("valid signature");
        (reason, re)
    })
    .collect()
});

/// The first signature found in the text, or None.
pub fn classify_text(text: &str) -> Option<FailureReason> {
    if text.is_empty() {
        return None;
    }
    SIGNATURES
        .iter()
        .find(|(_, re)| re.is_match(text))
        .map(|(reason, _)| *reason)
}

/// The reference classifies the test log and the instance log joined by a
/// newline (whichever of them exists).
pub fn classify_logs(test_log: Option<&str>, instance_log: Option<&str>) -> Option<FailureReason> {
    let joined: Vec<&str> = [test_log, instance_log].into_iter().flatten().collect();
    classify_text(&joined.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_signature_in_the_reference_order_wins() {
        let both = "ModuleNotFoundError: No module named 'x'\nCannot allocate memory\n";
        assert_eq!(classify_text(both), Some(FailureReason::OutOfMemory));
        assert_eq!(
            classify_text("E   ModuleNotFoundError: No module named 'x'"),
            Some(FailureReason::MissingModule)
        );
        assert_eq!(FailureReason::MissingModule.tier(), FailureTier::Ambiguous);
        assert_eq!(FailureReason::OutOfMemory.tier(), FailureTier::Environment);
    }

    #[test]
    fn killed_must_be_a_whole_line() {
        assert_eq!(
            classify_text("step 3\nKilled\nnext"),
            Some(FailureReason::OutOfMemory)
        );
        assert_eq!(classify_text("Killed\n"), Some(FailureReason::OutOfMemory));
        assert_eq!(classify_text("process was Killed by signal"), None);
        // Python's `$` does not match before `\r`.
        assert_eq!(classify_text("Killed\r\n"), None);
    }

    #[test]
    fn nothing_found_in_an_ordinary_failure() {
        let log = "FAILED tests/test_a.py::test_b - AssertionError\n1 failed, 3 passed\n";
        assert_eq!(classify_text(log), None);
        assert_eq!(classify_text(""), None);
        assert_eq!(
            classify_logs(Some("collected 0 items"), None),
            Some(FailureReason::NoTestsCollected)
        );
        assert_eq!(
            classify_logs(None, Some("Timeout error: 1800 seconds exceeded.")),
            Some(FailureReason::TestsTimedOut)
        );
        assert_eq!(classify_logs(None, None), None);
    }

    #[test]
    fn reasons_serialise_as_the_reference_writes_them() {
        assert_eq!(
            serde_json::to_string(&FailureReason::BrowserLaunchFailed).unwrap(),
            "\"browser_launch_failed\""
        );
        assert_eq!(
            serde_json::to_string(&FailureReason::TestsTimedOut).unwrap(),
            "\"tests_timed_out\""
        );
    }
}
