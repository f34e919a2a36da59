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
fn roll_writes_a_snapshot_at_the_new_segment_base() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    log.append_as_leader(&idem_batch(7, 0, 0, 2, 100), 0, 0)
        .unwrap();
    log.roll().unwrap();
    assert_eq!(snapshot_names(&log), vec!["00000000000000000002.snapshot"]);
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
