//! The leader's view of a partition's replicas: per-follower fetch state,
//! the ISR with its pending change, and the rules that move the high
//! watermark and the ISR (Kafka 4.1's `cluster/Replica.scala` and
//! `cluster/Partition.scala`). Pure but for a quiet follower's link (an
//! atomic read of its session's last Fetch): time and broker liveness are
//! passed in, so every rule has a table test below; `crate::partition`
//! holds one [`LeaderState`] per partition under a mutex and acts on the
//! answers.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::fetch_session::QuietLink;

/// Offset meaning "not known yet" (Kafka's `UnifiedLog.UNKNOWN_OFFSET`).
pub const UNKNOWN_OFFSET: i64 = -1;

/// What the leader knows of one follower (Kafka's `Replica.ReplicaState`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerState {
    /// The follower's log start offset, from its last Fetch.
    pub log_start_offset: i64,
    /// The follower's log end offset: the fetch offset of its last Fetch
    /// (everything below it is on the follower, and on its stable storage in
    /// the durable mode, see `replication::fetcher`).
    pub log_end_offset: i64,
    /// The leader's log end offset at the follower's last Fetch.
    pub last_fetch_leader_log_end_offset: i64,
    /// When the follower last fetched, ms since the epoch.
    pub last_fetch_time_ms: i64,
    /// The last time the follower was caught up (Kafka's
    /// `lastCaughtUpTimeMs`), ms since the epoch.
    pub last_caught_up_time_ms: i64,
    /// The broker epoch its last Fetch carried (KIP-903), if any.
    pub broker_epoch: Option<i64>,
    /// The follower's fetch session skips the partition as quiet: each of
    /// the session's Fetches counts as a Fetch at this leader's log end
    /// offset (see `crate::fetch_session`), until the link is frozen; the
    /// next recorded Fetch replaces it.
    pub quiet: Option<QuietFetches>,
}

/// A follower's [`QuietLink`] as its state holds it (equal when it is the
/// same link).
#[derive(Debug, Clone)]
pub struct QuietFetches(pub Arc<QuietLink>);

impl PartialEq for QuietFetches {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for QuietFetches {}

impl FollowerState {
    /// The state a new leader starts each follower with (Kafka's
    /// `Replica.resetReplicaState` with `isNewLeader`): offsets unknown,
    /// and caught up "now" only if the follower is in the ISR, so that a
    /// follower outside it does not hold the high watermark back.
    pub fn for_new_leader(now_ms: i64, in_isr: bool) -> Self {
        FollowerState {
            log_start_offset: UNKNOWN_OFFSET,
            log_end_offset: UNKNOWN_OFFSET,
            last_fetch_leader_log_end_offset: UNKNOWN_OFFSET,
            last_fetch_time_ms: 0,
            last_caught_up_time_ms: if in_isr { now_ms } else { 0 },
            broker_epoch: None,
            quiet: None,
        }
    }

    /// The last time the follower was caught up (Kafka's
    /// `lastCaughtUpTimeMs`), counting its quiet session's Fetches, each at
    /// this leader's log end offset; ms since the epoch.
    pub fn caught_up_time_ms(&self) -> i64 {
        self.last_caught_up_time_ms.max(self.quiet_fetch_ms())
    }

    fn quiet_fetch_ms(&self) -> i64 {
        self.quiet.as_ref().map_or(i64::MIN, |q| q.0.fetch_ms())
    }

    /// Kafka's `ReplicaState.isCaughtUp`: at the leader's end, or caught up
    /// within the last `max_lag_ms`.
    pub fn is_caught_up(&self, leader_end_offset: i64, now_ms: i64, max_lag_ms: i64) -> bool {
        leader_end_offset == self.log_end_offset
            || now_ms.saturating_sub(self.caught_up_time_ms()) <= max_lag_ms
    }

    /// Records a Fetch at `fetch_offset` (Kafka's
    /// `Replica.updateFetchStateOrThrow`): the follower is caught up now if
    /// it fetched from the leader's end, or as of its previous fetch if it
    /// fetched from the end the leader had then.
    fn record_fetch(&mut self, fetch: &FollowerFetch) {
        // The quiet session's Fetches were Fetches at the leader's end.
        if let Some(quiet) = self.quiet.take() {
            let at = quiet.0.fetch_ms();
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(at);
            self.last_fetch_time_ms = self.last_fetch_time_ms.max(at);
        }
        self.last_caught_up_time_ms = if fetch.fetch_offset >= fetch.leader_end_offset {
            self.last_caught_up_time_ms.max(fetch.now_ms)
        } else if fetch.fetch_offset >= self.last_fetch_leader_log_end_offset {
            self.last_caught_up_time_ms.max(self.last_fetch_time_ms)
        } else {
            self.last_caught_up_time_ms
        };
        self.log_start_offset = fetch.log_start_offset;
        self.log_end_offset = fetch.fetch_offset;
        self.last_fetch_leader_log_end_offset = self
            .last_fetch_leader_log_end_offset
            .max(fetch.leader_end_offset);
        self.last_fetch_time_ms = fetch.now_ms;
        if fetch.broker_epoch != -1 {
            self.broker_epoch = Some(fetch.broker_epoch);
        }
    }
}

/// One follower Fetch of one partition, as the leader records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerFetch {
    /// The fetching broker.
    pub replica_id: i32,
    /// Its broker epoch from `ReplicaState` (KIP-903), -1 when not sent.
    pub broker_epoch: i64,
    /// The partition's fetch offset: the follower's log end offset.
    pub fetch_offset: i64,
    /// The follower's log start offset.
    pub log_start_offset: i64,
    /// The leader's log end offset when the Fetch was read.
    pub leader_end_offset: i64,
    /// When the Fetch was read, ms since the epoch.
    pub now_ms: i64,
}

/// Why the leader refused to record a follower's Fetch; both are
/// NOT_LEADER_OR_FOLLOWER on the wire, as in Kafka.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FollowerFetchError {
    /// The broker is not a replica of the partition (Kafka's
    /// `Partition.followerReplicaOrThrow`).
    #[error("replica {replica_id} is not a replica of this partition")]
    UnknownReplica {
        /// The fetching broker.
        replica_id: i32,
    },
    /// The Fetch carries an older broker epoch than the broker's current
    /// registration (a fetch from before a restart, KIP-903).
    #[error("stale fetch state update: broker epoch {broker_epoch}, registered {registered}")]
    StaleBrokerEpoch {
        /// The epoch the Fetch carried.
        broker_epoch: i64,
        /// The broker's registered epoch.
        registered: i64,
    },
}

/// What the metadata image says of a broker, for ISR eligibility (Kafka's
/// `KRaftMetadataCache`): `Some(broker_epoch)` for a registered, unfenced
/// broker, `None` otherwise (fenced brokers, including those in controlled
/// shutdown, which Weir fences at once).
pub type AliveBrokerEpoch<'a> = &'a dyn Fn(i32) -> Option<i64>;

/// The leader's replication state of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderState {
    /// This broker's id.
    pub local_broker_id: i32,
    /// The assignment, in replica order.
    pub replicas: Vec<i32>,
    /// The committed ISR (from the image or an accepted AlterPartition).
    pub isr: Vec<i32>,
    /// The ISR of an AlterPartition in flight (Kafka's `PendingExpandIsr` /
    /// `PendingShrinkIsr`); at most one per partition.
    pub pending_isr: Option<Vec<i32>>,
    /// The partition epoch of the committed state.
    pub partition_epoch: i32,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The log end offset when this leader epoch began (Kafka's
    /// `leaderEpochStartOffsetOpt`).
    pub leader_epoch_start_offset: i64,
    /// The topic's effective `min.insync.replicas`.
    pub min_insync_replicas: i32,
    /// Every other replica's fetch state.
    pub followers: BTreeMap<i32, FollowerState>,
}

impl LeaderState {
    /// The ISR members a pending change may add (Kafka's `maximalIsr`):
    /// the committed ISR with a pending expansion's newcomers. A pending
    /// shrink keeps the committed ISR, so the high watermark stays as
    /// conservative as either outcome needs.
    pub fn maximal_isr(&self) -> Vec<i32> {
        let mut maximal = self.isr.clone();
        maximal.extend(self.pending_newcomers());
        maximal
    }

    /// Whether `broker` is in the [`LeaderState::maximal_isr`] (no
    /// allocation: the high watermark asks it on every append).
    pub fn in_maximal_isr(&self, broker: i32) -> bool {
        self.isr.contains(&broker) || self.pending_newcomers().any(|b| b == broker)
    }

    /// The size of the [`LeaderState::maximal_isr`].
    pub fn maximal_isr_len(&self) -> usize {
        self.isr.len() + self.pending_newcomers().count()
    }

    /// Members of the pending ISR that the committed one lacks.
    fn pending_newcomers(&self) -> impl Iterator<Item = i32> + '_ {
        self.pending_isr
            .iter()
            .flatten()
            .copied()
            .filter(|b| !self.isr.contains(b))
    }

    /// Kafka's `Partition.effectiveMinIsr`: `min.insync.replicas` capped at
    /// the replica count (at least 1).
    pub fn effective_min_isr(&self) -> usize {
        (self.min_insync_replicas.max(1) as usize).min(self.replicas.len().max(1))
    }

    /// Kafka's strict min ISR (`Partition.isUnderMinIsr`): fewer ISR
    /// members than [`LeaderState::effective_min_isr`].
    pub fn is_under_min_isr(&self) -> bool {
        self.isr.len() < self.effective_min_isr()
    }

    /// Records a follower's Fetch.
    ///
    /// # Errors
    /// [`FollowerFetchError`] when the broker is not a replica or its
    /// broker epoch is older than `alive(replica_id)` (Kafka's
    /// `Replica.updateFetchStateOrThrow`).
    pub fn record_follower_fetch(
        &mut self,
        fetch: &FollowerFetch,
        alive: AliveBrokerEpoch<'_>,
    ) -> Result<(), FollowerFetchError> {
        self.fetching_follower(fetch.replica_id, fetch.broker_epoch, alive)?
            .record_fetch(fetch);
        Ok(())
    }

    /// Attaches a follower's [`QuietLink`] (its session found the
    /// partition quiet: the follower at this leader's log end offset, an
    /// ISR member); nothing when the link's broker is not a follower.
    pub fn link_quiet(&mut self, link: Arc<QuietLink>) {
        if let Some(follower) = self.followers.get_mut(&link.follower()) {
            follower.quiet = Some(QuietFetches(link));
        }
    }

    /// The state of `replica_id` for a Fetch carrying `broker_epoch`.
    ///
    /// # Errors
    /// [`FollowerFetchError`] when the broker is not a replica or its
    /// broker epoch is older than `alive(replica_id)`.
    fn fetching_follower(
        &mut self,
        replica_id: i32,
        broker_epoch: i64,
        alive: AliveBrokerEpoch<'_>,
    ) -> Result<&mut FollowerState, FollowerFetchError> {
        let follower = self
            .followers
            .get_mut(&replica_id)
            .ok_or(FollowerFetchError::UnknownReplica { replica_id })?;
        if let Some(registered) = alive(replica_id) {
            if broker_epoch != -1 && registered > broker_epoch {
                return Err(FollowerFetchError::StaleBrokerEpoch {
                    broker_epoch,
                    registered,
                });
            }
        }
        Ok(follower)
    }

    /// Kafka's `Partition.isReplicaIsrEligible` (KRaft): not fenced (nor
    /// shutting down) and, when the follower sent its broker epoch, that
    /// epoch is the registered one.
    fn is_isr_eligible(&self, replica_id: i32, alive: AliveBrokerEpoch<'_>) -> bool {
        let Some(follower) = self.followers.get(&replica_id) else {
            return false;
        };
        match alive(replica_id) {
            None => false,
            Some(registered) => follower.broker_epoch.is_none_or(|e| e == registered),
        }
    }

    /// The ISR to propose when `replica_id` may join it (Kafka's
    /// `maybeExpandIsr` / `needsExpandIsr` / `isFollowerInSync`): no change
    /// in flight, not in the ISR, eligible, and its log end offset has
    /// reached both the high watermark and this leader epoch's start
    /// offset.
    pub fn isr_to_expand(
        &self,
        replica_id: i32,
        high_watermark: i64,
        alive: AliveBrokerEpoch<'_>,
    ) -> Option<Vec<i32>> {
        if self.pending_isr.is_some()
            || self.isr.contains(&replica_id)
            || !self.is_isr_eligible(replica_id, alive)
        {
            return None;
        }
        let end = self.followers.get(&replica_id)?.log_end_offset;
        (end >= high_watermark && end >= self.leader_epoch_start_offset).then(|| {
            let mut isr = self.isr.clone();
            isr.push(replica_id);
            isr
        })
    }

    /// The ISR to propose without the followers that are out of sync
    /// (Kafka's `maybeShrinkIsr` / `getOutOfSyncReplicas`): ISR members
    /// other than the leader not caught up within `max_lag_ms`. `None`
    /// when a change is in flight or every member is in sync.
    pub fn isr_to_shrink(
        &self,
        leader_end_offset: i64,
        now_ms: i64,
        max_lag_ms: i64,
    ) -> Option<Vec<i32>> {
        if self.pending_isr.is_some() {
            return None;
        }
        let out_of_sync = |b: &i32| {
            *b != self.local_broker_id
                && self
                    .followers
                    .get(b)
                    .is_none_or(|f| !f.is_caught_up(leader_end_offset, now_ms, max_lag_ms))
        };
        if !self.isr.iter().any(out_of_sync) {
            return None;
        }
        Some(
            self.isr
                .iter()
                .copied()
                .filter(|b| !out_of_sync(b))
                .collect(),
        )
    }

    /// The high watermark the replicas allow (Kafka's
    /// `Partition.maybeIncrementLeaderHW`): `None` under the strict min ISR;
    /// else the smallest log end offset among the leader (`leader_end_offset`)
    /// and the followers that are in the maximal ISR or are caught up and
    /// eligible (they are about to join it). The caller only ever raises
    /// the high watermark with it (it is monotonic).
    pub fn high_watermark_candidate(
        &self,
        leader_end_offset: i64,
        now_ms: i64,
        max_lag_ms: i64,
        alive: AliveBrokerEpoch<'_>,
    ) -> Option<i64> {
        if self.is_under_min_isr() {
            return None;
        }
        let mut high_watermark = leader_end_offset;
        for (&id, follower) in &self.followers {
            if follower.log_end_offset < high_watermark
                && (self.in_maximal_isr(id)
                    || (follower.is_caught_up(leader_end_offset, now_ms, max_lag_ms)
                        && self.is_isr_eligible(id, alive)))
            {
                high_watermark = follower.log_end_offset;
            }
        }
        Some(high_watermark)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAG: i64 = 30_000;

    /// Leader 1 with followers 2 and 3, ISR as given, min ISR 2, epoch
    /// start offset 0; followers fetched at `ends` (`None`: never fetched)
    /// at time 1000 with the leader's end at 100.
    fn state(isr: &[i32], ends: [Option<i64>; 2]) -> LeaderState {
        let mut s = LeaderState {
            local_broker_id: 1,
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
            pending_isr: None,
            partition_epoch: 0,
            leader_epoch: 0,
            leader_epoch_start_offset: 0,
            min_insync_replicas: 2,
            followers: [2, 3]
                .into_iter()
                .map(|b| (b, FollowerState::for_new_leader(0, isr.contains(&b))))
                .collect(),
        };
        for (b, end) in [2, 3].into_iter().zip(ends) {
            if let Some(end) = end {
                s.record_follower_fetch(&fetch(b, end, 100, 1000), &all_alive)
                    .unwrap();
            }
        }
        s
    }

    fn fetch(replica_id: i32, fetch_offset: i64, leader_end: i64, now_ms: i64) -> FollowerFetch {
        FollowerFetch {
            replica_id,
            broker_epoch: 10,
            fetch_offset,
            log_start_offset: 0,
            leader_end_offset: leader_end,
            now_ms,
        }
    }

    fn all_alive(_: i32) -> Option<i64> {
        Some(10)
    }

    /// One row per rule of Kafka's `maybeIncrementLeaderHW`.
    #[test]
    fn high_watermark_rules() {
        let fenced_3 = |b: i32| (b != 3).then_some(10);
        type Row<'a> = (&'a str, LeaderState, AliveBrokerEpoch<'a>, Option<i64>);
        let rows: Vec<Row<'_>> = vec![
            (
                "min over the ISR's log end offsets",
                state(&[1, 2, 3], [Some(80), Some(90)]),
                &all_alive,
                Some(80),
            ),
            (
                "the leader's end when every ISR follower is ahead of nothing",
                state(&[1, 2, 3], [Some(100), Some(100)]),
                &all_alive,
                Some(100),
            ),
            (
                "a follower outside the ISR that is caught up and eligible holds it back",
                state(&[1, 2], [Some(100), Some(70)]),
                &all_alive,
                Some(70),
            ),
            (
                "a follower outside the ISR that is fenced does not",
                state(&[1, 2], [Some(100), Some(70)]),
                &fenced_3,
                Some(100),
            ),
            (
                "an ISR follower that never fetched holds it at unknown",
                state(&[1, 2, 3], [Some(100), None]),
                &all_alive,
                Some(UNKNOWN_OFFSET),
            ),
            (
                "under the strict min ISR it does not move",
                state(&[1], [Some(100), Some(100)]),
                &all_alive,
                None,
            ),
        ];
        for (name, s, alive, expected) in rows {
            assert_eq!(
                s.high_watermark_candidate(100, 1000, LAG, alive),
                expected,
                "{name}"
            );
        }
    }

    /// A follower that lags too long, outside the ISR, does not hold the
    /// high watermark back (its last caught-up time is too old).
    #[test]
    fn a_lagging_follower_outside_the_isr_does_not_hold_the_high_watermark() {
        let mut s = state(&[1, 2], [Some(100), Some(70)]);
        s.record_follower_fetch(&fetch(3, 70, 200, 1000 + LAG + 1), &all_alive)
            .unwrap();
        s.record_follower_fetch(&fetch(2, 200, 200, 1000 + LAG + 1), &all_alive)
            .unwrap();
        assert_eq!(
            s.high_watermark_candidate(200, 1000 + 2 * LAG + 2, LAG, &all_alive),
            Some(200)
        );
    }

    /// A pending expansion counts its newcomer (maximal ISR); a pending
    /// shrink still counts the member it would remove.
    #[test]
    fn the_maximal_isr_counts_pending_changes_conservatively() {
        let mut expand = state(&[1, 2], [Some(100), Some(60)]);
        expand.pending_isr = Some(vec![1, 2, 3]);
        assert_eq!(expand.maximal_isr(), vec![1, 2, 3]);
        assert_eq!(expand.maximal_isr_len(), 3);
        assert!(expand.in_maximal_isr(3));
        let fenced_3 = |b: i32| (b != 3).then_some(10);
        assert_eq!(
            expand.high_watermark_candidate(100, 1000, LAG, &fenced_3),
            Some(60)
        );
        let mut shrink = state(&[1, 2, 3], [Some(100), Some(60)]);
        shrink.pending_isr = Some(vec![1, 2]);
        assert_eq!(shrink.maximal_isr(), vec![1, 2, 3]);
        assert_eq!(
            shrink.high_watermark_candidate(100, 1000, LAG, &fenced_3),
            Some(60)
        );
    }

    /// One row per rule of Kafka's `maybeExpandIsr`.
    #[test]
    fn isr_expansion_rules() {
        let fenced_3 = |b: i32| (b != 3).then_some(10);
        let newer_epoch_3 = |b: i32| Some(if b == 3 { 11 } else { 10 });
        let mut pending = state(&[1, 2], [Some(100), Some(100)]);
        pending.pending_isr = Some(vec![1]);
        let mut late_epoch_start = state(&[1, 2], [Some(100), Some(50)]);
        late_epoch_start.leader_epoch_start_offset = 60;
        type Row<'a> = (
            &'a str,
            LeaderState,
            i64,
            AliveBrokerEpoch<'a>,
            Option<Vec<i32>>,
        );
        let rows: Vec<Row<'_>> = vec![
            (
                "caught up to the high watermark: joins",
                state(&[1, 2], [Some(100), Some(90)]),
                90,
                &all_alive,
                Some(vec![1, 2, 3]),
            ),
            (
                "below the high watermark: waits",
                state(&[1, 2], [Some(100), Some(89)]),
                90,
                &all_alive,
                None,
            ),
            (
                "below the leader epoch's start offset: waits",
                late_epoch_start,
                40,
                &all_alive,
                None,
            ),
            (
                "fenced: not eligible",
                state(&[1, 2], [Some(100), Some(100)]),
                100,
                &fenced_3,
                None,
            ),
            (
                "fetched with an older broker epoch: not eligible (KIP-903)",
                state(&[1, 2], [Some(100), Some(100)]),
                100,
                &newer_epoch_3,
                None,
            ),
            ("a change in flight: waits", pending, 100, &all_alive, None),
            (
                "already in the ISR: nothing",
                state(&[1, 2, 3], [Some(100), Some(100)]),
                100,
                &all_alive,
                None,
            ),
        ];
        for (name, s, hw, alive, expected) in rows {
            assert_eq!(s.isr_to_expand(3, hw, alive), expected, "{name}");
        }
    }

    /// One row per rule of Kafka's `maybeShrinkIsr` and
    /// `Replica.isCaughtUp` / `updateFetchStateOrThrow`.
    #[test]
    fn isr_shrink_rules() {
        // Follower 3 fetched at the leader's end at 1000, then the leader
        // grew to 150 and 3 did not fetch again.
        let caught_up = state(&[1, 2, 3], [Some(100), Some(100)]);
        assert_eq!(caught_up.isr_to_shrink(100, 1000 + LAG, LAG), None);
        assert_eq!(
            caught_up.isr_to_shrink(150, 1000 + LAG, LAG),
            None,
            "caught up within max lag"
        );
        assert_eq!(
            caught_up.isr_to_shrink(150, 1001 + LAG, LAG),
            Some(vec![1]),
            "both followers lagged more than replica.lag.time.max.ms"
        );
        // A follower that keeps fetching from where the leader's end was
        // at its previous fetch stays caught up as of that fetch.
        let mut steady = state(&[1, 2, 3], [Some(100), Some(100)]);
        steady
            .record_follower_fetch(&fetch(2, 100, 150, 1000 + LAG), &all_alive)
            .unwrap();
        steady
            .record_follower_fetch(&fetch(2, 150, 200, 2000 + LAG), &all_alive)
            .unwrap();
        assert_eq!(
            steady.followers[&2].last_caught_up_time_ms,
            1000 + LAG,
            "caught up as of the fetch whose leader end it reached"
        );
        assert_eq!(steady.isr_to_shrink(200, 2001 + LAG, LAG), Some(vec![1, 2]));
        // A change in flight: no second one.
        let mut pending = state(&[1, 2, 3], [Some(10), Some(10)]);
        pending.pending_isr = Some(vec![1, 2, 3]);
        assert_eq!(pending.isr_to_shrink(150, 10 * LAG, LAG), None);
        // An ISR member that never fetched after the election is removed
        // once the lag has passed.
        let silent = state(&[1, 2, 3], [Some(100), None]);
        assert_eq!(silent.isr_to_shrink(100, LAG + 1, LAG), Some(vec![1, 2]));
    }

    /// A quiet session's Fetches count as Fetches at the leader's end
    /// (Kafka reads the partition on each of them): a follower whose
    /// session kept fetching stays in the ISR when the leader's end moves
    /// long after its last recorded Fetch, and only the session's Fetches
    /// before the link was frozen count.
    #[test]
    fn a_quiet_sessions_fetches_keep_its_follower_caught_up() {
        use std::sync::atomic::{AtomicI64, Ordering};
        // Both followers fetched at the leader's end (100) at 1000 and went
        // quiet; 2's session keeps fetching, 3's stopped at 1000.
        let mut s = state(&[1, 2, 3], [Some(100), Some(100)]);
        let session_2 = Arc::new(AtomicI64::new(1000));
        let link_2 = Arc::new(QuietLink::new(2, session_2.clone()));
        s.link_quiet(link_2.clone());
        s.link_quiet(Arc::new(QuietLink::new(3, Arc::new(AtomicI64::new(1000)))));
        s.link_quiet(Arc::new(QuietLink::new(4, Arc::new(AtomicI64::new(0)))));
        assert!(
            !s.followers.contains_key(&4),
            "a stranger's link is dropped"
        );
        session_2.store(5 * LAG, Ordering::SeqCst);
        assert_eq!(s.followers[&2].caught_up_time_ms(), 5 * LAG);
        // The leader's end moves: the append freezes the links.
        link_2.freeze();
        session_2.store(6 * LAG, Ordering::SeqCst);
        assert_eq!(
            s.followers[&2].caught_up_time_ms(),
            5 * LAG,
            "a Fetch after the change is not one at the old end"
        );
        assert_eq!(
            s.isr_to_shrink(150, 5 * LAG + 1, LAG),
            Some(vec![1, 2]),
            "3's session stopped fetching at 1000"
        );
        assert_eq!(s.isr_to_shrink(150, 6 * LAG, LAG), Some(vec![1, 2]));
        assert_eq!(s.isr_to_shrink(150, 6 * LAG + 1, LAG), Some(vec![1]));
        // The next recorded Fetch takes the link's time as its previous
        // one (fetching from the end the leader had then: caught up as of
        // that Fetch) and replaces the link.
        s.record_follower_fetch(&fetch(2, 100, 150, 6 * LAG), &all_alive)
            .unwrap();
        let follower = &s.followers[&2];
        assert_eq!(follower.quiet, None);
        assert_eq!(follower.last_caught_up_time_ms, 5 * LAG);
        assert_eq!(follower.last_fetch_time_ms, 6 * LAG);
    }

    /// Kafka answers NOT_LEADER_OR_FOLLOWER to a Fetch from a broker that
    /// is not a replica, or from a replica's older incarnation.
    #[test]
    fn fetches_from_strangers_and_stale_incarnations_are_refused() {
        let mut s = state(&[1, 2, 3], [None, None]);
        assert_eq!(
            s.record_follower_fetch(&fetch(4, 0, 0, 0), &all_alive),
            Err(FollowerFetchError::UnknownReplica { replica_id: 4 })
        );
        let restarted = |_: i32| Some(11);
        assert_eq!(
            s.record_follower_fetch(&fetch(2, 0, 0, 0), &restarted),
            Err(FollowerFetchError::StaleBrokerEpoch {
                broker_epoch: 10,
                registered: 11
            })
        );
        let mut unchecked = fetch(2, 5, 5, 0);
        unchecked.broker_epoch = -1;
        assert_eq!(s.record_follower_fetch(&unchecked, &restarted), Ok(()));
        assert_eq!(s.followers[&2].log_end_offset, 5);
    }
}
