//! Building record batches to produce and checking the batches a broker
//! returns, byte for byte.
//!
//! The layout is Kafka's record batch v2 (magic 2), see
//! <https://kafka.apache.org/documentation/#recordbatch>:
//!
//! ```text
//! offset  size  field
//!  0      8     baseOffset
//!  8      4     batchLength (bytes after this field)
//! 12      4     partitionLeaderEpoch
//! 16      1     magic (2)
//! 17      4     crc (CRC-32C of everything from attributes to the end)
//! 21      2     attributes (bits 0-2 compression codec, bit 3 timestamp type)
//! 23      4     lastOffsetDelta
//! 27      8     baseTimestamp
//! 35      8     maxTimestamp
//! 43      8     producerId
//! 51      2     producerEpoch
//! 53      4     baseSequence
//! 57      4     recordsCount
//! 61            records
//! ```
//!
//! Encoding and decoding of records use the `kafka-protocol` crate's
//! `RecordBatchEncoder` / `RecordBatchDecoder` (which checks CRCs).

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
};

/// Size of the record batch header before the first record, in bytes.
pub const BATCH_HEADER_BYTES: usize = 61;
/// Byte offset of the base offset field.
pub const BASE_OFFSET_AT: usize = 0;
/// Byte offset of the batch length field.
pub const BATCH_LENGTH_AT: usize = 8;
/// Byte offset of the partition leader epoch field.
pub const PARTITION_LEADER_EPOCH_AT: usize = 12;
/// Byte offset of the magic byte.
pub const MAGIC_AT: usize = 16;
/// Byte offset of the CRC field.
pub const CRC_AT: usize = 17;
/// Byte offset of the attributes field (the first byte the CRC covers).
pub const ATTRIBUTES_AT: usize = 21;

/// A record to encode: key, value and CreateTime timestamp in ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRecord {
    /// The key, or `None` for a null key.
    pub key: Option<Bytes>,
    /// The value, or `None` for a null value (tombstone).
    pub value: Option<Bytes>,
    /// CreateTime in milliseconds since the epoch.
    pub timestamp: i64,
}

impl NewRecord {
    /// A record with a null key and the given value and timestamp (ms).
    pub fn value(value: impl Into<Bytes>, timestamp: i64) -> Self {
        Self {
            key: None,
            value: Some(value.into()),
            timestamp,
        }
    }
}

/// Encodes `records` as ONE record batch v2 with base offset 0, no producer
/// id (non-idempotent) and CreateTime timestamps, compressed with
/// `compression`.
///
/// # Errors
///
/// The `kafka-protocol` crate's message when encoding or compression fails.
pub fn encode_batch(records: &[NewRecord], compression: Compression) -> Result<Bytes, String> {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder starts a new batch whenever offset - sequence
            // changes; offset - 1 keeps one batch and makes its base sequence
            // NO_SEQUENCE (-1).
            sequence: i as i32 + NO_SEQUENCE,
            timestamp: r.timestamp,
            key: r.key.clone(),
            value: r.value.clone(),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(buf.freeze())
}

/// One uncompressed batch holding `values` as record values (no keys), with
/// CreateTime timestamps `first_timestamp`, `first_timestamp + 1`, ... (ms).
///
/// # Panics
///
/// If the `kafka-protocol` encoder fails on an uncompressed batch (a bug).
pub fn plain_batch(values: &[&str], first_timestamp: i64) -> Bytes {
    let records: Vec<NewRecord> = values
        .iter()
        .enumerate()
        .map(|(i, v)| NewRecord::value(v.to_string(), first_timestamp + i as i64))
        .collect();
    encode_batch(&records, Compression::None).expect("an uncompressed batch always encodes")
}

/// `batch` (one record batch v2) stamped as sent by idempotent producer
/// `producer_id` with `epoch` from sequence `base_sequence` (KIP-98: the
/// header fields at bytes 43-57), with its CRC-32C recomputed.
///
/// # Panics
///
/// If `batch` is shorter than a batch header.
pub fn with_producer(batch: &[u8], producer_id: i64, epoch: i16, base_sequence: i32) -> Bytes {
    let mut batch = batch.to_vec();
    batch[43..51].copy_from_slice(&producer_id.to_be_bytes());
    batch[51..53].copy_from_slice(&epoch.to_be_bytes());
    batch[53..57].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_AT..]);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(batch)
}

/// The header fields of one record batch, read without decompressing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the batch's first record.
    pub base_offset: i64,
    /// Bytes after the batch length field.
    pub batch_length: i32,
    /// Leader epoch stamped by the broker.
    pub partition_leader_epoch: i32,
    /// Format version (2).
    pub magic: i8,
    /// The stored CRC-32C.
    pub crc: u32,
    /// The attributes field.
    pub attributes: i16,
    /// Offset of the last record minus the base offset.
    pub last_offset_delta: i32,
    /// Timestamp of the first record (CreateTime batches), ms.
    pub base_timestamp: i64,
    /// Largest timestamp in the batch (the append time for LogAppendTime), ms.
    pub max_timestamp: i64,
    /// Number of records.
    pub records_count: i32,
}

impl BatchHeader {
    /// The compression codec id (attributes bits 0-2: 0 none, 1 gzip,
    /// 2 snappy, 3 lz4, 4 zstd).
    pub fn codec(&self) -> i16 {
        self.attributes & 0x7
    }

    /// Offset of the batch's last record.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }
}

/// The codec id of a `kafka-protocol` [`Compression`].
pub fn codec_id(compression: Compression) -> i16 {
    compression as i16
}

/// Splits the `records` field of a Fetch response partition into whole
/// batches. A truncated batch at the end (allowed by the protocol) is
/// returned separately as the second value.
///
/// # Errors
///
/// A message when a batch header is malformed (negative length, or too short
/// to hold a batch header).
pub fn split_batches(records: &Bytes) -> Result<(Vec<Bytes>, Option<Bytes>), String> {
    let mut batches = Vec::new();
    let mut at = 0usize;
    while at < records.len() {
        let rest = records.len() - at;
        if rest < BATCH_HEADER_BYTES {
            return Ok((batches, Some(records.slice(at..))));
        }
        let length = i32::from_be_bytes(
            records[at + BATCH_LENGTH_AT..at + BATCH_LENGTH_AT + 4]
                .try_into()
                .expect("4 bytes"),
        );
        let total = usize::try_from(length)
            .ok()
            .filter(|l| *l >= BATCH_HEADER_BYTES - 12)
            .ok_or_else(|| format!("batch at byte {at} has invalid length {length}"))?
            + 12;
        if total > rest {
            return Ok((batches, Some(records.slice(at..))));
        }
        batches.push(records.slice(at..at + total));
        at += total;
    }
    Ok((batches, None))
}

/// Reads the header of one whole batch.
///
/// # Errors
///
/// A message when `batch` is shorter than a batch header.
pub fn batch_header(batch: &[u8]) -> Result<BatchHeader, String> {
    if batch.len() < BATCH_HEADER_BYTES {
        return Err(format!("batch of {} bytes is too short", batch.len()));
    }
    let be_i32 = |at: usize| i32::from_be_bytes(batch[at..at + 4].try_into().expect("4 bytes"));
    Ok(BatchHeader {
        base_offset: i64::from_be_bytes(batch[0..8].try_into().expect("8 bytes")),
        batch_length: be_i32(BATCH_LENGTH_AT),
        partition_leader_epoch: be_i32(PARTITION_LEADER_EPOCH_AT),
        magic: batch[MAGIC_AT] as i8,
        crc: u32::from_be_bytes(batch[CRC_AT..CRC_AT + 4].try_into().expect("4 bytes")),
        attributes: i16::from_be_bytes(batch[21..23].try_into().expect("2 bytes")),
        last_offset_delta: be_i32(23),
        base_timestamp: i64::from_be_bytes(batch[27..35].try_into().expect("8 bytes")),
        max_timestamp: i64::from_be_bytes(batch[35..43].try_into().expect("8 bytes")),
        records_count: be_i32(57),
    })
}

/// Whether the stored CRC-32C of a whole batch matches its content.
pub fn crc_is_valid(batch: &[u8]) -> bool {
    batch_header(batch).is_ok_and(|h| h.crc == crc32c::crc32c(&batch[ATTRIBUTES_AT..]))
}

/// `batch` with the two fields a broker stamps (base offset and partition
/// leader epoch, both outside the CRC) zeroed, for byte comparisons between
/// what was produced and what is served.
pub fn without_broker_stamps(batch: &[u8]) -> Vec<u8> {
    let mut out = batch.to_vec();
    if out.len() >= BATCH_HEADER_BYTES {
        out[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].fill(0);
        out[PARTITION_LEADER_EPOCH_AT..PARTITION_LEADER_EPOCH_AT + 4].fill(0);
    }
    out
}

/// Decodes every whole batch in `records` (CRCs checked, decompressed) into
/// records with absolute offsets.
///
/// # Errors
///
/// A message naming the batch that fails to decode (bad CRC, unknown codec,
/// malformed records).
pub fn decode_records(records: &Bytes) -> Result<Vec<Record>, String> {
    let (batches, _partial) = split_batches(records)?;
    let mut out = Vec::new();
    for (i, batch) in batches.into_iter().enumerate() {
        if !crc_is_valid(&batch) {
            return Err(format!("batch {i}: CRC mismatch"));
        }
        let mut buf = batch.clone();
        let set = RecordBatchDecoder::decode(&mut buf).map_err(|e| format!("batch {i}: {e}"))?;
        out.extend(set.records);
    }
    Ok(out)
}

/// The value of `record` as UTF-8 text (lossy), or `"<null>"`.
pub fn value_text(record: &Record) -> String {
    record
        .value
        .as_ref()
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_else(|| "<null>".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ten_records() -> Vec<NewRecord> {
        (0..10)
            .map(|i| NewRecord::value(format!("record-{i}"), 1_000 + i))
            .collect()
    }

    #[test]
    fn encoded_batch_round_trips_for_every_codec() {
        for compression in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let batch = encode_batch(&ten_records(), compression).unwrap();
            let header = batch_header(&batch).unwrap();
            assert_eq!(header.codec(), codec_id(compression));
            assert_eq!(header.records_count, 10);
            assert_eq!(header.last_offset_delta, 9);
            let base_sequence = i32::from_be_bytes(batch[53..57].try_into().unwrap());
            assert_eq!(base_sequence, NO_SEQUENCE, "non-idempotent batch");
            assert!(crc_is_valid(&batch));
            let records = decode_records(&batch).unwrap();
            let values: Vec<String> = records.iter().map(value_text).collect();
            let expected: Vec<String> = (0..10).map(|i| format!("record-{i}")).collect();
            assert_eq!(values, expected);
        }
    }

    #[test]
    fn split_batches_separates_whole_batches_and_a_partial_tail() {
        let a = encode_batch(&ten_records()[..2], Compression::None).unwrap();
        let b = encode_batch(&ten_records()[2..], Compression::None).unwrap();
        let mut joined = BytesMut::new();
        joined.extend_from_slice(&a);
        joined.extend_from_slice(&b);
        joined.extend_from_slice(&b[..30]);
        let (batches, partial) = split_batches(&joined.freeze()).unwrap();
        assert_eq!(batches, vec![a, b.clone()]);
        assert_eq!(partial.unwrap(), b.slice(..30));
    }

    #[test]
    fn corrupted_batch_fails_the_crc_check() {
        let batch = encode_batch(&ten_records(), Compression::None).unwrap();
        let mut bad = batch.to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert!(!crc_is_valid(&bad));
        assert!(decode_records(&Bytes::from(bad)).is_err());
        // The broker stamps live outside the CRC.
        let mut stamped = batch.to_vec();
        stamped[..8].copy_from_slice(&42i64.to_be_bytes());
        stamped[12..16].copy_from_slice(&7i32.to_be_bytes());
        assert!(crc_is_valid(&stamped));
        assert_eq!(
            without_broker_stamps(&stamped),
            without_broker_stamps(&batch)
        );
    }
}
