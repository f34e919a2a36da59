//! Fetch (key 1), v4-17, for consumers.
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
//! - Fetch sessions (KIP-227) are not offered: the response always carries
//!   session id 0, so clients send full fetches. A non-zero session id gets
//!   FETCH_SESSION_ID_NOT_FOUND.
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
    topic: usize,
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

/// Serves a Fetch request, parking it until `min_bytes` are available or
/// `max_wait_ms` passes.
pub async fn handle(
    ctx: &BrokerContext,
    version: i16,
    correlation_id: i32,
    request: FetchRequest,
) -> Response {
    let read_committed = request.isolation_level == 1;
    let follower: Option<FollowerId> = if version >= 15 {
        let state = &request.replica_state;
        (state.replica_id.0 >= 0).then_some((state.replica_id.0, state.replica_epoch))
    } else {
        (request.replica_id.0 >= 0).then_some((request.replica_id.0, -1))
    };
    let mut topics: Vec<(StrBytes, Uuid)> = Vec::new();
    let mut targets: Vec<Target> = Vec::new();
    let session_error = if request.session_id != 0 {
        Some(ResponseError::FetchSessionIdNotFound.code())
    } else if request.session_epoch > 0 {
        Some(ResponseError::InvalidFetchSessionEpoch.code())
    } else {
        None
    };
    let image = ctx.metadata();
    // Topic (name, or id from v13) to its index in `topics`, and
    // (topic index, partition) to its index in `targets`.
    let mut topic_index_of: HashMap<(StrBytes, Uuid), usize> = HashMap::new();
    let mut target_index_of: HashMap<(usize, i32), usize> = HashMap::new();
    for topic in &request.topics {
        let (name, resolved): (String, Result<(), i16>) = if version >= 13 {
            match image.topic_names_by_id.get(&topic.topic_id) {
                Some(name) => (name.clone(), Ok(())),
                None => (String::new(), Err(ResponseError::UnknownTopicId.code())),
            }
        } else {
            (topic.topic.to_string(), Ok(()))
        };
        let key = if version >= 13 {
            (StrBytes::default(), topic.topic_id)
        } else {
            (topic.topic.0.clone(), Uuid::nil())
        };
        let topic_index = *topic_index_of.entry(key).or_insert_with(|| {
            topics.push((topic.topic.0.clone(), topic.topic_id));
            topics.len() - 1
        });
        for p in &topic.partitions {
            let resolved = resolved.and_then(|()| {
                ctx.replica_manager
                    .leader_partition(&name, p.partition, || ctx.metadata())
            });
            let index = *target_index_of
                .entry((topic_index, p.partition))
                .or_insert(targets.len());
            let target = Target {
                topic: topic_index,
                partition_index: p.partition,
                fetch_offset: p.fetch_offset,
                partition_max_bytes: p.partition_max_bytes.max(0) as usize,
                current_leader_epoch: p.current_leader_epoch,
                last_fetched_epoch: p.last_fetched_epoch,
                log_start_offset: p.log_start_offset,
                resolved,
            };
            if index == targets.len() {
                targets.push(target);
            } else {
                targets[index] = target;
            }
        }
    }

    // Zero or negative limits still return the first batch (KIP-74).
    let max_bytes = request.max_bytes.min(ctx.config.fetch_max_bytes).max(0) as usize;
    let min_bytes = request.min_bytes.max(0) as usize;
    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
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
    let data = if session_error.is_some() {
        reader.read_all(&targets, Pass::First).data
    } else {
        fetch_messages(&reader, &targets, min_bytes, deadline).await
    };
    encode(version, correlation_id, session_error, &topics, data)
}

/// Kafka's `ReplicaManager.fetchMessages`: one read; answered at once with
/// `min_bytes` or more, an error, a diverging epoch or no time to wait;
/// otherwise parked in a [`DelayedFetch`], which compares offsets until it
/// completes or `deadline` passes, and then read once more.
async fn fetch_messages(
    reader: &Reader<'_>,
    targets: &[Target],
    min_bytes: usize,
    deadline: Instant,
) -> Vec<(usize, PartitionData)> {
    let first = reader.read_all(targets, Pass::First);
    if first.any_error || first.bytes >= min_bytes || Instant::now() >= deadline {
        return first.data;
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
    if statuses.is_empty() {
        return first.data;
    }
    drop(first.data);
    DelayedFetch::new(statuses, reader.isolation, min_bytes)
        .wait(deadline)
        .await;
    reader.read_all(targets, Pass::Completion).data
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

/// What one read of a request's targets found.
struct ReadResult {
    /// Per target, its topic's index and partition data.
    data: Vec<(usize, PartitionData)>,
    /// Record bytes found.
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

impl Reader<'_> {
    /// Reads every target once.
    fn read_all(&self, targets: &[Target], pass: Pass) -> ReadResult {
        let mut result = ReadResult {
            data: Vec::with_capacity(targets.len()),
            bytes: 0,
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
            match &t.resolved {
                Err(code) => {
                    data.error_code = *code;
                    result.any_error = true;
                }
                Ok(partition) => {
                    match self.read_one(t, partition, &mut data, &mut result.bytes, pass) {
                        Ok(p) => position = p,
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
            result.data.push((t.topic, data));
        }
        result
    }

    /// Reads one partition into `data`; returns where the read began and
    /// the leader epoch before it (`None` when nothing was read: no room
    /// left in the response, or a diverging epoch).
    fn read_one(
        &self,
        t: &Target,
        partition: &Arc<Partition>,
        data: &mut PartitionData,
        total: &mut usize,
        pass: Pass,
    ) -> Result<Option<(LogOffsetMetadata, i32)>, i16> {
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
        if let Some(replica) = self.follower {
            if let Some(diverging) = diverging_epoch(t, partition)? {
                data.diverging_epoch = Some(diverging);
                return Ok(None);
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
                self.record_follower_fetch(t, partition, replica)?;
                data.high_watermark = partition.high_watermark();
                data.last_stable_offset = data.high_watermark;
            }
        }
        let limit = t
            .partition_max_bytes
            .min(self.max_bytes.saturating_sub(*total));
        let first = *total == 0;
        if limit == 0 && !first {
            return Ok(Some((
                LogOffsetMetadata::message_offset_only(t.fetch_offset),
                leader_epoch,
            )));
        }
        let read = if self.follower.is_some() {
            partition.read_to_log_end(t.fetch_offset, limit, first)
        } else {
            partition.read(t.fetch_offset, limit, first)
        };
        match read {
            Ok(info) => {
                if let Some(slice) = info.records {
                    *total += slice.len();
                    data.records = Some(FetchRecords::File(slice));
                }
                Ok(Some((info.fetch_offset_metadata, leader_epoch)))
            }
            Err(e) => {
                if !matches!(e, StorageError::OffsetOutOfRange { .. }) {
                    tracing::error!(error = %e, "fetch read failed");
                }
                Err(storage_error_code(&e))
            }
        }
    }

    /// Records a follower's fetch on the leader and sends the ISR
    /// expansion it allows to the controller.
    fn record_follower_fetch(
        &self,
        t: &Target,
        partition: &Arc<Partition>,
        (replica_id, broker_epoch): FollowerId,
    ) -> Result<(), i16> {
        let fetch = FollowerFetch {
            replica_id,
            broker_epoch,
            fetch_offset: t.fetch_offset,
            log_start_offset: t.log_start_offset,
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

fn encode(
    version: i16,
    correlation_id: i32,
    session_error: Option<i16>,
    topics: &[(StrBytes, Uuid)],
    data: Vec<(usize, PartitionData)>,
) -> Response {
    let mut responses: Vec<FetchTopicData<FetchRecords>> = topics
        .iter()
        .map(|(name, id)| FetchTopicData {
            topic: name.clone(),
            topic_id: *id,
            partitions: Vec::new(),
        })
        .collect();
    if session_error.is_none() {
        for (topic, p) in data {
            if p.error_code != 0 {
                crate::metrics::record_error("Fetch", p.error_code);
            }
            responses[topic].partitions.push(p);
        }
    } else {
        responses.clear();
    }
    let response = FetchResponseData {
        throttle_time_ms: 0,
        error_code: session_error.unwrap_or(0),
        session_id: 0,
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
                topic: 0,
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
        let (partitions, mut targets) = targets(dir.path(), 1);
        let partition = &partitions[0];
        let alive = std::collections::BTreeMap::from([(1, 1), (2, 1)]);
        partition
            .become_leader(
                &crate::partition::Registration {
                    local_broker_id: 1,
                    replicas: &[1, 2],
                    isr: &[1, 2],
                    leader_epoch: 1,
                    partition_epoch: 1,
                    min_insync_replicas: 1,
                    alive: &alive,
                    max_lag_ms: 30_000,
                },
                0,
            )
            .unwrap();
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
        let reader = Reader {
            replica_manager: &replica_manager,
            max_bytes: 1 << 20,
            isolation: FetchIsolation::LogEnd,
            follower: Some((2, -1)),
        };
        targets[0].fetch_offset = 100;
        let result = reader.read_all(&targets, Pass::First);
        assert_eq!(
            result.data[0].1.error_code,
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
        let fetch = fetch_messages(&reader, &targets, min_bytes, far);
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
            .iter()
            .filter_map(|(_, p)| Some((p.partition_index, p.records.as_ref()?.len())))
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
}
