//! Scoring a selection: pass@1 of the chosen samples, with the outcomes the
//! run recorded, next to the mean pass@1 and the oracle pass@n; and the
//! readable table.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::Choice;
use crate::metrics::aggregate::{instance_scores, mean_pass_at_k, InstanceSamples};
use crate::metrics::bootstrap::{
    bootstrap_ci, paired_diff, InstanceScore, Interval, PairedDiff, DEFAULT_RESAMPLES, DEFAULT_SEED,
};
use crate::metrics::estimators::MetricKind;
use crate::outcome::Outcome;
use crate::passk::samples::{ModelSamples, SampleRecord};
use crate::table::columns;

/// A mean with its interval.
#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    pub value: f64,
    pub ci: Interval,
}

/// The selection of one model.
#[derive(Debug, Clone, Serialize)]
pub struct ModelSelection {
    /// Instances scored: in the run with a usable sample, and predicted.
    pub instances: usize,
    /// pass@1 of the chosen samples.
    pub selection: Option<Estimate>,
    /// Mean pass@1 over all samples (what picking at random gives).
    #[serde(rename = "mean_pass@1")]
    pub mean_pass_at_1: Option<Estimate>,
    /// Any sample resolved (what a perfect selector gives).
    #[serde(rename = "oracle_pass@n")]
    pub oracle: Option<Estimate>,
    /// Selection minus mean pass@1, paired over instances.
    pub selection_minus_mean: Option<PairedDiff>,
    /// The same three with suspect passes counted as failures.
    pub clean: BTreeMap<String, Option<f64>>,
    pub choices: Vec<Choice>,
    pub notes: Vec<String>,
}

/// The whole selection report (`select.json`).
#[derive(Debug, Clone, Serialize)]
pub struct SelectionReport {
    pub run_dir: String,
    pub select_run_dir: String,
    pub output: String,
    pub models: BTreeMap<String, ModelSelection>,
}

fn estimate(values: &[f64]) -> Option<Estimate> {
    let ci = bootstrap_ci(values, DEFAULT_RESAMPLES, DEFAULT_SEED).ok()?;
    Some(Estimate {
        value: ci.point,
        ci,
    })
}

/// Scores a model's choices against the outcomes recorded in the run.
pub(super) fn score_model(
    run: Option<&ModelSamples>,
    choices: Vec<Choice>,
    mut notes: Vec<String>,
) -> ModelSelection {
    let table = run.map(|m| m.table(false)).unwrap_or_default();
    let clean_table = run.map(|m| m.table(true)).unwrap_or_default();
    let by_id: BTreeMap<&str, &Choice> = choices
        .iter()
        .map(|c| (c.instance_id.as_str(), c))
        .collect();
    let scored: BTreeSet<&str> = table
        .iter()
        .map(|s| s.instance_id.as_str())
        .filter(|id| by_id.contains_key(id))
        .collect();
    let missing: Vec<&str> = by_id
        .keys()
        .filter(|id| !scored.contains(*id))
        .copied()
        .collect();
    if !missing.is_empty() {
        notes.push(format!(
            "{} instances have no usable sample in the run and are not scored: {}",
            missing.len(),
            missing.join(", ")
        ));
    }
    let keep = |t: &[InstanceSamples]| -> Vec<InstanceSamples> {
        t.iter()
            .filter(|s| scored.contains(s.instance_id.as_str()))
            .cloned()
            .collect()
    };
    let (table, clean_table) = (keep(&table), keep(&clean_table));
    let mut sel = Vec::new();
    let mut sel_clean = Vec::new();
    for s in &table {
        let c = by_id[s.instance_id.as_str()];
        let rec = c.chosen().and_then(|c| c.recorded.as_ref());
        if rec.is_none_or(SampleRecord::excluded) {
            notes.push(format!(
                "{}: the chosen sample has no usable outcome in the run; counted as a failure",
                s.instance_id
            ));
        }
        sel.push(InstanceScore::new(
            s.instance_id.clone(),
            f64::from(u8::from(rec.is_some_and(SampleRecord::resolved))),
        ));
        sel_clean.push(f64::from(u8::from(
            rec.is_some_and(SampleRecord::clean_resolved),
        )));
    }
    let sel_values: Vec<f64> = sel.iter().map(|s| s.score).collect();
    let mean_scores = instance_scores(&table, MetricKind::PassAtK, 1).ok();
    let mean_values: Option<Vec<f64>> = mean_scores
        .as_ref()
        .map(|v| v.iter().map(|s| s.score).collect());
    let oracle: Vec<f64> = table.iter().map(|s| f64::from(u8::from(s.c > 0))).collect();
    let clean_oracle: Vec<f64> = clean_table
        .iter()
        .map(|s| f64::from(u8::from(s.c > 0)))
        .collect();
    let avg = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let mut clean = BTreeMap::new();
    clean.insert("selection".to_string(), avg(&sel_clean));
    clean.insert(
        "mean_pass@1".to_string(),
        mean_pass_at_k(&clean_table, 1).value,
    );
    clean.insert("oracle_pass@n".to_string(), avg(&clean_oracle));
    ModelSelection {
        instances: table.len(),
        selection: estimate(&sel_values),
        mean_pass_at_1: mean_values.as_deref().and_then(estimate),
        oracle: estimate(&oracle),
        selection_minus_mean: mean_scores
            .and_then(|m| paired_diff(&sel, &m, DEFAULT_RESAMPLES, DEFAULT_SEED).ok()),
        clean,
        choices,
        notes,
    }
}

impl SelectionReport {
    pub fn table(&self) -> String {
        let f = |e: &Option<Estimate>| match e {
            Some(e) => format!("{:.3} [{:.3}, {:.3}]", e.value, e.ci.low, e.ci.high),
            None => "-".into(),
        };
        let mut out = format!(
            "best-of-n selection from {} (selection test runs in {})\n",
            self.run_dir, self.select_run_dir
        );
        for (model, m) in &self.models {
            out.push_str(&format!("\n{model}: {} instances scored\n", m.instances));
            out.push_str(&format!("  pass@1 of the selection  {}\n", f(&m.selection)));
            out.push_str(&format!(
                "  mean pass@1              {}\n",
                f(&m.mean_pass_at_1)
            ));
            out.push_str(&format!("  pass@n (oracle)          {}\n", f(&m.oracle)));
            if let Some(d) = &m.selection_minus_mean {
                out.push_str(&format!(
                    "  selection - mean pass@1  {:+.3} [{:+.3}, {:+.3}]\n",
                    d.diff, d.low, d.high
                ));
            }
            let c = |k: &str| {
                m.clean
                    .get(k)
                    .copied()
                    .flatten()
                    .map(|v| format!("{v:.3}"))
                    .unwrap_or_else(|| "-".into())
            };
            out.push_str(&format!(
                "  clean (suspect passes fail): selection {}, mean pass@1 {}, oracle {}\n",
                c("selection"),
                c("mean_pass@1"),
                c("oracle_pass@n")
            ));
            for n in &m.notes {
                out.push_str(&format!("  note: {n}\n"));
            }
            let mut rows = vec![vec![
                "instance".to_string(),
                "chosen".into(),
                "of".into(),
                "applies".into(),
                "existing tests".into(),
                "agreement".into(),
                "suspect".into(),
                "recorded outcome".into(),
            ]];
            for ch in &m.choices {
                let Some(c) = ch.chosen() else {
                    rows.push(vec![ch.instance_id.clone(), "-".into()]);
                    continue;
                };
                rows.push(vec![
                    ch.instance_id.clone(),
                    c.sample_id.clone().unwrap_or_else(|| "-".into()),
                    ch.candidates.len().to_string(),
                    c.applies.name().into(),
                    match (c.still_passing, ch.base_passing) {
                        (Some(s), Some(b)) => format!("{s}/{b}"),
                        _ => "-".into(),
                    },
                    c.agreement.to_string(),
                    if c.suspect { "yes" } else { "no" }.into(),
                    c.outcome.map_or("-", Outcome::name).into(),
                ]);
            }
            out.push_str(&columns(&rows, "  "));
        }
        out
    }
}
