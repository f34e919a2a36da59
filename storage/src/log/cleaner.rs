//! Log compaction (Kafka's `LogCleaner` / `Cleaner` / `LogCleanerManager`)
//! for logs whose `cleanup.policy` includes `compact`.
//!
//! **What is cleaned.** The *dirty section* runs from the first dirty offset
//! (the cleaner checkpoint, `cleaner-offset-checkpoint`, kept by
//! [`LogManager`](crate::LogManager); the log start offset when absent or out
//! of range) to the *first uncleanable offset*: the active segment's base
//! offset, or earlier the base offset of the first segment whose largest
//! timestamp is less than `min.compaction.lag.ms` old. A log is cleaned when
//! its dirty ratio, dirty bytes / (clean + dirty bytes), is above
//! `min.cleanable.dirty.ratio`, or when a dirty segment is older than
//! `max.compaction.lag.ms` ([`LogToClean`]).
//!
//! **How.** [`clean_log`] builds an offset map, full key bytes -> last offset,
//! over the dirty section (no hashing, so no collision can lose a value),
//! capped by `log.cleaner.dedupe.buffer.size`: when the map fills, only the
//! prefix of the dirty section it covers is cleaned this round. Every
//! segment from the start of the log to the end of that prefix is then
//! rewritten, neighbours grouped up to `segment.bytes` (Kafka's
//! `groupSegmentsBySize`), into `<base>.log.cleaned` (with its indexes),
//! keeping a record when it is past the map, or its offset is at least the
//! map's offset for its key and it is not an expired tombstone (Kafka's
//! `Cleaner.shouldRetainRecord`). Keyless records are dropped.
//!
//! **Tombstones** follow KIP-534 as Kafka 3+/4 does (`MemoryRecords.filterTo`):
//! the first cleaning that retains a tombstone in a batch without a delete
//! horizon rewrites the batch with attributes bit 6 set and its base
//! timestamp set to the delete horizon, `now + delete.retention.ms`
//! (record timestamp deltas are re-encoded against it, so record timestamps
//! are unchanged); a later cleaning at or after the horizon drops the
//! batch's tombstones.
//!
//! **Batches.** A retained batch keeps its base offset, last offset delta,
//! producer id/epoch, base sequence, partition leader epoch and timestamp
//! type; it is copied verbatim when every record stays (and no delete
//! horizon must be set), otherwise rebuilt from the kept records and
//! re-compressed with its codec, CRC recomputed. A batch that loses every
//! record is kept as a header-only batch (records count 0, same base offset
//! and last offset delta, Kafka's `BatchRetention.RETAIN_EMPTY`) when it is
//! the last batch of its producer (so the producer's sequence survives) or
//! the last batch before the first uncleanable offset (so the log end offset
//! survives a restart with an empty active segment); other emptied batches
//! are dropped. A consumer always advances: fetch returns the next batch
//! whose last offset is at or above the fetch offset. Control and
//! transactional batches are kept untouched (transactions are not served
//! yet).
//!
//! **Concurrency.** The log's lock is held only to take a snapshot of the
//! segments ([`Log::cleanable`]; inactive segments never change, the
//! snapshot holds their open files) and to swap a cleaned segment in
//! (`Log::replace_segments`), never while data is read or written. The swap
//! is aborted, and the cleaned files removed, if retention, DeleteRecords or
//! a topic deletion changed the segments meanwhile. Reads holding file
//! slices of replaced segments keep working: the old files stay open until
//! dropped.
//!
//! **Crash safety** (Kafka's `UnifiedLog.replaceSegments` and
//! `LogLoader`): the cleaned files are fsynced, renamed `.cleaned` ->
//! `.swap` (indexes first, `.log` last) and the directory fsynced; the old
//! segments are renamed to `.deleted`; the `.swap` files are renamed to their
//! final names. [`Log::open`] calls `finish_interrupted_swaps`: `.cleaned`
//! files are removed (the old segments are intact), a `.log.swap` replaces
//! every segment whose base offset falls in its offset range, `.deleted`
//! files are removed. Either the old or the new segments survive, and both
//! hold the newest value of every key.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::Log;
use crate::batch::{self, RecordBatchHeader, RecordView, DELETE_HORIZON_MASK};
use crate::checkpoint;
use crate::compression;
use crate::error::StorageError;
use crate::fs::{remove_if_exists, FileSystem};
use crate::segment::{
    file_stem, LogSegment, SegmentSnapshot, CLEANED_FILE_SUFFIX, INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX, SWAP_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX,
};
use crate::LogConfig;

/// Attributes bits a header-only (emptied) batch keeps: timestamp type,
/// transactional, control (Kafka's `DefaultRecordBatch.writeEmptyHeader`).
const EMPTY_BATCH_ATTRIBUTES: i16 = 0x08 | 0x10 | 0x20;
/// Bytes an offset map entry costs beyond its key: the key's `Vec`
/// header, the offset and the hash table's slot overhead (estimate).
const MAP_ENTRY_OVERHEAD: usize = 48;

/// The cleaner's broker-level settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CleanerConfig {
    /// `log.cleaner.dedupe.buffer.size`: memory the offset map may use,
    /// bytes (keys plus `MAP_ENTRY_OVERHEAD` each). Default: 134217728.
    pub dedupe_buffer_size: usize,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            dedupe_buffer_size: 128 << 20,
        }
    }
}

/// A log's cleanable range and a snapshot of its segments, taken under the
/// log's lock by [`Log::cleanable`] (Kafka's `LogToClean`).
#[derive(Debug)]
pub struct LogToClean {
    /// First offset not yet cleaned.
    pub first_dirty_offset: i64,
    /// First offset that may not be cleaned this round (exclusive end).
    pub first_uncleanable_offset: i64,
    /// Bytes of segments below the one holding the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of segments from the one holding the first dirty offset up to
    /// the first uncleanable offset.
    pub cleanable_bytes: u64,
    /// A dirty segment is older than `max.compaction.lag.ms`.
    pub needs_compaction_now: bool,
    /// Every segment below the first uncleanable offset, ascending.
    segments: Vec<SegmentSnapshot>,
    config: LogConfig,
    producer_last_offsets: HashMap<i64, i64>,
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
}

impl LogToClean {
    /// `cleanable_bytes / (clean_bytes + cleanable_bytes)`, 0 for an empty
    /// log.
    pub fn cleanable_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.cleanable_bytes;
        if total == 0 {
            0.0
        } else {
            self.cleanable_bytes as f64 / total as f64
        }
    }

    /// Whether the log should be cleaned now (Kafka's
    /// `LogCleanerManager.grabFilthiestCompactedLog`): dirty ratio above
    /// `min.cleanable.dirty.ratio`, or a dirty segment past
    /// `max.compaction.lag.ms`, with something to clean.
    pub fn should_clean(&self) -> bool {
        self.cleanable_bytes > 0
            && (self.needs_compaction_now
                || self.cleanable_ratio() > self.config.min_cleanable_dirty_ratio)
    }
}

/// What one cleaning did (Kafka's `CleanerStats`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanerStats {
    /// The new first dirty offset: the end of the range the offset map
    /// covered.
    pub end_offset: i64,
    /// Bytes of segments read while rewriting.
    pub bytes_read: u64,
    /// Bytes written to cleaned segments.
    pub bytes_written: u64,
    /// Records read while rewriting.
    pub records_read: u64,
    /// Records kept.
    pub records_retained: u64,
    /// Cleaned segments swapped in.
    pub segments_written: usize,
}

/// Why a cleaning did not finish.
#[derive(Debug, thiserror::Error)]
pub enum CleanerError {
    /// The log's segments changed while it was cleaned (retention,
    /// DeleteRecords, deletion); the cleaned files were removed. Kafka's
    /// `LogCleaningAbortedException`.
    #[error("cleaning of {dir} aborted: segment {base_offset} changed while it was cleaned")]
    Aborted {
        /// The partition directory.
        dir: PathBuf,
        /// Base offset of the segment that changed.
        base_offset: i64,
    },
    /// A storage error.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Finishes or discards a compaction swap a crash interrupted (Kafka's
/// `LogLoader` handling of `.cleaned` and `.swap` files): removes every
/// `.cleaned` file; for each `<base>.log.swap`, deletes the segments whose
/// base offset lies in `[base, last offset of the swap segment]` and renames
/// the `.swap` files to their final names, deleting its index files so that
/// the caller rebuilds them; removes index `.swap` files left without a
/// `.log.swap`.
///
/// # Errors
/// [`StorageError::Io`] on file errors.
pub(crate) fn finish_interrupted_swaps(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    config: &LogConfig,
) -> Result<(), StorageError> {
    let mut swaps = Vec::new();
    let mut stray_swaps = Vec::new();
    let mut log_bases = Vec::new();
    // Whether anything here changed the directory, and so needs its fsync.
    let mut changed = false;
    let entries = std::fs::read_dir(dir).map_err(|e| StorageError::io("read_dir", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StorageError::io("read_dir", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(CLEANED_FILE_SUFFIX) {
            remove_if_exists(&**fs, &entry.path())?;
            changed = true;
        } else if let Some(stem) =
            name.strip_suffix(&format!("{LOG_FILE_SUFFIX}{SWAP_FILE_SUFFIX}"))
        {
            if let Ok(base) = stem.parse::<i64>() {
                swaps.push(base);
            }
        } else if name.ends_with(SWAP_FILE_SUFFIX) {
            stray_swaps.push(entry.path());
        } else if let Some(stem) = name.strip_suffix(LOG_FILE_SUFFIX) {
            if let Ok(base) = stem.parse::<i64>() {
                log_bases.push(base);
            }
        }
    }
    for path in stray_swaps {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let base = name.split('.').next().and_then(|s| s.parse::<i64>().ok());
        if !base.is_some_and(|b| swaps.contains(&b)) {
            remove_if_exists(&**fs, &path)?;
            changed = true;
        }
    }
    for base in swaps {
        changed = true;
        let (mut swap, _) = LogSegment::open_with_suffix(
            fs.clone(),
            dir,
            base,
            config.index_interval_bytes,
            config.segment_index_bytes,
            false,
            SWAP_FILE_SUFFIX,
        )?;
        let mut last = base;
        swap.for_each_batch_header(|h| last = last.max(h.last_offset()))?;
        tracing::info!(dir = %dir.display(), base_offset = base, last_offset = last,
            "finishing an interrupted compaction swap");
        for &old in log_bases.iter().filter(|&&b| b >= base && b <= last) {
            let stem = file_stem(old);
            for suffix in [LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX] {
                remove_if_exists(&**fs, &dir.join(format!("{stem}{suffix}")))?;
            }
        }
        swap.change_file_suffixes(SWAP_FILE_SUFFIX, "")?;
        // The index files may be empty ones opening the `.swap` segment
        // created (a crash came after the indexes were renamed): remove them
        // so that `Log::open` rebuilds both from the `.log`, as Kafka's
        // `LogLoader` recovers every swapped-in segment.
        let stem = file_stem(base);
        for suffix in [INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX] {
            remove_if_exists(&**fs, &dir.join(format!("{stem}{suffix}")))?;
        }
    }
    if changed {
        checkpoint::sync_dir(&**fs, dir)?;
    }
    Ok(())
}

impl Log {
    /// The cleanable range of this log at `now_ms` and a snapshot of its
    /// segments, or `None` when its policy does not include `compact`, it
    /// was deleted, or nothing is cleanable. `first_dirty_checkpoint` is the
    /// checkpointed first dirty offset; outside `[log start, log end]` (or
    /// `None`) the log start offset is used (Kafka's
    /// `LogCleanerManager.cleanableOffsets`).
    ///
    /// The first uncleanable offset is the lowest of: the active segment's
    /// base; the base of the segment holding `last_stable_offset` (the
    /// partition's high watermark: records above it may still be truncated
    /// away or replaced by the leader's, so no replica compacts them;
    /// `i64::MAX` for no bound); the first segment younger than
    /// `min.compaction.lag.ms`. Kafka bounds it by the last stable offset
    /// itself and may clean the part of a segment below it; Weir cleans
    /// whole segments only, so it stops at that segment's base.
    ///
    /// # Errors
    /// [`StorageError::Io`] if a segment's modification time cannot be read.
    pub fn cleanable(
        &self,
        first_dirty_checkpoint: Option<i64>,
        now_ms: i64,
        last_stable_offset: i64,
    ) -> Result<Option<LogToClean>, StorageError> {
        if !self.config.cleanup_policy.compact || self.deleted {
            return Ok(None);
        }
        let first_dirty_offset = match first_dirty_checkpoint {
            Some(o) if o >= self.log_start_offset && o <= self.log_end_offset => o,
            _ => self.log_start_offset,
        };
        let Some((&active_base, _)) = self.segments.iter().next_back() else {
            return Ok(None);
        };
        let mut snapshots = Vec::new();
        for segment in self.segments.range(..active_base).map(|(_, s)| s) {
            snapshots.push(segment.snapshot()?);
        }
        // The segment holding the first dirty offset.
        let dirty_from = snapshots
            .iter()
            .rposition(|s| s.base_offset <= first_dirty_offset)
            .unwrap_or(0);
        let min_lag = self.config.min_compaction_lag_ms.max(0);
        let stable_segment_base = self
            .segments
            .range(..=last_stable_offset)
            .next_back()
            .map_or(self.log_start_offset, |(&base, _)| base);
        let mut first_uncleanable_offset = active_base.min(stable_segment_base);
        if min_lag > 0 {
            if let Some(young) = snapshots[dirty_from..]
                .iter()
                .find(|s| s.largest_timestamp > now_ms.saturating_sub(min_lag))
            {
                first_uncleanable_offset = young.base_offset;
            }
        }
        let first_uncleanable_offset = first_uncleanable_offset.max(first_dirty_offset);
        snapshots.retain(|s| s.base_offset < first_uncleanable_offset);
        let clean_bytes = snapshots[..dirty_from.min(snapshots.len())]
            .iter()
            .map(|s| s.size)
            .sum();
        let dirty = snapshots.get(dirty_from..).unwrap_or(&[]);
        let cleanable_bytes = dirty.iter().map(|s| s.size).sum();
        let max_lag = self.config.max_compaction_lag_ms;
        let needs_compaction_now = max_lag >= 0
            && dirty.iter().any(|s| {
                s.largest_timestamp >= 0 && s.largest_timestamp < now_ms.saturating_sub(max_lag)
            });
        if first_dirty_offset >= first_uncleanable_offset {
            return Ok(None);
        }
        Ok(Some(LogToClean {
            first_dirty_offset,
            first_uncleanable_offset,
            clean_bytes,
            cleanable_bytes,
            needs_compaction_now,
            segments: snapshots,
            config: self.config.clone(),
            producer_last_offsets: self.producer_state.last_batch_offsets(),
            dir: self.dir.clone(),
            fs: self.fs.clone(),
        }))
    }

    /// Swaps a cleaned segment (files ending in `.cleaned`, synced) in for
    /// the segments `old` it was written from. Steps, each rename a crash
    /// point that `finish_interrupted_swaps` recovers from: rename the
    /// cleaned files to `.swap` and fsync the directory; rename each old
    /// segment's files to `.deleted`; then rename the `.swap` files to their
    /// final names and fsync the directory. Returns the `.deleted`
    /// files, for the caller to remove after releasing the lock.
    ///
    /// # Errors
    /// [`CleanerError::Aborted`] (nothing changed; the caller removes the
    /// cleaned files) if any of `old` is no longer in the log with the same
    /// file and size; [`CleanerError::Storage`] on I/O errors mid-swap: the
    /// segment map is then unchanged (reads keep working through the open
    /// files) and the files on disk are finished by the next [`Log::open`].
    /// Until then, operations that rename or delete the old segments' files
    /// fail; Kafka takes the log directory offline instead.
    fn replace_segments(
        &mut self,
        mut cleaned: LogSegment,
        old: &[SegmentSnapshot],
    ) -> Result<Vec<PathBuf>, CleanerError> {
        for snapshot in old {
            let unchanged = !self.deleted
                && self
                    .segments
                    .get(&snapshot.base_offset)
                    .is_some_and(|s| s.id() == snapshot.segment_id && s.size() == snapshot.size);
            if !unchanged {
                return Err(CleanerError::Aborted {
                    dir: self.dir.clone(),
                    base_offset: snapshot.base_offset,
                });
            }
        }
        cleaned.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)?;
        checkpoint::sync_dir(&*self.fs, &self.dir)?;
        // Rename every file first and change the segment map only once all
        // renames succeeded: on an error the running log keeps serving the
        // old segments through their open files, and the files on disk are
        // an interrupted swap that the next `Log::open` finishes.
        let mut deleted_files = Vec::new();
        for snapshot in old {
            if let Some(segment) = self.segments.get(&snapshot.base_offset) {
                deleted_files.extend(segment.rename_to_deleted()?);
            }
        }
        cleaned.change_file_suffixes(SWAP_FILE_SUFFIX, "")?;
        for snapshot in old {
            self.segments.remove(&snapshot.base_offset);
        }
        self.segments.insert(cleaned.base_offset(), cleaned);
        self.dir_dirty = true;
        checkpoint::sync_dir(&*self.fs, &self.dir)?;
        Ok(deleted_files)
    }
}

/// The offset map: full key bytes -> offset of the key's last record in the
/// covered range (Kafka's `SkimpyOffsetMap`, without hashing).
struct OffsetMap {
    offsets: HashMap<Vec<u8>, i64>,
    bytes: usize,
    capacity: usize,
}

impl OffsetMap {
    fn get(&self, key: &[u8]) -> Option<i64> {
        self.offsets.get(key).copied()
    }
}

/// The decompressed records of a stored batch, or `None` for a header-only
/// batch.
fn batch_records(header: &RecordBatchHeader, bytes: &[u8]) -> Result<Vec<u8>, StorageError> {
    let section = batch::records_section(bytes);
    compression::decompress(header.compression_codec(), section).map_err(|e| {
        StorageError::corrupt(format!(
            "stored batch at offset {}: {e}",
            header.base_offset
        ))
    })
}

/// Builds the offset map over `[first dirty, first uncleanable)`, stopping
/// at a batch boundary when `capacity` bytes would be exceeded (at least
/// one batch is always taken). Returns the map and the end of the covered
/// range (exclusive).
fn build_offset_map(
    to_clean: &LogToClean,
    capacity: usize,
) -> Result<(OffsetMap, i64), StorageError> {
    let mut map = OffsetMap {
        offsets: HashMap::new(),
        bytes: 0,
        capacity,
    };
    let mut end = to_clean.first_dirty_offset;
    let mut full = false;
    for (i, segment) in to_clean.segments.iter().enumerate() {
        if full {
            break;
        }
        let below_dirty = to_clean
            .segments
            .get(i + 1)
            .is_some_and(|next| next.base_offset <= to_clean.first_dirty_offset);
        if below_dirty {
            continue;
        }
        segment.for_each_batch(|header, bytes| {
            if header.last_offset() < to_clean.first_dirty_offset {
                return Ok(true);
            }
            if header.base_offset >= to_clean.first_uncleanable_offset {
                full = true;
                return Ok(false);
            }
            if header.is_control() || header.records_count == 0 {
                end = header.next_offset();
                return Ok(true);
            }
            let records = batch_records(header, bytes)?;
            let views = batch::read_records(&records)?;
            let new_bytes: usize = views
                .iter()
                .filter_map(|r| r.key)
                .filter(|k| !map.offsets.contains_key(*k))
                .map(|k| k.len() + MAP_ENTRY_OVERHEAD)
                .sum();
            if map.bytes + new_bytes > map.capacity && end > to_clean.first_dirty_offset {
                full = true;
                return Ok(false);
            }
            for r in &views {
                let offset = header.base_offset + i64::from(r.offset_delta);
                if offset < to_clean.first_dirty_offset {
                    continue;
                }
                if let Some(key) = r.key {
                    if map.offsets.insert(key.to_vec(), offset).is_none() {
                        map.bytes += key.len() + MAP_ENTRY_OVERHEAD;
                    }
                }
            }
            end = header.next_offset();
            Ok(true)
        })?;
    }
    if !full {
        end = end.max(to_clean.first_uncleanable_offset);
    }
    Ok((map, end))
}

/// What happens to one batch.
enum Filtered {
    /// Keep the stored bytes.
    Verbatim,
    /// Write these bytes instead (rebuilt or header-only).
    Rewritten(Vec<u8>),
    /// Drop the batch.
    Dropped,
}

/// The per-round inputs of [`filter_batch`].
struct FilterContext<'a> {
    map: &'a OffsetMap,
    /// Last offset the map covers.
    map_latest_offset: i64,
    /// Kafka's `upperBoundOffsetOfCleaningRound`.
    upper_bound_offset: i64,
    producer_last_offsets: &'a HashMap<i64, i64>,
    now_ms: i64,
    delete_retention_ms: i64,
}

/// Applies Kafka's `Cleaner.cleanInto` filter and `MemoryRecords.filterTo`
/// to one batch. Counts records read and kept into `stats`.
fn filter_batch(
    header: &RecordBatchHeader,
    bytes: &[u8],
    ctx: &FilterContext<'_>,
    stats: &mut CleanerStats,
) -> Result<Filtered, StorageError> {
    if header.is_control() || header.is_transactional() {
        return Ok(Filtered::Verbatim);
    }
    let records = batch_records(header, bytes)?;
    let views = batch::read_records(&records)?;
    stats.records_read += views.len() as u64;
    let horizon = header.delete_horizon_ms();
    let keep = |r: &RecordView<'_>| -> bool {
        let offset = header.base_offset + i64::from(r.offset_delta);
        if offset > ctx.map_latest_offset {
            return true;
        }
        let Some(key) = r.key else {
            return false;
        };
        let newest = ctx.map.get(key).is_none_or(|o| offset >= o);
        let retain_delete = horizon.is_none_or(|h| ctx.now_ms < h);
        newest && (r.value.is_some() || retain_delete)
    };
    let kept: Vec<&RecordView<'_>> = views.iter().filter(|r| keep(r)).collect();
    stats.records_retained += kept.len() as u64;
    if kept.is_empty() {
        let last_of_producer = header.producer_id >= 0
            && ctx.producer_last_offsets.get(&header.producer_id) == Some(&header.last_offset());
        if last_of_producer || header.next_offset() == ctx.upper_bound_offset {
            // Kafka's `DefaultRecordBatch.writeEmptyHeader`: both timestamps
            // are the batch's max timestamp.
            let empty = RecordBatchHeader {
                attributes: header.attributes & EMPTY_BATCH_ATTRIBUTES,
                base_timestamp: header.max_timestamp,
                records_count: 0,
                ..*header
            };
            return Ok(Filtered::Rewritten(batch::write_batch(&empty, &[])));
        }
        return Ok(Filtered::Dropped);
    }
    let has_tombstone = kept.iter().any(|r| r.value.is_none());
    let set_horizon = has_tombstone && horizon.is_none();
    if kept.len() == views.len() && !set_horizon {
        return Ok(Filtered::Verbatim);
    }
    // Kafka's MemoryRecordsBuilder: the base timestamp is the delete horizon
    // when there is one, else the first kept record's timestamp.
    let original_base = header.base_timestamp;
    let absolute = |r: &RecordView<'_>| original_base.saturating_add(r.timestamp_delta);
    let new_horizon = if set_horizon {
        Some(ctx.now_ms.saturating_add(ctx.delete_retention_ms))
    } else {
        horizon
    };
    let base_timestamp = new_horizon.unwrap_or_else(|| absolute(kept[0]));
    let mut section = Vec::with_capacity(records.len());
    let mut max_timestamp = -1i64;
    for r in &kept {
        let ts = absolute(r);
        max_timestamp = max_timestamp.max(ts);
        batch::write_record(&mut section, r, ts.saturating_sub(base_timestamp));
    }
    if header.timestamp_type() == crate::TimestampType::LogAppendTime {
        max_timestamp = header.max_timestamp;
    }
    let mut attributes = header.attributes & !DELETE_HORIZON_MASK;
    if new_horizon.is_some() {
        attributes |= DELETE_HORIZON_MASK;
    }
    let compressed = compression::compress(header.compression_codec(), &section)?;
    let rebuilt = RecordBatchHeader {
        attributes,
        base_timestamp,
        max_timestamp,
        records_count: kept.len() as i32,
        ..*header
    };
    Ok(Filtered::Rewritten(batch::write_batch(
        &rebuilt,
        &compressed,
    )))
}

/// Groups consecutive segments so each group's total size fits
/// `segment.bytes` and its offsets fit a segment's 32-bit relative range
/// (Kafka's `Cleaner.groupSegmentsBySize`). `upper(i)` is the exclusive
/// end offset of segment `i`.
fn group_segments_by_size(
    segments: &[SegmentSnapshot],
    max_size: u64,
    upper: impl Fn(usize) -> i64,
) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut start = 0;
    while start < segments.len() {
        let mut end = start + 1;
        let mut size = segments[start].size;
        while end < segments.len()
            && size + segments[end].size <= max_size
            && upper(end) - 1 - segments[start].base_offset <= i64::from(i32::MAX)
        {
            size += segments[end].size;
            end += 1;
        }
        groups.push(start..end);
        start = end;
    }
    groups
}

/// Cleans `log` once (Kafka's `Cleaner.doClean`): builds the offset map
/// over the dirty section of `to_clean` (taken by [`Log::cleanable`]),
/// rewrites the segments group by group into `.cleaned` files without the
/// log's lock, and swaps each group in under the lock. Returns the
/// statistics; `end_offset` is the new first dirty offset to checkpoint.
///
/// # Errors
/// [`CleanerError::Aborted`] if the log's segments changed meanwhile (the
/// groups swapped before stay swapped: each is a complete, valid cleaning);
/// [`CleanerError::Storage`] on I/O errors or unreadable stored batches.
pub fn clean_log(
    log: &Mutex<Log>,
    to_clean: LogToClean,
    now_ms: i64,
    config: &CleanerConfig,
) -> Result<CleanerStats, CleanerError> {
    let (map, end_offset) = build_offset_map(&to_clean, config.dedupe_buffer_size)?;
    let mut stats = CleanerStats {
        end_offset,
        ..CleanerStats::default()
    };
    let segments: Vec<SegmentSnapshot> = to_clean
        .segments
        .iter()
        .filter(|s| s.base_offset < end_offset)
        .cloned()
        .collect();
    let upper = |i: usize| {
        segments
            .get(i + 1)
            .map_or(to_clean.first_uncleanable_offset, |s| s.base_offset)
    };
    let ctx = FilterContext {
        map: &map,
        map_latest_offset: end_offset - 1,
        upper_bound_offset: to_clean.first_uncleanable_offset,
        producer_last_offsets: &to_clean.producer_last_offsets,
        now_ms,
        delete_retention_ms: to_clean.config.delete_retention_ms,
    };
    let segment_bytes = to_clean.config.segment_bytes.min(i32::MAX as u64);
    for group in group_segments_by_size(&segments, segment_bytes, upper) {
        let group = &segments[group];
        let (mut cleaned, _) = LogSegment::open_with_suffix(
            to_clean.fs.clone(),
            &to_clean.dir,
            group[0].base_offset,
            to_clean.config.index_interval_bytes,
            to_clean.config.segment_index_bytes,
            true,
            CLEANED_FILE_SUFFIX,
        )?;
        let written = (|| -> Result<(), StorageError> {
            for segment in group {
                stats.bytes_read += segment.size;
                segment.for_each_batch(|header, bytes| {
                    match filter_batch(header, bytes, &ctx, &mut stats)? {
                        Filtered::Verbatim => {
                            stats.bytes_written += bytes.len() as u64;
                            cleaned.append_batch(header, bytes)?;
                        }
                        Filtered::Rewritten(out) => {
                            stats.bytes_written += out.len() as u64;
                            cleaned.append_batch(&RecordBatchHeader::parse(&out)?, &out)?;
                        }
                        Filtered::Dropped => {}
                    }
                    Ok(true)
                })?;
            }
            cleaned.on_become_inactive()?;
            cleaned.sync()?;
            if let Some(modified) = group
                .last()
                .and_then(|s| s.file.metadata().ok())
                .and_then(|m| m.modified().ok())
            {
                let _ = cleaned.file()?.set_modified(modified);
            }
            Ok(())
        })();
        if let Err(e) = written {
            let _ = cleaned.delete_files();
            return Err(e.into());
        }
        let swapped = {
            let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
            log.replace_segments(cleaned, group)
        };
        match swapped {
            Ok(deleted) => {
                for path in deleted {
                    remove_if_exists(&*to_clean.fs, &path)?;
                }
                stats.segments_written += 1;
            }
            Err(e) => {
                for suffix in [LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX] {
                    let stem = file_stem(group[0].base_offset);
                    let _ = remove_if_exists(
                        &*to_clean.fs,
                        &to_clean
                            .dir
                            .join(format!("{stem}{suffix}{CLEANED_FILE_SUFFIX}")),
                    );
                }
                return Err(e);
            }
        }
    }
    metrics::counter!("weir_log_cleaner_runs_total").increment(1);
    metrics::counter!("weir_log_cleaner_read_bytes_total").increment(stats.bytes_read);
    metrics::counter!("weir_log_cleaner_written_bytes_total").increment(stats.bytes_written);
    tracing::info!(dir = %to_clean.dir.display(), ?stats, "cleaned log");
    Ok(stats)
}

#[cfg(test)]
mod tests;
