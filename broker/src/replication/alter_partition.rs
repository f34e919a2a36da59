//! ISR changes sent to the controller (Kafka 4.1's
//! `DefaultAlterPartitionManager`): leaders submit [`IsrProposal`]s (one in
//! flight per partition, see `Partition`); this task sends everything
//! queued as one AlterPartition request at a time (KIP-497, with broker
//! epochs per ISR member, KIP-903), hands each partition its answer
//! ([`crate::partition::Partition::on_isr_change`]), and resends what failed as a whole
//! (no controller, a commit failure) after a backoff. A newer proposal for
//! a partition replaces a queued one.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};
use uuid::Uuid;
use weir_controller::{
    AlterPartitionData, AlterPartitionRequest, AlterPartitionResponse, AlterPartitionTopic,
    MetadataController,
};
use weir_storage::TopicPartition;

use crate::error::controller_error_code;
use crate::partition::{IsrChangeOutcome, IsrProposal};
use crate::replica_manager::ReplicaManager;

/// Pause before resending after a request-level failure (Kafka retries
/// AlterPartition with the controller channel's backoff).
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// Sends ISR changes until `shutdown`.
pub async fn run(
    controller: MetadataController,
    replica_manager: Arc<ReplicaManager>,
    broker_id: i32,
    broker_epoch: i64,
    mut proposals: UnboundedReceiver<IsrProposal>,
    shutdown: CancellationToken,
) {
    let mut queued: BTreeMap<TopicPartition, IsrProposal> = BTreeMap::new();
    loop {
        if queued.is_empty() {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                next = proposals.recv() => match next {
                    Some(p) => { queued.insert(p.topic_partition.clone(), p); }
                    None => return,
                },
            }
        }
        while let Ok(p) = proposals.try_recv() {
            queued.insert(p.topic_partition.clone(), p);
        }
        let batch: Vec<IsrProposal> = std::mem::take(&mut queued).into_values().collect();
        let request = request_for(broker_id, broker_epoch, &batch);
        let response = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = controller.alter_partition(request) => r,
        };
        let response = match response {
            Ok(r) => r,
            Err(e) => {
                warn!(error = %e, partitions = batch.len(), "AlterPartition failed; retrying");
                for p in batch {
                    queued.entry(p.topic_partition.clone()).or_insert(p);
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(RETRY_BACKOFF) => {}
                }
                continue;
            }
        };
        let now_ms = crate::handlers::now_ms();
        for (proposal, outcome) in outcomes(&batch, response) {
            let Some(outcome) = outcome else {
                queued
                    .entry(proposal.topic_partition.clone())
                    .or_insert_with(|| proposal.clone());
                continue;
            };
            if let Some(partition) = replica_manager.partition(
                &proposal.topic_partition.topic,
                proposal.topic_partition.partition,
            ) {
                partition.on_isr_change(proposal, outcome, now_ms);
            }
        }
    }
}

/// The AlterPartition request (v3) that `broker_id`, registered with
/// `broker_epoch`, sends for `batch`: the proposals grouped by topic id,
/// each ISR member with its broker epoch (KIP-903).
pub fn request_for(
    broker_id: i32,
    broker_epoch: i64,
    batch: &[IsrProposal],
) -> AlterPartitionRequest {
    AlterPartitionRequest {
        broker_id,
        broker_epoch,
        topics: group_by_topic(batch),
    }
}

/// What each proposal of `batch` gets from the controller's `response` to
/// [`request_for`]: `Some` outcome to hand to its partition
/// ([`Partition::on_isr_change`](crate::partition::Partition::on_isr_change):
/// the new registration, or a refusal as Kafka's
/// `Partition.handleAlterPartitionError` classifies it), `None` to send it
/// again (NOT_CONTROLLER, timeouts and other errors Kafka retries).
/// Partitions of the response that `batch` does not hold are skipped.
pub fn outcomes(
    batch: &[IsrProposal],
    response: AlterPartitionResponse,
) -> Vec<(&IsrProposal, Option<IsrChangeOutcome>)> {
    // By key: a batch after a restart holds tens of thousands of
    // expansions (a linear search per answer was quadratic).
    let by_key: std::collections::HashMap<(Uuid, i32), &IsrProposal> = batch
        .iter()
        .rev()
        .map(|p| ((p.topic_id, p.topic_partition.partition), p))
        .collect();
    let mut out = Vec::new();
    for (topic_id, partitions) in response.topics {
        for (index, result) in partitions {
            let Some(&proposal) = by_key.get(&(topic_id, index)) else {
                continue;
            };
            let outcome = match result {
                Ok(registration) => Some(IsrChangeOutcome::Committed {
                    isr: registration.isr,
                    leader_epoch: registration.leader_epoch,
                    partition_epoch: registration.partition_epoch,
                }),
                Err(e) => {
                    let outcome = classify(controller_error_code(&e));
                    match &outcome {
                        Some(_) => debug!(topic_partition = %proposal.topic_partition, error = %e,
                            "AlterPartition refused"),
                        None => warn!(topic_partition = %proposal.topic_partition, error = %e,
                            "AlterPartition failed; retrying"),
                    }
                    outcome
                }
            };
            out.push((proposal, outcome));
        }
    }
    out
}

/// What a partition-level error means for the leader (Kafka's
/// `Partition.handleAlterPartitionError`); `None`: retry.
fn classify(code: i16) -> Option<IsrChangeOutcome> {
    match code {
        // OPERATION_NOT_ATTEMPTED, INELIGIBLE_REPLICA: certainly not applied.
        55 | 107 => Some(IsrChangeOutcome::Rejected),
        // UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, FENCED_LEADER_EPOCH,
        // INVALID_UPDATE_VERSION, INVALID_REQUEST, INVALID_REPLICA_ASSIGNMENT,
        // NOT_LEADER_OR_FOLLOWER: wait for the image.
        3 | 100 | 74 | 95 | 42 | 39 | 6 => Some(IsrChangeOutcome::Stale),
        _ => None,
    }
}

/// The request's topics: each proposal with its ISR members' broker
/// epochs (KIP-903).
fn group_by_topic(batch: &[IsrProposal]) -> Vec<AlterPartitionTopic> {
    let mut topics: Vec<AlterPartitionTopic> = Vec::new();
    for p in batch {
        let data = AlterPartitionData {
            partition_index: p.topic_partition.partition,
            leader_epoch: p.leader_epoch,
            new_isr_with_epochs: p
                .new_isr
                .iter()
                .copied()
                .zip(p.broker_epochs.iter().copied())
                .collect(),
            leader_recovery_state: 0,
            partition_epoch: p.partition_epoch,
        };
        match topics.iter_mut().find(|t| t.topic_id == p.topic_id) {
            Some(t) => t.partitions.push(data),
            None => topics.push(AlterPartitionTopic {
                topic_id: p.topic_id,
                partitions: vec![data],
            }),
        }
    }
    topics
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers are matched to the batch's proposals by topic id and
    /// partition, whatever their order; an answer for a partition the batch
    /// does not hold is skipped.
    #[test]
    fn outcomes_pair_answers_with_their_proposals() {
        let (t1, t2) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let proposal = |topic_id, topic: &str, partition| IsrProposal {
            topic_partition: TopicPartition::new(topic, partition),
            topic_id,
            leader_epoch: 1,
            partition_epoch: 1,
            new_isr: vec![1, 2],
            broker_epochs: vec![-1, -1],
        };
        let batch = [
            proposal(t1, "a", 0),
            proposal(t1, "a", 1),
            proposal(t2, "b", 0),
        ];
        let committed = |partition_epoch| {
            Ok(weir_controller::PartitionRegistration {
                replicas: vec![1, 2],
                isr: vec![1, 2],
                leader: 1,
                leader_epoch: 1,
                partition_epoch,
                leader_recovery_state: Default::default(),
                elr: Vec::new(),
                last_known_elr: Vec::new(),
            })
        };
        let response = AlterPartitionResponse {
            topics: vec![
                (t2, vec![(0, committed(7))]),
                (
                    t1,
                    vec![(1, committed(8)), (5, committed(9)), (0, committed(10))],
                ),
            ],
        };
        let paired: Vec<(String, i32, i32)> = outcomes(&batch, response)
            .into_iter()
            .map(|(p, outcome)| match outcome {
                Some(IsrChangeOutcome::Committed {
                    partition_epoch, ..
                }) => (
                    p.topic_partition.topic.clone(),
                    p.topic_partition.partition,
                    partition_epoch,
                ),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            paired,
            vec![("b".into(), 0, 7), ("a".into(), 1, 8), ("a".into(), 0, 10)]
        );
    }

    /// Kafka's `Partition.handleAlterPartitionError`, one row per error.
    #[test]
    fn partition_errors_reset_wait_or_retry_as_kafka() {
        let rows = [
            (
                "OPERATION_NOT_ATTEMPTED",
                55,
                Some(IsrChangeOutcome::Rejected),
            ),
            ("INELIGIBLE_REPLICA", 107, Some(IsrChangeOutcome::Rejected)),
            (
                "UNKNOWN_TOPIC_OR_PARTITION",
                3,
                Some(IsrChangeOutcome::Stale),
            ),
            ("UNKNOWN_TOPIC_ID", 100, Some(IsrChangeOutcome::Stale)),
            ("FENCED_LEADER_EPOCH", 74, Some(IsrChangeOutcome::Stale)),
            ("INVALID_UPDATE_VERSION", 95, Some(IsrChangeOutcome::Stale)),
            ("INVALID_REQUEST", 42, Some(IsrChangeOutcome::Stale)),
            (
                "INVALID_REPLICA_ASSIGNMENT",
                39,
                Some(IsrChangeOutcome::Stale),
            ),
            ("NOT_CONTROLLER", 41, None),
            ("REQUEST_TIMED_OUT", 7, None),
            ("UNKNOWN_SERVER_ERROR", -1, None),
        ];
        for (name, code, expected) in rows {
            assert_eq!(classify(code), expected, "{name}");
        }
    }
}
