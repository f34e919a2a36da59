//! Flush pacing: how long a log's next group-commit flush waits so that
//! one fdatasync covers the batches of several Produce requests (issue 18:
//! the CPU of durable acks=all is about 100 us per fdatasync, so its
//! throughput on a CPU-bound machine follows the fdatasyncs per MB).
//!
//! Without pacing a log's flush starts as soon as an acks=all waiter asks
//! for one and none runs; under a batching producer (16 KiB batches, Kafka's
//! `batch.size` default) requests reach a partition a few milliseconds
//! apart and each flush covers about one batch (`scripts/group_commit.py`:
//! 1.2 batches per flush). A log that is filling fast instead flushes at
//! most once per tick of the pace clock, which ticks every
//! `log.flush.pace.ms`: the next flush waits for the first tick after the
//! previous one began, and covers every batch appended meanwhile.
//!
//! The ticks are the same for every log of the process, so the paced logs
//! of a broker flush together. A Produce request carrying batches for
//! several partitions waits for all their flushes; with a phase per log
//! (each one interval after its own last flush) it waited for the latest
//! of them, on average nine tenths of an interval for nine partitions,
//! against half an interval for one shared tick; and the fdatasyncs issued
//! at one tick share ext4's journal commits. Measured in ARCHITECTURE.md
//! (group commit): single node about 4% faster, replicated level.
//!
//! "Filling fast" is judged from the previous flush: it covered at least
//! [`PACE_BYTES`] for each pace interval (at least one) since the flush
//! before it began. Both halves matter:
//! - at least [`PACE_BYTES`] in all: a producer that sends small batches
//!   (one record each, `linger.ms=0`, the latency probe) asks for a flush
//!   per batch and is never made to wait for its own log's pace;
//! - at least [`PACE_BYTES`] per interval, the append rate: once paced, a
//!   flush covers a whole interval's appends, so a slow log would otherwise
//!   look busy because it was paced, and stay paced.
//!
//! So a log is paced only while it grows by at least [`PACE_BYTES`] per
//! interval (2 MiB/s at the 4 ms default), and on a leader an acks=all
//! answer then waits at most one interval longer (until the next tick).
//!
//! A follower paces the same way, but its fetcher waits for the flushes of
//! every partition it appended to before its next Fetch
//! (`replication::fetcher`): nothing joins a paced flush there, the gain is
//! the larger next fetch, and one paced partition delays the next Fetch of
//! every partition on that fetcher, small batches included, by up to one
//! interval. With RF above 1 an acks=all answer can so wait up to about two
//! intervals longer (the follower finishing a paced round, then pacing the
//! one that carries the batch). Kafka does not fsync on the produce path
//! and has no such setting; Redpanda batches its fsyncs per Raft group.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

/// `log.flush.pace.ms`'s default.
pub const DEFAULT_PACE: Duration = Duration::from_millis(4);

/// Bytes a log must grow by per pace interval to be paced: half of
/// Kafka's default producer `batch.size` (16384).
pub const PACE_BYTES: u64 = 8 * 1024;

/// The pacing state of one log: when its last flush began (tokio's clock,
/// which tests can pause) and how much had been appended to it then.
#[derive(Debug)]
pub struct FlushPace {
    /// `log.flush.pace.ms`; zero turns pacing off.
    interval: Duration,
    /// The start of the last flush and [`weir_storage::Log::appended_bytes`]
    /// at that moment.
    last: Option<(Instant, u64)>,
    /// The last flush found the log filling fast (see the module doc).
    busy: bool,
    /// An instant the pace clock ticks at: the same for every log of the
    /// process ([`pace_origin`]), so that paced logs flush together.
    origin: Instant,
}

/// The instant the pace clock of every log ticks at, one interval apart
/// before and after it: the first call's (one per process).
fn pace_origin() -> Instant {
    static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
    Instant::from_std(*ORIGIN.get_or_init(std::time::Instant::now))
}

impl FlushPace {
    /// No flush yet; `interval` is `log.flush.pace.ms` (zero: off).
    pub fn new(interval: Duration) -> Self {
        Self::with_origin(interval, pace_origin())
    }

    /// As [`FlushPace::new`], with the pace clock's ticks counted from
    /// `origin` (tests).
    fn with_origin(interval: Duration, origin: Instant) -> Self {
        FlushPace {
            interval,
            last: None,
            busy: false,
            origin,
        }
    }

    /// Sets `log.flush.pace.ms` (applied from the next flush on).
    pub fn set_interval(&mut self, interval: Duration) {
        self.interval = interval;
    }

    /// When the next flush may begin: `None` for at once, else the pace
    /// clock's first tick after the last flush began. The ticks are one
    /// interval apart and the same for every log of the process, so the
    /// paced logs of a broker flush together: a Produce request waiting for
    /// several partitions waits for one tick, not for the latest of their
    /// own phases, and their concurrent fdatasyncs share journal commits.
    pub fn next_start(&self) -> Option<Instant> {
        match self.last {
            Some((start, _)) if self.busy && !self.interval.is_zero() => {
                // The ticks are origin + n * interval for every integer n:
                // the first after `start` is `start` plus what is left of
                // the interval it falls in.
                let interval = self.interval.as_nanos();
                let to_next = match start.checked_duration_since(self.origin) {
                    Some(since) => interval - since.as_nanos() % interval,
                    None => match (self.origin - start).as_nanos() % interval {
                        0 => interval,
                        before => before,
                    },
                };
                // At most one interval, which the configuration bounds.
                let to_next = u64::try_from(to_next).unwrap_or(u64::MAX);
                Some(start + Duration::from_nanos(to_next))
            }
            _ => None,
        }
    }

    /// When the last flush began, if any.
    #[cfg(test)]
    pub fn last_start(&self) -> Option<Instant> {
        self.last.map(|(start, _)| start)
    }

    /// Records a flush beginning at `now` with `appended` bytes appended to
    /// the log so far ([`weir_storage::Log::appended_bytes`]), and whether
    /// it covers [`PACE_BYTES`] per interval since the last one began.
    pub fn begin(&mut self, now: Instant, appended: u64) {
        self.busy = match self.last {
            Some((start, before)) if !self.interval.is_zero() => {
                let covered = appended.saturating_sub(before);
                let elapsed = now.saturating_duration_since(start);
                // Intervals since the last start, at least one, in
                // nanoseconds to stay exact: covered >= PACE_BYTES * n.
                let intervals = elapsed.as_nanos().max(self.interval.as_nanos());
                u128::from(covered) * self.interval.as_nanos() >= u128::from(PACE_BYTES) * intervals
            }
            _ => false,
        };
        self.last = Some((now, appended));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A pace whose clock ticks at `t0`, `t0 + interval`, ...
    fn paced(interval: Duration) -> (FlushPace, Instant) {
        let t0 = Instant::now();
        (FlushPace::with_origin(interval, t0), t0)
    }

    #[test]
    fn the_default_is_the_broker_configs() {
        let config = crate::config::BrokerConfig::default();
        assert_eq!(
            Duration::from_millis(config.log_flush_pace_ms),
            DEFAULT_PACE
        );
    }

    #[test]
    fn the_first_flush_and_one_after_an_idle_spell_start_at_once() {
        let (mut pace, t0) = paced(4 * MS);
        assert_eq!(pace.next_start(), None);
        pace.begin(t0, 1 << 20);
        // 1 MiB before the first flush says nothing about the rate.
        assert_eq!(pace.next_start(), None);
        // 16 KiB over a second: 16 KiB/s, far under 8 KiB per 4 ms.
        pace.begin(t0 + 1000 * MS, (1 << 20) + 16384);
        assert_eq!(pace.next_start(), None);
    }

    #[test]
    fn a_log_growing_a_batch_per_flush_is_paced_to_the_first_tick_after_its_last_flush() {
        let (mut pace, t0) = paced(4 * MS);
        pace.begin(t0, 0);
        // A 16 KiB batch 2 ms later: 8 KiB per ms.
        pace.begin(t0 + 2 * MS, 16384);
        assert_eq!(pace.next_start(), Some(t0 + 4 * MS));
        // Started on a tick: the next is one interval later.
        pace.begin(t0 + 4 * MS, 32768);
        assert_eq!(pace.next_start(), Some(t0 + 8 * MS));
        // Started late (its sync ran past the tick): back on the ticks.
        pace.begin(t0 + 9 * MS, 65536);
        assert_eq!(pace.next_start(), Some(t0 + 12 * MS));
    }

    #[test]
    fn logs_paced_at_different_moments_flush_at_the_same_tick() {
        // Two partitions of one Produce request whose last flushes began
        // 3 ms apart: both wait for the same tick, not each one interval
        // after its own flush (which would make the request wait for the
        // later of the two, 7 ms).
        let t0 = Instant::now();
        let mut a = FlushPace::with_origin(4 * MS, t0);
        let mut b = FlushPace::with_origin(4 * MS, t0);
        a.begin(t0, 0);
        b.begin(t0, 0);
        a.begin(t0 + 4 * MS, 16384);
        b.begin(t0 + 7 * MS, 16384);
        assert_eq!(a.next_start(), Some(t0 + 8 * MS));
        assert_eq!(b.next_start(), a.next_start());
        // Every pace of the process counts from the same origin.
        assert_eq!(FlushPace::new(4 * MS).origin, FlushPace::new(MS).origin);
    }

    #[test]
    fn the_ticks_run_before_the_clocks_origin_too() {
        // Tokio's paused clock (tests) can stand before the origin, which
        // the first log of the process takes from the real clock.
        let t0 = Instant::now();
        let mut pace = FlushPace::with_origin(4 * MS, t0 + 101 * MS);
        pace.begin(t0, 0);
        pace.begin(t0 + 2 * MS, 16384);
        assert_eq!(pace.next_start(), Some(t0 + 5 * MS));
        pace.begin(t0 + 5 * MS, 32768);
        assert_eq!(pace.next_start(), Some(t0 + 9 * MS));
    }

    #[test]
    fn small_batches_are_never_paced_however_often_they_come() {
        let (mut pace, t0) = paced(4 * MS);
        pace.begin(t0, 0);
        // One 1 KiB record every 100 us: 10 MiB/s, but each flush covers
        // under PACE_BYTES, so each is answered at once.
        for i in 1..100u32 {
            pace.begin(t0 + i * MS / 10, u64::from(i) * 1024);
            assert_eq!(pace.next_start(), None, "flush {i}");
        }
    }

    #[test]
    fn pacing_stops_when_the_rate_falls_under_pace_bytes_per_interval() {
        let (mut pace, t0) = paced(4 * MS);
        pace.begin(t0, 0);
        pace.begin(t0 + 4 * MS, 16384);
        assert!(pace.next_start().is_some());
        // Paced, a flush covers a whole interval: 6 KiB per 4 ms is under
        // PACE_BYTES per interval, so the next one is not held back.
        pace.begin(t0 + 8 * MS, 16384 + 6 * 1024);
        assert_eq!(pace.next_start(), None);
        // 12 KiB over 8 ms is 6 KiB per interval: still not paced,
        // although the flush covered more than PACE_BYTES in all.
        pace.begin(t0 + 16 * MS, 16384 + 18 * 1024);
        assert_eq!(pace.next_start(), None);
    }

    #[test]
    fn exactly_pace_bytes_per_interval_is_paced() {
        let (mut pace, t0) = paced(4 * MS);
        pace.begin(t0, 0);
        pace.begin(t0 + 8 * MS, 2 * PACE_BYTES);
        assert_eq!(pace.next_start(), Some(t0 + 12 * MS));
        pace.begin(t0 + 16 * MS, 3 * PACE_BYTES - 1);
        assert_eq!(pace.next_start(), None);
    }

    #[test]
    fn a_zero_interval_turns_pacing_off() {
        let (mut pace, t0) = paced(Duration::ZERO);
        pace.begin(t0, 0);
        pace.begin(t0 + MS, 1 << 20);
        assert_eq!(pace.next_start(), None);
        pace.set_interval(4 * MS);
        pace.begin(t0 + 2 * MS, 2 << 20);
        assert_eq!(pace.next_start(), Some(t0 + 4 * MS));
        pace.set_interval(Duration::ZERO);
        assert_eq!(pace.next_start(), None);
    }

    #[test]
    fn a_counter_lower_than_at_the_last_flush_counts_as_nothing_covered() {
        // Log::appended_bytes never falls; the guard keeps a wrong caller
        // from pacing on an underflowed difference.
        let (mut pace, t0) = paced(4 * MS);
        pace.begin(t0, 1 << 20);
        pace.begin(t0 + MS, 0);
        assert_eq!(pace.next_start(), None);
    }
}
