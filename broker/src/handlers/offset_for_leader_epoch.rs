//! OffsetForLeaderEpoch (key 23), v2-4 (KIP-101, KIP-279, KIP-320): the end
//! offset of a leader epoch from the partition's leader-epoch cache. The Java
//! consumer validates its position with it after a leader change.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use crate::context::BrokerContext;

/// Answers every requested partition.
pub fn handle(
    ctx: &BrokerContext,
    _version: i16,
    request: OffsetForLeaderEpochRequest,
    auth: &crate::authorizer::RequestAuth<'_>,
) -> OffsetForLeaderEpochResponse {
    use weir_controller::acl::{AclOperation, AclResourceType, CLUSTER_NAME};
    let cluster_action = auth.allowed_quietly(
        AclOperation::ClusterAction,
        AclResourceType::Cluster,
        CLUSTER_NAME,
    );
    let mut response = OffsetForLeaderEpochResponse::default();
    for topic in request.topics {
        let mut t = OffsetForLeaderTopicResult::default();
        t.topic = topic.topic.clone();
        // Kafka's handleOffsetForLeaderEpochRequest: ClusterAction, or
        // else Describe on the topic (KIP-320), whoever asks.
        let allowed = cluster_action || auth.topic(AclOperation::Describe, &topic.topic);
        for p in topic.partitions {
            let mut r = EpochEndOffset::default();
            r.partition = p.partition;
            r.leader_epoch = -1;
            r.end_offset = -1;
            if !allowed {
                r.error_code = kafka_protocol::ResponseError::TopicAuthorizationFailed.code();
                t.partitions.push(r);
                continue;
            }
            match ctx
                .replica_manager
                .leader_partition(&topic.topic, p.partition, || ctx.metadata())
            {
                Err(code) => r.error_code = code,
                Ok(partition) => match partition.check_leader_epoch(p.current_leader_epoch) {
                    Err(code) => r.error_code = code,
                    Ok(()) => {
                        let (epoch, end_offset) = partition.end_offset_for_epoch(p.leader_epoch);
                        r.leader_epoch = epoch;
                        r.end_offset = end_offset;
                    }
                },
            }
            t.partitions.push(r);
        }
        response.topics.push(t);
    }
    response
}
