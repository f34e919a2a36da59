//! A partition's replication: becoming leader or follower from the
//! metadata image (Kafka's `Partition.makeLeader` / `makeFollower`), the
//! leader's follower tracking, high watermark and ISR proposals
//! (`Partition.updateFollowerFetchState`, `maybeExpandIsr`,
//! `maybeShrinkIsr`, `maybeIncrementLeaderHW`, `handleAlterPartitionUpdate`),
//! the acks=all wait for replication (`DelayedProduce` with
//! `checkEnoughReplicasReachOffset`), and the follower's appends and
//! truncations. The rules themselves are pure, in
//! `crate::replication::leader`.

use std::time::Duration;

use super::*;

/// The leader's replication state with what its rules consult: the
/// replicas' liveness from the latest image and `replica.lag.time.max.ms`.
#[derive(Debug)]
pub(super) struct ReplicationState {
    pub(super) leader: LeaderState,
    /// Broker epoch of every registered, unfenced replica not in
    /// controlled shutdown (Kafka's `isReplicaIsrEligible` view).
    pub(super) alive: BTreeMap<i32, i64>,
    /// `replica.lag.time.max.ms`.
    pub(super) max_lag_ms: i64,
}

impl ReplicationState {
    /// A partition that is its own only replica until the first image.
    pub(super) fn standalone(leader_epoch: i32) -> Self {
        ReplicationState {
            leader: LeaderState {
                local_broker_id: -1,
                replicas: vec![-1],
                isr: vec![-1],
                pending_isr: None,
                partition_epoch: -1,
                leader_epoch,
                leader_epoch_start_offset: 0,
                min_insync_replicas: 1,
                followers: BTreeMap::new(),
            },
            alive: BTreeMap::new(),
            max_lag_ms: 30_000,
        }
    }

    fn alive_fn(&self) -> impl Fn(i32) -> Option<i64> + '_ {
        |b| self.alive.get(&b).copied()
    }
}

/// An ISR change the leader asks the controller for (one partition of an
/// AlterPartition request, KIP-497).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrProposal {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// Its topic id.
    pub topic_id: Uuid,
    /// The leader epoch the change was made in.
    pub leader_epoch: i32,
    /// The partition epoch the change is based on.
    pub partition_epoch: i32,
    /// The proposed ISR.
    pub new_isr: Vec<i32>,
    /// The broker epoch of each member of `new_isr`, in its order: what
    /// the follower's Fetches carried (KIP-903: the controller refuses a
    /// member that has re-registered since), this broker's own from the
    /// image; -1 when unknown (not checked).
    pub broker_epochs: Vec<i64>,
}

/// What the controller answered to an [`IsrProposal`], as the leader acts
/// on it (Kafka's `Partition.handleAlterPartitionError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IsrChangeOutcome {
    /// Applied: the partition's new ISR and epochs.
    Committed {
        /// The ISR.
        isr: Vec<i32>,
        /// The leader epoch.
        leader_epoch: i32,
        /// The new partition epoch.
        partition_epoch: i32,
    },
    /// Refused and certainly not applied (INELIGIBLE_REPLICA,
    /// OPERATION_NOT_ATTEMPTED): back to the committed ISR, a new change may
    /// be proposed at once.
    Rejected,
    /// Refused because this leader's view is stale (FENCED_LEADER_EPOCH,
    /// INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST):
    /// the change stays in flight until the next image resets it.
    Stale,
}

/// How an acks=all produce's wait for replication ended without success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicationWait {
    /// This broker lost the leadership (or a new leader epoch began):
    /// NOT_LEADER_OR_FOLLOWER.
    NotLeader,
    /// The high watermark passed the records with the ISR below
    /// `min.insync.replicas`: NOT_ENOUGH_REPLICAS_AFTER_APPEND.
    NotEnoughReplicasAfterAppend,
    /// `timeout_ms` passed first: REQUEST_TIMED_OUT.
    TimedOut,
}

impl ReplicationWait {
    /// The Kafka error code.
    pub fn code(self) -> i16 {
        match self {
            ReplicationWait::NotLeader => 6,
            ReplicationWait::NotEnoughReplicasAfterAppend => 20,
            ReplicationWait::TimedOut => 7,
        }
    }

    /// The error message of the produce response.
    pub fn message(self) -> &'static str {
        match self {
            ReplicationWait::NotLeader => "this broker is no longer the partition's leader",
            ReplicationWait::NotEnoughReplicasAfterAppend => {
                "the records are written to the log, but to fewer in-sync replicas than required"
            }
            ReplicationWait::TimedOut => {
                "the in-sync replicas did not replicate the records within timeout_ms"
            }
        }
    }
}

/// A partition's registration in the image, as [`Partition::become_leader`]
/// and [`Partition::become_follower`] take it.
#[derive(Debug, Clone, Copy)]
pub struct Registration<'a> {
    /// This broker's id.
    pub local_broker_id: i32,
    /// The assignment.
    pub replicas: &'a [i32],
    /// The ISR.
    pub isr: &'a [i32],
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The partition epoch.
    pub partition_epoch: i32,
    /// The topic's effective `min.insync.replicas`.
    pub min_insync_replicas: i32,
    /// Broker epoch of every registered, unfenced broker among `replicas`
    /// that is not in controlled shutdown.
    pub alive: &'a BTreeMap<i32, i64>,
    /// `replica.lag.time.max.ms`.
    pub max_lag_ms: i64,
}

impl Partition {
    pub(super) fn replication_state(&self) -> MutexGuard<'_, ReplicationState> {
        self.replication.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies the image to a partition this broker leads (Kafka's
    /// `Partition.makeLeader`). A new leader epoch (or a follower becoming
    /// leader) records the epoch's start offset at the log end offset,
    /// starts every follower afresh and drops any ISR change in flight; a
    /// newer partition epoch replaces the ISR. Then the high watermark may
    /// rise (the ISR may be down to the leader).
    ///
    /// # Errors
    /// I/O errors writing the leader-epoch checkpoint.
    pub fn become_leader(&self, r: &Registration<'_>, now_ms: i64) -> Result<(), StorageError> {
        let (log_end_offset, new_leadership) = {
            let mut log = lock(&self.log);
            let mut state = self.replication_state();
            // A partition fresh from `Partition::new` (its own standalone
            // replica, local id -1) is a new leadership too.
            let new_leadership = !self.is_leader()
                || state.leader.leader_epoch != r.leader_epoch
                || state.leader.local_broker_id != r.local_broker_id;
            let end = log.log_end_offset();
            if new_leadership {
                self.forget_high_watermark_metadata();
                // A new, empty log (at offset 0) gets the epoch with its
                // first append (as the leader append assigns new epochs):
                // creating thousands of partitions then writes no epoch
                // checkpoint each. Any other log records it now, as Kafka's
                // makeLeader does: emptied at a later offset, its cache may
                // be empty, and a follower's older epoch needs the new
                // epoch's start to end at (else OFFSET_OUT_OF_RANGE forever).
                if end > 0 {
                    log.maybe_assign_epoch_start_offset(r.leader_epoch, end)?;
                }
                state.leader.leader_epoch_start_offset = end;
                state.leader.pending_isr = None;
                state.leader.followers = r
                    .replicas
                    .iter()
                    .filter(|&&b| b != r.local_broker_id)
                    .map(|&b| (b, FollowerState::for_new_leader(now_ms, r.isr.contains(&b))))
                    .collect();
            } else {
                state.leader.followers.retain(|b, _| r.replicas.contains(b));
                for &b in r.replicas.iter().filter(|&&b| b != r.local_broker_id) {
                    state
                        .leader
                        .followers
                        .entry(b)
                        .or_insert_with(|| FollowerState::for_new_leader(now_ms, false));
                }
            }
            if new_leadership || r.partition_epoch > state.leader.partition_epoch {
                state.leader.isr = r.isr.to_vec();
                state.leader.partition_epoch = r.partition_epoch;
                state.leader.pending_isr = None;
            }
            apply_registration(&mut state, r);
            self.leader_epoch.store(r.leader_epoch, Ordering::Release);
            self.leader.store(true, Ordering::Release);
            (end, new_leadership)
        };
        self.maybe_increment_high_watermark(log_end_offset, now_ms, None);
        self.fetch_state_changed();
        self.replication_changed.notify_waiters();
        if new_leadership {
            // Fetches parked in an older leader epoch are answered.
            self.data_arrived.notify_waiters();
        }
        Ok(())
    }

    /// Applies the image to a partition another broker leads, or that has
    /// no leader (Kafka's `Partition.makeFollower`): this broker stops
    /// taking client writes and reads, and acks=all produces still waiting
    /// here answer NOT_LEADER_OR_FOLLOWER. The log is not truncated here:
    /// the fetcher does it when the leader reports a diverging epoch
    /// (KIP-320).
    pub fn become_follower(&self, r: &Registration<'_>) {
        {
            let _log = lock(&self.log);
            let mut state = self.replication_state();
            self.leader.store(false, Ordering::Release);
            self.leader_epoch.store(r.leader_epoch, Ordering::Release);
            state.leader.isr = r.isr.to_vec();
            state.leader.partition_epoch = r.partition_epoch;
            state.leader.pending_isr = None;
            state.leader.followers.clear();
            apply_registration(&mut state, r);
        }
        self.fetch_state_changed();
        self.replication_changed.notify_waiters();
        self.data_arrived.notify_waiters();
    }

    /// Records a follower's Fetch of this partition (Kafka's
    /// `Partition.updateFollowerFetchState`), then raises the high
    /// watermark if the replicas allow it and returns the ISR expansion to
    /// propose, if the follower may now join the ISR (it is then in flight).
    ///
    /// # Errors
    /// [`FollowerFetchError`] (NOT_LEADER_OR_FOLLOWER): not a replica, or a
    /// stale broker epoch.
    pub fn record_follower_fetch(
        &self,
        fetch: &FollowerFetch,
    ) -> Result<Option<IsrProposal>, FollowerFetchError> {
        let proposal = {
            let mut guard = self.replication_state();
            let ReplicationState { leader, alive, .. } = &mut *guard;
            let alive_fn = |b: i32| alive.get(&b).copied();
            leader.record_follower_fetch(fetch, &alive_fn)?;
            let proposal = leader.isr_to_expand(fetch.replica_id, self.high_watermark(), &alive_fn);
            self.propose(&mut guard, proposal)
        };
        self.maybe_increment_high_watermark(fetch.leader_end_offset, fetch.now_ms, None);
        Ok(proposal)
    }

    /// Attaches a follower session's [`QuietLink`] to the follower's
    /// state ([`LeaderState::link_quiet`]): the session skips the
    /// partition as quiet and each of its Fetches counts as the follower's
    /// Fetch at this leader's log end offset, without a read, until the
    /// partition's next change freezes the link.
    pub(crate) fn link_quiet_follower(&self, link: Arc<QuietLink>) {
        self.replication_state().leader.link_quiet(link);
    }

    /// The ISR shrink to propose for followers not caught up within
    /// `replica.lag.time.max.ms` (Kafka's `Partition.maybeShrinkIsr`, run
    /// every half of it); `None` when this broker does not lead, a change is
    /// in flight, or all are in sync.
    pub fn maybe_shrink_isr(&self, now_ms: i64) -> Option<IsrProposal> {
        if !self.is_leader() {
            return None;
        }
        let leader_end_offset = self.log_end_offset();
        let mut state = self.replication_state();
        let proposal = state
            .leader
            .isr_to_shrink(leader_end_offset, now_ms, state.max_lag_ms);
        if let Some(isr) = &proposal {
            tracing::info!(topic_partition = %self.topic_partition, isr = ?state.leader.isr,
                new_isr = ?isr, "shrinking the ISR: followers out of sync");
        }
        self.propose(&mut state, proposal)
    }

    /// Marks `new_isr` in flight and builds its proposal.
    fn propose(
        &self,
        state: &mut ReplicationState,
        new_isr: Option<Vec<i32>>,
    ) -> Option<IsrProposal> {
        let new_isr = new_isr?;
        state.leader.pending_isr = Some(new_isr.clone());
        let broker_epochs = new_isr
            .iter()
            .map(|b| {
                if *b == state.leader.local_broker_id {
                    state.alive.get(b).copied()
                } else {
                    state.leader.followers.get(b).and_then(|f| f.broker_epoch)
                }
                .unwrap_or(-1)
            })
            .collect();
        Some(IsrProposal {
            topic_partition: self.topic_partition.clone(),
            topic_id: self.topic_id,
            leader_epoch: state.leader.leader_epoch,
            partition_epoch: state.leader.partition_epoch,
            new_isr,
            broker_epochs,
        })
    }

    /// Acts on the controller's answer to `proposal` (Kafka's
    /// `Partition.handleAlterPartitionUpdate` / `handleAlterPartitionError`).
    /// An answer for another leader epoch, or older than the committed
    /// state, changes nothing.
    pub fn on_isr_change(&self, proposal: &IsrProposal, outcome: IsrChangeOutcome, now_ms: i64) {
        {
            let mut state = self.replication_state();
            if !self.is_leader() || state.leader.leader_epoch != proposal.leader_epoch {
                return;
            }
            match outcome {
                IsrChangeOutcome::Committed {
                    isr,
                    leader_epoch,
                    partition_epoch,
                } => {
                    if leader_epoch != state.leader.leader_epoch
                        || partition_epoch < state.leader.partition_epoch
                    {
                        return;
                    }
                    tracing::info!(topic_partition = %self.topic_partition, ?isr, partition_epoch,
                        "ISR updated");
                    if isr.len() > state.leader.isr.len() {
                        metrics::counter!("weir_isr_expands_total").increment(1);
                    } else if isr.len() < state.leader.isr.len() {
                        metrics::counter!("weir_isr_shrinks_total").increment(1);
                    }
                    state.leader.isr = isr;
                    state.leader.partition_epoch = partition_epoch;
                    state.leader.pending_isr = None;
                }
                IsrChangeOutcome::Rejected => {
                    if state.leader.pending_isr.as_ref() == Some(&proposal.new_isr) {
                        state.leader.pending_isr = None;
                    }
                }
                IsrChangeOutcome::Stale => return,
            }
        }
        self.fetch_state_changed();
        self.maybe_increment_high_watermark(self.log_end_offset(), now_ms, None);
        self.replication_changed.notify_waiters();
    }

    /// Raises the high watermark to what the replicas allow (never lowers
    /// it) on the leader, and wakes what waits for it: acks=all produces
    /// and parked fetches. `leader_end_offset` is the log end offset the
    /// caller saw; `alive` overrides the stored liveness (tests). Returns
    /// whether it rose (and so woke them).
    pub(super) fn maybe_increment_high_watermark(
        &self,
        leader_end_offset: i64,
        now_ms: i64,
        alive: Option<AliveBrokerEpoch<'_>>,
    ) -> bool {
        if !self.is_leader() {
            return false;
        }
        let candidate = {
            let state = self.replication_state();
            let stored = state.alive_fn();
            state.leader.high_watermark_candidate(
                leader_end_offset,
                now_ms,
                state.max_lag_ms,
                alive.unwrap_or(&stored),
            )
        };
        let Some(candidate) = candidate else {
            return false;
        };
        let raised = self.high_watermark.fetch_max(candidate, Ordering::AcqRel) < candidate;
        if raised {
            self.high_watermark_changed();
            self.fetch_state_changed();
            self.replication_changed.notify_waiters();
            self.data_arrived.notify_waiters();
        }
        raised
    }

    /// Waits until the high watermark reaches `required_offset` (the end of
    /// an acks=all produce's records) while this broker leads the partition
    /// in `leader_epoch` (Kafka's `DelayedProduce` with
    /// `Partition.checkEnoughReplicasReachOffset`).
    ///
    /// # Errors
    /// [`ReplicationWait`]: leadership lost, the ISR below
    /// `min.insync.replicas` once reached, or `timeout` passed.
    pub async fn wait_replicated(
        &self,
        required_offset: i64,
        leader_epoch: i32,
        timeout: Duration,
    ) -> Result<(), ReplicationWait> {
        let deadline = tokio::time::Instant::now() + timeout;
        let _waiting = PurgatoryGauge::enter("produce");
        loop {
            let changed = self.replication_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if !self.is_leader() || self.leader_epoch() != leader_epoch {
                return Err(ReplicationWait::NotLeader);
            }
            if self.high_watermark() >= required_offset {
                let state = self.replication_state();
                return if state.leader.maximal_isr_len() >= state.leader.effective_min_isr() {
                    Ok(())
                } else {
                    Err(ReplicationWait::NotEnoughReplicasAfterAppend)
                };
            }
            tokio::select! {
                _ = changed => {}
                _ = tokio::time::sleep_until(deadline) => return Err(ReplicationWait::TimedOut),
            }
        }
    }

    /// Appends batches fetched from the leader of `leader_epoch`, unchanged
    /// (Kafka's `Partition.appendRecordsToFollowerOrFutureReplica`).
    /// Returns `None` without appending when this broker is no longer a
    /// follower in that epoch (the image moved on while the fetch was out).
    ///
    /// # Errors
    /// Storage errors (invalid batches, an offset that does not follow the
    /// log end, I/O).
    pub fn append_as_follower(
        &self,
        records: &Bytes,
        leader_epoch: i32,
    ) -> Result<Option<LogAppendInfo>, StorageError> {
        let (info, log_end_offset) = {
            let mut log = lock(&self.log);
            if self.is_leader() || self.leader_epoch() != leader_epoch {
                return Ok(None);
            }
            let info = log.append_as_follower_in_epoch(records, leader_epoch)?;
            (info, log.log_end_offset())
        };
        self.fetch_state_changed();
        self.log_end_offset_gauge.set(log_end_offset as f64);
        Ok(Some(info))
    }

    /// The follower's high watermark after a fetch: the leader's, capped at
    /// the local log end offset (Kafka's `UnifiedLog.updateHighWatermark`;
    /// it may go down after a truncation). Also follows the leader's log
    /// start offset up to it (`maybeIncrementLogStartOffset` with
    /// `LeaderOffsetIncremented`).
    ///
    /// # Errors
    /// I/O errors moving the log start offset.
    pub fn update_follower_offsets(
        &self,
        leader_high_watermark: i64,
        leader_log_start_offset: i64,
    ) -> Result<(), StorageError> {
        let mut log = lock(&self.log);
        if self.is_leader() {
            return Ok(());
        }
        let high_watermark = leader_high_watermark.min(log.log_end_offset());
        let old = self.high_watermark.swap(high_watermark, Ordering::AcqRel);
        let mut changed = old != high_watermark;
        if changed {
            self.high_watermark_changed();
        }
        if leader_log_start_offset > log.log_start_offset() {
            log.maybe_increment_log_start_offset(
                leader_log_start_offset.min(high_watermark),
                high_watermark,
            )?;
            changed = true;
        }
        drop(log);
        if changed {
            self.fetch_state_changed();
        }
        Ok(())
    }

    /// The flush lock, for [`Partition::truncate_locked`]: held, no flush
    /// runs, so none can publish offsets a truncation removed.
    pub async fn lock_flush(&self) -> tokio::sync::OwnedMutexGuard<()> {
        self.flush_lock.clone().lock_owned().await
    }

    /// Truncates the follower's log to `offset` (Kafka's
    /// `Partition.truncateTo`), or empties it to start at `offset` when
    /// `fully` (`truncateFullyAndStartAt`), and lowers the high watermark
    /// and the durable offset to the new end, so that records appended
    /// later at the truncated offsets are never taken as already fsynced.
    /// The caller holds [`Partition::lock_flush`] and has paused the
    /// cleaner (see `ReplicaManager::truncate_follower`). Returns the active
    /// segment's base offset after a truncation (for the cleaner
    /// checkpoint), `None` when nothing was truncated or this broker no
    /// longer follows in `leader_epoch`. Blocking.
    ///
    /// # Errors
    /// Storage errors.
    pub fn truncate_locked(
        &self,
        offset: i64,
        fully: bool,
        leader_epoch: i32,
    ) -> Result<Option<i64>, StorageError> {
        let mut log = lock(&self.log);
        if self.is_leader() || self.leader_epoch() != leader_epoch {
            return Ok(None);
        }
        if fully {
            log.truncate_fully_and_start_at(offset)?;
        } else if !log.truncate_to(offset)? {
            return Ok(None);
        }
        let end = log.log_end_offset();
        if self.high_watermark.fetch_min(end, Ordering::AcqRel) > end {
            self.high_watermark_changed();
        }
        self.forget_high_watermark_metadata();
        self.durable_offset.send_modify(|d| *d = (*d).min(end));
        self.log_end_offset_gauge.set(end as f64);
        self.fetch_state_changed();
        tracing::info!(topic_partition = %self.topic_partition, offset = end, fully,
            "truncated the follower's log");
        Ok(Some(log.active_segment_base_offset()))
    }

    /// Restores the high watermark from `replication-offset-checkpoint`
    /// at startup (Kafka's `Partition.createLogIfNotExists` with the
    /// checkpointed high watermark), within [log start, log end].
    pub fn restore_high_watermark(&self, checkpointed: i64) {
        let log = lock(&self.log);
        let high_watermark = checkpointed
            .min(log.log_end_offset())
            .max(log.log_start_offset());
        self.high_watermark.store(high_watermark, Ordering::Release);
        self.high_watermark_changed();
        self.forget_high_watermark_metadata();
        self.fetch_state_changed();
    }

    /// The offset this broker's leadership of the current leader epoch
    /// began at: its log end offset when it became leader (Kafka's
    /// `Partition.leaderEpochStartOffsetOpt`); 0 for a standalone replica.
    /// A client-facing answer about "latest" waits until the high watermark
    /// reaches it (see `handlers::list_offsets`).
    pub fn leader_epoch_start_offset(&self) -> i64 {
        self.replication_state().leader.leader_epoch_start_offset
    }

    /// The epoch of the log's last batch, for a follower's Fetch
    /// (`LastFetchedEpoch`, KIP-320); `None` for a log without epochs.
    pub fn latest_epoch(&self) -> Option<i32> {
        lock(&self.log).latest_epoch()
    }

    /// Reads whole batches from `fetch_offset` up to the log end offset
    /// (Kafka's `FetchIsolation.LOG_END`): for followers' fetches and the
    /// group coordinator's load.
    ///
    /// # Errors
    /// `OffsetOutOfRange` outside [log start, log end]; I/O errors.
    pub fn read_to_log_end(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<FetchDataInfo, StorageError> {
        #[cfg(test)]
        self.reads.fetch_add(1, Ordering::Relaxed);
        let log = lock(&self.log);
        let end = log.log_end_offset();
        log.read(fetch_offset, max_bytes, end, min_one_batch)
    }

    /// Whether `broker` is in the committed ISR with no ISR change in
    /// flight: a follower fetch session may then skip the partition while
    /// it is quiet (`crate::fetch_session`).
    pub fn is_settled_isr_member(&self, broker: i32) -> bool {
        let state = self.replication_state();
        state.leader.pending_isr.is_none() && state.leader.isr.contains(&broker)
    }

    /// Under-replicated (fewer ISR members than replicas) and under min ISR,
    /// for the leader's metrics.
    pub fn replication_health(&self) -> (bool, bool) {
        let state = self.replication_state();
        (
            state.leader.isr.len() < state.leader.replicas.len(),
            state.leader.is_under_min_isr(),
        )
    }
}

/// Counts a request parked in a purgatory (`weir_purgatory_size{operation}`,
/// Kafka's `PurgatorySize` of `Produce` and `Fetch`) while it lives.
pub struct PurgatoryGauge(&'static str);

impl PurgatoryGauge {
    /// Counts one more parked `operation` ("produce" or "fetch").
    pub fn enter(operation: &'static str) -> Self {
        metrics::gauge!("weir_purgatory_size", "operation" => operation).increment(1.0);
        PurgatoryGauge(operation)
    }
}

impl Drop for PurgatoryGauge {
    fn drop(&mut self) {
        metrics::gauge!("weir_purgatory_size", "operation" => self.0).decrement(1.0);
    }
}

fn apply_registration(state: &mut ReplicationState, r: &Registration<'_>) {
    state.leader.local_broker_id = r.local_broker_id;
    state.leader.replicas = r.replicas.to_vec();
    state.leader.leader_epoch = r.leader_epoch;
    state.leader.min_insync_replicas = r.min_insync_replicas;
    state.alive = r.alive.clone();
    state.max_lag_ms = r.max_lag_ms;
}
