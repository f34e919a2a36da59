//! The few Kafka requests the chaos workload and nemesis send, over
//! [`RawClient`], returning errors instead of panicking (a broker under
//! faults closes connections and answers retriable errors all the time).
//!
//! Versions are the newest both the broker (its ApiVersions table) and the
//! `kafka-protocol` crate speak, chosen once per run ([`Versions`]).

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopicPartition;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ConsumerProtocolAssignment, ConsumerProtocolSubscription,
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeQuorumRequest,
    ElectLeadersRequest, FetchRequest, FindCoordinatorRequest, GroupId, HeartbeatRequest,
    InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest, ListOffsetsRequest,
    MetadataRequest, OffsetCommitRequest, OffsetFetchRequest, ProduceRequest, SyncGroupRequest,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use crate::records::{self, NewRecord};
use crate::RawClient;

/// Kafka's name for error `code` (`NONE` for 0), e.g. `NotLeaderOrFollower`.
pub fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".to_owned(),
        Some(e) => format!("{e:?}"),
    }
}

/// The API versions a run uses.
#[derive(Debug, Clone, Copy)]
pub struct Versions {
    /// Metadata (v10+ carries topic ids).
    pub metadata: i16,
    /// Produce.
    pub produce: i16,
    /// Fetch (v13+ names topics by id).
    pub fetch: i16,
    /// ListOffsets.
    pub list_offsets: i16,
    /// InitProducerId.
    pub init_producer_id: i16,
    /// CreateTopics.
    pub create_topics: i16,
    /// DescribeQuorum.
    pub describe_quorum: i16,
    /// DeleteTopics.
    pub delete_topics: i16,
    /// CreatePartitions.
    pub create_partitions: i16,
    /// ElectLeaders.
    pub elect_leaders: i16,
}

impl Versions {
    /// Asks `client`'s broker for its ApiVersions table and picks, per API,
    /// the newest version both sides speak.
    ///
    /// # Errors
    ///
    /// A message when the request fails or an API has no common version.
    pub fn negotiate(client: &mut RawClient) -> Result<Self, String> {
        let response = client
            .send(
                &ApiVersionsRequest::default()
                    .with_client_software_name(StrBytes::from_static_str("weir-chaos"))
                    .with_client_software_version(StrBytes::from_static_str("0.1.0")),
                3,
            )
            .map_err(|e| format!("ApiVersions: {e}"))?;
        let newest = |key: ApiKey, crate_max: i16| -> Result<i16, String> {
            let range = response
                .api_keys
                .iter()
                .find(|v| v.api_key == key as i16)
                .ok_or_else(|| format!("{key:?} is not advertised"))?;
            let version = range.max_version.min(crate_max);
            if version < range.min_version {
                return Err(format!("no common {key:?} version"));
            }
            Ok(version)
        };
        Ok(Self {
            metadata: newest(ApiKey::Metadata, MetadataRequest::VERSIONS.max)?,
            produce: newest(ApiKey::Produce, ProduceRequest::VERSIONS.max)?,
            fetch: newest(ApiKey::Fetch, FetchRequest::VERSIONS.max)?,
            list_offsets: newest(ApiKey::ListOffsets, ListOffsetsRequest::VERSIONS.max)?,
            init_producer_id: newest(ApiKey::InitProducerId, InitProducerIdRequest::VERSIONS.max)?,
            create_topics: newest(ApiKey::CreateTopics, CreateTopicsRequest::VERSIONS.max)?,
            describe_quorum: newest(ApiKey::DescribeQuorum, DescribeQuorumRequest::VERSIONS.max)?,
            delete_topics: newest(ApiKey::DeleteTopics, DeleteTopicsRequest::VERSIONS.max)?,
            create_partitions: newest(
                ApiKey::CreatePartitions,
                CreatePartitionsRequest::VERSIONS.max,
            )?,
            elect_leaders: newest(ApiKey::ElectLeaders, ElectLeadersRequest::VERSIONS.max)?,
        })
    }
}

/// One partition as a node's Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    /// The partition index.
    pub partition: i32,
    /// The partition's error code.
    pub error: i16,
    /// The leader's node id (-1 when there is none).
    pub leader: i32,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The ISR's node ids, sorted.
    pub isr: Vec<i32>,
}

/// A topic as a node's Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicState {
    /// The topic id.
    pub id: Uuid,
    /// Its partitions, by index.
    pub partitions: Vec<PartitionState>,
}

/// `topic` in the Metadata of `client`'s node (no auto-creation); `Ok(None)`
/// when the node does not know it (yet).
///
/// # Errors
///
/// A message when the request fails.
pub fn topic_state(
    client: &mut RawClient,
    versions: &Versions,
    topic: &str,
) -> Result<Option<TopicState>, String> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
            TopicName(StrBytes::from_string(topic.to_owned())),
        ))]))
        .with_allow_auto_topic_creation(false);
    let response = client
        .send(&request, versions.metadata)
        .map_err(|e| format!("Metadata: {e}"))?;
    let Some(t) = response.topics.first() else {
        return Ok(None);
    };
    if t.error_code != 0 {
        return Ok(None);
    }
    let mut partitions: Vec<PartitionState> = t
        .partitions
        .iter()
        .map(|p| {
            let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
            isr.sort_unstable();
            PartitionState {
                partition: p.partition_index,
                error: p.error_code,
                leader: p.leader_id.0,
                leader_epoch: p.leader_epoch,
                isr,
            }
        })
        .collect();
    partitions.sort_by_key(|p| p.partition);
    Ok(Some(TopicState {
        id: t.topic_id,
        partitions,
    }))
}

/// Sends CreateTopics for `name` with `partitions` partitions, replication
/// factor `replication_factor` and `configs`; returns the topic's error code
/// (0, or TOPIC_ALREADY_EXISTS on a retry, are success).
///
/// # Errors
///
/// A message when the request fails.
pub fn create_topic(
    client: &mut RawClient,
    versions: &Versions,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(&str, &str)],
) -> Result<i16, String> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
            .with_num_partitions(partitions)
            .with_replication_factor(replication_factor)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string((*k).to_owned()))
                            .with_value(Some(StrBytes::from_string((*v).to_owned())))
                    })
                    .collect(),
            )]);
    let response = client
        .send(&request, versions.create_topics)
        .map_err(|e| format!("CreateTopics: {e}"))?;
    Ok(response.topics.first().map_or(-1, |t| t.error_code))
}

/// Sends DeleteTopics for `name` (by name at every version); returns the
/// topic's error code.
///
/// # Errors
///
/// A message when the request fails.
pub fn delete_topic(
    client: &mut RawClient,
    versions: &Versions,
    name: &str,
) -> Result<i16, String> {
    let topic = TopicName(StrBytes::from_string(name.to_owned()));
    let mut request = DeleteTopicsRequest::default().with_timeout_ms(10_000);
    if versions.delete_topics >= 6 {
        request.topics = vec![DeleteTopicState::default().with_name(Some(topic))];
    } else {
        request.topic_names = vec![topic];
    }
    let response = client
        .send(&request, versions.delete_topics)
        .map_err(|e| format!("DeleteTopics: {e}"))?;
    Ok(response.responses.first().map_or(-1, |t| t.error_code))
}

/// Sends CreatePartitions raising `name` to `count` partitions (replicas
/// placed by the controller); returns the topic's error code.
///
/// # Errors
///
/// A message when the request fails.
pub fn create_partitions(
    client: &mut RawClient,
    versions: &Versions,
    name: &str,
    count: i32,
) -> Result<i16, String> {
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
            .with_count(count)]);
    let response = client
        .send(&request, versions.create_partitions)
        .map_err(|e| format!("CreatePartitions: {e}"))?;
    Ok(response.results.first().map_or(-1, |t| t.error_code))
}

/// Sends ElectLeaders (preferred, KIP-460) for `partitions` of `name`;
/// returns the top-level error code, else the first partition error other
/// than ELECTION_NOT_NEEDED (84), else 0.
///
/// # Errors
///
/// A message when the request fails.
pub fn elect_preferred_leaders(
    client: &mut RawClient,
    versions: &Versions,
    name: &str,
    partitions: Vec<i32>,
) -> Result<i16, String> {
    let request = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_timeout_ms(10_000)
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(TopicName(StrBytes::from_string(name.to_owned())))
            .with_partitions(partitions)]));
    let response = client
        .send(&request, versions.elect_leaders)
        .map_err(|e| format!("ElectLeaders: {e}"))?;
    if response.error_code != 0 {
        return Ok(response.error_code);
    }
    Ok(response
        .replica_election_results
        .iter()
        .flat_map(|t| &t.partition_result)
        .map(|p| p.error_code)
        .find(|&code| code != 0 && code != 84)
        .unwrap_or(0))
}

/// Every topic in the Metadata of `client`'s node with its partition
/// count (topics whose entry carries an error are left out).
///
/// # Errors
///
/// A message when the request fails.
pub fn all_topics(
    client: &mut RawClient,
    versions: &Versions,
) -> Result<std::collections::BTreeMap<String, i32>, String> {
    let request = MetadataRequest::default()
        .with_topics(None)
        .with_allow_auto_topic_creation(false);
    let response = client
        .send(&request, versions.metadata)
        .map_err(|e| format!("Metadata: {e}"))?;
    Ok(response
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .filter_map(|t| {
            t.name
                .as_ref()
                .map(|n| (n.0.to_string(), t.partitions.len() as i32))
        })
        .collect())
}

/// A new idempotent producer id and epoch (InitProducerId without a
/// transactional id, KIP-98).
///
/// # Errors
///
/// A message when the request fails or answers an error.
pub fn init_producer_id(client: &mut RawClient, versions: &Versions) -> Result<(i64, i16), String> {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000);
    let response = client
        .send(&request, versions.init_producer_id)
        .map_err(|e| format!("InitProducerId: {e}"))?;
    if response.error_code != 0 {
        return Err(format!(
            "InitProducerId: {}",
            error_name(response.error_code)
        ));
    }
    Ok((response.producer_id.0, response.producer_epoch))
}

/// One record batch holding `value` from idempotent producer
/// `producer_id`/`epoch` at sequence `sequence` (KIP-98 batch header fields,
/// CRC-32C recomputed).
pub fn idempotent_batch(producer_id: i64, epoch: i16, sequence: i32, value: &str) -> Bytes {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let batch = records::encode_batch(
        &[NewRecord::value(value.to_owned(), now_ms)],
        Compression::None,
    )
    .expect("an uncompressed batch always encodes");
    records::with_producer(&batch, producer_id, epoch, sequence)
}

/// The answer to one Produce of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceAnswer {
    /// The partition's error code.
    pub error: i16,
    /// The base offset (meaningful when `error` is 0).
    pub base_offset: i64,
}

/// Produces `batch` to `topic`/`partition` with acks=all and the broker-side
/// `timeout_ms`.
///
/// # Errors
///
/// A message when the request fails (connection closed, read timeout): the
/// batch may or may not have been appended.
pub fn produce(
    client: &mut RawClient,
    versions: &Versions,
    topic: &str,
    topic_id: Uuid,
    partition: i32,
    batch: Bytes,
    timeout_ms: i32,
) -> Result<ProduceAnswer, String> {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_topic_id(topic_id)
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])]);
    let response = client
        .send(&request, versions.produce)
        .map_err(|e| format!("Produce: {e}"))?;
    let answer = response
        .responses
        .first()
        .and_then(|t| t.partition_responses.iter().find(|p| p.index == partition))
        .ok_or_else(|| "Produce: the response lacks the partition".to_owned())?;
    Ok(ProduceAnswer {
        error: answer.error_code,
        base_offset: answer.base_offset,
    })
}

/// The answer to one Fetch of one partition.
#[derive(Debug, Clone)]
pub struct FetchAnswer {
    /// The partition's error code.
    pub error: i16,
    /// The high watermark.
    pub high_watermark: i64,
    /// (offset, value) of every record at or after the fetch offset.
    pub records: Vec<(i64, String)>,
}

/// Fetches `topic`/`partition` from `offset` as a consumer (replica id -1,
/// read uncommitted), waiting at most `max_wait_ms` for data.
///
/// # Errors
///
/// A message when the request fails or the records do not decode.
pub fn fetch(
    client: &mut RawClient,
    versions: &Versions,
    topic: &str,
    topic_id: Uuid,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
) -> Result<FetchAnswer, String> {
    let request = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_topic_id(topic_id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])]);
    let response = client
        .send(&request, versions.fetch)
        .map_err(|e| format!("Fetch: {e}"))?;
    if response.error_code != 0 {
        return Ok(FetchAnswer {
            error: response.error_code,
            high_watermark: -1,
            records: Vec::new(),
        });
    }
    let data = response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == partition)
        .ok_or_else(|| "Fetch: the response lacks the partition".to_owned())?;
    let bytes = data.records.clone().unwrap_or_default();
    let decoded = records::decode_records(&bytes).map_err(|e| format!("Fetch records: {e}"))?;
    Ok(FetchAnswer {
        error: data.error_code,
        high_watermark: data.high_watermark,
        records: decoded
            .iter()
            .filter(|r| r.offset >= offset)
            .map(|r| (r.offset, records::value_text(r)))
            .collect(),
    })
}

/// ListOffsets `LATEST` (read_uncommitted) for `partition`: the high
/// watermark, or the partition's error code when the node answers an error.
///
/// # Errors
///
/// A message when the request fails.
pub fn latest_offset(
    client: &mut RawClient,
    versions: &Versions,
    topic: &str,
    partition: i32,
) -> Result<Result<i64, i16>, String> {
    Ok(high_watermark(client, versions, topic, partition)?.map(|(offset, _)| offset))
}

/// ListOffsets `LATEST` (read_uncommitted) for `partition`: the high
/// watermark and the answering leader's epoch (-1 before ListOffsets v4,
/// KIP-320), or the partition's error code when the node answers an error.
///
/// # Errors
///
/// A message when the request fails.
pub fn high_watermark(
    client: &mut RawClient,
    versions: &Versions,
    topic: &str,
    partition: i32,
) -> Result<Result<(i64, i32), i16>, String> {
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_isolation_level(0)
        .with_timeout_ms(10_000)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(-1)])]);
    let response = client
        .send(&request, versions.list_offsets)
        .map_err(|e| format!("ListOffsets: {e}"))?;
    let p = response
        .topics
        .first()
        .and_then(|t| t.partitions.iter().find(|p| p.partition_index == partition))
        .ok_or_else(|| "ListOffsets: the response lacks the partition".to_owned())?;
    Ok(if p.error_code == 0 {
        Ok((p.offset, p.leader_epoch))
    } else {
        Err(p.error_code)
    })
}

/// DescribeQuorum of `__cluster_metadata`: the quorum leader's id (-1 when
/// unknown) and the quorum epoch as the node knows them (KIP-595).
///
/// # Errors
///
/// A message when the request fails or answers an error.
pub fn quorum_state(client: &mut RawClient, versions: &Versions) -> Result<(i32, i32), String> {
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let response = client
        .send(&request, versions.describe_quorum)
        .map_err(|e| format!("DescribeQuorum: {e}"))?;
    if response.error_code != 0 {
        return Err(format!(
            "DescribeQuorum: {}",
            error_name(response.error_code)
        ));
    }
    let p = response
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| "DescribeQuorum: the response lacks the partition".to_owned())?;
    if p.error_code != 0 {
        return Err(format!("DescribeQuorum: {}", error_name(p.error_code)));
    }
    Ok((p.leader_id.0, p.leader_epoch))
}

// The consumer group workload ([`super::group`]) speaks fixed versions of
// the group APIs, all inside Weir's ApiVersions ranges: new enough for
// MEMBER_ID_REQUIRED (JoinGroup v4+, KIP-394) and the batched LeaveGroup
// (v3+, KIP-345), old enough to keep one group per OffsetFetch.
const FIND_COORDINATOR_VERSION: i16 = 3;
const JOIN_GROUP_VERSION: i16 = 5;
const SYNC_GROUP_VERSION: i16 = 3;
const HEARTBEAT_VERSION: i16 = 3;
const OFFSET_COMMIT_VERSION: i16 = 7;
const OFFSET_FETCH_VERSION: i16 = 7;
const LEAVE_GROUP_VERSION: i16 = 3;
/// The assignor name the workload's members announce (the broker treats
/// it as opaque; the leader assigns partitions round-robin).
const ASSIGNOR: &str = "range";

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_owned()))
}

fn str_bytes(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// The coordinator of `group` as `client`'s node names it: `Ok(node id)`,
/// or `Err(error code)` (COORDINATOR_NOT_AVAILABLE while
/// `__consumer_offsets` has no leader).
///
/// # Errors
///
/// A message when the request fails.
pub fn find_coordinator(client: &mut RawClient, group: &str) -> Result<Result<i32, i16>, String> {
    let response = client
        .send(
            &FindCoordinatorRequest::default()
                .with_key(str_bytes(group))
                .with_key_type(0),
            FIND_COORDINATOR_VERSION,
        )
        .map_err(|e| format!("FindCoordinator: {e}"))?;
    Ok(match response.error_code {
        0 => Ok(response.node_id.0),
        code => Err(code),
    })
}

/// A JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The error code (MEMBER_ID_REQUIRED carries `member_id` to join
    /// with).
    pub error: i16,
    /// The generation.
    pub generation: i32,
    /// This member's id.
    pub member_id: String,
    /// The leader's member id.
    pub leader: String,
    /// Every member's id (only the leader is told), sorted.
    pub members: Vec<String>,
}

/// A `ConsumerProtocolSubscription` (version 0) of `topic`, the protocol
/// metadata of a Java consumer's JoinGroup.
fn subscription(topic: &str) -> Bytes {
    let mut buf = bytes::BytesMut::new();
    buf.put_i16(0);
    ConsumerProtocolSubscription::default()
        .with_topics(vec![str_bytes(topic)])
        .encode(&mut buf, 0)
        .expect("a subscription encodes");
    buf.freeze()
}

/// JoinGroup (v5) of `group` subscribing to `topic`; `member_id` is empty
/// for a new member.
///
/// # Errors
///
/// A message when the request fails.
pub fn join_group(
    client: &mut RawClient,
    group: &str,
    member_id: &str,
    topic: &str,
    session_timeout_ms: i32,
) -> Result<Joined, String> {
    let response = client
        .send(
            &JoinGroupRequest::default()
                .with_group_id(group_id(group))
                .with_session_timeout_ms(session_timeout_ms)
                .with_rebalance_timeout_ms(session_timeout_ms)
                .with_member_id(str_bytes(member_id))
                .with_protocol_type(str_bytes("consumer"))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(str_bytes(ASSIGNOR))
                    .with_metadata(subscription(topic))]),
            JOIN_GROUP_VERSION,
        )
        .map_err(|e| format!("JoinGroup: {e}"))?;
    let mut members: Vec<String> = response
        .members
        .iter()
        .map(|m| m.member_id.to_string())
        .collect();
    members.sort();
    Ok(Joined {
        error: response.error_code,
        generation: response.generation_id,
        member_id: response.member_id.to_string(),
        leader: response.leader.to_string(),
        members,
    })
}

/// SyncGroup (v3); the leader passes every member's partitions of `topic`,
/// the others nothing. Returns the error code and this member's partitions.
///
/// # Errors
///
/// A message when the request fails or the assignment does not decode.
pub fn sync_group(
    client: &mut RawClient,
    group: &str,
    joined: &Joined,
    topic: &str,
    assignments: &BTreeMap<String, Vec<i32>>,
) -> Result<(i16, Vec<i32>), String> {
    let assignments = assignments
        .iter()
        .map(|(member, partitions)| {
            let mut buf = bytes::BytesMut::new();
            buf.put_i16(0);
            ConsumerProtocolAssignment::default()
                .with_assigned_partitions(vec![AssignedTopicPartition::default()
                    .with_topic(TopicName(str_bytes(topic)))
                    .with_partitions(partitions.clone())])
                .encode(&mut buf, 0)
                .expect("an assignment encodes");
            SyncGroupRequestAssignment::default()
                .with_member_id(str_bytes(member))
                .with_assignment(buf.freeze())
        })
        .collect();
    let response = client
        .send(
            &SyncGroupRequest::default()
                .with_group_id(group_id(group))
                .with_generation_id(joined.generation)
                .with_member_id(str_bytes(&joined.member_id))
                .with_assignments(assignments),
            SYNC_GROUP_VERSION,
        )
        .map_err(|e| format!("SyncGroup: {e}"))?;
    if response.error_code != 0 || response.assignment.is_empty() {
        return Ok((response.error_code, Vec::new()));
    }
    let mut bytes = response.assignment.clone();
    if bytes.remaining() < 2 {
        return Err("SyncGroup: assignment without a version".to_owned());
    }
    let version = bytes.get_i16();
    let assignment = ConsumerProtocolAssignment::decode(&mut bytes, version.clamp(0, 3))
        .map_err(|e| format!("SyncGroup: assignment: {e}"))?;
    let mut partitions: Vec<i32> = assignment
        .assigned_partitions
        .iter()
        .filter(|t| t.topic.0.as_str() == topic)
        .flat_map(|t| t.partitions.iter().copied())
        .collect();
    partitions.sort_unstable();
    Ok((0, partitions))
}

/// Heartbeat (v3) in `joined`'s generation; returns the error code.
///
/// # Errors
///
/// A message when the request fails.
pub fn heartbeat(client: &mut RawClient, group: &str, joined: &Joined) -> Result<i16, String> {
    let response = client
        .send(
            &HeartbeatRequest::default()
                .with_group_id(group_id(group))
                .with_generation_id(joined.generation)
                .with_member_id(str_bytes(&joined.member_id)),
            HEARTBEAT_VERSION,
        )
        .map_err(|e| format!("Heartbeat: {e}"))?;
    Ok(response.error_code)
}

/// OffsetCommit (v7) of `offsets` (partition -> next offset to read) of
/// `topic` in `joined`'s generation; returns the first partition error
/// code, or 0.
///
/// # Errors
///
/// A message when the request fails.
pub fn offset_commit(
    client: &mut RawClient,
    group: &str,
    joined: &Joined,
    topic: &str,
    offsets: &BTreeMap<i32, i64>,
) -> Result<i16, String> {
    let response = client
        .send(
            &OffsetCommitRequest::default()
                .with_group_id(group_id(group))
                .with_generation_id_or_member_epoch(joined.generation)
                .with_member_id(str_bytes(&joined.member_id))
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(TopicName(str_bytes(topic)))
                    .with_partitions(
                        offsets
                            .iter()
                            .map(|(&partition, &offset)| {
                                OffsetCommitRequestPartition::default()
                                    .with_partition_index(partition)
                                    .with_committed_offset(offset)
                                    .with_committed_leader_epoch(-1)
                            })
                            .collect(),
                    )]),
            OFFSET_COMMIT_VERSION,
        )
        .map_err(|e| format!("OffsetCommit: {e}"))?;
    Ok(response
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.error_code)
        .find(|&code| code != 0)
        .unwrap_or(0))
}

/// OffsetFetch (v7) of `partitions` of `topic`: `Ok(partition -> committed
/// offset, -1 for none)`, or `Err(error code)` (the group's or the first
/// partition's).
///
/// # Errors
///
/// A message when the request fails.
pub fn offset_fetch(
    client: &mut RawClient,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> Result<Result<BTreeMap<i32, i64>, i16>, String> {
    let response = client
        .send(
            &OffsetFetchRequest::default()
                .with_group_id(group_id(group))
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(TopicName(str_bytes(topic)))
                    .with_partition_indexes(partitions.to_vec())])),
            OFFSET_FETCH_VERSION,
        )
        .map_err(|e| format!("OffsetFetch: {e}"))?;
    if response.error_code != 0 {
        return Ok(Err(response.error_code));
    }
    let mut offsets = BTreeMap::new();
    for p in response.topics.iter().flat_map(|t| &t.partitions) {
        if p.error_code != 0 {
            return Ok(Err(p.error_code));
        }
        offsets.insert(p.partition_index, p.committed_offset);
    }
    if partitions.iter().any(|p| !offsets.contains_key(p)) {
        return Err(format!("OffsetFetch: partitions missing from {offsets:?}"));
    }
    Ok(Ok(offsets))
}

/// LeaveGroup (v3) of one member; returns the error code.
///
/// # Errors
///
/// A message when the request fails.
pub fn leave_group(client: &mut RawClient, group: &str, member_id: &str) -> Result<i16, String> {
    let response = client
        .send(
            &LeaveGroupRequest::default()
                .with_group_id(group_id(group))
                .with_members(vec![
                    MemberIdentity::default().with_member_id(str_bytes(member_id))
                ]),
            LEAVE_GROUP_VERSION,
        )
        .map_err(|e| format!("LeaveGroup: {e}"))?;
    Ok(response
        .members
        .first()
        .map_or(response.error_code, |m| m.error_code)
        .max(response.error_code))
}
