//! Speaking Kafka on the wire: framing, request/response header versions, the
//! supported-API table, request decode and response encode over the
//! `kafka-protocol` crate, and the hand-written Fetch response encoder that
//! leaves slots for file regions.
//!
//! With the `fuzzing` feature, `fuzz` holds the request fuzz target and its
//! seeds (issue 17; run by `fuzz/`).
//!
//! This crate has no I/O: it turns bytes into requests and responses into
//! bytes. It must not depend on tokio, storage, or the controller.

pub mod api_table;
pub mod codec;
pub mod error_response;
pub mod fetch;
pub mod frame;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
mod request_guard;
#[cfg(any(test, feature = "fuzzing"))]
mod test_support;
pub mod test_vectors;

pub use kafka_protocol;
pub use uuid;

/// Kafka's `UNSUPPORTED_VERSION` error code (35), as listed in the protocol
/// guide's error table (<https://kafka.apache.org/protocol#protocol_error_codes>).
pub const UNSUPPORTED_VERSION: i16 = 35;
