//! [`GroupCoordinator`]: Kafka's classic group coordinator (the JoinGroup /
//! SyncGroup / Heartbeat / LeaveGroup state machine of the Kafka protocol
//! guide and KIP-345/394/429) and the committed offsets of every group,
//! persisted through a [`GroupStore`].
//!
//! The behaviour follows Kafka 4.x's `GroupMetadataManager` (classic groups)
//! and `OffsetMetadataManager`: the same states, error codes, timers and the
//! rule that a write is answered only once the store made it durable.
//!
//! Concurrency: every group lives in one map behind a `std::sync::Mutex`;
//! transitions run under it and never await. Responses that wait for a
//! rebalance are parked as `oneshot` senders in the member. Writes to the
//! store happen outside the lock, serialised per group by an async write
//! lock, and their outcome is applied after re-checking the group (as
//! Kafka's append callbacks do). Timers (join, pending sync, heartbeats) are
//! tokio tasks sleeping until a deadline; a heartbeat only moves a deadline,
//! so an idle group costs no CPU.
//!
//! Ownership (Kafka's `onElection` / `onResignation`): a broker coordinates
//! the groups of the `__consumer_offsets` partitions it leads
//! ([`GroupCoordinator::on_leadership`]). When it becomes a partition's
//! leader it loads that partition's groups from the log, answering
//! COORDINATOR_LOAD_IN_PROGRESS for them meanwhile; when it stops leading
//! one it forgets that partition's groups (parked joins and syncs get
//! NOT_COORDINATOR), and every later request for them gets NOT_COORDINATOR
//! so that clients look the coordinator up again. Before the topic exists
//! it serves every group (nothing to load; the first write creates the
//! topic); [`GroupCoordinator::load`] also serves every group, loaded from
//! the whole store (the unit tests).
//!
//! This module speaks Kafka's error names (`ResponseError`) but no request
//! or response types; the handlers translate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use weir_storage::TopicPartition;

use super::classic_group::{
    ClassicGroup, ClassicGroupMember, ClassicGroupState, JoinGroupResult, SyncGroupResult,
};
use super::store::{
    GroupStore, GroupStoreError, GroupWrite, LoadedGroup, OffsetAndMetadata, OffsetsLeadership,
};
use super::OFFSETS_TOPIC;
use crate::error::{group_metadata_store_error, offset_commit_store_error};
use crate::log_value::bounded;

/// Kafka's `CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS` (KIP-394): how long a
/// member added by JoinGroup may take to complete its first join, ms.
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: u64 = 5 * 60 * 1000;

/// Longest timer the coordinator schedules: 100 years, ms.
const MAX_TIMER_MS: u64 = 100 * 365 * 86_400_000;

/// The coordinator's settings (the broker's `group.*` and `offsets.*` keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupCoordinatorConfig {
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of
    /// an Empty group waits for more members, ms. Default: 3000.
    pub initial_rebalance_delay_ms: u64,
    /// `group.min.session.timeout.ms`, ms. Default: 6000.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`, ms. Default: 1800000.
    pub max_session_timeout_ms: i32,
    /// `group.max.size`: most members of one group. Default: `i32::MAX`.
    pub max_size: usize,
    /// `offset.metadata.max.bytes`: longest commit metadata string, in
    /// characters as Kafka counts them. Default: 4096.
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes` in ms. Default: 10080 minutes (7 days).
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`, ms. Default: 600000.
    pub offsets_retention_check_interval_ms: u64,
}

impl Default for GroupCoordinatorConfig {
    fn default() -> Self {
        GroupCoordinatorConfig {
            initial_rebalance_delay_ms: 3_000,
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            max_size: i32::MAX as usize,
            offset_metadata_max_bytes: 4_096,
            offsets_retention_ms: 10_080 * 60_000,
            offsets_retention_check_interval_ms: 600_000,
        }
    }
}

/// A JoinGroup request in the coordinator's terms.
#[derive(Debug, Clone)]
pub struct JoinGroupParams {
    /// Group id.
    pub group_id: String,
    /// Member id, empty for a first join.
    pub member_id: String,
    /// Static instance id (v5+, KIP-345).
    pub group_instance_id: Option<String>,
    /// Client id from the request header.
    pub client_id: String,
    /// The client's host as Kafka prints it (`/127.0.0.1`).
    pub client_host: String,
    /// Session timeout, ms.
    pub session_timeout_ms: i32,
    /// Rebalance timeout, ms (v0: the session timeout).
    pub rebalance_timeout_ms: i32,
    /// Protocol type (`consumer`, ...).
    pub protocol_type: String,
    /// Protocols in the member's order of preference, with metadata.
    pub protocols: Vec<(String, Bytes)>,
    /// v4+: a first join gets MEMBER_ID_REQUIRED and a member id (KIP-394).
    pub require_known_member_id: bool,
    /// v9+: a rejoining static leader may be told to skip the assignment.
    pub supports_skip_assignment: bool,
}

/// A SyncGroup request in the coordinator's terms.
#[derive(Debug, Clone)]
pub struct SyncGroupParams {
    /// Group id.
    pub group_id: String,
    /// Generation the member joined.
    pub generation_id: i32,
    /// Member id.
    pub member_id: String,
    /// Static instance id.
    pub group_instance_id: Option<String>,
    /// v5+: the protocol type the member expects, checked when given.
    pub protocol_type: Option<String>,
    /// v5+: the protocol name the member expects, checked when given.
    pub protocol_name: Option<String>,
    /// The leader's assignment: member id -> assignment bytes.
    pub assignments: Vec<(String, Bytes)>,
}

/// One partition of an OffsetCommit request.
#[derive(Debug, Clone)]
pub struct OffsetCommitEntry {
    /// The partition.
    pub partition: TopicPartition,
    /// Offset of the next record to consume.
    pub committed_offset: i64,
    /// Leader epoch of the last consumed record, -1 if unknown (v6+).
    pub committed_leader_epoch: i32,
    /// Client metadata (null is stored as empty).
    pub metadata: Option<String>,
}

/// An OffsetCommit request in the coordinator's terms.
#[derive(Debug, Clone)]
pub struct OffsetCommitParams {
    /// Group id.
    pub group_id: String,
    /// Generation, -1 for a simple (non-group-managed) commit.
    pub generation_id: i32,
    /// Member id, empty for a simple commit.
    pub member_id: String,
    /// Static instance id (v7+).
    pub group_instance_id: Option<String>,
    /// v2-4 `retention_time_ms`; -1 for the broker's retention.
    pub retention_time_ms: i64,
    /// The request's API version (GROUP_ID_NOT_FOUND from v9).
    pub api_version: i16,
    /// The partitions to commit (the handler already answered unknown ones).
    pub offsets: Vec<OffsetCommitEntry>,
}

/// A group as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// Group id.
    pub group_id: String,
    /// State name (`Dead` for an unknown group).
    pub state: &'static str,
    /// Protocol type, empty when none.
    pub protocol_type: String,
    /// The selected protocol when Stable, else empty.
    pub protocol_data: String,
    /// The members.
    pub members: Vec<MemberDescription>,
}

/// A member as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// Member id.
    pub member_id: String,
    /// Static instance id.
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host (`/127.0.0.1`).
    pub client_host: String,
    /// Metadata for the selected protocol (Stable only, else empty).
    pub metadata: Bytes,
    /// Assignment (Stable only, else empty).
    pub assignment: Bytes,
}

/// A group as ListGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    /// Group id.
    pub group_id: String,
    /// Protocol type, empty when none.
    pub protocol_type: String,
    /// State name.
    pub state: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum TimerKey {
    Join(String),
    Sync(String),
    Heartbeat(String, String),
}

impl TimerKey {
    fn group_id(&self) -> &str {
        match self {
            TimerKey::Join(g) | TimerKey::Sync(g) | TimerKey::Heartbeat(g, _) => g,
        }
    }
}

/// Which groups the coordinator serves.
#[derive(Debug, Default)]
enum Ownership {
    /// Not known yet: every request gets COORDINATOR_LOAD_IN_PROGRESS.
    #[default]
    Starting,
    /// Every group: `__consumer_offsets` does not exist yet, or
    /// [`GroupCoordinator::load`] loaded the whole store.
    All,
    /// The groups of the `__consumer_offsets` partitions this broker leads.
    Partitions(HashMap<i32, PartitionLoad>),
}

/// One led `__consumer_offsets` partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PartitionLoad {
    /// The leader epoch it is led in.
    leader_epoch: i32,
    /// Whether its groups were loaded (else COORDINATOR_LOAD_IN_PROGRESS).
    loaded: bool,
}

#[derive(Debug, Clone, Copy)]
enum TimerAction {
    CompleteJoin,
    InitialRebalance { delay_ms: u64, remaining_ms: u64 },
    ExpirePendingSync { generation_id: i32 },
    ExpireHeartbeat,
}

struct TimerEntry {
    id: u64,
    deadline: Instant,
    wake: Instant,
    action: TimerAction,
}

#[derive(Default)]
struct State {
    ownership: Ownership,
    groups: HashMap<String, ClassicGroup>,
    timers: HashMap<TimerKey, TimerEntry>,
    next_timer_id: u64,
    /// Per group, the signal that its last planned store write finished
    /// (see [`WriteTurn`]).
    write_tails: HashMap<String, oneshot::Receiver<()>>,
    /// Per group, the partitions with commits planned but not yet stored
    /// (how many each): an expiry pass spares them and DeleteGroups
    /// tombstones them, as Kafka's coordinator sees uncommitted writes.
    pending_commits: HashMap<String, HashMap<TopicPartition, u32>>,
}

impl State {
    fn add_pending_commits<'a>(
        &mut self,
        group_id: &str,
        partitions: impl Iterator<Item = &'a TopicPartition>,
    ) {
        let pending = self
            .pending_commits
            .entry(group_id.to_string())
            .or_default();
        for p in partitions {
            *pending.entry(p.clone()).or_default() += 1;
        }
    }

    fn remove_pending_commits<'a>(
        &mut self,
        group_id: &str,
        partitions: impl Iterator<Item = &'a TopicPartition>,
    ) {
        if let Some(pending) = self.pending_commits.get_mut(group_id) {
            for p in partitions {
                if let Some(n) = pending.get_mut(p) {
                    *n -= 1;
                    if *n == 0 {
                        pending.remove(p);
                    }
                }
            }
            if pending.is_empty() {
                self.pending_commits.remove(group_id);
            }
        }
    }

    fn has_pending_commit(&self, group_id: &str, partition: &TopicPartition) -> bool {
        self.pending_commits
            .get(group_id)
            .is_some_and(|p| p.contains_key(partition))
    }
}

impl State {
    /// The next place in `group_id`'s queue of store writes. Taken under the
    /// state lock when a write is planned, so that writes reach the log, and
    /// then the group in memory, in the order they were planned (for a
    /// connection's pipelined commits: arrival order), whatever order their
    /// tasks happen to run in.
    fn write_turn(&mut self, group_id: &str) -> WriteTurn {
        let (done, tail) = oneshot::channel();
        let previous = self.write_tails.insert(group_id.to_string(), tail);
        WriteTurn {
            previous,
            done: Some(done),
        }
    }
}

/// A store write's place in its group's queue (see [`State::write_turn`]).
struct WriteTurn {
    /// Resolves (or errs) when the previous write of the group finished.
    previous: Option<oneshot::Receiver<()>>,
    /// Dropped when this write finished, which lets the next one start.
    done: Option<oneshot::Sender<()>>,
}

impl State {
    /// Ends a write's turn (`done` from [`WriteTurn::wait`]) and forgets
    /// the group's queue when no write is left in it.
    fn end_turn(&mut self, group_id: &str, done: oneshot::Sender<()>) {
        drop(done);
        if let Some(tail) = self.write_tails.get_mut(group_id) {
            if matches!(tail.try_recv(), Err(oneshot::error::TryRecvError::Closed)) {
                self.write_tails.remove(group_id);
            }
        }
    }
}

impl WriteTurn {
    /// Waits until every earlier write of the group finished. The returned
    /// guard ends this write's turn when dropped.
    async fn wait(mut self) -> oneshot::Sender<()> {
        if let Some(previous) = self.previous.take() {
            let _ = previous.await;
        }
        self.done.take().expect("a turn is waited for once")
    }
}

impl Drop for WriteTurn {
    /// A turn given up before its write ran still passes on in order: the
    /// next write starts only after the earlier ones finished.
    fn drop(&mut self) {
        if let (Some(previous), Some(done)) = (self.previous.take(), self.done.take()) {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = previous.await;
                    drop(done);
                });
            }
        }
    }
}

struct Inner<S> {
    store: Arc<S>,
    config: GroupCoordinatorConfig,
    state: Mutex<State>,
    /// Wall-clock ms at `base_instant`; `now_ms` advances with tokio's clock
    /// so that paused-time tests move both.
    base_wall_ms: i64,
    base_instant: Instant,
}

/// Kafka's classic group coordinator over a [`GroupStore`].
///
/// Cloning is cheap (shared state). Requests for a group whose offsets
/// partition is still loading (or before [`Self::load`] or
/// [`Self::on_leadership`]) get COORDINATOR_LOAD_IN_PROGRESS; requests for
/// a group whose partition another broker leads get NOT_COORDINATOR.
pub struct GroupCoordinator<S: GroupStore> {
    inner: Arc<Inner<S>>,
}

impl<S: GroupStore> Clone for GroupCoordinator<S> {
    fn clone(&self) -> Self {
        GroupCoordinator {
            inner: self.inner.clone(),
        }
    }
}

/// Work collected under the lock and done after releasing it.
struct Effects {
    /// Group metadata writes nobody waits for.
    writes: Vec<(String, GroupWrite)>,
    /// Static members rejoining without a rebalance, answered after the
    /// write.
    static_rejoins: Vec<StaticRejoin>,
}

/// [`Effects`] with each write's [`WriteTurn`].
struct PlannedEffects {
    writes: Vec<(String, GroupWrite, WriteTurn)>,
    static_rejoins: Vec<(StaticRejoin, WriteTurn)>,
}

/// A member's settings before a static rejoin replaced them.
struct MemberSettings {
    protocols: Vec<(String, Bytes)>,
    rebalance_timeout_ms: i32,
    session_timeout_ms: i32,
    client_id: String,
    client_host: String,
}

impl MemberSettings {
    fn of(member: &ClassicGroupMember) -> Self {
        MemberSettings {
            protocols: member.protocols.clone(),
            rebalance_timeout_ms: member.rebalance_timeout_ms,
            session_timeout_ms: member.session_timeout_ms,
            client_id: member.client_id.clone(),
            client_host: member.client_host.clone(),
        }
    }

    fn restore(self, member: &mut ClassicGroupMember) {
        member.protocols = self.protocols;
        member.rebalance_timeout_ms = self.rebalance_timeout_ms;
        member.session_timeout_ms = self.session_timeout_ms;
        member.client_id = self.client_id;
        member.client_host = self.client_host;
    }
}

/// A static member's rejoin without rebalance, waiting for its write.
struct StaticRejoin {
    group_id: String,
    instance: String,
    old_member_id: String,
    new_member_id: String,
    previous: MemberSettings,
    current_leader: String,
    write: GroupWrite,
    result: JoinGroupResult,
    sender: oneshot::Sender<JoinGroupResult>,
}

/// The locked state plus what a transition needs to schedule timers.
struct Ctx<'a, S: GroupStore> {
    inner: &'a Arc<Inner<S>>,
    state: MutexGuard<'a, State>,
    now_ms: i64,
    effects: Effects,
}

impl<S: GroupStore> GroupCoordinator<S> {
    /// A coordinator over `store`; it serves once [`Self::load`] or
    /// [`Self::on_leadership`] said which groups are its own.
    pub fn new(store: Arc<S>, config: GroupCoordinatorConfig) -> Self {
        GroupCoordinator {
            inner: Arc::new(Inner {
                store,
                config,
                state: Mutex::new(State::default()),
                base_wall_ms: crate::handlers::now_ms(),
                base_instant: Instant::now(),
            }),
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<S> {
        &self.inner.store
    }

    /// The configuration.
    pub fn config(&self) -> &GroupCoordinatorConfig {
        &self.inner.config
    }

    /// Expires offsets every `offsets.retention.check.interval.ms` until
    /// `shutdown`, then stops the timers ([`Self::shutdown`]). Which groups
    /// are served (and loaded) follows [`Self::on_leadership`].
    pub async fn run(self, shutdown: CancellationToken) {
        let period = Duration::from_millis(
            self.inner
                .config
                .offsets_retention_check_interval_ms
                .clamp(1, MAX_TIMER_MS),
        );
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval.tick().await;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = interval.tick() => self.expire_offsets().await,
            }
        }
        self.shutdown();
    }

    /// Stops the timers and answers every parked JoinGroup and SyncGroup
    /// with NOT_COORDINATOR (what Kafka answers when a coordinator
    /// unloads), so that connections can close.
    pub fn shutdown(&self) {
        let mut state = self.inner.lock();
        state.timers.clear();
        for group in state.groups.values_mut() {
            answer_parked_with_not_coordinator(group);
        }
    }

    /// Forgets every group, as Kafka's coordinator unloads the groups of
    /// an offsets partition that is gone (`onResignation`): called once
    /// `__consumer_offsets` was deleted, which deleted every group's
    /// records. Parked JoinGroup and SyncGroup requests get NOT_COORDINATOR
    /// and the groups' timers stop; afterwards the coordinator answers as
    /// after a restart (no groups, no offsets) and the next write creates
    /// the topic again. Writes already under way still finish.
    fn unload_all_groups(&self) {
        let mut state = self.inner.lock();
        state.timers.clear();
        let mut groups = std::mem::take(&mut state.groups);
        drop(state);
        for group in groups.values_mut() {
            answer_parked_with_not_coordinator(group);
        }
        warn!(
            groups = groups.len(),
            "{OFFSETS_TOPIC} was deleted; its groups and committed offsets are forgotten"
        );
    }

    /// Loads the whole store and serves every group from now on, whatever
    /// partition holds it (the unit tests; the broker follows partition
    /// leadership with [`Self::on_leadership`] instead).
    ///
    /// # Errors
    /// The store's load error.
    pub async fn load(&self) -> Result<(), GroupStoreError> {
        let groups = self.inner.store.load().await?;
        let mut ctx = self.inner.ctx();
        ctx.install(groups);
        ctx.state.ownership = Ownership::All;
        let effects = ctx.finish();
        self.inner.spawn_writes(effects);
        Ok(())
    }

    /// Follows which `__consumer_offsets` partitions this broker leads
    /// (Kafka's `onElection` / `onResignation`, driven by metadata images):
    ///
    /// - a partition newly led (or led in a new leader epoch) is loaded
    ///   from the store in the background; its groups get
    ///   COORDINATOR_LOAD_IN_PROGRESS until then (a failed load is logged
    ///   and retried every second while the partition stays led here);
    /// - the groups of a partition no longer led here are forgotten: their
    ///   parked JoinGroup and SyncGroup requests get NOT_COORDINATOR, their
    ///   timers stop, and later requests get NOT_COORDINATOR;
    /// - [`OffsetsLeadership::NoTopic`] serves every group. When the topic
    ///   then appears, the partitions led here start loaded (a new topic's
    ///   logs hold only what this coordinator wrote) and the groups of the
    ///   others are forgotten.
    pub fn on_leadership(&self, leadership: OffsetsLeadership) {
        let mut loads = Vec::new();
        {
            let mut ctx = self.inner.ctx();
            let previous = std::mem::take(&mut ctx.state.ownership);
            let next = match leadership {
                OffsetsLeadership::NoTopic => {
                    if matches!(previous, Ownership::Partitions(_)) {
                        let all: Vec<String> = ctx.state.groups.keys().cloned().collect();
                        ctx.unload_groups(&all);
                    }
                    Ownership::All
                }
                OffsetsLeadership::Leads(led) => {
                    let (old, created) = match previous {
                        Ownership::Starting => (HashMap::new(), false),
                        Ownership::All => (HashMap::new(), true),
                        Ownership::Partitions(old) => (old, false),
                    };
                    let mut next = HashMap::new();
                    for (partition, leader_epoch) in led {
                        match old.get(&partition) {
                            Some(load) if load.leader_epoch == leader_epoch => {
                                next.insert(partition, *load);
                            }
                            // Still led here under a new leader epoch (an
                            // election that picked this broker again): its
                            // log is the one already loaded, so the groups
                            // stay, as Kafka keeps an active coordinator on
                            // an epoch bump. Unloading and reloading raced
                            // with commits whose appends were in flight.
                            Some(load) if load.loaded => {
                                next.insert(
                                    partition,
                                    PartitionLoad {
                                        leader_epoch,
                                        loaded: true,
                                    },
                                );
                            }
                            _ => {
                                next.insert(
                                    partition,
                                    PartitionLoad {
                                        leader_epoch,
                                        loaded: created,
                                    },
                                );
                                if !created {
                                    loads.push((partition, leader_epoch));
                                }
                            }
                        }
                    }
                    let store = &self.inner.store;
                    let doomed: Vec<String> = ctx
                        .state
                        .groups
                        .keys()
                        .filter(|g| {
                            next.get(&store.partition_for(g))
                                .is_none_or(|load| !load.loaded)
                        })
                        .cloned()
                        .collect();
                    for (partition, load) in &old {
                        if next.get(partition).is_none_or(|n| !n.loaded && load.loaded) {
                            info!(
                                partition,
                                leader_epoch = load.leader_epoch,
                                "resigned as coordinator of {OFFSETS_TOPIC} partition {partition}"
                            );
                        }
                    }
                    ctx.unload_groups(&doomed);
                    Ownership::Partitions(next)
                }
            };
            ctx.state.ownership = next;
            let effects = ctx.finish();
            self.inner.spawn_writes(effects);
        }
        for (partition, leader_epoch) in loads {
            info!(
                partition,
                leader_epoch, "loading the groups of {OFFSETS_TOPIC} partition {partition}"
            );
            tokio::spawn(
                self.inner
                    .clone()
                    .load_partition_task(partition, leader_epoch),
            );
        }
    }
}

impl<S: GroupStore> Ctx<'_, S> {
    /// Whether `partition` is led here in `leader_epoch` and not loaded yet.
    fn loading(&self, partition: i32, leader_epoch: i32) -> bool {
        matches!(&self.state.ownership, Ownership::Partitions(led)
            if led.get(&partition) == Some(&PartitionLoad { leader_epoch, loaded: false }))
    }

    /// Forgets `group_ids` (Kafka's `onResignation`): parked joins and
    /// syncs get NOT_COORDINATOR and their timers stop.
    fn unload_groups(&mut self, group_ids: &[String]) {
        if group_ids.is_empty() {
            return;
        }
        let doomed: std::collections::HashSet<&str> =
            group_ids.iter().map(String::as_str).collect();
        self.state
            .timers
            .retain(|key, _| !doomed.contains(key.group_id()));
        for group_id in group_ids {
            if let Some(mut group) = self.state.groups.remove(group_id) {
                answer_parked_with_not_coordinator(&mut group);
            }
        }
        info!(groups = group_ids.len(), "unloaded consumer groups");
    }

    /// Installs loaded groups; groups already in memory are kept (they are
    /// at least as new as the log).
    fn install(&mut self, groups: Vec<LoadedGroup>) {
        let ctx = self;
        for loaded in groups {
            if ctx.state.groups.contains_key(&loaded.group_id) {
                continue;
            }
            let mut group = ClassicGroup::new(&loaded.group_id, ctx.now_ms);
            group.offsets = loaded.offsets;
            let mut rebalance = false;
            if let Some(metadata) = loaded.metadata {
                group.generation_id = metadata.generation;
                group.protocol_type =
                    Some(metadata.protocol_type.clone()).filter(|t| !t.is_empty());
                group.protocol_name = metadata.protocol.clone();
                group.current_state_timestamp_ms = metadata.current_state_timestamp_ms;
                for m in &metadata.members {
                    let protocol = metadata.protocol.clone().unwrap_or_default();
                    group.add(ClassicGroupMember {
                        member_id: m.member_id.clone(),
                        group_instance_id: m.group_instance_id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        rebalance_timeout_ms: m.rebalance_timeout_ms,
                        session_timeout_ms: m.session_timeout_ms,
                        protocol_type: metadata.protocol_type.clone(),
                        protocols: vec![(protocol, m.subscription.clone())],
                        assignment: m.assignment.clone(),
                        awaiting_join: None,
                        awaiting_sync: None,
                        is_new: false,
                    });
                }
                group.leader_id = metadata
                    .leader
                    .clone()
                    .filter(|l| group.members.contains_key(l))
                    .or_else(|| group.member_order.first().cloned());
                if !group.members.is_empty() {
                    group.state = ClassicGroupState::Stable;
                }
                // As Kafka's onLoaded: only a group over `group.max.size`
                // (lowered since it was stored) rebalances.
                rebalance = group.members.len() > ctx.inner.config.max_size;
            }
            let group_id = loaded.group_id.clone();
            let members: Vec<(String, i32)> = group
                .members
                .values()
                .map(|m| (m.member_id.clone(), m.session_timeout_ms))
                .collect();
            ctx.state.groups.insert(group_id.clone(), group);
            // Loaded members keep their generation and assignment and
            // expire unless they heartbeat within their session timeout.
            for (member_id, session) in members {
                ctx.schedule_heartbeat(&group_id, &member_id, session.max(0) as u64);
            }
            if rebalance {
                ctx.prepare_rebalance(&group_id);
            }
        }
    }
}

impl<S: GroupStore> GroupCoordinator<S> {
    /// JoinGroup (Kafka's `classicGroupJoin`). Resolves when the member's
    /// join completes: at once for errors and MEMBER_ID_REQUIRED, else when
    /// the rebalance's join phase ends.
    pub async fn join_group(&self, params: JoinGroupParams) -> JoinGroupResult {
        let receiver = {
            let mut ctx = self.inner.ctx();
            if let Err(e) = ctx.check_loaded(&params.group_id) {
                return JoinGroupResult::error(e, params.member_id);
            }
            let config = &self.inner.config;
            if params.session_timeout_ms < config.min_session_timeout_ms
                || params.session_timeout_ms > config.max_session_timeout_ms
            {
                return JoinGroupResult::error(
                    ResponseError::InvalidSessionTimeout,
                    params.member_id,
                );
            }
            let (sender, receiver) = oneshot::channel();
            ctx.join(params, sender);
            let effects = ctx.finish();
            self.inner.spawn_writes(effects);
            receiver
        };
        receiver
            .await
            .unwrap_or_else(|_| JoinGroupResult::error(ResponseError::RebalanceInProgress, ""))
    }

    /// SyncGroup (Kafka's `classicGroupSync`). The leader's assignment is
    /// stored with the group's metadata before any member receives it.
    pub async fn sync_group(&self, params: SyncGroupParams) -> SyncGroupResult {
        let (receiver, store_write) = {
            let mut ctx = self.inner.ctx();
            if let Err(e) = ctx.check_loaded(&params.group_id) {
                return SyncGroupResult::error(e);
            }
            let (sender, receiver) = oneshot::channel();
            let write = ctx.sync(&params, sender).map(|(assignment, write)| {
                (assignment, write, ctx.state.write_turn(&params.group_id))
            });
            let effects = ctx.finish();
            self.inner.spawn_writes(effects);
            (receiver, write)
        };
        if let Some((assignment, write, turn)) = store_write {
            let inner = self.inner.clone();
            let group_id = params.group_id.clone();
            let generation_id = params.generation_id;
            // Spawned so that a dropped connection cannot stop the outcome
            // of a durable write from being applied.
            tokio::spawn(async move {
                let done = turn.wait().await;
                let result = inner.store.append(&group_id, write).await;
                let mut ctx = inner.ctx();
                ctx.state.end_turn(&group_id, done);
                ctx.on_assignment_stored(&group_id, generation_id, assignment, result);
                let effects = ctx.finish();
                inner.spawn_writes(effects);
            });
        }
        receiver
            .await
            .unwrap_or_else(|_| SyncGroupResult::error(ResponseError::RebalanceInProgress))
    }

    /// Heartbeat (Kafka's `classicGroupHeartbeat`); `None` is success, and
    /// the answer while the store is still loading.
    pub fn heartbeat(
        &self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Option<ResponseError> {
        let mut ctx = self.inner.ctx();
        match ctx.check_loaded(group_id) {
            // Kafka answers heartbeats blindly while the groups load, so
            // that sessions survive a coordinator move.
            Err(ResponseError::CoordinatorLoadInProgress) => return None,
            Err(e) => return Some(e),
            Ok(()) => {}
        }
        let Some(group) = ctx.state.groups.get(group_id) else {
            return Some(ResponseError::UnknownMemberId);
        };
        if group.state == ClassicGroupState::Dead {
            return Some(ResponseError::CoordinatorNotAvailable);
        }
        if let Err(e) = group.validate_member(member_id, group_instance_id) {
            return Some(e);
        }
        if generation_id != group.generation_id {
            return Some(ResponseError::IllegalGeneration);
        }
        let state = group.state;
        let session = group.members[member_id].session_timeout_ms.max(0) as u64;
        match state {
            ClassicGroupState::Empty => Some(ResponseError::UnknownMemberId),
            ClassicGroupState::PreparingRebalance => {
                ctx.schedule_heartbeat(group_id, member_id, session);
                Some(ResponseError::RebalanceInProgress)
            }
            _ => {
                ctx.schedule_heartbeat(group_id, member_id, session);
                None
            }
        }
    }

    /// LeaveGroup (Kafka's `classicGroupLeave`): per-member outcomes in
    /// request order as `(member_id, group_instance_id, error)`.
    ///
    /// # Errors
    /// A group-level error: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    /// INVALID_GROUP_ID,
    /// UNKNOWN_MEMBER_ID for an unknown group, COORDINATOR_NOT_AVAILABLE.
    #[allow(clippy::type_complexity)]
    pub fn leave_group(
        &self,
        group_id: &str,
        members: Vec<(String, Option<String>)>,
    ) -> Result<Vec<(String, Option<String>, Option<ResponseError>)>, ResponseError> {
        let mut ctx = self.inner.ctx();
        ctx.check_loaded(group_id)?;
        let outcome = ctx.leave(group_id, members);
        let effects = ctx.finish();
        self.inner.spawn_writes(effects);
        outcome
    }

    /// OffsetCommit (Kafka's `commitOffset`): validates the member, stores
    /// the offsets and answers once the store resolved. Per-partition
    /// outcomes in request order. The empty group id is accepted, as Kafka's
    /// `GroupCoordinatorService.commitOffsets` accepts it for backwards
    /// compatibility (a generation -1 commit founds a simple group "").
    ///
    /// # Errors
    /// A request-level error applied to every partition by the handler.
    pub async fn commit_offsets(
        &self,
        params: OffsetCommitParams,
    ) -> Result<Vec<(TopicPartition, Option<ResponseError>)>, ResponseError> {
        let (results, write, turn) = {
            let mut ctx = self.inner.ctx();
            ctx.check_loaded_any(&params.group_id)?;
            ctx.validate_commit(&params)?;
            let now_ms = ctx.now_ms;
            let max = self.inner.config.offset_metadata_max_bytes;
            let expire = (params.retention_time_ms != -1)
                .then(|| now_ms.saturating_add(params.retention_time_ms));
            let mut results = Vec::new();
            let mut write = GroupWrite::default();
            for entry in &params.offsets {
                let metadata = entry.metadata.clone().unwrap_or_default();
                if metadata.encode_utf16().count() > max {
                    results.push((
                        entry.partition.clone(),
                        Some(ResponseError::OffsetMetadataTooLarge),
                    ));
                    continue;
                }
                results.push((entry.partition.clone(), None));
                write.offsets.push((
                    entry.partition.clone(),
                    Some(OffsetAndMetadata {
                        committed_offset: entry.committed_offset,
                        committed_leader_epoch: entry.committed_leader_epoch,
                        metadata,
                        commit_timestamp_ms: now_ms,
                        expire_timestamp_ms: expire,
                    }),
                ));
            }
            if write.offsets.is_empty() {
                return Ok(results);
            }
            ctx.state
                .add_pending_commits(&params.group_id, write.offsets.iter().map(|(p, _)| p));
            let turn = ctx.state.write_turn(&params.group_id);
            (results, write, turn)
        };
        let inner = self.inner.clone();
        let group_id = params.group_id.clone();
        let task = tokio::spawn(async move {
            let done = turn.wait().await;
            let offsets = write.offsets.clone();
            let result = inner.store.append(&group_id, write).await;
            let mut ctx = inner.ctx();
            ctx.state.end_turn(&group_id, done);
            ctx.state
                .remove_pending_commits(&group_id, offsets.iter().map(|(p, _)| p));
            result?;
            if !ctx.owns(&group_id) {
                // The partition moved away meanwhile: the commit is in this
                // broker's log, which the new coordinator does not read
                // (partition data is not replicated yet). NOT_COORDINATOR
                // sends the client to commit there again, as Kafka.
                return Ok(false);
            }
            let now_ms = ctx.now_ms;
            let group = ctx
                .state
                .groups
                .entry(group_id.clone())
                .or_insert_with(|| ClassicGroup::new(&group_id, now_ms));
            for (partition, offset) in offsets {
                if let Some(offset) = offset {
                    group.offsets.insert(partition, offset);
                }
            }
            Ok::<bool, GroupStoreError>(true)
        });
        match task.await {
            Ok(Ok(true)) => Ok(results),
            Ok(Ok(false)) => Err(ResponseError::NotCoordinator),
            Ok(Err(e)) => {
                warn!(
                    group = %bounded(&params.group_id),
                    error = %e,
                    "storing committed offsets failed"
                );
                Err(offset_commit_store_error(&e))
            }
            Err(_) => Err(ResponseError::UnknownServerError),
        }
    }

    /// OffsetFetch for one group: each requested partition with its
    /// committed offset (`None`: no commit), or with `partitions == None`
    /// every committed partition (Kafka's `fetchOffsets` /
    /// `fetchAllOffsets`). An unknown group has no commits.
    ///
    /// # Errors
    /// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID.
    #[allow(clippy::type_complexity)]
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Result<Vec<(TopicPartition, Option<OffsetAndMetadata>)>, ResponseError> {
        let ctx = self.inner.ctx();
        ctx.check_loaded_any(group_id)?;
        let group = ctx
            .state
            .groups
            .get(group_id)
            .filter(|g| g.state != ClassicGroupState::Dead);
        Ok(match partitions {
            Some(partitions) => partitions
                .into_iter()
                .map(|p| {
                    let offset = group.and_then(|g| g.offsets.get(&p).cloned());
                    (p, offset)
                })
                .collect(),
            None => group
                .map(|g| {
                    g.offsets
                        .iter()
                        .map(|(p, o)| (p.clone(), Some(o.clone())))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// OffsetDelete (Kafka's `deleteOffsets`): tombstones the partitions of
    /// topics no consumer-protocol member subscribes to; subscribed topics
    /// get GROUP_SUBSCRIBED_TO_TOPIC.
    ///
    /// # Errors
    /// GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (a non-consumer group with
    /// members), store failures, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    /// INVALID_GROUP_ID.
    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: Vec<TopicPartition>,
    ) -> Result<Vec<(TopicPartition, Option<ResponseError>)>, ResponseError> {
        let (results, write, turn) = {
            let mut ctx = self.inner.ctx();
            ctx.check_loaded(group_id)?;
            let group = ctx
                .state
                .groups
                .get(group_id)
                .ok_or(ResponseError::GroupIdNotFound)?;
            match group.state {
                ClassicGroupState::Dead => return Err(ResponseError::GroupIdNotFound),
                ClassicGroupState::Empty => {}
                _ if group.protocol_type.as_deref()
                    != Some(super::classic_group::CONSUMER_PROTOCOL_TYPE) =>
                {
                    return Err(ResponseError::NonEmptyGroup)
                }
                _ => {}
            }
            let mut results = Vec::new();
            let mut write = GroupWrite::default();
            let mut subscribed: HashMap<String, bool> = HashMap::new();
            for p in partitions {
                let is_subscribed = *subscribed
                    .entry(p.topic.clone())
                    .or_insert_with(|| group.is_subscribed_to_topic(&p.topic));
                if is_subscribed {
                    results.push((p, Some(ResponseError::GroupSubscribedToTopic)));
                } else {
                    if group.offsets.contains_key(&p) {
                        write.offsets.push((p.clone(), None));
                    }
                    results.push((p, None));
                }
            }
            let turn = (!write.offsets.is_empty()).then(|| ctx.state.write_turn(group_id));
            (results, write, turn)
        };
        if let Some(turn) = turn {
            let deleted: Vec<TopicPartition> =
                write.offsets.iter().map(|(p, _)| p.clone()).collect();
            self.apply_write(group_id, write, turn, move |group| {
                for p in &deleted {
                    group.offsets.remove(p);
                }
            })
            .await
            .map_err(|e| offset_commit_store_error(&e))?;
        }
        Ok(results)
    }

    /// DeleteGroups (Kafka's `deleteGroups`): writes tombstones for the
    /// group's metadata and offsets, then forgets it.
    pub async fn delete_groups(
        &self,
        group_ids: Vec<String>,
    ) -> Vec<(String, Option<ResponseError>)> {
        let mut results = Vec::new();
        for group_id in group_ids {
            let outcome = self.delete_group(&group_id).await;
            results.push((group_id, outcome.err()));
        }
        results
    }

    async fn delete_group(&self, group_id: &str) -> Result<(), ResponseError> {
        let write = {
            let mut ctx = self.inner.ctx();
            ctx.check_loaded_any(group_id)?;
            let now_ms = ctx.now_ms;
            let group = ctx
                .state
                .groups
                .get_mut(group_id)
                .ok_or(ResponseError::GroupIdNotFound)?;
            match group.state {
                ClassicGroupState::Dead => return Err(ResponseError::GroupIdNotFound),
                ClassicGroupState::Empty => {}
                _ => return Err(ResponseError::NonEmptyGroup),
            }
            // Dead while the tombstones are written: joins and commits are
            // refused meanwhile; a failed write makes it Empty again.
            group.transition_to(ClassicGroupState::Dead, now_ms);
            let mut doomed: std::collections::BTreeSet<TopicPartition> =
                group.offsets.keys().cloned().collect();
            // Commits still being written land before these tombstones.
            if let Some(pending) = ctx.state.pending_commits.get(group_id) {
                doomed.extend(pending.keys().cloned());
            }
            let write = GroupWrite {
                metadata: Some(None),
                offsets: doomed.into_iter().map(|p| (p, None)).collect(),
            };
            (write, ctx.state.write_turn(group_id))
        };
        let (write, turn) = write;
        let inner = self.inner.clone();
        let group_id = group_id.to_string();
        // Spawned so that a dropped connection cannot leave the group Dead.
        let task = tokio::spawn(async move {
            let done = turn.wait().await;
            let result = inner.store.append(&group_id, write).await;
            let mut ctx = inner.ctx();
            let now_ms = ctx.now_ms;
            ctx.state.end_turn(&group_id, done);
            match result {
                Ok(()) => {
                    ctx.state.groups.remove(&group_id);
                    Ok(())
                }
                Err(e) => {
                    warn!(
                        group = %bounded(&group_id),
                        error = %e,
                        "writing group tombstones failed"
                    );
                    if let Some(group) = ctx.state.groups.get_mut(&group_id) {
                        group.transition_to(ClassicGroupState::Empty, now_ms);
                    }
                    Err(group_metadata_store_error(&e))
                }
            }
        });
        task.await.unwrap_or(Err(ResponseError::UnknownServerError))
    }

    /// DescribeGroups for one group (unknown groups are reported Dead).
    ///
    /// # Errors
    /// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID.
    pub fn describe_group(&self, group_id: &str) -> Result<GroupDescription, ResponseError> {
        let ctx = self.inner.ctx();
        ctx.check_loaded_any(group_id)?;
        let Some(group) = ctx.state.groups.get(group_id) else {
            return Ok(GroupDescription {
                group_id: group_id.to_string(),
                state: ClassicGroupState::Dead.as_str(),
                protocol_type: String::new(),
                protocol_data: String::new(),
                members: Vec::new(),
            });
        };
        let stable = group.state == ClassicGroupState::Stable;
        let protocol = group.protocol_name.clone().unwrap_or_default();
        Ok(GroupDescription {
            group_id: group_id.to_string(),
            state: group.state.as_str(),
            protocol_type: group.protocol_type.clone().unwrap_or_default(),
            protocol_data: if stable {
                protocol.clone()
            } else {
                String::new()
            },
            members: group
                .ordered_members()
                .map(|m| MemberDescription {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(&protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
        })
    }

    /// ListGroups: every group this broker coordinates, sorted by id.
    ///
    /// # Errors
    /// COORDINATOR_LOAD_IN_PROGRESS while any of its offsets partitions is
    /// loading.
    pub fn list_groups(&self) -> Result<Vec<GroupListing>, ResponseError> {
        let state = self.inner.lock();
        let loading = match &state.ownership {
            Ownership::Starting => true,
            Ownership::All => false,
            Ownership::Partitions(led) => led.values().any(|load| !load.loaded),
        };
        if loading {
            return Err(ResponseError::CoordinatorLoadInProgress);
        }
        let mut groups: Vec<GroupListing> = state
            .groups
            .values()
            .filter(|g| g.state != ClassicGroupState::Dead)
            .map(|g| GroupListing {
                group_id: g.group_id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state.as_str(),
            })
            .collect();
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(groups)
    }

    /// Expires committed offsets as KIP-211 describes (Kafka's
    /// `cleanupExpiredOffsets`): offsets of Empty groups once the retention
    /// passed since the group became Empty (or since the commit, for groups
    /// without a protocol type, and always for an explicit v1 expiry); a
    /// group left with no offsets and no members is deleted with its
    /// metadata tombstone.
    pub async fn expire_offsets(&self) {
        let plans: Vec<(String, GroupWrite, WriteTurn)> = {
            let mut ctx = self.inner.ctx();
            if matches!(ctx.state.ownership, Ownership::Starting) {
                return;
            }
            let now_ms = ctx.now_ms;
            let retention = self.inner.config.offsets_retention_ms;
            let mut plans = Vec::new();
            for group in ctx.state.groups.values() {
                // What retention counts from: the commit (simple groups),
                // or the moment the group became Empty (KIP-211).
                let since_empty = match (&group.protocol_type, group.state) {
                    (None, _) => None,
                    (Some(_), ClassicGroupState::Empty) => Some(group.current_state_timestamp_ms),
                    _ => continue,
                };
                let mut write = GroupWrite::default();
                let mut all_expired = !ctx.state.pending_commits.contains_key(&group.group_id);
                for (p, o) in &group.offsets {
                    if ctx.state.has_pending_commit(&group.group_id, p) {
                        // A newer commit is being written: it decides.
                        all_expired = false;
                        continue;
                    }
                    let expired = match o.expire_timestamp_ms {
                        Some(at) => now_ms >= at,
                        None => {
                            let base = since_empty.unwrap_or(o.commit_timestamp_ms);
                            now_ms.saturating_sub(base) >= retention
                        }
                    };
                    if expired {
                        write.offsets.push((p.clone(), None));
                    } else {
                        all_expired = false;
                    }
                }
                if all_expired && group.state == ClassicGroupState::Empty {
                    write.metadata = Some(None);
                }
                if !write.offsets.is_empty() || write.metadata.is_some() {
                    plans.push((group.group_id.clone(), write));
                }
            }
            plans
                .into_iter()
                .map(|(group_id, write)| {
                    let turn = ctx.state.write_turn(&group_id);
                    (group_id, write, turn)
                })
                .collect()
        };
        for (group_id, write, turn) in plans {
            let expired: Vec<TopicPartition> =
                write.offsets.iter().map(|(p, _)| p.clone()).collect();
            let delete_group = write.metadata.is_some();
            let count = expired.len();
            let outcome = self
                .apply_write(&group_id, write, turn, move |group| {
                    for p in &expired {
                        group.offsets.remove(p);
                    }
                })
                .await;
            match outcome {
                Ok(()) => {
                    info!(
                        group = %bounded(&group_id),
                        partitions = count,
                        "expired committed offsets"
                    );
                    if delete_group {
                        let mut state = self.inner.lock();
                        let remove = state.groups.get(&group_id).is_some_and(|g| {
                            g.state == ClassicGroupState::Empty && g.offsets.is_empty()
                        });
                        if remove {
                            state.groups.remove(&group_id);
                        }
                    }
                }
                Err(e) => warn!(group = %bounded(&group_id), error = %e, "expiring offsets failed"),
            }
        }
    }

    /// Deletes the committed offsets of deleted topics, writing their
    /// tombstones (Kafka's `onPartitionsDeleted`), so that a topic created
    /// again under the same name starts without stale offsets. Failures are
    /// logged; the offsets then stay until their retention passes.
    ///
    /// When `topics` holds `__consumer_offsets` itself, every group's
    /// records are gone with it and the coordinator forgets every group
    /// instead (see [`Self::unload_all_groups`]).
    pub async fn on_topics_deleted(&self, topics: &[String]) {
        if topics.iter().any(|t| t == OFFSETS_TOPIC) {
            self.unload_all_groups();
            return;
        }
        let plans: Vec<(String, Vec<TopicPartition>, WriteTurn)> = {
            let mut state = self.inner.lock();
            let plans: Vec<(String, Vec<TopicPartition>)> = state
                .groups
                .values()
                .filter_map(|g| {
                    let doomed: Vec<TopicPartition> = g
                        .offsets
                        .keys()
                        .filter(|p| topics.contains(&p.topic))
                        .cloned()
                        .collect();
                    (!doomed.is_empty()).then(|| (g.group_id.clone(), doomed))
                })
                .collect();
            plans
                .into_iter()
                .map(|(group_id, doomed)| {
                    let turn = state.write_turn(&group_id);
                    (group_id, doomed, turn)
                })
                .collect()
        };
        for (group_id, doomed, turn) in plans {
            let write = GroupWrite {
                metadata: None,
                offsets: doomed.iter().map(|p| (p.clone(), None)).collect(),
            };
            let outcome = self
                .apply_write(&group_id, write, turn, move |group| {
                    for p in &doomed {
                        group.offsets.remove(p);
                    }
                })
                .await;
            if let Err(e) = outcome {
                warn!(
                    group = %bounded(&group_id),
                    error = %e,
                    "deleting offsets of deleted topics failed"
                );
            }
        }
    }

    /// Appends `write` in its `turn` and applies `apply` to the group once
    /// it is durable.
    async fn apply_write(
        &self,
        group_id: &str,
        write: GroupWrite,
        turn: WriteTurn,
        apply: impl FnOnce(&mut ClassicGroup) + Send + 'static,
    ) -> Result<(), GroupStoreError> {
        let inner = self.inner.clone();
        let group_id = group_id.to_string();
        let task = tokio::spawn(async move {
            let done = turn.wait().await;
            let result = inner.store.append(&group_id, write).await;
            let mut state = inner.lock();
            state.end_turn(&group_id, done);
            result?;
            if let Some(group) = state.groups.get_mut(&group_id) {
                apply(group);
            }
            Ok(())
        });
        task.await
            .unwrap_or_else(|e| Err(GroupStoreError::Storage(e.to_string())))
    }
}

impl<S: GroupStore> Inner<S> {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic under the lock is a bug; the state is still consistent
        // enough to serve, so a poisoned lock is taken over.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ms(&self) -> i64 {
        self.base_wall_ms + self.base_instant.elapsed().as_millis() as i64
    }

    fn ctx(self: &Arc<Self>) -> Ctx<'_, S> {
        Ctx {
            inner: self,
            now_ms: self.now_ms(),
            state: self.lock(),
            effects: Effects {
                writes: Vec::new(),
                static_rejoins: Vec::new(),
            },
        }
    }

    /// Writes group metadata that no request waits for (a group that
    /// became Empty; failures are logged as Kafka does), and the writes of
    /// static rejoins, whose answers wait for them.
    fn spawn_writes(self: &Arc<Self>, effects: PlannedEffects) {
        for (mut rejoin, turn) in effects.static_rejoins {
            let inner = self.clone();
            tokio::spawn(async move {
                let done = turn.wait().await;
                let write = std::mem::take(&mut rejoin.write);
                let result = inner.store.append(&rejoin.group_id, write).await;
                let mut ctx = inner.ctx();
                ctx.state.end_turn(&rejoin.group_id, done);
                ctx.on_static_rejoin_stored(rejoin, result);
                let effects = ctx.finish();
                inner.spawn_writes(effects);
            });
        }
        for (group_id, write, turn) in effects.writes {
            let inner = self.clone();
            tokio::spawn(async move {
                let done = turn.wait().await;
                let result = inner.store.append(&group_id, write).await;
                inner.lock().end_turn(&group_id, done);
                if let Err(e) = result {
                    warn!(group = %bounded(&group_id), error = %e, "storing group metadata failed");
                }
            });
        }
    }

    /// Loads `partition`'s groups while it stays led here in
    /// `leader_epoch` and not loaded (see [`GroupCoordinator::on_leadership`]).
    async fn load_partition_task(self: Arc<Self>, partition: i32, leader_epoch: i32) {
        loop {
            if !self.ctx().loading(partition, leader_epoch) {
                return;
            }
            match self.store.load_partition(partition).await {
                Ok(groups) => {
                    let mut ctx = self.ctx();
                    if !ctx.loading(partition, leader_epoch) {
                        return;
                    }
                    let groups: Vec<LoadedGroup> = groups
                        .into_iter()
                        .filter(|g| self.store.partition_for(&g.group_id) == partition)
                        .collect();
                    let count = groups.len();
                    ctx.install(groups);
                    if let Ownership::Partitions(led) = &mut ctx.state.ownership {
                        if let Some(load) = led.get_mut(&partition) {
                            load.loaded = true;
                        }
                    }
                    let effects = ctx.finish();
                    self.spawn_writes(effects);
                    info!(
                        partition,
                        leader_epoch,
                        groups = count,
                        "loaded the groups of {OFFSETS_TOPIC} partition {partition}"
                    );
                    return;
                }
                Err(e) => {
                    warn!(partition, error = %e, "loading consumer groups failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// Runs a fired timer if it is still the current one for its key.
    async fn timer_task(self: Arc<Self>, key: TimerKey, id: u64, mut wake: Instant) {
        loop {
            tokio::time::sleep_until(wake).await;
            let mut ctx = self.ctx();
            let action = match ctx.state.timers.get_mut(&key) {
                Some(entry) if entry.id == id => {
                    if Instant::now() < entry.deadline {
                        entry.wake = entry.deadline;
                        wake = entry.deadline;
                        continue;
                    }
                    let action = entry.action;
                    ctx.state.timers.remove(&key);
                    action
                }
                _ => return,
            };
            ctx.fire(&key, action);
            let effects = ctx.finish();
            self.spawn_writes(effects);
            return;
        }
    }
}

impl<S: GroupStore> Ctx<'_, S> {
    /// The collected effects, each write with its place in its group's
    /// queue, taken while the state lock is still held.
    fn finish(mut self) -> PlannedEffects {
        let writes = std::mem::take(&mut self.effects.writes)
            .into_iter()
            .map(|(group_id, write)| {
                let turn = self.state.write_turn(&group_id);
                (group_id, write, turn)
            })
            .collect();
        let static_rejoins = std::mem::take(&mut self.effects.static_rejoins)
            .into_iter()
            .map(|rejoin| {
                let turn = self.state.write_turn(&rejoin.group_id);
                (rejoin, turn)
            })
            .collect();
        PlannedEffects {
            writes,
            static_rejoins,
        }
    }

    /// INVALID_GROUP_ID for an empty group id, then [`Self::check_loaded_any`]
    /// (the APIs Kafka's `isGroupIdNotEmpty` guards: JoinGroup, SyncGroup,
    /// Heartbeat, LeaveGroup, OffsetDelete).
    fn check_loaded(&self, group_id: &str) -> Result<(), ResponseError> {
        if group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        self.check_loaded_any(group_id)
    }

    /// NOT_COORDINATOR when this broker does not lead the group's offsets
    /// partition; COORDINATOR_LOAD_IN_PROGRESS until that partition (or the
    /// store) was loaded. OffsetCommit, OffsetFetch, DescribeGroups and
    /// DeleteGroups accept the empty group id, as Kafka does for backwards
    /// compatibility.
    fn check_loaded_any(&self, group_id: &str) -> Result<(), ResponseError> {
        match &self.state.ownership {
            Ownership::Starting => Err(ResponseError::CoordinatorLoadInProgress),
            Ownership::All => Ok(()),
            Ownership::Partitions(led) => {
                match led.get(&self.inner.store.partition_for(group_id)) {
                    None => Err(ResponseError::NotCoordinator),
                    Some(load) if !load.loaded => Err(ResponseError::CoordinatorLoadInProgress),
                    Some(_) => Ok(()),
                }
            }
        }
    }

    /// Whether `group_id` is served here now (its partition led and loaded).
    fn owns(&self, group_id: &str) -> bool {
        self.check_loaded_any(group_id).is_ok()
    }

    fn group(&mut self, group_id: &str) -> Option<&mut ClassicGroup> {
        self.state.groups.get_mut(group_id)
    }

    // ---- timers ----

    fn schedule(&mut self, key: TimerKey, delay_ms: u64, action: TimerAction) {
        // Configured delays may be absurdly large; cap them at 100 years so
        // the deadline cannot overflow the clock.
        let delay = Duration::from_millis(delay_ms.min(MAX_TIMER_MS));
        let deadline = Instant::now() + delay;
        if let Some(entry) = self.state.timers.get_mut(&key) {
            if entry.wake <= deadline {
                // The running task wakes first and sleeps on to the new deadline.
                entry.deadline = deadline;
                entry.action = action;
                return;
            }
        }
        self.state.next_timer_id += 1;
        let id = self.state.next_timer_id;
        self.state.timers.insert(
            key.clone(),
            TimerEntry {
                id,
                deadline,
                wake: deadline,
                action,
            },
        );
        tokio::spawn(self.inner.clone().timer_task(key, id, deadline));
    }

    fn cancel(&mut self, key: &TimerKey) {
        self.state.timers.remove(key);
    }

    fn schedule_heartbeat(&mut self, group_id: &str, member_id: &str, timeout_ms: u64) {
        self.schedule(
            TimerKey::Heartbeat(group_id.to_string(), member_id.to_string()),
            timeout_ms,
            TimerAction::ExpireHeartbeat,
        );
    }

    fn cancel_heartbeat(&mut self, group_id: &str, member_id: &str) {
        self.cancel(&TimerKey::Heartbeat(
            group_id.to_string(),
            member_id.to_string(),
        ));
    }

    fn fire(&mut self, key: &TimerKey, action: TimerAction) {
        match (key, action) {
            (TimerKey::Join(group_id), TimerAction::CompleteJoin) => {
                self.complete_join(group_id);
            }
            (
                TimerKey::Join(group_id),
                TimerAction::InitialRebalance {
                    delay_ms,
                    remaining_ms,
                },
            ) => self.initial_rebalance_tick(group_id, delay_ms, remaining_ms),
            (TimerKey::Sync(group_id), TimerAction::ExpirePendingSync { generation_id }) => {
                self.expire_pending_sync(group_id, generation_id);
            }
            (TimerKey::Heartbeat(group_id, member_id), TimerAction::ExpireHeartbeat) => {
                self.expire_heartbeat(group_id, member_id);
            }
            _ => {}
        }
    }

    // ---- join ----

    fn join(&mut self, params: JoinGroupParams, sender: oneshot::Sender<JoinGroupResult>) {
        let now_ms = self.now_ms;
        let unknown = params.member_id.is_empty();
        if !self.state.groups.contains_key(&params.group_id) {
            if !unknown {
                let _ = sender.send(JoinGroupResult::error(
                    ResponseError::UnknownMemberId,
                    params.member_id,
                ));
                return;
            }
            self.state.groups.insert(
                params.group_id.clone(),
                ClassicGroup::new(&params.group_id, now_ms),
            );
        }
        let max_size = self.inner.config.max_size;
        let group = self.group(&params.group_id).expect("inserted above");
        let accept = match group.state {
            ClassicGroupState::Empty | ClassicGroupState::Dead => true,
            ClassicGroupState::PreparingRebalance => {
                group
                    .members
                    .get(&params.member_id)
                    .is_some_and(|m| m.awaiting_join.is_some())
                    || group.num_awaiting_join() < max_size
            }
            ClassicGroupState::CompletingRebalance | ClassicGroupState::Stable => {
                group.members.contains_key(&params.member_id) || group.members.len() < max_size
            }
        };
        if !accept {
            let member_id = params.member_id.clone();
            if group.remove(&member_id).is_some() {
                self.cancel_heartbeat(&params.group_id, &member_id);
                self.after_member_removed(&params.group_id);
            }
            let _ = sender.send(JoinGroupResult::error(
                ResponseError::GroupMaxSizeReached,
                "",
            ));
            return;
        }
        if unknown {
            self.join_new_member(params, sender);
        } else {
            self.join_existing_member(params, sender);
        }
    }

    fn join_new_member(
        &mut self,
        params: JoinGroupParams,
        sender: oneshot::Sender<JoinGroupResult>,
    ) {
        let group = self.group(&params.group_id).expect("group exists");
        if group.state == ClassicGroupState::Dead {
            let _ = sender.send(JoinGroupResult::error(
                ResponseError::CoordinatorNotAvailable,
                "",
            ));
            return;
        }
        if !group.supports_protocols(&params.protocol_type, &params.protocols) {
            let _ = sender.send(JoinGroupResult::error(
                ResponseError::InconsistentGroupProtocol,
                "",
            ));
            return;
        }
        let prefix = params
            .group_instance_id
            .clone()
            .unwrap_or_else(|| params.client_id.clone());
        let new_member_id = format!("{prefix}-{}", uuid::Uuid::new_v4());
        if let Some(instance) = params.group_instance_id.clone() {
            match group.static_members.get(&instance).cloned() {
                Some(old_member_id) => {
                    self.update_static_member(params, old_member_id, new_member_id, sender)
                }
                None => self.add_member_and_rebalance(params, new_member_id, sender),
            }
        } else if params.require_known_member_id {
            group.pending_members.insert(new_member_id.clone());
            let session = params.session_timeout_ms.max(0) as u64;
            self.schedule_heartbeat(&params.group_id, &new_member_id, session);
            let _ = sender.send(JoinGroupResult::error(
                ResponseError::MemberIdRequired,
                new_member_id,
            ));
        } else {
            self.add_member_and_rebalance(params, new_member_id, sender);
        }
    }

    fn join_existing_member(
        &mut self,
        params: JoinGroupParams,
        sender: oneshot::Sender<JoinGroupResult>,
    ) {
        let member_id = params.member_id.clone();
        let group = self.group(&params.group_id).expect("group exists");
        if group.state == ClassicGroupState::Dead {
            let _ = sender.send(JoinGroupResult::error(
                ResponseError::CoordinatorNotAvailable,
                member_id,
            ));
            return;
        }
        if !group.supports_protocols(&params.protocol_type, &params.protocols) {
            let _ = sender.send(JoinGroupResult::error(
                ResponseError::InconsistentGroupProtocol,
                member_id,
            ));
            return;
        }
        if group.pending_members.contains(&member_id) {
            self.add_member_and_rebalance(params, member_id, sender);
            return;
        }
        if let Err(e) = group.validate_member(&member_id, params.group_instance_id.as_deref()) {
            let _ = sender.send(JoinGroupResult::error(e, member_id));
            return;
        }
        let is_leader = group.is_leader(&member_id);
        let matches = group.members[&member_id].matches(&params.protocols);
        match group.state {
            ClassicGroupState::PreparingRebalance => {
                self.update_member_and_rebalance(params, sender);
            }
            ClassicGroupState::CompletingRebalance if matches => {
                let result = current_join_result(group, &member_id, is_leader);
                let _ = sender.send(result);
            }
            ClassicGroupState::Stable if !is_leader && matches => {
                let result = current_join_result(group, &member_id, false);
                let _ = sender.send(result);
            }
            ClassicGroupState::CompletingRebalance | ClassicGroupState::Stable => {
                self.update_member_and_rebalance(params, sender);
            }
            ClassicGroupState::Empty | ClassicGroupState::Dead => {
                let _ = sender.send(JoinGroupResult::error(
                    ResponseError::UnknownMemberId,
                    member_id,
                ));
            }
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        params: JoinGroupParams,
        member_id: String,
        sender: oneshot::Sender<JoinGroupResult>,
    ) {
        let group_id = params.group_id.clone();
        let group = self.group(&group_id).expect("group exists");
        if group.state == ClassicGroupState::PreparingRebalance
            && group.previous_state == ClassicGroupState::Empty
        {
            group.new_member_added = true;
        }
        group.add(ClassicGroupMember {
            member_id: member_id.clone(),
            group_instance_id: params.group_instance_id,
            client_id: params.client_id,
            client_host: params.client_host,
            rebalance_timeout_ms: params.rebalance_timeout_ms,
            session_timeout_ms: params.session_timeout_ms,
            protocol_type: params.protocol_type,
            protocols: params.protocols,
            assignment: Bytes::new(),
            awaiting_join: Some(sender),
            awaiting_sync: None,
            is_new: true,
        });
        self.schedule_heartbeat(&group_id, &member_id, NEW_MEMBER_JOIN_TIMEOUT_MS);
        self.maybe_prepare_rebalance_or_complete_join(&group_id);
    }

    fn update_member_and_rebalance(
        &mut self,
        params: JoinGroupParams,
        sender: oneshot::Sender<JoinGroupResult>,
    ) {
        let group = self.group(&params.group_id).expect("group exists");
        if let Some(member) = group.members.get_mut(&params.member_id) {
            member.protocols = params.protocols;
            member.rebalance_timeout_ms = params.rebalance_timeout_ms;
            member.session_timeout_ms = params.session_timeout_ms;
            // A second join from the same member replaces the first; the
            // first is answered as superseded.
            if let Some(old) = member.awaiting_join.replace(sender) {
                let _ = old.send(JoinGroupResult::error(
                    ResponseError::RebalanceInProgress,
                    params.member_id.clone(),
                ));
            }
        }
        self.maybe_prepare_rebalance_or_complete_join(&params.group_id);
    }

    /// KIP-345: a known static member rejoins with a new member id. In a
    /// Stable group with an unchanged selected protocol it takes over the
    /// old member's place without a rebalance (after the metadata write).
    fn update_static_member(
        &mut self,
        params: JoinGroupParams,
        old_member_id: String,
        new_member_id: String,
        sender: oneshot::Sender<JoinGroupResult>,
    ) {
        let group_id = params.group_id.clone();
        let Some(instance) = params.group_instance_id.clone() else {
            return;
        };
        let group = self.group(&group_id).expect("group exists");
        let current_leader = group.leader_id.clone().unwrap_or_default();
        if !group.replace_member_id(&old_member_id, &new_member_id) {
            let _ = sender.send(JoinGroupResult::error(ResponseError::UnknownMemberId, ""));
            return;
        }
        let member = group
            .members
            .get_mut(&new_member_id)
            .expect("replaced above");
        // The old incarnation's pending requests are fenced.
        if let Some(old) = member.awaiting_join.take() {
            let _ = old.send(JoinGroupResult::error(
                ResponseError::FencedInstanceId,
                old_member_id.clone(),
            ));
        }
        if let Some(old) = member.awaiting_sync.take() {
            let _ = old.send(SyncGroupResult::error(ResponseError::FencedInstanceId));
        }
        let previous = MemberSettings::of(member);
        member.protocols = params.protocols;
        member.rebalance_timeout_ms = params.rebalance_timeout_ms;
        member.session_timeout_ms = params.session_timeout_ms;
        member.client_id = params.client_id;
        member.client_host = params.client_host;
        let session = member.session_timeout_ms.max(0) as u64;
        self.cancel_heartbeat(&group_id, &old_member_id);
        self.schedule_heartbeat(&group_id, &new_member_id, session);

        let group = self.group(&group_id).expect("group exists");
        match group.state {
            ClassicGroupState::Stable if group.select_protocol() == group.protocol_name => {
                // No rebalance: the new member id is stored, then the member
                // is answered (or, if the write fails, the old id restored).
                let is_leader = group.is_leader(&new_member_id);
                let mut result = current_join_result(group, &new_member_id, false);
                if params.supports_skip_assignment && is_leader {
                    result.members = group.join_members();
                    result.skip_assignment = true;
                } else if !params.supports_skip_assignment {
                    // Before v9 the old leader id is returned, so a rejoining
                    // static leader acts as a follower and keeps the current
                    // assignment (Kafka does the same).
                    result.leader = current_leader.clone();
                }
                let write = GroupWrite {
                    metadata: Some(Some(group.metadata_record(None))),
                    offsets: Vec::new(),
                };
                self.effects.static_rejoins.push(StaticRejoin {
                    group_id,
                    instance,
                    old_member_id,
                    new_member_id,
                    previous,
                    current_leader,
                    write,
                    result,
                    sender,
                });
            }
            ClassicGroupState::Stable => {
                if let Some(m) = group.members.get_mut(&new_member_id) {
                    m.awaiting_join = Some(sender);
                }
                self.maybe_prepare_rebalance_or_complete_join(&group_id);
            }
            ClassicGroupState::CompletingRebalance => {
                if let Some(m) = group.members.get_mut(&new_member_id) {
                    m.awaiting_join = Some(sender);
                }
                self.prepare_rebalance(&group_id);
            }
            _ => {
                if let Some(m) = group.members.get_mut(&new_member_id) {
                    m.awaiting_join = Some(sender);
                }
                self.maybe_complete_join_phase(&group_id);
            }
        }
    }

    /// The outcome of a static member's rejoin without rebalance: on a
    /// failed write the old member id and settings come back and the
    /// member gets the store's error (Kafka's revert in
    /// `updateStaticMemberThenRebalanceOrCompleteJoin`).
    fn on_static_rejoin_stored(
        &mut self,
        rejoin: StaticRejoin,
        result: Result<(), GroupStoreError>,
    ) {
        let StaticRejoin {
            group_id,
            instance,
            old_member_id,
            new_member_id,
            previous,
            current_leader,
            result: answer,
            sender,
            ..
        } = rejoin;
        let error = match result {
            Ok(()) => {
                let _ = sender.send(answer);
                return;
            }
            Err(e) => {
                warn!(
                    group = %bounded(&group_id),
                    error = %e,
                    "storing a static member's new id failed"
                );
                group_metadata_store_error(&e)
            }
        };
        let mut failure = JoinGroupResult::error(error, "");
        if let Some(group) = self.group(&group_id) {
            failure.generation_id = group.generation_id;
            failure.protocol_type = group.protocol_type.clone();
            failure.protocol_name = group.protocol_name.clone();
            failure.leader = current_leader;
            let still_current =
                group.static_members.get(&instance).map(String::as_str) == Some(&new_member_id);
            if still_current && group.replace_member_id(&new_member_id, &old_member_id) {
                if let Some(member) = group.members.get_mut(&old_member_id) {
                    previous.restore(member);
                    let session = member.session_timeout_ms.max(0) as u64;
                    self.cancel_heartbeat(&group_id, &new_member_id);
                    self.schedule_heartbeat(&group_id, &old_member_id, session);
                }
            }
        }
        let _ = sender.send(failure);
    }

    fn maybe_prepare_rebalance_or_complete_join(&mut self, group_id: &str) {
        let Some(group) = self.group(group_id) else {
            return;
        };
        if group.can_rebalance() {
            self.prepare_rebalance(group_id);
        } else {
            self.maybe_complete_join_phase(group_id);
        }
    }

    fn maybe_complete_join_phase(&mut self, group_id: &str) {
        let Some(group) = self.group(group_id) else {
            return;
        };
        if group.state == ClassicGroupState::PreparingRebalance
            && group.previous_state != ClassicGroupState::Empty
            && group.has_all_members_joined()
        {
            self.complete_join(group_id);
        }
    }

    fn prepare_rebalance(&mut self, group_id: &str) {
        let now_ms = self.now_ms;
        let initial_delay = self.inner.config.initial_rebalance_delay_ms;
        let Some(group) = self.group(group_id) else {
            return;
        };
        if group.state == ClassicGroupState::CompletingRebalance {
            reset_and_propagate_assignment_error(group, ResponseError::RebalanceInProgress);
        }
        group.pending_sync_members.clear();
        let initial = group.state == ClassicGroupState::Empty;
        let rebalance_timeout = group.rebalance_timeout_ms().max(0) as u64;
        group.transition_to(ClassicGroupState::PreparingRebalance, now_ms);
        self.cancel(&TimerKey::Sync(group_id.to_string()));
        if initial {
            let remaining_ms = rebalance_timeout.saturating_sub(initial_delay);
            self.schedule(
                TimerKey::Join(group_id.to_string()),
                initial_delay,
                TimerAction::InitialRebalance {
                    delay_ms: initial_delay,
                    remaining_ms,
                },
            );
        } else if self
            .group(group_id)
            .is_some_and(|g| g.has_all_members_joined())
        {
            self.complete_join(group_id);
        } else {
            self.schedule(
                TimerKey::Join(group_id.to_string()),
                rebalance_timeout,
                TimerAction::CompleteJoin,
            );
        }
    }

    fn initial_rebalance_tick(&mut self, group_id: &str, delay_ms: u64, remaining_ms: u64) {
        let initial_delay = self.inner.config.initial_rebalance_delay_ms;
        let Some(group) = self.group(group_id) else {
            return;
        };
        if group.new_member_added && remaining_ms != 0 {
            group.new_member_added = false;
            let new_delay = initial_delay.min(remaining_ms);
            let new_remaining = remaining_ms.saturating_sub(delay_ms);
            self.schedule(
                TimerKey::Join(group_id.to_string()),
                new_delay,
                TimerAction::InitialRebalance {
                    delay_ms: new_delay,
                    remaining_ms: new_remaining,
                },
            );
        } else {
            self.complete_join(group_id);
        }
    }

    /// Ends the join phase: drops dynamic members that did not rejoin,
    /// starts the next generation and answers every parked JoinGroup.
    fn complete_join(&mut self, group_id: &str) {
        let now_ms = self.now_ms;
        self.cancel(&TimerKey::Join(group_id.to_string()));
        let Some(group) = self.group(group_id) else {
            return;
        };
        if group.state != ClassicGroupState::PreparingRebalance {
            return;
        }
        let not_rejoined: Vec<String> = group
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in &not_rejoined {
            group.remove(member_id);
        }
        for member_id in &not_rejoined {
            self.cancel_heartbeat(group_id, member_id);
        }
        let group = self.group(group_id).expect("checked above");
        // Kafka's maybeElectNewJoinedLeader.
        if let Some(leader) = group.leader_id.clone() {
            let leader_joined = group
                .members
                .get(&leader)
                .is_some_and(|m| m.awaiting_join.is_some());
            if !leader_joined {
                let next = group
                    .ordered_members()
                    .find(|m| m.awaiting_join.is_some())
                    .map(|m| m.member_id.clone());
                match next {
                    Some(next) => group.leader_id = Some(next),
                    None if !group.members.is_empty() => {
                        let timeout = group.rebalance_timeout_ms().max(0) as u64;
                        self.schedule(
                            TimerKey::Join(group_id.to_string()),
                            timeout,
                            TimerAction::CompleteJoin,
                        );
                        return;
                    }
                    None => {}
                }
            }
        }
        let group = self.group(group_id).expect("checked above");
        group.generation_id += 1;
        if group.members.is_empty() {
            group.protocol_name = None;
            group.leader_id = None;
            group.transition_to(ClassicGroupState::Empty, now_ms);
            let record = group.metadata_record(None);
            self.effects.writes.push((
                group_id.to_string(),
                GroupWrite {
                    metadata: Some(Some(record)),
                    offsets: Vec::new(),
                },
            ));
            return;
        }
        group.protocol_name = group.select_protocol();
        group.transition_to(ClassicGroupState::CompletingRebalance, now_ms);
        let leader = group.leader_id.clone().unwrap_or_default();
        let all_members = group.join_members();
        let generation_id = group.generation_id;
        let protocol_type = group.protocol_type.clone();
        let protocol_name = group.protocol_name.clone();
        let mut sessions = Vec::new();
        let ids: Vec<String> = group.member_order.clone();
        for member_id in ids {
            let Some(member) = group.members.get_mut(&member_id) else {
                continue;
            };
            let result = JoinGroupResult {
                error: None,
                generation_id,
                protocol_type: protocol_type.clone(),
                protocol_name: protocol_name.clone(),
                leader: leader.clone(),
                member_id: member_id.clone(),
                members: if member_id == leader {
                    all_members.clone()
                } else {
                    Vec::new()
                },
                skip_assignment: false,
            };
            if let Some(sender) = member.awaiting_join.take() {
                let _ = sender.send(result);
            }
            member.is_new = false;
            sessions.push((member_id.clone(), member.session_timeout_ms.max(0) as u64));
            group.pending_sync_members.insert(member_id);
        }
        let rebalance_timeout = group.rebalance_timeout_ms().max(0) as u64;
        for (member_id, session) in sessions {
            self.schedule_heartbeat(group_id, &member_id, session);
        }
        self.schedule(
            TimerKey::Sync(group_id.to_string()),
            rebalance_timeout,
            TimerAction::ExpirePendingSync { generation_id },
        );
    }

    fn expire_pending_sync(&mut self, group_id: &str, generation_id: i32) {
        let Some(group) = self.group(group_id) else {
            return;
        };
        if group.generation_id != generation_id
            || !matches!(
                group.state,
                ClassicGroupState::CompletingRebalance | ClassicGroupState::Stable
            )
            || group.pending_sync_members.is_empty()
        {
            return;
        }
        let pending: Vec<String> = group.pending_sync_members.iter().cloned().collect();
        for member_id in &pending {
            if let Some(mut member) = group.remove(member_id) {
                if let Some(sender) = member.awaiting_sync.take() {
                    let _ = sender.send(SyncGroupResult::error(ResponseError::UnknownMemberId));
                }
            }
        }
        for member_id in &pending {
            self.cancel_heartbeat(group_id, member_id);
        }
        info!(
            group = %bounded(group_id),
            members = %bounded(&format!("{pending:?}")),
            "removing members that did not sync in time"
        );
        self.prepare_rebalance(group_id);
    }

    fn expire_heartbeat(&mut self, group_id: &str, member_id: &str) {
        let Some(group) = self.group(group_id) else {
            return;
        };
        if group.state == ClassicGroupState::Dead {
            return;
        }
        if group.pending_members.remove(member_id) {
            self.maybe_complete_after_pending_removed(group_id);
            return;
        }
        let Some(member) = group.members.get(member_id) else {
            return;
        };
        let satisfied =
            !member.is_new && (member.awaiting_join.is_some() || member.awaiting_sync.is_some());
        if satisfied {
            return;
        }
        info!(group = %bounded(group_id), member = %bounded(member_id), "member's session expired");
        self.remove_member_and_update(group_id, member_id);
    }

    fn maybe_complete_after_pending_removed(&mut self, group_id: &str) {
        if self.group(group_id).is_some_and(|g| {
            g.state == ClassicGroupState::PreparingRebalance && g.has_all_members_joined()
        }) {
            self.complete_join(group_id);
        }
    }

    /// Kafka's `removeMemberAndUpdateClassicGroup`.
    fn remove_member_and_update(&mut self, group_id: &str, member_id: &str) {
        let Some(group) = self.group(group_id) else {
            return;
        };
        if let Some(mut member) = group.remove(member_id) {
            if let Some(sender) = member.awaiting_join.take() {
                let _ = sender.send(JoinGroupResult::error(ResponseError::UnknownMemberId, ""));
            }
            if let Some(sender) = member.awaiting_sync.take() {
                let _ = sender.send(SyncGroupResult::error(ResponseError::UnknownMemberId));
            }
        }
        self.cancel_heartbeat(group_id, member_id);
        self.after_member_removed(group_id);
    }

    fn after_member_removed(&mut self, group_id: &str) {
        let Some(group) = self.group(group_id) else {
            return;
        };
        match group.state {
            ClassicGroupState::Stable | ClassicGroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance_or_complete_join(group_id)
            }
            ClassicGroupState::PreparingRebalance if group.has_all_members_joined() => {
                self.complete_join(group_id)
            }
            _ => {}
        }
    }

    // ---- sync ----

    /// Validates a SyncGroup and parks its response; for the leader returns
    /// the assignment and the write that must be durable first.
    #[allow(clippy::type_complexity)]
    fn sync(
        &mut self,
        params: &SyncGroupParams,
        sender: oneshot::Sender<SyncGroupResult>,
    ) -> Option<(HashMap<String, Bytes>, GroupWrite)> {
        let group_id = params.group_id.as_str();
        let Some(group) = self.state.groups.get_mut(group_id) else {
            let _ = sender.send(SyncGroupResult::error(ResponseError::UnknownMemberId));
            return None;
        };
        let error = if group.state == ClassicGroupState::Dead {
            Some(ResponseError::CoordinatorNotAvailable)
        } else if let Err(e) =
            group.validate_member(&params.member_id, params.group_instance_id.as_deref())
        {
            Some(e)
        } else if params.generation_id != group.generation_id {
            Some(ResponseError::IllegalGeneration)
        } else if inconsistent(&params.protocol_type, &group.protocol_type)
            || inconsistent(&params.protocol_name, &group.protocol_name)
        {
            Some(ResponseError::InconsistentGroupProtocol)
        } else {
            None
        };
        if let Some(error) = error {
            let _ = sender.send(SyncGroupResult::error(error));
            return None;
        }
        match group.state {
            ClassicGroupState::PreparingRebalance => {
                let _ = sender.send(SyncGroupResult::error(ResponseError::RebalanceInProgress));
                None
            }
            ClassicGroupState::CompletingRebalance => {
                group.pending_sync_members.remove(&params.member_id);
                let all_synced = group.pending_sync_members.is_empty();
                let is_leader = group.is_leader(&params.member_id);
                if let Some(member) = group.members.get_mut(&params.member_id) {
                    member.awaiting_sync = Some(sender);
                }
                let write = if is_leader {
                    let mut assignment: HashMap<String, Bytes> =
                        params.assignments.iter().cloned().collect();
                    for member_id in group.members.keys() {
                        assignment.entry(member_id.clone()).or_default();
                    }
                    let record = group.metadata_record(Some(&assignment));
                    Some((
                        assignment,
                        GroupWrite {
                            metadata: Some(Some(record)),
                            offsets: Vec::new(),
                        },
                    ))
                } else {
                    None
                };
                if all_synced {
                    self.cancel(&TimerKey::Sync(group_id.to_string()));
                }
                write
            }
            ClassicGroupState::Stable => {
                group.pending_sync_members.remove(&params.member_id);
                let all_synced = group.pending_sync_members.is_empty();
                let member = &group.members[&params.member_id];
                let _ = sender.send(SyncGroupResult {
                    error: None,
                    protocol_type: group.protocol_type.clone(),
                    protocol_name: group.protocol_name.clone(),
                    assignment: member.assignment.clone(),
                });
                if all_synced {
                    self.cancel(&TimerKey::Sync(group_id.to_string()));
                }
                None
            }
            ClassicGroupState::Empty | ClassicGroupState::Dead => {
                let _ = sender.send(SyncGroupResult::error(ResponseError::UnknownMemberId));
                None
            }
        }
    }

    fn on_assignment_stored(
        &mut self,
        group_id: &str,
        generation_id: i32,
        assignment: HashMap<String, Bytes>,
        result: Result<(), GroupStoreError>,
    ) {
        let now_ms = self.now_ms;
        let Some(group) = self.group(group_id) else {
            return;
        };
        if group.state != ClassicGroupState::CompletingRebalance
            || group.generation_id != generation_id
        {
            return;
        }
        match result {
            Ok(()) => {
                for member in group.members.values_mut() {
                    member.assignment = assignment
                        .get(&member.member_id)
                        .cloned()
                        .unwrap_or_default();
                }
                propagate_assignment(group, None);
                group.transition_to(ClassicGroupState::Stable, now_ms);
                let sessions: Vec<(String, u64)> = group
                    .members
                    .values()
                    .map(|m| (m.member_id.clone(), m.session_timeout_ms.max(0) as u64))
                    .collect();
                for (member_id, session) in sessions {
                    self.schedule_heartbeat(group_id, &member_id, session);
                }
            }
            Err(e) => {
                warn!(
                    group = %bounded(group_id),
                    error = %e,
                    "storing the group's assignment failed"
                );
                reset_and_propagate_assignment_error(group, group_metadata_store_error(&e));
                self.maybe_prepare_rebalance_or_complete_join(group_id);
            }
        }
    }

    // ---- leave ----

    #[allow(clippy::type_complexity)]
    fn leave(
        &mut self,
        group_id: &str,
        members: Vec<(String, Option<String>)>,
    ) -> Result<Vec<(String, Option<String>, Option<ResponseError>)>, ResponseError> {
        let Some(group) = self.group(group_id) else {
            return Err(ResponseError::UnknownMemberId);
        };
        if group.state == ClassicGroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        let mut outcomes = Vec::new();
        let mut any_left = false;
        for (member_id, instance) in members {
            let group = self.group(group_id).expect("checked above");
            let target = if member_id.is_empty() {
                match instance.as_ref().and_then(|i| group.static_members.get(i)) {
                    Some(existing) => Ok(Some(existing.clone())),
                    None => Err(ResponseError::UnknownMemberId),
                }
            } else if group.pending_members.contains(&member_id) {
                group.pending_members.remove(&member_id);
                Ok(None)
            } else {
                group
                    .validate_member(&member_id, instance.as_deref())
                    .map(|()| Some(member_id.clone()))
            };
            match target {
                Ok(Some(current)) => {
                    if let Some(mut member) = group.remove(&current) {
                        if let Some(sender) = member.awaiting_join.take() {
                            let _ = sender
                                .send(JoinGroupResult::error(ResponseError::UnknownMemberId, ""));
                        }
                        if let Some(sender) = member.awaiting_sync.take() {
                            let _ =
                                sender.send(SyncGroupResult::error(ResponseError::UnknownMemberId));
                        }
                    }
                    self.cancel_heartbeat(group_id, &current);
                    any_left = true;
                    outcomes.push((member_id, instance, None));
                }
                Ok(None) => {
                    self.cancel_heartbeat(group_id, &member_id);
                    any_left = true;
                    outcomes.push((member_id, instance, None));
                }
                Err(e) => outcomes.push((member_id, instance, Some(e))),
            }
        }
        if any_left {
            let state = self.group(group_id).map(|g| g.state);
            match state {
                Some(ClassicGroupState::Stable | ClassicGroupState::CompletingRebalance) => {
                    self.maybe_prepare_rebalance_or_complete_join(group_id)
                }
                Some(ClassicGroupState::PreparingRebalance) => {
                    self.maybe_complete_join_phase(group_id)
                }
                _ => {}
            }
        }
        Ok(outcomes)
    }

    // ---- offsets ----

    /// Kafka's `validateOffsetCommit` for classic groups.
    fn validate_commit(&mut self, params: &OffsetCommitParams) -> Result<(), ResponseError> {
        let Some(group) = self.state.groups.get(&params.group_id) else {
            if params.generation_id < 0 {
                return Ok(());
            }
            return Err(if params.api_version >= 9 {
                ResponseError::GroupIdNotFound
            } else {
                ResponseError::IllegalGeneration
            });
        };
        if group.state == ClassicGroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        if params.generation_id < 0 && group.state == ClassicGroupState::Empty {
            return Ok(());
        }
        if params.generation_id >= 0
            || !params.member_id.is_empty()
            || params.group_instance_id.is_some()
        {
            group.validate_member(&params.member_id, params.group_instance_id.as_deref())?;
            if params.generation_id != group.generation_id {
                return Err(ResponseError::IllegalGeneration);
            }
        } else if group.state != ClassicGroupState::Empty {
            return Err(ResponseError::UnknownMemberId);
        }
        if group.state == ClassicGroupState::CompletingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        // A commit keeps the session alive in Stable and PreparingRebalance.
        if matches!(
            group.state,
            ClassicGroupState::Stable | ClassicGroupState::PreparingRebalance
        ) {
            if let Some(member) = group.members.get(&params.member_id) {
                let session = member.session_timeout_ms.max(0) as u64;
                let (group_id, member_id) = (params.group_id.clone(), params.member_id.clone());
                self.schedule_heartbeat(&group_id, &member_id, session);
            }
        }
        Ok(())
    }
}

/// Answers the group's parked JoinGroup and SyncGroup requests with
/// NOT_COORDINATOR (what Kafka answers when a coordinator unloads a group).
fn answer_parked_with_not_coordinator(group: &mut ClassicGroup) {
    for member in group.members.values_mut() {
        if let Some(sender) = member.awaiting_join.take() {
            let _ = sender.send(JoinGroupResult::error(
                ResponseError::NotCoordinator,
                member.member_id.clone(),
            ));
        }
        if let Some(sender) = member.awaiting_sync.take() {
            let _ = sender.send(SyncGroupResult::error(ResponseError::NotCoordinator));
        }
    }
}

/// A SyncGroup v5 protocol field that is given and differs from the group's.
fn inconsistent(requested: &Option<String>, current: &Option<String>) -> bool {
    requested.is_some() && requested != current
}

/// The JoinGroup answer for a member of the current generation.
fn current_join_result(
    group: &ClassicGroup,
    member_id: &str,
    with_members: bool,
) -> JoinGroupResult {
    JoinGroupResult {
        error: None,
        generation_id: group.generation_id,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol_name.clone(),
        leader: group.leader_id.clone().unwrap_or_default(),
        member_id: member_id.to_string(),
        members: if with_members {
            group.join_members()
        } else {
            Vec::new()
        },
        skip_assignment: false,
    }
}

fn reset_and_propagate_assignment_error(group: &mut ClassicGroup, error: ResponseError) {
    for member in group.members.values_mut() {
        member.assignment = Bytes::new();
    }
    propagate_assignment(group, Some(error));
}

/// Answers every parked SyncGroup with its assignment or `error`.
fn propagate_assignment(group: &mut ClassicGroup, error: Option<ResponseError>) {
    let (protocol_type, protocol_name) = if error.is_none() {
        (group.protocol_type.clone(), group.protocol_name.clone())
    } else {
        (None, None)
    };
    for member in group.members.values_mut() {
        if let Some(sender) = member.awaiting_sync.take() {
            let _ = sender.send(SyncGroupResult {
                error,
                protocol_type: protocol_type.clone(),
                protocol_name: protocol_name.clone(),
                assignment: member.assignment.clone(),
            });
        }
    }
}

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
