//! Metadata and offset lookup cases: null versus empty topic lists and
//! lookups by topic id (C09), ListOffsets special timestamps (C10).

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ListOffsetsRequest, MetadataRequest, MetadataResponse, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use uuid::Uuid;
use weir_integration_tests::records::{self, NewRecord};
use weir_integration_tests::RawClient;

use crate::support::{self, error_code};

fn metadata(client: &mut RawClient, version: i16, request: &MetadataRequest) -> MetadataResponse {
    client
        .send(request, version)
        .unwrap_or_else(|e| panic!("Metadata v{version}: {e}"))
}

fn topic_names(response: &MetadataResponse) -> Vec<String> {
    let mut names: Vec<String> = response
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    names.sort();
    names
}

fn by_name(name: &str) -> MetadataRequestTopic {
    MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_owned()))))
        .with_topic_id(Uuid::nil())
}

/// C09: Metadata v1+ with topics=null lists every topic and an empty list
/// none, but both carry the brokers, the controller id and (v2+) the cluster
/// id; kcat -L lists them; v10+ lookups by topic id answer with name and id
/// or UNKNOWN_TOPIC_ID echoing the id; the all-zero id means "no id"; topics
/// are auto-created only when allow_auto_topic_creation is true.
#[test]
fn c09_metadata_null_vs_empty_topics() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let a = support::ensure_topic(&mut client, &versions, "c09-a");
    let b = support::ensure_topic(&mut client, &versions, "c09-b");
    let metadata_versions =
        support::common_versions::<MetadataRequest>(&versions, ApiKey::Metadata);
    assert!(
        metadata_versions.contains(&1) && metadata_versions.contains(&12),
        "{metadata_versions:?}"
    );

    for &version in metadata_versions.iter().filter(|v| **v >= 1) {
        let all = metadata(
            &mut client,
            version,
            &MetadataRequest::default().with_topics(None),
        );
        assert_eq!(
            topic_names(&all),
            vec!["c09-a", "c09-b"],
            "v{version} topics=null lists every topic"
        );

        let none = metadata(
            &mut client,
            version,
            &MetadataRequest::default().with_topics(Some(vec![])),
        );
        assert!(
            none.topics.is_empty(),
            "v{version} topics=[] lists no topic: {:?}",
            none.topics
        );
        for response in [&all, &none] {
            assert!(
                response
                    .brokers
                    .iter()
                    .any(|b| b.node_id.0 == broker.node_id() && b.port == i32::from(broker.port())),
                "v{version} lists this broker: {:?}",
                response.brokers
            );
            assert_eq!(
                response.controller_id.0,
                broker.node_id(),
                "v{version} controller id"
            );
            if version >= 2 {
                assert_eq!(
                    response.cluster_id.as_ref().map(|c| c.to_string()),
                    Some(broker.cluster_id().to_owned()),
                    "v{version} cluster id"
                );
            }
        }
    }

    let listing = support::kcat(&broker.bootstrap(), &["-L"], None).stdout_text();
    assert!(
        listing.contains(&format!(
            "broker {} at 127.0.0.1:{}",
            broker.node_id(),
            broker.port()
        )),
        "kcat -L lists the broker:\n{listing}"
    );
    assert!(
        listing.contains("topic \"c09-a\"") && listing.contains("topic \"c09-b\""),
        "{listing}"
    );

    // Lookups by topic id only (name null).
    let unknown = Uuid::new_v4();
    for &version in metadata_versions.iter().filter(|v| **v >= 10) {
        for known in [&a, &b] {
            let request =
                MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
                    .with_name(None)
                    .with_topic_id(known.id)]));
            let response = metadata(&mut client, version, &request);
            assert_eq!(
                response.topics.len(),
                1,
                "v{version} by id answers one topic"
            );
            let topic = &response.topics[0];
            assert_eq!(topic.topic_id, known.id, "v{version} echoes the topic id");
            match topic.error_code {
                error_code::NONE => assert_eq!(
                    topic.name.as_ref().map(|n| n.0.to_string()),
                    Some(known.name.clone()),
                    "v{version} by id answers with the name"
                ),
                error_code::UNKNOWN_TOPIC_ID => {}
                // Kafka answers id lookups only from v12 (KIP-516) and
                // rejects them on v10-11 as INVALID_REQUEST.
                error_code::INVALID_REQUEST if version < 12 => {}
                other => panic!("v{version} by id: error {other}, expected 0 or UNKNOWN_TOPIC_ID"),
            }
        }
        let request =
            MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
                .with_name(None)
                .with_topic_id(unknown)]));
        let response = metadata(&mut client, version, &request);
        assert_eq!(
            response.topics.len(),
            1,
            "v{version} unknown id answers one topic"
        );
        let expected =
            if version < 12 && response.topics[0].error_code == error_code::INVALID_REQUEST {
                error_code::INVALID_REQUEST
            } else {
                error_code::UNKNOWN_TOPIC_ID
            };
        assert_eq!(
            response.topics[0].error_code, expected,
            "v{version} unknown id"
        );
        assert_eq!(
            response.topics[0].topic_id, unknown,
            "v{version} echoes the unknown id"
        );

        // By name with the all-zero id: the zero id means "no id".
        let response = metadata(
            &mut client,
            version,
            &MetadataRequest::default().with_topics(Some(vec![by_name("c09-a")])),
        );
        assert_eq!(response.topics.len(), 1);
        assert_eq!(
            response.topics[0].error_code,
            error_code::NONE,
            "v{version} by name"
        );
        assert_eq!(
            response.topics[0].topic_id, a.id,
            "v{version} answers the real id"
        );
        assert_ne!(a.id, Uuid::nil(), "topics have non-zero ids");
    }

    // Auto-creation only when asked for.
    let newest = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let refused = metadata(
        &mut client,
        newest,
        &MetadataRequest::default()
            .with_topics(Some(vec![by_name("c09-not-created")]))
            .with_allow_auto_topic_creation(false),
    );
    assert_eq!(refused.topics.len(), 1);
    assert_eq!(
        refused.topics[0].error_code,
        error_code::UNKNOWN_TOPIC_OR_PARTITION
    );
    let all = metadata(
        &mut client,
        newest,
        &MetadataRequest::default().with_topics(None),
    );
    assert_eq!(
        topic_names(&all),
        vec!["c09-a", "c09-b"],
        "nothing was created"
    );
    let created = support::ensure_topic(&mut client, &versions, "c09-not-created");
    assert_eq!(created.partitions, 1);
}

/// C10: records with CreateTime 100, 300, 200 at offsets 0-2. ListOffsets
/// v7+: -3 (max timestamp, KIP-734) -> offset 1 / 300; -1 -> 3; -2 -> 0;
/// 250 -> offset 1. -3 below v7 is an error, never a literal timestamp.
#[test]
fn c10_list_offsets_special_timestamps() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let topic = support::ensure_topic(&mut client, &versions, "c10-timestamps");
    let batch = records::encode_batch(
        &[
            NewRecord::value("t100", 100),
            NewRecord::value("t300", 300),
            NewRecord::value("t200", 200),
        ],
        Compression::None,
    )
    .expect("encode");
    support::produce_ok(&mut client, produce_version, &topic, 0, batch);

    let list_versions =
        support::common_versions::<ListOffsetsRequest>(&versions, ApiKey::ListOffsets);
    assert!(
        list_versions.contains(&7),
        "ListOffsets v7 is advertised: {list_versions:?}"
    );
    for &version in list_versions.iter().filter(|v| **v >= 7) {
        let max = support::list_offset(&mut client, version, &topic, 0, -3);
        assert_eq!(
            (max.error_code, max.offset, max.timestamp),
            (0, 1, 300),
            "v{version} -3"
        );
        let latest = support::list_offset(&mut client, version, &topic, 0, -1);
        assert_eq!((latest.error_code, latest.offset), (0, 3), "v{version} -1");
        let earliest = support::list_offset(&mut client, version, &topic, 0, -2);
        assert_eq!(
            (earliest.error_code, earliest.offset),
            (0, 0),
            "v{version} -2"
        );
        let at_250 = support::list_offset(&mut client, version, &topic, 0, 250);
        assert_eq!(
            (at_250.error_code, at_250.offset, at_250.timestamp),
            (0, 1, 300),
            "v{version} 250"
        );
    }
    for &version in list_versions.iter().filter(|v| **v < 7) {
        // Below v7, -3 has no meaning; matching it as a literal timestamp
        // would answer offset 0.
        let mut client = support::connect(&broker);
        let result = client.send(
            &ListOffsetsRequest::default()
                .with_replica_id((-1).into())
                .with_topics(vec![kafka_protocol::messages::list_offsets_request::ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.name.clone())))
                    .with_partitions(vec![
                        kafka_protocol::messages::list_offsets_request::ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(-3),
                    ])]),
            version,
        );
        match result {
            Ok(response) => {
                let partition = &response.topics[0].partitions[0];
                assert_ne!(
                    partition.error_code,
                    error_code::NONE,
                    "ListOffsets v{version} with -3 must fail, got offset {} ts {}",
                    partition.offset,
                    partition.timestamp
                );
            }
            // Closing the connection is also a rejection.
            Err(weir_integration_tests::HarnessError::ConnectionClosed) => {}
            Err(other) => panic!("ListOffsets v{version} with -3: {other}"),
        }
    }
}

/// A topic's authorized operations as Kafka without an authorizer answers
/// them: READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS
/// ALTER_CONFIGS.
const TOPIC_OPERATIONS: i32 =
    1 << 3 | 1 << 4 | 1 << 5 | 1 << 6 | 1 << 7 | 1 << 8 | 1 << 10 | 1 << 11;

/// Metadata v8+ and DescribeCluster answer the authorized operations when
/// asked, as Kafka without an authorizer does: every operation the resource
/// type supports (`AclEntry.supportedOperations`) as a bit field of ACL
/// operation codes; Int.MIN when not asked. kafka-python's admin client
/// decodes the field and failed on Int.MIN's bit 31 (found by its own
/// integration tests, issue 5).
#[test]
fn authorized_operations_are_every_supported_operation_when_requested() {
    use kafka_protocol::messages::DescribeClusterRequest;
    // CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS
    // IDEMPOTENT_WRITE
    const CLUSTER_OPERATIONS: i32 = 1 << 5 | 1 << 7 | 1 << 8 | 1 << 9 | 1 << 10 | 1 << 11 | 1 << 12;
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    support::ensure_topic(&mut client, &versions, "authorized-operations");
    for version in 8..=12 {
        for include in [false, true] {
            let mut request = MetadataRequest::default()
                .with_topics(Some(vec![by_name("authorized-operations")]))
                .with_include_topic_authorized_operations(include);
            if version <= 10 {
                request = request.with_include_cluster_authorized_operations(include);
            }
            let response = metadata(&mut client, version, &request);
            let expected = if include { TOPIC_OPERATIONS } else { i32::MIN };
            assert_eq!(
                response.topics[0].topic_authorized_operations, expected,
                "topic, v{version}, include {include}"
            );
            if version <= 10 {
                let expected = if include {
                    CLUSTER_OPERATIONS
                } else {
                    i32::MIN
                };
                assert_eq!(
                    response.cluster_authorized_operations, expected,
                    "cluster, v{version}, include {include}"
                );
            }
        }
    }
    for version in 0..=1 {
        for include in [false, true] {
            let response: kafka_protocol::messages::DescribeClusterResponse = client
                .send(
                    &DescribeClusterRequest::default()
                        .with_include_cluster_authorized_operations(include)
                        .with_endpoint_type(1),
                    version,
                )
                .unwrap();
            let expected = if include {
                CLUSTER_OPERATIONS
            } else {
                i32::MIN
            };
            assert_eq!(
                response.cluster_authorized_operations, expected,
                "DescribeCluster v{version}, include {include}"
            );
        }
    }
}

/// Metadata v8+ answers the requested authorized operations also for a topic
/// named in the request that does not exist (UNKNOWN_TOPIC_OR_PARTITION), as
/// Kafka's handleTopicMetadataRequest sets them on every topic looked up by
/// name; only an unknown topic id keeps Int.MIN. kafka-python's
/// delete_records on a missing topic failed on Int.MIN's bit 31 (its
/// test_delete_records_with_errors, issue 5).
#[test]
fn authorized_operations_of_unknown_topics_when_requested() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    for version in 8..=12 {
        for include in [false, true] {
            let request = MetadataRequest::default()
                .with_topics(Some(vec![by_name("no-such-topic-authorized-operations")]))
                .with_allow_auto_topic_creation(false)
                .with_include_topic_authorized_operations(include);
            let response = metadata(&mut client, version, &request);
            assert_eq!(
                response.topics[0].error_code,
                error_code::UNKNOWN_TOPIC_OR_PARTITION,
                "v{version}"
            );
            let expected = if include { TOPIC_OPERATIONS } else { i32::MIN };
            assert_eq!(
                response.topics[0].topic_authorized_operations, expected,
                "unknown topic, v{version}, include {include}"
            );
        }
    }
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(None)
            .with_topic_id(Uuid::from_u128(
                0x5eed_0000_0000_0000_0000_0000_0000_0001,
            ))]))
        .with_include_topic_authorized_operations(true);
    let response = metadata(&mut client, 12, &request);
    assert_eq!(response.topics[0].error_code, error_code::UNKNOWN_TOPIC_ID);
    assert_eq!(response.topics[0].topic_authorized_operations, i32::MIN);
}

/// `broker.rack` is sent at registration and Metadata (v1+) shows it.
#[test]
fn broker_rack_is_shown_in_metadata() {
    let broker = weir_integration_tests::TestBroker::builder()
        .override_config("broker.rack", "rack-a")
        .start()
        .expect("starting weir");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let response = metadata(
        &mut client,
        version,
        &MetadataRequest::default().with_topics(Some(vec![])),
    );
    let racks: Vec<Option<String>> = response
        .brokers
        .iter()
        .map(|b| b.rack.as_ref().map(|r| r.to_string()))
        .collect();
    assert_eq!(racks, vec![Some("rack-a".to_string())]);
}
