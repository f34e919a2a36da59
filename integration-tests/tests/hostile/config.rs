//! Hostile inputs: see `super` for the conventions. Configuration bounds
//! (issue 15 scope 6, case C13): out-of-range topic configs over the
//! network answer INVALID_CONFIG naming the key and its bound, in Kafka
//! 4.1's words (`Invalid value 102400 for configuration segment.bytes:
//! Value must be at least 1048576`), on CreateTopics, AlterConfigs and
//! IncrementalAlterConfigs alike, with or without validate_only, and are
//! never stored (the broker restarts with its data and configs intact);
//! out-of-range broker keys stop the broker at start with an error naming
//! the key; DescribeConfigs reports Kafka 4.1's defaults for the keys
//! KIP-1030 changed.

use kafka_protocol::messages::alter_configs_request::{self, AlterConfigsRequest};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    self, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, CreateTopicsRequest, DescribeConfigsRequest, FetchRequest,
    ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::{records, HarnessError, RawClient, TestBroker};

use super::{report_rss, Bystander};
use crate::support::{self, error_code};

const INVALID_CONFIG: i16 = 40;
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const SET: i8 = 0;
/// How [`describe`] shows a null value.
const NULL: &str = "<null>";

/// Topic configs Kafka 4.1 refuses (LogConfig's validators; KIP-1030's
/// 1 MiB for segment.bytes), each with the text its message must carry.
const BAD_TOPIC_CONFIGS: &[(&str, &str, &str)] = &[
    ("segment.bytes", "102400", "Value must be at least 1048576"),
    ("segment.bytes", "1048575", "Value must be at least 1048576"),
    ("segment.bytes", "2147483648", "Not a number of type INT"),
    ("segment.index.bytes", "3", "Value must be at least 4"),
    ("segment.ms", "0", "Value must be at least 1"),
    (
        "retention.ms",
        "-2",
        "Value must be unlimited (-1) or at least -1",
    ),
    ("max.message.bytes", "-1", "Value must be at least 0"),
    ("min.insync.replicas", "0", "Value must be at least 1"),
    ("flush.messages", "0", "Value must be at least 1"),
    ("flush.ms", "-1", "Value must be at least 0"),
    ("delete.retention.ms", "-1", "Value must be at least 0"),
    ("max.compaction.lag.ms", "0", "Value must be at least 1"),
    (
        "min.cleanable.dirty.ratio",
        "1.5",
        "Value must be no more than 1",
    ),
    ("index.interval.bytes", "-1", "Value must be at least 0"),
    ("file.delete.delay.ms", "-1", "Value must be at least 0"),
    (
        "retention.bytes",
        "9223372036854775808",
        "Not a number of type LONG",
    ),
    (
        "cleanup.policy",
        "forever",
        "String must be one of: compact, delete",
    ),
];

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// `configs` as request entries made by `make(name, value)`.
fn each<T>(configs: &[(&str, &str)], make: impl Fn(StrBytes, StrBytes) -> T) -> Vec<T> {
    configs
        .iter()
        .map(|(k, v)| make(text(k), text(v)))
        .collect()
}

/// The three requests that set topic configs.
#[derive(Clone, Copy, Debug)]
enum Path {
    /// CreateTopics of a new one-partition topic with the configs.
    CreateTopics,
    /// Legacy AlterConfigs of an existing topic to exactly the configs.
    AlterConfigs,
    /// IncrementalAlterConfigs SET of the configs on an existing topic.
    IncrementalAlterConfigs,
}

/// Sends `configs` for topic `name` on `path` (its newest version in
/// `versions`); the topic's or resource's error code and message.
fn send_configs(
    client: &mut RawClient,
    versions: &ApiVersionsResponse,
    path: Path,
    name: &str,
    configs: &[(&str, &str)],
    validate_only: bool,
) -> (i16, String) {
    let message = |m: &Option<StrBytes>| m.as_ref().map_or(String::new(), |m| m.to_string());
    match path {
        Path::CreateTopics => {
            let version = support::newest::<CreateTopicsRequest>(versions, ApiKey::CreateTopics);
            let topic = CreatableTopic::default()
                .with_name(TopicName(text(name)))
                .with_num_partitions(1)
                .with_replication_factor(1)
                .with_configs(each(configs, |k, v| {
                    CreatableTopicConfig::default()
                        .with_name(k)
                        .with_value(Some(v))
                }));
            let request = CreateTopicsRequest::default()
                .with_timeout_ms(30_000)
                .with_validate_only(validate_only)
                .with_topics(vec![topic]);
            let response = client.send(&request, version).expect("CreateTopics");
            let result = &response.topics[0];
            (result.error_code, message(&result.error_message))
        }
        Path::AlterConfigs => {
            let version = support::newest::<AlterConfigsRequest>(versions, ApiKey::AlterConfigs);
            let resource = alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(RESOURCE_TOPIC)
                .with_resource_name(text(name))
                .with_configs(each(configs, |k, v| {
                    alter_configs_request::AlterableConfig::default()
                        .with_name(k)
                        .with_value(Some(v))
                }));
            let request = AlterConfigsRequest::default()
                .with_validate_only(validate_only)
                .with_resources(vec![resource]);
            let response = client.send(&request, version).expect("AlterConfigs");
            let result = &response.responses[0];
            (result.error_code, message(&result.error_message))
        }
        Path::IncrementalAlterConfigs => {
            let version = support::newest::<IncrementalAlterConfigsRequest>(
                versions,
                ApiKey::IncrementalAlterConfigs,
            );
            let resource = incremental_alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(RESOURCE_TOPIC)
                .with_resource_name(text(name))
                .with_configs(each(configs, |k, v| {
                    incremental_alter_configs_request::AlterableConfig::default()
                        .with_name(k)
                        .with_config_operation(SET)
                        .with_value(Some(v))
                }));
            let request = IncrementalAlterConfigsRequest::default()
                .with_validate_only(validate_only)
                .with_resources(vec![resource]);
            let response = client
                .send(&request, version)
                .expect("IncrementalAlterConfigs");
            let result = &response.responses[0];
            (result.error_code, message(&result.error_message))
        }
    }
}

/// Every config of a resource as DescribeConfigs v4 reports it:
/// `(name, value)`, a null value as [`NULL`].
fn describe(client: &mut RawClient, resource_type: i8, name: &str) -> Vec<(String, String)> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(text(name))
            .with_configuration_keys(None)]);
    let response = client.send(&request, 4).expect("DescribeConfigs v4");
    let result = &response.results[0];
    assert_eq!(result.error_code, error_code::NONE, "{result:?}");
    result
        .configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                c.value.as_ref().map_or(NULL.to_string(), |v| v.to_string()),
            )
        })
        .collect()
}

fn value_of(configs: &[(String, String)], key: &str) -> Option<String> {
    configs
        .iter()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.clone())
}

/// Asserts one hostile answer: INVALID_CONFIG, the key named, Kafka's
/// ConfigException wording with `reason`.
#[track_caller]
fn assert_refused(
    what: &str,
    (code, message): (i16, String),
    key: &str,
    value: &str,
    reason: &str,
) {
    assert_eq!(code, INVALID_CONFIG, "{what} {key}={value}: {message}");
    let expected = format!("for configuration {key}: {reason}");
    assert!(
        message.starts_with("Invalid value ") && message.contains(&expected),
        "{what} {key}={value}: message {message:?} lacks {expected:?}"
    );
}

/// C13: `segment.bytes=102400` (and every other out-of-range topic config
/// in [`BAD_TOPIC_CONFIGS`]) is answered INVALID_CONFIG naming the key and
/// its bound on CreateTopics, legacy AlterConfigs and
/// IncrementalAlterConfigs, each with and without validate_only; nothing
/// refused is created or stored; a bystander producer is served
/// throughout; after a restart the broker serves the earlier topic with
/// its record and unchanged configs. In-range values (segment.bytes of
/// exactly 1 MiB, retention.ms -1) are accepted on the same paths.
#[test]
fn c13_out_of_range_topic_configs_are_invalid_config_on_every_path() {
    let mut broker = support::start_broker();
    let bystander = Bystander::start(&broker, "c13-bystander");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);

    // The topic the alters aim at, with one record to find after the
    // restart.
    let target = support::create_topic(&mut client, &versions, "c13-target", &[]);
    support::produce_ok(
        &mut client,
        produce_version,
        &target,
        0,
        records::plain_batch(&["before"], 1),
    );
    let configs_before = describe(&mut client, RESOURCE_TOPIC, "c13-target");

    let paths = [
        Path::CreateTopics,
        Path::AlterConfigs,
        Path::IncrementalAlterConfigs,
    ];
    let mut refused = 0;
    for (i, (key, value, reason)) in BAD_TOPIC_CONFIGS.iter().enumerate() {
        for validate_only in [false, true] {
            for path in paths {
                let name = match path {
                    Path::CreateTopics => format!("c13-refused-{i}-{validate_only}"),
                    _ => "c13-target".to_string(),
                };
                let config = [(*key, *value)];
                let answer =
                    send_configs(&mut client, &versions, path, &name, &config, validate_only);
                assert_refused(&format!("{path:?}"), answer, key, value, reason);
                refused += 1;
            }
        }
    }
    println!("c13: {refused} out-of-range topic configs answered INVALID_CONFIG");
    // Nothing refused was created or stored: each name is still free.
    for i in 0..BAD_TOPIC_CONFIGS.len() {
        let name = format!("c13-refused-{i}-false");
        let (code, message) =
            send_configs(&mut client, &versions, Path::CreateTopics, &name, &[], true);
        assert_eq!(
            code,
            error_code::NONE,
            "{name} exists after a refusal: {message}"
        );
    }
    assert_eq!(
        describe(&mut client, RESOURCE_TOPIC, "c13-target"),
        configs_before,
        "a refused alter changed the topic's configs"
    );

    // The bounds themselves are accepted, on every path.
    let edge = [("segment.bytes", "1048576"), ("retention.ms", "-1")];
    for path in paths {
        let name = match path {
            Path::CreateTopics => "c13-edge",
            _ => "c13-target",
        };
        let (code, message) = send_configs(&mut client, &versions, path, name, &edge, false);
        assert_eq!(code, error_code::NONE, "{path:?}: {message}");
    }
    let configs_after = describe(&mut client, RESOURCE_TOPIC, "c13-target");
    assert_eq!(
        value_of(&configs_after, "segment.bytes").as_deref(),
        Some("1048576")
    );

    bystander.finish("c13 out-of-range topic configs");
    report_rss(&broker, "c13 out-of-range topic configs");
    drop(client);

    broker
        .restart()
        .expect("restarting after the refused configs");
    let mut client = support::connect(&broker);
    assert_eq!(
        describe(&mut client, RESOURCE_TOPIC, "c13-target"),
        configs_after,
        "configs changed across the restart"
    );
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let stored = support::read_partition(&mut client, fetch_version, &target, 0);
    assert_eq!(
        stored.get(&0).map(String::as_str),
        Some("before"),
        "the record produced before the hostile configs: {stored:?}"
    );
}

/// Broker keys out of Kafka 4.1's bounds (and the three values the issue
/// found accepted: `socket.request.max.bytes=0`,
/// `default.replication.factor=0`, `log.retention.ms=-2`): the broker
/// exits non-zero at start, before serving, and its stderr names the key
/// in Kafka's words.
#[test]
fn out_of_range_broker_keys_stop_the_broker_at_start() {
    let rows: &[(&str, &str, &str)] = &[
        (
            "log.segment.bytes",
            "102400",
            "Value must be at least 1048576",
        ),
        (
            "log.segment.bytes",
            "1048575",
            "Value must be at least 1048576",
        ),
        ("socket.request.max.bytes", "0", "Value must be at least 1"),
        (
            "default.replication.factor",
            "0",
            "Value must be at least 1",
        ),
        (
            "log.retention.ms",
            "-2",
            "Value must be unlimited (-1) or at least 1",
        ),
        (
            "log.retention.ms",
            "0",
            "Value must be unlimited (-1) or at least 1",
        ),
        (
            "log.retention.hours",
            "0",
            "Value must be unlimited (-1) or at least 1",
        ),
        ("num.partitions", "0", "Value must be at least 1"),
        ("message.max.bytes", "-1", "Value must be at least 0"),
        ("log.index.size.max.bytes", "3", "Value must be at least 4"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        (
            "offsets.topic.segment.bytes",
            "4096",
            "Value must be at least 1048576",
        ),
        (
            "log.cleaner.min.cleanable.ratio",
            "1.5",
            "Value must be no more than 1",
        ),
        ("node.id", "-1", "Value must be at least 0"),
        ("log.roll.hours", "0", "Value must be at least 1"),
        ("group.max.size", "0", "Value must be at least 1"),
        (
            "socket.request.max.bytes",
            "2147483648",
            "Not a number of type INT",
        ),
        (
            "log.cleaner.dedupe.buffer.size",
            "1048576",
            "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread",
        ),
    ];
    for (key, value, reason) in rows {
        match TestBroker::builder().override_config(key, value).start() {
            Ok(mut broker) => {
                let _ = broker.shutdown();
                panic!("weir started with {key}={value}");
            }
            Err(HarnessError::ExitedBeforeReady {
                status,
                stderr_tail,
            }) => {
                assert!(!status.success(), "{key}={value}: exit {status}");
                let expected = format!("for configuration {key}: {reason}");
                assert!(
                    stderr_tail.contains(&expected),
                    "{key}={value}: stderr lacks {expected:?}:\n{stderr_tail}"
                );
            }
            Err(e) => panic!("{key}={value}: {e}"),
        }
    }
    println!("{} out-of-range broker keys refused at start", rows.len());
    // Kafka's -1 for "unlimited" and the exact bounds start.
    let mut broker = TestBroker::builder()
        .override_config("log.retention.ms", "-1")
        .override_config("log.retention.bytes", "-1")
        .override_config("log.segment.bytes", "1048576")
        .override_config("socket.request.max.bytes", "1")
        .start()
        .expect("in-range values start");
    assert!(broker.shutdown().expect("shutdown").success());
}

/// DescribeConfigs reports Kafka 4.1's defaults for the keys Weir lists
/// that KIP-1030 (Kafka 4.0) touched: num.recovery.threads.per.data.dir
/// is 2 (1 before), segment.bytes / log.segment.bytes keep 1 GiB (only
/// their minimum moved), segment.index.bytes 10 MiB; Kafka's internal
/// `internal.segment.bytes` is listed only on a topic that sets it, and
/// there it makes the log roll small segments without the 1 MiB minimum.
#[test]
fn describe_configs_reports_kafka_4_1_defaults_and_internal_segment_bytes() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let broker_configs = describe(&mut client, RESOURCE_BROKER, &broker.node_id().to_string());
    for (key, default) in [
        ("num.recovery.threads.per.data.dir", "2"),
        ("log.segment.bytes", "1073741824"),
        ("log.index.size.max.bytes", "10485760"),
        ("message.max.bytes", "1048588"),
        ("socket.request.max.bytes", "104857600"),
        ("default.replication.factor", "1"),
    ] {
        assert_eq!(
            value_of(&broker_configs, key).as_deref(),
            Some(default),
            "broker {key}"
        );
    }
    // Kafka 4.1 defines these two with a null default (the .hours forms
    // carry the 168 hours): listed, with a null value.
    for key in ["log.retention.ms", "log.roll.ms"] {
        assert_eq!(
            value_of(&broker_configs, key).as_deref(),
            Some(NULL),
            "broker {key}"
        );
    }
    let plain = support::create_topic(&mut client, &versions, "kip1030-defaults", &[]);
    let topic_configs = describe(&mut client, RESOURCE_TOPIC, &plain.name);
    for (key, default) in [
        ("segment.bytes", "1073741824"),
        ("segment.index.bytes", "10485760"),
        ("segment.ms", "604800000"),
        ("retention.ms", "604800000"),
        ("max.message.bytes", "1048588"),
    ] {
        assert_eq!(
            value_of(&topic_configs, key).as_deref(),
            Some(default),
            "topic {key}"
        );
    }
    assert_eq!(value_of(&topic_configs, "internal.segment.bytes"), None);

    let small = support::create_topic(
        &mut client,
        &versions,
        "internal-small-segments",
        &[("internal.segment.bytes", "4096")],
    );
    let small_configs = describe(&mut client, RESOURCE_TOPIC, &small.name);
    assert_eq!(
        value_of(&small_configs, "internal.segment.bytes").as_deref(),
        Some("4096")
    );
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let value = "s".repeat(1000);
    for i in 0..12 {
        support::produce_ok(
            &mut client,
            produce_version,
            &small,
            0,
            records::plain_batch(&[value.as_str()], i),
        );
    }
    let segments = std::fs::read_dir(broker.data_dir().join("internal-small-segments-0"))
        .expect("partition dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".log"))
        .count();
    assert!(segments >= 3, "{segments} segments for 12 KB at 4096 bytes");
}
