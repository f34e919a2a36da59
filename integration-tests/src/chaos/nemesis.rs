//! The nemesis: which faults a run injects, the schedule that follows from
//! the run's seed ([`Schedule::generate`], pure), and its execution on a
//! [`ChaosCluster`] ([`execute`]).
//!
//! Faults rotate every few seconds with quiet periods between them, as in
//! Bufstream's and Jepsen's Kafka tests. Real processes keep their own
//! timing, so what replays from a seed is the schedule (which fault, which
//! node, how long), not the interleaving.
//!
//! Seams for later faults: a new [`Fault`] variant, its step in
//! [`Schedule::generate`] and its action and heal in [`execute`] and
//! [`heal`]. Network faults (isolate, bridge, one-way) are cuts between
//! nodes in network namespaces ([`super::network`]); lossy and slow degrade
//! one node's links instead of cutting them.
//!
//! Disk faults go through each node's sync journal (the broker's
//! `SyncJournalFileSystem`, [`crate::power_loss`]): `lose-unsynced` and
//! `torn-write` are a SIGKILL followed by a power loss, `fsync-eio` and
//! `write-eio` fail every `fdatasync` or write of a running node until it
//! halts. `disk-full` fills the node's data dir, a small tmpfs
//! ([`crate::tmpfs`]), until the node halts. After each of the last three
//! the disk is healed and the node started again.
//!
//! Clock faults move one node's wall clock (`CLOCK_REALTIME`) through
//! libfaketime ([`crate::fake_clock`]; every node of a run with a clock
//! fault runs with it preloaded), as Jepsen's clock nemesis does:
//! `clock-skew` bumps it by a seed-drawn offset of 1 s to 5 min, forward or
//! back, and resets it after the hold; `clock-strobe` flips it between that
//! offset and the real time every 100-1000 ms for the hold, then resets
//! it. The monotonic clock is not moved (a stepped clock does not move it
//! either).

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::cluster::ChaosCluster;
use super::history::{NemesisEvent, NodeProblem};
use super::network::{self, Degradation, Partition};
use crate::power_loss::PowerLoss;

/// One kind of fault the nemesis can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// SIGKILL one node, then start it again on the same data.
    Kill,
    /// SIGSTOP one node past its broker session timeout, then SIGCONT.
    Pause,
    /// SIGTERM every node in turn and start it again (a rolling restart);
    /// a node still running 30 s after SIGTERM is a failure.
    RollingRestart,
    /// Cut one node from both others, both ways, then heal
    /// ([`Partition::Isolate`]).
    Isolate,
    /// Cut the two nodes other than the step's node from each other; the
    /// step's node reaches both ([`Partition::Bridge`]).
    Bridge,
    /// Drop one node's packets to both others, then heal
    /// ([`Partition::OneWay`]).
    OneWay,
    /// SIGKILL one node and cut its files to what it fsynced (a power
    /// loss, [`PowerLoss::Lose`]), then start it again.
    LoseUnsynced,
    /// As [`Fault::LoseUnsynced`] with a torn unsynced tail
    /// ([`PowerLoss::Torn`]).
    TornWrite,
    /// Make every `fdatasync` of one node fail with EIO; the node must halt
    /// (exit non-zero) within [`HALT_BOUND`]. Then the disk works again and
    /// the node is started.
    FsyncEio,
    /// Drop [`LOSS_PERCENT`] % of the packets between one node and the
    /// others, both ways, then heal ([`Degradation::Loss`]).
    Lossy,
    /// Limit the packets between one node and the others to
    /// [`SLOW_KBIT`] kbit/s each way, then heal ([`Degradation::Slow`]).
    Slow,
    /// Move one node's wall clock by the step's [`ClockShift::offset_s`]
    /// (forward or back), hold, then set it to the real time again.
    ClockSkew,
    /// Flip one node's wall clock between the step's offset and the real
    /// time every [`ClockShift::period`] for the hold, then reset it.
    ClockStrobe,
    /// Make every write of one node to its partition logs, checkpoints and
    /// snapshots fail with EIO (not the controller's Raft log, which is
    /// outside the seam); the node must halt within [`HALT_BOUND`]. Then
    /// the disk works again and the node is started.
    WriteEio,
    /// Fill one node's data dir (a tmpfs of
    /// [`DATA_DIR_TMPFS_BYTES`](super::cluster::DATA_DIR_TMPFS_BYTES),
    /// mounted only for runs with this fault) so its writes get ENOSPC; the
    /// node must halt within [`HALT_BOUND`]. Then the filler is removed and
    /// the node is started.
    DiskFull,
}

/// The share of packets a [`Fault::Lossy`] drops, %.
pub const LOSS_PERCENT: u32 = 30;
/// The rate a [`Fault::Slow`] leaves a node's links, kbit/s.
pub const SLOW_KBIT: u32 = 256;

/// How long a node may keep running after its disk starts failing.
pub const HALT_BOUND: Duration = Duration::from_secs(20);

impl Fault {
    /// Every fault this harness can inject.
    pub const ALL: [Fault; 15] = [
        Fault::Kill,
        Fault::Pause,
        Fault::RollingRestart,
        Fault::Isolate,
        Fault::Bridge,
        Fault::OneWay,
        Fault::LoseUnsynced,
        Fault::TornWrite,
        Fault::FsyncEio,
        Fault::Lossy,
        Fault::Slow,
        Fault::ClockSkew,
        Fault::ClockStrobe,
        Fault::WriteEio,
        Fault::DiskFull,
    ];

    /// The name used on the command line and in run rows.
    pub fn name(self) -> &'static str {
        match self {
            Self::Kill => "kill",
            Self::Pause => "pause",
            Self::RollingRestart => "rolling-restart",
            Self::LoseUnsynced => "lose-unsynced",
            Self::TornWrite => "torn-write",
            Self::FsyncEio => "fsync-eio",
            Self::WriteEio => "write-eio",
            Self::DiskFull => "disk-full",
            Self::Isolate => "isolate",
            Self::Bridge => "bridge",
            Self::OneWay => "one-way",
            Self::Lossy => "lossy",
            Self::Slow => "slow",
            Self::ClockSkew => "clock-skew",
            Self::ClockStrobe => "clock-strobe",
        }
    }

    /// True when the fault needs the nodes in a
    /// [`ChaosNetwork`](super::network::ChaosNetwork).
    pub fn needs_network(self) -> bool {
        self.partition(1).is_some() || self.degradation(1).is_some()
    }

    /// The degraded links of this fault on `node`, or `None`.
    pub fn degradation(self, node: i32) -> Option<Degradation> {
        match self {
            Self::Lossy => Some(Degradation::Loss {
                node,
                percent: LOSS_PERCENT,
            }),
            Self::Slow => Some(Degradation::Slow {
                node,
                kbit: SLOW_KBIT,
            }),
            _ => None,
        }
    }

    /// The network fault of this fault on `node`, or `None` for a process
    /// fault. A run with a network fault runs its nodes in a
    /// [`ChaosNetwork`](super::network::ChaosNetwork).
    pub fn partition(self, node: i32) -> Option<Partition> {
        match self {
            Self::Isolate => Some(Partition::Isolate(node)),
            Self::Bridge => Some(Partition::Bridge { middle: node }),
            Self::OneWay => Some(Partition::OneWay(node)),
            Self::Kill
            | Self::Pause
            | Self::RollingRestart
            | Self::LoseUnsynced
            | Self::TornWrite
            | Self::FsyncEio
            | Self::Lossy
            | Self::Slow
            | Self::ClockSkew
            | Self::ClockStrobe
            | Self::WriteEio
            | Self::DiskFull => None,
        }
    }

    /// True for the faults that move a node's clock: a run with one starts
    /// its nodes with libfaketime preloaded.
    pub fn moves_clocks(self) -> bool {
        matches!(self, Self::ClockSkew | Self::ClockStrobe)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Fault::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown fault {s:?}; known: {}",
                    Fault::ALL.map(Fault::name).join(", ")
                )
            })
    }
}

/// How a clock fault moves a node's wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockShift {
    /// Seconds added to the real time (negative: behind); never 0.
    pub offset_s: i64,
    /// For a strobe, how long each setting lasts before the clock flips
    /// (offset, real, offset, ...); `None` for a single skew.
    pub period: Option<Duration>,
}

/// One step of a schedule: wait `quiet`, then inject `fault` on `node`
/// (1-based) and hold it for `hold` before healing it. A rolling restart
/// ignores `node` and `hold` and restarts every node in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Time without faults before this one.
    pub quiet: Duration,
    /// The fault.
    pub fault: Fault,
    /// The node it hits (1..=3).
    pub node: i32,
    /// How long the fault lasts before it is healed.
    pub hold: Duration,
    /// How a clock fault moves the clock; `None` for other faults.
    pub clock: Option<ClockShift>,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fault {
            Fault::RollingRestart => {
                write!(f, "quiet {} ms, rolling-restart", self.quiet.as_millis())
            }
            Fault::Bridge => write!(
                f,
                "quiet {} ms, bridge via node {} for {} ms",
                self.quiet.as_millis(),
                self.node,
                self.hold.as_millis()
            ),
            Fault::ClockSkew | Fault::ClockStrobe => {
                let clock = self.clock.unwrap_or(ClockShift {
                    offset_s: 0,
                    period: None,
                });
                write!(
                    f,
                    "quiet {} ms, {} node {} by {:+} s",
                    self.quiet.as_millis(),
                    self.fault,
                    self.node,
                    clock.offset_s
                )?;
                if let Some(period) = clock.period {
                    write!(f, " every {} ms", period.as_millis())?;
                }
                write!(f, " for {} ms", self.hold.as_millis())
            }
            _ => write!(
                f,
                "quiet {} ms, {} node {} for {} ms",
                self.quiet.as_millis(),
                self.fault,
                self.node,
                self.hold.as_millis()
            ),
        }
    }
}

/// The fault schedule of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The run's seed (the execution's own draws, such as where a torn
    /// write cuts, follow from it too).
    pub seed: u64,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

impl Schedule {
    /// The schedule of `seed` for a run whose fault period lasts `duration`,
    /// drawing each step's fault from `faults` (uniformly), its node from
    /// 1..=3, a quiet period of 1-3 s and a hold of 1-4 s (a pause holds
    /// `session_timeout` plus 0.5-3 s, so the node is fenced; a network
    /// fault 2-6 s, mostly past the session timeout; a clock fault 2-8 s,
    /// with an offset of 1-300 s either way and, for a strobe, a period of
    /// 100-1000 ms). Steps are
    /// added while their nominal end (quiet + hold) fits in `duration`; a
    /// rolling restart counts 6 s.
    ///
    /// # Panics
    ///
    /// If `faults` is empty.
    pub fn generate(
        seed: u64,
        faults: &[Fault],
        duration: Duration,
        session_timeout: Duration,
    ) -> Self {
        assert!(!faults.is_empty(), "a schedule needs at least one fault");
        // One stream per purpose, so the workload's draws never shift it.
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(1);
        let mut steps = Vec::new();
        let mut at = Duration::ZERO;
        loop {
            let fault = faults[rng.gen_range(0..faults.len())];
            let quiet = Duration::from_millis(rng.gen_range(1_000..3_000));
            let node = rng.gen_range(1..=3);
            let hold = match fault {
                Fault::Kill
                | Fault::LoseUnsynced
                | Fault::TornWrite
                | Fault::FsyncEio
                | Fault::WriteEio
                | Fault::DiskFull => Duration::from_millis(rng.gen_range(1_000..4_000)),
                Fault::Pause => session_timeout + Duration::from_millis(rng.gen_range(500..3_000)),
                Fault::RollingRestart => Duration::from_secs(6),
                Fault::Isolate | Fault::Bridge | Fault::OneWay | Fault::Lossy | Fault::Slow => {
                    Duration::from_millis(rng.gen_range(2_000..6_000))
                }
                Fault::ClockSkew | Fault::ClockStrobe => {
                    Duration::from_millis(rng.gen_range(2_000..8_000))
                }
            };
            // Drawn only for clock faults, so the other faults' schedules
            // of a seed stay as they were.
            let clock = fault.moves_clocks().then(|| {
                let magnitude = rng.gen_range(1..=300i64);
                ClockShift {
                    offset_s: if rng.gen_bool(0.5) {
                        magnitude
                    } else {
                        -magnitude
                    },
                    period: (fault == Fault::ClockStrobe)
                        .then(|| Duration::from_millis(rng.gen_range(100..1_000))),
                }
            });
            if at + quiet + hold > duration && !steps.is_empty() {
                return Self { seed, steps };
            }
            at += quiet + hold;
            steps.push(Step {
                quiet,
                fault,
                node,
                hold,
                clock,
            });
        }
    }
}

/// Runs `schedule` on `cluster`, recording every action through `record`,
/// until `until` (the current fault is then still healed; a schedule that
/// ends sooner is followed by quiet). Returns when every node it touched is
/// running again.
pub fn execute(
    cluster: &mut ChaosCluster,
    schedule: &Schedule,
    until: Instant,
    record: &mut dyn FnMut(NemesisEvent),
) {
    for (index, step) in schedule.steps.iter().enumerate() {
        sleep_until(Instant::now() + step.quiet, until);
        if Instant::now() >= until {
            return;
        }
        match step.fault {
            Fault::Kill => {
                kill(cluster, step.node, record);
                sleep_until(Instant::now() + step.hold, until);
                restart(cluster, step.node, "restart", record);
            }
            Fault::Pause => {
                let problem = cluster
                    .pause(step.node)
                    .err()
                    .map(NodeProblem::RestartFailed);
                record(cluster.event(step.node, "SIGSTOP", problem));
                sleep_until(Instant::now() + step.hold, until);
                let problem = cluster
                    .resume(step.node)
                    .err()
                    .map(NodeProblem::RestartFailed);
                record(cluster.event(step.node, "SIGCONT", problem));
            }
            Fault::LoseUnsynced | Fault::TornWrite => {
                let mode = if step.fault == Fault::TornWrite {
                    PowerLoss::Torn
                } else {
                    PowerLoss::Lose
                };
                kill(cluster, step.node, record);
                // Where a torn write cuts follows from the run's seed and
                // the step.
                let mut rng = ChaCha8Rng::seed_from_u64(schedule.seed);
                rng.set_stream(1_000 + index as u64);
                let (action, problem) = match cluster.power_loss(step.node, mode, &mut rng) {
                    Ok(r) => (
                        format!(
                            "power loss ({}): {} of {} files cut, {} bytes",
                            step.fault, r.files_cut, r.files_known, r.bytes_lost
                        ),
                        None,
                    ),
                    Err(e) => (
                        format!("power loss ({})", step.fault),
                        Some(NodeProblem::FaultNotInjected(e)),
                    ),
                };
                record(cluster.event(step.node, &action, problem));
                sleep_until(Instant::now() + step.hold, until);
                restart(cluster, step.node, "restart", record);
            }
            Fault::FsyncEio | Fault::WriteEio | Fault::DiskFull => {
                disk_error(cluster, step.fault, step.node, record);
                sleep_until(Instant::now() + step.hold, until);
                if !cluster.is_running(step.node) {
                    restart(cluster, step.node, "restart", record);
                }
            }
            Fault::RollingRestart => {
                for node in 1..=3 {
                    let problem = cluster.terminate(node).err();
                    record(cluster.event(node, "SIGTERM", problem));
                    restart(cluster, node, "restart", record);
                    // As an operator's rolling restart: the next node only
                    // once every partition is fully replicated again.
                    // A cluster that does not get there is reported after
                    // the final heal (unavailable-after-heal).
                    let _ = cluster.wait_for_full_isr(Duration::from_secs(30));
                }
            }
            Fault::Isolate | Fault::Bridge | Fault::OneWay => {
                let cuts = step
                    .fault
                    .partition(step.node)
                    .map(Partition::cuts)
                    .unwrap_or_default();
                let action = format!("{} (cut {})", step.fault, network::describe(&cuts));
                let problem = cluster.cut(&cuts).err().map(NodeProblem::FaultNotInjected);
                record(cluster.event(step.node, &action, problem));
                hold_and_heal_network(cluster, step, until, record);
            }
            Fault::Lossy | Fault::Slow => {
                let problem = match step.fault.degradation(step.node) {
                    Some(degradation) => cluster
                        .degrade(degradation)
                        .err()
                        .map(NodeProblem::FaultNotInjected),
                    None => Some(NodeProblem::FaultNotInjected(format!(
                        "{} degrades no link",
                        step.fault
                    ))),
                };
                let action = step
                    .fault
                    .degradation(step.node)
                    .map_or_else(|| step.fault.to_string(), |d| d.to_string());
                record(cluster.event(step.node, &action, problem));
                hold_and_heal_network(cluster, step, until, record);
            }
            Fault::ClockSkew | Fault::ClockStrobe => {
                let Some(shift) = step.clock else {
                    let problem =
                        NodeProblem::FaultNotInjected("a clock step without a shift".into());
                    record(cluster.event(step.node, step.fault.name(), Some(problem)));
                    continue;
                };
                clock(cluster, step, shift, until, record);
            }
        }
    }
    sleep_until(until, until);
}

/// Moves `step.node`'s clock by `shift` (once, or flipping every period)
/// for `step.hold`, then back to the real time. A clock that cannot be
/// moved (no libfaketime) is `fault-not-injected`.
fn clock(
    cluster: &mut ChaosCluster,
    step: &Step,
    shift: ClockShift,
    until: Instant,
    record: &mut dyn FnMut(NemesisEvent),
) {
    let node = step.node;
    let action = match shift.period {
        None => format!("clock {:+} s", shift.offset_s),
        Some(period) => format!(
            "clock strobe {:+} s every {} ms",
            shift.offset_s,
            period.as_millis()
        ),
    };
    if let Err(e) = cluster.set_clock(node, shift.offset_s) {
        record(cluster.event(node, &action, Some(NodeProblem::FaultNotInjected(e))));
        return;
    }
    record(cluster.event(node, &action, None));
    let end = Instant::now() + step.hold;
    let mut flips = 0u32;
    let mut failure = None;
    if let Some(period) = shift.period {
        let mut offset = shift.offset_s;
        while Instant::now() + period < end.min(until) {
            sleep_until(Instant::now() + period, until);
            offset = if offset == 0 { shift.offset_s } else { 0 };
            if let Err(e) = cluster.set_clock(node, offset) {
                failure = Some(e);
                break;
            }
            flips += 1;
        }
    }
    sleep_until(end, until);
    let reset = cluster.set_clock(node, 0);
    let action = match shift.period {
        None => "clock reset".to_owned(),
        Some(_) => format!("clock reset after {flips} flips"),
    };
    let problem = failure
        .map_or(reset, Err)
        .err()
        .map(NodeProblem::FaultNotInjected);
    record(cluster.event(node, &action, problem));
}

/// Ends every fault: removes every network cut, sets every moved clock to
/// the real time, resumes paused nodes and starts stopped ones.
pub fn heal(cluster: &mut ChaosCluster, record: &mut dyn FnMut(NemesisEvent)) {
    if cluster.has_network_faults() {
        let problem = cluster
            .heal_network()
            .err()
            .map(NodeProblem::FaultNotInjected);
        record(cluster.event(0, "heal network (final)", problem));
    }
    for node in 1..=3 {
        if cluster.clock_offset(node) != 0 {
            let problem = cluster
                .set_clock(node, 0)
                .err()
                .map(NodeProblem::FaultNotInjected);
            record(cluster.event(node, "clock reset (heal)", problem));
        }
        if cluster.is_paused(node) {
            let problem = cluster.resume(node).err().map(NodeProblem::RestartFailed);
            record(cluster.event(node, "SIGCONT (heal)", problem));
        }
        if !cluster.is_running(node) {
            restart(cluster, node, "restart (heal)", record);
        }
    }
}

/// Makes `node`'s disk fail as `fault` (a disk fault) says, waits up to
/// [`HALT_BOUND`] for the node to halt (SIGKILL and `no-halt-on-disk-error`
/// when it is still running, or exited 0), then heals the disk. A fault
/// that cannot be set or removed is `fault-not-injected`.
fn disk_error(
    cluster: &mut ChaosCluster,
    fault: Fault,
    node: i32,
    record: &mut dyn FnMut(NemesisEvent),
) {
    let (armed, what) = match fault {
        Fault::WriteEio => (
            cluster
                .fail_write(node, true)
                .map(|()| "writes fail with EIO".to_owned()),
            "writes started failing",
        ),
        Fault::DiskFull => (
            cluster
                .fill_disk(node)
                .map(|bytes| format!("disk full (filler of {bytes} bytes)")),
            "its disk filled up",
        ),
        _ => (
            cluster
                .fail_fsync(node, true)
                .map(|()| "fdatasync fails with EIO".to_owned()),
            "fdatasync started failing",
        ),
    };
    let (action, problem) = match armed {
        Ok(action) => (action, None),
        Err(e) => (
            format!("{fault} (not injected)"),
            Some(NodeProblem::FaultNotInjected(e)),
        ),
    };
    let injected = problem.is_none();
    record(cluster.event(node, &action, problem));
    if injected {
        let (action, problem) = match cluster.wait_for_exit(node, HALT_BOUND) {
            Ok(Some(status)) if !status.success() => (format!("halted ({status})"), None),
            Ok(Some(status)) => (
                format!("exited ({status})"),
                Some(NodeProblem::NoHaltOnDiskError(format!(
                    "exited with {status} after {what}, expected a non-zero halt"
                ))),
            ),
            Ok(None) => {
                let _ = cluster.kill(node);
                (
                    "still running: SIGKILL".to_owned(),
                    Some(NodeProblem::NoHaltOnDiskError(format!(
                        "still running {} s after {what}",
                        HALT_BOUND.as_secs()
                    ))),
                )
            }
            Err(e) => ("halt".to_owned(), Some(NodeProblem::FaultNotInjected(e))),
        };
        record(cluster.event(node, &action, problem));
    }
    let (healed, action) = match fault {
        Fault::WriteEio => (cluster.fail_write(node, false), "writes work again"),
        Fault::DiskFull => (cluster.free_disk(node), "disk space freed"),
        _ => (cluster.fail_fsync(node, false), "fdatasync works again"),
    };
    let problem = healed.err().map(NodeProblem::FaultNotInjected);
    record(cluster.event(node, action, problem));
}

/// Holds a network fault for `step.hold` (or until `until`), then removes
/// every cut and degradation and records it.
fn hold_and_heal_network(
    cluster: &mut ChaosCluster,
    step: &Step,
    until: Instant,
    record: &mut dyn FnMut(NemesisEvent),
) {
    sleep_until(Instant::now() + step.hold, until);
    let problem = cluster
        .heal_network()
        .err()
        .map(NodeProblem::FaultNotInjected);
    record(cluster.event(step.node, "heal network", problem));
}

/// SIGKILLs `node` and records it (a failure is `restart-failed`, as the
/// node's state is then unknown).
fn kill(cluster: &mut ChaosCluster, node: i32, record: &mut dyn FnMut(NemesisEvent)) {
    let problem = cluster.kill(node).err().map(NodeProblem::RestartFailed);
    record(cluster.event(node, "SIGKILL", problem));
}

/// Starts `node` again on its data and records it as `action`.
fn restart(
    cluster: &mut ChaosCluster,
    node: i32,
    action: &str,
    record: &mut dyn FnMut(NemesisEvent),
) {
    let problem = cluster
        .start_node(node)
        .err()
        .map(NodeProblem::RestartFailed);
    record(cluster.event(node, action, problem));
}

/// Sleeps until `wake` or `limit`, whichever is sooner.
fn sleep_until(wake: Instant, limit: Instant) {
    let now = Instant::now();
    let end = wake.min(limit);
    if end > now {
        std::thread::sleep(end - now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: Duration = Duration::from_millis(1_500);

    #[test]
    fn a_seed_gives_one_schedule() {
        let a = Schedule::generate(7, &Fault::ALL, Duration::from_secs(60), SESSION);
        let b = Schedule::generate(7, &Fault::ALL, Duration::from_secs(60), SESSION);
        let c = Schedule::generate(8, &Fault::ALL, Duration::from_secs(60), SESSION);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn a_schedule_uses_only_the_chosen_faults_and_fits_its_duration() {
        for seed in 0..50 {
            let schedule =
                Schedule::generate(seed, &[Fault::Pause], Duration::from_secs(30), SESSION);
            let total: Duration = schedule.steps.iter().map(|s| s.quiet + s.hold).sum();
            assert!(total <= Duration::from_secs(30), "{schedule:?}");
            for step in &schedule.steps {
                assert_eq!(step.fault, Fault::Pause);
                assert!((1..=3).contains(&step.node));
                assert!(step.hold > SESSION, "a pause outlasts the session");
            }
        }
    }

    #[test]
    fn a_mixed_schedule_draws_every_fault() {
        let schedule = Schedule::generate(1, &Fault::ALL, Duration::from_secs(600), SESSION);
        for fault in Fault::ALL {
            assert!(schedule.steps.iter().any(|s| s.fault == fault), "{fault}");
        }
    }

    #[test]
    fn network_faults_are_drawn_and_hold_past_the_session() {
        let network = [Fault::Isolate, Fault::Bridge, Fault::OneWay];
        let schedule = Schedule::generate(3, &network, Duration::from_secs(300), SESSION);
        for fault in network {
            assert!(schedule.steps.iter().any(|s| s.fault == fault), "{fault}");
        }
        for step in &schedule.steps {
            assert!(network.contains(&step.fault));
            let hold = step.hold.as_millis();
            assert!((2_000..6_000).contains(&hold), "{step}");
        }
    }

    #[test]
    fn clock_faults_draw_an_offset_both_ways_and_a_strobe_draws_a_period() {
        let clocks = [Fault::ClockSkew, Fault::ClockStrobe];
        let schedule = Schedule::generate(5, &clocks, Duration::from_secs(600), SESSION);
        let offsets: Vec<i64> = schedule
            .steps
            .iter()
            .map(|s| s.clock.expect("a clock step has a shift").offset_s)
            .collect();
        assert!(offsets.iter().any(|&o| o > 0) && offsets.iter().any(|&o| o < 0));
        assert!(
            offsets.iter().all(|o| (1..=300).contains(&o.abs())),
            "{offsets:?}"
        );
        for step in &schedule.steps {
            let clock = step.clock.unwrap();
            let hold = step.hold.as_millis();
            assert!((2_000..8_000).contains(&hold), "{step}");
            match step.fault {
                Fault::ClockSkew => assert_eq!(clock.period, None, "{step}"),
                Fault::ClockStrobe => {
                    let period = clock.period.expect("a strobe has a period").as_millis();
                    assert!((100..1_000).contains(&period), "{step}");
                }
                other => panic!("unexpected {other}"),
            }
        }
        for fault in clocks {
            assert!(schedule.steps.iter().any(|s| s.fault == fault), "{fault}");
        }
    }

    #[test]
    fn clock_draws_leave_other_faults_schedules_alone() {
        let faults = [Fault::Kill, Fault::Pause, Fault::Isolate];
        let schedule = Schedule::generate(11, &faults, Duration::from_secs(300), SESSION);
        assert!(schedule.steps.iter().all(|s| s.clock.is_none()));
        assert!(Fault::ALL
            .iter()
            .all(|f| f.moves_clocks() == matches!(f, Fault::ClockSkew | Fault::ClockStrobe)));
    }

    #[test]
    fn only_network_faults_have_a_partition() {
        assert_eq!(Fault::Isolate.partition(2), Some(Partition::Isolate(2)));
        assert_eq!(
            Fault::Bridge.partition(1),
            Some(Partition::Bridge { middle: 1 })
        );
        assert_eq!(Fault::OneWay.partition(3), Some(Partition::OneWay(3)));
        for fault in [
            Fault::Kill,
            Fault::Pause,
            Fault::RollingRestart,
            Fault::ClockSkew,
            Fault::ClockStrobe,
        ] {
            assert_eq!(fault.partition(1), None, "{fault}");
            assert!(!fault.needs_network(), "{fault}");
        }
    }

    #[test]
    fn lossy_and_slow_degrade_the_steps_node_and_need_the_network() {
        assert_eq!(
            Fault::Lossy.degradation(2),
            Some(Degradation::Loss {
                node: 2,
                percent: LOSS_PERCENT
            })
        );
        assert_eq!(
            Fault::Slow.degradation(3),
            Some(Degradation::Slow {
                node: 3,
                kbit: SLOW_KBIT
            })
        );
        for fault in Fault::ALL {
            let network = fault.partition(1).is_some() || fault.degradation(1).is_some();
            assert_eq!(fault.needs_network(), network, "{fault}");
        }
        assert!(Fault::Lossy.needs_network() && Fault::Isolate.needs_network());
    }

    #[test]
    fn disk_faults_are_drawn_with_a_short_hold_and_no_partition() {
        let disk = [Fault::FsyncEio, Fault::WriteEio, Fault::DiskFull];
        let schedule = Schedule::generate(5, &disk, Duration::from_secs(300), SESSION);
        for fault in disk {
            assert!(schedule.steps.iter().any(|s| s.fault == fault), "{fault}");
            assert_eq!(fault.partition(1), None, "{fault}");
        }
        for step in &schedule.steps {
            assert!(disk.contains(&step.fault));
            let hold = step.hold.as_millis();
            assert!((1_000..4_000).contains(&hold), "{step}");
        }
    }

    #[test]
    fn faults_parse_by_name() {
        for fault in Fault::ALL {
            assert_eq!(fault.name().parse::<Fault>(), Ok(fault));
        }
        assert_eq!("write-eio".parse::<Fault>(), Ok(Fault::WriteEio));
        assert_eq!("disk-full".parse::<Fault>(), Ok(Fault::DiskFull));
        assert!("flood".parse::<Fault>().is_err());
    }
}
