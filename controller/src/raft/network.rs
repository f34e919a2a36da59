//! The network seam between metadata quorum voters (openraft's
//! `RaftNetworkFactory`) over a [`QuorumTransport`].
//!
//! Each client sends raft RPCs as [`QuorumRequest`] frames. Failures never
//! panic: a request that was not sent is `Unreachable` (openraft backs off),
//! one that got no valid answer is a `NetworkError` (openraft retries), and
//! an error the remote raft returned is a `RemoteError`. With
//! [`QuorumTransport::single_voter`] every client is unreachable; a
//! one-voter quorum never calls one.

use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError,
    Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;

use std::collections::BTreeMap;
use std::sync::Arc;

use super::MetadataTypeConfig;
use crate::quorum_state::{now_ms, ReplicaContacts};
use crate::transport::{
    PeerClient, QuorumRequest, QuorumResponse, QuorumTransport, Route, TransportError,
    MAX_FRAME_BYTES,
};

/// The most entry bytes (as encoded) one AppendEntries carries: the frame
/// limit less room for the request's other fields.
pub(crate) const MAX_APPEND_ENTRIES_BYTES: usize = MAX_FRAME_BYTES - 64 * 1024;

/// How many of `rpc`'s first entries fit in [`MAX_APPEND_ENTRIES_BYTES`]
/// as encoded, when not all do (at least 1: a single entry is sent as it
/// is); `None` when they all fit or there is only one. openraft batches
/// up to `max_payload_entries` entries, and a voter that lags behind
/// creations of 1,000 partitions each (an entry of hundreds of KiB) would
/// otherwise get a frame over the limit again and again and never catch up
/// (issue 18, 100,000 partitions). Entries are counted with the observer's
/// `json_len`, as the transport encodes them.
fn entries_that_fit(rpc: &AppendEntriesRequest<MetadataTypeConfig>) -> Option<u64> {
    if rpc.entries.len() < 2 {
        return None;
    }
    let mut total = 0usize;
    for (i, entry) in rpc.entries.iter().enumerate() {
        total = total.saturating_add(crate::observer::json_len(entry).saturating_add(1));
        if total > MAX_APPEND_ENTRIES_BYTES {
            return Some(i.max(1) as u64);
        }
    }
    None
}

/// Creates clients from this voter to the others.
#[derive(Clone)]
pub(crate) struct QuorumNetworkFactory {
    /// This voter's cluster id (see [`Route`]).
    cluster_id: String,
    node_id: u64,
    transport: QuorumTransport,
    contacts: Arc<ReplicaContacts>,
    /// This node's own `controller.quorum.voters` addresses by voter id:
    /// they win over the addresses in the replicated membership, which are
    /// the initializing voter's view (as Kafka, each node uses its own
    /// config to reach the others).
    voter_addresses: Arc<BTreeMap<u64, String>>,
    /// Clients openraft dropped, by (voter, address), for its next ones
    /// (see [`VoterClient`]).
    idle: Arc<IdleClients>,
    /// See [`SplitTerms`].
    split_terms: Arc<SplitTerms>,
}

/// The highest raft term in which a rival candidate refused this voter's
/// vote request because it had voted for itself in that same term: the
/// election split (0: none seen). Written by [`VoterClient::vote`], read by
/// the split-vote breaker (`quorum::break_split_votes`), which then backs
/// this candidate off a random delay before its next election.
pub(crate) type SplitTerms = tokio::sync::watch::Sender<u64>;

/// Idle clients (and their open connections) by (voter, address).
type IdleClients = std::sync::Mutex<BTreeMap<(u64, String), Vec<PeerClient>>>;

/// How many idle clients are kept per voter: openraft's leadership checks
/// run one at a time per voter, replication streams keep their own.
const MAX_IDLE_CLIENTS_PER_VOTER: usize = 2;

impl std::fmt::Debug for QuorumNetworkFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumNetworkFactory")
            .field("node_id", &self.node_id)
            .field("voter_addresses", &self.voter_addresses)
            .finish_non_exhaustive()
    }
}

impl QuorumNetworkFactory {
    pub(crate) fn new(
        cluster_id: &str,
        node_id: u64,
        transport: QuorumTransport,
        voter_addresses: Arc<BTreeMap<u64, String>>,
    ) -> Self {
        QuorumNetworkFactory {
            cluster_id: cluster_id.to_owned(),
            node_id,
            transport,
            contacts: Arc::default(),
            voter_addresses,
            idle: Arc::default(),
            split_terms: Arc::new(SplitTerms::new(0)),
        }
    }

    /// Follows [`SplitTerms`]: the terms in which this voter's vote split.
    pub(crate) fn split_terms(&self) -> tokio::sync::watch::Receiver<u64> {
        self.split_terms.subscribe()
    }

    /// When each voter last answered an AppendEntries from this node.
    pub(crate) fn contacts(&self) -> Arc<ReplicaContacts> {
        self.contacts.clone()
    }
}

/// A client to one voter. openraft makes one per replication stream, vote
/// round and leadership check (`ensure_linearizable` sends a heartbeat
/// round with new clients); a dropped client's [`PeerClient`], with its
/// open (TLS, authenticated) connection, goes back to the factory for the
/// next client to that voter instead of being closed.
pub(crate) struct VoterClient {
    /// `None` only while being dropped.
    client: Option<PeerClient>,
    /// (voter, address): where the client goes back to.
    key: (u64, String),
    idle: Arc<IdleClients>,
    contacts: Arc<ReplicaContacts>,
    split_terms: Arc<SplitTerms>,
}

impl VoterClient {
    fn peer(&mut self) -> Result<&mut PeerClient, TransportError> {
        let target = self.key.0;
        self.client
            .as_mut()
            .ok_or_else(|| TransportError::Unreachable {
                target,
                reason: "client dropped".into(),
            })
    }
}

impl Drop for VoterClient {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        let clients = idle.entry(std::mem::take(&mut self.key)).or_default();
        if clients.len() < MAX_IDLE_CLIENTS_PER_VOTER {
            clients.push(client);
        }
    }
}

fn rpc_error<E: std::error::Error>(e: TransportError) -> RPCError<u64, BasicNode, E> {
    match e {
        // A node of another cluster at the voter's address is as good as
        // none: openraft backs off.
        TransportError::Unreachable { .. } | TransportError::Refused { .. } => {
            RPCError::Unreachable(Unreachable::new(&e))
        }
        // A single entry too large for a frame (the controller writes none
        // since batches are bounded, `quorum::MAX_BATCH_BYTES`); more
        // entries than fit are cut down before (`entries_that_fit`).
        TransportError::Network { .. } | TransportError::TooLarge { .. } => {
            RPCError::Network(NetworkError::new(&e))
        }
    }
}

fn mismatched<E: std::error::Error>(
    target: u64,
    got: &QuorumResponse,
) -> RPCError<u64, BasicNode, E> {
    let e = TransportError::Network {
        target,
        reason: format!("response of the wrong kind: {got:?}"),
    };
    RPCError::Network(NetworkError::new(&e))
}

impl RaftNetworkFactory<MetadataTypeConfig> for QuorumNetworkFactory {
    type Network = VoterClient;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Self::Network {
        let addr = self.voter_addresses.get(&target).unwrap_or(&node.addr);
        let key = (target, addr.clone());
        let pooled = self
            .idle
            .lock()
            .ok()
            .and_then(|mut idle| idle.get_mut(&key).and_then(Vec::pop));
        VoterClient {
            client: Some(pooled.unwrap_or_else(|| {
                let route = Route::new(&self.cluster_id, self.node_id, target);
                self.transport.client(route, addr)
            })),
            key,
            idle: self.idle.clone(),
            contacts: self.contacts.clone(),
            split_terms: self.split_terms.clone(),
        }
    }
}

impl RaftNetwork<MetadataTypeConfig> for VoterClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<MetadataTypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let target = self.key.0;
        if let Some(fit) = entries_that_fit(&rpc) {
            // openraft sends fewer entries at once and retries at once.
            return Err(RPCError::PayloadTooLarge(
                PayloadTooLarge::new_entries_hint(fit),
            ));
        }
        match self
            .peer()
            .map_err(rpc_error)?
            .call(QuorumRequest::AppendEntries(rpc), option.hard_ttl())
            .await
            .map_err(rpc_error)?
        {
            QuorumResponse::AppendEntries(r) => {
                self.contacts.acked(target, now_ms());
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(target, e)))
            }
            other => Err(mismatched(target, &other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<MetadataTypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>,
    > {
        let target = self.key.0;
        match self
            .peer()
            .map_err(rpc_error)?
            .call(QuorumRequest::InstallSnapshot(rpc), option.hard_ttl())
            .await
            .map_err(rpc_error)?
        {
            QuorumResponse::InstallSnapshot(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(target, e)))
            }
            other => Err(mismatched(target, &other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let target = self.key.0;
        let asked = VoteRequest::new(rpc.vote, rpc.last_log_id);
        match self
            .peer()
            .map_err(rpc_error)?
            .call(QuorumRequest::Vote(rpc), option.hard_ttl())
            .await
            .map_err(rpc_error)?
        {
            QuorumResponse::Vote(r) => {
                if let Ok(answer) = &r {
                    if is_rival_candidate(target, &asked, answer) {
                        let term = asked.vote.leader_id.term;
                        self.split_terms.send_if_modified(|seen| {
                            let newer = term > *seen;
                            if newer {
                                *seen = term;
                            }
                            newer
                        });
                    }
                }
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(target, e)))
            }
            other => Err(mismatched(target, &other)),
        }
    }
}

/// Whether `answer`, from voter `target` to this voter's vote request
/// `asked`, refuses it because `target` is itself a candidate of the same
/// term (it voted for itself, and its vote is not yet a leader's) whose log
/// is no longer than this voter's: the election split, and this voter
/// could win the next one. Not one: a refusal by a live leader's lease (a
/// committed vote), by a voter of another term or one that voted for a
/// third voter, and a rival with a longer log (openraft refuses for the log
/// first and answers with its vote all the same; this voter cannot win,
/// and openraft delays its next election itself, `smaller_log_timeout`).
fn is_rival_candidate(target: u64, asked: &VoteRequest<u64>, answer: &VoteResponse<u64>) -> bool {
    !answer.vote_granted
        && !answer.vote.committed
        && answer.vote.leader_id.term == asked.vote.leader_id.term
        && answer.vote.leader_id.voted_for == Some(target)
        && answer.last_log_id <= asked.last_log_id
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::FutureExt;

    use super::*;

    fn entry_of_bytes(index: u64, bytes: usize) -> openraft::Entry<MetadataTypeConfig> {
        use crate::records::{ConfigRecord, ConfigResourceType, MetadataRecord};
        openraft::Entry {
            log_id: openraft::LogId::new(openraft::CommittedLeaderId::new(1, 1), index),
            payload: openraft::EntryPayload::Normal(crate::raft::MetadataBatch {
                records: vec![MetadataRecord::Config(ConfigRecord {
                    resource_type: ConfigResourceType::Topic,
                    resource_name: "orders".into(),
                    name: "message.timestamp.type".into(),
                    value: Some("x".repeat(bytes)),
                })],
            }),
        }
    }

    /// Issue 18: at 100,000 partitions a lagging voter got AppendEntries
    /// of up to 300 entries of hundreds of KiB each, over the 16 MiB frame
    /// limit ("frame size too big") on every retry, and the quorum lost it
    /// for good. Too many entry bytes now answer PayloadTooLarge with how
    /// many entries fit, which openraft sends instead.
    #[tokio::test]
    async fn append_entries_over_the_frame_limit_asks_openraft_for_fewer_entries() {
        let mut factory =
            QuorumNetworkFactory::new("c", 1, QuorumTransport::single_voter(), Arc::default());
        let mut client = factory.new_client(2, &BasicNode::default()).await;
        let option = RPCOption::new(Duration::from_millis(10));
        let request = |entries: Vec<openraft::Entry<MetadataTypeConfig>>| AppendEntriesRequest {
            vote: openraft::Vote::new(1, 1),
            prev_log_id: None,
            entries,
            leader_commit: None,
        };
        let entry_bytes = MAX_APPEND_ENTRIES_BYTES / 5;
        let big: Vec<_> = (1..=12).map(|i| entry_of_bytes(i, entry_bytes)).collect();
        let err = client
            .append_entries(request(big), option.clone())
            .await
            .unwrap_err();
        match err {
            RPCError::PayloadTooLarge(too_large) => assert_eq!(too_large.entries_hint(), 4),
            other => panic!("{other}"),
        }
        // What fits goes to the transport (here: unreachable, one voter).
        let fits: Vec<_> = (1..=4).map(|i| entry_of_bytes(i, entry_bytes)).collect();
        let err = client
            .append_entries(request(fits), option.clone())
            .await
            .unwrap_err();
        assert!(matches!(err, RPCError::Unreachable(_)), "{err}");
        // A single entry is never split.
        let one = vec![entry_of_bytes(1, MAX_APPEND_ENTRIES_BYTES)];
        let err = client
            .append_entries(request(one), option)
            .await
            .unwrap_err();
        assert!(matches!(err, RPCError::Unreachable(_)), "{err}");
    }

    /// openraft makes a client per target for each leadership check
    /// (`ensure_linearizable`, a heartbeat round) and drops it after one
    /// call; each of those dialled (TLS, SASL) and closed a connection
    /// before, dozens a minute. A dropped client's connection serves the
    /// next client to the same voter.
    #[tokio::test]
    async fn clients_openraft_drops_hand_their_connection_to_the_next_one() {
        use futures::{SinkExt, StreamExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let transport =
            QuorumTransport::tcp(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap());
        let mut factory = QuorumNetworkFactory::new(
            "c",
            1,
            transport,
            Arc::new(BTreeMap::from([(2, addr.clone())])),
        );
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let mut framed = tokio_util::codec::Framed::new(stream, crate::transport::codec());
            for _ in 0..3 {
                let frame = framed.next().await.unwrap().unwrap();
                let (id, _, _) = crate::transport::decode_request(&frame).unwrap();
                let answer = QuorumResponse::Vote(Ok(VoteResponse {
                    vote: openraft::Vote::new(1, 1),
                    vote_granted: true,
                    last_log_id: None,
                }));
                framed
                    .send(crate::transport::encode_response(id, &answer).unwrap())
                    .await
                    .unwrap();
            }
            // A second connection would be waiting by now.
            listener.accept().now_or_never().is_none()
        });
        let option = RPCOption::new(Duration::from_secs(30));
        for _ in 0..3 {
            let mut client = factory.new_client(2, &BasicNode::default()).await;
            let granted = client
                .vote(
                    VoteRequest::new(openraft::Vote::new(1, 1), None),
                    option.clone(),
                )
                .await
                .unwrap();
            assert!(granted.vote_granted);
        }
        assert!(
            server.await.unwrap(),
            "one connection served the three clients"
        );
    }

    #[test]
    fn only_a_refusal_by_a_candidate_of_the_same_term_is_a_split() {
        let log = |index: u64| {
            Some(openraft::LogId::new(
                openraft::CommittedLeaderId::new(4, 1),
                index,
            ))
        };
        let asked = VoteRequest::new(openraft::Vote::new(5, 1), log(10));
        let answer = |term: u64, voted_for: u64, committed: bool, granted: bool| VoteResponse {
            vote: if committed {
                openraft::Vote::new_committed(term, voted_for)
            } else {
                openraft::Vote::new(term, voted_for)
            },
            vote_granted: granted,
            last_log_id: log(10),
        };
        assert!(is_rival_candidate(2, &asked, &answer(5, 2, false, false)));
        let shorter = VoteResponse {
            last_log_id: log(9),
            ..answer(5, 2, false, false)
        };
        assert!(is_rival_candidate(2, &asked, &shorter));
        // Granted; a third voter's candidate; a leader's lease; an older
        // term; a newer term; a rival with a longer log.
        assert!(!is_rival_candidate(2, &asked, &answer(5, 1, false, true)));
        assert!(!is_rival_candidate(2, &asked, &answer(5, 3, false, false)));
        assert!(!is_rival_candidate(2, &asked, &answer(5, 2, true, false)));
        assert!(!is_rival_candidate(2, &asked, &answer(4, 2, false, false)));
        assert!(!is_rival_candidate(2, &asked, &answer(6, 2, false, false)));
        let longer = VoteResponse {
            last_log_id: log(11),
            ..answer(5, 2, false, false)
        };
        assert!(!is_rival_candidate(2, &asked, &longer));
    }

    #[tokio::test]
    async fn single_voter_clients_report_unreachable_instead_of_panicking() {
        let mut factory =
            QuorumNetworkFactory::new("c", 1, QuorumTransport::single_voter(), Arc::default());
        let mut client = factory.new_client(2, &BasicNode::default()).await;
        let option = RPCOption::new(Duration::from_millis(10));
        let err = client
            .vote(VoteRequest::new(openraft::Vote::new(1, 1), None), option)
            .await
            .unwrap_err();
        assert!(matches!(err, RPCError::Unreachable(_)), "{err}");
        assert!(err.to_string().contains("voter 2"), "{err}");
    }
}
