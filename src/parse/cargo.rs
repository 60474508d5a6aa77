//! The reference's `parse_log_cargo` (W5 `log_parsers/rust.py`, same as V4),
//! for libtest's `test <name> ... <outcome>` lines.

use std::sync::LazyLock;

use regex::Regex;

use super::{py, RawParse, TestStatus};

/// `^test\s+(\S+)\s+\.\.\.\s+(\w+)$` on the stripped line, with Python's
/// `\s`. `(\w+)$` has to be the whole tail, so `ignored, reason`, `- should
/// panic ... ok` and doc-test lines (`src/lib.rs - f (line 3) ... ok`) never
/// match.
static TEST_LINE: LazyLock<Regex> = LazyLock::new(|| {
    let (ws, non_ws) = (py::WS, py::NON_WS);
    Regex::new(&format!(r"^test{ws}+({non_ws}+){ws}+\.\.\.{ws}+(\w+)$")).expect("valid regex")
});

pub(crate) fn parse_cargo(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        let Some(caps) = TEST_LINE.captures(py::strip(line)) else {
            continue;
        };
        let name = caps.get(1).map_or("", |m| m.as_str());
        // Only ok and FAILED are recorded; `ignored` is not.
        match caps.get(2).map_or("", |m| m.as_str()) {
            "ok" => out.set_status(name, TestStatus::Passed),
            "FAILED" => out.set_status(name, TestStatus::Failed),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::parse::{parse_log, status_map, LogParser, TestStatus::*};

    /// Real `cargo test` logs (no-fail-fast, one exact test, colours on)
    /// against what the reference's parser makes of them.
    #[test]
    fn captured_logs_match_the_reference() {
        crate::parse::fixtures::assert_matches_reference(LogParser::Cargo, 3);
    }

    /// Real `cargo test --no-fail-fast` output (a demo crate, current stable
    /// toolchain): unit tests with ignored, should_panic and nested-module
    /// tests, an integration test and a doc-test.
    const CARGO_RUN: &str = "\
   Compiling ctdemo v0.1.0 (/tmp/ct)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.28s
     Running unittests src/lib.rs (target/debug/deps/ctdemo-fd207b68197840a5)

running 6 tests
test tests::ignored ... ignored
test tests::ignored_with_reason ... ignored, needs network
test tests::nested::deep ... ok
test tests::fails ... FAILED
test tests::passes ... ok
test tests::panics - should panic ... ok

failures:

---- tests::fails stdout ----

thread 'tests::fails' (9591) panicked at src/lib.rs:21:9:
assertion `left == right` failed
  left: 2
 right: 3

failures:
    tests::fails

test result: FAILED. 3 passed; 1 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.08s

error: test failed, to rerun pass `--lib`
     Running tests/integration.rs (target/debug/deps/integration-e5133c2dc1232985)

running 1 test
test integration_ok ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

   Doc-tests ctdemo

running 1 test
test src/lib.rs - add_one (line 3) ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s
";

    #[test]
    fn cargo_real_run() {
        assert_eq!(
            parse_log(LogParser::Cargo, CARGO_RUN),
            status_map(&[
                ("tests::nested::deep", Passed),
                ("tests::fails", Failed),
                ("tests::passes", Passed),
                ("integration_ok", Passed),
                // Not recorded: ignored tests, `tests::panics - should panic`
                // and the doc-test (their names contain spaces).
            ])
        );
    }

    #[test]
    fn cargo_line_shapes() {
        let log = "\
  test a::b ... ok\r
test\tc   ...\u{1f}FAILED
test d ... ok trailing
test e ... okay
test f ...ok
test g ... test h ... ok
";
        assert_eq!(
            parse_log(LogParser::Cargo, log),
            // Stripped (incl. CR) and any Python whitespace between fields;
            // `okay` matches the regex but is not an outcome it records.
            status_map(&[("a::b", Passed), ("c", Failed)])
        );
    }
}
