//! Unit tests of [`Log`]: append/read, rolling, indexes, recovery, epochs,
//! timestamps, topic id, and a model-based proptest.

use super::*;
use crate::index::IndexEntry as _;
use crate::testutil::{batch_with_records, build_batch, simple_batch, BatchSpec, RawRecord};

fn tp() -> TopicPartition {
    TopicPartition::new("orders", 3)
}

fn open(dir: &Path, config: LogConfig, recovery_point: i64) -> Log {
    Log::open(dir.to_path_buf(), tp(), config, recovery_point, 0).unwrap()
}

/// The bytes Kafka would store for `batch` appended at `base` in `epoch`.
fn stamped(batch: &[u8], base: i64, epoch: i32) -> Vec<u8> {
    let mut out = batch.to_vec();
    out[0..8].copy_from_slice(&base.to_be_bytes());
    out[12..16].copy_from_slice(&epoch.to_be_bytes());
    out
}

fn read_all(log: &Log, from: i64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = from;
    while offset < log.log_end_offset() {
        let info = log.read(offset, usize::MAX, i64::MAX, true).unwrap();
        let bytes = info.records.unwrap().read_to_bytes().unwrap();
        let mut pos = 0;
        while pos < bytes.len() {
            let h = RecordBatchHeader::parse(&bytes[pos..]).unwrap();
            offset = h.next_offset();
            pos += h.size_in_bytes();
        }
        out.extend_from_slice(&bytes);
    }
    out
}

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 1000,
        index_interval_bytes: 100,
        ..LogConfig::default()
    }
}

#[test]
fn append_then_read_round_trips_bytes_with_offsets_stamped() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), 0);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
    let a = simple_batch(2, 10, 1000);
    let b = simple_batch(3, 20, 2000);
    let c = simple_batch(1, 5, 3000);
    let info = log.append_as_leader(&Bytes::from(a.clone()), 4, 0).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 1));
    assert_eq!(
        (info.batch_count, info.record_count, info.valid_bytes),
        (1, 2, a.len())
    );
    assert_eq!(info.log_append_time, -1);
    let mut two = b.clone();
    two.extend_from_slice(&c);
    let info = log.append_as_leader(&Bytes::from(two), 4, 0).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (2, 5));
    assert_eq!((info.batch_count, info.record_count), (2, 4));
    assert_eq!(
        (info.max_timestamp, info.offset_of_max_timestamp),
        (3000, 5)
    );
    assert_eq!(log.log_end_offset(), 6);

    let mut expected = stamped(&a, 0, 4);
    expected.extend(stamped(&b, 2, 4));
    expected.extend(stamped(&c, 5, 4));
    assert_eq!(read_all(&log, 0), expected);
    // The file holds exactly those bytes (Kafka's format, nothing else).
    let file = std::fs::read(log.dir().join("00000000000000000000.log")).unwrap();
    assert_eq!(file, expected);
    assert_eq!(log.size_in_bytes(), expected.len() as u64);
}

#[test]
fn fetch_offset_inside_a_batch_returns_that_batch_c02() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), 0);
    let a = simple_batch(2, 10, 1);
    let b = simple_batch(2, 10, 3);
    log.append_as_leader(&Bytes::from(a.clone()), 0, 0).unwrap();
    log.append_as_leader(&Bytes::from(b.clone()), 0, 0).unwrap();
    let read = |offset| {
        log.read(offset, usize::MAX, i64::MAX, false)
            .unwrap()
            .records
            .map(|r| r.read_to_bytes().unwrap().to_vec())
    };
    let mut ab = stamped(&a, 0, 0);
    ab.extend(stamped(&b, 2, 0));
    assert_eq!(read(1).unwrap(), ab);
    assert_eq!(read(3).unwrap(), stamped(&b, 2, 0));
    assert_eq!(read(4), None);
    assert!(matches!(
        log.read(5, 100, i64::MAX, false),
        Err(StorageError::OffsetOutOfRange {
            requested: 5,
            log_start: 0,
            log_end: 4
        })
    ));
    assert!(matches!(
        log.read(-1, 100, i64::MAX, false),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn max_offset_and_max_bytes_bound_the_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), 0);
    let a = simple_batch(2, 10, 1);
    let b = simple_batch(2, 10, 3);
    log.append_as_leader(&Bytes::from(a.clone()), 0, 0).unwrap();
    log.append_as_leader(&Bytes::from(b.clone()), 0, 0).unwrap();
    // High watermark 2: batch B (base 2) is not visible.
    let info = log.read(0, usize::MAX, 2, false).unwrap();
    assert_eq!(info.records.unwrap().len(), a.len());
    assert!(log.read(2, usize::MAX, 2, true).unwrap().records.is_none());
    // Byte limit one short of both batches: only A, never a partial batch.
    let info = log.read(0, a.len() + b.len() - 1, i64::MAX, false).unwrap();
    assert_eq!(info.records.unwrap().len(), a.len());
    let info = log.read(0, a.len() + b.len(), i64::MAX, false).unwrap();
    assert_eq!(info.records.unwrap().len(), a.len() + b.len());
}

#[test]
fn min_one_batch_returns_an_oversized_first_batch_whole_c04() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        max_message_bytes: 1 << 20,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config, 0);
    let big = simple_batch(2, 100 * 1024, 1);
    assert!(big.len() > 200 * 1024);
    log.append_as_leader(&Bytes::from(big.clone()), 0, 0)
        .unwrap();
    let info = log.read(0, 1, i64::MAX, true).unwrap();
    let records = info.records.unwrap();
    assert_eq!(records.len(), big.len());
    assert_eq!(records.read_to_bytes().unwrap(), stamped(&big, 0, 0));
    assert!(log.read(0, 1, i64::MAX, false).unwrap().records.is_none());
}

#[test]
fn invalid_batches_append_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), 0);
    let good = simple_batch(2, 10, 1);
    let mut bad = simple_batch(2, 10, 1);
    let last = bad.len() - 1;
    bad[last] ^= 1;
    let mut both = good.clone();
    both.extend_from_slice(&bad);
    assert!(matches!(
        log.append_as_leader(&Bytes::from(both), 0, 0),
        Err(StorageError::CorruptRecord { .. })
    ));
    assert!(matches!(
        log.append_as_leader(&Bytes::new(), 0, 0),
        Err(StorageError::InvalidRecord { .. })
    ));
    let mut trailing = good.clone();
    trailing.extend_from_slice(&[0, 0, 0]);
    assert!(matches!(
        log.append_as_leader(&Bytes::from(trailing), 0, 0),
        Err(StorageError::InvalidRecord { .. })
    ));
    let small = LogConfig {
        max_message_bytes: good.len() - 1,
        ..LogConfig::default()
    };
    log.set_config(small);
    assert!(matches!(
        log.append_as_leader(&Bytes::from(good.clone()), 0, 0),
        Err(StorageError::RecordBatchTooLarge { size, max }) if size == good.len() && max == good.len() - 1
    ));
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.size_in_bytes(), 0);
    assert!(std::fs::read(log.dir().join("00000000000000000000.log"))
        .unwrap()
        .is_empty());
}

/// A records section of `deltas.len()` one-byte records with these offset
/// deltas.
fn records_with_deltas(deltas: &[i64]) -> Vec<u8> {
    let mut out = Vec::new();
    for &d in deltas {
        RawRecord::new(d, b"x").encode(&mut out);
    }
    out
}

#[test]
fn uncompressed_batches_with_broken_records_append_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), 0);
    let good = simple_batch(2, 3, 1);
    // Valid CRC, broken records: non-contiguous deltas, and 4 junk bytes.
    let gap = batch_with_records(&records_with_deltas(&[0, 5]), 2, 1, 0);
    let mut junk_records = records_with_deltas(&[0, 1]);
    junk_records.extend_from_slice(&[1, 2, 3, 4]);
    let junk = batch_with_records(&junk_records, 2, 1, 0);
    for bad in [gap, junk] {
        let mut set = good.clone();
        set.extend_from_slice(&bad);
        assert!(matches!(
            log.append_as_leader(&Bytes::from(set), 0, 0),
            Err(StorageError::InvalidRecord { .. })
        ));
    }
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.size_in_bytes(), 0);
    let ok = batch_with_records(&records_with_deltas(&[0, 1, 2]), 3, 2, 0);
    let info = log.append_as_leader(&Bytes::from(ok), 0, 0).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 2));
}

#[test]
fn compressed_and_prevalidated_batches_skip_the_records_scan_but_not_the_header_checks() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), 0);
    // A gzip batch: storage cannot read its records, the broker validated
    // the decompressed bytes. Opaque bytes must be stored as they are.
    let gzip = batch_with_records(&[0x1f, 0x8b, 9, 9, 9], 2, 1, 1);
    log.append_as_leader(&Bytes::from(gzip.clone()), 0, 0)
        .unwrap();
    assert_eq!(read_all(&log, 0), stamped(&gzip, 0, 0));
    // The caller vouches for an uncompressed batch's records.
    let unchecked = batch_with_records(&[7, 7, 7], 1, 0, 0);
    log.append_as_leader_prevalidated(&Bytes::from(unchecked.clone()), 0, 0)
        .unwrap();
    assert!(matches!(
        log.append_as_leader(&Bytes::from(unchecked), 0, 0),
        Err(StorageError::InvalidRecord { .. })
    ));
    assert_eq!(log.log_end_offset(), 3);
    // Header and CRC checks always apply: unknown codec, bad CRC, bad magic.
    let unknown_codec = batch_with_records(&records_with_deltas(&[0]), 1, 0, 6);
    let mut bad_crc = simple_batch(1, 2, 1);
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 1;
    let mut bad_magic = simple_batch(1, 2, 1);
    bad_magic[16] = 1;
    for (bad, corrupt) in [(unknown_codec, false), (bad_crc, true), (bad_magic, false)] {
        let bad = Bytes::from(bad);
        for result in [
            log.append_as_leader(&bad, 0, 0),
            log.append_as_leader_prevalidated(&bad, 0, 0),
        ] {
            match result {
                Err(StorageError::CorruptRecord { .. }) if corrupt => {}
                Err(StorageError::InvalidRecord { .. }) if !corrupt => {}
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(log.log_end_offset(), 3);
}

#[test]
fn log_append_time_rewrites_max_timestamp_with_a_valid_crc() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config, 0);
    let mut two = simple_batch(3, 10, 5);
    two.extend(simple_batch(1, 10, 9));
    let info = log.append_as_leader(&Bytes::from(two), 1, 123_456).unwrap();
    assert_eq!(info.log_append_time, 123_456);
    assert_eq!(
        (info.max_timestamp, info.offset_of_max_timestamp),
        (123_456, 2)
    );
    let bytes = log
        .read(0, usize::MAX, i64::MAX, true)
        .unwrap()
        .records
        .unwrap()
        .read_to_bytes()
        .unwrap();
    let first = RecordBatchHeader::validate(&bytes).unwrap();
    assert_eq!(first.max_timestamp, 123_456);
    assert_eq!(first.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(first.base_timestamp, 5);
    let second = RecordBatchHeader::validate(&bytes[first.size_in_bytes()..]).unwrap();
    assert_eq!((second.base_offset, second.max_timestamp), (3, 123_456));
}

#[test]
fn rolls_at_segment_bytes_and_reads_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_segments(), 0);
    let mut batches = Vec::new();
    for i in 0..40 {
        let batch = simple_batch(1 + i % 3, 60, i as i64 * 10);
        let info = log
            .append_as_leader(&Bytes::from(batch.clone()), 0, 0)
            .unwrap();
        batches.push((
            info.first_offset,
            info.last_offset,
            stamped(&batch, info.first_offset, 0),
        ));
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() > 3, "{bases:?}");
    for w in bases.windows(2) {
        let size = std::fs::metadata(
            dir.path()
                .join("orders-3")
                .join(format!("{:020}.log", w[0])),
        )
        .unwrap()
        .len();
        assert!(size <= 1000 && size > 0);
    }
    // Every segment starts at a batch boundary.
    for base in &bases {
        assert!(batches.iter().any(|(first, _, _)| first == base));
    }
    // Any offset returns its own batch first, and a read stays in one segment.
    for (first, last, bytes) in &batches {
        for offset in *first..=*last {
            let slice = log
                .read(offset, usize::MAX, i64::MAX, true)
                .unwrap()
                .records
                .unwrap();
            let got = slice.read_to_bytes().unwrap();
            assert_eq!(&got[..bytes.len()], &bytes[..]);
            let seg = bases.iter().rev().find(|b| **b <= *first).unwrap();
            let seg_end = bases
                .iter()
                .find(|b| **b > *first)
                .copied()
                .unwrap_or(i64::MAX);
            let mut pos = 0;
            while pos < got.len() {
                let h = RecordBatchHeader::parse(&got[pos..]).unwrap();
                assert!(h.base_offset >= *seg && h.base_offset < seg_end);
                pos += h.size_in_bytes();
            }
        }
    }
    let all: Vec<u8> = batches.iter().flat_map(|(_, _, b)| b.clone()).collect();
    assert_eq!(read_all(&log, 0), all);
    // Reopen: same segments, same log end offset, same bytes.
    let leo = log.log_end_offset();
    log.flush().unwrap();
    drop(log);
    let log = open(dir.path(), small_segments(), leo);
    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(read_all(&log, 0), all);
}

#[test]
fn a_batch_set_larger_than_a_segment_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_segments(), 0);
    let batch = simple_batch(1, 2000, 0);
    assert!(matches!(
        log.append_as_leader(&Bytes::from(batch), 0, 0),
        Err(StorageError::RecordBatchTooLarge { max: 1000, .. })
    ));
}

/// Checks each offset index entry against the segment: the batch at the
/// entry's position has the entry's offset as its last offset.
fn check_index_entries(log: &Log) -> usize {
    let mut checked = 0;
    for segment in log.segments.values() {
        let file = std::fs::read(segment.log_path()).unwrap();
        for e in segment.offset_index().entries() {
            let h = RecordBatchHeader::parse(&file[e.position as usize..]).unwrap();
            assert_eq!(
                h.last_offset(),
                segment.base_offset() + e.relative_offset as i64
            );
            checked += 1;
        }
    }
    checked
}

#[test]
fn offset_index_lookup_is_correct_with_many_batches() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        index_interval_bytes: 200,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config.clone(), 0);
    let mut ranges = Vec::new();
    for i in 0..500usize {
        let batch = simple_batch(1 + i % 5, 7 + i % 13, i as i64);
        let info = log.append_as_leader(&Bytes::from(batch), 0, 0).unwrap();
        ranges.push((info.first_offset, info.last_offset));
    }
    assert!(check_index_entries(&log) > 50);
    for (first, last) in &ranges {
        for offset in *first..=*last {
            let bytes = log
                .read(offset, 1, i64::MAX, true)
                .unwrap()
                .records
                .unwrap()
                .read_to_bytes()
                .unwrap();
            let h = RecordBatchHeader::validate(&bytes).unwrap();
            assert_eq!((h.base_offset, h.last_offset()), (*first, *last));
        }
    }
    // The persisted index files are Kafka's layout of the in-memory entries.
    log.flush().unwrap();
    let segment = log.segments.values().next().unwrap();
    let mut expected = Vec::new();
    for e in segment.offset_index().entries() {
        let mut buf = [0u8; 8];
        e.encode(&mut buf);
        expected.extend_from_slice(&buf);
    }
    assert_eq!(
        std::fs::read(segment.offset_index().path()).unwrap(),
        expected
    );
    let time_file = std::fs::read(segment.time_index().path()).unwrap();
    assert_eq!(time_file.len(), segment.time_index().len() * 12);
    for (chunk, e) in time_file.chunks(12).zip(segment.time_index().entries()) {
        assert_eq!(
            i64::from_be_bytes(chunk[..8].try_into().unwrap()),
            e.timestamp
        );
        assert_eq!(
            u32::from_be_bytes(chunk[8..].try_into().unwrap()),
            e.relative_offset
        );
    }
}

#[test]
fn torn_tail_is_truncated_at_every_byte_position() {
    let a = simple_batch(2, 10, 1);
    let b = simple_batch(3, 10, 2);
    let c = simple_batch(2, 30, 3);
    let valid = (a.len() + b.len()) as u64;
    for cut in valid..valid + c.len() as u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), LogConfig::default(), 0);
        for batch in [&a, &b, &c] {
            log.append_as_leader(&Bytes::from(batch.clone()), 0, 0)
                .unwrap();
        }
        let path = log.dir().join("00000000000000000000.log");
        drop(log);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(cut)
            .unwrap();

        let mut log = open(dir.path(), LogConfig::default(), 0);
        assert_eq!(log.log_end_offset(), 5, "cut at {cut}");
        assert_eq!(log.size_in_bytes(), valid);
        let mut expected = stamped(&a, 0, 0);
        expected.extend(stamped(&b, 2, 0));
        assert_eq!(read_all(&log, 0), expected);
        let info = log.append_as_leader(&Bytes::from(c.clone()), 0, 0).unwrap();
        assert_eq!(info.first_offset, 5);
        expected.extend(stamped(&c, 5, 0));
        assert_eq!(read_all(&log, 0), expected);
    }
}

#[test]
fn crc_corrupted_tail_is_truncated_and_later_segments_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_segments(), 0);
    for i in 0..30 {
        log.append_as_leader(&Bytes::from(simple_batch(2, 50, i)), 0, 0)
            .unwrap();
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 3);
    let victim = bases[1];
    let path = log.dir().join(format!("{victim:020}.log"));
    drop(log);
    // Corrupt the record bytes of the second batch of segment 1.
    let mut file = std::fs::read(&path).unwrap();
    let first = RecordBatchHeader::parse(&file).unwrap();
    let at = first.size_in_bytes() + 70;
    file[at] ^= 0x55;
    std::fs::write(&path, &file).unwrap();

    let log = open(dir.path(), small_segments(), 0);
    assert_eq!(log.segment_base_offsets(), vec![bases[0], victim]);
    assert_eq!(log.log_end_offset(), first.next_offset());
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        first.size_in_bytes() as u64
    );
    assert!(!dir
        .path()
        .join("orders-3")
        .join(format!("{:020}.log", bases[2]))
        .exists());
}

#[test]
fn missing_or_corrupt_index_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_segments(), 0);
    for i in 0..30 {
        log.append_as_leader(&Bytes::from(simple_batch(2, 50, i)), 0, 0)
            .unwrap();
    }
    let leo = log.flush().unwrap();
    assert_eq!(leo, log.log_end_offset());
    let first = log.segments.values().next().unwrap();
    let index_path = first.offset_index().path().to_path_buf();
    let time_path = first.time_index().path().to_path_buf();
    let index_bytes = std::fs::read(&index_path).unwrap();
    let time_bytes = std::fs::read(&time_path).unwrap();
    assert!(!index_bytes.is_empty() && !time_bytes.is_empty());
    drop(log);

    std::fs::remove_file(&index_path).unwrap();
    std::fs::write(&time_path, [1, 2, 3]).unwrap();
    // Recovery point at the end: the first segment is not re-validated, only
    // its indexes are rebuilt.
    let mut log = open(dir.path(), small_segments(), leo);
    assert_eq!(log.recovery_point(), leo);
    // Rebuilt in memory; written (and synced) by the next flush, so that no
    // index file stays open from the rebuild to a sync.
    assert!(log.segments.values().all(|s| !s.holds_descriptors().1));
    log.flush().unwrap();
    assert_eq!(std::fs::read(&index_path).unwrap(), index_bytes);
    assert_eq!(std::fs::read(&time_path).unwrap(), time_bytes);
    assert!(check_index_entries(&log) > 0);
}

#[test]
fn leader_epoch_cache_follows_appends_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), 0);
    assert_eq!(log.end_offset_for_epoch(0), (-1, -1));
    log.append_as_leader(&Bytes::from(simple_batch(2, 5, 1)), 0, 0)
        .unwrap();
    log.append_as_leader(&Bytes::from(simple_batch(2, 5, 1)), 0, 0)
        .unwrap();
    log.append_as_leader(&Bytes::from(simple_batch(3, 5, 1)), 3, 0)
        .unwrap();
    log.append_as_leader(&Bytes::from(simple_batch(1, 5, 1)), 5, 0)
        .unwrap();
    assert_eq!(log.latest_epoch(), Some(5));
    assert_eq!(log.end_offset_for_epoch(5), (5, 8));
    assert_eq!(log.end_offset_for_epoch(0), (0, 4));
    assert_eq!(log.end_offset_for_epoch(2), (0, 4));
    assert_eq!(log.end_offset_for_epoch(4), (3, 7));
    assert_eq!(log.end_offset_for_epoch(6), (-1, -1));
    let text = std::fs::read_to_string(log.dir().join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(text, "0\n3\n0 0\n3 4\n5 7\n");
    drop(log);
    let log = open(dir.path(), LogConfig::default(), 8);
    assert_eq!(log.end_offset_for_epoch(4), (3, 7));
    assert_eq!(log.end_offset_for_epoch(5), (5, 8));
}

#[test]
fn epoch_entries_past_a_truncated_log_end_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), 0);
    log.append_as_leader(&Bytes::from(simple_batch(2, 5, 1)), 1, 0)
        .unwrap();
    let keep = log.size_in_bytes();
    log.append_as_leader(&Bytes::from(simple_batch(2, 5, 1)), 2, 0)
        .unwrap();
    let path = log.dir().join("00000000000000000000.log");
    drop(log);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(keep + 3)
        .unwrap();
    let log = open(dir.path(), LogConfig::default(), 0);
    assert_eq!(log.log_end_offset(), 2);
    assert_eq!(log.latest_epoch(), Some(1));
    assert_eq!(log.end_offset_for_epoch(1), (1, 2));
}

#[test]
fn timestamp_lookups_find_the_right_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_segments(), 0);
    assert_eq!(log.read_batch_for_timestamp(0).unwrap(), None);
    assert_eq!(log.read_batch_with_max_timestamp().unwrap(), None);
    // Max timestamps: 100, 300, 200, 300, 50, ... across several segments.
    let maxes = [100i64, 300, 200, 300, 50, 120, 500, 500, 10, 400, 450, 20];
    let mut stored = Vec::new();
    for ts in maxes {
        let batch = build_batch(&BatchSpec::new(&[ts - 5, ts], 150));
        let info = log
            .append_as_leader(&Bytes::from(batch.clone()), 0, 0)
            .unwrap();
        stored.push(stamped(&batch, info.first_offset, 0));
    }
    assert!(log.segment_base_offsets().len() > 2);
    let find = |ts: i64| {
        log.read_batch_for_timestamp(ts)
            .unwrap()
            .map(|b| b.to_vec())
    };
    for target in [0i64, 100, 101, 250, 300, 301, 450, 500] {
        let expected = maxes
            .iter()
            .position(|m| *m >= target)
            .map(|i| stored[i].clone());
        assert_eq!(find(target), expected, "target {target}");
    }
    assert_eq!(find(501), None);
    assert_eq!(
        log.read_batch_with_max_timestamp()
            .unwrap()
            .unwrap()
            .to_vec(),
        stored[6]
    );
    // Same answers after a reopen that trusts the indexes of old segments.
    let leo = log.flush().unwrap();
    drop(log);
    let log = open(dir.path(), small_segments(), leo);
    for target in [0i64, 101, 301, 401, 500] {
        let expected = maxes
            .iter()
            .position(|m| *m >= target)
            .map(|i| stored[i].clone());
        assert_eq!(
            log.read_batch_for_timestamp(target)
                .unwrap()
                .map(|b| b.to_vec()),
            expected
        );
    }
    assert_eq!(
        log.read_batch_with_max_timestamp()
            .unwrap()
            .unwrap()
            .to_vec(),
        stored[6]
    );
}

#[test]
fn topic_id_is_written_in_kafka_format_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), 0);
    assert_eq!(log.topic_id(), None);
    let id = [0xfbu8; 16];
    log.set_topic_id(id).unwrap();
    log.set_topic_id(id).unwrap();
    // Only the flush syncs the file and renames it into place (chaos seed
    // 3002: never visible before it is durable).
    let path = log.dir().join(PARTITION_METADATA_FILE);
    assert!(!path.exists());
    log.flush().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text, "version: 0\ntopic_id: -_v7-_v7-_v7-_v7-_v7-w");
    assert!(matches!(
        log.set_topic_id([1; 16]),
        Err(StorageError::InconsistentTopicId { .. })
    ));
    drop(log);
    let log = open(dir.path(), LogConfig::default(), 0);
    assert_eq!(log.topic_id(), Some(id));
}

#[test]
fn flush_advances_the_recovery_point_and_delete_removes_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), 0);
    log.append_as_leader(&Bytes::from(simple_batch(3, 5, 1)), 0, 0)
        .unwrap();
    assert_eq!(log.recovery_point(), 0);
    let pending = log.prepare_flush().unwrap();
    log.append_as_leader(&Bytes::from(simple_batch(2, 5, 1)), 0, 0)
        .unwrap();
    pending.sync().unwrap();
    // The second append was written before the sync began: covered too.
    assert_eq!(log.complete_flush(&pending), 5);
    log.append_as_leader(&Bytes::from(simple_batch(2, 5, 1)), 0, 0)
        .unwrap();
    assert_eq!(log.flush().unwrap(), 7);
    let slice = log
        .read(0, usize::MAX, i64::MAX, true)
        .unwrap()
        .records
        .unwrap();
    let part_dir = log.dir().to_path_buf();
    log.delete().unwrap();
    assert!(!part_dir.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // A slice handed out before the delete stays readable.
    assert_eq!(slice.read_to_bytes().unwrap().len(), slice.len());
}

#[test]
fn a_249_character_topic_can_be_deleted_kafka_6795() {
    let dir = tempfile::tempdir().unwrap();
    // 249 is Kafka's longest legal topic name; with the partition and the
    // `.<uuid>-delete` suffix the naive delete name is 291 bytes.
    let long = TopicPartition::new("t".repeat(249), 0);
    let mut log = Log::open(dir.path().to_path_buf(), long, LogConfig::default(), 0, 0).unwrap();
    log.append_as_leader(&Bytes::from(simple_batch(2, 5, 1)), 0, 0)
        .unwrap();
    let part_dir = log.dir().to_path_buf();
    assert!(part_dir.exists());
    log.delete().unwrap();
    assert!(!part_dir.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn delete_dir_names_fit_255_bytes_and_keep_kafkas_shape() {
    let unique = "0123456789abcdef0123456789abcdef";
    assert_eq!(
        capped_delete_dir_name(&tp(), unique),
        format!("orders-3.{unique}-delete")
    );
    for (len, partition) in [
        (1, 0),
        (200, 7),
        (214, 7),
        (215, 7),
        (249, 0),
        (249, i32::MAX),
    ] {
        let tp = TopicPartition::new("x".repeat(len), partition);
        let name = capped_delete_dir_name(&tp, unique);
        assert!(name.len() <= 255, "{len}: {} bytes", name.len());
        let suffix = format!("-{partition}.{unique}{DELETE_DIR_SUFFIX}");
        assert!(name.ends_with(&suffix), "{name}");
        let kept = name.len() - suffix.len();
        assert_eq!(kept, len.min(255 - suffix.len()), "{name}");
        assert!(tp.topic.starts_with(&name[..kept]));
    }
    // A random name has 32 hex digits and the same bound.
    let name = log_delete_dir_name(&TopicPartition::new("y".repeat(249), 12));
    assert_eq!(name.len(), 255);
    assert!(name.ends_with(DELETE_DIR_SUFFIX));
    // Multi-byte characters are never split (topic names are ASCII in
    // Kafka, but a TopicPartition can hold any string).
    let wide = TopicPartition::new("é".repeat(200), 1);
    let name = capped_delete_dir_name(&wide, unique);
    assert!(name.len() <= 255 && name.ends_with(DELETE_DIR_SUFFIX));
}

mod model {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        /// Append batches given as (record count, value length).
        Append(Vec<(usize, usize)>),
        /// Read at a fraction (per mille) of the log end offset.
        Read(u16, usize),
        Flush,
        /// Reopen with the current recovery point.
        Reopen,
        /// A clean shutdown, then a reopen without recovery (as after the
        /// clean-shutdown marker).
        CleanReopen,
        /// Reopen after cutting `n` bytes off the last segment (a crash that
        /// lost unflushed bytes).
        Crash(usize),
        /// DeleteRecords to a fraction (per mille) of the way from the log
        /// start to the log end, then a retention pass.
        DeleteRecords(u16),
        /// A retention pass with `retention.bytes` set to this many bytes.
        RetentionBytes(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => prop::collection::vec((1usize..5, 0usize..120), 1..4).prop_map(Op::Append),
            3 => (0u16..=1000, 1usize..2000).prop_map(|(f, m)| Op::Read(f, m)),
            1 => Just(Op::Flush),
            1 => Just(Op::Reopen),
            1 => Just(Op::CleanReopen),
            1 => (1usize..400).prop_map(Op::Crash),
            1 => (0u16..=1000).prop_map(Op::DeleteRecords),
            1 => (0u64..6000).prop_map(Op::RetentionBytes),
        ]
    }

    fn open_at(dir: &Path, config: LogConfig, recovery_point: i64, log_start_offset: i64) -> Log {
        Log::open(
            dir.to_path_buf(),
            tp(),
            config,
            recovery_point,
            log_start_offset,
        )
        .unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn log_matches_a_vec_of_batches(ops in prop::collection::vec(op(), 1..40)) {
            let dir = tempfile::tempdir().unwrap();
            let config = LogConfig { segment_bytes: 2048, index_interval_bytes: 90, ..LogConfig::default() };
            let mut log = open(dir.path(), config.clone(), 0);
            // Model: the stored bytes of each batch and its offset range, the
            // log start offset (the checkpointed one, passed on reopen) and
            // the log end offset.
            let mut model: Vec<(i64, i64, Vec<u8>)> = Vec::new();
            let mut start = 0i64;
            let mut end = 0i64;
            let mut ts = 0i64;
            for op in ops {
                match op {
                    Op::Append(specs) => {
                        let mut records = Vec::new();
                        let mut batches = Vec::new();
                        for (count, len) in specs {
                            ts += 1;
                            let b = simple_batch(count, len, ts);
                            records.extend_from_slice(&b);
                            batches.push(b);
                        }
                        let info = log.append_as_leader(&Bytes::from(records), 0, 0).unwrap();
                        let mut next = info.first_offset;
                        prop_assert_eq!(next, end);
                        for b in batches {
                            let h = RecordBatchHeader::parse(&b).unwrap();
                            model.push((next, next + h.last_offset_delta as i64, stamped(&b, next, 0)));
                            next += h.last_offset_delta as i64 + 1;
                        }
                        end = next;
                    }
                    Op::Read(frac, max_bytes) => {
                        let offset = start + (end - start) * frac as i64 / 1000;
                        let info = log.read(offset, max_bytes, i64::MAX, true).unwrap();
                        let got = info.records.map(|r| r.read_to_bytes().unwrap().to_vec()).unwrap_or_default();
                        match model.iter().position(|m| m.1 >= offset) {
                            None => prop_assert!(got.is_empty()),
                            Some(i) => {
                                prop_assert!(got.len() >= model[i].2.len());
                                let mut pos = 0;
                                let mut j = i;
                                while pos < got.len() {
                                    prop_assert_eq!(&got[pos..pos + model[j].2.len()], &model[j].2[..]);
                                    pos += model[j].2.len();
                                    j += 1;
                                }
                                prop_assert!(j == i + 1 || got.len() <= max_bytes);
                            }
                        }
                        if offset > start {
                            // Below the log start offset reads are refused.
                            let below = log.read(start - 1, max_bytes, i64::MAX, true);
                            let refused = matches!(below, Err(StorageError::OffsetOutOfRange { .. }));
                            prop_assert!(start == 0 || refused);
                        }
                    }
                    Op::Flush => {
                        let rp = log.flush().unwrap();
                        prop_assert_eq!(rp, end);
                    }
                    Op::Reopen => {
                        let rp = log.recovery_point();
                        drop(log);
                        log = open_at(dir.path(), config.clone(), rp, start);
                    }
                    Op::CleanReopen => {
                        prop_assert_eq!(log.flush_for_shutdown().unwrap(), end);
                        log.write_producer_snapshot().unwrap();
                        drop(log);
                        log = Log::open_with_file_system(
                            crate::fs::RealFileSystem::shared(),
                            dir.path().to_path_buf(),
                            tp(),
                            config.clone(),
                            end,
                            start,
                            true,
                        )
                        .unwrap();
                        prop_assert_eq!(log.recovered_segments(), 0);
                        prop_assert_eq!(log.log_end_offset(), end);
                    }
                    Op::Crash(cut) => {
                        let rp = log.recovery_point();
                        let last = *log.segment_base_offsets().last().unwrap();
                        drop(log);
                        let path = dir.path().join("orders-3").join(format!("{last:020}.log"));
                        let len = std::fs::metadata(&path).unwrap().len();
                        let new_len = len.saturating_sub(cut as u64);
                        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(new_len).unwrap();
                        // The model keeps the batches wholly inside the file.
                        let mut seg_pos = 0u64;
                        model.retain(|m| {
                            if m.0 < last { return true; }
                            seg_pos += m.2.len() as u64;
                            seg_pos <= new_len
                        });
                        end = model.last().map_or(last, |m| m.1 + 1).max(last);
                        if end < start {
                            // Kafka's LogLoader: a log ending below its
                            // checkpointed start restarts empty there.
                            model.clear();
                            end = start;
                        }
                        log = open_at(dir.path(), config.clone(), rp.min(end), start);
                    }
                    Op::DeleteRecords(frac) => {
                        let target = start + (end - start) * frac as i64 / 1000;
                        log.maybe_increment_log_start_offset(target, end).unwrap();
                        start = start.max(target);
                        log.delete_old_segments(0, end).unwrap().remove_files().unwrap();
                    }
                    Op::RetentionBytes(limit) => {
                        log.set_config(LogConfig { retention_bytes: limit as i64, ..config.clone() });
                        let before = log.segment_base_offsets();
                        log.delete_old_segments(0, end).unwrap().remove_files().unwrap();
                        log.set_config(config.clone());
                        let after = log.segment_base_offsets();
                        // Only whole oldest segments go, and only while the
                        // rest still holds retention.bytes.
                        prop_assert!(before.ends_with(&after[1..]) || after.len() == 1);
                        prop_assert!(log.log_start_offset() >= start);
                        start = log.log_start_offset();
                    }
                }
                prop_assert_eq!(log.log_start_offset(), start);
                prop_assert_eq!(log.log_end_offset(), end);
                let all: Vec<u8> = model.iter().filter(|m| m.1 >= start).flat_map(|m| m.2.clone()).collect();
                prop_assert_eq!(read_all(&log, start), all);
            }
        }
    }
}

/// `batch` with its header max timestamp replaced by `max_timestamp` and
/// the CRC recomputed (a producer that lies about it).
fn with_max_timestamp(mut batch: Vec<u8>, max_timestamp: i64) -> Vec<u8> {
    batch[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// Issue 15 (LogValidator): under CreateTime a batch's stored max timestamp
/// is its records' largest, whatever the producer wrote (2^62 here), with a
/// valid CRC; for a compressed batch the caller's outcome is written into
/// the header and the payload stays byte for byte as sent.
#[test]
fn a_lying_max_timestamp_is_replaced_by_the_records_with_a_valid_crc() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), 0);
    let lying = with_max_timestamp(
        build_batch(&BatchSpec::new(&[1000, 1005, 1003], 4)),
        1 << 62,
    );
    let info = log.append_as_leader(&Bytes::from(lying), 0, 0).unwrap();
    assert_eq!(
        (info.max_timestamp, info.offset_of_max_timestamp),
        (1005, 2)
    );
    let gzip = with_max_timestamp(
        batch_with_records(
            &crate::compression::compress(1, b"opaque").unwrap(),
            2,
            1,
            1,
        ),
        1 << 62,
    );
    let validated = [batch::ValidatedRecords { max_timestamp: 777 }];
    let info = log
        .append_produced(&Bytes::from(gzip.clone()), 0, 0, &validated)
        .unwrap();
    assert_eq!(info.max_timestamp, 777);
    // Without an outcome a compressed produced batch is refused.
    assert!(matches!(
        log.append_produced(&Bytes::from(gzip.clone()), 0, 0, &[]),
        Err(StorageError::InvalidRecord { .. })
    ));
    let stored = read_all(&log, 0);
    let first = RecordBatchHeader::validate(&stored).unwrap();
    assert_eq!(first.max_timestamp, 1005);
    let second = RecordBatchHeader::validate(&stored[first.size_in_bytes()..]).unwrap();
    assert_eq!(second.max_timestamp, 777);
    assert_eq!(
        &stored[first.size_in_bytes() + RECORD_BATCH_OVERHEAD..],
        &gzip[RECORD_BATCH_OVERHEAD..]
    );
    // The time index and ListOffsets by time follow the real timestamps.
    assert_eq!(
        log.read_batch_for_timestamp(1004).unwrap().map(|b| b.len()),
        { Some(first.size_in_bytes()) }
    );
}

/// KIP-937: CreateTime records outside `[now - before.max.ms, now +
/// after.max.ms]` are refused with INVALID_TIMESTAMP naming the record, and
/// nothing is appended.
#[test]
fn record_timestamps_outside_the_window_are_invalid_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        message_timestamp_before_max_ms: 1000,
        message_timestamp_after_max_ms: 100,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config, 0);
    let now = 10_000;
    for (timestamps, bad) in [(&[9000, 8999][..], 1), (&[10_100, 10_101][..], 1)] {
        let batch = build_batch(&BatchSpec::new(timestamps, 4));
        match log.append_as_leader(&Bytes::from(batch), 0, now) {
            Err(StorageError::InvalidTimestamp { record_index, .. }) => {
                assert_eq!(record_index, bad)
            }
            other => panic!("{timestamps:?}: {other:?}"),
        }
    }
    assert_eq!(log.log_end_offset(), 0);
    let edges = build_batch(&BatchSpec::new(&[9000, 10_100], 4));
    log.append_as_leader(&Bytes::from(edges), 0, now).unwrap();
}

/// A log deleted under an appender answers `LogDeleted` on append and
/// flush (the broker's NOT_LEADER_OR_FOLLOWER), never an I/O error.
#[test]
fn appends_and_flushes_of_a_deleted_log_answer_log_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(&dir.path().join("orders-3"), LogConfig::default(), 0);
    log.append_as_leader(&Bytes::from(simple_batch(1, 4, 1)), 0, 0)
        .unwrap();
    log.delete_in_place().unwrap();
    assert!(log.is_deleted());
    assert!(matches!(
        log.append_as_leader(&Bytes::from(simple_batch(1, 4, 1)), 0, 0),
        Err(StorageError::LogDeleted { .. })
    ));
    assert!(matches!(
        log.prepare_flush(),
        Err(StorageError::LogDeleted { .. })
    ));
}
