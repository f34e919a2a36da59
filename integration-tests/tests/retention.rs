//! Retention and the log start offset, end to end (issue 3 point 2):
//! DeleteRecords (KIP-107) moves the log start offset, Fetch below it
//! answers OFFSET_OUT_OF_RANGE, ListOffsets earliest follows it and it
//! survives a crash; `retention.bytes` and `retention.ms` delete old
//! segments from the background retention task
//! (`log.retention.check.interval.ms`).

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_records_response::DeleteRecordsPartitionResult;
use kafka_protocol::messages::{
    ApiKey, DeleteRecordsRequest, FetchRequest, ListOffsetsRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use weir_integration_tests::records::{self, NewRecord};
use weir_integration_tests::{RawClient, TestBroker};

use crate::support::{self, error_code, FetchSpec, TopicInfo};

const OFFSET_OUT_OF_RANGE: i16 = 1;
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;
const DAY_MS: i64 = 24 * 3_600_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

fn batch(value: &[u8], timestamp: i64) -> Bytes {
    records::encode_batch(
        &[NewRecord::value(value.to_vec(), timestamp)],
        Compression::None,
    )
    .expect("encode batch")
}

/// Versions the tests speak, negotiated with the broker.
struct Versions {
    produce: i16,
    fetch: i16,
    list_offsets: i16,
    delete_records: i16,
}

fn negotiate(client: &mut RawClient) -> (Versions, kafka_protocol::messages::ApiVersionsResponse) {
    let versions = support::api_versions(client);
    (
        Versions {
            produce: support::newest::<ProduceRequest>(&versions, ApiKey::Produce),
            fetch: support::newest::<FetchRequest>(&versions, ApiKey::Fetch),
            list_offsets: support::newest::<ListOffsetsRequest>(&versions, ApiKey::ListOffsets),
            delete_records: support::newest::<DeleteRecordsRequest>(
                &versions,
                ApiKey::DeleteRecords,
            ),
        },
        versions,
    )
}

pub(crate) fn delete_records(
    client: &mut RawClient,
    version: i16,
    topic: &str,
    offset: i64,
) -> DeleteRecordsPartitionResult {
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(offset)])]);
    let response = client
        .send(&request, version)
        .unwrap_or_else(|e| panic!("DeleteRecords v{version}: {e}"));
    response.topics[0].partitions[0].clone()
}

fn earliest(client: &mut RawClient, v: &Versions, topic: &TopicInfo) -> i64 {
    let r = support::list_offset(client, v.list_offsets, topic, 0, EARLIEST);
    assert_eq!(r.error_code, error_code::NONE, "ListOffsets earliest");
    r.offset
}

/// The error code and log start offset of a Fetch of partition 0 at `offset`.
fn fetch_at(client: &mut RawClient, v: &Versions, topic: &TopicInfo, offset: i64) -> (i16, i64) {
    let mut spec = FetchSpec::one(v.fetch, 0, offset);
    spec.max_wait_ms = 0;
    let partitions = support::fetch(client, topic, &spec);
    let data = &partitions[&0];
    (data.error_code, data.log_start_offset)
}

/// Total bytes of the partition's `.log` files on disk, and whether any
/// `.deleted` file is still there.
fn on_disk(broker: &TestBroker, topic: &str) -> (u64, bool) {
    let dir = broker.data_dir().join(format!("{topic}-0"));
    let mut size = 0;
    let mut deleted = false;
    for entry in std::fs::read_dir(&dir).expect("partition dir").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".log") {
            size += entry.metadata().expect("stat").len();
        }
        deleted |= name.ends_with(".deleted");
    }
    (size, deleted)
}

/// DeleteRecords moves the log start offset inside the log: Fetch below it
/// answers OFFSET_OUT_OF_RANGE with the new log start offset, ListOffsets
/// earliest and Produce report it, an offset past the high watermark is
/// refused, and the new start survives a crash (SIGKILL) because it is
/// checkpointed before DeleteRecords answers. -1 deletes up to the high
/// watermark.
#[test]
fn delete_records_moves_the_log_start_offset_and_survives_a_crash() {
    let mut broker = support::start_broker();
    let mut client = support::connect(&broker);
    let (v, versions) = negotiate(&mut client);
    assert_eq!(v.delete_records, 2);
    let topic = support::ensure_topic(&mut client, &versions, "trimmed");
    for i in 0..10 {
        let offset = support::produce_ok(&mut client, v.produce, &topic, 0, batch(b"r", 1_000 + i));
        assert_eq!(offset, i);
    }
    assert_eq!(earliest(&mut client, &v, &topic), 0);

    for version in 0..=v.delete_records {
        // Every version answers; the second and later are no-ops at 4.
        let r = delete_records(&mut client, version, "trimmed", 4);
        assert_eq!(
            (r.error_code, r.low_watermark),
            (error_code::NONE, 4),
            "v{version}"
        );
    }
    assert_eq!(earliest(&mut client, &v, &topic), 4);
    assert_eq!(
        fetch_at(&mut client, &v, &topic, 3),
        (OFFSET_OUT_OF_RANGE, 4)
    );
    assert_eq!(
        fetch_at(&mut client, &v, &topic, 0),
        (OFFSET_OUT_OF_RANGE, 4)
    );
    let records = support::fetch_records(&mut client, v.fetch, &topic, 0, 4);
    let (batches, _) = records::split_batches(&records).expect("batches");
    assert_eq!(
        records::batch_header(&batches[0])
            .expect("header")
            .base_offset,
        4
    );

    let beyond = delete_records(&mut client, v.delete_records, "trimmed", 11);
    assert_eq!(
        (beyond.error_code, beyond.low_watermark),
        (OFFSET_OUT_OF_RANGE, -1)
    );
    let unknown = delete_records(&mut client, v.delete_records, "no-such-topic", 0);
    assert_eq!(unknown.error_code, error_code::UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(earliest(&mut client, &v, &topic), 4);

    broker.kill9().expect("SIGKILL");
    broker.start_again().expect("restarting weir");
    let mut client = support::connect(&broker);
    let (v, _) = negotiate(&mut client);
    assert_eq!(earliest(&mut client, &v, &topic), 4);
    assert_eq!(
        fetch_at(&mut client, &v, &topic, 3),
        (OFFSET_OUT_OF_RANGE, 4)
    );
    let produced = support::produce(&mut client, v.produce, &topic, 0, batch(b"after", 2_000));
    assert_eq!(
        (
            produced.error_code,
            produced.base_offset,
            produced.log_start_offset
        ),
        (error_code::NONE, 10, 4)
    );

    let all = delete_records(&mut client, v.delete_records, "trimmed", -1);
    assert_eq!((all.error_code, all.low_watermark), (error_code::NONE, 11));
    assert_eq!(earliest(&mut client, &v, &topic), 11);
    let latest = support::list_offset(&mut client, v.list_offsets, &topic, 0, LATEST);
    assert_eq!(latest.offset, 11);
    assert_eq!(
        fetch_at(&mut client, &v, &topic, 10),
        (OFFSET_OUT_OF_RANGE, 11)
    );
    assert_eq!(
        fetch_at(&mut client, &v, &topic, 11),
        (error_code::NONE, 11)
    );
}

/// A topic with `segment.bytes=1048576` and `retention.bytes=5242880`
/// receiving 50 MB (the issue's acceptance point) shrinks to about `retention.bytes` on disk once the retention task runs:
/// whole old segments are deleted (their files removed), ListOffsets
/// earliest moves past 0 and Fetch at 0 is OFFSET_OUT_OF_RANGE, while the
/// newest records stay readable.
#[test]
fn retention_bytes_keeps_about_retention_bytes_on_disk() {
    // The issue's acceptance scale: 1 MiB segments, 5 MiB retention, 50 MB
    // written.
    const SEGMENT_BYTES: u64 = 1024 * 1024;
    const RETENTION_BYTES: u64 = 5 * 1024 * 1024;
    let broker = TestBroker::builder()
        .override_config("log.retention.check.interval.ms", "100")
        .start()
        .expect("starting weir");
    let mut client = support::connect(&broker);
    let (v, versions) = negotiate(&mut client);
    let topic = support::create_topic(
        &mut client,
        &versions,
        "bounded",
        &[
            ("segment.bytes", &SEGMENT_BYTES.to_string()),
            ("retention.bytes", &RETENTION_BYTES.to_string()),
        ],
    );
    let value = vec![b'b'; 64 * 1024];
    let batches = 800;
    for i in 0..batches {
        support::produce_ok(
            &mut client,
            v.produce,
            &topic,
            0,
            batch(&value, now_ms() + i),
        );
    }
    let (size, earliest_offset) = support::poll_until(
        Duration::from_secs(60),
        "retention.bytes to trim the partition",
        || {
            let (size, deleted) = on_disk(&broker, "bounded");
            let start = earliest(&mut client, &v, &topic);
            (size < RETENTION_BYTES + SEGMENT_BYTES && start > 0 && !deleted)
                .then_some((size, start))
        },
    );
    assert!(
        size >= RETENTION_BYTES,
        "kept {size} bytes, below retention.bytes"
    );
    assert!(earliest_offset < batches);
    assert_eq!(
        fetch_at(&mut client, &v, &topic, 0),
        (OFFSET_OUT_OF_RANGE, earliest_offset)
    );
    let records = support::fetch_records(&mut client, v.fetch, &topic, 0, batches - 1);
    let (fetched, _) = records::split_batches(&records).expect("batches");
    assert_eq!(
        records::batch_header(&fetched[0])
            .expect("header")
            .base_offset,
        batches - 1
    );
}

/// `retention.ms` compares each segment's largest record timestamp with
/// the clock: records produced with CreateTime timestamps two days old on a
/// one-hour topic are deleted by the retention task, while the segment
/// holding today's records stays.
#[test]
fn retention_ms_deletes_segments_whose_records_are_old() {
    let broker = TestBroker::builder()
        .override_config("log.retention.check.interval.ms", "100")
        .start()
        .expect("starting weir");
    let mut client = support::connect(&broker);
    let (v, versions) = negotiate(&mut client);
    let topic = support::create_topic(
        &mut client,
        &versions,
        "aged",
        // Kafka's test-only key: segment.bytes is at least 1 MiB (KIP-1030).
        &[
            ("internal.segment.bytes", "4096"),
            ("retention.ms", "3600000"),
        ],
    );
    let value = vec![b'a'; 1000];
    let old = now_ms() - 2 * DAY_MS;
    for i in 0..9 {
        support::produce_ok(&mut client, v.produce, &topic, 0, batch(&value, old + i));
    }
    // About 1070 bytes a batch: three fit a 4096-byte segment, so the old
    // records fill segments 0, 3 and 6 and the young ones start segment 9.
    let first_young = 9;
    for i in 0..3 {
        support::produce_ok(
            &mut client,
            v.produce,
            &topic,
            0,
            batch(&value, now_ms() + i),
        );
    }
    let start = support::poll_until(
        Duration::from_secs(60),
        "retention.ms to delete the old segments",
        || {
            let start = earliest(&mut client, &v, &topic);
            (start > first_young - 3).then_some(start)
        },
    );
    // A retention pass may also run while the old records are produced:
    // with every segment expired it rolls the active one and deletes them
    // all (Kafka's `deleteRetentionMsBreachedSegments`), so the segment
    // the young records land in may begin with up to two old ones (seen
    // under load: log start 8). No segment of old records only is kept.
    assert!(
        start > first_young - 3 && start <= first_young,
        "log start {start}: the old segments are gone and the young records' segment stays"
    );
    assert_eq!(
        fetch_at(&mut client, &v, &topic, 0),
        (OFFSET_OUT_OF_RANGE, start)
    );
    let records = support::fetch_records(&mut client, v.fetch, &topic, 0, first_young);
    assert!(!records.is_empty());
    let latest = support::list_offset(&mut client, v.list_offsets, &topic, 0, LATEST);
    assert_eq!(latest.offset, 12);
}
