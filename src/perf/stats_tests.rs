//! Unit tests of `perf::stats` against values computed by scipy 1.17.1 /
//! numpy 2.4.6 (the snippets that produced them are quoted above each test).

use super::*;

const TOL: f64 = 1e-9;

fn close(a: f64, b: f64, what: &str) {
    assert!((a - b).abs() <= TOL, "{what}: got {a}, expected {b}");
}

// Fixed samples (no ties).
const X: [f64; 10] = [
    0.512, 0.498, 0.530, 0.505, 0.521, 0.540, 0.509, 0.517, 0.533, 0.501,
];
const Y: [f64; 10] = [
    0.470, 0.455, 0.492, 0.468, 0.481, 0.459, 0.476, 0.463, 0.488, 0.495,
];
const Z: [f64; 5] = [0.3, 0.7, 0.1, 0.9, 0.5];
const W: [f64; 7] = [0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4];
const BIG_A: [f64; 20] = [
    1.000062, 1.014937, 0.986293, 0.95547, 0.977266, 0.950418, 1.003007, 1.067011, 0.97539,
    0.968976, 1.024492, 1.017844, 1.005271, 0.953477, 0.998537, 1.034765, 0.932789, 0.977119,
    0.904939, 0.935523,
];
const BIG_B: [f64; 20] = [
    0.877913, 0.958245, 0.906628, 0.983563, 0.977838, 0.960653, 0.844162, 0.943065, 0.967575,
    0.975665, 0.893493, 0.946112, 0.921074, 0.929558, 1.023045, 0.929623, 0.968374, 1.014219,
    0.94082, 0.964415,
];
// With ties.
const T1: [f64; 8] = [1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 4.0, 5.0];
const T2: [f64; 7] = [2.0, 3.0, 3.0, 4.0, 6.0, 6.0, 7.0];

use Alternative::{Greater, Less, TwoSided};
use MwuMethod::{Asymptotic, Exact};

/// x, y, alternative, method, scipy's U, scipy's p.
type MwuCase<'a> = (&'a [f64], &'a [f64], Alternative, MwuMethod, f64, f64);

/// Produced by:
/// ```python
/// from scipy.stats import mannwhitneyu
/// for name, (a, b) in [("xy", (X, Y)), ("zw", (Z, W)), ("yx", (Y, X)), ("big", (BIG_A, BIG_B))]:
///     for alt in ["greater", "less", "two-sided"]:
///         for m in ["exact", "asymptotic"]:
///             r = mannwhitneyu(a, b, alternative=alt, method=m)
///             print(name, alt, m, repr(float(r.statistic)), repr(float(r.pvalue)))
/// ```
/// (BIG_A/BIG_B: `np.round(np.random.default_rng(7).normal(1.0, 0.05, 20), 6)`
/// and `normal(0.97, 0.05, 20)` from the same generator, printed and pasted.)
#[test]
fn mann_whitney_matches_scipy_without_ties() {
    #[rustfmt::skip]
    let cases: &[MwuCase] = &[
        (&X, &Y, Greater, Exact, 100.0, 5.412544112234515e-06),
        (&X, &Y, Greater, Asymptotic, 100.0, 9.133589555477501e-05),
        (&X, &Y, Less, Exact, 100.0, 1.0),
        (&X, &Y, Less, Asymptotic, 100.0, 0.9999325785388228),
        (&X, &Y, TwoSided, Exact, 100.0, 1.082508822446903e-05),
        (&X, &Y, TwoSided, Asymptotic, 100.0, 0.00018267179110955002),
        (&Z, &W, Greater, Exact, 10.0, 0.898989898989899),
        (&Z, &W, Greater, Asymptotic, 10.0, 0.9030617846289687),
        (&Z, &W, Less, Exact, 10.0, 0.13383838383838387),
        (&Z, &W, Less, Asymptotic, 10.0, 0.1278115537732063),
        (&Z, &W, TwoSided, Exact, 10.0, 0.26767676767676774),
        (&Z, &W, TwoSided, Asymptotic, 10.0, 0.2556231075464126),
        (&Y, &X, Greater, Exact, 0.0, 1.0),
        (&Y, &X, Greater, Asymptotic, 0.0, 0.9999325785388228),
        (&Y, &X, Less, Exact, 0.0, 5.412544112234515e-06),
        (&Y, &X, Less, Asymptotic, 0.0, 9.133589555477501e-05),
        (&Y, &X, TwoSided, Exact, 0.0, 1.082508822446903e-05),
        (&Y, &X, TwoSided, Asymptotic, 0.0, 0.00018267179110955002),
        (&BIG_A, &BIG_B, Greater, Exact, 297.0, 0.0039976909445401),
        (&BIG_A, &BIG_B, Greater, Asymptotic, 297.0, 0.004522698392502755),
        (&BIG_A, &BIG_B, Less, Exact, 297.0, 0.9963345914378463),
        (&BIG_A, &BIG_B, Less, Asymptotic, 297.0, 0.9958225863321778),
        (&BIG_A, &BIG_B, TwoSided, Exact, 297.0, 0.0079953818890802),
        (&BIG_A, &BIG_B, TwoSided, Asymptotic, 297.0, 0.00904539678500551),
    ];
    for (i, &(x, y, alt, m, u, p)) in cases.iter().enumerate() {
        let r = mann_whitney_u(x, y, alt, m, true).unwrap();
        assert_eq!(r.u, u, "case {i}: U");
        close(r.p, p, &format!("case {i} ({alt:?}, {m:?})"));
    }
}

/// Produced by:
/// ```python
/// t1 = [1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 4.0, 5.0]; t2 = [2.0, 3.0, 3.0, 4.0, 6.0, 6.0, 7.0]
/// for alt in ["greater", "less", "two-sided"]:
///     print(mannwhitneyu(t1, t2, alternative=alt, method="asymptotic"))
///     print(mannwhitneyu(t1, t2, alternative=alt, method="asymptotic", use_continuity=False))
/// ```
#[test]
fn mann_whitney_asymptotic_matches_scipy_with_ties() {
    #[rustfmt::skip]
    let cases = [
        (Greater, true, 0.9023681284360598),
        (Greater, false, 0.8918251046801893),
        (Less, true, 0.11951363615716526),
        (Less, false, 0.10817489531981067),
        (TwoSided, true, 0.23902727231433052),
        (TwoSided, false, 0.21634979063962134),
    ];
    for (alt, cc, p) in cases {
        let r = mann_whitney_u(&T1, &T2, alt, Asymptotic, cc).unwrap();
        assert_eq!(r.u, 17.5);
        close(r.p, p, &format!("ties {alt:?} continuity={cc}"));
    }
    assert_eq!(
        mann_whitney_u(&T1, &T2, Greater, Exact, true),
        Err(StatsError::TiesInExact { ties: 12 })
    );
    assert_eq!(auto_method(&T1, &T2), Asymptotic);
    assert_eq!(auto_method(&X, &Y), Exact);
}

#[test]
fn exact_distribution_sums_to_one_and_is_symmetric() {
    // P(U >= 0) = 1; P(U >= u) + P(U >= mn - u + 1) = 1 by symmetry.
    for (m, n) in [(1, 1), (3, 4), (10, 10), (20, 25), (60, 60)] {
        close(exact_sf(0, m, n), 1.0, "sf(0)");
        for u in [1, m * n / 3, m * n / 2, m * n] {
            close(
                exact_sf(u, m, n) + exact_sf(m * n - u + 1, m, n),
                1.0,
                "symmetry",
            );
        }
    }
    // m = n = 2: U takes 0..=4 with counts 1,1,2,1,1 (of C(4,2) = 6).
    close(exact_sf(3, 2, 2), 2.0 / 6.0, "2x2");
    let big = vec![0.0; 61];
    assert!(matches!(
        mann_whitney_u(&big, &big, Greater, Exact, true),
        Err(StatsError::TiesInExact { .. })
    ));
    let a: Vec<f64> = (0..61).map(f64::from).collect();
    let b: Vec<f64> = (100..161).map(f64::from).collect();
    assert_eq!(
        mann_whitney_u(&a, &b, Greater, Exact, true),
        Err(StatsError::TooLargeForExact { n: 122, max: 120 })
    );
}

/// `scipy.stats.norm.sf(z)` for each z.
#[test]
fn normal_tail_matches_scipy() {
    #[rustfmt::skip]
    let cases = [
        (-3.0, 0.9986501019683699), (-0.5, 0.6914624612740131), (0.0, 0.5),
        (0.3, 0.3820885778110474), (1.96, 0.024997895148220435), (2.9, 0.0018658133003840375),
        (3.1, 0.0009676032132183563), (5.0, 2.866515718791933e-07), (8.0, 6.22096057427174e-16),
    ];
    for (z, p) in cases {
        assert!(
            (normal_sf(z) - p).abs() <= 1e-15 + 1e-12 * p,
            "sf({z}) = {}, expected {p}",
            normal_sf(z)
        );
    }
}

/// ```python
/// x = X + [0.9, 0.2]
/// q1, q3 = np.percentile(x, [25, 75]); i = q3 - q1
/// print(q1, q3, [v for v in x if q1 - i <= v <= q3 + i])
/// # 0.504 0.53075 [the ten values of X]
/// ```
#[test]
fn outlier_filter_is_swe_perfs() {
    let mut x = X.to_vec();
    x.extend([0.9, 0.2]);
    let f = filter_outliers(&x, OutlierRule { iqr_k: Some(1.0) }).unwrap();
    close(f.low, 0.504 - (0.53075 - 0.504), "low fence");
    close(f.high, 0.53075 + (0.53075 - 0.504), "high fence");
    assert_eq!(f.kept, X.to_vec());
    assert_eq!(f.dropped, vec![0.9, 0.2]);
    let none = filter_outliers(&x, OutlierRule { iqr_k: None }).unwrap();
    assert_eq!(none.kept, x);
    assert!(none.dropped.is_empty());
    // Tukey's k = 1.5 keeps more than k = 1 on the same data.
    let y = [1.0, 1.1, 1.2, 1.3, 1.4, 1.75];
    assert_eq!(
        filter_outliers(&y, OutlierRule { iqr_k: Some(1.0) })
            .unwrap()
            .dropped,
        vec![1.75]
    );
    assert!(filter_outliers(&y, OutlierRule { iqr_k: Some(1.5) })
        .unwrap()
        .dropped
        .is_empty());
    assert_eq!(
        filter_outliers(&[], OutlierRule::default()),
        Err(StatsError::Empty {
            what: "outlier filter"
        })
    );
}

#[test]
fn median_and_quartiles() {
    assert_eq!(median(&[3.0, 1.0, 2.0]).unwrap(), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]).unwrap(), 2.5);
    // numpy.percentile([1, 2, 3, 4, 5, 6, 7, 8], [25, 75]) -> 2.75, 6.25
    let q = quartiles(&[8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]).unwrap();
    assert_eq!(q, (2.75, 6.25));
    assert_eq!(
        median(&[1.0, f64::NAN]),
        Err(StatsError::NonFinite {
            what: "median",
            index: 1
        })
    );
}

/// The same resampling scheme in Python (SplitMix64 and Lemire's bounded
/// draw ported line by line, numpy percentiles), giving identical draws:
/// ```python
/// M = (1 << 64) - 1
/// class SplitMix64:
///     def __init__(self, seed): self.s = seed & M
///     def next_u64(self):
///         self.s = (self.s + 0x9E3779B97F4A7C15) & M
///         z = self.s
///         z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
///         z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
///         return z ^ (z >> 31)
///     def below(self, bound):
///         m = self.next_u64() * bound
///         if (m & M) < bound:
///             t = ((-bound) & M) % bound
///             while (m & M) < t:
///                 m = self.next_u64() * bound
///         return m >> 64
/// def median_ratio_ci(num, den, b, seed):
///     rng = SplitMix64(seed); r = []
///     for _ in range(b):
///         a = [num[rng.below(len(num))] for _ in num]
///         d = [den[rng.below(len(den))] for _ in den]
///         r.append(np.percentile(a, 50) / np.percentile(d, 50))
///     lo, hi = np.percentile(r, [2.5, 97.5])
///     return np.median(num) / np.median(den), lo, hi
/// print(median_ratio_ci(X, V, 2000, 0x5EED_CAFE_F00D_2026))
/// print(median_ratio_ci(X, V, 2000, 7))
/// ```
/// (The port reproduces the reference stream of seed 0, 0xe220a8397b1dcdaf.)
#[test]
fn bootstrap_matches_the_python_reference() {
    let v = [
        0.470, 0.455, 0.492, 0.468, 0.481, 0.459, 0.476, 0.463, 0.488, 0.495, 0.472,
    ];
    let r = median_ratio_ci(&X, &v, 2000, 0x5EED_CAFE_F00D_2026).unwrap();
    close(r.point, 1.090042372881356, "point");
    close(r.low, 1.04989604989605, "low");
    close(r.high, 1.1306695464362853, "high");
    let r = median_ratio_ci(&X, &v, 2000, 7).unwrap();
    close(r.low, 1.0491803278688525, "low, seed 7");
    close(r.high, 1.1260593220338986, "high, seed 7");
    assert_eq!(
        median_ratio_ci(&X, &v, 0, 1),
        Err(StatsError::ZeroResamples)
    );
}

/// Statistical property: for samples drawn from two distributions whose
/// medians differ by a known ratio, the 95% interval covers that ratio in
/// roughly 95% of draws (percentile intervals of medians at n = 15 are a
/// little liberal, so the accepted band is 88–99%).
#[test]
fn bootstrap_interval_covers_a_known_ratio() {
    let mut rng = SplitMix64::new(99);
    // Log-normal-ish noise around median 1.0 (base) and 1/1.2 (variant):
    // the true median ratio is exactly 1.2.
    let mut draw = |scale: f64, n: usize| -> Vec<f64> {
        (0..n)
            .map(|_| {
                // Sum of uniforms: symmetric around 0, so the median of
                // exp(noise) is exp(0) = 1.
                let e: f64 = (0..4).map(|_| rng.next_f64() - 0.5).sum::<f64>() * 0.1;
                scale * e.exp()
            })
            .collect()
    };
    let trials = 300;
    let mut covered = 0;
    for t in 0..trials {
        let base = draw(1.0, 15);
        let var = draw(1.0 / 1.2, 15);
        if median_ratio_ci(&base, &var, 1000, t).unwrap().contains(1.2) {
            covered += 1;
        }
    }
    let rate = covered as f64 / trials as f64;
    assert!((0.88..=0.99).contains(&rate), "coverage {rate}");
}

#[test]
fn verdicts_need_both_significance_and_size() {
    let rule = VerdictRule::default();
    assert_eq!(verdict(1.3, 0.001, 0.999, rule), Verdict::Faster);
    // Significant but smaller than the minimum effect.
    assert_eq!(
        verdict(1.03, 0.001, 0.999, rule),
        Verdict::NoMeasurableChange
    );
    // Large but not significant.
    assert_eq!(verdict(1.3, 0.2, 0.8, rule), Verdict::NoMeasurableChange);
    assert_eq!(verdict(0.8, 0.999, 0.001, rule), Verdict::Slower);
    assert_eq!(
        verdict(0.96, 0.999, 0.001, rule),
        Verdict::NoMeasurableChange
    );
    // The boundary: exactly 5% faster counts.
    assert_eq!(verdict(1.05, 0.01, 0.99, rule), Verdict::Faster);
}

#[test]
fn noise_floor_expert_ratio_and_harmonic_mean() {
    let aa = RatioInterval {
        point: 1.0,
        low: 0.97,
        high: 1.02,
        level: 0.95,
        resamples: 10,
        seed: 0,
    };
    close(noise_floor(&aa), 0.03, "floor");
    assert!(!too_noisy(0.03, VerdictRule::default()));
    assert!(too_noisy(0.08, VerdictRule::default()));
    close(relative_to_expert(1.5, 3.0), 0.5, "SR");
    assert!(reaches_expert(2.9, 3.0, 0.95));
    assert!(!reaches_expert(2.8, 3.0, 0.95));
    // scipy.stats.hmean([1, 2, 4]) = 1.7142857142857142
    close(
        harmonic_mean(&[1.0, 2.0, 4.0]).unwrap(),
        1.7142857142857142,
        "hmean",
    );
    assert_eq!(harmonic_mean(&[]), None);
    assert_eq!(harmonic_mean(&[1.0, 0.0]), None);
}
