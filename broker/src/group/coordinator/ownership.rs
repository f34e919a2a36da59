//! Which groups this coordinator serves and how they get into memory
//! (Kafka's `onElection` / `onResignation`): following the leadership of
//! the `__consumer_offsets` partitions, loading a newly led partition's
//! groups from the store (COORDINATOR_LOAD_IN_PROGRESS meanwhile),
//! unloading the groups of a partition no longer led here (parked joins and
//! syncs get NOT_COORDINATOR), the NOT_COORDINATOR /
//! COORDINATOR_LOAD_IN_PROGRESS checks every request makes, and shutdown.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use tracing::{info, warn};

use crate::group::classic_group::{
    ClassicGroup, ClassicGroupMember, ClassicGroupState, JoinGroupResult, SyncGroupResult,
};
use crate::group::store::{GroupStore, GroupStoreError, LoadedGroup, OffsetsLeadership};
use crate::group::OFFSETS_TOPIC;

use super::{Ctx, GroupCoordinator, Inner};

/// Which groups the coordinator serves.
#[derive(Debug, Default)]
pub(super) enum Ownership {
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
pub(super) struct PartitionLoad {
    /// The leader epoch it is led in.
    leader_epoch: i32,
    /// Whether its groups were loaded (else COORDINATOR_LOAD_IN_PROGRESS).
    pub(super) loaded: bool,
}

impl<S: GroupStore> GroupCoordinator<S> {
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
    pub(super) fn unload_all_groups(&self) {
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

    /// INVALID_GROUP_ID for an empty group id, then [`Self::check_loaded_any`]
    /// (the APIs Kafka's `isGroupIdNotEmpty` guards: JoinGroup, SyncGroup,
    /// Heartbeat, LeaveGroup, OffsetDelete).
    pub(super) fn check_loaded(&self, group_id: &str) -> Result<(), ResponseError> {
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
    pub(super) fn check_loaded_any(&self, group_id: &str) -> Result<(), ResponseError> {
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
    pub(super) fn owns(&self, group_id: &str) -> bool {
        self.check_loaded_any(group_id).is_ok()
    }
}

impl<S: GroupStore> Inner<S> {
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
