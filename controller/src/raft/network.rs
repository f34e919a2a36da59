//! The network seam between metadata quorum voters (openraft's
//! `RaftNetworkFactory`).
//!
//! A single-voter quorum never sends an RPC, so this factory's clients answer
//! every call with `Unreachable`: openraft treats that as a transient failure
//! and retries, nothing panics. A multi-voter quorum replaces
//! [`NoTransport`] with a real transport (e.g. a controller listener); the
//! rest of the raft wiring does not change.

use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;

use super::MetadataTypeConfig;

/// Why an RPC to another voter could not be sent.
#[derive(Debug, thiserror::Error)]
#[error("no transport to metadata quorum voter {target}: only a single-voter quorum is supported")]
pub(crate) struct NoTransport {
    target: u64,
}

/// Creates clients to other voters; without a transport, they all fail.
#[derive(Debug, Default, Clone)]
pub(crate) struct QuorumNetworkFactory;

/// A client to one voter that has no transport.
#[derive(Debug)]
pub(crate) struct UnreachableVoter {
    target: u64,
}

impl UnreachableVoter {
    fn unreachable<E: std::error::Error>(&self) -> RPCError<u64, BasicNode, E> {
        RPCError::Unreachable(Unreachable::new(&NoTransport {
            target: self.target,
        }))
    }
}

impl RaftNetworkFactory<MetadataTypeConfig> for QuorumNetworkFactory {
    type Network = UnreachableVoter;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> Self::Network {
        UnreachableVoter { target }
    }
}

impl RaftNetwork<MetadataTypeConfig> for UnreachableVoter {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<MetadataTypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        Err(self.unreachable())
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<MetadataTypeConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>,
    > {
        Err(self.unreachable())
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        Err(self.unreachable())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn clients_report_unreachable_instead_of_panicking() {
        let mut factory = QuorumNetworkFactory;
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
