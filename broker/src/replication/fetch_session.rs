//! The follower's side of incremental fetch sessions (KIP-227): Kafka's
//! `org.apache.kafka.clients.FetchSessionHandler`, one per fetcher and
//! leader connection.
//!
//! The first Fetch is full with metadata `(0, 0)`, naming every partition;
//! a leader that creates a session answers its id, and the next Fetch is
//! `(id, 1)`. An incremental Fetch names only the partitions added or whose
//! request changed (fetch offset, log start offset, leader epochs, max
//! bytes) since the last one, and forgets (`forgotten_topics_data`) those
//! no longer fetched (removed from this fetcher, or backing off after an
//! error). Partitions the leader leaves out of an incremental answer have
//! nothing new.
//!
//! After FETCH_SESSION_ID_NOT_FOUND the next Fetch is `(0, 0)`; after any
//! other top-level error or a failed connection it is `(id, 0)`, a full
//! fetch that closes the old session and creates a new one (Kafka's
//! `nextCloseExisting`). A full answer with session id 0 (a leader that
//! keeps no session for us) keeps every Fetch full.
//!
//! This module does no I/O: the fetcher asks it what to send and tells it
//! how the leader answered.

use std::collections::HashMap;

use kafka_protocol::ResponseError;
use uuid::Uuid;

use crate::fetch_session::{next_epoch, PartitionRequest, INITIAL_EPOCH, INVALID_SESSION_ID};

/// A partition of a follower's session: topic id and partition index.
pub type SessionPartition = (Uuid, i32);

/// What the next Fetch carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchRequestData {
    /// `session_id`.
    pub session_id: i32,
    /// `session_epoch`.
    pub epoch: i32,
    /// Partitions to name: all in a full fetch, else those added or changed.
    pub to_send: Vec<(SessionPartition, PartitionRequest)>,
    /// Partitions to forget (incremental fetches only), sorted.
    pub to_forget: Vec<SessionPartition>,
}

/// Kafka's `FetchSessionHandler`: the session with one leader as this
/// follower believes the leader holds it. The default has no session
/// ([`INVALID_SESSION_ID`]) and a full next Fetch ([`INITIAL_EPOCH`]),
/// both 0.
#[derive(Debug, Default)]
pub struct FetchSessionHandler {
    /// The session id (0: none).
    session_id: i32,
    /// The epoch of the next Fetch: 0 for a full one.
    next_epoch: i32,
    /// The session's partitions as last sent, with the round that last
    /// named them.
    session_partitions: HashMap<SessionPartition, (PartitionRequest, u64)>,
    /// Rounds built.
    round: u64,
}

impl FetchSessionHandler {
    /// Whether the next Fetch is full.
    pub fn next_is_full(&self) -> bool {
        self.next_epoch == INITIAL_EPOCH
    }

    /// Kafka's `FetchSessionHandler.Builder.build`: the next Fetch for the
    /// partitions to fetch now (`next`, in order). The session then holds
    /// exactly `next`.
    pub fn build(&mut self, next: Vec<(SessionPartition, PartitionRequest)>) -> FetchRequestData {
        self.round += 1;
        let round = self.round;
        let full = self.next_is_full();
        if full {
            self.session_partitions = next.iter().map(|&(k, r)| (k, (r, round))).collect();
            return FetchRequestData {
                session_id: self.session_id,
                epoch: self.next_epoch,
                to_send: next,
                to_forget: Vec::new(),
            };
        }
        let mut to_send = Vec::new();
        for (key, request) in next {
            match self.session_partitions.insert(key, (request, round)) {
                Some((previous, _)) if previous == request => {}
                _ => to_send.push((key, request)),
            }
        }
        let mut to_forget = Vec::new();
        self.session_partitions.retain(|key, (_, named)| {
            let keep = *named == round;
            if !keep {
                to_forget.push(*key);
            }
            keep
        });
        to_forget.sort_unstable();
        FetchRequestData {
            session_id: self.session_id,
            epoch: self.next_epoch,
            to_send,
            to_forget,
        }
    }

    /// [`FetchSessionHandler::build`] of an incremental Fetch when the
    /// partitions fetched are those of the last Fetch and only `changed`
    /// may hold a new request: names those whose request differs from the
    /// one the session holds, forgets nothing, in O(`changed`). The caller
    /// uses [`FetchSessionHandler::build`] instead when the next Fetch is
    /// full or the set of partitions changed.
    pub fn build_changed(
        &mut self,
        changed: Vec<(SessionPartition, PartitionRequest)>,
    ) -> FetchRequestData {
        debug_assert!(!self.next_is_full(), "a full Fetch names every partition");
        let round = self.round;
        let mut to_send = Vec::new();
        for (key, request) in changed {
            match self.session_partitions.insert(key, (request, round)) {
                Some((previous, _)) if previous == request => {}
                _ => to_send.push((key, request)),
            }
        }
        FetchRequestData {
            session_id: self.session_id,
            epoch: self.next_epoch,
            to_send,
            to_forget: Vec::new(),
        }
    }

    /// Kafka's `handleResponse`: moves the session on after the leader's
    /// answer to the last built Fetch (`error_code` and `session_id` of the
    /// response). Returns false when the answer is a session error (its
    /// partitions, if any, are not to be processed); the next Fetch is then
    /// full.
    pub fn handle_response(&mut self, error_code: i16, session_id: i32) -> bool {
        if error_code != 0 {
            if error_code == ResponseError::FetchSessionIdNotFound.code() {
                self.session_id = INVALID_SESSION_ID;
            }
            self.next_epoch = INITIAL_EPOCH;
            return false;
        }
        if session_id == INVALID_SESSION_ID {
            // No session (a full answer), or the leader closed it.
            self.session_id = INVALID_SESSION_ID;
            self.next_epoch = INITIAL_EPOCH;
        } else if self.next_is_full() {
            self.session_id = session_id;
            self.next_epoch = next_epoch(INITIAL_EPOCH);
        } else {
            self.next_epoch = next_epoch(self.next_epoch);
        }
        true
    }

    /// Kafka's `handleError`: the Fetch got no answer (the connection
    /// failed); the next one is full and closes the session.
    pub fn handle_error(&mut self) {
        self.next_epoch = INITIAL_EPOCH;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::fetch_session::tests::request;

    const T: Uuid = Uuid::from_u128(1);

    fn sent(data: &FetchRequestData) -> Vec<(i32, i64)> {
        data.to_send
            .iter()
            .map(|((_, p), r)| (*p, r.fetch_offset))
            .collect()
    }

    /// Full `(0, 0)`, then `(id, 1)` naming only the changed partition and
    /// forgetting the dropped one, then `(id, 2)` naming nothing.
    #[test]
    fn incremental_fetches_name_only_what_changed() {
        let mut session = FetchSessionHandler::default();
        let next = |offsets: &[(i32, i64)]| -> Vec<(SessionPartition, PartitionRequest)> {
            offsets.iter().map(|&(p, o)| ((T, p), request(o))).collect()
        };
        let data = session.build(next(&[(0, 0), (1, 0), (2, 0)]));
        assert_eq!((data.session_id, data.epoch), (0, 0));
        assert_eq!(sent(&data), vec![(0, 0), (1, 0), (2, 0)]);
        assert!(session.handle_response(0, 42));

        let data = session.build(next(&[(0, 0), (1, 7), (3, 0)]));
        assert_eq!((data.session_id, data.epoch), (42, 1));
        assert_eq!(sent(&data), vec![(1, 7), (3, 0)]);
        assert_eq!(data.to_forget, vec![(T, 2)]);
        assert!(session.handle_response(0, 42));

        let data = session.build(next(&[(0, 0), (1, 7), (3, 0)]));
        assert_eq!((data.session_id, data.epoch), (42, 2));
        assert!(data.to_send.is_empty() && data.to_forget.is_empty());
        assert!(session.handle_response(0, 42));
    }

    /// FETCH_SESSION_ID_NOT_FOUND restarts with `(0, 0)`; another session
    /// error or a lost connection with `(id, 0)`; a full answer without a
    /// session keeps fetches full.
    #[test]
    fn session_errors_and_lost_connections_fall_back_to_full_fetches() {
        let mut session = FetchSessionHandler::default();
        let all = vec![((T, 0), request(0)), ((T, 1), request(0))];
        session.build(all.clone());
        assert!(session.handle_response(0, 42));
        session.build(all.clone());
        assert!(!session.handle_response(ResponseError::InvalidFetchSessionEpoch.code(), 0));
        let data = session.build(all.clone());
        assert_eq!(
            (data.session_id, data.epoch, data.to_send.len()),
            (42, 0, 2)
        );
        assert!(session.handle_response(0, 43));

        session.build(all.clone());
        session.handle_error();
        let data = session.build(all.clone());
        assert_eq!(
            (data.session_id, data.epoch, data.to_send.len()),
            (43, 0, 2)
        );
        assert!(session.handle_response(0, 44));

        session.build(all.clone());
        assert!(!session.handle_response(ResponseError::FetchSessionIdNotFound.code(), 0));
        let data = session.build(all.clone());
        assert_eq!((data.session_id, data.epoch, data.to_send.len()), (0, 0, 2));
        assert!(session.handle_response(0, 0));
        let data = session.build(all);
        assert_eq!((data.session_id, data.epoch, data.to_send.len()), (0, 0, 2));
    }
}
