//! The one supported-API table and the ApiVersions response derived from it.
//!
//! The table lists what the broker's handlers implement, never what the
//! `kafka-protocol` codec could parse. Dispatch in the broker is checked
//! against it by a test there; nothing else in the project may keep its own
//! list of versions.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

/// One API the broker implements and the versions it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupportedApi {
    /// The API.
    pub api_key: ApiKey,
    /// Lowest version advertised in ApiVersions.
    pub min_version: i16,
    /// Highest version advertised in ApiVersions (and served).
    pub max_version: i16,
    /// Lowest version the handlers actually serve. Equal to `min_version`
    /// except for Produce, which is advertised from v0 because librdkafka
    /// derives compression support from it (Kafka's KAFKA-18659), but whose
    /// v0-2 requests are answered with UNSUPPORTED_VERSION.
    pub min_served_version: i16,
}

impl SupportedApi {
    /// Whether `api_version` lies in the advertised range `min_version..=max_version`.
    pub fn advertises(&self, api_version: i16) -> bool {
        (self.min_version..=self.max_version).contains(&api_version)
    }

    /// Whether the handlers serve `api_version`, i.e. it lies in
    /// `min_served_version..=max_version`.
    pub fn serves(&self, api_version: i16) -> bool {
        (self.min_served_version..=self.max_version).contains(&api_version)
    }
}

const fn api(api_key: ApiKey, min_version: i16, max_version: i16) -> SupportedApi {
    SupportedApi {
        api_key,
        min_version,
        max_version,
        min_served_version: min_version,
    }
}

/// Every API the broker implements, ordered by API key.
///
/// The group APIs keep their non-flexible versions (librdkafka uses them)
/// and JoinGroup keeps v0-1 (older librdkafka).
///
/// Produce is advertised from v0 but served from v3 (librdkafka derives
/// compression support from the advertised range; the `kafka-protocol`
/// crate cannot decode v0-2 either). ListOffsets starts at v1 because
/// `kafka-protocol` 0.18 has no v0.
pub static SUPPORTED_APIS: &[SupportedApi] = &[
    SupportedApi {
        api_key: ApiKey::Produce,
        min_version: 0,
        max_version: 11,
        min_served_version: 3,
    },
    api(ApiKey::Fetch, 4, 17),
    api(ApiKey::ListOffsets, 1, 9),
    api(ApiKey::Metadata, 0, 12),
    api(ApiKey::OffsetCommit, 2, 9),
    api(ApiKey::OffsetFetch, 1, 9),
    api(ApiKey::FindCoordinator, 0, 6),
    api(ApiKey::JoinGroup, 0, 9),
    api(ApiKey::Heartbeat, 0, 4),
    api(ApiKey::LeaveGroup, 0, 5),
    api(ApiKey::SyncGroup, 0, 5),
    api(ApiKey::DescribeGroups, 0, 5),
    api(ApiKey::ListGroups, 0, 5),
    // KIP-43: after v0 the client sends raw SASL tokens, after v1 it sends
    // SaslAuthenticate. Kafka 4 still serves v0, and librdkafka (up to 2.x)
    // takes a range without v0 to mean "no SASL handshake at all".
    api(ApiKey::SaslHandshake, 0, 1),
    api(ApiKey::ApiVersions, 0, 4),
    api(ApiKey::CreateTopics, 2, 7),
    api(ApiKey::DeleteTopics, 1, 6),
    api(ApiKey::DeleteRecords, 0, 2),
    api(ApiKey::InitProducerId, 0, 5),
    api(ApiKey::OffsetForLeaderEpoch, 2, 4),
    // KIP-140 and KIP-290; Kafka 4 removed v0 (KIP-896).
    api(ApiKey::DescribeAcls, 1, 3),
    api(ApiKey::CreateAcls, 1, 3),
    api(ApiKey::DeleteAcls, 1, 3),
    api(ApiKey::DescribeConfigs, 1, 4),
    api(ApiKey::AlterConfigs, 0, 2),
    // KIP-152.
    api(ApiKey::SaslAuthenticate, 0, 2),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::DeleteGroups, 0, 2),
    api(ApiKey::ElectLeaders, 0, 2),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    api(ApiKey::OffsetDelete, 0, 0),
    // KIP-546.
    api(ApiKey::DescribeClientQuotas, 0, 1),
    api(ApiKey::AlterClientQuotas, 0, 1),
    // KIP-554.
    api(ApiKey::DescribeUserScramCredentials, 0, 0),
    api(ApiKey::AlterUserScramCredentials, 0, 0),
    api(ApiKey::DescribeQuorum, 0, 2),
    api(ApiKey::DescribeCluster, 0, 1),
    api(ApiKey::DescribeTopicPartitions, 0, 0),
];

/// Looks up the table entry for a raw API key, `None` if the broker does not
/// implement that API (whether or not Kafka defines it).
pub fn supported_api(api_key: i16) -> Option<&'static SupportedApi> {
    SUPPORTED_APIS
        .iter()
        .find(|entry| entry.api_key as i16 == api_key)
}

/// The ApiVersions table entry: the range an unsupported ApiVersions request
/// is told about (KIP-511).
pub fn api_versions_entry() -> &'static SupportedApi {
    // The table is a static literal containing ApiVersions; the test
    // `table_is_ordered_and_within_codec_range` guards this.
    SUPPORTED_APIS
        .iter()
        .find(|entry| entry.api_key == ApiKey::ApiVersions)
        .unwrap_or(&SUPPORTED_APIS[0])
}

/// Builds the ApiVersions response body listing [`SUPPORTED_APIS`] with
/// `error_code` 0, `throttle_time_ms` 0, no supported or finalized features
/// (`finalized_features_epoch` -1) and `zk_migration_ready` false.
///
/// `api_version` is the version of the request being answered. The body is
/// the same for every version 0-4: fields absent at a version keep their
/// defaults, so it encodes at any of them. Source: ApiVersionsResponse.json,
/// KIP-511 and KIP-584.
pub fn api_versions_response(_api_version: i16) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.error_code = 0;
    response.throttle_time_ms = 0;
    response.finalized_features_epoch = -1;
    response.zk_migration_ready = false;
    response.api_keys = SUPPORTED_APIS
        .iter()
        .map(|entry| {
            let mut version = ApiVersion::default();
            version.api_key = entry.api_key as i16;
            version.min_version = entry.min_version;
            version.max_version = entry.max_version;
            version
        })
        .collect();
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::{Decodable, Encodable};

    #[test]
    fn table_is_ordered_and_within_codec_range() {
        for pair in SUPPORTED_APIS.windows(2) {
            assert!(
                (pair[0].api_key as i16) < (pair[1].api_key as i16),
                "{:?} before {:?}",
                pair[0].api_key,
                pair[1].api_key
            );
        }
        for entry in SUPPORTED_APIS {
            let codec = entry.api_key.valid_versions();
            assert!(entry.min_version <= entry.min_served_version);
            assert!(entry.min_served_version <= entry.max_version);
            assert!(
                codec.min <= entry.min_served_version && entry.max_version <= codec.max,
                "{:?} serves {}..={} but kafka-protocol handles {}",
                entry.api_key,
                entry.min_served_version,
                entry.max_version,
                codec
            );
        }
        assert_eq!(api_versions_entry().api_key, ApiKey::ApiVersions);
    }

    /// Case C06: Produce is advertised from v0 but served from v3.
    #[test]
    fn c06_produce_advertised_from_v0_served_from_v3() {
        let produce = supported_api(ApiKey::Produce as i16).unwrap();
        assert_eq!(produce.min_version, 0);
        assert_eq!(produce.min_served_version, 3);
        assert!(produce.advertises(0) && !produce.serves(2) && produce.serves(3));
        let listed = api_versions_response(3)
            .api_keys
            .into_iter()
            .find(|v| v.api_key == ApiKey::Produce as i16)
            .unwrap();
        assert_eq!((listed.min_version, listed.max_version), (0, 11));
    }

    #[test]
    fn lookup_misses_unknown_and_unimplemented_keys() {
        assert!(supported_api(-1).is_none());
        assert!(supported_api(ApiKey::DescribeLogDirs as i16).is_none());
        assert_eq!(
            supported_api(ApiKey::Metadata as i16).unwrap().max_version,
            12
        );
    }

    #[test]
    fn api_versions_response_round_trips_at_every_version() {
        for version in 0..=4 {
            let response = api_versions_response(version);
            let mut buf = bytes::BytesMut::new();
            response.encode(&mut buf, version).unwrap();
            let decoded = ApiVersionsResponse::decode(&mut buf.freeze(), version).unwrap();
            assert_eq!(decoded.error_code, 0);
            assert_eq!(decoded.api_keys.len(), SUPPORTED_APIS.len());
            for (listed, entry) in decoded.api_keys.iter().zip(SUPPORTED_APIS) {
                assert_eq!(listed.api_key, entry.api_key as i16);
                assert_eq!(listed.min_version, entry.min_version);
                assert_eq!(listed.max_version, entry.max_version);
            }
        }
    }
}
