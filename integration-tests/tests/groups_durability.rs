//! Committed offsets are durable (issue 4 point 3): offsets committed with
//! raw OffsetCommit requests and acknowledged survive a graceful restart
//! and a SIGKILL of the `weir` process, because the coordinator answers
//! only after `__consumer_offsets` has them fsynced, and the coordinator
//! loads them back from that topic at start.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, DeleteTopicsRequest, GroupId, OffsetCommitRequest,
    OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::{RawClient, TestBroker};

use crate::support;

pub(crate) const GROUP: &str = "durable-group";
pub(crate) const TOPIC: &str = "durable-topic";
const PARTITIONS: i32 = 3;

/// Kafka error codes the coordinator answers while it is (re)loading.
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;

fn retriable(code: i16) -> bool {
    matches!(
        code,
        COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR
    )
}

/// Commits `offsets` (partition -> offset) for [`GROUP`] as a consumer
/// outside any generation (generation -1, no member id), as
/// `kafka-consumer-groups --reset-offsets` and `assign()` consumers do.
/// Returns the first error code (0 when every partition succeeded).
pub(crate) fn commit(client: &mut RawClient, version: i16, offsets: &BTreeMap<i32, i64>) -> i16 {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::from_static_str(""))
        .with_retention_time_ms(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partitions(
                offsets
                    .iter()
                    .map(|(&p, &o)| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(p)
                            .with_committed_offset(o)
                            .with_committed_leader_epoch(-1)
                            .with_committed_metadata(Some(StrBytes::from_string(format!(
                                "meta-{o}"
                            ))))
                    })
                    .collect(),
            )]);
    let response = client.send(&request, version).expect("OffsetCommit");
    response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.error_code)
        .find(|&c| c != 0)
        .unwrap_or(0)
}

/// The committed offsets of [`TOPIC`] for [`GROUP`] (partition -> (offset,
/// metadata)); `Err(code)` for a group-level or partition error.
pub(crate) fn fetch(
    client: &mut RawClient,
    version: i16,
) -> Result<BTreeMap<i32, (i64, String)>, i16> {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partition_indexes((0..PARTITIONS).collect())]));
    let response = client.send(&request, version).expect("OffsetFetch");
    if response.error_code != 0 {
        return Err(response.error_code);
    }
    let mut out = BTreeMap::new();
    for p in response.topics.iter().flat_map(|t| t.partitions.iter()) {
        if p.error_code != 0 {
            return Err(p.error_code);
        }
        if p.committed_offset >= 0 {
            let metadata = p
                .metadata
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default();
            out.insert(p.partition_index, (p.committed_offset, metadata));
        }
    }
    Ok(out)
}

pub(crate) struct Versions {
    pub(crate) commit: i16,
    pub(crate) fetch: i16,
}

/// OffsetCommit up to v9 and OffsetFetch up to v7 (one group per request),
/// newest both sides support.
fn versions(api: &ApiVersionsResponse) -> Versions {
    let pick = |versions: Vec<i16>, max: i16| {
        versions
            .into_iter()
            .filter(|&v| v <= max)
            .max()
            .expect("a common version")
    };
    Versions {
        commit: pick(
            support::common_versions::<OffsetCommitRequest>(api, ApiKey::OffsetCommit),
            9,
        ),
        fetch: pick(
            support::common_versions::<OffsetFetchRequest>(api, ApiKey::OffsetFetch),
            7,
        ),
    }
}

/// Connects and waits until the coordinator answers OffsetFetch (it loads
/// the offsets topic first); returns what it answers.
pub(crate) fn connect_loaded(
    broker: &TestBroker,
) -> (RawClient, Versions, BTreeMap<i32, (i64, String)>) {
    let mut client = support::connect(broker);
    let api = support::api_versions(&mut client);
    let versions = versions(&api);
    let fetched = support::poll_until(
        Duration::from_secs(60),
        "the group coordinator to load",
        || match fetch(&mut client, versions.fetch) {
            Ok(offsets) => Some(offsets),
            Err(code) if retriable(code) => None,
            Err(code) => panic!("OffsetFetch error {code}"),
        },
    );
    (client, versions, fetched)
}

fn expected(offsets: &BTreeMap<i32, i64>) -> BTreeMap<i32, (i64, String)> {
    offsets
        .iter()
        .map(|(&p, &o)| (p, (o, format!("meta-{o}"))))
        .collect()
}

/// Commits until the coordinator accepts (it may still be loading).
pub(crate) fn commit_ok(client: &mut RawClient, version: i16, offsets: &BTreeMap<i32, i64>) {
    support::poll_until(
        Duration::from_secs(60),
        "OffsetCommit to succeed",
        || match commit(client, version, offsets) {
            0 => Some(()),
            code if retriable(code) => None,
            code => panic!("OffsetCommit error {code}"),
        },
    );
}

#[test]
fn groups_committed_offsets_survive_a_restart_and_a_kill9() {
    let mut broker = support::start_broker_with_partitions(PARTITIONS as u32);
    {
        // Kafka refuses commits for partitions that do not exist.
        let mut client = support::connect(&broker);
        let api = support::api_versions(&mut client);
        support::ensure_topic(&mut client, &api, TOPIC);
    }
    let (mut client, versions, before) = connect_loaded(&broker);
    assert!(before.is_empty(), "{before:?}");

    let first: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 10 + i64::from(p))).collect();
    commit_ok(&mut client, versions.commit, &first);
    assert_eq!(fetch(&mut client, versions.fetch), Ok(expected(&first)));
    drop(client);

    broker.restart().expect("graceful restart");
    let (mut client, versions, after_restart) = connect_loaded(&broker);
    assert_eq!(after_restart, expected(&first));

    // Commits acknowledged right before a SIGKILL are durable: the last of
    // a run of commits, and a partial overwrite.
    let mut latest = first.clone();
    for round in 1..=20 {
        latest.insert(round % PARTITIONS, 100 * round as i64);
        commit_ok(&mut client, versions.commit, &latest);
    }
    drop(client);
    broker.kill9().expect("SIGKILL");
    broker.start_again().expect("start after SIGKILL");
    let (mut client, versions, after_kill) = connect_loaded(&broker);
    assert_eq!(after_kill, expected(&latest));

    // And the coordinator keeps committing after the crash.
    latest.insert(0, 5_000);
    commit_ok(&mut client, versions.commit, &latest);
    assert_eq!(fetch(&mut client, versions.fetch), Ok(expected(&latest)));
}

/// A static member (KIP-345) survives a graceful restart and a SIGKILL:
/// the generation's metadata written when SyncGroup stored the assignment
/// is loaded back from `__consumer_offsets`, so DescribeGroups shows the
/// same member id, instance id, protocol and assignment.
#[test]
fn groups_static_member_survives_a_restart_and_a_kill9() {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
    use kafka_protocol::messages::{
        DescribeGroupsRequest, DescribeGroupsResponse, JoinGroupRequest, SyncGroupRequest,
    };

    const STATIC_GROUP: &str = "static-group";
    let subscription =
        bytes::Bytes::from_static(b"\x00\x00\x00\x00\x00\x01\x00\x06orders\xff\xff\xff\xff");
    let assignment = bytes::Bytes::from_static(
        b"\x00\x00\x00\x00\x00\x01\x00\x06orders\x00\x00\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff",
    );
    let mut broker = TestBroker::builder()
        .override_config("group.initial.rebalance.delay.ms", "0")
        .start()
        .expect("starting weir");
    let mut client = support::connect(&broker);
    let api = support::api_versions(&mut client);
    let join_version = support::newest::<JoinGroupRequest>(&api, ApiKey::JoinGroup);
    let sync_version = support::newest::<SyncGroupRequest>(&api, ApiKey::SyncGroup);
    let describe_version = support::newest::<DescribeGroupsRequest>(&api, ApiKey::DescribeGroups);
    assert!(
        join_version >= 5 && describe_version >= 4,
        "static membership needs JoinGroup v5+"
    );

    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str(STATIC_GROUP)))
        .with_session_timeout_ms(45_000)
        .with_rebalance_timeout_ms(60_000)
        .with_member_id(StrBytes::from_static_str(""))
        .with_group_instance_id(Some(StrBytes::from_static_str("static-1")))
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(subscription.clone())]);
    let joined = support::poll_until(Duration::from_secs(60), "JoinGroup", || {
        let r = client.send(&join, join_version).expect("JoinGroup");
        match r.error_code {
            0 => Some(r),
            code if retriable(code) => None,
            code => panic!("JoinGroup error {code}"),
        }
    });
    assert_eq!(joined.leader, joined.member_id);
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str(STATIC_GROUP)))
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone())
        .with_group_instance_id(Some(StrBytes::from_static_str("static-1")))
        .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
        .with_protocol_name(Some(StrBytes::from_static_str("range")))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(joined.member_id.clone())
            .with_assignment(assignment.clone())]);
    let synced = client.send(&sync, sync_version).expect("SyncGroup");
    assert_eq!(synced.error_code, 0);
    assert_eq!(synced.assignment, assignment);

    let describe = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(StrBytes::from_static_str(STATIC_GROUP))]);
    let describe_loaded = |client: &mut RawClient| {
        support::poll_until(Duration::from_secs(60), "DescribeGroups", || {
            let r: DescribeGroupsResponse = client
                .send(&describe, describe_version)
                .expect("DescribeGroups");
            match r.groups[0].error_code {
                0 => Some(r.groups[0].clone()),
                code if retriable(code) => None,
                code => panic!("DescribeGroups error {code}"),
            }
        })
    };
    // The member's identity as stored in the group's metadata record.
    // (After loading, the coordinator of groups-core prepares a rebalance
    // where Kafka keeps a loaded group Stable, so DescribeGroups then omits
    // the protocol, subscription and assignment; only the identity is
    // compared after a restart.)
    let check = |group: &kafka_protocol::messages::describe_groups_response::DescribedGroup,
                 when: &str| {
        assert_eq!(group.protocol_type.as_str(), "consumer", "{when}");
        assert_eq!(group.members.len(), 1, "{when}: {group:?}");
        let member = &group.members[0];
        assert_eq!(member.member_id, joined.member_id, "{when}");
        assert_eq!(
            member.group_instance_id.as_ref().map(|s| s.as_str()),
            Some("static-1"),
            "{when}"
        );
        assert_eq!(member.client_host.as_str(), "/127.0.0.1", "{when}");
    };
    let before = describe_loaded(&mut client);
    assert_eq!(before.group_state.as_str(), "Stable");
    assert_eq!(before.protocol_data.as_str(), "range");
    assert_eq!(before.members[0].member_metadata, subscription);
    assert_eq!(before.members[0].member_assignment, assignment);
    check(&before, "before the restart");
    drop(client);

    broker.restart().expect("graceful restart");
    let mut client = support::connect(&broker);
    check(&describe_loaded(&mut client), "after a restart");
    drop(client);

    broker.kill9().expect("SIGKILL");
    broker.start_again().expect("start after SIGKILL");
    let mut client = support::connect(&broker);
    check(&describe_loaded(&mut client), "after a SIGKILL");
}

/// A real client: a confluent-kafka (librdkafka) group member that commits
/// after each run resumes exactly after its last commit, across a SIGKILL
/// and a graceful restart of the broker.
#[test]
fn groups_confluent_consumer_resumes_after_its_commit_across_restarts() {
    use weir_integration_tests::clients;

    const RESUME_TOPIC: &str = "resume-topic";
    let mut broker = TestBroker::builder()
        .override_config("group.initial.rebalance.delay.ms", "0")
        .start()
        .expect("starting weir");
    {
        let mut client = support::connect(&broker);
        let api = support::api_versions(&mut client);
        support::ensure_topic(&mut client, &api, RESUME_TOPIC);
    }
    let values: Vec<String> = (0..20).map(|i| format!("v{i}")).collect();
    support::kcat_produce(&broker.bootstrap(), RESUME_TOPIC, &values, &[]);

    // Runs the member taking `take` records; returns the consumed offsets
    // and the committed offset it read back.
    let run = |broker: &TestBroker, take: usize| -> (Vec<i64>, i64) {
        let mut command = clients::python_script("confluent_group_resume.py").expect("venv");
        command
            .arg(broker.bootstrap())
            .arg(RESUME_TOPIC)
            .arg("resume-group")
            .arg(take.to_string());
        let output = clients::run(command, None, support::CLIENT_TIMEOUT)
            .expect("confluent_group_resume.py");
        output.assert_success();
        let stdout = output.stdout_text();
        let mut consumed = Vec::new();
        let mut committed = None;
        for line in stdout.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            match fields[..] {
                ["consumed", "0", offset, value] => {
                    let offset: i64 = offset.parse().expect("offset");
                    assert_eq!(value, format!("v{offset}"), "{stdout}");
                    consumed.push(offset);
                }
                ["committed", "0", offset] => committed = Some(offset.parse().expect("offset")),
                _ => {}
            }
        }
        (
            consumed,
            committed.unwrap_or_else(|| panic!("no commit in {stdout}")),
        )
    };

    assert_eq!(run(&broker, 8), ((0..8).collect(), 8));
    broker.kill9().expect("SIGKILL");
    broker.start_again().expect("start after SIGKILL");
    assert_eq!(run(&broker, 8), ((8..16).collect(), 16));
    broker.restart().expect("graceful restart");
    assert_eq!(run(&broker, 4), ((16..20).collect(), 20));
}

/// DeleteTopics of `__consumer_offsets` is accepted (as Kafka KRaft
/// accepts it) and deletes every group's records, so the coordinator
/// forgets its groups at once (Kafka unloads the groups of deleted offsets
/// partitions): OffsetFetch answers no offsets before a restart, the same
/// as after one, and the next commit creates the topic again.
#[test]
fn groups_deleting_the_offsets_topic_forgets_the_offsets_before_and_after_a_restart() {
    let mut broker = support::start_broker_with_partitions(PARTITIONS as u32);
    {
        let mut client = support::connect(&broker);
        let api = support::api_versions(&mut client);
        support::ensure_topic(&mut client, &api, TOPIC);
    }
    let (mut client, versions, _) = connect_loaded(&broker);
    let first: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 10 + i64::from(p))).collect();
    commit_ok(&mut client, versions.commit, &first);
    assert_eq!(fetch(&mut client, versions.fetch), Ok(expected(&first)));

    let deleted = client
        .send(
            &DeleteTopicsRequest::default()
                .with_topic_names(vec![TopicName(StrBytes::from_static_str(
                    "__consumer_offsets",
                ))])
                .with_timeout_ms(30_000),
            5,
        )
        .expect("DeleteTopics v5");
    assert_eq!(deleted.responses[0].error_code, 0, "{deleted:?}");
    assert_eq!(
        fetch(&mut client, versions.fetch),
        Ok(BTreeMap::new()),
        "the offsets of the deleted topic are not served"
    );
    drop(client);

    broker.restart().expect("graceful restart");
    let (mut client, versions, after_restart) = connect_loaded(&broker);
    assert_eq!(after_restart, BTreeMap::new(), "the restart agrees");

    // The next commit creates the offsets topic again and is durable.
    let second: BTreeMap<i32, i64> = [(1, 77)].into_iter().collect();
    commit_ok(&mut client, versions.commit, &second);
    assert_eq!(fetch(&mut client, versions.fetch), Ok(expected(&second)));
    drop(client);
    broker.restart().expect("graceful restart");
    let (_client, _versions, after_second) = connect_loaded(&broker);
    assert_eq!(after_second, expected(&second));
}
