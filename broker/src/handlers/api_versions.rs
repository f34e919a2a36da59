//! ApiVersions (key 18), v0-4: the supported-API table (KIP-511 for v3+).
//! Versions outside the table never reach here: `dispatch` answers them with
//! the KIP-511 v0 fallback.

use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::ResponseError;

/// Answers with every API and version range of the supported table, or, for
/// v3+ with an invalid `client_software_name` / `client_software_version`,
/// with INVALID_REQUEST and no APIs (Kafka's `ApiVersionsRequest.isValid`).
pub fn handle(version: i16, request: ApiVersionsRequest) -> ApiVersionsResponse {
    if version >= 3
        && !(valid_software_field(&request.client_software_name)
            && valid_software_field(&request.client_software_version))
    {
        let mut response = ApiVersionsResponse::default();
        response.error_code = ResponseError::InvalidRequest.code();
        return response;
    }
    weir_protocol_compat::api_table::api_versions_response(version)
}

/// KIP-511's pattern `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`.
fn valid_software_field(value: &str) -> bool {
    let bytes = value.as_bytes();
    let inner = |b: &u8| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.';
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() && bytes.iter().all(inner)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::valid_software_field;

    #[test]
    fn software_fields_follow_kip_511() {
        for ok in [
            "librdkafka",
            "apache-kafka-java",
            "2.0.2",
            "a",
            "kafka-python",
        ] {
            assert!(valid_software_field(ok), "{ok}");
        }
        for bad in ["", "bad name!", "-x", "x-", ".x", "naïve"] {
            assert!(!valid_software_field(bad), "{bad}");
        }
    }
}
