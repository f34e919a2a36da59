//! Hostile and malformed input found by attacking the broker: each test is
//! the regression test of one finding, asserting Kafka's answer (error code
//! or connection close) and that the broker keeps serving.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, CreateTopicsRequest, DeleteTopicsRequest, FetchRequest,
    MetadataRequest, ProduceRequest, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use uuid::Uuid;
use weir_integration_tests::records;
use weir_integration_tests::requests;
use weir_integration_tests::{RawClient, TestBroker};

use crate::support::{self, error_code, FetchSpec};

const INVALID_RECORD: i16 = 87;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;

/// Rewrites the batch CRC (CRC-32C over attributes..end) after an edit.
fn fix_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

fn produce_request(topic: &str, acks: i16, records: Bytes) -> ProduceRequest {
    requests::produce_request(topic, 0, acks, records)
}

fn produce_error(
    client: &mut RawClient,
    version: i16,
    topic: &str,
    acks: i16,
    records: Bytes,
) -> i16 {
    let response = client
        .send(&produce_request(topic, acks, records), version)
        .expect("Produce");
    response.responses[0].partition_responses[0].error_code
}

fn setup(broker: &TestBroker, topic: &str) -> (RawClient, i16, support::TopicInfo) {
    let mut client = support::connect(broker);
    let versions = support::api_versions(&mut client);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let info = support::ensure_topic(&mut client, &versions, topic);
    (client, produce_version, info)
}

/// `min.insync.replicas` above the replica count is capped at it (Kafka
/// 4.1's `Partition.effectiveMinIsr`, used by `appendRecordsToLeader`): a
/// single-replica topic with `min.insync.replicas=2` takes acks=all and
/// acks=1. NOT_ENOUGH_REPLICAS with several replicas is
/// `replication::min_isr_refuses_acks_all_and_hides_acks_1_records_until_the_isr_covers_them`.
#[test]
fn min_insync_replicas_is_capped_at_the_replica_count() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("min-isr")))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("min.insync.replicas"))
                .with_value(Some(StrBytes::from_static_str("2")))])]);
    let created = client.send(&create, 7).expect("CreateTopics");
    assert_eq!(created.topics[0].error_code, error_code::NONE);
    assert_eq!(
        produce_error(
            &mut client,
            9,
            "min-isr",
            -1,
            records::plain_batch(&["a"], 1_000)
        ),
        error_code::NONE
    );
    assert_eq!(
        produce_error(
            &mut client,
            9,
            "min-isr",
            1,
            records::plain_batch(&["b"], 1_000)
        ),
        error_code::NONE
    );
}

/// DeleteTopics v6 naming a topic by both name and id is INVALID_REQUEST and
/// deletes nothing (Kafka: "You may not specify both topic name and topic id").
#[test]
fn delete_topics_by_name_and_id_is_invalid() {
    let broker = support::start_broker();
    let (mut client, _, topic) = setup(&broker, "keep-me");
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![DeleteTopicState::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("keep-me"))))
            .with_topic_id(Uuid::from_u128(0x4242))]);
    let response = client.send(&request, 6).expect("DeleteTopics v6");
    assert_eq!(
        response.responses[0].error_code,
        error_code::INVALID_REQUEST
    );
    let metadata = client
        .send(
            &MetadataRequest::default()
                .with_topics(None)
                .with_allow_auto_topic_creation(false),
            12,
        )
        .expect("Metadata");
    assert!(
        metadata.topics.iter().any(|t| t.topic_id == topic.id),
        "the topic must still exist"
    );
}

/// A failed acks=0 produce closes the connection, since the client gets no
/// response to learn of the error from (Kafka's closeConnection for acks=0).
#[test]
fn failed_acks_zero_produce_closes_the_connection() {
    let broker = support::start_broker();
    let (mut client, version, _) = setup(&broker, "acks-zero");
    let mut corrupt = records::plain_batch(&["x"], 1_000).to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff; // CRC no longer matches
    let header = client.header::<ProduceRequest>(version);
    client
        .write_request(
            header,
            &produce_request("acks-zero", 0, Bytes::from(corrupt)),
        )
        .expect("write acks=0 produce");
    let probe = client.send(&ApiVersionsRequest::default(), 0);
    assert!(
        probe.is_err(),
        "the connection should be closed, got {probe:?}"
    );
    let mut fresh = support::connect(&broker);
    support::api_versions(&mut fresh);
}

/// Fetch max_bytes of 0 returns exactly the first batch (KIP-74), not
/// everything.
#[test]
fn fetch_max_bytes_zero_returns_one_batch() {
    let broker = support::start_broker();
    let (mut client, version, topic) = setup(&broker, "max-bytes-zero");
    for v in ["a", "b", "c"] {
        support::produce_ok(
            &mut client,
            version,
            &topic,
            0,
            records::plain_batch(&[v], 1_000),
        );
    }
    let versions = support::api_versions(&mut client);
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let spec = FetchSpec {
        version: fetch_version,
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes: 0,
        partitions: vec![(0, 0, 1 << 20)],
    };
    let data = support::fetch(&mut client, &topic, &spec);
    let records = data[&0].records.clone().unwrap_or_default();
    let (batches, _) = records::split_batches(&records).expect("batches");
    assert_eq!(batches.len(), 1);
}

/// ApiVersions v3+ with an invalid client software name gets INVALID_REQUEST
/// (KIP-511 validation).
#[test]
fn api_versions_rejects_invalid_client_software_name() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("bad name!"))
        .with_client_software_version(StrBytes::from_static_str("1.0"));
    let response = client.send(&request, 3).expect("ApiVersions v3");
    assert_eq!(response.error_code, error_code::INVALID_REQUEST);
}

/// Magic 0/1 batches and records too short for a batch header are
/// INVALID_RECORD on Produce v3+ (Kafka's ProduceRequest.validateRecords).
#[test]
fn old_magic_and_short_records_are_invalid_record() {
    let broker = support::start_broker();
    let (mut client, version, _) = setup(&broker, "magic");
    let mut old_magic = records::plain_batch(&["m"], 1_000).to_vec();
    old_magic[16] = 1;
    fix_crc(&mut old_magic);
    assert_eq!(
        produce_error(&mut client, version, "magic", 1, Bytes::from(old_magic)),
        INVALID_RECORD
    );
    assert_eq!(
        produce_error(
            &mut client,
            version,
            "magic",
            1,
            Bytes::from_static(&[0u8; 11])
        ),
        INVALID_RECORD
    );
    assert_eq!(
        produce_error(&mut client, version, "magic", 1, Bytes::new()),
        INVALID_RECORD
    );
}

/// A transactional batch without a transactional id is refused with
/// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka does; nothing is stored.
#[test]
fn transactional_batch_without_transactional_id_is_refused() {
    let broker = support::start_broker();
    let (mut client, version, topic) = setup(&broker, "txn");
    let mut txn = records::plain_batch(&["t"], 1_000).to_vec();
    txn[22] |= 0x10; // attributes bit 4: transactional
    txn[43..51].copy_from_slice(&7i64.to_be_bytes()); // producer id
    fix_crc(&mut txn);
    assert_eq!(
        produce_error(&mut client, version, "txn", 1, Bytes::from(txn)),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    assert_eq!(
        support::produce_ok(
            &mut client,
            version,
            &topic,
            0,
            records::plain_batch(&["ok"], 1_000)
        ),
        0
    );
}

/// One connection cannot make the broker buffer more than about
/// `socket.request.max.bytes` of requests: with long-poll fetches parked, the
/// broker stops reading, so the client's writes stop making progress long
/// before it has sent everything.
#[test]
fn one_connection_cannot_pin_unbounded_request_memory() {
    const MAX_REQUEST: usize = 1 << 20;
    const FRAME: usize = 900 * 1024;
    const FRAMES: usize = 60; // ~53 MiB if the broker read everything
    let broker = TestBroker::builder()
        .override_config("socket.request.max.bytes", &MAX_REQUEST.to_string())
        .start()
        .expect("starting weir");
    let (_client, _, topic) = setup(&broker, "parked");

    // A Fetch v4 at the log end that parks for 60 s, padded with trailing
    // bytes to FRAME (decoders ignore bytes after the body).
    let fetch = support::fetch_request(
        &topic,
        &FetchSpec {
            version: 4,
            max_wait_ms: 60_000,
            min_bytes: 1,
            max_bytes: 1 << 20,
            partitions: vec![(0, 0, 1 << 20)],
        },
    );
    let mut stream = TcpStream::connect(broker.bootstrap()).expect("connect");
    stream
        .set_write_timeout(Some(Duration::from_secs(3)))
        .expect("write timeout");
    let mut written = 0usize;
    let mut blocked = false;
    for i in 0..FRAMES {
        let mut body = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(ApiKey::Fetch as i16)
            .with_request_api_version(4)
            .with_correlation_id(i as i32)
            .with_client_id(Some(StrBytes::from_static_str("pin")))
            .encode(&mut body, 1)
            .expect("header");
        fetch.encode(&mut body, 4).expect("body");
        body.resize(FRAME, 0);
        let mut frame = BytesMut::with_capacity(FRAME + 4);
        frame.put_u32(FRAME as u32);
        frame.extend_from_slice(&body);
        match stream.write_all(&frame) {
            Ok(()) => written += frame.len(),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                blocked = true;
                break;
            }
            Err(e) => panic!("write failed after {written} bytes: {e}"),
        }
    }
    assert!(
        blocked,
        "the broker read all {FRAMES} frames ({written} bytes) without back-pressure"
    );
    assert!(
        written < 24 << 20,
        "the broker accepted {written} bytes before pushing back"
    );
    // Other connections are unaffected.
    let mut other = support::connect(&broker);
    support::api_versions(&mut other);
}

fn create_topic(client: &mut RawClient, name: &str, partitions: i32) -> i16 {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]);
    client.send(&request, 7).expect("CreateTopics").topics[0].error_code
}

/// A partition count that would need more than 10,000 metadata records is
/// POLICY_VIOLATION (Kafka's MAX_RECORDS_PER_USER_OP), never an attempt to
/// allocate it (2^31-1 partitions once aborted the process).
#[test]
fn excessive_partition_count_is_a_policy_violation() {
    const POLICY_VIOLATION: i16 = 44;
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    assert_eq!(
        create_topic(&mut client, "huge", i32::MAX),
        POLICY_VIOLATION
    );
    assert_eq!(create_topic(&mut client, "big", 100_000), POLICY_VIOLATION);
    assert_eq!(create_topic(&mut client, "fine", 3), error_code::NONE);
}

/// `__cluster_metadata` is the metadata quorum's own log: creating it (and so
/// ever deleting it, which would wipe the quorum) is INVALID_REQUEST.
#[test]
fn cluster_metadata_topic_cannot_be_created() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    assert_eq!(
        create_topic(&mut client, "__cluster_metadata", 1),
        error_code::INVALID_REQUEST
    );
    let metadata = client
        .send(
            &MetadataRequest::default()
                .with_topics(Some(vec![
                    kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_static_str(
                            "__cluster_metadata",
                        )))),
                ]))
                .with_allow_auto_topic_creation(true),
            12,
        )
        .expect("Metadata");
    assert_ne!(
        metadata.topics[0].error_code,
        error_code::NONE,
        "auto-creation must refuse it too"
    );
}

/// A topic with the longest legal name (249 characters) can be deleted, and
/// the broker restarts afterwards (the delete directory name is shortened to
/// fit 255 bytes, as Kafka's KAFKA-6795 fix does).
#[test]
fn longest_topic_name_can_be_deleted_and_the_broker_restarts() {
    let mut broker = support::start_broker();
    let name = "L".repeat(249);
    {
        let (mut client, version, topic) = setup(&broker, &name);
        support::produce_ok(
            &mut client,
            version,
            &topic,
            0,
            records::plain_batch(&["long"], 1_000),
        );
        let request = DeleteTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topic_names(vec![TopicName(StrBytes::from_string(name.clone()))]);
        let response = client.send(&request, 5).expect("DeleteTopics");
        assert_eq!(response.responses[0].error_code, error_code::NONE);
    }
    broker.restart().expect("restart after deleting the topic");
    let (mut client, version, topic) = setup(&broker, &name);
    assert_eq!(
        support::produce_ok(
            &mut client,
            version,
            &topic,
            0,
            records::plain_batch(&["again"], 1_000)
        ),
        0
    );
}

fn zigzag(buf: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            buf.push(byte);
            return;
        }
        buf.push(byte | 0x80);
    }
}

/// One record (v2 format) with the given offset delta and value.
fn record(offset_delta: i64, value: &[u8]) -> Vec<u8> {
    let mut body = vec![0u8]; // attributes
    zigzag(&mut body, 0); // timestamp delta
    zigzag(&mut body, offset_delta);
    zigzag(&mut body, -1); // null key
    zigzag(&mut body, value.len() as i64);
    body.extend_from_slice(value);
    zigzag(&mut body, 0); // no headers
    let mut out = Vec::new();
    zigzag(&mut out, body.len() as i64);
    out.extend_from_slice(&body);
    out
}

/// A whole v2 batch around a (possibly compressed) records section.
fn raw_batch(codec: i16, count: i32, section: &[u8]) -> Bytes {
    let mut b = Vec::new();
    b.extend_from_slice(&0i64.to_be_bytes()); // base offset
    b.extend_from_slice(&((49 + section.len()) as i32).to_be_bytes()); // batch length
    b.extend_from_slice(&0i32.to_be_bytes()); // partition leader epoch
    b.push(2); // magic
    b.extend_from_slice(&0u32.to_be_bytes()); // crc, fixed below
    b.extend_from_slice(&codec.to_be_bytes()); // attributes
    b.extend_from_slice(&(count - 1).to_be_bytes()); // last offset delta
    b.extend_from_slice(&1_000i64.to_be_bytes()); // base timestamp
    b.extend_from_slice(&1_000i64.to_be_bytes()); // max timestamp
    b.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    b.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    b.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    b.extend_from_slice(&count.to_be_bytes());
    b.extend_from_slice(section);
    fix_crc(&mut b);
    Bytes::from(b)
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).expect("gzip");
    encoder.finish().expect("gzip")
}

/// Batches with a valid CRC but broken records (offset deltas not 0,1,..,
/// codec ids Kafka does not define, payloads that do not decompress) are
/// INVALID_RECORD and never stored, plain or compressed (Kafka's
/// LogValidator); well-formed hand-built batches of both kinds are accepted.
#[test]
fn records_inside_a_batch_are_validated() {
    let broker = support::start_broker();
    let (mut client, version, topic) = setup(&broker, "record-validation");
    let good: Vec<u8> = [record(0, b"a"), record(1, b"b")].concat();
    let gapped: Vec<u8> = [record(0, b"a"), record(5, b"b")].concat();
    let repeated: Vec<u8> = [record(0, b"a"), record(0, b"b")].concat();
    let mut trailing = good.clone();
    trailing.extend_from_slice(&[1, 2, 3, 4]);

    for (what, section) in [
        ("gap", &gapped),
        ("repeat", &repeated),
        ("trailing", &trailing),
    ] {
        for (codec, bytes) in [(0i16, section.clone()), (1, gzip(section))] {
            assert_eq!(
                produce_error(
                    &mut client,
                    version,
                    "record-validation",
                    1,
                    raw_batch(codec, 2, &bytes)
                ),
                INVALID_RECORD,
                "{what} with codec {codec}"
            );
        }
    }
    assert_eq!(
        produce_error(
            &mut client,
            version,
            "record-validation",
            1,
            raw_batch(5, 2, &good)
        ),
        INVALID_RECORD,
        "unknown codec 5"
    );
    assert_eq!(
        produce_error(
            &mut client,
            version,
            "record-validation",
            1,
            raw_batch(1, 2, b"not gzip at all")
        ),
        INVALID_RECORD,
        "gzip flag on plain bytes"
    );
    assert_eq!(
        support::produce_ok(&mut client, version, &topic, 0, raw_batch(0, 2, &good)),
        0
    );
    assert_eq!(
        support::produce_ok(
            &mut client,
            version,
            &topic,
            0,
            raw_batch(1, 2, &gzip(&good))
        ),
        2
    );
}
