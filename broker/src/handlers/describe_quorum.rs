//! DescribeQuorum (key 55), v0-2 (KIP-595; v1 timestamps KIP-836; v2 node
//! endpoints and directory ids KIP-853): the metadata quorum of
//! `__cluster_metadata-0`, as `kafka-metadata-quorum describe` shows it.
//!
//! As in Kafka (a broker forwards the request to the active controller,
//! whose raft client answers), the answer always comes from the active
//! controller: [`MetadataController::describe_quorum`](weir_controller::MetadataController::describe_quorum)
//! forwards from other nodes. A request that does not name exactly
//! `__cluster_metadata` partition 0 gets UNKNOWN_TOPIC_OR_PARTITION on its
//! partitions; without an active controller the partition gets
//! NOT_LEADER_OR_FOLLOWER (Kafka's raft client when it is not the leader).
//! Voters come from `controller.quorum.voters` and have no directory id
//! (Kafka's static quorum: `ReplicaKey.NO_DIRECTORY_ID`, the zero UUID);
//! observers are the broker-only nodes that fetch the metadata log.

use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};
use kafka_protocol::ResponseError;
use weir_controller::{ControllerError, ReplicaProgress};

use super::str_bytes;
use crate::context::BrokerContext;
use crate::error::controller_error_code;

/// The metadata log's topic name.
const METADATA_TOPIC: &str = "__cluster_metadata";

/// Answers from the active controller's view of the quorum.
pub async fn handle(
    ctx: &BrokerContext,
    version: i16,
    request: DescribeQuorumRequest,
) -> DescribeQuorumResponse {
    let mut response = DescribeQuorumResponse::default();
    let names_metadata_partition = request.topics.len() == 1
        && request.topics[0].topic_name.as_str() == METADATA_TOPIC
        && request.topics[0].partitions.len() == 1
        && request.topics[0].partitions[0].partition_index == 0;
    if !names_metadata_partition {
        // Kafka's DescribeQuorumRequest.getPartitionLevelErrorResponse.
        let error = ResponseError::UnknownTopicOrPartition;
        for topic in &request.topics {
            let mut t = TopicData::default();
            t.topic_name = topic.topic_name.clone();
            for p in &topic.partitions {
                let mut partition = PartitionData::default();
                partition.partition_index = p.partition_index;
                partition.error_code = error.code();
                if version >= 2 {
                    partition.error_message = Some(str_bytes(error.to_string()));
                }
                t.partitions.push(partition);
            }
            response.topics.push(t);
        }
        return response;
    }
    let mut partition = PartitionData::default();
    match ctx.controller.describe_quorum().await {
        Ok(quorum) => {
            partition.leader_id = BrokerId(quorum.leader_id);
            partition.leader_epoch = quorum.leader_epoch;
            partition.high_watermark = quorum.high_watermark;
            partition.current_voters = quorum.voters.iter().map(replica_state).collect();
            partition.observers = quorum.observers.iter().map(replica_state).collect();
            if version >= 2 {
                response.nodes = nodes(ctx, &quorum.voters);
            }
        }
        Err(ControllerError::NotController { .. }) => {
            // Kafka's DescribeQuorumResponse.singletonErrorResponse.
            partition.error_code = ResponseError::NotLeaderOrFollower.code();
            partition.leader_id = BrokerId(-1);
            if version >= 2 {
                partition.error_message =
                    Some(str_bytes(ResponseError::NotLeaderOrFollower.to_string()));
            }
        }
        Err(e) => {
            response.error_code = controller_error_code(&e);
            if version >= 2 {
                response.error_message = Some(str_bytes(e.to_string()));
            }
            return response;
        }
    }
    let mut topic = TopicData::default();
    topic.topic_name = request.topics[0].topic_name.clone();
    topic.partitions.push(partition);
    response.topics.push(topic);
    response
}

fn replica_state(progress: &ReplicaProgress) -> ReplicaState {
    let mut state = ReplicaState::default();
    state.replica_id = BrokerId(progress.replica_id);
    state.replica_directory_id = uuid::Uuid::nil();
    state.log_end_offset = progress.log_end_offset;
    state.last_fetch_timestamp = progress.last_fetch_timestamp_ms;
    state.last_caught_up_timestamp = progress.last_caught_up_timestamp_ms;
    state
}

/// Each voter's CONTROLLER endpoint: from `controller.quorum.voters`, or for
/// a single node without that list its own controller listener (if any).
fn nodes(ctx: &BrokerContext, voters: &[ReplicaProgress]) -> Vec<Node> {
    let config = &ctx.config;
    let listener_name = config
        .controller_listener_names
        .first()
        .cloned()
        .unwrap_or_else(|| "CONTROLLER".to_string());
    let configured = config.quorum_voters();
    voters
        .iter()
        .map(|voter| {
            let mut node = Node::default();
            node.node_id = BrokerId(voter.replica_id);
            let endpoint = match configured.iter().find(|v| v.id == voter.replica_id) {
                Some(v) => Some((v.host.clone(), v.port)),
                None if voter.replica_id == config.node_id => config
                    .listeners
                    .iter()
                    .find(|l| config.is_controller_listener(&l.name))
                    .map(|l| (l.host.clone(), l.port)),
                None => None,
            };
            if let Some((host, port)) = endpoint {
                let mut listener = Listener::default();
                listener.name = str_bytes(listener_name.clone());
                listener.host = str_bytes(host);
                listener.port = port;
                node.listeners.push(listener);
            }
            node
        })
        .collect()
}
