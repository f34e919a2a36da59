//! Issue 19 point 6: a three-node cluster whose client, inter-broker and
//! controller traffic is all SASL_SSL, configured as a Kafka 4.x KRaft
//! cluster would be (only paths changed):
//!
//! ```text
//! listeners=SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:<port>
//! listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL
//! inter.broker.listener.name=SASL_SSL
//! sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
//! sasl.mechanism.controller.protocol=PLAIN
//! listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512
//! listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=...ScramLoginModule required username="admin" password="admin-secret";
//! listener.name.controller.sasl.enabled.mechanisms=PLAIN
//! listener.name.controller.plain.sasl.jaas.config=...PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";
//! ssl.keystore.type=PEM / ssl.keystore.location / ssl.truststore.type=PEM / ssl.truststore.location
//! authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
//! super.users=User:admin
//! ```
//!
//! with the SCRAM users seeded at format time (`weir format --add-scram`,
//! as `kafka-storage format --add-scram`). There is no PLAINTEXT listener:
//! followers can only replicate, and the controllers only elect, through
//! the secured listeners.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use weir_integration_tests::sasl::{self, ADMIN, ALICE};
use weir_integration_tests::tls::TestPki;
use weir_integration_tests::TestBroker;

use crate::cluster::{free_ports, voters_of};
use crate::support;

const SASL_SSL: &str = "SASL_SSL";

/// A cluster of SASL_SSL nodes being started: its id and every node's
/// keys (see the module doc).
struct SecuredCluster {
    cluster_id: String,
    config: Vec<(String, String)>,
}

impl SecuredCluster {
    /// Starts node `node_id` with `listeners` and `extra` keys, formatted
    /// with the cluster's id and SCRAM users.
    fn start_node(
        &self,
        node_id: i32,
        listeners: &str,
        extra: &[(&str, &str)],
    ) -> Result<TestBroker, weir_integration_tests::HarnessError> {
        let mut builder = TestBroker::builder()
            .node_id(node_id)
            .format_cluster_id(&self.cluster_id)
            .format_add_scram(&format!(
                "SCRAM-SHA-512=[name={},password={}]",
                ADMIN.0, ADMIN.1
            ))
            .format_add_scram(&format!(
                "SCRAM-SHA-512=[name={},password={}]",
                ALICE.0, ALICE.1
            ))
            .override_config("listeners", listeners);
        for (key, value) in &self.config {
            builder = builder.override_config(key, value);
        }
        for (key, value) in extra {
            builder = builder.override_config(key, value);
        }
        builder.start()
    }
}

/// Starts nodes 1..=3 of one cluster, every listener SASL_SSL (see the
/// module doc); returns them with their controller ports and the cluster.
fn start_sasl_ssl_cluster(
    pki: &TestPki,
) -> (Vec<TestBroker>, Vec<u16>, std::sync::Arc<SecuredCluster>) {
    let controller_ports = free_ports(3);
    let voters = voters_of(&controller_ports);
    let cluster_id = weir_storage::random_kafka_uuid();
    let mut config: Vec<(String, String)> = vec![
        (
            "listener.security.protocol.map".into(),
            "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL".into(),
        ),
        ("inter.broker.listener.name".into(), SASL_SSL.into()),
        ("controller.listener.names".into(), "CONTROLLER".into()),
        ("controller.quorum.voters".into(), voters),
        (
            "sasl.mechanism.inter.broker.protocol".into(),
            "SCRAM-SHA-512".into(),
        ),
        ("sasl.mechanism.controller.protocol".into(), "PLAIN".into()),
        (
            "listener.name.sasl_ssl.sasl.enabled.mechanisms".into(),
            "SCRAM-SHA-512".into(),
        ),
        (
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config".into(),
            sasl::scram_client_jaas_config(ADMIN.0, ADMIN.1),
        ),
        (
            "listener.name.controller.sasl.enabled.mechanisms".into(),
            "PLAIN".into(),
        ),
        (
            "listener.name.controller.plain.sasl.jaas.config".into(),
            sasl::plain_jaas_config(&[]),
        ),
        (
            "authorizer.class.name".into(),
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer".into(),
        ),
        ("super.users".into(), format!("User:{}", ADMIN.0)),
    ];
    config.extend(pki.broker_config());
    let cluster = std::sync::Arc::new(SecuredCluster { cluster_id, config });
    let starting: Vec<_> = controller_ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            let (cluster, port) = (cluster.clone(), *port);
            std::thread::spawn(move || {
                cluster.start_node(
                    i as i32 + 1,
                    &format!("SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}"),
                    &[],
                )
            })
        })
        .collect();
    let brokers = starting
        .into_iter()
        .map(|t| t.join().expect("starter thread").expect("starting weir"))
        .collect();
    (brokers, controller_ports, cluster)
}

/// kcat's options for SCRAM-SHA-512 over SASL_SSL as `user`.
fn kcat_options(pki: &TestPki, user: (&str, &str)) -> Vec<String> {
    [
        "security.protocol=sasl_ssl".to_owned(),
        "sasl.mechanisms=SCRAM-SHA-512".to_owned(),
        format!("sasl.username={}", user.0),
        format!("sasl.password={}", user.1),
        format!("ssl.ca.location={}", pki.ca().display()),
    ]
    .into_iter()
    .flat_map(|option| ["-X".to_owned(), option])
    .collect()
}

/// The leader of `topic` partition 0 by `kcat -L` through `bootstrap`,
/// once it is one of `candidates` and the ISR lists `isr` replicas.
fn leader_of(
    bootstrap: &str,
    options: &[String],
    topic: &str,
    candidates: &[i32],
    isr: usize,
) -> i32 {
    support::poll_until(
        Duration::from_secs(30),
        &format!("{topic}-0 led by one of {candidates:?} with {isr} in-sync replicas"),
        || {
            let mut args = vec!["-L", "-t", topic];
            args.extend(support::strs(options));
            let listed = support::kcat_output(bootstrap, &args, None).stdout_text();
            let line = listed.lines().find(|l| l.contains("partition 0,"))?;
            let leader: i32 = line
                .split("leader ")
                .nth(1)?
                .split(',')
                .next()?
                .trim()
                .parse()
                .ok()?;
            let isrs = line.split("isrs: ").nth(1)?.split(',').count();
            (candidates.contains(&leader) && isrs == isr).then_some(leader)
        },
    )
}

/// Every node of a cluster without a PLAINTEXT listener replicates and
/// elects through SASL_SSL: a broker-only node follows the quorum through
/// the controllers' SASL_SSL listener; a topic on nodes 1-3 created by
/// `kafka-topics` over SASL_SSL (SCRAM-SHA-512) gets every record on every
/// replica (byte-identical segments: the followers fetched over SASL_SSL
/// with SCRAM, authorized as the super user), the ISR holds all three;
/// after the leader is killed, the controllers (talking SASL_SSL with
/// PLAIN) elect another, which takes acks=all writes that both survivors
/// hold; a client reads all of them. A connection to a controller
/// listener that does not speak TLS is closed unanswered.
#[test]
fn three_nodes_replicate_and_elect_over_sasl_ssl_only() {
    let pki = TestPki::new().expect("test PKI");
    let (mut brokers, controller_ports, cluster) = start_sasl_ssl_cluster(&pki);
    let options = kcat_options(&pki, ADMIN);
    let bootstrap = brokers[0].bootstrap_for(SASL_SSL);

    let admin_properties = pki.dir().join("admin.properties");
    std::fs::write(
        &admin_properties,
        format!(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={}\nssl.truststore.type=PEM\nssl.truststore.location={}\n",
            sasl::scram_client_jaas_config(ADMIN.0, ADMIN.1),
            pki.ca().display()
        ),
    )
    .expect("writing admin.properties");
    let created = support::kafka_topics(
        &bootstrap,
        &[
            "--command-config",
            admin_properties.to_str().expect("UTF-8 path"),
            "--create",
            "--topic",
            "secured",
            "--replica-assignment",
            "1:2:3",
            "--config",
            "min.insync.replicas=2",
        ],
    );
    created.assert_success();
    assert!(
        created.stdout_text().contains("Created topic secured."),
        "{}",
        created.stdout_text()
    );

    // A broker-only node (no controller listener) follows the quorum as
    // an observer over SASL_SSL with PLAIN, registers, and serves the
    // topic's metadata.
    let observer = cluster
        .start_node(4, "SASL_SSL://127.0.0.1:0", &[("process.roles", "broker")])
        .expect("starting the broker-only node");
    leader_of(
        &observer.bootstrap_for(SASL_SSL),
        &options,
        "secured",
        &[1, 2, 3],
        3,
    );
    let mut args = vec!["-L", "-t", "secured"];
    args.extend(support::strs(&options));
    let listed = support::kcat(&observer.bootstrap_for(SASL_SSL), &args, None).stdout_text();
    assert!(listed.contains("broker 4 at"), "{listed}");

    let first = support::lines("before", 200);
    support::kcat_produce(&bootstrap, "secured", &first, &support::strs(&options));
    support::assert_replicas_identical(&brokers, "secured", 0);
    let leader = leader_of(&bootstrap, &options, "secured", &[1, 2, 3], 3);
    // The voters' controller listeners saw no faulty connection: a peer
    // dropping a TLS connection without close_notify is a close, and the
    // observer keeps one connection per voter (a warning per replaced
    // connection, several a second, filled the logs before).
    for broker in &brokers {
        let log = std::fs::read_to_string(broker.log_path()).expect("reading a node's log");
        let warnings: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("closing controller connection"))
            .collect();
        assert!(
            warnings.is_empty(),
            "node {}: {warnings:#?}",
            broker.node_id()
        );
    }

    // The leader dies; the quorum (two voters left, over SASL_SSL) moves
    // leadership to a survivor, which takes acks=all writes.
    let index = brokers
        .iter()
        .position(|b| b.node_id() == leader)
        .expect("the leader is a node");
    brokers[index].kill9().expect("killing the leader");
    let survivors: Vec<i32> = brokers
        .iter()
        .map(TestBroker::node_id)
        .filter(|id| *id != leader)
        .collect();
    let survivor = brokers
        .iter()
        .find(|b| b.node_id() != leader)
        .expect("a survivor");
    let bootstrap = survivor.bootstrap_for(SASL_SSL);
    leader_of(&bootstrap, &options, "secured", &survivors, 2);
    let second = support::lines("after", 100);
    support::kcat_produce(&bootstrap, "secured", &second, &support::strs(&options));

    let read = support::kcat_consume_with(
        &bootstrap,
        "secured",
        0,
        "beginning",
        &support::strs(&options),
    );
    let written: Vec<String> = first.iter().chain(&second).cloned().collect();
    assert_eq!(read, written);
    support::assert_replicas_identical(&brokers, "secured", 0);

    // The controller listener speaks TLS only: plain bytes get no answer.
    let port = controller_ports[brokers
        .iter()
        .position(|b| b.node_id() != leader)
        .unwrap_or(0)];
    let mut raw =
        TcpStream::connect(("127.0.0.1", port)).expect("connecting to a controller listener");
    raw.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    // A well-formed quorum frame (version 2, a Vote with a route): a
    // plaintext listener answers it (here: refused for its cluster id, as
    // hostile::cluster shows) with a frame starting "WQ".
    let mut body = b"WQ\x02\x02\0\0\0\x01".to_vec();
    body.extend_from_slice(
        br#"{"route":{"cluster_id":"x","source":1,"destination":null},"request":{"vote":{"leader_id":{"term":99,"voted_for":1},"committed":false},"last_log_id":null}}"#,
    );
    let mut quorum_frame = (body.len() as u32).to_be_bytes().to_vec();
    quorum_frame.extend_from_slice(&body);
    raw.write_all(&quorum_frame)
        .expect("writing a quorum frame");
    let mut answer = Vec::new();
    let _ = raw.read_to_end(&mut answer);
    assert!(
        !answer.windows(2).any(|w| w == b"WQ"),
        "a plaintext quorum frame was answered: {answer:?}"
    );
}
