//! The broker's configuration keys (`server.properties`): one declarative
//! row per key ([`BrokerKey`]) that feeds parsing
//! ([`crate::config::BrokerConfig::from_pairs`]), numeric bounds, defaults,
//! DescribeConfigs (name, value, type, documentation, KIP-226 source:
//! explicit or default) and the README's configuration table (a test holds
//! the README to [`readme_table`]).
//!
//! Names, types, defaults and validators follow the `define(...)` of each
//! key in Kafka 4.1's `ConfigDef`s (`KRaftConfigs`, `ServerConfigs`,
//! `ServerLogConfigs`, `ReplicationConfigs`, `SocketServerConfigs`,
//! `CleanerConfig`, `GroupCoordinatorConfig`, `TransactionLogConfig`); a row
//! says where Weir differs. Cross-key rules (Kafka's
//! `KafkaConfig.validateValues`) and the precedence of
//! `log.retention.{ms,minutes,hours}` and `log.roll.{ms,hours}` live in
//! `BrokerConfig::from_pairs`.
//!
//! This module owns the table only; it depends on `config` for the
//! `BrokerConfig` it fills and on `config_bounds` for the bounds.

use std::path::PathBuf;

use crate::config::{
    cleanup_policy_name, listeners_text, parse_bool, parse_cleanup_policy, parse_ip_counts,
    parse_number, parse_timestamp_type, timestamp_type_name, unlimited_or, BrokerConfig,
    ConfigError, Listener, SecurityProtocol,
};
use crate::config_bounds::{Bound, ConfigKeyDef, NumType, MIN_SEGMENT_BYTES};
use crate::topic_config::ConfigType;

/// Applies a value to the configuration: `(config, key as written, value
/// as written)`.
///
/// # Errors
/// [`ConfigError::InvalidValue`] naming the key when the value does not
/// parse (the row's bound is checked before this is called).
pub type SetFn = fn(&mut BrokerConfig, &str, &str) -> Result<(), ConfigError>;

/// The key's effective value as DescribeConfigs reports it, or `None` when
/// the configuration holds no value of its own for the key (a key that is
/// only accepted, or a derived form such as `log.retention.hours`): then
/// the explicit value as written is reported, else the default.
pub type GetFn = fn(&BrokerConfig) -> Option<String>;

/// One broker configuration key.
#[derive(Clone, Copy)]
pub struct BrokerKey {
    /// The key, e.g. `log.segment.bytes`.
    pub name: &'static str,
    /// Kafka's `ConfigDef.Type` of the key, reported by DescribeConfigs v3+
    /// (KIP-569).
    pub config_type: ConfigType,
    /// The default in the text form Kafka documents, or `None` where
    /// Kafka's default is null (DescribeConfigs then reports a null value
    /// unless the key is set, as Kafka's `ConfigHelper`).
    pub default: Option<&'static str>,
    /// The numeric type and validator, checked before [`BrokerKey::set`].
    pub bound: Option<(NumType, Bound)>,
    /// One line on what the key does: the README's "meaning" column and
    /// DescribeConfigs' documentation (KIP-569).
    pub doc: &'static str,
    /// Applies a value.
    pub set: SetFn,
    /// Reads the effective value back.
    pub get: GetFn,
}

impl std::fmt::Debug for BrokerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerKey")
            .field("name", &self.name)
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}

impl BrokerKey {
    /// The key's bound as a [`ConfigKeyDef`], for numeric keys.
    pub fn bounds(&self) -> Option<ConfigKeyDef> {
        self.bound.map(|(num_type, bound)| ConfigKeyDef {
            name: self.name,
            num_type,
            bound,
        })
    }

    /// Checks `value` against the bound, then applies it.
    ///
    /// # Errors
    /// [`ConfigError::InvalidValue`] in the words of Kafka's
    /// `ConfigException`, naming the key.
    pub fn apply(&self, config: &mut BrokerConfig, value: &str) -> Result<(), ConfigError> {
        if let Some(def) = self.bounds() {
            def.check(value)?;
        }
        (self.set)(config, self.name, value)
    }

    /// The value DescribeConfigs reports: `None` (null) for a key with a
    /// null default that is not set, else the effective value (the value
    /// as written, or the default, for keys without one of their own).
    pub fn value(&self, config: &BrokerConfig) -> Option<String> {
        if self.default.is_none() && !config.explicit.contains_key(self.name) {
            return None;
        }
        (self.get)(config)
            .or_else(|| written(config, self.name))
            .or_else(|| self.default.map(str::to_string))
    }
}

/// The row of `name`, if it is a broker key.
pub fn broker_key(name: &str) -> Option<&'static BrokerKey> {
    BROKER_KEYS.iter().find(|k| k.name == name)
}

/// The value of `name` as set, trimmed as Kafka's `ConfigDef.parseType`
/// trims it.
fn written(config: &BrokerConfig, name: &str) -> Option<String> {
    config.explicit.get(name).map(|v| v.trim().to_string())
}

/// DescribeConfigs' type of a numeric key.
const fn numeric_type(num_type: NumType) -> ConfigType {
    match num_type {
        NumType::Short => ConfigType::Short,
        NumType::Int => ConfigType::Int,
        NumType::Long => ConfigType::Long,
        NumType::Double => ConfigType::Double,
    }
}

/// The README's table of broker keys (header included), one row per key
/// in [`BROKER_KEYS`] order: the key, its default (`none` for a null
/// default, `empty` for an empty one) and its doc.
pub fn readme_table() -> String {
    let mut out = String::from("| key | default | meaning |\n|---|---|---|\n");
    for k in BROKER_KEYS {
        let default = match k.default {
            None => "none".to_string(),
            Some("") => "empty".to_string(),
            Some(d) => format!("`{d}`"),
        };
        out.push_str(&format!("| `{}` | {default} | {} |\n", k.name, k.doc));
    }
    out
}

/// `Some(literal)`, or `None` for Kafka's null default.
macro_rules! default {
    (null) => {
        None
    };
    ($d:literal) => {
        Some($d)
    };
}

/// A row: the name, DescribeConfigs' type, the default (`null` or a
/// literal), the bound, the doc, `set` and `get`.
macro_rules! row {
    ($name:literal, $config_type:expr, $default:tt, $bound:expr, $doc:literal, $set:expr, $get:expr) => {
        BrokerKey {
            name: $name,
            config_type: $config_type,
            default: default!($default),
            bound: $bound,
            doc: $doc,
            set: $set,
            get: $get,
        }
    };
}

/// A numeric key held in one field (`FromStr` / `Display`).
macro_rules! num {
    ($name:literal, $ty:ident $bound:expr, $default:tt, $($field:ident).+, $doc:literal) => {
        row!($name, numeric_type(NumType::$ty), $default, Some((NumType::$ty, $bound)), $doc,
            |c, key, value| {
                c.$($field).+ = parse_number(key, value)?;
                Ok(())
            },
            |c| Some(c.$($field).+.to_string()))
    };
}

/// A numeric key Weir accepts and reports but does not act on yet.
macro_rules! accepted {
    ($name:literal, $ty:ident $bound:expr, $default:tt, $doc:literal) => {
        custom!($name, $ty $bound, $default, $doc, set: |_, _, _| Ok(()), get: |_| None)
    };
}

/// A `BOOLEAN` key held in one field.
macro_rules! flag {
    ($name:literal, $default:tt, $($field:ident).+, $doc:literal) => {
        custom!($name, Boolean, $default, $doc,
            set: |c, key, value| {
                c.$($field).+ = parse_bool(key, value)?;
                Ok(())
            },
            get: |c| Some(c.$($field).+.to_string()))
    };
}

/// A key with its own parsing (`set`) and printing (`get`); numeric when a
/// bound follows the type.
macro_rules! custom {
    ($name:literal, $ty:ident, $default:tt, $doc:literal, set: $set:expr, get: $get:expr) => {
        row!($name, ConfigType::$ty, $default, None, $doc, $set, $get)
    };
    ($name:literal, $ty:ident $bound:expr, $default:tt, $doc:literal, set: $set:expr, get: $get:expr) => {
        row!(
            $name,
            numeric_type(NumType::$ty),
            $default,
            Some((NumType::$ty, $bound)),
            $doc,
            $set,
            $get
        )
    };
}

/// A comma-separated list, items trimmed, empty items dropped.
fn list(value: &str) -> impl Iterator<Item = String> + '_ {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn invalid(key: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn set_quorum_voters(c: &mut BrokerConfig, key: &str, value: &str) -> Result<(), ConfigError> {
    weir_controller::QuorumVoter::parse_list(value)
        .map_err(|e| invalid(key, value, e.to_string()))?;
    c.controller_quorum_voters = value.to_string();
    Ok(())
}

fn set_bootstrap_servers(c: &mut BrokerConfig, key: &str, value: &str) -> Result<(), ConfigError> {
    let mut servers = Vec::new();
    for entry in list(value) {
        let valid = entry.rsplit_once(':').is_some_and(|(host, port)| {
            !host.trim_matches(['[', ']']).is_empty() && port.parse::<u16>().is_ok()
        });
        if !valid {
            return Err(invalid(key, value, format!("'{entry}' is not host:port")));
        }
        servers.push(entry);
    }
    c.controller_quorum_bootstrap_servers = servers;
    Ok(())
}

fn set_log_dirs(c: &mut BrokerConfig, key: &str, value: &str) -> Result<(), ConfigError> {
    c.log_dirs = list(value).map(PathBuf::from).collect();
    if c.log_dirs.is_empty() {
        return Err(invalid(key, value, "no directory given"));
    }
    Ok(())
}

fn get_log_dirs(c: &BrokerConfig) -> Option<String> {
    let dirs: Vec<String> = c.log_dirs.iter().map(|d| d.display().to_string()).collect();
    Some(dirs.join(","))
}

fn set_metrics_listener(c: &mut BrokerConfig, key: &str, value: &str) -> Result<(), ConfigError> {
    c.metrics_listener = match value.trim() {
        "" => None,
        address => Some(
            address
                .parse()
                .map_err(|_| invalid(key, value, "expected host:port"))?,
        ),
    };
    Ok(())
}

/// True for a key a listener may override with
/// `listener.name.<listener>.<key>` (Kafka's listener-prefixed configs):
/// the `ssl.*` keys, `sasl.enabled.mechanisms` and
/// `connections.max.reauth.ms` (the per-mechanism forms,
/// `listener.name.<listener>.<mechanism>.sasl.jaas.config` and
/// `...<mechanism>.connections.max.reauth.ms`, are read by
/// `BrokerConfig::set` itself).
pub fn is_listener_key(name: &str) -> bool {
    name.starts_with("ssl.")
        || name == "sasl.enabled.mechanisms"
        || name == "connections.max.reauth.ms"
}

/// A key whose value is kept as written (read through
/// `BrokerConfig::listener_value`) once `check` accepts it.
fn one_of(key: &str, value: &str, allowed: &[&str]) -> Result<(), ConfigError> {
    if allowed.iter().any(|a| a.eq_ignore_ascii_case(value.trim())) {
        Ok(())
    } else {
        Err(invalid(
            key,
            value,
            format!("expected one of {}", allowed.join(", ")),
        ))
    }
}

/// `ssl.keystore.type` / `ssl.truststore.type`: Kafka's store types.
/// Weir reads PEM only; a JKS or PKCS12 store is refused when a TLS
/// listener is built, naming the key.
fn check_store_type(_: &mut BrokerConfig, key: &str, value: &str) -> Result<(), ConfigError> {
    one_of(key, value, &["JKS", "PKCS12", "PEM"])
}

/// `ssl.enabled.protocols`: rustls speaks TLSv1.2 and TLSv1.3 only.
fn check_tls_versions(_: &mut BrokerConfig, key: &str, value: &str) -> Result<(), ConfigError> {
    for version in list(value) {
        // TLSv1 and TLSv1.1 are Kafka's (the JDK's) names; a listener
        // skips them (`network::tls`).
        one_of(key, &version, &["TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"])?;
    }
    Ok(())
}

fn set_node_id(c: &mut BrokerConfig, key: &str, value: &str) -> Result<(), ConfigError> {
    c.node_id = parse_number(key, value)?;
    Ok(())
}

/// Every broker key Weir accepts, in the README's order. A new key is one
/// row here (and its `BrokerConfig` field); the README row follows from
/// [`readme_table`].
pub static BROKER_KEYS: &[BrokerKey] = {
    use Bound::{Any, AtLeast, Between, UnlimitedOrAtLeast};
    &[
        // ---- The node and the metadata quorum (KRaftConfigs, ServerConfigs).
        custom!("node.id", Int AtLeast(0), "1", "this node's id",
            set: set_node_id, get: |c| Some(c.node_id.to_string())),
        // Kafka: no validator, but it must equal node.id, which is atLeast(0).
        custom!("broker.id", Int AtLeast(0), null,
            "Kafka's older name of `node.id`; setting it sets `node.id`",
            set: set_node_id, get: |c| Some(c.node_id.to_string())),
        custom!("process.roles", List, "broker,controller",
            "single node runs both; `broker` alone is a broker-only node that follows the metadata quorum of other nodes without voting (see Local cluster)",
            set: |c, _, value| {
                c.process_roles = value.to_string();
                Ok(())
            },
            get: |c| Some(c.process_roles.clone())),
        custom!("controller.quorum.voters", List, "",
            "`id@host:port,...` of the voters' CONTROLLER listeners (KIP-595); empty: one voter, this node",
            set: set_quorum_voters, get: |c| Some(c.controller_quorum_voters.clone())),
        custom!("controller.quorum.bootstrap.servers", List, "",
            "`host:port,...` of controllers a broker-only node asks when `controller.quorum.voters` is not set (KIP-853)",
            set: set_bootstrap_servers,
            get: |c| Some(c.controller_quorum_bootstrap_servers.join(","))),
        // Kafka's default is null (KRaft nodes must set it); Weir's single
        // node names its quorum listener CONTROLLER.
        custom!("controller.listener.names", List, "CONTROLLER",
            "listeners that carry the metadata quorum between voters, never advertised; a broker-only node must not have one in `listeners`",
            set: |c, _, value| {
                c.controller_listener_names = list(value).collect();
                Ok(())
            },
            get: |c| Some(c.controller_listener_names.join(","))),
        custom!("listeners", String, "PLAINTEXT://127.0.0.1:9092",
            "`NAME://host:port,...`; port 0 binds an ephemeral port, which is then advertised",
            set: |c, key, value| {
                c.listeners = Listener::parse_list(key, value)?;
                Ok(())
            },
            get: |c| Some(listeners_text(&c.listeners))),
        custom!("advertised.listeners", String, null,
            "addresses given to clients; unset, the listeners (with their bound ports)",
            set: |c, key, value| {
                c.advertised_listeners = Some(Listener::parse_list(key, value)?);
                Ok(())
            },
            get: |c| c.advertised_listeners.as_deref().map(listeners_text)),
        custom!("log.dirs", String, "./data",
            "partition logs, checkpoints, `meta.properties` and the metadata log (`__cluster_metadata-0`); only the first directory is used",
            set: set_log_dirs, get: get_log_dirs),
        custom!("log.dir", String, null,
            "Kafka's single-directory form of `log.dirs`; setting it sets `log.dirs`",
            set: set_log_dirs, get: get_log_dirs),
        num!("num.partitions", Int AtLeast(1), "1", num_partitions,
            "partitions of auto-created topics and of CreateTopics with -1"),
        // Kafka 4.1 defines no validator (a 0 makes every auto-created topic
        // fail with INVALID_REPLICATION_FACTOR); Weir refuses it at start
        // (issue 15) and holds it to a SHORT, the type of a replication factor.
        BrokerKey {
            config_type: ConfigType::Int,
            ..num!("default.replication.factor", Short AtLeast(1), "1",
                default_replication_factor,
                "replication factor of auto-created topics and of CreateTopics with -1")
        },
        num!("min.insync.replicas", Int AtLeast(1), "1", min_insync_replicas,
            "in-sync replicas an acks=all write needs; topic key `min.insync.replicas`"),
        // Kafka defines no validator for these two; 0 would heartbeat without
        // pause or fence every broker at once, so Weir wants 1 ms.
        num!("broker.heartbeat.interval.ms", Int AtLeast(1), "2000",
            broker_heartbeat_interval_ms,
            "with several voters, how often the broker heartbeats to the active controller (ms)"),
        num!("broker.session.timeout.ms", Int AtLeast(1), "9000", broker_session_timeout_ms,
            "the active controller fences a broker whose last heartbeat is older (ms); its partitions elect a live ISR member or go offline (leader -1)"),
        // Kafka has no validator; the leader's heartbeat must come more
        // often than the shortest timeout, so Weir wants 10 ms.
        num!("controller.quorum.election.timeout.ms", Int AtLeast(10), "1000",
            controller_quorum_election_timeout_ms,
            "a voter that hears from no leader for a random time between this and twice this (ms) stands for election; the leader heartbeats every half of it, at most every 500 ms"),
        accepted!("controller.quorum.fetch.timeout.ms", Int Any, "2000",
            "accepted and reported; a voter follows the leader's heartbeats, timed by `controller.quorum.election.timeout.ms`"),
        custom!("early.start.listeners", List, null,
            "accepted for Kafka's configurations; Weir starts its listeners in one order whatever the authorizer",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("metadata.log.dir", String, null,
            "where the metadata log lives; Weir keeps it in the first `log.dirs` directory and accepts only that directory here",
            set: |_, _, _| Ok(()), get: |_| None),
        flag!("auto.leader.rebalance.enable", "true", auto_leader_rebalance_enable,
            "the active controller periodically makes each partition's first replica its leader again when it is live and in the ISR (ElectLeaders does it on request)"),
        num!("leader.imbalance.check.interval.seconds", Long AtLeast(1), "300",
            leader_imbalance_check_interval_seconds, "how often it checks (s)"),
        // Removed from Kafka 4; accepted and unused.
        num!("leader.imbalance.per.broker.percentage", Int Any, "10",
            leader_imbalance_per_broker_percentage,
            "accepted and unused, as in Kafka's KRaft controller: every imbalanced partition is rebalanced"),
        custom!("broker.rack", String, null,
            "sent at registration; shown in Metadata; placement is rack-aware when every live broker has one",
            set: |c, _, value| {
                let rack = value.trim();
                c.broker_rack = (!rack.is_empty()).then(|| rack.to_string());
                Ok(())
            },
            get: |c| c.broker_rack.clone()),
        flag!("auto.create.topics.enable", "true", auto_create_topics_enable,
            "Metadata requests create missing topics when the client allows it"),
        // ---- Logs (ServerLogConfigs, LogConfig.SERVER_CONFIG_DEF).
        num!("log.segment.bytes", Int AtLeast(MIN_SEGMENT_BYTES), "1073741824",
            log_segment_bytes, "segment size before a roll; at least `1048576` (KIP-1030)"),
        num!("log.index.size.max.bytes", Int AtLeast(4), "10485760", log_index_size_max_bytes,
            "largest offset index of a segment (bytes); topic key `segment.index.bytes`"),
        num!("log.index.interval.bytes", Int AtLeast(0), "4096", log_index_interval_bytes,
            "bytes between offset index entries"),
        num!("message.max.bytes", Int AtLeast(0), "1048588", message_max_bytes,
            "largest record batch accepted (bytes); topic key `max.message.bytes`"),
        custom!("log.message.timestamp.type", String, "CreateTime", "or `LogAppendTime`",
            set: |c, key, value| {
                c.log_message_timestamp_type = parse_timestamp_type(key, value)?;
                Ok(())
            },
            get: |c| Some(timestamp_type_name(c.log_message_timestamp_type).to_string())),
        // KIP-937: the accepted window around the broker's clock.
        num!("log.message.timestamp.before.max.ms", Long AtLeast(0), "9223372036854775807",
            log_message_timestamp_before_max_ms,
            "a CreateTime record older than this (ms) is refused with INVALID_TIMESTAMP (KIP-937); topic key `message.timestamp.before.max.ms`"),
        num!("log.message.timestamp.after.max.ms", Long AtLeast(0), "3600000",
            log_message_timestamp_after_max_ms,
            "a CreateTime record further than this (ms) in the future is refused with INVALID_TIMESTAMP (KIP-937, Kafka 4's default, KIP-1030); topic key `message.timestamp.after.max.ms`"),
        // Kafka turns any negative retention into -1 before checking "-1 or at
        // least 1", so -2 slips through as unlimited there; Weir holds every
        // form of the key to the rule as stated. Precedence: ms, minutes,
        // hours (BrokerConfig::from_pairs).
        num!("log.retention.ms", Long UnlimitedOrAtLeast(1), null, log_retention_ms,
            "segments older than this (ms) are deleted; -1 keeps them; wins over `log.retention.minutes` and `log.retention.hours`"),
        custom!("log.retention.minutes", Int UnlimitedOrAtLeast(1), null,
            "`log.retention.ms` in minutes; wins over `log.retention.hours`",
            set: |c, key, value| {
                c.log_retention_ms = unlimited_or(parse_number(key, value)?, 60_000);
                Ok(())
            },
            get: |_| None),
        custom!("log.retention.hours", Int UnlimitedOrAtLeast(1), "168",
            "`log.retention.ms` in hours",
            set: |c, key, value| {
                c.log_retention_ms = unlimited_or(parse_number(key, value)?, 3_600_000);
                Ok(())
            },
            get: |_| None),
        num!("log.retention.bytes", Long Any, "-1", log_retention_bytes,
            "partition size (bytes) above which the oldest segments are deleted; -1 is unlimited"),
        num!("log.roll.ms", Long AtLeast(1), null, log_roll_ms,
            "age (ms) at which the active segment rolls; wins over `log.roll.hours`; topic key `segment.ms`"),
        custom!("log.roll.hours", Int AtLeast(1), "168", "`log.roll.ms` in hours",
            set: |c, key, value| {
                c.log_roll_ms = parse_number::<i64>(key, value)?.saturating_mul(3_600_000);
                Ok(())
            },
            get: |_| None),
        num!("log.retention.check.interval.ms", Long AtLeast(1), "300000",
            log_retention_check_interval_ms, "how often retention runs (ms)"),
        custom!("log.cleanup.policy", List, "delete",
            "default `cleanup.policy` of topics: `delete`, `compact` or both",
            set: |c, key, value| {
                c.log_cleanup_policy = parse_cleanup_policy(value)
                    .ok_or_else(|| invalid(key, value, "expected delete, compact or both"))?;
                Ok(())
            },
            get: |c| Some(cleanup_policy_name(c.log_cleanup_policy).to_string())),
        // ---- The log cleaner (CleanerConfig; "at least 1MB per cleaner
        // thread" is checked across keys by BrokerConfig::from_pairs).
        flag!("log.cleaner.enable", "true", log_cleaner_enable,
            "run the log cleaner that compacts `cleanup.policy=compact` topics"),
        num!("log.cleaner.threads", Int AtLeast(0), "1", log_cleaner_threads,
            "cleaner threads; Weir runs one whatever the value"),
        num!("log.cleaner.dedupe.buffer.size", Long Any, "134217728",
            log_cleaner_dedupe_buffer_size,
            "memory of the cleaner's offset map (bytes), more than 1 MiB per cleaner thread"),
        num!("log.cleaner.backoff.ms", Long AtLeast(0), "15000", log_cleaner_backoff_ms,
            "pause between cleaner passes that found nothing to clean (ms)"),
        num!("log.cleaner.min.cleanable.ratio", Double Between(0.0, 1.0), "0.5",
            log_cleaner_min_cleanable_ratio, "default `min.cleanable.dirty.ratio` of topics"),
        num!("log.cleaner.delete.retention.ms", Long AtLeast(0), "86400000",
            log_cleaner_delete_retention_ms,
            "default `delete.retention.ms` of topics: how long tombstones are kept (ms)"),
        num!("log.cleaner.min.compaction.lag.ms", Long AtLeast(0), "0",
            log_cleaner_min_compaction_lag_ms, "default `min.compaction.lag.ms` of topics"),
        num!("log.cleaner.max.compaction.lag.ms", Long AtLeast(1), "9223372036854775807",
            log_cleaner_max_compaction_lag_ms, "default `max.compaction.lag.ms` of topics"),
        // ---- Flushing.
        flag!("log.write.caching", "false", log_write_caching,
            "Weir's key (Redpanda's `write_caching`): `true` answers acks=all before the fsync, as Apache Kafka does; topic key `write.caching`"),
        // Weir's key; at most 1 s: the wait holds the partition's flush lock,
        // which an acks=all answer and a follower's truncation wait for.
        num!("log.flush.pace.ms", Long Between(0.0, 1000.0), "4", log_flush_pace_ms,
            "Weir's key: a partition growing by 8 KiB or more per interval fsyncs for acks=all at most once per interval, so one fsync covers several requests (ms, at most 1000; 0: no wait, concurrent requests still share a flush)"),
        num!("log.flush.interval.messages", Long AtLeast(1), "9223372036854775807",
            log_flush_interval_messages,
            "fsync a partition before answering once this many messages are unflushed"),
        // Kafka: no validator; a negative interval means nothing here.
        custom!("log.flush.interval.ms", Long AtLeast(0), null,
            "the background flusher fsyncs a partition whose last flush is this old (ms); unset, `log.flush.scheduler.interval.ms`",
            set: |c, key, value| {
                c.log_flush_interval_ms = Some(parse_number(key, value)?);
                Ok(())
            },
            get: |c| c.log_flush_interval_ms.map(|ms| ms.to_string())),
        // Kafka: no validator; Weir's flusher wants a period of 1 ms or more.
        num!("log.flush.scheduler.interval.ms", Long AtLeast(1), "9223372036854775807",
            log_flush_scheduler_interval_ms,
            "how often the background flusher runs (ms; Kafka's default: never)"),
        num!("log.flush.offset.checkpoint.interval.ms", Int AtLeast(0), "60000",
            log_flush_offset_checkpoint_interval_ms,
            "how often recovery points are checkpointed (ms)"),
        num!("num.recovery.threads.per.data.dir", Int AtLeast(1), "2",
            num_recovery_threads_per_data_dir,
            "threads that open (and recover) the partitions' logs at startup (KIP-1030's default)"),
        // ---- Producers and transactions (TransactionLogConfig).
        num!("producer.id.expiration.ms", Int AtLeast(1), "86400000", producer_id_expiration_ms,
            "an idempotent producer whose last batch is this old (ms) is forgotten at the next retention check"),
        accepted!("transaction.state.log.replication.factor", Short AtLeast(1), "3",
            "accepted and reported; transactions are not served yet"),
        accepted!("transaction.state.log.min.isr", Int AtLeast(1), "2",
            "accepted and reported; transactions are not served yet"),
        accepted!("share.coordinator.state.topic.replication.factor", Short AtLeast(1), "3",
            "accepted and reported; share groups (KIP-932) are not served"),
        accepted!("share.coordinator.state.topic.min.isr", Short AtLeast(1), "2",
            "accepted and reported; share groups (KIP-932) are not served"),
        // ---- Sockets and connections (SocketServerConfigs, ServerConfigs).
        // Kafka's connections.max.idle.ms has no validator; -1 turns idle
        // closing off, as in Kafka's Selector.
        num!("socket.request.max.bytes", Int AtLeast(1), "104857600", socket_request_max_bytes,
            "larger request frames close the connection"),
        num!("connections.max.idle.ms", Long UnlimitedOrAtLeast(0), "600000",
            connections_max_idle_ms,
            "idle connections are closed after this many ms; `-1` never closes them"),
        accepted!("socket.send.buffer.bytes", Int Any, "102400",
            "accepted and reported; the operating system sizes socket buffers"),
        accepted!("socket.receive.buffer.bytes", Int Any, "102400",
            "accepted and reported; the operating system sizes socket buffers"),
        accepted!("num.network.threads", Int AtLeast(1), "3",
            "accepted and reported; connections run on the broker's async runtime"),
        accepted!("num.io.threads", Int AtLeast(1), "8",
            "accepted and reported; requests run on the broker's async runtime"),
        // ---- Memory and connection limits (issue 15). Kafka's
        // queued.max.request.bytes has no validator (0 or less, its default -1
        // included, is unbounded); Weir's response budget alike.
        num!("queued.max.request.bytes", Long Any, "209715200", queued_max_request_bytes,
            "request bytes held in memory across all connections (being read, processed or parked); a connection without budget is not read until bytes come back. Kafka's default is `-1` (unbounded); Weir bounds memory by default; `0` or less is unbounded"),
        num!("queued.max.response.bytes", Long Any, "209715200", queued_max_response_bytes,
            "Weir's key: unsent response bytes across all connections; when reached, connections with unsent responses are neither read nor processed; `0` or less is unbounded"),
        num!("queued.max.response.bytes.per.connection", Long AtLeast(1), "1048576",
            queued_max_response_bytes_per_connection,
            "Weir's key: unsent response bytes at which a connection whose client does not read is neither read nor processed"),
        num!("fetch.max.bytes", Int AtLeast(1024), "57671680", fetch_max_bytes,
            "largest Fetch response; the first batch is still returned whole (KIP-74)"),
        num!("max.incremental.fetch.session.cache.slots", Int AtLeast(0), "1000",
            max_incremental_fetch_session_cache_slots,
            "incremental fetch sessions (KIP-227) a leader keeps; only followers' fetches create one (consumers get session id 0); at the limit the least recently used is evicted, `0` creates none"),
        num!("max.request.partition.size.limit", Int AtLeast(1), "2000",
            max_request_partition_size_limit,
            "most partitions one DescribeTopicPartitions response describes (KIP-966); the rest follow by cursor"),
        num!("max.connections", Int AtLeast(0), "2147483647", max_connections,
            "open connections; when reached, new ones wait to be accepted"),
        // 0 alone is refused across keys (without overrides), as Kafka.
        num!("max.connections.per.ip", Int AtLeast(0), "2147483647", max_connections_per_ip,
            "open connections from one address; more are closed at once"),
        custom!("max.connections.per.ip.overrides", String, "",
            "`ip:count,...` per-address limits (IP literals only)",
            set: |c, key, value| {
                c.max_connections_per_ip_overrides = parse_ip_counts(key, value)?;
                Ok(())
            },
            get: |c| {
                let mut pairs: Vec<String> = c
                    .max_connections_per_ip_overrides
                    .iter()
                    .map(|(ip, n)| format!("{ip}:{n}"))
                    .collect();
                pairs.sort();
                Some(pairs.join(","))
            }),
        custom!("metrics.listener", String, "127.0.0.1:9464",
            "Prometheus endpoint (Weir's own key); empty disables it",
            set: set_metrics_listener,
            get: |c| Some(c.metrics_listener.map(|a| a.to_string()).unwrap_or_default())),
        // ---- The offsets topic and the group coordinator
        // (GroupCoordinatorConfig). Kafka's offsets.topic.segment.bytes is
        // atLeast(1), but the topic is created with it as its segment.bytes,
        // which KIP-1030 holds to 1 MiB: a smaller value could never create it.
        num!("offsets.topic.num.partitions", Int AtLeast(1), "50", offsets_topic_num_partitions,
            "partitions of `__consumer_offsets` when it is created"),
        num!("offsets.topic.replication.factor", Short AtLeast(1), "3",
            offsets_topic_replication_factor,
            "its replication factor; a single node caps it (with a warning) at the registered brokers, a cluster of several voters (as Kafka) does not create the topic while fewer brokers are unfenced (FindCoordinator answers COORDINATOR_NOT_AVAILABLE)"),
        num!("offsets.topic.segment.bytes", Int AtLeast(MIN_SEGMENT_BYTES), "104857600",
            offsets_topic_segment_bytes, "its `segment.bytes`"),
        // Kafka defines no validator for the next four; negative values mean
        // nothing, so Weir wants 0 or more.
        num!("group.initial.rebalance.delay.ms", Int AtLeast(0), "3000",
            group_coordinator.initial_rebalance_delay_ms,
            "how long the first rebalance of an empty group waits for more members (ms)"),
        num!("group.min.session.timeout.ms", Int AtLeast(0), "6000",
            group_coordinator.min_session_timeout_ms,
            "shorter JoinGroup session timeouts get INVALID_SESSION_TIMEOUT"),
        num!("group.max.session.timeout.ms", Int AtLeast(0), "1800000",
            group_coordinator.max_session_timeout_ms,
            "longer JoinGroup session timeouts get INVALID_SESSION_TIMEOUT"),
        num!("offset.metadata.max.bytes", Int AtLeast(0), "4096",
            group_coordinator.offset_metadata_max_bytes,
            "longer commit metadata gets OFFSET_METADATA_TOO_LARGE"),
        num!("group.max.size", Int AtLeast(1), "2147483647", group_coordinator.max_size,
            "members beyond this get GROUP_MAX_SIZE_REACHED"),
        custom!("offsets.retention.minutes", Int AtLeast(1), "10080",
            "committed offsets of an empty group expire this long after it emptied (KIP-211)",
            set: |c, key, value| {
                c.group_coordinator.offsets_retention_ms =
                    parse_number::<i64>(key, value)?.saturating_mul(60_000);
                Ok(())
            },
            get: |c| Some((c.group_coordinator.offsets_retention_ms / 60_000).to_string())),
        num!("offsets.retention.check.interval.ms", Long AtLeast(1), "600000",
            group_coordinator.offsets_retention_check_interval_ms,
            "how often expired offsets are removed (ms)"),
        // ---- Replication (ReplicationConfigs). Kafka defines no validator
        // for these but num.replica.fetchers (atLeast 1) and the fetch sizes
        // (atLeast 0); Weir wants positive sizes and intervals (0 means
        // nothing useful). replica.fetch.wait.max.ms <= replica.lag.time.max.ms
        // is checked across keys by BrokerConfig::from_pairs.
        num!("num.replica.fetchers", Int AtLeast(1), "1", replication.num_replica_fetchers,
            "fetcher tasks per leader broker a follower fetches from"),
        num!("replica.fetch.max.bytes", Int AtLeast(0), "1048576",
            replication.replica_fetch_max_bytes,
            "bytes a follower fetches per partition per Fetch (the first batch whole)"),
        num!("replica.fetch.response.max.bytes", Int AtLeast(0), "10485760",
            replication.replica_fetch_response_max_bytes,
            "bytes of one follower Fetch response"),
        num!("replica.fetch.wait.max.ms", Int AtLeast(0), "500",
            replication.replica_fetch_wait_max_ms,
            "how long a follower Fetch waits at the leader for data (ms); at most `replica.lag.time.max.ms`"),
        num!("replica.fetch.min.bytes", Int AtLeast(1), "1", replication.replica_fetch_min_bytes,
            "bytes a follower Fetch waits for"),
        num!("replica.fetch.backoff.ms", Int AtLeast(0), "1000",
            replication.replica_fetch_backoff_ms, "pause after a failed follower Fetch (ms)"),
        num!("replica.lag.time.max.ms", Long AtLeast(1), "30000",
            replication.replica_lag_time_max_ms,
            "an ISR follower not caught up for this long (ms) leaves the ISR"),
        num!("replica.high.watermark.checkpoint.interval.ms", Long AtLeast(1), "5000",
            replication.high_watermark_checkpoint_interval_ms,
            "how often high watermarks are written to `replication-offset-checkpoint` (ms)"),
        // ---- Security (SocketServerConfigs, BrokerSecurityConfigs,
        // SslConfigs). The ssl.* keys may be set per listener as
        // listener.name.<listener lower case>.<key>; their values are read
        // where the listener is built (network::tls).
        custom!("listener.security.protocol.map", String,
            "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "`NAME:PROTOCOL,...`: each listener's security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); unset, a controller listener not named after a protocol is PLAINTEXT",
            set: |c, key, value| {
                c.listener_security_protocol_map = Some(crate::config::parse_protocol_map(key, value)?);
                Ok(())
            },
            get: |_| None),
        custom!("security.inter.broker.protocol", String, "PLAINTEXT",
            "the protocol of the inter-broker listener when `inter.broker.listener.name` is not set",
            set: |c, key, value| {
                c.security_inter_broker_protocol = SecurityProtocol::from_name(value)
                    .ok_or_else(|| invalid(key, value, "not a security protocol"))?;
                Ok(())
            },
            get: |c| Some(c.security_inter_broker_protocol.name().to_string())),
        custom!("ssl.keystore.type", String, "JKS",
            "the keystore's format; Weir reads `PEM` (a JKS or PKCS12 store is refused at start)",
            set: check_store_type, get: |_| None),
        custom!("ssl.keystore.location", String, null,
            "PEM file holding the listener's private key (PKCS#8, PKCS#1 or SEC1) and its certificate chain; re-read when it changes (checked every 10 s)",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("ssl.keystore.password", Password, null,
            "the keystore's password (PEM: not used, as Kafka)",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("ssl.key.password", Password, null,
            "the password of the keystore's encrypted PKCS#8 private key (`ENCRYPTED PRIVATE KEY`: PBES2 with AES, or PKCS#12's PBE-SHA1-3DES, which the JDK under Kafka reads)",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("ssl.keystore.key", Password, null,
            "the private key in PEM, inline (instead of `ssl.keystore.location`)",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("ssl.keystore.certificate.chain", Password, null,
            "the certificate chain in PEM, inline, with `ssl.keystore.key`",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("ssl.truststore.type", String, "JKS",
            "the truststore's format; Weir reads `PEM`",
            set: check_store_type, get: |_| None),
        custom!("ssl.truststore.location", String, null,
            "PEM file of the CA certificates client certificates (and, for a node's own connections, other nodes) are verified against; re-read when it changes",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("ssl.truststore.password", Password, null,
            "the truststore's password (PEM: not used, as Kafka)",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("ssl.truststore.certificates", Password, null,
            "the trusted certificates in PEM, inline (instead of `ssl.truststore.location`)",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("ssl.client.auth", String, "none",
            "client certificates: `none`, `requested` (verified when sent) or `required` (mTLS)",
            set: |_, key, value| one_of(key, value, &["none", "requested", "required"]),
            get: |_| None),
        custom!("ssl.enabled.protocols", List, "TLSv1.2,TLSv1.3",
            "TLS versions the listener accepts: TLSv1.2, TLSv1.3 (TLSv1 and TLSv1.1, which the JDK disables, are skipped with a warning)",
            set: check_tls_versions, get: |_| None),
        custom!("ssl.protocol", String, "TLSv1.3",
            "accepted for Kafka's configurations; `ssl.enabled.protocols` decides",
            set: |_, key, value| one_of(key, value, &["TLS", "TLSv1.2", "TLSv1.3"]),
            get: |_| None),
        custom!("ssl.cipher.suites", List, "",
            "cipher suites by their IANA names (as the JDK's); suites rustls does not offer (CBC, RSA key exchange) are skipped with a warning, a list of only those is refused; empty: rustls's defaults",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("ssl.endpoint.identification.algorithm", String, "https",
            "`https` (the default): a broker connecting to another node over TLS checks the host name it dials against the certificate; empty: it does not",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("ssl.principal.mapping.rules", String, "DEFAULT",
            "how an SSL client's certificate subject (RFC 2253) names its principal: `DEFAULT` and `RULE:pattern/replacement/[LU]`, comma-separated; a client no rule applies to is refused",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("ssl.allow.dn.changes", Boolean, "false",
            "whether a reloaded keystore may change the certificate's subject (refused otherwise, as Kafka)",
            set: |_, key, value| one_of(key, value, &["true", "false"]), get: |_| None),
        custom!("ssl.allow.san.changes", Boolean, "false",
            "whether a reloaded keystore may change the certificate's subject alternative names (refused otherwise, as Kafka)",
            set: |_, key, value| one_of(key, value, &["true", "false"]), get: |_| None),
        custom!("ssl.secure.random.implementation", String, null,
            "accepted for Kafka's configurations (a JSSE setting; rustls draws from the operating system's random source)",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("ssl.provider", String, null,
            "accepted for Kafka's configurations (a JSSE provider; Weir's TLS is rustls with ring)",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("ssl.keymanager.algorithm", String, "SunX509",
            "accepted for Kafka's configurations (a JSSE setting)",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("ssl.trustmanager.algorithm", String, "PKIX",
            "accepted for Kafka's configurations (a JSSE setting)",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("sasl.enabled.mechanisms", List, "GSSAPI",
            "SASL mechanisms a SASL listener offers; Weir serves PLAIN (users from `listener.name.<listener>.plain.sasl.jaas.config`), SCRAM-SHA-256 and SCRAM-SHA-512 (users in the metadata log)",
            set: |_, key, value| {
                for m in list(value) {
                    if !m.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                        return Err(invalid(key, value, format!("'{m}' is not a mechanism name")));
                    }
                }
                Ok(())
            },
            get: |_| None),
        custom!("sasl.mechanism.inter.broker.protocol", String, "GSSAPI",
            "the SASL mechanism a follower logs in to a SASL inter-broker listener with (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), as the `username`/`password` of `listener.name.<listener>.<mechanism>.sasl.jaas.config`",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("sasl.mechanism.controller.protocol", String, "GSSAPI",
            "the SASL mechanism a node logs in to a SASL controller listener with (PLAIN; SCRAM credentials live in the metadata log the controllers replicate), as the `username`/`password` of `listener.name.<listener>.<mechanism>.sasl.jaas.config`",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("principal.builder.class", String,
            "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
            "how a connection's principal is named; Weir builds it as Kafka's `DefaultKafkaPrincipalBuilder` (SASL user name, or the certificate subject through `ssl.principal.mapping.rules`) and accepts only that class",
            set: |_, key, value| one_of(key, value, &[
                "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
            ]),
            get: |_| None),
        custom!("sasl.kerberos.service.name", String, null,
            "accepted for Kafka's configurations; GSSAPI (Kerberos) is not served",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("sasl.kerberos.kinit.cmd", String, "/usr/bin/kinit",
            "accepted for Kafka's configurations; GSSAPI (Kerberos) is not served",
            set: |_, _, _| Ok(()), get: |_| None),
        accepted!("sasl.kerberos.min.time.before.relogin", Long Any, "60000",
            "accepted for Kafka's configurations; GSSAPI (Kerberos) is not served"),
        accepted!("sasl.kerberos.ticket.renew.jitter", Double Any, "0.05",
            "accepted for Kafka's configurations; GSSAPI (Kerberos) is not served"),
        accepted!("sasl.kerberos.ticket.renew.window.factor", Double Any, "0.8",
            "accepted for Kafka's configurations; GSSAPI (Kerberos) is not served"),
        custom!("sasl.kerberos.principal.to.local.rules", List, "DEFAULT",
            "accepted for Kafka's configurations; GSSAPI (Kerberos) is not served",
            set: |_, _, _| Ok(()), get: |_| None),
        accepted!("sasl.login.refresh.window.factor", Double Any, "0.8",
            "accepted for Kafka's configurations (OAUTHBEARER/GSSAPI token refresh; Weir's own logins are PLAIN or SCRAM)"),
        accepted!("sasl.login.refresh.window.jitter", Double Any, "0.05",
            "accepted for Kafka's configurations (token refresh)"),
        accepted!("sasl.login.refresh.min.period.seconds", Short Any, "60",
            "accepted for Kafka's configurations (token refresh)"),
        accepted!("sasl.login.refresh.buffer.seconds", Short Any, "300",
            "accepted for Kafka's configurations (token refresh)"),
        custom!("sasl.login.connect.timeout.ms", Int Any, null,
            "accepted for Kafka's configurations (OAUTHBEARER token endpoint)",
            set: |_, _, _| Ok(()), get: |_| None),
        custom!("sasl.login.read.timeout.ms", Int Any, null,
            "accepted for Kafka's configurations (OAUTHBEARER token endpoint)",
            set: |_, _, _| Ok(()), get: |_| None),
        accepted!("sasl.login.retry.backoff.ms", Long Any, "100",
            "accepted for Kafka's configurations (OAUTHBEARER token endpoint)"),
        accepted!("sasl.login.retry.backoff.max.ms", Long Any, "10000",
            "accepted for Kafka's configurations (OAUTHBEARER token endpoint)"),
        custom!("sasl.jaas.config", Password, null,
            "accepted for Kafka's configurations (the inter-broker client's; a SASL listener reads `listener.name.<listener>.<mechanism>.sasl.jaas.config`)",
            set: |_, _, _| Ok(()), get: |_| None),
        // Kafka defines no validator for these two; a receive size under 1
        // byte would refuse every request, so Weir wants at least 1.
        num!("connections.max.reauth.ms", Long Any, "0", connections_max_reauth_ms,
            "SASL session lifetime (KIP-368, ms): a client re-authenticates within it or its connection is closed at its next request; 0: sessions do not expire; `listener.name.<listener>[.<mechanism>].connections.max.reauth.ms` sets it per listener and mechanism, as Kafka"),
        num!("connection.failed.authentication.delay.ms", Int AtLeast(0), "100",
            connection_failed_authentication_delay_ms,
            "how long the answer to a failed SASL authentication is held before the connection closes (ms)"),
        num!("sasl.server.max.receive.size", Int AtLeast(1), "524288",
            sasl_server_max_receive_size,
            "largest request read before SASL authentication completes (bytes)"),
        custom!("authorizer.class.name", String, "",
            "empty: every client may do everything; `org.apache.kafka.metadata.authorizer.StandardAuthorizer` (or `kafka.security.authorizer.AclAuthorizer`): ACLs are enforced as Kafka's StandardAuthorizer",
            set: |c, key, value| {
                let value = value.trim();
                if !value.is_empty() && !crate::authorizer::STANDARD_AUTHORIZER_CLASSES.contains(&value) {
                    return Err(invalid(key, value, format!(
                        "Weir serves only {}", crate::authorizer::STANDARD_AUTHORIZER_CLASSES[0])));
                }
                c.authorizer_class_name = value.to_string();
                Ok(())
            },
            get: |c| Some(c.authorizer_class_name.clone())),
        custom!("super.users", String, "",
            "principals allowed every operation whatever the ACLs, `;`-separated (`User:admin;User:broker`)",
            set: |c, key, value| {
                let users: Vec<String> = value
                    .split(';')
                    .map(str::trim)
                    .filter(|u| !u.is_empty())
                    .map(str::to_string)
                    .collect();
                if let Some(bad) = users.iter().find(|u| !u.split_once(':').is_some_and(|(t, n)| !t.is_empty() && !n.is_empty())) {
                    return Err(invalid(key, value, format!("'{bad}' is not a principal (`User:<name>`)")));
                }
                c.super_users = users;
                Ok(())
            },
            get: |c| Some(c.super_users.join(";"))),
        flag!("allow.everyone.if.no.acl.found", "false", allow_everyone_if_no_acl_found,
            "with an authorizer, whether a resource no ACL applies to is open to every client"),
        num!("quota.window.num", Int AtLeast(1), "11", quota_window_num,
            "samples a client quota's byte rate (KIP-13) and request time (KIP-124) are measured over"),
        num!("quota.window.size.seconds", Int AtLeast(1), "1", quota_window_size_seconds,
            "length of one quota sample (s); also the longest request-time throttle"),
        num!("controller.quota.window.num", Int AtLeast(1), "11", controller_quota_window_num,
            "samples of the controller mutation quota (KIP-599): a client's token bucket holds its controller_mutation_rate times this times the sample length"),
        num!("controller.quota.window.size.seconds", Int AtLeast(1), "1",
            controller_quota_window_size_seconds,
            "length of one controller mutation quota sample (s)"),
        custom!("inter.broker.listener.name", String, null,
            "the listener followers fetch through; unset, the first PLAINTEXT listener",
            set: |c, _, value| {
                c.replication.inter_broker_listener_name = Some(value.trim().to_string());
                Ok(())
            },
            get: |c| c.replication.inter_broker_listener_name.clone()),
    ]
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Each table (broker keys here, topic keys' bounds) names a key once.
    #[test]
    fn keys_are_unique() {
        let broker: Vec<&str> = BROKER_KEYS.iter().map(|k| k.name).collect();
        let topic: Vec<&str> = crate::config_bounds::TOPIC_KEY_BOUNDS
            .iter()
            .map(|d| d.name)
            .collect();
        for names in [broker, topic] {
            for (i, name) in names.iter().enumerate() {
                assert!(!names[..i].contains(name), "{name} has two rows");
            }
        }
    }

    /// `BrokerConfig::default()` is what the table's defaults say: each
    /// row's default is its value in the default configuration, and
    /// applying every default over it changes no key's value.
    #[test]
    fn every_default_is_the_default_configuration() {
        let defaults = BrokerConfig::default();
        for k in BROKER_KEYS {
            if let (Some(default), Some(value)) = (k.default, (k.get)(&defaults)) {
                assert_eq!(
                    value, default,
                    "{}: BrokerConfig::default() differs",
                    k.name
                );
            }
        }
        let mut applied = BrokerConfig::default();
        for k in BROKER_KEYS {
            if let Some(default) = k.default {
                k.apply(&mut applied, default)
                    .unwrap_or_else(|e| panic!("{} default {default}: {e}", k.name));
            }
        }
        for k in BROKER_KEYS {
            assert_eq!((k.get)(&applied), (k.get)(&defaults), "{}", k.name);
        }
    }

    /// DescribeConfigs' type matches the bound's type for numeric keys
    /// (`default.replication.factor` is Kafka's INT held to a SHORT), and
    /// every numeric key has a bound.
    #[test]
    fn numeric_keys_have_bounds_of_their_type() {
        for k in BROKER_KEYS {
            let numeric = matches!(
                k.config_type,
                ConfigType::Short | ConfigType::Int | ConfigType::Long | ConfigType::Double
            );
            assert_eq!(numeric, k.bound.is_some(), "{}", k.name);
            if let Some((num_type, _)) = k.bound {
                if k.name != "default.replication.factor" {
                    assert_eq!(numeric_type(num_type), k.config_type, "{}", k.name);
                }
            }
        }
    }

    /// The README's configuration table is exactly [`readme_table`]; on a
    /// mismatch the failure prints the table to paste.
    #[test]
    fn readme_lists_every_key_with_its_default() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
            .expect("reading README.md");
        let expected = readme_table();
        let header = expected.lines().next().unwrap();
        let start = readme.find(header).expect("README has no broker key table");
        let table: String = readme[start..]
            .lines()
            .take_while(|l| l.starts_with('|'))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(
            table == expected,
            "README.md's configuration table differs from broker_keys::BROKER_KEYS; it should read:\n{expected}"
        );
    }
}
