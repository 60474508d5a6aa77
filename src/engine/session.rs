//! One pipeline's time under the engine: the reporter that shows its
//! events, the backend's image events sent to it, and Ctrl-C (the first
//! stops the pipeline through its cancel flag, the second removes the
//! backend's containers and drops the pipeline). `run`, `review` and `perf`
//! all go through it.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::{progress, Engine};
use crate::backend::docker::events::ImageEvents;
use crate::runner::{Notice, RunEvent};

/// The reporter and the Ctrl-C watcher of one pipeline.
pub struct Session<'e> {
    engine: &'e Engine,
    events: mpsc::UnboundedSender<RunEvent>,
    cancel: watch::Receiver<bool>,
    abandon: oneshot::Receiver<()>,
    interrupted: Arc<AtomicBool>,
    watcher: JoinHandle<()>,
    reporter: JoinHandle<()>,
}

impl Engine {
    /// Starts the reporter and the Ctrl-C watcher.
    pub fn session(&self) -> Session<'_> {
        let (cancel_tx, cancel) = watch::channel(false);
        let (abandon_tx, abandon) = oneshot::channel::<()>();
        let interrupted = Arc::new(AtomicBool::new(false));
        let (events, rx) = mpsc::unbounded_channel();
        let reporter = tokio::spawn(progress::terminal(rx, self.quiet));
        let watcher = {
            let interrupted = interrupted.clone();
            let say = events.clone();
            let runner = self.runner.clone();
            let scratch = self.runner.cfg.work_root.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    interrupted.store(true, Ordering::SeqCst);
                    let _ = say.send(RunEvent::Notice(Notice::Interrupted));
                    let _ = cancel_tx.send(true);
                    if tokio::signal::ctrl_c().await.is_ok() {
                        // Containers would outlive the process: remove them first.
                        let _ = tokio::time::timeout(
                            Duration::from_secs(10),
                            runner.backend.kill_running(),
                        )
                        .await;
                        // The command exits at once, with nothing run after it.
                        let _ = std::fs::remove_dir_all(&scratch);
                        let _ = abandon_tx.send(());
                    }
                }
            })
        };
        let images = events.clone();
        self.runner
            .backend
            .report_to(Some(ImageEvents::new(move |e| {
                let _ = images.send(RunEvent::Images(e));
            })));
        Session {
            engine: self,
            events,
            cancel,
            abandon,
            interrupted,
            watcher,
            reporter,
        }
    }
}

impl Session<'_> {
    /// Where the pipeline sends its events.
    pub fn events(&self) -> mpsc::UnboundedSender<RunEvent> {
        self.events.clone()
    }

    /// True from the first Ctrl-C on: stop starting work, stop what runs.
    pub fn cancel(&self) -> watch::Receiver<bool> {
        self.cancel.clone()
    }

    /// Whether a first Ctrl-C came.
    pub fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }

    /// Runs `work` to its end, or `None` at a second Ctrl-C (the backend's
    /// containers are removed by then and `work` is dropped).
    pub async fn drive<T>(&mut self, work: impl Future<Output = T>) -> Option<T> {
        tokio::select! {
            done = work => Some(done),
            Ok(()) = &mut self.abandon => None,
        }
    }

    /// Stops watching Ctrl-C (what comes after the pipeline is not stopped
    /// by it); returns whether a first Ctrl-C came.
    pub async fn stop_watching(&mut self) -> bool {
        self.watcher.abort();
        let _ = (&mut self.watcher).await;
        self.interrupted()
    }

    /// Ends the reporter once it showed every event sent.
    pub async fn close(self) {
        self.watcher.abort();
        drop(self.events);
        self.engine.runner.backend.report_to(None);
        let _ = self.reporter.await;
    }
}
