//! Broker registration, heartbeats and fencing (Kafka's
//! `ClusterControlManager` and `BrokerHeartbeatManager`, with the partition
//! changes `ReplicationControlManager` makes when a broker comes or goes).

use super::partition_change::{
    elect_leaders, isr_removals, unclean_shutdown_removals, StaticConfig,
};
use super::ControllerResult;
use crate::error::ControllerError;
use crate::image::MetadataImage;
use crate::records::{
    BrokerEndpoint, BrokerRegistrationChangeRecord, FeatureLevelRecord, FenceBrokerRecord,
    MetadataRecord, RegisterBrokerRecord, UnfenceBrokerRecord, ELIGIBLE_LEADER_REPLICAS_VERSION,
};

/// A broker's registration request (Kafka's `BrokerRegistrationRequest`
/// v3+, the fields Weir uses).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BrokerRegistrationRequest {
    /// `node.id`.
    pub broker_id: i32,
    /// A random id of this process incarnation.
    pub incarnation_id: uuid::Uuid,
    /// Advertised listeners.
    pub endpoints: Vec<BrokerEndpoint>,
    /// `broker.rack`, if configured.
    pub rack: Option<String>,
    /// The broker epoch this broker held when it last shut down cleanly
    /// (read from its `.kafka_cleanshutdown` marker), or -1 after an
    /// unclean shutdown or on first start (KIP-966's
    /// `PreviousBrokerEpoch`).
    pub previous_broker_epoch: i64,
}

/// Whether `image` is a new cluster's: no broker, topic or feature yet
/// (the first broker registration writes the new cluster's feature levels,
/// and the quorum adds its bootstrap records to that batch).
pub fn is_new_cluster(image: &MetadataImage) -> bool {
    image.brokers.is_empty() && image.topics.is_empty() && image.features.is_empty()
}

/// Computes the registration of a broker (Kafka's
/// `ClusterControlManager.registerBroker`) and returns its new broker epoch.
///
/// The epoch is `last_applied_offset + 1`, which is the offset the record
/// will be committed at when nothing else is in flight (Kafka uses the
/// record's offset) and is always above every earlier epoch. A re-registration
/// replaces the previous one.
///
/// With `fenced` (Kafka's `RegisterBrokerRecord.fenced`, always true in
/// Kafka) the broker may not lead nor join ISRs until a heartbeat unfences
/// it ([`broker_heartbeat`]), and the previous incarnation's partitions are
/// handled as Kafka's `handleBrokerShutdown` (its in-memory state is gone):
/// - after a clean shutdown (`previous_broker_epoch` is the epoch of the
///   registration it replaces) or with ELR off, it leaves every ISR and
///   loses its leaderships, as fencing would ([`isr_removals`]);
/// - after an unclean one with ELR on, it also leaves every ELR
///   ([`unclean_shutdown_removals`]): it may have lost records it
///   acknowledged, so it may lead only once it is back in an ISR.
///
/// A single-voter controller registers its own broker unfenced, so a single
/// node starts in one commit.
///
/// The first registration in a metadata log that holds no broker, topic or
/// feature yet (a new cluster) also writes Kafka 4.1's default feature
/// levels for new clusters: [`ELIGIBLE_LEADER_REPLICAS_VERSION`] 1 (Kafka
/// writes them at `kafka-storage format`). Metadata written by an older
/// Weir keeps ELR off.
pub fn register_broker(
    image: &MetadataImage,
    config: &StaticConfig,
    request: BrokerRegistrationRequest,
    fenced: bool,
) -> ControllerResult<i64> {
    let broker_id = request.broker_id;
    let broker_epoch = i64::try_from(image.last_applied_offset)
        .unwrap_or(i64::MAX - 1)
        .saturating_add(1);
    let mut records = Vec::new();
    if is_new_cluster(image) {
        records.push(MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: ELIGIBLE_LEADER_REPLICAS_VERSION.to_string(),
            feature_level: 1,
        }));
    }
    let previous = image.brokers.get(&broker_id);
    let clean_shutdown = previous.is_some_and(|b| b.broker_epoch == request.previous_broker_epoch);
    let mut after = image.clone();
    let registration = MetadataRecord::RegisterBroker(RegisterBrokerRecord {
        broker_id,
        incarnation_id: request.incarnation_id,
        broker_epoch,
        end_points: request.endpoints,
        rack: request.rack,
        fenced,
    });
    records = applied(&mut after, records);
    records.extend(applied(&mut after, vec![registration]));
    if fenced && previous.is_some() {
        if after.elr_enabled() && !clean_shutdown {
            records.extend(unclean_shutdown_removals(&after, config, broker_id));
        } else {
            records.extend(isr_removals(&after, config, broker_id));
        }
    }
    ControllerResult {
        records,
        response: broker_epoch,
    }
}

/// The active controller's answer to a broker heartbeat (the `is_fenced`,
/// `is_in_controlled_shutdown` and `should_shut_down` fields of Kafka's
/// `BrokerHeartbeatResponse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HeartbeatReply {
    /// The broker is fenced once this reply's records are applied.
    pub is_fenced: bool,
    /// The broker is in controlled shutdown once this reply's records are
    /// applied: it leads nothing and is in no ISR, and waits for
    /// `should_shut_down`.
    pub in_controlled_shutdown: bool,
    /// The broker asked to shut down and may now do so: it leads no
    /// partition, every active broker has seen that, and it is fenced.
    pub should_shut_down: bool,
}

/// One broker heartbeat (Kafka's `BrokerHeartbeatRequest`, the fields Weir
/// uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BrokerHeartbeat {
    /// `node.id`.
    pub broker_id: i32,
    /// The epoch of its registration.
    pub broker_epoch: i64,
    /// The metadata log offset the broker has applied.
    pub metadata_offset: u64,
    /// The broker wants to shut down (controlled shutdown).
    pub want_shut_down: bool,
}

/// What the active controller remembers of the brokers' heartbeats, in
/// memory only (Kafka's `BrokerHeartbeatManager`), that a heartbeat's
/// answer depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeartbeatProgress {
    /// The metadata offset at which the heartbeating broker entered
    /// controlled shutdown, if this controller saw it happen.
    pub controlled_shutdown_offset: Option<u64>,
    /// The lowest metadata offset the active brokers (unfenced, not in
    /// controlled shutdown) last reported; `u64::MAX` when there is none.
    pub lowest_active_offset: u64,
}

/// Handles one broker heartbeat (Kafka's
/// `ReplicationControlManager.processBrokerHeartbeat` and
/// `BrokerHeartbeatManager.calculateNextBrokerState`, KIP-631). The broker's
/// state is fenced, unfenced (active) or in controlled shutdown, and moves:
/// - fenced: asked to shut down, it may at once (no records); else, once
///   its applied `metadata_offset` has reached its registration (the
///   `broker_epoch`), it is unfenced (`UnfenceBrokerRecord`) and every
///   leaderless partition that can elects a leader ([`elect_leaders`]);
/// - unfenced, asked to shut down: with leaderships it enters controlled
///   shutdown (`BrokerRegistrationChangeRecord`), leaves every ISR and its
///   leaderships move ([`isr_removals`]), while it stays unfenced and keeps
///   following its partitions; without, it is fenced at once and may shut
///   down;
/// - in controlled shutdown (whatever it asks): once it leads nothing and
///   every active broker has applied the metadata at which it entered
///   controlled shutdown (`progress`), so the new leaders know they lead,
///   it is fenced and may shut down.
///
/// The session clock and `progress` live in the active controller's
/// memory, not in the log.
///
/// # Errors
///
/// [`ControllerError::StaleBrokerEpoch`] when the heartbeat's epoch is not
/// the broker's current registration.
pub fn broker_heartbeat(
    image: &MetadataImage,
    config: &StaticConfig,
    heartbeat: &BrokerHeartbeat,
    progress: &HeartbeatProgress,
) -> Result<ControllerResult<HeartbeatReply>, ControllerError> {
    let broker_id = heartbeat.broker_id;
    let broker_epoch = heartbeat.broker_epoch;
    let registration = image
        .brokers
        .get(&broker_id)
        .filter(|b| b.broker_epoch == broker_epoch)
        .ok_or(ControllerError::StaleBrokerEpoch {
            broker_id,
            requested: broker_epoch,
            current: image.brokers.get(&broker_id).map(|b| b.broker_epoch),
        })?;
    let reply = |is_fenced, in_controlled_shutdown, should_shut_down| HeartbeatReply {
        is_fenced,
        in_controlled_shutdown,
        should_shut_down,
    };
    let has_leaderships = || {
        image
            .topics
            .values()
            .flat_map(|t| t.partitions.values())
            .any(|p| p.leader == broker_id)
    };
    let shut_down_now = |image: &MetadataImage| {
        let fenced = fence_brokers(image, config, &[broker_id]);
        ControllerResult {
            records: fenced.records,
            response: reply(true, registration.in_controlled_shutdown, true),
        }
    };
    let unchanged = |response| ControllerResult {
        records: Vec::new(),
        response,
    };
    if registration.fenced {
        if heartbeat.want_shut_down {
            return Ok(unchanged(reply(
                true,
                registration.in_controlled_shutdown,
                true,
            )));
        }
        let caught_up =
            i64::try_from(heartbeat.metadata_offset).unwrap_or(i64::MAX) >= broker_epoch;
        if !caught_up {
            return Ok(unchanged(reply(true, false, false)));
        }
        let unfence = MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
            id: broker_id,
            epoch: broker_epoch,
        });
        let mut after = image.clone();
        let mut records = applied(&mut after, vec![unfence]);
        records.extend(elect_leaders(&after, config));
        return Ok(ControllerResult {
            records,
            response: reply(false, false, false),
        });
    }
    if registration.in_controlled_shutdown {
        let shut_down_offset_seen = progress
            .controlled_shutdown_offset
            .is_none_or(|offset| offset <= progress.lowest_active_offset);
        if has_leaderships() || !shut_down_offset_seen {
            return Ok(unchanged(reply(false, true, false)));
        }
        return Ok(shut_down_now(image));
    }
    if !heartbeat.want_shut_down {
        return Ok(unchanged(reply(false, false, false)));
    }
    if !has_leaderships() {
        return Ok(shut_down_now(image));
    }
    let enter = MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
        broker_id,
        broker_epoch,
        in_controlled_shutdown: true,
    });
    // Computed in controlled shutdown, written before the record that
    // enters it (as `fence_brokers`): split over several batches, a
    // failover between them leaves the broker out of controlled shutdown,
    // and its next heartbeat asks again for what is left.
    let mut after = image.clone();
    let _ = after.apply(&enter);
    let mut records = isr_removals(&after, config, broker_id);
    records.push(enter);
    Ok(ControllerResult {
        records,
        response: reply(false, true, false),
    })
}

/// Fences the given brokers (Kafka's `ReplicationControlManager.handleBrokerFenced`,
/// used when a session expires and when a broker may shut down): per
/// unfenced registered broker among `broker_ids`, in order, the
/// `PartitionChangeRecord`s that take it out of every ISR and move its
/// leaderships (see [`isr_removals`]) followed by one `FenceBrokerRecord`.
/// Brokers are handled one after another on the image the earlier ones
/// left, as Kafka fences one broker per event: when two members of an ISR
/// go at once, the one fenced last stays as the ISR's only member (ELR
/// off) or both go to the ELR (ELR on, below the min ISR). Unknown or
/// already fenced brokers add nothing; the response lists the brokers
/// fenced.
pub fn fence_brokers(
    image: &MetadataImage,
    config: &StaticConfig,
    broker_ids: &[i32],
) -> ControllerResult<Vec<i32>> {
    let mut fenced = Vec::new();
    let mut records = Vec::new();
    let mut after = None::<MetadataImage>;
    for &id in broker_ids {
        let Some(b) = image.brokers.get(&id).filter(|b| !b.fenced) else {
            continue;
        };
        if fenced.contains(&id) {
            continue;
        }
        fenced.push(id);
        let work = after.get_or_insert_with(|| image.clone());
        let fence = MetadataRecord::FenceBroker(FenceBrokerRecord {
            id,
            epoch: b.broker_epoch,
        });
        // The removals are computed with the broker fenced, and written
        // before the fence record, as Kafka's `handleBrokerFenced`: the
        // controller may write them in several batches (see
        // `quorum::MAX_BATCH_BYTES`), and a failover between two leaves
        // the broker unfenced with its session expired, so the next
        // controller fences it again and removes what is left. Replay of a
        // partition change does not look at brokers: `work` ends the same.
        let _ = work.apply(&fence);
        let removals = isr_removals(work, config, id);
        records.extend(applied(work, removals));
        records.push(fence);
    }
    ControllerResult {
        records,
        response: fenced,
    }
}

/// `records`, after applying them to `image` (they were computed from it,
/// so they replay; a failure would only leave `image` behind).
fn applied(image: &mut MetadataImage, records: Vec<MetadataRecord>) -> Vec<MetadataRecord> {
    for r in &records {
        let _ = image.apply(r);
    }
    records
}
