//! Running the real `weir` binary for a test: [`TestBroker`] (one process)
//! and [`TestCluster`] (the brokers of one test).
//!
//! Each broker gets its own temporary directory holding `server.properties`,
//! `log.dirs` (`data/`) and `weir.stderr.log`. Listeners (`PLAINTEXT` first,
//! then those of [`TestBrokerBuilder::listener`]) bind `127.0.0.1:0`; the
//! real ports are read from the `weir started` line that the binary prints
//! on stdout when it is ready (the contract of `weir`), and a restart asks
//! for the same ports again. The
//! stderr log is printed only when the test fails (the broker is dropped
//! while the thread panics), and then the directory is kept for inspection.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rustix::process::{kill_process, Pid, Signal};
use tempfile::TempDir;
use wait_timeout::ChildExt;

use crate::error::HarnessError;
use crate::power_loss::{
    apply_power_loss, fail_fsync_trigger, fail_write_trigger, PowerLoss, PowerLossReport,
};
use crate::tls::TestPki;
use crate::tmpfs::Tmpfs;

/// How long a broker may take from spawn to its `weir started` line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a broker may take to exit after SIGTERM or SIGKILL.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
/// How many lines of the stderr log go into error messages.
const STDERR_TAIL_LINES: usize = 40;
/// The environment variable that turns on the broker's power-loss journal.
pub const SYNC_JOURNAL_ENV: &str = "WEIR_TEST_SYNC_JOURNAL";
/// The sync journal's name in the broker's temp dir.
const SYNC_JOURNAL_FILE: &str = "sync-journal";
/// The fake clock's offset file in the broker's temp dir.
const FAKE_CLOCK_FILE: &str = "faketime.rc";

/// The path of the `weir` binary under test.
///
/// `WEIR_BIN` if set; otherwise `weir` in the profile directory that holds
/// the running test binary (`target/<profile>/deps/integration-…` ->
/// `target/<profile>/weir`), which is where `cargo build -p weir-broker`
/// puts it.
///
/// # Panics
///
/// Panics with instructions when the binary does not exist: every test needs
/// it and there is nothing sensible to do without it.
pub fn weir_binary() -> PathBuf {
    let path = match std::env::var_os("WEIR_BIN") {
        Some(path) => PathBuf::from(path),
        None => {
            let exe = std::env::current_exe().expect("current_exe() of the test binary");
            let deps = exe
                .parent()
                .expect("the test binary has a parent directory");
            let profile = deps.parent().unwrap_or(deps);
            profile.join("weir")
        }
    };
    assert!(
        path.is_file(),
        "the weir binary is missing at {}: build it first with `cargo build -p weir-broker` \
         (scripts/test does), or point WEIR_BIN at it",
        path.display()
    );
    path
}

/// Picks a free TCP port on 127.0.0.1 by binding port 0 and releasing it.
///
/// Used for endpoints whose port must be passed in before the process starts
/// (the metrics listener).
///
/// # Errors
///
/// [`HarnessError::Io`] when binding fails.
pub fn free_local_port() -> Result<u16, HarnessError> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| HarnessError::io("binding 127.0.0.1:0", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| HarnessError::io("reading the bound port", e))?
        .port();
    Ok(port)
}

/// Settings for a [`TestBroker`] before it starts.
#[derive(Debug, Clone)]
pub struct TestBrokerBuilder {
    node_id: i32,
    /// Listener names after `PLAINTEXT`, in `listeners` order.
    listeners: Vec<String>,
    /// `sasl.enabled.mechanisms` of the SASL listeners.
    sasl_mechanisms: String,
    config: Vec<(String, String)>,
    overrides: Vec<(String, String)>,
    metrics: bool,
    format_cluster_id: Option<String>,
    /// `--add-scram` values of that `weir format`.
    format_add_scram: Vec<String>,
    open_files_limit: Option<u64>,
    network_namespace: Option<String>,
    sync_journal: bool,
    fake_clock: Option<PathBuf>,
    data_dir_tmpfs: Option<u64>,
}

impl Default for TestBrokerBuilder {
    fn default() -> Self {
        Self {
            node_id: 1,
            listeners: Vec::new(),
            sasl_mechanisms: "PLAIN".to_owned(),
            config: Vec::new(),
            overrides: Vec::new(),
            metrics: false,
            format_cluster_id: None,
            format_add_scram: Vec::new(),
            open_files_limit: None,
            network_namespace: None,
            sync_journal: false,
            fake_clock: None,
            data_dir_tmpfs: None,
        }
    }
}

impl TestBrokerBuilder {
    /// Sets `node.id` (default 1).
    pub fn node_id(mut self, node_id: i32) -> Self {
        self.node_id = node_id;
        self
    }

    /// Adds a listener `NAME://127.0.0.1:0` to `listeners`, after
    /// `PLAINTEXT` (which stays first, so [`TestBroker::port`] is still the
    /// PLAINTEXT port) and after the listeners added before. Its security
    /// protocol comes from `listener.security.protocol.map`, whose Kafka
    /// default maps `SSL`, `SASL_PLAINTEXT` and `SASL_SSL` to themselves
    /// (see [`Self::ssl_listener`], [`Self::sasl_plaintext_listener`] and
    /// [`Self::sasl_ssl_listener`]). Its port is
    /// [`TestBroker::listener_port`]. A name given twice, or `PLAINTEXT`,
    /// is added once. An `override_config("listeners", ..)` replaces the
    /// whole list, these listeners included.
    pub fn listener(mut self, name: &str) -> Self {
        let known = name.eq_ignore_ascii_case(PLAINTEXT)
            || self.listeners.iter().any(|l| l.eq_ignore_ascii_case(name));
        if !known {
            self.listeners.push(name.to_owned());
        }
        self
    }

    /// Adds the listener `SSL` ([`Self::listener`]) and the keys of
    /// [`TestPki::broker_config`] (`ssl.keystore.*` with the PKI's
    /// `server.pem`, `ssl.truststore.*` with its `ca.pem`) to
    /// `server.properties`. `ssl.client.auth` stays the broker's default
    /// (`none`) unless the test sets it with [`Self::config`].
    pub fn ssl_listener(mut self, pki: &TestPki) -> Self {
        self = self.listener("SSL");
        self.config.extend(pki.broker_config());
        self
    }

    /// Adds the listener `SASL_PLAINTEXT` ([`Self::listener`]; Kafka's
    /// default `listener.security.protocol.map` maps it to SASL_PLAINTEXT)
    /// with SASL/PLAIN, as Kafka spells it in `server.properties`:
    ///
    /// ```text
    /// sasl.enabled.mechanisms=PLAIN
    /// listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";
    /// ```
    ///
    /// `users` are `(username, password)` pairs the listener accepts
    /// besides [`crate::sasl::ADMIN`], the broker's own identity (see
    /// [`crate::sasl::plain_jaas_config`]). Its port is
    /// `listener_port("SASL_PLAINTEXT")`.
    pub fn sasl_plaintext_listener(self, users: &[(&str, &str)]) -> Self {
        self.sasl_plain_listener("SASL_PLAINTEXT", users)
    }

    /// Adds the listener `SASL_SSL` (SASL/PLAIN over TLS): the JAAS entry
    /// `listener.name.sasl_ssl.plain.sasl.jaas.config` as
    /// [`Self::sasl_plaintext_listener`] writes it, and the keys of
    /// [`TestPki::broker_config`] (server certificate `server.pem`,
    /// truststore `ca.pem`), as [`Self::ssl_listener`] writes them.
    /// `ssl.client.auth` stays the broker's default (`none`): a SASL_SSL
    /// client proves who it is with its password. Its port is
    /// `listener_port("SASL_SSL")`.
    pub fn sasl_ssl_listener(mut self, pki: &TestPki, users: &[(&str, &str)]) -> Self {
        for (key, value) in pki.broker_config() {
            self.set_config(&key, &value);
        }
        self.sasl_plain_listener("SASL_SSL", users)
    }

    /// Sets `sasl.enabled.mechanisms` of the SASL listeners to
    /// `mechanisms` joined with `,` (default `PLAIN`, in whichever order
    /// this and the SASL listeners are added), for example `["PLAIN",
    /// "SCRAM-SHA-256", "SCRAM-SHA-512"]` (KIP-84: SCRAM users are the
    /// metadata log's, added with `kafka-configs`). PLAIN's JAAS entry is
    /// written whatever the list.
    pub fn sasl_mechanisms(mut self, mechanisms: &[&str]) -> Self {
        self.sasl_mechanisms = mechanisms.join(",");
        if self
            .config
            .iter()
            .any(|(k, _)| k == "sasl.enabled.mechanisms")
        {
            let value = self.sasl_mechanisms.clone();
            self.set_config("sasl.enabled.mechanisms", &value);
        }
        self
    }

    /// Adds listener `name` with [`Self::sasl_mechanisms`] (PLAIN unless
    /// set) and a PLAIN JAAS entry for `users`.
    fn sasl_plain_listener(mut self, name: &str, users: &[(&str, &str)]) -> Self {
        self = self.listener(name);
        let mechanisms = self.sasl_mechanisms.clone();
        self.set_config("sasl.enabled.mechanisms", &mechanisms);
        self.set_config(
            &format!(
                "listener.name.{}.plain.sasl.jaas.config",
                name.to_ascii_lowercase()
            ),
            &crate::sasl::plain_jaas_config(users),
        );
        self
    }

    /// Sets `key` in `server.properties` to `value`, replacing the value an
    /// earlier call gave it (so listeners that share a key write it once).
    fn set_config(&mut self, key: &str, value: &str) {
        match self.config.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value.to_owned(),
            None => self.config.push((key.to_owned(), value.to_owned())),
        }
    }

    /// Adds `key=value` to the generated `server.properties` file.
    pub fn config(mut self, key: &str, value: &str) -> Self {
        self.config.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Adds `--override key=value` to the command line (applied after the
    /// config file, as with `kafka-server-start.sh`).
    pub fn override_config(mut self, key: &str, value: &str) -> Self {
        self.overrides.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Enables the Prometheus endpoint on a run-time port (default: disabled
    /// with an empty `metrics.listener`).
    pub fn metrics(mut self, enabled: bool) -> Self {
        self.metrics = enabled;
        self
    }

    /// Runs `weir format --cluster-id <cluster_id>` on the broker's config
    /// before its first start (the nodes of a multi-voter quorum must share
    /// one cluster id and refuse to start unformatted). Default: not
    /// formatted, so a single node formats itself.
    pub fn format_cluster_id(mut self, cluster_id: &str) -> Self {
        self.format_cluster_id = Some(cluster_id.to_owned());
        self
    }

    /// Adds `--add-scram <credential>` to the `weir format` of
    /// [`Self::format_cluster_id`] (as `kafka-storage format --add-scram`,
    /// e.g. `SCRAM-SHA-512=[name=alice,password=alice-secret]`): a SCRAM
    /// user the new cluster starts with. Repeatable.
    pub fn format_add_scram(mut self, credential: &str) -> Self {
        self.format_add_scram.push(credential.to_owned());
        self
    }

    /// Starts the broker with `RLIMIT_NOFILE` soft and hard limits of `limit`
    /// (as `prlimit --nofile=limit:limit`), for tests of what the broker does
    /// when it runs out of file descriptors. Default: the test's own limits.
    pub fn open_files_limit(mut self, limit: u64) -> Self {
        self.open_files_limit = Some(limit);
        self
    }

    /// Starts the broker (and every restart) in the network namespace
    /// `name` (`/var/run/netns/<name>`, as `ip netns add` creates; the
    /// child joins it with `setns` before exec, so the pid is still
    /// weir's). `weir format` runs in the caller's namespace. Needs root.
    /// Default: the caller's namespace.
    pub fn network_namespace(mut self, name: &str) -> Self {
        self.network_namespace = Some(name.to_owned());
        self
    }

    /// Runs the broker with power-loss journaling
    /// (`WEIR_TEST_SYNC_JOURNAL=<temp dir>/sync-journal`, see
    /// [`crate::power_loss`]), so that [`TestBroker::apply_power_loss`] can
    /// take what was not fsynced after a [`TestBroker::kill9`]. Default: off.
    pub fn sync_journal(mut self, enabled: bool) -> Self {
        self.sync_journal = enabled;
        self
    }

    /// Runs the broker (and every restart) with `library` (libfaketime,
    /// see [`crate::fake_clock::libfaketime`]) preloaded, reading its wall
    /// clock offset from `<temp dir>/faketime.rc`, which starts at `+0`
    /// and which [`TestBroker::set_clock_offset`] rewrites. Default: the
    /// real clock.
    pub fn fake_clock(mut self, library: &Path) -> Self {
        self.fake_clock = Some(library.to_path_buf());
        self
    }

    /// Puts `log.dirs` on a tmpfs of `size_bytes` bytes, mounted before
    /// `weir format` and removed when the broker is dropped (see
    /// [`crate::tmpfs`]; needs root), so a test can fill it
    /// ([`TestBroker::tmpfs`]). Default: `log.dirs` on the temp dir's file
    /// system.
    pub fn data_dir_tmpfs(mut self, size_bytes: u64) -> Self {
        self.data_dir_tmpfs = Some(size_bytes);
        self
    }

    /// Starts the broker and waits for its `weir started` line.
    ///
    /// # Errors
    ///
    /// [`HarnessError::ExitedBeforeReady`], [`HarnessError::NotReady`] or
    /// [`HarnessError::MalformedReadyLine`] when the broker does not come up;
    /// [`HarnessError::Io`] for file or spawn failures, and when the tmpfs
    /// of [`Self::data_dir_tmpfs`] cannot be mounted.
    pub fn start(self) -> Result<TestBroker, HarnessError> {
        let binary = weir_binary();
        let dir = tempfile::Builder::new()
            .prefix("weir-itest-")
            .tempdir()
            .map_err(|e| HarnessError::io("creating the broker's temp dir", e))?;
        let metrics_addr = if self.metrics {
            Some(SocketAddr::from(([127, 0, 0, 1], free_local_port()?)))
        } else {
            None
        };
        let sync_journal = self
            .sync_journal
            .then(|| dir.path().join(SYNC_JOURNAL_FILE));
        let clock_file = dir.path().join(FAKE_CLOCK_FILE);
        if self.fake_clock.is_some() {
            crate::fake_clock::write_offset(&clock_file, 0).map_err(|e| {
                HarnessError::io("starting the fake clock", std::io::Error::other(e))
            })?;
        }
        let data_dir = dir.path().join("data");
        let tmpfs = match self.data_dir_tmpfs {
            Some(size) => {
                std::fs::create_dir(&data_dir)
                    .map_err(|e| HarnessError::io(format!("creating {}", data_dir.display()), e))?;
                let mounted = Tmpfs::mount(&data_dir, size).map_err(|e| {
                    HarnessError::io("mounting the data dir's tmpfs", std::io::Error::other(e))
                })?;
                Some(mounted)
            }
            None => None,
        };
        let mut broker = TestBroker {
            binary,
            sync_journal,
            clock_file,
            tmpfs,
            data_dir,
            log_path: dir.path().join("weir.stderr.log"),
            config_path: dir.path().join("server.properties"),
            dir: Some(dir),
            settings: self,
            metrics_addr,
            child: None,
            port: 0,
            listener_ports: Vec::new(),
            cluster_id: String::new(),
        };
        if let Some(cluster_id) = broker.settings.format_cluster_id.clone() {
            broker.format(&cluster_id)?;
        }
        broker.spawn(Ports::Any)?;
        Ok(broker)
    }
}

/// One running `weir` process with its own temp dir, stopped (SIGKILL) when
/// dropped.
pub struct TestBroker {
    binary: PathBuf,
    /// The sync journal when power-loss journaling is on.
    sync_journal: Option<PathBuf>,
    /// The fake clock's offset file (used when the builder set a fake
    /// clock).
    clock_file: PathBuf,
    /// The tmpfs on `data_dir`, when asked for; declared before `dir` so it
    /// is unmounted (after [`Drop`] killed the process) before the temp dir
    /// is removed.
    tmpfs: Option<Tmpfs>,
    dir: Option<TempDir>,
    data_dir: PathBuf,
    log_path: PathBuf,
    config_path: PathBuf,
    settings: TestBrokerBuilder,
    metrics_addr: Option<SocketAddr>,
    child: Option<Child>,
    port: u16,
    /// Every listener of the last `weir started` line, `(name, port)` in
    /// its order.
    listener_ports: Vec<(String, u16)>,
    cluster_id: String,
}

/// Which ports [`TestBroker::spawn`] writes into `listeners`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ports {
    /// Port 0 for every listener (a first start, or a restart whose old
    /// ports were taken).
    Any,
    /// The ports of the last `weir started` line, each listener its own
    /// (0 for a listener that line did not have).
    Previous,
}

/// The name of the listener that comes first and that [`TestBroker::port`]
/// means.
const PLAINTEXT: &str = "PLAINTEXT";

impl std::fmt::Debug for TestBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestBroker")
            .field("node_id", &self.settings.node_id)
            .field("port", &self.port)
            .field("listeners", &self.listener_ports)
            .field("data_dir", &self.data_dir)
            .field("running", &self.child.is_some())
            .finish()
    }
}

impl TestBroker {
    /// A builder with the defaults: node.id 1, metrics disabled.
    pub fn builder() -> TestBrokerBuilder {
        TestBrokerBuilder::default()
    }

    /// Starts a broker with the defaults.
    ///
    /// # Errors
    ///
    /// As [`TestBrokerBuilder::start`].
    pub fn start() -> Result<Self, HarnessError> {
        Self::builder().start()
    }

    /// `127.0.0.1:<port>` of the PLAINTEXT listener, for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The PLAINTEXT listener's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of listener `name` (ASCII case-insensitive, as in
    /// `listeners`) from the last `weir started` line, or `None` when that
    /// line did not list it.
    pub fn listener_port(&self, name: &str) -> Option<u16> {
        self.listener_ports
            .iter()
            .find(|(listener, _)| listener.eq_ignore_ascii_case(name))
            .map(|&(_, port)| port)
    }

    /// Every listener of the last `weir started` line as `(name, port)`, in
    /// its order.
    pub fn listener_ports(&self) -> &[(String, u16)] {
        &self.listener_ports
    }

    /// `127.0.0.1:<port>` of listener `name`, for `bootstrap.servers` of a
    /// client of that listener (for example `bootstrap_for("SSL")`).
    ///
    /// # Panics
    ///
    /// When the broker has no such listener ([`Self::listener_port`] is
    /// `None`): the test asked for a listener it did not configure.
    #[track_caller]
    pub fn bootstrap_for(&self, name: &str) -> String {
        let port = self.listener_port(name).unwrap_or_else(|| {
            panic!(
                "weir node {} has no listener {name}: its listeners are {:?}",
                self.settings.node_id, self.listener_ports
            )
        });
        format!("127.0.0.1:{port}")
    }

    /// `node.id` of this broker.
    pub fn node_id(&self) -> i32 {
        self.settings.node_id
    }

    /// The cluster id printed in the `weir started` line.
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// The broker's `log.dirs` directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The file that receives the broker's stderr (kept across restarts).
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// `http://127.0.0.1:<port>/metrics`, or `None` when the builder did not
    /// enable metrics.
    pub fn metrics_url(&self) -> Option<String> {
        self.metrics_addr.map(|a| format!("http://{a}/metrics"))
    }

    /// The metrics listener's address, or `None` when metrics are disabled.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The OS process id, or `None` when the broker is not running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends SIGTERM and waits for the process to exit.
    ///
    /// Returns the exit status; the contract says a graceful shutdown exits 0,
    /// which callers assert.
    ///
    /// # Errors
    ///
    /// [`HarnessError::NotRunning`], [`HarnessError::Signal`], or
    /// [`HarnessError::Timeout`] when it does not exit within
    /// [`SHUTDOWN_TIMEOUT`] (it is then killed).
    pub fn shutdown(&mut self) -> Result<ExitStatus, HarnessError> {
        self.signal_and_wait(Signal::TERM, "SIGTERM")
    }

    /// Sends SIGKILL (a crash: nothing is flushed) and waits for the process
    /// to be gone.
    ///
    /// # Errors
    ///
    /// [`HarnessError::NotRunning`], [`HarnessError::Signal`] or
    /// [`HarnessError::Timeout`].
    pub fn kill9(&mut self) -> Result<(), HarnessError> {
        self.signal_and_wait(Signal::KILL, "SIGKILL").map(|_| ())
    }

    /// The broker's sync journal, or `None` when the builder did not turn
    /// power-loss journaling on ([`TestBrokerBuilder::sync_journal`]).
    pub fn sync_journal_path(&self) -> Option<&Path> {
        self.sync_journal.as_deref()
    }

    /// Applies a power loss of `mode` to the stopped broker's files (see
    /// [`crate::power_loss::apply_power_loss`]): what was not fsynced is
    /// lost or torn. Call it after [`Self::kill9`] and before
    /// [`Self::start_again`].
    ///
    /// # Errors
    ///
    /// [`HarnessError::Io`] when the broker is still running, journaling is
    /// off, or the journal cannot be replayed or applied.
    pub fn apply_power_loss(
        &mut self,
        mode: PowerLoss,
        rng: &mut dyn rand::RngCore,
    ) -> Result<PowerLossReport, HarnessError> {
        let refuse =
            |why: &str| HarnessError::io("applying power loss", std::io::Error::other(why));
        if self.child.is_some() {
            return Err(refuse("the broker is still running: kill it first"));
        }
        let journal = self
            .sync_journal
            .as_deref()
            .ok_or_else(|| refuse("power-loss journaling is off for this broker"))?;
        apply_power_loss(journal, mode, rng).map_err(|e| refuse(&e))
    }

    /// The tmpfs `log.dirs` is on, when the builder asked for one
    /// ([`TestBrokerBuilder::data_dir_tmpfs`]).
    pub fn tmpfs(&self) -> Option<&Tmpfs> {
        self.tmpfs.as_ref()
    }

    /// Makes every later `fdatasync` of the broker fail with EIO (`true`,
    /// creating the journal's trigger file, see
    /// [`crate::power_loss::fail_fsync_trigger`]) or work again (`false`).
    /// The broker halts at the first failed sync.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Io`] when journaling is off or the file cannot be
    /// created or removed.
    pub fn fail_fsync(&self, fail: bool) -> Result<(), HarnessError> {
        self.set_trigger(fail_fsync_trigger, fail)
    }

    /// Makes every later write of the broker through its storage seam (the
    /// partition logs, checkpoints and snapshots; not the controller's Raft
    /// log) fail with EIO (`true`, creating the journal's trigger file, see
    /// [`crate::power_loss::fail_write_trigger`]) or work again (`false`).
    /// The broker halts at the first failed write.
    ///
    /// # Errors
    ///
    /// As [`Self::fail_fsync`].
    pub fn fail_write(&self, fail: bool) -> Result<(), HarnessError> {
        self.set_trigger(fail_write_trigger, fail)
    }

    /// Creates (`fail`) or removes the trigger file `trigger` of the journal.
    fn set_trigger(&self, trigger: fn(&Path) -> PathBuf, fail: bool) -> Result<(), HarnessError> {
        let journal = self.sync_journal.as_deref().ok_or_else(|| {
            HarnessError::io(
                "arming a disk failure",
                std::io::Error::other("power-loss journaling is off for this broker"),
            )
        })?;
        let trigger = trigger(journal);
        let result = if fail {
            std::fs::write(&trigger, b"")
        } else {
            match std::fs::remove_file(&trigger) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                other => other,
            }
        };
        result.map_err(|e| HarnessError::io(format!("writing {}", trigger.display()), e))
    }

    /// Moves the broker's wall clock to real time plus `seconds` (negative:
    /// behind), at its next clock call; `0` is the real time again. The
    /// monotonic clock does not move.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Io`] when the builder set no fake clock
    /// ([`TestBrokerBuilder::fake_clock`]), the running broker does not
    /// have libfaketime loaded (so the offset would do nothing), or the
    /// offset file cannot be written.
    pub fn set_clock_offset(&self, seconds: i64) -> Result<(), HarnessError> {
        let refuse = |why: String| HarnessError::io("moving the clock", std::io::Error::other(why));
        let library = self
            .settings
            .fake_clock
            .as_deref()
            .ok_or_else(|| refuse("the broker runs without a fake clock".into()))?;
        if let Some(pid) = self.pid() {
            if !crate::fake_clock::is_loaded(pid, library).map_err(refuse)? {
                return Err(refuse(format!(
                    "{} is not loaded in weir (pid {pid})",
                    library.display()
                )));
            }
        }
        crate::fake_clock::write_offset(&self.clock_file, seconds).map_err(refuse)
    }

    /// Waits up to `timeout` for the broker to exit on its own (a halt);
    /// returns its exit status, or `None` when it is still running then.
    ///
    /// # Errors
    ///
    /// [`HarnessError::NotRunning`], or [`HarnessError::Io`] when waiting
    /// fails.
    pub fn wait_for_exit(&mut self, timeout: Duration) -> Result<Option<ExitStatus>, HarnessError> {
        let child = self.child.as_mut().ok_or(HarnessError::NotRunning)?;
        match child.wait_timeout(timeout) {
            Ok(Some(status)) => {
                self.child = None;
                Ok(Some(status))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(HarnessError::io("waiting for weir to exit", e)),
        }
    }

    /// Starts a stopped broker again on the same `log.dirs`, with every
    /// listener on its old port when they are still free and else on new
    /// ones (see [`Self::bootstrap`] and [`Self::listener_port`]).
    ///
    /// # Errors
    ///
    /// As [`TestBrokerBuilder::start`]; the first failure on the old ports
    /// is retried once on port 0 and only the second failure is returned.
    pub fn start_again(&mut self) -> Result<(), HarnessError> {
        if self.child.is_some() {
            return Err(HarnessError::Io {
                action: "start_again".into(),
                source: std::io::Error::other("the broker is still running"),
            });
        }
        match self.spawn(Ports::Previous) {
            Ok(()) => Ok(()),
            Err(HarnessError::ExitedBeforeReady { .. }) => self.spawn(Ports::Any),
            Err(other) => Err(other),
        }
    }

    /// Graceful restart: SIGTERM, require exit status 0, start again on the
    /// same data (and port if possible).
    ///
    /// # Errors
    ///
    /// Those of [`Self::shutdown`] and [`Self::start_again`], and
    /// [`HarnessError::Io`] when the shutdown exit status is not 0.
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        let status = self.shutdown()?;
        if !status.success() {
            return Err(HarnessError::io(
                "restart",
                std::io::Error::other(format!(
                    "weir exited with {status} after SIGTERM, expected 0; last stderr lines:\n{}",
                    self.stderr_tail()
                )),
            ));
        }
        self.start_again()
    }

    /// Keeps the broker's temporary directory (`server.properties`, `data/`,
    /// the stderr log) after the broker is dropped and returns its path;
    /// `None` when it was kept already. A `data/` on a tmpfs
    /// ([`TestBrokerBuilder::data_dir_tmpfs`]) is still unmounted on drop,
    /// so what it held is not kept.
    pub fn keep_dir(&mut self) -> Option<PathBuf> {
        self.dir.take().map(TempDir::keep)
    }

    /// The last lines of the broker's stderr log.
    pub fn stderr_tail(&self) -> String {
        tail_of_file(&self.log_path, STDERR_TAIL_LINES)
    }

    fn signal_and_wait(
        &mut self,
        signal: Signal,
        name: &'static str,
    ) -> Result<ExitStatus, HarnessError> {
        let mut child = self.child.take().ok_or(HarnessError::NotRunning)?;
        let pid = child.id();
        if let Some(raw) = Pid::from_raw(pid as i32) {
            if let Err(source) = kill_process(raw, signal) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(HarnessError::Signal {
                    signal: name,
                    pid,
                    source,
                });
            }
        }
        match child.wait_timeout(SHUTDOWN_TIMEOUT) {
            Ok(Some(status)) => Ok(status),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(HarnessError::Timeout {
                    what: format!("weir after {name}"),
                    timeout: SHUTDOWN_TIMEOUT,
                })
            }
            Err(e) => Err(HarnessError::io(
                format!("waiting for weir after {name}"),
                e,
            )),
        }
    }

    /// The `listeners` value for a start on `ports`.
    fn listeners_value(&self, ports: Ports) -> String {
        let previous = match ports {
            Ports::Any => &[][..],
            Ports::Previous => &self.listener_ports[..],
        };
        listeners_value(&self.settings.listeners, previous)
    }

    fn write_config(&self, ports: Ports) -> Result<(), HarnessError> {
        let mut text = String::new();
        text.push_str("# generated by weir-integration-tests\n");
        text.push_str(&format!("node.id={}\n", self.settings.node_id));
        text.push_str(&format!("listeners={}\n", self.listeners_value(ports)));
        text.push_str(&format!("log.dirs={}\n", self.data_dir.display()));
        match self.metrics_addr {
            Some(addr) => text.push_str(&format!("metrics.listener={addr}\n")),
            None => text.push_str("metrics.listener=\n"),
        }
        for (key, value) in &self.settings.config {
            text.push_str(&format!("{key}={value}\n"));
        }
        std::fs::write(&self.config_path, text)
            .map_err(|e| HarnessError::io(format!("writing {}", self.config_path.display()), e))
    }

    /// Runs `weir format` with this broker's config and overrides.
    fn format(&self, cluster_id: &str) -> Result<(), HarnessError> {
        self.write_config(Ports::Any)?;
        let mut command = Command::new(&self.binary);
        command
            .arg("format")
            .arg("--config")
            .arg(&self.config_path)
            .arg(format!("--cluster-id={cluster_id}"));
        for credential in &self.settings.format_add_scram {
            command.arg("--add-scram").arg(credential);
        }
        for (key, value) in &self.settings.overrides {
            command.arg("--override").arg(format!("{key}={value}"));
        }
        let output = command.output().map_err(|e| {
            HarnessError::io(format!("running {} format", self.binary.display()), e)
        })?;
        if !output.status.success() {
            return Err(HarnessError::io(
                "weir format",
                std::io::Error::other(format!(
                    "exited with {}: {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                )),
            ));
        }
        Ok(())
    }

    fn spawn(&mut self, ports: Ports) -> Result<(), HarnessError> {
        self.write_config(ports)?;
        let listeners = self.listeners_value(ports);
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .map_err(|e| HarnessError::io(format!("opening {}", self.log_path.display()), e))?;
        let mut stdout_log = stderr
            .try_clone()
            .map_err(|e| HarnessError::io("cloning the log file handle", e))?;
        let _ = writeln!(
            stdout_log,
            "=== weir-integration-tests: starting {} with listeners={listeners} ===",
            self.binary.display()
        );
        let mut command = Command::new(&self.binary);
        command.arg("--config").arg(&self.config_path);
        for (key, value) in &self.settings.overrides {
            command.arg("--override").arg(format!("{key}={value}"));
        }
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", "info");
        }
        match &self.sync_journal {
            Some(journal) => command.env(SYNC_JOURNAL_ENV, journal),
            None => command.env_remove(SYNC_JOURNAL_ENV),
        };
        if let Some(library) = &self.settings.fake_clock {
            command.envs(crate::fake_clock::environment(library, &self.clock_file));
        }
        if let Some(limit) = self.settings.open_files_limit {
            use std::os::unix::process::CommandExt;
            let limit = rustix::process::Rlimit {
                current: Some(limit),
                maximum: Some(limit),
            };
            // SAFETY: the closure runs in the forked child before exec and
            // only makes one raw setrlimit system call (async-signal-safe,
            // no allocation, no lock).
            unsafe {
                command.pre_exec(move || {
                    rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)
                        .map_err(std::io::Error::from)
                });
            }
        }
        if let Some(name) = &self.settings.network_namespace {
            use std::os::fd::{AsFd, OwnedFd};
            use std::os::unix::process::CommandExt;
            let path = Path::new("/var/run/netns").join(name);
            let namespace: OwnedFd = File::open(&path)
                .map_err(|e| HarnessError::io(format!("opening {}", path.display()), e))?
                .into();
            // SAFETY: the closure runs in the forked child before exec and
            // only makes one raw setns system call (async-signal-safe, no
            // allocation, no lock) on a descriptor the parent keeps open
            // (close-on-exec, so weir does not inherit it).
            unsafe {
                command.pre_exec(move || {
                    rustix::thread::move_into_link_name_space(
                        namespace.as_fd(),
                        Some(rustix::thread::LinkNameSpaceType::Network),
                    )
                    .map_err(std::io::Error::from)
                });
            }
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr));
        let mut child = command
            .spawn()
            .map_err(|e| HarnessError::io(format!("spawning {}", self.binary.display()), e))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let (ready_tx, ready_rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            // Forwards the first `weir started` line; copies all stdout into the
            // log and keeps draining it so the broker never blocks on a full pipe.
            let mut ready_tx = Some(ready_tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = writeln!(stdout_log, "[stdout] {line}");
                if line.starts_with("weir started") {
                    if let Some(tx) = ready_tx.take() {
                        let _ = tx.send(line);
                    }
                }
            }
        });
        match ready_rx.recv_timeout(READY_TIMEOUT) {
            Ok(line) => {
                let ready = parse_ready_line(&line)?;
                self.port = ready.port;
                self.listener_ports = ready.listeners;
                self.cluster_id = ready.cluster_id;
                self.child = Some(child);
                Ok(())
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child
                    .wait()
                    .map_err(|e| HarnessError::io("waiting for weir", e))?;
                Err(HarnessError::ExitedBeforeReady {
                    status,
                    stderr_tail: self.stderr_tail(),
                })
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(HarnessError::NotReady {
                    timeout: READY_TIMEOUT,
                    stderr_tail: self.stderr_tail(),
                })
            }
        }
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            let kept = self.dir.take().map(TempDir::keep);
            eprintln!(
                "---- weir node {} stderr ({}) ----\n{}\n---- end of weir node {} stderr; data kept in {:?} ----",
                self.settings.node_id,
                self.log_path.display(),
                tail_of_file(&self.log_path, 400),
                self.settings.node_id,
                kept
            );
        }
    }
}

/// The `listeners` value: `PLAINTEXT` first, then `extra`, each on
/// 127.0.0.1 and on its port in `previous` (matched by name, ASCII
/// case-insensitive), else on port 0.
fn listeners_value(extra: &[String], previous: &[(String, u16)]) -> String {
    std::iter::once(PLAINTEXT)
        .chain(extra.iter().map(String::as_str))
        .map(|name| {
            let port = previous
                .iter()
                .find(|(listener, _)| listener.eq_ignore_ascii_case(name))
                .map_or(0, |&(_, port)| port);
            format!("{name}://127.0.0.1:{port}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The fields of the `weir started` line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ReadyLine {
    /// The first listener's port.
    port: u16,
    /// Every listener, `(name, port)` in the line's order.
    listeners: Vec<(String, u16)>,
    cluster_id: String,
}

/// Parses `weir started node.id=<id> cluster.id=<id>
/// listeners=<NAME>://<host>:<port>[,<NAME>://<host>:<port>...]` (the
/// first listener is PLAINTEXT; every port is the bound one, never 0).
fn parse_ready_line(line: &str) -> Result<ReadyLine, HarnessError> {
    let malformed = || HarnessError::MalformedReadyLine {
        line: line.to_owned(),
    };
    let mut cluster_id = None;
    let mut listeners = Vec::new();
    for token in line.split_whitespace() {
        if let Some(id) = token.strip_prefix("cluster.id=") {
            cluster_id = Some(id.to_owned());
        } else if let Some(list) = token.strip_prefix("listeners=") {
            for listener in list.split(',') {
                let (name, address) = listener.split_once("://").ok_or_else(malformed)?;
                let (_, port_text) = address.rsplit_once(':').ok_or_else(malformed)?;
                let port = port_text.parse::<u16>().map_err(|_| malformed())?;
                if name.is_empty() || port == 0 {
                    return Err(malformed());
                }
                listeners.push((name.to_owned(), port));
            }
        }
    }
    Ok(ReadyLine {
        port: listeners
            .first()
            .map(|&(_, port)| port)
            .ok_or_else(malformed)?,
        listeners,
        cluster_id: cluster_id.ok_or_else(malformed)?,
    })
}

/// The last `lines` lines of a text file (lossy UTF-8), reading at most the
/// last 256 KiB.
fn tail_of_file(path: &Path, lines: usize) -> String {
    let Ok(mut file) = File::open(path) else {
        return format!("<no log at {}>", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(256 * 1024);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return format!("<unreadable log at {}>", path.display());
    }
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The brokers of one test, stopped when dropped.
///
/// Today this is a single-node cluster (the broker is its own one-voter
/// controller quorum); multi-node clusters need the
/// `controller.quorum.voters` wiring of the broker and will be added with it.
#[derive(Debug)]
pub struct TestCluster {
    brokers: Vec<TestBroker>,
}

impl TestCluster {
    /// Starts a single-node cluster from `builder`.
    ///
    /// # Errors
    ///
    /// As [`TestBrokerBuilder::start`].
    pub fn single(builder: TestBrokerBuilder) -> Result<Self, HarnessError> {
        Ok(Self {
            brokers: vec![builder.start()?],
        })
    }

    /// Comma-separated `127.0.0.1:<port>` of every running broker.
    pub fn bootstrap(&self) -> String {
        self.brokers
            .iter()
            .filter(|b| b.pid().is_some())
            .map(TestBroker::bootstrap)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The brokers, in node id order.
    pub fn brokers(&self) -> &[TestBroker] {
        &self.brokers
    }

    /// Mutable access to one broker (to restart or kill it).
    pub fn broker_mut(&mut self, index: usize) -> Option<&mut TestBroker> {
        self.brokers.get_mut(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_line_gives_port_and_cluster_id() {
        let ready = parse_ready_line(
            "weir started node.id=1 cluster.id=abcDEF_123 listeners=PLAINTEXT://127.0.0.1:40123",
        )
        .unwrap();
        assert_eq!(
            ready,
            ReadyLine {
                port: 40123,
                listeners: vec![("PLAINTEXT".into(), 40123)],
                cluster_id: "abcDEF_123".into()
            }
        );
    }

    #[test]
    fn ready_line_with_several_listeners_uses_the_first() {
        let ready = parse_ready_line(
            "weir started node.id=2 cluster.id=x listeners=PLAINTEXT://127.0.0.1:1000,PLAINTEXT://127.0.0.1:2000",
        )
        .unwrap();
        assert_eq!(ready.port, 1000);
    }

    #[test]
    fn sasl_listeners_write_kafkas_keys_once_per_listener() {
        let pki_dir = tempfile::tempdir().unwrap();
        let pki = TestPki::write_to(pki_dir.path()).unwrap();
        let builder = TestBrokerBuilder::default()
            .sasl_plaintext_listener(&[crate::sasl::ALICE])
            .sasl_ssl_listener(&pki, &[("bob", "bob-secret")]);
        assert_eq!(builder.listeners, ["SASL_PLAINTEXT", "SASL_SSL"]);
        let value = |key: &str| {
            let values: Vec<&str> = builder
                .config
                .iter()
                .filter(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
                .collect();
            assert_eq!(values.len(), 1, "{key} written once: {:?}", builder.config);
            values[0].to_owned()
        };
        assert_eq!(value("sasl.enabled.mechanisms"), "PLAIN");
        assert_eq!(
            value("listener.name.sasl_plaintext.plain.sasl.jaas.config"),
            crate::sasl::plain_jaas_config(&[crate::sasl::ALICE])
        );
        assert_eq!(
            value("listener.name.sasl_ssl.plain.sasl.jaas.config"),
            crate::sasl::plain_jaas_config(&[("bob", "bob-secret")])
        );
        for (key, expected) in pki.broker_config() {
            assert_eq!(value(&key), expected);
        }
    }

    #[test]
    fn sasl_mechanisms_apply_before_or_after_the_listeners() {
        let scram = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];
        let before = TestBrokerBuilder::default()
            .sasl_mechanisms(&scram)
            .sasl_plaintext_listener(&[]);
        let after = TestBrokerBuilder::default()
            .sasl_plaintext_listener(&[])
            .sasl_mechanisms(&scram);
        for builder in [before, after] {
            let values: Vec<&str> = builder
                .config
                .iter()
                .filter(|(k, _)| k == "sasl.enabled.mechanisms")
                .map(|(_, v)| v.as_str())
                .collect();
            assert_eq!(values, ["PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"]);
        }
    }

    #[test]
    fn listeners_put_plaintext_first_and_keep_previous_ports_by_name() {
        let extra = vec!["SSL".to_owned()];
        assert_eq!(
            listeners_value(&extra, &[]),
            "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"
        );
        let previous = vec![("ssl".to_owned(), 2001), ("PLAINTEXT".to_owned(), 2000)];
        assert_eq!(
            listeners_value(&extra, &previous),
            "PLAINTEXT://127.0.0.1:2000,SSL://127.0.0.1:2001"
        );
        assert_eq!(
            listeners_value(&[], &[("PLAINTEXT".to_owned(), 2000)]),
            "PLAINTEXT://127.0.0.1:2000"
        );
    }

    #[test]
    fn ready_line_gives_every_listener_by_name() {
        let ready = parse_ready_line(
            "weir started node.id=1 cluster.id=x listeners=PLAINTEXT://127.0.0.1:41234,SSL://127.0.0.1:41235,CONTROLLER://[::1]:41236",
        )
        .unwrap();
        assert_eq!(ready.port, 41234);
        assert_eq!(
            ready.listeners,
            vec![
                ("PLAINTEXT".into(), 41234),
                ("SSL".into(), 41235),
                ("CONTROLLER".into(), 41236)
            ]
        );
    }

    #[test]
    fn ready_line_without_port_is_rejected() {
        for line in [
            "weir started node.id=1 cluster.id=x",
            "weir started node.id=1 cluster.id=x listeners=PLAINTEXT://127.0.0.1:0",
            "weir started node.id=1 listeners=PLAINTEXT://127.0.0.1:5",
            "weir started node.id=1 cluster.id=x listeners=PLAINTEXT://127.0.0.1:notaport",
            "weir started node.id=1 cluster.id=x listeners=PLAINTEXT://127.0.0.1:5,SSL://127.0.0.1:0",
            "weir started node.id=1 cluster.id=x listeners=PLAINTEXT://127.0.0.1:5,127.0.0.1:6",
        ] {
            assert!(
                matches!(
                    parse_ready_line(line),
                    Err(HarnessError::MalformedReadyLine { .. })
                ),
                "{line}"
            );
        }
    }
}
