//! Statistics for runtime measurements: medians and IQR, the IQR outlier
//! rule, the Mann–Whitney U test (exact and asymptotic, computed as scipy
//! does), a bootstrap interval for a ratio of medians, and the per-variant
//! verdict rules.
//!
//! Plain sync code; the numbers are checked against scipy in the tests.

use serde::{Deserialize, Serialize};

use crate::metrics::rng::SplitMix64;

/// Why a statistic could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("{what}: no values")]
    Empty { what: &'static str },
    #[error("{what}: value at index {index} is not finite")]
    NonFinite { what: &'static str, index: usize },
    #[error("exact Mann–Whitney U needs samples without ties ({ties} tied values); use the asymptotic method")]
    TiesInExact { ties: usize },
    #[error("exact Mann–Whitney U supports at most {max} values in all, got {n}")]
    TooLargeForExact { n: usize, max: usize },
    #[error("bootstrap needs at least one resample")]
    ZeroResamples,
}

fn check(what: &'static str, xs: &[f64]) -> Result<(), StatsError> {
    if xs.is_empty() {
        return Err(StatsError::Empty { what });
    }
    match xs.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(StatsError::NonFinite { what, index }),
        None => Ok(()),
    }
}

fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// Linear interpolation between order statistics (Hyndman & Fan type 7,
/// numpy's default `percentile`), `q` in `[0, 1]`, on sorted input.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    if lo == hi || sorted[lo] == sorted[hi] {
        return sorted[lo];
    }
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Median (mean of the two middle values for an even count).
pub fn median(xs: &[f64]) -> Result<f64, StatsError> {
    check("median", xs)?;
    Ok(quantile_sorted(&sorted(xs), 0.5))
}

/// First and third quartiles (numpy `percentile(x, [25, 75])`).
pub fn quartiles(xs: &[f64]) -> Result<(f64, f64), StatsError> {
    check("quartiles", xs)?;
    let s = sorted(xs);
    Ok((quantile_sorted(&s, 0.25), quantile_sorted(&s, 0.75)))
}

/// The outlier rule: values outside `[q1 - k·IQR, q3 + k·IQR]` are dropped.
/// SWE-Perf uses `k = 1` (Tukey's fences are 1.5).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OutlierRule {
    /// Fence multiplier; `None` keeps every value.
    pub iqr_k: Option<f64>,
}

impl Default for OutlierRule {
    fn default() -> Self {
        Self { iqr_k: Some(1.0) }
    }
}

impl OutlierRule {
    /// How the rule reads in a report.
    pub fn describe(&self) -> String {
        match self.iqr_k {
            Some(k) => format!("IQR fences, k = {k}"),
            None => "none".to_string(),
        }
    }
}

/// What the outlier rule kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Filtered {
    /// Kept values, in input order.
    pub kept: Vec<f64>,
    /// Dropped values, in input order.
    pub dropped: Vec<f64>,
    /// The fences used (equal to min/max of the input without a rule).
    pub low: f64,
    pub high: f64,
}

/// Applies `rule` to `xs` (SWE-Perf's `filter_outliers`: fences from numpy
/// percentiles, values on a fence are kept).
pub fn filter_outliers(xs: &[f64], rule: OutlierRule) -> Result<Filtered, StatsError> {
    check("outlier filter", xs)?;
    let s = sorted(xs);
    let (low, high) = match rule.iqr_k {
        Some(k) => {
            let (q1, q3) = (quantile_sorted(&s, 0.25), quantile_sorted(&s, 0.75));
            (q1 - k * (q3 - q1), q3 + k * (q3 - q1))
        }
        None => (s[0], s[s.len() - 1]),
    };
    let (kept, dropped) = xs.iter().partition(|&&v| v >= low && v <= high);
    Ok(Filtered {
        kept,
        dropped,
        low,
        high,
    })
}

/// Which way the alternative hypothesis points, for the first sample `x`
/// against the second `y` (scipy's `alternative`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Alternative {
    /// `x` tends to be larger than `y`.
    Greater,
    /// `x` tends to be smaller than `y`.
    Less,
    TwoSided,
}

/// How the p-value is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MwuMethod {
    /// The exact null distribution of U (no ties only).
    Exact,
    /// Normal approximation with tie correction and continuity correction.
    Asymptotic,
}

/// Largest `n1 + n2` for the exact distribution: its counts are kept as
/// integers (exact), and C(120, 60) < 2^127.
pub const EXACT_MAX_N: usize = 120;

/// A Mann–Whitney U test result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MannWhitney {
    /// U of the first sample (scipy's `statistic`).
    pub u: f64,
    pub p: f64,
    pub method: MwuMethod,
    pub alternative: Alternative,
}

/// Midranks (1-based) of the pooled sample and the sizes of its tie groups.
fn ranks(pooled: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut order: Vec<usize> = (0..pooled.len()).collect();
    order.sort_by(|&a, &b| pooled[a].total_cmp(&pooled[b]));
    let mut r = vec![0.0; pooled.len()];
    let mut ties = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && pooled[order[j + 1]] == pooled[order[i]] {
            j += 1;
        }
        let mid = (i + j) as f64 / 2.0 + 1.0;
        for &o in &order[i..=j] {
            r[o] = mid;
        }
        ties.push(j - i + 1);
        i = j + 1;
    }
    (r, ties)
}

/// Mann–Whitney U test of `x` against `y`, as
/// `scipy.stats.mannwhitneyu(x, y, alternative=..., method=..., use_continuity=...)`
/// computes it. `continuity` only matters for the asymptotic method.
pub fn mann_whitney_u(
    x: &[f64],
    y: &[f64],
    alternative: Alternative,
    method: MwuMethod,
    continuity: bool,
) -> Result<MannWhitney, StatsError> {
    check("Mann–Whitney U, first sample", x)?;
    check("Mann–Whitney U, second sample", y)?;
    let (n1, n2) = (x.len(), y.len());
    let pooled: Vec<f64> = x.iter().chain(y).copied().collect();
    let (r, ties) = ranks(&pooled);
    let r1: f64 = r[..n1].iter().sum();
    let u1 = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let u2 = (n1 * n2) as f64 - u1;
    let (u, factor) = match alternative {
        Alternative::Greater => (u1, 1.0),
        Alternative::Less => (u2, 1.0),
        Alternative::TwoSided => (u1.max(u2), 2.0),
    };
    let p = match method {
        MwuMethod::Exact => {
            let tied: usize = ties.iter().filter(|&&t| t > 1).sum();
            if tied > 0 {
                return Err(StatsError::TiesInExact { ties: tied });
            }
            if n1 + n2 > EXACT_MAX_N {
                return Err(StatsError::TooLargeForExact {
                    n: n1 + n2,
                    max: EXACT_MAX_N,
                });
            }
            // No ties: U is an integer.
            exact_sf(u.round() as usize, n1, n2)
        }
        MwuMethod::Asymptotic => {
            let n = (n1 + n2) as f64;
            let tie_term: f64 = ties.iter().map(|&t| (t * t * t - t) as f64).sum();
            let s = ((n1 * n2) as f64 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)))).sqrt();
            let mut num = u - (n1 * n2) as f64 / 2.0;
            if continuity {
                num -= 0.5;
            }
            normal_sf(num / s)
        }
    };
    Ok(MannWhitney {
        u: u1,
        p: (p * factor).clamp(0.0, 1.0),
        method,
        alternative,
    })
}

/// The method used when the caller does not choose: exact without ties for
/// samples small enough, otherwise asymptotic.
pub fn auto_method(x: &[f64], y: &[f64]) -> MwuMethod {
    let pooled: Vec<f64> = x.iter().chain(y).copied().collect();
    let (_, ties) = ranks(&pooled);
    if pooled.len() <= EXACT_MAX_N && ties.iter().all(|&t| t == 1) {
        MwuMethod::Exact
    } else {
        MwuMethod::Asymptotic
    }
}

/// `P(U >= u)` under the null for sample sizes `m`, `n` without ties.
///
/// The counts of U are the coefficients of the Gaussian binomial
/// `[m+n choose m]_q`, built as `prod_{i=1..k} (1 - q^(N-k+i)) / (1 - q^i)`;
/// after each step the polynomial is `[N-k+i choose i]_q`, so every
/// coefficient stays a non-negative integer at most C(N, k).
fn exact_sf(u: usize, m: usize, n: usize) -> f64 {
    let (big_n, k) = (m + n, m.min(n));
    let len = m * n + 1;
    let mut c = vec![0i128; len];
    c[0] = 1;
    for i in 1..=k {
        let a = big_n - k + i;
        // Multiply by (1 - q^a), high degrees first so c[j-a] is the old one.
        for j in (a..len).rev() {
            c[j] -= c[j - a];
        }
        // Divide by (1 - q^i): c'[j] = c[j] + c'[j-i].
        for j in i..len {
            c[j] += c[j - i];
        }
    }
    let total: i128 = c.iter().sum();
    let upper: i128 = c.iter().skip(u).sum();
    // Integer counts until here; one rounding in the division.
    upper as f64 / total as f64
}

/// Upper tail of the standard normal, `P(Z > z)`, to about 1e-15 absolute.
pub fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// Complementary error function: the power series of erf below 3 (all terms
/// positive, no cancellation), Lentz's continued fraction above.
fn erfc(x: f64) -> f64 {
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 3.0 {
        // erf(x) = 2/sqrt(pi) e^{-x^2} sum_n (2x^2)^n x / (1·3···(2n+1))
        let mut term = x;
        let mut sum = x;
        let mut n = 0.0;
        while term > sum * 1e-17 {
            n += 1.0;
            term *= 2.0 * x * x / (2.0 * n + 1.0);
            sum += term;
        }
        1.0 - 2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp() * sum
    } else {
        // erfc(x) = e^{-x^2}/sqrt(pi) · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))
        let tiny = 1e-300;
        let mut f = x;
        let mut c = x;
        let mut d = 0.0;
        for i in 1..300 {
            let a = i as f64 / 2.0;
            d = x + a * d;
            d = if d.abs() < tiny { tiny } else { d };
            c = x + a / c;
            c = if c.abs() < tiny { tiny } else { c };
            d = 1.0 / d;
            let delta = c * d;
            f *= delta;
            if (delta - 1.0).abs() < 1e-16 {
                break;
            }
        }
        (-x * x).exp() / std::f64::consts::PI.sqrt() / f
    }
}

/// A ratio of medians with its percentile-bootstrap interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RatioInterval {
    /// `median(num) / median(den)` on the samples themselves.
    pub point: f64,
    pub low: f64,
    pub high: f64,
    /// Two-sided level of `[low, high]`.
    pub level: f64,
    pub resamples: usize,
    pub seed: u64,
}

impl RatioInterval {
    /// Whether the interval contains `v`.
    pub fn contains(&self, v: f64) -> bool {
        self.low <= v && v <= self.high
    }
}

/// `median(num) / median(den)` (the speedup when `num` holds base times and
/// `den` a variant's) with a 95% percentile-bootstrap interval.
///
/// Each resample draws `num.len()` values of `num` then `den.len()` values of
/// `den` with replacement, indices from [`SplitMix64::below`] seeded with
/// `seed`: the two samples are independent (runs are not paired), so they
/// are resampled independently. Percentiles are type 7. The result is a pure
/// function of the inputs in order, `resamples` and `seed`.
pub fn median_ratio_ci(
    num: &[f64],
    den: &[f64],
    resamples: usize,
    seed: u64,
) -> Result<RatioInterval, StatsError> {
    check("speedup, numerator", num)?;
    check("speedup, denominator", den)?;
    if resamples == 0 {
        return Err(StatsError::ZeroResamples);
    }
    let mut rng = SplitMix64::new(seed);
    let mut buf_n = vec![0.0; num.len()];
    let mut buf_d = vec![0.0; den.len()];
    let mut ratios = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for v in buf_n.iter_mut() {
            *v = num[rng.below(num.len() as u64) as usize];
        }
        for v in buf_d.iter_mut() {
            *v = den[rng.below(den.len() as u64) as usize];
        }
        buf_n.sort_by(f64::total_cmp);
        buf_d.sort_by(f64::total_cmp);
        ratios.push(quantile_sorted(&buf_n, 0.5) / quantile_sorted(&buf_d, 0.5));
    }
    ratios.sort_by(f64::total_cmp);
    Ok(RatioInterval {
        point: median(num)? / median(den)?,
        low: quantile_sorted(&ratios, 0.025),
        high: quantile_sorted(&ratios, 0.975),
        level: 0.95,
        resamples,
        seed,
    })
}

/// Thresholds of the verdict rules.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VerdictRule {
    /// Significance level of each one-sided test.
    pub alpha: f64,
    /// Smallest relative change that counts (0.05: 5%).
    pub min_effect: f64,
}

impl Default for VerdictRule {
    fn default() -> Self {
        Self {
            alpha: 0.05,
            min_effect: 0.05,
        }
    }
}

// (Also `audit::Verdict`, a pass's audit verdict: the two never meet.)
/// What the measurements say about a variant against base.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Faster,
    Slower,
    NoMeasurableChange,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::NoMeasurableChange => "no measurable change",
        }
    }
}

/// Faster when base is larger than the variant by the one-sided test
/// (`p_faster < alpha`) and the speedup is at least `1 + min_effect`;
/// slower symmetrically (`p_slower < alpha`, speedup at most
/// `1 / (1 + min_effect)`); otherwise no measurable change. Both directions
/// are tested, each at `alpha`.
pub fn verdict(speedup: f64, p_faster: f64, p_slower: f64, rule: VerdictRule) -> Verdict {
    if p_faster < rule.alpha && speedup >= 1.0 + rule.min_effect {
        Verdict::Faster
    } else if p_slower < rule.alpha && speedup <= 1.0 / (1.0 + rule.min_effect) {
        Verdict::Slower
    } else {
        Verdict::NoMeasurableChange
    }
}

/// The A/A noise floor: how far from 1.0 the interval of base against itself
/// reaches, `max(1 - low, high - 1)` (0 for a zero-width interval at 1).
pub fn noise_floor(aa: &RatioInterval) -> f64 {
    (1.0 - aa.low).max(aa.high - 1.0).max(0.0)
}

/// An instance is too noisy to score when its noise floor exceeds the
/// smallest effect the verdict would call a change.
pub fn too_noisy(floor: f64, rule: VerdictRule) -> bool {
    floor > rule.min_effect
}

/// Fraction of the expert's speedup a variant reaches (SWE-fficiency's
/// speedup ratio): `variant_speedup / gold_speedup`.
pub fn relative_to_expert(variant_speedup: f64, gold_speedup: f64) -> f64 {
    variant_speedup / gold_speedup
}

/// GSO's Opt@K criterion for one attempt: at least `fraction` (0.95) of the
/// expert's speedup.
pub fn reaches_expert(variant_speedup: f64, gold_speedup: f64, fraction: f64) -> bool {
    variant_speedup >= fraction * gold_speedup
}

/// Harmonic mean of positive values (`None` for an empty list or a value
/// that is not positive and finite, which has no harmonic mean).
pub fn harmonic_mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return None;
    }
    Some(xs.len() as f64 / xs.iter().map(|v| 1.0 / v).sum::<f64>())
}

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
