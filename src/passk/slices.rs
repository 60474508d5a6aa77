//! Slices: the per-instance fields a report groups by (the dataset's rows,
//! metadata files joined on `instance_id` or `id`, the repository, the
//! number of files the gold patch touches), and the sliced metrics.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::keyed::Keyed;
use crate::dataset::{read_rows, Dataset, InputError, Instance};
use crate::metrics::aggregate::MetricTable;

/// Per-instance fields slices can group by: the dataset's rows (all their
/// fields) and metadata files joined on `instance_id` (or `id`).
#[derive(Debug, Clone, Default)]
pub struct SliceSource {
    pub dataset_path: Option<PathBuf>,
    instances: BTreeMap<String, Instance>,
    metadata: BTreeMap<String, Map<String, Value>>,
}

impl SliceSource {
    pub fn new(dataset: Option<(&Path, &Dataset)>) -> SliceSource {
        let mut s = SliceSource::default();
        if let Some((path, ds)) = dataset {
            s.dataset_path = Some(path.to_owned());
            s.instances = ds
                .instances
                .iter()
                .map(|i| (i.instance_id.clone(), i.clone()))
                .collect();
        }
        s
    }

    /// The fields of a run's instances: from `dataset`, else the dataset
    /// `run.json` names when it exists (a missing one is a note, not an
    /// error), then the metadata files.
    pub fn for_run(
        dataset: Option<&Path>,
        run_dataset: Option<&Path>,
        metadata: &[PathBuf],
        notes: &mut Vec<String>,
    ) -> Result<SliceSource, InputError> {
        let path = match (dataset, run_dataset) {
            (Some(p), _) => Some(p),
            (None, Some(p)) if p.exists() => Some(p),
            (None, Some(p)) => {
                notes.push(format!(
                    "the run's dataset {} is not found from here (pass --dataset)",
                    p.display()
                ));
                None
            }
            (None, None) => None,
        };
        let mut source = match path {
            Some(p) => SliceSource::new(Some((p, &Dataset::open(p)?))),
            None => SliceSource::new(None),
        };
        for m in metadata {
            source.add_metadata(m)?;
        }
        Ok(source)
    }

    pub fn has_dataset(&self) -> bool {
        self.dataset_path.is_some()
    }

    /// Adds the rows of a `.jsonl` or `.json` file (read as datasets are);
    /// later files do not override fields already joined.
    pub fn add_metadata(&mut self, path: &Path) -> Result<usize, InputError> {
        let rows = read_rows(path)?;
        let mut added = 0;
        for (line, v) in rows {
            let Value::Object(map) = v else {
                return Err(InputError::Row {
                    path: path.to_owned(),
                    line,
                    reason: "row is not a JSON object".into(),
                });
            };
            let Some(id) = map
                .get("instance_id")
                .or_else(|| map.get("id"))
                .and_then(Value::as_str)
                .map(str::to_string)
            else {
                return Err(InputError::Row {
                    path: path.to_owned(),
                    line,
                    reason: "no string \"instance_id\" or \"id\"".into(),
                });
            };
            let entry = self.metadata.entry(id).or_default();
            for (k, v) in map {
                entry.entry(k).or_insert(v);
            }
            added += 1;
        }
        Ok(added)
    }

    /// The repository of an instance: the dataset's, else read from a
    /// SWE-bench id (`owner__name-123` -> `owner/name`).
    pub fn repo(&self, id: &str) -> String {
        if let Some(i) = self.instances.get(id) {
            return i.repo.clone();
        }
        if let Some(r) = self.metadata.get(id).and_then(|m| m.get("repo")?.as_str()) {
            return r.to_string();
        }
        let stem = id.rsplit_once('-').map_or(id, |(s, _)| s);
        stem.replacen("__", "/", 1)
    }

    /// Number of files the gold patch touches, bucketed (`1`, `2`, `3`, `4+`).
    pub fn gold_files(&self, id: &str) -> String {
        match self.instances.get(id) {
            None => "(not in dataset)".into(),
            Some(i) if i.patch.trim().is_empty() => "(no gold patch)".into(),
            Some(i) => match crate::patch::Patch::parse(&i.patch) {
                Ok(p) if p.files.len() >= 4 => "4+".into(),
                Ok(p) => p.files.len().to_string(),
                Err(_) => "(unreadable gold patch)".into(),
            },
        }
    }

    /// A field of an instance, from the dataset row then the metadata.
    pub fn field(&self, id: &str, field: &str) -> Option<String> {
        let from_dataset = self
            .instances
            .get(id)
            .and_then(|i| serde_json::to_value(i).ok())
            .and_then(|v| v.get(field).cloned());
        let v = from_dataset.or_else(|| self.metadata.get(id)?.get(field).cloned())?;
        Some(match v {
            Value::Null => return None,
            Value::String(s) => s,
            other => other.to_string(),
        })
    }

    /// The group of an instance in a slice dimension.
    pub fn group(&self, id: &str, by: &str) -> String {
        match by {
            "repo" => self.repo(id),
            "gold_files" => self.gold_files(id),
            _ => self.field(id, by).unwrap_or_else(|| "(missing)".into()),
        }
    }
}

/// The metrics of one group of a slice.
#[derive(Debug, Clone, Serialize)]
pub struct SliceGroup {
    pub instances: usize,
    pub metrics: MetricTable,
}

/// Slice dimensions in report order (`repo`, `gold_files`, then `--by`),
/// each with its groups.
pub type Slices = Keyed<BTreeMap<String, SliceGroup>>;
