//! The production [`GroupStore`]: group metadata and committed offsets as
//! records of the internal compacted topic `__consumer_offsets`, in Kafka's
//! own key and value schemas ([`super::records`]), so Kafka's tools decode
//! Weir's offsets topic and state survives restarts and crashes.
//!
//! The topic is created through the controller the first time a group
//! writes ([`OffsetsTopicStore::ensure_topic`], Kafka's
//! `AutoTopicCreationManager` for `__consumer_offsets`):
//! `offsets.topic.num.partitions` partitions, `offsets.topic.replication.
//! factor` replicas (on a single-voter cluster capped at the registered
//! brokers, with a warning; on a multi-voter cluster, as Kafka, not created
//! while fewer brokers are unfenced), and
//! the topic configs Kafka's `GroupCoordinatorService.
//! groupMetadataTopicConfigs` sets: `cleanup.policy=compact`,
//! `compression.type=producer`, `segment.bytes=offsets.topic.segment.bytes`.
//!
//! An append writes one uncompressed magic-2 batch (timestamps now, no
//! producer) on the group's partition ([`offsets_partition_for`]) through
//! the path Produce uses ([`Partition::append_records_as_leader`]) and
//! resolves once it is durable and replicated as an acks=all produce
//! ([`Partition::wait_durable`], then [`Partition::wait_replicated`] within
//! Kafka's `offsets.commit.timeout.ms` default, 5000 ms); a broker that
//! does not lead the group's partition in the metadata image refuses the
//! append (NOT_COORDINATOR). A load replays a partition this broker leads
//! from its log start to its log end (on a blocking thread; a new leader's
//! high watermark lags its log, as Kafka's `CoordinatorLoaderImpl` reads to
//! the end); batches and records it cannot decode are logged and skipped.
//! [`OffsetsTopicStore::leadership`] tells the coordinator which partitions
//! this broker leads.
//!
//! `__consumer_offsets` is replicated like any partition, so when
//! leadership of an offsets partition moves (controlled shutdown, a dead
//! broker, ElectLeaders) the new leader loads every committed offset and
//! group from its own replica.
//!
//! Durability follows the topic's `write.caching` (the broker default
//! `log.write.caching`): off, as by default, an append resolves after the
//! fsync that covers it; on, once it is in the page cache, as Apache Kafka
//! answers commits.
//!
//! This module depends on the controller, the `ReplicaManager` and storage;
//! it knows nothing of Kafka requests.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use tracing::{debug, info, warn};
use weir_controller::{ControllerError, CreatableTopic, MetadataController, MetadataImage};
use weir_storage::batch::{read_key_values, records_section, write_key_value_batch, KeyValue};
use weir_storage::{RecordBatchHeader, StorageError};

use super::records::{
    decode_group_metadata_value, decode_key, decode_offset_commit_value, encode_group_metadata_key,
    encode_group_metadata_value, encode_offset_commit_key, encode_offset_commit_value,
    offset_commit_value_version, GroupRecordKey, RecordDecodeError, RecordEncodeError,
    GROUP_METADATA_VALUE_VERSION,
};
use super::store::{GroupStore, GroupStoreError, GroupWrite, LoadedGroup, OffsetsLeadership};
use super::{offsets_partition_for, OFFSETS_TOPIC};
use crate::config::BrokerConfig;
use crate::partition::Partition;
use crate::replica_manager::ReplicaManager;

/// How long a group write waits for the ISR (Kafka's
/// `offsets.commit.timeout.ms` default, 5000 ms).
const OFFSETS_COMMIT_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(5000);

/// Bytes read from the log per step while loading (Kafka's
/// `offsets.load.buffer.size` default, 5 MiB). A larger batch is still read
/// whole.
const LOAD_BUFFER_BYTES: usize = 5 * 1024 * 1024;

/// How `__consumer_offsets` is created: the broker's `offsets.topic.*`
/// keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetsTopicConfig {
    /// `offsets.topic.num.partitions` (at least 1). Default: 50.
    pub num_partitions: i32,
    /// `offsets.topic.replication.factor` (at least 1). Default: 3.
    pub replication_factor: i16,
    /// `offsets.topic.segment.bytes`, bytes. Default: 104857600.
    pub segment_bytes: u64,
    /// Whether a replication factor above the unfenced brokers is lowered
    /// to their count (a single-voter cluster, so that one broker serves
    /// groups under the default factor 3) rather than leaving the topic
    /// uncreated until enough brokers are unfenced (Kafka).
    pub cap_replication_factor: bool,
}

impl OffsetsTopicConfig {
    /// The broker's `offsets.topic.*` settings.
    pub fn from_broker(config: &BrokerConfig) -> Self {
        OffsetsTopicConfig {
            num_partitions: config.offsets_topic_num_partitions,
            replication_factor: config.offsets_topic_replication_factor,
            segment_bytes: config.offsets_topic_segment_bytes,
            // A single node (one voter, this one); a broker-only node is
            // part of a cluster even when it knows the quorum only by
            // controller.quorum.bootstrap.servers (no voters listed).
            cap_replication_factor: !config.is_broker_only() && config.quorum_voters().len() <= 1,
        }
    }

    /// The topic configs `__consumer_offsets` is created with (Kafka's
    /// `GroupCoordinatorService.groupMetadataTopicConfigs`).
    pub fn topic_configs(&self) -> Vec<(String, String)> {
        vec![
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("compression.type".to_string(), "producer".to_string()),
            ("segment.bytes".to_string(), self.segment_bytes.to_string()),
        ]
    }
}

/// The [`GroupStore`] over `__consumer_offsets`.
pub struct OffsetsTopicStore {
    node_id: i32,
    config: OffsetsTopicConfig,
    controller: MetadataController,
    replica_manager: Arc<ReplicaManager>,
    /// Serializes creations of the topic by concurrent first appends.
    create_lock: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for OffsetsTopicStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffsetsTopicStore")
            .field("node_id", &self.node_id)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OffsetsTopicStore {
    /// A store for broker `node_id` writing through `replica_manager` and
    /// creating the topic through `controller` (what `server::run` has).
    pub fn new(
        node_id: i32,
        config: OffsetsTopicConfig,
        controller: MetadataController,
        replica_manager: Arc<ReplicaManager>,
    ) -> Self {
        OffsetsTopicStore {
            node_id,
            config,
            controller,
            replica_manager,
            create_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// The store of a broker as `server::run` builds it: `config`'s
    /// `node.id` and `offsets.topic.*` keys.
    pub fn for_broker(
        config: &BrokerConfig,
        controller: MetadataController,
        replica_manager: Arc<ReplicaManager>,
    ) -> Self {
        Self::new(
            config.node_id,
            OffsetsTopicConfig::from_broker(config),
            controller,
            replica_manager,
        )
    }

    /// Partitions of `__consumer_offsets`: the existing topic's count, else
    /// `offsets.topic.num.partitions` (Kafka's coordinator also uses the
    /// existing topic's count, `BrokerServer`'s `groupCoordinator.startup`).
    pub fn partition_count(&self) -> i32 {
        partition_count(&self.controller.image(), &self.config)
    }

    /// Which `__consumer_offsets` partitions this broker leads in `image`.
    pub fn leadership(&self, image: &MetadataImage) -> OffsetsLeadership {
        match image.topic(OFFSETS_TOPIC) {
            None => OffsetsLeadership::NoTopic,
            Some(topic) => OffsetsLeadership::Leads(
                topic
                    .partitions
                    .iter()
                    .filter(|(_, p)| p.leader == self.node_id)
                    .map(|(&index, p)| (index, p.leader_epoch))
                    .collect(),
            ),
        }
    }

    /// Creates `__consumer_offsets` if it does not exist and opens its logs
    /// here; returns its partition count. Called by the first append; the
    /// coordinator may call it earlier (Kafka creates the topic on the
    /// first FindCoordinator).
    ///
    /// The replication factor is `offsets.topic.replication.factor`. With
    /// [`OffsetsTopicConfig::cap_replication_factor`] (a single-voter
    /// cluster) it is capped at the number of unfenced brokers, with a
    /// warning; otherwise, as Kafka's `AutoTopicCreationManager`, the topic
    /// is not created while fewer brokers are unfenced (the controller
    /// refuses it), and FindCoordinator answers COORDINATOR_NOT_AVAILABLE
    /// until they are.
    ///
    /// # Errors
    /// [`GroupStoreError::NotAvailable`] (partition -1) when the controller
    /// refuses or fails the creation; [`GroupStoreError::Storage`] when the
    /// logs cannot be created.
    pub async fn ensure_topic(&self) -> Result<i32, GroupStoreError> {
        if let Some(topic) = self.controller.image().topic(OFFSETS_TOPIC) {
            return Ok(topic.partitions.len() as i32);
        }
        let _creating = self.create_lock.lock().await;
        let image = self.controller.image();
        if let Some(topic) = image.topic(OFFSETS_TOPIC) {
            return Ok(topic.partitions.len() as i32);
        }
        let brokers = image.unfenced_broker_ids().len().max(1);
        let mut replication_factor = self.config.replication_factor;
        if replication_factor as usize > brokers && self.config.cap_replication_factor {
            warn!(
                configured = replication_factor,
                brokers,
                "offsets.topic.replication.factor exceeds the registered brokers; \
                 creating {OFFSETS_TOPIC} with replication factor {brokers}"
            );
            replication_factor = brokers as i16;
        }
        let outcome = self
            .controller
            .create_topics(
                vec![CreatableTopic {
                    name: OFFSETS_TOPIC.to_string(),
                    num_partitions: self.config.num_partitions,
                    replication_factor,
                    assignments: Vec::new(),
                    configs: self.config.topic_configs(),
                }],
                false,
            )
            .await;
        match outcome.into_iter().next() {
            Some(Ok(created)) => info!(
                partitions = created.num_partitions,
                replication_factor = created.replication_factor,
                "created {OFFSETS_TOPIC}"
            ),
            Some(Err(ControllerError::TopicAlreadyExists { .. })) => {}
            Some(Err(e)) => {
                return Err(GroupStoreError::NotAvailable {
                    partition: -1,
                    reason: format!("creating {OFFSETS_TOPIC} failed: {e}"),
                })
            }
            None => {
                return Err(GroupStoreError::NotAvailable {
                    partition: -1,
                    reason: format!("creating {OFFSETS_TOPIC} returned no outcome"),
                })
            }
        }
        let image = self.controller.image();
        self.replica_manager
            .apply_image(&image)
            .map_err(|e| GroupStoreError::Storage(e.to_string()))?;
        Ok(partition_count(&image, &self.config))
    }

    /// The hosted partition `index` of the topic if this broker leads it.
    fn leader_partition(&self, index: i32) -> Result<Arc<Partition>, GroupStoreError> {
        let image = self.controller.image();
        let registration = image
            .topic(OFFSETS_TOPIC)
            .and_then(|t| t.partitions.get(&index))
            .ok_or_else(|| GroupStoreError::NotAvailable {
                partition: index,
                reason: format!("{OFFSETS_TOPIC} has no partition {index}"),
            })?;
        if registration.leader != self.node_id {
            return Err(GroupStoreError::NotCoordinator { partition: index });
        }
        if let Some(p) = self.replica_manager.partition(OFFSETS_TOPIC, index) {
            return Ok(p);
        }
        // The image may be newer than the hosted partitions.
        self.replica_manager
            .apply_image(&image)
            .map_err(|e| GroupStoreError::Storage(e.to_string()))?;
        self.replica_manager
            .partition(OFFSETS_TOPIC, index)
            .ok_or_else(|| GroupStoreError::NotAvailable {
                partition: index,
                reason: "the partition's log is not open on this broker".to_string(),
            })
    }
}

fn partition_count(image: &MetadataImage, config: &OffsetsTopicConfig) -> i32 {
    image
        .topic(OFFSETS_TOPIC)
        .map(|t| t.partitions.len() as i32)
        .unwrap_or(config.num_partitions)
}

/// One encoded `__consumer_offsets` record: key, and value (`None` for a
/// tombstone).
pub type EncodedRecord = (Vec<u8>, Option<Vec<u8>>);

/// The key and value (`None`: tombstone) of every record of `write`, group
/// metadata first, in the versions Kafka 4.1 writes.
///
/// # Errors
/// A string too long for its schema.
pub fn encode_group_write(
    group_id: &str,
    write: &GroupWrite,
) -> Result<Vec<EncodedRecord>, RecordEncodeError> {
    let mut records = Vec::with_capacity(write.offsets.len() + 1);
    if let Some(metadata) = &write.metadata {
        let value = metadata
            .as_ref()
            .map(|m| encode_group_metadata_value(m, GROUP_METADATA_VALUE_VERSION))
            .transpose()?;
        records.push((encode_group_metadata_key(group_id)?, value));
    }
    for (tp, offset) in &write.offsets {
        let value = offset
            .as_ref()
            .map(|o| encode_offset_commit_value(o, offset_commit_value_version(o)))
            .transpose()?;
        records.push((encode_offset_commit_key(group_id, tp)?, value));
    }
    Ok(records)
}

fn storage_error(index: i32, e: StorageError) -> GroupStoreError {
    match e {
        StorageError::RecordBatchTooLarge { size, .. } => GroupStoreError::RecordTooLarge { size },
        e => {
            warn!(partition = index, error = %e, "appending to {OFFSETS_TOPIC} failed");
            GroupStoreError::Storage(e.to_string())
        }
    }
}

impl GroupStore for OffsetsTopicStore {
    async fn append(&self, group_id: &str, write: GroupWrite) -> Result<(), GroupStoreError> {
        let records = encode_group_write(group_id, &write).map_err(|e| match e {
            RecordEncodeError::StringTooLong { len, .. } => {
                GroupStoreError::RecordTooLarge { size: len }
            }
            e => GroupStoreError::Storage(e.to_string()),
        })?;
        if records.is_empty() {
            return Ok(());
        }
        let partitions = self.ensure_topic().await?;
        let index = offsets_partition_for(group_id, partitions);
        let partition = self.leader_partition(index)?;
        let key_values: Vec<KeyValue<'_>> = records
            .iter()
            .map(|(key, value)| KeyValue {
                key: Some(key),
                value: value.as_deref(),
            })
            .collect();
        let now_ms = crate::handlers::now_ms();
        let batch =
            write_key_value_batch(&key_values, now_ms).ok_or(GroupStoreError::RecordTooLarge {
                size: records.len(),
            })?;
        let batch = Bytes::from(batch);
        // The coordinator maps NOT_ENOUGH_REPLICAS to COORDINATOR_NOT_AVAILABLE.
        partition
            .check_enough_replicas()
            .map_err(|_| GroupStoreError::NotAvailable {
                partition: index,
                reason: "the ISR is smaller than min.insync.replicas".to_string(),
            })?;
        let leader_epoch = partition.leader_epoch();
        let (info, flush_due) = partition
            .append_records_as_leader(&batch, now_ms)
            .map_err(|e| storage_error(index, e))?;
        if partition.ack_requires_flush(-1, flush_due) {
            partition
                .wait_durable(info.last_offset + 1)
                .await
                .map_err(|e| storage_error(index, e))?;
        }
        // offsets.commit.required.acks=-1: answered once the ISR has the
        // write (Kafka's coordinator appends with acks=all and
        // offsets.commit.timeout.ms).
        partition
            .wait_replicated(info.last_offset + 1, leader_epoch, OFFSETS_COMMIT_TIMEOUT)
            .await
            .map_err(|wait| match wait {
                crate::partition::ReplicationWait::NotLeader => {
                    GroupStoreError::NotCoordinator { partition: index }
                }
                other => GroupStoreError::NotAvailable {
                    partition: index,
                    reason: other.message().to_string(),
                },
            })?;
        Ok(())
    }

    async fn load(&self) -> Result<Vec<LoadedGroup>, GroupStoreError> {
        let image = self.controller.image();
        let Some(topic) = image.topic(OFFSETS_TOPIC) else {
            return Ok(Vec::new());
        };
        let mut partitions = Vec::new();
        for (&index, registration) in &topic.partitions {
            if registration.leader == self.node_id {
                partitions.push(self.leader_partition(index)?);
            }
        }
        replay_partitions(partitions).await
    }

    fn partition_for(&self, group_id: &str) -> i32 {
        offsets_partition_for(group_id, self.partition_count())
    }

    async fn load_partition(&self, partition: i32) -> Result<Vec<LoadedGroup>, GroupStoreError> {
        let partition = self.leader_partition(partition)?;
        replay_partitions(vec![partition]).await
    }
}

/// Replays `partitions` (off the async workers) into the groups they hold.
///
/// # Errors
/// [`GroupStoreError::Storage`] when a log cannot be read.
async fn replay_partitions(
    partitions: Vec<Arc<Partition>>,
) -> Result<Vec<LoadedGroup>, GroupStoreError> {
    // Reading whole logs is blocking file I/O: off the async workers.
    let replay = tokio::task::spawn_blocking(move || {
        let mut groups = BTreeMap::new();
        for partition in &partitions {
            replay_partition(partition, &mut groups)?;
        }
        Ok::<_, GroupStoreError>(groups)
    });
    let groups = replay
        .await
        .map_err(|e| GroupStoreError::Storage(format!("loading {OFFSETS_TOPIC}: {e}")))??;
    Ok(groups
        .into_values()
        .filter(|g| g.metadata.is_some() || !g.offsets.is_empty())
        .collect())
}

/// Replays one partition from its log start to its log end offset into
/// `groups`. A new leader's high watermark lags until its followers have
/// fetched from it, while its log already holds every write the old leader
/// acknowledged (acks=all), which would otherwise be missed; Kafka's
/// `CoordinatorLoaderImpl` also reads to the log end.
///
/// # Errors
/// [`GroupStoreError::Storage`] when the log cannot be read; undecodable
/// batches and records are logged and skipped instead.
fn replay_partition(
    partition: &Partition,
    groups: &mut BTreeMap<String, LoadedGroup>,
) -> Result<(), GroupStoreError> {
    let tp = partition.topic_partition().clone();
    let read_error = |e: String| GroupStoreError::Storage(format!("reading {tp}: {e}"));
    let mut offset = partition.log_start_offset();
    let end = partition.log_end_offset();
    while offset < end {
        let data = partition
            .read_to_log_end(offset, LOAD_BUFFER_BYTES, true)
            .map_err(|e| read_error(e.to_string()))?;
        let Some(slice) = data.records else {
            break;
        };
        let bytes = slice
            .read_to_bytes()
            .map_err(|e| read_error(e.to_string()))?;
        let Some(next) = replay_batches(&tp, &bytes, offset, groups) else {
            return Ok(());
        };
        if next <= offset {
            break;
        }
        offset = next;
    }
    Ok(())
}

/// Replays the whole batches at the start of `bytes` (read from `tp`'s log
/// at `offset`) into `groups` and returns the offset after the last one
/// (`offset` if none is whole: a batch cut by the read size is read next
/// time). `None` when a batch header is unreadable: the rest of the
/// partition is not loaded, logged.
pub(crate) fn replay_batches(
    tp: &weir_storage::TopicPartition,
    bytes: &[u8],
    offset: i64,
    groups: &mut BTreeMap<String, LoadedGroup>,
) -> Option<i64> {
    let mut rest = bytes;
    let mut next = offset;
    while !rest.is_empty() {
        let header = match RecordBatchHeader::parse(rest) {
            Ok(h) if h.size_in_bytes() <= rest.len() => h,
            Ok(_) => break, // a batch cut by the read size: read it next
            Err(e) => {
                warn!(topic_partition = %tp, offset = next, error = %e,
                    "unreadable batch header; the rest of the partition is not loaded");
                return None;
            }
        };
        if !header.offsets_in_range() {
            warn!(topic_partition = %tp, offset = next, base_offset = header.base_offset,
                "batch offsets out of range; the rest of the partition is not loaded");
            return None;
        }
        let (batch, tail) = rest.split_at(header.size_in_bytes());
        rest = tail;
        next = header.next_offset();
        replay_batch(tp, &header, batch, groups);
    }
    Some(next)
}

/// Replays the records of one stored batch into `groups`; logs and skips
/// what it cannot decode. Control batches (transaction markers) carry no
/// group records; transactional offset commits (KIP-98, TxnOffsetCommit)
/// are not written by Weir yet and are skipped.
fn replay_batch(
    tp: &weir_storage::TopicPartition,
    header: &RecordBatchHeader,
    batch: &[u8],
    groups: &mut BTreeMap<String, LoadedGroup>,
) {
    if header.is_control() {
        return;
    }
    if header.is_transactional() {
        warn!(topic_partition = %tp, base_offset = header.base_offset,
            "skipping a transactional batch: transactional offset commits are not supported");
        return;
    }
    if let Err(e) = RecordBatchHeader::validate(batch) {
        warn!(topic_partition = %tp, base_offset = header.base_offset, error = %e,
            "skipping a corrupt batch");
        return;
    }
    let records = match header.compression_codec() {
        0 => records_section(batch).to_vec(),
        codec => match weir_storage::compression::decompress(codec, records_section(batch)) {
            Ok(records) => records,
            Err(e) => {
                warn!(topic_partition = %tp, base_offset = header.base_offset, error = %e,
                    "skipping a batch that does not decompress");
                return;
            }
        },
    };
    let key_values = match read_key_values(&records) {
        Ok(kvs) => kvs,
        Err(e) => {
            warn!(topic_partition = %tp, base_offset = header.base_offset, error = %e,
                "skipping a batch whose records do not parse");
            return;
        }
    };
    for (i, kv) in key_values.iter().enumerate() {
        let offset = header.base_offset + i as i64;
        if let Err(e) = replay_record(kv, groups) {
            match e {
                RecordDecodeError::UnknownVersion { schema: "key", .. } => {
                    debug!(topic_partition = %tp, offset, error = %e, "skipping a record")
                }
                e => warn!(topic_partition = %tp, offset, error = %e,
                    "skipping an undecodable record"),
            }
        }
    }
}

/// Applies one record: a value replaces, a tombstone removes.
fn replay_record(
    kv: &KeyValue<'_>,
    groups: &mut BTreeMap<String, LoadedGroup>,
) -> Result<(), RecordDecodeError> {
    let key = decode_key(kv.key.ok_or(RecordDecodeError::Invalid {
        field: "key",
        reason: "null key",
    })?)?;
    let group = groups
        .entry(key.group().to_string())
        .or_insert_with(|| LoadedGroup {
            group_id: key.group().to_string(),
            ..LoadedGroup::default()
        });
    match key {
        GroupRecordKey::OffsetCommit {
            topic_partition, ..
        } => match kv.value {
            Some(value) => {
                let offset = decode_offset_commit_value(value)?;
                group.offsets.insert(topic_partition, offset);
            }
            None => {
                group.offsets.remove(&topic_partition);
            }
        },
        GroupRecordKey::GroupMetadata { .. } => {
            group.metadata = kv.value.map(decode_group_metadata_value).transpose()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    use weir_controller::{ControllerConfig, QuorumController};
    use weir_storage::fs::faulty::{Fault, FaultKind, FaultyFileSystem};
    use weir_storage::{FileSystem, LogManager, RealFileSystem, TopicPartition};

    use super::*;
    use crate::group::store::{GroupMetadataRecord, MemberMetadataRecord, OffsetAndMetadata};

    const NODE: i32 = 1;
    const PARTITIONS: i32 = 4;

    /// Only a single node caps the offsets topic's replication factor at
    /// its live brokers; a broker-only node is part of a cluster even when
    /// it lists no voters (controller.quorum.bootstrap.servers only).
    #[test]
    fn only_a_single_node_caps_the_replication_factor() {
        let config = |pairs: &[(&str, &str)]| {
            BrokerConfig::from_pairs(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
            .unwrap()
        };
        assert!(OffsetsTopicConfig::from_broker(&config(&[])).cap_replication_factor);
        let voters = config(&[(
            "controller.quorum.voters",
            "1@127.0.0.1:9093,2@127.0.0.2:9093,3@127.0.0.3:9093",
        )]);
        assert!(!OffsetsTopicConfig::from_broker(&voters).cap_replication_factor);
        let bootstrap_only = config(&[
            ("process.roles", "broker"),
            ("node.id", "4"),
            ("controller.quorum.bootstrap.servers", "127.0.0.1:9093"),
        ]);
        assert!(!OffsetsTopicConfig::from_broker(&bootstrap_only).cap_replication_factor);
    }

    /// A broker's storage and controller in `dir`, without listeners.
    struct Broker {
        controller: MetadataController,
        replica_manager: Arc<ReplicaManager>,
        store: OffsetsTopicStore,
    }

    impl Broker {
        async fn open(dir: &Path, fs: Arc<dyn FileSystem>) -> Broker {
            let config = BrokerConfig {
                log_dirs: vec![dir.to_path_buf()],
                node_id: NODE,
                offsets_topic_num_partitions: PARTITIONS,
                ..BrokerConfig::default()
            };
            let log_manager = LogManager::open_with_file_system(
                fs,
                dir.to_path_buf(),
                NODE,
                config.default_log_config(),
                1,
            )
            .unwrap();
            let controller: MetadataController = QuorumController::start(ControllerConfig {
                node_id: NODE,
                metadata_dir: dir.join("__cluster_metadata-0"),
                cluster_id: log_manager.cluster_id().to_string(),
            })
            .await
            .unwrap()
            .into();
            controller
                .register_broker(weir_controller::BrokerRegistrationRequest {
                    broker_id: NODE,
                    incarnation_id: uuid::Uuid::new_v4(),
                    endpoints: vec![],
                    rack: None,
                    previous_broker_epoch: -1,
                })
                .await
                .unwrap();
            let replica_manager = Arc::new(ReplicaManager::new(NODE, config.clone(), log_manager));
            replica_manager.apply_image(&controller.image()).unwrap();
            let store =
                OffsetsTopicStore::for_broker(&config, controller.clone(), replica_manager.clone());
            Broker {
                controller,
                replica_manager,
                store,
            }
        }

        /// Stops the controller and drops the logs without a clean
        /// shutdown (no final flush or checkpoint), as a crash would.
        async fn crash(self) {
            let Broker {
                controller,
                replica_manager,
                store,
            } = self;
            drop(store);
            drop(replica_manager);
            controller.shutdown().await.unwrap();
        }
    }

    fn offset(value: i64) -> OffsetAndMetadata {
        OffsetAndMetadata {
            committed_offset: value,
            committed_leader_epoch: 3,
            metadata: format!("m{value}"),
            commit_timestamp_ms: 1_700_000_000_000 + value,
            expire_timestamp_ms: None,
        }
    }

    fn metadata(generation: i32) -> GroupMetadataRecord {
        GroupMetadataRecord {
            protocol_type: "consumer".into(),
            generation,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            current_state_timestamp_ms: 1_700_000_000_000,
            members: vec![MemberMetadataRecord {
                member_id: "m-1".into(),
                group_instance_id: Some("static-1".into()),
                client_id: "client".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 60_000,
                session_timeout_ms: 45_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        }
    }

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition::new(topic, partition)
    }

    fn commit(offsets: &[(TopicPartition, Option<i64>)]) -> GroupWrite {
        GroupWrite {
            metadata: None,
            offsets: offsets
                .iter()
                .map(|(tp, o)| (tp.clone(), o.map(offset)))
                .collect(),
        }
    }

    /// Two group ids that live on different partitions.
    fn groups_on_two_partitions() -> (&'static str, &'static str) {
        let a = "group-a";
        let b = ["group-b", "group-c", "group-d", "group-e"]
            .into_iter()
            .find(|b| offsets_partition_for(b, PARTITIONS) != offsets_partition_for(a, PARTITIONS))
            .unwrap();
        (a, b)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_first_append_creates_the_compacted_topic_and_load_returns_it() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path(), RealFileSystem::shared()).await;
        assert!(broker.store.load().await.unwrap().is_empty());
        assert!(broker.controller.image().topic(OFFSETS_TOPIC).is_none());

        let write = GroupWrite {
            metadata: Some(Some(metadata(1))),
            offsets: vec![(tp("orders", 0), Some(offset(10)))],
        };
        broker.store.append("g1", write).await.unwrap();

        let image = broker.controller.image();
        let topic = image.topic(OFFSETS_TOPIC).unwrap();
        assert_eq!(topic.partitions.len(), PARTITIONS as usize);
        // Replication factor 3 capped at the one registered broker.
        assert!(topic.partitions.values().all(|p| p.replicas == vec![NODE]));
        assert_eq!(
            topic.configs.get("cleanup.policy").map(String::as_str),
            Some("compact")
        );
        assert_eq!(
            topic.configs.get("segment.bytes").map(String::as_str),
            Some("104857600")
        );
        let partition = broker
            .replica_manager
            .partition(OFFSETS_TOPIC, broker.store.partition_for("g1"))
            .unwrap();
        assert!(partition.is_compacted());
        // One batch of two records, fsynced.
        assert_eq!(partition.log_end_offset(), 2);

        let loaded = broker.store.load().await.unwrap();
        assert_eq!(
            loaded,
            vec![LoadedGroup {
                group_id: "g1".into(),
                metadata: Some(metadata(1)),
                offsets: [(tp("orders", 0), offset(10))].into_iter().collect(),
            }]
        );
        broker.crash().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn newest_values_win_and_tombstones_remove() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path(), RealFileSystem::shared()).await;
        let store = &broker.store;
        let write = GroupWrite {
            metadata: Some(Some(metadata(1))),
            offsets: commit(&[(tp("t", 0), Some(1)), (tp("t", 1), Some(2))]).offsets,
        };
        store.append("g", write).await.unwrap();
        store
            .append("g", commit(&[(tp("t", 1), Some(5))]))
            .await
            .unwrap();
        store
            .append(
                "g",
                GroupWrite {
                    metadata: Some(None),
                    offsets: commit(&[(tp("t", 0), None)]).offsets,
                },
            )
            .await
            .unwrap();
        // A group whose every key is deleted is not loaded.
        store
            .append("gone", commit(&[(tp("t", 0), Some(1))]))
            .await
            .unwrap();
        store
            .append("gone", commit(&[(tp("t", 0), None)]))
            .await
            .unwrap();

        let loaded = store.load().await.unwrap();
        assert_eq!(
            loaded,
            vec![LoadedGroup {
                group_id: "g".into(),
                metadata: None,
                offsets: [(tp("t", 1), offset(5))].into_iter().collect(),
            }]
        );
        broker.crash().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn groups_on_different_partitions_load_together_and_survive_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = groups_on_two_partitions();
        let broker = Broker::open(dir.path(), RealFileSystem::shared()).await;
        broker
            .store
            .append(a, commit(&[(tp("x", 0), Some(7))]))
            .await
            .unwrap();
        broker
            .store
            .append(
                b,
                GroupWrite {
                    metadata: Some(Some(metadata(4))),
                    offsets: commit(&[(tp("y", 2), Some(9))]).offsets,
                },
            )
            .await
            .unwrap();
        for group in [a, b] {
            let partition = broker
                .replica_manager
                .partition(OFFSETS_TOPIC, offsets_partition_for(group, PARTITIONS))
                .unwrap();
            assert!(partition.log_end_offset() > 0, "{group}");
        }
        let before = broker.store.load().await.unwrap();
        assert_eq!(before.len(), 2);
        broker.crash().await;

        let reopened = Broker::open(dir.path(), RealFileSystem::shared()).await;
        assert_eq!(reopened.store.load().await.unwrap(), before);
        // Appends continue after the restart.
        reopened
            .store
            .append(a, commit(&[(tp("x", 0), Some(8))]))
            .await
            .unwrap();
        let after = reopened.store.load().await.unwrap();
        assert_eq!(after[0].offsets[&tp("x", 0)], offset(8));
        reopened.crash().await;
    }

    /// An I/O error writing or fsyncing the segment fails the append with
    /// `Storage` and takes the log directory offline for good (the broker
    /// halts; see `LogDirFileSystem`, Kafka's `LogDirFailureChannel`): the
    /// next append fails too, even once the disk works again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_disk_fault_fails_the_append_with_storage() {
        type ArmFault = fn(&FaultyFileSystem);
        let faults: [(&str, ArmFault); 3] = [
            ("ENOSPC on write", |fs| {
                fs.fail_writes(Fault::new(FaultKind::NoSpace).on_suffix(".log"))
            }),
            ("EIO on write", |fs| {
                fs.fail_writes(Fault::new(FaultKind::Io).on_suffix(".log"))
            }),
            ("EIO on fdatasync", |fs| {
                fs.fail_syncs(Fault::new(FaultKind::Io).on_suffix(".log"))
            }),
        ];
        for (name, arm) in faults {
            let dir = tempfile::tempdir().unwrap();
            let fs = Arc::new(FaultyFileSystem::new(dir.path()).unwrap());
            let broker = Broker::open(dir.path(), fs.clone()).await;
            let store = &broker.store;
            store
                .append("g", commit(&[(tp("t", 0), Some(1))]))
                .await
                .unwrap();
            arm(&fs);
            for attempt in 0..2 {
                let error = store
                    .append("g", commit(&[(tp("t", 0), Some(2))]))
                    .await
                    .unwrap_err();
                assert!(
                    matches!(error, GroupStoreError::Storage(_)),
                    "{name}, attempt {attempt}: {error:?}"
                );
                fs.disarm();
            }
            broker.crash().await;
        }
    }

    /// Load accepts compressed batches (Kafka's coordinator may compress,
    /// `offsets.topic.compression.codec`) and skips records it cannot
    /// decode: a null key, garbage, a key version of another group type,
    /// a corrupt value.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn load_reads_compressed_batches_and_skips_undecodable_records() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path(), RealFileSystem::shared()).await;
        broker.store.ensure_topic().await.unwrap();
        let index = broker.store.partition_for("g");
        let partition = broker.store.leader_partition(index).unwrap();
        let key = |t: &str| encode_offset_commit_key("g", &tp(t, 0)).unwrap();
        let value = |o: i64| encode_offset_commit_value(&offset(o), 3).unwrap();
        type RawRecord = (Option<Vec<u8>>, Option<Vec<u8>>);
        let records: Vec<RawRecord> = vec![
            (Some(key("good")), Some(value(1))),
            (None, Some(value(2))),
            (Some(vec![0xff]), Some(value(3))),
            (Some(vec![0, 3, 0, 1, b'g']), Some(vec![0, 0])),
            (Some(key("bad-value")), Some(vec![0, 3, 1])),
            (Some(key("also-good")), Some(value(4))),
        ];
        let records: Vec<Record> = records
            .into_iter()
            .enumerate()
            .map(|(i, (key, value))| Record {
                transactional: false,
                control: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: -1,
                timestamp: 1_000,
                key: key.map(Bytes::from),
                value: value.map(Bytes::from),
                headers: Default::default(),
                delete_horizon: false,
            })
            .collect();
        let mut batch = bytes::BytesMut::new();
        RecordBatchEncoder::encode(
            &mut batch,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::Gzip,
            },
        )
        .unwrap();
        // Stored as a Kafka coordinator would have written it (the produce
        // path would refuse the keyless record).
        partition
            .append_records_as_leader(&batch.freeze(), 1_000)
            .unwrap();
        let loaded = broker.store.load().await.unwrap();
        assert_eq!(loaded.len(), 1);
        let offsets: Vec<(&TopicPartition, i64)> = loaded[0]
            .offsets
            .iter()
            .map(|(tp, o)| (tp, o.committed_offset))
            .collect();
        assert_eq!(offsets, vec![(&tp("also-good", 0), 4), (&tp("good", 0), 1)]);
        broker.crash().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_empty_write_appends_nothing_and_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path(), RealFileSystem::shared()).await;
        broker
            .store
            .append("g", GroupWrite::default())
            .await
            .unwrap();
        assert!(broker.controller.image().topic(OFFSETS_TOPIC).is_none());
        broker.crash().await;
    }
}
