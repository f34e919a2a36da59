//! Broker configuration in Kafka's `server.properties` format.
//!
//! Property names and defaults follow Apache Kafka wherever Kafka has the
//! concept. Weir's own keys are `metrics.listener`, `log.write.caching`,
//! `log.flush.pace.ms`, `queued.max.response.bytes` and `queued.max.response.bytes.per.connection`. Unknown keys are
//! an error that names the key. Every key is one row of
//! [`crate::broker_keys::BROKER_KEYS`] (its parser, Kafka 4.1's bound,
//! default, type and documentation); this module holds the typed
//! configuration the rows fill, the value parsers they share, and the
//! cross-key rules of Kafka's `KafkaConfig.validateValues`. It owns parsing
//! and validation only; it must not depend on the network or storage layers
//! beyond their config types.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use weir_storage::{LogConfig, TimestampType};

/// A configuration error; the message names the offending key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A key that neither Kafka nor Weir defines.
    #[error("unknown configuration key '{key}'")]
    UnknownKey {
        /// The key as written.
        key: String,
    },
    /// A value that does not parse or is out of range for its key, in the
    /// words of Kafka's `ConfigException`.
    #[error("Invalid value {value} for configuration {key}: {reason}")]
    InvalidValue {
        /// The key.
        key: String,
        /// The value as written.
        value: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A malformed line: in the properties file, a bad `\uXXXX` escape;
    /// in an `--override`, no `=`.
    #[error(
        "{path}:{line}: malformed line (expected key=value, escapes as in java.util.Properties)"
    )]
    Syntax {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
    },
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// One listener from `listeners` / `advertised.listeners`:
/// `NAME://host:port`; its security protocol is the one
/// `listener.security.protocol.map` gives the name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// The listener name, e.g. `PLAINTEXT`.
    pub name: String,
    /// Host or IP; empty means all interfaces.
    pub host: String,
    /// TCP port; 0 binds an ephemeral port (tests) which is then advertised.
    pub port: u16,
}

impl Listener {
    /// Parses `NAME://host:port,...` (an IPv6 host may be bracketed).
    ///
    /// # Errors
    /// [`ConfigError::InvalidValue`] naming `key` for a malformed item or
    /// an empty list.
    pub fn parse_list(key: &str, value: &str) -> Result<Vec<Listener>, ConfigError> {
        let invalid = |reason: &str| ConfigError::InvalidValue {
            key: key.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let mut out = Vec::new();
        for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, rest) = item
                .split_once("://")
                .ok_or_else(|| invalid("expected NAME://host:port"))?;
            let (host, port) = rest
                .rsplit_once(':')
                .ok_or_else(|| invalid("expected NAME://host:port"))?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let port: u16 = port.parse().map_err(|_| invalid("port is not a number"))?;
            out.push(Listener {
                name: name.to_string(),
                host: host.to_string(),
                port,
            });
        }
        if out.is_empty() {
            return Err(invalid("no listener given"));
        }
        Ok(out)
    }
}

/// A listener's security protocol, Kafka's `SecurityProtocol`: what
/// `listener.security.protocol.map` maps a listener name to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    /// No encryption, no authentication.
    Plaintext,
    /// TLS (the principal comes from the client certificate, if any).
    Ssl,
    /// SASL authentication over plain TCP.
    SaslPlaintext,
    /// SASL authentication over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Every protocol, in Kafka's `SecurityProtocol` order.
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    /// The protocol's name as Kafka spells it (`SASL_SSL`).
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// The protocol named `name` (case-insensitive, as Kafka's
    /// `SecurityProtocol.forName`).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name.trim()))
    }

    /// Kafka's id of the protocol (`SecurityProtocol.id`), as written in a
    /// broker registration's endpoints: 0 PLAINTEXT, 1 SSL, 2
    /// SASL_PLAINTEXT, 3 SASL_SSL.
    pub fn id(self) -> i16 {
        match self {
            SecurityProtocol::Plaintext => 0,
            SecurityProtocol::Ssl => 1,
            SecurityProtocol::SaslPlaintext => 2,
            SecurityProtocol::SaslSsl => 3,
        }
    }

    /// True for SSL and SASL_SSL: the connection is TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }
}

impl std::fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Kafka's default `listener.security.protocol.map`: each protocol's name
/// maps to itself.
pub const DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP: &str =
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT";

/// Parses `listener.security.protocol.map`: `NAME:PROTOCOL,...`, listener
/// names upper-cased (Kafka's `ListenerName.normalised`).
///
/// # Errors
/// [`ConfigError::InvalidValue`] naming `key` for an item without `:`, an
/// unknown protocol or a listener named twice.
pub fn parse_protocol_map(
    key: &str,
    value: &str,
) -> Result<Vec<(String, SecurityProtocol)>, ConfigError> {
    let invalid = |reason: String| ConfigError::InvalidValue {
        key: key.to_string(),
        value: value.to_string(),
        reason,
    };
    let mut out: Vec<(String, SecurityProtocol)> = Vec::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, protocol) = item
            .split_once(':')
            .ok_or_else(|| invalid(format!("'{item}' is not NAME:PROTOCOL")))?;
        let name = name.trim().to_ascii_uppercase();
        let protocol = SecurityProtocol::from_name(protocol)
            .ok_or_else(|| invalid(format!("'{protocol}' is not a security protocol")))?;
        if out.iter().any(|(n, _)| *n == name) {
            return Err(invalid(format!("listener {name} is mapped twice")));
        }
        out.push((name, protocol));
    }
    Ok(out)
}

/// Prefix of a per-listener setting: `listener.name.<name>.<key>` with the
/// listener name in lower case, as Kafka's `ListenerName.configPrefix`.
pub const LISTENER_PREFIX: &str = "listener.name.";

/// The broker's effective configuration.
///
/// Each field documents its Kafka key, unit and default.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// `node.id`. Default: 1.
    pub node_id: i32,
    /// `process.roles`. Default: `broker,controller`.
    pub process_roles: String,
    /// `listeners`. Default: `PLAINTEXT://127.0.0.1:9092`.
    pub listeners: Vec<Listener>,
    /// `advertised.listeners`. Default: the listeners (with their bound ports).
    pub advertised_listeners: Option<Vec<Listener>>,
    /// `listener.security.protocol.map` as set, listener names upper-cased;
    /// `None` when not set (see [`BrokerConfig::security_protocol`] for the
    /// effective map). Default: [`DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP`].
    pub listener_security_protocol_map: Option<Vec<(String, SecurityProtocol)>>,
    /// `security.inter.broker.protocol`: names the inter-broker listener
    /// when `inter.broker.listener.name` is not set. Default: PLAINTEXT.
    pub security_inter_broker_protocol: SecurityProtocol,
    /// `connections.max.reauth.ms`: SASL session lifetime (KIP-368), ms; 0
    /// disables re-authentication (see `network::sasl::SaslSession`).
    /// Default: 0.
    pub connections_max_reauth_ms: i64,
    /// `authorizer.class.name`: empty (no authorization, every client may
    /// do everything) or Kafka's
    /// `org.apache.kafka.metadata.authorizer.StandardAuthorizer`, which
    /// Weir serves itself (`crate::authorizer`). Default: empty.
    pub authorizer_class_name: String,
    /// `super.users`: principals (`User:alice`) every operation is allowed
    /// to, whatever the ACLs; `;`-separated. Default: none.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`: whether a resource no ACL applies
    /// to is open to everyone. Default: false.
    pub allow_everyone_if_no_acl_found: bool,
    /// `quota.window.num`: samples a client quota's rate is measured over
    /// (KIP-13; byte rates and request time, KIP-124). Default: 11.
    pub quota_window_num: i32,
    /// `quota.window.size.seconds`: length of one sample, seconds; also the
    /// longest throttle of the request quota. Default: 1.
    pub quota_window_size_seconds: i32,
    /// `controller.quota.window.num`: samples of the controller mutation
    /// quota (KIP-599); a client's token bucket holds its
    /// `controller_mutation_rate` times this times the sample length.
    /// Default: 11.
    pub controller_quota_window_num: i32,
    /// `controller.quota.window.size.seconds`: length of one controller
    /// mutation quota sample, seconds. Default: 1.
    pub controller_quota_window_size_seconds: i32,
    /// `connection.failed.authentication.delay.ms`: how long the answer to
    /// a failed SASL authentication is held, ms. Default: 100.
    pub connection_failed_authentication_delay_ms: i32,
    /// `sasl.server.max.receive.size`: largest request read before SASL
    /// authentication completes, bytes. Default: 524288.
    pub sasl_server_max_receive_size: i32,
    /// `controller.quorum.voters` as written (`id@host:port,...`, KIP-595);
    /// validated when set, parsed by [`BrokerConfig::quorum_voters`].
    /// Default: empty (single node, one voter).
    pub controller_quorum_voters: String,
    /// `controller.quorum.bootstrap.servers` (KIP-853): `host:port,...` of
    /// controllers a broker-only node (`process.roles=broker`) asks for the
    /// metadata when `controller.quorum.voters` is empty. Default: empty.
    pub controller_quorum_bootstrap_servers: Vec<String>,
    /// `controller.listener.names`: listeners that carry the metadata
    /// quorum between voters; never advertised to clients. Default:
    /// `CONTROLLER`.
    pub controller_listener_names: Vec<String>,
    /// `broker.heartbeat.interval.ms`: how often the broker heartbeats to
    /// the active controller (KIP-631), ms (>= 1). Default: 2000.
    pub broker_heartbeat_interval_ms: u64,
    /// `broker.session.timeout.ms`: the active controller fences a broker
    /// whose last heartbeat is older than this, ms (>= 1). Default: 9000.
    pub broker_session_timeout_ms: u64,
    /// `controller.quorum.election.timeout.ms`: a voter that hears no
    /// leader for a random time in [this, twice this] stands for election
    /// (Kafka's `QuorumConfig` randomization), ms (>= 10). Default: 1000.
    pub controller_quorum_election_timeout_ms: u64,
    /// `auto.leader.rebalance.enable`: the active controller periodically
    /// moves leadership back to preferred replicas. Default: true.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.check.interval.seconds`: how often it does, s
    /// (>= 1). Default: 300.
    pub leader_imbalance_check_interval_seconds: u64,
    /// `leader.imbalance.per.broker.percentage`: accepted for compatibility
    /// and unused, as in Kafka's KRaft controller (only the ZooKeeper
    /// controller read it): every imbalanced partition is rebalanced.
    /// Default: 10.
    pub leader_imbalance_per_broker_percentage: i32,
    /// `broker.rack`: the rack this broker is in, sent at registration and
    /// shown in Metadata. Default: none.
    pub broker_rack: Option<String>,
    /// `log.dirs` (or `log.dir`). Default: `./data`. Only the first is used.
    pub log_dirs: Vec<PathBuf>,
    /// `num.partitions`: partitions of auto-created topics and of
    /// CreateTopics with -1. Default: 1.
    pub num_partitions: i32,
    /// `default.replication.factor`. Default: 1.
    pub default_replication_factor: i16,
    /// `min.insync.replicas`. Default: 1.
    pub min_insync_replicas: i32,
    /// `auto.create.topics.enable`. Default: true.
    pub auto_create_topics_enable: bool,
    /// `log.segment.bytes`, bytes. Default: 1 GiB.
    pub log_segment_bytes: u64,
    /// `log.index.size.max.bytes`, bytes. Default: 10 MiB.
    pub log_index_size_max_bytes: u64,
    /// `log.index.interval.bytes`, bytes. Default: 4096.
    pub log_index_interval_bytes: u64,
    /// `message.max.bytes`: largest record batch accepted, bytes.
    /// Default: 1048588.
    pub message_max_bytes: usize,
    /// `log.message.timestamp.type`. Default: CreateTime.
    pub log_message_timestamp_type: TimestampType,
    /// `log.message.timestamp.before.max.ms` (KIP-937): how far in the past
    /// a CreateTime record's timestamp may lie, ms; older records are
    /// refused with INVALID_TIMESTAMP. Default: 9223372036854775807 (no
    /// bound). Topics override it with `message.timestamp.before.max.ms`.
    pub log_message_timestamp_before_max_ms: i64,
    /// `log.message.timestamp.after.max.ms` (KIP-937): how far in the future
    /// a CreateTime record's timestamp may lie, ms. Default: 3600000 (Kafka
    /// 4's, KIP-1030). Topics override it with
    /// `message.timestamp.after.max.ms`.
    pub log_message_timestamp_after_max_ms: i64,
    /// `log.retention.ms`, else `log.retention.minutes`, else
    /// `log.retention.hours` (Kafka's precedence), in ms; negative keeps
    /// segments forever. Default: 168 hours. Topics override it with
    /// `retention.ms`.
    pub log_retention_ms: i64,
    /// `log.retention.bytes`: partition size, bytes, above which the oldest
    /// segments are deleted; negative is unlimited. Default: -1.
    pub log_retention_bytes: i64,
    /// `log.roll.ms`, else `log.roll.hours` (Kafka's precedence), in ms: the
    /// age at which the active segment rolls. Default: 168 hours. Topics
    /// override it with `segment.ms`.
    pub log_roll_ms: i64,
    /// `log.retention.check.interval.ms`: how often retention runs over
    /// every partition, ms. Default: 300000.
    pub log_retention_check_interval_ms: u64,
    /// `log.cleanup.policy`: the default `cleanup.policy` of topics
    /// (`delete`, `compact` or both). Default: delete.
    pub log_cleanup_policy: weir_storage::CleanupPolicy,
    /// `log.cleaner.enable`: run the log cleaner (compaction). Default: true.
    pub log_cleaner_enable: bool,
    /// `log.cleaner.backoff.ms`: pause between cleaner passes that found
    /// nothing to clean, ms. Default: 15000.
    pub log_cleaner_backoff_ms: u64,
    /// `log.cleaner.dedupe.buffer.size`: memory of the cleaner's offset map,
    /// bytes. Default: 134217728.
    pub log_cleaner_dedupe_buffer_size: usize,
    /// `log.cleaner.threads`: cleaner threads; Weir runs one whatever the
    /// value (accepted for compatibility). Default: 1.
    pub log_cleaner_threads: u32,
    /// `num.recovery.threads.per.data.dir`: threads that open (and
    /// recover) the log directory's partitions at startup (Kafka's
    /// `LogManager.loadLogs` pool). Default: 2 (KIP-1030; 1 before Kafka
    /// 4.0).
    pub num_recovery_threads_per_data_dir: i32,
    /// `log.cleaner.min.cleanable.ratio`: default `min.cleanable.dirty.ratio`.
    /// Default: 0.5.
    pub log_cleaner_min_cleanable_ratio: f64,
    /// `log.cleaner.min.compaction.lag.ms`: default `min.compaction.lag.ms`,
    /// ms. Default: 0.
    pub log_cleaner_min_compaction_lag_ms: i64,
    /// `log.cleaner.max.compaction.lag.ms`: default `max.compaction.lag.ms`,
    /// ms. Default: 9223372036854775807.
    pub log_cleaner_max_compaction_lag_ms: i64,
    /// `log.cleaner.delete.retention.ms`: default `delete.retention.ms`, ms.
    /// Default: 86400000.
    pub log_cleaner_delete_retention_ms: i64,
    /// `producer.id.expiration.ms`: an idempotent producer whose last batch
    /// is this many ms old is forgotten at the next retention check, ms.
    /// Default: 86400000 (1 day).
    pub producer_id_expiration_ms: i64,
    /// `socket.request.max.bytes`: largest request frame, bytes.
    /// Default: 104857600.
    pub socket_request_max_bytes: usize,
    /// `connections.max.idle.ms`: idle connections are closed after this many
    /// ms; -1 never closes them, as Kafka. Default: 600000.
    pub connections_max_idle_ms: i64,
    // ---- Memory and connection limits (issue 15; `network::NetworkLimits`).
    /// `queued.max.request.bytes`: bytes of requests held in memory across
    /// all connections (being read, processed or parked); a connection that
    /// finds it exhausted stops being read until bytes come back (Kafka's
    /// `SocketServer` memory pool). Zero or negative is unbounded, as Kafka.
    /// Default: 209715200 (200 MiB, twice `socket.request.max.bytes`).
    /// Kafka's default is -1 (unbounded); Weir bounds memory by default.
    /// Unlike Kafka it may be below `socket.request.max.bytes`: bytes are
    /// counted as they arrive, and one connection at a time may finish a
    /// request past an exhausted budget.
    pub queued_max_request_bytes: i64,
    /// `queued.max.response.bytes` (Weir): encoded response bytes waiting to
    /// be written, across all connections; when reached, connections with
    /// unsent responses stop being read and processed. Zero or negative is
    /// unbounded. Default: 209715200 (200 MiB).
    pub queued_max_response_bytes: i64,
    /// `queued.max.response.bytes.per.connection` (Weir): unsent response
    /// bytes at which a connection stops being read and processed (Kafka
    /// answers one request at a time per connection). Default: 1048576.
    pub queued_max_response_bytes_per_connection: i64,
    /// `fetch.max.bytes`: largest Fetch response, bytes; a request's
    /// `max_bytes` is lowered to it (Kafka's `KafkaApis`), the first batch
    /// is still returned whole (KIP-74). Default: 57671680 (55 MiB).
    pub fetch_max_bytes: i32,
    /// `max.incremental.fetch.session.cache.slots`: incremental fetch
    /// sessions (KIP-227) the leader keeps; at the limit the least recently
    /// used is evicted, at 0 none is created. Only followers' fetches create
    /// sessions. Default: 1000.
    pub max_incremental_fetch_session_cache_slots: i32,
    /// `max.request.partition.size.limit`: most partitions one
    /// DescribeTopicPartitions response describes; the request's own limit
    /// is lowered to it and the rest follow by cursor (KIP-966, Kafka's
    /// `DescribeTopicPartitionsRequestHandler`). Default: 2000.
    pub max_request_partition_size_limit: i32,
    /// `max.connections`: open connections across all listeners; when
    /// reached, new ones wait to be accepted until one closes (Kafka's
    /// `ConnectionQuotas`). Default: 2147483647.
    pub max_connections: i32,
    /// `max.connections.per.ip`: open connections from one address; a
    /// connection over it is closed at once. Default: 2147483647.
    pub max_connections_per_ip: i32,
    /// `max.connections.per.ip.overrides`: `ip:count,...`, limits for
    /// single addresses (IP literals; Kafka also resolves host names).
    /// Default: empty.
    pub max_connections_per_ip_overrides: std::collections::HashMap<std::net::IpAddr, usize>,
    // ---- end of the memory and connection limits.
    /// `log.flush.interval.messages`: default of the topic config
    /// `flush.messages`; a log with at least this many unflushed messages is
    /// fsynced before the append is answered. Default: `i64::MAX` (never).
    pub log_flush_interval_messages: i64,
    /// `log.flush.interval.ms`: default of the topic config `flush.ms`, ms;
    /// unset means `log.flush.scheduler.interval.ms`, as in Kafka.
    pub log_flush_interval_ms: Option<i64>,
    /// `log.flush.scheduler.interval.ms`: how often the background flusher
    /// looks for logs whose `flush.ms` has passed, ms. Default: `i64::MAX`
    /// (the flusher does not run), as in Kafka.
    pub log_flush_scheduler_interval_ms: i64,
    /// `log.flush.offset.checkpoint.interval.ms`: how often the recovery
    /// points are checkpointed, ms. Default: 60000.
    pub log_flush_offset_checkpoint_interval_ms: u64,
    /// `log.write.caching` (Weir; Redpanda's `write_caching_default`):
    /// default of the topic config `write.caching`. When false (the
    /// default) an acks=all produce is answered only after its data is
    /// fsynced; when true it is answered once appended to the page cache,
    /// as Apache Kafka does, and data reaches disk by `flush.messages`,
    /// `flush.ms` or the operating system.
    pub log_write_caching: bool,
    /// `log.flush.pace.ms` (Weir): a partition growing by 8 KiB or more
    /// per interval flushes for acks=all at most once per interval, so one
    /// fdatasync covers the batches of several requests
    /// (`crate::partition::flush_pace`); 0 turns pacing off. At most 1000.
    /// Default: 4.
    pub log_flush_pace_ms: u64,
    // ---- The offsets topic `__consumer_offsets` (group coordinator
    // storage, Kafka's `GroupCoordinatorConfig` offsets.topic.* keys).
    /// `offsets.topic.num.partitions`: partitions of `__consumer_offsets`
    /// when it is created. Default: 50.
    pub offsets_topic_num_partitions: i32,
    /// `offsets.topic.replication.factor`: replication factor of
    /// `__consumer_offsets` when it is created, capped (with a warning) at
    /// the number of registered brokers. Default: 3.
    pub offsets_topic_replication_factor: i16,
    /// `offsets.topic.segment.bytes`: the `segment.bytes` of
    /// `__consumer_offsets`, bytes (at least 1 MiB, the topic key's
    /// minimum). Default: 104857600.
    pub offsets_topic_segment_bytes: u64,
    // ---- end of the offsets topic keys.
    /// `metrics.listener` (Weir): address of the Prometheus endpoint, or
    /// None when set to an empty value. Default: 127.0.0.1:9464.
    pub metrics_listener: Option<SocketAddr>,
    // ---- Consumer groups: the group coordinator's `group.*` and
    // `offsets.*` keys (issue 4). The offsets topic's `offsets.topic.*`
    // keys are kept in their own block. ----
    /// The group coordinator's settings: `group.initial.rebalance.delay.ms`
    /// (ms, default 3000), `group.min.session.timeout.ms` (ms, default
    /// 6000), `group.max.session.timeout.ms` (ms, default 1800000),
    /// `group.max.size` (default 2147483647), `offset.metadata.max.bytes`
    /// (default 4096), `offsets.retention.minutes` (default 10080, held in
    /// ms) and `offsets.retention.check.interval.ms` (ms, default 600000).
    pub group_coordinator: crate::group::GroupCoordinatorConfig,
    // ---- end of the group coordinator's keys ----
    /// Partition data replication (issue 16): Kafka's `ReplicationConfigs`
    /// keys (`num.replica.fetchers`, `replica.fetch.*`,
    /// `replica.lag.time.max.ms`, `replica.high.watermark.checkpoint.interval.ms`)
    /// and `inter.broker.listener.name`; see [`ReplicationConfig`].
    pub replication: ReplicationConfig,
    /// Every key set explicitly (file or override), for DescribeConfigs
    /// sources.
    pub explicit: BTreeMap<String, String>,
}

/// Partition data replication settings (Kafka's `ReplicationConfigs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationConfig {
    /// `num.replica.fetchers`: fetcher tasks per source broker; a
    /// partition goes to fetcher `hash(topic, partition) % n` (Kafka's
    /// `AbstractFetcherManager.getFetcherId`). Default: 1.
    pub num_replica_fetchers: i32,
    /// `replica.fetch.max.bytes`: bytes fetched per partition per follower
    /// Fetch; the first batch is fetched whole even when larger (KIP-74).
    /// Default: 1048576.
    pub replica_fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes`: bytes of a whole follower Fetch
    /// response. Default: 10485760.
    pub replica_fetch_response_max_bytes: i32,
    /// `replica.fetch.wait.max.ms`: how long the leader parks a follower
    /// Fetch that has no data, ms; must stay below
    /// `replica.lag.time.max.ms`. Default: 500.
    pub replica_fetch_wait_max_ms: i32,
    /// `replica.fetch.min.bytes`: bytes a follower Fetch waits for.
    /// Default: 1.
    pub replica_fetch_min_bytes: i32,
    /// `replica.fetch.backoff.ms`: pause after a failed follower Fetch, ms.
    /// Default: 1000.
    pub replica_fetch_backoff_ms: i32,
    /// `replica.lag.time.max.ms`: an ISR follower not caught up for this
    /// long is removed from the ISR (checked every half of it), ms.
    /// Default: 30000.
    pub replica_lag_time_max_ms: i64,
    /// `replica.high.watermark.checkpoint.interval.ms`: how often the high
    /// watermarks are written to `replication-offset-checkpoint`, ms.
    /// Default: 5000.
    pub high_watermark_checkpoint_interval_ms: i64,
    /// `inter.broker.listener.name`: the listener followers fetch through;
    /// `None` means the first PLAINTEXT listener (Kafka's default of
    /// `security.inter.broker.protocol=PLAINTEXT`).
    pub inter_broker_listener_name: Option<String>,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        ReplicationConfig {
            num_replica_fetchers: 1,
            replica_fetch_max_bytes: 1_048_576,
            replica_fetch_response_max_bytes: 10_485_760,
            replica_fetch_wait_max_ms: 500,
            replica_fetch_min_bytes: 1,
            replica_fetch_backoff_ms: 1000,
            replica_lag_time_max_ms: 30_000,
            high_watermark_checkpoint_interval_ms: 5000,
            inter_broker_listener_name: None,
        }
    }
}

impl Default for BrokerConfig {
    fn default() -> Self {
        let log = LogConfig::default();
        BrokerConfig {
            node_id: 1,
            process_roles: "broker,controller".to_string(),
            listeners: vec![Listener {
                name: "PLAINTEXT".to_string(),
                host: "127.0.0.1".to_string(),
                port: 9092,
            }],
            advertised_listeners: None,
            listener_security_protocol_map: None,
            security_inter_broker_protocol: SecurityProtocol::Plaintext,
            connections_max_reauth_ms: 0,
            authorizer_class_name: String::new(),
            super_users: Vec::new(),
            allow_everyone_if_no_acl_found: false,
            quota_window_num: 11,
            quota_window_size_seconds: 1,
            controller_quota_window_num: 11,
            controller_quota_window_size_seconds: 1,
            connection_failed_authentication_delay_ms: 100,
            sasl_server_max_receive_size: 524_288,
            controller_quorum_voters: String::new(),
            controller_quorum_bootstrap_servers: Vec::new(),
            controller_listener_names: vec!["CONTROLLER".to_string()],
            broker_heartbeat_interval_ms: 2000,
            broker_session_timeout_ms: 9000,
            controller_quorum_election_timeout_ms: 1000,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_seconds: 300,
            leader_imbalance_per_broker_percentage: 10,
            broker_rack: None,
            log_dirs: vec![PathBuf::from("./data")],
            num_partitions: 1,
            default_replication_factor: 1,
            min_insync_replicas: 1,
            auto_create_topics_enable: true,
            log_segment_bytes: log.segment_bytes,
            log_index_size_max_bytes: log.segment_index_bytes,
            log_index_interval_bytes: log.index_interval_bytes,
            message_max_bytes: log.max_message_bytes,
            log_message_timestamp_type: TimestampType::CreateTime,
            log_message_timestamp_before_max_ms: i64::MAX,
            log_message_timestamp_after_max_ms: 3_600_000,
            log_retention_ms: 168 * 3_600_000,
            log_retention_bytes: -1,
            log_roll_ms: 168 * 3_600_000,
            log_retention_check_interval_ms: 300_000,
            log_cleanup_policy: weir_storage::CleanupPolicy::default(),
            offsets_topic_num_partitions: 50,
            offsets_topic_replication_factor: 3,
            offsets_topic_segment_bytes: 104_857_600,
            log_cleaner_enable: true,
            log_cleaner_backoff_ms: 15_000,
            log_cleaner_dedupe_buffer_size: 128 << 20,
            log_cleaner_threads: 1,
            num_recovery_threads_per_data_dir: 2,
            log_cleaner_min_cleanable_ratio: log.min_cleanable_dirty_ratio,
            log_cleaner_min_compaction_lag_ms: log.min_compaction_lag_ms,
            log_cleaner_max_compaction_lag_ms: log.max_compaction_lag_ms,
            log_cleaner_delete_retention_ms: log.delete_retention_ms,
            producer_id_expiration_ms: 86_400_000,
            socket_request_max_bytes: 104_857_600,
            connections_max_idle_ms: 600_000,
            // ---- Memory and connection limits (issue 15).
            queued_max_request_bytes: 209_715_200,
            queued_max_response_bytes: 209_715_200,
            queued_max_response_bytes_per_connection: 1_048_576,
            fetch_max_bytes: 57_671_680,
            max_incremental_fetch_session_cache_slots: 1000,
            max_request_partition_size_limit: 2000,
            max_connections: i32::MAX,
            max_connections_per_ip: i32::MAX,
            max_connections_per_ip_overrides: std::collections::HashMap::new(),
            log_flush_interval_messages: i64::MAX,
            log_flush_interval_ms: None,
            log_flush_scheduler_interval_ms: i64::MAX,
            log_flush_offset_checkpoint_interval_ms: 60_000,
            log_write_caching: false,
            log_flush_pace_ms: 4,
            metrics_listener: Some(SocketAddr::from(([127, 0, 0, 1], 9464))),
            group_coordinator: crate::group::GroupCoordinatorConfig::default(),
            replication: ReplicationConfig::default(),
            explicit: BTreeMap::new(),
        }
    }
}

impl From<crate::config_bounds::InvalidValue> for ConfigError {
    fn from(e: crate::config_bounds::InvalidValue) -> Self {
        ConfigError::InvalidValue {
            key: e.name,
            value: e.value,
            reason: e.reason,
        }
    }
}

/// Parses a numeric value (surrounding whitespace ignored) as the field's
/// type `T`; the key's bound (its row in [`crate::broker_keys::BROKER_KEYS`])
/// is checked before.
///
/// # Errors
/// [`ConfigError::InvalidValue`] naming `key` when the value does not fit
/// `T`.
pub fn parse_number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, ConfigError> {
    value.trim().parse().map_err(|_| ConfigError::InvalidValue {
        key: key.to_string(),
        value: value.to_string(),
        reason: "Not a number in this key's range".to_string(),
    })
}

/// A retention in `unit_ms` units as ms: -1 (unlimited) stays -1.
pub fn unlimited_or(value: i64, unit_ms: i64) -> i64 {
    if value < 0 {
        -1
    } else {
        value.saturating_mul(unit_ms)
    }
}

/// `max.connections.per.ip.overrides`: `ip:count` pairs separated by
/// commas (an IPv6 address may be bracketed, `[::1]:5`), counts at least 0.
///
/// # Errors
/// [`ConfigError::InvalidValue`] naming `key` for a malformed pair.
pub fn parse_ip_counts(
    key: &str,
    value: &str,
) -> Result<std::collections::HashMap<std::net::IpAddr, usize>, ConfigError> {
    let invalid = |reason: String| ConfigError::InvalidValue {
        key: key.to_string(),
        value: value.to_string(),
        reason,
    };
    let mut out = std::collections::HashMap::new();
    for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (host, count) = pair
            .rsplit_once(':')
            .ok_or_else(|| invalid(format!("'{pair}' is not host:count")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let ip = host
            .parse()
            .map_err(|_| invalid(format!("'{host}' is not an IP address")))?;
        let count: i32 = count
            .trim()
            .parse()
            .map_err(|_| invalid(format!("'{count}' is not a connection count")))?;
        if count < 0 {
            return Err(invalid(format!(
                "count {count} for {host} must be at least 0"
            )));
        }
        out.insert(ip, count as usize);
    }
    Ok(out)
}

/// Parses a `BOOLEAN` value: `true` or `false` (surrounding whitespace
/// ignored).
///
/// # Errors
/// [`ConfigError::InvalidValue`] naming `key` for anything else.
pub fn parse_bool(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigError::InvalidValue {
            key: key.to_string(),
            value: value.to_string(),
            reason: "expected true or false".to_string(),
        }),
    }
}

/// Parses a `cleanup.policy` list (`delete`, `compact`, `compact,delete`);
/// `None` for anything else or an empty list.
pub fn parse_cleanup_policy(value: &str) -> Option<weir_storage::CleanupPolicy> {
    let mut policy = weir_storage::CleanupPolicy {
        delete: false,
        compact: false,
    };
    for part in value.split(',').map(str::trim) {
        match part {
            "delete" => policy.delete = true,
            "compact" => policy.compact = true,
            _ => return None,
        }
    }
    Some(policy)
}

/// A `cleanup.policy` as Kafka prints it: `delete`, `compact` or
/// `compact,delete`.
pub fn cleanup_policy_name(policy: weir_storage::CleanupPolicy) -> &'static str {
    match (policy.compact, policy.delete) {
        (true, true) => "compact,delete",
        (true, false) => "compact",
        _ => "delete",
    }
}

/// A `message.timestamp.type` as Kafka prints it.
pub fn timestamp_type_name(t: TimestampType) -> &'static str {
    match t {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    }
}

/// Listeners as `listeners` is written: `NAME://host:port,...`.
pub fn listeners_text(listeners: &[Listener]) -> String {
    listeners
        .iter()
        .map(|l| format!("{}://{}:{}", l.name, l.host, l.port))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses `message.timestamp.type` values.
///
/// # Errors
/// [`ConfigError::InvalidValue`] for anything but `CreateTime` or
/// `LogAppendTime`.
pub fn parse_timestamp_type(key: &str, value: &str) -> Result<TimestampType, ConfigError> {
    match value.trim() {
        "CreateTime" => Ok(TimestampType::CreateTime),
        "LogAppendTime" => Ok(TimestampType::LogAppendTime),
        _ => Err(ConfigError::InvalidValue {
            key: key.to_string(),
            value: value.to_string(),
            reason: "expected CreateTime or LogAppendTime".to_string(),
        }),
    }
}

impl BrokerConfig {
    /// Builds the configuration from an optional properties file and
    /// `key=value` overrides applied after it (as `kafka-server-start.sh
    /// --override`).
    ///
    /// # Errors
    /// Unreadable file, bad syntax, unknown key or invalid value.
    pub fn load(file: Option<&std::path::Path>, overrides: &[String]) -> Result<Self, ConfigError> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
                path: path.display().to_string(),
                source,
            })?;
            pairs.extend(parse_properties(&text, &path.display().to_string())?);
        }
        for (i, o) in overrides.iter().enumerate() {
            let (k, v) = o.split_once('=').ok_or(ConfigError::Syntax {
                path: "--override".to_string(),
                line: i + 1,
            })?;
            pairs.push((k.trim().to_string(), v.trim().to_string()));
        }
        Self::from_pairs(pairs)
    }

    /// Applies `(key, value)` pairs in order over the defaults.
    ///
    /// # Errors
    /// Unknown key or invalid value.
    pub fn from_pairs(pairs: Vec<(String, String)>) -> Result<Self, ConfigError> {
        let mut c = BrokerConfig::default();
        for (key, value) in pairs {
            c.set(&key, &value)?;
            c.explicit.insert(key, value);
        }
        // Kafka's precedence, whatever the order they were given in:
        // log.retention.ms > log.retention.minutes > log.retention.hours and
        // log.roll.ms > log.roll.hours.
        for key in ["log.retention.minutes", "log.retention.ms", "log.roll.ms"] {
            if let Some(value) = c.explicit.get(key).cloned() {
                c.set(key, &value)?;
            }
        }
        // Kafka's KafkaConfig.validateValues: the dedupe buffer is shared
        // by the cleaner threads, each of which needs more than 1 MiB.
        let per_thread = c.log_cleaner_dedupe_buffer_size / c.log_cleaner_threads.max(1) as usize;
        if per_thread <= 1024 * 1024 {
            return Err(ConfigError::InvalidValue {
                key: "log.cleaner.dedupe.buffer.size".to_string(),
                value: c.log_cleaner_dedupe_buffer_size.to_string(),
                reason: "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread"
                    .to_string(),
            });
        }
        // Kafka's KafkaConfig.validateValues: a follower Fetch parked longer
        // than the lag limit would drop its follower from the ISR.
        let replication = &c.replication;
        if i64::from(replication.replica_fetch_wait_max_ms) > replication.replica_lag_time_max_ms {
            return Err(ConfigError::InvalidValue {
                key: "replica.fetch.wait.max.ms".to_string(),
                value: replication.replica_fetch_wait_max_ms.to_string(),
                reason: "replica.fetch.wait.max.ms should always be less than or equal to \
                         replica.lag.time.max.ms to prevent frequent changes in ISR"
                    .to_string(),
            });
        }
        // Kafka's KafkaConfig.listenerSecurityProtocolMap: every listener
        // needs a protocol.
        let named = c
            .listeners
            .iter()
            .chain(c.advertised_listeners.iter().flatten());
        for l in named {
            if c.security_protocol(&l.name).is_none() {
                return Err(ConfigError::InvalidValue {
                    key: "listener.security.protocol.map".into(),
                    value: c
                        .explicit
                        .get("listener.security.protocol.map")
                        .cloned()
                        .unwrap_or_else(|| DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP.into()),
                    reason: format!("No security protocol defined for listener {}", l.name),
                });
            }
        }
        // Weir keeps the metadata log (`__cluster_metadata-0`) in the first
        // log directory; Kafka's metadata.log.dir naming that directory is
        // the same layout, another directory is not served.
        if let Some(dir) = c.explicit.get("metadata.log.dir") {
            if std::path::Path::new(dir.trim()) != c.log_dir() {
                return Err(ConfigError::InvalidValue {
                    key: "metadata.log.dir".into(),
                    value: dir.clone(),
                    reason: format!(
                        "Weir keeps the metadata log in the first log directory ({}); \
                         remove metadata.log.dir or set it to that directory",
                        c.log_dir().display()
                    ),
                });
            }
        }
        // Kafka's KafkaConfig: no connection at all is allowed only for
        // addresses that have an override.
        if c.max_connections_per_ip == 0 && c.max_connections_per_ip_overrides.is_empty() {
            return Err(ConfigError::InvalidValue {
                key: "max.connections.per.ip".into(),
                value: "0".into(),
                reason: "can be set to zero only if max.connections.per.ip.overrides is set".into(),
            });
        }
        Ok(c)
    }

    /// The voters of `controller.quorum.voters` (validated when set; empty
    /// for a single node).
    pub fn quorum_voters(&self) -> Vec<weir_controller::QuorumVoter> {
        weir_controller::QuorumVoter::parse_list(&self.controller_quorum_voters).unwrap_or_default()
    }

    /// True for a broker-only node (`process.roles` without `controller`):
    /// it follows the metadata quorum without voting.
    pub fn is_broker_only(&self) -> bool {
        !self.is_controller()
    }

    /// True when `process.roles` includes `controller`.
    pub fn is_controller(&self) -> bool {
        self.process_roles
            .split(',')
            .any(|role| role.trim() == "controller")
    }

    /// True when `name` is one of `controller.listener.names`.
    pub fn is_controller_listener(&self, name: &str) -> bool {
        self.controller_listener_names.iter().any(|n| n == name)
    }

    /// Applies one key through its row of
    /// [`crate::broker_keys::BROKER_KEYS`] (bound, then parser).
    fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        if let Some(rest) = key.strip_prefix(LISTENER_PREFIX) {
            // listener.name.<name>.<mechanism>.sasl.jaas.config: a JAAS
            // entry (its value holds passwords: never in an error).
            // listener.name.<name>.<mechanism>.connections.max.reauth.ms:
            // KIP-368's per-mechanism session lifetime, read by
            // `network::sasl::session_lifetimes`.
            if let Some((_, k)) = rest.split_once('.') {
                if k.split_once('.')
                    .is_some_and(|(_, k)| k == "connections.max.reauth.ms")
                {
                    return value.trim().parse::<i64>().map(|_| ()).map_err(|e| {
                        ConfigError::InvalidValue {
                            key: key.to_string(),
                            value: value.to_string(),
                            reason: e.to_string(),
                        }
                    });
                }
            }
            if rest
                .split_once('.')
                .is_some_and(|(_, k)| k.ends_with(".sasl.jaas.config"))
            {
                return crate::network::sasl::check_jaas(value).map_err(|reason| {
                    ConfigError::InvalidValue {
                        key: key.to_string(),
                        value: "[hidden]".to_string(),
                        reason,
                    }
                });
            }
            // listener.name.<name>.<key>: validated as <key>, which must be
            // one a listener can override; resolved by `listener_value`.
            let listener_key = rest
                .split_once('.')
                .map(|(_, k)| k)
                .and_then(crate::broker_keys::broker_key)
                .filter(|k| crate::broker_keys::is_listener_key(k.name))
                .ok_or_else(|| ConfigError::UnknownKey {
                    key: key.to_string(),
                })?;
            // Validated only: the broker-wide value stays as it is.
            return listener_key.apply(&mut BrokerConfig::default(), value);
        }
        crate::broker_keys::broker_key(key)
            .ok_or_else(|| ConfigError::UnknownKey {
                key: key.to_string(),
            })?
            .apply(self, value)
    }

    /// The value of `key` for listener `listener`: its
    /// `listener.name.<listener>.<key>` override, else `key` itself, as
    /// written (trimmed); `None` when neither is set (the caller applies
    /// the key's default). Kafka's `KafkaConfig.valuesWithPrefixOverride`.
    pub fn listener_value(&self, listener: &str, key: &str) -> Option<&str> {
        let prefixed = format!("{LISTENER_PREFIX}{}.{key}", listener.to_ascii_lowercase());
        self.explicit
            .get(&prefixed)
            .or_else(|| self.explicit.get(key))
            .map(|v| v.trim())
    }

    /// The security protocol of listener `name` by the effective
    /// `listener.security.protocol.map` (Kafka's
    /// `KafkaConfig.effectiveListenerSecurityProtocolMap`): the map as set,
    /// else Kafka's default, where, when the map is not set, a controller
    /// listener that is not named after a protocol is PLAINTEXT. `None`
    /// for a listener the map does not name.
    pub fn security_protocol(&self, name: &str) -> Option<SecurityProtocol> {
        match &self.listener_security_protocol_map {
            Some(map) => map
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, p)| *p),
            None => SecurityProtocol::from_name(name).or_else(|| {
                self.is_controller_listener(name)
                    .then_some(SecurityProtocol::Plaintext)
            }),
        }
    }

    /// The partition log config derived from broker defaults (`log.*` keys);
    /// topic configs override it per topic.
    pub fn default_log_config(&self) -> LogConfig {
        LogConfig {
            segment_bytes: self.log_segment_bytes,
            segment_index_bytes: self.log_index_size_max_bytes,
            index_interval_bytes: self.log_index_interval_bytes,
            max_message_bytes: self.message_max_bytes,
            message_timestamp_type: self.log_message_timestamp_type,
            retention_ms: self.log_retention_ms,
            retention_bytes: self.log_retention_bytes,
            segment_ms: self.log_roll_ms,
            cleanup_policy: self.log_cleanup_policy,
            flush_messages: self.log_flush_interval_messages,
            flush_ms: self.log_flush_interval_ms_or_default(),
            min_cleanable_dirty_ratio: self.log_cleaner_min_cleanable_ratio,
            min_compaction_lag_ms: self.log_cleaner_min_compaction_lag_ms,
            max_compaction_lag_ms: self.log_cleaner_max_compaction_lag_ms,
            delete_retention_ms: self.log_cleaner_delete_retention_ms,
            message_timestamp_before_max_ms: self.log_message_timestamp_before_max_ms,
            message_timestamp_after_max_ms: self.log_message_timestamp_after_max_ms,
        }
    }

    /// The log cleaner's settings (`log.cleaner.dedupe.buffer.size`).
    pub fn cleaner_config(&self) -> weir_storage::CleanerConfig {
        weir_storage::CleanerConfig {
            dedupe_buffer_size: self.log_cleaner_dedupe_buffer_size,
        }
    }

    /// `log.flush.interval.ms`, or `log.flush.scheduler.interval.ms` when
    /// unset (Kafka's fallback).
    pub fn log_flush_interval_ms_or_default(&self) -> i64 {
        self.log_flush_interval_ms
            .unwrap_or(self.log_flush_scheduler_interval_ms)
    }

    /// The first (and for now only) log directory.
    pub fn log_dir(&self) -> PathBuf {
        self.log_dirs[0].clone()
    }
}

/// Parses properties text as `java.util.Properties.load` does, which is
/// how Kafka reads server.properties (`Utils.loadProps`), through the
/// `java-properties` crate: `#`/`!` comments and blank lines skipped; a key
/// ends at its first unescaped `=`, `:` or blank (`key=value`,
/// `key: value` and `key value` are all pairs; a key alone has an empty
/// value); a line ending in an odd number of backslashes goes on in the
/// next, whose leading blanks are dropped (JAAS entries are written so);
/// escapes are undone (`\\`, `\t`, `\n`, `\uXXXX`, and `\x` for any
/// other `x`). Returns the pairs in file order (a later duplicate wins when
/// applied, as in Java). Departs from Java in two ways: the text is UTF-8
/// (Java reads ISO-8859-1, which would turn a UTF-8 password into other
/// characters), and a value's trailing blanks are dropped (Java keeps
/// them; Kafka trims every value but strings and passwords when it parses
/// it, so `num.partitions=3 ` is 3 there too).
///
/// # Errors
/// [`ConfigError::Syntax`] with the line of a malformed `\u` escape.
fn parse_properties(text: &str, path: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    // The crate drops a last line that continues (odd backslashes) into the
    // end of a file without a final newline; Java keeps it.
    let text = if text.ends_with('\n') {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(format!("{text}\n"))
    };
    java_properties::PropertiesIter::new_with_encoding(text.as_bytes(), encoding_rs::UTF_8)
        .read_into(|key, value| out.push((key, value.trim_end().to_string())))
        .map_err(|e| ConfigError::Syntax {
            path: path.to_string(),
            line: e.line_number().unwrap_or(0),
        })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailing_backslash_continues_the_value_as_java_properties() {
        let text = "a=one \\\n    two \\\n\tthree\n# c \\\nb=x\\\\\nc=y\n";
        let pairs = parse_properties(text, "test").unwrap();
        assert_eq!(
            pairs,
            [
                ("a".to_string(), "one two three".to_string()),
                ("b".to_string(), "x\\".to_string()),
                ("c".to_string(), "y".to_string()),
            ]
        );
    }

    /// `java.util.Properties.load`, which reads Kafka's server.properties
    /// (`Utils.loadProps`): a key ends at the first unescaped `=`, `:` or
    /// blank, so `key value` is a pair too; a line with a key alone has an
    /// empty value; backslash escapes are undone (`\\` is one backslash,
    /// `\t`, `\uXXXX`, and `\x` is `x`). Left alone in session 25: Weir
    /// refused `key value` and kept escapes as written, so a mapping rule
    /// written `\\.` in the file (Kafka reads `\.`) reached the principal
    /// mapper as `\\.`.
    #[test]
    fn lines_parse_as_java_util_properties_loads_them() {
        let text = concat!(
            "node.id 3\n",
            "  log.dirs :  /var/lib/weir\n",
            "listeners=PLAINTEXT://:9092\n",
            "rules=RULE:^CN=(.*?)\\\\.example$/$1/\n",
            "tab=a\\tb\\u0041\\q\n",
            "key\\=with\\:separators = v\n",
            "alone\n",
            "! bang comment\n",
            "num.partitions=3 \n",
            "last=end \\",
        );
        let pairs = parse_properties(text, "test").unwrap();
        assert_eq!(
            pairs,
            [
                ("node.id", "3"),
                ("log.dirs", "/var/lib/weir"),
                ("listeners", "PLAINTEXT://:9092"),
                ("rules", "RULE:^CN=(.*?)\\.example$/$1/"),
                ("tab", "a\tbAq"),
                ("key=with:separators", "v"),
                ("alone", ""),
                ("num.partitions", "3"),
                ("last", "end"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
        let bad = parse_properties("a=\\u12\n", "server.properties").unwrap_err();
        assert!(
            matches!(bad, ConfigError::Syntax { line: 1, .. }),
            "{bad:?}"
        );
    }

    #[test]
    fn defaults_match_kafka_and_readme() {
        let c = BrokerConfig::default();
        assert_eq!(c.node_id, 1);
        assert_eq!(c.listeners[0].port, 9092);
        assert_eq!(c.socket_request_max_bytes, 104_857_600);
        assert_eq!(c.message_max_bytes, 1_048_588);
        assert_eq!(c.offsets_topic_num_partitions, 50);
        assert_eq!(c.offsets_topic_replication_factor, 3);
        assert_eq!(c.offsets_topic_segment_bytes, 104_857_600);
        assert_eq!(c.log_segment_bytes, 1 << 30);
        assert_eq!(c.log_message_timestamp_before_max_ms, i64::MAX);
        assert_eq!(c.log_message_timestamp_after_max_ms, 3_600_000);
        assert_eq!(c.metrics_listener, Some("127.0.0.1:9464".parse().unwrap()));
    }

    #[test]
    fn memory_and_connection_limits_default_and_parse() {
        let c = BrokerConfig::default();
        assert_eq!(c.queued_max_request_bytes, 209_715_200);
        assert_eq!(c.queued_max_response_bytes, 209_715_200);
        assert_eq!(c.queued_max_response_bytes_per_connection, 1_048_576);
        assert_eq!(c.fetch_max_bytes, 57_671_680);
        assert_eq!(c.max_connections, i32::MAX);
        assert_eq!(c.max_connections_per_ip, i32::MAX);
        assert!(c.max_connections_per_ip_overrides.is_empty());
        let pairs = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        let c = BrokerConfig::from_pairs(pairs(
            "max.connections.per.ip.overrides",
            "127.0.0.1:3, [::1]:0",
        ))
        .unwrap();
        assert_eq!(
            c.max_connections_per_ip_overrides,
            std::collections::HashMap::from([
                ("127.0.0.1".parse().unwrap(), 3),
                ("::1".parse().unwrap(), 0)
            ])
        );
        for (key, value) in [
            ("max.connections.per.ip.overrides", "127.0.0.1"),
            ("max.connections.per.ip.overrides", "localhost:3"),
            ("max.connections.per.ip.overrides", "127.0.0.1:-1"),
            ("max.connections", "-1"),
            ("max.connections.per.ip", "-1"),
            ("fetch.max.bytes", "-1"),
            ("queued.max.response.bytes.per.connection", "0"),
            ("queued.max.request.bytes", "lots"),
            ("max.connections.per.ip", "0"),
        ] {
            let err = BrokerConfig::from_pairs(pairs(key, value)).unwrap_err();
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    #[test]
    fn offsets_topic_keys_are_parsed_and_bounded_as_kafka() {
        let pairs = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        let c = BrokerConfig::from_pairs(pairs("offsets.topic.num.partitions", "7")).unwrap();
        assert_eq!(c.offsets_topic_num_partitions, 7);
        let c = BrokerConfig::from_pairs(pairs("offsets.topic.replication.factor", "1")).unwrap();
        assert_eq!(c.offsets_topic_replication_factor, 1);
        let c = BrokerConfig::from_pairs(pairs("offsets.topic.segment.bytes", "1048576")).unwrap();
        assert_eq!(c.offsets_topic_segment_bytes, 1_048_576);
        for key in [
            "offsets.topic.num.partitions",
            "offsets.topic.replication.factor",
            "offsets.topic.segment.bytes",
        ] {
            let err = BrokerConfig::from_pairs(pairs(key, "0")).unwrap_err();
            assert!(err.to_string().contains(key), "{err}");
        }
        assert!(BrokerConfig::from_pairs(pairs("offsets.topic.segment.bytes", "1048575")).is_err());
    }

    #[test]
    fn quorum_voters_and_controller_listener_names_are_parsed() {
        let pairs = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        let c = BrokerConfig::default();
        assert!(c.quorum_voters().is_empty());
        assert!(c.is_controller());
        assert!(c.is_controller_listener("CONTROLLER"));
        let c = BrokerConfig::from_pairs(pairs(
            "controller.quorum.voters",
            "1@127.0.0.1:9093,2@127.0.0.1:9094",
        ))
        .unwrap();
        let voters = c.quorum_voters();
        assert_eq!(voters.len(), 2);
        assert_eq!((voters[1].id, voters[1].port), (2, 9094));
        let err =
            BrokerConfig::from_pairs(pairs("controller.quorum.voters", "1@nohost")).unwrap_err();
        assert!(
            err.to_string().contains("controller.quorum.voters"),
            "{err}"
        );
        let c = BrokerConfig::from_pairs(pairs("controller.listener.names", "QUORUM, C2")).unwrap();
        assert!(c.is_controller_listener("C2") && !c.is_controller_listener("CONTROLLER"));
        let c = BrokerConfig::from_pairs(pairs("process.roles", "broker")).unwrap();
        assert!(!c.is_controller() && c.is_broker_only());
        let c = BrokerConfig::from_pairs(pairs(
            "controller.quorum.bootstrap.servers",
            "127.0.0.1:9093, [::1]:9094",
        ))
        .unwrap();
        assert_eq!(
            c.controller_quorum_bootstrap_servers,
            vec!["127.0.0.1:9093", "[::1]:9094"]
        );
        let err = BrokerConfig::from_pairs(pairs("controller.quorum.bootstrap.servers", "h"))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("controller.quorum.bootstrap.servers"),
            "{err}"
        );
    }

    #[test]
    fn leader_rebalance_keys_have_kafka_defaults_and_are_parsed() {
        let pairs = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        let c = BrokerConfig::default();
        assert!(c.auto_leader_rebalance_enable);
        assert_eq!(c.leader_imbalance_check_interval_seconds, 300);
        assert_eq!(c.leader_imbalance_per_broker_percentage, 10);
        let c = BrokerConfig::from_pairs(pairs("auto.leader.rebalance.enable", "false")).unwrap();
        assert!(!c.auto_leader_rebalance_enable);
        let c = BrokerConfig::from_pairs(pairs("leader.imbalance.check.interval.seconds", "5"))
            .unwrap();
        assert_eq!(c.leader_imbalance_check_interval_seconds, 5);
        let c =
            BrokerConfig::from_pairs(pairs("leader.imbalance.per.broker.percentage", "0")).unwrap();
        assert_eq!(c.leader_imbalance_per_broker_percentage, 0);
        for (key, value) in [
            ("auto.leader.rebalance.enable", "yes"),
            ("leader.imbalance.check.interval.seconds", "0"),
            ("leader.imbalance.per.broker.percentage", "ten"),
        ] {
            let err = BrokerConfig::from_pairs(pairs(key, value)).unwrap_err();
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    #[test]
    fn broker_lifecycle_keys_have_kafka_defaults_and_are_parsed() {
        let pairs = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        let c = BrokerConfig::default();
        assert_eq!(c.broker_heartbeat_interval_ms, 2000);
        assert_eq!(c.broker_session_timeout_ms, 9000);
        assert_eq!(c.broker_rack, None);
        let c = BrokerConfig::from_pairs(pairs("broker.heartbeat.interval.ms", "200")).unwrap();
        assert_eq!(c.broker_heartbeat_interval_ms, 200);
        let c = BrokerConfig::from_pairs(pairs("broker.session.timeout.ms", "1500")).unwrap();
        assert_eq!(c.broker_session_timeout_ms, 1500);
        let c = BrokerConfig::from_pairs(pairs("broker.rack", "rack-a")).unwrap();
        assert_eq!(c.broker_rack.as_deref(), Some("rack-a"));
        for key in ["broker.heartbeat.interval.ms", "broker.session.timeout.ms"] {
            let err = BrokerConfig::from_pairs(pairs(key, "0")).unwrap_err();
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    /// Keys of Kafka's own configurations (its shipped
    /// `config/server.properties` and common security set-ups) that Weir
    /// does not act on are accepted, as Kafka accepts them; before, each
    /// stopped the start as an unknown key.
    #[test]
    fn kafka_keys_weir_does_not_act_on_are_accepted() {
        let dir = "/var/lib/kafka/data";
        let c = config_of(&[
            ("log.dirs", dir),
            ("metadata.log.dir", "/var/lib/kafka/data/"),
            ("share.coordinator.state.topic.replication.factor", "1"),
            ("share.coordinator.state.topic.min.isr", "1"),
            ("ssl.secure.random.implementation", "SHA1PRNG"),
            ("ssl.provider", ""),
            (
                "principal.builder.class",
                "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
            ),
            ("sasl.kerberos.service.name", "kafka"),
            ("sasl.kerberos.principal.to.local.rules", "DEFAULT"),
            ("sasl.login.refresh.window.factor", "0.8"),
            ("sasl.login.connect.timeout.ms", "10000"),
            ("early.start.listeners", "CONTROLLER"),
            ("controller.quorum.election.timeout.ms", "1500"),
            ("controller.quorum.fetch.timeout.ms", "3000"),
            ("ssl.enabled.protocols", "TLSv1.1,TLSv1.2,TLSv1.3"),
        ])
        .unwrap();
        assert_eq!(c.controller_quorum_election_timeout_ms, 1500);
        // The metadata log lives in the first log directory: another
        // directory, or another principal builder, would be ignored
        // silently, so they are refused with the reason.
        for (key, value) in [
            ("metadata.log.dir", "/var/lib/kafka/meta"),
            (
                "principal.builder.class",
                "com.example.CustomPrincipalBuilder",
            ),
        ] {
            let err = config_of(&[("log.dirs", dir), (key, value)]).unwrap_err();
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    #[test]
    fn unknown_key_is_named() {
        let err =
            BrokerConfig::from_pairs(vec![("log.segmnt.bytes".into(), "1".into())]).unwrap_err();
        assert!(err.to_string().contains("log.segmnt.bytes"), "{err}");
    }

    #[test]
    fn file_then_overrides() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.properties");
        std::fs::write(
            &path,
            "# comment\nnode.id=3\nlisteners=PLAINTEXT://127.0.0.1:0\nnum.partitions: 4\n",
        )
        .unwrap();
        let c = BrokerConfig::load(
            Some(&path),
            &["num.partitions=6".into(), "metrics.listener=".into()],
        )
        .unwrap();
        assert_eq!(c.node_id, 3);
        assert_eq!(c.listeners[0].port, 0);
        assert_eq!(c.num_partitions, 6);
        assert_eq!(c.metrics_listener, None);
        assert_eq!(c.explicit.get("node.id").map(String::as_str), Some("3"));
    }

    #[test]
    fn log_cleaner_keys_follow_kafkas_names_and_defaults() {
        let c = BrokerConfig::default();
        assert!(c.log_cleaner_enable);
        assert_eq!(c.log_cleaner_backoff_ms, 15_000);
        assert_eq!(c.log_cleaner_dedupe_buffer_size, 134_217_728);
        assert_eq!(c.log_cleaner_min_cleanable_ratio, 0.5);
        assert_eq!(c.log_cleaner_delete_retention_ms, 86_400_000);
        let c = BrokerConfig::from_pairs(
            [
                ("log.cleaner.enable", "false"),
                ("log.cleaner.backoff.ms", "50"),
                ("log.cleaner.dedupe.buffer.size", "4194304"),
                ("log.cleaner.threads", "2"),
                ("log.cleaner.min.cleanable.ratio", "0.01"),
                ("log.cleaner.min.compaction.lag.ms", "7"),
                ("log.cleaner.max.compaction.lag.ms", "8"),
                ("log.cleaner.delete.retention.ms", "9"),
                ("log.cleanup.policy", "compact,delete"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        )
        .unwrap();
        assert!(!c.log_cleaner_enable);
        assert_eq!(c.cleaner_config().dedupe_buffer_size, 4 << 20);
        let log = c.default_log_config();
        assert_eq!(
            (
                log.min_cleanable_dirty_ratio,
                log.min_compaction_lag_ms,
                log.max_compaction_lag_ms,
                log.delete_retention_ms
            ),
            (0.01, 7, 8, 9)
        );
        assert!(log.cleanup_policy.compact && log.cleanup_policy.delete);
        for (key, value) in [
            ("log.cleaner.min.cleanable.ratio", "2"),
            ("log.cleaner.backoff.ms", "-1"),
            ("log.cleanup.policy", "forever"),
            // Kafka's "at least 1MB per cleaner thread".
            ("log.cleaner.dedupe.buffer.size", "1048576"),
        ] {
            assert!(
                BrokerConfig::from_pairs(vec![(key.into(), value.into())]).is_err(),
                "{key}={value}"
            );
        }
    }

    #[test]
    fn retention_and_roll_keys_follow_kafkas_names_defaults_and_precedence() {
        let c = BrokerConfig::default();
        assert_eq!(c.log_retention_ms, 604_800_000);
        assert_eq!(c.log_retention_bytes, -1);
        assert_eq!(c.log_roll_ms, 604_800_000);
        assert_eq!(c.log_retention_check_interval_ms, 300_000);
        assert_eq!(c.producer_id_expiration_ms, 86_400_000);
        let pairs = |kv: &[(&str, &str)]| {
            BrokerConfig::from_pairs(
                kv.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
            .unwrap()
        };
        // ms beats minutes beats hours, whatever the order.
        let c = pairs(&[
            ("log.retention.ms", "1234"),
            ("log.retention.minutes", "2"),
            ("log.retention.hours", "1"),
            ("log.roll.ms", "5000"),
            ("log.roll.hours", "3"),
            ("log.retention.bytes", "4096"),
            ("log.retention.check.interval.ms", "250"),
            ("producer.id.expiration.ms", "777"),
        ]);
        assert_eq!(c.producer_id_expiration_ms, 777);
        assert_eq!(c.log_retention_ms, 1234);
        assert_eq!(c.log_roll_ms, 5000);
        let log = c.default_log_config();
        assert_eq!(
            (log.retention_ms, log.retention_bytes, log.segment_ms),
            (1234, 4096, 5000)
        );
        assert_eq!(c.log_retention_check_interval_ms, 250);
        let c = pairs(&[("log.retention.minutes", "2"), ("log.retention.hours", "1")]);
        assert_eq!(c.log_retention_ms, 120_000);
        let c = pairs(&[("log.roll.hours", "2"), ("log.retention.ms", "-1")]);
        assert_eq!((c.log_roll_ms, c.log_retention_ms), (7_200_000, -1));
        // -1 hours is unlimited, reported as Kafka does (-1 ms), and a
        // valid topic retention.ms default.
        let c = pairs(&[("log.retention.hours", "-1")]);
        assert_eq!(c.log_retention_ms, -1);
        assert!(crate::topic_config::validate(
            "retention.ms",
            &crate::topic_config::default_value(&c, "retention.ms")
        )
        .is_ok());
    }

    #[test]
    fn flush_keys_follow_kafkas_names_defaults_and_fallback() {
        let c = BrokerConfig::default();
        assert_eq!(c.log_flush_interval_messages, i64::MAX);
        assert_eq!(c.log_flush_interval_ms_or_default(), i64::MAX);
        assert_eq!(c.log_flush_offset_checkpoint_interval_ms, 60_000);
        assert!(!c.log_write_caching);
        let c = BrokerConfig::from_pairs(vec![
            ("log.flush.scheduler.interval.ms".into(), "2000".into()),
            ("log.flush.interval.messages".into(), "10".into()),
            ("log.write.caching".into(), "true".into()),
        ])
        .unwrap();
        // log.flush.interval.ms falls back to the scheduler interval.
        let log = c.default_log_config();
        assert_eq!((log.flush_messages, log.flush_ms), (10, 2000));
        assert!(c.log_write_caching);
        let c = BrokerConfig::from_pairs(vec![
            ("log.flush.scheduler.interval.ms".into(), "2000".into()),
            ("log.flush.interval.ms".into(), "500".into()),
        ])
        .unwrap();
        assert_eq!(c.default_log_config().flush_ms, 500);
    }

    /// One row per bounded key (broker keys of `broker_keys::BROKER_KEYS`
    /// and topic keys of `config_bounds::TOPIC_KEY_BOUNDS`): values Kafka 4.1 accepts, and
    /// values it refuses (too small, too large for the type, -2 where -1 is
    /// "unlimited"); each refusal names the key. Broker keys go through
    /// `BrokerConfig::from_pairs` (the start path), topic keys through
    /// `topic_config::validate` (CreateTopics and both AlterConfigs).
    #[test]
    fn every_bounded_key_accepts_and_refuses_as_kafka() {
        const INT_TOO_BIG: &str = "2147483648";
        const SHORT_TOO_BIG: &str = "32768";
        const LONG_TOO_BIG: &str = "9223372036854775808";
        let rows: &[(&str, &[&str], &[&str])] = &[
            ("node.id", &["0"], &["-1", INT_TOO_BIG]),
            ("broker.id", &["0"], &["-1"]),
            ("broker.heartbeat.interval.ms", &["1"], &["0", INT_TOO_BIG]),
            ("broker.session.timeout.ms", &["1"], &["0", INT_TOO_BIG]),
            ("message.max.bytes", &["0"], &["-1", INT_TOO_BIG]),
            ("num.io.threads", &["1"], &["0", INT_TOO_BIG]),
            (
                "default.replication.factor",
                &["1", "32767"],
                &["0", "-1", SHORT_TOO_BIG],
            ),
            (
                "leader.imbalance.check.interval.seconds",
                &["1"],
                &["0", LONG_TOO_BIG],
            ),
            (
                "leader.imbalance.per.broker.percentage",
                &["-1", "0"],
                &[INT_TOO_BIG],
            ),
            ("num.partitions", &["1"], &["0", INT_TOO_BIG]),
            (
                "log.segment.bytes",
                &["1048576", "2147483647"],
                &["14", "1048575", INT_TOO_BIG],
            ),
            ("log.roll.ms", &["1"], &["0", LONG_TOO_BIG]),
            ("log.roll.hours", &["1"], &["0", INT_TOO_BIG]),
            ("log.retention.ms", &["-1", "1"], &["0", "-2", LONG_TOO_BIG]),
            (
                "log.retention.minutes",
                &["-1", "1"],
                &["0", "-2", INT_TOO_BIG],
            ),
            (
                "log.retention.hours",
                &["-1", "1"],
                &["0", "-2", INT_TOO_BIG],
            ),
            ("log.retention.bytes", &["-1", "0"], &[LONG_TOO_BIG]),
            ("log.retention.check.interval.ms", &["1"], &["0"]),
            ("log.message.timestamp.before.max.ms", &["0"], &["-1"]),
            (
                "queued.max.request.bytes",
                &["-1", "0", "1"],
                &[LONG_TOO_BIG],
            ),
            (
                "queued.max.response.bytes",
                &["-1", "0", "1"],
                &[LONG_TOO_BIG],
            ),
            ("queued.max.response.bytes.per.connection", &["1"], &["0"]),
            ("fetch.max.bytes", &["1024"], &["1023", "0", INT_TOO_BIG]),
            (
                "max.incremental.fetch.session.cache.slots",
                &["0", "1000"],
                &["-1", INT_TOO_BIG],
            ),
            (
                "max.request.partition.size.limit",
                &["1"],
                &["0", INT_TOO_BIG],
            ),
            ("max.connections", &["0"], &["-1", INT_TOO_BIG]),
            // 0 alone is refused across keys (without overrides), as Kafka.
            (
                "max.connections.per.ip",
                &["1", "2147483647"],
                &["-1", INT_TOO_BIG],
            ),
            ("log.message.timestamp.after.max.ms", &["0"], &["-1"]),
            ("log.index.size.max.bytes", &["4"], &["3", INT_TOO_BIG]),
            ("log.index.interval.bytes", &["0"], &["-1", INT_TOO_BIG]),
            ("log.flush.interval.messages", &["1"], &["0"]),
            ("log.flush.interval.ms", &["0"], &["-1"]),
            ("log.flush.scheduler.interval.ms", &["1"], &["0"]),
            ("log.flush.pace.ms", &["0", "1000"], &["-1", "1001"]),
            (
                "log.flush.offset.checkpoint.interval.ms",
                &["0"],
                &["-1", INT_TOO_BIG],
            ),
            ("num.recovery.threads.per.data.dir", &["1"], &["0"]),
            ("min.insync.replicas", &["1"], &["0", INT_TOO_BIG]),
            ("num.replica.fetchers", &["1"], &["0", INT_TOO_BIG]),
            ("replica.fetch.max.bytes", &["0"], &["-1", INT_TOO_BIG]),
            ("replica.fetch.response.max.bytes", &["0"], &["-1"]),
            ("replica.fetch.wait.max.ms", &["0"], &["-1"]),
            ("replica.fetch.min.bytes", &["1"], &["0"]),
            ("replica.fetch.backoff.ms", &["0"], &["-1"]),
            // 500: at least replica.fetch.wait.max.ms (cross-key, from_pairs).
            ("replica.lag.time.max.ms", &["500"], &["0", LONG_TOO_BIG]),
            (
                "replica.high.watermark.checkpoint.interval.ms",
                &["1"],
                &["0"],
            ),
            ("log.cleaner.threads", &["0", "1"], &["-1"]),
            (
                "log.cleaner.dedupe.buffer.size",
                &["2097152"],
                &["1048576", "-1"],
            ),
            ("log.cleaner.backoff.ms", &["0"], &["-1"]),
            (
                "log.cleaner.min.cleanable.ratio",
                &["0", "1"],
                &["-0.1", "1.5", "NaN"],
            ),
            ("log.cleaner.delete.retention.ms", &["0"], &["-1"]),
            ("log.cleaner.min.compaction.lag.ms", &["0"], &["-1"]),
            ("log.cleaner.max.compaction.lag.ms", &["1"], &["0"]),
            ("producer.id.expiration.ms", &["1"], &["0", INT_TOO_BIG]),
            (
                "transaction.state.log.replication.factor",
                &["1"],
                &["0", SHORT_TOO_BIG],
            ),
            ("transaction.state.log.min.isr", &["1"], &["0"]),
            (
                "share.coordinator.state.topic.replication.factor",
                &["1"],
                &["0", SHORT_TOO_BIG],
            ),
            ("share.coordinator.state.topic.min.isr", &["1"], &["0"]),
            (
                "controller.quorum.election.timeout.ms",
                &["10", "1000"],
                &["9", INT_TOO_BIG],
            ),
            (
                "controller.quorum.fetch.timeout.ms",
                &["2000"],
                &[INT_TOO_BIG],
            ),
            (
                "sasl.kerberos.min.time.before.relogin",
                &["60000"],
                &[LONG_TOO_BIG],
            ),
            ("sasl.kerberos.ticket.renew.jitter", &["0.05"], &["x"]),
            ("sasl.kerberos.ticket.renew.window.factor", &["0.8"], &["x"]),
            ("sasl.login.refresh.window.factor", &["0.8"], &["x"]),
            ("sasl.login.refresh.window.jitter", &["0.05"], &["x"]),
            (
                "sasl.login.refresh.min.period.seconds",
                &["60"],
                &[SHORT_TOO_BIG],
            ),
            (
                "sasl.login.refresh.buffer.seconds",
                &["300"],
                &[SHORT_TOO_BIG],
            ),
            ("sasl.login.connect.timeout.ms", &["10000"], &[INT_TOO_BIG]),
            ("sasl.login.read.timeout.ms", &["10000"], &[INT_TOO_BIG]),
            ("sasl.login.retry.backoff.ms", &["100"], &[LONG_TOO_BIG]),
            (
                "sasl.login.retry.backoff.max.ms",
                &["10000"],
                &[LONG_TOO_BIG],
            ),
            ("socket.request.max.bytes", &["1"], &["0", INT_TOO_BIG]),
            ("socket.send.buffer.bytes", &["-1"], &[INT_TOO_BIG]),
            ("socket.receive.buffer.bytes", &["-1"], &[INT_TOO_BIG]),
            ("num.network.threads", &["1"], &["0"]),
            ("connections.max.idle.ms", &["0", "-1"], &["-2"]),
            ("connections.max.reauth.ms", &["0", "-1"], &[LONG_TOO_BIG]),
            (
                "connection.failed.authentication.delay.ms",
                &["0"],
                &["-1", INT_TOO_BIG],
            ),
            ("sasl.server.max.receive.size", &["1"], &["0", INT_TOO_BIG]),
            ("offsets.topic.num.partitions", &["1"], &["0"]),
            (
                "offsets.topic.replication.factor",
                &["1"],
                &["0", SHORT_TOO_BIG],
            ),
            (
                "offsets.topic.segment.bytes",
                &["1048576"],
                &["1048575", INT_TOO_BIG],
            ),
            ("offsets.retention.minutes", &["1"], &["0"]),
            ("offsets.retention.check.interval.ms", &["1"], &["0"]),
            (
                "group.initial.rebalance.delay.ms",
                &["0"],
                &["-1", INT_TOO_BIG],
            ),
            ("group.min.session.timeout.ms", &["0"], &["-1"]),
            ("group.max.session.timeout.ms", &["0"], &["-1"]),
            ("offset.metadata.max.bytes", &["0"], &["-1"]),
            ("group.max.size", &["1"], &["0", "-1"]),
            // Topic keys.
            (
                "segment.bytes",
                &["1048576", "2147483647"],
                &["102400", "1048575", INT_TOO_BIG],
            ),
            ("segment.ms", &["1"], &["0"]),
            ("message.timestamp.before.max.ms", &["0"], &["-1"]),
            ("message.timestamp.after.max.ms", &["0"], &["-1"]),
            ("segment.index.bytes", &["4"], &["3", INT_TOO_BIG]),
            ("flush.messages", &["1"], &["0"]),
            ("flush.ms", &["0"], &["-1"]),
            ("retention.bytes", &["-1"], &[LONG_TOO_BIG]),
            ("retention.ms", &["-1", "0"], &["-2", LONG_TOO_BIG]),
            ("max.message.bytes", &["0"], &["-1", INT_TOO_BIG]),
            ("index.interval.bytes", &["0"], &["-1"]),
            ("delete.retention.ms", &["0"], &["-1"]),
            ("min.compaction.lag.ms", &["0"], &["-1"]),
            ("max.compaction.lag.ms", &["1"], &["0"]),
            ("file.delete.delay.ms", &["0"], &["-1"]),
            ("min.cleanable.dirty.ratio", &["0", "1"], &["-0.1", "1.01"]),
            ("quota.window.num", &["1", "11"], &["0", INT_TOO_BIG]),
            ("quota.window.size.seconds", &["1"], &["0", INT_TOO_BIG]),
            (
                "controller.quota.window.num",
                &["1", "11"],
                &["0", INT_TOO_BIG],
            ),
            (
                "controller.quota.window.size.seconds",
                &["1"],
                &["0", INT_TOO_BIG],
            ),
            (
                "internal.segment.bytes",
                &["14", "4096"],
                &["13", INT_TOO_BIG],
            ),
        ];
        let bounded = crate::broker_keys::BROKER_KEYS
            .iter()
            .filter_map(|k| k.bounds())
            .chain(crate::config_bounds::TOPIC_KEY_BOUNDS.iter().copied());
        for def in bounded {
            assert!(
                rows.iter().any(|(key, ..)| *key == def.name),
                "{} has a bound but no row here",
                def.name
            );
        }
        for (key, accepted, refused) in rows {
            let is_topic_key = crate::topic_config::topic_config_def(key).is_some();
            let is_broker_key = !is_topic_key || *key == "min.insync.replicas";
            for value in *accepted {
                if is_topic_key {
                    let checked = crate::topic_config::validate(key, value);
                    assert!(checked.is_ok(), "topic {key}={value}: {checked:?}");
                }
                if is_broker_key {
                    let parsed =
                        BrokerConfig::from_pairs(vec![(key.to_string(), value.to_string())]);
                    assert!(parsed.is_ok(), "broker {key}={value}: {parsed:?}");
                }
            }
            for value in *refused {
                let message = if is_topic_key {
                    crate::topic_config::validate(key, value)
                        .expect_err(&format!("topic {key}={value} was accepted"))
                        .to_string()
                } else {
                    BrokerConfig::from_pairs(vec![(key.to_string(), value.to_string())])
                        .expect_err(&format!("broker {key}={value} was accepted"))
                        .to_string()
                };
                assert!(
                    message.starts_with("Invalid value ")
                        && message.contains(&format!(" for configuration {key}: ")),
                    "{key}={value}: {message}"
                );
            }
        }
    }

    /// Kafka's `KafkaConfig.validateValues`: `replica.fetch.wait.max.ms`
    /// may equal `replica.lag.time.max.ms` but not exceed it, whatever the
    /// order the keys are given in; the refusal names the wait key in
    /// Kafka's words.
    #[test]
    fn replica_fetch_wait_must_not_exceed_the_lag_limit() {
        let pairs = |kv: &[(&str, &str)]| {
            BrokerConfig::from_pairs(
                kv.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        let c = pairs(&[
            ("replica.fetch.wait.max.ms", "1000"),
            ("replica.lag.time.max.ms", "1000"),
        ])
        .unwrap();
        assert_eq!(c.replication.replica_fetch_wait_max_ms, 1000);
        for kv in [
            &[("replica.fetch.wait.max.ms", "30001")][..],
            &[
                ("replica.lag.time.max.ms", "400"),
                ("replica.fetch.wait.max.ms", "401"),
            ],
            &[("replica.lag.time.max.ms", "499")],
        ] {
            let err = pairs(kv).unwrap_err().to_string();
            assert!(
                err.starts_with("Invalid value ")
                    && err.ends_with(
                        " for configuration replica.fetch.wait.max.ms: replica.fetch.wait.max.ms \
                         should always be less than or equal to replica.lag.time.max.ms to \
                         prevent frequent changes in ISR"
                    ),
                "{kv:?}: {err}"
            );
        }
    }

    #[test]
    fn invalid_values_are_rejected() {
        for (k, v) in [
            ("num.partitions", "0"),
            ("auto.create.topics.enable", "yes"),
            ("listeners", "127.0.0.1:9092"),
            ("log.message.timestamp.type", "Now"),
            ("log.roll.ms", "0"),
            ("log.retention.check.interval.ms", "0"),
            ("log.flush.interval.messages", "0"),
            ("log.flush.interval.ms", "-1"),
            ("log.flush.scheduler.interval.ms", "0"),
            ("log.write.caching", "maybe"),
        ] {
            let err = BrokerConfig::from_pairs(vec![(k.into(), v.into())]).unwrap_err();
            assert!(err.to_string().contains(k), "{err}");
        }
    }
    #[test]
    fn group_coordinator_keys_follow_kafkas_names_and_defaults() {
        let defaults = BrokerConfig::default().group_coordinator;
        assert_eq!(defaults.initial_rebalance_delay_ms, 3_000);
        assert_eq!(defaults.min_session_timeout_ms, 6_000);
        assert_eq!(defaults.max_session_timeout_ms, 1_800_000);
        assert_eq!(defaults.max_size, i32::MAX as usize);
        assert_eq!(defaults.offset_metadata_max_bytes, 4_096);
        assert_eq!(defaults.offsets_retention_ms, 10_080 * 60_000);
        assert_eq!(defaults.offsets_retention_check_interval_ms, 600_000);
        let c = BrokerConfig::from_pairs(
            [
                ("group.initial.rebalance.delay.ms", "0"),
                ("group.min.session.timeout.ms", "100"),
                ("group.max.session.timeout.ms", "200"),
                ("group.max.size", "3"),
                ("offset.metadata.max.bytes", "10"),
                ("offsets.retention.minutes", "2"),
                ("offsets.retention.check.interval.ms", "500"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        )
        .unwrap()
        .group_coordinator;
        assert_eq!(
            c,
            crate::group::GroupCoordinatorConfig {
                initial_rebalance_delay_ms: 0,
                min_session_timeout_ms: 100,
                max_session_timeout_ms: 200,
                max_size: 3,
                offset_metadata_max_bytes: 10,
                offsets_retention_ms: 120_000,
                offsets_retention_check_interval_ms: 500,
            }
        );
        assert!(BrokerConfig::from_pairs(vec![("group.max.size".into(), "0".into())]).is_err());
    }

    fn config_of(pairs: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
        BrokerConfig::from_pairs(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// Kafka's effective map: the default maps each protocol's name to
    /// itself and, while the map is not set, a controller listener to
    /// PLAINTEXT; a listener the map does not name is refused.
    #[test]
    fn listener_security_protocols_follow_kafkas_effective_map() {
        let c = BrokerConfig::default();
        assert_eq!(c.security_protocol("SSL"), Some(SecurityProtocol::Ssl));
        assert_eq!(
            c.security_protocol("sasl_ssl"),
            Some(SecurityProtocol::SaslSsl)
        );
        assert_eq!(
            c.security_protocol("CONTROLLER"),
            Some(SecurityProtocol::Plaintext)
        );
        assert_eq!(c.security_protocol("INTERNAL"), None);
        let err = config_of(&[("listeners", "INTERNAL://127.0.0.1:0")]).unwrap_err();
        assert!(
            err.to_string()
                .contains("No security protocol defined for listener INTERNAL"),
            "{err}"
        );
        let c = config_of(&[
            (
                "listeners",
                "INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            ),
            (
                "listener.security.protocol.map",
                "internal:ssl,CONTROLLER:PLAINTEXT",
            ),
        ])
        .unwrap();
        assert_eq!(c.security_protocol("INTERNAL"), Some(SecurityProtocol::Ssl));
        assert_eq!(
            c.security_protocol("SSL"),
            None,
            "a set map replaces the default"
        );
        for bad in ["INTERNAL", "INTERNAL:TLS", "A:SSL,A:PLAINTEXT"] {
            let err = config_of(&[("listener.security.protocol.map", bad)]).unwrap_err();
            assert!(
                err.to_string().contains("listener.security.protocol.map"),
                "{err}"
            );
        }
    }

    /// `listener.name.<listener>.<key>` is validated as `<key>` and wins
    /// over it for that listener only.
    #[test]
    fn listener_prefixed_keys_override_for_their_listener() {
        let c = config_of(&[
            ("ssl.client.auth", "requested"),
            ("listener.name.ssl.ssl.client.auth", "required"),
        ])
        .unwrap();
        assert_eq!(c.listener_value("SSL", "ssl.client.auth"), Some("required"));
        assert_eq!(
            c.listener_value("OTHER", "ssl.client.auth"),
            Some("requested")
        );
        assert_eq!(c.listener_value("OTHER", "ssl.keystore.location"), None);
        let err = config_of(&[("listener.name.ssl.ssl.client.auth", "maybe")]).unwrap_err();
        assert!(err.to_string().contains("ssl.client.auth"), "{err}");
        for unknown in [
            "listener.name.ssl.ssl.bogus",
            "listener.name.ssl.num.partitions",
            "listener.name.ssl",
        ] {
            let err = config_of(&[(unknown, "1")]).unwrap_err();
            assert!(
                matches!(err, ConfigError::UnknownKey { .. }),
                "{unknown}: {err}"
            );
        }
    }
}
