//! Topics, partitions and their configs (Kafka's `ReplicationControlManager`
//! topic creation and deletion, `createPartitions`, and
//! `ConfigurationControlManager` for topic configs).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::partition_change::{is_active, MIN_INSYNC_REPLICAS};
use super::ControllerResult;
use crate::error::ControllerError;
use crate::image::{MetadataImage, TopicId};
use crate::mutation_quota::{PartitionMutationQuota, UnboundedMutationQuota};
use crate::placement::ReplicaPlacer;
use crate::records::{
    ConfigRecord, ConfigResourceType, MetadataRecord, PartitionChangeRecord, PartitionRecord,
    RemoveTopicRecord, TopicRecord,
};

/// One topic of a CreateTopics request, with broker defaults already resolved.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CreatableTopic {
    /// Topic name.
    pub name: String,
    /// Partition count (>= 1). Must be -1 when `assignments` is non-empty
    /// (as on the wire; Kafka answers INVALID_REQUEST otherwise).
    pub num_partitions: i32,
    /// Replication factor (>= 1). Must be -1 when `assignments` is non-empty.
    pub replication_factor: i16,
    /// Manual assignment: `(partition index, replica broker ids)`; indexes
    /// must be exactly `0..assignments.len()`.
    pub assignments: Vec<(i32, Vec<i32>)>,
    /// Topic configs to set at creation: `(key, value)`.
    pub configs: Vec<(String, String)>,
}

/// The outcome of creating one topic.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CreatedTopic {
    /// Topic name.
    pub name: String,
    /// The new topic id.
    pub topic_id: TopicId,
    /// Partitions created.
    pub num_partitions: i32,
    /// Replicas per partition.
    pub replication_factor: i16,
}

/// A topic named in a DeleteTopics request: by name (v0-v5) or id (v6+, KIP-516).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum TopicRef {
    /// By topic name.
    Name(String),
    /// By topic id.
    Id(TopicId),
}

/// The most metadata records one user operation (one CreateTopics or
/// DeleteTopics request) may generate: Kafka's
/// `QuorumController.MAX_RECORDS_PER_USER_OP`, enforced there by a
/// `BoundedList`. A request that would exceed it fails as a whole with
/// [`ControllerError::PolicyViolation`].
pub const MAX_RECORDS_PER_USER_OP: usize = 10_000;

/// The metadata log's own topic (Kafka's `Topic.CLUSTER_METADATA_TOPIC_NAME`);
/// users may neither create nor delete it.
pub const CLUSTER_METADATA_TOPIC_NAME: &str = "__cluster_metadata";

/// Longest legal topic name (Kafka's `Topic.MAX_NAME_LENGTH`).
pub const MAX_TOPIC_NAME_LENGTH: usize = 249;

/// Checks a topic name as Kafka's `Topic.validate` does: non-empty, not `.`
/// or `..`, at most 249 characters, only ASCII letters, digits, `.`, `_`, `-`.
///
/// # Errors
///
/// [`ControllerError::InvalidTopic`] naming the broken rule.
pub fn validate_topic_name(name: &str) -> Result<(), ControllerError> {
    let invalid = |reason: String| {
        Err(ControllerError::InvalidTopic {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return invalid("topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > MAX_TOPIC_NAME_LENGTH {
        return invalid(format!(
            "topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return invalid(
            "topic name contains characters other than ASCII alphanumerics, '.', '_' and '-'"
                .into(),
        );
    }
    Ok(())
}

/// Kafka's `Topic.unifyCollisionChars`: `.` and `_` collide in metric names.
fn unify_collision_chars(name: &str) -> String {
    name.replace('.', "_")
}

/// Kafka's message for a request over [`MAX_RECORDS_PER_USER_OP`]
/// (`EventHandlerExceptionInfo`).
const EXCESSIVELY_LARGE_BATCH: &str = "Unable to perform excessively large batch operation.";

fn excessively_large_batch() -> ControllerError {
    ControllerError::PolicyViolation {
        reason: EXCESSIVELY_LARGE_BATCH.into(),
    }
}

/// Computes the records for a CreateTopics request (Kafka's
/// `ControllerApis.createTopics` and `ReplicationControlManager.createTopics`).
///
/// Results are in request order. A name given more than once fails every
/// occurrence with `InvalidRequest` ("Duplicate topic name.") and creates
/// nothing for it; [`CLUSTER_METADATA_TOPIC_NAME`] fails with
/// `InvalidRequest`. For each other topic: legal name, not existing
/// (`TopicAlreadyExists`), no `.`/`_` collision with an existing or earlier
/// topic (`InvalidTopic`), then either a valid manual assignment or
/// `num_partitions >= 1` (`InvalidPartitions`) and a replication factor the
/// placer accepts. Each success yields a `TopicRecord`, one `PartitionRecord`
/// per partition (leader = first replica, isr = `[leader]`, epochs 0: until
/// followers replicate, only the leader holds the data) and one
/// `ConfigRecord` per config.
///
/// If the successful topics together would generate more than
/// [`MAX_RECORDS_PER_USER_OP`] records, EVERY topic of the request fails with
/// [`ControllerError::PolicyViolation`] and there are no records (Kafka's
/// `BoundedList` aborts the whole operation). The count is made from the
/// request's numbers before any placement, so nothing is allocated in
/// proportion to an unchecked partition count.
///
/// With `validate_only` the responses are the same (the cap included) but no
/// records are returned.
///
/// No controller mutation quota applies; see [`create_topics_under_quota`].
pub fn create_topics(
    image: &MetadataImage,
    topics: &[CreatableTopic],
    validate_only: bool,
    placer: &dyn ReplicaPlacer,
) -> ControllerResult<Vec<Result<CreatedTopic, ControllerError>>> {
    create_topics_under_quota(
        image,
        topics,
        validate_only,
        placer,
        &mut UnboundedMutationQuota,
    )
}

/// [`create_topics`] with each valid, placed topic's partitions counted
/// against `quota` just before the topic gets its id (Kafka's
/// `ReplicationControlManager.createTopic` calling
/// `applyPartitionChangeQuota(numPartitions)`, validate-only requests
/// included); a topic the quota refuses gets its error
/// ([`ControllerError::ThrottlingQuotaExceeded`]) and no records.
pub fn create_topics_under_quota(
    image: &MetadataImage,
    topics: &[CreatableTopic],
    validate_only: bool,
    placer: &dyn ReplicaPlacer,
    quota: &mut dyn PartitionMutationQuota,
) -> ControllerResult<Vec<Result<CreatedTopic, ControllerError>>> {
    let mut name_counts: HashMap<&str, usize> = HashMap::new();
    for t in topics {
        *name_counts.entry(t.name.as_str()).or_default() += 1;
    }
    let mut collision_names: HashSet<String> = image
        .topics
        .keys()
        .map(|n| unify_collision_chars(n))
        .collect();
    let mut used_ids: HashSet<TopicId> = image.topic_names_by_id.keys().copied().collect();
    let mut records = Vec::new();
    let mut responses = Vec::with_capacity(topics.len());
    for topic in topics {
        if name_counts[topic.name.as_str()] > 1 {
            responses.push(Err(ControllerError::InvalidRequest {
                reason: format!("Duplicate topic name '{}'.", topic.name),
            }));
            continue;
        }
        if topic.name == CLUSTER_METADATA_TOPIC_NAME {
            responses.push(Err(ControllerError::InvalidRequest {
                reason: format!(
                    "Creation of internal topic {CLUSTER_METADATA_TOPIC_NAME} is prohibited."
                ),
            }));
            continue;
        }
        let planned = match plan_topic(image, topic, placer, &collision_names) {
            Ok(planned) => planned,
            Err(e) => {
                responses.push(Err(e));
                continue;
            }
        };
        if records.len().saturating_add(planned.record_count) > MAX_RECORDS_PER_USER_OP {
            return ControllerResult {
                records: Vec::new(),
                response: vec![Err(excessively_large_batch()); topics.len()],
            };
        }
        let placement = match planned.partitions {
            PlannedPartitions::Manual(placement) => placement,
            PlannedPartitions::Placed {
                num_partitions,
                replication_factor,
            } => match placer.place(image, num_partitions, replication_factor) {
                Ok(placement) => placement,
                Err(e) => {
                    responses.push(Err(e));
                    continue;
                }
            },
        };
        if let Err(e) = quota.record(placement.len()) {
            responses.push(Err(e));
            continue;
        }
        let topic_id = loop {
            let id = crate::determinism::uuid_v4();
            if !id.is_nil() && used_ids.insert(id) {
                break id;
            }
        };
        collision_names.insert(unify_collision_chars(&topic.name));
        responses.push(Ok(topic_records(
            image,
            topic,
            topic_id,
            &placement,
            &mut records,
        )));
    }
    if validate_only {
        records.clear();
    }
    ControllerResult {
        records,
        response: responses,
    }
}

/// A topic that passed validation, before its replicas are placed.
struct PlannedTopic {
    partitions: PlannedPartitions,
    /// Records the topic will generate: 1 `TopicRecord`, one
    /// `PartitionRecord` per partition, one `ConfigRecord` per config.
    record_count: usize,
}

enum PlannedPartitions {
    /// A checked manual assignment, ordered by partition index.
    Manual(Vec<Vec<i32>>),
    /// To be placed by the [`ReplicaPlacer`], which accepted these numbers.
    Placed {
        num_partitions: i32,
        replication_factor: i16,
    },
}

/// Validates one topic without allocating anything in proportion to its
/// partition count (a manual assignment is checked, and it is already in
/// memory as part of the request).
fn plan_topic(
    image: &MetadataImage,
    topic: &CreatableTopic,
    placer: &dyn ReplicaPlacer,
    collision_names: &HashSet<String>,
) -> Result<PlannedTopic, ControllerError> {
    validate_topic_name(&topic.name)?;
    if image.topics.contains_key(&topic.name) {
        return Err(ControllerError::TopicAlreadyExists {
            name: topic.name.clone(),
        });
    }
    if collision_names.contains(&unify_collision_chars(&topic.name)) {
        return Err(ControllerError::InvalidTopic {
            name: topic.name.clone(),
            reason: "topic name collides with an existing topic (a '.' and '_' differ only)".into(),
        });
    }
    let (partitions, partition_count) = if topic.assignments.is_empty() {
        if topic.num_partitions < 1 {
            return Err(ControllerError::InvalidPartitions {
                name: topic.name.clone(),
                requested: topic.num_partitions,
            });
        }
        placer.check(image, topic.num_partitions, topic.replication_factor)?;
        let placed = PlannedPartitions::Placed {
            num_partitions: topic.num_partitions,
            replication_factor: topic.replication_factor,
        };
        // num_partitions >= 1 here, so the conversion cannot fail.
        (
            placed,
            usize::try_from(topic.num_partitions).unwrap_or(usize::MAX),
        )
    } else {
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return Err(ControllerError::InvalidRequest {
                reason: "a manual partition assignment was specified, but numPartitions or \
                         replicationFactor was not set to -1"
                    .into(),
            });
        }
        let placement = validate_manual_assignment(image, &topic.assignments)?;
        let count = placement.len();
        (PlannedPartitions::Manual(placement), count)
    };
    Ok(PlannedTopic {
        partitions,
        record_count: 1usize
            .saturating_add(partition_count)
            .saturating_add(topic.configs.len()),
    })
}

/// Appends the records of a placed topic and returns its outcome. Each
/// partition's ISR is every usable replica (see [`usable_replicas`]) and its
/// leader the first of them, as Kafka's `ReplicationControlManager.createTopic`
/// (`buildPartitionRegistration`).
fn topic_records(
    image: &MetadataImage,
    topic: &CreatableTopic,
    topic_id: TopicId,
    placement: &[Vec<i32>],
    records: &mut Vec<MetadataRecord>,
) -> CreatedTopic {
    records.push(MetadataRecord::Topic(TopicRecord {
        name: topic.name.clone(),
        topic_id,
    }));
    for (partition_id, replicas) in placement.iter().enumerate() {
        let isr = usable_replicas(image, replicas);
        // Placement and manual assignments use unfenced brokers only, so
        // the ISR has a first member: the leader.
        records.push(MetadataRecord::Partition(PartitionRecord::new(
            partition_id as i32,
            topic_id,
            replicas.clone(),
            isr,
        )));
    }
    for (name, value) in &topic.configs {
        records.push(MetadataRecord::Config(ConfigRecord {
            resource_type: ConfigResourceType::Topic,
            resource_name: topic.name.clone(),
            name: name.clone(),
            value: Some(value.clone()),
        }));
    }
    CreatedTopic {
        name: topic.name.clone(),
        topic_id,
        num_partitions: placement.len() as i32,
        replication_factor: placement.first().map_or(0, |r| r.len()) as i16,
    }
}

/// The replicas of `replicas` (in assignment order) that may be in an ISR:
/// registered, unfenced and not in controlled shutdown (Kafka's
/// `ClusterControlManager.isActive`).
fn usable_replicas(image: &MetadataImage, replicas: &[i32]) -> Vec<i32> {
    replicas
        .iter()
        .copied()
        .filter(|&b| is_active(image, b))
        .collect()
}

/// Checks a manual assignment as Kafka's `ReplicationControlManager` does and
/// returns the replica lists ordered by partition index.
fn validate_manual_assignment(
    image: &MetadataImage,
    assignments: &[(i32, Vec<i32>)],
) -> Result<Vec<Vec<i32>>, ControllerError> {
    let bad = |reason: String| Err(ControllerError::InvalidReplicaAssignment { reason });
    let mut by_partition: Vec<Option<&Vec<i32>>> = vec![None; assignments.len()];
    for (partition, replicas) in assignments {
        let slot = usize::try_from(*partition)
            .ok()
            .and_then(|i| by_partition.get_mut(i));
        match slot {
            Some(slot @ None) => *slot = Some(replicas),
            _ => {
                return bad(
                    "partitions should be a consecutive 0-based integer sequence".to_string(),
                )
            }
        }
    }
    let placement: Vec<Vec<i32>> = by_partition
        .into_iter()
        .map(|r| r.cloned().unwrap_or_default())
        .collect();
    let expected_len = placement[0].len();
    for (partition, replicas) in placement.iter().enumerate() {
        if replicas.is_empty() {
            return bad(format!("partition {partition} has an empty replica list"));
        }
        if replicas.len() != expected_len {
            return bad(
                "all partitions in the manual partition assignment must have the same length"
                    .to_string(),
            );
        }
        let distinct: HashSet<_> = replicas.iter().collect();
        if distinct.len() != replicas.len() {
            return bad(format!(
                "partition {partition} lists a broker more than once: {replicas:?}"
            ));
        }
        for broker in replicas {
            match image.brokers.get(broker) {
                None => {
                    return bad(format!(
                        "the manual partition assignment includes broker {broker}, but no such \
                         broker is registered"
                    ))
                }
                Some(b) if b.fenced => {
                    return bad(format!(
                        "the manual partition assignment includes broker {broker}, but it is \
                         fenced"
                    ))
                }
                Some(_) => {}
            }
        }
    }
    Ok(placement)
}

/// Computes the records for a DeleteTopics request (Kafka's
/// `ControllerApis.deleteTopics` and `ReplicationControlManager.deleteTopics`):
/// one `RemoveTopicRecord` per found topic; results in request order as
/// `(name, id)`.
///
/// A topic named more than once (by name, or by id) fails every occurrence
/// with `InvalidRequest` and is not deleted; unknown names give
/// `UnknownTopic`, unknown ids `UnknownTopicId`; [`CLUSTER_METADATA_TOPIC_NAME`]
/// (by name, or an id that resolves to it) gives `InvalidRequest`. If more
/// than [`MAX_RECORDS_PER_USER_OP`] topics would be removed, every topic of
/// the request fails with [`ControllerError::PolicyViolation`] and there are
/// no records. (Kafka bounds the same record list but reports the topics past
/// the bound one by one as `UNKNOWN_SERVER_ERROR` while deleting the first
/// 10000; Weir refuses the whole request, as it does for CreateTopics.)
///
/// No controller mutation quota applies; see [`delete_topics_under_quota`].
pub fn delete_topics(
    image: &MetadataImage,
    topics: &[TopicRef],
) -> ControllerResult<Vec<Result<(String, TopicId), ControllerError>>> {
    delete_topics_under_quota(image, topics, &mut UnboundedMutationQuota)
}

/// [`delete_topics`] with each found topic's partitions counted against
/// `quota` before its `RemoveTopicRecord` (Kafka's
/// `ReplicationControlManager.deleteTopic` calling
/// `applyPartitionChangeQuota(numPartitions)`); a topic the quota refuses
/// gets its error ([`ControllerError::ThrottlingQuotaExceeded`]) and stays.
pub fn delete_topics_under_quota(
    image: &MetadataImage,
    topics: &[TopicRef],
    quota: &mut dyn PartitionMutationQuota,
) -> ControllerResult<Vec<Result<(String, TopicId), ControllerError>>> {
    let mut counts: HashMap<&TopicRef, usize> = HashMap::new();
    for t in topics {
        *counts.entry(t).or_default() += 1;
    }
    let internal = || ControllerError::InvalidRequest {
        reason: format!("Deletion of internal topic {CLUSTER_METADATA_TOPIC_NAME} is prohibited."),
    };
    let mut removed: HashSet<TopicId> = HashSet::new();
    let mut records = Vec::new();
    let response: Vec<_> = topics
        .iter()
        .map(|t| {
            if counts[t] > 1 {
                return Err(ControllerError::InvalidRequest {
                    reason: match t {
                        TopicRef::Name(name) => format!("Duplicate topic name '{name}'."),
                        TopicRef::Id(id) => format!("Duplicate topic id {id}."),
                    },
                });
            }
            let topic = match t {
                TopicRef::Name(name) if name == CLUSTER_METADATA_TOPIC_NAME => {
                    return Err(internal())
                }
                TopicRef::Name(name) => image
                    .topic(name)
                    .ok_or_else(|| ControllerError::UnknownTopic { name: name.clone() })?,
                TopicRef::Id(id) => image
                    .topic_by_id(id)
                    .ok_or(ControllerError::UnknownTopicId { id: *id })?,
            };
            if topic.name == CLUSTER_METADATA_TOPIC_NAME {
                return Err(internal());
            }
            // The same topic named once by name and once by id is removed
            // (and counted) once.
            if !removed.contains(&topic.topic_id) {
                quota.record(topic.partitions.len())?;
                removed.insert(topic.topic_id);
                records.push(MetadataRecord::RemoveTopic(RemoveTopicRecord {
                    topic_id: topic.topic_id,
                }));
            }
            Ok((topic.name.clone(), topic.topic_id))
        })
        .collect();
    if records.len() > MAX_RECORDS_PER_USER_OP {
        return ControllerResult {
            records: Vec::new(),
            response: vec![Err(excessively_large_batch()); topics.len()],
        };
    }
    ControllerResult { records, response }
}
/// Sets (`Some`) or deletes (`None`) topic configs: one `ConfigRecord` each.
/// Keys and values are not checked here; the broker knows the topic config
/// keys and validates them before calling.
///
/// # Errors
///
/// [`ControllerError::UnknownTopic`] when the topic does not exist.
pub fn alter_topic_configs(
    image: &MetadataImage,
    topic: &str,
    configs: Vec<(String, Option<String>)>,
) -> Result<ControllerResult<()>, ControllerError> {
    if image.topic(topic).is_none() {
        return Err(ControllerError::UnknownTopic {
            name: topic.to_string(),
        });
    }
    let records = configs
        .into_iter()
        .map(|(name, value)| {
            MetadataRecord::Config(ConfigRecord {
                resource_type: ConfigResourceType::Topic,
                resource_name: topic.to_string(),
                name,
                value,
            })
        })
        .collect();
    Ok(ControllerResult {
        records: with_elr_cleared_on_min_isr_change(image, topic, records),
        response: (),
    })
}

/// `records` followed, when ELR is on and they set or delete the topic's
/// `min.insync.replicas`, by one `PartitionChangeRecord` per partition of
/// `topic` with an ELR or last known leader that empties both: an ELR
/// computed against the old minimum no longer says who holds the high
/// watermark (Kafka's `ConfigurationControlManager.createClearElrRecordsAsNeeded`
/// writes one `ClearElrRecord`, which replays to exactly these changes).
fn with_elr_cleared_on_min_isr_change(
    image: &MetadataImage,
    topic: &str,
    mut records: Vec<MetadataRecord>,
) -> Vec<MetadataRecord> {
    let changes_min_isr = records
        .iter()
        .any(|r| matches!(r, MetadataRecord::Config(c) if c.name == MIN_INSYNC_REPLICAS));
    let Some(topic) = image
        .topic(topic)
        .filter(|_| changes_min_isr && image.elr_enabled())
    else {
        return records;
    };
    for (&partition_id, p) in &topic.partitions {
        if p.elr.is_empty() && p.last_known_elr.is_empty() {
            continue;
        }
        records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id,
            topic_id: topic.topic_id,
            eligible_leader_replicas: Some(Vec::new()),
            last_known_elr: Some(Vec::new()),
            ..PartitionChangeRecord::default()
        }));
    }
    records
}

/// One topic of a CreatePartitions request (Kafka's `CreatePartitionsTopic`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NewPartitions {
    /// Topic name.
    pub name: String,
    /// The partition count the topic should have afterwards (the new total,
    /// not the number to add).
    pub count: i32,
    /// Replica broker ids of each added partition, in partition order
    /// (`None`: placed by the [`ReplicaPlacer`]). When given there must be
    /// exactly `count - current` lists.
    pub assignments: Option<Vec<Vec<i32>>>,
}

/// Computes the records for a CreatePartitions request (Kafka's
/// `ReplicationControlManager.createPartitions`); one result per topic, in
/// request order.
///
/// For each topic: it must exist (`UnknownTopic`; internal topics such as
/// `__consumer_offsets` may grow, as in Kafka); `count` must be above the
/// current partition count (`PartitionCountNotIncreased`); a manual
/// assignment must have one replica list per added partition, each
/// non-empty, of registered brokers, without repeats, as long as the
/// topic's replication factor (that of its first partition) and with at
/// least one unfenced broker (`InvalidReplicaAssignment`); without one the
/// placer places `count - current` partitions with the topic's replication
/// factor. Each added partition is one `PartitionRecord` numbered from the
/// current count, ISR = its unfenced replicas, leader = the first of them,
/// epochs 0.
///
/// A name given more than once fails each occurrence with `InvalidRequest`
/// (the broker answers such names once, as Kafka's `ControllerApis`). If
/// the added partitions of the whole request exceed
/// [`MAX_RECORDS_PER_USER_OP`], every topic fails with
/// [`ControllerError::PolicyViolation`] and there are no records (counted
/// before any placement). With `validate_only` the responses are the same
/// but no records are returned.
///
/// No controller mutation quota applies; see [`create_partitions_under_quota`].
pub fn create_partitions(
    image: &MetadataImage,
    topics: &[NewPartitions],
    validate_only: bool,
    placer: &dyn ReplicaPlacer,
) -> ControllerResult<Vec<Result<(), ControllerError>>> {
    create_partitions_under_quota(
        image,
        topics,
        validate_only,
        placer,
        &mut UnboundedMutationQuota,
    )
}

/// [`create_partitions`] with each valid topic's added partitions counted
/// against `quota` before they are placed (Kafka's
/// `ReplicationControlManager.createPartitions` calling
/// `applyPartitionChangeQuota(additional)`, validate-only requests
/// included; Kafka counts before it checks each manually assigned replica
/// list, Weir after); a topic the quota refuses gets its error
/// ([`ControllerError::ThrottlingQuotaExceeded`]) and no partitions.
pub fn create_partitions_under_quota(
    image: &MetadataImage,
    topics: &[NewPartitions],
    validate_only: bool,
    placer: &dyn ReplicaPlacer,
    quota: &mut dyn PartitionMutationQuota,
) -> ControllerResult<Vec<Result<(), ControllerError>>> {
    let mut name_counts: HashMap<&str, usize> = HashMap::new();
    for t in topics {
        *name_counts.entry(t.name.as_str()).or_default() += 1;
    }
    let mut records = Vec::new();
    let mut planned_records: usize = 0;
    let mut responses = Vec::with_capacity(topics.len());
    for request in topics {
        if name_counts[request.name.as_str()] > 1 {
            responses.push(Err(ControllerError::InvalidRequest {
                reason: "Duplicate topic name.".into(),
            }));
            continue;
        }
        let mut plan = match plan_new_partitions(image, request, placer) {
            Ok(plan) => plan,
            Err(e) => {
                responses.push(Err(e));
                continue;
            }
        };
        if let Err(e) = quota.record(plan.additional) {
            responses.push(Err(e));
            continue;
        }
        planned_records = planned_records.saturating_add(plan.additional);
        if planned_records > MAX_RECORDS_PER_USER_OP {
            return ControllerResult {
                records: Vec::new(),
                response: vec![Err(excessively_large_batch()); topics.len()],
            };
        }
        let placement = match plan.manual.take() {
            Some(placement) => placement,
            None => match placer.place(image, plan.additional as i32, plan.replication_factor) {
                Ok(placement) => placement,
                Err(e) => {
                    responses.push(Err(e));
                    continue;
                }
            },
        };
        match partition_records(image, &plan, placement) {
            Ok(topic_records) => {
                records.extend(topic_records);
                responses.push(Ok(()));
            }
            Err(e) => responses.push(Err(e)),
        }
    }
    if validate_only {
        records.clear();
    }
    ControllerResult {
        records,
        response: responses,
    }
}

/// A CreatePartitions topic that passed validation, before placement.
struct PartitionsPlan {
    topic_id: TopicId,
    /// The first new partition's index (the current partition count).
    first_partition_id: i32,
    /// How many partitions are added (>= 1).
    additional: usize,
    /// The topic's replication factor.
    replication_factor: i16,
    /// A checked manual assignment of the added partitions.
    manual: Option<Vec<Vec<i32>>>,
}

/// Validates one CreatePartitions topic without allocating anything in
/// proportion to the requested count.
fn plan_new_partitions(
    image: &MetadataImage,
    request: &NewPartitions,
    placer: &dyn ReplicaPlacer,
) -> Result<PartitionsPlan, ControllerError> {
    let topic = image
        .topic(&request.name)
        .ok_or_else(|| ControllerError::UnknownTopic {
            name: request.name.clone(),
        })?;
    let current = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
    if request.count <= current {
        return Err(ControllerError::PartitionCountNotIncreased {
            name: request.name.clone(),
            current,
            requested: request.count,
        });
    }
    // count > current >= 0, so this is positive and fits.
    let additional = (request.count - current) as usize;
    let replication_factor = topic
        .partitions
        .values()
        .next()
        .map(|p| i16::try_from(p.replicas.len()).unwrap_or(i16::MAX))
        .ok_or_else(|| ControllerError::Storage {
            reason: format!("topic {} has no partitions", request.name),
        })?;
    let manual = match &request.assignments {
        Some(assignments) => {
            if assignments.len() != additional {
                return Err(ControllerError::InvalidReplicaAssignment {
                    reason: format!(
                        "Attempted to add {additional} additional partition(s), but only {} \
                         assignment(s) were specified.",
                        assignments.len()
                    ),
                });
            }
            for (i, replicas) in assignments.iter().enumerate() {
                validate_added_partition(image, replicas, replication_factor, current + i as i32)?;
            }
            Some(assignments.clone())
        }
        None => {
            placer.check(image, request.count - current, replication_factor)?;
            None
        }
    };
    Ok(PartitionsPlan {
        topic_id: topic.topic_id,
        first_partition_id: current,
        additional,
        replication_factor,
        manual,
    })
}

/// Checks one manually assigned added partition as Kafka's
/// `validateManualPartitionAssignment` (brokers in ascending order, so the
/// same broker is reported first) and that one replica is unfenced.
fn validate_added_partition(
    image: &MetadataImage,
    replicas: &[i32],
    replication_factor: i16,
    partition_id: i32,
) -> Result<(), ControllerError> {
    let bad = |reason: String| Err(ControllerError::InvalidReplicaAssignment { reason });
    if replicas.is_empty() {
        return bad("The manual partition assignment includes an empty replica list.".into());
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    for (i, broker) in sorted.iter().enumerate() {
        if !image.brokers.contains_key(broker) {
            return bad(format!(
                "The manual partition assignment includes broker {broker}, but no such broker \
                 is registered."
            ));
        }
        if i > 0 && sorted[i - 1] == *broker {
            return bad(format!(
                "The manual partition assignment includes the broker {broker} more than once."
            ));
        }
    }
    if sorted.len() != replication_factor as usize {
        return bad(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this \
             is not consistent with previous partitions, which have {replication_factor} \
             replica(s).",
            sorted.len()
        ));
    }
    if !replicas
        .iter()
        .any(|b| image.brokers.get(b).is_some_and(|r| !r.fenced))
    {
        return bad(format!(
            "All brokers specified in the manual partition assignment for partition \
             {partition_id} are fenced or in controlled shutdown."
        ));
    }
    Ok(())
}

/// The `PartitionRecord`s of a planned topic's added partitions, as Kafka's
/// `ReplicationControlManager.createPartitions`: ISR = every usable replica
/// (see [`usable_replicas`]), leader = the first of them.
fn partition_records(
    image: &MetadataImage,
    plan: &PartitionsPlan,
    placement: Vec<Vec<i32>>,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    placement
        .into_iter()
        .enumerate()
        .map(|(i, replicas)| {
            let isr = usable_replicas(image, &replicas);
            if isr.is_empty() {
                // Kafka: "All brokers are currently fenced or in controlled shutdown."
                return Err(ControllerError::InvalidReplicationFactor {
                    requested: plan.replication_factor,
                    available: image.unfenced_broker_ids().len(),
                });
            }
            Ok(MetadataRecord::Partition(PartitionRecord::new(
                plan.first_partition_id + i as i32,
                plan.topic_id,
                replicas,
                isr,
            )))
        })
        .collect()
}

/// Replaces ALL of a topic's dynamic configs with `configs` (legacy
/// AlterConfigs, Kafka's `ConfigurationControlManager.legacyAlterConfigs`):
/// one `ConfigRecord` per key whose value changes and one deleting
/// `ConfigRecord` per current key not in `configs`. Keys and values are not
/// checked here; the broker validates them before calling. Computed from
/// the image at commit time, so a concurrent change cannot survive the
/// replacement half-way.
///
/// # Errors
///
/// [`ControllerError::UnknownTopic`] when the topic does not exist.
pub fn replace_topic_configs(
    image: &MetadataImage,
    topic: &str,
    configs: &BTreeMap<String, String>,
) -> Result<ControllerResult<()>, ControllerError> {
    let current = &image
        .topic(topic)
        .ok_or_else(|| ControllerError::UnknownTopic {
            name: topic.to_string(),
        })?
        .configs;
    let record = |name: &str, value: Option<&String>| {
        MetadataRecord::Config(ConfigRecord {
            resource_type: ConfigResourceType::Topic,
            resource_name: topic.to_string(),
            name: name.to_string(),
            value: value.cloned(),
        })
    };
    let set = configs
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .map(|(k, v)| record(k, Some(v)));
    let deleted = current
        .keys()
        .filter(|k| !configs.contains_key(*k))
        .map(|k| record(k, None));
    Ok(ControllerResult {
        records: with_elr_cleared_on_min_isr_change(image, topic, set.chain(deleted).collect()),
        response: (),
    })
}
