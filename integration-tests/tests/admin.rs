//! Admin and control-plane APIs against Kafka's behaviour, over the raw
//! client at every version the broker advertises (its ApiVersions table
//! decides the lowest and highest): CreateTopics, DeleteTopics,
//! DescribeConfigs, DescribeCluster, OffsetForLeaderEpoch, InitProducerId,
//! `connections.max.idle.ms`, and the Java AdminClient end to end.
//!
//! Expected values come from Kafka's protocol guide and its KRaft controller
//! (`ReplicationControlManager`, `ConfigurationControlManager`), KIP-226
//! (config sources and synonyms), KIP-464 (broker defaults for -1), KIP-516
//! (topic ids), KIP-569 (config types and documentation), KIP-700
//! (DescribeCluster) and KIP-101/KIP-279/KIP-320 (OffsetForLeaderEpoch).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::EpochEndOffset;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest, FetchRequest,
    InitProducerIdRequest, ListOffsetsRequest, MetadataRequest, MetadataResponse,
    OffsetForLeaderEpochRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::{Message, StrBytes};
use uuid::Uuid;
use weir_integration_tests::records;
use weir_integration_tests::{clients, HarnessError, RawClient, TestBroker};

use crate::support::{self, error_code, FetchSpec, TopicInfo, CLIENT_TIMEOUT};

/// Kafka error codes these tests expect (protocol guide, "Error Codes").
mod code {
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const INVALID_PARTITIONS: i16 = 37;
    pub const INVALID_REPLICATION_FACTOR: i16 = 38;
    pub const INVALID_CONFIG: i16 = 40;
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
}

/// `ConfigResource.Type` values (DescribeConfigs).
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

/// `ConfigSource` values (KIP-226).
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

/// `ConfigType` values (KIP-569).
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_LIST: i8 = 7;

/// Topic config keys every Kafka broker describes for a topic, with Kafka's
/// default value where the test broker keeps Kafka's default.
const TOPIC_CONFIG_KEYS: &[(&str, Option<&str>)] = &[
    ("cleanup.policy", Some("delete")),
    ("compression.type", Some("producer")),
    ("delete.retention.ms", Some("86400000")),
    ("file.delete.delay.ms", Some("60000")),
    ("flush.messages", Some("9223372036854775807")),
    ("flush.ms", Some("9223372036854775807")),
    ("index.interval.bytes", Some("4096")),
    ("max.message.bytes", Some("1048588")),
    ("message.timestamp.type", Some("CreateTime")),
    ("min.cleanable.dirty.ratio", Some("0.5")),
    ("min.compaction.lag.ms", Some("0")),
    ("min.insync.replicas", Some("1")),
    ("retention.bytes", Some("-1")),
    ("retention.ms", Some("604800000")),
    ("segment.bytes", Some("1073741824")),
    ("segment.index.bytes", Some("10485760")),
    ("segment.ms", Some("604800000")),
    ("unclean.leader.election.enable", Some("false")),
];

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// Every version of `key` the broker advertises, oldest first, after
/// checking that the `kafka-protocol` crate speaks all of them (so the
/// lowest and highest advertised versions are really exercised).
#[track_caller]
fn advertised_versions<R: Message>(versions: &ApiVersionsResponse, key: ApiKey) -> Vec<i16> {
    let range =
        support::advertised(versions, key).unwrap_or_else(|| panic!("{key:?} is not advertised"));
    assert!(
        R::VERSIONS.min <= range.min_version && range.max_version <= R::VERSIONS.max,
        "{key:?}: broker advertises {}..={}, the crate speaks {}",
        range.min_version,
        range.max_version,
        R::VERSIONS
    );
    (range.min_version..=range.max_version).collect()
}

fn creatable(
    name: &str,
    num_partitions: i32,
    replication_factor: i16,
    configs: &[(&str, &str)],
) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(num_partitions)
        .with_replication_factor(replication_factor)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(text(k))
                        .with_value(Some(text(v)))
                })
                .collect(),
        )
}

#[track_caller]
fn create_topics(
    client: &mut RawClient,
    version: i16,
    topics: Vec<CreatableTopic>,
    validate_only: bool,
) -> CreateTopicsResponse {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only)
        .with_topics(topics);
    client
        .send(&request, version)
        .unwrap_or_else(|e| panic!("CreateTopics v{version}: {e}"))
}

/// The results for `name`, in response order.
fn results_for<'a>(
    response: &'a CreateTopicsResponse,
    name: &str,
) -> Vec<&'a CreatableTopicResult> {
    response
        .topics
        .iter()
        .filter(|t| t.name.to_string() == name)
        .collect()
}

/// The single result for `name`.
#[track_caller]
fn result_for<'a>(
    response: &'a CreateTopicsResponse,
    name: &str,
    version: i16,
) -> &'a CreatableTopicResult {
    let found = results_for(response, name);
    assert_eq!(
        found.len(),
        1,
        "CreateTopics v{version}: expected one result for {name}, got {:?}",
        response.topics
    );
    found[0]
}

/// Metadata at the newest common version (v10+ for topic ids) for `name`
/// without auto-creation.
#[track_caller]
fn metadata_for(
    client: &mut RawClient,
    versions: &ApiVersionsResponse,
    name: &str,
) -> MetadataResponse {
    let version = support::newest::<MetadataRequest>(versions, ApiKey::Metadata);
    assert!(version >= 10, "Metadata v{version} has no topic ids");
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic_name(name)))
        ]))
        .with_allow_auto_topic_creation(false);
    client
        .send(&request, version)
        .unwrap_or_else(|e| panic!("Metadata v{version}: {e}"))
}

/// The topic entry of [`metadata_for`].
#[track_caller]
fn describe_topic(
    client: &mut RawClient,
    versions: &ApiVersionsResponse,
    name: &str,
) -> MetadataResponseTopic {
    let response = metadata_for(client, versions, name);
    assert_eq!(
        response.topics.len(),
        1,
        "Metadata for {name}: {response:?}"
    );
    response.topics[0].clone()
}

/// Requires Metadata to report `name` as UNKNOWN_TOPIC_OR_PARTITION.
#[track_caller]
fn assert_topic_absent(client: &mut RawClient, versions: &ApiVersionsResponse, name: &str) {
    let topic = describe_topic(client, versions, name);
    assert_eq!(
        topic.error_code,
        error_code::UNKNOWN_TOPIC_OR_PARTITION,
        "Metadata must not know {name}: {topic:?}"
    );
}

/// Requires Metadata to report `name` with `partitions` partitions, each led
/// by node 1 with replicas and ISR [1]; returns it as a [`TopicInfo`].
#[track_caller]
fn assert_topic_ready(
    client: &mut RawClient,
    versions: &ApiVersionsResponse,
    name: &str,
    partitions: usize,
) -> TopicInfo {
    let topic = describe_topic(client, versions, name);
    assert_eq!(
        topic.error_code,
        error_code::NONE,
        "Metadata for {name}: {topic:?}"
    );
    assert_eq!(
        topic.partitions.len(),
        partitions,
        "partitions of {name}: {topic:?}"
    );
    let mut indexes: Vec<i32> = topic.partitions.iter().map(|p| p.partition_index).collect();
    indexes.sort_unstable();
    assert_eq!(indexes, (0..partitions as i32).collect::<Vec<_>>());
    for p in &topic.partitions {
        assert_eq!(
            p.error_code,
            error_code::NONE,
            "{name}/{}",
            p.partition_index
        );
        assert_eq!(p.leader_id.0, 1, "{name}/{} leader", p.partition_index);
        assert_eq!(
            p.replica_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
            vec![1]
        );
        assert_eq!(p.isr_nodes.iter().map(|b| b.0).collect::<Vec<_>>(), vec![1]);
    }
    assert!(!topic.topic_id.is_nil(), "{name} has a topic id");
    TopicInfo {
        name: name.to_owned(),
        id: topic.topic_id,
        partitions,
    }
}

/// Creates `name` at the newest CreateTopics version and returns it once
/// Metadata shows it.
#[track_caller]
fn create_ready(
    client: &mut RawClient,
    versions: &ApiVersionsResponse,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> TopicInfo {
    let version = support::newest::<CreateTopicsRequest>(versions, ApiKey::CreateTopics);
    let response = create_topics(
        client,
        version,
        vec![creatable(name, partitions, 1, configs)],
        false,
    );
    let result = result_for(&response, name, version);
    assert_eq!(
        result.error_code,
        error_code::NONE,
        "creating {name}: {:?}",
        result.error_message
    );
    assert_topic_ready(client, versions, name, partitions as usize)
}

/// Checks the v5+ config echo of CreateTopics: every topic key once, the
/// explicit ones with their value and DYNAMIC_TOPIC_CONFIG, the others with
/// Kafka's default and DEFAULT_CONFIG.
#[track_caller]
fn assert_created_configs(result: &CreatableTopicResult, explicit: &[(&str, &str)], version: i16) {
    let configs = result
        .configs
        .as_ref()
        .unwrap_or_else(|| panic!("CreateTopics v{version} must echo configs"));
    let mut by_name = BTreeMap::new();
    for c in configs {
        assert!(
            by_name.insert(c.name.to_string(), c).is_none(),
            "CreateTopics v{version}: {} listed twice",
            c.name
        );
        assert!(!c.is_sensitive, "{} is not sensitive", c.name);
        assert!(!c.read_only, "topic config {} is not read-only", c.name);
    }
    for &(key, default) in TOPIC_CONFIG_KEYS {
        let c = by_name
            .get(key)
            .unwrap_or_else(|| panic!("CreateTopics v{version} lacks config {key}"));
        match explicit.iter().find(|(k, _)| *k == key) {
            Some((_, value)) => {
                assert_eq!(c.value.as_deref(), Some(*value), "{key}");
                assert_eq!(c.config_source, DYNAMIC_TOPIC_CONFIG, "{key} source");
            }
            None => {
                assert_eq!(c.value.as_deref(), default, "{key} default");
                assert_eq!(c.config_source, DEFAULT_CONFIG, "{key} source");
            }
        }
    }
}

/// CreateTopics at every advertised version on a broker started with
/// `num.partitions=3`: -1 partitions and replication factor take the broker
/// defaults (3 and 1, KIP-464, v4+); an explicit count is kept; v5+ echoes
/// partitions, replication factor and every topic config (the explicit
/// `retention.ms` as DYNAMIC_TOPIC_CONFIG, the rest DEFAULT_CONFIG with
/// Kafka's default values); v7's topic id is the one Metadata reports.
#[test]
fn create_topics_defaults_explicit_partitions_and_config_echo() {
    let broker = support::start_broker_with_partitions(3);
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let explicit = [("retention.ms", "3600000")];
    for version in advertised_versions::<CreateTopicsRequest>(&versions, ApiKey::CreateTopics) {
        let defaults = format!("defaults-v{version}");
        let two = format!("explicit-v{version}");
        let mut topics = vec![creatable(&two, 2, 1, &explicit)];
        if version >= 4 {
            topics.push(creatable(&defaults, -1, -1, &[]));
        }
        let response = create_topics(&mut client, version, topics, false);
        assert_eq!(response.topics.len(), if version >= 4 { 2 } else { 1 });

        let result = result_for(&response, &two, version);
        assert_eq!(
            result.error_code,
            error_code::NONE,
            "{:?}",
            result.error_message
        );
        // Kafka answers a success with a null message (v1+ carry one).
        assert_eq!(result.error_message, None, "v{version}");
        let info = assert_topic_ready(&mut client, &versions, &two, 2);
        if version >= 5 {
            assert_eq!(result.num_partitions, 2, "v{version}");
            assert_eq!(result.replication_factor, 1, "v{version}");
            assert_created_configs(result, &explicit, version);
        }
        if version >= 7 {
            assert_eq!(result.topic_id, info.id, "v7 topic id equals Metadata's");
        }

        if version >= 4 {
            let result = result_for(&response, &defaults, version);
            assert_eq!(
                result.error_code,
                error_code::NONE,
                "{:?}",
                result.error_message
            );
            let info = assert_topic_ready(&mut client, &versions, &defaults, 3);
            if version >= 5 {
                assert_eq!(
                    result.num_partitions, 3,
                    "num.partitions default, v{version}"
                );
                assert_eq!(result.replication_factor, 1, "v{version}");
                assert_created_configs(result, &[], version);
            }
            if version >= 7 {
                assert_eq!(result.topic_id, info.id, "v7 topic id equals Metadata's");
            }
        }
    }
}

/// CreateTopics with validate_only at every advertised version answers NONE
/// (v5+ with the partition count it would use) but creates nothing: Metadata
/// then reports UNKNOWN_TOPIC_OR_PARTITION, and a real creation of the same
/// name afterwards succeeds.
#[test]
fn create_topics_validate_only_creates_nothing() {
    let broker = support::start_broker_with_partitions(3);
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    for version in advertised_versions::<CreateTopicsRequest>(&versions, ApiKey::CreateTopics) {
        let name = format!("validate-only-v{version}");
        let response = create_topics(
            &mut client,
            version,
            vec![creatable(&name, 4, 1, &[("cleanup.policy", "compact")])],
            true,
        );
        let result = result_for(&response, &name, version);
        assert_eq!(
            result.error_code,
            error_code::NONE,
            "{:?}",
            result.error_message
        );
        if version >= 5 {
            assert_eq!(result.num_partitions, 4, "v{version}");
            assert_eq!(result.replication_factor, 1, "v{version}");
        }
        assert_topic_absent(&mut client, &versions, &name);
        // Validating must not have reserved the name either.
        let response = create_topics(
            &mut client,
            version,
            vec![creatable(&name, 4, 1, &[])],
            false,
        );
        assert_eq!(
            result_for(&response, &name, version).error_code,
            error_code::NONE
        );
        assert_topic_ready(&mut client, &versions, &name, 4);
    }
}

/// CreateTopics with `timeout_ms` 0 or less, at every advertised version:
/// Kafka 4's controller queues the request with a deadline that has
/// already passed, so every topic gets REQUEST_TIMED_OUT (7) and nothing is
/// created (checked against Kafka 4.1.2), validate_only or not; a request
/// made only of a duplicated name is refused before it is queued
/// (INVALID_REQUEST).
#[test]
fn create_topics_with_no_time_left_times_out_and_creates_nothing() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    for version in advertised_versions::<CreateTopicsRequest>(&versions, ApiKey::CreateTopics) {
        for (timeout_ms, validate_only) in [(0, false), (-1, false), (0, true)] {
            let name = format!("no-time-v{version}-{}-{validate_only}", -timeout_ms);
            let request = CreateTopicsRequest::default()
                .with_timeout_ms(timeout_ms)
                .with_validate_only(validate_only)
                .with_topics(vec![creatable(&name, 1, 1, &[])]);
            let response = client.send(&request, version).expect("CreateTopics");
            let result = result_for(&response, &name, version);
            assert_eq!(
                result.error_code,
                error_code::REQUEST_TIMED_OUT,
                "v{version} timeout {timeout_ms}"
            );
            assert_topic_absent(&mut client, &versions, &name);
        }
        let dup = format!("no-time-dup-v{version}");
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(0)
            .with_topics(vec![creatable(&dup, 1, 1, &[]), creatable(&dup, 1, 1, &[])]);
        let response = client.send(&request, version).expect("CreateTopics");
        for result in results_for(&response, &dup) {
            assert_eq!(result.error_code, error_code::INVALID_REQUEST, "v{version}");
        }
        assert_topic_absent(&mut client, &versions, &dup);
    }
}

/// CreateTopics errors at every advertised version, all in one request so
/// each topic is judged on its own: an existing name gets
/// TOPIC_ALREADY_EXISTS (36), replication factor 2 on one node
/// INVALID_REPLICATION_FACTOR (38), 0 partitions INVALID_PARTITIONS (37), an
/// unknown config key INVALID_CONFIG (40), illegal names ("bad name", "..")
/// INVALID_TOPIC_EXCEPTION (17), a name given twice INVALID_REQUEST (42) on
/// every result for it; none of the failed topics exist afterwards while
/// the valid topic of the same request is created.
#[test]
fn create_topics_errors() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    create_ready(&mut client, &versions, "already-there", 1, &[]);
    for version in advertised_versions::<CreateTopicsRequest>(&versions, ApiKey::CreateTopics) {
        let rf2 = format!("rf2-v{version}");
        let zero = format!("zero-partitions-v{version}");
        let bad_config = format!("bad-config-v{version}");
        let twice = format!("twice-v{version}");
        let good = format!("good-v{version}");
        let response = create_topics(
            &mut client,
            version,
            vec![
                creatable("already-there", 1, 1, &[]),
                creatable(&rf2, 1, 2, &[]),
                creatable(&zero, 0, 1, &[]),
                creatable(&bad_config, 1, 1, &[("no.such.config", "1")]),
                creatable("bad name", 1, 1, &[]),
                creatable("..", 1, 1, &[]),
                creatable(&twice, 1, 1, &[]),
                creatable(&good, 1, 1, &[]),
                creatable(&twice, 2, 1, &[]),
            ],
            false,
        );
        let expect = |name: &str, code: i16| {
            let result = result_for(&response, name, version);
            assert_eq!(
                result.error_code, code,
                "CreateTopics v{version} {name:?}: {:?}",
                result.error_message
            );
        };
        expect("already-there", code::TOPIC_ALREADY_EXISTS);
        expect(&rf2, code::INVALID_REPLICATION_FACTOR);
        expect(&zero, code::INVALID_PARTITIONS);
        expect(&bad_config, code::INVALID_CONFIG);
        expect("bad name", code::INVALID_TOPIC_EXCEPTION);
        expect("..", code::INVALID_TOPIC_EXCEPTION);
        expect(&good, error_code::NONE);
        let dup = results_for(&response, &twice);
        assert!(
            !dup.is_empty(),
            "CreateTopics v{version}: no result for {twice}"
        );
        for r in dup {
            assert_eq!(
                r.error_code,
                error_code::INVALID_REQUEST,
                "CreateTopics v{version} duplicate {twice}: {:?}",
                r.error_message
            );
        }
        for name in [&rf2, &zero, &bad_config, &twice] {
            assert_topic_absent(&mut client, &versions, name);
        }
        // Kafka's Metadata answers an illegal name with INVALID_TOPIC_EXCEPTION.
        let bad = describe_topic(&mut client, &versions, "bad name");
        assert_eq!(bad.error_code, code::INVALID_TOPIC_EXCEPTION, "{bad:?}");
        assert!(bad.partitions.is_empty());
        assert_topic_ready(&mut client, &versions, &good, 1);
        assert_topic_ready(&mut client, &versions, "already-there", 1);
    }
}

#[track_caller]
fn delete_topics(
    client: &mut RawClient,
    version: i16,
    request: DeleteTopicsRequest,
) -> Vec<DeletableTopicResult> {
    client
        .send(&request.with_timeout_ms(30_000), version)
        .unwrap_or_else(|e| panic!("DeleteTopics v{version}: {e}"))
        .responses
}

fn delete_by_name(name: &str) -> DeleteTopicsRequest {
    DeleteTopicsRequest::default().with_topic_names(vec![topic_name(name)])
}

fn delete_by_id(id: Uuid) -> DeleteTopicsRequest {
    DeleteTopicsRequest::default().with_topics(vec![DeleteTopicState::default()
        .with_name(None)
        .with_topic_id(id)])
}

/// Produces three records to partition 0 and checks they can be read.
#[track_caller]
fn produce_and_read(client: &mut RawClient, versions: &ApiVersionsResponse, topic: &TopicInfo) {
    let produce_version = support::newest::<ProduceRequest>(versions, ApiKey::Produce);
    let fetch_version = support::newest::<FetchRequest>(versions, ApiKey::Fetch);
    let base = support::produce_ok(
        client,
        produce_version,
        topic,
        0,
        records::plain_batch(&["a", "b", "c"], 1_000),
    );
    assert_eq!(base, 0);
    let read = support::fetch_records(client, fetch_version, topic, 0, 0);
    assert_eq!(records::decode_records(&read).expect("decode").len(), 3);
}

/// After `old` was deleted: Metadata does not know it, Fetch by name (v12)
/// answers UNKNOWN_TOPIC_OR_PARTITION and Fetch by the old id (v13+)
/// UNKNOWN_TOPIC_ID; recreating it gives a new topic id and an empty log.
#[track_caller]
fn assert_deleted_and_recreatable(
    client: &mut RawClient,
    versions: &ApiVersionsResponse,
    old: &TopicInfo,
) {
    assert_topic_absent(client, versions, &old.name);
    let fetch_versions = support::common_versions::<FetchRequest>(versions, ApiKey::Fetch);
    assert!(
        fetch_versions.contains(&12),
        "Fetch v12 (by name) is advertised"
    );
    let by_name = TopicInfo {
        id: Uuid::nil(),
        ..old.clone()
    };
    let partitions = support::fetch(client, &by_name, &FetchSpec::one(12, 0, 0));
    assert_eq!(
        partitions.get(&0).map(|p| p.error_code),
        Some(error_code::UNKNOWN_TOPIC_OR_PARTITION),
        "Fetch v12 of deleted {}: {partitions:?}",
        old.name
    );
    let newest_fetch = support::newest::<FetchRequest>(versions, ApiKey::Fetch);
    assert!(newest_fetch >= 13);
    let partitions = support::fetch(client, old, &FetchSpec::one(newest_fetch, 0, 0));
    assert_eq!(
        partitions.get(&0).map(|p| p.error_code),
        Some(error_code::UNKNOWN_TOPIC_ID),
        "Fetch v{newest_fetch} of deleted {} by id: {partitions:?}",
        old.name
    );

    let new = create_ready(client, versions, &old.name, 1, &[]);
    assert_ne!(new.id, old.id, "a recreated topic gets a new topic id");
    let list_version = support::newest::<ListOffsetsRequest>(versions, ApiKey::ListOffsets);
    for timestamp in [-2, -1] {
        let offsets = support::list_offset(client, list_version, &new, 0, timestamp);
        assert_eq!(offsets.error_code, error_code::NONE);
        assert_eq!(
            offsets.offset, 0,
            "recreated {} is empty (ts {timestamp})",
            new.name
        );
    }
    let read = support::fetch_records(client, newest_fetch, &new, 0, 0);
    assert!(
        read.is_empty(),
        "recreated {} serves no old records",
        new.name
    );
}

/// DeleteTopics by name at every advertised version before v6 (and by name
/// at v6): the response names the topic with NONE, the topic disappears
/// from Metadata, its records can no longer be fetched by name or id, and
/// recreating it yields a new topic id and an empty log; an unknown name is
/// UNKNOWN_TOPIC_OR_PARTITION (3).
#[test]
fn delete_topics_by_name() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    for version in advertised_versions::<DeleteTopicsRequest>(&versions, ApiKey::DeleteTopics) {
        let name = format!("delete-by-name-v{version}");
        let topic = create_ready(&mut client, &versions, &name, 1, &[]);
        produce_and_read(&mut client, &versions, &topic);
        let request = if version >= 6 {
            DeleteTopicsRequest::default().with_topics(vec![
                DeleteTopicState::default().with_name(Some(topic_name(&name)))
            ])
        } else {
            delete_by_name(&name)
        };
        let results = delete_topics(&mut client, version, request);
        assert_eq!(results.len(), 1, "DeleteTopics v{version}: {results:?}");
        assert_eq!(
            results[0].error_code,
            error_code::NONE,
            "{:?}",
            results[0].error_message
        );
        assert_eq!(
            results[0].name.as_ref().map(|n| n.to_string()),
            Some(name.clone())
        );
        if version >= 6 {
            assert_eq!(results[0].topic_id, topic.id, "v6 reports the deleted id");
        }
        assert_deleted_and_recreatable(&mut client, &versions, &topic);

        let request = if version >= 6 {
            DeleteTopicsRequest::default().with_topics(vec![
                DeleteTopicState::default().with_name(Some(topic_name("never-created")))
            ])
        } else {
            delete_by_name("never-created")
        };
        let results = delete_topics(&mut client, version, request);
        assert_eq!(results.len(), 1);
        assert_eq!(
            results[0].error_code,
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            "DeleteTopics v{version} of an unknown name"
        );
    }
}

/// DeleteTopics v6 by topic id (KIP-516): the response carries the id and
/// the name, the topic disappears, its data is unreadable, recreating gives
/// a new id and an empty log; an unknown id is UNKNOWN_TOPIC_ID (100), and
/// the same stale id again after deletion also is.
#[test]
fn delete_topics_by_id() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let version = support::newest::<DeleteTopicsRequest>(&versions, ApiKey::DeleteTopics);
    assert!(
        version >= 6,
        "DeleteTopics v6 (by id) is advertised, got v{version}"
    );
    let topic = create_ready(&mut client, &versions, "delete-by-id", 1, &[]);
    produce_and_read(&mut client, &versions, &topic);

    let results = delete_topics(&mut client, version, delete_by_id(topic.id));
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(
        results[0].error_code,
        error_code::NONE,
        "{:?}",
        results[0].error_message
    );
    assert_eq!(results[0].topic_id, topic.id);
    assert_eq!(
        results[0].name.as_ref().map(|n| n.to_string()).as_deref(),
        Some("delete-by-id")
    );
    assert_deleted_and_recreatable(&mut client, &versions, &topic);

    for id in [Uuid::from_u128(0x1234_5678), topic.id] {
        let results = delete_topics(&mut client, version, delete_by_id(id));
        assert_eq!(results.len(), 1);
        assert_eq!(
            results[0].error_code,
            error_code::UNKNOWN_TOPIC_ID,
            "id {id}"
        );
        assert_eq!(results[0].topic_id, id);
    }
}

#[track_caller]
fn describe_configs(
    client: &mut RawClient,
    version: i16,
    resource_type: i8,
    name: &str,
    keys: Option<&[&str]>,
    include_synonyms: bool,
    include_documentation: bool,
) -> DescribeConfigsResult {
    let request = DescribeConfigsRequest::default()
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(text(name))
            .with_configuration_keys(
                keys.map(|k| k.iter().map(|s| text(s)).collect()),
            )])
        .with_include_synonyms(include_synonyms)
        .with_include_documentation(include_documentation && version >= 3);
    let response = client
        .send(&request, version)
        .unwrap_or_else(|e| panic!("DescribeConfigs v{version}: {e}"));
    assert_eq!(
        response.results.len(),
        1,
        "DescribeConfigs v{version}: {response:?}"
    );
    let result = response.results[0].clone();
    assert_eq!(result.resource_type, resource_type);
    assert_eq!(result.resource_name.as_str(), name);
    result
}

#[track_caller]
fn configs_by_name(
    result: &DescribeConfigsResult,
    version: i16,
) -> BTreeMap<String, DescribeConfigsResourceResult> {
    assert_eq!(
        result.error_code,
        error_code::NONE,
        "DescribeConfigs v{version} {}: {:?}",
        result.resource_name.as_str(),
        result.error_message
    );
    let mut out = BTreeMap::new();
    for c in &result.configs {
        assert!(
            out.insert(c.name.to_string(), c.clone()).is_none(),
            "DescribeConfigs v{version}: {} listed twice",
            c.name.as_str()
        );
    }
    out
}

/// DescribeConfigs v1..=max for a topic (type 2) created with
/// `retention.ms=3600000` on a broker started with
/// `--override log.segment.bytes=1048576`: every topic config is listed once
/// with a value and read_only=false; `retention.ms` is DYNAMIC_TOPIC_CONFIG,
/// `segment.bytes` is 1048576 from STATIC_BROKER_CONFIG, the rest are
/// Kafka's defaults with DEFAULT_CONFIG; v3+ gives config types; synonyms
/// appear only with include_synonyms (topic value first, then the broker
/// key), documentation only with include_documentation; configuration_keys
/// restricts the answer; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
#[test]
fn describe_configs_topic() {
    let broker = TestBroker::builder()
        .override_config("log.segment.bytes", "1048576")
        .start()
        .expect("starting weir");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    create_ready(
        &mut client,
        &versions,
        "described",
        1,
        &[("retention.ms", "3600000")],
    );
    for version in advertised_versions::<DescribeConfigsRequest>(&versions, ApiKey::DescribeConfigs)
    {
        let plain = describe_configs(
            &mut client,
            version,
            RESOURCE_TOPIC,
            "described",
            None,
            false,
            false,
        );
        let configs = configs_by_name(&plain, version);
        for &(key, default) in TOPIC_CONFIG_KEYS {
            let c = configs
                .get(key)
                .unwrap_or_else(|| panic!("DescribeConfigs v{version} lacks {key}"));
            assert!(!c.read_only, "v{version} {key} is not read-only");
            assert!(!c.is_sensitive, "v{version} {key}");
            assert!(
                c.synonyms.is_empty(),
                "v{version} {key}: synonyms not requested"
            );
            if version >= 3 {
                assert_eq!(
                    c.documentation, None,
                    "v{version} {key}: documentation not requested"
                );
            }
            let (value, source) = match key {
                "retention.ms" => (Some("3600000"), DYNAMIC_TOPIC_CONFIG),
                "segment.bytes" => (Some("1048576"), STATIC_BROKER_CONFIG),
                _ => (default, DEFAULT_CONFIG),
            };
            assert_eq!(c.value.as_deref(), value, "v{version} {key} value");
            assert_eq!(c.config_source, source, "v{version} {key} source");
        }
        if version >= 3 {
            assert_eq!(configs["retention.ms"].config_type, TYPE_LONG);
            assert_eq!(configs["segment.bytes"].config_type, TYPE_INT);
            assert_eq!(configs["cleanup.policy"].config_type, TYPE_LIST);
        }

        let full = describe_configs(
            &mut client,
            version,
            RESOURCE_TOPIC,
            "described",
            None,
            true,
            true,
        );
        let configs = configs_by_name(&full, version);
        let retention = &configs["retention.ms"];
        let first = retention
            .synonyms
            .first()
            .unwrap_or_else(|| panic!("v{version} retention.ms has synonyms"));
        assert_eq!(
            (first.name.as_str(), first.value.as_deref(), first.source),
            ("retention.ms", Some("3600000"), DYNAMIC_TOPIC_CONFIG),
            "v{version}: the topic value is the first synonym"
        );
        let segment = &configs["segment.bytes"];
        assert!(
            segment
                .synonyms
                .iter()
                .any(|s| s.name.as_str() == "log.segment.bytes"
                    && s.value.as_deref() == Some("1048576")
                    && s.source == STATIC_BROKER_CONFIG),
            "v{version} segment.bytes synonyms: {:?}",
            segment.synonyms
        );
        if version >= 3 {
            for (key, c) in &configs {
                assert!(
                    c.documentation.as_deref().is_some_and(|d| !d.is_empty()),
                    "v{version} {key} has documentation when requested"
                );
            }
        }

        let keys = ["segment.bytes", "retention.ms"];
        let filtered = describe_configs(
            &mut client,
            version,
            RESOURCE_TOPIC,
            "described",
            Some(&keys),
            false,
            false,
        );
        let configs = configs_by_name(&filtered, version);
        assert_eq!(
            configs.keys().map(String::as_str).collect::<BTreeSet<_>>(),
            BTreeSet::from(keys),
            "v{version} configuration_keys filter"
        );

        let unknown = describe_configs(
            &mut client,
            version,
            RESOURCE_TOPIC,
            "no-such-topic",
            None,
            false,
            false,
        );
        assert_eq!(
            unknown.error_code,
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            "v{version}"
        );
        assert!(unknown.configs.is_empty());
    }
}

/// DescribeConfigs v1..=max for the broker (type 4, name "1"): static
/// broker configs are read-only; `log.segment.bytes` set with `--override`
/// is 1048576 from STATIC_BROKER_CONFIG, `message.max.bytes` (not set) is
/// Kafka's default 1048588 from DEFAULT_CONFIG; configuration_keys filters.
#[test]
fn describe_configs_broker() {
    let broker = TestBroker::builder()
        .override_config("log.segment.bytes", "1048576")
        .start()
        .expect("starting weir");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    for version in advertised_versions::<DescribeConfigsRequest>(&versions, ApiKey::DescribeConfigs)
    {
        let result = describe_configs(
            &mut client,
            version,
            RESOURCE_BROKER,
            "1",
            None,
            false,
            false,
        );
        let configs = configs_by_name(&result, version);
        let segment = configs
            .get("log.segment.bytes")
            .unwrap_or_else(|| panic!("v{version} broker configs lack log.segment.bytes"));
        assert_eq!(segment.value.as_deref(), Some("1048576"));
        assert_eq!(segment.config_source, STATIC_BROKER_CONFIG, "v{version}");
        assert!(segment.read_only, "v{version}");
        let max = configs
            .get("message.max.bytes")
            .unwrap_or_else(|| panic!("v{version} broker configs lack message.max.bytes"));
        assert_eq!(max.value.as_deref(), Some("1048588"));
        assert_eq!(max.config_source, DEFAULT_CONFIG, "v{version}");
        assert!(max.read_only, "v{version}");
        for (key, c) in &configs {
            assert!(c.read_only, "v{version} broker config {key} is read-only");
            assert!(
                c.synonyms.is_empty(),
                "v{version} {key}: synonyms not requested"
            );
        }
        if version >= 3 {
            assert_eq!(segment.config_type, TYPE_INT);
        }

        let keys = ["log.segment.bytes", "num.partitions"];
        let filtered = describe_configs(
            &mut client,
            version,
            RESOURCE_BROKER,
            "1",
            Some(&keys),
            false,
            false,
        );
        let configs = configs_by_name(&filtered, version);
        assert_eq!(
            configs.keys().map(String::as_str).collect::<BTreeSet<_>>(),
            BTreeSet::from(keys),
            "v{version} configuration_keys filter"
        );
        assert_eq!(configs["num.partitions"].value.as_deref(), Some("1"));
    }
}

/// DescribeCluster v0 and v1 (KIP-700): the cluster id is the one Metadata
/// reports (and the broker printed at start), the controller id is 1, and
/// the only broker is node 1 at the bootstrap host and port, not fenced;
/// v1 echoes endpoint type 1 (brokers).
#[test]
fn describe_cluster_matches_metadata() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let metadata_version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let metadata: MetadataResponse = client
        .send(
            &MetadataRequest::default().with_topics(Some(Vec::new())),
            metadata_version,
        )
        .expect("Metadata");
    let cluster_id = metadata.cluster_id.as_ref().map(|c| c.to_string());
    assert_eq!(cluster_id.as_deref(), Some(broker.cluster_id()));
    for version in advertised_versions::<DescribeClusterRequest>(&versions, ApiKey::DescribeCluster)
    {
        let response = client
            .send(&DescribeClusterRequest::default(), version)
            .unwrap_or_else(|e| panic!("DescribeCluster v{version}: {e}"));
        assert_eq!(
            response.error_code,
            error_code::NONE,
            "{:?}",
            response.error_message
        );
        assert_eq!(
            Some(response.cluster_id.to_string()),
            cluster_id,
            "v{version}"
        );
        assert_eq!(response.controller_id.0, 1, "v{version}");
        if version >= 1 {
            assert_eq!(response.endpoint_type, 1, "v{version}");
        }
        let brokers: Vec<(i32, String, i32, bool)> = response
            .brokers
            .iter()
            .map(|b| (b.broker_id.0, b.host.to_string(), b.port, b.is_fenced))
            .collect();
        assert_eq!(
            brokers,
            vec![(1, "127.0.0.1".to_owned(), i32::from(broker.port()), false)],
            "v{version}"
        );
    }
}

fn offset_for_leader_epoch(
    client: &mut RawClient,
    version: i16,
    topic: &str,
    partitions: &[(i32, i32, i32)],
) -> Vec<EpochEndOffset> {
    let mut request =
        OffsetForLeaderEpochRequest::default().with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(
                partitions
                    .iter()
                    .map(|&(partition, current, epoch)| {
                        OffsetForLeaderPartition::default()
                            .with_partition(partition)
                            .with_current_leader_epoch(current)
                            .with_leader_epoch(epoch)
                    })
                    .collect(),
            )]);
    if version >= 3 {
        // A consumer (KIP-392: -1; the schema's default -2 is for debugging).
        request = request.with_replica_id((-1).into());
    }
    let response = client
        .send(&request, version)
        .unwrap_or_else(|e| panic!("OffsetForLeaderEpoch v{version}: {e}"));
    assert_eq!(response.topics.len(), 1, "v{version}: {response:?}");
    assert_eq!(response.topics[0].topic.to_string(), topic);
    let out = response.topics[0].partitions.clone();
    assert_eq!(
        out.iter().map(|p| p.partition).collect::<Vec<_>>(),
        partitions.iter().map(|p| p.0).collect::<Vec<_>>(),
        "v{version}: one result per requested partition, in order"
    );
    out
}

/// A topic "epochs" with five records in partition 0 (two batches); returns
/// the client, the versions, the log end offset and the partition's leader
/// epoch as Metadata reports it.
fn epochs_setup(broker: &TestBroker) -> (RawClient, ApiVersionsResponse, i64, i32) {
    let mut client = support::connect(broker);
    let versions = support::api_versions(&mut client);
    let topic = create_ready(&mut client, &versions, "epochs", 1, &[]);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    support::produce_ok(
        &mut client,
        produce_version,
        &topic,
        0,
        records::plain_batch(&["a", "b", "c"], 1_000),
    );
    support::produce_ok(
        &mut client,
        produce_version,
        &topic,
        0,
        records::plain_batch(&["d", "e"], 2_000),
    );
    let list_version = support::newest::<ListOffsetsRequest>(&versions, ApiKey::ListOffsets);
    let log_end_offset = support::list_offset(&mut client, list_version, &topic, 0, -1).offset;
    assert_eq!(log_end_offset, 5);
    let leader_epoch = describe_topic(&mut client, &versions, "epochs").partitions[0].leader_epoch;
    assert!(leader_epoch >= 0, "Metadata reports the leader epoch");
    (client, versions, log_end_offset, leader_epoch)
}

/// OffsetForLeaderEpoch at every advertised version after producing five
/// records: the partition's epoch (the only one) ends at the log end offset
/// 5, with current_leader_epoch -1 (no check) or equal to the partition's;
/// an epoch above every known one is (-1, -1) (Kafka's
/// `LeaderEpochFileCache.endOffsetFor`); a current_leader_epoch newer than
/// the partition's is UNKNOWN_LEADER_EPOCH (75, KIP-320); an unknown
/// partition or topic is UNKNOWN_TOPIC_OR_PARTITION (3).
#[test]
fn offset_for_leader_epoch_end_offsets() {
    let broker = support::start_broker();
    let (mut client, versions, log_end_offset, leader_epoch) = epochs_setup(&broker);
    let newer = leader_epoch + 1;
    for version in
        advertised_versions::<OffsetForLeaderEpochRequest>(&versions, ApiKey::OffsetForLeaderEpoch)
    {
        let results = offset_for_leader_epoch(
            &mut client,
            version,
            "epochs",
            &[
                (0, -1, leader_epoch),
                (0, leader_epoch, leader_epoch),
                (0, -1, newer),
                (0, newer, leader_epoch),
                (3, -1, 0),
            ],
        );
        let summary: Vec<(i16, i32, i64)> = results
            .iter()
            .map(|r| (r.error_code, r.leader_epoch, r.end_offset))
            .collect();
        assert_eq!(
            summary,
            vec![
                (error_code::NONE, leader_epoch, log_end_offset),
                (error_code::NONE, leader_epoch, log_end_offset),
                (error_code::NONE, -1, -1),
                (code::UNKNOWN_LEADER_EPOCH, -1, -1),
                (error_code::UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
            ],
            "OffsetForLeaderEpoch v{version} (partition epoch {leader_epoch})"
        );

        let results = offset_for_leader_epoch(&mut client, version, "no-such-topic", &[(0, -1, 0)]);
        assert_eq!(
            results[0].error_code,
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            "v{version}"
        );
    }
}

/// OffsetForLeaderEpoch at every advertised version with a
/// current_leader_epoch older than the partition's is FENCED_LEADER_EPOCH
/// (74, KIP-320). Only -1 means "no epoch given" (Kafka's
/// `ReplicaManager.lastOffsetForLeaderEpoch` maps exactly
/// `NO_PARTITION_LEADER_EPOCH` to `Optional.empty`, and
/// `Partition.checkCurrentLeaderEpoch` compares any other value), so on a
/// single node whose partition stays at epoch 0 the older epoch is -2.
#[test]
fn offset_for_leader_epoch_fences_older_current_epoch() {
    let broker = support::start_broker();
    let (mut client, versions, _, leader_epoch) = epochs_setup(&broker);
    let older = if leader_epoch >= 1 {
        leader_epoch - 1
    } else {
        -2
    };
    for version in
        advertised_versions::<OffsetForLeaderEpochRequest>(&versions, ApiKey::OffsetForLeaderEpoch)
    {
        let results =
            offset_for_leader_epoch(&mut client, version, "epochs", &[(0, older, leader_epoch)]);
        assert_eq!(
            (
                results[0].error_code,
                results[0].leader_epoch,
                results[0].end_offset
            ),
            (code::FENCED_LEADER_EPOCH, -1, -1),
            "OffsetForLeaderEpoch v{version}: current_leader_epoch {older} against partition \
             epoch {leader_epoch}"
        );
    }
}

/// Asks for `count` producer ids at every advertised InitProducerId version
/// with a null transactional id; each answer must be NONE with epoch 0.
#[track_caller]
fn producer_ids(client: &mut RawClient, versions: &ApiVersionsResponse, count: usize) -> Vec<i64> {
    let mut ids = Vec::new();
    for version in advertised_versions::<InitProducerIdRequest>(versions, ApiKey::InitProducerId) {
        for _ in 0..count {
            let request = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000);
            let response = client
                .send(&request, version)
                .unwrap_or_else(|e| panic!("InitProducerId v{version}: {e}"));
            assert_eq!(
                response.error_code,
                error_code::NONE,
                "InitProducerId v{version}"
            );
            assert_eq!(response.producer_epoch, 0, "InitProducerId v{version}");
            assert!(
                response.producer_id.0 >= 0,
                "v{version}: {:?}",
                response.producer_id
            );
            ids.push(response.producer_id.0);
        }
    }
    ids
}

/// InitProducerId at every advertised version with a null transactional id
/// (idempotent producers, KIP-98/KIP-360): every answer is a distinct
/// producer id with epoch 0, and ids are never reused across a graceful
/// restart nor across a kill -9: each broker life hands out only ids larger
/// than every id of the earlier lives (ids come from blocks the controller
/// commits before using them, KIP-730).
#[test]
fn init_producer_id_unique_across_restarts() {
    let mut broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let mut seen = BTreeSet::new();
    let mut lives = Vec::new();
    for life in 0..3 {
        if life == 1 {
            drop(client);
            broker.restart().expect("graceful restart");
            client = support::connect(&broker);
        } else if life == 2 {
            drop(client);
            broker.kill9().expect("kill -9");
            broker.start_again().expect("start after kill -9");
            client = support::connect(&broker);
        }
        let ids = producer_ids(&mut client, &versions, 3);
        for id in &ids {
            assert!(
                seen.insert(*id),
                "producer id {id} handed out twice (life {life})"
            );
        }
        if let Some(previous_max) = lives.iter().flatten().max() {
            let min = ids.iter().min().expect("ids");
            assert!(
                min > previous_max,
                "life {life} handed out {min}, not above {previous_max} of earlier lives"
            );
        }
        lives.push(ids);
    }
}

fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("weir-itest"))
        .with_client_software_version(StrBytes::from_static_str("0.1.0"))
}

/// `connections.max.idle.ms=500`: a connection that sent one request and
/// then idles, and one that never sent anything, are both closed by the
/// broker (a blocking read sees EOF; 30 s is only the bound), while a
/// connection sending ApiVersions every 100 ms stays open for 2 s (four
/// idle periods) and still answers afterwards.
#[test]
fn idle_connections_are_closed() {
    let broker = TestBroker::builder()
        .override_config("connections.max.idle.ms", "500")
        .start()
        .expect("starting weir");
    let bound = Duration::from_secs(30);

    let mut silent = support::connect(&broker);
    let mut idle = support::connect(&broker);
    support::api_versions(&mut idle);
    let mut busy = support::connect(&broker);
    let started = Instant::now();
    let mut requests = 0;
    while started.elapsed() < Duration::from_secs(2) {
        let response = busy
            .send(&api_versions_request(), 3)
            .expect("busy connection answers");
        assert_eq!(response.error_code, error_code::NONE);
        requests += 1;
        // Pacing of the busy client, well under the idle timeout.
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(requests >= 10, "sent {requests} requests in 2 s");
    let response = busy
        .send(&api_versions_request(), 3)
        .expect("busy connection still open");
    assert_eq!(response.error_code, error_code::NONE);

    for (what, client) in [("idle", &mut idle), ("silent", &mut silent)] {
        client.set_read_timeout(bound).expect("read timeout");
        match client.read_frame() {
            Err(HarnessError::ConnectionClosed) => {}
            Err(HarnessError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("the {what} connection was not closed within {bound:?}: {other:?}"),
        }
    }
}

/// The Java AdminClient (kafka-clients 4.1) end to end: createTopics with
/// configs, describeTopics, describeConfigs (topic and broker),
/// describeCluster (cluster id and bootstrap port), listOffsets
/// earliest/latest/max-timestamp after the Java producer wrote five
/// records, deleteTopics; the Java program checks every result and exits
/// non-zero on a mismatch. Afterwards Metadata confirms the deletion.
#[test]
fn java_admin_client() {
    let broker = support::start_broker();
    let mut java = clients::java_client_tool().expect("Java client harness");
    let port = broker.port().to_string();
    java.args([
        "admin",
        &broker.bootstrap(),
        "java-admin",
        broker.cluster_id(),
        &port,
    ]);
    let output = clients::run(java, None, CLIENT_TIMEOUT).expect("java admin");
    output.assert_success();
    let stdout = output.stdout_text();
    assert!(stdout.lines().any(|l| l == "admin ok"), "{stdout}");

    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    assert_topic_absent(&mut client, &versions, "java-admin");
}
