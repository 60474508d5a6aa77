//! The reference's pytest-family parsers: `parse_log_pytest`,
//! `parse_log_pytest_options`, `parse_log_pytest_v2`, `parse_log_matplotlib`
//! and `parse_log_seaborn` (W5 `swebench/harness/log_parsers/python.py`).
//!
//! They read the "short test summary info" that `pytest -rA` prints
//! (`STATUS nodeid [- message]`); pytest_v2 also reads old-style verbose
//! lines (`nodeid STATUS`). Status values are whatever token stands in the
//! status position, so they are kept as strings (see [`RawParse`]).

use std::sync::LazyLock;

use regex::Regex;

use super::{py, RawParse, TestStatus};

/// `TestStatus` values in the reference's enum order; a line "starts with a
/// status" if it starts with any of them (so `ERROR:` and `XFAILED` count).
const STATUS_WORDS: [&str; 5] = ["FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL"];

/// pytest's `SKIPPED [N] path:line: reason` summary puts a count where the
/// id should be.
static SKIP_COUNT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\[\d+\]$").expect("valid regex"));

/// `parse_log_pytest_options`'s `(.*?)\[(.*)\]`, applied with `re.search`.
static OPTION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(.*?)\[(.*)\]").expect("valid regex"));

/// `parse_log_pytest_v2` strips `[<digits>m` (ANSI colour codes minus their
/// ESC, which the control-character pass then removes).
static ANSI_FRAGMENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[(\d+)m").expect("valid regex"));

fn starts_with_status(line: &str) -> bool {
    STATUS_WORDS.iter().any(|w| line.starts_with(w))
}

fn ends_with_status(line: &str) -> bool {
    STATUS_WORDS.iter().any(|w| line.ends_with(w))
}

/// W5 only (#598): `SKIPPED [N] ...` is not a test; V4 recorded `[N]` as an
/// id. Deliberately limited to SKIPPED: the reference keeps `PASSED [100%]`
/// (a wrapped progress line) because two pytest-dev instances' PASS_TO_PASS
/// literally contain `[100%]`.
fn is_skip_summary(status: &str, name: &str) -> bool {
    status == TestStatus::Skipped.as_str() && SKIP_COUNT.is_match(name)
}

/// One line as `parse_log_pytest` reads it: `(status, name)`.
fn pytest_line(line: &str) -> Option<(String, String)> {
    if !starts_with_status(line) {
        return None;
    }
    // `FAILED id - message`: replacing " - " with " " keeps the message out
    // of tokens[1], and also rewrites " - " inside an id ("[x - y]" -> "[x y]").
    let replaced;
    let line = if line.starts_with("FAILED") {
        replaced = line.replace(" - ", " ");
        replaced.as_str()
    } else {
        line
    };
    let mut tokens = py::split(line);
    let (status, name) = (tokens.next()?, tokens.next()?);
    if is_skip_summary(status, name) {
        return None;
    }
    // tokens[1] only: an id with a space (`test_x[a b]`) is cut to `test_x[a`
    // (#43, #290); the datasets hold the cut ids.
    Some((status.to_owned(), name.to_owned()))
}

/// `parse_log_pytest` (astroid, flask, marshmallow, pvlib, pyvista, sqlfluff,
/// xarray, pytest). `XPASS` is not a status word, so XPASS lines are ignored.
pub(crate) fn parse_pytest(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        if let Some((status, name)) = pytest_line(line) {
            out.set(name, status);
        }
    }
    out
}

/// `parse_log_matplotlib`: pytest after spelling mouse buttons as numbers, as
/// older matplotlib parametrisations printed them.
pub(crate) fn parse_matplotlib(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        let line = line
            .replace("MouseButton.LEFT", "1")
            .replace("MouseButton.RIGHT", "3");
        if let Some((status, name)) = pytest_line(&line) {
            out.set(name, status);
        }
    }
    out
}

/// `parse_log_pytest_options` (requests, pydicom, pylint): pytest, then a
/// parametrisation that is an absolute path is cut to its last component
/// (`test_x[/tmp/a/b.py]` -> `test_x[/b.py]`), unless it starts with `//` or
/// contains `*`. The id is rebuilt as `main[option]`, so anything after the
/// last `]` is dropped.
pub(crate) fn parse_pytest_options(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        let Some((status, name)) = pytest_line(line) else {
            continue;
        };
        let name = match OPTION.captures(&name) {
            Some(c) => {
                let main = c.get(1).map_or("", |m| m.as_str());
                let option = c.get(2).map_or("", |m| m.as_str());
                if option.starts_with('/') && !option.starts_with("//") && !option.contains('*') {
                    let last = option.rsplit('/').next().unwrap_or_default();
                    format!("{main}[/{last}]")
                } else {
                    format!("{main}[{option}]")
                }
            }
            None => name,
        };
        out.set(name, status);
    }
    out
}

/// `parse_log_pytest_v2` (astropy, scikit-learn, sphinx), W5 semantics.
///
/// Per line: drop `[<digits>m` and characters U+0001..U+001F (tab and CR
/// included), then
/// - `STATUS rest`: FAILED lines are cut at the first " - "; the id is the
///   remaining tokens joined by one space (W5 keeps spaces, #279; V4 took
///   tokens[1] only and replaced " - " like pytest);
/// - else `rest STATUS` (old verbose style): the id is all tokens but the
///   last, joined by one space, the status the last token (V4 took tokens[0]
///   and tokens[1], #338).
pub(crate) fn parse_pytest_v2(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for raw in log.split('\n') {
        let line: String = ANSI_FRAGMENT
            .replace_all(raw, "")
            .chars()
            .filter(|c| !('\u{1}'..='\u{1f}').contains(c))
            .collect();
        if starts_with_status(&line) {
            let line = if line.starts_with("FAILED") {
                line.split(" - ").next().unwrap_or_default()
            } else {
                line.as_str()
            };
            let tokens: Vec<&str> = py::split(line).collect();
            if let [status, name, ..] = tokens.as_slice() {
                if !is_skip_summary(status, name) {
                    out.set(tokens[1..].join(" "), *status);
                }
            }
        } else if ends_with_status(&line) {
            let tokens: Vec<&str> = py::split(&line).collect();
            if let [name @ .., status] = tokens.as_slice() {
                if !name.is_empty() {
                    out.set(name.join(" "), *status);
                }
            }
        }
    }
    out
}

/// `parse_log_seaborn` (run with `pytest --no-header -rA`): only PASSED and
/// FAILED are recorded, from `FAILED id`, `id PASSED ...` and `PASSED id`.
/// W5 skips lines of fewer than two tokens (V4 raised IndexError, #611).
pub(crate) fn parse_seaborn(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        let parts: Vec<&str> = py::split(line).collect();
        let [first, second, ..] = parts.as_slice() else {
            continue;
        };
        if line.starts_with("FAILED") {
            out.set_status(*second, TestStatus::Failed);
        } else if line.contains(" PASSED ") {
            // A line with " PASSED " elsewhere is dropped, not tried below.
            if *second == "PASSED" {
                out.set_status(*first, TestStatus::Passed);
            }
        } else if line.starts_with("PASSED") {
            out.set_status(*second, TestStatus::Passed);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse_log, status_map, LogParser, TestStatus::*};

    /// Closing "short test summary info" of a real `pytest -rA` run
    /// (pytest 9.2.0, Python 3.11.7) over a demo file with passing, failing,
    /// skipped, xfail, xpass, erroring and parametrised tests, one parameter
    /// with a space, one with " - " and several path parameters.
    const SUMMARY: &str = "\
==================================== PASSES ====================================
=================================== XPASSES ====================================
=========================== short test summary info ============================
PASSED tests/test_demo.py::test_pass
PASSED tests/test_demo.py::test_param_space[a b]
PASSED tests/test_demo.py::test_param_space[plain]
PASSED tests/test_demo.py::test_path[/tmp/a/b.py]
PASSED tests/test_demo.py::test_path[//net/share]
PASSED tests/test_demo.py::test_path[/tmp/*.py]
PASSED tests/test_demo.py::test_path[rel/c.py]
PASSED tests/test_demo.py::TestCls::test_method
SKIPPED [1] tests/test_demo.py:12: not today
SKIPPED [1] tests/test_demo.py:18: runtime skip
XFAIL tests/test_demo.py::test_xfail - known bug
XPASS tests/test_demo.py::test_xpass - fixed already
ERROR tests/test_demo.py::test_error - RuntimeError: fixture broke
FAILED tests/test_demo.py::test_fail - AssertionError: one is not two
FAILED tests/test_demo.py::test_param_space[x - y] - AssertionError: assert '...
==== 2 failed, 8 passed, 2 skipped, 1 xfailed, 1 xpassed, 1 error in 0.02s =====
";

    #[test]
    fn pytest_real_summary() {
        assert_eq!(
            parse_log(LogParser::Pytest, SUMMARY),
            status_map(&[
                ("tests/test_demo.py::test_pass", Passed),
                // Truncated at the first space, as in the datasets.
                ("tests/test_demo.py::test_param_space[a", Passed),
                ("tests/test_demo.py::test_param_space[plain]", Passed),
                ("tests/test_demo.py::test_path[/tmp/a/b.py]", Passed),
                ("tests/test_demo.py::test_path[//net/share]", Passed),
                ("tests/test_demo.py::test_path[/tmp/*.py]", Passed),
                ("tests/test_demo.py::test_path[rel/c.py]", Passed),
                ("tests/test_demo.py::TestCls::test_method", Passed),
                ("tests/test_demo.py::test_xfail", Xfail),
                ("tests/test_demo.py::test_error", Error),
                ("tests/test_demo.py::test_fail", Failed),
                // "[x - y]" became "[x y]" and was then cut at the space.
                ("tests/test_demo.py::test_param_space[x", Failed),
            ])
        );
        // Nothing else in the raw dict either: no `[1]`, no XPASS.
        assert_eq!(parse_pytest(SUMMARY).statuses.len(), 12);
    }

    #[test]
    fn pytest_options_real_summary() {
        let got = parse_log(LogParser::PytestOptions, SUMMARY);
        assert_eq!(
            got.get("tests/test_demo.py::test_path[/b.py]"),
            Some(&Passed)
        );
        assert_eq!(got.get("tests/test_demo.py::test_path[/tmp/a/b.py]"), None);
        // `//` and `*` keep the whole option; a relative path is untouched.
        assert_eq!(
            got.get("tests/test_demo.py::test_path[//net/share]"),
            Some(&Passed)
        );
        assert_eq!(
            got.get("tests/test_demo.py::test_path[/tmp/*.py]"),
            Some(&Passed)
        );
        assert_eq!(
            got.get("tests/test_demo.py::test_path[rel/c.py]"),
            Some(&Passed)
        );
        // Still truncated at the space; no `]` so the option rule is skipped.
        assert_eq!(
            got.get("tests/test_demo.py::test_param_space[a"),
            Some(&Passed)
        );
        assert_eq!(
            got.get("tests/test_demo.py::test_param_space[x"),
            Some(&Failed)
        );
        assert_eq!(got.len(), 12);
    }

    #[test]
    fn pytest_options_rebuild_quirks() {
        let log = "\
PASSED t.py::test_a[/x/y/z.py]-suffix
PASSED t.py::test_b[1][/p/q]
PASSED t.py::test_c[/]
FAILED t.py::test_d[/p/q.py] - boom
";
        let got = parse_log(LogParser::PytestOptions, log);
        assert_eq!(
            got,
            status_map(&[
                // Text after the last `]` is lost.
                ("t.py::test_a[/z.py]", Passed),
                // main stops at the first `[`; the option runs to the last `]`.
                ("t.py::test_b[1][/p/q]", Passed),
                ("t.py::test_c[/]", Passed),
                ("t.py::test_d[/q.py]", Failed),
            ])
        );
    }

    #[test]
    fn skip_summary_only_for_skipped() {
        // Reference fixture tests/test_log_parsers_skip_summary.py (#598).
        let log = "SKIPPED [1] tests/test_a.py:12: needs network\n\
                   PASSED tests/test_a.py::test_real\n\
                   SKIPPED [23] tests/test_b.py:4: unsupported platform\n";
        let want = status_map(&[("tests/test_a.py::test_real", Passed)]);
        for p in [
            LogParser::Pytest,
            LogParser::PytestOptions,
            LogParser::PytestV2,
            LogParser::Matplotlib,
        ] {
            assert_eq!(parse_log(p, log), want, "{p}");
        }
        assert_eq!(
            parse_log(LogParser::Pytest, "SKIPPED tests/test_a.py::test_flaky"),
            status_map(&[("tests/test_a.py::test_flaky", Skipped)])
        );
        // The wrapped progress artefact survives (pytest-5262/-7521 expect it).
        assert_eq!(
            parse_log(LogParser::Pytest, "PASSED [100%]"),
            status_map(&[("[100%]", Passed)])
        );
    }

    #[test]
    fn pytest_status_must_start_the_line_and_raw_keeps_odd_tokens() {
        let log = "\
tests/test_demo.py::test_pass PASSED                                      [  6%]
  PASSED tests/x.py::indented
PASSED
ERROR: not found: /testbed/tests/test_demo.py::test_gone
XFAILED t.py::odd
";
        let raw = parse_pytest(log).statuses;
        assert_eq!(
            raw,
            [("not", "ERROR:"), ("t.py::odd", "XFAILED")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        );
        assert!(parse_log(LogParser::Pytest, log).is_empty());
    }

    #[test]
    fn last_write_wins() {
        let log = "FAILED t.py::a - x\nPASSED t.py::a\nPASSED t.py::b\nERROR t.py::b\n";
        assert_eq!(
            parse_log(LogParser::Pytest, log),
            status_map(&[("t.py::a", Passed), ("t.py::b", Error)])
        );
    }

    #[test]
    fn matplotlib_mouse_buttons() {
        // Ids as matplotlib's widget tests printed them before the
        // MouseButton enum repr changed.
        let log = "\
PASSED lib/matplotlib/tests/test_widgets.py::test_span_selector_drag[MouseButton.LEFT]
FAILED lib/matplotlib/tests/test_widgets.py::test_lasso[MouseButton.RIGHT-x] - AssertionError
PASSED lib/matplotlib/tests/test_backend_bases.py::test_interactive_zoom
";
        assert_eq!(
            parse_log(LogParser::Matplotlib, log),
            status_map(&[
                (
                    "lib/matplotlib/tests/test_widgets.py::test_span_selector_drag[1]",
                    Passed
                ),
                (
                    "lib/matplotlib/tests/test_widgets.py::test_lasso[3-x]",
                    Failed
                ),
                (
                    "lib/matplotlib/tests/test_backend_bases.py::test_interactive_zoom",
                    Passed
                ),
            ])
        );
        // Plain pytest keeps the enum spelling.
        assert!(parse_log(LogParser::Pytest, log).contains_key(
            "lib/matplotlib/tests/test_widgets.py::test_span_selector_drag[MouseButton.LEFT]"
        ));
    }

    #[test]
    fn pytest_v2_real_summary_keeps_spaces() {
        assert_eq!(
            parse_log(LogParser::PytestV2, SUMMARY),
            status_map(&[
                ("tests/test_demo.py::test_pass", Passed),
                ("tests/test_demo.py::test_param_space[a b]", Passed),
                ("tests/test_demo.py::test_param_space[plain]", Passed),
                ("tests/test_demo.py::test_path[/tmp/a/b.py]", Passed),
                ("tests/test_demo.py::test_path[//net/share]", Passed),
                ("tests/test_demo.py::test_path[/tmp/*.py]", Passed),
                ("tests/test_demo.py::test_path[rel/c.py]", Passed),
                ("tests/test_demo.py::TestCls::test_method", Passed),
                // Not cut at " - " (only FAILED is), so the message stays.
                ("tests/test_demo.py::test_xfail - known bug", Xfail),
                (
                    "tests/test_demo.py::test_error - RuntimeError: fixture broke",
                    Error
                ),
                ("tests/test_demo.py::test_fail", Failed),
                // Cut at the first " - ", which is inside the id here.
                ("tests/test_demo.py::test_param_space[x", Failed),
            ])
        );
    }

    /// Real `pytest -rA -vv -o console_output_style=classic --tb=no` output
    /// (the astropy <= 1.3 command), pytest 9.2.0: status-at-end lines.
    #[test]
    fn pytest_v2_real_classic_verbose() {
        let log = "\
tests/test_demo.py::test_pass PASSED
tests/test_demo.py::test_fail FAILED
tests/test_demo.py::test_skip SKIPPED (not today)
tests/test_demo.py::test_skip_inside SKIPPED (runtime skip)
tests/test_demo.py::test_xfail XFAIL (known bug)
tests/test_demo.py::test_xpass XPASS (fixed already)
tests/test_demo.py::test_error ERROR
tests/test_demo.py::test_param_space[a b] PASSED
tests/test_demo.py::test_param_space[x - y] FAILED
tests/test_demo.py::test_path[/tmp/a/b.py] PASSED

=========================== short test summary info ============================
FAILED tests/test_demo.py::test_fail - AssertionError: one is not two
assert 1 == 2
";
        assert_eq!(
            parse_log(LogParser::PytestV2, log),
            status_map(&[
                ("tests/test_demo.py::test_pass", Passed),
                ("tests/test_demo.py::test_fail", Failed),
                ("tests/test_demo.py::test_error", Error),
                ("tests/test_demo.py::test_param_space[a b]", Passed),
                ("tests/test_demo.py::test_param_space[x - y]", Failed),
                ("tests/test_demo.py::test_path[/tmp/a/b.py]", Passed),
            ])
        );
        // pytest v1 reads none of the status-at-end lines.
        assert_eq!(
            parse_log(LogParser::Pytest, log),
            status_map(&[("tests/test_demo.py::test_fail", Failed)])
        );
    }

    /// Real `pytest -rA --color=yes` summary lines (pytest 9.2.0).
    #[test]
    fn pytest_v2_strips_colour() {
        let log = "\x1b[32mPASSED\x1b[0m tests/test_demo.py::\x1b[1mtest_param_space[a b]\x1b[0m\n\
                   \x1b[33mSKIPPED\x1b[0m [1] tests/test_demo.py:12: not today\n\
                   \x1b[31mFAILED\x1b[0m tests/test_demo.py::\x1b[1mtest_fail\x1b[0m - AssertionError: one is not two\n\
                   \x1b[31mERROR\x1b[0m tests/test_demo.py::\x1b[1mtest_error\x1b[0m - RuntimeError: fixture broke\r\n";
        assert_eq!(
            parse_log(LogParser::PytestV2, log),
            status_map(&[
                ("tests/test_demo.py::test_param_space[a b]", Passed),
                ("tests/test_demo.py::test_fail", Failed),
                (
                    "tests/test_demo.py::test_error - RuntimeError: fixture broke",
                    Error
                ),
            ])
        );
        // Plain pytest does not strip colour: the line starts with ESC.
        assert!(parse_log(LogParser::Pytest, log).is_empty());
    }

    #[test]
    fn pytest_v2_reference_fixtures() {
        // tests/test_log_parsers_pytest_v2.py in the reference.
        let cases: [(&str, &[(&str, TestStatus)]); 5] = [
            (
                "PASSED astropy/units/tests/test_format.py::test_unicode[m⁻\u{b9}-unit3 extra]",
                &[(
                    "astropy/units/tests/test_format.py::test_unicode[m⁻\u{b9}-unit3 extra]",
                    Passed,
                )],
            ),
            (
                "tests/test_a.py::test_x[a b] PASSED",
                &[("tests/test_a.py::test_x[a b]", Passed)],
            ),
            (
                "FAILED tests/test_a.py::test_x[a b] - AssertionError: expected 1 got 2",
                &[("tests/test_a.py::test_x[a b]", Failed)],
            ),
            (
                "PASSED\nFAILED\ntests/test_a.py::test_y PASSED",
                &[("tests/test_a.py::test_y", Passed)],
            ),
            (
                "\x1b[32mPASSED\x1b[0m tests/test_a.py::\x1b[1mtest_z\x1b[0m",
                &[("tests/test_a.py::test_z", Passed)],
            ),
        ];
        for (log, want) in cases {
            assert_eq!(
                parse_log(LogParser::PytestV2, log),
                status_map(want),
                "{log:?}"
            );
        }
    }

    #[test]
    fn pytest_v2_control_and_fragment_quirks() {
        // Tab is a control character and is deleted, gluing tokens; `[5m`
        // inside an id is taken for a colour code; runs of spaces collapse.
        let log =
            "PASSED\tt.py::a\nPASSED t.py::b[5m]\nPASSED t.py::c[x  y]\n\x1b[1;31mFAILED t.py::d\n";
        let raw = parse_pytest_v2(log).statuses;
        let want: Vec<(&str, &str)> = vec![("t.py::b]", "PASSED"), ("t.py::c[x y]", "PASSED")];
        assert_eq!(
            raw,
            want.into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        );
    }

    #[test]
    fn seaborn_reference_fixture() {
        // tests/test_log_parsers_python.py in the reference.
        let log = "\
test_a.py::test_one PASSED [ 50%]
PASSED test_b.py::test_two
FAILED test_c.py::test_three
PASSED
FAILED
 PASSED
test_b.py::test_two PASSED [100%]
";
        assert_eq!(
            parse_log(LogParser::Seaborn, log),
            status_map(&[
                ("test_a.py::test_one", Passed),
                ("test_b.py::test_two", Passed),
                ("test_c.py::test_three", Failed),
            ])
        );
    }

    /// Real `pytest --no-header -rA -v --tb=no` output (pytest 9.2.0), the
    /// seaborn command plus -v.
    #[test]
    fn seaborn_real_verbose_and_summary() {
        let log = "\
tests/test_demo.py::test_pass PASSED                                     [  6%]
tests/test_demo.py::test_fail FAILED                                     [ 13%]
tests/test_demo.py::test_skip SKIPPED (not today)                        [ 20%]
tests/test_demo.py::test_xfail XFAIL (known bug)                         [ 33%]
tests/test_demo.py::test_error ERROR                                     [ 46%]
tests/test_demo.py::test_param_space[a b] PASSED                         [ 53%]
tests/test_demo.py::test_param_space[plain] PASSED                       [ 60%]
tests/test_demo.py::TestCls::test_method PASSED                          [100%]

=========================== short test summary info ============================
PASSED tests/test_demo.py::test_pass
PASSED tests/test_demo.py::test_param_space[a b]
SKIPPED [1] tests/test_demo.py:12: not today
XFAIL tests/test_demo.py::test_xfail - known bug
ERROR tests/test_demo.py::test_error - RuntimeError: fixture broke
FAILED tests/test_demo.py::test_fail - AssertionError: one is not two
FAILED tests/test_demo.py::test_param_space[x - y] - AssertionError: assert '...
";
        assert_eq!(
            parse_log(LogParser::Seaborn, log),
            status_map(&[
                ("tests/test_demo.py::test_pass", Passed),
                ("tests/test_demo.py::test_fail", Failed),
                // The progress line with a spaced id has "b]" as tokens[1],
                // so only the summary line records it, cut at the space.
                ("tests/test_demo.py::test_param_space[a", Passed),
                ("tests/test_demo.py::test_param_space[plain]", Passed),
                ("tests/test_demo.py::TestCls::test_method", Passed),
                ("tests/test_demo.py::test_param_space[x", Failed),
            ])
        );
    }
}
