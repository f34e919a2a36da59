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
        ApiKey::SaslHandshake => {
            let mut request = SaslHandshakeRequest::default();
            request.mechanism = StrBytes::from_static_str("PLAIN");
            request.into()
        }
        ApiKey::SaslAuthenticate => {
            let mut request = SaslAuthenticateRequest::default();
            request.auth_bytes = Bytes::from_static(b"\0alice\0secret");
            request.into()
        }
        ApiKey::OffsetCommit => {
            let mut request = OffsetCommitRequest::default();
            request.group_id = GroupId(StrBytes::from_static_str("group"));
            request.generation_id_or_member_epoch = 3;
            request.member_id = StrBytes::from_static_str("member-1");
            if v >= 7 {
                request.group_instance_id = Some(StrBytes::from_static_str("instance"));
            }
            request.retention_time_ms = -1;
            request.topics = (0..2)
                .map(|_| {
                    let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
                    topic.name = name("orders");
                    topic.partitions = (0..3)
                        .map(|p| {
                            let mut partition =
                                offset_commit_request::OffsetCommitRequestPartition::default();
                            partition.partition_index = p;
                            partition.committed_offset = 100 + i64::from(p);
                            partition.committed_leader_epoch = 4;
                            partition.committed_metadata =
                                (p != 1).then(|| StrBytes::from_static_str("meta"));
                            partition.unknown_tagged_fields = tagged(flex);
                            partition
                        })
                        .collect();
                    topic.unknown_tagged_fields = tagged(flex);
                    topic
                })
                .collect();
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::OffsetFetch => {
            let mut request = OffsetFetchRequest::default();
            let topics = |_: ()| {
                (0..2)
                    .map(|_| {
                        let mut topic = offset_fetch_request::OffsetFetchRequestTopics::default();
                        topic.name = name("orders");
                        topic.partition_indexes = vec![0, 1, 2];
                        topic.unknown_tagged_fields = tagged(flex);
                        topic
                    })
                    .collect::<Vec<_>>()
            };
            if v <= 7 {
                request.group_id = GroupId(StrBytes::from_static_str("group"));
                request.topics = Some(
                    (0..2)
                        .map(|_| {
                            let mut topic =
                                offset_fetch_request::OffsetFetchRequestTopic::default();
                            topic.name = name("orders");
                            topic.partition_indexes = vec![0, 1, 2];
                            topic.unknown_tagged_fields = tagged(flex);
                            topic
                        })
                        .collect(),
                );
            } else {
                request.groups = (0..2)
                    .map(|g| {
                        let mut group = offset_fetch_request::OffsetFetchRequestGroup::default();
                        group.group_id = GroupId(StrBytes::from_static_str("group"));
                        if v >= 9 {
                            group.member_id = Some(StrBytes::from_static_str("member"));
                            group.member_epoch = 2;
                        }
                        group.topics = (g == 0).then(|| topics(()));
                        group.unknown_tagged_fields = tagged(flex);
                        group
                    })
                    .collect();
            }
            request.require_stable = v >= 7;
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::FindCoordinator => {
            let mut request = FindCoordinatorRequest::default();
            if v <= 3 {
                request.key = StrBytes::from_static_str("group");
            } else {
                request.coordinator_keys = vec![
                    StrBytes::from_static_str("a"),
                    StrBytes::from_static_str("bb"),
                ];
            }
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::JoinGroup => {
            let mut request = JoinGroupRequest::default();
            request.group_id = GroupId(StrBytes::from_static_str("group"));
            request.session_timeout_ms = 10_000;
            request.rebalance_timeout_ms = 20_000;
            request.member_id = StrBytes::from_static_str("member");
            if v >= 5 {
                request.group_instance_id = Some(StrBytes::from_static_str("instance"));
            }
            request.protocol_type = StrBytes::from_static_str("consumer");
            request.protocols = ["range", "roundrobin"]
                .iter()
                .map(|p| {
                    let mut protocol = join_group_request::JoinGroupRequestProtocol::default();
                    protocol.name = StrBytes::from_static_str(p);
                    protocol.metadata = Bytes::from_static(b"subscription");
                    protocol.unknown_tagged_fields = tagged(flex);
                    protocol
                })
                .collect();
            if v >= 8 {
                request.reason = Some(StrBytes::from_static_str("why"));
            }
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::Heartbeat => {
            let mut request = HeartbeatRequest::default();
            request.group_id = GroupId(StrBytes::from_static_str("group"));
            request.generation_id = 3;
            request.member_id = StrBytes::from_static_str("member");
            if v >= 3 {
                request.group_instance_id = Some(StrBytes::from_static_str("instance"));
            }
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::LeaveGroup => {
            let mut request = LeaveGroupRequest::default();
            request.group_id = GroupId(StrBytes::from_static_str("group"));
            if v <= 2 {
                request.member_id = StrBytes::from_static_str("member");
            } else {
                request.members = (0..2)
                    .map(|_| {
                        let mut member = leave_group_request::MemberIdentity::default();
                        member.member_id = StrBytes::from_static_str("member");
                        member.group_instance_id = Some(StrBytes::from_static_str("instance"));
                        if v >= 5 {
                            member.reason = Some(StrBytes::from_static_str("why"));
                        }
                        member.unknown_tagged_fields = tagged(flex);
                        member
                    })
                    .collect();
            }
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::SyncGroup => {
            let mut request = SyncGroupRequest::default();
            request.group_id = GroupId(StrBytes::from_static_str("group"));
            request.generation_id = 3;
            request.member_id = StrBytes::from_static_str("member");
            if v >= 3 {
                request.group_instance_id = Some(StrBytes::from_static_str("instance"));
            }
            if v >= 5 {
                request.protocol_type = Some(StrBytes::from_static_str("consumer"));
                request.protocol_name = Some(StrBytes::from_static_str("range"));
            }
            request.assignments = (0..2)
                .map(|_| {
                    let mut a = sync_group_request::SyncGroupRequestAssignment::default();
                    a.member_id = StrBytes::from_static_str("member");
                    a.assignment = Bytes::from_static(b"assignment");
                    a.unknown_tagged_fields = tagged(flex);
                    a
                })
                .collect();
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::DescribeGroups => {
            let mut request = DescribeGroupsRequest::default();
            request.groups = vec![
                GroupId(StrBytes::from_static_str("a")),
                GroupId(StrBytes::from_static_str("bb")),
            ];
            request.include_authorized_operations = v >= 3;
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::ListGroups => {
            let mut request = ListGroupsRequest::default();
            if v >= 4 {
                request.states_filter = vec![StrBytes::from_static_str("Stable")];
            }
            if v >= 5 {
                request.types_filter = vec![StrBytes::from_static_str("classic")];
            }
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::AlterConfigs => {
            let mut request = AlterConfigsRequest::default();
            request.resources = (0..2)
                .map(|r| {
                    let mut resource = alter_configs_request::AlterConfigsResource::default();
                    resource.resource_type = 2;
                    resource.resource_name = StrBytes::from_string(format!("topic-{r}"));
                    resource.configs = (0..2)
                        .map(|c| {
                            let mut config = alter_configs_request::AlterableConfig::default();
                            config.name = StrBytes::from_static_str("retention.ms");
                            config.value = (c == 0).then(|| StrBytes::from_static_str("1000"));
                            config.unknown_tagged_fields = tagged(flex);
                            config
                        })
                        .collect();
                    resource.unknown_tagged_fields = tagged(flex);
                    resource
                })
                .collect();
            request.validate_only = true;
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::CreatePartitions => {
            let mut request = CreatePartitionsRequest::default();
            request.topics = (0..2)
                .map(|t| {
                    let mut topic = create_partitions_request::CreatePartitionsTopic::default();
                    topic.name = name("orders");
                    topic.count = 4;
                    topic.assignments = (t == 0).then(|| {
                        (0..2)
                            .map(|_| {
                                let mut assignment =
                                    create_partitions_request::CreatePartitionsAssignment::default(
                                    );
                                assignment.broker_ids = vec![1.into(), 2.into()];
                                assignment.unknown_tagged_fields = tagged(flex);
                                assignment
                            })
                            .collect()
                    });
                    topic.unknown_tagged_fields = tagged(flex);
                    topic
                })
                .collect();
            request.timeout_ms = 30_000;
            request.validate_only = true;
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::IncrementalAlterConfigs => {
            let mut request = IncrementalAlterConfigsRequest::default();
            request.resources = (0..2)
                .map(|r| {
                    let mut resource =
                        incremental_alter_configs_request::AlterConfigsResource::default();
                    resource.resource_type = 2;
                    resource.resource_name = StrBytes::from_string(format!("topic-{r}"));
                    resource.configs = (0..3)
                        .map(|c| {
                            let mut config =
                                incremental_alter_configs_request::AlterableConfig::default();
                            config.name = StrBytes::from_static_str("retention.ms");
                            config.config_operation = c as i8;
                            config.value = (c != 1).then(|| StrBytes::from_static_str("1000"));
                            config.unknown_tagged_fields = tagged(flex);
                            config
                        })
                        .collect();
                    resource.unknown_tagged_fields = tagged(flex);
                    resource
                })
                .collect();
            request.validate_only = true;
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::DeleteGroups => {
            let mut request = DeleteGroupsRequest::default();
            request.groups_names = vec![
                GroupId(StrBytes::from_static_str("a")),
                GroupId(StrBytes::from_static_str("bb")),
            ];
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::OffsetDelete => {
            let mut request = OffsetDeleteRequest::default();
            request.group_id = GroupId(StrBytes::from_static_str("group"));
            request.topics = (0..2)
                .map(|_| {
                    let mut topic = offset_delete_request::OffsetDeleteRequestTopic::default();
                    topic.name = name("orders");
                    topic.partitions = (0..3)
                        .map(|p| {
                            let mut partition =
                                offset_delete_request::OffsetDeleteRequestPartition::default();
                            partition.partition_index = p;
                            partition
                        })
                        .collect();
                    topic
                })
                .collect();
            request.into()
        }
        ApiKey::ElectLeaders => {
            let mut request = ElectLeadersRequest::default();
            if v >= 1 {
                request.election_type = 1;
            }
            request.topic_partitions = Some(
                (0..2)
                    .map(|t| {
                        let mut topic = elect_leaders_request::TopicPartitions::default();
                        topic.topic = name(if t == 0 { "orders" } else { "payments" });
                        topic.partitions = vec![0, 3, 7];
                        topic.unknown_tagged_fields = tagged(flex);
                        topic
                    })
                    .collect(),
            );
            request.timeout_ms = 30_000;
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::DescribeAcls => {
            let mut request = kafka_protocol::messages::DescribeAclsRequest::default();
            request.resource_type_filter = 2;
            request.resource_name_filter = Some(StrBytes::from_static_str("orders"));
            request.pattern_type_filter = 2;
            request.principal_filter = Some(StrBytes::from_static_str("User:alice"));
            request.host_filter = None;
            request.operation = 3;
            request.permission_type = 3;
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::CreateAcls => {
            let mut request = kafka_protocol::messages::CreateAclsRequest::default();
            request.creations = [("orders", 3, 3), ("ord", 4, 2)]
                .into_iter()
                .map(|(name, pattern_type, permission_type)| {
                    let mut c =
                        kafka_protocol::messages::create_acls_request::AclCreation::default();
                    c.resource_type = 2;
                    c.resource_name = StrBytes::from_static_str(name);
                    c.resource_pattern_type = pattern_type;
                    c.principal = StrBytes::from_static_str("User:alice");
                    c.host = StrBytes::from_static_str("127.0.0.1");
                    c.operation = 4;
                    c.permission_type = permission_type;
                    c.unknown_tagged_fields = tagged(flex);
                    c
                })
                .collect();
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::DeleteAcls => {
            let mut request = kafka_protocol::messages::DeleteAclsRequest::default();
            request.filters = [(Some("orders"), 3), (None, 1)]
                .into_iter()
                .map(|(name, pattern_type)| {
                    let mut f =
                        kafka_protocol::messages::delete_acls_request::DeleteAclsFilter::default();
                    f.resource_type_filter = 2;
                    f.resource_name_filter = name.map(StrBytes::from_static_str);
                    f.pattern_type_filter = pattern_type;
                    f.principal_filter = Some(StrBytes::from_static_str("User:alice"));
                    f.host_filter = None;
                    f.operation = 1;
                    f.permission_type = 3;
                    f.unknown_tagged_fields = tagged(flex);
                    f
                })
                .collect();
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::AlterClientQuotas => {
            use kafka_protocol::messages::alter_client_quotas_request::{
                EntityData, EntryData, OpData,
            };
            let mut request = kafka_protocol::messages::AlterClientQuotasRequest::default();
            request.entries = [(Some("alice"), 1024.0, false), (None, 2048.0, true)]
                .into_iter()
                .map(|(user, value, remove)| {
                    let mut entity = EntityData::default();
                    entity.entity_type = StrBytes::from_static_str("user");
                    entity.entity_name = user.map(StrBytes::from_static_str);
                    entity.unknown_tagged_fields = tagged(flex);
                    let mut op = OpData::default();
                    op.key = StrBytes::from_static_str("producer_byte_rate");
                    op.value = value;
                    op.remove = remove;
                    op.unknown_tagged_fields = tagged(flex);
                    let mut entry = EntryData::default();
                    entry.entity = vec![entity];
                    entry.ops = vec![op];
                    entry.unknown_tagged_fields = tagged(flex);
                    entry
                })
                .collect();
            request.validate_only = true;
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::DescribeClientQuotas => {
            let mut request = DescribeClientQuotasRequest::default();
            request.components = [("user", 0, Some("alice")), ("client-id", 2, None)]
                .into_iter()
                .map(|(entity_type, match_type, name)| {
                    let mut c = describe_client_quotas_request::ComponentData::default();
                    c.entity_type = StrBytes::from_static_str(entity_type);
                    c.match_type = match_type;
                    c._match = name.map(StrBytes::from_static_str);
                    c.unknown_tagged_fields = tagged(flex);
                    c
                })
                .collect();
            request.strict = true;
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::DescribeUserScramCredentials => {
            let mut request = DescribeUserScramCredentialsRequest::default();
            request.users = Some(
                ["alice", "bob"]
                    .into_iter()
                    .map(|user| {
                        let mut u = describe_user_scram_credentials_request::UserName::default();
                        u.name = StrBytes::from_static_str(user);
                        u.unknown_tagged_fields = tagged(flex);
                        u
                    })
                    .collect(),
            );
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::AlterUserScramCredentials => {
            let mut request = AlterUserScramCredentialsRequest::default();
            let mut deletion =
                alter_user_scram_credentials_request::ScramCredentialDeletion::default();
            deletion.name = StrBytes::from_static_str("alice");
            deletion.mechanism = 1;
            deletion.unknown_tagged_fields = tagged(flex);
            request.deletions = vec![deletion];
            let mut upsertion =
                alter_user_scram_credentials_request::ScramCredentialUpsertion::default();
            upsertion.name = StrBytes::from_static_str("bob");
            upsertion.mechanism = 2;
            upsertion.iterations = 8192;
            upsertion.salt = Bytes::from_static(b"salt-salt-salt");
            upsertion.salted_password = Bytes::from(vec![7u8; 64]);
            upsertion.unknown_tagged_fields = tagged(flex);
            request.upsertions = vec![upsertion];
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::DescribeQuorum => {
            let mut request = DescribeQuorumRequest::default();
            let mut topic = describe_quorum_request::TopicData::default();
            topic.topic_name = name("__cluster_metadata");
            topic.partitions = (0..2)
                .map(|p| {
                    let mut partition = describe_quorum_request::PartitionData::default();
                    partition.partition_index = p;
                    partition.unknown_tagged_fields = tagged(flex);
                    partition
                })
                .collect();
            topic.unknown_tagged_fields = tagged(flex);
            request.topics = vec![topic.clone(), topic];
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        ApiKey::DescribeTopicPartitions => {
            let mut request = DescribeTopicPartitionsRequest::default();
            request.topics = ["orders", "payments"]
                .into_iter()
                .map(|t| {
                    let mut topic = describe_topic_partitions_request::TopicRequest::default();
                    topic.name = name(t);
                    topic.unknown_tagged_fields = tagged(flex);
                    topic
                })
                .collect();
            request.response_partition_limit = 2000;
            let mut cursor = describe_topic_partitions_request::Cursor::default();
            cursor.topic_name = name("orders");
            cursor.partition_index = 3;
            cursor.unknown_tagged_fields = tagged(flex);
            request.cursor = Some(cursor);
            request.unknown_tagged_fields = tagged(flex);
            request.into()
        }
        other => panic!("no populated request for {other:?}"),
    }
}
