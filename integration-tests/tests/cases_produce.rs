//! Produce cases: Produce advertised from v0 so librdkafka enables
//! compression, and a Produce v0 frame answered with an error (C06).

use bytes::Buf;
use kafka_protocol::messages::{ApiKey, FetchRequest};
use weir_integration_tests::records;

use crate::cases_handshake::produce_v0_body;
use crate::support::{self, error_code};

/// Reads a Produce v0 response body: `[topic [partition error_code base_offset]]`
/// and returns every (topic, partition, error_code).
fn parse_produce_v0_response(mut body: bytes::Bytes) -> Vec<(String, i32, i16)> {
    let mut out = Vec::new();
    let topics = body.get_i32();
    for _ in 0..topics {
        let len = body.get_i16() as usize;
        let name = String::from_utf8_lossy(&body.split_to(len)).into_owned();
        let partitions = body.get_i32();
        for _ in 0..partitions {
            let partition = body.get_i32();
            let error = body.get_i16();
            let _base_offset = body.get_i64();
            out.push((name.clone(), partition, error));
        }
    }
    assert_eq!(
        body.remaining(),
        0,
        "bytes left after the Produce v0 response"
    );
    out
}

/// C06: ApiVersions shows Produce from v0 (librdkafka derives compression
/// support from it); kcat produces gzip and snappy and reads them back; a
/// raw Produce v0 gets an error response and the connection stays usable.
#[test]
fn c06_produce_v0_advertised_and_kcat_compression() {
    let broker = support::start_broker();
    let bootstrap = broker.bootstrap();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce = support::advertised(&versions, ApiKey::Produce).expect("Produce is advertised");
    assert_eq!(produce.min_version, 0, "Produce must be advertised from v0");

    let topic = "c06-kcat";
    // Compressible values, so librdkafka really compresses each batch.
    let gzip: Vec<String> = (0..20)
        .map(|i| format!("gzip-{i:02}-{}", "g".repeat(200)))
        .collect();
    let snappy: Vec<String> = (0..20)
        .map(|i| format!("snappy-{i:02}-{}", "s".repeat(200)))
        .collect();
    support::kcat_produce(&bootstrap, topic, &gzip, &["-z", "gzip"]);
    support::kcat_produce(&bootstrap, topic, &snappy, &["-z", "snappy"]);
    let consumed = support::kcat_consume(&bootstrap, topic, 0, "beginning");
    let expected: Vec<String> = gzip.iter().chain(&snappy).cloned().collect();
    assert_eq!(consumed, expected);

    // The stored batches carry the codecs kcat used.
    let info = support::ensure_topic(&mut client, &versions, topic);
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let bytes = support::fetch_records(&mut client, fetch_version, &info, 0, 0);
    let (batches, _) = records::split_batches(&bytes).expect("well-formed batches");
    let codecs: std::collections::BTreeSet<i16> = batches
        .iter()
        .map(|b| records::batch_header(b).expect("header").codec())
        .collect();
    assert_eq!(
        codecs,
        [1, 2].into_iter().collect(),
        "gzip (1) and snappy (2) batches stored"
    );

    // Produce v0 (magic 0 message set) gets an error response, not a hang.
    let mut raw = support::connect(&broker);
    let body = produce_v0_body(topic, b"from-produce-v0");
    let (correlation_id, mut frame) = raw
        .send_raw_request(ApiKey::Produce as i16, 0, 1, &body)
        .expect("Produce v0 is answered");
    assert_eq!(frame.get_i32(), correlation_id);
    let results = parse_produce_v0_response(frame);
    assert!(
        !results.is_empty(),
        "Produce v0 response names the partition"
    );
    for (name, partition, error) in &results {
        assert_eq!((name.as_str(), *partition), (topic, 0));
        assert_eq!(
            *error,
            error_code::UNSUPPORTED_VERSION,
            "Produce v0 error code"
        );
    }
    // Same connection still serves requests; nothing was appended.
    let after = support::api_versions(&mut raw);
    assert!(!after.api_keys.is_empty());
    let end = support::kcat_consume(&bootstrap, topic, 0, "beginning");
    assert_eq!(end.len(), expected.len(), "Produce v0 appended nothing");
}
