//! Samples: what the report needs of each evaluated sample, read typed from
//! a run folder (or from the records a run just made), and the per-instance
//! (n, c) tables. Samples whose outcome does not count for the model
//! (environment and infrastructure failures) are listed and left out of n.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::metrics::aggregate::InstanceSamples;
use crate::outcome::Outcome;
use crate::patch::ApplyStrategy;
use crate::record::EvalRecord;
use crate::rundir::{RunDir, RunDirError};

/// What the report needs of one evaluated sample.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRecord {
    pub instance_id: String,
    pub sample_id: Option<String>,
    pub outcome: Outcome,
    /// The audit verdict was `suspect`.
    pub suspect: bool,
    /// The audit verdict was `inconclusive` (a requested check could not
    /// run): not a clean pass either.
    pub inconclusive: bool,
    /// The record has an audit verdict at all.
    pub audited: bool,
    pub apply_strategy: Option<ApplyStrategy>,
    pub patch_sha256: Option<String>,
}

impl SampleRecord {
    pub fn of(record: &EvalRecord) -> SampleRecord {
        SampleRecord {
            instance_id: record.instance_id.clone(),
            sample_id: record.sample_id.clone(),
            outcome: record.outcome,
            suspect: record.audit.as_ref().is_some_and(|a| a.is_suspect()),
            inconclusive: record.audit.as_ref().is_some_and(|a| a.is_inconclusive()),
            audited: record.audit.is_some(),
            apply_strategy: record.apply_strategy,
            patch_sha256: record.patch_sha256.clone(),
        }
    }

    pub fn resolved(&self) -> bool {
        self.outcome == Outcome::Resolved
    }

    /// Resolved, and the audit found it clean (not suspect, not
    /// inconclusive).
    pub fn clean_resolved(&self) -> bool {
        self.resolved() && !self.suspect && !self.inconclusive
    }

    /// An environment or infrastructure failure: not the model's.
    pub fn excluded(&self) -> bool {
        !self.outcome.counts_for_model()
    }
}

/// Sort key of sample ids: numbers in numeric order, then other ids.
pub fn sample_order(id: Option<&str>) -> (u8, u64, String) {
    match id {
        None => (0, 0, String::new()),
        Some(s) => match s.parse::<u64>() {
            Ok(n) => (1, n, String::new()),
            Err(_) => (2, 0, s.to_string()),
        },
    }
}

/// Every sample of one model, by instance (samples in id order).
#[derive(Debug, Clone, Default)]
pub struct ModelSamples {
    pub by_instance: BTreeMap<String, Vec<SampleRecord>>,
}

impl ModelSamples {
    /// Whether the model has several samples per instance (or sample ids).
    pub fn has_samples(&self) -> bool {
        self.by_instance
            .values()
            .any(|s| s.len() > 1 || s.iter().any(|r| r.sample_id.is_some()))
    }

    /// The (n, c) table: n counts every sample but the excluded ones, c the
    /// resolved (`clean`: resolved and not suspect). Instances with no usable
    /// sample are left out (see [`ModelSamples::unusable_instances`]).
    pub fn table(&self, clean: bool) -> Vec<InstanceSamples> {
        self.by_instance
            .iter()
            .filter_map(|(id, samples)| {
                let usable: Vec<bool> = samples
                    .iter()
                    .filter(|s| !s.excluded())
                    .map(|s| {
                        if clean {
                            s.clean_resolved()
                        } else {
                            s.resolved()
                        }
                    })
                    .collect();
                (!usable.is_empty()).then(|| InstanceSamples::from_outcomes(id.clone(), &usable))
            })
            .collect()
    }

    /// Instances all of whose samples were excluded.
    pub fn unusable_instances(&self) -> Vec<String> {
        self.by_instance
            .iter()
            .filter(|(_, s)| s.iter().all(SampleRecord::excluded))
            .map(|(id, _)| id.clone())
            .collect()
    }

    pub fn excluded_samples(&self) -> impl Iterator<Item = &SampleRecord> {
        self.by_instance.values().flatten().filter(|s| s.excluded())
    }

    /// Usable samples with an audit verdict.
    pub fn audited(&self) -> usize {
        self.by_instance
            .values()
            .flatten()
            .filter(|s| s.audited && !s.excluded())
            .count()
    }

    pub fn suspect_passes(&self) -> usize {
        self.by_instance
            .values()
            .flatten()
            .filter(|s| s.resolved() && s.suspect && !s.excluded())
            .count()
    }
}

/// The records of one run folder, by model.
#[derive(Debug, Clone, Default)]
pub struct RunSamples {
    pub dir: PathBuf,
    pub run_id: String,
    /// The dataset path `run.json` names, as given to the run.
    pub dataset: Option<PathBuf>,
    pub models: BTreeMap<String, ModelSamples>,
}

impl RunSamples {
    /// Builds the tables from records.
    pub fn from_records<'a>(
        dir: &Path,
        run_id: &str,
        records: impl IntoIterator<Item = &'a EvalRecord>,
    ) -> RunSamples {
        let mut run = RunSamples {
            dir: dir.to_owned(),
            run_id: run_id.to_string(),
            ..RunSamples::default()
        };
        for r in records {
            run.add(r.model_name_or_path.clone(), SampleRecord::of(r));
        }
        run.sort();
        run
    }

    fn add(&mut self, model: String, rec: SampleRecord) {
        self.models
            .entry(model)
            .or_default()
            .by_instance
            .entry(rec.instance_id.clone())
            .or_default()
            .push(rec);
    }

    fn sort(&mut self) {
        for m in self.models.values_mut() {
            for s in m.by_instance.values_mut() {
                s.sort_by_key(|r| sample_order(r.sample_id.as_deref()));
            }
        }
    }

    /// Largest number of usable samples of any instance of any model.
    pub fn n_max(&self) -> u64 {
        self.models
            .values()
            .flat_map(|m| m.table(false))
            .map(|s| s.n)
            .max()
            .unwrap_or(0)
    }
}

/// Reads every finished evaluation of a run folder, and the dataset path
/// from its `run.json`.
pub fn load_run(dir: &Path) -> Result<RunSamples, RunDirError> {
    let rundir = RunDir::at(dir);
    let evals = rundir.evaluations()?;
    let mut run = RunSamples::from_records(
        dir,
        &rundir.recorded_run_id(),
        evals.iter().map(|e| &e.record),
    );
    run.dataset = rundir.meta().and_then(|m| m.dataset_path());
    Ok(run)
}
