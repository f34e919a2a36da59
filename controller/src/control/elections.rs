//! Elections asked for by ElectLeaders (KIP-183, KIP-460) and the automatic
//! preferred-leader rebalance (Kafka's `ReplicationControlManager.electLeaders`
//! and `maybeBalancePartitionLeaders`).

use super::partition_change::{
    effective_min_isr, is_active, Election, PartitionChangeBuilder, StaticConfig,
};
use super::ControllerResult;
use crate::image::{MetadataImage, PartitionRegistration, TopicImage};
use crate::records::{MetadataRecord, PartitionChangeRecord};

/// The election an ElectLeaders request asks for (KIP-460's
/// `election_type`; v0 requests are always preferred).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ElectionType {
    /// Wire value 0 (KIP-183): make the first replica (the preferred one)
    /// the leader, when it is live and in the ISR.
    Preferred,
    /// Wire value 1 (KIP-460): give a partition with no leader one, a live
    /// ISR member if any, else any live replica (whose ISR becomes just
    /// itself, losing data).
    Unclean,
}

impl ElectionType {
    /// The type for an ElectLeaders `election_type` byte; `None` for values
    /// Kafka does not know (it answers INVALID_REQUEST).
    pub fn from_wire(value: i8) -> Option<ElectionType> {
        match value {
            0 => Some(ElectionType::Preferred),
            1 => Some(ElectionType::Unclean),
            _ => None,
        }
    }
}

/// What an ElectLeaders request did to one partition (Kafka's
/// `ReplicationControlManager.electLeader` results).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ElectionOutcome {
    /// A new leader was elected (error NONE).
    Elected,
    /// The partition already has the leader asked for: for a preferred
    /// election its first replica leads, for an unclean one it has any
    /// leader (ELECTION_NOT_NEEDED).
    NotNeeded,
    /// Preferred election: no live ISR member could take over
    /// (PREFERRED_LEADER_NOT_AVAILABLE).
    PreferredLeaderNotAvailable,
    /// Unclean election: no replica is live (ELIGIBLE_LEADERS_NOT_AVAILABLE).
    EligibleLeadersNotAvailable,
    /// No such topic or partition (UNKNOWN_TOPIC_OR_PARTITION).
    UnknownTopicOrPartition,
}

/// One topic's results of an ElectLeaders request: `(partition index,
/// outcome)` in request order (partition order when all partitions were
/// asked for).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TopicElections {
    /// Topic name as given.
    pub topic: String,
    /// Per-partition outcomes.
    pub partitions: Vec<(i32, ElectionOutcome)>,
}

/// The record a preferred or unclean election writes for partition
/// `partition_id` of `topic` (Kafka's `PartitionChangeBuilder` with
/// `Election.PREFERRED` or `UNCLEAN`, the topic's effective min ISR, ELR as
/// the image's feature says), or `None` when nothing would change.
fn elect_one(
    image: &MetadataImage,
    config: &StaticConfig,
    topic: &TopicImage,
    partition_id: i32,
    p: &PartitionRegistration,
    election: ElectionType,
) -> Option<PartitionChangeRecord> {
    let acceptable = |r: i32| is_active(image, r);
    let election = match election {
        ElectionType::Preferred => Election::Preferred,
        ElectionType::Unclean => Election::Unclean,
    };
    PartitionChangeBuilder::new(
        p,
        topic.topic_id,
        partition_id,
        &acceptable,
        effective_min_isr(image, config, topic),
    )
    .election(election)
    .elr_enabled(image.elr_enabled())
    .build()
}

/// Runs an ElectLeaders request (KIP-183, KIP-460; Kafka's
/// `ReplicationControlManager.electLeaders`). `partitions` lists
/// `(topic, partition indexes)`; `None` (a null `topic_partitions` on the
/// wire) means every partition of every topic, and then partitions whose
/// election is not needed are left out of the results (a topic with none
/// left still gets an empty entry), as in Kafka.
///
/// Per partition: UNKNOWN_TOPIC_OR_PARTITION for an unknown topic or
/// index; ELECTION_NOT_NEEDED when the first replica leads (preferred) or
/// any replica leads (unclean); else one `PartitionChangeRecord` with the
/// new leader (see `elect_one`), whose replay bumps the leader and
/// partition epochs; when the leader would not change,
/// PREFERRED_LEADER_NOT_AVAILABLE (preferred) or
/// ELIGIBLE_LEADERS_NOT_AVAILABLE (unclean). A partition named twice is
/// decided on the image with the first election applied, so it is
/// elected once.
pub fn elect_leaders_on_request(
    image: &MetadataImage,
    config: &StaticConfig,
    election: ElectionType,
    partitions: Option<&[(String, Vec<i32>)]>,
) -> ControllerResult<Vec<TopicElections>> {
    let requested: Vec<(String, Vec<i32>)> = match partitions {
        Some(p) => p.to_vec(),
        None => image
            .topics
            .values()
            .map(|t| (t.name.clone(), t.partitions.keys().copied().collect()))
            .collect(),
    };
    let mut after = image.clone();
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(requested.len());
    for (name, indexes) in requested {
        let mut outcomes = Vec::with_capacity(indexes.len());
        for index in indexes {
            let outcome = match elect_partition(&after, config, election, &name, index) {
                Ok(record) => {
                    // Built from `after`: it replays.
                    let _ = after.apply(&record);
                    records.push(record);
                    ElectionOutcome::Elected
                }
                Err(outcome) => outcome,
            };
            if partitions.is_some() || outcome != ElectionOutcome::NotNeeded {
                outcomes.push((index, outcome));
            }
        }
        results.push(TopicElections {
            topic: name,
            partitions: outcomes,
        });
    }
    ControllerResult {
        records,
        response: results,
    }
}

/// One partition of [`elect_leaders_on_request`]: its record, or why none
/// (Kafka's `ReplicationControlManager.electLeader`).
fn elect_partition(
    image: &MetadataImage,
    config: &StaticConfig,
    election: ElectionType,
    topic: &str,
    index: i32,
) -> Result<MetadataRecord, ElectionOutcome> {
    let topic = image
        .topic(topic)
        .ok_or(ElectionOutcome::UnknownTopicOrPartition)?;
    let p = topic
        .partitions
        .get(&index)
        .ok_or(ElectionOutcome::UnknownTopicOrPartition)?;
    let not_needed = match election {
        ElectionType::Preferred => p.replicas.first() == Some(&p.leader),
        ElectionType::Unclean => p.leader != -1,
    };
    if not_needed {
        return Err(ElectionOutcome::NotNeeded);
    }
    let record = elect_one(image, config, topic, index, p, election).ok_or(match election {
        ElectionType::Preferred => ElectionOutcome::PreferredLeaderNotAvailable,
        ElectionType::Unclean => ElectionOutcome::EligibleLeadersNotAvailable,
    })?;
    Ok(MetadataRecord::PartitionChange(record))
}

/// Most preferred elections one automatic rebalance pass writes (Kafka's
/// `ReplicationControlManager.MAX_ELECTIONS_PER_IMBALANCE`); a pass that
/// hits it is run again at once.
pub const MAX_ELECTIONS_PER_IMBALANCE: usize = 1_000;

/// One automatic leader rebalance pass (`auto.leader.rebalance.enable`;
/// Kafka's `ReplicationControlManager.maybeBalancePartitionLeaders`): a
/// preferred election (see `elect_one`) for every partition whose leader is
/// not its first replica, at most `max_elections` records. The response is
/// true when the pass stopped at `max_elections`, so more may be needed at
/// once.
///
/// As Kafka's KRaft controller, every imbalanced partition is considered:
/// `leader.imbalance.per.broker.percentage` (a ZooKeeper-controller
/// setting) plays no part.
pub fn balance_partition_leaders(
    image: &MetadataImage,
    config: &StaticConfig,
    max_elections: usize,
) -> ControllerResult<bool> {
    let mut records = Vec::new();
    for topic in image.topics.values() {
        for (&partition_id, p) in &topic.partitions {
            if p.replicas.first() == Some(&p.leader) {
                continue;
            }
            if records.len() >= max_elections {
                return ControllerResult {
                    records,
                    response: true,
                };
            }
            let elected = elect_one(
                image,
                config,
                topic,
                partition_id,
                p,
                ElectionType::Preferred,
            );
            records.extend(elected.map(MetadataRecord::PartitionChange));
        }
    }
    let more = records.len() >= max_elections;
    ControllerResult {
        records,
        response: more,
    }
}
