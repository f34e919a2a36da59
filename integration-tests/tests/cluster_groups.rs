//! Consumer groups on three `weir` processes (issue 7): the group
//! coordinator is the leader of the group's `__consumer_offsets` partition,
//! `abs(String.hashCode(group.id)) % offsets.topic.num.partitions` (Kafka's
//! `GroupCoordinatorService.partitionFor`). Every node's FindCoordinator
//! names that leader; a group request sent to another node gets
//! NOT_COORDINATOR; kafka-python bootstrapped on a node that is not the
//! coordinator joins, consumes and commits, and a second run resumes from
//! the committed offsets; after a controlled shutdown of the coordinator a
//! running consumer finds the new one; while fewer brokers are unfenced
//! than `offsets.topic.replication.factor`, there is no coordinator.
//!
//! `__consumer_offsets` is replicated (issue 16), so the new coordinator
//! loads the group and its committed offsets from its own replica, after a
//! controlled shutdown or a SIGKILL of the old one.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ApiKey, DescribeGroupsRequest, FindCoordinatorRequest, GroupId, HeartbeatRequest,
    ListGroupsRequest, MetadataRequest, OffsetCommitRequest, OffsetFetchRequest, ProduceRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::clients::{self, RunningClient};
use weir_integration_tests::records;
use weir_integration_tests::{RawClient, TestBroker};

use crate::cluster::{create_assigned, start_three_nodes_with, topic_state};
use crate::support::{self, error_code, CLIENT_TIMEOUT};

/// Kafka's COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and
/// NOT_COORDINATOR (protocol guide, "Error Codes").
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
/// NOT_LEADER_OR_FOLLOWER: the node has not applied the partition yet.
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
/// How long a test waits for one cluster or group event.
const EVENT_TIMEOUT: Duration = Duration::from_secs(60);
/// `offsets.topic.num.partitions` of these clusters.
const OFFSETS_PARTITIONS: &str = "3";
/// Group ids and their `__consumer_offsets` partition of 3, worked out by
/// hand from Java's `String.hashCode` (`s[0]*31^(n-1) + ... + s[n-1]`,
/// wrapping at 32 bits) and Kafka's `Utils.abs(hash) % 3`:
/// "my-group" -1906497762 -> 0, "weir" 3645559 -> 1, "group" 98629247 -> 2
/// (checked with Java and kafka-clients' `Utils.abs`).
const GROUPS: [(&str, i32); 3] = [("my-group", 0), ("weir", 1), ("group", 2)];

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// Three nodes with 3 offsets partitions and fast broker heartbeats, and a
/// raw client to each (in node order).
fn cluster() -> (Vec<TestBroker>, Vec<RawClient>) {
    let (brokers, _) = start_three_nodes_with(&[
        ("offsets.topic.num.partitions", OFFSETS_PARTITIONS),
        ("broker.heartbeat.interval.ms", "200"),
        ("group.initial.rebalance.delay.ms", "100"),
    ]);
    let ids: Vec<i32> = brokers.iter().map(TestBroker::node_id).collect();
    assert_eq!(ids, [1, 2, 3], "clients[i] talks to node i + 1");
    let clients = brokers.iter().map(support::connect).collect();
    (brokers, clients)
}

/// `(error, node id, host, port)` of one FindCoordinator for `group`
/// through `client`, in version `version` (v4+ batch the key, KIP-699).
fn find_coordinator(client: &mut RawClient, version: i16, group: &str) -> (i16, i32, String, i32) {
    let mut request = FindCoordinatorRequest::default().with_key_type(0);
    if version >= 4 {
        request = request.with_coordinator_keys(vec![text(group)]);
    } else {
        request = request.with_key(text(group));
    }
    let response = client.send(&request, version).expect("FindCoordinator");
    if version >= 4 {
        let c = &response.coordinators[0];
        assert_eq!(c.key.as_str(), group);
        (c.error_code, c.node_id.0, c.host.to_string(), c.port)
    } else {
        (
            response.error_code,
            response.node_id.0,
            response.host.to_string(),
            response.port,
        )
    }
}

/// The coordinator every client names for `group` in FindCoordinator v3
/// and in the newest version, once they all answer without error and agree
/// on a node other than `not`.
fn agreed_coordinator(clients: &mut [RawClient], group: &str, not: Option<i32>) -> i32 {
    let versions = support::api_versions(&mut clients[0]);
    let newest = support::newest::<FindCoordinatorRequest>(&versions, ApiKey::FindCoordinator);
    assert!(newest >= 4, "FindCoordinator v{newest}");
    support::poll_until(
        EVENT_TIMEOUT,
        &format!("every node to name one coordinator for {group}"),
        || {
            let mut answers = BTreeSet::new();
            for client in clients.iter_mut() {
                for version in [3, newest] {
                    let (error, node, host, port) = find_coordinator(client, version, group);
                    if error != error_code::NONE {
                        // Retriable while the offsets topic is created or
                        // the partition has no leader.
                        assert_eq!(
                            error, COORDINATOR_NOT_AVAILABLE,
                            "FindCoordinator v{version}"
                        );
                        return None;
                    }
                    answers.insert((node, host, port));
                }
            }
            let (node, _, _) = answers.first()?.clone();
            (answers.len() == 1 && Some(node) != not).then_some(node)
        },
    )
}

/// The leader of `__consumer_offsets` partition `partition` in `client`'s
/// Metadata.
fn offsets_leader(client: &mut RawClient, partition: i32) -> Option<i32> {
    let versions = support::api_versions(client);
    let version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let (partitions, _) = topic_state(client, version, "__consumer_offsets")?;
    partitions.get(partition as usize).map(|p| p.1)
}

/// The index in `brokers` of node `id`.
fn index_of(brokers: &[TestBroker], id: i32) -> usize {
    brokers.iter().position(|b| b.node_id() == id).unwrap()
}

/// `(group error, committed offset per partition)` of `group` for
/// partitions `0..partitions` of `topic` (OffsetFetch v7), -1 where nothing
/// is committed; waits while the coordinator is loading.
fn committed_offsets(
    client: &mut RawClient,
    group: &str,
    topic: &str,
    partitions: i32,
) -> (i16, BTreeMap<i32, i64>) {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(text(topic)))
            .with_partition_indexes((0..partitions).collect())]));
    support::poll_until(EVENT_TIMEOUT, "OffsetFetch without loading", || {
        let response = client.send(&request, 7).expect("OffsetFetch v7");
        (response.error_code != COORDINATOR_LOAD_IN_PROGRESS).then(|| {
            let offsets = response
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .map(|p| (p.partition_index, p.committed_offset))
                .collect();
            (response.error_code, offsets)
        })
    })
}

/// Produces `count` records `<prefix>-<i>` to partition `partition` of
/// `topic` through its leader's `client`, retrying NOT_LEADER_OR_FOLLOWER
/// while the leader has not applied the new topic yet (as clients do);
/// returns the values.
fn produce(
    client: &mut RawClient,
    topic: &str,
    partition: i32,
    prefix: &str,
    count: usize,
) -> Vec<String> {
    let versions = support::api_versions(client);
    let info = support::ensure_topic(client, &versions, topic);
    let version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let values: Vec<String> = (0..count).map(|i| format!("{prefix}-{i}")).collect();
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    let batch = records::plain_batch(&refs, 1_000);
    support::poll_until(
        EVENT_TIMEOUT,
        &format!("Produce to {topic}/{partition}"),
        || {
            let response = support::produce(client, version, &info, partition, batch.clone());
            match response.error_code {
                error_code::NONE => Some(()),
                NOT_LEADER_OR_FOLLOWER => None,
                other => panic!("Produce to {topic}/{partition}: error {other}"),
            }
        },
    );
    values
}

/// kafka-python's group consumer (`python/group_consumer.py`) on `topic`
/// in `group`, bootstrapped on `bootstrap`.
fn consumer(bootstrap: &str, topic: &str, group: &str, options: &[&str]) -> std::process::Command {
    let mut command = clients::python_script("group_consumer.py").expect("venv");
    command
        .arg("kafka-python")
        .args([bootstrap, topic, group])
        .args(options);
    command
}

/// The values of the `record` events among `lines`.
fn record_values(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l.starts_with("record "))
        .filter_map(|l| l.split(" value=").nth(1).map(str::to_owned))
        .collect()
}

/// Waits until every client's node lists `topic` in Metadata.
fn wait_for_topic(clients: &mut [RawClient], topic: &str) {
    let versions = support::api_versions(&mut clients[0]);
    let version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    support::poll_until(EVENT_TIMEOUT, &format!("{topic} on every node"), || {
        clients
            .iter_mut()
            .all(|c| topic_state(c, version, topic).is_some())
            .then_some(())
    });
}

/// An OffsetCommit (v8) of `offset` for partition 0 of `topic` by `group`
/// outside any generation (a simple commit, as `Consumer.commitSync` with
/// manual assignment).
fn simple_commit(group: &str, topic: &str, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(text(topic)))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])])
}

/// Waits until `condition` holds for the stdout lines of the `running`
/// consumer, checking every 50 ms; after [`EVENT_TIMEOUT`] stops it and
/// fails with `what` and everything it printed.
fn wait_for_consumer(
    mut running: RunningClient,
    what: &str,
    condition: impl Fn(&[String]) -> bool,
) -> RunningClient {
    let deadline = std::time::Instant::now() + EVENT_TIMEOUT;
    while !condition(running.lines()) {
        if std::time::Instant::now() >= deadline {
            let output = running.kill().expect("stopping the consumer");
            panic!(
                "timed out after {EVENT_TIMEOUT:?} waiting for {what}\n--- consumer stdout ---\n{}\n--- consumer stderr ---\n{}",
                output.stdout_text(),
                output.stderr
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    running
}

#[test]
fn every_node_names_the_offsets_partition_leader_and_others_answer_not_coordinator() {
    let (_brokers, mut clients) = cluster();
    let mut coordinators = BTreeSet::new();
    for (group, partition) in GROUPS {
        let coordinator = agreed_coordinator(&mut clients, group, None);
        for client in clients.iter_mut() {
            assert_eq!(
                offsets_leader(client, partition),
                Some(coordinator),
                "{group}: the coordinator leads __consumer_offsets-{partition}"
            );
        }
        coordinators.insert(coordinator);
    }
    assert_eq!(
        coordinators.len(),
        3,
        "the 3 offsets partitions are spread over the 3 nodes"
    );

    let (group, _) = GROUPS[1];
    let coordinator = agreed_coordinator(&mut clients, group, None);
    // A simple commit makes the group exist on its coordinator.
    let topic = "gt";
    create_assigned(&mut clients[0], topic, &[&[coordinator]]);
    wait_for_topic(&mut clients, topic);
    let commit = simple_commit(group, topic, 0);
    for (i, client) in clients.iter_mut().enumerate() {
        let node = i as i32 + 1;
        let response = support::poll_until(EVENT_TIMEOUT, "OffsetCommit", || {
            let r = client.send(&commit, 8).expect("OffsetCommit v8");
            let code = r.topics[0].partitions[0].error_code;
            (code != COORDINATOR_LOAD_IN_PROGRESS).then_some(code)
        });
        let heartbeat = client
            .send(
                &HeartbeatRequest::default()
                    .with_group_id(GroupId(text(group)))
                    .with_generation_id(1)
                    .with_member_id(text("m")),
                4,
            )
            .expect("Heartbeat v4");
        let described = client
            .send(
                &DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]),
                5,
            )
            .expect("DescribeGroups v5");
        let listed: Vec<String> = client
            .send(&ListGroupsRequest::default(), 4)
            .expect("ListGroups v4")
            .groups
            .iter()
            .map(|g| g.group_id.to_string())
            .collect();
        let (fetch_error, _) = committed_offsets(client, group, topic, 1);
        if node == coordinator {
            assert_eq!(response, error_code::NONE, "commit on the coordinator");
            assert_eq!(
                heartbeat.error_code, 25,
                "UNKNOWN_MEMBER_ID on the coordinator"
            );
            assert_eq!(described.groups[0].error_code, error_code::NONE);
            assert_eq!(described.groups[0].group_state.as_str(), "Empty");
            assert!(listed.contains(&group.to_owned()), "{listed:?}");
            assert_eq!(fetch_error, error_code::NONE);
        } else {
            assert_eq!(response, NOT_COORDINATOR, "commit on node {node}");
            assert_eq!(
                heartbeat.error_code, NOT_COORDINATOR,
                "heartbeat on node {node}"
            );
            assert_eq!(described.groups[0].error_code, NOT_COORDINATOR);
            assert!(
                !listed.contains(&group.to_owned()),
                "node {node} lists {listed:?}"
            );
            assert_eq!(fetch_error, NOT_COORDINATOR, "OffsetFetch on node {node}");
        }
    }
}

#[test]
fn kafka_python_bootstrapped_on_another_node_joins_commits_and_resumes() {
    let (brokers, mut clients) = cluster();
    let (group, _) = GROUPS[0];
    let coordinator = agreed_coordinator(&mut clients, group, None);
    let others: Vec<i32> = (1..=3).filter(|&id| id != coordinator).collect();
    // One partition on every node.
    let topic = "resume";
    create_assigned(&mut clients[0], topic, &[&[1], &[2], &[3]]);
    let mut before = BTreeSet::new();
    for partition in 0..3 {
        let leader = &mut clients[partition as usize];
        before.extend(produce(
            leader,
            topic,
            partition,
            &format!("before-{partition}"),
            4,
        ));
    }

    let bootstrap = brokers[index_of(&brokers, others[0])].bootstrap();
    let first = clients::run(
        consumer(&bootstrap, topic, group, &["stop.after=12"]),
        None,
        CLIENT_TIMEOUT,
    )
    .expect("first consumer");
    first.assert_success();
    let read: Vec<String> = record_values(
        &first
            .stdout_text()
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>(),
    );
    assert_eq!(read.len(), 12, "first run reads each record once: {read:?}");
    assert_eq!(read.iter().cloned().collect::<BTreeSet<_>>(), before);
    let on_coordinator = &mut clients[index_of(&brokers, coordinator)];
    assert_eq!(
        committed_offsets(on_coordinator, group, topic, 3),
        (error_code::NONE, BTreeMap::from([(0, 4), (1, 4), (2, 4)])),
        "the first run's commits, on the coordinator"
    );

    let mut after = BTreeSet::new();
    for partition in 0..3 {
        let leader = &mut clients[partition as usize];
        after.extend(produce(
            leader,
            topic,
            partition,
            &format!("after-{partition}"),
            2,
        ));
    }
    let bootstrap = brokers[index_of(&brokers, others[1])].bootstrap();
    let second = clients::run(
        consumer(&bootstrap, topic, group, &["stop.after=6"]),
        None,
        CLIENT_TIMEOUT,
    )
    .expect("second consumer");
    second.assert_success();
    let read = record_values(
        &second
            .stdout_text()
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        read.iter().cloned().collect::<BTreeSet<_>>(),
        after,
        "the second run resumes from the committed offsets"
    );
    assert_eq!(read.len(), 6);
    let on_coordinator = &mut clients[index_of(&brokers, coordinator)];
    assert_eq!(
        committed_offsets(on_coordinator, group, topic, 3),
        (error_code::NONE, BTreeMap::from([(0, 6), (1, 6), (2, 6)]))
    );
}

#[test]
fn a_running_consumer_finds_the_new_coordinator_after_a_controlled_shutdown() {
    let (mut brokers, mut clients) = cluster();
    let (group, partition) = GROUPS[2];
    let coordinator = agreed_coordinator(&mut clients, group, None);
    let others: Vec<i32> = (1..=3).filter(|&id| id != coordinator).collect();
    // The data lives on the nodes that stay.
    let topic = "moving";
    create_assigned(&mut clients[0], topic, &[&[others[0]], &[others[1]]]);
    // Partition p of the topic is led by others[p]; `clients[i]` talks to
    // node `ids[i]`.
    let produce_round = |clients: &mut [RawClient], ids: &[i32], prefix: &str| {
        let mut values = BTreeSet::new();
        for (p, node) in others.iter().enumerate() {
            let leader = &mut clients[ids.iter().position(|id| id == node).unwrap()];
            values.extend(produce(
                leader,
                topic,
                p as i32,
                &format!("{prefix}-{p}"),
                3,
            ));
        }
        values
    };
    let first = produce_round(&mut clients, &[1, 2, 3], "first");

    let bootstrap = brokers[index_of(&brokers, others[0])].bootstrap();
    let running = RunningClient::spawn(consumer(
        &bootstrap,
        topic,
        group,
        &["session.timeout.ms=6000"],
    ))
    .expect("consumer");
    let running = wait_for_consumer(running, "the consumer to read the first round", |l| {
        first.is_subset(&record_values(l).into_iter().collect())
    });
    let old = index_of(&brokers, coordinator);
    support::poll_until(EVENT_TIMEOUT, "the first round committed", || {
        let (error, offsets) = committed_offsets(&mut clients[old], group, topic, 2);
        (error == error_code::NONE && offsets == BTreeMap::from([(0, 3), (1, 3)])).then_some(())
    });

    // SIGTERM: the controlled shutdown moves the offsets partition to an
    // ISR member, whose replica of it holds the group and its commits.
    let status = brokers[old].shutdown().expect("SIGTERM the coordinator");
    assert!(status.success(), "weir exited with {status}");
    let mut survivors: Vec<RawClient> = others
        .iter()
        .map(|&id| support::connect(&brokers[index_of(&brokers, id)]))
        .collect();
    let successor = agreed_coordinator(&mut survivors, group, Some(coordinator));
    assert!(others.contains(&successor));
    for client in survivors.iter_mut() {
        assert_eq!(offsets_leader(client, partition), Some(successor));
    }

    // The running consumer rediscovers the coordinator (its heartbeats
    // fail over to the new one, which loaded the group from its replica),
    // then consumes and commits through the new coordinator.
    let second = produce_round(&mut survivors, &others, "second");
    let mut running = wait_for_consumer(running, "the consumer to read the second round", |l| {
        second.is_subset(&record_values(l).into_iter().collect())
    });
    let on_successor = &mut survivors[others.iter().position(|&id| id == successor).unwrap()];
    support::poll_until(EVENT_TIMEOUT, "commits on the new coordinator", || {
        let (error, offsets) = committed_offsets(on_successor, group, topic, 2);
        (error == error_code::NONE && offsets == BTreeMap::from([(0, 6), (1, 6)])).then_some(())
    });
    // The old coordinator's commits moved with the partition (issue 16:
    // `__consumer_offsets` is replicated): nothing was read again.
    let read = record_values(running.lines());
    for value in &first {
        assert_eq!(
            read.iter().filter(|v| *v == value).count(),
            1,
            "{value} was read again after the move: {read:?}"
        );
    }
    running.send_line("stop").expect("stop the consumer");
    let output = running.finish(CLIENT_TIMEOUT).expect("consumer exit");
    output.assert_success();
    // The group's offsets partition on the two nodes that stayed.
    support::assert_replicas_identical(&brokers, "__consumer_offsets", partition);
}

#[test]
fn no_coordinator_while_fewer_brokers_than_the_offsets_replication_factor() {
    // As Kafka on KRaft: the offsets topic is not created (the controller
    // refuses a replication factor of 4 with 3 brokers) and every group
    // lookup answers COORDINATOR_NOT_AVAILABLE, which clients retry.
    let (brokers, _) = start_three_nodes_with(&[
        ("offsets.topic.num.partitions", OFFSETS_PARTITIONS),
        ("offsets.topic.replication.factor", "4"),
    ]);
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut clients[0]);
    let newest = support::newest::<FindCoordinatorRequest>(&versions, ApiKey::FindCoordinator);
    let metadata = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    for client in clients.iter_mut() {
        for version in [0, 3, newest] {
            let (error, node, host, port) = find_coordinator(client, version, GROUPS[0].0);
            assert_eq!(
                (error, node, host.as_str(), port),
                (COORDINATOR_NOT_AVAILABLE, -1, "", -1),
                "FindCoordinator v{version}"
            );
        }
        assert_eq!(
            topic_state(client, metadata, "__consumer_offsets"),
            None,
            "__consumer_offsets was not created"
        );
    }
}

/// Issue 16 scope 8: `__consumer_offsets` is replicated (RF 3 here) and a
/// commit is answered once its ISR has it, so when the coordinator is
/// killed (SIGKILL) the new leader of the group's offsets partition
/// coordinates the group with every committed offset; the old coordinator
/// returns as a follower and the offsets are still there.
#[test]
fn committed_offsets_survive_a_sigkill_of_the_coordinator() {
    let (mut brokers, mut clients) = cluster();
    let (group, _) = GROUPS[1];
    let coordinator = agreed_coordinator(&mut clients, group, None);
    let topic = "kept";
    create_assigned(&mut clients[0], topic, &[&[1, 2, 3]]);
    wait_for_topic(&mut clients, topic);
    let old = index_of(&brokers, coordinator);
    let response = clients[old]
        .send(&simple_commit(group, topic, 7), 8)
        .expect("OffsetCommit v8");
    assert_eq!(
        response.topics[0].partitions[0].error_code,
        error_code::NONE
    );

    brokers[old].kill9().expect("SIGKILL the coordinator");
    let mut survivors: Vec<RawClient> = (1..=3)
        .filter(|&id| id != coordinator)
        .map(|id| support::connect(&brokers[index_of(&brokers, id)]))
        .collect();
    let successor = agreed_coordinator(&mut survivors, group, Some(coordinator));
    let at = index_of(&brokers, successor);
    support::poll_until(
        EVENT_TIMEOUT,
        "the new coordinator to load the group",
        || {
            let answer = committed_offsets(&mut clients[at], group, topic, 1);
            (answer.0 == error_code::NONE).then_some(answer)
        },
    );
    assert_eq!(
        committed_offsets(&mut clients[at], group, topic, 1),
        (error_code::NONE, BTreeMap::from([(0, 7)])),
        "the new coordinator {successor} has the committed offset"
    );

    brokers[old]
        .start_again()
        .expect("start the old coordinator again");
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let now = agreed_coordinator(&mut clients, group, None);
    let at = index_of(&brokers, now);
    assert_eq!(
        committed_offsets(&mut clients[at], group, topic, 1),
        (error_code::NONE, BTreeMap::from([(0, 7)])),
        "after the restart"
    );
    for partition in 0..3 {
        support::assert_replicas_identical(&brokers, "__consumer_offsets", partition);
    }
}
