//! OffsetDelete (key 47), v0 (KIP-496): deletes committed offsets of
//! topics the group no longer subscribes to. Partitions the cluster does
//! not have get UNKNOWN_TOPIC_OR_PARTITION; topics a consumer-protocol
//! member subscribes to get GROUP_SUBSCRIBED_TO_TOPIC; a group-level error
//! is the top-level error.

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use kafka_protocol::ResponseError;
use weir_storage::TopicPartition;

use crate::context::BrokerContext;

/// Deletes the offsets.
pub async fn handle(
    ctx: &BrokerContext,
    _version: i16,
    request: OffsetDeleteRequest,
    auth: &crate::authorizer::RequestAuth<'_>,
) -> OffsetDeleteResponse {
    let image = ctx.metadata();
    // Kafka's handleOffsetDeleteRequest: Read on each topic (Delete on the
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
    let partitions: Vec<TopicPartition> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| TopicPartition::new(t.name.to_string(), p.partition_index))
        })
        .filter(|tp| exists(tp))
        .collect();
    let mut response = OffsetDeleteResponse::default();
    let results = match ctx
        .group_coordinator
        .delete_offsets(&request.group_id, partitions)
        .await
    {
        Ok(results) => results,
        Err(e) => {
            response.error_code = e.code();
            return response;
        }
    };
    for topic in request.topics {
        let mut t = OffsetDeleteResponseTopic::default();
        for p in &topic.partitions {
            let tp = TopicPartition::new(topic.name.to_string(), p.partition_index);
            let error = if denied.contains(tp.topic.as_str()) {
                Some(ResponseError::TopicAuthorizationFailed)
            } else if exists(&tp) {
                results
                    .iter()
                    .find(|(deleted, _)| *deleted == tp)
                    .and_then(|(_, e)| *e)
            } else {
                Some(ResponseError::UnknownTopicOrPartition)
            };
            let mut partition = OffsetDeleteResponsePartition::default();
            partition.partition_index = p.partition_index;
            partition.error_code = error.map(|e| e.code()).unwrap_or(0);
            t.partitions.push(partition);
        }
        t.name = topic.name;
        response.topics.push(t);
    }
    response
}
