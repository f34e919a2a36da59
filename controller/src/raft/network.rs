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
    PeerClient, QuorumRequest, QuorumResponse, QuorumTransport, TransportError, MAX_FRAME_BYTES,
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
#[derive(Debug, Clone)]
pub(crate) struct QuorumNetworkFactory {
    node_id: u64,
    transport: QuorumTransport,
    contacts: Arc<ReplicaContacts>,
    /// This node's own `controller.quorum.voters` addresses by voter id:
    /// they win over the addresses in the replicated membership, which are
    /// the initializing voter's view (as Kafka, each node uses its own
    /// config to reach the others).
    voter_addresses: Arc<BTreeMap<u64, String>>,
}

impl QuorumNetworkFactory {
    pub(crate) fn new(
        node_id: u64,
        transport: QuorumTransport,
        voter_addresses: Arc<BTreeMap<u64, String>>,
    ) -> Self {
        QuorumNetworkFactory {
            node_id,
            transport,
            contacts: Arc::default(),
            voter_addresses,
        }
    }

    /// When each voter last answered an AppendEntries from this node.
    pub(crate) fn contacts(&self) -> Arc<ReplicaContacts> {
        self.contacts.clone()
    }
}

/// A client to one voter.
pub(crate) struct VoterClient {
    client: PeerClient,
    contacts: Arc<ReplicaContacts>,
}

fn rpc_error<E: std::error::Error>(e: TransportError) -> RPCError<u64, BasicNode, E> {
    match e {
        TransportError::Unreachable { .. } => RPCError::Unreachable(Unreachable::new(&e)),
        TransportError::Network { .. } => RPCError::Network(NetworkError::new(&e)),
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
        VoterClient {
            client: self.transport.client(
                self.node_id,
                target,
                self.voter_addresses.get(&target).unwrap_or(&node.addr),
            ),
            contacts: self.contacts.clone(),
        }
    }
}

impl RaftNetwork<MetadataTypeConfig> for VoterClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<MetadataTypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let target = self.client.target();
        if let Some(fit) = entries_that_fit(&rpc) {
            // openraft sends fewer entries at once and retries at once.
            return Err(RPCError::PayloadTooLarge(
                PayloadTooLarge::new_entries_hint(fit),
            ));
        }
        match self
            .client
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
        let target = self.client.target();
        match self
            .client
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
        let target = self.client.target();
        match self
            .client
            .call(QuorumRequest::Vote(rpc), option.hard_ttl())
            .await
            .map_err(rpc_error)?
        {
            QuorumResponse::Vote(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(target, e)))
            }
            other => Err(mismatched(target, &other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
            QuorumNetworkFactory::new(1, QuorumTransport::single_voter(), Arc::default());
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

    #[tokio::test]
    async fn single_voter_clients_report_unreachable_instead_of_panicking() {
        let mut factory =
            QuorumNetworkFactory::new(1, QuorumTransport::single_voter(), Arc::default());
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
