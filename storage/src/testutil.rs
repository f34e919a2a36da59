//! Test helpers: a minimal encoder of uncompressed v2 record batches, so the
//! storage tests do not depend on `kafka-protocol`. Compiled for tests only.

use crate::batch::{write_batch, RecordBatchHeader};

/// What to put in a hand-built batch.
#[derive(Clone, Debug)]
pub(crate) struct BatchSpec {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub attributes: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// One timestamp (ms) per record.
    pub timestamps: Vec<i64>,
    /// Bytes in each record's value (filled with a per-record pattern).
    pub value_len: usize,
}

impl BatchSpec {
    pub(crate) fn new(timestamps: &[i64], value_len: usize) -> Self {
        BatchSpec {
            base_offset: 0,
            partition_leader_epoch: -1,
            attributes: 0,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            timestamps: timestamps.to_vec(),
            value_len,
        }
    }
}

pub(crate) use crate::batch::put_varlong as put_varint;

/// Encodes one uncompressed v2 batch with a valid CRC.
pub(crate) fn build_batch(spec: &BatchSpec) -> Vec<u8> {
    assert!(!spec.timestamps.is_empty());
    let base_ts = spec.timestamps[0];
    let max_ts = *spec.timestamps.iter().max().unwrap();
    let mut records = Vec::new();
    let mut record = Vec::new();
    for (i, ts) in spec.timestamps.iter().enumerate() {
        record.clear();
        record.push(0); // attributes
        put_varint(&mut record, ts - base_ts);
        put_varint(&mut record, i as i64);
        put_varint(&mut record, -1); // null key
        put_varint(&mut record, spec.value_len as i64);
        record.extend((0..spec.value_len).map(|j| (i + j) as u8));
        put_varint(&mut record, 0); // no headers
        put_varint(&mut records, record.len() as i64);
        records.extend_from_slice(&record);
    }
    let count = spec.timestamps.len() as i32;
    write_batch(
        &RecordBatchHeader {
            base_offset: spec.base_offset,
            partition_leader_epoch: spec.partition_leader_epoch,
            attributes: spec.attributes,
            last_offset_delta: count - 1,
            base_timestamp: base_ts,
            max_timestamp: max_ts,
            producer_id: spec.producer_id,
            producer_epoch: spec.producer_epoch,
            base_sequence: spec.base_sequence,
            records_count: count,
            ..empty_header()
        },
        &records,
    )
}

/// A header of no batch: offsets, timestamps and lengths 0, no producer.
/// `batch_length` and `crc` are recomputed by [`write_batch`].
pub(crate) fn empty_header() -> RecordBatchHeader {
    RecordBatchHeader {
        base_offset: 0,
        batch_length: 0,
        partition_leader_epoch: -1,
        magic: 2,
        crc: 0,
        attributes: 0,
        last_offset_delta: 0,
        base_timestamp: 0,
        max_timestamp: 0,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        records_count: 0,
    }
}

/// A v2 batch with a valid CRC around an arbitrary records section (which
/// may be malformed): `records_count = count`, the given last offset delta
/// and attributes, timestamps 0, no producer.
pub(crate) fn batch_with_records(
    records: &[u8],
    count: i32,
    last_offset_delta: i32,
    attributes: i16,
) -> Vec<u8> {
    write_batch(
        &RecordBatchHeader {
            attributes,
            last_offset_delta,
            records_count: count,
            ..empty_header()
        },
        records,
    )
}

/// One record of a records section, fields as given (lengths may lie).
#[derive(Clone, Debug, Default)]
pub(crate) struct RawRecord<'a> {
    /// The record length to declare; `None` = the true body length.
    pub length: Option<i64>,
    pub timestamp_delta: i64,
    pub offset_delta: i64,
    /// Declared key length and key bytes (`-1` and empty for a null key).
    pub key: (i64, &'a [u8]),
    pub value: (i64, &'a [u8]),
    /// Declared header count; `None` = `headers.len()`.
    pub header_count: Option<i64>,
    pub headers: Vec<(&'a [u8], Option<&'a [u8]>)>,
}

impl RawRecord<'_> {
    /// A record with a null key, the given value and no headers.
    pub(crate) fn new(offset_delta: i64, value: &[u8]) -> RawRecord<'_> {
        RawRecord {
            offset_delta,
            key: (-1, &[]),
            value: (value.len() as i64, value),
            ..RawRecord::default()
        }
    }

    /// Appends the record (length prefix included) to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let mut body = vec![0u8]; // attributes
        put_varint(&mut body, self.timestamp_delta);
        put_varint(&mut body, self.offset_delta);
        put_varint(&mut body, self.key.0);
        body.extend_from_slice(self.key.1);
        put_varint(&mut body, self.value.0);
        body.extend_from_slice(self.value.1);
        put_varint(
            &mut body,
            self.header_count.unwrap_or(self.headers.len() as i64),
        );
        for (key, value) in &self.headers {
            put_varint(&mut body, key.len() as i64);
            body.extend_from_slice(key);
            match value {
                Some(v) => {
                    put_varint(&mut body, v.len() as i64);
                    body.extend_from_slice(v);
                }
                None => put_varint(&mut body, -1),
            }
        }
        put_varint(out, self.length.unwrap_or(body.len() as i64));
        out.extend_from_slice(&body);
    }
}

/// A batch of `count` records with timestamps `ts, ts+1, ...`.
pub(crate) fn simple_batch(count: usize, value_len: usize, ts: i64) -> Vec<u8> {
    let timestamps: Vec<i64> = (0..count as i64).map(|i| ts + i).collect();
    build_batch(&BatchSpec::new(&timestamps, value_len))
}
