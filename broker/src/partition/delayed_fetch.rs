//! `DelayedFetch`: a Fetch whose first read found fewer than `min_bytes`
//! waits here (Kafka 4.1's `kafka.server.DelayedFetch`, created by
//! `ReplicaManager.fetchMessages`).
//!
//! The first read records, per partition, where the fetch begins in the log
//! ([`FetchPartitionStatus`]: the fetch offset with its segment and byte
//! position, Kafka's `startOffsetMetadata`) and the partition's leader
//! epoch. The fetch then watches its partitions' `data_arrived` notifiers
//! (appends, high watermark rises, leadership changes, removal: the
//! purgatory's watch lists, keyed by partition) and on every wake-up
//! compares offsets only ([`DelayedFetch::try_complete`]): the partitions'
//! ends ([`Partition::fetch_offset_snapshot`]: the high watermark for
//! consumers, the log end offset for followers) against the recorded
//! positions, never reading the log. It completes, as Kafka's
//! `tryComplete`:
//!
//! - when the partition is no longer led here, left the image, or its
//!   leader epoch changed since the first read (Kafka's cases A, B, C and
//!   E; Kafka checks the epoch only when the client sent one, Weir on any
//!   change: the log may have been truncated meanwhile);
//! - when the fetch offset is beyond the end (the log was truncated below
//!   it, or a consumer fetches above the high watermark: case F);
//! - when the end lies on a newer segment than the fetch offset (a roll, or
//!   a fetch behind the active segment: case F);
//! - when the bytes between the fetch offset and the end, over the
//!   partitions whose two positions lie on one segment, each capped at its
//!   `partition_max_bytes`, reach `min_bytes` (case G);
//! - at `max_wait_ms` (Kafka's `onExpiration`).
//!
//! Only then does the handler read the logs, once. Kafka's case D (an
//! offline log directory) does not exist in Weir (a failed read answers
//! KAFKA_STORAGE_ERROR); case H (the leader's log truncated under a
//! follower's `LastFetchedEpoch`) needs a truncation of the leader's log,
//! which happens only after it stopped leading, and so is covered by the
//! leadership check.
//!
//! A follower's parked fetch completes on its log end offset only, as in
//! Kafka: a high watermark rise alone does not answer it (the follower
//! learns the new high watermark with its next records or at
//! `replica.fetch.wait.max.ms`; nothing on the leader waits for that).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::task::Poll;

use tokio::sync::futures::Notified;
use tokio::time::Instant;
use weir_storage::{Log, LogOffsetMetadata};

use super::{lock, Partition, PurgatoryGauge};
use crate::fetch_session::SessionWaker;

/// No offset known (Kafka's `LogOffsetMetadata.UNKNOWN_OFFSET_METADATA`).
pub(super) const UNKNOWN_METADATA: LogOffsetMetadata = LogOffsetMetadata {
    message_offset: -1,
    segment: None,
};

/// Which end of the log a fetch reads up to (Kafka's `FetchIsolation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchIsolation {
    /// The log end offset: followers (`LOG_END`).
    LogEnd,
    /// The high watermark: consumers with `read_uncommitted`
    /// (`HIGH_WATERMARK`).
    HighWatermark,
    /// The last stable offset: consumers with `read_committed`
    /// (`TXN_COMMITTED`). Weir serves no transactions, so it is the high
    /// watermark.
    TxnCommitted,
}

/// A partition's state as a parked fetch compares it (Kafka's
/// `LogOffsetSnapshot` from `Partition.fetchOffsetSnapshot`), taken
/// without reading the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchOffsetSnapshot {
    /// This broker still leads the partition and hosts it.
    pub serving: bool,
    /// The partition's leader epoch.
    pub leader_epoch: i32,
    /// Where the fetch's isolation ends: the log end offset or the high
    /// watermark, with its position when known.
    pub end: LogOffsetMetadata,
}

impl Partition {
    /// The offsets a parked fetch compares (Kafka's
    /// `Partition.fetchOffsetSnapshot`): leadership, leader epoch and the
    /// end for `isolation`. The log end is taken under the log's lock; the
    /// high watermark's position is remembered per value
    /// (`Partition::high_watermark_metadata`), so a wake-up that finds
    /// the high watermark where it was takes no log lock.
    pub fn fetch_offset_snapshot(&self, isolation: FetchIsolation) -> FetchOffsetSnapshot {
        let serving = self.is_leader() && !self.is_removed();
        let leader_epoch = self.leader_epoch();
        let end = match isolation {
            FetchIsolation::LogEnd => lock(&self.log).log_end_offset_metadata(),
            FetchIsolation::HighWatermark | FetchIsolation::TxnCommitted => {
                self.high_watermark_metadata()
            }
        };
        FetchOffsetSnapshot {
            serving,
            leader_epoch,
            end,
        }
    }

    /// The high watermark with its position in the log (Kafka's
    /// `UnifiedLog.fetchHighWatermarkMetadata`): remembered for the last
    /// value asked for; a new value is converted under the log's lock
    /// ([`Log::convert_to_offset_metadata`], which knows the recent batch
    /// ends without a read). Offset only if the conversion fails.
    pub(super) fn high_watermark_metadata(&self) -> LogOffsetMetadata {
        let high_watermark = self.high_watermark();
        {
            let cached = self.cached_high_watermark_metadata();
            if cached.message_offset == high_watermark && cached.segment.is_some() {
                return *cached;
            }
        }
        let log = lock(&self.log);
        self.high_watermark_metadata_locked(&log, high_watermark)
    }

    /// [`Partition::high_watermark_metadata`] of `high_watermark` with the
    /// log's lock held.
    pub(super) fn high_watermark_metadata_locked(
        &self,
        log: &Log,
        high_watermark: i64,
    ) -> LogOffsetMetadata {
        let mut cached = self.cached_high_watermark_metadata();
        if cached.message_offset != high_watermark || cached.segment.is_none() {
            *cached = log
                .convert_to_offset_metadata(high_watermark)
                .unwrap_or(LogOffsetMetadata::message_offset_only(high_watermark));
        }
        *cached
    }

    /// Forgets the high watermark's position: the log under it changed
    /// (truncation, a new leadership).
    pub(super) fn forget_high_watermark_metadata(&self) {
        *self.cached_high_watermark_metadata() = UNKNOWN_METADATA;
    }

    fn cached_high_watermark_metadata(&self) -> MutexGuard<'_, LogOffsetMetadata> {
        self.high_watermark_metadata
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the partition left this broker's image (its topic was
    /// deleted or recreated).
    pub fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// Marks the partition removed from the image: it stops serving, and
    /// parked fetches and acks=all waits on it end (Kafka's
    /// `ReplicaManager.stopPartitions` completes their delayed operations).
    pub fn mark_removed(&self) {
        self.removed.store(true, Ordering::Release);
        self.leader.store(false, Ordering::Release);
        self.replication_changed.notify_waiters();
        self.data_arrived.notify_waiters();
        self.fetch_state_changed();
    }
}

/// One partition of a parked fetch (Kafka's `FetchPartitionStatus`).
#[derive(Clone)]
pub struct FetchPartitionStatus {
    /// The partition.
    pub partition: Arc<Partition>,
    /// Where the first read began (Kafka's `startOffsetMetadata`, the
    /// read's `fetch_offset_metadata`).
    pub fetch_offset: LogOffsetMetadata,
    /// The partition's leader epoch at the first read.
    pub leader_epoch: i32,
    /// The request's `partition_max_bytes`: the most this partition counts
    /// towards `min_bytes`.
    pub max_bytes: usize,
}

/// What one partition says when a parked fetch checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PartitionCheck {
    /// The fetch must be answered now.
    Complete,
    /// Bytes a read would return, towards `min_bytes`.
    Available(usize),
}

/// Kafka's `DelayedFetch.tryComplete` for one partition (rules in the
/// module docs), from the status recorded at the first read and a snapshot
/// taken now.
pub(crate) fn check_partition(
    fetch_offset: &LogOffsetMetadata,
    leader_epoch: i32,
    max_bytes: usize,
    now: &FetchOffsetSnapshot,
) -> PartitionCheck {
    if !now.serving || now.leader_epoch != leader_epoch {
        return PartitionCheck::Complete;
    }
    let end = &now.end;
    // Equal offsets go straight to the byte count (Kafka: after a roll the
    // high watermark may stay on the old segment at the same offset).
    if fetch_offset.message_offset > end.message_offset {
        return PartitionCheck::Complete;
    }
    if fetch_offset.message_offset < end.message_offset {
        if fetch_offset.on_older_segment(end) {
            return PartitionCheck::Complete;
        }
        if let Some(diff) = end.position_diff(fetch_offset) {
            return PartitionCheck::Available((diff.max(0) as usize).min(max_bytes));
        }
    }
    PartitionCheck::Available(0)
}

/// Whether a fetch completes given each partition's check (Kafka's
/// `tryComplete`): any partition that asks for it, or the bytes available
/// over all of them reaching `min_bytes`.
pub(crate) fn completes(
    checks: impl IntoIterator<Item = PartitionCheck>,
    min_bytes: usize,
) -> bool {
    let mut accumulated = 0usize;
    for check in checks {
        match check {
            PartitionCheck::Complete => return true,
            PartitionCheck::Available(bytes) => accumulated = accumulated.saturating_add(bytes),
        }
    }
    accumulated >= min_bytes
}

/// A Fetch parked until its partitions hold `min_bytes` for it (see the
/// module docs).
pub struct DelayedFetch {
    partitions: Vec<FetchPartitionStatus>,
    isolation: FetchIsolation,
    min_bytes: usize,
}

impl DelayedFetch {
    /// A fetch over `partitions` (those its first read found without
    /// error), reading up to `isolation`'s end, waiting for `min_bytes`.
    pub fn new(
        partitions: Vec<FetchPartitionStatus>,
        isolation: FetchIsolation,
        min_bytes: usize,
    ) -> Self {
        DelayedFetch {
            partitions,
            isolation,
            min_bytes,
        }
    }

    /// Whether the fetch can be answered now (Kafka's `tryComplete`):
    /// offsets and positions only, no read of the log.
    pub fn try_complete(&self) -> bool {
        completes(
            self.partitions.iter().map(|s| {
                let now = s.partition.fetch_offset_snapshot(self.isolation);
                check_partition(&s.fetch_offset, s.leader_epoch, s.max_bytes, &now)
            }),
            self.min_bytes,
        )
    }

    /// Waits until [`DelayedFetch::try_complete`] holds, `session` (a
    /// follower fetch session's waker, see `crate::fetch_session`) reports
    /// a quiet partition changed, or `deadline` passes; returns false when
    /// it expired. Counted in `weir_purgatory_size{operation="fetch"}`
    /// while it waits (Kafka's `tryCompleteElseWatch`: the watches are set
    /// before the first check, so a change after it wakes the fetch).
    /// Allocates one notifier future per partition once; a wake-up re-arms
    /// the notifiers that fired in place and takes no lock across an await.
    pub async fn wait(&self, deadline: Instant, session: Option<&SessionWaker>) -> bool {
        let mut watches: Vec<Pin<Box<Notified<'_>>>> = self
            .partitions
            .iter()
            .map(|s| {
                let mut notified = Box::pin(s.partition.data_arrived());
                notified.as_mut().enable();
                notified
            })
            .collect();
        let mut session_watch = session.map(|w| {
            let mut notified = Box::pin(w.notified());
            notified.as_mut().enable();
            notified
        });
        if session.is_some_and(SessionWaker::any_woken) || self.try_complete() {
            return true;
        }
        let _parked = PurgatoryGauge::enter("fetch");
        let expiry = tokio::time::sleep_until(deadline);
        tokio::pin!(expiry);
        loop {
            let woken = std::future::poll_fn(|cx| {
                if let Some(notified) = session_watch.as_mut() {
                    if notified.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Wake::Session);
                    }
                }
                let mut woken = false;
                for (notified, status) in watches.iter_mut().zip(&self.partitions) {
                    if notified.as_mut().poll(cx).is_ready() {
                        // Watch again before the check below.
                        notified.set(status.partition.data_arrived());
                        notified.as_mut().enable();
                        woken = true;
                    }
                }
                if woken {
                    Poll::Ready(Wake::Partition)
                } else if expiry.as_mut().poll(cx).is_ready() {
                    Poll::Ready(Wake::Expired)
                } else {
                    Poll::Pending
                }
            })
            .await;
            match woken {
                Wake::Session => return true,
                Wake::Expired => return false,
                Wake::Partition => {
                    if self.try_complete() {
                        return true;
                    }
                }
            }
        }
    }
}

/// What woke a parked fetch.
enum Wake {
    /// A quiet partition of the fetch's session changed.
    Session,
    /// One of its partitions' `data_arrived`.
    Partition,
    /// `max_wait_ms` passed.
    Expired,
}

#[cfg(test)]
mod tests;
