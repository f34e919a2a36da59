//! What the group coordinator persists: group metadata and committed
//! offsets, in the shapes of Kafka's `__consumer_offsets` values
//! (`GroupMetadataValue` v3-4 and `OffsetCommitValue` v1-4 in Kafka's
//! `group-coordinator/src/main/resources/common/message/`).
//!
//! [`GroupStore`] is the seam: the coordinator's state machine calls
//! [`GroupStore::append`] and answers the client only after it resolves;
//! it loads one `__consumer_offsets` partition's groups with
//! [`GroupStore::load_partition`] when this broker becomes that partition's
//! leader (or everything with [`GroupStore::load`] when it serves every
//! group). [`MemoryGroupStore`] keeps everything in memory for the
//! coordinator's unit tests.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Mutex;

use bytes::Bytes;
use weir_storage::TopicPartition;

/// A committed offset: Kafka's `OffsetCommitValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    /// The offset of the next record the group will consume.
    pub committed_offset: i64,
    /// Leader epoch of the last consumed record, -1 when unknown (KIP-320).
    pub committed_leader_epoch: i32,
    /// Client-supplied metadata string (empty when none).
    pub metadata: String,
    /// When the commit was written, ms since the epoch.
    pub commit_timestamp_ms: i64,
    /// Explicit expiry (OffsetCommit v1 only), ms since the epoch; `None` to
    /// expire by `offsets.retention.minutes` (KIP-211).
    pub expire_timestamp_ms: Option<i64>,
}

/// One member as recorded in `GroupMetadataValue.members`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadataRecord {
    /// Broker-assigned member id.
    pub member_id: String,
    /// Static member id (KIP-345), `None` for dynamic members.
    pub group_instance_id: Option<String>,
    /// The client id from the member's JoinGroup request header.
    pub client_id: String,
    /// The member's host as Kafka prints it (`/127.0.0.1`).
    pub client_host: String,
    /// Rebalance timeout, ms.
    pub rebalance_timeout_ms: i32,
    /// Session timeout, ms.
    pub session_timeout_ms: i32,
    /// The member's metadata for the selected protocol (opaque bytes).
    pub subscription: Bytes,
    /// The assignment the leader gave this member (opaque bytes).
    pub assignment: Bytes,
}

/// A group's state as recorded in `GroupMetadataValue` (written when a
/// generation's assignment is stored by SyncGroup, and when the group
/// empties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataRecord {
    /// The protocol type (`consumer`, `connect`, ...); empty for a group that
    /// only commits offsets.
    pub protocol_type: String,
    /// Generation id.
    pub generation: i32,
    /// The selected protocol (assignor name), `None` when the group is empty.
    pub protocol: Option<String>,
    /// The leader's member id, `None` when the group is empty.
    pub leader: Option<String>,
    /// When the group last changed state, ms since the epoch.
    pub current_state_timestamp_ms: i64,
    /// The members of this generation.
    pub members: Vec<MemberMetadataRecord>,
}

/// What one append writes for one group: all records go to the group's
/// `__consumer_offsets` partition in one batch, so they are durable together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupWrite {
    /// `Some(Some(record))` writes the group's metadata, `Some(None)` writes
    /// its tombstone (the group is deleted), `None` leaves it.
    pub metadata: Option<Option<GroupMetadataRecord>>,
    /// Offsets to write; `None` writes the partition's tombstone (expired or
    /// deleted offset).
    pub offsets: Vec<(TopicPartition, Option<OffsetAndMetadata>)>,
}

/// A group as loaded at start: the newest value of each key, tombstones
/// applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedGroup {
    /// The group id.
    pub group_id: String,
    /// The newest metadata record, `None` if none or deleted.
    pub metadata: Option<GroupMetadataRecord>,
    /// Committed offsets by partition.
    pub offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
}

/// Why an append or load failed. The coordinator maps these to the codes
/// Kafka's coordinator answers (see each variant).
#[derive(Debug, thiserror::Error)]
pub enum GroupStoreError {
    /// The offsets topic or the group's partition is not available here
    /// (not created yet, not enough replicas, timed out):
    /// COORDINATOR_NOT_AVAILABLE.
    #[error("the offsets topic partition {partition} is not available: {reason}")]
    NotAvailable {
        /// `__consumer_offsets` partition.
        partition: i32,
        /// Why.
        reason: String,
    },
    /// This broker does not lead the group's partition: NOT_COORDINATOR.
    #[error("this broker does not lead offsets partition {partition}")]
    NotCoordinator {
        /// `__consumer_offsets` partition.
        partition: i32,
    },
    /// The records exceed the offsets topic's `max.message.bytes`:
    /// UNKNOWN_SERVER_ERROR (Kafka 4's coordinator runtime).
    #[error("the group's records are too large: {size} bytes")]
    RecordTooLarge {
        /// Encoded size in bytes.
        size: usize,
    },
    /// The log failed (I/O): NOT_COORDINATOR, so that clients look the
    /// coordinator up again and retry (Kafka 4's coordinator runtime).
    #[error("offsets topic storage failed: {0}")]
    Storage(String),
}

/// Durable storage for group metadata and committed offsets.
pub trait GroupStore: Send + Sync + 'static {
    /// Appends `write` for `group_id` and resolves once it is durable
    /// (acks=all semantics: fsynced under the default durable mode).
    ///
    /// Errors: see [`GroupStoreError`]; on error nothing of `write` may be
    /// applied by the caller.
    fn append(
        &self,
        group_id: &str,
        write: GroupWrite,
    ) -> impl Future<Output = Result<(), GroupStoreError>> + Send;

    /// Every group stored, replayed in log order (newest value per key,
    /// tombstones applied), for a coordinator that serves every group
    /// ([`super::GroupCoordinator::load`]).
    fn load(&self) -> impl Future<Output = Result<Vec<LoadedGroup>, GroupStoreError>> + Send;

    /// The `__consumer_offsets` partition that holds `group_id`
    /// ([`super::offsets_partition_for`] over the store's partition count).
    fn partition_for(&self, group_id: &str) -> i32;

    /// The groups of `__consumer_offsets` partition `partition`, replayed as
    /// [`GroupStore::load`] does; called when this broker became the
    /// partition's leader (Kafka's `scheduleLoadGroupAndOffsets`).
    fn load_partition(
        &self,
        partition: i32,
    ) -> impl Future<Output = Result<Vec<LoadedGroup>, GroupStoreError>> + Send;
}

/// Which `__consumer_offsets` partitions this broker leads, as the
/// coordinator follows them (Kafka's `onElection` / `onResignation`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetsLeadership {
    /// `__consumer_offsets` does not exist yet: the coordinator serves every
    /// group (there is nothing to load) and the first write creates the
    /// topic.
    NoTopic,
    /// The partitions this broker leads, with their leader epochs: a new
    /// epoch of a partition still led here is a resignation followed by an
    /// election (the log may have changed meanwhile).
    Leads(BTreeMap<i32, i32>),
}

/// An in-memory [`GroupStore`] for tests. It can be told to fail appends,
/// or to hold them (as a slow fsync would) until released.
#[derive(Debug)]
pub struct MemoryGroupStore {
    /// Partitions groups are spread over ([`GroupStore::partition_for`]).
    partitions: i32,
    state: Mutex<MemoryState>,
    /// `true` while appends wait.
    held: tokio::sync::watch::Sender<bool>,
}

impl Default for MemoryGroupStore {
    fn default() -> Self {
        MemoryGroupStore {
            partitions: 1,
            state: Mutex::default(),
            held: tokio::sync::watch::Sender::new(false),
        }
    }
}

#[derive(Debug, Default)]
struct MemoryState {
    groups: HashMap<String, LoadedGroup>,
    appends: usize,
    fail_next: Option<fn() -> GroupStoreError>,
}

impl MemoryGroupStore {
    /// An empty store with one partition.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store whose groups map to `partitions` partitions (at least
    /// 1) as in `__consumer_offsets`.
    pub fn with_partitions(partitions: i32) -> Self {
        MemoryGroupStore {
            partitions: partitions.max(1),
            ..Self::default()
        }
    }

    /// Makes the next append fail with `error()`.
    pub fn fail_next_append(&self, error: fn() -> GroupStoreError) {
        self.state.lock().expect("store lock").fail_next = Some(error);
    }

    /// Makes appends wait (in flight) until [`Self::release_appends`].
    pub fn hold_appends(&self) {
        self.held.send_replace(true);
    }

    /// Lets held and later appends complete.
    pub fn release_appends(&self) {
        self.held.send_replace(false);
    }

    /// How many appends succeeded.
    pub fn appends(&self) -> usize {
        self.state.lock().expect("store lock").appends
    }
}

impl GroupStore for MemoryGroupStore {
    async fn append(&self, group_id: &str, write: GroupWrite) -> Result<(), GroupStoreError> {
        let mut held = self.held.subscribe();
        let _ = held.wait_for(|held| !held).await;
        let mut state = self.state.lock().expect("store lock");
        if let Some(error) = state.fail_next.take() {
            return Err(error());
        }
        state.appends += 1;
        let group = state
            .groups
            .entry(group_id.to_string())
            .or_insert_with(|| LoadedGroup {
                group_id: group_id.to_string(),
                ..LoadedGroup::default()
            });
        if let Some(metadata) = write.metadata {
            group.metadata = metadata;
        }
        for (partition, offset) in write.offsets {
            match offset {
                Some(offset) => {
                    group.offsets.insert(partition, offset);
                }
                None => {
                    group.offsets.remove(&partition);
                }
            }
        }
        Ok(())
    }

    async fn load(&self) -> Result<Vec<LoadedGroup>, GroupStoreError> {
        let state = self.state.lock().expect("store lock");
        let mut groups: Vec<LoadedGroup> = state
            .groups
            .values()
            .filter(|g| g.metadata.is_some() || !g.offsets.is_empty())
            .cloned()
            .collect();
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(groups)
    }

    fn partition_for(&self, group_id: &str) -> i32 {
        super::offsets_partition_for(group_id, self.partitions)
    }

    async fn load_partition(&self, partition: i32) -> Result<Vec<LoadedGroup>, GroupStoreError> {
        let mut groups = self.load().await?;
        groups.retain(|g| self.partition_for(&g.group_id) == partition);
        Ok(groups)
    }
}
