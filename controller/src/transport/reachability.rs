//! Whether each other voter answers this node, logged when that changes
//! rather than on every failed request.
//!
//! openraft reports every failed RPC itself (at warn and error level: each
//! replication attempt, each heartbeat, each read-confirmation round), about
//! seven lines a second per voter that is down, for as long as it is down.
//! The broker drops those reports from its log (`weir_broker::logging`) and
//! this book, shared by every client of one transport (openraft opens a
//! client per replication stream and per read confirmation, the observer
//! and command forwarding their own), logs instead:
//! - a warning when a voter stops answering (the first failed request
//!   after an answer, or after start), with the reason;
//! - a warning every [`STILL_DOWN_WARNING_INTERVAL`] while it stays so,
//!   with the count of failed requests;
//! - an info line when it answers again, with how long it did not.
//!
//! A peer that fails and answers by turns (timeouts on a slow link) is
//! warned about at most once a minute too: an outage that starts within a
//! minute of the last warning is counted, not logged, and so is its end.
//! An outage whose last failed request is a minute old is over, unseen
//! (nobody asked the peer since, as a follower that stops forwarding to a
//! replaced leader); the next failure starts a new one.
//!
//! Kafka's `NetworkClient` warns once per failed connection attempt
//! ("Connection to node 3 could not be established. Node may not be
//! available."), so about once per `reconnect.backoff.max.ms` (1 s).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Time between two warnings that a voter still does not answer.
pub(crate) const STILL_DOWN_WARNING_INTERVAL: Duration = Duration::from_secs(60);

/// What one request's outcome means for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing to log.
    None,
    /// The peer stopped answering; `unlogged` outages before this one
    /// were not logged (within [`STILL_DOWN_WARNING_INTERVAL`] of a
    /// warning: a peer that fails and answers by turns).
    WentDown { unlogged: u64 },
    /// It still does not answer: `failures` requests failed over `for_`.
    StillDown { failures: u64, for_: Duration },
    /// It answers again after `failures` failed requests, the first and
    /// the last `failing_for` apart (only after a logged outage).
    CameBack {
        failures: u64,
        failing_for: Duration,
    },
}

#[derive(Debug)]
struct Down {
    since: Instant,
    last_failure: Instant,
    failures: u64,
    /// This outage was logged (so its end is).
    logged: bool,
}

#[derive(Debug, Default)]
struct PeerState {
    /// The current outage; one whose last failure is older than
    /// [`STILL_DOWN_WARNING_INTERVAL`] is over, unseen (nobody asked the
    /// peer since: a follower stops forwarding to a replaced leader).
    down: Option<Down>,
    /// When a warning about this peer was last logged.
    last_warning: Option<Instant>,
    /// Outages since then that were not logged.
    unlogged: u64,
}

impl PeerState {
    /// True when no warning about this peer was logged within
    /// [`STILL_DOWN_WARNING_INTERVAL`] before `now`.
    fn warning_due(&self, now: Instant) -> bool {
        self.last_warning
            .is_none_or(|at| now.saturating_duration_since(at) >= STILL_DOWN_WARNING_INTERVAL)
    }
}

/// A peer as its clients name it: the node id ([`super::UNKNOWN_NODE`] for a
/// `controller.quorum.bootstrap.servers` address) and the address dialled.
pub(crate) type Peer = (u64, String);

/// Per peer: its current outage and when it was last warned about.
/// Holds the peers this node has failed to reach (a few addresses).
#[derive(Debug, Default)]
pub(crate) struct Reachability {
    peers: Mutex<HashMap<Peer, PeerState>>,
}

impl Reachability {
    /// Records a request to `peer` that got no answer at `now`.
    pub(crate) fn failed(&self, peer: &Peer, now: Instant) -> Change {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let state = peers.entry(peer.clone()).or_default();
        let warning_due = state.warning_due(now);
        match &mut state.down {
            Some(down)
                if now.saturating_duration_since(down.last_failure)
                    < STILL_DOWN_WARNING_INTERVAL =>
            {
                down.failures += 1;
                down.last_failure = now;
                if !warning_due {
                    return Change::None;
                }
                down.logged = true;
                state.last_warning = Some(now);
                Change::StillDown {
                    failures: down.failures,
                    for_: now.saturating_duration_since(down.since),
                }
            }
            _ => {
                state.down = Some(Down {
                    since: now,
                    last_failure: now,
                    failures: 1,
                    logged: warning_due,
                });
                if warning_due {
                    state.last_warning = Some(now);
                    Change::WentDown {
                        unlogged: std::mem::take(&mut state.unlogged),
                    }
                } else {
                    state.unlogged += 1;
                    Change::None
                }
            }
        }
    }

    /// Records an answer from `peer` at `now`.
    pub(crate) fn answered(&self, peer: &Peer, now: Instant) -> Change {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let Some(state) = peers.get_mut(peer) else {
            return Change::None;
        };
        let change = match state.down.take() {
            Some(down) if down.logged => Change::CameBack {
                failures: down.failures,
                failing_for: down.last_failure.saturating_duration_since(down.since),
            },
            _ => Change::None,
        };
        if state.warning_due(now) && state.unlogged == 0 {
            peers.remove(peer);
        }
        change
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn peers() -> (Peer, Peer) {
        (
            (2, "127.0.0.2:9093".to_owned()),
            (3, "127.0.0.3:9093".to_owned()),
        )
    }

    #[test]
    fn a_voter_going_down_is_reported_once_then_once_a_minute_then_when_back() {
        let book = Reachability::default();
        let (two, three) = &peers();
        let t0 = Instant::now();
        assert_eq!(book.answered(three, t0), Change::None, "up from the start");
        assert_eq!(book.failed(three, t0), Change::WentDown { unlogged: 0 });
        // Seven failures a second for just under a minute: quiet.
        for i in 1..420 {
            let at = t0 + Duration::from_millis(i * 1000 / 7);
            assert_eq!(book.failed(three, at), Change::None, "failure {i}");
        }
        assert_eq!(
            book.failed(three, t0 + 60 * S),
            Change::StillDown {
                failures: 421,
                for_: 60 * S
            }
        );
        assert_eq!(book.failed(three, t0 + 89 * S), Change::None);
        // Another voter is tracked on its own, as is another address.
        assert_eq!(
            book.failed(two, t0 + 61 * S),
            Change::WentDown { unlogged: 0 }
        );
        let moved = &(3, "127.0.0.33:9093".to_owned());
        assert_eq!(
            book.failed(moved, t0 + 61 * S),
            Change::WentDown { unlogged: 0 }
        );
        assert_eq!(
            book.answered(three, t0 + 90 * S),
            Change::CameBack {
                failures: 422,
                failing_for: 89 * S
            }
        );
        assert_eq!(book.answered(three, t0 + 91 * S), Change::None);
        // Down again two minutes after the last warning: a new outage,
        // warned at once.
        assert_eq!(
            book.failed(three, t0 + 121 * S),
            Change::WentDown { unlogged: 0 }
        );
    }

    #[test]
    fn a_voter_failing_and_answering_by_turns_is_warned_about_once_a_minute() {
        let book = Reachability::default();
        let (_, three) = &peers();
        let t0 = Instant::now();
        assert_eq!(book.failed(three, t0), Change::WentDown { unlogged: 0 });
        assert_eq!(
            book.answered(three, t0 + S),
            Change::CameBack {
                failures: 1,
                failing_for: Duration::ZERO
            }
        );
        // Timeouts between answers, every second: neither warned nor
        // reported back until a minute after the last warning.
        for i in 2..60 {
            assert_eq!(book.failed(three, t0 + i * S), Change::None, "second {i}");
            assert_eq!(book.answered(three, t0 + i * S + S / 2), Change::None);
        }
        assert_eq!(
            book.failed(three, t0 + 60 * S),
            Change::WentDown { unlogged: 58 }
        );
    }

    #[test]
    fn an_outage_nobody_followed_up_is_over_after_a_minute_without_failures() {
        let book = Reachability::default();
        let (two, _) = &peers();
        let t0 = Instant::now();
        // A follower's forward to the leader fails; another voter leads
        // and this node does not ask node 2 again for an hour.
        assert_eq!(book.failed(two, t0), Change::WentDown { unlogged: 0 });
        assert_eq!(book.failed(two, t0 + S), Change::None);
        assert_eq!(
            book.failed(two, t0 + 3600 * S),
            Change::WentDown { unlogged: 0 }
        );
        assert_eq!(
            book.answered(two, t0 + 3601 * S),
            Change::CameBack {
                failures: 1,
                failing_for: Duration::ZERO
            }
        );
    }
}
