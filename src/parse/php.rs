//! The reference's `parse_log_phpunit` (W5 `log_parsers/php.py`), for
//! `phpunit --testdox --colors=never` output.
//!
//! Fixtures (`testdata/phpunit/`): real output of Debian's PHPUnit 9.6.7
//! (PHP 8.2) on small test classes made for them, `--testdox` with and
//! without `--colors=never`, data sets, skipped and incomplete tests; one
//! given CRLF line ends and one cut mid-line.

use std::sync::LazyLock;

use regex::Regex;

use super::{py, RawParse, TestStatus};

/// `^(\w.+) \(.+\)$`: a testdox class heading, `Round (Carbon\Tests\Round)`.
/// Matched on the raw line (no strip), so a CRLF log's headings never match
/// and a heading indented or starting with punctuation is not one either.
static SUITE_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"^({}.+) \(.+\)$", py::WORD)).expect("valid regex"));

/// `^\s*([✔✘↩])\s*(.*)$`: a test line; the name keeps whatever follows,
/// a CR included. Incomplete (`∅`) and risky (`☢`) tests are not recorded.
static TEST_LINE: LazyLock<Regex> = LazyLock::new(|| {
    let ws = py::WS;
    Regex::new(&format!(r"^{ws}*([✔✘↩]){ws}*(.*)$")).expect("valid regex")
});

pub(crate) fn parse_phpunit(log: &str) -> RawParse {
    let mut out = RawParse::default();
    // Python's f-string of `None` before the first heading.
    let mut suite = "None".to_string();
    for line in log.split('\n') {
        if let Some(caps) = SUITE_LINE.captures(line) {
            suite = caps[1].to_string();
            continue;
        }
        let Some(caps) = TEST_LINE.captures(line) else {
            continue;
        };
        let status = match &caps[1] {
            "✔" => TestStatus::Passed,
            "✘" => TestStatus::Failed,
            _ => TestStatus::Skipped,
        };
        out.set_status(format!("{suite} > {}", &caps[2]), status);
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::parse::{parse_log, status_map, LogParser, TestStatus::*};

    #[test]
    fn captured_logs_match_the_reference() {
        crate::parse::fixtures::assert_matches_reference(LogParser::Phpunit, 3);
    }

    #[test]
    fn phpunit_heading_and_test_rules() {
        let log = "\
 ✔ Before any heading
Round (Carbon\\Tests\\Round)
 ✔ Floor year
 ✘ Round with strings\r
 ↩ Skipped one
 ∅ Incomplete one
(Not a heading) (x)
✔No space
 Indented (Not\\A\\Heading)
   ✔ Nested   
Crlf (Heading)\r
 ✔ After crlf heading
";
        assert_eq!(
            parse_log(LogParser::Phpunit, log),
            status_map(&[
                ("None > Before any heading", Passed),
                ("Round > Floor year", Passed),
                ("Round > Round with strings\r", Failed),
                ("Round > Skipped one", Skipped),
                ("Round > No space", Passed),
                ("Round > Nested   ", Passed),
                // The CRLF heading does not match: the suite stays `Round`.
                ("Round > After crlf heading", Passed),
            ])
        );
    }
}
