//! Pure controller logic: `(image, command) -> ControllerResult { records, response }`.
//!
//! The functions here play the parts of Kafka's `ReplicationControlManager`
//! (topics), `ClusterControlManager` (broker registration),
//! `ProducerIdControlManager` and `ConfigurationControlManager`. They read a
//! [`MetadataImage`] and return the records that would make the change plus
//! the response; they never mutate anything. The quorum commits the records
//! and replay applies them. No I/O, no raft, no Kafka request types.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;

use crate::error::ControllerError;
use crate::image::{MetadataImage, PartitionRegistration, TopicId};
use crate::placement::ReplicaPlacer;
use crate::records::{
    BrokerEndpoint, ConfigRecord, ConfigResourceType, FenceBrokerRecord, LeaderRecoveryState,
    MetadataRecord, PartitionChangeRecord, PartitionRecord, ProducerIdsRecord,
    RegisterBrokerRecord, RemoveTopicRecord, TopicRecord, UnfenceBrokerRecord,
};

/// Records to commit and the response to give once they are committed
/// (Kafka's `ControllerResult`). An empty `records` means nothing to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerResult<T> {
    /// Records to append to the metadata log as one atomic batch.
    pub records: Vec<MetadataRecord>,
    /// What the caller gets back after the records are applied.
    pub response: T,
}

impl<T> ControllerResult<T> {
    /// The same records with the response mapped by `f`.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> ControllerResult<U> {
        ControllerResult {
            records: self.records,
            response: f(self.response),
        }
    }
}

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

/// Size of a producer id block handed to a broker (Kafka's
/// `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`, KIP-730).
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

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
pub fn create_topics(
    image: &MetadataImage,
    topics: &[CreatableTopic],
    validate_only: bool,
    placer: &dyn ReplicaPlacer,
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
        let topic_id = loop {
            let id = uuid::Uuid::new_v4();
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
        records.push(MetadataRecord::Partition(PartitionRecord {
            partition_id: partition_id as i32,
            topic_id,
            replicas: replicas.clone(),
            // Placement and manual assignments use unfenced brokers only,
            // so the ISR has a first member.
            leader: isr.first().copied().unwrap_or(-1),
            isr,
            leader_epoch: 0,
            partition_epoch: 0,
            leader_recovery_state: LeaderRecoveryState::Recovered,
        }));
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
/// registered and unfenced (Kafka's `ClusterControlManager.isActive`, which
/// also excludes brokers in controlled shutdown; Weir fences a broker as
/// soon as it asks to shut down, so unfenced covers both).
fn usable_replicas(image: &MetadataImage, replicas: &[i32]) -> Vec<i32> {
    replicas
        .iter()
        .copied()
        .filter(|b| image.brokers.get(b).is_some_and(|r| !r.fenced))
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
pub fn delete_topics(
    image: &MetadataImage,
    topics: &[TopicRef],
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
            // The same topic named once by name and once by id is removed once.
            if removed.insert(topic.topic_id) {
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

/// Computes the registration of a broker (Kafka's
/// `ClusterControlManager.registerBroker`) and returns its new broker epoch.
///
/// The epoch is `last_applied_offset + 1`, which is the offset the record
/// will be committed at when nothing else is in flight (Kafka uses the
/// record's offset) and is always above every earlier epoch. A re-registration
/// replaces the previous one.
///
/// With `fenced` (Kafka's `RegisterBrokerRecord.fenced`, always true in
/// Kafka) the broker may not lead nor join ISRs until a heartbeat unfences
/// it ([`broker_heartbeat`]); a previous, unfenced incarnation leaves every
/// ISR and loses its leaderships in the same batch (its in-memory state is
/// gone), as [`fence_brokers`] would (Kafka's `handleBrokerShutdown` with
/// ELR off). A single-voter controller registers its own
/// broker unfenced, so a single node starts in one commit.
pub fn register_broker(
    image: &MetadataImage,
    broker_id: i32,
    incarnation_id: uuid::Uuid,
    endpoints: Vec<BrokerEndpoint>,
    rack: Option<String>,
    fenced: bool,
) -> ControllerResult<i64> {
    let broker_epoch = i64::try_from(image.last_applied_offset)
        .unwrap_or(i64::MAX - 1)
        .saturating_add(1);
    let registration = MetadataRecord::RegisterBroker(RegisterBrokerRecord {
        broker_id,
        incarnation_id,
        broker_epoch,
        end_points: endpoints,
        rack,
        fenced,
    });
    let was_live = image.brokers.get(&broker_id).is_some_and(|b| !b.fenced);
    let records = if fenced && was_live {
        let mut after = image.clone();
        let mut records = applied(&mut after, vec![registration]);
        records.extend(isr_removals(&after, broker_id));
        records
    } else {
        vec![registration]
    };
    ControllerResult {
        records,
        response: broker_epoch,
    }
}

/// The active controller's answer to a broker heartbeat (the
/// `is_fenced` and `should_shut_down` fields of Kafka's
/// `BrokerHeartbeatResponse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HeartbeatReply {
    /// The broker is fenced once this reply's records are applied.
    pub is_fenced: bool,
    /// The broker asked to shut down and may now do so: it is fenced and
    /// leads no partition.
    pub should_shut_down: bool,
}

/// Handles one broker heartbeat (Kafka's
/// `ClusterControlManager.processBrokerHeartbeat` and
/// `BrokerHeartbeatManager.calculateNextBrokerState`, KIP-631).
///
/// A heartbeat writes records only when the broker's state changes:
/// - a fenced broker whose applied metadata offset `metadata_offset` has
///   reached its registration (`broker_epoch` is the registration's offset)
///   is unfenced (`UnfenceBrokerRecord`), and every leaderless partition
///   whose ISR it is in elects it (`PartitionChangeRecord`s);
/// - `want_shut_down` (controlled shutdown) fences an unfenced broker
///   (`FenceBrokerRecord`) and moves its leaderships as [`fence_brokers`].
///
/// The session clock itself lives in the active controller's memory, not in
/// the log.
///
/// # Errors
///
/// [`ControllerError::StaleBrokerEpoch`] when `broker_epoch` is not the
/// broker's current registration.
pub fn broker_heartbeat(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: i64,
    metadata_offset: u64,
    want_shut_down: bool,
) -> Result<ControllerResult<HeartbeatReply>, ControllerError> {
    let registration = image
        .brokers
        .get(&broker_id)
        .filter(|b| b.broker_epoch == broker_epoch)
        .ok_or(ControllerError::StaleBrokerEpoch {
            broker_id,
            requested: broker_epoch,
            current: image.brokers.get(&broker_id).map(|b| b.broker_epoch),
        })?;
    if want_shut_down {
        let result = fence_brokers(image, &[broker_id]);
        return Ok(ControllerResult {
            records: result.records,
            response: HeartbeatReply {
                is_fenced: true,
                should_shut_down: true,
            },
        });
    }
    let caught_up = i64::try_from(metadata_offset).unwrap_or(i64::MAX) >= broker_epoch;
    if !registration.fenced || !caught_up {
        return Ok(ControllerResult {
            records: Vec::new(),
            response: HeartbeatReply {
                is_fenced: registration.fenced,
                should_shut_down: false,
            },
        });
    }
    let unfence = MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
        id: broker_id,
        epoch: broker_epoch,
    });
    Ok(ControllerResult {
        records: with_elections(image, vec![unfence]),
        response: HeartbeatReply {
            is_fenced: false,
            should_shut_down: false,
        },
    })
}

/// Fences the given brokers (Kafka's `ReplicationControlManager.handleBrokerFenced`,
/// used when a session expires and on controlled shutdown): per unfenced
/// registered broker among `broker_ids`, in order, one `FenceBrokerRecord`
/// followed by the `PartitionChangeRecord`s that take it out of every ISR
/// and move its leaderships (see [`isr_removals`]). Brokers are handled one
/// after another on the image the earlier ones left, as Kafka fences one
/// broker per event: when two members of an ISR go at once, the one fenced
/// last stays as the ISR's only member. Unknown or already fenced brokers
/// add nothing; the response lists the brokers fenced.
pub fn fence_brokers(image: &MetadataImage, broker_ids: &[i32]) -> ControllerResult<Vec<i32>> {
    let mut fenced = Vec::new();
    let mut records = Vec::new();
    let mut after = None::<MetadataImage>;
    for &id in broker_ids {
        let Some(b) = image.brokers.get(&id).filter(|b| !b.fenced) else {
            continue;
        };
        if fenced.contains(&id) {
            continue;
        }
        fenced.push(id);
        let work = after.get_or_insert_with(|| image.clone());
        let fence = MetadataRecord::FenceBroker(FenceBrokerRecord {
            id,
            epoch: b.broker_epoch,
        });
        records.extend(applied(work, vec![fence]));
        let removals = isr_removals(work, id);
        records.extend(applied(work, removals));
    }
    ControllerResult {
        records,
        response: fenced,
    }
}

/// `records`, after applying them to `image` (they were computed from it,
/// so they replay; a failure would only leave `image` behind).
fn applied(image: &mut MetadataImage, records: Vec<MetadataRecord>) -> Vec<MetadataRecord> {
    for r in &records {
        let _ = image.apply(r);
    }
    records
}

/// `records` followed by the `PartitionChangeRecord`s that
/// [`elect_leaders`] computes on `image` with `records` applied.
fn with_elections(image: &MetadataImage, records: Vec<MetadataRecord>) -> Vec<MetadataRecord> {
    let mut after = image.clone();
    let mut records = applied(&mut after, records);
    records.extend(elect_leaders(&after));
    records
}

/// Topic config (and cluster-wide broker config) that lets a partition with
/// no live ISR member elect a live replica outside the ISR, losing data.
pub const UNCLEAN_LEADER_ELECTION_ENABLE: &str = "unclean.leader.election.enable";

/// True when `topic` may elect a leader from outside its ISR:
/// [`UNCLEAN_LEADER_ELECTION_ENABLE`] is true for the topic or, unset there,
/// in the cluster-wide broker configs (Kafka's
/// `ConfigurationControlManager.uncleanLeaderElectionEnabledForTopic`).
fn unclean_enabled(image: &MetadataImage, topic: &crate::image::TopicImage) -> bool {
    topic
        .configs
        .get(UNCLEAN_LEADER_ELECTION_ENABLE)
        .or_else(|| {
            image
                .broker_configs
                .get("")
                .and_then(|c| c.get(UNCLEAN_LEADER_ELECTION_ENABLE))
        })
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// True for a registered, unfenced broker: one that may lead and be in an
/// ISR (Kafka's `ClusterControlManager.isActive`; Weir fences a broker as
/// soon as it asks to shut down, so "not in controlled shutdown" is part of
/// unfenced).
fn is_active(image: &MetadataImage, broker: i32) -> bool {
    image.brokers.get(&broker).is_some_and(|r| !r.fenced)
}

/// What a partition change aims at: Kafka's `PartitionChangeBuilder`
/// targets, with ELR (KIP-966) and reassignment off.
struct ChangeTarget<'a> {
    /// The ISR asked for. An empty target leaves the ISR as it is (with ELR
    /// off Kafka never writes an empty ISR).
    isr: Vec<i32>,
    /// May this replica lead (`isAcceptableLeader`)?
    acceptable: &'a dyn Fn(i32) -> bool,
    /// `Election.UNCLEAN` instead of `ONLINE`.
    unclean: bool,
    /// The leader recovery state asked for (the current one unless an
    /// AlterPartition asks otherwise).
    recovery: LeaderRecoveryState,
}

/// The `PartitionChangeRecord` that takes partition `partition_id` of
/// `topic_id` from `p` to `target`, or `None` when nothing would change
/// (Kafka's `PartitionChangeBuilder.build` with ELR off, metadata version
/// 3.6 or later, so an ISR shrink does not bump the leader epoch):
/// - leader (`electAnyLeader`): the current one if it is in the target ISR
///   and acceptable; else the first replica, in assignment order, that is;
///   else, for an unclean election, the first acceptable replica, whose ISR
///   becomes just itself and whose recovery state becomes `Recovering`;
///   else -1 (offline);
/// - ISR: the target, unless it is empty or the unclean election set it;
/// - leader recovery state: the target's when it differs.
fn partition_change(
    topic_id: TopicId,
    partition_id: i32,
    p: &PartitionRegistration,
    target: ChangeTarget<'_>,
) -> Option<PartitionChangeRecord> {
    let valid = |r: i32| target.isr.contains(&r) && (target.acceptable)(r);
    let mut record = PartitionChangeRecord {
        partition_id,
        topic_id,
        isr: None,
        leader: None,
        replicas: None,
        leader_recovery_state: None,
    };
    let elected = if valid(p.leader) {
        Some((p.leader, false))
    } else if let Some(&r) = p.replicas.iter().find(|&&r| valid(r)) {
        Some((r, false))
    } else if target.unclean {
        let acceptable = p.replicas.iter().find(|&&r| (target.acceptable)(r));
        acceptable.map(|&r| (r, true))
    } else {
        None
    };
    let (leader, unclean) = elected.unwrap_or((-1, false));
    if leader != p.leader {
        record.leader = Some(leader);
        if unclean {
            record.isr = Some(vec![leader]);
            if p.leader_recovery_state != LeaderRecoveryState::Recovering {
                record.leader_recovery_state = Some(LeaderRecoveryState::Recovering);
            }
        }
    }
    if record.isr.is_none() && !target.isr.is_empty() && target.isr != p.isr {
        record.isr = Some(target.isr);
    }
    if target.recovery != p.leader_recovery_state {
        record.leader_recovery_state = Some(target.recovery);
    }
    let no_op =
        record.isr.is_none() && record.leader.is_none() && record.leader_recovery_state.is_none();
    (!no_op).then_some(record)
}

/// The `PartitionChangeRecord`s that take `broker` out of every ISR it is
/// in and move its leaderships, as Kafka's
/// `ReplicationControlManager.generateLeaderAndIsrUpdates` with
/// `brokerToRemove = broker` (`handleBrokerFenced`,
/// `handleBrokerInControlledShutdown`, and `handleBrokerShutdown` for a
/// re-registration, ELR off): per partition whose ISR holds `broker`, the
/// target ISR is the ISR without it (kept whole when `broker` is its only
/// member, so the partition goes offline with the replica that has
/// everything still named), `broker` may not lead, and the leader is
/// elected as [`partition_change`] does (unclean when the topic allows it).
pub fn isr_removals(image: &MetadataImage, broker: i32) -> Vec<MetadataRecord> {
    let acceptable = |r: i32| r != broker && is_active(image, r);
    let mut records = Vec::new();
    for topic in image.topics.values() {
        let unclean = unclean_enabled(image, topic);
        for (&partition_id, p) in &topic.partitions {
            if !p.isr.contains(&broker) {
                continue;
            }
            let target = ChangeTarget {
                isr: p.isr.iter().copied().filter(|&r| r != broker).collect(),
                acceptable: &acceptable,
                unclean,
                recovery: p.leader_recovery_state,
            };
            records.extend(
                partition_change(topic.topic_id, partition_id, p, target)
                    .map(MetadataRecord::PartitionChange),
            );
        }
    }
    records
}

/// The `PartitionChangeRecord`s that bring every partition's leader and ISR
/// in line with the live (registered, unfenced) brokers of `image`, as
/// Kafka's `PartitionChangeBuilder` with ELR off (see [`partition_change`]):
/// - ISR: members that are not live leave it, unless none is live, in which
///   case the ISR is kept as it was (so the last leader's return can elect
///   it again);
/// - leader: kept if live and in the ISR, else the first replica (in
///   replica order) that is live and in the ISR; else, when
///   `unclean.leader.election.enable` is true for the topic (or, unset there,
///   in the cluster-wide broker configs), the first live replica, whose ISR
///   becomes just itself and whose leader recovery state `Recovering`;
///   else -1 (offline).
///
/// Used after a broker is unfenced (Kafka's `handleBrokerUnfenced`: the
/// partitions without a leader elect it when it is in their ISR); fencing
/// uses [`isr_removals`], one broker at a time. Replay bumps the partition
/// epoch, and the leader epoch when the leader changes. Partitions that
/// need no change add nothing.
pub fn elect_leaders(image: &MetadataImage) -> Vec<MetadataRecord> {
    let live = |r: i32| is_active(image, r);
    let mut records = Vec::new();
    for topic in image.topics.values() {
        let unclean = unclean_enabled(image, topic);
        for (&partition_id, p) in &topic.partitions {
            let target = ChangeTarget {
                isr: p.isr.iter().copied().filter(|&r| live(r)).collect(),
                acceptable: &live,
                unclean,
                recovery: p.leader_recovery_state,
            };
            records.extend(
                partition_change(topic.topic_id, partition_id, p, target)
                    .map(MetadataRecord::PartitionChange),
            );
        }
    }
    records
}

/// The election an ElectLeaders request asks for (KIP-460's
/// `election_type`; v0 requests are always preferred).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ElectionType {
    /// Wire value 0 (KIP-183): make the first replica (the preferred one)
    /// the leader, when it is live and in the ISR.
    Preferred,
    /// Wire value 1 (KIP-460): give a partition with no leader one, a live
    /// ISR member if any, else any live replica (whose ISR becomes just
    /// itself, losing data).
    Unclean,
}

impl ElectionType {
    /// The type for an ElectLeaders `election_type` byte; `None` for values
    /// Kafka does not know (it answers INVALID_REQUEST).
    pub fn from_wire(value: i8) -> Option<ElectionType> {
        match value {
            0 => Some(ElectionType::Preferred),
            1 => Some(ElectionType::Unclean),
            _ => None,
        }
    }
}

/// What an ElectLeaders request did to one partition (Kafka's
/// `ReplicationControlManager.electLeader` results).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ElectionOutcome {
    /// A new leader was elected (error NONE).
    Elected,
    /// The partition already has the leader asked for: for a preferred
    /// election its first replica leads, for an unclean one it has any
    /// leader (ELECTION_NOT_NEEDED).
    NotNeeded,
    /// Preferred election: no live ISR member could take over
    /// (PREFERRED_LEADER_NOT_AVAILABLE).
    PreferredLeaderNotAvailable,
    /// Unclean election: no replica is live (ELIGIBLE_LEADERS_NOT_AVAILABLE).
    EligibleLeadersNotAvailable,
    /// No such topic or partition (UNKNOWN_TOPIC_OR_PARTITION).
    UnknownTopicOrPartition,
}

/// One topic's results of an ElectLeaders request: `(partition index,
/// outcome)` in request order (partition order when all partitions were
/// asked for).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TopicElections {
    /// Topic name as given.
    pub topic: String,
    /// Per-partition outcomes.
    pub partitions: Vec<(i32, ElectionOutcome)>,
}

/// The new `(leader, isr)` of `p` under `election` with `live` brokers, as
/// Kafka's `PartitionChangeBuilder.electLeader` with ELR off, or `None`
/// when the leader would not change.
///
/// - preferred: the first replica if live and in the ISR; else the current
///   leader if it still is; else the next live ISR member in replica order;
/// - unclean: the current leader if live and in the ISR; else the first
///   live ISR member in replica order; else the first live replica, whose
///   ISR becomes just itself.
fn elect_one(
    p: &crate::image::PartitionRegistration,
    election: ElectionType,
    live: impl Fn(i32) -> bool,
) -> Option<(i32, Option<Vec<i32>>)> {
    let valid = |r: i32| p.isr.contains(&r) && live(r);
    let (leader, isr) = match election {
        ElectionType::Preferred => {
            let next = p.replicas.iter().skip(1).copied().find(|&r| valid(r));
            match p.replicas.first().copied().filter(|&r| valid(r)) {
                Some(r) => (r, None),
                None if valid(p.leader) => (p.leader, None),
                None => (next.unwrap_or(-1), None),
            }
        }
        ElectionType::Unclean => {
            if valid(p.leader) {
                (p.leader, None)
            } else if let Some(r) = p.replicas.iter().copied().find(|&r| valid(r)) {
                (r, None)
            } else if let Some(r) = p.replicas.iter().copied().find(|&r| live(r)) {
                (r, Some(vec![r]))
            } else {
                (-1, None)
            }
        }
    };
    (leader != p.leader).then_some((leader, isr))
}

/// Runs an ElectLeaders request (KIP-183, KIP-460; Kafka's
/// `ReplicationControlManager.electLeaders`). `partitions` lists
/// `(topic, partition indexes)`; `None` (a null `topic_partitions` on the
/// wire) means every partition of every topic, and then partitions whose
/// election is not needed are left out of the results (a topic with none
/// left still gets an empty entry), as in Kafka.
///
/// Per partition: UNKNOWN_TOPIC_OR_PARTITION for an unknown topic or
/// index; ELECTION_NOT_NEEDED when the first replica leads (preferred) or
/// any replica leads (unclean); else one `PartitionChangeRecord` with the
/// new leader (see `elect_one`), whose replay bumps the leader and
/// partition epochs; when the leader would not change,
/// PREFERRED_LEADER_NOT_AVAILABLE (preferred) or
/// ELIGIBLE_LEADERS_NOT_AVAILABLE (unclean). A partition named twice is
/// decided on the image with the first election applied, so it is
/// elected once.
pub fn elect_leaders_on_request(
    image: &MetadataImage,
    election: ElectionType,
    partitions: Option<&[(String, Vec<i32>)]>,
) -> ControllerResult<Vec<TopicElections>> {
    let requested: Vec<(String, Vec<i32>)> = match partitions {
        Some(p) => p.to_vec(),
        None => image
            .topics
            .values()
            .map(|t| (t.name.clone(), t.partitions.keys().copied().collect()))
            .collect(),
    };
    let mut after = image.clone();
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(requested.len());
    for (name, indexes) in requested {
        let mut outcomes = Vec::with_capacity(indexes.len());
        for index in indexes {
            let outcome = match elect_partition(&after, election, &name, index) {
                Ok(record) => {
                    // Built from `after`: it replays.
                    let _ = after.apply(&record);
                    records.push(record);
                    ElectionOutcome::Elected
                }
                Err(outcome) => outcome,
            };
            if partitions.is_some() || outcome != ElectionOutcome::NotNeeded {
                outcomes.push((index, outcome));
            }
        }
        results.push(TopicElections {
            topic: name,
            partitions: outcomes,
        });
    }
    ControllerResult {
        records,
        response: results,
    }
}

/// One partition of [`elect_leaders_on_request`]: its record, or why none.
fn elect_partition(
    image: &MetadataImage,
    election: ElectionType,
    topic: &str,
    index: i32,
) -> Result<MetadataRecord, ElectionOutcome> {
    let topic = image
        .topic(topic)
        .ok_or(ElectionOutcome::UnknownTopicOrPartition)?;
    let p = topic
        .partitions
        .get(&index)
        .ok_or(ElectionOutcome::UnknownTopicOrPartition)?;
    let not_needed = match election {
        ElectionType::Preferred => p.replicas.first() == Some(&p.leader),
        ElectionType::Unclean => p.leader != -1,
    };
    if not_needed {
        return Err(ElectionOutcome::NotNeeded);
    }
    let live = |b: i32| image.brokers.get(&b).is_some_and(|r| !r.fenced);
    let (leader, isr) = elect_one(p, election, live).ok_or(match election {
        ElectionType::Preferred => ElectionOutcome::PreferredLeaderNotAvailable,
        ElectionType::Unclean => ElectionOutcome::EligibleLeadersNotAvailable,
    })?;
    // An unclean election (a new ISR of the leader alone) leaves the
    // leader recovering (KIP-704), as Kafka's `PartitionChangeBuilder`.
    let recovering = isr.is_some() && p.leader_recovery_state != LeaderRecoveryState::Recovering;
    Ok(MetadataRecord::PartitionChange(PartitionChangeRecord {
        partition_id: index,
        topic_id: topic.topic_id,
        isr,
        leader: Some(leader),
        replicas: None,
        leader_recovery_state: recovering.then_some(LeaderRecoveryState::Recovering),
    }))
}

/// Most preferred elections one automatic rebalance pass writes (Kafka's
/// `ReplicationControlManager.MAX_ELECTIONS_PER_IMBALANCE`); a pass that
/// hits it is run again at once.
pub const MAX_ELECTIONS_PER_IMBALANCE: usize = 1_000;

/// One automatic leader rebalance pass (`auto.leader.rebalance.enable`;
/// Kafka's `ReplicationControlManager.maybeBalancePartitionLeaders`): a
/// preferred election (see `elect_one`) for every partition whose leader is
/// not its first replica, at most `max_elections` records. The response is
/// true when the pass stopped at `max_elections`, so more may be needed at
/// once.
///
/// As Kafka's KRaft controller, every imbalanced partition is considered:
/// `leader.imbalance.per.broker.percentage` (a ZooKeeper-controller
/// setting) plays no part.
pub fn balance_partition_leaders(
    image: &MetadataImage,
    max_elections: usize,
) -> ControllerResult<bool> {
    let live = |b: i32| image.brokers.get(&b).is_some_and(|r| !r.fenced);
    let mut records = Vec::new();
    for topic in image.topics.values() {
        for (&partition_id, p) in &topic.partitions {
            if p.replicas.first() == Some(&p.leader) {
                continue;
            }
            if records.len() >= max_elections {
                return ControllerResult {
                    records,
                    response: true,
                };
            }
            if let Some((leader, isr)) = elect_one(p, ElectionType::Preferred, live) {
                records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                    partition_id,
                    topic_id: topic.topic_id,
                    isr,
                    leader: Some(leader),
                    replicas: None,
                    leader_recovery_state: None,
                }));
            }
        }
    }
    let more = records.len() >= max_elections;
    ControllerResult {
        records,
        response: more,
    }
}

/// One AlterPartition request from a partition leader (Kafka's
/// `AlterPartitionRequest`, v3: KIP-497, KIP-841, KIP-903): the ISR changes
/// it asks for, with the broker epoch it registered with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AlterPartitionRequest {
    /// The sending broker (the leader of every partition listed).
    pub broker_id: i32,
    /// The sender's broker epoch; must be its current registration's.
    pub broker_epoch: i64,
    /// The partitions, by topic.
    pub topics: Vec<AlterPartitionTopic>,
}

/// One topic of an [`AlterPartitionRequest`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AlterPartitionTopic {
    /// The topic id (KIP-516; AlterPartition v2+ names topics by id only).
    pub topic_id: TopicId,
    /// The partitions of the topic to change.
    pub partitions: Vec<AlterPartitionData>,
}

/// One partition's proposed state in an [`AlterPartitionRequest`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AlterPartitionData {
    /// The partition index.
    pub partition_index: i32,
    /// The leader epoch the leader holds.
    pub leader_epoch: i32,
    /// KIP-903: each proposed ISR member with its broker epoch (-1: not
    /// checked), in the order the leader lists them.
    pub new_isr_with_epochs: Vec<(i32, i64)>,
    /// The proposed leader recovery state (KIP-704): 0 RECOVERED,
    /// 1 RECOVERING.
    pub leader_recovery_state: i8,
    /// The partition epoch the leader last saw (KIP-497's update version).
    pub partition_epoch: i32,
}

/// One partition's outcome in an [`AlterPartitionResponse`]: its
/// registration once the change is applied, or why it was refused.
pub type AlterPartitionResult = Result<PartitionRegistration, ControllerError>;

/// The answer to an [`AlterPartitionRequest`]: per topic of the request, in
/// request order, `(partition index, outcome)` in request order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AlterPartitionResponse {
    /// `(topic id, per-partition results)`.
    pub topics: Vec<(TopicId, Vec<(i32, AlterPartitionResult)>)>,
}

/// Runs an AlterPartition request (Kafka's
/// `ReplicationControlManager.alterPartition`): validates every partition
/// in Kafka's order and writes one `PartitionChangeRecord` per partition
/// that changes (its replay bumps the partition epoch; with metadata
/// version 3.6+ an ISR change keeps the leader epoch).
///
/// The request fails whole (`response` is `Err`, no records) with
/// [`ControllerError::StaleBrokerEpoch`] unless `broker_epoch` is the
/// sender's current registration (`ClusterControlManager.checkBrokerEpoch`).
/// Otherwise each partition gets, in this order
/// (`validateAlterPartitionData`):
/// 1. an unknown (or zero) topic id: [`ControllerError::UnknownTopicId`];
/// 2. no such partition: [`ControllerError::UnknownPartition`]
///    (UNKNOWN_TOPIC_OR_PARTITION);
/// 3. a leader or partition epoch newer than the controller's:
///    [`ControllerError::EpochNewerThanController`] (NOT_CONTROLLER: this
///    controller is probably no longer the active one);
/// 4. an older leader epoch: [`ControllerError::FencedLeaderEpoch`];
/// 5. a sender that is not the partition's leader:
///    [`ControllerError::InvalidRequest`];
/// 6. an older partition epoch: [`ControllerError::InvalidUpdateVersion`];
/// 7. a proposed ISR with a replica outside the assignment, a duplicate or
///    a negative id (`Replicas.validateIsr`), or without the leader:
///    [`ControllerError::InvalidRequest`];
/// 8. a leader recovery state other than 0 or 1 (Kafka's
///    `LeaderRecoveryState.of` throws; Weir answers the partition instead),
///    `Recovering` with more than one ISR member, or a change from
///    `Recovered` to `Recovering`: [`ControllerError::InvalidRequest`];
/// 9. a proposed member that is not registered, is fenced (which in Weir
///    includes shutting down), or whose given broker epoch (unless -1) is
///    not its current one (KIP-841, KIP-903):
///    [`ControllerError::IneligibleReplica`], naming the first one.
///
/// An accepted partition whose ISR and recovery state already are the
/// proposed ones gets its current registration and no record. The leader
/// never changes here: it is in the new ISR and eligible, so Kafka's
/// election keeps it. A partition named twice is validated against the
/// state the first occurrence left (Kafka validates both against the state
/// before the request), so a repeat with the same partition epoch gets
/// INVALID_UPDATE_VERSION instead of a second record.
pub fn alter_partition(
    image: &MetadataImage,
    request: &AlterPartitionRequest,
) -> ControllerResult<Result<AlterPartitionResponse, ControllerError>> {
    let current = image
        .brokers
        .get(&request.broker_id)
        .map(|b| b.broker_epoch);
    if current != Some(request.broker_epoch) {
        return ControllerResult {
            records: Vec::new(),
            response: Err(ControllerError::StaleBrokerEpoch {
                broker_id: request.broker_id,
                requested: request.broker_epoch,
                current,
            }),
        };
    }
    let mut changed: HashMap<(TopicId, i32), PartitionRegistration> = HashMap::new();
    let mut records = Vec::new();
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let topic = image.topic_by_id(&t.topic_id);
        let mut results = Vec::with_capacity(t.partitions.len());
        for data in &t.partitions {
            let index = data.partition_index;
            let Some(topic) = topic else {
                let unknown = ControllerError::UnknownTopicId { id: t.topic_id };
                results.push((index, Err(unknown)));
                continue;
            };
            let key = (topic.topic_id, index);
            let current = changed.get(&key).or_else(|| topic.partitions.get(&index));
            let Some(p) = current.cloned() else {
                let unknown = ControllerError::UnknownPartition {
                    topic_id: topic.topic_id,
                    partition: index,
                };
                results.push((index, Err(unknown)));
                continue;
            };
            let outcome =
                validate_alter_partition(image, topic.topic_id, request.broker_id, &p, data).map(
                    |target| {
                        let live = |r: i32| is_active(image, r);
                        let change = ChangeTarget {
                            isr: target.0,
                            acceptable: &live,
                            unclean: false,
                            recovery: target.1,
                        };
                        match partition_change(topic.topic_id, index, &p, change) {
                            Some(record) => {
                                let after = p.merged(&record);
                                records.push(MetadataRecord::PartitionChange(record));
                                changed.insert(key, after.clone());
                                after
                            }
                            None => p,
                        }
                    },
                );
            results.push((index, outcome));
        }
        topics.push((t.topic_id, results));
    }
    ControllerResult {
        records,
        response: Ok(AlterPartitionResponse { topics }),
    }
}

/// Checks one partition of an AlterPartition request against its current
/// registration `p` in the order of Kafka's
/// `ReplicationControlManager.validateAlterPartitionData` (steps 3 to 9 of
/// [`alter_partition`]); returns the target ISR and recovery state.
fn validate_alter_partition(
    image: &MetadataImage,
    topic_id: TopicId,
    broker_id: i32,
    p: &PartitionRegistration,
    data: &AlterPartitionData,
) -> Result<(Vec<i32>, LeaderRecoveryState), ControllerError> {
    let partition = data.partition_index;
    let invalid = |reason: String| {
        Err(ControllerError::InvalidRequest {
            reason: format!("partition {partition} of topic id {topic_id}: {reason}"),
        })
    };
    if data.leader_epoch > p.leader_epoch || data.partition_epoch > p.partition_epoch {
        return Err(ControllerError::EpochNewerThanController {
            topic_id,
            partition,
            requested_leader_epoch: data.leader_epoch,
            requested_partition_epoch: data.partition_epoch,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
        });
    }
    if data.leader_epoch < p.leader_epoch {
        return Err(ControllerError::FencedLeaderEpoch {
            topic_id,
            partition,
            requested: data.leader_epoch,
            current: p.leader_epoch,
        });
    }
    if broker_id != p.leader {
        return invalid(format!(
            "broker {broker_id} is not the leader; the current leader is {}",
            p.leader
        ));
    }
    if data.partition_epoch < p.partition_epoch {
        return Err(ControllerError::InvalidUpdateVersion {
            topic_id,
            partition,
            requested: data.partition_epoch,
            current: p.partition_epoch,
        });
    }
    let new_isr: Vec<i32> = data.new_isr_with_epochs.iter().map(|&(b, _)| b).collect();
    let mut sorted = new_isr.clone();
    sorted.sort_unstable();
    let duplicate = sorted.windows(2).any(|w| w[0] == w[1]);
    if duplicate || new_isr.iter().any(|r| !p.replicas.contains(r)) {
        return invalid(format!(
            "invalid ISR {new_isr:?} for replicas {:?}",
            p.replicas
        ));
    }
    if !new_isr.contains(&p.leader) {
        return invalid(format!(
            "the ISR {new_isr:?} does not include the leader {}",
            p.leader
        ));
    }
    let Some(recovery) = LeaderRecoveryState::from_wire(data.leader_recovery_state) else {
        return invalid(format!(
            "unknown leader recovery state {}",
            data.leader_recovery_state
        ));
    };
    if recovery == LeaderRecoveryState::Recovering && new_isr.len() > 1 {
        return invalid(format!(
            "the ISR {new_isr:?} has more than one replica while the leader is still \
             recovering from an unclean leader election"
        ));
    }
    if p.leader_recovery_state == LeaderRecoveryState::Recovered
        && recovery == LeaderRecoveryState::Recovering
    {
        return invalid(
            "the leader recovery state cannot change from RECOVERED to RECOVERING".into(),
        );
    }
    for &(replica, epoch) in &data.new_isr_with_epochs {
        let reason = match image.brokers.get(&replica) {
            None => Some("not registered".to_string()),
            Some(b) if b.fenced => Some("fenced".to_string()),
            Some(b) if epoch != -1 && epoch != b.broker_epoch => Some(format!(
                "broker epoch mismatch: requested={epoch} VS expected={}",
                b.broker_epoch
            )),
            Some(_) => None,
        };
        if let Some(reason) = reason {
            return Err(ControllerError::IneligibleReplica {
                topic_id,
                partition,
                broker_id: replica,
                reason,
            });
        }
    }
    Ok((new_isr, recovery))
}

/// Hands the next block of [`PRODUCER_ID_BLOCK_SIZE`] producer ids to a
/// broker (Kafka's `ProducerIdControlManager.generateNextProducerId`, KIP-730).
///
/// # Errors
///
/// [`ControllerError::StaleBrokerEpoch`] when `broker_epoch` is not the
/// broker's current registration; [`ControllerError::ProducerIdsExhausted`]
/// when the block would pass `i64::MAX`.
pub fn allocate_producer_ids(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: i64,
) -> Result<ControllerResult<Range<i64>>, ControllerError> {
    let current = image.brokers.get(&broker_id).map(|b| b.broker_epoch);
    if current != Some(broker_epoch) {
        return Err(ControllerError::StaleBrokerEpoch {
            broker_id,
            requested: broker_epoch,
            current,
        });
    }
    let first = image.next_producer_id;
    let next =
        first
            .checked_add(PRODUCER_ID_BLOCK_SIZE)
            .ok_or(ControllerError::ProducerIdsExhausted {
                next_producer_id: first,
            })?;
    Ok(ControllerResult {
        records: vec![MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id,
            broker_epoch,
            next_producer_id: next,
        })],
        response: first..next,
    })
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
        records,
        response: (),
    })
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
pub fn create_partitions(
    image: &MetadataImage,
    topics: &[NewPartitions],
    validate_only: bool,
    placer: &dyn ReplicaPlacer,
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
            let Some(&leader) = isr.first() else {
                // Kafka: "All brokers are currently fenced or in controlled shutdown."
                return Err(ControllerError::InvalidReplicationFactor {
                    requested: plan.replication_factor,
                    available: image.unfenced_broker_ids().len(),
                });
            };
            Ok(MetadataRecord::Partition(PartitionRecord {
                partition_id: plan.first_partition_id + i as i32,
                topic_id: plan.topic_id,
                replicas,
                isr,
                leader,
                leader_epoch: 0,
                partition_epoch: 0,
                leader_recovery_state: LeaderRecoveryState::Recovered,
            }))
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
        records: set.chain(deleted).collect(),
        response: (),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::StripedReplicaPlacer;

    fn image_with_brokers(n: i32) -> MetadataImage {
        let mut image = MetadataImage::new("c");
        for id in 0..n {
            let r = register_broker(&image, id, uuid::Uuid::new_v4(), vec![], None, false);
            for rec in &r.records {
                image.apply(rec).unwrap();
            }
            image.last_applied_offset += 1;
        }
        image
    }

    fn replay(image: &mut MetadataImage, records: &[MetadataRecord]) {
        for r in records {
            image.apply(r).unwrap();
        }
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
        let first = register_broker(&image, 1, uuid::Uuid::new_v4(), vec![], None, false);
        replay(&mut image, &first.records);
        image.last_applied_offset = 7;
        let second = register_broker(
            &image,
            1,
            uuid::Uuid::new_v4(),
            vec![],
            Some("r1".into()),
            false,
        );
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
        let assignment_error =
            |assignments: Vec<Vec<i32>>| match one(grow("t", 3, Some(assignments))) {
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
        let r = register_broker(&image, 7, uuid::Uuid::new_v4(), vec![], None, true);
        let epoch = r.response;
        assert_eq!(epoch, 11);
        replay(&mut image, &r.records);
        assert!(image.brokers[&7].fenced);
        assert_eq!(image.unfenced_broker_ids(), vec![0]);

        let behind = broker_heartbeat(&image, 7, epoch, 10, false).unwrap();
        assert!(behind.records.is_empty(), "{behind:?}");
        assert!(behind.response.is_fenced);

        let caught_up = broker_heartbeat(&image, 7, epoch, 11, false).unwrap();
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
        let steady = broker_heartbeat(&image, 7, epoch, 11, false).unwrap();
        assert!(steady.records.is_empty());
        assert!(!steady.response.is_fenced);

        assert_eq!(
            broker_heartbeat(&image, 7, epoch - 1, 11, false),
            Err(ControllerError::StaleBrokerEpoch {
                broker_id: 7,
                requested: epoch - 1,
                current: Some(epoch)
            })
        );
        assert!(matches!(
            broker_heartbeat(&image, 8, 1, 11, false),
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
        let result = fence_brokers(&image, &[0]);
        assert_eq!(result.response, vec![0]);
        assert!(matches!(
            result.records[0],
            MetadataRecord::FenceBroker(FenceBrokerRecord { id: 0, .. })
        ));
        assert_eq!(result.records.len(), 1 + 3, "{:?}", result.records);
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
        let again = fence_brokers(&image, &[0, 9]);
        assert!(again.records.is_empty() && again.response.is_empty());

        // The broker's return (a caught-up heartbeat) elects it where the
        // partition is offline with it in the ISR, and nowhere else.
        let epoch = image.brokers[&0].broker_epoch;
        let back = broker_heartbeat(&image, 0, epoch, u64::MAX, false).unwrap();
        replay(&mut image, &back.records);
        assert_eq!(partition(&image, 1), (0, vec![0], 2, 2));
        assert_eq!(partition(&image, 0), (1, vec![1, 2], 1, 1));
        assert_eq!(partition(&image, 2), (1, vec![1], 0, 1));
    }

    #[test]
    fn unclean_election_picks_a_live_replica_outside_the_isr_when_enabled() {
        let mut image = image_with_partitions(2, &[(vec![0, 1], vec![0])]);
        let before = fence_brokers(&image, &[0]);
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
        let result = fence_brokers(&image, &[0]);
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
        let result = fence_brokers(&image, &[0, 1]);
        assert_eq!(result.response, vec![0, 1]);
        replay(&mut image, &result.records);
        assert_eq!(partition(&image, 0), (-1, vec![1], 2, 2));

        let epoch = image.brokers[&0].broker_epoch;
        let first_back = broker_heartbeat(&image, 0, epoch, u64::MAX, false).unwrap();
        replay(&mut image, &first_back.records);
        assert_eq!(
            partition(&image, 0),
            (-1, vec![1], 2, 2),
            "0 is not in the ISR"
        );

        let epoch = image.brokers[&1].broker_epoch;
        let last_back = broker_heartbeat(&image, 1, epoch, u64::MAX, false).unwrap();
        replay(&mut image, &last_back.records);
        assert_eq!(partition(&image, 0), (1, vec![1], 3, 3));
    }

    #[test]
    fn fencing_a_follower_only_shrinks_the_isrs_it_is_in() {
        // An ISR member that is already fenced (the last one, kept) is not
        // removed when another broker is fenced.
        let mut image =
            image_with_partitions(3, &[(vec![0, 1], vec![0]), (vec![1, 2], vec![1, 2])]);
        let first = fence_brokers(&image, &[0]);
        replay(&mut image, &first.records);
        assert_eq!(partition(&image, 0), (-1, vec![0], 1, 1));
        let result = fence_brokers(&image, &[2]);
        replay(&mut image, &result.records);
        assert_eq!(partition(&image, 0), (-1, vec![0], 1, 1));
        assert_eq!(partition(&image, 1), (1, vec![1], 0, 1));
        assert_eq!(result.records.len(), 2, "{:?}", result.records);
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
            let result = alter_partition(&image, &request);
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
        let outcome = only_result(&alter_partition(&image, &request));
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
        let result = alter_partition(&image, &request);
        assert!(result.records.is_empty());
        assert!(matches!(
            result.response,
            Err(ControllerError::StaleBrokerEpoch { broker_id: 0, .. })
        ));
        request.broker_id = 5;
        let unregistered = alter_partition(&image, &request).response;
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
            let result = alter_partition(&image, &request);
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
        let result = alter_partition(&image, &alter_request(&image, &[0, 1]));
        assert!(result.records.is_empty());
        assert_eq!(
            only_result(&result),
            Ok(image.topic("t").unwrap().partitions[&0].clone())
        );
        // Unchecked broker epochs (-1, AlterPartition before v3) are accepted.
        let mut request = alter_request(&image, &[0, 1, 2]);
        request.topics[0].partitions[0].new_isr_with_epochs[2].1 = -1;
        assert_eq!(alter_partition(&image, &request).records.len(), 1);
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
            })],
        );
        let mut request = alter_request(&image, &[0]);
        request.topics[0].partitions[0].partition_epoch = 6;
        // Still recovering, alone: nothing changes.
        request.topics[0].partitions[0].leader_recovery_state = 1;
        assert!(alter_partition(&image, &request).records.is_empty());
        request.topics[0].partitions[0].leader_recovery_state = 0;
        let result = alter_partition(&image, &request);
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
        let result = alter_partition(&image, &request);
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
    fn controlled_shutdown_fences_and_moves_leadership() {
        let mut image = image_with_partitions(2, &[(vec![0, 1], vec![0, 1])]);
        let epoch = image.brokers[&0].broker_epoch;
        let result = broker_heartbeat(&image, 0, epoch, 0, true).unwrap();
        assert_eq!(
            result.response,
            HeartbeatReply {
                is_fenced: true,
                should_shut_down: true
            }
        );
        replay(&mut image, &result.records);
        assert!(image.brokers[&0].fenced);
        assert_eq!(partition(&image, 0), (1, vec![1], 1, 1));
    }

    #[test]
    fn re_registering_a_live_broker_fenced_moves_its_leadership_away() {
        let mut image = image_with_partitions(2, &[(vec![0, 1], vec![0, 1]), (vec![0], vec![0])]);
        let r = register_broker(&image, 0, uuid::Uuid::new_v4(), vec![], None, true);
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
        elect_leaders_on_request(image, election, Some(&partitions))
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
        let mut image =
            image_with_partitions(3, &[(vec![0, 1], vec![1]), (vec![2, 1], vec![1, 2])]);
        let fenced = fence_brokers(&image, &[2]);
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
        let fenced = fence_brokers(&image, &[0]);
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
        let mut image =
            image_with_partitions(2, &[(vec![0, 1], vec![0, 1]), (vec![0, 1], vec![1, 0])]);
        replay(
            &mut image,
            &[MetadataRecord::Topic(TopicRecord {
                name: "u".into(),
                topic_id: uuid::Uuid::from_u128(43),
            })],
        );
        let result = elect_leaders_on_request(&image, ElectionType::Preferred, None);
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
        let one = balance_partition_leaders(&image, 1);
        assert_eq!(one.records.len(), 1);
        assert!(one.response, "stopped at the limit: run again");

        let all = balance_partition_leaders(&image, MAX_ELECTIONS_PER_IMBALANCE);
        assert!(!all.response);
        assert_eq!(all.records.len(), 2, "{:?}", all.records);
        replay(&mut image, &all.records);
        assert_eq!(partition(&image, 0), (0, vec![1, 0], 1, 1));
        assert_eq!(partition(&image, 1), (1, vec![1, 0], 0, 0));
        assert_eq!(partition(&image, 2), (2, vec![0, 2], 1, 1));
        assert_eq!(partition(&image, 3), (2, vec![2], 0, 0));

        // A fenced preferred replica is not elected.
        let mut fenced = image_with_partitions(2, &[(vec![0, 1], vec![1, 0])]);
        let r = fence_brokers(&fenced, &[0]);
        replay(&mut fenced, &r.records);
        let none = balance_partition_leaders(&fenced, MAX_ELECTIONS_PER_IMBALANCE);
        assert!(none.records.is_empty() && !none.response);
    }
}
