//! Request decode and response encode over the `kafka-protocol` crate.
//!
//! Owns the request/response header rules (which header version goes with
//! which API version, the ApiVersions exception), the check of every request
//! against [`crate::api_table::SUPPORTED_APIS`] before its body is parsed,
//! and the few responses that must be written by hand because the codec
//! cannot express them: the KIP-511 ApiVersions fallback and Produce v0-2
//! UNSUPPORTED_VERSION answers. No I/O here.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::api_table::{api_versions_entry, supported_api};
use crate::frame::SIZE_PREFIX_BYTES;
use crate::request_guard::check_request_body;
use crate::UNSUPPORTED_VERSION;

/// Bytes every request frame starts with: api_key (i16), api_version (i16)
/// and correlation_id (i32), common to all request header versions.
pub const REQUEST_HEADER_PREFIX_BYTES: usize = 8;

/// A request that passed the supported-API table and decoded completely.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedRequest {
    /// The request header as sent (v1 or v2; `client_id` may be `None`).
    pub header: RequestHeader,
    /// The API, from the header.
    pub api_key: ApiKey,
    /// The API version, from the header; always served per the table.
    pub api_version: i16,
    /// The decoded body.
    pub body: RequestKind,
}

/// Why a request frame could not be turned into a [`DecodedRequest`].
///
/// What to do with each: `Truncated`, `UnknownApiKey` and
/// `Malformed` close the connection, as Kafka does; `UnsupportedVersion`
/// goes to [`unsupported_version_response`], which answers ApiVersions and
/// Produce v0-2 and otherwise says to close.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The frame is too short to hold api_key, api_version and correlation_id.
    #[error("request frame of {len} bytes is too short for a request header")]
    Truncated {
        /// Frame length in bytes.
        len: usize,
    },
    /// The API key is not in the supported-API table (Kafka may or may not
    /// define it).
    #[error("api key {api_key} is not supported (correlation id {correlation_id})")]
    UnknownApiKey {
        /// Raw API key from the header.
        api_key: i16,
        /// Correlation id from the header.
        correlation_id: i32,
    },
    /// The version is outside what the table serves: not advertised at all,
    /// or advertised but not served (Produce v0-2). Also returned for an
    /// ApiVersions request at a served version whose header or body fails to
    /// decode, because KIP-511 lets a client send a newer ApiVersions
    /// encoding than the broker knows and expects the v0 fallback answer.
    #[error("{api_key:?} v{api_version} is not supported (correlation id {correlation_id}, client id {client_id:?})")]
    UnsupportedVersion {
        /// The API.
        api_key: ApiKey,
        /// The version the client sent.
        api_version: i16,
        /// Correlation id from the header.
        correlation_id: i32,
        /// Client id from the header when it could be read (`None` if null
        /// or unreadable).
        client_id: Option<String>,
    },
    /// A served API version whose header or body does not decode.
    #[error(
        "malformed {api_key:?} v{api_version} request (correlation id {correlation_id}): {reason}"
    )]
    Malformed {
        /// The API.
        api_key: ApiKey,
        /// The version the client sent.
        api_version: i16,
        /// Correlation id from the header.
        correlation_id: i32,
        /// What the decoder reported.
        reason: String,
    },
}

impl DecodeError {
    /// The correlation id, when the frame was long enough to hold one.
    pub fn correlation_id(&self) -> Option<i32> {
        match self {
            DecodeError::Truncated { .. } => None,
            DecodeError::UnknownApiKey { correlation_id, .. }
            | DecodeError::UnsupportedVersion { correlation_id, .. }
            | DecodeError::Malformed { correlation_id, .. } => Some(*correlation_id),
        }
    }
}

/// Why a response could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// `kafka-protocol` refused the header or body at this version, for
    /// example because a field is set that the version cannot carry.
    #[error("cannot encode {api_key:?} v{api_version} response: {reason}")]
    Body {
        /// The API.
        api_key: ApiKey,
        /// The version being encoded.
        api_version: i16,
        /// What the encoder reported.
        reason: String,
    },
    /// The encoded response does not fit the i32 size prefix.
    #[error("{api_key:?} v{api_version} response of {size} bytes does not fit a frame")]
    TooLarge {
        /// The API.
        api_key: ApiKey,
        /// The version being encoded.
        api_version: i16,
        /// Header plus body length in bytes.
        size: usize,
    },
}

fn read_prefix(frame: &[u8]) -> Option<(i16, i16, i32)> {
    let prefix = frame.get(..REQUEST_HEADER_PREFIX_BYTES)?;
    Some((
        i16::from_be_bytes([prefix[0], prefix[1]]),
        i16::from_be_bytes([prefix[2], prefix[3]]),
        i32::from_be_bytes([prefix[4], prefix[5], prefix[6], prefix[7]]),
    ))
}

/// Reads the header's client_id (a nullable int16-length string in request
/// header v1 and v2 alike) without decoding the rest.
fn peek_client_id(frame: &[u8]) -> Option<String> {
    let mut reader = Reader::new(frame.get(REQUEST_HEADER_PREFIX_BYTES..)?);
    reader
        .nullable_string()?
        .map(|raw| String::from_utf8_lossy(raw).into_owned())
}

/// Decodes one request frame (as returned by [`crate::frame::decode_frame`],
/// without the size prefix).
///
/// Reads api_key, api_version and correlation_id, checks them against the
/// supported-API table, then decodes the header at
/// `ApiKey::request_header_version` (v2, flexible, carries a tagged-field
/// section after the client_id; a null (-1) and an empty client_id are both
/// valid, case C01) and the body at `api_version`.
///
/// # Errors
///
/// - [`DecodeError::Truncated`] for frames shorter than 8 bytes;
/// - [`DecodeError::UnknownApiKey`] for APIs not in the table;
/// - [`DecodeError::UnsupportedVersion`] for versions the table does not
///   serve, and for ApiVersions requests that fail to decode (KIP-511);
/// - [`DecodeError::Malformed`] when the header or body of any other
///   request does not decode, including bodies with an array count larger
///   than the remaining bytes could hold (checked before `kafka-protocol`
///   allocates for it; see `request_guard`).
pub fn decode_request(frame: Bytes) -> Result<DecodedRequest, DecodeError> {
    let Some((raw_api_key, api_version, correlation_id)) = read_prefix(&frame) else {
        return Err(DecodeError::Truncated { len: frame.len() });
    };
    let Some(entry) = supported_api(raw_api_key) else {
        return Err(DecodeError::UnknownApiKey {
            api_key: raw_api_key,
            correlation_id,
        });
    };
    let api_key = entry.api_key;
    let unsupported = || DecodeError::UnsupportedVersion {
        api_key,
        api_version,
        correlation_id,
        client_id: peek_client_id(&frame),
    };
    if !entry.serves(api_version) {
        return Err(unsupported());
    }
    let malformed = |reason: String| {
        if api_key == ApiKey::ApiVersions {
            unsupported()
        } else {
            DecodeError::Malformed {
                api_key,
                api_version,
                correlation_id,
                reason,
            }
        }
    };
    let mut buf = frame.clone();
    let header = RequestHeader::decode(&mut buf, api_key.request_header_version(api_version))
        .map_err(|error| malformed(format!("request header: {error:#}")))?;
    // Bounds every array count before kafka-protocol pre-allocates for it.
    check_request_body(api_key, api_version, &buf)
        .map_err(|error| malformed(format!("request body: {error}")))?;
    let body = RequestKind::decode(api_key, &mut buf, api_version)
        .map_err(|error| malformed(format!("{error:#}")))?;
    Ok(DecodedRequest {
        header,
        api_key,
        api_version,
        body,
    })
}

/// The response header version for `api_key` at `api_version`: v1
/// (flexible, with tagged fields) for flexible versions, except that
/// ApiVersions always uses v0 so a client that does not yet know the
/// broker's versions can read it (KIP-511).
pub fn response_header_version(api_key: ApiKey, api_version: i16) -> i16 {
    if api_key == ApiKey::ApiVersions {
        0
    } else {
        api_key.response_header_version(api_version)
    }
}

/// Encodes `4-byte size prefix + response header + body` into one buffer.
///
/// The header version comes from [`response_header_version`] (ApiVersions
/// always v0). `body` must be the response type of `api_key`.
///
/// # Errors
///
/// [`EncodeError::Body`] if `kafka-protocol` cannot encode the header or
/// body at `api_version` (for example a field set that the version lacks),
/// [`EncodeError::TooLarge`] if header plus body exceed `i32::MAX` bytes.
pub fn encode_response(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<BytesMut, EncodeError> {
    let encode_error = |error: anyhow::Error| EncodeError::Body {
        api_key,
        api_version,
        reason: format!("{error:#}"),
    };
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    header
        .encode(&mut buf, response_header_version(api_key, api_version))
        .map_err(encode_error)?;
    body.encode(&mut buf, api_version).map_err(encode_error)?;
    let size = buf.len() - SIZE_PREFIX_BYTES;
    let Ok(prefix) = i32::try_from(size) else {
        return Err(EncodeError::TooLarge {
            api_key,
            api_version,
            size,
        });
    };
    buf[..SIZE_PREFIX_BYTES].copy_from_slice(&prefix.to_be_bytes());
    Ok(buf)
}

/// The KIP-511 answer to an ApiVersions request of a version the broker does
/// not support (case C11): size prefix, response header v0 and an
/// ApiVersionsResponse **v0** body with error_code UNSUPPORTED_VERSION (35)
/// and exactly one api_keys entry, ApiVersions with the table's range.
/// Clients re-parse it as v0 and retry with the highest version listed.
pub fn unsupported_api_versions_response(correlation_id: i32) -> BytesMut {
    let entry = api_versions_entry();
    let mut buf = BytesMut::with_capacity(20);
    buf.put_i32(16); // correlation_id 4 + error_code 2 + array length 4 + one entry 6
    buf.put_i32(correlation_id);
    buf.put_i16(UNSUPPORTED_VERSION);
    buf.put_i32(1);
    buf.put_i16(ApiKey::ApiVersions as i16);
    buf.put_i16(entry.min_version);
    buf.put_i16(entry.max_version);
    buf
}

/// An encoded UNSUPPORTED_VERSION (35) answer for a request that
/// [`decode_request`] rejected with [`DecodeError::UnsupportedVersion`], or
/// `None` meaning "close the connection".
///
/// `frame` is the raw request frame without its size prefix.
///
/// - ApiVersions at any version: [`unsupported_api_versions_response`]
///   (KIP-511).
/// - Produce v0-2 (advertised for librdkafka, not served): a hand-encoded
///   ProduceResponse at the request's version, with every requested
///   topic/partition carrying error 35 and base_offset -1 (v1+ adds
///   throttle_time_ms 0, v2+ log_append_time_ms -1; ProduceResponse.json).
///   `None` when the request has acks=0 (the client reads no response;
///   Kafka closes the connection to signal the error) or its body does not
///   parse.
/// - Anything else: `None`. Kafka closes the connection when a client sends
///   a version of a non-ApiVersions API it never advertised.
pub fn unsupported_version_response(frame: &[u8]) -> Option<BytesMut> {
    let (raw_api_key, api_version, correlation_id) = read_prefix(frame)?;
    match ApiKey::try_from(raw_api_key).ok()? {
        ApiKey::ApiVersions => Some(unsupported_api_versions_response(correlation_id)),
        ApiKey::Produce if (0..=2).contains(&api_version) => {
            old_produce_error_response(frame, api_version, correlation_id)
        }
        _ => None,
    }
}

/// One topic of a Produce v0-2 request: its name and partition indexes.
type OldProduceTopic<'a> = (&'a [u8], Vec<i32>);

/// Hand-encodes the UNSUPPORTED_VERSION response to a Produce v0-2 request,
/// whose non-flexible layout is (ProduceRequest.json):
/// `header v1, acks i16, timeout_ms i32, [name string, [index i32, records bytes]]`.
fn old_produce_error_response(
    frame: &[u8],
    api_version: i16,
    correlation_id: i32,
) -> Option<BytesMut> {
    let mut reader = Reader::new(frame.get(REQUEST_HEADER_PREFIX_BYTES..)?);
    reader.nullable_string()?; // client_id
    let acks = reader.i16()?;
    reader.i32()?; // timeout_ms
    let mut topics: Vec<OldProduceTopic<'_>> = Vec::new();
    for _ in 0..reader.array_len()? {
        let name = reader.nullable_string()??;
        let mut partitions = Vec::new();
        for _ in 0..reader.array_len()? {
            partitions.push(reader.i32()?);
            reader.nullable_bytes()?; // records (message set v0/v1), ignored
        }
        topics.push((name, partitions));
    }
    if acks == 0 {
        return None;
    }

    let mut buf = BytesMut::new();
    buf.put_i32(0);
    buf.put_i32(correlation_id); // response header v0
    buf.put_i32(i32::try_from(topics.len()).ok()?);
    for (name, partitions) in &topics {
        buf.put_i16(i16::try_from(name.len()).ok()?);
        buf.put_slice(name);
        buf.put_i32(i32::try_from(partitions.len()).ok()?);
        for &partition in partitions {
            buf.put_i32(partition);
            buf.put_i16(UNSUPPORTED_VERSION);
            buf.put_i64(-1); // base_offset
            if api_version >= 2 {
                buf.put_i64(-1); // log_append_time_ms
            }
        }
    }
    if api_version >= 1 {
        buf.put_i32(0); // throttle_time_ms
    }
    let size = i32::try_from(buf.len() - SIZE_PREFIX_BYTES).ok()?;
    buf[..SIZE_PREFIX_BYTES].copy_from_slice(&size.to_be_bytes());
    Some(buf)
}

/// A bounds-checked reader of classic (non-flexible) Kafka primitives; every
/// read returns `None` instead of running past the end.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(rest: &'a [u8]) -> Self {
        Self { rest }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.rest.len() < n {
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }

    fn i16(&mut self) -> Option<i16> {
        let raw = self.take(2)?;
        Some(i16::from_be_bytes([raw[0], raw[1]]))
    }

    fn i32(&mut self) -> Option<i32> {
        let raw = self.take(4)?;
        Some(i32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]))
    }

    /// A nullable int16-length string: `Some(None)` for null (-1).
    fn nullable_string(&mut self) -> Option<Option<&'a [u8]>> {
        match self.i16()? {
            -1 => Some(None),
            len => Some(Some(self.take(usize::try_from(len).ok()?)?)),
        }
    }

    /// A nullable int32-length byte string: `Some(None)` for null (-1).
    fn nullable_bytes(&mut self) -> Option<Option<&'a [u8]>> {
        match self.i32()? {
            -1 => Some(None),
            len => Some(Some(self.take(usize::try_from(len).ok()?)?)),
        }
    }

    /// A non-null int32 array length.
    fn array_len(&mut self) -> Option<usize> {
        usize::try_from(self.i32()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ApiVersionsResponse, MetadataRequest, ProduceResponse};
    use kafka_protocol::ResponseError;
    use proptest::prelude::*;

    fn hex_frame(text: &str) -> Bytes {
        crate::test_vectors::parse_hex(text).unwrap().into()
    }

    const API_VERSIONS_V3_NULL_CLIENT_ID: &str =
        include_str!("../tests/vectors/api_versions_request_v3_handbuilt-c01-null-client-id.hex");
    const METADATA_V12_NULL_CLIENT_ID: &str =
        include_str!("../tests/vectors/metadata_request_v12_handbuilt-c01-null-client-id.hex");

    /// Replaces the null client_id (`ffff` right after the 8-byte prefix)
    /// with an empty one (`0000`).
    fn with_empty_client_id(frame: &Bytes) -> Bytes {
        let mut out = frame.to_vec();
        assert_eq!(&out[8..10], &[0xff, 0xff]);
        out[8..10].copy_from_slice(&[0, 0]);
        out.into()
    }

    #[test]
    fn c01_null_client_id_flexible_header_api_versions_v3() {
        let frame = hex_frame(API_VERSIONS_V3_NULL_CLIENT_ID);
        let decoded = decode_request(frame.clone()).unwrap();
        assert_eq!(decoded.api_key, ApiKey::ApiVersions);
        assert_eq!(decoded.api_version, 3);
        assert_eq!(decoded.header.correlation_id, 7);
        assert_eq!(decoded.header.client_id, None);
        let RequestKind::ApiVersions(body) = decoded.body else {
            panic!("expected ApiVersions, got {:?}", decoded.body);
        };
        assert_eq!(&*body.client_software_name, "weir-test");
        assert_eq!(&*body.client_software_version, "1.0");

        let decoded = decode_request(with_empty_client_id(&frame)).unwrap();
        assert_eq!(decoded.header.client_id.as_deref(), Some(""));
        assert!(matches!(decoded.body, RequestKind::ApiVersions(_)));
    }

    #[test]
    fn c01_null_client_id_flexible_header_metadata_v12() {
        let frame = hex_frame(METADATA_V12_NULL_CLIENT_ID);
        for (frame, client_id) in [
            (frame.clone(), None),
            (with_empty_client_id(&frame), Some("")),
        ] {
            let decoded = decode_request(frame).unwrap();
            assert_eq!(
                (decoded.api_key, decoded.api_version),
                (ApiKey::Metadata, 12)
            );
            assert_eq!(decoded.header.client_id.as_deref(), client_id);
            let RequestKind::Metadata(MetadataRequest {
                topics: Some(topics),
                allow_auto_topic_creation,
                ..
            }) = decoded.body
            else {
                panic!("expected Metadata with topics");
            };
            assert!(allow_auto_topic_creation);
            assert_eq!(topics.len(), 1);
            assert_eq!(topics[0].name.as_deref().map(|n| &**n), Some("orders"));
        }
    }

    /// Case C01: the ApiVersions response uses header v0 (no tagged-field
    /// byte after the correlation id) even for v3 and v4, while other
    /// flexible responses use header v1.
    #[test]
    fn c01_api_versions_response_uses_header_v0_for_every_version() {
        for api_version in 0..=4 {
            let body =
                ResponseKind::ApiVersions(crate::api_table::api_versions_response(api_version));
            let encoded = encode_response(ApiKey::ApiVersions, api_version, 99, &body).unwrap();
            let size = i32::from_be_bytes([encoded[0], encoded[1], encoded[2], encoded[3]]);
            assert_eq!(size as usize, encoded.len() - 4);
            assert_eq!(&encoded[4..8], &99i32.to_be_bytes());
            let mut rest = Bytes::copy_from_slice(&encoded[8..]);
            let decoded = ApiVersionsResponse::decode(&mut rest, api_version).unwrap();
            assert!(
                rest.is_empty(),
                "v{api_version}: body must follow the correlation id directly"
            );
            assert_eq!(decoded.error_code, 0);
            assert_eq!(
                decoded.api_keys.len(),
                crate::api_table::SUPPORTED_APIS.len()
            );
        }
        let metadata = ResponseKind::Metadata(Default::default());
        let encoded = encode_response(ApiKey::Metadata, 12, 99, &metadata).unwrap();
        assert_eq!(
            encoded[8], 0,
            "Metadata v12 uses header v1 with an empty tagged-field section"
        );
        let mut rest = Bytes::copy_from_slice(&encoded[9..]);
        kafka_protocol::messages::MetadataResponse::decode(&mut rest, 12).unwrap();
        assert!(rest.is_empty());
    }

    fn api_versions_frame(api_version: i16, body: &[u8]) -> Bytes {
        let mut frame = BytesMut::new();
        frame.put_i16(ApiKey::ApiVersions as i16);
        frame.put_i16(api_version);
        frame.put_i32(41);
        frame.put_i16(4);
        frame.put_slice(b"kcat");
        if api_version >= 3 {
            frame.put_u8(0);
        }
        frame.put_slice(body);
        frame.freeze()
    }

    fn assert_is_c11_answer(response: &[u8], correlation_id: i32) {
        let size = i32::from_be_bytes([response[0], response[1], response[2], response[3]]);
        assert_eq!(size as usize, response.len() - 4);
        assert_eq!(&response[4..8], &correlation_id.to_be_bytes());
        let mut body = Bytes::copy_from_slice(&response[8..]);
        let decoded = ApiVersionsResponse::decode(&mut body, 0).unwrap();
        assert!(body.is_empty());
        assert_eq!(decoded.error_code, ResponseError::UnsupportedVersion.code());
        assert_eq!(decoded.api_keys.len(), 1);
        let entry = &decoded.api_keys[0];
        assert_eq!(
            (entry.api_key, entry.min_version, entry.max_version),
            (ApiKey::ApiVersions as i16, 0, 4)
        );
    }

    #[test]
    fn c11_unsupported_api_versions_response_is_v0_with_one_entry() {
        assert_eq!(
            UNSUPPORTED_VERSION,
            ResponseError::UnsupportedVersion.code()
        );
        assert_is_c11_answer(&unsupported_api_versions_response(-5), -5);
    }

    #[test]
    fn c11_api_versions_from_a_newer_client_gets_the_v0_answer() {
        for api_version in [5, 127, i16::MAX, -1] {
            let frame = api_versions_frame(api_version, b"\x0bfuture-body\x00");
            let error = decode_request(frame.clone()).unwrap_err();
            assert_eq!(
                error,
                DecodeError::UnsupportedVersion {
                    api_key: ApiKey::ApiVersions,
                    api_version,
                    correlation_id: 41,
                    client_id: Some("kcat".to_owned()),
                }
            );
            assert_is_c11_answer(&unsupported_version_response(&frame).unwrap(), 41);
        }
    }

    /// KIP-511: a v3/v4 ApiVersions body we cannot parse is answered like an
    /// unsupported version rather than closing the connection.
    #[test]
    fn c11_undecodable_api_versions_v3_body_gets_the_v0_answer() {
        for api_version in [3, 4] {
            let frame = api_versions_frame(api_version, &[0x7f]);
            let error = decode_request(frame.clone()).unwrap_err();
            assert!(
                matches!(error, DecodeError::UnsupportedVersion { api_version: v, .. } if v == api_version),
                "{error:?}"
            );
            assert_is_c11_answer(&unsupported_version_response(&frame).unwrap(), 41);
        }
    }

    /// A Produce v0-2 frame: one topic with the given partitions, each with
    /// an opaque 12-byte message set.
    fn old_produce_frame(api_version: i16, acks: i16, topic: &str, partitions: &[i32]) -> Bytes {
        let mut frame = BytesMut::new();
        frame.put_i16(ApiKey::Produce as i16);
        frame.put_i16(api_version);
        frame.put_i32(1234);
        frame.put_i16(-1); // null client_id
        frame.put_i16(acks);
        frame.put_i32(5000);
        frame.put_i32(1);
        frame.put_i16(topic.len() as i16);
        frame.put_slice(topic.as_bytes());
        frame.put_i32(partitions.len() as i32);
        for &partition in partitions {
            frame.put_i32(partition);
            frame.put_i32(12);
            frame.put_slice(&[0u8; 12]);
        }
        frame.freeze()
    }

    #[test]
    fn c06_produce_v0_gets_unsupported_version_per_partition() {
        let frame = old_produce_frame(0, 1, "orders", &[0, 3]);
        assert!(matches!(
            decode_request(frame.clone()),
            Err(DecodeError::UnsupportedVersion {
                api_key: ApiKey::Produce,
                api_version: 0,
                correlation_id: 1234,
                client_id: None
            })
        ));
        let response = unsupported_version_response(&frame).unwrap();
        // ProduceResponse v0 (header v0): [name, [partition, error_code, base_offset]]
        let mut expected = BytesMut::new();
        expected.put_i32(1234);
        expected.put_i32(1);
        expected.put_i16(6);
        expected.put_slice(b"orders");
        expected.put_i32(2);
        for partition in [0, 3] {
            expected.put_i32(partition);
            expected.put_i16(35);
            expected.put_i64(-1);
        }
        assert_eq!(&response[4..], &expected[..]);
        assert_eq!(
            i32::from_be_bytes([response[0], response[1], response[2], response[3]]) as usize,
            expected.len()
        );
    }

    /// ProduceResponse v2 and v3 share a layout (ProduceResponse.json), so
    /// kafka-protocol's v3 decoder is an oracle for the hand-encoded v2 body.
    #[test]
    fn c06_produce_v2_answer_decodes_as_a_produce_response() {
        let frame = old_produce_frame(2, -1, "events", &[7, 8, 9]);
        let response = unsupported_version_response(&frame).unwrap();
        assert_eq!(&response[4..8], &1234i32.to_be_bytes());
        let mut body = Bytes::copy_from_slice(&response[8..]);
        let decoded = ProduceResponse::decode(&mut body, 3).unwrap();
        assert!(body.is_empty());
        assert_eq!(decoded.throttle_time_ms, 0);
        assert_eq!(decoded.responses.len(), 1);
        assert_eq!(&**decoded.responses[0].name, "events");
        let partitions: Vec<(i32, i16, i64, i64)> = decoded.responses[0]
            .partition_responses
            .iter()
            .map(|p| (p.index, p.error_code, p.base_offset, p.log_append_time_ms))
            .collect();
        assert_eq!(
            partitions,
            vec![(7, 35, -1, -1), (8, 35, -1, -1), (9, 35, -1, -1)]
        );
    }

    #[test]
    fn c06_produce_v1_has_throttle_time_and_acks_0_closes() {
        let response = unsupported_version_response(&old_produce_frame(1, 1, "t", &[0])).unwrap();
        // header 4 + topics 4 + name 2+1 + partitions 4 + (4+2+8) + throttle 4
        assert_eq!(response.len() - 4, 4 + 4 + 3 + 4 + 14 + 4);
        assert_eq!(&response[response.len() - 4..], &0i32.to_be_bytes());
        assert_eq!(
            unsupported_version_response(&old_produce_frame(0, 0, "t", &[0])),
            None
        );
        // A truncated Produce v0 body cannot be mirrored: close.
        let frame = old_produce_frame(0, 1, "t", &[0]);
        assert_eq!(
            unsupported_version_response(&frame[..frame.len() - 5]),
            None
        );
    }

    #[test]
    fn other_unsupported_versions_close_the_connection() {
        let mut frame = BytesMut::new();
        frame.put_i16(ApiKey::Metadata as i16);
        frame.put_i16(13);
        frame.put_i32(5);
        frame.put_i16(-1);
        frame.put_u8(0);
        let frame = frame.freeze();
        assert!(matches!(
            decode_request(frame.clone()),
            Err(DecodeError::UnsupportedVersion {
                api_key: ApiKey::Metadata,
                api_version: 13,
                ..
            })
        ));
        assert_eq!(unsupported_version_response(&frame), None);
        assert_eq!(unsupported_version_response(&[0, 18, 0]), None);
    }

    #[test]
    fn short_and_unknown_frames_are_rejected() {
        assert_eq!(
            decode_request(Bytes::from_static(&[0, 3, 0, 1, 0, 0, 0])),
            Err(DecodeError::Truncated { len: 7 })
        );
        assert_eq!(
            decode_request(Bytes::from_static(&[0x7f, 0x00, 0, 0, 0, 0, 0, 9])),
            Err(DecodeError::UnknownApiKey {
                api_key: 0x7f00,
                correlation_id: 9
            })
        );
        // DescribeLogDirs exists in Kafka but is not in the table (yet).
        assert_eq!(
            decode_request(Bytes::from_static(&[0, 35, 0, 0, 0, 0, 0, 9])),
            Err(DecodeError::UnknownApiKey {
                api_key: 35,
                correlation_id: 9
            })
        );
    }

    #[test]
    fn truncated_metadata_body_is_malformed() {
        let frame = hex_frame(METADATA_V12_NULL_CLIENT_ID);
        for cut in 11..frame.len() - 1 {
            let error = decode_request(frame.slice(..cut)).unwrap_err();
            assert!(
                matches!(
                    error,
                    DecodeError::Malformed {
                        api_key: ApiKey::Metadata,
                        api_version: 12,
                        correlation_id: 8,
                        ..
                    }
                ),
                "cut {cut}: {error:?}"
            );
        }
    }

    #[test]
    fn encode_error_is_reported_not_panicked() {
        // session_id cannot be carried by Fetch v4.
        let mut fetch = kafka_protocol::messages::FetchResponse::default();
        fetch.session_id = 3;
        let error = encode_response(ApiKey::Fetch, 4, 1, &ResponseKind::Fetch(fetch)).unwrap_err();
        assert!(matches!(
            error,
            EncodeError::Body {
                api_key: ApiKey::Fetch,
                api_version: 4,
                ..
            }
        ));
    }

    /// Regression: an 8-byte Metadata body claiming i32::MAX topics used to
    /// abort the process inside kafka-protocol's `Vec::with_capacity`.
    #[test]
    fn huge_array_count_is_malformed_not_an_abort() {
        let frame =
            Bytes::from_static(&[0, 3, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff]);
        assert!(matches!(
            decode_request(frame),
            Err(DecodeError::Malformed {
                api_key: ApiKey::Metadata,
                api_version: 0,
                correlation_id: 1,
                ..
            })
        ));
    }

    proptest! {
        /// Random bodies after a valid header never panic or abort; failure
        /// is Malformed (or UnsupportedVersion for ApiVersions, KIP-511).
        #[test]
        fn random_bodies_never_panic(
            entry_index in 0..crate::api_table::SUPPORTED_APIS.len(),
            version_offset in 0i16..20,
            correlation_id in any::<i32>(),
            body in prop::collection::vec(any::<u8>(), 0..96),
        ) {
            let entry = &crate::api_table::SUPPORTED_APIS[entry_index];
            let span = entry.max_version - entry.min_served_version + 1;
            let api_version = entry.min_served_version + version_offset % span;
            let mut frame = BytesMut::new();
            frame.put_i16(entry.api_key as i16);
            frame.put_i16(api_version);
            frame.put_i32(correlation_id);
            frame.put_i16(-1); // null client_id
            if entry.api_key.request_header_version(api_version) >= 2 {
                frame.put_u8(0); // no header tagged fields
            }
            frame.put_slice(&body);
            match decode_request(frame.freeze()) {
                Ok(decoded) => prop_assert_eq!(decoded.api_key, entry.api_key),
                Err(DecodeError::Malformed { api_key, correlation_id: c, .. }) => {
                    prop_assert_eq!(api_key, entry.api_key);
                    prop_assert_eq!(c, correlation_id);
                }
                Err(DecodeError::UnsupportedVersion { api_key: ApiKey::ApiVersions, .. }) => {
                    prop_assert_eq!(entry.api_key, ApiKey::ApiVersions);
                }
                Err(other) => prop_assert!(false, "unexpected {:?}", other),
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_request(Bytes::from(bytes.clone()));
            let _ = unsupported_version_response(&bytes);
        }
    }
}
