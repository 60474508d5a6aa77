//! Test-log parsers, output-compatible with the reference harness.
//!
//! The datasets' FAIL_TO_PASS / PASS_TO_PASS ids were produced by the
//! reference's parsers, so each parser here reproduces their tokenisation
//! exactly, quirks included. The reference is SWE-bench 5.0.2 (W5:
//! `swebench/harness/log_parsers/{python,rust,go,java,javascript,php,ruby,c}.py`);
//! where v4.1.0 (V4) behaved differently the parser module says so. The
//! captured logs they are checked against are described in docs/parsers.md.
//!
//! Every parser is a plain sync function over `&str` (the caller decodes
//! non-UTF-8 logs lossily) and never panics.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

mod c;
mod cargo;
mod django;
#[cfg(test)]
pub(crate) mod fixtures;
mod gotest;
mod java;
mod javascript;
mod php;
mod py;
mod pytest;
mod ruby;
mod sympy;
mod unittest;
mod xml;

/// Status of one test as the reference harness records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TestStatus {
    Passed,
    Failed,
    Skipped,
    Error,
    Xfail,
}

impl TestStatus {
    /// The reference's `TestStatus.X.value`.
    pub const fn as_str(self) -> &'static str {
        match self {
            TestStatus::Passed => "PASSED",
            TestStatus::Failed => "FAILED",
            TestStatus::Skipped => "SKIPPED",
            TestStatus::Error => "ERROR",
            TestStatus::Xfail => "XFAIL",
        }
    }

    /// The reference's exact `TestStatus` values; anything else is `None`.
    pub fn from_reference(s: &str) -> Option<TestStatus> {
        Some(match s {
            "PASSED" => TestStatus::Passed,
            "FAILED" => TestStatus::Failed,
            "SKIPPED" => TestStatus::Skipped,
            "ERROR" => TestStatus::Error,
            "XFAIL" => TestStatus::Xfail,
            _ => return None,
        })
    }
}

impl fmt::Display for TestStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Test id -> status; last write wins per name, as in the reference.
pub type StatusMap = BTreeMap<String, TestStatus>;

/// Test id -> status string exactly as the reference stores it.
///
/// The pytest-family parsers store whatever token sits where the status
/// should be (`ERROR:` from `ERROR: not found: ...`, say), so the reference's
/// map can hold values that are not a [`TestStatus`].
pub type RawStatusMap = BTreeMap<String, String>;

/// What the reference parser would have produced for a log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawParse {
    /// The reference's dict, value strings verbatim.
    pub statuses: RawStatusMap,
    /// Set when the reference parser would have raised on this log (the
    /// reference then writes no report: the instance counts as an error).
    /// The line is skipped here and parsing goes on.
    pub reference_error: Option<String>,
    /// Ids patchgrade adds beside the reference's, never replacing one: a
    /// Django test printed with a docstring under its name form
    /// (`test_x (module.Class)`), which the reference records only under
    /// the docstring line. Kept apart so `statuses` stays the reference's.
    pub aliases: RawStatusMap,
}

impl RawParse {
    fn set(&mut self, name: impl Into<String>, status: impl Into<String>) {
        self.statuses.insert(name.into(), status.into());
    }

    fn set_status(&mut self, name: impl Into<String>, status: TestStatus) {
        self.set(name, status.as_str());
    }

    fn raised(&mut self, what: String) {
        // Python stops at the first exception; keep the first.
        self.reference_error.get_or_insert(what);
    }
}

/// Which parser reads a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogParser {
    Pytest,
    PytestOptions,
    PytestV2,
    Django,
    Sympy,
    Seaborn,
    Matplotlib,
    Cargo,
    GoTest,
    /// patchgrade extension: `python -m unittest -v`, ids normalised to
    /// `module.Class.test` whatever the Python version.
    Unittest,
    // Java and JavaScript (SWE-bench Multilingual).
    Maven,
    Ant,
    GradleCustom,
    Jest,
    JestJson,
    Vitest,
    Karma,
    Tap,
    /// Jest or JestJson by the instance: see [`LogParser::for_instance`].
    ImmutableJs,
    // PHP, Ruby, C/C++ (W5 `php.py`, `ruby.py`, `c.py`).
    Phpunit,
    Minitest,
    Cucumber,
    RubyUnit,
    RspecTransformedJson,
    /// Minitest or Cucumber by the instance: see [`LogParser::for_instance`].
    Jekyll,
    Redis,
    Jq,
    Googletest,
    Doctest,
    MicropythonTest,
}

/// A parser name that [`LogParser::from_str`] does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown log parser {name:?}; valid names: {valid} (each also as parse_log_<name>, \
     and the reference's per-repo aliases {aliases})",
    valid = LogParser::ALL.iter().map(|p| p.name()).collect::<Vec<_>>().join(", "),
    aliases = REPO_ALIASES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
)]
pub struct UnknownParser {
    pub name: String,
}

/// W5 `PARSER_REGISTRY` keys that are per-repo aliases of a generic parser.
const REPO_ALIASES: [(&str, LogParser); 13] = [
    ("parse_log_astroid", LogParser::Pytest),
    ("parse_log_flask", LogParser::Pytest),
    ("parse_log_marshmallow", LogParser::Pytest),
    ("parse_log_pvlib", LogParser::Pytest),
    ("parse_log_pyvista", LogParser::Pytest),
    ("parse_log_sqlfluff", LogParser::Pytest),
    ("parse_log_xarray", LogParser::Pytest),
    ("parse_log_pydicom", LogParser::PytestOptions),
    ("parse_log_requests", LogParser::PytestOptions),
    ("parse_log_pylint", LogParser::PytestOptions),
    ("parse_log_astropy", LogParser::PytestV2),
    ("parse_log_scikit", LogParser::PytestV2),
    ("parse_log_sphinx", LogParser::PytestV2),
];

impl LogParser {
    pub const ALL: &'static [LogParser] = &[
        LogParser::Pytest,
        LogParser::PytestOptions,
        LogParser::PytestV2,
        LogParser::Django,
        LogParser::Sympy,
        LogParser::Seaborn,
        LogParser::Matplotlib,
        LogParser::Cargo,
        LogParser::GoTest,
        LogParser::Unittest,
        LogParser::Maven,
        LogParser::Ant,
        LogParser::GradleCustom,
        LogParser::Jest,
        LogParser::JestJson,
        LogParser::Vitest,
        LogParser::Karma,
        LogParser::Tap,
        LogParser::ImmutableJs,
        LogParser::Phpunit,
        LogParser::Minitest,
        LogParser::Cucumber,
        LogParser::RubyUnit,
        LogParser::RspecTransformedJson,
        LogParser::Jekyll,
        LogParser::Redis,
        LogParser::Jq,
        LogParser::Googletest,
        LogParser::Doctest,
        LogParser::MicropythonTest,
    ];

    /// Short name; the reference's registry key is `parse_log_<name>`.
    pub const fn name(&self) -> &'static str {
        match self {
            LogParser::Pytest => "pytest",
            LogParser::PytestOptions => "pytest_options",
            LogParser::PytestV2 => "pytest_v2",
            LogParser::Django => "django",
            LogParser::Sympy => "sympy",
            LogParser::Seaborn => "seaborn",
            LogParser::Matplotlib => "matplotlib",
            LogParser::Cargo => "cargo",
            LogParser::GoTest => "gotest",
            LogParser::Unittest => "unittest",
            LogParser::Maven => "maven",
            LogParser::Ant => "ant",
            LogParser::GradleCustom => "gradle_custom",
            LogParser::Jest => "jest",
            LogParser::JestJson => "jest_json",
            LogParser::Vitest => "vitest",
            LogParser::Karma => "karma",
            LogParser::Tap => "tap",
            LogParser::ImmutableJs => "immutable_js",
            LogParser::Phpunit => "phpunit",
            LogParser::Minitest => "minitest",
            LogParser::Cucumber => "cucumber",
            LogParser::RubyUnit => "ruby_unit",
            LogParser::RspecTransformedJson => "rspec_transformed_json",
            LogParser::Jekyll => "jekyll",
            LogParser::Redis => "redis",
            LogParser::Jq => "jq",
            LogParser::Googletest => "googletest",
            LogParser::Doctest => "doctest",
            LogParser::MicropythonTest => "micropython_test",
        }
    }

    /// The parser that reads `instance_id`'s logs: `self`, except for the
    /// reference's parsers that pick another one by the instance (their
    /// choice is made here, before parsing, so the spec names the parser
    /// that really reads the log). Errs where the reference would raise.
    pub fn for_instance(
        self,
        instance_id: &str,
        version: &str,
    ) -> Result<LogParser, UnknownParser> {
        let _ = version;
        match self {
            LogParser::ImmutableJs => javascript::immutable_js_for(instance_id),
            LogParser::Jekyll => ruby::jekyll_for(instance_id),
            other => Ok(other),
        }
    }
}

impl fmt::Display for LogParser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LogParser {
    type Err = UnknownParser;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let short = s.strip_prefix("parse_log_").unwrap_or(s);
        if let Some(p) = LogParser::ALL.iter().find(|p| p.name() == short) {
            return Ok(*p);
        }
        REPO_ALIASES
            .iter()
            .find(|(alias, _)| *alias == s)
            .map(|(_, p)| *p)
            .ok_or_else(|| UnknownParser { name: s.to_owned() })
    }
}

impl serde::Serialize for LogParser {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for LogParser {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Parse a log exactly as the reference would, status strings verbatim.
pub fn parse_log_raw(parser: LogParser, log: &str) -> RawParse {
    match parser {
        LogParser::Pytest => pytest::parse_pytest(log),
        LogParser::PytestOptions => pytest::parse_pytest_options(log),
        LogParser::PytestV2 => pytest::parse_pytest_v2(log),
        LogParser::Matplotlib => pytest::parse_matplotlib(log),
        LogParser::Seaborn => pytest::parse_seaborn(log),
        LogParser::Django => django::parse_django(log),
        LogParser::Sympy => sympy::parse_sympy(log),
        LogParser::Cargo => cargo::parse_cargo(log),
        LogParser::GoTest => gotest::parse_gotest(log),
        LogParser::Unittest => unittest::parse_unittest(log),
        LogParser::Maven => java::parse_maven(log),
        LogParser::Ant => java::parse_ant(log),
        LogParser::GradleCustom => java::parse_gradle_custom(log),
        LogParser::Jest => javascript::parse_jest(log),
        LogParser::JestJson => javascript::parse_jest_json(log),
        LogParser::Vitest => javascript::parse_vitest(log),
        LogParser::Karma => javascript::parse_karma(log),
        LogParser::Tap => javascript::parse_tap(log),
        LogParser::ImmutableJs => RawParse {
            // The reference picks jest or jest_json by the instance id; a
            // parser not resolved with `for_instance` cannot know which.
            reference_error: Some(
                "parse_log_immutable_js needs the instance id (LogParser::for_instance)".into(),
            ),
            ..RawParse::default()
        },
        LogParser::Phpunit => php::parse_phpunit(log),
        LogParser::Minitest => ruby::parse_minitest(log),
        LogParser::Cucumber => ruby::parse_cucumber(log),
        LogParser::RubyUnit => ruby::parse_ruby_unit(log),
        LogParser::RspecTransformedJson => ruby::parse_rspec_transformed_json(log),
        LogParser::Jekyll => RawParse {
            // The reference picks minitest or cucumber by the PR number.
            reference_error: Some(
                "parse_log_jekyll needs the instance id (LogParser::for_instance)".into(),
            ),
            ..RawParse::default()
        },
        LogParser::Redis => c::parse_redis(log),
        LogParser::Jq => c::parse_jq(log),
        LogParser::Googletest => c::parse_googletest(log),
        LogParser::Doctest => c::parse_doctest(log),
        LogParser::MicropythonTest => c::parse_micropython_test(log),
    }
}

/// Parse a log into test id -> status.
///
/// Entries whose reference status is not a [`TestStatus`] value (only the
/// pytest family can produce them) are left out; use [`parse_log_raw`] to see
/// them, and whether the reference would have raised.
pub fn parse_log(parser: LogParser, log: &str) -> StatusMap {
    let raw = parse_log_raw(parser, log);
    let mut map: StatusMap = raw
        .statuses
        .into_iter()
        .filter_map(|(name, s)| TestStatus::from_reference(&s).map(|s| (name, s)))
        .collect();
    for (name, s) in raw.aliases {
        if let Some(s) = TestStatus::from_reference(&s) {
            map.entry(name).or_insert(s);
        }
    }
    map
}

/// A status map from literal pairs, for tests.
#[cfg(test)]
pub(crate) fn status_map(entries: &[(&str, TestStatus)]) -> StatusMap {
    entries.iter().map(|(k, s)| (k.to_string(), *s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in LogParser::ALL {
            assert_eq!(p.name().parse::<LogParser>(), Ok(*p));
            assert_eq!(
                format!("parse_log_{}", p.name()).parse::<LogParser>(),
                Ok(*p)
            );
            assert_eq!(p.to_string(), p.name());
        }
        assert_eq!(LogParser::ALL.len(), 30);
        assert_eq!("parse_log_ruby_unit".parse(), Ok(LogParser::RubyUnit));
        assert_eq!(
            "parse_log_micropython_test".parse(),
            Ok(LogParser::MicropythonTest)
        );
        assert_eq!("gotest".parse(), Ok(LogParser::GoTest));
        assert_eq!("parse_log_gotest".parse(), Ok(LogParser::GoTest));
        assert_eq!("parse_log_cargo".parse(), Ok(LogParser::Cargo));
    }

    #[test]
    fn reference_repo_aliases() {
        assert_eq!("parse_log_astropy".parse(), Ok(LogParser::PytestV2));
        assert_eq!("parse_log_requests".parse(), Ok(LogParser::PytestOptions));
        assert_eq!("parse_log_xarray".parse(), Ok(LogParser::Pytest));
        // Aliases exist only in the registry's spelling.
        assert!("astropy".parse::<LogParser>().is_err());
    }

    #[test]
    fn unknown_parser_lists_valid_names() {
        let err = "parse_log_nose".parse::<LogParser>().unwrap_err();
        assert_eq!(
            err,
            UnknownParser {
                name: "parse_log_nose".into()
            }
        );
        let msg = err.to_string();
        assert!(
            msg.starts_with("unknown log parser \"parse_log_nose\"; valid names: pytest, "),
            "{msg}"
        );
        for p in LogParser::ALL {
            assert!(msg.contains(p.name()), "{msg}");
        }
        assert!(msg.contains("parse_log_sphinx"), "{msg}");
        // No case folding: the reference registry is case-sensitive.
        assert!("Pytest".parse::<LogParser>().is_err());
        assert!("".parse::<LogParser>().is_err());
    }

    #[test]
    fn serde_uses_the_names() {
        assert_eq!(
            serde_json::to_string(&LogParser::PytestV2).unwrap(),
            "\"pytest_v2\""
        );
        let p: LogParser = serde_json::from_str("\"parse_log_django\"").unwrap();
        assert_eq!(p, LogParser::Django);
        let p: LogParser = serde_yaml_ng::from_str("pytest").unwrap();
        assert_eq!(p, LogParser::Pytest);
        let err = serde_json::from_str::<LogParser>("\"nose\"").unwrap_err();
        assert!(
            err.to_string().contains("unknown log parser \"nose\""),
            "{err}"
        );
    }

    #[test]
    fn status_strings() {
        for s in [
            TestStatus::Passed,
            TestStatus::Failed,
            TestStatus::Skipped,
            TestStatus::Error,
            TestStatus::Xfail,
        ] {
            assert_eq!(TestStatus::from_reference(s.as_str()), Some(s));
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
        assert_eq!(TestStatus::from_reference("XPASS"), None);
        assert_eq!(TestStatus::from_reference("passed"), None);
    }

    #[test]
    fn parse_log_drops_non_status_values_but_raw_keeps_them() {
        // Real pytest output for a node id that does not exist.
        let log = "ERROR: not found: /testbed/tests/test_a.py::test_gone\nPASSED tests/test_a.py::test_b\n";
        let raw = parse_log_raw(LogParser::Pytest, log);
        assert_eq!(raw.statuses.get("not").map(String::as_str), Some("ERROR:"));
        let map = parse_log(LogParser::Pytest, log);
        assert_eq!(
            map,
            StatusMap::from([("tests/test_a.py::test_b".to_string(), TestStatus::Passed)])
        );
    }

    #[test]
    fn every_parser_survives_hostile_input() {
        let nasty = [
            "",
            "\n",
            "FAILED",
            "PASSED",
            "FAIL:",
            "ERROR:",
            "ok",
            "test_",
            " ... ",
            "[",
            "]",
            "--- PASS: ",
            "test  ...  ok",
            "\u{0}\u{1b}[0m\u{1f}é\u{2028}",
            "FAILED - - -",
            "x (y) ... ",
            "x (y)\n",
            "____ a.py: ____",
            "Applying sites.0002_alter_domain_unique...test_no_migrations ... ok",
        ];
        for p in LogParser::ALL {
            for s in nasty {
                let _ = parse_log(*p, s);
                let _ = parse_log(*p, &s.repeat(3));
            }
        }
    }
}
