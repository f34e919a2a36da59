//! Pre-Vote: a voter starts an election only when a majority of the voters
//! would vote for it (Raft dissertation §9.6; KRaft's KIP-996).
//!
//! openraft 0.9 has no Pre-Vote. A voter that stops hearing from the leader
//! (cut off, paused, starved of CPU) raises its term at every election
//! timeout, and when it is heard again its term deposes the leader: the
//! leader steps down on the first answer that carries it, and openraft's
//! leader grants the vote itself once its lease, which dates from its own
//! election, has run out. The metadata quorum then has no leader for an
//! election timeout or more, though nothing was wrong with it.
//!
//! So with several voters openraft's own election timer is off
//! (`Config::enable_elect`) and the elections are started here:
//! - a follower that has heard from no leader for openraft's timeout (the
//!   leader lease plus a random `[election_timeout_min, election_timeout_max)`
//!   after the last contact; the random part alone after a round that won
//!   no majority, or before it has heard of any leader) asks every other
//!   voter whether it would vote for it ([`PreVoteRequest`], which changes
//!   nothing on the voter that answers, its term least of all);
//! - a voter would ([`PreVoteRequest::would_grant`]) when it has heard from
//!   no leader within the lease (openraft's `leader_lease`,
//!   `election_timeout_max`: the real vote would be refused on that ground
//!   too), or, being the leader, no quorum acknowledged it within the lease;
//!   and the asking voter's log is at least as up to date as its own;
//! - with a majority of every voter set (both, in joint consensus), itself
//!   included, the asking voter starts the election (`Trigger::elect`);
//!   without one it asks again a random election timeout later, in the same
//!   term.
//!
//! A candidate's next election, after one that elected nobody, is started
//! by `quorum::break_split_votes`, which asks the same way first.
//!
//! Contact: a voter has heard from a leader when it accepted an
//! AppendEntries or InstallSnapshot of the current term, or granted a vote
//! ([`LeaderContact::heard`], called where `quorum` serves those requests),
//! as openraft refreshes its own lease.
//!
//! A voter that does not know [`QuorumRequest::PreVote`] (an older Weir)
//! closes the connection, which counts as no vote; such a voter still runs
//! openraft's own election timer, so a cluster being upgraded one voter at a
//! time keeps electing leaders.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::{Raft, ServerState};
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::raft::{LogId, MetadataTypeConfig};
use crate::transport::{QuorumRequest, QuorumResponse, QuorumTransport, Route};

/// "Would you vote for me?", from a voter that has heard from no leader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PreVoteRequest {
    /// The asking voter's raft node id.
    pub(crate) candidate: u64,
    /// The term it would stand in (its current term plus one).
    pub(crate) term: u64,
    /// The id of the last entry of its log.
    pub(crate) last_log_id: Option<LogId>,
}

/// The answer to a [`PreVoteRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PreVoteResponse {
    /// True when the voter would grant the vote now.
    pub(crate) granted: bool,
    /// The answering voter's current term.
    pub(crate) term: u64,
}

/// What a voter knows when it answers a [`PreVoteRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VoterView {
    pub(crate) state: ServerState,
    pub(crate) term: u64,
    /// Leader only: milliseconds since a quorum last acknowledged it.
    pub(crate) millis_since_quorum_ack: Option<u64>,
    /// Since this voter last heard from a leader; `None`: never since it
    /// started.
    pub(crate) since_contact: Option<Duration>,
    pub(crate) last_log_id: Option<LogId>,
}

impl PreVoteRequest {
    /// True when a voter that sees `view` would vote for the asker now:
    /// it has heard from no leader within `lease` (a leader: no quorum
    /// acknowledged it within `lease`) and the asker's log is at least as
    /// up to date as its own (openraft's `Engine::handle_vote_req` rules,
    /// without changing anything).
    pub(crate) fn would_grant(&self, view: &VoterView, lease: Duration) -> bool {
        let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
        let leader_alive = match view.state {
            ServerState::Leader => view.millis_since_quorum_ack.is_some_and(|ms| ms < lease_ms),
            _ => view.since_contact.is_some_and(|since| since < lease),
        };
        !leader_alive && self.last_log_id >= view.last_log_id
    }
}

/// When this voter last heard from a leader (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct LeaderContact {
    last: Mutex<Option<Instant>>,
}

impl LeaderContact {
    /// Records contact with a leader now.
    pub(crate) fn heard(&self) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }

    /// The last contact; `None`: none since this voter started.
    pub(crate) fn last(&self) -> Option<Instant> {
        *self.last.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Asks the other voters for their pre-votes and answers theirs.
pub(crate) struct PreVoter {
    raft: Raft<MetadataTypeConfig>,
    raft_id: u64,
    cluster_id: String,
    transport: QuorumTransport,
    /// This node's own `controller.quorum.voters` addresses by raft id.
    voter_addresses: Arc<BTreeMap<u64, String>>,
    pub(crate) contact: Arc<LeaderContact>,
    /// openraft's leader lease: `election_timeout_max`.
    lease: Duration,
    /// How long a round waits for answers: `election_timeout_min`.
    ask_timeout: Duration,
}

impl PreVoter {
    pub(crate) fn new(
        raft: Raft<MetadataTypeConfig>,
        raft_id: u64,
        cluster_id: &str,
        transport: QuorumTransport,
        voter_addresses: Arc<BTreeMap<u64, String>>,
        election_timeout: std::ops::Range<u64>,
    ) -> PreVoter {
        PreVoter {
            raft,
            raft_id,
            cluster_id: cluster_id.to_owned(),
            transport,
            voter_addresses,
            contact: Arc::new(LeaderContact::default()),
            lease: Duration::from_millis(election_timeout.end),
            ask_timeout: Duration::from_millis(election_timeout.start.max(1)),
        }
    }

    /// This voter's answer to `request`.
    pub(crate) fn answer(&self, request: &PreVoteRequest) -> PreVoteResponse {
        let view = self.view();
        let granted = request.would_grant(&view, self.lease);
        tracing::debug!(
            candidate = request.candidate,
            term = request.term,
            granted,
            ?view,
            "pre-vote request"
        );
        PreVoteResponse {
            granted,
            term: view.term,
        }
    }

    fn view(&self) -> VoterView {
        let last_log_id = self.raft.data_metrics().borrow().last_log;
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        VoterView {
            state: m.state,
            term: m.current_term,
            millis_since_quorum_ack: m.millis_since_quorum_ack,
            since_contact: self.contact.last().map(|at| at.elapsed()),
            last_log_id,
        }
    }

    /// Asks every other voter whether it would vote for this one; true when
    /// a majority of every voter set would (this voter included). Waits at
    /// most the ask timeout, less when the outcome is known early.
    /// False as well when this voter heard from a leader while it asked:
    /// an election now would depose it.
    pub(crate) async fn majority_would_vote(&self) -> bool {
        let asked_at = Instant::now();
        let (joint, addresses, request) = {
            let last_log_id = self.raft.data_metrics().borrow().last_log;
            let metrics = self.raft.metrics();
            let m = metrics.borrow();
            let membership = m.membership_config.membership();
            let joint: Vec<BTreeSet<u64>> = membership.get_joint_config().clone();
            // This node's own `controller.quorum.voters` address first, as
            // the raft network's clients (`QuorumNetworkFactory`).
            let addresses: BTreeMap<u64, String> = joint
                .iter()
                .flatten()
                .filter(|&&id| id != self.raft_id)
                .filter_map(|&id| {
                    let addr = self
                        .voter_addresses
                        .get(&id)
                        .or_else(|| membership.get_node(&id).map(|n| &n.addr))?;
                    Some((id, addr.clone()))
                })
                .collect();
            let request = PreVoteRequest {
                candidate: self.raft_id,
                term: m.current_term + 1,
                last_log_id,
            };
            (joint, addresses, request)
        };
        let voters: BTreeSet<u64> = joint.iter().flatten().copied().collect();
        if !voters.contains(&self.raft_id) {
            return false;
        }
        let mut granted = BTreeSet::from([self.raft_id]);
        let mut refused = BTreeSet::new();
        let mut asks = JoinSet::new();
        for &voter in voters.iter().filter(|&&v| v != self.raft_id) {
            let Some(addr) = addresses.get(&voter) else {
                refused.insert(voter);
                continue;
            };
            let mut client = self
                .transport
                .client(Route::new(&self.cluster_id, self.raft_id, voter), addr);
            let (request, timeout) = (request.clone(), self.ask_timeout);
            asks.spawn(async move {
                let answer = client.call(QuorumRequest::PreVote(request), timeout).await;
                let granted = matches!(&answer, Ok(QuorumResponse::PreVote(r)) if r.granted);
                if let Err(e) = &answer {
                    tracing::debug!(voter, error = %e, "no pre-vote answer");
                }
                (voter, granted)
            });
        }
        let majority_of = |votes: &BTreeSet<u64>| {
            joint
                .iter()
                .all(|set| set.iter().filter(|v| votes.contains(v)).count() * 2 > set.len())
        };
        let lost = |refused: &BTreeSet<u64>| {
            joint
                .iter()
                .any(|set| set.iter().filter(|v| refused.contains(v)).count() * 2 >= set.len())
        };
        let deadline = Instant::now() + self.ask_timeout;
        while !majority_of(&granted) && !lost(&refused) {
            match tokio::time::timeout_at(deadline, asks.join_next()).await {
                Ok(Some(Ok((voter, true)))) => {
                    granted.insert(voter);
                }
                Ok(Some(Ok((voter, false)))) => {
                    refused.insert(voter);
                }
                // A panicked ask (none expected) is no vote.
                Ok(Some(Err(_))) => {}
                Ok(None) | Err(_) => break,
            }
        }
        let heard_meanwhile = self.contact.last().is_some_and(|at| at >= asked_at);
        let won = majority_of(&granted) && !heard_meanwhile;
        tracing::debug!(
            term = request.term,
            ?granted,
            ?refused,
            heard_meanwhile,
            won,
            "pre-vote round"
        );
        won
    }
}

/// Starts the elections of a follower voter (see the module doc). Ends when
/// the raft stops.
pub(crate) async fn run_follower_elections(
    pre_voter: Arc<PreVoter>,
    election_timeout: std::ops::Range<u64>,
) {
    use rand::Rng;
    let mut rng = crate::determinism::ThreadRng;
    let raft = pre_voter.raft.clone();
    // Server metrics change with the state, vote, leader or membership
    // only (the full metrics change on every pass of the raft loop); the
    // sender is dropped when the raft stops.
    let mut metrics = raft.server_metrics();
    let min = election_timeout.start.max(1);
    let max = election_timeout.end.max(min + 1);
    // The last round, or this task's start.
    let mut last_round = Instant::now();
    // The timeout drawn for the current base (contact or round).
    let mut drawn: Option<(Instant, Duration)> = None;
    loop {
        let (follower, committed, term) = {
            let m = metrics.borrow_and_update();
            let voter = m
                .membership_config
                .membership()
                .voter_ids()
                .any(|id| id == pre_voter.raft_id);
            (
                voter && m.state == ServerState::Follower,
                m.vote.is_committed(),
                m.vote.leader_id().get_term(),
            )
        };
        if !follower {
            // Timed from when it becomes a follower again.
            last_round = Instant::now();
            drawn = None;
            if metrics.changed().await.is_err() {
                return;
            }
            continue;
        }
        let (base, after_contact) = match pre_voter.contact.last() {
            Some(contact) if contact > last_round => (contact, true),
            _ => (last_round, false),
        };
        let timeout = match drawn {
            Some((at, timeout)) if at == base => timeout,
            _ => {
                let lease = if after_contact && committed {
                    pre_voter.lease
                } else {
                    Duration::ZERO
                };
                let timeout = lease + Duration::from_millis(rng.gen_range(min..max));
                drawn = Some((base, timeout));
                timeout
            }
        };
        let deadline = base + timeout;
        if Instant::now() < deadline {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                changed = metrics.changed() => if changed.is_err() { return },
            }
            continue;
        }
        let won = pre_voter.majority_would_vote().await;
        last_round = Instant::now();
        if !won {
            continue;
        }
        tracing::info!(
            term = term + 1,
            "no leader heard from and a majority of the voters would vote for this one: starting an election"
        );
        if raft.trigger().elect().await.is_err() {
            return;
        }
        // `elect` only queues the command: wait until it took (or something
        // else happened), so this loop does not see the old state again.
        let took = tokio::time::timeout(
            Duration::from_millis(max),
            metrics.wait_for(|m| {
                m.state != ServerState::Follower || m.vote.leader_id().get_term() > term
            }),
        )
        .await;
        if matches!(took, Ok(Err(_))) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    fn log_id(term: u64, index: u64) -> Option<LogId> {
        Some(LogId::new(CommittedLeaderId::new(term, 1), index))
    }

    fn request(last_log_id: Option<LogId>) -> PreVoteRequest {
        PreVoteRequest {
            candidate: 3,
            term: 5,
            last_log_id,
        }
    }

    fn follower(since_contact: Option<Duration>, last_log_id: Option<LogId>) -> VoterView {
        VoterView {
            state: ServerState::Follower,
            term: 4,
            millis_since_quorum_ack: None,
            since_contact,
            last_log_id,
        }
    }

    const LEASE: Duration = Duration::from_millis(2000);

    #[test]
    fn a_follower_that_heard_from_a_leader_within_the_lease_would_not_vote() {
        let view = follower(Some(Duration::from_millis(1999)), log_id(4, 10));
        assert!(!request(log_id(4, 10)).would_grant(&view, LEASE));
        let view = follower(Some(Duration::from_millis(2000)), log_id(4, 10));
        assert!(request(log_id(4, 10)).would_grant(&view, LEASE));
        let view = follower(None, log_id(4, 10));
        assert!(request(log_id(4, 10)).would_grant(&view, LEASE));
    }

    #[test]
    fn a_leader_acknowledged_by_a_quorum_within_the_lease_would_not_vote() {
        let leader = |ack: Option<u64>| VoterView {
            state: ServerState::Leader,
            millis_since_quorum_ack: ack,
            // A leader hears from no other leader.
            ..follower(None, log_id(4, 10))
        };
        assert!(!request(log_id(4, 10)).would_grant(&leader(Some(10)), LEASE));
        assert!(request(log_id(4, 10)).would_grant(&leader(Some(2000)), LEASE));
        assert!(request(log_id(4, 10)).would_grant(&leader(None), LEASE));
    }

    #[test]
    fn a_voter_would_not_vote_for_a_log_behind_its_own() {
        let view = follower(None, log_id(4, 10));
        assert!(!request(log_id(4, 9)).would_grant(&view, LEASE));
        assert!(!request(log_id(3, 11)).would_grant(&view, LEASE));
        assert!(!request(None).would_grant(&view, LEASE));
        assert!(request(log_id(4, 11)).would_grant(&view, LEASE));
        assert!(request(log_id(5, 1)).would_grant(&view, LEASE));
        assert!(request(None).would_grant(&follower(None, None), LEASE));
    }
}
