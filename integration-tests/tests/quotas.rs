//! Client quotas (KIP-13 byte rates, KIP-55 user quotas, KIP-219
//! throttling, KIP-546 AlterClientQuotas / DescribeClientQuotas):
//! Kafka's own `kafka-configs` (`kafka.admin.ConfigCommand`) sets,
//! describes and removes quotas; a producer and a consumer over their
//! byte rate are throttled as Kafka throttles them, and clients without a
//! quota are not.
//!
//! The enforcement tests run a broker with
//!
//! ```text
//! quota.window.num=2
//! quota.window.size.seconds=1
//! ```
//!
//! so that a rate is Kafka's sampled `Rate` over two samples of one second,
//! measured over at least `(num - 1) * size` = 1 s: a client may send
//! `quota * 1 s` bytes before it is throttled at all, and over the quota
//! it gets `throttle_time_ms = (rate - quota) / quota * window_ms` and the
//! broker reads nothing more from its connection for that long.
//!
//! Quotas the enforcement tests need are set with a raw AlterClientQuotas
//! (faster than a JVM), and the tests wait until DescribeClientQuotas
//! shows them, which reads the same metadata image the enforcement does.
//!
//! The request-time quota (KIP-124, `request_percentage`) is tested in
//! `quotas/request_time.rs`, the controller mutation quota (KIP-599,
//! `controller_mutation_rate`) in `quotas/controller_mutation.rs`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    alter_client_quotas_request, describe_client_quotas_request, AlterClientQuotasRequest, ApiKey,
    ApiVersionsResponse, DescribeClientQuotasRequest, FetchRequest, FetchResponse, ProduceRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use weir_integration_tests::clients::CommandOutput;
use weir_integration_tests::records::{self, NewRecord};
use weir_integration_tests::{RawClient, TestBroker};

use crate::support::{self, error_code, FetchSpec, TopicInfo};

mod controller_mutation;
mod request_time;

/// The topic the enforcement tests write and read.
const TOPIC: &str = "metered";
/// Kafka's entity type of a client id quota (`ClientQuotaEntity.CLIENT_ID`).
const CLIENT_ID: &str = "client-id";
/// The length of a quota sample (`quota.window.size.seconds`).
const WINDOW: Duration = Duration::from_secs(1);
/// The samples a rate is measured over (`quota.window.num`).
const WINDOW_NUM: u32 = 2;
/// The value size of the records the enforcement tests produce.
const RECORD_BYTES: usize = 1000;

/// A broker whose quota rates are measured over [`WINDOW_NUM`] samples of
/// [`WINDOW`], with a one-partition topic [`TOPIC`]; returns it with a raw
/// client (client id `weir-itest`, which no quota names) and its
/// ApiVersions table and the topic.
#[track_caller]
fn start_quota_broker() -> (TestBroker, RawClient, ApiVersionsResponse, TopicInfo) {
    let broker = TestBroker::builder()
        .config("quota.window.num", &WINDOW_NUM.to_string())
        .config("quota.window.size.seconds", &WINDOW.as_secs().to_string())
        .start()
        .expect("starting weir with 2 quota samples of 1 s");
    let mut admin = support::connect(&broker);
    let versions = support::api_versions(&mut admin);
    let topic = support::create_topic(&mut admin, &versions, TOPIC, &[]);
    (broker, admin, versions, topic)
}

/// Sets the quota `key` (such as `producer_byte_rate`) of client id
/// `client_id` to `value` with a raw AlterClientQuotas (newest version),
/// which must succeed, then waits until DescribeClientQuotas answers it.
#[track_caller]
fn set_client_quota(
    client: &mut RawClient,
    versions: &ApiVersionsResponse,
    client_id: &str,
    key: &str,
    value: f64,
) {
    let version = support::newest::<AlterClientQuotasRequest>(versions, ApiKey::AlterClientQuotas);
    let request = AlterClientQuotasRequest::default().with_entries(vec![
        alter_client_quotas_request::EntryData::default()
            .with_entity(vec![alter_client_quotas_request::EntityData::default()
                .with_entity_type(StrBytes::from_static_str(CLIENT_ID))
                .with_entity_name(Some(StrBytes::from_string(client_id.to_owned())))])
            .with_ops(vec![alter_client_quotas_request::OpData::default()
                .with_key(StrBytes::from_string(key.to_owned()))
                .with_value(value)]),
    ]);
    let response = client
        .send(&request, version)
        .unwrap_or_else(|e| panic!("AlterClientQuotas v{version}: {e}"));
    let [entry] = &response.entries[..] else {
        panic!("one entry in {response:?}");
    };
    assert_eq!(
        entry.error_code,
        error_code::NONE,
        "AlterClientQuotas {key}={value} for client id {client_id}: {:?}",
        entry.error_message
    );
    wait_for_client_quota(client, versions, client_id, key, value);
}

/// Waits until DescribeClientQuotas (newest version) answers the quota
/// `key` = `value` for client id `client_id`: it reads the metadata image
/// the enforcement reads.
#[track_caller]
fn wait_for_client_quota(
    client: &mut RawClient,
    versions: &ApiVersionsResponse,
    client_id: &str,
    key: &str,
    value: f64,
) {
    let version =
        support::newest::<DescribeClientQuotasRequest>(versions, ApiKey::DescribeClientQuotas);
    let describe = DescribeClientQuotasRequest::default().with_components(vec![
        describe_client_quotas_request::ComponentData::default()
            .with_entity_type(StrBytes::from_static_str(CLIENT_ID))
            .with_match_type(0)
            .with_match(Some(StrBytes::from_string(client_id.to_owned()))),
    ]);
    support::poll_until(
        Duration::from_secs(10),
        &format!("DescribeClientQuotas to show {key}={value} for client id {client_id}"),
        || {
            let response = client
                .send(&describe, version)
                .unwrap_or_else(|e| panic!("DescribeClientQuotas v{version}: {e}"));
            assert_eq!(response.error_code, error_code::NONE, "{response:?}");
            response
                .entries
                .unwrap_or_default()
                .iter()
                .flat_map(|e| e.values.iter())
                .any(|v| v.key.as_str() == key && v.value == value)
                .then_some(())
        },
    );
}

/// The value of the Prometheus counter `name` with the label
/// `quota="<quota>"` in the broker's `/metrics` (0 when absent).
#[track_caller]
fn quota_counter(broker: &TestBroker, name: &str, quota: &str) -> f64 {
    let addr = broker.metrics_addr().expect("metrics enabled");
    let response =
        weir_integration_tests::metrics::http_get(addr, "/metrics").expect("GET /metrics");
    let text = String::from_utf8(response.body).expect("UTF-8 metrics");
    let label = format!("quota=\"{quota}\"");
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// One uncompressed batch of `count` records whose values are
/// `<prefix> <i>` padded with `.` to [`RECORD_BYTES`] bytes.
fn batch(prefix: &str, count: usize) -> Bytes {
    let records: Vec<NewRecord> = padded_values(prefix, count)
        .into_iter()
        .map(|v| NewRecord::value(v, 0))
        .collect();
    records::encode_batch(&records, Compression::None).expect("an uncompressed batch")
}

/// `count` values `<prefix> <i>` padded with `.` to [`RECORD_BYTES`]
/// bytes.
fn padded_values(prefix: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| format!("{prefix} {i:05} {}", ".".repeat(RECORD_BYTES)))
        .map(|mut v| {
            v.truncate(RECORD_BYTES);
            v
        })
        .collect()
}

/// Produces `batch` to partition 0 of `topic` with acks=1 at `version`;
/// requires error NONE and returns the response's `throttle_time_ms`.
#[track_caller]
fn produce_throttle(client: &mut RawClient, version: i16, topic: &TopicInfo, batch: Bytes) -> i32 {
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.name.clone())))
            .with_topic_id(topic.id)
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch))])]);
    let response = client
        .send(&request, version)
        .unwrap_or_else(|e| panic!("Produce v{version}: {e}"));
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!(
        partition.error_code,
        error_code::NONE,
        "Produce v{version}: {:?}",
        partition.error_message
    );
    response.throttle_time_ms
}

/// Fetches partition 0 of `topic` from `offset` (1 MiB limits, as
/// [`FetchSpec::one`]) and returns the response's `throttle_time_ms` and
/// the record bytes of the partition (empty when the response has none).
#[track_caller]
fn fetch_throttle(
    client: &mut RawClient,
    version: i16,
    topic: &TopicInfo,
    offset: i64,
) -> (i32, Bytes) {
    let spec = FetchSpec::one(version, 0, offset);
    let response: FetchResponse = client
        .send(&support::fetch_request(topic, &spec), version)
        .unwrap_or_else(|e| panic!("Fetch v{version}: {e}"));
    let partitions = support::fetched_partitions(&response, version);
    let records = match partitions.get(&0) {
        Some(data) => {
            assert_eq!(data.error_code, error_code::NONE, "Fetch v{version}");
            data.records.clone().unwrap_or_default()
        }
        None => Bytes::new(),
    };
    (response.throttle_time_ms, records)
}

/// The offset after the last record of the batches in `records`.
#[track_caller]
fn next_offset(records: &Bytes) -> i64 {
    let decoded = records::decode_records(records).expect("fetched batches decode");
    decoded.last().expect("at least one record").offset + 1
}

/// How many values of `stored` start with each of `prefixes` (followed by
/// a space).
fn count_prefixes<'a>(
    stored: &BTreeMap<i64, String>,
    prefixes: &[&'a str],
) -> BTreeMap<&'a str, usize> {
    prefixes
        .iter()
        .map(|p| {
            let start = format!("{p} ");
            (
                *p,
                stored.values().filter(|v| v.starts_with(&start)).count(),
            )
        })
        .collect()
}

/// `kafka-configs` with the concatenation of `parts`, whatever its exit
/// status.
#[track_caller]
fn kafka_configs(broker: &TestBroker, parts: &[&[&str]]) -> CommandOutput {
    let args: Vec<&str> = parts.iter().flat_map(|p| p.iter().copied()).collect();
    support::kafka_configs(&broker.bootstrap(), &args)
}

/// Requires that `kafka-configs` with the concatenation of `parts` exits 0
/// and prints exactly the lines `expected` (ConfigCommand's output).
#[track_caller]
fn assert_kafka_configs_prints(broker: &TestBroker, parts: &[&[&str]], expected: &[&str]) {
    let output = kafka_configs(broker, parts);
    output.assert_success();
    let printed = output.stdout_text();
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines, expected, "{}", output.command);
}

/// Kafka's `kafka-configs` sets a client id's byte rates and the default
/// user's request percentage, describes them with ConfigCommand's own
/// lines, deletes one key, and is refused a fractional byte rate with
/// Kafka's message.
#[test]
fn kafka_configs_sets_describes_and_removes_client_quotas() {
    let broker = support::start_broker();
    let slow: &[&str] = &["--entity-type", "clients", "--entity-name", "slow"];
    let default_user: &[&str] = &["--entity-type", "users", "--entity-default"];

    assert_kafka_configs_prints(
        &broker,
        &[
            &["--alter"],
            slow,
            &[
                "--add-config",
                "producer_byte_rate=1024,consumer_byte_rate=2048",
            ],
        ],
        &["Completed updating config for client slow."],
    );
    assert_kafka_configs_prints(
        &broker,
        &[
            &["--alter"],
            default_user,
            &["--add-config", "request_percentage=50"],
        ],
        &["Completed updating default config for users in the cluster."],
    );

    // ConfigCommand prints the values as Java doubles.
    assert_kafka_configs_prints(
        &broker,
        &[&["--describe"], slow],
        &["Quota configs for client-id 'slow' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0"],
    );
    assert_kafka_configs_prints(
        &broker,
        &[&["--describe"], default_user],
        &["Quota configs for the default user-principal are request_percentage=50.0"],
    );

    assert_kafka_configs_prints(
        &broker,
        &[
            &["--alter"],
            slow,
            &["--delete-config", "producer_byte_rate"],
        ],
        &["Completed updating config for client slow."],
    );
    let only_consumer = ["Quota configs for client-id 'slow' are consumer_byte_rate=2048.0"];
    assert_kafka_configs_prints(&broker, &[&["--describe"], slow], &only_consumer);

    // Kafka's ClientQuotaControlManager: byte rates are whole numbers.
    let refused = kafka_configs(
        &broker,
        &[
            &["--alter"],
            slow,
            &["--add-config", "producer_byte_rate=10.5"],
        ],
    );
    assert!(
        !refused.status.success(),
        "a fractional producer_byte_rate must be refused:\n{}",
        refused.stdout_text()
    );
    assert!(
        refused
            .stderr
            .contains("InvalidRequestException: producer_byte_rate cannot be a fractional value."),
        "Kafka's message for a fractional byte rate:\n{}",
        refused.stderr
    );
    // The refused value changed nothing.
    assert_kafka_configs_prints(&broker, &[&["--describe"], slow], &only_consumer);
}

/// A producer with client id `slow` (producer_byte_rate 50,000) is
/// throttled once over its quota, its connection is not read for the
/// throttle time, and kcat as `slow` takes as long as the quota demands;
/// client id `fast` (no quota) is never throttled; every record of both
/// is stored.
#[test]
fn a_throttled_producer_is_held_to_its_quota_and_another_is_not() {
    /// producer_byte_rate of client id `slow`, bytes per second.
    const QUOTA: f64 = 50_000.0;
    let (broker, mut admin, versions, topic) = start_quota_broker();
    set_client_quota(&mut admin, &versions, "slow", "producer_byte_rate", QUOTA);
    let version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);

    // Raw Produce requests (acks=1) as `slow`. 20 KB within the first
    // second is a rate of 20,000 B/s (the rate is measured over at least
    // one window): within the quota.
    let mut slow = support::connect(&broker);
    slow.set_client_id(Some("slow"));
    assert_eq!(
        produce_throttle(&mut slow, version, &topic, batch("raw-slow", 20)),
        0,
        "20 KB is within slow's quota of 50,000 B/s over 1 s"
    );
    // 100 KB more is a rate of about 120,000 B/s: throttled for about
    // (120,000 - 50,000) / 50,000 * 1,000 ms.
    let throttle = produce_throttle(&mut slow, version, &topic, batch("raw-slow", 100));
    assert!(
        throttle > 0,
        "slow over its quota gets a throttle time, got {throttle}"
    );
    // KIP-219: the broker reads nothing from slow's connection until the
    // throttle time has passed, so the next request's response comes at
    // least that long after the broker muted the connection (which was
    // before this side received the throttled response).
    let throttled_at = Instant::now();
    let again = produce_throttle(&mut slow, version, &topic, batch("raw-slow", 100));
    let waited = throttled_at.elapsed();
    assert!(
        waited >= Duration::from_millis(throttle as u64) / 2,
        "the muted connection answered after {waited:?}, throttle was {throttle} ms"
    );
    assert!(again > 0, "slow is still over its quota, got {again}");

    // The same requests as `fast`, which no quota names: never throttled.
    let mut fast = support::connect(&broker);
    fast.set_client_id(Some("fast"));
    for i in 0..3 {
        assert_eq!(
            produce_throttle(&mut fast, version, &topic, batch("raw-fast", 100)),
            0,
            "fast's request {i} is not throttled"
        );
    }

    // kcat (librdkafka) as `slow`: 500 records of 1,000 bytes in requests
    // of at most 20 records. A rate is measured over at least
    // `(quota.window.num - 1) * quota.window.size.seconds` = 1 s, so
    // `quota * 1 s` bytes pass unthrottled; every byte beyond costs
    // 1 / quota seconds of throttling (the bytes before kcat's run only add
    // to it; the throttle of kcat's last request, about 20 KB, is not
    // waited for as kcat exits when its records are acknowledged). Ideal:
    // (bytes - quota * 1 s) / quota = (500,000 - 50,000) / 50,000 = 9 s;
    // required: at least half of it.
    let records = 500;
    let bytes = (records * RECORD_BYTES) as f64;
    let allowance = (WINDOW * (WINDOW_NUM - 1)).as_secs_f64();
    let ideal = Duration::from_secs_f64((bytes - QUOTA * allowance) / QUOTA);
    let kcat_produce = |client_id: &str, prefix: &str| -> Duration {
        let mut stdin = padded_values(prefix, records).join("\n").into_bytes();
        stdin.push(b'\n');
        let client_id = format!("client.id={client_id}");
        let started = Instant::now();
        support::kcat(
            &broker.bootstrap(),
            &[
                "-P",
                "-t",
                TOPIC,
                "-p",
                "0",
                "-X",
                &client_id,
                "-X",
                "acks=1",
                "-X",
                "batch.num.messages=20",
            ],
            Some(stdin),
        );
        started.elapsed()
    };
    let slow_took = kcat_produce("slow", "kcat-slow");
    assert!(
        slow_took >= ideal / 2,
        "kcat as slow produced {bytes} bytes in {slow_took:?}; its quota of {QUOTA} B/s needs about {ideal:?}"
    );
    // The same records as `fast`: not held back, all stored.
    kcat_produce("fast", "kcat-fast");

    // Everything was stored (read as weir-itest, which has no quota).
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let stored = support::read_partition(&mut admin, fetch_version, &topic, 0);
    let counts = count_prefixes(&stored, &["raw-slow", "raw-fast", "kcat-slow", "kcat-fast"]);
    assert_eq!(
        counts,
        BTreeMap::from([
            ("raw-slow", 220),
            ("raw-fast", 300),
            ("kcat-slow", records),
            ("kcat-fast", records),
        ]),
        "records stored per producer"
    );
    assert_eq!(stored.len(), 220 + 300 + 2 * records, "no other records");
}

/// A consumer with client id `slowc` (consumer_byte_rate 20,000) gets
/// records in its first window, then a throttled response with no
/// records, and records again once its rate allows; client id `other`
/// (no quota) gets records meanwhile.
#[test]
fn a_throttled_consumer_gets_no_records_until_its_quota_allows() {
    /// consumer_byte_rate of client id `slowc`, bytes per second.
    const QUOTA: f64 = 20_000.0;
    let (broker, mut admin, versions, topic) = start_quota_broker();
    // About 210 KB in batches of 15 records (about 15 KB each).
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    for _ in 0..14 {
        support::produce_ok(&mut admin, produce_version, &topic, 0, batch("stored", 15));
    }
    set_client_quota(&mut admin, &versions, "slowc", "consumer_byte_rate", QUOTA);
    let version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);

    // Kafka bounds the fetch of a consumer with a quota to what the quota
    // allows in one measuring window (`KafkaApis.handleFetchRequest`'s
    // `maxQuotaWindowBytes`: `quota * (quota.window.num - 1) *
    // quota.window.size.seconds` = 20,000 bytes, and at least one batch),
    // so the first fetch gets records (one batch) and is within the quota.
    let mut slowc = support::connect(&broker);
    slowc.set_client_id(Some("slowc"));
    let (throttle, first) = fetch_throttle(&mut slowc, version, &topic, 0);
    assert!(
        !first.is_empty(),
        "slowc's first fetch (1 MiB limits) gets records: Kafka caps it at 20,000 bytes, \
         what the quota allows in one window; got none and a throttle of {throttle} ms"
    );
    assert_eq!(throttle, 0, "slowc's first fetch is within its quota");
    let next = next_offset(&first);

    // The next batch would put slowc over its quota: a throttled response
    // without records.
    let (throttle, records) = fetch_throttle(&mut slowc, version, &topic, next);
    assert!(
        throttle > 0,
        "slowc over its quota gets a throttle time, got {throttle}"
    );
    assert!(
        records.is_empty(),
        "a throttled fetch carries no records, got {} bytes",
        records.len()
    );

    // Another client id, without a quota, gets records meanwhile.
    let mut other = support::connect(&broker);
    other.set_client_id(Some("other"));
    let (throttle, records) = fetch_throttle(&mut other, version, &topic, next);
    assert_eq!(throttle, 0, "other has no quota");
    assert!(!records.is_empty(), "other gets records");

    // slowc's connection is muted for each throttle time; its fetches get
    // records again once the rate over its samples allows them, from
    // where it stopped.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut throttled = 0;
    let resumed = loop {
        let (throttle, records) = fetch_throttle(&mut slowc, version, &topic, next);
        if !records.is_empty() {
            break records;
        }
        assert!(throttle > 0, "a fetch without records was throttled");
        throttled += 1;
        assert!(
            Instant::now() < deadline,
            "slowc got no records for 30 s ({throttled} throttled fetches)"
        );
    };
    let decoded = records::decode_records(&resumed).expect("fetched batches decode");
    assert!(
        decoded.iter().any(|r| r.offset == next),
        "slowc resumes at offset {next}"
    );
}
