//! Changes to one partition's leader and ISR (Kafka's
//! `PartitionChangeBuilder`) and the online elections the controller makes
//! when brokers come and go (`generateLeaderAndIsrUpdates`).

use crate::image::{MetadataImage, PartitionRegistration, TopicId};
use crate::records::{LeaderRecoveryState, MetadataRecord, PartitionChangeRecord};

/// Topic config (and cluster-wide broker config) that lets a partition with
/// no live ISR member elect a live replica outside the ISR, losing data.
pub const UNCLEAN_LEADER_ELECTION_ENABLE: &str = "unclean.leader.election.enable";

/// True when `topic` may elect a leader from outside its ISR:
/// [`UNCLEAN_LEADER_ELECTION_ENABLE`] is true for the topic or, unset there,
/// in the cluster-wide broker configs (Kafka's
/// `ConfigurationControlManager.uncleanLeaderElectionEnabledForTopic`).
fn unclean_enabled(image: &MetadataImage, topic: &crate::image::TopicImage) -> bool {
    topic
        .configs
        .get(UNCLEAN_LEADER_ELECTION_ENABLE)
        .or_else(|| {
            image
                .broker_configs
                .get("")
                .and_then(|c| c.get(UNCLEAN_LEADER_ELECTION_ENABLE))
        })
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// True for a registered, unfenced broker: one that may lead and be in an
/// ISR (Kafka's `ClusterControlManager.isActive`; Weir fences a broker as
/// soon as it asks to shut down, so "not in controlled shutdown" is part of
/// unfenced).
pub(super) fn is_active(image: &MetadataImage, broker: i32) -> bool {
    image.brokers.get(&broker).is_some_and(|r| !r.fenced)
}

/// What a partition change aims at: Kafka's `PartitionChangeBuilder`
/// targets, with ELR (KIP-966) and reassignment off.
pub(super) struct ChangeTarget<'a> {
    /// The ISR asked for. An empty target leaves the ISR as it is (with ELR
    /// off Kafka never writes an empty ISR).
    pub(super) isr: Vec<i32>,
    /// May this replica lead (`isAcceptableLeader`)?
    pub(super) acceptable: &'a dyn Fn(i32) -> bool,
    /// `Election.UNCLEAN` instead of `ONLINE`.
    pub(super) unclean: bool,
    /// The leader recovery state asked for (the current one unless an
    /// AlterPartition asks otherwise).
    pub(super) recovery: LeaderRecoveryState,
}

/// The `PartitionChangeRecord` that takes partition `partition_id` of
/// `topic_id` from `p` to `target`, or `None` when nothing would change
/// (Kafka's `PartitionChangeBuilder.build` with ELR off, metadata version
/// 3.6 or later, so an ISR shrink does not bump the leader epoch):
/// - leader (`electAnyLeader`): the current one if it is in the target ISR
///   and acceptable; else the first replica, in assignment order, that is;
///   else, for an unclean election, the first acceptable replica, whose ISR
///   becomes just itself and whose recovery state becomes `Recovering`;
///   else -1 (offline);
/// - ISR: the target, unless it is empty or the unclean election set it;
/// - leader recovery state: the target's when it differs.
pub(super) fn partition_change(
    topic_id: TopicId,
    partition_id: i32,
    p: &PartitionRegistration,
    target: ChangeTarget<'_>,
) -> Option<PartitionChangeRecord> {
    let valid = |r: i32| target.isr.contains(&r) && (target.acceptable)(r);
    let mut record = PartitionChangeRecord {
        partition_id,
        topic_id,
        isr: None,
        leader: None,
        replicas: None,
        leader_recovery_state: None,
    };
    let elected = if valid(p.leader) {
        Some((p.leader, false))
    } else if let Some(&r) = p.replicas.iter().find(|&&r| valid(r)) {
        Some((r, false))
    } else if target.unclean {
        let acceptable = p.replicas.iter().find(|&&r| (target.acceptable)(r));
        acceptable.map(|&r| (r, true))
    } else {
        None
    };
    let (leader, unclean) = elected.unwrap_or((-1, false));
    if leader != p.leader {
        record.leader = Some(leader);
        if unclean {
            record.isr = Some(vec![leader]);
            if p.leader_recovery_state != LeaderRecoveryState::Recovering {
                record.leader_recovery_state = Some(LeaderRecoveryState::Recovering);
            }
        }
    }
    if record.isr.is_none() && !target.isr.is_empty() && target.isr != p.isr {
        record.isr = Some(target.isr);
    }
    if target.recovery != p.leader_recovery_state {
        record.leader_recovery_state = Some(target.recovery);
    }
    let no_op =
        record.isr.is_none() && record.leader.is_none() && record.leader_recovery_state.is_none();
    (!no_op).then_some(record)
}

/// The `PartitionChangeRecord`s that take `broker` out of every ISR it is
/// in and move its leaderships, as Kafka's
/// `ReplicationControlManager.generateLeaderAndIsrUpdates` with
/// `brokerToRemove = broker` (`handleBrokerFenced`,
/// `handleBrokerInControlledShutdown`, and `handleBrokerShutdown` for a
/// re-registration, ELR off): per partition whose ISR holds `broker`, the
/// target ISR is the ISR without it (kept whole when `broker` is its only
/// member, so the partition goes offline with the replica that has
/// everything still named), `broker` may not lead, and the leader is
/// elected as [`partition_change`] does (unclean when the topic allows it).
pub fn isr_removals(image: &MetadataImage, broker: i32) -> Vec<MetadataRecord> {
    let acceptable = |r: i32| r != broker && is_active(image, r);
    let mut records = Vec::new();
    for topic in image.topics.values() {
        let unclean = unclean_enabled(image, topic);
        for (&partition_id, p) in &topic.partitions {
            if !p.isr.contains(&broker) {
                continue;
            }
            let target = ChangeTarget {
                isr: p.isr.iter().copied().filter(|&r| r != broker).collect(),
                acceptable: &acceptable,
                unclean,
                recovery: p.leader_recovery_state,
            };
            records.extend(
                partition_change(topic.topic_id, partition_id, p, target)
                    .map(MetadataRecord::PartitionChange),
            );
        }
    }
    records
}

/// The `PartitionChangeRecord`s that bring every partition's leader and ISR
/// in line with the live (registered, unfenced) brokers of `image`, as
/// Kafka's `PartitionChangeBuilder` with ELR off (see [`partition_change`]):
/// - ISR: members that are not live leave it, unless none is live, in which
///   case the ISR is kept as it was (so the last leader's return can elect
///   it again);
/// - leader: kept if live and in the ISR, else the first replica (in
///   replica order) that is live and in the ISR; else, when
///   `unclean.leader.election.enable` is true for the topic (or, unset there,
///   in the cluster-wide broker configs), the first live replica, whose ISR
///   becomes just itself and whose leader recovery state `Recovering`;
///   else -1 (offline).
///
/// Used after a broker is unfenced (Kafka's `handleBrokerUnfenced`: the
/// partitions without a leader elect it when it is in their ISR); fencing
/// uses [`isr_removals`], one broker at a time. Replay bumps the partition
/// epoch, and the leader epoch when the leader changes. Partitions that
/// need no change add nothing.
pub fn elect_leaders(image: &MetadataImage) -> Vec<MetadataRecord> {
    let live = |r: i32| is_active(image, r);
    let mut records = Vec::new();
    for topic in image.topics.values() {
        let unclean = unclean_enabled(image, topic);
        for (&partition_id, p) in &topic.partitions {
            let target = ChangeTarget {
                isr: p.isr.iter().copied().filter(|&r| live(r)).collect(),
                acceptable: &live,
                unclean,
                recovery: p.leader_recovery_state,
            };
            records.extend(
                partition_change(topic.topic_id, partition_id, p, target)
                    .map(MetadataRecord::PartitionChange),
            );
        }
    }
    records
}
