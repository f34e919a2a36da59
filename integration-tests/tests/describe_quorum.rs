//! DescribeQuorum (key 55, v0-2; KIP-595, KIP-836, KIP-853) on a 3-node
//! quorum and on a single node, with the raw client at every advertised
//! version and with Kafka's own `kafka-metadata-quorum describe --status` /
//! `--replication` (MetadataQuorumCommand, Java Admin `describeMetadataQuorum`).
//! Every node answers with the active controller's view: one leader (the
//! controller every node names), three voters, leader epoch >= 1 and a high
//! watermark above 0.

use std::time::Duration;

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    ApiKey, DescribeQuorumRequest, DescribeQuorumResponse, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::{clients, RawClient};

use crate::cluster::{agreed_controller, start_three_nodes};
use crate::support::{self, error_code, CLIENT_TIMEOUT};

fn request(topic: &str, partition: i32) -> DescribeQuorumRequest {
    let mut p = PartitionData::default();
    p.partition_index = partition;
    let mut t = TopicData::default();
    t.topic_name = TopicName(StrBytes::from_string(topic.to_owned()));
    t.partitions = vec![p];
    let mut request = DescribeQuorumRequest::default();
    request.topics = vec![t];
    request
}

fn describe(client: &mut RawClient, version: i16) -> DescribeQuorumResponse {
    client
        .send(&request("__cluster_metadata", 0), version)
        .expect("DescribeQuorum")
}

/// The advertised DescribeQuorum versions.
fn versions_of(client: &mut RawClient) -> std::ops::RangeInclusive<i16> {
    let versions = support::api_versions(client);
    let api = versions
        .api_keys
        .iter()
        .find(|a| a.api_key == ApiKey::DescribeQuorum as i16)
        .expect("DescribeQuorum is advertised");
    api.min_version..=api.max_version
}

#[test]
fn every_node_describes_one_leader_and_three_voters_at_every_version() {
    let (brokers, controller_ports) = start_three_nodes();
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut clients[0]);
    let metadata_version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let leader = agreed_controller(&mut clients, metadata_version, None);
    let range = versions_of(&mut clients[0]);
    assert_eq!(range, 0..=2);

    for (client, broker) in clients.iter_mut().zip(&brokers) {
        for version in range.clone() {
            let what = format!("node {} DescribeQuorum v{version}", broker.node_id());
            // Followers answer AppendEntries within a heartbeat interval.
            let response = support::poll_until(Duration::from_secs(10), &what, || {
                let response = describe(client, version);
                let partition = response.topics.first()?.partitions.first()?;
                let followers_known = partition
                    .current_voters
                    .iter()
                    .all(|v| v.log_end_offset > 0 && (version == 0 || v.last_fetch_timestamp > 0));
                followers_known.then_some(response)
            });
            assert_eq!(response.error_code, error_code::NONE, "{what}");
            assert_eq!(response.topics.len(), 1, "{what}");
            assert_eq!(response.topics[0].topic_name.as_str(), "__cluster_metadata");
            let partition = &response.topics[0].partitions[0];
            assert_eq!(partition.partition_index, 0, "{what}");
            assert_eq!(partition.error_code, error_code::NONE, "{what}");
            assert_eq!(partition.leader_id.0, leader, "{what}");
            assert!(partition.leader_epoch >= 1, "{what}: {partition:?}");
            assert!(partition.high_watermark > 0, "{what}: {partition:?}");
            let mut ids: Vec<i32> = partition
                .current_voters
                .iter()
                .map(|v| v.replica_id.0)
                .collect();
            ids.sort_unstable();
            assert_eq!(ids, vec![1, 2, 3], "{what}");
            assert!(partition.observers.is_empty(), "{what}");
            let leader_state = partition
                .current_voters
                .iter()
                .find(|v| v.replica_id.0 == leader)
                .unwrap();
            assert!(
                leader_state.log_end_offset >= partition.high_watermark,
                "{what}"
            );
            if version >= 1 {
                assert!(leader_state.last_caught_up_timestamp > 0, "{what}");
            }
            if version >= 2 {
                let mut nodes: Vec<(i32, String, String, u16)> = response
                    .nodes
                    .iter()
                    .flat_map(|n| {
                        n.listeners.iter().map(move |l| {
                            (n.node_id.0, l.name.to_string(), l.host.to_string(), l.port)
                        })
                    })
                    .collect();
                nodes.sort();
                let expected: Vec<(i32, String, String, u16)> = controller_ports
                    .iter()
                    .enumerate()
                    .map(|(i, &port)| (i as i32 + 1, "CONTROLLER".into(), "127.0.0.1".into(), port))
                    .collect();
                assert_eq!(nodes, expected, "{what}: the voters' CONTROLLER endpoints");
                assert!(
                    partition
                        .current_voters
                        .iter()
                        .all(|v| v.replica_directory_id.is_nil()),
                    "{what}: a static quorum has no directory ids"
                );
            } else {
                assert!(response.nodes.is_empty(), "{what}");
            }
        }
    }

    // Another partition of the metadata topic, or another topic, is unknown.
    for (topic, partition) in [("__cluster_metadata", 1), ("other", 0)] {
        let response: DescribeQuorumResponse = clients[0]
            .send(&request(topic, partition), 2)
            .expect("DescribeQuorum");
        assert_eq!(response.error_code, error_code::NONE);
        assert_eq!(
            response.topics[0].partitions[0].error_code,
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            "{topic}-{partition}"
        );
    }
}

#[test]
fn a_single_node_describes_itself_as_the_only_voter() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let response = describe(&mut client, 2);
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error_code, error_code::NONE);
    assert_eq!(partition.leader_id.0, broker.node_id());
    assert!(partition.leader_epoch >= 1, "{partition:?}");
    assert!(partition.high_watermark > 0, "{partition:?}");
    let ids: Vec<i32> = partition
        .current_voters
        .iter()
        .map(|v| v.replica_id.0)
        .collect();
    assert_eq!(ids, vec![broker.node_id()]);
}

/// Runs Kafka's `kafka-metadata-quorum` with `args`.
fn metadata_quorum(bootstrap: &str, args: &[&str]) -> String {
    let mut command =
        clients::kafka_tool("org.apache.kafka.tools.MetadataQuorumCommand").expect("Kafka tools");
    command.arg("--bootstrap-server").arg(bootstrap).args(args);
    let output = clients::run(command, None, CLIENT_TIMEOUT).expect("kafka-metadata-quorum");
    output.assert_success();
    output.stdout_text()
}

#[test]
fn kafka_metadata_quorum_describes_status_and_replication() {
    let (brokers, _) = start_three_nodes();
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut clients[0]);
    let metadata_version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let leader = agreed_controller(&mut clients, metadata_version, None);
    let follower = brokers.iter().find(|b| b.node_id() != leader).unwrap();

    let status = metadata_quorum(&follower.bootstrap(), &["describe", "--status"]);
    assert!(
        status.contains(&format!("LeaderId:               {leader}")),
        "{status}"
    );
    let voters_line = status
        .lines()
        .find(|l| l.starts_with("CurrentVoters:"))
        .unwrap_or_else(|| panic!("no CurrentVoters line:\n{status}"));
    for id in 1..=3 {
        assert!(voters_line.contains(&format!("\"id\": {id}")), "{status}");
    }
    assert!(status.contains("HighWatermark:"), "{status}");

    let replication = metadata_quorum(&follower.bootstrap(), &["describe", "--replication"]);
    let rows: Vec<&str> = replication
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(rows.len(), 3, "{replication}");
    assert_eq!(
        rows.iter().filter(|r| r.contains("Leader")).count(),
        1,
        "{replication}"
    );
    assert_eq!(
        rows.iter().filter(|r| r.contains("Follower")).count(),
        2,
        "{replication}"
    );
    assert!(
        rows[0].trim_start().starts_with(&leader.to_string()),
        "{replication}"
    );
}
