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

fn put_varint(out: &mut Vec<u8>, v: i64) {
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
    let mut out = Vec::with_capacity(61 + records.len());
    out.extend_from_slice(&spec.base_offset.to_be_bytes());
    out.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes());
    out.extend_from_slice(&spec.partition_leader_epoch.to_be_bytes());
    out.push(2);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&spec.attributes.to_be_bytes());
    out.extend_from_slice(&((spec.timestamps.len() - 1) as i32).to_be_bytes());
    out.extend_from_slice(&base_ts.to_be_bytes());
    out.extend_from_slice(&max_ts.to_be_bytes());
    out.extend_from_slice(&spec.producer_id.to_be_bytes());
    out.extend_from_slice(&spec.producer_epoch.to_be_bytes());
    out.extend_from_slice(&spec.base_sequence.to_be_bytes());
    out.extend_from_slice(&(spec.timestamps.len() as i32).to_be_bytes());
    out.extend_from_slice(&records);
    let crc = crc32c::crc32c(&out[ATTRIBUTES_OFFSET..]);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// A batch of `count` records with timestamps `ts, ts+1, ...`.
pub(crate) fn simple_batch(count: usize, value_len: usize, ts: i64) -> Vec<u8> {
    let timestamps: Vec<i64> = (0..count as i64).map(|i| ts + i).collect();
    build_batch(&BatchSpec::new(&timestamps, value_len))
}
