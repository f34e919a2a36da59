//! The `weir` binary: parses the command line, sets up logging and runs the
//! broker until SIGTERM or SIGINT. `weir dump-log FILE...` lists segment and
//! index files instead; `weir format` and `weir random-uuid` prepare log
//! directories for a cluster as `kafka-storage format` / `random-uuid`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;
use tracing::{error, info};
use tracing_subscriber::prelude::*;
use tracing_subscriber::EnvFilter;
use weir_broker::config::BrokerConfig;

/// A Kafka wire-protocol compatible broker.
#[derive(Parser, Debug)]
#[command(name = "weir", version, about)]
struct Cli {
    /// A Kafka-style server.properties file.
    #[arg(long, short = 'c', value_name = "FILE", global = true)]
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
        #[arg(long, short = 'g')]
        ignore_formatted: bool,
        /// As `kafka-storage format --standalone` (KIP-853): this
        /// controller alone is the quorum. Weir's single node is that
        /// already; refused with `controller.quorum.voters` set, as Kafka.
        #[arg(long, short = 's')]
        standalone: bool,
        /// `kafka-storage format --initial-controllers`: a dynamic quorum,
        /// which Weir does not have (its voters are
        /// `controller.quorum.voters`); refused with the reason.
        #[arg(long, short = 'I', value_name = "VOTERS")]
        initial_controllers: Option<String>,
        /// `kafka-storage format --no-initial-controllers`: accepted; the
        /// voters are `controller.quorum.voters`.
        #[arg(long, short = 'N')]
        no_initial_controllers: bool,
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
            standalone,
            initial_controllers,
            no_initial_controllers: _,
            add_scram,
        }) => {
            let quorum = QuorumFlags {
                standalone: *standalone,
                initial_controllers: initial_controllers.is_some(),
            };
            return format(&cli, cluster_id, *ignore_formatted, quorum, add_scram);
        }
        None => {}
    }
    // openraft logs every vote and election step at info; its warnings and
    // errors are what an operator needs, less its report of each request
    // to a voter that does not answer (the quorum transport logs the
    // outage instead). A RUST_LOG of the operator's own keeps everything
    // it selects.
    let filter = EnvFilter::try_from_default_env().ok();
    let quiet = filter
        .is_none()
        .then_some(weir_broker::logging::QuietPeerFailures);
    tracing_subscriber::registry()
        .with(filter.unwrap_or_else(|| EnvFilter::new("info,openraft=warn")))
        .with(quiet)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false),
        )
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

/// `weir format`'s quorum flags, as `kafka-storage format`'s.
#[derive(Clone, Copy, Debug, Default)]
struct QuorumFlags {
    /// `--standalone`.
    standalone: bool,
    /// `--initial-controllers` was given.
    initial_controllers: bool,
}

/// Whether `flags` fit `config`, as Kafka's `StorageTool`: neither
/// `--standalone` nor `--initial-controllers` with static voters; Weir has
/// no dynamic quorum, so `--initial-controllers` is refused and
/// `--standalone` serves a single controller (which Weir's one-voter quorum
/// is).
///
/// # Errors
/// What to change, in Kafka's words where Kafka refuses too.
fn check_quorum_flags(config: &BrokerConfig, flags: QuorumFlags) -> Result<(), String> {
    if !config.controller_quorum_voters.trim().is_empty()
        && (flags.standalone || flags.initial_controllers)
    {
        return Err(
            "You cannot specify controller.quorum.voters and format the node with \
                    --initial-controllers or --standalone. If you want to use dynamic quorum, \
                    please remove controller.quorum.voters and specify \
                    controller.quorum.bootstrap.servers instead."
                .into(),
        );
    }
    if flags.initial_controllers {
        return Err("Weir's metadata quorum is static: list the voters in \
                    controller.quorum.voters on every node and format without \
                    --initial-controllers"
            .into());
    }
    if flags.standalone && !config.is_controller() {
        return Err("--standalone formats a controller: process.roles has no controller".into());
    }
    Ok(())
}

/// `weir format`: formats the first of `log.dirs` (the only one used),
/// writing the bootstrap records of `add_scram` first.
fn format(
    cli: &Cli,
    cluster_id: &str,
    ignore_formatted: bool,
    quorum: QuorumFlags,
    add_scram: &[String],
) -> ExitCode {
    let config = match BrokerConfig::load(cli.config.as_deref(), &cli.overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("weir: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = check_quorum_flags(&config, quorum) {
        eprintln!("weir: {e}");
        return ExitCode::from(2);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn config_of(pairs: &[(&str, &str)]) -> BrokerConfig {
        BrokerConfig::from_pairs(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
        .unwrap()
    }

    /// Kafka 4's quickstart formats with `kafka-storage.sh format -t <id>
    /// -c config/server.properties --standalone`; the same words format a
    /// Weir node (only long names and no --standalone were read before).
    #[test]
    fn kafka_storage_format_words_are_read() {
        let cli = Cli::try_parse_from([
            "weir",
            "format",
            "-t",
            "-x5QSHbfRHSPPmbCOtYpSw",
            "-c",
            "config/server.properties",
            "--standalone",
            "-g",
        ])
        .unwrap();
        assert_eq!(
            cli.config.as_deref(),
            Some(std::path::Path::new("config/server.properties"))
        );
        match cli.command {
            Some(Command::Format {
                cluster_id,
                ignore_formatted: true,
                standalone: true,
                ..
            }) => assert_eq!(cluster_id, "-x5QSHbfRHSPPmbCOtYpSw"),
            other => panic!("{other:?}"),
        }
        let single = config_of(&[]);
        let standalone = QuorumFlags {
            standalone: true,
            initial_controllers: false,
        };
        check_quorum_flags(&single, standalone).unwrap();
        check_quorum_flags(&single, QuorumFlags::default()).unwrap();
        let voters = config_of(&[(
            "controller.quorum.voters",
            "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095",
        )]);
        let err = check_quorum_flags(&voters, standalone).unwrap_err();
        assert!(
            err.contains("You cannot specify controller.quorum.voters"),
            "{err}"
        );
        check_quorum_flags(&voters, QuorumFlags::default()).unwrap();
        let dynamic = QuorumFlags {
            standalone: false,
            initial_controllers: true,
        };
        let err = check_quorum_flags(&single, dynamic).unwrap_err();
        assert!(err.contains("controller.quorum.voters"), "{err}");
        let broker_only = config_of(&[("process.roles", "broker")]);
        assert!(check_quorum_flags(&broker_only, standalone).is_err());
    }
}
