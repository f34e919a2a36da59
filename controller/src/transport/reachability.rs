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
    /// The voter stopped answering.
    WentDown,
    /// It still does not answer: `failures` requests failed over `for_`.
    StillDown { failures: u64, for_: Duration },
    /// It answers again after `failures` failed requests over `for_`.
    CameBack { failures: u64, for_: Duration },
}

#[derive(Debug)]
struct Down {
    since: Instant,
    failures: u64,
    last_warning: Instant,
}

/// A peer as its clients name it: the node id ([`super::UNKNOWN_NODE`] for a
/// `controller.quorum.bootstrap.servers` address) and the address dialled.
pub(crate) type Peer = (u64, String);

/// Per peer: since when it has not answered (absent: it answers).
#[derive(Debug, Default)]
pub(crate) struct Reachability {
    down: Mutex<HashMap<Peer, Down>>,
}

impl Reachability {
    /// Records a request to `peer` that got no answer at `now`.
    pub(crate) fn failed(&self, peer: &Peer, now: Instant) -> Change {
        let mut down = self.down.lock().unwrap_or_else(|e| e.into_inner());
        match down.get_mut(peer) {
            None => {
                down.insert(
                    peer.clone(),
                    Down {
                        since: now,
                        failures: 1,
                        last_warning: now,
                    },
                );
                Change::WentDown
            }
            Some(d) => {
                d.failures += 1;
                if now.saturating_duration_since(d.last_warning) >= STILL_DOWN_WARNING_INTERVAL {
                    d.last_warning = now;
                    Change::StillDown {
                        failures: d.failures,
                        for_: now.saturating_duration_since(d.since),
                    }
                } else {
                    Change::None
                }
            }
        }
    }

    /// Records an answer from `peer` at `now`.
    pub(crate) fn answered(&self, peer: &Peer, now: Instant) -> Change {
        let mut down = self.down.lock().unwrap_or_else(|e| e.into_inner());
        match down.remove(peer) {
            None => Change::None,
            Some(d) => Change::CameBack {
                failures: d.failures,
                for_: now.saturating_duration_since(d.since),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_voter_going_down_is_reported_once_then_once_a_minute_then_when_back() {
        let book = Reachability::default();
        let (two, three) = (
            &(2, "127.0.0.2:9093".to_owned()),
            &(3, "127.0.0.3:9093".to_owned()),
        );
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        assert_eq!(book.answered(three, t0), Change::None, "up from the start");
        assert_eq!(book.failed(three, t0), Change::WentDown);
        // Seven failures a second for just under a minute: quiet.
        for i in 1..420 {
            let at = t0 + Duration::from_millis(i * 1000 / 7);
            assert_eq!(book.failed(three, at), Change::None, "failure {i}");
        }
        assert_eq!(
            book.failed(three, t0 + 60 * s),
            Change::StillDown {
                failures: 421,
                for_: 60 * s
            }
        );
        assert_eq!(book.failed(three, t0 + 61 * s), Change::None);
        // Another voter is tracked on its own, as is another address.
        assert_eq!(book.failed(two, t0 + 61 * s), Change::WentDown);
        let moved = &(3, "127.0.0.33:9093".to_owned());
        assert_eq!(book.failed(moved, t0 + 61 * s), Change::WentDown);
        assert_eq!(
            book.answered(three, t0 + 90 * s),
            Change::CameBack {
                failures: 422,
                for_: 90 * s
            }
        );
        assert_eq!(book.answered(three, t0 + 91 * s), Change::None);
        // Down again: a new outage, warned at once.
        assert_eq!(book.failed(three, t0 + 92 * s), Change::WentDown);
    }
}
