//! Unit tests of the pure controller logic.

use std::collections::BTreeMap;

use super::*;
use crate::error::ControllerError;
use crate::image::{MetadataImage, PartitionRegistration};
use crate::placement::StripedReplicaPlacer;
use crate::records::{
    ConfigRecord, ConfigResourceType, FenceBrokerRecord, LeaderRecoveryState, MetadataRecord,
    PartitionChangeRecord, PartitionRecord, TopicRecord, UnfenceBrokerRecord,
    ELIGIBLE_LEADER_REPLICAS_VERSION,
};

/// An image of `n` registered, unfenced brokers, with ELR off (metadata
/// written before KIP-966: the rules most tests here pin down); see
/// [`with_elr`].
fn image_with_brokers(n: i32) -> MetadataImage {
    let mut image = MetadataImage::new("c");
    for id in 0..n {
        let r = register(&image, id, None, false);
        for rec in &r.records {
            image.apply(rec).unwrap();
        }
        image.last_applied_offset += 1;
    }
    image.features.remove(ELIGIBLE_LEADER_REPLICAS_VERSION);
    image
}

/// `image` with Eligible Leader Replicas (KIP-966) on, as in a cluster
/// created by this version.
fn with_elr(mut image: MetadataImage) -> MetadataImage {
    image
        .features
        .insert(ELIGIBLE_LEADER_REPLICAS_VERSION.to_string(), 1);
    image
}

fn replay(image: &mut MetadataImage, records: &[MetadataRecord]) {
    for r in records {
        image.apply(r).unwrap();
    }
}

/// The static config the tests decide with: Kafka's defaults.
const CONFIG: StaticConfig = StaticConfig {
    min_insync_replicas: 1,
};

/// A registration of broker `id` (a new incarnation, no clean shutdown
/// recorded).
fn register(
    image: &MetadataImage,
    id: i32,
    rack: Option<String>,
    fenced: bool,
) -> ControllerResult<i64> {
    let request = BrokerRegistrationRequest {
        broker_id: id,
        incarnation_id: uuid::Uuid::new_v4(),
        endpoints: vec![],
        rack,
        previous_broker_epoch: -1,
    };
    register_broker(image, &CONFIG, request, fenced)
}

/// A heartbeat of broker `id` answered by a controller that has seen every
/// active broker at the latest offset.
fn heartbeat(
    image: &MetadataImage,
    id: i32,
    epoch: i64,
    metadata_offset: u64,
    want_shut_down: bool,
) -> Result<ControllerResult<HeartbeatReply>, ControllerError> {
    let heartbeat = BrokerHeartbeat {
        broker_id: id,
        broker_epoch: epoch,
        metadata_offset,
        want_shut_down,
    };
    let progress = HeartbeatProgress {
        controlled_shutdown_offset: None,
        lowest_active_offset: u64::MAX,
    };
    broker_heartbeat(image, &CONFIG, &heartbeat, &progress)
}

fn topic(name: &str, partitions: i32, rf: i16) -> CreatableTopic {
    CreatableTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: rf,
        assignments: vec![],
        configs: vec![],
    }
}

#[test]
fn topic_name_rules_follow_kafka() {
    for ok in ["a", "orders.v1", "A_b-9", &"x".repeat(249)] {
        assert_eq!(validate_topic_name(ok), Ok(()), "{ok}");
    }
    for bad in [
        "",
        ".",
        "..",
        "has space",
        "ümlaut",
        "a/b",
        &"x".repeat(250),
    ] {
        assert!(
            matches!(
                validate_topic_name(bad),
                Err(ControllerError::InvalidTopic { .. })
            ),
            "{bad}"
        );
    }
}

#[test]
fn create_topics_produces_records_that_replay_to_the_topic() {
    let mut image = image_with_brokers(3);
    let mut t = topic("orders", 3, 2);
    t.configs = vec![("retention.ms".into(), "60000".into())];
    let placer = StripedReplicaPlacer::with_start_index(0);
    let result = create_topics(&image, &[t], false, &placer);
    let created = result.response[0].clone().unwrap();
    assert_eq!(created.num_partitions, 3);
    assert_eq!(created.replication_factor, 2);
    assert_eq!(result.records.len(), 1 + 3 + 1);
    replay(&mut image, &result.records);
    let orders = image.topic("orders").unwrap();
    assert_eq!(orders.topic_id, created.topic_id);
    assert_eq!(orders.partitions.len(), 3);
    for p in orders.partitions.values() {
        assert_eq!(p.replicas.len(), 2);
        assert_eq!(p.isr, p.replicas, "every usable replica is in the ISR");
        assert_eq!(p.leader, p.replicas[0]);
        assert_eq!((p.leader_epoch, p.partition_epoch), (0, 0));
    }
    assert_eq!(orders.configs["retention.ms"], "60000");
}

#[test]
fn create_topics_validates_each_topic_in_request_order() {
    let mut image = image_with_brokers(2);
    let placer = StripedReplicaPlacer::default();
    let existing = create_topics(&image, &[topic("existing.one", 1, 1)], false, &placer);
    replay(&mut image, &existing.records);

    let request = vec![
        topic("dup", 1, 1),
        topic("bad name", 1, 1),
        topic("existing.one", 1, 1),
        topic("zero", 0, 1),
        topic("negative", -1, 1),
        topic("rf-too-big", 1, 3),
        topic("rf-zero", 1, 0),
        topic("dup", 2, 1),
        topic("go.od", 4, 2),
        topic("existing_one", 1, 1),
        topic("go_od", 1, 1),
    ];
    let result = create_topics(&image, &request, false, &placer);
    let r = &result.response;
    assert_eq!(r.len(), request.len());
    assert!(matches!(r[0], Err(ControllerError::InvalidRequest { .. })));
    assert!(matches!(r[1], Err(ControllerError::InvalidTopic { .. })));
    assert_eq!(
        r[2],
        Err(ControllerError::TopicAlreadyExists {
            name: "existing.one".into()
        })
    );
    assert_eq!(
        r[3],
        Err(ControllerError::InvalidPartitions {
            name: "zero".into(),
            requested: 0
        })
    );
    assert!(matches!(
        r[4],
        Err(ControllerError::InvalidPartitions { requested: -1, .. })
    ));
    assert_eq!(
        r[5],
        Err(ControllerError::InvalidReplicationFactor {
            requested: 3,
            available: 2
        })
    );
    assert!(matches!(
        r[6],
        Err(ControllerError::InvalidReplicationFactor { requested: 0, .. })
    ));
    assert!(matches!(r[7], Err(ControllerError::InvalidRequest { .. })));
    assert!(r[8].is_ok());
    assert!(matches!(r[9], Err(ControllerError::InvalidTopic { .. })));
    assert!(
        matches!(r[10], Err(ControllerError::InvalidTopic { .. })),
        "go_od collides with go.od created earlier in the same request"
    );
    // Only "go.od" produced records: 1 TopicRecord + 4 PartitionRecords.
    assert_eq!(result.records.len(), 5);
    replay(&mut image, &result.records);
    assert!(image.topic("go.od").is_some());
    assert!(image.topic("dup").is_none());
}

#[test]
fn validate_only_answers_but_writes_nothing() {
    let image = image_with_brokers(1);
    let placer = StripedReplicaPlacer::default();
    let result = create_topics(
        &image,
        &[topic("t", 2, 1), topic("t2", 1, 5)],
        true,
        &placer,
    );
    assert!(result.records.is_empty());
    assert_eq!(result.response[0].as_ref().unwrap().num_partitions, 2);
    assert!(matches!(
        result.response[1],
        Err(ControllerError::InvalidReplicationFactor { .. })
    ));
}

#[test]
fn manual_assignments_are_checked() {
    let image = image_with_brokers(3);
    let placer = StripedReplicaPlacer::default();
    let with = |assignments: Vec<(i32, Vec<i32>)>| CreatableTopic {
        name: "m".into(),
        num_partitions: -1,
        replication_factor: -1,
        assignments,
        configs: vec![],
    };
    let ok = create_topics(
        &image,
        &[with(vec![(1, vec![2, 0]), (0, vec![1, 2])])],
        false,
        &placer,
    );
    let created = ok.response[0].clone().unwrap();
    assert_eq!((created.num_partitions, created.replication_factor), (2, 2));
    let mut replayed = image.clone();
    replay(&mut replayed, &ok.records);
    assert_eq!(
        replayed.topic("m").unwrap().partitions[&1].replicas,
        vec![2, 0]
    );

    for bad in [
        vec![(0, vec![0]), (2, vec![1])],
        vec![(0, vec![0]), (0, vec![1])],
        vec![(0, vec![0, 1]), (1, vec![1])],
        vec![(0, vec![0, 0])],
        vec![(0, vec![7])],
        vec![(0, vec![])],
        vec![(-1, vec![0])],
    ] {
        let r = create_topics(&image, &[with(bad.clone())], false, &placer);
        assert!(
            matches!(
                r.response[0],
                Err(ControllerError::InvalidReplicaAssignment { .. })
            ),
            "{bad:?} gave {:?}",
            r.response[0]
        );
        assert!(r.records.is_empty());
    }
    let mut mixed = with(vec![(0, vec![0])]);
    mixed.num_partitions = 1;
    let r = create_topics(&image, &[mixed], false, &placer);
    assert!(matches!(
        r.response[0],
        Err(ControllerError::InvalidRequest { .. })
    ));
}

#[test]
fn delete_topics_by_name_and_id() {
    let mut image = image_with_brokers(1);
    let placer = StripedReplicaPlacer::default();
    let created = create_topics(
        &image,
        &[topic("a", 1, 1), topic("b", 1, 1)],
        false,
        &placer,
    );
    replay(&mut image, &created.records);
    let b_id = image.topic("b").unwrap().topic_id;
    let unknown = uuid::Uuid::from_u128(1);
    let result = delete_topics(
        &image,
        &[
            TopicRef::Name("a".into()),
            TopicRef::Id(b_id),
            TopicRef::Name("nope".into()),
            TopicRef::Id(unknown),
        ],
    );
    assert_eq!(result.response[0].as_ref().unwrap().0, "a");
    assert_eq!(result.response[1], Ok(("b".to_string(), b_id)));
    assert_eq!(
        result.response[2],
        Err(ControllerError::UnknownTopic {
            name: "nope".into()
        })
    );
    assert_eq!(
        result.response[3],
        Err(ControllerError::UnknownTopicId { id: unknown })
    );
    replay(&mut image, &result.records);
    assert!(image.topics.is_empty());
    assert!(image.topic_names_by_id.is_empty());

    let dup = delete_topics(
        &image,
        &[TopicRef::Name("x".into()), TopicRef::Name("x".into())],
    );
    assert!(dup
        .response
        .iter()
        .all(|r| matches!(r, Err(ControllerError::InvalidRequest { .. }))));
}

fn is_policy_violation(r: &Result<CreatedTopic, ControllerError>) -> bool {
    matches!(r, Err(ControllerError::PolicyViolation { .. }))
}

#[test]
fn create_topics_over_the_record_cap_fail_every_topic_without_placing() {
    let image = image_with_brokers(2);
    let placer = StripedReplicaPlacer::default();
    for validate_only in [false, true] {
        // i32::MAX partitions would be one replica list per partition (tens
        // of GB): the request must be refused before placement.
        let request = vec![
            topic("small", 1, 1),
            topic("huge", i32::MAX, 1),
            topic("dup", 1, 1),
            topic("dup", 1, 1),
            topic(CLUSTER_METADATA_TOPIC_NAME, 1, 1),
            topic("bad name", 1, 1),
        ];
        let result = create_topics(&image, &request, validate_only, &placer);
        assert!(result.records.is_empty());
        assert_eq!(result.response.len(), request.len());
        assert!(
            result.response.iter().all(is_policy_violation),
            "{:?}",
            result.response
        );
    }
}

#[test]
fn record_cap_counts_topic_partition_and_config_records() {
    let image = image_with_brokers(1);
    let placer = StripedReplicaPlacer::default();
    let cap = MAX_RECORDS_PER_USER_OP as i32;
    // 1 TopicRecord + (cap - 1) PartitionRecords: exactly at the cap.
    let at_cap = create_topics(&image, &[topic("t", cap - 1, 1)], false, &placer);
    assert!(at_cap.response[0].is_ok());
    assert_eq!(at_cap.records.len(), MAX_RECORDS_PER_USER_OP);
    // One more partition is over it.
    let over = create_topics(&image, &[topic("t", cap, 1)], false, &placer);
    assert!(is_policy_violation(&over.response[0]));
    assert!(over.records.is_empty());
    // Config records count too.
    let mut with_configs = topic("t", cap - 2, 1);
    with_configs.configs = vec![("a".into(), "1".into()), ("b".into(), "2".into())];
    let over = create_topics(&image, &[with_configs], false, &placer);
    assert!(is_policy_violation(&over.response[0]));
    // The cap is on the whole request, not per topic.
    let half = cap / 2;
    let split = create_topics(
        &image,
        &[topic("a", half, 1), topic("b", half, 1)],
        true,
        &placer,
    );
    assert!(split.response.iter().all(is_policy_violation));
    // A topic that fails on its own generates no records (as in Kafka),
    // so it does not count: its own error is reported.
    let failing = create_topics(
        &image,
        &[topic("rf", i32::MAX, 2), topic("ok", 1, 1)],
        false,
        &placer,
    );
    assert!(matches!(
        failing.response[0],
        Err(ControllerError::InvalidReplicationFactor { requested: 2, .. })
    ));
    assert!(failing.response[1].is_ok());
    assert_eq!(failing.records.len(), 2);
}

#[test]
fn record_cap_applies_to_manual_assignments() {
    let image = image_with_brokers(1);
    let placer = StripedReplicaPlacer::default();
    let manual = CreatableTopic {
        name: "m".into(),
        num_partitions: -1,
        replication_factor: -1,
        assignments: (0..MAX_RECORDS_PER_USER_OP as i32)
            .map(|p| (p, vec![0]))
            .collect(),
        configs: vec![],
    };
    let result = create_topics(&image, &[manual], false, &placer);
    assert!(is_policy_violation(&result.response[0]));
    assert!(result.records.is_empty());
}

#[test]
fn cluster_metadata_topic_cannot_be_created() {
    let mut image = image_with_brokers(1);
    let placer = StripedReplicaPlacer::default();
    for validate_only in [true, false] {
        let result = create_topics(
            &image,
            &[topic(CLUSTER_METADATA_TOPIC_NAME, 1, 1), topic("ok", 1, 1)],
            validate_only,
            &placer,
        );
        assert!(
            matches!(
                &result.response[0],
                Err(ControllerError::InvalidRequest { reason })
                    if reason.contains("__cluster_metadata")
            ),
            "{:?}",
            result.response[0]
        );
        assert!(result.response[1].is_ok());
        if !validate_only {
            replay(&mut image, &result.records);
        }
    }
    assert!(image.topic(CLUSTER_METADATA_TOPIC_NAME).is_none());
    assert!(image.topic("ok").is_some());
}

#[test]
fn cluster_metadata_topic_cannot_be_deleted() {
    let mut image = image_with_brokers(1);
    // Only an old log could hold it; replay it directly.
    let id = uuid::Uuid::from_u128(7);
    image
        .apply(&MetadataRecord::Topic(TopicRecord {
            name: CLUSTER_METADATA_TOPIC_NAME.into(),
            topic_id: id,
        }))
        .unwrap();
    for request in [
        TopicRef::Name(CLUSTER_METADATA_TOPIC_NAME.into()),
        TopicRef::Id(id),
    ] {
        let result = delete_topics(&image, &[request]);
        assert!(
            matches!(
                result.response[0],
                Err(ControllerError::InvalidRequest { .. })
            ),
            "{:?}",
            result.response[0]
        );
        assert!(result.records.is_empty());
    }
}

#[test]
fn duplicate_names_in_create_topics_fail_every_occurrence_and_create_nothing() {
    let mut image = image_with_brokers(1);
    let placer = StripedReplicaPlacer::default();
    for validate_only in [true, false] {
        let result = create_topics(
            &image,
            &[
                topic("dup", 1, 1),
                topic("other", 1, 1),
                topic("dup", 2, 1),
                topic("dup", 3, 1),
            ],
            validate_only,
            &placer,
        );
        for i in [0, 2, 3] {
            assert!(
                matches!(
                    result.response[i],
                    Err(ControllerError::InvalidRequest { .. })
                ),
                "{i}: {:?}",
                result.response[i]
            );
        }
        assert!(result.response[1].is_ok());
        if !validate_only {
            // Only "other": 1 TopicRecord + 1 PartitionRecord.
            assert_eq!(result.records.len(), 2);
            replay(&mut image, &result.records);
        }
    }
    assert!(image.topic("dup").is_none());
    assert!(image.topic("other").is_some());
}

#[test]
fn duplicate_topics_in_delete_topics_fail_every_occurrence_and_delete_nothing() {
    let mut image = image_with_brokers(1);
    let placer = StripedReplicaPlacer::default();
    let created = create_topics(
        &image,
        &[topic("a", 1, 1), topic("b", 1, 1)],
        false,
        &placer,
    );
    replay(&mut image, &created.records);
    let b_id = image.topic("b").unwrap().topic_id;
    let result = delete_topics(
        &image,
        &[
            TopicRef::Name("a".into()),
            TopicRef::Id(b_id),
            TopicRef::Name("a".into()),
            TopicRef::Id(b_id),
        ],
    );
    assert!(
        result
            .response
            .iter()
            .all(|r| matches!(r, Err(ControllerError::InvalidRequest { .. }))),
        "{:?}",
        result.response
    );
    assert!(result.records.is_empty());
}

#[test]
fn delete_topics_over_the_record_cap_fail_every_topic() {
    let mut image = image_with_brokers(1);
    let placer = StripedReplicaPlacer::default();
    let names: Vec<String> = (0..=MAX_RECORDS_PER_USER_OP)
        .map(|i| format!("t{i}"))
        .collect();
    // Two topics per request stay far below the cap when creating.
    for chunk in names.chunks(MAX_RECORDS_PER_USER_OP / 2) {
        let request: Vec<_> = chunk.iter().map(|n| topic(n, 1, 1)).collect();
        let created = create_topics(&image, &request, false, &placer);
        assert!(created.response.iter().all(Result::is_ok));
        replay(&mut image, &created.records);
    }
    assert_eq!(image.topics.len(), MAX_RECORDS_PER_USER_OP + 1);
    let all: Vec<TopicRef> = names.iter().cloned().map(TopicRef::Name).collect();
    let result = delete_topics(&image, &all);
    assert!(result.records.is_empty());
    assert!(result
        .response
        .iter()
        .all(|r| matches!(r, Err(ControllerError::PolicyViolation { .. }))));
    // Exactly at the cap is allowed.
    let result = delete_topics(&image, &all[..MAX_RECORDS_PER_USER_OP]);
    assert_eq!(result.records.len(), MAX_RECORDS_PER_USER_OP);
    assert!(result.response.iter().all(Result::is_ok));
    // Unknown topics generate no records and do not count.
    let mut with_unknown = all[..MAX_RECORDS_PER_USER_OP].to_vec();
    with_unknown.push(TopicRef::Name("missing".into()));
    let result = delete_topics(&image, &with_unknown);
    assert_eq!(result.records.len(), MAX_RECORDS_PER_USER_OP);
    assert!(matches!(
        result.response.last(),
        Some(Err(ControllerError::UnknownTopic { .. }))
    ));
}

#[test]
fn validate_topic_name_is_exported_at_the_crate_root() {
    assert_eq!(crate::validate_topic_name("ok"), Ok(()));
}

#[test]
fn producer_id_blocks_advance_and_check_broker_epoch() {
    let mut image = image_with_brokers(1);
    let epoch = image.brokers[&0].broker_epoch;
    let first = allocate_producer_ids(&image, 0, epoch).unwrap();
    assert_eq!(first.response, 0..1000);
    replay(&mut image, &first.records);
    let second = allocate_producer_ids(&image, 0, epoch).unwrap();
    assert_eq!(second.response, 1000..2000);
    assert!(matches!(
        allocate_producer_ids(&image, 0, epoch + 1),
        Err(ControllerError::StaleBrokerEpoch { current: Some(e), .. }) if e == epoch
    ));
    assert!(matches!(
        allocate_producer_ids(&image, 5, 1),
        Err(ControllerError::StaleBrokerEpoch { current: None, .. })
    ));
    image.next_producer_id = i64::MAX - 10;
    assert!(matches!(
        allocate_producer_ids(&image, 0, epoch),
        Err(ControllerError::ProducerIdsExhausted { .. })
    ));
}

#[test]
fn broker_epochs_grow_with_each_registration() {
    let mut image = MetadataImage::new("c");
    let first = register(&image, 1, None, false);
    replay(&mut image, &first.records);
    image.last_applied_offset = 7;
    let second = register(&image, 1, Some("r1".into()), false);
    assert!(second.response > first.response);
    replay(&mut image, &second.records);
    assert_eq!(image.brokers[&1].broker_epoch, second.response);
    assert_eq!(image.brokers[&1].rack.as_deref(), Some("r1"));
    assert!(!image.brokers[&1].fenced);
}

#[test]
fn alter_topic_configs_sets_and_deletes() {
    let mut image = image_with_brokers(1);
    let placer = StripedReplicaPlacer::default();
    let created = create_topics(&image, &[topic("t", 1, 1)], false, &placer);
    replay(&mut image, &created.records);
    let set = alter_topic_configs(
        &image,
        "t",
        vec![
            ("a".into(), Some("1".into())),
            ("b".into(), Some("2".into())),
        ],
    )
    .unwrap();
    replay(&mut image, &set.records);
    let del = alter_topic_configs(&image, "t", vec![("a".into(), None)]).unwrap();
    replay(&mut image, &del.records);
    assert_eq!(
        image.topic("t").unwrap().configs,
        [("b".to_string(), "2".to_string())].into_iter().collect()
    );
    assert!(matches!(
        alter_topic_configs(&image, "missing", vec![]),
        Err(ControllerError::UnknownTopic { .. })
    ));
}

fn grow(name: &str, count: i32, assignments: Option<Vec<Vec<i32>>>) -> NewPartitions {
    NewPartitions {
        name: name.into(),
        count,
        assignments,
    }
}

fn created(image: &mut MetadataImage, topics: &[CreatableTopic]) {
    let placer = StripedReplicaPlacer::default();
    let result = create_topics(image, topics, false, &placer);
    assert!(result.response.iter().all(Result::is_ok), "{result:?}");
    replay(image, &result.records);
}

#[test]
fn create_partitions_adds_partitions_numbered_from_the_current_count() {
    let mut image = image_with_brokers(3);
    created(&mut image, &[topic("placed", 2, 2), topic("manual", 1, 2)]);
    let placer = StripedReplicaPlacer::default();
    let result = create_partitions(
        &image,
        &[
            grow("placed", 5, None),
            grow("manual", 3, Some(vec![vec![2, 0], vec![1, 2]])),
        ],
        false,
        &placer,
    );
    assert_eq!(result.response, vec![Ok(()), Ok(())]);
    assert_eq!(result.records.len(), 5);
    replay(&mut image, &result.records);
    let placed = image.topic("placed").unwrap();
    assert_eq!(
        placed.partitions.keys().copied().collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
    for p in placed.partitions.values() {
        assert_eq!(p.replicas.len(), 2, "{p:?}");
        assert_eq!(p.isr, p.replicas, "every usable replica is in the ISR");
        assert_eq!(p.leader, p.replicas[0]);
    }
    let manual = image.topic("manual").unwrap();
    assert_eq!(manual.partitions[&1].replicas, vec![2, 0]);
    assert_eq!(manual.partitions[&1].leader, 2);
    assert_eq!(manual.partitions[&2].replicas, vec![1, 2]);
    assert_eq!(manual.partitions[&2].leader_epoch, 0);
}

#[test]
fn create_partitions_errors_follow_kafka() {
    let mut image = image_with_brokers(2);
    created(&mut image, &[topic("t", 2, 2)]);
    let placer = StripedReplicaPlacer::default();
    let one = |request: NewPartitions| {
        let result = create_partitions(&image, &[request], false, &placer);
        assert!(result.records.is_empty());
        result.response.into_iter().next().unwrap().unwrap_err()
    };
    assert_eq!(
        one(grow("missing", 3, None)),
        ControllerError::UnknownTopic {
            name: "missing".into()
        }
    );
    assert_eq!(
        one(grow("t", 2, None)).to_string(),
        "Topic already has 2 partition(s)."
    );
    assert_eq!(
        one(grow("t", 1, None)).to_string(),
        "The topic t currently has 2 partition(s); 1 would not be an increase."
    );
    assert!(matches!(
        one(grow("t", -5, None)),
        ControllerError::PartitionCountNotIncreased { requested: -5, .. }
    ));
    let assignment_error = |assignments: Vec<Vec<i32>>| match one(grow("t", 3, Some(assignments))) {
        ControllerError::InvalidReplicaAssignment { reason } => reason,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        assignment_error(vec![]),
        "Attempted to add 1 additional partition(s), but only 0 assignment(s) were specified."
    );
    assert_eq!(
        assignment_error(vec![vec![0, 1], vec![1, 0]]),
        "Attempted to add 1 additional partition(s), but only 2 assignment(s) were specified."
    );
    assert_eq!(
        assignment_error(vec![vec![]]),
        "The manual partition assignment includes an empty replica list."
    );
    assert_eq!(
        assignment_error(vec![vec![0, 7]]),
        "The manual partition assignment includes broker 7, but no such broker is registered."
    );
    assert_eq!(
        assignment_error(vec![vec![1, 1]]),
        "The manual partition assignment includes the broker 1 more than once."
    );
    assert_eq!(
        assignment_error(vec![vec![1]]),
        "The manual partition assignment includes a partition with 1 replica(s), but this is \
         not consistent with previous partitions, which have 2 replica(s)."
    );
}

#[test]
fn create_partitions_duplicates_validate_only_and_internal_topics() {
    let mut image = image_with_brokers(1);
    created(
        &mut image,
        &[topic("t", 1, 1), topic("__consumer_offsets", 2, 1)],
    );
    let placer = StripedReplicaPlacer::default();
    let result = create_partitions(
        &image,
        &[
            grow("t", 2, None),
            grow("__consumer_offsets", 3, None),
            grow("t", 3, None),
        ],
        false,
        &placer,
    );
    assert!(matches!(
        &result.response[0],
        Err(ControllerError::InvalidRequest { reason }) if reason == "Duplicate topic name."
    ));
    assert_eq!(result.response[1], Ok(()));
    assert_eq!(result.response[0], result.response[2]);
    assert_eq!(result.records.len(), 1);

    let checked = create_partitions(&image, &[grow("t", 4, None)], true, &placer);
    assert_eq!(checked.response, vec![Ok(())]);
    assert!(checked.records.is_empty());
}

#[test]
fn create_partitions_over_the_record_cap_fail_every_topic_without_placing() {
    let mut image = image_with_brokers(1);
    created(&mut image, &[topic("a", 1, 1), topic("b", 1, 1)]);
    let placer = StripedReplicaPlacer::default();
    for validate_only in [false, true] {
        let result = create_partitions(
            &image,
            &[
                grow("a", 2, None),
                grow("b", i32::MAX, None),
                grow("missing", 2, None),
            ],
            validate_only,
            &placer,
        );
        assert!(result.records.is_empty());
        assert!(result
            .response
            .iter()
            .all(|r| matches!(r, Err(ControllerError::PolicyViolation { .. }))));
    }
    // Exactly at the cap is allowed.
    let cap = MAX_RECORDS_PER_USER_OP as i32;
    let result = create_partitions(&image, &[grow("a", cap + 1, None)], false, &placer);
    assert_eq!(result.response, vec![Ok(())]);
    assert_eq!(result.records.len(), MAX_RECORDS_PER_USER_OP);
}

#[test]
fn replace_topic_configs_sets_changed_keys_and_deletes_unlisted_ones() {
    let mut image = image_with_brokers(1);
    let mut t = topic("t", 1, 1);
    t.configs = vec![
        ("retention.ms".into(), "1000".into()),
        ("cleanup.policy".into(), "compact".into()),
    ];
    created(&mut image, &[t]);
    let wanted: BTreeMap<String, String> = [
        ("retention.ms".to_string(), "1000".to_string()),
        ("segment.ms".to_string(), "5000".to_string()),
    ]
    .into_iter()
    .collect();
    let result = replace_topic_configs(&image, "t", &wanted).unwrap();
    // segment.ms set, cleanup.policy deleted; retention.ms unchanged.
    assert_eq!(result.records.len(), 2);
    replay(&mut image, &result.records);
    assert_eq!(image.topic("t").unwrap().configs, wanted);
    let cleared = replace_topic_configs(&image, "t", &BTreeMap::new()).unwrap();
    replay(&mut image, &cleared.records);
    assert!(image.topic("t").unwrap().configs.is_empty());
    assert_eq!(
        replace_topic_configs(&image, "missing", &BTreeMap::new()),
        Err(ControllerError::UnknownTopic {
            name: "missing".into()
        })
    );
}

/// Image with brokers 0..n unfenced and topic `t` with one partition per
/// `(replicas, isr)`, leader = first ISR member.
fn image_with_partitions(n: i32, partitions: &[(Vec<i32>, Vec<i32>)]) -> MetadataImage {
    let mut image = image_with_brokers(n);
    let topic_id = uuid::Uuid::from_u128(42);
    let mut records = vec![MetadataRecord::Topic(TopicRecord {
        name: "t".into(),
        topic_id,
    })];
    for (i, (replicas, isr)) in partitions.iter().enumerate() {
        records.push(MetadataRecord::Partition(PartitionRecord {
            partition_id: i as i32,
            topic_id,
            replicas: replicas.clone(),
            isr: isr.clone(),
            leader: isr[0],
            leader_epoch: 0,
            partition_epoch: 0,
            leader_recovery_state: LeaderRecoveryState::Recovered,
            eligible_leader_replicas: vec![],
            last_known_elr: vec![],
        }));
    }
    replay(&mut image, &records);
    image
}

fn partition(image: &MetadataImage, index: i32) -> (i32, Vec<i32>, i32, i32) {
    let p = &image.topic("t").unwrap().partitions[&index];
    (p.leader, p.isr.clone(), p.leader_epoch, p.partition_epoch)
}

#[test]
fn a_fenced_registration_is_unfenced_by_a_caught_up_heartbeat_only() {
    let mut image = image_with_brokers(1);
    image.last_applied_offset = 10;
    let r = register(&image, 7, None, true);
    let epoch = r.response;
    assert_eq!(epoch, 11);
    replay(&mut image, &r.records);
    assert!(image.brokers[&7].fenced);
    assert_eq!(image.unfenced_broker_ids(), vec![0]);

    let behind = heartbeat(&image, 7, epoch, 10, false).unwrap();
    assert!(behind.records.is_empty(), "{behind:?}");
    assert!(behind.response.is_fenced);

    let caught_up = heartbeat(&image, 7, epoch, 11, false).unwrap();
    assert_eq!(
        caught_up.records,
        vec![MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
            id: 7,
            epoch
        })]
    );
    assert!(!caught_up.response.is_fenced);
    replay(&mut image, &caught_up.records);
    assert_eq!(image.unfenced_broker_ids(), vec![0, 7]);

    // An unfenced broker's heartbeat writes nothing.
    let steady = heartbeat(&image, 7, epoch, 11, false).unwrap();
    assert!(steady.records.is_empty());
    assert!(!steady.response.is_fenced);

    assert_eq!(
        heartbeat(&image, 7, epoch - 1, 11, false),
        Err(ControllerError::StaleBrokerEpoch {
            broker_id: 7,
            requested: epoch - 1,
            current: Some(epoch)
        })
    );
    assert!(matches!(
        heartbeat(&image, 8, 1, 11, false),
        Err(ControllerError::StaleBrokerEpoch { current: None, .. })
    ));
}

#[test]
fn fencing_a_leader_elects_the_next_live_isr_member_or_goes_offline() {
    let mut image = image_with_partitions(
        3,
        &[
            (vec![0, 1, 2], vec![0, 1, 2]),
            (vec![0, 1, 2], vec![0]),
            (vec![1, 0], vec![1, 0]),
            (vec![2], vec![2]),
        ],
    );
    let result = fence_brokers(&image, &CONFIG, &[0]);
    assert_eq!(result.response, vec![0]);
    // The ISR changes first, the fence last (Kafka's `handleBrokerFenced`):
    // split over several batches, a failover between them leaves the
    // broker to be fenced again.
    assert!(matches!(
        result.records.last(),
        Some(MetadataRecord::FenceBroker(FenceBrokerRecord { id: 0, .. }))
    ));
    assert_eq!(result.records.len(), 3 + 1, "{:?}", result.records);
    replay(&mut image, &result.records);
    // Leader moves to the next live ISR member; both epochs bump.
    assert_eq!(partition(&image, 0), (1, vec![1, 2], 1, 1));
    // No live ISR member: offline, the last ISR is kept.
    assert_eq!(partition(&image, 1), (-1, vec![0], 1, 1));
    // A follower leaves the ISR; the leader and its epoch stay.
    assert_eq!(partition(&image, 2), (1, vec![1], 0, 1));
    // Partitions without the broker are untouched.
    assert_eq!(partition(&image, 3), (2, vec![2], 0, 0));

    // Fencing again, or an unknown broker, writes nothing.
    let again = fence_brokers(&image, &CONFIG, &[0, 9]);
    assert!(again.records.is_empty() && again.response.is_empty());

    // The broker's return (a caught-up heartbeat) elects it where the
    // partition is offline with it in the ISR, and nowhere else.
    let epoch = image.brokers[&0].broker_epoch;
    let back = heartbeat(&image, 0, epoch, u64::MAX, false).unwrap();
    replay(&mut image, &back.records);
    assert_eq!(partition(&image, 1), (0, vec![0], 2, 2));
    assert_eq!(partition(&image, 0), (1, vec![1, 2], 1, 1));
    assert_eq!(partition(&image, 2), (1, vec![1], 0, 1));
}

#[test]
fn unclean_election_picks_a_live_replica_outside_the_isr_when_enabled() {
    let mut image = image_with_partitions(2, &[(vec![0, 1], vec![0])]);
    let before = fence_brokers(&image, &CONFIG, &[0]);
    let mut clean = image.clone();
    replay(&mut clean, &before.records);
    assert_eq!(partition(&clean, 0), (-1, vec![0], 1, 1));

    replay(
        &mut image,
        &[MetadataRecord::Config(ConfigRecord {
            resource_type: ConfigResourceType::Topic,
            resource_name: "t".into(),
            name: UNCLEAN_LEADER_ELECTION_ENABLE.into(),
            value: Some("true".into()),
        })],
    );
    let result = fence_brokers(&image, &CONFIG, &[0]);
    replay(&mut image, &result.records);
    assert_eq!(partition(&image, 0), (1, vec![1], 1, 1));
    assert_eq!(
        image.topic("t").unwrap().partitions[&0].leader_recovery_state,
        LeaderRecoveryState::Recovering
    );
}

#[test]
fn brokers_fenced_together_leave_isrs_one_at_a_time() {
    // Kafka fences one broker per event: of two ISR members fenced at
    // once, the later one stays as the ISR's only member, and only its
    // return brings the partition back (the earlier one may lack what
    // the later one acknowledged after it left).
    let mut image = image_with_partitions(3, &[(vec![0, 1, 2], vec![0, 1])]);
    let result = fence_brokers(&image, &CONFIG, &[0, 1]);
    assert_eq!(result.response, vec![0, 1]);
    replay(&mut image, &result.records);
    assert_eq!(partition(&image, 0), (-1, vec![1], 2, 2));

    let epoch = image.brokers[&0].broker_epoch;
    let first_back = heartbeat(&image, 0, epoch, u64::MAX, false).unwrap();
    replay(&mut image, &first_back.records);
    assert_eq!(
        partition(&image, 0),
        (-1, vec![1], 2, 2),
        "0 is not in the ISR"
    );

    let epoch = image.brokers[&1].broker_epoch;
    let last_back = heartbeat(&image, 1, epoch, u64::MAX, false).unwrap();
    replay(&mut image, &last_back.records);
    assert_eq!(partition(&image, 0), (1, vec![1], 3, 3));
}

#[test]
fn fencing_a_follower_only_shrinks_the_isrs_it_is_in() {
    // An ISR member that is already fenced (the last one, kept) is not
    // removed when another broker is fenced.
    let mut image = image_with_partitions(3, &[(vec![0, 1], vec![0]), (vec![1, 2], vec![1, 2])]);
    let first = fence_brokers(&image, &CONFIG, &[0]);
    replay(&mut image, &first.records);
    assert_eq!(partition(&image, 0), (-1, vec![0], 1, 1));
    let result = fence_brokers(&image, &CONFIG, &[2]);
    replay(&mut image, &result.records);
    assert_eq!(partition(&image, 0), (-1, vec![0], 1, 1));
    assert_eq!(partition(&image, 1), (1, vec![1], 0, 1));
    assert_eq!(result.records.len(), 2, "{:?}", result.records);
}

/// The controller may write a fence in several batches
/// (`quorum::Batching::Split`); a failover after any of them leaves a prefix
/// of the records in the log. The fence record comes last, so after any
/// prefix the broker is still unfenced, the next controller (its session
/// expired there too) fences it again, and the ISR changes it writes then
/// finish exactly what the whole fence would have done, epochs included.
/// With the fence record first, a prefix holding only it would leave the
/// broker fenced, and fencing again would write nothing: leaders on a
/// fenced broker for good.
#[test]
fn a_fence_cut_short_after_any_record_is_finished_by_fencing_again() {
    let image = image_with_partitions(
        3,
        &[
            (vec![0, 1, 2], vec![0, 1, 2]),
            (vec![0, 1, 2], vec![0]),
            (vec![1, 0], vec![1, 0]),
            (vec![2, 0, 1], vec![2, 0]),
            (vec![0, 2], vec![0, 2]),
            (vec![2], vec![2]),
        ],
    );
    let whole = fence_brokers(&image, &CONFIG, &[0]);
    let mut expected = image.clone();
    replay(&mut expected, &whole.records);
    let states =
        |image: &MetadataImage| -> Vec<_> { (0..6).map(|i| partition(image, i)).collect() };
    for cut in 0..whole.records.len() {
        let mut after_failover = image.clone();
        replay(&mut after_failover, &whole.records[..cut]);
        assert!(
            !after_failover.brokers[&0].fenced,
            "after {cut} records the broker is still unfenced"
        );
        let again = fence_brokers(&after_failover, &CONFIG, &[0]);
        assert_eq!(again.response, vec![0], "after {cut} records");
        replay(&mut after_failover, &again.records);
        assert!(after_failover.brokers[&0].fenced);
        assert_eq!(
            states(&after_failover),
            states(&expected),
            "fenced again after {cut} of {} records",
            whole.records.len()
        );
    }
}

/// Fencing a broker writes one PartitionChangeRecord per partition whose
/// ISR it is in. On 3 brokers with 100,000 partitions of RF=3 (issue 18's
/// scale) they encoded to 20.4 MiB, every unchanged field as an explicit
/// null: over what one AppendEntries frame carries, so they could never be
/// replicated as the one batch they were written in (the controller now
/// splits its own records over several batches when they do not fit).
/// Unchanged fields are left out now: 11 MiB, one batch.
#[test]
fn fencing_a_broker_in_the_isr_of_100000_partitions_fits_one_append_entries_frame() {
    let all = vec![0, 1, 2];
    let partitions = vec![(all.clone(), all); 100_000];
    let image = image_with_partitions(3, &partitions);
    let result = fence_brokers(&image, &CONFIG, &[0]);
    assert_eq!(result.records.len(), 100_001);
    let bytes = crate::observer::json_len(&crate::raft::MetadataBatch {
        records: result.records,
    });
    assert!(
        bytes <= crate::quorum::MAX_BATCH_BYTES,
        "{bytes} bytes, over {}",
        crate::quorum::MAX_BATCH_BYTES
    );
}

#[test]
fn new_partitions_start_with_every_usable_replica_in_the_isr() {
    // Kafka's createPartitions: ISR = the assigned replicas that are
    // registered and unfenced, leader = the first of them.
    let mut image = image_with_brokers(3);
    created(&mut image, &[topic("t", 1, 3)]);
    let p = &image.topic("t").unwrap().partitions[&0];
    assert_eq!(p.isr, p.replicas);
    let epoch = image.brokers[&0].broker_epoch;
    replay(
        &mut image,
        &[MetadataRecord::FenceBroker(FenceBrokerRecord {
            id: 0,
            epoch,
        })],
    );
    let placer = StripedReplicaPlacer::default();
    let result = create_partitions(
        &image,
        &[grow("t", 2, Some(vec![vec![0, 2, 1]]))],
        false,
        &placer,
    );
    assert_eq!(result.response, vec![Ok(())]);
    replay(&mut image, &result.records);
    let p = &image.topic("t").unwrap().partitions[&1];
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2, 1]));
}

/// Brokers 0..=3 registered (3 fenced), broker 5 never registered;
/// topic "t" (id 42) partition 0: replicas [0, 1, 2, 3, 5], ISR [0, 1],
/// leader 0, leader epoch 3, partition epoch 5.
fn alter_image() -> MetadataImage {
    let mut image = image_with_brokers(4);
    let epoch = image.brokers[&3].broker_epoch;
    let topic_id = uuid::Uuid::from_u128(42);
    replay(
        &mut image,
        &[
            MetadataRecord::FenceBroker(FenceBrokerRecord { id: 3, epoch }),
            MetadataRecord::Topic(TopicRecord {
                name: "t".into(),
                topic_id,
            }),
            MetadataRecord::Partition(PartitionRecord {
                partition_id: 0,
                topic_id,
                replicas: vec![0, 1, 2, 3, 5],
                isr: vec![0, 1],
                leader: 0,
                leader_epoch: 3,
                partition_epoch: 5,
                leader_recovery_state: LeaderRecoveryState::Recovered,
                eligible_leader_replicas: vec![],
                last_known_elr: vec![],
            }),
        ],
    );
    image
}

/// Leader 0's request for partition 0 of `alter_image` with ISR
/// `isr` (each with its current broker epoch, -1 if unregistered).
fn alter_request(image: &MetadataImage, isr: &[i32]) -> AlterPartitionRequest {
    let epoch = |b: i32| image.brokers.get(&b).map_or(-1, |r| r.broker_epoch);
    AlterPartitionRequest {
        broker_id: 0,
        broker_epoch: epoch(0),
        topics: vec![AlterPartitionTopic {
            topic_id: uuid::Uuid::from_u128(42),
            partitions: vec![AlterPartitionData {
                partition_index: 0,
                leader_epoch: 3,
                new_isr_with_epochs: isr.iter().map(|&b| (b, epoch(b))).collect(),
                leader_recovery_state: 0,
                partition_epoch: 5,
            }],
        }],
    }
}

/// The single partition result of an AlterPartition response.
fn only_result(
    result: &ControllerResult<Result<AlterPartitionResponse, ControllerError>>,
) -> Result<PartitionRegistration, ControllerError> {
    let response = result.response.as_ref().unwrap();
    assert_eq!(response.topics.len(), 1);
    assert_eq!(response.topics[0].1.len(), 1);
    response.topics[0].1[0].1.clone()
}

#[test]
fn alter_partition_validates_in_kafkas_order() {
    type Edit = fn(&mut AlterPartitionRequest);
    fn data(r: &mut AlterPartitionRequest) -> &mut AlterPartitionData {
        &mut r.topics[0].partitions[0]
    }
    // (rule, ISR asked for, edit of the request, expected error variant)
    let table: Vec<(&str, &[i32], Edit, &str)> = vec![
        (
            "unknown topic id",
            &[0, 1, 2],
            |r| r.topics[0].topic_id = uuid::Uuid::from_u128(7),
            "UnknownTopicId",
        ),
        (
            "zero topic id",
            &[0, 1, 2],
            |r| r.topics[0].topic_id = uuid::Uuid::nil(),
            "UnknownTopicId",
        ),
        (
            "unknown partition",
            &[0, 1, 2],
            |r| data(r).partition_index = 9,
            "UnknownPartition",
        ),
        (
            "newer leader epoch",
            &[0, 1, 2],
            |r| data(r).leader_epoch = 4,
            "EpochNewerThanController",
        ),
        (
            "newer partition epoch",
            &[0, 1, 2],
            |r| data(r).partition_epoch = 6,
            "EpochNewerThanController",
        ),
        (
            "newer partition epoch before older leader epoch",
            &[0, 1, 2],
            |r| {
                data(r).leader_epoch = 2;
                data(r).partition_epoch = 6;
            },
            "EpochNewerThanController",
        ),
        (
            "older leader epoch",
            &[0, 1, 2],
            |r| data(r).leader_epoch = 2,
            "FencedLeaderEpoch",
        ),
        (
            "older leader epoch before not the leader",
            &[0, 1, 2],
            |r| {
                data(r).leader_epoch = 2;
                r.broker_id = 1;
                r.broker_epoch = 2;
            },
            "FencedLeaderEpoch",
        ),
        (
            "not the leader",
            &[0, 1, 2],
            |r| {
                r.broker_id = 1;
                r.broker_epoch = 2;
            },
            "InvalidRequest",
        ),
        (
            "not the leader before older partition epoch",
            &[0, 1, 2],
            |r| {
                r.broker_id = 1;
                r.broker_epoch = 2;
                data(r).partition_epoch = 4;
            },
            "InvalidRequest",
        ),
        (
            "older partition epoch",
            &[0, 1, 2],
            |r| data(r).partition_epoch = 4,
            "InvalidUpdateVersion",
        ),
        (
            "replica outside the assignment",
            &[0, 1, 7],
            |_| {},
            "InvalidRequest",
        ),
        (
            "outside the assignment before ineligible",
            &[0, 3, 7],
            |_| {},
            "InvalidRequest",
        ),
        ("duplicate replica", &[0, 1, 1], |_| {}, "InvalidRequest"),
        ("negative replica id", &[0, -1], |_| {}, "InvalidRequest"),
        ("ISR without the leader", &[1, 2], |_| {}, "InvalidRequest"),
        ("empty ISR", &[], |_| {}, "InvalidRequest"),
        (
            "unknown leader recovery state",
            &[0, 1],
            |r| data(r).leader_recovery_state = 2,
            "InvalidRequest",
        ),
        (
            "recovering with more than the leader",
            &[0, 1],
            |r| data(r).leader_recovery_state = 1,
            "InvalidRequest",
        ),
        (
            "RECOVERED to RECOVERING",
            &[0],
            |r| data(r).leader_recovery_state = 1,
            "InvalidRequest",
        ),
        (
            "fenced replica (KIP-841)",
            &[0, 1, 3],
            |_| {},
            "IneligibleReplica",
        ),
        ("unregistered replica", &[0, 5], |_| {}, "IneligibleReplica"),
        (
            "stale broker epoch of a replica (KIP-903)",
            &[0, 1, 2],
            |r| data(r).new_isr_with_epochs[2].1 -= 1,
            "IneligibleReplica",
        ),
        (
            "ineligible before nothing else",
            &[0, 1, 3],
            |r| data(r).new_isr_with_epochs[2].1 = -1,
            "IneligibleReplica",
        ),
    ];
    let image = alter_image();
    for (rule, isr, edit, expected) in table {
        let mut request = alter_request(&image, isr);
        edit(&mut request);
        let result = alter_partition(&image, &CONFIG, &request);
        let outcome = only_result(&result);
        let variant = match &outcome {
            Err(e) => format!("{e:?}")
                .split([' ', '{'])
                .next()
                .unwrap_or("")
                .to_string(),
            Ok(p) => format!("accepted {p:?}"),
        };
        assert_eq!(variant, expected, "{rule}: {outcome:?}");
        assert!(result.records.is_empty(), "{rule}: {:?}", result.records);
    }
}

#[test]
fn alter_partition_names_the_first_ineligible_replica_and_why() {
    let image = alter_image();
    let mut request = alter_request(&image, &[0, 2, 3]);
    request.topics[0].partitions[0].new_isr_with_epochs[1].1 = 99;
    let outcome = only_result(&alter_partition(&image, &CONFIG, &request));
    let expected = image.brokers[&2].broker_epoch;
    assert_eq!(
        outcome,
        Err(ControllerError::IneligibleReplica {
            topic_id: uuid::Uuid::from_u128(42),
            partition: 0,
            broker_id: 2,
            reason: format!("broker epoch mismatch: requested=99 VS expected={expected}"),
        })
    );
}

#[test]
fn alter_partition_from_a_stale_broker_epoch_fails_the_whole_request() {
    let image = alter_image();
    let mut request = alter_request(&image, &[0, 1, 2]);
    request.broker_epoch -= 1;
    let result = alter_partition(&image, &CONFIG, &request);
    assert!(result.records.is_empty());
    assert!(matches!(
        result.response,
        Err(ControllerError::StaleBrokerEpoch { broker_id: 0, .. })
    ));
    request.broker_id = 5;
    let unregistered = alter_partition(&image, &CONFIG, &request).response;
    assert!(matches!(
        unregistered,
        Err(ControllerError::StaleBrokerEpoch { current: None, .. })
    ));
}

#[test]
fn alter_partition_expands_and_shrinks_the_isr_bumping_the_partition_epoch_only() {
    let mut image = alter_image();
    for (isr, partition_epoch) in [(vec![0, 1, 2], 6), (vec![0, 2], 7), (vec![0], 8)] {
        let mut request = alter_request(&image, &isr);
        request.topics[0].partitions[0].partition_epoch = partition_epoch - 1;
        let result = alter_partition(&image, &CONFIG, &request);
        assert_eq!(result.records.len(), 1, "{isr:?}");
        let answered = only_result(&result).unwrap();
        replay(&mut image, &result.records);
        let p = &image.topic("t").unwrap().partitions[&0];
        assert_eq!(&answered, p, "the answer is the replayed registration");
        // The leader and its epoch stay (metadata version 3.6+: no
        // leader epoch bump on a shrink).
        assert_eq!((p.leader, p.isr.clone(), p.leader_epoch), (0, isr, 3));
        assert_eq!(p.partition_epoch, partition_epoch);
    }
}

#[test]
fn alter_partition_that_changes_nothing_writes_nothing() {
    let image = alter_image();
    let result = alter_partition(&image, &CONFIG, &alter_request(&image, &[0, 1]));
    assert!(result.records.is_empty());
    assert_eq!(
        only_result(&result),
        Ok(image.topic("t").unwrap().partitions[&0].clone())
    );
    // Unchecked broker epochs (-1, AlterPartition before v3) are accepted.
    let mut request = alter_request(&image, &[0, 1, 2]);
    request.topics[0].partitions[0].new_isr_with_epochs[2].1 = -1;
    assert_eq!(alter_partition(&image, &CONFIG, &request).records.len(), 1);
}

#[test]
fn alter_partition_marks_a_recovering_leader_recovered() {
    let mut image = alter_image();
    replay(
        &mut image,
        &[MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 0,
            topic_id: uuid::Uuid::from_u128(42),
            isr: Some(vec![0]),
            leader: None,
            replicas: None,
            leader_recovery_state: Some(LeaderRecoveryState::Recovering),
            eligible_leader_replicas: None,
            last_known_elr: None,
        })],
    );
    let mut request = alter_request(&image, &[0]);
    request.topics[0].partitions[0].partition_epoch = 6;
    // Still recovering, alone: nothing changes.
    request.topics[0].partitions[0].leader_recovery_state = 1;
    assert!(alter_partition(&image, &CONFIG, &request)
        .records
        .is_empty());
    request.topics[0].partitions[0].leader_recovery_state = 0;
    let result = alter_partition(&image, &CONFIG, &request);
    replay(&mut image, &result.records);
    let p = &image.topic("t").unwrap().partitions[&0];
    assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovered);
    assert_eq!(p.partition_epoch, 7);
}

#[test]
fn alter_partition_named_twice_is_checked_against_the_first_change() {
    let image = alter_image();
    let mut request = alter_request(&image, &[0, 1, 2]);
    let again = request.topics[0].partitions[0].clone();
    request.topics[0].partitions.push(again);
    let result = alter_partition(&image, &CONFIG, &request);
    assert_eq!(result.records.len(), 1);
    let results = &result.response.as_ref().unwrap().topics[0].1;
    assert!(results[0].1.is_ok());
    assert!(matches!(
        results[1].1,
        Err(ControllerError::InvalidUpdateVersion {
            requested: 5,
            current: 6,
            ..
        })
    ));
}

#[test]
fn controlled_shutdown_moves_leadership_first_and_fences_once_every_active_broker_saw_it() {
    let mut image = image_with_partitions(3, &[(vec![0, 1], vec![0, 1]), (vec![2, 0], vec![2, 0])]);
    let epoch = image.brokers[&0].broker_epoch;
    // Leading a partition: controlled shutdown, still unfenced, out of
    // every ISR, its leadership moved.
    let entered = heartbeat(&image, 0, epoch, 0, true).unwrap();
    assert_eq!(
        entered.response,
        HeartbeatReply {
            is_fenced: false,
            in_controlled_shutdown: true,
            should_shut_down: false,
        }
    );
    // The leadership moves first, the record that enters controlled
    // shutdown last: split over several batches, a failover between them
    // leaves the broker out of it, and its next heartbeat asks again.
    assert!(
        matches!(
            entered.records.last(),
            Some(MetadataRecord::BrokerRegistrationChange(r)) if r.in_controlled_shutdown
        ),
        "{:?}",
        entered.records
    );
    // Only the first batch written (its leadership moved): its next
    // heartbeat finds no leadership left and shuts it down at once, out of
    // every ISR.
    let mut partly = image.clone();
    replay(&mut partly, &entered.records[..1]);
    let again = heartbeat(&partly, 0, epoch, 0, true).unwrap();
    assert!(again.response.should_shut_down, "{:?}", again.response);
    replay(&mut partly, &again.records);
    assert!(partly.brokers[&0].fenced);
    assert_eq!(partition(&partly, 0).1, vec![1]);
    assert_eq!(partly.topics["t"].partitions[&1].isr, vec![2]);
    replay(&mut image, &entered.records);
    assert!(image.brokers[&0].in_controlled_shutdown && !image.brokers[&0].fenced);
    assert_eq!(partition(&image, 0), (1, vec![1], 1, 1));
    assert_eq!(image.topics["t"].partitions[&1].isr, vec![2]);
    // Not an acceptable leader nor ISR member any more.
    assert!(!is_active(&image, 0));
    // Until the active brokers have applied the offset it entered at (10),
    // it waits, whatever it asks.
    let progress = |lowest_active_offset| HeartbeatProgress {
        controlled_shutdown_offset: Some(10),
        lowest_active_offset,
    };
    let beat = |want_shut_down| BrokerHeartbeat {
        broker_id: 0,
        broker_epoch: epoch,
        metadata_offset: 10,
        want_shut_down,
    };
    for want in [true, false] {
        let waiting = broker_heartbeat(&image, &CONFIG, &beat(want), &progress(9)).unwrap();
        assert!(waiting.records.is_empty());
        assert_eq!(
            waiting.response,
            HeartbeatReply {
                is_fenced: false,
                in_controlled_shutdown: true,
                should_shut_down: false,
            }
        );
    }
    let released = broker_heartbeat(&image, &CONFIG, &beat(true), &progress(10)).unwrap();
    assert!(released.response.should_shut_down && released.response.is_fenced);
    replay(&mut image, &released.records);
    assert!(image.brokers[&0].fenced);
}

#[test]
fn a_broker_without_leaderships_asking_to_shut_down_is_fenced_at_once() {
    let mut image = image_with_partitions(2, &[(vec![0, 1], vec![0, 1])]);
    let epoch = image.brokers[&1].broker_epoch;
    let result = heartbeat(&image, 1, epoch, 0, true).unwrap();
    assert_eq!(
        result.response,
        HeartbeatReply {
            is_fenced: true,
            in_controlled_shutdown: false,
            should_shut_down: true,
        }
    );
    replay(&mut image, &result.records);
    assert!(image.brokers[&1].fenced);
    assert_eq!(partition(&image, 0), (0, vec![0], 0, 1));
}

#[test]
fn re_registering_a_live_broker_fenced_moves_its_leadership_away() {
    let mut image = image_with_partitions(2, &[(vec![0, 1], vec![0, 1]), (vec![0], vec![0])]);
    let r = register(&image, 0, None, true);
    replay(&mut image, &r.records);
    assert!(image.brokers[&0].fenced);
    assert_eq!(partition(&image, 0), (1, vec![1], 1, 1));
    assert_eq!(partition(&image, 1), (-1, vec![0], 1, 1));
}

fn elect(
    image: &MetadataImage,
    election: ElectionType,
    partitions: &[(&str, &[i32])],
) -> ControllerResult<Vec<TopicElections>> {
    let partitions: Vec<(String, Vec<i32>)> = partitions
        .iter()
        .map(|(t, p)| (t.to_string(), p.to_vec()))
        .collect();
    elect_leaders_on_request(image, &CONFIG, election, Some(&partitions))
}

fn outcomes(result: &ControllerResult<Vec<TopicElections>>) -> Vec<(i32, ElectionOutcome)> {
    result
        .response
        .iter()
        .flat_map(|t| t.partitions.clone())
        .collect()
}

#[test]
fn election_type_from_wire() {
    assert_eq!(ElectionType::from_wire(0), Some(ElectionType::Preferred));
    assert_eq!(ElectionType::from_wire(1), Some(ElectionType::Unclean));
    assert_eq!(ElectionType::from_wire(2), None);
    assert_eq!(ElectionType::from_wire(-1), None);
}

#[test]
fn preferred_election_moves_leadership_to_the_first_replica() {
    // p0: preferred replica 0 follows in the ISR; p1: 0 already leads.
    let mut image = image_with_partitions(
        3,
        &[(vec![0, 1, 2], vec![1, 0, 2]), (vec![0, 1], vec![0, 1])],
    );
    assert_eq!(partition(&image, 0), (1, vec![1, 0, 2], 0, 0));
    let result = elect(&image, ElectionType::Preferred, &[("t", &[0, 1])]);
    assert_eq!(
        outcomes(&result),
        vec![
            (0, ElectionOutcome::Elected),
            (1, ElectionOutcome::NotNeeded)
        ]
    );
    assert_eq!(result.records.len(), 1, "{:?}", result.records);
    replay(&mut image, &result.records);
    // Leader and partition epochs bump; the ISR stays.
    assert_eq!(partition(&image, 0), (0, vec![1, 0, 2], 1, 1));
    assert_eq!(partition(&image, 1), (0, vec![0, 1], 0, 0));

    // Again: not needed, nothing written.
    let again = elect(&image, ElectionType::Preferred, &[("t", &[0])]);
    assert_eq!(outcomes(&again), vec![(0, ElectionOutcome::NotNeeded)]);
    assert!(again.records.is_empty());
}

#[test]
fn preferred_election_needs_the_first_replica_live_and_in_the_isr() {
    // p0: 0 is live but out of the ISR; p1: 0 is in the ISR but fenced.
    let mut image = image_with_partitions(3, &[(vec![0, 1], vec![1]), (vec![2, 1], vec![1, 2])]);
    let fenced = fence_brokers(&image, &CONFIG, &[2]);
    replay(&mut image, &fenced.records);
    assert_eq!(partition(&image, 1), (1, vec![1], 0, 1));
    let result = elect(&image, ElectionType::Preferred, &[("t", &[0, 1])]);
    assert_eq!(
        outcomes(&result),
        vec![
            (0, ElectionOutcome::PreferredLeaderNotAvailable),
            (1, ElectionOutcome::PreferredLeaderNotAvailable)
        ]
    );
    assert!(result.records.is_empty());
}

#[test]
fn unclean_election_elects_a_live_replica_outside_the_isr() {
    // p0: ISR [0] only; p1: has a leader; p2: every replica fenced.
    let mut image = image_with_partitions(
        3,
        &[
            (vec![0, 1, 2], vec![0]),
            (vec![1, 2], vec![1, 2]),
            (vec![0], vec![0]),
        ],
    );
    let fenced = fence_brokers(&image, &CONFIG, &[0]);
    replay(&mut image, &fenced.records);
    assert_eq!(partition(&image, 0), (-1, vec![0], 1, 1));
    assert_eq!(partition(&image, 2), (-1, vec![0], 1, 1));

    // A preferred election cannot help an offline partition whose ISR is dead.
    let preferred = elect(&image, ElectionType::Preferred, &[("t", &[0])]);
    assert_eq!(
        outcomes(&preferred),
        vec![(0, ElectionOutcome::PreferredLeaderNotAvailable)]
    );

    let result = elect(&image, ElectionType::Unclean, &[("t", &[0, 1, 2])]);
    assert_eq!(
        outcomes(&result),
        vec![
            (0, ElectionOutcome::Elected),
            (1, ElectionOutcome::NotNeeded),
            (2, ElectionOutcome::EligibleLeadersNotAvailable)
        ]
    );
    replay(&mut image, &result.records);
    // The first live replica leads; the ISR is just it; epochs bump;
    // the leader is recovering (KIP-704) until it says otherwise.
    assert_eq!(partition(&image, 0), (1, vec![1], 2, 2));
    assert_eq!(partition(&image, 2), (-1, vec![0], 1, 1));
    let t = image.topic("t").unwrap();
    assert_eq!(
        t.partitions[&0].leader_recovery_state,
        LeaderRecoveryState::Recovering
    );
    assert_eq!(
        t.partitions[&1].leader_recovery_state,
        LeaderRecoveryState::Recovered
    );
}

#[test]
fn unclean_election_prefers_a_live_isr_member() {
    // Offline with ISR [0, 2] after both were fenced; 2 comes back
    // unfenced without an election (as if the automatic one had not run).
    let mut image = image_with_partitions(3, &[(vec![1, 0, 2], vec![0, 2])]);
    replay(
        &mut image,
        &[MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 0,
            topic_id: uuid::Uuid::from_u128(42),
            isr: None,
            leader: Some(-1),
            replicas: None,
            leader_recovery_state: None,
            eligible_leader_replicas: None,
            last_known_elr: None,
        })],
    );
    let result = elect(&image, ElectionType::Unclean, &[("t", &[0])]);
    assert_eq!(outcomes(&result), vec![(0, ElectionOutcome::Elected)]);
    replay(&mut image, &result.records);
    assert_eq!(partition(&image, 0), (0, vec![0, 2], 2, 2));
}

#[test]
fn unknown_topics_and_partitions_are_reported_per_partition() {
    let image = image_with_partitions(1, &[(vec![0], vec![0])]);
    let result = elect(
        &image,
        ElectionType::Preferred,
        &[("t", &[0, 5, -1]), ("missing", &[0])],
    );
    assert_eq!(
        result.response,
        vec![
            TopicElections {
                topic: "t".into(),
                partitions: vec![
                    (0, ElectionOutcome::NotNeeded),
                    (5, ElectionOutcome::UnknownTopicOrPartition),
                    (-1, ElectionOutcome::UnknownTopicOrPartition)
                ]
            },
            TopicElections {
                topic: "missing".into(),
                partitions: vec![(0, ElectionOutcome::UnknownTopicOrPartition)]
            }
        ]
    );
    assert!(result.records.is_empty());
}

#[test]
fn all_partitions_leave_out_those_that_need_no_election() {
    let mut image = image_with_partitions(2, &[(vec![0, 1], vec![0, 1]), (vec![0, 1], vec![1, 0])]);
    replay(
        &mut image,
        &[MetadataRecord::Topic(TopicRecord {
            name: "u".into(),
            topic_id: uuid::Uuid::from_u128(43),
        })],
    );
    let result = elect_leaders_on_request(&image, &CONFIG, ElectionType::Preferred, None);
    assert_eq!(
        result.response,
        vec![
            TopicElections {
                topic: "t".into(),
                partitions: vec![(1, ElectionOutcome::Elected)]
            },
            TopicElections {
                topic: "u".into(),
                partitions: vec![]
            }
        ]
    );
    replay(&mut image, &result.records);
    assert_eq!(partition(&image, 1), (0, vec![1, 0], 1, 1));
}

#[test]
fn a_partition_named_twice_is_elected_once() {
    let image = image_with_partitions(2, &[(vec![0, 1], vec![1, 0])]);
    let result = elect(&image, ElectionType::Preferred, &[("t", &[0, 0])]);
    assert_eq!(
        outcomes(&result),
        vec![
            (0, ElectionOutcome::Elected),
            (0, ElectionOutcome::NotNeeded)
        ]
    );
    assert_eq!(result.records.len(), 1);
}

#[test]
fn rebalance_elects_available_preferred_replicas_up_to_the_limit() {
    let mut image = image_with_partitions(
        3,
        &[
            (vec![0, 1], vec![1, 0]),
            (vec![1, 0], vec![1, 0]),
            (vec![2, 0], vec![0, 2]),
            (vec![0, 2], vec![2]),
        ],
    );
    // Balanced partitions and ones whose preferred replica is out of
    // the ISR (p3) write nothing.
    let one = balance_partition_leaders(&image, &CONFIG, 1);
    assert_eq!(one.records.len(), 1);
    assert!(one.response, "stopped at the limit: run again");

    let all = balance_partition_leaders(&image, &CONFIG, MAX_ELECTIONS_PER_IMBALANCE);
    assert!(!all.response);
    assert_eq!(all.records.len(), 2, "{:?}", all.records);
    replay(&mut image, &all.records);
    assert_eq!(partition(&image, 0), (0, vec![1, 0], 1, 1));
    assert_eq!(partition(&image, 1), (1, vec![1, 0], 0, 0));
    assert_eq!(partition(&image, 2), (2, vec![0, 2], 1, 1));
    assert_eq!(partition(&image, 3), (2, vec![2], 0, 0));

    // A fenced preferred replica is not elected.
    let mut fenced = image_with_partitions(2, &[(vec![0, 1], vec![1, 0])]);
    let r = fence_brokers(&fenced, &CONFIG, &[0]);
    replay(&mut fenced, &r.records);
    let none = balance_partition_leaders(&fenced, &CONFIG, MAX_ELECTIONS_PER_IMBALANCE);
    assert!(none.records.is_empty() && !none.response);
}

/// One row of the ELR table: a partition, what the builder is asked, and
/// the record it must write (`None`: no change).
struct ElrCase {
    name: &'static str,
    isr: &'static [i32],
    elr: &'static [i32],
    last_known_elr: &'static [i32],
    leader: i32,
    /// Replicas that may lead.
    acceptable: &'static [i32],
    target_isr: Option<&'static [i32]>,
    unclean_shutdown: &'static [i32],
    election: Election,
    expect: Option<PartitionChangeRecord>,
}

/// The expected record for an [`ElrCase`]: partition 0 of topic 42.
fn change(f: impl FnOnce(&mut PartitionChangeRecord)) -> Option<PartitionChangeRecord> {
    let mut record = PartitionChangeRecord {
        topic_id: uuid::Uuid::from_u128(42),
        ..PartitionChangeRecord::default()
    };
    f(&mut record);
    Some(record)
}

/// Kafka 4.1's `PartitionChangeBuilderTest` ELR cases (replicas 1-4, min
/// ISR 3, ELR on, `useLastKnownLeaderInBalancedRecovery` as Kafka sets it),
/// one row each, plus the ELR-off rule that keeps the last ISR member.
#[test]
fn partition_change_builder_follows_kafkas_elr_rules() {
    use super::partition_change::{Election, PartitionChangeBuilder};
    let cases = [
        ElrCase {
            name: "lastKnownElrShouldBePopulatedWhenNoLeader",
            isr: &[1],
            elr: &[2],
            last_known_elr: &[],
            leader: 1,
            acceptable: &[],
            target_isr: None,
            unclean_shutdown: &[],
            election: Election::Preferred,
            expect: change(|r| {
                r.leader = Some(-1);
                r.last_known_elr = Some(vec![1]);
            }),
        },
        ElrCase {
            name: "IsrExpandAboveMinISR clears the ELR",
            isr: &[1, 2],
            elr: &[3],
            last_known_elr: &[4],
            leader: 1,
            acceptable: &[1, 2, 4],
            target_isr: Some(&[1, 2, 3]),
            unclean_shutdown: &[],
            election: Election::Preferred,
            expect: change(|r| {
                r.isr = Some(vec![1, 2, 3]);
                r.eligible_leader_replicas = Some(vec![]);
            }),
        },
        ElrCase {
            name: "IsrAddNewMemberNotInELR keeps the ELR",
            isr: &[1],
            elr: &[3],
            last_known_elr: &[2],
            leader: 1,
            acceptable: &[1, 2, 4],
            target_isr: Some(&[1, 4]),
            unclean_shutdown: &[],
            election: Election::Preferred,
            expect: change(|r| r.isr = Some(vec![1, 4])),
        },
        ElrCase {
            name: "RemoveUncleanShutdownReplicasFromElr",
            isr: &[1],
            elr: &[2, 3],
            last_known_elr: &[],
            leader: 1,
            acceptable: &[1, 2, 4],
            target_isr: None,
            unclean_shutdown: &[3],
            election: Election::Preferred,
            expect: change(|r| r.eligible_leader_replicas = Some(vec![2])),
        },
        ElrCase {
            name: "ElrCanBeElected: the ISR empties, an ELR member leads",
            isr: &[1],
            elr: &[3],
            last_known_elr: &[],
            leader: 1,
            acceptable: &[2, 3, 4],
            target_isr: Some(&[]),
            unclean_shutdown: &[],
            election: Election::Preferred,
            expect: change(|r| {
                r.isr = Some(vec![3]);
                r.eligible_leader_replicas = Some(vec![1]);
                r.leader = Some(3);
            }),
        },
        ElrCase {
            name: "IsrCanShrinkToZero: every member goes to the ELR",
            isr: &[1, 2, 3, 4],
            elr: &[],
            last_known_elr: &[],
            leader: 1,
            acceptable: &[],
            target_isr: Some(&[]),
            unclean_shutdown: &[],
            election: Election::Preferred,
            expect: change(|r| {
                r.isr = Some(vec![]);
                r.leader = Some(-1);
                r.eligible_leader_replicas = Some(vec![1, 2, 3, 4]);
                r.last_known_elr = Some(vec![1]);
            }),
        },
        ElrCase {
            name: "an unclean shutdown leaves the ELR but not the last known leader",
            isr: &[],
            elr: &[1, 2, 3, 4],
            last_known_elr: &[1],
            leader: -1,
            acceptable: &[],
            target_isr: None,
            unclean_shutdown: &[2],
            election: Election::Preferred,
            expect: change(|r| r.eligible_leader_replicas = Some(vec![1, 3, 4])),
        },
        ElrCase {
            name: "ElectLastKnownLeader: recovering, the ISR its leader alone",
            isr: &[],
            elr: &[],
            last_known_elr: &[1],
            leader: -1,
            acceptable: &[1, 2, 3, 4],
            target_isr: Some(&[]),
            unclean_shutdown: &[],
            election: Election::Preferred,
            expect: change(|r| {
                r.isr = Some(vec![1]);
                r.leader = Some(1);
                r.leader_recovery_state = Some(LeaderRecoveryState::Recovering);
                r.last_known_elr = Some(vec![]);
            }),
        },
        ElrCase {
            name: "ElectLastKnownLeaderShouldFail while the ELR has a member",
            isr: &[],
            elr: &[3],
            last_known_elr: &[1],
            leader: -1,
            acceptable: &[1, 2, 4],
            target_isr: Some(&[]),
            unclean_shutdown: &[],
            election: Election::Preferred,
            expect: None,
        },
        ElrCase {
            name: "NotEligibleLastKnownLeader (online)",
            isr: &[],
            elr: &[],
            last_known_elr: &[1],
            leader: -1,
            acceptable: &[],
            target_isr: Some(&[]),
            unclean_shutdown: &[],
            election: Election::Online,
            expect: None,
        },
        ElrCase {
            name: "NotEligibleLastKnownLeader (unclean)",
            isr: &[],
            elr: &[],
            last_known_elr: &[1],
            leader: -1,
            acceptable: &[],
            target_isr: Some(&[]),
            unclean_shutdown: &[],
            election: Election::Unclean,
            expect: None,
        },
    ];
    for case in cases {
        let p = PartitionRegistration {
            replicas: vec![1, 2, 3, 4],
            isr: case.isr.to_vec(),
            leader: case.leader,
            leader_epoch: 100,
            partition_epoch: 200,
            leader_recovery_state: LeaderRecoveryState::Recovered,
            elr: case.elr.to_vec(),
            last_known_elr: case.last_known_elr.to_vec(),
        };
        let acceptable = |r: i32| case.acceptable.contains(&r);
        let mut builder =
            PartitionChangeBuilder::new(&p, uuid::Uuid::from_u128(42), 0, &acceptable, 3)
                .elr_enabled(true)
                .election(case.election)
                .unclean_shutdown_replicas(case.unclean_shutdown.to_vec());
        if let Some(isr) = case.target_isr {
            builder = builder.target_isr(isr.to_vec());
        }
        assert_eq!(builder.build(), case.expect, "{}", case.name);
    }
    // ELR off: an empty target ISR keeps the ISR (its last member named).
    let p = PartitionRegistration {
        replicas: vec![1, 2],
        isr: vec![1],
        leader: 1,
        leader_epoch: 0,
        partition_epoch: 0,
        leader_recovery_state: LeaderRecoveryState::Recovered,
        elr: vec![],
        last_known_elr: vec![],
    };
    let none = |_: i32| false;
    let off = PartitionChangeBuilder::new(&p, uuid::Uuid::from_u128(42), 0, &none, 2)
        .target_isr(vec![])
        .build();
    assert_eq!(off, change(|r| r.leader = Some(-1)));
}

/// `(leader, isr, elr, last known elr)` of partition `index` of "t".
fn elr_state(image: &MetadataImage, index: i32) -> (i32, Vec<i32>, Vec<i32>, Vec<i32>) {
    let p = &image.topic("t").unwrap().partitions[&index];
    (
        p.leader,
        p.isr.clone(),
        p.elr.clone(),
        p.last_known_elr.clone(),
    )
}

/// `image` with "t"'s `min.insync.replicas` set to `value`.
fn with_min_isr(mut image: MetadataImage, value: &str) -> MetadataImage {
    let records = alter_topic_configs(
        &image,
        "t",
        vec![(MIN_INSYNC_REPLICAS.into(), Some(value.into()))],
    )
    .unwrap()
    .records;
    replay(&mut image, &records);
    image
}

/// Kafka's ELR scenario (KIP-966), on the pure controller: RF=3,
/// `min.insync.replicas=2`; two ISR members shut down cleanly one after the
/// other, then the leader is fenced (its process killed). The partition
/// keeps the clean member as an eligible leader, which leads again (a clean
/// election) once it is back, while the killed leader returning after an
/// unclean shutdown leaves the ELR.
#[test]
fn eligible_leader_replicas_keep_a_clean_replica_electable_after_the_isr_empties() {
    let image = with_elr(image_with_partitions(3, &[(vec![0, 1, 2], vec![0, 1, 2])]));
    let mut image = with_min_isr(image, "2");
    // Broker 1 shuts down cleanly: the ISR stays at the min ISR, no ELR.
    let epoch1 = image.brokers[&1].broker_epoch;
    let r = heartbeat(&image, 1, epoch1, 0, true).unwrap();
    assert!(r.response.should_shut_down);
    replay(&mut image, &r.records);
    assert_eq!(elr_state(&image, 0), (0, vec![0, 2], vec![], vec![]));
    // Broker 2 shuts down cleanly: below the min ISR, it joins the ELR.
    let epoch2 = image.brokers[&2].broker_epoch;
    let r = heartbeat(&image, 2, epoch2, 0, true).unwrap();
    replay(&mut image, &r.records);
    assert_eq!(elr_state(&image, 0), (0, vec![0], vec![2], vec![]));
    // The leader's session expires: the ISR empties, the leader is kept in
    // the ELR and as the last known leader; no unclean election.
    let r = fence_brokers(&image, &CONFIG, &[0]);
    replay(&mut image, &r.records);
    assert_eq!(elr_state(&image, 0), (-1, vec![], vec![0, 2], vec![0]));
    // Broker 2 restarts after its clean shutdown (its marker holds the
    // epoch it had): it stays eligible and, once unfenced, leads cleanly.
    image.last_applied_offset += 10;
    let request = BrokerRegistrationRequest {
        broker_id: 2,
        incarnation_id: uuid::Uuid::new_v4(),
        endpoints: vec![],
        rack: None,
        previous_broker_epoch: epoch2,
    };
    let registered = register_broker(&image, &CONFIG, request, true);
    replay(&mut image, &registered.records);
    assert_eq!(elr_state(&image, 0), (-1, vec![], vec![0, 2], vec![0]));
    let new_epoch2 = registered.response;
    let r = heartbeat(&image, 2, new_epoch2, u64::MAX, false).unwrap();
    replay(&mut image, &r.records);
    assert_eq!(elr_state(&image, 0), (2, vec![2], vec![0], vec![]));
    assert_eq!(
        image.topics["t"].partitions[&0].leader_recovery_state,
        LeaderRecoveryState::Recovered,
        "a clean election"
    );
    // The killed leader registers again without a clean-shutdown epoch:
    // it leaves the ELR (it may have lost what it acknowledged).
    image.last_applied_offset += 10;
    let r = register(&image, 0, None, true);
    replay(&mut image, &r.records);
    assert_eq!(elr_state(&image, 0), (2, vec![2], vec![], vec![]));
}

#[test]
fn an_unclean_restart_leaves_the_elr_and_a_clean_one_stays() {
    let base = with_min_isr(
        with_elr(image_with_partitions(3, &[(vec![0, 1, 2], vec![0, 1, 2])])),
        "3",
    );
    // Fence 1 then 2: both go to the ELR (below min ISR 3).
    let r = fence_brokers(&base, &CONFIG, &[1, 2]);
    let mut image = base.clone();
    replay(&mut image, &r.records);
    assert_eq!(elr_state(&image, 0), (0, vec![0], vec![1, 2], vec![]));
    image.last_applied_offset += 10;
    for (broker, previous_epoch, elr_after) in [
        (1, image.brokers[&1].broker_epoch, vec![1, 2]),
        (2, -1, vec![1]),
    ] {
        let request = BrokerRegistrationRequest {
            broker_id: broker,
            incarnation_id: uuid::Uuid::new_v4(),
            endpoints: vec![],
            rack: None,
            previous_broker_epoch: previous_epoch,
        };
        let r = register_broker(&image, &CONFIG, request, true);
        replay(&mut image, &r.records);
        image.last_applied_offset += 1;
        assert_eq!(
            image.topics["t"].partitions[&0].elr, elr_after,
            "broker {broker}"
        );
    }
}

#[test]
fn changing_min_insync_replicas_clears_the_elr() {
    let image = with_min_isr(
        with_elr(image_with_partitions(3, &[(vec![0, 1, 2], vec![0, 1, 2])])),
        "3",
    );
    let r = fence_brokers(&image, &CONFIG, &[1]);
    let mut image = image;
    replay(&mut image, &r.records);
    assert_eq!(image.topics["t"].partitions[&0].elr, vec![1]);
    let image = with_min_isr(image, "2");
    assert_eq!(elr_state(&image, 0), (0, vec![0, 2], vec![], vec![]));
}

#[test]
fn elr_is_on_for_a_new_cluster_only() {
    let fresh = MetadataImage::new("c");
    let r = register(&fresh, 0, None, true);
    let mut image = fresh.clone();
    replay(&mut image, &r.records);
    assert!(
        image.elr_enabled(),
        "the first registration of a new cluster"
    );
    // Metadata that already has a broker (an older Weir's) keeps ELR off.
    let mut older = image_with_brokers(1);
    let r = register(&older, 1, None, true);
    replay(&mut older, &r.records);
    assert!(!older.elr_enabled());
}

#[test]
fn the_static_min_insync_replicas_is_the_last_fallback() {
    let image = image_with_partitions(3, &[(vec![0, 1, 2], vec![0, 1, 2])]);
    let topic = &image.topics["t"];
    let static_two = StaticConfig {
        min_insync_replicas: 2,
    };
    assert_eq!(effective_min_isr(&image, &static_two, topic), 2);
    let capped = StaticConfig {
        min_insync_replicas: 5,
    };
    assert_eq!(effective_min_isr(&image, &capped, topic), 3, "capped at RF");
    let image = with_min_isr(image, "1");
    assert_eq!(
        effective_min_isr(&image, &static_two, &image.topics["t"]),
        1
    );
}

/// A quota that lets `allowed` topics through, then refuses, noting the
/// partition counts it was asked to record.
struct RecordingQuota {
    allowed: usize,
    recorded: Vec<usize>,
}

impl crate::mutation_quota::PartitionMutationQuota for RecordingQuota {
    fn record(&mut self, partitions: usize) -> Result<(), ControllerError> {
        self.recorded.push(partitions);
        if self.recorded.len() > self.allowed {
            return Err(ControllerError::ThrottlingQuotaExceeded {
                throttle_time_ms: 7,
            });
        }
        Ok(())
    }
}

#[test]
fn mutations_count_valid_topics_partitions_and_a_refused_topic_changes_nothing() {
    fn refused<T>() -> Result<T, ControllerError> {
        Err(ControllerError::ThrottlingQuotaExceeded {
            throttle_time_ms: 7,
        })
    }
    let placer = StripedReplicaPlacer::default();
    let mut image = image_with_brokers(3);
    created(&mut image, &[topic("existing", 2, 1)]);

    // CreateTopics: an invalid topic is not counted; the second valid one
    // is refused and gets no records.
    let mut quota = RecordingQuota {
        allowed: 1,
        recorded: Vec::new(),
    };
    let result = create_topics_under_quota(
        &image,
        &[topic("existing", 4, 1), topic("a", 3, 1), topic("b", 1, 1)],
        false,
        &placer,
        &mut quota,
    );
    assert_eq!(quota.recorded, vec![3, 1], "partitions of each valid topic");
    assert!(matches!(
        result.response[0],
        Err(ControllerError::TopicAlreadyExists { .. })
    ));
    assert!(result.response[1].is_ok());
    assert_eq!(result.response[2], refused());
    replay(&mut image, &result.records);
    assert!(image.topic("a").is_some());
    assert!(image.topic("b").is_none(), "a refused topic is not created");

    // Validate-only creations count too (Kafka's KRaft controller).
    let mut quota = RecordingQuota {
        allowed: 0,
        recorded: Vec::new(),
    };
    let checked = create_topics_under_quota(&image, &[topic("c", 5, 1)], true, &placer, &mut quota);
    assert_eq!(
        (quota.recorded, checked.response),
        (vec![5], vec![refused()])
    );

    // CreatePartitions counts the partitions added.
    let mut quota = RecordingQuota {
        allowed: 1,
        recorded: Vec::new(),
    };
    let result = create_partitions_under_quota(
        &image,
        &[
            grow("a", 5, None),
            grow("existing", 3, None),
            grow("nope", 2, None),
        ],
        false,
        &placer,
        &mut quota,
    );
    assert_eq!(quota.recorded, vec![2, 1]);
    assert_eq!(result.response[0], Ok(()));
    assert_eq!(result.response[1], refused());
    assert!(matches!(
        result.response[2],
        Err(ControllerError::UnknownTopic { .. })
    ));
    replay(&mut image, &result.records);
    assert_eq!(image.topic("a").unwrap().partitions.len(), 5);
    assert_eq!(image.topic("existing").unwrap().partitions.len(), 2);

    // DeleteTopics counts each found topic's partitions once.
    let a_id = image.topic("a").unwrap().topic_id;
    let mut quota = RecordingQuota {
        allowed: 1,
        recorded: Vec::new(),
    };
    let result = delete_topics_under_quota(
        &image,
        &[
            TopicRef::Name("a".into()),
            TopicRef::Id(a_id),
            TopicRef::Name("existing".into()),
        ],
        &mut quota,
    );
    assert_eq!(quota.recorded, vec![5, 2]);
    assert!(result.response[0].is_ok() && result.response[1].is_ok());
    assert_eq!(result.response[2], refused());
    replay(&mut image, &result.records);
    assert!(image.topic("a").is_none());
    assert!(image.topic("existing").is_some(), "a refused topic stays");
}
