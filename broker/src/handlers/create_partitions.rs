//! CreatePartitions (key 37), v0-3 (v2+ flexible; KIP-195): grows existing
//! topics through the metadata quorum (`PartitionRecord`s), then creates the
//! new partitions' logs before answering, so produce and fetch to them work
//! as soon as the response is out (and Metadata answers the new count).
//!
//! As Kafka's `ControllerApis.createPartitions` and
//! `ReplicationControlManager.createPartitions`:
//! - `timeout_ms` is the controller's deadline: Kafka queues the operation
//!   with a deadline `timeout_ms` after arrival, so 0 or less answers every
//!   topic REQUEST_TIMED_OUT and nothing changes (checked against Kafka
//!   4.1.2), even with `validate_only`; duplicates too, unless the request
//!   has only duplicates (then nothing is queued and they get
//!   INVALID_REQUEST). Otherwise Weir answers after the commit, as Kafka.
//! - out of file descriptors (issue 15): KAFKA_STORAGE_ERROR, nothing
//!   created, or for partitions committed whose logs could not be created
//!   here (see [`crate::descriptors`]), never success;
//! - a name given more than once: one INVALID_REQUEST result for it,
//!   "Duplicate topic name.", and nothing done for it;
//! - an unknown topic: UNKNOWN_TOPIC_OR_PARTITION with no message;
//! - a count not above the current one: INVALID_PARTITIONS;
//! - a manual assignment of the wrong length, an unknown or repeated broker,
//!   an empty list, or another replication factor than the topic's:
//!   INVALID_REPLICA_ASSIGNMENT; internal topics may grow, as in Kafka;
//! - `validate_only`: the same answers, nothing written.
//!
//! The controller mutation quota (KIP-599): the added partitions count
//! against the client's `controller_mutation_rate` on the active
//! controller, strictly from v3 (a topic over it gets
//! THROTTLING_QUOTA_EXCEEDED) and permissively before (Kafka's
//! `ControllerApis.handleCreatePartitions`, `strictSinceVersion = 3`); the
//! handler returns the throttle time the controller gave.
//!
//! One result per distinct name, at the position of its first occurrence
//! (Kafka lists duplicates first, then the others in hash order; clients
//! match results by name).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::ResponseError;
use weir_controller::{ControllerError, NewPartitions};

use super::{controller_deadline_passed, str_bytes};
use crate::client_quotas::QuotaClient;
use crate::context::BrokerContext;
use crate::error::controller_error_code;

/// The first CreatePartitions version whose controller mutation quota is
/// strict (Kafka's `strictSinceVersion`).
const STRICT_QUOTA_SINCE_VERSION: i16 = 3;

/// Adds the requested partitions; one result per distinct topic name, and
/// the throttle time of `client`'s controller mutation quota.
pub async fn handle(
    ctx: &BrokerContext,
    version: i16,
    request: CreatePartitionsRequest,
    auth: &crate::authorizer::RequestAuth<'_>,
    client: QuotaClient<'_>,
) -> (CreatePartitionsResponse, Duration) {
    let mut response = CreatePartitionsResponse::default();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for topic in &request.topics {
        *counts.entry(topic.name.0.as_str()).or_default() += 1;
    }
    if controller_deadline_passed(
        request.timeout_ms,
        request.topics.iter().map(|t| t.name.0.as_str()),
    ) {
        response.results = request
            .topics
            .iter()
            .map(|topic| {
                let mut result = CreatePartitionsTopicResult::default();
                result.name = topic.name.clone();
                result.error_code = ResponseError::RequestTimedOut.code();
                result
            })
            .collect();
        return (response, Duration::ZERO);
    }
    let mut reported: HashSet<&str> = HashSet::new();
    let mut results: Vec<CreatePartitionsTopicResult> = Vec::with_capacity(counts.len());
    let mut to_grow: Vec<(usize, NewPartitions)> = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        if !reported.insert(name) {
            continue;
        }
        let mut result = CreatePartitionsTopicResult::default();
        result.name = topic.name.clone();
        if counts[name] > 1 {
            result.error_code = ResponseError::InvalidRequest.code();
            result.error_message = Some(str_bytes("Duplicate topic name."));
        } else if !auth.topic(weir_controller::acl::AclOperation::Alter, name) {
            // Kafka's handleCreatePartitionsRequest: Alter on the topic.
            result.error_code = ResponseError::TopicAuthorizationFailed.code();
            result.error_message = Some(str_bytes("The topic authorization is failed."));
        } else {
            to_grow.push((
                results.len(),
                NewPartitions {
                    name: name.to_string(),
                    count: topic.count,
                    assignments: topic.assignments.as_ref().map(|assignments| {
                        assignments
                            .iter()
                            .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
                            .collect()
                    }),
                },
            ));
        }
        results.push(result);
    }
    let (slots, topics): (Vec<usize>, Vec<NewPartitions>) = to_grow.into_iter().unzip();
    let refused = match topics.is_empty() || request.validate_only {
        true => None,
        false => crate::descriptors::check_headroom_for_creation().err(),
    };
    if let Some((code, message)) = refused {
        for slot in slots {
            results[slot].error_code = code.code();
            results[slot].error_message = Some(str_bytes(message.clone()));
        }
        response.results = results;
        return (response, Duration::ZERO);
    }
    let (outcomes, throttle) = if topics.is_empty() {
        (Vec::new(), Duration::ZERO)
    } else {
        let strict = version >= STRICT_QUOTA_SINCE_VERSION;
        let outcome = ctx
            .controller
            .create_partitions_for(Some(client.mutating(strict)), topics, request.validate_only)
            .await;
        (outcome.results, outcome.throttle)
    };
    let mut logs_failed = None;
    if !request.validate_only && outcomes.iter().any(Result::is_ok) {
        if let Err(e) = ctx
            .replica_manager
            .apply_image_off_runtime(ctx.metadata())
            .await
        {
            tracing::error!(error = %e, "creating logs for new partitions failed");
            logs_failed = Some(crate::descriptors::log_creation_failed(&e));
        }
    }
    for (slot, outcome) in slots.into_iter().zip(outcomes) {
        if let (Ok(()), Some((code, message))) = (&outcome, &logs_failed) {
            results[slot].error_code = code.code();
            results[slot].error_message = Some(str_bytes(message.clone()));
        }
        if let Err(e) = outcome {
            let result = &mut results[slot];
            result.error_code = controller_error_code(&e);
            result.error_message = match e {
                // Kafka's UnknownTopicOrPartitionException carries no message.
                ControllerError::UnknownTopic { .. } => None,
                // Kafka's messages, without Weir's prefix.
                ControllerError::InvalidReplicaAssignment { reason }
                | ControllerError::InvalidRequest { reason }
                | ControllerError::PolicyViolation { reason } => Some(str_bytes(reason)),
                other => Some(str_bytes(other.to_string())),
            };
        }
    }
    response.results = results;
    (response, throttle)
}
