//! Building the report: pass@k and pass^k with intervals for each k, their
//! clean variants, slices and the curve, per model of a run.

use std::collections::BTreeMap;

use serde::Serialize;

use super::samples::RunSamples;
use super::slices::{SliceGroup, SliceSource, Slices};
use crate::metrics::aggregate::{summarize, InstanceSamples, MetricSummary, MetricTable};
use crate::metrics::bootstrap::{DEFAULT_RESAMPLES, DEFAULT_SEED};
use crate::metrics::estimators::MetricKind;
use crate::outcome::Outcome;

/// The k values reported when none are asked for, kept up to the largest n.
const DEFAULT_KS: [u64; 7] = [1, 2, 5, 10, 20, 50, 100];

/// What a report computes.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// pass@k and pass^k at these k; empty: 1, 2, 5, 10, 20, 50, 100 up to the
    /// largest n.
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
    pub(super) fn ks_up_to(&self, n_max: u64) -> Vec<u64> {
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
    pub outcome: Outcome,
}

/// One instance's counts.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceRow {
    pub instance_id: String,
    pub n: u64,
    pub c: u64,
    pub c_clean: u64,
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

pub(super) fn metric_specs(ks: &[u64], kinds: &[MetricKind]) -> Vec<(MetricKind, u64)> {
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
            slices.push(dim.clone(), out);
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
                        outcome: s.outcome,
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
