//! Perf integrity (issue 24, family (e)): speedups a candidate's code makes
//! look real without being real are refused, not credited.
//!
//! The driver (harness-scripts/perf/defences.py) keeps what it can out of
//! the timed code's reach (a fresh TMPDIR and HOME per run, the tree
//! renamed into /testbed rather than linked, leftover processes killed)
//! and records evidence for the rest; this module judges it:
//! - [`timing`]: a reported speedup the process times do not show (a
//!   patched clock);
//! - state across runs: files a run left that a later run read (results
//!   cached on disk), unless base's runs do the same;
//! - output: a script workload printing something other than gold or
//!   base print for the same input (a fast wrong path taken when the code
//!   notices the benchmark).

pub mod timing;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::record::{DriverOutput, Role, RunKind, RunRef, RunSample, VariantInfo};
use super::{AnalysisOptions, Comparison, Metric};
use timing::{TimingCheck, TimingOutcome};

/// Why a speedup was refused, as `Status::Suspect` lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    ReportedNotMeasured,
    StateAcrossRuns,
    OutputDiffers,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::ReportedNotMeasured => "reported time not in the process times",
            Reason::StateAcrossRuns => "state read across runs",
            Reason::OutputDiffers => "output differs from gold's and base's",
        }
    }
}

/// One refusal and its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Refusal {
    ReportedNotMeasured(TimingCheck),
    StateAcrossRuns {
        reads: Vec<Read>,
        /// Reads beyond those listed.
        more: usize,
    },
    OutputDiffers {
        item: String,
        /// The variant's runs of the item (warm-ups included), and how many
        /// printed an output neither gold's nor base's.
        runs: usize,
        differing: usize,
        /// Normalised output samples: the reference's, and the variant's.
        expected: String,
        got: String,
    },
}

impl Refusal {
    pub fn reason(&self) -> Reason {
        match self {
            Refusal::ReportedNotMeasured(_) => Reason::ReportedNotMeasured,
            Refusal::StateAcrossRuns { .. } => Reason::StateAcrossRuns,
            Refusal::OutputDiffers { .. } => Reason::OutputDiffers,
        }
    }
}

/// A file one run left and a later run read.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Read {
    pub path: String,
    pub left_by: RunRef,
    pub read_by: RunRef,
}

const LISTED: usize = 5;

fn short(s: &str) -> String {
    let line = s.replace('\n', " | ");
    match line.char_indices().nth(80) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line,
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::ReportedNotMeasured(t) => write!(f, "{t}"),
            Refusal::StateAcrossRuns { reads, more } => {
                let each: Vec<String> = reads
                    .iter()
                    .map(|r| format!("{} (left by {}, read by {})", r.path, r.left_by, r.read_by))
                    .collect();
                write!(f, "read files earlier runs left: {}", each.join("; "))?;
                if *more > 0 {
                    write!(f, "; {more} more")?;
                }
                Ok(())
            }
            Refusal::OutputDiffers {
                item,
                runs,
                differing,
                expected,
                got,
            } => write!(
                f,
                "{differing} of {runs} runs of {item} printed {:?}, gold/base print {:?}",
                short(got),
                short(expected)
            ),
        }
    }
}

/// The integrity of one instance's variants.
#[derive(Debug, Default)]
pub struct Assessment {
    pub refusals: BTreeMap<String, Vec<Refusal>>,
    pub timing: BTreeMap<String, TimingCheck>,
    pub notes: Vec<String>,
}

fn reference(role: Role) -> bool {
    matches!(role, Role::Base | Role::BaseCopy)
}

/// Every check on one instance's measurement. `comparisons`: each variant
/// against base under `opts.metric`; `script_workload`: the workload is
/// scripts, whose output is comparable (tests print their own timings).
pub fn assess(
    variants: &[VariantInfo],
    out: &DriverOutput,
    script_workload: bool,
    comparisons: &BTreeMap<&str, &Comparison>,
    opts: &AnalysisOptions,
) -> Assessment {
    let mut a = Assessment::default();
    let base = variants.iter().find(|v| v.role == Role::Base);
    if let (Metric::Reported, Some(base)) = (opts.metric, base) {
        reported(variants, out, comparisons, &base.name, opts, &mut a);
    }
    state(variants, out, &mut a);
    if script_workload {
        outputs(variants, out, &mut a);
    }
    a
}

/// The timing check of every variant under `--metric reported`, gold's
/// first (at one repetition) for the repetitions per process.
fn reported(
    variants: &[VariantInfo],
    out: &DriverOutput,
    comparisons: &BTreeMap<&str, &Comparison>,
    base: &str,
    opts: &AnalysisOptions,
    a: &mut Assessment,
) {
    let cpu_clock = out.fingerprint.own_timer.as_deref() == Some("cpu");
    let check = |name: &str, reps: f64| {
        let cmp = comparisons.get(name)?;
        timing::check(base, name, out, cmp, cpu_clock, reps, opts)
    };
    let gold = variants
        .iter()
        .find(|v| v.role == Role::Gold && v.resolved != Some(false))
        .and_then(|g| Some((g.name.clone(), check(&g.name, 1.0)?)));
    let reps = match timing::repetitions(gold.as_ref().map(|g| &g.1)) {
        Ok(r) => r,
        Err(why) => {
            a.notes.push(why);
            a.timing.extend(gold);
            return;
        }
    };
    for v in variants.iter().filter(|v| !reference(v.role)) {
        let t = match &gold {
            Some((g, t)) if *g == v.name => t.clone(),
            _ => match check(&v.name, reps) {
                Some(t) => t,
                None => continue,
            },
        };
        match t.outcome {
            TimingOutcome::Refuted => a
                .refusals
                .entry(v.name.clone())
                .or_default()
                .push(Refusal::ReportedNotMeasured(t.clone())),
            TimingOutcome::Inconclusive => a.notes.push(format!(
                "{}: timing check inconclusive (credited): {t}",
                v.name
            )),
            TimingOutcome::Confirmed => {}
        }
        a.timing.insert(v.name.clone(), t);
    }
}

/// Every run and warm-up, with which it is.
fn all_runs(out: &DriverOutput) -> impl Iterator<Item = (RunRef, &RunSample)> {
    fn tag(kind: RunKind, r: &RunSample) -> (RunRef, &RunSample) {
        let who = RunRef {
            variant: r.variant.clone(),
            kind,
            round: r.round,
        };
        (who, r)
    }
    (out.warmups.iter().map(|r| tag(RunKind::Warmup, r)))
        .chain(out.runs.iter().map(|r| tag(RunKind::Run, r)))
}

/// Files left by one run and read by a later one. What base's runs leave
/// or read is the workload's own doing (its output files, a test runner's
/// cache) and not counted. The reader and the writer are both suspect.
fn state(variants: &[VariantInfo], out: &DriverOutput, a: &mut Assessment) {
    let role: BTreeMap<&str, Role> = variants.iter().map(|v| (v.name.as_str(), v.role)).collect();
    let is_ref = |name: &str| role.get(name).is_some_and(|r| reference(*r));
    let mut expected: BTreeSet<&str> = BTreeSet::new();
    for (_, r) in all_runs(out).filter(|(_, r)| is_ref(&r.variant)) {
        let e = &r.evidence;
        expected.extend(e.left_state.iter().map(|l| l.path.as_str()));
        expected.extend(e.read_state.iter().map(|l| l.path.as_str()));
    }
    let swept = out.sweep.iter().flat_map(|s| &s.files);
    expected.extend(
        swept
            .clone()
            .filter(|f| is_ref(&f.written_by.variant))
            .map(|f| f.path.as_str()),
    );
    let mut reads: Vec<Read> = Vec::new();
    let mut more: BTreeMap<String, usize> = BTreeMap::new();
    for (who, r) in all_runs(out) {
        for s in r.evidence.read_state.iter() {
            if !expected.contains(s.path.as_str()) {
                reads.push(Read {
                    path: s.path.clone(),
                    left_by: s.left_by.clone(),
                    read_by: who.clone(),
                });
            }
        }
        if r.evidence.read_state_more > 0 {
            *more.entry(r.variant.clone()).or_default() += r.evidence.read_state_more;
        }
    }
    for f in swept.filter(|f| !expected.contains(f.path.as_str())) {
        if let Some(by) = &f.read_by {
            reads.push(Read {
                path: f.path.clone(),
                left_by: f.written_by.clone(),
                read_by: by.clone(),
            });
        }
    }
    let mut per: BTreeMap<&str, Vec<Read>> = BTreeMap::new();
    for r in &reads {
        for name in [r.read_by.variant.as_str(), r.left_by.variant.as_str()] {
            if !is_ref(name) && role.contains_key(name) {
                let list = per.entry(name).or_default();
                if !list.contains(r) {
                    list.push(r.clone());
                }
            }
        }
    }
    for (name, mut list) in per {
        list.sort_by(|x, y| (&x.read_by, &x.path).cmp(&(&y.read_by, &y.path)));
        // The first read of each file left by each run is evidence enough;
        // the rest are counted.
        let all = list.len();
        let mut firsts = BTreeSet::new();
        list.retain(|r| firsts.insert((r.path.clone(), r.left_by.clone())));
        let extra = all - list.len().min(LISTED) + more.get(name).copied().unwrap_or(0);
        list.truncate(LISTED);
        a.refusals
            .entry(name.to_string())
            .or_default()
            .push(Refusal::StateAcrossRuns {
                reads: list,
                more: extra,
            });
    }
    // Evidence that is no refusal: files left and never read, processes
    // left running (killed before the next run could use them).
    for v in variants.iter().filter(|v| !reference(v.role)) {
        let mine = || all_runs(out).filter(|(_, r)| r.variant == v.name);
        let read: BTreeSet<&str> = reads.iter().map(|r| r.path.as_str()).collect();
        let left: BTreeSet<&str> = mine()
            .flat_map(|(_, r)| r.evidence.left_state.iter().map(|l| l.path.as_str()))
            .chain(
                out.sweep
                    .iter()
                    .flat_map(|s| &s.files)
                    .filter(|f| f.written_by.variant == v.name)
                    .map(|f| f.path.as_str()),
            )
            .filter(|p| !expected.contains(p) && !read.contains(p))
            .collect();
        if !left.is_empty() {
            let listed: Vec<&str> = left.iter().take(LISTED).copied().collect();
            a.notes.push(format!(
                "{}: its runs left files no later run read: {}{}",
                v.name,
                listed.join(", "),
                if left.len() > LISTED {
                    format!(" and {} more", left.len() - LISTED)
                } else {
                    String::new()
                }
            ));
        }
        let procs: BTreeSet<&str> = mine()
            .flat_map(|(_, r)| r.evidence.left_processes.iter().map(|p| p.cmdline.as_str()))
            .collect();
        if !procs.is_empty() {
            a.notes.push(format!(
                "{}: its runs left processes running, killed before the next run: {}",
                v.name,
                procs
                    .into_iter()
                    .take(LISTED)
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    }
}

/// Per item: gold's output and base's (each when all its runs agree) are
/// the reference; a candidate whose run prints anything else is refused.
fn outputs(variants: &[VariantInfo], out: &DriverOutput, a: &mut Assessment) {
    let names = |pred: &dyn Fn(&VariantInfo) -> bool| -> BTreeSet<&str> {
        variants
            .iter()
            .filter(|v| pred(v))
            .map(|v| v.name.as_str())
            .collect()
    };
    let gold = names(&|v| v.role == Role::Gold && v.resolved != Some(false));
    let base = names(&|v| reference(v.role));
    let items: BTreeSet<(usize, &str)> = all_runs(out)
        .map(|(_, r)| (r.item_index, r.item.as_str()))
        .collect();
    let sample = |item: usize, digest: &str| -> String {
        all_runs(out)
            .map(|(_, r)| r)
            .find(|r| r.item_index == item && r.evidence.output_sha256.as_deref() == Some(digest))
            .and_then(|r| r.evidence.output_sample.clone())
            .unwrap_or_default()
    };
    for (item, item_name) in items {
        let digests = |of: &BTreeSet<&str>| -> BTreeSet<&str> {
            all_runs(out)
                .map(|(_, r)| r)
                .filter(|r| r.item_index == item && of.contains(r.variant.as_str()))
                .filter_map(|r| r.evidence.output_sha256.as_deref())
                .collect()
        };
        let mut accepted: Vec<&str> = Vec::new();
        let mut varying = false;
        for group in [&gold, &base] {
            let d = digests(group);
            match d.len() {
                0 => {}
                1 => accepted.extend(d),
                _ => varying = true,
            }
        }
        if accepted.is_empty() {
            if varying {
                a.notes.push(format!(
                    "output check not applicable to {item_name}: gold's and base's outputs vary between runs"
                ));
            }
            continue;
        }
        for v in variants.iter().filter(|v| v.role == Role::Candidate) {
            let mine: Vec<&str> = all_runs(out)
                .map(|(_, r)| r)
                .filter(|r| r.item_index == item && r.variant == v.name)
                .filter_map(|r| r.evidence.output_sha256.as_deref())
                .collect();
            let wrong: Vec<&str> = mine
                .iter()
                .copied()
                .filter(|d| !accepted.contains(d))
                .collect();
            let Some(first) = wrong.first() else {
                continue;
            };
            let refusals = a.refusals.entry(v.name.clone()).or_default();
            if refusals.iter().any(|r| r.reason() == Reason::OutputDiffers) {
                continue;
            }
            refusals.push(Refusal::OutputDiffers {
                item: item_name.to_string(),
                runs: mine.len(),
                differing: wrong.len(),
                expected: sample(item, accepted[0]),
                got: sample(item, first),
            });
        }
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
