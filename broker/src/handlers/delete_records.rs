//! DeleteRecords (key 21), v0-2 (KIP-107): moves each partition's log start
//! offset forward, as Kafka's `ReplicaManager.deleteRecords`.
//!
//! - `offset` -1 means the high watermark; any other offset below 0 or above
//!   the high watermark is OFFSET_OUT_OF_RANGE.
//! - Internal topics (`__consumer_offsets`) answer INVALID_TOPIC_EXCEPTION.
//! - A topic whose `cleanup.policy` lacks `delete` answers POLICY_VIOLATION.
//! - Success answers the new low watermark: the log start offset (on a
//!   single node the leader is the only replica, so there is nothing to wait
//!   for and `timeout_ms` is not used).
//! - Reads below the new log start offset fail at once; segments wholly
//!   below it are deleted by the next retention pass. The log start offset
//!   checkpoint is written before the response, so the deletion survives a
//!   crash (Kafka defers it to its periodic checkpoint and relies on other
//!   replicas).

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use kafka_protocol::ResponseError;

use crate::context::BrokerContext;
use crate::error::storage_error_code;

/// Deletes records below the requested offsets; per-partition results in
/// request order.
pub async fn handle(
    ctx: &BrokerContext,
    _version: i16,
    request: DeleteRecordsRequest,
    auth: &crate::authorizer::RequestAuth<'_>,
) -> DeleteRecordsResponse {
    let mut response = DeleteRecordsResponse::default();
    let mut moved = false;
    for topic in request.topics {
        let mut t = DeleteRecordsTopicResult::default();
        t.name = topic.name.clone();
        // Kafka's handleDeleteRecordsRequest: Delete on the topic.
        let allowed = auth.topic(weir_controller::acl::AclOperation::Delete, &topic.name);
        for p in topic.partitions {
            let mut r = DeleteRecordsPartitionResult::default();
            r.partition_index = p.partition_index;
            r.low_watermark = -1;
            if !allowed {
                r.error_code = ResponseError::TopicAuthorizationFailed.code();
                t.partitions.push(r);
                continue;
            }
            // Kafka's ReplicaManager.deleteRecordsOnLocalLog refuses internal
            // topics before looking the partition up.
            if super::metadata::is_internal(&topic.name) {
                r.error_code = ResponseError::InvalidTopicException.code();
                t.partitions.push(r);
                continue;
            }
            match ctx
                .replica_manager
                .leader_partition(&topic.name, p.partition_index, || ctx.metadata())
            {
                Err(code) => r.error_code = code,
                Ok(partition) if !partition.cleanup_policy_allows_delete() => {
                    r.error_code = ResponseError::PolicyViolation.code();
                }
                Ok(partition) => {
                    let before = partition.log_start_offset();
                    match partition.delete_records(p.offset) {
                        Ok(low_watermark) => {
                            moved |= low_watermark != before;
                            r.low_watermark = low_watermark;
                        }
                        Err(e) => r.error_code = storage_error_code(&e),
                    }
                }
            }
            t.partitions.push(r);
        }
        response.topics.push(t);
    }
    if moved {
        let rm = ctx.replica_manager.clone();
        match tokio::task::spawn_blocking(move || rm.checkpoint()).await {
            Ok(Err(e)) => tracing::error!(error = %e, "log start offset checkpoint failed"),
            Err(e) => tracing::error!(error = %e, "log start offset checkpoint task failed"),
            Ok(Ok(())) => {}
        }
    }
    response
}
