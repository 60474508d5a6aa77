//! Efficiency: what a patch does to the runtime of an instance's workload.
//!
//! - [`workload`]: which processes are timed for an instance;
//! - [`variants`]: a checkout per variant on the host, its patch (and the
//!   test patch) applied, and the files it changes;
//! - `harness-scripts/perf/driver.py`: runs them in the container, all
//!   variants interleaved, and prints one JSON line per run;
//! - [`container`]: one container per instance holding every variant's tree;
//! - [`instance`]: all of it for one instance, ending in its perf.json record;
//! - [`pipeline`]: [`measure`], a graded run's instances one after the
//!   other under the engine, and the run's report;
//! - [`record`]: the driver's lines and perf.json, typed;
//! - [`stats`]: the statistics; [`analyse`] (here) turns measurements into
//!   per-variant statistics, verdicts and the correctness gate, and
//!   [`aggregate`] sums instances up;
//! - [`integrity`]: speedups the timed code fakes (a patched clock, results
//!   cached across runs, a fast wrong path under the benchmark) refused;
//! - [`render`]: the summary table, Markdown and SVG plots.

pub mod container;
pub mod instance;
pub mod integrity;
pub mod pipeline;
pub mod record;
pub mod render;
pub mod stats;
pub mod variants;
pub mod workload;

use std::collections::BTreeMap;

pub use pipeline::{measure, MeasureError, Measurements};

use serde::{Deserialize, Serialize};

use record::{DriverOutput, Role, VariantInfo};
use stats::{MwuMethod, OutlierRule, RatioInterval, Verdict, VerdictRule};

/// Which time of a run is analysed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Elapsed (monotonic) time of the process.
    #[default]
    Wall,
    /// User + system CPU time of the process and its waited-for children.
    Cpu,
    /// The time the workload printed for itself ([`record::RunSample::reported_s`]):
    /// what SWE-fficiency compares, without the interpreter start, imports
    /// and setup that a whole process includes.
    Reported,
}

/// How the Mann–Whitney p-value is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MwuChoice {
    /// Exact without ties (and at most 120 values), else asymptotic.
    #[default]
    Auto,
    Exact,
    Asymptotic,
}

/// Every knob of the analysis; recorded in perf.json so each figure says
/// which rules produced it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AnalysisOptions {
    pub metric: Metric,
    pub outliers: OutlierRule,
    pub verdict: VerdictRule,
    pub mwu: MwuChoice,
    pub resamples: usize,
    pub bootstrap_seed: u64,
    /// Share of the expert's speedup that counts as reaching it (GSO: 0.95).
    pub expert_fraction: f64,
}

impl Default for AnalysisOptions {
    fn default() -> Self {
        Self {
            metric: Metric::Wall,
            outliers: OutlierRule::default(),
            verdict: VerdictRule::default(),
            mwu: MwuChoice::Auto,
            resamples: 2000,
            bootstrap_seed: crate::metrics::bootstrap::DEFAULT_SEED,
            expert_fraction: 0.95,
        }
    }
}

/// Summary statistics of one variant's per-round times (the sum over the
/// workload's items in that round), after the outlier rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantStats {
    /// Per-round times, in round order (before the outlier rule).
    pub times: Vec<f64>,
    /// Times the outlier rule dropped.
    pub dropped: Vec<f64>,
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
    /// Median CPU time and peak RSS per round (all rounds).
    pub median_cpu_s: f64,
    pub max_rss_kb: u64,
    /// Runs whose exit code was not 0 (tests that fail, e.g. FAIL_TO_PASS
    /// tests at base).
    pub nonzero_exits: usize,
}

// (Also `passk::compare::Comparison`, of pass rates: the two never meet.)
/// A variant against base.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// `median(base) / median(variant)` with its bootstrap interval.
    pub speedup: RatioInterval,
    /// One-sided Mann–Whitney p: base times larger than the variant's.
    pub p_faster: f64,
    /// One-sided Mann–Whitney p: base times smaller than the variant's.
    pub p_slower: f64,
    pub method: MwuMethod,
    pub verdict: Verdict,
    /// Variant speedup ÷ gold speedup (when gold was measured and credited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative_to_expert: Option<f64>,
    /// At least `expert_fraction` of gold's speedup (when gold is
    /// measurably faster than base).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reaches_expert: Option<bool>,
}

/// Whether a variant's figures count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Status {
    /// Base and its A/A copy: references, not scored.
    Reference,
    /// Measured, correct, and the instance is quiet enough: the figures count.
    Scored,
    /// Measured but incorrect: reported, not credited.
    NotCredited { reason: String },
    /// Correct, but the speedup is not what it looks like
    /// ([`integrity`]): not credited, the evidence in
    /// [`VariantResult::integrity`].
    Suspect { reasons: Vec<integrity::Reason> },
    /// No score: too noisy, correctness unknown, or the measurement failed.
    NotScored { reason: String },
}

/// One variant's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantResult {
    pub name: String,
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<VariantStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    #[serde(flatten)]
    pub status: Status,
    /// Why the speedup is refused, with the evidence (any role).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub integrity: Vec<integrity::Refusal>,
    /// The reported speedup checked against the process times
    /// (`--metric reported`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<integrity::timing::TimingCheck>,
}

/// The analysis of one instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceAnalysis {
    /// Speedup of base against its own copy (A/A), when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aa: Option<RatioInterval>,
    /// How far the A/A interval reaches from 1.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_floor: Option<f64>,
    /// The noise floor exceeds the minimum effect: nothing is scored.
    pub too_noisy: bool,
    /// The machine was busier than its cores before or after.
    pub under_load: bool,
    pub variants: Vec<VariantResult>,
    /// Anything a reader should know (missing A/A, failed runs, ...).
    pub notes: Vec<String>,
}

/// Why a variant could not be measured: a failed build, an aborted run, or
/// (for workload scripts) a failing run; `None` when its runs are usable.
fn measurement_failure(
    name: &str,
    out: &DriverOutput,
    script_workload: bool,
    items: usize,
    repeat: usize,
    metric: Metric,
) -> Option<String> {
    if let Some(b) = out.builds.iter().find(|b| b.variant == name && !b.ok) {
        return Some(match b.exit_code {
            Some(c) if !b.timed_out => format!("build failed (exit {c})"),
            _ => "build failed (timed out or killed)".to_string(),
        });
    }
    let runs: Vec<_> = out.runs.iter().filter(|r| r.variant == name).collect();
    if let Some(r) = runs.iter().find(|r| r.aborted()) {
        return Some(format!(
            "run of {} in round {} {}",
            r.item,
            r.round,
            if r.timed_out {
                "timed out"
            } else {
                "was killed"
            }
        ));
    }
    if script_workload {
        if let Some(r) = runs.iter().find(|r| r.exit_code != Some(0)) {
            return Some(format!(
                "workload {} failed in round {} (exit {:?})",
                r.item, r.round, r.exit_code
            ));
        }
    }
    if metric == Metric::Reported {
        if let Some(r) = runs.iter().find(|r| r.reported_s.is_none()) {
            return Some(format!(
                "run of {} in round {} reported no time of its own (no `Mean:` line)",
                r.item, r.round
            ));
        }
    }
    if runs.len() != items * repeat {
        return Some(format!(
            "{} runs recorded, {} expected",
            runs.len(),
            items * repeat
        ));
    }
    None
}

fn variant_stats(
    name: &str,
    out: &DriverOutput,
    opts: &AnalysisOptions,
) -> Result<VariantStats, stats::StatsError> {
    let mut per_round: BTreeMap<usize, (f64, f64, u64)> = BTreeMap::new();
    let mut nonzero = 0;
    for r in out.runs.iter().filter(|r| r.variant == name) {
        let e = per_round.entry(r.round).or_insert((0.0, 0.0, 0));
        e.0 += match opts.metric {
            Metric::Wall => r.wall_s,
            Metric::Cpu => r.cpu_s,
            // Checked present by `measurement_failure` before any statistic.
            Metric::Reported => r.reported_s.unwrap_or(f64::NAN),
        };
        e.1 += r.cpu_s;
        e.2 = e.2.max(r.max_rss_kb);
        if r.exit_code != Some(0) {
            nonzero += 1;
        }
    }
    let times: Vec<f64> = per_round.values().map(|v| v.0).collect();
    let cpu: Vec<f64> = per_round.values().map(|v| v.1).collect();
    let f = stats::filter_outliers(&times, opts.outliers)?;
    let (q1, q3) = stats::quartiles(&f.kept)?;
    Ok(VariantStats {
        median: stats::median(&f.kept)?,
        q1,
        q3,
        median_cpu_s: stats::median(&cpu)?,
        max_rss_kb: per_round.values().map(|v| v.2).max().unwrap_or(0),
        nonzero_exits: nonzero,
        dropped: f.dropped,
        times,
    })
}

fn compare(
    base: &VariantStats,
    v: &VariantStats,
    opts: &AnalysisOptions,
) -> Result<Comparison, stats::StatsError> {
    let kept = |s: &VariantStats| stats::filter_outliers(&s.times, opts.outliers).map(|f| f.kept);
    let (b, x) = (kept(base)?, kept(v)?);
    let method = match opts.mwu {
        MwuChoice::Auto => stats::auto_method(&b, &x),
        MwuChoice::Exact => MwuMethod::Exact,
        MwuChoice::Asymptotic => MwuMethod::Asymptotic,
    };
    let p = |alt| stats::mann_whitney_u(&b, &x, alt, method, true).map(|m| m.p);
    let p_faster = p(stats::Alternative::Greater)?;
    let p_slower = p(stats::Alternative::Less)?;
    let speedup = stats::median_ratio_ci(&b, &x, opts.resamples, opts.bootstrap_seed)?;
    Ok(Comparison {
        verdict: stats::verdict(speedup.point, p_faster, p_slower, opts.verdict),
        speedup,
        p_faster,
        p_slower,
        method,
        relative_to_expert: None,
        reaches_expert: None,
    })
}

/// Measurements in, per-variant statistics, verdicts and scores out.
///
/// `variants` must name base (exactly one); a [`Role::BaseCopy`] variant
/// gives the A/A noise floor. `script_workload`: the workload is a script
/// (a failing run is a broken measurement) rather than tests (where a test
/// failing at base is expected). Per round, a variant's time is the sum of
/// its items' times; outliers are dropped per [`AnalysisOptions::outliers`]
/// before any statistic.
pub fn analyse(
    variants: &[VariantInfo],
    out: &DriverOutput,
    items: usize,
    repeat: usize,
    script_workload: bool,
    opts: &AnalysisOptions,
) -> InstanceAnalysis {
    let mut notes = Vec::new();
    let under_load = out.fingerprint.under_load();
    if under_load {
        notes.push("measured under load: the load average exceeded the cores".to_string());
    }
    let mut stats_of: BTreeMap<&str, Result<VariantStats, String>> = BTreeMap::new();
    for v in variants {
        let s = match measurement_failure(&v.name, out, script_workload, items, repeat, opts.metric)
        {
            Some(reason) => Err(reason),
            None => variant_stats(&v.name, out, opts).map_err(|e| e.to_string()),
        };
        stats_of.insert(&v.name, s);
    }
    let base = variants.iter().find(|v| v.role == Role::Base);
    let base_stats = base.and_then(|b| stats_of[b.name.as_str()].as_ref().ok());
    let base_problem = match (base, base_stats) {
        (None, _) => Some("no base variant".to_string()),
        (Some(b), None) => Some(format!(
            "base could not be measured: {}",
            stats_of[b.name.as_str()]
                .as_ref()
                .err()
                .cloned()
                .unwrap_or_default()
        )),
        _ => None,
    };
    if let Some(p) = &base_problem {
        notes.push(p.clone());
    }
    let mut comparisons: BTreeMap<&str, Result<Comparison, String>> = BTreeMap::new();
    if let Some(bs) = base_stats {
        for v in variants.iter().filter(|v| v.role != Role::Base) {
            let c = match &stats_of[v.name.as_str()] {
                Ok(s) => compare(bs, s, opts).map_err(|e| e.to_string()),
                Err(e) => Err(e.clone()),
            };
            comparisons.insert(&v.name, c);
        }
    }
    // Tests as the workload: a test failing in one variant and passing in
    // another is timed alike; say so where it happens.
    if let Some(bs) = base_stats {
        for v in variants.iter().filter(|v| v.role != Role::Base) {
            if let Some(Ok(s)) = stats_of.get(v.name.as_str()) {
                if s.nonzero_exits != bs.nonzero_exits {
                    notes.push(format!(
                        "{}: {} runs exited non-zero (base: {}); failing and passing runs are timed alike",
                        v.name, s.nonzero_exits, bs.nonzero_exits
                    ));
                }
            }
        }
    }
    let aa = variants
        .iter()
        .find(|v| v.role == Role::BaseCopy)
        .and_then(|v| comparisons.get(v.name.as_str()))
        .and_then(|c| c.as_ref().ok())
        .map(|c| c.speedup.clone());
    if aa.is_none() && base_problem.is_none() {
        notes.push("no A/A measurement: the noise floor is unknown".to_string());
    }
    let noise_floor = aa.as_ref().map(stats::noise_floor);
    let too_noisy = noise_floor.is_some_and(|f| stats::too_noisy(f, opts.verdict));
    if too_noisy {
        notes.push(format!(
            "too noisy: the A/A noise floor {:.1}% exceeds the minimum effect {:.1}%; nothing is scored",
            100.0 * noise_floor.unwrap_or(0.0),
            100.0 * opts.verdict.min_effect
        ));
    }
    let compared: BTreeMap<&str, &Comparison> = comparisons
        .iter()
        .filter_map(|(k, c)| c.as_ref().ok().map(|c| (*k, c)))
        .collect();
    let mut checks = integrity::assess(variants, out, script_workload, &compared, opts);
    notes.append(&mut checks.notes);
    // Gold's speedup is the expert reference when gold counts.
    let gold = variants.iter().find(|v| v.role == Role::Gold);
    let gold_speedup = gold.and_then(|g| {
        let ok = g.resolved == Some(true) && !too_noisy && !checks.refusals.contains_key(&g.name);
        comparisons
            .get(g.name.as_str())
            .and_then(|c| c.as_ref().ok())
            .filter(|_| ok)
            .map(|c| (c.speedup.point, c.verdict == Verdict::Faster))
    });
    let mut results = Vec::new();
    for v in variants {
        let stats = stats_of[v.name.as_str()].as_ref().ok().cloned();
        let mut comparison = comparisons
            .get(v.name.as_str())
            .and_then(|c| c.as_ref().ok())
            .cloned();
        let measured_problem = comparisons
            .get(v.name.as_str())
            .and_then(|c| c.as_ref().err())
            .cloned()
            .or_else(|| stats_of[v.name.as_str()].as_ref().err().cloned());
        let status = match v.role {
            Role::Base | Role::BaseCopy => Status::Reference,
            _ if v.resolved == Some(false) => Status::NotCredited {
                reason: "did not resolve the instance".into(),
            },
            _ if checks.refusals.contains_key(&v.name) => Status::Suspect {
                reasons: checks.refusals[&v.name]
                    .iter()
                    .map(|r| r.reason())
                    .collect(),
            },
            _ => {
                if let Some(p) = measured_problem.or_else(|| base_problem.clone()) {
                    Status::NotScored { reason: p }
                } else if too_noisy {
                    Status::NotScored {
                        reason: "instance too noisy".into(),
                    }
                } else if v.resolved.is_none() {
                    Status::NotScored {
                        reason: "correctness unknown".into(),
                    }
                } else {
                    Status::Scored
                }
            }
        };
        if let (Some(c), Some((g, gold_faster))) = (comparison.as_mut(), gold_speedup) {
            if matches!(v.role, Role::Gold | Role::Candidate) {
                c.relative_to_expert = Some(stats::relative_to_expert(c.speedup.point, g));
                c.reaches_expert = gold_faster.then(|| {
                    status == Status::Scored
                        && stats::reaches_expert(c.speedup.point, g, opts.expert_fraction)
                });
            }
        }
        results.push(VariantResult {
            name: v.name.clone(),
            role: v.role,
            model: v.model.clone(),
            stats,
            comparison,
            status,
            integrity: checks.refusals.remove(&v.name).unwrap_or_default(),
            timing: checks.timing.remove(&v.name),
        });
    }
    InstanceAnalysis {
        aa,
        noise_floor,
        too_noisy,
        under_load,
        variants: results,
        notes,
    }
}

/// Counts over instances for one group of variants (a model's candidates,
/// or gold).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Aggregate {
    /// Variants in the group, scored or not.
    pub variants: usize,
    pub scored: usize,
    pub not_credited: usize,
    /// Of the not credited: refused by the integrity checks.
    #[serde(default)]
    pub suspect: usize,
    pub not_scored: usize,
    /// Verdicts among the scored.
    pub faster: usize,
    pub slower: usize,
    pub unchanged: usize,
    /// Shares of the scored (None with nothing scored).
    pub share_faster: Option<f64>,
    pub share_slower: Option<f64>,
    /// Share of the scored that reach the expert (of those with a reference).
    pub share_reaching_expert: Option<f64>,
    /// Harmonic mean of speedup ÷ gold speedup over the scored variants.
    pub hmean_relative_to_expert: Option<f64>,
    /// The same over every variant with a gold reference, a variant that is
    /// not credited counting as no change (speedup 1.0), as if its patch had
    /// not been applied.
    pub hmean_relative_to_expert_all: Option<f64>,
}

/// Aggregates per group: `"gold"` for gold, the model name (or
/// `"candidate"`) for candidates.
pub fn aggregate<'a>(
    instances: impl IntoIterator<Item = &'a InstanceAnalysis>,
) -> BTreeMap<String, Aggregate> {
    #[derive(Default)]
    struct Acc {
        agg: Aggregate,
        reach: (usize, usize),
        sr: Vec<f64>,
        sr_all: Vec<f64>,
    }
    let mut groups: BTreeMap<String, Acc> = BTreeMap::new();
    for inst in instances {
        let gold = inst
            .variants
            .iter()
            .find(|v| v.role == Role::Gold && v.status == Status::Scored)
            .and_then(|v| v.comparison.as_ref())
            .map(|c| c.speedup.point);
        for v in inst
            .variants
            .iter()
            .filter(|v| matches!(v.role, Role::Gold | Role::Candidate))
        {
            let key = match v.role {
                Role::Gold => "gold".to_string(),
                _ => v.model.clone().unwrap_or_else(|| "candidate".into()),
            };
            let acc = groups.entry(key).or_default();
            acc.agg.variants += 1;
            match &v.status {
                Status::Scored => {
                    acc.agg.scored += 1;
                    let c = v.comparison.as_ref().expect("scored variants are compared");
                    match c.verdict {
                        Verdict::Faster => acc.agg.faster += 1,
                        Verdict::Slower => acc.agg.slower += 1,
                        Verdict::NoMeasurableChange => acc.agg.unchanged += 1,
                    }
                    if let Some(r) = c.reaches_expert {
                        acc.reach.1 += 1;
                        acc.reach.0 += usize::from(r);
                    }
                    if let Some(sr) = c.relative_to_expert {
                        acc.sr.push(sr);
                        acc.sr_all.push(sr);
                    }
                }
                Status::NotCredited { .. } | Status::Suspect { .. } => {
                    acc.agg.not_credited += 1;
                    acc.agg.suspect += usize::from(matches!(v.status, Status::Suspect { .. }));
                    if let Some(g) = gold {
                        acc.sr_all.push(1.0 / g);
                    }
                }
                Status::NotScored { .. } | Status::Reference => acc.agg.not_scored += 1,
            }
        }
    }
    groups
        .into_iter()
        .map(|(k, mut a)| {
            let n = a.agg.scored as f64;
            if a.agg.scored > 0 {
                a.agg.share_faster = Some(a.agg.faster as f64 / n);
                a.agg.share_slower = Some(a.agg.slower as f64 / n);
            }
            if a.reach.1 > 0 {
                a.agg.share_reaching_expert = Some(a.reach.0 as f64 / a.reach.1 as f64);
            }
            a.agg.hmean_relative_to_expert = stats::harmonic_mean(&a.sr);
            a.agg.hmean_relative_to_expert_all = stats::harmonic_mean(&a.sr_all);
            (k, a.agg)
        })
        .collect()
}

/// GSO's Opt@K for one group (a model's candidates, keyed as in
/// [`aggregate`]): over the instances where gold is measurably faster, the
/// unbiased pass@k estimator with "reaches the expert" as the success (an
/// attempt that is not credited or not scored is a failure). `None` when no
/// instance has a reference or one has fewer than `k` attempts.
pub fn opt_at_k<'a>(
    instances: impl IntoIterator<Item = &'a InstanceAnalysis>,
    group: &str,
    k: u64,
) -> Option<f64> {
    let mut values = Vec::new();
    for inst in instances {
        let attempts: Vec<&VariantResult> = inst
            .variants
            .iter()
            .filter(|v| match v.role {
                Role::Gold => group == "gold",
                Role::Candidate => v.model.as_deref().unwrap_or("candidate") == group,
                _ => false,
            })
            .collect();
        let has_reference = inst.variants.iter().any(|v| {
            v.comparison
                .as_ref()
                .is_some_and(|c| c.reaches_expert.is_some())
        });
        if attempts.is_empty() || !has_reference {
            continue;
        }
        let c = attempts
            .iter()
            .filter(|v| {
                v.comparison
                    .as_ref()
                    .is_some_and(|c| c.reaches_expert == Some(true))
            })
            .count();
        values.push(crate::metrics::estimators::pass_at_k(
            attempts.len() as u64,
            c as u64,
            k,
        )?);
    }
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

#[cfg(test)]
#[path = "analysis_tests.rs"]
mod tests;
