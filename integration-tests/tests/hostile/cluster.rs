//! Issue 17 scope 7: hostile input against a 3-node cluster, on the
//! listeners a single broker does not exercise. Malformed frames on a
//! node's CONTROLLER listener (the quorum transport of
//! `weir_controller::transport`: a Kafka request sent to the wrong port, an
//! oversized or truncated frame, a bad header, a frame of an older version,
//! an undecodable body, an unasked response) close that connection, as a
//! malformed Kafka request does on a client listener; a well-formed request
//! of another cluster is refused and the connection stays open; a
//! connection that stalls in the middle of a frame holds nothing up. A Fetch forged as a replica's (KIP-903
//! `ReplicaState`) from a client that is not that replica is answered with
//! Kafka's error codes (Kafka's `Partition.fetchRecords`): NOT_LEADER_OR_FOLLOWER
//! for a broker that is not a replica or a stale broker epoch,
//! OFFSET_OUT_OF_RANGE beyond the log end. An admin request whose metadata
//! records would not fit one batch of the metadata log (an
//! AlterUserScramCredentials of 20 MB, or of 9 MB: over Kafka's 8 MiB
//! `KafkaRaftClient.MAX_BATCH_SIZE_BYTES`) is answered RECORD_LIST_TOO_LARGE
//! through every node, writes nothing, and leaves the active controller in
//! place (before: the 20 MB one was appended by the leader, could never be
//! replicated, and deposed it). Throughout, an acks=all producer
//! on the replicated partition is answered, every node keeps running, the
//! quorum still creates topics, and the replicas end byte-identical.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::ReplicaState;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, ApiKey, BrokerId, CreateTopicsRequest, FetchRequest,
    FetchResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::RawClient;

use super::Bystander;
use crate::cluster::start_three_nodes;
use crate::support::{self, error_code, FetchSpec, TopicInfo};

/// The replicated topic (3 replicas) the bystander produces to.
const TOPIC: &str = "hostile-cluster";
/// Kafka's NOT_LEADER_OR_FOLLOWER and OFFSET_OUT_OF_RANGE.
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const OFFSET_OUT_OF_RANGE: i16 = 1;
/// Kafka's RECORD_LIST_TOO_LARGE.
const RECORD_LIST_TOO_LARGE: i16 = 18;
/// How long a node may take to close a connection after a bad frame.
const CLOSE_WITHIN: Duration = Duration::from_secs(10);

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// Creates `topic` with one partition on all three nodes through `client`.
fn create_replicated(client: &mut RawClient, version: i16, topic: &str) {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(3)]);
    let response = client.send(&request, version).expect("CreateTopics");
    assert_eq!(
        response.topics[0].error_code,
        error_code::NONE,
        "CreateTopics {topic}: {:?}",
        response.topics[0].error_message
    );
}

/// `(leader, replicas, topic id)` of `topic`-0 once every replica is in
/// the ISR.
fn fully_replicated(
    client: &mut RawClient,
    version: i16,
    topic: &str,
) -> (i32, Vec<i32>, TopicInfo) {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name(topic)))
        ]))
        .with_allow_auto_topic_creation(false);
    support::poll_until(
        Duration::from_secs(30),
        &format!("{topic}-0 with three replicas in the ISR"),
        || {
            let response: MetadataResponse = client.send(&request, version).expect("Metadata");
            let t = response.topics.first()?;
            let p = t.partitions.first()?;
            (t.error_code == error_code::NONE && p.leader_id.0 >= 1 && p.isr_nodes.len() == 3).then(
                || {
                    (
                        p.leader_id.0,
                        p.replica_nodes.iter().map(|b| b.0).collect(),
                        TopicInfo {
                            name: topic.to_owned(),
                            id: t.topic_id,
                            partitions: t.partitions.len(),
                        },
                    )
                },
            )
        },
    )
}

/// Writes `bytes` to a new connection to `port` and requires the node to
/// close it (end of stream or reset) within [`CLOSE_WITHIN`].
#[track_caller]
fn assert_closes(port: u16, what: &str, bytes: &[u8]) {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("{what}: connecting to port {port}: {e}"));
    stream
        .set_read_timeout(Some(CLOSE_WITHIN))
        .expect("read timeout");
    // The node may close while the bytes are still being written.
    let _ = stream.write_all(bytes);
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    match stream.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("{what}: port {port} answered {n} bytes instead of closing"),
        Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {}
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            panic!(
                "{what}: port {port} kept the connection open for {:?}",
                started.elapsed()
            )
        }
        Err(e) => panic!("{what}: port {port}: {e}"),
    }
}

/// A length-prefixed frame holding `body`.
fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

/// The quorum transport's frame version (`weir_controller::transport`).
const QUORUM_FRAME_VERSION: u8 = 2;

/// A quorum transport frame: magic "WQ", `version`, `kind`, correlation id
/// 7, then `json`.
fn quorum_frame(version: u8, kind: u8, json: &[u8]) -> Vec<u8> {
    let mut body = vec![0x57, 0x51, version, kind, 0, 0, 0, 7];
    body.extend_from_slice(json);
    frame(&body)
}

/// The malformed inputs sent to every CONTROLLER listener.
fn bad_controller_frames() -> Vec<(&'static str, Vec<u8>)> {
    // An ApiVersions v3 request with client id "x": a Kafka client that
    // dialled the CONTROLLER port.
    let kafka = frame(&[0, 18, 0, 3, 0, 0, 0, 1, 0, 1, b'x', 0, 1, 1, 0]);
    let mut oversized = 0x7fff_ffffu32.to_be_bytes().to_vec();
    oversized.extend_from_slice(&[0x57, 0x51, QUORUM_FRAME_VERSION, 1]);
    let v = QUORUM_FRAME_VERSION;
    vec![
        ("a Kafka ApiVersions request", kafka),
        ("a frame longer than the transport's limit", oversized),
        ("a frame shorter than the header", frame(&[0x57, 0x51, v])),
        ("an unknown frame version", quorum_frame(9, 2, b"{}")),
        (
            "a version 1 frame (no route)",
            quorum_frame(1, 2, br#"{"vote":{"leader_id":{"term":1,"voted_for":1},"committed":false},"last_log_id":null}"#),
        ),
        ("an unknown request kind", quorum_frame(v, 0x42, b"{}")),
        (
            "an AppendEntries that is not JSON",
            quorum_frame(v, 1, b"{not json"),
        ),
        (
            "a Vote without a route",
            quorum_frame(v, 2, br#"{"request":{"vote":{"leader_id":{"term":1,"voted_for":1},"committed":false},"last_log_id":null}}"#),
        ),
        (
            "a Vote of the wrong shape",
            quorum_frame(v, 2, &routed(r#"{"vote":[1,2,3]}"#)),
        ),
        ("an unasked response", quorum_frame(v, 0x82, b"{}")),
    ]
}

/// A request body on a route from node 1 of cluster "another-cluster" to
/// node 1, holding `request` (JSON).
fn routed(request: &str) -> Vec<u8> {
    format!(
        r#"{{"route":{{"cluster_id":"another-cluster","source":1,"destination":1}},"request":{request}}}"#
    )
    .into_bytes()
}

/// Sends a well-formed Vote of another cluster twice on one connection to
/// `port`: each is answered with the transport's refusal (kind 0x86, the
/// reason naming the inconsistent cluster id), and the connection stays
/// open. Before routes, such a Vote was handled as the node's own quorum's.
#[track_caller]
fn assert_refused(port: u16) {
    let vote =
        r#"{"vote":{"leader_id":{"term":99,"voted_for":1},"committed":false},"last_log_id":null}"#;
    let request = quorum_frame(QUORUM_FRAME_VERSION, 2, &routed(vote));
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    stream
        .set_read_timeout(Some(CLOSE_WITHIN))
        .expect("read timeout");
    for _ in 0..2 {
        stream.write_all(&request).expect("sending a Vote");
        let mut size = [0u8; 4];
        stream.read_exact(&mut size).expect("an answer");
        let mut answer = vec![0u8; u32::from_be_bytes(size) as usize];
        stream.read_exact(&mut answer).expect("the answer's body");
        assert_eq!(
            &answer[..8],
            &[0x57, 0x51, QUORUM_FRAME_VERSION, 0x86, 0, 0, 0, 7],
            "port {port}: {}",
            String::from_utf8_lossy(&answer)
        );
        let reason = String::from_utf8_lossy(&answer[8..]);
        assert!(
            reason.contains("inconsistent cluster id"),
            "port {port}: {reason}"
        );
    }
}

/// A Fetch of `topic`-0 from `fetch_offset` forged as replica `replica_id`
/// with broker epoch `epoch` (`ReplicaState`, Fetch v15+).
fn forged_fetch(
    client: &mut RawClient,
    version: i16,
    topic: &TopicInfo,
    replica_id: i32,
    epoch: i64,
    fetch_offset: i64,
) -> i16 {
    let mut spec = FetchSpec::one(version, 0, fetch_offset);
    spec.max_wait_ms = 0;
    spec.min_bytes = 0;
    let request = support::fetch_request(topic, &spec).with_replica_state(
        ReplicaState::default()
            .with_replica_id(BrokerId(replica_id))
            .with_replica_epoch(epoch),
    );
    let response: FetchResponse = client
        .send(&request, version)
        .unwrap_or_else(|e| panic!("forged Fetch v{version} as replica {replica_id}: {e}"));
    assert_eq!(response.error_code, error_code::NONE);
    response.responses[0].partitions[0].error_code
}

/// Asks `client` to upsert SCRAM-SHA-256 credentials for `users` users
/// whose names are `name_bytes` long; returns each user's error code.
fn upsert_long_users(client: &mut RawClient, users: usize, name_bytes: usize) -> Vec<i16> {
    let versions = support::api_versions(client);
    let version = support::newest::<AlterUserScramCredentialsRequest>(
        &versions,
        ApiKey::AlterUserScramCredentials,
    );
    let upsertions = (0..users)
        .map(|i| {
            ScramCredentialUpsertion::default()
                .with_name(StrBytes::from_string(format!(
                    "{i:05}{}",
                    "u".repeat(name_bytes)
                )))
                .with_mechanism(1)
                .with_iterations(4096)
                .with_salt(vec![7u8; 16].into())
                .with_salted_password(vec![9u8; 32].into())
        })
        .collect();
    let request = AlterUserScramCredentialsRequest::default().with_upsertions(upsertions);
    let response = client
        .send(&request, version)
        .expect("AlterUserScramCredentials");
    response.results.iter().map(|r| r.error_code).collect()
}

/// The active controller every node names in its Metadata answer.
fn active_controller(brokers: &[weir_integration_tests::TestBroker], version: i16) -> Vec<i32> {
    brokers
        .iter()
        .map(|b| {
            let mut c = support::connect(b);
            let response = c
                .send(
                    &MetadataRequest::default().with_topics(Some(vec![])),
                    version,
                )
                .expect("Metadata");
            response.controller_id.0
        })
        .collect()
}

#[test]
fn bad_controller_frames_and_forged_replica_fetches_leave_the_cluster_serving() {
    let (brokers, controller_ports) = start_three_nodes();
    let mut client = support::connect(&brokers[0]);
    let versions = support::api_versions(&mut client);
    let create_version = support::newest::<CreateTopicsRequest>(&versions, ApiKey::CreateTopics);
    let metadata_version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    assert!(
        fetch_version >= 15,
        "Fetch v{fetch_version} has no ReplicaState"
    );
    create_replicated(&mut client, create_version, TOPIC);
    let (leader, replicas, topic) = fully_replicated(&mut client, metadata_version, TOPIC);
    let leader_node = brokers
        .iter()
        .find(|b| b.node_id() == leader)
        .expect("the leader is one of the nodes");
    let bystander = Bystander::start(leader_node, TOPIC);

    // A peer that stalls in the middle of a frame on every CONTROLLER
    // listener, held open for the whole test.
    let stalled: Vec<TcpStream> = controller_ports
        .iter()
        .map(|&port| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
            s.write_all(&[0, 0, 1, 0, 0x57, 0x51, QUORUM_FRAME_VERSION, 2])
                .expect("half a frame");
            s
        })
        .collect();
    for &port in &controller_ports {
        for (what, bytes) in bad_controller_frames() {
            assert_closes(port, what, &bytes);
        }
        assert_refused(port);
    }
    // The same on a client listener: an API key Kafka does not know.
    for broker in &brokers {
        let port = broker.port();
        assert_closes(
            port,
            "a request with an unknown API key",
            &frame(&[0x7f, 0x7f, 0, 0, 0, 0, 0, 1, 0xff, 0xff]),
        );
    }

    // Fetches forged as a replica's, on the leader's client listener.
    let mut forger = support::connect(leader_node);
    let follower = *replicas.iter().find(|&&r| r != leader).expect("a follower");
    assert_eq!(
        forged_fetch(&mut forger, fetch_version, &topic, 99, -1, 0),
        NOT_LEADER_OR_FOLLOWER,
        "a fetch as a broker that is not a replica"
    );
    assert_eq!(
        forged_fetch(&mut forger, fetch_version, &topic, follower, 0, 0),
        NOT_LEADER_OR_FOLLOWER,
        "a fetch as a follower with a stale broker epoch"
    );
    assert_eq!(
        forged_fetch(
            &mut forger,
            fetch_version,
            &topic,
            follower,
            -1,
            i64::MAX / 2
        ),
        OFFSET_OUT_OF_RANGE,
        "a fetch as a follower beyond the log end"
    );

    // Admin requests whose records do not fit one metadata batch, through
    // every node (the active controller and the forwarding ones).
    let controllers = active_controller(&brokers, metadata_version);
    for broker in &brokers {
        let mut c = support::connect(broker);
        for (users, name_bytes) in [(1_000, 20_000), (1_000, 9_000)] {
            let codes = upsert_long_users(&mut c, users, name_bytes);
            assert_eq!(codes.len(), users);
            assert!(
                codes.iter().all(|&code| code == RECORD_LIST_TOO_LARGE),
                "node {}, {users} users of {name_bytes} bytes: {:?}",
                broker.node_id(),
                &codes[..3]
            );
        }
    }
    assert_eq!(active_controller(&brokers, metadata_version), controllers);

    // Every node still serves, and the quorum still takes commands through
    // each of them.
    for (i, broker) in brokers.iter().enumerate() {
        let mut c = support::connect(broker);
        let after = format!("after-hostile-{i}");
        create_replicated(&mut c, create_version, &after);
        fully_replicated(&mut c, metadata_version, &after);
    }
    drop(stalled);
    bystander.finish("hostile input on a 3-node cluster");
    support::assert_replicas_identical(&brokers, TOPIC, 0);
}
