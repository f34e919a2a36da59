//! The metadata quorum as its leader sees it, for DescribeQuorum (KIP-595,
//! KIP-836): leader, raft term as leader epoch, high watermark and each
//! voter's log end offset and last contact times.
//!
//! openraft pushes entries to followers (Kafka's followers fetch), so
//! "last fetch" is when the leader last got an answer to an AppendEntries
//! (entries or heartbeat) from a follower, and "last caught up" is the last
//! time a follower was known to hold the leader's whole log. Offsets are raft
//! log indexes plus one (Kafka's exclusive end offsets). Owns no Kafka types.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use openraft::{BasicNode, RaftMetrics, ServerState};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// One replica's progress as the leader sees it (DescribeQuorum
/// `ReplicaState`). Timestamps are leader wall-clock milliseconds since the
/// epoch, -1 when unknown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaProgress {
    /// The replica's node id.
    pub replica_id: i32,
    /// The offset after the last metadata record the replica holds
    /// (matched raft index + 1), -1 when unknown.
    pub log_end_offset: i64,
    /// When the replica last answered the leader (for the leader itself:
    /// now), ms.
    pub last_fetch_timestamp_ms: i64,
    /// When the replica last held the leader's whole log (for the leader
    /// itself: now), ms.
    pub last_caught_up_timestamp_ms: i64,
}

/// The quorum as the active controller sees it (DescribeQuorum's partition
/// data for `__cluster_metadata-0`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumDescription {
    /// The active controller (raft leader).
    pub leader_id: i32,
    /// The leader epoch: the raft term the leader was elected in.
    pub leader_epoch: i32,
    /// The offset after the last applied (so committed) metadata record.
    pub high_watermark: i64,
    /// Every voter, the leader included, by id.
    pub voters: Vec<ReplicaProgress>,
    /// Replicas that follow the log without voting: the broker-only nodes
    /// that fetched from this leader during its leadership (their log end
    /// offset is the offset after the image they had).
    pub observers: Vec<ReplicaProgress>,
}

/// How long an observer that stopped fetching stays in DescribeQuorum, ms
/// (Kafka's `LeaderState.OBSERVER_SESSION_TIMEOUT_MS`).
const OBSERVER_SESSION_TIMEOUT_MS: i64 = 300_000;

#[derive(Debug, Clone, Copy)]
struct Contact {
    last_ack_ms: i64,
    last_caught_up_ms: i64,
}

/// Last contact times of the followers, written by the leader's network
/// clients and its metrics watcher.
#[derive(Debug, Default)]
pub(crate) struct ReplicaContacts {
    contacts: Mutex<BTreeMap<u64, Contact>>,
    /// Broker-only nodes that fetched metadata from this node:
    /// `(log end offset, contact)` by node id.
    observers: Mutex<BTreeMap<i32, (i64, Contact)>>,
}

impl ReplicaContacts {
    fn update(&self, target: u64, f: impl FnOnce(&mut Contact)) {
        let mut contacts = self.contacts.lock().unwrap_or_else(|p| p.into_inner());
        f(contacts.entry(target).or_insert(Contact {
            last_ack_ms: -1,
            last_caught_up_ms: -1,
        }));
    }

    /// `target` answered an AppendEntries at `now_ms`.
    pub(crate) fn acked(&self, target: u64, now_ms: i64) {
        self.update(target, |c| c.last_ack_ms = c.last_ack_ms.max(now_ms));
    }

    /// `target` held the leader's whole log at `now_ms`.
    pub(crate) fn caught_up(&self, target: u64, now_ms: i64) {
        self.update(target, |c| {
            c.last_caught_up_ms = c.last_caught_up_ms.max(now_ms)
        });
    }

    /// Observer `node_id` fetched at `now_ms` holding offset `applied`;
    /// `caught_up` when that is everything this leader applied.
    pub(crate) fn observer_fetched(
        &self,
        node_id: i32,
        applied: u64,
        caught_up: bool,
        now_ms: i64,
    ) {
        let mut observers = self.observers.lock().unwrap_or_else(|p| p.into_inner());
        // Observer ids come from the network: forget the silent ones so
        // the map stays bounded by the observers that fetch.
        observers.retain(|_, (_, c)| c.last_ack_ms >= now_ms - OBSERVER_SESSION_TIMEOUT_MS);
        let entry = observers.entry(node_id).or_insert((
            -1,
            Contact {
                last_ack_ms: -1,
                last_caught_up_ms: -1,
            },
        ));
        entry.0 = i64::try_from(applied).unwrap_or(i64::MAX).saturating_add(1);
        entry.1.last_ack_ms = entry.1.last_ack_ms.max(now_ms);
        if caught_up {
            entry.1.last_caught_up_ms = entry.1.last_caught_up_ms.max(now_ms);
        }
    }

    /// Observers that fetched within [`OBSERVER_SESSION_TIMEOUT_MS`] of
    /// `now_ms`.
    fn observers(&self, now_ms: i64) -> Vec<ReplicaProgress> {
        let observers = self.observers.lock().unwrap_or_else(|p| p.into_inner());
        observers
            .iter()
            .filter(|(_, (_, c))| c.last_ack_ms >= now_ms - OBSERVER_SESSION_TIMEOUT_MS)
            .map(|(&id, (end, c))| ReplicaProgress {
                replica_id: id,
                log_end_offset: *end,
                last_fetch_timestamp_ms: c.last_ack_ms,
                last_caught_up_timestamp_ms: c.last_caught_up_ms,
            })
            .collect()
    }

    fn get(&self, target: u64) -> Option<Contact> {
        let contacts = self.contacts.lock().unwrap_or_else(|p| p.into_inner());
        contacts.get(&target).copied()
    }
}

/// Wall-clock milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The quorum from the leader's raft metrics; `None` when `metrics` is not a
/// leader's.
pub(crate) fn describe(
    metrics: &RaftMetrics<u64, BasicNode>,
    contacts: &ReplicaContacts,
    now_ms: i64,
) -> Option<QuorumDescription> {
    if metrics.state != ServerState::Leader {
        return None;
    }
    let replication = metrics.replication.clone().unwrap_or_default();
    let leader_end = metrics.last_log_index.map_or(0, |i| i as i64 + 1);
    let membership = metrics.membership_config.membership();
    let progress = |id: u64| {
        if id == metrics.id {
            return ReplicaProgress {
                replica_id: id as i32,
                log_end_offset: leader_end,
                last_fetch_timestamp_ms: now_ms,
                last_caught_up_timestamp_ms: now_ms,
            };
        }
        let end = replication
            .get(&id)
            .copied()
            .flatten()
            .map_or(-1, |log_id| log_id.index as i64 + 1);
        let contact = contacts.get(id);
        let last_ack = contact.map_or(-1, |c| c.last_ack_ms);
        let mut caught_up = contact.map_or(-1, |c| c.last_caught_up_ms);
        if end == leader_end {
            // Its last answer came while it held the whole log.
            caught_up = caught_up.max(last_ack);
        }
        ReplicaProgress {
            replica_id: id as i32,
            log_end_offset: end,
            last_fetch_timestamp_ms: last_ack,
            last_caught_up_timestamp_ms: caught_up,
        }
    };
    Some(QuorumDescription {
        leader_id: metrics.id as i32,
        leader_epoch: i32::try_from(metrics.current_term).unwrap_or(i32::MAX),
        high_watermark: metrics.last_applied.map_or(0, |l| l.index as i64 + 1),
        voters: membership.voter_ids().map(progress).collect(),
        observers: membership
            .learner_ids()
            .map(progress)
            .chain(contacts.observers(now_ms))
            .collect(),
    })
}

/// Records, while this node leads, when each follower holds the whole log.
/// Ends when the raft instance is dropped.
pub(crate) async fn watch_caught_up(
    mut metrics: watch::Receiver<RaftMetrics<u64, BasicNode>>,
    contacts: std::sync::Arc<ReplicaContacts>,
) {
    loop {
        {
            let m = metrics.borrow_and_update();
            if m.state == ServerState::Leader {
                if let Some(replication) = &m.replication {
                    let now = now_ms();
                    for (id, matched) in replication {
                        if matched.map(|l| l.index) == m.last_log_index {
                            contacts.caught_up(*id, now);
                        }
                    }
                }
            }
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Observer fetches come from the network: any offset is taken without
    /// overflow, and observers silent for the session timeout are dropped
    /// from memory, not only from the answer.
    #[test]
    fn observer_fetches_take_any_offset_and_silent_observers_are_forgotten() {
        let contacts = ReplicaContacts::default();
        contacts.observer_fetched(7, u64::MAX, false, 1_000);
        assert_eq!(contacts.observers(1_000)[0].log_end_offset, i64::MAX);

        let later = 1_000 + OBSERVER_SESSION_TIMEOUT_MS + 1;
        contacts.observer_fetched(8, 5, true, later);
        let held: Vec<i32> = contacts.observers.lock().unwrap().keys().copied().collect();
        assert_eq!(held, vec![8]);
        assert_eq!(contacts.observers(later)[0].log_end_offset, 6);
    }
}
