//! The `weir` binary: parses the command line, sets up logging and runs the
//! broker until SIGTERM or SIGINT.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};
use tracing_subscriber::EnvFilter;
use weir_broker::config::BrokerConfig;

/// A Kafka wire-protocol compatible broker.
#[derive(Parser, Debug)]
#[command(name = "weir", version, about)]
struct Cli {
    /// A Kafka-style server.properties file.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// A `key=value` that overrides the file (repeatable), as
    /// kafka-server-start.sh --override.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let config = match BrokerConfig::load(cli.config.as_deref(), &cli.overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("weir: {e}");
            return ExitCode::from(2);
        }
    };
    raise_open_files_limit();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("weir: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        let signals = shutdown.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            info!("signal received");
            signals.cancel();
        });
        match weir_broker::server::run(config, shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                error!("{e:#}");
                eprintln!("weir: {e:#}");
                ExitCode::FAILURE
            }
        }
    })
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Raises the soft limit on open files to the hard limit: every partition
/// keeps its active segment and indexes open (Kafka's documentation asks
/// operators for the same).
fn raise_open_files_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let before = limit.current;
        limit.current = limit.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, limit) {
            tracing::warn!(error = %e, ?before, "cannot raise the open files limit");
        }
    }
}
