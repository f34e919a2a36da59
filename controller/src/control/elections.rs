//! Elections asked for by ElectLeaders (KIP-183, KIP-460) and the automatic
//! preferred-leader rebalance (Kafka's `ReplicationControlManager.electLeaders`
//! and `maybeBalancePartitionLeaders`).

use super::ControllerResult;
use crate::image::MetadataImage;
use crate::records::{LeaderRecoveryState, MetadataRecord, PartitionChangeRecord};

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

/// The new `(leader, isr)` of `p` under `election` with `live` brokers, as
/// Kafka's `PartitionChangeBuilder.electLeader` with ELR off, or `None`
/// when the leader would not change.
///
/// - preferred: the first replica if live and in the ISR; else the current
///   leader if it still is; else the next live ISR member in replica order;
/// - unclean: the current leader if live and in the ISR; else the first
///   live ISR member in replica order; else the first live replica, whose
///   ISR becomes just itself.
fn elect_one(
    p: &crate::image::PartitionRegistration,
    election: ElectionType,
    live: impl Fn(i32) -> bool,
) -> Option<(i32, Option<Vec<i32>>)> {
    let valid = |r: i32| p.isr.contains(&r) && live(r);
    let (leader, isr) = match election {
        ElectionType::Preferred => {
            let next = p.replicas.iter().skip(1).copied().find(|&r| valid(r));
            match p.replicas.first().copied().filter(|&r| valid(r)) {
                Some(r) => (r, None),
                None if valid(p.leader) => (p.leader, None),
                None => (next.unwrap_or(-1), None),
            }
        }
        ElectionType::Unclean => {
            if valid(p.leader) {
                (p.leader, None)
            } else if let Some(r) = p.replicas.iter().copied().find(|&r| valid(r)) {
                (r, None)
            } else if let Some(r) = p.replicas.iter().copied().find(|&r| live(r)) {
                (r, Some(vec![r]))
            } else {
                (-1, None)
            }
        }
    };
    (leader != p.leader).then_some((leader, isr))
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
            let outcome = match elect_partition(&after, election, &name, index) {
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

/// One partition of [`elect_leaders_on_request`]: its record, or why none.
fn elect_partition(
    image: &MetadataImage,
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
    let live = |b: i32| image.brokers.get(&b).is_some_and(|r| !r.fenced);
    let (leader, isr) = elect_one(p, election, live).ok_or(match election {
        ElectionType::Preferred => ElectionOutcome::PreferredLeaderNotAvailable,
        ElectionType::Unclean => ElectionOutcome::EligibleLeadersNotAvailable,
    })?;
    // An unclean election (a new ISR of the leader alone) leaves the
    // leader recovering (KIP-704), as Kafka's `PartitionChangeBuilder`.
    let recovering = isr.is_some() && p.leader_recovery_state != LeaderRecoveryState::Recovering;
    Ok(MetadataRecord::PartitionChange(PartitionChangeRecord {
        partition_id: index,
        topic_id: topic.topic_id,
        isr,
        leader: Some(leader),
        replicas: None,
        leader_recovery_state: recovering.then_some(LeaderRecoveryState::Recovering),
    }))
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
    max_elections: usize,
) -> ControllerResult<bool> {
    let live = |b: i32| image.brokers.get(&b).is_some_and(|r| !r.fenced);
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
            if let Some((leader, isr)) = elect_one(p, ElectionType::Preferred, live) {
                records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                    partition_id,
                    topic_id: topic.topic_id,
                    isr,
                    leader: Some(leader),
                    replicas: None,
                    leader_recovery_state: None,
                }));
            }
        }
    }
    let more = records.len() >= max_elections;
    ControllerResult {
        records,
        response: more,
    }
}
