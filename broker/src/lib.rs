//! The Weir broker: configuration, listeners, connections, request dispatch,
//! one handler per Kafka API, the `ReplicaManager` that owns partitions, and
//! the metrics endpoint.
//!
//! This crate is the only place that translates between the Kafka wire types
//! (`kafka-protocol`) and the domain crates (`weir-storage`,
//! `weir-controller`).

pub mod authorizer;
pub mod bootstrap;
pub mod broker_keys;
pub mod client_quotas;
pub mod config;
pub mod config_bounds;
pub mod context;
pub mod descriptors;
pub mod dispatch;
pub mod error;
pub mod fetch_session;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
pub mod group;
pub mod handlers;
pub mod log_value;
pub mod logging;
pub mod metrics;
pub mod network;
pub mod partition;
pub mod producer_ids;
pub mod replica_manager;
pub mod replication;
pub mod server;
pub mod topic_config;
