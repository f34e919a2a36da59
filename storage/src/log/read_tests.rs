//! Tests of [`Log::read`]'s batch boundaries (issue 18, zero-copy fetch):
//! every read agrees with a walk of every stored batch header, whatever the
//! offset index and the remembered batch ends know, and the read path reads
//! batch headers only, never record bytes.

use super::*;
use crate::segment::bytes_pread;
use crate::testutil::simple_batch;

fn tp() -> TopicPartition {
    TopicPartition::new("reads", 0)
}

/// One stored batch: its segment's base offset, base and last offsets,
/// byte position in the segment and size.
#[derive(Clone, Copy, Debug)]
struct Stored {
    segment: i64,
    base: i64,
    last: i64,
    position: u64,
    size: usize,
}

/// Every batch of the log, from its segment files read whole (independent
/// of the segment code under test).
fn stored_batches(dir: &Path) -> Vec<Stored> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let segment: i64 = path.file_stem().unwrap().to_str().unwrap().parse().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let mut position = 0usize;
        while position < bytes.len() {
            let h = RecordBatchHeader::parse(&bytes[position..]).unwrap();
            out.push(Stored {
                segment,
                base: h.base_offset,
                last: h.last_offset(),
                position: position as u64,
                size: h.size_in_bytes(),
            });
            position += h.size_in_bytes();
        }
    }
    out
}

/// What [`Log::read`] must return, as `(position, len)` of the records:
/// from the first batch whose last offset is `>= fetch_offset`, the batches
/// of its segment in order while their base offset is below `max_offset`
/// and they fit `max_bytes` (the first one whole when `min_one_batch`).
fn expected_read(
    batches: &[Stored],
    log_end: i64,
    fetch_offset: i64,
    max_bytes: usize,
    max_offset: i64,
    min_one_batch: bool,
) -> Option<(u64, usize)> {
    if fetch_offset >= log_end || fetch_offset >= max_offset {
        return None;
    }
    let first = batches.iter().position(|b| b.last >= fetch_offset)?;
    let mut len = 0usize;
    for b in batches[first..]
        .iter()
        .take_while(|b| b.segment == batches[first].segment)
    {
        if b.base >= max_offset {
            break;
        }
        if len + b.size > max_bytes {
            if len == 0 && min_one_batch {
                len = b.size;
            }
            break;
        }
        len += b.size;
    }
    (len > 0).then_some((batches[first].position, len))
}

/// Compares every read of a grid of fetch offsets, byte limits and offset
/// bounds with [`expected_read`].
fn check_every_read(log: &Log, what: &str) {
    let batches = stored_batches(log.dir());
    let end = log.log_end_offset();
    let mut bounds = vec![i64::MAX, end, end - 1, 0, 1];
    for b in batches.iter().step_by(3) {
        bounds.extend([b.base, b.base + 1, b.last, b.last + 1]);
    }
    let limits = [0, 1, 60, 61, 62, 100, 250, 400, 777, 1000, 2500, 5000];
    for fetch_offset in log.log_start_offset()..=end {
        for &max_offset in &bounds {
            for &max_bytes in limits.iter().chain([&usize::MAX]) {
                for min_one_batch in [false, true] {
                    let got = log
                        .read(fetch_offset, max_bytes, max_offset, min_one_batch)
                        .unwrap();
                    let got_region = got.records.as_ref().map(|r| (r.position(), r.len()));
                    let want = expected_read(
                        &batches,
                        end,
                        fetch_offset,
                        max_bytes,
                        max_offset,
                        min_one_batch,
                    );
                    assert_eq!(
                        got_region, want,
                        "{what}: read({fetch_offset}, {max_bytes}, {max_offset}, {min_one_batch})"
                    );
                    if let Some((position, _)) = want {
                        let meta = got.fetch_offset_metadata;
                        let segment = meta.segment.expect("position of a non-empty read");
                        assert_eq!(u64::from(segment.relative_position), position, "{what}");
                    }
                }
            }
        }
    }
}

/// Appends `n` batches as a follower would (offsets as given, with gaps a
/// compacted leader leaves), of varied sizes, from a fixed seed.
fn append_varied(log: &mut Log, n: usize) {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = log.log_end_offset();
    for i in 0..n {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let count = 1 + (seed % 4) as usize;
        let value_len = ((seed >> 8) % 300) as usize;
        let mut batch = simple_batch(count, value_len, 1_000 + i as i64);
        // A gap before every fifth batch.
        if i % 5 == 4 {
            next += 1 + (seed >> 20) as i64 % 3;
        }
        batch[0..8].copy_from_slice(&next.to_be_bytes());
        log.append_as_follower(&Bytes::from(batch)).unwrap();
        next += count as i64;
    }
    assert_eq!(log.log_end_offset(), next);
}

#[test]
fn every_read_agrees_with_a_walk_of_the_batch_headers() {
    // Every batch indexed, some, none: the boundaries come from the index,
    // the remembered batch ends or the headers alone.
    for index_interval_bytes in [0, 150, 1 << 30] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 3_000,
            index_interval_bytes,
            ..LogConfig::default()
        };
        let mut log = Log::open(dir.path().to_path_buf(), tp(), config.clone(), 0, 0).unwrap();
        append_varied(&mut log, 40);
        assert!(stored_batches(log.dir()).iter().any(|b| b.segment > 0));
        check_every_read(&log, &format!("live, interval {index_interval_bytes}"));
        // Reopened: the active segment no longer remembers batch ends.
        let recovery_point = log.flush().unwrap();
        drop(log);
        let log = Log::open(dir.path().to_path_buf(), tp(), config, recovery_point, 0).unwrap();
        check_every_read(&log, &format!("reopened, interval {index_interval_bytes}"));
    }
}

/// Headers read by one [`Log::read`]: the bytes it read from segment files,
/// which must be whole 61-byte headers.
fn headers_read(log: &Log, fetch_offset: i64, max_bytes: usize, max_offset: i64) -> (u64, usize) {
    let before = bytes_pread();
    let info = log.read(fetch_offset, max_bytes, max_offset, true).unwrap();
    let read = bytes_pread() - before;
    let returned = info.records.map_or(0, |r| r.len());
    assert_eq!(
        read % RECORD_BATCH_OVERHEAD as u64,
        0,
        "read({fetch_offset}, {max_bytes}, {max_offset}) read {read} bytes, not whole headers"
    );
    (read / RECORD_BATCH_OVERHEAD as u64, returned)
}

#[test]
fn a_fetch_reads_batch_headers_only_never_record_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig::default();
    let mut log = Log::open(dir.path().to_path_buf(), tp(), config.clone(), 0, 0).unwrap();
    let batch = Bytes::from(simple_batch(4, 250, 1_000));
    let batch_len = batch.len();
    for _ in 0..300 {
        log.append_as_leader(&batch, 0, 0).unwrap();
    }
    let end = log.log_end_offset();

    // A tailing fetch: its offset and the high watermark are batch ends the
    // active segment remembers, so nothing is read at all.
    assert_eq!(
        headers_read(&log, end - 8, 1 << 20, end - 4),
        (0, batch_len)
    );
    assert_eq!(headers_read(&log, end - 4, 1 << 20, end), (0, batch_len));

    // Reopened, only the offset index (an entry per 4 KiB) is known: the
    // start and the end are each found within one index interval of
    // headers, however many bytes are returned.
    let recovery_point = log.flush().unwrap();
    drop(log);
    let log = Log::open(dir.path().to_path_buf(), tp(), config, recovery_point, 0).unwrap();
    let per_interval = 4_096 / batch_len as u64 + 2;
    for fetch_offset in [0, 1, 37, 402, 803, end - 5] {
        for (max_bytes, max_offset) in [(1 << 20, end), (64 << 10, end), (1 << 20, 601)] {
            if fetch_offset >= max_offset {
                continue;
            }
            let (headers, returned) = headers_read(&log, fetch_offset, max_bytes, max_offset);
            assert!(returned > 0);
            assert!(
                headers <= 2 * per_interval,
                "read({fetch_offset}, {max_bytes}, {max_offset}): {headers} headers for {returned} bytes"
            );
        }
    }
    // An oversized first batch (KIP-74) costs its header only.
    let (headers, returned) = headers_read(&log, 803, 1, end);
    assert_eq!(returned, batch_len);
    assert!(headers <= per_interval);
}
