//! The acks=all producer (`handlers/produce.rs`: the min ISR check, the
//! leader append, the leader's fsync unless `write.caching`, then the
//! wait for the high watermark) and what moves the log start offset
//! (DeleteRecords on the leader, retention by size on every replica).

use std::time::Duration;

use weir_broker::partition::ReplicationWait;

use crate::invariants::Ack;
use crate::{logs, Sim, PRODUCE_TIMEOUT_MS};

/// An acks=all produce waiting for its answer.
pub struct Pending {
    offset: i64,
    value: Vec<u8>,
    broker: i32,
    incarnation: u32,
    epoch: i32,
    /// The leader's fsync must cover it before it is answered.
    needs_flush: bool,
    /// That fsync happened.
    durable: bool,
    produced_step: usize,
    produced_ms: i64,
}

impl Sim {
    /// One acks=all produce to a broker that believes it leads (a stale
    /// leader too, now and then).
    pub fn produce(&mut self) -> Result<(), String> {
        let leaders: Vec<i32> = self
            .brokers
            .iter()
            .filter(|b| b.partition().is_some_and(|p| p.is_leader()))
            .map(|b| b.id)
            .collect();
        let Some(l) = self.rng.pick(&leaders) else {
            return Ok(());
        };
        let partition = self.broker(l).partition().expect("leads");
        if let Err(code) = partition.check_enough_replicas() {
            self.log(format!("produce to {l}: error {code}"));
            return Ok(());
        }
        self.next_value += 1;
        let value = format!("v{}", self.next_value).into_bytes();
        let (info, flush_due) =
            match partition.append_records_as_leader(&logs::batch(&value), self.now_ms) {
                Ok(appended) => appended,
                Err(e) => {
                    self.log(format!("produce v{} to {l}: {e}", self.next_value));
                    self.counters.failed_produces += 1;
                    self.halt_on_log_dir_failure()?;
                    return Ok(());
                }
            };
        let epoch = partition.leader_epoch();
        self.pending.push(Pending {
            offset: info.first_offset,
            value,
            broker: l,
            incarnation: self.broker(l).incarnation,
            epoch,
            needs_flush: partition.ack_requires_flush(-1, flush_due),
            durable: false,
            produced_step: self.step,
            produced_ms: self.now_ms,
        });
        self.log(format!(
            "produce v{} to {l} at {} (epoch {epoch})",
            self.next_value, info.first_offset
        ));
        if self.rng.chance(50) {
            self.flush_pending(l)?;
        }
        Ok(())
    }

    /// The produces waiting on broker `id` for its fsync wait in turn
    /// (`Partition::wait_durable`: the first runs a flush, the others are
    /// covered by it or run the next one); one that gets an error is
    /// answered KAFKA_STORAGE_ERROR.
    pub fn flush_pending(&mut self, id: i32) -> Result<(), String> {
        let b = self.broker(id);
        let incarnation = b.incarnation;
        let Some(partition) = b.partition() else {
            return Ok(());
        };
        let mut i = 0;
        while i < self.pending.len() {
            let p = &self.pending[i];
            if p.broker != id || p.incarnation != incarnation || !p.needs_flush || p.durable {
                i += 1;
                continue;
            }
            match self.runtime.block_on(partition.wait_durable(p.offset + 1)) {
                Ok(()) => {
                    self.pending[i].durable = true;
                    i += 1;
                }
                Err(e) => {
                    let p = self.pending.remove(i);
                    self.log(format!(
                        "produce of {} to {id} failed, its fsync failed: {e}",
                        String::from_utf8_lossy(&p.value)
                    ));
                    self.counters.failed_produces += 1;
                    self.halt_on_log_dir_failure()?;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Answers the produces whose wait is over (`wait_replicated`).
    pub fn settle_produces(&mut self) -> Result<(), String> {
        let mut i = 0;
        while i < self.pending.len() {
            let p = &self.pending[i];
            let b = self.broker(p.broker);
            let partition = b.partition().filter(|_| b.incarnation == p.incarnation);
            let answer = match partition {
                None => Err("the broker stopped".to_owned()),
                Some(_) if p.needs_flush && !p.durable => Ok(None),
                // `wait_replicated` would wait (it answers at once when
                // the leadership changed or the high watermark passed).
                Some(q)
                    if q.is_leader()
                        && q.leader_epoch() == p.epoch
                        && q.high_watermark() <= p.offset =>
                {
                    Ok(None)
                }
                Some(q) => {
                    let wait = q.wait_replicated(p.offset + 1, p.epoch, Duration::ZERO);
                    match self.runtime.block_on(wait) {
                        Ok(()) => Ok(Some(())),
                        Err(ReplicationWait::TimedOut) => Ok(None),
                        Err(e) => Err(e.message().to_owned()),
                    }
                }
            };
            let answer = match answer {
                Ok(None) if self.now_ms - p.produced_ms > PRODUCE_TIMEOUT_MS => {
                    Err("timed out".to_owned())
                }
                Ok(None) => {
                    i += 1;
                    continue;
                }
                other => other,
            };
            let p = self.pending.remove(i);
            let value = String::from_utf8_lossy(&p.value).into_owned();
            match answer {
                Ok(_) => {
                    self.log(format!("acknowledged {value} at {}", p.offset));
                    self.acked.push(Ack {
                        offset: p.offset,
                        value: p.value,
                        produced_step: p.produced_step,
                        acked_step: self.step,
                    });
                }
                Err(why) => {
                    self.log(format!("failed {value} at {}: {why}", p.offset));
                    self.counters.failed_produces += 1;
                }
            }
        }
        Ok(())
    }

    /// DeleteRecords on broker `id` if it believes it leads: the log start
    /// offset moves up to a random offset at or below the high watermark
    /// (`Partition::delete_records`).
    pub fn delete_records(&mut self, id: i32) -> Result<(), String> {
        let Some(partition) = self.broker(id).partition().filter(|p| p.is_leader()) else {
            return Ok(());
        };
        let (start, high_watermark) = (partition.log_start_offset(), partition.high_watermark());
        if high_watermark <= start {
            return Ok(());
        }
        let offset = start + self.rng.below((high_watermark - start + 1) as u64) as i64;
        match partition.delete_records(offset) {
            Ok(low_watermark) => self.log(format!(
                "DeleteRecords on {id} to {offset}: log start {low_watermark}"
            )),
            Err(e) => self.log(format!("DeleteRecords on {id} to {offset}: {e}")),
        }
        Ok(())
    }

    /// One retention pass on broker `id` (`retention.bytes`).
    pub fn retention(&mut self, id: i32) -> Result<(), String> {
        let Some(r) = self.broker(id).running() else {
            return Ok(());
        };
        match r.replica_manager.delete_old_segments(self.now_ms) {
            Ok(0) => {}
            Ok(n) => {
                let start = self.broker(id).partition().map(|p| p.log_start_offset());
                self.log(format!(
                    "retention on {id} deletes {n} segments: log start {start:?}"
                ));
            }
            Err(e) => self.log(format!("retention on {id}: {e}")),
        }
        Ok(())
    }
}
