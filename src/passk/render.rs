//! Rendering reports: the readable table, the Markdown report with its SVG
//! plots, and the short table `run` prints when a model has samples.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::build::{build_report, CurvePoint, ModelReport, ReportOptions, RunReport};
use super::plot;
use super::samples::{ModelSamples, RunSamples};
use super::slices::SliceSource;
use crate::dataset::model_dir;
use crate::metrics::aggregate::MetricSummary;
use crate::metrics::estimators::{metric_key, MetricKind};
use crate::record::EvalRecord;
use crate::rundir::atomic::write_atomic;
use crate::table::columns;

/// Ids listed at most in table notes (the JSON lists all).
const MAX_IDS_SHOWN: usize = 8;

pub(super) fn f3(x: f64) -> String {
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
                *by.entry(e.outcome.name()).or_default() += 1;
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
                for dim in m.slices.keys() {
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
            for dim in m.slices.keys() {
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
        write_atomic(&path, md.as_bytes())?;
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

/// The pass@k table printed at the end of `run` when a model has several
/// samples per instance (no slices, no plots: `report` has those).
pub fn after_run<'a>(
    run_dir: &Path,
    run_id: &str,
    records: impl IntoIterator<Item = &'a EvalRecord>,
) -> Option<String> {
    let run = RunSamples::from_records(run_dir, run_id, records);
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
