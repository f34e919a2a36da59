//! Fuzz target for record batch validation (issue 17), compiled only with
//! the `fuzzing` feature. The `weir-fuzz` crate (`fuzz/`) runs it under
//! cargo-afl and replays its committed corpus on every `cargo test`.
//!
//! The property is the one the broker relies on: no input makes batch
//! validation panic, and memory stays bounded (decompression is capped by
//! [`MAX_DECOMPRESSED_REQUEST_BYTES`] per request and
//! [`MAX_DECOMPRESSED_BATCH_BYTES`](crate::compression::MAX_DECOMPRESSED_BATCH_BYTES)
//! per batch). Nothing here asserts a decoded value: Kafka's rules are the
//! unit tests' business.

use crate::batch::{
    self, KeyValue, RecordBatchHeader, RecordRules, ATTRIBUTES_OFFSET, CRC_OFFSET, LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
};
use crate::compression::{self, DecompressionBudget, MAX_DECOMPRESSED_REQUEST_BYTES};
use crate::log::TimestampType;
use crate::TopicPartition;

/// A fixed broker clock for the timestamp rules, ms since the epoch.
const NOW_MS: i64 = 1_700_000_000_000;

/// Runs `data` through every check a batch meets on its way into a log:
/// a follower's `RecordBatchHeader::validate_replicated`, the leader's
/// `RecordBatchHeader::validate` batch after batch, the records section
/// ([`batch::validate_records`], [`batch::validate_records_with`] under
/// structure-only and under strict topic rules, `read_key_values`), and for
/// compressed batches the streaming validation under one request budget
/// ([`compression::validate_compressed_batch`]) and the whole-batch
/// decompression the group loader uses ([`compression::decompress`]).
///
/// `data` is one or more concatenated batches as a Produce request or a
/// segment holds them. It runs twice: as given, and with every batch's
/// CRC-32C recomputed, so the fuzzer reaches the checks behind the CRC.
pub fn fuzz_record_batch(data: &[u8]) {
    check_batches(data);
    let fixed = with_valid_crcs(data);
    if fixed != data {
        check_batches(&fixed);
    }
}

fn check_batches(data: &[u8]) {
    let _ = batch::records_section(data);
    let _ = RecordBatchHeader::validate_replicated(data);
    let topic_partition = TopicPartition::new("fuzz", 0);
    let strict = RecordRules {
        timestamp_type: TimestampType::CreateTime,
        now_ms: NOW_MS,
        timestamp_before_max_ms: 3_600_000,
        timestamp_after_max_ms: 3_600_000,
        require_keys: Some(&topic_partition),
    };
    let mut budget = DecompressionBudget::new(MAX_DECOMPRESSED_REQUEST_BYTES);
    let mut rest = data;
    while !rest.is_empty() {
        let Ok(header) = RecordBatchHeader::validate(rest) else {
            return;
        };
        let (whole, tail) = rest.split_at(header.size_in_bytes());
        rest = tail;
        let section = batch::records_section(whole);
        match header.compression_codec() {
            0 => {
                let _ = batch::validate_records(&header, section);
                let _ = batch::validate_records_with(&header, section, &strict);
                let _ = batch::read_key_values(section);
            }
            codec => {
                let _ = compression::validate_compressed_batch(
                    &header,
                    whole,
                    &RecordRules::STRUCTURE_ONLY,
                    &mut budget,
                );
                if let Ok(records) = compression::decompress(codec, section) {
                    let _ = batch::read_key_values(&records);
                }
            }
        }
    }
}

/// `data` with the CRC-32C of each batch it holds recomputed (batch lengths
/// as declared, clamped to what is there), so a fuzz target reaches the
/// checks behind the CRC. Also used by the broker's `__consumer_offsets`
/// target.
pub fn with_valid_crcs(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    let mut at = 0usize;
    while out.len() - at >= RECORD_BATCH_OVERHEAD {
        let length = i32::from_be_bytes([out[at + 8], out[at + 9], out[at + 10], out[at + 11]]);
        let size = (length.max(0) as usize)
            .saturating_add(LOG_OVERHEAD)
            .clamp(RECORD_BATCH_OVERHEAD, out.len() - at);
        let crc = crc32c::crc32c(&out[at + ATTRIBUTES_OFFSET..at + size]);
        out[at + CRC_OFFSET..at + CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        at += size;
    }
    out
}

/// Seeds for [`fuzz_record_batch`], named `<what>.bin`: valid batches
/// uncompressed and in each codec, with a producer id, LogAppendTime, a
/// tombstone and null keys, and two batches back to back.
pub fn record_batch_seeds() -> Vec<(String, Vec<u8>)> {
    let records = [
        KeyValue {
            key: Some(b"key-0"),
            value: Some(b"value-0"),
        },
        KeyValue {
            key: Some(b"key-1"),
            value: None,
        },
        KeyValue {
            key: None,
            value: Some(b"a value without a key"),
        },
    ];
    let Some(plain) = batch::write_key_value_batch(&records, NOW_MS) else {
        return Vec::new();
    };
    let Ok(header) = RecordBatchHeader::validate(&plain) else {
        return Vec::new();
    };
    let section = batch::records_section(&plain).to_vec();
    let mut seeds = vec![("uncompressed.bin".to_string(), plain.clone())];
    for (codec, name) in [(1u8, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd")] {
        if let Ok(compressed) = compression::compress(codec, &section) {
            let mut h = header;
            h.attributes |= i16::from(codec);
            seeds.push((format!("{name}.bin"), batch::write_batch(&h, &compressed)));
        }
    }
    let mut idempotent = header;
    idempotent.producer_id = 1000;
    idempotent.producer_epoch = 3;
    idempotent.base_sequence = 7;
    seeds.push((
        "idempotent.bin".to_string(),
        batch::write_batch(&idempotent, &section),
    ));
    let mut log_append_time = header;
    log_append_time.attributes |= 0x08;
    seeds.push((
        "log_append_time.bin".to_string(),
        batch::write_batch(&log_append_time, &section),
    ));
    let mut two = plain.clone();
    two.extend_from_slice(&plain);
    seeds.push(("two_batches.bin".to_string(), two));
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_is_a_valid_batch_set() {
        for (name, seed) in record_batch_seeds() {
            let mut rest = &seed[..];
            while !rest.is_empty() {
                let header =
                    RecordBatchHeader::validate(rest).unwrap_or_else(|e| panic!("{name}: {e}"));
                rest = &rest[header.size_in_bytes()..];
            }
            fuzz_record_batch(&seed);
        }
        assert_eq!(record_batch_seeds().len(), 8);
    }

    #[test]
    fn recomputed_crcs_make_a_damaged_batch_pass_the_crc_check() {
        let (_, mut seed) = record_batch_seeds().remove(0);
        let last = seed.len() - 1;
        seed[last] ^= 0x55;
        assert!(RecordBatchHeader::validate(&seed).is_err());
        assert!(RecordBatchHeader::validate(&with_valid_crcs(&seed)).is_ok());
    }
}
