//! The reference's C/C++ parsers (W5 `log_parsers/c.py`): redis/valkey's
//! tcl test suite, jq's `make check` (automake's test driver), googletest
//! (fmt, through `ctest -V`), doctest's XML reporter (nlohmann/json) and
//! micropython's `run-tests.py`.
//!
//! Fixtures are real runs here: redis 7.0.15's `./runtest` against
//! Debian's redis-server 7.0.15; automake 1.16's parallel test harness over
//! small `TESTS` scripts (`make check` recursing into a subdirectory, as
//! jq's does into oniguruma); Debian's googletest 1.12 through `ctest -V`;
//! Debian's doctest 2.4.9 with `-s -r=xml`; micropython v1.22.0's
//! `tests/run-tests.py` with its unix port's minimal variant; the
//! `truncated` cases are real logs cut mid-line. See docs/parsers.md.

use std::sync::LazyLock;

use regex::Regex;

use super::{py, xml, RawParse, TestStatus};

/// `^\[(ok|err|skip|ignore)\]:\s(.+?)(?:\s\((\d+\s*m?s)\))?$` on the
/// stripped line. The lazy name stops before the first `(<n> ms)` that
/// ends the line.
static REDIS_LINE: LazyLock<Regex> = LazyLock::new(|| {
    let ws = py::WS;
    Regex::new(&format!(
        r"^\[(ok|err|skip|ignore)\]:{ws}(.+?)(?:{ws}\((\d+{ws}*m?s)\))?$"
    ))
    .expect("valid regex")
});

/// `\s+in\s+\S+$`: the ` in tests/unit/x.tcl` of a failed test's name.
static REDIS_ERR_FILE: LazyLock<Regex> = LazyLock::new(|| {
    let (ws, non_ws) = (py::WS, py::NON_WS);
    Regex::new(&format!(r"{ws}+in{ws}+{non_ws}+$")).expect("valid regex")
});

/// `^\s*(PASS|FAIL):\s(.+)$` on the stripped line.
static JQ_LINE: LazyLock<Regex> = LazyLock::new(|| {
    let ws = py::WS;
    Regex::new(&format!(r"^{ws}*(PASS|FAIL):{ws}(.+)$")).expect("valid regex")
});

/// `^.*\[\s*(OK|FAILED)\s*\]\s(.*)\s\(.*\)$` on the stripped line. Greedy:
/// the bracket is the last `[ OK ]`/`[ FAILED ]` that still leaves
/// ` name (...)`, and the name runs to the last ` (`.
static GOOGLETEST_LINE: LazyLock<Regex> = LazyLock::new(|| {
    let ws = py::WS;
    Regex::new(&format!(r"^.*\[{ws}*(OK|FAILED){ws}*\]{ws}(.*){ws}\(.*\)$")).expect("valid regex")
});

/// `^(pass|FAIL|skip)\s+(.+)$` on the stripped line.
static MICROPYTHON_LINE: LazyLock<Regex> = LazyLock::new(|| {
    let ws = py::WS;
    Regex::new(&format!(r"^(pass|FAIL|skip){ws}+(.+)$")).expect("valid regex")
});

pub(crate) fn parse_redis(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        let Some(caps) = REDIS_LINE.captures(py::strip(line)) else {
            continue;
        };
        let name = &caps[2];
        match &caps[1] {
            "ok" => out.set_status(name, TestStatus::Passed),
            "err" => out.set_status(
                REDIS_ERR_FILE.replace(name, "").into_owned(),
                TestStatus::Failed,
            ),
            _ => out.set_status(name, TestStatus::Skipped),
        }
    }
    out
}

pub(crate) fn parse_jq(log: &str) -> RawParse {
    simple_lines(log, &JQ_LINE, |s| match s {
        "PASS" => Some(TestStatus::Passed),
        _ => Some(TestStatus::Failed),
    })
}

pub(crate) fn parse_googletest(log: &str) -> RawParse {
    simple_lines(log, &GOOGLETEST_LINE, |s| match s {
        "OK" => Some(TestStatus::Passed),
        _ => Some(TestStatus::Failed),
    })
}

pub(crate) fn parse_micropython_test(log: &str) -> RawParse {
    simple_lines(log, &MICROPYTHON_LINE, |s| match s {
        "pass" => Some(TestStatus::Passed),
        "FAIL" => Some(TestStatus::Failed),
        _ => Some(TestStatus::Skipped),
    })
}

/// Each stripped line against `re`: group 1 the status word, group 2 the name.
fn simple_lines(log: &str, re: &Regex, status: impl Fn(&str) -> Option<TestStatus>) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        let Some(caps) = re.captures(py::strip(line)) else {
            continue;
        };
        if let Some(s) = status(&caps[1]) {
            out.set_status(&caps[2], s);
        }
    }
    out
}

/// doctest's `-r=xml` report: every `SubCase` of every `TestCase`, as
/// `<test case> > <subcase>`, failed when any `Expression` inside it (nested
/// subcases' included) has `success` other than `"true"`.
///
/// The reference cuts the log from the first `<doctest` to the first
/// `</doctest>` after it and hands that to ElementTree, which raises on
/// anything not well-formed (a truncated report, output printed inside it).
/// Test cases without subcases are not recorded.
pub(crate) fn parse_doctest(log: &str) -> RawParse {
    const START: &str = "<doctest";
    const END: &str = "</doctest>";
    let mut out = RawParse::default();
    let Some(start) = log.find(START) else {
        return out;
    };
    let xml_text = match log[start..].find(END) {
        Some(i) => &log[start..start + i + END.len()],
        // Python: `-1 + len(end_tag)` = 9 is the slice's end, so the text
        // is empty or a piece of `<doctest`; either way ElementTree raises.
        None => "",
    };
    let root = match xml::parse(xml_text) {
        Ok(root) => root,
        Err(e) => {
            out.raised(format!("ParseError: {e}"));
            return out;
        }
    };
    for case in root.descendants().filter(|e| e.tag == "TestCase") {
        let case_name = case.attr("name").unwrap_or("None");
        for sub in case.descendants().filter(|e| e.tag == "SubCase") {
            let name = format!("{case_name} > {}", sub.attr("name").unwrap_or("None"));
            let passed = sub
                .descendants()
                .filter(|e| e.tag == "Expression")
                .all(|e| e.attr("success") == Some("true"));
            out.set_status(
                name,
                if passed {
                    TestStatus::Passed
                } else {
                    TestStatus::Failed
                },
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::parse::{parse_log, parse_log_raw, status_map, LogParser, TestStatus::*};

    #[test]
    fn captured_logs_match_the_reference() {
        for p in [
            LogParser::Redis,
            LogParser::Jq,
            LogParser::Googletest,
            LogParser::Doctest,
            LogParser::MicropythonTest,
        ] {
            crate::parse::fixtures::assert_matches_reference(p, 3);
        }
    }

    #[test]
    fn redis_durations_and_file_suffixes() {
        let log = "\
[ok]: PING (1 ms)
[ok]: With (parens) (12 ms)\r
[ok]: Two (1 ms) (2 ms)
[ok]: No duration
[ok]: Seconds (3 s)
[err]: Broken thing in tests/unit/x.tcl
[err]: Broken  in  a in tests/unit/y.tcl
[skip]: Skipped (5 ms)
[ignore]: Ignored one
[ok]:NoSpace
[OK]: Upper (1 ms)
";
        assert_eq!(
            parse_log(LogParser::Redis, log),
            status_map(&[
                ("PING", Passed),
                ("With (parens)", Passed),
                ("Two (1 ms)", Passed),
                ("No duration", Passed),
                ("Seconds", Passed),
                ("Broken thing", Failed),
                // Leftmost match of `\s+in\s+\S+$`.
                ("Broken  in  a", Failed),
                ("Skipped", Skipped),
                ("Ignored one", Skipped),
            ])
        );
    }

    #[test]
    fn googletest_takes_the_last_bracket_and_needs_a_duration() {
        let log = "\
1: [       OK ] PrintfTest.NoArgs (0 ms)
2: [  FAILED  ] PrintfTest.MinusFlag (1 ms)
[  FAILED  ] PrintfTest.MinusFlag
[  FAILED  ] 1 test, listed below:
[ OK ] a (b) [ FAILED ] c (d)
[       OK ] Param/T.f/0 (0 ms)
";
        assert_eq!(
            parse_log(LogParser::Googletest, log),
            status_map(&[
                ("PrintfTest.NoArgs", Passed),
                ("PrintfTest.MinusFlag", Failed),
                ("c", Failed),
                ("Param/T.f/0", Passed),
            ])
        );
    }

    #[test]
    fn doctest_truncated_or_garbled_report_is_the_reference_raising() {
        let head = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<doctest binary=\"t\">\n";
        let case = "<TestSuite><TestCase name=\"a\"><SubCase name=\"s\"><Expression success=\"true\"/></SubCase></TestCase></TestSuite>\n";
        let whole = format!("{head}{case}</doctest>\n");
        assert_eq!(
            parse_log(LogParser::Doctest, &whole),
            status_map(&[("a > s", Passed)])
        );
        let truncated = format!("{head}{case}");
        assert!(parse_log_raw(LogParser::Doctest, &truncated)
            .reference_error
            .is_some());
        let garbled = format!("{head}printed & not escaped\n{case}</doctest>");
        assert!(parse_log_raw(LogParser::Doctest, &garbled)
            .reference_error
            .is_some());
        // No report at all: an empty map, no error.
        assert_eq!(
            parse_log_raw(LogParser::Doctest, "nothing"),
            Default::default()
        );
    }
}
