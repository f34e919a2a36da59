//! Every API and version the broker advertises is answered: a request with
//! default field values at each advertised version gets a response that
//! decodes at that version (never a hang or a closed connection). This is
//! the end-to-end check that dispatch covers the supported-API table
//! (`weir_protocol_compat::api_table`) and that every handler's response
//! encodes at every version it claims.

use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, DeleteGroupsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
    DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest, FetchRequest,
    FindCoordinatorRequest, HeartbeatRequest, InitProducerIdRequest, JoinGroupRequest,
    LeaveGroupRequest, ListGroupsRequest, ListOffsetsRequest, MetadataRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest, ProduceRequest,
    SyncGroupRequest,
};
use kafka_protocol::protocol::Request;
use weir_integration_tests::RawClient;

use crate::support;

fn probe<R: Request + Default>(client: &mut RawClient, min: i16, max: i16, request: R) -> Vec<i16> {
    // Versions below what the codec can encode (Produce v0-2) are covered by
    // case C06 with hand-built frames.
    let low = min.max(R::VERSIONS.min);
    let mut answered = Vec::new();
    for version in low..=max {
        client
            .send(&request, version)
            .unwrap_or_else(|e| panic!("{:?} v{version}: {e}", R::KEY));
        answered.push(version);
    }
    answered
}

#[test]
fn every_advertised_api_version_is_answered() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    assert!(!versions.api_keys.is_empty());
    for api in &versions.api_keys {
        let (min, max) = (api.min_version, api.max_version);
        let answered = match ApiKey::try_from(api.api_key).expect("known api key") {
            ApiKey::ApiVersions => {
                // ApiVersions itself is exercised by every test's handshake
                // and by cases C01 and C11.
                continue;
            }
            ApiKey::Produce => probe(
                &mut client,
                min,
                max,
                ProduceRequest::default().with_acks(1),
            ),
            ApiKey::Fetch => probe(
                &mut client,
                min,
                max,
                FetchRequest::default().with_max_wait_ms(0),
            ),
            ApiKey::ListOffsets => probe(&mut client, min, max, ListOffsetsRequest::default()),
            ApiKey::Metadata => probe(&mut client, min, max, MetadataRequest::default()),
            ApiKey::CreateTopics => probe(&mut client, min, max, CreateTopicsRequest::default()),
            ApiKey::DeleteTopics => probe(&mut client, min, max, DeleteTopicsRequest::default()),
            ApiKey::DeleteRecords => probe(&mut client, min, max, DeleteRecordsRequest::default()),
            ApiKey::InitProducerId => {
                probe(&mut client, min, max, InitProducerIdRequest::default())
            }
            ApiKey::OffsetForLeaderEpoch => probe(
                &mut client,
                min,
                max,
                OffsetForLeaderEpochRequest::default(),
            ),
            ApiKey::DescribeConfigs => {
                probe(&mut client, min, max, DescribeConfigsRequest::default())
            }
            ApiKey::DescribeCluster => {
                probe(&mut client, min, max, DescribeClusterRequest::default())
            }
            // Group APIs with an empty group id are answered at once
            // (INVALID_GROUP_ID and friends), never parked.
            ApiKey::OffsetCommit => probe(&mut client, min, max, OffsetCommitRequest::default()),
            ApiKey::OffsetFetch => probe(&mut client, min, max, OffsetFetchRequest::default()),
            ApiKey::FindCoordinator => {
                probe(&mut client, min, max, FindCoordinatorRequest::default())
            }
            ApiKey::JoinGroup => probe(&mut client, min, max, JoinGroupRequest::default()),
            ApiKey::Heartbeat => probe(&mut client, min, max, HeartbeatRequest::default()),
            ApiKey::LeaveGroup => probe(&mut client, min, max, LeaveGroupRequest::default()),
            ApiKey::SyncGroup => probe(&mut client, min, max, SyncGroupRequest::default()),
            ApiKey::DescribeGroups => {
                probe(&mut client, min, max, DescribeGroupsRequest::default())
            }
            ApiKey::ListGroups => probe(&mut client, min, max, ListGroupsRequest::default()),
            ApiKey::DeleteGroups => probe(&mut client, min, max, DeleteGroupsRequest::default()),
            ApiKey::OffsetDelete => probe(&mut client, min, max, OffsetDeleteRequest::default()),
            ApiKey::AlterConfigs => probe(
                &mut client,
                min,
                max,
                kafka_protocol::messages::AlterConfigsRequest::default(),
            ),
            ApiKey::CreatePartitions => probe(
                &mut client,
                min,
                max,
                kafka_protocol::messages::CreatePartitionsRequest::default(),
            ),
            ApiKey::IncrementalAlterConfigs => probe(
                &mut client,
                min,
                max,
                kafka_protocol::messages::IncrementalAlterConfigsRequest::default(),
            ),
            ApiKey::ElectLeaders => probe(
                &mut client,
                min,
                max,
                kafka_protocol::messages::ElectLeadersRequest::default(),
            ),
            ApiKey::DescribeQuorum => probe(
                &mut client,
                min,
                max,
                kafka_protocol::messages::DescribeQuorumRequest::default(),
            ),
            ApiKey::DescribeTopicPartitions => probe(
                &mut client,
                min,
                max,
                kafka_protocol::messages::DescribeTopicPartitionsRequest::default(),
            ),
            other => panic!("the broker advertises {other:?}, which this test does not know yet"),
        };
        assert!(
            !answered.is_empty(),
            "api key {} answered at no version",
            api.api_key
        );
    }
}
