//! Helpers shared by the test modules: starting a broker, version
//! negotiation against the broker's ApiVersions table, and the few raw
//! requests most tests need (Metadata with auto-creation, Produce, Fetch,
//! ListOffsets) plus kcat produce/consume, and the client runs of the
//! listener tests (`tls`, `sasl`): kcat through a named listener and the
//! round-trip scripts and Java harness with security options.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, FetchRequest,
    FetchResponse, ListOffsetsRequest, MetadataRequest, MetadataResponse, ProduceRequest,
    TopicName,
};
use kafka_protocol::protocol::{Message, StrBytes};
use uuid::Uuid;
use weir_integration_tests::clients::{self, CommandOutput};
use weir_integration_tests::{RawClient, TestBroker};

/// Kafka error codes used by the tests (protocol guide, "Error Codes").
pub mod error_code {
    pub const NONE: i16 = 0;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const INVALID_REQUEST: i16 = 42;
    pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
}

/// How long client subprocesses may run.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);

/// Starts a broker with the defaults (metrics disabled).
#[track_caller]
pub fn start_broker() -> TestBroker {
    TestBroker::start().expect("starting weir")
}

/// Starts a broker whose auto-created topics get `partitions` partitions.
#[track_caller]
pub fn start_broker_with_partitions(partitions: u32) -> TestBroker {
    TestBroker::builder()
        .override_config("num.partitions", &partitions.to_string())
        .start()
        .expect("starting weir")
}

/// Connects a raw client to `broker`.
#[track_caller]
pub fn connect(broker: &TestBroker) -> RawClient {
    RawClient::connect(&broker.bootstrap()).expect("connecting to weir")
}

/// The broker's ApiVersions table, asked with ApiVersions v3.
#[track_caller]
pub fn api_versions(client: &mut RawClient) -> ApiVersionsResponse {
    let response = client
        .send(
            &ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("weir-itest"))
                .with_client_software_version(StrBytes::from_static_str("0.1.0")),
            3,
        )
        .expect("ApiVersions v3");
    assert_eq!(
        response.error_code,
        error_code::NONE,
        "ApiVersions v3 error"
    );
    response
}

/// The broker's advertised range for `key`, if it lists it.
pub fn advertised(versions: &ApiVersionsResponse, key: ApiKey) -> Option<ApiVersion> {
    versions
        .api_keys
        .iter()
        .find(|v| v.api_key == key as i16)
        .cloned()
}

/// The newest version both the broker and the `kafka-protocol` crate speak
/// for request type `R`.
#[track_caller]
pub fn newest<R: Message>(versions: &ApiVersionsResponse, key: ApiKey) -> i16 {
    let range = advertised(versions, key).unwrap_or_else(|| panic!("{key:?} is not advertised"));
    let newest = range.max_version.min(R::VERSIONS.max);
    assert!(
        newest >= range.min_version && newest >= R::VERSIONS.min,
        "no common {key:?} version: broker {}..={}, crate {}",
        range.min_version,
        range.max_version,
        R::VERSIONS
    );
    newest
}

/// Every version of `key` that both the broker advertises and the crate
/// speaks, oldest first.
pub fn common_versions<R: Message>(versions: &ApiVersionsResponse, key: ApiKey) -> Vec<i16> {
    let Some(range) = advertised(versions, key) else {
        return Vec::new();
    };
    (range.min_version.max(R::VERSIONS.min)..=range.max_version.min(R::VERSIONS.max)).collect()
}

/// Polls `condition` every 50 ms until it returns `Some`, failing the test
/// after `timeout` with `what`.
#[track_caller]
pub fn poll_until<T>(timeout: Duration, what: &str, mut condition: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = condition() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A topic as the broker describes it after creation.
#[derive(Debug, Clone)]
pub struct TopicInfo {
    pub name: String,
    pub id: Uuid,
    pub partitions: usize,
}

/// Creates `name` through Metadata with allow_auto_topic_creation (the
/// broker's auto.create.topics.enable default) and waits until every
/// partition has a leader. Returns the topic id (nil before Metadata v10).
#[track_caller]
pub fn ensure_topic(
    client: &mut RawClient,
    versions: &ApiVersionsResponse,
    name: &str,
) -> TopicInfo {
    let version = newest::<MetadataRequest>(versions, ApiKey::Metadata);
    assert!(
        version >= 4,
        "Metadata v{version} cannot ask for auto-creation"
    );
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(name.to_owned()))))]))
        .with_allow_auto_topic_creation(true);
    poll_until(
        Duration::from_secs(30),
        &format!("topic {name} to be ready"),
        || {
            let response: MetadataResponse = client.send(&request, version).expect("Metadata");
            let topic = response.topics.first()?;
            let ready = topic.error_code == error_code::NONE
                && !topic.partitions.is_empty()
                && topic
                    .partitions
                    .iter()
                    .all(|p| p.error_code == error_code::NONE && p.leader_id.0 >= 0);
            if !ready {
                assert!(
                    matches!(
                        topic.error_code,
                        error_code::NONE
                            | error_code::LEADER_NOT_AVAILABLE
                            | error_code::UNKNOWN_TOPIC_OR_PARTITION
                    ),
                    "auto-creating {name}: Metadata v{version} error {}",
                    topic.error_code
                );
                return None;
            }
            Some(TopicInfo {
                name: name.to_owned(),
                id: topic.topic_id,
                partitions: topic.partitions.len(),
            })
        },
    )
}

/// Creates a one-partition topic with `configs` (CreateTopics, newest
/// version) and waits until it is ready.
#[track_caller]
pub fn create_topic(
    client: &mut RawClient,
    versions: &kafka_protocol::messages::ApiVersionsResponse,
    name: &str,
    configs: &[(&str, &str)],
) -> TopicInfo {
    let version = newest::<CreateTopicsRequest>(versions, ApiKey::CreateTopics);
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string((*k).to_owned()))
                            .with_value(Some(StrBytes::from_string((*v).to_owned())))
                    })
                    .collect(),
            )]);
    let created = client.send(&request, version).expect("CreateTopics");
    assert_eq!(
        created.topics[0].error_code,
        error_code::NONE,
        "CreateTopics {name}: {:?}",
        created.topics[0].error_message
    );
    ensure_topic(client, versions, name)
}

/// Produces one batch (acks=-1) to `topic`/`partition` at `version` and
/// returns the partition's response.
#[track_caller]
pub fn produce(
    client: &mut RawClient,
    version: i16,
    topic: &TopicInfo,
    partition: i32,
    batch: Bytes,
) -> PartitionProduceResponse {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.name.clone())))
            .with_topic_id(topic.id)
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])]);
    let response = client.send(&request, version).expect("Produce");
    let topic_response = response
        .responses
        .first()
        .unwrap_or_else(|| panic!("Produce v{version} response has no topic"));
    topic_response
        .partition_responses
        .iter()
        .find(|p| p.index == partition)
        .cloned()
        .unwrap_or_else(|| panic!("Produce v{version} response lacks partition {partition}"))
}

/// Produces one batch and requires success; returns the base offset.
#[track_caller]
pub fn produce_ok(
    client: &mut RawClient,
    version: i16,
    topic: &TopicInfo,
    partition: i32,
    batch: Bytes,
) -> i64 {
    let response = produce(client, version, topic, partition, batch);
    assert_eq!(
        response.error_code,
        error_code::NONE,
        "Produce v{version} to {}/{partition}: {:?}",
        topic.name,
        response.error_message
    );
    response.base_offset
}

/// Every record of `topic`/`partition` from offset 0 to the high
/// watermark, as offset -> value text, read with Fetch at `fetch_version`.
/// Panics unless every batch decodes with a valid CRC and the offsets are
/// contiguous from 0 to the high watermark.
#[track_caller]
pub fn read_partition(
    client: &mut RawClient,
    fetch_version: i16,
    topic: &TopicInfo,
    partition: i32,
) -> BTreeMap<i64, String> {
    let mut stored = BTreeMap::new();
    let mut next = 0i64;
    loop {
        let mut spec = FetchSpec::one(fetch_version, partition, next);
        spec.max_wait_ms = 0;
        spec.min_bytes = 0;
        let partitions = fetch(client, topic, &spec);
        let data = &partitions[&partition];
        assert_eq!(
            data.error_code,
            error_code::NONE,
            "fetch {partition}@{next}"
        );
        let bytes = data.records.clone().unwrap_or_default();
        let decoded = weir_integration_tests::records::decode_records(&bytes)
            .unwrap_or_else(|e| panic!("partition {partition} at {next}: {e}"));
        let start = next;
        for record in decoded.into_iter().filter(|r| r.offset >= start) {
            assert_eq!(
                record.offset, next,
                "partition {partition}: offsets are contiguous"
            );
            stored.insert(
                record.offset,
                weir_integration_tests::records::value_text(&record),
            );
            next += 1;
        }
        if next >= data.high_watermark {
            assert_eq!(
                next, data.high_watermark,
                "partition {partition} read to the high watermark"
            );
            return stored;
        }
        assert!(
            !bytes.is_empty(),
            "partition {partition}: no progress at {next} below {}",
            data.high_watermark
        );
    }
}

/// Parameters of a one-topic Fetch.
#[derive(Debug, Clone)]
pub struct FetchSpec {
    pub version: i16,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    /// (partition, fetch offset, partition_max_bytes), in request order.
    pub partitions: Vec<(i32, i64, i32)>,
}

impl FetchSpec {
    /// One partition from `offset`, 1 MiB limits, no waiting beyond 500 ms.
    pub fn one(version: i16, partition: i32, offset: i64) -> Self {
        Self {
            version,
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 1 << 20,
            partitions: vec![(partition, offset, 1 << 20)],
        }
    }
}

/// Builds the Fetch request of `spec` for `topic` (full fetch, no session).
pub fn fetch_request(topic: &TopicInfo, spec: &FetchSpec) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(spec.max_wait_ms)
        .with_min_bytes(spec.min_bytes)
        .with_max_bytes(spec.max_bytes)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.name.clone())))
            .with_topic_id(topic.id)
            .with_partitions(
                spec.partitions
                    .iter()
                    .map(|&(partition, offset, max)| {
                        FetchPartition::default()
                            .with_partition(partition)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(max)
                    })
                    .collect(),
            )])
}

/// The partitions of the (only) topic in a Fetch response, keyed by index,
/// after checking the top-level error.
#[track_caller]
pub fn fetched_partitions(response: &FetchResponse, version: i16) -> BTreeMap<i32, PartitionData> {
    assert_eq!(
        response.error_code,
        error_code::NONE,
        "Fetch v{version} top-level error"
    );
    let mut out = BTreeMap::new();
    for topic in &response.responses {
        for partition in &topic.partitions {
            out.insert(partition.partition_index, partition.clone());
        }
    }
    out
}

/// Fetches per `spec` and returns the partitions of the response.
#[track_caller]
pub fn fetch(
    client: &mut RawClient,
    topic: &TopicInfo,
    spec: &FetchSpec,
) -> BTreeMap<i32, PartitionData> {
    let response: FetchResponse = client
        .send(&fetch_request(topic, spec), spec.version)
        .unwrap_or_else(|e| panic!("Fetch v{}: {e}", spec.version));
    fetched_partitions(&response, spec.version)
}

/// Fetches one partition from `offset` and returns its record bytes (empty
/// when there are none), requiring error NONE.
#[track_caller]
pub fn fetch_records(
    client: &mut RawClient,
    version: i16,
    topic: &TopicInfo,
    partition: i32,
    offset: i64,
) -> Bytes {
    let partitions = fetch(client, topic, &FetchSpec::one(version, partition, offset));
    let data = partitions
        .get(&partition)
        .unwrap_or_else(|| panic!("Fetch v{version} response lacks partition {partition}"));
    assert_eq!(
        data.error_code,
        error_code::NONE,
        "Fetch v{version} partition {partition} error"
    );
    data.records.clone().unwrap_or_default()
}

/// ListOffsets for one partition at `timestamp` (-1 latest, -2 earliest,
/// -3 max timestamp) at `version`.
#[track_caller]
pub fn list_offset(
    client: &mut RawClient,
    version: i16,
    topic: &TopicInfo,
    partition: i32,
    timestamp: i64,
) -> ListOffsetsPartitionResponse {
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_isolation_level(0)
        .with_timeout_ms(30_000)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.name.clone())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(timestamp)])]);
    let response = client
        .send(&request, version)
        .unwrap_or_else(|e| panic!("ListOffsets v{version}: {e}"));
    response
        .topics
        .first()
        .and_then(|t| t.partitions.iter().find(|p| p.partition_index == partition))
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "ListOffsets v{version} response lacks {}/{partition}",
                topic.name
            )
        })
}

/// Runs kcat with `args` against `bootstrap` and returns what it left,
/// whatever its exit status (for clients that must fail).
#[track_caller]
pub fn kcat_output(bootstrap: &str, args: &[&str], stdin: Option<Vec<u8>>) -> CommandOutput {
    let command = clients::kcat_command(bootstrap, args).expect("kcat");
    clients::run(command, stdin, CLIENT_TIMEOUT).expect("running kcat")
}

/// Runs kcat with `args` against `bootstrap`, requiring exit 0.
#[track_caller]
pub fn kcat(bootstrap: &str, args: &[&str], stdin: Option<Vec<u8>>) -> CommandOutput {
    let output = kcat_output(bootstrap, args, stdin);
    output.assert_success();
    output
}

/// `kcat -C` of one partition from `offset` to the end; returns the values.
#[track_caller]
pub fn kcat_consume(bootstrap: &str, topic: &str, partition: i32, offset: &str) -> Vec<String> {
    kcat_consume_with(bootstrap, topic, partition, offset, &[])
}

/// [`kcat_consume`] with `extra` options such as
/// `["-X", "security.protocol=ssl"]`.
#[track_caller]
pub fn kcat_consume_with(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    offset: &str,
    extra: &[&str],
) -> Vec<String> {
    let partition = partition.to_string();
    let mut args = vec![
        "-C", "-t", topic, "-p", &partition, "-o", offset, "-e", "-q", "-f", "%s\\n",
    ];
    args.extend_from_slice(extra);
    let output = kcat(bootstrap, &args, None);
    output.stdout_text().lines().map(str::to_owned).collect()
}

/// `kcat -P` of `lines` (one record each) to `topic`, with `extra` options
/// such as `["-z", "gzip"]`.
#[track_caller]
pub fn kcat_produce(bootstrap: &str, topic: &str, lines: &[String], extra: &[&str]) {
    let mut args = vec!["-P", "-t", topic, "-X", "acks=all"];
    args.extend_from_slice(extra);
    let mut stdin = lines.join("\n").into_bytes();
    stdin.push(b'\n');
    kcat(bootstrap, &args, Some(stdin));
}

/// `options` as the `&str`s the kcat helpers take.
pub fn strs(options: &[String]) -> Vec<&str> {
    options.iter().map(String::as_str).collect()
}

/// `count` distinct lines of varied length, each starting with `prefix`.
pub fn lines(prefix: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| format!("{prefix} line {i:04} {}", "payload ".repeat(i % 7)))
        .collect()
}

/// Requires that the broker process is still running.
#[track_caller]
pub fn assert_running(broker: &mut TestBroker) {
    let exited = broker
        .wait_for_exit(Duration::ZERO)
        .expect("the broker was started");
    assert!(exited.is_none(), "weir exited with {exited:?}");
}

/// Produces `count` [`lines`] to `topic` with kcat through the listener
/// named `listener` with `options` (such as `-X security.protocol=ssl`)
/// and reads them back there; requires the same records, in order, and
/// returns them.
#[track_caller]
pub fn kcat_round_trip(
    broker: &TestBroker,
    listener: &str,
    topic: &str,
    options: &[String],
    count: usize,
) -> Vec<String> {
    let bootstrap = broker.bootstrap_for(listener);
    let options = strs(options);
    let produced = lines(topic, count);
    kcat_produce(&bootstrap, topic, &produced, &options);
    let consumed = kcat_consume_with(&bootstrap, topic, 0, "beginning", &options);
    assert_eq!(
        consumed.len(),
        produced.len(),
        "{topic}: record count over {listener}"
    );
    assert!(
        consumed == produced,
        "{topic}: records read over {listener} differ"
    );
    produced
}

/// `kcat -L` (5 s metadata timeout) through the listener named `listener`
/// with `options`, whatever its exit status.
#[track_caller]
pub fn kcat_list(broker: &TestBroker, listener: &str, options: &[String]) -> CommandOutput {
    let mut args = vec!["-L", "-m", "5"];
    args.extend(strs(options));
    kcat_output(&broker.bootstrap_for(listener), &args, None)
}

/// Requires that `kcat -L` through `listener` with `options` succeeds and
/// lists the broker at that listener's port.
#[track_caller]
pub fn assert_kcat_listed(broker: &TestBroker, listener: &str, options: &[String]) {
    let output = kcat_list(broker, listener, options);
    output.assert_success();
    let port = broker
        .listener_port(listener)
        .unwrap_or_else(|| panic!("{listener} port"));
    let listing = output.stdout_text();
    assert!(
        listing.contains(&format!("broker {} at 127.0.0.1:{port}", broker.node_id())),
        "kcat -L over {listener} lists the broker at its {listener} port {port}:\n{listing}"
    );
}

/// Requires that `kcat -L` through `listener` with `options` got no
/// metadata: a non-zero exit, no broker listed, and kcat's stderr
/// (lowercased) accepted by `reported`, which looks in librdkafka's log
/// for `reason`. `who` names the refused client in failure messages.
#[track_caller]
pub fn assert_kcat_refused(
    broker: &TestBroker,
    listener: &str,
    options: &[String],
    who: &str,
    reason: &str,
    reported: impl FnOnce(&str) -> bool,
) {
    let output = kcat_list(broker, listener, options);
    let stdout = output.stdout_text();
    let failure = format!(
        "{who}: {}\nexit {}\n--- stdout ---\n{stdout}\n--- stderr ---\n{}",
        output.command, output.status, output.stderr
    );
    assert!(!output.status.success(), "kcat -L must fail for {failure}");
    assert!(
        !stdout.contains(&format!("broker {} at", broker.node_id())),
        "no metadata for {failure}"
    );
    assert!(
        reported(&output.stderr.to_ascii_lowercase()),
        "librdkafka reports {reason} for {failure}"
    );
}

/// Requires that `output` succeeded and that its stdout has each of
/// `expected` as a whole line.
#[track_caller]
fn assert_printed(output: &CommandOutput, expected: &[String]) {
    output.assert_success();
    let stdout = output.stdout_text();
    for line in expected {
        assert!(stdout.lines().any(|l| l == line), "{stdout}");
    }
}

/// A round-trip client program: each creates a topic, writes records and
/// reads them back, with client options given as `KEY=VALUE` arguments.
#[derive(Clone, Copy, Debug)]
pub enum RoundTripScript {
    /// `python/confluent_idempotent.py`: confluent-kafka (librdkafka),
    /// idempotent producer, assign() consumer; librdkafka property names.
    Confluent,
    /// `python/kafka_python_round_trip.py`: kafka-python, acks=all,
    /// assign() consumer; kafka-python keyword argument names.
    KafkaPython,
    /// `node/round_trip.js`: KafkaJS, acks=-1, group consumer; its own
    /// `ssl.*` and `sasl.*` option names.
    KafkaJs,
}

impl RoundTripScript {
    fn file(self) -> &'static str {
        match self {
            RoundTripScript::Confluent => "confluent_idempotent.py",
            RoundTripScript::KafkaPython => "kafka_python_round_trip.py",
            RoundTripScript::KafkaJs => "round_trip.js",
        }
    }

    fn command(self) -> Command {
        match self {
            RoundTripScript::Confluent | RoundTripScript::KafkaPython => {
                clients::python_script(self.file()).expect("the venv")
            }
            RoundTripScript::KafkaJs => clients::node_script(self.file()).expect("KafkaJS"),
        }
    }
}

/// Runs the round-trip client `script` as
/// `<bootstrap> <topic> <records> 3 <options>...`: the script creates a
/// 3-partition topic, writes `records` records and reads them back.
/// Requires exit 0 and its `delivered <records>` and `consumed <records>`
/// lines.
#[track_caller]
pub fn script_round_trip(
    script: RoundTripScript,
    bootstrap: String,
    topic: &str,
    records: usize,
    options: &[String],
) {
    let mut command = script.command();
    command
        .arg(bootstrap)
        .arg(topic)
        .arg(records.to_string())
        .arg("3")
        .args(options);
    let output = clients::run(command, None, CLIENT_TIMEOUT)
        .unwrap_or_else(|e| panic!("{}: {e}", script.file()));
    assert_printed(
        &output,
        &[
            format!("delivered {records}"),
            format!("consumed {records}"),
        ],
    );
}

/// The Java client harness's `produce-consume` through `bootstrap` with the
/// client `properties` (`key=value`, split at the first `=`): `records`
/// records of 512 bytes with keys, headers and timestamps to `topic`,
/// compared field by field when read back. Requires exit 0 and its
/// `produced <records>` and `consumed <records>` lines.
#[track_caller]
pub fn java_produce_consume(bootstrap: String, topic: &str, records: usize, properties: &[String]) {
    let mut java = clients::java_client_tool().expect("Java client harness");
    java.args([
        "produce-consume".to_owned(),
        bootstrap,
        topic.to_owned(),
        records.to_string(),
        "512".to_owned(),
    ])
    .args(properties);
    let output = clients::run(java, None, CLIENT_TIMEOUT * 2).expect("java produce-consume");
    assert_printed(
        &output,
        &[format!("produced {records}"), format!("consumed {records}")],
    );
}

/// Runs Kafka's `kafka-topics` (TopicCommand, Java Admin client) with `args`
/// against `bootstrap`.
#[track_caller]
pub fn kafka_topics(bootstrap: &str, args: &[&str]) -> CommandOutput {
    let mut command =
        clients::kafka_tool("org.apache.kafka.tools.TopicCommand").expect("Kafka tools");
    command.arg("--bootstrap-server").arg(bootstrap).args(args);
    clients::run(command, None, CLIENT_TIMEOUT).expect("kafka-topics")
}

/// Runs Kafka's `kafka-configs` (`kafka.admin.ConfigCommand`, Java Admin
/// client) with `args` against `bootstrap`, whatever its exit status.
#[track_caller]
pub fn kafka_configs(bootstrap: &str, args: &[&str]) -> CommandOutput {
    let mut command = clients::kafka_tool("kafka.admin.ConfigCommand").expect("Kafka tools");
    command.arg("--bootstrap-server").arg(bootstrap).args(args);
    clients::run(command, None, CLIENT_TIMEOUT).expect("kafka-configs")
}

/// The bytes of every `.log` segment of `topic`-`partition` under the log
/// directory `data_dir`, concatenated in offset order (segment file names
/// are base offsets), so replicas that rolled at different offsets still
/// compare equal when they hold the same batches.
#[track_caller]
pub fn partition_segments(data_dir: &Path, topic: &str, partition: i32) -> Vec<u8> {
    let dir = data_dir.join(format!("{topic}-{partition}"));
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs.iter()
        .flat_map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

/// Waits until the segments of `topic`-`partition` hold the same bytes in
/// every log directory of `data_dirs` (the replicas of running brokers:
/// followers have fetched everything up to the leader's log end, which
/// with every replica in the ISR and no producer is its high watermark),
/// then returns them. Issue 16: after every real-process test the
/// replicas' segments are byte-identical up to the high watermark.
#[track_caller]
pub fn assert_segments_identical(data_dirs: &[PathBuf], topic: &str, partition: i32) -> Vec<u8> {
    poll_until(
        Duration::from_secs(30),
        &format!("{topic}-{partition}: every replica's segments byte-identical"),
        || {
            let all: Vec<Vec<u8>> = data_dirs
                .iter()
                .map(|dir| partition_segments(dir, topic, partition))
                .collect();
            all.iter().all(|b| *b == all[0]).then(|| all[0].clone())
        },
    )
}

/// [`assert_segments_identical`] over the brokers of `brokers` that are
/// running.
#[track_caller]
pub fn assert_replicas_identical(brokers: &[TestBroker], topic: &str, partition: i32) -> Vec<u8> {
    let dirs: Vec<PathBuf> = brokers
        .iter()
        .filter(|b| b.pid().is_some())
        .map(|b| b.data_dir().to_path_buf())
        .collect();
    assert!(
        dirs.len() >= 2,
        "fewer than two running replicas to compare"
    );
    assert_segments_identical(&dirs, topic, partition)
}

/// Sends `signal` (`-STOP`, `-CONT`) to `broker`'s process.
#[track_caller]
fn signal(broker: &TestBroker, signal: &str) {
    let pid = broker.pid().expect("a running broker").to_string();
    let status = Command::new("kill")
        .args([signal, &pid])
        .status()
        .expect("kill");
    assert!(status.success(), "kill {signal} {pid}");
}

/// Pauses `broker` with SIGSTOP and returns once every thread of its
/// process is stopped (state `T` in `/proc/<pid>/task/<tid>/stat`).
/// SIGSTOP is asynchronous for a process with many threads: `kill`
/// returns once the signal is queued, one thread takes it and only then
/// stops the others, so on a loaded machine the others may serve requests
/// for milliseconds more (a produce sent right after `kill` was once
/// appended, replicated and acknowledged before the pause began). A paused
/// broker keeps its connections open and answers nothing, as a hung
/// machine or a cut network does.
#[track_caller]
pub fn pause(broker: &TestBroker) {
    signal(broker, "-STOP");
    let pid = broker.pid().expect("a running broker");
    let tasks = format!("/proc/{pid}/task");
    poll_until(
        Duration::from_secs(30),
        &format!("every thread of process {pid} to stop"),
        || {
            let entries = std::fs::read_dir(&tasks).unwrap_or_else(|e| panic!("{tasks}: {e}"));
            let all_stopped = entries.flatten().all(|task| {
                std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
                    // `pid (comm) state ...`: the state follows the last ')'.
                    stat.rsplit_once(')')
                        .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
                })
            });
            all_stopped.then_some(())
        },
    );
}

/// Resumes a broker [`pause`]d with SIGCONT.
#[track_caller]
pub fn resume(broker: &TestBroker) {
    signal(broker, "-CONT");
}
