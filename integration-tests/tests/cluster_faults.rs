//! Faults of a 3-node metadata quorum with real `weir` processes: kill -9
//! of the active controller while topics are being created, a network
//! partition (a fault-injecting TCP proxy on every directed pair of voters)
//! that isolates the active controller and then heals, and a voter list
//! that names a node of another cluster. Both assert what
//! Raft (and KRaft) promise: every acknowledged change survives, no two
//! nodes commit conflicting images, and every node ends with the same
//! topics and names the same active controller.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::{HarnessError, RawClient};

use crate::cluster::{
    agreed_controller, free_ports, start_nodes_with_voters, start_three_nodes,
    start_three_nodes_with, three_free_ports, FAST_SESSIONS,
};
use crate::support::{self, error_code};

const TOPIC_ALREADY_EXISTS: i16 = 36;
const NOT_CONTROLLER: i16 = 41;

/// Sends CreateTopics for one 1-partition RF=1 topic `name` with the
/// server-side `timeout_ms`; `Err` on connection errors.
fn try_create(
    client: &mut RawClient,
    version: i16,
    name: &str,
    timeout_ms: i32,
) -> Result<CreateTopicsResponse, HarnessError> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(timeout_ms)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
    client.send(&request, version)
}

/// Every topic `client`'s node lists in an all-topics Metadata, or `None`
/// when the node does not answer.
fn listed_topics(client: &mut RawClient, version: i16) -> Option<BTreeSet<String>> {
    let request = MetadataRequest::default()
        .with_topics(None)
        .with_allow_auto_topic_creation(false);
    let response: MetadataResponse = client.send(&request, version).ok()?;
    Some(
        response
            .topics
            .iter()
            .filter(|t| t.error_code == error_code::NONE)
            .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
            .collect(),
    )
}

/// Polls until every node in `clients` lists the same topics, including
/// every one of `expected`, and returns that set.
fn agreed_topics(
    clients: &mut [RawClient],
    version: i16,
    expected: &BTreeSet<String>,
) -> BTreeSet<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let last: Vec<Option<BTreeSet<String>>> = clients
            .iter_mut()
            .map(|c| listed_topics(c, version))
            .collect();
        if let Some(Some(first)) = last.first() {
            if expected.is_subset(first) && last.iter().all(|s| s.as_ref() == Some(first)) {
                return first.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "every node lists the same topics including {expected:?}; they list {last:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What the creator thread saw.
#[derive(Debug, Default)]
struct Created {
    /// Topics whose CreateTopics answered NONE (or TOPIC_ALREADY_EXISTS on a
    /// retry: committed by an earlier attempt).
    acknowledged: BTreeSet<String>,
    /// Acknowledged through each node id.
    through: BTreeMap<i32, usize>,
    /// Answers other than NONE, NOT_CONTROLLER, REQUEST_TIMED_OUT, or
    /// TOPIC_ALREADY_EXISTS on a retry.
    unexpected: Vec<String>,
}

#[test]
fn killing_the_active_controller_while_topics_are_created_loses_no_acknowledged_topic() {
    let (mut brokers, _) = start_three_nodes_with(&FAST_SESSIONS);
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut clients[0]);
    let metadata = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let create = support::newest::<CreateTopicsRequest>(&versions, ApiKey::CreateTopics);
    let victim = agreed_controller(&mut clients, metadata, None);
    let victim_index = brokers.iter().position(|b| b.node_id() == victim).unwrap();

    // (node id, bootstrap) of every node, updated when the victim restarts.
    let nodes: Arc<Mutex<Vec<(i32, String)>>> = Arc::new(Mutex::new(
        brokers
            .iter()
            .map(|b| (b.node_id(), b.bootstrap()))
            .collect(),
    ));
    let acknowledged_count = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let creator = {
        let (nodes, count, stop) = (nodes.clone(), acknowledged_count.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut created = Created::default();
            let mut connections: BTreeMap<String, RawClient> = BTreeMap::new();
            let mut next_node = 0usize;
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                let name = format!("created-{n:04}");
                n += 1;
                // Retries through the next node until answered, for at most 20 s.
                let give_up = Instant::now() + Duration::from_secs(20);
                let mut attempts = 0;
                while Instant::now() < give_up && !stop.load(Ordering::SeqCst) {
                    let (id, addr) = {
                        let nodes = nodes.lock().unwrap();
                        nodes[next_node % nodes.len()].clone()
                    };
                    next_node += 1;
                    attempts += 1;
                    let answer = match connections.entry(addr.clone()) {
                        std::collections::btree_map::Entry::Occupied(e) => Ok(e.into_mut()),
                        std::collections::btree_map::Entry::Vacant(v) => {
                            RawClient::connect(&addr).map(|c| v.insert(c))
                        }
                    }
                    .and_then(|c| try_create(c, create, &name, 5_000));
                    let (code, message) = match answer {
                        Ok(response) => (
                            response.topics[0].error_code,
                            response.topics[0].error_message.clone(),
                        ),
                        Err(_) => {
                            // Killed node or broken connection: reconnect later.
                            connections.remove(&addr);
                            std::thread::sleep(Duration::from_millis(50));
                            continue;
                        }
                    };
                    match code {
                        error_code::NONE => {}
                        TOPIC_ALREADY_EXISTS if attempts > 1 => {}
                        NOT_CONTROLLER | error_code::REQUEST_TIMED_OUT => {
                            std::thread::sleep(Duration::from_millis(50));
                            continue;
                        }
                        other => {
                            created.unexpected.push(format!(
                                "{name} through node {id}: error {other} {message:?}"
                            ));
                            break;
                        }
                    }
                    created.acknowledged.insert(name.clone());
                    *created.through.entry(id).or_default() += 1;
                    count.fetch_add(1, Ordering::SeqCst);
                    break;
                }
            }
            created
        })
    };

    let wait_for_more = |more: usize, what: &str| {
        let target = acknowledged_count.load(Ordering::SeqCst) + more;
        support::poll_until(Duration::from_secs(20), what, || {
            (acknowledged_count.load(Ordering::SeqCst) >= target).then_some(())
        });
    };
    wait_for_more(6, "topics acknowledged before the kill");
    brokers[victim_index]
        .kill9()
        .expect("kill -9 the active controller");
    let mut survivors: Vec<RawClient> = (0..3)
        .filter(|&i| i != victim_index)
        .map(|i| support::connect(&brokers[i]))
        .collect();
    let successor = agreed_controller(&mut survivors, metadata, Some(victim));
    wait_for_more(6, "topics acknowledged by the survivors");

    brokers[victim_index]
        .start_again()
        .expect("restarting the killed controller");
    nodes.lock().unwrap()[victim_index].1 = brokers[victim_index].bootstrap();
    wait_for_more(6, "topics acknowledged after the restart");
    stop.store(true, Ordering::SeqCst);
    let created = creator.join().expect("creator thread");
    eprintln!(
        "kill -9 of controller {victim} (successor {successor}): {} topics acknowledged, by node {:?}",
        created.acknowledged.len(),
        created.through
    );
    assert!(created.unexpected.is_empty(), "{:?}", created.unexpected);
    assert!(
        created.through.get(&victim).copied().unwrap_or(0) > 0,
        "some topics were created through the victim: {:?}",
        created.through
    );

    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let topics = agreed_topics(&mut clients, metadata, &created.acknowledged);
    assert!(
        topics.iter().all(|t| t.starts_with("created-")),
        "{topics:?}"
    );
    agreed_controller(&mut clients, metadata, None);
}

/// A TCP forwarder from a port on 127.0.0.1 to `target` that can cut its
/// connections and refuse new ones (closed right after accept) until healed.
struct FaultProxy {
    port: u16,
    cut: Arc<AtomicBool>,
    closing: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<TcpStream>>>,
}

impl FaultProxy {
    fn start(target: u16) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding a proxy port");
        let port = listener.local_addr().unwrap().port();
        let proxy = FaultProxy {
            port,
            cut: Arc::default(),
            closing: Arc::default(),
            connections: Arc::default(),
        };
        let (cut, closing, connections) = (
            proxy.cut.clone(),
            proxy.closing.clone(),
            proxy.connections.clone(),
        );
        std::thread::spawn(move || {
            for incoming in listener.incoming() {
                if closing.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = incoming else { continue };
                if cut.load(Ordering::SeqCst) {
                    continue; // dropped: the connection is closed at once
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let mut tracked = connections.lock().unwrap();
                for stream in [&client, &server] {
                    if let Ok(clone) = stream.try_clone() {
                        tracked.push(clone);
                    }
                }
                drop(tracked);
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
                        continue;
                    };
                    std::thread::spawn(move || {
                        let mut buffer = [0u8; 16 * 1024];
                        loop {
                            match from.read(&mut buffer) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => {
                                    if to.write_all(&buffer[..n]).is_err() {
                                        break;
                                    }
                                }
                            }
                        }
                        let _ = from.shutdown(Shutdown::Both);
                        let _ = to.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        proxy
    }

    /// Closes every forwarded connection and refuses new ones.
    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for stream in self.connections.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Forwards new connections again.
    fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.closing.store(true, Ordering::SeqCst);
        self.cut();
        // Wakes the accept loop so that it sees `closing`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Creates `name` through `client`, retrying NOT_CONTROLLER and
/// REQUEST_TIMED_OUT (an election may be under way) until acknowledged.
fn create_retrying(client: &mut RawClient, version: i16, name: &str) {
    let mut attempts = 0;
    support::poll_until(
        Duration::from_secs(20),
        &format!("CreateTopics {name} acknowledged"),
        || {
            attempts += 1;
            let code = try_create(client, version, name, 5_000)
                .expect("CreateTopics")
                .topics[0]
                .error_code;
            match code {
                error_code::NONE => Some(()),
                TOPIC_ALREADY_EXISTS if attempts > 1 => Some(()),
                NOT_CONTROLLER | error_code::REQUEST_TIMED_OUT => None,
                other => panic!("CreateTopics {name}: error {other}"),
            }
        },
    );
}

#[test]
fn an_isolated_active_controller_commits_nothing_and_rejoins_as_a_follower_after_healing() {
    let controller_ports = three_free_ports();
    // proxies[&(i, j)]: how node i reaches node j (ids 1..=3).
    let mut proxies: BTreeMap<(i32, i32), FaultProxy> = BTreeMap::new();
    for i in 1..=3 {
        for j in (1..=3).filter(|&j| j != i) {
            proxies.insert((i, j), FaultProxy::start(controller_ports[j as usize - 1]));
        }
    }
    let voters: Vec<String> = (1..=3)
        .map(|i| {
            (1..=3)
                .map(|j| {
                    let port = if i == j {
                        controller_ports[j as usize - 1]
                    } else {
                        proxies[&(i, j)].port
                    };
                    format!("{j}@127.0.0.1:{port}")
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    let brokers = start_nodes_with_voters(
        &weir_storage::random_kafka_uuid(),
        &controller_ports,
        &voters,
        &FAST_SESSIONS,
    );
    let mut clients: Vec<RawClient> = brokers.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut clients[0]);
    let metadata = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let create = support::newest::<CreateTopicsRequest>(&versions, ApiKey::CreateTopics);
    let isolated = agreed_controller(&mut clients, metadata, None);
    create_retrying(&mut clients[0], create, "before");
    agreed_topics(
        &mut clients,
        metadata,
        &BTreeSet::from(["before".to_owned()]),
    );

    for (&(i, j), proxy) in &proxies {
        if i == isolated || j == isolated {
            proxy.cut();
        }
    }
    let isolated_index = (isolated - 1) as usize;
    let mut isolated_client = clients.remove(isolated_index);
    let mut majority = clients;

    // The majority elects a new active controller and takes commands.
    let successor = agreed_controller(&mut majority, metadata, Some(isolated));
    create_retrying(&mut majority[0], create, "during-isolation");
    agreed_topics(
        &mut majority,
        metadata,
        &BTreeSet::from(["before".to_owned(), "during-isolation".to_owned()]),
    );

    // The isolated node cannot commit: its CreateTopics is not acknowledged
    // and its image keeps only what was committed before the partition.
    // Its answer can take up to twice the controller's 10 s forward timeout
    // (a queued heartbeat's commit, then this one's), whatever timeout_ms.
    isolated_client
        .set_read_timeout(Duration::from_secs(25))
        .unwrap();
    let sent = Instant::now();
    let answer = try_create(&mut isolated_client, create, "from-isolated", 3_000);
    if let Ok(response) = &answer {
        eprintln!(
            "the isolated node answered CreateTopics (timeout_ms 3000) with error {} after {} ms",
            response.topics[0].error_code,
            sent.elapsed().as_millis()
        );
    }
    match &answer {
        Ok(response) => assert_ne!(
            response.topics[0].error_code,
            error_code::NONE,
            "an isolated controller acknowledged a topic"
        ),
        Err(e) => panic!("the isolated node did not answer CreateTopics: {e}"),
    }
    assert_eq!(
        listed_topics(&mut isolated_client, metadata),
        Some(BTreeSet::from(["before".to_owned()])),
        "the isolated node's topics"
    );

    for proxy in proxies.values() {
        proxy.heal();
    }
    let mut clients = majority;
    clients.insert(isolated_index, isolated_client);
    // It rejoins as a follower (its log lacks the majority's commits, so it
    // cannot win an election) and catches up.
    let after = agreed_controller(&mut clients, metadata, Some(isolated));
    let topics = agreed_topics(
        &mut clients,
        metadata,
        &BTreeSet::from(["before".to_owned(), "during-isolation".to_owned()]),
    );
    assert!(
        !topics.contains("from-isolated"),
        "a topic the isolated controller could not commit exists: {topics:?}"
    );
    eprintln!("isolated controller {isolated}; successor {successor}; after healing {after}");
}

/// Regression (CI, 2026-12-05): one test's voter dialled a port that
/// another test's cluster had taken, that cluster's node 1 handled the
/// foreign leader's Vote and AppendEntries as its own quorum's, and its
/// raft engine panicked (`assertion failed: self.leader.is_none()`); with
/// release assertions off it would have appended the foreign log. Here
/// cluster A (nodes 1 and 2) names cluster B's node 3 as its voter 3: B's
/// node 3 refuses A's requests (Kafka's INCONSISTENT_CLUSTER_ID), A's
/// leader logs the refusal, both clusters keep committing, and neither
/// takes the other's topics.
#[test]
fn a_voter_list_naming_a_node_of_another_cluster_is_refused_there_and_changes_nothing() {
    let (b_nodes, b_ports) = start_three_nodes();
    let mut b_clients: Vec<RawClient> = b_nodes.iter().map(support::connect).collect();
    let versions = support::api_versions(&mut b_clients[0]);
    let metadata = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let create = support::newest::<CreateTopicsRequest>(&versions, ApiKey::CreateTopics);
    create_retrying(&mut b_clients[0], create, "b-before");
    agreed_topics(&mut b_clients, metadata, &names(&["b-before"]));

    let a_ports = free_ports(2);
    let a_voters = format!(
        "1@127.0.0.1:{},2@127.0.0.1:{},3@127.0.0.1:{}",
        a_ports[0], a_ports[1], b_ports[2]
    );
    let a_nodes = start_nodes_with_voters(
        &weir_storage::random_kafka_uuid(),
        &a_ports,
        &vec![a_voters; 2],
        &[],
    );
    let mut a_clients: Vec<RawClient> = a_nodes.iter().map(support::connect).collect();
    create_retrying(&mut a_clients[0], create, "a-topic");
    let a_topics = agreed_topics(&mut a_clients, metadata, &names(&["a-topic"]));

    // A's leader replicates to its voter 3, which is B's node 3.
    let b3_log = b_nodes[2].log_path().to_path_buf();
    support::poll_until(
        Duration::from_secs(15),
        "B's node 3 to refuse a request of cluster A",
        || {
            let log = std::fs::read_to_string(&b3_log).ok()?;
            log.lines()
                .any(|l| {
                    l.contains("refusing a metadata quorum request")
                        && l.contains("inconsistent cluster id")
                })
                .then_some(())
        },
    );
    support::poll_until(
        Duration::from_secs(15),
        "a node of A to log that its request was refused",
        || {
            a_nodes
                .iter()
                .any(|n| {
                    std::fs::read_to_string(n.log_path()).is_ok_and(|log| {
                        log.contains("a node refused this node's metadata quorum request")
                    })
                })
                .then_some(())
        },
    );

    // B's node 3 still follows B's own active controller.
    agreed_controller(&mut b_clients, metadata, None);
    create_retrying(&mut b_clients[0], create, "b-after");
    let b_expected = names(&["b-before", "b-after"]);
    let b_topics = agreed_topics(&mut b_clients, metadata, &b_expected);
    assert_eq!(b_topics, b_expected, "cluster B's topics");
    create_retrying(&mut a_clients[0], create, "a-after");
    let a_expected = names(&["a-topic", "a-after"]);
    let a_after = agreed_topics(&mut a_clients, metadata, &a_expected);
    assert_eq!(a_topics, names(&["a-topic"]), "cluster A's topics");
    assert_eq!(a_after, a_expected, "cluster A's topics");
}

/// `names` as a set of owned topic names.
fn names(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|&n| n.to_owned()).collect()
}
