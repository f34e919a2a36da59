//! OffsetCommit (key 8), v2-9: commits offsets for a group, answered only
//! after the group coordinator's store made them durable. Partitions of
//! topics or partitions the cluster does not have get
//! UNKNOWN_TOPIC_OR_PARTITION (as Kafka's request handler does); a
//! request-level error from the coordinator is every partition's error.
//! v2-4 carry `retention_time_ms`, v6+ the leader epoch (KIP-320), v7+ the
//! group instance id (KIP-345).

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use kafka_protocol::ResponseError;
use weir_storage::TopicPartition;

use crate::context::BrokerContext;
use crate::group::coordinator::{OffsetCommitEntry, OffsetCommitParams};

/// Commits the offsets.
pub async fn handle(
    ctx: &BrokerContext,
    version: i16,
    request: OffsetCommitRequest,
    auth: &crate::authorizer::RequestAuth<'_>,
) -> OffsetCommitResponse {
    let image = ctx.metadata();
    // Kafka's handleOffsetCommitRequest: Read on each topic (Read on the
    // group is checked before, in dispatch).
    let denied = auth.denied_topics(
        weir_controller::acl::AclOperation::Read,
        request.topics.iter().map(|t| t.name.0.as_str()),
    );
    let exists = |tp: &TopicPartition| {
        !denied.contains(tp.topic.as_str())
            && image
                .topic(&tp.topic)
                .is_some_and(|t| t.partitions.contains_key(&tp.partition))
    };
    let mut offsets = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            let tp = TopicPartition::new(topic.name.to_string(), p.partition_index);
            if exists(&tp) {
                offsets.push(OffsetCommitEntry {
                    partition: tp,
                    committed_offset: p.committed_offset,
                    committed_leader_epoch: if version >= 6 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                });
            }
        }
    }
    let params = OffsetCommitParams {
        group_id: request.group_id.to_string(),
        generation_id: request.generation_id_or_member_epoch,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
        retention_time_ms: if version <= 4 {
            request.retention_time_ms
        } else {
            -1
        },
        api_version: version,
        offsets,
    };
    let outcome = ctx.group_coordinator.commit_offsets(params).await;
    let mut response = OffsetCommitResponse::default();
    for topic in request.topics {
        let mut t = OffsetCommitResponseTopic::default();
        for p in &topic.partitions {
            let tp = TopicPartition::new(topic.name.to_string(), p.partition_index);
            let error = if denied.contains(tp.topic.as_str()) {
                Some(ResponseError::TopicAuthorizationFailed)
            } else if !exists(&tp) {
                Some(ResponseError::UnknownTopicOrPartition)
            } else {
                match &outcome {
                    Err(e) => Some(*e),
                    Ok(results) => results
                        .iter()
                        .find(|(committed, _)| *committed == tp)
                        .and_then(|(_, e)| *e),
                }
            };
            let mut partition = OffsetCommitResponsePartition::default();
            partition.partition_index = p.partition_index;
            partition.error_code = error.map(|e| e.code()).unwrap_or(0);
            t.partitions.push(partition);
        }
        t.name = topic.name;
        response.topics.push(t);
    }
    response
}
