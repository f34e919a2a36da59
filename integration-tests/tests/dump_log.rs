//! `weir dump-log` lists a partition written by the broker: one line per
//! batch with offsets, codec and CRC status, one per index entry; and it
//! fails on a corrupted segment.

use std::process::Command;

use kafka_protocol::messages::{ApiKey, ProduceRequest};
use kafka_protocol::records::Compression;
use weir_integration_tests::broker::weir_binary;
use weir_integration_tests::records::{self, NewRecord};
use weir_integration_tests::TestBroker;

use crate::support;

#[test]
fn dump_log_lists_batches_and_index_entries() {
    let mut broker = TestBroker::builder()
        .override_config("log.index.interval.bytes", "1")
        .start()
        .expect("starting weir");
    {
        let mut client = support::connect(&broker);
        let versions = support::api_versions(&mut client);
        let version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
        let topic = support::ensure_topic(&mut client, &versions, "dumped");
        for (i, codec) in [Compression::None, Compression::Gzip, Compression::Zstd]
            .into_iter()
            .enumerate()
        {
            let batch = records::encode_batch(
                &[
                    NewRecord::value(format!("a{i}"), 5_000 + i as i64),
                    NewRecord::value(format!("b{i}"), 5_001 + i as i64),
                ],
                codec,
            )
            .expect("batch");
            support::produce_ok(&mut client, version, &topic, 0, batch);
        }
    }
    let status = broker.shutdown().expect("shutdown");
    assert!(status.success());
    let dir = broker.data_dir().join("dumped-0");
    let segment = dir.join("00000000000000000000.log");
    let index = dir.join("00000000000000000000.index");

    let output = Command::new(weir_binary())
        .arg("dump-log")
        .arg(&segment)
        .arg(&index)
        .output()
        .expect("weir dump-log");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let batches: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("baseOffset:"))
        .collect();
    assert_eq!(batches.len(), 3, "{stdout}");
    assert!(
        batches[0].contains("baseOffset: 0 lastOffset: 1 count: 2"),
        "{stdout}"
    );
    assert!(batches[1].contains("compresscodec: gzip"), "{stdout}");
    assert!(
        batches[2].contains("baseOffset: 4 lastOffset: 5")
            && batches[2].contains("compresscodec: zstd"),
        "{stdout}"
    );
    assert!(
        batches.iter().all(|b| b.ends_with("isvalid: true")),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("offset: ")),
        "index entries listed: {stdout}"
    );

    let mut bytes = std::fs::read(&segment).expect("segment");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&segment, &bytes).expect("corrupt segment");
    let output = Command::new(weir_binary())
        .arg("dump-log")
        .arg(&segment)
        .output()
        .expect("weir dump-log");
    assert!(
        !output.status.success(),
        "a CRC mismatch must fail the dump"
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("CRC"));
}
