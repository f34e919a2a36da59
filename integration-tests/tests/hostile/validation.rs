//! Hostile inputs: record validation (issue 15 scopes 3 and 5); see `super`
//! for the conventions. Decompression bombs of every codec (answered
//! INVALID_RECORD fast, validated off the threads that serve other
//! connections), producers lying about a batch's max timestamp (the broker
//! stores the real one, as Kafka's `LogValidator`), timestamps outside
//! `message.timestamp.before.max.ms` / `after.max.ms` (INVALID_TIMESTAMP,
//! KIP-937), a topic deleted under its producer (UNKNOWN_TOPIC_OR_PARTITION
//! or NOT_LEADER_OR_FOLLOWER, never a storage error), and pipelined
//! produces that must append in the order sent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, DeleteTopicsRequest, FetchRequest, ListOffsetsRequest,
    ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use weir_integration_tests::records::{self, NewRecord};
use weir_integration_tests::requests::produce_request;
use weir_integration_tests::{RawClient, TestBroker};
use weir_storage::compression;

use super::{report_rss, Bystander};
use crate::support::{self, TopicInfo};

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const INVALID_TIMESTAMP: i16 = 32;
const INVALID_RECORD: i16 = 87;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// Recomputes the CRC of a whole v2 batch after its bytes were edited.
fn restamp_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[records::ATTRIBUTES_AT..]);
    batch[records::CRC_AT..records::CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// A valid one-record batch of `compression` whose records section is
/// replaced by `payload` (lengths and CRC fixed): a batch whose header
/// claims the codec and one record, around whatever bytes `payload` holds.
fn around(compression: Compression, payload: &[u8]) -> Bytes {
    let template = records::encode_batch(&[NewRecord::value("x", now_ms())], compression)
        .expect("encoding a one-record batch");
    let mut batch = template[..records::BATCH_HEADER_BYTES].to_vec();
    batch.extend_from_slice(payload);
    let length = (batch.len() - 12) as i32;
    batch[records::BATCH_LENGTH_AT..records::BATCH_LENGTH_AT + 4]
        .copy_from_slice(&length.to_be_bytes());
    restamp_crc(&mut batch);
    Bytes::from(batch)
}

/// `batch` with its header max timestamp set to `max_timestamp` (CRC
/// recomputed): a producer lying about it.
fn lying_max_timestamp(batch: &Bytes, max_timestamp: i64) -> Bytes {
    let mut batch = batch.to_vec();
    batch[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
    restamp_crc(&mut batch);
    Bytes::from(batch)
}

/// A decompression bomb: `bytes` zeros compressed with `codec` (Weir's own
/// encoders, the same formats clients write), around a one-record header.
/// Built once per codec.
fn bomb(compression: Compression) -> Bytes {
    static BOMBS: OnceLock<Mutex<Vec<(i16, Bytes)>>> = OnceLock::new();
    let codec = records::codec_id(compression);
    let mut bombs = BOMBS.get_or_init(Default::default).lock().unwrap();
    if let Some((_, b)) = bombs.iter().find(|(c, _)| *c == codec) {
        return b.clone();
    }
    // Past the 128 MiB a batch could inflate to before; snappy expands at
    // most about 21 times, so its bomb is smaller to fit max.message.bytes.
    let bytes = if codec == 2 { 16 << 20 } else { 129 << 20 };
    let payload = compression::compress(codec as u8, &vec![0u8; bytes]).expect("compressing");
    let batch = around(compression, &payload);
    bombs.push((codec, batch.clone()));
    batch
}

/// The error code of the only partition of a Produce answer.
fn code_of(client: &mut RawClient, version: i16, request: &ProduceRequest) -> i16 {
    let response = client.send(request, version).expect("Produce answered");
    response.responses[0].partition_responses[0].error_code
}

/// A broker, a client on it, its ApiVersions and its newest Produce
/// version.
fn setup(broker: TestBroker) -> (TestBroker, RawClient, ApiVersionsResponse, i16) {
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    (broker, client, versions, produce_version)
}

/// Issue 15 finding: one Produce of 100 zstd bombs (one per partition,
/// each inflating past 128 MiB) stalled every client for 11 s while the
/// shared runtime threads decompressed them. Here three connections send
/// such a Produce at once (more than the runtime has worker threads on 2
/// cores); each bomb fails at its first record (INVALID_RECORD for all
/// 100), answered fast on a validation thread, and the bystander is served
/// throughout (before, it waited for the 13 s of decompression and missed
/// its bound).
#[test]
fn produces_of_100_zstd_bombs_are_answered_invalid_record_fast() {
    let (broker, mut client, versions, produce_version) =
        setup(support::start_broker_with_partitions(100));
    let bystander = Bystander::start(&broker, "bystander");
    let topic = support::ensure_topic(&mut client, &versions, "bombs");
    assert_eq!(topic.partitions, 100);
    let bomb = bomb(Compression::Zstd);
    let mut request = produce_request(&topic.name, 0, -1, bomb.clone());
    let template = request.topic_data[0].partition_data[0].clone();
    request.topic_data[0].partition_data =
        (0..100).map(|p| template.clone().with_index(p)).collect();
    let frame_bytes = bomb.len() * 100;
    let senders: Vec<_> = (0..3)
        .map(|_| {
            let mut hostile = support::connect(&broker);
            let request = request.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                let response = hostile
                    .send(&request, produce_version)
                    .expect("Produce answered");
                let codes: Vec<i16> = response.responses[0]
                    .partition_responses
                    .iter()
                    .map(|p| p.error_code)
                    .collect();
                (codes, started.elapsed())
            })
        })
        .collect();
    for sender in senders {
        let (codes, answered_in) = sender.join().expect("hostile sender");
        assert_eq!(codes, vec![INVALID_RECORD; 100]);
        println!("100 zstd bombs ({frame_bytes} bytes): answered in {answered_in:?}");
    }
    report_rss(&broker, "after 3 x 100 zstd bombs");
    bystander.finish("3 x 100 zstd bombs");
    // Still serving: a good zstd batch is accepted.
    let good = records::encode_batch(&[NewRecord::value("ok", now_ms())], Compression::Zstd)
        .expect("encoding");
    support::produce_ok(&mut client, produce_version, &topic, 7, good);
}

/// Bombs of every codec, and a batch of well-formed records that inflates
/// past the request's decompression budget (128 MiB, a Weir limit): each is
/// answered INVALID_RECORD, on one broker, while the bystander is served.
#[test]
fn bombs_of_every_codec_are_answered_invalid_record() {
    let (broker, mut client, versions, produce_version) = setup(support::start_broker());
    let bystander = Bystander::start(&broker, "bystander");
    let topic = support::ensure_topic(&mut client, &versions, "bombs");
    // 70 records of 2 MiB of zeros: valid records, 140 MiB decompressed.
    let big = vec![0u8; 2 << 20];
    let heavy: Vec<NewRecord> = (0..70)
        .map(|_| NewRecord::value(Bytes::from(big.clone()), now_ms()))
        .collect();
    let heavy = records::encode_batch(&heavy, Compression::Zstd).expect("encoding");
    let rows: Vec<(&str, Bytes)> = vec![
        ("gzip bomb", bomb(Compression::Gzip)),
        ("snappy bomb", bomb(Compression::Snappy)),
        ("lz4 bomb", bomb(Compression::Lz4)),
        ("zstd bomb", bomb(Compression::Zstd)),
        ("records past the request budget", heavy),
        (
            "gzip payload that is not gzip",
            around(Compression::Gzip, b"plainly not gzip"),
        ),
        (
            "zstd payload cut short",
            around(Compression::Zstd, &bomb(Compression::Zstd)[61..80]),
        ),
    ];
    for (what, batch) in rows {
        let request = produce_request(&topic.name, 0, -1, batch);
        let started = Instant::now();
        let code = code_of(&mut client, produce_version, &request);
        println!("{what}: error {code} in {:?}", started.elapsed());
        assert_eq!(code, INVALID_RECORD, "{what}");
    }
    report_rss(&broker, "after bombs of every codec");
    bystander.finish("bombs of every codec");
    assert_eq!(
        support::list_offset(&mut client, 7, &topic, 0, -1).offset,
        0,
        "nothing was appended"
    );
}

/// The stored batches of `topic`/0 from offset 0, split.
fn stored_batches(
    client: &mut RawClient,
    versions: &ApiVersionsResponse,
    topic: &TopicInfo,
) -> Vec<Bytes> {
    let fetch_version = support::newest::<FetchRequest>(versions, ApiKey::Fetch);
    let bytes = support::fetch_records(client, fetch_version, topic, 0, 0);
    let (batches, rest) = records::split_batches(&bytes).expect("whole batches");
    assert!(rest.is_none());
    batches
}

/// Issue 15 finding: a batch whose header max timestamp lies (2^62 while
/// its records say 5000) was trusted, so ListOffsets by time missed later
/// records and the segment escaped retention. Now the stored header holds
/// the records' real max timestamp (with a valid CRC), for uncompressed and
/// compressed batches (the compressed payload is not rewritten), and
/// retention by time removes the segment once its real records are old.
#[test]
fn a_lying_max_timestamp_is_replaced_by_the_real_one() {
    let (broker, mut client, versions, produce_version) = setup(
        TestBroker::builder()
            .override_config("log.retention.check.interval.ms", "100")
            .start()
            .expect("starting weir"),
    );
    let bystander = Bystander::start(&broker, "bystander");
    let list_version = support::newest::<ListOffsetsRequest>(&versions, ApiKey::ListOffsets);
    let topic = support::create_topic(&mut client, &versions, "lying", &[("retention.ms", "-1")]);
    let lie = 1i64 << 62;
    let plain = records::encode_batch(
        &[NewRecord::value("a", 5000), NewRecord::value("b", 5001)],
        Compression::None,
    )
    .unwrap();
    let gzip = records::encode_batch(&[NewRecord::value("c", 7000)], Compression::Gzip).unwrap();
    let gzip_lying = lying_max_timestamp(&gzip, lie);
    for batch in [
        lying_max_timestamp(&plain, lie),
        records::plain_batch(&["later"], 6000),
        gzip_lying.clone(),
    ] {
        support::produce_ok(&mut client, produce_version, &topic, 0, batch);
    }
    // ListOffsets by time finds the later records.
    let at = |client: &mut RawClient, ts| support::list_offset(client, list_version, &topic, 0, ts);
    assert_eq!(at(&mut client, 5500).offset, 2);
    assert_eq!(at(&mut client, 6500).offset, 3);
    if list_version >= 7 {
        let max = at(&mut client, -3);
        assert_eq!((max.offset, max.timestamp), (3, 7000));
    }
    // The stored headers hold the real max timestamps, with valid CRCs.
    let stored = stored_batches(&mut client, &versions, &topic);
    let maxes: Vec<i64> = stored
        .iter()
        .map(|b| records::batch_header(b).unwrap().max_timestamp)
        .collect();
    assert_eq!(maxes, [5001, 6000, 7000]);
    assert!(stored.iter().all(|b| records::crc_is_valid(b)));
    assert_eq!(
        &stored[2][records::BATCH_HEADER_BYTES..],
        &gzip_lying[records::BATCH_HEADER_BYTES..],
        "the compressed payload is stored as sent"
    );

    // Retention by time sees the real (old) timestamps.
    let old = support::create_topic(
        &mut client,
        &versions,
        "lying-old",
        &[("retention.ms", "3600000")],
    );
    support::produce_ok(
        &mut client,
        produce_version,
        &old,
        0,
        lying_max_timestamp(&plain, lie),
    );
    support::poll_until(
        Duration::from_secs(30),
        "retention to delete the old segment",
        || {
            let earliest = support::list_offset(&mut client, list_version, &old, 0, -2).offset;
            (earliest == 2).then_some(())
        },
    );
    bystander.finish("lying max timestamps");
}

/// KIP-937: CreateTime records outside `[now - before.max.ms, now +
/// after.max.ms]` are refused with INVALID_TIMESTAMP (the offending record
/// named in `record_errors`), compressed or not; Kafka 4's default
/// `after.max.ms` is one hour (KIP-1030), `before.max.ms` unbounded; a
/// LogAppendTime batch sent to a LogAppendTime topic is refused too.
#[test]
fn timestamps_outside_the_window_are_answered_invalid_timestamp() {
    let (broker, mut client, versions, produce_version) = setup(support::start_broker());
    let bystander = Bystander::start(&broker, "bystander");
    let window = support::create_topic(
        &mut client,
        &versions,
        "window",
        &[("message.timestamp.before.max.ms", "3600000")],
    );
    let defaults = support::create_topic(&mut client, &versions, "defaults", &[]);
    let append_time = support::create_topic(
        &mut client,
        &versions,
        "append-time",
        &[("message.timestamp.type", "LogAppendTime")],
    );
    let hours = |h: i64| now_ms() + h * 3_600_000;
    let one =
        |ts: i64, c: Compression| records::encode_batch(&[NewRecord::value("v", ts)], c).unwrap();
    let mut producer_set_append_time = one(now_ms(), Compression::None).to_vec();
    producer_set_append_time[records::ATTRIBUTES_AT + 1] |= 0x08;
    restamp_crc(&mut producer_set_append_time);
    let three = records::encode_batch(
        &[
            NewRecord::value("a", hours(0)),
            NewRecord::value("b", hours(2)),
            NewRecord::value("c", hours(0)),
        ],
        Compression::None,
    )
    .unwrap();
    // (what, topic, batch, expected code, offending record)
    let rows: Vec<(&str, &TopicInfo, Bytes, i16, Option<i32>)> = vec![
        ("now", &window, one(hours(0), Compression::None), NONE, None),
        (
            "2 h ago, before.max 1 h",
            &window,
            one(hours(-2), Compression::None),
            INVALID_TIMESTAMP,
            Some(0),
        ),
        (
            "2 h ahead",
            &window,
            one(hours(2), Compression::None),
            INVALID_TIMESTAMP,
            Some(0),
        ),
        (
            "2 h ahead, gzip",
            &window,
            one(hours(2), Compression::Gzip),
            INVALID_TIMESTAMP,
            Some(0),
        ),
        (
            "2 h ago, zstd",
            &window,
            one(hours(-2), Compression::Zstd),
            INVALID_TIMESTAMP,
            Some(0),
        ),
        (
            "second of three 2 h ahead",
            &window,
            three,
            INVALID_TIMESTAMP,
            Some(1),
        ),
        (
            "59 min ahead, default after.max",
            &defaults,
            one(hours(1) - 60_000, Compression::None),
            NONE,
            None,
        ),
        (
            "2 h ahead, default after.max",
            &defaults,
            one(hours(2), Compression::Lz4),
            INVALID_TIMESTAMP,
            Some(0),
        ),
        (
            "1970, default before.max",
            &defaults,
            one(5000, Compression::None),
            NONE,
            None,
        ),
        (
            "no timestamp (-1)",
            &window,
            one(-1, Compression::None),
            NONE,
            None,
        ),
        (
            "producer-set LogAppendTime",
            &append_time,
            Bytes::from(producer_set_append_time),
            INVALID_TIMESTAMP,
            Some(0),
        ),
    ];
    for (what, topic, batch, expected, record) in rows {
        let response = support::produce(&mut client, produce_version, topic, 0, batch);
        assert_eq!(
            response.error_code, expected,
            "{what}: {:?}",
            response.error_message
        );
        if let (Some(index), true) = (record, produce_version >= 8) {
            assert_eq!(
                response.record_errors.first().map(|e| e.batch_index),
                Some(index),
                "{what}"
            );
        }
    }
    bystander.finish("timestamps outside the window");
}

fn delete_topic(client: &mut RawClient, version: i16, name: &str) {
    let name = TopicName(StrBytes::from_string(name.to_owned()));
    let request = DeleteTopicsRequest::default().with_timeout_ms(30_000);
    // v6+ names topics in `topics`, earlier versions in `topic_names`.
    let request = if version >= 6 {
        request.with_topics(vec![DeleteTopicState::default().with_name(Some(name))])
    } else {
        request.with_topic_names(vec![name])
    };
    let response = client
        .send(&request, version)
        .unwrap_or_else(|e| panic!("DeleteTopics v{version}: {e}"));
    assert_eq!(response.responses[0].error_code, NONE);
}

/// Issue 15 finding: deleting a topic while producing to it logged "fsync
/// failed" and answered KAFKA_STORAGE_ERROR. Now, over several rounds of
/// create, produce and delete, acks=all appends that race with the deletion
/// answer only NONE, UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER,
/// and the broker logs no "fsync failed".
#[test]
fn producing_while_the_topic_is_deleted_answers_unknown_or_not_leader() {
    let (broker, mut client, versions, produce_version) = setup(support::start_broker());
    let bystander = Bystander::start(&broker, "bystander");
    let delete_version = support::newest::<DeleteTopicsRequest>(&versions, ApiKey::DeleteTopics);
    for round in 0..8 {
        let topic = support::create_topic(&mut client, &versions, "doomed", &[]);
        let stop = Arc::new(AtomicBool::new(false));
        let codes = Arc::new(Mutex::new(Vec::new()));
        let mut producers = Vec::new();
        for _ in 0..4 {
            let mut producer = support::connect(&broker);
            let (stop, codes, name) = (stop.clone(), codes.clone(), topic.name.clone());
            producers.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // Pipelined: five acks=all produces in flight.
                    let pending: Vec<_> = (0..5)
                        .map(|_| {
                            let request = produce_request(
                                &name,
                                0,
                                -1,
                                records::plain_batch(&["v"], now_ms()),
                            );
                            let header = producer.header::<ProduceRequest>(produce_version);
                            producer.write_request(header, &request).expect("write")
                        })
                        .collect();
                    for p in pending {
                        let response = producer
                            .read_response::<kafka_protocol::messages::ProduceResponse>(p)
                            .expect("Produce answered");
                        let code = response.body.responses[0].partition_responses[0].error_code;
                        codes.lock().unwrap().push(code);
                    }
                }
            }));
        }
        let count =
            |f: &dyn Fn(i16) -> bool| codes.lock().unwrap().iter().filter(|c| f(**c)).count();
        support::poll_until(Duration::from_secs(30), "produces to succeed", || {
            (count(&|c| c == NONE) >= 10).then_some(())
        });
        delete_topic(&mut client, delete_version, &topic.name);
        support::poll_until(
            Duration::from_secs(30),
            "produces to see the deletion",
            || (count(&|c| c != NONE) >= 6).then_some(()),
        );
        stop.store(true, Ordering::Relaxed);
        for p in producers {
            p.join().expect("producer thread");
        }
        let codes = codes.lock().unwrap();
        assert!(
            codes
                .iter()
                .all(|c| [NONE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER].contains(c)),
            "round {round}: codes {:?}",
            codes.iter().filter(|c| **c != NONE).collect::<Vec<_>>()
        );
    }
    bystander.finish("producing while deleting");
    let log =
        std::fs::read_to_string(broker.log_path()).unwrap_or_default() + &broker.stderr_tail();
    assert!(
        !log.contains("fsync failed"),
        "the broker logged a failed fsync"
    );
}

/// Validation of compressed batches awaits a validation thread, yet
/// pipelined produces on one connection append in the order sent: here a
/// slow compressed batch (20 records of 1 MiB) is followed at once by an
/// uncompressed one, several times; the offsets and the log follow the
/// sending order.
#[test]
fn pipelined_produces_append_in_the_order_sent() {
    let (broker, mut client, versions, produce_version) = setup(support::start_broker());
    let topic = support::ensure_topic(&mut client, &versions, "ordered");
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let big = vec![b'x'; 1 << 20];
    let mut pending = Vec::new();
    let mut sent = Vec::new();
    for i in 0..6 {
        let name = format!("m{i}");
        let batch = if i % 2 == 0 {
            let slow: Vec<NewRecord> = (0..20)
                .map(|j| {
                    let mut value = big.clone();
                    value[..name.len()].copy_from_slice(name.as_bytes());
                    value[name.len()] = b'0' + j as u8 % 10;
                    NewRecord::value(Bytes::from(value), now_ms())
                })
                .collect();
            records::encode_batch(&slow, Compression::Zstd).unwrap()
        } else {
            records::plain_batch(&[&name], now_ms())
        };
        sent.push(name);
        let request = produce_request(&topic.name, 0, -1, batch);
        let header = client.header::<ProduceRequest>(produce_version);
        pending.push(client.write_request(header, &request).expect("write"));
    }
    let mut offsets = Vec::new();
    for p in pending {
        let response = client
            .read_response::<kafka_protocol::messages::ProduceResponse>(p)
            .expect("Produce answered");
        let partition = &response.body.responses[0].partition_responses[0];
        assert_eq!(partition.error_code, NONE);
        offsets.push(partition.base_offset);
    }
    assert_eq!(offsets, [0, 20, 21, 41, 42, 62]);
    let stored = support::read_partition(&mut client, fetch_version, &topic, 0);
    let firsts: Vec<String> = offsets
        .iter()
        .map(|o| stored[o].chars().take(2).collect())
        .collect();
    assert_eq!(firsts, sent);
    drop(broker);
}

/// Review finding (issue 15): a client pipelines a Fetch whose answer it
/// never reads (20 MB, so the broker's writer to it is stuck), then enough
/// ApiVersions to fill the connection's response channel, then 10 gzip
/// produces that each decompress 100 MiB. Before the fix the connection's
/// loop blocked sending a response while the broker-wide validation slots
/// were handed, by the fair semaphore, to its own produce futures that
/// nobody polled any more: no other client's compressed produce was
/// validated until the hostile socket closed. Now the slots are waited for
/// and held by tasks of their own, and the loop never blocks on a send: a
/// bystander's gzip produces keep being answered while the hostile client
/// stays connected.
#[test]
fn a_client_that_never_reads_does_not_hold_the_validation_slots() {
    let (broker, mut client, versions, produce_version) = setup(support::start_broker());
    let topic = support::ensure_topic(&mut client, &versions, "stuck");
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let filler = "f".repeat(900_000);
    for _ in 0..22 {
        support::produce_ok(
            &mut client,
            produce_version,
            &topic,
            0,
            records::plain_batch(&[&filler], now_ms()),
        );
    }
    // Valid batches that cost real validation work (100 MiB of zeros each).
    let heavy = records::encode_batch(
        &[NewRecord::value(
            Bytes::from(vec![0u8; 100 << 20]),
            now_ms(),
        )],
        Compression::Gzip,
    )
    .unwrap();
    let bystander = Bystander::start(&broker, "bystander");

    let mut hostile = support::connect(&broker);
    hostile.set_receive_buffer(2048).expect("SO_RCVBUF");
    let fetch = support::fetch_request(
        &topic,
        &support::FetchSpec {
            version: fetch_version,
            max_wait_ms: 0,
            min_bytes: 1,
            max_bytes: 50_000_000,
            partitions: vec![(0, 0, 50_000_000)],
        },
    );
    let header = hostile.header::<FetchRequest>(fetch_version);
    hostile.write_request(header, &fetch).expect("write Fetch");
    for _ in 0..63 {
        let header = hostile.header::<kafka_protocol::messages::ApiVersionsRequest>(0);
        hostile
            .write_request(
                header,
                &kafka_protocol::messages::ApiVersionsRequest::default(),
            )
            .expect("write ApiVersions");
    }
    for _ in 0..10 {
        let header = hostile.header::<ProduceRequest>(produce_version);
        hostile
            .write_request(header, &produce_request(&topic.name, 0, -1, heavy.clone()))
            .expect("write Produce");
    }

    // The hostile produces take the validation slots for about a second;
    // a stall would last as long as the hostile socket stays open, so
    // watching the bystander's gzip produces for a few seconds shows it.
    let mut gzip_client = support::connect(&broker);
    gzip_client
        .set_read_timeout(super::BYSTANDER_BOUND)
        .expect("read timeout");
    let small = records::encode_batch(
        &[NewRecord::value(Bytes::from(vec![b'g'; 2000]), now_ms())],
        Compression::Gzip,
    )
    .unwrap();
    let watch_until = Instant::now() + Duration::from_secs(4);
    let mut answered = 0;
    let mut worst = Duration::ZERO;
    while Instant::now() < watch_until {
        let started = Instant::now();
        let code = code_of(
            &mut gzip_client,
            produce_version,
            &produce_request(&topic.name, 0, -1, small.clone()),
        );
        assert_eq!(code, NONE, "the bystander's gzip produce failed");
        worst = worst.max(started.elapsed());
        answered += 1;
    }
    println!(
        "gzip produces beside a client that never reads: {answered} answered, worst {worst:?}"
    );
    drop(hostile);
    bystander.finish("a client that never reads");
    report_rss(&broker, "a client that never reads");
}
