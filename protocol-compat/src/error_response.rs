//! Whole-request error responses: the answer to a decoded request that is
//! rejected as a whole (unsupported version of a field, authorization,
//! throttling, a broker-side failure before any handler logic).
//!
//! Each builder mirrors Kafka's `AbstractRequest.getErrorResponse` for that
//! API (clients/src/main/java/org/apache/kafka/common/requests/*Request.java):
//! every requested topic/partition is echoed with the error, and the
//! top-level error code is set where the API has one. Nothing here knows
//! about the broker's state.

use bytes::Bytes;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse as LegacyAlterConfigsResourceResponse;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic;
use kafka_protocol::messages::describe_user_scram_credentials_response::DescribeUserScramCredentialsResult;
use kafka_protocol::messages::elect_leaders_response::{
    PartitionResult as ElectionPartitionResult, ReplicaElectionResult,
};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{alter_client_quotas_response, AlterClientQuotasResponse};
use kafka_protocol::messages::{
    AlterConfigsResponse, ApiKey, ApiVersionsResponse, CreatePartitionsResponse,
    CreateTopicsRequest, CreateTopicsResponse, DeleteRecordsRequest, DeleteRecordsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, DescribeClusterResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, DescribeQuorumResponse, DescribeTopicPartitionsResponse,
    ElectLeadersResponse, FetchRequest, FetchResponse, InitProducerIdResponse, ListOffsetsRequest,
    ListOffsetsResponse, MetadataRequest, MetadataResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, ProduceRequest, ProduceResponse, RequestKind, ResponseKind,
    TopicName,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsResponse, CreateAclsResponse, DeleteAclsResponse,
    DescribeAclsResponse, DescribeClientQuotasResponse, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::messages::{
    DeleteGroupsResponse, DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse,
    HeartbeatResponse, IncrementalAlterConfigsResponse, JoinGroupResponse, LeaveGroupResponse,
    ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse, SaslAuthenticateResponse, SaslHandshakeResponse,
    SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::api_table::api_versions_entry;
use crate::UNSUPPORTED_VERSION;

/// The message Kafka's `Errors` gives the authorization errors (its
/// exception's message when the thrower gave none): TOPIC_ (29), GROUP_
/// (30), CLUSTER_ (31) and TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53) and
/// SECURITY_DISABLED (54); `None` for other codes, which clients then
/// describe themselves.
pub fn kafka_default_message(code: i16) -> Option<&'static str> {
    Some(match code {
        29 => "Topic authorization failed.",
        30 => "Group authorization failed.",
        31 => "Cluster authorization failed.",
        53 => "Transactional Id authorization failed.",
        54 => "Security features are disabled.",
        _ => return None,
    })
}

/// [`kafka_default_message`] for a response's message field, whose crate
/// default would be an empty string that clients print as the message.
fn default_message(code: i16) -> Option<StrBytes> {
    kafka_default_message(code).map(StrBytes::from_static_str)
}

/// Builds the response to `request` (decoded at `api_version`) in which every
/// requested topic/partition, or the top-level error where the API has one,
/// carries `error_code`, as Kafka's `AbstractRequest.getErrorResponse` does.
/// Offsets, epochs and timestamps are -1; names and ids are echoed.
///
/// Returns `None` when no response may be sent and the connection should be
/// closed instead: Produce with acks=0 (Kafka's `ProduceRequest.getErrorResponse`
/// returns null; the client reads no response) and APIs outside the
/// supported-API table, which `decode_request` never yields.
///
/// Per-API notes (from the Kafka sources named above):
/// - ApiVersions: with UNSUPPORTED_VERSION the api_keys list holds the
///   ApiVersions entry (KIP-511), otherwise it is empty.
/// - Fetch: top-level error_code (v7+) and session_id echoed; partitions
///   only below v13, each with high watermark, last stable offset and log
///   start offset -1, no aborted transactions, empty records.
/// - Metadata: no brokers; a null topic name is answered as "".
pub fn error_response(
    request: &RequestKind,
    api_version: i16,
    error_code: i16,
) -> Option<ResponseKind> {
    let response = match request {
        RequestKind::ApiVersions(_) => api_versions(error_code).into(),
        RequestKind::Produce(request) => produce(request, error_code)?.into(),
        RequestKind::Fetch(request) => fetch(request, api_version, error_code).into(),
        RequestKind::ListOffsets(request) => list_offsets(request, error_code).into(),
        RequestKind::Metadata(request) => metadata(request, error_code).into(),
        RequestKind::CreateTopics(request) => create_topics(request, error_code).into(),
        RequestKind::DeleteTopics(request) => {
            delete_topics(request, api_version, error_code).into()
        }
        RequestKind::DeleteRecords(request) => delete_records(request, error_code).into(),
        RequestKind::InitProducerId(_) => {
            let mut response = InitProducerIdResponse::default();
            response.error_code = error_code;
            response.producer_id = (-1).into();
            response.producer_epoch = -1;
            response.into()
        }
        RequestKind::OffsetForLeaderEpoch(request) => {
            offset_for_leader_epoch(request, error_code).into()
        }
        RequestKind::DescribeConfigs(request) => describe_configs(request, error_code).into(),
        RequestKind::SaslHandshake(_) => {
            let mut response = SaslHandshakeResponse::default();
            response.error_code = error_code;
            response.into()
        }
        RequestKind::SaslAuthenticate(_) => {
            let mut response = SaslAuthenticateResponse::default();
            response.error_code = error_code;
            response.into()
        }
        RequestKind::DescribeCluster(_) => {
            let mut response = DescribeClusterResponse::default();
            response.error_code = error_code;
            response.error_message = None;
            response.into()
        }
        // Kafka's DescribeTopicPartitionsRequest.getErrorResponse: every
        // requested topic with the error and no partitions.
        RequestKind::DescribeTopicPartitions(request) => {
            let mut response = DescribeTopicPartitionsResponse::default();
            response.topics = request
                .topics
                .iter()
                .map(|t| {
                    let mut topic = DescribeTopicPartitionsResponseTopic::default();
                    topic.name = Some(t.name.clone());
                    topic.error_code = error_code;
                    topic
                })
                .collect();
            response.into()
        }
        // Kafka's DescribeAclsRequest.getErrorResponse: a top-level error,
        // no resources.
        RequestKind::DescribeAcls(_) => {
            let mut response = DescribeAclsResponse::default();
            response.error_code = error_code;
            response.error_message = default_message(error_code);
            response.into()
        }
        // Kafka's CreateAclsRequest.getErrorResponse: the error for each
        // creation.
        RequestKind::CreateAcls(request) => {
            let mut response = CreateAclsResponse::default();
            response.results = request
                .creations
                .iter()
                .map(|_| {
                    let mut result = AclCreationResult::default();
                    result.error_code = error_code;
                    result.error_message = default_message(error_code);
                    result
                })
                .collect();
            response.into()
        }
        // Kafka's DeleteAclsRequest.getErrorResponse: the error for each
        // filter, with no matching ACLs.
        RequestKind::DeleteAcls(request) => {
            let mut response = DeleteAclsResponse::default();
            response.filter_results = request
                .filters
                .iter()
                .map(|_| {
                    let mut result = DeleteAclsFilterResult::default();
                    result.error_code = error_code;
                    result.error_message = default_message(error_code);
                    result
                })
                .collect();
            response.into()
        }
        // Kafka's AlterClientQuotasRequest.getErrorResponse: the error for
        // each entry, with its entity.
        RequestKind::AlterClientQuotas(request) => {
            let mut response = AlterClientQuotasResponse::default();
            response.entries = request
                .entries
                .iter()
                .map(|entry| {
                    let mut e = alter_client_quotas_response::EntryData::default();
                    e.error_code = error_code;
                    e.error_message = default_message(error_code);
                    e.entity = entry
                        .entity
                        .iter()
                        .map(|part| {
                            let mut d = alter_client_quotas_response::EntityData::default();
                            d.entity_type = part.entity_type.clone();
                            d.entity_name = part.entity_name.clone();
                            d
                        })
                        .collect();
                    e
                })
                .collect();
            response.into()
        }
        // Kafka's DescribeClientQuotasRequest.getErrorResponse: a
        // top-level error, no entries.
        RequestKind::DescribeClientQuotas(_) => {
            let mut response = DescribeClientQuotasResponse::default();
            response.error_code = error_code;
            response.error_message = default_message(error_code);
            response.entries = None;
            response.into()
        }
        // Kafka's DescribeUserScramCredentialsRequest.getErrorResponse: a
        // top-level error and one result with it per user named.
        RequestKind::DescribeUserScramCredentials(request) => {
            let mut response = DescribeUserScramCredentialsResponse::default();
            response.error_code = error_code;
            response.error_message = default_message(error_code);
            response.results = request
                .users
                .iter()
                .flatten()
                .map(|_| {
                    let mut result = DescribeUserScramCredentialsResult::default();
                    result.error_code = error_code;
                    result
                })
                .collect();
            response.into()
        }
        // Kafka's AlterUserScramCredentialsRequest.getErrorResponse: the
        // error for each user named, in name order.
        RequestKind::AlterUserScramCredentials(request) => {
            let users: std::collections::BTreeSet<&StrBytes> = request
                .deletions
                .iter()
                .map(|d| &d.name)
                .chain(request.upsertions.iter().map(|u| &u.name))
                .collect();
            let mut response = AlterUserScramCredentialsResponse::default();
            response.results = users
                .into_iter()
                .map(|user| {
                    let mut result = AlterUserScramCredentialsResult::default();
                    result.user = user.clone();
                    result.error_code = error_code;
                    result.error_message = default_message(error_code);
                    result
                })
                .collect();
            response.into()
        }
        // Kafka's DescribeQuorumRequest.getErrorResponse: a top-level error.
        RequestKind::DescribeQuorum(_) => {
            let mut response = DescribeQuorumResponse::default();
            response.error_code = error_code;
            response.error_message = default_message(error_code);
            response.into()
        }
        RequestKind::OffsetCommit(request) => offset_commit(request, error_code).into(),
        RequestKind::OffsetFetch(request) => offset_fetch(request, api_version, error_code).into(),
        RequestKind::FindCoordinator(request) => {
            find_coordinator(request, api_version, error_code).into()
        }
        RequestKind::JoinGroup(_) => {
            let mut response = JoinGroupResponse::default();
            response.error_code = error_code;
            response.generation_id = -1;
            response.protocol_name = (api_version < 7).then(|| StrBytes::from_static_str(""));
            response.into()
        }
        RequestKind::Heartbeat(_) => {
            let mut response = HeartbeatResponse::default();
            response.error_code = error_code;
            response.into()
        }
        RequestKind::LeaveGroup(_) => {
            let mut response = LeaveGroupResponse::default();
            response.error_code = error_code;
            response.into()
        }
        RequestKind::SyncGroup(_) => {
            let mut response = SyncGroupResponse::default();
            response.error_code = error_code;
            response.into()
        }
        RequestKind::DescribeGroups(request) => {
            let mut response = DescribeGroupsResponse::default();
            response.groups = request
                .groups
                .iter()
                .map(|group_id| {
                    let mut group = DescribedGroup::default();
                    group.group_id = group_id.clone();
                    group.error_code = error_code;
                    group.authorized_operations = i32::MIN;
                    group
                })
                .collect();
            response.into()
        }
        RequestKind::ListGroups(_) => {
            let mut response = ListGroupsResponse::default();
            response.error_code = error_code;
            response.into()
        }
        RequestKind::AlterConfigs(request) => {
            let mut response = AlterConfigsResponse::default();
            response.responses = request
                .resources
                .iter()
                .map(|resource| {
                    let mut result = LegacyAlterConfigsResourceResponse::default();
                    result.error_code = error_code;
                    result.resource_type = resource.resource_type;
                    result.resource_name = resource.resource_name.clone();
                    result
                })
                .collect();
            response.into()
        }
        // Kafka's ElectLeadersRequest.getErrorResponse: the error at the top
        // level (v1+) and on every listed partition.
        RequestKind::ElectLeaders(request) => {
            let mut response = ElectLeadersResponse::default();
            if api_version >= 1 {
                response.error_code = error_code;
            }
            response.replica_election_results = request
                .topic_partitions
                .iter()
                .flatten()
                .map(|topic| {
                    let mut result = ReplicaElectionResult::default();
                    result.topic = topic.topic.clone();
                    result.partition_result = topic
                        .partitions
                        .iter()
                        .map(|&partition_id| {
                            let mut p = ElectionPartitionResult::default();
                            p.partition_id = partition_id;
                            p.error_code = error_code;
                            p
                        })
                        .collect();
                    result
                })
                .collect();
            response.into()
        }
        RequestKind::CreatePartitions(request) => {
            let mut response = CreatePartitionsResponse::default();
            response.results = request
                .topics
                .iter()
                .map(|topic| {
                    let mut result = CreatePartitionsTopicResult::default();
                    result.name = topic.name.clone();
                    result.error_code = error_code;
                    result
                })
                .collect();
            response.into()
        }
        RequestKind::IncrementalAlterConfigs(request) => {
            let mut response = IncrementalAlterConfigsResponse::default();
            response.responses = request
                .resources
                .iter()
                .map(|resource| {
                    let mut result = AlterConfigsResourceResponse::default();
                    result.error_code = error_code;
                    result.resource_type = resource.resource_type;
                    result.resource_name = resource.resource_name.clone();
                    result
                })
                .collect();
            response.into()
        }
        RequestKind::DeleteGroups(request) => {
            let mut response = DeleteGroupsResponse::default();
            response.results = request
                .groups_names
                .iter()
                .map(|group_id| {
                    let mut result = DeletableGroupResult::default();
                    result.group_id = group_id.clone();
                    result.error_code = error_code;
                    result
                })
                .collect();
            response.into()
        }
        RequestKind::OffsetDelete(_) => {
            let mut response = OffsetDeleteResponse::default();
            response.error_code = error_code;
            response.into()
        }
        _ => return None,
    };
    Some(response)
}

/// OffsetCommit: every partition carries the error
/// (`OffsetCommitRequest.getErrorResponse`).
fn offset_commit(request: &OffsetCommitRequest, error_code: i16) -> OffsetCommitResponse {
    let mut response = OffsetCommitResponse::default();
    response.topics = request
        .topics
        .iter()
        .map(|topic| {
            let mut t = OffsetCommitResponseTopic::default();
            t.name = topic.name.clone();
            t.topic_id = topic.topic_id;
            t.partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let mut partition = OffsetCommitResponsePartition::default();
                    partition.partition_index = p.partition_index;
                    partition.error_code = error_code;
                    partition
                })
                .collect();
            t
        })
        .collect();
    response
}

/// OffsetFetch: v0-1 put the error on every partition (offset -1), v2-7
/// in the top-level error, v8+ on every group
/// (`OffsetFetchRequest.getErrorResponse`).
fn offset_fetch(
    request: &OffsetFetchRequest,
    api_version: i16,
    error_code: i16,
) -> OffsetFetchResponse {
    let mut response = OffsetFetchResponse::default();
    if api_version >= 8 {
        response.groups = request
            .groups
            .iter()
            .map(|g| {
                let mut group = OffsetFetchResponseGroup::default();
                group.group_id = g.group_id.clone();
                group.error_code = error_code;
                group
            })
            .collect();
        return response;
    }
    if api_version >= 2 {
        response.error_code = error_code;
        return response;
    }
    response.topics = request
        .topics
        .iter()
        .flatten()
        .map(|topic| {
            let mut t = OffsetFetchResponseTopic::default();
            t.name = topic.name.clone();
            t.partitions = topic
                .partition_indexes
                .iter()
                .map(|&index| {
                    let mut p = OffsetFetchResponsePartition::default();
                    p.partition_index = index;
                    p.committed_offset = -1;
                    p.committed_leader_epoch = -1;
                    p.metadata = Some(StrBytes::from_static_str(""));
                    p.error_code = error_code;
                    p
                })
                .collect();
            t
        })
        .collect();
    response
}

/// FindCoordinator: the top-level error before v4, one coordinator per key
/// from v4 (`FindCoordinatorRequest.getErrorResponse`).
fn find_coordinator(
    request: &FindCoordinatorRequest,
    api_version: i16,
    error_code: i16,
) -> FindCoordinatorResponse {
    let mut response = FindCoordinatorResponse::default();
    if api_version >= 4 {
        response.coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let mut c = Coordinator::default();
                c.key = key.clone();
                c.node_id = (-1).into();
                c.port = -1;
                c.error_code = error_code;
                c
            })
            .collect();
    } else {
        response.error_code = error_code;
        response.node_id = (-1).into();
        response.port = -1;
    }
    response
}

/// The API a request body belongs to, for the APIs [`error_response`]
/// covers; `None` for others.
pub fn request_api_key(request: &RequestKind) -> Option<ApiKey> {
    Some(match request {
        RequestKind::ApiVersions(_) => ApiKey::ApiVersions,
        RequestKind::Produce(_) => ApiKey::Produce,
        RequestKind::Fetch(_) => ApiKey::Fetch,
        RequestKind::ListOffsets(_) => ApiKey::ListOffsets,
        RequestKind::Metadata(_) => ApiKey::Metadata,
        RequestKind::CreateTopics(_) => ApiKey::CreateTopics,
        RequestKind::DeleteTopics(_) => ApiKey::DeleteTopics,
        RequestKind::DeleteRecords(_) => ApiKey::DeleteRecords,
        RequestKind::InitProducerId(_) => ApiKey::InitProducerId,
        RequestKind::OffsetForLeaderEpoch(_) => ApiKey::OffsetForLeaderEpoch,
        RequestKind::DescribeConfigs(_) => ApiKey::DescribeConfigs,
        RequestKind::DescribeCluster(_) => ApiKey::DescribeCluster,
        RequestKind::SaslHandshake(_) => ApiKey::SaslHandshake,
        RequestKind::SaslAuthenticate(_) => ApiKey::SaslAuthenticate,
        RequestKind::DescribeQuorum(_) => ApiKey::DescribeQuorum,
        RequestKind::DescribeClientQuotas(_) => ApiKey::DescribeClientQuotas,
        RequestKind::AlterClientQuotas(_) => ApiKey::AlterClientQuotas,
        RequestKind::DescribeAcls(_) => ApiKey::DescribeAcls,
        RequestKind::CreateAcls(_) => ApiKey::CreateAcls,
        RequestKind::DeleteAcls(_) => ApiKey::DeleteAcls,
        RequestKind::DescribeUserScramCredentials(_) => ApiKey::DescribeUserScramCredentials,
        RequestKind::AlterUserScramCredentials(_) => ApiKey::AlterUserScramCredentials,
        RequestKind::DescribeTopicPartitions(_) => ApiKey::DescribeTopicPartitions,
        RequestKind::OffsetCommit(_) => ApiKey::OffsetCommit,
        RequestKind::OffsetFetch(_) => ApiKey::OffsetFetch,
        RequestKind::FindCoordinator(_) => ApiKey::FindCoordinator,
        RequestKind::JoinGroup(_) => ApiKey::JoinGroup,
        RequestKind::Heartbeat(_) => ApiKey::Heartbeat,
        RequestKind::LeaveGroup(_) => ApiKey::LeaveGroup,
        RequestKind::SyncGroup(_) => ApiKey::SyncGroup,
        RequestKind::DescribeGroups(_) => ApiKey::DescribeGroups,
        RequestKind::ListGroups(_) => ApiKey::ListGroups,
        RequestKind::DeleteGroups(_) => ApiKey::DeleteGroups,
        RequestKind::IncrementalAlterConfigs(_) => ApiKey::IncrementalAlterConfigs,
        RequestKind::AlterConfigs(_) => ApiKey::AlterConfigs,
        RequestKind::CreatePartitions(_) => ApiKey::CreatePartitions,
        RequestKind::ElectLeaders(_) => ApiKey::ElectLeaders,
        RequestKind::OffsetDelete(_) => ApiKey::OffsetDelete,
        _ => return None,
    })
}

fn api_versions(error_code: i16) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.error_code = error_code;
    if error_code == UNSUPPORTED_VERSION {
        let entry = api_versions_entry();
        let mut version = ApiVersion::default();
        version.api_key = ApiKey::ApiVersions as i16;
        version.min_version = entry.min_version;
        version.max_version = entry.max_version;
        response.api_keys = vec![version];
    }
    response
}

fn produce(request: &ProduceRequest, error_code: i16) -> Option<ProduceResponse> {
    if request.acks == 0 {
        return None;
    }
    let mut response = ProduceResponse::default();
    response.responses = request
        .topic_data
        .iter()
        .map(|topic| {
            let mut result = TopicProduceResponse::default();
            result.name = topic.name.clone();
            result.topic_id = topic.topic_id;
            result.partition_responses = topic
                .partition_data
                .iter()
                .map(|partition| {
                    let mut out = PartitionProduceResponse::default();
                    out.index = partition.index;
                    out.error_code = error_code;
                    out.base_offset = -1;
                    out.log_append_time_ms = -1;
                    out.log_start_offset = -1;
                    out.error_message = None;
                    out
                })
                .collect();
            result
        })
        .collect();
    Some(response)
}

fn fetch(request: &FetchRequest, api_version: i16, error_code: i16) -> FetchResponse {
    let mut response = FetchResponse::default();
    response.error_code = error_code;
    response.session_id = request.session_id;
    if api_version < 13 {
        response.responses = request
            .topics
            .iter()
            .map(|topic| {
                let mut result = FetchableTopicResponse::default();
                result.topic = topic.topic.clone();
                result.topic_id = topic.topic_id;
                result.partitions = topic
                    .partitions
                    .iter()
                    .map(|partition| {
                        let mut out = PartitionData::default();
                        out.partition_index = partition.partition;
                        out.error_code = error_code;
                        out.high_watermark = -1;
                        out.last_stable_offset = -1;
                        out.log_start_offset = -1;
                        out.aborted_transactions = None;
                        out.preferred_read_replica = (-1).into();
                        out.records = Some(Bytes::new());
                        out
                    })
                    .collect();
                result
            })
            .collect();
    }
    response
}

fn list_offsets(request: &ListOffsetsRequest, error_code: i16) -> ListOffsetsResponse {
    let mut response = ListOffsetsResponse::default();
    response.topics = request
        .topics
        .iter()
        .map(|topic| {
            let mut result = ListOffsetsTopicResponse::default();
            result.name = topic.name.clone();
            result.partitions = topic
                .partitions
                .iter()
                .map(|partition| {
                    let mut out = ListOffsetsPartitionResponse::default();
                    out.partition_index = partition.partition_index;
                    out.error_code = error_code;
                    out.offset = -1;
                    out.timestamp = -1;
                    out.leader_epoch = -1;
                    out
                })
                .collect();
            result
        })
        .collect();
    response
}

fn metadata(request: &MetadataRequest, error_code: i16) -> MetadataResponse {
    let mut response = MetadataResponse::default();
    response.topics = request
        .topics
        .iter()
        .flatten()
        .map(|topic| {
            let mut result = MetadataResponseTopic::default();
            result.name = Some(topic.name.clone().unwrap_or_default());
            result.topic_id = topic.topic_id;
            result.error_code = error_code;
            result.is_internal = false;
            result.partitions = Vec::new();
            result
        })
        .collect();
    response
}

fn create_topics(request: &CreateTopicsRequest, error_code: i16) -> CreateTopicsResponse {
    let mut response = CreateTopicsResponse::default();
    response.topics = request
        .topics
        .iter()
        .map(|topic| {
            let mut result = CreatableTopicResult::default();
            result.name = topic.name.clone();
            result.error_code = error_code;
            result.error_message = None;
            result
        })
        .collect();
    response
}

fn delete_topics(
    request: &DeleteTopicsRequest,
    api_version: i16,
    error_code: i16,
) -> DeleteTopicsResponse {
    let result = |name: Option<TopicName>, topic_id| {
        let mut result = DeletableTopicResult::default();
        result.name = name;
        result.topic_id = topic_id;
        result.error_code = error_code;
        result.error_message = None;
        result
    };
    let mut response = DeleteTopicsResponse::default();
    response.responses = if api_version >= 6 {
        request
            .topics
            .iter()
            .map(|topic| result(topic.name.clone(), topic.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|name| result(Some(name.clone()), uuid::Uuid::nil()))
            .collect()
    };
    response
}

fn delete_records(request: &DeleteRecordsRequest, error_code: i16) -> DeleteRecordsResponse {
    let mut response = DeleteRecordsResponse::default();
    response.topics = request
        .topics
        .iter()
        .map(|topic| {
            let mut result = DeleteRecordsTopicResult::default();
            result.name = topic.name.clone();
            result.partitions = topic
                .partitions
                .iter()
                .map(|partition| {
                    let mut out = DeleteRecordsPartitionResult::default();
                    out.partition_index = partition.partition_index;
                    out.error_code = error_code;
                    out.low_watermark = -1;
                    out
                })
                .collect();
            result
        })
        .collect();
    response
}

fn offset_for_leader_epoch(
    request: &OffsetForLeaderEpochRequest,
    error_code: i16,
) -> OffsetForLeaderEpochResponse {
    let mut response = OffsetForLeaderEpochResponse::default();
    response.topics = request
        .topics
        .iter()
        .map(|topic| {
            let mut result = OffsetForLeaderTopicResult::default();
            result.topic = topic.topic.clone();
            result.partitions = topic
                .partitions
                .iter()
                .map(|partition| {
                    let mut out = EpochEndOffset::default();
                    out.partition = partition.partition;
                    out.error_code = error_code;
                    out.leader_epoch = -1;
                    out.end_offset = -1;
                    out
                })
                .collect();
            result
        })
        .collect();
    response
}

fn describe_configs(request: &DescribeConfigsRequest, error_code: i16) -> DescribeConfigsResponse {
    let mut response = DescribeConfigsResponse::default();
    response.results = request
        .resources
        .iter()
        .map(|resource| {
            let mut result = DescribeConfigsResult::default();
            result.error_code = error_code;
            result.error_message = None;
            result.resource_type = resource.resource_type;
            result.resource_name = resource.resource_name.clone();
            result.configs = Vec::new();
            result
        })
        .collect();
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api_table::SUPPORTED_APIS;
    use crate::codec::encode_response;
    use crate::test_support::populated_request;

    /// Partition-level (or topic-level where the API has no partitions)
    /// error codes in a decoded response.
    fn entry_errors(response: &ResponseKind) -> Vec<i16> {
        match response {
            ResponseKind::Produce(r) => r
                .responses
                .iter()
                .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code))
                .collect(),
            ResponseKind::Fetch(r) => r
                .responses
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect(),
            ResponseKind::ListOffsets(r) => r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect(),
            ResponseKind::Metadata(r) => r.topics.iter().map(|t| t.error_code).collect(),
            ResponseKind::CreateTopics(r) => r.topics.iter().map(|t| t.error_code).collect(),
            ResponseKind::DeleteTopics(r) => r.responses.iter().map(|t| t.error_code).collect(),
            ResponseKind::DeleteRecords(r) => r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect(),
            ResponseKind::OffsetForLeaderEpoch(r) => r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect(),
            ResponseKind::DescribeConfigs(r) => r.results.iter().map(|t| t.error_code).collect(),
            ResponseKind::OffsetCommit(r) => r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect(),
            ResponseKind::OffsetFetch(r) => r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .chain(r.groups.iter().map(|g| g.error_code))
                .collect(),
            ResponseKind::FindCoordinator(r) => {
                r.coordinators.iter().map(|c| c.error_code).collect()
            }
            ResponseKind::DescribeGroups(r) => r.groups.iter().map(|g| g.error_code).collect(),
            ResponseKind::DeleteGroups(r) => r.results.iter().map(|g| g.error_code).collect(),
            ResponseKind::IncrementalAlterConfigs(r) => {
                r.responses.iter().map(|g| g.error_code).collect()
            }
            ResponseKind::AlterConfigs(r) => r.responses.iter().map(|g| g.error_code).collect(),
            ResponseKind::CreatePartitions(r) => r.results.iter().map(|t| t.error_code).collect(),
            ResponseKind::DescribeTopicPartitions(r) => {
                r.topics.iter().map(|t| t.error_code).collect()
            }
            ResponseKind::ElectLeaders(r) => r
                .replica_election_results
                .iter()
                .flat_map(|t| t.partition_result.iter().map(|p| p.error_code))
                .collect(),
            ResponseKind::DescribeUserScramCredentials(r) => {
                r.results.iter().map(|u| u.error_code).collect()
            }
            ResponseKind::AlterUserScramCredentials(r) => {
                r.results.iter().map(|u| u.error_code).collect()
            }
            ResponseKind::CreateAcls(r) => r.results.iter().map(|c| c.error_code).collect(),
            ResponseKind::AlterClientQuotas(r) => r.entries.iter().map(|e| e.error_code).collect(),
            ResponseKind::DeleteAcls(r) => r.filter_results.iter().map(|f| f.error_code).collect(),
            _ => Vec::new(),
        }
    }

    /// How many entries the request names, in the unit `entry_errors` counts.
    fn requested_entries(request: &RequestKind, v: i16) -> usize {
        match request {
            RequestKind::Produce(r) => r.topic_data.iter().map(|t| t.partition_data.len()).sum(),
            RequestKind::Fetch(r) if v < 13 => r.topics.iter().map(|t| t.partitions.len()).sum(),
            RequestKind::ListOffsets(r) => r.topics.iter().map(|t| t.partitions.len()).sum(),
            RequestKind::Metadata(r) => r.topics.as_ref().map_or(0, Vec::len),
            RequestKind::CreateTopics(r) => r.topics.len(),
            RequestKind::DeleteTopics(r) if v >= 6 => r.topics.len(),
            RequestKind::DeleteTopics(r) => r.topic_names.len(),
            RequestKind::DeleteRecords(r) => r.topics.iter().map(|t| t.partitions.len()).sum(),
            RequestKind::OffsetForLeaderEpoch(r) => {
                r.topics.iter().map(|t| t.partitions.len()).sum()
            }
            RequestKind::DescribeConfigs(r) => r.resources.len(),
            RequestKind::OffsetCommit(r) => r.topics.iter().map(|t| t.partitions.len()).sum(),
            RequestKind::OffsetFetch(r) if v < 2 => r
                .topics
                .iter()
                .flatten()
                .map(|t| t.partition_indexes.len())
                .sum(),
            RequestKind::OffsetFetch(r) if v >= 8 => r.groups.len(),
            RequestKind::FindCoordinator(r) if v >= 4 => r.coordinator_keys.len(),
            RequestKind::DescribeGroups(r) => r.groups.len(),
            RequestKind::DeleteGroups(r) => r.groups_names.len(),
            RequestKind::IncrementalAlterConfigs(r) => r.resources.len(),
            RequestKind::AlterConfigs(r) => r.resources.len(),
            RequestKind::CreatePartitions(r) => r.topics.len(),
            RequestKind::DescribeTopicPartitions(r) => r.topics.len(),
            RequestKind::ElectLeaders(r) => r
                .topic_partitions
                .iter()
                .flatten()
                .map(|t| t.partitions.len())
                .sum(),
            RequestKind::DescribeUserScramCredentials(r) => r.users.as_ref().map_or(0, Vec::len),
            RequestKind::AlterUserScramCredentials(r) => r
                .deletions
                .iter()
                .map(|d| &d.name)
                .chain(r.upsertions.iter().map(|u| &u.name))
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            RequestKind::CreateAcls(r) => r.creations.len(),
            RequestKind::AlterClientQuotas(r) => r.entries.len(),
            RequestKind::DeleteAcls(r) => r.filters.len(),
            _ => 0,
        }
    }

    fn top_level_error(response: &ResponseKind, v: i16) -> Option<i16> {
        match response {
            ResponseKind::ApiVersions(r) => Some(r.error_code),
            ResponseKind::Fetch(r) if v >= 7 => Some(r.error_code),
            ResponseKind::InitProducerId(r) => Some(r.error_code),
            ResponseKind::DescribeCluster(r) => Some(r.error_code),
            ResponseKind::SaslHandshake(r) => Some(r.error_code),
            ResponseKind::SaslAuthenticate(r) => Some(r.error_code),
            ResponseKind::DescribeQuorum(r) => Some(r.error_code),
            ResponseKind::DescribeUserScramCredentials(r) => Some(r.error_code),
            ResponseKind::DescribeClientQuotas(r) => Some(r.error_code),
            ResponseKind::DescribeAcls(r) => Some(r.error_code),
            ResponseKind::OffsetFetch(r) if (2..8).contains(&v) => Some(r.error_code),
            ResponseKind::FindCoordinator(r) if v < 4 => Some(r.error_code),
            ResponseKind::JoinGroup(r) => Some(r.error_code),
            ResponseKind::Heartbeat(r) => Some(r.error_code),
            ResponseKind::LeaveGroup(r) => Some(r.error_code),
            ResponseKind::SyncGroup(r) => Some(r.error_code),
            ResponseKind::ListGroups(r) => Some(r.error_code),
            ResponseKind::OffsetDelete(r) => Some(r.error_code),
            ResponseKind::ElectLeaders(r) if v >= 1 => Some(r.error_code),
            _ => None,
        }
    }

    /// A refused request's message is Kafka's default for the code, never
    /// the crate's empty string (`kafka-acls` printed
    /// "ClusterAuthorizationException: " with nothing after it).
    #[test]
    fn refusals_carry_kafkas_default_message() {
        let request = populated_request(ApiKey::DescribeAcls, 3);
        let Some(ResponseKind::DescribeAcls(r)) = error_response(&request, 3, 31) else {
            panic!("no DescribeAcls error response");
        };
        assert_eq!(
            r.error_message.as_deref(),
            Some("Cluster authorization failed.")
        );
        let request = populated_request(ApiKey::CreateAcls, 3);
        let Some(ResponseKind::CreateAcls(r)) = error_response(&request, 3, 31) else {
            panic!("no CreateAcls error response");
        };
        assert!(r
            .results
            .iter()
            .all(|c| c.error_message.as_deref() == Some("Cluster authorization failed.")));
    }

    /// Every API in the table, at every version in its advertised-and-served
    /// range, gets an error response that encodes, decodes back, and
    /// carries the error on every requested entry.
    #[test]
    fn error_response_encodes_at_every_table_version_and_mirrors_the_request() {
        for entry in SUPPORTED_APIS {
            for v in entry.min_served_version..=entry.max_version {
                let request = populated_request(entry.api_key, v);
                assert_eq!(request_api_key(&request), Some(entry.api_key));
                let response = error_response(&request, v, 35).unwrap();
                let encoded = encode_response(entry.api_key, v, 17, &response)
                    .unwrap_or_else(|e| panic!("{:?} v{v}: {e}", entry.api_key));
                let header_version = crate::codec::response_header_version(entry.api_key, v);
                let mut body = Bytes::copy_from_slice(&encoded[8 + header_version as usize..]);
                let decoded = ResponseKind::decode(entry.api_key, &mut body, v).unwrap();
                assert!(body.is_empty(), "{:?} v{v}", entry.api_key);

                let errors = entry_errors(&decoded);
                assert_eq!(
                    errors.len(),
                    requested_entries(&request, v),
                    "{:?} v{v}",
                    entry.api_key
                );
                assert!(
                    errors.iter().all(|&code| code == 35),
                    "{:?} v{v}",
                    entry.api_key
                );
                if let Some(code) = top_level_error(&decoded, v) {
                    assert_eq!(code, 35, "{:?} v{v}", entry.api_key);
                }
                assert!(
                    !errors.is_empty() || top_level_error(&decoded, v).is_some(),
                    "{:?} v{v} reports the error nowhere",
                    entry.api_key
                );
            }
        }
    }

    #[test]
    fn api_versions_error_lists_only_api_versions_for_unsupported_version() {
        let request = populated_request(ApiKey::ApiVersions, 3);
        let Some(ResponseKind::ApiVersions(response)) = error_response(&request, 3, 35) else {
            panic!("expected ApiVersions response");
        };
        assert_eq!(response.api_keys.len(), 1);
        assert_eq!(response.api_keys[0].api_key, ApiKey::ApiVersions as i16);
        let Some(ResponseKind::ApiVersions(response)) = error_response(&request, 3, 42) else {
            panic!("expected ApiVersions response");
        };
        assert!(response.api_keys.is_empty());
    }

    #[test]
    fn produce_with_acks_0_gets_no_response() {
        let RequestKind::Produce(mut request) = populated_request(ApiKey::Produce, 9) else {
            unreachable!()
        };
        request.acks = 0;
        assert_eq!(error_response(&request.into(), 9, 35), None);
    }

    #[test]
    fn fetch_v13_reports_only_the_top_level_error_and_echoes_the_session() {
        let request = populated_request(ApiKey::Fetch, 13);
        let Some(ResponseKind::Fetch(response)) = error_response(&request, 13, 35) else {
            panic!("expected Fetch response");
        };
        assert!(response.responses.is_empty());
        assert_eq!((response.error_code, response.session_id), (35, 5));
        let Some(ResponseKind::Fetch(response)) =
            error_response(&populated_request(ApiKey::Fetch, 12), 12, 35)
        else {
            panic!("expected Fetch response");
        };
        let partition = &response.responses[0].partitions[0];
        assert_eq!(
            (
                partition.high_watermark,
                partition.last_stable_offset,
                partition.log_start_offset
            ),
            (-1, -1, -1)
        );
        assert_eq!(partition.records.as_deref(), Some(&[][..]));
    }

    #[test]
    fn apis_outside_the_table_get_none() {
        let request = RequestKind::DescribeLogDirs(Default::default());
        assert_eq!(error_response(&request, 2, 35), None);
        assert_eq!(request_api_key(&request), None);
    }
}
