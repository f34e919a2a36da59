//! The `weir` binary: parses the command line, sets up logging and runs the
//! broker until SIGTERM or SIGINT. `weir dump-log FILE...` lists segment and
//! index files instead; `weir format` and `weir random-uuid` prepare log
//! directories for a cluster as `kafka-storage format` / `random-uuid`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;
use tracing::{error, info};
use tracing_subscriber::EnvFilter;
use weir_broker::config::BrokerConfig;

/// A Kafka wire-protocol compatible broker.
#[derive(Parser, Debug)]
#[command(name = "weir", version, about)]
struct Cli {
    /// A Kafka-style server.properties file.
    #[arg(long, value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    /// A `key=value` that overrides the file (repeatable), as
    /// kafka-server-start.sh --override.
    #[arg(long = "override", value_name = "KEY=VALUE", global = true)]
    overrides: Vec<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the batches of `.log` files and the entries of `.index` /
    /// `.timeindex` files (offsets, timestamps, producer fields, codec, CRC
    /// status). Exits 1 if any file has a problem.
    DumpLog {
        /// Segment or index files.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Format log.dirs of the node in --config for one cluster, as
    /// `kafka-storage format -t <id> -c <file>`: writes meta.properties
    /// (version 1, cluster.id, node.id, directory.id). Every node of a
    /// multi-voter quorum must be formatted with the same id before it
    /// starts. Refuses a directory that is already formatted.
    Format {
        /// The cluster id, a Kafka UUID (22 base64url characters; see
        /// `weir random-uuid`).
        #[arg(long, short = 't', value_name = "ID", allow_hyphen_values = true)]
        cluster_id: String,
        /// Succeed without writing when the directory is already formatted
        /// with the same cluster id and node id.
        #[arg(long)]
        ignore_formatted: bool,
        /// A SCRAM user the new cluster starts with, as `kafka-storage
        /// format --add-scram`: `SCRAM-SHA-256=[name=alice,password=secret]`
        /// (also `iterations=`, `salt=` base64, `saltedpassword=` base64).
        /// May be repeated. Every controller of the cluster should be
        /// formatted with the same users: the active controller's are the
        /// ones written.
        #[arg(long = "add-scram", short = 'S', value_name = "CREDENTIAL")]
        add_scram: Vec<String>,
    },
    /// Print a new random cluster id (a Kafka UUID: 16 random bytes,
    /// base64url, 22 characters), as `kafka-storage random-uuid`.
    RandomUuid,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::DumpLog { files }) => return dump_log(files),
        Some(Command::RandomUuid) => {
            println!("{}", weir_storage::random_kafka_uuid());
            return ExitCode::SUCCESS;
        }
        Some(Command::Format {
            cluster_id,
            ignore_formatted,
            add_scram,
        }) => return format(&cli, cluster_id, *ignore_formatted, add_scram),
        None => {}
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            // openraft logs every vote and election step at info; its
            // warnings and errors are what an operator needs.
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("info,openraft=warn")),
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
    weir_broker::descriptors::raise_limit();
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

/// `weir format`: formats the first of `log.dirs` (the only one used),
/// writing the bootstrap records of `add_scram` first.
fn format(cli: &Cli, cluster_id: &str, ignore_formatted: bool, add_scram: &[String]) -> ExitCode {
    let config = match BrokerConfig::load(cli.config.as_deref(), &cli.overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("weir: {e}");
            return ExitCode::from(2);
        }
    };
    if !weir_storage::is_kafka_uuid(cluster_id) {
        eprintln!(
            "weir: cluster id {cluster_id:?} is not a Kafka UUID (22 base64url characters \
             encoding 16 bytes); make one with `weir random-uuid`"
        );
        return ExitCode::from(2);
    }
    let log_dir = config.log_dir();
    let mut bootstrap = Vec::new();
    for spec in add_scram {
        match weir_broker::bootstrap::parse_add_scram(spec) {
            Ok(record) => bootstrap.push(record),
            Err(e) => {
                eprintln!("weir: --add-scram: {e}");
                return ExitCode::from(2);
            }
        }
    }
    // The bootstrap file goes in before meta.properties marks the
    // directory formatted; a formatted directory keeps what it has.
    let formatted = matches!(weir_storage::read_meta_properties(&log_dir), Ok(Some(_)));
    if !bootstrap.is_empty() && !formatted {
        if let Err(e) = weir_broker::bootstrap::write(&log_dir, &bootstrap) {
            eprintln!("weir: {e}");
            return ExitCode::FAILURE;
        }
    }
    match weir_storage::format_log_dir(&log_dir, config.node_id, cluster_id, ignore_formatted) {
        Ok(weir_storage::FormatOutcome::Formatted) => {
            println!(
                "Formatted {} with cluster.id {cluster_id} for node.id {}",
                log_dir.display(),
                config.node_id
            );
            ExitCode::SUCCESS
        }
        Ok(weir_storage::FormatOutcome::AlreadyFormatted) => {
            println!("All of the log directories are already formatted.");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("weir: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `weir dump-log`: lists every file; problems go to stderr.
fn dump_log(files: &[PathBuf]) -> ExitCode {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut failed = false;
    for file in files {
        match weir_storage::dump::dump_file(file, &mut out) {
            Ok(report) => {
                for problem in &report.problems {
                    eprintln!("weir: {}: {problem}", file.display());
                }
                failed |= !report.problems.is_empty();
            }
            Err(e) => {
                eprintln!("weir: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
