//! Flags of `patchgrade perf` (and of `run --perf`): how to measure and how
//! to analyse, mapped to the library's `MeasureOptions` and
//! `AnalysisOptions`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::engine_args::EngineArgs;
use patchgrade::perf::container::MeasureOptions;
use patchgrade::perf::stats::{OutlierRule, VerdictRule};
use patchgrade::perf::{AnalysisOptions, Metric};

#[derive(Debug, Args)]
pub struct PerfArgs {
    #[command(flatten)]
    pub dataset: super::DatasetArg,
    /// Predictions file(s) (.jsonl, .json), or `gold` for gold alone. Gold
    /// is always graded and measured: it is the expert reference.
    #[arg(long, value_name = "FILE|gold", required = true)]
    pub predictions: Vec<PathBuf>,
    /// Name of this run (log folder; the measurements go to RUN_DIR/perf).
    #[arg(long, default_value = "perf")]
    pub run_id: String,
    /// Only these instance ids (space- or comma-separated, repeatable).
    #[arg(long, value_name = "ID", num_args = 1.., value_delimiter = ',')]
    pub instance_ids: Vec<String>,
    #[command(flatten)]
    pub print: super::OutputArgs,
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Which time is analysed.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum MetricArg {
    /// Elapsed time: what a user waits for; noisy on a busy machine.
    Wall,
    /// User + system CPU time of the timed process and its children.
    Cpu,
    /// The time the workload reports itself: SWE-fficiency's `Mean:` line
    /// (the mean of its `timeit` repeats, imports and setup excluded).
    Reported,
}

/// The clock of a workload's own timing.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum OwnTimerArg {
    Wall,
    Cpu,
}

/// How runtime is measured and judged (`perf`, `run --perf`).
#[derive(Debug, Args, Clone)]
pub struct MeasureArgs {
    /// Measured rounds per variant (each round runs every variant once, in
    /// a shuffled order).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub repeat: usize,
    /// Warm-up runs per variant and workload item, discarded.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub warmup: usize,
    /// CPUs of the measuring container (e.g. `1`); one CPU nobody else
    /// uses is best. Default: no pinning.
    #[arg(long, value_name = "CPUS")]
    pub cpuset_cpus: Option<String>,
    /// Significance level of each one-sided Mann–Whitney test.
    #[arg(long, default_value_t = 0.05, value_name = "A")]
    pub alpha: f64,
    /// Smallest relative change that counts (0.05: 5%); also the largest
    /// A/A noise floor an instance may have to be scored.
    #[arg(long, default_value_t = 0.05, value_name = "E")]
    pub min_effect: f64,
    /// Outlier fences: values outside [Q1 - k·IQR, Q3 + k·IQR] are dropped
    /// (SWE-Perf: 1); `none` keeps every value.
    #[arg(long, default_value = "1", value_name = "K|none", value_parser = parse_k)]
    pub outlier_k: OutlierK,
    /// The time analysed (CPU time is steadier on a shared machine).
    #[arg(long, value_enum, default_value = "cpu")]
    pub metric: MetricArg,
    /// Clock of Python workloads' own `timeit` figures (`--metric
    /// reported`): `wall` as the benchmarks time, or `cpu` (process CPU
    /// time), which other processes on a busy machine do not inflate.
    #[arg(long, value_enum, default_value = "wall")]
    pub own_timer: OwnTimerArg,
    /// Seed of the round order (and recorded in perf.json).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Time limit of one timed process, seconds.
    #[arg(long, default_value_t = 600, value_name = "SECS")]
    pub run_timeout: u64,
    /// Time limit of one instance's whole measurement, seconds.
    #[arg(long, default_value_t = 3600, value_name = "SECS")]
    pub perf_timeout: u64,
}

/// `--outlier-k`: a fence multiplier, or none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutlierK(pub Option<f64>);

fn parse_k(s: &str) -> Result<OutlierK, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(OutlierK(None));
    }
    match s.parse::<f64>() {
        Ok(k) if k.is_finite() && k >= 0.0 => Ok(OutlierK(Some(k))),
        _ => Err(format!("{s:?}: expected a number ≥ 0 or `none`")),
    }
}

impl MeasureArgs {
    /// The options of the measuring container; the spec's part is added per
    /// instance. Memory and process limits are the test containers'.
    pub fn measure_options(
        &self,
        engine: &EngineArgs,
        run_id: &str,
    ) -> Result<MeasureOptions, String> {
        if self.repeat < 2 {
            return Err("--repeat must be at least 2 (a comparison needs two rounds)".into());
        }
        let memory_bytes = patchgrade::backend::docker::parse_size(&engine.docker.memory)
            .map_err(|e| format!("--memory: {e}"))?;
        Ok(MeasureOptions {
            repeat: self.repeat,
            warmup: self.warmup,
            seed: self.seed,
            cpuset: self.cpuset_cpus.clone(),
            memory_bytes,
            pids_limit: engine.docker.pids_limit,
            run_timeout: Duration::from_secs(self.run_timeout),
            cpu_own_timer: self.own_timer == OwnTimerArg::Cpu,
            timeout: Duration::from_secs(self.perf_timeout),
            run_id: run_id.to_string(),
            ..MeasureOptions::default()
        })
    }

    pub fn analysis_options(&self) -> Result<AnalysisOptions, String> {
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            return Err(format!("--alpha {}: must be in (0, 1)", self.alpha));
        }
        if !(self.min_effect >= 0.0 && self.min_effect.is_finite()) {
            return Err(format!("--min-effect {}: must be ≥ 0", self.min_effect));
        }
        Ok(AnalysisOptions {
            metric: match self.metric {
                MetricArg::Wall => Metric::Wall,
                MetricArg::Cpu => Metric::Cpu,
                MetricArg::Reported => Metric::Reported,
            },
            outliers: OutlierRule {
                iqr_k: self.outlier_k.0,
            },
            verdict: VerdictRule {
                alpha: self.alpha,
                min_effect: self.min_effect,
            },
            ..AnalysisOptions::default()
        })
    }
}
