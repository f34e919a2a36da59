//! The coordinator's timers: the join phase's rebalance timeout and the
//! initial rebalance delay (`group.initial.rebalance.delay.ms`), the
//! pending-sync timeout and each member's session (heartbeat) timeout.
//! A timer is a tokio task sleeping until its deadline; moving a deadline
//! (a heartbeat) only updates the entry, and the task sleeps on. What a
//! fired timer does to its group is here too.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use tokio::time::Instant;
use tracing::info;

use crate::group::classic_group::{ClassicGroupState, SyncGroupResult};
use crate::group::store::GroupStore;
use crate::log_value::bounded;

use super::{Ctx, Inner, MAX_TIMER_MS};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum TimerKey {
    Join(String),
    Sync(String),
    Heartbeat(String, String),
}

impl TimerKey {
    pub(super) fn group_id(&self) -> &str {
        match self {
            TimerKey::Join(g) | TimerKey::Sync(g) | TimerKey::Heartbeat(g, _) => g,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) enum TimerAction {
    CompleteJoin,
    InitialRebalance { delay_ms: u64, remaining_ms: u64 },
    ExpirePendingSync { generation_id: i32 },
    ExpireHeartbeat,
}

pub(super) struct TimerEntry {
    id: u64,
    deadline: Instant,
    wake: Instant,
    action: TimerAction,
}

impl<S: GroupStore> Inner<S> {
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
    pub(super) fn schedule(&mut self, key: TimerKey, delay_ms: u64, action: TimerAction) {
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

    pub(super) fn cancel(&mut self, key: &TimerKey) {
        self.state.timers.remove(key);
    }

    pub(super) fn schedule_heartbeat(&mut self, group_id: &str, member_id: &str, timeout_ms: u64) {
        self.schedule(
            TimerKey::Heartbeat(group_id.to_string(), member_id.to_string()),
            timeout_ms,
            TimerAction::ExpireHeartbeat,
        );
    }

    pub(super) fn cancel_heartbeat(&mut self, group_id: &str, member_id: &str) {
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
}
