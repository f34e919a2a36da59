//! Kafka byte compatibility of Weir's log files (issue 3, point 8): Apache
//! Kafka's own `kafka.tools.DumpLogSegments` (what
//! `bin/kafka-dump-log.sh` runs, from the `kafka_2.13` 4.1 artifact) reads
//! the `.log`, `.index` and `.timeindex` files the real `weir` binary wrote
//! and finds exactly the batches and records that were produced, with no
//! index mismatch and indexes that pass Kafka's startup sanity check.
//!
//! The tool reports most problems on stderr and still exits 0, so the test
//! checks its exit status, its stderr and everything it prints.
//!
//! The reverse direction: Kafka's own log layer (`UnifiedLog`, driven by
//! `integration-tests/java-kafka-tools/src/WriteKafkaLog.java`) writes a
//! partition directory, which is dropped into a Weir data directory in place
//! of a topic's partition; Weir then serves exactly Kafka's bytes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::{ApiKey, FetchRequest, ListOffsetsRequest, ProduceRequest};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
};
use weir_integration_tests::clients::{self, CommandOutput};
use weir_integration_tests::{records, TestBroker};

use crate::support::{self, CLIENT_TIMEOUT};

/// The tool's main class in Kafka 4.x (core module, `kafka_2.13`).
const DUMP_LOG_SEGMENTS: &str = "kafka.tools.DumpLogSegments";

const TOPIC: &str = "kafka-compat";

/// CreateTime of the first batch, ms (in the past, so no timestamp bound of
/// the broker applies).
const T0: i64 = 1_700_000_000_000;

/// Records per produced batch.
const RECORDS_PER_BATCH: i64 = 4;

/// Per-record timestamp offsets inside a batch: not sorted, so the batch's
/// max timestamp belongs to its second record while the time index must
/// still point at the batch's last offset.
const RECORD_TIME_DELTAS: [i64; 4] = [30, 90, 10, 50];

/// A record as produced, in the terms DumpLogSegments prints.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ExpectedRecord {
    offset: i64,
    timestamp: i64,
    key: Option<String>,
    value: Option<String>,
    header_keys: Vec<String>,
}

/// A batch as produced.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ExpectedBatch {
    base_offset: i64,
    last_offset: i64,
    /// Kafka's `CompressionType.name`: none, gzip, snappy, lz4, zstd.
    codec: &'static str,
    max_timestamp: i64,
    records: Vec<ExpectedRecord>,
}

const CODECS: [(&str, Compression); 5] = [
    ("none", Compression::None),
    ("gzip", Compression::Gzip),
    ("snappy", Compression::Snappy),
    ("lz4", Compression::Lz4),
    ("zstd", Compression::Zstd),
];

/// The records of batch number `index` starting at `base_offset`: keys
/// (one null), values (one tombstone in every fifth batch), headers (one
/// with a null value) and unsorted timestamps. Batch 7 goes back in time, so
/// the time index must skip it.
fn expected_batch(index: i64, base_offset: i64, codec: &'static str) -> ExpectedBatch {
    let batch_time = if index == 7 {
        T0 + 100
    } else {
        T0 + index * 1_000
    };
    let records: Vec<ExpectedRecord> = (0..RECORDS_PER_BATCH)
        .map(|i| {
            let offset = base_offset + i;
            let filler: String = (0..120)
                .map(|j| char::from(b'a' + ((offset * 7 + j) % 26) as u8))
                .collect();
            let mut header_keys = vec!["trace".to_owned()];
            if i == 0 {
                header_keys.push("origin".to_owned());
            }
            ExpectedRecord {
                offset,
                timestamp: batch_time + RECORD_TIME_DELTAS[i as usize],
                key: (i != 2).then(|| format!("key-{offset}")),
                value: (!(i == 3 && index % 5 == 0))
                    .then(|| format!("value-{offset}-{codec}-{filler}")),
                header_keys,
            }
        })
        .collect();
    ExpectedBatch {
        base_offset,
        last_offset: base_offset + RECORDS_PER_BATCH - 1,
        codec,
        max_timestamp: records.iter().map(|r| r.timestamp).max().unwrap_or(-1),
        records,
    }
}

/// Encodes `batch` as one record batch v2 (base offset 0, no producer id).
fn encode(batch: &ExpectedBatch, compression: Compression) -> Bytes {
    let records: Vec<Record> = batch
        .records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut headers = IndexMap::new();
            for key in &r.header_keys {
                let value = (key == "trace").then(|| Bytes::from(format!("t{}", r.offset)));
                headers.insert(StrBytes::from_string(key.clone()), value);
            }
            Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
                producer_id: NO_PRODUCER_ID,
                producer_epoch: NO_PRODUCER_EPOCH,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // offset - sequence constant keeps one batch with base
                // sequence NO_SEQUENCE (see records::encode_batch).
                sequence: i as i32 + NO_SEQUENCE,
                timestamp: r.timestamp,
                key: r.key.clone().map(Bytes::from),
                value: r.value.clone().map(Bytes::from),
                headers,
            }
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("encode batch");
    buf.freeze()
}

/// The segment files of `dir` with `suffix`, sorted by name (= base offset).
fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("dir entry").path())
        .filter(|path| path.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

/// Runs DumpLogSegments with `args` and `--files <files>`; requires exit 0
/// and an empty stderr (where the tool reports index mismatches,
/// non-consecutive offsets and corrupt files), apart from the JVM's
/// `Picked up JAVA_TOOL_OPTIONS` notice.
pub(crate) fn dump_log_segments(args: &[&str], files: &[PathBuf]) -> String {
    let mut command = clients::kafka_tool(DUMP_LOG_SEGMENTS).expect("Kafka tools classpath");
    let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    command.args(args).arg("--files").arg(files.join(","));
    let output: CommandOutput =
        clients::run(command, None, CLIENT_TIMEOUT).expect("DumpLogSegments");
    output.assert_success();
    let problems: Vec<&str> = output
        .stderr
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with("Picked up "))
        .collect();
    assert!(
        problems.is_empty(),
        "DumpLogSegments {args:?} reported problems on stderr:\n{}\n--- stdout ---\n{}",
        problems.join("\n"),
        output.stdout_text()
    );
    output.stdout_text()
}

/// One `name: value` pair list as DumpLogSegments prints batches, records
/// and index entries (values never contain spaces here).
fn fields(line: &str) -> BTreeMap<String, String> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let mut map = BTreeMap::new();
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].strip_suffix(':') {
            Some(name) if i + 1 < tokens.len() => {
                map.insert(name.to_owned(), tokens[i + 1].to_owned());
                i += 2;
            }
            _ => panic!("unexpected DumpLogSegments output {line:?}"),
        }
    }
    map
}

fn int(map: &BTreeMap<String, String>, name: &str) -> i64 {
    map.get(name)
        .unwrap_or_else(|| panic!("no {name} in {map:?}"))
        .parse()
        .unwrap_or_else(|e| panic!("{name} in {map:?}: {e}"))
}

/// A batch line as printed, with its records and the segment it is in.
#[derive(Debug)]
struct DumpedBatch {
    segment: String,
    position: i64,
    fields: BTreeMap<String, String>,
    records: Vec<BTreeMap<String, String>>,
}

/// What one DumpLogSegments run printed, per file name.
#[derive(Debug, Default)]
struct Dump {
    batches: Vec<DumpedBatch>,
    /// Segment stem -> `Log starting offset`.
    log_start: BTreeMap<String, i64>,
    /// Segment stem -> (offset, position) entries of its `.index`.
    index: BTreeMap<String, Vec<(i64, i64)>>,
    /// Segment stem -> (timestamp, offset) entries of its `.timeindex`.
    time_index: BTreeMap<String, Vec<(i64, i64)>>,
}

fn parse_dump(stdout: &str) -> Dump {
    let mut dump = Dump::default();
    let mut current: Option<(String, String)> = None;
    for line in stdout.lines() {
        if let Some(path) = line.strip_prefix("Dumping ") {
            let name = Path::new(path)
                .file_name()
                .expect("dumped file name")
                .to_string_lossy()
                .into_owned();
            let (stem, suffix) = name.split_once('.').expect("segment file suffix");
            current = Some((stem.to_owned(), suffix.to_owned()));
            continue;
        }
        let (stem, suffix) = current
            .clone()
            .unwrap_or_else(|| panic!("output before any file: {line:?}"));
        assert!(
            !line.contains("invalid bytes"),
            "DumpLogSegments on {stem}.{suffix}: {line}"
        );
        if line.ends_with(" is empty.") {
            // An offset index without entries (a segment of one batch).
            continue;
        }
        match suffix.as_str() {
            "log" => {
                if let Some(start) = line.strip_prefix("Log starting offset: ") {
                    dump.log_start
                        .insert(stem, start.parse().expect("log starting offset"));
                } else if let Some(record) = line.strip_prefix("| ") {
                    dump.batches
                        .last_mut()
                        .unwrap_or_else(|| panic!("record before a batch: {line:?}"))
                        .records
                        .push(fields(record));
                } else {
                    let fields = fields(line);
                    dump.batches.push(DumpedBatch {
                        segment: stem,
                        position: int(&fields, "position"),
                        fields,
                        records: Vec::new(),
                    });
                }
            }
            "index" => {
                let entry = fields(line);
                dump.index
                    .entry(stem)
                    .or_default()
                    .push((int(&entry, "offset"), int(&entry, "position")));
            }
            "timeindex" => {
                let entry = fields(line);
                dump.time_index
                    .entry(stem)
                    .or_default()
                    .push((int(&entry, "timestamp"), int(&entry, "offset")));
            }
            other => panic!("unexpected file kind {other}: {line:?}"),
        }
    }
    dump
}

/// Batches in every codec, with keys, null keys, tombstones and headers,
/// produced through the real broker across several segments, then read back
/// by Kafka's DumpLogSegments with deep iteration: every batch and record is
/// there with the produced offsets, timestamps, keys, values, header keys and
/// codec, CRCs are valid, offsets are consecutive, every `.index` and
/// `.timeindex` entry points at the right batch (Kafka's `--verify-index-only`
/// check, here with the entries printed) and both indexes pass the sanity
/// check Kafka runs at startup.
#[test]
fn kafka_dump_log_segments_reads_weir_segments_and_indexes() {
    let mut broker = TestBroker::builder()
        // Index every batch after a segment's first, so the indexes are full
        // of entries to verify.
        .override_config("log.index.interval.bytes", "1")
        .start()
        .expect("starting weir");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    // Small segments through Kafka's test-only key (segment.bytes is at
    // least 1 MiB, KIP-1030).
    let topic = support::create_topic(
        &mut client,
        &versions,
        TOPIC,
        &[("internal.segment.bytes", "1500")],
    );

    let mut expected = Vec::new();
    let mut next_offset = 0;
    for round in 0..3 {
        for (c, (codec, compression)) in CODECS.into_iter().enumerate() {
            let index = round * CODECS.len() as i64 + c as i64;
            let batch = expected_batch(index, next_offset, codec);
            let base_offset = support::produce_ok(
                &mut client,
                produce_version,
                &topic,
                0,
                encode(&batch, compression),
            );
            assert_eq!(base_offset, next_offset, "base offset of batch {index}");
            next_offset = batch.last_offset + 1;
            expected.push(batch);
        }
    }
    drop(client);
    let status = broker.shutdown().expect("clean shutdown");
    assert!(status.success(), "weir exited with {status}");

    let dir = broker.data_dir().join(format!("{TOPIC}-0"));
    let logs = files_with_suffix(&dir, ".log");
    let indexes = files_with_suffix(&dir, ".index");
    let time_indexes = files_with_suffix(&dir, ".timeindex");
    assert!(logs.len() >= 2, "expected several segments, got {logs:?}");
    assert_eq!(indexes.len(), logs.len(), "{indexes:?}");
    assert_eq!(time_indexes.len(), logs.len(), "{time_indexes:?}");
    let all: Vec<PathBuf> = logs
        .iter()
        .chain(&indexes)
        .chain(&time_indexes)
        .cloned()
        .collect();

    // Deep iteration with record contents; index entries are printed and
    // each is checked against the batch at its position.
    let dump = parse_dump(&dump_log_segments(
        &["--deep-iteration", "--print-data-log"],
        &all,
    ));

    // Batches: the produced ones, in order, each valid and stamped by the
    // broker as Kafka would.
    assert_eq!(dump.batches.len(), expected.len(), "{:#?}", dump.batches);
    for (got, want) in dump.batches.iter().zip(&expected) {
        let f = &got.fields;
        let at = format!("batch {} in {}", want.base_offset, got.segment);
        assert_eq!(int(f, "baseOffset"), want.base_offset, "{at}");
        assert_eq!(int(f, "lastOffset"), want.last_offset, "{at}");
        assert_eq!(int(f, "count"), RECORDS_PER_BATCH, "{at}");
        assert_eq!(f["compresscodec"], want.codec, "{at}");
        assert_eq!(int(f, "CreateTime"), want.max_timestamp, "{at}");
        assert_eq!(f["isvalid"], "true", "{at}");
        assert_eq!(int(f, "magic"), 2, "{at}");
        assert_eq!(int(f, "producerId"), -1, "{at}");
        assert_eq!(f["isTransactional"], "false", "{at}");
        assert_eq!(f["isControl"], "false", "{at}");
        assert!(int(f, "partitionLeaderEpoch") >= 0, "{at}: {f:?}");
        let records: Vec<ExpectedRecord> = got
            .records
            .iter()
            .map(|r| ExpectedRecord {
                offset: int(r, "offset"),
                timestamp: int(r, "CreateTime"),
                key: r.get("key").cloned(),
                value: r.get("payload").cloned(),
                header_keys: r["headerKeys"]
                    .trim_matches(['[', ']'])
                    .split(',')
                    .filter(|k| !k.is_empty())
                    .map(str::to_owned)
                    .collect(),
            })
            .collect();
        assert_eq!(records, want.records, "{at}");
        for (r, w) in got.records.iter().zip(&want.records) {
            let size = |v: &Option<String>| v.as_ref().map_or(-1, |s| s.len() as i64);
            assert_eq!(int(r, "keySize"), size(&w.key), "{at}");
            assert_eq!(int(r, "valueSize"), size(&w.value), "{at}");
        }
    }

    // Segments: named by base offset, each starting with its first batch.
    let stems: Vec<String> = logs
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    for stem in &stems {
        let first = dump
            .batches
            .iter()
            .find(|b| &b.segment == stem)
            .unwrap_or_else(|| panic!("segment {stem} has no batch"));
        assert_eq!(first.position, 0, "{stem}");
        assert_eq!(dump.log_start[stem], int(&first.fields, "baseOffset"));
        assert_eq!(stem.parse::<i64>().unwrap(), dump.log_start[stem]);
    }

    // Indexes: every entry names the last offset of a batch of its segment
    // and that batch's position; with an index interval of 1 byte every
    // batch after the first of a segment is indexed.
    let mut indexed = 0;
    for stem in &stems {
        let batches: Vec<&DumpedBatch> =
            dump.batches.iter().filter(|b| &b.segment == stem).collect();
        let entries = dump.index.get(stem).cloned().unwrap_or_default();
        for &(offset, position) in &entries {
            assert!(
                batches
                    .iter()
                    .any(|b| int(&b.fields, "lastOffset") == offset && b.position == position),
                "{stem}.index entry (offset {offset}, position {position}) matches no batch"
            );
        }
        assert!(
            entries.len() + 1 >= batches.len(),
            "{stem}.index has {} entries for {} batches",
            entries.len(),
            batches.len()
        );
        indexed += entries.len();

        let mut previous = i64::MIN;
        for &(timestamp, offset) in dump.time_index.get(stem).into_iter().flatten() {
            assert!(timestamp > previous, "{stem}.timeindex not increasing");
            previous = timestamp;
            let batch = batches
                .iter()
                .find(|b| int(&b.fields, "lastOffset") == offset)
                .unwrap_or_else(|| panic!("{stem}.timeindex offset {offset} is no batch end"));
            assert_eq!(
                int(&batch.fields, "CreateTime"),
                timestamp,
                "{stem}.timeindex"
            );
        }
        if batches.len() > 1 {
            assert!(
                dump.time_index.contains_key(stem),
                "{stem}.timeindex is empty"
            );
        }
    }
    assert!(indexed > 0, "no index entries at all");

    // The check Kafka runs on every index at startup.
    let index_files: Vec<PathBuf> = indexes.iter().chain(&time_indexes).cloned().collect();
    let sanity = dump_log_segments(&["--index-sanity-check"], &index_files);
    for file in &index_files {
        // DumpLogSegments skips the check for an offset index without
        // entries and says so.
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let empty_offset_index =
            file.extension().is_some_and(|e| e == "index") && !dump.index.contains_key(&stem);
        let verdict = if empty_offset_index {
            "is empty."
        } else {
            "passed sanity check."
        };
        assert!(
            sanity
                .lines()
                .any(|l| l == format!("{} {verdict}", file.display())),
            "{} did not pass Kafka's index sanity check:\n{sanity}",
            file.display()
        );
    }
}

/// A partition directory written by Apache Kafka 4.1's `UnifiedLog`
/// (batches in every codec with keys, a null key, a tombstone and headers,
/// three segments with their indexes, producer snapshots,
/// `leader-epoch-checkpoint` and `partition.metadata` naming Weir's topic
/// id) replaces the empty partition of a Weir topic; after a restart Weir
/// serves exactly the bytes of Kafka's `.log` files, ListOffsets
/// earliest/latest match Kafka's log start and log end offsets, lookups by
/// timestamp find Kafka's batches and new batches continue Kafka's offsets.
#[test]
fn weir_serves_a_partition_directory_written_by_kafka() {
    const KAFKA_TOPIC: &str = "kafka-written";
    let mut broker = TestBroker::start().expect("starting weir");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let topic = support::ensure_topic(&mut client, &versions, KAFKA_TOPIC);
    assert!(
        !topic.id.is_nil(),
        "the topic needs an id for partition.metadata"
    );
    drop(client);
    let status = broker.shutdown().expect("clean shutdown");
    assert!(status.success(), "weir exited with {status}");

    // Kafka writes the partition in a scratch directory of the same name.
    let scratch = tempfile::tempdir().expect("temp dir");
    let kafka_dir = scratch.path().join(format!("{KAFKA_TOPIC}-0"));
    let mut writer = clients::kafka_tool(
        &clients::repo_root()
            .join("integration-tests/java-kafka-tools/src/WriteKafkaLog.java")
            .display()
            .to_string(),
    )
    .expect("Kafka tools classpath");
    writer.arg(&kafka_dir).arg(topic.id.simple().to_string());
    let output = clients::run(writer, None, CLIENT_TIMEOUT).expect("WriteKafkaLog");
    output.assert_success();
    let log_end_offset: i64 = output
        .stdout_text()
        .lines()
        .find_map(|l| l.strip_prefix("log end offset "))
        .unwrap_or_else(|| panic!("no log end offset in {:?}", output.stdout_text()))
        .parse()
        .expect("log end offset");
    let kafka_logs = files_with_suffix(&kafka_dir, ".log");
    assert!(kafka_logs.len() >= 3, "{kafka_logs:?}");
    let kafka_bytes: Vec<u8> = kafka_logs
        .iter()
        .flat_map(|f| std::fs::read(f).expect("Kafka segment"))
        .collect();

    // Swap the directory into Weir's data dir, file by file, verbatim.
    let weir_dir = broker.data_dir().join(format!("{KAFKA_TOPIC}-0"));
    std::fs::remove_dir_all(&weir_dir).expect("removing Weir's partition dir");
    std::fs::create_dir(&weir_dir).expect("partition dir");
    for entry in std::fs::read_dir(&kafka_dir).expect("Kafka partition dir") {
        let path = entry.expect("dir entry").path();
        std::fs::copy(&path, weir_dir.join(path.file_name().unwrap())).expect("copy");
    }

    broker
        .start_again()
        .expect("restarting weir on Kafka's files");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let list_version = support::newest::<ListOffsetsRequest>(&versions, ApiKey::ListOffsets);
    let latest = support::list_offset(&mut client, list_version, &topic, 0, -1);
    assert_eq!(latest.error_code, 0, "ListOffsets latest");
    assert_eq!(latest.offset, log_end_offset, "log end offset");
    let earliest = support::list_offset(&mut client, list_version, &topic, 0, -2);
    assert_eq!(
        (earliest.error_code, earliest.offset),
        (0, 0),
        "log start offset"
    );

    let mut served = Vec::new();
    let mut offset = 0;
    while offset < log_end_offset {
        let fetched = support::fetch_records(&mut client, fetch_version, &topic, 0, offset);
        let (batches, partial) = records::split_batches(&fetched).expect("fetched batches");
        assert!(
            !batches.is_empty(),
            "Fetch at {offset} returned no whole batch"
        );
        assert!(
            partial.is_none(),
            "a 1 MiB fetch of a small log ends mid-batch"
        );
        for batch in batches {
            let header = records::batch_header(&batch).expect("batch header");
            assert_eq!(header.base_offset, offset, "batches follow each other");
            offset = header.last_offset() + 1;
            served.extend_from_slice(&batch);
        }
    }
    assert_eq!(offset, log_end_offset);
    assert_eq!(
        served.len(),
        kafka_bytes.len(),
        "Weir served {} bytes of Kafka's {}",
        served.len(),
        kafka_bytes.len()
    );
    assert!(served == kafka_bytes, "Weir changed Kafka's batches");

    // Kafka's time index answers timestamp lookups (WriteKafkaLog's batch n
    // has CreateTimes T0 + n * 1000 + 10..90, 4 records per batch).
    for (batch, expected_offset) in [(5, 20), (14, 56)] {
        let found = support::list_offset(&mut client, list_version, &topic, 0, T0 + batch * 1_000);
        assert_eq!(
            (found.error_code, found.offset),
            (0, expected_offset),
            "ListOffsets at the time of batch {batch}"
        );
    }

    // And the log goes on where Kafka left it.
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let next = encode(&expected_batch(15, 0, "none"), Compression::None);
    let base_offset = support::produce_ok(&mut client, produce_version, &topic, 0, next);
    assert_eq!(base_offset, log_end_offset, "first offset Weir appends");
}
