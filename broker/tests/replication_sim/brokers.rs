//! The simulated brokers' lives: start (open the logs, register), unfence
//! and run (`ReplicaManager` as `server.rs` builds it), heartbeats and
//! the controlled shutdown, crashes with or without power loss, metadata
//! images applied late, the AlterPartition sender (one request in flight,
//! a failed one resent), checkpoints, and the disk faults.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use weir_broker::partition::{IsrProposal, Partition};
use weir_broker::replica_manager::ReplicaManager;
use weir_broker::replication::alter_partition::{outcomes, request_for};
use weir_controller::{
    AlterPartitionRequest, AlterPartitionResponse, BrokerEndpoint, BrokerHeartbeat,
    BrokerRegistrationRequest, ControllerError, MetadataImage,
};
use weir_storage::fs::faulty::{Fault, FaultKind, FaultyFileSystem};
use weir_storage::{Log, LogConfig, LogManager, RealFileSystem, TopicPartition};

use crate::invariants::Batch;
use crate::{logs, Sim, BROKER_HEARTBEAT_INTERVAL_MS, BROKER_SESSION_TIMEOUT_MS, TOPIC};

/// One simulated broker: its directory and file system survive crashes,
/// its process does not.
pub struct Broker {
    pub id: i32,
    dir: tempfile::TempDir,
    pub fs: Arc<FaultyFileSystem>,
    process: Process,
    /// The broker epoch of its current registration.
    pub epoch: i64,
    /// Starts so far: tells requests of an old process from the current
    /// one's.
    pub incarnation: u32,
    /// Heartbeats are lost until this time (simulated ms).
    pub heartbeats_lost_until: i64,
    last_heartbeat_ms: i64,
    /// The step of its last power loss.
    pub last_power_loss_step: Option<usize>,
    /// While it does not run: the batches its disk holds (what a restart
    /// recovers).
    pub offline: Vec<Batch>,
    /// The highest high watermark it had when a process of it ended (a
    /// restarted broker's may be lower, restored from the checkpoint,
    /// while it still holds the records the old one covered).
    max_high_watermark: i64,
}

enum Process {
    Down,
    /// Registered (fenced), waiting to be unfenced; the logs are open.
    Starting(Box<LogManager>),
    Running(Box<Running>),
}

/// A running broker process.
pub struct Running {
    pub replica_manager: Arc<ReplicaManager>,
    /// The image its `ReplicaManager` applied last.
    pub image: Arc<MetadataImage>,
    /// ISR changes its partitions submitted, not yet queued.
    isr_changes: UnboundedReceiver<IsrProposal>,
    /// The AlterPartition sender's queue.
    queued: BTreeMap<TopicPartition, IsrProposal>,
    /// In controlled shutdown since (simulated ms).
    shutting_down_since: Option<i64>,
    /// A storage error stopped fetching in this leader epoch.
    pub fetch_failed_in_epoch: Option<i32>,
}

/// An AlterPartition request on its way, or its answer on the way back.
pub struct InFlightAlter {
    broker: i32,
    incarnation: u32,
    batch: Vec<IsrProposal>,
    state: AlterState,
}

enum AlterState {
    Sent(AlterPartitionRequest),
    Answered(Result<AlterPartitionResponse, ControllerError>),
}

impl Broker {
    pub fn new(id: i32, dir: tempfile::TempDir) -> Result<Broker, String> {
        let fs = Arc::new(FaultyFileSystem::new(dir.path()).map_err(|e| e.to_string())?);
        Ok(Broker {
            id,
            dir,
            fs,
            process: Process::Down,
            epoch: -1,
            incarnation: 0,
            heartbeats_lost_until: 0,
            last_heartbeat_ms: 0,
            last_power_loss_step: None,
            offline: Vec::new(),
            max_high_watermark: 0,
        })
    }

    pub fn is_down(&self) -> bool {
        matches!(self.process, Process::Down)
    }

    pub fn is_running(&self) -> bool {
        matches!(self.process, Process::Running(_))
    }

    pub fn running(&self) -> Option<&Running> {
        match &self.process {
            Process::Running(r) => Some(r),
            _ => None,
        }
    }

    pub fn running_mut(&mut self) -> Option<&mut Running> {
        match &mut self.process {
            Process::Running(r) => Some(r),
            _ => None,
        }
    }

    /// The simulated partition on this broker, when it runs and hosts it.
    pub fn partition(&self) -> Option<Arc<Partition>> {
        self.running()?.replica_manager.partition(TOPIC, 0)
    }

    /// The metadata offset its `ReplicaManager` applied, when running.
    pub fn applied_offset(&self) -> Option<u64> {
        Some(self.running()?.replica_manager.applied_metadata_offset())
    }

    pub fn shutting_down(&self) -> bool {
        self.running()
            .is_some_and(|r| r.shutting_down_since.is_some())
    }
}

impl Sim {
    /// Starts broker `id` (a new process): opens its logs (recovering
    /// them) and registers with the clean-shutdown marker's broker epoch.
    pub fn start(&mut self, id: i32) -> Result<(), String> {
        let config = self.broker_config.default_log_config();
        let now_ms = self.now_ms;
        let b = self.broker_mut(id);
        // One loader thread: the simulation's file system faults follow
        // the order of its operations.
        let log_manager = LogManager::open_with_file_system(
            b.fs.clone(),
            b.dir.path().to_path_buf(),
            id,
            config,
            1,
        )
        .map_err(|e| format!("broker {id} opening its logs: {e}"))?;
        let previous_broker_epoch = log_manager.previous_broker_epoch();
        b.incarnation += 1;
        b.last_heartbeat_ms = now_ms;
        let request = BrokerRegistrationRequest {
            broker_id: id,
            incarnation_id: uuid::Uuid::from_u128(((id as u128) << 32) | b.incarnation as u128),
            endpoints: vec![BrokerEndpoint {
                name: "PLAINTEXT".to_owned(),
                host: format!("broker-{id}"),
                port: 9092,
                security_protocol: 0,
            }],
            rack: None,
            previous_broker_epoch,
        };
        b.process = Process::Starting(Box::new(log_manager));
        let epoch = self.controller.register(request, now_ms)?;
        self.broker_mut(id).epoch = epoch;
        self.log(format!(
            "start {id}: registered with broker epoch {epoch} (previous {previous_broker_epoch})"
        ));
        self.after_commit()
    }

    /// The controller unfenced starting broker `id`: builds its
    /// `ReplicaManager` as `server.rs` does and applies the newest image.
    fn run_broker(&mut self, id: i32) -> Result<(), String> {
        let b = self.broker_mut(id);
        let Process::Starting(log_manager) = std::mem::replace(&mut b.process, Process::Down)
        else {
            return Ok(());
        };
        let replica_manager = Arc::new(ReplicaManager::new(
            id,
            self.broker_config.clone(),
            *log_manager,
        ));
        let image = Arc::new(self.controller.image.clone());
        let storage = |e: weir_storage::StorageError| format!("broker {id} starting: {e}");
        replica_manager.delete_stray_logs(&image).map_err(storage)?;
        replica_manager.load_high_watermarks().map_err(storage)?;
        replica_manager
            .apply_image_at(&image, self.now_ms)
            .map_err(storage)?;
        let (sender, isr_changes) = unbounded_channel();
        replica_manager.set_isr_change_sender(sender);
        self.broker_mut(id).process = Process::Running(Box::new(Running {
            replica_manager,
            image,
            isr_changes,
            queued: BTreeMap::new(),
            shutting_down_since: None,
            fetch_failed_in_epoch: None,
        }));
        self.log(format!("{id} unfenced, running"));
        Ok(())
    }

    /// Every broker process whose heartbeat is due sends one (unless its
    /// link to the controller is cut).
    pub fn heartbeats(&mut self) -> Result<(), String> {
        for id in crate::BROKERS {
            let b = self.broker(id);
            let due = self.now_ms - b.last_heartbeat_ms >= BROKER_HEARTBEAT_INTERVAL_MS;
            if !b.is_down() && due && self.now_ms >= b.heartbeats_lost_until {
                self.heartbeat(id)?;
            }
        }
        Ok(())
    }

    /// One heartbeat of broker `id` and what its answer does: a starting
    /// broker runs once unfenced, a broker in controlled shutdown stops
    /// once released (or once `broker.session.timeout.ms` passed).
    fn heartbeat(&mut self, id: i32) -> Result<(), String> {
        let now_ms = self.now_ms;
        let latest = self.controller.image.last_applied_offset;
        let b = self.broker_mut(id);
        b.last_heartbeat_ms = now_ms;
        let (metadata_offset, shutting_down_since) = match &b.process {
            Process::Down => return Ok(()),
            // The observer's image (`wait_until_unfenced`).
            Process::Starting(_) => (latest, None),
            Process::Running(r) => (
                r.replica_manager.applied_metadata_offset(),
                r.shutting_down_since,
            ),
        };
        let heartbeat = BrokerHeartbeat {
            broker_id: id,
            broker_epoch: b.epoch,
            metadata_offset,
            want_shut_down: shutting_down_since.is_some(),
        };
        let reply = self.controller.heartbeat(&heartbeat, now_ms)?;
        self.after_commit()?;
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => {
                self.log(format!("heartbeat of {id}: {e}"));
                return Ok(());
            }
        };
        let starting = matches!(self.broker(id).process, Process::Starting(_));
        if starting && !reply.is_fenced {
            return self.run_broker(id);
        }
        if let Some(since) = shutting_down_since {
            if reply.should_shut_down {
                self.log(format!("{id} released from controlled shutdown"));
                return self.stop_cleanly(id);
            }
            if now_ms - since >= BROKER_SESSION_TIMEOUT_MS {
                self.log(format!("{id}: controlled shutdown not granted in time"));
                return self.stop_cleanly(id);
            }
        }
        Ok(())
    }

    /// Starts the controlled shutdown of running broker `id` (SIGTERM).
    pub fn begin_controlled_shutdown(&mut self, id: i32) -> Result<(), String> {
        let now_ms = self.now_ms;
        let Some(r) = self.broker_mut(id).running_mut() else {
            return Ok(());
        };
        if r.shutting_down_since.is_some() {
            return Ok(());
        }
        r.shutting_down_since = Some(now_ms);
        self.log(format!("{id} begins a controlled shutdown"));
        if now_ms >= self.broker(id).heartbeats_lost_until {
            self.heartbeat(id)?;
        }
        Ok(())
    }

    /// The end of a controlled shutdown: fetchers stop, then
    /// `ReplicaManager::shutdown` flushes, checkpoints and writes the
    /// clean-shutdown marker with the broker epoch.
    fn stop_cleanly(&mut self, id: i32) -> Result<(), String> {
        let Some(replica_manager) = self.broker(id).running().map(|r| r.replica_manager.clone())
        else {
            return Ok(());
        };
        let epoch = self.broker(id).epoch;
        self.went_down(id)?;
        let stopped = replica_manager.shutdown(epoch);
        drop(replica_manager);
        self.counters.clean_stops += 1;
        match stopped {
            Ok(()) => {
                self.log(format!("{id} stopped cleanly (broker epoch {epoch})"));
                Ok(())
            }
            Err(e) => {
                self.log(format!("{id} stopped, its shutdown flush failed: {e}"));
                if matches!(&e, weir_storage::StorageError::Io { op, .. } if op.contains("sync")) {
                    self.log(format!("{id}'s machine restarts"));
                    self.power_loss_while_down(id)?;
                }
                Ok(())
            }
        }
    }

    /// Broker `id`'s process dies; with `power_loss` the machine loses
    /// what was not fsynced.
    pub fn crash(&mut self, id: i32, power_loss: bool) -> Result<(), String> {
        let end = self.broker(id).partition().map(|p| p.log_end_offset());
        self.log(format!(
            "crash {id} (log end {end:?}){}",
            if power_loss { " with power loss" } else { "" }
        ));
        self.went_down(id)?;
        if power_loss {
            self.power_loss_while_down(id)?;
        } else {
            self.broker(id).fs.restart();
        }
        self.counters.crashes += 1;
        self.counters.power_losses += usize::from(power_loss);
        Ok(())
    }

    /// Broker `id`'s process ends: what it held (in memory, so far as the
    /// disk goes: the page cache survives a process) and its high
    /// watermark are kept for the invariants.
    fn went_down(&mut self, id: i32) -> Result<(), String> {
        let in_memory = self.batches_of(id)?;
        let high_watermark = self.broker(id).partition().map(|p| p.high_watermark());
        let b = self.broker_mut(id);
        b.process = Process::Down;
        if let Some(batches) = in_memory {
            b.offline = batches;
        }
        if let Some(high_watermark) = high_watermark {
            b.max_high_watermark = b.max_high_watermark.max(high_watermark);
        }
        self.fetches.retain(|f| f.follower != id);
        Ok(())
    }

    /// Broker `id`, down, loses power: its disk keeps what was fsynced.
    /// What it held and lost below the highest high watermark it had is the
    /// documented limit of [`crate::invariants::committed_prefixes_identical`]
    /// (the high watermark may cover records not yet fsynced on a leader;
    /// with `write.caching` whatever a power loss takes).
    fn power_loss_while_down(&mut self, id: i32) -> Result<(), String> {
        let step = self.step;
        let limit = if self.settings.write_caching {
            i64::MAX
        } else {
            self.broker(id).max_high_watermark
        };
        let b = self.broker_mut(id);
        b.last_power_loss_step = Some(step);
        b.fs.simulate_power_loss()
            .map_err(|e| format!("power loss on {id}: {e}"))?;
        let before = std::mem::replace(&mut b.offline, recovered_batches(b.dir.path())?);
        let lost: Vec<Batch> = before
            .into_iter()
            .filter(|x| x.offset < limit && !self.broker(id).offline.contains(x))
            .collect();
        for lost in lost {
            self.log(format!(
                "documented limit: {id} lost unsynced {} at {} (its high watermark reached {})",
                String::from_utf8_lossy(&lost.value),
                lost.offset,
                self.broker(id).max_high_watermark
            ));
            self.lost_unsynced.insert(lost.value);
        }
        Ok(())
    }

    /// The batches running broker `id` holds (`None` when it does not run).
    fn batches_of(&self, id: i32) -> Result<Option<Vec<Batch>>, String> {
        match self.broker(id).partition() {
            Some(p) => Ok(Some(
                logs::read_log(&p)?.into_iter().map(|b| b.batch).collect(),
            )),
            None => Ok(None),
        }
    }

    /// Halts every running broker whose log directory failed (a failed
    /// sync took it offline: `LogDirFailureChannel`), as the broker's
    /// server does: the process exits at once and the machine keeps its
    /// page cache, where the bytes a failed sync dropped stay readable
    /// (the next start writes what lies above the recovery point again).
    pub fn halt_on_log_dir_failure(&mut self) -> Result<(), String> {
        for id in crate::BROKERS {
            let failure = self
                .broker(id)
                .running()
                .and_then(|r| r.replica_manager.log_dir_failure().failure());
            if let Some(reason) = failure {
                self.counters.fsync_stops += 1;
                self.log(format!("{id}: log directory failed ({reason}): halts"));
                self.crash(id, false)?;
            }
        }
        Ok(())
    }

    /// Broker `id`'s heartbeats are lost for `ms`.
    pub fn cut_controller_link(&mut self, id: i32, ms: i64) -> Result<(), String> {
        let until = self.now_ms + ms;
        self.broker_mut(id).heartbeats_lost_until = until;
        self.log(format!("{id}'s heartbeats are lost for {ms} ms"));
        Ok(())
    }

    /// Running broker `id` applies the controller's newest image.
    pub fn catch_up_metadata(&mut self, id: i32) -> Result<(), String> {
        let now_ms = self.now_ms;
        let latest = self.controller.image.last_applied_offset;
        let Some(r) = self.broker(id).running() else {
            return Ok(());
        };
        if r.image.last_applied_offset >= latest {
            return Ok(());
        }
        let image = Arc::new(self.controller.image.clone());
        r.replica_manager
            .apply_image_at(&image, now_ms)
            .map_err(|e| format!("broker {id} applying metadata: {e}"))?;
        if let Some(r) = self.broker_mut(id).running_mut() {
            r.image = image;
        }
        self.log(format!("{id} applies metadata offset {latest}"));
        Ok(())
    }

    /// One ISR shrink pass on broker `id` (`replica.lag.time.max.ms / 2`).
    pub fn shrink_check(&mut self, id: i32) -> Result<(), String> {
        let now_ms = self.now_ms;
        if let Some(r) = self.broker(id).running() {
            if r.replica_manager.maybe_shrink_isrs(now_ms) > 0 {
                self.log(format!("{id} proposes shrinking the ISR"));
            }
        }
        Ok(())
    }

    /// High watermark, recovery point and log start checkpoints of broker
    /// `id` (its periodic tasks).
    pub fn checkpoint(&mut self, id: i32) -> Result<(), String> {
        let Some(r) = self.broker(id).running() else {
            return Ok(());
        };
        let rm = r.replica_manager.clone();
        if let Err(e) = rm
            .checkpoint_high_watermarks()
            .and_then(|()| rm.checkpoint())
        {
            self.log(format!("{id}: checkpoint failed: {e}"));
        }
        Ok(())
    }

    // ---- AlterPartition -------------------------------------------------

    /// Broker `id`'s AlterPartition sender sends everything queued, unless
    /// a request of its is in flight.
    pub fn send_alter_partition(&mut self, id: i32) -> Result<(), String> {
        let (epoch, incarnation) = (self.broker(id).epoch, self.broker(id).incarnation);
        let busy = self
            .alters
            .iter()
            .any(|a| a.broker == id && a.incarnation == incarnation);
        let Some(r) = self.broker_mut(id).running_mut() else {
            return Ok(());
        };
        while let Ok(p) = r.isr_changes.try_recv() {
            r.queued.insert(p.topic_partition.clone(), p);
        }
        if busy || r.queued.is_empty() {
            return Ok(());
        }
        let batch: Vec<IsrProposal> = std::mem::take(&mut r.queued).into_values().collect();
        let request = request_for(id, epoch, &batch);
        self.log(format!("{id} sends AlterPartition {:?}", summary(&batch)));
        self.alters.push(InFlightAlter {
            broker: id,
            incarnation,
            batch,
            state: AlterState::Sent(request),
        });
        Ok(())
    }

    /// The controller handles one AlterPartition request in flight; its
    /// answer is delivered, lost or delayed.
    pub fn answer_alter_partition(&mut self) -> Result<(), String> {
        let Some(i) = self.pick_alter(true) else {
            return Ok(());
        };
        let AlterState::Sent(request) = &self.alters[i].state else {
            return Ok(());
        };
        let request = request.clone();
        let response = self.controller.alter_partition(&request)?;
        self.log(format!(
            "controller answers AlterPartition of {} (broker epoch {}): {}",
            request.broker_id,
            request.broker_epoch,
            describe_response(&response)
        ));
        self.after_commit()?;
        let fate = if self.healing { 9 } else { self.rng.below(10) };
        match fate {
            0 => {
                let alter = self.alters.remove(i);
                self.log(format!("answer to {} lost: it resends", alter.broker));
                self.requeue(alter.broker, alter.incarnation, alter.batch);
            }
            1 | 2 => self.alters[i].state = AlterState::Answered(response),
            _ => {
                let alter = self.alters.remove(i);
                self.deliver_alter(alter.broker, alter.incarnation, alter.batch, response);
            }
        }
        Ok(())
    }

    /// A random AlterPartition in flight: a request on its way (`sent`) or
    /// an answer on its way back.
    fn pick_alter(&mut self, sent: bool) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.alters.len())
            .filter(|&i| matches!(self.alters[i].state, AlterState::Sent(_)) == sent)
            .collect();
        self.rng.pick(&candidates)
    }

    /// An AlterPartition request is lost on its way: its sender resends.
    pub fn lose_alter_partition(&mut self) -> Result<(), String> {
        if let Some(i) = self.pick_alter(true) {
            let alter = self.alters.remove(i);
            self.log(format!(
                "AlterPartition of {} lost: it resends",
                alter.broker
            ));
            self.requeue(alter.broker, alter.incarnation, alter.batch);
        }
        Ok(())
    }

    /// A delayed AlterPartition answer arrives.
    pub fn deliver_delayed_alter_partition(&mut self) -> Result<(), String> {
        if let Some(i) = self.pick_alter(false) {
            let InFlightAlter {
                broker,
                incarnation,
                batch,
                state,
            } = self.alters.remove(i);
            if let AlterState::Answered(response) = state {
                self.log(format!("delayed AlterPartition answer to {broker}"));
                self.deliver_alter(broker, incarnation, batch, response);
            }
        }
        Ok(())
    }

    /// The sender gets the controller's answer (`alter_partition::run`).
    fn deliver_alter(
        &mut self,
        broker: i32,
        incarnation: u32,
        batch: Vec<IsrProposal>,
        response: Result<AlterPartitionResponse, ControllerError>,
    ) {
        let response = match response {
            Ok(response) => response,
            Err(_) => return self.requeue(broker, incarnation, batch),
        };
        let now_ms = self.now_ms;
        let b = self.broker(broker);
        if b.incarnation != incarnation {
            return;
        }
        let Some(partition) = b.partition() else {
            return;
        };
        let mut retry = Vec::new();
        for (proposal, outcome) in outcomes(&batch, response) {
            match outcome {
                Some(outcome) => partition.on_isr_change(proposal, outcome, now_ms),
                None => retry.push(proposal.clone()),
            }
        }
        self.requeue(broker, incarnation, retry);
    }

    /// A failed request's proposals go back to its sender's queue (a newer
    /// one queued meanwhile wins).
    fn requeue(&mut self, broker: i32, incarnation: u32, batch: Vec<IsrProposal>) {
        let b = self.broker_mut(broker);
        if b.incarnation != incarnation {
            return;
        }
        if let Some(r) = b.running_mut() {
            for p in batch {
                r.queued.entry(p.topic_partition.clone()).or_insert(p);
            }
        }
    }

    // ---- disk faults ----------------------------------------------------

    /// Arms one fault on broker `id`'s disk: a torn write of a `.log` or a
    /// failing fdatasync.
    pub fn arm_disk_fault(&mut self, id: i32) -> Result<(), String> {
        if self.broker(id).is_down() {
            return Ok(());
        }
        if self.rng.chance(50) {
            let torn = self.rng.below(60) as usize;
            self.broker(id).fs.fail_writes(
                Fault::new(FaultKind::Io)
                    .times(1)
                    .torn_after(torn)
                    .on_suffix(".log"),
            );
            self.log(format!(
                "{id}: the next .log write tears after {torn} bytes"
            ));
            self.counters.torn_writes += 1;
        } else {
            self.broker(id).fs.fail_syncs(
                Fault::new(FaultKind::Io)
                    .times(1)
                    .on_suffix(".log")
                    .dropping_dirty_pages(),
            );
            self.log(format!(
                "{id}: the next .log fdatasync fails and drops the dirty pages"
            ));
            self.counters.failed_fsyncs += 1;
        }
        Ok(())
    }
}

fn summary(batch: &[IsrProposal]) -> Vec<(Vec<i32>, i32, i32)> {
    batch
        .iter()
        .map(|p| (p.new_isr.clone(), p.leader_epoch, p.partition_epoch))
        .collect()
}

fn describe_response(response: &Result<AlterPartitionResponse, ControllerError>) -> String {
    match response {
        Err(e) => format!("{e}"),
        Ok(r) => r
            .topics
            .iter()
            .flat_map(|(_, ps)| ps.iter())
            .map(|(_, result)| match result {
                Ok(p) => format!("ISR {:?} partition epoch {}", p.isr, p.partition_epoch),
                Err(e) => format!("{e}"),
            })
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// What a restart would recover from the partition directory under
/// `log_dir` now: a copy recovered in full (the directory itself is left
/// to the real restart).
fn recovered_batches(log_dir: &std::path::Path) -> Result<Vec<Batch>, String> {
    let tp = TopicPartition::new(TOPIC, 0);
    let source = weir_storage::log_manager::partition_dir(log_dir, &tp);
    if !source.is_dir() {
        return Ok(Vec::new());
    }
    let scratch = crate::data_dir()?;
    let copy = weir_storage::log_manager::partition_dir(scratch.path(), &tp);
    std::fs::create_dir_all(&copy).map_err(|e| e.to_string())?;
    for entry in std::fs::read_dir(&source).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        if entry.file_type().map_err(|e| e.to_string())?.is_file() {
            std::fs::copy(entry.path(), copy.join(entry.file_name())).map_err(|e| e.to_string())?;
        }
    }
    let log = Log::open_with_file_system(
        RealFileSystem::shared(),
        scratch.path().to_path_buf(),
        tp,
        LogConfig::default(),
        0,
        0,
        false,
    )
    .map_err(|e| format!("recovering a copy of {}: {e}", source.display()))?;
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    let end = log.log_end_offset();
    while offset < end {
        let info = log
            .read(offset, usize::MAX, end, true)
            .map_err(|e| format!("reading the recovered copy at {offset}: {e}"))?;
        let Some(slice) = info.records else { break };
        let bytes = slice.read_to_bytes().map_err(|e| e.to_string())?;
        let read = logs::batches(&bytes)?;
        let next = read.last().map_or(end, |b| b.offset + 1);
        out.extend(read.into_iter().filter(|b| b.offset >= offset));
        if next <= offset {
            break;
        }
        offset = next;
    }
    Ok(out)
}
