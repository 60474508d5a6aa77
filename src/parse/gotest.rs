//! The reference's `parse_log_gotest` (W5 `log_parsers/go.py`, same as V4),
//! for `go test -v` result lines.

use std::sync::LazyLock;

use regex::Regex;

use super::{py, RawParse, TestStatus};

/// `^--- (PASS|FAIL|SKIP): (.+) \((.+)\)$` on the stripped line, so indented
/// subtest results count and the name keeps its `/subtest` path. Greedy: the
/// name runs to the last ` (`.
static RESULT_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^--- (PASS|FAIL|SKIP): (.+) \((.+)\)$").expect("valid regex"));

pub(crate) fn parse_gotest(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        let Some(caps) = RESULT_LINE.captures(py::strip(line)) else {
            continue;
        };
        let name = caps.get(2).map_or("", |m| m.as_str());
        let status = match caps.get(1).map_or("", |m| m.as_str()) {
            "PASS" => TestStatus::Passed,
            "FAIL" => TestStatus::Failed,
            _ => TestStatus::Skipped,
        };
        out.set_status(name, status);
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::parse::{parse_log, status_map, LogParser, TestStatus::*};

    /// Real `go test -v` logs (go1.26, a demo module: subtests with spaces,
    /// slashes and unicode, parallel subtests, a `--- PASS:` line printed by
    /// a test, a panic) against what the reference's parser makes of them.
    #[test]
    fn captured_logs_match_the_reference() {
        crate::parse::fixtures::assert_matches_reference(LogParser::GoTest, 3);
    }

    /// Real `go test -v ./...` output (go1.19.8, Debian's golang-go) of a
    /// demo package with passing, failing, skipped and sub-tests.
    const GO_RUN: &str = "\
=== RUN   TestPass
--- PASS: TestPass (0.00s)
=== RUN   TestFail
    demo_test.go:7: nope
--- FAIL: TestFail (0.00s)
=== RUN   TestSkip
    demo_test.go:9: later
--- SKIP: TestSkip (0.00s)
=== RUN   TestSub
=== RUN   TestSub/ok_case
=== RUN   TestSub/bad
    demo_test.go:13: bad sub
--- FAIL: TestSub (0.00s)
    --- PASS: TestSub/ok_case (0.00s)
    --- FAIL: TestSub/bad (0.00s)
=== RUN   TestLogs
    demo_test.go:16: some log
--- PASS: TestLogs (0.00s)
FAIL
FAIL\texample.com/gt\t0.002s
FAIL
";

    #[test]
    fn gotest_real_run() {
        assert_eq!(
            parse_log(LogParser::GoTest, GO_RUN),
            status_map(&[
                ("TestPass", Passed),
                ("TestFail", Failed),
                ("TestSkip", Skipped),
                ("TestSub", Failed),
                ("TestSub/ok_case", Passed),
                ("TestSub/bad", Failed),
                ("TestLogs", Passed),
            ])
        );
    }

    #[test]
    fn gotest_greedy_name_and_required_duration() {
        let log = "--- PASS: TestX (a) (0.01s)\r\n--- FAIL: TestNoTime\n--- PASS:  (0.00s)\n";
        assert_eq!(
            parse_log(LogParser::GoTest, log),
            status_map(&[("TestX (a)", Passed)])
        );
    }
}
