//! Per-instance sample tables aggregated into report-ready pass@k / pass^k.

use std::collections::BTreeSet;

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use super::bootstrap::{bootstrap_ci, InstanceScore, Interval};
use super::estimators::{metric_key, MetricKind};
use super::MetricsError;

/// How many samples were drawn for one instance and how many passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceSamples {
    /// Instance (task) identifier.
    pub instance_id: String,
    /// Number of samples (candidate patches) evaluated.
    pub n: u64,
    /// Number of those that passed; must be `<= n`.
    pub c: u64,
}

impl InstanceSamples {
    /// Builds a row from counts (not validated here; `c > n` is reported by
    /// the aggregation functions instead of panicking).
    pub fn new(instance_id: impl Into<String>, n: u64, c: u64) -> Self {
        Self {
            instance_id: instance_id.into(),
            n,
            c,
        }
    }

    /// Builds a row from the pass/fail outcome of each sample.
    pub fn from_outcomes(instance_id: impl Into<String>, outcomes: &[bool]) -> Self {
        let c = outcomes.iter().filter(|&&ok| ok).count();
        Self::new(instance_id, outcomes.len() as u64, c as u64)
    }

    /// This instance's estimate of `kind` at `k` (`None` if undefined, see
    /// [`pass_at_k`](super::estimators::pass_at_k)).
    #[must_use]
    pub fn estimate(&self, kind: MetricKind, k: u64) -> Option<f64> {
        kind.estimate(self.n, self.c, k)
    }
}

/// Mean of a per-instance estimator over instances, or why it is withheld.
///
/// Serialised as-is into reports; `value` is `null` whenever any instance
/// cannot support the estimate, and `note` says why (human-eval likewise
/// drops pass@k unless every task has `n >= k`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PassAtK {
    /// Report key from [`metric_key`], e.g. `"pass@5"` or `"pass^5"`.
    pub metric: String,
    /// The k of the metric.
    pub k: u64,
    /// Mean over instances; `None` unless every instance is valid and has
    /// `n >= k` (and there is at least one instance).
    pub value: Option<f64>,
    /// Number of rows in the table.
    pub instances: usize,
    /// Instances with fewer than k samples (`n < k`), in input order.
    pub short_instances: Vec<String>,
    /// Instances with `c > n`, then ids that occur more than once.
    pub invalid_instances: Vec<String>,
    /// Why `value` is `None`; absent when it is reported.
    pub note: Option<String>,
}

/// Mean pass@k over instances; see [`mean_metric`].
#[must_use]
pub fn mean_pass_at_k(samples: &[InstanceSamples], k: u64) -> PassAtK {
    mean_metric(samples, MetricKind::PassAtK, k)
}

/// Mean pass^k over instances; see [`mean_metric`].
#[must_use]
pub fn mean_pass_hat_k(samples: &[InstanceSamples], k: u64) -> PassAtK {
    mean_metric(samples, MetricKind::PassHatK, k)
}

/// Mean of the per-instance estimator `kind` at `k` over all instances.
///
/// The value is withheld (`None`, with a `note`) rather than computed over a
/// subset when any instance has `n < k`, `c > n`, or a repeated id, when
/// `k == 0`, or when the table is empty: silently dropping instances would
/// bias the mean towards the instances that were sampled more.
#[must_use]
pub fn mean_metric(samples: &[InstanceSamples], kind: MetricKind, k: u64) -> PassAtK {
    evaluate(samples, kind, k).0
}

/// Per-instance estimates, e.g. to feed [`bootstrap_ci`] or
/// [`paired_diff`](super::bootstrap::paired_diff) for two runs.
///
/// # Errors
/// [`MetricsError::NotEstimable`] (with the same explanation as
/// [`PassAtK::note`]) whenever [`mean_metric`] would withhold the value.
pub fn instance_scores(
    samples: &[InstanceSamples],
    kind: MetricKind,
    k: u64,
) -> Result<Vec<InstanceScore>, MetricsError> {
    match evaluate(samples, kind, k) {
        (_, Some(scores)) => Ok(samples
            .iter()
            .zip(scores)
            .map(|(s, score)| InstanceScore::new(s.instance_id.clone(), score))
            .collect()),
        (summary, None) => Err(MetricsError::NotEstimable {
            metric: summary.metric,
            reason: summary.note.unwrap_or_default(),
        }),
    }
}

/// Returns the summary and, when the value is reported, the per-instance
/// scores in input order.
fn evaluate(samples: &[InstanceSamples], kind: MetricKind, k: u64) -> (PassAtK, Option<Vec<f64>>) {
    let metric = metric_key(kind, k);
    let mut seen = BTreeSet::new();
    let mut repeated = BTreeSet::new();
    let mut short = Vec::new();
    let mut invalid = Vec::new();
    let mut scores = Vec::with_capacity(samples.len());
    for s in samples {
        if !seen.insert(s.instance_id.as_str()) {
            repeated.insert(s.instance_id.clone());
        } else if s.c > s.n {
            invalid.push(s.instance_id.clone());
        } else if s.n < k {
            short.push(s.instance_id.clone());
        } else if let Some(v) = s.estimate(kind, k) {
            scores.push(v);
        }
    }
    let mut notes = Vec::new();
    if k == 0 {
        notes.push(format!("{metric} is undefined: k must be at least 1"));
    }
    if samples.is_empty() {
        notes.push("no instances".to_string());
    }
    if !short.is_empty() {
        notes.push(format!(
            "{} of {} instances have fewer than k={k} samples (n < k)",
            short.len(),
            samples.len()
        ));
    }
    if !invalid.is_empty() {
        notes.push(format!(
            "{} instances report more passes than samples (c > n)",
            invalid.len()
        ));
    }
    if !repeated.is_empty() {
        notes.push(format!("{} instance ids are repeated", repeated.len()));
    }
    invalid.extend(repeated);
    let ok = notes.is_empty() && scores.len() == samples.len();
    let value = ok.then(|| scores.iter().sum::<f64>() / scores.len() as f64);
    let summary = PassAtK {
        metric,
        k,
        value,
        instances: samples.len(),
        short_instances: short,
        invalid_instances: invalid,
        note: (!ok).then(|| notes.join("; ")),
    };
    (summary, ok.then_some(scores))
}

/// One metric of a report: the mean and, when reported, its bootstrap CI.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricSummary {
    /// Mean over instances (flattened into the JSON object).
    #[serde(flatten)]
    pub estimate: PassAtK,
    /// 95% bootstrap interval over instances; `None` when `value` is `None`.
    pub ci: Option<Interval>,
}

/// Ordered set of metric summaries, serialised as a JSON object keyed by
/// [`metric_key`] (`{"pass@1": {...}, "pass^4": {...}}`) in request order.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricTable(pub Vec<MetricSummary>);

impl MetricTable {
    /// Looks a summary up by its report key, e.g. `"pass@1"`.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&MetricSummary> {
        self.0.iter().find(|m| m.estimate.metric == key)
    }
}

impl Serialize for MetricTable {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for m in &self.0 {
            map.serialize_entry(&m.estimate.metric, m)?;
        }
        map.end()
    }
}

/// Computes each requested `(kind, k)` with a bootstrap CI over instances.
///
/// Every metric is bootstrapped with the same `seed`, so all intervals in a
/// report use the same resampled instance sets. Repeated requests are kept
/// once. A metric that cannot be estimated is still listed, with
/// `value: null`, its `note`, and `ci: null`.
///
/// # Errors
/// Only [`MetricsError::ZeroResamples`] when a CI is needed and
/// `resamples == 0`.
pub fn summarize(
    samples: &[InstanceSamples],
    metrics: &[(MetricKind, u64)],
    resamples: usize,
    seed: u64,
) -> Result<MetricTable, MetricsError> {
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for &(kind, k) in metrics {
        if !done.insert((kind, k)) {
            continue;
        }
        let (estimate, scores) = evaluate(samples, kind, k);
        let ci = match scores {
            Some(values) => Some(bootstrap_ci(&values, resamples, seed)?),
            None => None,
        };
        out.push(MetricSummary { estimate, ci });
    }
    Ok(MetricTable(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::bootstrap::{paired_diff, DEFAULT_RESAMPLES};

    fn table() -> Vec<InstanceSamples> {
        vec![
            InstanceSamples::new("a", 10, 3),
            InstanceSamples::new("b", 10, 0),
            InstanceSamples::new("c", 5, 5),
        ]
    }

    #[test]
    fn mean_is_the_average_of_per_instance_estimates() {
        // pass@1: (0.3 + 0 + 1) / 3; pass@5: (11/12 + 0 + 1) / 3.
        let p1 = mean_pass_at_k(&table(), 1);
        assert_eq!(p1.metric, "pass@1");
        assert!((p1.value.unwrap() - 1.3 / 3.0).abs() < 1e-12, "{p1:?}");
        assert_eq!(p1.instances, 3);
        assert_eq!(p1.note, None);
        let p5 = mean_pass_at_k(&table(), 5);
        assert!((p5.value.unwrap() - (11.0 / 12.0 + 1.0) / 3.0).abs() < 1e-12);
        // pass^2: (C(3,2)/C(10,2) + 0 + 1) / 3 = (3/45 + 1) / 3.
        let h2 = mean_pass_hat_k(&table(), 2);
        assert_eq!(h2.metric, "pass^2");
        assert!((h2.value.unwrap() - (3.0 / 45.0 + 1.0) / 3.0).abs() < 1e-12);
    }

    #[test]
    fn short_instances_withhold_the_value_and_are_named() {
        // "c" has n = 5 < 6.
        let p = mean_pass_at_k(&table(), 6);
        assert_eq!(p.value, None);
        assert_eq!(p.short_instances, vec!["c".to_string()]);
        let note = p.note.unwrap();
        assert!(note.contains("1 of 3") && note.contains("n < k"), "{note}");
        assert!(matches!(
            instance_scores(&table(), MetricKind::PassAtK, 6),
            Err(MetricsError::NotEstimable { .. })
        ));
    }

    #[test]
    fn invalid_tables_withhold_the_value() {
        let empty = mean_pass_at_k(&[], 1);
        assert_eq!((empty.value, empty.instances), (None, 0));
        assert_eq!(empty.note.as_deref(), Some("no instances"));

        let k0 = mean_pass_at_k(&table(), 0);
        assert_eq!(k0.value, None);
        assert!(k0.note.unwrap().contains("k must be at least 1"));

        let mut bad = table();
        bad.push(InstanceSamples::new("d", 3, 4));
        bad.push(InstanceSamples::new("a", 10, 3));
        let p = mean_pass_at_k(&bad, 1);
        assert_eq!(p.value, None);
        assert_eq!(p.invalid_instances, vec!["d".to_string(), "a".to_string()]);
        let note = p.note.unwrap();
        assert!(
            note.contains("c > n") && note.contains("repeated"),
            "{note}"
        );
    }

    #[test]
    fn from_outcomes_counts() {
        let s = InstanceSamples::from_outcomes("x", &[true, false, true, false]);
        assert_eq!((s.n, s.c), (4, 2));
        assert_eq!(s.estimate(MetricKind::PassAtK, 1), Some(0.5));
    }

    #[test]
    fn summarize_serialises_with_metric_keys() {
        let specs = [
            (MetricKind::PassAtK, 1),
            (MetricKind::PassAtK, 8),
            (MetricKind::PassHatK, 2),
            (MetricKind::PassAtK, 1),
        ];
        let t = summarize(&table(), &specs, 200, 1).unwrap();
        assert_eq!(t.0.len(), 3, "duplicate request kept once");
        let json = serde_json::to_value(&t).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["pass@1", "pass@8", "pass^2"]);
        let p1 = &json["pass@1"];
        assert!((p1["value"].as_f64().unwrap() - 1.3 / 3.0).abs() < 1e-12);
        assert_eq!(p1["instances"], 3);
        assert!(p1["ci"]["low"].as_f64().unwrap() <= p1["value"].as_f64().unwrap());
        assert_eq!(p1["ci"]["resamples"], 200);
        // n = 5 < 8 for "c": reported as null with the reason, no CI.
        let p8 = &json["pass@8"];
        assert!(p8["value"].is_null() && p8["ci"].is_null());
        assert_eq!(p8["short_instances"], serde_json::json!(["c"]));
        assert!(p8["note"].as_str().unwrap().contains("n < k"));
        assert!(t.get("pass^2").unwrap().ci.is_some());
        assert_eq!(
            summarize(&table(), &specs, 0, 1),
            Err(MetricsError::ZeroResamples)
        );
    }

    #[test]
    fn instance_scores_feed_a_paired_comparison() {
        let run_a = table();
        let run_b = vec![
            InstanceSamples::new("c", 5, 5),
            InstanceSamples::new("a", 10, 3),
            InstanceSamples::new("b", 10, 1),
        ];
        let a = instance_scores(&run_a, MetricKind::PassAtK, 1).unwrap();
        let b = instance_scores(&run_b, MetricKind::PassAtK, 1).unwrap();
        let d = paired_diff(&b, &a, DEFAULT_RESAMPLES, 0).unwrap();
        // Only "b" changes, by 0.1, so diff = 0.1 / 3.
        assert!((d.diff - 0.1 / 3.0).abs() < 1e-12, "{d:?}");
        assert!(d.low >= 0.0 && d.high <= 0.1 + 1e-12, "{d:?}");
    }
}
