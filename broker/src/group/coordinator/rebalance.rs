//! The classic group protocol's membership state machine (Kafka's
//! `GroupMetadataManager` for classic groups, KIP-345/394/429): JoinGroup,
//! SyncGroup, Heartbeat and LeaveGroup, static members, preparing and
//! completing a rebalance, and propagating the leader's assignment.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;
use tracing::warn;

use crate::error::group_metadata_store_error;
use crate::group::classic_group::{
    ClassicGroup, ClassicGroupMember, ClassicGroupState, JoinGroupResult, SyncGroupResult,
};
use crate::group::store::{GroupStore, GroupStoreError, GroupWrite};
use crate::log_value::bounded;

use super::timers::{TimerAction, TimerKey};
use super::{
    Ctx, GroupCoordinator, JoinGroupParams, StaticRejoin, SyncGroupParams,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
};

/// A member's settings before a static rejoin replaced them.
pub(super) struct MemberSettings {
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
}

impl<S: GroupStore> Ctx<'_, S> {
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
    pub(super) fn on_static_rejoin_stored(
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

    pub(super) fn prepare_rebalance(&mut self, group_id: &str) {
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

    /// Ends the join phase: drops dynamic members that did not rejoin,
    /// starts the next generation and answers every parked JoinGroup.
    pub(super) fn complete_join(&mut self, group_id: &str) {
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

    pub(super) fn maybe_complete_after_pending_removed(&mut self, group_id: &str) {
        if self.group(group_id).is_some_and(|g| {
            g.state == ClassicGroupState::PreparingRebalance && g.has_all_members_joined()
        }) {
            self.complete_join(group_id);
        }
    }

    /// Kafka's `removeMemberAndUpdateClassicGroup`.
    pub(super) fn remove_member_and_update(&mut self, group_id: &str, member_id: &str) {
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
