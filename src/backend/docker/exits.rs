//! How a test container ended, from the engine's events: whether the
//! kernel OOM-killed a process in it, whether it was stopped from outside
//! (a daemon shutting down stops its containers, an operator may), and
//! whether the engine went away while it ran. The output of a container
//! stopped from outside just stops; that must not be graded as the
//! candidate's. Processes the tests kill inside the container give no
//! engine event: that stays the candidate's doing.
//!
//! The watch subscribes before the container starts and reads that
//! container's `oom` and `die` events; it does not depend on inspecting the
//! container afterwards (auto-removal races with that).

use std::collections::HashMap;
use std::time::Duration;

use bollard::query_parameters::EventsOptionsBuilder;
use bollard::Docker;
use futures_util::StreamExt;
use tokio::task::JoinHandle;

/// What the events said about the container's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// It died; `oom` when the kernel OOM-killed a process in it first;
    /// `killed` with the signal when the engine was told to signal it
    /// (patchgrade itself only does that after it stopped reading).
    Died { oom: bool, killed: Option<String> },
    /// The event stream broke before the container died: the engine went
    /// away.
    EngineLost(String),
    /// No `die` event within the wait (the answer is not known).
    Unknown,
}

/// A running watch of one container's events.
pub struct ExitWatch {
    task: JoinHandle<Ended>,
}

impl ExitWatch {
    /// Start watching `id` (events since a second ago, so nothing between
    /// this call and the stream's start is missed).
    pub fn start(docker: &Docker, id: &str) -> ExitWatch {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs().saturating_sub(1))
            .unwrap_or(0)
            .to_string();
        let filters = HashMap::from([
            ("container", vec![id.to_string()]),
            ("type", vec!["container".to_string()]),
            (
                "event",
                vec!["oom".to_string(), "kill".to_string(), "die".to_string()],
            ),
        ]);
        let opts = EventsOptionsBuilder::default()
            .since(&since)
            .filters(&filters)
            .build();
        let mut stream = docker.events(Some(opts));
        let task = tokio::spawn(async move {
            let (mut oom, mut killed) = (false, None);
            loop {
                match stream.next().await {
                    Some(Ok(ev)) => match ev.action.as_deref() {
                        Some("oom") => oom = true,
                        Some("kill") => {
                            let signal = ev
                                .actor
                                .and_then(|a| a.attributes)
                                .and_then(|a| a.get("signal").cloned());
                            killed = Some(signal.unwrap_or_else(|| "?".into()));
                        }
                        Some("die") => return Ended::Died { oom, killed },
                        _ => {}
                    },
                    Some(Err(e)) => return Ended::EngineLost(e.to_string()),
                    None => return Ended::EngineLost("the event stream ended".into()),
                }
            }
        });
        ExitWatch { task }
    }

    /// How the container ended, waiting at most `limit` for its `die`.
    pub async fn ended(mut self, limit: Duration) -> Ended {
        match tokio::time::timeout(limit, &mut self.task).await {
            Ok(Ok(e)) => e,
            Ok(Err(e)) => Ended::EngineLost(format!("event watch: {e}")),
            Err(_) => Ended::Unknown,
        }
    }
}

impl Drop for ExitWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
