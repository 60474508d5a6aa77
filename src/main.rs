use clap::Parser;
use patchgrade::cli::{self, exit, Cli, Command};

fn main() {
    let cli = Cli::parse();
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
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(exit::INFRA);
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Command::Run(args) => cli::run(args).await,
            Command::Validate(args) => cli::validate(args).await,
            Command::Audit(args) => cli::audit(args).await,
            Command::Report(args) => patchgrade::passk::report(args),
            Command::Select(args) => patchgrade::select::select(args).await,
        }
    });
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            e.exit_code()
        }
    };
    std::process::exit(code);
}
