//! The replication simulation's invariants, each a pure function over what
//! the driver observed after a step: the replicas' batches (offset, leader
//! epoch, value) and high watermarks, the controller's registration, the
//! batches acknowledged to the producer, and every high watermark the
//! leader had. A function returns the first violation it finds as a
//! message. The unit tests at the bottom feed each one a hand-made bad
//! history, so each is shown able to fail.

use std::collections::{BTreeMap, BTreeSet};

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
}

/// One replica as observed after a step.
#[derive(Debug, Clone)]
pub struct ReplicaView {
    pub broker: i32,
    pub high_watermark: i64,
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
/// acknowledged batch at its offset with its value.
pub fn no_acknowledged_batch_lost(acked: &[Ack], leader: &ReplicaView) -> Result<(), String> {
    for ack in acked {
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
/// high watermark equal the leader's at the same offsets (value and epoch).
///
/// Except the batches whose values are in `lost_unsynced`: those a leader
/// lost to a power loss while they were below its high watermark and not
/// yet fsynced on it (only possible when it was the ISR's last member,
/// with `min.insync.replicas=1`). That is a documented limit of the
/// durable mode (ARCHITECTURE.md, "What is guaranteed": the high watermark
/// may cover acks=0/1 records not yet fsynced on the leader); such a batch
/// was never acknowledged to an acks=all producer, which
/// [`no_acknowledged_batch_lost`] checks.
pub fn committed_prefixes_identical(
    leader: &ReplicaView,
    replicas: &[ReplicaView],
    lost_unsynced: &BTreeSet<Vec<u8>>,
) -> Result<(), String> {
    for replica in replicas {
        for batch in replica
            .batches
            .iter()
            .filter(|b| b.offset < replica.high_watermark && !lost_unsynced.contains(&b.value))
        {
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

/// The leader is always a member of the ISR, in the controller's
/// registration and in the leader's own committed view (no ELR).
pub fn leader_in_isr(
    leader: i32,
    controller_isr: &[i32],
    leader_isr: &[i32],
) -> Result<(), String> {
    if !controller_isr.contains(&leader) {
        return Err(format!(
            "leader {leader} not in the controller's ISR {controller_isr:?}"
        ));
    }
    if !leader_isr.contains(&leader) {
        return Err(format!("leader {leader} not in its own ISR {leader_isr:?}"));
    }
    Ok(())
}

/// After the heal, every replica's log is byte for byte the same.
/// `logs` is `(broker, bytes of the whole log)`.
pub fn logs_identical(logs: &[(i32, Vec<u8>)]) -> Result<(), String> {
    let Some((first, reference)) = logs.first() else {
        return Ok(());
    };
    for (broker, bytes) in &logs[1..] {
        if bytes != reference {
            let at = bytes
                .iter()
                .zip(reference)
                .position(|(a, b)| a != b)
                .unwrap_or(bytes.len().min(reference.len()));
            return Err(format!(
                "broker {broker}'s log ({} bytes) differs from broker {first}'s ({} bytes) \
                 from byte {at}",
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

    fn view(broker: i32, high_watermark: i64, batches: &[Batch]) -> ReplicaView {
        ReplicaView {
            broker,
            high_watermark,
            batches: batches.to_vec(),
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
        let acked = [Ack {
            offset: 1,
            value: b"b".to_vec(),
        }];
        let leader = view(1, 2, &[batch(0, 0, "a"), batch(1, 0, "b")]);
        assert!(no_acknowledged_batch_lost(&acked, &leader).is_ok());
        let truncated = view(1, 1, &[batch(0, 0, "a")]);
        assert!(no_acknowledged_batch_lost(&acked, &truncated)
            .unwrap_err()
            .contains("missing"));
        let replaced = view(1, 2, &[batch(0, 0, "a"), batch(1, 1, "x")]);
        assert!(no_acknowledged_batch_lost(&acked, &replaced).is_err());
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
    }

    #[test]
    fn a_leader_outside_the_isr_is_caught() {
        assert!(leader_in_isr(1, &[1, 2], &[1, 2]).is_ok());
        assert!(leader_in_isr(1, &[2, 3], &[1, 2, 3]).is_err());
        assert!(leader_in_isr(1, &[1, 2], &[2]).is_err());
    }

    #[test]
    fn logs_that_differ_after_the_heal_are_caught() {
        assert!(logs_identical(&[(1, vec![1, 2]), (2, vec![1, 2]), (3, vec![1, 2])]).is_ok());
        let error = logs_identical(&[(1, vec![1, 2]), (2, vec![1, 2]), (3, vec![1])]).unwrap_err();
        assert!(
            error.contains("broker 3") && error.contains("byte 1"),
            "{error}"
        );
        assert!(logs_identical(&[(1, vec![1, 2]), (2, vec![1, 3])]).is_err());
    }
}
