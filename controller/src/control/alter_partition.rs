//! AlterPartition (KIP-497, KIP-841, KIP-903): ISR changes asked for by
//! partition leaders (Kafka's `ReplicationControlManager.alterPartition`).

use std::collections::HashMap;

use super::partition_change::{effective_min_isr, is_active, PartitionChangeBuilder, StaticConfig};
use super::ControllerResult;
use crate::error::ControllerError;
use crate::image::{MetadataImage, PartitionRegistration, TopicId};
use crate::records::{LeaderRecoveryState, MetadataRecord};

/// One AlterPartition request from a partition leader (Kafka's
/// `AlterPartitionRequest`, v3: KIP-497, KIP-841, KIP-903): the ISR changes
/// it asks for, with the broker epoch it registered with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AlterPartitionRequest {
    /// The sending broker (the leader of every partition listed).
    pub broker_id: i32,
    /// The sender's broker epoch; must be its current registration's.
    pub broker_epoch: i64,
    /// The partitions, by topic.
    pub topics: Vec<AlterPartitionTopic>,
}

/// One topic of an [`AlterPartitionRequest`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AlterPartitionTopic {
    /// The topic id (KIP-516; AlterPartition v2+ names topics by id only).
    pub topic_id: TopicId,
    /// The partitions of the topic to change.
    pub partitions: Vec<AlterPartitionData>,
}

/// One partition's proposed state in an [`AlterPartitionRequest`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AlterPartitionData {
    /// The partition index.
    pub partition_index: i32,
    /// The leader epoch the leader holds.
    pub leader_epoch: i32,
    /// KIP-903: each proposed ISR member with its broker epoch (-1: not
    /// checked), in the order the leader lists them.
    pub new_isr_with_epochs: Vec<(i32, i64)>,
    /// The proposed leader recovery state (KIP-704): 0 RECOVERED,
    /// 1 RECOVERING.
    pub leader_recovery_state: i8,
    /// The partition epoch the leader last saw (KIP-497's update version).
    pub partition_epoch: i32,
}

/// One partition's outcome in an [`AlterPartitionResponse`]: its
/// registration once the change is applied, or why it was refused.
pub type AlterPartitionResult = Result<PartitionRegistration, ControllerError>;

/// The answer to an [`AlterPartitionRequest`]: per topic of the request, in
/// request order, `(partition index, outcome)` in request order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AlterPartitionResponse {
    /// `(topic id, per-partition results)`.
    pub topics: Vec<(TopicId, Vec<(i32, AlterPartitionResult)>)>,
}

/// Runs an AlterPartition request (Kafka's
/// `ReplicationControlManager.alterPartition`): validates every partition
/// in Kafka's order and writes one `PartitionChangeRecord` per partition
/// that changes (its replay bumps the partition epoch; with metadata
/// version 3.6+ an ISR change keeps the leader epoch).
///
/// The request fails whole (`response` is `Err`, no records) with
/// [`ControllerError::StaleBrokerEpoch`] unless `broker_epoch` is the
/// sender's current registration (`ClusterControlManager.checkBrokerEpoch`).
/// Otherwise each partition gets, in this order
/// (`validateAlterPartitionData`):
/// 1. an unknown (or zero) topic id: [`ControllerError::UnknownTopicId`];
/// 2. no such partition: [`ControllerError::UnknownPartition`]
///    (UNKNOWN_TOPIC_OR_PARTITION);
/// 3. a leader or partition epoch newer than the controller's:
///    [`ControllerError::EpochNewerThanController`] (NOT_CONTROLLER: this
///    controller is probably no longer the active one);
/// 4. an older leader epoch: [`ControllerError::FencedLeaderEpoch`];
/// 5. a sender that is not the partition's leader:
///    [`ControllerError::InvalidRequest`];
/// 6. an older partition epoch: [`ControllerError::InvalidUpdateVersion`];
/// 7. a proposed ISR with a replica outside the assignment, a duplicate or
///    a negative id (`Replicas.validateIsr`), or without the leader:
///    [`ControllerError::InvalidRequest`];
/// 8. a leader recovery state other than 0 or 1 (Kafka's
///    `LeaderRecoveryState.of` throws; Weir answers the partition instead),
///    `Recovering` with more than one ISR member, or a change from
///    `Recovered` to `Recovering`: [`ControllerError::InvalidRequest`];
/// 9. a proposed member that is not registered, is in controlled shutdown,
///    is fenced, or whose given broker epoch (unless -1) is not its current
///    one (KIP-841, KIP-903): [`ControllerError::IneligibleReplica`],
///    naming the first one.
///
/// An accepted change goes through the `PartitionChangeBuilder`
/// (Kafka's): with ELR on, members that leave an ISR falling below the
/// topic's effective min ISR join the ELR (the high watermark cannot have
/// passed their log end while they were in the ISR, and cannot move while
/// it is below the min ISR), and an ISR back at the min ISR clears it. An
/// accepted partition whose ISR, ELR and recovery state already are the
/// proposed ones gets its current registration and no record. The leader
/// never changes here: it is in the new ISR and eligible, so Kafka's
/// election keeps it. A partition named twice is validated against the
/// state the first occurrence left (Kafka validates both against the state
/// before the request), so a repeat with the same partition epoch gets
/// INVALID_UPDATE_VERSION instead of a second record.
pub fn alter_partition(
    image: &MetadataImage,
    config: &StaticConfig,
    request: &AlterPartitionRequest,
) -> ControllerResult<Result<AlterPartitionResponse, ControllerError>> {
    let current = image
        .brokers
        .get(&request.broker_id)
        .map(|b| b.broker_epoch);
    if current != Some(request.broker_epoch) {
        return ControllerResult {
            records: Vec::new(),
            response: Err(ControllerError::StaleBrokerEpoch {
                broker_id: request.broker_id,
                requested: request.broker_epoch,
                current,
            }),
        };
    }
    let mut changed: HashMap<(TopicId, i32), PartitionRegistration> = HashMap::new();
    let mut records = Vec::new();
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let topic = image.topic_by_id(&t.topic_id);
        let mut results = Vec::with_capacity(t.partitions.len());
        for data in &t.partitions {
            let index = data.partition_index;
            let Some(topic) = topic else {
                let unknown = ControllerError::UnknownTopicId { id: t.topic_id };
                results.push((index, Err(unknown)));
                continue;
            };
            let key = (topic.topic_id, index);
            let current = changed.get(&key).or_else(|| topic.partitions.get(&index));
            let Some(p) = current.cloned() else {
                let unknown = ControllerError::UnknownPartition {
                    topic_id: topic.topic_id,
                    partition: index,
                };
                results.push((index, Err(unknown)));
                continue;
            };
            let outcome =
                validate_alter_partition(image, topic.topic_id, request.broker_id, &p, data).map(
                    |(isr, recovery)| {
                        let live = |r: i32| is_active(image, r);
                        let min_isr = effective_min_isr(image, config, topic);
                        let change =
                            PartitionChangeBuilder::new(&p, topic.topic_id, index, &live, min_isr)
                                .elr_enabled(image.elr_enabled())
                                .target_isr(isr)
                                .target_recovery(recovery);
                        match change.build() {
                            Some(record) => {
                                let after = p.merged(&record);
                                records.push(MetadataRecord::PartitionChange(record));
                                changed.insert(key, after.clone());
                                after
                            }
                            None => p,
                        }
                    },
                );
            results.push((index, outcome));
        }
        topics.push((t.topic_id, results));
    }
    ControllerResult {
        records,
        response: Ok(AlterPartitionResponse { topics }),
    }
}

/// Checks one partition of an AlterPartition request against its current
/// registration `p` in the order of Kafka's
/// `ReplicationControlManager.validateAlterPartitionData` (steps 3 to 9 of
/// [`alter_partition`]); returns the target ISR and recovery state.
fn validate_alter_partition(
    image: &MetadataImage,
    topic_id: TopicId,
    broker_id: i32,
    p: &PartitionRegistration,
    data: &AlterPartitionData,
) -> Result<(Vec<i32>, LeaderRecoveryState), ControllerError> {
    let partition = data.partition_index;
    let invalid = |reason: String| {
        Err(ControllerError::InvalidRequest {
            reason: format!("partition {partition} of topic id {topic_id}: {reason}"),
        })
    };
    if data.leader_epoch > p.leader_epoch || data.partition_epoch > p.partition_epoch {
        return Err(ControllerError::EpochNewerThanController {
            topic_id,
            partition,
            requested_leader_epoch: data.leader_epoch,
            requested_partition_epoch: data.partition_epoch,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
        });
    }
    if data.leader_epoch < p.leader_epoch {
        return Err(ControllerError::FencedLeaderEpoch {
            topic_id,
            partition,
            requested: data.leader_epoch,
            current: p.leader_epoch,
        });
    }
    if broker_id != p.leader {
        return invalid(format!(
            "broker {broker_id} is not the leader; the current leader is {}",
            p.leader
        ));
    }
    if data.partition_epoch < p.partition_epoch {
        return Err(ControllerError::InvalidUpdateVersion {
            topic_id,
            partition,
            requested: data.partition_epoch,
            current: p.partition_epoch,
        });
    }
    let new_isr: Vec<i32> = data.new_isr_with_epochs.iter().map(|&(b, _)| b).collect();
    let mut sorted = new_isr.clone();
    sorted.sort_unstable();
    let duplicate = sorted.windows(2).any(|w| w[0] == w[1]);
    if duplicate || new_isr.iter().any(|r| !p.replicas.contains(r)) {
        return invalid(format!(
            "invalid ISR {new_isr:?} for replicas {:?}",
            p.replicas
        ));
    }
    if !new_isr.contains(&p.leader) {
        return invalid(format!(
            "the ISR {new_isr:?} does not include the leader {}",
            p.leader
        ));
    }
    let Some(recovery) = LeaderRecoveryState::from_wire(data.leader_recovery_state) else {
        return invalid(format!(
            "unknown leader recovery state {}",
            data.leader_recovery_state
        ));
    };
    if recovery == LeaderRecoveryState::Recovering && new_isr.len() > 1 {
        return invalid(format!(
            "the ISR {new_isr:?} has more than one replica while the leader is still \
             recovering from an unclean leader election"
        ));
    }
    if p.leader_recovery_state == LeaderRecoveryState::Recovered
        && recovery == LeaderRecoveryState::Recovering
    {
        return invalid(
            "the leader recovery state cannot change from RECOVERED to RECOVERING".into(),
        );
    }
    for &(replica, epoch) in &data.new_isr_with_epochs {
        let reason = match image.brokers.get(&replica) {
            None => Some("not registered".to_string()),
            Some(b) if b.in_controlled_shutdown => Some("shutting down".to_string()),
            Some(b) if b.fenced => Some("fenced".to_string()),
            Some(b) if epoch != -1 && epoch != b.broker_epoch => Some(format!(
                "broker epoch mismatch: requested={epoch} VS expected={}",
                b.broker_epoch
            )),
            Some(_) => None,
        };
        if let Some(reason) = reason {
            return Err(ControllerError::IneligibleReplica {
                topic_id,
                partition,
                broker_id: replica,
                reason,
            });
        }
    }
    Ok((new_isr, recovery))
}
