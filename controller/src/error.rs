//! The controller's error type. Mapping to Kafka error codes happens only in
//! the broker (`broker/src/error.rs`); each variant's doc names the code Kafka
//! returns for it.

/// Why a controller command (or starting the quorum) failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ControllerError {
    /// `TOPIC_ALREADY_EXISTS` (36).
    #[error("topic '{name}' already exists")]
    TopicAlreadyExists {
        /// The requested topic name.
        name: String,
    },
    /// `INVALID_TOPIC_EXCEPTION` (17): the name breaks Kafka's `Topic.validate`
    /// rules or collides with an existing topic.
    #[error("invalid topic name '{name}': {reason}")]
    InvalidTopic {
        /// The requested topic name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `INVALID_PARTITIONS` (37): partition count below 1.
    #[error("invalid number of partitions {requested} for topic '{name}'")]
    InvalidPartitions {
        /// The topic name.
        name: String,
        /// The requested partition count.
        requested: i32,
    },
    /// `INVALID_PARTITIONS` (37): a CreatePartitions count that is not above
    /// the topic's current partition count. The message is Kafka's
    /// (`ReplicationControlManager.createPartitions`).
    #[error("{}", partitions_not_increased_message(name, *current, *requested))]
    PartitionCountNotIncreased {
        /// The topic name.
        name: String,
        /// The topic's current partition count.
        current: i32,
        /// The requested partition count.
        requested: i32,
    },
    /// `INVALID_REPLICATION_FACTOR` (38): below 1 or above the number of
    /// unfenced brokers. The message is Kafka's (`ReplicationControlManager`
    /// around `StripedReplicaPlacer`'s), e.g. "Unable to replicate the
    /// partition 3 time(s): The target replication factor of 3 cannot be
    /// reached because only 2 broker(s) are registered."; Weir places on
    /// unfenced brokers only, so it counts those.
    #[error("{}", invalid_replication_factor_message(*requested, *available))]
    InvalidReplicationFactor {
        /// The requested replication factor.
        requested: i16,
        /// Unfenced registered brokers.
        available: usize,
    },
    /// `INVALID_REPLICA_ASSIGNMENT` (39): a manual assignment is malformed.
    #[error("invalid replica assignment: {reason}")]
    InvalidReplicaAssignment {
        /// What is wrong with it.
        reason: String,
    },
    /// `INVALID_REQUEST` (42): e.g. the same topic twice in one request, a
    /// manual assignment together with a partition count, or creating or
    /// deleting `__cluster_metadata`.
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// What is wrong with it.
        reason: String,
    },
    /// `POLICY_VIOLATION` (44): one user operation would generate more than
    /// [`MAX_RECORDS_PER_USER_OP`](crate::control::MAX_RECORDS_PER_USER_OP)
    /// metadata records. Kafka's `QuorumController` fails the whole request
    /// with "Unable to perform excessively large batch operation."
    /// (`BoundedListTooLongException` mapped in `EventHandlerExceptionInfo`).
    #[error("policy violation: {reason}")]
    PolicyViolation {
        /// What the request would have exceeded.
        reason: String,
    },
    /// `RECORD_LIST_TOO_LARGE` (18): the metadata records one operation
    /// would write encode to more than one metadata log batch may hold
    /// ([`MAX_USER_BATCH_BYTES`](crate::MAX_USER_BATCH_BYTES) for a user's
    /// operation: Kafka's `KafkaRaftClient.MAX_BATCH_SIZE_BYTES`, whose
    /// `BatchAccumulator` throws `RecordBatchTooLargeException`, which the
    /// controller hands to the client), or the command itself is larger
    /// than the quorum transport carries to the active controller
    /// (`MAX_FRAME_BYTES`, 16 MiB). Nothing was written.
    #[error("{reason}")]
    RecordBatchTooLarge {
        /// The sizes, in bytes.
        reason: String,
    },
    /// `THROTTLING_QUOTA_EXCEEDED` (89): a strict controller mutation quota
    /// (KIP-599, [`crate::mutation_quota`]) was already exhausted when the
    /// topic's turn came, so it was not changed. The message is Kafka's
    /// (`Errors.THROTTLING_QUOTA_EXCEEDED`, which `ApiError.fromThrowable`
    /// puts in the topic's result).
    #[error("The throttling quota has been exceeded.")]
    ThrottlingQuotaExceeded {
        /// How long until the quota allows mutations again (ms).
        throttle_time_ms: u64,
    },
    /// `UNKNOWN_TOPIC_OR_PARTITION` (3).
    #[error("unknown topic '{name}'")]
    UnknownTopic {
        /// The requested topic name.
        name: String,
    },
    /// `UNKNOWN_TOPIC_ID` (100).
    #[error("unknown topic id {id}")]
    UnknownTopicId {
        /// The requested topic id.
        id: uuid::Uuid,
    },
    /// `STALE_BROKER_EPOCH` (77): the broker is not registered with this epoch.
    #[error("broker {broker_id} sent epoch {requested}, current registration has {current:?}")]
    StaleBrokerEpoch {
        /// The broker id.
        broker_id: i32,
        /// The epoch the broker sent.
        requested: i64,
        /// The epoch of its current registration, if any.
        current: Option<i64>,
    },
    /// `UNKNOWN_TOPIC_OR_PARTITION` (3): the topic exists but has no
    /// partition with this index (AlterPartition).
    #[error("topic id {topic_id} has no partition {partition}")]
    UnknownPartition {
        /// The topic id.
        topic_id: uuid::Uuid,
        /// The requested partition index.
        partition: i32,
    },
    /// `NOT_CONTROLLER` (41) for one partition of an AlterPartition: the
    /// leader sent a leader or partition epoch newer than this controller's,
    /// so this controller is likely no longer active and the leader should
    /// find the new one (Kafka's
    /// `ReplicationControlManager.validateAlterPartitionData`).
    #[error(
        "partition {partition} of topic id {topic_id}: request has leader epoch \
         {requested_leader_epoch} and partition epoch {requested_partition_epoch}, newer than \
         this controller's {leader_epoch} and {partition_epoch}"
    )]
    EpochNewerThanController {
        /// The topic id.
        topic_id: uuid::Uuid,
        /// The partition index.
        partition: i32,
        /// The leader epoch the request carried.
        requested_leader_epoch: i32,
        /// The partition epoch the request carried.
        requested_partition_epoch: i32,
        /// The controller's leader epoch of the partition.
        leader_epoch: i32,
        /// The controller's partition epoch of the partition.
        partition_epoch: i32,
    },
    /// `FENCED_LEADER_EPOCH` (74): the request's leader epoch is older than
    /// the partition's (AlterPartition from a deposed leader).
    #[error(
        "partition {partition} of topic id {topic_id}: leader epoch {requested} is older than \
         the current {current}"
    )]
    FencedLeaderEpoch {
        /// The topic id.
        topic_id: uuid::Uuid,
        /// The partition index.
        partition: i32,
        /// The leader epoch the request carried.
        requested: i32,
        /// The partition's current leader epoch.
        current: i32,
    },
    /// `INVALID_UPDATE_VERSION` (95): the request's partition epoch is
    /// older than the partition's (KIP-497: the ISR changed since the leader
    /// last saw it).
    #[error(
        "partition {partition} of topic id {topic_id}: partition epoch {requested} is not the \
         current {current}"
    )]
    InvalidUpdateVersion {
        /// The topic id.
        topic_id: uuid::Uuid,
        /// The partition index.
        partition: i32,
        /// The partition epoch the request carried.
        requested: i32,
        /// The partition's current partition epoch.
        current: i32,
    },
    /// `INELIGIBLE_REPLICA` (107): a proposed ISR member may not join it
    /// (KIP-841: not registered, fenced or shutting down; KIP-903: its broker
    /// epoch is not its current registration's).
    #[error(
        "partition {partition} of topic id {topic_id}: replica {broker_id} is ineligible for \
         the ISR: {reason}"
    )]
    IneligibleReplica {
        /// The topic id.
        topic_id: uuid::Uuid,
        /// The partition index.
        partition: i32,
        /// The first ineligible replica of the proposed ISR.
        broker_id: i32,
        /// Why, in Kafka's words ("not registered", "fenced", "broker epoch
        /// mismatch: requested=… VS expected=…").
        reason: String,
    },
    /// `UNKNOWN_SERVER_ERROR` (-1): Kafka's "Exhausted all producerIds".
    #[error("producer ids exhausted: next producer id is {next_producer_id}")]
    ProducerIdsExhausted {
        /// The next producer id that would have been handed out.
        next_producer_id: i64,
    },
    /// The configured `node.id` cannot be a raft node id (it is negative).
    #[error("invalid controller node id {node_id}: must be >= 0")]
    InvalidNodeId {
        /// The configured node id.
        node_id: i32,
    },
    /// `NOT_CONTROLLER` (41): this node is not the active controller.
    #[error("not the active controller; current leader is {leader:?}")]
    NotController {
        /// The current raft leader, if known.
        leader: Option<i32>,
    },
    /// The metadata log, vote or snapshot files could not be read or written.
    #[error("metadata storage error: {reason}")]
    Storage {
        /// The underlying error, rendered.
        reason: String,
    },
    /// The raft layer failed (stopped, fatal error).
    #[error("metadata quorum error: {reason}")]
    Raft {
        /// The underlying error, rendered.
        reason: String,
    },
    /// `UNACCEPTABLE_CREDENTIAL` (93): a SCRAM credential Kafka refuses
    /// (empty user name, iterations out of range); Kafka's message.
    #[error("{reason}")]
    UnacceptableCredential {
        /// Kafka's message.
        reason: String,
    },
    /// `DUPLICATE_RESOURCE` (92): a user altered twice in one request;
    /// Kafka's message.
    #[error("{reason}")]
    DuplicateResource {
        /// Kafka's message.
        reason: String,
    },
    /// `RESOURCE_NOT_FOUND` (91): a SCRAM credential to delete does not
    /// exist; Kafka's message.
    #[error("{reason}")]
    ResourceNotFound {
        /// Kafka's message.
        reason: String,
    },
    /// `UNSUPPORTED_SASL_MECHANISM` (33): not a SCRAM mechanism; Kafka's
    /// message.
    #[error("{reason}")]
    UnsupportedSaslMechanism {
        /// Kafka's message.
        reason: String,
    },
    /// `REQUEST_TIMED_OUT` (7): a bounded wait ran out.
    #[error("timed out after {waited_ms} ms waiting for {operation}")]
    Timeout {
        /// What was being waited for.
        operation: String,
        /// How long it waited, in milliseconds.
        waited_ms: u64,
    },
}

/// Kafka's messages for a CreatePartitions count that is not an increase.
fn partitions_not_increased_message(name: &str, current: i32, requested: i32) -> String {
    if current == requested {
        format!("Topic already has {current} partition(s).")
    } else {
        format!(
            "The topic {name} currently has {current} partition(s); {requested} would not be \
             an increase."
        )
    }
}

/// Kafka's INVALID_REPLICATION_FACTOR message for `requested` replicas with
/// `available` unfenced brokers.
fn invalid_replication_factor_message(requested: i16, available: usize) -> String {
    let reason = if requested <= 0 {
        format!("Invalid replication factor {requested}: the replication factor must be positive.")
    } else if available == 0 {
        "All brokers are currently fenced.".to_string()
    } else {
        format!(
            "The target replication factor of {requested} cannot be reached because only \
             {available} broker(s) are registered."
        )
    };
    format!("Unable to replicate the partition {requested} time(s): {reason}")
}
