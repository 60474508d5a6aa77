//! The service's table of live evaluations and its bounded queue: plain
//! code, no I/O. The async side ([`super::Service`]) holds it under a lock,
//! asks the run folder what it knows of a submission ([`Known`]), writes
//! the durable record between [`Board::plan`] and [`Board::admit`], and
//! feeds the workers from [`Board::start_next`]. An evaluation leaves the
//! board when it ends: the run folder holds it from then on, so memory
//! does not grow with the evaluations served.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Serialize;

use crate::backend::docker::images::Tier;
use crate::key::EvalKey;
use crate::outcome::Outcome;
use crate::rundir::serve::{Accepted, Known, Stored};

/// Where an evaluation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Queued,
    Running,
    Finished,
    Cancelled,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Running => "running",
            State::Finished => "finished",
            State::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<State> {
        [
            State::Queued,
            State::Running,
            State::Finished,
            State::Cancelled,
        ]
        .into_iter()
        .find(|s| s.name() == text)
    }

    /// It will change no more (unless submitted again, for a cancel).
    pub fn is_final(self) -> bool {
        matches!(self, State::Finished | State::Cancelled)
    }
}

/// One live evaluation (queued or running), or a finished one whose
/// result could not be written (the folder cannot tell it).
#[derive(Debug, Clone)]
pub struct Entry {
    /// The patch is dropped once it ended (the run folder has it).
    pub accepted: Accepted,
    pub state: State,
    pub outcome: Option<Outcome>,
    /// Its result could not be written (the message names the path).
    pub unwritten: Option<String>,
}

/// What a submission of one evaluation comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// New: to record and queue.
    New,
    /// Known and not cancelled: the existing evaluation is the answer.
    Existing,
    /// Cancelled earlier: queued again.
    Requeue,
}

/// Why a submission is refused as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The queue has no room: try again after this many seconds.
    Full { retry_after: u64, limit: usize },
    /// Another patch was submitted with the same key (model, instance,
    /// sample): one folder holds one evaluation.
    Conflict { key: EvalKey, existing: String },
}

/// Upper bounds (seconds) of the evaluation-time histogram.
pub const BUCKETS: [f64; 12] = [
    0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// What /metrics counts.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    pub accepted: u64,
    /// Refusals by reason (`queue_full`, `conflict`, `bad_request`,
    /// `unauthorized`, `draining`).
    pub refused: BTreeMap<&'static str, u64>,
    pub finished: BTreeMap<Outcome, u64>,
    pub cancelled: u64,
    /// Results reused from the run folder (the runner's result cache).
    pub reused: u64,
    /// Docker image lookups by tier: found in the engine (hits) or built
    /// (misses).
    pub image_hits: BTreeMap<Tier, u64>,
    pub image_misses: BTreeMap<Tier, u64>,
    /// Cumulative counts per bucket of [`BUCKETS`], then the sum and count.
    pub seconds_buckets: [u64; BUCKETS.len()],
    pub seconds_sum: f64,
    pub seconds_count: u64,
}

impl Counters {
    pub fn observe(&mut self, seconds: f64) {
        for (i, le) in BUCKETS.iter().enumerate() {
            if seconds <= *le {
                self.seconds_buckets[i] += 1;
            }
        }
        self.seconds_sum += seconds;
        self.seconds_count += 1;
    }

    /// An image lookup of the Docker backend.
    pub fn image(&mut self, tier: Tier, hit: bool) {
        let counts = if hit {
            &mut self.image_hits
        } else {
            &mut self.image_misses
        };
        *counts.entry(tier).or_default() += 1;
    }

    pub fn refuse(&mut self, reason: &'static str) {
        *self.refused.entry(reason).or_default() += 1;
    }
}

/// The live evaluations, by id, and the queue of those waiting.
#[derive(Debug)]
pub struct Board {
    entries: HashMap<String, Entry>,
    queue: VecDeque<String>,
    queue_limit: usize,
    workers: usize,
    running: usize,
    pub counters: Counters,
}

impl Board {
    pub fn new(queue_limit: usize, workers: usize) -> Board {
        Board {
            entries: HashMap::new(),
            queue: VecDeque::new(),
            queue_limit: queue_limit.max(1),
            workers: workers.max(1),
            running: 0,
            counters: Counters::default(),
        }
    }

    /// What a restart found pending on disk, oldest first, queued again
    /// (the queue limit does not apply to them: they were accepted).
    pub fn restore(&mut self, pending: Vec<Accepted>) {
        for accepted in pending {
            self.enqueue(accepted);
        }
    }

    /// A new entry, queued.
    fn enqueue(&mut self, accepted: Accepted) {
        self.queue.push_back(accepted.id.clone());
        self.entries.insert(
            accepted.id.clone(),
            Entry {
                accepted,
                state: State::Queued,
                outcome: None,
                unwritten: None,
            },
        );
    }

    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.entries.get(id)
    }

    /// Whether the board holds `id` (else the run folder knows it, or
    /// nobody does).
    pub fn holds(&self, id: &str) -> bool {
        self.entries.contains_key(id)
    }

    /// How many evaluations the board holds (live, or unwritten).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    pub fn running(&self) -> usize {
        self.running
    }

    /// The evaluations the board holds, optionally of one state, in no
    /// order.
    pub fn list(&self, state: Option<State>) -> Vec<&Entry> {
        self.entries
            .values()
            .filter(|e| state.is_none_or(|s| e.state == s))
            .collect()
    }

    /// 1-based place in the queue.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.queue.iter().position(|q| q == id).map(|p| p + 1)
    }

    /// What each submission comes to, or why the whole batch is refused:
    /// a key taken by another patch, or more new evaluations than the
    /// queue has room for. `known[i]` is what the run folder knows of
    /// `batch[i]`; the board's own live evaluations come first.
    pub fn plan(&self, batch: &[Accepted], known: &[Known]) -> Result<Vec<Plan>, Refused> {
        let mut plans = Vec::with_capacity(batch.len());
        let mut new = 0;
        for (i, a) in batch.iter().enumerate() {
            let plan = if self.entries.contains_key(&a.id) {
                Plan::Existing
            } else {
                match known.get(i).unwrap_or(&Known::Absent) {
                    Known::Absent => Plan::New,
                    Known::Accepted(Stored::Finished) => Plan::Existing,
                    // Cancelled, or pending and not queued (its instance
                    // had left the dataset): queued again.
                    Known::Accepted(_) => Plan::Requeue,
                    Known::KeyTaken(existing) => {
                        return Err(Refused::Conflict {
                            key: a.key(),
                            existing: existing.clone(),
                        })
                    }
                }
            };
            if plan != Plan::Existing {
                new += 1;
            }
            plans.push(plan);
        }
        if new > 0 && self.queue.len() + new > self.queue_limit {
            return Err(Refused::Full {
                retry_after: self.retry_after(),
                limit: self.queue_limit,
            });
        }
        Ok(plans)
    }

    /// Seconds until room is likely: the queue ahead over the workers at
    /// the mean evaluation time seen so far (5 s before any), 1 to 600.
    pub fn retry_after(&self) -> u64 {
        let c = &self.counters;
        let mean = if c.seconds_count == 0 {
            5.0
        } else {
            c.seconds_sum / c.seconds_count as f64
        };
        let ahead = (self.queue.len() + 1) as f64 / self.workers as f64;
        (mean * ahead).ceil().clamp(1.0, 600.0) as u64
    }

    /// Record a planned submission once its record is on disk.
    pub fn admit(&mut self, accepted: Accepted, plan: Plan) {
        if plan == Plan::Existing || self.entries.contains_key(&accepted.id) {
            // Known, or the same submission twice in one batch.
            return;
        }
        self.counters.accepted += 1;
        self.enqueue(accepted);
    }

    /// The next queued evaluation, now running.
    pub fn start_next(&mut self) -> Option<Accepted> {
        while let Some(id) = self.queue.pop_front() {
            if let Some(e) = self.entries.get_mut(&id) {
                if e.state == State::Queued {
                    e.state = State::Running;
                    self.running += 1;
                    return Some(e.accepted.clone());
                }
            }
        }
        None
    }

    /// A running evaluation ended with a record: it leaves the board
    /// (the run folder has it), unless the record could not be written.
    pub fn finish(
        &mut self,
        id: &str,
        outcome: Outcome,
        seconds: f64,
        reused: bool,
        unwritten: Option<String>,
    ) {
        self.leave_running(id);
        match unwritten {
            None => {
                self.entries.remove(id);
            }
            Some(message) => {
                if let Some(e) = self.entries.get_mut(id) {
                    e.state = State::Finished;
                    e.outcome = Some(outcome);
                    e.unwritten = Some(message);
                    e.accepted.model_patch = None;
                }
            }
        }
        *self.counters.finished.entry(outcome).or_default() += 1;
        if reused {
            self.counters.reused += 1;
        } else {
            self.counters.observe(seconds);
        }
    }

    /// A running evaluation stopped without a record: cancelled by its
    /// client (it leaves the board; the folder records the cancel), or
    /// (on shutdown) back to the queue for the next start.
    pub fn stopped(&mut self, id: &str, cancelled: bool) {
        self.leave_running(id);
        if cancelled {
            self.entries.remove(id);
            self.counters.cancelled += 1;
        } else if let Some(e) = self.entries.get_mut(id) {
            e.state = State::Queued;
            self.queue.push_front(id.to_string());
        }
    }

    /// A running evaluation that cannot run here (its instance is not in
    /// the dataset): it leaves the board and stays pending on disk.
    pub fn forget(&mut self, id: &str) {
        self.leave_running(id);
        self.entries.remove(id);
    }

    fn leave_running(&mut self, id: &str) {
        if self
            .entries
            .get(id)
            .is_some_and(|e| e.state == State::Running)
        {
            self.running -= 1;
        }
    }

    /// Cancel a queued evaluation (taken off the queue and the board at
    /// once; the caller recorded the cancel). Running ones are stopped by
    /// the caller, then [`Board::stopped`].
    pub fn cancel_queued(&mut self, id: &str) -> bool {
        if self
            .entries
            .get(id)
            .is_none_or(|e| e.state != State::Queued)
        {
            return false;
        }
        self.entries.remove(id);
        self.queue.retain(|q| q != id);
        self.counters.cancelled += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(instance: &str, patch: &str) -> Accepted {
        Accepted::new(instance, "m", None, Some(patch), Default::default())
    }

    fn absent(n: usize) -> Vec<Known> {
        vec![Known::Absent; n]
    }

    #[test]
    fn the_same_submission_is_the_same_evaluation_and_a_full_queue_refuses() {
        let mut b = Board::new(2, 1);
        let (x, y, z) = (sub("i", "a"), sub("i", "b"), sub("j", "a"));
        let one = std::slice::from_ref(&x);
        assert_eq!(b.plan(one, &absent(1)).unwrap(), vec![Plan::New]);
        b.admit(x.clone(), Plan::New);
        // Queued: the board answers, whatever the folder says.
        assert_eq!(b.plan(one, &absent(1)).unwrap(), vec![Plan::Existing]);
        b.admit(x.clone(), Plan::New);
        assert_eq!(b.queued(), 1);
        // Room for one more, not two: the batch is refused whole.
        let full = b.plan(&[y.clone(), z.clone()], &absent(2)).unwrap_err();
        assert!(
            matches!(
                full,
                Refused::Full {
                    limit: 2,
                    retry_after: 10
                }
            ),
            "{full:?}"
        );
        // An existing one is answered even with a full queue, finished
        // ones (known from the folder) too.
        b.admit(y.clone(), Plan::New);
        assert_eq!(b.plan(one, &absent(1)).unwrap(), vec![Plan::Existing]);
        let done = [Known::Accepted(Stored::Finished)];
        assert_eq!(
            b.plan(std::slice::from_ref(&z), &done).unwrap(),
            vec![Plan::Existing]
        );
        assert_eq!(b.position(&y.id), Some(2));
    }

    #[test]
    fn a_key_the_folder_says_is_taken_conflicts() {
        let b = Board::new(5, 1);
        let other = Accepted::new("i", "m", Some("1"), Some("b"), Default::default());
        let known = [Known::KeyTaken("0123456789abcdef".into())];
        match b.plan(std::slice::from_ref(&other), &known).unwrap_err() {
            Refused::Conflict { existing, key } => {
                assert_eq!(existing, "0123456789abcdef");
                assert_eq!(key.to_string(), "m/i@1");
            }
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn ended_evaluations_leave_the_board() {
        let mut b = Board::new(5, 2);
        let (x, y, z) = (sub("i", "a"), sub("i", "b"), sub("j", "c"));
        for a in [&x, &y, &z] {
            b.admit(a.clone(), Plan::New);
        }
        assert!(b.cancel_queued(&y.id));
        assert!(!b.holds(&y.id));
        assert_eq!(b.start_next().unwrap().id, x.id);
        assert_eq!(b.start_next().unwrap().id, z.id);
        assert!(b.start_next().is_none());
        assert!(!b.cancel_queued(&x.id), "running: the caller stops it");
        b.finish(&x.id, Outcome::Resolved, 3.0, false, None);
        assert!(!b.holds(&x.id), "finished: the folder has it");
        b.stopped(&z.id, false);
        assert_eq!((b.running(), b.queued(), b.len()), (0, 1, 1));
        assert_eq!(b.counters.seconds_count, 1);
        assert_eq!(b.counters.seconds_buckets[..4], [0, 0, 0, 1]);
        assert_eq!(b.counters.finished[&Outcome::Resolved], 1);
        // A cancelled one submitted again (the folder knows it) is queued.
        let cancelled = [Known::Accepted(Stored::Cancelled)];
        let again = std::slice::from_ref(&y);
        assert_eq!(b.plan(again, &cancelled).unwrap(), vec![Plan::Requeue]);
        b.admit(y.clone(), Plan::Requeue);
        assert_eq!(b.get(&y.id).unwrap().state, State::Queued);
        assert_eq!(b.list(Some(State::Queued)).len(), 2);
        // Stopped by its client while running: gone, counted.
        let started = b.start_next().unwrap();
        b.stopped(&started.id, true);
        assert!(!b.holds(&started.id));
        assert_eq!((b.running(), b.counters.cancelled), (0, 2));
    }

    #[test]
    fn a_result_that_could_not_be_written_stays_on_the_board() {
        let mut b = Board::new(5, 1);
        let x = sub("i", "a");
        b.admit(x.clone(), Plan::New);
        b.start_next();
        b.finish(&x.id, Outcome::Unresolved, 1.0, false, Some("disk".into()));
        let e = b.get(&x.id).unwrap();
        assert_eq!(
            (e.state, e.outcome, e.unwritten.as_deref()),
            (State::Finished, Some(Outcome::Unresolved), Some("disk"))
        );
        assert!(e.accepted.model_patch.is_none());
        assert_eq!(b.running(), 0);
    }

    #[test]
    fn a_restart_queues_what_was_pending() {
        let mut b = Board::new(1, 1);
        let (y, z) = (sub("i", "b"), sub("j", "c"));
        b.restore(vec![y.clone(), z.clone()]);
        assert_eq!(b.queued(), 2, "accepted before: over the limit is fine");
        assert_eq!(b.start_next().unwrap().id, y.id);
    }
}
