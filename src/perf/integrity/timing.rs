//! A patched clock (`time.perf_counter`, `timeit.default_timer`, ...)
//! reaches the figure a workload prints for itself (`--metric reported`),
//! never the times the driver takes of the whole process (its own
//! monotonic clock, `wait4`'s rusage). So a reported speedup is checked
//! against the process times of the same runs: the time the variant claims
//! to save per timed repetition, times the repetitions a process holds,
//! must show in its processes. How many repetitions a process holds is
//! read from gold's runs (its process saving ÷ its claimed saving, at
//! least 1).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::super::record::DriverOutput;
use super::super::stats::{self, Verdict};
use super::super::{AnalysisOptions, Comparison};

/// The processes must show at least this share of the claimed saving
/// times the repetitions; half leaves room for noise and for a gold
/// whose saving is partly outside the timed call.
pub const EXPLAINED: f64 = 0.5;

/// How the check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimingOutcome {
    /// Even the low end of the processes' saving covers the claim.
    Confirmed,
    /// The processes' saving interval straddles the claim: too noisy to
    /// tell (credited, said in the notes).
    Inconclusive,
    /// Even the high end falls short: the speedup is refused.
    Refuted,
}

/// Which process time the claim was checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Clock {
    Cpu,
    Wall,
}

/// A reported speedup against the process times of the same runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimingCheck {
    pub outcome: TimingOutcome,
    /// median(base) ÷ median(variant) of the reported figures.
    pub reported_speedup: f64,
    /// The same of the process times (`clock`).
    pub measured_speedup: f64,
    pub clock: Clock,
    /// median(base reported) − median(variant reported), seconds per timed
    /// repetition.
    pub claimed_saving_s: f64,
    /// Timed repetitions per process the check assumed (gold's, ≥ 1).
    pub repetitions: f64,
    /// median(base) × (1 − 1 / speedup) of the process times, with the
    /// speedup's 95% bootstrap interval.
    pub measured_saving_s: f64,
    pub measured_saving_low_s: f64,
    pub measured_saving_high_s: f64,
}

/// Per-round sums over the workload's items: (reported, cpu, wall).
fn per_round(out: &DriverOutput, name: &str) -> Vec<(Option<f64>, f64, f64)> {
    let mut rounds: BTreeMap<usize, (Option<f64>, f64, f64)> = BTreeMap::new();
    for r in out.runs.iter().filter(|r| r.variant == name) {
        let e = rounds.entry(r.round).or_insert((Some(0.0), 0.0, 0.0));
        e.0 = e.0.zip(r.reported_s).map(|(a, b)| a + b);
        e.1 += r.cpu_s;
        e.2 += r.wall_s;
    }
    rounds.into_values().collect()
}

/// The check of `variant` against `base` when its reported figures claim
/// a speedup (`cmp`, the comparison under `--metric reported`); `None`
/// when nothing is claimed. `cpu_clock`: the workload's own timer counted
/// CPU time (`--own-timer cpu`), so only CPU time can show the saving;
/// otherwise a wall-clock saving (a workload that waits) counts too.
/// `repetitions`: timed repetitions per process ([`repetitions`]).
pub fn check(
    base: &str,
    variant: &str,
    out: &DriverOutput,
    cmp: &Comparison,
    cpu_clock: bool,
    repetitions: f64,
    opts: &AnalysisOptions,
) -> Option<TimingCheck> {
    if cmp.verdict != Verdict::Faster {
        return None;
    }
    let (b, v) = (per_round(out, base), per_round(out, variant));
    let reported =
        |xs: &[(Option<f64>, f64, f64)]| -> Option<Vec<f64>> { xs.iter().map(|x| x.0).collect() };
    let kept = |xs: Vec<f64>| {
        stats::filter_outliers(&xs, opts.outliers)
            .ok()
            .map(|f| f.kept)
    };
    let claimed =
        stats::median(&kept(reported(&b)?)?).ok()? - stats::median(&kept(reported(&v)?)?).ok()?;
    if claimed <= 0.0 {
        return None;
    }
    let clocks: &[Clock] = if cpu_clock {
        &[Clock::Cpu]
    } else {
        &[Clock::Cpu, Clock::Wall]
    };
    // The most lenient clock: the one whose saving reaches furthest.
    let mut best: Option<(Clock, f64, [f64; 3])> = None;
    for &clock in clocks {
        let pick = |xs: &[(Option<f64>, f64, f64)]| -> Vec<f64> {
            xs.iter()
                .map(|x| if clock == Clock::Cpu { x.1 } else { x.2 })
                .collect()
        };
        let (bt, vt) = (kept(pick(&b))?, kept(pick(&v))?);
        let ratio = stats::median_ratio_ci(&bt, &vt, opts.resamples, opts.bootstrap_seed).ok()?;
        let base_median = stats::median(&bt).ok()?;
        let saving = |s: f64| base_median * (1.0 - 1.0 / s);
        let s = [saving(ratio.low), saving(ratio.point), saving(ratio.high)];
        if best.as_ref().is_none_or(|(_, _, o)| s[2] > o[2]) {
            best = Some((clock, ratio.point, s));
        }
    }
    let (clock, measured_speedup, [low, point, high]) = best?;
    let expected = EXPLAINED * claimed * repetitions;
    let outcome = if high < expected {
        TimingOutcome::Refuted
    } else if low < expected {
        TimingOutcome::Inconclusive
    } else {
        TimingOutcome::Confirmed
    };
    Some(TimingCheck {
        outcome,
        reported_speedup: cmp.speedup.point,
        measured_speedup,
        clock,
        claimed_saving_s: claimed,
        repetitions,
        measured_saving_s: point,
        measured_saving_low_s: low,
        measured_saving_high_s: high,
    })
}

impl std::fmt::Display for TimingCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let clock = match self.clock {
            Clock::Cpu => "CPU",
            Clock::Wall => "wall",
        };
        write!(
            f,
            "reported speedup {:.1}x, process {clock} time {:.2}x: processes saved {:.4} s [{:.4}, {:.4}]; claimed {:.4} s per timed repetition x {:.1}",
            self.reported_speedup,
            self.measured_speedup,
            self.measured_saving_s,
            self.measured_saving_low_s,
            self.measured_saving_high_s,
            self.claimed_saving_s,
            self.repetitions
        )
    }
}

/// Timed repetitions per process, from gold's check at one repetition
/// (`gold`): the low end of its process saving ÷ its claimed saving, at
/// least 1. `Err` when gold's own claim is not in its process times:
/// then the workload's repetitions likely depend on its speed (timeit's
/// `autorange`) and no variant can be checked this way.
pub fn repetitions(gold: Option<&TimingCheck>) -> Result<f64, String> {
    match gold {
        None => Ok(1.0),
        Some(g) if g.outcome == TimingOutcome::Refuted => Err(format!(
            "timing check not applicable: gold's own {g}; the workload's timed repetitions may depend on its speed"
        )),
        Some(g) => Ok((g.measured_saving_low_s / g.claimed_saving_s).max(1.0)),
    }
}
