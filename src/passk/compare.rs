//! Paired comparison of two runs: A minus B per metric, on the instances
//! both runs have, with paired bootstrap intervals.

use std::collections::BTreeSet;

use serde::Serialize;

use super::build::{metric_specs, ReportOptions};
use super::keyed::Keyed;
use super::render::f3;
use super::samples::RunSamples;
use crate::metrics::aggregate::{instance_scores, InstanceSamples};
use crate::metrics::bootstrap::{paired_diff, PairedDiff};
use crate::metrics::estimators::{metric_key, MetricKind};
use crate::table::columns;

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
    pub metrics: Keyed<DiffOrNote>,
    /// The same for the clean variants.
    pub clean: Keyed<DiffOrNote>,
}

// (Also `perf::Comparison`, of timings: the two never meet.)
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
        let diffs = |clean: bool| -> Keyed<DiffOrNote> {
            let ta = restrict(sa.table(clean), &shared);
            let tb = restrict(sb.table(clean), &shared);
            let mut map = Keyed::default();
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
                map.push(metric_key(kind, k), d);
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
            for (key, d) in &p.metrics.0 {
                let v = match d {
                    DiffOrNote::Diff(v) => v,
                    DiffOrNote::Note { note, .. } => {
                        rows.push(vec![key.clone(), format!("not compared: {note}")]);
                        continue;
                    }
                };
                let sig = if v.low > 0.0 || v.high < 0.0 {
                    "differs"
                } else {
                    "no clear difference"
                };
                let (clean_diff, clean_ci) = match p.clean.get(key) {
                    Some(DiffOrNote::Diff(c)) => {
                        (f3(c.diff), format!("[{}, {}]", f3(c.low), f3(c.high)))
                    }
                    _ => (String::new(), String::new()),
                };
                rows.push(vec![
                    key.clone(),
                    f3(v.mean_a),
                    f3(v.mean_b),
                    f3(v.diff),
                    format!("[{}, {}]", f3(v.low), f3(v.high)),
                    sig.into(),
                    clean_diff,
                    clean_ci,
                ]);
            }
            out.push_str(&columns(&rows, "  "));
        }
        out
    }
}
