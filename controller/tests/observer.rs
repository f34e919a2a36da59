//! A broker-only node (`process.roles=broker`) following a quorum of three
//! voters over the in-memory router: its [`MetadataObserver`] image
//! converges after topic creation and deletion, after a leader change and
//! after the voters compacted their log, and the commands it takes run on
//! the active controller (AlterPartition too, through the observer and
//! through a voter that is not active). Every wait polls observable state
//! with a deadline.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use support::{api, eventually, now_ms};
use weir_controller::{
    AlterPartitionData, AlterPartitionRequest, AlterPartitionResponse, AlterPartitionTopic,
    BrokerEndpoint, BrokerHeartbeat, BrokerRegistrationRequest, ControllerConfig, ControllerError,
    CreatableTopic, MemoryRouter, MetadataController, MetadataImage, MetadataObserver,
    PartitionRegistration, QuorumController, QuorumOptions, QuorumTransport, QuorumVoter, TopicRef,
};

const OBSERVER: i32 = 4;

fn options() -> QuorumOptions {
    support::quorum_options(Duration::from_secs(600))
}

fn voters() -> Vec<QuorumVoter> {
    (1..=3)
        .map(|id| QuorumVoter {
            id,
            host: "127.0.0.1".into(),
            port: 9000 + id as u16,
        })
        .collect()
}

fn config(root: &Path, id: i32) -> ControllerConfig {
    support::controller_config(root, id, "observer-test")
}

async fn start_three(
    root: &Path,
    router: &MemoryRouter,
    options: &QuorumOptions,
) -> BTreeMap<i32, QuorumController> {
    let start = |id: i32| {
        QuorumController::start_with(
            config(root, id),
            options.clone(),
            voters(),
            QuorumTransport::memory(router),
        )
    };
    let (a, b, c) = tokio::join!(start(1), start(2), start(3));
    BTreeMap::from([(1, a.unwrap()), (2, b.unwrap()), (3, c.unwrap())])
}

async fn start_observer(root: &Path, router: &MemoryRouter) -> MetadataController {
    MetadataObserver::start(
        config(root, OBSERVER),
        options(),
        voters(),
        vec![],
        QuorumTransport::memory(router),
    )
    .await
    .unwrap_or_else(|e| panic!("observer did not start: {e}"))
    .into()
}

/// Cuts `old_leader` off from the other voters (not from the observer),
/// waits for them to elect a new leader, creates `topic` through it and
/// waits for the observer to follow; returns the new leader and the voters
/// other than `old_leader`.
async fn depose(
    nodes: &BTreeMap<i32, QuorumController>,
    router: &MemoryRouter,
    old_leader: i32,
    observer: &MetadataController,
    topic_name: &str,
) -> (i32, BTreeMap<i32, QuorumController>) {
    for id in (1..=3).filter(|&id| id != old_leader) {
        router.cut_link(old_leader, id);
    }
    let rest: BTreeMap<i32, QuorumController> = nodes
        .iter()
        .filter(|(&id, _)| id != old_leader)
        .map(|(&id, c)| (id, c.clone()))
        .collect();
    let new_leader = eventually("a new leader among the other two", || async {
        rest.iter().find(|(_, c)| c.is_active()).map(|(&id, _)| id)
    })
    .await;
    let results = api(&rest[&new_leader])
        .create_topics(vec![topic(topic_name, 1)], false)
        .await;
    assert!(results[0].is_ok(), "{results:?}");
    converged(
        &rest,
        observer,
        "the observer to follow the new leader",
        |i| i.controller_id == Some(new_leader) && i.topic(topic_name).is_some(),
    )
    .await;
    (new_leader, rest)
}

fn topic(name: &str, replication_factor: i16) -> CreatableTopic {
    CreatableTopic {
        name: name.into(),
        num_partitions: 2,
        replication_factor,
        assignments: vec![],
        configs: vec![],
    }
}

fn endpoint(id: i32) -> Vec<BrokerEndpoint> {
    vec![BrokerEndpoint {
        name: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port: 9100 + id as u16,
        security_protocol: 0,
    }]
}

/// Registers and unfences broker `id` through `controller`.
async fn register(controller: &MetadataController, id: i32) {
    let epoch = controller
        .register_broker(BrokerRegistrationRequest {
            broker_id: id,
            incarnation_id: uuid::Uuid::new_v4(),
            endpoints: endpoint(id),
            rack: None,
            previous_broker_epoch: -1,
        })
        .await
        .unwrap();
    let reply = controller
        .broker_heartbeat(BrokerHeartbeat {
            broker_id: id,
            broker_epoch: epoch,
            metadata_offset: controller.image().last_applied_offset,
            want_shut_down: false,
        })
        .await
        .unwrap();
    assert!(!reply.is_fenced, "broker {id} still fenced");
}

/// The parts of an image every node must agree on.
fn content(image: &Arc<MetadataImage>) -> String {
    format!(
        "{:?} {:?} {:?} {}",
        image.topics, image.brokers, image.controller_id, image.last_applied_offset
    )
}

/// Waits until the observer's image equals every voter's and `check` holds
/// on it.
async fn converged(
    voters: &BTreeMap<i32, QuorumController>,
    observer: &MetadataController,
    what: &str,
    check: impl Fn(&MetadataImage) -> bool,
) {
    eventually(what, || async {
        let mine = observer.image();
        (check(&mine)
            && voters
                .values()
                .all(|v| content(&v.image()) == content(&mine)))
        .then_some(())
    })
    .await
}

async fn leader_of(voters: &BTreeMap<i32, QuorumController>) -> i32 {
    eventually("one active controller", || async {
        let active: Vec<i32> = voters
            .iter()
            .filter(|(_, c)| c.is_active())
            .map(|(&id, _)| id)
            .collect();
        match active[..] {
            [leader] => Some(leader),
            _ => None,
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observer_image_converges_after_topic_creation_and_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemoryRouter::new();
    let nodes = start_three(dir.path(), &router, &options()).await;
    let observer = start_observer(dir.path(), &router).await;
    assert!(!observer.is_active() && !observer.is_voter());

    // Brokers register through the observer (forwarded to the leader),
    // which then places replicas on the observer's broker too.
    for id in 1..=OBSERVER {
        register(&observer, id).await;
    }
    let results = observer.create_topics(vec![topic("all", 4)], false).await;
    assert!(results[0].is_ok(), "{results:?}");
    // The caller's own image shows the effect when the call returns.
    let image = observer.image();
    let all = image.topic("all").expect("topic on the observer");
    assert!(all
        .partitions
        .values()
        .all(|p| p.replicas.len() == 4 && p.replicas.contains(&OBSERVER)));
    converged(&nodes, &observer, "the observer to hold 'all'", |i| {
        i.topic("all").is_some()
    })
    .await;

    // A topic created on a voter reaches the observer.
    let results = api(&nodes[&1])
        .create_topics(vec![topic("on-voter", 1)], false)
        .await;
    assert!(results[0].is_ok(), "{results:?}");
    converged(&nodes, &observer, "the observer to see 'on-voter'", |i| {
        i.topic("on-voter").is_some()
    })
    .await;

    let deleted = observer
        .delete_topics(vec![TopicRef::Name("on-voter".into())])
        .await;
    assert!(deleted[0].is_ok(), "{deleted:?}");
    assert!(observer.image().topic("on-voter").is_none());
    converged(&nodes, &observer, "every node to drop 'on-voter'", |i| {
        i.topic("on-voter").is_none() && i.topic("all").is_some()
    })
    .await;

    // The active controller lists the observer, never as a voter.
    let quorum = observer.describe_quorum().await.unwrap();
    assert_eq!(
        quorum
            .voters
            .iter()
            .map(|v| v.replica_id)
            .collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert!(
        quorum.observers.iter().any(|o| o.replica_id == OBSERVER),
        "{quorum:?}"
    );

    observer.shutdown().await.unwrap();
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observer_image_converges_after_a_leader_change() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemoryRouter::new();
    let nodes = start_three(dir.path(), &router, &options()).await;
    let observer = start_observer(dir.path(), &router).await;
    register(&nodes[&1].clone().into(), 1).await;
    register(&observer, OBSERVER).await;
    let old_leader = leader_of(&nodes).await;
    converged(
        &nodes,
        &observer,
        "the observer to name the controller",
        |i| i.controller_id == Some(old_leader),
    )
    .await;

    // The observer fetches from the active controller; cut it off.
    router.isolate(old_leader);
    let rest: BTreeMap<i32, QuorumController> = nodes
        .iter()
        .filter(|(&id, _)| id != old_leader)
        .map(|(&id, c)| (id, c.clone()))
        .collect();
    let new_leader = leader_of(&rest).await;
    assert_ne!(new_leader, old_leader);
    // A command through the observer finds the new active controller.
    let results = observer
        .create_topics(vec![topic("after-change", 1)], false)
        .await;
    assert!(results[0].is_ok(), "{results:?}");
    converged(
        &rest,
        &observer,
        "the observer to follow the new leader",
        |i| i.controller_id == Some(new_leader) && i.topic("after-change").is_some(),
    )
    .await;

    router.heal(old_leader);
    let results = api(&nodes[&new_leader])
        .create_topics(vec![topic("after-heal", 1)], false)
        .await;
    assert!(results[0].is_ok(), "{results:?}");
    converged(&nodes, &observer, "every node after the heal", |i| {
        i.topic("after-heal").is_some()
    })
    .await;

    observer.shutdown().await.unwrap();
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observer_catches_up_from_voters_that_compacted_their_log() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemoryRouter::new();
    let compacting = QuorumOptions {
        snapshot_interval_entries: 5,
        log_entries_kept_after_snapshot: 0,
        ..options()
    };
    let nodes = start_three(dir.path(), &router, &compacting).await;
    register(&nodes[&1].clone().into(), 1).await;
    for i in 0..20 {
        let results = api(&nodes[&1])
            .create_topics(vec![topic(&format!("t{i}"), 1)], false)
            .await;
        assert!(results[0].is_ok(), "{results:?}");
    }
    // Every voter wrote a snapshot (its log before it is purged).
    eventually("every voter to write a metadata snapshot", || async {
        (1..=3)
            .all(|id| {
                config(dir.path(), id)
                    .metadata_dir
                    .join("metadata.snapshot")
                    .exists()
            })
            .then_some(())
    })
    .await;

    let observer = start_observer(dir.path(), &router).await;
    assert!(
        (0..20).all(|i| observer.image().topic(&format!("t{i}")).is_some()),
        "the observer started without every topic"
    );
    converged(
        &nodes,
        &observer,
        "the observer to equal the voters",
        |_| true,
    )
    .await;

    observer.shutdown().await.unwrap();
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observer_leaves_a_deposed_leader_that_still_answers_it() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemoryRouter::new();
    let nodes = start_three(dir.path(), &router, &options()).await;
    let observer = start_observer(dir.path(), &router).await;
    register(&nodes[&1].clone().into(), 1).await;
    let old_leader = leader_of(&nodes).await;
    converged(
        &nodes,
        &observer,
        "the observer to name the controller",
        |i| i.controller_id == Some(old_leader),
    )
    .await;

    // The old leader loses the other voters but not the observer, which
    // fetches from it: it still answers, with nothing new.
    depose(&nodes, &router, old_leader, &observer, "behind-its-back").await;

    for id in (1..=3).filter(|&id| id != old_leader) {
        router.heal_link(old_leader, id);
    }
    observer.shutdown().await.unwrap();
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}

/// An observer that ends up on a deposed leader whose image is older than
/// its own (it lost the current voters for a moment and rotated to it)
/// must not take that voter's word for who leads: the answer is behind
/// what it has, so it asks the others again. It stayed on the deposed
/// leader for as long as the partition lasted, polling it every 2 s and
/// never learning anything new (found in review).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observer_does_not_return_to_a_deposed_leader_behind_it() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemoryRouter::new();
    let nodes = start_three(dir.path(), &router, &options()).await;
    let observer = start_observer(dir.path(), &router).await;
    register(&nodes[&1].clone().into(), 1).await;
    let old_leader = leader_of(&nodes).await;
    let others: Vec<i32> = (1..=3).filter(|&id| id != old_leader).collect();
    let (new_leader, rest) = depose(&nodes, &router, old_leader, &observer, "first").await;

    // The observer loses the current voters and can reach only the deposed
    // leader, which is behind it.
    let cut_at = now_ms();
    for &id in &others {
        router.cut_link(OBSERVER, id);
    }
    // The deposed leader (which still believes it leads and lists the
    // observers fetching from it) sees the observer fetch from it.
    let deposed = &nodes[&old_leader];
    eventually("the observer to fetch from the deposed leader", || async {
        let quorum = api(deposed).describe_quorum().await.ok()?;
        quorum
            .observers
            .iter()
            .any(|o| o.replica_id == OBSERVER && o.last_fetch_timestamp_ms > cut_at)
            .then_some(())
    })
    .await;
    for &id in &others {
        router.heal_link(OBSERVER, id);
    }
    let results = api(&rest[&new_leader])
        .create_topics(vec![topic("second", 1)], false)
        .await;
    assert!(results[0].is_ok(), "{results:?}");
    converged(
        &rest,
        &observer,
        "the observer to come back to the new leader",
        |i| i.controller_id == Some(new_leader) && i.topic("second").is_some(),
    )
    .await;

    for &id in &others {
        router.heal_link(old_leader, id);
    }
    observer.shutdown().await.unwrap();
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}

/// An observer formatted for another cluster takes nothing from these
/// voters (Kafka's INCONSISTENT_CLUSTER_ID): it does not start. The
/// records it was sent were replayed whatever their cluster (found in
/// review). The voters now refuse its fetches for their route
/// (`transport::Route`); the observer's own check of each answer's cluster
/// id stays behind that, unreached here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_of_another_cluster_takes_nothing_from_the_voters() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemoryRouter::new();
    let nodes = start_three(dir.path(), &router, &options()).await;
    register(&nodes[&1].clone().into(), 1).await;
    let results = api(&nodes[&1])
        .create_topics(vec![topic("theirs", 1)], false)
        .await;
    assert!(results[0].is_ok(), "{results:?}");

    let started = MetadataObserver::start(
        support::controller_config(dir.path(), OBSERVER, "another-cluster"),
        QuorumOptions {
            startup_timeout: Duration::from_secs(2),
            ..options()
        },
        voters(),
        vec![],
        QuorumTransport::memory(&router),
    )
    .await;
    assert!(started.is_err(), "an observer of another cluster started");
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}

/// Leader `leader`'s AlterPartition for partition 0 of `topic_id` from the
/// registration `p`, proposing `isr` with each member's broker epoch in
/// `image`.
fn alter_request(
    image: &MetadataImage,
    topic_id: uuid::Uuid,
    p: &PartitionRegistration,
    isr: &[i32],
) -> AlterPartitionRequest {
    AlterPartitionRequest {
        broker_id: p.leader,
        broker_epoch: image.brokers[&p.leader].broker_epoch,
        topics: vec![AlterPartitionTopic {
            topic_id,
            partitions: vec![AlterPartitionData {
                partition_index: 0,
                leader_epoch: p.leader_epoch,
                new_isr_with_epochs: isr
                    .iter()
                    .map(|b| (*b, image.brokers[b].broker_epoch))
                    .collect(),
                leader_recovery_state: 0,
                partition_epoch: p.partition_epoch,
            }],
        }],
    }
}

/// The registration AlterPartition answered for its one partition.
fn altered(response: &AlterPartitionResponse) -> Result<PartitionRegistration, ControllerError> {
    response.topics[0].1[0].1.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_partition_through_a_follower_voter_and_an_observer_reaches_every_image() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemoryRouter::new();
    let nodes = start_three(dir.path(), &router, &options()).await;
    let observer = start_observer(dir.path(), &router).await;
    for id in 1..=OBSERVER {
        register(&observer, id).await;
    }
    let mut isr_topic = topic("isr", 3);
    isr_topic.num_partitions = 1;
    let created = observer.create_topics(vec![isr_topic], false).await;
    let topic_id = created[0].as_ref().unwrap().topic_id;
    let image = observer.image();
    let p = image.topic("isr").unwrap().partitions[&0].clone();
    // Every usable replica starts in the ISR (Kafka's createTopic).
    assert_eq!(p.isr, p.replicas);
    let (leader, second) = (p.replicas[0], p.replicas[1]);

    // A shrink through a voter that is not the active controller is
    // forwarded, and that voter's image has it when the call returns.
    let active = leader_of(&nodes).await;
    let follower = nodes.keys().copied().find(|&id| id != active).unwrap();
    let via_follower = api(&nodes[&follower]);
    let response = via_follower
        .alter_partition(alter_request(&image, topic_id, &p, &[leader, second]))
        .await
        .unwrap();
    let shrunk = altered(&response).unwrap();
    assert_eq!(shrunk.isr, vec![leader, second]);
    assert_eq!(shrunk.partition_epoch, p.partition_epoch + 1);
    assert_eq!(shrunk.leader_epoch, p.leader_epoch);
    assert_eq!(
        via_follower.image().topic("isr").unwrap().partitions[&0],
        shrunk
    );

    // An expansion through the observer, likewise.
    let response = observer
        .alter_partition(alter_request(&image, topic_id, &shrunk, &p.replicas))
        .await
        .unwrap();
    let expanded = altered(&response).unwrap();
    assert_eq!(expanded.isr, p.replicas);
    assert_eq!(expanded.partition_epoch, p.partition_epoch + 2);
    assert_eq!(
        observer.image().topic("isr").unwrap().partitions[&0],
        expanded
    );
    converged(
        &nodes,
        &observer,
        "every image to hold the expanded ISR",
        |i| i.topic("isr").unwrap().partitions[&0] == expanded,
    )
    .await;

    // A leader that missed the expansion is refused per partition; a stale
    // broker epoch fails the whole request; neither changes anything.
    let offset = observer.image().last_applied_offset;
    let stale = alter_request(&image, topic_id, &shrunk, &[leader]);
    let response = observer.alter_partition(stale.clone()).await.unwrap();
    assert!(matches!(
        altered(&response),
        Err(ControllerError::InvalidUpdateVersion { .. })
    ));
    let mut old_epoch = stale;
    old_epoch.broker_epoch -= 1;
    assert!(matches!(
        via_follower.alter_partition(old_epoch).await,
        Err(ControllerError::StaleBrokerEpoch { .. })
    ));
    assert_eq!(observer.image().last_applied_offset, offset);
    observer.shutdown().await.unwrap();
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}
