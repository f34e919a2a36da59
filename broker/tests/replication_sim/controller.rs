//! The simulation's active controller: the real pure controller functions
//! of `weir_controller::control` (`register_broker`, `broker_heartbeat`,
//! `fence_brokers`, `alter_partition`, `balance_partition_leaders`, on a
//! [`MetadataImage`] this struct owns), a commit that replays their
//! records into the image as the quorum's state machine does (one metadata
//! log offset per command that writes records), and the broker session
//! bookkeeping that `QuorumController` keeps in memory (`BrokerSessions` in
//! `controller/src/quorum.rs`: last contact, reported metadata offsets,
//! controlled-shutdown offsets), on simulated time.
//!
//! Every partition change it commits is kept as a [`Change`] (the
//! registration before and after the record) for the driver's
//! invariants.

use std::collections::{BTreeMap, BTreeSet};

use weir_controller::control::{
    alter_partition, balance_partition_leaders, broker_heartbeat, create_topics, fence_brokers,
    register_broker, StaticConfig, MAX_ELECTIONS_PER_IMBALANCE,
};
use weir_controller::{
    AlterPartitionRequest, AlterPartitionResponse, BrokerHeartbeat, BrokerRegistrationRequest,
    ControllerError, CreatableTopic, HeartbeatProgress, HeartbeatReply, MetadataImage,
    MetadataRecord, PartitionRegistration,
};

use crate::{BROKER_SESSION_TIMEOUT_MS, TOPIC};

/// One partition change as replayed: the registration before (`None` for
/// a new partition) and after, at metadata offset `offset`, and the brokers
/// active (unfenced, not shutting down) right after it.
#[derive(Debug, Clone)]
pub struct Change {
    pub offset: u64,
    pub before: Option<PartitionRegistration>,
    pub after: PartitionRegistration,
    pub active: BTreeSet<i32>,
}

/// The active controller (one, for the whole run: controller failover is
/// the quorum simulation's business).
pub struct Controller {
    pub image: MetadataImage,
    pub config: StaticConfig,
    /// Last heartbeat or registration per broker (simulated ms).
    last_contact: BTreeMap<i32, i64>,
    /// The metadata offset each broker last reported.
    metadata_offsets: BTreeMap<i32, u64>,
    /// The offset at which each broker entered controlled shutdown. As in
    /// `QuorumController`, kept for the whole term (one here): a later
    /// controlled shutdown of the same broker keeps the first offset.
    controlled_shutdown_offsets: BTreeMap<i32, u64>,
    /// Partition changes committed since the driver last took them.
    pub changes: Vec<Change>,
}

impl Controller {
    pub fn new(config: StaticConfig) -> Controller {
        Controller {
            image: MetadataImage::new("replication-sim"),
            config,
            last_contact: BTreeMap::new(),
            metadata_offsets: BTreeMap::new(),
            controlled_shutdown_offsets: BTreeMap::new(),
            changes: Vec::new(),
        }
    }

    /// Commits `records` as one metadata log entry (as the quorum's state
    /// machine applies a committed entry): replays them in order and
    /// advances `last_applied_offset`. Returns the offset of the entry, or
    /// the current offset when there is nothing to write.
    ///
    /// # Errors
    /// A record that does not replay (the controller computed it from
    /// this very image, so that is a controller bug).
    pub fn commit(&mut self, records: Vec<MetadataRecord>) -> Result<u64, String> {
        if records.is_empty() {
            return Ok(self.image.last_applied_offset);
        }
        let offset = self.image.last_applied_offset + 1;
        for record in &records {
            let before = match record {
                MetadataRecord::PartitionChange(r) => self
                    .image
                    .topic_by_id(&r.topic_id)
                    .and_then(|t| t.partitions.get(&r.partition_id))
                    .cloned(),
                _ => None,
            };
            self.image
                .apply(record)
                .map_err(|e| format!("controller record {record:?} does not replay: {e}"))?;
            let after = match record {
                MetadataRecord::PartitionChange(r) => self
                    .image
                    .topic_by_id(&r.topic_id)
                    .and_then(|t| t.partitions.get(&r.partition_id)),
                MetadataRecord::Partition(r) => self
                    .image
                    .topic_by_id(&r.topic_id)
                    .and_then(|t| t.partitions.get(&r.partition_id)),
                _ => None,
            };
            if let Some(after) = after {
                self.changes.push(Change {
                    offset,
                    before,
                    after: after.clone(),
                    active: self
                        .image
                        .brokers
                        .values()
                        .filter(|b| b.is_active())
                        .map(|b| b.broker_id)
                        .collect(),
                });
            }
        }
        self.image.last_applied_offset = offset;
        Ok(offset)
    }

    /// The simulated partition's registration, once the topic exists.
    pub fn partition(&self) -> Option<&PartitionRegistration> {
        self.image.topic(TOPIC)?.partitions.get(&0)
    }

    /// Creates the topic (CreateTopics with a manual assignment).
    pub fn create_topic(&mut self, topic: CreatableTopic) -> Result<(), String> {
        let placer = weir_controller::StripedReplicaPlacer::default();
        let result = create_topics(&self.image, &[topic], false, &placer);
        if let Some(Err(e)) = result.response.first() {
            return Err(format!("creating the topic: {e}"));
        }
        self.commit(result.records)?;
        Ok(())
    }

    /// BrokerRegistration (fenced, as every multi-voter registration).
    /// Returns the new broker epoch.
    pub fn register(
        &mut self,
        request: BrokerRegistrationRequest,
        now_ms: i64,
    ) -> Result<i64, String> {
        self.last_contact.insert(request.broker_id, now_ms);
        let result = register_broker(&self.image, &self.config, request, true);
        self.commit(result.records)?;
        Ok(result.response)
    }

    /// BrokerHeartbeat, as `QuorumController` runs it.
    pub fn heartbeat(
        &mut self,
        heartbeat: &BrokerHeartbeat,
        now_ms: i64,
    ) -> Result<Result<HeartbeatReply, ControllerError>, String> {
        let progress = self.progress(heartbeat.broker_id);
        let result = match broker_heartbeat(&self.image, &self.config, heartbeat, &progress) {
            Ok(result) => result,
            Err(e) => return Ok(Err(e)),
        };
        self.last_contact.insert(heartbeat.broker_id, now_ms);
        self.metadata_offsets
            .insert(heartbeat.broker_id, heartbeat.metadata_offset);
        let offset = self.commit(result.records)?;
        if result.response.in_controlled_shutdown {
            self.controlled_shutdown_offsets
                .entry(heartbeat.broker_id)
                .or_insert(offset);
        }
        Ok(Ok(result.response))
    }

    /// What a heartbeat's answer depends on (`BrokerSessions::progress`).
    fn progress(&self, broker_id: i32) -> HeartbeatProgress {
        HeartbeatProgress {
            controlled_shutdown_offset: self.controlled_shutdown_offsets.get(&broker_id).copied(),
            lowest_active_offset: self
                .image
                .brokers
                .values()
                .filter(|b| b.is_active())
                .map(|b| {
                    self.metadata_offsets
                        .get(&b.broker_id)
                        .copied()
                        .unwrap_or(0)
                })
                .min()
                .unwrap_or(u64::MAX),
        }
    }

    /// Fences every unfenced broker whose session expired
    /// (`broker.session.timeout.ms`); returns them.
    pub fn expire_sessions(&mut self, now_ms: i64) -> Result<Vec<i32>, String> {
        let expired: Vec<i32> = self
            .image
            .brokers
            .values()
            .filter(|b| !b.fenced)
            .filter(|b| {
                let last = self.last_contact.get(&b.broker_id).copied().unwrap_or(0);
                now_ms - last > BROKER_SESSION_TIMEOUT_MS
            })
            .map(|b| b.broker_id)
            .collect();
        if expired.is_empty() {
            return Ok(expired);
        }
        let result = fence_brokers(&self.image, &self.config, &expired);
        self.commit(result.records)?;
        Ok(result.response)
    }

    /// AlterPartition.
    pub fn alter_partition(
        &mut self,
        request: &AlterPartitionRequest,
    ) -> Result<Result<AlterPartitionResponse, ControllerError>, String> {
        let result = alter_partition(&self.image, &self.config, request);
        self.commit(result.records)?;
        Ok(result.response)
    }

    /// One automatic preferred-leader rebalance pass
    /// (`auto.leader.rebalance.enable`).
    pub fn balance_leaders(&mut self) -> Result<bool, String> {
        let result =
            balance_partition_leaders(&self.image, &self.config, MAX_ELECTIONS_PER_IMBALANCE);
        let moved = !result.records.is_empty();
        self.commit(result.records)?;
        Ok(moved)
    }
}
