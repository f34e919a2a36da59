//! Producer id allocation for InitProducerId (KIP-98): ids come in blocks
//! from the controller (`ProducerIdsRecord`), so a restart never hands out an
//! id twice.

use std::ops::Range;

use tokio::sync::Mutex;
use weir_controller::{ControllerError, MetadataController};

/// Hands out producer ids from the current block, fetching a new block from
/// the controller when it is used up.
pub struct ProducerIdManager {
    broker_id: i32,
    broker_epoch: i64,
    current: Mutex<Range<i64>>,
}

impl ProducerIdManager {
    /// A manager with no block yet; the first call fetches one.
    /// `broker_epoch` is the epoch returned by this broker's registration:
    /// the controller refuses blocks to a stale registration (Kafka's
    /// AllocateProducerIds, KIP-730).
    pub fn new(broker_id: i32, broker_epoch: i64) -> Self {
        ProducerIdManager {
            broker_id,
            broker_epoch,
            current: Mutex::new(0..0),
        }
    }

    /// The next unused producer id.
    ///
    /// # Errors
    /// The controller could not commit a new block.
    pub async fn next_id(&self, controller: &MetadataController) -> Result<i64, ControllerError> {
        let mut block = self.current.lock().await;
        if block.is_empty() {
            *block = controller
                .allocate_producer_ids(self.broker_id, self.broker_epoch)
                .await?;
        }
        let id = block.start;
        block.start += 1;
        Ok(id)
    }
}
