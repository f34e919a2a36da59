//! Unit tests of the flush policy: `flush.messages`, `flush.ms` and the
//! recovery point they move.

use super::*;
use crate::testutil::simple_batch;

fn open_with(dir: &Path, config: LogConfig) -> Log {
    Log::open(
        dir.to_path_buf(),
        TopicPartition::new("flush", 0),
        config,
        0,
        0,
    )
    .unwrap()
}

#[test]
fn flush_messages_is_due_once_that_many_offsets_are_unflushed() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_messages: 5,
        ..LogConfig::default()
    };
    let mut log = open_with(dir.path(), config);
    assert!(!log.flush_messages_due());
    log.append_as_leader(&Bytes::from(simple_batch(3, 8, 0)), 0, 0)
        .unwrap();
    assert_eq!(log.unflushed_messages(), 3);
    assert!(!log.flush_messages_due());
    log.append_as_leader(&Bytes::from(simple_batch(2, 8, 0)), 0, 0)
        .unwrap();
    assert!(log.flush_messages_due());
    assert_eq!(log.flush().unwrap(), 5);
    assert_eq!(log.unflushed_messages(), 0);
    assert!(!log.flush_messages_due());
}

#[test]
fn default_flush_messages_never_asks_for_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_with(dir.path(), LogConfig::default());
    log.append_as_leader(&Bytes::from(simple_batch(100, 8, 0)), 0, 0)
        .unwrap();
    assert!(!log.flush_messages_due());
    assert!(!log.flush_ms_due(i64::MAX));
}

#[test]
fn flush_ms_is_due_only_with_unflushed_data_and_an_old_enough_flush() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_ms: 1_000,
        ..LogConfig::default()
    };
    let mut log = open_with(dir.path(), config);
    let opened = crate::segment::wall_clock_ms();
    // Nothing unflushed: never due.
    assert!(!log.flush_ms_due(opened + 10_000));
    log.append_as_leader(&Bytes::from(simple_batch(1, 8, 0)), 0, 0)
        .unwrap();
    assert!(log.flush_ms_due(opened + 10_000));
    // The last flush was long ago: due now, and no longer after a flush.
    log.last_flush_ms = 0;
    let now = crate::segment::wall_clock_ms();
    assert!(log.flush_ms_due(now));
    log.flush().unwrap();
    log.append_as_leader(&Bytes::from(simple_batch(1, 8, 0)), 0, 0)
        .unwrap();
    let flushed = crate::segment::wall_clock_ms();
    assert!(!log.flush_ms_due(flushed + 500));
    assert!(log.flush_ms_due(flushed + 1_000));
}

/// File names a pending flush would sync, sorted.
fn pending_names(pending: &PendingFlush) -> Vec<String> {
    let mut names: Vec<String> = pending
        .files
        .iter()
        .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn group_commit_syncs_only_the_active_log_file_and_inactive_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 300,
        index_interval_bytes: 1,
        ..LogConfig::default()
    };
    let mut log = open_with(dir.path(), config);
    log.flush().unwrap();
    log.append_as_leader(&Bytes::from(simple_batch(2, 100, 0)), 0, 0)
        .unwrap();
    let pending = log.prepare_flush().unwrap();
    assert_eq!(
        pending_names(&pending),
        ["00000000000000000000.log"],
        "an acks=all flush costs one fdatasync"
    );
    pending.sync().unwrap();
    log.complete_flush(&pending);
    // A second batch does not fit: the segment rolls, and the next flush
    // owes the now inactive segment's indexes (its .log is already synced).
    log.append_as_leader(&Bytes::from(simple_batch(2, 100, 0)), 0, 0)
        .unwrap();
    assert_eq!(log.segment_base_offsets(), [0, 2]);
    let pending = log.prepare_flush().unwrap();
    assert_eq!(
        pending_names(&pending),
        [
            "00000000000000000000.index",
            "00000000000000000000.timeindex",
            "00000000000000000002.log",
        ]
    );
    pending.sync().unwrap();
    log.complete_flush(&pending);
    // A full flush (clean shutdown) syncs the active segment's indexes too.
    let pending = log.prepare_flush_with(true).unwrap();
    assert_eq!(
        pending_names(&pending),
        [
            "00000000000000000002.index",
            "00000000000000000002.timeindex"
        ]
    );
}

/// Regression: a prepared flush dropped without syncing (its task panicked
/// or was abandoned) must not let the next flush skip its files and move
/// the recovery point over data never synced.
#[test]
fn a_pending_flush_dropped_unsynced_leaves_its_files_to_the_next_flush() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_with(dir.path(), LogConfig::default());
    log.flush().unwrap();
    log.append_as_leader(&Bytes::from(simple_batch(2, 8, 0)), 0, 0)
        .unwrap();
    drop(log.prepare_flush().unwrap());
    let pending = log.prepare_flush().unwrap();
    assert!(
        pending_names(&pending).contains(&"00000000000000000000.log".to_string()),
        "{:?}",
        pending_names(&pending)
    );
    pending.sync().unwrap();
    assert_eq!(log.complete_flush(&pending), 2);
}

/// Issue 15: a partition costs no index descriptor at rest. Every roll
/// writes the finished segment's indexes and keeps them open only until
/// the flush that syncs them; the active segment's indexes are never open.
#[test]
fn a_flushed_log_keeps_no_index_file_open() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 200,
        index_interval_bytes: 1,
        ..LogConfig::default()
    };
    let mut log = open_with(dir.path(), config.clone());
    for i in 0..20 {
        log.append_as_leader(&Bytes::from(simple_batch(2, 50, i)), 0, 0)
            .unwrap();
    }
    assert!(log.segments.len() > 3);
    // Rolled segments hold their index files until the flush syncs them.
    assert!(log.segments.values().any(|s| s.holds_descriptors().1));
    log.flush().unwrap();
    assert!(log.segments.values().all(|s| !s.holds_descriptors().1));
    let end = log.log_end_offset();
    drop(log);
    // Reopened: indexes are read and closed.
    let log = Log::open(
        dir.path().to_path_buf(),
        TopicPartition::new("flush", 0),
        config,
        end,
        0,
    )
    .unwrap();
    assert!(log.segments.values().all(|s| !s.holds_descriptors().1));
    assert_eq!(log.log_end_offset(), end);
}

/// Issue 18 scope 1: every mebibyte of whole pages appended to the active
/// segment has its writeback started, once, in order, by the write-behind
/// thread, and nothing is started past the last whole page written.
/// Without write-behind no range is ever recorded.
#[test]
fn appended_mebibytes_have_their_writeback_started_in_order() {
    use crate::fs::faulty::FaultyFileSystem;
    use crate::write_behind::WRITE_BEHIND_BYTES;

    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFileSystem::new(dir.path()).unwrap());
    let mut log = Log::open_with_file_system(
        fs.clone(),
        dir.path().join("write-behind-0"),
        TopicPartition::new("write-behind", 0),
        LogConfig::default(),
        0,
        0,
        false,
    )
    .unwrap();
    // About 3.5 MiB in batches of ~100 KiB.
    while log.size_in_bytes() < 7 * WRITE_BEHIND_BYTES / 2 {
        log.append_as_leader(&Bytes::from(simple_batch(100, 1000, 0)), 0, 0)
            .unwrap();
    }
    let size = log.size_in_bytes();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let started = loop {
        let started = fs.writebacks(".log");
        if started.len() >= 3 {
            break started;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for 3 writebacks, got {started:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    let mut next = 0;
    for &(offset, len) in &started {
        assert_eq!(offset, next, "ranges follow each other: {started:?}");
        assert!(len >= WRITE_BEHIND_BYTES && len % 4096 == 0, "{started:?}");
        next = offset + len;
    }
    assert_eq!(started.len(), 3, "{started:?}");
    assert!(
        next <= size && size - next < WRITE_BEHIND_BYTES,
        "{started:?} of {size}"
    );
}
