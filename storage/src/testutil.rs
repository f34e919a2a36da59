//! Test helpers: a minimal encoder of uncompressed v2 record batches, so the
//! storage tests do not depend on `kafka-protocol`. Compiled for tests only.

use crate::batch::{ATTRIBUTES_OFFSET, CRC_OFFSET};

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

/// Appends `v` as a zigzag varint/varlong.
pub(crate) fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

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
    let mut out = batch_with_records(&records, count, count - 1, spec.attributes);
    out[0..8].copy_from_slice(&spec.base_offset.to_be_bytes());
    out[12..16].copy_from_slice(&spec.partition_leader_epoch.to_be_bytes());
    out[27..35].copy_from_slice(&base_ts.to_be_bytes());
    out[35..43].copy_from_slice(&max_ts.to_be_bytes());
    out[43..51].copy_from_slice(&spec.producer_id.to_be_bytes());
    out[51..53].copy_from_slice(&spec.producer_epoch.to_be_bytes());
    out[53..57].copy_from_slice(&spec.base_sequence.to_be_bytes());
    stamp_crc(&mut out);
    out
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
    let mut out = Vec::with_capacity(61 + records.len());
    out.extend_from_slice(&0i64.to_be_bytes());
    out.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out.push(2);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&attributes.to_be_bytes());
    out.extend_from_slice(&last_offset_delta.to_be_bytes());
    out.extend_from_slice(&0i64.to_be_bytes());
    out.extend_from_slice(&0i64.to_be_bytes());
    out.extend_from_slice(&(-1i64).to_be_bytes());
    out.extend_from_slice(&(-1i16).to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(records);
    stamp_crc(&mut out);
    out
}

/// Recomputes the CRC of a whole batch in place.
pub(crate) fn stamp_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
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
