//! Per-instance unbiased estimators: pass@k (Chen et al. 2021) and pass^k
//! (Yao et al. 2024, tau-bench).

use serde::{Deserialize, Serialize};

/// Which per-instance estimator a number is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum MetricKind {
    /// pass@k: probability that at least one of k samples passes.
    #[serde(rename = "pass@k")]
    PassAtK,
    /// pass^k: probability that all k samples pass (reliability).
    #[serde(rename = "pass^k")]
    PassHatK,
}

impl MetricKind {
    /// Evaluates this estimator for `n` samples with `c` successes; see
    /// [`pass_at_k`] and [`pass_hat_k`] for when it is `None`.
    #[must_use]
    pub fn estimate(self, n: u64, c: u64, k: u64) -> Option<f64> {
        match self {
            MetricKind::PassAtK => pass_at_k(n, c, k),
            MetricKind::PassHatK => pass_hat_k(n, c, k),
        }
    }

    fn separator(self) -> char {
        match self {
            MetricKind::PassAtK => '@',
            MetricKind::PassHatK => '^',
        }
    }
}

/// Report key for a metric: `metric_key(PassAtK, 5) == "pass@5"`,
/// `metric_key(PassHatK, 5) == "pass^5"`.
///
/// Every JSON key naming a pass@k / pass^k number should come from here so
/// reports stay consistent with the human-eval convention (`"pass@1"`).
#[must_use]
pub fn metric_key(kind: MetricKind, k: u64) -> String {
    format!("pass{}{k}", kind.separator())
}

/// Unbiased pass@k estimator for one instance: `1 - C(n-c, k) / C(n, k)`.
///
/// `n` samples were drawn, `c` of them passed. Returns `None` when the
/// estimate is undefined: `k == 0`, `k > n` (fewer samples than k), or
/// `c > n` (inconsistent counts). Returns exactly `1.0` when `n - c < k`
/// (every k-subset must contain a success).
///
/// Computed as the numerically stable product
/// `1 - prod_{i=n-c+1}^{n} (1 - k/i)` (openai/human-eval), never through
/// binomials, which overflow `f64` beyond n ~ 1030. The equal product
/// `prod_{i=0}^{k-1} (n-c-i)/(n-i)` is used instead when `k < c`, so the cost
/// is `O(min(c, k))`.
#[must_use]
pub fn pass_at_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    // `miss` = probability that a uniformly drawn k-subset has no success.
    let miss = if c <= k {
        // (i - k) / i == 1 - k/i, but with a single rounding per factor.
        ratio_product((n - c + 1)..=n, |i| ratio(i - k, i))
    } else {
        ratio_product(0..k, |i| ratio(n - c - i, n - i))
    };
    Some(1.0 - miss)
}

/// Unbiased pass^k estimator for one instance: `C(c, k) / C(n, k)`, the
/// probability that a uniformly drawn k-subset of the `n` samples is all
/// successes.
///
/// `None` exactly when [`pass_at_k`] is `None` (`k == 0`, `k > n`, `c > n`);
/// `0.0` when `c < k`. Computed as `prod_{i=0}^{k-1} (c-i)/(n-i)`, or the equal
/// `prod_{i=0}^{n-c-1} (n-k-i)/(n-i)` when that is shorter.
#[must_use]
pub fn pass_hat_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if c < k {
        return Some(0.0);
    }
    let all = if k <= n - c {
        ratio_product(0..k, |i| ratio(c - i, n - i))
    } else {
        ratio_product(0..(n - c), |i| ratio(n - k - i, n - i))
    };
    Some(all)
}

fn ratio(num: u64, den: u64) -> f64 {
    num as f64 / den as f64
}

/// Product of factors in `[0, 1]`; stops once it underflows to zero since it
/// can only stay there (keeps huge `n` cheap when the answer is already 0).
fn ratio_product(range: impl Iterator<Item = u64>, factor: impl Fn(u64) -> f64) -> f64 {
    let mut p = 1.0;
    for i in range {
        p *= factor(i);
        if p == 0.0 {
            break;
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exact reference by brute force: among all k-subsets of a sample vector
    /// of length n with `c` successes, the fraction with >= 1 success and the
    /// fraction with only successes. Counts are exact integers, so the only
    /// rounding is the final division.
    fn enumerate(n: u64, c: u64, k: u64) -> (f64, f64) {
        // Successes at scattered positions (every other slot first), so the
        // reference does not rely on them being a prefix.
        let mut positions: Vec<u64> = (0..n).step_by(2).chain((1..n).step_by(2)).collect();
        positions.truncate(c as usize);
        let success_mask: u32 = positions.iter().map(|&p| 1u32 << p).sum();
        let (mut total, mut any, mut all) = (0u64, 0u64, 0u64);
        for subset in 0u32..(1u32 << n) {
            if u64::from(subset.count_ones()) != k {
                continue;
            }
            total += 1;
            if subset & success_mask != 0 {
                any += 1;
            }
            if subset & !success_mask == 0 {
                all += 1;
            }
        }
        (any as f64 / total as f64, all as f64 / total as f64)
    }

    #[test]
    fn matches_exhaustive_enumeration_for_small_n() {
        let mut checked = 0;
        for n in 1..=12u64 {
            for c in 0..=n {
                for k in 1..=n {
                    let (any, all) = enumerate(n, c, k);
                    let at = pass_at_k(n, c, k).unwrap();
                    let hat = pass_hat_k(n, c, k).unwrap();
                    assert!(
                        (at - any).abs() <= 1e-12,
                        "pass@k n={n} c={c} k={k}: {at} vs {any}"
                    );
                    assert!(
                        (hat - all).abs() <= 1e-12,
                        "pass^k n={n} c={c} k={k}: {hat} vs {all}"
                    );
                    checked += 1;
                }
            }
        }
        // sum_{n=1}^{12} n(n+1) = 728 (n, c, k) triples.
        assert_eq!(checked, 728);
    }

    #[test]
    fn hand_checked_table() {
        // Worked by hand, C(a,b) = binomial:
        //  n=10 c=3  k=1   pass@1 = c/n = 3/10 = 0.3
        //  n=10 c=3  k=5   pass@5 = 1 - C(7,5)/C(10,5) = 1 - 21/252 = 11/12 = 0.916666...
        //  n=10 c=3  k=8   n-c = 7 < 8, every 8-subset holds a success -> 1.0
        //  n=10 c=0  k=5   no successes -> 0.0
        //  n=10 c=10 k=10  -> 1.0
        //  n=5  c=2  k=2   pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7
        //  n=200 c=13 k=100  1 - C(187,100)/C(200,100) = 0.9999194971988055
        //                     (too big for hand work: exact rational arithmetic,
        //                     Python fractions + math.comb, then rounded)
        //  n=10 c=7  k=3   pass^3 = C(7,3)/C(10,3) = 35/120 = 0.291666...
        //  n=10 c=3  k=1   pass^1 = 3/10 = 0.3 (pass^1 == pass@1)
        //  n=10 c=3  k=4   c < k -> 0.0
        //  n=5  c=4  k=2   pass^2 = C(4,2)/C(5,2) = 6/10 = 0.6
        //  n=4  c=4  k=4   -> 1.0
        let at = [
            (10, 3, 1, 0.3),
            (10, 3, 5, 11.0 / 12.0),
            (10, 3, 8, 1.0),
            (10, 0, 5, 0.0),
            (10, 10, 10, 1.0),
            (5, 2, 2, 0.7),
        ];
        for (n, c, k, want) in at {
            let got = pass_at_k(n, c, k).unwrap();
            assert!(
                (got - want).abs() < 1e-12,
                "pass@{k} n={n} c={c}: {got} != {want}"
            );
        }
        let big = pass_at_k(200, 13, 100).unwrap();
        assert!((big - 0.999_919_497_198_805_5).abs() < 1e-12, "{big}");

        let hat = [
            (10, 7, 3, 35.0 / 120.0),
            (10, 3, 1, 0.3),
            (10, 3, 4, 0.0),
            (5, 4, 2, 0.6),
            (4, 4, 4, 1.0),
        ];
        for (n, c, k, want) in hat {
            let got = pass_hat_k(n, c, k).unwrap();
            assert!(
                (got - want).abs() < 1e-12,
                "pass^{k} n={n} c={c}: {got} != {want}"
            );
        }
    }

    #[test]
    fn undefined_inputs_are_none() {
        for f in [pass_at_k, pass_hat_k] {
            assert_eq!(f(10, 3, 0), None, "k == 0");
            assert_eq!(f(4, 1, 5), None, "k > n");
            assert_eq!(f(0, 0, 1), None, "no samples");
            assert_eq!(f(5, 6, 1), None, "c > n");
        }
    }

    #[test]
    fn large_n_is_stable() {
        // 1 - (1 - 100/1000) = 0.1 (one success among 1000).
        let p = pass_at_k(1000, 1, 100).unwrap();
        assert!((p - 0.1).abs() < 1e-12, "{p}");
        // C(2000, 1000) ~ 2e600 overflows f64, so a binomial-based version
        // would give inf/inf = NaN here. With c = 1: pass@k = k/n = 0.5;
        // with c = n - 1: pass^k = (n - k)/n = 0.5.
        let p = pass_at_k(2000, 1, 1000).unwrap();
        assert!((p - 0.5).abs() < 1e-12, "{p}");
        let h = pass_hat_k(2000, 1999, 1000).unwrap();
        assert!((h - 0.5).abs() < 1e-12, "{h}");
        // Both loop orders at scale stay finite and in range.
        for (n, c, k) in [
            (100_000, 50_000, 1_000),
            (100_000, 10, 50_000),
            (1_000_000, 999_990, 500_000),
        ] {
            for v in [pass_at_k(n, c, k).unwrap(), pass_hat_k(n, c, k).unwrap()] {
                assert!(
                    v.is_finite() && (0.0..=1.0).contains(&v),
                    "n={n} c={c} k={k}: {v}"
                );
            }
        }
        // Product underflows to 0 -> pass@k is exactly 1, not NaN.
        assert_eq!(pass_at_k(1_000_000, 500_000, 400_000), Some(1.0));
        // Huge n with a tiny loop (min(c, k) = 1): cheap, and pass@1 = c/n.
        let p = pass_at_k(1_000_000_000, 1, 1).unwrap();
        assert!((p - 1e-9).abs() < 1e-15, "{p}");
    }

    #[test]
    fn pass_at_k_increases_and_pass_hat_k_decreases_in_k() {
        let (n, c) = (20, 7);
        for k in 1..n {
            assert!(pass_at_k(n, c, k + 1).unwrap() >= pass_at_k(n, c, k).unwrap());
            assert!(pass_hat_k(n, c, k + 1).unwrap() <= pass_hat_k(n, c, k).unwrap());
        }
    }

    #[test]
    fn metric_keys() {
        assert_eq!(metric_key(MetricKind::PassAtK, 1), "pass@1");
        assert_eq!(metric_key(MetricKind::PassAtK, 5), "pass@5");
        assert_eq!(metric_key(MetricKind::PassHatK, 5), "pass^5");
        assert_eq!(
            serde_json::to_string(&MetricKind::PassHatK).unwrap(),
            "\"pass^k\""
        );
    }
}
