//! The replicated metadata log: openraft wiring kept private to this crate.
//!
//! Owns the openraft type configuration ([`MetadataTypeConfig`]), the entry
//! payload ([`MetadataBatch`]), the on-disk raft log and vote
//! ([`log_store`]), the state machine that replays committed batches into the
//! published `MetadataImage` and builds/installs snapshots
//! ([`state_machine`]), and the network seam ([`network`]) that a
//! multi-voter quorum will fill in. Nothing here is public API: the rest of
//! the crate talks to it through `QuorumController`.

use std::io::Cursor;

use serde::{Deserialize, Serialize};

use crate::records::MetadataRecord;

pub(crate) mod fs;
pub(crate) mod log_store;
pub(crate) mod network;
pub(crate) mod pre_vote;
pub(crate) mod runtime;
pub(crate) mod state_machine;

openraft::declare_raft_types!(
    /// openraft types for the metadata quorum: entries carry a
    /// [`MetadataBatch`], node ids are `node.id` as `u64`, nodes are
    /// `BasicNode` (address filled in once voters talk over a network), and
    /// snapshots are a JSON-serialized `MetadataImage` in memory, and the
    /// runtime is tokio with election timeouts drawn from
    /// `determinism::ThreadRng` ([`runtime::WeirRuntime`]).
    pub(crate) MetadataTypeConfig:
        D = MetadataBatch,
        R = AppliedBatch,
        NodeId = u64,
        Node = openraft::BasicNode,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = runtime::WeirRuntime,
);

/// The payload of one normal raft entry: the records of one controller
/// command, committed and applied atomically (Kafka's atomic record batch),
/// or one part of the controller's own records written in several batches
/// (`quorum::Batching::Split`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MetadataBatch {
    /// Records in replay order.
    pub(crate) records: Vec<MetadataRecord>,
}

/// What applying one entry reports back to the writer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AppliedBatch {
    /// Raft log index the entry was applied at.
    pub(crate) offset: u64,
    /// False when replay rejected the batch (a bug or corrupt log); the image
    /// did not change.
    pub(crate) applied: bool,
}

/// Shorthand for openraft types instantiated with [`MetadataTypeConfig`].
pub(crate) type LogId = openraft::LogId<u64>;
pub(crate) type Vote = openraft::Vote<u64>;
pub(crate) type Entry = openraft::Entry<MetadataTypeConfig>;
pub(crate) type StorageError = openraft::StorageError<u64>;
pub(crate) type StoredMembership = openraft::StoredMembership<u64, openraft::BasicNode>;
pub(crate) type SnapshotMeta = openraft::SnapshotMeta<u64, openraft::BasicNode>;
pub(crate) type Snapshot = openraft::Snapshot<MetadataTypeConfig>;
