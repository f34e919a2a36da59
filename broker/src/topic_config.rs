//! Topic-level configuration: the keys Kafka defines for topics, their
//! broker-level synonyms and defaults, validation for CreateTopics, and the
//! `LogConfig` a topic's partitions are opened with.
//!
//! Source: Kafka's `TopicConfig` / `LogConfig` and the DescribeConfigs
//! protocol (KIP-226 for sources and synonyms).

use std::collections::BTreeMap;

use weir_storage::LogConfig;

use crate::config::{parse_timestamp_type, BrokerConfig};

/// DescribeConfigs `config_type` values (KIP-569).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigType {
    /// true / false.
    Boolean = 1,
    /// Free text.
    String = 2,
    /// 32-bit integer.
    Int = 3,
    /// 16-bit integer.
    Short = 4,
    /// 64-bit integer.
    Long = 5,
    /// Floating point.
    Double = 6,
    /// Comma-separated list.
    List = 7,
    /// A secret (`ssl.key.password`, ...): DescribeConfigs reports it as
    /// sensitive with a null value, as Kafka's `ConfigHelper` does.
    Password = 9,
}

/// DescribeConfigs `config_source` values (KIP-226).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigSource {
    /// Set on the topic.
    DynamicTopicConfig = 1,
    /// Set in the broker's static configuration.
    StaticBrokerConfig = 4,
    /// Kafka's default.
    DefaultConfig = 5,
}

/// One topic config key.
#[derive(Debug)]
pub struct TopicConfigDef {
    /// The topic key, e.g. `segment.bytes`.
    pub name: &'static str,
    /// The broker key that provides its default, e.g. `log.segment.bytes`.
    pub broker_synonym: Option<&'static str>,
    /// Type for DescribeConfigs v3+.
    pub config_type: ConfigType,
    /// Short description for DescribeConfigs `include_documentation`.
    pub doc: &'static str,
}

/// Every topic config key Weir accepts, in Kafka's alphabetical order.
pub static TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def(
        "cleanup.policy",
        Some("log.cleanup.policy"),
        ConfigType::List,
        "delete or compact",
    ),
    def(
        "compression.type",
        Some("compression.type"),
        ConfigType::String,
        "final compression type; producer keeps the producer's codec",
    ),
    def(
        "delete.retention.ms",
        Some("log.cleaner.delete.retention.ms"),
        ConfigType::Long,
        "how long tombstones are kept on compacted topics (ms)",
    ),
    def(
        "file.delete.delay.ms",
        Some("log.segment.delete.delay.ms"),
        ConfigType::Long,
        "delay before a deleted segment file is removed (ms)",
    ),
    def(
        "flush.messages",
        Some("log.flush.interval.messages"),
        ConfigType::Long,
        "messages between forced fsyncs",
    ),
    def(
        "flush.ms",
        Some("log.flush.interval.ms"),
        ConfigType::Long,
        "time between forced fsyncs (ms)",
    ),
    def(
        "index.interval.bytes",
        Some("log.index.interval.bytes"),
        ConfigType::Int,
        "bytes between offset index entries",
    ),
    def(
        "max.message.bytes",
        Some("message.max.bytes"),
        ConfigType::Int,
        "largest record batch size allowed (bytes)",
    ),
    def(
        "max.compaction.lag.ms",
        Some("log.cleaner.max.compaction.lag.ms"),
        ConfigType::Long,
        "maximum time a record may stay uncompacted (ms)",
    ),
    def(
        "message.timestamp.after.max.ms",
        Some("log.message.timestamp.after.max.ms"),
        ConfigType::Long,
        "how far a CreateTime timestamp may lie in the future (ms, KIP-937)",
    ),
    def(
        "message.timestamp.before.max.ms",
        Some("log.message.timestamp.before.max.ms"),
        ConfigType::Long,
        "how far a CreateTime timestamp may lie in the past (ms, KIP-937)",
    ),
    def(
        "message.timestamp.type",
        Some("log.message.timestamp.type"),
        ConfigType::String,
        "CreateTime or LogAppendTime",
    ),
    def(
        "min.cleanable.dirty.ratio",
        Some("log.cleaner.min.cleanable.ratio"),
        ConfigType::Double,
        "dirty ratio that triggers compaction",
    ),
    def(
        "min.compaction.lag.ms",
        Some("log.cleaner.min.compaction.lag.ms"),
        ConfigType::Long,
        "minimum age before a record may be compacted (ms)",
    ),
    def(
        "min.insync.replicas",
        Some("min.insync.replicas"),
        ConfigType::Int,
        "replicas that must acknowledge an acks=all write",
    ),
    def(
        "retention.bytes",
        Some("log.retention.bytes"),
        ConfigType::Long,
        "partition size before old segments are deleted (bytes)",
    ),
    def(
        "retention.ms",
        Some("log.retention.ms"),
        ConfigType::Long,
        "age before old segments are deleted (ms)",
    ),
    def(
        "segment.bytes",
        Some("log.segment.bytes"),
        ConfigType::Int,
        "segment file size (bytes)",
    ),
    def(
        "segment.index.bytes",
        Some("log.index.size.max.bytes"),
        ConfigType::Int,
        "offset index size (bytes)",
    ),
    def(
        "segment.ms",
        Some("log.roll.ms"),
        ConfigType::Long,
        "time before a segment is rolled (ms)",
    ),
    def(
        "unclean.leader.election.enable",
        Some("unclean.leader.election.enable"),
        ConfigType::Boolean,
        "allow out-of-sync replicas to become leader",
    ),
    def(
        "write.caching",
        Some("log.write.caching"),
        ConfigType::Boolean,
        "answer acks=all before fsync (Weir; Redpanda's write.caching)",
    ),
];

const fn def(
    name: &'static str,
    broker_synonym: Option<&'static str>,
    config_type: ConfigType,
    doc: &'static str,
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        broker_synonym,
        config_type,
        doc,
    }
}

/// Kafka's internal topic keys (`LogConfig.defineInternal`): accepted and
/// applied like the others, but listed by DescribeConfigs only when set
/// on the topic (Kafka's `ConfigHelper.allConfigs` lists an internal key
/// only from the topic's own values).
pub static INTERNAL_TOPIC_CONFIGS: &[TopicConfigDef] = &[def(
    "internal.segment.bytes",
    None,
    ConfigType::Int,
    "segment file size (bytes) overriding segment.bytes without its minimum; for testing only",
)];

/// Looks up a topic config key, internal ones included.
pub fn topic_config_def(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS
        .iter()
        .chain(INTERNAL_TOPIC_CONFIGS)
        .find(|d| d.name == name)
}

/// The broker-derived default value of a topic config key, as Kafka prints it.
pub fn default_value(broker: &BrokerConfig, name: &str) -> String {
    match name {
        "cleanup.policy" => crate::config::cleanup_policy_name(broker.log_cleanup_policy).into(),
        "compression.type" => "producer".into(),
        "delete.retention.ms" => broker.log_cleaner_delete_retention_ms.to_string(),
        "max.compaction.lag.ms" => broker.log_cleaner_max_compaction_lag_ms.to_string(),
        "file.delete.delay.ms" => "60000".into(),
        "flush.messages" => broker.log_flush_interval_messages.to_string(),
        "flush.ms" => broker.log_flush_interval_ms_or_default().to_string(),
        "index.interval.bytes" => broker.log_index_interval_bytes.to_string(),
        "max.message.bytes" => broker.message_max_bytes.to_string(),
        "message.timestamp.after.max.ms" => broker.log_message_timestamp_after_max_ms.to_string(),
        "message.timestamp.before.max.ms" => broker.log_message_timestamp_before_max_ms.to_string(),
        "message.timestamp.type" => {
            crate::config::timestamp_type_name(broker.log_message_timestamp_type).into()
        }
        "min.cleanable.dirty.ratio" => broker.log_cleaner_min_cleanable_ratio.to_string(),
        "min.compaction.lag.ms" => broker.log_cleaner_min_compaction_lag_ms.to_string(),
        "min.insync.replicas" => broker.min_insync_replicas.to_string(),
        "retention.bytes" => broker.log_retention_bytes.to_string(),
        "retention.ms" => broker.log_retention_ms.to_string(),
        "segment.bytes" => broker.log_segment_bytes.to_string(),
        "segment.index.bytes" => broker.log_index_size_max_bytes.to_string(),
        "segment.ms" => broker.log_roll_ms.to_string(),
        "unclean.leader.election.enable" => "false".into(),
        "write.caching" => broker.log_write_caching.to_string(),
        _ => String::new(),
    }
}

/// Why a topic config was refused (answered with INVALID_CONFIG), in the
/// words of Kafka's `LogConfig.validateNames` and `ConfigException`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TopicConfigError {
    /// Not a topic config key.
    #[error("Unknown topic config name: {name}")]
    UnknownKey {
        /// The key.
        name: String,
    },
    /// A value that does not parse for its key or breaks its bound
    /// ([`crate::config_bounds`]), e.g. `Invalid value 102400 for
    /// configuration segment.bytes: Value must be at least 1048576`.
    #[error(transparent)]
    InvalidValue(#[from] crate::config_bounds::InvalidValue),
}

/// Kafka's `BrokerCompressionType` names, in its order.
const COMPRESSION_TYPES: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

/// Checks one `(key, value)` pair as CreateTopics, AlterConfigs and
/// IncrementalAlterConfigs do (Kafka's `LogConfig.validate`): numeric keys
/// against their row in [`crate::config_bounds::TOPIC_KEY_BOUNDS`], the
/// others against Kafka's `in(...)` lists and booleans.
///
/// # Errors
/// [`TopicConfigError`] naming the key (and the bound it breaks).
pub fn validate(name: &str, value: &str) -> Result<(), TopicConfigError> {
    let def = topic_config_def(name).ok_or_else(|| TopicConfigError::UnknownKey {
        name: name.to_string(),
    })?;
    if let Some(bounds) = crate::config_bounds::key_def(name) {
        bounds.check(value)?;
        return Ok(());
    }
    let refuse = |reason: String| {
        TopicConfigError::InvalidValue(crate::config_bounds::InvalidValue {
            name: name.to_string(),
            value: value.to_string(),
            reason,
        })
    };
    let one_of = |valid: &[&str]| format!("String must be one of: {}", valid.join(", "));
    match def.config_type {
        ConfigType::Boolean => match value.trim() {
            "true" | "false" => Ok(()),
            _ => Err(refuse(
                "Expected value to be either true or false".to_string(),
            )),
        },
        ConfigType::List => match crate::config::parse_cleanup_policy(value) {
            Some(_) => Ok(()),
            None => Err(refuse(one_of(&["compact", "delete"]))),
        },
        ConfigType::String if name == "message.timestamp.type" => {
            match parse_timestamp_type(name, value) {
                Ok(_) => Ok(()),
                Err(_) => Err(refuse(one_of(&["CreateTime", "LogAppendTime"]))),
            }
        }
        ConfigType::String if name == "compression.type" => {
            if COMPRESSION_TYPES.contains(&value.trim()) {
                Ok(())
            } else {
                Err(refuse(one_of(COMPRESSION_TYPES)))
            }
        }
        // Every numeric topic key has a bounds row (a test checks it).
        _ => Ok(()),
    }
}

/// The `LogConfig` for a topic: broker defaults overridden by the topic's
/// explicit configs. Values were validated when the topic was created;
/// anything that does not parse falls back to the broker default.
pub fn log_config_for(
    broker: &BrokerConfig,
    topic_configs: &BTreeMap<String, String>,
) -> LogConfig {
    let mut c = broker.default_log_config();
    let get = |k: &str| topic_configs.get(k).map(String::as_str);
    override_from(topic_configs, "segment.bytes", &mut c.segment_bytes);
    // Kafka's LogConfig.segmentSize(): the internal key wins when set.
    override_from(
        topic_configs,
        "internal.segment.bytes",
        &mut c.segment_bytes,
    );
    override_from(
        topic_configs,
        "segment.index.bytes",
        &mut c.segment_index_bytes,
    );
    override_from(
        topic_configs,
        "index.interval.bytes",
        &mut c.index_interval_bytes,
    );
    override_from(topic_configs, "max.message.bytes", &mut c.max_message_bytes);
    override_from(topic_configs, "retention.ms", &mut c.retention_ms);
    override_from(topic_configs, "retention.bytes", &mut c.retention_bytes);
    override_from(topic_configs, "segment.ms", &mut c.segment_ms);
    override_from(topic_configs, "flush.messages", &mut c.flush_messages);
    override_from(topic_configs, "flush.ms", &mut c.flush_ms);
    override_from(
        topic_configs,
        "min.cleanable.dirty.ratio",
        &mut c.min_cleanable_dirty_ratio,
    );
    override_from(
        topic_configs,
        "min.compaction.lag.ms",
        &mut c.min_compaction_lag_ms,
    );
    override_from(
        topic_configs,
        "max.compaction.lag.ms",
        &mut c.max_compaction_lag_ms,
    );
    override_from(
        topic_configs,
        "delete.retention.ms",
        &mut c.delete_retention_ms,
    );
    override_from(
        topic_configs,
        "message.timestamp.before.max.ms",
        &mut c.message_timestamp_before_max_ms,
    );
    override_from(
        topic_configs,
        "message.timestamp.after.max.ms",
        &mut c.message_timestamp_after_max_ms,
    );
    if let Some(t) = get("message.timestamp.type").and_then(|v| parse_timestamp_type("", v).ok()) {
        c.message_timestamp_type = t;
    }
    if let Some(p) = get("cleanup.policy").and_then(crate::config::parse_cleanup_policy) {
        c.cleanup_policy = p;
    }
    c
}

/// Sets `field` from the topic config `key` when it is set and parses.
fn override_from<T: std::str::FromStr>(
    topic_configs: &BTreeMap<String, String>,
    key: &str,
    field: &mut T,
) {
    if let Some(v) = topic_configs.get(key).and_then(|v| v.parse().ok()) {
        *field = v;
    }
}

/// Whether a topic's acks=all produces are answered before their data is
/// fsynced: the topic's `write.caching`, else the broker's
/// `log.write.caching`.
pub fn write_caching_for(broker: &BrokerConfig, topic_configs: &BTreeMap<String, String>) -> bool {
    let mut write_caching = broker.log_write_caching;
    override_from(topic_configs, "write.caching", &mut write_caching);
    write_caching
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_storage::CleanupPolicy;
    use weir_storage::TimestampType;

    #[test]
    fn flush_and_write_caching_keys_map_to_the_log_and_partition() {
        let broker = BrokerConfig::default();
        let topic: BTreeMap<String, String> = [
            ("flush.messages", "1"),
            ("flush.ms", "250"),
            ("write.caching", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let c = log_config_for(&broker, &topic);
        assert_eq!((c.flush_messages, c.flush_ms), (1, 250));
        assert!(write_caching_for(&broker, &topic));
        assert!(!write_caching_for(&broker, &BTreeMap::new()));
        assert!(validate("flush.messages", "0").is_err());
        assert!(validate("flush.ms", "-1").is_err());
        assert!(validate("write.caching", "sometimes").is_err());
    }

    #[test]
    fn validate_accepts_kafka_values_and_rejects_others() {
        assert!(validate("cleanup.policy", "compact,delete").is_ok());
        assert!(validate("segment.bytes", "1048576").is_ok());
        assert!(validate("message.timestamp.type", "LogAppendTime").is_ok());
        assert_eq!(
            validate("segmnt.bytes", "1"),
            Err(TopicConfigError::UnknownKey {
                name: "segmnt.bytes".into()
            })
        );
        assert!(validate("segment.bytes", "10").is_err());
        assert!(validate("retention.ms", "soon").is_err());
        assert!(validate("cleanup.policy", "forever").is_err());
        assert!(validate("cleanup.policy", "").is_err());
        assert!(validate("min.cleanable.dirty.ratio", "0.01").is_ok());
        assert!(validate("min.cleanable.dirty.ratio", "1.5").is_err());
        assert!(validate("delete.retention.ms", "-1").is_err());
        assert!(validate("max.compaction.lag.ms", "0").is_err());
        assert!(validate("message.timestamp.after.max.ms", "-1").is_err());
        assert!(validate("message.timestamp.before.max.ms", "0").is_ok());
    }

    #[test]
    fn timestamp_window_keys_map_to_the_log_config() {
        let broker = BrokerConfig::from_pairs(vec![(
            "log.message.timestamp.before.max.ms".into(),
            "86400000".into(),
        )])
        .unwrap();
        let c = log_config_for(&broker, &BTreeMap::new());
        assert_eq!(
            (
                c.message_timestamp_before_max_ms,
                c.message_timestamp_after_max_ms
            ),
            (86_400_000, 3_600_000)
        );
        let topic: BTreeMap<String, String> = [("message.timestamp.after.max.ms", "5")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(
            log_config_for(&broker, &topic).message_timestamp_after_max_ms,
            5
        );
    }

    #[test]
    fn topic_overrides_broker_defaults() {
        let broker = BrokerConfig::default();
        let mut topic = BTreeMap::new();
        topic.insert("segment.bytes".to_string(), "2048".to_string());
        topic.insert(
            "message.timestamp.type".to_string(),
            "LogAppendTime".to_string(),
        );
        let c = log_config_for(&broker, &topic);
        assert_eq!(c.segment_bytes, 2048);
        assert_eq!(c.message_timestamp_type, TimestampType::LogAppendTime);
        assert_eq!(c.max_message_bytes, broker.message_max_bytes);
        assert_eq!(c.retention_ms, broker.log_retention_ms);
        assert_eq!(c.cleanup_policy, CleanupPolicy::default());
    }

    #[test]
    fn retention_keys_map_to_the_log_config() {
        let broker = BrokerConfig::from_pairs(vec![
            ("log.retention.bytes".into(), "100".into()),
            ("log.roll.hours".into(), "1".into()),
        ])
        .unwrap();
        let c = log_config_for(&broker, &BTreeMap::new());
        assert_eq!((c.retention_bytes, c.segment_ms), (100, 3_600_000));
        let topic: BTreeMap<String, String> = [
            ("retention.ms", "-1"),
            ("retention.bytes", "5242880"),
            ("segment.ms", "60000"),
            ("cleanup.policy", "compact"),
            ("min.cleanable.dirty.ratio", "0.1"),
            ("min.compaction.lag.ms", "5"),
            ("max.compaction.lag.ms", "600000"),
            ("delete.retention.ms", "100"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let c = log_config_for(&broker, &topic);
        assert_eq!(
            (c.retention_ms, c.retention_bytes, c.segment_ms),
            (-1, 5_242_880, 60_000)
        );
        assert_eq!(
            c.cleanup_policy,
            CleanupPolicy {
                delete: false,
                compact: true
            }
        );
        assert_eq!(
            (
                c.min_cleanable_dirty_ratio,
                c.min_compaction_lag_ms,
                c.max_compaction_lag_ms,
                c.delete_retention_ms
            ),
            (0.1, 5, 600_000, 100)
        );
        assert!(validate("retention.ms", "-2").is_err());
        assert!(validate("segment.ms", "0").is_err());
        assert!(validate("retention.bytes", "-1").is_ok());
    }

    #[test]
    fn every_numeric_key_has_a_bound_and_internal_segment_bytes_wins() {
        for d in TOPIC_CONFIGS.iter().chain(INTERNAL_TOPIC_CONFIGS) {
            let numeric = matches!(
                d.config_type,
                ConfigType::Short | ConfigType::Int | ConfigType::Long | ConfigType::Double
            );
            assert_eq!(
                numeric,
                crate::config_bounds::key_def(d.name).is_some(),
                "{}: numeric keys and bounds rows must match",
                d.name
            );
        }
        let topic: BTreeMap<String, String> = [
            ("segment.bytes", "1048576"),
            ("internal.segment.bytes", "4096"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            log_config_for(&BrokerConfig::default(), &topic).segment_bytes,
            4096
        );
        assert_eq!(
            validate("segment.bytes", "102400").unwrap_err().to_string(),
            "Invalid value 102400 for configuration segment.bytes: Value must be at least 1048576"
        );
        assert_eq!(
            validate("cleanup.policy", "forever").unwrap_err().to_string(),
            "Invalid value forever for configuration cleanup.policy: String must be one of: compact, delete"
        );
    }

    #[test]
    fn every_key_has_a_default() {
        let broker = BrokerConfig::default();
        for d in TOPIC_CONFIGS {
            let v = default_value(&broker, d.name);
            assert!(!v.is_empty(), "{} has no default", d.name);
            assert!(
                validate(d.name, &v).is_ok(),
                "{} default {v} invalid",
                d.name
            );
        }
    }
}
