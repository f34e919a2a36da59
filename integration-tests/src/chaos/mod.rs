//! The chaos harness behind `scripts/chaos` (issue 17): a real 3-node
//! cluster ([`cluster`]), a workload whose clients record everything they
//! see ([`queue`] over [`client`], with metadata [`churn`] beside it), a
//! nemesis that injects process faults and network cuts ([`network`]) on a
//! schedule that follows from a seed ([`nemesis`]), and a pure checker
//! over the recorded [`history`] ([`checker`]); [`run`] ties one run
//! together.
//!
//! Like the rest of this crate it depends on no Weir crate: the nodes are
//! black boxes reached over sockets and signals.

pub mod checker;
pub mod churn;
pub mod client;
pub mod cluster;
pub mod group;
pub mod history;
pub mod nemesis;
pub mod network;
pub mod queue;
pub mod run;
