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
use weir_protocol_compat::kafka_protocol::messages::{ResponseHeader, ResponseKind};
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
