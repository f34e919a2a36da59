//! `ReplicaManager`: the partitions this broker hosts, kept in line with the
//! metadata image (a new `MetadataImage` -> `apply_image` creates or
//! deletes logs).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use kafka_protocol::ResponseError;
use tracing::{error, info, warn};
use weir_controller::{MetadataImage, TopicImage};
use weir_storage::{Log, LogConfig, LogManager, StorageError, TopicPartition};

use crate::config::BrokerConfig;
use crate::partition::{IsrProposal, Partition, Registration};
use crate::topic_config::{log_config_for, write_caching_for};

/// What [`ReplicaManager::apply_image`] applied last.
#[derive(Default)]
struct AppliedImage {
    /// Its `last_applied_offset` (0 before the first).
    offset: u64,
    /// The image itself, the base the next one is compared with: none
    /// before the first and after a failed application (the next one then
    /// walks every partition).
    image: Option<Arc<MetadataImage>>,
}

/// Owns the hosted partitions and the `LogManager` under them.
pub struct ReplicaManager {
    node_id: i32,
    config: BrokerConfig,
    log_manager: LogManager,
    partitions: RwLock<HashMap<TopicPartition, Arc<Partition>>>,
    /// The newest image [`ReplicaManager::apply_image`] took; its lock also
    /// serialises the calls.
    applied: Mutex<AppliedImage>,
    /// Partitions whose state an image set, since start (see
    /// [`ReplicaManager::partition_updates`]).
    partition_updates: AtomicU64,
    /// Where ISR changes go (the AlterPartition sender,
    /// `replication::alter_partition`); unset, they are dropped (unit
    /// tests, which have no controller).
    isr_changes: std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<IsrProposal>>,
    /// High watermarks read from `replication-offset-checkpoint` at
    /// startup, each taken by its partition when first attached.
    checkpointed_high_watermarks: Mutex<HashMap<TopicPartition, i64>>,
    /// The value of `high_watermark_changes` the last
    /// `replication-offset-checkpoint` was written from (read before its
    /// high watermarks were); its lock also serialises the checkpoints.
    written_high_watermarks: Mutex<Option<u64>>,
    /// Bumped after any hosted partition's high watermark changes and
    /// whenever the partition map is written
    /// ([`Partition::count_high_watermark_changes`]).
    high_watermark_changes: Arc<AtomicU64>,
    /// The `last_applied_offset` of the newest image whose application has
    /// returned (`applied.offset` is set when one starts): what
    /// [`ReplicaManager::wait_for_applied`] waits on.
    applied_done: tokio::sync::watch::Sender<u64>,
}

impl ReplicaManager {
    /// A manager over the logs already opened by `log_manager`; partitions
    /// are attached by the first [`ReplicaManager::apply_image`].
    pub fn new(node_id: i32, config: BrokerConfig, log_manager: LogManager) -> Self {
        ReplicaManager {
            node_id,
            config,
            log_manager,
            partitions: RwLock::new(HashMap::new()),
            applied: Mutex::new(AppliedImage::default()),
            partition_updates: AtomicU64::new(0),
            isr_changes: std::sync::OnceLock::new(),
            checkpointed_high_watermarks: Mutex::new(HashMap::new()),
            written_high_watermarks: Mutex::new(None),
            high_watermark_changes: Arc::new(AtomicU64::new(0)),
            applied_done: tokio::sync::watch::Sender::new(0),
        }
    }

    /// The log directory's failure channel
    /// ([`LogManager::dir_failure`]): the broker halts when it fires.
    pub fn log_dir_failure(&self) -> &Arc<weir_storage::fs::LogDirFailureChannel> {
        self.log_manager.dir_failure()
    }

    /// Reads `replication-offset-checkpoint` (before the first
    /// [`ReplicaManager::apply_image`]); a missing file is an empty one.
    ///
    /// # Errors
    /// I/O errors or a malformed file.
    pub fn load_high_watermarks(&self) -> Result<(), StorageError> {
        let high_watermarks = self.log_manager.read_high_watermarks()?;
        *self
            .checkpointed_high_watermarks
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = high_watermarks;
        Ok(())
    }

    /// Writes every hosted partition's high watermark to
    /// `replication-offset-checkpoint` (Kafka's
    /// `ReplicaManager.checkpointHighWatermarks`, every
    /// `replica.high.watermark.checkpoint.interval.ms` and at shutdown).
    /// Nothing is written while no high watermark changed and the partition
    /// map was not written since the last write (the `high_watermark_changes`
    /// counter stands still): Kafka rewrites it each time, which at 75,000
    /// idle partitions was over a third of a broker's idle CPU.
    ///
    /// # Errors
    /// I/O errors (the next call writes again).
    pub fn checkpoint_high_watermarks(&self) -> Result<(), StorageError> {
        let mut written = self
            .written_high_watermarks
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Read before the high watermarks: a change after this read bumps
        // it again, so it is written next time. Comparing every partition's
        // high watermark instead cost 75,000 cache misses every 5 s, over
        // half of an idle broker's CPU at that scale.
        let changes = self.high_watermark_changes.load(Ordering::SeqCst);
        if *written == Some(changes) {
            return Ok(());
        }
        let high_watermarks: HashMap<TopicPartition, i64> = self
            .all_partitions()
            .iter()
            .map(|p| (p.topic_partition().clone(), p.high_watermark()))
            .collect();
        *written = None;
        self.log_manager.write_high_watermarks(&high_watermarks)?;
        *written = Some(changes);
        Ok(())
    }

    /// Routes ISR changes to `sender` (set once, at startup).
    pub fn set_isr_change_sender(&self, sender: tokio::sync::mpsc::UnboundedSender<IsrProposal>) {
        let _ = self.isr_changes.set(sender);
    }

    /// Sends an ISR change to the controller (Kafka's
    /// `AlterPartitionManager.submit`); the partition has it in flight.
    pub fn submit_isr_change(&self, proposal: IsrProposal) {
        if let Some(sender) = self.isr_changes.get() {
            let _ = sender.send(proposal);
        }
    }

    /// Sets the replication gauges over the partitions this broker leads
    /// (Kafka's `ReplicaManager` `UnderReplicatedPartitions` and
    /// `UnderMinIsrPartitionCount`): `weir_under_replicated_partitions` and
    /// `weir_under_min_isr_partitions`.
    pub fn record_replication_metrics(&self) {
        let (mut under_replicated, mut under_min_isr) = (0u64, 0u64);
        for partition in self.all_partitions() {
            if partition.is_leader() {
                let (under, below_min) = partition.replication_health();
                under_replicated += u64::from(under);
                under_min_isr += u64::from(below_min);
            }
        }
        metrics::gauge!("weir_under_replicated_partitions").set(under_replicated as f64);
        metrics::gauge!("weir_under_min_isr_partitions").set(under_min_isr as f64);
    }

    /// Truncates a follower's log ([`Partition::truncate_locked`]) as
    /// Kafka's `LogManager.truncateTo` does: no flush runs meanwhile, the
    /// cleaner is paused (it reads inactive segments without the log's
    /// lock), and afterwards the cleaner checkpoint is lowered and the offset
    /// checkpoints are written. Runs on a blocking thread. Returns whether
    /// anything was truncated.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn truncate_follower(
        self: &Arc<Self>,
        partition: &Arc<Partition>,
        offset: i64,
        fully: bool,
        leader_epoch: i32,
    ) -> Result<bool, StorageError> {
        let flush = partition.lock_flush().await;
        let manager = self.clone();
        let partition = partition.clone();
        let truncate = move || {
            let _flush = flush;
            let _paused = manager.log_manager.pause_cleaning();
            match partition.truncate_locked(offset, fully, leader_epoch)? {
                Some(active_base) => {
                    manager
                        .log_manager
                        .after_truncation(partition.topic_partition(), active_base)?;
                    Ok(true)
                }
                None => Ok(false),
            }
        };
        match tokio::task::spawn_blocking(truncate).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(StorageError::Io {
                op: "truncate",
                path: std::path::PathBuf::new(),
                source: std::io::Error::other(e),
            }),
        }
    }

    /// One ISR shrink pass (Kafka's `ReplicaManager.maybeShrinkIsr`, every
    /// half of `replica.lag.time.max.ms`): every led partition with
    /// followers out of sync proposes an ISR without them. Returns how many
    /// proposed.
    pub fn maybe_shrink_isrs(&self, now_ms: i64) -> usize {
        let mut proposed = 0;
        for partition in self.all_partitions() {
            if let Some(proposal) = partition.maybe_shrink_isr(now_ms) {
                self.submit_isr_change(proposal);
                proposed += 1;
            }
        }
        self.record_replication_metrics();
        proposed
    }

    /// The partition if this broker hosts it.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        let tp = TopicPartition {
            topic: topic.to_string(),
            partition,
        };
        self.partitions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&tp)
            .cloned()
    }

    /// The partition if this broker hosts and leads it, for client requests
    /// that only a leader serves (Produce, consumer Fetch, ListOffsets,
    /// OffsetForLeaderEpoch, DeleteRecords).
    ///
    /// # Errors
    /// NOT_LEADER_OR_FOLLOWER (6) when the partition exists in `image` but
    /// another broker leads it or it has no leader (Kafka's
    /// `ReplicaManager.getPartitionOrError`: the client refreshes its
    /// metadata and retries); UNKNOWN_TOPIC_OR_PARTITION (3) when it does
    /// not exist. `image` is only called on the error path.
    pub fn leader_partition(
        &self,
        topic: &str,
        partition: i32,
        image: impl FnOnce() -> Arc<MetadataImage>,
    ) -> Result<Arc<Partition>, i16> {
        match self.partition(topic, partition) {
            Some(p) if p.is_leader() => Ok(p),
            Some(_) => Err(ResponseError::NotLeaderOrFollower.code()),
            None => {
                let exists = image()
                    .topic(topic)
                    .is_some_and(|t| t.partitions.contains_key(&partition));
                Err(if exists {
                    ResponseError::NotLeaderOrFollower
                } else {
                    ResponseError::UnknownTopicOrPartition
                }
                .code())
            }
        }
    }

    /// Every hosted partition.
    pub fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.partitions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Brings hosted partitions in line with `image`: opens (creating if
    /// needed) the log of every partition that lists this node as a replica,
    /// updates leader epochs, and deletes the logs of topics that are gone
    /// (or were recreated with another topic id). Idempotent; callers that
    /// changed metadata call it before answering so that the next request
    /// finds the partitions.
    ///
    /// Images only move forward: an image whose `last_applied_offset` is
    /// below that of the newest image applied is ignored. Several callers
    /// apply images (the metadata follower, CreateTopics, DeleteTopics,
    /// Metadata, ...), each one it took earlier, so an older image can come
    /// after a newer one; applied, it would delete the logs of topics
    /// created since, acknowledged records included. Kafka has no such
    /// reordering: its `MetadataLoader` publishes every image in log order
    /// to `BrokerMetadataPublisher`, and `ReplicaManager.applyDelta` deletes
    /// only the partitions of a delta's `deletedTopicIds`. An image at the
    /// same offset is applied again (the idempotent retry).
    ///
    /// # Errors
    /// The first storage error; partitions handled before it stay applied
    /// (and the image counts as applied: only its own or a newer one is
    /// applied next).
    pub fn apply_image(&self, image: &MetadataImage) -> Result<(), StorageError> {
        self.apply_image_at(image, crate::handlers::now_ms())
    }

    /// [`ReplicaManager::apply_image`] at `now_ms` (ms since the epoch):
    /// the time a new leader takes as every ISR follower's last caught-up
    /// time. The replication simulation runs on its own clock.
    ///
    /// # Errors
    /// As [`ReplicaManager::apply_image`].
    pub fn apply_image_at(&self, image: &MetadataImage, now_ms: i64) -> Result<(), StorageError> {
        let mut applied = self.applied.lock().unwrap_or_else(|e| e.into_inner());
        if image.last_applied_offset < applied.offset {
            tracing::debug!(
                image_offset = image.last_applied_offset,
                applied_offset = applied.offset,
                "ignoring a metadata image older than the one applied"
            );
            return Ok(());
        }
        applied.offset = image.last_applied_offset;
        let previous = applied.image.take();
        let result = self.apply_changes(previous.as_deref(), image, now_ms);
        if result.is_ok() {
            applied.image = Some(Arc::new(image.clone()));
        }
        let offset = image.last_applied_offset;
        self.applied_done.send_if_modified(|done| {
            let newer = *done < offset;
            *done = (*done).max(offset);
            newer
        });
        result
    }

    /// The image offset a request must wait for before it is served: `Some`
    /// when `image` (this broker's newest) names this node the leader of
    /// one of `partitions` (topic name, index) that is not led here yet
    /// because the metadata follower has not applied `image`. A client that
    /// produces to or fetches from a topic right after its CreateTopics
    /// answer (or a leader change) is then served, not sent away, while the
    /// logs are still being created ([`ReplicaManager::wait_for_applied`]).
    /// CreateTopics answers at commit, as Kafka's controller does
    /// (`ControllerApis` answers once the records are committed; the
    /// broker's `ReplicaManager.applyDelta` creates the logs later); a
    /// Kafka broker answers such a request NOT_LEADER_OR_FOLLOWER until
    /// then, which clients retry after a metadata refresh.
    ///
    /// The same holds for a newer ISR (partition epoch) of a partition led
    /// here: a client that saw the ISR shrink in Metadata gets acks=all
    /// answered by it (NOT_ENOUGH_REPLICAS under `min.insync.replicas`),
    /// not by the ISR before.
    ///
    /// One atomic read when nothing is being applied. Synchronous, so that
    /// no iterator over a request is held across the wait.
    pub fn pending_leadership<'a>(
        &self,
        image: &MetadataImage,
        partitions: impl IntoIterator<Item = (&'a str, i32)>,
    ) -> Option<u64> {
        let target = image.last_applied_offset;
        if *self.applied_done.borrow() >= target {
            return None;
        }
        let pending = partitions.into_iter().any(|(topic, index)| {
            let Some(registration) = image
                .topic(topic)
                .and_then(|t| t.partitions.get(&index))
                .filter(|p| p.leader == self.node_id)
            else {
                return false;
            };
            // Led here in the image: pending until the partition leads, and
            // has the image's ISR (partition epoch), here.
            match self.partition(topic, index) {
                Some(p) if p.is_leader() => p.isr().1 < registration.partition_epoch,
                _ => true,
            }
        });
        pending.then_some(target)
    }

    /// Waits until an image at `offset` or later has been applied here, or
    /// `max_wait` passed (the caller then answers what
    /// [`ReplicaManager::leader_partition`] finds).
    pub async fn wait_for_applied(&self, offset: u64, max_wait: std::time::Duration) {
        let mut done = self.applied_done.subscribe();
        let _ = tokio::time::timeout(max_wait, done.wait_for(|applied| *applied >= offset)).await;
    }

    /// How many times an image set a hosted partition's state (leader or
    /// follower with its replicas and ISR), since start: an image that
    /// changes one topic sets only that topic's partitions here, while one
    /// that changes the brokers (whose liveness every partition holds) sets
    /// them all. For tests and the metric
    /// `weir_metadata_partition_updates_total`.
    pub fn partition_updates(&self) -> u64 {
        self.partition_updates.load(Ordering::Relaxed)
    }

    /// Brings the hosted partitions from `previous` (the image applied
    /// last; none: unknown, so every topic counts as changed) to `image`.
    /// Only the topics [`MetadataImage::changed_topics`] names are walked,
    /// unless the brokers changed: each partition holds its replicas'
    /// liveness, so then every topic is.
    fn apply_changes(
        &self,
        previous: Option<&MetadataImage>,
        image: &MetadataImage,
        now_ms: i64,
    ) -> Result<(), StorageError> {
        let incremental = previous.filter(|p| p.brokers == image.brokers);
        let (walk, gone): (Vec<&TopicImage>, BTreeSet<String>) = match incremental {
            Some(previous) => {
                let changes = image.changed_topics(previous);
                let gone = changes
                    .removed
                    .into_iter()
                    .chain(changes.changed.iter().map(|t| t.name.clone()))
                    .collect();
                (changes.changed, gone)
            }
            None => (
                image.topics.values().map(|t| &**t).collect(),
                BTreeSet::new(),
            ),
        };
        // The hosted partitions that may leave: those of the topics walked
        // or removed (all of them on a full walk).
        let current: HashMap<TopicPartition, Arc<Partition>> = {
            let partitions = self.partitions.read().unwrap_or_else(|e| e.into_inner());
            match incremental {
                Some(previous) => gone
                    .iter()
                    .filter_map(|name| previous.topic(name))
                    .flat_map(|t| {
                        t.partitions.keys().map(|&partition| TopicPartition {
                            topic: t.name.clone(),
                            partition,
                        })
                    })
                    .filter_map(|tp| partitions.get(&tp).map(|p| (tp, p.clone())))
                    .collect(),
                None => partitions.clone(),
            }
        };
        // The logs of partitions new here, created at once (in parallel)
        // before the walk below takes them one by one.
        let new_logs: Vec<(TopicPartition, LogConfig)> = walk
            .iter()
            .flat_map(|topic| {
                let config = log_config_for(&self.config, &topic.configs);
                topic
                    .partitions
                    .iter()
                    .filter(|(_, r)| r.replicas.contains(&self.node_id))
                    .map(move |(&partition, _)| {
                        (
                            TopicPartition {
                                topic: topic.name.clone(),
                                partition,
                            },
                            config.clone(),
                        )
                    })
                    .filter(|(tp, _)| {
                        current
                            .get(tp)
                            .is_none_or(|p| p.topic_id() != topic.topic_id)
                    })
            })
            .collect();
        if !new_logs.is_empty() {
            self.log_manager.create_missing(new_logs)?;
        }
        let mut next = HashMap::new();
        let max_lag_ms = self.config.replication.replica_lag_time_max_ms;
        let flush_pace = std::time::Duration::from_millis(self.config.log_flush_pace_ms);
        let mut updates = 0u64;
        for topic in walk {
            let min_isr = topic
                .configs
                .get("min.insync.replicas")
                .and_then(|v| v.parse().ok())
                .unwrap_or(self.config.min_insync_replicas);
            let write_caching = write_caching_for(&self.config, &topic.configs);
            let log_config = log_config_for(&self.config, &topic.configs);
            for (&index, registration) in &topic.partitions {
                if !registration.replicas.contains(&self.node_id) {
                    continue;
                }
                let tp = TopicPartition {
                    topic: topic.name.clone(),
                    partition: index,
                };
                let alive: std::collections::BTreeMap<i32, i64> = registration
                    .replicas
                    .iter()
                    .filter_map(|b| {
                        image
                            .brokers
                            .get(b)
                            .filter(|r| r.is_active())
                            .map(|r| (*b, r.broker_epoch))
                    })
                    .collect();
                let state = Registration {
                    local_broker_id: self.node_id,
                    replicas: &registration.replicas,
                    isr: &registration.isr,
                    leader_epoch: registration.leader_epoch,
                    partition_epoch: registration.partition_epoch,
                    min_insync_replicas: min_isr,
                    alive: &alive,
                    max_lag_ms,
                };
                // Every hosted partition of a topic walked is in `current`.
                let p = match current.get(&tp) {
                    Some(p) if p.topic_id() == topic.topic_id => {
                        p.set_write_caching(write_caching);
                        p.set_flush_pace(flush_pace);
                        p.set_log_config(log_config.clone());
                        p.clone()
                    }
                    _ => {
                        let log = self.open_log(&tp, topic)?;
                        let p = Arc::new(Partition::new(
                            tp.clone(),
                            topic.topic_id,
                            log,
                            registration.leader_epoch,
                        ));
                        p.set_write_caching(write_caching);
                        p.set_flush_pace(flush_pace);
                        if let Some(hw) = self
                            .checkpointed_high_watermarks
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&tp)
                        {
                            p.restore_high_watermark(hw);
                        }
                        p
                    }
                };
                if registration.leader == self.node_id {
                    p.become_leader(&state, now_ms)?;
                } else {
                    p.become_follower(&state);
                }
                updates += 1;
                next.insert(tp, p);
            }
        }
        self.partition_updates.fetch_add(updates, Ordering::Relaxed);
        metrics::counter!("weir_metadata_partition_updates_total").increment(updates);
        let removed: Vec<TopicPartition> = current
            .keys()
            .filter(|tp| !next.contains_key(*tp))
            .cloned()
            .collect();
        for (tp, p) in &current {
            // Gone, or replaced by a recreated topic's partition.
            if !next.get(tp).is_some_and(|n| Arc::ptr_eq(n, p)) {
                p.mark_removed();
            }
        }
        {
            let mut partitions = self.partitions.write().unwrap_or_else(|e| e.into_inner());
            for tp in &removed {
                partitions.remove(tp);
            }
            for p in next.values() {
                p.count_high_watermark_changes(&self.high_watermark_changes);
            }
            partitions.extend(next);
            // The set of partitions may have changed.
            self.high_watermark_changes.fetch_add(1, Ordering::SeqCst);
        }
        for tp in removed {
            info!(topic_partition = ?tp, "deleting log of removed partition");
            self.log_manager.delete(&tp)?;
        }
        Ok(())
    }

    /// [`ReplicaManager::apply_image`] on a blocking thread, for async
    /// callers: creating thousands of logs (one CreateTopics of 7,000
    /// partitions) takes seconds of file system calls, which on the
    /// runtime's threads stalled every other client (issue 15).
    ///
    /// # Errors
    /// As [`ReplicaManager::apply_image`].
    pub async fn apply_image_off_runtime(
        self: &Arc<Self>,
        image: Arc<MetadataImage>,
    ) -> Result<(), StorageError> {
        let manager = self.clone();
        match tokio::task::spawn_blocking(move || manager.apply_image(&image)).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down.
            Err(e) => Err(StorageError::Io {
                op: "apply metadata image",
                path: std::path::PathBuf::new(),
                source: std::io::Error::other(e),
            }),
        }
    }

    /// The log of `tp` for `topic`, created if missing. A log left by an
    /// older topic of the same name (another topic id) is deleted first.
    fn open_log(
        &self,
        tp: &TopicPartition,
        topic: &TopicImage,
    ) -> Result<Arc<Mutex<Log>>, StorageError> {
        let config = log_config_for(&self.config, &topic.configs);
        let log = self.log_manager.get_or_create(tp, config.clone())?;
        let existing = log.lock().unwrap_or_else(|e| e.into_inner()).topic_id();
        let log = match existing {
            Some(id) if id != *topic.topic_id.as_bytes() => {
                warn!(topic_partition = ?tp, "log belongs to an older topic with the same name; deleting it");
                self.log_manager.delete(tp)?;
                self.log_manager.get_or_create(tp, config)?
            }
            Some(_) => return Ok(log),
            None => log,
        };
        log.lock()
            .unwrap_or_else(|e| e.into_inner())
            .set_topic_id(*topic.topic_id.as_bytes())?;
        Ok(log)
    }

    /// Deletes logs on disk that no topic in `image` owns (a topic deleted
    /// while the broker was down). When `image` has no topic at all but
    /// logs exist, nothing is deleted and an error is logged: that is
    /// metadata lost or replaced (a metadata directory moved away, a node
    /// formatted again), not every topic deleted, and deleting would turn
    /// it into lost data.
    ///
    /// # Errors
    /// Storage errors while deleting.
    pub fn delete_stray_logs(&self, image: &MetadataImage) -> Result<(), StorageError> {
        let logs = self.log_manager.logs();
        if image.topics.is_empty() && !logs.is_empty() {
            error!(
                logs = logs.len(),
                "the metadata has no topic but the log directory holds partition logs; keeping \
                 them (was the metadata directory replaced?): delete them by hand if they are \
                 not wanted"
            );
            return Ok(());
        }
        for (tp, _) in logs {
            let owned = image
                .topic(&tp.topic)
                .map(|t| t.partitions.contains_key(&tp.partition))
                .unwrap_or(false);
            if !owned {
                info!(topic_partition = ?tp, "deleting stray log");
                self.log_manager.delete(&tp)?;
            }
        }
        Ok(())
    }

    /// One retention pass (Kafka's `LogManager.cleanupLogs`): deletes old
    /// segments of every hosted partition ([`Partition::delete_old_segments`]),
    /// one partition's lock at a time, then writes the checkpoints if
    /// anything was deleted. Blocking; returns the number of segments
    /// deleted. A partition whose retention fails is logged and skipped.
    ///
    /// # Errors
    /// I/O errors writing the checkpoints.
    pub fn delete_old_segments(&self, now_ms: i64) -> Result<usize, StorageError> {
        let mut deleted = 0;
        for partition in self.all_partitions() {
            match partition.delete_old_segments(now_ms) {
                Ok(n) => deleted += n,
                Err(e) => warn!(topic_partition = ?partition.topic_partition(), error = %e,
                    "retention failed"),
            }
        }
        if deleted > 0 {
            self.log_manager.checkpoint()?;
        }
        Ok(deleted)
    }

    /// Forgets idempotent producers idle for `expiration_ms` or more in every
    /// hosted partition (Kafka's producer expiration check,
    /// `producer.id.expiration.ms`). Returns how many were removed.
    pub fn remove_expired_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        self.all_partitions()
            .iter()
            .map(|p| p.remove_expired_producers(now_ms, expiration_ms))
            .sum()
    }

    /// One background flusher pass (Kafka's `LogManager.flushDirtyLogs`):
    /// every partition whose `flush.ms` has passed since its last flush is
    /// fsynced, one at a time, through the same group commit acks=all uses.
    /// Returns how many partitions were flushed. Runs on the async runtime.
    ///
    /// # Errors
    /// The first fsync error; later partitions are still flushed.
    pub async fn flush_dirty_logs(&self, now_ms: i64) -> Result<usize, StorageError> {
        let mut flushed = 0;
        let mut first_error = None;
        for partition in self.all_partitions() {
            let Some(end_offset) = partition.flush_ms_due(now_ms) else {
                continue;
            };
            match partition.wait_durable(end_offset).await {
                Ok(()) => flushed += 1,
                // Deleted while this pass ran: nothing left to flush.
                Err(StorageError::LogDeleted { .. }) => {}
                Err(e) => {
                    warn!(topic_partition = ?partition.topic_partition(), error = %e, "background flush failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(flushed), Err)
    }

    /// One pass of the log cleaner: cleans logs, dirtiest first, until none
    /// needs cleaning or `max_logs` were cleaned (Kafka's `CleanerThread`
    /// loop; the caller backs off `log.cleaner.backoff.ms` between passes).
    /// A cleaning aborted because retention changed the log is logged and
    /// retried at the next pass. Returns how many logs were cleaned.
    ///
    /// # Errors
    /// The first storage error of a cleaning.
    pub fn clean_logs(
        &self,
        now_ms: i64,
        config: &weir_storage::CleanerConfig,
        max_logs: usize,
    ) -> Result<usize, StorageError> {
        let mut cleaned = 0;
        while cleaned < max_logs {
            let high_watermark = |tp: &TopicPartition| {
                self.partition(&tp.topic, tp.partition)
                    .map(|p| p.high_watermark())
            };
            match self
                .log_manager
                .clean_filthiest_log(now_ms, config, &high_watermark)
            {
                Ok(Some((tp, stats))) => {
                    tracing::debug!(topic_partition = %tp, ?stats, "log cleaned");
                    cleaned += 1;
                }
                Ok(None) => break,
                Err(weir_storage::CleanerError::Aborted { dir, base_offset }) => {
                    tracing::info!(dir = %dir.display(), base_offset, "log cleaning aborted; retrying later");
                    break;
                }
                Err(weir_storage::CleanerError::Storage(e)) => return Err(e),
            }
        }
        Ok(cleaned)
    }

    /// Writes the recovery point and log start offset checkpoints.
    ///
    /// # Errors
    /// I/O errors.
    pub fn checkpoint(&self) -> Result<(), StorageError> {
        self.log_manager.checkpoint()
    }

    /// Flushes every log and writes the checkpoints, high watermarks
    /// included, then the clean-shutdown marker with `broker_epoch` (clean
    /// shutdown; KIP-966 reads the epoch back at the next registration).
    ///
    /// # Errors
    /// I/O errors.
    pub fn shutdown(&self, broker_epoch: i64) -> Result<(), StorageError> {
        self.checkpoint_high_watermarks()?;
        self.log_manager.shutdown(broker_epoch)
    }

    /// The `last_applied_offset` of the newest image applied to the hosted
    /// partitions: the metadata offset this broker reports in its
    /// heartbeats (Kafka's broker reports what its metadata publishers
    /// have applied).
    pub fn applied_metadata_offset(&self) -> u64 {
        self.applied
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .offset
    }
}

#[cfg(test)]
mod tests {
    use weir_controller::{MetadataRecord, PartitionRecord, TopicRecord};

    use super::*;

    fn manager(dir: &std::path::Path) -> ReplicaManager {
        let config = BrokerConfig {
            log_dirs: vec![dir.to_path_buf()],
            ..BrokerConfig::default()
        };
        let log_manager =
            LogManager::open(dir.to_path_buf(), 1, config.default_log_config()).unwrap();
        ReplicaManager::new(1, config, log_manager)
    }

    fn image_with(topic: &str) -> MetadataImage {
        let topic_id = uuid::Uuid::new_v4();
        let mut image = MetadataImage::default();
        image
            .apply(&MetadataRecord::Topic(TopicRecord {
                name: topic.into(),
                topic_id,
            }))
            .unwrap();
        image
            .apply(&MetadataRecord::Partition(PartitionRecord::new(
                0,
                topic_id,
                vec![1],
                vec![1],
            )))
            .unwrap();
        image
    }

    /// `replication-offset-checkpoint` is written when a high watermark or
    /// the set of partitions changed since the last write, and only then.
    #[test]
    fn the_high_watermark_checkpoint_is_written_only_after_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let replicas = manager(dir.path());
        let file = dir
            .path()
            .join(weir_storage::log_manager::REPLICATION_OFFSET_CHECKPOINT_FILE);
        let mut image = image_with("t");
        image.last_applied_offset = 1;
        replicas.apply_image(&image).unwrap();
        let tp = TopicPartition::new("t", 0);
        let written = |r: &ReplicaManager| r.log_manager.read_high_watermarks().unwrap();

        replicas.checkpoint_high_watermarks().unwrap();
        assert_eq!(written(&replicas), HashMap::from([(tp.clone(), 0)]));
        std::fs::remove_file(&file).unwrap();
        replicas.checkpoint_high_watermarks().unwrap();
        assert!(!file.exists(), "nothing changed: not rewritten");

        let partition = replicas.partition("t", 0).expect("hosted");
        let batch = crate::partition::tests::keyed_batch(Some("k"), "v");
        partition.append_records_as_leader(&batch, 0).unwrap();
        assert_eq!(partition.high_watermark(), 1, "the only ISR member");
        replicas.checkpoint_high_watermarks().unwrap();
        assert_eq!(written(&replicas), HashMap::from([(tp.clone(), 1)]));

        // Another topic, then none: the set of partitions changed.
        let mut image = image_with("u");
        image.last_applied_offset = 2;
        replicas.apply_image(&image).unwrap();
        replicas.checkpoint_high_watermarks().unwrap();
        assert_eq!(
            written(&replicas),
            HashMap::from([(TopicPartition::new("u", 0), 0)])
        );
    }

    /// A request naming a partition that this broker's newest image makes
    /// it lead waits until that image is applied here (CreateTopics answers
    /// at commit, before the logs exist), and no longer; one naming only
    /// partitions the image does not give this node never waits. On paused
    /// time: a wait cut short by `max_wait` would show as elapsed time.
    #[tokio::test(start_paused = true)]
    async fn a_request_for_a_partition_led_in_an_unapplied_image_waits_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let replicas = Arc::new(manager(dir.path()));
        let mut image = image_with("t");
        image.last_applied_offset = 1;
        let image = Arc::new(image);
        let max_wait = std::time::Duration::from_secs(3600);
        let started = tokio::time::Instant::now();

        assert_eq!(
            replicas.pending_leadership(&image, [("unknown", 0), ("t", 1)]),
            None,
            "not led here"
        );
        assert_eq!(replicas.pending_leadership(&image, [("t", 0)]), Some(1));

        let waiting = tokio::spawn({
            let replicas = replicas.clone();
            async move {
                replicas.wait_for_applied(1, max_wait).await;
                replicas.partition("t", 0).is_some_and(|p| p.is_leader())
            }
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!waiting.is_finished(), "waits while the image is pending");
        replicas.apply_image(&image).unwrap();
        assert!(
            waiting.await.unwrap(),
            "finds the partition led once applied"
        );
        assert_eq!(started.elapsed(), std::time::Duration::ZERO);

        assert_eq!(replicas.pending_leadership(&image, [("t", 0)]), None);

        // A newer image changes the ISR of a partition led here (the
        // controller fenced a follower): a request waits for it too, so
        // that acks=all sees the ISR a client's Metadata showed.
        let mut shrunk = (*image).clone();
        shrunk.last_applied_offset = 2;
        let topic = std::sync::Arc::make_mut(shrunk.topics.get_mut("t").unwrap());
        let p = topic.partitions.get_mut(&0).unwrap();
        p.partition_epoch += 1;
        assert_eq!(replicas.pending_leadership(&shrunk, [("t", 0)]), Some(2));
        replicas.apply_image(&shrunk).unwrap();
        assert_eq!(replicas.pending_leadership(&shrunk, [("t", 0)]), None);
    }

    /// A log whose topic is gone is deleted, but an image with no topic
    /// at all (lost or replaced metadata) deletes nothing.
    #[test]
    fn stray_logs_are_deleted_unless_the_metadata_has_no_topic_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let replicas = manager(dir.path());
        let config = replicas.config.default_log_config();
        for topic in ["kept", "gone"] {
            replicas
                .log_manager
                .get_or_create(&TopicPartition::new(topic, 0), config.clone())
                .unwrap();
        }
        let names = |r: &ReplicaManager| {
            let mut names: Vec<String> = r
                .log_manager
                .logs()
                .into_iter()
                .map(|(tp, _)| tp.topic)
                .collect();
            names.sort();
            names
        };

        replicas
            .delete_stray_logs(&MetadataImage::default())
            .unwrap();
        assert_eq!(names(&replicas), ["gone", "kept"]);

        replicas.delete_stray_logs(&image_with("kept")).unwrap();
        assert_eq!(names(&replicas), ["kept"]);
    }

    /// An image older than the last one applied changes nothing; a newer one
    /// without the topic still deletes its log. The compaction flake
    /// (`compaction::a_compacted_topic_reads_back_the_newest_value_of_every_key`
    /// saw 20000 for 20100): `follow_metadata` applied the startup image
    /// after CreateTopics had applied the one with the topic, so the new
    /// topic's log was deleted with its first acknowledged batch in it, and
    /// the next image recreated the log empty at offset 0.
    #[test]
    fn an_older_image_applied_late_deletes_no_log() {
        let dir = tempfile::tempdir().unwrap();
        let replicas = manager(dir.path());
        let tp = TopicPartition::new("latest-values", 0);
        let startup = MetadataImage {
            last_applied_offset: 1,
            ..MetadataImage::default()
        };
        let mut created = image_with("latest-values");
        created.last_applied_offset = 3;
        replicas.apply_image(&created).unwrap();
        let partition = replicas.partition("latest-values", 0).expect("hosted");
        partition
            .append_records_as_leader(&crate::partition::tests::batch("acknowledged"), 0)
            .unwrap();

        replicas.apply_image(&startup).unwrap();
        let hosted = replicas
            .partition("latest-values", 0)
            .expect("still hosted after the older image");
        assert!(Arc::ptr_eq(&hosted, &partition), "the same partition");
        assert_eq!(hosted.log_end_offset(), 1, "the acknowledged batch stays");
        assert!(
            replicas.log_manager.get(&tp).is_some(),
            "the log stays open"
        );

        let deleted = MetadataImage {
            last_applied_offset: 4,
            ..MetadataImage::default()
        };
        replicas.apply_image(&deleted).unwrap();
        assert!(replicas.partition("latest-values", 0).is_none());
        assert!(
            replicas.log_manager.get(&tp).is_none(),
            "a newer image deletes"
        );
    }

    /// The log cleaner stops at the high watermark, as Kafka's
    /// `LogCleanerManager.cleanableOffsets` (the first uncleanable offset is
    /// at most the last stable offset): records above it may still be
    /// truncated away, and a replica must not compact what its leader may
    /// still replace. Here a follower in the ISR has fetched nothing, so
    /// the high watermark stays at 0 while two rolled segments hold an
    /// older and a newer value of one key: nothing may be cleaned.
    #[test]
    fn the_cleaner_never_cleans_above_the_high_watermark() {
        let dir = tempfile::tempdir().unwrap();
        let replicas = manager(dir.path());
        let mut image = image_with("compacted");
        let topic_id = image.topics["compacted"].topic_id;
        image
            .apply(&MetadataRecord::PartitionChange(
                weir_controller::PartitionChangeRecord {
                    topic_id,
                    replicas: Some(vec![1, 2]),
                    isr: Some(vec![1, 2]),
                    ..Default::default()
                },
            ))
            .unwrap();
        for (key, value) in [
            ("cleanup.policy", "compact"),
            ("internal.segment.bytes", "100"),
        ] {
            image
                .apply(&MetadataRecord::Config(weir_controller::ConfigRecord {
                    resource_type: weir_controller::ConfigResourceType::Topic,
                    resource_name: "compacted".into(),
                    name: key.into(),
                    value: Some(value.into()),
                }))
                .unwrap();
        }
        image.last_applied_offset = 1;
        replicas.apply_image(&image).unwrap();
        let partition = replicas.partition("compacted", 0).expect("hosted");
        for value in ["older", "newer", "active"] {
            let batch = crate::partition::tests::keyed_batch(Some("k"), value);
            partition.append_records_as_leader(&batch, 0).unwrap();
        }
        let tp = TopicPartition::new("compacted", 0);
        let log = replicas.log_manager.get(&tp).unwrap();
        assert_eq!(
            log.lock().unwrap().segment_base_offsets(),
            vec![0, 1, 2],
            "a segment per batch"
        );
        assert_eq!(
            partition.high_watermark(),
            0,
            "the follower fetched nothing"
        );

        let config = replicas.config.cleaner_config();
        let cleaned = replicas.clean_logs(i64::MAX / 2, &config, 16).unwrap();
        assert_eq!(cleaned, 0, "nothing below the high watermark to clean");
        let first = log.lock().unwrap().read(0, 1, i64::MAX, true).unwrap();
        let bytes = first.records.expect("a batch").read_to_bytes().unwrap();
        let base_offset = i64::from_be_bytes(bytes[..8].try_into().unwrap());
        assert_eq!(
            base_offset, 0,
            "the older value above the high watermark kept"
        );
    }

    /// A partition that leaves the image, or whose topic is recreated under
    /// another id, is marked removed and stops serving, so that what waits
    /// on it (parked fetches, acks=all) is answered at once.
    #[test]
    fn partitions_leaving_the_image_are_marked_removed() {
        let dir = tempfile::tempdir().unwrap();
        let replicas = manager(dir.path());
        let mut first = image_with("doomed");
        first.last_applied_offset = 1;
        replicas.apply_image(&first).unwrap();
        let original = replicas.partition("doomed", 0).expect("hosted");

        let mut recreated = image_with("doomed");
        recreated.last_applied_offset = 2;
        replicas.apply_image(&recreated).unwrap();
        let replacement = replicas.partition("doomed", 0).expect("hosted");
        assert!(!Arc::ptr_eq(&original, &replacement));
        assert!(original.is_removed() && !original.is_leader());
        assert!(!replacement.is_removed() && replacement.is_leader());

        let deleted = MetadataImage {
            last_applied_offset: 3,
            ..MetadataImage::default()
        };
        replicas.apply_image(&deleted).unwrap();
        assert!(replacement.is_removed() && !replacement.is_leader());
    }

    /// An image that changes one topic of several sets only that topic's
    /// partitions (the others keep their `Partition` untouched); one that
    /// changes the brokers (whose liveness each partition holds) sets them
    /// all; a removed topic's partitions leave, marked removed, with their
    /// logs.
    #[test]
    fn an_image_applies_only_the_topics_it_changes_unless_the_brokers_changed() {
        use weir_controller::{
            BrokerEndpoint, FenceBrokerRecord, PartitionChangeRecord, RegisterBrokerRecord,
            RemoveTopicRecord,
        };
        let dir = tempfile::tempdir().unwrap();
        let replicas = manager(dir.path());
        let mut image = MetadataImage::default();
        for id in [1, 2] {
            image
                .apply(&MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                    broker_id: id,
                    incarnation_id: uuid::Uuid::from_u128(id as u128),
                    broker_epoch: 10,
                    end_points: vec![BrokerEndpoint {
                        name: "PLAINTEXT".into(),
                        host: "localhost".into(),
                        port: 9092,
                        security_protocol: 0,
                    }],
                    rack: None,
                    fenced: false,
                }))
                .unwrap();
        }
        let ids = [("a", 3), ("b", 2), ("c", 4)].map(|(name, count)| {
            let topic_id = uuid::Uuid::new_v4();
            image
                .apply(&MetadataRecord::Topic(TopicRecord {
                    name: name.into(),
                    topic_id,
                }))
                .unwrap();
            for partition_id in 0..count {
                image
                    .apply(&MetadataRecord::Partition(PartitionRecord::new(
                        partition_id,
                        topic_id,
                        vec![1, 2],
                        vec![1, 2],
                    )))
                    .unwrap();
            }
            topic_id
        });
        let mut offset = 0;
        let mut apply = |image: &mut MetadataImage, records: &[MetadataRecord]| {
            for r in records {
                image.apply(r).unwrap();
            }
            offset += 1;
            image.last_applied_offset = offset;
            let before = replicas.partition_updates();
            replicas.apply_image(image).unwrap();
            replicas.partition_updates() - before
        };

        assert_eq!(apply(&mut image, &[]), 9, "the first image sets all");
        let a0 = replicas.partition("a", 0).expect("hosted");
        let b0 = replicas.partition("b", 0).expect("hosted");
        assert_eq!(b0.isr().0, [1, 2]);

        // b's partition 0 leaves broker 2 out of its ISR: b only.
        let shrink = MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 0,
            topic_id: ids[1],
            isr: Some(vec![1]),
            ..Default::default()
        });
        assert_eq!(apply(&mut image, &[shrink]), 2, "b's two partitions");
        assert_eq!(b0.isr().0, [1], "b's new ISR applied");
        assert!(Arc::ptr_eq(&a0, &replicas.partition("a", 0).unwrap()));

        // Nothing changed but the offset: nothing set.
        assert_eq!(apply(&mut image, &[]), 0);

        // Broker 2 fenced: every partition holds its liveness.
        let fence = MetadataRecord::FenceBroker(FenceBrokerRecord { id: 2, epoch: 10 });
        assert_eq!(apply(&mut image, &[fence]), 9, "every partition");

        // c deleted: no partition set, c's leave with their logs.
        let c0 = replicas.partition("c", 0).expect("hosted");
        let remove = MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id: ids[2] });
        assert_eq!(apply(&mut image, &[remove]), 0);
        for partition in 0..4 {
            assert!(replicas.partition("c", partition).is_none());
            assert!(replicas
                .log_manager
                .get(&TopicPartition::new("c", partition))
                .is_none());
        }
        assert!(c0.is_removed());
        for (topic, count) in [("a", 3), ("b", 2)] {
            for partition in 0..count {
                assert!(
                    replicas.partition(topic, partition).is_some(),
                    "{topic}-{partition}"
                );
            }
        }
        assert!(!a0.is_removed() && !b0.is_removed());
    }
}
