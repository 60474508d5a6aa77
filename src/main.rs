//! The patchgrade command: parse the arguments, run the command, exit with
//! its documented code (see `error::exit`).

mod cli;
mod commands;
mod error;

use clap::{CommandFactory, FromArgMatches};

use cli::Cli;
use error::{exit, ExpectedError};

fn main() {
    patchgrade::repo::limit_pack_windows();
    patchgrade::heap::tune();
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Which flags the user gave, so a run's recorded setup fills the rest.
    let given = cli::reuse::Given::from_matches(&matches);
    let default = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default.into()),
        )
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    let result = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => {
            // A panic is a bug: reported as an internal error, not a crash
            // code (the panic message is printed by the default hook).
            let run = std::panic::AssertUnwindSafe(|| {
                rt.block_on(commands::dispatch(cli.command, given))
            });
            let result = std::panic::catch_unwind(run)
                .unwrap_or_else(|_| Err(ExpectedError::Internal("patchgrade panicked".into())));
            // Interrupted (a second Ctrl-C leaves evaluations behind): exit
            // now, not once the blocking work still going finishes.
            if matches!(result, Err(ExpectedError::Interrupted)) {
                rt.shutdown_background();
            }
            result
        }
        Err(e) => Err(ExpectedError::infra(anyhow::anyhow!(
            "cannot start the async runtime: {e}"
        ))),
    };
    let code = match result {
        Ok(()) => exit::OK,
        Err(e) => {
            if !e.is_reported() {
                eprintln!("{}: {e:#}", e.label());
            }
            e.exit_code()
        }
    };
    std::process::exit(code);
}
