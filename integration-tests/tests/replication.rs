//! Partition data replication on three real nodes (issue 16): followers
//! fetch from the leader, the ISR grows to every caught-up replica, acks=all
//! waits for the ISR, and a leader killed with SIGKILL loses no
//! acknowledged record. After each test the replicas' segments are
//! compared byte for byte.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, FetchRequest, ListOffsetsRequest, MetadataRequest, ProduceRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::records::plain_batch;
use weir_integration_tests::{RawClient, TestBroker};

use crate::cluster::{
    start_three_nodes_with, three_free_ports, topic_state, voters_of, FAST_SESSIONS,
};
use crate::support::{self, error_code, TopicInfo};

const NOT_ENOUGH_REPLICAS: i16 = 19;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;

/// Negotiated versions for the requests these tests send.
struct Versions {
    metadata: i16,
    produce: i16,
    fetch: i16,
    list_offsets: i16,
}

fn versions(client: &mut RawClient) -> Versions {
    let v = support::api_versions(client);
    Versions {
        metadata: support::newest::<MetadataRequest>(&v, ApiKey::Metadata),
        produce: support::newest::<ProduceRequest>(&v, ApiKey::Produce),
        fetch: support::newest::<FetchRequest>(&v, ApiKey::Fetch),
        list_offsets: support::newest::<ListOffsetsRequest>(&v, ApiKey::ListOffsets),
    }
}

/// Creates a one-partition RF=3 topic with `min.insync.replicas`.
fn create_rf3(client: &mut RawClient, name: &str, min_isr: &str) -> TopicInfo {
    create_replicated(client, name, 1, min_isr)
}

/// Creates an RF=3 topic of `partitions` partitions with
/// `min.insync.replicas`.
pub(crate) fn create_replicated(
    client: &mut RawClient,
    name: &str,
    partitions: i32,
    min_isr: &str,
) -> TopicInfo {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
            .with_num_partitions(partitions)
            .with_replication_factor(3)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("min.insync.replicas"))
                .with_value(Some(StrBytes::from_string(min_isr.to_owned())))])]);
    let created = client.send(&request, 5).expect("CreateTopics");
    assert_eq!(
        created.topics[0].error_code,
        error_code::NONE,
        "{:?}",
        created.topics[0].error_message
    );
    let versions = support::api_versions(client);
    support::ensure_topic(client, &versions, name)
}

/// Polls `client` until partition 0 of `topic` has a live leader (other
/// than `not`) and an ISR of `isr_len`; returns the leader.
fn wait_for_isr(
    client: &mut RawClient,
    version: i16,
    topic: &str,
    isr_len: usize,
    not: Option<i32>,
) -> i32 {
    support::poll_until(
        Duration::from_secs(30),
        &format!("{topic}: a leader and an ISR of {isr_len}"),
        || {
            let (partitions, _) = topic_state(client, version, topic)?;
            let (error, leader, isr, _) = partitions.first()?.clone();
            (error == error_code::NONE
                && leader >= 1
                && Some(leader) != not
                && isr.len() == isr_len
                && isr.contains(&leader))
            .then_some(leader)
        },
    )
}

/// Produces `values` as one batch with `acks`; returns the partition's
/// error code and base offset.
fn produce(
    client: &mut RawClient,
    version: i16,
    topic: &TopicInfo,
    acks: i16,
    values: &[String],
) -> (i16, i64) {
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(15_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.name.clone())))
            .with_topic_id(topic.id)
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(plain_batch(&refs, 1_000)))])]);
    let response = client.send(&request, version).expect("Produce");
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Polls until `client`'s high watermark of `topic`-0 reaches `offset`.
fn wait_for_high_watermark(client: &mut RawClient, v: &Versions, topic: &TopicInfo, offset: i64) {
    support::poll_until(
        Duration::from_secs(30),
        &format!("{}: the high watermark to reach {offset}", topic.name),
        || {
            let answer = support::list_offset(client, v.list_offsets, topic, 0, -1);
            (answer.error_code == error_code::NONE && answer.offset >= offset).then_some(())
        },
    );
}

fn index_of(brokers: &[TestBroker], node_id: i32) -> usize {
    brokers.iter().position(|b| b.node_id() == node_id).unwrap()
}

/// Acceptance (issue 16): RF=3, `min.insync.replicas=2`, acks=all; the
/// leader is killed with SIGKILL and restarted, twice; every acknowledged
/// record is read back exactly once, the ISR returns to 3 each time, and
/// the replicas end byte-identical.
#[test]
fn a_killed_leader_loses_no_acknowledged_record_and_rejoins_the_isr() {
    let (mut brokers, _) = start_three_nodes_with(&FAST_SESSIONS);
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let v = versions(&mut clients[0]);
    let topic = create_rf3(&mut clients[0], "no-loss", "2");
    let mut leader = wait_for_isr(&mut clients[0], v.metadata, "no-loss", 3, None);
    let mut acknowledged: Vec<String> = Vec::new();
    for round in 0..3 {
        let at = index_of(&brokers, leader);
        for batch in 0..5 {
            let values: Vec<String> = (0..10).map(|i| format!("r{round}-b{batch}-{i}")).collect();
            let (error, base) = produce(&mut clients[at], v.produce, &topic, -1, &values);
            assert_eq!(error, error_code::NONE, "round {round} batch {batch}");
            assert_eq!(base, acknowledged.len() as i64, "contiguous offsets");
            acknowledged.extend(values);
        }
        if round == 2 {
            break;
        }
        brokers[at].kill9().expect("SIGKILL the leader");
        let survivor = (0..3).find(|&i| i != at).unwrap();
        let old = leader;
        leader = wait_for_isr(&mut clients[survivor], v.metadata, "no-loss", 2, Some(old));
        let new_at = index_of(&brokers, leader);
        // A new leader's high watermark moves once its ISR followers have
        // fetched from it (Kafka's rule): wait for it to cover every
        // acknowledged record.
        wait_for_high_watermark(&mut clients[new_at], &v, &topic, acknowledged.len() as i64);
        let stored = support::read_partition(&mut clients[new_at], v.fetch, &topic, 0);
        let values: Vec<String> = stored.values().cloned().collect();
        assert_eq!(
            values, acknowledged,
            "round {round}: the new leader {leader} holds every acknowledged record once"
        );
        brokers[at]
            .start_again()
            .expect("restarting the old leader");
        clients[at] = support::connect(&brokers[at]);
        wait_for_isr(&mut clients[new_at], v.metadata, "no-loss", 3, None);
    }
    let at = index_of(&brokers, leader);
    wait_for_high_watermark(&mut clients[at], &v, &topic, acknowledged.len() as i64);
    let stored: BTreeMap<i64, String> =
        support::read_partition(&mut clients[at], v.fetch, &topic, 0);
    assert_eq!(stored.into_values().collect::<Vec<_>>(), acknowledged);
    support::assert_replicas_identical(&brokers, "no-loss", 0);
}

/// Acks=all waits for the ISR: with `min.insync.replicas=3` and one
/// replica of three down, acks=all answers NOT_ENOUGH_REPLICAS and appends
/// nothing; an acks=1 record is appended but stays invisible (above the
/// high watermark) until the replica returns and the ISR covers it.
#[test]
fn min_isr_refuses_acks_all_and_hides_acks_1_records_until_the_isr_covers_them() {
    let (mut brokers, _) = start_three_nodes_with(&FAST_SESSIONS);
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let v = versions(&mut clients[0]);
    let topic = create_rf3(&mut clients[0], "strict", "3");
    let leader = wait_for_isr(&mut clients[0], v.metadata, "strict", 3, None);
    let at = index_of(&brokers, leader);
    let (error, _) = produce(&mut clients[at], v.produce, &topic, -1, &["kept".into()]);
    assert_eq!(error, error_code::NONE);

    let follower = (0..3).find(|&i| i != at).unwrap();
    brokers[follower].kill9().expect("SIGKILL a follower");
    wait_for_isr(&mut clients[at], v.metadata, "strict", 2, None);
    let end_before = support::list_offset(&mut clients[at], v.list_offsets, &topic, 0, -1).offset;
    let (error, _) = produce(&mut clients[at], v.produce, &topic, -1, &["refused".into()]);
    assert_eq!(error, NOT_ENOUGH_REPLICAS);
    let (error, base) = produce(&mut clients[at], v.produce, &topic, 1, &["hidden".into()]);
    assert_eq!(error, error_code::NONE);
    assert_eq!(base, end_before, "the refused record was not appended");
    let latest = support::list_offset(&mut clients[at], v.list_offsets, &topic, 0, -1).offset;
    assert_eq!(
        latest, end_before,
        "the acks=1 record is above the high watermark"
    );
    let visible = support::read_partition(&mut clients[at], v.fetch, &topic, 0);
    assert_eq!(visible.into_values().collect::<Vec<_>>(), ["kept"]);

    brokers[follower]
        .start_again()
        .expect("restarting the follower");
    wait_for_isr(&mut clients[at], v.metadata, "strict", 3, None);
    support::poll_until(
        Duration::from_secs(30),
        "the high watermark to cover the acks=1 record",
        || {
            let hw = support::list_offset(&mut clients[at], v.list_offsets, &topic, 0, -1).offset;
            (hw == end_before + 1).then_some(())
        },
    );
    let visible = support::read_partition(&mut clients[at], v.fetch, &topic, 0);
    assert_eq!(
        visible.into_values().collect::<Vec<_>>(),
        ["kept", "hidden"]
    );
    support::assert_replicas_identical(&brokers, "strict", 0);
}

/// Records produced with acks=all are on every replica, byte for byte
/// (followers append the leader's batches unchanged), and reading from a
/// follower is refused (only the leader serves consumers).
#[test]
fn followers_hold_the_leaders_batches_byte_for_byte() {
    let (brokers, _) = start_three_nodes_with(&FAST_SESSIONS);
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let v = versions(&mut clients[0]);
    let topic = create_rf3(&mut clients[0], "copies", "2");
    let leader = wait_for_isr(&mut clients[0], v.metadata, "copies", 3, None);
    let at = index_of(&brokers, leader);
    for batch in 0..20 {
        let values: Vec<String> = (0..5).map(|i| format!("b{batch}-{i}")).collect();
        let (error, base) = produce(&mut clients[at], v.produce, &topic, -1, &values);
        assert_eq!(error, error_code::NONE);
        assert_eq!(base, batch * 5);
    }
    let bytes = support::assert_replicas_identical(&brokers, "copies", 0);
    assert!(bytes.len() > 20 * 61, "20 batches stored");
    let follower = (0..3).find(|&i| i != at).unwrap();
    let mut spec = support::FetchSpec::one(v.fetch, 0, 0);
    spec.max_wait_ms = 0;
    let answer = support::fetch(&mut clients[follower], &topic, &spec);
    assert_eq!(
        answer[&0].error_code, 6,
        "NOT_LEADER_OR_FOLLOWER from a follower"
    );
}

/// A leader paused with SIGSTOP past its session timeout is fenced and
/// replaced; an acks=all produce it received while paused is not
/// acknowledged once it resumes (its followers fetch from the new leader,
/// so its high watermark cannot pass the write, and its new image makes it
/// a follower); the record is not in the partition, and the old leader
/// rejoins the ISR with a log identical to the others.
#[test]
fn a_paused_leader_acknowledges_nothing_after_the_new_epoch() {
    let (brokers, _) = start_three_nodes_with(&FAST_SESSIONS);
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let v = versions(&mut clients[0]);
    let topic = create_rf3(&mut clients[0], "paused", "2");
    let leader = wait_for_isr(&mut clients[0], v.metadata, "paused", 3, None);
    let at = index_of(&brokers, leader);
    let (error, _) = produce(&mut clients[at], v.produce, &topic, -1, &["before".into()]);
    assert_eq!(error, error_code::NONE);

    let mut to_paused = support::connect(&brokers[at]);
    support::pause(&brokers[at]);
    let produce_version = v.produce;
    let paused_topic = topic.clone();
    let during = std::thread::spawn(move || {
        produce(
            &mut to_paused,
            produce_version,
            &paused_topic,
            -1,
            &["during-pause".into()],
        )
        .0
    });
    let survivor = (0..3).find(|&i| i != at).unwrap();
    let new_leader = wait_for_isr(
        &mut clients[survivor],
        v.metadata,
        "paused",
        2,
        Some(leader),
    );
    let new_at = index_of(&brokers, new_leader);
    // The survivor's image may name the new leader before the new leader
    // has applied it: NOT_LEADER_OR_FOLLOWER (which appends nothing) is
    // retried, as clients do.
    support::poll_until(
        Duration::from_secs(30),
        "the new leader to take an acks=all write",
        || {
            let (error, _) = produce(
                &mut clients[new_at],
                v.produce,
                &topic,
                -1,
                &["after".into()],
            );
            match error {
                error_code::NONE => Some(()),
                NOT_LEADER_OR_FOLLOWER => None,
                other => panic!("the new leader answered {other}"),
            }
        },
    );
    support::resume(&brokers[at]);

    let answered = during.join().expect("the paused leader's produce");
    assert_ne!(
        answered,
        error_code::NONE,
        "the deposed leader acknowledged an acks=all write"
    );
    wait_for_isr(&mut clients[new_at], v.metadata, "paused", 3, None);
    wait_for_high_watermark(&mut clients[new_at], &v, &topic, 2);
    let stored = support::read_partition(&mut clients[new_at], v.fetch, &topic, 0);
    assert_eq!(
        stored.into_values().collect::<Vec<_>>(),
        ["before", "after"]
    );
    support::assert_replicas_identical(&brokers, "paused", 0);
}

/// A TCP proxy in front of one broker's REPLICATION listener that can cut
/// chosen followers off it: it reads each connection's first request
/// header, takes the follower's id from the client id
/// (`broker-<id>-fetcher-<n>`), and refuses the connections of a cut
/// follower (closing the open ones when it is cut).
struct FetchProxy {
    port: u16,
    cut: Arc<Mutex<BTreeSet<i32>>>,
    open: Arc<Mutex<Vec<(i32, TcpStream)>>>,
}

impl FetchProxy {
    fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let cut = Arc::new(Mutex::new(BTreeSet::new()));
        let open = Arc::new(Mutex::new(Vec::new()));
        let (c, o) = (cut.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (c, o) = (c.clone(), o.clone());
                std::thread::spawn(move || relay(client, target, &c, &o));
            }
        });
        FetchProxy { port, cut, open }
    }

    fn cut(&self, follower: i32) {
        self.cut.lock().unwrap().insert(follower);
        for (id, stream) in self.open.lock().unwrap().iter() {
            if *id == follower {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
    }

    fn heal(&self, follower: i32) {
        self.cut.lock().unwrap().remove(&follower);
    }
}

/// Relays one connection to `target` unless its client is cut off.
fn relay(
    mut client: TcpStream,
    target: u16,
    cut: &Mutex<BTreeSet<i32>>,
    open: &Mutex<Vec<(i32, TcpStream)>>,
) {
    let mut size = [0u8; 4];
    if client.read_exact(&mut size).is_err() {
        return;
    }
    let mut frame = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
    if frame.len() < 10 || client.read_exact(&mut frame).is_err() {
        return;
    }
    // Request header: api key, version, correlation id, then the client
    // id as an int16-length string (in header v1 and v2 alike).
    let id_len = i16::from_be_bytes([frame[8], frame[9]]).max(0) as usize;
    let client_id = String::from_utf8_lossy(frame.get(10..10 + id_len).unwrap_or_default());
    let follower: i32 = client_id
        .strip_prefix("broker-")
        .and_then(|rest| rest.split('-').next())
        .and_then(|id| id.parse().ok())
        .unwrap_or(-1);
    if cut.lock().unwrap().contains(&follower) {
        return;
    }
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", target)) else {
        return;
    };
    if server
        .write_all(&size)
        .and_then(|()| server.write_all(&frame))
        .is_err()
    {
        return;
    }
    open.lock()
        .unwrap()
        .push((follower, client.try_clone().expect("clone")));
    let (mut from_client, mut to_server) = (
        client.try_clone().expect("clone"),
        server.try_clone().expect("clone"),
    );
    let upstream = std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_client, &mut to_server);
        let _ = to_server.shutdown(Shutdown::Both);
    });
    let _ = std::io::copy(&mut server, &mut client);
    let _ = client.shutdown(Shutdown::Both);
    let _ = upstream.join();
}

/// A follower cut off from the leader (a proxy on the inter-broker
/// listener) leaves the ISR after `replica.lag.time.max.ms` and acks=all
/// writes go on with the other two; healed, it catches up and rejoins the
/// ISR, and no acknowledged record is lost.
#[test]
fn a_follower_cut_off_from_the_leader_leaves_the_isr_and_rejoins_after_healing() {
    let cluster_id = weir_storage::random_kafka_uuid();
    let controller_ports = three_free_ports();
    let replication_ports = three_free_ports();
    let proxies: Vec<FetchProxy> = replication_ports
        .iter()
        .map(|&p| FetchProxy::start(p))
        .collect();
    let voters = voters_of(&controller_ports);
    let starting: Vec<_> = (0..3)
        .map(|i| {
            let listeners = format!(
                "PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:{},CONTROLLER://127.0.0.1:{}",
                replication_ports[i], controller_ports[i]
            );
            let advertised = format!(
                "PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:{}",
                proxies[i].port
            );
            let (voters, cluster_id) = (voters.clone(), cluster_id.clone());
            std::thread::spawn(move || {
                let mut builder = TestBroker::builder()
                    .node_id(i as i32 + 1)
                    .format_cluster_id(&cluster_id)
                    .override_config("listeners", &listeners)
                    .override_config("advertised.listeners", &advertised)
                    .override_config("inter.broker.listener.name", "REPLICATION")
                    // A listener not named after a protocol needs its entry,
                    // as in Kafka.
                    .override_config(
                        "listener.security.protocol.map",
                        "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    )
                    .override_config("controller.quorum.voters", &voters)
                    .override_config("replica.lag.time.max.ms", "3000");
                for (key, value) in FAST_SESSIONS {
                    builder = builder.override_config(key, value);
                }
                builder.start()
            })
        })
        .collect();
    let brokers: Vec<TestBroker> = starting
        .into_iter()
        .map(|t| t.join().expect("starter").expect("starting weir"))
        .collect();
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let v = versions(&mut clients[0]);
    let topic = create_rf3(&mut clients[0], "cut", "2");
    let leader = wait_for_isr(&mut clients[0], v.metadata, "cut", 3, None);
    let at = index_of(&brokers, leader);
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    let mut acknowledged: Vec<String> = Vec::new();
    let mut produce_ok = |clients: &mut [RawClient], value: String| {
        let (error, _) = produce(
            &mut clients[at],
            v.produce,
            &topic,
            -1,
            std::slice::from_ref(&value),
        );
        assert_eq!(error, error_code::NONE, "{value}");
        acknowledged.push(value);
    };
    produce_ok(&mut clients, "before".into());

    proxies[at].cut(follower);
    // The first write waits for the cut follower until it leaves the ISR.
    produce_ok(&mut clients, "while-cut-1".into());
    support::poll_until(
        Duration::from_secs(30),
        "the cut follower to leave the ISR",
        || {
            let (partitions, _) = topic_state(&mut clients[at], v.metadata, "cut")?;
            let (_, _, isr, _) = partitions.first()?.clone();
            (isr.len() == 2 && !isr.contains(&follower)).then_some(())
        },
    );
    produce_ok(&mut clients, "while-cut-2".into());

    proxies[at].heal(follower);
    wait_for_isr(&mut clients[at], v.metadata, "cut", 3, None);
    produce_ok(&mut clients, "after".into());
    let stored = support::read_partition(&mut clients[at], v.fetch, &topic, 0);
    assert_eq!(stored.into_values().collect::<Vec<_>>(), acknowledged);
    support::assert_replicas_identical(&brokers, "cut", 0);
}
