//! `patchgrade serve`: grading as a service over the run's engine. One
//! [`Service`] holds the board of evaluations (`state`), records each
//! accepted one in the run folder before acknowledging it
//! (`rundir::serve`), and feeds them one at a time to
//! [`Runner::evaluate_job`] under the worker limit. `request` reads
//! submissions, `metrics` renders /metrics, `http` is the axum router.

pub mod http;
pub mod metrics;
pub mod request;
pub mod state;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::{mpsc, watch, Notify, Semaphore};

use crate::backend::docker::events::ImageEvent;
use crate::dataset::{Dataset, Instance};
use crate::outcome::Outcome;
use crate::rundir::serve::{Accepted, Known, ServeDir, Stored};
use crate::rundir::RunDirError;
use crate::runner::jobs::Job;
use crate::runner::{RunEvent, Runner};
use request::RequestError;
use state::{Board, Entry, Plan, Refused, State};

/// How the service takes requests.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Queued evaluations at most; beyond, submissions get 429.
    pub queue_limit: usize,
    /// Bearer token required for everything but /healthz and /readyz.
    pub token: Option<String>,
    /// Largest request body, bytes.
    pub max_body: usize,
}

/// The service could not start on its run folder.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the service's run folder: {0}")]
    Folder(#[from] RunDirError),
}

/// Why a submission was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("the queue is full ({limit} evaluations waiting); retry after {retry_after} s")]
    Full { retry_after: u64, limit: usize },
    #[error("{key} is evaluation {existing}, of another patch; give another sample_id")]
    Conflict { key: String, existing: String },
    #[error("the service is shutting down and accepts no new evaluations")]
    Draining,
    /// The record could not be written: nothing was accepted.
    #[error("cannot record the evaluation: {0}")]
    Unrecorded(String),
}

/// One evaluation as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub id: String,
    pub state: State,
    pub instance_id: String,
    pub model_name_or_path: String,
    pub sample_id: String,
    pub patch_sha256: Option<String>,
    /// Unix milliseconds.
    pub accepted_at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved: Option<bool>,
    /// True when the outcome is an environment or infrastructure failure:
    /// it says nothing about the patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment_failure: Option<bool>,
    /// The run folder's `patchgrade.json` of it, audit included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<serde_json::Value>,
    /// Its result could not be written to the run folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a submission gave: each evaluation, and whether it is new.
pub struct Submitted {
    pub items: Vec<(Status, bool)>,
    /// Asked as a list: answered as one.
    pub batch: bool,
}

/// What a cancel did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// It was queued or running and is cancelled.
    Now,
    /// It had ended already (finished or cancelled).
    Ended(State),
    Unknown,
}

/// The running service.
pub struct Service {
    runner: Arc<Runner>,
    dir: ServeDir,
    instances: HashMap<String, Arc<Instance>>,
    board: Mutex<Board>,
    /// Held from a submission's plan to its admission: the record is on
    /// disk before the board counts it, and the queue limit holds.
    admission: tokio::sync::Mutex<()>,
    /// Bumped on every change of state: long polls wait on it.
    changed: watch::Sender<u64>,
    /// Wakes the dispatcher: something queued, or a shutdown.
    wake: Notify,
    /// Running evaluations' cancel switches, with whether the client
    /// asked (else the shutdown did: back to the queue).
    cancels: Mutex<HashMap<String, (watch::Sender<bool>, bool)>>,
    draining: AtomicBool,
    /// The drain ended: long polls answer at once.
    closed: AtomicBool,
    events: mpsc::UnboundedSender<RunEvent>,
    pub opts: ServeOptions,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Service {
    /// The service over `runner`'s run folder: every evaluation accepted
    /// earlier is finished (its record is there) or queued again. Events
    /// of the evaluations go to the receiver returned.
    pub fn open(
        runner: Arc<Runner>,
        dataset: &Dataset,
        opts: ServeOptions,
    ) -> Result<(Arc<Service>, mpsc::UnboundedReceiver<RunEvent>), ServeError> {
        let dir = ServeDir::new(runner.cfg.rundir.clone());
        let instances: HashMap<String, Arc<Instance>> = dataset
            .instances
            .iter()
            .map(|i| (i.instance_id.clone(), Arc::new(i.clone())))
            .collect();
        // Only pending evaluations come back to memory; ended ones are
        // read from the folder when asked for.
        let mut pending = Vec::new();
        for (a, stored) in dir.accepted()? {
            dir.ensure_key(&a).map_err(|source| RunDirError::Io {
                path: dir.eval_dir(&a).path().to_owned(),
                source,
            })?;
            if stored != Stored::Pending {
                continue;
            }
            if instances.contains_key(&a.instance_id) {
                pending.push(a);
            } else {
                tracing::warn!(
                    "{}: instance {} is not in the dataset: left pending",
                    a.id,
                    a.instance_id
                );
            }
        }
        let mut board = Board::new(opts.queue_limit, runner.cfg.max_workers);
        board.restore(pending);
        let (events, rx) = mpsc::unbounded_channel();
        let service = Service {
            runner,
            dir,
            instances,
            board: Mutex::new(board),
            admission: tokio::sync::Mutex::new(()),
            changed: watch::channel(0).0,
            wake: Notify::new(),
            cancels: Mutex::new(HashMap::new()),
            draining: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            events,
            opts,
        };
        Ok((Arc::new(service), rx))
    }

    fn board(&self) -> MutexGuard<'_, Board> {
        lock(&self.board)
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// (queued, running) now.
    pub fn load(&self) -> (usize, usize) {
        let b = self.board();
        (b.queued(), b.running())
    }

    /// Count a refusal the HTTP layer made (`unauthorized`, a bad body).
    pub fn refused(&self, reason: &'static str) {
        self.board().counters.refuse(reason);
    }

    /// Accept the evaluations a request body asks for: each recorded in
    /// the run folder before this returns; known ones answered as they
    /// stand.
    pub async fn submit(&self, body: &[u8]) -> Result<Submitted, SubmitError> {
        let limits = request::Limits {
            timeout: self.runner.cfg.timeout,
        };
        let (batch, is_batch) =
            request::parse_submission(body, |id| self.instances.contains_key(id), &limits)
                .inspect_err(|_| self.refused("bad_request"))?;
        if self.is_draining() {
            self.refused("draining");
            return Err(SubmitError::Draining);
        }
        let _admitting = self.admission.lock().await;
        // Only admission adds to the board, and it is held: what the board
        // lacks now has ended (its end on disk) or was never accepted.
        let unheld: Vec<Accepted> = {
            let b = self.board();
            batch.iter().filter(|a| !b.holds(&a.id)).cloned().collect()
        };
        let dir = self.dir.clone();
        let looked = tokio::task::spawn_blocking(move || {
            unheld
                .iter()
                .map(|a| Ok((a.id.clone(), dir.known(a)?)))
                .collect::<Result<HashMap<String, Known>, RunDirError>>()
        })
        .await;
        let on_disk = match looked {
            Ok(Ok(k)) => k,
            Ok(Err(e)) => return Err(SubmitError::Unrecorded(e.to_string())),
            Err(e) => return Err(SubmitError::Unrecorded(e.to_string())),
        };
        let known: Vec<Known> = batch
            .iter()
            .map(|a| on_disk.get(&a.id).cloned().unwrap_or(Known::Absent))
            .collect();
        let planned = self.board().plan(&batch, &known);
        let plans = planned.map_err(|r| {
            let mut b = self.board();
            match r {
                Refused::Full { retry_after, limit } => {
                    b.counters.refuse("queue_full");
                    SubmitError::Full { retry_after, limit }
                }
                Refused::Conflict { key, existing } => {
                    b.counters.refuse("conflict");
                    SubmitError::Conflict {
                        key: key.to_string(),
                        existing,
                    }
                }
            }
        })?;
        let to_write: Vec<Accepted> = batch
            .iter()
            .zip(&plans)
            .filter(|(_, p)| **p != Plan::Existing)
            .map(|(a, _)| a.clone())
            .collect();
        if !to_write.is_empty() {
            let dir = self.dir.clone();
            let written = tokio::task::spawn_blocking(move || {
                to_write.iter().try_for_each(|a| dir.write_accepted(a))
            })
            .await;
            match written {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(SubmitError::Unrecorded(e.to_string())),
                Err(e) => return Err(SubmitError::Unrecorded(e.to_string())),
            }
        }
        let ids: Vec<(String, bool)> = {
            let mut b = self.board();
            batch
                .into_iter()
                .zip(plans)
                .map(|(a, plan)| {
                    let id = a.id.clone();
                    b.admit(a, plan);
                    (id, plan != Plan::Existing)
                })
                .collect()
        };
        self.wake.notify_one();
        self.bump();
        let items = ids
            .into_iter()
            .filter_map(|(id, new)| Some((self.status(&id, false)?, new)))
            .collect();
        Ok(Submitted {
            items,
            batch: is_batch,
        })
    }

    /// An evaluation as it stands: from the board while it is live, else
    /// from the run folder.
    fn entry(&self, id: &str) -> Option<(Entry, Option<usize>)> {
        {
            let b = self.board();
            if let Some(e) = b.get(id) {
                let pos = (e.state == State::Queued).then(|| b.position(id)).flatten();
                return Some((e.clone(), pos));
            }
        }
        let read = |id| -> Result<Option<Entry>, RunDirError> {
            let Some(accepted) = self.dir.read(id, false)? else {
                return Ok(None);
            };
            let (state, outcome) = match self.dir.stored(&accepted)? {
                Stored::Finished => (
                    State::Finished,
                    self.dir.eval_dir(&accepted).record()?.map(|r| r.outcome),
                ),
                Stored::Cancelled => (State::Cancelled, None),
                // Not on the board: its instance is not in the dataset, or
                // a cancelled one is being queued again this moment.
                Stored::Pending => (State::Queued, None),
            };
            Ok(Some(Entry {
                accepted,
                state,
                outcome,
                unwritten: None,
            }))
        };
        match read(id) {
            Ok(e) => e.map(|e| (e, None)),
            Err(e) => {
                tracing::warn!("evaluation {id}: {e}");
                None
            }
        }
    }

    /// An evaluation as it stands; `record`: with its record when finished.
    pub fn status(&self, id: &str, record: bool) -> Option<Status> {
        let (entry, position) = self.entry(id)?;
        Some(self.status_of(entry, position, record))
    }

    fn status_of(&self, entry: Entry, position: Option<usize>, record: bool) -> Status {
        let a = &entry.accepted;
        let outcome = entry.outcome;
        Status {
            id: a.id.clone(),
            state: entry.state,
            instance_id: a.instance_id.clone(),
            model_name_or_path: a.model_name_or_path.clone(),
            sample_id: a.sample_id.clone(),
            patch_sha256: a.patch_sha256.clone(),
            accepted_at: a.accepted_at,
            queue_position: position,
            outcome,
            resolved: outcome.map(|o| o == Outcome::Resolved),
            environment_failure: outcome.map(|o| !o.counts_for_model()),
            record: (record && entry.state == State::Finished)
                .then(|| self.dir.record_json(a))
                .flatten(),
            error: entry.unwritten.clone(),
        }
    }

    /// Every evaluation, oldest first, of one state or all; at most
    /// `limit`. Queued and running ones are the board's; the others are
    /// read from the run folder (a scan of `.serve/accepted`).
    /// The evaluations in `state` (all without), oldest first: at most
    /// `limit` of them after the one with id `after` (from the start
    /// without), the number in `state`, and the id to pass as `after` for
    /// the next page when more follow. An `after` that names no evaluation
    /// is None.
    pub fn list(
        &self,
        state: Option<State>,
        limit: usize,
        after: Option<&str>,
    ) -> Option<(Vec<Status>, usize, Option<String>)> {
        let mut entries: Vec<(Entry, Option<usize>)> = {
            let b = self.board();
            b.list(state)
                .into_iter()
                .map(|e| (e.clone(), b.position(&e.accepted.id)))
                .collect()
        };
        if !matches!(state, Some(State::Queued | State::Running)) {
            let ids = self.dir.ids().unwrap_or_else(|e| {
                tracing::warn!("listing evaluations: {e}");
                Vec::new()
            });
            for id in ids {
                if self.board().holds(&id) {
                    continue;
                }
                if let Some((e, _)) = self.entry(&id) {
                    if state.is_none_or(|s| e.state == s) {
                        entries.push((e, None));
                    }
                }
            }
        }
        entries.sort_by(|(a, _), (b, _)| {
            (a.accepted.accepted_at, &a.accepted.id).cmp(&(b.accepted.accepted_at, &b.accepted.id))
        });
        let total = entries.len();
        let start = match after {
            None => 0,
            // The cursor's own place, even when it is in another state now:
            // its acceptance time and id order it among these.
            Some(id) => {
                let (cursor, _) = self.entry(id)?;
                let key = (cursor.accepted.accepted_at, cursor.accepted.id.clone());
                entries.partition_point(|(e, _)| {
                    (e.accepted.accepted_at, e.accepted.id.clone()) <= key
                })
            }
        };
        let more = entries.len() > start.saturating_add(limit);
        let items: Vec<Status> = entries
            .into_iter()
            .skip(start)
            .take(limit)
            .map(|(e, pos)| self.status_of(e, pos, false))
            .collect();
        let next = if more {
            items.last().map(|s| s.id.clone())
        } else {
            None
        };
        Some((items, total, next))
    }

    /// Wait (at most `timeout`) until the evaluation ends.
    pub async fn wait(&self, id: &str, timeout: Duration) -> Option<Status> {
        let mut changes = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let live = self.board().get(id).map(|e| e.state);
            let state = match live {
                Some(s) => s,
                // Not live: ended (or pending off the board), so no change
                // is coming to wait for.
                None => self.entry(id)?.0.state,
            };
            if live.is_none() || state.is_final() || self.closed.load(Ordering::SeqCst) {
                break;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                _ => break,
            }
        }
        self.status(id, true)
    }

    /// Cancel a queued or running evaluation (recorded: a restart does not
    /// queue it again).
    pub async fn cancel(&self, id: &str) -> Result<Cancelled, SubmitError> {
        let live = self.board().get(id).map(|e| e.state);
        let state = match live {
            Some(s) => s,
            None => match self.entry(id) {
                None => return Ok(Cancelled::Unknown),
                Some((e, _)) => e.state,
            },
        };
        if state.is_final() {
            return Ok(Cancelled::Ended(state));
        }
        let dir = self.dir.clone();
        let owned = id.to_string();
        tokio::task::spawn_blocking(move || dir.write_cancelled(&owned))
            .await
            .map_err(|e| SubmitError::Unrecorded(e.to_string()))?
            .map_err(|e| SubmitError::Unrecorded(e.to_string()))?;
        // Pending off the board: recorded cancelled, nothing to stop.
        if live.is_some() && !self.board().cancel_queued(id) {
            // Running: its evaluation stops and reports back (its switch
            // may not be set yet if it has only just started).
            let mut changes = self.changed.subscribe();
            while self
                .board()
                .get(id)
                .is_some_and(|e| e.state == State::Running)
            {
                if let Some((switch, by_client)) = lock(&self.cancels).get_mut(id) {
                    *by_client = true;
                    let _ = switch.send(true);
                }
                let _ = tokio::time::timeout(Duration::from_millis(100), changes.changed()).await;
            }
        }
        self.bump();
        Ok(Cancelled::Now)
    }

    /// Start queued evaluations as workers free up, until the drain.
    pub async fn dispatch(self: Arc<Self>) {
        let workers = Arc::new(Semaphore::new(self.runner.cfg.max_workers.max(1)));
        loop {
            let Ok(permit) = workers.clone().acquire_owned().await else {
                return;
            };
            let next = loop {
                if self.is_draining() {
                    return;
                }
                if let Some(a) = self.board().start_next() {
                    break a;
                }
                self.wake.notified().await;
            };
            self.bump();
            let this = self.clone();
            tokio::spawn(async move {
                this.evaluate(next).await;
                drop(permit);
            });
        }
    }

    async fn evaluate(&self, a: Accepted) {
        let Some(instance) = self.instances.get(&a.instance_id).cloned() else {
            // The dataset lost the instance since it was accepted (a restart
            // on another dataset): it stays queued on disk.
            tracing::warn!("{}: instance {} not in the dataset", a.id, a.instance_id);
            self.board().forget(&a.id);
            return;
        };
        let mut job = Job::new(instance, a.prediction());
        job.sample = Some(a.sample_id.clone());
        job.overrides = a.options.clone();
        let (switch, cancel) = watch::channel(false);
        lock(&self.cancels).insert(a.id.clone(), (switch, false));
        let started = Instant::now();
        let ran = self.runner.evaluate_job(&job, &self.events, cancel).await;
        let by_client = lock(&self.cancels)
            .remove(&a.id)
            .is_some_and(|(_, by_client)| by_client);
        match ran {
            Some((record, reused)) => {
                let unwritten = match self.dir.stored(&a) {
                    Ok(Stored::Finished) => None,
                    _ => Some(format!(
                        "its result could not be written to {}",
                        self.dir.eval_dir(&a).path().display()
                    )),
                };
                let seconds = started.elapsed().as_secs_f64();
                self.board()
                    .finish(&a.id, record.outcome, seconds, reused, unwritten);
            }
            None => self.board().stopped(&a.id, by_client),
        }
        self.bump();
    }

    /// Shutdown: no new submissions or starts; running evaluations get
    /// `grace` to finish, then are stopped (they stay queued on disk for
    /// the next start). Long polls answer once it is done.
    pub async fn drain(&self, grace: Duration) {
        self.draining.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        self.bump();
        let idle = |s: &Service| s.board().running() == 0;
        let mut changes = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + grace;
        while !idle(self) {
            if tokio::time::timeout_at(deadline, changes.changed())
                .await
                .is_err()
            {
                break;
            }
        }
        if !idle(self) {
            for (switch, _) in lock(&self.cancels).values() {
                let _ = switch.send(true);
            }
            while !idle(self) {
                if changes.changed().await.is_err() {
                    break;
                }
            }
        }
        self.closed.store(true, Ordering::SeqCst);
        self.bump();
    }

    /// Changes of state from now on (each one bumps the value).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The drain is over: streams and long polls end.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// An event of the Docker backend's image cache: lookups are counted
    /// for /metrics; the others are lines for stderr.
    pub fn image_event(&self, event: &ImageEvent) {
        match event {
            ImageEvent::Looked { tier, hit } => self.board().counters.image(*tier, *hit),
            other => eprintln!("{other}"),
        }
    }

    /// The /metrics text.
    pub fn metrics(&self) -> String {
        metrics::render(&self.board(), self.is_draining())
    }
}
