//! Shared test fixtures: populated requests for every API in the table.

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

fn name(s: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(s))
}

/// A request with several topics/partitions and, in flexible versions,
/// unknown tagged fields, using only fields `api_version` carries.
pub(crate) fn populated_request(api_key: ApiKey, v: i16) -> RequestKind {
    let tagged = |flexible: bool| {
        let mut fields = std::collections::BTreeMap::new();
        if flexible {
            fields.insert(99, Bytes::from_static(b"xyz"));
        }
        fields
    };
    // Flexible versions use request header v2.
    let flex = api_key.request_header_version(v) == 2;
    match api_key {
        ApiKey::Produce => {
            let mut request = ProduceRequest::default();
            request.transactional_id = Some(StrBytes::from_static_str("tx").into());
            request.acks = -1;
            request.topic_data = (0..2)
                .map(|t| {
                    let mut topic = produce_request::TopicProduceData::default();
                    if v <= 12 {
                        topic.name = name("orders");
                    } else {
                        topic.topic_id = Uuid::from_u128(t);
                    }
                    topic.partition_data = (0..3)
                        .map(|p| {
                            let mut partition = produce_request::PartitionProduceData::default();
                            partition.index = p;
                            partition.records =
                                (p != 1).then(|| Bytes::from(vec![1u8; p as usize * 10]));
                            partition.unknown_tagged_fields = tagged(flex);
                            partition
                        })
                        .collect();
                    topic
                })
                .collect();
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::Fetch => {
            let mut request = FetchRequest::default();
            if v >= 12 {
                request.cluster_id = Some(StrBytes::from_static_str("cluster"));
            }
            if v >= 7 {
                request.session_id = 5;
                request.session_epoch = 2;
                let mut forgotten = fetch_request::ForgottenTopic::default();
                if v <= 12 {
                    forgotten.topic = name("gone");
                } else {
                    forgotten.topic_id = Uuid::from_u128(9);
                }
                forgotten.partitions = vec![1, 2, 3];
                request.forgotten_topics_data = vec![forgotten];
            }
            if v >= 11 {
                request.rack_id = StrBytes::from_static_str("rack-a");
            }
            request.topics = (0..2)
                .map(|t| {
                    let mut topic = fetch_request::FetchTopic::default();
                    if v <= 12 {
                        topic.topic = name("orders");
                    } else {
                        topic.topic_id = Uuid::from_u128(t);
                    }
                    topic.partitions = (0..3)
                        .map(|p| {
                            let mut partition = fetch_request::FetchPartition::default();
                            partition.partition = p;
                            partition.fetch_offset = 100;
                            if v >= 12 {
                                partition.last_fetched_epoch = 4;
                            }
                            partition.unknown_tagged_fields = tagged(flex);
                            partition
                        })
                        .collect();
                    topic
                })
                .collect();
            request.into()
        }
        ApiKey::ListOffsets => {
            let mut request = ListOffsetsRequest::default();
            request.topics = (0..2)
                .map(|_| {
                    let mut topic = list_offsets_request::ListOffsetsTopic::default();
                    topic.name = name("orders");
                    topic.partitions = (0..3)
                        .map(|p| {
                            let mut partition =
                                list_offsets_request::ListOffsetsPartition::default();
                            partition.partition_index = p;
                            partition.timestamp = -1;
                            partition
                        })
                        .collect();
                    topic.unknown_tagged_fields = tagged(flex);
                    topic
                })
                .collect();
            request.into()
        }
        ApiKey::Metadata => {
            let mut request = MetadataRequest::default();
            request.topics = Some(
                ["a", "bb", "ccc"]
                    .into_iter()
                    .map(|n| {
                        let mut topic = metadata_request::MetadataRequestTopic::default();
                        topic.name = Some(name(n));
                        topic
                    })
                    .collect(),
            );
            request.into()
        }
        ApiKey::ApiVersions => {
            let mut request = ApiVersionsRequest::default();
            if v >= 3 {
                request.client_software_name = StrBytes::from_static_str("weir");
                request.client_software_version = StrBytes::from_static_str("1.2");
            }
            request.into()
        }
        ApiKey::CreateTopics => {
            let mut request = CreateTopicsRequest::default();
            request.topics = (0..2)
                .map(|_| {
                    let mut topic = create_topics_request::CreatableTopic::default();
                    topic.name = name("new");
                    let mut assignment =
                        create_topics_request::CreatableReplicaAssignment::default();
                    assignment.broker_ids = vec![1.into(), 2.into()];
                    topic.assignments = vec![assignment];
                    let mut config = create_topics_request::CreatableTopicConfig::default();
                    config.name = StrBytes::from_static_str("cleanup.policy");
                    config.value = Some(StrBytes::from_static_str("compact"));
                    topic.configs = vec![config.clone(), config];
                    topic
                })
                .collect();
            request.into()
        }
        ApiKey::DeleteTopics => {
            let mut request = DeleteTopicsRequest::default();
            if v >= 6 {
                let mut state = delete_topics_request::DeleteTopicState::default();
                state.name = Some(name("old"));
                request.topics = vec![state.clone(), state];
            } else {
                request.topic_names = vec![name("old"), name("older")];
            }
            request.into()
        }
        ApiKey::DeleteRecords => {
            let mut request = DeleteRecordsRequest::default();
            request.timeout_ms = 30_000;
            request.topics = (0..2)
                .map(|_| {
                    let mut topic = delete_records_request::DeleteRecordsTopic::default();
                    topic.name = name("orders");
                    topic.partitions = (0..3)
                        .map(|p| {
                            let mut partition =
                                delete_records_request::DeleteRecordsPartition::default();
                            partition.partition_index = p;
                            partition.offset = i64::from(p) * 10 - 1;
                            partition.unknown_tagged_fields = tagged(flex);
                            partition
                        })
                        .collect();
                    topic.unknown_tagged_fields = tagged(flex);
                    topic
                })
                .collect();
            request.into()
        }
        ApiKey::InitProducerId => {
            let mut request = InitProducerIdRequest::default();
            request.transactional_id = Some(StrBytes::from_static_str("tx").into());
            request.into()
        }
        ApiKey::OffsetForLeaderEpoch => {
            let mut request = OffsetForLeaderEpochRequest::default();
            let mut topic = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
            topic.topic = name("orders");
            topic.partitions =
                vec![offset_for_leader_epoch_request::OffsetForLeaderPartition::default(); 3];
            request.topics = vec![topic];
            request.into()
        }
        ApiKey::DescribeConfigs => {
            let mut request = DescribeConfigsRequest::default();
            let mut resource = describe_configs_request::DescribeConfigsResource::default();
            resource.resource_type = 2;
            resource.resource_name = StrBytes::from_static_str("orders");
            resource.configuration_keys = Some(vec![StrBytes::from_static_str("retention.ms")]);
            request.resources = vec![resource.clone(), resource];
            request.into()
        }
        ApiKey::DescribeCluster => DescribeClusterRequest::default().into(),
        other => panic!("no populated request for {other:?}"),
    }
}
