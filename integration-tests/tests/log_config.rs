//! Log behaviour driven by configuration, end to end: segment rolls at the
//! segment size, `message.max.bytes`, and LogAppendTime topics.

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, FetchRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use weir_integration_tests::records::{self, NewRecord};
use weir_integration_tests::TestBroker;

use crate::support::{self, error_code};

const MESSAGE_TOO_LARGE: i16 = 10;

fn batch(value: &[u8], timestamp: i64) -> Bytes {
    records::encode_batch(
        &[NewRecord::value(value.to_vec(), timestamp)],
        Compression::None,
    )
    .expect("encode batch")
}

/// With a small segment size (Kafka's test-only topic key
/// `internal.segment.bytes`, which overrides `segment.bytes` without
/// KIP-1030's 1 MiB minimum, as Kafka's own tests use it) the log rolls
/// into several segment files (Kafka's 20-digit base offset names, each
/// with its index), and a consumer reads every record back across them,
/// in order.
#[test]
fn log_rolls_segments_at_segment_bytes_and_reads_across_them() {
    let broker = TestBroker::start().expect("starting weir");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let topic = support::create_topic(
        &mut client,
        &versions,
        "rolling",
        &[("internal.segment.bytes", "4096")],
    );
    let value = vec![b'r'; 500];
    for i in 0..40 {
        let offset = support::produce_ok(
            &mut client,
            produce_version,
            &topic,
            0,
            batch(&value, 1_000 + i),
        );
        assert_eq!(offset, i);
    }
    let dir = broker.data_dir().join("rolling-0");
    let mut segments: Vec<String> = std::fs::read_dir(&dir)
        .expect("partition dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".log"))
        .collect();
    segments.sort();
    assert!(
        segments.len() >= 4,
        "expected several segments, found {segments:?}"
    );
    assert_eq!(segments[0], "00000000000000000000.log");
    for s in &segments {
        let base = s.trim_end_matches(".log");
        assert_eq!(base.len(), 20, "{s}");
        assert!(dir.join(format!("{base}.index")).exists(), "{base}.index");
        assert!(
            dir.join(format!("{base}.timeindex")).exists(),
            "{base}.timeindex"
        );
    }
    let consumed = support::kcat_consume(&broker.bootstrap(), "rolling", 0, "beginning");
    assert_eq!(consumed.len(), 40);
    assert!(consumed.iter().all(|v| v.as_bytes() == value.as_slice()));
}

/// A batch larger than `message.max.bytes` (or the topic's
/// `max.message.bytes`) is refused with MESSAGE_TOO_LARGE and not stored.
#[test]
fn batch_over_message_max_bytes_is_refused() {
    let broker = TestBroker::builder()
        .override_config("message.max.bytes", "2048")
        .start()
        .expect("starting weir");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let topic = support::ensure_topic(&mut client, &versions, "limited");
    let refused = support::produce(
        &mut client,
        produce_version,
        &topic,
        0,
        batch(&[b'x'; 4096], 1),
    );
    assert_eq!(refused.error_code, MESSAGE_TOO_LARGE);
    assert_eq!(
        support::produce_ok(
            &mut client,
            produce_version,
            &topic,
            0,
            batch(&[b'y'; 100], 2)
        ),
        0
    );
}

/// On a topic with `message.timestamp.type=LogAppendTime` the broker stamps
/// the batch: Produce answers the append time, and the stored batch carries
/// the LogAppendTime attribute with that time as its max timestamp (and a
/// valid CRC), whatever the producer's CreateTime was.
#[test]
fn log_append_time_topics_are_stamped_by_the_broker() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("append-time")))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("message.timestamp.type"))
                .with_value(Some(StrBytes::from_static_str("LogAppendTime")))])]);
    let created = client.send(&create, 7).expect("CreateTopics");
    assert_eq!(created.topics[0].error_code, error_code::NONE);
    let topic = support::ensure_topic(&mut client, &versions, "append-time");
    let response = support::produce(
        &mut client,
        produce_version,
        &topic,
        0,
        batch(b"stamped", 42),
    );
    assert_eq!(response.error_code, error_code::NONE);
    let append_time = response.log_append_time_ms;
    assert!(
        append_time > 1_600_000_000_000,
        "log_append_time_ms {append_time}"
    );

    let fetched = support::fetch_records(&mut client, fetch_version, &topic, 0, 0);
    let (batches, _) = records::split_batches(&fetched).expect("batches");
    let header = records::batch_header(&batches[0]).expect("header");
    assert_ne!(header.attributes & 0x08, 0, "LogAppendTime attribute set");
    assert_eq!(header.max_timestamp, append_time);
    assert!(records::crc_is_valid(&batches[0]));
}

/// The harness's fake clock (libfaketime preloaded, offset file rewritten
/// while the broker runs) moves the broker's wall clock both ways at run
/// time: LogAppendTime stamps follow the offset, while the broker keeps
/// serving (its monotonic clock is real). The chaos `clock-skew` and
/// `clock-strobe` faults rely on this.
#[test]
fn a_fake_clock_moves_log_append_time_both_ways_while_the_broker_runs() {
    use weir_integration_tests::fake_clock;
    let library = fake_clock::libfaketime().expect("libfaketime (scripts/test installs it)");
    let broker = TestBroker::builder()
        .fake_clock(&library)
        .start()
        .expect("starting weir");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let topic = support::create_topic(
        &mut client,
        &versions,
        "skewed",
        &[("message.timestamp.type", "LogAppendTime")],
    );
    let wall_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    const DAY_MS: i64 = 86_400_000;
    const SLACK_MS: i64 = 60_000;
    for (offset_s, expected_ms) in [(0, 0), (86_400, DAY_MS), (-3_600, -3_600_000), (0, 0)] {
        broker.set_clock_offset(offset_s).expect("moving the clock");
        let before = wall_ms();
        let response = support::produce(
            &mut client,
            produce_version,
            &topic,
            0,
            batch(b"stamped", 42),
        );
        assert_eq!(response.error_code, error_code::NONE);
        let skew = response.log_append_time_ms - before;
        assert!(
            (expected_ms - SLACK_MS..=expected_ms + SLACK_MS).contains(&skew),
            "offset {offset_s} s: append time {} is {skew} ms from the real clock",
            response.log_append_time_ms
        );
    }
}
