//! The terminal reporter: a progress bar on a terminal, one line per
//! finished evaluation otherwise.

use std::collections::BTreeMap;
use std::io::IsTerminal;

use tokio::sync::mpsc;

use crate::outcome::Outcome;
use crate::runner::{Notice, RunEvent};

/// Terminal reporter: a progress bar on a terminal, one line per finished
/// evaluation otherwise; `quiet`: only the interrupt's notice.
pub(super) async fn terminal(mut rx: mpsc::UnboundedReceiver<RunEvent>, quiet: bool) {
    if quiet {
        // Only what a Ctrl-C does: nothing else says the command heard it.
        while let Some(ev) = rx.recv().await {
            if let RunEvent::Notice(n @ Notice::Interrupted) = ev {
                eprintln!("{n}");
            }
        }
        return;
    }
    let tty = std::io::stderr().is_terminal();
    let mut bar: Option<indicatif::ProgressBar> = None;
    let (mut done, mut total) = (0usize, 0usize);
    let mut counts: BTreeMap<Outcome, usize> = BTreeMap::new();
    // Evaluations per node, for backends that spread them over machines.
    let mut nodes: BTreeMap<String, usize> = BTreeMap::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            RunEvent::Started { total: t, workers } => {
                total = t;
                eprintln!("evaluating {t} predictions with {workers} workers");
                if tty {
                    let b = indicatif::ProgressBar::new(t as u64);
                    b.set_style(
                        indicatif::ProgressStyle::with_template(
                            "{bar:30} {pos}/{len} {elapsed_precise} {msg}",
                        )
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                    );
                    bar = Some(b);
                }
            }
            RunEvent::InstanceStarted { .. } => {}
            RunEvent::InstanceFinished {
                finished: record,
                reused,
            } => {
                done += 1;
                *counts.entry(record.outcome).or_default() += 1;
                let node = record
                    .environment
                    .as_ref()
                    .and_then(|e| e.node())
                    .filter(|_| !reused);
                if let Some(n) = node {
                    *nodes.entry(n.to_string()).or_default() += 1;
                }
                let line = format!(
                    "[{done}/{total}] {} {}{}{}",
                    record.instance_id,
                    record.outcome,
                    if reused { " (reused)" } else { "" },
                    node.map(|n| format!(" [{n}]")).unwrap_or_default()
                );
                match &bar {
                    Some(b) => {
                        b.inc(1);
                        let msg: Vec<String> =
                            counts.iter().map(|(o, n)| format!("{o} {n}")).collect();
                        b.set_message(msg.join(", "));
                        b.println(line);
                    }
                    None => eprintln!("{line}"),
                }
            }
            RunEvent::InstanceCancelled { instance_id } => {
                let line = format!("{instance_id}: stopped, nothing recorded");
                match &bar {
                    Some(b) => b.println(line),
                    None => eprintln!("{line}"),
                }
            }
            RunEvent::Images(event) if event.is_quiet() => {}
            RunEvent::Images(event) => match &bar {
                Some(b) => b.println(event.to_string()),
                None => eprintln!("{event}"),
            },
            RunEvent::Notice(notice) => match &bar {
                Some(b) => b.println(notice.to_string()),
                None => eprintln!("{notice}"),
            },
            RunEvent::Finished { elapsed } => {
                if let Some(b) = bar.take() {
                    b.finish_and_clear();
                }
                eprintln!("finished in {:.1}s", elapsed.as_secs_f64());
                if !nodes.is_empty() {
                    let per: Vec<String> = nodes.iter().map(|(n, c)| format!("{n} {c}")).collect();
                    eprintln!("evaluations per node: {}", per.join(", "));
                }
            }
        }
    }
}
