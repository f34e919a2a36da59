//! The seam that makes a quorum run deterministic for the seeded
//! simulation (`tests/simulation`), and the only source of randomness in
//! the quorum code.
//!
//! Owns the crate's random draws: openraft's randomized election timeouts
//! (through the raft type config's async runtime, whose `thread_rng` is
//! [`ThreadRng`]), the split-vote breaker's delays, and the v4 UUIDs of
//! topic ids and snapshot ids ([`uuid_v4`]); and the way the metadata log
//! and snapshot files are written ([`blocking`]).
//!
//! By default (production) every draw comes from `rand::thread_rng()` and
//! file I/O runs on tokio's blocking pool, exactly as without this module.
//! Inside a [`DeterministicScope`] on the current thread, draws come from
//! one generator seeded by the scope's seed, and file I/O runs inline on
//! the calling thread. With a single-threaded tokio runtime whose clock is
//! paused, that makes a run a function of its seed: the order of every
//! draw is the order in which the one thread polls tasks, and I/O finishes
//! before anything else runs (simulated time stands still meanwhile,
//! because the runtime is never idle during it).
//!
//! The scope is per thread, not per quorum: openraft asks its runtime for a
//! random number through a static function (`AsyncRuntime::thread_rng`),
//! with no instance to carry an injected generator. Must not depend on the
//! rest of the crate.

use std::cell::RefCell;
use std::io;
use std::marker::PhantomData;

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

thread_local! {
    /// The scope's generator, while a [`DeterministicScope`] is entered
    /// here (which also makes file I/O run inline).
    static SEEDED: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// While alive, the quorum code on this thread draws its random numbers from
/// a generator seeded by `seed` and runs its file I/O inline (see the module
/// doc). Dropping it restores the defaults. Not `Send`: it belongs to the
/// thread that entered it; enter it on the thread that runs a
/// single-threaded tokio runtime's `block_on`.
///
/// Scopes do not nest: entering one replaces the generator of an earlier
/// one on the same thread, and dropping either restores the defaults.
#[derive(Debug)]
pub struct DeterministicScope {
    /// Keeps the scope on its thread.
    _not_send: PhantomData<*const ()>,
}

impl DeterministicScope {
    /// Enters a deterministic scope on the current thread, seeded by `seed`.
    pub fn enter(seed: u64) -> DeterministicScope {
        SEEDED.with(|s| *s.borrow_mut() = Some(StdRng::seed_from_u64(seed)));
        DeterministicScope {
            _not_send: PhantomData,
        }
    }
}

impl Drop for DeterministicScope {
    fn drop(&mut self) {
        SEEDED.with(|s| *s.borrow_mut() = None);
    }
}

/// The generator of the current thread: the scope's seeded one inside a
/// [`DeterministicScope`], else `rand::thread_rng()`. A zero-sized handle;
/// each draw looks the generator up again, so a handle kept across a
/// scope's start or end follows it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadRng;

impl ThreadRng {
    fn with<T>(f: impl FnOnce(&mut dyn RngCore) -> T) -> T {
        SEEDED.with(|s| match s.borrow_mut().as_mut() {
            Some(seeded) => f(seeded),
            None => f(&mut rand::thread_rng()),
        })
    }
}

impl RngCore for ThreadRng {
    fn next_u32(&mut self) -> u32 {
        ThreadRng::with(|r| r.next_u32())
    }

    fn next_u64(&mut self) -> u64 {
        ThreadRng::with(|r| r.next_u64())
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        ThreadRng::with(|r| r.fill_bytes(dest))
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        ThreadRng::with(|r| r.try_fill_bytes(dest))
    }
}

/// A random (version 4) UUID drawn from [`ThreadRng`]: topic ids and
/// snapshot ids.
pub(crate) fn uuid_v4() -> uuid::Uuid {
    let mut bytes = [0u8; 16];
    ThreadRng.fill_bytes(&mut bytes);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// Runs the blocking `f` (file I/O) on tokio's blocking pool, or inline on
/// this thread inside a [`DeterministicScope`].
///
/// # Errors
///
/// What `f` returns, or the pool's join error (a panic in `f`) as
/// `io::Error`.
pub(crate) async fn blocking<T, F>(f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    if SEEDED.with(|s| s.borrow().is_some()) {
        return f();
    }
    tokio::task::spawn_blocking(f)
        .await
        .map_err(io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws() -> Vec<u64> {
        (0..4).map(|_| ThreadRng.next_u64()).collect()
    }

    #[test]
    fn a_scope_replays_its_seed_and_the_default_stays_random() {
        let first = {
            let _scope = DeterministicScope::enter(7);
            (draws(), uuid_v4())
        };
        let again = {
            let _scope = DeterministicScope::enter(7);
            (draws(), uuid_v4())
        };
        let other = {
            let _scope = DeterministicScope::enter(8);
            draws()
        };
        assert_eq!(first, again);
        assert_ne!(first.0, other);
        assert_eq!(first.1.get_version_num(), 4);
        // Outside a scope: the thread's own generator again.
        assert_ne!(draws(), first.0);
        assert_ne!(uuid_v4(), uuid_v4());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn io_runs_inline_only_inside_a_scope() {
        let thread = std::thread::current().id();
        let on_pool = blocking(move || Ok(std::thread::current().id()))
            .await
            .unwrap();
        assert_ne!(on_pool, thread);
        let _scope = DeterministicScope::enter(1);
        let inline = blocking(move || Ok(std::thread::current().id()))
            .await
            .unwrap();
        assert_eq!(inline, thread);
    }
}
