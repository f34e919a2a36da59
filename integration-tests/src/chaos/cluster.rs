//! [`ChaosCluster`]: three combined `weir` nodes (broker and controller)
//! on 127.0.0.1, 127.0.0.2 and 127.0.0.3, ports chosen at run time and
//! kept across restarts (so clients' addresses stay valid, as in a real
//! deployment), with the process faults the nemesis injects: SIGKILL,
//! SIGSTOP/SIGCONT, SIGTERM, and starting a node again on its data; and
//! the disk faults: every node runs with its sync journal on, so a killed
//! node can lose power (what it did not fsync is lost or torn, see
//! [`crate::power_loss`]) and a running one can have its `fdatasync`s or
//! writes fail with EIO; with a data dir tmpfs (runs with `disk-full`),
//! each node's `log.dirs` is a small tmpfs ([`crate::tmpfs`]) the harness
//! can fill. Given a [`ChaosNetwork`], each node runs in its own network
//! namespace on `10.N.M.<node>` instead, and the cluster can cut links
//! between nodes ([`ChaosCluster::cut`], [`ChaosCluster::heal_network`]).
//! Given libfaketime, every node runs with it preloaded and the cluster can
//! move one node's wall clock ([`ChaosCluster::set_clock`], see
//! [`crate::fake_clock`]).
//!
//! Broker sessions are short (heartbeat 200 ms, session 1.5 s) and
//! `replica.lag.time.max.ms` is 3 s, so faults turn into fencing and ISR
//! changes within a few seconds.

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rustix::process::{kill_process, Pid, Signal};

use super::client::{self, Versions};
use super::history::{NemesisEvent, NodeProblem};
use super::network::{ChaosNetwork, Cut, Degradation};
use crate::error::HarnessError;
use crate::power_loss::{PowerLoss, PowerLossReport};
use crate::{RawClient, TestBroker};

/// `broker.session.timeout.ms` of every node.
pub const SESSION_TIMEOUT: Duration = Duration::from_millis(1_500);

/// Overrides every node gets (besides listeners and voters).
const NODE_CONFIG: [(&str, &str); 3] = [
    ("broker.heartbeat.interval.ms", "200"),
    ("broker.session.timeout.ms", "1500"),
    ("replica.lag.time.max.ms", "3000"),
];

/// Three nodes of one cluster and the topic the workload uses.
#[derive(Debug)]
pub struct ChaosCluster {
    brokers: Vec<TestBroker>,
    addresses: Vec<String>,
    paused: BTreeSet<i32>,
    started: Instant,
    /// The workload's topic, watched by [`Self::wait_for_full_isr`].
    pub topic: String,
    versions: Option<Versions>,
    /// The nodes' namespaces and cuts; `None` when they run on 127.0.0.x.
    /// Declared after `brokers`, so the nodes stop before it is removed.
    network: Option<ChaosNetwork>,
    /// The libfaketime every node preloads, or why there is none.
    fake_clock: Result<PathBuf, String>,
    /// Each node's clock offset in seconds, when not 0.
    clock_offsets: BTreeMap<i32, i64>,
    /// Why the nodes' data dirs are not on a tmpfs although the run asked
    /// for one (a disk-full step is then `fault-not-injected`).
    tmpfs_error: Option<String>,
}

/// The size of each node's data dir tmpfs, bytes: room for a few minutes of
/// the chaos workload (sparse index files take no pages), small enough to
/// fill in a moment.
pub const DATA_DIR_TMPFS_BYTES: u64 = 256 << 20;

/// A free port on `host` (bound, then released).
fn free_port(host: &str) -> Result<u16, String> {
    let listener = TcpListener::bind((host, 0)).map_err(|e| format!("binding {host}:0: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("reading the port bound on {host}: {e}"))
}

impl ChaosCluster {
    /// Formats and starts nodes 1..=3 with one new cluster id; times in
    /// events count from `started`. With `network`, node N runs in its
    /// namespace and listens on its address there (ports picked on
    /// 127.0.0.1 just for a number: in a fresh namespace every port is
    /// free); without, on 127.0.0.N. With `fake_clock` `Ok(libfaketime)`,
    /// every node preloads it ([`crate::TestBrokerBuilder::fake_clock`]);
    /// `Err(why)` runs the real clock and is what [`Self::set_clock`]
    /// answers. With `tmpfs_bytes`, each node's data
    /// dir is a tmpfs of that size; when a probe mount fails (not root),
    /// the nodes start on the normal file system and
    /// [`Self::fill_disk`] reports why.
    ///
    /// # Errors
    ///
    /// A message when a port cannot be bound or a node does not start.
    pub fn start(
        topic: &str,
        started: Instant,
        network: Option<ChaosNetwork>,
        fake_clock: Result<PathBuf, String>,
        tmpfs_bytes: Option<u64>,
    ) -> Result<Self, String> {
        let (tmpfs_bytes, tmpfs_error) = match tmpfs_bytes.map(probe_tmpfs) {
            Some(Ok(bytes)) => (Some(bytes), None),
            Some(Err(e)) => (None, Some(e)),
            None => (None, None),
        };
        let hosts: Vec<String> = match &network {
            Some(net) => (1..=3).map(|i| net.address(i)).collect(),
            None => (1..=3).map(|i| format!("127.0.0.{i}")).collect(),
        };
        let namespaces: Vec<Option<String>> = (1..=3)
            .map(|i| network.as_ref().map(|net| net.namespace(i)))
            .collect();
        let mut client_ports = Vec::new();
        let mut controller_ports = Vec::new();
        for host in &hosts {
            let host = if network.is_some() { "127.0.0.1" } else { host };
            client_ports.push(free_port(host)?);
            controller_ports.push(free_port(host)?);
        }
        let voters = hosts
            .iter()
            .zip(&controller_ports)
            .enumerate()
            .map(|(i, (host, port))| format!("{}@{host}:{port}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let cluster_id = random_cluster_id();
        let starting: Vec<_> = (0..3)
            .map(|i| {
                let listeners = format!(
                    "PLAINTEXT://{}:{},CONTROLLER://{}:{}",
                    hosts[i], client_ports[i], hosts[i], controller_ports[i]
                );
                let (voters, cluster_id) = (voters.clone(), cluster_id.clone());
                let namespace = namespaces[i].clone();
                let library = fake_clock.as_ref().ok().cloned();
                std::thread::spawn(move || {
                    let mut builder = TestBroker::builder()
                        .node_id(i as i32 + 1)
                        .format_cluster_id(&cluster_id)
                        .sync_journal(true)
                        .override_config("listeners", &listeners)
                        .override_config("controller.quorum.voters", &voters);
                    for (key, value) in NODE_CONFIG {
                        builder = builder.override_config(key, value);
                    }
                    if let Some(namespace) = &namespace {
                        builder = builder.network_namespace(namespace);
                    }
                    if let Some(library) = &library {
                        builder = builder.fake_clock(library);
                    }
                    if let Some(bytes) = tmpfs_bytes {
                        builder = builder.data_dir_tmpfs(bytes);
                    }
                    builder.start()
                })
            })
            .collect();
        let mut brokers = Vec::new();
        let mut errors = Vec::new();
        for (i, starter) in starting.into_iter().enumerate() {
            match starter.join() {
                Ok(Ok(broker)) => brokers.push(broker),
                Ok(Err(e)) => errors.push(format!("node {}: {e}", i + 1)),
                Err(_) => errors.push(format!("node {}: the starter panicked", i + 1)),
            }
        }
        if !errors.is_empty() {
            return Err(errors.join("\n"));
        }
        Ok(Self {
            brokers,
            addresses: hosts
                .iter()
                .zip(&client_ports)
                .map(|(h, p)| format!("{h}:{p}"))
                .collect(),
            paused: BTreeSet::new(),
            started,
            topic: topic.to_owned(),
            versions: None,
            network,
            fake_clock,
            clock_offsets: BTreeMap::new(),
            tmpfs_error,
        })
    }

    /// `host:port` of each node's PLAINTEXT listener, node 1 first (valid
    /// across restarts).
    pub fn addresses(&self) -> Vec<String> {
        self.addresses.clone()
    }

    /// Sets the API versions [`Self::wait_for_full_isr`] uses.
    pub fn set_versions(&mut self, versions: Versions) {
        self.versions = Some(versions);
    }

    fn broker(&mut self, node: i32) -> &mut TestBroker {
        &mut self.brokers[(node - 1) as usize]
    }

    /// True when `node`'s process is running (paused or not).
    pub fn is_running(&self, node: i32) -> bool {
        self.brokers[(node - 1) as usize].pid().is_some()
    }

    /// True when `node` is stopped with SIGSTOP.
    pub fn is_paused(&self, node: i32) -> bool {
        self.paused.contains(&node)
    }

    /// A nemesis event for `node` now.
    pub fn event(&self, node: i32, action: &str, problem: Option<NodeProblem>) -> NemesisEvent {
        NemesisEvent {
            at_ms: self.started.elapsed().as_millis() as u64,
            node,
            action: action.to_owned(),
            problem,
        }
    }

    /// Adds the network cuts `cuts` (see [`ChaosNetwork::cut`]).
    ///
    /// # Errors
    ///
    /// A message when the cluster has no network or a cut fails.
    pub fn cut(&mut self, cuts: &BTreeSet<Cut>) -> Result<(), String> {
        self.network
            .as_mut()
            .ok_or("the cluster runs without a ChaosNetwork")?
            .cut(cuts)
    }

    /// Degrades links (see [`ChaosNetwork::degrade`]).
    ///
    /// # Errors
    ///
    /// A message when the cluster has no network or a `tc`/`nft` command
    /// fails.
    pub fn degrade(&mut self, degradation: Degradation) -> Result<(), String> {
        self.network
            .as_mut()
            .ok_or("the cluster runs without a ChaosNetwork")?
            .degrade(degradation)
    }

    /// Removes every network cut and degradation (nothing without a
    /// network).
    ///
    /// # Errors
    ///
    /// As [`ChaosNetwork::heal`] and [`ChaosNetwork::restore`] (both are
    /// tried).
    pub fn heal_network(&mut self) -> Result<(), String> {
        match &mut self.network {
            Some(network) => {
                let healed = network.heal();
                let restored = network.restore();
                healed.and(restored)
            }
            None => Ok(()),
        }
    }

    /// True when a network cut or degradation is in force.
    pub fn has_network_faults(&self) -> bool {
        self.network
            .as_ref()
            .is_some_and(|n| !n.cuts().is_empty() || !n.degraded().is_empty())
    }

    /// Sets `node`'s wall clock to the real time plus `offset_s` seconds
    /// (0: the real time) through its libfaketime offset file; a restarted
    /// node keeps the offset.
    ///
    /// # Errors
    ///
    /// A message when the cluster runs without libfaketime (saying why),
    /// the running node does not have it loaded, or the file cannot be
    /// written.
    pub fn set_clock(&mut self, node: i32, offset_s: i64) -> Result<(), String> {
        if let Err(why) = &self.fake_clock {
            return Err(format!("no fake clock: {why}"));
        }
        self.broker(node)
            .set_clock_offset(offset_s)
            .map_err(|e| e.to_string())?;
        if offset_s == 0 {
            self.clock_offsets.remove(&node);
        } else {
            self.clock_offsets.insert(node, offset_s);
        }
        Ok(())
    }

    /// `node`'s clock offset in seconds (0 when it runs on the real time).
    pub fn clock_offset(&self, node: i32) -> i64 {
        self.clock_offsets.get(&node).copied().unwrap_or(0)
    }

    /// SIGKILL `node` and wait until it is gone.
    ///
    /// # Errors
    ///
    /// A message when it is not running or the signal fails.
    pub fn kill(&mut self, node: i32) -> Result<(), String> {
        self.paused.remove(&node);
        self.broker(node).kill9().map_err(|e| e.to_string())
    }

    /// Applies a power loss of `mode` to the stopped `node` (after
    /// [`Self::kill`]).
    ///
    /// # Errors
    ///
    /// A message when it is running or the journal cannot be applied.
    pub fn power_loss(
        &mut self,
        node: i32,
        mode: PowerLoss,
        rng: &mut dyn rand::RngCore,
    ) -> Result<PowerLossReport, String> {
        self.broker(node)
            .apply_power_loss(mode, rng)
            .map_err(|e| e.to_string())
    }

    /// Makes every `fdatasync` of `node` fail with EIO (`true`) or work
    /// again (`false`).
    ///
    /// # Errors
    ///
    /// A message when the trigger file cannot be written or removed.
    pub fn fail_fsync(&mut self, node: i32, fail: bool) -> Result<(), String> {
        self.broker(node)
            .fail_fsync(fail)
            .map_err(|e| e.to_string())
    }

    /// Makes every write of `node` through its storage seam fail with EIO
    /// (`true`) or work again (`false`).
    ///
    /// # Errors
    ///
    /// A message when the trigger file cannot be written or removed.
    pub fn fail_write(&mut self, node: i32, fail: bool) -> Result<(), String> {
        self.broker(node)
            .fail_write(fail)
            .map_err(|e| e.to_string())
    }

    /// Fills `node`'s data dir tmpfs (see [`crate::tmpfs::Tmpfs::fill`]);
    /// returns the filler's size in bytes.
    ///
    /// # Errors
    ///
    /// A message when the data dir is not on a tmpfs (the probe mount
    /// failed, or the cluster was started without one) or filling fails.
    pub fn fill_disk(&mut self, node: i32) -> Result<u64, String> {
        if let Some(e) = &self.tmpfs_error {
            return Err(format!("no data dir tmpfs: {e}"));
        }
        self.broker(node)
            .tmpfs()
            .ok_or("the cluster was started without data dir tmpfs")?
            .fill()
    }

    /// Removes the filler of [`Self::fill_disk`] from `node`'s data dir
    /// (nothing without a tmpfs or a filler).
    ///
    /// # Errors
    ///
    /// A message when the filler cannot be removed.
    pub fn free_disk(&mut self, node: i32) -> Result<(), String> {
        match self.broker(node).tmpfs() {
            Some(tmpfs) => tmpfs.free(),
            None => Ok(()),
        }
    }

    /// Waits up to `timeout` for `node` to exit on its own; its exit
    /// status, or `None` when it is still running.
    ///
    /// # Errors
    ///
    /// A message when it is not running or cannot be waited for.
    pub fn wait_for_exit(
        &mut self,
        node: i32,
        timeout: Duration,
    ) -> Result<Option<std::process::ExitStatus>, String> {
        self.broker(node)
            .wait_for_exit(timeout)
            .map_err(|e| e.to_string())
    }

    /// Starts `node` again on its data and port.
    ///
    /// # Errors
    ///
    /// The harness's message when it does not come up.
    pub fn start_node(&mut self, node: i32) -> Result<(), String> {
        self.broker(node).start_again().map_err(|e| e.to_string())
    }

    /// SIGTERM `node` and wait for it to exit (a controlled shutdown).
    ///
    /// # Errors
    ///
    /// [`NodeProblem::SigtermHang`] when it is still running after 30 s
    /// (it is then killed), [`NodeProblem::SigtermExitStatus`] when it
    /// exits other than 0 or cannot be signalled.
    pub fn terminate(&mut self, node: i32) -> Result<(), NodeProblem> {
        match self.broker(node).shutdown() {
            Ok(status) if status.success() => Ok(()),
            Ok(status) => Err(NodeProblem::SigtermExitStatus(status.to_string())),
            Err(HarnessError::Timeout { .. }) => Err(NodeProblem::SigtermHang),
            Err(e) => Err(NodeProblem::SigtermExitStatus(e.to_string())),
        }
    }

    /// SIGSTOP `node`.
    ///
    /// # Errors
    ///
    /// A message when it is not running or the signal fails.
    pub fn pause(&mut self, node: i32) -> Result<(), String> {
        self.signal(node, Signal::STOP, "SIGSTOP")?;
        self.paused.insert(node);
        Ok(())
    }

    /// SIGCONT `node`.
    ///
    /// # Errors
    ///
    /// A message when it is not running or the signal fails.
    pub fn resume(&mut self, node: i32) -> Result<(), String> {
        self.paused.remove(&node);
        self.signal(node, Signal::CONT, "SIGCONT")
    }

    fn signal(&mut self, node: i32, signal: Signal, name: &str) -> Result<(), String> {
        let pid = self
            .broker(node)
            .pid()
            .ok_or_else(|| format!("node {node} is not running"))?;
        let pid = Pid::from_raw(pid as i32).ok_or_else(|| format!("bad pid {pid}"))?;
        kill_process(pid, signal).map_err(|e| format!("{name} to node {node}: {e}"))
    }

    /// The topic's state in every node's Metadata when every node answers
    /// and every partition has a leader and an ISR of all three nodes;
    /// otherwise `Err` with what was seen.
    ///
    /// # Errors
    ///
    /// A description of the first node or partition that is not ready.
    pub fn full_isr_everywhere(&self) -> Result<(), String> {
        let versions = self.versions.ok_or("no API versions negotiated yet")?;
        for (i, address) in self.addresses.iter().enumerate() {
            let mut client = RawClient::connect(address).map_err(|e| e.to_string())?;
            client
                .set_read_timeout(Duration::from_secs(5))
                .map_err(|e| e.to_string())?;
            let state = client::topic_state(&mut client, &versions, &self.topic)?
                .ok_or_else(|| format!("node {} does not know {}", i + 1, self.topic))?;
            for p in &state.partitions {
                if p.error != 0 || p.leader < 1 || p.isr != [1, 2, 3] {
                    return Err(format!("node {}: {p:?}", i + 1));
                }
            }
            if state.partitions.is_empty() {
                return Err(format!("node {}: {} has no partitions", i + 1, self.topic));
            }
        }
        Ok(())
    }

    /// Polls [`Self::full_isr_everywhere`] every 100 ms for at most
    /// `timeout`; returns how long it took, or the last state seen.
    ///
    /// # Errors
    ///
    /// The last state when the bound passes.
    pub fn wait_for_full_isr(&self, timeout: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        loop {
            match self.full_isr_everywhere() {
                Ok(()) => return Ok(start.elapsed()),
                Err(e) if start.elapsed() >= timeout => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// Keeps every node's directory (data and stderr log) after the cluster
    /// is dropped; returns their paths.
    pub fn keep_dirs(&mut self) -> Vec<PathBuf> {
        self.brokers
            .iter_mut()
            .filter_map(TestBroker::keep_dir)
            .collect()
    }
}

/// Mounts and removes a tmpfs of `bytes` on a temp dir: `bytes` when that
/// works, else why not.
fn probe_tmpfs(bytes: u64) -> Result<u64, String> {
    let dir = tempfile::Builder::new()
        .prefix("weir-chaos-tmpfs-probe-")
        .tempdir()
        .map_err(|e| format!("creating a probe dir: {e}"))?;
    crate::tmpfs::Tmpfs::mount(dir.path(), 1 << 20).map(|_| bytes)
}

/// A new Kafka cluster id: 16 random bytes as 22 base64url characters, not
/// starting with `-` (as `kafka-storage random-uuid`).
fn random_cluster_id() -> String {
    use base64::Engine as _;
    loop {
        let uuid = uuid::Uuid::new_v4();
        let text = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid.as_bytes());
        if !text.starts_with('-') {
            return text;
        }
    }
}
