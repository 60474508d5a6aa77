//! Which evaluation a free worker starts: the next in schedule order, unless
//! another evaluation of the same repository and version is still preparing
//! its environment and a later one is not.
//!
//! An evaluation's environment images (env, snapshot: one per repository
//! and version, or window) are built once, under a lock: a second
//! evaluation of that version started meanwhile only waits for the first's
//! build. On a cold run that left one core of two idle for minutes at a
//! time (scikit-learn's first snapshot, 174 s of one compiler while the
//! other worker waited; session 28). A later evaluation of another version
//! has its own builds to do, so it starts instead; when every waiting one
//! shares a busy version, the next in order starts as before. On a warm run
//! preparing takes milliseconds and the order is the schedule's. Plain
//! code.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::jobs::Job;
use crate::key::EvalKey;

/// How far down the order a free worker looks for another version: a run
/// of many samples of one version (pass@k) would otherwise scan all of its
/// waiting jobs at every start.
const LOOKAHEAD: usize = 64;

/// The images an evaluation shares with others: its repository and version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EnvGroup {
    repo: String,
    version: String,
}

impl EnvGroup {
    fn of(job: &Job) -> EnvGroup {
        EnvGroup {
            repo: job.instance.repo.clone(),
            version: job.instance.version.clone(),
        }
    }
}

/// The evaluations started and still preparing their environment.
#[derive(Debug, Default)]
pub struct Preparing {
    started: Mutex<HashMap<EvalKey, EnvGroup>>,
}

impl Preparing {
    fn started(&self) -> std::sync::MutexGuard<'_, HashMap<EvalKey, EnvGroup>> {
        self.started.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `job` starts: its group is busy until [`Preparing::done`].
    pub fn start(&self, job: &Job) {
        self.started().insert(job.key(), EnvGroup::of(job));
    }

    /// `key`'s environment is ready, or its evaluation ended without one
    /// (also for an evaluation never started here: nothing to do).
    pub fn done(&self, key: &EvalKey) {
        self.started().remove(key);
    }

    /// The job a free worker starts, taken out of `pending` (schedule
    /// order): the first of the next [`LOOKAHEAD`] whose group is not busy,
    /// else the first.
    pub fn take_next<T>(&self, pending: &mut VecDeque<(Job, T)>) -> Option<(Job, T)> {
        let busy: Vec<EnvGroup> = self.started().values().cloned().collect();
        let free = pending
            .iter()
            .take(LOOKAHEAD)
            .position(|(job, _)| !busy.contains(&EnvGroup::of(job)))
            .unwrap_or(0);
        pending.remove(free)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{Instance, Prediction};
    use std::sync::Arc;

    fn job(id: &str, version: &str) -> (Job, ()) {
        let instance: Instance = serde_json::from_value(serde_json::json!({
            "instance_id": id, "repo": "acme/widgets", "version": version,
            "base_commit": "0".repeat(40),
        }))
        .unwrap();
        (
            Job::new(Arc::new(instance), Prediction::new(id, "m", None)),
            (),
        )
    }

    fn order(p: &Preparing, mut pending: VecDeque<(Job, ())>, finish_first: bool) -> Vec<String> {
        let mut started = Vec::new();
        while let Some((j, ())) = p.take_next(&mut pending) {
            p.start(&j);
            if finish_first {
                p.done(&j.key());
            }
            started.push(j.instance.instance_id.clone());
        }
        started
    }

    #[test]
    fn a_version_preparing_lets_the_next_other_version_start_first() {
        let pending: VecDeque<_> = [
            job("a1", "1.0"),
            job("a2", "1.0"),
            job("b1", "2.0"),
            job("a3", "1.0"),
            job("c1", "3.0"),
        ]
        .into();
        // Nothing ever done: each start takes the next version not yet
        // started, then the rest in order.
        assert_eq!(
            order(&Preparing::default(), pending.clone(), false),
            ["a1", "b1", "c1", "a2", "a3"]
        );
        // Each environment ready before the next worker is free (a warm
        // run): the schedule's order.
        assert_eq!(
            order(&Preparing::default(), pending, true),
            ["a1", "a2", "b1", "a3", "c1"]
        );
    }

    #[test]
    fn another_version_beyond_the_lookahead_waits_its_turn() {
        let p = Preparing::default();
        let mut pending: VecDeque<_> = (0..=LOOKAHEAD)
            .map(|i| job(&format!("a{i}"), "1.0"))
            .chain([job("b1", "2.0")])
            .collect();
        let (a0, ()) = p.take_next(&mut pending).unwrap();
        p.start(&a0);
        // b1 is 65th in line: out of sight, so the next in order goes.
        let (next, ()) = p.take_next(&mut pending).unwrap();
        assert_eq!(next.instance.instance_id, "a1");
        // One job fewer in front of it: now it is seen.
        p.start(&next);
        let (next, ()) = p.take_next(&mut pending).unwrap();
        assert_eq!(next.instance.instance_id, "b1");
    }

    #[test]
    fn done_frees_the_group_and_the_same_version_goes_next() {
        let p = Preparing::default();
        let mut pending: VecDeque<_> =
            [job("a1", "1.0"), job("a2", "1.0"), job("b1", "2.0")].into();
        let (a1, ()) = p.take_next(&mut pending).unwrap();
        p.start(&a1);
        p.done(&a1.key());
        let (next, ()) = p.take_next(&mut pending).unwrap();
        assert_eq!(next.instance.instance_id, "a2");
        // Another repository's same version is another group.
        let other: Instance = serde_json::from_value(serde_json::json!({
            "instance_id": "o1", "repo": "acme/other", "version": "1.0",
            "base_commit": "0".repeat(40),
        }))
        .unwrap();
        p.start(&next);
        let mut pending: VecDeque<_> = [
            job("a3", "1.0"),
            (
                Job::new(Arc::new(other), Prediction::new("o1", "m", None)),
                (),
            ),
        ]
        .into();
        let (j, ()) = p.take_next(&mut pending).unwrap();
        assert_eq!(j.instance.instance_id, "o1");
        assert!(p.take_next(&mut VecDeque::<(Job, ())>::new()).is_none());
    }
}
