//! Hostile inputs: see `super` for the conventions. This module: file
//! descriptors and start/shutdown with many partitions (issue 15, scopes 1
//! and 7, and the first acceptance point).
//!
//! The hostile inputs: one CreateTopics of 7,000 partitions (it used to
//! take 3 descriptors per partition, answer success past the 20,000 limit
//! and leave a broker that exited with "Too many open files" on every
//! restart); CreateTopics, CreatePartitions and Metadata auto-creation
//! while connections hold nearly every descriptor (KAFKA_STORAGE_ERROR,
//! nothing created); connections past the limit (accept backs off with a
//! logged EMFILE, serves again once they close); and SIGTERM / start with
//! 10,000 partitions (the figures are printed).

use std::net::TcpStream;
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreateTopicsRequest, FetchRequest, MetadataRequest,
    MetadataResponse, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::{records, RawClient, TestBroker};

use super::{open_fds, report_rss, Bystander};
use crate::support::{self, error_code, TopicInfo};

/// Kafka's KAFKA_STORAGE_ERROR (56): what the broker answers a creation it
/// has no descriptors for (see `weir_broker::descriptors`).
const KAFKA_STORAGE_ERROR: i16 = 56;

/// Descriptors a broker may hold beyond one per partition: those it holds
/// with no partition at all (measured in each test: the runtime, listeners,
/// the metadata log, its own log files, the bystander's connection) plus
/// this margin for files in use at the moment of counting (a flush's index
/// files, a checkpoint being written, the test's own connections).
const DESCRIPTOR_MARGIN: usize = 64;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// One CreateTopics of `partitions` partitions (replication factor 1).
fn create_topic(
    client: &mut RawClient,
    version: i16,
    topic: &str,
    partitions: i32,
) -> CreatableTopicResult {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(120_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]);
    let mut response = client.send(&request, version).expect("CreateTopics");
    response.topics.remove(0)
}

/// Metadata for `topics`, auto-creating them when `auto_create`.
fn metadata(
    client: &mut RawClient,
    version: i16,
    topics: &[&str],
    auto_create: bool,
) -> MetadataResponse {
    let request = MetadataRequest::default()
        .with_topics(Some(
            topics
                .iter()
                .map(|t| MetadataRequestTopic::default().with_name(Some(name(t))))
                .collect(),
        ))
        .with_allow_auto_topic_creation(auto_create);
    client.send(&request, version).expect("Metadata")
}

/// Waits until Metadata shows `topic` with `partitions` partitions, each
/// with a leader, and returns it.
#[track_caller]
fn wait_served(client: &mut RawClient, version: i16, topic: &str, partitions: usize) -> TopicInfo {
    support::poll_until(
        Duration::from_secs(60),
        &format!("{topic}: {partitions} partitions with leaders"),
        || {
            let response = metadata(client, version, &[topic], false);
            let t = response.topics.first()?;
            let led = t
                .partitions
                .iter()
                .filter(|p| p.error_code == error_code::NONE && p.leader_id.0 >= 0)
                .count();
            (t.error_code == error_code::NONE && led == partitions).then(|| TopicInfo {
                name: topic.to_owned(),
                id: t.topic_id,
                partitions,
            })
        },
    )
}

/// Versions used by the tests on `broker`.
struct Versions {
    create_topics: i16,
    create_partitions: i16,
    metadata: i16,
    produce: i16,
    fetch: i16,
}

fn versions(client: &mut RawClient) -> Versions {
    let v = support::api_versions(client);
    Versions {
        create_topics: support::newest::<CreateTopicsRequest>(&v, ApiKey::CreateTopics),
        create_partitions: support::newest::<CreatePartitionsRequest>(&v, ApiKey::CreatePartitions),
        metadata: support::newest::<MetadataRequest>(&v, ApiKey::Metadata),
        produce: support::newest::<ProduceRequest>(&v, ApiKey::Produce),
        fetch: support::newest::<FetchRequest>(&v, ApiKey::Fetch),
    }
}

/// Produces `"{tag}-{p}"` to each partition of `sample`.
fn produce_sample(
    client: &mut RawClient,
    v: &Versions,
    topic: &TopicInfo,
    sample: &[i32],
    tag: &str,
) {
    for &p in sample {
        let value = format!("{tag}-{p}");
        support::produce_ok(
            client,
            v.produce,
            topic,
            p,
            records::plain_batch(&[&value], 1),
        );
    }
}

/// Checks that each partition of `sample` holds exactly `tags` in order.
#[track_caller]
fn assert_sample(
    client: &mut RawClient,
    v: &Versions,
    topic: &TopicInfo,
    sample: &[i32],
    tags: &[&str],
) {
    for &p in sample {
        let stored: Vec<String> = support::read_partition(client, v.fetch, topic, p)
            .into_values()
            .collect();
        let expected: Vec<String> = tags.iter().map(|t| format!("{t}-{p}")).collect();
        assert_eq!(stored, expected, "{}/{p}", topic.name);
    }
}

/// SIGTERM then start again, printing both durations.
fn timed_restart(broker: &mut TestBroker, what: &str) {
    let started = Instant::now();
    let status = broker.shutdown().expect("SIGTERM");
    let stopped = started.elapsed();
    assert!(
        status.success(),
        "{what}: exit {status}: {}",
        broker.stderr_tail()
    );
    let started = Instant::now();
    broker.start_again().expect("starting again");
    println!(
        "{what}: shutdown took {:.2} s, start to ready {:.2} s",
        stopped.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// Acceptance (issue 15): CreateTopics of 7,000 partitions, produce, restart:
/// the broker starts, serves every partition with earlier data intact, and
/// holds at most about one descriptor per partition.
#[test]
fn seven_thousand_partitions_cost_one_descriptor_each_and_survive_a_restart() {
    const PARTITIONS: usize = 7_000;
    let mut broker = support::start_broker();
    let bystander = Bystander::start(&broker, "fds-bystander");
    let pid = broker.pid().expect("running");
    let fixed = open_fds(pid);
    let mut client = support::connect(&broker);
    let v = versions(&mut client);

    let started = Instant::now();
    let created = create_topic(&mut client, v.create_topics, "fds-many", PARTITIONS as i32);
    assert_eq!(
        created.error_code,
        error_code::NONE,
        "{:?}",
        created.error_message
    );
    println!(
        "CreateTopics of {PARTITIONS} partitions answered in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let topic = wait_served(&mut client, v.metadata, "fds-many", PARTITIONS);
    let sample = [0, 1, 3_499, PARTITIONS as i32 - 1];
    produce_sample(&mut client, &v, &topic, &sample, "before");
    let after_create = open_fds(pid);
    println!("descriptors: {fixed} before, {after_create} with {PARTITIONS} partitions");
    assert!(
        after_create <= PARTITIONS + fixed + DESCRIPTOR_MARGIN,
        "{after_create} descriptors for {PARTITIONS} partitions ({fixed} before)"
    );
    report_rss(&broker, "7,000 partitions created");
    bystander.finish("CreateTopics of 7,000 partitions");

    timed_restart(&mut broker, "7,000 partitions");
    let pid = broker.pid().expect("running");
    let bystander = Bystander::start(&broker, "fds-bystander");
    let mut client = support::connect(&broker);
    let topic = wait_served(&mut client, v.metadata, "fds-many", PARTITIONS);
    assert_sample(&mut client, &v, &topic, &sample, &["before"]);
    produce_sample(&mut client, &v, &topic, &sample, "after");
    assert_sample(&mut client, &v, &topic, &sample, &["before", "after"]);
    let after_restart = open_fds(pid);
    println!("descriptors after the restart: {after_restart}");
    assert!(
        after_restart <= PARTITIONS + fixed + DESCRIPTOR_MARGIN,
        "{after_restart} descriptors for {PARTITIONS} partitions after a restart ({fixed} before)"
    );
    report_rss(&broker, "7,000 partitions after a restart");
    bystander.finish("after the restart with 7,000 partitions");
}

/// Connections that hold nearly every descriptor of a broker with a low
/// limit: creations are refused with KAFKA_STORAGE_ERROR and create
/// nothing, existing partitions stay served; connections past the limit
/// make accept fail (logged, backed off) until they close; the broker
/// restarts under the same limit with its data.
#[test]
fn a_broker_out_of_descriptors_refuses_creations_and_keeps_serving() {
    const LIMIT: u64 = 256;
    let mut broker = TestBroker::builder()
        .open_files_limit(LIMIT)
        .start()
        .expect("starting weir with a low descriptor limit");
    let pid = broker.pid().expect("running");
    let bystander = Bystander::start(&broker, "fds-bystander");
    let mut client = support::connect(&broker);
    let v = versions(&mut client);
    // More partitions than the limit allows files open (the cache holds 64
    // of them): created and served all the same.
    let created = create_topic(&mut client, v.create_topics, "fds-existing", 300);
    assert_eq!(
        created.error_code,
        error_code::NONE,
        "{:?}",
        created.error_message
    );
    let existing = wait_served(&mut client, v.metadata, "fds-existing", 300);
    let sample = [0, 150, 299];
    produce_sample(&mut client, &v, &existing, &sample, "before");

    // Hostile: connections until fewer descriptors are free than a creation
    // needs (the broker keeps 64), but some are.
    let target = LIMIT as usize - 32;
    let mut held = Vec::new();
    while open_fds(pid) < target {
        let before = open_fds(pid);
        held.push(TcpStream::connect(broker.bootstrap()).expect("connect"));
        // Accepted: the broker holds one more descriptor.
        support::poll_until(Duration::from_secs(10), "the connection accepted", || {
            (open_fds(pid) > before).then_some(())
        });
    }
    println!(
        "{} connections hold the broker at {} of {LIMIT} descriptors",
        held.len(),
        open_fds(pid)
    );

    let refused = create_topic(&mut client, v.create_topics, "fds-refused", 10);
    assert_eq!(
        refused.error_code, KAFKA_STORAGE_ERROR,
        "CreateTopics: {:?}",
        refused.error_message
    );
    let grown = client
        .send(
            &CreatePartitionsRequest::default()
                .with_timeout_ms(30_000)
                .with_topics(vec![CreatePartitionsTopic::default()
                    .with_name(name("fds-existing"))
                    .with_count(310)]),
            v.create_partitions,
        )
        .expect("CreatePartitions");
    assert_eq!(
        grown.results[0].error_code, KAFKA_STORAGE_ERROR,
        "CreatePartitions"
    );
    let auto = metadata(&mut client, v.metadata, &["fds-auto"], true);
    assert_eq!(
        auto.topics[0].error_code, KAFKA_STORAGE_ERROR,
        "Metadata auto-creation"
    );
    // Nothing was created.
    let after = metadata(
        &mut client,
        v.metadata,
        &["fds-refused", "fds-auto", "fds-existing"],
        false,
    );
    assert_eq!(
        after.topics[0].error_code,
        error_code::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(
        after.topics[1].error_code,
        error_code::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(after.topics[2].partitions.len(), 300);
    // Existing partitions are served.
    produce_sample(&mut client, &v, &existing, &sample, "during");
    assert_sample(&mut client, &v, &existing, &sample, &["before", "during"]);
    bystander.finish("creations refused for lack of descriptors");

    // Hostile: connections past the limit. accept fails with EMFILE, is
    // logged and backed off; the broker serves again once they close.
    for _ in 0..64 {
        held.push(TcpStream::connect(broker.bootstrap()).expect("connect"));
    }
    support::poll_until(
        Duration::from_secs(10),
        "accept to fail with EMFILE",
        || {
            std::fs::read_to_string(broker.log_path())
                .ok()
                .filter(|log| log.contains("accept failed") && log.contains("Too many open files"))
        },
    );
    drop(held);
    support::poll_until(Duration::from_secs(30), "descriptors to be freed", || {
        (open_fds(pid) + 64 < target).then_some(())
    });
    let mut fresh = support::connect(&broker);
    let created = create_topic(&mut fresh, v.create_topics, "fds-after", 10);
    assert_eq!(
        created.error_code,
        error_code::NONE,
        "{:?}",
        created.error_message
    );
    wait_served(&mut fresh, v.metadata, "fds-after", 10);

    // The broker restarts under the same limit, with its data.
    timed_restart(
        &mut broker,
        "300 partitions under a limit of 256 descriptors",
    );
    let mut client = support::connect(&broker);
    let existing = wait_served(&mut client, v.metadata, "fds-existing", 300);
    assert_sample(&mut client, &v, &existing, &sample, &["before", "during"]);
    wait_served(&mut client, v.metadata, "fds-after", 10);
}

/// Scope 7: SIGTERM and start with 10,000 partitions finish (the seconds
/// are printed, not asserted) and the broker serves every partition after.
#[test]
fn shutdown_and_start_with_ten_thousand_partitions() {
    const PER_TOPIC: usize = 5_000;
    let mut broker = support::start_broker();
    let mut client = support::connect(&broker);
    let v = versions(&mut client);
    let started = Instant::now();
    let mut topics = Vec::new();
    for t in ["fds-ten-a", "fds-ten-b"] {
        let created = create_topic(&mut client, v.create_topics, t, PER_TOPIC as i32);
        assert_eq!(
            created.error_code,
            error_code::NONE,
            "{:?}",
            created.error_message
        );
        topics.push(wait_served(&mut client, v.metadata, t, PER_TOPIC));
    }
    println!(
        "10,000 partitions created in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let sample = [0, PER_TOPIC as i32 - 1];
    for topic in &topics {
        produce_sample(&mut client, &v, topic, &sample, "before");
    }
    timed_restart(&mut broker, "10,000 partitions");
    let mut client = support::connect(&broker);
    for topic in &topics {
        let topic = wait_served(&mut client, v.metadata, &topic.name, PER_TOPIC);
        assert_sample(&mut client, &v, &topic, &sample, &["before"]);
    }
    report_rss(&broker, "10,000 partitions after a restart");
}
