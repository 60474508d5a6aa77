//! The service's table of evaluations and its bounded queue: plain code,
//! no I/O. The async side ([`super::Service`]) holds it under a lock, writes
//! the durable record between [`Board::plan`] and [`Board::admit`], and
//! feeds the workers from [`Board::next`].

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Serialize;

use crate::key::EvalKey;
use crate::outcome::Outcome;
use crate::rundir::serve::{Accepted, Stored};

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

/// One evaluation the service accepted.
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

    pub fn refuse(&mut self, reason: &'static str) {
        *self.refused.entry(reason).or_default() += 1;
    }
}

/// The table of evaluations, by id, and the queue of those waiting.
#[derive(Debug)]
pub struct Board {
    entries: HashMap<String, Entry>,
    by_key: HashMap<EvalKey, String>,
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
            by_key: HashMap::new(),
            queue: VecDeque::new(),
            queue_limit: queue_limit.max(1),
            workers: workers.max(1),
            running: 0,
            counters: Counters::default(),
        }
    }

    /// What a restart found on disk, oldest first: the pending ones queued
    /// again (the queue limit does not apply to them: they were accepted).
    pub fn restore(&mut self, found: Vec<(Accepted, Stored, Option<Outcome>)>) {
        for (mut accepted, stored, outcome) in found {
            let state = match stored {
                Stored::Finished => State::Finished,
                Stored::Cancelled => State::Cancelled,
                Stored::Pending => State::Queued,
            };
            if state == State::Queued {
                self.queue.push_back(accepted.id.clone());
            } else {
                accepted.model_patch = None;
            }
            self.insert(Entry {
                accepted,
                state,
                outcome,
                unwritten: None,
            });
        }
    }

    fn insert(&mut self, entry: Entry) {
        let id = entry.accepted.id.clone();
        self.by_key.insert(entry.accepted.key(), id.clone());
        self.entries.insert(id, entry);
    }

    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.entries.get(id)
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    pub fn running(&self) -> usize {
        self.running
    }

    /// Every evaluation, oldest first, optionally of one state.
    pub fn list(&self, state: Option<State>) -> Vec<&Entry> {
        let mut out: Vec<&Entry> = self
            .entries
            .values()
            .filter(|e| state.is_none_or(|s| e.state == s))
            .collect();
        out.sort_by(|a, b| {
            (a.accepted.accepted_at, &a.accepted.id).cmp(&(b.accepted.accepted_at, &b.accepted.id))
        });
        out
    }

    /// 1-based place in the queue.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.queue.iter().position(|q| q == id).map(|p| p + 1)
    }

    /// What each submission comes to, or why the whole batch is refused:
    /// a key taken by another patch, or more new evaluations than the
    /// queue has room for.
    pub fn plan(&self, batch: &[Accepted]) -> Result<Vec<Plan>, Refused> {
        let mut plans = Vec::with_capacity(batch.len());
        let mut new = 0;
        for a in batch {
            let plan = match self.entries.get(&a.id) {
                Some(e) if e.state == State::Cancelled => Plan::Requeue,
                Some(_) => Plan::Existing,
                None => {
                    if let Some(existing) = self.by_key.get(&a.key()) {
                        return Err(Refused::Conflict {
                            key: a.key(),
                            existing: existing.clone(),
                        });
                    }
                    Plan::New
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
        if plan == Plan::Existing {
            return;
        }
        let id = accepted.id.clone();
        if plan == Plan::New && self.entries.contains_key(&id) {
            // The same submission raced this one in: already queued.
            return;
        }
        self.counters.accepted += 1;
        self.queue.push_back(id);
        self.insert(Entry {
            accepted,
            state: State::Queued,
            outcome: None,
            unwritten: None,
        });
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

    /// A running evaluation ended with a record.
    pub fn finish(
        &mut self,
        id: &str,
        outcome: Outcome,
        seconds: f64,
        reused: bool,
        unwritten: Option<String>,
    ) {
        self.ended(id, State::Finished, Some(outcome), unwritten);
        *self.counters.finished.entry(outcome).or_default() += 1;
        if reused {
            self.counters.reused += 1;
        } else {
            self.counters.observe(seconds);
        }
    }

    /// A running evaluation stopped without a record: cancelled by its
    /// client, or (on shutdown) back to the queue for the next start.
    pub fn stopped(&mut self, id: &str, cancelled: bool) {
        if cancelled {
            self.ended(id, State::Cancelled, None, None);
            self.counters.cancelled += 1;
        } else {
            self.ended(id, State::Queued, None, None);
            self.queue.push_front(id.to_string());
        }
    }

    fn ended(
        &mut self,
        id: &str,
        state: State,
        outcome: Option<Outcome>,
        unwritten: Option<String>,
    ) {
        if let Some(e) = self.entries.get_mut(id) {
            if e.state == State::Running {
                self.running -= 1;
            }
            e.state = state;
            e.outcome = outcome;
            e.unwritten = unwritten;
            if state.is_final() {
                e.accepted.model_patch = None;
            }
        }
    }

    /// Cancel a queued evaluation (taken off the queue at once). Running
    /// ones are stopped by the caller, then [`Board::stopped`].
    pub fn cancel_queued(&mut self, id: &str) -> bool {
        let Some(e) = self.entries.get_mut(id) else {
            return false;
        };
        if e.state != State::Queued {
            return false;
        }
        e.state = State::Cancelled;
        e.accepted.model_patch = None;
        self.queue.retain(|q| q != id);
        self.counters.cancelled += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(instance: &str, patch: &str) -> Accepted {
        Accepted::new(instance, "m", None, Some(patch))
    }

    #[test]
    fn the_same_submission_is_the_same_evaluation_and_a_full_queue_refuses() {
        let mut b = Board::new(2, 1);
        let (x, y, z) = (sub("i", "a"), sub("i", "b"), sub("j", "a"));
        assert_eq!(b.plan(std::slice::from_ref(&x)).unwrap(), vec![Plan::New]);
        b.admit(x.clone(), Plan::New);
        assert_eq!(
            b.plan(std::slice::from_ref(&x)).unwrap(),
            vec![Plan::Existing]
        );
        b.admit(x.clone(), Plan::New);
        assert_eq!(b.queued(), 1);
        // Room for one more, not two: the batch is refused whole.
        let full = b.plan(&[y.clone(), z.clone()]).unwrap_err();
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
        // An existing one is answered even with a full queue.
        b.admit(y.clone(), Plan::New);
        assert_eq!(
            b.plan(std::slice::from_ref(&x)).unwrap(),
            vec![Plan::Existing]
        );
        assert_eq!(b.position(&y.id), Some(2));
    }

    #[test]
    fn another_patch_under_a_named_sample_conflicts() {
        let mut b = Board::new(5, 1);
        let a = Accepted::new("i", "m", Some("1"), Some("a"));
        b.admit(a.clone(), Plan::New);
        let other = Accepted::new("i", "m", Some("1"), Some("b"));
        match b.plan(&[other]).unwrap_err() {
            Refused::Conflict { existing, key } => {
                assert_eq!(existing, a.id);
                assert_eq!(key.to_string(), "m/i@1");
            }
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn evaluations_run_in_order_end_and_can_be_cancelled_or_requeued() {
        let mut b = Board::new(5, 2);
        let (x, y, z) = (sub("i", "a"), sub("i", "b"), sub("j", "c"));
        for a in [&x, &y, &z] {
            b.admit(a.clone(), Plan::New);
        }
        assert!(b.cancel_queued(&y.id));
        assert_eq!(b.start_next().unwrap().id, x.id);
        assert_eq!(b.start_next().unwrap().id, z.id);
        assert!(b.start_next().is_none());
        assert!(!b.cancel_queued(&x.id), "running: the caller stops it");
        b.finish(&x.id, Outcome::Resolved, 3.0, false, None);
        b.stopped(&z.id, false);
        assert_eq!((b.running(), b.queued()), (0, 1));
        let e = b.get(&x.id).unwrap();
        assert_eq!(
            (e.state, e.outcome),
            (State::Finished, Some(Outcome::Resolved))
        );
        assert!(e.accepted.model_patch.is_none());
        assert_eq!(b.counters.seconds_count, 1);
        assert_eq!(b.counters.seconds_buckets[..4], [0, 0, 0, 1]);
        // A cancelled one submitted again is queued again.
        assert_eq!(
            b.plan(std::slice::from_ref(&y)).unwrap(),
            vec![Plan::Requeue]
        );
        b.admit(y.clone(), Plan::Requeue);
        assert_eq!(b.get(&y.id).unwrap().state, State::Queued);
        let states: Vec<_> = b.list(None).iter().map(|e| e.state).collect();
        assert_eq!(states.len(), 3);
        assert_eq!(b.list(Some(State::Queued)).len(), 2);
    }

    #[test]
    fn a_restart_queues_what_was_pending() {
        let mut b = Board::new(1, 1);
        let (x, y, z) = (sub("i", "a"), sub("i", "b"), sub("j", "c"));
        b.restore(vec![
            (x.clone(), Stored::Finished, Some(Outcome::Unresolved)),
            (y.clone(), Stored::Pending, None),
            (z.clone(), Stored::Pending, None),
        ]);
        assert_eq!(b.queued(), 2, "accepted before: over the limit is fine");
        assert_eq!(b.get(&x.id).unwrap().state, State::Finished);
        assert_eq!(b.start_next().unwrap().id, y.id);
    }
}
