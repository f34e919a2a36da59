//! The checker: a pure function from a [`History`] to the anomalies it
//! holds, by kind. It owns the definitions below and depends on nothing but
//! the history types (no broker, no clock).
//!
//! Safety (Jepsen's queue checker, jepsen-io/jepsen `jepsen.tests.kafka`):
//! - `lost-write`: a send acknowledged (acks=all answered NONE), or a value
//!   a consumer read (so below the high watermark), that the final drain
//!   did not read from its partition.
//! - `duplicate`: one value at two (partition, offset) positions, across
//!   acknowledgements, polls and the drain.
//! - `inconsistent-offset`: one (partition, offset) holding two values.
//! - `nonmonotonic-send`: one producer's acknowledged offsets on one
//!   partition not increasing in send order (a producer has one send in
//!   flight, so its send order is its log order).
//! - `nonmonotonic-poll`: one consumer reading an offset at or below one it
//!   read before from the same partition.
//! - `poll-skip`: one consumer reading offset `b` right after `a` (or first,
//!   with `a` = -1) while some observation shows a record between them.
//! - `unexpected-value`: a value read that no producer sent.
//! - `failed-write-read`: a value read whose send definitely failed.
//!
//! Cluster state, from the watcher's [`Observation`]s (issue 17):
//! - `hw-regression`: a partition's high watermark (ListOffsets `LATEST`
//!   answered NONE by a leader) lower than one learnt before the request
//!   was sent, from an answer of the same or an older leader epoch or from
//!   an acknowledgement (acks=all is answered once the high watermark is
//!   past the record, Kafka's `DelayedProduce`) given in the same or an
//!   older epoch (bounded by the epoch in the acknowledging node's next
//!   answer about the partition). A new leader answers
//!   OFFSET_NOT_AVAILABLE until its high watermark reaches its epoch's
//!   start (Kafka's `Partition.fetchOffsetForTimestamp`), so no committed
//!   offset is ever un-committed in a client's eyes. Answers from an older
//!   epoch than one seen before (a deposed leader that does not know yet)
//!   may be stale, as in Kafka, and are only compared within their epoch.
//! - `leader-epoch-regression`: one node's Metadata giving a partition a
//!   lower leader epoch than it gave before.
//! - `quorum-epoch-regression`: one node's DescribeQuorum giving a lower
//!   quorum epoch (raft term) than it gave before.
//! - `two-leaders`: two nodes named leader of one partition in one leader
//!   epoch, or of the metadata quorum in one quorum epoch, by any answers.
//!
//! Metadata, from the churn workload's operations and every node's final
//! Metadata (issue 17 scope 3):
//! - `lost-topic`: a topic whose CreateTopics was acknowledged, never sent a
//!   delete that may have happened, missing from a node.
//! - `resurrected-topic`: a topic whose DeleteTopics was acknowledged still
//!   listed by a node.
//! - `lost-partitions`: fewer partitions on a node than an acknowledged
//!   CreatePartitions gave a topic that was not deleted.
//! - `failed-op-applied`: a topic, or a partition count, that only a
//!   definitely refused operation asked for.
//! - `metadata-divergence`: the nodes' final Metadata differing (or a node
//!   not answering) for [`RECOVERY_BOUND_MS`] after the clients stopped.
//!
//! Consumer group, from the group workload's commits and committed-offset
//! reads (issue 17 scopes 3 and 4):
//! - `committed-offset-regression`: the group's committed offset of a
//!   partition, read once more after the drain, older than an
//!   acknowledged commit: some acknowledged OffsetCommit `C` of another
//!   offset ended before the read began, and every commit of the offset
//!   read ended before `C` began (so nothing could have overwritten `C`
//!   with it; last writer wins, as Kafka's offsets are) -- a lost commit;
//!   or any committed offset read (by a member or the final read) that no
//!   acknowledged or possibly applied commit wrote. Members' own reads are
//!   only held to the second rule: a coordinator cut off from the cluster
//!   may answer from its stale cache until it learns it lost
//!   `__consumer_offsets`, as Kafka's does.
//! - A member starts an assignment at the committed offset, so the
//!   `poll-skip` check of its first read starts there.
//!
//! Liveness (issue 17): every partition has a leader and its full ISR within
//! [`RECOVERY_BOUND_MS`] of the final heal (`unavailable-after-heal`), the
//! drain reads every partition to its end within [`DRAIN_BOUND_MS`]
//! (`drain-incomplete`), a node exits 0 within 30 s of SIGTERM
//! (`sigterm-hang`, `sigterm-exit-status`), starts again when restarted
//! (`restart-failed`) and halts, exiting non-zero, within 20 s of its disk
//! failing: `fdatasync`s or writes failing with EIO, or a full disk
//! (`no-halt-on-disk-error`); a fault the
//! harness could not inject is `fault-not-injected`; once the cluster is
//! healthy again, every producer has a send acknowledged (`stuck-producer`)
//! and every consumer thread reads a record and the consumer group
//! commits (`stuck-consumer`) within [`PROGRESS_BOUND_MS`]; the final read
//! of the group's committed offsets is answered within [`DRAIN_BOUND_MS`]
//! (`drain-incomplete`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::churn;
use super::history::{
    Churn, ChurnOutcome, CommitOutcome, History, NodeProblem, Observation, Observed, SendOutcome,
};
use super::queue::{stuck_consumers, stuck_group, stuck_producers};

/// How long after the final heal every partition must have a leader and
/// its full ISR, ms (issue 17).
pub const RECOVERY_BOUND_MS: u64 = 30_000;
/// How long the final drain may take, ms (issue 17).
pub const DRAIN_BOUND_MS: u64 = 60_000;
/// How long after the cluster is healthy again every producer and consumer
/// must make progress, ms (issue 17: "no progress for 30 s while healthy").
pub const PROGRESS_BOUND_MS: u64 = 30_000;
/// At most this many examples are kept per anomaly kind found by the
/// observation checks (one fault can produce thousands).
const EXAMPLES: usize = 20;

/// The kinds of anomaly the checker reports; see the module documentation
/// for each definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AnomalyKind {
    /// An acknowledged value missing from the final drain.
    LostWrite,
    /// One value at two positions.
    Duplicate,
    /// One position with two values.
    InconsistentOffset,
    /// A producer's acknowledged offsets going back on one partition.
    NonmonotonicSend,
    /// A consumer's offsets going back on one partition.
    NonmonotonicPoll,
    /// A consumer jumping over a record that exists.
    PollSkip,
    /// A value read that was never sent.
    UnexpectedValue,
    /// A value read whose send definitely failed.
    FailedWriteRead,
    /// No leader or a short ISR past the recovery bound.
    UnavailableAfterHeal,
    /// The drain did not finish, or not within its bound.
    DrainIncomplete,
    /// A node still running 30 s after SIGTERM.
    SigtermHang,
    /// A node exiting non-zero after SIGTERM.
    SigtermExitStatus,
    /// A node that did not start again.
    RestartFailed,
    /// A high watermark lower than one known before.
    HighWatermarkRegression,
    /// A node's leader epoch for a partition going back.
    LeaderEpochRegression,
    /// A node's quorum epoch going back.
    QuorumEpochRegression,
    /// Two leaders in one epoch.
    TwoLeaders,
    /// A producer without an acknowledged send once the cluster was healthy.
    StuckProducer,
    /// A consumer without a read once the cluster was healthy.
    StuckConsumer,
    /// An acknowledged topic missing.
    LostTopic,
    /// A deleted topic back.
    ResurrectedTopic,
    /// Acknowledged partitions missing.
    LostPartitions,
    /// A refused metadata operation visible.
    FailedOpApplied,
    /// Nodes disagreeing on the final metadata.
    MetadataDivergence,
    /// A node that did not halt when its disk failed (EIO on `fdatasync`
    /// or write, a full disk).
    NoHaltOnDiskError,
    /// A fault the harness could not inject.
    FaultNotInjected,
    /// A lost or never-written committed offset.
    CommittedOffsetRegression,
}

impl AnomalyKind {
    /// The kebab-case name printed in run rows.
    pub fn name(self) -> &'static str {
        match self {
            Self::LostWrite => "lost-write",
            Self::Duplicate => "duplicate",
            Self::InconsistentOffset => "inconsistent-offset",
            Self::NonmonotonicSend => "nonmonotonic-send",
            Self::NonmonotonicPoll => "nonmonotonic-poll",
            Self::PollSkip => "poll-skip",
            Self::UnexpectedValue => "unexpected-value",
            Self::FailedWriteRead => "failed-write-read",
            Self::UnavailableAfterHeal => "unavailable-after-heal",
            Self::DrainIncomplete => "drain-incomplete",
            Self::SigtermHang => "sigterm-hang",
            Self::SigtermExitStatus => "sigterm-exit-status",
            Self::RestartFailed => "restart-failed",
            Self::HighWatermarkRegression => "hw-regression",
            Self::LeaderEpochRegression => "leader-epoch-regression",
            Self::QuorumEpochRegression => "quorum-epoch-regression",
            Self::TwoLeaders => "two-leaders",
            Self::StuckProducer => "stuck-producer",
            Self::StuckConsumer => "stuck-consumer",
            Self::LostTopic => "lost-topic",
            Self::ResurrectedTopic => "resurrected-topic",
            Self::LostPartitions => "lost-partitions",
            Self::FailedOpApplied => "failed-op-applied",
            Self::MetadataDivergence => "metadata-divergence",
            Self::NoHaltOnDiskError => "no-halt-on-disk-error",
            Self::FaultNotInjected => "fault-not-injected",
            Self::CommittedOffsetRegression => "committed-offset-regression",
        }
    }
}

impl fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The anomalies of one history: each kind with one description per
/// occurrence. Empty when the history is valid.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Descriptions per kind, in the order found.
    pub anomalies: BTreeMap<AnomalyKind, Vec<String>>,
}

impl Report {
    /// True when no anomaly was found.
    pub fn is_valid(&self) -> bool {
        self.anomalies.is_empty()
    }

    /// How many anomalies of `kind` were found.
    pub fn count(&self, kind: AnomalyKind) -> usize {
        self.anomalies.get(&kind).map_or(0, Vec::len)
    }

    /// `kind=count` for every kind found, space-separated, or `none`.
    pub fn summary(&self) -> String {
        if self.anomalies.is_empty() {
            return "none".to_owned();
        }
        self.anomalies
            .iter()
            .map(|(kind, found)| format!("{kind}={}", found.len()))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn add(&mut self, kind: AnomalyKind, description: String) {
        self.anomalies.entry(kind).or_default().push(description);
    }
}

/// Checks `history` for every anomaly of [`AnomalyKind`].
pub fn check(history: &History) -> Report {
    let mut report = Report::default();
    check_positions(history, &mut report);
    check_sends(history, &mut report);
    check_polls(history, &mut report);
    check_drain(history, &mut report);
    check_liveness(history, &mut report);
    check_high_watermarks(history, &mut report);
    check_epochs(history, &mut report);
    check_progress(history, &mut report);
    check_churn(history, &mut report);
    check_commits(history, &mut report);
    report
}

/// Every (partition, offset, value) observation: acknowledgements, polls and
/// the drain, with where it came from.
fn observations(history: &History) -> Vec<(i32, i64, &str, String)> {
    let mut out = Vec::new();
    for s in &history.sends {
        if let SendOutcome::Ack { offset, .. } = s.outcome {
            out.push((
                s.partition,
                offset,
                s.value.as_str(),
                format!("ack to p{}", s.process),
            ));
        }
    }
    for p in &history.polls {
        for (offset, value) in &p.records {
            out.push((
                p.partition,
                *offset,
                value.as_str(),
                format!("poll by c{} at {} ms", p.process, p.at_ms),
            ));
        }
    }
    if let Some(drain) = &history.drain {
        for (partition, records) in &drain.records {
            for (offset, value) in records {
                out.push((*partition, *offset, value.as_str(), "drain".to_owned()));
            }
        }
    }
    out
}

/// `duplicate` and `inconsistent-offset`.
fn check_positions(history: &History, report: &mut Report) {
    let mut values_at: BTreeMap<(i32, i64), BTreeMap<&str, String>> = BTreeMap::new();
    let mut positions_of: BTreeMap<&str, BTreeMap<(i32, i64), String>> = BTreeMap::new();
    for (partition, offset, value, source) in observations(history) {
        values_at
            .entry((partition, offset))
            .or_default()
            .entry(value)
            .or_insert_with(|| source.clone());
        positions_of
            .entry(value)
            .or_default()
            .entry((partition, offset))
            .or_insert(source);
    }
    for ((partition, offset), values) in &values_at {
        if values.len() > 1 {
            report.add(
                AnomalyKind::InconsistentOffset,
                format!("partition {partition} offset {offset} holds {values:?}"),
            );
        }
    }
    for (value, positions) in &positions_of {
        if positions.len() > 1 {
            report.add(
                AnomalyKind::Duplicate,
                format!("{value} at (partition, offset) {positions:?}"),
            );
        }
    }
}

/// `nonmonotonic-send`, `unexpected-value`, `failed-write-read`.
fn check_sends(history: &History, report: &mut Report) {
    let mut last_ack: BTreeMap<(u32, i32), (i64, &str)> = BTreeMap::new();
    for s in &history.sends {
        if let SendOutcome::Ack { offset, .. } = s.outcome {
            if let Some(&(before, before_value)) = last_ack.get(&(s.process, s.partition)) {
                if offset <= before {
                    report.add(
                        AnomalyKind::NonmonotonicSend,
                        format!(
                            "p{} partition {}: {} acknowledged at {offset} after {before_value} at {before}",
                            s.process, s.partition, s.value
                        ),
                    );
                }
            }
            last_ack.insert((s.process, s.partition), (offset, s.value.as_str()));
        }
    }
    let sent: BTreeMap<&str, &SendOutcome> = history
        .sends
        .iter()
        .map(|s| (s.value.as_str(), &s.outcome))
        .collect();
    let mut reported = BTreeSet::new();
    for (partition, offset, value, source) in observations(history) {
        if !reported.insert(value) {
            continue;
        }
        match sent.get(value) {
            None => report.add(
                AnomalyKind::UnexpectedValue,
                format!("{value} at partition {partition} offset {offset} ({source}) was never sent"),
            ),
            Some(SendOutcome::Fail { error }) => report.add(
                AnomalyKind::FailedWriteRead,
                format!(
                    "{value} at partition {partition} offset {offset} ({source}); its send failed with {error}"
                ),
            ),
            Some(_) => {}
        }
    }
}

/// `nonmonotonic-poll` and `poll-skip`.
fn check_polls(history: &History, report: &mut Report) {
    let mut known: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
    for (partition, offset, _, _) in observations(history) {
        known.entry(partition).or_default().insert(offset);
    }
    let empty = BTreeSet::new();
    // A group member's assignment starts at the committed offset.
    let mut last: BTreeMap<(u32, i32), i64> = history
        .assignments
        .iter()
        .map(|a| ((a.process, a.partition), a.start - 1))
        .collect();
    for p in &history.polls {
        let offsets = known.get(&p.partition).unwrap_or(&empty);
        for (offset, value) in &p.records {
            let before = last.get(&(p.process, p.partition)).copied().unwrap_or(-1);
            if *offset <= before {
                report.add(
                    AnomalyKind::NonmonotonicPoll,
                    format!(
                        "c{} partition {}: read {offset} ({value}) at {} ms after {before}",
                        p.process, p.partition, p.at_ms
                    ),
                );
            } else if let Some(skipped) = offsets.range(before + 1..*offset).next() {
                report.add(
                    AnomalyKind::PollSkip,
                    format!(
                        "c{} partition {}: read {offset} ({value}) at {} ms right after {before}, skipping {skipped}",
                        p.process, p.partition, p.at_ms
                    ),
                );
            }
            last.insert((p.process, p.partition), *offset);
        }
    }
}

/// `lost-write` and `drain-incomplete`.
fn check_drain(history: &History, report: &mut Report) {
    let Some(drain) = &history.drain else {
        report.add(
            AnomalyKind::DrainIncomplete,
            "the drain did not run".to_owned(),
        );
        return;
    };
    for (partition, error) in &drain.incomplete {
        report.add(
            AnomalyKind::DrainIncomplete,
            format!("partition {partition} not read to its end: {error}"),
        );
    }
    if drain.elapsed_ms > DRAIN_BOUND_MS {
        report.add(
            AnomalyKind::DrainIncomplete,
            format!(
                "the drain took {} ms (bound {DRAIN_BOUND_MS})",
                drain.elapsed_ms
            ),
        );
    }
    let drained: BTreeMap<i32, BTreeSet<&str>> = drain
        .records
        .iter()
        .map(|(p, records)| (*p, records.iter().map(|(_, v)| v.as_str()).collect()))
        .collect();
    let empty = BTreeSet::new();
    // A record a consumer read was below the high watermark: committed, so
    // the drain must read it too, whatever its send's outcome.
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    for p in &history.polls {
        if drain.incomplete.contains_key(&p.partition) {
            continue;
        }
        let drained_here = drained.get(&p.partition).unwrap_or(&empty);
        for (offset, value) in &p.records {
            if !drained_here.contains(value.as_str()) && reported.insert(value.as_str()) {
                report.add(
                    AnomalyKind::LostWrite,
                    format!(
                        "{value} read by c{} at partition {} offset {offset} ({} ms) is not in the drain",
                        p.process, p.partition, p.at_ms
                    ),
                );
            }
        }
    }
    for s in &history.sends {
        if reported.contains(s.value.as_str()) {
            continue;
        }
        let SendOutcome::Ack { offset, .. } = s.outcome else {
            continue;
        };
        if drain.incomplete.contains_key(&s.partition) {
            continue; // reported as drain-incomplete; loss cannot be told
        }
        if !drained
            .get(&s.partition)
            .unwrap_or(&empty)
            .contains(s.value.as_str())
        {
            report.add(
                AnomalyKind::LostWrite,
                format!(
                    "{} acknowledged to p{} at partition {} offset {offset} ({} ms) is not in the drain",
                    s.value, s.process, s.partition, s.at_ms
                ),
            );
        }
    }
}

/// `hw-regression`. A floor is a high watermark known at some time, with
/// the leader epoch it holds from: an answer (at its arrival, from its
/// epoch) or an acknowledgement at offset `o` (floor `o + 1` at its
/// arrival, from the highest leader epoch of the partition any answer had
/// shown by then: the acknowledging leader's epoch is at least that). An
/// answer sent after a floor arrived, of that floor's epoch or newer, must
/// not be below it.
fn check_high_watermarks(history: &History, report: &mut Report) {
    // partition -> (time known, epoch, offset, what)
    let mut floors: BTreeMap<i32, Vec<(u64, i32, i64, String)>> = BTreeMap::new();
    let mut answers: BTreeMap<i32, Vec<(&Observation, i64, i32)>> = BTreeMap::new();
    for o in &history.observations {
        match o.observed {
            Observed::HighWatermark {
                partition,
                offset,
                leader_epoch,
            } => {
                floors.entry(partition).or_default().push((
                    o.received_ms,
                    leader_epoch,
                    offset,
                    format!("node {} answered at {} ms", o.node, o.received_ms),
                ));
                answers
                    .entry(partition)
                    .or_default()
                    .push((o, offset, leader_epoch));
            }
            Observed::Leader { .. } | Observed::Quorum { .. } => {}
        }
    }
    for s in &history.sends {
        let SendOutcome::Ack { offset, node } = s.outcome else {
            continue;
        };
        // The epoch the acknowledgement was given in is unknown (Produce
        // answers carry none), and neither the highest epoch the watcher
        // had seen by then (a new leader may acknowledge before the watcher
        // hears of its epoch: seed 5005) nor the epoch of the record's
        // batch (a new leader acknowledges a retry of a batch an older
        // leader appended as a duplicate: seed 6009) is it. Its upper
        // bound is the epoch of the partition in any later answer of the
        // node that acknowledged: a node's view of a partition's epoch
        // never goes back, and it knew the epoch it acknowledged in. Only
        // answers of that epoch or newer must include the record (a
        // deposed leader's answers of an older epoch may be stale); with
        // no later answer of that node, the acknowledgement sets no floor.
        let epoch = history
            .observations
            .iter()
            .filter(|o| o.node == node && o.sent_ms >= s.done_ms)
            .filter_map(|o| match o.observed {
                Observed::Leader {
                    partition,
                    leader_epoch,
                    ..
                }
                | Observed::HighWatermark {
                    partition,
                    leader_epoch,
                    ..
                } if partition == s.partition => Some(leader_epoch),
                _ => None,
            })
            .min();
        floors.entry(s.partition).or_default().push((
            s.done_ms,
            epoch.unwrap_or(i32::MAX),
            offset + 1,
            format!(
                "{} acknowledged at offset {offset} at {} ms",
                s.value, s.done_ms
            ),
        ));
    }
    let mut found = 0;
    for (partition, answers) in &mut answers {
        let floors = floors.get_mut(partition).expect("answers are floors");
        floors.sort_by_key(|f| f.0);
        answers.sort_by_key(|(o, _, _)| o.sent_ms);
        for (o, offset, epoch) in answers.iter() {
            let known = floors.partition_point(|f| f.0 < o.sent_ms);
            let above = floors[..known]
                .iter()
                .filter(|f| f.1 <= *epoch && f.2 > *offset)
                .max_by_key(|f| f.2);
            if let Some((_, floor_epoch, floor, what)) = above {
                found += 1;
                if found <= EXAMPLES {
                    report.add(
                        AnomalyKind::HighWatermarkRegression,
                        format!(
                            "partition {partition}: node {} answered {offset} (epoch {epoch}) to a request sent at {} ms, below {floor} (epoch {floor_epoch}: {what})",
                            o.node, o.sent_ms
                        ),
                    );
                }
            }
        }
    }
}

/// `leader-epoch-regression`, `quorum-epoch-regression` and `two-leaders`.
fn check_epochs(history: &History, report: &mut Report) {
    let mut last_leader_epoch: BTreeMap<(i32, i32), (i32, u64)> = BTreeMap::new();
    let mut last_quorum_epoch: BTreeMap<i32, (i32, u64)> = BTreeMap::new();
    // (partition or -1 for the quorum, epoch) -> leader -> first answer
    let mut leaders: BTreeMap<(i32, i32), BTreeMap<i32, String>> = BTreeMap::new();
    let mut ordered: Vec<&Observation> = history.observations.iter().collect();
    ordered.sort_by_key(|o| o.sent_ms);
    let add = |report: &mut Report, kind, text: String| {
        if report.count(kind) < EXAMPLES {
            report.add(kind, text);
        }
    };
    for o in ordered {
        let (key, epoch, leader, last, kind) = match o.observed {
            Observed::Leader {
                partition,
                leader,
                leader_epoch,
            } => (
                partition,
                leader_epoch,
                leader,
                last_leader_epoch
                    .entry((o.node, partition))
                    .or_insert((leader_epoch, o.sent_ms)),
                AnomalyKind::LeaderEpochRegression,
            ),
            Observed::Quorum { leader, epoch } => (
                -1,
                epoch,
                leader,
                last_quorum_epoch
                    .entry(o.node)
                    .or_insert((epoch, o.sent_ms)),
                AnomalyKind::QuorumEpochRegression,
            ),
            Observed::HighWatermark { .. } => continue,
        };
        let what = if key < 0 {
            "the quorum".to_owned()
        } else {
            format!("partition {key}")
        };
        if epoch < last.0 {
            add(
                report,
                kind,
                format!(
                    "node {} gave {what} epoch {epoch} at {} ms after {} at {} ms",
                    o.node, o.sent_ms, last.0, last.1
                ),
            );
        } else {
            *last = (epoch, o.sent_ms);
        }
        if leader >= 0 {
            let named = leaders.entry((key, epoch)).or_default();
            let before = named.len();
            named
                .entry(leader)
                .or_insert_with(|| format!("node {} at {} ms", o.node, o.sent_ms));
            if named.len() > before && named.len() > 1 {
                add(
                    report,
                    AnomalyKind::TwoLeaders,
                    format!("{what} epoch {epoch}: leaders (first named by) {named:?}"),
                );
            }
        }
    }
}

/// What the churn's operations say about one topic.
#[derive(Debug, Default)]
struct TopicOps {
    created: Option<bool>,
    create_failed: bool,
    deleted: bool,
    maybe_deleted: bool,
    /// The highest partition count acknowledged.
    acknowledged_count: i32,
    /// The highest partition count any operation not refused asked for.
    possible_count: i32,
}

/// `lost-topic`, `resurrected-topic`, `lost-partitions`,
/// `failed-op-applied` and `metadata-divergence`.
fn check_churn(history: &History, report: &mut Report) {
    let Some(metadata) = &history.final_metadata else {
        return;
    };
    if !churn::agreed(metadata) {
        report.add(
            AnomalyKind::MetadataDivergence,
            format!("the nodes' final Metadata: {:?}", metadata.nodes),
        );
    }
    let mut topics: BTreeMap<&str, TopicOps> = BTreeMap::new();
    for c in &history.churn {
        let (ok, refused) = match c.outcome {
            ChurnOutcome::Ok => (true, false),
            ChurnOutcome::Fail(_) => (false, true),
            ChurnOutcome::Unknown(_) => (false, false),
        };
        match &c.op {
            Churn::Create { topic } => {
                let t = topics.entry(topic).or_default();
                t.created = Some(ok);
                t.create_failed = refused;
                if !refused {
                    t.possible_count = t.possible_count.max(1);
                }
                if ok {
                    t.acknowledged_count = t.acknowledged_count.max(1);
                }
            }
            Churn::Delete { topic } => {
                let t = topics.entry(topic).or_default();
                t.deleted |= ok;
                t.maybe_deleted |= !refused;
            }
            Churn::AddPartitions { topic, count } => {
                let t = topics.entry(topic).or_default();
                if ok {
                    t.acknowledged_count = t.acknowledged_count.max(*count);
                }
                if !refused {
                    t.possible_count = t.possible_count.max(*count);
                }
            }
            Churn::ElectLeaders { .. } => {}
        }
    }
    for (node, read) in &metadata.nodes {
        let Ok(listed) = read else { continue };
        for (topic, ops) in &topics {
            let found = listed.get(*topic).copied();
            match found {
                None if ops.created == Some(true) && !ops.maybe_deleted => report.add(
                    AnomalyKind::LostTopic,
                    format!("{topic}: created, never deleted, missing on node {node}"),
                ),
                Some(count) if ops.deleted => report.add(
                    AnomalyKind::ResurrectedTopic,
                    format!("{topic}: deleted, listed by node {node} with {count} partitions"),
                ),
                Some(count) if ops.create_failed => report.add(
                    AnomalyKind::FailedOpApplied,
                    format!("{topic}: its creation was refused, node {node} lists {count} partitions"),
                ),
                Some(count) if !ops.maybe_deleted && count < ops.acknowledged_count => {
                    report.add(
                        AnomalyKind::LostPartitions,
                        format!(
                            "{topic}: {} partitions acknowledged, node {node} lists {count}",
                            ops.acknowledged_count
                        ),
                    )
                }
                Some(count) if count > ops.possible_count => report.add(
                    AnomalyKind::FailedOpApplied,
                    format!(
                        "{topic}: node {node} lists {count} partitions, only refused operations asked for more than {}",
                        ops.possible_count
                    ),
                ),
                _ => {}
            }
        }
        for topic in listed.keys() {
            if !topics.contains_key(topic.as_str()) {
                report.add(
                    AnomalyKind::FailedOpApplied,
                    format!("{topic}: never created, listed by node {node}"),
                );
            }
        }
    }
}

/// `stuck-producer` and `stuck-consumer`.
fn check_progress(history: &History, report: &mut Report) {
    let Some(progress) = history.progress else {
        return;
    };
    for p in stuck_producers(history, progress.healthy_at_ms) {
        report.add(
            AnomalyKind::StuckProducer,
            format!(
                "p{p}: no acknowledged send between {} ms (healthy) and {} ms",
                progress.healthy_at_ms, progress.stopped_at_ms
            ),
        );
    }
    if stuck_group(history, progress.healthy_at_ms) {
        report.add(
            AnomalyKind::StuckConsumer,
            format!(
                "consumer group: no acknowledged commit between {} ms (healthy) and {} ms",
                progress.healthy_at_ms, progress.stopped_at_ms
            ),
        );
    }
    for t in stuck_consumers(history, progress.healthy_at_ms) {
        report.add(
            AnomalyKind::StuckConsumer,
            format!(
                "consumer thread {t}: no record read between {} ms (healthy) and {} ms",
                progress.healthy_at_ms, progress.stopped_at_ms
            ),
        );
    }
}

/// `committed-offset-regression`, and `drain-incomplete` for a final read
/// of the committed offsets that never came.
fn check_commits(history: &History, report: &mut Report) {
    if history.group_members == 0 {
        return;
    }
    // Partition -> offset -> the latest end of a commit that wrote it
    // (u64::MAX when its outcome is unknown: it may land at any time).
    let mut writes: BTreeMap<i32, BTreeMap<i64, u64>> = BTreeMap::new();
    for c in &history.commits {
        let done = match c.outcome {
            CommitOutcome::Ok => c.done_ms,
            CommitOutcome::Unknown(_) => u64::MAX,
            CommitOutcome::Fail(_) => continue,
        };
        for (&partition, &offset) in &c.offsets {
            let end = writes
                .entry(partition)
                .or_default()
                .entry(offset)
                .or_insert(0);
            *end = (*end).max(done);
        }
    }
    let fin = history.committed_reads.iter().find(|r| r.process == 0);
    if fin.is_none() && history.drain.is_some() {
        report.add(
            AnomalyKind::DrainIncomplete,
            format!("the group's committed offsets were not read within {DRAIN_BOUND_MS} ms after the drain"),
        );
    }
    for read in &history.committed_reads {
        for (&partition, &offset) in &read.offsets {
            let written = writes.get(&partition);
            // Offset -1 (nothing committed) is written at the start.
            let offset_done = if offset == -1 {
                Some(0)
            } else {
                written.and_then(|w| w.get(&offset)).copied()
            };
            let Some(offset_done) = offset_done else {
                report.add(
                    AnomalyKind::CommittedOffsetRegression,
                    format!(
                        "g{} partition {partition}: read committed offset {offset} at {} ms, which no commit wrote",
                        read.process, read.sent_ms
                    ),
                );
                continue;
            };
            if read.process != 0 {
                continue;
            }
            let overwritten_by = history.commits.iter().find(|c| {
                c.outcome == CommitOutcome::Ok
                    && c.done_ms < read.sent_ms
                    && c.at_ms > offset_done
                    && c.offsets.get(&partition).is_some_and(|&o| o != offset)
            });
            if let Some(c) = overwritten_by {
                report.add(
                    AnomalyKind::CommittedOffsetRegression,
                    format!(
                        "partition {partition}: the group kept offset {offset}, but g{} committed {} (acknowledged at {} ms) after every commit of {offset} had ended",
                        c.process, c.offsets[&partition], c.done_ms
                    ),
                );
            }
        }
    }
}

/// `unavailable-after-heal` and the nodes' own problems.
fn check_liveness(history: &History, report: &mut Report) {
    match &history.recovery {
        None => report.add(
            AnomalyKind::UnavailableAfterHeal,
            "the cluster was never healed".to_owned(),
        ),
        Some(r) => match r.ready_after_ms {
            Some(ms) if ms <= RECOVERY_BOUND_MS => {}
            other => report.add(
                AnomalyKind::UnavailableAfterHeal,
                format!(
                    "ready after {other:?} ms (bound {RECOVERY_BOUND_MS}); last state {}",
                    r.last_state
                ),
            ),
        },
    }
    for n in &history.nemesis {
        let Some(problem) = &n.problem else { continue };
        let (kind, detail) = match problem {
            NodeProblem::SigtermHang => (AnomalyKind::SigtermHang, String::new()),
            NodeProblem::SigtermExitStatus(s) => (AnomalyKind::SigtermExitStatus, s.clone()),
            NodeProblem::RestartFailed(e) => (AnomalyKind::RestartFailed, e.clone()),
            NodeProblem::NoHaltOnDiskError(e) => (AnomalyKind::NoHaltOnDiskError, e.clone()),
            NodeProblem::FaultNotInjected(e) => (AnomalyKind::FaultNotInjected, e.clone()),
        };
        report.add(
            kind,
            format!(
                "node {} at {} ms after {}: {detail}",
                n.node, n.at_ms, n.action
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::history::{
        Assignment, ChurnOp, Commit, CommittedRead, Drain, FinalMetadata, NemesisEvent, Poll,
        Progress, Recovery, Send,
    };
    use super::*;

    fn ack(process: u32, value: &str, partition: i32, offset: i64) -> Send {
        Send {
            at_ms: 0,
            done_ms: 0,
            process,
            value: value.to_owned(),
            partition,
            outcome: SendOutcome::Ack { offset, node: 1 },
        }
    }

    fn poll(process: u32, partition: i32, records: &[(i64, &str)]) -> Poll {
        Poll {
            at_ms: 0,
            process,
            partition,
            records: records.iter().map(|(o, v)| (*o, (*v).to_owned())).collect(),
        }
    }

    /// Two partitions, four acknowledged values, read in full by one
    /// consumer and the drain; healed at once.
    fn valid() -> History {
        History {
            partitions: 2,
            sends: vec![
                ack(1, "a", 0, 0),
                ack(1, "b", 0, 1),
                ack(2, "c", 1, 0),
                ack(2, "d", 1, 1),
            ],
            polls: vec![
                poll(10, 0, &[(0, "a")]),
                poll(10, 0, &[(1, "b")]),
                poll(10, 1, &[(0, "c"), (1, "d")]),
            ],
            nemesis: vec![],
            recovery: Some(Recovery {
                healed_at_ms: 100,
                ready_after_ms: Some(10),
                last_state: String::new(),
            }),
            drain: Some(Drain {
                elapsed_ms: 5,
                records: BTreeMap::from([
                    (0, vec![(0, "a".to_owned()), (1, "b".to_owned())]),
                    (1, vec![(0, "c".to_owned()), (1, "d".to_owned())]),
                ]),
                incomplete: BTreeMap::new(),
            }),
            ..History::default()
        }
    }

    /// The records the drain of `history` read from `partition`.
    fn drained(history: &mut History, partition: i32) -> &mut Vec<(i64, String)> {
        let drain = history.drain.as_mut().expect("a drain");
        drain
            .records
            .get_mut(&partition)
            .expect("a drained partition")
    }

    /// Asserts that `history` has exactly the anomaly kinds `kinds`.
    #[track_caller]
    fn assert_kinds(history: &History, kinds: &[AnomalyKind]) -> Report {
        let report = check(history);
        let found: Vec<AnomalyKind> = report.anomalies.keys().copied().collect();
        assert_eq!(found, kinds, "{report:#?}");
        report
    }

    #[test]
    fn a_valid_history_has_no_anomaly() {
        let report = assert_kinds(&valid(), &[]);
        assert!(report.is_valid());
        assert_eq!(report.summary(), "none");
    }

    #[test]
    fn an_acknowledged_value_missing_from_the_drain_is_a_lost_write() {
        let mut history = valid();
        drained(&mut history, 0).pop();
        let report = assert_kinds(&history, &[AnomalyKind::LostWrite]);
        assert!(report.anomalies[&AnomalyKind::LostWrite][0].starts_with("b "));
    }

    #[test]
    fn a_read_value_missing_from_the_drain_is_a_lost_write_whatever_its_send() {
        let mut history = valid();
        history.sends[3].outcome = SendOutcome::Unknown {
            error: "timeout".into(),
        };
        drained(&mut history, 1).pop();
        let report = assert_kinds(&history, &[AnomalyKind::LostWrite]);
        assert_eq!(report.count(AnomalyKind::LostWrite), 1, "{report:#?}");
        assert!(report.anomalies[&AnomalyKind::LostWrite][0].starts_with("d read by c10"));
    }

    #[test]
    fn an_unknown_or_failed_send_missing_from_the_drain_is_no_loss() {
        let mut history = valid();
        for (value, outcome) in [
            (
                "u",
                SendOutcome::Unknown {
                    error: "timeout".into(),
                },
            ),
            (
                "f",
                SendOutcome::Fail {
                    error: "NOT_ENOUGH_REPLICAS".into(),
                },
            ),
        ] {
            history.sends.push(Send {
                at_ms: 0,
                done_ms: 0,
                process: 1,
                value: value.into(),
                partition: 0,
                outcome,
            });
        }
        assert_kinds(&history, &[]);
    }

    #[test]
    fn a_lost_write_on_an_undrained_partition_is_reported_as_an_incomplete_drain() {
        let mut history = valid();
        let drain = history.drain.as_mut().unwrap();
        drain.records.remove(&1);
        drain.incomplete.insert(1, "NOT_LEADER_OR_FOLLOWER".into());
        assert_kinds(&history, &[AnomalyKind::DrainIncomplete]);
    }

    #[test]
    fn one_value_at_two_offsets_is_a_duplicate() {
        let mut history = valid();
        drained(&mut history, 1).push((2, "a".into()));
        history.polls.push(poll(10, 1, &[(2, "a")]));
        assert_kinds(&history, &[AnomalyKind::Duplicate]);
    }

    #[test]
    fn one_offset_with_two_values_is_inconsistent() {
        let mut history = valid();
        // A second consumer reads another value at partition 0 offset 1.
        history.polls.push(poll(11, 0, &[(0, "a"), (1, "x")]));
        history.sends.push(Send {
            at_ms: 0,
            done_ms: 0,
            process: 3,
            value: "x".into(),
            partition: 0,
            outcome: SendOutcome::Unknown {
                error: "timeout".into(),
            },
        });
        // x was read (committed) but the drain has b there: also lost.
        let report = assert_kinds(
            &history,
            &[AnomalyKind::LostWrite, AnomalyKind::InconsistentOffset],
        );
        assert!(report.anomalies[&AnomalyKind::InconsistentOffset][0].contains("offset 1"));
    }

    #[test]
    fn an_acknowledged_offset_another_value_holds_is_inconsistent() {
        let mut history = valid();
        history.sends[1] = ack(1, "b", 0, 0);
        let kinds = check(&history);
        assert!(
            kinds.count(AnomalyKind::InconsistentOffset) >= 1,
            "{kinds:#?}"
        );
        assert_eq!(kinds.count(AnomalyKind::NonmonotonicSend), 1, "{kinds:#?}");
    }

    #[test]
    fn a_producers_offsets_going_back_is_a_nonmonotonic_send() {
        let mut history = valid();
        history.sends.swap(0, 1);
        assert_kinds(&history, &[AnomalyKind::NonmonotonicSend]);
    }

    #[test]
    fn a_consumer_reading_backwards_is_a_nonmonotonic_poll() {
        let mut history = valid();
        history.polls.push(poll(10, 0, &[(0, "a")]));
        assert_kinds(&history, &[AnomalyKind::NonmonotonicPoll]);
    }

    #[test]
    fn another_consumer_starting_over_is_no_nonmonotonic_poll() {
        let mut history = valid();
        history.polls.push(poll(11, 0, &[(0, "a"), (1, "b")]));
        assert_kinds(&history, &[]);
    }

    #[test]
    fn a_consumer_jumping_over_an_existing_record_is_a_poll_skip() {
        let mut history = valid();
        history.polls = vec![poll(10, 0, &[(1, "b")]), poll(10, 1, &[(0, "c"), (1, "d")])];
        let report = assert_kinds(&history, &[AnomalyKind::PollSkip]);
        assert!(report.anomalies[&AnomalyKind::PollSkip][0].contains("skipping 0"));
    }

    #[test]
    fn a_value_never_sent_is_unexpected() {
        let mut history = valid();
        drained(&mut history, 0).push((2, "z".into()));
        assert_kinds(&history, &[AnomalyKind::UnexpectedValue]);
    }

    #[test]
    fn a_read_value_whose_send_failed_is_reported() {
        let mut history = valid();
        history.sends.push(Send {
            at_ms: 0,
            done_ms: 0,
            process: 1,
            value: "f".into(),
            partition: 0,
            outcome: SendOutcome::Fail {
                error: "NOT_ENOUGH_REPLICAS".into(),
            },
        });
        drained(&mut history, 0).push((2, "f".into()));
        assert_kinds(&history, &[AnomalyKind::FailedWriteRead]);
    }

    #[test]
    fn a_slow_or_missing_recovery_is_unavailable_after_heal() {
        let mut history = valid();
        history.recovery.as_mut().unwrap().ready_after_ms = None;
        assert_kinds(&history, &[AnomalyKind::UnavailableAfterHeal]);
        history.recovery.as_mut().unwrap().ready_after_ms = Some(RECOVERY_BOUND_MS + 1);
        assert_kinds(&history, &[AnomalyKind::UnavailableAfterHeal]);
        history.recovery = None;
        assert_kinds(&history, &[AnomalyKind::UnavailableAfterHeal]);
    }

    #[test]
    fn a_slow_or_missing_drain_is_incomplete() {
        let mut history = valid();
        history.drain.as_mut().unwrap().elapsed_ms = DRAIN_BOUND_MS + 1;
        assert_kinds(&history, &[AnomalyKind::DrainIncomplete]);
        history.drain = None;
        assert_kinds(&history, &[AnomalyKind::DrainIncomplete]);
    }

    #[test]
    fn node_problems_are_reported_by_kind() {
        let mut history = valid();
        for (action, problem) in [
            ("SIGTERM", NodeProblem::SigtermHang),
            (
                "SIGTERM",
                NodeProblem::SigtermExitStatus("exit status: 1".into()),
            ),
            ("restart", NodeProblem::RestartFailed("port in use".into())),
            (
                "fsync EIO",
                NodeProblem::NoHaltOnDiskError("still running".into()),
            ),
            (
                "power loss",
                NodeProblem::FaultNotInjected("no journal".into()),
            ),
        ] {
            history.nemesis.push(NemesisEvent {
                at_ms: 5,
                node: 2,
                action: action.into(),
                problem: Some(problem),
            });
        }
        history.nemesis.push(NemesisEvent {
            at_ms: 6,
            node: 3,
            action: "SIGKILL".into(),
            problem: None,
        });
        let report = assert_kinds(
            &history,
            &[
                AnomalyKind::SigtermHang,
                AnomalyKind::SigtermExitStatus,
                AnomalyKind::RestartFailed,
                AnomalyKind::NoHaltOnDiskError,
                AnomalyKind::FaultNotInjected,
            ],
        );
        assert_eq!(
            report.summary(),
            "sigterm-hang=1 sigterm-exit-status=1 restart-failed=1 \
             no-halt-on-disk-error=1 fault-not-injected=1"
        );
    }

    fn watched(sent_ms: u64, received_ms: u64, node: i32, observed: Observed) -> Observation {
        Observation {
            sent_ms,
            received_ms,
            node,
            observed,
        }
    }

    fn hw(partition: i32, offset: i64, leader_epoch: i32) -> Observed {
        Observed::HighWatermark {
            partition,
            offset,
            leader_epoch,
        }
    }

    #[test]
    fn a_high_watermark_below_an_earlier_answer_of_its_epoch_is_a_regression() {
        let mut history = valid();
        history.observations = vec![
            watched(90, 100, 1, hw(0, 10, 3)),
            // Sent before the first answer arrived: may be older.
            watched(95, 130, 1, hw(0, 9, 3)),
            // A deposed leader of an older epoch may still answer stale.
            watched(200, 210, 2, hw(0, 5, 2)),
        ];
        assert_kinds(&history, &[]);
        history.observations.push(watched(150, 160, 1, hw(0, 8, 3)));
        let report = assert_kinds(&history, &[AnomalyKind::HighWatermarkRegression]);
        assert_eq!(report.count(AnomalyKind::HighWatermarkRegression), 1);
        // A newer epoch must not go below an older epoch's answer either.
        history.observations.pop();
        history.observations.push(watched(300, 310, 3, hw(0, 7, 4)));
        assert_kinds(&history, &[AnomalyKind::HighWatermarkRegression]);
    }

    #[test]
    fn a_high_watermark_at_or_below_an_acknowledged_offset_is_a_regression() {
        let mut history = valid();
        history.sends[1].done_ms = 300; // "b" at offset 1 of partition 0, by node 1
        history.observations = vec![
            watched(100, 110, 1, hw(0, 1, 3)),
            // Sent before the acknowledgement arrived.
            watched(290, 320, 1, hw(0, 1, 3)),
            watched(330, 340, 1, hw(0, 2, 3)),
        ];
        assert_kinds(&history, &[]);
        history.observations.push(watched(350, 360, 1, hw(0, 1, 3)));
        assert_kinds(&history, &[AnomalyKind::HighWatermarkRegression]);
    }

    /// Seed 5005 (bridge via node 3 cutting nodes 1 and 2 apart): node 3
    /// became leader of partition 1 in epoch 9 and acknowledged offsets
    /// 744-757 before the watcher heard of epoch 9; node 2, the deposed
    /// epoch 8 leader cut off from the controller, went on answering its
    /// old high watermark 743 in epoch 8, as a deposed Kafka leader may.
    /// The checker took the acknowledgements for epoch 8 (the newest it had
    /// seen) and reported an hw-regression.
    #[test]
    fn chaos_seed_5005_a_deposed_leader_may_answer_below_an_ack_of_the_next_epoch() {
        let mut history = valid();
        history.sends[1].done_ms = 300; // "b" at offset 1 of partition 0
        history.sends[1].outcome = SendOutcome::Ack { offset: 1, node: 3 };
        history.observations = vec![
            watched(100, 101, 2, hw(0, 1, 8)),
            watched(310, 311, 3, hw(0, 2, 9)),
            // The deposed leader, after the acknowledgement in epoch 9.
            watched(320, 321, 2, hw(0, 1, 8)),
        ];
        assert_kinds(&history, &[]);
        // Had node 2 acknowledged it in epoch 8, its epoch 8 answers would
        // have to include it.
        history.sends[1].outcome = SendOutcome::Ack { offset: 1, node: 2 };
        assert_kinds(&history, &[AnomalyKind::HighWatermarkRegression]);
    }

    /// Seed 6009: node 2 appended offset 435 as the epoch 6 leader and was
    /// paused before it was committed; node 3, leader in epoch 7, took the
    /// producer's retry as a duplicate and acknowledged it with the
    /// original offset, whose batch still carries epoch 6. Node 2, resumed
    /// but cut off from the news, answered its epoch 6 high watermark 435.
    /// Taking the batch's epoch for the acknowledgement's made that an
    /// hw-regression.
    #[test]
    fn chaos_seed_6009_a_duplicate_acknowledged_by_a_new_leader_is_no_floor_for_the_old_one() {
        let mut history = valid();
        history.sends[1].done_ms = 300;
        history.sends[1].outcome = SendOutcome::Ack { offset: 1, node: 3 };
        history.observations = vec![
            watched(100, 101, 2, hw(0, 1, 6)),
            watched(290, 291, 3, hw(0, 2, 7)),
            // The acknowledging node's first answer after the ack: epoch 7.
            watched(
                400,
                401,
                3,
                Observed::Leader {
                    partition: 0,
                    leader: 3,
                    leader_epoch: 7,
                },
            ),
            watched(500, 501, 2, hw(0, 1, 6)),
        ];
        assert_kinds(&history, &[]);
        // A new leader of epoch 8 answering below it is a regression.
        history.observations.push(watched(600, 601, 1, hw(0, 1, 8)));
        assert_kinds(&history, &[AnomalyKind::HighWatermarkRegression]);
        // Without any later answer of the acknowledging node the epoch of
        // the acknowledgement is unknown: no floor.
        history.observations.retain(|o| o.node != 3);
        assert_kinds(&history, &[]);
    }

    #[test]
    fn leader_and_quorum_epochs_going_back_at_one_node_are_regressions() {
        let leader = |leader, leader_epoch| Observed::Leader {
            partition: 0,
            leader,
            leader_epoch,
        };
        let mut history = valid();
        history.observations = vec![
            watched(10, 11, 1, leader(1, 3)),
            watched(20, 21, 2, leader(2, 4)),
            // Another node may lag behind.
            watched(30, 31, 3, leader(1, 3)),
            watched(
                40,
                41,
                1,
                Observed::Quorum {
                    leader: 2,
                    epoch: 7,
                },
            ),
        ];
        assert_kinds(&history, &[]);
        history.observations.push(watched(50, 51, 2, leader(1, 3)));
        history.observations.push(watched(
            60,
            61,
            1,
            Observed::Quorum {
                leader: 2,
                epoch: 6,
            },
        ));
        assert_kinds(
            &history,
            &[
                AnomalyKind::LeaderEpochRegression,
                AnomalyKind::QuorumEpochRegression,
            ],
        );
    }

    #[test]
    fn two_leaders_named_in_one_epoch_are_split_brain() {
        let mut history = valid();
        let leader = |leader| Observed::Leader {
            partition: 1,
            leader,
            leader_epoch: 5,
        };
        history.observations = vec![
            watched(10, 11, 1, leader(-1)),
            watched(20, 21, 1, leader(2)),
            watched(30, 31, 3, leader(2)),
        ];
        assert_kinds(&history, &[]);
        history.observations.push(watched(40, 41, 3, leader(3)));
        let report = assert_kinds(&history, &[AnomalyKind::TwoLeaders]);
        assert!(
            report.anomalies[&AnomalyKind::TwoLeaders][0].contains("partition 1 epoch 5"),
            "{report:#?}"
        );
        history.observations = vec![
            watched(
                10,
                11,
                1,
                Observed::Quorum {
                    leader: 1,
                    epoch: 2,
                },
            ),
            watched(
                20,
                21,
                2,
                Observed::Quorum {
                    leader: 2,
                    epoch: 2,
                },
            ),
        ];
        assert_kinds(&history, &[AnomalyKind::TwoLeaders]);
    }

    #[test]
    fn clients_without_progress_once_healthy_are_stuck() {
        let mut history = valid();
        history.producers = 2;
        history.consumers = 2;
        for s in &mut history.sends {
            s.done_ms = 200;
        }
        for p in &mut history.polls {
            p.at_ms = 200;
        }
        history.polls[0].process = 1001; // consumer thread 1
        history.polls[1].process = 1001;
        history.polls[2].process = 1102; // consumer thread 2, restarted
        history.progress = Some(Progress {
            healthy_at_ms: 150,
            stopped_at_ms: 250,
        });
        assert_kinds(&history, &[]);
        history.sends[2].done_ms = 100; // p2's acknowledgements
        history.sends[3].done_ms = 100;
        history.polls[2].at_ms = 100;
        let report = assert_kinds(
            &history,
            &[AnomalyKind::StuckProducer, AnomalyKind::StuckConsumer],
        );
        assert!(report.anomalies[&AnomalyKind::StuckProducer][0].starts_with("p2:"));
        assert!(report.anomalies[&AnomalyKind::StuckConsumer][0].contains("thread 2"));
    }

    fn churned(op: Churn, outcome: ChurnOutcome) -> ChurnOp {
        ChurnOp {
            at_ms: 0,
            done_ms: 0,
            op,
            outcome,
        }
    }

    fn topic(name: &str) -> String {
        name.to_owned()
    }

    /// Churn ops: churn-1 created and grown to 2 partitions, churn-2
    /// created and deleted, churn-3 refused, churn-4 unknown; both nodes
    /// list churn-1 (2 partitions) and churn-4.
    fn churn_history() -> History {
        let mut history = valid();
        history.churn = vec![
            churned(
                Churn::Create {
                    topic: topic("churn-1"),
                },
                ChurnOutcome::Ok,
            ),
            churned(
                Churn::AddPartitions {
                    topic: topic("churn-1"),
                    count: 2,
                },
                ChurnOutcome::Ok,
            ),
            churned(
                Churn::Create {
                    topic: topic("churn-2"),
                },
                ChurnOutcome::Ok,
            ),
            churned(
                Churn::Delete {
                    topic: topic("churn-2"),
                },
                ChurnOutcome::Ok,
            ),
            churned(
                Churn::Create {
                    topic: topic("churn-3"),
                },
                ChurnOutcome::Fail("InvalidReplicationFactor".into()),
            ),
            churned(
                Churn::Create {
                    topic: topic("churn-4"),
                },
                ChurnOutcome::Unknown("timed out".into()),
            ),
            churned(
                Churn::ElectLeaders {
                    topic: topic("queue"),
                },
                ChurnOutcome::Ok,
            ),
        ];
        let listed = BTreeMap::from([(topic("churn-1"), 2), (topic("churn-4"), 1)]);
        history.final_metadata = Some(FinalMetadata {
            nodes: BTreeMap::from([(1, Ok(listed.clone())), (2, Ok(listed))]),
        });
        history
    }

    fn listed_by(history: &mut History, node: i32) -> &mut BTreeMap<String, i32> {
        history
            .final_metadata
            .as_mut()
            .unwrap()
            .nodes
            .get_mut(&node)
            .unwrap()
            .as_mut()
            .unwrap()
    }

    #[test]
    fn metadata_matching_the_acknowledged_churn_has_no_anomaly() {
        assert_kinds(&churn_history(), &[]);
        let mut history = churn_history();
        for node in [1, 2] {
            listed_by(&mut history, node).remove("churn-4");
        }
        assert_kinds(&history, &[]);
    }

    #[test]
    fn an_acknowledged_topic_or_partition_missing_is_lost() {
        let mut history = churn_history();
        listed_by(&mut history, 2).remove("churn-1");
        assert_kinds(
            &history,
            &[AnomalyKind::LostTopic, AnomalyKind::MetadataDivergence],
        );
        let mut history = churn_history();
        for node in [1, 2] {
            listed_by(&mut history, node).insert(topic("churn-1"), 1);
        }
        assert_kinds(&history, &[AnomalyKind::LostPartitions]);
    }

    #[test]
    fn a_deleted_topic_or_a_refused_one_listed_is_reported() {
        let mut history = churn_history();
        for node in [1, 2] {
            listed_by(&mut history, node).insert(topic("churn-2"), 1);
        }
        assert_kinds(&history, &[AnomalyKind::ResurrectedTopic]);
        let mut history = churn_history();
        for node in [1, 2] {
            listed_by(&mut history, node).insert(topic("churn-3"), 1);
            listed_by(&mut history, node).insert(topic("churn-9"), 1);
        }
        let report = assert_kinds(&history, &[AnomalyKind::FailedOpApplied]);
        assert_eq!(report.count(AnomalyKind::FailedOpApplied), 4);
    }

    #[test]
    fn a_node_without_an_answer_is_a_divergence() {
        let mut history = churn_history();
        history
            .final_metadata
            .as_mut()
            .unwrap()
            .nodes
            .insert(3, Err("connection refused".into()));
        assert_kinds(&history, &[AnomalyKind::MetadataDivergence]);
    }

    fn commit(
        process: u32,
        at_ms: u64,
        done_ms: u64,
        offset: i64,
        outcome: CommitOutcome,
    ) -> Commit {
        Commit {
            at_ms,
            done_ms,
            process,
            generation: 1,
            offsets: BTreeMap::from([(0, offset)]),
            outcome,
        }
    }

    fn committed(process: u32, sent_ms: u64, offset: i64) -> CommittedRead {
        CommittedRead {
            sent_ms,
            received_ms: sent_ms + 1,
            process,
            offsets: BTreeMap::from([(0, offset)]),
        }
    }

    /// A group history: member g1 committed 1 then 2 (acknowledged), a
    /// later commit of 5 was refused and one of 3 has no answer.
    fn group_history() -> History {
        let mut history = valid();
        history.group_members = 1;
        history.commits = vec![
            commit(1, 10, 20, 1, CommitOutcome::Ok),
            commit(1, 30, 40, 2, CommitOutcome::Ok),
            commit(
                1,
                50,
                60,
                5,
                CommitOutcome::Fail("IllegalGeneration".into()),
            ),
            commit(1, 70, 80, 3, CommitOutcome::Unknown("timeout".into())),
        ];
        history.committed_reads = vec![committed(1, 5, -1), committed(0, 200, 2)];
        history
    }

    #[test]
    fn a_final_committed_offset_an_acknowledged_commit_overwrote_is_a_regression() {
        let mut history = group_history();
        assert_kinds(&history, &[]);
        // The possibly applied commit of 3 may be the last write.
        history.committed_reads[1].offsets.insert(0, 3);
        assert_kinds(&history, &[]);
        // 1 was overwritten by the acknowledged 2, which began after it ended.
        history.committed_reads[1].offsets.insert(0, 1);
        let report = assert_kinds(&history, &[AnomalyKind::CommittedOffsetRegression]);
        assert!(
            report.anomalies[&AnomalyKind::CommittedOffsetRegression][0]
                .contains("kept offset 1, but g1 committed 2"),
            "{report:#?}"
        );
        // Nothing committed at all, after acknowledged commits: lost.
        history.committed_reads[1].offsets.insert(0, -1);
        assert_kinds(&history, &[AnomalyKind::CommittedOffsetRegression]);
        // A commit of 1 concurrent with the commit of 2 may win.
        history
            .commits
            .push(commit(2, 35, 45, 1, CommitOutcome::Ok));
        history.committed_reads[1].offsets.insert(0, 1);
        assert_kinds(&history, &[]);
    }

    #[test]
    fn a_committed_offset_no_commit_wrote_is_a_regression_even_for_a_member() {
        let mut history = group_history();
        // Refused: never written.
        history.committed_reads.push(committed(1, 100, 5));
        assert_kinds(&history, &[AnomalyKind::CommittedOffsetRegression]);
        // A member's stale read of an overwritten offset is allowed (a
        // cut-off coordinator may answer from its cache).
        history.committed_reads.pop();
        history.committed_reads.push(committed(1, 100, 1));
        assert_kinds(&history, &[]);
    }

    #[test]
    fn a_missing_final_committed_read_is_an_incomplete_drain() {
        let mut history = group_history();
        history.committed_reads.retain(|r| r.process != 0);
        assert_kinds(&history, &[AnomalyKind::DrainIncomplete]);
    }

    #[test]
    fn a_member_starting_past_an_uncommitted_record_skips_it() {
        let mut history = group_history();
        history.assignments = vec![Assignment {
            at_ms: 1,
            process: 7,
            partition: 0,
            start: 1,
        }];
        history.polls.push(poll(7, 0, &[(1, "b")]));
        assert_kinds(&history, &[]);
        history.polls.pop();
        history.assignments[0].start = 0;
        history.polls.push(poll(7, 0, &[(1, "b")]));
        assert_kinds(&history, &[AnomalyKind::PollSkip]);
    }

    #[test]
    fn a_group_without_an_acknowledged_commit_once_healthy_is_stuck() {
        let mut history = group_history();
        history.progress = Some(Progress {
            healthy_at_ms: 35,
            stopped_at_ms: 300,
        });
        assert_kinds(&history, &[]);
        history.progress = Some(Progress {
            healthy_at_ms: 45,
            stopped_at_ms: 300,
        });
        let report = assert_kinds(&history, &[AnomalyKind::StuckConsumer]);
        assert!(
            report.anomalies[&AnomalyKind::StuckConsumer][0].contains("consumer group"),
            "{report:#?}"
        );
    }
}
