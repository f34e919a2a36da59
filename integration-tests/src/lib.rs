//! Test support for Weir's end-to-end suite.
//!
//! This crate owns everything the integration tests share and nothing that
//! the server needs: starting the real `weir` binary on ephemeral ports with a
//! temporary `log.dirs` ([`TestBroker`], [`TestCluster`]), a blocking
//! [`RawClient`] that speaks exact API versions over the `kafka-protocol`
//! crate, helpers that build and check record batches ([`records`]) and common
//! requests ([`requests`]), a tiny
//! HTTP client for the Prometheus endpoint ([`metrics`]) and the locations of
//! the real clients the tests drive as subprocesses ([`clients`]: kcat, the
//! venv Python with confluent-kafka and kafka-python, the Java client
//! harness), the chaos harness of `scripts/chaos` ([`chaos`]), and power
//! loss for a killed broker replayed from its sync journal
//! ([`power_loss`]), and a wall clock the harness can move per broker
//! through libfaketime ([`fake_clock`]), test certificates for TLS
//! listeners ([`tls`]) and the users and PLAIN messages of SASL listeners
//! ([`sasl`]). It
//! depends on no Weir crate: the broker is a black box reached
//! only over sockets, stdout/stderr and signals.

pub mod broker;
pub mod chaos;
pub mod clients;
pub mod error;
pub mod fake_clock;
pub mod metrics;
pub mod power_loss;
pub mod raw;
pub mod records;
pub mod requests;
pub mod sasl;
pub mod tls;
pub mod tmpfs;

pub use broker::{weir_binary, TestBroker, TestBrokerBuilder, TestCluster};
pub use error::HarnessError;
pub use raw::{Pending, RawClient, RawResponse};
