//! Grading: test log -> status map -> FAIL_TO_PASS / PASS_TO_PASS verdicts.
//!
//! Follows the reference harness's current (W5) semantics: a SKIPPED
//! FAIL_TO_PASS test is a failure, a non-zero test exit code with no failure
//! in the log makes the log ungradable (forged passes), and an empty result
//! needs evidence that the suite ran at all.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::parse::{parse_log, LogParser, StatusMap, TestStatus};

pub const START_MARKER: &str = ">>>>> Start Test Output";
pub const END_MARKER: &str = ">>>>> End Test Output";
pub const EXIT_CODE_MARKER: &str = ">>>>> Test Exit Code: ";
/// Lines whose presence anywhere makes a log ungradable (reference constants).
const FATAL_MARKERS: [&str; 4] = [
    ">>>>> Patch Apply Failed",
    ">>>>> Reset Failed",
    ">>>>> Tests Errored",
    ">>>>> Tests Timed Out",
];

/// Why a log cannot be graded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum Ungradable {
    FatalMarker(String),
    MissingMarkers,
    /// No test results and no sign that the runner executed anything.
    SuiteDidNotRun,
    /// All parsed tests passed but the runner exited non-zero.
    ExitCodeContradicts(i32),
}

impl std::fmt::Display for Ungradable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ungradable::FatalMarker(m) => write!(f, "log contains {m:?}"),
            Ungradable::MissingMarkers => write!(f, "test output markers missing"),
            Ungradable::SuiteDidNotRun => write!(f, "no test results and no sign the suite ran"),
            Ungradable::ExitCodeContradicts(c) => {
                write!(f, "tests reported no failure but the runner exited {c}")
            }
        }
    }
}

/// Evidence that a runner executed tests (W5 `SUITE_RAN`); counts must be non-zero.
static SUITE_RAN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?m)(Executed [1-9]\d* of \d+|\b[1-9]\d* passing\b|Tests:\s+[1-9]\d*|# tests [1-9]\d*|\b[1-9]\d* specs?, \d+ failures?|': ok|\bRan [1-9]\d* tests?\b|\b[1-9]\d* passed\b|test result: )",
    )
    .expect("valid regex")
});

/// The test exit code recorded by the eval script, if any.
pub fn recorded_exit_code(log: &str) -> Option<i32> {
    log.lines()
        .filter_map(|l| l.trim().strip_prefix(EXIT_CODE_MARKER))
        .filter_map(|rest| rest.trim().parse().ok())
        .next_back()
}

/// Parse a test log into a status map, or say why it cannot be graded.
pub fn logs_eval(parser: LogParser, log: &str) -> Result<StatusMap, Ungradable> {
    if let Some(m) = FATAL_MARKERS.iter().find(|m| log.contains(**m)) {
        return Err(Ungradable::FatalMarker((*m).to_string()));
    }
    let Some((_, after_start)) = log.split_once(START_MARKER) else {
        return Err(Ungradable::MissingMarkers);
    };
    let Some((slice, _)) = after_start.split_once(END_MARKER) else {
        return Err(Ungradable::MissingMarkers);
    };
    let mut map = parse_log(parser, slice);
    if map.is_empty() {
        // Reference fallback (#427): some backends split stdout and stderr so
        // the markers do not enclose the output.
        map = parse_log(parser, log);
    }
    if map.is_empty() && !SUITE_RAN.is_match(log) {
        return Err(Ungradable::SuiteDidNotRun);
    }
    if let Some(code) = recorded_exit_code(log) {
        let any_failure = map
            .values()
            .any(|s| matches!(s, TestStatus::Failed | TestStatus::Error));
        if code != 0 && !map.is_empty() && !any_failure {
            return Err(Ungradable::ExitCodeContradicts(code));
        }
    }
    Ok(map)
}

/// Everything one test log says about a candidate: the exit code the eval
/// script recorded, and either the status map with its grade or why the log
/// cannot be graded. The runner and `regrade` both grade through this, so a
/// log graded again gives what the run gave.
#[derive(Debug, Clone, PartialEq)]
pub struct LogGrade {
    pub test_exit_code: Option<i32>,
    pub graded: Result<(StatusMap, Grade), Ungradable>,
}

impl LogGrade {
    /// Reference semantics: only a full resolution resolves; an ungradable
    /// log still has a report, with nothing resolved.
    pub fn resolved(&self) -> bool {
        matches!(&self.graded, Ok((_, g)) if g.resolution == Resolution::Full)
    }

    /// Why the candidate is not resolved, in words (None when resolved).
    pub fn detail(&self, log: &str) -> Option<String> {
        match &self.graded {
            Ok((_, g)) if g.resolution == Resolution::Full => None,
            Ok((_, g)) => Some(unresolved_detail(g)),
            Err(u) => {
                let mut detail = format!("ungradable log: {u}");
                if *u == Ungradable::MissingMarkers {
                    // What the script got to, for a log that says nothing.
                    match log.lines().rev().find(|l| !l.trim().is_empty()) {
                        Some(l) => {
                            let l: String = l.trim().chars().take(200).collect();
                            detail.push_str(&format!("; its last line: {l}"));
                        }
                        None => detail.push_str("; the log is empty"),
                    }
                }
                Some(detail)
            }
        }
    }
}

/// Grade one test log against the instance's expected tests.
pub fn grade_log(
    parser: LogParser,
    log: &str,
    fail_to_pass: &[String],
    pass_to_pass: &[String],
) -> LogGrade {
    LogGrade {
        test_exit_code: recorded_exit_code(log),
        graded: logs_eval(parser, log).map(|map| {
            let g = grade(&map, fail_to_pass, pass_to_pass);
            (map, g)
        }),
    }
}

/// `FAIL_TO_PASS 1/2 passed, PASS_TO_PASS 2/2 passed[; N expected ids not
/// in the log]`.
pub fn unresolved_detail(g: &Grade) -> String {
    format!(
        "FAIL_TO_PASS {}/{} passed, PASS_TO_PASS {}/{} passed{}",
        g.fail_to_pass.success.len(),
        g.fail_to_pass.success.len() + g.fail_to_pass.failure.len(),
        g.pass_to_pass.success.len(),
        g.pass_to_pass.success.len() + g.pass_to_pass.failure.len(),
        if g.unmatched.is_empty() {
            String::new()
        } else {
            format!("; {} expected ids not in the log", g.unmatched.len())
        }
    )
}

/// `success` / `failure` lists as in report.json.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Split {
    pub success: Vec<String>,
    pub failure: Vec<String>,
}

impl Split {
    /// |success| / total, 1 when there is nothing to check (reference rule).
    pub fn ratio(&self) -> f64 {
        let total = self.success.len() + self.failure.len();
        if total == 0 {
            1.0
        } else {
            self.success.len() as f64 / total as f64
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Resolution {
    #[serde(rename = "RESOLVED_FULL")]
    Full,
    #[serde(rename = "RESOLVED_PARTIAL")]
    Partial,
    #[serde(rename = "RESOLVED_NO")]
    No,
}

/// The graded outcome of one log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grade {
    pub fail_to_pass: Split,
    pub pass_to_pass: Split,
    pub resolution: Resolution,
    /// Expected ids that matched nothing in the log: usually an id-format
    /// mismatch between the dataset and the parser, not a real failure.
    pub unmatched: Vec<String>,
}

/// A lookup of one expected id: its status, or None when absent. Ids that
/// the reference truncated at a space (more `[` than `]`) are prefix-matched
/// and accepted when every match agrees on pass/fail (W5).
pub fn lookup(map: &StatusMap, id: &str) -> Option<TestStatus> {
    if let Some(s) = map.get(id) {
        return Some(*s);
    }
    if id.matches('[').count() > id.matches(']').count() {
        let matches: Vec<TestStatus> = map
            .range(id.to_string()..)
            .take_while(|(k, _)| k.starts_with(id))
            .map(|(_, s)| *s)
            .collect();
        let passes = |s: &TestStatus| matches!(s, TestStatus::Passed | TestStatus::Xfail);
        if let Some(first) = matches.first() {
            if matches.iter().all(|s| passes(s) == passes(first)) {
                return Some(*first);
            }
        }
    }
    None
}

/// Grade a status map against the instance's expected tests.
pub fn grade(map: &StatusMap, fail_to_pass: &[String], pass_to_pass: &[String]) -> Grade {
    let mut unmatched = Vec::new();
    let mut f2p = Split::default();
    for id in fail_to_pass {
        match lookup(map, id) {
            Some(TestStatus::Passed | TestStatus::Xfail) => f2p.success.push(id.clone()),
            status => {
                if status.is_none() {
                    unmatched.push(id.clone());
                }
                f2p.failure.push(id.clone());
            }
        }
    }
    let mut p2p = Split::default();
    for id in pass_to_pass {
        match lookup(map, id) {
            Some(TestStatus::Passed | TestStatus::Xfail | TestStatus::Skipped) => {
                p2p.success.push(id.clone())
            }
            status => {
                if status.is_none() {
                    unmatched.push(id.clone());
                }
                p2p.failure.push(id.clone());
            }
        }
    }
    let (f, p) = (f2p.ratio(), p2p.ratio());
    let resolution = if f == 1.0 && p == 1.0 {
        Resolution::Full
    } else if f > 0.0 && f < 1.0 && p == 1.0 {
        Resolution::Partial
    } else {
        Resolution::No
    };
    Grade {
        fail_to_pass: f2p,
        pass_to_pass: p2p,
        resolution,
        unmatched,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::status_map;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn full_partial_no() {
        use TestStatus::*;
        let m = status_map(&[("a", Passed), ("b", Failed), ("c", Passed), ("s", Skipped)]);
        assert_eq!(
            grade(&m, &ids(&["a"]), &ids(&["c", "s"])).resolution,
            Resolution::Full
        );
        assert_eq!(
            grade(&m, &ids(&["a", "b"]), &ids(&["c"])).resolution,
            Resolution::Partial
        );
        assert_eq!(
            grade(&m, &ids(&["a"]), &ids(&["b"])).resolution,
            Resolution::No
        );
        // W5: a skipped FAIL_TO_PASS test is a failure, not silently dropped.
        let g = grade(&m, &ids(&["s"]), &[]);
        assert_eq!(g.resolution, Resolution::No);
        assert_eq!(g.fail_to_pass.failure, ids(&["s"]));
        assert!(g.unmatched.is_empty());
    }

    #[test]
    fn missing_ids_fail_and_are_reported_unmatched() {
        let g = grade(
            &status_map(&[("a", TestStatus::Passed)]),
            &ids(&["a", "zz"]),
            &ids(&["yy"]),
        );
        assert_eq!(g.unmatched, ids(&["zz", "yy"]));
        assert_eq!(g.resolution, Resolution::No);
    }

    #[test]
    fn truncated_ids_prefix_match_only_when_agreeing() {
        use TestStatus::*;
        let m = status_map(&[
            ("t[a b]", Passed),
            ("t[a c]", Passed),
            ("u[x y]", Passed),
            ("u[x z]", Failed),
        ]);
        let g = grade(&m, &ids(&["t[a", "u[x"]), &[]);
        assert_eq!(g.fail_to_pass.success, ids(&["t[a"]));
        assert_eq!(g.fail_to_pass.failure, ids(&["u[x"]));
    }

    fn log(body: &str, code: i32) -> String {
        format!("+ : '{START_MARKER}'\n{body}\n+ : '{END_MARKER}'\n{EXIT_CODE_MARKER}{code}\n")
    }

    #[test]
    fn exit_code_cross_check_and_suite_ran() {
        let passing = "PASSED t.py::a";
        assert!(logs_eval(LogParser::Pytest, &log(passing, 0)).is_ok());
        assert_eq!(
            logs_eval(LogParser::Pytest, &log(passing, 1)),
            Err(Ungradable::ExitCodeContradicts(1))
        );
        assert!(logs_eval(LogParser::Pytest, &log("FAILED t.py::a - x", 1)).is_ok());
        assert_eq!(
            logs_eval(LogParser::Pytest, &log("nothing here", 2)),
            Err(Ungradable::SuiteDidNotRun)
        );
        assert_eq!(
            logs_eval(LogParser::Pytest, "PASSED t.py::a"),
            Err(Ungradable::MissingMarkers)
        );
        let fatal = format!("{}\n>>>>> Tests Timed Out\n", log(passing, 0));
        assert!(matches!(
            logs_eval(LogParser::Pytest, &fatal),
            Err(Ungradable::FatalMarker(_))
        ));
    }
}
