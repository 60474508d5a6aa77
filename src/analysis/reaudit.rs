//! `patchgrade audit RUN_DIR`: audit a finished run again.
//!
//! Static checks are re-run from the files the run left (patch.diff,
//! test_output.txt); with `--rerun`, the dynamic checks run tests: held-out
//! tests and divergence from gold (see [`crate::audit::dynamic`]); with
//! `--confirm`, the confirmation run (`super::confirm`). Their evaluations
//! go to a sibling run folder `<run_id>.audit`; the verdicts are written
//! back into each evaluation's patchgrade.json and report.json.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::audit::dynamic::{self, HeldOut};
use crate::audit::{audit_static, Audit, AuditInput, CheckKind, CheckOutcome, CheckRun};
use crate::dataset::{model_dir, Dataset, Instance, Prediction};
use crate::grade::Ungradable;
use crate::key::EvalKey;
use crate::outcome::Outcome;
use crate::parse::StatusMap;
use crate::record::EvalRecord;
use crate::repo::RepoCache;
use crate::report::AuditCounts;
use crate::rundir::{Evaluation, RunDir};
use crate::runner::jobs::Job;
use crate::runner::jobs::Records;
use crate::script;
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
/// Dynamic reasons and checks found earlier are kept, except those of the
/// checks in `rerun` (run again now). `repos` gives the mirrors the
/// future-copy check reads (none: it is a note).
pub fn static_audits(
    evals: &[Evaluation],
    dataset: &Dataset,
    dataset_path: &Path,
    specs: &SpecSet,
    repos: Option<&RepoCache>,
    rerun: &[CheckKind],
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
        let mirror = repos.and_then(|r| r.existing_mirror(&inst.repo));
        if let Some(audit) = static_audit(e, inst, specs, mirror.as_deref(), rerun) {
            audits.insert(idx, audit);
        }
    }
    Ok(audits)
}

/// Static audit from the files a finished evaluation left behind. Dynamic
/// reasons and checks found earlier are kept unless their check is in
/// `rerun`.
fn static_audit(
    a: &Evaluation,
    inst: &Instance,
    specs: &SpecSet,
    mirror: Option<&Path>,
    rerun: &[CheckKind],
) -> Option<Audit> {
    a.record.grade.as_ref()?;
    let patch = a.dir.patch()?;
    if patch.trim().is_empty() {
        return None;
    }
    let log = a.dir.test_log();
    let mut input = AuditInput::new(inst, &patch);
    input.test_log = log.as_deref();
    input.log_parser = specs.for_instance(inst).ok().map(|s| s.spec.log_parser);
    input.mirror = mirror;
    input.of_gold = AuditInput::is_gold(inst, &a.record.model_name_or_path, &patch);
    let mut audit = audit_static(&input);
    let old = a.record.audit.iter();
    for r in old.clone().flat_map(|old| old.reasons.iter()) {
        if r.kind.check().is_some_and(|c| !rerun.contains(&c)) {
            audit.push(r.clone());
        }
    }
    for c in old.flat_map(|old| old.checks.iter()) {
        if !rerun.contains(&c.check) {
            audit.record_check(c.clone());
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

/// The dynamic evaluations to run, what each is for (`P`: this module's
/// [`Purpose`], or the confirmation's), and the checks that could not even
/// be planned (by index into the audited list).
#[derive(Debug)]
pub struct Plan<P = Purpose> {
    pub jobs: Vec<Job>,
    pub purposes: Vec<(EvalKey, P)>,
    pub unplanned: Vec<(usize, CheckRun)>,
}

impl<P> Default for Plan<P> {
    fn default() -> Self {
        Plan {
            jobs: Vec::new(),
            purposes: Vec::new(),
            unplanned: Vec::new(),
        }
    }
}

impl<P> Plan<P> {
    pub(super) fn push(&mut self, j: Job, p: P) {
        self.purposes.push((j.key(), p));
        self.jobs.push(j);
    }
}

/// Divergence runs select test files through the spec's own directive rule
/// (django's runtests.py refuses file paths), never raw paths.
fn divergence_directives(
    inst: &Instance,
    files: &[String],
    specs: &SpecSet,
) -> Result<Vec<String>, String> {
    let spec = specs.for_instance(inst).map_err(|e| e.to_string())?;
    let mode = spec.spec.test_directives;
    let dirs: Vec<String> = files
        .iter()
        .filter_map(|f| script::directive(f, mode))
        .collect();
    if dirs.is_empty() {
        return Err(format!(
            "the spec's test_directives ({mode:?}) cannot select the test files {}",
            files.join(", ")
        ));
    }
    Ok(dirs)
}

/// The dynamic jobs for the resolved evaluations of `audited`.
pub fn plan(
    audited: &[Evaluation],
    dataset: &Dataset,
    specs: &SpecSet,
    held_out: &BTreeMap<String, HeldOut>,
    list_files: impl Fn(&Instance) -> Vec<String>,
) -> Plan {
    let mut plan = Plan::default();
    let mut gold_planned: BTreeMap<String, bool> = BTreeMap::new();
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
                plan.push(
                    job(hi.clone(), "held-out-gold".into(), &inst.patch, None),
                    Purpose::HeldOutGold(inst.instance_id.clone()),
                );
            }
            plan.push(
                job(hi, format!("held-out-{tag}"), &patch, None),
                Purpose::HeldOutCandidate(idx),
            );
        }
        let files = dynamic::divergence_test_files(inst, &patch, &list_files(inst));
        if files.is_empty() {
            // Requested but with nothing to run: not a pass of the check.
            let c = CheckRun::could_not_run(
                CheckKind::GoldDivergence,
                "no Python test file among the test patch's files or named after the changed modules",
            );
            plan.unplanned.push((idx, c));
            continue;
        }
        let dirs = match divergence_directives(inst, &files, specs) {
            Ok(d) => d,
            Err(cause) => {
                let c = CheckRun::could_not_run(CheckKind::GoldDivergence, cause);
                plan.unplanned.push((idx, c));
                continue;
            }
        };
        let mut di = inst.clone();
        di.fail_to_pass.clear();
        di.pass_to_pass.clear();
        for k in 1..=2 {
            if first_for_instance {
                plan.push(
                    job(
                        di.clone(),
                        format!("divergence-gold-{k}"),
                        &inst.patch,
                        Some(dirs.clone()),
                    ),
                    Purpose::DivergenceGold(inst.instance_id.clone()),
                );
            }
            plan.push(
                job(
                    di.clone(),
                    format!("divergence-{k}-{tag}"),
                    &patch,
                    Some(dirs.clone()),
                ),
                Purpose::DivergenceCandidate(idx),
            );
        }
    }
    plan
}

/// Why a dynamic evaluation cannot be judged.
#[derive(Debug, Clone)]
pub(super) struct Unusable {
    outcome: Option<CheckOutcome>,
    cause: String,
}

impl Unusable {
    pub(super) fn check(self, kind: CheckKind, whose: &str) -> CheckRun {
        let mut c = CheckRun::could_not_run(kind, format!("{whose}: {}", self.cause));
        c.outcome = self.outcome;
        c
    }
}

/// The first line of a record's detail, shortened.
fn first_line(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    line.chars().take(300).collect()
}

/// The last line of a test log that names an error (a traceback's last
/// line, a runner's refusal), to say why a run gave no results.
fn error_line(log: &str) -> Option<String> {
    log.lines()
        .rev()
        .find(|l| {
            let t = l.trim_start();
            !t.starts_with(">>>>>")
                && !t.starts_with('+')
                && (t.contains("Error") || t.contains("error:") || t.contains("Exception"))
        })
        .map(first_line)
}

/// The statuses of a finished dynamic evaluation that reached a grade
/// (resolved or unresolved with a gradable log), or why it did not.
pub(super) fn usable(
    rundir: &RunDir,
    specs: &SpecSet,
    jobs: &BTreeMap<EvalKey, Job>,
    records: &Records,
    key: &EvalKey,
) -> Result<StatusMap, Unusable> {
    let (Some(j), Some(r)) = (jobs.get(key), records.get(key)) else {
        return Err(Unusable {
            outcome: None,
            cause: "not evaluated (the run was interrupted)".into(),
        });
    };
    if !matches!(r.outcome, Outcome::Resolved | Outcome::Unresolved) {
        return Err(Unusable {
            outcome: Some(CheckOutcome::Outcome(r.outcome)),
            cause: r
                .detail
                .as_deref()
                .map(first_line)
                .unwrap_or_else(|| r.outcome.name().into()),
        });
    }
    let dir = j.eval_dir(rundir);
    let ungradable = |u: &Ungradable| {
        let mut cause = format!("ungradable log: {u}");
        if let Some(l) = dir.test_log().as_deref().and_then(error_line) {
            cause.push_str(&format!("; {l}"));
        }
        Unusable {
            outcome: Some(CheckOutcome::Ungradable),
            cause,
        }
    };
    match dir.statuses(r, specs, &j.instance) {
        Some(Ok(m)) if m.is_empty() => {
            let mut cause = String::from("the log holds no test results");
            if let Some(l) = dir.test_log().as_deref().and_then(error_line) {
                cause.push_str(&format!("; {l}"));
            }
            Err(Unusable {
                outcome: Some(CheckOutcome::Outcome(r.outcome)),
                cause,
            })
        }
        Some(Ok(m)) => Ok(m),
        Some(Err(u)) => Err(ungradable(&u)),
        None => Err(Unusable {
            outcome: Some(CheckOutcome::Outcome(r.outcome)),
            cause: "no test log".into(),
        }),
    }
}

/// Add the dynamic reasons, and how each check went, to the audits of
/// `audited` from the finished jobs.
pub fn judge(
    audited: &[Evaluation],
    audits: &mut BTreeMap<usize, Audit>,
    rundir: &RunDir,
    specs: &SpecSet,
    plan: Plan,
    records: &Records,
) {
    let by_key: BTreeMap<EvalKey, Job> = plan.jobs.into_iter().map(|j| (j.key(), j)).collect();
    let look = |key: &EvalKey| usable(rundir, specs, &by_key, records, key);
    let mut held_gold: BTreeMap<&str, Result<StatusMap, Unusable>> = BTreeMap::new();
    let mut div_gold: BTreeMap<&str, Vec<Result<StatusMap, Unusable>>> = BTreeMap::new();
    for (key, p) in &plan.purposes {
        match p {
            Purpose::HeldOutGold(id) => {
                held_gold.insert(id, look(key));
            }
            Purpose::DivergenceGold(id) => div_gold.entry(id).or_default().push(look(key)),
            _ => {}
        }
    }
    let mut div_cand: BTreeMap<usize, Vec<Result<StatusMap, Unusable>>> = BTreeMap::new();
    for (key, p) in &plan.purposes {
        match p {
            Purpose::HeldOutCandidate(idx) => {
                let id = audited[*idx].record.instance_id.as_str();
                let Some(audit) = audits.get_mut(idx) else {
                    continue;
                };
                // The held-out run's instance carries the held-out tests.
                let Some(j) = by_key.get(key) else { continue };
                let held = HeldOut {
                    tests: j.instance.fail_to_pass.clone(),
                    held_out_test_patch: j.instance.test_patch.clone(),
                };
                let gold = held_gold.get(id).cloned().unwrap_or(Err(Unusable {
                    outcome: None,
                    cause: "not evaluated".into(),
                }));
                let check = match (gold, look(key)) {
                    (Err(u), _) => u.check(CheckKind::HeldOut, "gold's held-out run"),
                    (_, Err(u)) => u.check(CheckKind::HeldOut, "the candidate's held-out run"),
                    (Ok(g), Ok(c)) => {
                        if let Some(r) = dynamic::fails_held_out(&held, &g, &c) {
                            audit.push(r);
                        }
                        dynamic::held_out_baseline(&held, &g)
                    }
                };
                audit.record_check(check);
            }
            Purpose::DivergenceCandidate(idx) => {
                div_cand.entry(*idx).or_default().push(look(key));
            }
            _ => {}
        }
    }
    for (idx, cand) in div_cand {
        let id = audited[idx].record.instance_id.as_str();
        let Some(audit) = audits.get_mut(&idx) else {
            continue;
        };
        let gold = div_gold.get(id).cloned().unwrap_or_default();
        let kind = CheckKind::GoldDivergence;
        let check = match (all_usable(gold, 2), all_usable(cand, 2)) {
            (Err(u), _) => u.check(kind, "a gold divergence run"),
            (_, Err(u)) => u.check(kind, "a candidate divergence run"),
            (Ok(gold), Ok(cand)) => {
                if let Some(r) = dynamic::divergence_reason(dynamic::divergences(&gold, &cand)) {
                    audit.push(r);
                }
                dynamic::divergence_baseline(&gold)
            }
        };
        audit.record_check(check);
    }
    for (idx, check) in plan.unplanned {
        if let Some(audit) = audits.get_mut(&idx) {
            audit.record_check(check);
        }
    }
}

/// `n` usable runs, or why one is not.
fn all_usable(
    runs: Vec<Result<StatusMap, Unusable>>,
    n: usize,
) -> Result<Vec<StatusMap>, Unusable> {
    if runs.len() < n {
        return Err(Unusable {
            outcome: None,
            cause: format!("{} of {n} runs were planned", runs.len()),
        });
    }
    runs.into_iter().collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_line_of_a_run_that_gave_no_results() {
        let log = "+ python3 tests/runtests.py a/b.py\nTraceback (most recent call last):\n  File \"tests/runtests.py\", line 9, in <module>\nRuntimeError: One of the test labels is a path to a file: 'a/b.py'\n>>>>> Test Exit Code: 1\n";
        assert_eq!(
            error_line(log).as_deref(),
            Some("RuntimeError: One of the test labels is a path to a file: 'a/b.py'")
        );
        assert_eq!(error_line("Ran 0 tests\nOK\n"), None);
    }
}
