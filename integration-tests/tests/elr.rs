//! Eligible Leader Replicas (KIP-966) on real processes: Kafka's
//! `EligibleLeaderReplicasTest` (tests/kafkatest/tests/core/
//! eligible_leader_replicas_test.py). A partition on three broker-only
//! nodes (RF=3, `min.insync.replicas=2`) next to a 3-voter quorum, as
//! Kafka's test keeps its controller apart: two ISR members stop cleanly,
//! the leader is killed, the two come back and one of them, kept in the
//! ELR, leads cleanly; every acknowledged record is read back once.
//! `kafka-topics --describe` shows `Elr` and `LastKnownElr` on the way.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, FetchRequest, MetadataRequest};
use weir_integration_tests::clients::{kafka_tool, RunningClient};
use weir_integration_tests::TestBroker;

use crate::cluster::{
    start_broker_only, start_three_nodes_in_with, topic_state, voters_of, FAST_SESSIONS,
};
use crate::support::{self, error_code};

const TOPIC: &str = "elr";

/// The value of a VerifiableProducer `producer_send_success` JSON line.
fn acknowledged_value(line: &str) -> Option<String> {
    if !line.contains("\"producer_send_success\"") {
        return None;
    }
    let rest = &line[line.find("\"value\":\"")? + "\"value\":\"".len()..];
    Some(rest[..rest.find('"')?].to_owned())
}

/// The `Isr`, `Elr` and `LastKnownElr` fields of the partition line of
/// `kafka-topics --describe` (Kafka's `TopicCommand`, which reads them
/// from DescribeTopicPartitions), e.g. `("5", "6", "4")`.
fn described(bootstrap: &str) -> Option<(String, String, String)> {
    let output = support::kafka_topics(bootstrap, &["--describe", "--topic", TOPIC]);
    let text = output.stdout_text();
    let line = text.lines().find(|l| l.contains("Partition: 0"))?;
    let field = |name: &str| -> Option<String> {
        let start = line.find(&format!("\t{name}: "))? + name.len() + 3;
        Some(line[start..].split('\t').next()?.trim().to_owned())
    };
    Some((field("Isr")?, field("Elr")?, field("LastKnownElr")?))
}

#[test]
fn eligible_leader_replicas_lead_cleanly_after_the_isr_is_lost() {
    let cluster_id = weir_storage::random_kafka_uuid();
    let (voters, controller_ports) = start_three_nodes_in_with(&cluster_id, &FAST_SESSIONS);
    let quorum = voters_of(&controller_ports);
    let mut brokers: Vec<TestBroker> = (4..=6)
        .map(|id| {
            start_broker_only(
                &cluster_id,
                id,
                ("controller.quorum.voters", &quorum),
                &FAST_SESSIONS,
            )
        })
        .collect();
    let mut admin = support::connect(&voters[0]);
    let versions = support::api_versions(&mut admin);
    let metadata = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let fetch = support::newest::<FetchRequest>(&versions, ApiKey::Fetch).min(12);
    let bootstrap = voters[0].bootstrap();
    support::kafka_topics(
        &bootstrap,
        &[
            "--create",
            "--topic",
            TOPIC,
            "--replica-assignment",
            "4:5:6",
            "--config",
            "min.insync.replicas=2",
        ],
    )
    .assert_success();
    support::poll_until(Duration::from_secs(30), "the ISR at 4, 5, 6", || {
        let (partitions, _) = topic_state(&mut admin, metadata, TOPIC)?;
        let mut isr = partitions.first()?.2.clone();
        isr.sort_unstable();
        (isr == vec![4, 5, 6]).then_some(())
    });

    // Seed messages with Kafka's VerifiableProducer (acks=all, idempotent).
    let producer_bootstrap: Vec<String> = brokers.iter().map(TestBroker::bootstrap).collect();
    let mut command = kafka_tool("org.apache.kafka.tools.VerifiableProducer").expect("Kafka tools");
    command.args([
        "--bootstrap-server",
        &producer_bootstrap.join(","),
        "--topic",
        TOPIC,
        "--acks",
        "-1",
        "--max-messages",
        "3000",
    ]);
    let output = RunningClient::spawn(command)
        .expect("VerifiableProducer")
        .finish(Duration::from_secs(120))
        .expect("VerifiableProducer exit");
    output.assert_success();
    let acknowledged: Vec<String> = output
        .stdout_text()
        .lines()
        .filter_map(acknowledged_value)
        .collect();
    assert_eq!(acknowledged.len(), 3000, "every seed message acknowledged");

    let (partitions, _) = topic_state(&mut admin, metadata, TOPIC).unwrap();
    let leader = partitions[0].1;
    let others: Vec<i32> = (4..=6).filter(|&id| id != leader).collect();
    let index = |id: i32| (id - 4) as usize;

    // Two ISR members stop cleanly, one after the other: the first leaves an
    // ISR still at the min ISR; the second takes it below, and stays an
    // eligible leader.
    for &id in &others {
        let status = brokers[index(id)].shutdown().expect("SIGTERM");
        assert!(status.success(), "broker {id} exited with {status}");
    }
    let last_clean = others[1];
    support::poll_until(
        Duration::from_secs(30),
        "the ISR down to the leader, the last clean stop in the ELR",
        || {
            let (isr, elr, last_known) = described(&bootstrap)?;
            (isr == leader.to_string() && elr == last_clean.to_string() && last_known.is_empty())
                .then_some(())
        },
    );

    // The leader is killed: its session expires, the ISR empties, and it is
    // kept as an eligible leader and as the last known leader. No unclean
    // election: the partition has no leader.
    brokers[index(leader)].kill9().expect("SIGKILL the leader");
    support::poll_until(
        Duration::from_secs(30),
        "no leader, an empty ISR, the ELR and the last known leader",
        || {
            let (partitions, _) = topic_state(&mut admin, metadata, TOPIC)?;
            let (isr, elr, last_known) = described(&bootstrap)?;
            let mut elr: Vec<&str> = elr.split(',').collect();
            elr.sort_unstable();
            let mut expected = [leader.to_string(), last_clean.to_string()];
            expected.sort_unstable();
            (partitions[0].1 == -1
                && isr.is_empty()
                && elr == expected
                && last_known == leader.to_string())
            .then_some(())
        },
    );

    // The two clean ones come back: the one kept in the ELR leads cleanly
    // (its ISR is itself), the other rejoins once caught up.
    for &id in &others {
        brokers[index(id)]
            .start_again()
            .expect("restarting a cleanly stopped broker");
    }
    let new_leader = support::poll_until(Duration::from_secs(30), "a leader again", || {
        let (partitions, _) = topic_state(&mut admin, metadata, TOPIC)?;
        let p = &partitions[0];
        (p.0 == error_code::NONE && p.1 >= 0).then_some(p.1)
    });
    assert_eq!(new_leader, last_clean, "the ELR member leads");
    let mut client = support::connect(&brokers[index(new_leader)]);
    let topic = support::ensure_topic(&mut client, &versions, TOPIC);
    let stored = support::poll_until(
        Duration::from_secs(30),
        "every acknowledged record readable from the new leader",
        || {
            let stored = support::read_partition(&mut client, fetch, &topic, 0);
            (stored.len() >= acknowledged.len()).then_some(stored)
        },
    );
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for value in stored.values() {
        *seen.entry(value.as_str()).or_default() += 1;
    }
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|v| !seen.contains_key(v.as_str()))
        .collect();
    assert!(lost.is_empty(), "{} acknowledged records lost", lost.len());
    assert!(
        seen.values().all(|&n| n == 1),
        "a record stored twice: {:?}",
        seen.iter().find(|(_, n)| **n > 1)
    );

    // The killed leader restarts without a clean-shutdown marker: it left
    // the ELR at its registration, and rejoins the ISR only after catching
    // up; then every replica holds the same bytes.
    brokers[index(leader)]
        .start_again()
        .expect("restarting the killed leader");
    support::poll_until(Duration::from_secs(60), "the ISR back at 3", || {
        let (isr, elr, last_known) = described(&bootstrap)?;
        (isr.split(',').count() == 3 && elr.is_empty() && last_known.is_empty()).then_some(())
    });
    let bytes = support::assert_replicas_identical(&brokers, TOPIC, 0);
    assert!(!bytes.is_empty(), "the replicas hold the records");
}
