//! What an operator sees of replication (issue 16 scope 9), on three real
//! nodes with one of them down and then back: Kafka's own `kafka-topics
//! --describe` with `--under-replicated-partitions`,
//! `--under-min-isr-partitions` and `--unavailable-partitions` (Kafka's
//! `TopicCommand` rules over DescribeTopics, DescribeConfigs and
//! DescribeCluster) lists exactly the affected partitions while the node is
//! down and nothing once it is back, and the active controller's
//! `weir_offline_partitions` gauge (Kafka's `OfflinePartitionsCount`)
//! counts the partitions left without a leader.

use std::collections::BTreeSet;

use kafka_protocol::messages::{ApiKey, MetadataRequest};
use weir_integration_tests::metrics::http_get;
use weir_integration_tests::{RawClient, TestBroker};

use crate::cluster::{
    agreed_controller, create_assigned_with, start_three_nodes_with_metrics, topic_state,
};
use crate::support;

/// A partition as `kafka-topics` names it.
type Listed = BTreeSet<(String, i32)>;

/// Which of `kafka-topics --describe`'s partition reports to run.
const UNDER_REPLICATED: &str = "--under-replicated-partitions";
const UNDER_MIN_ISR: &str = "--under-min-isr-partitions";
const UNAVAILABLE: &str = "--unavailable-partitions";

/// The partitions `kafka-topics --describe <report>` lists (its
/// `Topic: <name>\tPartition: <n>\t...` lines).
fn listed(bootstrap: &str, report: &str) -> Listed {
    let output = support::kafka_topics(bootstrap, &["--describe", report]);
    output.assert_success();
    output
        .stdout_text()
        .lines()
        .filter_map(|line| {
            let field = |name: &str| {
                let rest = &line[line.find(name)? + name.len()..];
                rest.split_whitespace().next().map(str::to_owned)
            };
            Some((field("Topic: ")?, field("Partition: ")?.parse().ok()?))
        })
        .collect()
}

fn partitions(list: &[(&str, i32)]) -> Listed {
    list.iter().map(|(t, p)| ((*t).to_owned(), *p)).collect()
}

/// `weir_offline_partitions` on `broker`'s Prometheus endpoint, once set.
fn offline_partitions_gauge(broker: &TestBroker) -> Option<f64> {
    let response = http_get(broker.metrics_addr()?, "/metrics").ok()?;
    let text = String::from_utf8(response.body).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("weir_offline_partitions "))
        .and_then(|value| value.trim().parse().ok())
}

/// Waits until the active controller (as `client`'s Metadata names it)
/// reports `offline` partitions without a leader and every other running
/// node reports 0.
fn await_offline_gauge(brokers: &[TestBroker], client: &mut RawClient, version: i16, offline: f64) {
    support::poll_until(
        support::CLIENT_TIMEOUT,
        &format!("weir_offline_partitions {offline} on the active controller, 0 elsewhere"),
        || {
            let active = agreed_controller(std::slice::from_mut(client), version, None);
            brokers
                .iter()
                .filter(|b| b.pid().is_some())
                .all(|b| {
                    let expected = if b.node_id() == active { offline } else { 0.0 };
                    offline_partitions_gauge(b) == Some(expected)
                })
                .then_some(())
        },
    );
}

/// Waits until each report lists exactly its expected partitions.
fn await_reports(bootstrap: &str, expected: &[(&str, Listed)]) {
    for (report, partitions) in expected {
        support::poll_until(
            support::CLIENT_TIMEOUT,
            &format!("kafka-topics --describe {report} to list exactly {partitions:?}"),
            || (listed(bootstrap, report) == *partitions).then_some(()),
        );
    }
}

/// One node of three (not the active controller) is killed with SIGKILL
/// and restarted. Its partitions, by the topics' assignments and
/// `min.insync.replicas`:
///
/// | topic, partition | replicas | min ISR | while it is down |
/// |---|---|---|---|
/// | `spread-0` | victim, a, b | 2 | under-replicated (leader moves) |
/// | `spread-1` | a, b, victim | 2 | under-replicated |
/// | `strict-0` | a, victim, b | 3 | under-replicated, under min ISR |
/// | `alone-0` | victim | 1 | no leader: unavailable, under min ISR, offline |
/// | `pair-0` | a, b | 1 | nothing (the victim holds no replica) |
///
/// `alone-0` is under-replicated exactly when its ISR is reported empty
/// (Kafka's rule: fewer ISR members than replicas); with ELR (KIP-966)
/// the last ISR member of a partition may leave the ISR, without it stays.
#[test]
fn kafka_topics_reports_and_the_offline_gauge_name_exactly_the_partitions_a_down_node_affects() {
    // replica.lag.time.max.ms sets how often the gauge is computed (every
    // half of it), as for the ISR checks.
    let mut brokers = start_three_nodes_with_metrics(&[
        ("broker.heartbeat.interval.ms", "200"),
        ("broker.session.timeout.ms", "1500"),
        ("replica.lag.time.max.ms", "4000"),
    ]);
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut clients[0]);
    let metadata = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let active = agreed_controller(&mut clients, metadata, None);
    let victim = (1..=3).find(|&id| id != active).unwrap();
    let (a, b) = (
        active,
        (1..=3).find(|&id| id != active && id != victim).unwrap(),
    );
    create_assigned_with(
        &mut clients[0],
        "spread",
        &[&[victim, a, b], &[a, b, victim]],
        &[("min.insync.replicas", "2")],
    );
    create_assigned_with(
        &mut clients[0],
        "strict",
        &[&[a, victim, b]],
        &[("min.insync.replicas", "3")],
    );
    create_assigned_with(&mut clients[0], "alone", &[&[victim]], &[]);
    create_assigned_with(&mut clients[0], "pair", &[&[a, b]], &[]);
    let healthy = [
        (UNDER_REPLICATED, Listed::new()),
        (UNDER_MIN_ISR, Listed::new()),
        (UNAVAILABLE, Listed::new()),
    ];
    await_reports(&brokers[0].bootstrap(), &healthy);
    await_offline_gauge(&brokers, &mut clients[0], metadata, 0.0);

    let at = brokers.iter().position(|n| n.node_id() == victim).unwrap();
    brokers[at].kill9().expect("SIGKILL a node");
    let survivor = brokers.iter().position(|n| n.node_id() == a).unwrap();
    let bootstrap = brokers[survivor].bootstrap();
    // Fenced: it left the ISR of the partitions it shared.
    let alone_isr = support::poll_until(support::CLIENT_TIMEOUT, "the node to be fenced", || {
        let (spread, _) = topic_state(&mut clients[survivor], metadata, "spread")?;
        let (alone, _) = topic_state(&mut clients[survivor], metadata, "alone")?;
        (spread
            .iter()
            .all(|(_, leader, isr, _)| *leader != victim && !isr.contains(&victim))
            && alone[0].1 < 0)
            .then(|| alone[0].2.clone())
    });
    let mut under_replicated = partitions(&[("spread", 0), ("spread", 1), ("strict", 0)]);
    if alone_isr.is_empty() {
        under_replicated.insert(("alone".to_owned(), 0));
    }
    await_reports(
        &bootstrap,
        &[
            (UNDER_REPLICATED, under_replicated),
            (UNDER_MIN_ISR, partitions(&[("strict", 0), ("alone", 0)])),
            (UNAVAILABLE, partitions(&[("alone", 0)])),
        ],
    );
    await_offline_gauge(&brokers, &mut clients[survivor], metadata, 1.0);

    brokers[at].start_again().expect("restarting the node");
    await_reports(&bootstrap, &healthy);
    await_offline_gauge(&brokers, &mut clients[survivor], metadata, 0.0);
}
