//! Where an offset lies in the log's files (Kafka's `LogOffsetMetadata`):
//! the message offset and, when known, the base offset of its segment and
//! the byte position in that segment where the batch holding it begins.
//!
//! A fetch parked in the broker's `DelayedFetch` remembers its fetch
//! offset's position from its first read and, on each wake-up, compares it
//! with the position of the partition's end (the high watermark for
//! consumers, the log end offset for followers): the bytes between two
//! positions of one segment are what a read would return, found without
//! reading the log. [`Log::log_end_offset_metadata`] is always known;
//! [`Log::cached_offset_metadata`] knows the recent batch ends of the active
//! segment (no file read); [`Log::convert_to_offset_metadata`] finds any
//! offset through the offset index and the batch headers after it (Kafka's
//! `UnifiedLog.convertToOffsetMetadataOrThrow`).

use super::Log;
use crate::error::StorageError;

/// A segment and a byte position in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentPosition {
    /// The segment's base offset.
    pub base_offset: i64,
    /// Bytes from the start of the segment's `.log` file.
    pub relative_position: u32,
}

/// An offset and, when known, where its batch begins (Kafka's
/// `LogOffsetMetadata`; `segment: None` is Kafka's
/// `messageOffsetOnly()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogOffsetMetadata {
    /// The offset.
    pub message_offset: i64,
    /// The segment and byte position of the batch holding
    /// `message_offset` (for the log end offset: the active segment and its
    /// size); `None` when only the offset is known.
    pub segment: Option<SegmentPosition>,
}

impl LogOffsetMetadata {
    /// Only the offset is known.
    pub fn message_offset_only(message_offset: i64) -> Self {
        LogOffsetMetadata {
            message_offset,
            segment: None,
        }
    }

    /// `message_offset` at `relative_position` bytes into the segment
    /// `base_offset`.
    pub fn new(message_offset: i64, base_offset: i64, relative_position: u32) -> Self {
        LogOffsetMetadata {
            message_offset,
            segment: Some(SegmentPosition {
                base_offset,
                relative_position,
            }),
        }
    }

    /// Whether this offset lies on a segment older than `that`'s (Kafka's
    /// `onOlderSegment`); false when either position is unknown.
    pub fn on_older_segment(&self, that: &LogOffsetMetadata) -> bool {
        match (self.segment, that.segment) {
            (Some(a), Some(b)) => a.base_offset < b.base_offset,
            _ => false,
        }
    }

    /// Whether both offsets lie on the same segment (Kafka's
    /// `onSameSegment`); false when either position is unknown.
    pub fn on_same_segment(&self, that: &LogOffsetMetadata) -> bool {
        match (self.segment, that.segment) {
            (Some(a), Some(b)) => a.base_offset == b.base_offset,
            _ => false,
        }
    }

    /// Bytes from `that` to this position (Kafka's `positionDiff`,
    /// `this - that`); `None` unless both lie on the same segment.
    pub fn position_diff(&self, that: &LogOffsetMetadata) -> Option<i64> {
        match (self.segment, that.segment) {
            (Some(a), Some(b)) if a.base_offset == b.base_offset => {
                Some(i64::from(a.relative_position) - i64::from(b.relative_position))
            }
            _ => None,
        }
    }
}

impl Log {
    /// The log end offset with the active segment and its size (Kafka's
    /// `LocalLog.logEndOffsetMetadata`); offset only once the log is
    /// deleted.
    pub fn log_end_offset_metadata(&self) -> LogOffsetMetadata {
        match self.segments.last_key_value() {
            Some((&base, segment)) if !self.deleted => {
                // Positions fit: segment.bytes is capped below 2 GiB.
                LogOffsetMetadata::new(self.log_end_offset, base, segment.size() as u32)
            }
            _ => LogOffsetMetadata::message_offset_only(self.log_end_offset),
        }
    }

    /// Where `offset` lies when that is known without reading a file: the
    /// log end offset, a segment's base offset, or the end of one of the
    /// last batches appended to the active segment by this process
    /// ([`crate::segment::LogSegment`] remembers a few); otherwise offset
    /// only.
    pub fn cached_offset_metadata(&self, offset: i64) -> LogOffsetMetadata {
        if offset == self.log_end_offset {
            return self.log_end_offset_metadata();
        }
        if self.deleted || offset < self.log_start_offset || offset > self.log_end_offset {
            return LogOffsetMetadata::message_offset_only(offset);
        }
        match self.segments.range(..=offset).next_back() {
            Some((&base, segment)) => match segment.cached_position_of(offset) {
                Some(position) => LogOffsetMetadata::new(offset, base, position),
                None => LogOffsetMetadata::message_offset_only(offset),
            },
            None => LogOffsetMetadata::message_offset_only(offset),
        }
    }

    /// Where `offset` lies (Kafka's `convertToOffsetMetadataOrThrow`): as
    /// [`Log::cached_offset_metadata`], else the batch holding it found
    /// through its segment's offset index and the batch headers after the
    /// indexed position (a read of at most `index.interval.bytes` of
    /// headers). An offset past every batch of the log below the log end
    /// offset (a gap a compacted leader left) lies at the log end.
    ///
    /// # Errors
    /// [`StorageError::OffsetOutOfRange`] outside `[log start offset, log
    /// end offset]`; [`StorageError::Io`] if the headers cannot be read.
    pub fn convert_to_offset_metadata(
        &self,
        offset: i64,
    ) -> Result<LogOffsetMetadata, StorageError> {
        if offset < self.log_start_offset || offset > self.log_end_offset {
            return Err(StorageError::OffsetOutOfRange {
                requested: offset,
                log_start: self.log_start_offset,
                log_end: self.log_end_offset,
            });
        }
        let cached = self.cached_offset_metadata(offset);
        if cached.segment.is_some() || self.deleted {
            return Ok(cached);
        }
        let floor = self
            .segments
            .range(..=offset)
            .next_back()
            .map_or(self.log_start_offset, |(b, _)| *b);
        for (&base, segment) in self.segments.range(floor..) {
            if let Some(region) = segment.batch_containing(offset)? {
                return Ok(LogOffsetMetadata::new(offset, base, region.position as u32));
            }
        }
        Ok(self.log_end_offset_metadata())
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::testutil::simple_batch;
    use crate::{LogConfig, TopicPartition};

    /// A log whose offset index has an entry every 100 bytes.
    fn open_log(dir: &std::path::Path) -> Log {
        let config = LogConfig {
            index_interval_bytes: 100,
            ..LogConfig::default()
        };
        Log::open(dir.to_path_buf(), TopicPartition::new("t", 0), config, 0, 0).unwrap()
    }

    /// One batch of one record with a `value_len`-byte value.
    fn batch(value_len: usize) -> Bytes {
        Bytes::from(simple_batch(1, value_len, 1_000))
    }

    /// Kafka's `LogOffsetMetadata` comparisons, row by row.
    #[test]
    fn comparisons_follow_kafka() {
        let only = LogOffsetMetadata::message_offset_only;
        let at = LogOffsetMetadata::new;
        // (this, that, on_older_segment, on_same_segment, position_diff)
        let rows = [
            (at(5, 0, 100), at(9, 0, 300), false, true, Some(-200)),
            (at(9, 0, 300), at(5, 0, 100), false, true, Some(200)),
            (at(5, 0, 100), at(12, 10, 40), true, false, None),
            (at(12, 10, 40), at(5, 0, 100), false, false, None),
            (only(5), at(9, 0, 300), false, false, None),
            (at(5, 0, 100), only(9), false, false, None),
            (only(5), only(9), false, false, None),
        ];
        for (this, that, older, same, diff) in rows {
            assert_eq!(this.on_older_segment(&that), older, "{this:?} {that:?}");
            assert_eq!(this.on_same_segment(&that), same, "{this:?} {that:?}");
            assert_eq!(this.position_diff(&that), diff, "{this:?} {that:?}");
        }
    }

    /// The log end, segment bases and recent batch ends are known without a
    /// read, and agree with what a read and the conversion find; the
    /// conversion finds the rest through the index and the headers.
    #[test]
    fn positions_agree_with_reads() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open_log(dir.path());
        for i in 0..100 {
            log.append_as_leader(&batch(10 + i % 7), 0, 0).unwrap();
        }
        let size = log.log_end_offset_metadata();
        assert_eq!(size.message_offset, 100);
        let end = size.segment.unwrap();
        assert_eq!(end.base_offset, 0);
        assert_eq!(u64::from(end.relative_position), log.size_in_bytes());
        let mut cached = 0;
        for offset in 0..=100 {
            let converted = log.convert_to_offset_metadata(offset).unwrap();
            let read = log.read(offset, usize::MAX, 100, true).unwrap();
            assert_eq!(converted, read.fetch_offset_metadata, "offset {offset}");
            if let Some(records) = &read.records {
                assert_eq!(
                    u64::from(converted.segment.unwrap().relative_position),
                    records.position(),
                    "offset {offset}"
                );
            }
            let quick = log.cached_offset_metadata(offset);
            if quick.segment.is_some() {
                assert_eq!(quick, converted, "offset {offset}");
                cached += 1;
            }
        }
        // The base, the last RECENT_BATCH_ENDS batch ends (the log end among
        // them), nothing older.
        assert_eq!(cached, 1 + crate::segment::RECENT_BATCH_ENDS);
        assert!(matches!(
            log.convert_to_offset_metadata(101),
            Err(StorageError::OffsetOutOfRange { .. })
        ));
    }

    /// One append of more batches than the segment remembers: the last
    /// ones' ends are known, at the right positions.
    #[test]
    fn a_many_batch_append_remembers_its_last_batches() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open_log(dir.path());
        log.append_as_leader(&batch(5), 0, 0).unwrap();
        let mut records = Vec::new();
        for i in 0..40 {
            records.extend_from_slice(&batch(10 + i % 9));
        }
        log.append_as_leader(&Bytes::from(records), 0, 0).unwrap();
        assert_eq!(log.log_end_offset(), 41);
        let mut cached = 0;
        for offset in 0..=41 {
            let quick = log.cached_offset_metadata(offset);
            if quick.segment.is_some() {
                // A read finds the position through the index, not the
                // remembered ends.
                let read = log.read(offset, 1, 41, true).unwrap();
                assert_eq!(quick, read.fetch_offset_metadata, "offset {offset}");
                cached += 1;
            }
        }
        assert_eq!(cached, 1 + crate::segment::RECENT_BATCH_ENDS);
        assert!(log.cached_offset_metadata(41 - 32).segment.is_none());
    }

    /// After a roll the new segment's base is known; a truncation forgets
    /// the batch ends it removed.
    #[test]
    fn rolls_and_truncations_keep_positions_true() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open_log(dir.path());
        for i in 0..5 {
            log.append_as_leader(&batch(10 + i), 0, 0).unwrap();
        }
        log.roll().unwrap();
        let rolled = log.cached_offset_metadata(5);
        assert_eq!(rolled, LogOffsetMetadata::new(5, 5, 0));
        assert_eq!(log.log_end_offset_metadata(), rolled);
        for i in 0..5 {
            log.append_as_leader(&batch(20 + i), 0, 0).unwrap();
        }
        assert!(log.cached_offset_metadata(8).segment.is_some());
        log.truncate_to(7).unwrap();
        assert_eq!(log.log_end_offset(), 7);
        assert_eq!(log.cached_offset_metadata(8).segment, None);
        assert_eq!(
            log.convert_to_offset_metadata(7).unwrap(),
            log.log_end_offset_metadata()
        );
        log.append_as_leader(&batch(100), 0, 0).unwrap();
        let end = log.log_end_offset_metadata();
        assert_eq!(log.cached_offset_metadata(8), end);
        assert_eq!(log.convert_to_offset_metadata(8).unwrap(), end);
    }
}
