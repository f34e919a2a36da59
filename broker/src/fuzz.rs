//! Fuzz target for `__consumer_offsets` records (issue 17), compiled only
//! with the `fuzzing` feature. The `weir-fuzz` crate (`fuzz/`) runs it
//! under cargo-afl and replays its committed corpus on every `cargo test`.
//!
//! The property: no bytes in an offsets partition make the group loader or
//! the record decoders panic, and memory stays bounded (decompression is
//! capped per batch by storage). A new group coordinator replays whatever
//! its replica holds, including what another broker (or Kafka) wrote.

use std::collections::BTreeMap;

use bytes::Bytes;
use weir_storage::batch::{write_key_value_batch, KeyValue};
use weir_storage::TopicPartition;

use crate::group::offsets_topic::{encode_group_write, replay_batches};
use crate::group::records::{
    decode_group_metadata_value, decode_key, decode_offset_commit_value, encode_group_metadata_key,
    encode_group_metadata_value, encode_offset_commit_key, encode_offset_commit_value,
    MAX_VALUE_VERSION,
};
use crate::group::{
    GroupMetadataRecord, GroupWrite, MemberMetadataRecord, OffsetAndMetadata, OFFSETS_TOPIC,
};

/// A commit time for the seeds, ms since the epoch.
const NOW_MS: i64 = 1_700_000_000_000;

/// Runs `data` through the `__consumer_offsets` decoders: as a key
/// ([`decode_key`]), as an OffsetCommitValue and as a GroupMetadataValue,
/// and as the bytes of an offsets partition replayed by the group loader
/// (`offsets_topic::replay_batches`: batch headers, validation,
/// decompression, records, keys and values), as given and with every
/// batch's CRC-32C recomputed so the fuzzer reaches past the CRC check.
pub fn fuzz_consumer_offsets(data: &[u8]) {
    let _ = decode_key(data);
    let _ = decode_offset_commit_value(data);
    let _ = decode_group_metadata_value(data);
    let tp = TopicPartition::new(OFFSETS_TOPIC, 0);
    let _ = replay_batches(&tp, data, 0, &mut BTreeMap::new());
    let fixed = weir_storage::fuzz::with_valid_crcs(data);
    if fixed != data {
        let _ = replay_batches(&tp, &fixed, 0, &mut BTreeMap::new());
    }
}

/// Seeds for [`fuzz_consumer_offsets`]: every key kind, OffsetCommitValue
/// and GroupMetadataValue at every version 0-4, and a stored batch of one
/// group write (group metadata with two members, two commits and a
/// tombstone) as the coordinator appends it.
pub fn consumer_offsets_seeds() -> Vec<(String, Vec<u8>)> {
    let orders = TopicPartition::new("orders", 3);
    let offset = OffsetAndMetadata {
        committed_offset: 42,
        committed_leader_epoch: 5,
        metadata: "checkpoint".to_string(),
        commit_timestamp_ms: NOW_MS,
        expire_timestamp_ms: Some(NOW_MS + 86_400_000),
    };
    let member = |id: &str| MemberMetadataRecord {
        member_id: id.to_string(),
        group_instance_id: Some(format!("{id}-instance")),
        client_id: "client".to_string(),
        client_host: "/127.0.0.1".to_string(),
        rebalance_timeout_ms: 300_000,
        session_timeout_ms: 45_000,
        subscription: Bytes::from_static(b"\x00\x01\x00\x00\x00\x01\x00\x06orders"),
        assignment: Bytes::from_static(
            b"\x00\x01\x00\x00\x00\x01\x00\x06orders\x00\x00\x00\x01\x00\x00\x00\x03",
        ),
    };
    let metadata = GroupMetadataRecord {
        protocol_type: "consumer".to_string(),
        generation: 4,
        protocol: Some("range".to_string()),
        leader: Some("member-a".to_string()),
        current_state_timestamp_ms: NOW_MS,
        members: vec![member("member-a"), member("member-b")],
    };
    let mut seeds = Vec::new();
    if let Ok(key) = encode_offset_commit_key("group", &orders) {
        seeds.push(("offset_commit_key.bin".to_string(), key));
    }
    if let Ok(key) = encode_group_metadata_key("group") {
        seeds.push(("group_metadata_key.bin".to_string(), key));
    }
    for version in 0..=MAX_VALUE_VERSION {
        if let Ok(value) = encode_offset_commit_value(&offset, version) {
            seeds.push((format!("offset_commit_value_v{version}.bin"), value));
        }
        if let Ok(value) = encode_group_metadata_value(&metadata, version) {
            seeds.push((format!("group_metadata_value_v{version}.bin"), value));
        }
    }
    let write = GroupWrite {
        metadata: Some(Some(metadata)),
        offsets: vec![
            (orders, Some(offset.clone())),
            (
                TopicPartition::new("payments", 0),
                Some(OffsetAndMetadata {
                    expire_timestamp_ms: None,
                    ..offset
                }),
            ),
            (TopicPartition::new("gone", 1), None),
        ],
    };
    if let Ok(records) = encode_group_write("group", &write) {
        let key_values: Vec<KeyValue<'_>> = records
            .iter()
            .map(|(key, value)| KeyValue {
                key: Some(key.as_slice()),
                value: value.as_deref(),
            })
            .collect();
        if let Some(batch) = write_key_value_batch(&key_values, NOW_MS) {
            seeds.push(("group_write_batch.bin".to_string(), batch));
        }
    }
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The batch seed is what the loader reads back: one group with its
    /// metadata and the two live commits.
    #[test]
    fn the_batch_seed_replays_into_its_group() {
        let seeds = consumer_offsets_seeds();
        assert_eq!(seeds.len(), 13);
        let (_, batch) = seeds
            .iter()
            .find(|(name, _)| name == "group_write_batch.bin")
            .unwrap();
        let mut groups = BTreeMap::new();
        let tp = TopicPartition::new(OFFSETS_TOPIC, 0);
        assert_eq!(replay_batches(&tp, batch, 0, &mut groups), Some(4));
        let group = &groups["group"];
        assert_eq!(group.metadata.as_ref().unwrap().members.len(), 2);
        assert_eq!(group.offsets.len(), 2);
        for (_, seed) in &seeds {
            fuzz_consumer_offsets(seed);
        }
    }

    /// The base offset is outside the CRC, so a stored batch may claim any
    /// offset; one near `i64::MAX` must be skipped, not overflow the
    /// loader's offset arithmetic (a panic in debug builds and under the
    /// fuzzer's overflow checks).
    #[test]
    fn a_batch_at_the_end_of_the_offset_space_does_not_overflow_the_loader() {
        let seeds = consumer_offsets_seeds();
        let (_, batch) = seeds
            .iter()
            .find(|(name, _)| name == "group_write_batch.bin")
            .unwrap();
        let tp = TopicPartition::new(OFFSETS_TOPIC, 0);
        for base in [i64::MAX, i64::MAX - 1, i64::MAX - 3] {
            let mut batch = batch.clone();
            batch[..8].copy_from_slice(&base.to_be_bytes());
            let mut groups = BTreeMap::new();
            assert_eq!(replay_batches(&tp, &batch, 0, &mut groups), None, "{base}");
            assert!(groups.is_empty(), "{base}: {groups:?}");
            fuzz_consumer_offsets(&batch);
        }
    }
}
