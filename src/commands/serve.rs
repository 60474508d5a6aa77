//! `patchgrade serve`: the HTTP/JSON grading service (docs/serve.md). Reads
//! the arguments, builds the engine as `run` does, serves until SIGTERM or
//! Ctrl-C, then drains: running evaluations finish (or, past
//! --drain-timeout, stay queued for the next start) and it exits 0.

use std::time::Duration;

use anyhow::anyhow;

use super::{check_eval_scripts, load_dataset};
use crate::cli::ServeArgs;
use crate::error::ExpectedError;
use patchgrade::backend::docker::events::ImageEvents;
use patchgrade::engine::Engine;
use patchgrade::runner::RunEvent;
use patchgrade::serve::{http, ServeOptions, Service};

pub async fn serve(args: ServeArgs) -> Result<(), ExpectedError> {
    if !args.listen.ip().is_loopback() && !args.allow_remote {
        return Err(ExpectedError::bad(anyhow!(
            "--listen {} is not a loopback address: the service runs candidates' code for whoever reaches it; pass --allow-remote (with --token-file) to serve other machines",
            args.listen
        )));
    }
    let token = match &args.token_file {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| ExpectedError::bad(anyhow!("--token-file {}: {e}", path.display())))?;
            let token = text.trim().to_string();
            if token.is_empty() || token.chars().any(char::is_whitespace) {
                return Err(ExpectedError::bad(anyhow!(
                    "--token-file {}: holds no token (one word, no spaces)",
                    path.display()
                )));
            }
            Some(token)
        }
    };
    if args.allow_remote && token.is_none() {
        eprintln!("warning: --allow-remote without --token-file: anyone who reaches {} can run code through it", args.listen);
    }
    let dataset = load_dataset(&args.dataset, &args.instance_ids)?;
    let opts = args.engine.options();
    check_eval_scripts(&opts, args.dataset.path(), dataset.instances.iter())?;
    let engine = Engine::build(&opts, &args.run_id, args.dataset.path())?;
    let serve_opts = ServeOptions {
        queue_limit: args.queue_limit,
        token,
        max_body: args.max_body,
    };
    let (service, events) =
        Service::open(engine.runner.clone(), &dataset, serve_opts).map_err(ExpectedError::bad)?;
    // The backend's image events feed /metrics; weak: the service owns
    // the backend through its runner.
    let images = std::sync::Arc::downgrade(&service);
    engine
        .runner
        .backend
        .report_to(Some(ImageEvents::new(move |e| {
            if let Some(s) = images.upgrade() {
                s.image_event(&e);
            }
        })));
    engine.start().await;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| ExpectedError::bad(anyhow!("cannot listen on {}: {e}", args.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| ExpectedError::infra(anyhow!("the listening socket: {e}")))?;
    let (queued, _) = service.load();
    eprintln!(
        "patchgrade serve: listening on http://{addr} ({} backend, {} instances, {} workers, run folder {}{})",
        engine.backend,
        dataset.instances.len(),
        opts.max_workers.max(1),
        engine.runner.cfg.rundir.path().display(),
        if queued > 0 {
            format!("; {queued} evaluations queued from before")
        } else {
            String::new()
        }
    );
    let printer = tokio::spawn(print_events(events));
    let dispatcher = tokio::spawn(service.clone().dispatch());
    let drain = Duration::from_secs(args.drain_timeout);
    let draining = service.clone();
    let served = axum::serve(listener, http::router(service.clone()))
        .with_graceful_shutdown(async move {
            stop_signal().await;
            eprintln!(
                "patchgrade serve: shutting down: no new evaluations; running ones get {}s to finish",
                drain.as_secs()
            );
            draining.drain(drain).await;
        })
        .await;
    let _ = dispatcher.await;
    engine.finish().await;
    drop(engine);
    printer.abort();
    let (queued, _) = service.load();
    eprintln!("patchgrade serve: stopped; {queued} evaluations stay queued for the next start");
    served.map_err(|e| ExpectedError::infra(anyhow!("the HTTP server: {e}")))
}

/// SIGTERM or Ctrl-C.
async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = term => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// One line on stderr per evaluation that ends.
async fn print_events(mut events: tokio::sync::mpsc::UnboundedReceiver<RunEvent>) {
    while let Some(event) = events.recv().await {
        match event {
            RunEvent::InstanceFinished { finished, reused } => eprintln!(
                "{} {}{}",
                finished.instance_id,
                finished.outcome,
                if reused { " (reused)" } else { "" }
            ),
            RunEvent::InstanceCancelled { instance_id } => eprintln!("{instance_id} stopped"),
            RunEvent::Notice(n) => eprintln!("{n}"),
            _ => {}
        }
    }
}
