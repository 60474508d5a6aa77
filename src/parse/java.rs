//! The reference's Java parsers (W5 `log_parsers/java.py`): `parse_log_maven`
//! (one `mvn test -Dtest=...` per test, read from the `set -x` trace),
//! `parse_log_ant` (lombok's `[junit] [PASS] name` lines) and
//! `parse_log_gradle_custom` (Gradle's `Class > method PASSED` test events).
//!
//! Fixtures (`testdata/{maven,ant,gradle_custom}`): maven's are real Maven
//! 3.8.7 / surefire 3.2.5 runs of a demo JUnit 4 project under `bash -x`, one
//! command per test as the dataset's eval scripts run them; ant's are real
//! Ant 1.10.13 `<junit>` runs of a demo project with a result formatter that
//! prints lombok's `[PASS]`/`[FAIL]`/`[ERR]` lines (lombok's build uses its
//! own such formatter); Gradle is not runnable here, so gradle_custom's are
//! written in Gradle's `testLogging` event format as the reference's tests
//! show it, with the interleaving the reference was changed for.

use std::collections::VecDeque;
use std::sync::LazyLock;

use regex::Regex;

use super::{py, RawParse, TestStatus};

/// `^.*-Dtest=(\S+).*$`: the greedy `.*` makes it the *last* `-Dtest=`
/// followed by a non-space, and the id runs to the next (Python) space.
fn maven_test_name(line: &str) -> Option<&str> {
    const FLAG: &str = "-Dtest=";
    let mut end = line.len();
    while let Some(at) = line[..end].rfind(FLAG) {
        let rest = &line[at + FLAG.len()..];
        let len = rest.find(py::is_space).unwrap_or(rest.len());
        if len > 0 {
            return Some(&rest[..len]);
        }
        end = at;
    }
    None
}

fn maven_status(line: &str) -> Option<TestStatus> {
    // `^.*BUILD (SUCCESS|FAILURE)$`
    if line.ends_with("BUILD SUCCESS") {
        Some(TestStatus::Passed)
    } else if line.ends_with("BUILD FAILURE") {
        Some(TestStatus::Failed)
    } else {
        None
    }
}

pub(crate) fn parse_maven(log: &str) -> RawParse {
    let mut out = RawParse::default();
    // Commands and BUILD lines are paired first come, first served; results
    // seen before any command wait for the commands still to come.
    let mut pending: VecDeque<&str> = VecDeque::new();
    let mut unmatched: VecDeque<TestStatus> = VecDeque::new();
    for line in log.split('\n') {
        let line = py::strip(line);
        if let Some(name) = maven_test_name(line) {
            pending.push_back(name);
        }
        if let Some(status) = maven_status(line) {
            match pending.pop_front() {
                Some(name) => out.set_status(name, status),
                None => unmatched.push_back(status),
            }
        }
    }
    while let (Some(name), Some(status)) = (pending.front(), unmatched.front()) {
        out.set_status(*name, *status);
        pending.pop_front();
        unmatched.pop_front();
    }
    out
}

/// `^\s*\[junit\]\s+\[(PASS|FAIL|ERR)\]\s+(.*)$` on the stripped line.
static ANT_LINE: LazyLock<Regex> = LazyLock::new(|| {
    let ws = py::WS;
    Regex::new(&format!(
        r"^{ws}*\[junit\]{ws}+\[(PASS|FAIL|ERR)\]{ws}+(.*)$"
    ))
    .expect("valid regex")
});

pub(crate) fn parse_ant(log: &str) -> RawParse {
    let mut out = RawParse::default();
    for line in log.split('\n') {
        let Some(caps) = ANT_LINE.captures(py::strip(line)) else {
            continue;
        };
        let status = match &caps[1] {
            "PASS" => TestStatus::Passed,
            _ => TestStatus::Failed,
        };
        out.set_status(&caps[2], status);
    }
    out
}

/// `^([^>].+)\s+(PASSED|FAILED)$`: the greedy `.+` leaves one space to
/// `\s+`, so a name followed by several spaces keeps all but the last.
static GRADLE_FULL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"^([^>].+){}+(PASSED|FAILED)$", py::WS)).expect("valid regex")
});

/// `^([^>]\S*\s+>\s+\S+)$`: a test name whose status comes on a later line.
static GRADLE_NAME: LazyLock<Regex> = LazyLock::new(|| {
    let (ws, non_ws) = (py::WS, py::NON_WS);
    Regex::new(&format!(r"^([^>]{non_ws}*{ws}+>{ws}+{non_ws}+)$")).expect("valid regex")
});

fn gradle_status(s: &str) -> Option<TestStatus> {
    match s {
        "PASSED" => Some(TestStatus::Passed),
        "FAILED" => Some(TestStatus::Failed),
        _ => None,
    }
}

pub(crate) fn parse_gradle_custom(log: &str) -> RawParse {
    let mut out = RawParse::default();
    let mut pending: Option<&str> = None;
    for line in log.split('\n') {
        let stripped = py::strip(line);
        if let Some(caps) = GRADLE_FULL.captures(stripped) {
            if let Some(status) = gradle_status(&caps[2]) {
                out.set_status(caps.get(1).map_or("", |m| m.as_str()), status);
            }
            pending = None;
            continue;
        }
        if let Some(caps) = GRADLE_NAME.captures(stripped) {
            pending = caps.get(1).map(|m| m.as_str());
            continue;
        }
        // Any other line leaves the pending name waiting (warnings printed
        // between a name and its status).
        if let (Some(name), Some(status)) = (pending, gradle_status(stripped)) {
            out.set_status(name, status);
            pending = None;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::parse::{parse_log, status_map, LogParser, TestStatus::*};

    #[test]
    fn captured_maven_logs_match_the_reference() {
        crate::parse::fixtures::assert_matches_reference(LogParser::Maven, 3);
    }

    #[test]
    fn captured_ant_logs_match_the_reference() {
        crate::parse::fixtures::assert_matches_reference(LogParser::Ant, 3);
    }

    #[test]
    fn captured_gradle_logs_match_the_reference() {
        crate::parse::fixtures::assert_matches_reference(LogParser::GradleCustom, 3);
    }

    #[test]
    fn maven_pairs_commands_and_results_in_order() {
        // A result before any command waits for the next command; the last
        // `-Dtest=` on a line wins and the id stops at the first space.
        let log = "\
[INFO] BUILD FAILURE
+ mvn test -Dtest=A#one
+ mvn test -Dtest= -Dtest=B#two -q
[INFO] BUILD SUCCESS
+ mvn test -Dtest=C#three\u{1f}x
";
        assert_eq!(
            parse_log(LogParser::Maven, log),
            status_map(&[("A#one", Passed), ("B#two", Failed)])
        );
        // One line that is both a command and a result pairs with itself
        // only after the commands already waiting.
        let log = "+ mvn -Dtest=X\nrun -Dtest=Y BUILD SUCCESS\n[INFO] BUILD FAILURE\n";
        assert_eq!(
            parse_log(LogParser::Maven, log),
            status_map(&[("X", Passed), ("Y", Failed)])
        );
    }

    #[test]
    fn ant_statuses_and_names() {
        let log = "    [junit] [PASS] a(b.C)\n[junit]\t[ERR]   x y \r\n[junit] [SKIP] z\n[junit][PASS] w\n";
        assert_eq!(
            parse_log(LogParser::Ant, log),
            status_map(&[("a(b.C)", Passed), ("x y", Failed)])
        );
    }

    #[test]
    fn gradle_name_keeps_extra_spaces_and_waits_for_its_status() {
        let log = "\
a.B > c  PASSED
> Task :test
a.B > d
WARNING: noise
PASSED
>a.B > e
FAILED
";
        assert_eq!(
            parse_log(LogParser::GradleCustom, log),
            status_map(&[("a.B > c ", Passed), ("a.B > d", Passed)])
        );
    }
}
