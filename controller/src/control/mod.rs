//! Pure controller logic: `(image, command) -> ControllerResult { records, response }`.
//!
//! The functions here play the parts of Kafka's `ReplicationControlManager`
//! (topics), `ClusterControlManager` (broker registration),
//! `ProducerIdControlManager` and `ConfigurationControlManager`. They read a
//! [`MetadataImage`](crate::MetadataImage) and return the records that would make the change plus
//! the response; they never mutate anything. The quorum commits the records
//! and replay applies them. No I/O, no raft, no Kafka request types.

use crate::records::MetadataRecord;

/// Records to commit and the response to give once they are committed
/// (Kafka's `ControllerResult`). An empty `records` means nothing to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerResult<T> {
    /// Records to append to the metadata log as one atomic batch.
    pub records: Vec<MetadataRecord>,
    /// What the caller gets back after the records are applied.
    pub response: T,
}

impl<T> ControllerResult<T> {
    /// The same records with the response mapped by `f`.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> ControllerResult<U> {
        ControllerResult {
            records: self.records,
            response: f(self.response),
        }
    }
}

mod acls;
mod alter_partition;
mod brokers;
mod elections;
mod partition_change;
mod producer_ids;
mod quotas;
mod scram;
mod topics;

pub use acls::*;
pub use alter_partition::*;
pub use brokers::*;
pub use elections::*;
pub use partition_change::*;
pub use producer_ids::*;
pub use quotas::*;
pub use scram::*;
pub use topics::*;

#[cfg(test)]
mod tests;
