//! Instance validation (`patchgrade validate`): is each instance sound in
//! this environment?
//!
//! An instance is valid when every FAIL_TO_PASS test fails on the base tree
//! (with the test patch, without the fix) and passes with the gold patch, and
//! every PASS_TO_PASS test passes on both. Gold runs several times; a test
//! whose status changes between runs is flaky. This is how instances are
//! admitted to a benchmark, and the check that an environment is faithful.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::dataset::{Dataset, Instance, Prediction};
use crate::grade::lookup;
use crate::key::EvalKey;
use crate::outcome::Outcome;
use crate::parse::{StatusMap, TestStatus};
use crate::record::EvalRecord;
use crate::rundir::RunDir;
use crate::runner::jobs::Job;
use crate::runner::jobs::Records;
use crate::spec::SpecSet;
use crate::table::{render, Layout};

pub const BASE_MODEL: &str = "validate-base";

pub fn gold_model(run: usize) -> String {
    format!("validate-gold-{}", run + 1)
}

/// The jobs of a validation: one base run and `gold_runs` gold runs per
/// instance (distinct model names, so identical gold patches are not merged).
pub fn jobs(dataset: &Dataset, gold_runs: usize) -> Vec<Job> {
    let mut out = Vec::new();
    for inst in &dataset.instances {
        let id = &inst.instance_id;
        let inst = std::sync::Arc::new(inst.clone());
        out.push(Job {
            run_without_patch: true,
            overrides: Default::default(),
            ..Job::new(inst.clone(), Prediction::new(id, BASE_MODEL, None))
        });
        for k in 0..gold_runs {
            let gold = Prediction::new(id, &gold_model(k), Some(inst.patch.clone()));
            out.push(Job::new(inst.clone(), gold));
        }
    }
    out
}

/// Verdict on one instance.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceValidation {
    pub instance_id: String,
    pub valid: bool,
    /// Why not valid, in words.
    pub problems: Vec<String>,
    pub base_outcome: Option<Outcome>,
    pub gold_outcomes: Vec<Option<Outcome>>,
    /// FAIL_TO_PASS tests that already pass without the fix.
    pub f2p_passing_on_base: Vec<String>,
    /// FAIL_TO_PASS tests that do not pass with gold (in any gold run).
    pub f2p_failing_on_gold: Vec<String>,
    pub p2p_failing_on_base: Vec<String>,
    pub p2p_failing_on_gold: Vec<String>,
    /// Tests whose status differs between gold runs.
    pub flaky_tests: Vec<String>,
    /// Expected ids found in no log (id format mismatch, not a failure).
    pub unmatched: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    pub instances: usize,
    pub valid: usize,
    pub invalid: usize,
    /// Instances whose base run (no fix) resolves: a broken instance or
    /// environment that would count any patch as a success.
    pub false_resolutions: usize,
    /// Instances that gold resolved in every run.
    pub gold_resolved: usize,
    pub flaky_instances: usize,
    /// Runs that ended in environment or infrastructure failures.
    pub environment_failures: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct ValidationReport {
    pub run_id: String,
    pub gold_runs: usize,
    pub counts: Counts,
    pub instances: Vec<InstanceValidation>,
}

fn passes(s: Option<&TestStatus>, p2p: bool) -> bool {
    match s {
        Some(TestStatus::Passed | TestStatus::Xfail) => true,
        Some(TestStatus::Skipped) => p2p,
        _ => false,
    }
}

/// The test statuses of one finished run of the validation.
fn statuses(
    rundir: &RunDir,
    specs: &SpecSet,
    inst: &Instance,
    model: &str,
    record: Option<&EvalRecord>,
) -> Option<StatusMap> {
    rundir
        .eval_dir(model, &inst.instance_id, None)
        .statuses(record?, specs, inst)
        .and_then(Result::ok)
}

/// Judge every instance from the records of a validation run.
pub fn judge(
    dataset: &Dataset,
    gold_runs: usize,
    records: &Records,
    specs: &SpecSet,
    rundir: &RunDir,
) -> ValidationReport {
    let mut counts = Counts::default();
    let mut instances = Vec::new();
    for inst in &dataset.instances {
        let id = &inst.instance_id;
        let rec = |model: &str| records.get(&EvalKey::new(model, id, None)).map(|r| &**r);
        let base_rec = rec(BASE_MODEL);
        let gold_recs: Vec<Option<&EvalRecord>> =
            (0..gold_runs).map(|k| rec(&gold_model(k))).collect();
        let base_map = statuses(rundir, specs, inst, BASE_MODEL, base_rec);
        let gold_maps: Vec<Option<StatusMap>> = (0..gold_runs)
            .map(|k| statuses(rundir, specs, inst, &gold_model(k), gold_recs[k]))
            .collect();

        let mut problems = Vec::new();
        let env_failed = |r: Option<&EvalRecord>| r.is_some_and(|r| !r.outcome.counts_for_model());
        counts.environment_failures += usize::from(env_failed(base_rec))
            + gold_recs.iter().filter(|r| env_failed(**r)).count();
        for (what, r) in
            std::iter::once(("base", base_rec)).chain(gold_recs.iter().map(|r| ("gold", *r)))
        {
            match r {
                None => problems.push(format!("{what} run did not finish")),
                Some(r) if r.outcome != Outcome::Resolved && r.outcome != Outcome::Unresolved => {
                    problems.push(format!(
                        "{what} run: {}: {}",
                        r.outcome,
                        r.detail.as_deref().unwrap_or("")
                    ))
                }
                Some(r) if r.ungradable.is_some() => problems.push(format!(
                    "{what} run: {}",
                    r.detail.as_deref().unwrap_or("ungradable log")
                )),
                _ => {}
            }
        }
        let empty = StatusMap::new();
        let base = base_map.as_ref().unwrap_or(&empty);
        let mut v = InstanceValidation {
            instance_id: id.clone(),
            valid: false,
            problems: Vec::new(),
            base_outcome: base_rec.map(|r| r.outcome),
            gold_outcomes: gold_recs.iter().map(|r| r.map(|r| r.outcome)).collect(),
            f2p_passing_on_base: inst
                .fail_to_pass
                .iter()
                .filter(|t| passes(lookup(base, t).as_ref(), false))
                .cloned()
                .collect(),
            f2p_failing_on_gold: Vec::new(),
            p2p_failing_on_base: inst
                .pass_to_pass
                .iter()
                .filter(|t| !passes(lookup(base, t).as_ref(), true))
                .cloned()
                .collect(),
            p2p_failing_on_gold: Vec::new(),
            flaky_tests: Vec::new(),
            unmatched: Vec::new(),
        };
        let mut f2p_fail: BTreeSet<String> = BTreeSet::new();
        let mut p2p_fail: BTreeSet<String> = BTreeSet::new();
        for m in &gold_maps {
            let m = m.as_ref().unwrap_or(&empty);
            f2p_fail.extend(
                inst.fail_to_pass
                    .iter()
                    .filter(|t| !passes(lookup(m, t).as_ref(), false))
                    .cloned(),
            );
            p2p_fail.extend(
                inst.pass_to_pass
                    .iter()
                    .filter(|t| !passes(lookup(m, t).as_ref(), true))
                    .cloned(),
            );
        }
        v.f2p_failing_on_gold = f2p_fail.into_iter().collect();
        v.p2p_failing_on_gold = p2p_fail.into_iter().collect();
        let present: Vec<&StatusMap> = gold_maps.iter().flatten().collect();
        if present.len() > 1 {
            let all: BTreeSet<&String> = present.iter().flat_map(|m| m.keys()).collect();
            v.flaky_tests = all
                .into_iter()
                .filter(|t| {
                    present
                        .iter()
                        .map(|m| m.get(*t))
                        .collect::<std::collections::HashSet<_>>()
                        .len()
                        > 1
                })
                .cloned()
                .collect();
        }
        // The same id matching as grading (truncated ids by prefix). With no
        // gold run, a FAIL_TO_PASS test absent from the base log is simply
        // failing there (often it cannot even be collected without the fix).
        let f2p_checked: &[String] = if gold_runs > 0 {
            &inst.fail_to_pass
        } else {
            &[]
        };
        v.unmatched = f2p_checked
            .iter()
            .chain(&inst.pass_to_pass)
            .filter(|t| {
                present
                    .iter()
                    .copied()
                    .chain([base])
                    .all(|m| lookup(m, t).is_none())
            })
            .cloned()
            .collect();
        if !v.f2p_passing_on_base.is_empty() {
            problems.push(format!(
                "{} FAIL_TO_PASS tests pass without the fix",
                v.f2p_passing_on_base.len()
            ));
        }
        if !v.f2p_failing_on_gold.is_empty() {
            problems.push(format!(
                "{} FAIL_TO_PASS tests do not pass with gold",
                v.f2p_failing_on_gold.len()
            ));
        }
        if !v.p2p_failing_on_base.is_empty() {
            problems.push(format!(
                "{} PASS_TO_PASS tests do not pass on base",
                v.p2p_failing_on_base.len()
            ));
        }
        if !v.p2p_failing_on_gold.is_empty() {
            problems.push(format!(
                "{} PASS_TO_PASS tests do not pass with gold",
                v.p2p_failing_on_gold.len()
            ));
        }
        if !v.unmatched.is_empty() {
            problems.push(format!(
                "{} expected test ids appear in no log",
                v.unmatched.len()
            ));
        }
        v.valid = problems.is_empty();
        v.problems = problems;
        counts.instances += 1;
        if v.valid {
            counts.valid += 1;
        } else {
            counts.invalid += 1;
        }
        if base_rec.is_some_and(|r| r.outcome == Outcome::Resolved) {
            counts.false_resolutions += 1;
        }
        if gold_runs > 0
            && gold_recs
                .iter()
                .all(|r| r.is_some_and(|r| r.outcome == Outcome::Resolved))
        {
            counts.gold_resolved += 1;
        }
        if !v.flaky_tests.is_empty() {
            counts.flaky_instances += 1;
        }
        instances.push(v);
    }
    ValidationReport {
        run_id: rundir.run_id().to_string(),
        gold_runs,
        counts,
        instances,
    }
}

impl ValidationReport {
    pub fn table(&self) -> String {
        let mut rows = vec![vec![
            "instance".to_string(),
            "valid".into(),
            "detail".into(),
        ]];
        for i in &self.instances {
            let mut detail = i.problems.join("; ");
            if !i.flaky_tests.is_empty() {
                detail.push_str(&format!(
                    "{}flaky: {}",
                    if detail.is_empty() { "" } else { "; " },
                    i.flaky_tests.join(", ")
                ));
            }
            let valid = if i.valid { "yes" } else { "NO" };
            rows.push(vec![i.instance_id.clone(), valid.into(), detail]);
        }
        let layout = Layout {
            min_widths: &[8, 7],
            ..Layout::default()
        };
        let mut out = render(&rows, layout);
        let c = &self.counts;
        out.push_str(&format!(
            "\n{} instances: {} valid, {} invalid; gold resolved {} in all {} runs; {} false resolutions on base; {} with flaky tests; {} environment failures\n",
            c.instances, c.valid, c.invalid, c.gold_resolved, self.gold_runs, c.false_resolutions, c.flaky_instances, c.environment_failures
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{pytest_specs, test_log};

    fn record(model: &str, id: &str, outcome: Outcome) -> EvalRecord {
        EvalRecord {
            outcome,
            ..EvalRecord::new(id, model, crate::settings::BackendKind::Local)
        }
    }

    /// Ids that the reference truncated at a space are matched as grading
    /// matches them; a FAIL_TO_PASS test passing on base is a problem.
    #[test]
    fn judges_base_and_gold_logs_with_grading_id_rules() {
        let d = tempfile::tempdir().unwrap();
        let specs = pytest_specs(d.path());
        let inst: Instance = serde_json::from_value(serde_json::json!({
            "instance_id": "o__r-1", "repo": "o/r", "base_commit": "a", "version": "1",
            "FAIL_TO_PASS": ["t.py::f2p"], "PASS_TO_PASS": ["t.py::p[a"]
        }))
        .unwrap();
        let dataset = Dataset {
            instances: vec![inst],
        };
        let rundir = RunDir::new(d.path(), "v");
        for (model, body) in [
            (
                BASE_MODEL.to_string(),
                "FAILED t.py::f2p - x\nPASSED t.py::p[a b]",
            ),
            (gold_model(0), "PASSED t.py::f2p\nPASSED t.py::p[a b]"),
        ] {
            let dir = rundir.eval_dir(&model, "o__r-1", None);
            dir.write_patch("").unwrap();
            dir.write_test_log(&test_log(body)).unwrap();
        }
        let mut records = crate::runner::jobs::Records::new();
        records.insert(
            EvalKey::new(BASE_MODEL, "o__r-1", None),
            Box::new(record(BASE_MODEL, "o__r-1", Outcome::Unresolved)),
        );
        records.insert(
            EvalKey::new(&gold_model(0), "o__r-1", None),
            Box::new(record(&gold_model(0), "o__r-1", Outcome::Resolved)),
        );
        let report = judge(&dataset, 1, &records, &specs, &rundir);
        let v = &report.instances[0];
        assert!(v.valid, "{:?}", v.problems);
        assert!(v.unmatched.is_empty());
        assert_eq!(report.counts.gold_resolved, 1);

        // The fix's test already passes without the fix: invalid.
        rundir
            .eval_dir(BASE_MODEL, "o__r-1", None)
            .write_test_log(&test_log("PASSED t.py::f2p\nPASSED t.py::p[a b]"))
            .unwrap();
        let report = judge(&dataset, 1, &records, &specs, &rundir);
        assert!(!report.instances[0].valid);
        assert_eq!(report.instances[0].f2p_passing_on_base, vec!["t.py::f2p"]);
    }
}
