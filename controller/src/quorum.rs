//! The running controller: a metadata quorum (openraft) plus a serialized
//! command queue, as Kafka's `QuorumController`.
//!
//! Every command runs under one async lock (Kafka's single controller event
//! queue): it reads the latest published image, computes records with the
//! pure functions in [`crate::control`], commits them through raft as one
//! atomic batch, and returns after the batch is applied to the published
//! image. So two concurrent commands never compute from the same image, and
//! a caller that gets a response sees its effect in [`QuorumController::image`].
//!
//! Single node (the default) is a one-voter quorum in this process; the
//! quorum is initialized only when the metadata directory holds no vote, log
//! or snapshot, so a restart with data never re-initializes.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::{BasicNode, Raft, ServerState, SnapshotPolicy};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::control::{
    self, ControllerResult, CreatableTopic, CreatedTopic, NewPartitions, TopicRef,
};
use crate::error::ControllerError;
use crate::image::{MetadataImage, TopicId};
use crate::placement::{ReplicaPlacer, StripedReplicaPlacer};
use crate::raft::log_store::MetadataLogStore;
use crate::raft::network::QuorumNetworkFactory;
use crate::raft::state_machine::MetadataStateMachine;
use crate::raft::{MetadataBatch, MetadataTypeConfig};
use crate::records::BrokerEndpoint;

/// Where and as whom the controller runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// This node's `node.id` (>= 0); also its raft voter id.
    pub node_id: i32,
    /// The metadata log directory, by convention
    /// `<log.dirs>/__cluster_metadata-0/`; created if missing.
    pub metadata_dir: PathBuf,
    /// `cluster.id` from `meta.properties`; stamped on every image.
    pub cluster_id: String,
}

/// Tuning of the metadata quorum. [`Default`] follows KRaft's defaults
/// (`controller.quorum.election.timeout.ms` 1000): a single voter becomes
/// leader at once on initialization and on restart, so these only matter
/// once there are several voters; a longer heartbeat keeps an idle broker's
/// wake-ups (openraft ticks) rare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumOptions {
    /// Leader heartbeat interval in milliseconds. Default: 500.
    pub heartbeat_interval_ms: u64,
    /// Lower bound of the randomized election timeout in milliseconds. Default: 1000.
    pub election_timeout_min_ms: u64,
    /// Upper bound of the randomized election timeout in milliseconds. Default: 2000.
    pub election_timeout_max_ms: u64,
    /// Build a snapshot after this many log entries since the last one.
    /// Default: 10000.
    pub snapshot_interval_entries: u64,
    /// Log entries kept after a snapshot before purging. Default: 100.
    pub log_entries_kept_after_snapshot: u64,
    /// How long [`QuorumController::start`] waits for leadership and replay.
    /// Default: 10 s.
    pub startup_timeout: Duration,
}

impl Default for QuorumOptions {
    fn default() -> Self {
        QuorumOptions {
            heartbeat_interval_ms: 500,
            election_timeout_min_ms: 1000,
            election_timeout_max_ms: 2000,
            snapshot_interval_entries: 10_000,
            log_entries_kept_after_snapshot: 100,
            startup_timeout: Duration::from_secs(10),
        }
    }
}

struct Inner {
    node_id: i32,
    raft: Raft<MetadataTypeConfig>,
    images: watch::Sender<Arc<MetadataImage>>,
    /// Serializes commands (Kafka's controller event queue).
    commands: tokio::sync::Mutex<()>,
    placer: Box<dyn ReplicaPlacer>,
    leader_watcher: Mutex<Option<JoinHandle<()>>>,
}

/// The running metadata controller. Cheap to clone (an `Arc` inside).
#[derive(Clone)]
pub struct QuorumController {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for QuorumController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumController")
            .field("node_id", &self.inner.node_id)
            .finish_non_exhaustive()
    }
}

fn raft_err(e: impl std::fmt::Display) -> ControllerError {
    ControllerError::Raft {
        reason: e.to_string(),
    }
}

impl QuorumController {
    /// Opens storage, starts openraft, initializes a one-voter quorum only if
    /// the store is empty, and waits until this node is leader and the log is
    /// applied. Uses [`QuorumOptions::default`].
    ///
    /// # Errors
    ///
    /// See [`QuorumController::start_with`].
    pub async fn start(config: ControllerConfig) -> Result<QuorumController, ControllerError> {
        Self::start_with(config, QuorumOptions::default()).await
    }

    /// [`QuorumController::start`] with explicit quorum tuning.
    ///
    /// # Errors
    ///
    /// - [`ControllerError::InvalidNodeId`] for a negative `node_id`.
    /// - [`ControllerError::Storage`] when the metadata directory, log, vote
    ///   or snapshot cannot be opened or is corrupt beyond a torn tail.
    /// - [`ControllerError::Raft`] when openraft rejects the config or fails.
    /// - [`ControllerError::Timeout`] when this node is not leader with the
    ///   log applied within `options.startup_timeout`.
    pub async fn start_with(
        config: ControllerConfig,
        options: QuorumOptions,
    ) -> Result<QuorumController, ControllerError> {
        let raft_node_id =
            u64::try_from(config.node_id).map_err(|_| ControllerError::InvalidNodeId {
                node_id: config.node_id,
            })?;
        let dir = config.metadata_dir.clone();
        let cluster_id = config.cluster_id.clone();
        let (log_store, state_machine) = tokio::task::spawn_blocking(move || {
            let log = MetadataLogStore::open(&dir)?;
            let sm = MetadataStateMachine::open(&dir, &cluster_id)?;
            Ok::<_, std::io::Error>((log, sm))
        })
        .await
        .map_err(raft_err)?
        .map_err(|e| ControllerError::Storage {
            reason: format!("{}: {e}", config.metadata_dir.display()),
        })?;
        let pristine = log_store.is_pristine() && state_machine.is_pristine();
        let images = state_machine.publisher();

        let raft_config = openraft::Config {
            cluster_name: config.cluster_id.clone(),
            heartbeat_interval: options.heartbeat_interval_ms,
            election_timeout_min: options.election_timeout_min_ms,
            election_timeout_max: options.election_timeout_max_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(options.snapshot_interval_entries),
            max_in_snapshot_log_to_keep: options.log_entries_kept_after_snapshot,
            ..openraft::Config::default()
        }
        .validate()
        .map_err(raft_err)?;
        let raft = Raft::new(
            raft_node_id,
            Arc::new(raft_config),
            QuorumNetworkFactory,
            log_store,
            state_machine,
        )
        .await
        .map_err(raft_err)?;

        if pristine {
            tracing::info!(
                node_id = config.node_id,
                cluster_id = %config.cluster_id,
                "initializing a new single-voter metadata quorum"
            );
            let voters = BTreeMap::from([(raft_node_id, BasicNode::default())]);
            match raft.initialize(voters).await {
                Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(e) => {
                    let _ = raft.shutdown().await;
                    return Err(raft_err(e));
                }
            }
        }

        let waited = raft
            .wait(Some(options.startup_timeout))
            .metrics(
                |m| {
                    m.state == ServerState::Leader
                        && m.last_applied.is_some_and(|applied| {
                            applied.leader_id.term == m.current_term
                                && Some(applied.index) == m.last_log_index
                        })
                },
                "metadata quorum leader with the log applied",
            )
            .await;
        if let Err(e) = waited {
            let _ = raft.shutdown().await;
            return Err(match e {
                openraft::metrics::WaitError::Timeout(..) => ControllerError::Timeout {
                    operation: "metadata quorum leadership and log replay".into(),
                    waited_ms: options.startup_timeout.as_millis() as u64,
                },
                other => raft_err(other),
            });
        }
        images.send_if_modified(|image| set_controller_id(image, Some(config.node_id)));
        let leader_watcher = tokio::spawn(watch_leader(raft.metrics(), images.clone()));
        tracing::info!(
            node_id = config.node_id,
            offset = images.borrow().last_applied_offset,
            "metadata quorum is active"
        );
        Ok(QuorumController {
            inner: Arc::new(Inner {
                node_id: config.node_id,
                raft,
                images,
                commands: tokio::sync::Mutex::new(()),
                placer: Box::new(StripedReplicaPlacer::default()),
                leader_watcher: Mutex::new(Some(leader_watcher)),
            }),
        })
    }

    /// The latest published image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.inner.images.borrow().clone()
    }

    /// A receiver that sees every newly published image (one per applied
    /// batch, and on controller changes).
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.inner.images.subscribe()
    }

    /// Registers (or re-registers with a new incarnation) a broker with its
    /// endpoints; returns the broker epoch. Unfenced immediately in
    /// single-node (there is no heartbeat yet).
    ///
    /// # Errors
    ///
    /// [`ControllerError::NotController`], [`ControllerError::Raft`] or
    /// [`ControllerError::Storage`] when the record cannot be committed.
    pub async fn register_broker(
        &self,
        broker_id: i32,
        incarnation_id: uuid::Uuid,
        endpoints: Vec<BrokerEndpoint>,
        rack: Option<String>,
    ) -> Result<i64, ControllerError> {
        self.run(|image| {
            Ok(control::register_broker(
                image,
                broker_id,
                incarnation_id,
                endpoints,
                rack,
            ))
        })
        .await
    }

    /// Creates topics; per-topic results in request order. Validation and
    /// records as [`control::create_topics`]; all successful topics of one
    /// call are committed as ONE atomic batch and the call returns once it is
    /// applied to the published image. `validate_only` writes nothing.
    /// A request that would generate more than
    /// [`MAX_RECORDS_PER_USER_OP`](crate::MAX_RECORDS_PER_USER_OP) records
    /// fails whole with [`ControllerError::PolicyViolation`], validate-only
    /// too; `__cluster_metadata` and duplicate names give
    /// [`ControllerError::InvalidRequest`].
    /// A commit failure turns every would-be success into that error.
    pub async fn create_topics(
        &self,
        topics: Vec<CreatableTopic>,
        validate_only: bool,
    ) -> Vec<Result<CreatedTopic, ControllerError>> {
        let n = topics.len();
        let outcome = self
            .run(|image| {
                Ok(control::create_topics(
                    image,
                    &topics,
                    validate_only,
                    self.inner.placer.as_ref(),
                ))
            })
            .await;
        outcome.unwrap_or_else(|e| vec![Err(e); n])
    }

    /// Deletes topics by name or id; per-topic `(name, id)` results in
    /// request order, as [`control::delete_topics`]: unknown names give
    /// [`ControllerError::UnknownTopic`], unknown ids
    /// [`ControllerError::UnknownTopicId`], duplicates and `__cluster_metadata`
    /// [`ControllerError::InvalidRequest`], and more than
    /// [`MAX_RECORDS_PER_USER_OP`](crate::MAX_RECORDS_PER_USER_OP) removals
    /// fail whole with [`ControllerError::PolicyViolation`].
    pub async fn delete_topics(
        &self,
        topics: Vec<TopicRef>,
    ) -> Vec<Result<(String, TopicId), ControllerError>> {
        let n = topics.len();
        self.run(|image| Ok(control::delete_topics(image, &topics)))
            .await
            .unwrap_or_else(|e| vec![Err(e); n])
    }

    /// Allocates a block of [`PRODUCER_ID_BLOCK_SIZE`](crate::PRODUCER_ID_BLOCK_SIZE)
    /// producer ids (Kafka's `AllocateProducerIds`, KIP-730). Blocks are
    /// committed before they are returned, so they are never reused, across
    /// restarts too.
    ///
    /// # Errors
    ///
    /// [`ControllerError::StaleBrokerEpoch`] unless `broker_epoch` is the
    /// broker's current registration, [`ControllerError::ProducerIdsExhausted`],
    /// or a commit error.
    pub async fn allocate_producer_ids(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<Range<i64>, ControllerError> {
        self.run(|image| control::allocate_producer_ids(image, broker_id, broker_epoch))
            .await
    }

    /// Sets (`Some`) or deletes (`None`) topic configs.
    ///
    /// # Errors
    ///
    /// [`ControllerError::UnknownTopic`], or a commit error.
    pub async fn alter_topic_configs(
        &self,
        topic: &str,
        configs: Vec<(String, Option<String>)>,
    ) -> Result<(), ControllerError> {
        self.run(|image| control::alter_topic_configs(image, topic, configs))
            .await
    }

    /// Adds partitions to existing topics (CreatePartitions); per-topic
    /// results in request order. Validation and records as
    /// [`control::create_partitions`]: all added partitions of one call are
    /// committed as ONE atomic batch and the call returns once it is applied
    /// to the published image. `validate_only` writes nothing. A commit
    /// failure turns every would-be success into that error.
    pub async fn create_partitions(
        &self,
        topics: Vec<NewPartitions>,
        validate_only: bool,
    ) -> Vec<Result<(), ControllerError>> {
        let n = topics.len();
        self.run(|image| {
            Ok(control::create_partitions(
                image,
                &topics,
                validate_only,
                self.inner.placer.as_ref(),
            ))
        })
        .await
        .unwrap_or_else(|e| vec![Err(e); n])
    }

    /// Replaces all of a topic's dynamic configs with `configs` (legacy
    /// AlterConfigs), as [`control::replace_topic_configs`]: keys not listed
    /// go back to their defaults.
    ///
    /// # Errors
    ///
    /// [`ControllerError::UnknownTopic`], or a commit error.
    pub async fn replace_topic_configs(
        &self,
        topic: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), ControllerError> {
        self.run(|image| control::replace_topic_configs(image, topic, &configs))
            .await
    }

    /// Stops the quorum. Commands after this fail with
    /// [`ControllerError::Raft`]. Calling it twice is harmless.
    ///
    /// # Errors
    ///
    /// [`ControllerError::Raft`] when the raft task ended abnormally.
    pub async fn shutdown(&self) -> Result<(), ControllerError> {
        let watcher = self
            .inner
            .leader_watcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let Some(watcher) = watcher else {
            return Ok(());
        };
        watcher.abort();
        self.inner.raft.shutdown().await.map_err(raft_err)?;
        self.inner
            .images
            .send_if_modified(|image| set_controller_id(image, None));
        Ok(())
    }

    /// Runs one command under the command lock: compute from the latest
    /// image, commit the records (if any), return the response once applied.
    async fn run<T>(
        &self,
        compute: impl FnOnce(&MetadataImage) -> Result<ControllerResult<T>, ControllerError>,
    ) -> Result<T, ControllerError> {
        let _queue = self.inner.commands.lock().await;
        self.ensure_active()?;
        let image = self.image();
        let result = compute(&image)?;
        if !result.records.is_empty() {
            self.commit(result.records).await?;
        }
        Ok(result.response)
    }

    /// Fails with `NotController` unless this node leads the quorum.
    fn ensure_active(&self) -> Result<(), ControllerError> {
        let metrics = self.inner.raft.metrics().borrow().clone();
        if let Err(fatal) = &metrics.running_state {
            return Err(raft_err(fatal));
        }
        if metrics.state != ServerState::Leader {
            return Err(ControllerError::NotController {
                leader: metrics.current_leader.and_then(|l| i32::try_from(l).ok()),
            });
        }
        Ok(())
    }

    async fn commit(
        &self,
        records: Vec<crate::records::MetadataRecord>,
    ) -> Result<(), ControllerError> {
        let count = records.len();
        let response = self
            .inner
            .raft
            .client_write(MetadataBatch { records })
            .await
            .map_err(|e| match e {
                RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
                    ControllerError::NotController {
                        leader: f.leader_id.and_then(|l| i32::try_from(l).ok()),
                    }
                }
                other => raft_err(other),
            })?;
        if !response.data.applied {
            return Err(ControllerError::Storage {
                reason: format!(
                    "metadata batch at offset {} was committed but did not replay",
                    response.data.offset
                ),
            });
        }
        metrics::counter!("weir_controller_records_committed_total").increment(count as u64);
        Ok(())
    }
}

/// Sets `controller_id` on the published image; true if it changed.
fn set_controller_id(image: &mut Arc<MetadataImage>, controller_id: Option<i32>) -> bool {
    if image.controller_id == controller_id {
        return false;
    }
    Arc::make_mut(image).controller_id = controller_id;
    true
}

/// Republishes the image whenever the raft leader changes.
async fn watch_leader(
    mut metrics: watch::Receiver<openraft::RaftMetrics<u64, BasicNode>>,
    images: watch::Sender<Arc<MetadataImage>>,
) {
    loop {
        let leader = metrics
            .borrow_and_update()
            .current_leader
            .and_then(|l| i32::try_from(l).ok());
        images.send_if_modified(|image| set_controller_id(image, leader));
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use openraft::storage::RaftLogStorage;

    use super::*;
    use crate::control::CreatableTopic;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn snapshot_purges_the_log_and_restart_rebuilds_from_it() {
        let dir = tempfile::tempdir().unwrap();
        let config = ControllerConfig {
            node_id: 0,
            metadata_dir: dir.path().join("__cluster_metadata-0"),
            cluster_id: "c".into(),
        };
        let options = QuorumOptions {
            snapshot_interval_entries: 5,
            log_entries_kept_after_snapshot: 0,
            ..QuorumOptions::default()
        };
        let before = {
            let controller = QuorumController::start_with(config.clone(), options.clone())
                .await
                .unwrap();
            let epoch = controller
                .register_broker(0, uuid::Uuid::new_v4(), vec![], None)
                .await
                .unwrap();
            for i in 0..12 {
                let r = controller
                    .create_topics(
                        vec![CreatableTopic {
                            name: format!("t{i}"),
                            num_partitions: 2,
                            replication_factor: 1,
                            assignments: vec![],
                            configs: vec![],
                        }],
                        false,
                    )
                    .await;
                assert!(r[0].is_ok(), "{r:?}");
            }
            controller.allocate_producer_ids(0, epoch).await.unwrap();
            let applied = controller.image().last_applied_offset;
            // The low threshold makes openraft snapshot by itself, but a
            // trigger that arrives while a snapshot is being built is
            // skipped, so keep asking for one until a snapshot covers
            // everything applied and the log is purged up to it (bounded).
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            let waited = loop {
                controller.inner.raft.trigger().snapshot().await.unwrap();
                let done = controller
                    .inner
                    .raft
                    .wait(Some(Duration::from_secs(1)))
                    .metrics(
                        |m| {
                            m.snapshot.is_some_and(|s| s.index >= applied)
                                && m.purged.is_some_and(|p| Some(p) == m.snapshot)
                        },
                        "snapshot and purge",
                    )
                    .await;
                match done {
                    Ok(metrics) => break metrics,
                    Err(e) if std::time::Instant::now() < deadline => {
                        tracing::debug!(error = %e, "snapshot not there yet; asking again")
                    }
                    Err(e) => panic!("no snapshot covering offset {applied}: {e}"),
                }
            };
            let snapshot_offset = waited.snapshot.unwrap().index;
            let before = controller.image();
            controller.shutdown().await.unwrap();

            // Everything up to the snapshot is gone from the raft log: a
            // restart can only get those topics from the snapshot.
            let mut log = MetadataLogStore::open(&config.metadata_dir).unwrap();
            let state = log.get_log_state().await.unwrap();
            assert_eq!(
                state.last_purged_log_id.map(|l| l.index),
                Some(snapshot_offset)
            );
            assert!(snapshot_offset > 10);
            before
        };

        let controller = QuorumController::start_with(config, options).await.unwrap();
        let after = controller.image();
        assert_eq!(after.topics, before.topics);
        assert_eq!(after.topic_names_by_id, before.topic_names_by_id);
        assert_eq!(after.brokers, before.brokers);
        assert_eq!(after.next_producer_id, 1000);
        controller.shutdown().await.unwrap();
    }
}
