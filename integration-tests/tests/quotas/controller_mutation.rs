//! The controller mutation quota (KIP-599, `controller_mutation_rate`):
//! CreateTopics, CreatePartitions and DeleteTopics count the partitions
//! they create or delete against a token bucket per (user, client id), as
//! Kafka's `ControllerMutationQuotaManager`. The bucket holds at most
//! `quota * controller.quota.window.num * controller.quota.window.size.seconds`
//! tokens and starts full; a mutation takes as many tokens as partitions.
//! New request versions (CreateTopics v6+, CreatePartitions v3+,
//! DeleteTopics v5+) are strict: a topic whose mutation comes while the
//! bucket is below zero is refused with THROTTLING_QUOTA_EXCEEDED (89);
//! older ones are permissive: accepted, and only the throttle time says
//! the bucket is empty.
//!
//! The tests run a broker with one sample of one second and give the
//! quota'd client a rate of 0.01 partitions/s: its bucket holds 0.01
//! tokens, so its first mutation (of any size) passes and leaves it about
//! -2 tokens, which take minutes to come back. Every outcome below holds
//! however slowly the test runs for that long. A throttled response mutes
//! its connection for the throttle time (KIP-219), so each request after
//! one goes on a new connection.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest,
    MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::clients::CommandOutput;
use weir_integration_tests::{RawClient, TestBroker};

use super::{quota_counter, set_client_quota, wait_for_client_quota};
use crate::support::{self, error_code};

/// Kafka's THROTTLING_QUOTA_EXCEEDED.
const THROTTLING_QUOTA_EXCEEDED: i16 = 89;
/// Kafka's message for it (`Errors.THROTTLING_QUOTA_EXCEEDED`).
const THROTTLED_MESSAGE: &str = "The throttling quota has been exceeded.";
/// `controller_mutation_rate` of the quota'd client, partitions per second.
const RATE: f64 = 0.01;

/// A broker whose mutation buckets hold one sample of one second (a
/// bucket of `RATE` tokens), with metrics on; returns it with a raw
/// client (client id `weir-itest`, no quota) and its ApiVersions table.
#[track_caller]
fn start_mutation_broker() -> (TestBroker, RawClient, ApiVersionsResponse) {
    let broker = TestBroker::builder()
        .config("controller.quota.window.num", "1")
        .config("controller.quota.window.size.seconds", "1")
        .metrics(true)
        .start()
        .expect("starting weir with one controller quota sample of 1 s");
    let mut admin = support::connect(&broker);
    let versions = support::api_versions(&mut admin);
    (broker, admin, versions)
}

/// A topic's result as (error code, message).
fn outcome(error_code: i16, message: &Option<StrBytes>) -> (i16, Option<String>) {
    (error_code, message.as_ref().map(|m| m.to_string()))
}

/// A new connection as client id `client_id`.
#[track_caller]
fn client(broker: &TestBroker, client_id: &str) -> RawClient {
    let mut client = support::connect(broker);
    client.set_client_id(Some(client_id));
    client
}

/// CreateTopics at `version` of `topics` (name, partitions; replication
/// factor 1) as `client`: the per-topic (error code, message) by name and
/// the response's `throttle_time_ms`.
#[track_caller]
fn create_topics(
    client: &mut RawClient,
    version: i16,
    topics: &[(&str, i32)],
) -> (BTreeMap<String, (i16, Option<String>)>, i32) {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(
            topics
                .iter()
                .map(|(name, partitions)| {
                    CreatableTopic::default()
                        .with_name(TopicName(StrBytes::from_string((*name).to_owned())))
                        .with_num_partitions(*partitions)
                        .with_replication_factor(1)
                })
                .collect(),
        );
    let response = client
        .send(&request, version)
        .unwrap_or_else(|e| panic!("CreateTopics v{version}: {e}"));
    let results = response
        .topics
        .iter()
        .map(|t| (t.name.to_string(), outcome(t.error_code, &t.error_message)))
        .collect();
    (results, response.throttle_time_ms)
}

/// DeleteTopics at `version` (by name: `topics` from v6, `topic_names`
/// before) of `name` as `client`: its (error code, message) and the
/// response's `throttle_time_ms`.
#[track_caller]
fn delete_topic(client: &mut RawClient, version: i16, name: &str) -> ((i16, Option<String>), i32) {
    let topic = TopicName(StrBytes::from_string(name.to_owned()));
    let request = if version >= 6 {
        DeleteTopicsRequest::default()
            .with_topics(vec![DeleteTopicState::default().with_name(Some(topic))])
    } else {
        DeleteTopicsRequest::default().with_topic_names(vec![topic])
    }
    .with_timeout_ms(30_000);
    let response = client
        .send(&request, version)
        .unwrap_or_else(|e| panic!("DeleteTopics v{version}: {e}"));
    let [result] = &response.responses[..] else {
        panic!("one result in {response:?}");
    };
    (
        outcome(result.error_code, &result.error_message),
        response.throttle_time_ms,
    )
}

/// CreatePartitions at `version` growing `name` to `count` partitions as
/// `client`: its (error code, message) and the response's
/// `throttle_time_ms`.
#[track_caller]
fn create_partitions(
    client: &mut RawClient,
    version: i16,
    name: &str,
    count: i32,
) -> ((i16, Option<String>), i32) {
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
            .with_count(count)
            .with_assignments(None)]);
    let response = client
        .send(&request, version)
        .unwrap_or_else(|e| panic!("CreatePartitions v{version}: {e}"));
    let [result] = &response.results[..] else {
        panic!("one result in {response:?}");
    };
    (
        outcome(result.error_code, &result.error_message),
        response.throttle_time_ms,
    )
}

/// Every topic of the broker with its partition count (Metadata, all
/// topics), asked by `client`.
#[track_caller]
fn topics(client: &mut RawClient, versions: &ApiVersionsResponse) -> BTreeMap<String, usize> {
    let version = support::newest::<MetadataRequest>(versions, ApiKey::Metadata);
    let response: MetadataResponse = client
        .send(&MetadataRequest::default().with_topics(None), version)
        .unwrap_or_else(|e| panic!("Metadata v{version}: {e}"));
    response
        .topics
        .iter()
        .filter_map(|t| Some((t.name.as_ref()?.to_string(), t.partitions.len())))
        .collect()
}

/// The result of a topic a strict quota refused.
fn throttled() -> (i16, Option<String>) {
    (
        THROTTLING_QUOTA_EXCEEDED,
        Some(THROTTLED_MESSAGE.to_owned()),
    )
}

/// The result of a topic carried out (Kafka's null message).
fn accepted() -> (i16, Option<String>) {
    (error_code::NONE, None)
}

/// With client id `mutator` at 0.01 partitions/s: one strict CreateTopics
/// (v7) of two topics creates the first (the bucket was not empty) and
/// refuses the second per topic with THROTTLING_QUOTA_EXCEEDED and
/// Kafka's message, with a throttle time; from then on the strict versions
/// of CreateTopics, DeleteTopics (v6) and CreatePartitions (v3) are
/// refused, while the permissive ones (v5, v4, v2) are carried out and
/// answered with a throttle time. Client id `free` (no quota) creates and
/// deletes meanwhile without a throttle time. The metadata shows exactly
/// what was accepted, and the broker counts the throttled responses.
#[test]
fn mutations_over_the_rate_are_refused_by_new_versions_and_throttled_by_old_ones() {
    let (broker, mut admin, versions) = start_mutation_broker();
    set_client_quota(
        &mut admin,
        &versions,
        "mutator",
        "controller_mutation_rate",
        RATE,
    );
    for (key, strict) in [
        (ApiKey::CreateTopics, 6),
        (ApiKey::DeleteTopics, 5),
        (ApiKey::CreatePartitions, 3),
    ] {
        let range = support::advertised(&versions, key).expect("advertised");
        assert!(
            range.min_version < strict && range.max_version >= strict,
            "{key:?} is advertised in permissive and strict versions: {range:?}"
        );
    }

    // Strict: `alpha` takes the bucket from 0.01 to -1.99 tokens; `beta`
    // finds it below zero.
    let (results, throttle) = create_topics(
        &mut client(&broker, "mutator"),
        7,
        &[("alpha", 2), ("beta", 1)],
    );
    assert_eq!(
        results,
        BTreeMap::from([
            ("alpha".to_owned(), accepted()),
            ("beta".to_owned(), throttled())
        ]),
        "CreateTopics v7 as mutator"
    );
    assert!(throttle > 0, "a refused topic comes with a throttle time");

    // Permissive CreateTopics v5: carried out, throttled.
    let (results, throttle) = create_topics(&mut client(&broker, "mutator"), 5, &[("gamma", 1)]);
    assert_eq!(
        results,
        BTreeMap::from([("gamma".to_owned(), accepted())]),
        "CreateTopics v5 as mutator"
    );
    assert!(throttle > 0, "CreateTopics v5 over the rate is throttled");

    // DeleteTopics: v6 strict, v4 permissive.
    let (result, throttle) = delete_topic(&mut client(&broker, "mutator"), 6, "alpha");
    assert_eq!(result, throttled(), "DeleteTopics v6 of alpha as mutator");
    assert!(throttle > 0);
    let (result, throttle) = delete_topic(&mut client(&broker, "mutator"), 4, "gamma");
    assert_eq!(result, accepted(), "DeleteTopics v4 of gamma as mutator");
    assert!(throttle > 0, "DeleteTopics v4 over the rate is throttled");

    // CreatePartitions: v3 strict, v2 permissive.
    let (result, throttle) = create_partitions(&mut client(&broker, "mutator"), 3, "alpha", 3);
    assert_eq!(
        result,
        throttled(),
        "CreatePartitions v3 of alpha as mutator"
    );
    assert!(throttle > 0);
    let (result, throttle) = create_partitions(&mut client(&broker, "mutator"), 2, "alpha", 3);
    assert_eq!(
        result,
        accepted(),
        "CreatePartitions v2 of alpha as mutator"
    );
    assert!(
        throttle > 0,
        "CreatePartitions v2 over the rate is throttled"
    );

    // Another client id has no quota: never refused nor throttled.
    let mut free = client(&broker, "free");
    let (results, throttle) = create_topics(&mut free, 7, &[("delta", 20), ("epsilon", 20)]);
    assert_eq!(
        results,
        BTreeMap::from([
            ("delta".to_owned(), accepted()),
            ("epsilon".to_owned(), accepted())
        ]),
        "CreateTopics v7 as free"
    );
    assert_eq!(throttle, 0, "free has no quota");
    let (result, throttle) = delete_topic(&mut free, 6, "epsilon");
    assert_eq!(
        (result, throttle),
        (accepted(), 0),
        "DeleteTopics v6 as free"
    );

    assert_eq!(
        topics(&mut admin, &versions),
        BTreeMap::from([("alpha".to_owned(), 3), ("delta".to_owned(), 20)]),
        "alpha grown by the permissive CreatePartitions, beta never created, gamma and \
         epsilon deleted"
    );
    // Two refusals and four permissive answers were throttled.
    assert_eq!(
        quota_counter(&broker, "weir_quota_throttled_total", "controller_mutation"),
        6.0,
        "throttled mutation requests"
    );
    assert!(
        quota_counter(
            &broker,
            "weir_quota_throttle_time_ms_total",
            "controller_mutation"
        ) > 0.0
    );
}

/// Writes a `--command-config` file for Kafka's CLI tools that sets
/// `client.id`.
#[track_caller]
fn client_id_properties(dir: &Path, client_id: &str) -> PathBuf {
    let path = dir.join(format!("{client_id}.properties"));
    std::fs::write(&path, format!("client.id={client_id}\n"))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path
}

/// `kafka-topics` with `--command-config <config>` and `args`, whatever
/// its exit status.
#[track_caller]
fn kafka_topics_as(broker: &TestBroker, config: &Path, args: &[&str]) -> CommandOutput {
    let config = config.to_str().expect("a UTF-8 path");
    let mut all = vec!["--command-config", config];
    all.extend_from_slice(args);
    support::kafka_topics(&broker.bootstrap(), &all)
}

/// Requires that `output` failed with Kafka's message for a refused
/// mutation (TopicCommand sets `retryOnQuotaViolation(false)`, so the Java
/// Admin client reports the first THROTTLING_QUOTA_EXCEEDED).
#[track_caller]
fn assert_refused(output: &CommandOutput) {
    assert!(
        !output.status.success(),
        "{} should fail:\n{}",
        output.command,
        output.stdout_text()
    );
    let expected = format!("Error while executing topic command : {THROTTLED_MESSAGE}");
    assert!(
        output.stdout_text().lines().any(|l| l == expected),
        "{}: expected {expected:?}\nstdout:\n{}\nstderr:\n{}",
        output.command,
        output.stdout_text(),
        output.stderr
    );
}

/// Kafka's own tools: `kafka-configs` gives client id `slow` a
/// controller_mutation_rate of 0.01; `kafka-topics` (the Java Admin
/// client, newest versions: strict) as `slow` creates one topic, then is
/// refused another topic and a deletion with Kafka's message, while
/// `kafka-topics` as `fast` creates a topic meanwhile.
///
/// `kafka-topics --alter` is left to the raw CreatePartitions v3 case
/// above: TopicCommand 4.1 queues CreatePartitions and DescribeTopics at
/// once, and when the throttled CreatePartitions answer comes first the
/// Java client holds the still unsent DescribeTopicPartitions until the
/// throttle time ends (its `NetworkClient` throttles the node, KIP-219),
/// and `Admin.close()` waits for it: about 200 s at this rate, as against
/// Kafka. It did so in 1 run in 3 here.
#[test]
fn kafka_topics_over_its_mutation_rate_is_refused_and_another_client_is_not() {
    let (broker, mut admin, versions) = start_mutation_broker();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let slow = client_id_properties(dir.path(), "slow");
    let fast = client_id_properties(dir.path(), "fast");

    let output = support::kafka_configs(
        &broker.bootstrap(),
        &[
            "--alter",
            "--entity-type",
            "clients",
            "--entity-name",
            "slow",
            "--add-config",
            &format!("controller_mutation_rate={RATE}"),
        ],
    );
    output.assert_success();
    wait_for_client_quota(
        &mut admin,
        &versions,
        "slow",
        "controller_mutation_rate",
        RATE,
    );

    let create = |config: &Path, topic: &str, partitions: &str| {
        kafka_topics_as(
            &broker,
            config,
            &[
                "--create",
                "--topic",
                topic,
                "--partitions",
                partitions,
                "--replication-factor",
                "1",
            ],
        )
    };
    let output = create(&slow, "first", "2");
    output.assert_success();
    assert!(output.stdout_text().contains("Created topic first."));
    assert_refused(&create(&slow, "second", "1"));

    let output = create(&fast, "third", "4");
    output.assert_success();
    assert!(output.stdout_text().contains("Created topic third."));

    assert_refused(&kafka_topics_as(
        &broker,
        &slow,
        &["--delete", "--topic", "first"],
    ));

    assert_eq!(
        topics(&mut admin, &versions),
        BTreeMap::from([("first".to_owned(), 2), ("third".to_owned(), 4)]),
        "only what the quota allowed was done"
    );
}
