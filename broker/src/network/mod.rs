//! Network layer: per-connection framing, pipelining and zero-copy writes,
//! and the limits every connection shares (request and response bytes,
//! connection counts).

pub mod channel;
pub mod connection;
pub mod memory_pool;
pub mod principal;
pub mod quotas;
pub mod sasl;
pub mod scram;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::config::BrokerConfig;
use memory_pool::MemoryPool;
use quotas::ConnectionQuotas;

/// Request bytes each connection may hold outside `queued.max.request.bytes`
/// (as the kernel's socket buffer would): a client sending small requests
/// one at a time is never muted by others' large ones. Weir's; Kafka reads
/// the 4-byte size of every request outside its pool.
pub const CONNECTION_REQUEST_BYTES: i64 = 16 * 1024;

/// Where a connection came from: its peer and the listener that accepted
/// it (whose endpoints Metadata, DescribeCluster and FindCoordinator
/// answer with, as Kafka answers with the request's listener).
#[derive(Clone, Debug)]
pub struct ConnectionInfo {
    /// The client's address.
    pub peer: SocketAddr,
    /// The listener's name as written in `listeners` (e.g. `SSL`).
    pub listener: Arc<str>,
    /// The listener's security protocol.
    pub security_protocol: crate::config::SecurityProtocol,
    /// Who the client is (Kafka's `KafkaPrincipal`): `User:<name>` after
    /// SASL, on SSL the name `ssl.principal.mapping.rules` give its
    /// certificate's subject (`network::principal`), else
    /// `User:ANONYMOUS`.
    pub principal: Arc<str>,
    /// The SASL session of a SASL listener's connection (its
    /// re-authentication and expiry, KIP-368); `None` elsewhere.
    pub session: Option<Arc<sasl::SaslSession>>,
    /// Until when the connection reads no request (a client over its
    /// quota, KIP-219's channel muting; `crate::client_quotas`).
    pub muted: Arc<Mute>,
}

/// A listener as its accept loop serves it: its name, security protocol,
/// and the TLS and SASL settings built from its keys at start.
#[derive(Clone, Debug)]
pub struct AcceptedOn {
    /// The listener's name as written in `listeners`.
    pub name: Arc<str>,
    /// Its security protocol.
    pub protocol: crate::config::SecurityProtocol,
    /// The TLS side of an SSL or SASL_SSL listener.
    pub tls: Option<tls::TlsListener>,
    /// The SASL settings of a SASL_PLAINTEXT or SASL_SSL listener.
    pub sasl: Option<Arc<sasl::SaslListener>>,
}

/// When a throttled connection may read again. Unthrottled connections
/// only read an atomic flag per loop turn.
#[derive(Debug, Default)]
pub struct Mute {
    active: std::sync::atomic::AtomicBool,
    until: std::sync::Mutex<Option<tokio::time::Instant>>,
}

impl Mute {
    /// Reads nothing for `duration` from now (or longer, if already so).
    pub fn mute_for(&self, duration: std::time::Duration) {
        if duration.is_zero() {
            return;
        }
        let until = tokio::time::Instant::now() + duration;
        let mut muted = self.until.lock().unwrap_or_else(|e| e.into_inner());
        if muted.is_none_or(|m| m < until) {
            *muted = Some(until);
        }
        self.active
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// The instant reading may resume, while it is in the future.
    pub fn until(&self) -> Option<tokio::time::Instant> {
        if !self.active.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        let mut muted = self.until.lock().unwrap_or_else(|e| e.into_inner());
        match *muted {
            Some(until) if until > tokio::time::Instant::now() => Some(until),
            _ => {
                *muted = None;
                self.active
                    .store(false, std::sync::atomic::Ordering::Release);
                None
            }
        }
    }
}

/// Kafka's principal of an unauthenticated client.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// What bounds the memory and the number of connections of all listeners
/// together; built once from the configuration.
#[derive(Debug)]
pub struct NetworkLimits {
    /// `queued.max.request.bytes`: bytes of requests held (being read, in
    /// processing or parked) across all connections.
    pub requests: Arc<MemoryPool>,
    /// One connection at a time may read past an exhausted request pool
    /// until its next request is complete, so that partly read requests
    /// that together fill the pool cannot wait for each other forever.
    pub rescue: Arc<Semaphore>,
    /// `queued.max.response.bytes` (Weir): encoded response bytes not yet
    /// written, across all connections.
    pub responses: Arc<MemoryPool>,
    /// `queued.max.response.bytes.per.connection` (Weir), bytes.
    pub response_bytes_per_connection: i64,
    /// `max.connections`, `max.connections.per.ip` and its overrides.
    pub quotas: ConnectionQuotas,
}

impl NetworkLimits {
    /// The limits `config` sets.
    pub fn new(config: &BrokerConfig) -> Arc<Self> {
        let unbounded_if_not_positive = |n: i64| if n > 0 { n } else { -1 };
        Arc::new(NetworkLimits {
            requests: MemoryPool::new(unbounded_if_not_positive(config.queued_max_request_bytes)),
            rescue: Arc::new(Semaphore::new(1)),
            responses: MemoryPool::new(unbounded_if_not_positive(config.queued_max_response_bytes)),
            response_bytes_per_connection: config.queued_max_response_bytes_per_connection,
            quotas: ConnectionQuotas::new(
                config.max_connections as usize,
                config.max_connections_per_ip as usize,
                config.max_connections_per_ip_overrides.clone(),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Mute;

    #[tokio::test(start_paused = true)]
    async fn a_mute_lasts_its_time_and_only_grows() {
        let mute = Mute::default();
        assert_eq!(mute.until(), None);
        mute.mute_for(Duration::ZERO);
        assert_eq!(mute.until(), None);
        mute.mute_for(Duration::from_secs(2));
        let until = mute.until().expect("muted");
        mute.mute_for(Duration::from_secs(1));
        assert_eq!(
            mute.until(),
            Some(until),
            "a shorter throttle does not shorten it"
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(mute.until(), None);
    }
}
