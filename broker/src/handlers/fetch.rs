//! Fetch (key 1), v4-17, for consumers and followers.
//!
//! - Whole batches are returned; a fetch offset inside a batch returns that
//!   batch (case C02). Record bytes never pass through user space: storage
//!   hands out `FileSlice`s and the connection sends them with `sendfile`.
//! - Limits (KIP-74): `max_bytes` for the response, lowered to the broker's
//!   `fetch.max.bytes` (Kafka's `KafkaApis.handleFetchRequest`), and
//!   `partition_max_bytes` per partition, except that the first batch of the
//!   first non-empty partition is returned whole even when larger (case C04).
//! - A partition named more than once is fetched once, at the place it was
//!   first named, with what it was last named with (Kafka's
//!   `FetchRequest.fetchData` collects partitions into a `LinkedHashMap`);
//!   a topic named more than once is answered once.
//! - Parking (Kafka's `ReplicaManager.fetchMessages` and `DelayedFetch`):
//!   with fewer than `min_bytes` read, the request parks in a
//!   [`DelayedFetch`] holding where each partition's read began; woken by
//!   appends, high watermark rises and leadership changes, it compares
//!   offsets and positions without reading the log, and the logs are read
//!   once more only when it completes or `max_wait_ms` passes (case C08).
//!   Errors and diverging epochs answer at once.
//! - Fetch sessions (KIP-227, [`crate::fetch_session`]): a follower's full
//!   fetch `(0, 0)` creates a session; its incremental fetches name only
//!   what changed, every active partition of the session is read (and the
//!   follower's fetch recorded for each) and only partitions with records,
//!   an error, a diverging epoch or a changed high watermark, last stable
//!   offset or log start offset are answered. Past Kafka, partitions a
//!   read found quiet (nothing to send, the follower at the log end and in
//!   the ISR) are skipped until they change; a parked fetch also completes
//!   when one of them changes, and then reads it. Consumers get session
//!   id 0 (no session) and keep sending full fetches.
//! - v13+ names topics by id (KIP-516).
//! - From a follower (`replica_id`, or `ReplicaState` from v15, KIP-903):
//!   reads go up to the log end offset, not the high watermark; a
//!   `LastFetchedEpoch` that diverges from the leader's log is answered
//!   with `DivergingEpoch` and no records (KIP-320, Kafka's
//!   `Partition.fetchRecords`); the fetch is recorded as the follower's
//!   state ([`Partition::record_follower_fetch`]: high watermark, ISR
//!   expansion) once per request, before parking, and only for a fetch
//!   offset within the log (one outside it gets OFFSET_OUT_OF_RANGE and
//!   records nothing, as Kafka reads before recording); a broker that is
//!   not a replica, or fetches with a stale broker epoch, gets
//!   NOT_LEADER_OR_FOLLOWER.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::FetchRequest;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::time::Instant;
use uuid::Uuid;
use weir_protocol_compat::fetch::{
    encode_fetch_response, FetchPartitionData, FetchResponseData, FetchTopicData, RecordsSource,
};
use weir_storage::{FileSlice, LogOffsetMetadata, StorageError};

use crate::context::BrokerContext;
use crate::dispatch::Response;
use crate::error::storage_error_code;
use crate::fetch_session::{
    FetchContext, FetchManager, PartitionAnswer, PartitionKey, PartitionRequest, QuietPartition,
    SessionRequest, SessionWaker,
};
use crate::partition::{DelayedFetch, FetchIsolation, FetchPartitionStatus, Partition};
use crate::replica_manager::ReplicaManager;
use crate::replication::leader::FollowerFetch;

/// Records of one partition in a Fetch response: a region of a segment file
/// or nothing.
pub enum FetchRecords {
    /// Bytes sent with `sendfile` from the segment file.
    File(FileSlice),
    /// No records (an empty, non-null records field).
    Empty,
}

impl RecordsSource for FetchRecords {
    fn len(&self) -> usize {
        match self {
            FetchRecords::File(s) => s.len(),
            FetchRecords::Empty => 0,
        }
    }
}

struct Target {
    /// Index of the partition in the request's (or session's) list.
    index: usize,
    partition_index: i32,
    fetch_offset: i64,
    partition_max_bytes: usize,
    current_leader_epoch: i32,
    /// `LastFetchedEpoch` (v12+), -1 when absent.
    last_fetched_epoch: i32,
    /// The follower's log start offset (v5+).
    log_start_offset: i64,
    resolved: Result<Arc<Partition>, i16>,
}

/// The follower a Fetch comes from: `(replica_id, broker_epoch)`.
type FollowerId = (i32, i64);

/// Serves a Fetch request in its session context (KIP-227, see
/// [`crate::fetch_session`]), parking it until `min_bytes` are available
/// or `max_wait_ms` passes.
pub async fn handle(
    ctx: &BrokerContext,
    version: i16,
    correlation_id: i32,
    request: FetchRequest,
    auth: &crate::authorizer::RequestAuth<'_>,
) -> Response {
    let read_committed = request.isolation_level == 1;
    let follower = follower_of(version, &request);
    // Kafka's handleFetchRequest: a follower needs ClusterAction on the
    // cluster, a consumer Read on each topic; what is refused answers
    // TOPIC_AUTHORIZATION_FAILED per partition.
    let follower_allowed =
        follower.is_none() || auth.cluster(weir_controller::acl::AclOperation::ClusterAction);
    let topic_allowed: std::sync::Mutex<HashMap<String, bool>> = Default::default();
    let uses_topic_ids = version >= 13;
    let context = ctx.fetch_sessions.new_context(
        session_request(version, &request, follower.map(|(id, _)| id)),
        crate::handlers::now_ms(),
    );
    let image = ctx.metadata();
    let arrived = Instant::now();
    let max_wait = Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let pending = ctx.replica_manager.pending_leadership(
        &image,
        request.topics.iter().flat_map(|t| {
            let name = match uses_topic_ids {
                true => image.topic_names_by_id.get(&t.topic_id).map(String::as_str),
                false => Some(t.topic.0.as_str()),
            };
            t.partitions
                .iter()
                .filter_map(move |p| name.map(|name| (name, p.partition)))
        }),
    );
    if let Some(offset) = pending {
        ctx.replica_manager.wait_for_applied(offset, max_wait).await;
    }
    let resolve = |key: &PartitionKey| -> Result<Arc<Partition>, i16> {
        let name = if uses_topic_ids {
            image
                .topic_names_by_id
                .get(&key.topic_id)
                .ok_or(ResponseError::UnknownTopicId.code())?
                .as_str()
        } else {
            key.topic.as_str()
        };
        if !follower_allowed {
            return Err(ResponseError::TopicAuthorizationFailed.code());
        }
        if follower.is_none() && auth.enabled() {
            let mut known = topic_allowed.lock().unwrap_or_else(|e| e.into_inner());
            let allowed = match known.get(name) {
                Some(&allowed) => allowed,
                None => {
                    let allowed = auth.topic(weir_controller::acl::AclOperation::Read, name);
                    known.insert(name.to_string(), allowed);
                    allowed
                }
            };
            if !allowed {
                return Err(ResponseError::TopicAuthorizationFailed.code());
            }
        }
        ctx.replica_manager
            .leader_partition(name, key.partition, || ctx.metadata())
    };

    // Zero or negative limits still return the first batch (KIP-74).
    let max_bytes = request.max_bytes.min(ctx.config.fetch_max_bytes).max(0) as usize;
    let min_bytes = request.min_bytes.max(0) as usize;
    let deadline = arrived + max_wait;
    let isolation = if follower.is_some() {
        FetchIsolation::LogEnd
    } else if read_committed {
        FetchIsolation::TxnCommitted
    } else {
        FetchIsolation::HighWatermark
    };
    let reader = Reader {
        replica_manager: &ctx.replica_manager,
        max_bytes,
        isolation,
        follower,
    };
    let served = serve(
        &ctx.fetch_sessions,
        &reader,
        context,
        resolve,
        min_bytes,
        deadline,
    )
    .await;
    encode(version, correlation_id, served)
}

/// The follower a Fetch comes from (`ReplicaState` from v15, KIP-903;
/// `replica_id` before), or `None` for a consumer.
fn follower_of(version: i16, request: &FetchRequest) -> Option<FollowerId> {
    if version >= 15 {
        let state = &request.replica_state;
        (state.replica_id.0 >= 0).then_some((state.replica_id.0, state.replica_epoch))
    } else {
        (request.replica_id.0 >= 0).then_some((request.replica_id.0, -1))
    }
}

/// The request's session metadata and partitions.
fn session_request(version: i16, request: &FetchRequest, follower: Option<i32>) -> SessionRequest {
    let uses_topic_ids = version >= 13;
    SessionRequest {
        session_id: request.session_id,
        epoch: request.session_epoch,
        uses_topic_ids,
        follower,
        fetch_data: fetch_data(uses_topic_ids, request),
        forgotten: forgotten(uses_topic_ids, request),
    }
}

/// The request's partitions, each once: at the place it was first named,
/// with what it was last named with (Kafka's `FetchRequest.fetchData`, a
/// `LinkedHashMap`); by topic id from v13, by name before.
fn fetch_data(
    uses_topic_ids: bool,
    request: &FetchRequest,
) -> Vec<(PartitionKey, PartitionRequest)> {
    let mut data: Vec<(PartitionKey, PartitionRequest)> = Vec::new();
    let mut index_of: HashMap<PartitionKey, usize> = HashMap::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            let key = partition_key(uses_topic_ids, &topic.topic.0, topic.topic_id, p.partition);
            let partition_request = PartitionRequest {
                fetch_offset: p.fetch_offset,
                log_start_offset: p.log_start_offset,
                partition_max_bytes: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
                last_fetched_epoch: p.last_fetched_epoch,
            };
            match index_of.get(&key) {
                Some(&i) => data[i].1 = partition_request,
                None => {
                    index_of.insert(key.clone(), data.len());
                    data.push((key, partition_request));
                }
            }
        }
    }
    data
}

/// `forgotten_topics_data` (v7+) as partition keys.
fn forgotten(uses_topic_ids: bool, request: &FetchRequest) -> Vec<PartitionKey> {
    request
        .forgotten_topics_data
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|&p| partition_key(uses_topic_ids, &t.topic.0, t.topic_id, p))
        })
        .collect()
}

fn partition_key(uses_topic_ids: bool, name: &StrBytes, id: Uuid, partition: i32) -> PartitionKey {
    if uses_topic_ids {
        PartitionKey {
            topic_id: id,
            topic: StrBytes::default(),
            partition,
        }
    } else {
        PartitionKey {
            topic_id: Uuid::nil(),
            topic: name.clone(),
            partition,
        }
    }
}

/// A Fetch answered: the top-level error, the session id and the
/// partitions sent, in order.
struct Served {
    error_code: i16,
    session_id: i32,
    partitions: Vec<(PartitionKey, PartitionData)>,
}

/// The handle fetch sessions hold for a partition.
type Sessions = FetchManager<Arc<Partition>>;

/// Reads the partitions of `context` (resolved by `resolve`) as Kafka's
/// `ReplicaManager.fetchMessages` (parking included: an incremental fetch
/// with nothing new parks on every active partition of its session, and
/// on its quiet ones through the session's waker), then lets the session
/// choose what is sent ([`FetchManager::update_and_generate`]).
async fn serve(
    sessions: &Sessions,
    reader: &Reader<'_>,
    context: FetchContext,
    resolve: impl Fn(&PartitionKey) -> Result<Arc<Partition>, i16>,
    min_bytes: usize,
    deadline: Instant,
) -> Served {
    let to_targets = |list: &[(PartitionKey, PartitionRequest)], first: usize| -> Vec<Target> {
        list.iter()
            .enumerate()
            .map(|(i, (key, r))| Target {
                index: first + i,
                partition_index: key.partition,
                fetch_offset: r.fetch_offset,
                partition_max_bytes: r.partition_max_bytes.max(0) as usize,
                current_leader_epoch: r.current_leader_epoch,
                last_fetched_epoch: r.last_fetched_epoch,
                log_start_offset: r.log_start_offset,
                resolved: resolve(key),
            })
            .collect()
    };
    let targets = to_targets(context.partitions(), 0);
    let waker = match &context {
        FetchContext::Incremental { waker, .. } => waker.as_deref(),
        _ => None,
    };
    let mut read = if targets.is_empty() && waker.is_none() {
        ReadResult::default()
    } else {
        fetch_messages(reader, &targets, min_bytes, deadline, waker).await
    };
    // Quiet partitions that changed while the fetch was parked.
    let woken = match waker {
        Some(_) => sessions.take_woken(&context),
        None => Vec::new(),
    };
    if !woken.is_empty() {
        let more = reader.read_all(&to_targets(&woken, targets.len()), Pass::First, read.bytes);
        read.data.extend(more.data);
    }
    let mut answers = Vec::with_capacity(read.data.len());
    let mut data = Vec::with_capacity(read.data.len());
    for r in read.data {
        let p = r.data;
        answers.push(PartitionAnswer {
            record_bytes: p.records.as_ref().map_or(0, |r| r.len()),
            error_code: p.error_code,
            high_watermark: p.high_watermark,
            last_stable_offset: p.last_stable_offset,
            log_start_offset: p.log_start_offset,
            diverging_epoch: p.diverging_epoch.is_some(),
            quiet: r.quiet,
        });
        data.push((r.index, p));
    }
    let answer = sessions.update_and_generate(&context, &woken, answers, crate::handlers::now_ms());
    let keys: Vec<&PartitionKey> = context
        .partitions()
        .iter()
        .chain(&woken)
        .map(|(key, _)| key)
        .collect();
    let partitions = data
        .into_iter()
        .zip(answer.keep)
        .filter_map(|((index, p), keep)| keep.then(|| (keys[index].clone(), p)))
        .collect();
    Served {
        error_code: answer.error_code,
        session_id: answer.session_id,
        partitions,
    }
}

/// Kafka's `ReplicaManager.fetchMessages`: one read; answered at once with
/// `min_bytes` or more, an error, a diverging epoch or no time to wait;
/// otherwise parked in a [`DelayedFetch`], which compares offsets until it
/// completes (or, with a session `waker`, one of the session's quiet
/// partitions changes) or `deadline` passes, and then read once more; an
/// expiry counts in `weir_delayed_fetch_expires_total{fetcher_type}`.
async fn fetch_messages(
    reader: &Reader<'_>,
    targets: &[Target],
    min_bytes: usize,
    deadline: Instant,
    waker: Option<&SessionWaker>,
) -> ReadResult {
    let first = reader.read_all(targets, Pass::First, 0);
    if first.any_error || first.bytes >= min_bytes || Instant::now() >= deadline {
        return first;
    }
    let statuses: Vec<FetchPartitionStatus> = targets
        .iter()
        .zip(first.positions)
        .filter_map(|(t, position)| {
            let partition = t.resolved.as_ref().ok()?;
            let (fetch_offset, leader_epoch) = position?;
            Some(FetchPartitionStatus {
                partition: partition.clone(),
                fetch_offset,
                leader_epoch,
                max_bytes: t.partition_max_bytes,
            })
        })
        .collect();
    if statuses.is_empty() && waker.is_none() {
        return ReadResult {
            positions: Vec::new(),
            ..first
        };
    }
    drop(first.data);
    let completed = DelayedFetch::new(statuses, reader.isolation, min_bytes)
        .wait(deadline, waker)
        .await;
    let read = reader.read_all(targets, Pass::Completion, 0);
    if !completed {
        let fetcher_type = if reader.follower.is_some() {
            "follower"
        } else {
            "consumer"
        };
        metrics::counter!("weir_delayed_fetch_expires_total", "fetcher_type" => fetcher_type)
            .increment(1);
        if read.bytes > 0 {
            // Records that arrived without waking the fetch, or in the
            // instant before `max_wait_ms` passed.
            tracing::debug!(
                fetcher_type,
                bytes = read.bytes,
                "a parked Fetch expired and then read records"
            );
        }
    }
    read
}

type PartitionData = FetchPartitionData<FetchRecords>;

/// Which read of a Fetch this is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// The first read: records a follower's fetch state and where each
    /// partition's read began.
    First,
    /// The read of a completed [`DelayedFetch`].
    Completion,
}

/// One partition read.
struct ReadPartition {
    /// The target's index.
    index: usize,
    data: PartitionData,
    /// The partition was quiet for the follower (see
    /// [`crate::fetch_session`]): its handle and fetch state version
    /// before the read.
    quiet: Option<(Arc<Partition>, u64)>,
}

/// What one read of a request's targets found.
#[derive(Default)]
struct ReadResult {
    /// Per target, in order.
    data: Vec<ReadPartition>,
    /// Record bytes found, with those of earlier reads of the response.
    bytes: usize,
    /// Some partition failed or has a diverging epoch.
    any_error: bool,
    /// Per target read without error on the first pass: where the read
    /// began and the partition's leader epoch before it.
    positions: Vec<Option<(LogOffsetMetadata, i32)>>,
}

/// Reads a request's targets.
struct Reader<'a> {
    replica_manager: &'a ReplicaManager,
    max_bytes: usize,
    isolation: FetchIsolation,
    follower: Option<FollowerId>,
}

/// What [`Reader::read_one`] found besides the partition data.
struct ReadOne {
    /// Where the read began and the leader epoch before it (`None` when
    /// nothing was read: no room left, or a diverging epoch).
    position: Option<(LogOffsetMetadata, i32)>,
    /// Quiet for the follower at this fetch state version.
    quiet: Option<u64>,
}

impl Reader<'_> {
    /// Reads every target once; `bytes` were read for the response before.
    fn read_all(&self, targets: &[Target], pass: Pass, bytes: usize) -> ReadResult {
        let mut result = ReadResult {
            data: Vec::with_capacity(targets.len()),
            bytes,
            any_error: false,
            positions: Vec::with_capacity(if pass == Pass::First {
                targets.len()
            } else {
                0
            }),
        };
        for t in targets {
            let mut data = FetchPartitionData {
                partition_index: t.partition_index,
                error_code: 0,
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                aborted_transactions: if self.isolation == FetchIsolation::TxnCommitted {
                    Some(Vec::new())
                } else {
                    None
                },
                preferred_read_replica: -1,
                records: Some(FetchRecords::Empty),
                diverging_epoch: None,
            };
            let mut position = None;
            let mut quiet = None;
            match &t.resolved {
                Err(code) => {
                    data.error_code = *code;
                    result.any_error = true;
                }
                Ok(partition) => {
                    match self.read_one(t, partition, &mut data, &mut result.bytes, pass) {
                        Ok(one) => {
                            position = one.position;
                            quiet = one.quiet.map(|v| (partition.clone(), v));
                        }
                        Err(code) => {
                            data.error_code = code;
                            result.any_error = true;
                        }
                    }
                    // A diverging epoch is answered at once, as an error is.
                    result.any_error |= data.diverging_epoch.is_some();
                }
            }
            if pass == Pass::First {
                result.positions.push(position);
            }
            result.data.push(ReadPartition {
                index: t.index,
                data,
                quiet,
            });
        }
        result
    }

    /// Reads one partition into `data`.
    fn read_one(
        &self,
        t: &Target,
        partition: &Arc<Partition>,
        data: &mut PartitionData,
        total: &mut usize,
        pass: Pass,
    ) -> Result<ReadOne, i16> {
        // Taken first: a change during the read makes the session look
        // again.
        let version = partition.fetch_state_version();
        let leader_epoch = partition.leader_epoch();
        data.high_watermark = partition.high_watermark();
        data.last_stable_offset = data.high_watermark;
        data.log_start_offset = partition.log_start_offset();
        if partition.is_removed() {
            return Err(ResponseError::UnknownTopicOrPartition.code());
        }
        if !partition.is_leader() {
            return Err(ResponseError::NotLeaderOrFollower.code());
        }
        partition.check_leader_epoch(t.current_leader_epoch)?;
        if self.follower.is_some() {
            if let Some(diverging) = diverging_epoch(t, partition)? {
                data.diverging_epoch = Some(diverging);
                return Ok(ReadOne {
                    position: None,
                    quiet: None,
                });
            }
            if pass == Pass::First {
                // Kafka's `Partition.fetchRecords` reads before it records
                // the follower's state, so a fetch outside the log (which
                // the read refuses) records nothing: a fetch offset beyond
                // the log end must not count the follower as caught up.
                if t.fetch_offset > partition.log_end_offset()
                    || t.fetch_offset < partition.log_start_offset()
                {
                    return Err(ResponseError::OffsetOutOfRange.code());
                }
                self.record_follower_fetch(t.fetch_offset, t.log_start_offset, partition)?;
                data.high_watermark = partition.high_watermark();
                data.last_stable_offset = data.high_watermark;
            }
        }
        let limit = t
            .partition_max_bytes
            .min(self.max_bytes.saturating_sub(*total));
        let first = *total == 0;
        if limit == 0 && !first {
            return Ok(ReadOne {
                position: Some((
                    LogOffsetMetadata::message_offset_only(t.fetch_offset),
                    leader_epoch,
                )),
                quiet: None,
            });
        }
        let read = if self.follower.is_some() {
            partition.read_to_log_end(t.fetch_offset, limit, first)
        } else {
            partition.read(t.fetch_offset, limit, first)
        };
        match read {
            Ok(info) => {
                let mut quiet = None;
                match info.records {
                    Some(slice) if !slice.is_empty() => {
                        *total += slice.len();
                        data.records = Some(FetchRecords::File(slice));
                    }
                    _ => {
                        if let Some((replica_id, _)) = self.follower {
                            quiet = (t.fetch_offset == partition.log_end_offset()
                                && partition.is_settled_isr_member(replica_id))
                            .then_some(version);
                        }
                    }
                }
                Ok(ReadOne {
                    position: Some((info.fetch_offset_metadata, leader_epoch)),
                    quiet,
                })
            }
            Err(e) => {
                if !matches!(e, StorageError::OffsetOutOfRange { .. }) {
                    tracing::error!(error = %e, "fetch read failed");
                }
                Err(storage_error_code(&e))
            }
        }
    }

    /// Records a follower's fetch at `fetch_offset` on the leader and
    /// sends the ISR expansion it allows to the controller.
    fn record_follower_fetch(
        &self,
        fetch_offset: i64,
        log_start_offset: i64,
        partition: &Arc<Partition>,
    ) -> Result<(), i16> {
        let Some((replica_id, broker_epoch)) = self.follower else {
            return Ok(());
        };
        let fetch = FollowerFetch {
            replica_id,
            broker_epoch,
            fetch_offset,
            log_start_offset,
            leader_end_offset: partition.log_end_offset(),
            now_ms: crate::handlers::now_ms(),
        };
        match partition.record_follower_fetch(&fetch) {
            Ok(proposal) => {
                if let Some(proposal) = proposal {
                    self.replica_manager.submit_isr_change(proposal);
                }
                Ok(())
            }
            Err(e) => {
                tracing::debug!(topic_partition = %partition.topic_partition(), error = %e,
                    "follower fetch refused");
                Err(ResponseError::NotLeaderOrFollower.code())
            }
        }
    }
}

/// The leader's `(epoch, end_offset)` when the follower's last fetched
/// epoch diverges from the leader's log (Kafka's `Partition.fetchRecords`
/// with `lastFetchedEpoch`): the leader's end of that epoch (or of the
/// largest epoch below it) is before the fetch offset, or the leader never
/// had that epoch.
///
/// # Errors
/// OFFSET_OUT_OF_RANGE when the leader knows no epoch at or below it, or
/// the fetch offset is below the log start offset.
fn diverging_epoch(t: &Target, partition: &Partition) -> Result<Option<(i32, i64)>, i16> {
    if t.last_fetched_epoch < 0 {
        return Ok(None);
    }
    let (epoch, end_offset) = partition.end_offset_for_epoch(t.last_fetched_epoch);
    if epoch < 0 || end_offset < 0 || t.fetch_offset < partition.log_start_offset() {
        return Err(ResponseError::OffsetOutOfRange.code());
    }
    Ok(
        (epoch < t.last_fetched_epoch || end_offset < t.fetch_offset)
            .then_some((epoch, end_offset)),
    )
}

/// Encodes `served`: its partitions grouped by topic, topics in the order
/// first named.
fn encode(version: i16, correlation_id: i32, served: Served) -> Response {
    let mut responses: Vec<FetchTopicData<FetchRecords>> = Vec::new();
    let mut topic_index_of: HashMap<(StrBytes, Uuid), usize> = HashMap::new();
    for (key, p) in served.partitions {
        if p.error_code != 0 {
            crate::metrics::record_error("Fetch", p.error_code);
        }
        let topic = *topic_index_of
            .entry((key.topic.clone(), key.topic_id))
            .or_insert_with(|| {
                responses.push(FetchTopicData {
                    topic: key.topic,
                    topic_id: key.topic_id,
                    partitions: Vec::new(),
                });
                responses.len() - 1
            });
        responses[topic].partitions.push(p);
    }
    let response = FetchResponseData {
        throttle_time_ms: 0,
        error_code: served.error_code,
        session_id: served.session_id,
        responses,
    };
    match encode_fetch_response(version, correlation_id, response) {
        Ok(chunks) => Response::Fetch(chunks),
        Err(e) => Response::Close(format!("cannot encode Fetch v{version} response: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use std::task::Poll;

    use weir_storage::{Log, LogConfig, LogManager, TopicPartition};

    use super::*;
    use crate::config::BrokerConfig;
    use crate::partition::tests::batch;

    /// `count` single-replica partitions led here, each with its own log
    /// under `dir`, as targets of one consumer Fetch at offset 0.
    fn targets(dir: &std::path::Path, count: i32) -> (Vec<Arc<Partition>>, Vec<Target>) {
        let partitions: Vec<Arc<Partition>> = (0..count)
            .map(|i| {
                let tp = TopicPartition::new("long-poll", i);
                let log = Log::open(
                    dir.join(format!("long-poll-{i}")),
                    tp.clone(),
                    LogConfig::default(),
                    0,
                    0,
                )
                .unwrap();
                Arc::new(Partition::new(
                    tp,
                    Uuid::new_v4(),
                    Arc::new(std::sync::Mutex::new(log)),
                    0,
                ))
            })
            .collect();
        let targets = partitions
            .iter()
            .enumerate()
            .map(|(i, p)| Target {
                index: i,
                partition_index: i as i32,
                fetch_offset: 0,
                partition_max_bytes: 1 << 20,
                current_leader_epoch: -1,
                last_fetched_epoch: -1,
                log_start_offset: -1,
                resolved: Ok(p.clone()),
            })
            .collect();
        (partitions, targets)
    }

    /// Issue 17 scope 7 (a Fetch forged as a replica's): a follower fetch
    /// beyond the leader's log end is answered OFFSET_OUT_OF_RANGE and
    /// records nothing. Before, the fetch was recorded first, so follower 2
    /// counted as holding offsets it never fetched and the high watermark
    /// rose over records only the leader had.
    #[test]
    fn a_follower_fetch_beyond_the_log_end_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let config = BrokerConfig::default();
        let log_manager =
            LogManager::open(dir.path().join("logs"), 1, config.default_log_config()).unwrap();
        let replica_manager = ReplicaManager::new(1, config, log_manager);
        let (partitions, mut targets) = replicated(dir.path(), 1);
        let partition = &partitions[0];
        for value in ["a", "b", "c"] {
            partition
                .append_records_as_leader(&batch(value), 1)
                .unwrap();
        }
        assert_eq!(
            partition.high_watermark(),
            0,
            "follower 2 has fetched nothing"
        );
        let reader = follower_2_reader(&replica_manager);
        targets[0].fetch_offset = 100;
        let result = reader.read_all(&targets, Pass::First, 0);
        assert_eq!(
            result.data[0].data.error_code,
            ResponseError::OffsetOutOfRange.code()
        );
        assert_eq!(
            partition.high_watermark(),
            0,
            "a fetch beyond the log end moved the high watermark"
        );
    }

    /// A consumer long-polling 16 partitions reads their logs once before
    /// parking and once when answered: the appends that wake it without
    /// reaching `min_bytes` are compared by offsets, never read (before
    /// DelayedFetch compared offsets, every wake-up read all 16 again).
    #[tokio::test]
    async fn wake_ups_that_do_not_complete_a_fetch_read_no_log() {
        let dir = tempfile::tempdir().unwrap();
        let config = BrokerConfig::default();
        let log_manager =
            LogManager::open(dir.path().join("logs"), 1, config.default_log_config()).unwrap();
        let replica_manager = ReplicaManager::new(1, config, log_manager);
        let (partitions, targets) = targets(dir.path(), 16);
        let reads = || partitions.iter().map(|p| p.reads()).sum::<usize>();
        let reader = Reader {
            replica_manager: &replica_manager,
            max_bytes: 1 << 20,
            isolation: FetchIsolation::HighWatermark,
            follower: None,
        };
        let small = batch("small");
        let min_bytes = 4 * small.len() + 1;
        let far = Instant::now() + Duration::from_secs(3600);
        let fetch = fetch_messages(&reader, &targets, min_bytes, far, None);
        tokio::pin!(fetch);
        assert!(futures::poll!(fetch.as_mut()).is_pending());
        assert_eq!(reads(), 16, "the first read");
        for i in 0..4 {
            partitions[i % 2]
                .append_records_as_leader(&small, 0)
                .unwrap();
            assert!(futures::poll!(fetch.as_mut()).is_pending());
            assert_eq!(reads(), 16, "wake-up {i} read the logs");
        }
        partitions[15].append_records_as_leader(&small, 0).unwrap();
        let Poll::Ready(data) = futures::poll!(fetch.as_mut()) else {
            panic!("min_bytes reached but the fetch is still parked");
        };
        assert_eq!(reads(), 32, "one read to answer");
        let returned: Vec<(i32, usize)> = data
            .data
            .iter()
            .map(|r| &r.data)
            .filter_map(|p| Some((p.partition_index, p.records.as_ref()?.len())))
            .filter(|(_, len)| *len > 0)
            .collect();
        assert_eq!(
            returned,
            vec![
                (0, 2 * small.len()),
                (1, 2 * small.len()),
                (15, small.len())
            ]
        );
    }

    /// `count` partitions led here with replicas 1 (this broker) and 2,
    /// both in the ISR, for follower 2's fetches.
    fn replicated(dir: &std::path::Path, count: i32) -> (Vec<Arc<Partition>>, Vec<Target>) {
        replicated_with_isr(dir, count, &[1, 2])
    }

    /// [`replicated`] with the ISR `isr`.
    fn replicated_with_isr(
        dir: &std::path::Path,
        count: i32,
        isr: &[i32],
    ) -> (Vec<Arc<Partition>>, Vec<Target>) {
        let (partitions, targets) = targets(dir, count);
        let alive = std::collections::BTreeMap::from([(1, 1), (2, 1)]);
        for partition in &partitions {
            partition
                .become_leader(
                    &crate::partition::Registration {
                        local_broker_id: 1,
                        replicas: &[1, 2],
                        isr,
                        leader_epoch: 1,
                        partition_epoch: 1,
                        min_insync_replicas: 1,
                        alive: &alive,
                        max_lag_ms: 30_000,
                    },
                    0,
                )
                .unwrap();
        }
        (partitions, targets)
    }

    const TOPIC_ID: Uuid = Uuid::from_u128(0x5e55_1045);

    /// A Fetch v17 from `replica_id` (-1: a consumer) in session
    /// `(session_id, epoch)` naming `offsets` (partition, fetch offset) and
    /// forgetting `forgotten`, all of topic [`TOPIC_ID`].
    fn fetch_request(
        replica_id: i32,
        (session_id, epoch): (i32, i32),
        offsets: &[(i32, i64)],
        forgotten: &[i32],
    ) -> FetchRequest {
        use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
        let mut request = FetchRequest::default();
        request.replica_id = kafka_protocol::messages::BrokerId(-1);
        request.replica_state.replica_id = kafka_protocol::messages::BrokerId(replica_id);
        request.min_bytes = 1;
        request.session_id = session_id;
        request.session_epoch = epoch;
        if !offsets.is_empty() {
            let mut topic = FetchTopic::default();
            topic.topic_id = TOPIC_ID;
            for &(partition, fetch_offset) in offsets {
                let mut p = FetchPartition::default();
                p.partition = partition;
                p.fetch_offset = fetch_offset;
                p.current_leader_epoch = -1;
                p.last_fetched_epoch = -1;
                p.log_start_offset = 0;
                p.partition_max_bytes = 1 << 20;
                topic.partitions.push(p);
            }
            request.topics.push(topic);
        }
        if !forgotten.is_empty() {
            let mut topic = ForgottenTopic::default();
            topic.topic_id = TOPIC_ID;
            topic.partitions = forgotten.to_vec();
            request.forgotten_topics_data.push(topic);
        }
        request
    }

    /// Serves `request` as [`handle`] does at v17, against `partitions`
    /// (partition index `i` is `partitions[i]`), waiting at most until
    /// `deadline`.
    async fn fetch_v17(
        sessions: &Sessions,
        reader: &Reader<'_>,
        partitions: &[Arc<Partition>],
        request: &FetchRequest,
        deadline: Instant,
    ) -> Served {
        let follower = follower_of(17, request);
        assert_eq!(
            follower, reader.follower,
            "the reader is for another fetcher"
        );
        let context = sessions.new_context(
            session_request(17, request, follower.map(|(id, _)| id)),
            crate::handlers::now_ms(),
        );
        let resolve = |key: &PartitionKey| -> Result<Arc<Partition>, i16> {
            assert_eq!(key.topic_id, TOPIC_ID);
            Ok(partitions[key.partition as usize].clone())
        };
        serve(sessions, reader, context, resolve, 1, deadline).await
    }

    /// The partitions answered, with their record bytes.
    fn answered(served: &Served) -> Vec<(i32, usize)> {
        served
            .partitions
            .iter()
            .map(|(key, p)| (key.partition, p.records.as_ref().map_or(0, |r| r.len())))
            .collect()
    }

    fn replica_manager(dir: &std::path::Path) -> ReplicaManager {
        let config = BrokerConfig::default();
        let log_manager =
            LogManager::open(dir.join("logs"), 1, config.default_log_config()).unwrap();
        ReplicaManager::new(1, config, log_manager)
    }

    /// A reader of Fetch requests from follower broker 2 (epoch unknown),
    /// up to 1 MiB, to the log end.
    fn follower_2_reader(replica_manager: &ReplicaManager) -> Reader<'_> {
        Reader {
            replica_manager,
            max_bytes: 1 << 20,
            isolation: FetchIsolation::LogEnd,
            follower: Some((2, -1)),
        }
    }

    /// KIP-227 for followers: a full fetch `(0, 0)` of 16 idle partitions
    /// creates a session and answers all 16; the next incremental fetch,
    /// naming nothing, answers none; after a record on partition 5 one
    /// answers exactly partition 5 (read at the fetch offset the session
    /// cached); a fetch naming partition 5 at its new offset (which raises
    /// the high watermark) and forgetting partition 9 answers partition 5
    /// without records, and partition 9 is no longer read.
    #[tokio::test]
    async fn incremental_follower_fetches_answer_only_partitions_with_news() {
        let dir = tempfile::tempdir().unwrap();
        let replica_manager = replica_manager(dir.path());
        let (partitions, _) = replicated(dir.path(), 16);
        let sessions = Sessions::new(10);
        let reader = follower_2_reader(&replica_manager);
        let all: Vec<(i32, i64)> = (0..16).map(|p| (p, 0)).collect();
        let now = Instant::now;
        let full = fetch_request(2, (0, 0), &all, &[]);
        let served = fetch_v17(&sessions, &reader, &partitions, &full, now()).await;
        assert_eq!(served.error_code, 0);
        assert!(served.partitions.iter().all(|(_, p)| p.error_code == 0));
        assert_ne!(
            served.session_id, 0,
            "a follower's full fetch creates a session"
        );
        assert_eq!(
            answered(&served),
            all.iter().map(|&(p, _)| (p, 0usize)).collect::<Vec<_>>()
        );
        let id = served.session_id;

        let idle = fetch_request(2, (id, 1), &[], &[]);
        let served = fetch_v17(&sessions, &reader, &partitions, &idle, now()).await;
        assert_eq!((served.error_code, served.session_id), (0, id));
        assert!(
            answered(&served).is_empty(),
            "idle partitions are not answered"
        );

        let record = batch("new");
        partitions[5].append_records_as_leader(&record, 0).unwrap();
        let idle = fetch_request(2, (id, 2), &[], &[]);
        let served = fetch_v17(&sessions, &reader, &partitions, &idle, now()).await;
        assert_eq!((served.error_code, served.session_id), (0, id));
        assert_eq!(answered(&served), vec![(5, record.len())]);

        let reads = |p: usize| partitions[p].reads();
        let before = reads(9);
        let moved = fetch_request(2, (id, 3), &[(5, 1)], &[9]);
        let served = fetch_v17(&sessions, &reader, &partitions, &moved, now()).await;
        assert_eq!((served.error_code, served.session_id), (0, id));
        assert_eq!(
            answered(&served),
            vec![(5, 0)],
            "only the high watermark moved"
        );
        assert_eq!(served.partitions[0].1.high_watermark, 1);
        assert_eq!(reads(9), before, "a forgotten partition was read");

        // A replayed epoch is refused and answers nothing.
        let served = fetch_v17(&sessions, &reader, &partitions, &moved, now()).await;
        assert_eq!(
            (served.error_code, served.session_id),
            (ResponseError::InvalidFetchSessionEpoch.code(), 0)
        );
        assert!(answered(&served).is_empty());
    }

    /// Past Kafka: once a read finds a session partition quiet (nothing to
    /// send, follower 2 at the log end and in the ISR), idle incremental
    /// fetches read no log at all; a parked one completes when a quiet
    /// partition gets a record (as a parked fetch does for any partition
    /// of its session), and reads and answers that partition only.
    /// Deleting the quiet skip makes every idle fetch read all 32 logs.
    #[tokio::test]
    async fn an_idle_follower_session_reads_only_partitions_that_changed() {
        let dir = tempfile::tempdir().unwrap();
        let replica_manager = replica_manager(dir.path());
        let (partitions, _) = replicated(dir.path(), 32);
        let reads = || partitions.iter().map(|p| p.reads()).sum::<usize>();
        let sessions = Sessions::new(10);
        let reader = follower_2_reader(&replica_manager);
        let all: Vec<(i32, i64)> = (0..32).map(|p| (p, 0)).collect();
        let full = fetch_request(2, (0, 0), &all, &[]);
        let served = fetch_v17(&sessions, &reader, &partitions, &full, Instant::now()).await;
        let id = served.session_id;
        assert_ne!(id, 0);
        assert_eq!(reads(), 32, "the full fetch reads every partition");

        for epoch in 1..=3 {
            let idle = fetch_request(2, (id, epoch), &[], &[]);
            let served = fetch_v17(&sessions, &reader, &partitions, &idle, Instant::now()).await;
            assert_eq!((served.error_code, served.session_id), (0, id));
            assert!(answered(&served).is_empty());
        }
        assert_eq!(
            reads(),
            32,
            "idle incremental fetches read quiet partitions"
        );

        let idle = fetch_request(2, (id, 4), &[], &[]);
        let far = Instant::now() + Duration::from_secs(3600);
        let fetch = fetch_v17(&sessions, &reader, &partitions, &idle, far);
        tokio::pin!(fetch);
        assert!(
            futures::poll!(fetch.as_mut()).is_pending(),
            "nothing new: parked"
        );
        let record = batch("late");
        partitions[20].append_records_as_leader(&record, 0).unwrap();
        let Poll::Ready(served) = futures::poll!(fetch.as_mut()) else {
            panic!("a record on a quiet partition did not answer the parked fetch");
        };
        assert_eq!((served.error_code, served.session_id), (0, id));
        assert_eq!(answered(&served), vec![(20, record.len())]);
        assert_eq!(reads(), 33, "only the partition that changed was read");
    }

    /// Kafka reads every partition of a follower's session on each Fetch,
    /// which keeps the follower's caught-up time fresh; a quiet partition
    /// (not read) gets it from its watch's link to the session's Fetches.
    /// A follower whose session kept fetching long after the read that
    /// found the partition quiet therefore stays in the ISR when the log
    /// end moves, for `replica.lag.time.max.ms` after the session's last
    /// Fetch before the append; a Fetch after the append does not count.
    /// Ignoring the link removes it at once (its last read was long ago).
    #[test]
    fn a_quiet_partitions_link_keeps_its_follower_in_the_isr() {
        use std::sync::atomic::{AtomicI64, Ordering};

        use crate::fetch_session::{QuietLink, QuietPartition, QuietWatch, SessionWaker};
        use crate::replication::leader::FollowerFetch;
        const LAG: i64 = 30_000;
        let dir = tempfile::tempdir().unwrap();
        let (partitions, _) = replicated(dir.path(), 1);
        let partition = &partitions[0];
        let fetch = FollowerFetch {
            replica_id: 2,
            broker_epoch: -1,
            fetch_offset: 0,
            log_start_offset: 0,
            leader_end_offset: 0,
            now_ms: 1_000,
        };
        partition.record_follower_fetch(&fetch).unwrap();
        let session_fetch_ms = Arc::new(AtomicI64::new(1_000));
        let link = Arc::new(QuietLink::new(2, session_fetch_ms.clone()));
        let waker = Arc::new(SessionWaker::default());
        let key = PartitionKey {
            topic_id: TOPIC_ID,
            topic: Default::default(),
            partition: 0,
        };
        let watch = QuietWatch::with_link(&waker, key, link.clone());
        assert!(partition.watch_quiet(partition.fetch_state_version(), watch));
        partition.link_quiet(link.clone());
        session_fetch_ms.store(1_000 + 10 * LAG, Ordering::SeqCst);
        assert_eq!(
            partition.maybe_shrink_isr(1_000 + 100 * LAG),
            None,
            "at the log end"
        );
        partition.append_records_as_leader(&batch("x"), 0).unwrap();
        assert!(link.is_frozen(), "the append froze the link");
        session_fetch_ms.store(1_000 + 20 * LAG, Ordering::SeqCst);
        assert_eq!(partition.maybe_shrink_isr(1_000 + 11 * LAG), None);
        let shrink = partition
            .maybe_shrink_isr(1_000 + 11 * LAG + 1)
            .expect("lagging since the last Fetch before the append");
        assert_eq!(shrink.new_isr, vec![1]);
    }

    /// Left alone in session 25: a quiet partition kept the watch of every
    /// fetch session that ever skipped it until its next change, so with
    /// sessions evicted and created again (a full session cache) an idle
    /// partition's watches grew without bound. A new watch now drops those
    /// of sessions that are gone, freezing their links (no more Fetches of
    /// theirs will come).
    #[test]
    fn watches_of_closed_sessions_do_not_pile_up_on_a_quiet_partition() {
        use std::sync::atomic::AtomicI64;

        use crate::fetch_session::{QuietLink, QuietPartition, QuietWatch, SessionWaker};
        let dir = tempfile::tempdir().unwrap();
        let (partitions, _) = replicated(dir.path(), 1);
        let partition = &partitions[0];
        let key = PartitionKey {
            topic_id: TOPIC_ID,
            topic: Default::default(),
            partition: 0,
        };
        let live = Arc::new(SessionWaker::default());
        let version = partition.fetch_state_version();
        assert!(partition.watch_quiet(version, QuietWatch::new(&live, key.clone())));
        let mut closed_links = Vec::new();
        for _ in 0..1_000 {
            let closed = Arc::new(SessionWaker::default());
            let link = Arc::new(QuietLink::new(2, Arc::new(AtomicI64::new(1_000))));
            let watch = QuietWatch::with_link(&closed, key.clone(), link.clone());
            assert!(partition.watch_quiet(version, watch));
            closed_links.push(link);
        }
        assert!(
            partition.quiet_watch_count() <= 2,
            "{} watches kept",
            partition.quiet_watch_count()
        );
        let kept = closed_links.pop().unwrap();
        assert!(closed_links.iter().all(|link| link.is_frozen()));
        assert!(!kept.is_frozen(), "the last session's watch was just set");
        // The live session's watch still fires.
        partition.append_records_as_leader(&batch("x"), 0).unwrap();
        assert_eq!(live.take_woken(), vec![key]);
        assert_eq!(partition.quiet_watch_count(), 0);
    }

    /// A follower outside the ISR is never skipped: the leader must see its
    /// fetches to let it join (Kafka's `maybeExpandIsr` on every fetch).
    #[tokio::test]
    async fn partitions_of_a_follower_outside_the_isr_are_read_every_time() {
        let dir = tempfile::tempdir().unwrap();
        let replica_manager = replica_manager(dir.path());
        let (partitions, _) = replicated_with_isr(dir.path(), 4, &[1]);
        for p in &partitions {
            p.append_records_as_leader(&batch("x"), 0).unwrap();
        }
        let reads = || partitions.iter().map(|p| p.reads()).sum::<usize>();
        let sessions = Sessions::new(10);
        let reader = follower_2_reader(&replica_manager);
        // At the log end already, but only the leader is in the ISR.
        let all: Vec<(i32, i64)> = (0..4).map(|p| (p, 1)).collect();
        let full = fetch_request(2, (0, 0), &all, &[]);
        let served = fetch_v17(&sessions, &reader, &partitions, &full, Instant::now()).await;
        let id = served.session_id;
        let idle = fetch_request(2, (id, 1), &[], &[]);
        fetch_v17(&sessions, &reader, &partitions, &idle, Instant::now()).await;
        assert_eq!(reads(), 8, "partitions outside the ISR were skipped");
    }

    /// A consumer's `(0, 0)` full fetch is answered with session id 0 and
    /// every partition, and caches nothing: consumers keep full fetches.
    #[tokio::test]
    async fn a_consumers_full_fetch_still_gets_session_id_0() {
        let dir = tempfile::tempdir().unwrap();
        let replica_manager = replica_manager(dir.path());
        let (partitions, _) = targets(dir.path(), 3);
        let sessions = Sessions::new(10);
        let reader = Reader {
            replica_manager: &replica_manager,
            max_bytes: 1 << 20,
            isolation: FetchIsolation::HighWatermark,
            follower: None,
        };
        let request = fetch_request(-1, (0, 0), &[(0, 0), (1, 0), (2, 0)], &[]);
        let served = fetch_v17(&sessions, &reader, &partitions, &request, Instant::now()).await;
        assert_eq!((served.error_code, served.session_id), (0, 0));
        assert_eq!(answered(&served), vec![(0, 0), (1, 0), (2, 0)]);
        assert!(served.partitions.iter().all(|(_, p)| p.error_code == 0));
        assert!(sessions.is_empty());
        // Without a session, an incremental fetch is FETCH_SESSION_ID_NOT_FOUND.
        let request = fetch_request(-1, (0, 1), &[], &[]);
        let served = fetch_v17(&sessions, &reader, &partitions, &request, Instant::now()).await;
        assert_eq!(
            served.error_code,
            ResponseError::FetchSessionIdNotFound.code()
        );
    }
}
