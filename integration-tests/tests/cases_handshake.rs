//! Connection handshake cases: request headers with null/empty client ids
//! (C01) and ApiVersions from a client newer than the broker (C11).

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use weir_integration_tests::clients;

use crate::support::{self, error_code, CLIENT_TIMEOUT};

fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("weir-itest"))
        .with_client_software_version(StrBytes::from_static_str("0.1.0"))
}

/// C01: a flexible request header (v2) whose client_id is null (length -1)
/// or empty must still parse, including the tagged-field section after it.
#[test]
fn c01_null_and_empty_client_id() {
    let broker = support::start_broker();
    for client_id in [None, Some("")] {
        let mut client = support::connect(&broker);
        client.set_client_id(client_id);

        let header = client.header::<ApiVersionsRequest>(3);
        let correlation_id = header.correlation_id;
        let response = client
            .send_with_header(header, &api_versions_request())
            .unwrap_or_else(|e| panic!("ApiVersions v3 with client_id {client_id:?}: {e}"));
        assert_eq!(response.body.error_code, error_code::NONE);
        assert!(
            support::advertised(&response.body, ApiKey::ApiVersions).is_some()
                && support::advertised(&response.body, ApiKey::Metadata).is_some(),
            "ApiVersions v3 lists ApiVersions and Metadata"
        );
        // Response header v0: the correlation id is followed directly by the
        // body, with no tagged-field byte; decoding the body right after the
        // first four bytes must consume the frame exactly.
        let mut frame = response.frame.clone();
        assert_eq!(frame.get_i32(), correlation_id);
        let body =
            ApiVersionsResponse::decode(&mut frame, 3).expect("v3 body right after a v0 header");
        assert_eq!(
            frame.remaining(),
            0,
            "bytes left after the ApiVersions body"
        );
        assert_eq!(body, response.body);

        let metadata: MetadataResponse = client
            .send(&MetadataRequest::default().with_topics(None), 12)
            .unwrap_or_else(|e| panic!("Metadata v12 with client_id {client_id:?}: {e}"));
        assert!(
            metadata
                .brokers
                .iter()
                .any(|b| b.node_id.0 == broker.node_id() && b.port == i32::from(broker.port())),
            "Metadata v12 lists this broker: {:?}",
            metadata.brokers
        );
    }
}

/// C11 (raw part): ApiVersions v5, newer than any broker supports, is
/// answered with a v0-encoded body carrying UNSUPPORTED_VERSION and one
/// entry: ApiVersions with the supported range (KIP-511).
#[test]
fn c11_api_versions_newer_than_broker() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let supported = support::advertised(&support::api_versions(&mut client), ApiKey::ApiVersions)
        .expect("ApiVersions advertises itself");
    assert!(
        supported.max_version < 5,
        "the test assumes v5 is unsupported"
    );

    // A v5 request is flexible (header v2); its body is v3's shape.
    let mut body = BytesMut::new();
    api_versions_request()
        .encode(&mut body, 3)
        .expect("encode v3 body");
    let (correlation_id, frame) = client
        .send_raw_request(ApiKey::ApiVersions as i16, 5, 2, &body)
        .expect("ApiVersions v5 is answered");
    let mut frame = frame;
    assert_eq!(
        frame.get_i32(),
        correlation_id,
        "response header v0 carries the correlation id"
    );
    let response = ApiVersionsResponse::decode(&mut frame, 0).expect("v0-encoded ApiVersions body");
    assert_eq!(frame.remaining(), 0, "bytes left after the v0 body");
    assert_eq!(response.error_code, error_code::UNSUPPORTED_VERSION);
    assert_eq!(
        response.api_keys.len(),
        1,
        "exactly one entry: {:?}",
        response.api_keys
    );
    let entry = &response.api_keys[0];
    assert_eq!(entry.api_key, ApiKey::ApiVersions as i16);
    assert_eq!(
        (entry.min_version, entry.max_version),
        (supported.min_version, supported.max_version)
    );

    // The connection stays usable for the client's retry at a supported version.
    let retry = support::api_versions(&mut client);
    assert!(retry.api_keys.len() > 1);

    // kafka-python opens with ApiVersions v4 and must work unpinned.
    let topic = "c11-kafka-python";
    let mut command = clients::python_script("kafka_python_smoke.py").expect("venv");
    command.arg(broker.bootstrap()).arg(topic);
    let output = clients::run(command, None, CLIENT_TIMEOUT).expect("kafka-python");
    output.assert_success();
    let stdout = output.stdout_text();
    assert!(
        stdout.contains("offset 0"),
        "kafka-python's record is the topic's first: {stdout}"
    );
    assert!(
        stdout.contains("partitions [0]"),
        "kafka-python sees partition 0: {stdout}"
    );
}

/// Builds a Produce v0 request body with one message (magic 0) for
/// `topic`/0 by hand: the `kafka-protocol` crate starts at Produce v3.
pub fn produce_v0_body(topic: &str, value: &[u8]) -> BytesMut {
    let mut message = BytesMut::new();
    message.put_i8(0); // magic
    message.put_i8(0); // attributes
    message.put_i32(-1); // null key
    message.put_i32(value.len() as i32);
    message.put_slice(value);
    let crc = kafka_protocol::records::IEEE.checksum(&message);
    let mut message_set = BytesMut::new();
    message_set.put_i64(0); // offset
    message_set.put_i32(message.len() as i32 + 4);
    message_set.put_u32(crc);
    message_set.put_slice(&message);

    let mut body = BytesMut::new();
    body.put_i16(1); // acks
    body.put_i32(10_000); // timeout_ms
    body.put_i32(1); // topics
    body.put_i16(topic.len() as i16);
    body.put_slice(topic.as_bytes());
    body.put_i32(1); // partitions
    body.put_i32(0); // partition
    body.put_i32(message_set.len() as i32);
    body.put_slice(&message_set);
    body
}
