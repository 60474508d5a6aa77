//! Dynamic audit checks: they run tests, so the CLI orchestrates them through
//! the runner; what to run and how to judge the results is here, sync.
//!
//! - Held-out tests: tests the candidate never saw (`HELD_OUT_TESTS` with
//!   `held_out_test_patch` on the instance, or a `--held-out` sidecar). A
//!   resolved candidate that fails a held-out test that gold passes is
//!   suspect (`fails_held_out`).
//! - Gold divergence (PatchDiff-style differential testing): every test in the
//!   test files the test patch touches and in the test files of the modules
//!   either patch changes, run with gold and with the candidate, twice each.
//!   A test that passes in both gold runs and fails in both candidate runs
//!   is a divergence; one seen once is noise and does not count.
//!
//! A check is only as good as its gold baseline: when gold fails a held-out
//! test, an expected id matches nothing in gold's log, or gold's divergence
//! runs record no results, the check could not run for the instance
//! ([`CheckRun`] with the cause) and the verdict cannot be `clean`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::{CheckKind, CheckRun, Evidence, Reason, ReasonKind};
use crate::dataset::Instance;
use crate::parse::{StatusMap, TestStatus};
use crate::patch::{ChangeKind, Patch};

/// Held-out tests of one instance.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct HeldOut {
    #[serde(rename = "HELD_OUT_TESTS", deserialize_with = "string_or_list")]
    pub tests: Vec<String>,
    /// A diff against the base commit that adds the held-out tests; applied
    /// instead of the instance's test patch.
    pub held_out_test_patch: String,
}

fn string_or_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) => serde_json::from_str(&s).map_err(serde::de::Error::custom),
        v => serde_json::from_value(v).map_err(serde::de::Error::custom),
    }
}

impl HeldOut {
    /// From the instance's own fields, if it carries them.
    pub fn from_instance(inst: &Instance) -> Option<HeldOut> {
        let tests = inst.extra.get("HELD_OUT_TESTS")?.clone();
        let patch = inst.extra.get("held_out_test_patch")?.clone();
        serde_json::from_value(
            serde_json::json!({"HELD_OUT_TESTS": tests, "held_out_test_patch": patch}),
        )
        .ok()
    }

    /// The instance as the held-out run sees it: the held-out patch replaces
    /// the test patch, and the held-out tests are what must pass.
    pub fn instance(&self, inst: &Instance) -> Instance {
        let mut i = inst.clone();
        i.test_patch = self.held_out_test_patch.clone();
        i.fail_to_pass = self.tests.clone();
        i.pass_to_pass = Vec::new();
        i
    }
}

/// Why a `--held-out` sidecar could not be read. The messages carry the
/// cause's text (and name the file and line), as `--dataset` errors do.
#[derive(Debug, thiserror::Error)]
pub enum SidecarError {
    #[error("{}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: {error}", path.display())]
    List {
        path: PathBuf,
        error: serde_json::Error,
    },
    #[error("{}:{line}: {error}", path.display())]
    Row {
        path: PathBuf,
        line: usize,
        error: serde_json::Error,
    },
    #[error("{}:{line}: missing instance_id", path.display())]
    MissingId { path: PathBuf, line: usize },
}

/// Read a `--held-out` sidecar: JSON lines (or a JSON list) of objects with
/// `instance_id`, `HELD_OUT_TESTS` and `held_out_test_patch`.
pub fn load_sidecar(path: &Path) -> Result<BTreeMap<String, HeldOut>, SidecarError> {
    let text = std::fs::read_to_string(path).map_err(|error| SidecarError::Read {
        path: path.to_owned(),
        error,
    })?;
    let row_error = |line: usize| {
        move |error| SidecarError::Row {
            path: path.to_owned(),
            line,
            error,
        }
    };
    let rows: Vec<(usize, Value)> = if text.trim_start().starts_with('[') {
        let v: Vec<Value> = serde_json::from_str(&text).map_err(|error| SidecarError::List {
            path: path.to_owned(),
            error,
        })?;
        v.into_iter().enumerate().map(|(i, v)| (i + 1, v)).collect()
    } else {
        let mut rows = Vec::new();
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let v = serde_json::from_str(line).map_err(row_error(i + 1))?;
            rows.push((i + 1, v));
        }
        rows
    };
    let mut out = BTreeMap::new();
    for (line, v) in rows {
        let id = v
            .get("instance_id")
            .and_then(Value::as_str)
            .ok_or_else(|| SidecarError::MissingId {
                path: path.to_owned(),
                line,
            })?
            .to_string();
        let h: HeldOut = serde_json::from_value(v).map_err(row_error(line))?;
        out.insert(id, h);
    }
    Ok(out)
}

fn passes(s: Option<&TestStatus>) -> bool {
    matches!(s, Some(TestStatus::Passed | TestStatus::Xfail))
}

/// Held-out tests that gold passes and the candidate does not.
pub fn fails_held_out(held: &HeldOut, gold: &StatusMap, candidate: &StatusMap) -> Option<Reason> {
    let failing: Vec<String> = held
        .tests
        .iter()
        .filter(|t| {
            passes(crate::grade::lookup(gold, t).as_ref())
                && !passes(crate::grade::lookup(candidate, t).as_ref())
        })
        .cloned()
        .collect();
    (!failing.is_empty()).then(|| Reason {
        kind: ReasonKind::FailsHeldOut,
        message: format!("fails {} held-out test(s) that gold passes", failing.len()),
        evidence: vec![Evidence {
            test_ids: failing,
            ..Evidence::default()
        }],
    })
}

/// Whether gold's held-out run can judge candidates: every held-out id is
/// in its log and passes. Otherwise the check could not run, naming the ids
/// that matched nothing and those gold does not pass. A candidate may still
/// be flagged on the held-out tests gold does pass ([`fails_held_out`]).
pub fn held_out_baseline(held: &HeldOut, gold: &StatusMap) -> CheckRun {
    let unmatched: Vec<String> = held
        .tests
        .iter()
        .filter(|t| crate::grade::lookup(gold, t).is_none())
        .cloned()
        .collect();
    let failing: Vec<String> = held
        .tests
        .iter()
        .filter(|t| crate::grade::lookup(gold, t).is_some_and(|s| !passes(Some(&s))))
        .cloned()
        .collect();
    if unmatched.is_empty() && failing.is_empty() {
        return CheckRun::ran(CheckKind::HeldOut);
    }
    let mut causes = Vec::new();
    if !unmatched.is_empty() {
        causes.push(format!(
            "{} held-out id(s) matched nothing in gold's log: {}",
            unmatched.len(),
            unmatched.join(", ")
        ));
    }
    if !failing.is_empty() {
        causes.push(format!(
            "gold fails {} held-out test(s): {}",
            failing.len(),
            failing.join(", ")
        ));
    }
    let mut c = CheckRun::could_not_run(CheckKind::HeldOut, causes.join("; "));
    c.test_ids = unmatched.into_iter().chain(failing).collect();
    c
}

/// Whether gold's divergence runs can judge candidates: each recorded test
/// results (a run that selected nothing compares nothing).
pub fn divergence_baseline(gold_runs: &[StatusMap]) -> CheckRun {
    if gold_runs.iter().any(|g| g.is_empty()) {
        return CheckRun::could_not_run(
            CheckKind::GoldDivergence,
            "a gold divergence run recorded no test results",
        );
    }
    CheckRun::ran(CheckKind::GoldDivergence)
}

/// Tests that pass in every gold run and fail in every candidate run (a test
/// absent from a candidate log while gold ran it counts as failing there).
pub fn divergences(gold_runs: &[StatusMap], candidate_runs: &[StatusMap]) -> Vec<String> {
    if gold_runs.is_empty() || candidate_runs.is_empty() {
        return Vec::new();
    }
    let first = &gold_runs[0];
    first
        .keys()
        .filter(|t| gold_runs.iter().all(|g| passes(g.get(*t))))
        .filter(|t| {
            candidate_runs
                .iter()
                .all(|c| !passes(c.get(*t)) && c.get(*t) != Some(&TestStatus::Skipped))
        })
        .cloned()
        .collect()
}

pub fn divergence_reason(tests: Vec<String>) -> Option<Reason> {
    (!tests.is_empty()).then(|| Reason {
        kind: ReasonKind::GoldDivergence,
        message: format!(
            "{} test(s) pass with gold and fail with the candidate, in both runs",
            tests.len()
        ),
        evidence: vec![Evidence {
            test_ids: tests,
            ..Evidence::default()
        }],
    })
}

/// Whether a path looks like a test file (by name or folder).
fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let in_test_dir = path
        .split('/')
        .any(|c| matches!(c, "tests" | "test" | "testing"));
    name.ends_with(".py")
        && (name.starts_with("test_")
            || name.ends_with("_test.py")
            || name.ends_with("_tests.py")
            || (in_test_dir && name != "__init__.py" && name != "conftest.py"))
}

/// Test files to run for divergence: those the test patch touches (and that
/// exist after it) plus, for every module either patch changes, the test
/// files named after it (`test_<mod>.py`, `<mod>_test.py`, `tests.py` in a
/// `<mod>` folder) among `files` (the base tree's paths).
pub fn divergence_test_files(
    inst: &Instance,
    candidate_patch: &str,
    files: &[String],
) -> Vec<String> {
    let mut out = BTreeSet::new();
    if let Ok(tp) = Patch::parse(&inst.test_patch) {
        for f in tp.files {
            if !matches!(f.kind, ChangeKind::Deleted) && is_test_file(&f.path) {
                out.insert(f.path);
            }
        }
    }
    let mut modules = BTreeSet::new();
    for patch in [inst.patch.as_str(), candidate_patch] {
        if let Ok(p) = Patch::parse(patch) {
            for f in p.files {
                if f.path.ends_with(".py") && !is_test_file(&f.path) {
                    let stem = f
                        .path
                        .rsplit('/')
                        .next()
                        .unwrap_or(&f.path)
                        .trim_end_matches(".py")
                        .to_string();
                    if stem != "__init__" {
                        modules.insert(stem);
                    }
                }
            }
        }
    }
    for f in files {
        if !is_test_file(f) {
            continue;
        }
        let name = f.rsplit('/').next().unwrap_or(f).trim_end_matches(".py");
        if modules.iter().any(|m| {
            name == format!("test_{m}")
                || name == format!("{m}_test")
                || name == format!("{m}_tests")
        }) {
            out.insert(f.clone());
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::CheckStatus;

    fn map(v: &[(&str, TestStatus)]) -> StatusMap {
        v.iter().map(|(k, s)| (k.to_string(), *s)).collect()
    }

    #[test]
    fn divergence_needs_both_runs() {
        use TestStatus::*;
        let gold = [
            map(&[("a", Passed), ("b", Passed), ("c", Passed), ("d", Failed)]),
            map(&[("a", Passed), ("b", Passed), ("c", Passed), ("d", Failed)]),
        ];
        // b fails once only (noise); a fails in both; c missing in both; d fails with gold too.
        let cand = [
            map(&[("a", Failed), ("b", Failed), ("d", Failed)]),
            map(&[("a", Error), ("b", Passed), ("d", Failed)]),
        ];
        assert_eq!(divergences(&gold, &cand), vec!["a", "c"]);
        assert!(divergences(&gold, &gold).is_empty());
    }

    #[test]
    fn held_out_flags_only_tests_gold_passes() {
        use TestStatus::*;
        let h = HeldOut {
            tests: vec!["x".into(), "y".into(), "z".into()],
            held_out_test_patch: String::new(),
        };
        let gold = map(&[("x", Passed), ("y", Failed), ("z", Passed)]);
        let cand = map(&[("x", Failed), ("y", Failed), ("z", Passed)]);
        let r = fails_held_out(&h, &gold, &cand).unwrap();
        assert_eq!(r.evidence[0].test_ids, vec!["x"]);
        assert!(fails_held_out(&h, &gold, &gold).is_none());
    }

    #[test]
    fn gold_baseline_decides_whether_held_out_ran() {
        use TestStatus::*;
        let h = HeldOut {
            tests: vec!["x".into(), "y".into(), "z".into()],
            held_out_test_patch: String::new(),
        };
        let all = map(&[("x", Passed), ("y", Passed), ("z", Passed)]);
        assert_eq!(held_out_baseline(&h, &all).status, CheckStatus::Ran);
        let bad = map(&[("x", Passed), ("y", Failed)]);
        let c = held_out_baseline(&h, &bad);
        assert_eq!(c.status, CheckStatus::CouldNotRun);
        assert_eq!(c.test_ids, vec!["z", "y"]);
        let cause = c.cause.unwrap();
        assert!(
            cause.contains("matched nothing in gold's log: z"),
            "{cause}"
        );
        assert!(
            cause.contains("gold fails 1 held-out test(s): y"),
            "{cause}"
        );
        assert_eq!(
            divergence_baseline(&[all.clone(), StatusMap::new()]).status,
            CheckStatus::CouldNotRun
        );
        assert_eq!(
            divergence_baseline(&[all.clone(), all]).status,
            CheckStatus::Ran
        );
    }

    #[test]
    fn test_files_for_changed_modules() {
        let inst: Instance = serde_json::from_value(serde_json::json!({
            "instance_id": "o__r-1", "repo": "o/r", "base_commit": "a", "version": "1",
            "patch": "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1 +1 @@\n-a\n+b\n",
            "test_patch": "diff --git a/tests/test_api.py b/tests/test_api.py\n--- a/tests/test_api.py\n+++ b/tests/test_api.py\n@@ -1 +1 @@\n-a\n+b\n",
        }))
        .unwrap();
        let cand = "diff --git a/pkg/util.py b/pkg/util.py\n--- a/pkg/util.py\n+++ b/pkg/util.py\n@@ -1 +1 @@\n-a\n+b\n";
        let files: Vec<String> = [
            "tests/test_core.py",
            "tests/test_util.py",
            "tests/test_other.py",
            "pkg/core.py",
            "tests/conftest.py",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            divergence_test_files(&inst, cand, &files),
            vec![
                "tests/test_api.py",
                "tests/test_core.py",
                "tests/test_util.py"
            ]
        );
    }

    #[test]
    fn sidecar_and_instance_fields() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("h.jsonl");
        std::fs::write(&p, "{\"instance_id\":\"i\",\"HELD_OUT_TESTS\":\"[\\\"t\\\"]\",\"held_out_test_patch\":\"diff\"}\n").unwrap();
        let m = load_sidecar(&p).unwrap();
        assert_eq!(m["i"].tests, vec!["t"]);
        std::fs::write(&p, "{\"HELD_OUT_TESTS\":[]}\n").unwrap();
        assert!(load_sidecar(&p)
            .unwrap_err()
            .to_string()
            .contains(":1: missing instance_id"));
    }
}
