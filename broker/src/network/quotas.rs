//! Connection counts, as Kafka's `ConnectionQuotas` (core
//! `kafka.network.SocketServer`): `max.connections` for the broker and
//! `max.connections.per.ip` (with `max.connections.per.ip.overrides`) per
//! client address.
//!
//! As Kafka: when `max.connections` connections are open, the acceptor
//! waits until one closes (new clients wait in the listen backlog); a
//! connection over its address's limit is accepted and closed at once
//! (Kafka's `TooManyConnectionsException`, logged as "Rejected
//! connection"). This module knows nothing about sockets beyond addresses.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The broker's connection counts.
#[derive(Debug)]
pub struct ConnectionQuotas {
    /// One permit per connection allowed by `max.connections`.
    slots: Arc<Semaphore>,
    per_ip: usize,
    overrides: HashMap<IpAddr, usize>,
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// A connection over its address's limit (Kafka's
/// `TooManyConnectionsException`).
#[derive(Debug, thiserror::Error)]
#[error("address {ip} already has the configured maximum of {max} connections")]
pub struct TooManyConnections {
    /// The client address.
    pub ip: IpAddr,
    /// Its limit.
    pub max: usize,
}

/// A connection slot that is given back on drop.
#[derive(Debug)]
pub struct ConnectionSlot {
    _slot: OwnedSemaphorePermit,
    ip: IpAddr,
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl ConnectionQuotas {
    /// Quotas of `max_connections` in all and `per_ip` per address, with
    /// per-address `overrides`.
    pub fn new(max_connections: usize, per_ip: usize, overrides: HashMap<IpAddr, usize>) -> Self {
        ConnectionQuotas {
            slots: Arc::new(Semaphore::new(max_connections.min(Semaphore::MAX_PERMITS))),
            per_ip,
            overrides,
            counts: Arc::default(),
        }
    }

    /// Waits for a free slot under `max.connections` (Kafka's
    /// `waitForConnectionSlot`). Cancel-safe.
    pub async fn wait_for_slot(&self) -> OwnedSemaphorePermit {
        self.slots
            .clone()
            .acquire_owned()
            .await
            .expect("the connection semaphore is never closed")
    }

    /// Counts a connection from `ip` in `slot`.
    ///
    /// # Errors
    /// [`TooManyConnections`] when `ip` already has its maximum; nothing is
    /// counted then (the slot is given back).
    pub fn register(
        &self,
        slot: OwnedSemaphorePermit,
        ip: IpAddr,
    ) -> Result<ConnectionSlot, TooManyConnections> {
        let max = self.overrides.get(&ip).copied().unwrap_or(self.per_ip);
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let count = counts.entry(ip).or_default();
        if *count >= max {
            if *count == 0 {
                counts.remove(&ip);
            }
            return Err(TooManyConnections { ip, max });
        }
        *count += 1;
        Ok(ConnectionSlot {
            _slot: slot,
            ip,
            counts: self.counts.clone(),
        })
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = counts.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn per_ip_limits_and_overrides_refuse_the_connection_over_them() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let quotas = ConnectionQuotas::new(100, 2, HashMap::from([(b, 0)]));
        let first = quotas.register(quotas.wait_for_slot().await, a).unwrap();
        let _second = quotas.register(quotas.wait_for_slot().await, a).unwrap();
        let refused = quotas
            .register(quotas.wait_for_slot().await, a)
            .unwrap_err();
        assert_eq!(refused.max, 2);
        assert!(quotas.register(quotas.wait_for_slot().await, b).is_err());
        drop(first);
        let _again = quotas.register(quotas.wait_for_slot().await, a).unwrap();
        // Two open; refused connections gave their slots back.
        assert_eq!(quotas.slots.available_permits(), 98);
    }

    #[tokio::test]
    async fn the_acceptor_waits_for_a_slot_when_max_connections_are_open() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let quotas = ConnectionQuotas::new(1, usize::MAX, HashMap::new());
        let open = quotas.register(quotas.wait_for_slot().await, ip).unwrap();
        let waiting = quotas.wait_for_slot();
        tokio::pin!(waiting);
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        drop(open);
        let slot = tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("a slot once the connection closed");
        quotas.register(slot, ip).unwrap();
    }
}
