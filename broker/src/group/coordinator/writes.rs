//! Store writes: each group's queue of appends (a [`WriteTurn`] taken
//! under the state lock, so that writes reach the log, and then the group
//! in memory, in the order they were planned), the writes a transition
//! collected and the lock released ([`Ctx::finish`],
//! [`Inner::spawn_writes`]), and appending a write and applying it to the
//! group once durable ([`GroupCoordinator::apply_write`]).

use std::sync::Arc;

use tokio::sync::oneshot;
use tracing::warn;

use crate::group::classic_group::ClassicGroup;
use crate::group::store::{GroupStore, GroupStoreError, GroupWrite};
use crate::log_value::bounded;

use super::{Ctx, GroupCoordinator, Inner, PlannedEffects, State};

impl State {
    /// The next place in `group_id`'s queue of store writes. Taken under the
    /// state lock when a write is planned, so that writes reach the log, and
    /// then the group in memory, in the order they were planned (for a
    /// connection's pipelined commits: arrival order), whatever order their
    /// tasks happen to run in.
    pub(super) fn write_turn(&mut self, group_id: &str) -> WriteTurn {
        let (done, tail) = oneshot::channel();
        let previous = self.write_tails.insert(group_id.to_string(), tail);
        WriteTurn {
            previous,
            done: Some(done),
        }
    }
}

/// A store write's place in its group's queue (see [`State::write_turn`]).
pub(super) struct WriteTurn {
    /// Resolves (or errs) when the previous write of the group finished.
    previous: Option<oneshot::Receiver<()>>,
    /// Dropped when this write finished, which lets the next one start.
    done: Option<oneshot::Sender<()>>,
}

impl State {
    /// Ends a write's turn (`done` from [`WriteTurn::wait`]) and forgets
    /// the group's queue when no write is left in it.
    pub(super) fn end_turn(&mut self, group_id: &str, done: oneshot::Sender<()>) {
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
    pub(super) async fn wait(mut self) -> oneshot::Sender<()> {
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

impl<S: GroupStore> GroupCoordinator<S> {
    /// Appends `write` in its `turn` and applies `apply` to the group once
    /// it is durable.
    pub(super) async fn apply_write(
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
    /// Writes group metadata that no request waits for (a group that
    /// became Empty; failures are logged as Kafka does), and the writes of
    /// static rejoins, whose answers wait for them.
    pub(super) fn spawn_writes(self: &Arc<Self>, effects: PlannedEffects) {
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
}

impl<S: GroupStore> Ctx<'_, S> {
    /// The collected effects, each write with its place in its group's
    /// queue, taken while the state lock is still held.
    pub(super) fn finish(mut self) -> PlannedEffects {
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
}
