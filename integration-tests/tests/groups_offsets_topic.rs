//! Kafka's own decoder reads Weir's `__consumer_offsets` (issue 4 point 3):
//! group metadata and committed offsets written by Weir's production group
//! store ([`weir_broker::group::BrokerGroupStore`], on a broker's storage and
//! metadata quorum in a temp dir) are decoded by `kafka.tools.DumpLogSegments
//! --offsets-decoder` (Kafka 4.1, `bin/kafka-dump-log.sh`) into exactly the
//! groups, offsets, metadata, generations, protocols and members stored,
//! with nothing on stderr.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use weir_broker::config::BrokerConfig;
use weir_broker::group::{
    offsets_partition_for, BrokerGroupStore, GroupMetadataRecord, GroupStore, GroupWrite,
    MemberMetadataRecord, OffsetAndMetadata, OFFSETS_TOPIC,
};
use weir_broker::replica_manager::ReplicaManager;
use weir_controller::{ControllerConfig, MetadataController, QuorumController};
use weir_storage::{LogManager, TopicPartition};

use crate::kafka_compat::dump_log_segments;

const NODE: i32 = 1;
const PARTITIONS: i32 = 3;
const GROUP: &str = "dump-group";
const T0: i64 = 1_700_000_000_000;

/// Kafka's `ConsumerProtocolSubscription` v0: version, topics, null user data.
fn subscription(topic: &str) -> Bytes {
    let mut b = 0i16.to_be_bytes().to_vec();
    b.extend(1i32.to_be_bytes());
    b.extend((topic.len() as i16).to_be_bytes());
    b.extend(topic.as_bytes());
    b.extend((-1i32).to_be_bytes());
    Bytes::from(b)
}

/// Kafka's `ConsumerProtocolAssignment` v0: version, one topic's
/// partitions, null user data.
fn assignment(topic: &str, partitions: &[i32]) -> Bytes {
    let mut b = 0i16.to_be_bytes().to_vec();
    b.extend(1i32.to_be_bytes());
    b.extend((topic.len() as i16).to_be_bytes());
    b.extend(topic.as_bytes());
    b.extend((partitions.len() as i32).to_be_bytes());
    for p in partitions {
        b.extend(p.to_be_bytes());
    }
    b.extend((-1i32).to_be_bytes());
    Bytes::from(b)
}

fn group_metadata() -> GroupMetadataRecord {
    let member = |id: &str, instance: Option<&str>, partitions: &[i32]| MemberMetadataRecord {
        member_id: id.into(),
        group_instance_id: instance.map(str::to_string),
        client_id: "dump-client".into(),
        client_host: "/127.0.0.1".into(),
        rebalance_timeout_ms: 300_000,
        session_timeout_ms: 45_000,
        subscription: subscription("orders"),
        assignment: assignment("orders", partitions),
    };
    GroupMetadataRecord {
        protocol_type: "consumer".into(),
        generation: 5,
        protocol: Some("range".into()),
        leader: Some("member-1".into()),
        current_state_timestamp_ms: T0 + 500,
        members: vec![
            member("member-1", Some("static-1"), &[0]),
            member("member-2", None, &[1]),
        ],
    }
}

fn offset(value: i64, expire: Option<i64>) -> OffsetAndMetadata {
    OffsetAndMetadata {
        committed_offset: value,
        committed_leader_epoch: 7,
        metadata: format!("meta-{value}"),
        commit_timestamp_ms: T0 + value,
        expire_timestamp_ms: expire,
    }
}

/// Writes the group's records through the store on a fresh broker data
/// directory `dir`, then shuts the storage down cleanly.
async fn write_group(dir: &Path) {
    let config = BrokerConfig {
        node_id: NODE,
        log_dirs: vec![dir.to_path_buf()],
        offsets_topic_num_partitions: PARTITIONS,
        ..BrokerConfig::default()
    };
    let log_manager =
        LogManager::open(dir.to_path_buf(), NODE, config.default_log_config()).unwrap();
    let controller: MetadataController = QuorumController::start(ControllerConfig {
        node_id: NODE,
        metadata_dir: dir.join("__cluster_metadata-0"),
        cluster_id: log_manager.cluster_id().to_string(),
    })
    .await
    .unwrap()
    .into();
    controller
        .register_broker(weir_controller::BrokerRegistrationRequest {
            broker_id: NODE,
            incarnation_id: uuid::Uuid::new_v4(),
            endpoints: vec![],
            rack: None,
            previous_broker_epoch: -1,
        })
        .await
        .unwrap();
    let replica_manager = Arc::new(ReplicaManager::new(NODE, config.clone(), log_manager));
    replica_manager.apply_image(&controller.image()).unwrap();
    let store = BrokerGroupStore::for_broker(&config, controller.clone(), replica_manager.clone());

    store
        .append(
            GROUP,
            GroupWrite {
                metadata: Some(Some(group_metadata())),
                offsets: Vec::new(),
            },
        )
        .await
        .unwrap();
    store
        .append(
            GROUP,
            GroupWrite {
                metadata: None,
                offsets: vec![
                    (TopicPartition::new("orders", 0), Some(offset(42, None))),
                    (
                        TopicPartition::new("orders", 1),
                        Some(offset(43, Some(T0 + 86_400_000))),
                    ),
                ],
            },
        )
        .await
        .unwrap();
    store
        .append(
            GROUP,
            GroupWrite {
                metadata: None,
                offsets: vec![(TopicPartition::new("orders", 1), None)],
            },
        )
        .await
        .unwrap();
    drop(store);
    replica_manager.shutdown(-1).unwrap();
    drop(replica_manager);
    controller.shutdown().await.unwrap();
}

/// The `key: ... payload: ...` part of each record line DumpLogSegments
/// printed, in log order.
fn decoded_records(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.starts_with("| offset:"))
        .map(|l| {
            let at = l
                .find(" key: ")
                .unwrap_or_else(|| panic!("no key in {l:?}"));
            l[at + 1..].to_string()
        })
        .collect()
}

#[test]
fn groups_kafka_offsets_decoder_reads_weirs_offsets_topic() {
    let dir = tempfile::tempdir().unwrap();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(write_group(dir.path()));

    let partition = offsets_partition_for(GROUP, PARTITIONS);
    let segment = dir
        .path()
        .join(format!("{OFFSETS_TOPIC}-{partition}"))
        .join("00000000000000000000.log");
    let stdout = dump_log_segments(&["--offsets-decoder"], &[segment]);

    let members = |id: &str, instance: &str, partition: i32| {
        format!(
            concat!(
                r#"{{"memberId":"{id}","groupInstanceId":{instance},"clientId":"dump-client","#,
                r#""clientHost":"/127.0.0.1","rebalanceTimeout":300000,"sessionTimeout":45000,"#,
                r#""subscription":{{"topics":["orders"],"userData":null}},"#,
                r#""assignment":{{"assignedPartitions":[{{"topic":"orders","partitions":[{partition}]}}],"userData":null}}}}"#
            ),
            id = id,
            instance = instance,
            partition = partition
        )
    };
    let expected = vec![
        format!(
            concat!(
                r#"key: {{"type":"2","data":{{"group":"{group}"}}}} "#,
                r#"payload: {{"version":"3","data":{{"protocolType":"consumer","generation":5,"#,
                r#""protocol":"range","leader":"member-1","currentStateTimestamp":{ts},"#,
                r#""members":[{m1},{m2}]}}}}"#
            ),
            group = GROUP,
            ts = T0 + 500,
            m1 = members("member-1", r#""static-1""#, 0),
            m2 = members("member-2", "null", 1),
        ),
        format!(
            concat!(
                r#"key: {{"type":"1","data":{{"group":"{group}","topic":"orders","partition":0}}}} "#,
                r#"payload: {{"version":"4","data":{{"offset":42,"leaderEpoch":7,"#,
                r#""metadata":"meta-42","commitTimestamp":{ts}}}}}"#
            ),
            group = GROUP,
            ts = T0 + 42,
        ),
        format!(
            concat!(
                r#"key: {{"type":"1","data":{{"group":"{group}","topic":"orders","partition":1}}}} "#,
                r#"payload: {{"version":"1","data":{{"offset":43,"metadata":"meta-43","#,
                r#""commitTimestamp":{ts},"expireTimestamp":{expire}}}}}"#
            ),
            group = GROUP,
            ts = T0 + 43,
            expire = T0 + 86_400_000,
        ),
        format!(
            r#"key: {{"type":"1","data":{{"group":"{GROUP}","topic":"orders","partition":1}}}} payload: <DELETE>"#
        ),
    ];
    // One uncompressed batch per append, valid, without a producer.
    let batches: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("baseOffset:"))
        .collect();
    assert_eq!(batches.len(), 3, "stdout:\n{stdout}");
    for batch in batches {
        for field in [
            "isvalid: true",
            "compresscodec: none",
            "producerId: -1",
            "isControl: false",
        ] {
            assert!(batch.contains(field), "{field} in {batch}");
        }
    }
    assert_eq!(decoded_records(&stdout), expected, "stdout:\n{stdout}");
}

/// Kafka (KRaft) treats `__consumer_offsets` in CreateTopics and
/// DeleteTopics like any topic (only `__cluster_metadata` is refused,
/// `ControllerApis`), Metadata reports it `is_internal` (KafkaApis,
/// `Topic.isInternal`) while other topics are not, Produce to it is
/// refused except for the admin client id, and DeleteRecords always.
#[test]
fn groups_offsets_topic_is_internal_in_metadata_and_admin_apis_and_closed_to_produce() {
    use kafka_protocol::messages::{
        ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, MetadataRequest, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;

    let broker = crate::support::start_broker();
    let mut client = crate::support::connect(&broker);
    let versions = crate::support::api_versions(&mut client);
    crate::support::create_topic(&mut client, &versions, OFFSETS_TOPIC, &[]);
    crate::support::create_topic(&mut client, &versions, "plain", &[]);

    for version in crate::support::common_versions::<MetadataRequest>(&versions, ApiKey::Metadata) {
        if version == 0 {
            continue; // v0 cannot ask for all topics (an empty list means all)
        }
        let response = client
            .send(&MetadataRequest::default().with_topics(None), version)
            .expect("Metadata");
        let internal: Vec<(String, bool)> = response
            .topics
            .iter()
            .map(|t| (t.name.as_ref().unwrap().to_string(), t.is_internal))
            .collect();
        assert!(
            internal.contains(&(OFFSETS_TOPIC.to_string(), true)),
            "v{version}: {internal:?}"
        );
        assert!(
            internal.contains(&("plain".to_string(), false)),
            "v{version}: {internal:?}"
        );
    }

    // Clients may not produce to it: Kafka's ReplicaManager answers
    // INVALID_TOPIC_EXCEPTION unless the client id is "__admin_client"
    // (KafkaApis' internalTopicsAllowed).
    {
        use kafka_protocol::messages::ProduceRequest;
        use kafka_protocol::records::Compression;
        use weir_integration_tests::records::{encode_batch, NewRecord};

        let offsets_topic = crate::support::ensure_topic(&mut client, &versions, OFFSETS_TOPIC);
        let produce_version = crate::support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
        let batch = || {
            let record = NewRecord {
                key: Some(Bytes::from_static(b"key")),
                ..NewRecord::value("garbage", T0)
            };
            encode_batch(&[record], Compression::None).unwrap()
        };
        let refused =
            crate::support::produce(&mut client, produce_version, &offsets_topic, 0, batch());
        assert_eq!(refused.error_code, 17, "{refused:?}");
        let plain = crate::support::ensure_topic(&mut client, &versions, "plain");
        crate::support::produce_ok(&mut client, produce_version, &plain, 0, batch());
        let mut admin = crate::support::connect(&broker);
        admin.set_client_id(Some("__admin_client"));
        crate::support::produce_ok(&mut admin, produce_version, &offsets_topic, 0, batch());

        // Nor delete its records (ReplicaManager.deleteRecordsOnLocalLog).
        let delete_version = crate::support::newest::<kafka_protocol::messages::DeleteRecordsRequest>(
            &versions,
            ApiKey::DeleteRecords,
        );
        let refused =
            crate::retention::delete_records(&mut admin, delete_version, OFFSETS_TOPIC, -1);
        assert_eq!(refused.error_code, 17, "{refused:?}");
        assert_eq!(refused.low_watermark, -1, "{refused:?}");
    }

    let version = crate::support::newest::<DeleteTopicsRequest>(&versions, ApiKey::DeleteTopics);
    let request = if version >= 6 {
        DeleteTopicsRequest::default().with_topics(vec![
            kafka_protocol::messages::delete_topics_request::DeleteTopicState::default()
                .with_name(Some(TopicName(StrBytes::from_static_str(OFFSETS_TOPIC)))),
        ])
    } else {
        DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(StrBytes::from_static_str(OFFSETS_TOPIC))])
    }
    .with_timeout_ms(30_000);
    let deleted: DeleteTopicsResponse = client.send(&request, version).expect("DeleteTopics");
    assert_eq!(deleted.responses[0].error_code, 0, "{deleted:?}");
}

/// End to end: offsets committed to the `weir` binary with raw
/// OffsetCommit requests land in `__consumer_offsets` as Kafka's decoder
/// expects them (OffsetCommitKey v1, OffsetCommitValue v4).
#[test]
fn groups_offsets_committed_to_weir_decode_with_kafkas_offsets_decoder() {
    use std::collections::BTreeMap;

    use crate::groups_durability::{self as durability, commit_ok, connect_loaded};

    let mut broker = crate::support::start_broker_with_partitions(2);
    {
        let mut client = crate::support::connect(&broker);
        let api = crate::support::api_versions(&mut client);
        crate::support::ensure_topic(&mut client, &api, durability::TOPIC);
    }
    let (mut client, versions, _) = connect_loaded(&broker);
    let offsets: BTreeMap<i32, i64> = [(0, 10), (1, 11)].into_iter().collect();
    commit_ok(&mut client, versions.commit, &offsets);
    drop(client);
    broker.shutdown().expect("shutdown");

    let partition = offsets_partition_for(durability::GROUP, 50);
    let segment = broker
        .data_dir()
        .join(format!("{OFFSETS_TOPIC}-{partition}"))
        .join("00000000000000000000.log");
    let stdout = dump_log_segments(&["--offsets-decoder"], &[segment]);
    let records = decoded_records(&stdout);
    assert_eq!(records.len(), 2, "stdout:\n{stdout}");
    for (record, (p, o)) in records.iter().zip(offsets) {
        let prefix = format!(
            concat!(
                r#"key: {{"type":"1","data":{{"group":"{group}","topic":"{topic}","partition":{p}}}}} "#,
                r#"payload: {{"version":"4","data":{{"offset":{o},"leaderEpoch":-1,"#,
                r#""metadata":"meta-{o}","commitTimestamp":"#
            ),
            group = durability::GROUP,
            topic = durability::TOPIC,
            p = p,
            o = o,
        );
        assert!(record.starts_with(&prefix), "{record}\nexpected {prefix}");
        let timestamp: i64 = record[prefix.len()..]
            .strip_suffix("}}")
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("commitTimestamp in {record}"));
        assert!(timestamp > T0, "{record}");
    }
}

/// Weir's codec against Kafka's own serializers (kafka-group-coordinator
/// 4.1, `integration-tests/java-kafka-tools/src/EncodeGroupRecords.java`):
/// for every key and every value version, Weir encodes exactly Kafka's
/// bytes and decodes Kafka's bytes into the same record (fields a version
/// lacks read as the schema's defaults; a tagged field is skipped).
#[test]
fn groups_record_codec_matches_kafkas_serializers_for_every_version() {
    use weir_broker::group::records::{
        decode_group_metadata_value, decode_key, decode_offset_commit_value,
        encode_group_metadata_key, encode_group_metadata_value, encode_offset_commit_key,
        encode_offset_commit_value, GroupRecordKey,
    };
    use weir_integration_tests::clients;

    let java = clients::kafka_tool(
        &clients::repo_root()
            .join("integration-tests/java-kafka-tools/src/EncodeGroupRecords.java")
            .display()
            .to_string(),
    )
    .expect("Kafka tools classpath");
    let output =
        clients::run(java, None, crate::support::CLIENT_TIMEOUT).expect("EncodeGroupRecords");
    output.assert_success();
    let stdout = output.stdout_text();

    let hex = |s: &str| -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    };
    let tp = TopicPartition::new("orders", 5);
    let offset = |version: i16| OffsetAndMetadata {
        committed_offset: 42,
        committed_leader_epoch: if version >= 3 { 7 } else { -1 },
        metadata: "meta".into(),
        commit_timestamp_ms: 1_700_000_000_000,
        expire_timestamp_ms: (version == 1).then_some(1_700_000_900_000),
    };
    let group = |version: i16| {
        let member = |id: &str, instance: Option<&str>| MemberMetadataRecord {
            member_id: id.into(),
            group_instance_id: instance.filter(|_| version >= 3).map(str::to_string),
            client_id: "consumer-1".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: if version >= 1 { 300_000 } else { -1 },
            session_timeout_ms: 45_000,
            subscription: Bytes::from_static(&[0, 1, 2]),
            assignment: Bytes::from_static(&[9, 8]),
        };
        GroupMetadataRecord {
            protocol_type: "consumer".into(),
            generation: 3,
            protocol: Some("range".into()),
            leader: Some("consumer-1-abc".into()),
            current_state_timestamp_ms: if version >= 2 { 1_700_000_000_500 } else { -1 },
            members: vec![
                member("consumer-1-abc", Some("static-1")),
                member("consumer-2-def", None),
            ],
        }
    };
    let empty = |version: i16| GroupMetadataRecord {
        protocol_type: String::new(),
        generation: 0,
        protocol: None,
        leader: None,
        current_state_timestamp_ms: if version >= 2 { 5 } else { -1 },
        members: Vec::new(),
    };

    let mut seen = Vec::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split(' ').collect();
        let [schema, version, bytes] = fields[..] else {
            panic!("unexpected line {line:?}");
        };
        let version: i16 = version.parse().expect("version");
        let kafka = hex(bytes);
        let what = format!("{schema} v{version}");
        match schema {
            "OffsetCommitKey" | "LegacyOffsetCommitKey" => {
                let expected = GroupRecordKey::OffsetCommit {
                    group: "g1".into(),
                    topic_partition: tp.clone(),
                };
                assert_eq!(decode_key(&kafka), Ok(expected), "{what}");
                if version == 1 {
                    assert_eq!(
                        encode_offset_commit_key("g1", &tp).unwrap(),
                        kafka,
                        "{what}"
                    );
                }
            }
            "GroupMetadataKey" => {
                let expected = GroupRecordKey::GroupMetadata { group: "g1".into() };
                assert_eq!(decode_key(&kafka), Ok(expected), "{what}");
                assert_eq!(encode_group_metadata_key("g1").unwrap(), kafka, "{what}");
            }
            "OffsetCommitValue" => {
                assert_eq!(
                    decode_offset_commit_value(&kafka),
                    Ok(offset(version)),
                    "{what}"
                );
                assert_eq!(
                    encode_offset_commit_value(&offset(version), version).unwrap(),
                    kafka,
                    "{what}"
                );
            }
            "OffsetCommitValueWithTopicId" => {
                assert_eq!(
                    decode_offset_commit_value(&kafka),
                    Ok(offset(version)),
                    "{what}"
                );
            }
            "GroupMetadataValue" => {
                assert_eq!(
                    decode_group_metadata_value(&kafka),
                    Ok(group(version)),
                    "{what}"
                );
                assert_eq!(
                    encode_group_metadata_value(&group(version), version).unwrap(),
                    kafka,
                    "{what}"
                );
            }
            "EmptyGroupMetadataValue" => {
                assert_eq!(
                    decode_group_metadata_value(&kafka),
                    Ok(empty(version)),
                    "{what}"
                );
                assert_eq!(
                    encode_group_metadata_value(&empty(version), version).unwrap(),
                    kafka,
                    "{what}"
                );
            }
            other => panic!("unknown schema {other} in {line:?}"),
        }
        seen.push(what);
    }
    assert_eq!(seen.len(), 3 + 5 + 1 + 10, "{seen:?}");
}
