//! perf.json: what one instance's measurement recorded, typed. The driver's
//! JSON lines are read into [`DriverOutput`]; the analysis and the settings
//! that produced it go beside them in [`PerfRecord`].

use serde::{Deserialize, Serialize};

use super::workload::WorkloadSource;
use super::{AnalysisOptions, InstanceAnalysis};

/// Version of the perf.json layout; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// The driver's output could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecordError {
    #[error("driver output line {line}: {reason}")]
    Line { line: usize, reason: String },
    #[error("driver output: {0}")]
    Incomplete(String),
}

/// The machine the runs were measured on, and how busy it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub cpu_model: String,
    pub cores: Option<u32>,
    /// CPUs the driver may run on (the container's cpuset).
    pub cpus_allowed: Option<u32>,
    pub kernel: String,
    /// The container's Python that ran the driver.
    pub python: String,
    /// 1, 5 and 15-minute load averages from /proc/loadavg (host-wide).
    pub load_before: Option<Vec<f64>>,
    pub load_after: Option<Vec<f64>>,
    /// The driver's own peak RSS: the floor of every run's peak RSS.
    #[serde(default)]
    pub driver_rss_kb: Option<u64>,
    /// `available`, or `unavailable: <reason>`.
    pub instructions: String,
    /// The clock of Python workloads' `timeit` (`wall`, or `cpu`: see
    /// `MeasureOptions::cpu_own_timer`); absent from older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_timer: Option<String>,
    /// Which integrity defences the driver had (absent from older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defences: Option<DefenceSetup>,
}

/// The driver's integrity defences as they worked in the container
/// (harness-scripts/perf/defences.py).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DefenceSetup {
    /// A fresh TMPDIR and HOME per run.
    pub clean_state: bool,
    /// The variant's tree renamed to /testbed for its runs (no symlink).
    pub swap: bool,
    /// `works`, or `unavailable: <why>`: whether reads of left files show.
    pub atime: String,
    /// `subreaper`, `off`, or `unavailable: <why>`.
    pub reaper: String,
    /// Shared folders swept after every run (besides the tree).
    pub sweep_roots: Vec<String>,
    pub final_sweep: bool,
}

/// Which run of which variant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RunRef {
    pub variant: String,
    pub kind: RunKind,
    pub round: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    Warmup,
    Run,
}

impl std::fmt::Display for RunRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            RunKind::Warmup => "warm-up",
            RunKind::Run => "round",
        };
        write!(f, "{} {kind} {}", self.variant, self.round)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Created,
    Changed,
    Deleted,
}

/// A file a run created, changed or deleted (bytecode caches aside).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftFile {
    /// Tree files under /testbed, whichever variant's tree it was.
    pub path: String,
    pub change: Change,
}

/// A file an earlier run left that this run read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateRead {
    pub path: String,
    pub left_by: RunRef,
}

/// A process that left the run's process group and was still running
/// after the run; killed before the next run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftProcess {
    pub pid: u32,
    pub cmdline: String,
}

/// What the driver's defences saw around one run (none in older records).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunEvidence {
    /// sha256 of the run's stdout, normalised (defences.py `output_digest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_sha256: Option<String>,
    /// The normalised output's beginning, the first time its digest shows
    /// for this item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_sample: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_state: Vec<LeftFile>,
    /// Left files beyond those listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub left_state_more: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_state: Vec<StateRead>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub read_state_more: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_processes: Vec<LeftProcess>,
    /// Seconds the defences took after this run (untimed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrity_s: Option<f64>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The sweep of the whole root file system after the last run: files
/// changed during a run outside the places swept after every run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalSweep {
    pub elapsed_s: f64,
    pub files: Vec<SweptFile>,
    /// Files beyond those listed.
    pub more: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweptFile {
    pub path: String,
    /// The run whose time window holds the file's change time.
    pub written_by: RunRef,
    /// A later run whose window holds its access time.
    pub read_by: Option<RunRef>,
}

impl Fingerprint {
    /// More runnable tasks than CPUs on average, before or after: the
    /// measurement competed with other work.
    pub fn under_load(&self) -> bool {
        let cores = f64::from(self.cores.unwrap_or(1).max(1));
        [&self.load_before, &self.load_after]
            .iter()
            .filter_map(|l| l.as_ref().and_then(|v| v.first().copied()))
            .any(|l1| l1 > cores)
    }
}

/// A variant's untimed build step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildResult {
    pub variant: String,
    pub ok: bool,
    pub exit_code: Option<i32>,
    pub wall_s: f64,
    #[serde(default)]
    pub timed_out: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tail: Option<String>,
}

/// One measured run: one process of one workload item of one variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSample {
    pub variant: String,
    pub item: String,
    pub item_index: usize,
    /// Measured round (warm-ups are not recorded).
    pub round: usize,
    /// Place of the variant in that round's shuffled order.
    pub position: usize,
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    pub cpu_s: f64,
    pub max_rss_kb: u64,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<u64>,
    /// The time the workload printed for itself, seconds: the last
    /// `Mean: X` line of its output (SWE-fficiency's workloads print the
    /// mean of their `timeit.repeat` runs so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tail: Option<String>,
    #[serde(flatten)]
    pub evidence: RunEvidence,
}

impl RunSample {
    /// Killed by a signal or by the timeout: no measurement of the workload.
    pub fn aborted(&self) -> bool {
        self.timed_out || self.signal.is_some()
    }
}

/// Everything the driver printed, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriverOutput {
    pub fingerprint: Fingerprint,
    pub builds: Vec<BuildResult>,
    /// Warm-up runs (their `round` counts warm-ups); never analysed.
    #[serde(default)]
    pub warmups: Vec<RunSample>,
    pub runs: Vec<RunSample>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<FinalSweep>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line {
    Fingerprint(Fingerprint),
    Build(BuildResult),
    Warmup(RunSample),
    Run(RunSample),
    Sweep(FinalSweep),
    End { load_after: Option<Vec<f64>> },
}

/// Reads the driver's stdout. Lines that are not JSON objects (something the
/// container printed) are errors naming the line: the driver prints nothing
/// else, so they mean the output cannot be trusted.
pub fn parse_driver_output(text: &str) -> Result<DriverOutput, RecordError> {
    let mut fingerprint: Option<Fingerprint> = None;
    let mut builds = Vec::new();
    let mut warmups = Vec::new();
    let mut runs = Vec::new();
    let mut sweep = None;
    let mut ended = false;
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let line: Line = serde_json::from_str(raw).map_err(|e| RecordError::Line {
            line: i + 1,
            reason: format!("{e}: {}", raw.chars().take(200).collect::<String>()),
        })?;
        match line {
            Line::Fingerprint(f) => fingerprint = Some(f),
            Line::Build(b) => builds.push(b),
            Line::Warmup(r) => warmups.push(r),
            Line::Run(r) => runs.push(r),
            Line::Sweep(f) => sweep = Some(f),
            Line::End { load_after } => {
                ended = true;
                if let Some(f) = fingerprint.as_mut() {
                    f.load_after = load_after;
                }
            }
        }
    }
    let fingerprint =
        fingerprint.ok_or_else(|| RecordError::Incomplete("no fingerprint line".into()))?;
    if !ended {
        return Err(RecordError::Incomplete(format!(
            "no end line after {} runs (the driver stopped early)",
            runs.len()
        )));
    }
    Ok(DriverOutput {
        fingerprint,
        builds,
        warmups,
        runs,
        sweep,
    })
}

/// What a variant is in the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The base tree: every speedup is against it.
    Base,
    /// A second copy of the base tree, measured as if it were a candidate:
    /// its "speedup" shows the noise floor (A/A).
    BaseCopy,
    /// The expert's (gold) patch.
    Gold,
    /// A candidate patch.
    Candidate,
}

/// One measured variant and what is known of its correctness.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantInfo {
    /// Unique within the instance; the driver's variant name.
    pub name: String,
    pub role: Role,
    /// The model (prediction's `model_name_or_path`) for candidates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Whether the patch resolved the instance in the normal evaluation;
    /// `None` when unknown (base, or not evaluated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<bool>,
}

/// perf.json of one instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerfRecord {
    pub schema_version: u32,
    pub instance_id: String,
    pub workload_source: WorkloadSource,
    /// Workload item names, in run order.
    pub items: Vec<String>,
    /// Driver settings: repetitions, warm-ups, seed, CPU pinning.
    pub repeat: usize,
    pub warmup: usize,
    pub seed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset: Option<String>,
    pub options: AnalysisOptions,
    pub variants: Vec<VariantInfo>,
    pub fingerprint: Fingerprint,
    pub builds: Vec<BuildResult>,
    #[serde(default)]
    pub warmups: Vec<RunSample>,
    pub runs: Vec<RunSample>,
    /// Container created to container removed, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    /// Everything but the timed processes and the builds (container, trees,
    /// driver), per variant and run (warm-ups included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead_per_run_s: Option<f64>,
    /// The driver's final sweep (integrity evidence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<FinalSweep>,
    pub analysis: InstanceAnalysis,
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str = r#"{"cores": 2, "cpu_model": "AMD EPYC", "cpus_allowed": 1, "driver_rss_kb": 14796, "instructions": "unavailable: perf is not installed", "kernel": "Linux 6.1 x86_64", "load_before": [2.5, 1.0, 0.5], "python": "3.11.2", "type": "fingerprint"}
{"exit_code": 1, "ok": false, "output_tail": "boom", "timed_out": false, "type": "build", "variant": "c", "wall_s": 0.1, "cpu_s": 0.1, "user_s": 0.1, "sys_s": 0.0, "max_rss_kb": 1, "signal": null}
{"cpu_s": 0.3, "exit_code": 0, "item": "workload", "item_index": 0, "max_rss_kb": 20000, "position": 0, "round": 0, "signal": null, "sys_s": 0.01, "timed_out": false, "type": "warmup", "user_s": 0.29, "variant": "base", "wall_s": 0.31}
{"cpu_s": 0.25, "exit_code": 0, "item": "workload", "item_index": 0, "max_rss_kb": 20000, "position": 1, "reported_s": 0.0123, "round": 0, "signal": null, "sys_s": 0.01, "timed_out": false, "type": "run", "user_s": 0.24, "variant": "base", "wall_s": 0.26}
{"load_after": [1.5, 1.0, 0.5], "type": "end"}
"#;

    #[test]
    fn reads_the_drivers_lines() {
        let d = parse_driver_output(OUT).unwrap();
        assert_eq!(d.fingerprint.cpu_model, "AMD EPYC");
        assert_eq!(d.fingerprint.load_after, Some(vec![1.5, 1.0, 0.5]));
        assert!(d.fingerprint.under_load(), "2.5 runnable on 2 cores");
        assert_eq!(d.builds.len(), 1);
        assert!(!d.builds[0].ok);
        assert_eq!(d.runs.len(), 1);
        assert_eq!(d.runs[0].wall_s, 0.26);
        assert_eq!(d.warmups.len(), 1);
        assert_eq!(d.warmups[0].wall_s, 0.31);
        assert_eq!(d.runs[0].reported_s, Some(0.0123));
        assert_eq!(d.warmups[0].reported_s, None);
        assert!(!d.runs[0].aborted());
    }

    #[test]
    fn reads_the_defences_evidence_and_the_sweep() {
        let with = OUT.replace(
            "\"variant\": \"base\", \"wall_s\": 0.26}",
            "\"variant\": \"base\", \"wall_s\": 0.26, \"output_sha256\": \"ab\", \"integrity_s\": 0.004, \
             \"read_state\": [{\"path\": \"/tmp/c\", \"left_by\": {\"variant\": \"x\", \"kind\": \"warmup\", \"round\": 0}}], \
             \"left_state\": [{\"path\": \"/testbed/o\", \"change\": \"created\"}], \"left_state_more\": 3, \
             \"left_processes\": [{\"pid\": 7, \"cmdline\": \"sleep 9\"}]}\n\
             {\"type\": \"sweep\", \"elapsed_s\": 0.2, \"more\": 0, \"files\": [{\"path\": \"/usr/x\", \
             \"written_by\": {\"variant\": \"x\", \"kind\": \"run\", \"round\": 1}, \"read_by\": null}]}",
        );
        let d = parse_driver_output(&with).unwrap();
        let e = &d.runs[0].evidence;
        assert_eq!(e.output_sha256.as_deref(), Some("ab"));
        assert_eq!(e.read_state[0].left_by.to_string(), "x warm-up 0");
        assert_eq!(e.left_state[0].change, Change::Created);
        assert_eq!(e.left_state_more, 3);
        assert_eq!(e.left_processes[0].pid, 7);
        let sweep = d.sweep.unwrap();
        assert_eq!(sweep.files[0].written_by.kind, RunKind::Run);
        assert_eq!(sweep.files[0].read_by, None);
        // Older output has none of it.
        let old = parse_driver_output(OUT).unwrap();
        assert_eq!(old.runs[0].evidence, RunEvidence::default());
        assert!(old.sweep.is_none());
    }

    #[test]
    fn stray_output_and_truncation_are_errors() {
        let bad = OUT.replace(
            "{\"load_after\"",
            "Traceback (most recent call last)\n{\"load_after\"",
        );
        let e = parse_driver_output(&bad).unwrap_err();
        assert!(matches!(e, RecordError::Line { line: 5, .. }), "{e}");
        let cut: String = OUT.lines().take(4).map(|l| format!("{l}\n")).collect();
        assert_eq!(
            parse_driver_output(&cut).unwrap_err(),
            RecordError::Incomplete("no end line after 1 runs (the driver stopped early)".into())
        );
        assert!(matches!(
            parse_driver_output("").unwrap_err(),
            RecordError::Incomplete(_)
        ));
    }
}
