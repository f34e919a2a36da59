//! The one place that maps Weir's internal errors to Kafka error codes
//! (Kafka's `Errors.java` / the protocol guide's error table).
//! The matches are exhaustive so that a new variant cannot go unmapped.

use kafka_protocol::ResponseError;
use weir_controller::ControllerError;
use weir_storage::StorageError;

use crate::group::GroupStoreError;

/// The Kafka error code a storage error is answered with.
pub fn storage_error_code(error: &StorageError) -> i16 {
    match error {
        StorageError::CorruptRecord { .. } => ResponseError::CorruptMessage.code(),
        StorageError::InvalidRecord { .. } | StorageError::RecordWithoutKey { .. } => {
            ResponseError::InvalidRecord.code()
        }
        StorageError::InvalidTimestamp { .. } => ResponseError::InvalidTimestamp.code(),
        StorageError::LogDeleted { .. } => ResponseError::NotLeaderOrFollower.code(),
        StorageError::RecordBatchTooLarge { .. } => ResponseError::MessageTooLarge.code(),
        StorageError::OffsetOutOfRange { .. }
        | StorageError::LogStartOffsetBeyondHighWatermark { .. } => {
            ResponseError::OffsetOutOfRange.code()
        }
        StorageError::Io { .. }
        | StorageError::MalformedFile { .. }
        | StorageError::LogDirLocked { .. }
        | StorageError::NodeIdMismatch { .. }
        | StorageError::AlreadyFormatted { .. }
        | StorageError::InconsistentTopicId { .. } => ResponseError::KafkaStorageError.code(),
        StorageError::OffsetOverflow { .. }
        | StorageError::UnexpectedAppendOffset { .. }
        | StorageError::OffsetsOutOfOrder { .. } => ResponseError::UnknownServerError.code(),
        StorageError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber.code(),
        StorageError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch.code(),
    }
}

/// The Kafka error code a controller error is answered with.
pub fn controller_error_code(error: &ControllerError) -> i16 {
    match error {
        ControllerError::TopicAlreadyExists { .. } => ResponseError::TopicAlreadyExists.code(),
        ControllerError::InvalidTopic { .. } => ResponseError::InvalidTopicException.code(),
        ControllerError::InvalidPartitions { .. }
        | ControllerError::PartitionCountNotIncreased { .. } => {
            ResponseError::InvalidPartitions.code()
        }
        ControllerError::InvalidReplicationFactor { .. } => {
            ResponseError::InvalidReplicationFactor.code()
        }
        ControllerError::InvalidReplicaAssignment { .. } => {
            ResponseError::InvalidReplicaAssignment.code()
        }
        ControllerError::InvalidRequest { .. } => ResponseError::InvalidRequest.code(),
        ControllerError::PolicyViolation { .. } => ResponseError::PolicyViolation.code(),
        ControllerError::RecordBatchTooLarge { .. } => ResponseError::RecordListTooLarge.code(),
        ControllerError::ThrottlingQuotaExceeded { .. } => {
            ResponseError::ThrottlingQuotaExceeded.code()
        }
        ControllerError::UnknownTopic { .. } | ControllerError::UnknownPartition { .. } => {
            ResponseError::UnknownTopicOrPartition.code()
        }
        ControllerError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch.code(),
        ControllerError::InvalidUpdateVersion { .. } => ResponseError::InvalidUpdateVersion.code(),
        ControllerError::IneligibleReplica { .. } => ResponseError::IneligibleReplica.code(),
        ControllerError::UnknownTopicId { .. } => ResponseError::UnknownTopicId.code(),
        ControllerError::StaleBrokerEpoch { .. } => ResponseError::StaleBrokerEpoch.code(),
        ControllerError::NotController { .. }
        | ControllerError::EpochNewerThanController { .. } => ResponseError::NotController.code(),
        ControllerError::Timeout { .. } => ResponseError::RequestTimedOut.code(),
        ControllerError::UnacceptableCredential { .. } => {
            ResponseError::UnacceptableCredential.code()
        }
        ControllerError::DuplicateResource { .. } => ResponseError::DuplicateResource.code(),
        ControllerError::ResourceNotFound { .. } => ResponseError::ResourceNotFound.code(),
        ControllerError::UnsupportedSaslMechanism { .. } => {
            ResponseError::UnsupportedSaslMechanism.code()
        }
        ControllerError::ProducerIdsExhausted { .. }
        | ControllerError::InvalidNodeId { .. }
        | ControllerError::Storage { .. }
        | ControllerError::Raft { .. } => ResponseError::UnknownServerError.code(),
    }
}

/// The error a group-metadata write failure is answered with (SyncGroup,
/// JoinGroup of a static member, DeleteGroups), following the contract of
/// [`GroupStoreError`]'s variants (Kafka's
/// `appendGroupMetadataErrorToResponseError`).
pub fn group_metadata_store_error(error: &GroupStoreError) -> ResponseError {
    match error {
        GroupStoreError::NotAvailable { .. } => ResponseError::CoordinatorNotAvailable,
        // A failed disk makes the client look for the coordinator again.
        GroupStoreError::NotCoordinator { .. } | GroupStoreError::Storage(_) => {
            ResponseError::NotCoordinator
        }
        GroupStoreError::RecordTooLarge { .. } => ResponseError::UnknownServerError,
    }
}

/// The error an offset write failure is answered with (OffsetCommit,
/// OffsetDelete): as for group metadata, Kafka 4's
/// `CoordinatorOperationExceptionHelper.handleOperationException`.
pub fn offset_commit_store_error(error: &GroupStoreError) -> ResponseError {
    group_metadata_store_error(error)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn io() -> std::io::Error {
        std::io::Error::other("disk")
    }

    #[test]
    fn storage_errors_map_to_kafka_codes() {
        let p = PathBuf::from("/x");
        let table: Vec<(StorageError, i16)> = vec![
            (
                StorageError::CorruptRecord {
                    reason: "crc".into(),
                },
                2,
            ),
            (
                StorageError::InvalidRecord {
                    reason: "count".into(),
                },
                87,
            ),
            (
                StorageError::RecordWithoutKey {
                    topic_partition: "t-0".into(),
                    record_index: 0,
                },
                87,
            ),
            (
                StorageError::InvalidTimestamp {
                    record_index: 0,
                    reason: "future".into(),
                },
                32,
            ),
            (
                StorageError::LogDeleted {
                    topic_partition: "t-0".into(),
                },
                6,
            ),
            (StorageError::RecordBatchTooLarge { size: 2, max: 1 }, 10),
            (
                StorageError::UnexpectedAppendOffset {
                    first_offset: 1,
                    last_offset: 2,
                    log_end_offset: 5,
                },
                -1,
            ),
            (
                StorageError::OffsetsOutOfOrder {
                    base_offset: 1,
                    previous_last_offset: 3,
                },
                -1,
            ),
            (
                StorageError::OffsetOutOfRange {
                    requested: 9,
                    log_start: 0,
                    log_end: 1,
                },
                1,
            ),
            (
                StorageError::LogStartOffsetBeyondHighWatermark {
                    requested: 9,
                    high_watermark: 3,
                },
                1,
            ),
            (
                StorageError::Io {
                    op: "write",
                    path: p.clone(),
                    source: io(),
                },
                56,
            ),
            (
                StorageError::MalformedFile {
                    path: p.clone(),
                    reason: "x".into(),
                },
                56,
            ),
            (StorageError::LogDirLocked { path: p.clone() }, 56),
            (
                StorageError::NodeIdMismatch {
                    path: p.clone(),
                    found: 2,
                    expected: 1,
                },
                56,
            ),
            (
                StorageError::AlreadyFormatted {
                    path: p.clone(),
                    cluster_id: "c".into(),
                    node_id: 1,
                },
                56,
            ),
            (
                StorageError::InconsistentTopicId {
                    path: p.clone(),
                    existing: "a".into(),
                    requested: "b".into(),
                },
                56,
            ),
            (
                StorageError::OffsetOverflow {
                    offset: 1,
                    log_end: 0,
                },
                -1,
            ),
            (
                StorageError::OutOfOrderSequence {
                    producer_id: 1,
                    expected: 3,
                    found: 5,
                },
                45,
            ),
            (
                StorageError::InvalidProducerEpoch {
                    producer_id: 1,
                    current: 2,
                    found: 1,
                },
                47,
            ),
        ];
        for (error, code) in table {
            assert_eq!(storage_error_code(&error), code, "{error}");
        }
    }

    #[test]
    fn controller_errors_map_to_kafka_codes() {
        let table: Vec<(ControllerError, i16)> = vec![
            (ControllerError::TopicAlreadyExists { name: "t".into() }, 36),
            (
                ControllerError::InvalidTopic {
                    name: "t".into(),
                    reason: "r".into(),
                },
                17,
            ),
            (
                ControllerError::InvalidPartitions {
                    name: "t".into(),
                    requested: 0,
                },
                37,
            ),
            (
                ControllerError::PartitionCountNotIncreased {
                    name: "t".into(),
                    current: 2,
                    requested: 2,
                },
                37,
            ),
            (
                ControllerError::InvalidReplicationFactor {
                    requested: 3,
                    available: 1,
                },
                38,
            ),
            (
                ControllerError::InvalidReplicaAssignment { reason: "r".into() },
                39,
            ),
            (ControllerError::InvalidRequest { reason: "r".into() }, 42),
            (ControllerError::PolicyViolation { reason: "r".into() }, 44),
            (
                ControllerError::RecordBatchTooLarge { reason: "r".into() },
                18,
            ),
            (
                ControllerError::ThrottlingQuotaExceeded {
                    throttle_time_ms: 1,
                },
                89,
            ),
            (
                ControllerError::UnsupportedSaslMechanism { reason: "r".into() },
                33,
            ),
            (ControllerError::ResourceNotFound { reason: "r".into() }, 91),
            (
                ControllerError::DuplicateResource { reason: "r".into() },
                92,
            ),
            (
                ControllerError::UnacceptableCredential { reason: "r".into() },
                93,
            ),
            (ControllerError::UnknownTopic { name: "t".into() }, 3),
            (
                ControllerError::UnknownPartition {
                    topic_id: uuid::Uuid::nil(),
                    partition: 7,
                },
                3,
            ),
            (
                ControllerError::EpochNewerThanController {
                    topic_id: uuid::Uuid::nil(),
                    partition: 0,
                    requested_leader_epoch: 2,
                    requested_partition_epoch: 2,
                    leader_epoch: 1,
                    partition_epoch: 1,
                },
                41,
            ),
            (
                ControllerError::FencedLeaderEpoch {
                    topic_id: uuid::Uuid::nil(),
                    partition: 0,
                    requested: 1,
                    current: 2,
                },
                74,
            ),
            (
                ControllerError::InvalidUpdateVersion {
                    topic_id: uuid::Uuid::nil(),
                    partition: 0,
                    requested: 1,
                    current: 2,
                },
                95,
            ),
            (
                ControllerError::IneligibleReplica {
                    topic_id: uuid::Uuid::nil(),
                    partition: 0,
                    broker_id: 3,
                    reason: "fenced".into(),
                },
                107,
            ),
            (
                ControllerError::UnknownTopicId {
                    id: uuid::Uuid::nil(),
                },
                100,
            ),
            (
                ControllerError::StaleBrokerEpoch {
                    broker_id: 1,
                    requested: 1,
                    current: Some(2),
                },
                77,
            ),
            (
                ControllerError::ProducerIdsExhausted {
                    next_producer_id: i64::MAX,
                },
                -1,
            ),
            (ControllerError::InvalidNodeId { node_id: -1 }, -1),
            (ControllerError::NotController { leader: None }, 41),
            (ControllerError::Storage { reason: "r".into() }, -1),
            (ControllerError::Raft { reason: "r".into() }, -1),
            (
                ControllerError::Timeout {
                    operation: "create".into(),
                    waited_ms: 1,
                },
                7,
            ),
        ];
        for (error, code) in table {
            assert_eq!(controller_error_code(&error), code, "{error}");
        }
    }
    #[test]
    fn group_store_errors_map_to_kafka_codes() {
        let table: Vec<(GroupStoreError, i16, i16)> = vec![
            (
                GroupStoreError::NotAvailable {
                    partition: 1,
                    reason: "x".into(),
                },
                15,
                15,
            ),
            (GroupStoreError::NotCoordinator { partition: 1 }, 16, 16),
            (GroupStoreError::RecordTooLarge { size: 9 }, -1, -1),
            (GroupStoreError::Storage("eio".into()), 16, 16),
        ];
        for (error, metadata, commit) in table {
            assert_eq!(
                group_metadata_store_error(&error).code(),
                metadata,
                "{error}"
            );
            assert_eq!(offset_commit_store_error(&error).code(), commit, "{error}");
        }
    }
}
