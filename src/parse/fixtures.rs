//! (tests only) Captured logs beside the reference parser's own output.
//!
//! `src/parse/testdata/<parser>/<case>.log` is a log; `<case>.json` is what
//! the reference's parser (the `swebench` package's `PARSER_REGISTRY`) made
//! of it, written by `harness-scripts/parser-oracle.py write`; an optional
//! `<case>.meta` holds `instance_id=... version=...` for parsers that
//! dispatch on them. Every case must give the same map here, value strings
//! verbatim, so the ids stay byte-compatible with the datasets'.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{parse_log_raw, LogParser, RawParse, RawStatusMap};

/// One captured case and the reference's answer for it.
pub(crate) struct Case {
    pub log_path: PathBuf,
    pub log: String,
    pub instance_id: String,
    pub version: String,
    /// The reference's map; `None` when the reference raised on the log.
    pub expected: Option<RawStatusMap>,
}

fn testdata(parser: LogParser) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/parse/testdata")
        .join(parser.name())
}

/// Every case of a parser, sorted by file name.
pub(crate) fn cases(parser: LogParser) -> Vec<Case> {
    let dir = testdata(parser);
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs.into_iter()
        .map(|log_path| {
            let bytes = std::fs::read(&log_path).expect("log reads");
            let expected_path = log_path.with_extension("json");
            let expected: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(&expected_path)
                    .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display())),
            )
            .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
            let field = |k: &str| expected[k].as_str().unwrap_or_default().to_string();
            let statuses = expected.get("statuses").map(|s| {
                serde_json::from_value::<BTreeMap<String, String>>(s.clone())
                    .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()))
            });
            Case {
                log: String::from_utf8_lossy(&bytes).into_owned(),
                instance_id: field("instance_id"),
                version: field("version"),
                expected: statuses,
                log_path,
            }
        })
        .collect()
}

/// Asserts that every case of `parser` parses to the reference's map, and
/// that there are at least `min_cases` of them (a folder emptied by mistake
/// must fail, not pass).
pub(crate) fn assert_matches_reference(parser: LogParser, min_cases: usize) {
    let cases = cases(parser);
    assert!(
        cases.len() >= min_cases,
        "{}: {} cases, expected at least {min_cases}",
        parser.name(),
        cases.len()
    );
    for case in cases {
        // Parsers that dispatch on the instance read the log with the
        // parser it resolves to; an instance it cannot resolve is the
        // reference raising.
        let got = match parser.for_instance(&case.instance_id, &case.version) {
            Ok(resolved) => parse_log_raw(resolved, &case.log),
            Err(e) => RawParse {
                reference_error: Some(e.to_string()),
                ..RawParse::default()
            },
        };
        match &case.expected {
            Some(expected) => {
                assert_eq!(
                    &got.statuses,
                    expected,
                    "{} (instance {} version {}) differs from the reference parser's map",
                    case.log_path.display(),
                    case.instance_id,
                    case.version
                );
                assert_eq!(
                    got.reference_error,
                    None,
                    "{}: the reference does not raise on this log",
                    case.log_path.display()
                );
            }
            None => assert!(
                got.reference_error.is_some(),
                "{}: the reference raises on this log, patchgrade did not say so",
                case.log_path.display()
            ),
        }
    }
}
