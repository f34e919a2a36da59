//! `weir-chaos` (run by `scripts/chaos`): fault injection on a real 3-node
//! Weir cluster with a history checker (issue 17).
//!
//! Each run starts a fresh cluster, runs the queue workload while the
//! nemesis injects the run's faults on the schedule its seed gives, heals,
//! drains and checks the history; it prints one row per run (workload,
//! faults, seed, operations, anomalies by kind) and a final line
//! `N passed, N failed`; the exit status is 1 when a run failed. A failed
//! run prints its seed, schedule and anomalies, and keeps its history and
//! node directories.
//!
//! ```text
//! weir-chaos --ci                      the CI tier: short kill, pause,
//!                                      rolling-restart, isolate and
//!                                      lose-unsynced runs
//! weir-chaos --hours 2                 mixed-fault runs for two hours
//! weir-chaos --faults kill,pause --seconds 60 --seed 42 [--runs 3]
//! ```
//!
//! The `weir` binary is `WEIR_BIN`, or `weir` next to this binary. Runs
//! with a network fault (isolate, bridge, one-way) put the nodes in
//! network namespaces and need root and iproute2's `ip`; runs with a
//! clock fault (clock-skew, clock-strobe) preload libfaketime into every
//! node (Debian's `libfaketime`; without it the fault is reported as
//! `fault-not-injected`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use weir_integration_tests::chaos::nemesis::Fault;
use weir_integration_tests::chaos::run::{run, RunResult, RunSpec};

/// Command line of `weir-chaos`.
#[derive(Debug, Parser)]
#[command(
    name = "weir-chaos",
    about = "Fault injection with a history checker on a local 3-node Weir cluster"
)]
struct Args {
    /// The CI tier: one short run per fault (kill, pause, rolling-restart,
    /// isolate, lose-unsynced).
    #[arg(long, conflicts_with = "hours")]
    ci: bool,
    /// Runs of every fault mixed, one after another, for this many hours.
    #[arg(long)]
    hours: Option<f64>,
    /// Faults of each run (comma-separated: kill, pause, rolling-restart,
    /// isolate, bridge, one-way, lose-unsynced, torn-write, fsync-eio, lossy,
    /// slow, clock-skew, clock-strobe); default every fault.
    #[arg(long, value_delimiter = ',')]
    faults: Vec<Fault>,
    /// Seconds of faults per run. Default: 20 with --ci, 60 with --hours,
    /// 30 otherwise.
    #[arg(long)]
    seconds: Option<u64>,
    /// The first run's seed (later runs add 1 each); default random.
    #[arg(long)]
    seed: Option<u64>,
    /// How many runs (without --ci or --hours).
    #[arg(long, default_value_t = 1)]
    runs: u32,
    /// Where failed runs leave their histories.
    #[arg(long, default_value = "target/chaos")]
    out: PathBuf,
    /// Write every run's history to --out, passed or not.
    #[arg(long)]
    keep_history: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if std::env::var_os("WEIR_BIN").is_none() {
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(PathBuf::from))
        {
            // Before any thread starts: set_var is sound here.
            std::env::set_var("WEIR_BIN", dir.join("weir"));
        }
    }
    let first_seed = args.seed.unwrap_or_else(rand::random);
    let seconds = |default| Duration::from_secs(args.seconds.unwrap_or(default));
    let faults = if args.faults.is_empty() {
        Fault::ALL.to_vec()
    } else {
        args.faults.clone()
    };
    let spec = |i: u64, faults: Vec<Fault>, duration| RunSpec {
        workload: "queue",
        faults,
        seed: first_seed.wrapping_add(i),
        duration,
        keep_history: args.keep_history,
    };

    println!("{}", RunResult::header());
    let mut passed = 0;
    let mut failed = 0;
    let mut report = |result: RunResult| {
        println!("{}", result.row());
        if result.passed() {
            passed += 1;
        } else {
            failed += 1;
            eprint!("{}", result.failure_details());
        }
    };
    if args.ci {
        let ci = [
            Fault::Kill,
            Fault::Pause,
            Fault::RollingRestart,
            Fault::Isolate,
            Fault::LoseUnsynced,
        ];
        for (i, fault) in ci.into_iter().enumerate() {
            report(run(&spec(i as u64, vec![fault], seconds(20)), &args.out));
        }
    } else if let Some(hours) = args.hours {
        let end = Instant::now() + Duration::from_secs_f64(hours * 3600.0);
        let mut i = 0;
        while Instant::now() < end {
            report(run(&spec(i, faults.clone(), seconds(60)), &args.out));
            i += 1;
        }
    } else {
        for i in 0..u64::from(args.runs) {
            report(run(&spec(i, faults.clone(), seconds(30)), &args.out));
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
