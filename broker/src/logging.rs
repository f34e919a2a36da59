//! What the broker leaves out of its log.
//!
//! openraft reports each RPC to another voter that got no answer, at warn
//! and error level: every replication attempt (then each 500 ms back-off),
//! every heartbeat and every read-confirmation round, about seven lines a
//! second for each voter that is down, for as long as it is down. The
//! quorum transport logs a voter going down, staying down (once a minute)
//! and answering again instead (`weir_controller`'s transport,
//! `reachability`), so [`QuietPeerFailures`] drops openraft's own reports
//! of those failures. Every other openraft warning and error is kept. The
//! layer is on while `RUST_LOG` is unset or does not parse (`main.rs`): a
//! filter of the operator's own shows everything it selects.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// What an openraft event about a failed RPC to a voter carries in one of
/// its fields: the `Display` of openraft's `Unreachable` and `NetworkError`
/// (the two errors Weir's quorum transport returns when a request gets no
/// answer) and of its `Timeout`, and the back-off warning that follows an
/// `Unreachable`.
const PEER_FAILURE_MARKS: [&str; 4] = [
    "Unreachable node: ",
    "NetworkError: ",
    "backoff mode: drain events",
    // openraft's own `Timeout`: it gave up on the RPC at its ttl before
    // the transport did (the transport records that call as unanswered).
    "timeout after ",
];

/// A `tracing` layer that disables openraft's per-request reports of a
/// voter that does not answer (see the module doc); everything else passes.
#[derive(Debug, Clone, Copy, Default)]
pub struct QuietPeerFailures;

impl<S: Subscriber> Layer<S> for QuietPeerFailures {
    fn event_enabled(&self, event: &Event<'_>, _ctx: Context<'_, S>) -> bool {
        !is_openraft_peer_failure(event)
    }
}

fn is_openraft_peer_failure(event: &Event<'_>) -> bool {
    if !event.metadata().target().starts_with("openraft") {
        return false;
    }
    let mut marked = Marked(false);
    event.record(&mut marked);
    marked.0
}

/// Whether any field's text holds one of [`PEER_FAILURE_MARKS`].
struct Marked(bool);

impl Visit for Marked {
    fn record_str(&mut self, _field: &Field, value: &str) {
        self.0 |= PEER_FAILURE_MARKS.iter().any(|m| value.contains(m));
    }

    fn record_debug(&mut self, _field: &Field, value: &dyn fmt::Debug) {
        if !self.0 {
            let text = format!("{value:?}");
            self.0 = PEER_FAILURE_MARKS.iter().any(|m| text.contains(m));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tracing_subscriber::prelude::*;

    use super::*;

    /// Collects the message of every event that reaches it.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<String>>>);

    impl<S: Subscriber> Layer<S> for Seen {
        fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
            struct Message(String);
            impl Visit for Message {
                fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
                    if field.name() == "message" {
                        self.0 = format!("{value:?}");
                    }
                }
            }
            let mut message = Message(String::new());
            event.record(&mut message);
            self.0.lock().unwrap().push(message.0);
        }
    }

    #[test]
    fn openraft_reports_of_a_voter_not_answering_are_dropped_and_nothing_else() {
        let seen = Seen::default();
        let subscriber = tracing_subscriber::registry()
            .with(QuietPeerFailures)
            .with(seen.clone());
        let unreachable = "Unreachable node: voter 3 is unreachable: connecting to \
                           127.0.0.3:9093: Connection refused (os error 111)";
        let network = "NetworkError: request to voter 2 failed: no response within 500 ms";
        let timeout = "timeout after 500ms when AppendEntries 1->3";
        tracing::subscriber::with_default(subscriber, || {
            // As openraft 0.9 logs them (replication/mod.rs, raft_core.rs,
            // replication_handler/mod.rs).
            tracing::error!(target: "openraft::replication", err = %unreachable, "RPCError");
            tracing::warn!(target: "openraft::replication", error = %network,
                "error replication to target={}", 2);
            tracing::error!(target: "openraft::core::raft_core", target = %3, error = %unreachable,
                "timeout while confirming leadership for read request");
            tracing::warn!(target: "openraft::engine::handler::replication_handler",
                "heartbeat error: {}, no update to inflight data", unreachable);
            tracing::warn!(target: "openraft::engine::handler::replication_handler",
                request_id = "HeartBeat", result = %timeout, "update progress error");
            tracing::warn!(target: "openraft::replication", interval = ?Duration::from_millis(500),
                "{} backoff mode: drain events without processing them", "ReplicationCore");
            // Kept: other openraft warnings, and Weir's own report.
            tracing::warn!(target: "openraft::core::raft_core",
                "A message will be ignored because vote changed");
            tracing::error!(target: "openraft::replication", error = "StorageError: disk full",
                "error replication to target={}", 2);
            tracing::warn!(target: "weir_controller::transport", voter = 3, error = %unreachable,
                "a metadata quorum voter does not answer");
        });
        assert_eq!(
            *seen.0.lock().unwrap(),
            [
                "A message will be ignored because vote changed",
                "error replication to target=2",
                "a metadata quorum voter does not answer",
            ]
        );
    }
}
