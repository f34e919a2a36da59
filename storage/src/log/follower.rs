//! What a follower replica does to its log (issue 16, DESIGN.md §6):
//! [`Log::append_as_follower`] appends the leader's batches byte for byte,
//! [`Log::truncate_to`] cuts a diverged tail (KIP-101, KIP-279) and
//! [`Log::truncate_fully_and_start_at`] restarts the log at the leader's log
//! start offset. Kafka's `UnifiedLog.appendAsFollower`, `truncateTo` and
//! `truncateFullyAndStartAt`, over `LocalLog` and `LogSegment.truncateTo`.
//!
//! Crash safety of truncation: every file change is made durable before the
//! call returns (later segments removed and the partition directory synced,
//! then the kept active segment cut and fdatasynced with its indexes, the
//! leader epoch checkpoint replaced atomically, producer snapshots past the
//! new end removed and the directory synced again), so a restart never brings
//! a truncated record back; a crash part way leaves a prefix of the old log.
//! The recovery point and log start offset checkpoints belong to the
//! [`LogManager`](crate::LogManager): its `truncate_to` and
//! `truncate_fully_and_start_at` write them right after the truncation, as
//! Kafka's `LogManager.truncateTo` does, so that a recovery after later
//! appends starts at or below the new end.

use bytes::Bytes;

use std::sync::atomic::Ordering;

use crate::batch::RecordBatchHeader;
use crate::checkpoint;
use crate::error::StorageError;
use crate::producer_state;
use crate::segment::AppendedBatch;

use super::{deleted_error, Log, LogAppendInfo};

impl Log {
    /// Appends batches fetched from the leader (Kafka's
    /// `UnifiedLog.appendAsFollower`): `records` is zero or more concatenated
    /// v2 batches, written byte for byte (offsets, timestamps, leader epochs
    /// and CRCs as the leader wrote them). Empty `records` append nothing.
    ///
    /// Each batch is checked as Kafka's follower does
    /// ([`RecordBatchHeader::validate_replicated`]: magic 2, length, CRC-32C;
    /// `max.message.bytes` does not apply to a follower) and must start
    /// after the previous batch's last offset; the first batch must start at
    /// or after the log end offset. A batch may start past the log end
    /// offset: a compacted leader's log has gaps. If any batch is refused
    /// nothing is appended.
    ///
    /// Then, as Kafka's `UnifiedLog.append` with `validateAndAssignOffsets`
    /// false: the leader epoch cache gets `assign(partition_leader_epoch,
    /// base_offset)` for every batch (a no-op unless the epoch is new); the
    /// log rolls as for a leader append (`segment.bytes`, `segment.ms`,
    /// full indexes), the new segment starting at the first batch's base
    /// offset; the producer state takes every idempotent batch without
    /// sequence checks (a follower keeps what the leader wrote). The log end
    /// offset becomes the last batch's last offset + 1; `flush.messages`
    /// counts the new offsets ([`Log::flush_messages_due`]).
    ///
    /// # Errors
    /// [`StorageError::CorruptRecord`] / [`StorageError::InvalidRecord`] for
    /// a batch that fails validation;
    /// [`StorageError::UnexpectedAppendOffset`] when the first batch starts
    /// below the log end offset; [`StorageError::OffsetsOutOfOrder`] when a
    /// batch does not start after the previous one;
    /// [`StorageError::RecordBatchTooLarge`] when the batches exceed
    /// `segment.bytes`; [`StorageError::OffsetOverflow`] when their offsets
    /// span more than 2^31; [`StorageError::LogDeleted`] once the log is
    /// deleted; [`StorageError::Io`] if a write fails (the log is left as it
    /// was).
    pub fn append_as_follower(&mut self, records: &Bytes) -> Result<LogAppendInfo, StorageError> {
        self.append_as_follower_in_epoch(records, i32::MAX)
    }

    /// [`Log::append_as_follower`] for a replica fetching in leader epoch
    /// `leader_epoch` (Kafka 4.1's `appendAsFollower(records, leaderEpoch)`,
    /// KAFKA-18723): the first batch stamped with a larger partition leader
    /// epoch, and every batch after it, is skipped (a response of a leader
    /// that has lost its leadership since). Returns an info with
    /// `batch_count == 0` when every batch is skipped.
    ///
    /// # Errors
    /// As [`Log::append_as_follower`], for the batches not skipped.
    pub fn append_as_follower_in_epoch(
        &mut self,
        records: &Bytes,
        leader_epoch: i32,
    ) -> Result<LogAppendInfo, StorageError> {
        if self.deleted {
            return Err(deleted_error(&self.topic_partition));
        }
        let mut headers: Vec<RecordBatchHeader> = Vec::new();
        let mut appended: Vec<AppendedBatch> = Vec::new();
        let mut info = LogAppendInfo {
            first_offset: self.log_end_offset,
            last_offset: self.log_end_offset - 1,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            log_append_time: -1,
            valid_bytes: 0,
            batch_count: 0,
            record_count: 0,
            duplicate: false,
        };
        let mut position = 0usize;
        while position < records.len() {
            let header = RecordBatchHeader::validate_replicated(&records[position..])?;
            if header.partition_leader_epoch > leader_epoch {
                tracing::info!(dir = %self.dir.display(), base_offset = header.base_offset,
                    batch_epoch = header.partition_leader_epoch, leader_epoch,
                    "skipping batches of a higher leader epoch than the fetch's");
                break;
            }
            match headers.last() {
                None => info.first_offset = header.base_offset,
                Some(previous) if header.base_offset <= previous.last_offset() => {
                    return Err(StorageError::OffsetsOutOfOrder {
                        base_offset: header.base_offset,
                        previous_last_offset: previous.last_offset(),
                    })
                }
                Some(_) => {}
            }
            if header.max_timestamp > info.max_timestamp {
                info.max_timestamp = header.max_timestamp;
                info.offset_of_max_timestamp = header.last_offset();
            }
            let size = header.size_in_bytes();
            appended.push(AppendedBatch {
                last_offset: header.last_offset(),
                max_timestamp: header.max_timestamp,
                size: size as u32,
            });
            info.record_count += header.records_count.max(0) as usize;
            info.last_offset = header.last_offset();
            headers.push(header);
            position += size;
        }
        if headers.is_empty() {
            return Ok(info);
        }
        info.valid_bytes = position;
        info.batch_count = headers.len();
        if info.first_offset < self.log_end_offset {
            return Err(StorageError::UnexpectedAppendOffset {
                first_offset: info.first_offset,
                last_offset: info.last_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        self.make_room_for(&info, crate::segment::wall_clock_ms())?;
        // Epochs are assigned before the write, as Kafka's `UnifiedLog.append`
        // does, and put back if the write fails.
        let epochs_before = self.leader_epoch_cache.entries().to_vec();
        for header in &headers {
            if let Err(e) = self
                .leader_epoch_cache
                .assign(header.partition_leader_epoch, header.base_offset)
            {
                let _ = self.leader_epoch_cache.restore(epochs_before);
                return Err(e);
            }
        }
        let mut iov = [std::io::IoSlice::new(&records[..position])];
        if let Err(e) = self.active_segment()?.append(&mut iov, position, &appended) {
            // Best effort, as for a leader append: an entry left in the file
            // past the log end offset is dropped by the next open.
            let _ = self.leader_epoch_cache.restore(epochs_before);
            return Err(e);
        }
        self.log_end_offset = info.last_offset + 1;
        for header in &headers {
            self.producer_state.load_batch(header);
        }
        self.count_append(position as u64, info.record_count);
        Ok(info)
    }

    /// Removes every record at offset `>= target_offset` (Kafka's
    /// `UnifiedLog.truncateTo`). Returns whether anything was removed.
    ///
    /// * `target_offset >= log end offset`: nothing is removed and `false`
    ///   is returned, but leader epoch entries starting at or past the log
    ///   end offset are dropped (an epoch this broker assigned as leader
    ///   without appending; Kafka does the same).
    /// * `target_offset` below the first segment's base offset:
    ///   [`Log::truncate_fully_and_start_at`]`(target_offset)`.
    /// * Otherwise segments whose base offset is `> target_offset` are
    ///   deleted, and the last remaining one is cut at the first batch whose
    ///   last offset is `>= target_offset` (Kafka's `LogSegment.truncateTo`
    ///   through `translateOffset`): a batch is never split, so a target
    ///   inside a batch removes that whole batch. The log then ends after
    ///   its last remaining batch (at the emptied segment's base offset when
    ///   none remains in it), which is `target_offset` unless a batch
    ///   straddled it or the leader's log had a gap there. Kafka's
    ///   `LocalLog.truncateTo` reports `target_offset` as the log end offset
    ///   even then; Weir keeps the end its files give, which is also what
    ///   Kafka recovers after a restart. The leader epoch cache is truncated
    ///   from that end (`truncateFromEnd`), the producer state is rebuilt
    ///   from the newest snapshot at or below it and the batches after
    ///   (`rebuildProducerState`; snapshots past it are deleted), and the
    ///   recovery point and log start offset are lowered to it when above.
    ///
    /// Every change is durable when this returns (see the module docs); the
    /// caller then checkpoints the recovery point and log start offset
    /// ([`LogManager::truncate_to`](crate::LogManager::truncate_to) does).
    ///
    /// # Errors
    /// [`StorageError::OffsetOutOfRange`] for a negative `target_offset`
    /// (Kafka throws `IllegalArgumentException`);
    /// [`StorageError::LogDeleted`] once the log is deleted;
    /// [`StorageError::Io`] if a file cannot be removed, cut or synced.
    pub fn truncate_to(&mut self, target_offset: i64) -> Result<bool, StorageError> {
        self.check_truncation_offset(target_offset)?;
        if target_offset >= self.log_end_offset {
            self.leader_epoch_cache
                .truncate_from_end(self.log_end_offset)?;
            return Ok(false);
        }
        let first_base = self.segments.keys().next().copied().unwrap_or(0);
        if first_base > target_offset {
            self.truncate_fully_and_start_at(target_offset)?;
            return Ok(true);
        }
        tracing::info!(dir = %self.dir.display(), target_offset,
            log_end_offset = self.log_end_offset, "truncating log");
        self.forget_flush_in_flight();
        // The highest segments go first, so that a crash part way leaves a
        // prefix of the log.
        let doomed: Vec<i64> = self
            .segments
            .range(target_offset + 1..)
            .map(|(base, _)| *base)
            .rev()
            .collect();
        for base in &doomed {
            if let Some(segment) = self.segments.get(base) {
                segment.delete_files()?;
            }
            self.segments.remove(base);
        }
        if !doomed.is_empty() {
            checkpoint::sync_dir(&*self.fs, &self.dir)?;
        }
        let active = self.active_segment()?;
        let new_end = active.truncate_to(target_offset)?;
        active.sync()?;
        self.log_end_offset = new_end;
        self.recovery_point = self.recovery_point.min(new_end);
        self.log_start_offset = self.log_start_offset.min(new_end);
        self.leader_epoch_cache.truncate_from_end(new_end)?;
        self.rebuild_producer_state()?;
        checkpoint::sync_dir(&*self.fs, &self.dir)?;
        Ok(true)
    }

    /// Deletes every segment and restarts the log empty at `new_offset`
    /// (Kafka's `UnifiedLog.truncateFullyAndStartAt`: a follower whose fetch
    /// offset is below the leader's log start offset, or whose truncation
    /// target is below its first segment). The log start offset, log end
    /// offset and recovery point become `new_offset`; the leader epoch cache
    /// and the producer state (with every snapshot) are cleared. Segments
    /// are removed highest first, then the new segment is created and the
    /// partition directory synced, before this returns. The caller
    /// checkpoints the log start offset and recovery point
    /// ([`LogManager::truncate_fully_and_start_at`](crate::LogManager::truncate_fully_and_start_at)
    /// does).
    ///
    /// # Errors
    /// [`StorageError::OffsetOutOfRange`] for a negative `new_offset`;
    /// [`StorageError::LogDeleted`] once the log is deleted;
    /// [`StorageError::Io`] if a file cannot be removed or created.
    pub fn truncate_fully_and_start_at(&mut self, new_offset: i64) -> Result<(), StorageError> {
        self.check_truncation_offset(new_offset)?;
        tracing::info!(dir = %self.dir.display(), new_offset, "truncating the whole log");
        self.forget_flush_in_flight();
        while let Some((&base, segment)) = self.segments.iter().next_back() {
            segment.delete_files()?;
            self.segments.remove(&base);
        }
        for (_, path) in producer_state::list_snapshots(&self.dir)? {
            producer_state::delete_snapshot(&*self.fs, &path)?;
        }
        self.producer_state.clear();
        self.leader_epoch_cache.truncate_from_end(i64::MIN)?;
        self.create_segment(new_offset)?;
        checkpoint::sync_dir(&*self.fs, &self.dir)?;
        self.log_start_offset = new_offset;
        self.log_end_offset = new_offset;
        self.recovery_point = new_offset;
        Ok(())
    }

    /// The leader epoch of the last record in the log (Kafka's follower sends
    /// `log.latestEpoch` as the Fetch request's `LastFetchedEpoch`, KIP-595;
    /// this is the same value once the follower's log has been truncated,
    /// [`Log::truncate_to`] drops epochs that start at the log end): the
    /// epoch cache's entry covering `log end offset - 1`. `None` for an
    /// empty log or one without epochs.
    pub fn last_fetched_epoch(&self) -> Option<i32> {
        if self.log_end_offset <= self.log_start_offset {
            return None;
        }
        self.leader_epoch_cache
            .epoch_for_offset(self.log_end_offset - 1)
    }

    /// A flush prepared before a truncation must not advance the recovery
    /// point when it completes: the offsets it covered are gone, and
    /// batches appended since at the same offsets were not synced by it.
    /// Marking it failed makes [`Log::complete_flush`] a no-op and the next
    /// [`Log::prepare_flush`] collect everything past the recovery point.
    fn forget_flush_in_flight(&mut self) {
        self.flush_failed.store(true, Ordering::Release);
        // Nor may it write the producer snapshot a roll deferred.
        self.invalidate_deferred_snapshot();
    }

    /// The base offset of the active (last) segment.
    pub fn active_segment_base_offset(&self) -> i64 {
        self.segments
            .keys()
            .next_back()
            .copied()
            .unwrap_or(self.log_end_offset)
    }

    /// A truncation needs a live log and an offset `>= 0`.
    fn check_truncation_offset(&self, offset: i64) -> Result<(), StorageError> {
        if self.deleted {
            return Err(deleted_error(&self.topic_partition));
        }
        if offset < 0 {
            return Err(StorageError::OffsetOutOfRange {
                requested: offset,
                log_start: self.log_start_offset,
                log_end: self.log_end_offset,
            });
        }
        Ok(())
    }
}
