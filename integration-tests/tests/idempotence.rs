//! Idempotent producers (KIP-98, KIP-360) against a raw client: a retried
//! batch gets its original offsets and is stored once, a sequence gap gets
//! OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch INVALID_PRODUCER_EPOCH, and
//! the producer state survives a graceful restart and a kill -9 (rebuilt
//! from the log).

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, FetchRequest, InitProducerIdRequest, ProduceRequest};
use kafka_protocol::records::Compression;
use weir_integration_tests::records::{self, NewRecord};
use weir_integration_tests::RawClient;

use crate::support::{self, error_code, TopicInfo};

const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;

/// A batch of `count` records from `producer_id`/`epoch` starting at
/// sequence `seq` (header fields edited, CRC-32C recomputed).
fn idempotent_batch(producer_id: i64, epoch: i16, seq: i32, count: usize, tag: &str) -> Bytes {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64;
    let records: Vec<NewRecord> = (0..count)
        .map(|i| NewRecord::value(format!("{tag}-{i}"), now_ms + i as i64))
        .collect();
    let mut batch = records::encode_batch(&records, Compression::None)
        .expect("encode batch")
        .to_vec();
    batch[43..51].copy_from_slice(&producer_id.to_be_bytes());
    batch[51..53].copy_from_slice(&epoch.to_be_bytes());
    batch[53..57].copy_from_slice(&seq.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(batch)
}

fn init_producer_id(client: &mut RawClient) -> (i64, i16) {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000);
    let response = client.send(&request, 4).expect("InitProducerId v4");
    assert_eq!(response.error_code, error_code::NONE);
    (response.producer_id.0, response.producer_epoch)
}

/// Base offsets of every batch stored in the partition, read with Fetch.
fn stored_batch_offsets(client: &mut RawClient, version: i16, topic: &TopicInfo) -> Vec<i64> {
    let mut offsets = Vec::new();
    let mut next = 0;
    loop {
        let bytes = support::fetch_records(client, version, topic, 0, next);
        if bytes.is_empty() {
            return offsets;
        }
        let mut at = 0;
        while at + 12 <= bytes.len() {
            let base = i64::from_be_bytes(bytes[at..at + 8].try_into().unwrap());
            let len = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
            if at + 12 + len > bytes.len() {
                break;
            }
            let last_delta = i32::from_be_bytes(bytes[at + 23..at + 27].try_into().unwrap());
            offsets.push(base);
            next = base + last_delta as i64 + 1;
            at += 12 + len;
        }
    }
}

#[test]
fn idempotent_producer_retries_gaps_and_fencing() {
    let mut broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let topic = support::ensure_topic(&mut client, &versions, "idempotent");
    let (pid, epoch) = init_producer_id(&mut client);

    let first = idempotent_batch(pid, epoch, 0, 3, "a");
    let base = support::produce_ok(&mut client, produce_version, &topic, 0, first.clone());
    assert_eq!(base, 0);
    // A retry (same sequence range) answers the original base offset.
    let retry = support::produce_ok(&mut client, produce_version, &topic, 0, first.clone());
    assert_eq!(retry, 0);
    let second = idempotent_batch(pid, epoch, 3, 2, "b");
    assert_eq!(
        support::produce_ok(&mut client, produce_version, &topic, 0, second.clone()),
        3
    );
    assert_eq!(
        stored_batch_offsets(&mut client, fetch_version, &topic),
        vec![0, 3],
        "each batch is stored once"
    );

    // A sequence gap is refused and appends nothing.
    let gap = support::produce(
        &mut client,
        produce_version,
        &topic,
        0,
        idempotent_batch(pid, epoch, 9, 1, "gap"),
    );
    assert_eq!(gap.error_code, OUT_OF_ORDER_SEQUENCE_NUMBER);

    // A newer epoch starting at 0 fences the older one.
    let bumped = epoch + 1;
    assert_eq!(
        support::produce_ok(
            &mut client,
            produce_version,
            &topic,
            0,
            idempotent_batch(pid, bumped, 0, 1, "c")
        ),
        5
    );
    let fenced = support::produce(
        &mut client,
        produce_version,
        &topic,
        0,
        idempotent_batch(pid, epoch, 5, 1, "old"),
    );
    assert_eq!(fenced.error_code, INVALID_PRODUCER_EPOCH);

    // An unknown producer may start at any sequence (KIP-360).
    let (other, other_epoch) = init_producer_id(&mut client);
    assert_eq!(
        support::produce_ok(
            &mut client,
            produce_version,
            &topic,
            0,
            idempotent_batch(other, other_epoch, 17, 1, "d")
        ),
        6
    );
    assert_eq!(
        stored_batch_offsets(&mut client, fetch_version, &topic),
        vec![0, 3, 5, 6]
    );

    // The state is rebuilt from the log after a graceful restart ...
    broker.restart().expect("restart");
    let snapshot = broker
        .data_dir()
        .join("idempotent-0")
        .join("00000000000000000007.snapshot");
    assert!(
        snapshot.exists(),
        "clean shutdown writes a producer snapshot at the log end offset"
    );
    let mut client = support::connect(&broker);
    let again = idempotent_batch(pid, bumped, 0, 1, "c");
    assert_eq!(
        support::produce_ok(&mut client, produce_version, &topic, 0, again.clone()),
        5
    );
    let gap = support::produce(
        &mut client,
        produce_version,
        &topic,
        0,
        idempotent_batch(other, other_epoch, 19, 1, "gap"),
    );
    assert_eq!(gap.error_code, OUT_OF_ORDER_SEQUENCE_NUMBER);

    // ... and after a crash (acks=all made the batches durable).
    broker.kill9().expect("kill -9");
    broker.start_again().expect("start again");
    let mut client = support::connect(&broker);
    assert_eq!(
        support::produce_ok(&mut client, produce_version, &topic, 0, again),
        5
    );
    let fenced = support::produce(
        &mut client,
        produce_version,
        &topic,
        0,
        idempotent_batch(pid, epoch, 5, 1, "old"),
    );
    assert_eq!(fenced.error_code, INVALID_PRODUCER_EPOCH);
    assert_eq!(
        stored_batch_offsets(&mut client, fetch_version, &topic),
        vec![0, 3, 5, 6]
    );
}

/// A producer idle for `producer.id.expiration.ms` is forgotten at a
/// retention check: its next batch is accepted at any sequence, as for an
/// unknown producer (KIP-360). Until then a gap is refused.
#[test]
fn idle_producers_expire() {
    let broker = weir_integration_tests::TestBroker::builder()
        .override_config("producer.id.expiration.ms", "3000")
        .override_config("log.retention.check.interval.ms", "100")
        .start()
        .expect("starting weir");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let topic = support::ensure_topic(&mut client, &versions, "expiring");
    let (pid, epoch) = init_producer_id(&mut client);
    support::produce_ok(
        &mut client,
        produce_version,
        &topic,
        0,
        idempotent_batch(pid, epoch, 0, 1, "a"),
    );
    let gap = idempotent_batch(pid, epoch, 40, 1, "gap");
    let first = support::produce(&mut client, produce_version, &topic, 0, gap.clone());
    assert_eq!(first.error_code, OUT_OF_ORDER_SEQUENCE_NUMBER);
    let base = support::poll_until(
        std::time::Duration::from_secs(30),
        "the idle producer to expire",
        || {
            let r = support::produce(&mut client, produce_version, &topic, 0, gap.clone());
            match r.error_code {
                error_code::NONE => Some(r.base_offset),
                OUT_OF_ORDER_SEQUENCE_NUMBER => None,
                other => panic!("unexpected error {other}"),
            }
        },
    );
    assert_eq!(base, 1);
}
