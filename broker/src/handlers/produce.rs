//! Produce (key 0): advertised from v0 (librdkafka derives compression support
//! from it), served v3-11 (v0-2 are answered with UNSUPPORTED_VERSION by
//! `dispatch`; see `weir_protocol_compat::api_table`).
//!
//! Each partition's records must be exactly one magic-2 record batch (Kafka's
//! `ProduceRequest.validateRecords` for v3+). The batch is validated and
//! appended by storage without copying record bytes; acks=-1 then waits for
//! the group-committed fsync that covers it unless the topic has
//! `write.caching`, and any produce waits once `flush.messages` is reached.
//! zstd needs v7+ (KIP-110).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::ResponseError;
use weir_storage::{RecordBatchHeader, StorageError};

use super::{now_ms, str_bytes};
use crate::context::BrokerContext;
use crate::error::storage_error_code;
use crate::partition::Partition;

/// The client id allowed to produce to internal topics such as
/// `__consumer_offsets` (Kafka's `AdminUtils.ADMIN_CLIENT_ID`).
pub const ADMIN_CLIENT_ID: &str = "__admin_client";

/// Compression codec id of zstd in batch attributes.
const ZSTD: u8 = 4;

/// Position of the magic byte in a record batch.
const MAGIC_OFFSET: usize = 16;

/// Size of a record batch header (magic 2), bytes.
const RECORD_BATCH_OVERHEAD: usize = 61;

/// Appends every partition's batch; waits until they are durable where
/// [`Partition::ack_requires_flush`] says so (acks=-1 without
/// `write.caching`, or `flush.messages` reached).
///
/// Internal topics (`__consumer_offsets`, `__transaction_state`) refuse
/// appends with INVALID_TOPIC_EXCEPTION unless `internal_topics_allowed`
/// (the request's client id is [`ADMIN_CLIENT_ID`]), as Kafka's
/// `ReplicaManager.appendToLocalLog`.
///
/// All appends happen before the first await (see `network::connection`).
pub async fn handle(
    ctx: &BrokerContext,
    version: i16,
    internal_topics_allowed: bool,
    request: ProduceRequest,
) -> ProduceResponse {
    let acks = request.acks;
    let shared = ProduceContext {
        version,
        acks,
        internal_topics_allowed,
        has_transactional_id: request.transactional_id.is_some(),
        now_ms: now_ms(),
    };
    let mut response = ProduceResponse::default();
    let mut durable_waits: Vec<(usize, usize, Arc<Partition>, i64)> = Vec::new();
    for topic in request.topic_data {
        let mut topic_response = TopicProduceResponse::default();
        topic_response.name = topic.name.clone();
        for data in topic.partition_data {
            let mut p = PartitionProduceResponse::default();
            p.index = data.index;
            p.base_offset = -1;
            p.log_append_time_ms = -1;
            p.log_start_offset = -1;
            let result = if !matches!(acks, -1..=1) {
                Err(AppendFailure::from((
                    ResponseError::InvalidRequiredAcks.code(),
                    None,
                )))
            } else {
                append(ctx, &shared, &topic.name, data.index, data.records)
            };
            match result {
                Ok((partition, info, flush_due)) => {
                    p.base_offset = info.first_offset;
                    p.log_append_time_ms = info.log_append_time;
                    p.log_start_offset = partition.log_start_offset();
                    if partition.ack_requires_flush(acks, flush_due) {
                        let at = (
                            response.responses.len(),
                            topic_response.partition_responses.len(),
                        );
                        durable_waits.push((at.0, at.1, partition, info.last_offset + 1));
                    }
                }
                Err(failure) => {
                    p.error_code = failure.code;
                    p.error_message = failure.message.map(str_bytes);
                    if version >= 8 {
                        p.record_errors = failure.record_errors;
                    }
                }
            }
            topic_response.partition_responses.push(p);
        }
        response.responses.push(topic_response);
    }
    for (t, p, partition, end_offset) in durable_waits {
        if let Err(e) = partition.wait_durable(end_offset).await {
            tracing::error!(topic_partition = ?partition.topic_partition(), error = %e, "fsync failed");
            let r = &mut response.responses[t].partition_responses[p];
            r.error_code = storage_error_code(&e);
            r.error_message = Some(str_bytes(e.to_string()));
            r.base_offset = -1;
        }
    }
    response
}

type AppendResult = Result<(Arc<Partition>, weir_storage::LogAppendInfo, bool), AppendFailure>;

/// Why a partition's records were refused: the error code and message, and
/// for INVALID_RECORD the offending record's index (`record_errors`,
/// Produce v8+, KIP-467).
struct AppendFailure {
    code: i16,
    message: Option<String>,
    record_errors: Vec<BatchIndexAndErrorMessage>,
}

impl From<(i16, Option<String>)> for AppendFailure {
    fn from((code, message): (i16, Option<String>)) -> Self {
        AppendFailure {
            code,
            message,
            record_errors: Vec::new(),
        }
    }
}

impl From<StorageError> for AppendFailure {
    fn from(e: StorageError) -> Self {
        let record_errors = match &e {
            StorageError::RecordWithoutKey { record_index, .. } => {
                let mut record_error = BatchIndexAndErrorMessage::default();
                record_error.batch_index = *record_index as i32;
                record_error.batch_index_error_message = Some(str_bytes(e.to_string()));
                vec![record_error]
            }
            _ => Vec::new(),
        };
        AppendFailure {
            code: storage_error_code(&e),
            message: Some(e.to_string()),
            record_errors,
        }
    }
}

/// What every partition of one Produce request shares.
struct ProduceContext {
    version: i16,
    acks: i16,
    internal_topics_allowed: bool,
    has_transactional_id: bool,
    now_ms: i64,
}

fn invalid_record(message: &str) -> AppendFailure {
    AppendFailure::from((
        ResponseError::InvalidRecord.code(),
        Some(message.to_string()),
    ))
}

/// Validates one partition's records as Kafka's `ProduceRequest.validateRecords`
/// and `Partition.appendRecordsToLeader` do, then appends them.
fn append(
    ctx: &BrokerContext,
    request: &ProduceContext,
    topic: &str,
    index: i32,
    records: Option<Bytes>,
) -> AppendResult {
    if !request.internal_topics_allowed && super::metadata::is_internal(topic) {
        return Err(AppendFailure::from((
            ResponseError::InvalidTopicException.code(),
            Some(format!("Cannot append to internal topic {topic}")),
        )));
    }
    let partition = ctx
        .replica_manager
        .leader_partition(topic, index, || ctx.metadata())
        .map_err(|code| (code, None))?;
    let records = records.ok_or_else(|| invalid_record("records are null"))?;
    if records.len() < RECORD_BATCH_OVERHEAD {
        return Err(invalid_record(
            "records are shorter than a record batch header",
        ));
    }
    if records[MAGIC_OFFSET] != 2 {
        return Err(invalid_record(
            "Produce v3+ requires record batches with magic 2",
        ));
    }
    let header = RecordBatchHeader::parse(&records)?;
    if header.size_in_bytes() != records.len() {
        return Err(invalid_record(
            "a produce request must hold exactly one record batch per partition",
        ));
    }
    if header.is_control() {
        return Err(invalid_record("clients may not produce control batches"));
    }
    if header.is_transactional() {
        // Transactions are not served yet: without a transactional id Kafka
        // refuses the batch; with one there is no ongoing transaction.
        let code = if request.has_transactional_id {
            ResponseError::InvalidTxnState.code()
        } else {
            ResponseError::TransactionalIdAuthorizationFailed.code()
        };
        return Err(AppendFailure::from((
            code,
            Some("transactional batches are not supported yet".to_string()),
        )));
    }
    if header.compression_codec() == ZSTD && request.version < 7 {
        return Err(AppendFailure::from((
            ResponseError::UnsupportedCompressionType.code(),
            Some("zstd needs Produce v7 or later".to_string()),
        )));
    }
    if header.compression_codec() != 0 {
        let require_keys = partition
            .is_compacted()
            .then(|| partition.topic_partition());
        weir_storage::compression::validate_compressed_batch(&header, &records, require_keys)?;
    }
    if request.acks == -1 {
        partition.check_enough_replicas().map_err(|code| {
            (
                code,
                Some("the ISR is smaller than min.insync.replicas".to_string()),
            )
        })?;
    }
    let (info, flush_due) = partition.append_records_as_leader(&records, request.now_ms)?;
    if !info.duplicate {
        metrics::counter!("weir_produced_bytes_total").increment(records.len() as u64);
    }
    Ok((partition, info, flush_due))
}
