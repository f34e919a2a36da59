//! IncrementalAlterConfigs (KIP-339) over raw frames, v0 and v1: SET,
//! DELETE, APPEND and SUBTRACT on topic configs, validate_only, the errors
//! Kafka answers, and that a change reaches the log (found by
//! `kafka-configs --alter` in the compatibility matrix, issue 5); and
//! legacy AlterConfigs v0-2, which replaces a topic's whole config set.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    ApiKey, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, ProduceRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use weir_integration_tests::records::{self, NewRecord};
use weir_integration_tests::RawClient;

use crate::support::{self, error_code};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;
const MESSAGE_TOO_LARGE: i16 = 10;
const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;
const DYNAMIC_TOPIC_CONFIG: i8 = 1;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn op(name: &str, operation: i8, value: Option<&str>) -> AlterableConfig {
    AlterableConfig::default()
        .with_name(text(name))
        .with_config_operation(operation)
        .with_value(value.map(text))
}

fn resource(resource_type: i8, name: &str, ops: Vec<AlterableConfig>) -> AlterConfigsResource {
    AlterConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(text(name))
        .with_configs(ops)
}

fn alter(
    client: &mut RawClient,
    version: i16,
    resources: Vec<AlterConfigsResource>,
    validate_only: bool,
) -> IncrementalAlterConfigsResponse {
    client
        .send(
            &IncrementalAlterConfigsRequest::default()
                .with_resources(resources)
                .with_validate_only(validate_only),
            version,
        )
        .unwrap_or_else(|e| panic!("IncrementalAlterConfigs v{version}: {e}"))
}

/// The topic's configs whose source is DYNAMIC_TOPIC_CONFIG.
fn dynamic_configs(client: &mut RawClient, topic: &str) -> BTreeMap<String, String> {
    let response = client
        .send(
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(TOPIC)
                    .with_resource_name(text(topic))
                    .with_configuration_keys(None),
            ]),
            4,
        )
        .expect("DescribeConfigs");
    response.results[0]
        .configs
        .iter()
        .filter(|c| c.config_source == DYNAMIC_TOPIC_CONFIG)
        .map(|c| {
            (
                c.name.to_string(),
                c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
            )
        })
        .collect()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn incremental_alter_configs_changes_topic_configs_as_kafka() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    for version in 0..=1 {
        let name = format!("alter-v{version}");
        let topic = support::ensure_topic(&mut client, &versions, &name);

        // SET two keys, then DELETE one and APPEND/SUBTRACT the list key.
        let r = alter(
            &mut client,
            version,
            vec![resource(
                TOPIC,
                &name,
                vec![
                    op("retention.ms", SET, Some("86400000")),
                    op("max.message.bytes", SET, Some("2048")),
                ],
            )],
            false,
        );
        assert_eq!(r.responses[0].error_code, error_code::NONE, "{r:?}");
        // Kafka answers a success with a null message.
        assert_eq!(r.responses[0].error_message, None);
        assert_eq!(r.responses[0].resource_name.as_str(), name);
        assert_eq!(
            dynamic_configs(&mut client, &name),
            map(&[("max.message.bytes", "2048"), ("retention.ms", "86400000")])
        );

        // The change reached the log: a batch over the new
        // max.message.bytes is refused, a small one is stored.
        let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
        let big: Bytes =
            records::encode_batch(&[NewRecord::value(vec![b'x'; 4096], 1)], Compression::None)
                .unwrap();
        let refused = support::produce(&mut client, produce_version, &topic, 0, big);
        assert_eq!(refused.error_code, MESSAGE_TOO_LARGE);

        let r = alter(
            &mut client,
            version,
            vec![resource(
                TOPIC,
                &name,
                vec![
                    op("max.message.bytes", DELETE, None),
                    op("cleanup.policy", APPEND, Some("compact")),
                ],
            )],
            false,
        );
        assert_eq!(r.responses[0].error_code, error_code::NONE, "{r:?}");
        assert_eq!(
            dynamic_configs(&mut client, &name),
            map(&[
                ("cleanup.policy", "delete,compact"),
                ("retention.ms", "86400000")
            ])
        );
        let r = alter(
            &mut client,
            version,
            vec![resource(
                TOPIC,
                &name,
                vec![op("cleanup.policy", SUBTRACT, Some("delete"))],
            )],
            false,
        );
        assert_eq!(r.responses[0].error_code, error_code::NONE, "{r:?}");
        assert_eq!(
            dynamic_configs(&mut client, &name)["cleanup.policy"],
            "compact"
        );

        // validate_only checks and changes nothing.
        let before = dynamic_configs(&mut client, &name);
        let r = alter(
            &mut client,
            version,
            vec![resource(
                TOPIC,
                &name,
                vec![op("retention.ms", SET, Some("1000"))],
            )],
            true,
        );
        assert_eq!(r.responses[0].error_code, error_code::NONE);
        assert_eq!(dynamic_configs(&mut client, &name), before);

        // Errors, each for its own resource only.
        let r = alter(
            &mut client,
            version,
            vec![
                resource(
                    TOPIC,
                    "no-such-topic",
                    vec![op("retention.ms", SET, Some("1"))],
                ),
                resource(TOPIC, &name, vec![op("no.such.key", SET, Some("1"))]),
                resource(BROKER, "1", vec![op("log.retention.ms", SET, Some("1"))]),
                resource(BROKER_LOGGER, "1", vec![op("kafka", SET, Some("DEBUG"))]),
            ],
            false,
        );
        let codes: Vec<i16> = r.responses.iter().map(|r| r.error_code).collect();
        assert_eq!(
            codes,
            vec![
                error_code::UNKNOWN_TOPIC_OR_PARTITION,
                INVALID_CONFIG,
                INVALID_CONFIG,
                INVALID_REQUEST
            ]
        );
        let invalid = |ops| {
            let mut client = support::connect(&broker);
            alter(
                &mut client,
                version,
                vec![resource(TOPIC, &name, ops)],
                false,
            )
            .responses[0]
                .error_code
        };
        assert_eq!(
            invalid(vec![op("retention.ms", SET, Some("soon"))]),
            INVALID_CONFIG
        );
        assert_eq!(
            invalid(vec![op("retention.ms", APPEND, Some("1"))]),
            INVALID_CONFIG
        );
        assert_eq!(
            invalid(vec![op("retention.ms", 9, Some("1"))]),
            INVALID_REQUEST
        );
        assert_eq!(
            invalid(vec![op("retention.ms", SET, None)]),
            INVALID_REQUEST
        );
        assert_eq!(
            invalid(vec![
                op("retention.ms", SET, Some("1")),
                op("retention.ms", DELETE, None)
            ]),
            INVALID_REQUEST
        );
        let twice = alter(
            &mut client,
            version,
            vec![
                resource(TOPIC, &name, vec![op("retention.ms", SET, Some("5"))]),
                resource(TOPIC, &name, vec![op("retention.ms", SET, Some("6"))]),
            ],
            false,
        );
        assert!(twice
            .responses
            .iter()
            .all(|r| r.error_code == INVALID_REQUEST));
        // Nothing of the refused requests was applied.
        assert_eq!(dynamic_configs(&mut client, &name), before);
    }
}

/// Legacy AlterConfigs (key 33): `(type, name, [(key, value)])`.
fn legacy(
    resource_type: i8,
    name: &str,
    configs: &[(&str, Option<&str>)],
) -> kafka_protocol::messages::alter_configs_request::AlterConfigsResource {
    use kafka_protocol::messages::alter_configs_request;
    alter_configs_request::AlterConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(text(name))
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    alter_configs_request::AlterableConfig::default()
                        .with_name(text(k))
                        .with_value(v.map(text))
                })
                .collect(),
        )
}

/// Sends legacy AlterConfigs; `(resource name, error code, message)` per result.
fn legacy_alter(
    client: &mut RawClient,
    version: i16,
    resources: Vec<kafka_protocol::messages::alter_configs_request::AlterConfigsResource>,
    validate_only: bool,
) -> Vec<(String, i16, Option<String>)> {
    let response: kafka_protocol::messages::AlterConfigsResponse = client
        .send(
            &kafka_protocol::messages::AlterConfigsRequest::default()
                .with_resources(resources)
                .with_validate_only(validate_only),
            version,
        )
        .unwrap_or_else(|e| panic!("AlterConfigs v{version}: {e}"));
    response
        .responses
        .iter()
        .map(|r| {
            (
                r.resource_name.to_string(),
                r.error_code,
                r.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

/// Legacy AlterConfigs v0-2 replaces a topic's whole set of dynamic configs
/// (keys not given go back to their defaults), reaches the log, honours
/// validate_only, and answers Kafka 4's errors (messages checked against
/// Kafka 4.1.2) per resource.
#[test]
fn legacy_alter_configs_replaces_topic_configs_as_kafka() {
    let broker = support::start_broker();
    let node = broker.node_id().to_string();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let advertised =
        support::advertised(&versions, ApiKey::AlterConfigs).expect("AlterConfigs is advertised");
    assert_eq!((advertised.min_version, advertised.max_version), (0, 2));
    let ok = |name: &str| (name.to_string(), error_code::NONE, None);
    for version in 0..=2 {
        let name = format!("legacy-v{version}");
        let topic = support::create_topic(
            &mut client,
            &versions,
            &name,
            &[("retention.ms", "86400000"), ("cleanup.policy", "compact")],
        );

        // The given set replaces the old one: retention.ms and
        // cleanup.policy are gone, max.message.bytes reaches the log.
        let r = legacy_alter(
            &mut client,
            version,
            vec![legacy(
                TOPIC,
                &name,
                &[
                    ("max.message.bytes", Some("2048")),
                    ("segment.ms", Some("600000")),
                ],
            )],
            false,
        );
        assert_eq!(r, vec![ok(&name)]);
        assert_eq!(
            dynamic_configs(&mut client, &name),
            map(&[("max.message.bytes", "2048"), ("segment.ms", "600000")])
        );
        let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
        let big: Bytes =
            records::encode_batch(&[NewRecord::value(vec![b'x'; 4096], 1)], Compression::None)
                .unwrap();
        let refused = support::produce(&mut client, produce_version, &topic, 0, big.clone());
        assert_eq!(refused.error_code, MESSAGE_TOO_LARGE);

        // validate_only checks and changes nothing.
        let r = legacy_alter(
            &mut client,
            version,
            vec![legacy(TOPIC, &name, &[("retention.ms", Some("1000"))])],
            true,
        );
        assert_eq!(r, vec![ok(&name)]);
        assert_eq!(dynamic_configs(&mut client, &name).len(), 2);

        // Errors, each for its own resource only, in request order.
        let r = legacy_alter(
            &mut client,
            version,
            vec![
                legacy(TOPIC, "no-such-topic", &[("retention.ms", Some("1"))]),
                legacy(TOPIC, &name, &[("no.such.key", Some("1"))]),
                legacy(BROKER, &node, &[("log.retention.ms", Some("1"))]),
                legacy(BROKER, "7", &[("log.retention.ms", Some("1"))]),
                legacy(BROKER, "", &[]),
                legacy(BROKER_LOGGER, &node, &[("kafka", Some("DEBUG"))]),
            ],
            false,
        );
        let codes: Vec<(String, i16)> = r.iter().map(|(n, c, _)| (n.clone(), *c)).collect();
        assert_eq!(
            codes,
            vec![
                (
                    "no-such-topic".to_string(),
                    error_code::UNKNOWN_TOPIC_OR_PARTITION
                ),
                (name.clone(), INVALID_CONFIG),
                (node.clone(), INVALID_CONFIG),
                ("7".to_string(), INVALID_REQUEST),
                (String::new(), error_code::NONE),
                (node.clone(), INVALID_REQUEST),
            ],
            "{r:?}"
        );
        assert_eq!(
            r[0].2.as_deref(),
            Some("The topic 'no-such-topic' does not exist.")
        );
        assert_eq!(
            r[1].2.as_deref(),
            Some("Unknown topic config name: no.such.key")
        );
        assert_eq!(
            r[3].2,
            Some(format!(
                "Unexpected broker id, expected {node}, but received 7"
            ))
        );
        assert_eq!(r[5].2.as_deref(), Some("Unknown resource type 8"));
        let one = |client: &mut RawClient, configs: &[(&str, Option<&str>)]| {
            legacy_alter(client, version, vec![legacy(TOPIC, &name, configs)], false).remove(0)
        };
        assert_eq!(
            one(&mut client, &[("retention.ms", Some("soon"))]).1,
            INVALID_CONFIG
        );
        assert_eq!(
            one(&mut client, &[("retention.ms", None), ("segment.ms", None)]),
            (
                name.clone(),
                INVALID_REQUEST,
                Some("Null value not supported for : retention.ms, segment.ms".to_string())
            )
        );
        assert_eq!(
            one(
                &mut client,
                &[("retention.ms", Some("1")), ("retention.ms", Some("2"))]
            ),
            (
                name.clone(),
                INVALID_REQUEST,
                Some("Error due to duplicate config keys".to_string())
            )
        );
        let twice = legacy_alter(
            &mut client,
            version,
            vec![legacy(TOPIC, &name, &[]), legacy(TOPIC, &name, &[])],
            false,
        );
        assert_eq!(
            twice,
            vec![
                (
                    name.clone(),
                    INVALID_REQUEST,
                    Some("Each resource must appear at most once.".to_string())
                );
                2
            ]
        );
        // Nothing of the refused requests was applied.
        assert_eq!(
            dynamic_configs(&mut client, &name),
            map(&[("max.message.bytes", "2048"), ("segment.ms", "600000")])
        );

        // An empty set removes every dynamic config; the log follows.
        assert_eq!(
            legacy_alter(&mut client, version, vec![legacy(TOPIC, &name, &[])], false),
            vec![ok(&name)]
        );
        assert!(dynamic_configs(&mut client, &name).is_empty());
        let stored = support::produce(&mut client, produce_version, &topic, 0, big);
        assert_eq!(stored.error_code, error_code::NONE);
    }
}
