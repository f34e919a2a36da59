//! Unit tests of idempotent-producer state in [`Log`] (KIP-98 / KIP-360):
//! duplicates, sequence gaps, fencing by epoch, rebuild on reopen and after
//! a torn tail.

use super::*;
use crate::testutil::{build_batch, BatchSpec};

fn tp() -> TopicPartition {
    TopicPartition::new("idem", 0)
}

fn open(dir: &Path) -> Log {
    Log::open(dir.to_path_buf(), tp(), LogConfig::default(), 0, 0).unwrap()
}

/// An idempotent batch of `count` records from `producer_id`/`epoch`
/// starting at sequence `seq`, timestamps `ts, ts+1, ...`.
fn idem_batch(producer_id: i64, epoch: i16, seq: i32, count: usize, ts: i64) -> Bytes {
    let timestamps: Vec<i64> = (0..count as i64).map(|i| ts + i).collect();
    let mut spec = BatchSpec::new(&timestamps, 8);
    spec.producer_id = producer_id;
    spec.producer_epoch = epoch;
    spec.base_sequence = seq;
    Bytes::from(build_batch(&spec))
}

#[test]
fn retried_batch_returns_original_offsets_and_is_not_appended_twice() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    log.append_as_leader(&idem_batch(-1, -1, -1, 2, 10), 0, 0)
        .unwrap();
    let first = log
        .append_as_leader(&idem_batch(7, 0, 0, 3, 100), 0, 0)
        .unwrap();
    assert_eq!(
        (first.first_offset, first.last_offset, first.duplicate),
        (2, 4, false)
    );
    let second = log
        .append_as_leader(&idem_batch(7, 0, 3, 2, 200), 0, 0)
        .unwrap();
    assert_eq!((second.first_offset, second.last_offset), (5, 6));
    let size = log.size_in_bytes();
    let retry = log
        .append_as_leader(&idem_batch(7, 0, 0, 3, 100), 0, 0)
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!((retry.first_offset, retry.last_offset), (2, 4));
    assert_eq!(retry.record_count, 0);
    assert_eq!(log.log_end_offset(), 7);
    assert_eq!(log.size_in_bytes(), size);
    // The newer one is still deduplicated too.
    let retry = log
        .append_as_leader(&idem_batch(7, 0, 3, 2, 200), 0, 0)
        .unwrap();
    assert_eq!((retry.first_offset, retry.duplicate), (5, true));
    assert_eq!(log.log_end_offset(), 7);
}

#[test]
fn only_the_last_five_batches_are_deduplicated() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    for seq in 0..6 {
        log.append_as_leader(&idem_batch(7, 0, seq, 1, 100), 0, 0)
            .unwrap();
    }
    // seq 1..=5 are cached; seq 0 has been evicted and is now out of order.
    let retry = log
        .append_as_leader(&idem_batch(7, 0, 1, 1, 100), 0, 0)
        .unwrap();
    assert_eq!((retry.first_offset, retry.duplicate), (1, true));
    let err = log
        .append_as_leader(&idem_batch(7, 0, 0, 1, 100), 0, 0)
        .unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::OutOfOrderSequence {
                producer_id: 7,
                expected: 6,
                found: 0
            }
        ),
        "{err}"
    );
}

#[test]
fn sequence_gap_is_out_of_order_and_appends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    log.append_as_leader(&idem_batch(7, 0, 0, 3, 100), 0, 0)
        .unwrap();
    let err = log
        .append_as_leader(&idem_batch(7, 0, 5, 1, 100), 0, 0)
        .unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::OutOfOrderSequence {
                producer_id: 7,
                expected: 3,
                found: 5
            }
        ),
        "{err}"
    );
    assert_eq!(log.log_end_offset(), 3);
    // The expected sequence is still accepted afterwards.
    let ok = log
        .append_as_leader(&idem_batch(7, 0, 3, 1, 100), 0, 0)
        .unwrap();
    assert_eq!((ok.first_offset, ok.duplicate), (3, false));
}

#[test]
fn sequence_wraps_around_after_i32_max() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    // An unknown producer may start at any sequence (KIP-360).
    log.append_as_leader(&idem_batch(7, 0, i32::MAX - 1, 2, 100), 0, 0)
        .unwrap();
    let ok = log
        .append_as_leader(&idem_batch(7, 0, 0, 1, 100), 0, 0)
        .unwrap();
    assert!(!ok.duplicate);
    // A batch crossing the wrap is a duplicate on retry: its last sequence wraps.
    let dir2 = tempfile::tempdir().unwrap();
    let mut log2 = open(dir2.path());
    log2.append_as_leader(&idem_batch(9, 0, i32::MAX, 3, 100), 0, 0)
        .unwrap();
    let retry = log2
        .append_as_leader(&idem_batch(9, 0, i32::MAX, 3, 100), 0, 0)
        .unwrap();
    assert!(retry.duplicate);
    let next = log2
        .append_as_leader(&idem_batch(9, 0, 2, 1, 100), 0, 0)
        .unwrap();
    assert_eq!((next.first_offset, next.duplicate), (3, false));
}

#[test]
fn older_epoch_is_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    log.append_as_leader(&idem_batch(7, 3, 0, 1, 100), 0, 0)
        .unwrap();
    let err = log
        .append_as_leader(&idem_batch(7, 2, 1, 1, 100), 0, 0)
        .unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::InvalidProducerEpoch {
                producer_id: 7,
                current: 3,
                found: 2
            }
        ),
        "{err}"
    );
    assert_eq!(log.log_end_offset(), 1);
}

#[test]
fn new_epoch_must_start_at_sequence_zero() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    log.append_as_leader(&idem_batch(7, 0, 0, 4, 100), 0, 0)
        .unwrap();
    let err = log
        .append_as_leader(&idem_batch(7, 1, 4, 1, 100), 0, 0)
        .unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::OutOfOrderSequence {
                producer_id: 7,
                expected: 0,
                found: 4
            }
        ),
        "{err}"
    );
    let ok = log
        .append_as_leader(&idem_batch(7, 1, 0, 1, 100), 0, 0)
        .unwrap();
    assert_eq!((ok.first_offset, ok.duplicate), (4, false));
    // The old epoch's batches are no longer duplicates: they are fenced.
    let err = log
        .append_as_leader(&idem_batch(7, 0, 0, 4, 100), 0, 0)
        .unwrap_err();
    assert!(
        matches!(err, StorageError::InvalidProducerEpoch { .. }),
        "{err}"
    );
}

#[test]
fn non_idempotent_batches_are_never_deduplicated() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    let b = idem_batch(-1, -1, -1, 2, 100);
    log.append_as_leader(&b, 0, 0).unwrap();
    let again = log.append_as_leader(&b, 0, 0).unwrap();
    assert_eq!((again.first_offset, again.duplicate), (2, false));
}

#[test]
fn state_is_rebuilt_from_every_segment_without_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut log = Log::open(
            dir.path().to_path_buf(),
            tp(),
            LogConfig {
                segment_bytes: 300,
                ..LogConfig::default()
            },
            0,
            0,
        )
        .unwrap();
        for seq in 0..4 {
            log.append_as_leader(&idem_batch(7, 2, seq * 2, 2, 100), 0, 0)
                .unwrap();
        }
        assert!(log.segment_base_offsets().len() > 1);
        log.flush().unwrap();
        // Without snapshots (like a log from before they existed) the state
        // comes from replaying every segment.
        for (_, path) in producer_state::list_snapshots(log.dir()).unwrap() {
            std::fs::remove_file(path).unwrap();
        }
    }
    let mut log = open(dir.path());
    let retry = log
        .append_as_leader(&idem_batch(7, 2, 2, 2, 100), 0, 0)
        .unwrap();
    assert_eq!(
        (retry.first_offset, retry.last_offset, retry.duplicate),
        (2, 3, true)
    );
    let err = log
        .append_as_leader(&idem_batch(7, 2, 9, 1, 100), 0, 0)
        .unwrap_err();
    assert!(
        matches!(err, StorageError::OutOfOrderSequence { expected: 8, .. }),
        "{err}"
    );
    let err = log
        .append_as_leader(&idem_batch(7, 1, 0, 1, 100), 0, 0)
        .unwrap_err();
    assert!(
        matches!(err, StorageError::InvalidProducerEpoch { current: 2, .. }),
        "{err}"
    );
}

#[test]
fn torn_tail_drops_the_state_of_removed_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = {
        let mut log = open(dir.path());
        log.append_as_leader(&idem_batch(7, 0, 0, 2, 100), 0, 0)
            .unwrap();
        log.append_as_leader(&idem_batch(7, 0, 2, 2, 100), 0, 0)
            .unwrap();
        log.dir().join("00000000000000000000.log")
    };
    // Tear the second batch.
    let len = std::fs::metadata(&path).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(len - 3).unwrap();
    drop(file);
    let mut log = open(dir.path());
    assert_eq!(log.log_end_offset(), 2);
    // The torn batch is no duplicate: it is appended again at offset 2.
    let again = log
        .append_as_leader(&idem_batch(7, 0, 2, 2, 100), 0, 0)
        .unwrap();
    assert_eq!((again.first_offset, again.duplicate), (2, false));
}

fn snapshot_names(log: &Log) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(log.dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".snapshot"))
        .collect();
    names.sort();
    names
}

#[test]
fn roll_writes_a_snapshot_at_the_new_segment_base_with_the_next_flush() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    log.append_as_leader(&idem_batch(7, 0, 0, 2, 100), 0, 0)
        .unwrap();
    log.roll().unwrap();
    assert!(
        snapshot_names(&log).is_empty(),
        "the roll wrote the snapshot"
    );
    log.flush().unwrap();
    assert_eq!(snapshot_names(&log), vec!["00000000000000000002.snapshot"]);
    assert!(log.deferred_snapshot().is_none());
    let bytes = std::fs::read(log.dir().join("00000000000000000002.snapshot")).unwrap();
    let state = ProducerStateManager::decode_snapshot(&bytes).unwrap();
    let entry = state.entry(7).unwrap();
    assert_eq!(entry.last_seq(), 1);
    assert_eq!(entry.batches().next().unwrap().first_offset, 0);
}

#[test]
fn open_loads_the_snapshot_then_replays_later_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = {
        let mut log = open(dir.path());
        log.append_as_leader(&idem_batch(7, 0, 0, 2, 100), 0, 0)
            .unwrap();
        log.dir().to_path_buf()
    };
    // A snapshot at offset 2 that also knows producer 8, absent from the
    // log: its presence after reopening proves the snapshot was read.
    let mut state = ProducerStateManager::new();
    for (pid, last_seq) in [(7, 1), (8, 41)] {
        state.update(
            pid,
            0,
            producer_state::BatchMetadata {
                first_seq: last_seq - 1,
                last_seq,
                first_offset: 0,
                last_offset: 1,
                timestamp: 100,
            },
        );
    }
    state
        .write_snapshot(&crate::fs::RealFileSystem, &path, 2)
        .unwrap();
    {
        let mut log = open(dir.path());
        assert_eq!(log.producer_state().entry(8).unwrap().last_seq(), 41);
        // Batches after the snapshot are replayed on the next open.
        log.append_as_leader(&idem_batch(7, 0, 2, 1, 100), 0, 0)
            .unwrap();
    }
    let log = open(dir.path());
    assert_eq!(log.producer_state().entry(7).unwrap().last_seq(), 2);
    assert_eq!(log.producer_state().entry(8).unwrap().last_seq(), 41);
}

#[test]
fn snapshots_past_the_recovered_log_end_and_corrupt_ones_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let path = {
        let mut log = open(dir.path());
        log.append_as_leader(&idem_batch(7, 0, 0, 2, 100), 0, 0)
            .unwrap();
        log.dir().to_path_buf()
    };
    let mut ghost = ProducerStateManager::new();
    ghost.update(
        9,
        0,
        producer_state::BatchMetadata {
            first_seq: 0,
            last_seq: 0,
            first_offset: 5,
            last_offset: 5,
            timestamp: 1,
        },
    );
    ghost
        .write_snapshot(&crate::fs::RealFileSystem, &path, 6)
        .unwrap();
    std::fs::write(path.join("00000000000000000001.snapshot"), b"garbage").unwrap();
    let log = open(dir.path());
    assert!(
        snapshot_names(&log).is_empty(),
        "{:?}",
        snapshot_names(&log)
    );
    assert!(log.producer_state().entry(9).is_none());
    assert_eq!(log.producer_state().entry(7).unwrap().last_seq(), 1);
}

/// A file system that records every fdatasync and directory fsync.
#[derive(Debug, Default)]
struct RecordingFileSystem {
    syncs: std::sync::Mutex<Vec<PathBuf>>,
}

impl RecordingFileSystem {
    fn take(&self) -> Vec<PathBuf> {
        std::mem::take(&mut *self.syncs.lock().unwrap())
    }
}

impl crate::fs::FileSystem for RecordingFileSystem {
    fn open_file(&self, path: &Path, truncate: bool) -> std::io::Result<std::fs::File> {
        RealFileSystem.open_file(path, truncate)
    }
    fn open_existing(&self, path: &Path) -> std::io::Result<std::fs::File> {
        RealFileSystem.open_existing(path)
    }
    fn write_vectored_at(
        &self,
        file: &std::fs::File,
        path: &Path,
        bufs: &[IoSlice<'_>],
        offset: u64,
    ) -> std::io::Result<usize> {
        RealFileSystem.write_vectored_at(file, path, bufs, offset)
    }
    fn write_all_at(
        &self,
        file: &std::fs::File,
        path: &Path,
        buf: &[u8],
        offset: u64,
    ) -> std::io::Result<()> {
        RealFileSystem.write_all_at(file, path, buf, offset)
    }
    fn set_len(&self, file: &std::fs::File, path: &Path, len: u64) -> std::io::Result<()> {
        RealFileSystem.set_len(file, path, len)
    }
    fn sync_data(&self, file: &std::fs::File, path: &Path) -> std::io::Result<()> {
        self.syncs.lock().unwrap().push(path.to_path_buf());
        RealFileSystem.sync_data(file, path)
    }
    fn start_writeback(
        &self,
        file: &std::fs::File,
        path: &Path,
        offset: u64,
        len: u64,
    ) -> std::io::Result<()> {
        RealFileSystem.start_writeback(file, path, offset, len)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.syncs.lock().unwrap().push(dir.to_path_buf());
        RealFileSystem.sync_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        RealFileSystem.create_dir_all(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        RealFileSystem.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        RealFileSystem.remove_file(path)
    }
    fn remove_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        RealFileSystem.remove_dir_all(dir)
    }
}

#[test]
fn an_append_that_rolls_syncs_neither_the_producer_snapshot_nor_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(RecordingFileSystem::default());
    let shared: Arc<dyn FileSystem> = fs.clone();
    let config = LogConfig {
        segment_bytes: 300,
        ..LogConfig::default()
    };
    let mut log =
        Log::open_with_file_system(shared, dir.path().to_path_buf(), tp(), config, 0, 0, false)
            .unwrap();
    let mut seq = 0;
    while log.segment_base_offsets().len() < 2 {
        fs.take();
        log.append_as_leader(&idem_batch(7, 0, seq, 2, 100), 0, 0)
            .unwrap();
        seq += 2;
    }
    // Only the rolled segment's `.log` is synced during the append (see
    // `Log::roll_at`): no producer snapshot, no directory.
    let during_append = fs.take();
    assert!(
        during_append
            .iter()
            .all(|p| p.extension().is_some_and(|e| e == "log")),
        "the roll synced more than the old segment: {during_append:?}"
    );
    assert!(snapshot_names(&log).is_empty());
    // The next flush writes the snapshot and syncs the directory.
    log.flush().unwrap();
    let flushed = fs.take();
    assert!(flushed.iter().any(|p| p == log.dir()), "{flushed:?}");
    let base = log.segment_base_offsets()[1];
    assert_eq!(
        snapshot_names(&log),
        vec![crate::producer_state::snapshot_file_name(base)]
    );
}

#[test]
fn a_power_loss_before_the_flush_loses_the_deferred_snapshot_and_nothing_else() {
    use crate::fs::faulty::FaultyFileSystem;
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFileSystem::new(dir.path()).unwrap());
    let config = LogConfig {
        segment_bytes: 300,
        ..LogConfig::default()
    };
    let open = || {
        let shared: Arc<dyn FileSystem> = fs.clone();
        Log::open_with_file_system(
            shared,
            dir.path().to_path_buf(),
            tp(),
            config.clone(),
            0,
            0,
            false,
        )
        .unwrap()
    };
    let mut log = open();
    // The partition directory's own entry is durable from the first flush
    // on (`Log::unsynced_creation`); the power-loss model removes a
    // directory whose parent was never synced.
    log.flush().unwrap();
    let mut seq = 0;
    while log.segment_base_offsets().len() < 2 {
        log.append_as_leader(&idem_batch(7, 0, seq, 2, 100), 0, 0)
            .unwrap();
        seq += 2;
    }
    let end = log.log_end_offset();
    drop(log);
    fs.simulate_power_loss().unwrap();
    let mut log = open();
    // The rolled segment was synced by the roll: its batches and the
    // producer state they carry survive without a snapshot.
    assert!(snapshot_names(&log).is_empty());
    assert!(log.log_end_offset() >= end - 2);
    let last_seq = log.producer_state().entry(7).unwrap().last_seq();
    assert_eq!(last_seq as i64, log.log_end_offset() - 1);
    // A roll followed by a flush makes the snapshot durable.
    let mut seq = last_seq + 1;
    let rolled = log.segment_base_offsets().len();
    while log.segment_base_offsets().len() == rolled {
        log.append_as_leader(&idem_batch(7, 0, seq, 2, 100), 0, 0)
            .unwrap();
        seq += 2;
    }
    let base = *log.segment_base_offsets().last().unwrap();
    log.flush().unwrap();
    drop(log);
    fs.simulate_power_loss().unwrap();
    let log = open();
    assert!(snapshot_names(&log).contains(&crate::producer_state::snapshot_file_name(base)));
}

#[test]
fn retention_writes_a_deferred_snapshot_before_deleting_segments() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 300,
        retention_bytes: 0,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path().to_path_buf(), tp(), config, 0, 0).unwrap();
    let mut seq = 0;
    while log.segment_base_offsets().len() < 2 {
        log.append_as_leader(&idem_batch(7, 0, seq, 2, 100), 0, 0)
            .unwrap();
        seq += 2;
    }
    let base = log.segment_base_offsets()[1];
    assert_eq!(log.deferred_snapshot().map(|s| s.offset()), Some(base));
    let end = log.log_end_offset();
    // retention.bytes = 0 deletes every segment (rolling the active one,
    // which defers a snapshot of its own).
    let deletion = log.delete_old_segments(0, end).unwrap();
    assert!(deletion.base_offsets.contains(&0));
    assert!(snapshot_names(&log).contains(&crate::producer_state::snapshot_file_name(base)));
}

#[test]
fn a_truncation_keeps_a_flush_under_way_from_writing_the_deferred_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    log.append_as_leader(&idem_batch(7, 0, 0, 2, 100), 0, 0)
        .unwrap();
    log.roll().unwrap();
    log.append_as_leader(&idem_batch(7, 0, 2, 2, 100), 0, 0)
        .unwrap();
    let pending = log.prepare_flush().unwrap();
    log.truncate_to(1).unwrap();
    pending.sync().unwrap();
    log.complete_flush(&pending);
    assert!(
        snapshot_names(&log).is_empty(),
        "a snapshot past the truncation point was written"
    );
}
