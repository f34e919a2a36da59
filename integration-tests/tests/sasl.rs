//! SASL/PLAIN listeners (issue 19, second slice): a broker configured as
//! Kafka is,
//!
//! ```text
//! listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0
//! sasl.enabled.mechanisms=PLAIN
//! listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";
//! listener.name.sasl_ssl.plain.sasl.jaas.config=<the same>
//! ssl.keystore.*, ssl.truststore.* of a TestPki (SASL_SSL)
//! ```
//!
//! driven by a raw client through Kafka's SASL exchange (the states of
//! Kafka's `SaslServerAuthenticator`: before authentication only
//! ApiVersions, SaslHandshake and SaslAuthenticate are served, any refusal
//! closes the connection) and by kcat, confluent-kafka, kafka-python, the
//! Java client, KafkaJS and Kafka's own `kafka-topics`, each as alice.
//!
//! A client that bootstraps on a SASL listener must be sent that
//! listener's port by Metadata (and FindCoordinator for KafkaJS's group),
//! or its next connection goes to a port that speaks another protocol.

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, FetchRequest, MetadataRequest, MetadataResponse, ProduceRequest,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::records;
use weir_integration_tests::sasl::{self, ALICE};
use weir_integration_tests::tls::TestPki;
use weir_integration_tests::{RawClient, TestBroker};

use crate::support::{self, error_code, RoundTripScript};

/// The listener of SASL over plain TCP (Kafka's default
/// `listener.security.protocol.map` maps the name to SASL_PLAINTEXT).
const SASL_PLAINTEXT: &str = "SASL_PLAINTEXT";
/// The listener of SASL over TLS.
const SASL_SSL: &str = "SASL_SSL";

/// Kafka's UNSUPPORTED_SASL_MECHANISM.
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
/// Kafka's SASL_AUTHENTICATION_FAILED.
const SASL_AUTHENTICATION_FAILED: i16 = 58;
/// The message of Kafka's `PlainSaslServer` for a wrong password or an
/// unknown user (the same for both, so a client cannot tell which).
const INVALID_CREDENTIALS: &str = "Authentication failed: Invalid username or password";

/// A broker with `PLAINTEXT`, `SASL_PLAINTEXT` and `SASL_SSL` listeners
/// (in that order) that knows [`sasl::ADMIN`] and [`ALICE`], and the PKI
/// whose `ca.pem` SASL_SSL clients trust. Declare the PKI first so it
/// outlives the broker.
#[track_caller]
fn start_sasl_broker() -> (TestPki, TestBroker) {
    let pki = TestPki::new().expect("test PKI");
    let broker = TestBroker::builder()
        .sasl_plaintext_listener(&[ALICE])
        .sasl_ssl_listener(&pki, &[ALICE])
        .start()
        .expect("starting weir with SASL listeners");
    let names: Vec<&str> = broker
        .listener_ports()
        .iter()
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(
        names,
        ["PLAINTEXT", SASL_PLAINTEXT, SASL_SSL],
        "the ready line lists every listener"
    );
    (pki, broker)
}

/// A raw connection to the SASL_PLAINTEXT listener.
#[track_caller]
fn connect_sasl(broker: &TestBroker) -> RawClient {
    RawClient::connect(&broker.bootstrap_for(SASL_PLAINTEXT)).expect("connecting to SASL_PLAINTEXT")
}

/// SaslHandshake v1 (KIP-152: SaslAuthenticate requests follow) for
/// `mechanism`.
#[track_caller]
fn handshake(client: &mut RawClient, mechanism: &str) -> SaslHandshakeResponse {
    client
        .send(
            &SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_string(mechanism.to_owned())),
            1,
        )
        .unwrap_or_else(|e| panic!("SaslHandshake v1 {mechanism}: {e}"))
}

/// SaslAuthenticate at `version` with the PLAIN message of `user` and
/// `password` (no authorization id).
#[track_caller]
fn authenticate(
    client: &mut RawClient,
    version: i16,
    user: &str,
    password: &str,
) -> SaslAuthenticateResponse {
    authenticate_as(client, version, "", user, password)
}

/// SaslAuthenticate at `version` with the PLAIN message `authzid NUL user
/// NUL password`.
#[track_caller]
fn authenticate_as(
    client: &mut RawClient,
    version: i16,
    authzid: &str,
    user: &str,
    password: &str,
) -> SaslAuthenticateResponse {
    client
        .send(
            &SaslAuthenticateRequest::default()
                .with_auth_bytes(sasl::plain_auth_bytes(authzid, user, password)),
            version,
        )
        .unwrap_or_else(|e| panic!("SaslAuthenticate v{version} as {user}: {e}"))
}

/// Handshake PLAIN, then SaslAuthenticate at `version` as `user`, which
/// must succeed.
#[track_caller]
fn log_in(client: &mut RawClient, version: i16, (user, password): (&str, &str)) {
    let handshake = handshake(client, "PLAIN");
    assert_eq!(
        handshake.error_code,
        error_code::NONE,
        "SaslHandshake PLAIN"
    );
    let answer = authenticate(client, version, user, password);
    assert_eq!(
        answer.error_code,
        error_code::NONE,
        "SaslAuthenticate v{version} as {user} with the right password: {:?}",
        answer.error_message
    );
    // Kafka sends an empty string (the field's default); null is as good.
    assert_eq!(
        answer.error_message.as_deref().unwrap_or_default(),
        "",
        "no error message on success"
    );
    assert!(
        answer.auth_bytes.is_empty(),
        "PLAIN has no server message: {:?}",
        answer.auth_bytes
    );
}

/// Requires that the broker closes `client`'s connection without sending
/// anything more.
#[track_caller]
fn assert_closed_without_answer(client: &mut RawClient, after: &str) {
    let left = client
        .read_until_closed()
        .unwrap_or_else(|e| panic!("after {after} the broker must close the connection: {e}"));
    assert!(
        left.is_empty(),
        "after {after} the broker closes the connection without an answer, \
         but {} bytes came: {left:02x?}",
        left.len()
    );
}

/// The SaslAuthenticate versions both the broker and the crate speak,
/// which must be Kafka's 0 to 2.
#[track_caller]
fn sasl_authenticate_versions(client: &mut RawClient) -> Vec<i16> {
    let versions = support::api_versions(client);
    let common =
        support::common_versions::<SaslAuthenticateRequest>(&versions, ApiKey::SaslAuthenticate);
    assert_eq!(common, [0, 1, 2], "SaslAuthenticate versions served");
    common
}

/// A raw connection to the SASL_PLAINTEXT listener after ApiVersions and
/// a PLAIN handshake, which must succeed.
#[track_caller]
fn connect_and_handshake_plain(broker: &TestBroker) -> RawClient {
    let mut client = connect_sasl(broker);
    support::api_versions(&mut client);
    assert_eq!(
        handshake(&mut client, "PLAIN").error_code,
        error_code::NONE,
        "SaslHandshake PLAIN"
    );
    client
}

/// Requires that the broker is still running and that alice logs in
/// (ApiVersions, PLAIN handshake, SaslAuthenticate v2) on a new
/// SASL_PLAINTEXT connection.
#[track_caller]
fn assert_alice_still_logs_in(broker: &mut TestBroker) {
    support::assert_running(broker);
    let mut client = connect_sasl(broker);
    support::api_versions(&mut client);
    log_in(&mut client, 2, ALICE);
}

/// A raw client's ApiVersions v3 on the SASL_PLAINTEXT listener is
/// answered before any authentication, and advertises SaslHandshake v1
/// and SaslAuthenticate v0-2; the handshake that follows on the same
/// connection names PLAIN as the only enabled mechanism and alice logs in
/// (ApiVersions leaves the exchange where it was, as in Kafka).
#[test]
fn api_versions_is_answered_before_authentication_on_the_sasl_listener() {
    let (_pki, broker) = start_sasl_broker();
    let mut client = connect_sasl(&broker);
    let versions = support::api_versions(&mut client);
    let handshake_range =
        support::advertised(&versions, ApiKey::SaslHandshake).expect("SaslHandshake advertised");
    assert!(
        handshake_range.min_version <= 1 && handshake_range.max_version >= 1,
        "SaslHandshake v1 advertised: {handshake_range:?}"
    );
    assert_eq!(
        support::common_versions::<SaslAuthenticateRequest>(&versions, ApiKey::SaslAuthenticate),
        [0, 1, 2],
        "SaslAuthenticate v0-2 advertised"
    );

    let answer = handshake(&mut client, "PLAIN");
    assert_eq!(answer.error_code, error_code::NONE, "SaslHandshake PLAIN");
    let mechanisms: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
    assert_eq!(mechanisms, ["PLAIN"], "the enabled mechanisms");
    let authenticated = authenticate(&mut client, 2, ALICE.0, ALICE.1);
    assert_eq!(
        authenticated.error_code,
        error_code::NONE,
        "alice after ApiVersions and the handshake: {:?}",
        authenticated.error_message
    );
}

/// Before authentication a Metadata request (as the first request, and
/// after ApiVersions) and a CreateTopics after ApiVersions each close the
/// connection without an answer (Kafka: "Unexpected Kafka request of type
/// ... during SASL handshake"), and the CreateTopics did not create its
/// topic. The broker keeps serving: alice then logs in on a new
/// connection.
#[test]
fn a_request_other_than_the_sasl_ones_before_authentication_closes_the_connection_unanswered() {
    let (_pki, mut broker) = start_sasl_broker();
    let mut plain = support::connect(&broker);
    let versions = support::api_versions(&mut plain);
    let metadata_version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let metadata = MetadataRequest::default().with_topics(None);

    let mut first = connect_sasl(&broker);
    let header = first.header::<MetadataRequest>(metadata_version);
    first
        .write_request(header, &metadata)
        .expect("writing Metadata");
    assert_closed_without_answer(&mut first, "Metadata as the first request");

    let mut after_versions = connect_sasl(&broker);
    support::api_versions(&mut after_versions);
    let header = after_versions.header::<MetadataRequest>(metadata_version);
    after_versions
        .write_request(header, &metadata)
        .expect("writing Metadata");
    assert_closed_without_answer(&mut after_versions, "ApiVersions then Metadata");

    let topic = "sasl-unauthenticated-create";
    let create_version = support::newest::<CreateTopicsRequest>(&versions, ApiKey::CreateTopics);
    let mut creator = connect_sasl(&broker);
    support::api_versions(&mut creator);
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(topic)))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
    let header = creator.header::<CreateTopicsRequest>(create_version);
    creator
        .write_request(header, &create)
        .expect("writing CreateTopics");
    assert_closed_without_answer(&mut creator, "ApiVersions then CreateTopics");
    let listed: MetadataResponse = plain
        .send(
            &MetadataRequest::default()
                .with_topics(Some(vec![MetadataRequestTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_static_str(topic))))]))
                .with_allow_auto_topic_creation(false),
            metadata_version,
        )
        .expect("Metadata over PLAINTEXT");
    assert_eq!(
        listed.topics.first().map(|t| t.error_code),
        Some(error_code::UNKNOWN_TOPIC_OR_PARTITION),
        "an unauthenticated CreateTopics created nothing: {:?}",
        listed.topics
    );

    assert_alice_still_logs_in(&mut broker);
}

/// SaslHandshake v1 for SCRAM-SHA-256, which is not enabled, gets
/// UNSUPPORTED_SASL_MECHANISM (33) with the enabled list, `["PLAIN"]`,
/// and then the broker closes the connection.
#[test]
fn a_handshake_for_a_mechanism_not_enabled_gets_33_with_the_enabled_list_and_is_closed() {
    let (_pki, broker) = start_sasl_broker();
    let mut client = connect_sasl(&broker);
    support::api_versions(&mut client);
    let answer = handshake(&mut client, "SCRAM-SHA-256");
    assert_eq!(
        answer.error_code, UNSUPPORTED_SASL_MECHANISM,
        "SaslHandshake SCRAM-SHA-256"
    );
    let mechanisms: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
    assert_eq!(mechanisms, ["PLAIN"], "the enabled mechanisms");
    assert_closed_without_answer(&mut client, "UNSUPPORTED_SASL_MECHANISM");
}

/// After a PLAIN handshake, alice with a wrong password gets
/// SASL_AUTHENTICATION_FAILED (58) with Kafka's message, at each
/// SaslAuthenticate version, and each time the connection is closed.
#[test]
fn a_wrong_password_gets_58_with_kafkas_message_and_is_closed() {
    let (_pki, broker) = start_sasl_broker();
    let mut probe = connect_sasl(&broker);
    for version in sasl_authenticate_versions(&mut probe) {
        let mut client = connect_and_handshake_plain(&broker);
        let answer = authenticate(&mut client, version, ALICE.0, "not-alice-secret");
        assert_eq!(
            (answer.error_code, answer.error_message.as_deref()),
            (SASL_AUTHENTICATION_FAILED, Some(INVALID_CREDENTIALS)),
            "SaslAuthenticate v{version}, alice with a wrong password"
        );
        assert_closed_without_answer(
            &mut client,
            &format!("a wrong password at SaslAuthenticate v{version}"),
        );
    }
}

/// Credentials that name nobody or someone else are refused with
/// SASL_AUTHENTICATION_FAILED (58) and a closed connection: an unknown
/// user with alice's password (Kafka's same message as for a wrong
/// password), alice with an empty password, alice's credentials asking to
/// act as admin (an authorization id other than the user), and admin's
/// password for alice. After them alice still logs in.
#[test]
fn an_unknown_user_or_borrowed_credentials_get_58_and_are_closed() {
    let (_pki, mut broker) = start_sasl_broker();
    let refusals: [(&str, (&str, &str, &str)); 4] = [
        ("an unknown user", ("", "mallory", ALICE.1)),
        ("an empty password", ("", ALICE.0, "")),
        ("alice acting as admin", (sasl::ADMIN.0, ALICE.0, ALICE.1)),
        ("admin's password for alice", ("", ALICE.0, sasl::ADMIN.1)),
    ];
    for (what, (authzid, user, password)) in refusals {
        let mut client = connect_and_handshake_plain(&broker);
        let answer = authenticate_as(&mut client, 2, authzid, user, password);
        assert_eq!(
            answer.error_code, SASL_AUTHENTICATION_FAILED,
            "{what}: {:?}",
            answer.error_message
        );
        if user == "mallory" {
            assert_eq!(
                answer.error_message.as_deref(),
                Some(INVALID_CREDENTIALS),
                "{what}"
            );
        }
        assert_closed_without_answer(&mut client, what);
    }
    assert_alice_still_logs_in(&mut broker);
}

/// With the right password SaslAuthenticate answers NONE at v0, v1 and v2
/// (admin at v0, alice at v1 and v2), and then the connection serves
/// every API: Metadata names broker 1 at the SASL_PLAINTEXT port (the
/// request's listener) and never the PLAINTEXT one, and on the last
/// connection a topic is auto-created, a batch produced and read back
/// with Fetch.
#[test]
fn the_right_password_authenticates_and_the_connection_then_serves_every_api() {
    let (_pki, broker) = start_sasl_broker();
    let sasl_port = broker.listener_port(SASL_PLAINTEXT).expect("SASL port");
    let mut probe = connect_sasl(&broker);
    let authenticate_versions = sasl_authenticate_versions(&mut probe);
    let mut last = None;
    for version in authenticate_versions {
        let user = if version == 0 { sasl::ADMIN } else { ALICE };
        let mut client = connect_sasl(&broker);
        let versions = support::api_versions(&mut client);
        log_in(&mut client, version, user);
        let metadata_version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
        let metadata: MetadataResponse = client
            .send(
                &MetadataRequest::default().with_topics(None),
                metadata_version,
            )
            .unwrap_or_else(|e| {
                panic!("Metadata v{metadata_version} after SaslAuthenticate v{version}: {e}")
            });
        let brokers: Vec<(i32, String, i32)> = metadata
            .brokers
            .iter()
            .map(|b| (b.node_id.0, b.host.to_string(), b.port))
            .collect();
        assert_eq!(
            brokers,
            [(1, "127.0.0.1".to_owned(), i32::from(sasl_port))],
            "Metadata on SASL_PLAINTEXT names broker 1 at the SASL_PLAINTEXT port \
             (PLAINTEXT is {})",
            broker.port()
        );
        last = Some((client, versions));
    }

    let (mut client, versions) = last.expect("at least one SaslAuthenticate version");
    let topic = support::ensure_topic(&mut client, &versions, "sasl-raw-produce");
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let values = ["first over SASL", "second over SASL", "third over SASL"];
    let base = support::produce_ok(
        &mut client,
        produce_version,
        &topic,
        0,
        records::plain_batch(&values, 1_700_000_000_000),
    );
    assert_eq!(base, 0, "the first batch of a new topic");
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let stored: Vec<String> = support::read_partition(&mut client, fetch_version, &topic, 0)
        .into_values()
        .collect();
    assert_eq!(stored, values, "records read back over SASL_PLAINTEXT");
}

/// kcat's (librdkafka's) options for SASL/PLAIN as `user` with `password`
/// on a SASL_PLAINTEXT listener: `-X security.protocol=sasl_plaintext -X
/// sasl.mechanisms=PLAIN -X sasl.username=<user> -X
/// sasl.password=<password>`; with `ca` (SASL_SSL)
/// `security.protocol=sasl_ssl` and `-X ssl.ca.location=<ca.pem>`.
fn kcat_sasl(user: &str, password: &str, ca: Option<&TestPki>) -> Vec<String> {
    let protocol = if ca.is_some() {
        "sasl_ssl"
    } else {
        "sasl_plaintext"
    };
    let mut options = vec![
        format!("security.protocol={protocol}"),
        "sasl.mechanisms=PLAIN".to_owned(),
        format!("sasl.username={user}"),
        format!("sasl.password={password}"),
    ];
    if let Some(pki) = ca {
        options.push(format!("ssl.ca.location={}", pki.ca().display()));
    }
    options
        .into_iter()
        .flat_map(|option| ["-X".to_owned(), option])
        .collect()
}

/// kcat with SASL/PLAIN as alice over SASL_PLAINTEXT: 1,000 lines produced
/// and read back through the SASL listener, and the same records read
/// through PLAINTEXT (one log, two listeners).
#[test]
fn kcat_round_trips_1000_lines_over_sasl_plaintext_as_alice() {
    let (_pki, broker) = start_sasl_broker();
    let produced = support::kcat_round_trip(
        &broker,
        SASL_PLAINTEXT,
        "sasl-kcat",
        &kcat_sasl(ALICE.0, ALICE.1, None),
        1_000,
    );
    let plain = support::kcat_consume(&broker.bootstrap(), "sasl-kcat", 0, "beginning");
    assert!(
        plain == produced,
        "PLAINTEXT reads what SASL_PLAINTEXT wrote"
    );
}

/// kcat with a wrong password gets no metadata (`kcat -L` exits non-zero,
/// no broker listed, librdkafka reports the failed authentication); the
/// broker keeps running and alice then lists broker 1 at the
/// SASL_PLAINTEXT port.
#[test]
fn kcat_with_a_wrong_password_is_refused_and_the_broker_keeps_serving() {
    let (_pki, mut broker) = start_sasl_broker();
    support::assert_kcat_refused(
        &broker,
        SASL_PLAINTEXT,
        &kcat_sasl(ALICE.0, "not-alice-secret", None),
        "a wrong password",
        "the failed authentication",
        |stderr| stderr.contains("authentication"),
    );
    support::assert_running(&mut broker);
    support::assert_kcat_listed(&broker, SASL_PLAINTEXT, &kcat_sasl(ALICE.0, ALICE.1, None));
}

/// kcat with SASL/PLAIN over TLS (SASL_SSL, the broker's certificate
/// checked against `ca.pem` and the host): 1,000 lines produced and read
/// back, and broker 1 listed at the SASL_SSL port.
#[test]
fn kcat_round_trips_1000_lines_over_sasl_ssl_as_alice() {
    let (pki, broker) = start_sasl_broker();
    let options = kcat_sasl(ALICE.0, ALICE.1, Some(&pki));
    support::kcat_round_trip(&broker, SASL_SSL, "sasl-ssl-kcat", &options, 1_000);
    support::assert_kcat_listed(&broker, SASL_SSL, &options);
}

/// confluent-kafka (librdkafka) over SASL_SSL as alice: the admin client
/// creates a 3-partition topic, an idempotent producer writes 2,000
/// records and an assign() consumer reads them all back. Options:
/// `security.protocol=SASL_SSL`, `sasl.mechanism=PLAIN`, `sasl.username`,
/// `sasl.password`, `ssl.ca.location`.
#[test]
fn confluent_kafka_round_trips_over_sasl_ssl() {
    let (pki, broker) = start_sasl_broker();
    support::script_round_trip(
        RoundTripScript::Confluent,
        broker.bootstrap_for(SASL_SSL),
        "sasl-confluent",
        2000,
        &[
            "security.protocol=SASL_SSL".to_owned(),
            "sasl.mechanism=PLAIN".to_owned(),
            format!("sasl.username={}", ALICE.0),
            format!("sasl.password={}", ALICE.1),
            format!("ssl.ca.location={}", pki.ca().display()),
        ],
    );
}

/// kafka-python over SASL_PLAINTEXT as alice: admin-created 3-partition
/// topic, 2,000 records with acks=all, read back with assign(). Options:
/// `security_protocol=SASL_PLAINTEXT`, `sasl_mechanism=PLAIN`,
/// `sasl_plain_username`, `sasl_plain_password`.
#[test]
fn kafka_python_round_trips_over_sasl_plaintext() {
    let (_pki, broker) = start_sasl_broker();
    support::script_round_trip(
        RoundTripScript::KafkaPython,
        broker.bootstrap_for(SASL_PLAINTEXT),
        "sasl-kafka-python",
        2000,
        &[
            "security_protocol=SASL_PLAINTEXT".to_owned(),
            "sasl_mechanism=PLAIN".to_owned(),
            format!("sasl_plain_username={}", ALICE.0),
            format!("sasl_plain_password={}", ALICE.1),
        ],
    );
}

/// The Java client over SASL_SSL as alice, with the PEM truststore
/// (KIP-651): 2,000 records of 512 bytes with keys, headers and
/// timestamps, compared field by field when read back. Properties:
/// `security.protocol=SASL_SSL`, `sasl.mechanism=PLAIN`,
/// `sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule
/// required username="alice" password="alice-secret";` (one argument,
/// split from its key at the first `=`), `ssl.truststore.type=PEM`,
/// `ssl.truststore.location=<ca.pem>`.
#[test]
fn java_client_round_trips_over_sasl_ssl() {
    let (pki, broker) = start_sasl_broker();
    support::java_produce_consume(
        broker.bootstrap_for(SASL_SSL),
        "sasl-java",
        2000,
        &[
            "security.protocol=SASL_SSL".to_owned(),
            "sasl.mechanism=PLAIN".to_owned(),
            format!(
                "sasl.jaas.config={}",
                sasl::plain_client_jaas_config(ALICE.0, ALICE.1)
            ),
            "ssl.truststore.type=PEM".to_owned(),
            format!("ssl.truststore.location={}", pki.ca().display()),
        ],
    );
}

/// KafkaJS over SASL_PLAINTEXT as alice: admin-created 3-partition topic,
/// 2,000 records with acks=-1, read back by a consumer group (so
/// FindCoordinator over SASL_PLAINTEXT must name that port too). Options:
/// `sasl: { mechanism: 'plain', username, password }`, no TLS.
#[test]
fn kafkajs_round_trips_over_sasl_plaintext() {
    let (_pki, broker) = start_sasl_broker();
    support::script_round_trip(
        RoundTripScript::KafkaJs,
        broker.bootstrap_for(SASL_PLAINTEXT),
        "sasl-kafkajs",
        2000,
        &[
            "sasl.mechanism=plain".to_owned(),
            format!("sasl.username={}", ALICE.0),
            format!("sasl.password={}", ALICE.1),
        ],
    );
}

/// Writes a client properties file for Kafka's CLI tools
/// (`--command-config`) with SASL/PLAIN over SASL_PLAINTEXT as `user`.
#[track_caller]
fn write_client_properties(
    dir: &std::path::Path,
    name: &str,
    user: &str,
    password: &str,
) -> String {
    let path = dir.join(name);
    let text = format!(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={}\n",
        sasl::plain_client_jaas_config(user, password)
    );
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path.display().to_string()
}

/// Kafka's `kafka-topics` (TopicCommand, Java Admin client) over
/// SASL_PLAINTEXT with `--command-config client.properties`
/// (`security.protocol=SASL_PLAINTEXT`, `sasl.mechanism=PLAIN`,
/// `sasl.jaas.config=...PlainLoginModule required username="alice"
/// password="alice-secret";`): `--create` makes a 3-partition topic,
/// `--list` and `--describe` show it; with a wrong password `--list`
/// fails with the broker's message.
#[test]
fn kafka_topics_creates_and_lists_over_sasl_plaintext_with_a_command_config() {
    let (pki, broker) = start_sasl_broker();
    let bootstrap = broker.bootstrap_for(SASL_PLAINTEXT);
    let alice = write_client_properties(pki.dir(), "alice.properties", ALICE.0, ALICE.1);
    let topic = "sasl-cli";
    support::kafka_topics(
        &bootstrap,
        &[
            "--command-config",
            &alice,
            "--create",
            "--topic",
            topic,
            "--partitions",
            "3",
            "--replication-factor",
            "1",
        ],
    )
    .assert_success();
    let list = support::kafka_topics(&bootstrap, &["--command-config", &alice, "--list"]);
    list.assert_success();
    let listed = list.stdout_text();
    assert!(
        listed.lines().any(|l| l.trim() == topic),
        "--list over SASL_PLAINTEXT shows {topic}:\n{listed}"
    );
    let describe = support::kafka_topics(
        &bootstrap,
        &["--command-config", &alice, "--describe", "--topic", topic],
    );
    describe.assert_success();
    let described = describe.stdout_text();
    assert!(described.contains("PartitionCount: 3"), "{described}");

    let wrong = write_client_properties(pki.dir(), "wrong.properties", ALICE.0, "not-alice-secret");
    let refused = support::kafka_topics(&bootstrap, &["--command-config", &wrong, "--list"]);
    let everything = format!("{}\n{}", refused.stdout_text(), refused.stderr);
    assert!(
        !refused.status.success(),
        "kafka-topics with a wrong password fails:\n{everything}"
    );
    assert!(
        everything.contains(INVALID_CREDENTIALS),
        "kafka-topics reports the broker's message:\n{everything}"
    );
}

/// KIP-368 with `connections.max.reauth.ms=3000`: SaslAuthenticate v2
/// tells alice her session lasts 3,000 ms; on the same connection she
/// re-authenticates (SaslHandshake, SaslAuthenticate) and Metadata is
/// still served; a re-authentication as admin is refused with Kafka's
/// "Cannot change principals" and closes the connection; and a connection
/// that does not re-authenticate is closed at its first request after the
/// session expires (polled until then, within a deadline).
#[test]
fn sessions_re_authenticate_and_expire_with_connections_max_reauth_ms() {
    let broker = TestBroker::builder()
        .sasl_plaintext_listener(&[ALICE])
        .config("connections.max.reauth.ms", "3000")
        .start()
        .expect("starting weir with connections.max.reauth.ms");
    let metadata = |client: &mut RawClient| {
        client.send(
            &kafka_protocol::messages::MetadataRequest::default().with_topics(Some(vec![])),
            9,
        )
    };

    let mut client = connect_and_handshake_plain(&broker);
    let answer = authenticate(&mut client, 2, ALICE.0, ALICE.1);
    assert_eq!(
        (answer.error_code, answer.session_lifetime_ms),
        (error_code::NONE, 3000)
    );
    let before_reauthentication = std::time::Instant::now();
    log_in(&mut client, 2, ALICE);
    metadata(&mut client).expect("Metadata after re-authentication");

    let mut other = connect_and_handshake_plain(&broker);
    log_in_plain_ok(&mut other);
    assert_eq!(handshake(&mut other, "PLAIN").error_code, error_code::NONE);
    let as_admin = authenticate(&mut other, 2, sasl::ADMIN.0, sasl::ADMIN.1);
    assert_eq!(as_admin.error_code, SASL_AUTHENTICATION_FAILED);
    assert_eq!(
        as_admin.error_message.as_deref(),
        Some("Cannot change principals during re-authentication from User:alice: User:admin")
    );
    assert_closed_without_answer(&mut other, "a re-authentication as another user");

    // No re-authentication: the first request after the session's end
    // closes the connection.
    support::poll_until(
        std::time::Duration::from_secs(30),
        "the expired session's connection to close",
        || metadata(&mut client).is_err().then_some(()),
    );
    assert!(
        before_reauthentication.elapsed() >= std::time::Duration::from_millis(3000),
        "closed only once the re-authenticated session's 3,000 ms are over"
    );
}

/// Authenticates a fresh PLAIN connection as alice (SaslAuthenticate v2)
/// after [`connect_and_handshake_plain`].
#[track_caller]
fn log_in_plain_ok(client: &mut RawClient) {
    let answer = authenticate(client, 2, ALICE.0, ALICE.1);
    assert_eq!(
        answer.error_code,
        error_code::NONE,
        "{:?}",
        answer.error_message
    );
}

/// KIP-368 with the Java client (kafka-clients): with
/// `connections.max.reauth.ms=3000` a producer that keeps sending for 8
/// seconds on its SASL_PLAINTEXT connection re-authenticates on it by
/// itself before each session ends (its `successful-reauthentication-total`
/// metric counts at least one: the client starts at 85-95% of the 3,000 ms
/// the broker announced), every send is acknowledged, and the broker never
/// closes a connection for an expired session.
#[test]
fn the_java_client_re_authenticates_by_itself_before_its_session_ends() {
    let broker = TestBroker::builder()
        .sasl_plaintext_listener(&[ALICE])
        .config("connections.max.reauth.ms", "3000")
        .start()
        .expect("starting weir with connections.max.reauth.ms");
    let mut java =
        weir_integration_tests::clients::java_client_tool().expect("Java client harness");
    java.args([
        "reauth-produce".to_owned(),
        broker.bootstrap_for(SASL_PLAINTEXT),
        "reauth-java".to_owned(),
        "8".to_owned(),
        "security.protocol=SASL_PLAINTEXT".to_owned(),
        "sasl.mechanism=PLAIN".to_owned(),
        format!(
            "sasl.jaas.config={}",
            sasl::plain_client_jaas_config(ALICE.0, ALICE.1)
        ),
    ]);
    let output = weir_integration_tests::clients::run(java, None, support::CLIENT_TIMEOUT)
        .expect("java reauth-produce");
    output.assert_success();
    let stdout = output.stdout_text();
    let count = |label: &str| -> u64 {
        stdout
            .lines()
            .find_map(|line| line.strip_prefix(label))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no '{label}' line in:\n{stdout}"))
    };
    assert!(count("produced ") > 0, "{stdout}");
    assert!(count("reauthenticated ") >= 1, "{stdout}");
    let log = std::fs::read_to_string(broker.log_path()).expect("the broker's log");
    assert!(
        !log.contains("the SASL session expired"),
        "a session expired:\n{log}"
    );
}
