//! The storage crate's error type. Every fallible storage operation returns
//! [`StorageError`]; the broker maps each variant to a Kafka error code in
//! `broker/src/error.rs` (this crate never names Kafka error codes).

use std::path::PathBuf;

/// Errors from partition logs, segments, indexes and checkpoint files.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A record batch failed validation: CRC-32C mismatch, magic other than 2,
    /// a batch length that is too small or runs past the buffer. Kafka answers
    /// `CORRUPT_MESSAGE`.
    #[error("corrupt record batch: {reason}")]
    CorruptRecord {
        /// What was wrong, with the offending values.
        reason: String,
    },
    /// A batch is well formed but violates a record-level rule (for example
    /// its record count disagrees with its last offset delta). Kafka answers
    /// `INVALID_RECORD`.
    #[error("invalid record batch: {reason}")]
    InvalidRecord {
        /// What was wrong, with the offending values.
        reason: String,
    },
    /// A batch is larger than `max.message.bytes` (or than `segment.bytes`).
    /// Kafka answers `MESSAGE_TOO_LARGE`.
    #[error("record batch of {size} bytes exceeds the maximum of {max} bytes")]
    RecordBatchTooLarge {
        /// Size of the offending batch in bytes (header included).
        size: usize,
        /// The configured limit in bytes.
        max: usize,
    },
    /// A fetch offset outside `[log_start, log_end]`. Kafka answers
    /// `OFFSET_OUT_OF_RANGE`.
    #[error("offset {requested} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        /// The offset that was asked for.
        requested: i64,
        /// The log start offset at the time of the request.
        log_start: i64,
        /// The log end offset at the time of the request.
        log_end: i64,
    },
    /// DeleteRecords (KIP-107) asked to move the log start offset past the
    /// high watermark. Kafka answers `OFFSET_OUT_OF_RANGE`.
    #[error("cannot move the log start offset to {requested}: it is past the high watermark {high_watermark}")]
    LogStartOffsetBeyondHighWatermark {
        /// The requested log start offset.
        requested: i64,
        /// The high watermark at the time of the request.
        high_watermark: i64,
    },
    /// A file operation failed. Kafka answers `KAFKA_STORAGE_ERROR`.
    #[error("{op} {path}: {source}")]
    Io {
        /// The operation that failed ("open", "pread", "fdatasync", ...).
        op: &'static str,
        /// The file or directory it was applied to.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A checkpoint or metadata file (`leader-epoch-checkpoint`,
    /// `partition.metadata`, `meta.properties`, offset checkpoints) could not
    /// be parsed.
    #[error("malformed {path}: {reason}")]
    MalformedFile {
        /// The file that could not be parsed.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// `weir format` found the log directory already formatted (Kafka's
    /// `kafka-storage format`: "Log directory ... is already formatted").
    #[error("log directory is already formatted: {path} names cluster.id={cluster_id} node.id={node_id}")]
    AlreadyFormatted {
        /// The existing `meta.properties` file.
        path: PathBuf,
        /// Its `cluster.id`.
        cluster_id: String,
        /// Its `node.id`.
        node_id: i32,
    },
    /// `meta.properties` belongs to another broker.
    #[error("log dir {path} belongs to node.id {found}, not {expected}")]
    NodeIdMismatch {
        /// The `meta.properties` file.
        path: PathBuf,
        /// The node id in the file.
        found: i32,
        /// The node id this broker was started with.
        expected: i32,
    },
    /// Another process holds the log directory's `.lock` file.
    #[error("log dir {path} is locked by another process")]
    LogDirLocked {
        /// The log directory.
        path: PathBuf,
    },
    /// The topic id was already set to a different value
    /// (`partition.metadata` is written once per partition).
    #[error("partition {path} already has topic id {existing}, refusing {requested}")]
    InconsistentTopicId {
        /// The partition directory.
        path: PathBuf,
        /// The stored topic id (Kafka's base64 form).
        existing: String,
        /// The rejected topic id (Kafka's base64 form).
        requested: String,
    },
    /// An idempotent producer's batch does not continue its sequence: its
    /// first sequence is not the last stored sequence + 1 (wrapping after
    /// `i32::MAX`), or a new producer epoch does not start at 0 (KIP-98).
    /// Kafka answers `OUT_OF_ORDER_SEQUENCE_NUMBER`.
    #[error("out of order sequence number for producer {producer_id}: expected {expected}, found {found}")]
    OutOfOrderSequence {
        /// The producer id of the batch.
        producer_id: i64,
        /// The sequence the batch should have started with.
        expected: i32,
        /// The batch's first sequence.
        found: i32,
    },
    /// An idempotent producer's batch carries an epoch older than the
    /// partition's current epoch for that producer id (it was fenced).
    /// Kafka answers `INVALID_PRODUCER_EPOCH`.
    #[error("producer {producer_id} epoch {found} is older than the current epoch {current}")]
    InvalidProducerEpoch {
        /// The producer id of the batch.
        producer_id: i64,
        /// The producer epoch the partition knows.
        current: i16,
        /// The batch's producer epoch.
        found: i16,
    },
    /// A record without a key was produced to a topic whose `cleanup.policy`
    /// includes `compact` (Kafka's `LogValidator`,
    /// `validateKey`). Kafka answers `INVALID_RECORD` with the record's index
    /// in `record_errors`.
    #[error(
        "Compacted topic cannot accept message without key in topic partition {topic_partition}."
    )]
    RecordWithoutKey {
        /// The partition, `<topic>-<partition>`.
        topic_partition: String,
        /// Index of the first keyless record in its batch.
        record_index: usize,
    },
    /// A record's timestamp is outside the window the topic allows
    /// (`message.timestamp.before.max.ms` / `message.timestamp.after.max.ms`,
    /// KIP-937), or a producer sent a LogAppendTime batch to a topic that
    /// stamps LogAppendTime itself (Kafka's `LogValidator.validateTimestamp`).
    /// Kafka answers `INVALID_TIMESTAMP` with the record's index in
    /// `record_errors`.
    #[error("One or more records have been rejected due to invalid timestamp: {reason}")]
    InvalidTimestamp {
        /// Index of the first offending record in its batch.
        record_index: usize,
        /// Kafka's per-record message, with the timestamp and the window.
        reason: String,
    },
    /// The log was deleted (its topic was deleted or recreated) while an
    /// append, flush or read was under way. The broker answers
    /// `NOT_LEADER_OR_FOLLOWER`, as Kafka does for an append that finds the
    /// partition's log gone (`Partition.appendRecordsToLeader`).
    #[error("the log of {topic_partition} was deleted")]
    LogDeleted {
        /// The partition, `<topic>-<partition>`.
        topic_partition: String,
    },
    /// A follower append ([`crate::Log::append_as_follower`]) whose first
    /// batch starts below the log end offset (Kafka's
    /// `UnexpectedAppendOffsetException` from `UnifiedLog.append`). The
    /// replica fetcher recovers from it when the log is empty and the batch
    /// straddles the log start offset (`first_offset < log_end_offset <=
    /// last_offset`, a leader log start inside a batch after DeleteRecords):
    /// it calls [`crate::Log::truncate_fully_and_start_at`] with
    /// `first_offset` and appends again (`Partition.appendRecordsToFollowerOrFutureReplica`).
    /// Not an API error: Kafka answers `UNKNOWN_SERVER_ERROR`.
    #[error("unexpected offset in follower append: first offset {first_offset} is less than the log end offset {log_end_offset} (last offset in append {last_offset})")]
    UnexpectedAppendOffset {
        /// Base offset of the first batch.
        first_offset: i64,
        /// Last offset of the last batch.
        last_offset: i64,
        /// The log end offset at the time of the append.
        log_end_offset: i64,
    },
    /// A follower append whose batches' offsets do not increase: a batch
    /// starts at or below the previous batch's last offset (Kafka's
    /// `OffsetsOutOfOrderException`). Not an API error: Kafka answers
    /// `UNKNOWN_SERVER_ERROR`.
    #[error("out of order offsets in follower append: batch at {base_offset} follows last offset {previous_last_offset}")]
    OffsetsOutOfOrder {
        /// Base offset of the offending batch.
        base_offset: i64,
        /// Last offset of the batch before it.
        previous_last_offset: i64,
    },
    /// An append would need a relative offset or file position that does not
    /// fit in 32 bits even in a fresh segment.
    #[error("offset {offset} cannot be appended to a log whose end offset is {log_end}")]
    OffsetOverflow {
        /// The offending offset.
        offset: i64,
        /// The log end offset.
        log_end: i64,
    },
}

impl StorageError {
    /// Wraps an I/O error with the operation and path it came from.
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StorageError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corrupt(reason: impl Into<String>) -> Self {
        StorageError::CorruptRecord {
            reason: reason.into(),
        }
    }
}
