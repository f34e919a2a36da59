//! ApiVersions (key 18), v0-4: the supported-API table (KIP-511 for v3+).
//! Versions outside the table never reach here: `dispatch` answers them with
//! the KIP-511 v0 fallback.

use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

/// Answers with every API and version range of the supported table.
pub fn handle(version: i16, _request: ApiVersionsRequest) -> ApiVersionsResponse {
    weir_protocol_compat::api_table::api_versions_response(version)
}
