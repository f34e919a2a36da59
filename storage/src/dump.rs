//! `weir dump-log`: a human-readable listing of segment files, in the spirit
//! of Kafka's `DumpLogSegments`. For a `.log` file one line per batch
//! (offsets, timestamps, producer fields, codec, position, size and whether
//! its CRC is valid); for `.index` and `.timeindex` files one line per entry.
//! It reads files only and never repairs them.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::Path;

use crate::batch::{RecordBatchHeader, RECORD_BATCH_OVERHEAD};
use crate::compression::codec_name;
use crate::error::StorageError;

/// Bytes of a `.index` entry: relative offset u32, position u32 (big-endian).
const OFFSET_INDEX_ENTRY: usize = 8;
/// Bytes of a `.timeindex` entry: timestamp i64, relative offset u32.
const TIME_INDEX_ENTRY: usize = 12;

/// What a dump found wrong; empty when the file is sound.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DumpReport {
    /// Batches listed (for `.log`) or entries (for indexes).
    pub items: usize,
    /// Problems: CRC mismatches, truncated tails, malformed entries.
    pub problems: Vec<String>,
}

/// Lists `path` to `out`. The file kind comes from its extension (`.log`,
/// `.index`, `.timeindex`); the base offset from its 20-digit name.
///
/// # Errors
/// [`StorageError::Io`] when the file cannot be read or `out` written;
/// [`StorageError::MalformedFile`] for an unknown extension or file name.
pub fn dump_file(path: &Path, out: &mut dyn Write) -> Result<DumpReport, StorageError> {
    let malformed = |reason: &str| StorageError::MalformedFile {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| malformed("no file name"))?;
    let base_offset: i64 = stem
        .parse()
        .map_err(|_| malformed("segment files are named by their 20-digit base offset"))?;
    let file = File::open(path).map_err(|e| StorageError::io("open", path, e))?;
    let io = |e| StorageError::io("write", path, e);
    writeln!(out, "Dumping {}", path.display()).map_err(io)?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("log") => dump_log(file, path, out),
        Some("index") => dump_index(file, path, base_offset, OFFSET_INDEX_ENTRY, out),
        Some("timeindex") => dump_index(file, path, base_offset, TIME_INDEX_ENTRY, out),
        _ => Err(malformed("expected a .log, .index or .timeindex file")),
    }
}

fn dump_log(file: File, path: &Path, out: &mut dyn Write) -> Result<DumpReport, StorageError> {
    let mut reader = BufReader::new(file);
    let mut report = DumpReport::default();
    let mut position: u64 = 0;
    let mut batch = Vec::new();
    let io = |e| StorageError::io("read", path, e);
    loop {
        let mut header = [0u8; RECORD_BATCH_OVERHEAD];
        let read = read_full(&mut reader, &mut header).map_err(io)?;
        if read == 0 {
            break;
        }
        if read < RECORD_BATCH_OVERHEAD {
            report.problems.push(format!(
                "truncated batch header at position {position} ({read} bytes)"
            ));
            break;
        }
        let parsed = match RecordBatchHeader::parse(&header) {
            Ok(h) => h,
            Err(e) => {
                report
                    .problems
                    .push(format!("invalid batch at position {position}: {e}"));
                break;
            }
        };
        let size = parsed.size_in_bytes();
        batch.clear();
        batch.extend_from_slice(&header);
        batch.resize(size, 0);
        let rest = read_full(&mut reader, &mut batch[RECORD_BATCH_OVERHEAD..]).map_err(io)?;
        if rest < size - RECORD_BATCH_OVERHEAD {
            report.problems.push(format!(
                "truncated batch at position {position}: {size} bytes declared"
            ));
            break;
        }
        let crc_valid = parsed.crc_is_valid(&batch);
        if !crc_valid {
            report
                .problems
                .push(format!("CRC mismatch in the batch at position {position}"));
        }
        writeln!(
            out,
            "baseOffset: {} lastOffset: {} count: {} baseTimestamp: {} maxTimestamp: {} \
             timestampType: {} producerId: {} producerEpoch: {} baseSequence: {} \
             isTransactional: {} isControl: {} partitionLeaderEpoch: {} compresscodec: {} \
             position: {} size: {} crc: {} isvalid: {}",
            parsed.base_offset,
            parsed.last_offset(),
            parsed.records_count,
            parsed.base_timestamp,
            parsed.max_timestamp,
            if parsed.attributes & 0x08 != 0 {
                "LogAppendTime"
            } else {
                "CreateTime"
            },
            parsed.producer_id,
            parsed.producer_epoch,
            parsed.base_sequence,
            parsed.is_transactional(),
            parsed.is_control(),
            parsed.partition_leader_epoch,
            codec_name(parsed.compression_codec()),
            position,
            size,
            parsed.crc,
            crc_valid,
        )
        .map_err(|e| StorageError::io("write", path, e))?;
        report.items += 1;
        position += size as u64;
    }
    Ok(report)
}

fn dump_index(
    file: File,
    path: &Path,
    base_offset: i64,
    entry_size: usize,
    out: &mut dyn Write,
) -> Result<DumpReport, StorageError> {
    let mut bytes = Vec::new();
    BufReader::new(file)
        .read_to_end(&mut bytes)
        .map_err(|e| StorageError::io("read", path, e))?;
    let mut report = DumpReport::default();
    let mut previous: Option<i64> = None;
    for (i, entry) in bytes.chunks(entry_size).enumerate() {
        if entry.len() < entry_size {
            report
                .problems
                .push(format!("{} trailing bytes after entry {i}", entry.len()));
            break;
        }
        let (key, relative) = if entry_size == OFFSET_INDEX_ENTRY {
            let relative = u32::from_be_bytes([entry[0], entry[1], entry[2], entry[3]]);
            let position = u32::from_be_bytes([entry[4], entry[5], entry[6], entry[7]]);
            (i64::from(position), relative)
        } else {
            let timestamp = i64::from_be_bytes(entry[..8].try_into().unwrap_or_default());
            let relative = u32::from_be_bytes([entry[8], entry[9], entry[10], entry[11]]);
            (timestamp, relative)
        };
        let offset = base_offset + i64::from(relative);
        // Kafka preallocates index files with zeros; a zero entry past the
        // first marks the unused tail.
        if i > 0 && key == 0 && relative == 0 {
            break;
        }
        let line = if entry_size == OFFSET_INDEX_ENTRY {
            format!("offset: {offset} position: {key}")
        } else {
            format!("timestamp: {key} offset: {offset}")
        };
        writeln!(out, "{line}").map_err(|e| StorageError::io("write", path, e))?;
        if previous.is_some_and(|p| offset < p) {
            report
                .problems
                .push(format!("entry {i} goes back to offset {offset}"));
        }
        previous = Some(offset);
        report.items += 1;
    }
    Ok(report)
}

/// Reads until `buf` is full or the reader ends; returns the bytes read.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{Log, LogConfig};
    use crate::testutil::simple_batch;
    use crate::TopicPartition;

    #[test]
    fn dumps_batches_and_index_entries_and_flags_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            index_interval_bytes: 1,
            ..LogConfig::default()
        };
        let tp = TopicPartition::new("dump", 0);
        let mut log = Log::open(dir.path().to_path_buf(), tp, config, 0, 0).unwrap();
        for i in 0..3 {
            let batch = bytes::Bytes::from(simple_batch(2, 10, 1_000 + i));
            log.append_as_leader(&batch, 0, 0).unwrap();
        }
        log.flush().unwrap();
        let segment = log.dir().join("00000000000000000000.log");
        let index = log.dir().join("00000000000000000000.index");
        drop(log);

        let mut out = Vec::new();
        let report = dump_file(&segment, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(report.items, 3, "{text}");
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert!(
            text.contains("baseOffset: 0 lastOffset: 1 count: 2"),
            "{text}"
        );
        assert!(
            text.contains("baseOffset: 4 lastOffset: 5 count: 2"),
            "{text}"
        );
        assert_eq!(text.matches("isvalid: true").count(), 3);

        let mut out = Vec::new();
        let report = dump_file(&index, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert!(report.items >= 1, "{text}");
        assert!(text.contains("offset: "), "{text}");

        // Flip one byte inside the second batch's records: its CRC fails.
        let mut bytes = std::fs::read(&segment).unwrap();
        let len = bytes.len();
        bytes[len / 2] ^= 0xff;
        std::fs::write(&segment, &bytes).unwrap();
        let report = dump_file(&segment, &mut Vec::new()).unwrap();
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        assert!(report.problems[0].contains("CRC"), "{:?}", report.problems);
    }

    #[test]
    fn rejects_files_that_are_not_segments() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, b"x").unwrap();
        assert!(matches!(
            dump_file(&path, &mut Vec::new()),
            Err(StorageError::MalformedFile { .. })
        ));
    }
}
