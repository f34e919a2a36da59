//! [`Log`]: one partition's log on disk (Kafka's `UnifiedLog`/`LocalLog`
//! without tiered storage): the ordered segments of
//! `<log.dirs>/<topic>-<partition>/`, the log start and log end offsets, the
//! recovery point, the leader epoch cache, the idempotent producers' state
//! (with its `.snapshot` files) and `partition.metadata`. It
//! validates and appends produced batches, serves fetches as file regions,
//! recovers after a crash and flushes with group commit. It must not depend on
//! `kafka-protocol`: batches are handled by their 61-byte header only.
//!
//! I/O failures: every write goes through the log's
//! [`FileSystem`]. A failed or partial append (ENOSPC,
//! EIO) returns [`StorageError::Io`] and leaves the log as it was (log end
//! offset, segment sizes, indexes, producer state, leader epoch cache; torn
//! bytes are cut off when the file system still allows it and are never
//! readable), and reads keep working. On a bare [`FileSystem`] appends
//! succeed again once the fault clears; in a `LogManager` the first failed
//! write or sync takes the directory offline for good and the broker halts
//! ([`crate::fs::log_dir_failure`], as Kafka's `LogDirFailureChannel`): a
//! disk that failed a write is not written again, and after a failed
//! `fdatasync` Linux may drop the dirty pages and report success to the
//! retry. The
//! log itself keeps the recovery point after a failed flush and makes the
//! next flush sync everything above it again, which is what a failure
//! before the sync (writing index entries) needs. A restart after an
//! unclean shutdown writes the bytes above the recovery point again
//! (`LogSegment::recover`), since pages a failed sync dropped stay readable
//! but clean.

use std::collections::BTreeMap;
use std::io::IoSlice;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use bytes::Bytes;

use crate::batch::{self, RecordBatchHeader, RecordRules, ValidatedRecords, RECORD_BATCH_OVERHEAD};
use crate::checkpoint;
use crate::error::StorageError;
use crate::file_slice::FileSlice;
use crate::fs::{FileSystem, RealFileSystem};
use crate::leader_epoch::LeaderEpochCache;
use crate::producer_state::{self, BatchMetadata, ProducerCheck, ProducerStateManager};
use crate::segment::{
    AppendedBatch, FlushFile, LogSegment, DELETED_FILE_SUFFIX, INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
};
use crate::TopicPartition;

/// File name of the topic id file in a partition directory.
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";
/// Suffix Kafka gives a partition directory scheduled for deletion.
pub const DELETE_DIR_SUFFIX: &str = "-delete";
/// Longest file name, in bytes, that common file systems accept (`NAME_MAX`).
const MAX_FILE_NAME_BYTES: usize = 255;
/// Largest `segment.bytes` honoured: positions in `.index` are 32-bit and
/// Kafka caps `segment.bytes` at `Integer.MAX_VALUE`.
const MAX_SEGMENT_BYTES: u64 = i32::MAX as u64;

/// Which timestamp a topic stores (`message.timestamp.type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimestampType {
    /// Keep the producer's timestamps (Kafka's default).
    #[default]
    CreateTime,
    /// Overwrite each batch's max timestamp with the broker's clock on append.
    LogAppendTime,
}

/// `cleanup.policy`: what happens to old segments. Retention deletes them
/// only under `delete`; under `compact` alone only DeleteRecords (the log
/// start offset) removes segments (Kafka's `UnifiedLog.deleteOldSegments`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// `delete` is listed: `retention.ms` and `retention.bytes` apply.
    pub delete: bool,
    /// `compact` is listed: the [`LogCleaner`](cleaner) compacts the log and
    /// produced records must have keys.
    pub compact: bool,
}

impl Default for CleanupPolicy {
    /// Kafka's default, `delete`.
    fn default() -> Self {
        CleanupPolicy {
            delete: true,
            compact: false,
        }
    }
}

/// Per-partition log settings, named after Kafka's topic configs.
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: a segment rolls before an append would take it past
    /// this size, in bytes. Default: 1073741824 (1 GiB); capped at 2^31-1.
    pub segment_bytes: u64,
    /// `segment.index.bytes`: maximum size in bytes of each index file; a
    /// segment rolls when its index is full. Default: 10485760 (10 MiB).
    pub segment_index_bytes: u64,
    /// `index.interval.bytes`: bytes appended between two offset index
    /// entries. Default: 4096.
    pub index_interval_bytes: u64,
    /// `max.message.bytes`: largest batch accepted, in bytes (header
    /// included). Default: 1048588.
    pub max_message_bytes: usize,
    /// `message.timestamp.type`. Default: CreateTime.
    pub message_timestamp_type: TimestampType,
    /// `retention.ms`: a segment is deleted once its largest timestamp is
    /// more than this many ms in the past (the active segment is rolled
    /// first); negative means forever. Default: 604800000 (7 days).
    pub retention_ms: i64,
    /// `retention.bytes`: the oldest segments are deleted while the log is
    /// larger than this many bytes by at least a whole segment; negative
    /// means unlimited. Default: -1.
    pub retention_bytes: i64,
    /// `segment.ms`: the active segment rolls at the next append once it has
    /// been open this many ms, measured from the first batch's timestamp to
    /// the appended batches' (Kafka's `LogSegment.shouldRoll`). Default:
    /// 604800000 (7 days).
    pub segment_ms: i64,
    /// `cleanup.policy`. Default: delete.
    pub cleanup_policy: CleanupPolicy,
    /// `flush.messages`: once this many messages (offsets) are appended past
    /// the recovery point the log is fsynced before the append is answered
    /// (Kafka's `UnifiedLog.append` flush check). Default: `i64::MAX`
    /// (never; acks=all durability does not depend on it).
    pub flush_messages: i64,
    /// `flush.ms`: the background flusher fsyncs a log whose last flush is
    /// at least this many ms old (Kafka's `LogManager.flushDirtyLogs`).
    /// Default: `i64::MAX` (never).
    pub flush_ms: i64,
    /// `min.cleanable.dirty.ratio`: the log is compacted once its dirty
    /// bytes are more than this fraction of its cleanable bytes (Kafka's
    /// `LogCleanerManager`). Default: 0.5.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: a segment whose largest timestamp is less
    /// than this many ms old is not compacted. Default: 0.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a log with a dirty segment whose largest
    /// timestamp is more than this many ms old is compacted whatever its
    /// dirty ratio. Default: `i64::MAX` (never).
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long a tombstone stays after the cleaner
    /// first sees it as the newest value of its key (KIP-534 delete
    /// horizon), ms. Default: 86400000 (1 day).
    pub delete_retention_ms: i64,
    /// `message.timestamp.before.max.ms` (KIP-937): a CreateTime record may
    /// be at most this many ms older than the broker's clock. Default:
    /// `i64::MAX` (Kafka's).
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms` (KIP-937): a CreateTime record may
    /// be at most this many ms ahead of the broker's clock. Default here:
    /// `i64::MAX` (no bound, for storage's own callers); the broker applies
    /// Kafka 4's default of 3600000 (KIP-1030).
    pub message_timestamp_after_max_ms: i64,
}

impl LogConfig {
    /// The per-record rules of Kafka's `LogValidator` for this topic's
    /// partition `tp` at broker time `now_ms` (ms since the epoch): the
    /// timestamp type and KIP-937 window, and keys required under
    /// `cleanup.policy=compact`.
    pub fn record_rules<'a>(&self, tp: &'a crate::TopicPartition, now_ms: i64) -> RecordRules<'a> {
        RecordRules {
            timestamp_type: self.message_timestamp_type,
            now_ms,
            timestamp_before_max_ms: self.message_timestamp_before_max_ms,
            timestamp_after_max_ms: self.message_timestamp_after_max_ms,
            require_keys: self.cleanup_policy.compact.then_some(tp),
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1024 * 1024 * 1024,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            max_message_bytes: 1024 * 1024 + 12,
            message_timestamp_type: TimestampType::CreateTime,
            retention_ms: 7 * 24 * 3_600_000,
            retention_bytes: -1,
            segment_ms: 7 * 24 * 3_600_000,
            cleanup_policy: CleanupPolicy::default(),
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 86_400_000,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: i64::MAX,
        }
    }
}

/// The outcome of an append (Kafka's `LogAppendInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogAppendInfo {
    /// Offset assigned to the first record.
    pub first_offset: i64,
    /// Offset assigned to the last record.
    pub last_offset: i64,
    /// Largest batch max timestamp appended (ms), -1 if none had one.
    pub max_timestamp: i64,
    /// Last offset of the first batch carrying `max_timestamp`, -1 if none.
    pub offset_of_max_timestamp: i64,
    /// The broker time stamped on the batches (ms) under LogAppendTime, -1
    /// under CreateTime.
    pub log_append_time: i64,
    /// Bytes appended.
    pub valid_bytes: usize,
    /// Batches appended.
    pub batch_count: usize,
    /// Records appended (sum of the batches' record counts).
    pub record_count: usize,
    /// The batch was a retry of an idempotent producer's batch already in
    /// the log (KIP-98): nothing was appended, `first_offset`,
    /// `last_offset` and `max_timestamp` are the stored batch's, and
    /// `log_append_time` is its stored timestamp under LogAppendTime.
    pub duplicate: bool,
}

/// The result of a read (Kafka's `FetchDataInfo`).
#[derive(Clone, Debug)]
pub struct FetchDataInfo {
    /// The offset asked for.
    pub fetch_offset: i64,
    /// Where `fetch_offset` lies (Kafka's `fetchOffsetMetadata`): the first
    /// batch returned, the log end when the read is there, otherwise what
    /// [`Log::cached_offset_metadata`] knows (offset only when the read
    /// stopped at `max_offset` on an offset it does not know).
    pub fetch_offset_metadata: LogOffsetMetadata,
    /// Whole batches starting with the one holding `fetch_offset`; `None`
    /// when there is nothing to return.
    pub records: Option<FileSlice>,
}

/// Files to fdatasync for one flush, taken under the log's lock and synced
/// outside it (group commit: appends can continue during the sync). See
/// [`Log::prepare_flush`].
#[derive(Debug)]
pub struct PendingFlush {
    fs: Arc<dyn FileSystem>,
    files: Vec<FlushFile>,
    /// `partition.metadata.tmp` and `partition.metadata`: renamed once its
    /// sync (among `files`) succeeded, before the directories are synced.
    publish: Option<(PathBuf, PathBuf)>,
    /// Directories to fsync after the files, in order: the partition
    /// directory when segment files were created, then the log directory
    /// when the partition directory itself is new.
    dirs: Vec<PathBuf>,
    /// What of a new log's creation this flush syncs (see
    /// `Log::unsynced_creation`).
    creation: UnsyncedCreation,
    /// The producer snapshot a roll deferred, written (synced and renamed
    /// into place) after `files` and before the directories are synced.
    snapshot: Option<DeferredSnapshot>,
    /// The active segment's `.log` when it is among `files` (its index
    /// there) and its written end (see [`LogSegment::written_end`]), read
    /// just before that file's fdatasync.
    active: Option<(usize, Arc<AtomicI64>)>,
    /// The log end offset when the flush was prepared; raised to the active
    /// segment's written end read before its sync.
    recovery_point: AtomicI64,
    /// Shared with the log: set when this flush fails, or is dropped without
    /// a successful [`PendingFlush::sync`], so that the log syncs everything
    /// past its recovery point again (see [`Log::prepare_flush`]).
    failed: Arc<AtomicBool>,
    /// [`PendingFlush::sync`] succeeded.
    synced: AtomicBool,
}

impl Drop for PendingFlush {
    fn drop(&mut self) {
        if !self.synced.load(Ordering::Acquire) {
            self.failed.store(true, Ordering::Release);
        }
    }
}

impl PendingFlush {
    /// The recovery point this flush makes durable: the log end offset when it
    /// was prepared, or after a successful [`PendingFlush::sync`] the end of
    /// the batches written to the active segment before its fdatasync began
    /// if that is more (appends that landed while the sync was on its way).
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point.load(Ordering::Acquire)
    }

    /// fdatasyncs every file (and fsyncs the partition directory if segments
    /// were created). Blocking; call it from a blocking context.
    ///
    /// # Errors
    /// [`StorageError::Io`] naming the file whose sync failed. The log then
    /// keeps its recovery point: do not call [`Log::complete_flush`]; the
    /// next [`Log::prepare_flush`] collects every file past the recovery
    /// point again, so the next flush retries the sync.
    pub fn sync(&self) -> Result<(), StorageError> {
        let result = self.sync_all_files();
        match result {
            Ok(()) => self.synced.store(true, Ordering::Release),
            Err(_) => self.failed.store(true, Ordering::Release),
        }
        result
    }

    fn sync_all_files(&self) -> Result<(), StorageError> {
        for (i, file) in self.files.iter().enumerate() {
            if let Some((_, written_end)) = self.active.as_ref().filter(|(at, _)| *at == i) {
                // Everything written before this load is in the page cache
                // before the fdatasync below starts, so the sync covers it.
                self.recovery_point
                    .fetch_max(written_end.load(Ordering::Acquire), Ordering::AcqRel);
            }
            file.sync(&*self.fs)?;
        }
        if let Some((tmp, path)) = &self.publish {
            checkpoint::publish_tmp(&*self.fs, tmp, path)?;
        }
        if let Some(snapshot) = &self.snapshot {
            snapshot.write()?;
        }
        for dir in &self.dirs {
            checkpoint::sync_dir(&*self.fs, dir)?;
        }
        Ok(())
    }
}

/// A producer snapshot a segment roll took and did not write (see
/// [`Log::deferred_snapshot`]): cloned out of the log's lock and written
/// on a blocking thread.
#[derive(Clone, Debug)]
pub struct DeferredSnapshotWrite(DeferredSnapshot);

impl DeferredSnapshotWrite {
    /// The log end offset the snapshot describes (its file name).
    pub fn offset(&self) -> i64 {
        self.0.offset()
    }

    /// Writes `<offset>.snapshot` durably: a temporary file, fdatasynced,
    /// renamed into place, then the partition directory fsynced. Blocking;
    /// call it without the log's lock. Writes nothing when a truncation
    /// invalidated the snapshot meanwhile.
    ///
    /// # Errors
    /// [`StorageError::Io`] naming the file or directory that failed.
    pub fn write(&self) -> Result<(), StorageError> {
        if self.0.write()? {
            checkpoint::sync_dir(&*self.0.fs(), self.0.dir())?;
        }
        Ok(())
    }
}

/// What creating a log left unsynced; see `Log::unsynced_creation`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct UnsyncedCreation {
    /// [`Log::open`] created the partition directory: its entry in the log
    /// directory is not durable yet.
    log_dir_entry: bool,
    /// `partition.metadata` was written and not synced since.
    partition_metadata: bool,
}

/// One partition's log. See the module docs.
#[derive(Debug)]
pub struct Log {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    topic_partition: TopicPartition,
    config: LogConfig,
    /// Segments by base offset; never empty until the log is deleted.
    segments: BTreeMap<i64, LogSegment>,
    log_start_offset: i64,
    log_end_offset: i64,
    recovery_point: i64,
    leader_epoch_cache: LeaderEpochCache,
    producer_state: ProducerStateManager,
    topic_id: Option<[u8; 16]>,
    /// A segment file was created since the last flush.
    dir_dirty: bool,
    /// What creating this log left unsynced, owed to its first successful
    /// flush: the partition directory's entry in the log directory (when
    /// [`Log::open`] created the directory) and `partition.metadata` (whose
    /// temporary file [`Log::set_topic_id`] wrote without a sync; the flush
    /// syncs it and renames it into place). Creating a partition thus
    /// costs no sync (Kafka likewise flushes `partition.metadata` later,
    /// `UnifiedLog.maybeFlushMetadataFile`); the first flush, which comes
    /// before anything in the partition is acknowledged as durable, pays.
    unsynced_creation: UnsyncedCreation,
    /// Wall-clock time (ms) of the last completed flush, or of opening the
    /// log (Kafka's `LocalLog.lastFlushTime`).
    last_flush_ms: i64,
    /// A flush failed (a sync, or writing index entries): the next
    /// [`Log::prepare_flush`] collects every file past the recovery point.
    flush_failed: Arc<AtomicBool>,
    /// Bytes appended since the log was opened (see [`Log::appended_bytes`]).
    appended_bytes: u64,
    deleted: bool,
    /// How many segments [`Log::open`] re-validated (recovery or a rebuilt
    /// index).
    recovered_segments: usize,
    /// The producer snapshot the last roll took, not yet durable (see
    /// [`deferred_snapshot`]).
    deferred_snapshot: Option<DeferredSnapshot>,
    /// Truncation generation: a truncation bumps it, invalidating
    /// deferred snapshots a flush under way still holds.
    snapshot_generation: Arc<Mutex<u64>>,
}

/// The directory name of a partition: `<topic>-<partition>`.
pub fn partition_dir_name(tp: &TopicPartition) -> String {
    format!("{}-{}", tp.topic, tp.partition)
}

/// The name a partition directory is renamed to before it is removed
/// (DeleteTopics): `<topic>-<partition>.<unique>-delete`, where `<unique>` is
/// the 32 hex digits of a random UUID. The topic is cut (never the suffix) so
/// the whole name is at most 255 bytes, the file name limit of common file
/// systems: a legal topic name has up to 249 characters and the suffix adds
/// up to 51 more. Only the `-delete` suffix identifies the directory later
/// ([`LogManager::open`](crate::LogManager::open) removes such leftovers).
///
/// Source: Kafka's `LocalLog.logDeleteDirName` (KAFKA-6795).
pub fn log_delete_dir_name(tp: &TopicPartition) -> String {
    capped_delete_dir_name(tp, &uuid::Uuid::new_v4().simple().to_string())
}

/// [`log_delete_dir_name`] with the unique part given.
pub(crate) fn capped_delete_dir_name(tp: &TopicPartition, unique: &str) -> String {
    let suffix = format!("-{}.{unique}{DELETE_DIR_SUFFIX}", tp.partition);
    let mut keep = tp
        .topic
        .len()
        .min(MAX_FILE_NAME_BYTES.saturating_sub(suffix.len()));
    while !tp.topic.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}{suffix}", &tp.topic[..keep])
}

/// The answer to a retried idempotent batch: the stored batch's offsets.
fn duplicate_info(original: BatchMetadata, log_append_time: bool) -> LogAppendInfo {
    LogAppendInfo {
        first_offset: original.first_offset,
        last_offset: original.last_offset,
        max_timestamp: original.timestamp,
        offset_of_max_timestamp: original.last_offset,
        log_append_time: if log_append_time {
            original.timestamp
        } else {
            -1
        },
        valid_bytes: 0,
        batch_count: 0,
        record_count: 0,
        duplicate: true,
    }
}

/// Which records sections a leader append validates.
enum RecordsCheck<'a> {
    /// Scan uncompressed sections; compressed batches take their outcomes
    /// from the slice in order when one is given, else keep their header's
    /// max timestamp (broker-internal writers).
    Scan(Option<&'a [ValidatedRecords]>),
    /// The caller validated every section.
    Prevalidated,
}

fn deleted_error(topic_partition: &TopicPartition) -> StorageError {
    StorageError::LogDeleted {
        topic_partition: topic_partition.to_string(),
    }
}

fn base64_uuid(id: &[u8; 16]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id)
}

pub(crate) fn parse_base64_uuid(s: &str) -> Option<[u8; 16]> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s.trim())
        .ok()?;
    bytes.try_into().ok()
}

impl Log {
    /// Opens (creating if missing) the partition directory
    /// `<log_dir>/<topic>-<partition>` and recovers it (Kafka's `LogLoader`):
    /// loads every segment; every segment from the one holding
    /// `recovery_point` onwards is re-validated batch by batch, its indexes
    /// rebuilt, and the first segment with an invalid batch (short read, bad
    /// length, CRC mismatch) is truncated there with every later segment
    /// deleted; a segment with a missing or corrupt index is rebuilt too.
    /// Then the leader epoch cache is loaded and entries past the log end
    /// removed, and `partition.metadata` is read.
    ///
    /// `log_start_offset` is the checkpointed log start offset
    /// (`log-start-offset-checkpoint`, 0 when absent); the log starts at the
    /// largest of it, the first segment's base offset and the start of the
    /// leader epoch cache's first epoch (the cache is written when the log
    /// start moves, the checkpoint later: a crash in between must not bring
    /// back records whose epochs the cache forgot). When the recovered
    /// log ends below it every segment is deleted and the log restarts empty
    /// at `log_start_offset` (Kafka's `LogLoader`). Files ending in
    /// `.deleted` (segments whose deletion a crash interrupted) are removed,
    /// and a compaction swap a crash interrupted is finished or discarded
    /// first (see [`cleaner`]).
    ///
    /// # Errors
    /// [`StorageError::Io`] on file errors; [`StorageError::MalformedFile`]
    /// if `leader-epoch-checkpoint` or `partition.metadata` is unreadable.
    pub fn open(
        log_dir: PathBuf,
        tp: TopicPartition,
        config: LogConfig,
        recovery_point: i64,
        log_start_offset: i64,
    ) -> Result<Log, StorageError> {
        Self::open_with_file_system(
            RealFileSystem::shared(),
            log_dir,
            tp,
            config,
            recovery_point,
            log_start_offset,
            false,
        )
    }

    /// [`Log::open`] with every write, truncation, sync, rename and removal
    /// going through `fs` (see [`crate::fs`]; tests inject faults there).
    ///
    /// `had_clean_shutdown` (the log dir held the clean-shutdown marker, see
    /// [`crate::LogManager`]) skips recovery: segments are trusted as the
    /// shutdown flushed them and the log end offset is read from the active
    /// segment's last index entry on. A segment with a missing or corrupt
    /// index, or an active segment that does not end on a batch boundary, is
    /// still recovered. `Log::open` passes `false`.
    ///
    /// # Errors
    /// As [`Log::open`].
    pub fn open_with_file_system(
        fs: Arc<dyn FileSystem>,
        log_dir: PathBuf,
        tp: TopicPartition,
        config: LogConfig,
        recovery_point: i64,
        log_start_offset: i64,
        had_clean_shutdown: bool,
    ) -> Result<Log, StorageError> {
        let dir = log_dir.join(partition_dir_name(&tp));
        let created = !dir.is_dir();
        fs.create_dir_all(&dir)
            .map_err(|e| StorageError::io("create_dir", &dir, e))?;
        if created {
            return Self::new_in_created_dir(fs, dir, tp, config, log_start_offset.max(0));
        }
        cleaner::finish_interrupted_swaps(&fs, &dir, &config)?;
        let mut bases = Vec::new();
        let entries = std::fs::read_dir(&dir).map_err(|e| StorageError::io("read_dir", &dir, e))?;
        let mut index_files = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| StorageError::io("read_dir", &dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(stem) = name.strip_suffix(LOG_FILE_SUFFIX) {
                if let Ok(base) = stem.parse::<i64>() {
                    bases.push(base);
                }
            } else if name.ends_with(INDEX_FILE_SUFFIX) || name.ends_with(TIME_INDEX_FILE_SUFFIX) {
                index_files.push(name.to_string());
            } else if name.ends_with(".tmp") || name.ends_with(DELETED_FILE_SUFFIX) {
                let _ = fs.remove_file(&entry.path());
            }
        }
        bases.sort_unstable();
        // Index files without a segment are leftovers of a crash: delete them.
        for name in index_files {
            let stem = name.split('.').next().unwrap_or("");
            if !stem
                .parse::<i64>()
                .is_ok_and(|b| bases.binary_search(&b).is_ok())
            {
                let p = dir.join(&name);
                fs.remove_file(&p)
                    .map_err(|e| StorageError::io("remove", &p, e))?;
            }
        }
        let mut leader_epoch_cache = LeaderEpochCache::load_with_file_system(fs.clone(), &dir)?;
        let mut segments = BTreeMap::new();
        if bases.is_empty() {
            let (segment, _) = LogSegment::open(
                fs.clone(),
                &dir,
                0,
                config.index_interval_bytes,
                config.segment_index_bytes,
                true,
            )?;
            segments.insert(0, segment);
        }
        // Recovery starts at the segment holding the recovery point.
        let recover_from = bases
            .iter()
            .rev()
            .find(|&&b| b <= recovery_point)
            .or(bases.first())
            .copied()
            .unwrap_or(0);
        let mut next_offset = bases.first().copied().unwrap_or(0);
        let last_base = bases.last().copied();
        let mut recovered_segments = 0;
        let mut remaining = bases.iter().copied();
        for base in remaining.by_ref() {
            let (mut segment, indexes_ok) = LogSegment::open(
                fs.clone(),
                &dir,
                base,
                config.index_interval_bytes,
                config.segment_index_bytes,
                false,
            )?;
            let mut recovering = !had_clean_shutdown && base >= recover_from;
            if had_clean_shutdown && indexes_ok && Some(base) == last_base {
                // The active segment as a clean shutdown left it: its end
                // is read from the last index entry on (Kafka skips
                // recovery after a clean shutdown too).
                match segment.read_next_offset()? {
                    Some(next) => next_offset = next_offset.max(next),
                    None => {
                        tracing::warn!(segment = %segment.log_path().display(),
                            "the active segment does not end as a clean shutdown left it; recovering it");
                        recovering = true;
                    }
                }
            }
            let mut truncated = 0;
            if recovering || !indexes_ok {
                // After an unclean shutdown what lies above the recovery
                // point may be in the page cache only, marked clean by a
                // failed fdatasync: written again, the next flush syncs it.
                let rewrite_from = (!had_clean_shutdown).then_some(recovery_point);
                let (cut, next) = segment.recover(&mut leader_epoch_cache, rewrite_from)?;
                recovered_segments += 1;
                truncated = cut;
                next_offset = next.unwrap_or(base).max(next_offset);
            } else {
                next_offset = next_offset.max(base);
            }
            segments.insert(base, segment);
            if recovering && truncated > 0 {
                break;
            }
        }
        for base in remaining {
            tracing::warn!(base_offset = base, dir = %dir.display(), "deleting segment after a truncated one");
            let (segment, _) = LogSegment::open(fs.clone(), &dir, base, 1, 1, false)?;
            segment.delete_files()?;
        }
        let first_base = segments.keys().next().copied().unwrap_or(0);
        let mut log_end_offset = next_offset.max(first_base);
        if log_end_offset < log_start_offset {
            tracing::warn!(dir = %dir.display(), log_end_offset, log_start_offset,
                "log ends below its checkpointed start offset; deleting every segment");
            for segment in std::mem::take(&mut segments).into_values() {
                segment.delete_files()?;
            }
            let (segment, _) = LogSegment::open(
                fs.clone(),
                &dir,
                log_start_offset,
                config.index_interval_bytes,
                config.segment_index_bytes,
                true,
            )?;
            segments.insert(log_start_offset, segment);
            leader_epoch_cache.truncate_from_end(0)?;
            log_end_offset = log_start_offset;
        }
        leader_epoch_cache.truncate_from_end(log_end_offset)?;
        // The cache is truncated from the start (and written) as soon as
        // the log start offset moves, the log start offset only at the
        // next checkpoint: a cache whose first epoch begins above the
        // checkpointed start says the start had moved there before a
        // crash. Take that start again; below it the cache no longer knows
        // the epochs, and OffsetForLeaderEpoch answers would miss a
        // follower's divergence there.
        let cache_start = leader_epoch_cache
            .entries()
            .first()
            .map_or(i64::MIN, |e| e.start_offset);
        let log_start_offset = log_start_offset.max(first_base).max(cache_start);
        leader_epoch_cache.truncate_from_start(log_start_offset)?;
        let mut log = Log {
            fs,
            dir,
            topic_partition: tp,
            config,
            segments,
            log_start_offset,
            log_end_offset,
            recovery_point: recovery_point.clamp(log_start_offset, log_end_offset),
            leader_epoch_cache,
            producer_state: ProducerStateManager::new(),
            topic_id: None,
            dir_dirty: true,
            unsynced_creation: UnsyncedCreation {
                log_dir_entry: created,
                partition_metadata: false,
            },
            last_flush_ms: crate::segment::wall_clock_ms(),
            flush_failed: Arc::new(AtomicBool::new(false)),
            appended_bytes: 0,
            deleted: false,
            recovered_segments,
            deferred_snapshot: None,
            snapshot_generation: Arc::new(Mutex::new(0)),
        };
        log.rebuild_producer_state()?;
        log.topic_id = log.read_partition_metadata()?;
        Ok(log)
    }

    /// The empty log of a partition directory [`Log::open_with_file_system`]
    /// has just created: one segment at `base_offset` and nothing to read
    /// back, so no directory listing, checkpoint read or recovery (a
    /// CreateTopics of 1,000 partitions creates 1,000 of these, issue 18).
    /// The directory entry and the files are synced by the first flush (see
    /// `UnsyncedCreation`).
    ///
    /// # Errors
    /// [`StorageError::Io`] if the segment's files cannot be created.
    fn new_in_created_dir(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        tp: TopicPartition,
        config: LogConfig,
        base_offset: i64,
    ) -> Result<Log, StorageError> {
        let (segment, _) = LogSegment::open(
            fs.clone(),
            &dir,
            base_offset,
            config.index_interval_bytes,
            config.segment_index_bytes,
            true,
        )?;
        Ok(Log {
            leader_epoch_cache: LeaderEpochCache::empty(fs.clone(), &dir),
            fs,
            dir,
            topic_partition: tp,
            config,
            segments: BTreeMap::from([(base_offset, segment)]),
            log_start_offset: base_offset,
            log_end_offset: base_offset,
            recovery_point: base_offset,
            producer_state: ProducerStateManager::new(),
            topic_id: None,
            dir_dirty: true,
            unsynced_creation: UnsyncedCreation {
                log_dir_entry: true,
                partition_metadata: false,
            },
            last_flush_ms: crate::segment::wall_clock_ms(),
            flush_failed: Arc::new(AtomicBool::new(false)),
            appended_bytes: 0,
            deleted: false,
            recovered_segments: 0,
            deferred_snapshot: None,
            snapshot_generation: Arc::new(Mutex::new(0)),
        })
    }

    /// Rebuilds the producer state after recovery (Kafka's
    /// `UnifiedLog.rebuildProducerState`): snapshots past the log end offset
    /// (a truncated tail) or below the first segment are deleted; the newest
    /// remaining snapshot that parses is loaded (unreadable ones are deleted
    /// with a warning); then the headers of every batch from the snapshot's
    /// offset (or the log start) to the log end offset are replayed. So
    /// batches cut from a torn tail leave no state.
    fn rebuild_producer_state(&mut self) -> Result<(), StorageError> {
        self.producer_state.clear();
        let first_base = self.segments.keys().next().copied().unwrap_or(0);
        let mut replay_from = self.log_start_offset;
        let mut snapshots = producer_state::list_snapshots(&self.dir)?;
        while let Some((offset, path)) = snapshots.pop() {
            if offset > self.log_end_offset || offset < first_base {
                producer_state::delete_snapshot(&*self.fs, &path)?;
                continue;
            }
            match ProducerStateManager::read_snapshot(&path) {
                Ok(state) => {
                    self.producer_state = state;
                    replay_from = offset;
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "deleting an unreadable producer snapshot");
                    producer_state::delete_snapshot(&*self.fs, &path)?;
                }
            }
        }
        let floor = self
            .segments
            .range(..=replay_from)
            .next_back()
            .map_or(first_base, |(b, _)| *b);
        let log_start_offset = self.log_start_offset;
        let state = &mut self.producer_state;
        for segment in self.segments.range(floor..).map(|(_, s)| s) {
            segment.for_each_batch_header(|header| {
                if header.base_offset >= replay_from && header.last_offset() >= log_start_offset {
                    state.load_batch(header);
                }
            })?;
        }
        Ok(())
    }

    /// Writes the producer state as `<log end offset>.snapshot` (Kafka's
    /// `ProducerStateManager.takeSnapshot`; done at clean shutdown, while a
    /// segment roll only takes it and leaves the write to the next flush,
    /// see [`Log::deferred_snapshot`]), forgets a deferred snapshot it
    /// supersedes, and deletes snapshots below the first segment's base
    /// offset, whose batches are gone. As Kafka ("if not a new offset, then
    /// it is not worth taking another snapshot"), nothing is written when
    /// the log end offset is not past the newest snapshot (0 when there is
    /// none): a clean shutdown of an unchanged or empty log writes no file.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the file cannot be written or an old one
    /// removed.
    pub fn write_producer_snapshot(&mut self) -> Result<(), StorageError> {
        if self.deleted {
            return Err(deleted_error(&self.topic_partition));
        }
        let snapshots = producer_state::list_snapshots(&self.dir)?;
        let newest = snapshots.iter().map(|(offset, _)| *offset).max();
        if self.log_end_offset > newest.unwrap_or(0) {
            self.producer_state
                .write_snapshot(&*self.fs, &self.dir, self.log_end_offset)?;
        }
        // A snapshot at the log end offset supersedes a deferred one (at
        // or below it).
        self.deferred_snapshot = None;
        self.delete_snapshots_below_first_segment(snapshots)
    }

    fn delete_snapshots_below_first_segment(
        &self,
        snapshots: Vec<(i64, PathBuf)>,
    ) -> Result<(), StorageError> {
        let first_base = self.segments.keys().next().copied().unwrap_or(0);
        for (offset, path) in snapshots {
            if offset < first_base {
                producer_state::delete_snapshot(&*self.fs, &path)?;
            }
        }
        Ok(())
    }

    /// Takes the producer snapshot of a roll without writing it (Kafka's
    /// `takeSnapshot(sync = false)`): encoded now, written by the next
    /// flush or before retention deletes a segment (see
    /// [`deferred_snapshot`]). As [`Log::write_producer_snapshot`], nothing
    /// is taken unless the log end offset is past the newest snapshot.
    fn defer_producer_snapshot(&mut self) -> Result<(), StorageError> {
        let snapshots = producer_state::list_snapshots(&self.dir)?;
        let newest = snapshots
            .iter()
            .map(|(offset, _)| *offset)
            .chain(
                self.deferred_snapshot
                    .as_ref()
                    .map(DeferredSnapshot::offset),
            )
            .max();
        if self.log_end_offset > newest.unwrap_or(0) {
            self.deferred_snapshot = Some(DeferredSnapshot::new(
                self.fs.clone(),
                &self.dir,
                self.log_end_offset,
                self.producer_state.encode_snapshot(),
                self.snapshot_generation.clone(),
            ));
        }
        self.delete_snapshots_below_first_segment(snapshots)
    }

    /// The producer snapshot a roll took that is not durable yet, for a
    /// caller that writes it off the log's lock
    /// ([`DeferredSnapshotWrite::write`]) and then reports it with
    /// [`Log::deferred_snapshot_written`].
    pub fn deferred_snapshot(&self) -> Option<DeferredSnapshotWrite> {
        self.deferred_snapshot.clone().map(DeferredSnapshotWrite)
    }

    /// Forgets the deferred producer snapshot once `written` (the same
    /// snapshot) is durable.
    pub fn deferred_snapshot_written(&mut self, written: &DeferredSnapshotWrite) {
        if self
            .deferred_snapshot
            .as_ref()
            .is_some_and(|d| d.same_as(&written.0))
        {
            self.deferred_snapshot = None;
        }
    }

    /// Writes the deferred producer snapshot now, under the lock (the
    /// safety net of retention, which must not delete the segments a
    /// snapshot that is not durable yet replaces).
    pub(crate) fn write_deferred_snapshot(&mut self) -> Result<(), StorageError> {
        let Some(snapshot) = self.deferred_snapshot.clone() else {
            return Ok(());
        };
        snapshot.write()?;
        checkpoint::sync_dir(&*self.fs, &self.dir)?;
        self.deferred_snapshot = None;
        Ok(())
    }

    /// Drops the deferred producer snapshot and invalidates any copy a
    /// flush under way holds: a truncation changes the batches it
    /// describes.
    pub(crate) fn invalidate_deferred_snapshot(&mut self) {
        self.deferred_snapshot = None;
        DeferredSnapshot::invalidate_all(&self.snapshot_generation);
    }

    /// The idempotent producers' state (KIP-98).
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producer_state
    }

    /// Forgets producers idle for `expiration_ms` or more at `now_ms`
    /// (`producer.id.expiration.ms`; see
    /// [`ProducerStateManager::remove_expired`]). Returns how many.
    pub fn remove_expired_producers(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        self.producer_state.remove_expired(now_ms, expiration_ms)
    }

    fn create_segment(&mut self, base_offset: i64) -> Result<(), StorageError> {
        let (segment, _) = LogSegment::open(
            self.fs.clone(),
            &self.dir,
            base_offset,
            self.config.index_interval_bytes,
            self.config.segment_index_bytes,
            true,
        )?;
        self.segments.insert(base_offset, segment);
        self.dir_dirty = true;
        Ok(())
    }

    fn active_segment(&mut self) -> Result<&mut LogSegment, StorageError> {
        if self.deleted {
            return Err(deleted_error(&self.topic_partition));
        }
        match self.segments.values_mut().next_back() {
            Some(segment) => Ok(segment),
            None => Err(deleted_error(&self.topic_partition)),
        }
    }

    /// Validates and appends produced batches as the leader. `records` is one
    /// or more concatenated v2 batches. Each batch must have magic 2, a sane
    /// length, a valid CRC-32C, a known compression codec (0-4),
    /// `last_offset_delta >= 0` matching its record count, and be at most
    /// `max.message.bytes`; an uncompressed batch's records must also pass
    /// [`batch::validate_records_with`] under the topic's rules (structure,
    /// the KIP-937 timestamp window at `now_ms`, keys when `cleanup.policy`
    /// includes `compact`), and under CreateTime its header gets its
    /// records' real max timestamp (CRC recomputed when it changes, Kafka's
    /// `LogValidator`). A compressed batch's records are not read here:
    /// produced ones go through [`Log::append_produced`] with the outcome of
    /// [`compression::validate_compressed_batch`](crate::compression::validate_compressed_batch);
    /// here they keep their header (broker-internal writers). If any batch
    /// is invalid nothing is appended. Offsets are assigned from the log end offset; `base_offset`
    /// and `partition_leader_epoch` are stamped into a copy of each 61-byte
    /// header (both outside the CRC); under LogAppendTime `max_timestamp` is
    /// set to `now_ms`, attributes bit 3 set and the CRC recomputed. Record
    /// bytes are never copied: stamped headers and the rest of `records` are
    /// written with one `pwritev`. A new segment is rolled first when the
    /// append would take the active segment past `segment.bytes`, an index is
    /// full, or an offset would not fit the segment's 32-bit relative range.
    /// The leader epoch cache gains `(leader_epoch, first offset)` when
    /// `leader_epoch` is newer than its latest epoch.
    ///
    /// Batches with a producer id (`>= 0`, KIP-98) are checked against the
    /// producer state first (see [`ProducerStateManager::check`]): a retry of
    /// one of the producer's last 5 batches appends nothing and returns the
    /// stored batch's offsets with [`LogAppendInfo::duplicate`] set.
    ///
    /// # Errors
    /// [`StorageError::CorruptRecord`] / [`StorageError::InvalidRecord`] for an
    /// invalid or empty batch set, [`StorageError::RecordBatchTooLarge`] for a
    /// batch over `max.message.bytes` or a batch set over `segment.bytes`,
    /// [`StorageError::OutOfOrderSequence`] / [`StorageError::InvalidProducerEpoch`]
    /// for an idempotent batch that does not follow its producer's state,
    /// [`StorageError::RecordWithoutKey`] for a keyless record on a compacted
    /// topic, [`StorageError::InvalidTimestamp`] for a record outside the
    /// timestamp window, [`StorageError::LogDeleted`] once the log is
    /// deleted, [`StorageError::Io`] if the write fails (the segment is cut
    /// back).
    pub fn append_as_leader(
        &mut self,
        records: &Bytes,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<LogAppendInfo, StorageError> {
        self.append_validated(records, leader_epoch, now_ms, RecordsCheck::Scan(None))
    }

    /// [`Log::append_as_leader`] for produced batches whose compressed
    /// batches the caller has validated with
    /// [`compression::validate_compressed_batch`](crate::compression::validate_compressed_batch)
    /// (off the async runtime's threads): `compressed[i]` is the outcome for
    /// the `i`-th compressed batch of `records`. Every batch's max timestamp
    /// is then the real one (Kafka's `LogValidator`: under CreateTime
    /// `setMaxTimestamp` with the largest record timestamp, the CRC
    /// recomputed when it changes; a compressed payload is never
    /// recompressed, DESIGN.md §4).
    ///
    /// # Errors
    /// As [`Log::append_as_leader`]; [`StorageError::InvalidRecord`] for a
    /// compressed batch without an outcome in `compressed`.
    pub fn append_produced(
        &mut self,
        records: &Bytes,
        leader_epoch: i32,
        now_ms: i64,
        compressed: &[ValidatedRecords],
    ) -> Result<LogAppendInfo, StorageError> {
        self.append_validated(
            records,
            leader_epoch,
            now_ms,
            RecordsCheck::Scan(Some(compressed)),
        )
    }

    /// [`Log::append_as_leader`] for a caller that has already run
    /// [`batch::validate_records`] on every batch's (decompressed) records,
    /// compressed or not: the records sections are not scanned again. Every
    /// header, length, codec and CRC check still applies.
    ///
    /// # Errors
    /// As [`Log::append_as_leader`], except that broken records are not
    /// detected.
    pub fn append_as_leader_prevalidated(
        &mut self,
        records: &Bytes,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<LogAppendInfo, StorageError> {
        self.append_validated(records, leader_epoch, now_ms, RecordsCheck::Prevalidated)
    }

    /// The leader append; `check` says which records sections to validate.
    fn append_validated(
        &mut self,
        records: &Bytes,
        leader_epoch: i32,
        now_ms: i64,
        check: RecordsCheck<'_>,
    ) -> Result<LogAppendInfo, StorageError> {
        if records.is_empty() {
            return Err(StorageError::InvalidRecord {
                reason: "no record batch to append".to_string(),
            });
        }
        let rules = self.config.record_rules(&self.topic_partition, now_ms);
        let mut compressed_outcomes = match check {
            RecordsCheck::Scan(Some(outcomes)) => Some(outcomes.iter()),
            _ => None,
        };
        let log_append_time = self.config.message_timestamp_type == TimestampType::LogAppendTime;
        // Validate everything first, stamping header copies as we go.
        let mut headers: Vec<[u8; RECORD_BATCH_OVERHEAD]> = Vec::new();
        let mut appended: Vec<AppendedBatch> = Vec::new();
        let mut position = 0usize;
        let mut next_offset = self.log_end_offset;
        let mut info = LogAppendInfo {
            first_offset: next_offset,
            last_offset: next_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            log_append_time: if log_append_time { now_ms } else { -1 },
            valid_bytes: 0,
            batch_count: 0,
            record_count: 0,
            duplicate: false,
        };
        // Producer state left by the earlier batches of this request:
        // (producer id, epoch, batch). Allocates only for idempotent batches.
        let mut producer_updates: Vec<(i64, i16, BatchMetadata)> = Vec::new();
        while position < records.len() {
            let bytes = &records[position..];
            let header = RecordBatchHeader::validate(bytes)?;
            let size = header.size_in_bytes();
            if size > self.config.max_message_bytes {
                return Err(StorageError::RecordBatchTooLarge {
                    size,
                    max: self.config.max_message_bytes,
                });
            }
            let section = &bytes[RECORD_BATCH_OVERHEAD..size];
            let validated = match (&check, header.compression_codec()) {
                (RecordsCheck::Scan(_), 0) => {
                    Some(batch::validate_records_with(&header, section, &rules)?)
                }
                (RecordsCheck::Scan(_), _) => match compressed_outcomes.as_mut() {
                    Some(outcomes) => {
                        Some(*outcomes.next().ok_or_else(|| StorageError::InvalidRecord {
                            reason:
                                "a compressed batch was appended without validation".to_string(),
                        })?)
                    }
                    None => None,
                },
                (RecordsCheck::Prevalidated, _) => None,
            };
            let mut stamped = [0u8; RECORD_BATCH_OVERHEAD];
            stamped.copy_from_slice(&bytes[..RECORD_BATCH_OVERHEAD]);
            batch::stamp_offset_and_epoch(&mut stamped, next_offset, leader_epoch);
            let mut max_timestamp = header.max_timestamp;
            if log_append_time {
                batch::set_log_append_time(&mut stamped, now_ms);
                batch::restamp_crc(&mut stamped, section);
                max_timestamp = now_ms;
            } else if let Some(validated) = validated {
                // `LogValidator`: CreateTime batches carry their records'
                // real max timestamp, whatever the producer wrote.
                if batch::set_max_timestamp(
                    &mut stamped,
                    TimestampType::CreateTime,
                    validated.max_timestamp,
                ) {
                    batch::restamp_crc(&mut stamped, section);
                }
                max_timestamp = validated.max_timestamp;
            }
            let last_offset = next_offset + header.last_offset_delta as i64;
            if header.producer_id >= 0 {
                let last_seq =
                    producer_state::last_sequence(header.base_sequence, header.last_offset_delta);
                let pending = producer_updates
                    .iter()
                    .rev()
                    .find(|(pid, _, _)| *pid == header.producer_id)
                    .map(|(_, epoch, b)| (*epoch, b.last_seq));
                match self.producer_state.check(
                    header.producer_id,
                    header.producer_epoch,
                    header.base_sequence,
                    last_seq,
                    pending,
                )? {
                    ProducerCheck::Duplicate(original) => {
                        return Ok(duplicate_info(original, log_append_time))
                    }
                    ProducerCheck::Append => producer_updates.push((
                        header.producer_id,
                        header.producer_epoch,
                        BatchMetadata {
                            first_seq: header.base_sequence,
                            last_seq,
                            first_offset: next_offset,
                            last_offset,
                            timestamp: max_timestamp,
                        },
                    )),
                }
            }
            if max_timestamp > info.max_timestamp {
                info.max_timestamp = max_timestamp;
                info.offset_of_max_timestamp = last_offset;
            }
            headers.push(stamped);
            appended.push(AppendedBatch {
                last_offset,
                max_timestamp,
                size: size as u32,
            });
            info.record_count += header.records_count as usize;
            next_offset = last_offset + 1;
            position += size;
        }
        info.last_offset = next_offset - 1;
        info.valid_bytes = position;
        info.batch_count = headers.len();
        self.make_room_for(&info, now_ms)?;

        let mut iov: Vec<IoSlice<'_>> = Vec::with_capacity(headers.len() * 2);
        let mut at = 0usize;
        for (stamped, b) in headers.iter().zip(&appended) {
            let end = at + b.size as usize;
            iov.push(IoSlice::new(stamped));
            iov.push(IoSlice::new(&records[at + RECORD_BATCH_OVERHEAD..end]));
            at = end;
        }
        // The epoch is assigned before the write, as Kafka's
        // `UnifiedLog.append` does, so that a failed checkpoint write fails
        // the append before anything reaches the segment.
        let new_epoch = leader_epoch >= 0
            && self
                .leader_epoch_cache
                .latest_epoch()
                .is_none_or(|latest| leader_epoch > latest);
        let epochs_before = new_epoch.then(|| self.leader_epoch_cache.entries().to_vec());
        if new_epoch {
            self.leader_epoch_cache
                .assign(leader_epoch, info.first_offset)?;
        }
        if let Err(e) = self.active_segment()?.append(&mut iov, position, &appended) {
            if let Some(before) = epochs_before {
                // Best effort: if this checkpoint write fails too, the file
                // keeps an entry starting at the log end offset, which the
                // next open drops.
                let _ = self.leader_epoch_cache.restore(before);
            }
            return Err(e);
        }
        self.log_end_offset = next_offset;
        for (producer_id, epoch, batch) in producer_updates {
            self.producer_state.update(producer_id, epoch, batch);
        }
        self.count_append(position as u64, info.record_count);
        Ok(info)
    }

    /// Counts an append of `bytes` bytes of batches holding `records`
    /// records, as leader or follower: [`Log::appended_bytes`] and the
    /// `weir_storage_appended_*_total` counters.
    fn count_append(&mut self, bytes: u64, records: usize) {
        self.appended_bytes += bytes;
        metrics::counter!("weir_storage_appended_bytes_total").increment(bytes);
        metrics::counter!("weir_storage_appended_records_total").increment(records as u64);
    }

    /// Readies the active segment for an append described by `info`
    /// (`valid_bytes` from `first_offset` to `last_offset`, up to
    /// `max_timestamp`): refuses a batch set larger than `segment.bytes`
    /// ([`StorageError::RecordBatchTooLarge`], Kafka's
    /// `RecordBatchTooLargeException`), then [`Log::maybe_roll`]s.
    pub(crate) fn make_room_for(
        &mut self,
        info: &LogAppendInfo,
        now_ms: i64,
    ) -> Result<(), StorageError> {
        let segment_bytes = self.config.segment_bytes.min(MAX_SEGMENT_BYTES);
        if info.valid_bytes as u64 > segment_bytes {
            return Err(StorageError::RecordBatchTooLarge {
                size: info.valid_bytes,
                max: segment_bytes as usize,
            });
        }
        self.maybe_roll(
            info.valid_bytes as u64,
            info.first_offset,
            info.last_offset,
            segment_bytes,
            now_ms,
            info.max_timestamp,
        )
    }

    /// Rolls a new active segment when an append of `bytes` from
    /// `first_offset` to `last_offset`, whose largest timestamp is
    /// `max_timestamp`, does not fit the active one or the active one has
    /// been open for `segment.ms` (Kafka's `UnifiedLog.maybeRoll` /
    /// `LogSegment.shouldRoll`, without `segment.jitter.ms`). The new
    /// segment starts at `first_offset`, or the log end offset if that is
    /// larger (Kafka's `roll(Optional.of(rollOffset))`: a follower's batch
    /// may start past the log end offset of a compacted leader's log).
    fn maybe_roll(
        &mut self,
        bytes: u64,
        first_offset: i64,
        last_offset: i64,
        segment_bytes: u64,
        now_ms: i64,
        max_timestamp: i64,
    ) -> Result<(), StorageError> {
        let log_end_offset = self.log_end_offset;
        let segment_ms = self.config.segment_ms;
        let active = self.active_segment()?;
        if active.size() == 0 {
            return Ok(());
        }
        let too_big = active.size() + bytes > segment_bytes;
        let out_of_range = last_offset - active.base_offset() > i32::MAX as i64;
        let should_roll = too_big
            || active.indexes_full()
            || out_of_range
            || active.time_waited_for_roll(now_ms, max_timestamp)? > segment_ms;
        if !should_roll {
            return Ok(());
        }
        let base_offset = first_offset.max(log_end_offset);
        if last_offset - base_offset > i32::MAX as i64 {
            return Err(StorageError::OffsetOverflow {
                offset: last_offset,
                log_end: log_end_offset,
            });
        }
        self.roll_at(base_offset)
    }

    /// Makes the active segment inactive and opens a new active segment at
    /// the log end offset (Kafka's `UnifiedLog.roll`). An empty active
    /// segment is kept as it is.
    pub(crate) fn roll(&mut self) -> Result<(), StorageError> {
        self.roll_at(self.log_end_offset)
    }

    /// [`Log::roll`] with the new segment at `base_offset` (`>=` the log
    /// end offset).
    ///
    /// The `.log` file of the segment that becomes inactive is fsynced
    /// before the new segment is
    /// created (Kafka schedules that flush asynchronously at the roll,
    /// `UnifiedLog.roll` with `flushUptoOffsetExclusive`): otherwise a power
    /// loss could keep the new segment's file (any later directory fsync
    /// makes its name durable) and lose the old one's unsynced tail, a hole
    /// below the log end offset that recovery cannot see (the replication
    /// simulation found it). Only the newest segment can then lose a tail.
    /// The producer snapshot at `base_offset` is taken but not written
    /// (see [`Log::deferred_snapshot`]), and the new segment's directory
    /// entry is left to the next flush's directory fsync.
    fn roll_at(&mut self, base_offset: i64) -> Result<(), StorageError> {
        let active = self.active_segment()?;
        if active.size() == 0 {
            return Ok(());
        }
        active.on_become_inactive()?;
        active.sync_log_file()?;
        tracing::debug!(dir = %self.dir.display(), base_offset, "rolling new log segment");
        self.create_segment(base_offset)?;
        self.defer_producer_snapshot()
    }

    /// Reads whole batches for a fetch at `fetch_offset`: from the first batch
    /// whose last offset is `>= fetch_offset` (so an offset inside a batch
    /// returns that batch; the client skips the earlier records), within one
    /// segment, up to `max_bytes`, stopping before any batch whose base offset
    /// is `>= max_offset` (the broker passes the high watermark, exclusive).
    /// When the first batch alone exceeds `max_bytes` it is still returned
    /// whole if `min_one_batch` (KIP-74), otherwise nothing is.
    /// `fetch_offset == log end offset` returns no records.
    ///
    /// # Errors
    /// [`StorageError::OffsetOutOfRange`] if `fetch_offset` is outside
    /// `[log start offset, log end offset]`; [`StorageError::Io`] if the
    /// segment cannot be read; [`StorageError::CorruptRecord`] if a stored
    /// header is unreadable.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<FetchDataInfo, StorageError> {
        if fetch_offset < self.log_start_offset || fetch_offset > self.log_end_offset {
            return Err(StorageError::OffsetOutOfRange {
                requested: fetch_offset,
                log_start: self.log_start_offset,
                log_end: self.log_end_offset,
            });
        }
        let empty = || FetchDataInfo {
            fetch_offset,
            fetch_offset_metadata: self.cached_offset_metadata(fetch_offset),
            records: None,
        };
        if fetch_offset == self.log_end_offset || fetch_offset >= max_offset || self.deleted {
            return Ok(empty());
        }
        let floor = self
            .segments
            .range(..=fetch_offset)
            .next_back()
            .map(|(b, _)| *b)
            .unwrap_or(self.log_start_offset);
        for (&base, segment) in self.segments.range(floor..) {
            if let Some(region) =
                segment.read(fetch_offset, max_bytes, max_offset, min_one_batch)?
            {
                let records = match region.len {
                    0 => None,
                    len => Some(FileSlice::new(segment.file()?, region.position, len)),
                };
                return Ok(FetchDataInfo {
                    fetch_offset,
                    // Positions fit: segment.bytes is capped below 2 GiB.
                    fetch_offset_metadata: LogOffsetMetadata::new(
                        fetch_offset,
                        base,
                        region.position as u32,
                    ),
                    records,
                });
            }
        }
        Ok(empty())
    }

    /// The first offset in the log.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// The offset the next appended record will get.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// Offsets below this are known durable; recovery scans from its segment.
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }

    /// Messages (offsets) appended since the last flush: the log end offset
    /// minus the recovery point (Kafka's `UnifiedLog.unflushedMessages`).
    pub fn unflushed_messages(&self) -> i64 {
        self.log_end_offset - self.recovery_point
    }

    /// Whether `flush.messages` asks for a flush now: at least that many
    /// messages are unflushed.
    pub fn flush_messages_due(&self) -> bool {
        self.unflushed_messages() >= self.config.flush_messages.max(1)
    }

    /// Whether `flush.ms` asks for a flush at `now_ms`: something is
    /// unflushed and the last flush (or the opening of the log) is at least
    /// `flush.ms` old.
    pub fn flush_ms_due(&self, now_ms: i64) -> bool {
        self.unflushed_messages() > 0
            && now_ms.saturating_sub(self.last_flush_ms) >= self.config.flush_ms
    }

    /// The log's configuration.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Replaces the configuration (a topic config change). Takes effect for
    /// the next append and roll.
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    /// Starts a flush: collects every segment file appended to since the last
    /// flush, and the index files of inactive segments (with their pending
    /// entries written). The active segment's index files are not synced:
    /// the recovery point lies in the active segment, and recovery rebuilds
    /// the indexes of the segment holding it, so one fdatasync (of the
    /// `.log`) is all an acks=all write costs. Call [`PendingFlush::sync`]
    /// without holding the log's lock, then [`Log::complete_flush`]. This is
    /// the group-commit form of [`Log::flush`].
    ///
    /// Callers run one flush of a log at a time. After a failed flush (a
    /// failed [`PendingFlush::sync`] or an error here) the next call
    /// collects the files of every segment from the one holding the recovery
    /// point onwards, plus the partition directory, so nothing the failed
    /// flush covered is left unsynced.
    ///
    /// # Errors
    /// [`StorageError::Io`] if index entries cannot be written;
    /// [`StorageError::LogDeleted`] once the log is deleted.
    pub fn prepare_flush(&mut self) -> Result<PendingFlush, StorageError> {
        self.prepare_flush_with(false)
    }

    fn prepare_flush_with(&mut self, active_indexes: bool) -> Result<PendingFlush, StorageError> {
        if self.deleted {
            return Err(deleted_error(&self.topic_partition));
        }
        if self.flush_failed.swap(false, Ordering::AcqRel) {
            let floor = self
                .segments
                .range(..=self.recovery_point)
                .next_back()
                .map_or(i64::MIN, |(b, _)| *b);
            for segment in self.segments.range_mut(floor..).map(|(_, s)| s) {
                segment.mark_dirty();
            }
            self.dir_dirty = true;
        }
        let mut files = Vec::new();
        let creation = self.unsynced_creation;
        let mut publish = None;
        if creation.partition_metadata {
            let path = self.dir.join(PARTITION_METADATA_FILE);
            let tmp = checkpoint::tmp_path(&path);
            match self.fs.open_existing(&tmp) {
                Ok(file) => {
                    files.push(FlushFile {
                        file: Arc::new(file),
                        path: tmp.clone(),
                        mark: None,
                    });
                    publish = Some((tmp, path));
                }
                // A flush prepared earlier renamed it into place already.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && path.exists() => {}
                Err(e) => return Err(StorageError::io("open", &tmp, e)),
            }
        }
        let mut active = None;
        let active_base = self.segments.keys().next_back().copied();
        for (base, segment) in self.segments.iter_mut() {
            let is_active = Some(*base) == active_base;
            let with_indexes = active_indexes || !is_active;
            match segment.take_dirty_files(with_indexes) {
                Ok(taken) => {
                    let log_taken = taken.first().is_some_and(|f| f.path == segment.log_path());
                    if is_active && log_taken {
                        active = Some((files.len(), segment.written_end()));
                    }
                    files.extend(taken);
                }
                Err(e) => {
                    // Segments already taken are no longer marked dirty.
                    self.flush_failed.store(true, Ordering::Release);
                    return Err(e);
                }
            }
        }
        let mut dirs = Vec::new();
        let snapshot = self.deferred_snapshot.clone();
        if std::mem::take(&mut self.dir_dirty) || snapshot.is_some() {
            dirs.push(self.dir.clone());
        }
        if let Some(log_dir) = self.dir.parent().filter(|_| creation.log_dir_entry) {
            dirs.push(log_dir.to_path_buf());
        }
        Ok(PendingFlush {
            fs: self.fs.clone(),
            files,
            publish,
            dirs,
            creation,
            snapshot,
            active,
            recovery_point: AtomicI64::new(self.log_end_offset),
            failed: self.flush_failed.clone(),
            synced: AtomicBool::new(false),
        })
    }

    /// Advances the recovery point after a [`PendingFlush`] synced
    /// successfully. Returns the new recovery point, unchanged when a flush
    /// failed since the last [`Log::prepare_flush`] (its files are synced by
    /// the next flush, which may then advance it).
    pub fn complete_flush(&mut self, flushed: &PendingFlush) -> i64 {
        if self.flush_failed.load(Ordering::Acquire) {
            return self.recovery_point;
        }
        // Only what this flush synced: a topic id recorded after it was
        // prepared stays owed to the next one.
        if flushed.creation.log_dir_entry {
            self.unsynced_creation.log_dir_entry = false;
        }
        if flushed.creation.partition_metadata {
            self.unsynced_creation.partition_metadata = false;
        }
        if let (Some(written), Some(deferred)) = (&flushed.snapshot, &self.deferred_snapshot) {
            if deferred.same_as(written) {
                self.deferred_snapshot = None;
            }
        }
        let target = flushed.recovery_point().min(self.log_end_offset);
        self.recovery_point = self.recovery_point.max(target);
        self.last_flush_ms = crate::segment::wall_clock_ms();
        metrics::counter!("weir_storage_flushes_total").increment(1);
        self.recovery_point
    }

    /// fdatasyncs every segment and index file changed since the last
    /// flush, the active segment's indexes included (so a clean shutdown
    /// leaves every index on disk), and advances the recovery point to the
    /// log end offset at the time of the call. Returns the new recovery
    /// point.
    ///
    /// # Errors
    /// [`StorageError::Io`] if a write or sync fails; the recovery point then
    /// stays where it was and the next flush syncs everything past it again.
    pub fn flush(&mut self) -> Result<i64, StorageError> {
        let pending = self.prepare_flush_with(true)?;
        pending.sync()?;
        Ok(self.complete_flush(&pending))
    }

    /// How many segments opening this log re-validated batch by batch
    /// (crash recovery or a rebuilt index); 0 after a clean shutdown.
    pub fn recovered_segments(&self) -> usize {
        self.recovered_segments
    }

    /// Readies the log for a clean shutdown (Kafka's `LogSegment.close`):
    /// cuts back a torn tail a failed append left, ends the active segment's
    /// time index with its largest timestamp (which a log opened without
    /// recovery reads back), then [`Log::flush`]es everything changed since
    /// it was last synced, indexes included. A log unchanged since it was
    /// opened costs no file sync (issue 15: shutdown with many partitions).
    ///
    /// # Errors
    /// As [`Log::flush`].
    pub fn flush_for_shutdown(&mut self) -> Result<i64, StorageError> {
        if let Some(active) = self.segments.values_mut().next_back() {
            active.on_become_inactive()?;
        }
        self.flush()
    }

    /// The leader epoch cache.
    pub fn leader_epoch_cache(&self) -> &LeaderEpochCache {
        &self.leader_epoch_cache
    }

    /// `(epoch, end offset)` for OffsetForLeaderEpoch (KIP-101, KIP-279,
    /// KIP-320), as Kafka's `LeaderEpochFileCache.endOffsetFor`: the latest
    /// epoch answers the log end offset; an older one answers the largest
    /// known epoch `<= leader_epoch` and the start offset of the next larger
    /// epoch; an unknown newer epoch, -1, or an empty cache answer `(-1, -1)`
    /// (`UNDEFINED_EPOCH`, `UNDEFINED_EPOCH_OFFSET`).
    pub fn end_offset_for_epoch(&self, leader_epoch: i32) -> (i32, i64) {
        self.leader_epoch_cache
            .end_offset_for(leader_epoch, self.log_end_offset)
    }

    /// The latest leader epoch in the cache.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.leader_epoch_cache.latest_epoch()
    }

    /// Records that `leader_epoch` starts at `start_offset` when it is newer
    /// than the cache's latest epoch (Kafka's
    /// `UnifiedLog.maybeAssignEpochStartOffset`, called when this broker
    /// becomes leader with the log end offset).
    ///
    /// # Errors
    /// [`StorageError::Io`] if the checkpoint cannot be written.
    pub fn maybe_assign_epoch_start_offset(
        &mut self,
        leader_epoch: i32,
        start_offset: i64,
    ) -> Result<(), StorageError> {
        if self
            .leader_epoch_cache
            .latest_epoch()
            .is_none_or(|latest| leader_epoch > latest)
        {
            self.leader_epoch_cache.assign(leader_epoch, start_offset)?;
        }
        Ok(())
    }

    /// The raw bytes of the first batch (lowest offset) whose max timestamp is
    /// `>= timestamp` (ms) and whose last offset is at or above the log start
    /// offset, found through the time index and a scan; `None` if no batch
    /// qualifies. For ListOffsets: the broker finds the record (and skips
    /// records below the log start offset).
    ///
    /// # Errors
    /// [`StorageError::Io`] / [`StorageError::CorruptRecord`] on read errors.
    pub fn read_batch_for_timestamp(&self, timestamp: i64) -> Result<Option<Bytes>, StorageError> {
        for segment in self.segments.values() {
            if segment.max_timestamp() < timestamp {
                continue;
            }
            if let Some(region) =
                segment.find_batch_for_timestamp(timestamp, self.log_start_offset)?
            {
                return segment.read_bytes(region).map(Some);
            }
        }
        Ok(None)
    }

    /// The raw bytes of the batch carrying the largest max timestamp in the
    /// log (the first such batch on ties); `None` if the log is empty. For
    /// ListOffsets with `MAX_TIMESTAMP` (KIP-734).
    ///
    /// # Errors
    /// [`StorageError::Io`] / [`StorageError::CorruptRecord`] on read errors.
    pub fn read_batch_with_max_timestamp(&self) -> Result<Option<Bytes>, StorageError> {
        let mut best: Option<&LogSegment> = None;
        for segment in self.segments.values().filter(|s| s.size() > 0) {
            if best.is_none_or(|b| segment.max_timestamp() > b.max_timestamp()) {
                best = Some(segment);
            }
        }
        let Some(segment) = best else {
            return Ok(None);
        };
        let offset = segment.offset_of_max_timestamp().max(segment.base_offset());
        match segment.batch_containing(offset)? {
            Some(region) => segment.read_bytes(region).map(Some),
            None => Ok(None),
        }
    }

    fn read_partition_metadata(&self) -> Result<Option<[u8; 16]>, StorageError> {
        let path = self.dir.join(PARTITION_METADATA_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StorageError::io("read", &path, e)),
        };
        if text.is_empty() {
            // Left by an older Weir that renamed the file into place before
            // syncing it (see `Log::set_topic_id`), then lost power.
            tracing::warn!(path = %path.display(),
                "empty partition.metadata (lost before it was synced): no topic id recorded");
            return Ok(None);
        }
        let malformed = |reason: &str| StorageError::MalformedFile {
            path: path.clone(),
            reason: reason.to_string(),
        };
        let mut version = None;
        let mut topic_id = None;
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            match key.trim() {
                "version" => version = Some(value.trim().to_string()),
                "topic_id" => topic_id = Some(value.trim().to_string()),
                _ => {}
            }
        }
        if version.as_deref() != Some("0") {
            return Err(malformed("expected \"version: 0\""));
        }
        let id = topic_id.ok_or_else(|| malformed("missing topic_id"))?;
        parse_base64_uuid(&id)
            .map(Some)
            .ok_or_else(|| malformed("topic_id is not a base64 UUID"))
    }

    /// Records the partition's topic id in `partition.metadata` (Kafka's
    /// text format `version: 0\ntopic_id: <base64url UUID>`), written once;
    /// setting the same id again is a no-op.
    ///
    /// # Errors
    /// [`StorageError::InconsistentTopicId`] if a different id is stored;
    /// [`StorageError::Io`] if the file cannot be written.
    pub fn set_topic_id(&mut self, topic_id: [u8; 16]) -> Result<(), StorageError> {
        match self.topic_id {
            Some(existing) if existing == topic_id => return Ok(()),
            Some(existing) => {
                return Err(StorageError::InconsistentTopicId {
                    path: self.dir.clone(),
                    existing: base64_uuid(&existing),
                    requested: base64_uuid(&topic_id),
                })
            }
            None => {}
        }
        let text = format!("version: 0\ntopic_id: {}", base64_uuid(&topic_id));
        // Synced and renamed into place by the next flush (see
        // `Log::unsynced_creation`): the file is whole or absent after a
        // power loss, never torn (chaos seed 3002).
        checkpoint::write_unsynced_tmp(
            &*self.fs,
            &self.dir.join(PARTITION_METADATA_FILE),
            text.as_bytes(),
        )?;
        self.unsynced_creation.partition_metadata = true;
        self.dir_dirty = true;
        self.topic_id = Some(topic_id);
        Ok(())
    }

    /// The topic id from `partition.metadata`, if set.
    pub fn topic_id(&self) -> Option<[u8; 16]> {
        self.topic_id
    }

    /// The partition this log belongs to.
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.topic_partition
    }

    /// The partition directory, `<log.dirs>/<topic>-<partition>`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Base offsets of the segments, ascending.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.keys().copied().collect()
    }

    /// Bytes of record batches appended to this log since it was opened,
    /// as leader or follower (what `weir_storage_appended_bytes_total`
    /// counts for it); truncation and deletion do not lower it. The broker
    /// paces a log's flushes by how fast it grows.
    pub fn appended_bytes(&self) -> u64 {
        self.appended_bytes
    }

    /// Total bytes of all segments' `.log` files.
    pub fn size_in_bytes(&self) -> u64 {
        self.segments.values().map(LogSegment::size).sum()
    }

    /// Closes the log and removes its directory (DeleteTopics): the directory
    /// is first renamed to [`log_delete_dir_name`]
    /// (`<topic>-<partition>.<uuid>-delete`, the topic cut to fit 255 bytes),
    /// as Kafka does, then removed. File slices handed out earlier stay readable.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the rename or removal fails.
    pub fn delete(mut self) -> Result<(), StorageError> {
        self.delete_in_place()
    }

    /// Whether the log was deleted ([`Log::delete`]): appends and flushes
    /// then fail with [`StorageError::LogDeleted`].
    pub fn is_deleted(&self) -> bool {
        self.deleted
    }

    /// [`Log::delete`] for a log shared behind a lock: every later append or
    /// flush on it fails with [`StorageError::LogDeleted`].
    pub(crate) fn delete_in_place(&mut self) -> Result<(), StorageError> {
        if self.deleted {
            return Ok(());
        }
        self.deleted = true;
        self.segments.clear();
        let parent = self.dir.parent().map(Path::to_path_buf).unwrap_or_default();
        let renamed = parent.join(log_delete_dir_name(&self.topic_partition));
        self.fs
            .rename(&self.dir, &renamed)
            .map_err(|e| StorageError::io("rename", &self.dir, e))?;
        checkpoint::sync_dir(&*self.fs, &parent)?;
        self.fs
            .remove_dir_all(&renamed)
            .map_err(|e| StorageError::io("remove_dir", &renamed, e))
    }
}

pub mod cleaner;
mod deferred_snapshot;
use deferred_snapshot::DeferredSnapshot;
#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod flush_tests;
mod follower;
#[cfg(test)]
mod follower_tests;
mod offset_metadata;
pub use offset_metadata::{LogOffsetMetadata, SegmentPosition};
#[cfg(test)]
mod producer_tests;
#[cfg(test)]
mod read_tests;
pub mod retention;
#[cfg(test)]
mod tests;
