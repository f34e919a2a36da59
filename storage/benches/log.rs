//! Criterion benchmarks of the partition log's hot paths: append (the
//! produce path), read by offset (the fetch path) and offset index lookup.
//!
//! Run: `cargo bench -p weir-storage --bench log`.
//!
//! How append avoids copying record bytes in user space: `Log::append_as_leader`
//! takes the produced batch as `Bytes` (a view of the request frame),
//! validates it in place, copies only the 61-byte batch header to stamp the
//! base offset and leader epoch, and writes `[stamped header, rest of the
//! original Bytes]` with one `pwritev`. The `append` benchmark's throughput is
//! therefore bounded by validation (one CRC-32C pass and one record scan) and
//! the write syscall, not by memcpy. Reads return `FileSlice`s, so the fetch
//! path measured here is the index lookup and header preads only; the record
//! bytes go socket-ward with `sendfile`.

use std::hint::black_box;
use std::time::Instant;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use weir_storage::index::OffsetIndex;
use weir_storage::{Log, LogConfig, TopicPartition};

/// Records per benchmark batch and bytes per record value.
const RECORDS: usize = 16;
const VALUE_BYTES: usize = 1024;

fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// One uncompressed v2 batch of `RECORDS` records of `VALUE_BYTES` each.
fn batch() -> Bytes {
    let mut records = Vec::new();
    for i in 0..RECORDS {
        let mut body = vec![0u8];
        put_varint(&mut body, 0);
        put_varint(&mut body, i as i64);
        put_varint(&mut body, -1);
        put_varint(&mut body, VALUE_BYTES as i64);
        body.extend(std::iter::repeat_n(b'v', VALUE_BYTES));
        put_varint(&mut body, 0);
        put_varint(&mut records, body.len() as i64);
        records.extend_from_slice(&body);
    }
    let mut b = Vec::with_capacity(61 + records.len());
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&0i16.to_be_bytes());
    b.extend_from_slice(&(RECORDS as i32 - 1).to_be_bytes());
    b.extend_from_slice(&1_000i64.to_be_bytes());
    b.extend_from_slice(&1_000i64.to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes());
    b.extend_from_slice(&(-1i16).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&(RECORDS as i32).to_be_bytes());
    b.extend_from_slice(&records);
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

fn open_log(dir: &std::path::Path) -> Log {
    Log::open(
        dir.to_path_buf(),
        TopicPartition::new("bench", 0),
        LogConfig::default(),
        0,
        0,
    )
    .expect("open log")
}

fn append(c: &mut Criterion) {
    let batch = batch();
    let mut group = c.benchmark_group("log");
    group.throughput(Throughput::Bytes(batch.len() as u64));
    group.bench_function("append_16x1KiB_batch", |b| {
        b.iter_custom(|iters| {
            // A fresh log per sample keeps disk use bounded; its first append
            // (which also writes the leader-epoch checkpoint) is not timed.
            let dir = tempfile::tempdir().expect("tempdir");
            let mut log = open_log(dir.path());
            log.append_as_leader(&batch, 0, 0).expect("append");
            let start = Instant::now();
            for _ in 0..iters {
                black_box(log.append_as_leader(&batch, 0, 0).expect("append"));
            }
            start.elapsed()
        })
    });
    group.finish();
}

fn read(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open_log(dir.path());
    let batch = batch();
    for _ in 0..2_000 {
        log.append_as_leader(&batch, 0, 0).expect("append");
    }
    let end = log.log_end_offset();
    let mut offset = 0i64;
    c.bench_function("log/read_1MiB_at_offset", |b| {
        b.iter(|| {
            offset = (offset + 7_919) % end;
            black_box(log.read(offset, 1 << 20, end, true).expect("read"))
        })
    });
}

fn index_lookup(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut index, _) =
        OffsetIndex::open(dir.path().join("0.index"), 0, 10 << 20, 0, |_| None).expect("index");
    for i in 0..100_000u32 {
        index.append(i64::from(i) * 16, i * 4_096);
    }
    let mut target = 0i64;
    c.bench_function("offset_index/lookup_100k_entries", |b| {
        b.iter(|| {
            target = (target + 104_729) % 1_600_000;
            black_box(index.lookup(target))
        })
    });
}

criterion_group!(benches, append, read, index_lookup);
criterion_main!(benches);
