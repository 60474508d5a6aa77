//! Grading saved test logs again, without a container or a checkout: after a
//! parser fix, or to grade someone else's logs (the reference's
//! `swebench report`). Each log goes through the same pure grading the
//! runner uses ([`crate::grade::grade_log`]), so a regraded run reads as a
//! fresh run with today's parsers would.
//!
//! Two layouts are read: patchgrade's run folders (records beside the
//! logs), and the reference's `logs/run_evaluation/<run_id>/<model>/
//! <instance>/test_output.txt`, whose evaluations get a record made from
//! the log and the dataset row.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::audit::{audit_static, AuditInput};
use crate::dataset::{sha256_hex, Dataset, Instance};
use crate::grade::grade_log;
use crate::key::EvalKey;
use crate::outcome::Outcome;
use crate::parse::LogParser;
use crate::record::{EvalRecord, RanOn};
use crate::rundir::eval_dir::EvalDir;
use crate::rundir::{Evaluation, RunDir, RunDirError};
use crate::spec::SpecSet;

#[derive(Debug, thiserror::Error)]
pub enum RegradeError {
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    #[error("{0}: no evaluations found (neither <model>/<instance>/patchgrade.json nor <model>/<instance>/test_output.txt)")]
    Empty(PathBuf),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Where an evaluation's record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLayout {
    /// patchgrade's own record, regraded in place.
    Patchgrade,
    /// A reference log with no record of patchgrade's.
    Reference,
}

/// One evaluation after regrading.
#[derive(Debug, Clone)]
pub struct Regraded {
    pub dir: EvalDir,
    pub layout: LogLayout,
    /// The outcome before (None: the reference's log had no record).
    pub before: Option<Outcome>,
    pub record: EvalRecord,
    /// Whether the record differs from what was there (a new record always
    /// does).
    pub changed: bool,
}

/// An evaluation that was left as it was, and why.
#[derive(Debug, Clone)]
pub struct Skipped {
    pub dir: PathBuf,
    pub reason: String,
    /// The record as it stays, when there is one (it still counts in the
    /// summaries).
    pub record: Option<Box<EvalRecord>>,
}

/// The whole run regraded (nothing written yet).
#[derive(Debug, Default)]
pub struct Regrade {
    pub evaluations: Vec<Regraded>,
    pub skipped: Vec<Skipped>,
}

impl Regrade {
    /// The evaluations whose verdict changed.
    pub fn verdict_changes(&self) -> impl Iterator<Item = &Regraded> {
        self.evaluations
            .iter()
            .filter(|e| e.before != Some(e.record.outcome))
    }
}

/// The parser an instance's log is read with: the dataset row's own
/// `log_parser` (the reference's current datasets name one), else its spec's.
fn parser_for(specs: &SpecSet, inst: &Instance) -> Result<LogParser, String> {
    specs
        .for_instance(inst)
        .map(|rs| rs.spec.log_parser)
        .or_else(|spec_err| {
            match inst
                .extra
                .get("log_parser")
                .and_then(serde_json::Value::as_str)
            {
                Some(name) => name.parse::<LogParser>().map_err(|e| e.to_string()),
                None => Err(spec_err.to_string()),
            }
        })
}

/// Regrade every evaluation of a run folder.
pub fn regrade(run: &RunDir, dataset: &Dataset, specs: &SpecSet) -> Result<Regrade, RegradeError> {
    let mut out = Regrade::default();
    let ours = match run.evaluations() {
        Ok(evals) => evals,
        Err(RunDirError::Empty(_)) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let known: std::collections::BTreeSet<PathBuf> =
        ours.iter().map(|e| e.dir.path().to_path_buf()).collect();
    for eval in ours {
        let record = eval.record.clone();
        match regrade_ours(eval, dataset, specs) {
            Ok(r) => out.evaluations.push(r),
            Err(s) => out.skipped.push(Skipped {
                record: Some(Box::new(record)),
                ..s
            }),
        }
    }
    for dir in reference_dirs(&run.path())? {
        if known.contains(&dir) {
            continue;
        }
        match regrade_reference(EvalDir::new(dir.clone()), dataset, specs) {
            Ok(r) => out.evaluations.push(r),
            Err(s) => out.skipped.push(s),
        }
    }
    if out.evaluations.is_empty() && out.skipped.is_empty() {
        return Err(RegradeError::Empty(run.path()));
    }
    Ok(out)
}

fn skipped(dir: &EvalDir, reason: impl Into<String>) -> Skipped {
    Skipped {
        dir: dir.path().to_path_buf(),
        reason: reason.into(),
        record: None,
    }
}

/// A record of patchgrade's, graded again when its verdict came from a log.
fn regrade_ours(eval: Evaluation, dataset: &Dataset, specs: &SpecSet) -> Result<Regraded, Skipped> {
    let Evaluation { dir, record } = eval;
    if !record.outcome.has_reference_report() {
        // Empty, unapplied, timed out, or not the candidate's: no log
        // verdict to redo.
        return Err(skipped(
            &dir,
            format!("{}: no test verdict to regrade", record.outcome),
        ));
    }
    let inst = dataset.get(&record.instance_id).ok_or_else(|| {
        skipped(
            &dir,
            format!("{} is not in the dataset", record.instance_id),
        )
    })?;
    let log = dir
        .test_log()
        .ok_or_else(|| skipped(&dir, "no test_output.txt"))?;
    let parser = parser_for(specs, inst).map_err(|e| skipped(&dir, e))?;
    let before = record.outcome;
    let mut new = record.clone();
    grade_into(&mut new, inst, parser, &log, dir.patch().as_deref());
    if new.statuses == record.statuses && new.outcome == record.outcome {
        // Same verdict from the same statuses: keep the audit as it was
        // (it may hold checks that reran tests, which a regrade cannot).
        new.audit = record.audit.clone();
    }
    let changed = new != record;
    Ok(Regraded {
        dir,
        layout: LogLayout::Patchgrade,
        before: Some(before),
        record: new,
        changed,
    })
}

/// A reference log: a record made from the log and the dataset row.
fn regrade_reference(
    dir: EvalDir,
    dataset: &Dataset,
    specs: &SpecSet,
) -> Result<Regraded, Skipped> {
    let leaf = dir.leaf();
    let inst = dataset
        .get(&leaf)
        .ok_or_else(|| skipped(&dir, format!("{leaf} is not in the dataset")))?;
    let model = dir
        .path()
        .parent()
        .and_then(Path::file_name)
        .map(|m| m.to_string_lossy().into_owned())
        .unwrap_or_default();
    let log = dir
        .test_log()
        .ok_or_else(|| skipped(&dir, "no test_output.txt"))?;
    let parser = parser_for(specs, inst).map_err(|e| skipped(&dir, e))?;
    let patch = dir.patch();
    let mut record = EvalRecord::new(&inst.instance_id, &model, RanOn::ReferenceLog);
    // Never a cache hit (the key stays empty): this record did not come
    // from a run.
    record.patch_sha256 = patch.as_deref().map(sha256_hex);
    grade_into(&mut record, inst, parser, &log, patch.as_deref());
    Ok(Regraded {
        dir,
        layout: LogLayout::Reference,
        before: None,
        record,
        changed: true,
    })
}

/// The verdict fields of a record from its log, as the runner sets them.
fn grade_into(
    record: &mut EvalRecord,
    inst: &Instance,
    parser: LogParser,
    log: &str,
    patch: Option<&str>,
) {
    let graded = grade_log(parser, log, &inst.fail_to_pass, &inst.pass_to_pass);
    record.test_exit_code = graded.test_exit_code;
    record.detail = graded.detail(log);
    record.outcome = if graded.resolved() {
        Outcome::Resolved
    } else {
        Outcome::Unresolved
    };
    record.audit = None;
    match graded.graded {
        Ok((map, g)) => {
            record.statuses = Some(map);
            record.grade = Some(g);
            record.ungradable = None;
            if let Some(patch) = patch {
                let mut input = AuditInput::new(inst, patch);
                input.test_log = Some(log);
                input.log_parser = Some(parser);
                input.of_gold = AuditInput::is_gold(inst, &record.model_name_or_path, patch);
                record.audit = Some(audit_static(&input));
            }
        }
        Err(u) => {
            record.statuses = None;
            record.grade = None;
            record.ungradable = Some(u);
        }
    }
}

/// `<run>/<model>/<instance>` folders holding a test log, sorted.
fn reference_dirs(run: &Path) -> Result<Vec<PathBuf>, RegradeError> {
    let mut out = Vec::new();
    let Ok(models) = std::fs::read_dir(run) else {
        return Err(RegradeError::Empty(run.to_path_buf()));
    };
    for model in models.filter_map(Result::ok).map(|e| e.path()) {
        let Ok(leaves) = std::fs::read_dir(&model) else {
            continue;
        };
        for leaf in leaves.filter_map(Result::ok).map(|e| e.path()) {
            if leaf.join("test_output.txt").is_file() {
                out.push(leaf);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Write what changed: for each changed evaluation its previous
/// `report.json` and `patchgrade.json` are kept as `<name>.<stamp>.prev`,
/// then the new ones are written (atomically, the record last). Returns the
/// files kept.
pub fn write(regrade: &Regrade, stamp: u64) -> Result<Vec<PathBuf>, RegradeError> {
    let mut kept = Vec::new();
    for e in regrade.evaluations.iter().filter(|e| e.changed) {
        for name in ["report.json", crate::rundir::eval_dir::RECORD_FILE] {
            let path = e.dir.path().join(name);
            if path.exists() {
                let prev = e.dir.path().join(format!("{name}.{stamp}.prev"));
                std::fs::copy(&path, &prev).map_err(|source| RegradeError::Write {
                    path: prev.clone(),
                    source,
                })?;
                kept.push(prev);
            }
        }
        let patch_is_none = !e.dir.has_patch();
        e.dir
            .write_result(&e.record, patch_is_none)
            .map_err(|source| RegradeError::Write {
                path: e.dir.path().to_path_buf(),
                source,
            })?;
    }
    Ok(kept)
}

/// Every record after the regrade (regraded or left as it was) by (model,
/// instance, sample), for the summaries.
pub fn records(regrade: &Regrade) -> crate::runner::jobs::Records {
    let mut out: crate::runner::jobs::Records = BTreeMap::new();
    let kept = regrade.skipped.iter().filter_map(|s| s.record.as_deref());
    for r in regrade.evaluations.iter().map(|e| &e.record).chain(kept) {
        out.insert(
            EvalKey::new(
                &r.model_name_or_path,
                &r.instance_id,
                r.sample_id.as_deref(),
            ),
            Box::new(r.clone()),
        );
    }
    out
}
