//! Jobs: what one evaluation is (instance, prediction, sample, test
//! selection), made from predictions, and grouped so identical samples run
//! once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::dataset::{Dataset, Instance, Prediction};
use crate::key::EvalKey;
use crate::rundir::eval_dir::EvalDir;
use crate::rundir::RunDir;
pub use crate::settings::Overrides;

/// Predictions that cannot be made into jobs.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("sample_id {id:?} of {instance_id} must be non-empty with no '/'")]
    SampleId { id: String, instance_id: String },
    #[error("two predictions for {instance_id} from model {model} have sample id {id}")]
    DuplicateSample {
        id: String,
        instance_id: String,
        model: String,
    },
}

/// One unit of work.
#[derive(Debug, Clone)]
pub struct Job {
    pub instance: Arc<Instance>,
    pub prediction: Prediction,
    /// Set when the model has several samples per instance.
    pub sample: Option<String>,
    /// Runner arguments instead of the test patch's files (validation and
    /// audits run chosen test files).
    pub directives: Option<Vec<String>>,
    /// Run the tests even when the patch is empty (the base tree as is),
    /// instead of recording `empty_patch`.
    pub run_without_patch: bool,
    /// Settings of this evaluation that differ from the run's.
    pub overrides: Overrides,
    /// Run the FAIL_TO_PASS tests through the confirmation driver
    /// (`script::confirm`) instead of the spec's test command.
    pub confirm: bool,
}

/// A run's records by key. Boxed: a record is about 650 bytes, and B-tree
/// nodes are often half empty, so inline records doubled the memory of a
/// 100,000-prediction run.
pub type Records = std::collections::BTreeMap<EvalKey, Box<crate::record::EvalRecord>>;

impl Job {
    /// A single-sample job with the instance's own tests.
    pub fn new(instance: Arc<Instance>, prediction: Prediction) -> Job {
        Job {
            instance,
            prediction,
            sample: None,
            directives: None,
            run_without_patch: false,
            overrides: Overrides::default(),
            confirm: false,
        }
    }

    /// The test command of a confirmation job for this spec. A spec with
    /// no driver gets a command that marks the log ungradable, naming why:
    /// the check then could not run, and never passes.
    pub fn test_cmd(&self, spec: &crate::spec::Spec) -> Option<String> {
        if !self.confirm {
            return None;
        }
        Some(match crate::script::confirm::driver(spec) {
            Ok(d) => d.command(&self.instance.fail_to_pass),
            Err(e) => format!(
                "echo {}",
                crate::script::quote(&format!(">>>>> Tests Errored: {e}"))
            ),
        })
    }

    /// This job's folder in a run folder.
    pub fn eval_dir(&self, rundir: &RunDir) -> EvalDir {
        rundir.eval_dir(
            &self.prediction.model_name_or_path,
            &self.instance.instance_id,
            self.sample.as_deref(),
        )
    }

    pub fn key(&self) -> EvalKey {
        EvalKey::new(
            &self.prediction.model_name_or_path,
            &self.instance.instance_id,
            self.sample.as_deref(),
        )
    }
}

/// Jobs from predictions. A model with several predictions for one
/// instance (repeated rows, `sample_id`, or several files) has samples: each
/// sample is its own job, named by its `sample_id` or its position.
pub fn jobs_for_predictions(
    dataset: &Dataset,
    preds: Vec<Prediction>,
) -> Result<Vec<Job>, JobError> {
    let by_id: BTreeMap<&str, Arc<Instance>> = dataset
        .instances
        .iter()
        .map(|i| (i.instance_id.as_str(), Arc::new(i.clone())))
        .collect();
    let preds: Vec<Prediction> = preds
        .into_iter()
        .filter(|p| by_id.contains_key(p.instance_id.as_str()))
        .collect();
    let mut per_pair: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for p in &preds {
        *per_pair
            .entry((p.model_name_or_path.as_str(), p.instance_id.as_str()))
            .or_default() += 1;
    }
    let sampled: BTreeSet<String> = preds
        .iter()
        .filter(|p| {
            p.sample_id.is_some()
                || per_pair[&(p.model_name_or_path.as_str(), p.instance_id.as_str())] > 1
        })
        .map(|p| p.model_name_or_path.clone())
        .collect();
    let mut position: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut seen: BTreeSet<EvalKey> = BTreeSet::new();
    let mut out = Vec::new();
    for p in preds {
        let inst = by_id[p.instance_id.as_str()].clone();
        let sample = if sampled.contains(&p.model_name_or_path) {
            let pos = position
                .entry((p.model_name_or_path.clone(), p.instance_id.clone()))
                .or_default();
            let id = p.sample_id.clone().unwrap_or_else(|| pos.to_string());
            *pos += 1;
            if id.is_empty() || id.contains('/') {
                return Err(JobError::SampleId {
                    id,
                    instance_id: p.instance_id,
                });
            }
            if !seen.insert(EvalKey::new(
                &p.model_name_or_path,
                &p.instance_id,
                Some(&id),
            )) {
                return Err(JobError::DuplicateSample {
                    id,
                    instance_id: p.instance_id,
                    model: p.model_name_or_path,
                });
            }
            Some(id)
        } else {
            None
        };
        out.push(Job {
            instance: inst,
            prediction: p,
            sample,
            directives: None,
            run_without_patch: false,
            overrides: Overrides::default(),
            confirm: false,
        });
    }
    Ok(out)
}

/// Jobs grouped so that samples of one (model, instance) with the same
/// non-empty patch run once: (primary, followers), in input order.
pub(super) fn group_identical(jobs: Vec<Job>) -> Vec<(Job, Vec<Job>)> {
    let mut groups: Vec<(Job, Vec<Job>)> = Vec::new();
    let mut index: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for job in jobs {
        let sha = match (&job.sample, job.prediction.patch_sha256()) {
            (Some(_), Some(sha)) => sha,
            _ => {
                groups.push((job, Vec::new()));
                continue;
            }
        };
        let key = (
            job.prediction.model_name_or_path.clone(),
            job.instance.instance_id.clone(),
            sha,
        );
        match index.get(&key) {
            Some(&i) => groups[i].1.push(job),
            None => {
                index.insert(key, groups.len());
                groups.push((job, Vec::new()));
            }
        }
    }
    groups
}
