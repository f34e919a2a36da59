//! Log compaction end to end (issue 3 point 3): a topic with
//! `cleanup.policy=compact` is compacted by the background log cleaner
//! (`log.cleaner.backoff.ms`) and reads back exactly the newest value of
//! every key, tombstones included while `delete.retention.ms` runs; records
//! without a key are refused with INVALID_RECORD (87).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, FetchRequest, ProduceRequest};
use kafka_protocol::records::Compression;
use weir_integration_tests::records::{self, NewRecord};
use weir_integration_tests::{RawClient, TestBroker};

use crate::support::{self, TopicInfo};

const KEYS: usize = 1_000;
const ROUNDS: usize = 20;
const KEYS_PER_BATCH: usize = 100;
const INVALID_RECORD: i16 = 87;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

fn keyed(key: &str, value: Option<&str>, timestamp: i64) -> NewRecord {
    NewRecord {
        key: Some(Bytes::from(key.to_owned())),
        value: value.map(|v| Bytes::from(v.to_owned())),
        timestamp,
    }
}

/// Bytes of the partition's `.log` files on disk.
fn log_bytes(broker: &TestBroker, topic: &str) -> u64 {
    std::fs::read_dir(broker.data_dir().join(format!("{topic}-0")))
        .expect("partition dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().expect("stat").len())
        .sum()
}

/// Consumes the whole partition as a client does (fetch, advance past the
/// last batch returned) and returns `(offset, key, value)` of every record.
fn consume(
    client: &mut RawClient,
    fetch: i16,
    topic: &TopicInfo,
    end: i64,
) -> Vec<(i64, String, Option<String>)> {
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < end {
        let bytes = support::fetch_records(client, fetch, topic, 0, offset);
        let (batches, _) = records::split_batches(&bytes).expect("batches");
        assert!(
            !batches.is_empty(),
            "no batch at offset {offset} below {end}"
        );
        for batch in batches {
            let header = records::batch_header(&batch).expect("header");
            assert!(
                records::crc_is_valid(&batch),
                "CRC of batch {}",
                header.base_offset
            );
            if header.records_count > 0 {
                for r in records::decode_records(&batch).expect("records") {
                    let key = String::from_utf8_lossy(r.key.as_ref().expect("a key")).into_owned();
                    let value = r
                        .value
                        .as_ref()
                        .map(|v| String::from_utf8_lossy(v).into_owned());
                    out.push((r.offset, key, value));
                }
            }
            assert!(
                header.last_offset() + 1 > offset,
                "consumer must advance past {offset}"
            );
            offset = header.last_offset() + 1;
        }
    }
    out
}

/// The acceptance test: 1,000 keys written 20 times each (plain and gzip
/// batches), tombstones for every tenth key, then compaction; a consumer
/// reads back exactly the newest value (or tombstone) of every key and far
/// fewer records than were written.
#[test]
fn a_compacted_topic_reads_back_the_newest_value_of_every_key() {
    let broker = TestBroker::builder()
        .override_config("log.cleaner.backoff.ms", "100")
        .start()
        .expect("starting weir");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let fetch = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let topic = support::create_topic(
        &mut client,
        &versions,
        "latest-values",
        &[
            ("cleanup.policy", "compact"),
            // Kafka's test-only key: segment.bytes is at least 1 MiB
            // (KIP-1030).
            ("internal.segment.bytes", "65536"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    let ts = now_ms();
    let mut expected: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut produced_bytes = 0u64;
    // Every acknowledged batch starts where the one before it ended: a
    // batch lost after its ack (the flake where the topic's first log was
    // deleted by an older metadata image) fails at the next produce.
    let mut next_offset = 0i64;
    for round in 0..ROUNDS {
        let compression = if round % 2 == 0 {
            Compression::None
        } else {
            Compression::Gzip
        };
        for chunk in (0..KEYS).collect::<Vec<_>>().chunks(KEYS_PER_BATCH) {
            let batch: Vec<NewRecord> = chunk
                .iter()
                .map(|k| {
                    let value = format!("value-{round}-{k}");
                    expected.insert(format!("key-{k:04}"), Some(value.clone()));
                    keyed(&format!("key-{k:04}"), Some(&value), ts)
                })
                .collect();
            let bytes = records::encode_batch(&batch, compression).expect("encode");
            produced_bytes += bytes.len() as u64;
            let base = support::produce_ok(&mut client, produce, &topic, 0, bytes);
            assert_eq!(
                base, next_offset,
                "base offset of round {round}'s batch from key {}",
                chunk[0]
            );
            next_offset += chunk.len() as i64;
        }
    }
    let tombstones: Vec<NewRecord> = (0..KEYS)
        .step_by(10)
        .map(|k| {
            expected.insert(format!("key-{k:04}"), None);
            keyed(&format!("key-{k:04}"), None, ts)
        })
        .collect();
    let last = support::produce_ok(
        &mut client,
        produce,
        &topic,
        0,
        records::encode_batch(&tombstones, Compression::None).expect("encode"),
    );
    let end = last + tombstones.len() as i64;
    assert_eq!(end, (KEYS * ROUNDS + KEYS / 10) as i64);

    // The cleaner also runs during the writes: wait until the log holds
    // less than a quarter of the bytes produced.
    support::poll_until(
        Duration::from_secs(60),
        "the log cleaner to compact the topic",
        || (log_bytes(&broker, "latest-values") < produced_bytes / 4).then_some(()),
    );

    let consumed = consume(&mut client, fetch, &topic, end);
    let mut newest: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut last_offset = -1;
    for (offset, key, value) in &consumed {
        assert!(*offset > last_offset, "offsets must grow");
        last_offset = *offset;
        newest.insert(key.clone(), value.clone());
    }
    assert_eq!(newest, expected);
    // Old values are gone: at most the newest of each key in the cleaned
    // segments plus what is still in the active segment.
    assert!(
        consumed.len() < KEYS * ROUNDS / 4,
        "{} records survive of {}",
        consumed.len(),
        KEYS * ROUNDS
    );
    // The log end offset did not move.
    let next = support::produce_ok(
        &mut client,
        produce,
        &topic,
        0,
        records::encode_batch(&[keyed("key-0001", Some("after"), ts)], Compression::None)
            .expect("encode"),
    );
    assert_eq!(next, end);
}

/// Records without a key are refused on a compacted topic, plain or
/// compressed, with INVALID_RECORD and the record's index in
/// `record_errors` (Kafka's `LogValidator`).
#[test]
fn keyless_records_on_a_compacted_topic_get_invalid_record() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let topic = support::create_topic(
        &mut client,
        &versions,
        "keys-only",
        &[("cleanup.policy", "compact,delete")],
    );
    for compression in [Compression::None, Compression::Gzip, Compression::Lz4] {
        let batch = records::encode_batch(
            &[
                keyed("k", Some("v"), now_ms()),
                NewRecord::value("no key", now_ms()),
            ],
            compression,
        )
        .expect("encode");
        let response = support::produce(&mut client, produce, &topic, 0, batch);
        assert_eq!(response.error_code, INVALID_RECORD, "{compression:?}");
        let message = response
            .error_message
            .as_deref()
            .map(|m| m.to_string())
            .unwrap_or_default();
        assert!(
            message.contains(
                "Compacted topic cannot accept message without key in topic partition keys-only-0"
            ),
            "{message}"
        );
        if produce >= 8 {
            assert_eq!(response.record_errors.len(), 1, "{compression:?}");
            assert_eq!(response.record_errors[0].batch_index, 1);
        }
    }
    // Keyed records are accepted, and nothing was appended before.
    let ok = support::produce_ok(
        &mut client,
        produce,
        &topic,
        0,
        records::encode_batch(&[keyed("k", Some("v"), now_ms())], Compression::None)
            .expect("encode"),
    );
    assert_eq!(ok, 0);
}
