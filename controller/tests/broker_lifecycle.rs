//! Broker lifecycle on a three-voter metadata quorum in one process (the
//! in-memory router): brokers register fenced, heartbeats unfence them, the
//! active controller fences a broker whose session expires and elects new
//! leaders from the live ISR (or takes the partition offline, its last ISR
//! member kept as an eligible leader: KIP-966 is on for new clusters), and the
//! broker's return makes it leader again. Every wait polls observable state
//! with a deadline.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use support::{api, eventually};
use tokio::task::JoinHandle;
use weir_controller::{
    BrokerEndpoint, BrokerHeartbeat, BrokerRegistrationRequest, ControllerConfig, CreatableTopic,
    MemoryRouter, MetadataImage, QuorumController, QuorumOptions, QuorumTransport, QuorumVoter,
};

const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(100);

fn options() -> QuorumOptions {
    support::quorum_options(Duration::from_millis(800))
}

async fn start_three(
    root: &Path,
    router: &MemoryRouter,
    options: QuorumOptions,
) -> BTreeMap<i32, QuorumController> {
    let voters: Vec<QuorumVoter> = (1..=3)
        .map(|id| QuorumVoter {
            id,
            host: "127.0.0.1".into(),
            port: 9000 + id as u16,
        })
        .collect();
    let start = |id: i32| {
        let voters = voters.clone();
        let transport = QuorumTransport::memory(router);
        let options = options.clone();
        async move {
            let config = ControllerConfig {
                node_id: id,
                metadata_dir: root.join(format!("node-{id}")).join("__cluster_metadata-0"),
                cluster_id: "lifecycle-test".into(),
            };
            QuorumController::start_with(config, options, voters, transport)
                .await
                .unwrap_or_else(|e| panic!("voter {id} did not start: {e}"))
        }
    };
    let (a, b, c) = tokio::join!(start(1), start(2), start(3));
    BTreeMap::from([(1, a), (2, b), (3, c)])
}

/// Registers broker `id` through its own voter; returns its epoch.
async fn register(controller: &QuorumController, id: i32) -> i64 {
    let endpoint = BrokerEndpoint {
        name: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port: 9092 + id as u16,
        security_protocol: 0,
    };
    api(controller)
        .register_broker(BrokerRegistrationRequest {
            broker_id: id,
            incarnation_id: uuid::Uuid::new_v4(),
            endpoints: vec![endpoint],
            rack: None,
            previous_broker_epoch: -1,
        })
        .await
        .unwrap()
}

/// A broker's heartbeat loop (as `broker.heartbeat.interval.ms`) until aborted.
fn heartbeats(controller: QuorumController, id: i32, epoch: i64) -> JoinHandle<()> {
    let controller = api(&controller);
    tokio::spawn(async move {
        loop {
            // Errors (no active controller during an election) are retried.
            let heartbeat = BrokerHeartbeat {
                broker_id: id,
                broker_epoch: epoch,
                metadata_offset: controller.image().last_applied_offset,
                want_shut_down: false,
            };
            let _ = controller.broker_heartbeat(heartbeat).await;
            tokio::time::sleep(HEARTBEAT_INTERVAL).await;
        }
    })
}

fn all_images(nodes: &BTreeMap<i32, QuorumController>) -> Vec<Arc<MetadataImage>> {
    nodes.values().map(|c| c.image()).collect()
}

/// `(leader, isr)` of `topic`'s partition `index` in `image`.
fn leader_and_isr(image: &MetadataImage, topic: &str, index: i32) -> (i32, Vec<i32>) {
    let p = &image.topic(topic).unwrap().partitions[&index];
    (p.leader, p.isr.clone())
}

/// `(ELR, last known ELR)` of `topic`'s partition `index` in `image`.
fn elr(image: &MetadataImage, topic: &str, index: i32) -> (Vec<i32>, Vec<i32>) {
    let p = &image.topic(topic).unwrap().partitions[&index];
    (p.elr.clone(), p.last_known_elr.clone())
}

fn manual(name: &str, assignments: Vec<Vec<i32>>) -> CreatableTopic {
    CreatableTopic {
        name: name.into(),
        num_partitions: -1,
        replication_factor: -1,
        assignments: assignments
            .into_iter()
            .enumerate()
            .map(|(i, r)| (i as i32, r))
            .collect(),
        configs: vec![],
    }
}

/// Starts three voters with brokers 1..=3 (broker `n` on voter `n`)
/// heartbeating until every voter's image shows them all unfenced.
async fn cluster_with_live_brokers(
    root: &Path,
    router: &MemoryRouter,
) -> (
    BTreeMap<i32, QuorumController>,
    BTreeMap<i32, (i64, JoinHandle<()>)>,
) {
    cluster_with_live_brokers_with(root, router, options()).await
}

async fn cluster_with_live_brokers_with(
    root: &Path,
    router: &MemoryRouter,
    options: QuorumOptions,
) -> (
    BTreeMap<i32, QuorumController>,
    BTreeMap<i32, (i64, JoinHandle<()>)>,
) {
    let nodes = start_three(root, router, options).await;
    let mut brokers = BTreeMap::new();
    for (&id, controller) in &nodes {
        let epoch = register(controller, id).await;
        assert!(
            controller.image().brokers[&id].fenced,
            "several voters register brokers fenced"
        );
        brokers.insert(id, (epoch, heartbeats(controller.clone(), id, epoch)));
    }
    eventually("brokers 1..=3 unfenced on every voter", || async {
        all_images(&nodes)
            .iter()
            .all(|i| i.unfenced_broker_ids() == vec![1, 2, 3])
            .then_some(())
    })
    .await;
    (nodes, brokers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_session_fences_the_broker_and_its_return_makes_it_leader_again() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemoryRouter::new();
    let (nodes, mut brokers) = cluster_with_live_brokers(dir.path(), &router).await;

    let results = api(&nodes[&1])
        .create_topics(
            vec![
                manual("single", vec![vec![1], vec![2], vec![3]]),
                manual("triple", vec![vec![2, 1, 3], vec![1, 2, 3]]),
            ],
            false,
        )
        .await;
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    let image = nodes[&1].image();
    // Every usable replica starts in the ISR (Kafka's createTopic).
    assert_eq!(leader_and_isr(&image, "triple", 0), (2, vec![2, 1, 3]));
    let epoch_before = image.topic("triple").unwrap().partitions[&0].leader_epoch;

    // Broker 2 stops heartbeating (its process died).
    let (epoch, task) = brokers.remove(&2).unwrap();
    task.abort();
    eventually(
        "broker 2 fenced, out of every ISR, its partitions moved or offline on every voter",
        || async {
            all_images(&nodes)
                .iter()
                .all(|i| {
                    i.brokers[&2].fenced
                    // Its only ISR member is gone: offline. A new cluster
                    // has ELR on (KIP-966): the ISR empties and the member
                    // is kept as an eligible leader, and as the last
                    // known leader.
                    && leader_and_isr(i, "single", 1) == (-1, vec![])
                    && elr(i, "single", 1) == (vec![2], vec![2])
                    // The next ISR member in assignment order takes over.
                    && leader_and_isr(i, "triple", 0) == (1, vec![1, 3])
                    && leader_and_isr(i, "triple", 1) == (1, vec![1, 3])
                })
                .then_some(())
        },
    )
    .await;
    let image = nodes[&3].image();
    // Partitions without broker 2 keep their leader and ISR.
    assert_eq!(leader_and_isr(&image, "single", 0), (1, vec![1]));
    assert_eq!(leader_and_isr(&image, "single", 2), (3, vec![3]));
    assert_eq!(image.unfenced_broker_ids(), vec![1, 3]);

    // Its heartbeats resume: unfenced, and leader again (cleanly, from the
    // ELR) where it was the ISR; it rejoins the other ISRs only through its leaders'
    // AlterPartition, so "triple" keeps leader 1.
    let back = heartbeats(nodes[&2].clone(), 2, epoch);
    eventually("broker 2 leader again on every voter", || async {
        all_images(&nodes)
            .iter()
            .all(|i| {
                !i.brokers[&2].fenced
                    && leader_and_isr(i, "single", 1) == (2, vec![2])
                    && elr(i, "single", 1) == (vec![], vec![])
                    && leader_and_isr(i, "triple", 0) == (1, vec![1, 3])
            })
            .then_some(())
    })
    .await;
    let epoch_after = nodes[&2].image().topic("triple").unwrap().partitions[&0].leader_epoch;
    assert_eq!(epoch_after, epoch_before + 1, "from 2 to 1 only");

    back.abort();
    for (_, task) in brokers.into_values() {
        task.abort();
    }
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_active_controller_fences_only_the_brokers_that_stop_heartbeating() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemoryRouter::new();
    let (nodes, brokers) = cluster_with_live_brokers(dir.path(), &router).await;
    let results = api(&nodes[&1])
        .create_topics(vec![manual("t", vec![vec![1], vec![2], vec![3]])], false)
        .await;
    assert!(results[0].is_ok(), "{results:?}");

    // Cut the active controller off: its co-located broker can no longer
    // reach the quorum, the other two heartbeat to the new active
    // controller, whose session clocks all start at its takeover. Had they
    // not started there (or had the others' heartbeats not counted), the
    // live brokers would be fenced together with the cut-off one.
    let old = eventually("an active controller", || async {
        nodes.iter().find(|(_, c)| c.is_active()).map(|(&id, _)| id)
    })
    .await;
    router.isolate(old);
    let rest: Vec<QuorumController> = nodes
        .iter()
        .filter(|(&id, _)| id != old)
        .map(|(_, c)| c.clone())
        .collect();
    let live: Vec<i32> = (1..=3).filter(|&id| id != old).collect();
    eventually(
        "the broker of the isolated voter fenced, the others live",
        || async {
            rest.iter()
                .all(|c| {
                    let i = c.image();
                    i.controller_id != Some(old)
                        && i.unfenced_broker_ids() == live
                        && leader_and_isr(&i, "t", old - 1) == (-1, vec![])
                        && elr(&i, "t", old - 1) == (vec![old], vec![old])
                })
                .then_some(())
        },
    )
    .await;
    router.heal(old);
    for (_, task) in brokers.into_values() {
        task.abort();
    }
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}

/// Fencing a broker writes a partition change for every ISR it is in: on
/// 3 brokers with 200,000 partitions of RF=3 about 21 MB, more than one
/// AppendEntries frame carries (16 MiB). In one batch it could not be
/// replicated (before: the quorum lost its leader again and again; then:
/// the fence was refused as too large and the dead broker stayed
/// unfenced, leader of a third of its partitions). The controller writes
/// its own records in as many batches as it takes, the fence record last
/// (Kafka's `QuorumController.appendRecords` for a non-atomic result).
/// Here at a small scale: 3,000 partitions, batches of at most 64 KiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_in_more_isrs_than_one_batch_holds_is_fenced_in_several_batches() {
    const MAX_BATCH_BYTES: usize = 64 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let router = MemoryRouter::new();
    let options = QuorumOptions {
        max_batch_bytes: MAX_BATCH_BYTES,
        ..options()
    };
    let (nodes, mut brokers) = cluster_with_live_brokers_with(dir.path(), &router, options).await;
    // About 100 bytes of partition change each: over 4 batches' worth.
    for t in 0..3 {
        let topic = CreatableTopic {
            name: format!("t{t}"),
            num_partitions: 1_000,
            replication_factor: 3,
            assignments: vec![],
            configs: vec![],
        };
        let results = api(&nodes[&1]).create_topics(vec![topic], false).await;
        assert!(results[0].is_ok(), "{results:?}");
    }
    let offset_before = nodes[&1].image().last_applied_offset;

    let (_, task) = brokers.remove(&2).unwrap();
    task.abort();
    eventually(
        "broker 2 fenced and out of every ISR and leadership on every voter",
        || async {
            all_images(&nodes)
                .iter()
                .all(|i| {
                    i.brokers[&2].fenced
                        && i.topics
                            .values()
                            .flat_map(|t| t.partitions.values())
                            .all(|p| p.isr.len() == 2 && !p.isr.contains(&2) && p.leader != 2)
                })
                .then_some(())
        },
    )
    .await;
    let image = nodes[&1].image();
    assert_eq!(image.unfenced_broker_ids(), vec![1, 3]);
    assert!(
        image.last_applied_offset >= offset_before + 4,
        "in fewer batches than 4: offset {offset_before}, then {}",
        image.last_applied_offset
    );

    for (_, task) in brokers.into_values() {
        task.abort();
    }
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}
