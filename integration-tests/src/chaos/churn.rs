//! The metadata churn workload (issue 17 scope 3): one thread that, while
//! the queue workload runs and the nemesis injects faults, creates topics
//! (RF=3, one partition), deletes some, adds partitions to some and asks
//! for preferred leader elections of the queue's topic (moving its
//! leaders), recording every outcome as a [`ChurnOp`]. After the clients
//! stop, [`final_metadata`] reads every node's topics; the checker then
//! holds the metadata to what was acknowledged (`lost-topic`,
//! `resurrected-topic`, `lost-partitions`, `failed-op-applied`,
//! `metadata-divergence`).
//!
//! Operations go to the nodes in turn (any node forwards them to the
//! active controller); each is sent once, never retried, so an
//! acknowledgement is exact. The choice of operation and its pause follow
//! from the run's seed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::client::{self, error_name, Versions};
use super::history::{Churn, ChurnOp, ChurnOutcome, FinalMetadata};
use crate::RawClient;

/// The prefix of every topic the churn creates.
pub const PREFIX: &str = "churn-";
/// How long one operation may take before its outcome is unknown.
const READ_TIMEOUT: Duration = Duration::from_secs(12);
/// At most this many churn topics exist (as far as the churn knows).
const MAX_TOPICS: usize = 6;

// Kafka error codes after which an operation may still have happened.
const REQUEST_TIMED_OUT: i16 = 7;
const NOT_CONTROLLER: i16 = 41;
const UNKNOWN_SERVER_ERROR: i16 = -1;

/// What the churn thread needs.
#[derive(Debug, Clone)]
pub struct ChurnSpec {
    /// Every node's `host:port`, node 1 first.
    pub addresses: Vec<String>,
    /// The API versions of the run.
    pub versions: Versions,
    /// The queue workload's topic (its leaders are re-elected).
    pub queue_topic: String,
    /// Its partition count.
    pub queue_partitions: i32,
}

/// The state the churn thread keeps between operations.
#[derive(Debug, Default)]
pub struct Churner {
    next_topic: u32,
    next_node: usize,
    /// Topics created (acknowledged or not) and not yet sent a delete, with
    /// the partition count last asked for.
    live: BTreeMap<String, i32>,
}

impl Churner {
    /// One operation drawn from `rng`, sent to the next node; returns what
    /// it did and learnt (times from `started`).
    pub fn step(&mut self, spec: &ChurnSpec, rng: &mut ChaCha8Rng, started: Instant) -> ChurnOp {
        let draw = rng.gen_range(0..100);
        let pick = |rng: &mut ChaCha8Rng, live: &BTreeMap<String, i32>| {
            let i = rng.gen_range(0..live.len());
            live.iter().nth(i).map(|(t, c)| (t.clone(), *c))
        };
        let op = if self.live.is_empty() || (draw < 40 && self.live.len() < MAX_TOPICS) {
            self.next_topic += 1;
            Churn::Create {
                topic: format!("{PREFIX}{}", self.next_topic),
            }
        } else if draw < 65 {
            let (topic, _) = pick(rng, &self.live).expect("non-empty");
            Churn::Delete { topic }
        } else if draw < 85 {
            let (topic, count) = pick(rng, &self.live).expect("non-empty");
            Churn::AddPartitions {
                topic,
                count: count + 1,
            }
        } else {
            Churn::ElectLeaders {
                topic: spec.queue_topic.clone(),
            }
        };
        match &op {
            Churn::Create { topic } => {
                self.live.insert(topic.clone(), 1);
            }
            Churn::Delete { topic } => {
                self.live.remove(topic);
            }
            Churn::AddPartitions { topic, count } => {
                self.live.insert(topic.clone(), *count);
            }
            Churn::ElectLeaders { .. } => {}
        }
        let address = &spec.addresses[self.next_node % spec.addresses.len()];
        self.next_node += 1;
        let at_ms = started.elapsed().as_millis() as u64;
        let answer = RawClient::connect(address)
            .map_err(|e| e.to_string())
            .and_then(|mut c| {
                c.set_read_timeout(READ_TIMEOUT)
                    .map_err(|e| e.to_string())?;
                send(&mut c, spec, &op)
            });
        let outcome = match answer {
            Ok(0) => ChurnOutcome::Ok,
            Ok(code @ (REQUEST_TIMED_OUT | NOT_CONTROLLER | UNKNOWN_SERVER_ERROR)) => {
                ChurnOutcome::Unknown(error_name(code))
            }
            Ok(code) => ChurnOutcome::Fail(error_name(code)),
            Err(e) => ChurnOutcome::Unknown(e),
        };
        ChurnOp {
            at_ms,
            done_ms: started.elapsed().as_millis() as u64,
            op,
            outcome,
        }
    }
}

fn send(client: &mut RawClient, spec: &ChurnSpec, op: &Churn) -> Result<i16, String> {
    let versions = &spec.versions;
    match op {
        Churn::Create { topic } => client::create_topic(client, versions, topic, 1, 3, &[]),
        Churn::Delete { topic } => client::delete_topic(client, versions, topic),
        Churn::AddPartitions { topic, count } => {
            client::create_partitions(client, versions, topic, *count)
        }
        Churn::ElectLeaders { topic } => client::elect_preferred_leaders(
            client,
            versions,
            topic,
            (0..spec.queue_partitions).collect(),
        ),
    }
}

/// The churn thread's loop: one operation every 300-800 ms (drawn from
/// `seed`) until `stop` says so; every operation goes to `record`.
pub fn churn_loop(
    spec: &ChurnSpec,
    seed: u64,
    started: Instant,
    stop: &dyn Fn() -> bool,
    record: &dyn Fn(ChurnOp),
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(3);
    let mut churner = Churner::default();
    while !stop() {
        record(churner.step(spec, &mut rng, started));
        std::thread::sleep(Duration::from_millis(rng.gen_range(300..800)));
    }
}

/// Every node's churn topics (name -> partition count), read until all
/// nodes answer the same or `bound` passes; the last reads are returned.
pub fn final_metadata(addresses: &[String], versions: &Versions, bound: Duration) -> FinalMetadata {
    let deadline = Instant::now() + bound;
    loop {
        let mut nodes = BTreeMap::new();
        for (i, address) in addresses.iter().enumerate() {
            let read = RawClient::connect(address)
                .map_err(|e| e.to_string())
                .and_then(|mut c| {
                    c.set_read_timeout(Duration::from_secs(5))
                        .map_err(|e| e.to_string())?;
                    client::all_topics(&mut c, versions)
                })
                .map(|topics| {
                    topics
                        .into_iter()
                        .filter(|(name, _)| name.starts_with(PREFIX))
                        .collect()
                });
            nodes.insert(i as i32 + 1, read);
        }
        let metadata = FinalMetadata { nodes };
        if agreed(&metadata) || Instant::now() >= deadline {
            return metadata;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// True when every node answered and all answers are equal.
pub fn agreed(metadata: &FinalMetadata) -> bool {
    let mut answers = metadata.nodes.values();
    match answers.next() {
        Some(Ok(first)) => answers.all(|a| a.as_ref() == Ok(first)),
        _ => false,
    }
}
