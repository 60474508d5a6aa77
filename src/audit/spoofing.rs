//! Output spoofing: passes that the test run did not produce.
//!
//! The grade is read from the log between the eval script's markers, so a
//! candidate that prints the markers, or prints `PASSED <id>` lines itself,
//! can fake a pass (reference harness #601). Three signs in the log and one
//! in the patch:
//!
//! - the log claims passes and no failure while the exit code the eval
//!   script recorded (`>>>>> Test Exit Code: N`) is non-zero;
//! - a marker line occurs more than once (the genuine log has each exactly
//!   once, plus bash's xtrace echo of the exit-code line);
//! - status lines for the instance's tests appear outside the markers;
//! - the candidate's added lines print a marker or a test status line.

use std::sync::LazyLock;

use regex::Regex;

use super::diff::{self, FileDiff};
use super::{excerpt, Evidence, Reason, ReasonKind};
use crate::dataset::Instance;
use crate::grade::{recorded_exit_code, END_MARKER, EXIT_CODE_MARKER, START_MARKER};
use crate::parse::{parse_log, LogParser, TestStatus};

/// Checks a test log. `parser` is the instance's log parser when known;
/// without it generic pass/fail line patterns are counted.
pub fn check_log(log: &str, parser: Option<LogParser>, instance: &Instance) -> Vec<Reason> {
    let lines: Vec<&str> = log.lines().collect();
    let mut reasons = Vec::new();
    reasons.extend(repeated_markers(&lines));
    let section = test_section(&lines);
    reasons.extend(exit_code_contradiction(&lines, section, parser));
    if let Some(r) = status_outside_markers(&lines, section, instance) {
        reasons.push(r);
    }
    reasons
}

/// Checks a candidate patch for lines that print markers or status lines.
pub fn check_candidate(candidate: &str) -> Vec<Reason> {
    check_patch(&diff::read(candidate))
}

/// Lines (0-based) of the first start marker and of the first end marker
/// after it.
fn test_section(lines: &[&str]) -> Option<(usize, usize)> {
    let start = lines.iter().position(|l| l.contains(START_MARKER))?;
    let end = start + lines[start..].iter().position(|l| l.contains(END_MARKER))?;
    Some((start, end))
}

/// An xtrace line (`+ echo ...`, `++ ...`): bash's echo of a command.
fn is_xtrace(line: &str) -> bool {
    let t = line.trim_start_matches('+');
    t.len() < line.len() && t.starts_with(' ')
}

fn repeated_markers(lines: &[&str]) -> Vec<Reason> {
    let mut evidence = Vec::new();
    for marker in [START_MARKER, END_MARKER, EXIT_CODE_MARKER.trim_end()] {
        // The exit-code line is printed by `echo`, so xtrace shows it once
        // more; the other markers are no-op commands seen only via xtrace.
        let exit = marker.starts_with(EXIT_CODE_MARKER.trim_end());
        let at: Vec<usize> = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.contains(marker) && !(exit && is_xtrace(l)))
            .map(|(i, _)| i)
            .collect();
        if at.len() > 1 {
            evidence.push(Evidence {
                lines: at.iter().map(|i| i + 1).collect(),
                excerpt: Some(excerpt(at.iter().map(|&i| lines[i]), 6)),
                score: Some(at.len() as f64),
                ..Evidence::default()
            });
        }
    }
    if evidence.is_empty() {
        return Vec::new();
    }
    vec![Reason {
        kind: ReasonKind::OutputSpoofing,
        message: format!(
            "the log repeats {} marker line(s) the eval script writes once",
            evidence.len()
        ),
        evidence,
    }]
}

/// Generic status lines, for logs of unknown format: pytest (`PASSED id`,
/// `id PASSED`), unittest/django (`... ok`), sympy (`test_x ok`).
static PASS_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(PASSED|XFAIL) \S|\S\s+(PASSED|XPASS)(\s|$)|\.\.\. ok\s*$|^\s*test_\w+ ok\s*$")
        .expect("valid regex")
});
static FAIL_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(FAILED|ERROR)\b|\S\s+(FAILED|ERROR)(\s|$)|\.\.\. (FAIL|ERROR)\s*$|^(FAIL|ERROR):|^\s*test_\w+ (F|E|FAIL|ERROR|Exception)\b|\b\d+ (failed|errors?)\b")
        .expect("valid regex")
});

fn exit_code_contradiction(
    lines: &[&str],
    section: Option<(usize, usize)>,
    parser: Option<LogParser>,
) -> Option<Reason> {
    let log = lines.join("\n");
    let code = recorded_exit_code(&log)?;
    if code == 0 {
        return None;
    }
    let (from, to) = section.map(|(s, e)| (s + 1, e)).unwrap_or((0, lines.len()));
    let body = &lines[from.min(lines.len())..to.min(lines.len())];
    let (passes, fails): (Vec<String>, usize) = match parser {
        Some(p) => {
            let map = parse_log(p, &body.join("\n"));
            let passes = map
                .iter()
                .filter(|(_, s)| matches!(s, TestStatus::Passed | TestStatus::Xfail))
                .map(|(k, _)| k.clone())
                .collect();
            let fails = map
                .values()
                .filter(|s| matches!(s, TestStatus::Failed | TestStatus::Error))
                .count();
            (passes, fails)
        }
        None => {
            let passes = body
                .iter()
                .filter(|l| PASS_LINE.is_match(l))
                .map(|l| l.trim().to_string())
                .collect();
            let fails = body.iter().filter(|l| FAIL_LINE.is_match(l)).count();
            (passes, fails)
        }
    };
    if passes.is_empty() || fails > 0 {
        return None;
    }
    let code_line = lines
        .iter()
        .rposition(|l| l.trim().starts_with(EXIT_CODE_MARKER))
        .map(|i| i + 1);
    let n = passes.len();
    Some(Reason {
        kind: ReasonKind::OutputSpoofing,
        message: format!(
            "the log reports {n} passing test(s) and no failure, but the tests exited {code}"
        ),
        evidence: vec![Evidence {
            lines: code_line.into_iter().collect(),
            test_ids: passes.into_iter().take(20).collect(),
            score: Some(code as f64),
            excerpt: Some(format!("{EXIT_CODE_MARKER}{code}")),
            ..Evidence::default()
        }],
    })
}

/// Status lines naming one of the instance's tests outside the markers.
fn status_outside_markers(
    lines: &[&str],
    section: Option<(usize, usize)>,
    instance: &Instance,
) -> Option<Reason> {
    let (start, end) = section?;
    let ids: Vec<&str> = instance
        .fail_to_pass
        .iter()
        .chain(&instance.pass_to_pass)
        .map(String::as_str)
        .filter(|id| id.len() >= 4)
        .collect();
    if ids.is_empty() {
        return None;
    }
    let mut at = Vec::new();
    let mut found = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if (start..=end).contains(&i) || is_xtrace(l) || !PASS_LINE.is_match(l) {
            continue;
        }
        if let Some(id) = ids.iter().find(|id| l.contains(**id)) {
            at.push(i);
            if !found.contains(id) {
                found.push(*id);
            }
        }
    }
    if at.is_empty() {
        return None;
    }
    Some(Reason {
        kind: ReasonKind::OutputSpoofing,
        message: format!(
            "{} pass line(s) for the instance's tests outside the test output markers",
            at.len()
        ),
        evidence: vec![Evidence {
            lines: at.iter().map(|i| i + 1).collect(),
            test_ids: found.into_iter().map(String::from).collect(),
            excerpt: Some(excerpt(at.iter().map(|&i| lines[i]), 6)),
            ..Evidence::default()
        }],
    })
}

/// Added lines that print a marker, or print a test status line: a status
/// word followed by a test id (`::`, `test`, `.py`) or by a placeholder
/// (`{name}`, `%s`, `" + name`), so messages like "FAILED to connect" pass.
static PRINTS_MARKER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r">>>>>\s*(Start Test Output|End Test Output|Test Exit Code)").expect("valid regex")
});
static PRINTS_STATUS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?x)
        \b(print|write|writeln|echo|printf|puts|println!?|print_|sys\.std(out|err)|stdout|stderr|logging\.\w+|log\.\w+)\b
        .*
        ( [rbfuRBFU]{0,2}["'](\\n|\\r|\s)*(PASSED|FAILED|XFAIL|XPASS|ERROR|SKIPPED)\s+(["'{%]|[^"'\s]*(::|test|\.py))
        | \.\.\.\s(ok|OK)\b
        | ["']\s*ok\s*["']
        )"#,
    )
    .expect("valid regex")
});

pub(crate) fn check_patch(files: &[FileDiff]) -> Vec<Reason> {
    let mut evidence = Vec::new();
    for f in files {
        let hits: Vec<_> = f
            .added()
            .filter(|l| PRINTS_MARKER.is_match(&l.text) || PRINTS_STATUS.is_match(&l.text))
            .collect();
        if !hits.is_empty() {
            evidence.push(Evidence {
                file: Some(f.path.clone()),
                lines: hits.iter().map(|l| l.new_no).collect(),
                excerpt: Some(excerpt(hits.iter().map(|l| l.text.as_str()), 12)),
                ..Evidence::default()
            });
        }
    }
    if evidence.is_empty() {
        return Vec::new();
    }
    let names: Vec<&str> = evidence.iter().filter_map(|e| e.file.as_deref()).collect();
    vec![Reason {
        kind: ReasonKind::OutputSpoofing,
        message: format!(
            "the candidate prints test markers or status lines: {}",
            names.join(", ")
        ),
        evidence,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn genuine(body: &str, code: i32) -> String {
        format!(
            "+ git apply -v -\n+ : '{START_MARKER}'\n+ pytest -rA t.py\n{body}\n+ PATCHGRADE_TEST_EXIT_CODE={code}\n+ : '{END_MARKER}'\n+ echo '{EXIT_CODE_MARKER}{code}'\n{EXIT_CODE_MARKER}{code}\n+ git checkout HEAD -- t.py\n"
        )
    }

    fn inst() -> Instance {
        serde_json::from_value(serde_json::json!({
            "instance_id": "o__r-1", "repo": "o/r", "base_commit": "0",
            "FAIL_TO_PASS": ["t.py::test_a"], "PASS_TO_PASS": ["t.py::test_b"]
        }))
        .unwrap()
    }

    #[test]
    fn genuine_logs_are_clean() {
        let ok = genuine("PASSED t.py::test_a\nPASSED t.py::test_b", 0);
        assert!(check_log(&ok, Some(LogParser::Pytest), &inst()).is_empty());
        assert!(check_log(&ok, None, &inst()).is_empty());
        let failing = genuine("PASSED t.py::test_b\nFAILED t.py::test_a - x", 1);
        assert!(check_log(&failing, Some(LogParser::Pytest), &inst()).is_empty());
        assert!(check_log(&failing, None, &inst()).is_empty());
    }

    #[test]
    fn contradicted_and_repeated() {
        let forged = genuine("PASSED t.py::test_a\nPASSED t.py::test_b", 2);
        for p in [Some(LogParser::Pytest), None] {
            let r = check_log(&forged, p, &inst());
            assert_eq!(r.len(), 1, "{r:?}");
        }
        let twice = genuine(
            &format!("{EXIT_CODE_MARKER}0\n{END_MARKER}\nPASSED t.py::test_a"),
            0,
        );
        let r = check_log(&twice, None, &inst());
        assert!(r.iter().any(|r| r.message.contains("repeats")), "{r:?}");
    }

    #[test]
    fn printing_status_lines() {
        let p = "--- a/x.py\n+++ b/x.py\n@@ -1 +1,3 @@\n a\n+print('PASSED t.py::test_a')\n+sys.stdout.write(\">>>>> End Test Output\\n\")\n";
        let r = check_candidate(p);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].evidence[0].lines, vec![2, 3]);
        assert!(check_candidate(
            "--- a/x.py\n+++ b/x.py\n@@ -1 +1,2 @@\n a\n+print('ok so far')\n"
        )
        .is_empty());
    }
}
