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
//!
//! The code is split by concern, each an `impl` of the types defined here:
//! - `ownership`: which groups are served here, loading and unloading
//!   them as `__consumer_offsets` leadership moves;
//! - `timers`: the join, initial-delay, pending-sync and session timers;
//! - `writes`: the per-group queue of store writes and applying them once
//!   durable;
//! - `rebalance`: JoinGroup, SyncGroup, Heartbeat and LeaveGroup;
//! - `offsets`: OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups and
//!   offset expiry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use weir_storage::TopicPartition;

use super::classic_group::{ClassicGroup, ClassicGroupState, JoinGroupResult};
use super::store::{GroupStore, GroupWrite};

mod offsets;
mod ownership;
mod rebalance;
mod timers;
mod writes;

use ownership::Ownership;
use rebalance::MemberSettings;
use timers::{TimerEntry, TimerKey};
use writes::WriteTurn;

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
}

impl<S: GroupStore> Ctx<'_, S> {
    fn group(&mut self, group_id: &str) -> Option<&mut ClassicGroup> {
        self.state.groups.get_mut(group_id)
    }
}

#[cfg(test)]
mod tests;
