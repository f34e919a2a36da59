//! DeleteTopics (key 20), v1-6: by name (v0-5 `topic_names`) or by name or
//! id (v6 `topics`, KIP-516). The controller removes the topic; the logs and
//! the groups' committed offsets of the topic are deleted before the
//! response.
//!
//! The controller mutation quota (KIP-599): each deleted topic's
//! partitions count against the client's `controller_mutation_rate` on
//! the active controller, strictly from v5 (a topic over it gets
//! THROTTLING_QUOTA_EXCEEDED and stays) and permissively before (Kafka's
//! `ControllerApis.handleDeleteTopics`, `strictSinceVersion = 5`); the
//! handler returns the throttle time the controller gave.
//!
//! A topic named (or identified) more than once is not deleted and gets one
//! INVALID_REQUEST, "Duplicate topic name." / "Duplicate topic id." (Kafka's
//! `ControllerApis.deleteTopics`).

use std::time::Duration;

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::ResponseError;
use uuid::Uuid;
use weir_controller::TopicRef;

use super::str_bytes;
use crate::client_quotas::QuotaClient;
use crate::context::BrokerContext;
use crate::error::controller_error_code;

/// One requested deletion: how the response names it, and what to ask the
/// controller (or why not to).
type Requested = (Option<TopicName>, Uuid, Result<TopicRef, Refusal>);

/// Why a requested deletion is not asked of the controller: the error code
/// and message.
type Refusal = (i16, Option<&'static str>);

fn invalid(message: &'static str) -> Refusal {
    (ResponseError::InvalidRequest.code(), Some(message))
}

/// The first DeleteTopics version whose controller mutation quota is strict
/// (Kafka's `strictSinceVersion`).
const STRICT_QUOTA_SINCE_VERSION: i16 = 5;

/// Deletes the requested topics; per-topic results in request order, and
/// the throttle time of `client`'s controller mutation quota.
pub async fn handle(
    ctx: &BrokerContext,
    version: i16,
    request: DeleteTopicsRequest,
    auth: &crate::authorizer::RequestAuth<'_>,
    client: QuotaClient<'_>,
) -> (DeleteTopicsResponse, Duration) {
    let requested: Vec<Requested> = if version >= 6 {
        request
            .topics
            .into_iter()
            .map(|t| match t.name {
                Some(name) if !t.topic_id.is_nil() => (
                    Some(name),
                    t.topic_id,
                    Err(invalid("You may not specify both topic name and topic id.")),
                ),
                Some(name) => (
                    Some(name.clone()),
                    t.topic_id,
                    Ok(TopicRef::Name(name.to_string())),
                ),
                None => (None, t.topic_id, Ok(TopicRef::Id(t.topic_id))),
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
                    Ok(TopicRef::Name(name.to_string())),
                )
            })
            .collect()
    };
    let requested = authorize(refuse_repeats(requested), &ctx.metadata(), auth);
    let refs: Vec<TopicRef> = requested
        .iter()
        .filter_map(|(_, _, r)| r.clone().ok())
        .collect();
    let (outcomes, throttle) = if refs.is_empty() {
        (Vec::new(), Duration::ZERO)
    } else {
        let strict = version >= STRICT_QUOTA_SINCE_VERSION;
        let outcome = ctx
            .controller
            .delete_topics_for(Some(client.mutating(strict)), refs)
            .await;
        (outcome.results, outcome.throttle)
    };
    let mut outcomes = outcomes.into_iter();
    // Off the runtime: deleting thousands of partition directories takes
    // seconds of file system calls, as creating them does.
    if let Err(e) = ctx
        .replica_manager
        .apply_image_off_runtime(ctx.metadata())
        .await
    {
        tracing::error!(error = %e, "deleting logs of removed topics failed");
    }
    let deleted: Vec<String> = outcomes
        .as_slice()
        .iter()
        .filter_map(|o| o.as_ref().ok().map(|(name, _)| name.clone()))
        .collect();
    if !deleted.is_empty() {
        ctx.group_coordinator.on_topics_deleted(&deleted).await;
    }
    let mut response = DeleteTopicsResponse::default();
    for (name, id, request) in requested {
        let mut r = DeletableTopicResult::default();
        r.name = name;
        r.topic_id = id;
        match request {
            Err((code, message)) => {
                r.error_code = code;
                r.error_message = message.map(str_bytes);
            }
            Ok(_) => match outcomes.next() {
                Some(Ok((deleted_name, deleted_id))) => {
                    r.name = Some(TopicName(str_bytes(deleted_name)));
                    r.topic_id = deleted_id;
                }
                Some(Err(e)) => {
                    r.error_code = controller_error_code(&e);
                    r.error_message = Some(str_bytes(e.to_string()));
                }
                None => r.error_code = ResponseError::UnknownServerError.code(),
            },
        }
        response.responses.push(r);
    }
    (response, throttle)
}

/// `requested` with each repeated name or id once, at its first place,
/// refused; the rest unchanged.
fn refuse_repeats(requested: Vec<Requested>) -> Vec<Requested> {
    let key = |r: &Result<TopicRef, Refusal>| match r {
        Ok(TopicRef::Name(name)) => Some((Some(name.clone()), None)),
        Ok(TopicRef::Id(id)) => Some((None, Some(*id))),
        Err(_) => None,
    };
    let mut times: std::collections::HashMap<_, usize> = std::collections::HashMap::new();
    for (_, _, r) in &requested {
        if let Some(k) = key(r) {
            *times.entry(k).or_default() += 1;
        }
    }
    let mut refused = std::collections::HashSet::new();
    requested
        .into_iter()
        .filter_map(|(name, id, r)| match key(&r) {
            Some(k) if times[&k] > 1 => {
                let message = if k.0.is_some() {
                    "Duplicate topic name."
                } else {
                    "Duplicate topic id."
                };
                refused
                    .insert(k)
                    .then_some((name, id, Err(invalid(message))))
            }
            _ => Some((name, id, r)),
        })
        .collect()
}

/// `requested` with the deletions the client may not make refused with
/// TOPIC_AUTHORIZATION_FAILED (Kafka's `ControllerApis.deleteTopics`):
/// Delete on the topic; a topic named by id also needs Describe, and an id
/// that is unknown or not describable is not resolved to a name.
fn authorize(
    requested: Vec<Requested>,
    image: &weir_controller::MetadataImage,
    auth: &crate::authorizer::RequestAuth<'_>,
) -> Vec<Requested> {
    use weir_controller::acl::AclOperation;
    if !auth.enabled()
        || auth.allowed_quietly(
            AclOperation::Delete,
            weir_controller::acl::AclResourceType::Cluster,
            weir_controller::acl::CLUSTER_NAME,
        )
    {
        return requested;
    }
    let denied = || Err((ResponseError::TopicAuthorizationFailed.code(), None));
    requested
        .into_iter()
        .map(|(name, id, r)| match &r {
            Ok(TopicRef::Name(topic)) if !auth.topic(AclOperation::Delete, topic) => {
                (name, id, denied())
            }
            Ok(TopicRef::Id(topic_id)) => match image.topic_names_by_id.get(topic_id) {
                Some(topic)
                    if !auth.topic(AclOperation::Describe, topic)
                        || !auth.topic(AclOperation::Delete, topic) =>
                {
                    (name, id, denied())
                }
                _ => (name, id, r),
            },
            _ => (name, id, r),
        })
        .collect()
}
