//! The v2 record batch header (magic 2) as laid out on the wire and on disk,
//! and the validation a leader applies to produced batches before they are
//! appended. The layout follows Kafka's `DefaultRecordBatch`:
//!
//! ```text
//! offset  size  field
//!      0     8  base_offset             (i64, stamped by the leader)
//!      8     4  batch_length            (i32, bytes after this field)
//!     12     4  partition_leader_epoch  (i32, stamped by the leader)
//!     16     1  magic                   (i8, always 2)
//!     17     4  crc                     (u32, CRC-32C of bytes 21..end)
//!     21     2  attributes              (i16)
//!     23     4  last_offset_delta       (i32)
//!     27     8  base_timestamp          (i64, ms)
//!     35     8  max_timestamp           (i64, ms)
//!     43     8  producer_id             (i64)
//!     51     2  producer_epoch          (i16)
//!     53     4  base_sequence           (i32)
//!     57     4  records_count           (i32)
//!     61     -  records
//! ```
//!
//! This module only looks at headers; records are never decoded here (the
//! broker decodes them where the protocol needs it). It must not depend on
//! `kafka-protocol`.

use crate::error::StorageError;
use crate::log::TimestampType;

/// Size of the v2 batch header in bytes (`DefaultRecordBatch.RECORD_BATCH_OVERHEAD`).
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// Bytes before the `batch_length` value ends: base offset (8) + length (4).
pub const LOG_OVERHEAD: usize = 12;
/// The only magic value this crate stores.
pub const MAGIC_V2: i8 = 2;
/// Byte offset of the `base_offset` field.
pub(crate) const BASE_OFFSET_OFFSET: usize = 0;
/// Byte offset of the `partition_leader_epoch` field.
pub(crate) const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
/// Byte offset of the `crc` field.
pub(crate) const CRC_OFFSET: usize = 17;
/// Byte offset of the `attributes` field, where the CRC coverage starts.
pub(crate) const ATTRIBUTES_OFFSET: usize = 21;
/// Byte offset of the `max_timestamp` field.
pub(crate) const MAX_TIMESTAMP_OFFSET: usize = 35;
/// Attributes bit 3: the batch's timestamps are LogAppendTime.
const TIMESTAMP_TYPE_MASK: i16 = 0x08;
const TRANSACTIONAL_MASK: i16 = 0x10;
const CONTROL_MASK: i16 = 0x20;
const COMPRESSION_CODEC_MASK: i16 = 0x07;

/// A parsed v2 record batch header (all 61 bytes).
///
/// Source: Kafka protocol docs, "Record Batch"; `DefaultRecordBatch.java`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordBatchHeader {
    /// Offset of the first record in the batch.
    pub base_offset: i64,
    /// Length in bytes of everything after this field (header rest + records).
    pub batch_length: i32,
    /// Leader epoch of the leader that appended the batch (KIP-101), -1 if none.
    pub partition_leader_epoch: i32,
    /// Format version; 2 for every batch this crate stores.
    pub magic: i8,
    /// CRC-32C of bytes 21..end (attributes to the last record).
    pub crc: u32,
    /// Compression (bits 0-2), timestamp type (bit 3), transactional (bit 4),
    /// control (bit 5), delete horizon (bit 6).
    pub attributes: i16,
    /// `last_offset - base_offset`.
    pub last_offset_delta: i32,
    /// Timestamp (ms) of the first record.
    pub base_timestamp: i64,
    /// Largest record timestamp (ms) in the batch, or the log append time.
    pub max_timestamp: i64,
    /// Idempotent producer id (-1 if none).
    pub producer_id: i64,
    /// Idempotent producer epoch (-1 if none).
    pub producer_epoch: i16,
    /// Sequence number of the first record (-1 if none).
    pub base_sequence: i32,
    /// Number of records in the batch.
    pub records_count: i32,
}

fn be_i64(buf: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    i64::from_be_bytes(b)
}

fn be_i32(buf: &[u8], at: usize) -> i32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    i32::from_be_bytes(b)
}

fn be_i16(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([buf[at], buf[at + 1]])
}

impl RecordBatchHeader {
    /// Parses the first 61 bytes of `buf` as a v2 batch header. Only the
    /// header's own shape is checked here (magic 2, a batch length of at least
    /// the header size); see [`RecordBatchHeader::validate`] for the full check
    /// of a batch.
    ///
    /// # Errors
    /// [`StorageError::CorruptRecord`] if `buf` is shorter than 61 bytes, the
    /// magic is not 2 or `batch_length` is smaller than the header.
    pub fn parse(buf: &[u8]) -> Result<Self, StorageError> {
        if buf.len() < RECORD_BATCH_OVERHEAD {
            return Err(StorageError::corrupt(format!(
                "batch header needs {RECORD_BATCH_OVERHEAD} bytes, got {}",
                buf.len()
            )));
        }
        let header = Self::parse_unchecked(buf);
        if header.magic != MAGIC_V2 {
            return Err(StorageError::corrupt(format!(
                "magic {} at base offset {} (only magic 2 is supported)",
                header.magic, header.base_offset
            )));
        }
        if (header.batch_length as i64) < (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i64 {
            return Err(StorageError::corrupt(format!(
                "batch length {} is smaller than the header ({} bytes)",
                header.batch_length,
                RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
            )));
        }
        Ok(header)
    }

    /// Reads the fields without checking them; `buf` must hold 61 bytes.
    fn parse_unchecked(buf: &[u8]) -> Self {
        RecordBatchHeader {
            base_offset: be_i64(buf, 0),
            batch_length: be_i32(buf, 8),
            partition_leader_epoch: be_i32(buf, 12),
            magic: buf[16] as i8,
            crc: be_i32(buf, 17) as u32,
            attributes: be_i16(buf, 21),
            last_offset_delta: be_i32(buf, 23),
            base_timestamp: be_i64(buf, 27),
            max_timestamp: be_i64(buf, 35),
            producer_id: be_i64(buf, 43),
            producer_epoch: be_i16(buf, 51),
            base_sequence: be_i32(buf, 53),
            records_count: be_i32(buf, 57),
        }
    }

    /// Parses the header at the start of `buf` and checks the whole batch as
    /// Kafka's leader does before appending (`LogValidator`,
    /// `DefaultRecordBatch.ensureValid`): the batch fits in `buf`, its
    /// CRC-32C matches, `last_offset_delta >= 0` and `records_count ==
    /// last_offset_delta + 1`.
    ///
    /// # Errors
    /// [`StorageError::CorruptRecord`] for a short buffer, wrong magic, bad
    /// length or CRC mismatch; [`StorageError::InvalidRecord`] for an
    /// inconsistent offset range or record count.
    pub fn validate(buf: &[u8]) -> Result<Self, StorageError> {
        let header = Self::parse(buf)?;
        let size = header.size_in_bytes();
        if size > buf.len() {
            return Err(StorageError::corrupt(format!(
                "batch of {size} bytes at base offset {} runs past the {} available bytes",
                header.base_offset,
                buf.len()
            )));
        }
        if !header.crc_is_valid(&buf[..size]) {
            return Err(StorageError::corrupt(format!(
                "CRC mismatch: stored {:#010x}, computed {:#010x}",
                header.crc,
                crc32c::crc32c(&buf[ATTRIBUTES_OFFSET..size])
            )));
        }
        if header.last_offset_delta < 0 {
            return Err(StorageError::InvalidRecord {
                reason: format!("negative last offset delta {}", header.last_offset_delta),
            });
        }
        if header.records_count as i64 != header.last_offset_delta as i64 + 1 {
            return Err(StorageError::InvalidRecord {
                reason: format!(
                    "record count {} does not match last offset delta {}",
                    header.records_count, header.last_offset_delta
                ),
            });
        }
        Ok(header)
    }

    /// Offset of the last record: `base_offset + last_offset_delta`.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }

    /// The offset after the batch: `last_offset() + 1`.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    /// Total size of the batch in bytes: `batch_length + 12`.
    pub fn size_in_bytes(&self) -> usize {
        // parse() guarantees batch_length >= 49, so the cast is lossless.
        self.batch_length.max(0) as usize + LOG_OVERHEAD
    }

    /// Compression codec id (attributes bits 0-2): 0 none, 1 gzip, 2 snappy,
    /// 3 lz4, 4 zstd.
    pub fn compression_codec(&self) -> u8 {
        (self.attributes & COMPRESSION_CODEC_MASK) as u8
    }

    /// Timestamp type from attributes bit 3.
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_MASK != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Attributes bit 4: the batch belongs to a transaction (KIP-98).
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_MASK != 0
    }

    /// Attributes bit 5: the batch holds a control record (transaction marker).
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_MASK != 0
    }

    /// Whether the stored CRC equals the CRC-32C of `batch_bytes[21..]`.
    /// `batch_bytes` is the whole batch (header included); a slice shorter
    /// than the header yields `false`.
    pub fn crc_is_valid(&self, batch_bytes: &[u8]) -> bool {
        batch_bytes.len() >= RECORD_BATCH_OVERHEAD
            && crc32c::crc32c(&batch_bytes[ATTRIBUTES_OFFSET..]) == self.crc
    }
}

/// Sets the LogAppendTime attribute bit in a raw header.
pub(crate) fn set_log_append_time(header: &mut [u8; RECORD_BATCH_OVERHEAD], now_ms: i64) {
    let attributes = be_i16(header, ATTRIBUTES_OFFSET) | TIMESTAMP_TYPE_MASK;
    header[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    header[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8].copy_from_slice(&now_ms.to_be_bytes());
}

/// Recomputes the CRC of a batch whose header (possibly edited) is `header`
/// and whose remaining bytes are `rest`, and stores it in `header`.
pub(crate) fn restamp_crc(header: &mut [u8; RECORD_BATCH_OVERHEAD], rest: &[u8]) {
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header[ATTRIBUTES_OFFSET..]), rest);
    header[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Writes the leader-assigned base offset and partition leader epoch into a
/// raw header. Neither is covered by the CRC.
pub(crate) fn stamp_offset_and_epoch(
    header: &mut [u8; RECORD_BATCH_OVERHEAD],
    base_offset: i64,
    leader_epoch: i32,
) {
    header[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
    header[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
        .copy_from_slice(&leader_epoch.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{build_batch, BatchSpec};

    #[test]
    fn parses_every_header_field() {
        let spec = BatchSpec {
            base_offset: 42,
            partition_leader_epoch: 7,
            producer_id: 1234,
            producer_epoch: 3,
            base_sequence: 9,
            attributes: 0x10,
            ..BatchSpec::new(&[1000, 1005, 1003], 10)
        };
        let bytes = build_batch(&spec);
        let h = RecordBatchHeader::validate(&bytes).unwrap();
        assert_eq!(h.base_offset, 42);
        assert_eq!(h.size_in_bytes(), bytes.len());
        assert_eq!(h.partition_leader_epoch, 7);
        assert_eq!(h.magic, 2);
        assert_eq!(h.attributes, 0x10);
        assert!(h.is_transactional());
        assert!(!h.is_control());
        assert_eq!(h.compression_codec(), 0);
        assert_eq!(h.timestamp_type(), TimestampType::CreateTime);
        assert_eq!(h.last_offset_delta, 2);
        assert_eq!(h.last_offset(), 44);
        assert_eq!(h.base_timestamp, 1000);
        assert_eq!(h.max_timestamp, 1005);
        assert_eq!(h.producer_id, 1234);
        assert_eq!(h.producer_epoch, 3);
        assert_eq!(h.base_sequence, 9);
        assert_eq!(h.records_count, 3);
        assert!(h.crc_is_valid(&bytes));
    }

    #[test]
    fn crc_mismatch_is_corrupt() {
        let mut bytes = build_batch(&BatchSpec::new(&[1, 2], 4));
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        let err = RecordBatchHeader::validate(&bytes).unwrap_err();
        assert!(
            matches!(err, StorageError::CorruptRecord { ref reason } if reason.contains("CRC")),
            "{err}"
        );
    }

    #[test]
    fn base_offset_and_epoch_are_outside_the_crc() {
        let mut bytes = build_batch(&BatchSpec::new(&[1, 2], 4));
        let mut header = [0u8; RECORD_BATCH_OVERHEAD];
        header.copy_from_slice(&bytes[..RECORD_BATCH_OVERHEAD]);
        stamp_offset_and_epoch(&mut header, 99, 5);
        bytes[..RECORD_BATCH_OVERHEAD].copy_from_slice(&header);
        let h = RecordBatchHeader::validate(&bytes).unwrap();
        assert_eq!((h.base_offset, h.partition_leader_epoch), (99, 5));
    }

    #[test]
    fn rejects_bad_magic_length_and_counts() {
        let good = build_batch(&BatchSpec::new(&[1, 2], 4));

        let mut bad_magic = good.clone();
        bad_magic[16] = 1;
        assert!(matches!(
            RecordBatchHeader::validate(&bad_magic),
            Err(StorageError::CorruptRecord { .. })
        ));

        let mut short_length = good.clone();
        short_length[8..12].copy_from_slice(&10i32.to_be_bytes());
        assert!(matches!(
            RecordBatchHeader::validate(&short_length),
            Err(StorageError::CorruptRecord { .. })
        ));

        let truncated = &good[..good.len() - 1];
        assert!(matches!(
            RecordBatchHeader::validate(truncated),
            Err(StorageError::CorruptRecord { .. })
        ));
        assert!(matches!(
            RecordBatchHeader::validate(&good[..30]),
            Err(StorageError::CorruptRecord { .. })
        ));

        // records_count disagrees with last_offset_delta; CRC recomputed so
        // only the count check can fail.
        let mut bad_count = good.clone();
        bad_count[57..61].copy_from_slice(&5i32.to_be_bytes());
        let crc = crc32c::crc32c(&bad_count[ATTRIBUTES_OFFSET..]);
        bad_count[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            RecordBatchHeader::validate(&bad_count),
            Err(StorageError::InvalidRecord { .. })
        ));
    }

    #[test]
    fn log_append_time_restamp_keeps_crc_valid() {
        let bytes = build_batch(&BatchSpec::new(&[1, 2, 3], 8));
        let mut header = [0u8; RECORD_BATCH_OVERHEAD];
        header.copy_from_slice(&bytes[..RECORD_BATCH_OVERHEAD]);
        set_log_append_time(&mut header, 777);
        restamp_crc(&mut header, &bytes[RECORD_BATCH_OVERHEAD..]);
        let mut out = header.to_vec();
        out.extend_from_slice(&bytes[RECORD_BATCH_OVERHEAD..]);
        let h = RecordBatchHeader::validate(&out).unwrap();
        assert_eq!(h.max_timestamp, 777);
        assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
    }
}
