//! Decodes every test vector under `tests/vectors/` (naming and format:
//! `weir_protocol_compat::test_vectors`).
//!
//! Requests must decode to the API and version their name gives, or be an
//! unsupported version that still gets an answer (ApiVersions per KIP-511,
//! Produce v0-2). Responses must decode completely with `kafka-protocol`
//! after the response header their API and version call for.

use std::path::Path;

use bytes::Bytes;
use weir_protocol_compat::codec::{
    decode_request, response_header_version, unsupported_version_response, DecodeError,
};
use weir_protocol_compat::kafka_protocol::messages::{RequestKind, ResponseHeader, ResponseKind};
use weir_protocol_compat::kafka_protocol::protocol::Decodable;
use weir_protocol_compat::test_vectors::{parse_hex, Direction, VectorName};

fn check_request(name: &VectorName, frame: Bytes) {
    match decode_request(frame.clone()) {
        Ok(decoded) => {
            assert_eq!(decoded.api_key, name.api_key);
            assert_eq!(decoded.api_version, name.api_version);
        }
        Err(DecodeError::UnsupportedVersion {
            api_key,
            api_version,
            ..
        }) => {
            assert_eq!((api_key, api_version), (name.api_key, name.api_version));
            assert!(
                unsupported_version_response(&frame).is_some(),
                "unsupported {api_key:?} v{api_version} must still be answered"
            );
        }
        Err(other) => panic!("does not decode: {other}"),
    }
}

fn check_response(name: &VectorName, frame: Bytes) {
    let mut buf = frame;
    ResponseHeader::decode(
        &mut buf,
        response_header_version(name.api_key, name.api_version),
    )
    .unwrap();
    ResponseKind::decode(name.api_key, &mut buf, name.api_version).unwrap();
    assert!(buf.is_empty(), "{} trailing bytes", buf.len());
}

#[test]
fn every_vector_decodes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let file_name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if file_name.ends_with(".md") {
            continue;
        }
        let name = VectorName::parse(&file_name).unwrap();
        let raw = std::fs::read(&path).unwrap();
        let frame = if name.is_hex {
            parse_hex(std::str::from_utf8(&raw).unwrap()).unwrap()
        } else {
            raw
        };
        let outcome = std::panic::catch_unwind(|| match name.direction {
            Direction::Request => check_request(&name, Bytes::from(frame)),
            Direction::Response => check_response(&name, Bytes::from(frame)),
        });
        assert!(outcome.is_ok(), "vector {file_name} failed");
        checked.push(file_name);
    }
    checked.sort();
    for expected in [
        "api_versions_request_v3_handbuilt-c01-null-client-id.hex",
        "metadata_request_v12_handbuilt-c01-null-client-id.hex",
        "produce_request_v0_handbuilt.hex",
    ] {
        assert!(checked.iter().any(|f| f == expected), "missing {expected}");
    }
}

/// Re-encodes a decoded request (header at its API's header version, then
/// the body) with `kafka-protocol`.
fn reencode_request(decoded: &weir_protocol_compat::codec::DecodedRequest) -> Vec<u8> {
    use weir_protocol_compat::kafka_protocol::protocol::Encodable;
    let mut out = bytes::BytesMut::new();
    decoded
        .header
        .encode(
            &mut out,
            decoded.api_key.request_header_version(decoded.api_version),
        )
        .unwrap();
    decoded.body.encode(&mut out, decoded.api_version).unwrap();
    out.to_vec()
}

fn read_vector(file_name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors")
        .join(file_name);
    parse_hex(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// What a captured request must decode to: its client id and a summary of
/// the body's identifying fields.
fn summary(body: &RequestKind) -> String {
    match body {
        RequestKind::ApiVersions(r) => format!(
            "{} {}",
            r.client_software_name.as_str(),
            r.client_software_version.as_str()
        ),
        RequestKind::Metadata(r) => format!(
            "topics={:?} auto_create={}",
            r.topics.as_ref().map(|ts| ts
                .iter()
                .map(|t| t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default())
                .collect::<Vec<_>>()),
            r.allow_auto_topic_creation
        ),
        RequestKind::Produce(r) => format!(
            "acks={} timeout_ms={} {}",
            r.acks,
            r.timeout_ms,
            r.topic_data
                .iter()
                .flat_map(|t| t.partition_data.iter().map(move |p| {
                    let records = p.records.as_ref().map_or(0, |b| b.len());
                    format!("{}[{}]:{}B", t.name.0.as_str(), p.index, records)
                }))
                .collect::<Vec<_>>()
                .join(",")
        ),
        RequestKind::InitProducerId(r) => format!(
            "transactional_id={:?} producer_id={} epoch={}",
            r.transactional_id.as_ref().map(|t| t.0.to_string()),
            r.producer_id.0,
            r.producer_epoch
        ),
        RequestKind::JoinGroup(r) => format!(
            "{} session_ms={} rebalance_ms={} {} protocols={:?} member_id_set={}",
            r.group_id.0.as_str(),
            r.session_timeout_ms,
            r.rebalance_timeout_ms,
            r.protocol_type.as_str(),
            r.protocols
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>(),
            !r.member_id.is_empty()
        ),
        RequestKind::SyncGroup(r) => format!(
            "{} generation={} assignments={} leader={}",
            r.group_id.0.as_str(),
            r.generation_id,
            r.assignments.len(),
            r.assignments
                .first()
                .is_some_and(|a| a.member_id == r.member_id)
        ),
        RequestKind::OffsetCommit(r) => format!(
            "{} generation={} {}",
            r.group_id.0.as_str(),
            r.generation_id_or_member_epoch,
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(move |p| format!(
                    "{}[{}]={}",
                    t.name.0.as_str(),
                    p.partition_index,
                    p.committed_offset
                )))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => panic!("no summary for {other:?}"),
    }
}

/// Request frames captured from real clients (kcat/librdkafka, kafka-python,
/// the Java client; see each file's comment) through a capturing proxy in
/// front of Weir: each decodes, re-encodes byte for byte with
/// `kafka-protocol`, and carries the values the capturing session sent.
#[test]
fn captured_client_requests_decode_reencode_and_carry_their_values() {
    const KCAT: &str = "librdkafka-2.0.2";
    const KP: &str = "kafka-python-2.3.0";
    const JAVA: &str = "java-kafka-clients-4.1.2";
    let cases: &[(&str, &str, i32, &str, &str)] = &[
        // (api_v, client, correlation id, client id, summary)
        (
            "api_versions_request_v3",
            KCAT,
            1,
            "kcat-capture",
            "librdkafka 2.0.2",
        ),
        (
            "metadata_request_v4",
            KCAT,
            2,
            "kcat-capture",
            r#"topics=Some(["cap-kcat"]) auto_create=true"#,
        ),
        (
            "produce_request_v7",
            KCAT,
            3,
            "kcat-capture",
            "acks=-1 timeout_ms=30000 cap-kcat[1]:80B",
        ),
        (
            "join_group_request_v5",
            KCAT,
            4,
            "kcat-capture",
            r#"cap-kcat-group session_ms=45000 rebalance_ms=300000 consumer protocols=["range", "roundrobin"] member_id_set=true"#,
        ),
        (
            "sync_group_request_v3",
            KCAT,
            6,
            "kcat-capture",
            "cap-kcat-group generation=1 assignments=1 leader=true",
        ),
        (
            "offset_commit_request_v7",
            KCAT,
            8,
            "kcat-capture",
            "cap-kcat-group generation=1 cap-kcat[1]=1",
        ),
        (
            "api_versions_request_v4",
            KP,
            1,
            "kafka-python-capture",
            "kafka-python 2.3.0",
        ),
        (
            "metadata_request_v8",
            KP,
            2,
            "kafka-python-capture",
            "topics=Some([]) auto_create=true",
        ),
        (
            "produce_request_v8",
            KP,
            2,
            "kafka-python-capture",
            "acks=1 timeout_ms=30000 cap-kp[1]:88B",
        ),
        (
            "join_group_request_v5",
            KP,
            2,
            "kafka-python-capture",
            r#"cap-kp-group session_ms=10000 rebalance_ms=300000 consumer protocols=["range", "roundrobin"] member_id_set=true"#,
        ),
        (
            "sync_group_request_v3",
            KP,
            3,
            "kafka-python-capture",
            "cap-kp-group generation=1 assignments=1 leader=true",
        ),
        (
            "offset_commit_request_v7",
            KP,
            5,
            "kafka-python-capture",
            "cap-kp-group generation=1 cap-kp[0]=0,cap-kp[2]=0,cap-kp[3]=0,cap-kp[1]=1",
        ),
        (
            "api_versions_request_v4",
            JAVA,
            0,
            "producer-1",
            "apache-kafka-java 4.1.2",
        ),
        (
            "metadata_request_v12",
            JAVA,
            1,
            "producer-1",
            r#"topics=Some(["cap-java"]) auto_create=true"#,
        ),
        (
            "init_producer_id_request_v5",
            JAVA,
            2,
            "producer-1",
            "transactional_id=None producer_id=-1 epoch=-1",
        ),
        (
            "produce_request_v11",
            JAVA,
            5,
            "producer-1",
            "acks=-1 timeout_ms=30000 cap-java[0]:118B,cap-java[1]:118B",
        ),
        (
            "join_group_request_v9",
            JAVA,
            6,
            "weir-itest-member",
            r#"cap-java-group session_ms=10000 rebalance_ms=300000 consumer protocols=["range"] member_id_set=true"#,
        ),
        (
            "sync_group_request_v5",
            JAVA,
            7,
            "weir-itest-member",
            "cap-java-group generation=1 assignments=1 leader=true",
        ),
        (
            "offset_commit_request_v9",
            JAVA,
            13,
            "weir-itest-member",
            "cap-java-group generation=1 cap-java[0]=1,cap-java[1]=1",
        ),
    ];
    for &(api_version, client, correlation_id, client_id, expected) in cases {
        let file_name = format!("{api_version}_{client}.hex");
        let frame = read_vector(&file_name);
        let decoded = decode_request(Bytes::from(frame.clone()))
            .unwrap_or_else(|e| panic!("{file_name}: {e}"));
        assert_eq!(decoded.header.correlation_id, correlation_id, "{file_name}");
        assert_eq!(
            decoded.header.client_id.as_ref().map(|c| c.as_str()),
            Some(client_id),
            "{file_name}"
        );
        assert_eq!(summary(&decoded.body), expected, "{file_name}");
        assert_eq!(
            reencode_request(&decoded),
            frame,
            "{file_name} re-encodes differently"
        );
    }
}
