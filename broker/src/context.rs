//! The state every handler shares: configuration, the controller handle,
//! the `ReplicaManager`, the fetch sessions, the producer id allocator and
//! the group coordinator.

use std::sync::Arc;

use weir_controller::{MetadataController, MetadataImage};

use crate::config::{BrokerConfig, Listener};
use crate::group::BrokerGroupCoordinator;
use crate::producer_ids::ProducerIdManager;
use crate::replica_manager::ReplicaManager;

/// Shared broker state, one per process, handed to every connection.
pub struct BrokerContext {
    /// Effective configuration.
    pub config: BrokerConfig,
    /// This node's id (`node.id`).
    pub node_id: i32,
    /// The cluster id from `meta.properties`.
    pub cluster_id: String,
    /// Handle on the metadata quorum.
    pub controller: MetadataController,
    /// The partitions this broker hosts.
    pub replica_manager: Arc<ReplicaManager>,
    /// Incremental fetch sessions (KIP-227) of the followers fetching from
    /// this broker.
    pub fetch_sessions: crate::fetch_session::FetchManager<Arc<crate::partition::Partition>>,
    /// The replica fetchers of the partitions this broker follows.
    pub replica_fetchers: Arc<crate::replication::fetcher::ReplicaFetcherManager>,
    /// Producer id blocks allocated through the controller.
    pub producer_ids: ProducerIdManager,
    /// Advertised listeners with bound ports filled in.
    pub advertised_listeners: Vec<Listener>,
    /// The classic consumer-group coordinator (every group is coordinated
    /// by this broker).
    pub group_coordinator: BrokerGroupCoordinator,
    /// The authorizer (`authorizer.class.name`), or `None`: every client
    /// may do everything.
    pub authorizer: Option<crate::authorizer::Authorizer>,
    /// Byte-rate quotas and their sensors.
    pub client_quotas: crate::client_quotas::ClientQuotaManager,
    /// The TLS side of every SSL and SASL_SSL listener (the controller
    /// listener's too): what AlterConfigs reloads.
    pub tls_listeners: Vec<crate::network::tls::TlsListener>,
}

impl BrokerContext {
    /// The latest published metadata image.
    pub fn metadata(&self) -> Arc<MetadataImage> {
        self.controller.image()
    }

    /// The authorization view of one request of `api` on the connection
    /// `info` (its principal and address).
    pub fn auth<'a>(
        &'a self,
        info: &'a crate::network::ConnectionInfo,
        api: &'static str,
    ) -> crate::authorizer::RequestAuth<'a> {
        crate::authorizer::RequestAuth::new(
            self.authorizer.as_ref(),
            || self.metadata(),
            &info.principal,
            info.peer.ip(),
            api,
        )
    }
}
