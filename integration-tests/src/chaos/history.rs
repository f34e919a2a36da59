//! What a chaos run's clients and nemesis saw, in the order it happened: the
//! input of the [`checker`](super::checker). Nothing here talks to a broker.
//!
//! The shapes follow Jepsen's queue workload (the Kafka test of
//! jepsen-io/jepsen, "kafka" workload): every send has one outcome, every
//! poll lists the (offset, value) pairs one consumer got from one
//! partition, and the final drain reads every partition to its end after
//! the faults have been healed.

use std::collections::BTreeMap;

/// A client or nemesis process of one run. Producers and consumers each get
/// their own ids; a consumer that starts over from the earliest offset gets a
/// new id (so per-process order checks see one assignment each).
pub type ProcessId = u32;

/// The outcome of one send (one record, one Produce request retried with the
/// same producer id, epoch and sequence until answered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// acks=all answered NONE: the record is at `offset` and must be read
    /// by the final drain (Jepsen's `:ok`).
    Ack {
        /// The base offset the leader answered.
        offset: i64,
        /// The node that answered (the partition's leader as the producer
        /// knew it).
        node: i32,
    },
    /// Every attempt was refused before it was appended (for example
    /// NOT_ENOUGH_REPLICAS with no earlier ambiguous attempt): the record
    /// must never be read (Jepsen's `:fail`).
    Fail {
        /// The last error (Kafka error name or code).
        error: String,
    },
    /// A timeout, a closed connection or an error after which the record may
    /// or may not be in the log (Jepsen's `:info`): it may be read at most
    /// once.
    Unknown {
        /// The last error.
        error: String,
    },
}

/// One record a producer sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Send {
    /// Milliseconds since the run started, when the send began.
    pub at_ms: u64,
    /// Milliseconds since the run started, when its outcome was learnt
    /// (for an acknowledgement: when the answer arrived).
    pub done_ms: u64,
    /// The producer.
    pub process: ProcessId,
    /// The record's value, unique within the run.
    pub value: String,
    /// The partition it was sent to.
    pub partition: i32,
    /// What the producer learnt.
    pub outcome: SendOutcome,
}

/// One non-empty Fetch answer to one consumer for one partition: the records
/// at or after the consumer's position, in the order returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poll {
    /// Milliseconds since the run started, when the answer arrived.
    pub at_ms: u64,
    /// The consumer.
    pub process: ProcessId,
    /// The partition.
    pub partition: i32,
    /// (offset, value) of every record returned.
    pub records: Vec<(i64, String)>,
}

/// What a nemesis action did to one node, and whether the node behaved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NemesisEvent {
    /// Milliseconds since the run started.
    pub at_ms: u64,
    /// The node id (1-based), or 0 for the whole cluster.
    pub node: i32,
    /// What was done, e.g. `SIGKILL`, `restart`, `SIGSTOP`, `SIGCONT`,
    /// `SIGTERM`, `heal`.
    pub action: String,
    /// `None` when the node did what it should; else the failure, e.g. a
    /// node that did not exit within 30 s of SIGTERM or did not start.
    pub problem: Option<NodeProblem>,
}

/// A node that misbehaved under a nemesis action (liveness anomalies the
/// checker reports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeProblem {
    /// Still running 30 s after SIGTERM (it was then killed).
    SigtermHang,
    /// Exited after SIGTERM with a status other than 0.
    SigtermExitStatus(String),
    /// Did not start again (or not within the ready timeout).
    RestartFailed(String),
    /// Still running (or exited 0) after its disk started failing (its
    /// `fdatasync`s or writes failing with EIO, or its disk full): a broker
    /// must halt at its first failed write or sync.
    NoHaltOnDiskError(String),
    /// The harness could not inject or end the fault (a power loss that
    /// could not be applied, a trigger file that could not be written, a
    /// network cut that could not be set or removed).
    FaultNotInjected(String),
}

/// The state of the cluster after the final heal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Milliseconds since the run started, when every process was running
    /// and unpaused again.
    pub healed_at_ms: u64,
    /// Milliseconds after the heal until every partition had a leader and
    /// its full ISR in every node's Metadata, or `None` when that did not
    /// happen within the bound ([`super::checker::RECOVERY_BOUND_MS`]).
    pub ready_after_ms: Option<u64>,
    /// What the last Metadata showed, for the report.
    pub last_state: String,
}

/// The final read of every partition from offset 0 to its end (the high
/// watermark the leader reported when the drain started).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drain {
    /// How long the drain took, ms.
    pub elapsed_ms: u64,
    /// (offset, value) of every record read, per partition.
    pub records: BTreeMap<i32, Vec<(i64, String)>>,
    /// Partitions the drain could not read to the end within the bound
    /// ([`super::checker::DRAIN_BOUND_MS`]), with the last error.
    pub incomplete: BTreeMap<i32, String>,
}

/// One answer the workload's watcher got from one node: what the node said
/// about leadership, high watermarks or the metadata quorum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// Milliseconds since the run started, when the request was sent.
    pub sent_ms: u64,
    /// Milliseconds since the run started, when the answer arrived.
    pub received_ms: u64,
    /// The node that answered.
    pub node: i32,
    /// What it said.
    pub observed: Observed,
}

/// The content of an [`Observation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// Metadata: the partition's leader (-1 for none) and leader epoch.
    Leader {
        /// The partition.
        partition: i32,
        /// The leader's node id, or -1.
        leader: i32,
        /// The leader epoch.
        leader_epoch: i32,
    },
    /// ListOffsets `LATEST` (read_uncommitted) answered NONE by a node that
    /// believed it led the partition: its high watermark and the leader
    /// epoch it answered with (KIP-320; -1 when the version lacks it).
    HighWatermark {
        /// The partition.
        partition: i32,
        /// The high watermark (the offset after the last committed record).
        offset: i64,
        /// The answering leader's epoch.
        leader_epoch: i32,
    },
    /// DescribeQuorum: the metadata quorum's leader and epoch (raft term)
    /// as the node knows them.
    Quorum {
        /// The quorum leader's node id, or -1.
        leader: i32,
        /// The quorum epoch.
        epoch: i32,
    },
}

/// Whether the clients made progress once the cluster was healthy again:
/// the run keeps them running after the recovery until every producer had
/// a send acknowledged and every consumer read a record, or the bound
/// ([`super::checker::PROGRESS_BOUND_MS`]) passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Milliseconds since the run started, when every partition had a
    /// leader and its full ISR after the final heal.
    pub healthy_at_ms: u64,
    /// Milliseconds since the run started, when the clients were stopped.
    pub stopped_at_ms: u64,
}

/// One metadata operation of the churn workload ([`super::churn`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChurnOp {
    /// Milliseconds since the run started, when it was sent.
    pub at_ms: u64,
    /// Milliseconds since the run started, when its outcome was learnt.
    pub done_ms: u64,
    /// What was asked.
    pub op: Churn,
    /// What the cluster answered.
    pub outcome: ChurnOutcome,
}

/// A metadata operation the churn workload asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Churn {
    /// CreateTopics of a new topic (RF=3, one partition); every name is
    /// created at most once per run.
    Create {
        /// The topic.
        topic: String,
    },
    /// DeleteTopics.
    Delete {
        /// The topic.
        topic: String,
    },
    /// CreatePartitions up to `count`.
    AddPartitions {
        /// The topic.
        topic: String,
        /// The new partition count.
        count: i32,
    },
    /// ElectLeaders (preferred) for every partition of the queue's topic.
    ElectLeaders {
        /// The topic.
        topic: String,
    },
}

/// The outcome of a [`ChurnOp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChurnOutcome {
    /// Answered NONE: it happened.
    Ok,
    /// Answered an error after which it did not happen (e.g.
    /// INVALID_REPLICATION_FACTOR while a node is fenced).
    Fail(String),
    /// No answer, or REQUEST_TIMED_OUT / NOT_CONTROLLER: it may or may not
    /// have happened.
    Unknown(String),
}

/// The topics every node's Metadata listed once the churn had stopped
/// (read until all nodes agree, for at most
/// [`super::checker::RECOVERY_BOUND_MS`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FinalMetadata {
    /// Node id -> topic -> partition count, or the error of its last read.
    pub nodes: BTreeMap<i32, Result<BTreeMap<String, i32>, String>>,
}

/// The process id of the first group member process; member thread `t`
/// runs processes `GROUP_PROCESS_BASE + t * 10_000 + n` for its `n`th
/// assignment (a new member or a new generation), far from the queue's
/// producer and consumer ids.
pub const GROUP_PROCESS_BASE: ProcessId = 1_000_000;

/// The outcome of one OffsetCommit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitOutcome {
    /// Answered NONE for every partition: the offsets are committed.
    Ok,
    /// Refused before it was written (ILLEGAL_GENERATION,
    /// UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS,
    /// COORDINATOR_LOAD_IN_PROGRESS): it never takes effect.
    Fail(String),
    /// No answer, or an error after which the offsets may still be written
    /// (NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE, which Kafka's
    /// `GroupMetadataManager.storeOffsets` also answers when the append
    /// to `__consumer_offsets` timed out or lost its leader).
    Unknown(String),
}

/// One OffsetCommit a group member sent for its assigned partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// Milliseconds since the run started, when it was sent.
    pub at_ms: u64,
    /// Milliseconds since the run started, when its outcome was learnt.
    pub done_ms: u64,
    /// The member process.
    pub process: ProcessId,
    /// The group generation it was sent in.
    pub generation: i32,
    /// Partition -> committed offset (the next offset to read).
    pub offsets: BTreeMap<i32, i64>,
    /// What the coordinator answered.
    pub outcome: CommitOutcome,
}

/// One OffsetFetch answered NONE: the group's committed offsets as the
/// answering coordinator held them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedRead {
    /// Milliseconds since the run started, when it was sent.
    pub sent_ms: u64,
    /// Milliseconds since the run started, when the answer arrived.
    pub received_ms: u64,
    /// The member process that asked, or 0 for the final read after the
    /// drain.
    pub process: ProcessId,
    /// Partition -> committed offset, -1 when none.
    pub offsets: BTreeMap<i32, i64>,
}

/// A group member process starting to read a partition at the group's
/// committed offset (0 when none) after a rebalance gave it the partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// Milliseconds since the run started.
    pub at_ms: u64,
    /// The member process (new for every assignment).
    pub process: ProcessId,
    /// The partition.
    pub partition: i32,
    /// The first offset it reads.
    pub start: i64,
}

/// Everything one run recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    /// Partitions of the workload's topic (0..partitions).
    pub partitions: i32,
    /// Producer processes (ids 1..=producers).
    pub producers: u32,
    /// Consumer threads (thread `t` runs processes `1000 + t`, `1100 + t`,
    /// ...: process id modulo 100).
    pub consumers: u32,
    /// Sends, in the order they completed.
    pub sends: Vec<Send>,
    /// Polls, in the order they arrived.
    pub polls: Vec<Poll>,
    /// Nemesis actions, in order.
    pub nemesis: Vec<NemesisEvent>,
    /// The state after the final heal (`None` when the run ended before).
    pub recovery: Option<Recovery>,
    /// The final drain (`None` when it did not run).
    pub drain: Option<Drain>,
    /// The watcher's observations, in the order they arrived.
    pub observations: Vec<Observation>,
    /// Progress after the recovery (`None` when the cluster never
    /// recovered: reported as `unavailable-after-heal` instead).
    pub progress: Option<Progress>,
    /// The churn workload's metadata operations, in the order they ended.
    pub churn: Vec<ChurnOp>,
    /// Every node's topics after the churn stopped (`None` when not read).
    pub final_metadata: Option<FinalMetadata>,
    /// Group member threads of the consumer group workload.
    pub group_members: u32,
    /// The group members' assignments, in order.
    pub assignments: Vec<Assignment>,
    /// The group members' OffsetCommits, in the order they ended.
    pub commits: Vec<Commit>,
    /// Every OffsetFetch answered NONE, in the order answered (the final
    /// read after the drain last, with process 0).
    pub committed_reads: Vec<CommittedRead>,
    /// What the group members did besides commits and reads (joins,
    /// leaves, errors), as (ms since the run started, member thread,
    /// text), for the history file; the checker does not read it.
    pub group_events: Vec<(u64, u32, String)>,
}

impl History {
    /// Every event as one line each, in time order (sends at the time they
    /// began), for the history file a failed run leaves behind.
    pub fn lines(&self) -> Vec<String> {
        let mut timed: Vec<(u64, String)> = Vec::new();
        for s in &self.sends {
            timed.push((
                s.at_ms,
                format!(
                    "send p{} {} -> {} {:?}",
                    s.process, s.value, s.partition, s.outcome
                ),
            ));
        }
        for p in &self.polls {
            timed.push((
                p.at_ms,
                format!("poll c{} {} {:?}", p.process, p.partition, p.records),
            ));
        }
        for n in &self.nemesis {
            timed.push((
                n.at_ms,
                format!("nemesis node {} {} {:?}", n.node, n.action, n.problem),
            ));
        }
        if let Some(r) = &self.recovery {
            timed.push((r.healed_at_ms, format!("healed; {r:?}")));
        }
        for o in &self.observations {
            timed.push((
                o.sent_ms,
                format!(
                    "watch node {} (answered at {} ms) {:?}",
                    o.node, o.received_ms, o.observed
                ),
            ));
        }
        for c in &self.churn {
            timed.push((
                c.at_ms,
                format!("churn {:?} -> {:?} at {} ms", c.op, c.outcome, c.done_ms),
            ));
        }
        for a in &self.assignments {
            timed.push((
                a.at_ms,
                format!("assign g{} {} from {}", a.process, a.partition, a.start),
            ));
        }
        for (at_ms, thread, text) in &self.group_events {
            timed.push((*at_ms, format!("member {thread} {text}")));
        }
        for c in &self.commits {
            timed.push((
                c.at_ms,
                format!(
                    "commit g{} generation {} {:?} -> {:?} at {} ms",
                    c.process, c.generation, c.offsets, c.outcome, c.done_ms
                ),
            ));
        }
        for r in &self.committed_reads {
            timed.push((
                r.sent_ms,
                format!(
                    "committed g{} {:?} (answered at {} ms)",
                    r.process, r.offsets, r.received_ms
                ),
            ));
        }
        if let Some(p) = &self.progress {
            timed.push((p.stopped_at_ms, format!("clients stopped; {p:?}")));
        }
        timed.sort_by_key(|(at, _)| *at);
        let mut lines: Vec<String> = timed
            .into_iter()
            .map(|(at, line)| format!("{at:>8} {line}"))
            .collect();
        if let Some(d) = &self.drain {
            for (partition, records) in &d.records {
                lines.push(format!("   drain {partition} {records:?}"));
            }
            lines.push(format!(
                "   drain took {} ms; incomplete {:?}",
                d.elapsed_ms, d.incomplete
            ));
        }
        if let Some(m) = &self.final_metadata {
            for (node, topics) in &m.nodes {
                lines.push(format!("   final metadata node {node}: {topics:?}"));
            }
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_interleave_events_by_time_and_end_with_the_drain() {
        let history = History {
            partitions: 1,
            sends: vec![Send {
                at_ms: 30,
                done_ms: 35,
                process: 1,
                value: "1-0".into(),
                partition: 0,
                outcome: SendOutcome::Ack { offset: 0, node: 1 },
            }],
            polls: vec![Poll {
                at_ms: 40,
                process: 1001,
                partition: 0,
                records: vec![(0, "1-0".into())],
            }],
            nemesis: vec![NemesisEvent {
                at_ms: 10,
                node: 2,
                action: "SIGKILL".into(),
                problem: None,
            }],
            recovery: None,
            drain: Some(Drain {
                elapsed_ms: 3,
                records: BTreeMap::from([(0, vec![(0, "1-0".into())])]),
                incomplete: BTreeMap::new(),
            }),
            ..History::default()
        };
        let lines = history.lines();
        assert_eq!(lines.len(), 5, "{lines:#?}");
        assert!(lines[0].contains("nemesis node 2 SIGKILL"), "{lines:#?}");
        assert!(lines[1].contains("send p1 1-0 -> 0"), "{lines:#?}");
        assert!(lines[2].contains("poll c1001 0"), "{lines:#?}");
        assert!(lines[3].contains("drain 0"), "{lines:#?}");
    }
}
