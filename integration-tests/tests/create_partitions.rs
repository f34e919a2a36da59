//! CreatePartitions (key 37, v0-3) over raw frames: growing topics by
//! placement and by manual assignment, validate_only, every error Kafka
//! answers (messages checked against Kafka 4.1.2), the `timeout_ms <= 0`
//! answer, that the new partitions take produce and fetch at once, and
//! that a restart keeps them (they are metadata records).

use bytes::Bytes;
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreatePartitionsRequest, CreatePartitionsResponse, FetchRequest,
    ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use weir_integration_tests::clients;
use weir_integration_tests::records::{self, NewRecord};
use weir_integration_tests::RawClient;

use crate::support::{self, error_code, kafka_topics, TopicInfo, CLIENT_TIMEOUT};

const REQUEST_TIMED_OUT: i16 = 7;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;

fn grow(name: &str, count: i32, assignments: Option<Vec<Vec<i32>>>) -> CreatePartitionsTopic {
    CreatePartitionsTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.to_string())))
        .with_count(count)
        .with_assignments(assignments.map(|lists| {
            lists
                .into_iter()
                .map(|brokers| {
                    CreatePartitionsAssignment::default()
                        .with_broker_ids(brokers.into_iter().map(BrokerId).collect())
                })
                .collect()
        }))
}

fn create_partitions(
    client: &mut RawClient,
    version: i16,
    topics: Vec<CreatePartitionsTopic>,
    timeout_ms: i32,
    validate_only: bool,
) -> CreatePartitionsResponse {
    client
        .send(
            &CreatePartitionsRequest::default()
                .with_topics(topics)
                .with_timeout_ms(timeout_ms)
                .with_validate_only(validate_only),
            version,
        )
        .unwrap_or_else(|e| panic!("CreatePartitions v{version}: {e}"))
}

/// `(name, error code, message)` of each result, in response order.
fn outcomes(response: &CreatePartitionsResponse) -> Vec<(String, i16, Option<String>)> {
    response
        .results
        .iter()
        .map(|r| {
            (
                r.name.0.to_string(),
                r.error_code,
                r.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

fn ok(name: &str) -> (String, i16, Option<String>) {
    (name.to_string(), error_code::NONE, None)
}

fn failed(name: &str, code: i16, message: Option<&str>) -> (String, i16, Option<String>) {
    (name.to_string(), code, message.map(str::to_string))
}

/// Produces one record to `partition` and reads the partition back.
#[track_caller]
fn produce_and_read(
    client: &mut RawClient,
    versions: &kafka_protocol::messages::ApiVersionsResponse,
    topic: &TopicInfo,
    partition: i32,
    value: &str,
) {
    let produce_version = support::newest::<ProduceRequest>(versions, ApiKey::Produce);
    let fetch_version = support::newest::<FetchRequest>(versions, ApiKey::Fetch);
    let batch: Bytes = records::encode_batch(
        &[NewRecord::value(value.as_bytes().to_vec(), 1)],
        Compression::None,
    )
    .unwrap();
    let offset = support::produce_ok(client, produce_version, topic, partition, batch);
    let stored = support::read_partition(client, fetch_version, topic, partition);
    assert_eq!(stored.get(&offset).map(String::as_str), Some(value));
}

#[test]
fn create_partitions_grows_topics_and_answers_errors_as_kafka() {
    let broker = support::start_broker();
    let node = broker.node_id();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let advertised = support::advertised(&versions, ApiKey::CreatePartitions)
        .expect("CreatePartitions is advertised");
    assert_eq!((advertised.min_version, advertised.max_version), (0, 3));
    for version in 0..=3 {
        let name = format!("grow-v{version}");
        let topic = support::create_topic(&mut client, &versions, &name, &[]);
        assert_eq!(topic.partitions, 1);

        // validate_only answers as a real change would and changes nothing.
        let r = create_partitions(
            &mut client,
            version,
            vec![grow(&name, 3, None)],
            30_000,
            true,
        );
        assert_eq!(outcomes(&r), vec![ok(&name)]);
        assert_eq!(
            support::ensure_topic(&mut client, &versions, &name).partitions,
            1
        );

        // Placed, then manually assigned: the new partitions serve at once.
        let r = create_partitions(
            &mut client,
            version,
            vec![grow(&name, 3, None)],
            30_000,
            false,
        );
        assert_eq!(outcomes(&r), vec![ok(&name)]);
        let topic = support::ensure_topic(&mut client, &versions, &name);
        assert_eq!(topic.partitions, 3);
        produce_and_read(&mut client, &versions, &topic, 2, "in partition 2");
        let r = create_partitions(
            &mut client,
            version,
            vec![grow(&name, 5, Some(vec![vec![node], vec![node]]))],
            30_000,
            false,
        );
        assert_eq!(outcomes(&r), vec![ok(&name)]);
        let topic = support::ensure_topic(&mut client, &versions, &name);
        assert_eq!(topic.partitions, 5);
        produce_and_read(&mut client, &versions, &topic, 4, "in partition 4");

        // Counts that are no increase; unknown topics.
        let r = create_partitions(
            &mut client,
            version,
            vec![grow(&name, 5, None), grow("no-such-topic", 2, None)],
            30_000,
            false,
        );
        assert_eq!(
            outcomes(&r),
            vec![
                failed(
                    &name,
                    INVALID_PARTITIONS,
                    Some("Topic already has 5 partition(s).")
                ),
                failed(
                    "no-such-topic",
                    error_code::UNKNOWN_TOPIC_OR_PARTITION,
                    None
                ),
            ]
        );
        let r = create_partitions(
            &mut client,
            version,
            vec![grow(&name, 2, None)],
            30_000,
            false,
        );
        assert_eq!(
            outcomes(&r),
            vec![failed(
                &name,
                INVALID_PARTITIONS,
                Some(&format!(
                    "The topic {name} currently has 5 partition(s); 2 would not be an increase."
                ))
            )]
        );

        // A name twice: one INVALID_REQUEST result, nothing done for it;
        // the other topic of the request still grows.
        let other = format!("grow-other-v{version}");
        support::create_topic(&mut client, &versions, &other, &[]);
        let r = create_partitions(
            &mut client,
            version,
            vec![
                grow(&name, 6, None),
                grow(&other, 2, None),
                grow(&name, 7, None),
            ],
            30_000,
            false,
        );
        assert_eq!(
            outcomes(&r),
            vec![
                failed(
                    &name,
                    error_code::INVALID_REQUEST,
                    Some("Duplicate topic name.")
                ),
                ok(&other),
            ]
        );
        assert_eq!(
            support::ensure_topic(&mut client, &versions, &name).partitions,
            5
        );
        assert_eq!(
            support::ensure_topic(&mut client, &versions, &other).partitions,
            2
        );

        // Bad manual assignments, each with Kafka's message.
        for (assignments, message) in [
            (
                vec![vec![node]],
                "Attempted to add 2 additional partition(s), but only 1 assignment(s) were \
                 specified."
                    .to_string(),
            ),
            (
                vec![vec![node], vec![]],
                "The manual partition assignment includes an empty replica list.".to_string(),
            ),
            (
                vec![vec![node], vec![node + 100]],
                format!(
                    "The manual partition assignment includes broker {}, but no such broker is \
                     registered.",
                    node + 100
                ),
            ),
            (
                vec![vec![node], vec![node, node]],
                format!(
                    "The manual partition assignment includes the broker {node} more than once."
                ),
            ),
        ] {
            for validate_only in [true, false] {
                let r = create_partitions(
                    &mut client,
                    version,
                    vec![grow(&name, 7, Some(assignments.clone()))],
                    30_000,
                    validate_only,
                );
                assert_eq!(
                    outcomes(&r),
                    vec![failed(&name, INVALID_REPLICA_ASSIGNMENT, Some(&message))]
                );
            }
        }
        assert_eq!(
            support::ensure_topic(&mut client, &versions, &name).partitions,
            5
        );

        // timeout_ms <= 0 is past Kafka's controller deadline: every topic
        // (duplicates too) gets REQUEST_TIMED_OUT, and nothing changes.
        for timeout_ms in [0, -1] {
            let r = create_partitions(
                &mut client,
                version,
                vec![
                    grow(&name, 9, None),
                    grow(&name, 9, None),
                    grow(&other, 9, None),
                ],
                timeout_ms,
                false,
            );
            assert_eq!(
                outcomes(&r),
                vec![
                    failed(&name, REQUEST_TIMED_OUT, None),
                    failed(&name, REQUEST_TIMED_OUT, None),
                    failed(&other, REQUEST_TIMED_OUT, None),
                ]
            );
        }
        assert_eq!(
            support::ensure_topic(&mut client, &versions, &other).partitions,
            2
        );
        assert_eq!(
            support::ensure_topic(&mut client, &versions, &name).partitions,
            5
        );
        // Only duplicates: Kafka queues nothing, so no deadline applies.
        let r = create_partitions(
            &mut client,
            version,
            vec![grow(&name, 9, None), grow(&name, 9, None)],
            0,
            false,
        );
        assert_eq!(
            outcomes(&r),
            vec![failed(
                &name,
                error_code::INVALID_REQUEST,
                Some("Duplicate topic name.")
            )]
        );
        let r = create_partitions(&mut client, version, vec![], 0, false);
        assert!(r.results.is_empty());
    }
}

#[test]
fn internal_topics_may_grow_as_in_kafka() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    // Kafka (KRaft) lets CreatePartitions grow __consumer_offsets like any
    // topic (ReplicationControlManager has no internal-topic check).
    let name = "__consumer_offsets";
    support::create_topic(&mut client, &versions, name, &[]);
    let current = support::ensure_topic(&mut client, &versions, name).partitions as i32;
    let r = create_partitions(
        &mut client,
        3,
        vec![grow(name, current + 1, None)],
        30_000,
        true,
    );
    assert_eq!(outcomes(&r), vec![ok(name)]);
    let r = create_partitions(
        &mut client,
        3,
        vec![grow(name, current, None)],
        30_000,
        true,
    );
    assert_eq!(outcomes(&r)[0].1, INVALID_PARTITIONS);
}

#[test]
fn added_partitions_survive_a_restart() {
    let mut broker = support::start_broker();
    let name = "grown-then-restarted";
    {
        let mut client = support::connect(&broker);
        let versions = support::api_versions(&mut client);
        support::create_topic(&mut client, &versions, name, &[]);
        let r = create_partitions(&mut client, 3, vec![grow(name, 4, None)], 30_000, false);
        assert_eq!(outcomes(&r), vec![ok(name)]);
        let topic = support::ensure_topic(&mut client, &versions, name);
        produce_and_read(&mut client, &versions, &topic, 3, "before restart");
    }
    broker.restart().expect("graceful restart");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let topic = support::ensure_topic(&mut client, &versions, name);
    assert_eq!(topic.partitions, 4);
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let stored = support::read_partition(&mut client, fetch_version, &topic, 3);
    assert_eq!(
        stored.values().map(String::as_str).collect::<Vec<_>>(),
        vec!["before restart"]
    );
    produce_and_read(&mut client, &versions, &topic, 3, "after restart");
}

/// `kafka-topics --alter --partitions` (Java Admin `createPartitions`)
/// grows a topic, `--describe` shows it, a smaller count fails with Kafka's
/// message, and kcat (librdkafka) produces to and consumes from the new
/// partition.
#[test]
fn kafka_topics_alter_partitions_then_kcat_uses_the_new_partition() {
    let broker = support::start_broker();
    let bootstrap = broker.bootstrap();
    let topic = "cli-grown";
    kafka_topics(
        &bootstrap,
        &[
            "--create",
            "--topic",
            topic,
            "--partitions",
            "1",
            "--replication-factor",
            "1",
        ],
    )
    .assert_success();
    kafka_topics(
        &bootstrap,
        &["--alter", "--topic", topic, "--partitions", "3"],
    )
    .assert_success();
    let described = kafka_topics(&bootstrap, &["--describe", "--topic", topic]);
    described.assert_success();
    let text = described.stdout_text();
    assert!(text.contains("PartitionCount: 3"), "{text}");
    assert!(text.contains("Partition: 2"), "{text}");

    let shrink = kafka_topics(
        &bootstrap,
        &["--alter", "--topic", topic, "--partitions", "2"],
    );
    let said = format!("{}{}", shrink.stdout_text(), shrink.stderr);
    assert!(
        said.contains(
            "The topic cli-grown currently has 3 partition(s); 2 would not be an increase."
        ),
        "{said}"
    );

    support::kcat_produce(
        &bootstrap,
        topic,
        &["into-partition-2".to_string()],
        &["-p", "2"],
    );
    assert_eq!(
        support::kcat_consume(&bootstrap, topic, 2, "beginning"),
        vec!["into-partition-2".to_string()]
    );
}

/// kafka-python's `KafkaAdminClient.create_partitions` and `alter_configs`
/// (legacy AlterConfigs), then its producer and consumer on the new partition.
#[test]
fn kafka_python_admin_grows_a_topic_and_replaces_its_configs() {
    let broker = support::start_broker();
    let mut command = clients::python_script("kafka_python_admin.py").expect("venv");
    command.arg(broker.bootstrap()).arg("kafka-python-grown");
    let output = clients::run(command, None, CLIENT_TIMEOUT).expect("kafka-python");
    output.assert_success();
    let stdout = output.stdout_text();
    assert!(stdout.contains("partitions [0, 1, 2]"), "{stdout}");
    assert!(
        stdout.contains("configs {'max.message.bytes': '65536'}"),
        "{stdout}"
    );
    assert!(
        stdout.contains("consumed in-new-partition from partition 2"),
        "{stdout}"
    );
}
