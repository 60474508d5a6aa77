//! The reference's `parse_log_django` (W5 `log_parsers/python.py`, unchanged
//! since V4), for `./tests/runtests.py --verbosity 2` output.
//!
//! Django's runner is unittest's, so a test prints as `name (module.Class)
//! ... status` (Python <= 3.10) or `name (module.Class.name) ... status`
//! (3.11+). With a docstring, unittest prints `name (...)` alone and the
//! docstring's first line before ` ... `; the reference takes that line, so
//! the id is the docstring line (#314: 3,709 of 20,300 Django ids in
//! Verified). Ids are kept exactly as printed, for either Python.

use std::sync::LazyLock;

use regex::Regex;

use super::{py, RawParse, TestStatus};

const PASS_SUFFIXES: [&str; 3] = [" ... ok", " ... OK", " ...  OK"];

/// Output that Django printed between ` ... ` and `ok` on another line, as
/// the reference matches it over the whole log. The third pattern lacks the
/// `.` Django prints after `(0 silenced)`, so it never matches real output;
/// kept as is.
static WRAPPED_OK: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    let ws = py::WS;
    [
        format!(r"(?m)^(.*?){ws}\.\.\.{ws}Testing against Django installed in ((?s:.*?)) silenced\)\.\nok$"),
        format!(r"(?m)^(.*?){ws}\.\.\.{ws}Internal Server Error: /(.*)/\nok$"),
        format!(r"(?m)^(.*?){ws}\.\.\.{ws}System check identified no issues \(0 silenced\)\nok$"),
    ]
    .map(|p| Regex::new(&p).expect("valid regex"))
});

/// `FAIL: name (...)` / `ERROR: name (...)`: the reference keeps only the
/// second whitespace token, i.e. the bare method name, a different key from
/// the `name (module.Class)` of the progress line.
fn header_name<'a>(line: &'a str, out: &mut RawParse) -> Option<&'a str> {
    let name = py::split(line).nth(1);
    if name.is_none() {
        // `line.split()[1]` raises IndexError in the reference.
        out.raised(format!("IndexError on django line {line:?}"));
    }
    name
}

/// `test_x (module.Class)` or `test_x (module.Class.test_x)` alone on a
/// line: unittest's verbose name line of a test with a docstring.
static NAME_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\w+ \([\w.]+\)$").expect("valid regex"));

/// The status a ` ... ` line gives its test, by the same suffix rules as
/// the reference's (first match in the reference's order wins at the end:
/// later rules overwrite, so check them last to first).
fn line_status(line: &str) -> Option<TestStatus> {
    if line.ends_with(" ... ERROR") {
        Some(TestStatus::Error)
    } else if line.ends_with(" ... FAIL") {
        Some(TestStatus::Failed)
    } else if line.contains(" ... skipped") {
        Some(TestStatus::Skipped)
    } else if PASS_SUFFIXES.iter().any(|s| line.ends_with(s)) {
        Some(TestStatus::Passed)
    } else {
        None
    }
}

pub(crate) fn parse_django(log: &str) -> RawParse {
    let mut out = RawParse::default();
    let mut prev_test: Option<String> = None;
    // The name line just before a docstring line, and the name of the test
    // whose ` ... ` line was seen last (for `ok` on a later line).
    let mut name_line: Option<String> = None;
    let mut prev_name: Option<String> = None;
    for line in log.split('\n') {
        let mut line = py::strip(line);

        // Held-out and hand-written ids name a docstring test by its name;
        // the reference only records the docstring line. Record the name
        // form too, as an alias (issue 10).
        if line.contains(" ... ") {
            prev_name = name_line.take();
            if let (Some(name), Some(status)) = (&prev_name, line_status(line)) {
                out.aliases
                    .insert(name.clone(), status.as_str().to_string());
            }
        } else if NAME_LINE.is_match(line) {
            name_line = Some(line.to_string());
        } else if !line.is_empty() && !py::lstrip(line).starts_with("ok") {
            name_line = None;
        }

        // A test whose output spans lines; recorded wherever the text appears.
        if line.contains("--version is equivalent to version") {
            out.set_status("--version is equivalent to version", TestStatus::Passed);
        }

        if line.contains(" ... ") {
            prev_test = line.split(" ... ").next().map(str::to_owned);
        }

        for suffix in PASS_SUFFIXES {
            if line.ends_with(suffix) {
                // Reference special case for django__django-7188, where a
                // migration message shares the test's line. It also changes
                // the line the checks below see.
                if line.starts_with("Applying sites.0002_alter_domain_unique...test_no_migrations")
                {
                    line = py::strip(line.split_once("...").map_or(line, |(_, rest)| rest));
                }
                let test = line.rsplit_once(suffix).map_or(line, |(head, _)| head);
                out.set_status(test, TestStatus::Passed);
                break;
            }
        }
        if line.contains(" ... skipped") {
            let test = line.split(" ... skipped").next().unwrap_or_default();
            out.set_status(test, TestStatus::Skipped);
        }
        if line.ends_with(" ... FAIL") {
            // Up to the *first* " ... FAIL", as `split(...)[0]` does.
            let test = line.split(" ... FAIL").next().unwrap_or_default();
            out.set_status(test, TestStatus::Failed);
        }
        if line.starts_with("FAIL:") {
            if let Some(test) = header_name(line, &mut out) {
                out.set_status(test, TestStatus::Failed);
            }
        }
        if line.ends_with(" ... ERROR") {
            let test = line.split(" ... ERROR").next().unwrap_or_default();
            out.set_status(test, TestStatus::Error);
        }
        if line.starts_with("ERROR:") {
            if let Some(test) = header_name(line, &mut out) {
                out.set_status(test, TestStatus::Error);
            }
        }

        // Output printed between " ... " and "ok": any later line starting
        // with "ok" passes the most recent " ... " test, whatever happened
        // in between.
        if py::lstrip(line).starts_with("ok") {
            if let Some(test) = &prev_test {
                out.set_status(test.clone(), TestStatus::Passed);
            }
            if let Some(name) = &prev_name {
                out.aliases
                    .insert(name.clone(), TestStatus::Passed.as_str().to_string());
            }
        }
    }

    for re in WRAPPED_OK.iter() {
        for caps in re.captures_iter(log) {
            if let Some(test) = caps.get(1) {
                out.set_status(test.as_str(), TestStatus::Passed);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse_log, parse_log_raw, status_map, LogParser, TestStatus::*};

    /// Real `python -m django test -v 2` output (Django 5.2.19, Python
    /// 3.11.7, the same DiscoverRunner runtests.py uses), so 3.11-style ids.
    const DJANGO_311: &str = "\
Found 7 test(s).
Creating test database for alias 'default' ('file:memorydb_default?mode=memory&cache=shared')...
Operations to perform:
  Synchronize unmigrated apps: app
  Apply all migrations: auth, contenttypes
Synchronizing apps without migrations:
  Creating tables...
    Running deferred SQL...
Running migrations:
  Applying contenttypes.0001_initial... OK
  Applying auth.0012_alter_user_first_name_max_length... OK
System check identified no issues (0 silenced).
test_db (app.tests.DbTests.test_db) ... ok
test_docstring (app.tests.PlainTests.test_docstring)
A docstring whose first line becomes the name. ... ok
test_errors (app.tests.PlainTests.test_errors) ... ERROR
test_fails (app.tests.PlainTests.test_fails) ... FAIL
test_ok (app.tests.PlainTests.test_ok) ... ok
test_prints (app.tests.PlainTests.test_prints) ... noise from the test
ok
test_skipped (app.tests.PlainTests.test_skipped) ... skipped 'skip reason'

======================================================================
ERROR: test_errors (app.tests.PlainTests.test_errors)
----------------------------------------------------------------------
Traceback (most recent call last):
  File \"/tmp/dj/app/tests.py\", line 19, in test_errors
    raise KeyError(\"k\")
KeyError: 'k'

======================================================================
FAIL: test_fails (app.tests.PlainTests.test_fails)
----------------------------------------------------------------------
Traceback (most recent call last):
  File \"/tmp/dj/app/tests.py\", line 16, in test_fails
    self.assertEqual(1, 2)
AssertionError: 1 != 2

----------------------------------------------------------------------
Ran 7 tests in 0.001s

FAILED (failures=1, errors=1, skipped=1)
Destroying test database for alias 'default' ('file:memorydb_default?mode=memory&cache=shared')...
";

    #[test]
    fn django_real_py311_run() {
        assert_eq!(
            parse_log(LogParser::Django, DJANGO_311),
            status_map(&[
                ("test_db (app.tests.DbTests.test_db)", Passed),
                // The docstring line is the reference's id ...
                ("A docstring whose first line becomes the name.", Passed),
                // ... and patchgrade's alias names the test.
                (
                    "test_docstring (app.tests.PlainTests.test_docstring)",
                    Passed
                ),
                ("test_errors (app.tests.PlainTests.test_errors)", Error),
                ("test_fails (app.tests.PlainTests.test_fails)", Failed),
                ("test_ok (app.tests.PlainTests.test_ok)", Passed),
                // "ok" on the line after the test's own output.
                ("test_prints (app.tests.PlainTests.test_prints)", Passed),
                ("test_skipped (app.tests.PlainTests.test_skipped)", Skipped),
                // From the FAIL:/ERROR: headers: bare method names.
                ("test_errors", Error),
                ("test_fails", Failed),
            ])
        );
    }

    /// Python <= 3.10 lines from a real SWE-bench django run (test_utils,
    /// quoted in SWE-bench issue #319).
    #[test]
    fn django_real_py310_lines() {
        let log = "\
test_override_media_root (test_utils.tests.OverrideSettingsTests) ... ok
test_override_static_url (test_utils.tests.OverrideSettingsTests) ... ok
test_urlconf_cache (test_utils.tests.OverrideSettingsTests) ... ok
test_allowed_hosts (test_utils.tests.SetupTestEnvironmentTests) ... ok
test_skip_if_db_feature (test_utils.tests.SkippingTestCase) ... ok
";
        assert_eq!(
            parse_log(LogParser::Django, log),
            status_map(&[
                (
                    "test_override_media_root (test_utils.tests.OverrideSettingsTests)",
                    Passed
                ),
                (
                    "test_override_static_url (test_utils.tests.OverrideSettingsTests)",
                    Passed
                ),
                (
                    "test_urlconf_cache (test_utils.tests.OverrideSettingsTests)",
                    Passed
                ),
                (
                    "test_allowed_hosts (test_utils.tests.SetupTestEnvironmentTests)",
                    Passed
                ),
                (
                    "test_skip_if_db_feature (test_utils.tests.SkippingTestCase)",
                    Passed
                ),
            ])
        );
    }

    #[test]
    fn docstring_names_as_in_verified() {
        // django__django-16950's FAIL_TO_PASS id is this docstring line
        // (SWE-bench issue #275); unittest printed it after the test name.
        let log = "\
test_inlineformset_factory_nulls_default_pks_alternate_key_relation_data (model_formsets.test_uuid.InlineFormsetTests.test_inlineformset_factory_nulls_default_pks_alternate_key_relation_data)
If form data is provided, a parent's auto-generated alternate key is ... ok
";
        // The reference's dict holds the docstring line only ...
        let raw = parse_log_raw(LogParser::Django, log);
        assert_eq!(
            raw.statuses.keys().collect::<Vec<_>>(),
            ["If form data is provided, a parent's auto-generated alternate key is"]
        );
        // ... patchgrade also knows the test by its name.
        assert_eq!(
            parse_log(LogParser::Django, log),
            status_map(&[
                (
                    "If form data is provided, a parent's auto-generated alternate key is",
                    Passed
                ),
                (
                    "test_inlineformset_factory_nulls_default_pks_alternate_key_relation_data (model_formsets.test_uuid.InlineFormsetTests.test_inlineformset_factory_nulls_default_pks_alternate_key_relation_data)",
                    Passed
                ),
            ])
        );
    }

    #[test]
    fn docstring_tests_also_recorded_by_name() {
        // Python 3.10 form (django__django-14787 / -16595 held-out ids are
        // in this name form): a pass, a failure, a skip, output between
        // the docstring line and `ok`, and a plain test between them.
        let log = "\
test_a (utils_tests.test_decorators.MethodDecoratorTests)
@method_decorator preserves wrapper assignments. ... ok
test_b (utils_tests.test_decorators.MethodDecoratorTests)
Docstring of b. ... FAIL
test_plain (utils_tests.test_decorators.MethodDecoratorTests) ... ok
test_c (m.C)
Docstring of c. ... skipped 'no db'
test_d (m.C)
Docstring of d. ... Internal Server Error: /x/
ok
";
        let got = parse_log(LogParser::Django, log);
        assert_eq!(
            got["test_a (utils_tests.test_decorators.MethodDecoratorTests)"],
            Passed
        );
        assert_eq!(
            got["@method_decorator preserves wrapper assignments."],
            Passed
        );
        assert_eq!(
            got["test_b (utils_tests.test_decorators.MethodDecoratorTests)"],
            Failed
        );
        assert_eq!(
            got["test_plain (utils_tests.test_decorators.MethodDecoratorTests)"],
            Passed
        );
        assert_eq!(got["test_c (m.C)"], Skipped);
        assert_eq!(got["test_d (m.C)"], Passed);
        // A name line not followed by a docstring line gives nothing.
        let got = parse_log(LogParser::Django, "test_e (m.C)\nsome output\nX ... ok\n");
        assert!(!got.contains_key("test_e (m.C)"));
        // An alias never replaces a reference id.
        let log = "test_f (m.C) ... FAIL\ntest_f (m.C)\nDoc. ... ok\n";
        assert_eq!(parse_log(LogParser::Django, log)["test_f (m.C)"], Failed);
    }

    #[test]
    fn pass_suffix_variants_and_first_occurrence_rules() {
        let log = "\
test_a (m.C) ... OK
test_b (m.C) ...  OK
  test_c (m.C) ... ok  \r
Fails ... with dots ... FAIL
Errs ... with dots ... ERROR
test_s (m.C) ... skipped 'Database has feature(s) supports_x'
";
        assert_eq!(
            parse_log(LogParser::Django, log),
            status_map(&[
                ("test_a (m.C)", Passed),
                ("test_b (m.C)", Passed),
                ("test_c (m.C)", Passed),
                // FAIL/ERROR cut at the first " ... " of the suffix text,
                // which here is inside a docstring.
                ("Fails ... with dots", Failed),
                ("Errs ... with dots", Error),
                ("test_s (m.C)", Skipped),
            ])
        );
    }

    #[test]
    fn ok_continuation_uses_latest_dotted_line() {
        // The reference passes the last " ... " test on any later line that
        // starts with "ok", even after that test printed FAIL.
        let log = "\
test_x (m.C) ... FAIL
some output
okay, this line starts with ok
test_y (m.C) ... ERROR
";
        assert_eq!(
            parse_log(LogParser::Django, log),
            status_map(&[("test_x (m.C)", Passed), ("test_y (m.C)", Error)])
        );
    }

    #[test]
    fn version_and_migration_special_cases() {
        let log = "\
test_version (admin_scripts.tests.CommandTypes)
--version is equivalent to version ... ok
Applying sites.0002_alter_domain_unique...test_no_migrations (migrations.test_loader.LoaderTests) ... ok
";
        assert_eq!(
            parse_log(LogParser::Django, log),
            status_map(&[
                ("--version is equivalent to version", Passed),
                (
                    "test_no_migrations (migrations.test_loader.LoaderTests)",
                    Passed
                ),
                // The name-form alias of the docstring test.
                ("test_version (admin_scripts.tests.CommandTypes)", Passed),
            ])
        );
    }

    #[test]
    fn multiline_patterns() {
        // The interrupted-output forms named in the reference comment. Here
        // another " ... " line comes between test_one and its "ok", so only
        // the first multi-line regex can pass test_one (and the line loop
        // passes "setup" instead).
        let log = "\
test_one (m.C) ... Testing against Django installed in '/testbed/django' with up to 2 processes
setup ... done
System check identified no issues (0 silenced).
ok
test_two (m.C) ... Internal Server Error: /wrong/
ok
test_three (m.C) ... System check identified no issues (0 silenced).
ok
";
        assert_eq!(
            parse_log(LogParser::Django, log),
            status_map(&[
                ("test_one (m.C)", Passed),
                ("setup", Passed),
                ("test_two (m.C)", Passed),
                ("test_three (m.C)", Passed),
            ])
        );
        let matched = |re: &Regex| -> Vec<String> {
            re.captures_iter(log)
                .filter_map(|c| c.get(1).map(|m| m.as_str().to_owned()))
                .collect()
        };
        assert_eq!(matched(&WRAPPED_OK[0]), ["test_one (m.C)"]);
        assert_eq!(matched(&WRAPPED_OK[1]), ["test_two (m.C)"]);
        // The third wants "(0 silenced)\nok" without Django's period, so it
        // misses real output, as in the reference.
        assert!(matched(&WRAPPED_OK[2]).is_empty());
        assert!(WRAPPED_OK[2]
            .is_match("t (m.C) ... System check identified no issues (0 silenced)\nok"));
    }

    #[test]
    fn short_header_lines_would_raise_in_reference() {
        let log = "test_a (m.C) ... ok\nFAIL:\nERROR:root:boom\nERROR: test_b (m.C)\n";
        let raw = parse_log_raw(LogParser::Django, log);
        assert_eq!(
            raw.reference_error.as_deref(),
            Some("IndexError on django line \"FAIL:\"")
        );
        assert_eq!(
            parse_log(LogParser::Django, log),
            status_map(&[("test_a (m.C)", Passed), ("test_b", Error)])
        );
        assert_eq!(
            parse_log_raw(LogParser::Django, DJANGO_311).reference_error,
            None
        );
    }
}
