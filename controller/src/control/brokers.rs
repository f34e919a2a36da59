//! Broker registration, heartbeats and fencing (Kafka's
//! `ClusterControlManager` and `BrokerHeartbeatManager`, with the partition
//! changes `ReplicationControlManager` makes when a broker comes or goes).

use super::partition_change::{elect_leaders, isr_removals};
use super::ControllerResult;
use crate::error::ControllerError;
use crate::image::MetadataImage;
use crate::records::{
    BrokerEndpoint, FenceBrokerRecord, MetadataRecord, RegisterBrokerRecord, UnfenceBrokerRecord,
};

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
/// it ([`broker_heartbeat`]); a previous, unfenced incarnation leaves every
/// ISR and loses its leaderships in the same batch (its in-memory state is
/// gone), as [`fence_brokers`] would (Kafka's `handleBrokerShutdown` with
/// ELR off). A single-voter controller registers its own
/// broker unfenced, so a single node starts in one commit.
pub fn register_broker(
    image: &MetadataImage,
    broker_id: i32,
    incarnation_id: uuid::Uuid,
    endpoints: Vec<BrokerEndpoint>,
    rack: Option<String>,
    fenced: bool,
) -> ControllerResult<i64> {
    let broker_epoch = i64::try_from(image.last_applied_offset)
        .unwrap_or(i64::MAX - 1)
        .saturating_add(1);
    let registration = MetadataRecord::RegisterBroker(RegisterBrokerRecord {
        broker_id,
        incarnation_id,
        broker_epoch,
        end_points: endpoints,
        rack,
        fenced,
    });
    let was_live = image.brokers.get(&broker_id).is_some_and(|b| !b.fenced);
    let records = if fenced && was_live {
        let mut after = image.clone();
        let mut records = applied(&mut after, vec![registration]);
        records.extend(isr_removals(&after, broker_id));
        records
    } else {
        vec![registration]
    };
    ControllerResult {
        records,
        response: broker_epoch,
    }
}

/// The active controller's answer to a broker heartbeat (the
/// `is_fenced` and `should_shut_down` fields of Kafka's
/// `BrokerHeartbeatResponse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HeartbeatReply {
    /// The broker is fenced once this reply's records are applied.
    pub is_fenced: bool,
    /// The broker asked to shut down and may now do so: it is fenced and
    /// leads no partition.
    pub should_shut_down: bool,
}

/// Handles one broker heartbeat (Kafka's
/// `ClusterControlManager.processBrokerHeartbeat` and
/// `BrokerHeartbeatManager.calculateNextBrokerState`, KIP-631).
///
/// A heartbeat writes records only when the broker's state changes:
/// - a fenced broker whose applied metadata offset `metadata_offset` has
///   reached its registration (`broker_epoch` is the registration's offset)
///   is unfenced (`UnfenceBrokerRecord`), and every leaderless partition
///   whose ISR it is in elects it (`PartitionChangeRecord`s);
/// - `want_shut_down` (controlled shutdown) fences an unfenced broker
///   (`FenceBrokerRecord`) and moves its leaderships as [`fence_brokers`].
///
/// The session clock itself lives in the active controller's memory, not in
/// the log.
///
/// # Errors
///
/// [`ControllerError::StaleBrokerEpoch`] when `broker_epoch` is not the
/// broker's current registration.
pub fn broker_heartbeat(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: i64,
    metadata_offset: u64,
    want_shut_down: bool,
) -> Result<ControllerResult<HeartbeatReply>, ControllerError> {
    let registration = image
        .brokers
        .get(&broker_id)
        .filter(|b| b.broker_epoch == broker_epoch)
        .ok_or(ControllerError::StaleBrokerEpoch {
            broker_id,
            requested: broker_epoch,
            current: image.brokers.get(&broker_id).map(|b| b.broker_epoch),
        })?;
    if want_shut_down {
        let result = fence_brokers(image, &[broker_id]);
        return Ok(ControllerResult {
            records: result.records,
            response: HeartbeatReply {
                is_fenced: true,
                should_shut_down: true,
            },
        });
    }
    let caught_up = i64::try_from(metadata_offset).unwrap_or(i64::MAX) >= broker_epoch;
    if !registration.fenced || !caught_up {
        return Ok(ControllerResult {
            records: Vec::new(),
            response: HeartbeatReply {
                is_fenced: registration.fenced,
                should_shut_down: false,
            },
        });
    }
    let unfence = MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
        id: broker_id,
        epoch: broker_epoch,
    });
    Ok(ControllerResult {
        records: with_elections(image, vec![unfence]),
        response: HeartbeatReply {
            is_fenced: false,
            should_shut_down: false,
        },
    })
}

/// Fences the given brokers (Kafka's `ReplicationControlManager.handleBrokerFenced`,
/// used when a session expires and on controlled shutdown): per unfenced
/// registered broker among `broker_ids`, in order, one `FenceBrokerRecord`
/// followed by the `PartitionChangeRecord`s that take it out of every ISR
/// and move its leaderships (see [`isr_removals`]). Brokers are handled one
/// after another on the image the earlier ones left, as Kafka fences one
/// broker per event: when two members of an ISR go at once, the one fenced
/// last stays as the ISR's only member. Unknown or already fenced brokers
/// add nothing; the response lists the brokers fenced.
pub fn fence_brokers(image: &MetadataImage, broker_ids: &[i32]) -> ControllerResult<Vec<i32>> {
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
        records.extend(applied(work, vec![fence]));
        let removals = isr_removals(work, id);
        records.extend(applied(work, removals));
    }
    ControllerResult {
        records,
        response: fenced,
    }
}

/// `records`, after applying them to `image` (they were computed from it,
/// so they replay; a failure would only leave `image` behind).
fn applied(
    image: &mut MetadataImage,
    records: Vec<MetadataRecord>,
) -> Vec<MetadataRecord> {
    for r in &records {
        let _ = image.apply(r);
    }
    records
}

/// `records` followed by the `PartitionChangeRecord`s that
/// [`elect_leaders`] computes on `image` with `records` applied.
fn with_elections(
    image: &MetadataImage,
    records: Vec<MetadataRecord>,
) -> Vec<MetadataRecord> {
    let mut after = image.clone();
    let mut records = applied(&mut after, records);
    records.extend(elect_leaders(&after));
    records
}
