//! Producer id blocks (Kafka's `ProducerIdControlManager`, KIP-730).

use std::ops::Range;

use super::ControllerResult;
use crate::error::ControllerError;
use crate::image::MetadataImage;
use crate::records::{MetadataRecord, ProducerIdsRecord};

/// Size of a producer id block handed to a broker (Kafka's
/// `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`, KIP-730).
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// Hands the next block of [`PRODUCER_ID_BLOCK_SIZE`] producer ids to a
/// broker (Kafka's `ProducerIdControlManager.generateNextProducerId`, KIP-730).
///
/// # Errors
///
/// [`ControllerError::StaleBrokerEpoch`] when `broker_epoch` is not the
/// broker's current registration; [`ControllerError::ProducerIdsExhausted`]
/// when the block would pass `i64::MAX`.
pub fn allocate_producer_ids(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: i64,
) -> Result<ControllerResult<Range<i64>>, ControllerError> {
    let current = image.brokers.get(&broker_id).map(|b| b.broker_epoch);
    if current != Some(broker_epoch) {
        return Err(ControllerError::StaleBrokerEpoch {
            broker_id,
            requested: broker_epoch,
            current,
        });
    }
    let first = image.next_producer_id;
    let next =
        first
            .checked_add(PRODUCER_ID_BLOCK_SIZE)
            .ok_or(ControllerError::ProducerIdsExhausted {
                next_producer_id: first,
            })?;
    Ok(ControllerResult {
        records: vec![MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id,
            broker_epoch,
            next_producer_id: next,
        })],
        response: first..next,
    })
}
