//! End-to-end tests of the running `QuorumController`: a one-voter quorum on
//! a temp directory, restarted from its own files.

use std::path::Path;

use weir_controller::{
    BrokerEndpoint, BrokerRegistrationRequest, ControllerConfig, ControllerError, CreatableTopic,
    MetadataController, MetadataImage, QuorumController, TopicRef, CLUSTER_METADATA_TOPIC_NAME,
    MAX_RECORDS_PER_USER_OP,
};

fn config(dir: &Path) -> ControllerConfig {
    ControllerConfig {
        node_id: 1,
        metadata_dir: dir.join("__cluster_metadata-0"),
        cluster_id: "test-cluster".into(),
    }
}

fn endpoint() -> Vec<BrokerEndpoint> {
    vec![BrokerEndpoint {
        name: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port: 9092,
        security_protocol: 0,
    }]
}

fn topic(name: &str, partitions: i32) -> CreatableTopic {
    CreatableTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: 1,
        assignments: vec![],
        configs: vec![("cleanup.policy".into(), "compact".into())],
    }
}

/// The image without fields that legitimately differ between runs of the
/// same log (the offset moves on with each new leader's blank entry).
fn content(image: &MetadataImage) -> MetadataImage {
    MetadataImage {
        last_applied_offset: 0,
        ..image.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_replays_to_the_same_image_and_never_reuses_producer_ids() {
    let dir = tempfile::tempdir().unwrap();
    let (before, first_block, epoch) = {
        let controller =
            MetadataController::from(QuorumController::start(config(dir.path())).await.unwrap());
        let image = controller.image();
        assert_eq!(image.controller_id, Some(1));
        assert_eq!(image.cluster_id, "test-cluster");

        let epoch = controller
            .register_broker(BrokerRegistrationRequest {
                broker_id: 1,
                incarnation_id: uuid::Uuid::new_v4(),
                endpoints: endpoint(),
                rack: None,
                previous_broker_epoch: -1,
            })
            .await
            .unwrap();
        let created = controller
            .create_topics(vec![topic("orders", 3), topic("events", 1)], false)
            .await;
        assert!(created.iter().all(Result::is_ok), "{created:?}");
        // The response is given after the batch is applied and published.
        let image = controller.image();
        let orders = image.topic("orders").unwrap();
        assert_eq!(orders.partitions.len(), 3);
        assert_eq!(orders.configs["cleanup.policy"], "compact");
        assert_eq!(orders.topic_id, created[0].as_ref().unwrap().topic_id);

        let first_block = controller.allocate_producer_ids(1, epoch).await.unwrap();
        assert_eq!(first_block, 0..1000);
        let before = controller.image();
        controller.shutdown().await.unwrap();
        (before, first_block, epoch)
    };

    let controller =
        MetadataController::from(QuorumController::start(config(dir.path())).await.unwrap());
    let after = controller.image();
    assert_eq!(content(&after), content(&before));
    assert!(after.last_applied_offset >= before.last_applied_offset);
    assert!(after.topic("orders").is_some() && after.topic("events").is_some());

    // The broker epoch survives the restart and the next block follows the first.
    let second_block = controller.allocate_producer_ids(1, epoch).await.unwrap();
    assert_eq!(second_block.start, first_block.end);

    // Existing data is not re-initialized: the topic still exists.
    let again = controller
        .create_topics(vec![topic("orders", 1)], false)
        .await;
    assert_eq!(
        again[0],
        Err(ControllerError::TopicAlreadyExists {
            name: "orders".into()
        })
    );
    controller.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_of_the_same_name_let_exactly_one_win() {
    let dir = tempfile::tempdir().unwrap();
    let controller =
        MetadataController::from(QuorumController::start(config(dir.path())).await.unwrap());
    controller
        .register_broker(BrokerRegistrationRequest {
            broker_id: 1,
            incarnation_id: uuid::Uuid::new_v4(),
            endpoints: endpoint(),
            rack: None,
            previous_broker_epoch: -1,
        })
        .await
        .unwrap();

    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let c = controller.clone();
            tokio::spawn(async move { c.create_topics(vec![topic("race", 2)], false).await })
        })
        .collect();
    let mut wins = Vec::new();
    let mut losses = 0;
    for task in tasks {
        match task.await.unwrap().remove(0) {
            Ok(created) => wins.push(created),
            Err(ControllerError::TopicAlreadyExists { name }) => {
                assert_eq!(name, "race");
                losses += 1;
            }
            Err(other) => panic!("unexpected error {other}"),
        }
    }
    assert_eq!(wins.len(), 1);
    assert_eq!(losses, 7);
    assert_eq!(
        controller.image().topic("race").unwrap().topic_id,
        wins[0].topic_id
    );
    controller.shutdown().await.unwrap();
}

#[tokio::test]
async fn commands_report_errors_and_validate_only_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let controller =
        MetadataController::from(QuorumController::start(config(dir.path())).await.unwrap());
    // No broker registered yet: nothing to place replicas on.
    let r = controller.create_topics(vec![topic("t", 1)], false).await;
    assert_eq!(
        r[0],
        Err(ControllerError::InvalidReplicationFactor {
            requested: 1,
            available: 0
        })
    );
    controller
        .register_broker(BrokerRegistrationRequest {
            broker_id: 1,
            incarnation_id: uuid::Uuid::new_v4(),
            endpoints: endpoint(),
            rack: Some("rack-a".into()),
            previous_broker_epoch: -1,
        })
        .await
        .unwrap();
    let offset = controller.image().last_applied_offset;
    let r = controller.create_topics(vec![topic("t", 1)], true).await;
    assert!(r[0].is_ok());
    assert!(controller.image().topic("t").is_none());
    assert_eq!(controller.image().last_applied_offset, offset);

    controller.create_topics(vec![topic("t", 1)], false).await[0]
        .as_ref()
        .unwrap();
    controller
        .alter_topic_configs("t", vec![("cleanup.policy".into(), None)])
        .await
        .unwrap();
    assert!(controller.image().topic("t").unwrap().configs.is_empty());

    let deleted = controller
        .delete_topics(vec![TopicRef::Name("t".into()), TopicRef::Name("x".into())])
        .await;
    assert_eq!(deleted[0].as_ref().unwrap().0, "t");
    assert_eq!(
        deleted[1],
        Err(ControllerError::UnknownTopic { name: "x".into() })
    );
    assert!(controller.image().topics.is_empty());

    controller.shutdown().await.unwrap();
    let after = controller
        .create_topics(vec![topic("late", 1)], false)
        .await;
    assert!(matches!(
        after[0],
        Err(ControllerError::Raft { .. } | ControllerError::NotController { .. })
    ));
}

#[tokio::test]
async fn negative_node_id_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.node_id = -1;
    assert_eq!(
        QuorumController::start(cfg).await.unwrap_err(),
        ControllerError::InvalidNodeId { node_id: -1 }
    );
}

#[tokio::test]
async fn oversized_requests_are_refused_whole_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let controller =
        MetadataController::from(QuorumController::start(config(dir.path())).await.unwrap());
    controller
        .register_broker(BrokerRegistrationRequest {
            broker_id: 1,
            incarnation_id: uuid::Uuid::new_v4(),
            endpoints: endpoint(),
            rack: None,
            previous_broker_epoch: -1,
        })
        .await
        .unwrap();
    let offset = controller.image().last_applied_offset;
    for validate_only in [true, false] {
        // Before the bound this aborted the process (one replica list per
        // partition, tens of GB).
        let r = controller
            .create_topics(
                vec![topic("small", 1), topic("huge", i32::MAX)],
                validate_only,
            )
            .await;
        assert_eq!(r.len(), 2);
        assert!(
            r.iter()
                .all(|r| matches!(r, Err(ControllerError::PolicyViolation { .. }))),
            "{r:?}"
        );
        // 1 TopicRecord + MAX partitions + 1 ConfigRecord is over the bound too.
        let r = controller
            .create_topics(
                vec![topic("big", MAX_RECORDS_PER_USER_OP as i32)],
                validate_only,
            )
            .await;
        assert!(matches!(r[0], Err(ControllerError::PolicyViolation { .. })));
    }
    let image = controller.image();
    assert!(image.topics.is_empty());
    assert_eq!(image.last_applied_offset, offset);
    controller.shutdown().await.unwrap();
}

#[tokio::test]
async fn cluster_metadata_topic_and_duplicates_are_invalid_requests() {
    let dir = tempfile::tempdir().unwrap();
    let controller =
        MetadataController::from(QuorumController::start(config(dir.path())).await.unwrap());
    controller
        .register_broker(BrokerRegistrationRequest {
            broker_id: 1,
            incarnation_id: uuid::Uuid::new_v4(),
            endpoints: endpoint(),
            rack: None,
            previous_broker_epoch: -1,
        })
        .await
        .unwrap();
    let r = controller
        .create_topics(
            vec![
                topic(CLUSTER_METADATA_TOPIC_NAME, 1),
                topic("dup", 1),
                topic("kept", 1),
                topic("dup", 2),
            ],
            false,
        )
        .await;
    for i in [0, 1, 3] {
        assert!(
            matches!(r[i], Err(ControllerError::InvalidRequest { .. })),
            "{i}: {:?}",
            r[i]
        );
    }
    assert!(r[2].is_ok());
    let image = controller.image();
    assert_eq!(image.topics.keys().collect::<Vec<_>>(), vec!["kept"]);

    let deleted = controller
        .delete_topics(vec![
            TopicRef::Name("kept".into()),
            TopicRef::Name("kept".into()),
            TopicRef::Name(CLUSTER_METADATA_TOPIC_NAME.into()),
        ])
        .await;
    assert!(
        deleted
            .iter()
            .all(|r| matches!(r, Err(ControllerError::InvalidRequest { .. }))),
        "{deleted:?}"
    );
    assert!(controller.image().topic("kept").is_some());
    controller.shutdown().await.unwrap();
}
