//! [`LogManager`]: every partition [`Log`] under one log directory
//! (`log.dirs`; one directory for now) and the files Kafka keeps at its top
//! level: `meta.properties`, `recovery-point-offset-checkpoint`,
//! `log-start-offset-checkpoint`, `cleaner-offset-checkpoint`,
//! `replication-offset-checkpoint` (high watermarks, which the broker
//! computes) and the `.lock` file that keeps a second process out. It also picks the log the
//! [`LogCleaner`](crate::log::cleaner) compacts next (Kafka's
//! `LogCleanerManager`). Owns no replication or protocol logic.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::checkpoint;
use crate::error::StorageError;
use crate::fs::{FileSystem, LogDirFailureChannel, LogDirFileSystem, RealFileSystem};
use crate::log::cleaner::{clean_log, CleanerConfig, CleanerError, CleanerStats, LogToClean};
use crate::log::{partition_dir_name, Log, LogConfig, DELETE_DIR_SUFFIX};
use crate::TopicPartition;

/// Kafka's `meta.properties` file name.
pub const META_PROPERTIES_FILE: &str = "meta.properties";
/// Kafka's recovery point checkpoint file name.
pub const RECOVERY_POINT_CHECKPOINT_FILE: &str = "recovery-point-offset-checkpoint";
/// Kafka's log start offset checkpoint file name.
pub const LOG_START_OFFSET_CHECKPOINT_FILE: &str = "log-start-offset-checkpoint";
/// Kafka's cleaner checkpoint file name: each compacted log's first dirty
/// offset.
pub const CLEANER_OFFSET_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
/// Kafka's high watermark checkpoint file name (`ReplicaManager`'s
/// `highWatermarkCheckpoints`): each partition's high watermark, written by
/// [`LogManager::write_high_watermarks`].
pub const REPLICATION_OFFSET_CHECKPOINT_FILE: &str = "replication-offset-checkpoint";
/// Lock file held (flock) while the directory is open.
pub const LOCK_FILE: &str = ".lock";
/// Written by a clean [`LogManager::shutdown`] after every log is flushed and
/// checkpointed, removed when the next start has loaded the logs; while it
/// exists logs are opened without recovery (Kafka's `CleanShutdownFileHandler`,
/// same name and content).
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
/// The clean-shutdown marker's content (Kafka's `CleanShutdownFileHandler`):
/// `{"version":0,"brokerEpoch":<the broker epoch the node shut down with>}`,
/// -1 when it had none.
fn clean_shutdown_content(broker_epoch: i64) -> String {
    format!("{{\"version\":0,\"brokerEpoch\":{broker_epoch}}}")
}

/// The broker epoch a clean-shutdown marker holds, as Kafka's
/// `CleanShutdownFileHandler.read`: its `brokerEpoch` field, or -1 when the
/// content is not such a JSON object (the marker still says the logs were
/// flushed).
fn clean_shutdown_broker_epoch(content: &[u8]) -> i64 {
    serde_json::from_slice::<serde_json::Value>(content)
        .ok()
        .and_then(|v| v.get("brokerEpoch").and_then(serde_json::Value::as_i64))
        .unwrap_or(-1)
}

type SharedLog = Arc<Mutex<Log>>;

/// The logs of one log directory. See the module docs. All methods take
/// `&self`; the map is behind a mutex and each log behind its own.
#[derive(Debug)]
pub struct LogManager {
    /// The directory's file system behind its [`LogDirFileSystem`].
    fs: Arc<dyn FileSystem>,
    /// Reports the directory's first failed sync (see
    /// [`LogManager::dir_failure`]).
    dir_failure: Arc<LogDirFailureChannel>,
    log_dir: PathBuf,
    /// See [`LogManager::previous_broker_epoch`].
    previous_broker_epoch: i64,
    node_id: i32,
    cluster_id: String,
    directory_id: String,
    default_config: LogConfig,
    logs: Mutex<BTreeMap<TopicPartition, SharedLog>>,
    /// Serialises checkpoint writers (they share `<file>.tmp` names).
    checkpoint_lock: Mutex<()>,
    /// First dirty offset of each compacted log
    /// (`cleaner-offset-checkpoint`).
    cleaner_checkpoints: Mutex<HashMap<TopicPartition, i64>>,
    /// Held while a log is cleaned: one cleaning at a time.
    cleaner_lock: Mutex<()>,
    /// Logs whose cleaning failed with a storage error; the cleaner skips
    /// them until they are deleted or the broker restarts (Kafka's
    /// `LogCleanerManager.uncleanablePartitions`).
    uncleanable: Mutex<HashSet<TopicPartition>>,
    /// Held for the manager's lifetime: the flock is released on drop.
    _lock: File,
}

/// Threads [`LogManager::create_missing`] uses at most.
pub const CREATE_THREADS: usize = 4;

/// From how many new logs [`LogManager::create_missing`] creates them on
/// several threads (below, one thread's cost is under a millisecond).
pub const PARALLEL_CREATE_MIN: usize = 32;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A random Kafka-style UUID string (16 random bytes, base64url, no padding:
/// 22 characters), as Kafka's `Uuid.randomUuid().toString()` and
/// `kafka-storage random-uuid`: never one that starts with `-` (it would
/// read as a command-line option) nor the reserved zero and one UUIDs.
pub fn random_kafka_uuid() -> String {
    use base64::Engine as _;
    loop {
        let uuid = uuid::Uuid::new_v4();
        let text = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid.as_bytes());
        if !text.starts_with('-') && uuid.as_u128() > 1 {
            return text;
        }
    }
}

/// True when `id` is a Kafka UUID string: 22 base64url characters (no
/// padding) that decode to 16 bytes, as Kafka's `Uuid.fromString` accepts.
pub fn is_kafka_uuid(id: &str) -> bool {
    use base64::Engine as _;
    id.len() == 22
        && base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(id)
            .is_ok_and(|bytes| bytes.len() == 16)
}

/// The fields of a log directory's `meta.properties` (Kafka's
/// `MetaProperties`, version 1 as written by KRaft's `kafka-storage format`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    /// `cluster.id`: 22-character Kafka UUID string.
    pub cluster_id: String,
    /// `node.id`.
    pub node_id: i32,
    /// `directory.id`, when the file has one.
    pub directory_id: Option<String>,
}

/// Reads `<log_dir>/meta.properties`; `Ok(None)` when the directory is not
/// formatted (no such file).
///
/// # Errors
/// [`StorageError::MalformedFile`] when `cluster.id` or `node.id` is missing
/// or unreadable; [`StorageError::Io`] on other read errors.
pub fn read_meta_properties(log_dir: &Path) -> Result<Option<MetaProperties>, StorageError> {
    let path = log_dir.join(META_PROPERTIES_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StorageError::io("read", &path, e)),
    };
    let props = parse_properties(&text);
    let malformed = |reason: String| StorageError::MalformedFile {
        path: path.clone(),
        reason,
    };
    let node_id = props
        .get("node.id")
        .ok_or_else(|| malformed("missing node.id".to_string()))?;
    let node_id: i32 = node_id
        .parse()
        .map_err(|_| malformed(format!("bad node.id {node_id:?}")))?;
    let cluster_id = props
        .get("cluster.id")
        .cloned()
        .ok_or_else(|| malformed("missing cluster.id".to_string()))?;
    Ok(Some(MetaProperties {
        cluster_id,
        node_id,
        directory_id: props.get("directory.id").cloned(),
    }))
}

/// What [`format_log_dir`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatOutcome {
    /// `meta.properties` was written (version 1, with a new `directory.id`).
    Formatted,
    /// The directory was already formatted with the same cluster and node id
    /// and `ignore_formatted` was set; nothing was written.
    AlreadyFormatted,
}

/// Formats `log_dir` for `node_id` in cluster `cluster_id`, as Kafka's
/// `kafka-storage format -t <cluster_id> -c <config>`: creates the directory
/// and writes `meta.properties` (`version=1`, `cluster.id`, `node.id`, a new
/// random `directory.id`).
///
/// # Errors
/// [`StorageError::AlreadyFormatted`] when the directory already has a
/// `meta.properties`, unless `ignore_formatted` is set and it names the same
/// cluster and node (Kafka's `--ignore-formatted`);
/// [`StorageError::MalformedFile`] when `cluster_id` is not a Kafka UUID
/// string or the existing file is unreadable; [`StorageError::Io`] on file
/// errors.
pub fn format_log_dir(
    log_dir: &Path,
    node_id: i32,
    cluster_id: &str,
    ignore_formatted: bool,
) -> Result<FormatOutcome, StorageError> {
    let path = log_dir.join(META_PROPERTIES_FILE);
    if !is_kafka_uuid(cluster_id) {
        return Err(StorageError::MalformedFile {
            path,
            reason: format!(
                "cluster id {cluster_id:?} is not a Kafka UUID (22 base64url characters of 16 bytes)"
            ),
        });
    }
    if let Some(existing) = read_meta_properties(log_dir)? {
        if ignore_formatted && existing.cluster_id == cluster_id && existing.node_id == node_id {
            return Ok(FormatOutcome::AlreadyFormatted);
        }
        return Err(StorageError::AlreadyFormatted {
            path,
            cluster_id: existing.cluster_id,
            node_id: existing.node_id,
        });
    }
    let fs = RealFileSystem::shared();
    fs.create_dir_all(log_dir)
        .map_err(|e| StorageError::io("create_dir", log_dir, e))?;
    let directory_id = random_kafka_uuid();
    let text = format!(
        "#\n#Written by weir format\ncluster.id={cluster_id}\ndirectory.id={directory_id}\nnode.id={node_id}\nversion=1\n"
    );
    checkpoint::write_atomically(&*fs, &path, text.as_bytes())?;
    Ok(FormatOutcome::Formatted)
}

/// The file of the records a new cluster starts with, in the log
/// directory (Kafka's `bootstrap.checkpoint`, written by `kafka-storage
/// format --add-scram`); its content belongs to the metadata quorum.
pub const BOOTSTRAP_FILE: &str = "bootstrap.json";

/// Writes `contents` as the log directory's [`BOOTSTRAP_FILE`], atomically
/// and durably (creating the directory), before the directory is formatted.
///
/// # Errors
/// The I/O error, naming the file.
pub fn write_bootstrap(log_dir: &Path, contents: &[u8]) -> Result<(), StorageError> {
    let fs = RealFileSystem::shared();
    fs.create_dir_all(log_dir)
        .map_err(|e| StorageError::io("create_dir", log_dir, e))?;
    checkpoint::write_atomically(&*fs, &log_dir.join(BOOTSTRAP_FILE), contents)
}

/// The log directory's [`BOOTSTRAP_FILE`], `None` when there is none.
///
/// # Errors
/// The I/O error of reading an existing file, naming it.
pub fn read_bootstrap(log_dir: &Path) -> Result<Option<Vec<u8>>, StorageError> {
    let path = log_dir.join(BOOTSTRAP_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StorageError::io("read", &path, e)),
    }
}

/// Parses a partition directory name `<topic>-<partition>` (topic names use
/// Kafka's legal characters `[a-zA-Z0-9._-]`).
fn parse_partition_dir(name: &str) -> Option<TopicPartition> {
    let (topic, partition) = name.rsplit_once('-')?;
    let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if topic.is_empty() || !topic.chars().all(legal) {
        return None;
    }
    let partition = partition.parse::<i32>().ok().filter(|p| *p >= 0)?;
    Some(TopicPartition::new(topic, partition))
}

#[cfg(test)]
thread_local! {
    /// Fault point: makes [`remove_delete_dir`] fail on this thread (root
    /// can remove any directory, so permissions cannot provoke it).
    static FAIL_DELETE_DIR_REMOVAL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Removes a leftover `*-delete` directory and everything in it.
fn remove_delete_dir(fs: &dyn FileSystem, path: &Path) -> std::io::Result<()> {
    #[cfg(test)]
    if FAIL_DELETE_DIR_REMOVAL.with(std::cell::Cell::get) {
        return Err(std::io::Error::other("injected fault"));
    }
    fs.remove_dir_all(path)
}

/// Reads a checkpoint of `<topic> <partition> <offset>` lines.
fn read_offsets(path: &Path) -> Result<HashMap<TopicPartition, i64>, StorageError> {
    let mut out = HashMap::new();
    for line in checkpoint::read(path)?.unwrap_or_default() {
        let mut parts = line.split_whitespace();
        let parsed = (|| {
            let topic = parts.next()?;
            let partition = parts.next()?.parse::<i32>().ok()?;
            let offset = parts.next()?.parse::<i64>().ok()?;
            parts
                .next()
                .is_none()
                .then(|| (TopicPartition::new(topic, partition), offset))
        })();
        let (tp, offset) = parsed.ok_or_else(|| StorageError::MalformedFile {
            path: path.to_path_buf(),
            reason: format!("bad checkpoint entry {line:?}"),
        })?;
        out.insert(tp, offset);
    }
    Ok(out)
}

fn write_offsets(
    fs: &dyn FileSystem,
    path: &Path,
    offsets: &[(TopicPartition, i64)],
) -> Result<(), StorageError> {
    let text = checkpoint::encode(
        offsets
            .iter()
            .map(|(tp, o)| format!("{} {} {o}", tp.topic, tp.partition))
            .collect::<Vec<_>>(),
    );
    checkpoint::write_atomically(fs, path, text.as_bytes())
}

/// Parses Java `Properties` text (`key=value` lines, `#`/`!` comments).
fn parse_properties(text: &str) -> HashMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| {
            let (k, v) = l.split_once(['=', ':'])?;
            Some((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

/// Kafka's default `num.recovery.threads.per.data.dir` (KIP-1030, 4.0):
/// what [`LogManager::open`] uses.
pub const DEFAULT_RECOVERY_THREADS: usize = 2;

/// Runs `work` on every item of `items` on `threads` scoped threads
/// (`<name>-<n>`, each taking the next item not taken), and returns the
/// results in `items`' order. After a failure the threads stop taking
/// items, and the error of the lowest-indexed failed item is returned
/// (every item before it was taken). A panic in `work` is resumed on the
/// caller.
fn in_parallel<T: Sync, L: Send>(
    items: &[T],
    threads: usize,
    name: &str,
    log_dir: &Path,
    work: impl Fn(&T) -> Result<L, StorageError> + Sync,
) -> Result<Vec<L>, StorageError> {
    let threads = threads.clamp(1, items.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = std::sync::atomic::AtomicBool::new(false);
    let take = || {
        let mut opened = Vec::new();
        while !failed.load(Ordering::Acquire) {
            let i = next.fetch_add(1, Ordering::AcqRel);
            let Some(item) = items.get(i) else {
                break;
            };
            let result = work(item);
            if result.is_err() {
                failed.store(true, Ordering::Release);
            }
            opened.push((i, result));
        }
        opened
    };
    let mut results: Vec<(usize, Result<L, StorageError>)> = std::thread::scope(|scope| {
        let mut workers = Vec::with_capacity(threads);
        for n in 0..threads {
            let worker = std::thread::Builder::new()
                .name(format!("{name}-{n}"))
                .spawn_scoped(scope, take)
                .map_err(|e| StorageError::io("spawn thread", log_dir, e))?;
            workers.push(worker);
        }
        let mut results = Vec::with_capacity(items.len());
        for worker in workers {
            match worker.join() {
                Ok(opened) => results.extend(opened),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        Ok::<_, StorageError>(results)
    })?;
    results.sort_unstable_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, result)| result).collect()
}

/// The metadata quorum's log directory inside the first log dir (Kafka's
/// `__cluster_metadata-0`); it is not a partition log and is left alone.
pub const METADATA_LOG_DIR: &str = "__cluster_metadata-0";

impl LogManager {
    /// Opens `log_dir` (creating it if missing): takes its `.lock`, loads
    /// `meta.properties` (creating it, KRaft version 1, with a random
    /// cluster id and directory id when absent), deletes leftover
    /// `*-delete` directories (one that cannot be removed is logged and left
    /// for the next startup, not an error), and opens every `<topic>-<partition>`
    /// directory with `default_config`, recovering each from its checkpointed
    /// recovery point (0 when not checkpointed) and starting it at its
    /// checkpointed log start offset (`log-start-offset-checkpoint`; the
    /// first segment's base offset when not checkpointed).
    ///
    /// # Errors
    /// [`StorageError::LogDirLocked`] if another process holds the directory;
    /// [`StorageError::NodeIdMismatch`] if `meta.properties` names another
    /// node; [`StorageError::MalformedFile`] for unreadable metadata or
    /// checkpoints; [`StorageError::Io`] on file errors.
    pub fn open(
        log_dir: PathBuf,
        node_id: i32,
        default_config: LogConfig,
    ) -> Result<LogManager, StorageError> {
        Self::open_with_file_system(
            RealFileSystem::shared(),
            log_dir,
            node_id,
            default_config,
            DEFAULT_RECOVERY_THREADS,
        )
    }

    /// [`LogManager::open`] with every log, checkpoint and metadata write
    /// going through `fs` (see [`crate::fs`]; tests inject faults there),
    /// behind the directory's [`LogDirFileSystem`], opening (and
    /// recovering) the partitions' logs on `recovery_threads` threads
    /// (`num.recovery.threads.per.data.dir`, Kafka's `LogManager.loadLogs`
    /// pool; at least 1). The `.lock` file is opened directly.
    ///
    /// # Errors
    /// As [`LogManager::open`]; when several logs fail to open, the error
    /// of the first in directory order among those tried.
    pub fn open_with_file_system(
        fs: Arc<dyn FileSystem>,
        log_dir: PathBuf,
        node_id: i32,
        default_config: LogConfig,
        recovery_threads: usize,
    ) -> Result<LogManager, StorageError> {
        let dir_failure = LogDirFailureChannel::new();
        let fs = LogDirFileSystem::wrap(fs, dir_failure.clone());
        fs.create_dir_all(&log_dir)
            .map_err(|e| StorageError::io("create_dir", &log_dir, e))?;
        let lock_path = log_dir.join(LOCK_FILE);
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| StorageError::io("open", &lock_path, e))?;
        rustix::fs::flock(
            &lock_file,
            rustix::fs::FlockOperation::NonBlockingLockExclusive,
        )
        .map_err(|_| StorageError::LogDirLocked {
            path: log_dir.clone(),
        })?;

        let (cluster_id, directory_id) = Self::load_meta_properties(&*fs, &log_dir, node_id)?;
        let recovery_points = read_offsets(&log_dir.join(RECOVERY_POINT_CHECKPOINT_FILE))?;
        let log_start_offsets = read_offsets(&log_dir.join(LOG_START_OFFSET_CHECKPOINT_FILE))?;
        let cleaner_checkpoints = read_offsets(&log_dir.join(CLEANER_OFFSET_CHECKPOINT_FILE))?;

        let clean_shutdown_path = log_dir.join(CLEAN_SHUTDOWN_FILE);
        let had_clean_shutdown = clean_shutdown_path.exists();
        let previous_broker_epoch = if had_clean_shutdown {
            let content = std::fs::read(&clean_shutdown_path)
                .map_err(|e| StorageError::io("read", &clean_shutdown_path, e))?;
            clean_shutdown_broker_epoch(&content)
        } else {
            -1
        };
        let loading_started = std::time::Instant::now();
        let mut partitions = Vec::new();
        let entries =
            std::fs::read_dir(&log_dir).map_err(|e| StorageError::io("read_dir", &log_dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| StorageError::io("read_dir", &log_dir, e))?;
            let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if !is_dir {
                continue;
            }
            if name.ends_with(DELETE_DIR_SUFFIX) {
                let path = entry.path();
                tracing::info!(dir = %path.display(), "removing partition directory scheduled for deletion");
                // A leftover that cannot be removed must not keep every
                // other partition offline; the next startup retries.
                if let Err(error) = remove_delete_dir(&*fs, &path) {
                    tracing::warn!(dir = %path.display(), %error, "cannot remove partition directory scheduled for deletion; leaving it");
                }
                continue;
            }
            if name.ends_with("-future") || name.ends_with("-stray") || name == METADATA_LOG_DIR {
                continue;
            }
            if let Some(tp) = parse_partition_dir(&name) {
                partitions.push(tp);
            }
        }
        let open_log = |tp: &TopicPartition| {
            Log::open_with_file_system(
                fs.clone(),
                log_dir.clone(),
                tp.clone(),
                default_config.clone(),
                recovery_points.get(tp).copied().unwrap_or(0),
                log_start_offsets.get(tp).copied().unwrap_or(0),
                had_clean_shutdown,
            )
        };
        let logs: BTreeMap<TopicPartition, Arc<Mutex<Log>>> = in_parallel(
            &partitions,
            recovery_threads,
            "weir-log-loader",
            &log_dir,
            open_log,
        )?
        .into_iter()
        .zip(partitions)
        .map(|(log, tp)| (tp, Arc::new(Mutex::new(log))))
        .collect();
        tracing::info!(
            dir = %log_dir.display(),
            logs = logs.len(),
            had_clean_shutdown,
            recovered_segments = logs.values().map(|l| lock(l).recovered_segments()).sum::<usize>(),
            elapsed_ms = loading_started.elapsed().as_millis() as u64,
            "loaded logs"
        );
        if had_clean_shutdown {
            // From here on the logs change; a crash must recover them.
            fs.remove_file(&clean_shutdown_path)
                .map_err(|e| StorageError::io("remove", &clean_shutdown_path, e))?;
            fs.sync_dir(&log_dir)
                .map_err(|e| StorageError::io("fsync", &log_dir, e))?;
        }
        Ok(LogManager {
            fs,
            dir_failure,
            log_dir,
            previous_broker_epoch,
            node_id,
            cluster_id,
            directory_id,
            default_config,
            logs: Mutex::new(logs),
            checkpoint_lock: Mutex::new(()),
            cleaner_checkpoints: Mutex::new(cleaner_checkpoints),
            cleaner_lock: Mutex::new(()),
            uncleanable: Mutex::new(HashSet::new()),
            _lock: lock_file,
        })
    }

    fn load_meta_properties(
        fs: &dyn FileSystem,
        log_dir: &Path,
        node_id: i32,
    ) -> Result<(String, String), StorageError> {
        let path = log_dir.join(META_PROPERTIES_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let props = parse_properties(&text);
                let malformed = |reason: String| StorageError::MalformedFile {
                    path: path.clone(),
                    reason,
                };
                let found = props
                    .get("node.id")
                    .ok_or_else(|| malformed("missing node.id".to_string()))?;
                let found: i32 = found
                    .parse()
                    .map_err(|_| malformed(format!("bad node.id {found:?}")))?;
                if found != node_id {
                    return Err(StorageError::NodeIdMismatch {
                        path,
                        found,
                        expected: node_id,
                    });
                }
                let cluster_id = props
                    .get("cluster.id")
                    .cloned()
                    .ok_or_else(|| malformed("missing cluster.id".to_string()))?;
                let directory_id = props
                    .get("directory.id")
                    .cloned()
                    .unwrap_or_else(random_kafka_uuid);
                Ok((cluster_id, directory_id))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let cluster_id = random_kafka_uuid();
                let directory_id = random_kafka_uuid();
                let text = format!(
                    "#\n#Written by weir\ncluster.id={cluster_id}\ndirectory.id={directory_id}\nnode.id={node_id}\nversion=1\n"
                );
                checkpoint::write_atomically(fs, &path, text.as_bytes())?;
                Ok((cluster_id, directory_id))
            }
            Err(e) => Err(StorageError::io("read", &path, e)),
        }
    }

    /// The cluster id from `meta.properties` (generated on first start).
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// This directory's id (`directory.id` in `meta.properties`).
    pub fn directory_id(&self) -> &str {
        &self.directory_id
    }

    /// The node id the directory belongs to.
    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// The log directory.
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// The config new logs get unless told otherwise.
    pub fn default_config(&self) -> &LogConfig {
        &self.default_config
    }

    /// Every open log, ordered by topic partition.
    pub fn logs(&self) -> Vec<(TopicPartition, Arc<Mutex<Log>>)> {
        lock(&self.logs)
            .iter()
            .map(|(tp, log)| (tp.clone(), log.clone()))
            .collect()
    }

    /// The log of `tp`, if open.
    pub fn get(&self, tp: &TopicPartition) -> Option<Arc<Mutex<Log>>> {
        lock(&self.logs).get(tp).cloned()
    }

    /// The log of `tp`, created (empty, with `config`) if it does not exist;
    /// an existing log takes `config` from now on.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the partition directory cannot be created.
    pub fn get_or_create(
        &self,
        tp: &TopicPartition,
        config: LogConfig,
    ) -> Result<Arc<Mutex<Log>>, StorageError> {
        let mut logs = lock(&self.logs);
        if let Some(log) = logs.get(tp) {
            // Logs found at startup were opened with the broker defaults;
            // the caller knows the topic's own config.
            lock(log).set_config(config);
            return Ok(log.clone());
        }
        let log = Arc::new(Mutex::new(Log::open_with_file_system(
            self.fs.clone(),
            self.log_dir.clone(),
            tp.clone(),
            config,
            0,
            0,
            false,
        )?));
        logs.insert(tp.clone(), log.clone());
        Ok(log)
    }

    /// Creates the logs of `partitions` that are not open, several at once:
    /// a CreateTopics of thousands of partitions spends its time in
    /// file-system calls (mkdir, three file creations and a write per
    /// partition), which run in parallel on [`CREATE_THREADS`] threads
    /// (at most the machine's CPUs) from [`PARALLEL_CREATE_MIN`] logs on.
    /// A log already open keeps its config here; [`LogManager::get_or_create`]
    /// then gives it the caller's. Every log that could be created is
    /// registered, even when another failed.
    ///
    /// # Errors
    /// The first [`StorageError`] a creation returned.
    pub fn create_missing(
        &self,
        partitions: Vec<(TopicPartition, LogConfig)>,
    ) -> Result<(), StorageError> {
        let mut logs = lock(&self.logs);
        let mut missing: Vec<(TopicPartition, LogConfig)> = partitions
            .into_iter()
            .filter(|(tp, _)| !logs.contains_key(tp))
            .collect();
        missing.sort_by(|a, b| a.0.cmp(&b.0));
        missing.dedup_by(|a, b| a.0 == b.0);
        let open = |(tp, config): (TopicPartition, LogConfig)| {
            let log = Log::open_with_file_system(
                self.fs.clone(),
                self.log_dir.clone(),
                tp.clone(),
                config,
                0,
                0,
                false,
            );
            (tp, log)
        };
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(CREATE_THREADS);
        let opened: Vec<(TopicPartition, Result<Log, StorageError>)> =
            if missing.len() < PARALLEL_CREATE_MIN || threads < 2 {
                missing.into_iter().map(open).collect()
            } else {
                let chunk = missing.len().div_ceil(threads);
                let mut chunks = Vec::new();
                while !missing.is_empty() {
                    let rest = missing.split_off(chunk.min(missing.len()));
                    chunks.push(std::mem::replace(&mut missing, rest));
                }
                std::thread::scope(|scope| {
                    let workers: Vec<_> = chunks
                        .into_iter()
                        .map(|c| scope.spawn(move || c.into_iter().map(open).collect::<Vec<_>>()))
                        .collect();
                    workers
                        .into_iter()
                        .flat_map(|w| match w.join() {
                            Ok(opened) => opened,
                            Err(panic) => std::panic::resume_unwind(panic),
                        })
                        .collect()
                })
            };
        let mut first_error = None;
        for (tp, log) in opened {
            match log {
                Ok(log) => {
                    logs.insert(tp, Arc::new(Mutex::new(log)));
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Removes `tp`'s log and its directory (DeleteTopics). Holders of the
    /// log's `Arc` see every later operation fail. Deleting an unknown
    /// partition is a no-op.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the directory cannot be renamed or removed.
    pub fn delete(&self, tp: &TopicPartition) -> Result<(), StorageError> {
        lock(&self.uncleanable).remove(tp);
        lock(&self.cleaner_checkpoints).remove(tp);
        let removed = lock(&self.logs).remove(tp);
        match removed {
            Some(log) => lock(&log).delete_in_place(),
            None => Ok(()),
        }
    }

    /// Writes `recovery-point-offset-checkpoint` and
    /// `log-start-offset-checkpoint` (Kafka's text format: `0`, the count,
    /// then `<topic> <partition> <offset>` lines), each atomically. Flushes
    /// no log. Concurrent callers are serialised.
    ///
    /// # Errors
    /// [`StorageError::Io`] if a file cannot be written.
    pub fn checkpoint(&self) -> Result<(), StorageError> {
        let _serial = lock(&self.checkpoint_lock);
        let mut recovery_points = Vec::new();
        let mut log_start_offsets = Vec::new();
        for (tp, log) in self.logs() {
            let log = lock(&log);
            recovery_points.push((tp.clone(), log.recovery_point()));
            log_start_offsets.push((tp, log.log_start_offset()));
        }
        write_offsets(
            &*self.fs,
            &self.log_dir.join(RECOVERY_POINT_CHECKPOINT_FILE),
            &recovery_points,
        )?;
        write_offsets(
            &*self.fs,
            &self.log_dir.join(LOG_START_OFFSET_CHECKPOINT_FILE),
            &log_start_offsets,
        )
    }

    /// Reads `replication-offset-checkpoint`: the high watermark of each
    /// partition as last written by [`LogManager::write_high_watermarks`]
    /// (Kafka's `Partition.createLogIfNotExists` reads it at startup); an
    /// empty map when the file does not exist. Entries of partitions without
    /// a log are returned too.
    ///
    /// # Errors
    /// [`StorageError::MalformedFile`] if the file is not a valid checkpoint;
    /// [`StorageError::Io`] if it cannot be read.
    pub fn read_high_watermarks(&self) -> Result<HashMap<TopicPartition, i64>, StorageError> {
        read_offsets(&self.log_dir.join(REPLICATION_OFFSET_CHECKPOINT_FILE))
    }

    /// Replaces `replication-offset-checkpoint` with `hws` (Kafka's
    /// `ReplicaManager.checkpointHighWatermarks`, every
    /// `replica.high.watermark.checkpoint.interval.ms`): the same text
    /// format and atomic, durable write as `recovery-point-offset-checkpoint`,
    /// entries sorted. Partitions without an open log (deleted ones) are
    /// left out.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the file cannot be written; the old one then
    /// stays.
    pub fn write_high_watermarks(
        &self,
        hws: &HashMap<TopicPartition, i64>,
    ) -> Result<(), StorageError> {
        let _serial = lock(&self.checkpoint_lock);
        let mut entries: Vec<(TopicPartition, i64)> = {
            let live = lock(&self.logs);
            hws.iter()
                .filter(|(tp, _)| live.contains_key(*tp))
                .map(|(tp, hw)| (tp.clone(), *hw))
                .collect()
        };
        entries.sort();
        write_offsets(
            &*self.fs,
            &self.log_dir.join(REPLICATION_OFFSET_CHECKPOINT_FILE),
            &entries,
        )
    }

    /// [`Log::truncate_to`] on `tp`'s log, with what Kafka's
    /// `LogManager.truncateTo` does around it: a truncation below the active
    /// segment waits for a cleaning pass under way (the cleaner is paused
    /// meanwhile), the cleaner checkpoint is
    /// lowered to the active segment's base offset when it is above
    /// (`maybeTruncateCleanerCheckpointToActiveSegmentBaseOffset`), and the
    /// recovery point and log start offset checkpoints are written
    /// ([`LogManager::checkpoint`]) so that a restart after later appends
    /// recovers from at or below the new end. Returns what
    /// [`Log::truncate_to`] returns; `false` for a partition without a log.
    ///
    /// # Errors
    /// As [`Log::truncate_to`] and [`LogManager::checkpoint`].
    pub fn truncate_to(
        &self,
        tp: &TopicPartition,
        target_offset: i64,
    ) -> Result<bool, StorageError> {
        let Some(log) = self.get(tp) else {
            return Ok(false);
        };
        // Kafka's `abortAndPauseCleaning` when the truncation reaches below
        // the active segment (`needToStopCleaner`): the cleaner reads
        // inactive segments without the log's lock, so a pass under way
        // finishes first and the next one sees the truncated log.
        let below_active = target_offset < lock(&log).active_segment_base_offset();
        let _paused = below_active.then(|| lock(&self.cleaner_lock));
        let (truncated, active_base) = {
            let mut log = lock(&log);
            let truncated = log.truncate_to(target_offset)?;
            (truncated, log.active_segment_base_offset())
        };
        if truncated {
            self.after_truncation(tp, active_base)?;
        }
        Ok(truncated)
    }

    /// [`Log::truncate_fully_and_start_at`] on `tp`'s log, then the cleaner
    /// checkpoint, offset checkpoints and cleaner pause as
    /// [`LogManager::truncate_to`] (Kafka's
    /// `LogManager.truncateFullyAndStartAt`). A partition without a log is a
    /// no-op.
    ///
    /// # Errors
    /// As [`Log::truncate_fully_and_start_at`] and [`LogManager::checkpoint`].
    pub fn truncate_fully_and_start_at(
        &self,
        tp: &TopicPartition,
        new_offset: i64,
    ) -> Result<(), StorageError> {
        let Some(log) = self.get(tp) else {
            return Ok(());
        };
        let _paused = lock(&self.cleaner_lock);
        lock(&log).truncate_fully_and_start_at(new_offset)?;
        self.after_truncation(tp, new_offset)
    }

    /// Lowers `tp`'s cleaner checkpoint to `active_base` (Kafka's
    /// `LogCleanerManager.maybeTruncateCheckpoint`) and checkpoints every
    /// log's recovery point and log start offset: what a caller that
    /// truncated `tp`'s log itself (under its own lock, as the broker's
    /// follower does) must run after [`Log::truncate_to`] or
    /// [`Log::truncate_fully_and_start_at`].
    ///
    /// # Errors
    /// I/O errors writing the checkpoints.
    pub fn after_truncation(
        &self,
        tp: &TopicPartition,
        active_base: i64,
    ) -> Result<(), StorageError> {
        let above = self
            .cleaner_checkpoint(tp)
            .is_some_and(|first_dirty| first_dirty > active_base);
        if above {
            self.update_cleaner_checkpoint(tp, active_base)?;
        }
        self.checkpoint()
    }

    /// Pauses the log cleaner while the guard lives (Kafka's
    /// `abortAndPauseCleaning`): a cleaning pass under way finishes first.
    /// For a caller that truncates a log itself, since the cleaner reads
    /// inactive segments without the log's lock. Blocking.
    pub fn pause_cleaning(&self) -> MutexGuard<'_, ()> {
        lock(&self.cleaner_lock)
    }

    /// The checkpointed first dirty offset of `tp`, if any.
    pub fn cleaner_checkpoint(&self, tp: &TopicPartition) -> Option<i64> {
        lock(&self.cleaner_checkpoints).get(tp).copied()
    }

    /// One pass of the log cleaner (Kafka's `CleanerThread.cleanFilthiestLog`):
    /// takes every compacted log's cleanable range ([`Log::cleanable`]),
    /// picks the log with the largest dirty ratio among those that
    /// [`LogToClean::should_clean`](crate::log::cleaner::LogToClean::should_clean),
    /// cleans it ([`clean_log`]) and writes
    /// its new first dirty offset to `cleaner-offset-checkpoint` (entries of
    /// logs that no longer exist are dropped). Sets the
    /// `weir_log_cleaner_max_dirty_ratio` gauge. Returns the partition and
    /// the statistics, `None` when no log needed cleaning. Blocking; one
    /// cleaning runs at a time.
    ///
    /// `last_stable_offset` gives each partition's high watermark (Kafka
    /// cleans below the last stable offset only, see [`Log::cleanable`]); a
    /// log it gives none for is not cleaned.
    ///
    /// A log whose cleaning fails with a storage error (or whose cleanable
    /// range cannot be read) is marked uncleanable and skipped by later
    /// passes until it is deleted or the broker restarts (Kafka's
    /// `uncleanablePartitions`; gauge `weir_log_cleaner_uncleanable_partitions`).
    ///
    /// # Errors
    /// [`CleanerError::Aborted`] when the log changed while being cleaned
    /// (the next pass retries), [`CleanerError::Storage`] on I/O errors or
    /// unreadable batches.
    pub fn clean_filthiest_log(
        &self,
        now_ms: i64,
        config: &CleanerConfig,
        last_stable_offset: &dyn Fn(&TopicPartition) -> Option<i64>,
    ) -> Result<Option<(TopicPartition, CleanerStats)>, CleanerError> {
        let _one_at_a_time = lock(&self.cleaner_lock);
        let mut filthiest: Option<(TopicPartition, SharedLog, LogToClean)> = None;
        let mut max_ratio = 0.0f64;
        let uncleanable = lock(&self.uncleanable).clone();
        for (tp, log) in self.logs() {
            if uncleanable.contains(&tp) {
                continue;
            }
            let Some(stable) = last_stable_offset(&tp) else {
                continue;
            };
            let checkpoint = self.cleaner_checkpoint(&tp);
            let to_clean = match lock(&log).cleanable(checkpoint, now_ms, stable) {
                Ok(Some(to_clean)) => to_clean,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(topic_partition = %tp, error = %e, "marking log uncleanable");
                    self.mark_uncleanable(&tp);
                    continue;
                }
            };
            let ratio = to_clean.cleanable_ratio();
            max_ratio = max_ratio.max(ratio);
            let dirtier = filthiest
                .as_ref()
                .is_none_or(|(_, _, best)| ratio > best.cleanable_ratio());
            if to_clean.should_clean() && dirtier {
                filthiest = Some((tp, log, to_clean));
            }
        }
        metrics::gauge!("weir_log_cleaner_max_dirty_ratio").set(max_ratio);
        let Some((tp, log, to_clean)) = filthiest else {
            return Ok(None);
        };
        let stats = match clean_log(&log, to_clean, now_ms, config) {
            Ok(stats) => stats,
            Err(CleanerError::Storage(e)) => {
                tracing::warn!(topic_partition = %tp, error = %e, "marking log uncleanable");
                self.mark_uncleanable(&tp);
                return Err(CleanerError::Storage(e));
            }
            Err(aborted) => return Err(aborted),
        };
        self.update_cleaner_checkpoint(&tp, stats.end_offset)?;
        Ok(Some((tp, stats)))
    }

    fn mark_uncleanable(&self, tp: &TopicPartition) {
        let mut uncleanable = lock(&self.uncleanable);
        uncleanable.insert(tp.clone());
        metrics::gauge!("weir_log_cleaner_uncleanable_partitions").set(uncleanable.len() as f64);
    }

    fn update_cleaner_checkpoint(
        &self,
        tp: &TopicPartition,
        first_dirty_offset: i64,
    ) -> Result<(), StorageError> {
        let _serial = lock(&self.checkpoint_lock);
        let live = lock(&self.logs);
        // A truncation while the log was being cleaned may have moved the
        // log end below the cleaned range's end.
        let log_end_offset = live.get(tp).map(|log| lock(log).log_end_offset());
        let first_dirty_offset =
            log_end_offset.map_or(first_dirty_offset, |end| first_dirty_offset.min(end));
        let mut checkpoints = lock(&self.cleaner_checkpoints);
        checkpoints.insert(tp.clone(), first_dirty_offset);
        checkpoints.retain(|tp, _| live.contains_key(tp));
        drop(live);
        let mut entries: Vec<(TopicPartition, i64)> =
            checkpoints.iter().map(|(tp, o)| (tp.clone(), *o)).collect();
        drop(checkpoints);
        entries.sort();
        write_offsets(
            &*self.fs,
            &self.log_dir.join(CLEANER_OFFSET_CHECKPOINT_FILE),
            &entries,
        )
    }

    /// Flushes every log and writes its producer snapshot at the log end
    /// offset, then [`LogManager::checkpoint`] once for all of them (clean
    /// shutdown). The logs are flushed by [`SHUTDOWN_THREADS`] threads at
    /// once: each costs a few fsyncs, which the file system commits together
    /// when they arrive together (issue 15: 10,000 partitions in series took
    /// tens of seconds).
    ///
    /// # Errors
    /// The first flush, snapshot or checkpoint error (every log is still
    /// tried; the clean-shutdown marker is then not written).
    pub fn shutdown(&self, broker_epoch: i64) -> Result<(), StorageError> {
        let started = std::time::Instant::now();
        let logs = self.logs();
        // After a failed sync the directory is failed and nothing in it is
        // synced again, so the flush stops at the first error.
        in_parallel(
            &logs,
            SHUTDOWN_THREADS,
            "weir-log-flusher",
            &self.log_dir,
            |(_, log)| {
                let mut log = lock(log);
                log.flush_for_shutdown()
                    .and_then(|_| log.write_producer_snapshot())
            },
        )?;
        self.checkpoint()?;
        tracing::info!(
            logs = logs.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "every log flushed and checkpointed for shutdown"
        );
        // Written last and durably: its presence at the next start means
        // every log is exactly as flushed above.
        checkpoint::write_atomically(
            &*self.fs,
            &self.log_dir.join(CLEAN_SHUTDOWN_FILE),
            clean_shutdown_content(broker_epoch).as_bytes(),
        )
    }

    /// The directory's failure channel: it reports the first failed
    /// `fdatasync` or directory `fsync` of any log, checkpoint or snapshot
    /// in it, after which nothing in the directory is synced or written
    /// again (Kafka's `LogDirFailureChannel`; see
    /// [`crate::fs::log_dir_failure`]). A broker with this one directory
    /// halts when it fires.
    pub fn dir_failure(&self) -> &Arc<LogDirFailureChannel> {
        &self.dir_failure
    }

    /// The broker epoch the clean-shutdown marker held when the logs were
    /// opened (the epoch this node had when it last shut down cleanly), or
    /// -1 after an unclean shutdown or on a first start. The broker sends
    /// it when it registers (KIP-966's `PreviousBrokerEpoch`), so the
    /// controller knows whether it may have lost acknowledged records.
    pub fn previous_broker_epoch(&self) -> i64 {
        self.previous_broker_epoch
    }
}

/// Threads [`LogManager::shutdown`] flushes logs with. The work is fsyncs,
/// not CPU: more threads than cores let the file system commit many at
/// once (measured on 2 cores: see issue 15's figures in
/// `integration-tests/tests/hostile/fds.rs`).
pub const SHUTDOWN_THREADS: usize = 16;

/// The directory of `tp` under `log_dir`.
pub fn partition_dir(log_dir: &Path, tp: &TopicPartition) -> PathBuf {
    log_dir.join(partition_dir_name(tp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::RecordBatchHeader;
    use crate::log::log_delete_dir_name;
    use crate::testutil::simple_batch;
    use bytes::Bytes;

    fn append(log: &Arc<Mutex<Log>>, records: usize) {
        lock(log)
            .append_as_leader(&Bytes::from(simple_batch(records, 8, 1)), 0, 0)
            .unwrap();
    }

    /// A manager over a [`FaultyFileSystem`] rooted at `dir`, as a restart
    /// opens it.
    fn open_faulty(fs: &Arc<crate::fs::faulty::FaultyFileSystem>, dir: &Path) -> LogManager {
        let shared: Arc<dyn FileSystem> = fs.clone();
        LogManager::open_with_file_system(
            shared,
            dir.to_path_buf(),
            1,
            LogConfig::default(),
            DEFAULT_RECOVERY_THREADS,
        )
        .unwrap()
    }

    #[test]
    fn checkpoints_through_a_full_disk_keep_the_old_file_and_survive_power_loss() {
        use crate::fs::faulty::{Fault, FaultKind, FaultyFileSystem};
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFileSystem::new(dir.path()).unwrap());
        let open = || open_faulty(&fs, dir.path());
        let manager = open();
        let tp = TopicPartition::new("t", 0);
        let log = manager.get_or_create(&tp, LogConfig::default()).unwrap();
        append(&log, 3);
        lock(&log).flush().unwrap();
        manager.checkpoint().unwrap();
        let path = dir.path().join(RECOVERY_POINT_CHECKPOINT_FILE);
        let old = std::fs::read_to_string(&path).unwrap();
        assert_eq!(old, "0\n1\nt 0 3\n");

        append(&log, 2);
        lock(&log).flush().unwrap();
        fs.fail_writes(Fault::new(FaultKind::NoSpace).torn_after(3));
        assert!(matches!(manager.checkpoint(), Err(StorageError::Io { .. })));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), old);
        // The failed write took the directory offline (Kafka's
        // `LogDirFailureChannel`): no checkpoint is written again, the
        // broker halts.
        fs.disarm();
        assert!(manager.dir_failure().is_failed());
        assert!(matches!(manager.checkpoint(), Err(StorageError::Io { .. })));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), old);
        drop((log, manager));

        fs.simulate_power_loss().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), old);
        let manager = open();
        let log = manager.get(&tp).unwrap();
        assert_eq!(lock(&log).log_end_offset(), 5);
    }

    /// Issue 18: CreateTopics creates its logs with `create_missing`, on
    /// several threads and without a sync. A log already open is kept (the
    /// same `Arc`); each new one has the config it was given; and what a
    /// flush covered survives a power loss, directory entries included,
    /// while an empty log nobody flushed may vanish (the metadata creates
    /// it again).
    #[test]
    fn create_missing_creates_many_logs_at_once_and_the_first_flush_makes_them_durable() {
        use crate::fs::faulty::FaultyFileSystem;
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFileSystem::new(dir.path()).unwrap());
        let open = || open_faulty(&fs, dir.path());
        let manager = open();
        let existing = TopicPartition::new("old", 0);
        let old_log = manager
            .get_or_create(&existing, LogConfig::default())
            .unwrap();
        let config = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        };
        let count = PARALLEL_CREATE_MIN * 2 + 3;
        let mut wanted: Vec<(TopicPartition, LogConfig)> = (0..count as i32)
            .map(|p| (TopicPartition::new("many", p), config.clone()))
            .collect();
        wanted.push((existing.clone(), config.clone()));
        manager.create_missing(wanted).unwrap();

        assert!(Arc::ptr_eq(&manager.get(&existing).unwrap(), &old_log));
        assert_eq!(
            lock(&old_log).config().segment_bytes,
            LogConfig::default().segment_bytes
        );
        assert_eq!(manager.logs().len(), count + 1);
        for p in 0..count as i32 {
            let tp = TopicPartition::new("many", p);
            let log = manager.get(&tp).unwrap();
            assert_eq!(lock(&log).config().segment_bytes, 4096);
            assert_eq!(lock(&log).log_end_offset(), 0);
            assert!(partition_dir(dir.path(), &tp).is_dir());
        }
        // One log gets data and is flushed; the others stay as created.
        let flushed = TopicPartition::new("many", 7);
        let log = manager.get(&flushed).unwrap();
        lock(&log).set_topic_id([7; 16]).unwrap();
        append(&log, 3);
        lock(&log).flush().unwrap();
        drop((log, old_log, manager));

        fs.simulate_power_loss().unwrap();
        let manager = open();
        let log = manager.get(&flushed).unwrap();
        assert_eq!(lock(&log).log_end_offset(), 3);
        assert_eq!(lock(&log).topic_id(), Some([7; 16]));
    }

    fn active_segment_path(dir: &Path, tp: &TopicPartition) -> PathBuf {
        let partition = partition_dir(dir, tp);
        let mut logs: Vec<PathBuf> = std::fs::read_dir(&partition)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        logs.sort();
        logs.pop().unwrap()
    }

    fn append_junk(path: &Path, junk: &[u8]) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        file.write_all(junk).unwrap();
    }

    /// Writes batches whose largest timestamp is in the middle of the
    /// active segment, under leader epoch 3; returns the log end offset.
    fn fill_for_shutdown(manager: &LogManager, tp: &TopicPartition) -> i64 {
        use crate::testutil::{build_batch, BatchSpec};
        let log = manager.get_or_create(tp, LogConfig::default()).unwrap();
        let mut log = lock(&log);
        // An inactive segment whose largest timestamp (600) is below the
        // active segment's (900).
        let batch = build_batch(&BatchSpec::new(&[600], 10));
        log.append_as_leader(&Bytes::from(batch), 3, 0).unwrap();
        log.roll().unwrap();
        for timestamps in [&[100, 900, 300][..], &[200], &[400, 500]] {
            let batch = build_batch(&BatchSpec::new(timestamps, 10));
            log.append_as_leader(&Bytes::from(batch), 3, 0).unwrap();
        }
        log.log_end_offset()
    }

    #[test]
    fn the_marker_gives_the_broker_epoch_as_kafka_reads_it() {
        assert_eq!(
            clean_shutdown_broker_epoch(br#"{"version":0,"brokerEpoch":7}"#),
            7
        );
        assert_eq!(
            clean_shutdown_broker_epoch(br#"{"version":0,"brokerEpoch":-1}"#),
            -1
        );
        // Kafka's own marker without the field, or a damaged one.
        assert_eq!(clean_shutdown_broker_epoch(br#"{"version":0}"#), -1);
        assert_eq!(clean_shutdown_broker_epoch(b"garbage"), -1);
    }

    #[test]
    fn a_clean_shutdown_reopens_the_same_log_without_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("t", 0);
        let open = || LogManager::open(dir.path().to_path_buf(), 1, LogConfig::default()).unwrap();
        let manager = open();
        let end = fill_for_shutdown(&manager, &tp);
        let max_timestamp_batch = lock(&manager.get(&tp).unwrap())
            .read_batch_with_max_timestamp()
            .unwrap();
        assert_eq!(manager.previous_broker_epoch(), -1, "a first start");
        manager.shutdown(42).unwrap();
        drop(manager);
        let marker = dir.path().join(CLEAN_SHUTDOWN_FILE);
        assert_eq!(
            std::fs::read_to_string(&marker).unwrap(),
            r#"{"version":0,"brokerEpoch":42}"#,
            "Kafka's content, with the broker epoch (KIP-966)"
        );

        let manager = open();
        assert!(!marker.exists(), "the marker is consumed by the start");
        assert_eq!(manager.previous_broker_epoch(), 42);
        let log = manager.get(&tp).unwrap();
        let log = lock(&log);
        assert_eq!(log.recovered_segments(), 0);
        assert_eq!(log.log_end_offset(), end);
        assert_eq!(log.recovery_point(), end);
        assert_eq!(log.latest_epoch(), Some(3));
        // The active segment's largest timestamp is known without a scan:
        // the shutdown ended its time index with it.
        assert_eq!(
            log.read_batch_with_max_timestamp().unwrap(),
            max_timestamp_batch
        );
        let max_timestamp_batch = max_timestamp_batch.unwrap();
        assert_eq!(
            RecordBatchHeader::parse(&max_timestamp_batch)
                .unwrap()
                .max_timestamp,
            900
        );
    }

    #[test]
    fn a_start_after_a_clean_shutdown_still_recovers_the_next_crash() {
        let dir = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("t", 0);
        let open = || LogManager::open(dir.path().to_path_buf(), 1, LogConfig::default()).unwrap();
        let manager = open();
        fill_for_shutdown(&manager, &tp);
        manager.shutdown(-1).unwrap();
        drop(manager);

        let manager = open();
        let log = manager.get(&tp).unwrap();
        append(&log, 2);
        let end = lock(&log).log_end_offset();
        drop((log, manager)); // a crash: no shutdown
        append_junk(&active_segment_path(dir.path(), &tp), &[0xff; 40]);

        let manager = open();
        let log = manager.get(&tp).unwrap();
        assert_eq!(lock(&log).recovered_segments(), 1);
        assert_eq!(lock(&log).log_end_offset(), end);
        append(&log, 1);
        assert_eq!(lock(&log).log_end_offset(), end + 1);
    }

    #[test]
    fn a_marker_over_an_active_segment_with_a_torn_tail_recovers_it() {
        let dir = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("t", 0);
        let open = || LogManager::open(dir.path().to_path_buf(), 1, LogConfig::default()).unwrap();
        let manager = open();
        let end = fill_for_shutdown(&manager, &tp);
        manager.shutdown(-1).unwrap();
        drop(manager);
        let segment = active_segment_path(dir.path(), &tp);
        let size = std::fs::metadata(&segment).unwrap().len();
        append_junk(&segment, &[0; 7]);

        let manager = open();
        let log = manager.get(&tp).unwrap();
        assert_eq!(lock(&log).recovered_segments(), 1);
        assert_eq!(lock(&log).log_end_offset(), end);
        assert_eq!(std::fs::metadata(&segment).unwrap().len(), size);
    }

    #[test]
    fn format_writes_meta_properties_that_open_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let log_dir = dir.path().join("data");
        let cluster_id = random_kafka_uuid();
        assert!(is_kafka_uuid(&cluster_id));
        assert_eq!(read_meta_properties(&log_dir).unwrap(), None);
        assert_eq!(
            format_log_dir(&log_dir, 3, &cluster_id, false).unwrap(),
            FormatOutcome::Formatted
        );
        let text = std::fs::read_to_string(log_dir.join(META_PROPERTIES_FILE)).unwrap();
        assert!(
            text.contains(&format!("cluster.id={cluster_id}\n")),
            "{text}"
        );
        assert!(
            text.contains("node.id=3\n") && text.contains("version=1\n"),
            "{text}"
        );
        let meta = read_meta_properties(&log_dir).unwrap().unwrap();
        assert_eq!(
            (meta.cluster_id.as_str(), meta.node_id),
            (cluster_id.as_str(), 3)
        );
        assert!(meta.directory_id.as_deref().is_some_and(is_kafka_uuid));

        let manager = LogManager::open(log_dir.clone(), 3, LogConfig::default()).unwrap();
        assert_eq!(manager.cluster_id(), cluster_id);
        assert_eq!(Some(manager.directory_id()), meta.directory_id.as_deref());
    }

    #[test]
    fn format_refuses_a_formatted_dir_unless_ignored_with_the_same_ids() {
        let dir = tempfile::tempdir().unwrap();
        let cluster_id = random_kafka_uuid();
        format_log_dir(dir.path(), 1, &cluster_id, false).unwrap();
        let before = std::fs::read_to_string(dir.path().join(META_PROPERTIES_FILE)).unwrap();
        assert!(matches!(
            format_log_dir(dir.path(), 1, &cluster_id, false),
            Err(StorageError::AlreadyFormatted { cluster_id: ref found, node_id: 1, .. }) if *found == cluster_id
        ));
        assert_eq!(
            format_log_dir(dir.path(), 1, &cluster_id, true).unwrap(),
            FormatOutcome::AlreadyFormatted
        );
        let other = random_kafka_uuid();
        assert!(matches!(
            format_log_dir(dir.path(), 1, &other, true),
            Err(StorageError::AlreadyFormatted { .. })
        ));
        assert!(matches!(
            format_log_dir(dir.path(), 2, &cluster_id, true),
            Err(StorageError::AlreadyFormatted { .. })
        ));
        let after = std::fs::read_to_string(dir.path().join(META_PROPERTIES_FILE)).unwrap();
        assert_eq!(before, after);
    }

    #[test]
    fn random_uuids_never_start_with_a_dash() {
        for _ in 0..2_000 {
            let id = random_kafka_uuid();
            assert!(is_kafka_uuid(&id) && !id.starts_with('-'), "{id}");
        }
    }

    #[test]
    fn format_rejects_a_cluster_id_that_is_not_a_kafka_uuid() {
        let dir = tempfile::tempdir().unwrap();
        for bad in [
            "",
            "my-cluster",
            "AAAAAAAAAAAAAAAAAAAAAAAA",
            "AAAAAAAAAAAAAAAAAAAAA+",
        ] {
            assert!(
                matches!(
                    format_log_dir(dir.path(), 1, bad, false),
                    Err(StorageError::MalformedFile { .. })
                ),
                "{bad:?}"
            );
        }
        assert!(!dir.path().join(META_PROPERTIES_FILE).exists());
    }

    #[test]
    fn reopen_finds_logs_recovery_points_and_cluster_id() {
        let dir = tempfile::tempdir().unwrap();
        let a = TopicPartition::new("my-topic", 0);
        let b = TopicPartition::new("my-topic", 11);
        let cluster_id;
        {
            let manager =
                LogManager::open(dir.path().to_path_buf(), 1, LogConfig::default()).unwrap();
            cluster_id = manager.cluster_id().to_string();
            assert_eq!(cluster_id.len(), 22);
            let log_a = manager.get_or_create(&a, LogConfig::default()).unwrap();
            let log_b = manager.get_or_create(&b, LogConfig::default()).unwrap();
            assert!(Arc::ptr_eq(
                &log_a,
                &manager.get_or_create(&a, LogConfig::default()).unwrap()
            ));
            append(&log_a, 3);
            append(&log_b, 2);
            append(&log_b, 2);
            manager.shutdown(-1).unwrap();
            append(&log_a, 1); // after the checkpoint: not in the recovery point
        }
        let rp = std::fs::read_to_string(dir.path().join(RECOVERY_POINT_CHECKPOINT_FILE)).unwrap();
        assert_eq!(rp, "0\n2\nmy-topic 0 3\nmy-topic 11 4\n");
        let ls =
            std::fs::read_to_string(dir.path().join(LOG_START_OFFSET_CHECKPOINT_FILE)).unwrap();
        assert_eq!(ls, "0\n2\nmy-topic 0 0\nmy-topic 11 0\n");
        let meta = std::fs::read_to_string(dir.path().join(META_PROPERTIES_FILE)).unwrap();
        assert!(meta.contains(&format!("cluster.id={cluster_id}\n")));
        assert!(meta.contains("node.id=1\n") && meta.contains("version=1\n"));

        let manager = LogManager::open(dir.path().to_path_buf(), 1, LogConfig::default()).unwrap();
        assert_eq!(manager.cluster_id(), cluster_id);
        let tps: Vec<TopicPartition> = manager.logs().into_iter().map(|(tp, _)| tp).collect();
        assert_eq!(tps, vec![a.clone(), b.clone()]);
        let log_a = manager.get(&a).unwrap();
        assert_eq!(lock(&log_a).recovery_point(), 3);
        assert_eq!(lock(&log_a).log_end_offset(), 4);
        assert_eq!(lock(&manager.get(&b).unwrap()).log_end_offset(), 4);
    }

    /// Kafka's `LogManager.loadLogs` opens a directory's logs on
    /// `num.recovery.threads.per.data.dir` threads: every log comes back
    /// under its own name with its own records whatever thread opened it.
    #[test]
    fn logs_open_on_several_threads_each_under_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let tps: Vec<TopicPartition> = (0..48).map(|p| TopicPartition::new("t", p)).collect();
        {
            let manager =
                LogManager::open(dir.path().to_path_buf(), 1, LogConfig::default()).unwrap();
            for (i, tp) in tps.iter().enumerate() {
                append(
                    &manager.get_or_create(tp, LogConfig::default()).unwrap(),
                    i + 1,
                );
            }
            manager.shutdown(-1).unwrap();
        }
        for threads in [1, 3, 8] {
            let manager = LogManager::open_with_file_system(
                RealFileSystem::shared(),
                dir.path().to_path_buf(),
                1,
                LogConfig::default(),
                threads,
            )
            .unwrap();
            assert_eq!(manager.logs().len(), tps.len());
            for (i, tp) in tps.iter().enumerate() {
                let log = manager.get(tp).unwrap();
                assert_eq!(
                    lock(&log).log_end_offset(),
                    i as i64 + 1,
                    "{tp} on {threads}"
                );
            }
        }
    }

    /// The parallel runner answers in the items' order and, when items
    /// fail, with the error of the first failing one (every item before
    /// it was taken), however the threads interleave.
    #[test]
    fn parallel_work_answers_in_order_and_with_the_first_failure() {
        let items: Vec<usize> = (0..200).collect();
        let doubled = in_parallel(&items, 4, "test", Path::new("/"), |i| Ok(i * 2)).unwrap();
        assert_eq!(doubled, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        for _ in 0..20 {
            let failed = in_parallel(&items, 4, "test", Path::new("/"), |&i| {
                if i % 50 == 37 {
                    Err(StorageError::MalformedFile {
                        path: PathBuf::from(i.to_string()),
                        reason: "test".to_string(),
                    })
                } else {
                    Ok(i)
                }
            });
            match failed {
                Err(StorageError::MalformedFile { path, .. }) => {
                    assert_eq!(path, PathBuf::from("37"))
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(
            in_parallel(&[] as &[usize], 2, "test", Path::new("/"), |&i| Ok(i))
                .unwrap()
                .is_empty()
        );
    }

    /// The items run concurrently: item 0 waits (10 s at most) for item 1
    /// to start, which only another thread can do. Run one after another,
    /// item 0 times out.
    #[test]
    fn parallel_work_runs_items_at_the_same_time() {
        let started = (Mutex::new(false), std::sync::Condvar::new());
        let items = [0usize, 1];
        let overlapped = in_parallel(&items, 2, "test", Path::new("/"), |&i| {
            let (lock, cv) = &started;
            if i == 1 {
                *lock.lock().unwrap() = true;
                cv.notify_all();
                return Ok(true);
            }
            let guard = lock.lock().unwrap();
            let (guard, _) = cv
                .wait_timeout_while(guard, std::time::Duration::from_secs(10), |s| !*s)
                .unwrap();
            Ok(*guard)
        })
        .unwrap();
        assert_eq!(
            overlapped,
            vec![true, true],
            "item 1 did not start while item 0 ran"
        );
    }

    #[test]
    fn node_id_mismatch_and_second_process_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let manager = LogManager::open(dir.path().to_path_buf(), 1, LogConfig::default()).unwrap();
        assert!(matches!(
            LogManager::open(dir.path().to_path_buf(), 1, LogConfig::default()),
            Err(StorageError::LogDirLocked { .. })
        ));
        drop(manager);
        assert!(matches!(
            LogManager::open(dir.path().to_path_buf(), 2, LogConfig::default()),
            Err(StorageError::NodeIdMismatch {
                found: 1,
                expected: 2,
                ..
            })
        ));
    }

    #[test]
    fn delete_removes_the_log_and_leftover_delete_dirs_are_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("t", 0);
        {
            let manager =
                LogManager::open(dir.path().to_path_buf(), 0, LogConfig::default()).unwrap();
            let log = manager.get_or_create(&tp, LogConfig::default()).unwrap();
            append(&log, 1);
            manager.delete(&tp).unwrap();
            assert!(manager.get(&tp).is_none());
            assert!(!dir.path().join("t-0").exists());
            // The old handle fails instead of writing into a deleted file.
            assert!(lock(&log)
                .append_as_leader(&Bytes::from(simple_batch(1, 1, 1)), 0, 0)
                .is_err());
            manager.delete(&tp).unwrap();
        }
        std::fs::create_dir(dir.path().join("t-1.0123abcd-delete")).unwrap();
        std::fs::write(dir.path().join("t-1.0123abcd-delete/x.log"), b"x").unwrap();
        let manager = LogManager::open(dir.path().to_path_buf(), 0, LogConfig::default()).unwrap();
        assert!(manager.logs().is_empty());
        assert!(!dir.path().join("t-1.0123abcd-delete").exists());
    }

    #[test]
    fn a_249_character_topic_is_deleted_and_its_leftover_dir_cleaned_kafka_6795() {
        let dir = tempfile::tempdir().unwrap();
        let long = TopicPartition::new("a".repeat(249), 3);
        {
            let manager =
                LogManager::open(dir.path().to_path_buf(), 0, LogConfig::default()).unwrap();
            let log = manager.get_or_create(&long, LogConfig::default()).unwrap();
            append(&log, 2);
            manager.delete(&long).unwrap();
            assert!(!partition_dir(dir.path(), &long).exists());
            manager.shutdown(-1).unwrap();
        }
        // A crash between rename and removal leaves a capped `-delete` dir:
        // startup removes it and does not take it for a partition.
        let leftover = dir.path().join(log_delete_dir_name(&long));
        assert_eq!(leftover.file_name().unwrap().len(), 255);
        assert_eq!(
            parse_partition_dir(leftover.file_name().unwrap().to_str().unwrap()),
            None
        );
        std::fs::create_dir(&leftover).unwrap();
        std::fs::write(leftover.join("00000000000000000000.log"), b"x").unwrap();
        let manager = LogManager::open(dir.path().to_path_buf(), 0, LogConfig::default()).unwrap();
        assert!(manager.logs().is_empty());
        assert!(!leftover.exists());
    }

    #[test]
    fn a_delete_dir_that_cannot_be_removed_does_not_fail_startup() {
        let dir = tempfile::tempdir().unwrap();
        let tp = TopicPartition::new("kept", 0);
        {
            let manager =
                LogManager::open(dir.path().to_path_buf(), 0, LogConfig::default()).unwrap();
            append(
                &manager.get_or_create(&tp, LogConfig::default()).unwrap(),
                2,
            );
            manager.shutdown(-1).unwrap();
        }
        let leftover = dir
            .path()
            .join("gone-0.0123456789abcdef0123456789abcdef-delete");
        std::fs::create_dir(&leftover).unwrap();
        FAIL_DELETE_DIR_REMOVAL.with(|f| f.set(true));
        let opened = LogManager::open(dir.path().to_path_buf(), 0, LogConfig::default());
        FAIL_DELETE_DIR_REMOVAL.with(|f| f.set(false));
        let manager = opened.unwrap();
        // The failure really happened, and the partition still loaded.
        assert!(leftover.exists());
        assert_eq!(lock(&manager.get(&tp).unwrap()).log_end_offset(), 2);
        drop(manager);
        // The next startup retries the removal.
        let manager = LogManager::open(dir.path().to_path_buf(), 0, LogConfig::default()).unwrap();
        assert!(!leftover.exists());
        assert_eq!(manager.logs().len(), 1);
    }

    #[test]
    fn partition_dir_names_parse_like_kafka() {
        assert_eq!(
            parse_partition_dir("a-b-7"),
            Some(TopicPartition::new("a-b", 7))
        );
        assert_eq!(
            parse_partition_dir("__consumer_offsets-49"),
            Some(TopicPartition::new("__consumer_offsets", 49))
        );
        assert_eq!(parse_partition_dir("nodash"), None);
        assert_eq!(parse_partition_dir("-3"), None);
        assert_eq!(parse_partition_dir("t-x"), None);
        assert_eq!(
            parse_partition_dir("t--1"),
            Some(TopicPartition::new("t-", 1))
        );
        assert_eq!(parse_partition_dir("lost+found-0"), None);
    }

    #[test]
    fn high_watermarks_round_trip_in_kafkas_format_without_deleted_partitions() {
        let dir = tempfile::tempdir().unwrap();
        let open = || LogManager::open(dir.path().to_path_buf(), 1, LogConfig::default()).unwrap();
        let manager = open();
        assert!(manager.read_high_watermarks().unwrap().is_empty());
        let (a, b, gone) = (
            TopicPartition::new("t", 0),
            TopicPartition::new("t", 1),
            TopicPartition::new("gone", 0),
        );
        for tp in [&a, &b, &gone] {
            manager.get_or_create(tp, LogConfig::default()).unwrap();
        }
        manager.delete(&gone).unwrap();
        let hws = HashMap::from([(a.clone(), 5), (b.clone(), 7), (gone, 3)]);
        manager.write_high_watermarks(&hws).unwrap();
        let path = dir.path().join(REPLICATION_OFFSET_CHECKPOINT_FILE);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "0\n2\nt 0 5\nt 1 7\n"
        );
        let expected = HashMap::from([(a, 5), (b, 7)]);
        assert_eq!(manager.read_high_watermarks().unwrap(), expected);
        drop(manager);
        assert_eq!(open().read_high_watermarks().unwrap(), expected);
        std::fs::write(&path, "0\n2\nt 0 5\n").unwrap();
        assert!(matches!(
            open().read_high_watermarks(),
            Err(StorageError::MalformedFile { .. })
        ));
    }

    /// Kafka's `LogManager.truncateTo` / `truncateFullyAndStartAt`: the
    /// offset checkpoints follow the truncation at once, and the cleaner
    /// checkpoint never stays above the active segment.
    #[test]
    fn truncation_through_the_manager_checkpoints_offsets_and_lowers_the_cleaner_offset() {
        let dir = tempfile::tempdir().unwrap();
        let manager = LogManager::open(dir.path().to_path_buf(), 1, LogConfig::default()).unwrap();
        let tp = TopicPartition::new("t", 0);
        let log = manager.get_or_create(&tp, LogConfig::default()).unwrap();
        for _ in 0..5 {
            append(&log, 2);
        }
        lock(&log).flush().unwrap();
        manager.checkpoint().unwrap();
        manager.update_cleaner_checkpoint(&tp, 8).unwrap();
        let checkpointed = |name: &str| read_offsets(&dir.path().join(name)).unwrap()[&tp];
        assert_eq!(checkpointed(RECOVERY_POINT_CHECKPOINT_FILE), 10);

        assert!(manager.truncate_to(&tp, 4).unwrap());
        assert_eq!(lock(&log).log_end_offset(), 4);
        assert_eq!(checkpointed(RECOVERY_POINT_CHECKPOINT_FILE), 4);
        assert_eq!(manager.cleaner_checkpoint(&tp), Some(0));
        assert_eq!(checkpointed(CLEANER_OFFSET_CHECKPOINT_FILE), 0);
        assert!(!manager.truncate_to(&tp, 4).unwrap());

        manager.truncate_fully_and_start_at(&tp, 100).unwrap();
        assert_eq!(checkpointed(RECOVERY_POINT_CHECKPOINT_FILE), 100);
        assert_eq!(checkpointed(LOG_START_OFFSET_CHECKPOINT_FILE), 100);
        let unknown = TopicPartition::new("unknown", 0);
        assert!(!manager.truncate_to(&unknown, 0).unwrap());
    }
}
