//! Produce (key 0): advertised from v0 (librdkafka derives compression support
//! from it), served v3-11 (v0-2 are answered with UNSUPPORTED_VERSION by
//! `dispatch`; see `weir_protocol_compat::api_table`).
//!
//! Each partition's records must be exactly one magic-2 record batch (Kafka's
//! `ProduceRequest.validateRecords` for v3+). A request is served in three
//! steps:
//!
//! 1. header checks, in request order, before the first await;
//! 2. the records of compressed batches are validated by streaming them out
//!    of their codec (Kafka's `LogValidator`), on a blocking thread, at most
//!    [`validation_threads`] at once, with one
//!    [`DecompressionBudget`] of [`MAX_DECOMPRESSED_REQUEST_BYTES`] for the
//!    whole request: a decompression bomb costs its sender, never the
//!    runtime threads that serve other connections;
//! 3. the appends, in the order the connection's requests arrived
//!    ([`AppendOrder`]), then acks=-1 waits for the group-committed fsync
//!    that covers them unless the topic has `write.caching`, and any produce
//!    waits once `flush.messages` is reached; acks=-1 then waits for the
//!    high watermark (Kafka's DelayedProduce). Every partition of the
//!    request waits at once.
//!
//! Uncompressed batches are validated by storage during the append (a scan
//! of bytes already in memory). zstd needs v7+ (KIP-110).

use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::ResponseError;
use tokio::sync::{oneshot, Semaphore};
use weir_controller::acl::AclOperation;
use weir_storage::batch::ValidatedRecords;
use weir_storage::compression::{DecompressionBudget, MAX_DECOMPRESSED_REQUEST_BYTES};
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

/// How many compressed-batch validations run at once, broker-wide: the
/// machine's available parallelism (at least 1). They run on tokio's
/// blocking pool (`spawn_blocking`), but never more than this many, so that
/// requests full of bombs occupy at most as many threads as there are cores
/// and leave the runtime's worker threads their share of the CPU, and leave
/// the blocking pool's other threads (512 by default) to fsyncs and file
/// I/O; further validations wait in FIFO order (a fair semaphore). Kafka's
/// equivalent bound is its `num.io.threads` request handlers.
pub fn validation_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

static VALIDATION_SLOTS: LazyLock<Arc<Semaphore>> =
    LazyLock::new(|| Arc::new(Semaphore::new(validation_threads())));

/// The order in which one connection's Produce requests append: each takes
/// a turn before its first await (requests are first polled in arrival
/// order, see `network::connection`) and appends only after the turn before
/// it has appended or given up. Validation of compressed batches, which
/// awaits, may thus overlap, while appends keep the order sent, as Kafka's
/// one-request-at-a-time channel muting guarantees. A request with no
/// compressed batch whose predecessors have appended does not await at all.
#[derive(Debug, Default)]
pub struct AppendOrder {
    last: Mutex<Option<oneshot::Receiver<()>>>,
}

impl AppendOrder {
    /// Takes the next turn. Call it before the first await.
    pub fn next_turn(&self) -> AppendTurn {
        let (done, next) = oneshot::channel();
        let previous = self
            .last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(next);
        AppendTurn {
            previous,
            _done: done,
        }
    }
}

/// One request's place in its connection's [`AppendOrder`]; dropping it
/// (after appending, or when the request is cancelled) lets the next
/// request append.
#[derive(Debug)]
pub struct AppendTurn {
    previous: Option<oneshot::Receiver<()>>,
    _done: oneshot::Sender<()>,
}

impl AppendTurn {
    /// Waits until every earlier request of the connection has appended.
    pub async fn wait(&mut self) {
        if let Some(previous) = self.previous.take() {
            // Err: the sender was dropped, i.e. the earlier request is done.
            let _ = previous.await;
        }
    }
}

/// One partition's records between the checks and the append.
struct Prepared {
    partition: Arc<Partition>,
    records: Bytes,
    /// The validation outcome of a compressed batch.
    compressed: Option<ValidatedRecords>,
}

/// A compressed batch to validate off the runtime.
struct ValidationJob {
    slot: usize,
    partition: Arc<Partition>,
    header: RecordBatchHeader,
    records: Bytes,
}

/// Validates, in order, every batch of `jobs` on a blocking thread under
/// one request-wide [`DecompressionBudget`]. The slot is held by the
/// blocking task itself, so a cancelled request still counts until its
/// validation ends.
async fn validate_off_runtime(
    jobs: Vec<ValidationJob>,
    now_ms: i64,
) -> Vec<(usize, Result<ValidatedRecords, StorageError>)> {
    let slots: Vec<usize> = jobs.iter().map(|j| j.slot).collect();
    // The slot is waited for and held by a task of its own, never by the
    // request's future: a request whose connection stops polling it (its
    // client does not read) must not keep the broker-wide slot that the
    // fair semaphore handed to it (finding of the issue 15 review; test
    // hostile::validation::a_client_that_never_reads_does_not_hold_the_validation_slots).
    let validated = tokio::spawn(async move {
        let permit = VALIDATION_SLOTS.clone().acquire_owned().await;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let mut budget = DecompressionBudget::new(MAX_DECOMPRESSED_REQUEST_BYTES);
            jobs.into_iter()
                .map(|job| {
                    let config = job.partition.log_config();
                    let rules = config.record_rules(job.partition.topic_partition(), now_ms);
                    let result = weir_storage::compression::validate_compressed_batch(
                        &job.header,
                        &job.records,
                        &rules,
                        &mut budget,
                    );
                    (job.slot, result)
                })
                .collect()
        })
        .await
    })
    .await
    .and_then(|joined| joined);
    validated.unwrap_or_else(|e| {
        slots
            .into_iter()
            .map(|slot| {
                let reason = format!("record validation failed: {e}");
                (slot, Err(StorageError::InvalidRecord { reason }))
            })
            .collect()
    })
}

/// Appends every partition's batch; waits until they are durable where
/// [`Partition::ack_requires_flush`] says so (acks=-1 without
/// `write.caching`, or `flush.messages` reached).
///
/// Internal topics (`__consumer_offsets`, `__transaction_state`) refuse
/// appends with INVALID_TOPIC_EXCEPTION unless `internal_topics_allowed`
/// (the request's client id is [`ADMIN_CLIENT_ID`]), as Kafka's
/// `ReplicaManager.appendToLocalLog`.
///
/// `order` is the connection's [`AppendOrder`]: the turn is taken before
/// the first await.
pub async fn handle(
    ctx: &BrokerContext,
    version: i16,
    internal_topics_allowed: bool,
    request: ProduceRequest,
    order: &AppendOrder,
    auth: &crate::authorizer::RequestAuth<'_>,
) -> ProduceResponse {
    let mut turn = order.next_turn();
    let acks = request.acks;
    let timeout_ms = request.timeout_ms;
    let shared = ProduceContext {
        version,
        acks,
        internal_topics_allowed,
        has_transactional_id: request.transactional_id.is_some(),
        now_ms: now_ms(),
    };
    let pending = ctx.replica_manager.pending_leadership(
        &ctx.metadata(),
        request.topic_data.iter().flat_map(|t| {
            t.partition_data
                .iter()
                .map(move |d| (t.name.0.as_str(), d.index))
        }),
    );
    if let Some(offset) = pending {
        let max_wait = Duration::from_millis(timeout_ms.max(0) as u64);
        ctx.replica_manager.wait_for_applied(offset, max_wait).await;
    }
    let mut response = ProduceResponse::default();
    // Per partition, in request order: where its answer goes and what is
    // left to do.
    let mut slots: Vec<((usize, usize), Result<Prepared, AppendFailure>)> = Vec::new();
    let mut jobs = Vec::new();
    for topic in request.topic_data {
        let mut topic_response = TopicProduceResponse::default();
        topic_response.name = topic.name.clone();
        // Kafka's KafkaApis.handleProduceRequest: Write on the topic, else
        // TOPIC_AUTHORIZATION_FAILED before any other check.
        let allowed = auth.topic(AclOperation::Write, &topic.name);
        for data in topic.partition_data {
            let mut p = PartitionProduceResponse::default();
            p.index = data.index;
            p.base_offset = -1;
            p.log_append_time_ms = -1;
            p.log_start_offset = -1;
            let prepared = if !allowed {
                Err(AppendFailure::from((
                    ResponseError::TopicAuthorizationFailed.code(),
                    None,
                )))
            } else if !matches!(acks, -1..=1) {
                Err(AppendFailure::from((
                    ResponseError::InvalidRequiredAcks.code(),
                    None,
                )))
            } else {
                prepare(ctx, &shared, &topic.name, data.index, data.records)
            };
            let at = (
                response.responses.len(),
                topic_response.partition_responses.len(),
            );
            if let Ok((prepared, Some(header))) = &prepared {
                jobs.push(ValidationJob {
                    slot: slots.len(),
                    partition: prepared.partition.clone(),
                    header: *header,
                    records: prepared.records.clone(),
                });
            }
            slots.push((at, prepared.map(|(prepared, _)| prepared)));
            topic_response.partition_responses.push(p);
        }
        response.responses.push(topic_response);
    }
    if !jobs.is_empty() {
        for (slot, outcome) in validate_off_runtime(jobs, shared.now_ms).await {
            let (_, prepared) = &mut slots[slot];
            match outcome {
                Ok(validated) => {
                    if let Ok(prepared) = prepared {
                        prepared.compressed = Some(validated);
                    }
                }
                Err(e) => *prepared = Err(AppendFailure::from(e)),
            }
        }
    }
    turn.wait().await;
    // Per appended partition that must wait before its answer: the answer
    // slot and what to wait for.
    let mut waits: Vec<((usize, usize), AckWait)> = Vec::new();
    for ((t, p), prepared) in slots {
        let r = &mut response.responses[t].partition_responses[p];
        let epoch = prepared.as_ref().map_or(-1, |p| p.partition.leader_epoch());
        match prepared.and_then(|prepared| append(&shared, prepared)) {
            Ok((partition, info, flush_due)) => {
                r.base_offset = info.first_offset;
                r.log_append_time_ms = info.log_append_time;
                r.log_start_offset = partition.log_start_offset();
                let durable = partition.ack_requires_flush(acks, flush_due);
                if durable || acks == -1 {
                    waits.push((
                        (t, p),
                        AckWait {
                            partition,
                            end_offset: info.last_offset + 1,
                            durable,
                            // acks=all: wait for the high watermark (Kafka's
                            // DelayedProduce) in the epoch appended in.
                            replicated_in_epoch: (acks == -1).then_some(epoch),
                        },
                    ));
                }
            }
            Err(failure) => {
                r.error_code = failure.code;
                r.error_message = failure.message.map(str_bytes);
                if version >= 8 {
                    r.record_errors = failure.record_errors;
                }
            }
        }
    }
    drop(turn);
    // Every partition waits at once (its flush and its followers run in
    // parallel with the others'); Kafka's DelayedProduce times out
    // `timeout_ms` after the appends.
    let deadline =
        tokio::time::Instant::now() + std::time::Duration::from_millis(timeout_ms.max(0) as u64);
    for ((t, p), outcome) in wait_for_acks(waits, deadline).await {
        if let Err((code, message, keep_base_offset)) = outcome {
            let r = &mut response.responses[t].partition_responses[p];
            r.error_code = code;
            r.error_message = Some(str_bytes(message));
            if !keep_base_offset {
                r.base_offset = -1;
            }
        }
    }
    response
}

/// Runs every partition's [`AckWait`] at once (scope 3 of issue 18: a
/// request's partitions flush and replicate in parallel, each flush shared
/// with every other waiter on that log); returns each slot with its
/// outcome, in the order given.
async fn wait_for_acks<T>(
    waits: Vec<(T, AckWait)>,
    deadline: tokio::time::Instant,
) -> Vec<(T, Result<(), (i16, String, bool)>)> {
    futures::future::join_all(
        waits
            .into_iter()
            .map(|(at, wait)| async move { (at, wait.run(deadline).await) }),
    )
    .await
}

/// What one appended partition waits for before its answer.
struct AckWait {
    partition: Arc<Partition>,
    /// The offset after the appended batch.
    end_offset: i64,
    /// Wait until the batch is fsynced ([`Partition::ack_requires_flush`]).
    durable: bool,
    /// acks=all: wait until the high watermark passes the batch, while the
    /// partition is still led in this leader epoch.
    replicated_in_epoch: Option<i32>,
}

impl AckWait {
    /// Waits for the fsync, then for replication, until `deadline`.
    ///
    /// # Errors
    /// `(error code, message, keep base offset)`: KAFKA_STORAGE_ERROR and
    /// friends when the fsync failed (see [`storage_error_code`]); the
    /// [`ReplicationWait`](crate::partition::ReplicationWait) code when the
    /// high watermark did not pass the batch, with the base offset kept for
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND (the batch is in the log), as Kafka.
    async fn run(self, deadline: tokio::time::Instant) -> Result<(), (i16, String, bool)> {
        let partition = &self.partition;
        if self.durable {
            if let Err(e) = partition.wait_durable(self.end_offset).await {
                if matches!(e, StorageError::LogDeleted { .. }) {
                    tracing::debug!(topic_partition = ?partition.topic_partition(), "partition deleted before its produce was durable");
                } else {
                    tracing::error!(topic_partition = ?partition.topic_partition(), error = %e, "fsync failed");
                }
                return Err((storage_error_code(&e), e.to_string(), false));
            }
        }
        if let Some(epoch) = self.replicated_in_epoch {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if let Err(wait) = partition
                .wait_replicated(self.end_offset, epoch, left)
                .await
            {
                let keep = wait == crate::partition::ReplicationWait::NotEnoughReplicasAfterAppend;
                return Err((wait.code(), wait.message().to_string(), keep));
            }
        }
        Ok(())
    }
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
            StorageError::RecordWithoutKey { record_index, .. }
            | StorageError::InvalidTimestamp { record_index, .. } => {
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

/// Checks one partition's records as Kafka's `ProduceRequest.validateRecords`
/// and `Partition.appendRecordsToLeader` do, up to what needs decompression;
/// returns the header of a compressed batch, whose records are still to be
/// validated.
fn prepare(
    ctx: &BrokerContext,
    request: &ProduceContext,
    topic: &str,
    index: i32,
    records: Option<Bytes>,
) -> Result<(Prepared, Option<RecordBatchHeader>), AppendFailure> {
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
    let compressed = (header.compression_codec() != 0).then_some(header);
    if compressed.is_some() {
        // Kafka's `UnifiedLog.analyzeAndValidateRecords` checks the size
        // and CRC before `LogValidator` decompresses anything.
        let max = partition.log_config().max_message_bytes;
        if records.len() > max {
            return Err(StorageError::RecordBatchTooLarge {
                size: records.len(),
                max,
            }
            .into());
        }
        RecordBatchHeader::validate(&records)?;
    }
    Ok((
        Prepared {
            partition,
            records,
            compressed: None,
        },
        compressed,
    ))
}

/// Appends one partition's prepared records (the compressed batch's
/// validation outcome included).
fn append(request: &ProduceContext, prepared: Prepared) -> AppendResult {
    let Prepared {
        partition,
        records,
        compressed,
    } = prepared;
    if request.acks == -1 {
        partition.check_enough_replicas().map_err(|code| {
            (
                code,
                Some("the ISR is smaller than min.insync.replicas".to_string()),
            )
        })?;
    }
    let compressed: &[ValidatedRecords] = compressed.as_slice();
    let (info, flush_due) = partition.append_produced(&records, request.now_ms, compressed)?;
    if !info.duplicate {
        metrics::counter!("weir_produced_bytes_total").increment(records.len() as u64);
    }
    Ok((partition, info, flush_due))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use weir_storage::fs::faulty::FaultyFileSystem;
    use weir_storage::TopicPartition;

    use super::{wait_for_acks, AckWait};
    use crate::partition::tests::{batch, eventually, partition_on};

    /// Issue 18 scope 3: an acks=all request's partitions wait at once.
    /// Both logs' fdatasyncs are held at the disk's gate; with the waits
    /// run one partition after another only the first would ever reach it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_acks_all_request_flushes_its_partitions_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFileSystem::new(dir.path()).unwrap());
        let mut waits = Vec::new();
        for p in 0..2 {
            let tp = TopicPartition::new("acks-all", p);
            let log_dir = dir.path().join(format!("acks-all-{p}"));
            let partition = Arc::new(partition_on(fs.clone(), &log_dir, tp));
            let (info, _) = partition
                .append_records_as_leader(&batch(&format!("p{p}")), 0)
                .unwrap();
            waits.push((
                p,
                AckWait {
                    partition,
                    end_offset: info.last_offset + 1,
                    durable: true,
                    replicated_in_epoch: None,
                },
            ));
        }
        let _held = fs.hold_syncs_until_dropped();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let answered = tokio::spawn(wait_for_acks(waits, deadline));
        eventually("both partitions' fdatasyncs to start", || {
            fs.syncs_waiting() == 2
        });
        fs.release_syncs();
        let outcomes = tokio::time::timeout(Duration::from_secs(30), answered)
            .await
            .expect("the acks=all waits hung")
            .unwrap();
        assert_eq!(
            outcomes
                .iter()
                .map(|(p, o)| (*p, o.is_ok()))
                .collect::<Vec<_>>(),
            vec![(0, true), (1, true)]
        );
    }
}
