//! The replication simulation's invariants, each a pure function over what
//! the driver observed: the replicas' batches (offset, leader epoch, value),
//! high watermarks and log start offsets, the controller's partition
//! registrations, the batches acknowledged to the producer, and every high
//! watermark a leader had. A function returns the first violation it finds
//! as a message. The unit tests at the bottom feed each one a hand-made bad
//! history, so each is shown able to fail.

use std::collections::{BTreeMap, BTreeSet};

use weir_controller::{LeaderRecoveryState, PartitionRegistration};

use crate::logs::RawBatch;

/// One stored batch of one record (the simulation's producer writes one
/// record per batch): its offset, the leader epoch in its header and the
/// record's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub offset: i64,
    pub epoch: i32,
    pub value: Vec<u8>,
}

/// A batch the producer was told is written (acks=all succeeded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub offset: i64,
    pub value: Vec<u8>,
    /// The step that appended it on the leader.
    pub produced_step: usize,
    /// The step after which it was acknowledged.
    pub acked_step: usize,
}

/// One replica as observed after a step.
#[derive(Debug, Clone)]
pub struct ReplicaView {
    pub broker: i32,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub batches: Vec<Batch>,
}

/// The leader's high watermark never decreases within a leader epoch
/// (Kafka's `Partition.maybeIncrementLeaderHW` only raises it).
/// `observed` is `(step, leader_epoch, high_watermark)` in step order.
pub fn high_watermark_monotonic_per_epoch(observed: &[(usize, i32, i64)]) -> Result<(), String> {
    let mut last: BTreeMap<i32, (usize, i64)> = BTreeMap::new();
    for &(step, epoch, high_watermark) in observed {
        if let Some(&(at, before)) = last.get(&epoch) {
            if high_watermark < before {
                return Err(format!(
                    "leader epoch {epoch}: high watermark {before} at step {at} fell to \
                     {high_watermark} at step {step}"
                ));
            }
        }
        last.insert(epoch, (step, high_watermark));
    }
    Ok(())
}

/// No acknowledged record is lost: the leader's log holds every
/// acknowledged batch at its offset with its value, except below its log
/// start offset (DeleteRecords and retention remove records on purpose)
/// and the values in `exempt`.
///
/// `exempt` holds, with `write.caching`, acknowledged values that every
/// replica able to lead (ISR, ELR, last known leader) may have lost to a
/// power loss since the value was written: the documented guarantee of
/// that mode is that an acknowledged write is in the memory of every ISR
/// member and survives the loss of all but one of them, not a power loss
/// of all (ARCHITECTURE.md, "What is guaranteed"). In the durable mode
/// nothing is exempt.
pub fn no_acknowledged_batch_lost(
    acked: &[Ack],
    leader: &ReplicaView,
    exempt: &BTreeSet<Vec<u8>>,
) -> Result<(), String> {
    for ack in acked
        .iter()
        .filter(|a| a.offset >= leader.log_start_offset && !exempt.contains(&a.value))
    {
        match leader.batches.iter().find(|b| b.offset == ack.offset) {
            Some(b) if b.value == ack.value => {}
            found => {
                return Err(format!(
                    "acknowledged {:?} at offset {} is {} on leader {}",
                    String::from_utf8_lossy(&ack.value),
                    ack.offset,
                    found.map_or("missing".to_owned(), |b| format!(
                        "{:?}",
                        String::from_utf8_lossy(&b.value)
                    )),
                    leader.broker
                ))
            }
        }
    }
    Ok(())
}

/// Committed prefixes are identical: every replica's batches below its own
/// high watermark equal the leader's at the same offsets (value and epoch),
/// where the leader still has the offset (at or above its log start).
///
/// Except the batches whose values are in `exempt`: those a replica lost
/// to a power loss while they were below the highest high watermark it had
/// (with `write.caching`, whatever a power loss took), a documented limit
/// (ARCHITECTURE.md, "What is guaranteed": the high watermark may cover
/// records not yet fsynced on the leader, and that leader may lead again,
/// as the last known leader for one); such a batch was never acknowledged
/// in the durable mode, which [`no_acknowledged_batch_lost`] checks.
pub fn committed_prefixes_identical(
    leader: &ReplicaView,
    replicas: &[ReplicaView],
    exempt: &BTreeSet<Vec<u8>>,
) -> Result<(), String> {
    for replica in replicas {
        for batch in replica.batches.iter().filter(|b| {
            b.offset < replica.high_watermark
                && b.offset >= leader.log_start_offset
                && !exempt.contains(&b.value)
        }) {
            let theirs = leader.batches.iter().find(|b| b.offset == batch.offset);
            if theirs != Some(batch) {
                return Err(format!(
                    "broker {} below its high watermark {} has {batch:?}, leader {} has {theirs:?}",
                    replica.broker, replica.high_watermark, leader.broker
                ));
            }
        }
    }
    Ok(())
}

/// In every image the leader (when there is one) is a member of the ISR:
/// the controller elects from the ISR, and a leader it takes from the ELR
/// or as the last known leader becomes the ISR alone.
pub fn leader_in_isr(registration: &PartitionRegistration) -> Result<(), String> {
    if registration.leader >= 0 && !registration.isr.contains(&registration.leader) {
        return Err(format!(
            "leader {} not in the ISR {:?} ({registration:?})",
            registration.leader, registration.isr
        ));
    }
    Ok(())
}

/// A broker that believes it leads is in the ISR it last committed.
pub fn leader_in_own_isr(broker: i32, isr: &[i32]) -> Result<(), String> {
    if !isr.contains(&broker) {
        return Err(format!("leader {broker} not in its own ISR {isr:?}"));
    }
    Ok(())
}

/// Every new leader the controller picks (one partition change, `before`
/// to `after`; `active` are the brokers unfenced and not shutting down
/// after it) is active and a clean choice: a member of the ISR; or, with
/// no other ISR member active, of the ELR (KIP-966: they hold everything
/// below the high watermark); or, with no other ISR or ELR member left
/// active and the ELR now empty, the last known leader, marked RECOVERING
/// (Kafka 4.1's recovery of a partition whose eligible replicas all
/// restarted uncleanly). Any other replica is an unclean election, allowed
/// only when `unclean_allowed` (`unclean.leader.election.enable`), and
/// then marked RECOVERING (KIP-704).
pub fn election_allowed(
    before: &PartitionRegistration,
    after: &PartitionRegistration,
    active: &BTreeSet<i32>,
    unclean_allowed: bool,
) -> Result<(), String> {
    let leader = after.leader;
    if leader < 0 || leader == before.leader {
        return Ok(());
    }
    let others_gone = |set: &[i32]| set.iter().all(|r| *r == leader || !active.contains(r));
    let recovering = after.leader_recovery_state == LeaderRecoveryState::Recovering;
    let clean =
        before.isr.contains(&leader) || (before.elr.contains(&leader) && others_gone(&before.isr));
    let last_known = recovering
        && before.last_known_elr == [leader]
        && after.elr.is_empty()
        && others_gone(&before.isr)
        && others_gone(&before.elr);
    if active.contains(&leader) && (clean || last_known || (recovering && unclean_allowed)) {
        return Ok(());
    }
    Err(format!(
        "unclean election of {leader}: before ISR {:?}, ELR {:?}, last known {:?}, active \
         {active:?}; after {after:?}",
        before.isr, before.elr, before.last_known_elr
    ))
}

/// A replica in the ELR holds every batch acknowledged up to the step at
/// which it entered the ELR (`entered_step`), which were all below the high
/// watermark then (KIP-966: ELR members hold the committed log), except
/// below its own log start offset and the values in `exempt` (see
/// [`no_acknowledged_batch_lost`]).
pub fn elr_member_holds_acknowledged(
    member: &ReplicaView,
    entered_step: usize,
    acked: &[Ack],
    exempt: &BTreeSet<Vec<u8>>,
) -> Result<(), String> {
    for ack in acked.iter().filter(|a| {
        a.acked_step <= entered_step
            && a.offset >= member.log_start_offset
            && !exempt.contains(&a.value)
    }) {
        let held = member
            .batches
            .iter()
            .any(|b| b.offset == ack.offset && b.value == ack.value);
        if !held {
            return Err(format!(
                "broker {} in the ELR since step {entered_step} lacks {:?} at {} acknowledged \
                 at step {}",
                member.broker,
                String::from_utf8_lossy(&ack.value),
                ack.offset,
                ack.acked_step
            ));
        }
    }
    Ok(())
}

/// After the heal, every replica's log is byte for byte the same from the
/// highest log start offset among them (retention runs on each replica).
/// `logs` is `(broker, its log start offset, the batches of its log)`.
pub fn logs_identical(logs: &[(i32, i64, Vec<RawBatch>)]) -> Result<(), String> {
    let start = logs.iter().map(|(_, start, _)| *start).max().unwrap_or(0);
    let from_start = |l: &[RawBatch]| -> Vec<u8> {
        l.iter()
            .filter(|b| b.batch.offset >= start)
            .flat_map(|b| b.bytes.iter().copied())
            .collect()
    };
    let Some((first, _, reference)) = logs.first() else {
        return Ok(());
    };
    let reference = from_start(reference);
    for (broker, _, log) in &logs[1..] {
        let bytes = from_start(log);
        if bytes != reference {
            let at = bytes
                .iter()
                .zip(&reference)
                .position(|(a, b)| a != b)
                .unwrap_or(bytes.len().min(reference.len()));
            return Err(format!(
                "from offset {start}, broker {broker}'s log ({} bytes) differs from broker \
                 {first}'s ({} bytes) from byte {at}",
                bytes.len(),
                reference.len()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(offset: i64, epoch: i32, value: &str) -> Batch {
        Batch {
            offset,
            epoch,
            value: value.as_bytes().to_vec(),
        }
    }

    fn ack(offset: i64, value: &str, acked_step: usize) -> Ack {
        Ack {
            offset,
            value: value.as_bytes().to_vec(),
            produced_step: acked_step,
            acked_step,
        }
    }

    fn view(broker: i32, high_watermark: i64, batches: &[Batch]) -> ReplicaView {
        ReplicaView {
            broker,
            high_watermark,
            log_start_offset: batches.first().map_or(0, |b| b.offset),
            batches: batches.to_vec(),
        }
    }

    fn registration(
        leader: i32,
        isr: &[i32],
        elr: &[i32],
        last_known: &[i32],
    ) -> PartitionRegistration {
        PartitionRegistration {
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
            leader,
            leader_epoch: 1,
            partition_epoch: 1,
            leader_recovery_state: LeaderRecoveryState::Recovered,
            elr: elr.to_vec(),
            last_known_elr: last_known.to_vec(),
        }
    }

    #[test]
    fn a_high_watermark_that_falls_within_an_epoch_is_caught() {
        assert!(high_watermark_monotonic_per_epoch(&[(1, 3, 5), (2, 3, 7), (3, 4, 6)]).is_ok());
        let error =
            high_watermark_monotonic_per_epoch(&[(1, 3, 5), (2, 4, 9), (3, 3, 4)]).unwrap_err();
        assert!(error.contains("epoch 3"), "{error}");
    }

    #[test]
    fn a_lost_or_replaced_acknowledged_batch_is_caught() {
        let none = BTreeSet::new();
        let acked = [ack(1, "b", 1)];
        let leader = view(1, 2, &[batch(0, 0, "a"), batch(1, 0, "b")]);
        assert!(no_acknowledged_batch_lost(&acked, &leader, &none).is_ok());
        let truncated = view(1, 1, &[batch(0, 0, "a")]);
        assert!(no_acknowledged_batch_lost(&acked, &truncated, &none)
            .unwrap_err()
            .contains("missing"));
        let replaced = view(1, 2, &[batch(0, 0, "a"), batch(1, 1, "x")]);
        assert!(no_acknowledged_batch_lost(&acked, &replaced, &none).is_err());
        // Deleted below the log start on purpose, or exempt: not lost.
        let deleted = view(1, 3, &[batch(2, 0, "c")]);
        assert!(no_acknowledged_batch_lost(&acked, &deleted, &none).is_ok());
        let exempt: BTreeSet<Vec<u8>> = [b"b".to_vec()].into();
        assert!(no_acknowledged_batch_lost(&acked, &truncated, &exempt).is_ok());
    }

    #[test]
    fn a_diverging_committed_prefix_is_caught() {
        let none = BTreeSet::new();
        let leader = view(1, 2, &[batch(0, 0, "a"), batch(1, 1, "b")]);
        // Divergence above the follower's high watermark is allowed (it
        // truncates at its next fetch).
        let uncommitted = view(2, 1, &[batch(0, 0, "a"), batch(1, 0, "z")]);
        assert!(committed_prefixes_identical(&leader, &[uncommitted], &none).is_ok());
        let committed = view(2, 2, &[batch(0, 0, "a"), batch(1, 0, "z")]);
        assert!(committed_prefixes_identical(&leader, &[committed], &none).is_err());
        let missing_on_leader = view(
            3,
            3,
            &[batch(0, 0, "a"), batch(1, 1, "b"), batch(2, 1, "c")],
        );
        assert!(committed_prefixes_identical(
            &leader,
            std::slice::from_ref(&missing_on_leader),
            &none
        )
        .is_err());
        // Unless the leader lost "c" unsynced to a power loss.
        let lost: BTreeSet<Vec<u8>> = [b"c".to_vec()].into();
        assert!(committed_prefixes_identical(&leader, &[missing_on_leader], &lost).is_ok());
        // Below the leader's log start there is nothing to compare.
        let trimmed = view(1, 3, &[batch(1, 1, "b"), batch(2, 1, "c")]);
        let old = view(2, 2, &[batch(0, 0, "a"), batch(1, 1, "b")]);
        assert!(committed_prefixes_identical(&trimmed, &[old], &none).is_ok());
    }

    #[test]
    fn a_leader_outside_the_isr_is_caught() {
        assert!(leader_in_isr(&registration(1, &[1, 2], &[], &[])).is_ok());
        assert!(leader_in_isr(&registration(-1, &[], &[2], &[1])).is_ok());
        assert!(leader_in_isr(&registration(1, &[2, 3], &[], &[])).is_err());
        assert!(leader_in_isr(&registration(2, &[], &[2], &[])).is_err());
        assert!(leader_in_own_isr(1, &[1, 2]).is_ok());
        assert!(leader_in_own_isr(1, &[2]).is_err());
    }

    #[test]
    fn an_election_outside_the_isr_elr_and_last_known_leader_is_caught() {
        let recovering = |mut r: PartitionRegistration| {
            r.leader_recovery_state = LeaderRecoveryState::Recovering;
            r
        };
        let all: BTreeSet<i32> = [1, 2, 3].into();
        let without = |gone: &[i32]| -> BTreeSet<i32> {
            all.iter().copied().filter(|b| !gone.contains(b)).collect()
        };
        // From the ISR; from the ELR once the ISR's other members are gone.
        let before = registration(1, &[1, 2], &[], &[]);
        let two = registration(2, &[2], &[], &[]);
        assert!(election_allowed(&before, &two, &without(&[1]), false).is_ok());
        assert!(election_allowed(&before, &two, &without(&[2]), false).is_err());
        let before = registration(1, &[1], &[3], &[]);
        let three = registration(3, &[3], &[], &[]);
        assert!(election_allowed(&before, &three, &without(&[1]), false).is_ok());
        assert!(election_allowed(&before, &three, &all, false).is_err());
        // The last known leader once every ISR and ELR member is gone (here
        // 3, the last ELR member, restarted uncleanly), RECOVERING.
        let before = registration(-1, &[], &[3], &[1]);
        let last_known = recovering(registration(1, &[1], &[], &[]));
        assert!(election_allowed(&before, &last_known, &without(&[3]), false).is_ok());
        assert!(election_allowed(&before, &last_known, &all, false).is_err());
        let not_recovering = registration(1, &[1], &[], &[]);
        assert!(election_allowed(&before, &not_recovering, &without(&[3]), false).is_err());
        // Any other replica: only when unclean elections are enabled.
        let before = registration(-1, &[1], &[], &[]);
        let other = recovering(registration(2, &[2], &[], &[]));
        assert!(election_allowed(&before, &other, &without(&[1]), false).is_err());
        assert!(election_allowed(&before, &other, &without(&[1]), true).is_ok());
        // Never a broker that is not active.
        assert!(election_allowed(&before, &other, &without(&[1, 2]), true).is_err());
    }

    #[test]
    fn an_elr_member_missing_an_acknowledged_batch_is_caught() {
        let none = BTreeSet::new();
        let acked = [ack(0, "a", 3), ack(1, "b", 5), ack(2, "c", 9)];
        let member = view(2, 1, &[batch(0, 0, "a"), batch(1, 0, "b")]);
        // "c" was acknowledged after it entered the ELR at step 5.
        assert!(elr_member_holds_acknowledged(&member, 5, &acked, &none).is_ok());
        let error = elr_member_holds_acknowledged(&member, 9, &acked, &none).unwrap_err();
        assert!(error.contains("\"c\""), "{error}");
        let truncated = view(2, 1, &[batch(0, 0, "a")]);
        assert!(elr_member_holds_acknowledged(&truncated, 5, &acked, &none).is_err());
        let exempt: BTreeSet<Vec<u8>> = [b"b".to_vec()].into();
        assert!(elr_member_holds_acknowledged(&truncated, 5, &acked, &exempt).is_ok());
    }

    #[test]
    fn logs_that_differ_after_the_heal_are_caught() {
        let raw = |offset: i64, bytes: &'static [u8]| RawBatch {
            batch: batch(offset, 0, "x"),
            bytes: bytes::Bytes::from_static(bytes),
        };
        let same = || vec![raw(0, b"ab"), raw(1, b"cd")];
        assert!(logs_identical(&[(1, 0, same()), (2, 0, same()), (3, 0, same())]).is_ok());
        // Retention removed the first batch on one replica only; another
        // is empty, starting at the log end.
        let trimmed = vec![raw(1, b"cd")];
        assert!(logs_identical(&[(1, 0, same()), (2, 1, trimmed), (3, 2, vec![])]).is_ok());
        let short = vec![raw(0, b"ab")];
        let error = logs_identical(&[(1, 0, same()), (2, 0, same()), (3, 0, short)]).unwrap_err();
        assert!(
            error.contains("broker 3") && error.contains("byte 2"),
            "{error}"
        );
        let differs = vec![raw(0, b"ab"), raw(1, b"ce")];
        assert!(logs_identical(&[(1, 0, same()), (2, 0, differs)]).is_err());
        assert!(logs_identical(&[(1, 0, same()), (2, 1, vec![])]).is_err());
    }
}
