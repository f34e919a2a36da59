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
//! Liveness (issue 17): every partition has a leader and its full ISR within
//! [`RECOVERY_BOUND_MS`] of the final heal (`unavailable-after-heal`), the
//! drain reads every partition to its end within [`DRAIN_BOUND_MS`]
//! (`drain-incomplete`), a node exits 0 within 30 s of SIGTERM
//! (`sigterm-hang`, `sigterm-exit-status`), starts again when restarted
//! (`restart-failed`) and halts, exiting non-zero, within 20 s of its
//! `fdatasync`s failing with EIO (`no-halt-on-fsync-error`). A fault the
//! harness could not inject is `fault-not-injected`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::history::{History, NodeProblem, SendOutcome};

/// How long after the final heal every partition must have a leader and
/// its full ISR, ms (issue 17).
pub const RECOVERY_BOUND_MS: u64 = 30_000;
/// How long the final drain may take, ms (issue 17).
pub const DRAIN_BOUND_MS: u64 = 60_000;

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
    /// A node that did not halt when its `fdatasync`s failed.
    NoHaltOnFsyncError,
    /// A fault the harness could not inject.
    FaultNotInjected,
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
            Self::NoHaltOnFsyncError => "no-halt-on-fsync-error",
            Self::FaultNotInjected => "fault-not-injected",
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
    report
}

/// Every (partition, offset, value) observation: acknowledgements, polls and
/// the drain, with where it came from.
fn observations(history: &History) -> Vec<(i32, i64, &str, String)> {
    let mut out = Vec::new();
    for s in &history.sends {
        if let SendOutcome::Ack { offset } = s.outcome {
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
        if let SendOutcome::Ack { offset } = s.outcome {
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
    let mut last: BTreeMap<(u32, i32), i64> = BTreeMap::new();
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
        let SendOutcome::Ack { offset } = s.outcome else {
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
            NodeProblem::NoHaltOnFsyncError(e) => (AnomalyKind::NoHaltOnFsyncError, e.clone()),
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
    use super::super::history::{Drain, NemesisEvent, Poll, Recovery, Send};
    use super::*;

    fn ack(process: u32, value: &str, partition: i32, offset: i64) -> Send {
        Send {
            at_ms: 0,
            process,
            value: value.to_owned(),
            partition,
            outcome: SendOutcome::Ack { offset },
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
                NodeProblem::NoHaltOnFsyncError("still running".into()),
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
                AnomalyKind::NoHaltOnFsyncError,
                AnomalyKind::FaultNotInjected,
            ],
        );
        assert_eq!(
            report.summary(),
            "sigterm-hang=1 sigterm-exit-status=1 restart-failed=1 \
             no-halt-on-fsync-error=1 fault-not-injected=1"
        );
    }
}
