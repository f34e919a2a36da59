//! ElectLeaders (key 43) on three combined nodes and a broker-only node,
//! over the raw protocol: ELECTION_NOT_NEEDED and UNKNOWN_TOPIC_OR_PARTITION
//! on a healthy partition; after kill -9 of the broker that alone holds an
//! RF=2 partition's ISR (its other replica left the ISR when it was killed
//! first, and came back), a preferred election cannot help
//! (PREFERRED_LEADER_NOT_AVAILABLE) and an unclean one (KIP-460) makes the
//! live replica leader with itself as the ISR, on every surviving node.

use std::time::Duration;

use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{
    ApiKey, ElectLeadersRequest, ElectLeadersResponse, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::RawClient;

use crate::cluster::{
    agreed_controller, create_assigned, start_broker_only, start_three_nodes_in_with, topic_state,
    voters_of, FAST_SESSIONS,
};
use crate::support::{self, error_code};

const PREFERRED_LEADER_NOT_AVAILABLE: i16 = 80;
const BROKER_ONLY: i32 = 4;
const ELECTION_NOT_NEEDED: i16 = 84;

/// `(partition, error code)` per partition of `topic`'s results.
fn elect(
    client: &mut RawClient,
    version: i16,
    election_type: i8,
    topic: &str,
    partitions: &[i32],
) -> Vec<(i32, i16)> {
    let request = ElectLeadersRequest::default()
        .with_election_type(election_type)
        .with_timeout_ms(30_000)
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(partitions.to_vec())]));
    let response: ElectLeadersResponse = client.send(&request, version).expect("ElectLeaders");
    assert_eq!(response.error_code, error_code::NONE, "{response:?}");
    assert_eq!(response.replica_election_results.len(), 1, "{response:?}");
    let result = &response.replica_election_results[0];
    assert_eq!(result.topic.0.as_str(), topic);
    result
        .partition_result
        .iter()
        .map(|p| (p.partition_id, p.error_code))
        .collect()
}

#[test]
fn unclean_election_makes_a_live_replica_lead_an_offline_partition() {
    // Three voters and a broker-only node 4, so that two brokers can be
    // down while the quorum holds. "rf2" on [victim, 4]: 4 is killed (the
    // ISR shrinks to the victim), then the victim (the ISR's only member),
    // then 4 comes back: live, but not in the ISR, and nobody left to add
    // it (Kafka's handleBrokerFenced, ELR off).
    let cluster_id = weir_storage::random_kafka_uuid();
    let (mut voters, controller_ports) = start_three_nodes_in_with(&cluster_id, &FAST_SESSIONS);
    let quorum = voters_of(&controller_ports);
    let mut broker_only = start_broker_only(
        &cluster_id,
        BROKER_ONLY,
        ("controller.quorum.voters", &quorum),
        &FAST_SESSIONS,
    );
    let mut clients: Vec<RawClient> = voters.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut clients[0]);
    let metadata = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let version = support::newest::<ElectLeadersRequest>(&versions, ApiKey::ElectLeaders);
    assert_eq!(version, 2);
    let active = agreed_controller(&mut clients, metadata, None);
    // Not the active controller: the survivors keep it, and requests to
    // both survivors exercise forwarding.
    let victim = (1..=3).find(|&id| id != active).unwrap();
    let survivors: Vec<usize> = (0..3).filter(|&i| i + 1 != victim as usize).collect();
    create_assigned(&mut clients[0], "rf2", &[&[victim, BROKER_ONLY]]);
    let healthy = vec![(error_code::NONE, victim, vec![victim, BROKER_ONLY], vec![])];
    support::poll_until(
        Duration::from_secs(10),
        "rf2 led by its first replica",
        || (topic_state(&mut clients[0], metadata, "rf2")?.0 == healthy).then_some(()),
    );

    assert_eq!(
        elect(&mut clients[0], version, 0, "rf2", &[0, 5]),
        vec![
            (0, ELECTION_NOT_NEEDED),
            (5, error_code::UNKNOWN_TOPIC_OR_PARTITION)
        ]
    );
    assert_eq!(
        elect(&mut clients[0], version, 1, "rf2", &[0]),
        vec![(0, ELECTION_NOT_NEEDED)]
    );

    broker_only.kill9().expect("kill -9 the broker-only node");
    let shrunk = vec![(error_code::NONE, victim, vec![victim], vec![BROKER_ONLY])];
    support::poll_until(
        Duration::from_secs(10),
        "broker 4 fenced and out of the ISR",
        || (topic_state(&mut clients[0], metadata, "rf2")?.0 == shrunk).then_some(()),
    );
    let index = voters.iter().position(|b| b.node_id() == victim).unwrap();
    voters[index].kill9().expect("kill -9 the victim");
    broker_only
        .start_again()
        .expect("restarting the broker-only node");
    // The ISR empties, the victim kept as an eligible leader (KIP-966).
    let offline = vec![(error_code::LEADER_NOT_AVAILABLE, -1, vec![], vec![victim])];
    support::poll_until(
        Duration::from_secs(10),
        "rf2 offline once its only ISR member is fenced, broker 4 back",
        || {
            let (state, brokers) = topic_state(&mut clients[survivors[0]], metadata, "rf2")?;
            (state == offline && brokers.contains(&BROKER_ONLY)).then_some(())
        },
    );

    let asker = survivors[1];
    assert_eq!(
        elect(&mut clients[asker], version, 0, "rf2", &[0]),
        vec![(0, PREFERRED_LEADER_NOT_AVAILABLE)]
    );
    assert_eq!(
        elect(&mut clients[asker], version, 1, "rf2", &[0]),
        vec![(0, error_code::NONE)]
    );
    // The live replica outside the ISR leads; the ISR is just it; the dead
    // broker stays an offline replica.
    let elected = vec![(
        error_code::NONE,
        BROKER_ONLY,
        vec![BROKER_ONLY],
        vec![victim],
    )];
    // The asking node answers after applying the election.
    assert_eq!(
        topic_state(&mut clients[asker], metadata, "rf2").unwrap().0,
        elected
    );
    support::poll_until(
        Duration::from_secs(10),
        "every survivor to see the unclean election",
        || {
            survivors
                .iter()
                .all(|&i| {
                    topic_state(&mut clients[i], metadata, "rf2").map(|s| s.0)
                        == Some(elected.clone())
                })
                .then_some(())
        },
    );
    assert_eq!(
        elect(&mut clients[asker], version, 1, "rf2", &[0]),
        vec![(0, ELECTION_NOT_NEEDED)]
    );
}
