//! Kafka's own ReplicationTest matrix (`tests/kafkatest/tests/core/
//! replication_test.py`, `test_replication_with_broker_failure` with
//! `enable_idempotence=True`) on three real Weir nodes (issue 16).
//!
//! As Kafka's test: a topic of 3 partitions, RF=3,
//! `min.insync.replicas=2`, and `__consumer_offsets` of 3 partitions; a
//! background idempotent acks=all producer and a background consumer in a
//! group that commits after every poll; then one failure mode against the
//! leader of partition 0 (Kafka's `failures` table):
//!
//! - clean shutdown: SIGTERM, not restarted (the ISR ends at 2 and acks=all
//!   writes go on with `min.insync.replicas=2`);
//! - hard shutdown: SIGKILL, not restarted;
//! - clean bounce: 5 times, chasing the current leader, SIGTERM and start;
//! - hard bounce: 5 times, chasing the current leader, SIGKILL, wait until
//!   the cluster has fenced it (Kafka sleeps the session timeout), start.
//!
//! Then, as Kafka's `run_validation`: the producer is stopped (SIGTERM: it
//! flushes), the consumer runs until its commits pass every acknowledged
//! offset, and every acknowledged record was consumed once, at the offset
//! it was acknowledged at, with no duplicate (Kafka's `validate_delivery`
//! with idempotence; a record read again is allowed only after the
//! consumer reported a failed commit). Past Kafka: no send may fail, and
//! every partition's replicas (the topic's and `__consumer_offsets`') end
//! byte-identical.
//!
//! Clients: Kafka's `VerifiableProducer` and `VerifiableConsumer`
//! (kafka-tools from Maven Central, configured as `verifiable_producer.py`
//! configures an idempotent producer), and the same scenario with
//! confluent-kafka (`python/verifiable_client.py`, which prints the same
//! JSON events).
//!
//! Between two bounces the test waits only for what keeps the scenario
//! Kafka's: the producer has had records acknowledged in every partition
//! since the last bounce, and every partition has a second ISR member, so
//! killing one node never leaves a partition without an eligible leader
//! (Kafka's slow bounces and 23 s sleeps give the same; a node still
//! catching up may be in the ISR or not). Timing is never asserted.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};
use serde_json::Value;
use weir_integration_tests::clients::{self, CommandOutput, RunningClient};
use weir_integration_tests::{RawClient, TestBroker};

use crate::cluster::start_three_nodes_on_fixed_ports;
use crate::replication::create_replicated;
use crate::support;

/// Kafka's ReplicationTest topic and consumer group names.
const TOPIC: &str = "test_topic";
const GROUP: &str = "test_group";
const TOPIC_PARTITIONS: i32 = 3;
const OFFSETS_TOPIC: &str = "__consumer_offsets";
const OFFSETS_PARTITIONS: i32 = 3;
/// How many times the bounce modes bounce the leader (Kafka's
/// `range(5)`).
const BOUNCES: usize = 5;
/// Records per second the producer sends (Kafka's test: 1000).
const THROUGHPUT: u32 = 500;
/// Acknowledged records the producer needs after the last failure before
/// it is stopped.
const FINAL_PROGRESS: usize = 500;
/// How long one step may take (a fencing, an election, a catch-up).
const STEP: Duration = Duration::from_secs(60);

/// Every node: broker sessions of 1.5 s (fencing within seconds, as
/// `cluster::FAST_SESSIONS`), Kafka's test layout of `__consumer_offsets`
/// (one partition per node, RF=3), a short initial rebalance delay.
const NODE_CONFIG: [(&str, &str); 4] = [
    ("broker.heartbeat.interval.ms", "200"),
    ("broker.session.timeout.ms", "1500"),
    ("offsets.topic.num.partitions", "3"),
    ("group.initial.rebalance.delay.ms", "100"),
];

/// How the partition leader fails (the `failures` table of Kafka's
/// `replication_test.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// SIGTERM (controlled shutdown), not restarted.
    CleanShutdown,
    /// SIGKILL, not restarted.
    HardShutdown,
    /// SIGTERM and start, [`BOUNCES`] times, chasing the leader.
    CleanBounce,
    /// SIGKILL, wait for the fencing, start, [`BOUNCES`] times, chasing
    /// the leader.
    HardBounce,
}

/// Which client library produces and consumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clients {
    /// Kafka's `VerifiableProducer` / `VerifiableConsumer` (Java).
    KafkaTools,
    /// confluent-kafka (librdkafka) through `python/verifiable_client.py`.
    Confluent,
}

#[test]
fn replication_test_clean_shutdown_of_the_leader() {
    replication_test(Failure::CleanShutdown, Clients::KafkaTools);
}

#[test]
fn replication_test_hard_shutdown_of_the_leader() {
    replication_test(Failure::HardShutdown, Clients::KafkaTools);
}

#[test]
fn replication_test_clean_bounce_of_the_leader() {
    replication_test(Failure::CleanBounce, Clients::KafkaTools);
}

#[test]
fn replication_test_hard_bounce_of_the_leader() {
    replication_test(Failure::HardBounce, Clients::KafkaTools);
}

#[test]
fn replication_test_hard_bounce_of_the_leader_with_confluent_kafka() {
    replication_test(Failure::HardBounce, Clients::Confluent);
}

fn replication_test(failure: Failure, kind: Clients) {
    let mut brokers = start_three_nodes_on_fixed_ports(&NODE_CONFIG);
    let mut client = support::connect(&brokers[0]);
    let versions = support::api_versions(&mut client);
    let metadata = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    create_replicated(&mut client, TOPIC, TOPIC_PARTITIONS, "2");
    await_partitions(&brokers, metadata, "an ISR of 3 everywhere", |_, p| {
        p.isr.len() == 3
    });
    let bootstrap = brokers
        .iter()
        .map(TestBroker::bootstrap)
        .collect::<Vec<_>>()
        .join(",");
    let config_dir = tempfile::tempdir().expect("temp dir");
    // Kafka starts the consumer first, then the producer.
    let mut consumer = Consumer::spawn(kind, &bootstrap);
    let mut producer = Producer::spawn(kind, &bootstrap, config_dir.path());
    // Kafka's await_startup: the consumer has consumed 5 records.
    support::poll_until(STEP, "the consumer to consume 5 records", || {
        consumer.absorb();
        (consumer.events.consumed.len() >= 5).then_some(())
    });

    let victim = leader_of_partition_0(&brokers, metadata);
    match failure {
        Failure::CleanShutdown | Failure::HardShutdown => {
            stop(&mut brokers[victim], failure);
            let gone = brokers[victim].node_id();
            await_partitions(
                &brokers,
                metadata,
                "the ISR of every partition to end at the 2 live replicas",
                |(topic, _), p| {
                    topic != TOPIC
                        || (p.leader != gone && p.isr.len() == 2 && !p.isr.contains(&gone))
                },
            );
        }
        Failure::CleanBounce | Failure::HardBounce => {
            let mut victim = victim;
            for round in 1..=BOUNCES {
                let gone = brokers[victim].node_id();
                let acked_before = producer.last_acked_offsets();
                stop(&mut brokers[victim], failure);
                if failure == Failure::HardBounce {
                    // Kafka waits out the session timeout before the
                    // restart: here, until the cluster has fenced the node
                    // and elected another leader.
                    await_partitions(
                        &brokers,
                        metadata,
                        "a new leader of partition 0",
                        |tp, p| {
                            *tp != (TOPIC.to_owned(), 0)
                                || (p.leader != gone && !p.isr.contains(&gone))
                        },
                    );
                }
                let port = brokers[victim].port();
                brokers[victim].start_again().expect("restarting the node");
                assert_eq!(brokers[victim].port(), port, "restarted on its own port");
                if round == BOUNCES {
                    break;
                }
                // Every partition has had records acknowledged past those
                // acknowledged before the bounce: with idempotence the
                // producer acknowledges a partition's batches in order, so
                // the batches it was retrying when the leader went are
                // settled. Otherwise the node just restarted could lead
                // again while an older batch is still retried there: its
                // producer state comes from its clean-shutdown snapshot,
                // which (in Kafka's format and Kafka's rule) keeps only each
                // producer's last batch, so the retry is
                // OUT_OF_ORDER_SEQUENCE_NUMBER and the Java producer bumps
                // its epoch and writes the batch again, as it would against
                // Kafka. Kafka's own test bounces far slower.
                support::poll_until(
                    STEP,
                    &format!(
                        "round {round}: records acknowledged in every partition since the bounce"
                    ),
                    || {
                        let now = producer.last_acked_offsets();
                        (0..TOPIC_PARTITIONS)
                            .all(|p| now.get(&p) > acked_before.get(&p))
                            .then_some(())
                    },
                );
                // Every partition keeps a live ISR member when one node
                // goes down.
                await_partitions(
                    &brokers,
                    metadata,
                    "a second ISR member everywhere",
                    |_, p| p.isr.len() >= 2,
                );
                victim = leader_of_partition_0(&brokers, metadata);
            }
        }
    }

    // Kafka's run_validation: still producing, then stop the producer (it
    // flushes), then consume up to every acknowledged offset.
    let acked = producer.acked();
    support::poll_until(
        STEP,
        &format!("{FINAL_PROGRESS} more acknowledged records after the failures"),
        || (producer.acked() >= acked + FINAL_PROGRESS).then_some(()),
    );
    let produced = producer.stop();
    let last_acked = produced.last_acked_offsets();
    support::poll_until(
        STEP,
        &format!("the consumer to commit past the acknowledged offsets {last_acked:?}"),
        || {
            consumer.absorb();
            last_acked
                .iter()
                .all(|(p, offset)| consumer.events.committed.get(p) > Some(offset))
                .then_some(())
        },
    );
    let consumed = consumer.stop();
    eprintln!(
        "{failure:?} with {kind:?}: {} acknowledged, last offsets {last_acked:?}, {} consumed, {} failed commits",
        produced.acked.len(),
        consumed.consumed.len(),
        consumed.failed_commits.len()
    );
    validate_delivery(&produced, &consumed);

    if matches!(failure, Failure::CleanBounce | Failure::HardBounce) {
        await_partitions(&brokers, metadata, "an ISR of 3 everywhere", |_, p| {
            p.isr.len() == 3
        });
    }
    for partition in 0..TOPIC_PARTITIONS {
        support::assert_replicas_identical(&brokers, TOPIC, partition);
    }
    for partition in 0..OFFSETS_PARTITIONS {
        support::assert_replicas_identical(&brokers, OFFSETS_TOPIC, partition);
    }
}

/// Stops `broker` as `failure` does: SIGTERM (which must exit 0) or SIGKILL.
fn stop(broker: &mut TestBroker, failure: Failure) {
    match failure {
        Failure::CleanShutdown | Failure::CleanBounce => {
            let status = broker.shutdown().expect("SIGTERM");
            assert!(status.success(), "weir exited with {status} after SIGTERM");
        }
        Failure::HardShutdown | Failure::HardBounce => broker.kill9().expect("SIGKILL"),
    }
}

/// Leader and ISR of one partition in Metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PartitionView {
    leader: i32,
    isr: Vec<i32>,
}

/// `(topic, partition)` → leader and ISR of every partition of every
/// topic (internal ones included), as `client` sees them.
fn partition_views(
    client: &mut RawClient,
    version: i16,
) -> Option<BTreeMap<(String, i32), PartitionView>> {
    let request = MetadataRequest::default()
        .with_topics(None)
        .with_allow_auto_topic_creation(false);
    let response: MetadataResponse = client.send(&request, version).ok()?;
    let mut views = BTreeMap::new();
    for topic in &response.topics {
        let name = topic.name.as_ref()?.to_string();
        for p in &topic.partitions {
            let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
            isr.sort_unstable();
            views.insert(
                (name.clone(), p.partition_index),
                PartitionView {
                    leader: p.leader_id.0,
                    isr,
                },
            );
        }
    }
    Some(views)
}

/// Waits until every running broker reports the same partitions, each with
/// a running leader in its ISR, and `holds` for every one of them; returns
/// that view.
#[track_caller]
fn await_partitions(
    brokers: &[TestBroker],
    version: i16,
    what: &str,
    holds: impl Fn(&(String, i32), &PartitionView) -> bool,
) -> BTreeMap<(String, i32), PartitionView> {
    let running: Vec<i32> = brokers
        .iter()
        .filter(|b| b.pid().is_some())
        .map(TestBroker::node_id)
        .collect();
    support::poll_until(STEP, what, || {
        let mut views = brokers.iter().filter(|b| b.pid().is_some()).map(|b| {
            let mut client = RawClient::connect(&b.bootstrap()).ok()?;
            partition_views(&mut client, version)
        });
        let first = views.next()??;
        for other in views {
            if other? != first {
                return None;
            }
        }
        (first.keys().any(|(t, _)| t == TOPIC)
            && first.iter().all(|(tp, p)| {
                running.contains(&p.leader) && p.isr.contains(&p.leader) && holds(tp, p)
            }))
        .then_some(first)
    })
}

/// The index in `brokers` of the leader of partition 0 of the topic, once
/// every running broker names the same one.
fn leader_of_partition_0(brokers: &[TestBroker], version: i16) -> usize {
    let views = await_partitions(brokers, version, "a leader of partition 0", |_, _| true);
    let leader = views[&(TOPIC.to_owned(), 0)].leader;
    brokers
        .iter()
        .position(|b| b.node_id() == leader)
        .expect("the leader is one of the nodes")
}

/// A record as the verifiable tools print it (`producer_send_success`,
/// `record_data`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Placed {
    value: String,
    partition: i32,
    offset: i64,
}

impl Placed {
    fn from_event(event: &Value) -> Option<Self> {
        Some(Self {
            value: event["value"].as_str()?.to_owned(),
            partition: i32::try_from(event["partition"].as_i64()?).ok()?,
            offset: event["offset"].as_i64()?,
        })
    }
}

/// The JSON events of a verifiable tool's stdout; other lines (logging)
/// are skipped.
fn events(lines: &[String]) -> impl Iterator<Item = Value> + '_ {
    lines
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(Value::is_object)
}

/// What the producer printed.
#[derive(Debug, Default)]
struct Produced {
    acked: Vec<Placed>,
    errors: Vec<String>,
    shut_down: bool,
}

impl Produced {
    fn absorb(&mut self, lines: &[String]) {
        for event in events(lines) {
            match event["name"].as_str() {
                Some("producer_send_success") => self.acked.push(
                    Placed::from_event(&event).unwrap_or_else(|| panic!("malformed event {event}")),
                ),
                // The tool's shutdown hook closes the producer while its
                // main thread may be inside send(): Kafka's
                // RecordAccumulator refuses that record, which never
                // leaves the client.
                Some("producer_send_error")
                    if event["message"] == "Producer closed while send in progress" => {}
                Some("producer_send_error") => self.errors.push(event.to_string()),
                Some("shutdown_complete") => self.shut_down = true,
                _ => {}
            }
        }
    }

    /// The highest acknowledged offset per partition (Kafka's
    /// `last_acked_offsets`).
    fn last_acked_offsets(&self) -> BTreeMap<i32, i64> {
        let mut last = BTreeMap::new();
        for record in &self.acked {
            let offset = last.entry(record.partition).or_insert(record.offset);
            *offset = (*offset).max(record.offset);
        }
        last
    }
}

/// What the consumer printed.
#[derive(Debug, Default)]
struct Consumed {
    consumed: Vec<Placed>,
    /// The highest successfully committed offset per partition.
    committed: BTreeMap<i32, i64>,
    failed_commits: Vec<String>,
    /// Errors the consumer reported (confluent-kafka's message errors).
    errors: Vec<String>,
}

impl Consumed {
    fn absorb(&mut self, lines: &[String]) {
        for event in events(lines) {
            match event["name"].as_str() {
                Some("record_data") => self.consumed.push(
                    Placed::from_event(&event).unwrap_or_else(|| panic!("malformed event {event}")),
                ),
                Some("offsets_committed") if event["success"] == Value::Bool(true) => {
                    for commit in event["offsets"].as_array().into_iter().flatten() {
                        let (Some(p), Some(offset)) =
                            (commit["partition"].as_i64(), commit["offset"].as_i64())
                        else {
                            panic!("malformed event {event}");
                        };
                        let p = i32::try_from(p).expect("partition");
                        let last = self.committed.entry(p).or_insert(offset);
                        *last = (*last).max(offset);
                    }
                }
                Some("offsets_committed") => self.failed_commits.push(event.to_string()),
                Some("consumer_error") => self.errors.push(event.to_string()),
                _ => {}
            }
        }
    }
}

/// The background producer, its output read as it runs.
struct Producer {
    process: RunningClient,
    parsed: usize,
    events: Produced,
}

impl Producer {
    /// Kafka's VerifiableProducer with the properties Kafka's
    /// `verifiable_producer.py` writes for an idempotent producer
    /// (`enable.idempotence=true`, `retries=1000000`,
    /// `max.in.flight.requests.per.connection=5`; the tool itself sets
    /// `retries=0`, which without them would turn idempotence off), acks=all,
    /// or the confluent-kafka equivalent.
    fn spawn(kind: Clients, bootstrap: &str, config_dir: &Path) -> Self {
        let throughput = THROUGHPUT.to_string();
        let command = match kind {
            Clients::KafkaTools => {
                let config = config_dir.join("producer.properties");
                std::fs::write(
                    &config,
                    "acks=all\nenable.idempotence=true\nretries=1000000\n\
                     max.in.flight.requests.per.connection=5\n",
                )
                .expect("writing producer.properties");
                let mut command = clients::kafka_tool("org.apache.kafka.tools.VerifiableProducer")
                    .expect("Kafka tools");
                command
                    .args(["--bootstrap-server", bootstrap, "--topic", TOPIC])
                    .args(["--acks", "-1", "--throughput", &throughput])
                    .arg("--producer.config")
                    .arg(&config);
                command
            }
            Clients::Confluent => {
                let mut command = clients::python_script("verifiable_client.py").expect("venv");
                command.args(["producer", bootstrap, TOPIC, &throughput]);
                command
            }
        };
        Self {
            process: RunningClient::spawn(command).expect("starting the producer"),
            parsed: 0,
            events: Produced::default(),
        }
    }

    /// How many records have been acknowledged so far.
    fn acked(&mut self) -> usize {
        let lines = self.process.lines();
        self.events.absorb(&lines[self.parsed..]);
        self.parsed = lines.len();
        self.events.acked.len()
    }

    /// The highest offset acknowledged so far per partition.
    fn last_acked_offsets(&mut self) -> BTreeMap<i32, i64> {
        self.acked();
        self.events.last_acked_offsets()
    }

    /// SIGTERM: the producer stops sending and flushes what is in flight.
    fn stop(mut self) -> Produced {
        self.acked();
        let output = self
            .process
            .terminate(Duration::from_secs(120))
            .expect("stopping the producer");
        let lines = output_lines(&output);
        self.events.absorb(&lines[self.parsed.min(lines.len())..]);
        assert!(
            self.events.shut_down,
            "the producer did not flush and shut down: {}\n{}",
            output.command, output.stderr
        );
        self.events
    }
}

/// The background consumer in [`GROUP`], its output read as it runs.
struct Consumer {
    process: RunningClient,
    parsed: usize,
    events: Consumed,
}

impl Consumer {
    /// Kafka's VerifiableConsumer (`--verbose`: one event per record;
    /// commits synchronously after every poll), or the confluent-kafka
    /// equivalent.
    fn spawn(kind: Clients, bootstrap: &str) -> Self {
        let command = match kind {
            Clients::KafkaTools => {
                let mut command: Command =
                    clients::kafka_tool("org.apache.kafka.tools.VerifiableConsumer")
                        .expect("Kafka tools");
                command
                    .args(["--bootstrap-server", bootstrap, "--topic", TOPIC])
                    .args([
                        "--group-id",
                        GROUP,
                        "--reset-policy",
                        "earliest",
                        "--verbose",
                    ]);
                command
            }
            Clients::Confluent => {
                let mut command = clients::python_script("verifiable_client.py").expect("venv");
                command.args(["consumer", bootstrap, TOPIC, GROUP]);
                command
            }
        };
        Self {
            process: RunningClient::spawn(command).expect("starting the consumer"),
            parsed: 0,
            events: Consumed::default(),
        }
    }

    fn absorb(&mut self) {
        let lines = self.process.lines();
        self.events.absorb(&lines[self.parsed..]);
        self.parsed = lines.len();
    }

    /// SIGTERM: the consumer leaves the group and exits.
    fn stop(mut self) -> Consumed {
        self.absorb();
        let output = self
            .process
            .terminate(Duration::from_secs(60))
            .expect("stopping the consumer");
        let lines = output_lines(&output);
        self.events.absorb(&lines[self.parsed.min(lines.len())..]);
        self.events
    }
}

fn output_lines(output: &CommandOutput) -> Vec<String> {
    output.stdout_text().lines().map(str::to_owned).collect()
}

/// Kafka's `validate_delivery` with idempotence, made exact: no record
/// that left the producer failed and the producer flushed, so every record
/// it sent was acknowledged, and the consumer read exactly the acknowledged
/// records, each at the partition and offset it was acknowledged at and
/// once (twice only a record read again after a failed commit).
fn validate_delivery(produced: &Produced, consumed: &Consumed) {
    assert!(
        produced.errors.is_empty(),
        "{} sends failed, first: {:?}",
        produced.errors.len(),
        produced.errors.first()
    );
    let mut occurrences: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
    for record in &consumed.consumed {
        occurrences
            .entry(record.value.as_str())
            .or_default()
            .push((record.partition, record.offset));
    }
    // The same value at two offsets is written twice: never allowed with
    // idempotence. The same record read twice is the consumer resuming from
    // its last successful commit: allowed only after a commit failed (the
    // consumer's at-least-once contract).
    let written_twice: Vec<_> = occurrences
        .iter()
        .filter(|(_, at)| at.iter().any(|o| *o != at[0]))
        .collect();
    let read_twice = occurrences.values().any(|at| at.len() > 1);
    let duplicated: Vec<_> = if consumed.failed_commits.is_empty() || !written_twice.is_empty() {
        occurrences.iter().filter(|(_, at)| at.len() > 1).collect()
    } else {
        Vec::new()
    };
    if read_twice && duplicated.is_empty() {
        eprintln!(
            "records read again after failed commits: {:?}",
            consumed.failed_commits.iter().take(5).collect::<Vec<_>>()
        );
    }
    let missing: Vec<&Placed> = produced
        .acked
        .iter()
        .filter(|r| !occurrences.contains_key(r.value.as_str()))
        .collect();
    assert!(
        missing.is_empty() && duplicated.is_empty(),
        "{} acknowledged, {} consumed: {} acknowledged records never consumed (first {:?}), \
         {} consumed more than once (first, with their (partition, offset)s: {:?}); \
         failed commits: {:?}; consumer errors: {:?}",
        produced.acked.len(),
        consumed.consumed.len(),
        missing.len(),
        missing.iter().take(10).collect::<Vec<_>>(),
        duplicated.len(),
        duplicated.iter().take(10).collect::<Vec<_>>(),
        consumed.failed_commits.iter().take(5).collect::<Vec<_>>(),
        consumed.errors.iter().take(5).collect::<Vec<_>>()
    );
    let mut acked = produced.acked.clone();
    acked.sort();
    let mut read = consumed.consumed.clone();
    read.sort();
    read.dedup();
    if acked != read {
        let first = acked
            .iter()
            .zip(&read)
            .find(|(a, r)| a != r)
            .map(|(a, r)| format!("acknowledged {a:?}, consumed {r:?}"));
        panic!(
            "the consumed records are not the acknowledged ones at their offsets ({} vs {}): {first:?}",
            acked.len(),
            read.len()
        );
    }
}
