//! The one place that maps Weir's internal errors to Kafka error codes
//! (DESIGN.md §7). Codes are from Kafka's `Errors.java` / the protocol guide.

use kafka_protocol::ResponseError;
use weir_controller::ControllerError;
use weir_storage::StorageError;

/// The Kafka error code a storage error is answered with.
pub fn storage_error_code(error: &StorageError) -> i16 {
    match error {
        StorageError::CorruptRecord { .. } => ResponseError::CorruptMessage.code(),
        StorageError::InvalidRecord { .. } => ResponseError::InvalidRecord.code(),
        StorageError::RecordBatchTooLarge { .. } => ResponseError::MessageTooLarge.code(),
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange.code(),
        StorageError::Io { .. }
        | StorageError::MalformedFile { .. }
        | StorageError::LogDirLocked { .. }
        | StorageError::NodeIdMismatch { .. }
        | StorageError::InconsistentTopicId { .. } => ResponseError::KafkaStorageError.code(),
        StorageError::OffsetOverflow { .. } => ResponseError::UnknownServerError.code(),
    }
}

/// The Kafka error code a controller error is answered with.
pub fn controller_error_code(error: &ControllerError) -> i16 {
    match error {
        ControllerError::TopicAlreadyExists { .. } => ResponseError::TopicAlreadyExists.code(),
        ControllerError::InvalidTopic { .. } => ResponseError::InvalidTopicException.code(),
        ControllerError::InvalidPartitions { .. } => ResponseError::InvalidPartitions.code(),
        ControllerError::InvalidReplicationFactor { .. } => {
            ResponseError::InvalidReplicationFactor.code()
        }
        ControllerError::InvalidReplicaAssignment { .. } => {
            ResponseError::InvalidReplicaAssignment.code()
        }
        ControllerError::UnknownTopic { .. } => ResponseError::UnknownTopicOrPartition.code(),
        ControllerError::UnknownTopicId { .. } => ResponseError::UnknownTopicId.code(),
        ControllerError::NotController { .. } => ResponseError::NotController.code(),
        ControllerError::Timeout { .. } => ResponseError::RequestTimedOut.code(),
        #[allow(unreachable_patterns)]
        _ => ResponseError::UnknownServerError.code(),
    }
}
