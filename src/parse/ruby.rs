//! The reference's Ruby parsers (W5 `log_parsers/ruby.py`): minitest `-v`,
//! cucumber progress, test-unit `-v`, RSpec's JSON turned into lines by
//! `jq`, and jekyll's choice between minitest and cucumber by PR number.
//!
//! Fixtures: real output of Debian's ruby 3.1 runners on small suites made
//! for them: minitest 5.17 (`ruby -Itest t.rb -v`, shoulda-context names as
//! jekyll's), test-unit 3.5.7 (`ruby t.rb -v`, sub-test-cases, data-driven
//! tests), RSpec 3.12 (`--format json | jq -r` with the dataset's own `jq`
//! programs) and cucumber 2.4 (`--format progress`, and the per-scenario
//! lines that jekyll's own formatter prints, from its `features/support`).

use std::sync::LazyLock;

use regex::Regex;

use super::{py, LogParser, RawParse, TestStatus, UnknownParser};

/// `^(.+)\. .*=.*(\.|F|E).*$` on the stripped line: minitest's
/// `Class#test_x = 0.00 s = .`. All greedy, so the name runs to the last
/// `. ` that still has a `=` and then an outcome character after it, and
/// the outcome is the last `.`/`F`/`E` after the last such `=`.
static MINITEST_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(.+)\. .*=.*(\.|F|E).*$").expect("valid regex"));

/// `^(.*) \.+(\.|F)` on the stripped line, not anchored at the end.
static CUCUMBER_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(.*) \.+(\.|F)").expect("valid regex"));

/// `(.+) - (passed|failed)` with `re.match`: anchored at the start only,
/// greedy, so the name runs to the last ` - passed`/` - failed`.
static RSPEC_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(.+) - (passed|failed)").expect("valid regex"));

pub(crate) fn parse_minitest(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        let Some(caps) = MINITEST_LINE.captures(py::strip(line)) else {
            continue;
        };
        let status = if &caps[2] == "." {
            TestStatus::Passed
        } else {
            TestStatus::Failed
        };
        out.set_status(&caps[1], status);
    }
    out
}

pub(crate) fn parse_cucumber(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        let Some(caps) = CUCUMBER_LINE.captures(py::strip(line)) else {
            continue;
        };
        let status = if &caps[2] == "." {
            TestStatus::Passed
        } else {
            TestStatus::Failed
        };
        out.set_status(&caps[1], status);
    }
    out
}

pub(crate) fn parse_rspec_transformed_json(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        let Some(caps) = RSPEC_LINE.captures(py::strip(line)) else {
            continue;
        };
        // The reference's `pending` and `raise` branches cannot be reached:
        // the regex admits only these two.
        let status = if &caps[2] == "passed" {
            TestStatus::Passed
        } else {
            TestStatus::Failed
        };
        out.set_status(&caps[1], status);
    }
    out
}

pub(crate) fn parse_ruby_unit(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        if let Some((name, outcome)) = ruby_unit_match(py::strip(line)) {
            let status = match outcome {
                '.' => TestStatus::Passed,
                'O' => TestStatus::Skipped,
                _ => TestStatus::Failed,
            };
            out.set_status(name, status);
        }
    }
    out
}

/// `re.match(r"^\s*(?:test: )?(.+):\s+(\.|E\b|F\b|O\b)", line)`, by hand so
/// that `\b` is Python's (a Rust regex `\b` has another `\w`).
///
/// The order is the backtracking engine's: the optional `test: ` is tried
/// first, and the greedy `(.+)` ends at the rightmost `:` that works. The
/// line is already stripped, so `^\s*` matches nothing.
fn ruby_unit_match(line: &str) -> Option<(&str, char)> {
    let bodies = line
        .strip_prefix("test: ")
        .into_iter()
        .chain(std::iter::once(line));
    for body in bodies {
        for (colon, _) in body.match_indices(':').rev() {
            if colon == 0 {
                continue;
            }
            let after = &body[colon + 1..];
            let rest = py::lstrip(after);
            if rest.len() == after.len() {
                continue; // `\s+` needs one
            }
            let mut chars = rest.chars();
            let outcome = match chars.next() {
                Some('.') => '.',
                Some(c @ ('E' | 'F' | 'O')) if !chars.next().is_some_and(py::is_word) => c,
                _ => continue,
            };
            return Some((&body[..colon], outcome));
        }
    }
    None
}

/// `parse_log_jekyll`'s choice: the PR number is the instance id's second
/// `-`-separated field (`jekyll__jekyll-8047` → `8047`, as Python's
/// `split("-")[1]`; an id without `-` raises `IndexError` there, any other
/// PR `ValueError: Unknown instance id`).
pub(crate) fn jekyll_for(instance_id: &str) -> Result<LogParser, UnknownParser> {
    match instance_id.split('-').nth(1) {
        Some("9141" | "8047" | "8167") => Ok(LogParser::Minitest),
        Some("8761" | "8771") => Ok(LogParser::Cucumber),
        _ => Err(UnknownParser {
            name: format!("parse_log_jekyll for instance id {instance_id:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use crate::parse::{parse_log, status_map, LogParser, TestStatus::*};

    #[test]
    fn captured_logs_match_the_reference() {
        for p in [
            LogParser::Minitest,
            LogParser::Cucumber,
            LogParser::RubyUnit,
            LogParser::RspecTransformedJson,
            LogParser::Jekyll,
        ] {
            crate::parse::fixtures::assert_matches_reference(p, 3);
        }
    }

    #[test]
    fn ruby_unit_word_boundary_backtracks_to_an_earlier_colon() {
        let log = "\
  test_a:\t\t\t.: (0.001s)
a: E b: Ex
test: test: F
test_c: O\u{345}
test_d: Fé
test_e: E-1
test_f:.
:.
";
        assert_eq!(
            parse_log(LogParser::RubyUnit, log),
            status_map(&[
                ("test_a", Passed),
                // `Ex` fails `\b`, so `(.+)` gives back to the first colon.
                ("a", Failed),
                ("test", Failed),
                // U+0345 is not Python's `\w`: a boundary.
                ("test_c", Skipped),
                ("test_e", Failed),
            ])
        );
    }

    #[test]
    fn minitest_and_rspec_greedy_names() {
        let log = "TestX#test_a. b = 0.00 s = .\nTestY#test_b = 0.00 s = F\nT#t. = E. = x\n";
        assert_eq!(
            parse_log(LogParser::Minitest, log),
            status_map(&[("TestX#test_a", Passed), ("T#t", Passed)])
        );
        let log = "a - passed - failed\nb - passedly\nc -  passed\n";
        assert_eq!(
            parse_log(LogParser::RspecTransformedJson, log),
            status_map(&[("a - passed", Failed), ("b", Passed)])
        );
    }

    #[test]
    fn jekyll_dispatches_on_the_pr_number() {
        let p = |id: &str| LogParser::Jekyll.for_instance(id, "");
        assert_eq!(p("jekyll__jekyll-8047"), Ok(LogParser::Minitest));
        assert_eq!(p("jekyll__jekyll-9141"), Ok(LogParser::Minitest));
        assert_eq!(p("jekyll__jekyll-8761"), Ok(LogParser::Cucumber));
        // Python's `split("-")[1]`: the second field, not the last.
        assert!(p("jekyll__jekyll-1-8047").is_err());
        assert_eq!(p("x-8771-y"), Ok(LogParser::Cucumber));
        assert!(p("jekyll__jekyll").is_err());
        assert!(p("jekyll__jekyll-1234").is_err());
        // Without an instance the reference cannot choose: it would raise.
        assert!(
            crate::parse::parse_log_raw(LogParser::Jekyll, "T#t. = 0 s = .")
                .reference_error
                .is_some()
        );
    }
}
