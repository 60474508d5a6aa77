//! The reference's generic JavaScript parsers (W5 `log_parsers/javascript.py`):
//! `parse_log_jest` (`--verbose`), `parse_log_jest_json` (`--json` through
//! the dataset's jq filter), `parse_log_vitest` (`--reporter=verbose`),
//! `parse_log_karma` (karma-mocha-reporter's tree), `parse_log_tap` and
//! `parse_log_immutable_js` (jest or jest_json by the instance's PR number:
//! resolved before parsing by [`LogParser::for_instance`]).
//!
//! Fixtures (`testdata/<parser>`): jest's, jest_json's, vitest's and tap's
//! are real runs (jest 29, vitest 2, mocha 10 `-R tap`, qunit 2) of demo test
//! files under node 20, piped through `cat` as the eval scripts do; karma's
//! are real karma 6 + karma-mocha-reporter runs of a demo suite in jsdom (no
//! browser here), with the launcher's `Starting browser` line as preact's
//! runs print it.
//!
//! [`LogParser::for_instance`]: super::LogParser::for_instance

use std::sync::LazyLock;

use regex::Regex;

use super::{py, LogParser, RawParse, TestStatus, UnknownParser};

/// `^\s*(✓|✕|○)\s(.+?)(?:\s\((\d+\s*m?s)\))?$` on the stripped line: the
/// lazy name stops before a trailing ` (12 ms)`.
static JEST_LINE: LazyLock<Regex> = LazyLock::new(|| {
    let ws = py::WS;
    Regex::new(&format!(
        r"^{ws}*(✓|✕|○){ws}(.+?)(?:{ws}\((\d+{ws}*m?s)\))?$"
    ))
    .expect("valid regex")
});

pub(crate) fn parse_jest(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        let Some(caps) = JEST_LINE.captures(py::strip(line)) else {
            continue;
        };
        let status = match &caps[1] {
            "✓" => TestStatus::Passed,
            "✕" => TestStatus::Failed,
            _ => TestStatus::Skipped,
        };
        out.set_status(py::strip(&caps[2]), status);
    }
    out
}

/// `^\[(PASSED|FAILED)\]\s(.+)$` on the stripped line.
static JEST_JSON_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"^\[(PASSED|FAILED)\]{}(.+)$", py::WS)).expect("valid regex")
});

pub(crate) fn parse_jest_json(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        let Some(caps) = JEST_JSON_LINE.captures(py::strip(line)) else {
            continue;
        };
        let status = match &caps[1] {
            "PASSED" => TestStatus::Passed,
            _ => TestStatus::Failed,
        };
        out.set_status(&caps[2], status);
    }
    out
}

/// `^\s*(✓|×|↓)\s(.+?)(?:\s(\d+\s*m?s?|\[skipped\]))?$` on the stripped
/// line. `m?s?` makes any trailing ` <digits>` a duration, so `adds 1 + 1`
/// is recorded as `adds 1 +`; the name is not stripped again.
static VITEST_LINE: LazyLock<Regex> = LazyLock::new(|| {
    let ws = py::WS;
    Regex::new(&format!(
        r"^{ws}*(✓|×|↓){ws}(.+?)(?:{ws}(\d+{ws}*m?s?|\[skipped\]))?$"
    ))
    .expect("valid regex")
});

pub(crate) fn parse_vitest(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        let Some(caps) = VITEST_LINE.captures(py::strip(line)) else {
            continue;
        };
        let status = match &caps[1] {
            "✓" => TestStatus::Passed,
            "×" => TestStatus::Failed,
            _ => TestStatus::Skipped,
        };
        out.set_status(&caps[2], status);
    }
    out
}

/// `^(\s*)?([✔✖])?\s(.*)$` on the raw line (not stripped: the indent is
/// the suite depth, and a `\r` stays in the name).
static KARMA_LINE: LazyLock<Regex> = LazyLock::new(|| {
    let ws = py::WS;
    Regex::new(&format!(r"^({ws}*)?([✔✖])?{ws}(.*)$")).expect("valid regex")
});

pub(crate) fn parse_karma(log: &str) -> RawParse {
    let mut out = RawParse::default();
    let mut current_indent: isize = -1;
    let mut suite: Vec<&str> = Vec::new();
    let mut started = false;
    for line in log.split('\n') {
        if line.starts_with("SUMMARY:") {
            // The per-test lines end here; the failure details repeat names.
            break;
        }
        if line.contains("Starting browser") {
            started = true;
            continue;
        }
        if !started {
            continue;
        }
        let Some(caps) = KARMA_LINE.captures(line) else {
            continue;
        };
        let indent = caps.get(1).map_or("", |m| m.as_str());
        let status = caps.get(2).map(|m| m.as_str());
        let name = caps.get(3).map_or("", |m| m.as_str());
        if !indent.is_empty() && status.is_none() {
            // Python's len(): code points. The reference only ever compares
            // with the last indent seen, so a suite two levels shallower
            // pops one name.
            let new_indent = indent.chars().count() as isize;
            if new_indent > current_indent {
                current_indent = new_indent;
                suite.push(name);
            } else if new_indent < current_indent {
                current_indent = new_indent;
                if suite.pop().is_none() {
                    out.raised("IndexError: pop from empty list".to_string());
                }
                continue;
            }
        }
        if let Some(status) = status {
            let status = if status == "✔" {
                TestStatus::Passed
            } else {
                TestStatus::Failed
            };
            let mut full = suite.join(" > ");
            if !suite.is_empty() {
                full.push_str(" > ");
            }
            full.push_str(name);
            out.set_status(full, status);
        }
    }
    out
}

/// `^(ok|not ok) (\d+) (.+)$` on the stripped line: the name is everything
/// after the number, a `- ` or a `# SKIP` directive included.
static TAP_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(ok|not ok) (\d+) (.+)$").expect("valid regex"));

pub(crate) fn parse_tap(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        let Some(caps) = TAP_LINE.captures(py::strip(line)) else {
            continue;
        };
        let status = match &caps[1] {
            "ok" => TestStatus::Passed,
            _ => TestStatus::Failed,
        };
        out.set_status(&caps[3], status);
    }
    out
}

/// The parser `parse_log_immutable_js` hands an instance to: by the last
/// `-`-separated part of its id (the PR number), as the reference does.
pub(crate) fn immutable_js_for(instance_id: &str) -> Result<LogParser, UnknownParser> {
    match instance_id.rsplit('-').next().unwrap_or_default() {
        "2006" => Ok(LogParser::Jest),
        "2005" => Ok(LogParser::JestJson),
        _ => Err(UnknownParser {
            // The reference raises `ValueError: Unknown instance id: <id>`.
            name: format!("parse_log_immutable_js for instance id {instance_id:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use crate::parse::{parse_log, parse_log_raw, status_map, LogParser, TestStatus::*};

    #[test]
    fn captured_jest_logs_match_the_reference() {
        crate::parse::fixtures::assert_matches_reference(LogParser::Jest, 3);
    }

    #[test]
    fn captured_jest_json_logs_match_the_reference() {
        crate::parse::fixtures::assert_matches_reference(LogParser::JestJson, 3);
    }

    #[test]
    fn captured_vitest_logs_match_the_reference() {
        crate::parse::fixtures::assert_matches_reference(LogParser::Vitest, 3);
    }

    #[test]
    fn captured_karma_logs_match_the_reference() {
        crate::parse::fixtures::assert_matches_reference(LogParser::Karma, 3);
    }

    #[test]
    fn captured_tap_logs_match_the_reference() {
        crate::parse::fixtures::assert_matches_reference(LogParser::Tap, 3);
    }

    #[test]
    fn captured_immutable_js_logs_match_the_reference() {
        crate::parse::fixtures::assert_matches_reference(LogParser::ImmutableJs, 3);
    }

    #[test]
    fn jest_drops_the_duration_and_strips() {
        let log = "  ✓ a (105 ms)\n✕ b (3ms)\n○ skipped c\n✓ d (slow)\n✓\te  (1 s)\n";
        assert_eq!(
            parse_log(LogParser::Jest, log),
            status_map(&[
                ("a", Passed),
                ("b", Failed),
                ("skipped c", Skipped),
                ("d (slow)", Passed),
                ("e", Passed),
            ])
        );
    }

    #[test]
    fn vitest_takes_a_trailing_number_for_a_duration() {
        let log = " ✓ f > adds 1 + 1\n × f > b 12ms\n ↓ f > c [skipped]\n ✓ f > d  3ms\n";
        assert_eq!(
            parse_log(LogParser::Vitest, log),
            status_map(&[
                ("f > adds 1 +", Passed),
                ("f > b", Failed),
                ("f > c", Skipped),
                ("f > d ", Passed),
            ])
        );
    }

    #[test]
    fn karma_suites_follow_the_last_indent_only() {
        let log = "\
✔ before start is ignored
INFO [launcher]: Starting browser ChromeHeadless
  outer
    ✔ a
    inner
      ✖ b
  next
    ✔ c
SUMMARY:
  ✔ after summary
";
        assert_eq!(
            parse_log(LogParser::Karma, log),
            // The indent is one less than the spaces (`\s` takes the last
            // one). `next` (1 < 3) only pops `inner`: the reference keeps
            // `outer` and never pushes `next`.
            status_map(&[
                ("outer > a", Passed),
                ("outer > inner > b", Failed),
                ("outer > c", Passed),
            ])
        );
    }

    #[test]
    fn karma_popping_an_empty_suite_is_the_reference_raising() {
        let log = "Starting browser X\n    a\n   b\n  c\n";
        let raw = parse_log_raw(LogParser::Karma, log);
        assert!(raw.reference_error.is_some(), "{raw:?}");
    }

    #[test]
    fn tap_names_keep_everything_after_the_number() {
        let log = "ok 1 a b\nnot ok 2 - c # TODO\nok 3\n  ok 4 nested\nok x y\n";
        assert_eq!(
            parse_log(LogParser::Tap, log),
            status_map(&[("a b", Passed), ("- c # TODO", Failed), ("nested", Passed)])
        );
    }

    #[test]
    fn immutable_js_dispatches_on_the_pr_number() {
        let jest = LogParser::ImmutableJs.for_instance("immutable-js__immutable-js-2006", "2006");
        assert_eq!(jest, Ok(LogParser::Jest));
        let json = LogParser::ImmutableJs.for_instance("immutable-js__immutable-js-2005", "");
        assert_eq!(json, Ok(LogParser::JestJson));
        let err = LogParser::ImmutableJs
            .for_instance("immutable-js__immutable-js-1999", "1999")
            .unwrap_err();
        assert!(err.to_string().contains("immutable-js-1999"), "{err}");
        // Unresolved, it cannot parse: the reference needs the instance.
        let raw = parse_log_raw(LogParser::ImmutableJs, "✓ a\n");
        assert!(raw.statuses.is_empty() && raw.reference_error.is_some());
        // Other parsers do not depend on the instance.
        assert_eq!(LogParser::Tap.for_instance("x-1", "1"), Ok(LogParser::Tap));
    }
}
