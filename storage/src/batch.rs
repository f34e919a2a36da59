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
//!
//! [`validate_records`] checks the structure of a batch's records section
//! (Kafka's `DefaultRecord.readFrom` and `LogValidator` rules) in one forward
//! scan without allocating; it never builds records. Compressed sections are
//! decompressed by the broker, which has the codecs; this module must not
//! depend on `kafka-protocol` or any compression crate.
//!
//! A record inside the (decompressed) records section:
//!
//! ```text
//! length          varint   bytes after this field
//! attributes      i8       unused
//! timestampDelta  varlong  ms since base_timestamp
//! offsetDelta     varint   0, 1, 2, ... within the batch
//! keyLength       varint   -1 = null key
//! key             bytes
//! valueLength     varint   -1 = null value
//! value           bytes
//! headersCount    varint   >= 0
//!   headerKeyLength   varint  >= 0
//!   headerKey         bytes
//!   headerValueLength varint  -1 = null value
//!   headerValue       bytes
//! ```
//!
//! Varints are zigzag-encoded, at most 5 bytes (varint) or 10 (varlong).

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
/// Attributes bit 6: the base timestamp holds the delete horizon (KIP-534).
pub(crate) const DELETE_HORIZON_MASK: i16 = 0x40;
const COMPRESSION_CODEC_MASK: i16 = 0x07;
/// Largest compression codec id Kafka defines (4, zstd).
const MAX_COMPRESSION_CODEC: u8 = 4;
/// Longest varint encoding Kafka reads (`ByteUtils.readVarint`), in bytes.
const MAX_VARINT_BYTES: usize = 5;
/// Longest varlong encoding Kafka reads (`ByteUtils.readVarlong`), in bytes.
const MAX_VARLONG_BYTES: usize = 10;

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
    /// [`StorageError::InvalidRecord`] if `buf` is shorter than 61 bytes or
    /// the magic is not 2 (Kafka's `ProduceRequest.validateRecords` answers
    /// `INVALID_RECORD` for magic other than 2);
    /// [`StorageError::CorruptRecord`] if `batch_length` is smaller than the
    /// header.
    pub fn parse(buf: &[u8]) -> Result<Self, StorageError> {
        if buf.len() < RECORD_BATCH_OVERHEAD {
            return Err(StorageError::InvalidRecord {
                reason: format!(
                    "batch header needs {RECORD_BATCH_OVERHEAD} bytes, got {}",
                    buf.len()
                ),
            });
        }
        let header = Self::parse_unchecked(buf);
        if header.magic != MAGIC_V2 {
            return Err(StorageError::InvalidRecord {
                reason: format!(
                    "magic {} at base offset {} (only magic 2 is supported)",
                    header.magic, header.base_offset
                ),
            });
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

    /// Parses the header at the start of `buf` and checks what a follower
    /// checks of a batch fetched from its leader (Kafka's
    /// `UnifiedLog.analyzeAndValidateRecords` for `AppendOrigin.REPLICATION`:
    /// `DefaultRecordBatch.isValid`): magic 2, a sane length, the batch fits
    /// in `buf`, its CRC-32C matches, and `last_offset_delta >= 0` (which
    /// recovery requires). The record count is not checked against the
    /// offset range: a compacted leader's batches keep their last offset
    /// delta with fewer (or no) records.
    ///
    /// # Errors
    /// [`StorageError::CorruptRecord`] for a bad batch length, a batch running
    /// past `buf` or a CRC mismatch; [`StorageError::InvalidRecord`] for a
    /// buffer shorter than the header, magic other than 2 or a negative last
    /// offset delta.
    pub fn validate_replicated(buf: &[u8]) -> Result<Self, StorageError> {
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
        Ok(header)
    }

    /// Parses the header at the start of `buf` and checks the whole batch as
    /// Kafka's leader does before appending (`LogValidator`,
    /// `DefaultRecordBatch.ensureValid`): the batch fits in `buf`, its
    /// CRC-32C matches, the compression codec is one Kafka defines (0-4),
    /// `last_offset_delta >= 0` and `records_count == last_offset_delta + 1`.
    /// The records section is not looked at; see [`validate_records`].
    ///
    /// # Errors
    /// [`StorageError::CorruptRecord`] for a bad batch length, a batch running
    /// past `buf` or a CRC mismatch; [`StorageError::InvalidRecord`] for a
    /// buffer shorter than the header, magic other than 2, an unknown
    /// compression codec (5-7), or an inconsistent offset range or record
    /// count.
    pub fn validate(buf: &[u8]) -> Result<Self, StorageError> {
        let header = Self::validate_replicated(buf)?;
        if header.compression_codec() > MAX_COMPRESSION_CODEC {
            return Err(StorageError::InvalidRecord {
                reason: format!(
                    "unknown compression codec {} in attributes {:#06x}",
                    header.compression_codec(),
                    header.attributes
                ),
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

    /// Offset of the last record: `base_offset + last_offset_delta`,
    /// saturating at `i64::MAX` (the base offset is outside the CRC, so a
    /// stored or received batch may claim any; [`Self::offsets_in_range`]
    /// tells whether it fits).
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(self.last_offset_delta as i64)
    }

    /// The offset after the batch: `last_offset() + 1`, saturating at
    /// `i64::MAX`.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }

    /// True when the batch's offsets are valid log offsets: the base offset
    /// is not negative and its next offset does not pass `i64::MAX`.
    pub fn offsets_in_range(&self) -> bool {
        self.base_offset >= 0
            && self
                .base_offset
                .checked_add(self.last_offset_delta as i64 + 1)
                .is_some()
    }

    /// Total size of the batch in bytes: `batch_length + 12`.
    pub fn size_in_bytes(&self) -> usize {
        // parse() guarantees batch_length >= 49, so the cast is lossless.
        self.batch_length.max(0) as usize + LOG_OVERHEAD
    }

    /// Compression codec id (attributes bits 0-2): 0 none, 1 gzip, 2 snappy,
    /// 3 lz4, 4 zstd; 5-7 are undefined ([`RecordBatchHeader::validate`]
    /// rejects them). Source: Kafka protocol docs, "Record Batch".
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

    /// Attributes bit 6 (KIP-534): the batch was cleaned while holding a
    /// tombstone, and `base_timestamp` is its delete horizon (ms) rather than
    /// the first record's timestamp.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes & DELETE_HORIZON_MASK != 0).then_some(self.base_timestamp)
    }

    /// Whether the stored CRC equals the CRC-32C of `batch_bytes[21..]`.
    /// `batch_bytes` is the whole batch (header included); a slice shorter
    /// than the header yields `false`.
    pub fn crc_is_valid(&self, batch_bytes: &[u8]) -> bool {
        batch_bytes.len() >= RECORD_BATCH_OVERHEAD
            && crc32c::crc32c(&batch_bytes[ATTRIBUTES_OFFSET..]) == self.crc
    }
}

/// The records section of one batch: the bytes after its 61-byte header, up
/// to the end its `batch_length` declares (or the end of `batch` if that is
/// sooner). For a compressed batch this is the compressed payload. Never
/// panics: a `batch` shorter than the header yields an empty slice.
pub fn records_section(batch: &[u8]) -> &[u8] {
    let Some(rest) = batch.get(RECORD_BATCH_OVERHEAD..) else {
        return &[];
    };
    let declared = (be_i32(batch, 8).max(0) as usize)
        .saturating_add(LOG_OVERHEAD)
        .saturating_sub(RECORD_BATCH_OVERHEAD);
    &rest[..declared.min(rest.len())]
}

/// Checks the structure of a batch's records section as Kafka's leader does
/// before appending (`DefaultRecord.readFrom`, `DefaultRecordBatch`'s record
/// iterator and `LogValidator`). `records` is the uncompressed section: for
/// codec 0 the bytes after the header ([`records_section`]), otherwise the
/// caller's decompression of them. The rules:
///
/// * `records_count >= 1` and `last_offset_delta == records_count - 1`;
/// * exactly `records_count` records, with no bytes after the last;
/// * each record's `length` is `>= 0` and equals the bytes its fields use;
/// * offset deltas are 0, 1, 2, ... (Kafka: offsets must be contiguous);
/// * key and value lengths are `>= -1` (-1 = null), header key lengths
///   `>= 0`, header value lengths `>= -1`, and no field runs past its record;
/// * a header count is `>= 0` and at most the bytes left in the record;
/// * varints take at most 5 bytes, varlongs at most 10 (overflowing bits of
///   the last byte are dropped, as Kafka's `ByteUtils` does).
///
/// One forward scan, no allocation unless it fails; timestamps and
/// attributes are not interpreted (see [`validate_records_with`] for the
/// timestamp and key rules).
///
/// # Errors
/// [`StorageError::InvalidRecord`] (Kafka's `InvalidRecordException`,
/// `INVALID_RECORD`) naming the first broken record and field.
pub fn validate_records(header: &RecordBatchHeader, records: &[u8]) -> Result<(), StorageError> {
    validate_records_with(header, records, &RecordRules::STRUCTURE_ONLY).map(drop)
}

/// The rules of Kafka's `LogValidator` for a batch's records beyond their
/// structure: the record timestamp window (KIP-937) and keys on compacted
/// topics. Built per append from the topic's config and the broker's clock.
#[derive(Clone, Copy, Debug)]
pub struct RecordRules<'a> {
    /// The topic's `message.timestamp.type`.
    pub timestamp_type: TimestampType,
    /// The broker's clock at the append, ms since the epoch.
    pub now_ms: i64,
    /// `message.timestamp.before.max.ms`: a CreateTime record may be at most
    /// this many ms older than `now_ms`.
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: a CreateTime record may be at most
    /// this many ms newer than `now_ms`.
    pub timestamp_after_max_ms: i64,
    /// `Some(partition)` when the topic's `cleanup.policy` includes
    /// `compact`: every record must then have a key (`LogValidator.validateKey`).
    pub require_keys: Option<&'a crate::TopicPartition>,
}

impl RecordRules<'static> {
    /// Structure only: any timestamp, keys optional.
    pub const STRUCTURE_ONLY: RecordRules<'static> = RecordRules {
        timestamp_type: TimestampType::CreateTime,
        now_ms: 0,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        require_keys: None,
    };
}

/// What validating a batch's records found (Kafka's `LogValidator`
/// `ValidationResult`, per batch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidatedRecords {
    /// The largest record timestamp (ms), -1 (`NO_TIMESTAMP`) if no record
    /// has one. Under CreateTime this replaces whatever the header claims
    /// (`LogValidator` calls `setMaxTimestamp` with it).
    pub max_timestamp: i64,
}

/// [`validate_records`] plus the record-level rules of `rules`
/// (`LogValidator.validateRecord`): on a CreateTime topic each record
/// timestamp other than -1 must lie within `[now - before.max.ms, now +
/// after.max.ms]`; a producer may not send a LogAppendTime batch to a
/// LogAppendTime topic; a compacted topic needs keys. Returns the batch's
/// real max timestamp.
///
/// Structural faults stop the scan at once (Kafka's record iterator throws);
/// a timestamp or key fault is remembered and the scan goes on, so a later
/// structural fault wins, as in Kafka, where `processRecordErrors` runs after
/// the loop. Kafka lists every offending record in `record_errors`; Weir
/// reports the first.
///
/// # Errors
/// [`StorageError::InvalidRecord`] for a structural fault,
/// [`StorageError::InvalidTimestamp`] and [`StorageError::RecordWithoutKey`]
/// naming the first offending record.
pub fn validate_records_with(
    header: &RecordBatchHeader,
    records: &[u8],
    rules: &RecordRules<'_>,
) -> Result<ValidatedRecords, StorageError> {
    validate_record_source(header, &mut SliceSource(Reader { buf: records }), rules)
}

/// A records section read one record at a time: a slice in memory or a
/// decompressing stream (`compression::validate_compressed_batch`).
pub(crate) trait RecordSource {
    /// The next record's length varint, `None` if the section has ended.
    fn record_length(&mut self) -> Result<Option<i32>, RecordFault>;
    /// The next `length` bytes: one record's body.
    fn record_body(&mut self, declared: i32, length: usize) -> Result<&[u8], RecordFault>;
    /// `Ok(None)` if nothing follows; otherwise how many bytes remain, if
    /// known.
    fn remaining(&mut self) -> Result<Option<Option<usize>>, RecordFault>;
}

struct SliceSource<'a>(Reader<'a>);

impl RecordSource for SliceSource<'_> {
    fn record_length(&mut self) -> Result<Option<i32>, RecordFault> {
        if self.0.buf.is_empty() {
            return Ok(None);
        }
        self.0.varint("record length", SECTION).map(Some)
    }

    fn record_body(&mut self, declared: i32, length: usize) -> Result<&[u8], RecordFault> {
        if length > self.0.buf.len() {
            return Err(RecordFault::LengthPastEnd {
                declared,
                available: self.0.buf.len(),
            });
        }
        self.0.take(length, SECTION)
    }

    fn remaining(&mut self) -> Result<Option<Option<usize>>, RecordFault> {
        Ok((!self.0.buf.is_empty()).then_some(Some(self.0.buf.len())))
    }
}

/// The one validation loop behind [`validate_records_with`] and the
/// streaming validation of compressed batches.
pub(crate) fn validate_record_source(
    header: &RecordBatchHeader,
    source: &mut impl RecordSource,
    rules: &RecordRules<'_>,
) -> Result<ValidatedRecords, StorageError> {
    let count = header.records_count;
    if count < 1 {
        return Err(StorageError::InvalidRecord {
            reason: format!("invalid record count {count}"),
        });
    }
    if header.last_offset_delta as i64 != count as i64 - 1 {
        return Err(StorageError::InvalidRecord {
            reason: format!(
                "last offset delta {} does not match record count {count}",
                header.last_offset_delta
            ),
        });
    }
    let at = |index: i32| {
        move |fault: RecordFault| StorageError::InvalidRecord {
            reason: format!("record {index}: {fault}"),
        }
    };
    let mut max_timestamp = NO_TIMESTAMP;
    let mut rule_error = None;
    for index in 0..count {
        let Some(declared) = source.record_length().map_err(at(index))? else {
            return Err(StorageError::InvalidRecord {
                reason: format!(
                    "batch declares {count} records but its records section ends after {index}"
                ),
            });
        };
        let Ok(length) = usize::try_from(declared) else {
            return Err(at(index)(RecordFault::NegativeLength(declared)));
        };
        let body = source.record_body(declared, length).map_err(at(index))?;
        let record = validate_record_body(body, declared, index).map_err(at(index))?;
        let timestamp = match header.timestamp_type() {
            TimestampType::LogAppendTime => header.max_timestamp,
            TimestampType::CreateTime => header.base_timestamp.wrapping_add(record.timestamp_delta),
        };
        max_timestamp = max_timestamp.max(timestamp);
        if rule_error.is_none() {
            rule_error =
                check_record_rules(header, rules, index as usize, timestamp, record.has_key);
        }
    }
    match source.remaining().map_err(at(count))? {
        None => {}
        Some(Some(bytes)) => {
            return Err(StorageError::InvalidRecord {
                reason: format!("{bytes} bytes remain after the last of {count} records"),
            })
        }
        Some(None) => {
            return Err(StorageError::InvalidRecord {
                reason: format!(
                    "incorrect declared batch size: data remains after the last of {count} records"
                ),
            })
        }
    }
    match rule_error {
        Some(e) => Err(e),
        None => Ok(ValidatedRecords { max_timestamp }),
    }
}

/// Kafka's `RecordBatch.NO_TIMESTAMP`.
const NO_TIMESTAMP: i64 = -1;

/// `LogValidator.validateKey` and `validateTimestamp` for one record.
fn check_record_rules(
    header: &RecordBatchHeader,
    rules: &RecordRules<'_>,
    record_index: usize,
    timestamp: i64,
    has_key: bool,
) -> Option<StorageError> {
    if let Some(tp) = rules.require_keys.filter(|_| !has_key) {
        return Some(StorageError::RecordWithoutKey {
            topic_partition: tp.to_string(),
            record_index,
        });
    }
    if rules.timestamp_type == TimestampType::CreateTime && timestamp != NO_TIMESTAMP {
        // `recordHasInvalidTimestamp`, in i128 so that no difference
        // overflows; `i64::MAX` (Kafka's "no limit") bounds nothing.
        let now = i128::from(rules.now_ms);
        let difference = now - i128::from(timestamp);
        let beyond = |difference: i128, max: i64| max != i64::MAX && difference > i128::from(max);
        if beyond(difference, rules.timestamp_before_max_ms)
            || beyond(-difference, rules.timestamp_after_max_ms)
        {
            let lower = now - i128::from(rules.timestamp_before_max_ms);
            let upper = now + i128::from(rules.timestamp_after_max_ms);
            return Some(StorageError::InvalidTimestamp {
                record_index,
                reason: format!(
                    "Timestamp {timestamp} of message with offset delta {record_index} is out of \
                     range. The timestamp should be within [{lower}, {upper}]"
                ),
            });
        }
    } else if header.timestamp_type() == TimestampType::LogAppendTime {
        return Some(StorageError::InvalidTimestamp {
            record_index,
            reason: "Invalid timestamp type in message: producer should not set timestamp type \
                     to LogAppendTime."
                .to_string(),
        });
    }
    None
}

/// What is wrong with one record; [`validate_records`] adds its index.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordFault {
    #[error("a field runs past the end of the {0}")]
    Truncated(&'static str),
    #[error("{0} varint is longer than 5 bytes")]
    VarintTooLong(&'static str),
    #[error("{0} varlong is longer than 10 bytes")]
    VarlongTooLong(&'static str),
    #[error("negative record length {0}")]
    NegativeLength(i32),
    #[error("record length {declared} exceeds the {available} bytes left in the batch")]
    LengthPastEnd { declared: i32, available: usize },
    #[error("record declares {declared} bytes but its fields use {used}")]
    LengthMismatch { declared: i32, used: usize },
    #[error("offset delta {found}, expected {expected}: offsets in a batch must be contiguous")]
    OffsetDelta { found: i32, expected: i32 },
    #[error("invalid {field} length {length}")]
    BadLength { field: &'static str, length: i32 },
    #[error("header count {0} is negative")]
    NegativeHeaderCount(i32),
    #[error("header count {count} exceeds the {remaining} bytes left in the record")]
    HeaderCountTooLarge { count: i32, remaining: usize },
    #[error("{codec} payload does not decompress: {reason}")]
    Decompress { codec: &'static str, reason: String },
    #[error("decompressed records exceed the {limit} bytes one produce request may decompress")]
    OverBudget { limit: u64 },
}

/// A forward reader over a byte slice with Kafka's varint rules.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Takes the next `n` bytes.
    fn take(&mut self, n: usize, within: &'static str) -> Result<&'a [u8], RecordFault> {
        if n > self.buf.len() {
            return Err(RecordFault::Truncated(within));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn byte(&mut self, within: &'static str) -> Result<u8, RecordFault> {
        Ok(self.take(1, within)?[0])
    }

    /// Reads up to `max_bytes` of a base-128 varint (no zigzag); `None` if
    /// the continuation bit is still set after `max_bytes`.
    fn raw_varint(
        &mut self,
        max_bytes: usize,
        within: &'static str,
    ) -> Result<Option<u64>, RecordFault> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let b = self.byte(within)?;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(Some(value));
            }
        }
        Ok(None)
    }

    /// A zigzag varint (`ByteUtils.readVarint`).
    fn varint(&mut self, field: &'static str, within: &'static str) -> Result<i32, RecordFault> {
        let raw = self
            .raw_varint(MAX_VARINT_BYTES, within)?
            .ok_or(RecordFault::VarintTooLong(field))? as u32;
        Ok((raw >> 1) as i32 ^ -((raw & 1) as i32))
    }

    /// A zigzag varlong (`ByteUtils.readVarlong`).
    fn varlong(&mut self, field: &'static str, within: &'static str) -> Result<i64, RecordFault> {
        let raw = self
            .raw_varint(MAX_VARLONG_BYTES, within)?
            .ok_or(RecordFault::VarlongTooLong(field))?;
        Ok((raw >> 1) as i64 ^ -((raw & 1) as i64))
    }

    /// Skips a length-prefixed field: `-1` is null when `nullable`.
    /// Returns whether the field is not null.
    fn bytes_field(&mut self, field: &'static str, nullable: bool) -> Result<bool, RecordFault> {
        let length = self.varint(field, RECORD)?;
        match usize::try_from(length) {
            Ok(n) => self.take(n, RECORD).map(|_| true),
            Err(_) if nullable && length == -1 => Ok(false),
            Err(_) => Err(RecordFault::BadLength { field, length }),
        }
    }
}

/// `within` names for [`RecordFault::Truncated`].
const RECORD: &str = "record";
const SECTION: &str = "records section";

/// What [`validate_record_body`] reads of a valid record.
struct RecordSummary {
    timestamp_delta: i64,
    has_key: bool,
}

/// Checks one record's body (the `declared` bytes after its length varint)
/// as `DefaultRecord.readFrom` does.
fn validate_record_body(
    body: &[u8],
    declared: i32,
    index: i32,
) -> Result<RecordSummary, RecordFault> {
    let length = body.len();
    let mut body = Reader { buf: body };
    body.byte(RECORD)?; // attributes: unused in v2
    let timestamp_delta = body.varlong("timestamp delta", RECORD)?;
    let offset_delta = body.varint("offset delta", RECORD)?;
    if offset_delta != index {
        return Err(RecordFault::OffsetDelta {
            found: offset_delta,
            expected: index,
        });
    }
    let has_key = body.bytes_field("key", true)?;
    body.bytes_field("value", true)?;
    let header_count = body.varint("header count", RECORD)?;
    let Ok(headers) = usize::try_from(header_count) else {
        return Err(RecordFault::NegativeHeaderCount(header_count));
    };
    if headers > body.buf.len() {
        return Err(RecordFault::HeaderCountTooLarge {
            count: header_count,
            remaining: body.buf.len(),
        });
    }
    for _ in 0..headers {
        body.bytes_field("header key", false)?;
        body.bytes_field("header value", true)?;
    }
    if !body.buf.is_empty() {
        return Err(RecordFault::LengthMismatch {
            declared,
            used: length - body.buf.len(),
        });
    }
    Ok(RecordSummary {
        timestamp_delta,
        has_key,
    })
}

/// One record of an uncompressed records section, as the
/// [`LogCleaner`](crate::log::cleaner) reads it (fields of Kafka's
/// `DefaultRecord`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecordView<'a> {
    /// The record's attributes byte (unused in v2).
    pub attributes: u8,
    /// Milliseconds after the batch's base timestamp.
    pub timestamp_delta: i64,
    /// Offset minus the batch's base offset.
    pub offset_delta: i32,
    /// The key; `None` for a null key.
    pub key: Option<&'a [u8]>,
    /// The value; `None` for a null value (a tombstone).
    pub value: Option<&'a [u8]>,
    /// The record's bytes from the key length to its end (key, value,
    /// headers), copied verbatim when the record is rewritten.
    pub tail: &'a [u8],
}

/// Reads every record of an uncompressed records section.
///
/// # Errors
/// [`StorageError::CorruptRecord`] when the section does not parse (stored
/// batches were validated on append, so this is damage).
pub(crate) fn read_records(records: &[u8]) -> Result<Vec<RecordView<'_>>, StorageError> {
    record_views(records).collect()
}

/// The records of an uncompressed records section, one at a time, without
/// allocating; stops after the first error ([`StorageError::CorruptRecord`]).
fn record_views(records: &[u8]) -> impl Iterator<Item = Result<RecordView<'_>, StorageError>> {
    let mut reader = Reader { buf: records };
    let mut index = 0usize;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || reader.buf.is_empty() {
            return None;
        }
        let record = read_record(&mut reader).map_err(|fault| {
            failed = true;
            StorageError::corrupt(format!("record {index}: {fault}"))
        });
        index += 1;
        Some(record)
    })
}

fn read_record<'a>(reader: &mut Reader<'a>) -> Result<RecordView<'a>, RecordFault> {
    let declared = reader.varint("record length", SECTION)?;
    let Ok(length) = usize::try_from(declared) else {
        return Err(RecordFault::NegativeLength(declared));
    };
    let mut body = Reader {
        buf: reader.take(length, SECTION)?,
    };
    let attributes = body.byte(RECORD)?;
    let timestamp_delta = body.varlong("timestamp delta", RECORD)?;
    let offset_delta = body.varint("offset delta", RECORD)?;
    let tail = body.buf;
    let key_length = body.varint("key", RECORD)?;
    let key = match usize::try_from(key_length) {
        Ok(n) => Some(body.take(n, RECORD)?),
        Err(_) => None,
    };
    let value_length = body.varint("value", RECORD)?;
    let value = match usize::try_from(value_length) {
        Ok(n) => Some(body.take(n, RECORD)?),
        Err(_) => None,
    };
    Ok(RecordView {
        attributes,
        timestamp_delta,
        offset_delta,
        key,
        value,
        tail,
    })
}

/// A record's key and value, as [`write_key_value_batch`] writes them and
/// [`read_key_values`] reads them back; `None` is a null key or value (a
/// null value is a tombstone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyValue<'a> {
    /// The key bytes, `None` for a null key.
    pub key: Option<&'a [u8]>,
    /// The value bytes, `None` for a null value.
    pub value: Option<&'a [u8]>,
}

/// Builds one uncompressed magic-2 batch holding `records` in order, as
/// Kafka's `MemoryRecords.withRecords` does for a broker-internal writer
/// (the group coordinator's `__consumer_offsets` records): base offset 0 and
/// partition leader epoch -1 (the log stamps both on append), CreateTime
/// `timestamp_ms` (ms since the epoch) for every record, no producer
/// (producer id and epoch -1, base sequence -1), no record headers.
///
/// Returns `None` for an empty `records` (a batch holds at least one
/// record) or more than `i32::MAX` records.
pub fn write_key_value_batch(records: &[KeyValue<'_>], timestamp_ms: i64) -> Option<Vec<u8>> {
    let count = i32::try_from(records.len()).ok().filter(|&n| n > 0)?;
    let mut section = Vec::new();
    for (offset_delta, record) in records.iter().enumerate() {
        let offset_delta = offset_delta as i64;
        let field_len = |f: Option<&[u8]>| match f {
            Some(bytes) => varlong_len(bytes.len() as i64) + bytes.len(),
            None => varlong_len(-1),
        };
        // attributes, timestamp delta 0, offset delta, key, value, 0 headers
        let body_len = 1
            + varlong_len(0)
            + varlong_len(offset_delta)
            + field_len(record.key)
            + field_len(record.value)
            + varlong_len(0);
        put_varlong(&mut section, body_len as i64);
        section.push(0);
        put_varlong(&mut section, 0);
        put_varlong(&mut section, offset_delta);
        for field in [record.key, record.value] {
            match field {
                Some(bytes) => {
                    put_varlong(&mut section, bytes.len() as i64);
                    section.extend_from_slice(bytes);
                }
                None => put_varlong(&mut section, -1),
            }
        }
        put_varlong(&mut section, 0);
    }
    Some(write_batch(
        &RecordBatchHeader {
            base_offset: 0,
            batch_length: 0,
            partition_leader_epoch: -1,
            magic: MAGIC_V2,
            crc: 0,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: timestamp_ms,
            max_timestamp: timestamp_ms,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            records_count: count,
        },
        &section,
    ))
}

/// The keys and values of every record of an uncompressed records section
/// (for a compressed batch, the caller's
/// [`decompress`](crate::compression::decompress) of [`records_section`]).
///
/// # Errors
/// [`StorageError::CorruptRecord`] when the section does not parse.
pub fn read_key_values(records: &[u8]) -> Result<Vec<KeyValue<'_>>, StorageError> {
    record_views(records)
        .map(|r| {
            r.map(|r| KeyValue {
                key: r.key,
                value: r.value,
            })
        })
        .collect()
}

/// Appends `v` as a zigzag varint / varlong (`ByteUtils.writeVarlong`).
pub(crate) fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Appends `record` to a records section with a new timestamp delta (the
/// other fields verbatim), as Kafka's `DefaultRecord.writeTo` lays it out.
pub(crate) fn write_record(out: &mut Vec<u8>, record: &RecordView<'_>, timestamp_delta: i64) {
    let offset_delta = i64::from(record.offset_delta);
    let body_len = 1 + varlong_len(timestamp_delta) + varlong_len(offset_delta) + record.tail.len();
    put_varlong(out, body_len as i64);
    out.push(record.attributes);
    put_varlong(out, timestamp_delta);
    put_varlong(out, offset_delta);
    out.extend_from_slice(record.tail);
}

/// Bytes [`put_varlong`] writes for `v`.
fn varlong_len(v: i64) -> usize {
    let z = ((v << 1) ^ (v >> 63)) as u64;
    (64 - z.leading_zeros() as usize).max(1).div_ceil(7)
}

/// Writes a whole v2 batch: `header`'s fields (its `batch_length` and `crc`
/// are ignored and recomputed) followed by `records` (the records section as
/// stored, compressed or not).
pub(crate) fn write_batch(header: &RecordBatchHeader, records: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + records.len());
    let batch_length = (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + records.len()) as i32;
    out.extend_from_slice(&header.base_offset.to_be_bytes());
    out.extend_from_slice(&batch_length.to_be_bytes());
    out.extend_from_slice(&header.partition_leader_epoch.to_be_bytes());
    out.push(MAGIC_V2 as u8);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&header.attributes.to_be_bytes());
    out.extend_from_slice(&header.last_offset_delta.to_be_bytes());
    out.extend_from_slice(&header.base_timestamp.to_be_bytes());
    out.extend_from_slice(&header.max_timestamp.to_be_bytes());
    out.extend_from_slice(&header.producer_id.to_be_bytes());
    out.extend_from_slice(&header.producer_epoch.to_be_bytes());
    out.extend_from_slice(&header.base_sequence.to_be_bytes());
    out.extend_from_slice(&header.records_count.to_be_bytes());
    out.extend_from_slice(records);
    let crc = crc32c::crc32c(&out[ATTRIBUTES_OFFSET..]);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Sets the LogAppendTime attribute bit in a raw header.
pub(crate) fn set_log_append_time(header: &mut [u8; RECORD_BATCH_OVERHEAD], now_ms: i64) {
    set_max_timestamp(header, TimestampType::LogAppendTime, now_ms);
}

/// Sets the timestamp type bit and max timestamp of a raw header, as Kafka's
/// `DefaultRecordBatch.setMaxTimestamp` does; returns whether anything
/// changed (only then must the caller recompute the CRC, [`restamp_crc`]).
pub(crate) fn set_max_timestamp(
    header: &mut [u8; RECORD_BATCH_OVERHEAD],
    timestamp_type: TimestampType,
    max_timestamp: i64,
) -> bool {
    let old_attributes = be_i16(header, ATTRIBUTES_OFFSET);
    let attributes = match timestamp_type {
        TimestampType::LogAppendTime => old_attributes | TIMESTAMP_TYPE_MASK,
        TimestampType::CreateTime => old_attributes & !TIMESTAMP_TYPE_MASK,
    };
    if attributes == old_attributes && be_i64(header, MAX_TIMESTAMP_OFFSET) == max_timestamp {
        return false;
    }
    header[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    header[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
        .copy_from_slice(&max_timestamp.to_be_bytes());
    true
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
    use crate::testutil::{batch_with_records, build_batch, put_varint, BatchSpec, RawRecord};

    /// A key/value batch is a valid v2 batch (as a produced batch is
    /// checked) whose records read back as written, tombstones included,
    /// with the given timestamp and no producer.
    #[test]
    fn key_value_batches_validate_and_read_back() {
        let records = [
            KeyValue {
                key: Some(b"k1"),
                value: Some(b"v1"),
            },
            KeyValue {
                key: Some(b"k2"),
                value: None,
            },
            KeyValue {
                key: None,
                value: Some(&[0u8; 300]),
            },
        ];
        let batch = write_key_value_batch(&records, 1_700_000_000_123).unwrap();
        let header = RecordBatchHeader::validate(&batch).unwrap();
        assert_eq!(header.size_in_bytes(), batch.len());
        assert_eq!(header.records_count, 3);
        assert_eq!(header.last_offset_delta, 2);
        assert_eq!(header.base_timestamp, 1_700_000_000_123);
        assert_eq!(header.max_timestamp, 1_700_000_000_123);
        assert_eq!((header.producer_id, header.producer_epoch), (-1, -1));
        assert_eq!(header.base_sequence, -1);
        assert_eq!(header.compression_codec(), 0);
        validate_records(&header, records_section(&batch)).unwrap();
        assert_eq!(
            read_key_values(records_section(&batch)).unwrap(),
            records.to_vec()
        );
        assert_eq!(write_key_value_batch(&[], 0), None);
    }

    #[test]
    fn varlong_len_is_what_put_varlong_writes() {
        for v in [
            0,
            1,
            -1,
            63,
            64,
            -64,
            -65,
            8191,
            8192,
            i64::from(i32::MAX),
            i64::MIN,
            i64::MAX,
        ]
        .into_iter()
        .chain((-300..300).map(|x| x * 977))
        {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            assert_eq!(varlong_len(v), out.len(), "{v}");
        }
    }
    use proptest::prelude::*;

    /// A header declaring `count` records (`last_offset_delta = count - 1`).
    fn header(count: i32) -> RecordBatchHeader {
        let batch = batch_with_records(&[], count, count.wrapping_sub(1), 0);
        RecordBatchHeader::parse_unchecked(&batch)
    }

    fn section(records: &[RawRecord<'_>]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in records {
            r.encode(&mut out);
        }
        out
    }

    /// `body` prefixed with its length: one record of a records section.
    fn framed(body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, body.len() as i64);
        out.extend_from_slice(body);
        out
    }

    /// The reason of an `InvalidRecord` error; panics on anything else.
    fn invalid(result: Result<(), StorageError>) -> String {
        match result {
            Err(StorageError::InvalidRecord { reason }) => reason,
            other => panic!("expected InvalidRecord, got {other:?}"),
        }
    }

    #[test]
    fn every_batch_the_test_helpers_build_has_valid_records() {
        for count in [1usize, 2, 3, 17, 200] {
            for value_len in [0usize, 1, 63, 64, 300] {
                let ts: Vec<i64> = (0..count as i64)
                    .map(|i| 1_700_000_000_000 + i * 37)
                    .collect();
                let bytes = build_batch(&BatchSpec::new(&ts, value_len));
                let h = RecordBatchHeader::validate(&bytes).unwrap();
                assert_eq!(records_section(&bytes), &bytes[RECORD_BATCH_OVERHEAD..]);
                validate_records(&h, records_section(&bytes)).unwrap();
            }
        }
        // Keys, null values and headers (null and non-null values) pass too.
        let mut rich = RawRecord::new(0, b"v");
        rich.key = (3, b"key");
        rich.timestamp_delta = -5;
        rich.headers = vec![(b"h1", Some(b"x")), (b"", None)];
        let mut null_value = RawRecord::new(1, b"");
        null_value.value = (-1, &[]);
        validate_records(&header(2), &section(&[rich, null_value])).unwrap();
    }

    #[test]
    fn non_contiguous_offset_deltas_are_invalid() {
        let records = section(&[RawRecord::new(0, b"a"), RawRecord::new(5, b"b")]);
        let reason = invalid(validate_records(&header(2), &records));
        assert!(
            reason.contains("offset delta 5") && reason.contains("contiguous"),
            "{reason}"
        );
        let repeated = section(&[RawRecord::new(0, b"a"), RawRecord::new(0, b"b")]);
        let reason = invalid(validate_records(&header(2), &repeated));
        assert!(
            reason.contains("record 1") && reason.contains("offset delta 0"),
            "{reason}"
        );
    }

    #[test]
    fn a_record_length_that_disagrees_with_its_fields_is_invalid() {
        // Overstated: the record claims one more byte than its fields use;
        // the second record supplies the byte, so nothing runs out.
        let mut over = RawRecord::new(0, b"abc");
        over.length = Some(11);
        let records = section(&[over, RawRecord::new(1, b"d")]);
        let reason = invalid(validate_records(&header(2), &records));
        assert!(
            reason.contains("record 0") && reason.contains("declares 11 bytes"),
            "{reason}"
        );
        // Understated: the fields run past the declared end.
        let mut under = RawRecord::new(0, b"abc");
        under.length = Some(4);
        invalid(validate_records(&header(1), &section(&[under])));
        // Longer than what is left of the section.
        let mut past = RawRecord::new(0, b"abc");
        past.length = Some(100);
        let reason = invalid(validate_records(&header(1), &section(&[past])));
        assert!(reason.contains("100"), "{reason}");
        // Negative.
        let mut negative = RawRecord::new(0, b"abc");
        negative.length = Some(-3);
        let reason = invalid(validate_records(&header(1), &section(&[negative])));
        assert!(reason.contains("-3"), "{reason}");
    }

    #[test]
    fn negative_lengths_other_than_null_are_invalid() {
        let mut key = RawRecord::new(0, b"v");
        key.key = (-5, &[]);
        let reason = invalid(validate_records(&header(1), &section(&[key])));
        assert!(reason.contains("key length -5"), "{reason}");
        let mut value = RawRecord::new(0, b"");
        value.value = (-2, &[]);
        let reason = invalid(validate_records(&header(1), &section(&[value])));
        assert!(reason.contains("value length -2"), "{reason}");
        // A header key may not be null; a header value may.
        let mut body = vec![0u8]; // attributes
        for field in [0, 0, -1, -1, 1, -1, -1] {
            // timestamp delta, offset delta, null key, null value, one
            // header: null key, null value
            put_varint(&mut body, field);
        }
        let records = framed(&body);
        let reason = invalid(validate_records(&header(1), &records));
        assert!(reason.contains("header key length -1"), "{reason}");
        let mut header_value = RawRecord::new(0, b"v");
        header_value.headers = vec![(b"k", None)];
        validate_records(&header(1), &section(&[header_value])).unwrap();
    }

    #[test]
    fn an_absurd_header_count_is_invalid() {
        let mut r = RawRecord::new(0, b"v");
        r.header_count = Some(1 << 30);
        let reason = invalid(validate_records(&header(1), &section(&[r])));
        assert!(reason.contains("1073741824"), "{reason}");
        let mut r = RawRecord::new(0, b"v");
        r.header_count = Some(-1);
        let reason = invalid(validate_records(&header(1), &section(&[r])));
        assert!(reason.contains("header count -1"), "{reason}");
    }

    #[test]
    fn trailing_bytes_and_count_mismatches_are_invalid() {
        let mut records = section(&[RawRecord::new(0, b"a"), RawRecord::new(1, b"b")]);
        validate_records(&header(2), &records).unwrap();
        // Fewer records than declared.
        let reason = invalid(validate_records(&header(3), &records));
        assert!(
            reason.contains("3 records") && reason.contains("2"),
            "{reason}"
        );
        // More records than declared: the extra one is trailing bytes.
        let reason = invalid(validate_records(&header(1), &records));
        assert!(reason.contains("after the last"), "{reason}");
        // Junk after the last record.
        records.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        let reason = invalid(validate_records(&header(2), &records));
        assert!(reason.contains("4 bytes"), "{reason}");
        // Header fields that disagree with each other.
        let one = section(&[RawRecord::new(0, b"a")]);
        let mut h = header(1);
        h.last_offset_delta = 3;
        invalid(validate_records(&h, &one));
        invalid(validate_records(&header(0), &[]));
        invalid(validate_records(&header(-1), &[]));
    }

    #[test]
    fn varints_are_bounded_and_must_end() {
        // Truncated: the continuation bit is set on the last byte.
        let reason = invalid(validate_records(&header(1), &[0x80]));
        assert!(reason.contains("record 0"), "{reason}");
        // A record length varint of 6 bytes (Kafka allows 5).
        let reason = invalid(validate_records(
            &header(1),
            &[0x80, 0x80, 0x80, 0x80, 0x80, 0x00],
        ));
        assert!(reason.contains("varint"), "{reason}");
        // A timestamp delta varlong of 11 bytes (Kafka allows 10).
        let mut body = vec![0u8];
        body.extend_from_slice(&[0xff; 10]);
        body.push(0x01);
        let reason = invalid(validate_records(&header(1), &framed(&body)));
        assert!(reason.contains("varlong"), "{reason}");
        // A 6-byte offset delta varint inside a record.
        let mut body = vec![0u8, 0];
        body.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]);
        let reason = invalid(validate_records(&header(1), &framed(&body)));
        assert!(reason.contains("varint"), "{reason}");
        // Maximal but legal encodings pass: a 10-byte timestamp delta.
        let mut r = RawRecord::new(0, b"v");
        r.timestamp_delta = i64::MIN;
        validate_records(&header(1), &section(&[r])).unwrap();
    }

    proptest! {
        #[test]
        fn random_records_sections_never_panic(
            bytes in prop::collection::vec(any::<u8>(), 0..300),
            count in prop_oneof![0i32..6, any::<i32>()],
            delta in prop_oneof![Just(None), any::<i32>().prop_map(Some)],
        ) {
            let mut h = header(count);
            if let Some(d) = delta {
                h.last_offset_delta = d;
            }
            let _ = validate_records(&h, &bytes);
            let _ = records_section(&bytes);
        }

        #[test]
        fn valid_records_pass_and_any_single_byte_change_never_panics(
            values in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6),
            flip in any::<(usize, u8)>(),
        ) {
            let records: Vec<RawRecord<'_>> = values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let mut r = RawRecord::new(i as i64, v);
                    if i % 2 == 1 {
                        r.key = (v.len() as i64, v);
                        r.headers = vec![(v, Some(v)), (b"k", None)];
                    }
                    r
                })
                .collect();
            let mut bytes = section(&records);
            let h = header(values.len() as i32);
            prop_assert!(validate_records(&h, &bytes).is_ok());
            let at = flip.0 % bytes.len();
            bytes[at] ^= flip.1 | 1;
            match validate_records(&h, &bytes) {
                Ok(()) | Err(StorageError::InvalidRecord { .. }) => {}
                Err(other) => prop_assert!(false, "unexpected {other:?}"),
            }
        }
    }

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
    fn offsets_past_the_end_of_the_offset_space_saturate_and_are_out_of_range() {
        let bytes = build_batch(&BatchSpec::new(&[1, 2], 4));
        let mut header = RecordBatchHeader::validate(&bytes).unwrap();
        assert!(header.offsets_in_range());
        header.base_offset = i64::MAX - 1;
        assert_eq!(header.last_offset(), i64::MAX);
        assert_eq!(header.next_offset(), i64::MAX);
        assert!(!header.offsets_in_range());
        header.base_offset = i64::MAX - 2;
        assert!(header.offsets_in_range());
        header.base_offset = -1;
        assert!(!header.offsets_in_range());
    }

    #[test]
    fn rejects_bad_magic_length_and_counts() {
        let good = build_batch(&BatchSpec::new(&[1, 2], 4));

        let mut bad_magic = good.clone();
        bad_magic[16] = 1;
        assert!(matches!(
            RecordBatchHeader::validate(&bad_magic),
            Err(StorageError::InvalidRecord { .. })
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
            Err(StorageError::InvalidRecord { .. })
        ));
        assert!(matches!(
            RecordBatchHeader::parse(&[]),
            Err(StorageError::InvalidRecord { .. })
        ));

        // Compression codec ids 5-7 do not exist.
        for codec in 5..=7i16 {
            let bad_codec = batch_with_records(records_section(&good), 2, 1, codec);
            let reason = invalid(RecordBatchHeader::validate(&bad_codec).map(|_| ()));
            assert!(reason.contains(&format!("codec {codec}")), "{reason}");
        }
        for codec in 0..=4i16 {
            let known = batch_with_records(records_section(&good), 2, 1, codec);
            assert_eq!(
                RecordBatchHeader::validate(&known)
                    .unwrap()
                    .compression_codec(),
                codec as u8
            );
        }

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
