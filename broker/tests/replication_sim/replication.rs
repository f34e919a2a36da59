//! Follower fetching: the leader's side of a follower Fetch
//! (`handlers/fetch.rs`) and the follower's side (`replication/fetcher.rs`),
//! one Fetch in flight per follower and leader epoch, responses lost or
//! delivered late.

use std::sync::Arc;

use bytes::Bytes;
use weir_broker::partition::Partition;
use weir_broker::replication::leader::FollowerFetch;
use weir_broker::replication::truncation::truncation_for_diverging_epoch;
use weir_storage::StorageError;

use crate::{logs, Sim, TOPIC};

/// OFFSET_OUT_OF_RANGE.
const OFFSET_OUT_OF_RANGE: i16 = 1;
/// NOT_LEADER_OR_FOLLOWER.
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
/// KAFKA_STORAGE_ERROR.
const KAFKA_STORAGE_ERROR: i16 = 56;

/// What a follower's Fetch carries (`FetchRequest` v17 with
/// `ReplicaState`, one partition).
#[derive(Debug)]
struct FetchRequest {
    replica_id: i32,
    broker_epoch: i64,
    current_leader_epoch: i32,
    fetch_offset: i64,
    last_fetched_epoch: i32,
    log_start_offset: i64,
    max_bytes: usize,
}

/// A follower's Fetch as the leader answered it.
#[derive(Debug, Clone)]
pub enum Response {
    Error(i16),
    Diverging {
        epoch: i32,
        end_offset: i64,
    },
    Records {
        records: Option<Bytes>,
        high_watermark: i64,
        log_start_offset: i64,
    },
}

/// A Fetch response not delivered yet.
pub struct InFlightFetch {
    pub follower: i32,
    incarnation: u32,
    leader: i32,
    /// The leader epoch the follower fetched in (its fetcher's target).
    epoch: i32,
    response: Response,
}

impl Sim {
    /// Follower `f` fetches from the leader of the image it applied;
    /// `fate` 0 loses the response, 1-2 delay it, others deliver it at
    /// once.
    pub fn fetch(&mut self, f: i32, fate: u64) -> Result<(), String> {
        let b = self.broker(f);
        let incarnation = b.incarnation;
        let broker_epoch = b.epoch;
        let (Some(r), Some(follower)) = (b.running(), b.partition()) else {
            return Ok(());
        };
        if follower.is_leader() {
            return Ok(());
        }
        let Some(registration) = r.image.topic(TOPIC).and_then(|t| t.partitions.get(&0)) else {
            return Ok(());
        };
        let l = registration.leader;
        // The fetcher manager fetches only from a live, unfenced leader.
        if l < 0 || l == f || r.image.brokers.get(&l).is_none_or(|b| b.fenced) {
            return Ok(());
        }
        let epoch = follower.leader_epoch();
        if r.fetch_failed_in_epoch == Some(epoch)
            || self
                .fetches
                .iter()
                .any(|x| x.follower == f && x.incarnation == incarnation && x.epoch == epoch)
        {
            return Ok(());
        }
        if !self.sync_follower(f)? {
            return Ok(());
        }
        let request = FetchRequest {
            replica_id: f,
            broker_epoch,
            current_leader_epoch: epoch,
            fetch_offset: follower.log_end_offset(),
            last_fetched_epoch: follower.latest_epoch().unwrap_or(-1),
            log_start_offset: follower.log_start_offset(),
            max_bytes: 1 + self.rng.below(1200) as usize,
        };
        let Some(leader) = self.broker(l).partition() else {
            self.log(format!("{f} cannot reach {l}"));
            return Ok(());
        };
        let response = self.answer_fetch(l, &leader, &request)?;
        let what = match fate {
            0 => "lost",
            1 | 2 => "delayed",
            _ => "delivered",
        };
        self.log(format!(
            "{f} fetches from {l}: {request:?} -> {} {what}",
            describe(&response)
        ));
        let in_flight = InFlightFetch {
            follower: f,
            incarnation,
            leader: l,
            epoch,
            response,
        };
        match fate {
            0 => Ok(()),
            1 | 2 => {
                self.fetches.push(in_flight);
                Ok(())
            }
            _ => self.deliver(in_flight),
        }
    }

    /// The leader's side of a follower Fetch (`handlers/fetch.rs`
    /// `read_one` with a follower).
    fn answer_fetch(
        &mut self,
        l: i32,
        leader: &Partition,
        request: &FetchRequest,
    ) -> Result<Response, String> {
        if !leader.is_leader() {
            return Ok(Response::Error(NOT_LEADER_OR_FOLLOWER));
        }
        if let Err(code) = leader.check_leader_epoch(request.current_leader_epoch) {
            return Ok(Response::Error(code));
        }
        if request.last_fetched_epoch >= 0 {
            let (epoch, end_offset) = leader.end_offset_for_epoch(request.last_fetched_epoch);
            if epoch < 0 || end_offset < 0 || request.fetch_offset < leader.log_start_offset() {
                return Ok(Response::Error(OFFSET_OUT_OF_RANGE));
            }
            if epoch < request.last_fetched_epoch || end_offset < request.fetch_offset {
                return Ok(Response::Diverging { epoch, end_offset });
            }
        }
        let fetch = FollowerFetch {
            replica_id: request.replica_id,
            broker_epoch: request.broker_epoch,
            fetch_offset: request.fetch_offset,
            log_start_offset: request.log_start_offset,
            leader_end_offset: leader.log_end_offset(),
            now_ms: self.now_ms,
        };
        match leader.record_follower_fetch(&fetch) {
            Ok(Some(proposal)) => {
                self.log(format!(
                    "{l} proposes expanding the ISR to {:?}",
                    proposal.new_isr
                ));
                if let Some(r) = self.broker(l).running() {
                    r.replica_manager.submit_isr_change(proposal);
                }
            }
            Ok(None) => {}
            Err(_) => return Ok(Response::Error(NOT_LEADER_OR_FOLLOWER)),
        }
        let high_watermark = leader.high_watermark();
        let log_start_offset = leader.log_start_offset();
        match leader.read_to_log_end(request.fetch_offset, request.max_bytes, true) {
            Ok(info) => {
                let records = match info.records {
                    Some(slice) => Some(
                        slice
                            .read_to_bytes()
                            .map_err(|e| format!("leader read: {e}"))?,
                    ),
                    None => None,
                };
                Ok(Response::Records {
                    records,
                    high_watermark,
                    log_start_offset,
                })
            }
            Err(StorageError::OffsetOutOfRange { .. }) => Ok(Response::Error(OFFSET_OUT_OF_RANGE)),
            Err(e) => {
                self.log(format!("{l}: fetch read failed: {e}"));
                Ok(Response::Error(KAFKA_STORAGE_ERROR))
            }
        }
    }

    /// A delayed Fetch response arrives.
    pub fn deliver_delayed_fetch(&mut self) -> Result<(), String> {
        if self.fetches.is_empty() {
            return Ok(());
        }
        let i = self.rng.below(self.fetches.len() as u64) as usize;
        let in_flight = self.fetches.remove(i);
        self.log(format!(
            "delayed response to {} (epoch {}): {}",
            in_flight.follower,
            in_flight.epoch,
            describe(&in_flight.response)
        ));
        self.deliver(in_flight)
    }

    /// The follower's side (`replication/fetcher.rs` `process_partition`).
    fn deliver(&mut self, in_flight: InFlightFetch) -> Result<(), String> {
        let InFlightFetch {
            follower: f,
            incarnation,
            leader: l,
            epoch,
            response,
        } = in_flight;
        let b = self.broker(f);
        if b.incarnation != incarnation {
            return Ok(());
        }
        let Some(follower) = b.partition() else {
            return Ok(());
        };
        match response {
            Response::Error(OFFSET_OUT_OF_RANGE) => {
                // ListOffsets to the same leader in the same epoch (latest:
                // the log end offset for a follower; earliest).
                let Some(leader) = self
                    .broker(l)
                    .partition()
                    .filter(|p| p.is_leader() && p.leader_epoch() == epoch)
                else {
                    return Ok(());
                };
                let (leader_end, leader_start) =
                    (leader.log_end_offset(), leader.log_start_offset());
                let local_end = follower.log_end_offset();
                if leader_end < local_end {
                    self.truncate(f, &follower, leader_end, false, epoch)?;
                } else if leader_start > local_end {
                    self.truncate(f, &follower, leader_start, true, epoch)?;
                }
                Ok(())
            }
            Response::Error(_) => Ok(()),
            Response::Diverging {
                epoch: diverging,
                end_offset,
            } => {
                let end = follower.log_end_offset();
                let local = match follower.end_offset_for_epoch(diverging) {
                    (-1, _) | (_, -1) => None,
                    found => Some(found),
                };
                let truncation =
                    truncation_for_diverging_epoch(diverging, end_offset, local, end, end);
                self.truncate(f, &follower, truncation.offset, false, epoch)
            }
            Response::Records {
                records,
                high_watermark,
                log_start_offset,
            } => {
                if let Some(records) = records.filter(|r| !r.is_empty()) {
                    let mut result = follower.append_as_follower(&records, epoch);
                    // An empty log whose start falls inside the first batch
                    // restarts at that batch.
                    if let Err(StorageError::UnexpectedAppendOffset {
                        first_offset,
                        last_offset,
                        log_end_offset,
                    }) = result
                    {
                        if first_offset < log_end_offset
                            && log_end_offset <= last_offset
                            && follower.log_start_offset() == log_end_offset
                        {
                            self.truncate(f, &follower, first_offset, true, epoch)?;
                            result = follower.append_as_follower(&records, epoch);
                        }
                    }
                    match result {
                        Ok(Some(_)) => {}
                        Ok(None) => return Ok(()),
                        Err(e @ StorageError::Io { .. }) => {
                            return self.stop_fetching(f, epoch, &e);
                        }
                        Err(e) => {
                            self.log(format!("{f} refuses the leader's batches: {e}"));
                            return Ok(());
                        }
                    }
                }
                if let Err(e) = follower.update_follower_offsets(high_watermark, log_start_offset) {
                    return self.stop_fetching(f, epoch, &e);
                }
                if self.healing || self.rng.chance(70) {
                    self.sync_follower(f)?;
                }
                Ok(())
            }
        }
    }

    /// `ReplicaManager::truncate_follower`.
    fn truncate(
        &mut self,
        f: i32,
        follower: &Arc<Partition>,
        offset: i64,
        fully: bool,
        epoch: i32,
    ) -> Result<(), String> {
        let Some(r) = self.broker(f).running() else {
            return Ok(());
        };
        let rm = r.replica_manager.clone();
        let truncated = self
            .runtime
            .block_on(rm.truncate_follower(follower, offset, fully, epoch));
        match truncated {
            Ok(truncated) => {
                self.log(format!(
                    "{f} truncates to {offset} (fully {fully}): {truncated}"
                ));
            }
            Err(e) => self.stop_fetching(f, epoch, &e)?,
        }
        Ok(())
    }

    /// The fetcher's fsync before follower `f`'s next Fetch reports its log
    /// end offset (durable mode): of what it appended, and of records a
    /// restart recovered above the recovery point. Returns whether `f` may
    /// fetch.
    pub fn sync_follower(&mut self, f: i32) -> Result<bool, String> {
        let Some(follower) = self.broker(f).partition() else {
            return Ok(false);
        };
        if !follower.ack_requires_flush(-1, false) {
            return Ok(true);
        }
        let end = follower.log_end_offset();
        match self.runtime.block_on(follower.wait_durable(end)) {
            Ok(()) => Ok(true),
            Err(e) => {
                self.stop_fetching(f, follower.leader_epoch(), &e)?;
                Ok(false)
            }
        }
    }

    /// A follower's storage error: it no longer fetches in this leader
    /// epoch (the fetcher marks the partition failed until the image
    /// gives it a new epoch); a failed fsync stops the node.
    fn stop_fetching(&mut self, f: i32, epoch: i32, error: &StorageError) -> Result<(), String> {
        self.log(format!(
            "{f}: storage error, no longer fetching in epoch {epoch}: {error}"
        ));
        if let Some(r) = self.broker_mut(f).running_mut() {
            r.fetch_failed_in_epoch = Some(epoch);
        }
        self.halt_on_log_dir_failure()?;
        Ok(())
    }
}

fn describe(response: &Response) -> String {
    match response {
        Response::Error(code) => format!("error {code}"),
        Response::Diverging { epoch, end_offset } => {
            format!("diverging epoch {epoch} ending at {end_offset}")
        }
        Response::Records {
            records,
            high_watermark,
            log_start_offset,
        } => {
            let batches = records
                .as_ref()
                .and_then(|r| logs::batches(r).ok())
                .unwrap_or_default();
            format!(
                "{} batches from {:?}, high watermark {high_watermark}, log start \
                 {log_start_offset}",
                batches.len(),
                batches.first().map(|b| b.offset)
            )
        }
    }
}
