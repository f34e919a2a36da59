//! IncrementalAlterConfigs (KIP-339) over raw frames, v0 and v1: SET,
//! DELETE, APPEND and SUBTRACT on topic configs, validate_only, the errors
//! Kafka answers, and that a change reaches the log (found by
//! `kafka-configs --alter` in the compatibility matrix, issue 5).

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
