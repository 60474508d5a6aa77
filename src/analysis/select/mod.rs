//! Best-of-n selection (`patchgrade select`): one sample per instance, chosen
//! with signals available without the hidden tests.
//!
//! Signals, in order of precedence:
//! 1. the patch applies (an empty patch or one that does not apply comes
//!    last);
//! 2. existing tests: the test files the instance's test patch *modifies*
//!    exist at base; they are run on the base tree and with each candidate
//!    (the test patch itself is never applied), and the score is the share
//!    of the tests passing at base that still pass;
//! 3. strict apply before fuzzy apply;
//! 4. not flagged `suspect` by the audit;
//! 5. agreement: the size of the largest group of samples with the same
//!    existing-test behaviour or the same normalised patch;
//! 6. the lowest sample id.
//!
//! The selection is then scored with the outcomes the run recorded for the
//! chosen samples, next to the mean pass@1 and the oracle pass@n.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

pub mod score;

use crate::dataset::{sha256_hex, Instance, Prediction};
use crate::key::EvalKey;
use crate::outcome::Outcome;
use crate::parse::{StatusMap, TestStatus};
use crate::passk::samples::{sample_order, ModelSamples, RunSamples, SampleRecord};
use crate::patch::{ApplyStrategy, ChangeKind, Patch};
use crate::record::EvalRecord;
use crate::rundir::eval_dir::EvalDir;
use crate::rundir::RunDir;
use crate::runner::jobs::Job;
use crate::runner::jobs::Records;
use crate::spec::SpecSet;
use score::{score_model, ModelSelection};

/// Model name of the base-tree runs in the selection's run folder.
pub const BASE_MODEL: &str = "_base";

/// Whether and how a candidate's patch applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Applies {
    Strict,
    Fuzzy,
    /// Not known: the candidate was not run and the run has no record.
    Unknown,
    No,
    Empty,
}

impl Applies {
    /// Applying candidates first, then unknown, then the rest.
    fn tier(self) -> u8 {
        match self {
            Applies::Strict | Applies::Fuzzy => 2,
            Applies::Unknown => 1,
            Applies::No | Applies::Empty => 0,
        }
    }

    fn of_record(outcome: Outcome, strategy: Option<ApplyStrategy>) -> Applies {
        match (outcome, strategy) {
            (Outcome::PatchApplyFailed, _) => Applies::No,
            (Outcome::EmptyPatch, _) => Applies::Empty,
            (_, Some(ApplyStrategy::Strict)) => Applies::Strict,
            (_, Some(ApplyStrategy::Fuzzy)) => Applies::Fuzzy,
            _ => Applies::Unknown,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Applies::Strict => "strict",
            Applies::Fuzzy => "fuzzy",
            Applies::Unknown => "unknown",
            Applies::No => "no",
            Applies::Empty => "empty",
        }
    }
}

/// One sample as the selection saw it.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_id: Option<String>,
    pub applies: Applies,
    /// Base-passing existing tests that still pass with this candidate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub still_passing: Option<usize>,
    /// `still_passing` / base-passing tests; none when there is no signal.
    pub score: Option<f64>,
    pub suspect: bool,
    pub agreement: usize,
    /// The patch edits one of the existing test files it is scored with.
    pub touches_tests: bool,
    /// The outcome the run recorded for this sample (used only to score the
    /// selection, never to make it).
    pub outcome: Option<Outcome>,
    #[serde(skip)]
    behaviour: Option<String>,
    #[serde(skip)]
    patch_key: String,
    #[serde(skip)]
    prediction: Prediction,
    #[serde(skip)]
    recorded: Option<SampleRecord>,
}

// (Also `review::judge::reply::Choice`, the judge's pick: each is read only inside its module.)
/// The choice for one instance.
#[derive(Debug, Clone, Serialize)]
pub struct Choice {
    pub instance_id: String,
    pub chosen: Option<String>,
    /// Existing test files run (empty: no existing-test signal).
    pub test_files: Vec<String>,
    /// Tests passing at base among them.
    pub base_passing: Option<usize>,
    pub candidates: Vec<Candidate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The existing test files of an instance (modified by its test patch, so
/// present at base) as runner arguments; empty when there are none.
fn existing_tests(inst: &Instance, specs: &SpecSet) -> (Vec<String>, Vec<String>) {
    let Ok(patch) = Patch::parse(&inst.test_patch) else {
        return (Vec::new(), Vec::new());
    };
    let modified: Vec<_> = patch
        .files
        .into_iter()
        .filter(|f| f.kind == ChangeKind::Modified)
        .collect();
    let Ok(rs) = specs.for_instance(inst) else {
        return (Vec::new(), Vec::new());
    };
    let dirs = crate::script::directives(&modified, rs.spec.test_directives);
    if dirs.is_empty() {
        return (Vec::new(), Vec::new());
    }
    (modified.into_iter().map(|f| f.path).collect(), dirs)
}

/// The instance as the selection runs it: no test patch, no expected tests.
fn base_instance(inst: &Instance) -> Arc<Instance> {
    Arc::new(Instance {
        test_patch: String::new(),
        fail_to_pass: Vec::new(),
        pass_to_pass: Vec::new(),
        ..inst.clone()
    })
}

/// The status map of a finished test run.
fn statuses(
    rec: Option<&EvalRecord>,
    dir: &EvalDir,
    inst: &Instance,
    specs: &SpecSet,
) -> Option<Result<StatusMap, String>> {
    let rec = rec?;
    match rec.outcome {
        Outcome::Resolved | Outcome::Unresolved => {}
        Outcome::TestsTimedOut => return Some(Err("tests timed out".into())),
        _ => return None,
    }
    Some(dir.statuses(rec, specs, inst)?.map_err(|u| u.to_string()))
}

/// `Ordering::Greater` when `a` is the better choice.
fn compare(a: &Candidate, b: &Candidate) -> Ordering {
    let score = |c: &Candidate| c.score.unwrap_or(-1.0);
    a.applies
        .tier()
        .cmp(&b.applies.tier())
        .then(score(a).partial_cmp(&score(b)).unwrap_or(Ordering::Equal))
        .then((a.applies == Applies::Strict).cmp(&(b.applies == Applies::Strict)))
        .then((!a.suspect).cmp(&!b.suspect))
        .then(a.agreement.cmp(&b.agreement))
        .then(sample_order(b.sample_id.as_deref()).cmp(&sample_order(a.sample_id.as_deref())))
}

/// Fills `agreement`: the largest group sharing this candidate's
/// behaviour or normalised patch.
fn set_agreement(cands: &mut [Candidate]) {
    let mut by_behaviour: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_patch: BTreeMap<String, usize> = BTreeMap::new();
    for c in cands.iter() {
        if let Some(b) = &c.behaviour {
            *by_behaviour.entry(b.clone()).or_default() += 1;
        }
        *by_patch.entry(c.patch_key.clone()).or_default() += 1;
    }
    for c in cands.iter_mut() {
        let b = c.behaviour.as_ref().map(|b| by_behaviour[b]).unwrap_or(1);
        c.agreement = b.max(by_patch[&c.patch_key]);
    }
}

/// One (model, instance) and its samples, in input order.
struct Group {
    model: String,
    instance: Arc<Instance>,
    jobs: Vec<Job>,
}

fn groups(jobs: Vec<Job>) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    let mut index: BTreeMap<(String, String), usize> = BTreeMap::new();
    for j in jobs {
        let key = (
            j.prediction.model_name_or_path.clone(),
            j.instance.instance_id.clone(),
        );
        let i = *index.entry(key).or_insert_with(|| {
            out.push(Group {
                model: j.prediction.model_name_or_path.clone(),
                instance: j.instance.clone(),
                jobs: Vec::new(),
            });
            out.len() - 1
        });
        out[i].jobs.push(j);
    }
    out
}

/// What to run: per instance id, the existing test files and runner
/// arguments, and the jobs (base runs and candidates).
struct SelectionPlan {
    tests: BTreeMap<String, (Vec<String>, Vec<String>)>,
    jobs: Vec<Job>,
}

fn plan(groups: &[Group], specs: &SpecSet) -> SelectionPlan {
    let mut tests = BTreeMap::new();
    let mut jobs = Vec::new();
    let mut based = BTreeSet::new();
    for g in groups {
        let id = &g.instance.instance_id;
        let (files, dirs) = tests
            .entry(id.clone())
            .or_insert_with(|| existing_tests(&g.instance, specs))
            .clone();
        let runnable: Vec<&Job> = g
            .jobs
            .iter()
            .filter(|j| !j.prediction.is_empty_patch())
            .collect();
        // One candidate, or no existing tests: nothing to compare by tests.
        if runnable.len() < 2 || files.is_empty() {
            continue;
        }
        let inst = base_instance(&g.instance);
        if based.insert(id.clone()) {
            jobs.push(Job {
                directives: Some(dirs.clone()),
                run_without_patch: true,
                overrides: Default::default(),
                ..Job::new(inst.clone(), Prediction::new(id, BASE_MODEL, None))
            });
        }
        for j in runnable {
            jobs.push(Job {
                instance: inst.clone(),
                directives: Some(dirs.clone()),
                run_without_patch: false,
                overrides: Default::default(),
                ..j.clone()
            });
        }
    }
    SelectionPlan { tests, jobs }
}

/// Scores every candidate of a group and picks one.
fn choose(
    g: &Group,
    tests: &(Vec<String>, Vec<String>),
    run: Option<&ModelSamples>,
    done: &Records,
    rundir: &RunDir,
    specs: &SpecSet,
    notes: &mut Vec<String>,
) -> Choice {
    let id = &g.instance.instance_id;
    let (files, _) = tests;
    let base_key = EvalKey::new(BASE_MODEL, id, None);
    let base_dir = rundir.eval_dir(BASE_MODEL, id, None);
    let base_pass: Option<BTreeSet<String>> = match statuses(
        done.get(&base_key).map(|r| &**r),
        &base_dir,
        &g.instance,
        specs,
    ) {
        Some(Ok(map)) => Some(
            map.into_iter()
                .filter(|(_, s)| *s == TestStatus::Passed)
                .map(|(t, _)| t)
                .collect(),
        ),
        Some(Err(e)) => {
            notes.push(format!(
                "{id}: the base run's tests cannot be read ({e}); no existing-test signal"
            ));
            None
        }
        None => None,
    };
    let base_pass = base_pass.filter(|s| !s.is_empty());
    let recorded: BTreeMap<Option<String>, &SampleRecord> = run
        .and_then(|m| m.by_instance.get(id))
        .into_iter()
        .flatten()
        .map(|r| (r.sample_id.clone(), r))
        .collect();
    let mut cands = Vec::new();
    for j in &g.jobs {
        let sha = j.prediction.patch_sha256();
        let rec = recorded.get(&j.sample).copied().filter(|r| {
            let same = r.patch_sha256 == sha;
            if !same {
                notes.push(format!(
                    "{id} sample {}: the run evaluated another patch; its outcome is not used",
                    j.sample.as_deref().unwrap_or("-")
                ));
            }
            same
        });
        let key = j.key();
        let sel_rec = done.get(&key);
        let applies = if j.prediction.is_empty_patch() {
            Applies::Empty
        } else if let Some(r) = sel_rec {
            Applies::of_record(r.outcome, r.apply_strategy)
        } else if let Some(r) = rec {
            Applies::of_record(r.outcome, r.apply_strategy)
        } else {
            Applies::Unknown
        };
        let (mut score, mut still, mut behaviour) = (None, None, None);
        if let (Some(base), Some(sr)) = (&base_pass, sel_rec) {
            match statuses(Some(sr), &j.eval_dir(rundir), &g.instance, specs) {
                Some(Ok(map)) => {
                    let n = base
                        .iter()
                        .filter(|t| map.get(*t) == Some(&TestStatus::Passed))
                        .count();
                    still = Some(n);
                    score = Some(n as f64 / base.len() as f64);
                    behaviour = Some(format!("{map:?}"));
                }
                Some(Err(_)) => {
                    still = Some(0);
                    score = Some(0.0);
                }
                None => {}
            }
        }
        let touches_tests = j
            .prediction
            .model_patch
            .as_deref()
            .and_then(|p| Patch::parse(p).ok())
            .is_some_and(|p| p.files.iter().any(|f| files.contains(&f.path)));
        cands.push(Candidate {
            sample_id: j.sample.clone(),
            applies,
            still_passing: still,
            score,
            suspect: rec.is_some_and(|r| r.suspect),
            agreement: 1,
            touches_tests,
            outcome: rec.map(|r| r.outcome),
            behaviour,
            patch_key: sha256_hex(&crate::patch::normalise(
                j.prediction.model_patch.as_deref().unwrap_or(""),
            )),
            prediction: j.prediction.clone(),
            recorded: rec.cloned(),
        });
    }
    set_agreement(&mut cands);
    let best = cands
        .iter()
        .enumerate()
        .max_by(|(_, a), (_, b)| compare(a, b))
        .map(|(i, _)| i);
    Choice {
        instance_id: id.clone(),
        chosen: best.and_then(|i| cands[i].sample_id.clone()),
        test_files: if base_pass.is_some() {
            files.clone()
        } else {
            Vec::new()
        },
        base_passing: base_pass.as_ref().map(BTreeSet::len),
        note: best.is_none().then(|| "no candidate".to_string()),
        candidates: cands,
    }
}

impl Choice {
    fn chosen(&self) -> Option<&Candidate> {
        self.candidates.iter().find(|c| c.sample_id == self.chosen)
    }
}

/// The selection's work: the (model, instance) groups of samples and what
/// to run to compare them.
pub struct Selection {
    groups: Vec<Group>,
    plan: SelectionPlan,
}

impl Selection {
    /// Groups the run's jobs (made from the same predictions, so with the
    /// same sample ids) and plans the test runs.
    pub fn new(jobs: Vec<Job>, specs: &SpecSet) -> Selection {
        let groups = groups(jobs);
        let plan = plan(&groups, specs);
        Selection { groups, plan }
    }

    /// The test runs: base trees and candidates with existing tests.
    pub fn jobs(&self) -> Vec<Job> {
        self.plan.jobs.clone()
    }

    /// Chooses one sample per group from the finished test runs, and
    /// scores the choices against the outcomes the run recorded. Returns
    /// the chosen predictions (in input order) and the selection per model.
    pub fn decide(
        &self,
        run: &RunSamples,
        done: &Records,
        rundir: &RunDir,
        specs: &SpecSet,
    ) -> (Vec<Prediction>, BTreeMap<String, ModelSelection>) {
        let mut per_model: BTreeMap<String, (Vec<Choice>, Vec<String>)> = BTreeMap::new();
        let mut chosen = Vec::new();
        for g in &self.groups {
            let (choices, notes) = per_model.entry(g.model.clone()).or_default();
            let choice = choose(
                g,
                &self.plan.tests[&g.instance.instance_id],
                run.models.get(&g.model),
                done,
                rundir,
                specs,
                notes,
            );
            if let Some(c) = choice.chosen() {
                chosen.push(c.prediction.clone());
            }
            choices.push(choice);
        }
        let models = per_model
            .into_iter()
            .map(|(m, (choices, notes))| {
                let sel = score_model(run.models.get(&m), choices, notes);
                (m, sel)
            })
            .collect();
        (chosen, models)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(
        id: &str,
        applies: Applies,
        score: Option<f64>,
        suspect: bool,
        agreement: usize,
    ) -> Candidate {
        Candidate {
            sample_id: Some(id.into()),
            applies,
            still_passing: None,
            score,
            suspect,
            agreement,
            touches_tests: false,
            outcome: None,
            behaviour: None,
            patch_key: id.into(),
            prediction: Prediction {
                sample_id: Some(id.into()),
                ..Prediction::new("i", "m", None)
            },
            recorded: None,
        }
    }

    fn best(c: &[Candidate]) -> String {
        c.iter()
            .max_by(|a, b| compare(a, b))
            .unwrap()
            .sample_id
            .clone()
            .unwrap()
    }

    #[test]
    fn precedence_of_the_signals() {
        use Applies::*;
        // Applying beats a better score on a patch that does not apply.
        assert_eq!(
            best(&[
                cand("0", No, Some(1.0), false, 5),
                cand("1", Fuzzy, Some(0.1), true, 1)
            ]),
            "1"
        );
        // Score beats strictness.
        assert_eq!(
            best(&[
                cand("0", Strict, Some(0.5), false, 1),
                cand("1", Fuzzy, Some(0.9), false, 1)
            ]),
            "1"
        );
        // Then strict > fuzzy, then not suspect, then agreement.
        assert_eq!(
            best(&[
                cand("0", Fuzzy, Some(1.0), false, 3),
                cand("1", Strict, Some(1.0), true, 1)
            ]),
            "1"
        );
        assert_eq!(
            best(&[
                cand("0", Strict, Some(1.0), true, 3),
                cand("1", Strict, Some(1.0), false, 1)
            ]),
            "1"
        );
        assert_eq!(
            best(&[
                cand("0", Strict, None, false, 1),
                cand("1", Strict, None, false, 2)
            ]),
            "1"
        );
        // Then the lowest sample id, numerically.
        assert_eq!(
            best(&[
                cand("10", Strict, None, false, 1),
                cand("9", Strict, None, false, 1)
            ]),
            "9"
        );
        // An empty patch comes last even with no other signal.
        assert_eq!(
            best(&[
                cand("0", Empty, None, false, 4),
                cand("1", Unknown, None, false, 1)
            ]),
            "1"
        );
    }

    #[test]
    fn agreement_is_the_larger_of_behaviour_and_patch_groups() {
        let mut c: Vec<Candidate> = (0..6)
            .map(|i| cand(&i.to_string(), Applies::Strict, None, false, 1))
            .collect();
        // 0, 1, 2 behave alike; 3 and 4 share a patch (4 has no readable
        // test run); 5 stands alone.
        for x in &mut c[..3] {
            x.behaviour = Some("A".into());
        }
        c[3].behaviour = Some("B".into());
        c[4].patch_key = "3".into();
        set_agreement(&mut c);
        let a: Vec<usize> = c.iter().map(|c| c.agreement).collect();
        assert_eq!(a, [3, 3, 3, 2, 2, 1]);
    }
}
