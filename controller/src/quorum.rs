//! The running controller: a metadata quorum (openraft) plus a serialized
//! command queue, as Kafka's `QuorumController`.
//!
//! Every command runs on the active controller (the raft leader) under one
//! async lock (Kafka's single controller event queue): it reads the latest
//! published image, computes records with the pure functions in
//! [`crate::control`], commits them through raft as one atomic batch, and
//! returns after the batch is applied to the published image. So two
//! concurrent commands never compute from the same image. A voter that is
//! not the active controller forwards the command over the
//! [`QuorumTransport`] and then waits until its own image has applied the
//! leader's resulting offset, so on every voter a caller that gets a
//! response sees its effect in [`QuorumController::image`]. This module
//! provides `execute` only; the typed commands over it are
//! [`MetadataController`](crate::MetadataController)'s.
//!
//! Single node (the default) is a one-voter quorum in this process. With
//! several voters (`controller.quorum.voters`), the voter with the lowest id
//! initializes the quorum with the full voter set when its store is
//! pristine, and the others start empty and join it; a node whose metadata
//! directory holds a vote, log or snapshot never initializes.
//!
//! With several voters, brokers register fenced and heartbeat through
//! [`MetadataController::broker_heartbeat`](crate::MetadataController::broker_heartbeat);
//! the active controller keeps their session clocks in memory (restarted
//! at every takeover) and fences a broker whose session expires, electing
//! new leaders in the same batch (Kafka's `BrokerHeartbeatManager` and
//! `ReplicationControlManager`).

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Range;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::raft::AppendEntriesResponse;
use openraft::{BasicNode, Raft, ServerState, SnapshotPolicy, Vote};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::control::{
    self, AlterPartitionRequest, AlterPartitionResponse, BrokerHeartbeat,
    BrokerRegistrationRequest, ControllerResult, CreatableTopic, CreatedTopic, ElectionType,
    HeartbeatProgress, HeartbeatReply, NewPartitions, StaticConfig, TopicElections, TopicRef,
};
use crate::error::ControllerError;
use crate::image::{MetadataImage, TopicId};
use crate::mutation_quota::{
    ControllerMutationQuotaManager, MutatingClient, MutationQuotaConfig, PartitionMutationQuota,
};
use crate::observer::{self, FetchMetadataRequest, FetchMetadataResponse, RecentBatches};
use crate::placement::{ReplicaPlacer, StripedReplicaPlacer};
use crate::quorum_state::{self, QuorumDescription, ReplicaContacts};
use crate::raft::log_store::MetadataLogStore;
use crate::raft::network::{QuorumNetworkFactory, MAX_APPEND_ENTRIES_BYTES};
use crate::raft::pre_vote::{self, LeaderContact, PreVoter};
use crate::raft::state_machine::MetadataStateMachine;
use crate::raft::{MetadataBatch, MetadataTypeConfig};
use crate::transport::{
    PeerClient, QuorumRequest, QuorumRequestHandler, QuorumResponse, QuorumTransport, Route,
    ServeGuard, TransportError,
};
use crate::voters::QuorumVoter;

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
    /// How long [`QuorumController::start`] waits for a leader and replay.
    /// Default: 10 s.
    pub startup_timeout: Duration,
    /// How long a command waits for an active controller to be known (and
    /// retries a forward that could not be sent) before failing with
    /// [`ControllerError::NotController`]. Default: 5 s.
    pub leader_wait: Duration,
    /// How long a command forwarded to the active controller may take,
    /// including this voter catching up to its result; also how long the
    /// active controller waits for a majority to commit a batch before
    /// answering [`ControllerError::Timeout`]. Default: 10 s.
    pub forward_timeout: Duration,
    /// `broker.session.timeout.ms`: the active controller fences a broker
    /// whose last heartbeat is older than this (a new active controller
    /// starts every session at its takeover). Sessions expire only with
    /// several voters: a single voter's one broker is this process.
    /// Default: 9000 ms (Kafka's).
    pub broker_session_timeout: Duration,
    /// `leader.imbalance.check.interval.seconds` when
    /// `auto.leader.rebalance.enable` is true, else `None`: how often the
    /// active controller moves leadership back to preferred replicas (see
    /// [`control::balance_partition_leaders`]). Default: 300 s (Kafka's).
    pub leader_imbalance_check_interval: Option<Duration>,
    /// This node's static configuration that controller decisions fall
    /// back on (`min.insync.replicas`). Default: Kafka's defaults.
    pub static_config: StaticConfig,
    /// Records a new cluster starts with (Kafka's `bootstrap.checkpoint`,
    /// written by `kafka-storage format --add-scram`): committed with the
    /// first broker registration of a metadata log that holds nothing yet,
    /// never again. Default: none.
    pub bootstrap_records: Vec<crate::records::MetadataRecord>,
    /// `controller.quota.window.num` and
    /// `controller.quota.window.size.seconds`: the burst of the controller
    /// mutation quotas (KIP-599). Default: Kafka's, 11 samples of 1 s.
    pub mutation_quota: MutationQuotaConfig,
    /// The most bytes (as the quorum transport encodes them) of one batch
    /// of the controller's own records (fencing, heartbeats, ISR and
    /// leader changes); more are written in several batches in order.
    /// Default and upper bound: what one AppendEntries frame carries,
    /// about 16 MiB. Tests lower it to split small batches.
    pub max_batch_bytes: usize,
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
            leader_wait: Duration::from_secs(5),
            forward_timeout: Duration::from_secs(10),
            broker_session_timeout: Duration::from_millis(9000),
            leader_imbalance_check_interval: Some(Duration::from_secs(300)),
            static_config: StaticConfig::default(),
            bootstrap_records: Vec::new(),
            mutation_quota: MutationQuotaConfig::default(),
            max_batch_bytes: MAX_BATCH_BYTES,
        }
    }
}

/// One voter's view of the metadata quorum's raft state, as returned by
/// [`QuorumController::raft_status`]. Names no openraft type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaftStatus {
    /// The raft term this voter is in (KRaft's leader epoch of the metadata
    /// log); never decreases on one voter, across restarts too (the vote is
    /// persisted).
    pub term: u64,
    /// The leader this voter knows for `term`, if any.
    pub leader: Option<i32>,
    /// True while this voter is the leader of `term` (the active controller).
    pub is_leader: bool,
    /// Raft log index of the last entry applied to this voter's image, if
    /// any.
    pub last_applied_offset: Option<u64>,
}

/// A controller command as it travels to the active controller.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum ControllerCommand {
    RegisterBroker(BrokerRegistrationRequest),
    CreateTopics {
        topics: Vec<CreatableTopic>,
        validate_only: bool,
        /// Whose controller mutation quota it counts against (KIP-599);
        /// `None`: none (the broker's own creations).
        #[serde(default)]
        client: Option<MutatingClient>,
    },
    DeleteTopics {
        topics: Vec<TopicRef>,
        /// See `CreateTopics`.
        #[serde(default)]
        client: Option<MutatingClient>,
    },
    AllocateProducerIds {
        broker_id: i32,
        broker_epoch: i64,
    },
    AlterTopicConfigs {
        topic: String,
        configs: Vec<(String, Option<String>)>,
    },
    CreatePartitions {
        topics: Vec<NewPartitions>,
        validate_only: bool,
        /// See `CreateTopics`.
        #[serde(default)]
        client: Option<MutatingClient>,
    },
    ReplaceTopicConfigs {
        topic: String,
        configs: BTreeMap<String, String>,
    },
    BrokerHeartbeat(BrokerHeartbeat),
    /// No change: the active controller confirms its leadership and answers
    /// with the offset a linearizable read must have applied.
    ReadOffset,
    /// No change: the active controller describes the quorum.
    DescribeQuorum,
    ElectLeaders {
        election: ElectionType,
        partitions: Option<Vec<(String, Vec<i32>)>>,
    },
    AlterPartition(AlterPartitionRequest),
    AlterScramCredentials {
        deletions: Vec<control::ScramDeletion>,
        upsertions: Vec<control::ScramUpsertion>,
    },
    CreateAcls(Vec<crate::acl::StandardAcl>),
    AlterClientQuotas(Vec<control::QuotaAlteration>),
    DeleteAcls(Vec<crate::acl::AclBindingFilter>),
}

/// The active controller's answer to a [`ControllerCommand`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum CommandResponse {
    BrokerEpoch(i64),
    CreatedTopics(Vec<Result<CreatedTopic, ControllerError>>),
    DeletedTopics(Vec<Result<(String, TopicId), ControllerError>>),
    ProducerIds(Range<i64>),
    Done,
    CreatedPartitions(Vec<Result<(), ControllerError>>),
    Quorum(QuorumDescription),
    Heartbeat(HeartbeatReply),
    Elections(Vec<TopicElections>),
    AlteredPartitions(AlterPartitionResponse),
    AlteredScramCredentials(Vec<control::ScramAlterResult>),
    CreatedAcls(Vec<Result<(), ControllerError>>),
    AlteredClientQuotas(Vec<control::QuotaAlterResult>),
    DeletedAcls(Vec<control::AclDeleteResult>),
}

/// A command's response plus the metadata log offset the caller's image
/// must have applied to see its effect, and the throttle time its
/// controller mutation quota gave (KIP-599; zero for other commands).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CommandOutcome {
    pub(crate) response: CommandResponse,
    pub(crate) offset: u64,
    /// Milliseconds, as of the answer (Kafka's
    /// `AbstractControllerMutationQuota.throttleTime`).
    #[serde(default)]
    pub(crate) throttle_time_ms: u64,
}

struct Inner {
    node_id: i32,
    raft_id: u64,
    /// This node's cluster id: routes its quorum requests (see
    /// [`Route`](crate::transport::Route)).
    cluster_id: String,
    raft: Raft<MetadataTypeConfig>,
    images: watch::Sender<Arc<MetadataImage>>,
    /// Serializes commands (Kafka's controller event queue).
    commands: tokio::sync::Mutex<()>,
    placer: Box<dyn ReplicaPlacer>,
    options: QuorumOptions,
    transport: QuorumTransport,
    /// Clients to the active controller, by voter id.
    forward_clients: tokio::sync::Mutex<BTreeMap<u64, PeerClient>>,
    leader_watcher: Mutex<Option<JoinHandle<()>>>,
    /// Several voters only: the task that starts elections, a follower's
    /// ([`pre_vote::run_follower_elections`]) and a candidate's next
    /// ([`break_split_votes`]).
    elections: Mutex<Option<JoinHandle<()>>>,
    /// Several voters only: asks for and answers pre-votes.
    pre_voter: Option<Arc<PreVoter>>,
    server: Mutex<Option<ServeGuard>>,
    /// When each follower last answered and last held the whole log.
    contacts: Arc<ReplicaContacts>,
    /// Several voters: brokers register fenced and their sessions expire.
    multi_voter: bool,
    /// Broker session clocks of the active controller (never in the log).
    sessions: Mutex<BrokerSessions>,
    session_expirer: Mutex<Option<JoinHandle<()>>>,
    /// This node's own `controller.quorum.voters` addresses by voter id.
    voter_addresses: Arc<BTreeMap<u64, String>>,
    /// The automatic preferred-leader rebalance task, when enabled.
    leader_balancer: Mutex<Option<JoinHandle<()>>>,
    /// Entries applied last, served to observers (broker-only nodes).
    recent: Arc<RecentBatches>,
    /// The active controller's controller mutation quota buckets (never
    /// in the log; a std mutex taken only under the command lock).
    mutation_quotas: Mutex<ControllerMutationQuotaManager>,
}

/// The active controller's in-memory broker session clocks (Kafka's
/// `BrokerHeartbeatManager`).
#[derive(Debug, Default)]
struct BrokerSessions {
    /// When this node became the active controller, and in which raft term;
    /// `None` while it is not. Every session is at least as fresh as this.
    active_since: Option<(u64, Instant)>,
    /// Last heartbeat (or registration) seen per broker id.
    last_contact: BTreeMap<i32, Instant>,
    /// The metadata offset each broker last reported, with the raft term
    /// in which this node heard it (an earlier term's report is stale).
    metadata_offsets: BTreeMap<i32, (u64, u64)>,
    /// The metadata offset at which each broker entered controlled
    /// shutdown, with the raft term in which this node committed it.
    controlled_shutdown_offsets: BTreeMap<i32, (u64, u64)>,
}

impl BrokerSessions {
    /// Notes that this node is the active controller in raft `term` at
    /// `now`; a new term is a takeover, which restarts every session.
    fn active_in(&mut self, term: u64, now: Instant) {
        if self.active_since.is_none_or(|(t, _)| t != term) {
            self.active_since = Some((term, now));
        }
    }

    /// What `broker_id`'s heartbeat depends on in raft `term` (Kafka's
    /// `BrokerHeartbeatManager`): the offset at which it entered
    /// controlled shutdown, if committed in this term, and the lowest
    /// offset the active brokers of `image` reported in this term (0 for
    /// one not heard from yet, so a new active controller waits for each).
    fn progress(&self, image: &MetadataImage, broker_id: i32, term: u64) -> HeartbeatProgress {
        let in_term = |entry: Option<&(u64, u64)>| {
            entry.filter(|(t, _)| *t == term).map(|&(_, offset)| offset)
        };
        HeartbeatProgress {
            controlled_shutdown_offset: in_term(self.controlled_shutdown_offsets.get(&broker_id)),
            lowest_active_offset: image
                .brokers
                .values()
                .filter(|b| b.is_active())
                .map(|b| in_term(self.metadata_offsets.get(&b.broker_id)).unwrap_or(0))
                .min()
                .unwrap_or(u64::MAX),
        }
    }

    /// Unfenced brokers of `image` whose session is older than `timeout` at
    /// `now` (none before [`BrokerSessions::active_in`]).
    fn expired(&self, image: &MetadataImage, now: Instant, timeout: Duration) -> Vec<i32> {
        let Some((_, since)) = self.active_since else {
            return Vec::new();
        };
        image
            .brokers
            .values()
            .filter(|b| !b.fenced)
            .filter(|b| {
                let last = self
                    .last_contact
                    .get(&b.broker_id)
                    .copied()
                    .filter(|&t| t >= since)
                    .unwrap_or(since);
                now.saturating_duration_since(last) > timeout
            })
            .map(|b| b.broker_id)
            .collect()
    }
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

/// The most bytes one metadata batch of a user's operation (CreateTopics,
/// CreatePartitions, DeleteTopics, the config, ACL, quota, SCRAM and
/// ElectLeaders requests) may take, as the quorum transport encodes it:
/// Kafka's `KafkaRaftClient.MAX_BATCH_SIZE_BYTES` (8 MiB). A larger
/// operation fails whole with [`ControllerError::RecordBatchTooLarge`] and
/// writes nothing (Kafka's `BatchAccumulator` throws
/// `RecordBatchTooLargeException`). Weir encodes records as JSON, about
/// twice Kafka's binary size, so this holds fewer records than Kafka's.
pub const MAX_USER_BATCH_BYTES: usize = 8 * 1024 * 1024;

/// The most bytes any metadata batch may take, the controller's own
/// (fencing, ISR changes) too: a larger one does not fit an AppendEntries
/// frame ([`MAX_APPEND_ENTRIES_BYTES`] with room for the entry's log id),
/// so no follower could ever take it: appended, it would stop replication
/// until another leader, elected without it, truncated it.
pub(crate) const MAX_BATCH_BYTES: usize = MAX_APPEND_ENTRIES_BYTES - 4096;

/// How a command's records are written: Kafka's `ControllerResult.atomicOf`
/// and `ControllerResult.of`, as `QuorumController.appendRecords` writes
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Batching {
    /// All in one batch of at most `max_bytes`, or none: a user's
    /// operation ([`MAX_USER_BATCH_BYTES`]) and a broker registration
    /// (Kafka's `registerBroker` is atomic too; [`MAX_BATCH_BYTES`]).
    Atomic { max_bytes: usize },
    /// In order, in as many batches of at most
    /// [`QuorumOptions::max_batch_bytes`] as it takes (one when they fit),
    /// all in one term: the controller's own commands (fencing, heartbeats,
    /// ISR and leader changes), which Kafka writes non-atomically in
    /// batches of 10,000 records. A failover between two batches leaves
    /// the rest unwritten; `control::fence_brokers` and the controlled
    /// shutdown of `control::broker_heartbeat` write their state record
    /// last, so the next controller finds the work still to do and redoes
    /// it (an unfence writes its record first, as Kafka's: partitions whose
    /// election was in a lost batch wait for the next unfence or election).
    Split,
}

/// `records` cut, in order, into batches that each encode to at most
/// `max_bytes` as the transport sends them (a [`MetadataBatch`]); one
/// batch when they all fit.
///
/// # Errors
/// [`ControllerError::RecordBatchTooLarge`] when one record alone is over.
fn split_batches(
    records: Vec<crate::records::MetadataRecord>,
    max_bytes: usize,
) -> Result<Vec<Vec<crate::records::MetadataRecord>>, ControllerError> {
    let empty = observer::json_len(&MetadataBatch { records: vec![] });
    let mut batches = vec![Vec::new()];
    let mut bytes = empty;
    for record in records {
        let size = observer::json_len(&record);
        let last = batches.last_mut().expect("never empty");
        // A comma before every record but a batch's first.
        let added = size.saturating_add(usize::from(!last.is_empty()));
        if bytes.saturating_add(added) <= max_bytes {
            bytes += added;
            last.push(record);
        } else if empty.saturating_add(size) <= max_bytes {
            bytes = empty + size;
            batches.push(vec![record]);
        } else {
            return Err(batch_too_large(empty.saturating_add(size), max_bytes));
        }
    }
    Ok(batches)
}

/// The error of a batch of `bytes` over `max` bytes.
fn batch_too_large(bytes: usize, max: usize) -> ControllerError {
    // Kafka's message (`BatchAccumulator.maybeAllocateBatch`).
    ControllerError::RecordBatchTooLarge {
        reason: format!(
            "The total record(s) size of {bytes} exceeds the maximum allowed batch size of {max}"
        ),
    }
}

/// The error of a command of `bytes` bytes that the quorum transport cannot
/// carry to the active controller (see [`TransportError::TooLarge`]).
pub(crate) fn forward_too_large(bytes: usize) -> ControllerError {
    ControllerError::RecordBatchTooLarge {
        reason: format!(
            "the command encodes to {bytes} bytes, more than the {} the metadata quorum \
             transport carries to the active controller",
            crate::transport::MAX_FRAME_BYTES
        ),
    }
}

/// The error for a forwarded command whose connection broke before the
/// answer came: the command may have run, so it is not sent twice, and its
/// outcome is unknown, which Kafka answers with the retriable
/// REQUEST_TIMED_OUT (the active controller died mid-request), not
/// UNKNOWN_SERVER_ERROR. `target` names the controller asked.
pub(crate) fn forward_connection_lost(
    target: &str,
    reason: &str,
    waited: Duration,
) -> ControllerError {
    ControllerError::Timeout {
        operation: format!(
            "{target} to answer a forwarded command (connection lost: {reason}; it may or may \
             not have run)"
        ),
        waited_ms: waited.as_millis() as u64,
    }
}

/// How often a voter waiting at startup for a quorum leader logs that it
/// is still waiting.
const STARTUP_PROGRESS_LOG_INTERVAL: Duration = Duration::from_secs(10);

impl ControllerCommand {
    /// True for commands that change nothing, which may be sent again when
    /// their answer was lost.
    pub(crate) fn is_read_only(&self) -> bool {
        matches!(
            self,
            ControllerCommand::ReadOffset | ControllerCommand::DescribeQuorum
        )
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
        Self::start_with(
            config,
            QuorumOptions::default(),
            Vec::new(),
            QuorumTransport::single_voter(),
        )
        .await
    }

    /// [`QuorumController::start`] with explicit quorum tuning and voter set
    /// (`controller.quorum.voters`).
    ///
    /// With no voters or only this node, the quorum is a single voter in
    /// this process, as [`QuorumController::start`]: it waits until this
    /// node is leader with its log applied. With several voters, `transport`
    /// carries raft and forwarded commands between them; the lowest voter
    /// id initializes the quorum with the full voter set when its store is
    /// pristine (the others wait to be contacted), and startup waits until
    /// *a* leader is known and this node has applied the leader's committed
    /// log.
    ///
    /// # Errors
    ///
    /// - [`ControllerError::InvalidNodeId`] for a negative `node_id`, or one
    ///   that is not among several `voters`.
    /// - [`ControllerError::Storage`] when the metadata directory, log, vote
    ///   or snapshot cannot be opened or is corrupt beyond a torn tail.
    /// - [`ControllerError::Raft`] when openraft rejects the config or fails,
    ///   or several voters come with [`QuorumTransport::single_voter`].
    /// - [`ControllerError::Timeout`] when no leader is known with the log
    ///   applied within `options.startup_timeout`.
    pub async fn start_with(
        config: ControllerConfig,
        options: QuorumOptions,
        voters: Vec<QuorumVoter>,
        transport: QuorumTransport,
    ) -> Result<QuorumController, ControllerError> {
        let raft_node_id =
            u64::try_from(config.node_id).map_err(|_| ControllerError::InvalidNodeId {
                node_id: config.node_id,
            })?;
        let multi_voter = voters.iter().any(|v| v.id != config.node_id);
        if multi_voter {
            if !voters.iter().any(|v| v.id == config.node_id) {
                return Err(ControllerError::InvalidNodeId {
                    node_id: config.node_id,
                });
            }
            if transport.is_single_voter() {
                return Err(raft_err(format!(
                    "{} voters need a transport between them",
                    voters.len()
                )));
            }
        }
        let dir = config.metadata_dir.clone();
        let cluster_id = config.cluster_id.clone();
        let (log_store, state_machine) = crate::determinism::blocking(move || {
            let log = MetadataLogStore::open(&dir)?;
            let sm = MetadataStateMachine::open(&dir, &cluster_id)?;
            Ok((log, sm))
        })
        .await
        .map_err(|e| ControllerError::Storage {
            reason: format!("{}: {e}", config.metadata_dir.display()),
        })?;
        let pristine = log_store.is_pristine() && state_machine.is_pristine();
        let committed_vote = log_store.has_committed_vote();
        let images = state_machine.publisher();
        // Observers get records for as long as the log would keep them.
        let recent = Arc::new(RecentBatches::new(
            (options.snapshot_interval_entries + options.log_entries_kept_after_snapshot)
                .min(observer::MAX_RECENT_BATCHES as u64) as usize,
        ));
        let mut state_machine = state_machine;
        state_machine.keep_recent(recent.clone());

        let raft_config = openraft::Config {
            cluster_name: config.cluster_id.clone(),
            heartbeat_interval: options.heartbeat_interval_ms,
            election_timeout_min: options.election_timeout_min_ms,
            election_timeout_max: options.election_timeout_max_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(options.snapshot_interval_entries),
            max_in_snapshot_log_to_keep: options.log_entries_kept_after_snapshot,
            // Several voters: elections start after a Pre-Vote
            // (`raft::pre_vote`), not on openraft's own timer.
            enable_elect: !multi_voter,
            ..openraft::Config::default()
        }
        .validate()
        .map_err(raft_err)?;
        let voter_addresses: Arc<BTreeMap<u64, String>> = Arc::new(
            voters
                .iter()
                .filter(|_| multi_voter)
                .map(|v| (v.id as u64, v.address()))
                .collect(),
        );
        let network = QuorumNetworkFactory::new(
            &config.cluster_id,
            raft_node_id,
            transport.clone(),
            voter_addresses.clone(),
        );
        let contacts = network.contacts();
        let split_terms = network.split_terms();
        let raft = Raft::new(
            raft_node_id,
            Arc::new(raft_config),
            network,
            log_store,
            state_machine,
        )
        .await
        .map_err(raft_err)?;
        let pre_voter = multi_voter.then(|| {
            Arc::new(PreVoter::new(
                raft.clone(),
                raft_node_id,
                &config.cluster_id,
                transport.clone(),
                voter_addresses.clone(),
                options.election_timeout_min_ms..options.election_timeout_max_ms,
                committed_vote,
            ))
        });

        let controller = QuorumController {
            inner: Arc::new(Inner {
                node_id: config.node_id,
                raft_id: raft_node_id,
                cluster_id: config.cluster_id.clone(),
                raft: raft.clone(),
                images: images.clone(),
                commands: tokio::sync::Mutex::new(()),
                placer: Box::new(StripedReplicaPlacer::default()),
                options: options.clone(),
                transport: transport.clone(),
                forward_clients: tokio::sync::Mutex::new(BTreeMap::new()),
                leader_watcher: Mutex::new(None),
                elections: Mutex::new(pre_voter.clone().map(|pre_voter| {
                    let timeouts = options.election_timeout_min_ms..options.election_timeout_max_ms;
                    let candidates = break_split_votes(
                        raft.clone(),
                        options.clone(),
                        split_terms,
                        pre_voter.clone(),
                    );
                    let followers = pre_vote::run_follower_elections(pre_voter, timeouts);
                    tokio::spawn(async move {
                        tokio::join!(candidates, followers);
                    })
                })),
                pre_voter,
                server: Mutex::new(None),
                contacts: contacts.clone(),
                multi_voter,
                sessions: Mutex::new(BrokerSessions::default()),
                session_expirer: Mutex::new(None),
                leader_balancer: Mutex::new(None),
                voter_addresses: voter_addresses.clone(),
                recent,
                mutation_quotas: Mutex::new(ControllerMutationQuotaManager::new(
                    options.mutation_quota,
                )),
            }),
        };
        tokio::spawn(quorum_state::watch_caught_up(raft.metrics(), contacts));
        let handler: Weak<dyn QuorumRequestHandler> = {
            let strong: Arc<dyn QuorumRequestHandler> = controller.inner.clone();
            Arc::downgrade(&strong)
        };
        *controller
            .inner
            .server
            .lock()
            .unwrap_or_else(|p| p.into_inner()) =
            Some(transport.serve(&config.cluster_id, raft_node_id, handler));

        // With several voters only the lowest voter id initializes; the others
        // start empty and join when it wins their votes. When every pristine
        // voter initialized, a vote request from one that had already
        // campaigned could reach another before its own `initialize`, which
        // then failed; with openraft's (term, node) leader ids two leaders of
        // term 1 could follow and a voter waited out its startup timeout
        // (seen in CI as a 3-node start that never finished).
        let initializer = voters.iter().map(|v| v.id).min();
        if pristine && multi_voter && initializer != Some(config.node_id) {
            tracing::info!(
                node_id = config.node_id,
                initializer = ?initializer,
                "new metadata quorum: waiting for the lowest voter id to initialize it"
            );
        } else if pristine {
            let members: BTreeMap<u64, BasicNode> = if multi_voter {
                voters
                    .iter()
                    .map(|v| (v.id as u64, BasicNode::new(v.address())))
                    .collect()
            } else {
                BTreeMap::from([(raft_node_id, BasicNode::default())])
            };
            tracing::info!(
                node_id = config.node_id,
                cluster_id = %config.cluster_id,
                voters = ?members.keys().collect::<Vec<_>>(),
                "initializing a new metadata quorum"
            );
            match raft.initialize(members).await {
                Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(e) => {
                    let _ = controller.shutdown().await;
                    return Err(raft_err(e));
                }
            }
        }

        let waited = if multi_voter {
            controller
                .catch_up_with_leader(options.startup_timeout)
                .await
        } else {
            raft.wait(Some(options.startup_timeout))
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
                .await
                .map(|_| ())
                .map_err(|e| match e {
                    openraft::metrics::WaitError::Timeout(..) => ControllerError::Timeout {
                        operation: "metadata quorum leadership and log replay".into(),
                        waited_ms: options.startup_timeout.as_millis() as u64,
                    },
                    other => raft_err(other),
                })
        };
        if let Err(e) = waited {
            let _ = controller.shutdown().await;
            return Err(e);
        }
        let leader = raft
            .metrics()
            .borrow()
            .current_leader
            .and_then(|l| i32::try_from(l).ok());
        images.send_if_modified(|image| set_controller_id(image, leader));
        *controller
            .inner
            .leader_watcher
            .lock()
            .unwrap_or_else(|p| p.into_inner()) =
            Some(tokio::spawn(watch_leader(raft.metrics(), images.clone())));
        if multi_voter {
            *controller
                .inner
                .session_expirer
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = Some(tokio::spawn(expire_sessions(
                Arc::downgrade(&controller.inner),
            )));
        }
        if let Some(interval) = options.leader_imbalance_check_interval {
            *controller
                .inner
                .leader_balancer
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = Some(tokio::spawn(balance_leaders(
                Arc::downgrade(&controller.inner),
                interval,
            )));
        }
        tracing::info!(
            node_id = config.node_id,
            leader = ?leader,
            offset = images.borrow().last_applied_offset,
            "metadata quorum is active"
        );
        Ok(controller)
    }

    /// Waits until a leader is known and this voter has applied everything
    /// the leader had committed when asked.
    async fn catch_up_with_leader(&self, timeout: Duration) -> Result<(), ControllerError> {
        let started = Instant::now();
        let deadline = started + timeout;
        loop {
            // Ask in slices so a node waiting for the other voters (started
            // one by one, as Kafka allows) says so in its log.
            let slice_end = deadline.min(Instant::now() + STARTUP_PROGRESS_LOG_INTERVAL);
            match self
                .execute_until(ControllerCommand::ReadOffset, slice_end)
                .await
            {
                Ok(_) => return Ok(()),
                Err(ControllerError::NotController { leader }) if slice_end < deadline => {
                    tracing::warn!(
                        node_id = self.inner.node_id,
                        waited_s = started.elapsed().as_secs(),
                        leader = ?leader,
                        voters = ?self.inner.voter_addresses,
                        "no metadata quorum leader yet; waiting for the other voters"
                    );
                }
                Err(ControllerError::NotController { .. }) => {
                    return Err(ControllerError::Timeout {
                        operation: "a metadata quorum leader and log replay".into(),
                        waited_ms: timeout.as_millis() as u64,
                    })
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// True while this node is the active controller (the raft leader of
    /// the metadata quorum), as Kafka's `QuorumController.isActive`.
    pub fn is_active(&self) -> bool {
        let metrics = self.inner.raft.metrics();
        let m = metrics.borrow();
        m.running_state.is_ok() && m.state == ServerState::Leader
    }

    /// This voter's current view of the raft quorum (term, leader, applied
    /// offset), for tests and the simulation's invariants. A stopped voter
    /// reports no leader and `is_leader` false.
    pub fn raft_status(&self) -> RaftStatus {
        let metrics = self.inner.raft.metrics();
        let m = metrics.borrow();
        let running = m.running_state.is_ok();
        RaftStatus {
            term: m.current_term,
            leader: m
                .current_leader
                .filter(|_| running)
                .and_then(|l| i32::try_from(l).ok()),
            is_leader: running && m.state == ServerState::Leader,
            last_applied_offset: m.last_applied.map(|l| l.index),
        }
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

    /// Stops the quorum and stops serving other voters. Commands after this
    /// fail with [`ControllerError::Raft`]. Calling it twice is harmless.
    ///
    /// # Errors
    ///
    /// [`ControllerError::Raft`] when the raft task ended abnormally.
    pub async fn shutdown(&self) -> Result<(), ControllerError> {
        let server = self
            .inner
            .server
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let Some(mut server) = server else {
            return Ok(());
        };
        server.stop();
        let watcher = self
            .inner
            .leader_watcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(watcher) = watcher {
            watcher.abort();
        }
        let breaker = self
            .inner
            .elections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(breaker) = breaker {
            breaker.abort();
        }
        let expirer = self
            .inner
            .session_expirer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(expirer) = expirer {
            expirer.abort();
        }
        let balancer = self
            .inner
            .leader_balancer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(balancer) = balancer {
            balancer.abort();
        }
        self.inner.raft.shutdown().await.map_err(raft_err)?;
        self.inner
            .images
            .send_if_modified(|image| set_controller_id(image, None));
        Ok(())
    }

    /// Runs `command` on the active controller within
    /// `options.leader_wait` of not knowing one (see
    /// [`MetadataController`](crate::MetadataController), which carries the
    /// typed commands over this).
    pub(crate) async fn execute(
        &self,
        command: ControllerCommand,
    ) -> Result<CommandOutcome, ControllerError> {
        let deadline = Instant::now() + self.inner.options.leader_wait;
        self.execute_until(command, deadline).await
    }

    /// Runs `command` here when this node is the active controller, else
    /// forwards it to the active controller and waits until this node's
    /// image has applied the resulting offset. While no leader is known, or
    /// a forward could not be sent or met a former leader, it retries until
    /// `deadline`, then fails with [`ControllerError::NotController`].
    async fn execute_until(
        &self,
        command: ControllerCommand,
        deadline: Instant,
    ) -> Result<CommandOutcome, ControllerError> {
        let inner = &self.inner;
        let mut metrics = inner.raft.metrics();
        loop {
            let (leader, is_leader, leader_addr) = {
                let m = metrics.borrow_and_update();
                if let Err(fatal) = &m.running_state {
                    return Err(raft_err(fatal));
                }
                // This node's own voter addresses first (see
                // `QuorumNetworkFactory`), then the replicated membership's.
                let addr = m.current_leader.and_then(|l| {
                    inner.voter_addresses.get(&l).cloned().or_else(|| {
                        m.membership_config
                            .membership()
                            .get_node(&l)
                            .map(|n| n.addr.clone())
                    })
                });
                (m.current_leader, m.state == ServerState::Leader, addr)
            };
            let last_leader = leader.and_then(|l| i32::try_from(l).ok());
            match leader {
                Some(l) if l == inner.raft_id && is_leader => {
                    match inner.run_on_leader(command.clone()).await {
                        Err(ControllerError::NotController { .. }) if Instant::now() < deadline => {
                        }
                        other => return other,
                    }
                }
                Some(l) if l != inner.raft_id => {
                    let sent = Instant::now();
                    match self
                        .forward(l, leader_addr.as_deref().unwrap_or(""), &command)
                        .await
                    {
                        Ok(Ok(outcome)) => {
                            self.wait_applied(outcome.offset).await?;
                            return Ok(outcome);
                        }
                        Ok(Err(ControllerError::NotController { .. })) => {}
                        Ok(Err(e)) => return Err(e),
                        Err(
                            TransportError::Unreachable { reason, .. }
                            | TransportError::Refused { reason, .. },
                        ) => {
                            tracing::debug!(leader = l, %reason, "active controller unreachable; retrying");
                        }
                        Err(TransportError::TooLarge { bytes, .. }) => {
                            return Err(forward_too_large(bytes));
                        }
                        Err(TransportError::Network { reason, .. }) if command.is_read_only() => {
                            // Nothing to run twice: ask again (a starting
                            // voter's catch-up read whose answer was lost
                            // failed the start; simulation seed 73).
                            tracing::debug!(leader = l, %reason, "read-only command lost; retrying");
                        }
                        Err(TransportError::Network { reason, .. }) => {
                            return Err(forward_connection_lost(
                                &format!("the active controller {l}"),
                                &reason,
                                sent.elapsed(),
                            ));
                        }
                    }
                }
                _ => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ControllerError::NotController {
                    leader: last_leader,
                });
            }
            // Wake when the leader, term or role changes, and re-check at
            // least every 100 ms (a forward that failed changes no local
            // state). Other metrics changes (replication progress, the
            // failed leadership check itself) do not count: an isolated
            // leader's check fails at once and changes its metrics, and
            // waking on that spun without pause (found by the simulation,
            // where no simulated time passed any more).
            let wake = deadline.min(now + Duration::from_millis(100));
            let seen = (leader, is_leader, metrics.borrow().current_term);
            let _ = tokio::time::timeout_at(
                wake,
                metrics.wait_for(|m| {
                    (
                        m.current_leader,
                        m.state == ServerState::Leader,
                        m.current_term,
                    ) != seen
                        || m.running_state.is_err()
                }),
            )
            .await;
        }
    }

    /// Sends `command` to the active controller `leader` at `addr`.
    ///
    /// Gives up as soon as this voter learns that `leader` no longer leads
    /// (a new leader, or an election under way): a leader that stopped
    /// answering without closing its connections (paused, cut off) would
    /// otherwise hold the command for the whole `forward_timeout`, and a
    /// broker heartbeat held that long misses the new controller's session
    /// timeout (the new controller starts every session at its takeover,
    /// and fenced every live broker with it). Kafka's
    /// `NodeToControllerRequestThread` likewise disconnects from the old
    /// controller when KRaft names a new one. The connection is dropped
    /// (the call may have been cut in the middle of a frame); the caller
    /// sees a lost connection: a read-only command is asked again, any
    /// other may or may not have run.
    async fn forward(
        &self,
        leader: u64,
        addr: &str,
        command: &ControllerCommand,
    ) -> Result<Result<CommandOutcome, ControllerError>, TransportError> {
        let inner = &self.inner;
        let mut clients = inner.forward_clients.lock().await;
        let client = clients.entry(leader).or_insert_with(|| {
            let route = Route::new(&inner.cluster_id, inner.raft_id, leader);
            inner.transport.client(route, addr)
        });
        let mut metrics = inner.raft.metrics();
        let deposed =
            metrics.wait_for(|m| m.current_leader != Some(leader) || m.running_state.is_err());
        let answer = tokio::select! {
            answer = client.call(
                QuorumRequest::Command(command.clone()),
                inner.options.forward_timeout,
            ) => Some(answer),
            _ = deposed => None,
        };
        let Some(answer) = answer else {
            clients.remove(&leader);
            return Err(TransportError::Network {
                target: leader,
                reason: "the active controller changed while the command was in flight".to_owned(),
            });
        };
        let response = answer?;
        match response {
            QuorumResponse::Command(result) => Ok(result),
            other => Err(TransportError::Network {
                target: leader,
                reason: format!("response of the wrong kind: {other:?}"),
            }),
        }
    }

    /// Waits until this node's image has applied `offset`.
    async fn wait_applied(&self, offset: u64) -> Result<(), ControllerError> {
        let timeout = self.inner.options.forward_timeout;
        let mut images = self.inner.images.subscribe();
        let applied = async {
            images
                .wait_for(|image| image.last_applied_offset >= offset)
                .await
                .map(|_| ())
        };
        match tokio::time::timeout(timeout, applied).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(raft_err(e)),
            Err(_) => Err(ControllerError::Timeout {
                operation: format!("the metadata log to be applied up to offset {offset}"),
                waited_ms: timeout.as_millis() as u64,
            }),
        }
    }
}

impl Inner {
    /// Records in this voter's Pre-Vote contact book ([`pre_vote`]) that it
    /// heard from a leader or granted a vote; nothing with a single voter.
    fn record_contact(&self, record: fn(&LeaderContact)) {
        if let Some(pre_voter) = &self.pre_voter {
            record(&pre_voter.contact);
        }
    }

    /// Answers a broker-only node's pull (see [`crate::observer`]) from this
    /// voter's applied image, with the active controller's id and address;
    /// the active controller remembers the observer's progress for
    /// DescribeQuorum.
    async fn serve_fetch_metadata(&self, request: FetchMetadataRequest) -> FetchMetadataResponse {
        let mut response =
            observer::fetch_newer(self.images.subscribe(), &self.recent, &request).await;
        let m = self.raft.metrics().borrow().clone();
        if m.state == ServerState::Leader {
            let caught_up = request.after_offset >= m.last_applied.map_or(0, |l| l.index);
            self.contacts.observer_fetched(
                request.observer_id,
                request.after_offset,
                caught_up,
                quorum_state::now_ms(),
            );
        }
        response.leader = m.current_leader.and_then(|l| {
            self.voter_addresses
                .get(&l)
                .cloned()
                .or_else(|| {
                    m.membership_config
                        .membership()
                        .get_node(&l)
                        .map(|n| n.addr.clone())
                })
                .map(|addr| (l, addr))
        });
        response
    }

    /// Runs `command` on this node, which must be the active controller.
    async fn run_on_leader(
        &self,
        command: ControllerCommand,
    ) -> Result<CommandOutcome, ControllerError> {
        let outcome = |(response, offset)| CommandOutcome {
            response,
            offset,
            throttle_time_ms: 0,
        };
        let placer = self.placer.as_ref();
        match command {
            ControllerCommand::RegisterBroker(request) => self
                .run_batched(
                    Batching::Atomic {
                        max_bytes: MAX_BATCH_BYTES,
                    },
                    |image| {
                        self.touch_session(request.broker_id);
                        let new_cluster = control::is_new_cluster(image);
                        let mut r = control::register_broker(
                            image,
                            &self.options.static_config,
                            request,
                            self.multi_voter,
                        );
                        if new_cluster {
                            r.records
                                .extend(self.options.bootstrap_records.iter().cloned());
                        }
                        Ok(r.map(CommandResponse::BrokerEpoch))
                    },
                )
                .await
                .map(outcome),
            ControllerCommand::BrokerHeartbeat(heartbeat) => {
                let term = self.raft.metrics().borrow().current_term;
                let (reply, offset) = self
                    .run(|image| {
                        let progress = self.sessions().progress(image, heartbeat.broker_id, term);
                        let r = control::broker_heartbeat(
                            image,
                            &self.options.static_config,
                            &heartbeat,
                            &progress,
                        )?;
                        self.touch_session(heartbeat.broker_id);
                        self.sessions()
                            .metadata_offsets
                            .insert(heartbeat.broker_id, (term, heartbeat.metadata_offset));
                        Ok(r)
                    })
                    .await?;
                if reply.in_controlled_shutdown {
                    // Kafka's `maybeUpdateControlledShutdownOffset`: the
                    // offset of the batch that entered controlled shutdown.
                    self.sessions()
                        .controlled_shutdown_offsets
                        .entry(heartbeat.broker_id)
                        .and_modify(|e| {
                            if e.0 != term {
                                *e = (term, offset);
                            }
                        })
                        .or_insert((term, offset));
                }
                Ok(outcome((CommandResponse::Heartbeat(reply), offset)))
            }
            ControllerCommand::CreateTopics {
                topics,
                validate_only,
                client,
            } => {
                self.run_mutation(client.as_ref(), |image, quota| {
                    control::create_topics_under_quota(image, &topics, validate_only, placer, quota)
                        .map(CommandResponse::CreatedTopics)
                })
                .await
            }
            ControllerCommand::DeleteTopics { topics, client } => {
                self.run_mutation(client.as_ref(), |image, quota| {
                    control::delete_topics_under_quota(image, &topics, quota)
                        .map(CommandResponse::DeletedTopics)
                })
                .await
            }
            ControllerCommand::AllocateProducerIds {
                broker_id,
                broker_epoch,
            } => self
                .run(|image| {
                    control::allocate_producer_ids(image, broker_id, broker_epoch)
                        .map(|r| r.map(CommandResponse::ProducerIds))
                })
                .await
                .map(outcome),
            ControllerCommand::AlterTopicConfigs { topic, configs } => self
                .run_user(|image| {
                    control::alter_topic_configs(image, &topic, configs)
                        .map(|r| r.map(|()| CommandResponse::Done))
                })
                .await
                .map(outcome),
            ControllerCommand::CreatePartitions {
                topics,
                validate_only,
                client,
            } => {
                self.run_mutation(client.as_ref(), |image, quota| {
                    control::create_partitions_under_quota(
                        image,
                        &topics,
                        validate_only,
                        placer,
                        quota,
                    )
                    .map(CommandResponse::CreatedPartitions)
                })
                .await
            }
            ControllerCommand::AlterScramCredentials {
                deletions,
                upsertions,
            } => self
                .run_user(|image| {
                    let r = control::alter_scram_credentials(image, &deletions, &upsertions);
                    Ok(r.map(CommandResponse::AlteredScramCredentials))
                })
                .await
                .map(outcome),
            ControllerCommand::AlterClientQuotas(alterations) => self
                .run_user(|image| {
                    let r = control::alter_client_quotas(image, &alterations);
                    Ok(r.map(CommandResponse::AlteredClientQuotas))
                })
                .await
                .map(outcome),
            ControllerCommand::CreateAcls(acls) => self
                .run_user(|image| {
                    let r = control::create_acls(image, &acls)?;
                    Ok(r.map(CommandResponse::CreatedAcls))
                })
                .await
                .map(outcome),
            ControllerCommand::DeleteAcls(filters) => self
                .run_user(|image| {
                    let r = control::delete_acls(image, &filters)?;
                    Ok(r.map(CommandResponse::DeletedAcls))
                })
                .await
                .map(outcome),
            ControllerCommand::ReplaceTopicConfigs { topic, configs } => self
                .run_user(|image| {
                    control::replace_topic_configs(image, &topic, &configs)
                        .map(|r| r.map(|()| CommandResponse::Done))
                })
                .await
                .map(outcome),
            ControllerCommand::ElectLeaders {
                election,
                partitions,
            } => self
                .run_user(|image| {
                    let r = control::elect_leaders_on_request(
                        image,
                        &self.options.static_config,
                        election,
                        partitions.as_deref(),
                    );
                    Ok(r.map(CommandResponse::Elections))
                })
                .await
                .map(outcome),
            ControllerCommand::AlterPartition(request) => {
                let (response, offset) = self
                    .run(|image| {
                        Ok(control::alter_partition(
                            image,
                            &self.options.static_config,
                            &request,
                        ))
                    })
                    .await?;
                Ok(CommandOutcome {
                    response: CommandResponse::AlteredPartitions(response?),
                    offset,
                    throttle_time_ms: 0,
                })
            }
            ControllerCommand::DescribeQuorum => {
                self.ensure_active()?;
                let metrics = self.raft.metrics().borrow().clone();
                let description =
                    quorum_state::describe(&metrics, &self.contacts, quorum_state::now_ms())
                        .ok_or(ControllerError::NotController {
                            leader: metrics.current_leader.and_then(|l| i32::try_from(l).ok()),
                        })?;
                Ok(CommandOutcome {
                    response: CommandResponse::Quorum(description),
                    offset: 0,
                    throttle_time_ms: 0,
                })
            }
            ControllerCommand::ReadOffset => {
                self.ensure_active()?;
                let offset = self.confirm_leadership_and_catch_up().await?;
                Ok(CommandOutcome {
                    response: CommandResponse::Done,
                    offset,
                    throttle_time_ms: 0,
                })
            }
        }
    }

    /// Runs one command under the command lock: compute from the latest
    /// image, commit the records (if any), return the response and the
    /// offset its effect is applied at once applied.
    ///
    /// The controller's own commands' records are written as
    /// [`Batching::Split`]; a user's go through [`Inner::run_user`].
    async fn run<T>(
        &self,
        compute: impl FnOnce(&MetadataImage) -> Result<ControllerResult<T>, ControllerError>,
    ) -> Result<(T, u64), ControllerError> {
        self.run_batched(Batching::Split, compute).await
    }

    /// [`Inner::run`] for a user's operation: one batch of at most
    /// [`MAX_USER_BATCH_BYTES`] or nothing.
    async fn run_user<T>(
        &self,
        compute: impl FnOnce(&MetadataImage) -> Result<ControllerResult<T>, ControllerError>,
    ) -> Result<(T, u64), ControllerError> {
        let max_bytes = MAX_USER_BATCH_BYTES;
        self.run_batched(Batching::Atomic { max_bytes }, compute)
            .await
    }

    /// [`Inner::run`] writing the records as `batching` says; the offset
    /// is the last batch's.
    async fn run_batched<T>(
        &self,
        batching: Batching,
        compute: impl FnOnce(&MetadataImage) -> Result<ControllerResult<T>, ControllerError>,
    ) -> Result<(T, u64), ControllerError> {
        let _queue = self.commands.lock().await;
        self.ensure_active()?;
        self.confirm_leadership_and_catch_up().await?;
        let image = self.images.borrow().clone();
        let result = compute(&image)?;
        let offset = if result.records.is_empty() {
            image.last_applied_offset
        } else {
            match batching {
                Batching::Atomic { max_bytes } => self.commit(result.records, max_bytes).await?,
                Batching::Split => {
                    let max = self.options.max_batch_bytes.min(MAX_BATCH_BYTES);
                    let term = self.raft.metrics().borrow().current_term;
                    let mut offset = None;
                    for batch in split_batches(result.records, max)? {
                        // Later batches only in the term of the first: they
                        // were computed from the image it started from.
                        if offset.is_some() {
                            self.ensure_active()?;
                            if self.raft.metrics().borrow().current_term != term {
                                return Err(ControllerError::NotController { leader: None });
                            }
                        }
                        offset = Some(self.commit(batch, max).await?);
                    }
                    offset.unwrap_or(image.last_applied_offset)
                }
            }
        };
        Ok((result.response, offset))
    }

    /// [`Inner::run`] for a command that creates or deletes partitions:
    /// `compute` gets the controller mutation quota of `client` (Kafka's
    /// `ControllerMutationQuotaManager.newQuotaFor`, applied by the active
    /// controller as Kafka's `ControllerApis` does), and the outcome carries
    /// the throttle time it gave, as of the answer.
    async fn run_mutation(
        &self,
        client: Option<&MutatingClient>,
        compute: impl FnOnce(
            &MetadataImage,
            &mut dyn PartitionMutationQuota,
        ) -> ControllerResult<CommandResponse>,
    ) -> Result<CommandOutcome, ControllerError> {
        let mut throttle = None;
        let (response, offset) = self
            .run_user(|image| {
                let mut quotas = self
                    .mutation_quotas
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                let now = Instant::now();
                let mut quota = quotas.quota_for(&image.client_quotas, client, now);
                let result = compute(image, &mut quota);
                throttle = Some((quota.throttle_time(now), now));
                Ok(result)
            })
            .await?;
        let throttle_time = throttle.map_or(Duration::ZERO, |(throttle, at)| {
            throttle.saturating_sub(at.elapsed())
        });
        Ok(CommandOutcome {
            response,
            offset,
            throttle_time_ms: throttle_time.as_millis() as u64,
        })
    }

    /// The broker sessions (a std mutex held only briefly, never across
    /// an await).
    fn sessions(&self) -> std::sync::MutexGuard<'_, BrokerSessions> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Restarts `broker_id`'s session clock (called under the command lock).
    fn touch_session(&self, broker_id: i32) {
        self.sessions()
            .last_contact
            .insert(broker_id, Instant::now());
    }

    /// Fences every unfenced broker whose session expired, with the leader
    /// elections that follow; decided under the command lock so a heartbeat
    /// cannot slip between the check and the records.
    async fn fence_expired_sessions(&self) -> Result<Vec<i32>, ControllerError> {
        let timeout = self.options.broker_session_timeout;
        self.run(|image| {
            let expired = self.sessions().expired(image, Instant::now(), timeout);
            Ok(control::fence_brokers(
                image,
                &self.options.static_config,
                &expired,
            ))
        })
        .await
        .map(|(fenced, _)| fenced)
    }

    /// Fails with `NotController` unless this node leads the quorum.
    fn ensure_active(&self) -> Result<(), ControllerError> {
        let metrics = self.raft.metrics().borrow().clone();
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

    /// Confirms that this node still leads the quorum (a heartbeat round
    /// with a majority: openraft's read index) and waits until its image has
    /// applied everything committed so far, including what earlier leaders
    /// committed. Answers computed from the image afterwards are
    /// linearizable: a deposed leader that has not noticed yet cannot answer
    /// from its stale image, and a new leader does not answer before it has
    /// replayed the log of earlier terms (Kafka's controller likewise
    /// claims leadership only once it has replayed up to the start of its
    /// epoch). Returns the offset the image has applied at least.
    ///
    /// Fails with `NotController` when another node leads, with `Timeout`
    /// after `options.forward_timeout`.
    async fn confirm_leadership_and_catch_up(&self) -> Result<u64, ControllerError> {
        let timeout = self.options.forward_timeout;
        let read = tokio::time::timeout(timeout, self.raft.ensure_linearizable())
            .await
            .map_err(|_| ControllerError::Timeout {
                operation: "confirming metadata quorum leadership".into(),
                waited_ms: timeout.as_millis() as u64,
            })?
            .map_err(|e| match e {
                RaftError::APIError(openraft::error::CheckIsLeaderError::ForwardToLeader(f)) => {
                    ControllerError::NotController {
                        leader: f.leader_id.and_then(|l| i32::try_from(l).ok()),
                    }
                }
                // A restarted leader whose peers are not up yet cannot
                // confirm leadership; callers retry until their deadline as
                // with no leader (e.g. every voter restarting at once).
                RaftError::APIError(openraft::error::CheckIsLeaderError::QuorumNotEnough(_)) => {
                    ControllerError::NotController { leader: None }
                }
                other => raft_err(other),
            })?;
        Ok(read.map_or(0, |l| l.index))
    }

    /// Commits one batch of at most `max_bytes` as the transport encodes
    /// it (larger: [`ControllerError::RecordBatchTooLarge`], nothing
    /// written); returns the offset it was applied at.
    async fn commit(
        &self,
        records: Vec<crate::records::MetadataRecord>,
        max_bytes: usize,
    ) -> Result<u64, ControllerError> {
        let batch = MetadataBatch { records };
        let bytes = observer::json_len(&batch);
        if bytes > max_bytes {
            return Err(batch_too_large(bytes, max_bytes));
        }
        let count = batch.records.len();
        let timeout = self.options.forward_timeout;
        let response = tokio::time::timeout(timeout, self.raft.client_write(batch))
            .await
            .map_err(|_| ControllerError::Timeout {
                operation: "a metadata quorum majority to commit the batch".into(),
                waited_ms: timeout.as_millis() as u64,
            })?
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
        Ok(response.data.offset)
    }
}

impl QuorumRequestHandler for Inner {
    fn handle(
        self: Arc<Self>,
        request: QuorumRequest,
    ) -> Pin<Box<dyn Future<Output = QuorumResponse> + Send + 'static>> {
        Box::pin(async move {
            match request {
                QuorumRequest::AppendEntries(r) => {
                    let sent = r.vote;
                    let response = QuorumResponse::AppendEntries(self.raft.append_entries(r).await);
                    if is_leader_contact(&sent, &response) {
                        self.record_contact(LeaderContact::heard_from_leader);
                    }
                    response
                }
                QuorumRequest::Vote(r) => {
                    let response = self.raft.vote(r).await;
                    if matches!(&response, Ok(r) if r.vote_granted) {
                        self.record_contact(LeaderContact::granted_vote);
                    }
                    QuorumResponse::Vote(response)
                }
                QuorumRequest::InstallSnapshot(r) => {
                    let sent = r.vote;
                    let response =
                        QuorumResponse::InstallSnapshot(self.raft.install_snapshot(r).await);
                    if is_leader_contact(&sent, &response) {
                        self.record_contact(LeaderContact::heard_from_leader);
                    }
                    response
                }
                QuorumRequest::PreVote(r) => match &self.pre_voter {
                    Some(pre_voter) => QuorumResponse::PreVote(pre_voter.answer(&r)),
                    None => QuorumResponse::Refused(
                        "this node is a single-voter metadata quorum".into(),
                    ),
                },
                QuorumRequest::Command(c) => QuorumResponse::Command(self.run_on_leader(c).await),
                QuorumRequest::FetchMetadata(r) => {
                    QuorumResponse::FetchMetadata(Ok(self.serve_fetch_metadata(r).await))
                }
            }
        })
    }
}

/// Whether a voter's `response` to a leader's AppendEntries or
/// InstallSnapshot sent with the vote `sent` is contact from a live leader
/// for Pre-Vote ([`pre_vote`]): the request was not turned away for its
/// vote. A stale leader's AppendEntries is answered `HigherVote`, but its
/// InstallSnapshot chunk `Ok` carrying this voter's higher vote (openraft
/// 0.9's `Raft::install_snapshot`), so a snapshot answer's vote is compared
/// with the one sent. Counted as contact, a deposed leader still sending
/// would keep this voter refusing the pre-votes of the election that
/// replaces it. Errors (the node shutting down) and other kinds are no
/// contact.
fn is_leader_contact(sent: &Vote<u64>, response: &QuorumResponse) -> bool {
    match response {
        QuorumResponse::AppendEntries(Ok(r)) => !matches!(r, AppendEntriesResponse::HigherVote(_)),
        QuorumResponse::InstallSnapshot(Ok(r)) => r.vote <= *sent,
        _ => false,
    }
}

/// The active controller's session expiry (Kafka's
/// `QuorumController` `maybeFenceStaleBroker` timer): every quarter of
/// `broker.session.timeout.ms` (at least 10 ms, at most 1 s), while this node
/// is active, fences the brokers whose session expired. Losing leadership
/// forgets the takeover time, so the next takeover restarts every clock.
async fn expire_sessions(inner: Weak<Inner>) {
    let period = {
        let Some(inner) = inner.upgrade() else { return };
        (inner.options.broker_session_timeout / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(1))
    };
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let active = inner.ensure_active().is_ok();
        let term = inner.raft.metrics().borrow().current_term;
        let any_expired = {
            let mut sessions = inner.sessions.lock().unwrap_or_else(|p| p.into_inner());
            if active {
                let now = Instant::now();
                sessions.active_in(term, now);
                let image = inner.images.borrow().clone();
                !sessions
                    .expired(&image, now, inner.options.broker_session_timeout)
                    .is_empty()
            } else {
                sessions.active_since = None;
                false
            }
        };
        // Decided again under the command lock, which only an expiry takes.
        if !any_expired {
            continue;
        }
        match inner.fence_expired_sessions().await {
            Ok(fenced) if !fenced.is_empty() => {
                tracing::warn!(brokers = ?fenced, "fenced brokers whose session expired");
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "could not fence expired broker sessions"),
        }
    }
}

/// The active controller's automatic leader rebalance
/// (`auto.leader.rebalance.enable`; Kafka's `QuorumController`
/// `maybeBalancePartitionLeaders` event): every `interval`
/// (`leader.imbalance.check.interval.seconds`), while this node is active,
/// one [`control::balance_partition_leaders`] pass under the command lock;
/// a pass that stopped at [`control::MAX_ELECTIONS_PER_IMBALANCE`] runs
/// again after 10 ms, as Kafka reschedules it.
async fn balance_leaders(inner: Weak<Inner>, interval: Duration) {
    let mut delay = interval;
    loop {
        tokio::time::sleep(delay).await;
        delay = interval;
        let Some(inner) = inner.upgrade() else { return };
        if inner.ensure_active().is_err() {
            continue;
        }
        let pass = inner
            .run(|image| {
                Ok(control::balance_partition_leaders(
                    image,
                    &inner.options.static_config,
                    control::MAX_ELECTIONS_PER_IMBALANCE,
                ))
            })
            .await;
        match pass {
            Ok((true, _)) => delay = Duration::from_millis(10),
            Ok((false, _)) => {}
            Err(e) => tracing::debug!(error = %e, "could not rebalance partition leaders"),
        }
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

/// Re-runs an election that split, after a delay drawn afresh each time.
///
/// openraft draws each voter's election timeout once, at start, and checks
/// it on a tick of 1.5 heartbeat intervals. With one leader per term
/// (`single-term-leader`, as KRaft), two voters whose timeouts fall in the
/// same tick and whose ticks are in phase start every election at the same
/// moment, each votes for itself, and the vote splits again and again: on
/// tokio's paused clock (every tick in phase) a two-survivor quorum never
/// elected a leader, and on a CI machine two survivors of a killed active
/// controller split five terms in a row (7 s). Raft's answer is a
/// randomized timeout per election; this task adds it in two ways, while
/// this voter stays a candidate of one term:
/// - when a rival candidate of the same term refused its vote (the network
///   reports it through [`SplitTerms`](crate::raft::network::SplitTerms)),
///   it backs off a random [`split_backoff_range`] and starts the next
///   election: KafkaRaftClient's election backoff after a lost
///   election (KIP-595, `controller.quorum.election.backoff.max.ms`), here
///   kept under openraft's own timeout (at least `election_timeout_min`
///   after the election began) so that it acts first. One rival asks
///   first and the other, not having voted in the new term, grants it. A
///   candidate that hears no rival (cut off, or refused for its log or a
///   live leader's lease) never backs off early;
/// - otherwise it starts the next election itself after a random
///   `[election_timeout_min, election_timeout_max)` ms drawn for this term
///   (openraft's own election timer is off with several voters: this is the
///   only one a candidate has).
///
/// Either way it first asks for pre-votes ([`pre_vote`]): without a
/// majority it stays in its term and draws a new timeout (backing off a
/// split at most once per term), so a candidate cut off from the others
/// does not climb terms that would depose the leader when it rejoins.
///
/// Ends when the raft stops.
async fn break_split_votes(
    raft: Raft<MetadataTypeConfig>,
    options: QuorumOptions,
    mut split_terms: watch::Receiver<u64>,
    pre_voter: Arc<PreVoter>,
) {
    use rand::Rng;
    let mut rng = crate::determinism::ThreadRng;
    let mut metrics = raft.metrics();
    // The term whose split this voter last backed off from: once per term,
    // also when the pre-vote that followed found no majority.
    let mut backed_off_in = None;
    loop {
        let term = {
            let m = metrics.borrow_and_update();
            if m.running_state.is_err() {
                return;
            }
            (m.state == ServerState::Candidate).then_some(m.current_term)
        };
        let Some(term) = term else {
            if metrics.changed().await.is_err() {
                return;
            }
            continue;
        };
        let min = options.election_timeout_min_ms.max(1);
        let max = options.election_timeout_max_ms.max(min + 1);
        let mut deadline =
            tokio::time::Instant::now() + Duration::from_millis(rng.gen_range(min..max));
        let mut backed_off = backed_off_in == Some(term);
        let elect = loop {
            tokio::select! {
                // A term that moved on wins over a deadline due at once.
                biased;
                moved_on = metrics.wait_for(|m| m.state != ServerState::Candidate || m.current_term != term) => {
                    break moved_on.map(|_| false);
                }
                () = tokio::time::sleep_until(deadline) => break Ok(true),
                split = split_terms.wait_for(|&split| split >= term), if !backed_off => {
                    backed_off = true;
                    backed_off_in = Some(term);
                    if split.is_ok() {
                        let backoff = Duration::from_millis(rng.gen_range(split_backoff_range(min)));
                        deadline = deadline.min(tokio::time::Instant::now() + backoff);
                    }
                }
            }
        };
        match elect {
            Ok(false) => continue,
            Err(_) => return,
            Ok(true) => {
                if !pre_voter.majority_would_vote().await {
                    // Asked again after a new random timeout, in this term.
                    continue;
                }
                tracing::debug!(term, backed_off, "election split; starting the next one");
                if raft.trigger().elect().await.is_err() {
                    return;
                }
                // `elect` only queues the command, and the core persists its
                // new vote before it publishes the term: wait for that, or
                // this loop would see the old term again, find its split
                // already recorded and could start a second election.
                let took = tokio::time::timeout(
                    Duration::from_millis(max),
                    metrics
                        .wait_for(|m| m.state != ServerState::Candidate || m.current_term > term),
                )
                .await;
                if matches!(took, Ok(Err(_))) {
                    return;
                }
            }
        }
    }
}

/// Milliseconds a candidate that a rival candidate refused waits before its
/// next election: `[election_timeout_min / 10, election_timeout_min / 2)`
/// (100-500 ms with KRaft's timings). Under half the minimum election
/// timeout, so that it acts before openraft's own timer; at least a tenth
/// of it, so that when a third voter has meanwhile elected the rival, the
/// rival's first AppendEntries (sent as it becomes leader) reaches this
/// voter before it would start an election that deposes the new leader.
fn split_backoff_range(election_timeout_min_ms: u64) -> std::ops::Range<u64> {
    let low = election_timeout_min_ms / 10;
    low..(election_timeout_min_ms / 2).max(low + 1)
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
    use crate::records::{MetadataRecord, PartitionChangeRecord};

    fn change(partition_id: i32) -> MetadataRecord {
        MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id,
            isr: Some(vec![1, 2]),
            ..PartitionChangeRecord::default()
        })
    }

    /// The controller's own records are cut, in order, into batches that
    /// each encode within the limit, filled as far as it allows.
    #[test]
    fn records_are_split_into_batches_that_each_fit() {
        let records: Vec<_> = (0..100).map(change).collect();
        let one = observer::json_len(&MetadataBatch {
            records: records[..1].to_vec(),
        });
        let all = observer::json_len(&MetadataBatch {
            records: records.clone(),
        });
        assert_eq!(split_batches(records.clone(), all).unwrap().len(), 1);
        let max = all / 3;
        let batches = split_batches(records.clone(), max).unwrap();
        assert!((3..=4).contains(&batches.len()), "{}", batches.len());
        for (i, batch) in batches.iter().enumerate() {
            let bytes = observer::json_len(&MetadataBatch {
                records: batch.clone(),
            });
            assert!(bytes <= max, "batch {i}: {bytes} > {max}");
            if let Some(next) = batches.get(i + 1) {
                let mut fuller = batch.clone();
                fuller.push(next[0].clone());
                let fuller = observer::json_len(&MetadataBatch { records: fuller });
                assert!(fuller > max, "batch {i} could have taken one more");
            }
        }
        assert_eq!(batches.concat(), records);
        // A record that no batch holds.
        assert!(matches!(
            split_batches(records, one - 1),
            Err(ControllerError::RecordBatchTooLarge { .. })
        ));
    }

    /// Node 0's controller configuration, its metadata log under `dir`.
    fn node_0_config(dir: &std::path::Path) -> ControllerConfig {
        ControllerConfig {
            node_id: 0,
            metadata_dir: dir.join("__cluster_metadata-0"),
            cluster_id: "c".into(),
        }
    }

    /// Pre-Vote's leader contact rule against openraft's real answers: a
    /// stale leader's AppendEntries and InstallSnapshot chunk are no contact
    /// (the chunk is answered `Ok`, with the voter's higher vote), a newer
    /// leader's are.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_a_leader_not_turned_away_for_its_vote_is_leader_contact() {
        use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest};
        let dir = tempfile::tempdir().unwrap();
        let config = node_0_config(dir.path());
        let controller = QuorumController::start_with(
            config,
            QuorumOptions::default(),
            vec![],
            QuorumTransport::single_voter(),
        )
        .await
        .unwrap();
        let raft = &controller.inner.raft;
        let term = raft.metrics().borrow().current_term;
        assert!(term >= 1, "term {term}");
        let append = |vote| AppendEntriesRequest::<MetadataTypeConfig> {
            vote,
            prev_log_id: None,
            entries: vec![],
            leader_commit: None,
        };
        let chunk = |vote| InstallSnapshotRequest::<MetadataTypeConfig> {
            vote,
            meta: Default::default(),
            offset: 0,
            data: vec![],
            done: false,
        };

        // A leader of an older term (node 7, never a voter here).
        let stale = Vote::new_committed(term - 1, 7);
        let response = QuorumResponse::AppendEntries(raft.append_entries(append(stale)).await);
        assert!(
            matches!(
                &response,
                QuorumResponse::AppendEntries(Ok(AppendEntriesResponse::HigherVote(_)))
            ),
            "{response:?}"
        );
        assert!(!is_leader_contact(&stale, &response));
        let response = QuorumResponse::InstallSnapshot(raft.install_snapshot(chunk(stale)).await);
        assert!(
            matches!(&response, QuorumResponse::InstallSnapshot(Ok(r)) if r.vote > stale),
            "{response:?}"
        );
        assert!(!is_leader_contact(&stale, &response));

        // A leader of a newer term is heard: both are contact.
        let newer = Vote::new_committed(term + 1, 7);
        let response = QuorumResponse::InstallSnapshot(raft.install_snapshot(chunk(newer)).await);
        assert!(is_leader_contact(&newer, &response), "{response:?}");
        let response = QuorumResponse::AppendEntries(raft.append_entries(append(newer)).await);
        assert!(is_leader_contact(&newer, &response), "{response:?}");
        controller.shutdown().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn snapshot_purges_the_log_and_restart_rebuilds_from_it() {
        let dir = tempfile::tempdir().unwrap();
        let config = node_0_config(dir.path());
        let options = QuorumOptions {
            snapshot_interval_entries: 5,
            log_entries_kept_after_snapshot: 0,
            ..QuorumOptions::default()
        };
        let before = {
            let controller = QuorumController::start_with(
                config.clone(),
                options.clone(),
                vec![],
                QuorumTransport::single_voter(),
            )
            .await
            .unwrap();
            let api = crate::MetadataController::from(controller.clone());
            let epoch = api
                .register_broker(crate::BrokerRegistrationRequest {
                    broker_id: 0,
                    incarnation_id: uuid::Uuid::new_v4(),
                    endpoints: vec![],
                    rack: None,
                    previous_broker_epoch: -1,
                })
                .await
                .unwrap();
            for i in 0..12 {
                let r = api
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
            api.allocate_producer_ids(0, epoch).await.unwrap();
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

        let controller =
            QuorumController::start_with(config, options, vec![], QuorumTransport::single_voter())
                .await
                .unwrap();
        let after = controller.image();
        assert_eq!(after.topics, before.topics);
        assert_eq!(after.topic_names_by_id, before.topic_names_by_id);
        assert_eq!(after.brokers, before.brokers);
        assert_eq!(after.next_producer_id, 1000);
        controller.shutdown().await.unwrap();
    }
}
