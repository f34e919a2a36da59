//! Unit tests of the log cleaner: what compaction keeps and drops, the
//! delete horizon, emptied batches, codecs, concurrency and crash safety of
//! the swap.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::*;
use crate::testutil::RawRecord;
use crate::{CleanupPolicy, TopicPartition};

type Kv = (Option<Vec<u8>>, Option<Vec<u8>>);
/// A record to produce: key and value, `None` for null.
type NewRecord<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);
/// key -> newest value, `None` for a tombstone.
type Newest = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

fn tp() -> TopicPartition {
    TopicPartition::new("compacted", 0)
}

fn compact_config() -> LogConfig {
    LogConfig {
        segment_bytes: 2_000,
        index_interval_bytes: 200,
        cleanup_policy: CleanupPolicy {
            delete: false,
            compact: true,
        },
        min_cleanable_dirty_ratio: 0.0,
        delete_retention_ms: 1_000,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, config: LogConfig) -> Mutex<Log> {
    Mutex::new(Log::open(dir.to_path_buf(), tp(), config, 0, 0).unwrap())
}

fn locked(log: &Mutex<Log>) -> std::sync::MutexGuard<'_, Log> {
    log.lock().unwrap()
}

/// A batch of keyed records (None = null) at timestamps `ts, ts+1, ...`,
/// compressed with `codec`, optionally from an idempotent producer.
fn batch_of(records: &[NewRecord<'_>], ts: i64, codec: u8, producer: Option<(i64, i32)>) -> Bytes {
    let mut section = Vec::new();
    for (i, (k, v)) in records.iter().enumerate() {
        RawRecord {
            timestamp_delta: i as i64,
            offset_delta: i as i64,
            key: k.map_or((-1, &[][..]), |k| (k.len() as i64, k)),
            value: v.map_or((-1, &[][..]), |v| (v.len() as i64, v)),
            ..RawRecord::default()
        }
        .encode(&mut section);
    }
    let (producer_id, base_sequence) = producer.unwrap_or((-1, -1));
    let header = RecordBatchHeader {
        attributes: i16::from(codec),
        last_offset_delta: records.len() as i32 - 1,
        base_timestamp: ts,
        max_timestamp: ts + records.len() as i64 - 1,
        producer_id,
        producer_epoch: if producer_id >= 0 { 0 } else { -1 },
        base_sequence,
        records_count: records.len() as i32,
        ..crate::testutil::empty_header()
    };
    let payload = compression::compress(codec, &section).unwrap();
    Bytes::from(batch::write_batch(&header, &payload))
}

fn put(log: &Mutex<Log>, key: &str, value: Option<&str>, ts: i64) {
    let b = batch_of(
        &[(Some(key.as_bytes()), value.map(str::as_bytes))],
        ts,
        0,
        None,
    );
    locked(log).append_as_leader(&b, 0, ts).unwrap();
}

/// Every stored batch header and its records `(offset, key, value)`, read
/// the way a consumer does: fetch from an offset, advance past the last
/// batch returned.
fn consume(log: &Log) -> (Vec<RecordBatchHeader>, Vec<(i64, Kv)>) {
    let mut headers = Vec::new();
    let mut records = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let info = log.read(offset, usize::MAX, i64::MAX, true).unwrap();
        let Some(slice) = info.records else { break };
        let bytes = slice.read_to_bytes().unwrap();
        let mut pos = 0;
        let before = offset;
        while pos < bytes.len() {
            let h = RecordBatchHeader::parse(&bytes[pos..]).unwrap();
            let whole = &bytes[pos..pos + h.size_in_bytes()];
            assert!(h.crc_is_valid(whole), "CRC of batch at {}", h.base_offset);
            let section = batch::records_section(whole);
            let plain = compression::decompress(h.compression_codec(), section).unwrap();
            let views = batch::read_records(&plain).unwrap();
            assert_eq!(views.len(), h.records_count as usize);
            for r in views {
                let value = r.value.map(<[u8]>::to_vec);
                records.push((
                    h.base_offset + i64::from(r.offset_delta),
                    (r.key.map(<[u8]>::to_vec), value),
                ));
            }
            offset = h.next_offset();
            headers.push(h);
            pos += h.size_in_bytes();
        }
        assert!(offset > before, "a consumer at {before} must advance");
    }
    (headers, records)
}

/// key -> newest value (None = tombstone) over `records`.
fn newest(records: &[(i64, Kv)]) -> Newest {
    let mut out = BTreeMap::new();
    for (_, (k, v)) in records {
        if let Some(k) = k {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

fn clean(log: &Mutex<Log>, now_ms: i64) -> Result<CleanerStats, CleanerError> {
    let to_clean = locked(log)
        .cleanable(None, now_ms, i64::MAX)
        .unwrap()
        .expect("cleanable");
    clean_log(log, to_clean, now_ms, &CleanerConfig::default())
}

/// 40 keys written 10 times each, then the active segment rolled.
fn overwritten_log(dir: &Path) -> (Mutex<Log>, Newest) {
    let log = open(dir, compact_config());
    for round in 0..10 {
        for key in 0..40 {
            put(
                &log,
                &format!("key-{key:03}"),
                Some(&format!("value-{round}-{key}")),
                1_000 + round,
            );
        }
    }
    locked(&log).roll().unwrap();
    let expected = newest(&consume(&locked(&log)).1);
    (log, expected)
}

#[test]
fn newest_value_of_every_key_is_kept_and_older_ones_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (log, expected) = overwritten_log(dir.path());
    let (before_size, end) = {
        let l = locked(&log);
        (l.size_in_bytes(), l.log_end_offset())
    };
    let stats = clean(&log, 5_000).unwrap();
    assert_eq!(stats.end_offset, end);
    assert_eq!(stats.records_read, 400);
    assert_eq!(stats.records_retained, 40);
    let l = locked(&log);
    let (headers, records) = consume(&l);
    assert_eq!(newest(&records), expected);
    // Exactly one record per key, each the key's last offset.
    assert_eq!(records.len(), 40);
    assert!(records.iter().all(|(o, _)| *o >= 360));
    // Offsets only grow; the last batch before the active segment is kept.
    assert!(headers
        .windows(2)
        .all(|w| w[0].next_offset() <= w[1].base_offset));
    assert_eq!(headers.last().unwrap().next_offset(), end);
    assert_eq!(l.log_end_offset(), end);
    assert!(l.size_in_bytes() < before_size / 5);
    // The cleaned log survives a restart with the same content.
    drop(l);
    drop(log);
    let reopened = open(dir.path(), compact_config());
    assert_eq!(newest(&consume(&locked(&reopened)).1), expected);
    assert_eq!(locked(&reopened).log_end_offset(), end);
}

#[test]
fn tombstones_stay_until_the_delete_horizon_then_go() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config());
    put(&log, "a", Some("a1"), 100);
    put(&log, "b", Some("b1"), 101);
    put(&log, "a", None, 102);
    put(&log, "c", Some("c1"), 103);
    locked(&log).roll().unwrap();
    // First cleaning at t=10_000 keeps the tombstone and stamps the horizon.
    clean(&log, 10_000).unwrap();
    let (headers, records) = consume(&locked(&log));
    assert_eq!(
        records
            .iter()
            .map(|(o, kv)| (*o, kv.clone()))
            .collect::<Vec<_>>(),
        vec![
            (1, (Some(b"b".to_vec()), Some(b"b1".to_vec()))),
            (2, (Some(b"a".to_vec()), None)),
            (3, (Some(b"c".to_vec()), Some(b"c1".to_vec()))),
        ]
    );
    let tombstone_batch = headers.iter().find(|h| h.base_offset == 2).unwrap();
    assert_eq!(tombstone_batch.delete_horizon_ms(), Some(11_000));
    assert_eq!(
        tombstone_batch.max_timestamp, 102,
        "record timestamps are kept"
    );
    // Before the horizon it is still kept.
    clean(&log, 10_999).unwrap();
    assert!(consume(&locked(&log)).1.iter().any(|(o, _)| *o == 2));
    // At the horizon it is dropped; the other keys stay.
    clean(&log, 11_000).unwrap();
    let (_, records) = consume(&locked(&log));
    let keys: Vec<_> = records
        .iter()
        .map(|(_, (k, _))| k.clone().unwrap())
        .collect();
    assert_eq!(keys, vec![b"b".to_vec(), b"c".to_vec()]);
}

#[test]
fn emptied_batches_are_dropped_except_the_round_end_and_a_producers_last() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config());
    let producer = 7;
    // Offsets 0-1: the producer's only batch, both keys superseded later.
    let b = batch_of(
        &[(Some(b"x"), Some(b"x0")), (Some(b"y"), Some(b"y0"))],
        10,
        0,
        Some((producer, 0)),
    );
    locked(&log).append_as_leader(&b, 0, 10).unwrap();
    put(&log, "z", Some("z0"), 11); // offset 2, superseded: dropped
    put(&log, "x", Some("x1"), 12); // 3
    put(&log, "y", Some("y1"), 13); // 4
    put(&log, "z", Some("z1"), 14); // 5
    put(&log, "z", Some("z2"), 15); // 6: supersedes 5; last batch of the round
    put(&log, "x", Some("x2"), 16); // 7
    put(&log, "z", Some("z3"), 17); // 8: supersedes 6
    locked(&log).roll().unwrap();
    clean(&log, 1_000).unwrap();
    let (headers, records) = consume(&locked(&log));
    let kept: Vec<(i64, i32, i32)> = headers
        .iter()
        .map(|h| (h.base_offset, h.last_offset_delta, h.records_count))
        .collect();
    // 0-1: the producer's last batch, emptied but kept with its offsets;
    // 2, 3, 5 and 6 emptied and dropped.
    assert_eq!(kept, vec![(0, 1, 0), (4, 0, 1), (7, 0, 1), (8, 0, 1)]);
    let empty = headers[0];
    assert_eq!(
        (empty.producer_id, empty.producer_epoch, empty.base_sequence),
        (producer, 0, 0)
    );
    assert_eq!(empty.compression_codec(), 0);
    assert_eq!(records.len(), 3);
    // The producer's sequence survives a restart: its retry is a duplicate
    // and its next batch continues the sequence.
    drop(log);
    let log = open(dir.path(), compact_config());
    let retry = locked(&log).append_as_leader(&b, 0, 20).unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.first_offset, 0);
    let next = batch_of(&[(Some(b"w"), Some(b"w0"))], 21, 0, Some((producer, 2)));
    assert!(
        !locked(&log)
            .append_as_leader(&next, 0, 21)
            .unwrap()
            .duplicate
    );
}

#[test]
fn an_emptied_last_batch_of_the_round_keeps_the_log_end_offset() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config());
    put(&log, "k", Some("v1"), 1);
    put(&log, "k", None, 2);
    locked(&log).roll().unwrap();
    clean(&log, 100).unwrap();
    // Past the horizon the tombstone goes; its batch stays header-only
    // because it ends the cleaned range.
    clean(&log, 100 + 1_000).unwrap();
    let (headers, records) = consume(&locked(&log));
    assert!(records.is_empty());
    assert_eq!(headers.len(), 1);
    assert_eq!((headers[0].base_offset, headers[0].records_count), (1, 0));
    // Kafka's writeEmptyHeader: both timestamps are the batch's max one.
    assert_eq!(headers[0].base_timestamp, headers[0].max_timestamp);
    assert!(headers[0].max_timestamp >= 2, "{:?}", headers[0]);
    drop(log);
    let log = open(dir.path(), compact_config());
    assert_eq!(locked(&log).log_end_offset(), 2);
    put(&log, "k", Some("v3"), 3);
    assert_eq!(consume(&locked(&log)).1.last().unwrap().0, 2);
}

#[test]
fn compressed_batches_are_recompressed_with_their_codec() {
    for codec in [
        compression::GZIP,
        compression::SNAPPY,
        compression::LZ4,
        compression::ZSTD,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path(), compact_config());
        let first = batch_of(
            &[
                (Some(b"a"), Some(b"a0")),
                (Some(b"b"), Some(b"b0")),
                (Some(b"c"), Some(b"c0")),
            ],
            50,
            codec,
            None,
        );
        locked(&log).append_as_leader(&first, 0, 50).unwrap();
        put(&log, "b", Some("b1"), 60);
        locked(&log).roll().unwrap();
        clean(&log, 1_000).unwrap();
        let (headers, records) = consume(&locked(&log));
        assert_eq!(headers[0].compression_codec(), codec, "codec {codec}");
        assert_eq!(
            (
                headers[0].base_offset,
                headers[0].last_offset_delta,
                headers[0].records_count
            ),
            (0, 2, 2)
        );
        // Record timestamps are unchanged: the first kept record is at 50.
        assert_eq!(
            (headers[0].base_timestamp, headers[0].max_timestamp),
            (50, 52)
        );
        let got: Vec<_> = records
            .iter()
            .map(|(o, (k, v))| (*o, k.clone().unwrap(), v.clone().unwrap()))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, b"a".to_vec(), b"a0".to_vec()),
                (2, b"c".to_vec(), b"c0".to_vec()),
                (3, b"b".to_vec(), b"b1".to_vec())
            ]
        );
    }
}

#[test]
fn appends_and_reads_proceed_while_the_cleaner_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (log, mut expected) = overwritten_log(dir.path());
    // One group: the cleaned segment receives the newest values.
    locked(&log).set_config(LogConfig {
        segment_bytes: 1 << 20,
        ..compact_config()
    });
    let to_clean = locked(&log)
        .cleanable(None, 5_000, i64::MAX)
        .unwrap()
        .unwrap();
    let log = Arc::new(log);
    let guard = locked(&log);
    let cleaner = {
        let log = log.clone();
        std::thread::spawn(move || clean_log(&log, to_clean, 5_000, &CleanerConfig::default()))
    };
    // While this thread holds the log's lock, the cleaner still writes the
    // cleaned segment: it reads and writes without the lock.
    let cleaned = dir.path().join("compacted-0").join(format!(
        "{}{LOG_FILE_SUFFIX}{CLEANED_FILE_SUFFIX}",
        file_stem(0)
    ));
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::metadata(&cleaned).map_or(true, |m| m.len() == 0) {
        assert!(
            Instant::now() < deadline,
            "the cleaner wrote nothing while the lock was held"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut guard = guard;
    let b = batch_of(&[(Some(b"key-001"), Some(b"during"))], 9_000, 0, None);
    guard.append_as_leader(&b, 0, 9_000).unwrap();
    let during = consume(&guard).1;
    assert_eq!(during.last().unwrap().1 .1.as_deref(), Some(&b"during"[..]));
    drop(guard);
    cleaner.join().unwrap().unwrap();
    expected.insert(b"key-001".to_vec(), Some(b"during".to_vec()));
    assert_eq!(newest(&consume(&locked(&log)).1), expected);
}

#[test]
fn cleaning_aborts_when_retention_changes_the_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = overwritten_log(dir.path());
    let to_clean = locked(&log)
        .cleanable(None, 5_000, i64::MAX)
        .unwrap()
        .unwrap();
    {
        let mut l = locked(&log);
        let second = l.segment_base_offsets()[1];
        let end = l.log_end_offset();
        l.maybe_increment_log_start_offset(second, end).unwrap();
        l.delete_old_segments(5_000, end)
            .unwrap()
            .remove_files()
            .unwrap();
    }
    let before = consume(&locked(&log)).1;
    let err = clean_log(&log, to_clean, 5_000, &CleanerConfig::default()).unwrap_err();
    assert!(
        matches!(err, CleanerError::Aborted { base_offset: 0, .. }),
        "{err}"
    );
    assert_eq!(consume(&locked(&log)).1, before);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("compacted-0"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(CLEANED_FILE_SUFFIX) || n.ends_with(SWAP_FILE_SUFFIX))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Names of the partition directory's files that only an unfinished swap
/// or deletion leaves.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir.join("compacted-0"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".swap") || n.ends_with(".cleaned") || n.ends_with(".deleted"))
        .collect()
}

/// Every rename of the swap (the cleaned files to `.swap`, each old
/// segment's files to `.deleted`, the `.swap` files to their final names)
/// fails in turn, through the file-system seam:
/// - as an I/O error: the running log keeps serving exactly what it held
///   (regression: it used to drop the old segments from memory first), and
///   the next open finishes or discards the swap;
/// - as a crash followed by power loss: the reopened log holds the newest
///   value of every key, its segments have their indexes (regression: a
///   crash between the final renames left the cleaned segment with empty
///   ones), and no `.swap`, `.cleaned` or `.deleted` file is left.
#[test]
fn every_rename_of_the_swap_can_fail_or_crash() {
    let merged = LogConfig {
        segment_bytes: 1 << 20,
        ..compact_config()
    };
    let old_segments = {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = overwritten_log(dir.path());
        let n = locked(&log).segment_base_offsets().len() - 1;
        n
    };
    assert!(old_segments >= 3, "{old_segments}");
    // Three files each: to `.swap`, old segments to `.deleted`, to final.
    let renames = 3 + 3 * old_segments + 3;
    for crash in [false, true] {
        for nth in 0..renames {
            let dir = tempfile::tempdir().unwrap();
            let (log, expected) = overwritten_log(dir.path());
            let end = locked(&log).log_end_offset();
            drop(log);
            let fs = Arc::new(crate::fs::faulty::FaultyFileSystem::new(dir.path()).unwrap());
            let open_faulty = || {
                Mutex::new(
                    Log::open_with_file_system(
                        fs.clone(),
                        dir.path().to_path_buf(),
                        tp(),
                        merged.clone(),
                        end,
                        0,
                        false,
                    )
                    .unwrap(),
                )
            };
            let log = open_faulty();
            let before = consume(&locked(&log));
            let mut fault = crate::fs::faulty::Fault::new(crate::fs::faulty::FaultKind::Io)
                .after(nth)
                .times(1);
            if crash {
                fault = fault.then_crash();
            }
            fs.fail_renames(fault);
            let result = clean(&log, 5_000);
            assert!(result.is_err(), "rename {nth} injected no fault");
            if crash {
                drop(log);
                fs.simulate_power_loss().unwrap();
            } else {
                let l = locked(&log);
                // (Compared whole; printing 400 records on failure helps nobody.)
                assert!(
                    consume(&l) == before,
                    "live log changed after failed rename {nth}"
                );
                drop(l);
                drop(log);
            }
            let reopened = open_faulty();
            let l = locked(&reopened);
            assert_eq!(
                newest(&consume(&l).1),
                expected,
                "rename {nth}, crash {crash}"
            );
            assert_eq!(l.log_end_offset(), end);
            for (base, segment) in l.segments.range(..end) {
                assert!(
                    segment.size() == 0 || segment.max_timestamp() >= 0,
                    "rename {nth}, crash {crash}: segment {base} lost its time index"
                );
            }
            assert!(
                leftovers(dir.path()).is_empty(),
                "rename {nth}: {:?}",
                leftovers(dir.path())
            );
            drop(l);
            clean(&reopened, 5_000).unwrap();
            assert_eq!(newest(&consume(&locked(&reopened)).1), expected);
        }
    }
}

/// Regression: a crash after the cleaned segment's index files got their
/// final names but before its `.log` did must not leave it with empty
/// indexes (it lies below the recovery point, so nothing else rebuilds
/// them): the next open rebuilds them.
#[test]
fn a_crash_between_the_final_renames_keeps_the_cleaned_segments_indexes() {
    let merged = LogConfig {
        segment_bytes: 1 << 20,
        ..compact_config()
    };
    let dir = tempfile::tempdir().unwrap();
    let (log, expected) = overwritten_log(dir.path());
    locked(&log).set_config(merged);
    clean(&log, 5_000).unwrap();
    let (index_before, time_index_before, end) = {
        let mut l = locked(&log);
        l.flush().unwrap();
        let cleaned = l.segments.get(&0).unwrap();
        (
            cleaned.offset_index().entries().to_vec(),
            cleaned.time_index().last_entry(),
            l.log_end_offset(),
        )
    };
    assert!(!index_before.is_empty() && time_index_before.is_some());
    drop(log);
    let partition = dir.path().join("compacted-0");
    std::fs::rename(
        partition.join("00000000000000000000.log"),
        partition.join("00000000000000000000.log.swap"),
    )
    .unwrap();
    let reopened = Log::open(dir.path().to_path_buf(), tp(), compact_config(), end, 0).unwrap();
    let cleaned = reopened.segments.get(&0).unwrap();
    assert_eq!(cleaned.offset_index().entries(), &index_before[..]);
    assert_eq!(cleaned.time_index().last_entry(), time_index_before);
    assert_eq!(newest(&consume(&reopened).1), expected);
}

#[test]
fn a_small_dedupe_buffer_cleans_a_prefix_and_the_next_pass_continues() {
    let dir = tempfile::tempdir().unwrap();
    let (log, expected) = overwritten_log(dir.path());
    let end = locked(&log).log_end_offset();
    let small = CleanerConfig {
        dedupe_buffer_size: 20 * (7 + MAP_ENTRY_OVERHEAD),
    };
    let to_clean = locked(&log)
        .cleanable(None, 5_000, i64::MAX)
        .unwrap()
        .unwrap();
    let stats = clean_log(&log, to_clean, 5_000, &small).unwrap();
    assert!(stats.end_offset > 0 && stats.end_offset < end, "{stats:?}");
    assert_eq!(newest(&consume(&locked(&log)).1), expected);
    let mut checkpoint = stats.end_offset;
    let deadline = Instant::now() + Duration::from_secs(30);
    while checkpoint < end {
        assert!(Instant::now() < deadline);
        let to_clean = locked(&log)
            .cleanable(Some(checkpoint), 5_000, i64::MAX)
            .unwrap()
            .unwrap();
        let stats = clean_log(&log, to_clean, 5_000, &small).unwrap();
        assert!(
            stats.end_offset > checkpoint,
            "no progress from {checkpoint}"
        );
        checkpoint = stats.end_offset;
        assert_eq!(newest(&consume(&locked(&log)).1), expected);
    }
}

/// The first uncleanable offset never passes the segment holding the last
/// stable offset (the high watermark): Kafka's `cleanableOffsets` bound,
/// at segment granularity.
#[test]
fn the_last_stable_offset_bounds_what_is_cleanable_by_its_segment() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config());
    for i in 0..200 {
        put(&log, &format!("k{}", i % 10), Some("v"), 1_000 + i);
    }
    locked(&log).roll().unwrap();
    let l = locked(&log);
    let bases = l.segment_base_offsets();
    assert!(bases.len() >= 4, "{bases:?}");
    let active = *bases.last().unwrap();
    let uncleanable = |stable: i64| {
        l.cleanable(None, 10_000, stable)
            .unwrap()
            .map(|c| c.first_uncleanable_offset)
    };
    assert_eq!(
        uncleanable(i64::MAX),
        Some(active),
        "no bound: the active segment"
    );
    // Inside a segment, or at its base: that segment's base.
    assert_eq!(uncleanable(bases[2] + 1), Some(bases[2]));
    assert_eq!(uncleanable(bases[2]), Some(bases[2]));
    // Inside the first segment: nothing cleanable.
    assert_eq!(uncleanable(0), None);
    assert_eq!(uncleanable(bases[1] - 1), None);
}

#[test]
fn min_compaction_lag_and_dirty_ratio_bound_what_is_cleanable() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        min_compaction_lag_ms: 500,
        min_cleanable_dirty_ratio: 0.5,
        ..compact_config()
    };
    let log = open(dir.path(), config);
    for i in 0..200 {
        put(&log, &format!("k{}", i % 10), Some("v"), 1_000 + i);
    }
    locked(&log).roll().unwrap();
    let l = locked(&log);
    // Every segment is younger than the lag at t=1_100: nothing cleanable.
    assert!(l.cleanable(None, 1_100, i64::MAX).unwrap().is_none());
    let all = l.cleanable(None, 10_000, i64::MAX).unwrap().unwrap();
    assert_eq!(
        all.first_uncleanable_offset,
        *l.segment_base_offsets().last().unwrap()
    );
    assert!(all.should_clean());
    // Checkpointed at the end: nothing dirty.
    assert!(l
        .cleanable(Some(all.first_uncleanable_offset), 10_000, i64::MAX)
        .unwrap()
        .is_none());
    // A checkpoint past the log end is reset to the log start.
    assert_eq!(
        l.cleanable(Some(1 << 40), 10_000, i64::MAX)
            .unwrap()
            .unwrap()
            .first_dirty_offset,
        0
    );
}

#[test]
fn keyless_records_are_refused_on_compacted_topics() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), compact_config());
    let b = batch_of(&[(Some(b"k"), Some(b"v")), (None, Some(b"v"))], 1, 0, None);
    let err = locked(&log).append_as_leader(&b, 0, 1).unwrap_err();
    assert!(
        matches!(
            &err,
            StorageError::RecordWithoutKey {
                record_index: 1,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "Compacted topic cannot accept message without key in topic partition compacted-0."
    );
    assert_eq!(locked(&log).log_end_offset(), 0);
    let gz = batch_of(&[(None, Some(b"v"))], 1, compression::GZIP, None);
    let header = RecordBatchHeader::parse(&gz).unwrap();
    let validate = |require_keys| {
        let rules = crate::batch::RecordRules {
            require_keys,
            ..crate::batch::RecordRules::STRUCTURE_ONLY
        };
        let mut budget = compression::DecompressionBudget::new(1 << 20);
        compression::validate_compressed_batch(&header, &gz, &rules, &mut budget)
    };
    let tp = tp();
    assert!(matches!(
        validate(Some(&tp)),
        Err(StorageError::RecordWithoutKey {
            record_index: 0,
            ..
        })
    ));
    assert!(validate(None).is_ok());
    // Under `delete` keyless records are fine.
    let plain_dir = tempfile::tempdir().unwrap();
    let plain = open(plain_dir.path(), LogConfig::default());
    assert!(locked(&plain).append_as_leader(&b, 0, 1).is_ok());
}

#[test]
fn log_manager_cleans_the_filthiest_log_and_checkpoints_it() {
    let dir = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("compacted", 0);
    let expected;
    let end;
    {
        let manager =
            crate::LogManager::open(dir.path().to_path_buf(), 0, LogConfig::default()).unwrap();
        let log = manager.get_or_create(&tp, compact_config()).unwrap();
        let _plain = manager
            .get_or_create(&TopicPartition::new("plain", 0), LogConfig::default())
            .unwrap();
        for round in 0..5 {
            for key in 0..30 {
                put(&log, &format!("key-{key}"), Some(&format!("{round}")), 100);
            }
        }
        locked(&log).roll().unwrap();
        expected = newest(&consume(&locked(&log)).1);
        end = locked(&log).log_end_offset();
        let (cleaned, stats) = manager
            .clean_filthiest_log(1_000, &CleanerConfig::default(), &|_| Some(i64::MAX))
            .unwrap()
            .unwrap();
        assert_eq!((cleaned, stats.end_offset), (tp.clone(), end));
        assert!(manager
            .clean_filthiest_log(1_000, &CleanerConfig::default(), &|_| Some(i64::MAX))
            .unwrap()
            .is_none());
        let text = std::fs::read_to_string(
            dir.path()
                .join(crate::log_manager::CLEANER_OFFSET_CHECKPOINT_FILE),
        )
        .unwrap();
        assert_eq!(text, format!("0\n1\ncompacted 0 {end}\n"));
        manager.shutdown(-1).unwrap();
    }
    let manager = crate::LogManager::open(dir.path().to_path_buf(), 0, compact_config()).unwrap();
    assert_eq!(manager.cleaner_checkpoint(&tp), Some(end));
    assert_eq!(
        newest(&consume(&locked(&manager.get(&tp).unwrap())).1),
        expected
    );
}

/// Regression: a log whose cleaning fails (an unreadable record) is marked
/// uncleanable, as Kafka's `LogCleanerManager` does, so the next pass cleans
/// the other logs instead of failing on the same one forever; deleting a
/// log forgets both its mark and its cleaner checkpoint.
#[test]
fn a_log_that_fails_to_clean_is_skipped_by_later_passes() {
    let dir = tempfile::tempdir().unwrap();
    let manager = crate::LogManager::open(dir.path().to_path_buf(), 0, compact_config()).unwrap();
    let broken = TopicPartition::new("broken", 0);
    let healthy = TopicPartition::new("healthy", 0);
    for (tp, rounds) in [(&broken, 10), (&healthy, 3)] {
        let log = manager.get_or_create(tp, compact_config()).unwrap();
        for round in 0..rounds {
            for key in 0..20 {
                put(&log, &format!("k{key:02}"), Some(&format!("{round}")), 100);
            }
        }
        locked(&log).roll().unwrap();
    }
    // Damage the first record of `broken`: its key length now runs past
    // the record (the batch header, read by every scan, stays intact).
    let segment = dir.path().join("broken-0/00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[crate::batch::RECORD_BATCH_OVERHEAD + 4] = 0x7e;
    std::fs::write(&segment, bytes).unwrap();

    let failed = manager.clean_filthiest_log(1_000, &CleanerConfig::default(), &|_| Some(i64::MAX));
    assert!(
        matches!(failed, Err(CleanerError::Storage(_))),
        "{failed:?}"
    );
    let (cleaned, _) = manager
        .clean_filthiest_log(1_000, &CleanerConfig::default(), &|_| Some(i64::MAX))
        .unwrap()
        .expect("the healthy log is cleaned next");
    assert_eq!(cleaned, healthy);
    assert!(manager
        .clean_filthiest_log(1_000, &CleanerConfig::default(), &|_| Some(i64::MAX))
        .unwrap()
        .is_none());
    manager.delete(&healthy).unwrap();
    assert_eq!(manager.cleaner_checkpoint(&healthy), None);
}

/// The model test of a compacted log: random keyed appends (several codecs,
/// tombstones), rolls, cleanings, DeleteRecords, reopens and crashes that
/// cut the unflushed tail, against a model holding every record that may
/// still be stored. After every step the log must hold a subset of the
/// model (same key and value at the same offset), and always the newest
/// record of every key at or above the log start offset (tombstones
/// included: the model's clock never reaches a delete horizon); a cleaning
/// leaves the log end offset where it was.
mod model {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        /// One batch of (key index, value: None for a tombstone), codec.
        Append(Vec<(u8, Option<u8>)>, u8),
        Roll,
        Clean,
        /// DeleteRecords to a fraction (per mille) of the way to the end.
        DeleteRecords(u16),
        Reopen,
        /// Flush, append one more batch, then lose it in a crash.
        Crash,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (prop::collection::vec((0u8..6, prop::option::weighted(0.8, 0u8..50)), 1..5), 0u8..5)
                .prop_map(|(records, codec)| Op::Append(records, codec)),
            2 => Just(Op::Roll),
            2 => Just(Op::Clean),
            1 => (0u16..=1000).prop_map(Op::DeleteRecords),
            1 => Just(Op::Reopen),
            1 => Just(Op::Crash),
        ]
    }

    fn encode(records: &[(u8, Option<u8>)], codec: u8, ts: i64) -> (Bytes, Vec<Kv>) {
        let kvs: Vec<Kv> = records
            .iter()
            .map(|(k, v)| {
                (
                    Some(format!("key-{k}").into_bytes()),
                    v.map(|v| format!("value-{v}").into_bytes()),
                )
            })
            .collect();
        let refs: Vec<NewRecord<'_>> = kvs
            .iter()
            .map(|(k, v)| (k.as_deref(), v.as_deref()))
            .collect();
        (batch_of(&refs, ts, codec, None), kvs)
    }

    fn reopen(dir: &Path, log: Mutex<Log>) -> Mutex<Log> {
        let (recovery_point, start) = {
            let l = locked(&log);
            (l.recovery_point(), l.log_start_offset())
        };
        drop(log);
        Mutex::new(
            Log::open(
                dir.to_path_buf(),
                tp(),
                model_config(),
                recovery_point,
                start,
            )
            .unwrap(),
        )
    }

    fn model_config() -> LogConfig {
        LogConfig {
            segment_bytes: 600,
            cleanup_policy: CleanupPolicy {
                delete: true,
                compact: true,
            },
            ..compact_config()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn compacted_log_keeps_the_newest_record_of_every_key(ops in prop::collection::vec(op(), 1..40)) {
            let dir = tempfile::tempdir().unwrap();
            let mut log = Mutex::new(
                Log::open(dir.path().to_path_buf(), tp(), model_config(), 0, 0).unwrap(),
            );
            // offset -> (key, value) of every record that may still be stored.
            let mut model: BTreeMap<i64, Kv> = BTreeMap::new();
            let mut ts = 1_000i64;
            for op in ops {
                let end_before = locked(&log).log_end_offset();
                match op {
                    Op::Append(records, codec) => {
                        ts += 10;
                        let (batch, kvs) = encode(&records, codec, ts);
                        let info = locked(&log).append_as_leader(&batch, 0, ts).unwrap();
                        prop_assert_eq!(info.first_offset, end_before);
                        for (i, kv) in kvs.into_iter().enumerate() {
                            model.insert(info.first_offset + i as i64, kv);
                        }
                    }
                    Op::Roll => locked(&log).roll().unwrap(),
                    Op::Clean => {
                        let to_clean = locked(&log).cleanable(None, ts, i64::MAX).unwrap();
                        if let Some(to_clean) = to_clean {
                            clean_log(&log, to_clean, ts, &CleanerConfig::default()).unwrap();
                        }
                        prop_assert_eq!(locked(&log).log_end_offset(), end_before);
                    }
                    Op::DeleteRecords(frac) => {
                        let mut l = locked(&log);
                        let start = l.log_start_offset();
                        let target = start + (end_before - start) * i64::from(frac) / 1000;
                        l.maybe_increment_log_start_offset(target, end_before).unwrap();
                        l.delete_old_segments(0, end_before).unwrap().remove_files().unwrap();
                    }
                    Op::Reopen => log = reopen(dir.path(), log),
                    Op::Crash => {
                        locked(&log).flush().unwrap();
                        ts += 10;
                        let (batch, _) = encode(&[(0, Some(0))], 0, ts);
                        let last = {
                            let mut l = locked(&log);
                            l.append_as_leader(&batch, 0, ts).unwrap();
                            *l.segment_base_offsets().last().unwrap()
                        };
                        let path = dir.path().join("compacted-0").join(format!("{last:020}.log"));
                        let len = std::fs::metadata(&path).unwrap().len();
                        std::fs::OpenOptions::new().write(true).open(&path).unwrap()
                            .set_len(len - batch.len() as u64).unwrap();
                        log = reopen(dir.path(), log);
                        prop_assert_eq!(locked(&log).log_end_offset(), end_before);
                    }
                }
                let l = locked(&log);
                let start = l.log_start_offset();
                let (_, stored) = consume(&l);
                drop(l);
                let stored: BTreeMap<i64, Kv> = stored.into_iter().filter(|(o, _)| *o >= start).collect();
                for (offset, kv) in &stored {
                    prop_assert_eq!(model.get(offset), Some(kv), "offset {} was never written so", offset);
                }
                let mut newest_offset: BTreeMap<&Option<Vec<u8>>, i64> = BTreeMap::new();
                for (offset, (key, _)) in model.range(start..) {
                    newest_offset.insert(key, *offset);
                }
                for (key, offset) in newest_offset {
                    prop_assert!(stored.contains_key(&offset), "newest record of {:?} at {} lost", key, offset);
                }
                model = stored;
            }
        }
    }
}
