//! The consumer group workload (issue 17 scope 3): member threads of one
//! classic consumer group subscribed to the queue's topic, reading from
//! the group's committed offsets and committing what they read, while the
//! nemesis kills brokers (and with them the group coordinator) and the
//! members themselves die: each member incarnation lives 8-25 s (drawn
//! from the seed), then either leaves the group (LeaveGroup) or
//! vanishes without a word, so its session has to expire before the group
//! rebalances.
//!
//! Written against the protocol like the queue's clients, so every
//! outcome is exact: each OffsetCommit is sent once and recorded as a
//! [`Commit`], each OffsetFetch answered NONE as a [`CommittedRead`], each
//! partition a rebalance hands a member as an [`Assignment`] starting at
//! the committed offset, and every record read as a [`Poll`] (so the
//! queue's checks of reads cover group members too: a member that starts
//! past a record the group never committed is a `poll-skip`). After the
//! drain one final OffsetFetch records the offsets the group kept; the
//! checker's `committed-offset-regression` holds it (and every read) to
//! the acknowledged commits.
//!
//! A member process id is new for every assignment (a new member id or a
//! new generation), so the per-process order checks see one assignment
//! each.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::client::{self, error_name, Joined};
use super::history::{
    Assignment, Commit, CommitOutcome, CommittedRead, ProcessId, GROUP_PROCESS_BASE,
};
use super::queue::{self, connect_with_timeout, Connections, Shared, BACKOFF};
use crate::RawClient;

/// The group's id.
pub const GROUP: &str = "chaos-group";
/// The members' session (and rebalance) timeout, ms: past the nemesis'
/// shortest faults, well inside the checker's progress bound.
const SESSION_TIMEOUT_MS: i32 = 6_000;
/// How long a coordinator request may take (a JoinGroup waits for the
/// other members, up to the rebalance timeout plus Kafka's initial
/// rebalance delay).
const COORDINATOR_TIMEOUT: Duration = Duration::from_secs(15);
/// How often a member heartbeats.
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
/// A member re-reads the committed offsets after this many commits.
const READ_EVERY: u32 = 5;

// Kafka error codes (protocol guide, "Error Codes") the members act on.
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const ILLEGAL_GENERATION: i16 = 22;
const UNKNOWN_MEMBER_ID: i16 = 25;
const REBALANCE_IN_PROGRESS: i16 = 27;
const MEMBER_ID_REQUIRED: i16 = 79;

/// What a member does next after an answer.
enum Next {
    /// Carry on.
    Continue,
    /// Join again with the same member id (a rebalance began).
    Rejoin,
    /// Join again as a new member (the coordinator forgot this one).
    NewMember,
    /// Find the coordinator again (it moved or is loading).
    FindCoordinator,
}

fn next_after(code: i16) -> Next {
    match code {
        0 => Next::Continue,
        REBALANCE_IN_PROGRESS | ILLEGAL_GENERATION => Next::Rejoin,
        UNKNOWN_MEMBER_ID => Next::NewMember,
        NOT_COORDINATOR | COORDINATOR_NOT_AVAILABLE | COORDINATOR_LOAD_IN_PROGRESS => {
            Next::FindCoordinator
        }
        // Anything else (a request timeout, an unknown server error): look
        // the coordinator up again after a pause.
        _ => Next::FindCoordinator,
    }
}

/// What an OffsetCommit answer means for the commit (see
/// [`CommitOutcome`]).
fn commit_outcome(code: i16) -> CommitOutcome {
    match code {
        0 => CommitOutcome::Ok,
        ILLEGAL_GENERATION
        | UNKNOWN_MEMBER_ID
        | REBALANCE_IN_PROGRESS
        | COORDINATOR_LOAD_IN_PROGRESS => CommitOutcome::Fail(error_name(code)),
        _ => CommitOutcome::Unknown(error_name(code)),
    }
}

/// One member incarnation's state.
struct Member<'a> {
    shared: &'a Shared,
    /// The member thread (1-based; 0 for the final read).
    thread: u32,
    /// The coordinator's node id and a connection to it.
    coordinator: Option<(i32, RawClient)>,
    /// The member id (empty before the first join).
    member_id: String,
    /// The current generation, once joined and synced.
    joined: Option<Joined>,
    /// The current assignment's process id.
    process: ProcessId,
    /// Assigned partition -> next offset to read.
    positions: BTreeMap<i32, i64>,
    /// The offsets of the last commit sent.
    committed: BTreeMap<i32, i64>,
    commits: u32,
    last_heartbeat: Instant,
    next_node: usize,
}

impl Member<'_> {
    /// Records `text` in the history's group events.
    fn event(&self, text: String) {
        let at_ms = self.shared.now_ms();
        self.shared
            .history
            .lock()
            .unwrap()
            .group_events
            .push((at_ms, self.thread, text));
    }

    /// Asks the nodes in turn for the coordinator and connects to it.
    fn find_coordinator(&mut self) -> Result<(), String> {
        let addresses = &self.shared.addresses;
        self.next_node += 1;
        let address = &addresses[self.next_node % addresses.len()];
        let mut c = connect_with_timeout(address, Duration::from_secs(2))?;
        let node = client::find_coordinator(&mut c, GROUP)?
            .map_err(|code| format!("FindCoordinator: {}", error_name(code)))?;
        let address = addresses
            .get((node - 1) as usize)
            .ok_or_else(|| format!("FindCoordinator: unknown node {node}"))?;
        self.coordinator = Some((node, connect_with_timeout(address, COORDINATOR_TIMEOUT)?));
        Ok(())
    }

    fn coordinator(&mut self) -> Result<&mut RawClient, String> {
        if self.coordinator.is_none() {
            self.find_coordinator()?;
        }
        Ok(&mut self.coordinator.as_mut().expect("just found").1)
    }

    /// Acts on `next`; a request error drops the coordinator.
    fn handle(&mut self, next: Next) {
        match next {
            Next::Continue => {}
            Next::Rejoin => self.joined = None,
            Next::NewMember => {
                self.joined = None;
                self.member_id.clear();
            }
            Next::FindCoordinator => {
                self.coordinator = None;
                std::thread::sleep(BACKOFF);
            }
        }
    }

    /// JoinGroup and SyncGroup (the leader assigns the partitions
    /// round-robin over the members sorted by id), then the committed
    /// offsets of the partitions it got.
    fn join(&mut self) -> Result<Next, String> {
        let topic = self.shared.spec.topic.clone();
        let member_id = self.member_id.clone();
        let joined = client::join_group(
            self.coordinator()?,
            GROUP,
            &member_id,
            &topic,
            SESSION_TIMEOUT_MS,
        )?;
        if joined.error == MEMBER_ID_REQUIRED {
            self.member_id = joined.member_id;
            return Ok(Next::Continue);
        }
        if joined.error != 0 {
            self.event(format!("JoinGroup: {}", error_name(joined.error)));
            return Ok(next_after(joined.error));
        }
        self.event(format!(
            "joined generation {} as {} (leader {}, {} members)",
            joined.generation,
            joined.member_id,
            joined.leader == joined.member_id,
            joined.members.len()
        ));
        self.member_id = joined.member_id.clone();
        let mut assignments: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        if joined.leader == joined.member_id {
            for (i, member) in joined.members.iter().enumerate() {
                let partitions = (0..self.shared.spec.partitions)
                    .filter(|p| *p as usize % joined.members.len() == i)
                    .collect();
                assignments.insert(member.clone(), partitions);
            }
        }
        let (error, partitions) =
            client::sync_group(self.coordinator()?, GROUP, &joined, &topic, &assignments)?;
        if error != 0 {
            self.event(format!("SyncGroup: {}", error_name(error)));
            return Ok(next_after(error));
        }
        let sent_ms = self.shared.now_ms();
        let offsets = match client::offset_fetch(self.coordinator()?, GROUP, &topic, &partitions)? {
            Ok(offsets) => offsets,
            Err(code) => return Ok(next_after(code)),
        };
        self.process += 1;
        let at_ms = self.shared.now_ms();
        let mut history = self.shared.history.lock().unwrap();
        history.committed_reads.push(CommittedRead {
            sent_ms,
            received_ms: at_ms,
            process: self.process,
            offsets: offsets.clone(),
        });
        self.positions.clear();
        for (&partition, &offset) in &offsets {
            let start = offset.max(0);
            self.positions.insert(partition, start);
            history.assignments.push(Assignment {
                at_ms,
                process: self.process,
                partition,
                start,
            });
        }
        self.committed = offsets;
        self.joined = Some(joined);
        self.last_heartbeat = Instant::now();
        Ok(Next::Continue)
    }

    /// One round: a Fetch of every assigned partition from its leader, an
    /// OffsetCommit of what was read, a Heartbeat when one is due.
    fn round(&mut self, connections: &mut Connections) -> Result<Next, String> {
        let shared = self.shared;
        for (&partition, position) in self.positions.iter_mut() {
            queue::poll(shared, connections, self.process, partition, position);
        }
        let joined = self.joined.clone().expect("a round runs joined");
        if self.positions != self.committed {
            let offsets = self.positions.clone();
            let at_ms = shared.now_ms();
            let topic = shared.spec.topic.clone();
            let answer = self
                .coordinator()
                .and_then(|c| client::offset_commit(c, GROUP, &joined, &topic, &offsets));
            let outcome = match &answer {
                Ok(code) => commit_outcome(*code),
                Err(e) => CommitOutcome::Unknown(e.clone()),
            };
            shared.history.lock().unwrap().commits.push(Commit {
                at_ms,
                done_ms: shared.now_ms(),
                process: self.process,
                generation: joined.generation,
                offsets: offsets.clone(),
                outcome,
            });
            self.committed = offsets;
            self.commits += 1;
            let code = answer?;
            if code != 0 {
                return Ok(next_after(code));
            }
            if self.commits % READ_EVERY == 0 {
                self.read_committed()?;
            }
        }
        if self.last_heartbeat.elapsed() >= HEARTBEAT_INTERVAL {
            self.last_heartbeat = Instant::now();
            let code = client::heartbeat(self.coordinator()?, GROUP, &joined)?;
            if code != 0 {
                self.event(format!("Heartbeat: {}", error_name(code)));
            }
            return Ok(next_after(code));
        }
        Ok(Next::Continue)
    }

    /// Records the committed offsets of the assigned partitions.
    fn read_committed(&mut self) -> Result<(), String> {
        let partitions: Vec<i32> = self.positions.keys().copied().collect();
        let topic = self.shared.spec.topic.clone();
        let sent_ms = self.shared.now_ms();
        if let Ok(offsets) = client::offset_fetch(self.coordinator()?, GROUP, &topic, &partitions)?
        {
            self.shared
                .history
                .lock()
                .unwrap()
                .committed_reads
                .push(CommittedRead {
                    sent_ms,
                    received_ms: self.shared.now_ms(),
                    process: self.process,
                    offsets,
                });
        }
        Ok(())
    }
}

/// Member thread `thread` (1-based): incarnation after incarnation, each
/// living 8-25 s (drawn from `seed`: long enough for the group to make
/// progress between deaths, each of which rebalances it) and then leaving
/// the group or vanishing, until told to stop.
pub(super) fn member_loop(shared: &Shared, thread: u32, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(200 + u64::from(thread));
    let mut process = GROUP_PROCESS_BASE + thread * 10_000;
    let mut connections = Connections::default();
    while !shared.stop.load(Ordering::SeqCst) {
        let lifetime = Duration::from_millis(rng.gen_range(8_000..25_000));
        let leave = rng.gen_bool(0.5);
        let born = Instant::now();
        let mut member = Member {
            shared,
            thread,
            coordinator: None,
            member_id: String::new(),
            joined: None,
            process,
            positions: BTreeMap::new(),
            committed: BTreeMap::new(),
            commits: 0,
            last_heartbeat: Instant::now(),
            next_node: thread as usize,
        };
        while !shared.stop.load(Ordering::SeqCst) && born.elapsed() < lifetime {
            let step = if member.joined.is_none() {
                member.join()
            } else {
                member.round(&mut connections)
            };
            match step {
                Ok(next) => member.handle(next),
                Err(e) => {
                    member.event(e);
                    member.handle(Next::FindCoordinator);
                }
            }
        }
        if leave && !member.member_id.is_empty() {
            let member_id = member.member_id.clone();
            let answer = member
                .coordinator()
                .and_then(|c| client::leave_group(c, GROUP, &member_id));
            member.event(format!("LeaveGroup {member_id}: {answer:?}"));
        } else {
            member.event(format!("vanished as {:?}", member.member_id));
        }
        process = member.process + 1;
    }
}

/// The group's committed offsets of every partition, read after the drain
/// from whichever coordinator answers within `bound`; `None` when none
/// did.
pub(super) fn final_read(shared: &Shared, bound: Duration) -> Option<CommittedRead> {
    let deadline = Instant::now() + bound;
    let partitions: Vec<i32> = (0..shared.spec.partitions).collect();
    let mut member = Member {
        shared,
        thread: 0,
        coordinator: None,
        member_id: String::new(),
        joined: None,
        process: 0,
        positions: BTreeMap::new(),
        committed: BTreeMap::new(),
        commits: 0,
        last_heartbeat: Instant::now(),
        next_node: 0,
    };
    while Instant::now() < deadline {
        let sent_ms = shared.now_ms();
        let topic = shared.spec.topic.clone();
        let answer = member
            .coordinator()
            .and_then(|c| client::offset_fetch(c, GROUP, &topic, &partitions));
        match answer {
            Ok(Ok(offsets)) => {
                return Some(CommittedRead {
                    sent_ms,
                    received_ms: shared.now_ms(),
                    process: 0,
                    offsets,
                })
            }
            Ok(Err(_)) | Err(_) => member.handle(Next::FindCoordinator),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_errors_raised_before_the_write_make_a_commit_fail() {
        assert_eq!(commit_outcome(0), CommitOutcome::Ok);
        for code in [
            ILLEGAL_GENERATION,
            UNKNOWN_MEMBER_ID,
            REBALANCE_IN_PROGRESS,
            COORDINATOR_LOAD_IN_PROGRESS,
        ] {
            assert!(
                matches!(commit_outcome(code), CommitOutcome::Fail(_)),
                "{code}"
            );
        }
        // Kafka answers these when the append to __consumer_offsets timed
        // out or lost its leader: the offsets may still be written.
        for code in [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, 7, -1] {
            assert!(
                matches!(commit_outcome(code), CommitOutcome::Unknown(_)),
                "{code}"
            );
        }
    }
}
