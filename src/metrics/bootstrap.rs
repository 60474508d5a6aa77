//! Percentile bootstrap over instances, and the paired version for A/B runs.
//!
//! Instances (tasks) are the unit of resampling: the question a report answers
//! is "how much would this mean move on another draw of tasks", and samples
//! of one task are not independent of each other.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::rng::SplitMix64;
use super::MetricsError;

/// Default number of bootstrap resamples.
pub const DEFAULT_RESAMPLES: usize = 2000;

/// Default seed, so two runs of the evaluator print identical intervals.
pub const DEFAULT_SEED: u64 = 0x5EED_CAFE_F00D_2026;

/// Two-sided confidence level of every interval produced here.
pub const CONFIDENCE_LEVEL: f64 = 0.95;

/// A point estimate with its 95% percentile-bootstrap interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interval {
    /// Mean of the input values.
    pub point: f64,
    /// 2.5th percentile of the resampled means.
    pub low: f64,
    /// 97.5th percentile of the resampled means.
    pub high: f64,
    /// Confidence level, always [`CONFIDENCE_LEVEL`]; recorded so the JSON is
    /// self-describing.
    pub level: f64,
    /// Number of bootstrap resamples used.
    pub resamples: usize,
    /// Seed used; with `resamples` and the input order it reproduces the
    /// interval exactly.
    pub seed: u64,
}

/// One instance's score in one run (e.g. its pass@1, or 0/1 resolved).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceScore {
    /// Instance (task) identifier, e.g. `"django__django-13710"`.
    pub instance_id: String,
    /// Score of this instance; must be finite.
    pub score: f64,
}

impl InstanceScore {
    /// Convenience constructor.
    pub fn new(instance_id: impl Into<String>, score: f64) -> Self {
        Self {
            instance_id: instance_id.into(),
            score,
        }
    }
}

/// Run A minus run B on the same instances, with a paired bootstrap interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairedDiff {
    /// `mean(a_i - b_i)` over the shared instances (positive: A is better
    /// when higher scores are better).
    pub diff: f64,
    /// 2.5th percentile of the resampled mean differences.
    pub low: f64,
    /// 97.5th percentile of the resampled mean differences.
    pub high: f64,
    /// Number of paired instances.
    pub instances: usize,
    /// Mean score of run A.
    pub mean_a: f64,
    /// Mean score of run B.
    pub mean_b: f64,
    /// Confidence level, always [`CONFIDENCE_LEVEL`].
    pub level: f64,
    /// Number of bootstrap resamples used.
    pub resamples: usize,
    /// Seed used.
    pub seed: u64,
}

impl PairedDiff {
    /// Whether the interval excludes zero, i.e. the runs differ at the 95%
    /// level; an A/B claim should not be made otherwise.
    #[must_use]
    pub fn excludes_zero(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// 95% percentile-bootstrap interval for the mean of `values`.
///
/// Draws `b` resamples of `values.len()` values with replacement, using a
/// [`SplitMix64`] seeded with `seed`; the result is a pure function of
/// `(values in order, b, seed)`. Percentiles use linear interpolation between
/// order statistics (numpy's default). With a single value, or all values
/// equal, the interval has zero width: the bootstrap cannot see variance the
/// sample does not show.
///
/// # Errors
/// [`MetricsError::EmptySample`] for no values, [`MetricsError::ZeroResamples`]
/// for `b == 0`, [`MetricsError::NonFiniteValue`] for NaN or infinite values.
pub fn bootstrap_ci(values: &[f64], b: usize, seed: u64) -> Result<Interval, MetricsError> {
    if values.is_empty() {
        return Err(MetricsError::EmptySample);
    }
    if b == 0 {
        return Err(MetricsError::ZeroResamples);
    }
    if let Some(index) = values.iter().position(|v| !v.is_finite()) {
        return Err(MetricsError::NonFiniteValue { index });
    }
    let (low, high) = percentile_interval(resampled_means(values, b, seed));
    Ok(Interval {
        point: mean(values),
        low,
        high,
        level: CONFIDENCE_LEVEL,
        resamples: b,
        seed,
    })
}

/// Paired comparison of run `a` against run `b` on the same instances.
///
/// Instances are matched by id and sorted by id, then instance indices are
/// resampled jointly (`b_resamples` times, seeded): each resample takes the
/// same instances from both runs, so per-instance difficulty cancels and the
/// interval is much tighter than comparing two independent intervals. Input
/// order does not affect the result.
///
/// # Errors
/// [`MetricsError::InstanceMismatch`] naming the ids present in only one run;
/// [`MetricsError::DuplicateInstance`] if a run lists an id twice;
/// [`MetricsError::NonFiniteScore`]; [`MetricsError::EmptySample`];
/// [`MetricsError::ZeroResamples`].
pub fn paired_diff(
    a: &[InstanceScore],
    b: &[InstanceScore],
    b_resamples: usize,
    seed: u64,
) -> Result<PairedDiff, MetricsError> {
    let a_by_id = index_run(a, "a")?;
    let b_by_id = index_run(b, "b")?;
    let only_in_a: Vec<String> = a_by_id
        .keys()
        .filter(|id| !b_by_id.contains_key(*id))
        .map(ToString::to_string)
        .collect();
    let only_in_b: Vec<String> = b_by_id
        .keys()
        .filter(|id| !a_by_id.contains_key(*id))
        .map(ToString::to_string)
        .collect();
    if !only_in_a.is_empty() || !only_in_b.is_empty() {
        return Err(MetricsError::InstanceMismatch {
            only_in_a,
            only_in_b,
        });
    }
    if a_by_id.is_empty() {
        return Err(MetricsError::EmptySample);
    }
    if b_resamples == 0 {
        return Err(MetricsError::ZeroResamples);
    }
    // BTreeMap iteration is sorted by id, so both runs line up index by index.
    let sa: Vec<f64> = a_by_id.values().copied().collect();
    let sb: Vec<f64> = b_by_id.values().copied().collect();
    // Resampling indices jointly and taking mean(a*) - mean(b*) is the same as
    // resampling the per-instance differences.
    let diffs: Vec<f64> = sa.iter().zip(&sb).map(|(x, y)| x - y).collect();
    let (low, high) = percentile_interval(resampled_means(&diffs, b_resamples, seed));
    Ok(PairedDiff {
        diff: mean(&diffs),
        low,
        high,
        instances: diffs.len(),
        mean_a: mean(&sa),
        mean_b: mean(&sb),
        level: CONFIDENCE_LEVEL,
        resamples: b_resamples,
        seed,
    })
}

fn index_run<'a>(
    run: &'a [InstanceScore],
    name: &'static str,
) -> Result<BTreeMap<&'a str, f64>, MetricsError> {
    let mut by_id = BTreeMap::new();
    let mut duplicates = BTreeSet::new();
    for s in run {
        if !s.score.is_finite() {
            return Err(MetricsError::NonFiniteScore {
                run: name,
                instance_id: s.instance_id.clone(),
            });
        }
        if by_id.insert(s.instance_id.as_str(), s.score).is_some() {
            duplicates.insert(s.instance_id.clone());
        }
    }
    if !duplicates.is_empty() {
        return Err(MetricsError::DuplicateInstance {
            run: name,
            instance_ids: duplicates.into_iter().collect(),
        });
    }
    Ok(by_id)
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// Means of `b` resamples with replacement; `values` must be non-empty.
fn resampled_means(values: &[f64], b: usize, seed: u64) -> Vec<f64> {
    let n = values.len();
    let mut rng = SplitMix64::new(seed);
    (0..b)
        .map(|_| {
            let sum: f64 = (0..n).map(|_| values[rng.below(n as u64) as usize]).sum();
            sum / n as f64
        })
        .collect()
}

/// (2.5th, 97.5th) percentiles of a non-empty sample.
fn percentile_interval(mut stats: Vec<f64>) -> (f64, f64) {
    stats.sort_by(f64::total_cmp);
    let tail = (1.0 - CONFIDENCE_LEVEL) / 2.0;
    (quantile(&stats, tail), quantile(&stats, 1.0 - tail))
}

/// Linear interpolation between order statistics (Hyndman & Fan type 7);
/// returns an exact order statistic when neighbours are equal, so constant
/// input gives a zero-width interval without rounding noise.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    if lo == hi || sorted[lo] == sorted[hi] {
        return sorted[lo];
    }
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fixed pseudo-random 0/1 outcomes with success rate ~`p`.
    fn bernoulli(n: usize, p: f64, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        (0..n)
            .map(|_| if rng.next_f64() < p { 1.0 } else { 0.0 })
            .collect()
    }

    /// 150 fixed 0/1 outcomes, and a copy with the first 15 failures fixed.
    fn base_and_improved() -> (Vec<f64>, Vec<f64>) {
        let base = bernoulli(150, 0.4, 21);
        let mut better = base.clone();
        for i in base
            .iter()
            .enumerate()
            .filter(|(_, &v)| v == 0.0)
            .map(|(i, _)| i)
            .take(15)
        {
            better[i] = 1.0;
        }
        (base, better)
    }

    fn scores(prefix: &str, values: &[f64]) -> Vec<InstanceScore> {
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| InstanceScore::new(format!("{prefix}{i:04}"), v))
            .collect()
    }

    #[test]
    fn bootstrap_is_deterministic_for_a_seed() {
        // Continuous scores (like per-instance pass@k), so percentiles are not
        // pinned to a coarse grid and a seed change must move them.
        let mut rng = SplitMix64::new(1);
        let values: Vec<f64> = (0..100).map(|_| rng.next_f64()).collect();
        let x = bootstrap_ci(&values, DEFAULT_RESAMPLES, 17).unwrap();
        let y = bootstrap_ci(&values, DEFAULT_RESAMPLES, 17).unwrap();
        let z = bootstrap_ci(&values, DEFAULT_RESAMPLES, 18).unwrap();
        assert_eq!(x, y);
        assert_eq!(
            resampled_means(&values, 50, 17),
            resampled_means(&values, 50, 17)
        );
        // Guards against the seed being ignored.
        assert_ne!(
            resampled_means(&values, 50, 17),
            resampled_means(&values, 50, 18)
        );
        assert!(x.low != z.low && x.high != z.high, "{x:?} vs {z:?}");
        assert_eq!(x.point, z.point);
        assert_eq!(x.resamples, DEFAULT_RESAMPLES);
        assert_eq!(x.seed, 17);
        assert_eq!(x.level, 0.95);
    }

    #[test]
    fn interval_contains_point_and_is_plausible() {
        let values = bernoulli(200, 0.3, 2);
        let ci = bootstrap_ci(&values, DEFAULT_RESAMPLES, DEFAULT_SEED).unwrap();
        let p = ci.point;
        assert_eq!(p, values.iter().sum::<f64>() / 200.0);
        assert!(ci.low < p && p < ci.high, "{ci:?}");
        // Half-width should match the normal approximation 1.96*sqrt(p(1-p)/n)
        // within 20%; catches e.g. resampling the wrong size.
        let normal = 1.96 * (p * (1.0 - p) / 200.0).sqrt();
        let half = (ci.high - ci.low) / 2.0;
        assert!(
            (half / normal - 1.0).abs() < 0.2,
            "half {half} vs normal {normal}"
        );
    }

    #[test]
    fn interval_has_the_95_percent_level() {
        // For 1000 continuous values the bootstrap distribution of the mean is
        // close to normal, so the half-width should be 1.96 standard errors.
        // A 90% interval would give 1.645 (16% less); B = 2000 Monte Carlo
        // noise is ~2%, so 6% separates the two on this fixed seed.
        let mut rng = SplitMix64::new(31);
        let values: Vec<f64> = (0..1000).map(|_| rng.next_f64()).collect();
        let ci = bootstrap_ci(&values, DEFAULT_RESAMPLES, DEFAULT_SEED).unwrap();
        let m = ci.point;
        let var = values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / 1000.0;
        let z = (ci.high - ci.low) / 2.0 / (var / 1000.0).sqrt();
        assert!(
            (z / 1.96 - 1.0).abs() < 0.06,
            "half-width = {z} standard errors"
        );
    }

    #[test]
    fn all_equal_values_give_zero_width() {
        for v in [0.0, 1.0, 0.1, 0.7] {
            let ci = bootstrap_ci(&[v; 37], 500, 5).unwrap();
            assert_eq!((ci.low, ci.point, ci.high), (ci.point, ci.point, ci.point));
            assert!((ci.point - v).abs() < 1e-15);
        }
        let single = bootstrap_ci(&[0.25], 100, 5).unwrap();
        assert_eq!((single.low, single.high), (0.25, 0.25));
    }

    #[test]
    fn interval_shrinks_with_four_times_the_instances() {
        // Width ~ 1/sqrt(n): 4x the instances should roughly halve it.
        let small = bernoulli(100, 0.4, 11);
        let large = bernoulli(400, 0.4, 12);
        let ws = {
            let ci = bootstrap_ci(&small, DEFAULT_RESAMPLES, 3).unwrap();
            ci.high - ci.low
        };
        let wl = {
            let ci = bootstrap_ci(&large, DEFAULT_RESAMPLES, 3).unwrap();
            ci.high - ci.low
        };
        let ratio = wl / ws;
        assert!(
            (0.35..0.65).contains(&ratio),
            "width ratio {ratio} ({wl} / {ws})"
        );
    }

    #[test]
    fn two_point_sample_has_known_percentiles() {
        // Resample means of [0, 1] are 0 (p = 1/4), 0.5 (1/2), 1 (1/4), so the
        // 2.5th and 97.5th percentiles are exactly 0 and 1.
        let ci = bootstrap_ci(&[0.0, 1.0], DEFAULT_RESAMPLES, 9).unwrap();
        assert_eq!((ci.low, ci.point, ci.high), (0.0, 0.5, 1.0));
    }

    #[test]
    fn bootstrap_rejects_bad_input() {
        assert_eq!(bootstrap_ci(&[], 10, 0), Err(MetricsError::EmptySample));
        assert_eq!(bootstrap_ci(&[1.0], 0, 0), Err(MetricsError::ZeroResamples));
        assert_eq!(
            bootstrap_ci(&[1.0, f64::NAN], 10, 0),
            Err(MetricsError::NonFiniteValue { index: 1 })
        );
    }

    #[test]
    fn quantile_interpolates() {
        let s = [0.0, 1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&s, 0.0), 0.0);
        assert_eq!(quantile(&s, 0.5), 2.0);
        assert_eq!(quantile(&s, 0.125), 0.5);
        assert_eq!(quantile(&s, 1.0), 4.0);
    }

    #[test]
    fn paired_identical_runs_give_zero() {
        let values = bernoulli(80, 0.5, 4);
        let a = scores("inst-", &values);
        let d = paired_diff(&a, &a.clone(), DEFAULT_RESAMPLES, DEFAULT_SEED).unwrap();
        assert_eq!((d.diff, d.low, d.high), (0.0, 0.0, 0.0));
        assert_eq!(d.instances, 80);
        assert_eq!(d.mean_a, d.mean_b);
        assert!(!d.excludes_zero());
    }

    #[test]
    fn paired_mismatch_names_the_ids() {
        let a = vec![
            InstanceScore::new("x__x-1", 1.0),
            InstanceScore::new("x__x-2", 0.0),
            InstanceScore::new("only-a-7", 1.0),
        ];
        let b = vec![
            InstanceScore::new("x__x-2", 1.0),
            InstanceScore::new("x__x-1", 1.0),
            InstanceScore::new("only-b-3", 0.0),
            InstanceScore::new("only-b-1", 0.0),
        ];
        let err = paired_diff(&a, &b, 100, 0).unwrap_err();
        assert_eq!(
            err,
            MetricsError::InstanceMismatch {
                only_in_a: vec!["only-a-7".into()],
                only_in_b: vec!["only-b-1".into(), "only-b-3".into()],
            }
        );
        let msg = err.to_string();
        for id in ["only-a-7", "only-b-1", "only-b-3"] {
            assert!(msg.contains(id), "{msg}");
        }
        assert!(!msg.contains("x__x-1"), "{msg}");
    }

    #[test]
    fn paired_rejects_duplicates_nonfinite_and_empty() {
        let a = vec![InstanceScore::new("i1", 1.0), InstanceScore::new("i1", 0.0)];
        let b = vec![InstanceScore::new("i1", 1.0)];
        assert_eq!(
            paired_diff(&a, &b, 10, 0),
            Err(MetricsError::DuplicateInstance {
                run: "a",
                instance_ids: vec!["i1".into()]
            })
        );
        let nan = vec![InstanceScore::new("i1", f64::NAN)];
        assert_eq!(
            paired_diff(&b, &nan, 10, 0),
            Err(MetricsError::NonFiniteScore {
                run: "b",
                instance_id: "i1".into()
            })
        );
        assert_eq!(paired_diff(&[], &[], 10, 0), Err(MetricsError::EmptySample));
        assert_eq!(paired_diff(&b, &b, 0, 0), Err(MetricsError::ZeroResamples));
    }

    #[test]
    fn paired_is_order_invariant_and_signed() {
        // B = A with 15 extra instances solved: diff(B - A) = +0.1 exactly.
        let (base, better) = base_and_improved();
        let a = scores("t", &base);
        let b = scores("t", &better);
        let d = paired_diff(&b, &a, DEFAULT_RESAMPLES, 8).unwrap();
        assert!((d.diff - 0.1).abs() < 1e-12, "{d:?}");
        assert!(d.excludes_zero() && d.low > 0.0, "{d:?}");
        let mut b_rev = b.clone();
        b_rev.reverse();
        assert_eq!(paired_diff(&b_rev, &a, DEFAULT_RESAMPLES, 8).unwrap(), d);
        let rev = paired_diff(&a, &b, DEFAULT_RESAMPLES, 8).unwrap();
        assert!((rev.diff + 0.1).abs() < 1e-12 && rev.high < 0.0, "{rev:?}");
    }

    #[test]
    fn paired_interval_is_tighter_than_unpaired() {
        // Same 15-instance gain as above. Treating the runs as independent,
        // the difference's interval would be about sqrt(wa^2 + wb^2) wide and
        // contain 0; pairing cancels per-instance difficulty, so the paired
        // interval is under half that and excludes 0. This is why A/B
        // comparisons must be paired.
        let (base, better) = base_and_improved();
        let ia = bootstrap_ci(&base, DEFAULT_RESAMPLES, 8).unwrap();
        let ib = bootstrap_ci(&better, DEFAULT_RESAMPLES, 8).unwrap();
        let unpaired = (ia.high - ia.low).hypot(ib.high - ib.low);
        assert!(
            0.1 < unpaired / 2.0,
            "unpaired would not exclude 0: {unpaired}"
        );
        let d = paired_diff(
            &scores("t", &better),
            &scores("t", &base),
            DEFAULT_RESAMPLES,
            8,
        )
        .unwrap();
        assert!(d.low > 0.0, "{d:?}");
        assert!(d.high - d.low < unpaired / 2.0, "{d:?} vs {unpaired}");
    }
}
