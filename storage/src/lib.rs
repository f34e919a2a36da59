//! `weir-storage`: one partition's log on disk in Kafka's own format, byte
//! for byte, and the log directory that holds them.
//!
//! * [`batch`]: the 61-byte v2 record batch header and produce validation;
//! * [`segment`], [`index`]: `.log`, `.index` and `.timeindex` files;
//! * [`log`]: a partition's [`Log`] (append, read, recovery, flush,
//!   retention, the log start offset and compaction, [`log::cleaner`]);
//! * [`compression`]: the batch codecs (bounded decompression, and
//!   compression for the cleaner);
//! * [`leader_epoch`]: the leader epoch cache and `leader-epoch-checkpoint`;
//! * [`producer_state`]: idempotent producers' epochs and last batches;
//! * [`fs`]: the [`FileSystem`] seam every write goes through, with a
//!   fault-injecting double for tests;
//! * [`file_cache`]: the bounded set of open segment files (a partition
//!   costs no descriptor at rest);
//! * [`file_slice`]: zero-copy [`FileSlice`] regions for `sendfile`;
//! * [`log_manager`]: every log under `log.dirs` plus its checkpoints and
//!   `meta.properties`;
//! * `fuzz` (feature `fuzzing`): the record batch fuzz target and its seeds.
//!
//! This crate never depends on `kafka-protocol`; the broker translates.

pub mod batch;
mod checkpoint;
pub mod compression;
pub mod dump;
pub mod error;
pub mod file_cache;
pub mod file_slice;
pub mod fs;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
pub mod index;
pub mod leader_epoch;
pub mod log;
pub mod log_manager;
pub mod producer_state;
pub mod segment;
#[cfg(test)]
mod testutil;
pub mod write_behind;

pub use batch::RecordBatchHeader;
pub use error::StorageError;
pub use file_slice::FileSlice;
pub use fs::{FileSystem, RealFileSystem};
pub use leader_epoch::LeaderEpochCache;
pub use log::cleaner::{CleanerConfig, CleanerError, CleanerStats};
pub use log::retention::SegmentDeletion;
pub use log::{
    CleanupPolicy, DeferredSnapshotWrite, FetchDataInfo, Log, LogAppendInfo, LogConfig,
    LogOffsetMetadata, PendingFlush, SegmentPosition, TimestampType,
};
pub use log_manager::{
    format_log_dir, is_kafka_uuid, random_kafka_uuid, read_bootstrap, read_meta_properties,
    write_bootstrap, FormatOutcome, LogManager, MetaProperties, BOOTSTRAP_FILE,
};
pub use producer_state::ProducerStateManager;

/// A Kafka topic partition. Its directory under `log.dirs` is
/// `"{topic}-{partition}"`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// Builds a topic partition.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Registers help text for the metrics this crate records (Prometheus
/// `# HELP` lines): `weir_storage_appended_bytes_total`,
/// `weir_storage_appended_records_total`, `weir_storage_flushes_total`,
/// `weir_storage_deleted_segments_total` and the log cleaner's
/// `weir_log_cleaner_*` metrics.
pub fn describe_metrics() {
    metrics::describe_counter!(
        "weir_storage_appended_bytes_total",
        metrics::Unit::Bytes,
        "Record batch bytes appended to partition logs."
    );
    metrics::describe_counter!(
        "weir_storage_appended_records_total",
        "Records appended to partition logs."
    );
    metrics::describe_counter!(
        "weir_storage_flushes_total",
        "fdatasync rounds of partition logs (group commits)."
    );
    metrics::describe_counter!(
        "weir_storage_deleted_segments_total",
        "Log segments deleted by retention or DeleteRecords."
    );
    metrics::describe_counter!(
        "weir_log_cleaner_runs_total",
        "Compactions of a partition log completed by the log cleaner."
    );
    metrics::describe_counter!(
        "weir_log_cleaner_read_bytes_total",
        metrics::Unit::Bytes,
        "Segment bytes read by the log cleaner while rewriting."
    );
    metrics::describe_counter!(
        "weir_log_cleaner_written_bytes_total",
        metrics::Unit::Bytes,
        "Bytes written to cleaned segments by the log cleaner."
    );
    metrics::describe_gauge!(
        "weir_log_cleaner_max_dirty_ratio",
        "Largest dirty ratio among compacted logs at the last cleaner pass (Kafka's max-dirty-percent / 100)."
    );
    metrics::describe_gauge!(
        "weir_log_cleaner_uncleanable_partitions",
        "Compacted logs the cleaner skips after a failed cleaning (Kafka's uncleanable-partitions-count)."
    );
}
