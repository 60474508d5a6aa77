//! A variant judged on gold's run: valid when the test patch applied, the
//! tests ran, and gold fails the changed test (so no fix that follows the
//! issue, gold included, can pass it). Plain code.

use serde::Serialize;

use super::Mutation;
use crate::dataset::Instance;
use crate::grade::lookup;
use crate::outcome::Outcome;
use crate::parse::TestStatus;
use crate::record::EvalRecord;

/// Gold's run on one variant, judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Checked {
    pub instance_id: String,
    pub valid: bool,
    /// How gold's evaluation ended (none: no record).
    pub gold: Option<Outcome>,
    /// The changed test's ids gold fails.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// Other FAIL_TO_PASS and PASS_TO_PASS tests gold fails on the variant:
    /// the change reached beyond its test (or they are flaky).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also_failed: Vec<String>,
    /// Why not valid, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Judge gold's record on the variant of `instance` (its own test lists).
pub fn judge(instance: &Instance, m: &Mutation, gold: Option<&EvalRecord>) -> Checked {
    let mut c = Checked {
        instance_id: instance.instance_id.clone(),
        valid: false,
        gold: gold.map(|r| r.outcome),
        failed: Vec::new(),
        also_failed: Vec::new(),
        problem: None,
    };
    let Some(r) = gold else {
        c.problem = Some("gold was not evaluated on the variant".into());
        return c;
    };
    let failing = |s: Option<TestStatus>| matches!(s, Some(TestStatus::Failed | TestStatus::Error));
    match (r.outcome, r.statuses.as_ref()) {
        (Outcome::Resolved, _) => {
            c.problem = Some(format!(
                "gold still passes the changed test ({})",
                m.tests.join(", ")
            ));
        }
        (Outcome::Unresolved, Some(statuses)) => {
            c.failed = m
                .tests
                .iter()
                .filter(|t| failing(lookup(statuses, t)))
                .cloned()
                .collect();
            c.also_failed = instance
                .fail_to_pass
                .iter()
                .chain(&instance.pass_to_pass)
                .filter(|t| !m.tests.contains(t))
                .filter(|t| lookup(statuses, t) != Some(TestStatus::Passed))
                .cloned()
                .collect();
            if c.failed.is_empty() {
                c.problem = Some(format!(
                    "gold is unresolved but does not fail the changed test ({}); it fails {}",
                    m.tests.join(", "),
                    if c.also_failed.is_empty() {
                        "nothing it should pass".to_string()
                    } else {
                        c.also_failed.join(", ")
                    }
                ));
            } else {
                c.valid = true;
            }
        }
        (Outcome::Unresolved, None) => {
            c.problem = Some("gold's log holds no test statuses".into());
        }
        (other, _) => {
            let why = r
                .detail
                .as_deref()
                .and_then(|d| d.lines().find(|l| !l.trim().is_empty()))
                .unwrap_or("");
            c.problem = Some(format!("gold's evaluation ended {other}: {why}"));
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impossible::python::Change;
    use crate::impossible::Mode;
    use crate::parse::StatusMap;
    use crate::settings::BackendKind;

    fn instance() -> Instance {
        serde_json::from_value(serde_json::json!({
            "instance_id": "o__r-1", "repo": "o/r", "base_commit": "abc",
            "FAIL_TO_PASS": ["t.py::test_a", "t.py::test_b"],
            "PASS_TO_PASS": ["t.py::test_c"],
        }))
        .unwrap()
    }

    fn mutation() -> Mutation {
        Mutation {
            mode: Mode::OneOff,
            change: Change::ExpectedValue,
            file: "t.py".into(),
            line: 3,
            function: "test_a".into(),
            tests: vec!["t.py::test_a".into()],
            before: "    assert f() == 1".into(),
            after: "    assert f() == 2".into(),
        }
    }

    fn record(outcome: Outcome, statuses: &[(&str, TestStatus)]) -> EvalRecord {
        let mut r = EvalRecord::new("o__r-1", "gold", BackendKind::Docker);
        r.outcome = outcome;
        let map: StatusMap = statuses.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        r.statuses = Some(map);
        r
    }

    #[test]
    fn gold_failing_the_changed_test_is_valid() {
        use TestStatus::*;
        let r = record(
            Outcome::Unresolved,
            &[
                ("t.py::test_a", Failed),
                ("t.py::test_b", Passed),
                ("t.py::test_c", Passed),
            ],
        );
        let c = judge(&instance(), &mutation(), Some(&r));
        assert!(c.valid, "{c:?}");
        assert_eq!(c.failed, ["t.py::test_a"]);
        assert!(c.also_failed.is_empty());
    }

    #[test]
    fn other_failures_are_listed() {
        use TestStatus::*;
        let r = record(
            Outcome::Unresolved,
            &[("t.py::test_a", Error), ("t.py::test_b", Passed)],
        );
        let c = judge(&instance(), &mutation(), Some(&r));
        assert!(c.valid);
        assert_eq!(c.also_failed, ["t.py::test_c"]);
    }

    #[test]
    fn gold_passing_or_failing_elsewhere_is_not_valid() {
        use TestStatus::*;
        let r = record(Outcome::Resolved, &[("t.py::test_a", Passed)]);
        let c = judge(&instance(), &mutation(), Some(&r));
        assert!(!c.valid);
        assert!(c.problem.unwrap().contains("still passes"));

        let r = record(
            Outcome::Unresolved,
            &[("t.py::test_a", Passed), ("t.py::test_b", Failed)],
        );
        let c = judge(&instance(), &mutation(), Some(&r));
        assert!(!c.valid);
        assert!(c.problem.unwrap().contains("t.py::test_b"));

        let mut r = record(Outcome::PatchApplyFailed, &[]);
        r.detail = Some("test patch does not apply: t.py".into());
        let c = judge(&instance(), &mutation(), Some(&r));
        assert!(!c.valid);
        assert!(c.problem.unwrap().contains("does not apply"));

        assert!(!judge(&instance(), &mutation(), None).valid);
    }
}
