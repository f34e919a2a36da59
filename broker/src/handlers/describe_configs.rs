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
    auth: &crate::authorizer::RequestAuth<'_>,
) -> DescribeConfigsResponse {
    let image = ctx.metadata();
    let mut response = DescribeConfigsResponse::default();
    for resource in distinct_resources(request.resources) {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        // Kafka's handleDescribeConfigsRequest: DescribeConfigs on the
        // topic, group or cluster.
        if let Some(error) = crate::authorizer::config_resource_refused(
            auth,
            weir_controller::acl::AclOperation::DescribeConfigs,
            resource.resource_type,
            &resource.resource_name,
        ) {
            result.error_code = error.code();
            result.error_message = Some(str_bytes(
                weir_protocol_compat::error_response::kafka_default_message(error.code())
                    .unwrap_or_default(),
            ));
            response.results.push(result);
            continue;
        }
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

/// This broker's static configuration: every key of
/// [`crate::broker_keys::BROKER_KEYS`], all read-only (dynamic broker
/// configs are not served yet), STATIC_BROKER_CONFIG when set in
/// server.properties or by `--override`, DEFAULT_CONFIG otherwise. A key
/// whose Kafka default is null (`log.retention.ms`, `log.roll.ms`,
/// `advertised.listeners`, ...) is reported, unless set, with a null value,
/// DEFAULT_CONFIG and no synonyms, as Kafka's `ConfigHelper` does (its
/// synonym list starts at the key itself).
pub fn broker_config_entries(
    c: &BrokerConfig,
    filter: Option<&[String]>,
) -> Vec<DescribeConfigsResourceResult> {
    crate::broker_keys::BROKER_KEYS
        .iter()
        .filter(|k| wanted(filter, k.name))
        .map(|k| {
            let source = if c.explicit.contains_key(k.name) {
                ConfigSource::StaticBrokerConfig
            } else {
                ConfigSource::DefaultConfig
            };
            // Kafka's ConfigHelper: a password is sensitive and never sent.
            let sensitive = k.config_type == ConfigType::Password;
            let value = k.value(c).filter(|_| !sensitive);
            let synonyms = value
                .iter()
                .map(|v| synonym(k.name, v.clone(), source))
                .collect();
            let mut e = entry(
                k.name,
                value.clone().unwrap_or_default(),
                source,
                true,
                k.config_type,
                k.doc,
                synonyms,
            );
            if value.is_none() {
                e.value = None;
            }
            e.is_sensitive = sensitive;
            e
        })
        .collect()
}

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

    /// A PASSWORD key (Kafka's ConfigHelper) is described as sensitive,
    /// with a null value and no synonym, set or not.
    #[test]
    fn a_password_key_is_sensitive_and_never_sent() {
        let set = BrokerConfig::from_pairs(vec![(
            "ssl.keystore.password".to_string(),
            "hunter2".to_string(),
        )])
        .unwrap();
        for config in [BrokerConfig::default(), set] {
            let filter = ["ssl.keystore.password".to_string()];
            let rows = broker_config_entries(&config, Some(&filter));
            assert_eq!(rows.len(), 1);
            assert!(rows[0].is_sensitive);
            assert_eq!(rows[0].value, None);
            assert!(rows[0].synonyms.is_empty());
        }
    }

    /// Every row of `BROKER_KEYS` is described with the row's type and doc,
    /// read-only: unset, with its default (null for a null default, without
    /// synonyms) from DEFAULT_CONFIG; set, with the value as the
    /// configuration holds it from STATIC_BROKER_CONFIG.
    #[test]
    fn every_broker_key_is_described_from_its_row() {
        let defaults = broker_config_entries(&BrokerConfig::default(), None);
        assert_eq!(defaults.len(), crate::broker_keys::BROKER_KEYS.len());
        for (k, e) in crate::broker_keys::BROKER_KEYS.iter().zip(&defaults) {
            assert_eq!(e.name.as_str(), k.name);
            assert_eq!(e.config_type, k.config_type as i8, "{}", k.name);
            assert_eq!(e.documentation.as_deref(), Some(k.doc), "{}", k.name);
            assert!(e.read_only, "{}", k.name);
            assert_eq!(e.config_source, ConfigSource::DefaultConfig as i8);
            assert_eq!(e.value.as_deref(), k.default, "{}", k.name);
            assert_eq!(e.synonyms.is_empty(), k.default.is_none(), "{}", k.name);
        }
        let set = BrokerConfig::from_pairs(vec![
            ("advertised.listeners".into(), "PLAINTEXT://h:1".into()),
            ("log.retention.hours".into(), " 5 ".into()),
            ("num.io.threads".into(), "2".into()),
            ("broker.rack".into(), "r1".into()),
        ])
        .unwrap();
        let keys: Vec<String> = [
            "advertised.listeners",
            "log.retention.hours",
            "num.io.threads",
            "broker.rack",
            "log.retention.ms",
        ]
        .map(String::from)
        .to_vec();
        let described: Vec<(String, Option<String>, i8)> = broker_config_entries(&set, Some(&keys))
            .into_iter()
            .map(|e| {
                (
                    e.name.to_string(),
                    e.value.map(|v| v.to_string()),
                    e.config_source,
                )
            })
            .collect();
        let stat = ConfigSource::StaticBrokerConfig as i8;
        let dflt = ConfigSource::DefaultConfig as i8;
        let row = |k: &str, v: Option<&str>, s| (k.to_string(), v.map(str::to_string), s);
        assert_eq!(
            described,
            vec![
                row("advertised.listeners", Some("PLAINTEXT://h:1"), stat),
                row("broker.rack", Some("r1"), stat),
                row("log.retention.ms", None, dflt),
                row("log.retention.hours", Some("5"), stat),
                row("num.io.threads", Some("2"), stat),
            ]
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
