//! DeleteTopics (key 20), v1-6: by name (v0-5 `topic_names`) or by name or
//! id (v6 `topics`, KIP-516). The controller removes the topic; the logs are
//! deleted before the response.

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use uuid::Uuid;
use weir_controller::TopicRef;

use super::str_bytes;
use crate::context::BrokerContext;
use crate::error::controller_error_code;

/// Deletes the requested topics; per-topic results in request order.
pub async fn handle(
    ctx: &BrokerContext,
    version: i16,
    request: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let refs: Vec<(Option<TopicName>, Uuid, TopicRef)> = if version >= 6 {
        request
            .topics
            .into_iter()
            .map(|t| match t.name {
                Some(name) => (
                    Some(name.clone()),
                    t.topic_id,
                    TopicRef::Name(name.to_string()),
                ),
                None => (None, t.topic_id, TopicRef::Id(t.topic_id)),
            })
            .collect()
    } else {
        request
            .topic_names
            .into_iter()
            .map(|name| {
                (
                    Some(name.clone()),
                    Uuid::nil(),
                    TopicRef::Name(name.to_string()),
                )
            })
            .collect()
    };
    let outcomes = ctx
        .controller
        .delete_topics(refs.iter().map(|(_, _, r)| r.clone()).collect())
        .await;
    if let Err(e) = ctx.replica_manager.apply_image(&ctx.metadata()) {
        tracing::error!(error = %e, "deleting logs of removed topics failed");
    }
    let mut response = DeleteTopicsResponse::default();
    for ((name, id, _), outcome) in refs.into_iter().zip(outcomes) {
        let mut r = DeletableTopicResult::default();
        r.name = name;
        r.topic_id = id;
        match outcome {
            Ok((deleted_name, deleted_id)) => {
                r.name = Some(TopicName(str_bytes(deleted_name)));
                r.topic_id = deleted_id;
            }
            Err(e) => {
                r.error_code = controller_error_code(&e);
                r.error_message = Some(str_bytes(e.to_string()));
            }
        }
        response.responses.push(r);
    }
    response
}
