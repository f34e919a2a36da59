//! Retention of a [`Log`] (Kafka's `UnifiedLog.deleteOldSegments`): the log
//! start offset moves forward (DeleteRecords, KIP-107) and whole segments
//! leave the log when they fall below it, when the log exceeds
//! `retention.bytes`, or when they are older than `retention.ms`.
//!
//! A deleted segment leaves the segment map under the log's lock and its
//! files are renamed to `<name>.deleted` there; removing the renamed files is
//! left to [`SegmentDeletion::remove_files`], which the caller runs without
//! the lock. Kafka waits `file.delete.delay.ms` (default 60 s) before that
//! removal so that in-flight reads of memory-mapped files finish; Weir removes
//! them at once because a read already handed out holds the open file (a
//! [`FileSlice`](crate::FileSlice) keeps its `Arc<File>`), and an unlinked
//! file stays readable until its last descriptor closes.

use std::path::PathBuf;
use std::sync::Arc;

use super::Log;
use crate::error::StorageError;
use crate::fs::{remove_if_exists, FileSystem, RealFileSystem};
use crate::segment::LogSegment;

/// Segments removed from a log whose renamed (`.deleted`) files still exist.
/// Returned by [`Log::delete_old_segments`]; call
/// [`SegmentDeletion::remove_files`] after releasing the log's lock.
#[derive(Debug, Default)]
#[must_use = "the renamed files stay on disk until remove_files is called"]
pub struct SegmentDeletion {
    /// Base offsets of the deleted segments, ascending.
    pub base_offsets: Vec<i64>,
    /// Bytes of the deleted segments' `.log` files.
    pub bytes: u64,
    files: Vec<PathBuf>,
    /// The log's file system; `None` (nothing deleted) means the real one.
    fs: Option<Arc<dyn FileSystem>>,
}

impl SegmentDeletion {
    /// Whether no segment was deleted.
    pub fn is_empty(&self) -> bool {
        self.base_offsets.is_empty()
    }

    /// Removes the renamed files. Blocking; files already gone are skipped.
    /// Any left behind (a crash, an error) are removed when the log is next
    /// opened.
    ///
    /// # Errors
    /// [`StorageError::Io`] naming the first file that could not be removed.
    pub fn remove_files(self) -> Result<(), StorageError> {
        let fs = self.fs.unwrap_or_else(RealFileSystem::shared);
        for path in &self.files {
            remove_if_exists(&*fs, path)?;
        }
        Ok(())
    }

    fn extend(&mut self, other: SegmentDeletion) {
        self.base_offsets.extend(other.base_offsets);
        self.bytes += other.bytes;
        self.files.extend(other.files);
        self.fs = self.fs.take().or(other.fs);
    }
}

impl Log {
    /// Moves the log start offset forward to `new_log_start_offset` (Kafka's
    /// `UnifiedLog.maybeIncrementLogStartOffset`, used by DeleteRecords,
    /// KIP-107). The offset may point inside a segment: reads below it fail
    /// with [`StorageError::OffsetOutOfRange`] at once, and segments wholly
    /// below it are deleted by the next [`Log::delete_old_segments`]. The
    /// leader epoch cache drops entries below it and the recovery point moves
    /// up to it. Returns whether the log start offset changed; an offset at or
    /// below the current one is a no-op. The caller checkpoints the new
    /// value (`log-start-offset-checkpoint`, see
    /// [`LogManager::checkpoint`](crate::LogManager::checkpoint)).
    ///
    /// # Errors
    /// [`StorageError::LogStartOffsetBeyondHighWatermark`] if
    /// `new_log_start_offset > high_watermark`; [`StorageError::Io`] if the
    /// leader epoch checkpoint cannot be written.
    pub fn maybe_increment_log_start_offset(
        &mut self,
        new_log_start_offset: i64,
        high_watermark: i64,
    ) -> Result<bool, StorageError> {
        if new_log_start_offset > high_watermark {
            return Err(StorageError::LogStartOffsetBeyondHighWatermark {
                requested: new_log_start_offset,
                high_watermark,
            });
        }
        if self.deleted || new_log_start_offset <= self.log_start_offset {
            return Ok(false);
        }
        self.update_log_start_offset(new_log_start_offset)?;
        tracing::info!(dir = %self.dir.display(), log_start_offset = new_log_start_offset,
            "incremented log start offset");
        Ok(true)
    }

    fn update_log_start_offset(&mut self, offset: i64) -> Result<(), StorageError> {
        self.log_start_offset = offset;
        self.recovery_point = self.recovery_point.max(offset);
        self.leader_epoch_cache.truncate_from_start(offset)
    }

    /// Deletes whole segments as Kafka's `UnifiedLog.deleteOldSegments`
    /// does, in this order:
    ///
    /// 1. log start offset breach: a segment whose successor starts at or
    ///    below the log start offset;
    /// 2. under `cleanup.policy` delete, `retention.bytes` (if `>= 0`): while
    ///    the log is larger than `retention.bytes` by at least the oldest
    ///    segment's size, that segment;
    /// 3. under `cleanup.policy` delete, `retention.ms` (if `>= 0`): a segment
    ///    whose largest timestamp ([`LogSegment::largest_timestamp`]) is more
    ///    than `retention.ms` before `now_ms`.
    ///
    /// Each rule deletes the longest run of qualifying segments from the
    /// oldest one, and never a segment holding offsets at or above
    /// `high_watermark`. When the active segment itself qualifies (it is not
    /// empty and everything in it is below the high watermark) a new empty
    /// active segment is rolled first, so the log always keeps one segment.
    /// The log start offset then moves up to the first remaining segment's
    /// base offset.
    ///
    /// Returns the deleted segments; their files are renamed to `.deleted`
    /// and still need [`SegmentDeletion::remove_files`].
    ///
    /// # Errors
    /// [`StorageError::Io`] if a roll, rename or file stat fails; segments
    /// deleted before the error stay deleted (their renamed files are left
    /// for the next [`Log::open`] to remove).
    pub fn delete_old_segments(
        &mut self,
        now_ms: i64,
        high_watermark: i64,
    ) -> Result<SegmentDeletion, StorageError> {
        let mut deletion = SegmentDeletion::default();
        if self.deleted {
            return Ok(deletion);
        }
        let log_start_offset = self.log_start_offset;
        deletion.extend(self.delete_segments_while(high_watermark, |_, next| {
            Ok(next.is_some_and(|n| n.base_offset() <= log_start_offset))
        })?);
        if !self.config.cleanup_policy.delete {
            return Ok(deletion);
        }
        let retention_bytes = self.config.retention_bytes;
        let size = self.size_in_bytes();
        if retention_bytes >= 0 && size >= retention_bytes as u64 {
            let mut excess = size - retention_bytes as u64;
            deletion.extend(self.delete_segments_while(high_watermark, |segment, _| {
                if excess >= segment.size() {
                    excess -= segment.size();
                    Ok(true)
                } else {
                    Ok(false)
                }
            })?);
        }
        let retention_ms = self.config.retention_ms;
        if retention_ms >= 0 {
            deletion.extend(self.delete_segments_while(high_watermark, |segment, _| {
                Ok(now_ms.saturating_sub(segment.largest_timestamp()?) > retention_ms)
            })?);
        }
        if !deletion.is_empty() {
            metrics::counter!("weir_storage_deleted_segments_total")
                .increment(deletion.base_offsets.len() as u64);
        }
        Ok(deletion)
    }

    /// Deletes the longest run of segments, oldest first, for which
    /// `predicate(segment, next segment)` holds (Kafka's
    /// `UnifiedLog.deletableSegments` + `deleteSegments`).
    fn delete_segments_while(
        &mut self,
        high_watermark: i64,
        mut predicate: impl FnMut(&LogSegment, Option<&LogSegment>) -> Result<bool, StorageError>,
    ) -> Result<SegmentDeletion, StorageError> {
        let mut deletable = Vec::new();
        let mut roll = false;
        let mut segments = self.segments.values().peekable();
        while let Some(segment) = segments.next() {
            let next = segments.peek().copied();
            let last_and_empty = next.is_none() && segment.size() == 0;
            let upper_bound = next.map_or(self.log_end_offset, LogSegment::base_offset);
            if last_and_empty || high_watermark < upper_bound || !predicate(segment, next)? {
                break;
            }
            roll |= next.is_none();
            deletable.push(segment.base_offset());
        }
        let mut deletion = SegmentDeletion {
            fs: Some(self.fs.clone()),
            ..SegmentDeletion::default()
        };
        if deletable.is_empty() {
            return Ok(deletion);
        }
        // Recovery replays producer state from the newest durable snapshot;
        // the segments a deferred one replaces must outlive it.
        self.write_deferred_snapshot()?;
        if roll {
            tracing::info!(dir = %self.dir.display(), "rolling the active segment to make it eligible for deletion");
            self.roll()?;
        }
        let mut failed = None;
        for base in deletable {
            let Some(segment) = self.segments.remove(&base) else {
                continue;
            };
            deletion.base_offsets.push(base);
            deletion.bytes += segment.size();
            self.dir_dirty = true;
            match segment.rename_to_deleted() {
                Ok(files) => deletion.files.extend(files),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(&first) = self.segments.keys().next() {
            if first > self.log_start_offset {
                self.update_log_start_offset(first)?;
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        tracing::info!(dir = %self.dir.display(), segments = ?deletion.base_offsets,
            log_start_offset = self.log_start_offset, "deleted old log segments");
        Ok(deletion)
    }
}

#[cfg(test)]
mod tests;
