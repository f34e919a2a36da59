//! ElectLeaders (key 43), v0-2 (KIP-183 preferred elections; v1 adds the
//! election type and a top-level error code, KIP-460; v2 flexible): elects
//! partition leaders on the active controller, as `kafka-leader-election`
//! asks.
//!
//! As Kafka's `ControllerApis.handleElectLeaders` and
//! `ReplicationControlManager.electLeaders` (see
//! [`weir_controller::control::elect_leaders_on_request`] for each
//! partition's outcome):
//! - v0 has no election type: preferred;
//! - an election type other than 0 (preferred) or 1 (unclean), or
//!   `timeout_ms` of 0 or less (the controller's deadline has passed), or no
//!   active controller: the whole request fails with that error
//!   (INVALID_REQUEST, REQUEST_TIMED_OUT, NOT_CONTROLLER...) as the top-level
//!   error code (v1+) and on every listed partition (Kafka's
//!   `ElectLeadersRequest.getErrorResponse`);
//! - a null `topic_partitions` elects every partition and leaves out those
//!   that need no election;
//! - UNKNOWN_TOPIC_OR_PARTITION comes with Kafka's message ("No such topic
//!   as t" / "No such partition as t-5"); other outcomes have none.
//!
//! The answer is sent once this node's image has applied the elections, so
//! Metadata from this node shows the new leaders.

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_controller::{ElectionOutcome, ElectionType, TopicElections};

use super::str_bytes;
use crate::context::BrokerContext;
use crate::error::controller_error_code;

/// Runs the elections the request asks for; results in request order.
pub async fn handle(
    ctx: &BrokerContext,
    version: i16,
    request: ElectLeadersRequest,
) -> ElectLeadersResponse {
    let election_type = if version == 0 {
        Some(ElectionType::Preferred)
    } else {
        ElectionType::from_wire(request.election_type)
    };
    let Some(election) = election_type else {
        let message = format!("Unknown election type {}", request.election_type);
        return error_response(
            version,
            &request,
            ResponseError::InvalidRequest.code(),
            Some(message),
        );
    };
    if request.timeout_ms <= 0 {
        return error_response(
            version,
            &request,
            ResponseError::RequestTimedOut.code(),
            None,
        );
    }
    let partitions: Option<Vec<(String, Vec<i32>)>> =
        request.topic_partitions.as_ref().map(|topics| {
            topics
                .iter()
                .map(|t| (t.topic.0.to_string(), t.partitions.clone()))
                .collect()
        });
    match ctx.controller.elect_leaders(election, partitions).await {
        Ok(results) => {
            let image = ctx.metadata();
            let mut response = ElectLeadersResponse::default();
            response.replica_election_results = results
                .into_iter()
                .map(|t| topic_result(t, |name| image.topic(name).is_some()))
                .collect();
            response
        }
        Err(e) => {
            let message = e.to_string();
            error_response(version, &request, controller_error_code(&e), Some(message))
        }
    }
}

/// One topic's wire result; `known` tells whether a topic exists (for the
/// UNKNOWN_TOPIC_OR_PARTITION message).
fn topic_result(t: TopicElections, known: impl Fn(&str) -> bool) -> ReplicaElectionResult {
    let topic_known = known(&t.topic);
    let mut result = ReplicaElectionResult::default();
    result.partition_result = t
        .partitions
        .iter()
        .map(|&(partition_id, outcome)| {
            let mut p = PartitionResult::default();
            p.partition_id = partition_id;
            p.error_code = outcome_code(outcome);
            p.error_message = match outcome {
                ElectionOutcome::UnknownTopicOrPartition if topic_known => Some(str_bytes(
                    format!("No such partition as {}-{partition_id}", t.topic),
                )),
                ElectionOutcome::UnknownTopicOrPartition => {
                    Some(str_bytes(format!("No such topic as {}", t.topic)))
                }
                _ => None,
            };
            p
        })
        .collect();
    result.topic = StrBytes::from_string(t.topic).into();
    result
}

/// The Kafka error code of one partition's outcome.
fn outcome_code(outcome: ElectionOutcome) -> i16 {
    match outcome {
        ElectionOutcome::Elected => 0,
        ElectionOutcome::NotNeeded => ResponseError::ElectionNotNeeded.code(),
        ElectionOutcome::PreferredLeaderNotAvailable => {
            ResponseError::PreferredLeaderNotAvailable.code()
        }
        ElectionOutcome::EligibleLeadersNotAvailable => {
            ResponseError::EligibleLeadersNotAvailable.code()
        }
        ElectionOutcome::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition.code(),
    }
}

/// The whole request failed: `code` at the top level (v1+) and on every
/// listed partition (Kafka's `ElectLeadersRequest.getErrorResponse`).
fn error_response(
    version: i16,
    request: &ElectLeadersRequest,
    code: i16,
    message: Option<String>,
) -> ElectLeadersResponse {
    let mut response = ElectLeadersResponse::default();
    if version >= 1 {
        response.error_code = code;
    }
    response.replica_election_results = request
        .topic_partitions
        .iter()
        .flatten()
        .map(|t| {
            let mut result = ReplicaElectionResult::default();
            result.topic = t.topic.clone();
            result.partition_result = t
                .partitions
                .iter()
                .map(|&partition_id| {
                    let mut p = PartitionResult::default();
                    p.partition_id = partition_id;
                    p.error_code = code;
                    p.error_message = message.clone().map(str_bytes);
                    p
                })
                .collect();
            result
        })
        .collect();
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_map_to_kafka_error_codes() {
        assert_eq!(outcome_code(ElectionOutcome::Elected), 0);
        assert_eq!(outcome_code(ElectionOutcome::NotNeeded), 84);
        assert_eq!(
            outcome_code(ElectionOutcome::PreferredLeaderNotAvailable),
            80
        );
        assert_eq!(
            outcome_code(ElectionOutcome::EligibleLeadersNotAvailable),
            83
        );
        assert_eq!(outcome_code(ElectionOutcome::UnknownTopicOrPartition), 3);
    }

    #[test]
    fn unknown_topic_and_unknown_partition_get_kafka_messages() {
        let results = TopicElections {
            topic: "t".into(),
            partitions: vec![
                (0, ElectionOutcome::Elected),
                (5, ElectionOutcome::UnknownTopicOrPartition),
            ],
        };
        let known = topic_result(results.clone(), |_| true);
        assert_eq!(known.topic.0.as_str(), "t");
        assert_eq!(known.partition_result[0].error_message, None);
        assert_eq!(
            known.partition_result[1].error_message.as_deref(),
            Some("No such partition as t-5")
        );
        let unknown = topic_result(results, |_| false);
        assert_eq!(
            unknown.partition_result[1].error_message.as_deref(),
            Some("No such topic as t")
        );
    }

    #[test]
    fn a_failed_request_reports_the_error_on_every_partition_and_top_level_from_v1() {
        let mut request = ElectLeadersRequest::default();
        let mut topic = kafka_protocol::messages::elect_leaders_request::TopicPartitions::default();
        topic.topic = StrBytes::from_static_str("t").into();
        topic.partitions = vec![0, 1];
        request.topic_partitions = Some(vec![topic]);
        let v1 = error_response(1, &request, 7, None);
        assert_eq!(v1.error_code, 7);
        let codes: Vec<i16> = v1.replica_election_results[0]
            .partition_result
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(codes, vec![7, 7]);
        assert_eq!(error_response(0, &request, 7, None).error_code, 0);
        request.topic_partitions = None;
        assert!(error_response(2, &request, 7, None)
            .replica_election_results
            .is_empty());
    }
}
