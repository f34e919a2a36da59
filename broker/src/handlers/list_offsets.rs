//! ListOffsets (key 2), v1-9: offsets by timestamp, and the special
//! timestamps (case C10):
//! - -1 latest: the high watermark (last stable offset for read_committed,
//!   the same while transactions are not served);
//! - -2 earliest: the log start offset (moved by retention and
//!   DeleteRecords);
//! - -3 max timestamp (v7+, KIP-734): the offset and timestamp of the record
//!   with the largest timestamp;
//! - -4 earliest local (v8+, KIP-405): the log start offset (no tiering);
//! - -5 latest tiered (v9+, KIP-1005): -1 (nothing is tiered).
//!
//! A special timestamp on a version that does not define it is rejected
//! with UNSUPPORTED_VERSION and never matched as a literal timestamp; other
//! negative timestamps are INVALID_REQUEST.
//!
//! A partition named more than once gets one answer, INVALID_REQUEST
//! (Kafka's `ListOffsetsRequest.duplicatePartitions` and
//! `ReplicaManager.fetchOffset`), at its first place.
//!
//! For a timestamp `t >= 0` the answer is the first record whose timestamp is
//! at least `t` below the high watermark (the last fetchable offset of a
//! consumer): storage finds the batch, this handler decodes it.
//!
//! A leader whose high watermark is still below the start offset of its
//! leader epoch (just elected: its high watermark lags the previous
//! leader's until the followers fetch) answers consumers'
//! latest-offset and timestamp lookups that reach its high watermark
//! with OFFSET_NOT_AVAILABLE (retriable) instead of an offset older than
//! one the previous leader may have given (Kafka's
//! `Partition.fetchOffsetForTimestamp`, `maybeOffsetsError`). Found by the
//! chaos harness's `hw-regression` check (seed 1000).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use kafka_protocol::ResponseError;

use crate::context::BrokerContext;
use crate::error::storage_error_code;
use crate::partition::Partition;

/// Latest offset.
pub const LATEST_TIMESTAMP: i64 = -1;
/// Earliest offset.
pub const EARLIEST_TIMESTAMP: i64 = -2;
/// Offset of the record with the largest timestamp (v7+).
pub const MAX_TIMESTAMP: i64 = -3;
/// Earliest offset in local storage (v8+).
pub const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
/// Latest offset in tiered storage (v9+).
pub const LATEST_TIERED_TIMESTAMP: i64 = -5;

/// Longest a ListOffsets waits for this node to apply an image that made
/// it the leader of a partition it names (a topic created a moment ago):
/// ListOffsets carries no timeout before v10, and this covers the creation
/// of 10,000 logs. See [`crate::replica_manager::ReplicaManager::pending_leadership`].
pub const MAX_LEADERSHIP_WAIT: Duration = Duration::from_secs(5);

/// Waits, at most [`MAX_LEADERSHIP_WAIT`], until this node has applied its
/// newest image when that image makes it the leader of a partition
/// `request` names that is not led here yet; [`handle`] then finds it.
pub async fn wait_for_leadership(ctx: &BrokerContext, request: &ListOffsetsRequest) {
    let partitions = request.topics.iter().flat_map(|t| {
        t.partitions
            .iter()
            .map(move |p| (t.name.0.as_str(), p.partition_index))
    });
    let pending = ctx
        .replica_manager
        .pending_leadership(&ctx.metadata(), partitions);
    if let Some(offset) = pending {
        ctx.replica_manager
            .wait_for_applied(offset, MAX_LEADERSHIP_WAIT)
            .await;
    }
}

/// Answers every requested partition.
pub fn handle(
    ctx: &BrokerContext,
    version: i16,
    request: ListOffsetsRequest,
    auth: &crate::authorizer::RequestAuth<'_>,
) -> ListOffsetsResponse {
    let mut response = ListOffsetsResponse::default();
    let mut times_named: HashMap<(StrBytes, i32), usize> = HashMap::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            *times_named
                .entry((topic.name.0.clone(), p.partition_index))
                .or_default() += 1;
        }
    }
    // A follower (replica_id >= 0) asks for the log end offset as latest
    // (Kafka's `Partition.fetchOffsetForTimestamp` without an isolation
    // level); consumers get the high watermark.
    let from_follower = request.replica_id.0 >= 0;
    let follower_allowed =
        from_follower && auth.cluster(weir_controller::acl::AclOperation::ClusterAction);
    let mut answered = HashSet::new();
    for topic in request.topics {
        let mut t = ListOffsetsTopicResponse::default();
        t.name = topic.name.clone();
        // Kafka's handleListOffsetRequest: Describe on the topic. A Weir
        // follower asks the leader's log start with ListOffsets: it needs
        // ClusterAction instead, as its Fetch does.
        let allowed = if from_follower {
            follower_allowed
        } else {
            auth.topic(weir_controller::acl::AclOperation::Describe, &topic.name)
        };
        for p in topic.partitions {
            let key = (topic.name.0.clone(), p.partition_index);
            if !answered.insert(key.clone()) {
                continue;
            }
            let mut r = ListOffsetsPartitionResponse::default();
            r.partition_index = p.partition_index;
            r.timestamp = -1;
            r.offset = -1;
            r.leader_epoch = -1;
            if !allowed {
                r.error_code = ResponseError::TopicAuthorizationFailed.code();
                t.partitions.push(r);
                continue;
            }
            if times_named[&key] > 1 {
                r.error_code = ResponseError::InvalidRequest.code();
                t.partitions.push(r);
                continue;
            }
            match ctx
                .replica_manager
                .leader_partition(&topic.name, p.partition_index, || ctx.metadata())
            {
                Err(code) => r.error_code = code,
                Ok(partition) => match partition.check_leader_epoch(p.current_leader_epoch) {
                    Err(code) => r.error_code = code,
                    Ok(()) => match lookup(&partition, version, p.timestamp, from_follower) {
                        Ok((timestamp, offset)) => {
                            r.timestamp = timestamp;
                            r.offset = offset;
                            // leader_epoch exists from v4 and may not be set below it.
                            if version >= 4 && offset >= 0 {
                                r.leader_epoch = partition.leader_epoch();
                            }
                        }
                        Err(code) => r.error_code = code,
                    },
                },
            }
            t.partitions.push(r);
        }
        if !t.partitions.is_empty() {
            response.topics.push(t);
        }
    }
    response
}

/// `(timestamp, offset)` for one partition, or an error code.
fn lookup(
    partition: &Partition,
    version: i16,
    timestamp: i64,
    from_follower: bool,
) -> Result<(i64, i64), i16> {
    let unsupported = ResponseError::UnsupportedVersion.code();
    // A consumer's last fetchable offset; a follower's is the log end.
    let high_watermark = partition.high_watermark();
    let lagging = !from_follower && partition.leader_epoch_start_offset() > high_watermark;
    let not_available = ResponseError::OffsetNotAvailable.code();
    match timestamp {
        LATEST_TIMESTAMP if from_follower => Ok((-1, partition.log_end_offset())),
        LATEST_TIMESTAMP if lagging => Err(not_available),
        LATEST_TIMESTAMP => Ok((-1, high_watermark)),
        EARLIEST_TIMESTAMP => Ok((-1, partition.log_start_offset())),
        MAX_TIMESTAMP if version >= 7 => {
            let batch = partition
                .read_batch_with_max_timestamp()
                .map_err(|e| storage_error_code(&e))?;
            Ok(batch
                .and_then(|b| find_record(b, |_, _| true, true))
                .unwrap_or((-1, -1)))
        }
        EARLIEST_LOCAL_TIMESTAMP if version >= 8 => Ok((-1, partition.log_start_offset())),
        LATEST_TIERED_TIMESTAMP if version >= 9 => Ok((-1, -1)),
        MAX_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP | LATEST_TIERED_TIMESTAMP => Err(unsupported),
        t if t < 0 => Err(ResponseError::InvalidRequest.code()),
        t => {
            // Records below the log start offset (DeleteRecords may leave
            // some at the front of a batch) are not candidates.
            let log_start_offset = partition.log_start_offset();
            let batch = partition
                .read_batch_for_timestamp(t)
                .map_err(|e| storage_error_code(&e))?;
            let found = batch
                .and_then(|b| {
                    find_record(b, |ts, offset| ts >= t && offset >= log_start_offset, false)
                })
                .filter(|&(_, offset)| from_follower || offset < high_watermark);
            match found {
                Some(found) => Ok(found),
                None if lagging => Err(not_available),
                None => Ok((-1, -1)),
            }
        }
    }
}

/// Decodes one stored batch and returns `(timestamp, offset)` of the first
/// record for which `wanted(timestamp, offset)` holds, or with `max` of the first record holding the
/// largest timestamp. Control records are skipped.
fn find_record(batch: Bytes, wanted: impl Fn(i64, i64) -> bool, max: bool) -> Option<(i64, i64)> {
    let mut buf = batch;
    let set = match RecordBatchDecoder::decode(&mut buf) {
        Ok(set) => set,
        Err(e) => {
            tracing::error!(error = %e, "cannot decode a stored batch for ListOffsets");
            return None;
        }
    };
    let records = set.records.iter().filter(|r| !r.control);
    if max {
        records.fold(None::<(i64, i64)>, |best, r| match best {
            Some((ts, _)) if ts >= r.timestamp => best,
            _ => Some((r.timestamp, r.offset)),
        })
    } else {
        records
            .filter(|r| wanted(r.timestamp, r.offset))
            .map(|r| (r.timestamp, r.offset))
            .next()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use uuid::Uuid;
    use weir_storage::{Log, LogConfig, TopicPartition};

    use super::*;
    use crate::partition::tests::batch;
    use crate::partition::Registration;

    fn registration<'a>(
        isr: &'a [i32],
        leader_epoch: i32,
        partition_epoch: i32,
        alive: &'a BTreeMap<i32, i64>,
    ) -> Registration<'a> {
        Registration {
            local_broker_id: 1,
            replicas: &[1, 2],
            isr,
            leader_epoch,
            partition_epoch,
            min_insync_replicas: 1,
            alive,
            max_lag_ms: 30_000,
        }
    }

    /// Chaos seed 1000 (`hw-regression`): a follower elected leader with
    /// a high watermark below its log end answered ListOffsets latest with
    /// that stale high watermark, one below an offset the previous leader
    /// had acknowledged. Kafka answers OFFSET_NOT_AVAILABLE until the high
    /// watermark reaches the leader epoch's start offset, and finds no
    /// timestamp at or above the high watermark.
    #[test]
    fn chaos_seed_1000_a_new_leader_with_a_lagging_high_watermark_answers_offset_not_available() {
        let dir = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("hw", 0);
        let log = Log::open(
            dir.path().to_path_buf(),
            tp.clone(),
            LogConfig::default(),
            0,
            0,
        )
        .unwrap();
        let partition = Partition::new(tp, Uuid::new_v4(), Arc::new(Mutex::new(log)), 0);
        let alive = BTreeMap::from([(1, 10), (2, 20)]);
        partition.become_follower(&registration(&[1, 2], 1, 1, &alive));
        partition
            .append_as_follower(&batch("acknowledged by the old leader"), 1)
            .unwrap()
            .expect("a follower of epoch 1");
        partition.update_follower_offsets(0, 0).unwrap();
        assert_eq!(partition.high_watermark(), 0);

        partition
            .become_leader(&registration(&[1, 2], 2, 2, &alive), 0)
            .unwrap();
        assert_eq!(partition.leader_epoch_start_offset(), 1);
        let not_available = Err(ResponseError::OffsetNotAvailable.code());
        assert_eq!(
            lookup(&partition, 9, LATEST_TIMESTAMP, false),
            not_available
        );
        assert_eq!(lookup(&partition, 9, 0, false), not_available);
        // A follower's ListOffsets still gets the log end.
        assert_eq!(lookup(&partition, 9, LATEST_TIMESTAMP, true), Ok((-1, 1)));
        assert_eq!(
            lookup(&partition, 9, EARLIEST_TIMESTAMP, false),
            Ok((-1, 0))
        );

        // Broker 2 is fenced and leaves the ISR: the high watermark reaches
        // the log end.
        let leader_only = BTreeMap::from([(1, 10)]);
        partition
            .become_leader(&registration(&[1], 2, 3, &leader_only), 0)
            .unwrap();
        assert_eq!(partition.high_watermark(), 1);
        assert_eq!(lookup(&partition, 9, LATEST_TIMESTAMP, false), Ok((-1, 1)));
        assert_eq!(lookup(&partition, 9, 0, false), Ok((1_000, 0)));
        assert_eq!(lookup(&partition, 9, 2_000, false), Ok((-1, -1)));
    }
}
