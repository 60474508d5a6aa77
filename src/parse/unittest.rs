//! patchgrade extension: `python -m unittest -v` (and any runner built on
//! `unittest.TextTestRunner` at verbosity >= 2, Django's included).
//!
//! No reference parser exists, so ids are ours: `module.Class.test_name`,
//! the same whether Python printed `test_name (module.Class)` (<= 3.10) or
//! `test_name (module.Class.test_name)` (3.11+), so a dataset's ids do not
//! depend on the interpreter. Shapes handled (CPython `unittest/runner.py`):
//! - `desc ... status`, status one of `ok`, `FAIL`, `ERROR`,
//!   `skipped 'reason'`, `expected failure` (XFAIL), `unexpected success`
//!   (FAILED);
//! - a docstring: `desc` alone, then `<docstring first line> ... status`;
//! - output between ` ... ` and the status, which then sits alone on a
//!   later line;
//! - 3.11+ subtest lines `  desc (params) ... FAIL|ERROR`, which fail the
//!   parent test; <= 3.10 prints nothing for a failed subtest, so the next
//!   test's description follows on the same line;
//! - the `FAIL: desc` / `ERROR: desc` / `UNEXPECTED SUCCESS: desc` headers
//!   of the closing report, which also catch class and module fixtures
//!   (`setUpClass (module.Class)` -> `module.Class.setUpClass`).
//!
//! Not handled: status text glued to output that did not end in a newline
//! (`...outputok`), and doctests run through unittest (no `(class)` part).

use std::sync::LazyLock;

use regex::Regex;

use super::{RawParse, TestStatus};

/// `name (class)` at the start of a line, with 3.11's two-space indent for
/// subtests; group 4 is whatever follows.
static DESCRIPTION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(  )?([^\s()]+) \(([^\s()]+)\)(.*)$").expect("valid regex"));

/// Closing-report headers and the status each one means.
const REPORT_HEADERS: [(&str, TestStatus); 3] = [
    ("FAIL: ", TestStatus::Failed),
    ("ERROR: ", TestStatus::Error),
    ("UNEXPECTED SUCCESS: ", TestStatus::Failed),
];

/// A parsed `name (class)...` description.
struct Description<'a> {
    id: String,
    /// A subtest: `[msg]` and/or `(params)` follow the class.
    subtest: bool,
    indented: bool,
    rest: &'a str,
}

fn description(line: &str) -> Option<Description<'_>> {
    let caps = DESCRIPTION.captures(line)?;
    let name = caps.get(2)?.as_str();
    let class = caps.get(3)?.as_str();
    let rest = caps.get(4).map_or("", |m| m.as_str());
    // 3.11+ prints `module.Class.name`; <= 3.10 `module.Class`. (A <= 3.10
    // method named like its own class would be taken for the 3.11 form.)
    let id = match class.strip_suffix(name).and_then(|c| c.strip_suffix('.')) {
        Some(c) if !c.is_empty() => class.to_owned(),
        _ => format!("{class}.{name}"),
    };
    Some(Description {
        id,
        subtest: rest.starts_with(" (") || rest.starts_with(" ["),
        indented: caps.get(1).is_some(),
        rest,
    })
}

/// The text after the first ` ... ` (or an empty tail for a line ending in
/// ` ...` whose trailing space was trimmed).
fn first_tail(s: &str) -> Option<&str> {
    match s.split_once(" ... ") {
        Some((_, tail)) => Some(tail),
        None => s.ends_with(" ...").then_some(""),
    }
}

/// Like [`first_tail`] but after the last ` ... `.
fn last_tail(s: &str) -> Option<&str> {
    match s.rsplit_once(" ... ") {
        Some((_, tail)) => Some(tail),
        None => s.ends_with(" ...").then_some(""),
    }
}

fn status_of(s: &str) -> Option<TestStatus> {
    let s = s.trim_end();
    Some(match s {
        "ok" => TestStatus::Passed,
        "FAIL" | "unexpected success" => TestStatus::Failed,
        "ERROR" => TestStatus::Error,
        "expected failure" => TestStatus::Xfail,
        // `skipped {reason!r}`
        _ if s.starts_with("skipped '") || s.starts_with("skipped \"") => TestStatus::Skipped,
        _ => return None,
    })
}

#[derive(Default)]
struct UnittestParser {
    out: RawParse,
    /// Test whose ` ... ` was printed but whose status has not come yet.
    awaiting_status: Option<String>,
    /// Test whose description was printed alone: its docstring line is next.
    awaiting_docstring: Option<(String, bool)>,
}

impl UnittestParser {
    fn line(&mut self, line: &str) {
        let line = line.strip_suffix('\r').unwrap_or(line);

        if let Some((id, subtest)) = self.awaiting_docstring.take() {
            // `<docstring first line> ... status`; the docstring may hold
            // " ... " itself, so prefer the split that yields a status.
            let tail = last_tail(line)
                .filter(|t| status_of(t).is_some())
                .or_else(|| first_tail(line));
            if let Some(tail) = tail {
                self.after_dots(id, subtest, tail);
                return;
            }
        }

        if line.starts_with("======") || line.starts_with("------") {
            // Closing report: nothing pending can get a status any more.
            self.awaiting_status = None;
            return;
        }
        for (prefix, status) in REPORT_HEADERS {
            if let Some(rest) = line.strip_prefix(prefix) {
                if let Some(d) = description(rest) {
                    self.out.set_status(d.id, status);
                }
                self.awaiting_status = None;
                return;
            }
        }
        if let Some(d) = description(line) {
            if self.progress(d) {
                return;
            }
        }
        if let Some(status) = status_of(line) {
            if let Some(id) = self.awaiting_status.take() {
                self.out.set_status(id, status);
            }
        }
    }

    /// A progress line `desc ...`; false if the line is not one.
    fn progress(&mut self, d: Description<'_>) -> bool {
        if d.indented != d.subtest {
            // Indented non-subtests and unindented "subtests" are test
            // output that happens to look like a description.
            return false;
        }
        if d.subtest {
            match last_tail(d.rest) {
                Some(tail) => self.after_dots(d.id, true, tail),
                None => self.awaiting_docstring = Some((d.id, true)),
            }
            return true;
        }
        if d.rest.is_empty() {
            self.awaiting_docstring = Some((d.id, false));
            return true;
        }
        match first_tail(d.rest).filter(|_| d.rest.starts_with(" ...")) {
            Some(tail) => {
                self.after_dots(d.id, false, tail);
                true
            }
            None => false,
        }
    }

    fn after_dots(&mut self, id: String, subtest: bool, tail: &str) {
        let status = status_of(tail);
        if subtest {
            // Only failing subtests are printed with a status that matters;
            // the parent prints nothing more after one (3.11+).
            if let Some(s @ (TestStatus::Failed | TestStatus::Error)) = status {
                self.out.set_status(id.clone(), s);
            }
            self.awaiting_status = Some(id);
            return;
        }
        if let Some(s) = status {
            self.out.set_status(id, s);
            self.awaiting_status = None;
            return;
        }
        self.awaiting_status = Some(id);
        // <= 3.10: a test that printed no status (failed subtests) is
        // followed on the same line by the next test's description.
        if let Some(next) = description(tail) {
            if !next.indented {
                self.awaiting_status = None;
                self.progress(next);
            }
        }
    }
}

pub(crate) fn parse_unittest(log: &str) -> RawParse {
    let mut p = UnittestParser::default();
    for line in log.split('\n') {
        p.line(line);
    }
    p.out
}

#[cfg(test)]
mod tests {
    use crate::parse::{parse_log, status_map, LogParser, StatusMap, TestStatus::*};

    /// Real `python3 -m unittest -v pkg.test_demo` output, CPython 3.11.7.
    const PY311: &str = "\
test_doc (pkg.test_demo.Basic.test_doc)
Docstring first line. ... ok
test_doc_fail (pkg.test_demo.Basic.test_doc_fail)
Fails ... with dots in the docstring. ... FAIL
test_error (pkg.test_demo.Basic.test_error) ... ERROR
test_fail (pkg.test_demo.Basic.test_fail) ... FAIL
test_pass (pkg.test_demo.Basic.test_pass) ... ok
test_prints (pkg.test_demo.Basic.test_prints) ... some output
more output
ok
test_prints_stderr (pkg.test_demo.Basic.test_prints_stderr) ... err line
ok
test_skip (pkg.test_demo.Basic.test_skip) ... skipped 'not today'
test_subtests (pkg.test_demo.Basic.test_subtests) ... 
  test_subtests (pkg.test_demo.Basic.test_subtests) (i=1) ... FAIL
test_xfail (pkg.test_demo.Basic.test_xfail) ... expected failure
test_xpass (pkg.test_demo.Basic.test_xpass) ... unexpected success
ERROR
test_a (pkg.test_demo.Skipped.test_a) ... skipped 'whole class'

======================================================================
ERROR: test_error (pkg.test_demo.Basic.test_error)
----------------------------------------------------------------------
Traceback (most recent call last):
  File \"/tmp/ut/pkg/test_demo.py\", line 13, in test_error
    raise RuntimeError(\"boom\")
RuntimeError: boom

======================================================================
ERROR: setUpClass (pkg.test_demo.BrokenSetup)
----------------------------------------------------------------------
Traceback (most recent call last):
  File \"/tmp/ut/pkg/test_demo.py\", line 59, in setUpClass
    raise ValueError(\"setup\")
ValueError: setup

======================================================================
FAIL: test_doc_fail (pkg.test_demo.Basic.test_doc_fail)
Fails ... with dots in the docstring.
----------------------------------------------------------------------
Traceback (most recent call last):
  File \"/tmp/ut/pkg/test_demo.py\", line 35, in test_doc_fail
    self.fail(\"no\")
AssertionError: no

======================================================================
FAIL: test_fail (pkg.test_demo.Basic.test_fail)
----------------------------------------------------------------------
Traceback (most recent call last):
  File \"/tmp/ut/pkg/test_demo.py\", line 10, in test_fail
    self.assertEqual(1, 2)
AssertionError: 1 != 2

======================================================================
FAIL: test_subtests (pkg.test_demo.Basic.test_subtests) (i=1)
----------------------------------------------------------------------
Traceback (most recent call last):
  File \"/tmp/ut/pkg/test_demo.py\", line 47, in test_subtests
    self.assertNotEqual(i, 1)
AssertionError: 1 == 1

======================================================================
UNEXPECTED SUCCESS: test_xpass (pkg.test_demo.Basic.test_xpass)
----------------------------------------------------------------------
Ran 12 tests in 0.001s

FAILED (failures=3, errors=2, skipped=2, expected failures=1, unexpected successes=1)
";

    fn expected_demo() -> StatusMap {
        status_map(&[
            ("pkg.test_demo.Basic.test_doc", Passed),
            ("pkg.test_demo.Basic.test_doc_fail", Failed),
            ("pkg.test_demo.Basic.test_error", Error),
            ("pkg.test_demo.Basic.test_fail", Failed),
            ("pkg.test_demo.Basic.test_pass", Passed),
            ("pkg.test_demo.Basic.test_prints", Passed),
            ("pkg.test_demo.Basic.test_prints_stderr", Passed),
            ("pkg.test_demo.Basic.test_skip", Skipped),
            ("pkg.test_demo.Basic.test_subtests", Failed),
            ("pkg.test_demo.Basic.test_xfail", Xfail),
            ("pkg.test_demo.Basic.test_xpass", Failed),
            ("pkg.test_demo.Skipped.test_a", Skipped),
            ("pkg.test_demo.BrokenSetup.setUpClass", Error),
        ])
    }

    #[test]
    fn unittest_real_py311() {
        assert_eq!(parse_log(LogParser::Unittest, PY311), expected_demo());
    }

    #[test]
    fn unittest_without_closing_report() {
        // The progress lines alone carry every per-test status; only the
        // class fixture error needs the report.
        let progress = PY311.split("\n\n====").next().unwrap_or_default();
        let mut want = expected_demo();
        want.remove("pkg.test_demo.BrokenSetup.setUpClass");
        assert_eq!(parse_log(LogParser::Unittest, progress), want);
    }

    /// The same run as CPython <= 3.10 prints it (`str(test)` is
    /// `name (module.Class)`, and nothing is printed for a failed subtest, per
    /// 3.10's `unittest/runner.py`; the first line is from a real SWE-bench
    /// django log quoted in SWE-bench issue #319).
    #[test]
    fn unittest_py310_form_gives_the_same_ids() {
        let log = "\
test_override_media_root (test_utils.tests.OverrideSettingsTests) ... ok
test_doc (pkg.test_demo.Basic)
Docstring first line. ... ok
test_doc_fail (pkg.test_demo.Basic)
Fails ... with dots in the docstring. ... FAIL
test_error (pkg.test_demo.Basic) ... ERROR
test_fail (pkg.test_demo.Basic) ... FAIL
test_pass (pkg.test_demo.Basic) ... ok
test_prints (pkg.test_demo.Basic) ... some output
more output
ok
test_prints_stderr (pkg.test_demo.Basic) ... err line
ok
test_skip (pkg.test_demo.Basic) ... skipped 'not today'
test_subtests (pkg.test_demo.Basic) ... test_xfail (pkg.test_demo.Basic) ... expected failure
test_xpass (pkg.test_demo.Basic) ... unexpected success
setUpClass (pkg.test_demo.BrokenSetup) ... ERROR
test_a (pkg.test_demo.Skipped) ... skipped 'whole class'

======================================================================
ERROR: test_error (pkg.test_demo.Basic)
----------------------------------------------------------------------
======================================================================
FAIL: test_doc_fail (pkg.test_demo.Basic)
Fails ... with dots in the docstring.
----------------------------------------------------------------------
======================================================================
FAIL: test_subtests (pkg.test_demo.Basic) (i=1)
----------------------------------------------------------------------
Ran 12 tests in 0.001s
";
        let mut want = expected_demo();
        want.insert(
            "test_utils.tests.OverrideSettingsTests.test_override_media_root".into(),
            Passed,
        );
        assert_eq!(parse_log(LogParser::Unittest, log), want);
    }

    #[test]
    fn unittest_reads_django_runner_output() {
        // Real Django 5.2 `test -v 2` lines (see the django parser's tests).
        let log = "\
System check identified no issues (0 silenced).
test_db (app.tests.DbTests.test_db) ... ok
test_docstring (app.tests.PlainTests.test_docstring)
A docstring whose first line becomes the name. ... ok
test_prints (app.tests.PlainTests.test_prints) ... noise from the test
ok
test_skipped (app.tests.PlainTests.test_skipped) ... skipped 'skip reason'
";
        assert_eq!(
            parse_log(LogParser::Unittest, log),
            status_map(&[
                ("app.tests.DbTests.test_db", Passed),
                ("app.tests.PlainTests.test_docstring", Passed),
                ("app.tests.PlainTests.test_prints", Passed),
                ("app.tests.PlainTests.test_skipped", Skipped),
            ])
        );
    }

    #[test]
    fn unittest_subtest_with_docstring_and_crlf() {
        // 3.11 prints a subtest's parent docstring too.
        let log = "test_s (m.C.test_s)\r\nCheck things. ... \r\n  test_s (m.C.test_s) [msg] (x='a b')\r\nCheck things. ... ERROR\r\ntest_t (m.C.test_t) ... ok\r\n";
        assert_eq!(
            parse_log(LogParser::Unittest, log),
            status_map(&[("m.C.test_s", Error), ("m.C.test_t", Passed)])
        );
    }

    #[test]
    fn unittest_output_lookalikes_do_not_record() {
        let log = "\
test_p (m.C) ... starting
  not_a_test (looks.Like) ... ok
ok then
FAIL
test_q (m.C) ... ok
ok
";
        // test_p gets the lone FAIL line; the indented lookalike and the
        // "ok then" line do nothing; the stray "ok" after test_q is ignored.
        assert_eq!(
            parse_log(LogParser::Unittest, log),
            status_map(&[("m.C.test_p", Failed), ("m.C.test_q", Passed)])
        );
    }
}
