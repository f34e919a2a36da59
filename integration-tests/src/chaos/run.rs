//! One chaos run: start a cluster, set up and start the workload, run the
//! nemesis schedule of the seed for the fault period, heal, measure
//! recovery, drain, check, and keep the evidence of a failed run.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::checker::{self, Report, PROGRESS_BOUND_MS, RECOVERY_BOUND_MS};
use super::churn;
use super::client::Versions;
use super::cluster::{ChaosCluster, DATA_DIR_TMPFS_BYTES, SESSION_TIMEOUT};
use super::history::{ChurnOutcome, CommitOutcome, History, NemesisEvent, Recovery, SendOutcome};
use super::nemesis::{self, Fault, Schedule};
use super::network::ChaosNetwork;
use super::queue::{Queue, QueueSpec};
use crate::RawClient;

/// What one run does.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The workload's name (`queue`; the only one so far).
    pub workload: &'static str,
    /// The faults the schedule draws from.
    pub faults: Vec<Fault>,
    /// The seed of the schedule and of the workload's choices.
    pub seed: u64,
    /// How long faults are injected.
    pub duration: Duration,
    /// Write the history to the out directory even when the run passed.
    pub keep_history: bool,
}

impl RunSpec {
    /// The faults as a comma-separated list, e.g. `kill,pause`.
    pub fn faults_text(&self) -> String {
        self.faults
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The faults for a run row: `all` for every fault, else as
    /// [`Self::faults_text`].
    pub fn faults_column(&self) -> String {
        let mut faults = self.faults.clone();
        faults.sort_unstable();
        faults.dedup();
        let mut all = Fault::ALL.to_vec();
        all.sort_unstable();
        if faults == all {
            "all".to_owned()
        } else {
            self.faults_text()
        }
    }
}

/// What one run found.
#[derive(Debug)]
pub struct RunResult {
    /// The run.
    pub spec: RunSpec,
    /// Its schedule.
    pub schedule: Schedule,
    /// Sends made.
    pub sends: usize,
    /// Sends acknowledged.
    pub acknowledged: usize,
    /// Records read by the consumers and the drain.
    pub reads: usize,
    /// Nemesis actions taken (signals and restarts).
    pub actions: usize,
    /// Answers the watcher recorded (leaders, high watermarks, quorum).
    pub observations: usize,
    /// Metadata operations of the churn workload (all, acknowledged).
    pub churn: (usize, usize),
    /// OffsetCommits of the consumer group workload (all, acknowledged).
    pub commits: (usize, usize),
    /// The checker's report.
    pub report: Report,
    /// A failure outside the history (the cluster or topic did not come up).
    pub error: Option<String>,
    /// How long the run took.
    pub elapsed: Duration,
    /// The history file and node directories kept for a failed run.
    pub kept: Vec<PathBuf>,
}

impl RunResult {
    /// True when the run found nothing wrong.
    pub fn passed(&self) -> bool {
        self.error.is_none() && self.report.is_valid()
    }

    /// The run's row: workload, faults, seed, operations, anomalies.
    pub fn row(&self) -> String {
        let anomalies = match &self.error {
            Some(_) => "setup-failed".to_owned(),
            None => self.report.summary(),
        };
        format!(
            "{:<6} {:<16} {:>20} {:>7} {:>7} {:>7} {:>8} {:>7} {:>9} {:>9} {:>6.0}s  {}",
            self.spec.workload,
            self.spec.faults_column(),
            self.spec.seed,
            self.actions,
            self.sends,
            self.acknowledged,
            self.reads,
            self.observations,
            format!("{}/{}", self.churn.1, self.churn.0),
            format!("{}/{}", self.commits.1, self.commits.0),
            self.elapsed.as_secs_f64(),
            anomalies
        )
    }

    /// The header line over [`Self::row`]s.
    pub fn header() -> String {
        format!(
            "{:<6} {:<16} {:>20} {:>7} {:>7} {:>7} {:>8} {:>7} {:>9} {:>9} {:>7}  anomalies",
            "run",
            "faults",
            "seed",
            "actions",
            "sends",
            "acked",
            "reads",
            "watched",
            "metadata",
            "commits",
            "time"
        )
    }

    /// What to print for a failed run: seed, schedule, error, up to five
    /// examples of each anomaly kind, and what was kept.
    pub fn failure_details(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "FAILED {} {} seed {} (replay: scripts/chaos --faults {} --seconds {} --seed {})",
            self.spec.workload,
            self.spec.faults_text(),
            self.spec.seed,
            self.spec.faults_text(),
            self.spec.duration.as_secs(),
            self.spec.seed
        );
        let _ = writeln!(out, "  schedule:");
        for step in &self.schedule.steps {
            let _ = writeln!(out, "    {step}");
        }
        if let Some(e) = &self.error {
            let _ = writeln!(out, "  error: {e}");
        }
        for (kind, found) in &self.report.anomalies {
            let _ = writeln!(out, "  {kind} ({}):", found.len());
            for example in found.iter().take(5) {
                let _ = writeln!(out, "    {example}");
            }
        }
        for path in &self.kept {
            let _ = writeln!(out, "  kept {}", path.display());
        }
        out
    }
}

/// Runs `spec`; on failure writes the history to
/// `<out_dir>/<workload>-<seed>.history` and keeps the nodes' directories.
pub fn run(spec: &RunSpec, out_dir: &Path) -> RunResult {
    let started = Instant::now();
    let schedule = Schedule::generate(spec.seed, &spec.faults, spec.duration, SESSION_TIMEOUT);
    let queue = QueueSpec::default();
    let mut result = RunResult {
        spec: spec.clone(),
        schedule: schedule.clone(),
        sends: 0,
        acknowledged: 0,
        reads: 0,
        actions: 0,
        observations: 0,
        churn: (0, 0),
        commits: (0, 0),
        report: Report::default(),
        error: None,
        elapsed: Duration::ZERO,
        kept: Vec::new(),
    };
    let network = if spec.faults.iter().any(|f| f.needs_network()) {
        match ChaosNetwork::create() {
            Ok(network) => Some(network),
            Err(e) => {
                result.error = Some(format!("creating the network namespaces: {e}"));
                result.elapsed = started.elapsed();
                return result;
            }
        }
    } else {
        None
    };
    let fake_clock = if spec.faults.iter().any(|f| f.moves_clocks()) {
        crate::fake_clock::libfaketime()
    } else {
        Err("the run has no clock fault".to_owned())
    };
    // Only runs with disk-full put the data dirs on a tmpfs.
    let tmpfs = spec
        .faults
        .contains(&Fault::DiskFull)
        .then_some(DATA_DIR_TMPFS_BYTES);
    let mut cluster = match ChaosCluster::start(&queue.topic, started, network, fake_clock, tmpfs) {
        Ok(c) => c,
        Err(e) => {
            result.error = Some(format!("starting the cluster: {e}"));
            result.elapsed = started.elapsed();
            return result;
        }
    };
    let history = match run_on(&mut cluster, spec, &schedule, queue, started) {
        Ok(history) => history,
        Err(e) => {
            result.error = Some(e);
            result.kept = cluster.keep_dirs();
            result.elapsed = started.elapsed();
            return result;
        }
    };
    result.report = checker::check(&history);
    result.sends = history.sends.len();
    result.actions = history.nemesis.len();
    result.observations = history.observations.len();
    result.churn = (
        history.churn.len(),
        history
            .churn
            .iter()
            .filter(|c| c.outcome == ChurnOutcome::Ok)
            .count(),
    );
    result.commits = (
        history.commits.len(),
        history
            .commits
            .iter()
            .filter(|c| c.outcome == CommitOutcome::Ok)
            .count(),
    );
    result.acknowledged = history
        .sends
        .iter()
        .filter(|s| matches!(s.outcome, SendOutcome::Ack { .. }))
        .count();
    result.reads = history.polls.iter().map(|p| p.records.len()).sum::<usize>()
        + history
            .drain
            .as_ref()
            .map_or(0, |d| d.records.values().map(Vec::len).sum());
    if !result.report.is_valid() || spec.keep_history {
        let path = out_dir.join(format!("{}-{}.history", spec.workload, spec.seed));
        let text = history.lines().join("\n") + "\n";
        if std::fs::create_dir_all(out_dir)
            .and_then(|()| std::fs::write(&path, text))
            .is_ok()
        {
            result.kept.push(path);
        }
        if !result.report.is_valid() {
            result.kept.extend(cluster.keep_dirs());
        }
    }
    result.elapsed = started.elapsed();
    result
}

/// The run after the cluster is up: the history, or a setup error.
fn run_on(
    cluster: &mut ChaosCluster,
    spec: &RunSpec,
    schedule: &Schedule,
    queue: QueueSpec,
    started: Instant,
) -> Result<History, String> {
    let addresses = cluster.addresses();
    let versions = {
        let mut client = RawClient::connect(&addresses[0]).map_err(|e| e.to_string())?;
        Versions::negotiate(&mut client)?
    };
    cluster.set_versions(versions);
    Queue::setup(&queue, &addresses, &versions)?;
    cluster
        .wait_for_full_isr(Duration::from_secs(30))
        .map_err(|e| format!("the topic never had its full ISR: {e}"))?;
    let workload = Queue::start(queue, addresses.clone(), versions, spec.seed, started)?;

    let nemesis_events: Arc<Mutex<Vec<NemesisEvent>>> = Arc::default();
    let mut record = |event: NemesisEvent| nemesis_events.lock().unwrap().push(event);
    nemesis::execute(
        cluster,
        schedule,
        Instant::now() + spec.duration,
        &mut record,
    );
    nemesis::heal(cluster, &mut record);
    let healed_at = Instant::now();
    let recovery = cluster.wait_for_full_isr(Duration::from_millis(RECOVERY_BOUND_MS));
    let recovery = Recovery {
        healed_at_ms: (healed_at - started).as_millis() as u64,
        ready_after_ms: recovery.as_ref().ok().map(|d| d.as_millis() as u64),
        last_state: recovery.err().unwrap_or_default(),
    };
    if let Some(ready_after_ms) = recovery.ready_after_ms {
        workload.wait_for_progress(
            recovery.healed_at_ms + ready_after_ms,
            Duration::from_millis(PROGRESS_BOUND_MS),
        );
    }
    let mut history = workload.finish();
    if recovery.ready_after_ms.is_some() {
        history.final_metadata = Some(churn::final_metadata(
            &addresses,
            &versions,
            Duration::from_millis(RECOVERY_BOUND_MS),
        ));
    }
    history.nemesis = std::mem::take(&mut *nemesis_events.lock().unwrap());
    history.recovery = Some(recovery);
    Ok(history)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_names_every_fault_as_all_and_a_replay_lists_them() {
        let mut spec = RunSpec {
            workload: "queue",
            faults: Fault::ALL.iter().rev().copied().collect(),
            seed: 1,
            duration: Duration::from_secs(1),
            keep_history: false,
        };
        assert_eq!(spec.faults_column(), "all");
        assert!(spec.faults_text().contains("kill"));
        spec.faults = vec![Fault::Kill, Fault::Pause];
        assert_eq!(spec.faults_column(), "kill,pause");
    }
}
