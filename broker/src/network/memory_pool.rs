//! Byte budgets for request and response memory, after Kafka's
//! `SimpleMemoryPool` (clients `org.apache.kafka.common.memory`), which
//! backs `queued.max.request.bytes` in Kafka's `SocketServer`.
//!
//! A [`MemoryPool`] counts bytes, it does not hand out buffers: a caller
//! takes a [`Lease`] for bytes it is about to hold and the lease gives them
//! back when dropped. As Kafka's non-strict pool, an allocation succeeds
//! while any budget is left, so the bytes in use exceed the size by at most
//! one allocation; a caller that is refused waits ([`MemoryPool::wait_available`])
//! instead of failing, as Kafka mutes a channel under memory pressure.
//! This module knows nothing about sockets.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// A byte budget shared by its leases.
#[derive(Debug)]
pub struct MemoryPool {
    /// The budget, bytes; `None` is unbounded (Kafka's `MemoryPool.NONE`).
    size: Option<i64>,
    /// Bytes not leased; negative after an allocation that overshot.
    available: AtomicI64,
    /// Woken whenever bytes come back.
    freed: Notify,
}

impl MemoryPool {
    /// A pool of `size` bytes; a negative `size` is unbounded (Kafka's
    /// `queued.max.request.bytes=-1`).
    pub fn new(size: i64) -> Arc<Self> {
        let bounded = (size >= 0).then_some(size);
        Arc::new(MemoryPool {
            size: bounded,
            available: AtomicI64::new(bounded.unwrap_or(i64::MAX / 2)),
            freed: Notify::new(),
        })
    }

    /// The budget in bytes, `None` when unbounded.
    pub fn size(&self) -> Option<i64> {
        self.size
    }

    /// Bytes still available; zero or negative when exhausted.
    pub fn available(&self) -> i64 {
        self.available.load(Ordering::Acquire)
    }

    /// Bytes leased now (0 for an unbounded pool that is unused).
    pub fn used(&self) -> i64 {
        self.size.unwrap_or(i64::MAX / 2) - self.available()
    }

    /// Leases `bytes` if any budget is left (Kafka's non-strict
    /// `tryAllocate`: the pool may go up to `bytes - 1` below zero), else
    /// `None`. Zero bytes always succeed.
    pub fn try_allocate(self: &Arc<Self>, bytes: usize) -> Option<Lease> {
        self.allocate_if(bytes, 1)
    }

    /// Leases `bytes` only if all of them are available (Kafka's strict
    /// mode), else `None`.
    pub fn try_allocate_strict(self: &Arc<Self>, bytes: usize) -> Option<Lease> {
        self.allocate_if(bytes, bytes as i64)
    }

    /// Leases `bytes` whatever is left: for bytes already held (a response
    /// that exists once its handler has finished), so that the pool counts
    /// them and others wait.
    pub fn allocate_forced(self: &Arc<Self>, bytes: usize) -> Lease {
        self.available.fetch_sub(bytes as i64, Ordering::AcqRel);
        self.lease(bytes)
    }

    fn allocate_if(self: &Arc<Self>, bytes: usize, threshold: i64) -> Option<Lease> {
        if bytes == 0 {
            return Some(self.lease(0));
        }
        let want = bytes as i64;
        let mut available = self.available();
        while available >= threshold.max(1) {
            match self.available.compare_exchange_weak(
                available,
                available - want,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(self.lease(bytes)),
                Err(now) => available = now,
            }
        }
        None
    }

    fn lease(self: &Arc<Self>, bytes: usize) -> Lease {
        Lease {
            pool: Some(self.clone()),
            bytes,
        }
    }

    fn release(&self, bytes: usize) {
        if bytes > 0 {
            self.available.fetch_add(bytes as i64, Ordering::AcqRel);
            self.freed.notify_waiters();
        }
    }

    /// Returns once some budget is available (at once if it already is).
    /// Cancel-safe.
    pub async fn wait_available(&self) {
        wait_until([self], || self.available() > 0).await
    }
}

/// Returns once `condition` holds, checking it again whenever bytes come
/// back to one of `pools` (registered before each check, so no release is
/// missed). Cancel-safe.
pub async fn wait_until<const N: usize>(pools: [&MemoryPool; N], condition: impl Fn() -> bool) {
    loop {
        let mut freed: Vec<_> = pools.iter().map(|p| Box::pin(p.freed.notified())).collect();
        for f in &mut freed {
            f.as_mut().enable();
        }
        if condition() {
            return;
        }
        futures::future::select_all(freed).await;
    }
}

/// Bytes leased from a [`MemoryPool`], given back on drop.
#[derive(Debug, Default)]
pub struct Lease {
    pool: Option<Arc<MemoryPool>>,
    bytes: usize,
}

impl Lease {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Gives back all but `keep` bytes (no-op when `keep >= bytes()`).
    pub fn shrink_to(&mut self, keep: usize) {
        if keep < self.bytes {
            if let Some(pool) = &self.pool {
                pool.release(self.bytes - keep);
            }
            self.bytes = keep;
        }
    }

    /// Splits off a lease of `min(bytes, self.bytes())` bytes of the same
    /// pool.
    pub fn split(&mut self, bytes: usize) -> Lease {
        let taken = bytes.min(self.bytes);
        self.bytes -= taken;
        Lease {
            pool: self.pool.clone(),
            bytes: taken,
        }
    }

    /// Adds `other` (of the same pool, or empty) to this lease.
    ///
    /// # Panics
    /// Debug builds assert that both come from the same pool.
    pub fn merge(&mut self, mut other: Lease) {
        if other.bytes == 0 {
            return;
        }
        if self.pool.is_none() {
            self.pool = other.pool.take();
        } else {
            debug_assert!(
                other
                    .pool
                    .as_ref()
                    .zip(self.pool.as_ref())
                    .is_some_and(|(a, b)| Arc::ptr_eq(a, b)),
                "merging leases of different pools"
            );
        }
        self.bytes += std::mem::take(&mut other.bytes);
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.shrink_to(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_strict_allocation_succeeds_while_any_budget_is_left() {
        let pool = MemoryPool::new(100);
        let a = pool.try_allocate(60).unwrap();
        // 40 left: a 70-byte request still gets it (Kafka's non-strict pool).
        let b = pool.try_allocate(70).unwrap();
        assert_eq!(pool.available(), -30);
        assert!(pool.try_allocate(1).is_none());
        drop(a);
        assert_eq!(pool.available(), 30);
        assert!(pool.try_allocate_strict(31).is_none());
        let c = pool.try_allocate_strict(30).unwrap();
        assert_eq!(pool.available(), 0);
        drop((b, c));
        assert_eq!(pool.available(), 100);
        assert_eq!(pool.used(), 0);
    }

    #[test]
    fn a_request_larger_than_the_pool_is_granted_when_it_is_free() {
        let pool = MemoryPool::new(10);
        let big = pool.try_allocate(1000).unwrap();
        assert!(pool.try_allocate(1).is_none());
        drop(big);
        assert_eq!(pool.available(), 10);
    }

    #[test]
    fn split_shrink_and_merge_keep_the_count() {
        let pool = MemoryPool::new(100);
        let mut lease = pool.try_allocate(50).unwrap();
        let part = lease.split(20);
        assert_eq!((lease.bytes(), part.bytes()), (30, 20));
        lease.shrink_to(10);
        assert_eq!(pool.available(), 70);
        lease.merge(part);
        assert_eq!(lease.bytes(), 30);
        let mut empty = Lease::default();
        empty.merge(lease);
        assert_eq!(pool.used(), 30);
        drop(empty);
        assert_eq!(pool.used(), 0);
        let forced = pool.allocate_forced(150);
        assert_eq!(pool.available(), -50);
        drop(forced);
        assert_eq!(pool.available(), 100);
    }

    #[test]
    fn a_negative_size_is_unbounded() {
        let pool = MemoryPool::new(-1);
        assert_eq!(pool.size(), None);
        let a = pool.try_allocate_strict(1 << 40).unwrap();
        assert_eq!(pool.used(), 1 << 40);
        drop(a);
        assert_eq!(pool.used(), 0);
    }

    #[tokio::test]
    async fn a_waiter_wakes_when_bytes_come_back() {
        let pool = MemoryPool::new(10);
        let held = pool.try_allocate(10).unwrap();
        let waiting = {
            let pool = pool.clone();
            tokio::spawn(async move { pool.wait_available().await })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(held);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("woken")
            .unwrap();
    }
}
