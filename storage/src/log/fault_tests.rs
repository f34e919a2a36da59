//! Fault tests of [`Log`] through the [`FaultyFileSystem`] seam: torn writes
//! followed by a crash, power loss after flushed and unflushed appends,
//! corrupt index files, ENOSPC and EIO on append, EIO on fdatasync.

use super::*;
use crate::fs::faulty::{Fault, FaultKind, FaultyFileSystem};
use crate::testutil::{build_batch, simple_batch, BatchSpec};

fn tp() -> TopicPartition {
    TopicPartition::new("faults", 0)
}

/// A temp dir and a faulty file system over it.
pub(super) fn setup() -> (tempfile::TempDir, Arc<FaultyFileSystem>) {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFileSystem::new(dir.path()).unwrap());
    (dir, fs)
}

pub(super) fn open_log(
    fs: &Arc<FaultyFileSystem>,
    dir: &Path,
    config: LogConfig,
    recovery_point: i64,
) -> Log {
    let fs: Arc<dyn FileSystem> = fs.clone();
    Log::open_with_file_system(
        fs,
        dir.to_path_buf(),
        tp(),
        config,
        recovery_point,
        0,
        false,
    )
    .unwrap()
}

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 1000,
        index_interval_bytes: 100,
        ..LogConfig::default()
    }
}

/// The `i`-th test batch: `1 + i % 3` records of 20 bytes, timestamps from
/// `1000 * (i + 1)`.
fn batch(i: usize) -> Bytes {
    Bytes::from(simple_batch(1 + i % 3, 20, 1000 * (i as i64 + 1)))
}

fn idempotent_batch(seq: i32) -> Bytes {
    let mut spec = BatchSpec::new(&[5000 + seq as i64], 8);
    spec.producer_id = 7;
    spec.producer_epoch = 0;
    spec.base_sequence = seq;
    Bytes::from(build_batch(&spec))
}

/// Every batch readable from the log start, concatenated, walking forward
/// until a read returns nothing.
pub(super) fn read_all(log: &Log) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let info = log.read(offset, usize::MAX, i64::MAX, true).unwrap();
        let Some(slice) = info.records else { break };
        let bytes = slice.read_to_bytes().unwrap();
        let mut pos = 0;
        while pos < bytes.len() {
            let h = RecordBatchHeader::parse(&bytes[pos..]).unwrap();
            assert!(h.crc_is_valid(&bytes[pos..pos + h.size_in_bytes()]));
            offset = h.next_offset();
            pos += h.size_in_bytes();
        }
        out.extend_from_slice(&bytes);
    }
    out
}

/// The `.log` files of the partition, by name, with their contents.
fn log_files(log: &Log) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(log.dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

fn assert_os_error(e: &StorageError, errno: rustix::io::Errno) {
    match e {
        StorageError::Io { source, .. } => {
            assert_eq!(source.raw_os_error(), Some(errno.raw_os_error()), "{e}")
        }
        other => panic!("expected an I/O error, got {other}"),
    }
}

/// Everything observable about a log that a failed append must not change.
#[derive(Debug, PartialEq)]
struct Observed {
    log_end_offset: i64,
    recovery_point: i64,
    size: u64,
    segments: Vec<i64>,
    offset_index: Vec<Vec<crate::index::OffsetPosition>>,
    time_index: Vec<Vec<crate::index::TimestampOffset>>,
    epochs: Vec<crate::leader_epoch::EpochEntry>,
    producers: Vec<u8>,
    bytes: Vec<u8>,
    files: Vec<(String, Vec<u8>)>,
}

fn observe(log: &Log) -> Observed {
    Observed {
        log_end_offset: log.log_end_offset(),
        recovery_point: log.recovery_point(),
        size: log.size_in_bytes(),
        segments: log.segment_base_offsets(),
        offset_index: log
            .segments
            .values()
            .map(|s| s.offset_index().entries().to_vec())
            .collect(),
        time_index: log
            .segments
            .values()
            .map(|s| s.time_index().entries().to_vec())
            .collect(),
        epochs: log.leader_epoch_cache().entries().to_vec(),
        producers: log.producer_state().encode_snapshot(),
        bytes: read_all(log),
        files: log_files(log),
    }
}

#[test]
fn torn_write_of_the_last_batch_at_every_byte_then_a_crash_recovers_the_previous_batches() {
    let last = batch(3);
    for crash_loses_power in [false, true] {
        for torn in 0..last.len() {
            let (dir, fs) = setup();
            let mut log = open_log(&fs, dir.path(), LogConfig::default(), 0);
            log.append_as_leader(&batch(0), 1, 0).unwrap();
            log.append_as_leader(&batch(1), 1, 0).unwrap();
            let recovery_point = log.flush().unwrap();
            let flushed = read_all(&log);
            log.append_as_leader(&batch(2), 1, 0).unwrap();
            let written = read_all(&log);
            let log_end_offset = log.log_end_offset();

            fs.fail_writes(
                Fault::new(FaultKind::Io)
                    .on_suffix(".log")
                    .times(1)
                    .torn_after(torn)
                    .then_crash(),
            );
            let err = log.append_as_leader(&last, 1, 0).unwrap_err();
            assert_os_error(&err, rustix::io::Errno::IO);
            assert!(fs.crashed());
            // The crash happened before the segment could be cut back.
            let on_disk = std::fs::metadata(dir.path().join("faults-0/00000000000000000000.log"))
                .unwrap()
                .len();
            assert_eq!(on_disk as usize, written.len() + torn);
            drop(log);

            if crash_loses_power {
                fs.simulate_power_loss().unwrap();
            } else {
                fs.restart();
            }
            let mut log = open_log(&fs, dir.path(), LogConfig::default(), recovery_point);
            if crash_loses_power {
                assert_eq!(read_all(&log), flushed, "power loss, torn at {torn}");
                assert_eq!(log.log_end_offset(), recovery_point);
            } else {
                assert_eq!(read_all(&log), written, "crash, torn at {torn}");
                assert_eq!(log.log_end_offset(), log_end_offset);
            }
            // The log continues where the recovered batches end.
            let end = log.log_end_offset();
            let info = log.append_as_leader(&last, 1, 0).unwrap();
            assert_eq!(info.first_offset, end);
            assert_eq!(info.last_offset + 1, log.log_end_offset());
        }
    }
}

#[test]
fn power_loss_keeps_the_flushed_prefix_and_the_rolled_segments_and_never_less_than_the_recovery_point(
) {
    for stop in [4, 9, 16, 23, 31] {
        let (dir, fs) = setup();
        let mut log = open_log(&fs, dir.path(), small_segments(), 0);
        let mut flushed = (0, Vec::new());
        for i in 0..stop {
            log.append_as_leader(&batch(i), (i / 10) as i32, 0).unwrap();
            if i % 7 == 3 {
                let recovery_point = log.flush().unwrap();
                assert_eq!(recovery_point, log.log_end_offset());
                flushed = (recovery_point, read_all(&log));
            }
        }
        assert!(
            log.segment_base_offsets().len() > 1 || stop < 10,
            "the test should roll segments"
        );
        let everything = read_all(&log);
        let active_base = log.active_segment_base_offset();
        drop(log);
        fs.simulate_power_loss().unwrap();

        let (recovery_point, bytes) = flushed;
        let log = open_log(&fs, dir.path(), small_segments(), recovery_point);
        assert!(log.log_end_offset() >= recovery_point, "stop {stop}");
        // The flushed prefix, and every segment a roll made inactive (its
        // `.log` is fsynced at the roll); never anything else.
        assert!(log.log_end_offset() >= active_base, "stop {stop}");
        let kept = read_all(&log);
        assert!(kept.starts_with(&bytes), "stop {stop}");
        assert!(everything.starts_with(&kept), "stop {stop}");
        let epochs_ok = log
            .leader_epoch_cache()
            .entries()
            .iter()
            .all(|e| e.start_offset <= log.log_end_offset());
        assert!(epochs_ok);
    }
}

/// Ways of damaging an index file.
#[derive(Clone, Copy, Debug)]
enum Damage {
    Garbage,
    TruncatedMidEntry,
    OutOfOrder,
}

fn damage(path: &Path, entry_size: usize, how: Damage) {
    let mut bytes = std::fs::read(path).unwrap();
    match how {
        Damage::Garbage => {
            let mut x = 0x9e37_79b9u32;
            for b in bytes.iter_mut() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
            if bytes.is_empty() {
                bytes = vec![0xff; entry_size];
            }
        }
        Damage::TruncatedMidEntry => {
            let len = bytes.len().saturating_sub(entry_size / 2).max(1);
            bytes.resize(len, 0x5a);
        }
        Damage::OutOfOrder => {
            if bytes.len() >= 2 * entry_size {
                let (a, b) = bytes.split_at_mut(entry_size);
                a.swap_with_slice(&mut b[..entry_size]);
            } else {
                let one = bytes.clone();
                bytes.extend_from_slice(&one);
            }
        }
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn corrupt_index_and_time_index_are_rebuilt_and_lookups_stay_right() {
    for how in [
        Damage::Garbage,
        Damage::TruncatedMidEntry,
        Damage::OutOfOrder,
    ] {
        for suffix in [INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX] {
            let (dir, fs) = setup();
            let mut log = open_log(&fs, dir.path(), small_segments(), 0);
            for i in 0..40 {
                log.append_as_leader(&batch(i), 0, 0).unwrap();
            }
            log.roll().unwrap();
            let recovery_point = log.flush().unwrap();
            let end = log.log_end_offset();
            let reads: Vec<_> = (0..end)
                .map(|o| {
                    let info = log.read(o, 1, i64::MAX, true).unwrap();
                    info.records.unwrap().read_to_bytes().unwrap()
                })
                .collect();
            let timestamps: Vec<i64> = (0..45).map(|i| i * 1000 + 500).collect();
            let by_time: Vec<_> = timestamps
                .iter()
                .map(|&t| log.read_batch_for_timestamp(t).unwrap())
                .collect();
            let max_ts = log.read_batch_with_max_timestamp().unwrap();
            let before = observe(&log);
            assert!(before.offset_index.iter().filter(|e| !e.is_empty()).count() > 2);
            drop(log);

            let entry_size = if suffix == INDEX_FILE_SUFFIX { 8 } else { 12 };
            for entry in std::fs::read_dir(dir.path().join("faults-0")).unwrap() {
                let path = entry.unwrap().path();
                if path.to_string_lossy().ends_with(suffix)
                    && std::fs::metadata(&path).unwrap().len() > 0
                {
                    damage(&path, entry_size, how);
                }
            }
            // Every segment is below the recovery point: only the damage
            // makes the loader rebuild them.
            let log = open_log(&fs, dir.path(), small_segments(), recovery_point);
            let ctx = format!("{how:?} {suffix}");
            assert_eq!(observe(&log).offset_index, before.offset_index, "{ctx}");
            assert_eq!(observe(&log).time_index, before.time_index, "{ctx}");
            for (o, expected) in reads.iter().enumerate() {
                let info = log.read(o as i64, 1, i64::MAX, true).unwrap();
                assert_eq!(
                    &info.records.unwrap().read_to_bytes().unwrap(),
                    expected,
                    "{ctx} offset {o}"
                );
            }
            for (t, expected) in timestamps.iter().zip(&by_time) {
                assert_eq!(
                    &log.read_batch_for_timestamp(*t).unwrap(),
                    expected,
                    "{ctx} ts {t}"
                );
            }
            assert_eq!(
                log.read_batch_with_max_timestamp().unwrap(),
                max_ts,
                "{ctx}"
            );
        }
    }
}

/// Appends `batches` to a fresh log with the real file system semantics (no
/// fault), for byte comparison.
fn reference_log(dir: &Path, config: LogConfig, batches: &[(Bytes, i32)]) -> Log {
    let mut log = Log::open(dir.to_path_buf(), tp(), config, 0, 0).unwrap();
    for (b, epoch) in batches {
        log.append_as_leader(b, *epoch, 0).unwrap();
    }
    log
}

#[test]
fn enospc_and_eio_on_append_change_nothing_reads_work_and_appends_resume() {
    let kinds = [
        (FaultKind::NoSpace, rustix::io::Errno::NOSPC),
        (FaultKind::Io, rustix::io::Errno::IO),
    ];
    for (kind, errno) in kinds {
        // `.log` writes only, or every write (indexes and checkpoints too).
        for suffix in [Some(".log"), None] {
            for torn in [None, Some(0), Some(30), Some(61), Some(70)] {
                let ctx = format!("{kind:?} {suffix:?} torn {torn:?}");
                let (dir, fs) = setup();
                let mut log = open_log(&fs, dir.path(), small_segments(), 0);
                let mut appended: Vec<(Bytes, i32)> = Vec::new();
                for i in 0..6 {
                    appended.push((batch(i), 1));
                }
                appended.push((idempotent_batch(0), 1));
                for (b, e) in &appended {
                    log.append_as_leader(b, *e, 0).unwrap();
                }
                log.flush().unwrap();
                log.append_as_leader(&batch(6), 1, 0).unwrap();
                appended.push((batch(6), 1));
                let before = observe(&log);

                let mut fault = Fault::new(kind);
                if let Some(s) = suffix {
                    fault = fault.on_suffix(s);
                }
                if let Some(t) = torn {
                    fault = fault.torn_after(t);
                }
                fs.fail_writes(fault);
                // A new leader epoch, an idempotent batch and enough bytes
                // to roll: every piece of state an append touches.
                for attempt in 0..3 {
                    let err = log
                        .append_as_leader(&idempotent_batch(1), 2, 0)
                        .unwrap_err();
                    assert_os_error(&err, errno);
                    let err = log.append_as_leader(&batch(7), 2, 0).unwrap_err();
                    assert_os_error(&err, errno);
                    let mut now = observe(&log);
                    // A roll the failed append attempted may leave an empty
                    // active segment and the old segment's final time index
                    // entry; nothing readable changes.
                    if now.segments.len() == before.segments.len() + 1 {
                        assert_eq!(*now.offset_index.last().unwrap(), vec![]);
                        now.segments.pop();
                        now.offset_index.pop();
                        now.time_index.pop();
                        now.files.pop();
                        now.time_index
                            .last_mut()
                            .unwrap()
                            .truncate(before.time_index.last().unwrap().len());
                    }
                    assert_eq!(now, before, "{ctx} attempt {attempt}");
                }
                assert!(fs.faults_fired() >= 6, "{ctx}");
                // Nothing acknowledged (flushed) changed: still readable from 0.
                assert_eq!(read_all(&log), before.bytes, "{ctx}");

                fs.disarm();
                log.append_as_leader(&idempotent_batch(1), 2, 0).unwrap();
                log.append_as_leader(&batch(7), 2, 0).unwrap();
                appended.push((idempotent_batch(1), 2));
                appended.push((batch(7), 2));
                let reference_dir = tempfile::tempdir().unwrap();
                let reference = reference_log(reference_dir.path(), small_segments(), &appended);
                assert_eq!(read_all(&log), read_all(&reference), "{ctx}");
                let concat = |files: Vec<(String, Vec<u8>)>| -> Vec<u8> {
                    files.into_iter().flat_map(|(_, b)| b).collect()
                };
                assert_eq!(
                    concat(log_files(&log)),
                    concat(log_files(&reference)),
                    "{ctx}"
                );
                assert_eq!(log.log_end_offset(), reference.log_end_offset());
                assert_eq!(
                    log.leader_epoch_cache().entries(),
                    reference.leader_epoch_cache().entries(),
                    "{ctx}"
                );
                assert_eq!(
                    log.producer_state().encode_snapshot(),
                    reference.producer_state().encode_snapshot(),
                    "{ctx}"
                );
                // And it survives a flush, a power loss and a reopen.
                let recovery_point = log.flush().unwrap();
                let bytes = read_all(&log);
                drop(log);
                fs.simulate_power_loss().unwrap();
                let log = open_log(&fs, dir.path(), small_segments(), recovery_point);
                assert_eq!(read_all(&log), bytes, "{ctx}");
            }
        }
    }
}

/// The log alone (no `LogDirFileSystem`, which in a `LogManager` fails
/// every sync after the first failure): the recovery point stays and the
/// next flush syncs everything above it again.
#[test]
fn a_failed_fdatasync_keeps_the_recovery_point_and_the_next_flush_syncs_again() {
    let (dir, fs) = setup();
    let mut log = open_log(&fs, dir.path(), LogConfig::default(), 0);
    log.append_as_leader(&batch(0), 0, 0).unwrap();
    let first = log.flush().unwrap();
    log.append_as_leader(&batch(1), 0, 0).unwrap();

    fs.fail_syncs(Fault::new(FaultKind::Io).on_suffix(".log").times(1));
    let err = log.flush().unwrap_err();
    assert_os_error(&err, rustix::io::Errno::IO);
    assert_eq!(log.recovery_point(), first);
    assert_eq!(fs.faults_fired(), 1);

    // The retry (no append in between) must sync batch 1 for real.
    let second = log.flush().unwrap();
    assert_eq!(second, log.log_end_offset());
    let bytes = read_all(&log);
    drop(log);
    fs.simulate_power_loss().unwrap();
    let log = open_log(&fs, dir.path(), LogConfig::default(), second);
    assert!(log.log_end_offset() >= second);
    assert_eq!(read_all(&log), bytes);
}

/// Issue 16 (the replication simulation's fsync faults): a process that
/// restarts after a failed fdatasync (the broker stopped, systemd started it
/// again; the machine kept running) recovers its log from the page cache,
/// where the bytes of the failed sync are still readable although Linux
/// dropped them ("fsyncgate"; the double's `dropping_dirty_pages`). No
/// later fdatasync writes them: they are clean. A flush after the restart
/// therefore claims durable records that sit behind a hole on the disk, and
/// a power loss takes them (recovery truncates at the hole). A recovery
/// after an unclean shutdown must make what it recovered above the
/// recovery point durable again (rewrite and sync it), or not count it.
#[test]
fn a_flush_after_restarting_from_a_failed_fdatasync_covers_what_was_recovered() {
    let (dir, fs) = setup();
    let mut log = open_log(&fs, dir.path(), LogConfig::default(), 0);
    log.append_as_leader(&batch(0), 0, 0).unwrap();
    let synced = log.flush().unwrap();
    log.append_as_leader(&batch(1), 0, 0).unwrap();
    fs.fail_syncs(
        Fault::new(FaultKind::Io)
            .on_suffix(".log")
            .times(1)
            .dropping_dirty_pages(),
    );
    assert!(log.flush().is_err());
    // The process stops and starts again; the machine keeps its page cache.
    drop(log);
    fs.restart();
    let mut log = open_log(&fs, dir.path(), LogConfig::default(), synced);
    log.append_as_leader(&batch(2), 0, 0).unwrap();
    let claimed = log.flush().unwrap();
    drop(log);
    fs.simulate_power_loss().unwrap();
    let log = open_log(&fs, dir.path(), LogConfig::default(), synced);
    assert!(
        log.log_end_offset() >= claimed,
        "a flush after the restart claimed offsets up to {claimed} durable; a power loss left \
         the log ending at {}",
        log.log_end_offset()
    );
}

/// Found by the replication simulation (seed 4164 of 5000): when the log
/// start offset moves (DeleteRecords, retention) the leader epoch cache is
/// truncated from the start and written at once, while the log start
/// offset itself waits for the next `log-start-offset-checkpoint`. A crash
/// in between reopened the log at the older checkpointed start with a cache
/// whose first epoch began at the new one: the records below came back
/// with epochs the cache no longer knew, so a follower whose last fetched
/// epoch (1) was older than the cache's first (2) was told its epoch ends
/// at the new start, and its divergent records below it (offsets 3 to 6,
/// epoch 1, where the leader has epoch 2) were never truncated and sat
/// below the high watermark.
#[test]
fn a_crash_after_the_log_start_moved_leaves_no_epochs_the_cache_forgot() {
    let (dir, fs) = setup();
    let mut log = open_log(&fs, dir.path(), LogConfig::default(), 0);
    for i in 0..3 {
        log.append_as_leader(&batch(i * 3), 0, 0).unwrap();
    }
    let epoch_2_start = log.log_end_offset();
    for i in 0..3 {
        log.append_as_leader(&batch(i * 3), 2, 0).unwrap();
    }
    let end = log.log_end_offset();
    let flushed = log.flush().unwrap();
    let new_start = epoch_2_start + 2;
    log.maybe_increment_log_start_offset(new_start, end)
        .unwrap();
    // The process dies before the log start offset is checkpointed.
    drop(log);
    fs.restart();
    let log = open_log(&fs, dir.path(), LogConfig::default(), flushed);
    let start = log.log_start_offset();
    // A follower that fetched epoch 1 up to `new_start` diverged from epoch
    // 2's first record on: unless the log starts at `new_start` again, the
    // leader must say its epoch 1 ends no later than epoch 2 began.
    let (epoch, end_offset) = log.end_offset_for_epoch(1);
    assert!(
        start >= new_start || (epoch, end_offset) == (0, epoch_2_start),
        "the log starts at {start}, below the moved start {new_start}, and answers epoch 1 with \
         ({epoch}, {end_offset}) while epoch 2 begins at {epoch_2_start}"
    );
}

#[test]
fn group_commit_waiters_of_a_failed_sync_get_no_false_ack() {
    let (dir, fs) = setup();
    let mut log = open_log(&fs, dir.path(), LogConfig::default(), 0);
    log.append_as_leader(&batch(0), 0, 0).unwrap();
    let failing = log.prepare_flush().unwrap();
    // An append while the first sync runs, and a second flush of it.
    log.append_as_leader(&batch(1), 0, 0).unwrap();
    let later = log.prepare_flush().unwrap();
    fs.fail_syncs(Fault::new(FaultKind::Io).times(1));
    assert!(failing.sync().is_err());
    later.sync().unwrap();
    // The later flush covered only batch 1's part of the file: batch 0 may
    // not be durable, so the recovery point must not move.
    assert_eq!(log.complete_flush(&later), 0);
    assert_eq!(log.recovery_point(), 0);
    // The next flush syncs everything again and advances it.
    let retry = log.prepare_flush().unwrap();
    retry.sync().unwrap();
    assert_eq!(log.complete_flush(&retry), log.log_end_offset());
    let bytes = read_all(&log);
    let recovery_point = log.recovery_point();
    drop(log);
    fs.simulate_power_loss().unwrap();
    let log = open_log(&fs, dir.path(), LogConfig::default(), recovery_point);
    assert_eq!(read_all(&log), bytes);
}

#[test]
fn a_flush_failing_on_index_entries_does_not_forget_segments_it_already_took() {
    let (dir, fs) = setup();
    let mut log = open_log(&fs, dir.path(), small_segments(), 0);
    // Fill the first segment and roll: its indexes are written at the roll,
    // the new active segment has unwritten index entries.
    let mut i = 0;
    while log.segment_base_offsets().len() < 2 {
        log.append_as_leader(&batch(i), 0, 0).unwrap();
        i += 1;
    }
    for _ in 0..6 {
        log.append_as_leader(&batch(i), 0, 0).unwrap();
        i += 1;
    }
    fs.fail_writes(Fault::new(FaultKind::NoSpace).on_suffix(INDEX_FILE_SUFFIX));
    assert!(log.flush().is_err());
    assert_eq!(log.recovery_point(), 0);
    fs.disarm();
    let recovery_point = log.flush().unwrap();
    assert_eq!(recovery_point, log.log_end_offset());
    let bytes = read_all(&log);
    drop(log);
    fs.simulate_power_loss().unwrap();
    let log = open_log(&fs, dir.path(), small_segments(), recovery_point);
    assert_eq!(read_all(&log), bytes);
    assert_eq!(log.log_end_offset(), recovery_point);
}

#[test]
fn torn_bytes_a_failed_cut_back_left_are_removed_before_the_next_append() {
    let (dir, fs) = setup();
    let mut log = open_log(&fs, dir.path(), LogConfig::default(), 0);
    log.append_as_leader(&batch(0), 0, 0).unwrap();
    // A large batch is torn after 300 bytes and the truncation that
    // follows fails too (the crash flag fails every change); the disk then
    // recovers while the log stays open.
    let large = Bytes::from(simple_batch(10, 40, 9000));
    fs.fail_writes(
        Fault::new(FaultKind::Io)
            .times(1)
            .torn_after(300)
            .then_crash(),
    );
    assert!(log.append_as_leader(&large, 0, 0).is_err());
    fs.restart();
    let small = batch(1);
    assert!(small.len() + 61 < 300);
    log.append_as_leader(&small, 0, 0).unwrap();
    let bytes = read_all(&log);
    let segment = dir.path().join("faults-0/00000000000000000000.log");
    // No torn bytes after the valid ones.
    assert_eq!(std::fs::read(&segment).unwrap(), bytes);
    // Roll and flush so the segment is below the recovery point: it is
    // loaded as it is on disk, without recovery.
    log.roll().unwrap();
    log.append_as_leader(&batch(2), 0, 0).unwrap();
    let recovery_point = log.flush().unwrap();
    let all = read_all(&log);
    drop(log);
    fs.restart();
    let log = open_log(&fs, dir.path(), LogConfig::default(), recovery_point);
    assert_eq!(read_all(&log), all);
}

#[test]
fn an_append_whose_epoch_checkpoint_cannot_be_written_appends_nothing() {
    let (dir, fs) = setup();
    let mut log = open_log(&fs, dir.path(), LogConfig::default(), 0);
    log.append_as_leader(&batch(0), 1, 0).unwrap();
    let before = observe(&log);
    fs.fail_writes(Fault::new(FaultKind::NoSpace).on_suffix("leader-epoch-checkpoint.tmp"));
    let err = log.append_as_leader(&batch(1), 2, 0).unwrap_err();
    assert_os_error(&err, rustix::io::Errno::NOSPC);
    // An error means nothing was appended: a producer retrying it must not
    // find its batch in the log twice.
    assert_eq!(observe(&log), before);
    // The same epoch's appends fail until the checkpoint can be written.
    assert!(log.append_as_leader(&batch(1), 2, 0).is_err());
    fs.disarm();
    let info = log.append_as_leader(&batch(1), 2, 0).unwrap();
    assert_eq!(info.first_offset, before.log_end_offset);
    assert_eq!(log.latest_epoch(), Some(2));
    let text = std::fs::read_to_string(log.dir().join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(text, format!("0\n2\n1 0\n2 {}\n", before.log_end_offset));
}

#[test]
fn a_flush_covers_appends_written_before_its_fdatasync_began() {
    // Group commit: appends that land between preparing a flush and its
    // fdatasync are in the page cache when the sync starts, so the sync
    // makes them durable and the recovery point covers them.
    let (dir, fs) = setup();
    let mut log = open_log(&fs, dir.path(), LogConfig::default(), 0);
    log.append_as_leader(&batch(0), 0, 0).unwrap();
    let prepared_at = log.log_end_offset();
    let pending = log.prepare_flush().unwrap();
    log.append_as_leader(&batch(1), 0, 0).unwrap();
    log.append_as_leader(&batch(2), 0, 0).unwrap();
    assert!(log.log_end_offset() > prepared_at);
    pending.sync().unwrap();
    let recovery_point = log.complete_flush(&pending);
    assert_eq!(recovery_point, log.log_end_offset());

    let bytes = read_all(&log);
    drop(log);
    fs.simulate_power_loss().unwrap();
    let log = open_log(&fs, dir.path(), LogConfig::default(), recovery_point);
    assert_eq!(log.log_end_offset(), recovery_point);
    assert_eq!(read_all(&log), bytes);
}

#[test]
fn a_flush_prepared_before_a_roll_covers_only_its_own_segment() {
    // The segment that was active when the flush was prepared is the one it
    // syncs: batches that went to a segment rolled after that stay owed to
    // the next flush.
    let (dir, fs) = setup();
    let mut log = open_log(&fs, dir.path(), small_segments(), 0);
    log.append_as_leader(&batch(0), 0, 0).unwrap();
    let pending = log.prepare_flush().unwrap();
    let mut i = 1;
    let (first_segment_end, first_segment_bytes) = loop {
        let before = (log.log_end_offset(), read_all(&log));
        log.append_as_leader(&batch(i), 0, 0).unwrap();
        i += 1;
        if log.segment_base_offsets().len() > 1 {
            break before;
        }
    };
    log.append_as_leader(&batch(i), 0, 0).unwrap();
    pending.sync().unwrap();
    let recovery_point = log.complete_flush(&pending);
    assert_eq!(recovery_point, first_segment_end);
    assert!(recovery_point < log.log_end_offset());

    drop(log);
    fs.simulate_power_loss().unwrap();
    let log = open_log(&fs, dir.path(), small_segments(), recovery_point);
    assert!(log.log_end_offset() >= recovery_point);
    assert!(read_all(&log).starts_with(&first_segment_bytes));
}

#[test]
fn creating_a_partition_and_recording_its_topic_id_sync_nothing() {
    // Creating 1,000 partitions used to cost 3,000 syncs (about 1 s here);
    // Kafka defers the partition.metadata flush too (its
    // `maybeFlushMetadataFile`). What a new log needs durable is owed to its
    // first flush instead (see the next tests).
    let (dir, fs) = setup();
    fs.fail_syncs(Fault::new(FaultKind::Io));
    let mut log = open_log(&fs, dir.path(), LogConfig::default(), 0);
    log.set_topic_id([7; 16]).unwrap();
    assert_eq!(fs.faults_fired(), 0);
    assert_os_error(&log.flush().unwrap_err(), rustix::io::Errno::IO);
    fs.disarm();
    log.flush().unwrap();
}

#[test]
fn the_first_flush_of_a_new_partition_makes_its_topic_id_and_entries_durable() {
    let (dir, fs) = setup();
    let mut log = open_log(&fs, dir.path(), LogConfig::default(), 0);
    log.set_topic_id([7; 16]).unwrap();
    log.append_as_leader(&batch(0), 0, 0).unwrap();
    let recovery_point = log.flush().unwrap();
    let bytes = read_all(&log);
    drop(log);
    fs.simulate_power_loss().unwrap();
    let log = open_log(&fs, dir.path(), LogConfig::default(), recovery_point);
    assert_eq!(log.topic_id(), Some([7; 16]));
    assert_eq!(read_all(&log), bytes);
}

#[test]
fn a_topic_id_lost_before_any_flush_is_recorded_again() {
    // Power loss before the first flush may lose partition.metadata (it was
    // never synced; the partition held nothing durable either): the log opens
    // without a topic id and takes it again.
    let (dir, fs) = setup();
    let mut log = open_log(&fs, dir.path(), LogConfig::default(), 0);
    log.set_topic_id([7; 16]).unwrap();
    drop(log);
    fs.simulate_power_loss().unwrap();
    let mut log = open_log(&fs, dir.path(), LogConfig::default(), 0);
    assert_eq!(log.topic_id(), None);
    log.set_topic_id([7; 16]).unwrap();
    assert_eq!(log.topic_id(), Some([7; 16]));
}

#[test]
fn an_empty_partition_metadata_file_reads_as_no_topic_id() {
    // An older Weir renamed the file into place before syncing it: a rename
    // that reached the disk before the file's data left an empty file.
    let (dir, fs) = setup();
    let log = open_log(&fs, dir.path(), LogConfig::default(), 0);
    let path = log.dir().join(PARTITION_METADATA_FILE);
    drop(log);
    std::fs::write(&path, b"").unwrap();
    let mut log = open_log(&fs, dir.path(), LogConfig::default(), 0);
    assert_eq!(log.topic_id(), None);
    log.set_topic_id([9; 16]).unwrap();
    log.flush().unwrap();
    drop(log);
    let log = open_log(&fs, dir.path(), LogConfig::default(), 0);
    assert_eq!(log.topic_id(), Some([9; 16]));
}

#[test]
fn only_the_first_flush_of_a_new_partition_syncs_the_log_directory() {
    // The partition directory's own entry lives in the log directory: it must
    // be durable before anything in it is acknowledged as durable.
    let (dir, fs) = setup();
    let log_dir = dir.path().join("logdir-under-test");
    std::fs::create_dir(&log_dir).unwrap();
    let mut log = open_log(&fs, &log_dir, LogConfig::default(), 0);
    log.append_as_leader(&batch(0), 0, 0).unwrap();
    fs.fail_syncs(Fault::new(FaultKind::Io).on_suffix("logdir-under-test"));
    assert_os_error(&log.flush().unwrap_err(), rustix::io::Errno::IO);
    fs.disarm();
    let first = log.flush().unwrap();
    assert_eq!(first, log.log_end_offset());

    // Synced once: later flushes, and reopening an existing partition, leave
    // the log directory alone.
    fs.fail_syncs(Fault::new(FaultKind::Io).on_suffix("logdir-under-test"));
    log.append_as_leader(&batch(1), 0, 0).unwrap();
    log.flush().unwrap();
    assert_eq!(fs.faults_fired(), 1, "only the first failure fired");
    drop(log);
    let mut log = open_log(&fs, &log_dir, LogConfig::default(), 0);
    log.append_as_leader(&batch(2), 0, 0).unwrap();
    log.flush().unwrap();
    assert_eq!(fs.faults_fired(), 1);
}

/// Regression (the replication simulation, `WEIR_REPL_SIM_SEED=155`): a
/// power loss after a roll whose previous segment's last batch was not
/// fsynced yet. The new segment's file survived and the lost batch left a
/// hole below the log end offset: a read there returned nothing, so a
/// follower fetching at it never progressed (and the high watermark
/// covered an offset no replica holds).
#[test]
fn a_power_loss_after_a_roll_leaves_no_hole_below_the_log_end() {
    let (dir, fs) = setup();
    let mut log = open_log(&fs, dir.path(), small_segments(), 0);
    let one = |i: i64| Bytes::from(simple_batch(1, 20, 1000 * (i + 1)));
    let mut i = 0;
    while log.segment_base_offsets().len() < 2 {
        log.append_as_leader(&one(i), 0, 0).unwrap();
        i += 1;
    }
    let per_segment = log.segment_base_offsets()[1];
    while log.log_end_offset() < 2 * per_segment - 1 {
        log.append_as_leader(&one(i), 0, 0).unwrap();
        i += 1;
    }
    let recovery_point = log.flush().unwrap();
    // The second segment's last batch, not fsynced; the next rolls.
    log.append_as_leader(&one(i), 0, 0).unwrap();
    log.append_as_leader(&one(i + 1), 0, 0).unwrap();
    assert_eq!(log.segment_base_offsets().len(), 3);
    drop(log);
    fs.simulate_power_loss().unwrap();
    let log = open_log(&fs, dir.path(), small_segments(), recovery_point);
    for offset in log.log_start_offset()..log.log_end_offset() {
        let info = log.read(offset, usize::MAX, i64::MAX, true).unwrap();
        assert!(
            info.records.is_some(),
            "offset {offset} below the log end {} reads nothing",
            log.log_end_offset()
        );
    }
}
