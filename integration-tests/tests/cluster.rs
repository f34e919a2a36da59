//! Three `weir` processes as one metadata quorum: `controller.quorum.voters`
//! over their CONTROLLER listeners on 127.0.0.1 (ports chosen at run time).
//! Every node is formatted with one cluster id first (`weir format`, as
//! `kafka-storage format`); an unformatted node refuses to start. A topic
//! created through one node is in every node's Metadata, every node names the
//! same active controller and cluster id in Metadata and DescribeCluster, and
//! no node advertises its CONTROLLER listener to clients (as Kafka).

use std::time::Duration;

use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponsePartition;
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, DescribeClusterRequest, DescribeClusterResponse,
    MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::{RawClient, TestBroker};

use crate::support::{self, error_code};

/// Three distinct free ports on 127.0.0.1 (all bound at once, then released).
pub(crate) fn three_free_ports() -> Vec<u16> {
    free_ports(3)
}

/// `n` distinct free ports on 127.0.0.1 (all bound at once, then released).
pub(crate) fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("bound address").port())
        .collect()
}

fn metadata_of(client: &mut RawClient, version: i16, topic: &str) -> MetadataResponse {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
            TopicName(StrBytes::from_string(topic.to_owned())),
        ))]))
        .with_allow_auto_topic_creation(false);
    client.send(&request, version).expect("Metadata")
}

/// Starts nodes 1..=3 as one quorum, each formatted with `cluster_id`;
/// returns them and their controller ports.
pub(crate) fn start_three_nodes_in(cluster_id: &str) -> (Vec<TestBroker>, Vec<u16>) {
    start_three_nodes_in_with(cluster_id, &[])
}

/// [`start_three_nodes_in`] with extra config overrides on every node.
pub(crate) fn start_three_nodes_in_with(
    cluster_id: &str,
    extra: &[(&'static str, &'static str)],
) -> (Vec<TestBroker>, Vec<u16>) {
    let controller_ports = three_free_ports();
    let voters = controller_ports
        .iter()
        .enumerate()
        .map(|(i, port)| format!("{}@127.0.0.1:{port}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    let brokers = start_nodes_with_voters(cluster_id, &controller_ports, &vec![voters; 3], extra);
    (brokers, controller_ports)
}

/// Starts nodes 1..=3 of cluster `cluster_id` together (each node's startup
/// waits for a quorum); node `i` listens for the quorum on
/// `controller_ports[i]` and is given `voters[i]` as its own
/// `controller.quorum.voters`.
pub(crate) fn start_nodes_with_voters(
    cluster_id: &str,
    controller_ports: &[u16],
    voters: &[String],
    extra: &[(&'static str, &'static str)],
) -> Vec<TestBroker> {
    start_nodes(cluster_id, controller_ports, voters, extra, false, None)
}

/// [`start_three_nodes_with`], each node with its Prometheus endpoint on
/// (`TestBroker::metrics_addr`).
pub(crate) fn start_three_nodes_with_metrics(
    extra: &[(&'static str, &'static str)],
) -> Vec<TestBroker> {
    let controller_ports = three_free_ports();
    let voters = voters_of(&controller_ports);
    start_nodes(
        &weir_storage::random_kafka_uuid(),
        &controller_ports,
        &vec![voters; 3],
        extra,
        true,
        None,
    )
}

/// [`start_three_nodes_with`] with each node's PLAINTEXT listener on a port
/// chosen once, which the node binds again when restarted (as in a real
/// deployment), so clients bootstrapped from the first addresses still find
/// the cluster after every node has been restarted.
pub(crate) fn start_three_nodes_on_fixed_ports(
    extra: &[(&'static str, &'static str)],
) -> Vec<TestBroker> {
    // Both sets at once, so that no client port repeats a controller port.
    let mut ports = free_ports(6);
    let client_ports = ports.split_off(3);
    let voters = voters_of(&ports);
    start_nodes(
        &weir_storage::random_kafka_uuid(),
        &ports,
        &vec![voters; 3],
        extra,
        false,
        Some(client_ports),
    )
}

fn start_nodes(
    cluster_id: &str,
    controller_ports: &[u16],
    voters: &[String],
    extra: &[(&'static str, &'static str)],
    metrics: bool,
    client_ports: Option<Vec<u16>>,
) -> Vec<TestBroker> {
    let starting: Vec<_> = controller_ports
        .iter()
        .zip(voters)
        .enumerate()
        .map(|(i, (&port, voters))| {
            let (voters, cluster_id, extra) =
                (voters.clone(), cluster_id.to_owned(), extra.to_vec());
            let client_port = client_ports.as_ref().map_or(0, |ports| ports[i]);
            std::thread::spawn(move || {
                let mut builder = TestBroker::builder()
                    .node_id(i as i32 + 1)
                    .format_cluster_id(&cluster_id)
                    .override_config(
                        "listeners",
                        &format!(
                            "PLAINTEXT://127.0.0.1:{client_port},CONTROLLER://127.0.0.1:{port}"
                        ),
                    )
                    .override_config("controller.quorum.voters", &voters)
                    .metrics(metrics);
                for (key, value) in extra {
                    builder = builder.override_config(key, value);
                }
                builder.start()
            })
        })
        .collect();
    starting
        .into_iter()
        .map(|t| t.join().expect("starter thread").expect("starting weir"))
        .collect()
}

/// `controller.quorum.voters` of nodes 1..=3 listening for the quorum on
/// `controller_ports`.
pub(crate) fn voters_of(controller_ports: &[u16]) -> String {
    controller_ports
        .iter()
        .enumerate()
        .map(|(i, port)| format!("{}@127.0.0.1:{port}", i + 1))
        .collect::<Vec<_>>()
        .join(",")
}

/// Starts broker-only node `node_id` (`process.roles=broker`) of cluster
/// `cluster_id`, configured as a Kafka 4.x broker-only node: a PLAINTEXT
/// listener only, `controller.listener.names=CONTROLLER`, and `quorum` as
/// `(controller.quorum.voters | controller.quorum.bootstrap.servers,
/// value)`.
pub(crate) fn start_broker_only(
    cluster_id: &str,
    node_id: i32,
    quorum: (&str, &str),
    extra: &[(&str, &str)],
) -> TestBroker {
    let mut builder = TestBroker::builder()
        .node_id(node_id)
        .format_cluster_id(cluster_id)
        .override_config("process.roles", "broker")
        .override_config("listeners", "PLAINTEXT://127.0.0.1:0")
        .override_config("controller.listener.names", "CONTROLLER")
        .override_config(quorum.0, quorum.1);
    for (key, value) in extra {
        builder = builder.override_config(key, value);
    }
    builder.start().expect("starting a broker-only weir")
}

/// [`start_three_nodes_in`] with a new cluster id.
pub(crate) fn start_three_nodes() -> (Vec<TestBroker>, Vec<u16>) {
    start_three_nodes_in(&weir_storage::random_kafka_uuid())
}

/// [`start_three_nodes`] with extra config overrides on every node.
pub(crate) fn start_three_nodes_with(
    extra: &[(&'static str, &'static str)],
) -> (Vec<TestBroker>, Vec<u16>) {
    start_three_nodes_in_with(&weir_storage::random_kafka_uuid(), extra)
}

/// The active controller every node in `clients` names, once they agree on
/// one other than `not`.
pub(crate) fn agreed_controller(clients: &mut [RawClient], version: i16, not: Option<i32>) -> i32 {
    support::poll_until(
        Duration::from_secs(15),
        "every node to name the same active controller",
        || {
            let ids: Vec<i32> = clients
                .iter_mut()
                .map(|c| metadata_of(c, version, "none").controller_id.0)
                .collect();
            (ids[0] >= 1 && Some(ids[0]) != not && ids.iter().all(|&id| id == ids[0]))
                .then_some(ids[0])
        },
    )
}

#[test]
fn three_node_quorum_shares_a_topic_in_every_metadata() {
    let (brokers, controller_ports) = start_three_nodes();

    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut clients[0]);
    let version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    support::create_topic(&mut clients[1], &versions, "shared", &[]);

    let mut controllers = Vec::new();
    for (client, broker) in clients.iter_mut().zip(&brokers) {
        let response = support::poll_until(
            Duration::from_secs(10),
            &format!("topic 'shared' in node {}'s Metadata", broker.node_id()),
            || {
                let response = metadata_of(client, version, "shared");
                let topic = response.topics.first()?;
                (topic.error_code == error_code::NONE
                    && !topic.partitions.is_empty()
                    && topic.partitions.iter().all(|p| p.leader_id.0 >= 1)
                    && response.brokers.len() == 3)
                    .then_some(response)
            },
        );
        for b in &response.brokers {
            assert!(
                !controller_ports.contains(&(b.port as u16)),
                "node {} advertises a CONTROLLER port: {:?}",
                broker.node_id(),
                response.brokers
            );
        }
        controllers.push(response.controller_id.0);
    }
    assert!(
        (1..=3).contains(&controllers[0]) && controllers.iter().all(|&c| c == controllers[0]),
        "every node names the same active controller: {controllers:?}"
    );
}

/// Issue 7's acceptance asks that metadata changes reach every broker of a
/// 3-node cluster within 1 s of commit on an idle machine. This test shows it
/// in its log (run with `--nocapture`): for topics created through each
/// node in turn, the time from sending CreateTopics (so before the commit:
/// an upper bound of the delay from commit) until every other node's
/// Metadata lists the topic. It asserts only that they all do; timing
/// is never asserted in tests.
#[test]
fn metadata_changes_reach_every_node_and_the_delay_is_logged() {
    let (brokers, _) = start_three_nodes();
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut clients[0]);
    let version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    agreed_controller(&mut clients, version, None);
    let mut worst = Duration::ZERO;
    for round in 0..3 {
        for through in 0..3 {
            let topic = format!("propagation-{round}-{through}");
            let sent = std::time::Instant::now();
            support::create_topic(&mut clients[through], &versions, &topic, &[]);
            for other in (0..3).filter(|&i| i != through) {
                support::poll_until(
                    Duration::from_secs(10),
                    &format!("{topic} in node {}'s Metadata", other + 1),
                    || {
                        let response = metadata_of(&mut clients[other], version, &topic);
                        (response.topics.first()?.error_code == error_code::NONE).then_some(())
                    },
                );
                let delay = sent.elapsed();
                worst = worst.max(delay);
                eprintln!(
                    "metadata propagation: {topic} created through node {} in node {}'s Metadata {:.1} ms after the request was sent",
                    through + 1,
                    other + 1,
                    delay.as_secs_f64() * 1000.0
                );
            }
        }
    }
    eprintln!(
        "metadata propagation: worst of 18 observations {:.1} ms",
        worst.as_secs_f64() * 1000.0
    );
}

#[test]
fn killing_the_active_controller_elects_another_that_takes_commands() {
    let (mut brokers, _) = start_three_nodes();
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut clients[0]);
    let version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let old = agreed_controller(&mut clients, version, None);

    let index = brokers.iter().position(|b| b.node_id() == old).unwrap();
    brokers[index]
        .kill9()
        .expect("kill -9 the active controller");
    clients.remove(index);
    // The survivors elect a new active controller between themselves.
    agreed_controller(&mut clients, version, Some(old));

    support::create_topic(&mut clients[0], &versions, "after-failover", &[]);
    support::poll_until(
        Duration::from_secs(10),
        "topic 'after-failover' on the other surviving node",
        || {
            let response = metadata_of(&mut clients[1], version, "after-failover");
            (response.topics.first()?.error_code == error_code::NONE).then_some(())
        },
    );
}

#[test]
fn every_node_answers_the_formatted_cluster_id_and_the_active_controller() {
    let cluster_id = weir_storage::random_kafka_uuid();
    let (brokers, _) = start_three_nodes_in(&cluster_id);
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut clients[0]);
    let metadata_version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let describe_version =
        support::newest::<DescribeClusterRequest>(&versions, ApiKey::DescribeCluster);
    let controller = agreed_controller(&mut clients, metadata_version, None);

    for (client, broker) in clients.iter_mut().zip(&brokers) {
        assert_eq!(
            broker.cluster_id(),
            cluster_id,
            "node {} started with",
            broker.node_id()
        );
        let metadata = support::poll_until(
            Duration::from_secs(10),
            &format!("3 brokers in node {}'s Metadata", broker.node_id()),
            || {
                let response = metadata_of(client, metadata_version, "none");
                (response.brokers.len() == 3).then_some(response)
            },
        );
        assert_eq!(
            metadata.cluster_id.as_ref().map(|s| s.to_string()),
            Some(cluster_id.clone()),
            "node {}'s Metadata cluster id",
            broker.node_id()
        );
        let described: DescribeClusterResponse = client
            .send(&DescribeClusterRequest::default(), describe_version)
            .expect("DescribeCluster");
        assert_eq!(described.error_code, error_code::NONE);
        assert_eq!(
            described.cluster_id.as_str(),
            cluster_id,
            "node {}",
            broker.node_id()
        );
        assert_eq!(
            described.controller_id.0,
            controller,
            "node {}",
            broker.node_id()
        );
        let mut ids: Vec<i32> = described.brokers.iter().map(|b| b.broker_id.0).collect();
        ids.sort_unstable();
        assert_eq!(
            ids,
            vec![1, 2, 3],
            "node {}'s DescribeCluster brokers",
            broker.node_id()
        );
        for b in &described.brokers {
            let node = brokers
                .iter()
                .find(|n| n.node_id() == b.broker_id.0)
                .unwrap();
            assert_eq!(
                (b.host.as_str(), b.port),
                ("127.0.0.1", i32::from(node.port())),
                "node {}'s DescribeCluster endpoint of broker {}",
                broker.node_id(),
                b.broker_id.0
            );
        }
    }
}

#[test]
fn an_unformatted_node_of_a_quorum_refuses_to_start_and_names_weir_format() {
    let ports = three_free_ports();
    let voters = ports
        .iter()
        .enumerate()
        .map(|(i, port)| format!("{}@127.0.0.1:{port}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    let error = TestBroker::builder()
        .node_id(1)
        .override_config(
            "listeners",
            &format!(
                "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{}",
                ports[0]
            ),
        )
        .override_config("controller.quorum.voters", &voters)
        .start()
        .expect_err("an unformatted voter of 3 must not start");
    let text = error.to_string();
    assert!(
        text.contains("No meta.properties found") && text.contains("weir format"),
        "{text}"
    );
}

/// Short broker sessions so fencing happens within seconds.
pub(crate) const FAST_SESSIONS: [(&str, &str); 2] = [
    ("broker.heartbeat.interval.ms", "200"),
    ("broker.session.timeout.ms", "1500"),
];

/// Creates `name` with one partition per replica list in `assignments`.
pub(crate) fn create_assigned(client: &mut RawClient, name: &str, assignments: &[&[i32]]) {
    create_assigned_with(client, name, assignments, &[]);
}

/// [`create_assigned`] with topic configs.
pub(crate) fn create_assigned_with(
    client: &mut RawClient,
    name: &str,
    assignments: &[&[i32]],
    configs: &[(&str, &str)],
) {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(
                assignments
                    .iter()
                    .enumerate()
                    .map(|(i, replicas)| {
                        CreatableReplicaAssignment::default()
                            .with_partition_index(i as i32)
                            .with_broker_ids(replicas.iter().copied().map(BrokerId).collect())
                    })
                    .collect(),
            )
            .with_configs(
                configs
                    .iter()
                    .map(|(key, value)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string((*key).to_owned()))
                            .with_value(Some(StrBytes::from_string((*value).to_owned())))
                    })
                    .collect(),
            )]);
    let response = client.send(&request, 5).expect("CreateTopics");
    assert_eq!(
        response.topics[0].error_code,
        error_code::NONE,
        "CreateTopics {name}: {:?}",
        response.topics[0].error_message
    );
}

/// `(error, leader, isr, offline replicas)` of one partition in Metadata.
pub(crate) type PartitionState = (i16, i32, Vec<i32>, Vec<i32>);

fn partition_state(p: &MetadataResponsePartition) -> PartitionState {
    (
        p.error_code,
        p.leader_id.0,
        p.isr_nodes.iter().map(|b| b.0).collect(),
        p.offline_replicas.iter().map(|b| b.0).collect(),
    )
}

/// Partition states of `topic` and the listed broker ids, as `client` sees them.
pub(crate) fn topic_state(
    client: &mut RawClient,
    version: i16,
    topic: &str,
) -> Option<(Vec<PartitionState>, Vec<i32>)> {
    let response = metadata_of(client, version, topic);
    let t = response.topics.first()?;
    if t.error_code != error_code::NONE {
        return None;
    }
    let mut brokers: Vec<i32> = response.brokers.iter().map(|b| b.node_id.0).collect();
    brokers.sort_unstable();
    Some((t.partitions.iter().map(partition_state).collect(), brokers))
}

#[test]
fn a_killed_broker_is_fenced_its_partitions_go_offline_and_return_when_it_restarts() {
    // The survivors' active controller (not a new one) fences it.
    kill_fence_and_restart(false);
}

#[test]
fn a_killed_active_controller_is_fenced_by_its_successor_and_returns() {
    // The new active controller starts every session clock at its takeover
    // and fences only the broker that stopped heartbeating.
    kill_fence_and_restart(true);
}

/// The state of a one-replica partition that broker `id` leads.
fn led_by(id: i32) -> PartitionState {
    (error_code::NONE, id, vec![id], vec![])
}

/// Topic `rf1` (one partition per broker, `create_assigned(.., "rf1",
/// &[&[1], &[2], &[3]])`) with every broker leading its own, and the
/// listed brokers, as [`topic_state`] gives them.
fn all_rf1_led() -> (Vec<PartitionState>, Vec<i32>) {
    (vec![led_by(1), led_by(2), led_by(3)], vec![1, 2, 3])
}

/// Polls every client until its Metadata shows [`all_rf1_led`].
#[track_caller]
fn wait_for_rf1_led_by_every_broker(clients: &mut [RawClient], version: i16) {
    for client in clients.iter_mut() {
        support::poll_until(Duration::from_secs(10), "rf1 led by every broker", || {
            (topic_state(client, version, "rf1")? == all_rf1_led()).then_some(())
        });
    }
}

/// SIGSTOP of the active controller with short broker sessions: unlike
/// kill -9 its connections stay open and unanswered, so the survivors'
/// broker heartbeats in flight to it get no error. The successor starts
/// every session at its takeover and must fence the paused node alone:
/// each survivor gives up its heartbeat as soon as it learns of the new
/// leader and heartbeats to the successor within its session timeout, so
/// the survivors' partitions never go offline. (The survivors used to wait
/// out the 10 s forward timeout and were fenced with it.)
#[test]
fn a_paused_active_controller_is_fenced_by_its_successor_alone() {
    let (brokers, _) = start_three_nodes_with(&FAST_SESSIONS);
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut clients[0]);
    let version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let victim = agreed_controller(&mut clients, version, None);
    create_assigned(&mut clients[0], "rf1", &[&[1], &[2], &[3]]);
    wait_for_rf1_led_by_every_broker(&mut clients, version);

    let index = brokers.iter().position(|b| b.node_id() == victim).unwrap();
    support::pause(&brokers[index]);
    let survivor_ids: Vec<i32> = (1..=3).filter(|&id| id != victim).collect();
    let offline = (error_code::LEADER_NOT_AVAILABLE, -1, vec![], vec![victim]);
    for i in (0..3).filter(|&i| i != index) {
        support::poll_until(
            Duration::from_secs(20),
            &format!("node {}: the paused controller {victim} fenced", i + 1),
            || {
                let (rf1, listed) = topic_state(&mut clients[i], version, "rf1")?;
                for &id in &survivor_ids {
                    assert_eq!(
                        rf1[id as usize - 1],
                        led_by(id),
                        "node {}: broker {id} kept heartbeating, yet its partition went \
                         offline (fenced with the paused controller {victim})",
                        i + 1
                    );
                }
                (rf1[victim as usize - 1] == offline && listed == survivor_ids).then_some(())
            },
        );
    }
    support::resume(&brokers[index]);
}

/// kill -9 one of three nodes (the active controller or not) with short
/// broker sessions: its RF=1 partition goes offline on the survivors, the
/// RF=3 partition it led moves to the next ISR member (every replica starts
/// in the ISR, as in Kafka), it leaves every ISR and the survivors'
/// Metadata brokers; after a restart it leads its RF=1 partition again.
fn kill_fence_and_restart(kill_the_active_controller: bool) {
    let (mut brokers, _) = start_three_nodes_with(&FAST_SESSIONS);
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut clients[0]);
    let version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    assert!(version >= 5, "offline_replicas need Metadata v5");
    let active = agreed_controller(&mut clients, version, None);
    let victim = if kill_the_active_controller {
        active
    } else {
        (1..=3).find(|&id| id != active).unwrap()
    };
    let mut survivors_ids = (1..=3).filter(|&id| id != victim);
    let (first, second) = (survivors_ids.next().unwrap(), survivors_ids.next().unwrap());

    // RF 1: one partition per broker. RF 3: the victim leads partition 0.
    create_assigned(&mut clients[0], "rf1", &[&[1], &[2], &[3]]);
    create_assigned(
        &mut clients[0],
        "rf3",
        &[&[victim, first, second], &[first, victim, second]],
    );
    wait_for_rf1_led_by_every_broker(&mut clients, version);

    let index = brokers.iter().position(|b| b.node_id() == victim).unwrap();
    brokers[index].kill9().expect("kill -9 a broker");
    let survivors: Vec<usize> = (0..3).filter(|&i| i != index).collect();
    // Session timeout 1.5 s plus a margin for the expiry check and commit.
    for &i in &survivors {
        // Its only ISR member is gone: offline, the ISR empty (KIP-966 is
        // on for new clusters; the member is kept as an eligible leader,
        // which Metadata does not show).
        let offline = (error_code::LEADER_NOT_AVAILABLE, -1, vec![], vec![victim]);
        support::poll_until(
            Duration::from_secs(10),
            &format!(
                "node {}: broker {victim} fenced, its partitions offline",
                i + 1
            ),
            || {
                let (rf1, listed) = topic_state(&mut clients[i], version, "rf1")?;
                let expected: Vec<_> = (1..=3)
                    .map(|id| {
                        if id == victim {
                            offline.clone()
                        } else {
                            led_by(id)
                        }
                    })
                    .collect();
                let expected_brokers = vec![first.min(second), first.max(second)];
                (rf1 == expected && listed == expected_brokers).then_some(())
            },
        );
        let (rf3, _) = topic_state(&mut clients[i], version, "rf3").unwrap();
        // The next ISR member in assignment order takes over; the victim
        // leaves the ISR (Kafka's handleBrokerFenced).
        assert_eq!(
            rf3[0],
            (error_code::NONE, first, vec![first, second], vec![victim]),
            "rf3 partition 0 on node {}",
            i + 1
        );
        assert_eq!(
            rf3[1],
            (error_code::NONE, first, vec![first, second], vec![victim]),
            "rf3 partition 1 keeps its live leader"
        );
    }

    brokers[index]
        .start_again()
        .expect("restarting the killed broker");
    clients[index] = support::connect(&brokers[index]);
    for client in clients.iter_mut() {
        support::poll_until(
            Duration::from_secs(15),
            &format!("broker {victim} back as leader of its RF=1 partition"),
            || {
                let rf1 = topic_state(client, version, "rf1")?;
                let (rf3, _) = topic_state(client, version, "rf3")?;
                // The RF=3 partitions keep their leader (the victim is back
                // in their ISR only once it has caught up).
                let led_by_first = |p: &PartitionState| (p.0, p.1, p.3.is_empty());
                (rf1 == all_rf1_led()
                    && rf3.iter().map(led_by_first).collect::<Vec<_>>()
                        == vec![(error_code::NONE, first, true); 2])
                .then_some(())
            },
        );
    }
}

#[test]
fn sigterm_moves_leadership_away_before_the_session_could_expire() {
    // A session far longer than the test: only the controlled shutdown
    // (BrokerHeartbeat with want_shut_down) can fence the broker in time.
    let (mut brokers, _) = start_three_nodes_with(&[
        ("broker.heartbeat.interval.ms", "200"),
        ("broker.session.timeout.ms", "600000"),
    ]);
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut clients[0]);
    let version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let controller = agreed_controller(&mut clients, version, None);
    let leaving = (1..=3).find(|&id| id != controller).unwrap();
    let other = (1..=3)
        .find(|&id| id != controller && id != leaving)
        .unwrap();
    create_assigned(&mut clients[0], "moving", &[&[leaving], &[other]]);

    let index = brokers.iter().position(|b| b.node_id() == leaving).unwrap();
    let status = brokers[index].shutdown().expect("SIGTERM");
    assert!(status.success(), "weir exited with {status}");
    let survivor = (0..3).find(|&i| i != index).unwrap();
    support::poll_until(
        Duration::from_secs(10),
        &format!("broker {leaving} fenced by its controlled shutdown"),
        || {
            let (partitions, listed) = topic_state(&mut clients[survivor], version, "moving")?;
            let offline = (error_code::LEADER_NOT_AVAILABLE, -1, vec![], vec![leaving]);
            (!listed.contains(&leaving) && partitions[0] == offline).then_some(partitions)
        },
    );
    let (partitions, _) = topic_state(&mut clients[survivor], version, "moving").unwrap();
    assert_eq!(
        partitions[1],
        (error_code::NONE, other, vec![other], vec![])
    );
}

#[test]
fn only_the_leader_takes_produce_fetch_and_list_offsets() {
    // Kafka answers NOT_LEADER_OR_FOLLOWER to a client that reaches a broker
    // that does not lead the partition (stale metadata after an election),
    // so the client refreshes its metadata; a follower must never take a
    // write into its own log.
    use kafka_protocol::messages::{FetchRequest, ListOffsetsRequest, ProduceRequest};
    const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    let (brokers, _) = start_three_nodes();
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut clients[0]);
    let metadata = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let produce = support::newest::<ProduceRequest>(&versions, ApiKey::Produce).min(12);
    let fetch = support::newest::<FetchRequest>(&versions, ApiKey::Fetch).min(12);
    let list = support::newest::<ListOffsetsRequest>(&versions, ApiKey::ListOffsets);
    agreed_controller(&mut clients, metadata, None);
    // "rf3" is led by 1 with followers 2 and 3 (which host empty logs);
    // "rf1" lives on 2 only.
    create_assigned(&mut clients[0], "rf3", &[&[1, 2, 3]]);
    create_assigned(&mut clients[0], "rf1", &[&[2]]);
    let rf3 = support::ensure_topic(&mut clients[0], &versions, "rf3");
    let rf1 = support::ensure_topic(&mut clients[0], &versions, "rf1");
    for client in clients.iter_mut() {
        for name in ["rf3", "rf1"] {
            support::poll_until(Duration::from_secs(10), "topics in every Metadata", || {
                let (partitions, _) = topic_state(client, metadata, name)?;
                (partitions.len() == 1 && partitions[0].1 >= 1).then_some(())
            });
        }
    }
    let batch = weir_integration_tests::records::plain_batch(&["v"], 1_000);
    let partition = 0;
    for (node, topic) in [(2, &rf3), (3, &rf3), (1, &rf1), (3, &rf1)] {
        let client = &mut clients[node - 1];
        let produced = support::produce(client, produce, topic, partition, batch.clone());
        assert_eq!(
            produced.error_code, NOT_LEADER_OR_FOLLOWER,
            "Produce to node {node}, {}",
            topic.name
        );
        let fetched = support::fetch(client, topic, &support::FetchSpec::one(fetch, partition, 0));
        assert_eq!(
            fetched[&partition].error_code, NOT_LEADER_OR_FOLLOWER,
            "Fetch from node {node}, {}",
            topic.name
        );
        let listed = support::list_offset(client, list, topic, partition, -1);
        assert_eq!(
            listed.error_code, NOT_LEADER_OR_FOLLOWER,
            "ListOffsets on node {node}, {}",
            topic.name
        );
    }
    // The leaders take them.
    support::produce_ok(&mut clients[0], produce, &rf3, 0, batch.clone());
    support::produce_ok(&mut clients[1], produce, &rf1, 0, batch);
    assert_eq!(
        support::list_offset(&mut clients[0], list, &rf3, 0, -1).offset,
        1
    );
    assert_eq!(
        support::list_offset(&mut clients[1], list, &rf1, 0, -1).offset,
        1
    );
}

/// As in Kafka, a voter started long before the others waits for them
/// (logging that it waits) instead of giving up: node 1 starts alone and
/// binds its CONTROLLER listener, nodes 2 and 3 follow 12 s later (longer
/// than the 10 s a voter used to wait before it exited), and all three
/// come up as one quorum.
#[test]
fn a_voter_started_long_before_the_others_waits_for_them() {
    let cluster_id = weir_storage::random_kafka_uuid();
    let ports = three_free_ports();
    let voters = voters_of(&ports);
    let start = |i: usize| {
        let (cluster_id, voters, port) = (cluster_id.clone(), voters.clone(), ports[i]);
        std::thread::spawn(move || {
            TestBroker::builder()
                .node_id(i as i32 + 1)
                .format_cluster_id(&cluster_id)
                .override_config(
                    "listeners",
                    &format!("PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}"),
                )
                .override_config("controller.quorum.voters", &voters)
                .start()
        })
    };
    // The late voters' ports stay bound until they start: released for
    // 12 s, one was taken by another test's cluster, which then got node
    // 1's requests (CI, 2026-12-05). Meanwhile the kernel accepts node 1's
    // connections to them and its requests time out unanswered (a voter
    // not yet started would refuse the connection): either way node 1 has
    // no quorum and waits.
    let held: Vec<std::net::TcpListener> = ports[1..]
        .iter()
        .map(|&port| std::net::TcpListener::bind(("127.0.0.1", port)).expect("holding a port"))
        .collect();
    let first = start(0);
    support::poll_until(
        Duration::from_secs(15),
        "node 1 to listen for the quorum",
        || std::net::TcpStream::connect(("127.0.0.1", ports[0])).ok(),
    );
    // The scenario, not synchronisation: the other voters start late.
    std::thread::sleep(Duration::from_secs(12));
    drop(held);
    let others = [start(1), start(2)];
    let mut nodes = vec![first
        .join()
        .expect("starter thread")
        .expect("node 1 waited and started")];
    for other in others {
        nodes.push(
            other
                .join()
                .expect("starter thread")
                .expect("starting weir"),
        );
    }
    let mut clients: Vec<RawClient> = nodes.iter().map(support::connect).collect();
    agreed_controller(&mut clients, 12, None);
    let log = std::fs::read_to_string(nodes[0].log_path()).expect("node 1's log");
    assert!(
        log.contains("no metadata quorum leader yet; waiting for the other voters"),
        "node 1 says it waits: {log}"
    );
}
