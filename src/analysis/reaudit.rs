//! `patchgrade audit RUN_DIR`: audit a finished run again.
//!
//! Static checks are re-run from the files the run left (patch.diff,
//! test_output.txt); with `--rerun`, the dynamic checks run tests: held-out
//! tests and divergence from gold (see [`crate::audit::dynamic`]). Their
//! evaluations go to a sibling run folder `<run_id>.audit`; the verdicts are
//! written back into each evaluation's patchgrade.json and report.json.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::audit::dynamic::{self, HeldOut};
use crate::audit::{audit_static, Audit, AuditInput, ReasonKind};
use crate::dataset::{model_dir, Dataset, Instance, Prediction};
use crate::outcome::{EvalRecord, Outcome};
use crate::parse::StatusMap;
use crate::report::AuditCounts;
use crate::rundir::{Evaluation, RunDir};
use crate::runner::jobs::{Job, RecordKey};
use crate::spec::SpecSet;

/// An evaluation names an instance the dataset does not have.
#[derive(Debug, thiserror::Error)]
#[error("{dir}: instance {instance_id} is not in {dataset}")]
pub struct MissingInstance {
    pub dir: PathBuf,
    pub instance_id: String,
    pub dataset: PathBuf,
}

/// The static audit of every graded evaluation (by index into `evals`).
/// Dynamic reasons found earlier are kept unless `drop_dynamic`.
pub fn static_audits(
    evals: &[Evaluation],
    dataset: &Dataset,
    dataset_path: &Path,
    specs: &SpecSet,
    drop_dynamic: bool,
) -> Result<BTreeMap<usize, Audit>, MissingInstance> {
    let mut audits = BTreeMap::new();
    for (idx, e) in evals.iter().enumerate() {
        let Some(inst) = dataset.get(&e.record.instance_id) else {
            return Err(MissingInstance {
                dir: e.dir.path().to_owned(),
                instance_id: e.record.instance_id.clone(),
                dataset: dataset_path.to_owned(),
            });
        };
        if let Some(audit) = static_audit(e, inst, specs, drop_dynamic) {
            audits.insert(idx, audit);
        }
    }
    Ok(audits)
}

/// Static audit from the files a finished evaluation left behind. Dynamic
/// reasons found earlier are kept unless `drop_dynamic`.
fn static_audit(
    a: &Evaluation,
    inst: &Instance,
    specs: &SpecSet,
    drop_dynamic: bool,
) -> Option<Audit> {
    a.record.grade.as_ref()?;
    let patch = a.dir.patch()?;
    if patch.trim().is_empty() {
        return None;
    }
    let log = a.dir.test_log();
    let mut input = AuditInput::new(inst, &patch);
    input.test_log = log.as_deref();
    input.log_parser = specs
        .lookup(&inst.repo, &inst.version)
        .ok()
        .map(|s| s.spec.log_parser);
    let mut audit = audit_static(&input);
    if !drop_dynamic {
        for r in a.record.audit.iter().flat_map(|old| old.reasons.iter()) {
            if matches!(
                r.kind,
                ReasonKind::FailsHeldOut | ReasonKind::GoldDivergence
            ) {
                audit.push(r.clone());
            }
        }
    }
    Some(audit)
}

/// What one dynamic job is for (indices point into the audited list).
#[derive(Debug, Clone)]
pub enum Purpose {
    HeldOutGold(String),
    HeldOutCandidate(usize),
    DivergenceGold(String),
    DivergenceCandidate(usize),
}

fn job(inst: Instance, model: String, patch: &str, directives: Option<Vec<String>>) -> Job {
    let prediction = Prediction::new(&inst.instance_id, &model, Some(patch.to_string()));
    Job {
        directives,
        ..Job::new(Arc::new(inst), prediction)
    }
}

/// The dynamic jobs for the resolved evaluations of `audited`.
pub fn plan(
    audited: &[Evaluation],
    dataset: &Dataset,
    held_out: &BTreeMap<String, HeldOut>,
    list_files: impl Fn(&Instance) -> Vec<String>,
) -> (Vec<Job>, Vec<(RecordKey, Purpose)>) {
    let mut jobs = Vec::new();
    let mut purposes = Vec::new();
    let mut gold_planned: BTreeMap<String, bool> = BTreeMap::new();
    let mut push = |j: Job, p: Purpose, jobs: &mut Vec<Job>| {
        purposes.push((j.key(), p));
        jobs.push(j);
    };
    for (idx, a) in audited.iter().enumerate() {
        if a.record.outcome != Outcome::Resolved {
            continue;
        }
        let Some(inst) = dataset.get(&a.record.instance_id) else {
            continue;
        };
        let Some(patch) = a.dir.patch() else {
            continue;
        };
        let leaf = a.dir.leaf();
        let tag = format!("{}@{leaf}", model_dir(&a.record.model_name_or_path));
        let first_for_instance = !gold_planned.contains_key(&inst.instance_id);
        gold_planned.insert(inst.instance_id.clone(), true);
        let held = held_out
            .get(&inst.instance_id)
            .cloned()
            .or_else(|| HeldOut::from_instance(inst));
        if let Some(h) = held {
            let hi = h.instance(inst);
            if first_for_instance {
                push(
                    job(hi.clone(), "held-out-gold".into(), &inst.patch, None),
                    Purpose::HeldOutGold(inst.instance_id.clone()),
                    &mut jobs,
                );
            }
            push(
                job(hi, format!("held-out-{tag}"), &patch, None),
                Purpose::HeldOutCandidate(idx),
                &mut jobs,
            );
        }
        let files = dynamic::divergence_test_files(inst, &patch, &list_files(inst));
        if files.is_empty() {
            continue;
        }
        let mut di = inst.clone();
        di.fail_to_pass.clear();
        di.pass_to_pass.clear();
        for k in 1..=2 {
            if first_for_instance {
                push(
                    job(
                        di.clone(),
                        format!("divergence-gold-{k}"),
                        &inst.patch,
                        Some(files.clone()),
                    ),
                    Purpose::DivergenceGold(inst.instance_id.clone()),
                    &mut jobs,
                );
            }
            push(
                job(
                    di.clone(),
                    format!("divergence-{k}-{tag}"),
                    &patch,
                    Some(files.clone()),
                ),
                Purpose::DivergenceCandidate(idx),
                &mut jobs,
            );
        }
    }
    (jobs, purposes)
}

/// Statuses of a finished dynamic evaluation.
fn statuses(
    rundir: &RunDir,
    specs: &SpecSet,
    jobs: &BTreeMap<RecordKey, Job>,
    records: &BTreeMap<RecordKey, EvalRecord>,
    key: &RecordKey,
) -> Option<StatusMap> {
    let j = jobs.get(key)?;
    j.eval_dir(rundir)
        .statuses(records.get(key)?, specs, &j.instance)
        .and_then(Result::ok)
}

/// Add the dynamic reasons to the audits of `audited` from the finished jobs.
pub fn judge(
    audited: &[Evaluation],
    audits: &mut BTreeMap<usize, Audit>,
    rundir: &RunDir,
    specs: &SpecSet,
    jobs: Vec<Job>,
    purposes: &[(RecordKey, Purpose)],
    records: &BTreeMap<RecordKey, EvalRecord>,
) {
    let by_key: BTreeMap<RecordKey, Job> = jobs.into_iter().map(|j| (j.key(), j)).collect();
    let mut held_gold: BTreeMap<String, StatusMap> = BTreeMap::new();
    let mut div_gold: BTreeMap<String, Vec<StatusMap>> = BTreeMap::new();
    for (key, p) in purposes {
        match p {
            Purpose::HeldOutGold(id) => {
                if let Some(m) = statuses(rundir, specs, &by_key, records, key) {
                    held_gold.insert(id.clone(), m);
                }
            }
            Purpose::DivergenceGold(id) => {
                if let Some(m) = statuses(rundir, specs, &by_key, records, key) {
                    div_gold.entry(id.clone()).or_default().push(m);
                }
            }
            _ => {}
        }
    }
    let mut div_cand: BTreeMap<usize, Vec<StatusMap>> = BTreeMap::new();
    for (key, p) in purposes {
        match p {
            Purpose::HeldOutCandidate(idx) => {
                let a = &audited[*idx];
                let id = &a.record.instance_id;
                let Some(audit) = audits.get_mut(idx) else {
                    continue;
                };
                // The held-out run's instance carries the held-out tests.
                let held = by_key.get(key).map(|j| HeldOut {
                    tests: j.instance.fail_to_pass.clone(),
                    held_out_test_patch: j.instance.test_patch.clone(),
                });
                match (
                    held,
                    held_gold.get(id),
                    statuses(rundir, specs, &by_key, records, key),
                ) {
                    (Some(h), Some(g), Some(c)) => {
                        if let Some(r) = dynamic::fails_held_out(&h, g, &c) {
                            audit.push(r);
                        }
                    }
                    _ => audit.notes.push(format!(
                        "held-out check did not run to the end ({})",
                        records
                            .get(key)
                            .map(|r| r.outcome.to_string())
                            .unwrap_or_else(|| "not evaluated".into())
                    )),
                }
            }
            Purpose::DivergenceCandidate(idx) => {
                if let Some(m) = statuses(rundir, specs, &by_key, records, key) {
                    div_cand.entry(*idx).or_default().push(m);
                }
            }
            _ => {}
        }
    }
    for (idx, cand) in div_cand {
        let id = &audited[idx].record.instance_id;
        let Some(audit) = audits.get_mut(&idx) else {
            continue;
        };
        let gold = div_gold.get(id).cloned().unwrap_or_default();
        if gold.len() < 2 || cand.len() < 2 {
            audit
                .notes
                .push("gold divergence: a gold or candidate run gave no gradable log".into());
            continue;
        }
        if let Some(r) = dynamic::divergence_reason(dynamic::divergences(&gold, &cand)) {
            audit.push(r);
        }
    }
}

/// An evaluation's files could not be rewritten.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {dir}: {source}")]
pub struct WriteError {
    pub dir: PathBuf,
    pub source: std::io::Error,
}

/// Write the new audits into their evaluations' files; returns every
/// record as it now stands, and the counts per model.
pub fn write_back(
    run_dir: &Path,
    rerun: bool,
    evals: &[Evaluation],
    mut audits: BTreeMap<usize, Audit>,
) -> Result<(Vec<EvalRecord>, AuditReport), WriteError> {
    let mut report = AuditReport {
        run_dir: run_dir.display().to_string(),
        rerun,
        ..Default::default()
    };
    let mut records = Vec::new();
    for (idx, e) in evals.iter().enumerate() {
        let mut record = e.record.clone();
        if let Some(audit) = audits.remove(&idx) {
            record.audit = Some(audit);
            e.dir
                .write_result(&record, !e.dir.has_patch())
                .map_err(|source| WriteError {
                    dir: e.dir.path().to_owned(),
                    source,
                })?;
        }
        report
            .models
            .entry(record.model_name_or_path.clone())
            .or_default()
            .add(&e.dir.leaf(), &record);
        records.push(record);
    }
    Ok((records, report))
}

/// Counts of a re-audit, per model.
#[derive(Debug, Default, Serialize)]
pub struct AuditReport {
    pub run_dir: String,
    pub rerun: bool,
    pub models: BTreeMap<String, AuditCounts>,
    pub seconds: f64,
}
