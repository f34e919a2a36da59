//! Every API and version the broker advertises is answered by its own
//! handler: a request at each advertised version gets a response that
//! decodes at that version and carries something only the API's handler
//! gives (issue 17 scope 8). Dispatch falls back, for an API with no
//! handler arm, to the whole-request error response of
//! `weir_protocol_compat::error_response` with UNSUPPORTED_VERSION: every
//! echoed topic, partition or group gets error 35, offsets and ids are -1
//! and lists (brokers, configs, partitions) are empty. Each check below
//! asks for a value that answer never holds (a real offset, a broker list,
//! a config, or a Kafka error code other than 35 such as
//! TOPIC_ALREADY_EXISTS or INVALID_GROUP_ID), so the test fails as soon as
//! one arm of `broker/src/dispatch.rs` is removed.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::time::Duration;

use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialDeletion;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData as QuotaComponent;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_quorum_request::{
    PartitionData as QuorumPartition, TopicData as QuorumTopic,
};
use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName as ScramUserName;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::DescribeClientQuotasRequest;
use kafka_protocol::messages::{alter_client_quotas_request, AlterClientQuotasRequest};
use kafka_protocol::messages::{
    alter_configs_request, incremental_alter_configs_request, AlterConfigsRequest, ApiKey,
    ApiVersionsResponse, CreatePartitionsRequest, CreateTopicsRequest, DeleteGroupsRequest,
    DeleteRecordsRequest, DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest,
    DescribeGroupsRequest, DescribeQuorumRequest, DescribeTopicPartitionsRequest,
    ElectLeadersRequest, FetchRequest, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    HeartbeatRequest, IncrementalAlterConfigsRequest, InitProducerIdRequest, JoinGroupRequest,
    LeaveGroupRequest, ListGroupsRequest, ListOffsetsRequest, MetadataRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, OffsetFetchResponse, OffsetForLeaderEpochRequest,
    ProduceRequest, SaslAuthenticateRequest, SaslHandshakeRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
};
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::{Message, Request, StrBytes};
use kafka_protocol::records::Compression;
use weir_integration_tests::records::{self, NewRecord};
use weir_integration_tests::{requests, RawClient};

use crate::support::{self, FetchSpec, TopicInfo};

/// The topic most probes name (one partition, one record before probing).
const TOPIC: &str = "coverage";
/// A topic that never exists.
const MISSING: &str = "coverage-missing";
/// The group OffsetCommit, OffsetFetch, DescribeGroups and friends name.
const GROUP: &str = "coverage-group";
/// The offset committed for [`GROUP`] before probing.
const COMMITTED: i64 = 1;

/// Kafka error codes the handlers answer below (protocol guide).
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_GROUP_ID: i16 = 24;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_PARTITIONS: i16 = 37;
/// Kafka's INVALID_REQUEST.
const INVALID_REQUEST: i16 = 42;
const GROUP_ID_NOT_FOUND: i16 = 69;
/// SaslHandshake / SaslAuthenticate on a listener without SASL (Kafka's
/// `KafkaApis`).
const ILLEGAL_SASL_STATE: i16 = 34;
/// Kafka's RESOURCE_NOT_FOUND.
const RESOURCE_NOT_FOUND: i16 = 91;
/// Kafka's SECURITY_DISABLED (no authorizer configured).
const SECURITY_DISABLED: i16 = 54;
const ELECTION_NOT_NEEDED: i16 = 84;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn group(s: &str) -> GroupId {
    GroupId(text(s))
}

fn one_record(value: &str) -> bytes::Bytes {
    records::encode_batch(
        &[NewRecord::value(value.as_bytes().to_vec(), 1_000)],
        Compression::None,
    )
    .expect("encode batch")
}

/// Sends `request(version)` at every version of `R` that the broker
/// advertises and the `kafka-protocol` crate encodes, and requires
/// `handled` of each response: `expected` names the answer only the
/// handler gives. Returns how many versions were probed.
#[track_caller]
fn probe<R>(
    client: &mut RawClient,
    versions: &ApiVersionsResponse,
    expected: &str,
    request: impl Fn(i16) -> R,
    handled: impl Fn(i16, &R::Response) -> bool,
) -> usize
where
    R: Request + Message,
    R::Response: Debug,
{
    let key = ApiKey::try_from(R::KEY).expect("known api key");
    let probed = support::common_versions::<R>(versions, key);
    for &version in &probed {
        let response = client
            .send(&request(version), version)
            .unwrap_or_else(|e| panic!("{key:?} v{version}: {e}"));
        assert!(
            handled(version, &response),
            "{key:?} v{version} was not answered by its handler (expected {expected}): {response:?}"
        );
    }
    probed.len()
}

fn fetch_request(topic: &TopicInfo, version: i16) -> FetchRequest {
    let mut spec = FetchSpec::one(version, 0, 0);
    spec.max_wait_ms = 0;
    spec.min_bytes = 0;
    support::fetch_request(topic, &spec)
}

fn list_offsets_request() -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])])
}

fn find_coordinator_request(version: i16) -> FindCoordinatorRequest {
    if version >= 4 {
        FindCoordinatorRequest::default().with_coordinator_keys(vec![text(GROUP)])
    } else {
        FindCoordinatorRequest::default().with_key(text(GROUP))
    }
}

/// The group's coordinator is found with no error (v4+: in `coordinators`).
fn coordinator_found(version: i16, response: &FindCoordinatorResponse) -> bool {
    if version >= 4 {
        response
            .coordinators
            .iter()
            .any(|c| c.error_code == 0 && c.node_id.0 >= 0 && c.port > 0)
    } else {
        response.error_code == 0 && response.node_id.0 >= 0 && response.port > 0
    }
}

fn offset_commit_request(_version: i16) -> OffsetCommitRequest {
    // A standalone consumer's commit (generation -1, no member): a simple
    // group, accepted at every version.
    OffsetCommitRequest::default()
        .with_group_id(group(GROUP))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(COMMITTED)])])
}

fn offset_fetch_request(version: i16) -> OffsetFetchRequest {
    if version >= 8 {
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(group(GROUP))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(name(TOPIC))
                .with_partition_indexes(vec![0])]))])
    } else {
        OffsetFetchRequest::default()
            .with_group_id(group(GROUP))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(name(TOPIC))
                .with_partition_indexes(vec![0])]))
    }
}

/// [`COMMITTED`] read back for the topic's partition 0.
fn offset_fetched(version: i16, response: &OffsetFetchResponse) -> bool {
    if version >= 8 {
        response.groups.iter().any(|g| {
            g.error_code == 0
                && g.topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .any(|p| p.error_code == 0 && p.committed_offset == COMMITTED)
        })
    } else {
        response.error_code == 0
            && response
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| p.error_code == 0 && p.committed_offset == COMMITTED)
    }
}

#[test]
fn every_advertised_api_version_is_answered_by_its_handler() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    assert!(!versions.api_keys.is_empty());

    let topic = support::create_topic(&mut client, &versions, TOPIC, &[]);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    assert_eq!(
        support::produce_ok(&mut client, produce_version, &topic, 0, one_record("setup")),
        0
    );
    // The group coordinator is ready (the offsets topic is created on first
    // use) and GROUP has a committed offset for OffsetFetch to read back.
    let find_version =
        support::newest::<FindCoordinatorRequest>(&versions, ApiKey::FindCoordinator);
    support::poll_until(Duration::from_secs(30), "the group coordinator", || {
        let response = client
            .send(&find_coordinator_request(find_version), find_version)
            .expect("FindCoordinator");
        coordinator_found(find_version, &response).then_some(())
    });
    let commit_version = support::newest::<OffsetCommitRequest>(&versions, ApiKey::OffsetCommit);
    support::poll_until(Duration::from_secs(30), "a first offset commit", || {
        let response = client
            .send(&offset_commit_request(commit_version), commit_version)
            .expect("OffsetCommit");
        response
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .all(|p| p.error_code == 0)
            .then_some(())
    });

    let mut covered = BTreeSet::new();
    for api in &versions.api_keys {
        let key = ApiKey::try_from(api.api_key).expect("known api key");
        let c = &mut client;
        let v = &versions;
        let probed = match key {
            // ApiVersions itself is exercised by every test's handshake and
            // by cases C01 and C11 (its handler fills `api_keys`).
            ApiKey::ApiVersions => {
                covered.insert(api.api_key);
                continue;
            }
            ApiKey::Produce => probe(
                c,
                v,
                "error NONE and a base offset after the setup record",
                |_| requests::produce_request(TOPIC, 0, 1, one_record("probe")),
                |_, r| {
                    r.responses
                        .iter()
                        .flat_map(|t| &t.partition_responses)
                        .any(|p| p.error_code == 0 && p.base_offset >= 1)
                },
            ),
            ApiKey::Fetch => probe(
                c,
                v,
                "partition 0 with error NONE and a high watermark of at least 1",
                |version| fetch_request(&topic, version),
                |_, r| {
                    r.error_code == 0
                        && r.responses
                            .iter()
                            .flat_map(|t| &t.partitions)
                            .any(|p| p.error_code == 0 && p.high_watermark >= 1)
                },
            ),
            ApiKey::ListOffsets => probe(
                c,
                v,
                "the latest offset, at least 1",
                |_| list_offsets_request(),
                |_, r| {
                    r.topics
                        .iter()
                        .flat_map(|t| &t.partitions)
                        .any(|p| p.error_code == 0 && p.offset >= 1)
                },
            ),
            ApiKey::Metadata => probe(
                c,
                v,
                "the broker list",
                |_| MetadataRequest::default(),
                |_, r| !r.brokers.is_empty(),
            ),
            ApiKey::CreateTopics => probe(
                c,
                v,
                "TOPIC_ALREADY_EXISTS",
                |_| {
                    CreateTopicsRequest::default()
                        .with_timeout_ms(30_000)
                        .with_topics(vec![CreatableTopic::default()
                            .with_name(name(TOPIC))
                            .with_num_partitions(1)
                            .with_replication_factor(1)])
                },
                |_, r| {
                    r.topics
                        .iter()
                        .any(|t| t.error_code == TOPIC_ALREADY_EXISTS)
                },
            ),
            ApiKey::DeleteTopics => probe(
                c,
                v,
                "UNKNOWN_TOPIC_OR_PARTITION",
                |version| {
                    let request = DeleteTopicsRequest::default().with_timeout_ms(30_000);
                    if version >= 6 {
                        request.with_topics(vec![
                            DeleteTopicState::default().with_name(Some(name(MISSING)))
                        ])
                    } else {
                        request.with_topic_names(vec![name(MISSING)])
                    }
                },
                |_, r| {
                    r.responses
                        .iter()
                        .any(|t| t.error_code == UNKNOWN_TOPIC_OR_PARTITION)
                },
            ),
            ApiKey::DeleteRecords => probe(
                c,
                v,
                "error NONE and low watermark 0",
                |_| {
                    DeleteRecordsRequest::default()
                        .with_timeout_ms(30_000)
                        .with_topics(vec![DeleteRecordsTopic::default()
                            .with_name(name(TOPIC))
                            .with_partitions(vec![DeleteRecordsPartition::default()
                                .with_partition_index(0)
                                .with_offset(0)])])
                },
                |_, r| {
                    r.topics
                        .iter()
                        .flat_map(|t| &t.partitions)
                        .any(|p| p.error_code == 0 && p.low_watermark == 0)
                },
            ),
            ApiKey::InitProducerId => probe(
                c,
                v,
                "a producer id",
                |_| {
                    InitProducerIdRequest::default()
                        .with_transactional_id(None)
                        .with_transaction_timeout_ms(60_000)
                },
                |_, r| r.error_code == 0 && r.producer_id.0 >= 0 && r.producer_epoch >= 0,
            ),
            ApiKey::OffsetForLeaderEpoch => probe(
                c,
                v,
                "a known leader epoch and its end offset",
                |version| {
                    let request = OffsetForLeaderEpochRequest::default().with_topics(vec![
                        OffsetForLeaderTopic::default()
                            .with_topic(name(TOPIC))
                            .with_partitions(vec![OffsetForLeaderPartition::default()
                                .with_partition(0)
                                .with_current_leader_epoch(-1)
                                .with_leader_epoch(0)]),
                    ]);
                    if version >= 3 {
                        request.with_replica_id((-1).into())
                    } else {
                        request
                    }
                },
                |_, r| {
                    r.topics
                        .iter()
                        .flat_map(|t| &t.partitions)
                        .any(|p| p.error_code == 0 && p.leader_epoch >= 0 && p.end_offset >= 0)
                },
            ),
            ApiKey::DescribeConfigs => probe(
                c,
                v,
                "the topic's configs",
                |_| {
                    DescribeConfigsRequest::default().with_resources(vec![
                        DescribeConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(text(TOPIC))
                            .with_configuration_keys(None),
                    ])
                },
                |_, r| {
                    r.results
                        .iter()
                        .any(|res| res.error_code == 0 && !res.configs.is_empty())
                },
            ),
            ApiKey::AlterConfigs => probe(
                c,
                v,
                "UNKNOWN_TOPIC_OR_PARTITION",
                |_| {
                    AlterConfigsRequest::default().with_resources(vec![
                        alter_configs_request::AlterConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(text(MISSING))
                            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                                .with_name(text("retention.ms"))
                                .with_value(Some(text("1000")))]),
                    ])
                },
                |_, r| {
                    r.responses
                        .iter()
                        .any(|res| res.error_code == UNKNOWN_TOPIC_OR_PARTITION)
                },
            ),
            ApiKey::CreatePartitions => probe(
                c,
                v,
                "INVALID_PARTITIONS (the topic already has that count)",
                |_| {
                    CreatePartitionsRequest::default()
                        .with_timeout_ms(30_000)
                        .with_topics(vec![CreatePartitionsTopic::default()
                            .with_name(name(TOPIC))
                            .with_count(1)
                            .with_assignments(None)])
                },
                |_, r| r.results.iter().any(|t| t.error_code == INVALID_PARTITIONS),
            ),
            ApiKey::IncrementalAlterConfigs => probe(
                c,
                v,
                "UNKNOWN_TOPIC_OR_PARTITION",
                |_| {
                    IncrementalAlterConfigsRequest::default().with_resources(vec![
                        incremental_alter_configs_request::AlterConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(text(MISSING))
                            .with_configs(vec![
                                incremental_alter_configs_request::AlterableConfig::default()
                                    .with_name(text("retention.ms"))
                                    .with_config_operation(0)
                                    .with_value(Some(text("1000"))),
                            ]),
                    ])
                },
                |_, r| {
                    r.responses
                        .iter()
                        .any(|res| res.error_code == UNKNOWN_TOPIC_OR_PARTITION)
                },
            ),
            ApiKey::ElectLeaders => probe(
                c,
                v,
                "ELECTION_NOT_NEEDED (the preferred replica leads)",
                |_| {
                    ElectLeadersRequest::default()
                        .with_timeout_ms(30_000)
                        .with_topic_partitions(Some(vec![TopicPartitions::default()
                            .with_topic(name(TOPIC))
                            .with_partitions(vec![0])]))
                },
                |_, r| {
                    r.replica_election_results
                        .iter()
                        .flat_map(|t| &t.partition_result)
                        .any(|p| p.error_code == ELECTION_NOT_NEEDED)
                },
            ),
            ApiKey::DescribeQuorum => probe(
                c,
                v,
                "UNKNOWN_TOPIC_OR_PARTITION on a partition that is not the metadata log",
                |_| {
                    DescribeQuorumRequest::default().with_topics(vec![QuorumTopic::default()
                        .with_topic_name(name(TOPIC))
                        .with_partitions(vec![QuorumPartition::default().with_partition_index(0)])])
                },
                |_, r| {
                    r.error_code == 0
                        && r.topics
                            .iter()
                            .flat_map(|t| &t.partitions)
                            .any(|p| p.error_code == UNKNOWN_TOPIC_OR_PARTITION)
                },
            ),
            // On this PLAINTEXT listener; tests/sasl.rs drives both on a
            // SASL listener.
            ApiKey::SaslHandshake => probe(
                c,
                v,
                "ILLEGAL_SASL_STATE on a listener without SASL",
                |_| {
                    SaslHandshakeRequest::default()
                        .with_mechanism(StrBytes::from_static_str("PLAIN"))
                },
                |_, r| r.error_code == ILLEGAL_SASL_STATE,
            ),
            ApiKey::SaslAuthenticate => probe(
                c,
                v,
                "ILLEGAL_SASL_STATE on a listener without SASL",
                |_| SaslAuthenticateRequest::default(),
                |_, r| r.error_code == ILLEGAL_SASL_STATE,
            ),
            // The coverage cluster has no authorizer: SECURITY_DISABLED,
            // as Kafka without one; tests/acls.rs drives them with one.
            ApiKey::DescribeAcls => probe(
                c,
                v,
                "SECURITY_DISABLED without an authorizer",
                |_| {
                    DescribeAclsRequest::default()
                        .with_resource_type_filter(1)
                        .with_pattern_type_filter(1)
                        .with_operation(1)
                        .with_permission_type(1)
                },
                |_, r| r.error_code == SECURITY_DISABLED,
            ),
            ApiKey::CreateAcls => probe(
                c,
                v,
                "SECURITY_DISABLED without an authorizer",
                |_| {
                    CreateAclsRequest::default().with_creations(vec![AclCreation::default()
                        .with_resource_type(2)
                        .with_resource_name(StrBytes::from_static_str("t"))
                        .with_resource_pattern_type(3)
                        .with_principal(StrBytes::from_static_str("User:alice"))
                        .with_host(StrBytes::from_static_str("*"))
                        .with_operation(3)
                        .with_permission_type(3)])
                },
                |_, r| r.results.len() == 1 && r.results[0].error_code == SECURITY_DISABLED,
            ),
            ApiKey::DeleteAcls => probe(
                c,
                v,
                "SECURITY_DISABLED without an authorizer",
                |_| {
                    DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
                        .with_resource_type_filter(1)
                        .with_pattern_type_filter(1)
                        .with_operation(1)
                        .with_permission_type(1)])
                },
                |_, r| {
                    r.filter_results.len() == 1
                        && r.filter_results[0].error_code == SECURITY_DISABLED
                },
            ),
            ApiKey::AlterClientQuotas => probe(
                c,
                v,
                "INVALID_REQUEST for a fractional producer_byte_rate (validate only)",
                |_| {
                    AlterClientQuotasRequest::default()
                        .with_entries(vec![alter_client_quotas_request::EntryData::default()
                            .with_entity(vec![alter_client_quotas_request::EntityData::default()
                                .with_entity_type(StrBytes::from_static_str("client-id"))
                                .with_entity_name(Some(StrBytes::from_static_str("probe")))])
                            .with_ops(vec![alter_client_quotas_request::OpData::default()
                                .with_key(StrBytes::from_static_str("producer_byte_rate"))
                                .with_value(10.5)])])
                        .with_validate_only(true)
                },
                |_, r| r.entries.len() == 1 && r.entries[0].error_code == INVALID_REQUEST,
            ),
            ApiKey::DescribeClientQuotas => probe(
                c,
                v,
                "an empty list (no quota is set)",
                |_| {
                    DescribeClientQuotasRequest::default().with_components(vec![
                        QuotaComponent::default()
                            .with_entity_type(StrBytes::from_static_str("user"))
                            .with_match_type(0)
                            .with_match(Some(StrBytes::from_static_str("alice"))),
                    ])
                },
                |_, r| r.error_code == 0 && r.entries.as_ref().is_some_and(Vec::is_empty),
            ),
            ApiKey::DescribeUserScramCredentials => probe(
                c,
                v,
                "RESOURCE_NOT_FOUND for a user without credentials",
                |_| {
                    DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                        ScramUserName::default().with_name(StrBytes::from_static_str("nobody")),
                    ]))
                },
                |_, r| r.results.len() == 1 && r.results[0].error_code == RESOURCE_NOT_FOUND,
            ),
            ApiKey::AlterUserScramCredentials => probe(
                c,
                v,
                "RESOURCE_NOT_FOUND for deleting a credential that does not exist",
                |_| {
                    AlterUserScramCredentialsRequest::default().with_deletions(vec![
                        ScramCredentialDeletion::default()
                            .with_name(StrBytes::from_static_str("nobody"))
                            .with_mechanism(1),
                    ])
                },
                |_, r| r.results.len() == 1 && r.results[0].error_code == RESOURCE_NOT_FOUND,
            ),
            ApiKey::DescribeCluster => probe(
                c,
                v,
                "the broker list and cluster id",
                |_| DescribeClusterRequest::default(),
                |_, r| r.error_code == 0 && !r.brokers.is_empty() && !r.cluster_id.is_empty(),
            ),
            ApiKey::DescribeTopicPartitions => probe(
                c,
                v,
                "the topic's partition with its leader",
                |_| {
                    DescribeTopicPartitionsRequest::default()
                        .with_response_partition_limit(2000)
                        .with_topics(vec![TopicRequest::default().with_name(name(TOPIC))])
                },
                |_, r| {
                    r.topics.iter().any(|t| {
                        t.error_code == 0 && t.partitions.iter().any(|p| p.leader_id.0 >= 0)
                    })
                },
            ),
            ApiKey::FindCoordinator => probe(
                c,
                v,
                "the coordinator's node",
                find_coordinator_request,
                coordinator_found,
            ),
            ApiKey::OffsetCommit => probe(
                c,
                v,
                "error NONE on the committed partition",
                offset_commit_request,
                |_, r| {
                    let mut partitions = r.topics.iter().flat_map(|t| &t.partitions).peekable();
                    partitions.peek().is_some() && partitions.all(|p| p.error_code == 0)
                },
            ),
            ApiKey::OffsetFetch => probe(
                c,
                v,
                "the committed offset",
                offset_fetch_request,
                offset_fetched,
            ),
            // The membership APIs and OffsetDelete refuse the empty group id
            // (Kafka's `isGroupIdNotEmpty`).
            ApiKey::JoinGroup => probe(
                c,
                v,
                "INVALID_GROUP_ID",
                |_| {
                    JoinGroupRequest::default()
                        .with_session_timeout_ms(10_000)
                        .with_rebalance_timeout_ms(10_000)
                        .with_protocol_type(text("consumer"))
                },
                |_, r| r.error_code == INVALID_GROUP_ID,
            ),
            ApiKey::Heartbeat => probe(
                c,
                v,
                "INVALID_GROUP_ID",
                |_| HeartbeatRequest::default(),
                |_, r| r.error_code == INVALID_GROUP_ID,
            ),
            ApiKey::LeaveGroup => probe(
                c,
                v,
                "INVALID_GROUP_ID",
                |_| LeaveGroupRequest::default(),
                |_, r| r.error_code == INVALID_GROUP_ID,
            ),
            ApiKey::SyncGroup => probe(
                c,
                v,
                "INVALID_GROUP_ID",
                |_| SyncGroupRequest::default(),
                |_, r| r.error_code == INVALID_GROUP_ID,
            ),
            ApiKey::OffsetDelete => probe(
                c,
                v,
                "INVALID_GROUP_ID",
                |_| {
                    OffsetDeleteRequest::default().with_topics(vec![
                        OffsetDeleteRequestTopic::default()
                            .with_name(name(TOPIC))
                            .with_partitions(vec![
                                OffsetDeleteRequestPartition::default().with_partition_index(0)
                            ]),
                    ])
                },
                |_, r| r.error_code == INVALID_GROUP_ID,
            ),
            ApiKey::DescribeGroups => probe(
                c,
                v,
                "the group described with error NONE",
                |_| DescribeGroupsRequest::default().with_groups(vec![group(GROUP)]),
                |_, r| {
                    r.groups
                        .iter()
                        .any(|g| g.error_code == 0 && !g.group_state.is_empty())
                },
            ),
            ApiKey::ListGroups => probe(
                c,
                v,
                "error NONE",
                |_| ListGroupsRequest::default(),
                |_, r| r.error_code == 0,
            ),
            ApiKey::DeleteGroups => probe(
                c,
                v,
                "GROUP_ID_NOT_FOUND",
                |_| DeleteGroupsRequest::default().with_groups_names(vec![group(MISSING)]),
                |_, r| r.results.iter().any(|g| g.error_code == GROUP_ID_NOT_FOUND),
            ),
            other => panic!("the broker advertises {other:?}, which this test does not know yet"),
        };
        assert!(probed > 0, "{key:?} probed at no version");
        covered.insert(api.api_key);
    }
    let advertised: BTreeSet<i16> = versions.api_keys.iter().map(|a| a.api_key).collect();
    assert_eq!(covered, advertised);
}
