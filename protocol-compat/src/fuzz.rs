//! Fuzz target for the request path (issue 17), compiled only with the
//! `fuzzing` feature. The `weir-fuzz` crate (`fuzz/`) runs it under
//! cargo-afl and replays its committed corpus on every `cargo test`.
//!
//! The property is the one the broker relies on: no request frame makes the
//! framing, the supported-API check, the request guard, `kafka-protocol`'s
//! decoders or the whole-request error answers panic, and memory stays
//! bounded (the request guard bounds every array count before
//! `kafka-protocol` pre-allocates for it).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::{Encodable, StrBytes};

use crate::api_table::SUPPORTED_APIS;
use crate::codec::{self, DecodeError};
use crate::error_response::error_response;
use crate::frame::decode_frame;
use crate::test_support::populated_request;
use crate::UNSUPPORTED_VERSION;

/// Frame limit for the framing pass, bytes (inputs are far smaller).
const MAX_FRAME_BYTES: usize = 1 << 20;

/// Runs `data` through what `broker/src/dispatch.rs::handle_frame` does with
/// a request frame (size prefix removed): [`codec::decode_request`] (the
/// supported-API table, the header, `request_guard::check_request_body` and
/// `kafka-protocol`'s body decoder); for a decoded request, the
/// whole-request error answer ([`error_response`]) encoded at the request's
/// version; for a rejected one, [`codec::unsupported_version_response`]
/// (which parses Produce v0-2 by hand). `data` is also split as a stream of
/// size-prefixed frames ([`decode_frame`]), as a connection's read buffer.
pub fn fuzz_request(data: &[u8]) {
    let mut stream = BytesMut::from(data);
    while let Ok(Some(frame)) = decode_frame(&mut stream, MAX_FRAME_BYTES) {
        let _ = codec::decode_request(frame.freeze());
    }
    match codec::decode_request(Bytes::copy_from_slice(data)) {
        Ok(request) => {
            if let Some(body) =
                error_response(&request.body, request.api_version, UNSUPPORTED_VERSION)
            {
                let _ = codec::encode_response(
                    request.api_key,
                    request.api_version,
                    request.header.correlation_id,
                    &body,
                );
            }
        }
        Err(DecodeError::UnsupportedVersion { .. }) => {
            let _ = codec::unsupported_version_response(data);
        }
        Err(_) => {}
    }
    let _ = codec::unsupported_version_response(data);
}

/// Seeds for [`fuzz_request`]: for every API of the supported-API table at
/// every served version, a frame (request header with client id `fuzz`,
/// then a body with several topics and partitions and, in flexible
/// versions, an unknown tagged field), named `<ApiKey>_v<N>.bin`.
pub fn request_seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Vec::new();
    for entry in SUPPORTED_APIS {
        for version in entry.min_served_version..=entry.max_version {
            let mut header = RequestHeader::default();
            header.request_api_key = entry.api_key as i16;
            header.request_api_version = version;
            header.correlation_id = 7;
            header.client_id = Some(StrBytes::from_static_str("fuzz"));
            let mut frame = BytesMut::new();
            let encoded = header
                .encode(&mut frame, entry.api_key.request_header_version(version))
                .and_then(|()| {
                    populated_request(entry.api_key, version).encode(&mut frame, version)
                });
            if encoded.is_ok() {
                seeds.push((
                    format!("{:?}_v{version}.bin", entry.api_key),
                    frame.to_vec(),
                ));
            }
        }
    }
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every served version of every API yields a seed that decodes.
    #[test]
    fn every_served_version_has_a_seed_that_decodes() {
        let seeds = request_seeds();
        let served: usize = SUPPORTED_APIS
            .iter()
            .map(|e| (e.max_version - e.min_served_version + 1) as usize)
            .sum();
        assert_eq!(seeds.len(), served);
        for (name, seed) in seeds {
            assert!(
                codec::decode_request(Bytes::from(seed.clone())).is_ok(),
                "{name}"
            );
            fuzz_request(&seed);
        }
    }
}
