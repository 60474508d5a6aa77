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
use crate::grade::log_statuses;
use crate::outcome::{EvalRecord, Outcome};
use crate::parse::StatusMap;
use crate::report::{instance_report, record_paths, write_json_atomic, AuditCounts};
use crate::runner::{Job, RecordKey, RunConfig};
use crate::spec::SpecSet;

/// One evaluation of the audited run.
#[derive(Debug, Clone)]
pub struct Audited {
    pub dir: PathBuf,
    pub record: EvalRecord,
}

/// Read every evaluation of a run folder.
pub fn load(run_dir: &Path) -> Result<Vec<Audited>, String> {
    let paths = record_paths(run_dir).map_err(|e| format!("{}: {e}", run_dir.display()))?;
    if paths.is_empty() {
        return Err(format!(
            "{}: no evaluations (no */*/patchgrade.json)",
            run_dir.display()
        ));
    }
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let record: EvalRecord =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
            Ok(Audited {
                dir: p.parent().unwrap_or(Path::new(".")).to_owned(),
                record,
            })
        })
        .collect()
}

/// Static audit from the files a finished evaluation left behind. Dynamic
/// reasons found earlier are kept unless `drop_dynamic`.
pub fn static_audit(
    a: &Audited,
    inst: &Instance,
    specs: &SpecSet,
    drop_dynamic: bool,
) -> Option<Audit> {
    a.record.grade.as_ref()?;
    let patch = std::fs::read_to_string(a.dir.join("patch.diff")).ok()?;
    if patch.trim().is_empty() {
        return None;
    }
    let log = std::fs::read(a.dir.join("test_output.txt"))
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned());
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

fn pred(inst: &Instance, model: String, patch: Option<String>) -> Prediction {
    Prediction {
        instance_id: inst.instance_id.clone(),
        model_name_or_path: model,
        model_patch: patch,
        sample_id: None,
        extra: Default::default(),
    }
}

fn job(inst: Instance, prediction: Prediction, directives: Option<Vec<String>>) -> Job {
    Job {
        instance: Arc::new(inst),
        prediction,
        sample: None,
        directives,
        run_without_patch: false,
    }
}

/// The dynamic jobs for the resolved evaluations of `audited`.
pub fn plan(
    audited: &[Audited],
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
        let Ok(patch) = std::fs::read_to_string(a.dir.join("patch.diff")) else {
            continue;
        };
        let leaf = a
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
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
                    job(
                        hi.clone(),
                        pred(inst, "held-out-gold".into(), Some(inst.patch.clone())),
                        None,
                    ),
                    Purpose::HeldOutGold(inst.instance_id.clone()),
                    &mut jobs,
                );
            }
            push(
                job(
                    hi,
                    pred(inst, format!("held-out-{tag}"), Some(patch.clone())),
                    None,
                ),
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
                        pred(
                            inst,
                            format!("divergence-gold-{k}"),
                            Some(inst.patch.clone()),
                        ),
                        Some(files.clone()),
                    ),
                    Purpose::DivergenceGold(inst.instance_id.clone()),
                    &mut jobs,
                );
            }
            push(
                job(
                    di.clone(),
                    pred(inst, format!("divergence-{k}-{tag}"), Some(patch.clone())),
                    Some(files.clone()),
                ),
                Purpose::DivergenceCandidate(idx),
                &mut jobs,
            );
        }
    }
    (jobs, purposes)
}

/// Statuses from a dynamic evaluation's log.
fn statuses(
    cfg: &RunConfig,
    specs: &SpecSet,
    jobs: &BTreeMap<RecordKey, Job>,
    key: &RecordKey,
) -> Option<StatusMap> {
    let j = jobs.get(key)?;
    log_statuses(specs, &j.instance, &j.log_dir(cfg)).and_then(Result::ok)
}

/// Add the dynamic reasons to the audits of `audited` from the finished jobs.
pub fn judge(
    audited: &[Audited],
    audits: &mut BTreeMap<usize, Audit>,
    cfg: &RunConfig,
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
                if let Some(m) = statuses(cfg, specs, &by_key, key) {
                    held_gold.insert(id.clone(), m);
                }
            }
            Purpose::DivergenceGold(id) => {
                if let Some(m) = statuses(cfg, specs, &by_key, key) {
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
                match (held, held_gold.get(id), statuses(cfg, specs, &by_key, key)) {
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
                if let Some(m) = statuses(cfg, specs, &by_key, key) {
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

/// Write an updated audit into an evaluation's files.
pub fn write_back(a: &Audited, audit: Audit) -> std::io::Result<EvalRecord> {
    let mut record = a.record.clone();
    record.audit = Some(audit);
    if record.outcome.has_reference_report() {
        let patch_is_none = !a.dir.join("patch.diff").exists();
        write_json_atomic(
            &a.dir.join("report.json"),
            &instance_report(&record, patch_is_none),
        )?;
    }
    write_json_atomic(&a.dir.join("patchgrade.json"), &record)?;
    Ok(record)
}

/// Counts of a re-audit, per model.
#[derive(Debug, Default, Serialize)]
pub struct AuditReport {
    pub run_dir: String,
    pub rerun: bool,
    pub models: BTreeMap<String, AuditCounts>,
    pub seconds: f64,
}
