//! Unit tests of retention: each deletion rule, the high watermark bound,
//! DeleteRecords' log start offset, `segment.ms` rolls, the `.deleted`
//! files, and the log start offset across a restart.

use std::path::Path;

use bytes::Bytes;

use super::super::{Log, LogConfig};
use crate::log_manager::{LogManager, LOG_START_OFFSET_CHECKPOINT_FILE};
use crate::testutil::{build_batch, simple_batch, BatchSpec};
use crate::{CleanupPolicy, StorageError, TopicPartition};

const DAY_MS: i64 = 24 * 3_600_000;

fn tp() -> TopicPartition {
    TopicPartition::new("retained", 0)
}

/// Segments of at most 1000 bytes; each 10-record batch of 60-byte values
/// is about 760 bytes, so every batch gets its own segment.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1000,
        index_interval_bytes: 100,
        retention_ms: -1,
        retention_bytes: -1,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, config: LogConfig) -> Log {
    Log::open(dir.to_path_buf(), tp(), config, 0, 0).unwrap()
}

/// Appends `n` batches of 10 records with timestamps from `ts`; returns the
/// size in bytes of one batch.
fn append(log: &mut Log, n: usize, ts: i64) -> u64 {
    let batch = Bytes::from(simple_batch(10, 60, ts));
    for _ in 0..n {
        log.append_as_leader(&batch, 0, ts).unwrap();
    }
    batch.len() as u64
}

fn files(log: &Log) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(log.dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

fn out_of_range(log: &Log, offset: i64) -> bool {
    matches!(
        log.read(offset, usize::MAX, i64::MAX, true),
        Err(StorageError::OffsetOutOfRange { .. })
    )
}

#[test]
fn retention_bytes_deletes_the_oldest_segments_down_to_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let batch_bytes = {
        let mut log = open(dir.path(), config());
        append(&mut log, 1, 0)
    };
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            retention_bytes: (3 * batch_bytes) as i64,
            ..config()
        },
    );
    append(&mut log, 8, 1_000);
    assert_eq!(
        log.segment_base_offsets(),
        vec![0, 10, 20, 30, 40, 50, 60, 70]
    );
    let leo = log.log_end_offset();
    let deletion = log.delete_old_segments(2_000, leo).unwrap();
    // 8 segments, room for 3: the 5 oldest go (the active one stays).
    // (Kafka's rule: delete while size - segment size >= retention.bytes.)
    assert_eq!(deletion.base_offsets, vec![0, 10, 20, 30, 40]);
    assert_eq!(deletion.bytes, 5 * batch_bytes);
    assert_eq!(log.segment_base_offsets(), vec![50, 60, 70]);
    assert_eq!(log.log_start_offset(), 50);
    assert_eq!(log.size_in_bytes(), 3 * batch_bytes);
    assert!(out_of_range(&log, 49));
    assert!(log
        .read(50, usize::MAX, i64::MAX, true)
        .unwrap()
        .records
        .is_some());
    // The files are renamed first, removed by remove_files.
    assert!(files(&log).contains(&"00000000000000000000.log.deleted".to_string()));
    deletion.remove_files().unwrap();
    let left = files(&log);
    assert!(left.iter().all(|n| !n.ends_with(".deleted")), "{left:?}");
    assert!(!left.contains(&"00000000000000000000.log".to_string()));
    assert!(left.contains(&"00000000000000000050.log".to_string()));
    // Under the limit now: nothing more goes.
    assert!(log.delete_old_segments(3_000, leo).unwrap().is_empty());
}

#[test]
fn retention_ms_deletes_segments_whose_largest_timestamp_is_too_old() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            retention_ms: DAY_MS,
            ..config()
        },
    );
    let now = 100 * DAY_MS;
    append(&mut log, 3, now - 3 * DAY_MS); // offsets 0-29: too old
    append(&mut log, 2, now - DAY_MS / 2); // offsets 30-49: young
    let leo = log.log_end_offset();
    let deletion = log.delete_old_segments(now, leo).unwrap();
    assert_eq!(deletion.base_offsets, vec![0, 10, 20]);
    assert_eq!(log.log_start_offset(), 30);
    deletion.remove_files().unwrap();
    // A day later the rest is too old too, the active segment included: it
    // is rolled first so the log keeps one (empty) segment at its end.
    let deletion = log.delete_old_segments(now + DAY_MS, leo).unwrap();
    assert_eq!(deletion.base_offsets, vec![30, 40]);
    assert_eq!(log.segment_base_offsets(), vec![50]);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (50, 50));
    assert_eq!(log.size_in_bytes(), 0);
    deletion.remove_files().unwrap();
    // The log still takes appends at its end.
    let info = log
        .append_as_leader(&Bytes::from(simple_batch(1, 5, now)), 0, now)
        .unwrap();
    assert_eq!(info.first_offset, 50);
}

#[test]
fn segments_without_timestamps_age_by_file_modification_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            retention_ms: DAY_MS,
            ..config()
        },
    );
    let batch = Bytes::from(build_batch(&BatchSpec::new(&[-1; 10], 60)));
    for _ in 0..3 {
        log.append_as_leader(&batch, 0, 0).unwrap();
    }
    let leo = log.log_end_offset();
    let mtime_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    // Written just now: young by mtime, whatever `now_ms` says about record
    // timestamps.
    assert!(log.delete_old_segments(mtime_now, leo).unwrap().is_empty());
    let deletion = log
        .delete_old_segments(mtime_now + 2 * DAY_MS, leo)
        .unwrap();
    assert_eq!(deletion.base_offsets, vec![0, 10, 20]);
    deletion.remove_files().unwrap();
}

#[test]
fn nothing_at_or_above_the_high_watermark_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            retention_bytes: 0,
            ..config()
        },
    );
    append(&mut log, 4, 1_000);
    // Segments [0,10) [10,20) [20,30) [30,40): with the high watermark at 25
    // only the first two lie wholly below it.
    let deletion = log.delete_old_segments(2_000, 25).unwrap();
    assert_eq!(deletion.base_offsets, vec![0, 10]);
    assert_eq!(log.log_start_offset(), 20);
    deletion.remove_files().unwrap();
    // With everything below the high watermark, retention.bytes=0 empties
    // the log (rolling the active segment).
    let deletion = log.delete_old_segments(2_000, 40).unwrap();
    assert_eq!(deletion.base_offsets, vec![20, 30]);
    assert_eq!(log.segment_base_offsets(), vec![40]);
    deletion.remove_files().unwrap();
}

#[test]
fn delete_records_moves_the_log_start_offset_inside_a_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    append(&mut log, 4, 1_000);
    let hw = log.log_end_offset();
    assert!(matches!(
        log.maybe_increment_log_start_offset(hw + 1, hw),
        Err(StorageError::LogStartOffsetBeyondHighWatermark {
            requested: 41,
            high_watermark: 40
        })
    ));
    assert!(log.maybe_increment_log_start_offset(25, hw).unwrap());
    assert!(!log.maybe_increment_log_start_offset(12, hw).unwrap());
    assert_eq!(log.log_start_offset(), 25);
    assert!(out_of_range(&log, 24));
    assert!(out_of_range(&log, 0));
    // An offset inside a batch returns that batch (the client skips the
    // records below it).
    let slice = log
        .read(25, usize::MAX, i64::MAX, true)
        .unwrap()
        .records
        .unwrap();
    let first = crate::RecordBatchHeader::parse(&slice.read_to_bytes().unwrap()).unwrap();
    assert_eq!(first.base_offset, 20);
    // No retention configured: only the segments wholly below 25 go.
    let deletion = log.delete_old_segments(2_000, hw).unwrap();
    assert_eq!(deletion.base_offsets, vec![0, 10]);
    assert_eq!(log.segment_base_offsets(), vec![20, 30]);
    assert_eq!(log.log_start_offset(), 25);
    deletion.remove_files().unwrap();
}

#[test]
fn compact_only_topics_ignore_retention_but_not_the_log_start_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    // Keyless records were written before the topic became compacted.
    append(&mut log, 3, 1_000);
    log.set_config(LogConfig {
        retention_bytes: 0,
        retention_ms: 0,
        cleanup_policy: CleanupPolicy {
            delete: false,
            compact: true,
        },
        ..config()
    });
    let hw = log.log_end_offset();
    assert!(log.delete_old_segments(10 * DAY_MS, hw).unwrap().is_empty());
    log.maybe_increment_log_start_offset(10, hw).unwrap();
    let deletion = log.delete_old_segments(10 * DAY_MS, hw).unwrap();
    assert_eq!(deletion.base_offsets, vec![0]);
    deletion.remove_files().unwrap();
}

#[test]
fn reads_handed_out_before_deletion_stay_readable() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            retention_bytes: 0,
            ..config()
        },
    );
    append(&mut log, 2, 1_000);
    let slice = log
        .read(0, usize::MAX, i64::MAX, true)
        .unwrap()
        .records
        .unwrap();
    let before = slice.read_to_bytes().unwrap();
    let hw = log.log_end_offset();
    log.delete_old_segments(2_000, hw)
        .unwrap()
        .remove_files()
        .unwrap();
    assert!(!log.dir().join("00000000000000000000.log").exists());
    assert_eq!(slice.read_to_bytes().unwrap(), before);
}

#[test]
fn segment_ms_rolls_the_active_segment_by_record_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_bytes: 1 << 20,
            segment_ms: 60_000,
            ..config()
        },
    );
    let at = |ts: i64| Bytes::from(simple_batch(1, 10, ts));
    log.append_as_leader(&at(1_000_000), 0, 0).unwrap();
    log.append_as_leader(&at(1_060_000), 0, 0).unwrap(); // exactly segment.ms: no roll
    assert_eq!(log.segment_base_offsets(), vec![0]);
    log.append_as_leader(&at(1_060_001), 0, 0).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);
    // The clock of the new segment starts at its own first batch, also after
    // a reopen (the first batch is read back from the file).
    log.flush().unwrap();
    drop(log);
    let mut log = Log::open(
        dir.path().to_path_buf(),
        tp(),
        LogConfig {
            segment_bytes: 1 << 20,
            segment_ms: 60_000,
            ..config()
        },
        3,
        0,
    )
    .unwrap();
    log.append_as_leader(&at(1_100_000), 0, 0).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);
    log.append_as_leader(&at(1_120_002), 0, 0).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 2, 4]);
}

#[test]
fn the_log_start_offset_survives_a_restart_through_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let leftover;
    {
        let manager = LogManager::open(dir.path().to_path_buf(), 1, config()).unwrap();
        let log = manager.get_or_create(&tp(), config()).unwrap();
        let mut log = log.lock().unwrap();
        append(&mut log, 3, 1_000);
        let hw = log.log_end_offset();
        log.maybe_increment_log_start_offset(15, hw).unwrap();
        // Deleted but not removed, as after a crash between the two steps.
        let deletion = log.delete_old_segments(2_000, hw).unwrap();
        assert_eq!(deletion.base_offsets, vec![0]);
        leftover = log.dir().join("00000000000000000000.log.deleted");
        assert!(leftover.exists());
        drop(log);
        manager.shutdown(-1).unwrap();
    }
    let text = std::fs::read_to_string(dir.path().join(LOG_START_OFFSET_CHECKPOINT_FILE)).unwrap();
    assert_eq!(text, "0\n1\nretained 0 15\n");
    let manager = LogManager::open(dir.path().to_path_buf(), 1, config()).unwrap();
    let log = manager.get(&tp()).unwrap();
    let log = log.lock().unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (15, 30));
    assert!(out_of_range(&log, 14));
    assert!(log.read(15, usize::MAX, i64::MAX, true).is_ok());
    assert!(!leftover.exists(), ".deleted files are removed on open");
}

#[test]
fn a_log_ending_below_its_checkpointed_start_restarts_empty_there() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut log = open(dir.path(), config());
        append(&mut log, 2, 1_000);
        log.flush().unwrap();
    }
    let log = Log::open(dir.path().to_path_buf(), tp(), config(), 0, 500).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (500, 500));
    assert_eq!(log.segment_base_offsets(), vec![500]);
    assert!(!log.dir().join("00000000000000000000.log").exists());
}
