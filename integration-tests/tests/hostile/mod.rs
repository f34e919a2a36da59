//! Issue 15: hostile clients. Each test replays one hostile input over the
//! network and asserts its expected answer (Kafka's error code, or a close
//! that the broker logs), that the broker stays up, and that a well-behaved
//! client on the same broker (a [`Bystander`]: one acks=all Produce at a
//! time on its own connection) is still answered throughout. Tests that
//! restart the broker also check that the data written before is intact.
//!
//! The bystander's bound: every one of its requests must be answered within
//! [`BYSTANDER_BOUND`] (the raw client's read timeout; a stalled broker
//! fails the test). Its worst latency and the broker's RSS are printed
//! (`--nocapture`) for the figures; they are not asserted beyond
//! that bound, as speed is measured by benchmarks, not tests.
//!
//! Submodules by area: `fds` (descriptors, start and shutdown with many
//! partitions), `memory` (request and response bytes, connections,
//! `fetch.max.bytes`, duplicates in lists), `validation` (decompression
//! bombs, timestamps, a topic deleted under a producer), `config`
//! (configuration bounds, case C13), `cluster` (a 3-node cluster: the
//! CONTROLLER listener and Fetches forged as a replica's).

mod cluster;
mod config;
mod fds;
mod memory;
mod validation;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, ProduceRequest};
use weir_integration_tests::records;
use weir_integration_tests::TestBroker;

use crate::support;

/// Longest a bystander request may wait for its answer before the test
/// fails: a stalled broker shows up as a failure, not a slow pass.
pub const BYSTANDER_BOUND: Duration = Duration::from_secs(10);

/// What a [`Bystander`] saw while it ran.
#[derive(Debug, Clone)]
pub struct BystanderReport {
    /// Requests answered with error code NONE.
    pub answered: u64,
    /// Worst time from send to answer.
    pub worst: Duration,
    /// The first failure (error code, transport error or timeout), if any.
    pub failure: Option<String>,
}

/// A well-behaved client on its own connection: one acks=all Produce of
/// one small record at a time to its own topic, in a loop, until stopped.
pub struct Bystander {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<BystanderReport>>,
}

impl Bystander {
    /// Creates topic `topic` (1 partition) and starts producing to it.
    /// Returns once the first produce has been answered, so the bystander
    /// is known to work before the hostile input is sent.
    #[track_caller]
    pub fn start(broker: &TestBroker, topic: &str) -> Self {
        let mut client = support::connect(broker);
        client
            .set_read_timeout(BYSTANDER_BOUND)
            .expect("setting the bystander's read timeout");
        let versions = support::api_versions(&mut client);
        let version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
        let info = support::ensure_topic(&mut client, &versions, topic);
        support::produce_ok(
            &mut client,
            version,
            &info,
            0,
            records::plain_batch(&["first"], 1),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut report = BystanderReport {
                answered: 0,
                worst: Duration::ZERO,
                failure: None,
            };
            while !stopping.load(Ordering::Relaxed) {
                let started = Instant::now();
                let request = weir_integration_tests::requests::produce_request(
                    &info.name,
                    0,
                    -1,
                    records::plain_batch(&["bystander"], 1),
                );
                match client.send(&request, version) {
                    Ok(response) => {
                        let code = response.responses[0].partition_responses[0].error_code;
                        if code != 0 {
                            report.failure = Some(format!("error code {code}"));
                            break;
                        }
                        report.answered += 1;
                        report.worst = report.worst.max(started.elapsed());
                    }
                    Err(e) => {
                        report.failure = Some(format!("after {:?}: {e}", started.elapsed()));
                        break;
                    }
                }
                // Pacing, not synchronisation: about 50 requests a second.
                std::thread::sleep(Duration::from_millis(20));
            }
            report
        });
        Bystander {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops the bystander and returns what it saw; fails the test if any
    /// of its requests failed or went unanswered within [`BYSTANDER_BOUND`].
    #[track_caller]
    pub fn finish(mut self, what: &str) -> BystanderReport {
        self.stop.store(true, Ordering::Relaxed);
        let report = self
            .handle
            .take()
            .expect("bystander running")
            .join()
            .expect("bystander thread");
        println!(
            "{what}: bystander answered {} requests, worst {:?}",
            report.answered, report.worst
        );
        assert!(
            report.failure.is_none(),
            "{what}: the bystander was not served: {:?}",
            report.failure
        );
        report
    }
}

impl Drop for Bystander {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Resident and peak resident memory of process `pid`, bytes
/// (`VmRSS`, `VmHWM` in `/proc/<pid>/status`).
pub fn rss_bytes(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Open file descriptors of process `pid` (entries of `/proc/<pid>/fd`).
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count())
}

/// Prints the broker's current and peak RSS after `what`, and returns the
/// current one.
pub fn report_rss(broker: &TestBroker, what: &str) -> u64 {
    let pid = broker.pid().expect("broker running");
    let (rss, hwm) = rss_bytes(pid);
    println!(
        "{what}: broker RSS {} MiB, peak {} MiB",
        rss >> 20,
        hwm >> 20
    );
    rss
}
