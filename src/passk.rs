//! pass@k reports over run folders (`patchgrade report`, and the table at
//! the end of `patchgrade run`).
//!
//! A run folder (`<log_root>/<run_id>`) holds one `patchgrade.json` per
//! evaluated sample, at `<model>/<instance_id>[@<sample>]/`. They are read as
//! JSON values (so fields other modules add, such as `audit`, are seen
//! without this module knowing their types) into per-instance sample tables:
//! n samples, c resolved. Samples that ended in `infra_error` or
//! `environment_build_failed` say nothing about the model: they are listed
//! and left out of n. From the tables: pass@k and pass^k for each k with
//! 95% bootstrap intervals over instances, their "clean" variants (a resolved
//! sample whose audit verdict is `suspect` counts as a failure), slices (by
//! repo, by number of files the gold patch touches, by any dataset or
//! metadata field), a paired comparison of two runs, and the outputs: a
//! readable table, JSON, and a Markdown report with SVG plots.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::cli::{CliError, ReportArgs};
use crate::dataset::{model_dir, Dataset, Instance};
use crate::metrics::{
    instance_scores, metric_key, paired_diff, summarize, InstanceSamples, MetricKind,
    MetricSummary, MetricTable, PairedDiff, DEFAULT_RESAMPLES, DEFAULT_SEED,
};
use crate::plot;

/// Outcomes that say nothing about the model (excluded from n).
pub const EXCLUDED_OUTCOMES: [&str; 2] = ["infra_error", "environment_build_failed"];

/// The k values reported when none are asked for, kept up to the largest n.
const DEFAULT_KS: [u64; 7] = [1, 2, 5, 10, 20, 50, 100];

/// Ids listed at most in table notes (the JSON lists all).
const MAX_IDS_SHOWN: usize = 8;

/// A run folder could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Record { path: PathBuf, reason: String },
    #[error("no evaluations (<model>/<instance>/patchgrade.json) found under {0}; a run folder is <log_dir>/<run_id>")]
    Empty(PathBuf),
    #[error("{path}:{line}: {reason}")]
    Row {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

/// What the report needs of one evaluated sample.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SampleRecord {
    pub instance_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_id: Option<String>,
    pub outcome: String,
    /// The audit verdict was `suspect`.
    pub suspect: bool,
    /// The record has an audit verdict at all.
    pub audited: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apply_strategy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_sha256: Option<String>,
}

impl SampleRecord {
    /// Reads a `patchgrade.json` value; returns the model name with it.
    pub fn from_value(v: &Value) -> Result<(String, SampleRecord), String> {
        let text = |key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
        let need = |key: &str| text(key).ok_or_else(|| format!("no string field {key:?}"));
        let sample_id = match v.get("sample_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => Some(other.to_string()),
        };
        Ok((
            need("model_name_or_path")?,
            SampleRecord {
                instance_id: need("instance_id")?,
                sample_id,
                outcome: need("outcome")?,
                suspect: v["audit"]["verdict"].as_str() == Some("suspect"),
                audited: v["audit"]["verdict"].is_string(),
                apply_strategy: text("apply_strategy"),
                patch_sha256: text("patch_sha256"),
            },
        ))
    }

    pub fn resolved(&self) -> bool {
        self.outcome == "resolved"
    }

    /// Resolved and not flagged by the audit.
    pub fn clean_resolved(&self) -> bool {
        self.resolved() && !self.suspect
    }

    /// An environment or infrastructure failure: not the model's.
    pub fn excluded(&self) -> bool {
        EXCLUDED_OUTCOMES.contains(&self.outcome.as_str())
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
    /// Builds the tables from `patchgrade.json` values.
    pub fn from_values<'a>(
        dir: &Path,
        run_id: &str,
        values: impl IntoIterator<Item = &'a Value>,
    ) -> Result<RunSamples, String> {
        let mut run = RunSamples {
            dir: dir.to_owned(),
            run_id: run_id.to_string(),
            ..RunSamples::default()
        };
        for v in values {
            let (model, rec) = SampleRecord::from_value(v)?;
            run.add(model, rec);
        }
        run.sort();
        Ok(run)
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

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LoadError + '_ {
    move |source| LoadError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Reads every `<model>/<leaf>/patchgrade.json` under a run folder, and the
/// dataset path from its `run.json`.
pub fn load_run(dir: &Path) -> Result<RunSamples, LoadError> {
    let mut values = Vec::new();
    for path in crate::report::record_paths(dir).map_err(io(dir))? {
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| LoadError::Record {
            path: path.clone(),
            reason: format!("invalid JSON: {e}"),
        })?;
        SampleRecord::from_value(&v).map_err(|reason| LoadError::Record {
            path: path.clone(),
            reason,
        })?;
        values.push(v);
    }
    if values.is_empty() {
        return Err(LoadError::Empty(dir.to_owned()));
    }
    let meta = crate::runner::RunMeta::read(dir);
    let run_id = meta
        .as_ref()
        .map(|m| m.run_id.clone())
        .or_else(|| dir.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let mut run =
        RunSamples::from_values(dir, &run_id, &values).map_err(|reason| LoadError::Record {
            path: dir.to_owned(),
            reason,
        })?;
    run.dataset = meta.and_then(|m| m.dataset_path());
    Ok(run)
}

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

    pub fn has_dataset(&self) -> bool {
        self.dataset_path.is_some()
    }

    /// Adds the rows of a `.jsonl` file or `.json` list; later files do not
    /// override fields already joined.
    pub fn add_metadata(&mut self, path: &Path) -> Result<usize, LoadError> {
        let text = std::fs::read_to_string(path).map_err(io(path))?;
        let rows: Vec<(usize, Value)> = if path.extension().and_then(|e| e.to_str()) == Some("json")
        {
            match serde_json::from_str(&text) {
                Ok(Value::Array(items)) => items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| (i + 1, v))
                    .collect(),
                Ok(_) => {
                    return Err(LoadError::Row {
                        path: path.to_owned(),
                        line: 1,
                        reason: "expected a JSON list of rows".into(),
                    })
                }
                Err(e) => {
                    return Err(LoadError::Row {
                        path: path.to_owned(),
                        line: e.line(),
                        reason: format!("invalid JSON: {e}"),
                    })
                }
            }
        } else {
            let mut rows = Vec::new();
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let v = serde_json::from_str(line).map_err(|e| LoadError::Row {
                    path: path.to_owned(),
                    line: i + 1,
                    reason: format!("invalid JSON: {e}"),
                })?;
                rows.push((i + 1, v));
            }
            rows
        };
        let mut added = 0;
        for (line, v) in rows {
            let Value::Object(map) = v else {
                return Err(LoadError::Row {
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
                return Err(LoadError::Row {
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

/// What a report computes.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// pass@k and pass^k at these k; empty: [`DEFAULT_KS`] up to the largest n.
    pub ks: Vec<u64>,
    /// Slice dimensions beyond `repo` and `gold_files`.
    pub by: Vec<String>,
    pub resamples: usize,
    pub seed: u64,
    /// Compute the pass@k curve (every k up to the smallest n) for plots.
    pub curve: bool,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            ks: Vec::new(),
            by: Vec::new(),
            resamples: DEFAULT_RESAMPLES,
            seed: DEFAULT_SEED,
            curve: true,
        }
    }
}

impl ReportOptions {
    /// The ks asked for, sorted and once each; none asked: the defaults up
    /// to `n_max` (at least k = 1).
    fn ks_up_to(&self, n_max: u64) -> Vec<u64> {
        let mut ks = if self.ks.is_empty() {
            DEFAULT_KS
                .into_iter()
                .filter(|&k| k <= n_max.max(1))
                .collect()
        } else {
            self.ks.clone()
        };
        ks.sort_unstable();
        ks.dedup();
        ks
    }
}

/// A sample left out of n.
#[derive(Debug, Clone, Serialize)]
pub struct Excluded {
    pub instance_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_id: Option<String>,
    pub outcome: String,
}

/// One instance's counts.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceRow {
    pub instance_id: String,
    pub n: u64,
    pub c: u64,
    pub c_clean: u64,
}

/// The metrics of one group of a slice.
#[derive(Debug, Clone, Serialize)]
pub struct SliceGroup {
    pub instances: usize,
    pub metrics: MetricTable,
}

/// Slice dimensions in report order (`repo`, `gold_files`, then `--by`),
/// serialised as a JSON object keyed by dimension then group.
#[derive(Debug, Clone, Default)]
pub struct Slices(pub Vec<(String, BTreeMap<String, SliceGroup>)>);

impl Slices {
    pub fn get(&self, dim: &str) -> Option<&BTreeMap<String, SliceGroup>> {
        self.0.iter().find(|(d, _)| d == dim).map(|(_, g)| g)
    }

    pub fn dims(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(d, _)| d.as_str())
    }
}

impl Serialize for Slices {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (dim, groups) in &self.0 {
            map.serialize_entry(dim, groups)?;
        }
        map.end()
    }
}

/// One k of the curve.
#[derive(Debug, Clone, Serialize)]
pub struct CurvePoint {
    pub k: u64,
    #[serde(rename = "pass@k")]
    pub pass_at_k: MetricSummary,
    #[serde(rename = "pass^k")]
    pub pass_hat_k: MetricSummary,
    #[serde(rename = "clean pass@k")]
    pub clean_pass_at_k: MetricSummary,
}

/// The report of one model in one run.
#[derive(Debug, Clone, Serialize)]
pub struct ModelReport {
    /// Instances with at least one usable sample (the table's rows).
    pub instances: usize,
    /// Usable samples (excluded ones not counted).
    pub samples: u64,
    pub n_min: u64,
    pub n_max: u64,
    /// Usable samples with an audit verdict.
    pub audited_samples: usize,
    /// Resolved samples whose audit verdict is suspect.
    pub suspect_passes: usize,
    /// Samples left out of n: environment and infrastructure failures.
    pub excluded_samples: Vec<Excluded>,
    /// Instances all of whose samples were excluded (not in the table).
    pub excluded_instances: Vec<String>,
    /// pass@k then pass^k for each k, keyed `pass@1`, `pass^1`, ...
    pub metrics: MetricTable,
    /// The same with suspect passes counted as failures.
    pub clean: MetricTable,
    /// Per slice dimension (`repo`, `gold_files`, `--by` fields), per
    /// group: pass@k for each k.
    pub slices: Slices,
    /// pass@k, pass^k and clean pass@k for every k from 1 to `n_min`.
    pub curve: Vec<CurvePoint>,
    pub per_instance: Vec<InstanceRow>,
}

/// The report of one run folder.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub run_dir: String,
    pub run_id: String,
    pub dataset: Option<String>,
    pub ks: Vec<u64>,
    pub resamples: usize,
    pub seed: u64,
    pub models: BTreeMap<String, ModelReport>,
    /// Things the reader should know (dataset missing, fields not found).
    pub notes: Vec<String>,
    /// Where the Markdown report was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub markdown: Option<String>,
}

fn metric_specs(ks: &[u64], kinds: &[MetricKind]) -> Vec<(MetricKind, u64)> {
    kinds
        .iter()
        .flat_map(|&kind| ks.iter().map(move |&k| (kind, k)))
        .collect()
}

/// The ks of the curve: every k up to `n_min` when that is small, else a
/// roughly logarithmic selection ending at `n_min`.
fn curve_ks(n_min: u64) -> Vec<u64> {
    if n_min <= 25 {
        return (1..=n_min).collect();
    }
    let mut ks: Vec<u64> = [
        1, 2, 3, 4, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500,
    ]
    .into_iter()
    .filter(|&k| k < n_min)
    .collect();
    ks.push(n_min);
    ks
}

/// Computes the report of every model of a run.
pub fn build_report(
    run: &RunSamples,
    opts: &ReportOptions,
    source: &SliceSource,
) -> Result<RunReport, crate::metrics::MetricsError> {
    let ks = opts.ks_up_to(run.n_max());
    let mut notes = Vec::new();
    if !source.has_dataset() {
        notes.push(
            "no dataset: repos are read from instance ids and there is no gold_files slice \
             (pass --dataset)"
                .to_string(),
        );
    }
    let mut dims: Vec<String> = vec!["repo".into()];
    if source.has_dataset() {
        dims.push("gold_files".into());
    }
    for b in &opts.by {
        if !dims.contains(b) {
            dims.push(b.clone());
        }
    }
    let plain_specs = metric_specs(&ks, &[MetricKind::PassAtK, MetricKind::PassHatK]);
    let mut models = BTreeMap::new();
    for (model, ms) in &run.models {
        let table = ms.table(false);
        let clean_table = ms.table(true);
        let metrics = summarize(&table, &plain_specs, opts.resamples, opts.seed)?;
        let clean = summarize(&clean_table, &plain_specs, opts.resamples, opts.seed)?;
        let mut slices = Slices::default();
        for dim in &dims {
            let mut groups: BTreeMap<String, Vec<InstanceSamples>> = BTreeMap::new();
            for s in &table {
                groups
                    .entry(source.group(&s.instance_id, dim))
                    .or_default()
                    .push(s.clone());
            }
            if !matches!(dim.as_str(), "repo" | "gold_files")
                && groups.len() == 1
                && groups.contains_key("(missing)")
            {
                notes.push(format!(
                    "{model}: no instance has a field {dim:?} in the dataset or metadata"
                ));
            }
            let mut out = BTreeMap::new();
            for (g, rows) in groups {
                let m = summarize(
                    &rows,
                    &metric_specs(&ks, &[MetricKind::PassAtK]),
                    opts.resamples,
                    opts.seed,
                )?;
                out.insert(
                    g,
                    SliceGroup {
                        instances: rows.len(),
                        metrics: m,
                    },
                );
            }
            slices.0.push((dim.clone(), out));
        }
        let n_min = table.iter().map(|s| s.n).min().unwrap_or(0);
        let n_max = table.iter().map(|s| s.n).max().unwrap_or(0);
        let mut curve = Vec::new();
        if opts.curve {
            for k in curve_ks(n_min) {
                let plain = summarize(
                    &table,
                    &[(MetricKind::PassAtK, k), (MetricKind::PassHatK, k)],
                    opts.resamples,
                    opts.seed,
                )?;
                let cl = summarize(
                    &clean_table,
                    &[(MetricKind::PassAtK, k)],
                    opts.resamples,
                    opts.seed,
                )?;
                let mut it = plain.0.into_iter();
                curve.push(CurvePoint {
                    k,
                    pass_at_k: it.next().expect("two metrics requested"),
                    pass_hat_k: it.next().expect("two metrics requested"),
                    clean_pass_at_k: cl.0.into_iter().next().expect("one metric requested"),
                });
            }
        }
        let per_instance = table
            .iter()
            .zip(&clean_table)
            .map(|(p, c)| InstanceRow {
                instance_id: p.instance_id.clone(),
                n: p.n,
                c: p.c,
                c_clean: c.c,
            })
            .collect();
        models.insert(
            model.clone(),
            ModelReport {
                instances: table.len(),
                samples: table.iter().map(|s| s.n).sum(),
                n_min,
                n_max,
                audited_samples: ms.audited(),
                suspect_passes: ms.suspect_passes(),
                excluded_samples: ms
                    .excluded_samples()
                    .map(|s| Excluded {
                        instance_id: s.instance_id.clone(),
                        sample_id: s.sample_id.clone(),
                        outcome: s.outcome.clone(),
                    })
                    .collect(),
                excluded_instances: ms.unusable_instances(),
                metrics,
                clean,
                slices,
                curve,
                per_instance,
            },
        );
    }
    Ok(RunReport {
        run_dir: run.dir.display().to_string(),
        run_id: run.run_id.clone(),
        dataset: source
            .dataset_path
            .as_ref()
            .map(|p| p.display().to_string()),
        ks,
        resamples: opts.resamples,
        seed: opts.seed,
        models,
        notes,
        markdown: None,
    })
}

fn f3(x: f64) -> String {
    format!("{x:.3}")
}

fn ci_text(m: &MetricSummary) -> String {
    match &m.ci {
        Some(ci) => format!("[{}, {}]", f3(ci.low), f3(ci.high)),
        None => String::new(),
    }
}

fn value_text(m: &MetricSummary) -> String {
    m.estimate.value.map(f3).unwrap_or_else(|| "-".into())
}

fn ids_text(ids: &[String]) -> String {
    let mut s = ids
        .iter()
        .take(MAX_IDS_SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > MAX_IDS_SHOWN {
        s.push_str(&format!(", ... ({} more)", ids.len() - MAX_IDS_SHOWN));
    }
    s
}

/// Why a metric is withheld, with the instances concerned.
fn withheld_text(m: &MetricSummary) -> String {
    let e = &m.estimate;
    let mut s = format!(
        "not reported: {}",
        e.note.as_deref().unwrap_or("cannot be estimated")
    );
    if !e.short_instances.is_empty() {
        s.push_str(&format!(" ({})", ids_text(&e.short_instances)));
    }
    s
}

/// Left-aligned columns. Widths come from the full rows; a shorter row
/// (a metric that is not reported, with its reason) runs on unpadded.
fn columns(rows: &[Vec<String>], indent: &str) -> String {
    let full = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..full)
        .map(|i| {
            rows.iter()
                .filter(|r| r.len() == full)
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let last = r.len().saturating_sub(1);
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == last {
                    c.clone()
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect();
        out.push_str(indent);
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

impl ModelReport {
    fn header(&self, model: &str) -> String {
        let n = if self.n_min == self.n_max {
            format!("{} per instance", self.n_min)
        } else {
            format!("{} to {} per instance", self.n_min, self.n_max)
        };
        let mut s = format!(
            "{model}: {} instances, {} samples ({n})",
            self.instances, self.samples
        );
        if !self.excluded_samples.is_empty() {
            let mut by: BTreeMap<&str, usize> = BTreeMap::new();
            for e in &self.excluded_samples {
                *by.entry(e.outcome.as_str()).or_default() += 1;
            }
            let counts: Vec<String> = by.iter().map(|(o, n)| format!("{o} {n}")).collect();
            s.push_str(&format!(
                "\n{} samples excluded ({}): environment and infrastructure failures say nothing about the model",
                self.excluded_samples.len(),
                counts.join(", ")
            ));
        }
        if !self.excluded_instances.is_empty() {
            s.push_str(&format!(
                "\n{} instances have no usable sample and are not counted: {}",
                self.excluded_instances.len(),
                ids_text(&self.excluded_instances)
            ));
        }
        if self.audited_samples == 0 {
            s.push_str("\nno audit verdicts: the clean columns equal the plain ones");
        } else {
            s.push_str(&format!(
                "\n{} samples audited: {} resolved samples flagged suspect (failures in the clean columns)",
                self.audited_samples, self.suspect_passes
            ));
        }
        s
    }

    /// The headline table rows: metric, value, CI, clean value, clean CI.
    fn headline_rows(&self) -> Vec<Vec<String>> {
        let mut rows = vec![vec![
            "metric".to_string(),
            "value".into(),
            "95% CI".into(),
            "clean".into(),
            "95% CI".into(),
        ]];
        for (m, c) in self.metrics.0.iter().zip(&self.clean.0) {
            if m.estimate.value.is_none() {
                rows.push(vec![m.estimate.metric.clone(), withheld_text(m)]);
                continue;
            }
            rows.push(vec![
                m.estimate.metric.clone(),
                value_text(m),
                ci_text(m),
                value_text(c),
                ci_text(c),
            ]);
        }
        rows
    }

    /// Rows of one slice: group, instances, then each pass@k with its CI.
    fn slice_rows(&self, dim: &str, ks: &[u64]) -> Vec<Vec<String>> {
        let mut head = vec![dim.to_string(), "instances".into()];
        head.extend(
            ks.iter()
                .map(|&k| format!("{} [95% CI]", metric_key(MetricKind::PassAtK, k))),
        );
        let mut rows = vec![head];
        for (g, grp) in self.slices.get(dim).into_iter().flatten() {
            let mut r = vec![g.clone(), grp.instances.to_string()];
            for m in &grp.metrics.0 {
                r.push(match m.estimate.value {
                    Some(_) => format!("{} {}", value_text(m), ci_text(m)),
                    None => "- (n < k)".into(),
                });
            }
            rows.push(r);
        }
        rows
    }
}

impl RunReport {
    /// The readable table: per model, the headline metrics then the slices.
    pub fn table(&self, with_slices: bool) -> String {
        let mut out = format!("pass@k report of run {} ({})\n", self.run_id, self.run_dir);
        out.push_str(&format!(
            "95% intervals: percentile bootstrap over instances, {} resamples\n",
            self.resamples
        ));
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        for (model, m) in &self.models {
            out.push('\n');
            out.push_str(&m.header(model));
            out.push('\n');
            out.push_str(&columns(&m.headline_rows(), "  "));
            if with_slices {
                for dim in m.slices.dims() {
                    out.push_str(&format!("  by {dim}:\n"));
                    out.push_str(&columns(&m.slice_rows(dim, &self.ks), "    "));
                }
            }
        }
        out
    }

    /// Writes `report.md` and its SVG plots into `dir`; returns the path of
    /// the Markdown file.
    pub fn write_markdown(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        let mut md = format!("# pass@k report: {}\n\n", self.run_id);
        md.push_str(&format!(
            "Run folder `{}`; dataset {}. Intervals are 95% percentile-bootstrap intervals over \
             instances ({} resamples, seed {}). pass@k is the unbiased estimator of Chen et al. \
             (2021), pass^k = C(c,k)/C(n,k) (all k tries succeed); a value is not reported for a \
             k larger than some instance's number of samples. The clean columns count resolved \
             samples that the audit flagged suspect as failures.\n\n",
            self.run_dir,
            self.dataset
                .as_deref()
                .map(|d| format!("`{d}`"))
                .unwrap_or_else(|| "not given".into()),
            self.resamples,
            self.seed
        ));
        for n in &self.notes {
            md.push_str(&format!("> Note: {n}\n\n"));
        }
        for (model, m) in &self.models {
            let stem = model_dir(model);
            md.push_str(&format!("## {model}\n\n"));
            for line in m.header(model).lines() {
                md.push_str(line);
                md.push_str("  \n");
            }
            md.push('\n');
            md.push_str(&markdown_table(&m.headline_rows()));
            md.push('\n');
            if !m.curve.is_empty() {
                let file = format!("{stem}.passk.svg");
                std::fs::write(dir.join(&file), self.curve_svg(model, m)?)?;
                md.push_str(&format!("![pass@k and pass^k of {model} by k]({file})\n\n"));
            }
            for dim in m.slices.dims() {
                md.push_str(&format!("### By {dim}\n\n"));
                md.push_str(&markdown_table(&m.slice_rows(dim, &self.ks)));
                md.push('\n');
                if dim == "repo" {
                    let file = format!("{stem}.repo.svg");
                    std::fs::write(dir.join(&file), self.repo_svg(model, m)?)?;
                    md.push_str(&format!("![pass@1 of {model} by repo]({file})\n\n"));
                }
            }
        }
        let path = dir.join("report.md");
        crate::report::write_atomic(&path, md.as_bytes())?;
        Ok(path)
    }

    fn curve_svg(&self, model: &str, m: &ModelReport) -> Result<String, plot::PlotError> {
        let points = |f: &dyn Fn(&CurvePoint) -> &MetricSummary| -> Vec<plot::BandPoint> {
            m.curve
                .iter()
                .filter_map(|p| {
                    let s = f(p);
                    let ci = s.ci.as_ref()?;
                    Some(plot::BandPoint {
                        k: p.k,
                        value: s.estimate.value?,
                        low: ci.low,
                        high: ci.high,
                    })
                })
                .collect()
        };
        let mut curves = vec![
            plot::Curve {
                label: "pass@k".into(),
                points: points(&|p| &p.pass_at_k),
                band: true,
            },
            plot::Curve {
                label: "pass^k".into(),
                points: points(&|p| &p.pass_hat_k),
                band: true,
            },
        ];
        if m.suspect_passes > 0 {
            curves.push(plot::Curve {
                label: "clean pass@k".into(),
                points: points(&|p| &p.clean_pass_at_k),
                band: false,
            });
        }
        plot::curves(
            &format!("{model} ({}): pass@k, pass^k, 95% bands", self.run_id),
            "estimate",
            &curves,
        )
    }

    fn repo_svg(&self, model: &str, m: &ModelReport) -> Result<String, plot::PlotError> {
        let key = metric_key(MetricKind::PassAtK, 1);
        let bars: Vec<plot::Bar> = m
            .slices
            .get("repo")
            .into_iter()
            .flatten()
            .filter_map(|(g, grp)| {
                let s = grp.metrics.get(&key)?;
                let ci = s.ci.as_ref()?;
                Some(plot::Bar {
                    label: format!("{g} ({})", grp.instances),
                    value: s.estimate.value?,
                    low: ci.low,
                    high: ci.high,
                })
            })
            .collect();
        plot::bars(
            &format!("{model} ({}): pass@1 by repo (instances)", self.run_id),
            "pass@1 (bar) and its 95% interval (line)",
            &bars,
        )
    }
}

fn markdown_table(rows: &[Vec<String>]) -> String {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    let cell = |s: &str| s.replace('|', "\\|");
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        let mut cells: Vec<String> = r.iter().map(|c| cell(c)).collect();
        cells.resize(width, String::new());
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
        if i == 0 {
            out.push_str(&format!("|{}\n", "---|".repeat(width)));
        }
    }
    out
}

/// One metric of a paired comparison: the difference, or why there is none.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum DiffOrNote {
    Diff(PairedDiff),
    Note { diff: Option<f64>, note: String },
}

/// Run A against run B for one pair of models, on their shared instances.
#[derive(Debug, Clone, Serialize)]
pub struct PairComparison {
    pub model_a: String,
    pub model_b: String,
    pub instances: usize,
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
    /// A minus B per metric (`pass@1`, `pass^1`, ...), keyed in order.
    pub metrics: Map<String, Value>,
    /// The same for the clean variants.
    pub clean: Map<String, Value>,
}

/// A paired comparison of two runs.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    pub ks: Vec<u64>,
    pub pairs: Vec<PairComparison>,
    pub notes: Vec<String>,
}

fn restrict(table: Vec<InstanceSamples>, keep: &BTreeSet<String>) -> Vec<InstanceSamples> {
    table
        .into_iter()
        .filter(|s| keep.contains(&s.instance_id))
        .collect()
}

/// Pairs models by name; two runs of one model each are paired whatever
/// their names.
pub fn compare(a: &RunSamples, b: &RunSamples, opts: &ReportOptions) -> Comparison {
    let ks = opts.ks_up_to(a.n_max().min(b.n_max()));
    let mut notes = Vec::new();
    let mut pairs: Vec<(&String, &String)> = a
        .models
        .keys()
        .filter(|m| b.models.contains_key(*m))
        .map(|m| (m, m))
        .collect();
    if pairs.is_empty() && a.models.len() == 1 && b.models.len() == 1 {
        pairs.push((
            a.models.keys().next().expect("one model"),
            b.models.keys().next().expect("one model"),
        ));
    }
    for m in a.models.keys().filter(|m| !pairs.iter().any(|p| p.0 == *m)) {
        notes.push(format!("model {m} is only in A: not compared"));
    }
    for m in b.models.keys().filter(|m| !pairs.iter().any(|p| p.1 == *m)) {
        notes.push(format!("model {m} is only in B: not compared"));
    }
    let specs = metric_specs(&ks, &[MetricKind::PassAtK, MetricKind::PassHatK]);
    let mut out = Vec::new();
    for (ma, mb) in pairs {
        let (sa, sb) = (&a.models[ma], &b.models[mb]);
        let ids_a: BTreeSet<String> = sa.table(false).into_iter().map(|s| s.instance_id).collect();
        let ids_b: BTreeSet<String> = sb.table(false).into_iter().map(|s| s.instance_id).collect();
        let shared: BTreeSet<String> = ids_a.intersection(&ids_b).cloned().collect();
        let diffs = |clean: bool| -> Map<String, Value> {
            let ta = restrict(sa.table(clean), &shared);
            let tb = restrict(sb.table(clean), &shared);
            let mut map = Map::new();
            for &(kind, k) in &specs {
                let d = match (instance_scores(&ta, kind, k), instance_scores(&tb, kind, k)) {
                    (Ok(x), Ok(y)) => match paired_diff(&x, &y, opts.resamples, opts.seed) {
                        Ok(d) => DiffOrNote::Diff(d),
                        Err(e) => DiffOrNote::Note {
                            diff: None,
                            note: e.to_string(),
                        },
                    },
                    (Err(e), _) => DiffOrNote::Note {
                        diff: None,
                        note: format!("A: {e}"),
                    },
                    (_, Err(e)) => DiffOrNote::Note {
                        diff: None,
                        note: format!("B: {e}"),
                    },
                };
                map.insert(
                    metric_key(kind, k),
                    serde_json::to_value(d).unwrap_or(Value::Null),
                );
            }
            map
        };
        out.push(PairComparison {
            model_a: ma.clone(),
            model_b: mb.clone(),
            instances: shared.len(),
            only_in_a: ids_a.difference(&shared).cloned().collect(),
            only_in_b: ids_b.difference(&shared).cloned().collect(),
            metrics: diffs(false),
            clean: diffs(true),
        });
    }
    Comparison {
        a: a.dir.display().to_string(),
        b: b.dir.display().to_string(),
        ks,
        pairs: out,
        notes,
    }
}

impl Comparison {
    pub fn table(&self) -> String {
        let mut out = format!(
            "paired comparison, A minus B (95% paired bootstrap over shared instances)\nA: {}\nB: {}\n",
            self.a, self.b
        );
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        for p in &self.pairs {
            out.push_str(&format!(
                "\n{} (A) vs {} (B): {} shared instances",
                p.model_a, p.model_b, p.instances
            ));
            if !p.only_in_a.is_empty() || !p.only_in_b.is_empty() {
                out.push_str(&format!(
                    "; left out: {} only in A, {} only in B",
                    p.only_in_a.len(),
                    p.only_in_b.len()
                ));
            }
            out.push('\n');
            let mut rows = vec![vec![
                "metric".to_string(),
                "A".into(),
                "B".into(),
                "A - B".into(),
                "95% CI".into(),
                "".into(),
                "clean A - B".into(),
                "95% CI".into(),
            ]];
            for (key, v) in &p.metrics {
                let c = &p.clean[key];
                let num = |v: &Value, f: &str| v[f].as_f64().map(f3).unwrap_or_default();
                if v["diff"].is_null() {
                    rows.push(vec![
                        key.clone(),
                        format!("not compared: {}", v["note"].as_str().unwrap_or("")),
                    ]);
                    continue;
                }
                let sig = if v["low"].as_f64() > Some(0.0) || v["high"].as_f64() < Some(0.0) {
                    "differs"
                } else {
                    "no clear difference"
                };
                rows.push(vec![
                    key.clone(),
                    num(v, "mean_a"),
                    num(v, "mean_b"),
                    num(v, "diff"),
                    format!("[{}, {}]", num(v, "low"), num(v, "high")),
                    sig.into(),
                    num(c, "diff"),
                    if c["diff"].is_null() {
                        String::new()
                    } else {
                        format!("[{}, {}]", num(c, "low"), num(c, "high"))
                    },
                ]);
            }
            out.push_str(&columns(&rows, "  "));
        }
        out
    }
}

fn bad(e: impl Into<anyhow::Error>) -> CliError {
    CliError::BadInput(e.into())
}

fn infra(e: impl Into<anyhow::Error>) -> CliError {
    CliError::Infra(e.into())
}

/// The dataset a report slices by: `--dataset`, else the one `run.json`
/// names when it exists. A missing default is a note, not an error.
fn slice_source(
    args: &ReportArgs,
    run: &RunSamples,
    notes: &mut Vec<String>,
) -> Result<SliceSource, CliError> {
    let path = match (&args.dataset, &run.dataset) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(p)) if p.exists() => Some(p.clone()),
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
        Some(p) => {
            let ds = Dataset::load(&p).map_err(bad)?;
            SliceSource::new(Some((&p, &ds)))
        }
        None => SliceSource::new(None),
    };
    for m in &args.metadata {
        source.add_metadata(m).map_err(bad)?;
    }
    Ok(source)
}

fn options(args: &ReportArgs) -> Result<ReportOptions, CliError> {
    if args.k.contains(&0) {
        return Err(bad(anyhow::anyhow!("--k values must be at least 1")));
    }
    if args.resamples == 0 {
        return Err(bad(anyhow::anyhow!("--resamples must be at least 1")));
    }
    Ok(ReportOptions {
        ks: args.k.clone(),
        by: args.by.clone(),
        resamples: args.resamples,
        ..ReportOptions::default()
    })
}

/// `patchgrade report`.
pub fn report(args: ReportArgs) -> Result<i32, CliError> {
    let opts = options(&args)?;
    if let [a, b] = args.compare.as_slice() {
        let ra = load_run(a).map_err(bad)?;
        let rb = load_run(b).map_err(bad)?;
        let cmp = compare(&ra, &rb, &opts);
        if args.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({ "compare": cmp }))
                    .map_err(infra)?
            );
        } else {
            print!("{}", cmp.table());
        }
        return Ok(crate::cli::exit::OK);
    }
    let mut reports = Vec::new();
    let several = args.run_dirs.len() > 1;
    for dir in &args.run_dirs {
        let run = load_run(dir).map_err(bad)?;
        let mut notes = Vec::new();
        let source = slice_source(&args, &run, &mut notes)?;
        let mut rep = build_report(&run, &opts, &source).map_err(bad)?;
        notes.append(&mut rep.notes);
        rep.notes = notes;
        let out = match &args.out {
            Some(o) if several => o.join(&rep.run_id),
            Some(o) => o.clone(),
            None => dir.join("passk"),
        };
        let md = rep
            .write_markdown(&out)
            .with_context(|| format!("cannot write the report into {}", out.display()))
            .map_err(infra)?;
        rep.markdown = Some(md.display().to_string());
        if !args.json {
            print!("{}", rep.table(true));
            println!();
        }
        eprintln!("Markdown report and plots written to {}", md.display());
        reports.push(rep);
    }
    if args.json {
        let v = if reports.len() == 1 {
            serde_json::to_value(&reports[0])
        } else {
            serde_json::to_value(&reports)
        }
        .map_err(infra)?;
        println!("{}", serde_json::to_string_pretty(&v).map_err(infra)?);
    }
    Ok(crate::cli::exit::OK)
}

/// The pass@k table printed at the end of `run` when a model has several
/// samples per instance (no slices, no plots: `report` has those).
pub fn after_run<'a>(
    run_dir: &Path,
    run_id: &str,
    records: impl IntoIterator<Item = &'a crate::outcome::EvalRecord>,
) -> Option<String> {
    let values: Vec<Value> = records
        .into_iter()
        .filter_map(|r| serde_json::to_value(r).ok())
        .collect();
    let run = RunSamples::from_values(run_dir, run_id, &values).ok()?;
    if !run.models.values().any(ModelSamples::has_samples) {
        return None;
    }
    let opts = ReportOptions {
        curve: false,
        ..ReportOptions::default()
    };
    let rep = build_report(&run, &opts, &SliceSource::default()).ok()?;
    let mut text = String::new();
    for (model, m) in &rep.models {
        text.push_str(&m.header(model));
        text.push('\n');
        text.push_str(&columns(&m.headline_rows(), "  "));
    }
    text.push_str(&format!(
        "slices, plots and JSON: patchgrade report {}\n",
        run_dir.display()
    ));
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(model: &str, id: &str, sample: &str, outcome: &str, suspect: bool) -> Value {
        let mut v = json!({
            "instance_id": id, "model_name_or_path": model, "sample_id": sample,
            "outcome": outcome, "cache_key": "x", "backend": "local",
        });
        if suspect {
            v["audit"] = json!({"verdict": "suspect"});
        }
        v
    }

    fn run() -> RunSamples {
        let vals = vec![
            rec("m", "o__r-1", "0", "resolved", false),
            rec("m", "o__r-1", "1", "resolved", true),
            rec("m", "o__r-1", "2", "unresolved", false),
            rec("m", "o__r-1", "10", "infra_error", false),
            rec("m", "o__r-2", "0", "empty_patch", false),
            rec("m", "o__r-2", "1", "resolved", false),
            rec("m", "o__s-3", "0", "environment_build_failed", false),
        ];
        RunSamples::from_values(Path::new("/x"), "r", &vals).unwrap()
    }

    #[test]
    fn tables_exclude_environment_failures_and_count_clean_passes() {
        let r = run();
        let m = &r.models["m"];
        assert!(m.has_samples());
        assert_eq!(
            m.table(false),
            vec![
                InstanceSamples::new("o__r-1", 3, 2),
                InstanceSamples::new("o__r-2", 2, 1)
            ]
        );
        assert_eq!(m.table(true)[0], InstanceSamples::new("o__r-1", 3, 1));
        assert_eq!(m.unusable_instances(), vec!["o__s-3".to_string()]);
        assert_eq!(m.excluded_samples().count(), 2);
        assert_eq!(m.suspect_passes(), 1);
        // Sample ids sort numerically.
        let ids: Vec<_> = m.by_instance["o__r-1"]
            .iter()
            .map(|s| s.sample_id.clone().unwrap())
            .collect();
        assert_eq!(ids, ["0", "1", "2", "10"]);
    }

    #[test]
    fn report_numbers_and_withheld_k() {
        let r = run();
        let opts = ReportOptions {
            ks: vec![1, 2, 3],
            resamples: 200,
            ..ReportOptions::default()
        };
        let rep = build_report(&r, &opts, &SliceSource::default()).unwrap();
        let m = &rep.models["m"];
        // pass@1 = (2/3 + 1/2) / 2; clean (1/3 + 1/2) / 2.
        let v = m.metrics.get("pass@1").unwrap().estimate.value.unwrap();
        assert!((v - (2.0 / 3.0 + 0.5) / 2.0).abs() < 1e-12);
        let c = m.clean.get("pass@1").unwrap().estimate.value.unwrap();
        assert!((c - (1.0 / 3.0 + 0.5) / 2.0).abs() < 1e-12);
        // pass^2: (C(2,2)/C(3,2) + 0) / 2 = 1/6.
        let h = m.metrics.get("pass^2").unwrap().estimate.value.unwrap();
        assert!((h - 1.0 / 6.0).abs() < 1e-12);
        // o__r-2 has n = 2 < 3.
        let p3 = m.metrics.get("pass@3").unwrap();
        assert_eq!(p3.estimate.value, None);
        assert_eq!(p3.estimate.short_instances, vec!["o__r-2".to_string()]);
        let table = rep.table(true);
        assert!(table.contains("pass@3  not reported"), "{table}");
        assert!(table.contains("o__r-2"), "{table}");
        assert!(table.contains("2 samples excluded"), "{table}");
        // Repo slices from instance ids without a dataset.
        let repos: Vec<_> = m.slices.get("repo").unwrap().keys().cloned().collect();
        assert_eq!(repos, ["o/r"]);
        assert_eq!(m.curve.len(), 2, "k = 1..n_min");
    }

    #[test]
    fn default_ks_stop_at_the_largest_n() {
        let rep = build_report(&run(), &ReportOptions::default(), &SliceSource::default()).unwrap();
        assert_eq!(rep.ks, vec![1, 2]);
    }

    #[test]
    fn compare_pairs_single_models_and_uses_shared_instances() {
        let a = run();
        let vals = vec![
            rec("other", "o__r-1", "0", "unresolved", false),
            rec("other", "o__r-1", "1", "unresolved", false),
            rec("other", "o__r-2", "0", "resolved", false),
            rec("other", "o__r-2", "1", "resolved", false),
            rec("other", "o__r-9", "0", "resolved", false),
        ];
        let b = RunSamples::from_values(Path::new("/y"), "s", &vals).unwrap();
        let opts = ReportOptions {
            ks: vec![1],
            resamples: 200,
            ..ReportOptions::default()
        };
        let c = compare(&a, &b, &opts);
        assert_eq!(c.pairs.len(), 1);
        let p = &c.pairs[0];
        assert_eq!(
            (p.instances, p.only_in_b.clone()),
            (2, vec!["o__r-9".to_string()])
        );
        // A: (2/3, 1/2); B: (0, 1) -> diff = (2/3 - 1/2) / 2.
        let d = p.metrics["pass@1"]["diff"].as_f64().unwrap();
        assert!((d - (2.0 / 3.0 - 0.5) / 2.0).abs() < 1e-12, "{d}");
        assert!(c.table().contains("pass@1"));
    }

    #[test]
    fn metadata_join_and_fields() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("meta.jsonl");
        std::fs::write(
            &p,
            "{\"id\": \"o__r-1\", \"difficulty\": \"easy\"}\n{\"instance_id\": \"o__r-2\", \"difficulty\": 3}\n",
        )
        .unwrap();
        let mut s = SliceSource::default();
        assert_eq!(s.add_metadata(&p).unwrap(), 2);
        assert_eq!(s.group("o__r-1", "difficulty"), "easy");
        assert_eq!(s.group("o__r-2", "difficulty"), "3");
        assert_eq!(s.group("o__r-3", "difficulty"), "(missing)");
        std::fs::write(&p, "{\"difficulty\": 1}\n").unwrap();
        let e = s.add_metadata(&p).unwrap_err().to_string();
        assert!(e.contains("meta.jsonl:1"), "{e}");
    }
}
