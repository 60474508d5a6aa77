//! The reference's `parse_log_sympy` (W5 `log_parsers/python.py`, same as
//! V4), for `bin/test -C --verbose` output.
//!
//! Between 2024-08 and 2025-01 the reference also cut a trailing `[OK]` /
//! `[FAIL]` (printed after a file's last test) before matching; the file
//! split of 2025-01 (#285) dropped that, so V4 and W5 do not record a
//! file's last test when it carries that marker. Reproduced.

use std::sync::LazyLock;

use regex::Regex;

use super::{py, RawParse, TestStatus};

/// Failure/exception section headers, `___ path/test_x.py:test_name ___`
/// (`::` for failures, `:` for exceptions), matched anywhere in the log
/// with `re.findall`. Any other line with ` <x>.py:<y> ` matches too.
static HEADER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(_*) (.*)\.py:(.*) (_*)").expect("valid regex"));

pub(crate) fn parse_sympy(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for caps in HEADER.captures_iter(log) {
        let path = caps.get(2).map_or("", |m| m.as_str());
        let test = caps.get(3).map_or("", |m| m.as_str());
        // Exceptions are recorded as FAILED here (the ` E` line below makes
        // them ERROR only if it comes later in the log, which it does not).
        out.set_status(format!("{path}.py:{test}"), TestStatus::Failed);
    }
    for line in log.split('\n') {
        let line = py::strip(line);
        if !line.starts_with("test_") {
            continue;
        }
        let Some(test) = py::split(line).next() else {
            continue;
        };
        if line.ends_with(" E") {
            out.set_status(test, TestStatus::Error);
        }
        if line.ends_with(" F") {
            out.set_status(test, TestStatus::Failed);
        }
        if line.ends_with(" ok") {
            out.set_status(test, TestStatus::Passed);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::parse::{parse_log, status_map, LogParser, TestStatus::*};

    /// Real `--verbose` output of SymPy's own runner
    /// (`sympy.testing.runtests.test`, which bin/test calls), SymPy 1.14.0
    /// on Python 3.11.7, over a demo test file in the sympy tree.
    const SYMPY_RUN: &str = "\
============================= test process starts ==============================
executable:         /tmp/pgvenv/bin/python  (3.11.7-final-0) [CPython]
architecture:       64-bit
cache:              yes
ground types:       python 
numpy:              None
random seed:        30712793
hash randomization: on (PYTHONHASHSEED=1383622209)

sympy/zzdemo/tests/test_demo.py[7] 
test_simplify_ok ok
test_issue_1234 ok
test_fails F
test_errors E
test_expected_failure f
test_skipped not here s
test_last_one_fails F                                                     [FAIL]


________________________________________________________________________________
_________________ sympy/zzdemo/tests/test_demo.py:test_errors __________________
Traceback (most recent call last):
  File \"/tmp/pgvenv/lib/python3.11/site-packages/sympy/zzdemo/tests/test_demo.py\", line 20, in test_errors
    raise ValueError(\"boom\")
ValueError: boom

________________________________________________________________________________
_________________ sympy/zzdemo/tests/test_demo.py::test_fails __________________
Traceback (most recent call last):
  File \"/tmp/pgvenv/lib/python3.11/site-packages/sympy/zzdemo/tests/test_demo.py\", line 16, in test_fails
    assert x + 1 == x + 2
           ^^^^^^^^^^^^^^
AssertionError
________________________________________________________________________________
_____________ sympy/zzdemo/tests/test_demo.py::test_last_one_fails _____________
Traceback (most recent call last):
  File \"/tmp/pgvenv/lib/python3.11/site-packages/sympy/zzdemo/tests/test_demo.py\", line 33, in test_last_one_fails
    assert 1 == 0
           ^^^^^^
AssertionError

 tests finished: 2 passed, 2 failed, 1 skipped, 1 expected to fail, 
1 exceptions, in 0.10 seconds 
DO *NOT* COMMIT!
";

    #[test]
    fn sympy_real_run() {
        assert_eq!(
            parse_log(LogParser::Sympy, SYMPY_RUN),
            status_map(&[
                ("test_simplify_ok", Passed),
                ("test_issue_1234", Passed),
                ("test_fails", Failed),
                ("test_errors", Error),
                // Headers: `path.py:` + the rest, so failures keep a colon.
                ("sympy/zzdemo/tests/test_demo.py:test_errors", Failed),
                ("sympy/zzdemo/tests/test_demo.py::test_fails", Failed),
                (
                    "sympy/zzdemo/tests/test_demo.py::test_last_one_fails",
                    Failed
                ),
                // `test_last_one_fails F ... [FAIL]`, the xfail (`f`) and the
                // skip (`s`) lines are not recorded.
            ])
        );
    }

    #[test]
    fn sympy_last_line_marker_not_recorded() {
        // The log quoted in SWE-bench PR #212: a file's last test carries
        // "[FAIL]"/"[OK]" and is lost (the PR's fix was later dropped).
        let log = "\
test_union_intersection_constructor ok
test_Union_contains ok
test_issue_16878b f
test_intersection_of_duplicate_sets F                                     [FAIL]
test_last_ok ok                                                           [OK]
";
        assert_eq!(
            parse_log(LogParser::Sympy, log),
            status_map(&[
                ("test_union_intersection_constructor", Passed),
                ("test_Union_contains", Passed),
            ])
        );
    }

    #[test]
    fn sympy_header_regex_is_loose() {
        // Leftmost match from the first space, greedy groups: a warning line
        // with spaces around a `.py:` yields a junk FAILED key (the match
        // eats the first space, the key keeps the second), as in the
        // reference.
        let log = "  /testbed/sympy/core/basic.py:12: SymPyDeprecationWarning: old\n";
        assert_eq!(
            parse_log(LogParser::Sympy, log),
            status_map(&[(
                " /testbed/sympy/core/basic.py:12: SymPyDeprecationWarning:",
                Failed
            )])
        );
        // A header whose name has no surrounding space does not match.
        assert!(parse_log(LogParser::Sympy, "____sympy/a.py:test_x____").is_empty());
    }
}
