//! Three `weir` processes as one metadata quorum: `controller.quorum.voters`
//! over their CONTROLLER listeners on 127.0.0.1 (ports chosen at run time).
//! Every node is formatted with one cluster id first (`weir format`, as
//! `kafka-storage format`); an unformatted node refuses to start. A topic
//! created through one node is in every node's Metadata, every node names the
//! same active controller and cluster id in Metadata and DescribeCluster, and
//! no node advertises its CONTROLLER listener to clients (as Kafka).

use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, DescribeClusterRequest, DescribeClusterResponse, MetadataRequest, MetadataResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::{RawClient, TestBroker};

use crate::support::{self, error_code};

/// Three distinct free ports on 127.0.0.1 (all bound at once, then released).
pub(crate) fn three_free_ports() -> Vec<u16> {
    let listeners: Vec<std::net::TcpListener> = (0..3)
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
    let controller_ports = three_free_ports();
    let voters = controller_ports
        .iter()
        .enumerate()
        .map(|(i, port)| format!("{}@127.0.0.1:{port}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    // Each node's startup waits for a quorum, so they start together.
    let starting: Vec<_> = controller_ports
        .iter()
        .enumerate()
        .map(|(i, &port)| {
            let voters = voters.clone();
            let cluster_id = cluster_id.to_owned();
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
        })
        .collect();
    let brokers: Vec<TestBroker> = starting
        .into_iter()
        .map(|t| t.join().expect("starter thread").expect("starting weir"))
        .collect();
    (brokers, controller_ports)
}

/// [`start_three_nodes_in`] with a new cluster id.
pub(crate) fn start_three_nodes() -> (Vec<TestBroker>, Vec<u16>) {
    start_three_nodes_in(&weir_storage::random_kafka_uuid())
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
