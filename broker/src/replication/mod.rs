//! Partition data replication (issue 16, Kafka's ISR protocol, design §6):
//! - [`leader`]: the leader's pure rules for follower state, the high
//!   watermark and ISR changes;
//! - [`truncation`]: where a follower truncates on a diverging epoch;
//! - [`client`]: the inter-broker connection a fetcher uses;
//! - [`fetch_session`]: a fetcher's incremental fetch session (KIP-227);
//! - [`fetcher`]: the replica fetchers and their manager;
//! - [`alter_partition`]: ISR changes sent to the controller.

pub mod alter_partition;
pub mod client;
pub mod fetch_session;
pub mod fetcher;
pub mod leader;
pub mod truncation;
