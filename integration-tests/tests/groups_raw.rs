//! Consumer groups over raw frames: case C05 (OffsetFetch answers every
//! requested partition), a whole join / sync / heartbeat / commit / fetch /
//! leave cycle in the oldest non-flexible versions (what old librdkafka
//! sends) and in the newest flexible ones, and two members rebalancing with
//! generations going up by one.

use std::thread;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, DeleteGroupsRequest, DeleteTopicsRequest, DescribeGroupsRequest,
    FindCoordinatorRequest, GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::{RawClient, TestBroker};

use crate::support::{self, error_code};

const REBALANCE_IN_PROGRESS: i16 = 27;
const MEMBER_ID_REQUIRED: i16 = 79;
const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
const NON_EMPTY_GROUP: i16 = 68;

fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

fn group(value: &str) -> GroupId {
    GroupId(s(value))
}

fn topic(value: &str) -> TopicName {
    TopicName(s(value))
}

/// A broker whose first rebalance does not wait for more members.
fn start_broker() -> TestBroker {
    TestBroker::builder()
        .override_config("group.initial.rebalance.delay.ms", "0")
        .override_config("num.partitions", "3")
        .start()
        .expect("starting weir")
}

/// A `ConsumerProtocolSubscription` v0 for `topics` (user data null).
fn subscription(topics: &[&str]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(topics.len() as i32);
    for t in topics {
        b.put_i16(t.len() as i16);
        b.put_slice(t.as_bytes());
    }
    b.put_i32(-1);
    b.freeze()
}

fn join_request(group_id: &str, member_id: &str, topics: &[&str]) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(group(group_id))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(member_id))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(subscription(topics))])
}

fn join(client: &mut RawClient, version: i16, request: &JoinGroupRequest) -> JoinGroupResponse {
    let response = client
        .send(request, version)
        .unwrap_or_else(|e| panic!("JoinGroup v{version}: {e}"));
    assert_eq!(
        response.error_code,
        error_code::NONE,
        "JoinGroup v{version}"
    );
    response
}

/// A first join from v4: MEMBER_ID_REQUIRED hands out the member id, and
/// the join is sent again with it (KIP-394).
fn join_new_member(
    client: &mut RawClient,
    version: i16,
    request: &JoinGroupRequest,
) -> JoinGroupResponse {
    let required = client
        .send(request, version)
        .unwrap_or_else(|e| panic!("JoinGroup v{version}: {e}"));
    assert_eq!(
        required.error_code, MEMBER_ID_REQUIRED,
        "JoinGroup v{version}"
    );
    join(
        client,
        version,
        &request.clone().with_member_id(required.member_id),
    )
}

fn sync(
    client: &mut RawClient,
    version: i16,
    group_id: &str,
    joined: &JoinGroupResponse,
    assignments: &[(&str, &[u8])],
) -> SyncGroupResponse {
    let mut request = SyncGroupRequest::default()
        .with_group_id(group(group_id))
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone())
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(s(m))
                        .with_assignment(Bytes::copy_from_slice(a))
                })
                .collect(),
        );
    if version >= 5 {
        request = request
            .with_protocol_type(Some(s("consumer")))
            .with_protocol_name(Some(s("range")));
    }
    let response = client
        .send(&request, version)
        .unwrap_or_else(|e| panic!("SyncGroup v{version}: {e}"));
    assert_eq!(
        response.error_code,
        error_code::NONE,
        "SyncGroup v{version}"
    );
    response
}

fn heartbeat(
    client: &mut RawClient,
    version: i16,
    group_id: &str,
    joined: &JoinGroupResponse,
) -> i16 {
    client
        .send(
            &HeartbeatRequest::default()
                .with_group_id(group(group_id))
                .with_generation_id(joined.generation_id)
                .with_member_id(joined.member_id.clone()),
            version,
        )
        .unwrap_or_else(|e| panic!("Heartbeat v{version}: {e}"))
        .error_code
}

fn commit_request(
    group_id: &str,
    generation_id: i32,
    member_id: &str,
    name: &str,
    offsets: &[(i32, i64)],
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(group(group_id))
        .with_generation_id_or_member_epoch(generation_id)
        .with_member_id(s(member_id))
        .with_retention_time_ms(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic(name))
            .with_partitions(
                offsets
                    .iter()
                    .map(|&(p, o)| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(p)
                            .with_committed_offset(o)
                            .with_committed_leader_epoch(0)
                            .with_committed_metadata(Some(s("m")))
                    })
                    .collect(),
            )])
}

fn commit(client: &mut RawClient, version: i16, request: &OffsetCommitRequest) {
    let response = client
        .send(request, version)
        .unwrap_or_else(|e| panic!("OffsetCommit v{version}: {e}"));
    for p in response.topics.iter().flat_map(|t| t.partitions.iter()) {
        assert_eq!(p.error_code, error_code::NONE, "OffsetCommit v{version}");
    }
}

/// `(partition, offset, leader epoch, error)` of an OffsetFetch v1-7
/// response's first topic.
fn fetched(response: &OffsetFetchResponse) -> Vec<(i32, i64, i32, i16)> {
    response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            (
                p.partition_index,
                p.committed_offset,
                p.committed_leader_epoch,
                p.error_code,
            )
        })
        .collect()
}

fn fetch_v1_to_7(
    client: &mut RawClient,
    version: i16,
    group_id: &str,
    partitions: Option<(&str, &[i32])>,
) -> OffsetFetchResponse {
    let request = OffsetFetchRequest::default()
        .with_group_id(group(group_id))
        .with_topics(partitions.map(|(name, indexes)| {
            vec![OffsetFetchRequestTopic::default()
                .with_name(topic(name))
                .with_partition_indexes(indexes.to_vec())]
        }));
    let response = client
        .send(&request, version)
        .unwrap_or_else(|e| panic!("OffsetFetch v{version}: {e}"));
    assert_eq!(
        response.error_code,
        error_code::NONE,
        "OffsetFetch v{version}"
    );
    response
}

/// C05: OffsetFetch answers every requested partition: for a group with
/// no commits, partitions 0..2 come back as three entries with offset -1,
/// leader epoch -1 and no error, at every version (several groups in one
/// request from v8); topics=null means every committed partition.
#[test]
fn c05_offset_fetch_answers_every_requested_partition() {
    let broker = start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    support::ensure_topic(&mut client, &versions, "c05");
    let fetch_versions =
        support::common_versions::<OffsetFetchRequest>(&versions, ApiKey::OffsetFetch);
    assert_eq!(fetch_versions, (1..=9).collect::<Vec<_>>());

    let none = vec![
        (0, -1, -1, error_code::NONE),
        (1, -1, -1, error_code::NONE),
        (2, -1, -1, error_code::NONE),
    ];
    for &version in fetch_versions.iter().filter(|v| **v <= 7) {
        let response = fetch_v1_to_7(&mut client, version, "c05-empty", Some(("c05", &[0, 1, 2])));
        assert_eq!(fetched(&response), none, "v{version}");
        assert_eq!(response.topics[0].name.0.as_str(), "c05");
    }

    // Commits for partitions 0 and 2 of another group.
    commit(
        &mut client,
        8,
        &commit_request("c05-committed", -1, "", "c05", &[(0, 5), (2, 7)]),
    );
    for &version in fetch_versions.iter().filter(|v| (2..=7).contains(*v)) {
        let all = fetch_v1_to_7(&mut client, version, "c05-committed", None);
        let epoch = if version >= 5 { 0 } else { -1 };
        assert_eq!(
            fetched(&all),
            vec![(0, 5, epoch, 0), (2, 7, epoch, 0)],
            "topics=null v{version}"
        );
        let empty = fetch_v1_to_7(&mut client, version, "c05-empty", None);
        assert!(empty.topics.is_empty(), "v{version}");
    }

    for version in [8, 9] {
        let request = OffsetFetchRequest::default().with_groups(vec![
            OffsetFetchRequestGroup::default()
                .with_group_id(group("c05-empty"))
                .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                    .with_name(topic("c05"))
                    .with_partition_indexes(vec![0, 1, 2])])),
            OffsetFetchRequestGroup::default()
                .with_group_id(group("c05-committed"))
                .with_topics(None),
        ]);
        let response = client
            .send(&request, version)
            .unwrap_or_else(|e| panic!("OffsetFetch v{version}: {e}"));
        assert_eq!(response.groups.len(), 2);
        let entries = |g: usize| -> Vec<(i32, i64, i32, i16)> {
            response.groups[g]
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .map(|p| {
                    (
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.error_code,
                    )
                })
                .collect()
        };
        assert_eq!(response.groups[0].group_id.0.as_str(), "c05-empty");
        assert_eq!(response.groups[0].error_code, error_code::NONE);
        assert_eq!(entries(0), none, "v{version}");
        assert_eq!(entries(1), vec![(0, 5, 0, 0), (2, 7, 0, 0)], "v{version}");
    }
}

/// The whole cycle in the oldest versions, all non-flexible: FindCoordinator
/// v0, JoinGroup v0 then v1, SyncGroup v0, Heartbeat v0, OffsetCommit v2,
/// OffsetFetch v1, LeaveGroup v0.
#[test]
fn classic_cycle_in_the_oldest_non_flexible_versions() {
    let broker = start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    support::ensure_topic(&mut client, &versions, "old");

    let coordinator = client
        .send(
            &FindCoordinatorRequest::default().with_key(s("old-group")),
            0,
        )
        .expect("FindCoordinator v0");
    assert_eq!(coordinator.error_code, error_code::NONE);
    assert_eq!(coordinator.node_id.0, broker.node_id());
    assert_eq!(coordinator.port, i32::from(broker.port()));

    // v0 needs no member id round trip and has no rebalance timeout.
    let first = join(&mut client, 0, &join_request("old-group", "", &["old"]));
    assert_eq!(first.generation_id, 1);
    assert_eq!(first.leader, first.member_id);
    assert_eq!(first.members.len(), 1);
    let member = first.member_id.to_string();
    let synced = sync(&mut client, 0, "old-group", &first, &[(&member, b"plan-1")]);
    assert_eq!(&synced.assignment[..], b"plan-1");
    assert_eq!(
        heartbeat(&mut client, 0, "old-group", &first),
        error_code::NONE
    );

    commit(
        &mut client,
        2,
        &commit_request("old-group", 1, &member, "old", &[(0, 11), (1, 12)]),
    );
    let offsets = fetch_v1_to_7(&mut client, 1, "old-group", Some(("old", &[0, 1, 2])));
    assert_eq!(
        fetched(&offsets),
        vec![(0, 11, -1, 0), (1, 12, -1, 0), (2, -1, -1, 0)]
    );
    assert_eq!(
        offsets.topics[0].partitions[0].metadata.as_deref(),
        Some("m")
    );

    // The leader rejoins with v1: a new generation.
    let second = join(
        &mut client,
        1,
        &join_request("old-group", &member, &["old"]),
    );
    assert_eq!(second.generation_id, 2);
    assert_eq!(second.member_id.as_str(), member);
    sync(
        &mut client,
        0,
        "old-group",
        &second,
        &[(&member, b"plan-2")],
    );
    assert_eq!(
        heartbeat(&mut client, 0, "old-group", &second),
        error_code::NONE
    );
    assert_eq!(
        heartbeat(&mut client, 0, "old-group", &first),
        22,
        "ILLEGAL_GENERATION"
    );

    let left = client
        .send(
            &LeaveGroupRequest::default()
                .with_group_id(group("old-group"))
                .with_member_id(s(&member)),
            0,
        )
        .expect("LeaveGroup v0");
    assert_eq!(left.error_code, error_code::NONE);
    let described = client
        .send(
            &DescribeGroupsRequest::default().with_groups(vec![group("old-group")]),
            0,
        )
        .expect("DescribeGroups v0");
    assert_eq!(described.groups[0].group_state.as_str(), "Empty");
    assert!(described.groups[0].members.is_empty());
}

/// The whole cycle in the newest, flexible versions, with the member id
/// round trip (KIP-394), batched FindCoordinator (KIP-699), OffsetFetch for
/// several groups, ListGroups filters, OffsetDelete and DeleteGroups.
#[test]
fn classic_cycle_in_the_newest_flexible_versions() {
    let broker = start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    support::ensure_topic(&mut client, &versions, "new");
    support::ensure_topic(&mut client, &versions, "gone");

    let coordinators = client
        .send(
            &FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(vec![s("new-group"), s("other")]),
            6,
        )
        .expect("FindCoordinator v6");
    assert_eq!(coordinators.coordinators.len(), 2);
    for c in &coordinators.coordinators {
        assert_eq!(c.error_code, error_code::NONE);
        assert_eq!(c.node_id.0, broker.node_id());
        assert_eq!(c.port, i32::from(broker.port()));
    }
    let transactions = client
        .send(
            &FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_coordinator_keys(vec![s("tx")]),
            6,
        )
        .expect("FindCoordinator v6 for a transactional id");
    assert_eq!(
        transactions.coordinators[0].error_code, 15,
        "COORDINATOR_NOT_AVAILABLE"
    );

    let request = join_request("new-group", "", &["new"]);
    let required = client.send(&request, 9).expect("JoinGroup v9");
    assert_eq!(required.error_code, MEMBER_ID_REQUIRED);
    assert!(
        required.member_id.starts_with("weir-itest-"),
        "{}",
        required.member_id
    );
    let member = required.member_id.to_string();
    let joined = join(&mut client, 9, &request.clone().with_member_id(s(&member)));
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    let synced = sync(&mut client, 5, "new-group", &joined, &[(&member, b"plan")]);
    assert_eq!(synced.protocol_name.as_deref(), Some("range"));
    assert_eq!(&synced.assignment[..], b"plan");
    assert_eq!(
        heartbeat(&mut client, 4, "new-group", &joined),
        error_code::NONE
    );

    commit(
        &mut client,
        9,
        &commit_request("new-group", 1, &member, "new", &[(0, 3)]),
    );
    commit(
        &mut client,
        9,
        &commit_request("new-group", 1, &member, "gone", &[(1, 4)]),
    );
    let unknown = client
        .send(
            &commit_request("new-group", 1, &member, "no-such-topic", &[(0, 1)]),
            9,
        )
        .expect("OffsetCommit v9");
    assert_eq!(
        unknown.topics[0].partitions[0].error_code,
        error_code::UNKNOWN_TOPIC_OR_PARTITION
    );
    let fetch = client
        .send(
            &OffsetFetchRequest::default()
                .with_require_stable(true)
                .with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(group("new-group"))
                    .with_member_id(Some(s(&member)))
                    .with_member_epoch(-1)
                    .with_topics(None)]),
            9,
        )
        .expect("OffsetFetch v9");
    let mut all: Vec<(String, i32, i64)> = fetch.groups[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.to_string(), p.partition_index, p.committed_offset))
        })
        .collect();
    all.sort();
    assert_eq!(all, vec![("gone".into(), 1, 4), ("new".into(), 0, 3)]);

    let described = client
        .send(
            &DescribeGroupsRequest::default().with_groups(vec![group("new-group"), group("nope")]),
            5,
        )
        .expect("DescribeGroups v5");
    let g = &described.groups[0];
    assert_eq!(
        (
            g.group_state.as_str(),
            g.protocol_type.as_str(),
            g.protocol_data.as_str()
        ),
        ("Stable", "consumer", "range")
    );
    assert_eq!(g.members[0].member_id.as_str(), member);
    assert_eq!(g.members[0].client_host.as_str(), "/127.0.0.1");
    assert_eq!(&g.members[0].member_assignment[..], b"plan");
    assert_eq!(described.groups[1].group_state.as_str(), "Dead");
    // Not asked: Int.MIN. Asked (v3+, KIP-430): every operation a group
    // supports (READ DELETE DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS), as
    // Kafka without an authorizer.
    assert_eq!(g.authorized_operations, i32::MIN);
    let with_operations = client
        .send(
            &DescribeGroupsRequest::default()
                .with_groups(vec![group("new-group")])
                .with_include_authorized_operations(true),
            5,
        )
        .expect("DescribeGroups v5");
    assert_eq!(
        with_operations.groups[0].authorized_operations,
        1 << 3 | 1 << 6 | 1 << 8 | 1 << 10 | 1 << 11
    );

    let listed = client
        .send(
            &ListGroupsRequest::default()
                .with_states_filter(vec![s("stable")])
                .with_types_filter(vec![s("Classic")]),
            5,
        )
        .expect("ListGroups v5");
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_id.0.as_str(), "new-group");
    assert_eq!(listed.groups[0].group_type.as_str(), "classic");
    let consumer_only = client
        .send(
            &ListGroupsRequest::default().with_types_filter(vec![s("consumer")]),
            5,
        )
        .expect("ListGroups v5");
    assert!(consumer_only.groups.is_empty());

    // The member subscribes to "new" but not to "gone".
    let deleted = client
        .send(
            &OffsetDeleteRequest::default()
                .with_group_id(group("new-group"))
                .with_topics(
                    ["new", "gone"]
                        .iter()
                        .map(|t| {
                            OffsetDeleteRequestTopic::default()
                                .with_name(topic(t))
                                .with_partitions(vec![OffsetDeleteRequestPartition::default()
                                    .with_partition_index(if *t == "new" { 0 } else { 1 })])
                        })
                        .collect(),
                ),
            0,
        )
        .expect("OffsetDelete v0");
    assert_eq!(deleted.error_code, error_code::NONE);
    assert_eq!(
        deleted.topics[0].partitions[0].error_code,
        GROUP_SUBSCRIBED_TO_TOPIC
    );
    assert_eq!(deleted.topics[1].partitions[0].error_code, error_code::NONE);

    let busy = client
        .send(
            &DeleteGroupsRequest::default().with_groups_names(vec![group("new-group")]),
            2,
        )
        .expect("DeleteGroups v2");
    assert_eq!(busy.results[0].error_code, NON_EMPTY_GROUP);

    let left = client
        .send(
            &LeaveGroupRequest::default()
                .with_group_id(group("new-group"))
                .with_members(vec![
                    MemberIdentity::default()
                        .with_member_id(s(&member))
                        .with_reason(Some(s("done"))),
                    MemberIdentity::default().with_member_id(s("stranger")),
                ]),
            5,
        )
        .expect("LeaveGroup v5");
    assert_eq!(left.error_code, error_code::NONE);
    assert_eq!(left.members[0].error_code, error_code::NONE);
    assert_eq!(left.members[1].error_code, 25, "UNKNOWN_MEMBER_ID");

    let gone = client
        .send(
            &DeleteGroupsRequest::default()
                .with_groups_names(vec![group("new-group"), group("never-was")]),
            2,
        )
        .expect("DeleteGroups v2");
    assert_eq!(gone.results[0].error_code, error_code::NONE);
    assert_eq!(gone.results[1].error_code, 69, "GROUP_ID_NOT_FOUND");
    let after = fetch_v1_to_7(&mut client, 7, "new-group", Some(("new", &[0])));
    assert_eq!(fetched(&after), vec![(0, -1, -1, 0)]);
}

/// Two members: each join of a new member or leave of an old one starts a
/// rebalance, and every completed rebalance raises the generation by one.
#[test]
fn two_members_rebalance_with_generations_going_up_by_one() {
    let broker = start_broker();
    let mut a = support::connect(&broker);
    let versions = support::api_versions(&mut a);
    support::ensure_topic(&mut a, &versions, "pair");
    let mut b = support::connect(&broker);

    let a1 = join_new_member(&mut a, 5, &join_request("pair-group", "", &["pair"]));
    assert_eq!(a1.generation_id, 1);
    let a_id = a1.member_id.to_string();
    sync(&mut a, 3, "pair-group", &a1, &[(&a_id, b"all")]);

    // B's join waits for A to rejoin; A learns of the rebalance by heartbeat.
    let b_join = thread::spawn(move || {
        let b1 = join_new_member(&mut b, 5, &join_request("pair-group", "", &["pair"]));
        (b, b1)
    });
    support::poll_until(Duration::from_secs(30), "A to see the rebalance", || {
        (heartbeat(&mut a, 3, "pair-group", &a1) == REBALANCE_IN_PROGRESS).then_some(())
    });
    let a2 = join(&mut a, 5, &join_request("pair-group", &a_id, &["pair"]));
    let (mut b, b2) = b_join.join().expect("B's join");
    assert_eq!((a2.generation_id, b2.generation_id), (2, 2));
    assert_eq!(a2.leader, b2.leader);
    let (leader, follower) = if a2.leader == a2.member_id {
        (&a2, &b2)
    } else {
        (&b2, &a2)
    };
    assert_eq!(leader.members.len(), 2);
    assert!(follower.members.is_empty());

    // Both sync; the follower's answer waits for the leader's assignment.
    let b_id = b2.member_id.to_string();
    let plan = [(a_id.as_str(), &b"a"[..]), (b_id.as_str(), &b"b"[..])];
    let b_sync = {
        let b2 = b2.clone();
        let b_plan: Vec<(String, Vec<u8>)> = if b2.leader == b2.member_id {
            plan.iter()
                .map(|(m, p)| (m.to_string(), p.to_vec()))
                .collect()
        } else {
            Vec::new()
        };
        thread::spawn(move || {
            let refs: Vec<(&str, &[u8])> = b_plan
                .iter()
                .map(|(m, p)| (m.as_str(), p.as_slice()))
                .collect();
            let r = sync(&mut b, 3, "pair-group", &b2, &refs);
            (b, r)
        })
    };
    let a_plan: &[(&str, &[u8])] = if a2.leader == a2.member_id {
        &plan
    } else {
        &[]
    };
    let a_synced = sync(&mut a, 3, "pair-group", &a2, a_plan);
    let (mut b, b_synced) = b_sync.join().expect("B's sync");
    assert_eq!(
        (&a_synced.assignment[..], &b_synced.assignment[..]),
        (&b"a"[..], &b"b"[..])
    );

    // A leaves: B sees the rebalance and rejoins alone into generation 3.
    let left = a
        .send(
            &LeaveGroupRequest::default()
                .with_group_id(group("pair-group"))
                .with_members(vec![MemberIdentity::default().with_member_id(s(&a_id))]),
            3,
        )
        .expect("LeaveGroup v3");
    assert_eq!(left.members[0].error_code, error_code::NONE);
    assert_eq!(
        heartbeat(&mut b, 3, "pair-group", &b2),
        REBALANCE_IN_PROGRESS
    );
    let b3 = join(&mut b, 5, &join_request("pair-group", &b_id, &["pair"]));
    assert_eq!(b3.generation_id, 3);
    assert_eq!(b3.leader.as_str(), b_id);
}

/// Deleting a topic deletes the groups' committed offsets of it (Kafka's
/// `onPartitionsDeleted`): a topic created again under the same name
/// starts without them.
#[test]
fn deleting_a_topic_deletes_its_committed_offsets() {
    let broker = start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    support::ensure_topic(&mut client, &versions, "doomed");
    commit(
        &mut client,
        9,
        &commit_request("doomed-group", -1, "", "doomed", &[(0, 8)]),
    );
    let before = fetch_v1_to_7(&mut client, 7, "doomed-group", None);
    assert_eq!(fetched(&before), vec![(0, 8, 0, 0)]);
    let deleted = client
        .send(
            &DeleteTopicsRequest::default()
                .with_topic_names(vec![topic("doomed")])
                .with_timeout_ms(30_000),
            5,
        )
        .expect("DeleteTopics v5");
    assert_eq!(deleted.responses[0].error_code, error_code::NONE);
    let after = fetch_v1_to_7(&mut client, 7, "doomed-group", None);
    assert!(after.topics.is_empty(), "{after:?}");
}

/// Kafka accepts OffsetCommit and OffsetFetch for the empty group id
/// (backwards compatibility, `GroupCoordinatorService.commitOffsets`):
/// a standalone consumer's generation -1 commit with group "" succeeds in
/// the oldest and the newest versions and is read back.
#[test]
fn offset_commit_and_fetch_accept_the_empty_group_id() {
    let broker = start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    support::ensure_topic(&mut client, &versions, "anon");
    commit(
        &mut client,
        2,
        &commit_request("", -1, "", "anon", &[(0, 3)]),
    );
    let v1 = fetch_v1_to_7(&mut client, 1, "", Some(("anon", &[0])));
    assert_eq!(fetched(&v1), vec![(0, 3, -1, 0)]);
    commit(
        &mut client,
        9,
        &commit_request("", -1, "", "anon", &[(1, 4)]),
    );
    let all = fetch_v1_to_7(&mut client, 7, "", None);
    assert_eq!(fetched(&all), vec![(0, 3, -1, 0), (1, 4, 0, 0)]);
}

/// A JoinGroup listing one protocol name twice gets
/// INCONSISTENT_GROUP_PROTOCOL (Kafka 4.1.2 leaves such a join without an
/// answer, then refuses the group's joins with that code), never a success
/// with an empty protocol name; the group stays usable.
#[test]
fn join_group_with_a_protocol_listed_twice_is_inconsistent() {
    const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    let broker = start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    support::ensure_topic(&mut client, &versions, "twice");
    let mut request = join_request("twice-group", "", &["twice"]);
    let protocol = request.protocols[0].clone();
    request.protocols.push(protocol);
    for version in [0, 5, 9] {
        let response = client
            .send(&request, version)
            .unwrap_or_else(|e| panic!("JoinGroup v{version}: {e}"));
        assert_eq!(
            response.error_code, INCONSISTENT_GROUP_PROTOCOL,
            "JoinGroup v{version}: {response:?}"
        );
    }
    let joined = join_new_member(&mut client, 5, &join_request("twice-group", "", &["twice"]));
    assert_eq!(
        joined.protocol_name.as_ref().map(|p| p.as_str()),
        Some("range")
    );
}

/// OffsetFetch `topics` is nullable only from v2 (the request schema's
/// `nullableVersions: "2-7"`): Kafka cannot decode a v1 request with null
/// topics and closes the connection. v2 null still means every partition.
#[test]
fn offset_fetch_v1_with_null_topics_closes_the_connection() {
    let broker = start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    support::ensure_topic(&mut client, &versions, "nulls");
    commit(
        &mut client,
        2,
        &commit_request("nulls-group", -1, "", "nulls", &[(0, 1)]),
    );
    let all = fetch_v1_to_7(&mut client, 2, "nulls-group", None);
    assert_eq!(fetched(&all), vec![(0, 1, -1, 0)]);
    let refused = client.send(
        &OffsetFetchRequest::default()
            .with_group_id(group("nulls-group"))
            .with_topics(None),
        1,
    );
    assert!(
        refused.is_err(),
        "v1 with null topics answered: {refused:?}"
    );
    let mut fresh = support::connect(&broker);
    support::api_versions(&mut fresh);
}

/// A client-supplied group id is logged bounded: a 70 KB group id whose
/// commit cannot be stored gives a warning line of a bounded length that
/// says how much was cut.
#[test]
fn a_huge_group_id_is_logged_bounded() {
    let broker = start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    support::ensure_topic(&mut client, &versions, "huge");
    let huge = "g".repeat(70_000);
    let response = client
        .send(&commit_request(&huge, -1, "", "huge", &[(0, 1)]), 9)
        .expect("OffsetCommit v9");
    let code = response.topics[0].partitions[0].error_code;
    assert_ne!(code, error_code::NONE, "a 70 KB group id cannot be stored");
    let line = support::poll_until(Duration::from_secs(30), "the warning", || {
        std::fs::read_to_string(broker.log_path())
            .ok()?
            .lines()
            .find(|l| l.contains("storing committed offsets failed"))
            .map(str::to_owned)
    });
    let start: String = line.chars().take(300).collect();
    assert!(line.len() < 2_000, "{} bytes: {start}", line.len());
    assert!(line.contains("more bytes)"), "{start}");
}
