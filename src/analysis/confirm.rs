//! `patchgrade audit RUN_DIR --confirm`: the confirmation run of every
//! resolved evaluation (docs/audit.md, "Confirmation run"), planned in two
//! steps and judged by [`crate::audit::confirm`].
//!
//! 1. [`plan`]: one confirmation job per resolved evaluation (its
//!    FAIL_TO_PASS tests through `script::confirm`'s driver).
//! 2. [`plan_again`]: for each candidate whose confirmation did not pass
//!    every FAIL_TO_PASS test, its second confirmation run, and gold's run
//!    (once per instance) under the same conditions.
//!
//! A clean pass costs one extra run; only a disagreement costs more. The
//! jobs run in the sibling run folder `<run_id>.audit`, like `--rerun`'s.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::reaudit::{usable, Unusable};
use crate::audit::confirm::{judge as judge_runs, not_passing};
use crate::audit::{Audit, CheckKind, CheckRun};
use crate::dataset::{model_dir, Dataset, Instance, Prediction, GOLD};
use crate::key::EvalKey;
use crate::outcome::Outcome;
use crate::parse::StatusMap;
use crate::rundir::{Evaluation, RunDir};
use crate::runner::jobs::{Job, Records};
use crate::script::confirm::driver;
use crate::spec::SpecSet;

/// A finished confirmation job's statuses, or why it cannot be judged.
type Run = Result<StatusMap, Unusable>;

/// What one confirmation job is for (indices point into the audited list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purpose {
    /// The candidate's first (0) or second (1) run.
    Candidate { idx: usize, run: usize },
    /// Gold's run of an instance.
    Gold(String),
}

/// Confirmation jobs, what each is for, and the evaluations whose check
/// could not even be planned.
pub type Plan = super::reaudit::Plan<Purpose>;

/// The instance a confirmation runs: its FAIL_TO_PASS tests only.
fn confirmation_instance(inst: &Instance) -> Arc<Instance> {
    let mut i = inst.clone();
    i.pass_to_pass.clear();
    Arc::new(i)
}

fn job(inst: Arc<Instance>, model: String, patch: &str) -> Job {
    let prediction = Prediction::new(&inst.instance_id, &model, Some(patch.to_string()));
    Job {
        confirm: true,
        // The audited evaluation has its audit; a confirmation job's own
        // (gold's "copying the future", say) would only mislead its log.
        overrides: crate::settings::Overrides {
            audit: false,
            ..Default::default()
        },
        ..Job::new(inst, prediction)
    }
}

/// `<model>@<leaf>`: names the jobs of one audited evaluation.
fn tag(e: &Evaluation) -> String {
    format!(
        "{}@{}",
        model_dir(&e.record.model_name_or_path),
        e.dir.leaf()
    )
}

/// The first confirmation job of every resolved evaluation of `audited`;
/// a spec with no driver is a check that could not run.
pub fn plan(audited: &[Evaluation], dataset: &Dataset, specs: &SpecSet) -> Plan {
    let mut plan = Plan::default();
    for (idx, a) in audited.iter().enumerate() {
        if a.record.outcome != Outcome::Resolved {
            continue;
        }
        let (Some(inst), Some(patch)) = (dataset.get(&a.record.instance_id), a.dir.patch()) else {
            continue;
        };
        let supported = specs
            .for_instance(inst)
            .map_err(|e| e.to_string())
            .and_then(|s| driver(&s.spec).map_err(|e| e.to_string()));
        if let Err(cause) = supported {
            plan.unplanned
                .push((idx, CheckRun::could_not_run(CheckKind::Confirmation, cause)));
            continue;
        }
        plan.push(
            job(
                confirmation_instance(inst),
                format!("confirm-{}", tag(a)),
                &patch,
            ),
            Purpose::Candidate { idx, run: 0 },
        );
    }
    plan
}

/// The statuses of each candidate's first run, by audited index (or why
/// it cannot be judged).
fn first_runs(
    plan: &Plan,
    rundir: &RunDir,
    specs: &SpecSet,
    records: &Records,
) -> BTreeMap<usize, Run> {
    let by_key: BTreeMap<EvalKey, Job> = plan.jobs.iter().map(|j| (j.key(), j.clone())).collect();
    plan.purposes
        .iter()
        .filter_map(|(key, p)| match p {
            Purpose::Candidate { idx, run: 0 } => {
                Some((*idx, usable(rundir, specs, &by_key, records, key)))
            }
            _ => None,
        })
        .collect()
}

/// The follow-up jobs: for each candidate whose first confirmation did not
/// pass every FAIL_TO_PASS test, its second run and gold's (one per
/// instance).
pub fn plan_again(
    audited: &[Evaluation],
    dataset: &Dataset,
    first: &Plan,
    rundir: &RunDir,
    specs: &SpecSet,
    records: &Records,
) -> Plan {
    let mut plan = Plan::default();
    let mut gold_planned = BTreeSet::new();
    for (idx, run) in first_runs(first, rundir, specs, records) {
        let a = &audited[idx];
        let Ok(statuses) = run else { continue };
        let (Some(inst), Some(patch)) = (dataset.get(&a.record.instance_id), a.dir.patch()) else {
            continue;
        };
        if not_passing(&inst.fail_to_pass, &statuses).is_empty() {
            continue;
        }
        let ci = confirmation_instance(inst);
        plan.push(
            job(ci.clone(), format!("confirm-again-{}", tag(a)), &patch),
            Purpose::Candidate { idx, run: 1 },
        );
        if gold_planned.insert(inst.instance_id.clone()) {
            plan.push(
                job(ci, format!("confirm-{GOLD}"), &inst.patch),
                Purpose::Gold(inst.instance_id.clone()),
            );
        }
    }
    plan
}

/// The confirmation's reasons, notes and checks added to the audits of
/// `audited`, from both plans' finished jobs.
pub fn judge(
    audited: &[Evaluation],
    audits: &mut BTreeMap<usize, Audit>,
    rundir: &RunDir,
    specs: &SpecSet,
    plans: [Plan; 2],
    records: &Records,
) {
    let [first, again] = plans;
    let jobs: BTreeMap<EvalKey, Job> = first
        .jobs
        .iter()
        .chain(&again.jobs)
        .map(|j| (j.key(), j.clone()))
        .collect();
    let look = |key: &EvalKey| usable(rundir, specs, &jobs, records, key);
    let mut gold: BTreeMap<String, Run> = BTreeMap::new();
    let mut runs: BTreeMap<usize, Vec<(usize, Run)>> = BTreeMap::new();
    for (key, p) in first.purposes.iter().chain(&again.purposes) {
        match p {
            Purpose::Gold(id) => {
                gold.insert(id.clone(), look(key));
            }
            Purpose::Candidate { idx, run } => {
                runs.entry(*idx).or_default().push((*run, look(key)))
            }
        }
    }
    for (idx, mut candidate) in runs {
        let a = &audited[idx];
        let (Some(audit), Some(inst)) = (audits.get_mut(&idx), jobs_instance(&jobs, a)) else {
            continue;
        };
        candidate.sort_by_key(|(run, _)| *run);
        let conditions = specs
            .for_instance(&inst)
            .ok()
            .and_then(|s| driver(&s.spec).ok())
            .map_or("", |d| d.conditions());
        let mut maps = Vec::new();
        let mut unusable = None;
        for (run, r) in candidate {
            match r {
                Ok(m) => maps.push(m),
                Err(u) => {
                    let whose = match run {
                        0 => "the candidate's confirmation run",
                        _ => "the candidate's second confirmation run",
                    };
                    unusable = Some(u.check(CheckKind::Confirmation, whose));
                    break;
                }
            }
        }
        let gold_run = match gold.get(&inst.instance_id) {
            Some(Ok(m)) => Some(m),
            Some(Err(u)) if unusable.is_none() && maps.len() == 2 => {
                unusable = Some(
                    u.clone()
                        .check(CheckKind::Confirmation, "gold's confirmation run"),
                );
                None
            }
            _ => None,
        };
        if let Some(check) = unusable {
            audit.record_check(check);
            continue;
        }
        let judged = judge_runs(&inst.fail_to_pass, &maps, gold_run, conditions);
        if let Some(r) = judged.reason {
            audit.push(r);
        }
        audit.notes.extend(judged.note);
        audit.record_check(judged.check);
    }
    for (idx, check) in first.unplanned {
        if let Some(audit) = audits.get_mut(&idx) {
            audit.record_check(check);
        }
    }
}

/// The instance a candidate's confirmation jobs ran (FAIL_TO_PASS only).
fn jobs_instance(jobs: &BTreeMap<EvalKey, Job>, a: &Evaluation) -> Option<Arc<Instance>> {
    let model = format!("confirm-{}", tag(a));
    jobs.values()
        .find(|j| {
            j.prediction.model_name_or_path == model
                && j.instance.instance_id == a.record.instance_id
        })
        .map(|j| j.instance.clone())
}
