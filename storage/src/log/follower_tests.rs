//! Tests of the follower side of a [`Log`] (issue 16): byte-for-byte
//! follower appends, truncation in every shape, full truncation, crash
//! safety of truncation through the [`FaultyFileSystem`] seam, and the
//! KIP-101/KIP-279 divergence shapes at the log level.

use std::collections::BTreeMap;

use super::fault_tests::{open_log, read_all, setup};
use super::*;
use crate::fs::faulty::{Fault, FaultKind, FaultyFileSystem};
use crate::testutil::{build_batch, empty_header, BatchSpec};

/// `count` records of 20 bytes with timestamps from `ts`; from producer
/// `(id, first sequence)` when given.
fn batch(count: usize, ts: i64, producer: Option<(i64, i32)>) -> Bytes {
    let timestamps: Vec<i64> = (0..count as i64).map(|i| ts + i).collect();
    let mut spec = BatchSpec::new(&timestamps, 20);
    if let Some((id, seq)) = producer {
        spec.producer_id = id;
        spec.producer_epoch = 0;
        spec.base_sequence = seq;
    }
    Bytes::from(build_batch(&spec))
}

/// [`batch`] already carrying its offsets and leader epoch, as a leader
/// would send it.
fn fetched(base_offset: i64, count: usize, epoch: i32) -> Bytes {
    let timestamps: Vec<i64> = (0..count as i64).map(|i| 1000 + i).collect();
    let mut spec = BatchSpec::new(&timestamps, 20);
    spec.base_offset = base_offset;
    spec.partition_leader_epoch = epoch;
    Bytes::from(build_batch(&spec))
}

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 700,
        index_interval_bytes: 150,
        ..LogConfig::default()
    }
}

/// A log under its own temp dir and faulty file system.
struct TestLog {
    _dir: tempfile::TempDir,
    fs: Arc<FaultyFileSystem>,
    log: Log,
}

impl TestLog {
    fn new(config: LogConfig) -> TestLog {
        let (dir, fs) = setup();
        let log = open_log(&fs, dir.path(), config, 0);
        TestLog { _dir: dir, fs, log }
    }

    /// Drops the log, loses power (or only restarts the process) and opens
    /// the log again with `recovery_point`.
    fn reopen(self, power_loss: bool, recovery_point: i64) -> TestLog {
        let TestLog { _dir, fs, log } = self;
        let config = log.config().clone();
        drop(log);
        if power_loss {
            fs.simulate_power_loss().unwrap();
        } else {
            fs.restart();
        }
        let log = open_log(&fs, _dir.path(), config, recovery_point);
        TestLog { _dir, fs, log }
    }
}

/// Copies the leader's batches to the follower from the follower's log end
/// offset, one batch per append (as small fetches would).
fn replicate(leader: &Log, follower: &mut Log) {
    while follower.log_end_offset() < leader.log_end_offset() {
        let info = leader
            .read(follower.log_end_offset(), 1, i64::MAX, true)
            .unwrap();
        let bytes = info.records.unwrap().read_to_bytes().unwrap();
        follower.append_as_follower(&bytes).unwrap();
    }
}

/// Every file of the partition directory, by name, with its contents.
fn dir_files(log: &Log) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(log.dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

/// The leader's history used by several tests: batches of 1-3 records,
/// four per leader epoch from 0, every third from idempotent producer 7.
fn fill_leader(leader: &mut Log, batches: usize) {
    let mut seq = 0;
    for i in 0..batches {
        let count = 1 + i % 3;
        let producer = (i % 3 == 0).then_some((7, seq));
        if producer.is_some() {
            seq += count as i32;
        }
        let epoch = i as i32 / 4;
        leader
            .append_as_leader(&batch(count, 1000 * (i as i64 + 1), producer), epoch, 0)
            .unwrap();
    }
}

#[test]
fn a_follower_copy_is_byte_identical_to_the_leader_files_epochs_and_producers() {
    let mut leader = TestLog::new(small_segments());
    fill_leader(&mut leader.log, 30);
    let mut follower = TestLog::new(small_segments());
    replicate(&leader.log, &mut follower.log);

    assert!(
        leader.log.segment_base_offsets().len() > 3,
        "the test should roll"
    );
    assert_eq!(
        follower.log.segment_base_offsets(),
        leader.log.segment_base_offsets()
    );
    assert_same_log(&follower.log, &leader.log, "after replication");
    assert!(follower.log.producer_state().entry(7).is_some());
    assert_eq!(follower.log.last_fetched_epoch(), leader.log.latest_epoch());
    // Segments, indexes, snapshots and the epoch checkpoint, byte for byte.
    leader.log.flush_for_shutdown().unwrap();
    follower.log.flush_for_shutdown().unwrap();
    assert_eq!(dir_files(&follower.log), dir_files(&leader.log));

    // The copy survives a power loss after its flush and a recovery.
    let follower = follower.reopen(true, 0);
    assert_same_log(&follower.log, &leader.log, "after a power loss");
}

/// The follower holds what the leader holds: the same batches (bytes), log
/// end offset, leader epochs and producer state.
fn assert_same_log(follower: &Log, leader: &Log, context: &str) {
    assert!(
        read_all(follower) == read_all(leader),
        "{context}: bytes differ"
    );
    assert_eq!(
        follower.log_end_offset(),
        leader.log_end_offset(),
        "{context}"
    );
    assert_eq!(
        follower.leader_epoch_cache().entries(),
        leader.leader_epoch_cache().entries(),
        "{context}"
    );
    assert_eq!(
        follower.producer_state().encode_snapshot(),
        leader.producer_state().encode_snapshot(),
        "{context}"
    );
}

#[test]
fn a_fetch_of_many_batches_is_appended_whole_with_every_new_epoch() {
    let mut leader = TestLog::new(LogConfig::default());
    fill_leader(&mut leader.log, 12);
    let mut follower = TestLog::new(LogConfig::default());
    let all = leader.log.read(0, usize::MAX, i64::MAX, true).unwrap();
    let bytes = all.records.unwrap().read_to_bytes().unwrap();
    let info = follower.log.append_as_follower(&bytes).unwrap();
    assert_eq!(
        (info.first_offset, info.last_offset),
        (0, leader.log.log_end_offset() - 1)
    );
    assert_eq!((info.batch_count, info.valid_bytes), (12, bytes.len()));
    assert_eq!(info.record_count as i64, leader.log.log_end_offset());
    // What the broker paces flushes by: the batch bytes each log took in.
    assert_eq!(leader.log.appended_bytes(), bytes.len() as u64);
    assert_eq!(follower.log.appended_bytes(), bytes.len() as u64);
    assert_eq!(read_all(&follower.log), bytes.to_vec());
    assert_eq!(
        follower.log.leader_epoch_cache().entries(),
        leader.log.leader_epoch_cache().entries()
    );
    assert_eq!(follower.log.leader_epoch_cache().entries().len(), 3);
    assert!(follower.log.flush_messages_due() || follower.log.unflushed_messages() > 0);
    assert_eq!(
        follower.log.unflushed_messages(),
        leader.log.log_end_offset()
    );
    // Empty records: a no-op.
    let info = follower.log.append_as_follower(&Bytes::new()).unwrap();
    assert_eq!(info.batch_count, 0);
    assert_eq!(read_all(&follower.log), bytes.to_vec());
    assert_eq!(follower.log.appended_bytes(), bytes.len() as u64);
}

/// One row per follower validation rule (Kafka's `UnifiedLog.append` with
/// `validateAndAssignOffsets` false): the log starts with offsets 0-2.
#[test]
fn follower_appends_are_checked_as_kafka_checks_them() {
    let mut corrupt = fetched(3, 2, 0).to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 1;
    let mut magic_1 = fetched(3, 2, 0).to_vec();
    magic_1[16] = 1;
    let two = |a: Bytes, b: Bytes| Bytes::from([a.to_vec(), b.to_vec()].concat());
    // A compacted leader's batch: last offset delta 4, no record left.
    let compacted = Bytes::from(crate::batch::write_batch(
        &RecordBatchHeader {
            base_offset: 3,
            last_offset_delta: 4,
            partition_leader_epoch: 0,
            records_count: 0,
            ..empty_header()
        },
        &[],
    ));
    let big = fetched(3, 60, 0);
    type Check = fn(&Result<LogAppendInfo, StorageError>) -> bool;
    let rows: Vec<(&str, Bytes, Check, i64)> = vec![
        (
            "overlapping first batch",
            fetched(2, 2, 0),
            |r| {
                matches!(
                    r,
                    Err(StorageError::UnexpectedAppendOffset {
                        first_offset: 2,
                        last_offset: 3,
                        log_end_offset: 3
                    })
                )
            },
            3,
        ),
        (
            "batches out of order",
            two(fetched(3, 3, 0), fetched(5, 2, 0)),
            |r| {
                matches!(
                    r,
                    Err(StorageError::OffsetsOutOfOrder {
                        base_offset: 5,
                        previous_last_offset: 5
                    })
                )
            },
            3,
        ),
        (
            "CRC mismatch",
            Bytes::from(corrupt),
            |r| matches!(r, Err(StorageError::CorruptRecord { .. })),
            3,
        ),
        (
            "magic 1",
            Bytes::from(magic_1),
            |r| matches!(r, Err(StorageError::InvalidRecord { .. })),
            3,
        ),
        (
            "batch cut short",
            fetched(3, 2, 0).slice(..70),
            |r| matches!(r, Err(StorageError::CorruptRecord { .. })),
            3,
        ),
        (
            "larger than segment.bytes",
            two(big.clone(), fetched(63, 60, 0)),
            |r| matches!(r, Err(StorageError::RecordBatchTooLarge { .. })),
            3,
        ),
        (
            "a gap after the log end (compacted leader)",
            fetched(10, 2, 0),
            |r| r.as_ref().is_ok_and(|i| i.first_offset == 10),
            12,
        ),
        (
            "a compacted batch without records",
            compacted,
            |r| {
                r.as_ref()
                    .is_ok_and(|i| i.last_offset == 7 && i.record_count == 0)
            },
            8,
        ),
        (
            "over max.message.bytes (not checked on a follower)",
            big,
            |r| r.is_ok(),
            63,
        ),
    ];
    for (name, records, check, end) in rows {
        let mut t = TestLog::new(LogConfig {
            max_message_bytes: 500,
            segment_bytes: 3000,
            ..LogConfig::default()
        });
        t.log.append_as_follower(&fetched(0, 3, 0)).unwrap();
        let size = t.log.size_in_bytes();
        let result = t.log.append_as_follower(&records);
        assert!(check(&result), "{name}: {result:?}");
        assert_eq!(t.log.log_end_offset(), end, "{name}");
        if result.is_err() {
            assert_eq!(t.log.size_in_bytes(), size, "{name}: nothing appended");
        }
        // Whatever was kept survives a restart.
        let bytes = read_all(&t.log);
        let t = t.reopen(false, 0);
        assert_eq!(read_all(&t.log), bytes, "{name}");
        assert_eq!(t.log.log_end_offset(), end, "{name}");
    }
}

#[test]
fn batches_of_a_higher_epoch_than_the_fetch_are_skipped_kafka_18723() {
    let mut t = TestLog::new(LogConfig::default());
    let records = Bytes::from(
        [
            fetched(0, 2, 3).to_vec(),
            fetched(2, 2, 5).to_vec(),
            fetched(4, 2, 4).to_vec(),
        ]
        .concat(),
    );
    let info = t.log.append_as_follower_in_epoch(&records, 4).unwrap();
    assert_eq!((info.batch_count, info.last_offset), (1, 1));
    assert_eq!(t.log.log_end_offset(), 2);
    let all = t
        .log
        .append_as_follower_in_epoch(&fetched(2, 2, 5), 4)
        .unwrap();
    assert_eq!(all.batch_count, 0);
    assert_eq!(t.log.log_end_offset(), 2);
}

#[test]
fn a_follower_rolls_at_the_first_offset_of_an_append_past_a_gap() {
    let mut t = TestLog::new(LogConfig {
        segment_bytes: 200,
        ..LogConfig::default()
    });
    t.log.append_as_follower(&fetched(0, 3, 0)).unwrap();
    t.log.append_as_follower(&fetched(100, 3, 0)).unwrap();
    assert_eq!(t.log.segment_base_offsets(), vec![0, 100]);
    assert_eq!(t.log.log_end_offset(), 103);
    let bytes = read_all(&t.log);
    let t = t.reopen(false, 0);
    assert_eq!(read_all(&t.log), bytes);
    assert_eq!(t.log.log_end_offset(), 103);
}

/// The batches of a log as `(base offset, last offset, bytes)`.
fn batches_of(log: &Log) -> Vec<(i64, i64, Vec<u8>)> {
    let bytes = read_all(log);
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let h = RecordBatchHeader::parse(&bytes[pos..]).unwrap();
        let end = pos + h.size_in_bytes();
        out.push((h.base_offset, h.last_offset(), bytes[pos..end].to_vec()));
        pos = end;
    }
    out
}

/// One row per shape of `truncate_to` on a log of 30 batches (1-3 records
/// each, several segments): the log keeps exactly the batches whose last
/// offset is below the target, ends after the last of them, drops later
/// segments and epochs, and reopens (after a power loss) the same.
#[test]
fn truncate_to_keeps_the_batches_below_the_target_in_every_shape() {
    let mut probe = TestLog::new(small_segments());
    fill_leader(&mut probe.log, 30);
    let bases = probe.log.segment_base_offsets();
    let batches = batches_of(&probe.log);
    let end = probe.log.log_end_offset();
    let inside_a_batch = batches
        .iter()
        .find(|b| b.1 > b.0 && b.0 > bases[2])
        .unwrap()
        .0
        + 1;
    let rows: Vec<(&str, i64)> = vec![
        (
            "at a batch boundary in the active segment",
            batches[batches.len() - 2].0,
        ),
        ("inside a batch (the whole batch goes)", inside_a_batch),
        ("at a segment boundary", bases[2]),
        ("one past a segment boundary", bases[2] + 1),
        ("into the first segment (later segments deleted)", 2),
        ("to zero", 0),
        ("at the log end (no-op)", end),
        ("above the log end (no-op)", end + 10),
    ];
    for (name, target) in rows {
        let mut t = TestLog::new(small_segments());
        fill_leader(&mut t.log, 30);
        t.log.flush().unwrap();
        let kept: Vec<_> = batches.iter().filter(|b| b.1 < target).collect();
        let new_end = kept.last().map_or(0, |b| b.1 + 1);
        let expected: Vec<u8> = kept.iter().flat_map(|b| b.2.clone()).collect();
        let epochs: Vec<_> = t
            .log
            .leader_epoch_cache()
            .entries()
            .iter()
            .copied()
            .filter(|e| e.start_offset < new_end)
            .collect();
        let segments: Vec<i64> = bases
            .iter()
            .copied()
            .filter(|b| *b <= target.max(0))
            .collect();
        let truncated = t.log.truncate_to(target).unwrap();
        assert_eq!(truncated, target < end, "{name}");
        let check = |log: &Log, when: &str| {
            let bytes = read_all(log);
            assert!(
                bytes == expected,
                "{name} {when}: {} bytes, expected {}",
                bytes.len(),
                expected.len()
            );
            assert_eq!(log.log_end_offset(), new_end, "{name} {when}");
            assert_eq!(log.leader_epoch_cache().entries(), epochs, "{name} {when}");
            assert!(log.recovery_point() <= new_end, "{name} {when}");
        };
        check(&t.log, "after truncation");
        assert_eq!(t.log.segment_base_offsets(), segments, "{name}");
        // The whole log was flushed before: only the truncation's own syncs
        // keep the old tail from coming back.
        let mut t = t.reopen(true, 0);
        check(&t.log, "after a power loss");
        // And the log continues at its new end.
        t.log.append_as_follower(&fetched(new_end, 2, 9)).unwrap();
        assert_eq!(t.log.log_end_offset(), new_end + 2, "{name}");
    }
}

#[test]
fn truncation_rebuilds_the_producer_state_and_drops_later_snapshots() {
    let mut t = TestLog::new(small_segments());
    // Producer 7 writes offsets 0-2 then 3-5; producer 8 offsets 24-26, in
    // a later segment.
    let mut producers = vec![Some((7, 0)), Some((7, 3))];
    producers.extend([None; 6]);
    producers.push(Some((8, 0)));
    producers.extend([None; 6]);
    for (i, producer) in producers.into_iter().enumerate() {
        let b = batch(3, 1000 * (i as i64 + 1), producer);
        t.log.append_as_leader(&b, 0, 0).unwrap();
        // Writes the producer snapshot of a roll.
        t.log.flush().unwrap();
    }
    assert!(t.log.segment_base_offsets().len() > 2);
    assert!(producer_state::list_snapshots(t.log.dir()).unwrap().len() > 1);
    assert_eq!(t.log.producer_state().entry(8).unwrap().last_seq(), 2);

    // Into producer 7's second batch: producer 8 is forgotten, producer 7
    // is back to its first batch, snapshots past the end are gone.
    t.log.truncate_to(4).unwrap();
    assert_eq!(t.log.log_end_offset(), 3);
    assert!(t.log.producer_state().entry(8).is_none());
    assert_eq!(t.log.producer_state().entry(7).unwrap().last_seq(), 2);
    let snapshots = producer_state::list_snapshots(t.log.dir()).unwrap();
    assert!(
        snapshots.iter().all(|(offset, _)| *offset <= 3),
        "{snapshots:?}"
    );
    // The producer continues from its older sequence, as a leader would
    // check it.
    t.log
        .append_as_leader(&batch(1, 5000, Some((7, 3))), 1, 0)
        .unwrap();
    let state = t.log.producer_state().encode_snapshot();
    t.log.flush().unwrap();
    let recovery_point = t.log.recovery_point();
    let t = t.reopen(true, recovery_point);
    assert_eq!(t.log.producer_state().encode_snapshot(), state);
}

#[test]
fn truncate_fully_and_start_at_restarts_an_empty_log_at_the_offset() {
    let mut t = TestLog::new(small_segments());
    fill_leader(&mut t.log, 30);
    t.log.flush().unwrap();
    t.log.truncate_fully_and_start_at(500).unwrap();
    let check = |log: &Log| {
        assert_eq!(log.segment_base_offsets(), vec![500]);
        assert_eq!(
            (
                log.log_start_offset(),
                log.log_end_offset(),
                log.recovery_point()
            ),
            (500, 500, 500)
        );
        assert!(log.leader_epoch_cache().entries().is_empty());
        assert!(log.producer_state().is_empty());
        assert_eq!(log.last_fetched_epoch(), None);
        assert!(producer_state::list_snapshots(log.dir())
            .unwrap()
            .is_empty());
    };
    check(&t.log);
    let mut t = t.reopen(true, 0);
    check(&t.log);
    t.log.append_as_follower(&fetched(500, 3, 4)).unwrap();
    assert_eq!(t.log.log_end_offset(), 503);
    assert_eq!(t.log.last_fetched_epoch(), Some(4));

    // A truncation below the first segment is a full truncation (Kafka's
    // `truncateTo`).
    assert!(t.log.truncate_to(200).unwrap());
    assert_eq!(t.log.segment_base_offsets(), vec![200]);
    assert_eq!(
        (t.log.log_start_offset(), t.log.log_end_offset()),
        (200, 200)
    );
}

/// The unexpected append offset a follower recovers from (Kafka's
/// `Partition.appendRecordsToFollowerOrFutureReplica`): an empty log whose
/// start is inside the leader's first batch starts over at that batch.
#[test]
fn an_empty_log_starting_inside_the_first_fetched_batch_starts_at_the_batch() {
    let mut t = TestLog::new(LogConfig::default());
    t.log.truncate_fully_and_start_at(12).unwrap();
    let err = t.log.append_as_follower(&fetched(10, 5, 2)).unwrap_err();
    let StorageError::UnexpectedAppendOffset {
        first_offset,
        last_offset,
        log_end_offset,
    } = err
    else {
        panic!("{err:?}")
    };
    assert!(first_offset < log_end_offset && last_offset >= log_end_offset);
    assert_eq!(log_end_offset, t.log.log_start_offset());
    t.log.truncate_fully_and_start_at(first_offset).unwrap();
    t.log.append_as_follower(&fetched(10, 5, 2)).unwrap();
    assert_eq!(t.log.log_end_offset(), 15);
}

#[test]
fn a_flush_prepared_before_a_truncation_does_not_cover_later_appends() {
    let mut t = TestLog::new(LogConfig::default());
    for i in 0..4 {
        t.log.append_as_follower(&fetched(3 * i, 3, 0)).unwrap();
    }
    let pending = t.log.prepare_flush().unwrap();
    t.log.truncate_to(6).unwrap();
    t.log.append_as_follower(&fetched(6, 3, 1)).unwrap();
    pending.sync().unwrap();
    // The flush synced offsets 0-11 as they were; 6-8 are new since.
    assert!(t.log.complete_flush(&pending) <= 6);
    assert_eq!(t.log.flush().unwrap(), 9);
}

#[test]
fn a_crash_at_any_sync_of_a_truncation_leaves_a_prefix_of_the_old_log() {
    let mut syncs = 0;
    loop {
        let mut t = TestLog::new(small_segments());
        fill_leader(&mut t.log, 30);
        t.log.flush().unwrap();
        let old = read_all(&t.log);
        t.fs.fail_syncs(Fault::new(FaultKind::Io).after(syncs).times(1).then_crash());
        let result = t.log.truncate_to(2);
        let fired = t.fs.faults_fired() > 0;
        t.fs.disarm();
        let t = t.reopen(true, 0);
        let now = read_all(&t.log);
        assert!(old.starts_with(&now), "crash at sync {syncs}");
        assert!(t.log.log_end_offset() >= 1, "crash at sync {syncs}");
        if !fired {
            result.unwrap();
            assert_eq!(t.log.log_end_offset(), 1);
            break;
        }
        assert!(result.is_err());
        syncs += 1;
    }
    assert!(syncs >= 3, "truncation should sync several times: {syncs}");
}

/// How a follower finds where its log diverged from the leader's (Kafka's
/// `AbstractFetcherThread.getOffsetTruncationState`, KIP-101/KIP-279): it
/// asks the leader for the end of its last epoch; if the leader answers an
/// epoch the follower does not have, it truncates to the end of its own
/// largest epoch below that one and asks again.
fn reconcile(leader: &Log, follower: &mut Log) {
    let mut epoch = follower
        .last_fetched_epoch()
        .expect("the follower has epochs");
    loop {
        let (leader_epoch, leader_end) = leader.end_offset_for_epoch(epoch);
        assert_ne!(leader_epoch, -1);
        let (follower_epoch, follower_end) = follower.end_offset_for_epoch(leader_epoch);
        let target = follower_end.min(follower.log_end_offset());
        if follower_epoch == leader_epoch {
            follower.truncate_to(target.min(leader_end)).unwrap();
            return;
        }
        follower.truncate_to(target).unwrap();
        epoch = follower.last_fetched_epoch().expect("epoch 0 is common");
    }
}

/// Appends batches of `(epoch, records)` as the leader of each epoch.
fn history(log: &mut Log, batches: &[(i32, usize)]) {
    for (i, (epoch, count)) in batches.iter().enumerate() {
        log.append_as_leader(&batch(*count, 1000 * (i as i64 + 1), None), *epoch, 0)
            .unwrap();
    }
}

#[test]
fn diverged_logs_become_byte_identical_after_epoch_truncation_kip_101_279() {
    // (shape, leader's batches, follower's batches, offset the follower
    // is truncated to).
    type Batches = &'static [(i32, usize)];
    let rows: &[(&str, Batches, Batches, i64)] = &[
        (
            "KIP-101: the follower's epoch 1 never reached the leader (0,2 vs 0,1)",
            &[(0, 3), (0, 3), (2, 3), (2, 3)],
            &[(0, 3), (0, 3), (1, 3)],
            6,
        ),
        (
            "the follower is only behind in the leader's epoch",
            &[(0, 3), (1, 3), (1, 3)],
            &[(0, 3), (1, 3)],
            6,
        ),
        (
            "the follower has an uncommitted tail of the leader's old epoch",
            &[(0, 3), (0, 3), (2, 3)],
            &[(0, 3), (0, 3), (0, 3)],
            6,
        ),
        (
            "KIP-279: the leader's epoch 0 is shorter than the follower's",
            &[(0, 3), (2, 3), (2, 3)],
            &[(0, 3), (0, 3), (1, 3)],
            3,
        ),
        (
            "KIP-279: two rounds (leader 0,2,4 vs follower 0,3)",
            &[(0, 3), (2, 3), (4, 3)],
            &[(0, 3), (0, 3), (3, 3)],
            3,
        ),
    ];
    for (name, leader_batches, follower_batches, target) in rows {
        let mut leader = TestLog::new(LogConfig::default());
        history(&mut leader.log, leader_batches);
        let mut follower = TestLog::new(LogConfig::default());
        history(&mut follower.log, follower_batches);

        reconcile(&leader.log, &mut follower.log);
        assert_eq!(follower.log.log_end_offset(), *target, "{name}");
        replicate(&leader.log, &mut follower.log);

        assert_same_log(&follower.log, &leader.log, name);
        assert_eq!(
            follower.log.last_fetched_epoch(),
            leader.log.latest_epoch(),
            "{name}"
        );
    }
}

#[test]
fn a_follower_moves_its_log_start_to_the_leaders_within_its_high_watermark() {
    let mut leader = TestLog::new(small_segments());
    fill_leader(&mut leader.log, 30);
    let mut follower = TestLog::new(small_segments());
    replicate(&leader.log, &mut follower.log);
    let high_watermark = follower.log.log_end_offset();
    let leader_start = follower.log.segment_base_offsets()[2] + 1;
    // DeleteRecords on the leader moved its log start offset; the follower
    // hears of it in a fetch response.
    assert!(matches!(
        follower
            .log
            .maybe_increment_log_start_offset(high_watermark + 1, high_watermark),
        Err(StorageError::LogStartOffsetBeyondHighWatermark { .. })
    ));
    assert!(follower
        .log
        .maybe_increment_log_start_offset(leader_start, high_watermark)
        .unwrap());
    assert_eq!(follower.log.log_start_offset(), leader_start);
    assert!(matches!(
        follower.log.read(leader_start - 1, 1000, i64::MAX, true),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    let first_epoch = follower.log.leader_epoch_cache().entries()[0];
    assert_eq!(first_epoch.start_offset, leader_start);
    let deleted = follower.log.delete_old_segments(0, high_watermark).unwrap();
    assert_eq!(deleted.base_offsets.len(), 2, "{deleted:?}");
    assert_eq!(follower.log.segment_base_offsets()[0], leader_start - 1);
}
