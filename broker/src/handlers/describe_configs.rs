//! DescribeConfigs (key 32), v1-4: topic configs (explicit values and
//! broker-derived defaults) and this broker's static configuration, with
//! sources, synonyms (KIP-226), read-only flags, types and documentation
//! (KIP-569).
//!
//! A resource named more than once is answered once, at its first place,
//! with the union of the keys asked for (all of them if any occurrence asks
//! for all). Kafka's `ConfigHelper.describeConfigs` answers every
//! occurrence, so a 2 MB request naming the broker 300,000 times would be
//! answered with gigabytes; Weir bounds the answer by the resources that
//! exist (the Java admin client never sends duplicates: it keys resources
//! in a map).

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::str_bytes;
use crate::config::BrokerConfig;
use crate::context::BrokerContext;
use crate::topic_config::{
    default_value, ConfigSource, ConfigType, INTERNAL_TOPIC_CONFIGS, TOPIC_CONFIGS,
};

/// `ConfigResource.Type` of a topic.
pub const RESOURCE_TOPIC: i8 = 2;
/// `ConfigResource.Type` of a broker.
pub const RESOURCE_BROKER: i8 = 4;

/// Answers every requested resource.
pub fn handle(
    ctx: &BrokerContext,
    version: i16,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let image = ctx.metadata();
    let mut response = DescribeConfigsResponse::default();
    for resource in distinct_resources(request.resources) {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        let filter: Option<Vec<String>> = resource
            .configuration_keys
            .map(|keys| keys.iter().map(|k| k.to_string()).collect());
        let entries = match resource.resource_type {
            RESOURCE_TOPIC => match image.topic(&resource.resource_name) {
                Some(topic) => Ok(topic_config_entries(
                    &ctx.config,
                    &topic.configs,
                    filter.as_deref(),
                )),
                None => Err(ResponseError::UnknownTopicOrPartition.code()),
            },
            RESOURCE_BROKER => {
                let name = resource.resource_name.as_str();
                if name.is_empty() {
                    Ok(Vec::new())
                } else if name == ctx.node_id.to_string() {
                    Ok(broker_config_entries(&ctx.config, filter.as_deref()))
                } else {
                    Err(ResponseError::InvalidRequest.code())
                }
            }
            _ => Err(ResponseError::InvalidRequest.code()),
        };
        match entries {
            Ok(mut entries) => {
                for e in &mut entries {
                    if !request.include_synonyms || version < 1 {
                        e.synonyms.clear();
                    }
                    if !request.include_documentation {
                        e.documentation = None;
                    }
                }
                result.configs = entries;
            }
            Err(code) => {
                result.error_code = code;
                result.error_message = Some(str_bytes(format!(
                    "cannot describe resource type {} '{}'",
                    resource.resource_type, resource.resource_name
                )));
            }
        }
        response.results.push(result);
    }
    response
}

/// `resources` with each (type, name) once, at its first place; its
/// `configuration_keys` are the union of those of every occurrence, or
/// `None` (all keys) if any occurrence asks for all (`None` or empty).
fn distinct_resources(resources: Vec<DescribeConfigsResource>) -> Vec<DescribeConfigsResource> {
    let mut index_of: HashMap<(i8, StrBytes), usize> = HashMap::new();
    let mut out: Vec<DescribeConfigsResource> = Vec::new();
    for resource in resources {
        let key = (resource.resource_type, resource.resource_name.clone());
        let Some(&i) = index_of.get(&key) else {
            index_of.insert(key, out.len());
            out.push(resource);
            continue;
        };
        let first = &mut out[i];
        match (&mut first.configuration_keys, resource.configuration_keys) {
            (Some(keys), Some(more)) if !keys.is_empty() && !more.is_empty() => keys.extend(more),
            (keys, _) => *keys = None,
        }
    }
    for resource in &mut out {
        if let Some(keys) = &mut resource.configuration_keys {
            keys.sort_unstable();
            keys.dedup();
        }
    }
    out
}

fn entry(
    name: &str,
    value: String,
    source: ConfigSource,
    read_only: bool,
    config_type: ConfigType,
    doc: &str,
    synonyms: Vec<DescribeConfigsSynonym>,
) -> DescribeConfigsResourceResult {
    let mut e = DescribeConfigsResourceResult::default();
    e.name = str_bytes(name);
    e.value = Some(str_bytes(value));
    e.config_source = source as i8;
    e.read_only = read_only;
    e.is_sensitive = false;
    e.config_type = config_type as i8;
    e.documentation = Some(str_bytes(doc));
    e.synonyms = synonyms;
    e
}

fn synonym(name: &str, value: String, source: ConfigSource) -> DescribeConfigsSynonym {
    let mut s = DescribeConfigsSynonym::default();
    s.name = str_bytes(name);
    s.value = Some(str_bytes(value));
    s.source = source as i8;
    s
}

fn wanted(filter: Option<&[String]>, name: &str) -> bool {
    filter.map(|f| f.iter().any(|k| k == name)).unwrap_or(true)
}

/// Every topic config with its effective value: the topic's own setting
/// (DYNAMIC_TOPIC_CONFIG), else the broker's (STATIC_BROKER_CONFIG when set
/// in server.properties, DEFAULT_CONFIG otherwise). Synonyms list the topic
/// value then the broker value. Internal keys (`internal.segment.bytes`)
/// are listed only when set on the topic, as Kafka's `ConfigHelper` does.
pub fn topic_config_entries(
    broker: &BrokerConfig,
    explicit: &BTreeMap<String, String>,
    filter: Option<&[String]>,
) -> Vec<DescribeConfigsResourceResult> {
    TOPIC_CONFIGS
        .iter()
        .chain(
            INTERNAL_TOPIC_CONFIGS
                .iter()
                .filter(|d| explicit.contains_key(d.name)),
        )
        .filter(|d| wanted(filter, d.name))
        .map(|d| {
            let broker_source = match d.broker_synonym {
                Some(k) if broker.explicit.contains_key(k) => ConfigSource::StaticBrokerConfig,
                _ => ConfigSource::DefaultConfig,
            };
            let broker_value = default_value(broker, d.name);
            let mut synonyms = Vec::new();
            let (value, source) = match explicit.get(d.name) {
                Some(v) => {
                    synonyms.push(synonym(d.name, v.clone(), ConfigSource::DynamicTopicConfig));
                    (v.clone(), ConfigSource::DynamicTopicConfig)
                }
                None => (broker_value.clone(), broker_source),
            };
            if let Some(k) = d.broker_synonym {
                synonyms.push(synonym(k, broker_value, broker_source));
            }
            entry(d.name, value, source, false, d.config_type, d.doc, synonyms)
        })
        .collect()
}

/// This broker's static configuration, all read-only (dynamic broker
/// configs are not served yet).
pub fn broker_config_entries(
    c: &BrokerConfig,
    filter: Option<&[String]>,
) -> Vec<DescribeConfigsResourceResult> {
    let listeners = |ls: &[crate::config::Listener]| {
        ls.iter()
            .map(|l| format!("{}://{}:{}", l.name, l.host, l.port))
            .collect::<Vec<_>>()
            .join(",")
    };
    let timestamp_type = default_value(c, "message.timestamp.type");
    let rows: Vec<(&str, String, ConfigType, &str)> = vec![
        (
            "node.id",
            c.node_id.to_string(),
            ConfigType::Int,
            "this node's id",
        ),
        (
            "process.roles",
            c.process_roles.clone(),
            ConfigType::List,
            "broker and/or controller",
        ),
        (
            "listeners",
            listeners(&c.listeners),
            ConfigType::String,
            "addresses the broker listens on",
        ),
        (
            "advertised.listeners",
            c.advertised_listeners
                .as_deref()
                .map(listeners)
                .unwrap_or_else(|| listeners(&c.listeners)),
            ConfigType::String,
            "addresses given to clients",
        ),
        (
            "controller.quorum.voters",
            c.controller_quorum_voters.clone(),
            ConfigType::List,
            "metadata quorum voters",
        ),
        (
            "log.dirs",
            c.log_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(","),
            ConfigType::String,
            "directories holding partition logs",
        ),
        (
            "num.partitions",
            c.num_partitions.to_string(),
            ConfigType::Int,
            "partitions of auto-created topics",
        ),
        (
            "default.replication.factor",
            c.default_replication_factor.to_string(),
            ConfigType::Int,
            "replication factor of auto-created topics",
        ),
        (
            "min.insync.replicas",
            c.min_insync_replicas.to_string(),
            ConfigType::Int,
            "replicas needed for acks=all",
        ),
        // ---- Replication (Kafka's ReplicationConfigs).
        (
            "num.replica.fetchers",
            c.replication.num_replica_fetchers.to_string(),
            ConfigType::Int,
            "fetcher tasks per source broker",
        ),
        (
            "replica.fetch.max.bytes",
            c.replication.replica_fetch_max_bytes.to_string(),
            ConfigType::Int,
            "bytes per partition of a follower Fetch",
        ),
        (
            "replica.fetch.response.max.bytes",
            c.replication.replica_fetch_response_max_bytes.to_string(),
            ConfigType::Int,
            "bytes of a follower Fetch response",
        ),
        (
            "replica.fetch.wait.max.ms",
            c.replication.replica_fetch_wait_max_ms.to_string(),
            ConfigType::Int,
            "how long a follower Fetch waits for data (ms)",
        ),
        (
            "replica.fetch.min.bytes",
            c.replication.replica_fetch_min_bytes.to_string(),
            ConfigType::Int,
            "bytes a follower Fetch waits for",
        ),
        (
            "replica.fetch.backoff.ms",
            c.replication.replica_fetch_backoff_ms.to_string(),
            ConfigType::Int,
            "pause after a failed follower Fetch (ms)",
        ),
        (
            "replica.lag.time.max.ms",
            c.replication.replica_lag_time_max_ms.to_string(),
            ConfigType::Long,
            "a follower not caught up this long leaves the ISR (ms)",
        ),
        (
            "replica.high.watermark.checkpoint.interval.ms",
            c.replication
                .high_watermark_checkpoint_interval_ms
                .to_string(),
            ConfigType::Long,
            "high watermark checkpoint interval (ms)",
        ),
        // ---- end of the replication keys.
        // ---- The offsets topic (Kafka's GroupCoordinatorConfig).
        (
            "offsets.topic.num.partitions",
            c.offsets_topic_num_partitions.to_string(),
            ConfigType::Int,
            "partitions of __consumer_offsets",
        ),
        (
            "offsets.topic.replication.factor",
            c.offsets_topic_replication_factor.to_string(),
            ConfigType::Short,
            "replication factor of __consumer_offsets",
        ),
        (
            "offsets.topic.segment.bytes",
            c.offsets_topic_segment_bytes.to_string(),
            ConfigType::Int,
            "segment file size of __consumer_offsets (bytes)",
        ),
        // ---- end of the offsets topic keys.
        (
            "auto.create.topics.enable",
            c.auto_create_topics_enable.to_string(),
            ConfigType::Boolean,
            "create topics on metadata requests",
        ),
        (
            "log.segment.bytes",
            c.log_segment_bytes.to_string(),
            ConfigType::Int,
            "segment file size (bytes)",
        ),
        (
            "log.index.size.max.bytes",
            c.log_index_size_max_bytes.to_string(),
            ConfigType::Int,
            "offset index size (bytes)",
        ),
        (
            "log.index.interval.bytes",
            c.log_index_interval_bytes.to_string(),
            ConfigType::Int,
            "bytes between index entries",
        ),
        (
            "message.max.bytes",
            c.message_max_bytes.to_string(),
            ConfigType::Int,
            "largest record batch (bytes)",
        ),
        (
            "log.message.timestamp.type",
            timestamp_type,
            ConfigType::String,
            "CreateTime or LogAppendTime",
        ),
        (
            "log.message.timestamp.before.max.ms",
            c.log_message_timestamp_before_max_ms.to_string(),
            ConfigType::Long,
            "how far a CreateTime timestamp may lie in the past (ms)",
        ),
        (
            "log.message.timestamp.after.max.ms",
            c.log_message_timestamp_after_max_ms.to_string(),
            ConfigType::Long,
            "how far a CreateTime timestamp may lie in the future (ms)",
        ),
        (
            "log.retention.ms",
            c.log_retention_ms.to_string(),
            ConfigType::Long,
            "segment age before deletion (ms)",
        ),
        (
            "log.retention.bytes",
            c.log_retention_bytes.to_string(),
            ConfigType::Long,
            "partition size before deletion (bytes)",
        ),
        (
            "log.roll.ms",
            c.log_roll_ms.to_string(),
            ConfigType::Long,
            "active segment age before it rolls (ms)",
        ),
        (
            "log.retention.check.interval.ms",
            c.log_retention_check_interval_ms.to_string(),
            ConfigType::Long,
            "how often retention runs (ms)",
        ),
        (
            "num.recovery.threads.per.data.dir",
            c.num_recovery_threads_per_data_dir.to_string(),
            ConfigType::Int,
            "threads per log directory for log recovery at start (accepted; KIP-1030 default)",
        ),
        (
            "producer.id.expiration.ms",
            c.producer_id_expiration_ms.to_string(),
            ConfigType::Int,
            "idle time after which an idempotent producer's state is dropped (ms)",
        ),
        (
            "socket.request.max.bytes",
            c.socket_request_max_bytes.to_string(),
            ConfigType::Int,
            "largest request (bytes)",
        ),
        (
            "connections.max.idle.ms",
            c.connections_max_idle_ms.to_string(),
            ConfigType::Long,
            "idle connection timeout (ms)",
        ),
        // ---- Memory and connection limits (issue 15).
        (
            "queued.max.request.bytes",
            c.queued_max_request_bytes.to_string(),
            ConfigType::Long,
            "request bytes held across all connections (bytes, Weir default 200 MiB)",
        ),
        (
            "queued.max.response.bytes",
            c.queued_max_response_bytes.to_string(),
            ConfigType::Long,
            "unsent response bytes across all connections (bytes, Weir)",
        ),
        (
            "queued.max.response.bytes.per.connection",
            c.queued_max_response_bytes_per_connection.to_string(),
            ConfigType::Long,
            "unsent response bytes of one connection (bytes, Weir)",
        ),
        (
            "fetch.max.bytes",
            c.fetch_max_bytes.to_string(),
            ConfigType::Int,
            "largest Fetch response (bytes)",
        ),
        (
            "max.connections",
            c.max_connections.to_string(),
            ConfigType::Int,
            "open connections",
        ),
        (
            "max.connections.per.ip",
            c.max_connections_per_ip.to_string(),
            ConfigType::Int,
            "open connections from one address",
        ),
        (
            "max.connections.per.ip.overrides",
            {
                let mut pairs: Vec<String> = c
                    .max_connections_per_ip_overrides
                    .iter()
                    .map(|(ip, n)| format!("{ip}:{n}"))
                    .collect();
                pairs.sort();
                pairs.join(",")
            },
            ConfigType::String,
            "per-address connection limits (ip:count,...)",
        ),
        // ---- end of the memory and connection limits.
        (
            "metrics.listener",
            c.metrics_listener
                .map(|a| a.to_string())
                .unwrap_or_default(),
            ConfigType::String,
            "Prometheus endpoint address (Weir)",
        ),
    ];
    rows.into_iter()
        .filter(|(name, ..)| wanted(filter, name))
        .map(|(name, value, config_type, doc)| {
            let explicit = c.explicit.contains_key(name);
            if !explicit && NULL_DEFAULT_BROKER_KEYS.contains(&name) {
                let mut e = entry(
                    name,
                    String::new(),
                    ConfigSource::DefaultConfig,
                    true,
                    config_type,
                    doc,
                    Vec::new(),
                );
                e.value = None;
                return e;
            }
            let source = if explicit {
                ConfigSource::StaticBrokerConfig
            } else {
                ConfigSource::DefaultConfig
            };
            let synonyms = vec![synonym(name, value.clone(), source)];
            entry(name, value, source, true, config_type, doc, synonyms)
        })
        .collect()
}

/// Broker keys whose Kafka 4.1 default is null (`LogConfig`'s
/// `SERVER_CONFIG_DEF` defines them with no default; the effective value
/// comes from their `.hours` / `.minutes` forms): unless set themselves,
/// Kafka's `ConfigHelper` reports them with a null value, DEFAULT_CONFIG
/// and no synonyms (its synonym list starts at the key itself).
const NULL_DEFAULT_BROKER_KEYS: &[&str] = &["log.retention.ms", "log.roll.ms"];

#[cfg(test)]
mod tests {
    use super::*;

    fn value(rows: &[DescribeConfigsResourceResult], name: &str) -> Option<String> {
        rows.iter()
            .find(|r| r.name.as_str() == name)
            .and_then(|r| r.value.as_ref())
            .map(|v| v.to_string())
    }

    /// KIP-937: the broker keys and the topic keys of the timestamp window
    /// are described with Kafka 4's defaults (after.max.ms one hour,
    /// KIP-1030) and a topic's own value.
    #[test]
    fn timestamp_window_keys_are_described() {
        let broker = BrokerConfig::default();
        let rows = broker_config_entries(&broker, None);
        assert_eq!(
            value(&rows, "log.message.timestamp.after.max.ms").as_deref(),
            Some("3600000")
        );
        assert_eq!(
            value(&rows, "log.message.timestamp.before.max.ms").as_deref(),
            Some("9223372036854775807")
        );
        let explicit = BTreeMap::from([(
            "message.timestamp.before.max.ms".to_string(),
            "5".to_string(),
        )]);
        let rows = topic_config_entries(&broker, &explicit, None);
        assert_eq!(
            value(&rows, "message.timestamp.before.max.ms").as_deref(),
            Some("5")
        );
        assert_eq!(
            value(&rows, "message.timestamp.after.max.ms").as_deref(),
            Some("3600000")
        );
    }

    #[test]
    fn retention_and_roll_ms_are_null_unless_set_as_in_kafka() {
        let keys = ["log.retention.ms".to_string(), "log.roll.ms".to_string()];
        let defaults = broker_config_entries(&BrokerConfig::default(), Some(&keys));
        assert_eq!(defaults.len(), 2);
        for e in &defaults {
            assert_eq!(e.value, None, "{}", e.name.as_str());
            assert_eq!(e.config_source, ConfigSource::DefaultConfig as i8);
            assert!(e.synonyms.is_empty());
        }
        let set = BrokerConfig::from_pairs(vec![
            ("log.retention.ms".into(), "1234".into()),
            ("log.roll.hours".into(), "2".into()),
        ])
        .unwrap();
        let entries = broker_config_entries(&set, Some(&keys));
        assert_eq!(
            entries[0].value.as_ref().map(|v| v.to_string()).as_deref(),
            Some("1234")
        );
        assert_eq!(
            entries[0].config_source,
            ConfigSource::StaticBrokerConfig as i8
        );
        // Only the .hours form was set: Kafka still reports log.roll.ms null.
        assert_eq!(entries[1].value, None);
    }
}
