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
//!   after the last contact; the random part alone after a granted vote, a
//!   round that won no majority, or when it has no committed vote) asks every other
//!   voter whether it would vote for it ([`PreVoteRequest`], which changes
//!   nothing on the voter that answers, its term least of all);
//! - a voter would ([`PreVoteRequest::would_grant`]) when it has heard from
//!   no leader within the lease (openraft's `leader_lease`,
//!   `election_timeout_max`: the real vote would be refused on that ground
//!   too), or, being the leader, no quorum acknowledged it within the lease
//!   (none yet: elected a moment ago, it would not);
//!   and the asking voter's log is at least as up to date as its own;
//! - with a majority of every voter set (both, in joint consensus), itself
//!   included, the asking voter starts the election (`Trigger::elect`);
//!   without one it asks again a random election timeout later, in the same
//!   term; nor when it heard from a leader, or granted a vote, while it
//!   asked. (openraft handles a request that arrives between that check and
//!   the queued `Trigger::elect` first: a window of one pass of its loop.)
//!
//! A candidate's next election, after one that elected nobody, is started
//! by `quorum::break_split_votes`, which asks the same way first.
//!
//! Contact ([`LeaderContact`], kept where `quorum` serves those requests),
//! as openraft keeps its lease: a voter has heard from a leader when it
//! accepted an AppendEntries or InstallSnapshot of its term, and when it
//! started with a committed vote (openraft dates the lease from its start
//! then); granting a vote resets its own election timer only (openraft's
//! lease refuses real votes only while its vote is committed, and a
//! granted vote is not, so a voter that granted one in a split election
//! still grants the next term's pre-votes).
//!
//! A voter that does not know [`QuorumRequest::PreVote`] (an older Weir)
//! closes the connection unanswered, which counts as its vote
//! ([`counts_as_vote`]): it takes no part in Pre-Vote (and runs openraft's
//! own timer), and its real vote still decides. So a cluster being upgraded
//! one voter at a time keeps electing leaders.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::{Raft, ServerState};
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::raft::{LogId, MetadataTypeConfig};
use crate::transport::{QuorumRequest, QuorumResponse, QuorumTransport, Route, TransportError};

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
    /// Leader, follower, candidate or learner.
    pub(crate) state: ServerState,
    /// Its current raft term.
    pub(crate) term: u64,
    /// Leader only: milliseconds since a quorum last acknowledged it.
    pub(crate) millis_since_quorum_ack: Option<u64>,
    /// Since this voter last heard from a leader; `None`: never since it
    /// started.
    pub(crate) since_contact: Option<Duration>,
    /// The id of the last entry of its log.
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
            // No acknowledgement yet: elected a moment ago by a majority
            // (openraft refuses real votes for a lease after an election).
            ServerState::Leader => view.millis_since_quorum_ack.is_none_or(|ms| ms < lease_ms),
            _ => view.since_contact.is_some_and(|since| since < lease),
        };
        !leader_alive && self.last_log_id >= view.last_log_id
    }
}

/// When this voter last heard from a leader, and when its election timer
/// was last reset (see the module doc).
#[derive(Debug)]
pub(crate) struct LeaderContact {
    times: Mutex<ContactTimes>,
}

#[derive(Debug, Clone, Copy)]
struct ContactTimes {
    /// An AppendEntries or InstallSnapshot of a leader accepted, or this
    /// voter's start with a committed vote (openraft's lease dates from its
    /// start then): pre-votes for others are refused for a lease after it.
    leader: Option<Instant>,
    /// `leader`, or a vote granted: this voter's own next election is timed
    /// from it (Raft's election timer reset).
    timer: Option<Instant>,
}

impl LeaderContact {
    /// A contact that starts now: as a leader's when this voter's stored
    /// vote is committed (it followed a leader before it stopped), else as a
    /// timer reset only.
    pub(crate) fn starting(committed_vote: bool) -> LeaderContact {
        let now = Some(Instant::now());
        LeaderContact {
            times: Mutex::new(ContactTimes {
                leader: now.filter(|_| committed_vote),
                timer: now,
            }),
        }
    }

    fn times(&self) -> std::sync::MutexGuard<'_, ContactTimes> {
        self.times.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records an AppendEntries or InstallSnapshot of a leader accepted now.
    pub(crate) fn heard_from_leader(&self) {
        let now = Some(Instant::now());
        *self.times() = ContactTimes {
            leader: now,
            timer: now,
        };
    }

    /// Records a vote granted now: resets this voter's election timer, and
    /// leaves its answer to pre-votes alone (openraft's lease refuses real
    /// votes only while its vote is committed, which a granted vote is not).
    pub(crate) fn granted_vote(&self) {
        self.times().timer = Some(Instant::now());
    }

    /// When this voter last heard from a leader.
    pub(crate) fn leader(&self) -> Option<Instant> {
        self.times().leader
    }

    /// When this voter's election timer was last reset.
    pub(crate) fn timer(&self) -> Option<Instant> {
        self.times().timer
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
    pub(crate) contact: LeaderContact,
    /// openraft's leader lease: `election_timeout_max`.
    lease: Duration,
    /// How long a round waits for answers: `election_timeout_min`.
    ask_timeout: Duration,
}

impl PreVoter {
    /// The pre-voter of voter `raft_id` of cluster `cluster_id`, asking the
    /// other voters over `transport` at `voter_addresses` (falling back to
    /// the membership's addresses); `election_timeout` is
    /// `[election_timeout_min, election_timeout_max)` in ms (the lease is
    /// its end, a round waits at most its start); `committed_vote`: the
    /// vote stored when it started is committed ([`LeaderContact::starting`]).
    pub(crate) fn new(
        raft: Raft<MetadataTypeConfig>,
        raft_id: u64,
        cluster_id: &str,
        transport: QuorumTransport,
        voter_addresses: Arc<BTreeMap<u64, String>>,
        election_timeout: std::ops::Range<u64>,
        committed_vote: bool,
    ) -> PreVoter {
        PreVoter {
            raft,
            raft_id,
            cluster_id: cluster_id.to_owned(),
            transport,
            voter_addresses,
            contact: LeaderContact::starting(committed_vote),
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
            since_contact: self.contact.leader().map(|at| at.elapsed()),
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
                if let Err(e) = &answer {
                    tracing::debug!(voter, error = %e, "no pre-vote answer");
                }
                (voter, counts_as_vote(&answer))
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
        // The asks still out finish on their own (each within the ask
        // timeout): dropped mid-exchange, a client closes its connection
        // with the answer unread, the kernel resets it, and the voter that
        // answered logs a reset connection (seen in CI, on the voter whose
        // answer came after the majority's).
        asks.detach_all();
        let heard_meanwhile = self.contact.timer().is_some_and(|at| at >= asked_at);
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

/// True when `answer` to a [`PreVoteRequest`] counts as a vote: the voter
/// would vote, or it closed the connection unanswered, as a voter that
/// does not know the request (an older Weir) does: such a voter takes no
/// part in Pre-Vote, and its real vote still decides. Counting it as no
/// vote could leave a cluster being upgraded without a leader for good: an
/// older voter whose log is behind can never win a real vote, and a newer
/// one would never stand without its pre-vote.
fn counts_as_vote(answer: &Result<QuorumResponse, TransportError>) -> bool {
    match answer {
        Ok(QuorumResponse::PreVote(r)) => r.granted,
        Err(e) => e.closed_unanswered(),
        Ok(_) => false,
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
    // The last round, or when this voter last became a follower.
    let mut last_round: Option<Instant> = None;
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
            last_round = Some(Instant::now());
            drawn = None;
            if metrics.changed().await.is_err() {
                return;
            }
            continue;
        }
        let (base, after_contact) = match (pre_voter.contact.timer(), last_round) {
            (Some(reset), Some(round)) if reset <= round => (round, false),
            (Some(reset), _) => (reset, true),
            (None, Some(round)) => (round, false),
            (None, None) => {
                let now = Instant::now();
                last_round = Some(now);
                (now, false)
            }
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
        last_round = Some(Instant::now());
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
        assert!(!request(log_id(4, 10)).would_grant(&leader(None), LEASE));
    }

    #[tokio::test(start_paused = true)]
    async fn a_granted_vote_resets_the_election_timer_and_leaves_pre_votes_alone() {
        let contact = LeaderContact::starting(false);
        let started = contact.timer();
        assert_eq!(contact.leader(), None);
        tokio::time::advance(Duration::from_millis(10)).await;
        // A voter that granted a vote in a split election still grants
        // pre-votes of the next term (openraft's lease does not refuse the
        // real vote then: its vote is not committed).
        contact.granted_vote();
        assert!(contact.timer() > started);
        assert_eq!(contact.leader(), None);
        tokio::time::advance(Duration::from_millis(10)).await;
        contact.heard_from_leader();
        assert_eq!(contact.leader(), contact.timer());
        assert!(contact.leader().is_some());
    }

    /// openraft dates a restarted voter's lease from its start when its
    /// stored vote is committed, and refuses real votes until it runs out;
    /// pre-votes alike, or a voter cut off from the leader would win a
    /// pre-vote from a restarted one, raise its term and lose the real vote.
    #[tokio::test(start_paused = true)]
    async fn a_voter_started_with_a_committed_vote_refuses_pre_votes_for_a_lease() {
        let contact = LeaderContact::starting(true);
        assert!(contact.leader().is_some());
        let since = contact.leader().map(|at| at.elapsed());
        let view = follower(since, log_id(4, 10));
        assert!(!request(log_id(4, 10)).would_grant(&view, LEASE));
        assert_eq!(LeaderContact::starting(false).leader(), None);
    }

    /// A voter of an older Weir reads the PreVote frame, cannot decode its
    /// kind and closes the connection: that counts as its vote, or a newer
    /// voter could never stand beside an older one whose log is behind (a
    /// review found such a cluster left without a leader for good). No
    /// answer at all, or a refusal, is no vote.
    #[tokio::test]
    async fn a_voter_that_closes_the_connection_unanswered_counts_as_a_vote() {
        use futures::StreamExt;
        use tokio::net::TcpListener;
        use tokio_util::codec::Framed;

        let ask = |addr: String| async move {
            let mut client = QuorumTransport::tcp_dial_only().client(Route::new("c", 1, 2), &addr);
            let request = QuorumRequest::PreVote(request(log_id(4, 10)));
            client.call(request, Duration::from_secs(5)).await
        };

        // An older voter: reads one frame, closes.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let old_voter = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut framed = Framed::new(stream, crate::transport::codec());
            framed.next().await.unwrap().unwrap();
        });
        let answer = ask(addr).await;
        old_voter.await.unwrap();
        assert!(counts_as_vote(&answer), "{answer:?}");

        // Nothing listening: no vote.
        let addr = {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            l.local_addr().unwrap().to_string()
        };
        let answer = ask(addr).await;
        assert!(answer.is_err());
        assert!(!counts_as_vote(&answer), "{answer:?}");

        let refused = Ok(QuorumResponse::PreVote(PreVoteResponse {
            granted: false,
            term: 4,
        }));
        assert!(!counts_as_vote(&refused));
        assert!(!counts_as_vote(&Ok(QuorumResponse::Refused(
            "other cluster".into()
        ))));
        let granted = Ok(QuorumResponse::PreVote(PreVoteResponse {
            granted: true,
            term: 4,
        }));
        assert!(counts_as_vote(&granted));
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
