//! The queue workload (Jepsen's Kafka `queue` workload with its safe client
//! settings): idempotent acks=all producers send unique values to the
//! partitions of one RF=3 topic with `min.insync.replicas=2`, consumers
//! assigned every partition read from the earliest offset, and after the
//! faults a drain reads every partition to its end. Everything they learn
//! goes into the [`History`].
//!
//! Producers are written against the protocol (over [`RawClient`]) so that
//! every send's outcome is exact: one record per Produce, one send in flight
//! per producer, retried with the same producer id, epoch and sequence (as
//! the Java producer with `enable.idempotence=true`,
//! `max.in.flight.requests.per.connection=1`) until answered or
//! [`SEND_DEADLINE`]; a producer whose send did not succeed takes a new
//! producer id (as the Java producer bumps its epoch), so a lost sequence
//! never blocks the next sends.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use uuid::Uuid;

use super::churn::{self, ChurnSpec};
use super::client::{self, error_name, Versions};
use super::group;
use super::history::{
    CommitOutcome, Drain, History, Observation, Observed, Poll, ProcessId, Progress, Send,
    SendOutcome, GROUP_PROCESS_BASE,
};
use crate::RawClient;

/// How long one send is retried before its outcome is unknown.
pub const SEND_DEADLINE: Duration = Duration::from_secs(30);
/// The broker-side `timeout_ms` of each Produce, ms.
const PRODUCE_TIMEOUT_MS: i32 = 5_000;
/// How long a client waits for any answer before the connection counts as
/// hung (longer than the produce timeout).
const READ_TIMEOUT: Duration = Duration::from_secs(8);
/// How long a Metadata request for leaders may take before the next node
/// is asked.
const METADATA_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a consumer keeps one assignment before it starts over.
const CONSUMER_RESTART: Duration = Duration::from_secs(8);
/// Pause before retrying after an error (the group members' too).
pub(super) const BACKOFF: Duration = Duration::from_millis(100);
/// Pause between two rounds of the watcher over every node.
const WATCH_INTERVAL: Duration = Duration::from_millis(250);

// Kafka error codes (protocol guide, "Error Codes") the clients act on.
const REQUEST_TIMED_OUT: i16 = 7;
const NETWORK_EXCEPTION: i16 = 13;
const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;
const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;

/// The shape of one queue workload.
#[derive(Debug, Clone)]
pub struct QueueSpec {
    /// The topic, created by [`Queue::setup`].
    pub topic: String,
    /// Its partitions.
    pub partitions: i32,
    /// Producer threads.
    pub producers: u32,
    /// Consumer threads.
    pub consumers: u32,
    /// Member threads of the consumer group workload ([`super::group`]).
    pub group_members: u32,
}

impl Default for QueueSpec {
    /// Three partitions, two producers, two consumers, two group members.
    fn default() -> Self {
        Self {
            topic: "queue".to_owned(),
            partitions: 3,
            producers: 2,
            consumers: 2,
            group_members: 2,
        }
    }
}

/// What every client thread shares (the group members' too).
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) spec: QueueSpec,
    pub(super) topic_id: Uuid,
    pub(super) addresses: Vec<String>,
    pub(super) versions: Versions,
    started: Instant,
    /// Partition -> leader node id (1-based; -1 unknown), as last seen.
    leaders: Mutex<BTreeMap<i32, i32>>,
    /// Where the next leader refresh starts.
    next_metadata_node: AtomicUsize,
    pub(super) stop: AtomicBool,
    pub(super) history: Mutex<History>,
}

impl Shared {
    pub(super) fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub(super) fn leader(&self, partition: i32) -> i32 {
        self.leaders
            .lock()
            .unwrap()
            .get(&partition)
            .copied()
            .unwrap_or(-1)
    }

    /// Asks the nodes in turn (starting with the next one each time) for
    /// the topic's leaders and keeps the first complete answer. A node that
    /// does not answer within [`METADATA_TIMEOUT`] (paused) is skipped.
    pub(super) fn refresh_leaders(&self) {
        let first = self.next_metadata_node.fetch_add(1, Ordering::Relaxed);
        for i in 0..self.addresses.len() {
            let address = &self.addresses[(first + i) % self.addresses.len()];
            let Ok(mut c) = connect_with_timeout(address, METADATA_TIMEOUT) else {
                continue;
            };
            let Ok(Some(state)) = client::topic_state(&mut c, &self.versions, &self.spec.topic)
            else {
                continue;
            };
            if state.partitions.iter().all(|p| p.leader >= 1) {
                let mut leaders = self.leaders.lock().unwrap();
                for p in state.partitions {
                    leaders.insert(p.partition, p.leader);
                }
                return;
            }
        }
    }
}

fn connect(address: &str) -> Result<RawClient, String> {
    connect_with_timeout(address, READ_TIMEOUT)
}

pub(super) fn connect_with_timeout(address: &str, timeout: Duration) -> Result<RawClient, String> {
    let mut client = RawClient::connect(address).map_err(|e| e.to_string())?;
    client.set_client_id(Some("weir-chaos"));
    client
        .set_read_timeout(timeout)
        .map_err(|e| e.to_string())?;
    Ok(client)
}

/// Connections of one client thread, by node id.
#[derive(Debug, Default)]
pub(super) struct Connections(BTreeMap<i32, RawClient>);

impl Connections {
    pub(super) fn get(&mut self, shared: &Shared, node: i32) -> Result<&mut RawClient, String> {
        match self.0.entry(node) {
            std::collections::btree_map::Entry::Occupied(e) => Ok(e.into_mut()),
            std::collections::btree_map::Entry::Vacant(v) => {
                let address = shared
                    .addresses
                    .get((node - 1) as usize)
                    .ok_or_else(|| format!("no node {node}"))?;
                Ok(v.insert(connect(address)?))
            }
        }
    }

    pub(super) fn drop_node(&mut self, node: i32) {
        self.0.remove(&node);
    }
}

/// A running queue workload.
#[derive(Debug)]
pub struct Queue {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Queue {
    /// Creates the topic (RF=3, `min.insync.replicas=2`) through whichever
    /// node takes it, retrying for at most 30 s.
    ///
    /// # Errors
    ///
    /// The last error when the topic is not created in time.
    pub fn setup(
        spec: &QueueSpec,
        addresses: &[String],
        versions: &Versions,
    ) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = String::new();
        for address in addresses.iter().cycle() {
            if Instant::now() >= deadline {
                return Err(format!("creating {}: {last}", spec.topic));
            }
            let answer = connect(address).and_then(|mut c| {
                client::create_topic(
                    &mut c,
                    versions,
                    &spec.topic,
                    spec.partitions,
                    3,
                    &[("min.insync.replicas", "2")],
                )
            });
            match answer {
                // NONE, or TOPIC_ALREADY_EXISTS after an earlier attempt.
                Ok(0) | Ok(36) => return Ok(()),
                Ok(code) => last = error_name(code),
                Err(e) => last = e,
            }
            std::thread::sleep(BACKOFF);
        }
        unreachable!("cycle over a non-empty list")
    }

    /// Starts the producer and consumer threads; their choices follow from
    /// `seed`; event times count from `started`.
    ///
    /// # Errors
    ///
    /// A message when no node describes the topic.
    pub fn start(
        spec: QueueSpec,
        addresses: Vec<String>,
        versions: Versions,
        seed: u64,
        started: Instant,
    ) -> Result<Self, String> {
        let mut topic_id = None;
        for address in &addresses {
            if let Ok(Some(state)) = connect(address)
                .and_then(|mut c| client::topic_state(&mut c, &versions, &spec.topic))
            {
                topic_id = Some(state.id);
                break;
            }
        }
        let topic_id = topic_id.ok_or_else(|| format!("no node describes {}", spec.topic))?;
        let shared = Arc::new(Shared {
            history: Mutex::new(History {
                partitions: spec.partitions,
                producers: spec.producers,
                consumers: spec.consumers,
                group_members: spec.group_members,
                ..History::default()
            }),
            spec,
            topic_id,
            addresses,
            versions,
            started,
            leaders: Mutex::new(BTreeMap::new()),
            next_metadata_node: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        shared.refresh_leaders();
        let mut threads = Vec::new();
        for p in 0..shared.spec.producers {
            let shared = shared.clone();
            threads.push(std::thread::spawn(move || {
                produce_loop(&shared, p + 1, seed)
            }));
        }
        for c in 0..shared.spec.consumers {
            let shared = shared.clone();
            threads.push(std::thread::spawn(move || consume_loop(&shared, 1_001 + c)));
        }
        for m in 0..shared.spec.group_members {
            let shared = shared.clone();
            threads.push(std::thread::spawn(move || {
                group::member_loop(&shared, m + 1, seed)
            }));
        }
        let watcher = shared.clone();
        threads.push(std::thread::spawn(move || watch_loop(&watcher)));
        let churn_spec = ChurnSpec {
            addresses: shared.addresses.clone(),
            versions,
            queue_topic: shared.spec.topic.clone(),
            queue_partitions: shared.spec.partitions,
        };
        let churner = shared.clone();
        threads.push(std::thread::spawn(move || {
            churn::churn_loop(
                &churn_spec,
                seed,
                started,
                &|| churner.stop.load(Ordering::SeqCst),
                &|op| churner.history.lock().unwrap().churn.push(op),
            )
        }));
        Ok(Self { shared, threads })
    }

    /// Milliseconds since the run started.
    pub fn now_ms(&self) -> u64 {
        self.shared.now_ms()
    }

    /// Keeps the clients running until every producer had a send
    /// acknowledged and every consumer thread read a record after
    /// `healthy_at_ms` (ms since the run started), or `bound` passes; then
    /// records the [`Progress`] for the checker's `stuck-producer` and
    /// `stuck-consumer`.
    pub fn wait_for_progress(&self, healthy_at_ms: u64, bound: Duration) {
        let deadline = Instant::now() + bound;
        loop {
            let done = {
                let history = self.shared.history.lock().unwrap();
                stuck_producers(&history, healthy_at_ms).is_empty()
                    && stuck_consumers(&history, healthy_at_ms).is_empty()
                    && !stuck_group(&history, healthy_at_ms)
            };
            if done || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(BACKOFF);
        }
        let stopped_at_ms = self.shared.now_ms();
        self.shared.history.lock().unwrap().progress = Some(Progress {
            healthy_at_ms,
            stopped_at_ms,
        });
    }

    /// Stops the clients (a producer finishes its send in flight, within
    /// [`SEND_DEADLINE`]), drains every partition, reads the group's
    /// committed offsets once more and returns the history with the drain
    /// and that read (when it was answered within the drain bound).
    pub fn finish(self) -> History {
        self.shared.stop.store(true, Ordering::SeqCst);
        for thread in self.threads {
            let _ = thread.join();
        }
        let drain = drain(&self.shared);
        let committed = if self.shared.spec.group_members > 0 {
            group::final_read(
                &self.shared,
                Duration::from_millis(super::checker::DRAIN_BOUND_MS),
            )
        } else {
            None
        };
        let mut history = std::mem::take(&mut *self.shared.history.lock().unwrap());
        history.drain = Some(drain);
        history.committed_reads.extend(committed);
        history
    }
}

/// One producer: unique values `<process>-<n>` to partitions drawn from the
/// seed, until told to stop.
fn produce_loop(shared: &Shared, process: ProcessId, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(100 + u64::from(process));
    let mut connections = Connections::default();
    let mut producer: Option<(i64, i16)> = None;
    let mut sequences: BTreeMap<i32, i32> = BTreeMap::new();
    let mut n = 0u64;
    let mut next_node = 0usize;
    while !shared.stop.load(Ordering::SeqCst) {
        let (producer_id, epoch) = match producer {
            Some(p) => p,
            None => {
                next_node += 1;
                let address = &shared.addresses[next_node % shared.addresses.len()];
                match connect(address)
                    .and_then(|mut c| client::init_producer_id(&mut c, &shared.versions))
                {
                    Ok(p) => {
                        producer = Some(p);
                        sequences.clear();
                        p
                    }
                    Err(_) => {
                        std::thread::sleep(BACKOFF);
                        continue;
                    }
                }
            }
        };
        let partition = rng.gen_range(0..shared.spec.partitions);
        let value = format!("{process}-{n}");
        n += 1;
        let at_ms = shared.now_ms();
        let sequence = sequences.get(&partition).copied().unwrap_or(0);
        let batch = client::idempotent_batch(producer_id, epoch, sequence, &value);
        let outcome = send(shared, &mut connections, partition, batch);
        let done_ms = shared.now_ms();
        if matches!(outcome, SendOutcome::Ack { .. }) {
            sequences.insert(partition, sequence + 1);
        } else {
            producer = None;
        }
        shared.history.lock().unwrap().sends.push(Send {
            at_ms,
            done_ms,
            process,
            value,
            partition,
            outcome,
        });
    }
}

/// Sends `batch` to `partition`'s leader until acknowledged, definitely
/// refused, or [`SEND_DEADLINE`] passes.
fn send(
    shared: &Shared,
    connections: &mut Connections,
    partition: i32,
    batch: bytes::Bytes,
) -> SendOutcome {
    let deadline = Instant::now() + SEND_DEADLINE;
    // True once an attempt may have been appended.
    let mut ambiguous = false;
    let mut last = String::from("no attempt");
    let give_up = |ambiguous: bool, error: String| {
        if ambiguous {
            SendOutcome::Unknown { error }
        } else {
            SendOutcome::Fail { error }
        }
    };
    while Instant::now() < deadline {
        let leader = shared.leader(partition);
        if leader < 1 {
            last = "no leader".to_owned();
            shared.refresh_leaders();
            std::thread::sleep(BACKOFF);
            continue;
        }
        let answer = connections.get(shared, leader).and_then(|c| {
            client::produce(
                c,
                &shared.versions,
                &shared.spec.topic,
                shared.topic_id,
                partition,
                batch.clone(),
                PRODUCE_TIMEOUT_MS,
            )
            .inspect_err(|_| ambiguous = true)
        });
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                last = e;
                connections.drop_node(leader);
                shared.refresh_leaders();
                std::thread::sleep(BACKOFF);
                continue;
            }
        };
        match answer.error {
            0 => {
                return SendOutcome::Ack {
                    offset: answer.base_offset,
                    node: leader,
                }
            }
            // Written once already; its offset is not in this answer.
            DUPLICATE_SEQUENCE_NUMBER => {
                return SendOutcome::Unknown {
                    error: error_name(answer.error),
                }
            }
            code => {
                last = error_name(code);
                let retriable = kafka_protocol::ResponseError::try_from_code(code)
                    .is_some_and(|e| e.is_retriable());
                if matches!(
                    code,
                    REQUEST_TIMED_OUT | NETWORK_EXCEPTION | NOT_ENOUGH_REPLICAS_AFTER_APPEND
                ) {
                    ambiguous = true;
                }
                if !retriable {
                    return give_up(ambiguous, last);
                }
                shared.refresh_leaders();
                std::thread::sleep(BACKOFF);
            }
        }
    }
    give_up(
        ambiguous,
        format!("gave up after {SEND_DEADLINE:?}: {last}"),
    )
}

/// One consumer assigned every partition from offset 0, polling each in
/// turn until told to stop. Every [`CONSUMER_RESTART`] it starts over from
/// offset 0 as a new process (id + 100), as Jepsen's consumers crash and
/// reassign.
fn consume_loop(shared: &Shared, first_process: ProcessId) {
    let mut connections = Connections::default();
    let mut process = first_process;
    let mut assigned = Instant::now();
    let mut positions: BTreeMap<i32, i64> = BTreeMap::new();
    while !shared.stop.load(Ordering::SeqCst) {
        if positions.is_empty() || assigned.elapsed() >= CONSUMER_RESTART {
            if !positions.is_empty() {
                process += 100;
            }
            assigned = Instant::now();
            positions = (0..shared.spec.partitions).map(|p| (p, 0)).collect();
        }
        for (&partition, position) in positions.iter_mut() {
            poll(shared, &mut connections, process, partition, position);
        }
    }
}

/// One Fetch of `partition` from `position` at its leader as `process`;
/// records a non-empty answer as a [`Poll`] and moves `position` past
/// it. Every error, OFFSET_OUT_OF_RANGE included, is retried later at the
/// same position (a new leader's log end may still be behind it); the
/// checker sees a skip or a loss if it lasts.
pub(super) fn poll(
    shared: &Shared,
    connections: &mut Connections,
    process: ProcessId,
    partition: i32,
    position: &mut i64,
) {
    let leader = shared.leader(partition);
    if leader < 1 {
        shared.refresh_leaders();
        std::thread::sleep(BACKOFF);
        return;
    }
    let answer = connections.get(shared, leader).and_then(|c| {
        client::fetch(
            c,
            &shared.versions,
            &shared.spec.topic,
            shared.topic_id,
            partition,
            *position,
            100,
        )
    });
    match answer {
        Ok(a) if a.error == 0 => {
            if let Some(&(last, _)) = a.records.last() {
                *position = last + 1;
                shared.history.lock().unwrap().polls.push(Poll {
                    at_ms: shared.now_ms(),
                    process,
                    partition,
                    records: a.records,
                });
            }
        }
        Ok(_) => {
            shared.refresh_leaders();
            std::thread::sleep(BACKOFF);
        }
        Err(_) => {
            connections.drop_node(leader);
            shared.refresh_leaders();
            std::thread::sleep(BACKOFF);
        }
    }
}

/// Producers (1..=producers) without an acknowledged send learnt at or
/// after `since_ms`.
pub fn stuck_producers(history: &History, since_ms: u64) -> Vec<ProcessId> {
    (1..=history.producers)
        .filter(|p| {
            !history.sends.iter().any(|s| {
                s.process == *p
                    && s.done_ms >= since_ms
                    && matches!(s.outcome, SendOutcome::Ack { .. })
            })
        })
        .collect()
}

/// Consumer threads (1..=consumers; a poll's thread is its process id
/// modulo 100) without a poll at or after `since_ms`.
pub fn stuck_consumers(history: &History, since_ms: u64) -> Vec<u32> {
    (1..=history.consumers)
        .filter(|t| {
            !history.polls.iter().any(|p| {
                p.process < GROUP_PROCESS_BASE && p.process % 100 == *t && p.at_ms >= since_ms
            })
        })
        .collect()
}

/// True when the history has group members and none of their commits
/// learnt at or after `since_ms` was acknowledged.
pub fn stuck_group(history: &History, since_ms: u64) -> bool {
    history.group_members > 0
        && !history
            .commits
            .iter()
            .any(|c| c.done_ms >= since_ms && c.outcome == CommitOutcome::Ok)
}

/// The watcher: every [`WATCH_INTERVAL`] asks each node in turn for the
/// topic's Metadata (leader and leader epoch per partition), for the high
/// watermark of every partition it says it leads (ListOffsets `LATEST`,
/// answered with its leader epoch) and for the metadata quorum's leader and
/// epoch (DescribeQuorum), and records every answer as an [`Observation`]
/// for the checker's regression and split-brain checks. A node that does
/// not answer within [`METADATA_TIMEOUT`] is skipped for the round.
fn watch_loop(shared: &Shared) {
    let mut connections: BTreeMap<i32, RawClient> = BTreeMap::new();
    while !shared.stop.load(Ordering::SeqCst) {
        for (i, address) in shared.addresses.iter().enumerate() {
            let node = i as i32 + 1;
            let client = match connections.entry(node) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => {
                    match connect_with_timeout(address, METADATA_TIMEOUT) {
                        Ok(c) => v.insert(c),
                        Err(_) => continue,
                    }
                }
            };
            if watch_node(shared, client, node).is_err() {
                connections.remove(&node);
            }
        }
        std::thread::sleep(WATCH_INTERVAL);
    }
}

/// One watcher round on `node`; `Err` when a request failed (the
/// connection is then dropped).
fn watch_node(shared: &Shared, client: &mut RawClient, node: i32) -> Result<(), String> {
    let mut observed = Vec::new();
    let sent_ms = shared.now_ms();
    let state = client::topic_state(client, &shared.versions, &shared.spec.topic)?;
    let received_ms = shared.now_ms();
    let led: Vec<i32> = state
        .iter()
        .flat_map(|s| &s.partitions)
        .filter(|p| p.error == 0)
        .inspect(|p| {
            observed.push(Observation {
                sent_ms,
                received_ms,
                node,
                observed: Observed::Leader {
                    partition: p.partition,
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                },
            });
        })
        .filter(|p| p.leader == node)
        .map(|p| p.partition)
        .collect();
    let result = (|| {
        for partition in led {
            let sent_ms = shared.now_ms();
            let answer =
                client::high_watermark(client, &shared.versions, &shared.spec.topic, partition)?;
            if let Ok((offset, leader_epoch)) = answer {
                observed.push(Observation {
                    sent_ms,
                    received_ms: shared.now_ms(),
                    node,
                    observed: Observed::HighWatermark {
                        partition,
                        offset,
                        leader_epoch,
                    },
                });
            }
        }
        let sent_ms = shared.now_ms();
        let (leader, epoch) = client::quorum_state(client, &shared.versions)?;
        observed.push(Observation {
            sent_ms,
            received_ms: shared.now_ms(),
            node,
            observed: Observed::Quorum { leader, epoch },
        });
        Ok(())
    })();
    shared.history.lock().unwrap().observations.extend(observed);
    result
}

/// Reads every partition from offset 0 to the high watermark its leader
/// reports when the drain reaches it, within the checker's drain bound.
fn drain(shared: &Shared) -> Drain {
    let start = Instant::now();
    let deadline = start + Duration::from_millis(super::checker::DRAIN_BOUND_MS);
    let mut connections = Connections::default();
    let mut records = BTreeMap::new();
    let mut incomplete = BTreeMap::new();
    for partition in 0..shared.spec.partitions {
        let mut read: Vec<(i64, String)> = Vec::new();
        let mut end: Option<i64> = None;
        let mut last = String::from("no attempt");
        loop {
            let position = read.last().map_or(0, |(o, _)| o + 1);
            if end.is_some_and(|end| position >= end) {
                break;
            }
            if Instant::now() >= deadline {
                incomplete.insert(
                    partition,
                    format!("at offset {position} of {end:?}: {last}"),
                );
                break;
            }
            let leader = shared.leader(partition);
            let result = connections.get(shared, leader).and_then(|c| match end {
                None => {
                    match client::latest_offset(c, &shared.versions, &shared.spec.topic, partition)?
                    {
                        Ok(offset) => {
                            end = Some(offset);
                            Ok(())
                        }
                        Err(code) => Err(format!("ListOffsets: {}", error_name(code))),
                    }
                }
                Some(_) => {
                    let a = client::fetch(
                        c,
                        &shared.versions,
                        &shared.spec.topic,
                        shared.topic_id,
                        partition,
                        position,
                        100,
                    )?;
                    if a.error != 0 {
                        return Err(format!("Fetch: {}", error_name(a.error)));
                    }
                    read.extend(a.records);
                    Ok(())
                }
            });
            if let Err(e) = result {
                last = e;
                connections.drop_node(leader);
                shared.refresh_leaders();
                std::thread::sleep(BACKOFF);
            }
        }
        records.insert(partition, read);
    }
    Drain {
        elapsed_ms: start.elapsed().as_millis() as u64,
        records,
        incomplete,
    }
}
