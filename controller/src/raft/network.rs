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
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
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
    PeerClient, QuorumRequest, QuorumResponse, QuorumTransport, TransportError,
};

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
