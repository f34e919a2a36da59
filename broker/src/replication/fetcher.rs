//! Replica fetchers (Kafka 4.1's `ReplicaFetcherManager`,
//! `AbstractFetcherThread`, `ReplicaFetcherThread`): a follower runs
//! `num.replica.fetchers` tasks per leader broker, each sending one Fetch
//! (v17, `ReplicaState` with this broker's id and epoch, KIP-903) for all
//! the partitions it follows from that leader over the leader's
//! inter-broker listener, and appending the leader's batches unchanged.
//! Each fetcher keeps an incremental fetch session with its leader
//! (KIP-227, [`FetchSessionHandler`]): after a full Fetch that creates it,
//! a Fetch names only the partitions whose fetch state changed, and the
//! leader answers only partitions with something new; a partition left out
//! of an answer has nothing new.
//!
//! Per partition and response:
//! - records: appended byte for byte ([`Partition::append_as_follower`]);
//!   then the follower's high watermark is the leader's capped at the log
//!   end, and the log start offset follows the leader's;
//! - a diverging epoch (KIP-320): truncation as Kafka's
//!   `truncateOnFetchResponse`, see [`truncation_for_diverging_epoch`];
//! - OFFSET_OUT_OF_RANGE: the leader's end and start offsets by ListOffsets
//!   (Kafka's `fetchOffsetAndTruncate`): truncate to a smaller leader end,
//!   or restart the log at a larger leader start;
//! - other errors (not leader, fenced or unknown epoch, unknown topic):
//!   the partition waits `replica.fetch.backoff.ms` and the metadata image
//!   moves it; a storage error stops fetching it (as Kafka marks it failed).
//!
//! **Durability (past Kafka).** In the durable mode (`write.caching=false`,
//! the default) the records a round appended are fsynced, one group commit
//! for all of them, before the next Fetch reports the new log end offset:
//! the leader's high watermark then only covers records on every ISR
//! follower's stable storage. With `write.caching=true` the next Fetch goes
//! at once, as Kafka.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{
    FetchPartition, FetchTopic, ForgottenTopic, ReplicaState,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, error, info, warn};
use uuid::Uuid;
use weir_controller::MetadataImage;
use weir_storage::TopicPartition;

use super::client::BrokerClient;
use super::fetch_session::{FetchRequestData, FetchSessionHandler};
use super::truncation::truncation_for_diverging_epoch;
use crate::config::ReplicationConfig;
use crate::fetch_session::{
    PartitionKey, PartitionRequest, QuietPartition, QuietWatch, SessionWaker,
};
use crate::network::channel::ClientChannel;
use crate::partition::Partition;
use crate::replica_manager::ReplicaManager;

/// The Fetch version followers send (KIP-903's `ReplicaState`, topic ids).
pub const REPLICA_FETCH_VERSION: i16 = 17;
/// The ListOffsets version a follower sends on OFFSET_OUT_OF_RANGE.
const LIST_OFFSETS_VERSION: i16 = 7;

/// One partition a fetcher follows.
#[derive(Clone)]
struct FetchTarget {
    topic_id: Uuid,
    leader_epoch: i32,
    partition: Arc<Partition>,
    /// Not fetched before this instant (after an error).
    delayed_until: Option<Instant>,
    /// A storage error: not fetched again until the image re-adds it.
    failed: bool,
}

/// A fetcher's partitions, shared with the manager, and a generation
/// bumped by every change to them (the fetcher copies them into its
/// [`FetchStates`] only when it moved).
#[derive(Default)]
struct TargetSet {
    targets: BTreeMap<TopicPartition, FetchTarget>,
    generation: u64,
}

type Targets = Arc<Mutex<TargetSet>>;

/// The fetcher's own copy of its partitions with, per partition, the
/// request it last computed and the partition's fetch state version then
/// ([`Partition::fetch_state_version`]). A computed partition holds a
/// one-shot watch ([`QuietWatch`]) that its next change fires into
/// `changed`: a round recomputes (and syncs) only those, so an idle round
/// costs nothing per partition. Only a new copy of the set or the end of a
/// delay walks every partition, comparing versions.
#[derive(Default)]
struct FetchStates {
    /// The [`TargetSet::generation`] copied; `None` before the first copy.
    generation: Option<u64>,
    entries: Vec<FetchEntry>,
    /// Entry index by `(topic id, partition)`, as responses name them.
    by_id: HashMap<(Uuid, i32), usize>,
    /// The entries fetched this round, in order.
    ready: Vec<usize>,
    /// When the next delayed entry is due, if any.
    next_ready: Option<Instant>,
    /// Entries whose request is to be recomputed (each `dirty`).
    dirty: Vec<usize>,
    /// Where the watches of computed entries report their next change.
    changed: Arc<SessionWaker>,
}

/// One partition of [`FetchStates`].
struct FetchEntry {
    tp: TopicPartition,
    target: FetchTarget,
    /// Fetched in the last round.
    ready: bool,
    /// In [`FetchStates::dirty`].
    dirty: bool,
    /// The fetch state version `request` was computed at (and the log
    /// synced up to its fetch offset).
    seen: Option<u64>,
    request: PartitionRequest,
}

/// What one round fetches, from [`FetchStates::plan`] (the entries
/// themselves are [`FetchStates::ready`]).
struct RoundPlan {
    /// Ready entries whose fetch state moved since their request was
    /// computed: to sync and recompute.
    stale: Vec<usize>,
    /// The ready set differs from the last round's (the session must be
    /// told what to forget).
    set_changed: bool,
}

impl FetchStates {
    /// Copies `set` if it changed since the last copy, keeping the computed
    /// request (and its watch) of a partition whose log and leader epoch
    /// are the same.
    fn refresh(&mut self, set: &TargetSet) -> bool {
        if self.generation == Some(set.generation) {
            return false;
        }
        let mut old: HashMap<(Uuid, i32), FetchEntry> = self
            .entries
            .drain(..)
            .map(|e| ((e.target.topic_id, e.tp.partition), e))
            .collect();
        self.by_id.clear();
        for (tp, target) in &set.targets {
            let key = (target.topic_id, tp.partition);
            let (seen, request) = match old.remove(&key) {
                Some(e)
                    if Arc::ptr_eq(&e.target.partition, &target.partition)
                        && e.target.leader_epoch == target.leader_epoch =>
                {
                    (e.seen, e.request)
                }
                _ => (None, PartitionRequest::default()),
            };
            self.by_id.insert(key, self.entries.len());
            self.entries.push(FetchEntry {
                tp: tp.clone(),
                target: target.clone(),
                ready: false,
                dirty: false,
                seen,
                request,
            });
        }
        self.dirty.clear();
        self.generation = Some(set.generation);
        true
    }

    /// The entries to fetch at `now` (not failed, not delayed; in
    /// [`FetchStates::ready`]), which of them need a new request, and
    /// whether the set changed.
    fn plan(&mut self, now: Instant, rebuilt: bool) -> RoundPlan {
        let woken = self.changed.take_woken();
        let walk = rebuilt || self.next_ready.is_some_and(|due| due <= now);
        let mut set_changed = rebuilt;
        if walk {
            // Every change since an entry's request moved its version:
            // the walk finds them all, the woken keys add nothing.
            self.ready.clear();
            self.next_ready = None;
            for (i, e) in self.entries.iter_mut().enumerate() {
                let ready = match e.target.delayed_until {
                    _ if e.target.failed => false,
                    Some(until) if until > now => {
                        self.next_ready = Some(self.next_ready.map_or(until, |n| n.min(until)));
                        false
                    }
                    _ => true,
                };
                set_changed |= ready != e.ready;
                e.ready = ready;
                if ready {
                    self.ready.push(i);
                }
                if !e.dirty && e.seen != Some(e.target.partition.fetch_state_version()) {
                    e.dirty = true;
                    self.dirty.push(i);
                }
            }
        } else {
            for key in woken {
                if let Some(&i) = self.by_id.get(&(key.topic_id, key.partition)) {
                    let e = &mut self.entries[i];
                    if !e.dirty {
                        e.dirty = true;
                        self.dirty.push(i);
                    }
                }
            }
        }
        let entries = &self.entries;
        let mut stale: Vec<usize> = self
            .dirty
            .iter()
            .copied()
            .filter(|&i| entries[i].ready)
            .collect();
        stale.sort_unstable();
        RoundPlan { stale, set_changed }
    }

    /// Recomputes entry `i`'s request with `compute` at the partition's
    /// current version, and watches the partition's next change. An entry
    /// that changed meanwhile stays dirty (recomputed next round).
    fn recompute(&mut self, i: usize, compute: impl FnOnce(&FetchTarget) -> PartitionRequest) {
        let e = &mut self.entries[i];
        // Taken before the request: a later change moves it again.
        let version = e.target.partition.fetch_state_version();
        e.request = compute(&e.target);
        e.seen = Some(version);
        let key = PartitionKey {
            topic_id: e.target.topic_id,
            topic: StrBytes::default(),
            partition: e.tp.partition,
        };
        e.dirty = !e
            .target
            .partition
            .watch_quiet(version, QuietWatch::new(&self.changed, key));
    }

    /// Drops the entries no longer dirty from the dirty list.
    fn retain_dirty(&mut self) {
        let entries = &self.entries;
        self.dirty.retain(|&i| entries[i].dirty);
    }
}

/// A running fetcher task and what it fetches.
struct FetcherHandle {
    address: String,
    targets: Targets,
    wake: Arc<Notify>,
    cancel: CancellationToken,
}

/// Starts, feeds and stops the replica fetchers (Kafka's
/// `ReplicaFetcherManager`).
pub struct ReplicaFetcherManager {
    node_id: i32,
    broker_epoch: i64,
    config: ReplicationConfig,
    /// The inter-broker listener's TLS and SASL.
    channel: ClientChannel,
    replica_manager: Arc<ReplicaManager>,
    fetchers: Mutex<HashMap<(i32, usize), FetcherHandle>>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl ReplicaFetcherManager {
    /// A manager with no fetcher yet; [`ReplicaFetcherManager::apply_image`]
    /// starts them.
    pub fn new(
        node_id: i32,
        broker_epoch: i64,
        config: ReplicationConfig,
        channel: ClientChannel,
        replica_manager: Arc<ReplicaManager>,
        shutdown: CancellationToken,
    ) -> Self {
        ReplicaFetcherManager {
            node_id,
            broker_epoch,
            config,
            channel,
            replica_manager,
            fetchers: Mutex::new(HashMap::new()),
            shutdown,
            tasks: TaskTracker::new(),
        }
    }

    /// Brings the fetchers in line with `image` (after
    /// [`ReplicaManager::apply_image`]): every hosted partition that another
    /// live broker leads is fetched from that leader by fetcher
    /// `abs(31 * java_hash(topic) + partition) % num.replica.fetchers`
    /// (Kafka's `AbstractFetcherManager.getFetcherId`); fetchers left with
    /// nothing stop.
    pub fn apply_image(&self, image: &MetadataImage) {
        let fetchers_per_leader = self.config.num_replica_fetchers.max(1) as usize;
        let mut wanted: HashMap<(i32, usize), (String, BTreeMap<TopicPartition, FetchTarget>)> =
            HashMap::new();
        for partition in self.replica_manager.all_partitions() {
            if partition.is_leader() {
                continue;
            }
            let tp = partition.topic_partition().clone();
            let Some(topic) = image.topic(&tp.topic) else {
                continue;
            };
            let Some(registration) = topic.partitions.get(&tp.partition) else {
                continue;
            };
            let leader = registration.leader;
            if leader < 0 || leader == self.node_id {
                continue;
            }
            let Some(address) = image
                .brokers
                .get(&leader)
                .filter(|b| !b.fenced)
                .and_then(|b| self.inter_broker_address(b))
            else {
                continue;
            };
            let hash = crate::group::java_string_hash(&tp.topic)
                .wrapping_mul(31)
                .wrapping_add(tp.partition);
            let fetcher_id = (hash.unsigned_abs() as usize) % fetchers_per_leader;
            wanted
                .entry((leader, fetcher_id))
                .or_insert_with(|| (address, BTreeMap::new()))
                .1
                .insert(
                    tp,
                    FetchTarget {
                        topic_id: topic.topic_id,
                        leader_epoch: registration.leader_epoch,
                        partition,
                        delayed_until: None,
                        failed: false,
                    },
                );
        }
        let mut fetchers = self.fetchers.lock().unwrap_or_else(|e| e.into_inner());
        fetchers.retain(|key, handle| {
            let keep = wanted.get(key).is_some_and(|(a, _)| *a == handle.address);
            if !keep {
                handle.cancel.cancel();
            }
            keep
        });
        for (key, (address, targets)) in wanted {
            if let Some(handle) = fetchers.get(&key) {
                let mut set = handle.targets.lock().unwrap_or_else(|e| e.into_inner());
                set.generation += 1;
                let previous = std::mem::take(&mut set.targets);
                let current = &mut set.targets;
                for (tp, mut target) in targets {
                    // Keep a backoff or failure within one leader epoch.
                    if let Some(old) = previous.get(&tp) {
                        if old.leader_epoch == target.leader_epoch
                            && Arc::ptr_eq(&old.partition, &target.partition)
                        {
                            target.delayed_until = old.delayed_until;
                            target.failed = old.failed;
                        }
                    }
                    current.insert(tp, target);
                }
                drop(set);
                handle.wake.notify_one();
                continue;
            }
            let handle = FetcherHandle {
                address: address.clone(),
                targets: Arc::new(Mutex::new(TargetSet {
                    targets,
                    generation: 0,
                })),
                wake: Arc::new(Notify::new()),
                cancel: self.shutdown.child_token(),
            };
            info!(leader = key.0, fetcher = key.1, %address, "starting replica fetcher");
            let fetcher = Fetcher {
                replica_manager: self.replica_manager.clone(),
                node_id: self.node_id,
                broker_epoch: self.broker_epoch,
                config: self.config.clone(),
                channel: self.channel.clone(),
                leader_id: key.0,
                client_id: format!("broker-{}-fetcher-{}", self.node_id, key.1),
                address,
                targets: handle.targets.clone(),
                wake: handle.wake.clone(),
                cancel: handle.cancel.clone(),
            };
            self.tasks.spawn(fetcher.run());
            fetchers.insert(key, handle);
        }
    }

    /// The leader's `host:port` on the inter-broker listener: the one named
    /// `inter.broker.listener.name`, else its first PLAINTEXT listener.
    fn inter_broker_address(&self, broker: &weir_controller::BrokerRegistration) -> Option<String> {
        let endpoint = match &self.config.inter_broker_listener_name {
            Some(name) => broker.endpoints.iter().find(|e| e.name == *name),
            None => broker
                .endpoints
                .iter()
                .find(|e| e.security_protocol == 0)
                .or(broker.endpoints.first()),
        }?;
        Some(format!("{}:{}", endpoint.host, endpoint.port))
    }

    /// Stops every fetcher and waits for them to end.
    pub async fn shutdown(&self) {
        for handle in self
            .fetchers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
        {
            handle.1.cancel.cancel();
        }
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// One fetcher task: a connection to one leader and the partitions it
/// fetches from there.
struct Fetcher {
    replica_manager: Arc<ReplicaManager>,
    node_id: i32,
    broker_epoch: i64,
    config: ReplicationConfig,
    /// The inter-broker listener's TLS and SASL.
    channel: ClientChannel,
    leader_id: i32,
    client_id: String,
    address: String,
    targets: Targets,
    wake: Arc<Notify>,
    cancel: CancellationToken,
}

impl Fetcher {
    async fn run(self) {
        let mut client: Option<BrokerClient> = None;
        let mut session = FetchSessionHandler::default();
        let mut states = FetchStates::default();
        let backoff = Duration::from_millis(self.config.replica_fetch_backoff_ms.max(0) as u64);
        loop {
            if self.cancel.is_cancelled() {
                return;
            }
            let now = Instant::now();
            let rebuilt = {
                let set = self.targets.lock().unwrap_or_else(|e| e.into_inner());
                states.refresh(&set)
            };
            let plan = states.plan(now, rebuilt);
            if states.ready.is_empty() {
                let wait = states.next_ready.unwrap_or(now + Duration::from_secs(3600));
                tokio::select! {
                    _ = self.cancel.cancelled() => return,
                    _ = self.wake.notified() => {}
                    _ = tokio::time::sleep_until(wait) => {}
                }
                continue;
            }
            if client.is_none() {
                match BrokerClient::connect(&self.address, self.client_id.clone(), &self.channel)
                    .await
                {
                    Ok(c) => client = Some(c),
                    Err(e) => {
                        if matches!(e, super::client::ClientError::Secure { .. }) {
                            // A handshake or login the leader refused is a
                            // configuration to fix, not a restart to wait out.
                            warn!(leader = self.leader_id, error = %e, "replica fetcher cannot connect");
                        } else {
                            debug!(leader = self.leader_id, error = %e, "replica fetcher cannot connect");
                        }
                        if self.pause(backoff).await {
                            return;
                        }
                        continue;
                    }
                }
            }
            let Some(connection) = client.as_mut() else {
                continue;
            };
            // What the Fetch reports must be durable, including records
            // no round of this process appended: a log reopened after an
            // unclean stop holds recovered records above its recovery
            // point that only the page cache may have (replication
            // simulation seed 1182: a restarted follower joined the ISR on
            // them, became the only ISR member and lost an acknowledged
            // record to a power loss).
            // Only a partition whose fetch state moved since its last
            // request can hold records its request does not cover yet.
            let failed = self
                .sync_appended(
                    plan.stale
                        .iter()
                        .map(|&i| states.entries[i].target.partition.clone())
                        .collect(),
                )
                .await;
            if !failed.is_empty() {
                // Marked failed: the next round leaves them out.
                continue;
            }
            let request = self.fetch_request(&mut states, &plan, &mut session);
            let response = tokio::select! {
                _ = self.cancel.cancelled() => return,
                r = connection.send(&request, REPLICA_FETCH_VERSION) => r,
            };
            let response = match response {
                Ok(r) if session.handle_response(r.error_code, r.session_id) => r,
                Ok(r) if is_session_error(r.error_code) => {
                    // The next Fetch is full and creates a new session.
                    debug!(
                        leader = self.leader_id,
                        error_code = r.error_code,
                        session_id = request.session_id,
                        "fetch session lost; sending a full Fetch"
                    );
                    continue;
                }
                Ok(r) => {
                    warn!(
                        leader = self.leader_id,
                        error_code = r.error_code,
                        "replica Fetch failed"
                    );
                    if self.pause(backoff).await {
                        return;
                    }
                    continue;
                }
                Err(e) => {
                    debug!(leader = self.leader_id, error = %e, "replica Fetch failed; reconnecting");
                    client = None;
                    session.handle_error();
                    if self.pause(backoff).await {
                        return;
                    }
                    continue;
                }
            };
            let mut appended: Vec<Arc<Partition>> = Vec::new();
            let mut broken = false;
            'topics: for topic in response.responses {
                for data in topic.partitions {
                    let Some(entry) = states
                        .by_id
                        .get(&(topic.topic_id, data.partition_index))
                        .map(|&i| &states.entries[i])
                        .filter(|e| e.ready)
                    else {
                        continue;
                    };
                    let (tp, target) = (&entry.tp, &entry.target);
                    match self.process_partition(connection, tp, target, data).await {
                        Ok(Some(partition)) => appended.push(partition),
                        Ok(None) => {}
                        Err(Outcome::Delay) => self.mark(tp, Some(Instant::now() + backoff), false),
                        Err(Outcome::Fail) => self.mark(tp, None, true),
                        Err(Outcome::Reconnect) => {
                            self.mark(tp, Some(Instant::now() + backoff), false);
                            broken = true;
                            break 'topics;
                        }
                    }
                }
            }
            if broken {
                client = None;
                session.handle_error();
            }
            self.sync_appended(appended).await;
        }
    }

    /// Waits `backoff`; true when cancelled meanwhile.
    async fn pause(&self, backoff: Duration) -> bool {
        tokio::select! {
            _ = self.cancel.cancelled() => true,
            _ = tokio::time::sleep(backoff) => false,
        }
    }

    /// Delays (`delayed_until`) or fails a partition in the shared set;
    /// the fetcher's [`FetchStates`] takes it at the next round.
    fn mark(&self, tp: &TopicPartition, delayed_until: Option<Instant>, failed: bool) {
        let mut set = self.targets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = set.targets.get_mut(tp) {
            t.delayed_until = delayed_until;
            t.failed |= failed;
            set.generation += 1;
        }
    }

    /// A partition's fetch state (fetch offset = log end offset,
    /// `LastFetchedEpoch` = the log's latest epoch, log start offset,
    /// leader epoch).
    fn partition_request(&self, target: &FetchTarget) -> PartitionRequest {
        let p = &target.partition;
        PartitionRequest {
            fetch_offset: p.log_end_offset(),
            log_start_offset: p.log_start_offset(),
            partition_max_bytes: self.config.replica_fetch_max_bytes,
            current_leader_epoch: target.leader_epoch,
            last_fetched_epoch: p.latest_epoch().unwrap_or(-1),
        }
    }

    /// The next Fetch for `plan`: the stale entries' requests are
    /// recomputed first; `session` then names every ready partition (a
    /// full Fetch, or the ready set changed: what left it is forgotten)
    /// or only the stale ones whose request changed.
    fn fetch_request(
        &self,
        states: &mut FetchStates,
        plan: &RoundPlan,
        session: &mut FetchSessionHandler,
    ) -> FetchRequest {
        for &i in &plan.stale {
            states.recompute(i, |target| self.partition_request(target));
        }
        states.retain_dirty();
        let key = |e: &FetchEntry| ((e.target.topic_id, e.tp.partition), e.request);
        let data = if plan.set_changed || session.next_is_full() {
            session.build(
                states
                    .ready
                    .iter()
                    .map(|&i| key(&states.entries[i]))
                    .collect(),
            )
        } else {
            session.build_changed(
                plan.stale
                    .iter()
                    .map(|&i| key(&states.entries[i]))
                    .collect(),
            )
        };
        replica_fetch_request(self.node_id, self.broker_epoch, &self.config, data)
    }

    /// Handles one partition of a Fetch response; returns the partition
    /// when records were appended (to be made durable).
    async fn process_partition(
        &self,
        client: &mut BrokerClient,
        tp: &TopicPartition,
        target: &FetchTarget,
        data: kafka_protocol::messages::fetch_response::PartitionData,
    ) -> Result<Option<Arc<Partition>>, Outcome> {
        let partition = &target.partition;
        let epoch = target.leader_epoch;
        if data.error_code == ResponseError::OffsetOutOfRange.code() {
            return self
                .handle_out_of_range(client, tp, target)
                .await
                .map(|()| None);
        }
        if data.error_code != 0 {
            debug!(topic_partition = %tp, error_code = data.error_code, "replica fetch error");
            return Err(Outcome::Delay);
        }
        let storage_failure = |e| storage_failure(tp, e);
        let diverging = &data.diverging_epoch;
        if diverging.epoch >= 0 || diverging.end_offset >= 0 {
            let fetch_offset = partition.log_end_offset();
            let local = match partition.end_offset_for_epoch(diverging.epoch) {
                (-1, _) | (_, -1) => None,
                found => Some(found),
            };
            let truncation = truncation_for_diverging_epoch(
                diverging.epoch,
                diverging.end_offset,
                local,
                fetch_offset,
                fetch_offset,
            );
            info!(topic_partition = %tp, leader_epoch = diverging.epoch,
                leader_end_offset = diverging.end_offset, offset = truncation.offset,
                completed = truncation.completed, "diverging epoch: truncating");
            self.replica_manager
                .truncate_follower(partition, truncation.offset, false, epoch)
                .await
                .map_err(storage_failure)?;
            return Ok(None);
        }
        let mut appended = None;
        if let Some(records) = data.records.filter(|r: &Bytes| !r.is_empty()) {
            let mut result = partition.append_as_follower(&records, epoch);
            // Kafka's Partition.appendRecordsToFollowerOrFutureReplica: an
            // empty log whose start (the leader's log start, set inside a
            // batch by DeleteRecords) falls inside the first batch restarts
            // at that batch.
            if let Err(weir_storage::StorageError::UnexpectedAppendOffset {
                first_offset,
                last_offset,
                log_end_offset,
            }) = result
            {
                if first_offset < log_end_offset
                    && log_end_offset <= last_offset
                    && partition.log_start_offset() == log_end_offset
                {
                    self.replica_manager
                        .truncate_follower(partition, first_offset, true, epoch)
                        .await
                        .map_err(storage_failure)?;
                    result = partition.append_as_follower(&records, epoch);
                }
            }
            match result {
                Ok(Some(_)) => {
                    metrics::counter!("weir_replica_fetch_bytes_total")
                        .increment(records.len() as u64);
                    appended = Some(partition.clone());
                }
                Ok(None) => return Ok(None),
                Err(e @ weir_storage::StorageError::Io { .. }) => return Err(storage_failure(e)),
                Err(e) => {
                    warn!(topic_partition = %tp, error = %e, "leader's batches refused by the follower log");
                    return Err(Outcome::Delay);
                }
            }
        }
        partition
            .update_follower_offsets(data.high_watermark, data.log_start_offset)
            .map_err(storage_failure)?;
        // Kafka's ReplicaFetcherManager ConsumerLag: records the follower
        // is behind the leader's high watermark.
        metrics::gauge!("weir_replica_lag_records",
            "topic" => tp.topic.clone(), "partition" => tp.partition.to_string())
        .set((data.high_watermark - partition.log_end_offset()).max(0) as f64);
        Ok(appended)
    }

    /// Kafka's `AbstractFetcherThread.fetchOffsetAndTruncate`: a leader end
    /// below ours truncates to it; a leader start above ours restarts the
    /// log there.
    async fn handle_out_of_range(
        &self,
        client: &mut BrokerClient,
        tp: &TopicPartition,
        target: &FetchTarget,
    ) -> Result<(), Outcome> {
        let partition = &target.partition;
        let leader_end = self
            .list_offset(client, tp, target.leader_epoch, -1)
            .await?;
        let local_end = partition.log_end_offset();
        let storage_failure = |e| storage_failure(tp, e);
        if leader_end < local_end {
            warn!(topic_partition = %tp, leader_end, local_end, "out of range: truncating to the leader's end");
            self.replica_manager
                .truncate_follower(partition, leader_end, false, target.leader_epoch)
                .await
                .map_err(storage_failure)?;
            return Ok(());
        }
        let leader_start = self
            .list_offset(client, tp, target.leader_epoch, -2)
            .await?;
        if leader_start > local_end {
            warn!(topic_partition = %tp, leader_start, local_end, "out of range: restarting the log at the leader's start");
            self.replica_manager
                .truncate_follower(partition, leader_start, true, target.leader_epoch)
                .await
                .map_err(storage_failure)?;
        }
        Ok(())
    }

    /// The leader's offset for `timestamp` (-1 latest: its log end for a
    /// follower; -2 earliest).
    async fn list_offset(
        &self,
        client: &mut BrokerClient,
        tp: &TopicPartition,
        leader_epoch: i32,
        timestamp: i64,
    ) -> Result<i64, Outcome> {
        let mut partition = ListOffsetsPartition::default();
        partition.partition_index = tp.partition;
        partition.current_leader_epoch = leader_epoch;
        partition.timestamp = timestamp;
        let mut topic = ListOffsetsTopic::default();
        topic.name = TopicName(StrBytes::from_string(tp.topic.clone()));
        topic.partitions.push(partition);
        let mut request = ListOffsetsRequest::default();
        request.replica_id = BrokerId(self.node_id);
        request.topics.push(topic);
        let response = client
            .send(&request, LIST_OFFSETS_VERSION)
            .await
            .map_err(|e| {
                debug!(error = %e, "ListOffsets to the leader failed");
                Outcome::Reconnect
            })?;
        let answer = response
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or(Outcome::Delay)?;
        if answer.error_code != 0 {
            return Err(Outcome::Delay);
        }
        Ok(answer.offset)
    }

    /// Group commit of one round's appends in the durable mode: every
    /// partition without `write.caching` whose log end offset is above its
    /// durable offset is fsynced (concurrently) before the next Fetch
    /// reports its log end offset. A failed fsync stops fetching the
    /// partition (and halts the broker: its log directory failed): its
    /// unsynced records must never be reported. Returns the partitions
    /// whose fsync failed.
    async fn sync_appended(&self, appended: Vec<Arc<Partition>>) -> Vec<TopicPartition> {
        let waits: Vec<_> = appended
            .into_iter()
            .filter(|p| p.ack_requires_flush(-1, false))
            .filter_map(|p| p.unsynced_end().map(|end| (p, end)))
            .map(|(p, end)| async move { (p.clone(), p.wait_durable(end).await) })
            .collect();
        let mut failed = Vec::new();
        if waits.is_empty() {
            return failed;
        }
        for (partition, result) in futures::future::join_all(waits).await {
            if let Err(e) = result {
                error!(topic_partition = %partition.topic_partition(), error = %e,
                    "follower fsync failed; no longer fetching the partition");
                self.mark(partition.topic_partition(), None, true);
                failed.push(partition.topic_partition().clone());
            }
        }
        failed
    }
}

/// A follower's Fetch v17 carrying `data`: `ReplicaState` with this
/// broker's id and epoch (KIP-903), the `replica.fetch.*` limits, the
/// session metadata, the partitions to name grouped by topic id (in first
/// appearance order) and the partitions to forget.
fn replica_fetch_request(
    node_id: i32,
    broker_epoch: i64,
    config: &ReplicationConfig,
    data: FetchRequestData,
) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    let mut topic_index: HashMap<Uuid, usize> = HashMap::new();
    for ((topic_id, partition_index), r) in data.to_send {
        let mut partition = FetchPartition::default();
        partition.partition = partition_index;
        partition.current_leader_epoch = r.current_leader_epoch;
        partition.fetch_offset = r.fetch_offset;
        partition.last_fetched_epoch = r.last_fetched_epoch;
        partition.log_start_offset = r.log_start_offset;
        partition.partition_max_bytes = r.partition_max_bytes;
        let index = *topic_index.entry(topic_id).or_insert_with(|| {
            let mut topic = FetchTopic::default();
            topic.topic_id = topic_id;
            topics.push(topic);
            topics.len() - 1
        });
        topics[index].partitions.push(partition);
    }
    let mut forgotten: Vec<ForgottenTopic> = Vec::new();
    for (topic_id, partition_index) in data.to_forget {
        match forgotten.last_mut() {
            Some(topic) if topic.topic_id == topic_id => topic.partitions.push(partition_index),
            _ => {
                let mut topic = ForgottenTopic::default();
                topic.topic_id = topic_id;
                topic.partitions.push(partition_index);
                forgotten.push(topic);
            }
        }
    }
    let mut replica_state = ReplicaState::default();
    replica_state.replica_id = BrokerId(node_id);
    replica_state.replica_epoch = broker_epoch;
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.replica_state = replica_state;
    request.max_wait_ms = config.replica_fetch_wait_max_ms;
    request.min_bytes = config.replica_fetch_min_bytes;
    request.max_bytes = config.replica_fetch_response_max_bytes;
    request.isolation_level = 0;
    request.session_id = data.session_id;
    request.session_epoch = data.epoch;
    request.topics = topics;
    request.forgotten_topics_data = forgotten;
    request
}

/// The top-level errors of a lost fetch session, after which the next
/// Fetch is full at once (Kafka's fetcher does not back off for them).
fn is_session_error(error_code: i16) -> bool {
    error_code == ResponseError::FetchSessionIdNotFound.code()
        || error_code == ResponseError::InvalidFetchSessionEpoch.code()
        || error_code == ResponseError::FetchSessionTopicIdError.code()
}

/// A follower's storage error: logged, and the partition is no longer
/// fetched (as Kafka marks it failed).
fn storage_failure(tp: &TopicPartition, e: weir_storage::StorageError) -> Outcome {
    error!(topic_partition = %tp, error = %e, "follower storage error; no longer fetching the partition");
    Outcome::Fail
}

/// What a partition's failed step asks of its fetcher.
enum Outcome {
    /// Back off `replica.fetch.backoff.ms`.
    Delay,
    /// Stop fetching it (storage error).
    Fail,
    /// The connection broke: reconnect, back off.
    Reconnect,
}

#[cfg(test)]
mod tests {
    use weir_storage::{Log, LogConfig, LogManager};

    use super::*;
    use crate::config::BrokerConfig;
    use crate::partition::tests::batch;

    const TOPIC_ID: Uuid = Uuid::from_u128(0x0f01_10e5);

    fn fetcher(dir: &std::path::Path) -> Fetcher {
        let config = BrokerConfig::default();
        let log_manager =
            LogManager::open(dir.join("logs"), 1, config.default_log_config()).unwrap();
        let replication = config.replication.clone();
        Fetcher {
            replica_manager: Arc::new(ReplicaManager::new(1, config, log_manager)),
            node_id: 1,
            broker_epoch: 5,
            config: replication,
            channel: ClientChannel::plaintext(),
            leader_id: 2,
            client_id: "broker-1-fetcher-0".to_string(),
            address: "127.0.0.1:1".to_string(),
            targets: Arc::new(Mutex::new(TargetSet::default())),
            wake: Arc::new(Notify::new()),
            cancel: CancellationToken::new(),
        }
    }

    /// `count` partitions of one topic, each with its own empty log, as a
    /// fetcher's ready targets.
    fn ready(dir: &std::path::Path, count: i32) -> Vec<(TopicPartition, FetchTarget)> {
        (0..count)
            .map(|i| {
                let tp = TopicPartition::new("followed", i);
                let log = Log::open(
                    dir.join(format!("followed-{i}")),
                    tp.clone(),
                    LogConfig::default(),
                    0,
                    0,
                )
                .unwrap();
                let partition = Arc::new(Partition::new(
                    tp.clone(),
                    TOPIC_ID,
                    Arc::new(Mutex::new(log)),
                    1,
                ));
                let target = FetchTarget {
                    topic_id: TOPIC_ID,
                    leader_epoch: 1,
                    partition,
                    delayed_until: None,
                    failed: false,
                };
                (tp, target)
            })
            .collect()
    }

    /// `(partition, fetch offset)` of every partition a Fetch names.
    fn named(request: &FetchRequest) -> Vec<(i32, i64)> {
        request
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.fetch_offset)))
            .collect()
    }

    fn forgotten(request: &FetchRequest) -> Vec<(Uuid, Vec<i32>)> {
        request
            .forgotten_topics_data
            .iter()
            .map(|t| (t.topic_id, t.partitions.clone()))
            .collect()
    }

    /// One round's Fetch as `run` builds it (without the sync).
    fn round(
        fetcher: &Fetcher,
        states: &mut FetchStates,
        set: &TargetSet,
        session: &mut FetchSessionHandler,
    ) -> FetchRequest {
        let rebuilt = states.refresh(set);
        let plan = states.plan(Instant::now(), rebuilt);
        fetcher.fetch_request(states, &plan, session)
    }

    fn target_set(ready: Vec<(TopicPartition, FetchTarget)>) -> TargetSet {
        TargetSet {
            targets: ready.into_iter().collect(),
            generation: 0,
        }
    }

    /// KIP-227 on the follower: the first Fetch is full `(0, 0)`; once the
    /// leader answers a session, the next names only the partition whose
    /// log end moved and forgets the one no longer fetched, the one after
    /// names nothing, and a lost connection makes the next one full again
    /// (`(id, 0)`, closing the old session).
    #[test]
    fn after_the_full_fetch_a_follower_names_only_changed_partitions() {
        let dir = tempfile::tempdir().unwrap();
        let fetcher = fetcher(dir.path());
        let mut set = target_set(ready(dir.path(), 4));
        let mut states = FetchStates::default();
        let mut session = FetchSessionHandler::default();

        let first = round(&fetcher, &mut states, &set, &mut session);
        assert_eq!((first.session_id, first.session_epoch), (0, 0));
        assert_eq!(named(&first), vec![(0, 0), (1, 0), (2, 0), (3, 0)]);
        assert_eq!(first.replica_state.replica_id.0, 1);
        assert_eq!(first.replica_state.replica_epoch, 5);
        assert!(session.handle_response(0, 9));

        set.targets[&TopicPartition::new("followed", 2)]
            .partition
            .append_records_as_leader(&batch("x"), 0)
            .unwrap();
        set.targets.remove(&TopicPartition::new("followed", 3));
        set.generation += 1;
        let second = round(&fetcher, &mut states, &set, &mut session);
        assert_eq!((second.session_id, second.session_epoch), (9, 1));
        assert_eq!(
            named(&second),
            vec![(2, 1)],
            "only the partition that moved"
        );
        assert_eq!(forgotten(&second), vec![(TOPIC_ID, vec![3])]);
        assert!(session.handle_response(0, 9));

        let third = round(&fetcher, &mut states, &set, &mut session);
        assert_eq!((third.session_id, third.session_epoch), (9, 2));
        assert!(named(&third).is_empty(), "nothing changed");
        assert!(forgotten(&third).is_empty());
        assert!(session.handle_response(0, 9));

        // Partition 1 moves: only it is recomputed and named, without a
        // change to the set.
        set.targets[&TopicPartition::new("followed", 1)]
            .partition
            .append_records_as_leader(&batch("y"), 0)
            .unwrap();
        let rebuilt = states.refresh(&set);
        let plan = states.plan(Instant::now(), rebuilt);
        assert_eq!(
            plan.stale,
            vec![1],
            "only the partition that moved is stale"
        );
        assert!(!plan.set_changed);
        let fourth = fetcher.fetch_request(&mut states, &plan, &mut session);
        assert_eq!(named(&fourth), vec![(1, 1)]);

        session.handle_error();
        let fifth = round(&fetcher, &mut states, &set, &mut session);
        assert_eq!((fifth.session_id, fifth.session_epoch), (9, 0));
        assert_eq!(named(&fifth), vec![(0, 0), (1, 1), (2, 1)]);
    }

    /// A partition that changes while its request is computed (between the
    /// version read and the watch) stays stale: the next round recomputes
    /// it although no watch fired for that change.
    #[test]
    fn a_change_while_a_request_is_computed_is_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        let fetcher = fetcher(dir.path());
        let set = target_set(ready(dir.path(), 2));
        let mut states = FetchStates::default();
        let rebuilt = states.refresh(&set);
        let plan = states.plan(Instant::now(), rebuilt);
        assert_eq!(plan.stale, vec![0, 1], "never computed");
        states.recompute(0, |target| {
            let request = fetcher.partition_request(target);
            target
                .partition
                .append_records_as_leader(&batch("meanwhile"), 0)
                .unwrap();
            request
        });
        states.recompute(1, |target| fetcher.partition_request(target));
        states.retain_dirty();
        assert_eq!(states.entries[0].request.fetch_offset, 0);

        let plan = states.plan(Instant::now(), false);
        assert_eq!(plan.stale, vec![0], "the change during the computation");
        states.recompute(0, |target| fetcher.partition_request(target));
        states.retain_dirty();
        assert_eq!(states.entries[0].request.fetch_offset, 1);
        assert!(states.plan(Instant::now(), false).stale.is_empty());
    }

    /// A delayed partition leaves the Fetch (forgotten) and comes back,
    /// named again, once its delay is over.
    #[test]
    fn a_delayed_partition_is_forgotten_and_named_again_when_due() {
        let dir = tempfile::tempdir().unwrap();
        let fetcher = fetcher(dir.path());
        let mut set = target_set(ready(dir.path(), 2));
        let mut states = FetchStates::default();
        let mut session = FetchSessionHandler::default();
        round(&fetcher, &mut states, &set, &mut session);
        assert!(session.handle_response(0, 9));

        let due = Instant::now() + Duration::from_secs(60);
        set.targets
            .get_mut(&TopicPartition::new("followed", 0))
            .unwrap()
            .delayed_until = Some(due);
        set.generation += 1;
        let delayed = round(&fetcher, &mut states, &set, &mut session);
        assert!(named(&delayed).is_empty());
        assert_eq!(forgotten(&delayed), vec![(TOPIC_ID, vec![0])]);
        assert!(session.handle_response(0, 9));

        let plan = states.plan(due, false);
        assert!(plan.set_changed, "the delay is over");
        let back = fetcher.fetch_request(&mut states, &plan, &mut session);
        assert_eq!(named(&back), vec![(0, 0)]);
        assert!(forgotten(&back).is_empty());
    }
}
