//! Startup, listeners and shutdown: opens the logs, starts the metadata
//! quorum, registers this broker, binds the listeners, serves connections
//! and shuts everything down cleanly on SIGTERM/SIGINT.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{error, info, warn};
use weir_controller::{
    BrokerEndpoint, BrokerHeartbeat, BrokerRegistrationRequest, ControllerConfig,
    MetadataController, MetadataObserver, QuorumController, QuorumOptions, QuorumTransport,
    StaticConfig,
};
use weir_storage::LogManager;

use crate::config::{BrokerConfig, Listener, SecurityProtocol};
use crate::context::BrokerContext;
use crate::network::channel::ClientChannel;
use crate::network::sasl::SaslListener;
use crate::network::{connection, AcceptedOn, ConnectionInfo};
use crate::producer_ids::ProducerIdManager;
use crate::replica_manager::ReplicaManager;

/// Most logs the cleaner compacts in one pass before yielding to the
/// backoff (so shutdown is never delayed by a long queue).
const LOGS_PER_CLEANER_PASS: usize = 16;

/// How long a node of a multi-node quorum waits at startup for a quorum
/// leader: in effect without end, as Kafka (a year).
const MULTI_NODE_STARTUP_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);

/// How long shutdown waits for open connections to finish, ms.
const SHUTDOWN_GRACE_MS: u64 = 5_000;

/// The environment variable that turns on power-loss journaling (tests
/// only): its value is the journal's path.
pub const SYNC_JOURNAL_ENV: &str = "WEIR_TEST_SYNC_JOURNAL";

/// The file system under the log directory's `LogDirFileSystem`: the real
/// one, or with [`SYNC_JOURNAL_ENV`] set the real one journalled by
/// `SyncJournalFileSystem`, so that a test harness can cut every file back
/// to what was fsynced after a SIGKILL (and fail `fdatasync` with EIO
/// through its trigger file, which reaches the failure channel above it).
/// The controller's Raft log does not go through this seam.
///
/// # Errors
/// The journal cannot be opened.
fn log_file_system() -> anyhow::Result<Arc<dyn weir_storage::FileSystem>> {
    let real = weir_storage::RealFileSystem::shared();
    let Some(journal) = std::env::var_os(SYNC_JOURNAL_ENV) else {
        return Ok(real);
    };
    let journalled = weir_storage::fs::SyncJournalFileSystem::open(real, journal.as_ref())
        .with_context(|| {
            format!(
                "opening the sync journal {} ({SYNC_JOURNAL_ENV})",
                std::path::Path::new(&journal).display()
            )
        })?;
    warn!(
        journal = %journalled.journal_path().display(),
        "power-loss journaling is on ({SYNC_JOURNAL_ENV}): for tests only, every fdatasync, \
         creation, truncation, rename and removal of a log file is journalled"
    );
    Ok(Arc::new(journalled))
}

/// Runs the broker until `shutdown` is cancelled.
///
/// # Errors
/// Startup failures (log directory, quorum, binding a listener); errors
/// during shutdown are logged.
pub async fn run(config: BrokerConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    let log_dir = config.log_dir();
    let voters = config.quorum_voters();
    let broker_only = config.is_broker_only();
    // A broker-only node follows a quorum of other nodes; a voter is in a
    // quorum of several when the voters name another node.
    let multi_node = broker_only || voters.iter().any(|v| v.id != config.node_id);
    if broker_only {
        check_broker_only(&config)?;
    }
    let security = listener_security(&config)?;
    // This node's own connections to other nodes: the replica fetchers'
    // to the inter-broker listener, the quorum's to the controllers.
    let inter_broker = inter_broker_channel(&config, multi_node)?;
    let controller_metadata = Arc::new(std::sync::OnceLock::new());
    let controller_channel =
        controller_channel(&config, &security, multi_node, &controller_metadata)?;
    // One node formats itself on first start; the nodes of a quorum must
    // share one cluster id, so they are formatted first (as KRaft).
    if multi_node
        && weir_storage::read_meta_properties(&log_dir)
            .with_context(|| format!("reading meta.properties in {}", log_dir.display()))?
            .is_none()
    {
        anyhow::bail!(
            "No meta.properties found in {}: every node of a quorum of several voters \
             (controller.quorum.voters) and every broker-only node must be formatted with the \
             same cluster id first: `weir format --config <file> --cluster-id <id>` (a new id \
             from `weir random-uuid`)",
            log_dir.display()
        );
    }
    std::fs::create_dir_all(&log_dir)
        .with_context(|| format!("creating log.dirs {}", log_dir.display()))?;
    let log_manager = LogManager::open_with_file_system(
        log_file_system()?,
        log_dir.clone(),
        config.node_id,
        config.default_log_config(),
        config.num_recovery_threads_per_data_dir.max(1) as usize,
    )
    .with_context(|| format!("opening logs in {}", log_dir.display()))?;
    crate::descriptors::log_needs(log_manager.logs().len());
    // A failed sync takes the only log directory offline: halt at once,
    // leaving no clean-shutdown marker, as Kafka's
    // `ReplicaManager.handleLogDirFailure` halts a broker whose every log
    // directory failed. The sync is never retried (Linux may have dropped
    // the dirty pages; see `weir_storage::fs::log_dir_failure`), and the
    // next start rewrites what lies above each recovery point.
    let dir_failure = log_manager.dir_failure().clone();
    tokio::spawn(async move {
        let reason = dir_failure.failed().await;
        tracing::error!(%reason, "halting: the log directory failed (Kafka: Shutdown broker because all log dirs have failed)");
        std::process::exit(1);
    });
    let cluster_id = log_manager.cluster_id().to_string();
    // The broker epoch of the last clean shutdown (KIP-966), sent with the
    // registration below.
    let previous_broker_epoch = log_manager.previous_broker_epoch();

    let controller_config = ControllerConfig {
        node_id: config.node_id,
        metadata_dir: log_dir.join("__cluster_metadata-0"),
        cluster_id: cluster_id.clone(),
    };
    let options = QuorumOptions {
        broker_session_timeout: Duration::from_millis(config.broker_session_timeout_ms),
        leader_imbalance_check_interval: config
            .auto_leader_rebalance_enable
            .then(|| Duration::from_secs(config.leader_imbalance_check_interval_seconds)),
        // As Kafka, a node of a multi-node quorum waits for the others
        // however long they take to start (logging while it waits); a
        // single node elects itself at once.
        startup_timeout: if multi_node {
            MULTI_NODE_STARTUP_WAIT
        } else {
            QuorumOptions::default().startup_timeout
        },
        static_config: StaticConfig {
            min_insync_replicas: config.min_insync_replicas,
        },
        bootstrap_records: crate::bootstrap::read(&log_dir)?,
        // Kafka's QuorumConfig: the election timeout is drawn from
        // [timeout, 2 * timeout]; the leader heartbeats well inside it.
        election_timeout_min_ms: config.controller_quorum_election_timeout_ms,
        election_timeout_max_ms: 2 * config.controller_quorum_election_timeout_ms,
        heartbeat_interval_ms: (config.controller_quorum_election_timeout_ms / 2)
            .min(QuorumOptions::default().heartbeat_interval_ms),
        mutation_quota: weir_controller::MutationQuotaConfig {
            samples: config.controller_quota_window_num.max(1) as u32,
            window: Duration::from_secs(config.controller_quota_window_size_seconds.max(1) as u64),
        },
        ..QuorumOptions::default()
    };
    let controller: MetadataController = if broker_only {
        // A broker-only node has no controller listener: it dials the
        // voters and pulls the metadata (see weir_controller::observer).
        let started = MetadataObserver::start(
            controller_config,
            options,
            voters,
            config.controller_quorum_bootstrap_servers.clone(),
            secured(QuorumTransport::tcp_dial_only(), &controller_channel),
        );
        tokio::select! {
            started = started => started.context("following the metadata quorum")?.into(),
            _ = shutdown.cancelled() => {
                anyhow::bail!("shut down while waiting for the metadata quorum")
            }
        }
    } else {
        // With several voters, the CONTROLLER listener is bound first: the
        // quorum needs it to elect a leader before startup can go on.
        let transport = if multi_node {
            let l = config
                .listeners
                .iter()
                .find(|l| config.is_controller_listener(&l.name))
                .with_context(|| {
                    format!(
                        "controller.quorum.voters lists several voters but no listener in \
                         listeners is named in controller.listener.names ({})",
                        config.controller_listener_names.join(",")
                    )
                })?;
            let addr = bind_address(l);
            let listener = TcpListener::bind(&addr)
                .await
                .with_context(|| format!("binding controller listener {}://{addr}", l.name))?;
            info!(listener = %l.name, address = %listener.local_addr()?, "metadata quorum listening");
            secured(QuorumTransport::tcp(listener), &controller_channel)
        } else {
            QuorumTransport::single_voter()
        };
        let started = QuorumController::start_with(controller_config, options, voters, transport);
        tokio::select! {
            started = started => started.context("starting the metadata quorum")?.into(),
            _ = shutdown.cancelled() => {
                anyhow::bail!("shut down while waiting for the metadata quorum")
            }
        }
    };

    // The controller listener's authorization and SCRAM look-ups read it.
    let _ = controller_metadata.set(controller.clone());

    let mut bound = Vec::new();
    let mut listeners = Vec::new();
    // Controller listeners carry the quorum only (served above with several
    // voters); as in Kafka they are never client listeners nor advertised.
    for l in config
        .listeners
        .iter()
        .filter(|l| !config.is_controller_listener(&l.name))
    {
        let addr = bind_address(l);
        let listener = TcpListener::bind(&addr)
            .await
            .with_context(|| format!("binding listener {}://{addr}", l.name))?;
        let local = listener.local_addr()?;
        bound.push(Listener {
            name: l.name.clone(),
            host: l.host.clone(),
            port: local.port(),
        });
        let accepted_on = security
            .iter()
            .find(|a| *a.name == *l.name)
            .cloned()
            .context("a listener without a security protocol")?;
        listeners.push((accepted_on, listener, local));
    }
    let advertised = advertised_listeners(&config, &bound);

    let endpoints = advertised
        .iter()
        .map(|l| BrokerEndpoint {
            name: l.name.clone(),
            host: l.host.clone(),
            port: l.port,
            security_protocol: config
                .security_protocol(&l.name)
                .unwrap_or(SecurityProtocol::Plaintext)
                .id(),
        })
        .collect();
    let broker_epoch = controller
        .register_broker(BrokerRegistrationRequest {
            broker_id: config.node_id,
            incarnation_id: uuid::Uuid::new_v4(),
            endpoints,
            rack: config.broker_rack.clone(),
            previous_broker_epoch,
        })
        .await
        .context("registering the broker")?;
    info!(
        node_id = config.node_id,
        broker_epoch, previous_broker_epoch, "registered with the controller"
    );
    if multi_node {
        // As Kafka's BrokerServer, serve only once the controller has
        // unfenced this broker (its first heartbeat, once caught up).
        wait_until_unfenced(&controller, &config, broker_epoch, &shutdown).await?;
    }

    let replica_manager = Arc::new(ReplicaManager::new(
        config.node_id,
        config.clone(),
        log_manager,
    ));
    let image = controller.image();
    replica_manager.delete_stray_logs(&image)?;
    replica_manager.load_high_watermarks()?;
    replica_manager.apply_image(&image)?;
    // Followers fetch from their leaders (issue 16); the fetchers stop
    // before the logs are flushed at shutdown.
    let fetcher_shutdown = CancellationToken::new();
    let replica_fetchers = Arc::new(crate::replication::fetcher::ReplicaFetcherManager::new(
        config.node_id,
        broker_epoch,
        inter_broker.0,
        inter_broker.1,
        replica_manager.clone(),
        fetcher_shutdown.clone(),
    ));
    replica_fetchers.apply_image(&image);
    // ISR changes go to the controller (Kafka's AlterPartitionManager).
    let (isr_changes, isr_change_queue) = tokio::sync::mpsc::unbounded_channel();
    replica_manager.set_isr_change_sender(isr_changes);

    // The group coordinator's store: `__consumer_offsets`, created through
    // the controller on the first group write (issue 4).
    let group_store = Arc::new(crate::group::BrokerGroupStore::for_broker(
        &config,
        controller.clone(),
        replica_manager.clone(),
    ));
    let group_coordinator =
        crate::group::GroupCoordinator::new(group_store.clone(), config.group_coordinator.clone());
    // Coordinate (and load) the groups of the offsets partitions led here;
    // `follow_metadata` follows leadership changes.
    let leadership = group_store.leadership(&image);
    group_coordinator.on_leadership(leadership.clone());

    let ctx = Arc::new(BrokerContext {
        group_coordinator: group_coordinator.clone(),
        node_id: config.node_id,
        cluster_id: cluster_id.clone(),
        controller: controller.clone(),
        replica_manager: replica_manager.clone(),
        replica_fetchers: replica_fetchers.clone(),
        fetch_sessions: crate::fetch_session::FetchManager::new(
            config.max_incremental_fetch_session_cache_slots.max(0) as usize,
        ),
        producer_ids: ProducerIdManager::new(config.node_id, broker_epoch),
        advertised_listeners: advertised.clone(),
        authorizer: crate::authorizer::Authorizer::from_config(&config),
        client_quotas: crate::client_quotas::ClientQuotaManager::new(
            config.quota_window_num.max(1) as usize,
            std::time::Duration::from_secs(config.quota_window_size_seconds.max(1) as u64),
        ),
        tls_listeners: security.iter().filter_map(|a| a.tls.clone()).collect(),
        config: config.clone(),
    });

    if let Some(addr) = config.metrics_listener {
        crate::metrics::install(addr)
            .with_context(|| format!("starting metrics endpoint on {addr}"))?;
    }

    // `shutdown` starts the controlled shutdown; everything below keeps
    // running through it (this broker must keep applying metadata and
    // answering clients while its leaderships move) and stops on `stop`.
    let stop = CancellationToken::new();
    let tracker = TaskTracker::new();
    tracker.spawn(follow_metadata(ctx.clone(), leadership, stop.clone()));
    // Broker heartbeats (KIP-631) keep this broker's session alive on the
    // active controller. A single voter's session never expires (its one
    // broker is this process), so it needs none. They stop when the
    // controlled shutdown, which heartbeats on its own, begins.
    let heartbeats_stop = stop.child_token();
    if multi_node {
        let controller = controller.clone();
        let node_id = config.node_id;
        let rm = replica_manager.clone();
        tracker.spawn(every(
            config.broker_heartbeat_interval_ms,
            heartbeats_stop.clone(),
            move || {
                let controller = controller.clone();
                let heartbeat = BrokerHeartbeat {
                    broker_id: node_id,
                    broker_epoch,
                    metadata_offset: rm.applied_metadata_offset(),
                    want_shut_down: false,
                };
                async move {
                    match controller.broker_heartbeat(heartbeat).await {
                        Ok(reply) if reply.is_fenced => {
                            warn!(node_id, "the controller has this broker fenced")
                        }
                        Ok(_) => {}
                        Err(e) => warn!(error = %e, "broker heartbeat failed"),
                    }
                }
            },
        ));
    }
    tracker.spawn(crate::replication::alter_partition::run(
        controller.clone(),
        replica_manager.clone(),
        config.node_id,
        broker_epoch,
        isr_change_queue,
        stop.clone(),
    ));
    // ISR shrinks (Kafka's isr-expiration task): every half of
    // replica.lag.time.max.ms, followers out of sync leave the ISR.
    // The active controller also reports the partitions without a leader
    // (Kafka's OfflinePartitionsCount, `weir_offline_partitions`).
    let rm = replica_manager.clone();
    let quorum = controller.clone();
    tracker.spawn(every(
        (config.replication.replica_lag_time_max_ms / 2).max(1) as u64,
        stop.clone(),
        move || {
            rm.maybe_shrink_isrs(crate::handlers::now_ms());
            let offline = if quorum.is_active() {
                quorum
                    .image()
                    .topics
                    .values()
                    .flat_map(|t| t.partitions.values())
                    .filter(|p| p.leader < 0)
                    .count()
            } else {
                0
            };
            metrics::gauge!("weir_offline_partitions").set(offline as f64);
            std::future::ready(())
        },
    ));
    // Expires offsets (Kafka's offsets retention).
    tracker.spawn(group_coordinator.run(stop.clone()));
    // Recovery point checkpoints (Kafka's kafka-recovery-point-checkpoint).
    let rm = replica_manager.clone();
    tracker.spawn(run_periodically(
        "checkpoint",
        config.log_flush_offset_checkpoint_interval_ms,
        stop.clone(),
        move || rm.checkpoint(),
    ));
    // High watermark checkpoints (Kafka's highwatermark-checkpoint task).
    let rm = replica_manager.clone();
    tracker.spawn(run_periodically(
        "high watermark checkpoint",
        config
            .replication
            .high_watermark_checkpoint_interval_ms
            .max(1) as u64,
        stop.clone(),
        move || rm.checkpoint_high_watermarks(),
    ));
    // Retention (Kafka's kafka-log-retention task), with the expiration of
    // idle idempotent producers.
    let rm = replica_manager.clone();
    let producer_id_expiration_ms = config.producer_id_expiration_ms;
    tracker.spawn(run_periodically(
        "retention",
        config.log_retention_check_interval_ms,
        stop.clone(),
        move || {
            let now_ms = crate::handlers::now_ms();
            rm.remove_expired_producers(now_ms, producer_id_expiration_ms);
            rm.delete_old_segments(now_ms)
        },
    ));
    // The background flusher (Kafka's kafka-log-flusher): not scheduled
    // under Kafka's default interval of Long.MAX_VALUE.
    if config.log_flush_scheduler_interval_ms < i64::MAX {
        tracker.spawn(flush_periodically(
            replica_manager.clone(),
            config.log_flush_scheduler_interval_ms as u64,
            stop.clone(),
        ));
    }
    // The log cleaner (Kafka's kafka-log-cleaner-thread-0): compacts the
    // dirtiest log, repeatedly, then backs off `log.cleaner.backoff.ms`.
    if config.log_cleaner_enable {
        let rm = replica_manager.clone();
        let cleaner_config = config.cleaner_config();
        tracker.spawn(run_periodically(
            "log cleaner",
            config.log_cleaner_backoff_ms,
            stop.clone(),
            move || {
                rm.clean_logs(
                    crate::handlers::now_ms(),
                    &cleaner_config,
                    LOGS_PER_CLEANER_PASS,
                )
            },
        ));
    }
    // KIP-226's keystore update, by file: every TLS listener (the
    // controller listener's too) re-reads its stores when they change.
    let tls_listeners = ctx.tls_listeners.clone();
    if !tls_listeners.is_empty() {
        let config = Arc::new(config.clone());
        tracker.spawn(every(
            TLS_STORE_CHECK_INTERVAL_MS,
            stop.clone(),
            move || reload_tls_stores(tls_listeners.clone(), config.clone()),
        ));
    }
    let connections = TaskTracker::new();
    let limits = crate::network::NetworkLimits::new(&config);
    for (accepted_on, listener, local) in listeners {
        info!(listener = %accepted_on.name, address = %local,
            security_protocol = %accepted_on.protocol, "listening");
        tracker.spawn(accept_loop(
            listener,
            accepted_on,
            ctx.clone(),
            limits.clone(),
            stop.clone(),
            connections.clone(),
        ));
    }

    let listed: Vec<String> = advertised
        .iter()
        .map(|l| format!("{}://{}:{}", l.name, l.host, l.port))
        .collect();
    println!(
        "weir started node.id={} cluster.id={} listeners={}",
        config.node_id,
        cluster_id,
        listed.join(",")
    );
    info!(node_id = config.node_id, %cluster_id, "weir started");

    shutdown.cancelled().await;
    info!("shutting down");
    if multi_node {
        heartbeats_stop.cancel();
        controlled_shutdown(&controller, &config, broker_epoch, &replica_manager).await;
    }
    stop.cancel();
    tracker.close();
    tracker.wait().await;
    connections.close();
    if tokio::time::timeout(Duration::from_millis(SHUTDOWN_GRACE_MS), connections.wait())
        .await
        .is_err()
    {
        warn!("connections did not close within the grace period");
    }
    fetcher_shutdown.cancel();
    replica_fetchers.shutdown().await;
    if let Err(e) = replica_manager.shutdown(broker_epoch) {
        error!(error = %e, "flushing logs at shutdown failed");
    }
    if let Err(e) = controller.shutdown().await {
        error!(error = %e, "stopping the metadata quorum failed");
    }
    info!("shutdown complete");
    Ok(())
}

/// Checks a broker-only node's configuration as Kafka's `KafkaConfig`
/// does: it needs `controller.quorum.voters` or
/// `controller.quorum.bootstrap.servers`, must not be a voter itself, and
/// must not list a controller listener in `listeners`.
fn check_broker_only(config: &BrokerConfig) -> anyhow::Result<()> {
    let roles: Vec<&str> = config.process_roles.split(',').map(str::trim).collect();
    if !roles.contains(&"broker") {
        anyhow::bail!(
            "process.roles={}: a node must have the broker role (controller-only nodes are \
             not supported)",
            config.process_roles
        );
    }
    let voters = config.quorum_voters();
    if voters.is_empty() && config.controller_quorum_bootstrap_servers.is_empty() {
        anyhow::bail!(
            "process.roles=broker needs the controllers it follows: set \
             controller.quorum.voters or controller.quorum.bootstrap.servers"
        );
    }
    if voters.iter().any(|v| v.id == config.node_id) {
        anyhow::bail!(
            "node.id {} is in controller.quorum.voters, so it is a voter: its process.roles \
             must include controller (it is {})",
            config.node_id,
            config.process_roles
        );
    }
    if let Some(l) = config
        .listeners
        .iter()
        .find(|l| config.is_controller_listener(&l.name))
    {
        anyhow::bail!(
            "controller.listener.names must not contain a value appearing in the 'listeners' \
             configuration when running KRaft with just the broker role ({})",
            l.name
        );
    }
    Ok(())
}

/// `host:port` to bind a listener on (an empty host is all interfaces).
fn bind_address(l: &Listener) -> String {
    let host = if l.host.is_empty() {
        "0.0.0.0"
    } else {
        &l.host
    };
    format!("{host}:{}", l.port)
}

/// `advertised.listeners` with port 0 replaced by the bound port, or the
/// bound listeners when unset (an all-interfaces host advertises 127.0.0.1).
/// Controller listeners (`controller.listener.names`) are never advertised.
fn advertised_listeners(config: &BrokerConfig, bound: &[Listener]) -> Vec<Listener> {
    let base = config
        .advertised_listeners
        .clone()
        .unwrap_or_else(|| bound.to_vec());
    base.into_iter()
        .filter(|l| !config.is_controller_listener(&l.name))
        .map(|mut l| {
            if l.port == 0 {
                if let Some(b) = bound.iter().find(|b| b.name == l.name) {
                    l.port = b.port;
                }
            }
            if l.host.is_empty() || l.host == "0.0.0.0" {
                l.host = "127.0.0.1".to_string();
            }
            l
        })
        .collect()
}

/// Each listener's security protocol, with the TLS acceptor of an SSL or
/// SASL_SSL listener built from its `ssl.*` keys and the SASL settings of a
/// SASL listener (so a bad keystore or JAAS entry stops the start, naming
/// the key, before anything is bound).
///
/// # Errors
/// A listener's TLS or SASL configuration error.
fn listener_security(config: &BrokerConfig) -> anyhow::Result<Vec<AcceptedOn>> {
    let mut out = Vec::new();
    for l in &config.listeners {
        // BrokerConfig::from_pairs checked that every listener is mapped.
        let protocol = config
            .security_protocol(&l.name)
            .with_context(|| format!("No security protocol defined for listener {}", l.name))?;
        let tls = if protocol.uses_tls() {
            Some(crate::network::tls::listener(config, &l.name)?)
        } else {
            None
        };
        let sasl = match protocol {
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => {
                Some(Arc::new(SaslListener::from_config(config, &l.name)?))
            }
            SecurityProtocol::Plaintext | SecurityProtocol::Ssl => None,
        };
        out.push(AcceptedOn {
            name: l.name.as_str().into(),
            protocol,
            tls,
            sasl,
        });
    }
    Ok(out)
}

/// The replication config with its effective inter-broker listener, and
/// the channel followers dial it with. The listener is
/// `inter.broker.listener.name`, else the one named after
/// `security.inter.broker.protocol` when that is not PLAINTEXT (Kafka's
/// `interBrokerListenerName`), else (PLAINTEXT) the leader's first
/// PLAINTEXT listener. A single node dials no one: PLAINTEXT.
///
/// # Errors
/// The listener's protocol is unknown, or its TLS or SASL client side
/// cannot be built (the error names the key).
fn inter_broker_channel(
    config: &BrokerConfig,
    multi_node: bool,
) -> anyhow::Result<(crate::config::ReplicationConfig, ClientChannel)> {
    let mut replication = config.replication.clone();
    if replication.inter_broker_listener_name.is_none()
        && config.security_inter_broker_protocol != SecurityProtocol::Plaintext
    {
        replication.inter_broker_listener_name =
            Some(config.security_inter_broker_protocol.name().to_string());
    }
    let channel = match (&replication.inter_broker_listener_name, multi_node) {
        (Some(name), true) => {
            let protocol = config.security_protocol(name).with_context(|| {
                format!("inter-broker listener {name}: no security protocol in listener.security.protocol.map")
            })?;
            ClientChannel::for_listener(
                config,
                name,
                protocol,
                "sasl.mechanism.inter.broker.protocol",
            )?
        }
        _ => ClientChannel::plaintext(),
    };
    Ok((replication, channel))
}

/// The quorum's channel when the controller listener is not PLAINTEXT:
/// the first of `controller.listener.names`, its protocol from
/// `listener.security.protocol.map`; a voter also accepts on it (its TLS
/// and SASL from `security`). `None` for PLAINTEXT or a single voter.
///
/// # Errors
/// SCRAM as `sasl.mechanism.controller.protocol` (its credentials live in
/// the metadata log the quorum replicates), or a TLS or SASL client
/// configuration error.
fn controller_channel(
    config: &BrokerConfig,
    security: &[AcceptedOn],
    multi_node: bool,
    metadata: &Arc<std::sync::OnceLock<weir_controller::MetadataController>>,
) -> anyhow::Result<Option<Arc<crate::network::channel::ControllerChannel>>> {
    let Some(name) = config.controller_listener_names.first() else {
        return Ok(None);
    };
    let protocol = config
        .security_protocol(name)
        .unwrap_or(SecurityProtocol::Plaintext);
    if !multi_node || protocol == SecurityProtocol::Plaintext {
        return Ok(None);
    }
    let client =
        ClientChannel::for_listener(config, name, protocol, "sasl.mechanism.controller.protocol")?;
    if let Some(mechanism) = client.sasl_mechanism().filter(|m| m.starts_with("SCRAM-")) {
        anyhow::bail!(
            "sasl.mechanism.controller.protocol={mechanism}: SCRAM credentials live in the              metadata log, which the controllers' connections replicate; use PLAIN (or SSL)              for the controller listener"
        );
    }
    let accepted = security
        .iter()
        .find(|a| config.is_controller_listener(&a.name))
        .cloned();
    Ok(Some(Arc::new(
        crate::network::channel::ControllerChannel::new(config, client, accepted, metadata.clone()),
    )))
}

/// `transport` secured by `channel`, if any.
fn secured(
    transport: QuorumTransport,
    channel: &Option<Arc<crate::network::channel::ControllerChannel>>,
) -> QuorumTransport {
    match channel {
        Some(channel) => transport.secured(channel.clone()),
        None => transport,
    }
}

/// Accepts connections while `max.connections` allows (waiting for a slot
/// first, as Kafka's `ConnectionQuotas.inc`), closing at once those over
/// `max.connections.per.ip` (Kafka's "Rejected connection").
async fn accept_loop(
    listener: TcpListener,
    accepted_on: AcceptedOn,
    ctx: Arc<BrokerContext>,
    limits: Arc<crate::network::NetworkLimits>,
    shutdown: CancellationToken,
    connections: TaskTracker,
) {
    loop {
        let slot = tokio::select! {
            _ = shutdown.cancelled() => return,
            slot = limits.quotas.wait_for_slot() => slot,
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => match limits.quotas.register(slot, peer.ip()) {
                    Ok(slot) => {
                        let info = Arc::new(ConnectionInfo {
                            peer,
                            listener: accepted_on.name.clone(),
                            security_protocol: accepted_on.protocol,
                            principal: crate::network::ANONYMOUS.into(),
                            session: None,
                            muted: Default::default(),
                        });
                        let tls = accepted_on.tls.clone();
                        let sasl = accepted_on.sasl.clone();
                        let run = connection::run(stream, tls, sasl, info, ctx.clone(), limits.clone(), shutdown.clone());
                        connections.spawn(async move {
                            run.await;
                            drop(slot);
                        });
                    }
                    Err(e) => info!(%peer, "Rejected connection: {e} (max.connections.per.ip)"),
                },
                Err(e) => {
                    // EMFILE and friends: log and back off briefly instead of spinning.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

/// Heartbeats every `broker.heartbeat.interval.ms` until the controller
/// answers that this broker is unfenced.
///
/// # Errors
///
/// When shutdown is requested first, or the registration is gone
/// (`STALE_BROKER_EPOCH`).
async fn wait_until_unfenced(
    controller: &MetadataController,
    config: &BrokerConfig,
    broker_epoch: i64,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let retry = task_period(config.broker_heartbeat_interval_ms);
    loop {
        let heartbeat = BrokerHeartbeat {
            broker_id: config.node_id,
            broker_epoch,
            metadata_offset: controller.image().last_applied_offset,
            want_shut_down: false,
        };
        match controller.broker_heartbeat(heartbeat).await {
            Ok(reply) if !reply.is_fenced => {
                info!(
                    node_id = config.node_id,
                    broker_epoch, "unfenced by the controller"
                );
                return Ok(());
            }
            Ok(_) => {}
            Err(e @ weir_controller::ControllerError::StaleBrokerEpoch { .. }) => {
                return Err(e).context("waiting to be unfenced")
            }
            Err(e) => warn!(error = %e, "broker heartbeat failed; retrying"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => anyhow::bail!("shut down before being unfenced"),
            _ = tokio::time::sleep(retry) => {}
        }
    }
}

/// Controlled shutdown (Kafka's `BrokerLifecycleManager` in
/// `PENDING_CONTROLLED_SHUTDOWN`): heartbeats with `WantShutDown` until the
/// active controller answers `should_shut_down`. Meanwhile this broker
/// keeps running: the controller takes it out of every ISR and moves its
/// leaderships (it answers NOT_LEADER_OR_FOLLOWER once it has applied
/// that), and lets it go once every active broker has applied the change,
/// fencing it. The next heartbeat goes 50 ms after the first answer, then
/// every `broker.heartbeat.interval.ms`, as Kafka's; the whole wait is
/// bounded by `broker.session.timeout.ms` and failures are logged (the
/// session then expires instead).
async fn controlled_shutdown(
    controller: &MetadataController,
    config: &BrokerConfig,
    broker_epoch: i64,
    replica_manager: &ReplicaManager,
) {
    let node_id = config.node_id;
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(config.broker_session_timeout_ms);
    let mut wait = Duration::from_millis(50);
    loop {
        let heartbeat = BrokerHeartbeat {
            broker_id: node_id,
            broker_epoch,
            metadata_offset: replica_manager.applied_metadata_offset(),
            want_shut_down: true,
        };
        let asked = tokio::time::timeout_at(deadline, controller.broker_heartbeat(heartbeat));
        match asked.await {
            Ok(Ok(reply)) if reply.should_shut_down => {
                info!(
                    node_id,
                    "controlled shutdown: leaderships moved, released by the controller"
                );
                return;
            }
            Ok(Ok(reply)) => info!(
                node_id,
                in_controlled_shutdown = reply.in_controlled_shutdown,
                "controlled shutdown: waiting for the active controller"
            ),
            Ok(Err(e)) => warn!(error = %e, "controlled shutdown heartbeat failed"),
            Err(_) => {}
        }
        if tokio::time::Instant::now() + wait >= deadline {
            warn!(
                node_id,
                waited_ms = config.broker_session_timeout_ms,
                "controlled shutdown not granted in time; shutting down (the session will expire)"
            );
            return;
        }
        tokio::time::sleep(wait).await;
        wait = Duration::from_millis(config.broker_heartbeat_interval_ms);
    }
}

/// Applies every new metadata image to the hosted partitions and tells the
/// group coordinator which offsets partitions are led here (`leadership`:
/// what it was last told).
async fn follow_metadata(
    ctx: Arc<BrokerContext>,
    mut leadership: crate::group::OffsetsLeadership,
    shutdown: CancellationToken,
) {
    let mut rx = ctx.controller.subscribe();
    let store = ctx.group_coordinator.store().clone();
    // An image published before the subscription is not a change.
    rx.mark_changed();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = rx.changed() => {
                if changed.is_err() {
                    return;
                }
                let image = rx.borrow_and_update().clone();
                if let Err(e) = ctx.replica_manager.apply_image_off_runtime(image.clone()).await {
                    error!(error = %e, "applying metadata image failed");
                }
                ctx.replica_fetchers.apply_image(&image);
                // The group coordinator follows the offsets partitions led
                // here (Kafka's onElection / onResignation).
                let now = store.leadership(&image);
                if now != leadership {
                    leadership = now.clone();
                    ctx.group_coordinator.on_leadership(now);
                }
            }
        }
    }
}

/// Longest period a background task is scheduled with: 100 years. Larger
/// configured intervals (Kafka lets them go up to `Long.MAX_VALUE` ms) would
/// overflow the clock.
const MAX_TASK_PERIOD_MS: u64 = 100 * 365 * 86_400_000;

/// The period of a task configured to run every `interval_ms`: at least
/// 1 ms, at most [`MAX_TASK_PERIOD_MS`].
fn task_period(interval_ms: u64) -> Duration {
    Duration::from_millis(interval_ms.clamp(1, MAX_TASK_PERIOD_MS))
}

/// Runs the background flusher every `interval_ms` until shutdown
/// ([`ReplicaManager::flush_dirty_logs`]); fsyncs run on blocking threads.
async fn flush_periodically(
    replica_manager: Arc<ReplicaManager>,
    interval_ms: u64,
    shutdown: CancellationToken,
) {
    every(interval_ms, shutdown, || async {
        if let Err(e) = replica_manager
            .flush_dirty_logs(crate::handlers::now_ms())
            .await
        {
            error!(error = %e, "background flush failed");
        }
    })
    .await
}

/// Runs `task` on a blocking thread every `interval_ms` until shutdown; the
/// first run is one interval after startup. Failures are logged as `what`.
async fn run_periodically<T, E>(
    what: &'static str,
    interval_ms: u64,
    shutdown: CancellationToken,
    task: impl Fn() -> Result<T, E> + Clone + Send + 'static,
) where
    T: Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    every(interval_ms, shutdown, || async {
        match tokio::task::spawn_blocking(task.clone()).await {
            Ok(Err(e)) => error!(error = %e, "{what} failed"),
            Err(e) => error!(error = %e, "{what} task failed"),
            Ok(Ok(_)) => {}
        }
    })
    .await
}

/// How often every TLS listener's keystore and truststore are checked for
/// new content (ms).
const TLS_STORE_CHECK_INTERVAL_MS: u64 = 10_000;

/// Has each listener of `listeners` re-read its stores
/// ([`crate::network::tls::TlsListener::reload_if_changed`], off the
/// runtime's workers); logs and counts what changed.
async fn reload_tls_stores(
    listeners: Vec<crate::network::tls::TlsListener>,
    config: Arc<BrokerConfig>,
) {
    use crate::network::tls::Reload;
    for listener in listeners {
        let name = listener.name().to_string();
        let config = config.clone();
        let outcome =
            tokio::task::spawn_blocking(move || listener.reload_if_changed(&config)).await;
        match outcome {
            Ok(Ok(Reload::Reloaded)) => {
                info!(listener = %name, "reloaded the listener's TLS keystore and truststore; new connections use them");
                metrics::counter!("weir_tls_store_reloads_total", "listener" => name, "outcome" => "reloaded")
                    .increment(1);
            }
            Ok(Ok(Reload::Unchanged | Reload::StillRefused)) => {}
            Ok(Err(e)) => {
                warn!(listener = %name, error = %e, "the listener's TLS stores changed but cannot be used; it keeps serving the previous ones");
                metrics::counter!("weir_tls_store_reloads_total", "listener" => name, "outcome" => "refused")
                    .increment(1);
            }
            Err(e) => error!(error = %e, "TLS store check failed"),
        }
    }
}

/// Awaits `tick()` every `interval_ms` (see [`task_period`]) until
/// shutdown; the first call is one interval after startup, and a tick that
/// overruns delays the next one instead of bunching them.
async fn every<F, Fut>(interval_ms: u64, shutdown: CancellationToken, mut tick: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut interval = tokio::time::interval(task_period(interval_ms));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = interval.tick() => tick().await,
        }
    }
}
