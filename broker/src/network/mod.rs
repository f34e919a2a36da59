//! Network layer: per-connection framing, pipelining and zero-copy writes.

pub mod connection;
