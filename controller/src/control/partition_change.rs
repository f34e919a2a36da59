//! Changes to one partition's leader, ISR and ELR (Kafka's
//! `PartitionChangeBuilder`) and the elections the controller makes when
//! brokers come and go (`ReplicationControlManager.generateLeaderAndIsrUpdates`).
//!
//! Every partition change the controller writes goes through
//! [`PartitionChangeBuilder`]: fencing, controlled shutdown, registration
//! after a shutdown, unfencing, AlterPartition, ElectLeaders and the
//! preferred-leader rebalance. It follows Kafka 4.1's builder with
//! reassignment and directory assignment left out (Weir has neither), and
//! metadata version 3.6+ rules (an ISR shrink does not bump the leader
//! epoch).

use crate::image::{MetadataImage, PartitionRegistration, TopicId, TopicImage};
use crate::records::{LeaderRecoveryState, MetadataRecord, PartitionChangeRecord};

/// Topic config (and cluster-wide broker config) that lets a partition with
/// no live ISR member elect a live replica outside the ISR, losing data.
pub const UNCLEAN_LEADER_ELECTION_ENABLE: &str = "unclean.leader.election.enable";

/// Topic config (and cluster-wide broker config) for the fewest in-sync
/// replicas an acks=all write needs; below it the ISR's former members go
/// to the ELR (KIP-966).
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";

/// What the controller decides with that is not in the metadata log: this
/// node's static configuration (Kafka's `ConfigurationControlManager`
/// static config, the last fallback of a topic config after the topic's
/// own and the cluster-wide dynamic default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaticConfig {
    /// `min.insync.replicas` in this node's configuration. Default: 1
    /// (Kafka's).
    pub min_insync_replicas: i32,
}

impl Default for StaticConfig {
    fn default() -> Self {
        StaticConfig {
            min_insync_replicas: 1,
        }
    }
}

/// True when `topic` may elect a leader from outside its ISR:
/// [`UNCLEAN_LEADER_ELECTION_ENABLE`] is true for the topic or, unset there,
/// in the cluster-wide broker configs (Kafka's
/// `ConfigurationControlManager.uncleanLeaderElectionEnabledForTopic`).
fn unclean_enabled(image: &MetadataImage, topic: &TopicImage) -> bool {
    topic_config(image, topic, UNCLEAN_LEADER_ELECTION_ENABLE)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// `key` for `topic`: the topic's own value, else the cluster-wide dynamic
/// default (broker configs of the empty resource name).
fn topic_config<'a>(image: &'a MetadataImage, topic: &'a TopicImage, key: &str) -> Option<&'a str> {
    topic
        .configs
        .get(key)
        .or_else(|| image.broker_configs.get("").and_then(|c| c.get(key)))
        .map(String::as_str)
}

/// The effective `min.insync.replicas` of `topic` (Kafka's
/// `ReplicationControlManager.getTopicEffectiveMinIsr`): the topic's value,
/// else the cluster-wide dynamic default, else `config`'s, capped at the
/// replication factor (the first partition's replica count). An
/// unparsable value (the broker validates configs before they reach the
/// log) counts as 1.
pub fn effective_min_isr(
    image: &MetadataImage,
    config: &StaticConfig,
    topic: &TopicImage,
) -> usize {
    let min_isr = topic_config(image, topic, MIN_INSYNC_REPLICAS)
        .map_or(config.min_insync_replicas, |v| {
            v.trim().parse().unwrap_or(1)
        });
    let replication_factor = topic
        .partitions
        .values()
        .next()
        .map_or(0, |p| p.replicas.len());
    usize::try_from(min_isr.max(1))
        .unwrap_or(1)
        .min(replication_factor)
}

/// True for a broker that may lead and be in an ISR: registered, unfenced
/// and not in controlled shutdown (Kafka's `ClusterControlManager.isActive`).
pub(super) fn is_active(image: &MetadataImage, broker: i32) -> bool {
    image.brokers.get(&broker).is_some_and(|r| r.is_active())
}

/// The kind of election a partition change makes (Kafka's
/// `PartitionChangeBuilder.Election`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Election {
    /// Elect the first replica if it is a valid leader, else keep the
    /// partition online from the ISR (ElectLeaders' preferred election and
    /// the automatic rebalance).
    Preferred,
    /// Keep the partition online from the ISR (or the ELR when the ISR is
    /// empty).
    Online,
    /// As `Online`, but when nobody valid is left elect any acceptable
    /// replica, losing data (`unclean.leader.election.enable`, ElectLeaders'
    /// unclean election).
    Unclean,
}

/// The leader an election picks (Kafka's `ElectionResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Elected {
    /// The new leader, or -1.
    node: i32,
    /// From outside the ISR and ELR: the ISR becomes the leader alone and
    /// the partition `Recovering` (KIP-704).
    unclean: bool,
}

/// Builds the one `PartitionChangeRecord` that takes a partition to its
/// targets (Kafka's `PartitionChangeBuilder`): set the targets, then
/// [`PartitionChangeBuilder::build`]. Untouched targets keep the
/// partition's current values.
pub(super) struct PartitionChangeBuilder<'a> {
    partition: &'a PartitionRegistration,
    topic_id: TopicId,
    partition_id: i32,
    /// May this replica lead (`isAcceptableLeader`)?
    acceptable: &'a dyn Fn(i32) -> bool,
    /// The topic's effective `min.insync.replicas`.
    min_isr: usize,
    target_isr: Vec<i32>,
    target_elr: Vec<i32>,
    /// Replicas that restarted after an unclean shutdown: never in the ELR.
    unclean_shutdown_replicas: Vec<i32>,
    election: Election,
    target_recovery: LeaderRecoveryState,
    elr_enabled: bool,
}

impl<'a> PartitionChangeBuilder<'a> {
    /// A builder for `partition` (`partition_id` of `topic_id`) whose
    /// targets are its current values, ELR off and an online election.
    pub(super) fn new(
        partition: &'a PartitionRegistration,
        topic_id: TopicId,
        partition_id: i32,
        acceptable: &'a dyn Fn(i32) -> bool,
        min_isr: usize,
    ) -> Self {
        PartitionChangeBuilder {
            partition,
            topic_id,
            partition_id,
            acceptable,
            min_isr,
            target_isr: partition.isr.clone(),
            target_elr: partition.elr.clone(),
            unclean_shutdown_replicas: Vec::new(),
            election: Election::Online,
            target_recovery: partition.leader_recovery_state,
            elr_enabled: false,
        }
    }

    /// The ISR to move to.
    pub(super) fn target_isr(mut self, isr: Vec<i32>) -> Self {
        self.target_isr = isr;
        self
    }

    /// The kind of election to make.
    pub(super) fn election(mut self, election: Election) -> Self {
        self.election = election;
        self
    }

    /// Replicas known to have restarted after an unclean shutdown; they
    /// leave the ELR.
    pub(super) fn unclean_shutdown_replicas(mut self, replicas: Vec<i32>) -> Self {
        self.unclean_shutdown_replicas = replicas;
        self
    }

    /// The leader recovery state to move to (AlterPartition).
    pub(super) fn target_recovery(mut self, state: LeaderRecoveryState) -> Self {
        self.target_recovery = state;
        self
    }

    /// Turns Eligible Leader Replicas (KIP-966) on or off.
    pub(super) fn elr_enabled(mut self, enabled: bool) -> Self {
        self.elr_enabled = enabled;
        self
    }

    /// May `replica` lead: in the target ISR, or in the target ELR when the
    /// ISR is empty, and acceptable (`isValidNewLeader`).
    fn is_valid_new_leader(&self, replica: i32) -> bool {
        (self.target_isr.contains(&replica)
            || (self.target_isr.is_empty() && self.target_elr.contains(&replica)))
            && (self.acceptable)(replica)
    }

    /// Kafka 4.1's `canElectLastKnownLeader`: with ELR on, an empty target
    /// ISR and ELR, and exactly one last known leader that is acceptable.
    fn can_elect_last_known_leader(&self) -> bool {
        self.elr_enabled
            && self.target_elr.is_empty()
            && self.target_isr.is_empty()
            && self.partition.last_known_elr.len() == 1
            && (self.acceptable)(self.partition.last_known_elr[0])
    }

    /// `electLeader`: the preferred or any leader, per the election kind.
    fn elect_leader(&self) -> Elected {
        let p = self.partition;
        let valid = |r: i32| self.is_valid_new_leader(r);
        let clean = |node| Elected {
            node,
            unclean: false,
        };
        if self.election == Election::Preferred {
            if let Some(&first) = p.replicas.first().filter(|&&r| valid(r)) {
                return clean(first);
            }
            if valid(p.leader) {
                return clean(p.leader);
            }
            if let Some(&r) = p.replicas.iter().skip(1).find(|&&r| valid(r)) {
                return clean(r);
            }
        } else {
            if valid(p.leader) {
                return clean(p.leader);
            }
            if let Some(&r) = p.replicas.iter().find(|&&r| valid(r)) {
                return clean(r);
            }
        }
        if self.can_elect_last_known_leader() {
            return Elected {
                node: p.last_known_elr[0],
                unclean: true,
            };
        }
        if self.election == Election::Unclean {
            if let Some(&r) = p.replicas.iter().find(|&&r| (self.acceptable)(r)) {
                return Elected {
                    node: r,
                    unclean: true,
                };
            }
        }
        clean(-1)
    }

    /// `maybePopulateTargetElr`: with ELR on and the target ISR below the
    /// min ISR, the ELR gains the current ISR's members that leave it
    /// (their data reaches the high watermark, which cannot move while the
    /// ISR is below the min ISR), never a replica that shut down
    /// uncleanly; at or above the min ISR it is cleared. (Kafka also
    /// computes a last known ELR here, which 4.1 never writes: its
    /// `LastKnownElr` holds only the last known leader.)
    fn populate_target_elr(&mut self) {
        if !self.elr_enabled {
            return;
        }
        if self.target_isr.len() >= self.min_isr {
            self.target_elr.clear();
            return;
        }
        let mut candidates = self.target_elr.clone();
        for &r in &self.partition.isr {
            if !candidates.contains(&r) {
                candidates.push(r);
            }
        }
        candidates.retain(|r| {
            !self.target_isr.contains(r) && !self.unclean_shutdown_replicas.contains(r)
        });
        // Kafka collects a `HashSet<Integer>`, which iterates small ids in
        // ascending order; the order decides nothing (elections go by
        // replica order).
        candidates.sort_unstable();
        self.target_elr = candidates;
    }

    /// `tryElection`: sets the record's leader when it changes; a leader
    /// from the ELR becomes the ISR alone and leaves the ELR; an unclean
    /// one becomes the ISR alone and marks the partition `Recovering`.
    fn try_election(&mut self, record: &mut PartitionChangeRecord) {
        let elected = self.elect_leader();
        if elected.node == self.partition.leader {
            return;
        }
        if self.target_elr.contains(&elected.node) {
            self.target_isr = vec![elected.node];
            self.target_elr.retain(|&r| r != elected.node);
            tracing::info!(
                topic_id = %self.topic_id,
                partition = self.partition_id,
                leader = elected.node,
                "electing a leader from the eligible leader replicas (ELR)"
            );
        } else if elected.unclean {
            tracing::warn!(
                topic_id = %self.topic_id,
                partition = self.partition_id,
                leader = elected.node,
                "unclean leader election: records the ISR had may be lost"
            );
        }
        record.leader = Some(elected.node);
        if elected.unclean {
            record.isr = Some(vec![elected.node]);
            if self.partition.leader_recovery_state != LeaderRecoveryState::Recovering {
                record.leader_recovery_state = Some(LeaderRecoveryState::Recovering);
            }
        }
    }

    /// `maybeUpdateRecordElr`: an unclean election or ELR off clears the
    /// ELR.
    fn update_record_elr(&mut self, record: &mut PartitionChangeRecord) {
        let clean_election = record.isr.is_none();
        if !clean_election || !self.elr_enabled {
            self.target_elr.clear();
        }
        if self.target_elr != self.partition.elr {
            record.eligible_leader_replicas = Some(self.target_elr.clone());
        }
    }

    /// `maybeUpdateLastKnownLeader`: with ELR on, the leader the partition
    /// loses is remembered the first time it has none, and forgotten once it
    /// has one again.
    fn update_last_known_leader(&self, record: &mut PartitionChangeRecord) {
        if !self.elr_enabled {
            return;
        }
        if record.leader == Some(-1) && self.partition.last_known_elr.is_empty() {
            record.last_known_elr = Some(vec![self.partition.leader]);
        } else if record.leader.is_some_and(|l| l >= 0) && !self.partition.last_known_elr.is_empty()
        {
            record.last_known_elr = Some(Vec::new());
        }
    }

    /// The record, or `None` when nothing would change (Kafka's `build`).
    pub(super) fn build(mut self) -> Option<PartitionChangeRecord> {
        let p = self.partition;
        let mut record = PartitionChangeRecord {
            partition_id: self.partition_id,
            topic_id: self.topic_id,
            ..PartitionChangeRecord::default()
        };
        self.populate_target_elr();
        self.try_election(&mut record);
        self.update_record_elr(&mut record);
        // With ELR on the ISR may become empty; off, an empty target keeps
        // the ISR as it is (the last member stays named).
        if record.isr.is_none()
            && (!self.target_isr.is_empty() || self.elr_enabled)
            && self.target_isr != p.isr
        {
            record.isr = Some(self.target_isr.clone());
        }
        self.update_last_known_leader(&mut record);
        if self.target_recovery != p.leader_recovery_state {
            record.leader_recovery_state = Some(self.target_recovery);
        }
        let no_op = record.isr.is_none()
            && record.leader.is_none()
            && record.leader_recovery_state.is_none()
            && record.eligible_leader_replicas.is_none()
            && record.last_known_elr.is_none();
        (!no_op).then_some(record)
    }
}

/// The partition changes of Kafka's
/// `ReplicationControlManager.generateLeaderAndIsrUpdates` for the
/// partitions `select` picks:
/// - `broker_to_remove` leaves their ISRs and may not lead (fencing,
///   controlled shutdown, a clean restart);
/// - `broker_with_unclean_shutdown` leaves their ISRs and ELRs and may not
///   lead (a restart after an unclean shutdown, ELR on);
/// - otherwise the ISR is kept and a leader elected where one is missing
///   (unfencing: the returning broker is already unfenced in `image`).
///
/// Each change is built on `image` as it is (no change here affects
/// another partition's), with the topic's effective min ISR, ELR as the
/// image's feature says, and an unclean election where the topic allows
/// it.
pub(super) fn leader_and_isr_updates(
    image: &MetadataImage,
    config: &StaticConfig,
    broker_to_remove: Option<i32>,
    broker_with_unclean_shutdown: Option<i32>,
    select: impl Fn(&PartitionRegistration) -> bool,
) -> Vec<MetadataRecord> {
    let excluded = |r: i32| Some(r) == broker_to_remove || Some(r) == broker_with_unclean_shutdown;
    let acceptable = |r: i32| !excluded(r) && is_active(image, r);
    let elr_enabled = image.elr_enabled();
    let mut records = Vec::new();
    for topic in image.topics.values() {
        let mut min_isr = None;
        for (&partition_id, p) in &topic.partitions {
            if !select(p) {
                continue;
            }
            let min_isr = *min_isr.get_or_insert_with(|| effective_min_isr(image, config, topic));
            let election = if unclean_enabled(image, topic) {
                Election::Unclean
            } else {
                Election::Online
            };
            let builder =
                PartitionChangeBuilder::new(p, topic.topic_id, partition_id, &acceptable, min_isr)
                    .elr_enabled(elr_enabled)
                    .election(election)
                    .unclean_shutdown_replicas(broker_with_unclean_shutdown.into_iter().collect())
                    .target_isr(p.isr.iter().copied().filter(|&r| !excluded(r)).collect());
            records.extend(builder.build().map(MetadataRecord::PartitionChange));
        }
    }
    records
}

/// The partition changes that take `broker` out of every ISR it is in and
/// move its leaderships (Kafka's `handleBrokerFenced` /
/// `handleBrokerInControlledShutdown` / a clean `handleBrokerShutdown`):
/// `leader_and_isr_updates` with `broker_to_remove`. With ELR off a last
/// ISR member stays in the ISR (the partition goes offline with the
/// replica that has everything still named); with ELR on the ISR may
/// empty, its members kept in the ELR while the ISR is below the min ISR.
pub fn isr_removals(
    image: &MetadataImage,
    config: &StaticConfig,
    broker: i32,
) -> Vec<MetadataRecord> {
    leader_and_isr_updates(image, config, Some(broker), None, |p| {
        p.isr.contains(&broker)
    })
}

/// The partition changes for a broker that restarted after an unclean
/// shutdown with ELR on (Kafka's `handleBrokerShutdown` with
/// `isCleanShutdown` false): it leaves every ISR and ELR it is in, and may
/// not lead, since it may have lost records it had acknowledged.
pub fn unclean_shutdown_removals(
    image: &MetadataImage,
    config: &StaticConfig,
    broker: i32,
) -> Vec<MetadataRecord> {
    leader_and_isr_updates(image, config, None, Some(broker), |p| {
        p.isr.contains(&broker) || p.elr.contains(&broker)
    })
}

/// The partition changes that elect a leader for every partition without
/// one, from its ISR (or ELR) among the active brokers of `image` (Kafka's
/// `handleBrokerUnfenced`, with the unfenced broker already unfenced in
/// `image`; an unclean election where the topic allows it). Replay bumps
/// the partition epoch, and the leader epoch when the leader changes.
pub fn elect_leaders(image: &MetadataImage, config: &StaticConfig) -> Vec<MetadataRecord> {
    leader_and_isr_updates(image, config, None, None, |p| p.leader < 0)
}
