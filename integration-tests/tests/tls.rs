//! TLS listeners (issue 19, first slice): a broker with
//! `listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0`, a PEM keystore and
//! truststore from a [`TestPki`] made at run time, and `ssl.client.auth`
//! (broker-wide or per listener, as Kafka spells them), driven by kcat
//! (librdkafka on OpenSSL), confluent-kafka, kafka-python, the Java client
//! and KafkaJS, and by a plain TCP client that knocks on the SSL port.
//!
//! Every client checks the broker's certificate against `ca.pem` and the
//! host `127.0.0.1` (the certificate's IP SAN); a client that bootstraps on
//! the SSL listener must be sent the SSL port by Metadata (and
//! FindCoordinator for KafkaJS's group), or its next connection fails.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, RequestHeader};
use kafka_protocol::protocol::{Encodable, StrBytes};
use weir_integration_tests::tls::{ClientIdentity, TestPki};
use weir_integration_tests::TestBroker;

use crate::support::{self, RoundTripScript};

/// The name of the TLS listener (Kafka's default
/// `listener.security.protocol.map` maps it to SSL).
const SSL: &str = "SSL";

/// Starts a broker with PLAINTEXT and SSL listeners on `pki` plus `config`.
#[track_caller]
fn start_ssl_broker(pki: &TestPki, config: &[(&str, &str)]) -> TestBroker {
    let mut builder = TestBroker::builder().ssl_listener(pki);
    for (key, value) in config {
        builder = builder.config(key, value);
    }
    let broker = builder.start().expect("starting weir with an SSL listener");
    assert_ne!(
        broker.listener_port(SSL),
        Some(broker.port()),
        "SSL and PLAINTEXT listen on different ports: {:?}",
        broker.listener_ports()
    );
    broker
}

/// kcat's (librdkafka's) options for the SSL listener:
/// `-X security.protocol=ssl -X ssl.ca.location=<ca.pem>`, and with a
/// client identity `-X ssl.certificate.location=<crt> -X
/// ssl.key.location=<key>`. `ssl.endpoint.identification.algorithm`
/// stays at librdkafka's default, `https` (the host is checked).
fn kcat_ssl(pki: &TestPki, client: Option<&ClientIdentity>) -> Vec<String> {
    let mut options = vec![
        "-X".to_owned(),
        "security.protocol=ssl".to_owned(),
        "-X".to_owned(),
        format!("ssl.ca.location={}", pki.ca().display()),
    ];
    if let Some(client) = client {
        options.extend([
            "-X".to_owned(),
            format!("ssl.certificate.location={}", client.crt.display()),
            "-X".to_owned(),
            format!("ssl.key.location={}", client.key.display()),
        ]);
    }
    options
}

/// Requires that `kcat -L` on the SSL listener with `options` got no
/// metadata because the TLS handshake was refused: a non-zero exit, no
/// broker listed, and librdkafka's log naming the SSL failure.
#[track_caller]
fn assert_refused(broker: &TestBroker, options: &[String], who: &str) {
    support::assert_kcat_refused(
        broker,
        SSL,
        options,
        who,
        "an SSL handshake failure or alert",
        |stderr| {
            stderr.contains("ssl") && (stderr.contains("handshake") || stderr.contains("alert"))
        },
    );
}

/// kcat over SSL with only the CA (`ssl.client.auth` at its default,
/// `none`): 1,000 lines produced and read back through the SSL listener,
/// and the same records are read through PLAINTEXT (one log, two
/// listeners).
#[test]
fn kcat_round_trips_over_ssl_without_a_client_certificate() {
    let pki = TestPki::new().expect("test PKI");
    let broker = start_ssl_broker(&pki, &[]);
    let produced = support::kcat_round_trip(&broker, SSL, "tls-kcat", &kcat_ssl(&pki, None), 1_000);
    let plain = support::kcat_consume(&broker.bootstrap(), "tls-kcat", 0, "beginning");
    assert!(plain == produced, "PLAINTEXT reads what SSL wrote");
}

/// `ssl.client.auth=required`: kcat with the trusted client certificate and
/// key (mutual TLS) produces 1,000 lines and reads them back.
#[test]
fn kcat_round_trips_with_a_trusted_client_certificate_when_client_auth_is_required() {
    let pki = TestPki::new().expect("test PKI");
    let broker = start_ssl_broker(&pki, &[("ssl.client.auth", "required")]);
    support::kcat_round_trip(
        &broker,
        SSL,
        "tls-kcat-mtls",
        &kcat_ssl(&pki, Some(&pki.client())),
        1_000,
    );
}

/// `ssl.principal.mapping.rules` (KIP-371) name the principal of a client
/// certificate from its RFC 2253 subject (`CN=client-1,OU=test,O=weir`):
/// with a rule that matches it, kcat with the certificate lists the broker;
/// with rules none of which matches, the connection closes after the
/// handshake (Kafka's "Failed to map name ... based on SSL principal
/// mapping rules"), and the broker keeps serving.
#[test]
fn ssl_principal_mapping_rules_apply_to_the_certificate_subject() {
    let pki = TestPki::new().expect("test PKI");
    let client = kcat_ssl(&pki, Some(&pki.client()));
    let matching = start_ssl_broker(
        &pki,
        &[
            ("ssl.client.auth", "required"),
            (
                "ssl.principal.mapping.rules",
                "RULE:^CN=(.*?),OU=test,O=weir$/$1/L,RULE:^CN=other$/x/",
            ),
        ],
    );
    support::assert_kcat_listed(&matching, SSL, &client);

    let mut unmatched = start_ssl_broker(
        &pki,
        &[
            ("ssl.client.auth", "required"),
            ("ssl.principal.mapping.rules", "RULE:^CN=other,.*$/$1/"),
        ],
    );
    support::assert_kcat_refused(
        &unmatched,
        SSL,
        &client,
        "a certificate no mapping rule applies to",
        "the connection closed after the handshake",
        |stderr| stderr.contains("disconnect") || stderr.contains("transport failure"),
    );
    support::assert_running(&mut unmatched);
}

/// `ssl.client.auth=required`: no client certificate, a certificate from
/// an untrusted CA (same names as the trusted one) and an expired
/// certificate of the trusted CA are each refused at the handshake; the
/// broker keeps running and a trusted client still lists and round-trips.
#[test]
fn required_client_auth_refuses_missing_untrusted_and_expired_certificates() {
    let pki = TestPki::new().expect("test PKI");
    let mut broker = start_ssl_broker(&pki, &[("ssl.client.auth", "required")]);
    assert_refused(&broker, &kcat_ssl(&pki, None), "no client certificate");
    assert_refused(
        &broker,
        &kcat_ssl(&pki, Some(&pki.rogue_client())),
        "a certificate signed by the rogue CA",
    );
    assert_refused(
        &broker,
        &kcat_ssl(&pki, Some(&pki.expired_client())),
        "an expired certificate",
    );
    support::assert_running(&mut broker);
    let good = kcat_ssl(&pki, Some(&pki.client()));
    support::assert_kcat_listed(&broker, SSL, &good);
    support::kcat_round_trip(&broker, SSL, "tls-after-refusals", &good, 100);
}

/// `ssl.client.auth=requested`: a client without a certificate and one with
/// the trusted certificate are both served; a certificate that does not
/// verify is still refused (as Kafka's `want` client auth).
#[test]
fn requested_client_auth_serves_clients_with_or_without_a_certificate_but_not_a_bad_one() {
    let pki = TestPki::new().expect("test PKI");
    let mut broker = start_ssl_broker(&pki, &[("ssl.client.auth", "requested")]);
    support::kcat_round_trip(
        &broker,
        SSL,
        "tls-requested-none",
        &kcat_ssl(&pki, None),
        100,
    );
    support::kcat_round_trip(
        &broker,
        SSL,
        "tls-requested-cert",
        &kcat_ssl(&pki, Some(&pki.client())),
        100,
    );
    assert_refused(
        &broker,
        &kcat_ssl(&pki, Some(&pki.rogue_client())),
        "a certificate signed by the rogue CA",
    );
    support::assert_running(&mut broker);
}

/// `listener.name.ssl.ssl.client.auth=required` overrides the broker-wide
/// `ssl.client.auth=none` for the SSL listener (Kafka's per-listener
/// prefix, lowercase listener name): without a certificate kcat is
/// refused, with the trusted one it is served.
#[test]
fn the_per_listener_client_auth_overrides_the_broker_wide_setting() {
    let pki = TestPki::new().expect("test PKI");
    let broker = start_ssl_broker(
        &pki,
        &[
            ("ssl.client.auth", "none"),
            ("listener.name.ssl.ssl.client.auth", "required"),
        ],
    );
    assert_refused(&broker, &kcat_ssl(&pki, None), "no client certificate");
    support::assert_kcat_listed(&broker, SSL, &kcat_ssl(&pki, Some(&pki.client())));
}

/// Metadata asked on the SSL listener names the broker's SSL endpoint and
/// never its PLAINTEXT port; asked on PLAINTEXT it names the PLAINTEXT one
/// (Kafka answers with the endpoints of the listener the request came in
/// on).
#[test]
fn metadata_over_ssl_lists_the_ssl_port_and_over_plaintext_the_plaintext_port() {
    let pki = TestPki::new().expect("test PKI");
    let broker = start_ssl_broker(&pki, &[]);
    let ssl_port = broker.listener_port(SSL).expect("SSL port");
    let plain_port = broker.port();
    let output = support::kcat_list(&broker, SSL, &kcat_ssl(&pki, None));
    output.assert_success();
    let listing = output.stdout_text();
    assert!(
        listing.contains(&format!("broker 1 at 127.0.0.1:{ssl_port}")),
        "kcat -L over SSL lists broker 1 at the SSL port {ssl_port}:\n{listing}"
    );
    assert!(
        !listing.contains(&format!("127.0.0.1:{plain_port}")),
        "kcat -L over SSL does not list the PLAINTEXT port {plain_port}:\n{listing}"
    );
    let plain = support::kcat(&broker.bootstrap(), &["-L"], None).stdout_text();
    assert!(
        plain.contains(&format!("broker 1 at 127.0.0.1:{plain_port}")),
        "kcat -L over PLAINTEXT lists broker 1 at the PLAINTEXT port {plain_port}:\n{plain}"
    );
    assert!(
        !plain.contains(&format!("127.0.0.1:{ssl_port}")),
        "kcat -L over PLAINTEXT does not list the SSL port {ssl_port}:\n{plain}"
    );
}

/// A Kafka request in clear text (ApiVersions v0) sent to the SSL port
/// gets no Kafka answer: at most a TLS alert record comes back and the
/// broker closes the connection. PLAINTEXT still answers afterwards.
#[test]
fn a_plaintext_request_to_the_ssl_port_gets_no_kafka_answer_and_is_closed() {
    let pki = TestPki::new().expect("test PKI");
    let mut broker = start_ssl_broker(&pki, &[]);
    let correlation_id = 7;
    let mut frame = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::ApiVersions as i16)
        .with_request_api_version(0)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("weir-itest")))
        .encode(&mut frame, 1)
        .expect("request header v1");
    ApiVersionsRequest::default()
        .encode(&mut frame, 0)
        .expect("ApiVersions v0");
    let mut request = BytesMut::new();
    request.put_u32(u32::try_from(frame.len()).expect("small frame"));
    request.put_slice(&frame);

    let mut stream = TcpStream::connect(broker.bootstrap_for(SSL)).expect("connecting to SSL");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    stream.write_all(&request).expect("writing the request");
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) => {}
        Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {}
        Err(e) => panic!(
            "the SSL listener left a clear-text client's connection open for 30 s ({e}); \
             read so far: {answer:02x?}"
        ),
    }
    let kafka_answer = answer.len() >= 8
        && u32::from_be_bytes(answer[0..4].try_into().unwrap()) as usize == answer.len() - 4
        && i32::from_be_bytes(answer[4..8].try_into().unwrap()) == correlation_id;
    assert!(
        !kafka_answer,
        "a Kafka response came back over TLS's port: {answer:02x?}"
    );
    assert!(
        answer.is_empty() || answer[0] == 0x15,
        "only a TLS alert record (content type 21) may come back: {answer:02x?}"
    );

    support::assert_running(&mut broker);
    let mut client = support::connect(&broker);
    support::api_versions(&mut client);
}

/// Both listeners keep their ports across a graceful restart, and records
/// written over SSL before it are read over SSL after it.
#[test]
fn every_listener_keeps_its_port_across_a_restart() {
    let pki = TestPki::new().expect("test PKI");
    let mut broker = start_ssl_broker(&pki, &[]);
    let before = broker.listener_ports().to_vec();
    let names: Vec<&str> = before.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        ["PLAINTEXT", SSL],
        "the ready line lists both listeners"
    );
    let options = kcat_ssl(&pki, None);
    let produced = support::lines("tls-restart", 50);
    support::kcat_produce(
        &broker.bootstrap_for(SSL),
        "tls-restart",
        &produced,
        &support::strs(&options),
    );
    broker.restart().expect("restarting weir");
    assert_eq!(broker.listener_ports(), before, "ports after the restart");
    let consumed = support::kcat_consume_with(
        &broker.bootstrap_for(SSL),
        "tls-restart",
        0,
        "beginning",
        &support::strs(&options),
    );
    assert!(
        consumed == produced,
        "records written before the restart, read over SSL after it"
    );
}

/// confluent-kafka (librdkafka) with mutual TLS (`ssl.client.auth=required`):
/// the admin client creates a 3-partition topic, an idempotent producer
/// writes 2,000 records and an assign() consumer reads them all back, every
/// connection over SSL. Options: `security.protocol=SSL`,
/// `ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`.
#[test]
fn confluent_kafka_round_trips_over_mutual_tls() {
    let pki = TestPki::new().expect("test PKI");
    let broker = start_ssl_broker(&pki, &[("ssl.client.auth", "required")]);
    let client = pki.client();
    support::script_round_trip(
        RoundTripScript::Confluent,
        broker.bootstrap_for(SSL),
        "tls-confluent",
        2000,
        &[
            "security.protocol=SSL".to_owned(),
            format!("ssl.ca.location={}", pki.ca().display()),
            format!("ssl.certificate.location={}", client.crt.display()),
            format!("ssl.key.location={}", client.key.display()),
        ],
    );
}

/// kafka-python (Python's ssl module) with mutual TLS
/// (`ssl.client.auth=required`): admin-created 3-partition topic, 2,000
/// records with acks=all, read back with assign(). Options:
/// `security_protocol=SSL`, `ssl_cafile`, `ssl_certfile`, `ssl_keyfile`
/// (`ssl_check_hostname` at its default, true).
///
/// kafka-python closes a connection that turns readable while it has no
/// request in flight ("Socket EVENT_READ without in-flight-requests"), and
/// from its second connection on it sends nothing before it is asked to.
/// So TLS 1.3 NewSessionTicket messages sent right after the handshake
/// (rustls sends two by default) break every connection but the bootstrap
/// one; Kafka's JDK sends its one ticket about 15 ms later, after
/// kafka-python's first request, and kafka-python works with it.
#[test]
fn kafka_python_round_trips_over_mutual_tls() {
    let pki = TestPki::new().expect("test PKI");
    let broker = start_ssl_broker(&pki, &[("ssl.client.auth", "required")]);
    let client = pki.client();
    support::script_round_trip(
        RoundTripScript::KafkaPython,
        broker.bootstrap_for(SSL),
        "tls-kafka-python",
        2000,
        &[
            "security_protocol=SSL".to_owned(),
            format!("ssl_cafile={}", pki.ca().display()),
            format!("ssl_certfile={}", client.crt.display()),
            format!("ssl_keyfile={}", client.key.display()),
        ],
    );
}

/// The Java client with PEM stores (KIP-651) and mutual TLS
/// (`ssl.client.auth=required`): 5,000 records of 512 bytes with keys,
/// headers and timestamps, compared field by field when read back.
/// Properties: `security.protocol=SSL`, `ssl.truststore.type=PEM`,
/// `ssl.truststore.location=<ca.pem>`, `ssl.keystore.type=PEM`,
/// `ssl.keystore.location=<client.pem>` (key and chain);
/// `ssl.endpoint.identification.algorithm` at its default, `https`.
#[test]
fn java_client_round_trips_over_mutual_tls_with_pem_stores() {
    let pki = TestPki::new().expect("test PKI");
    let broker = start_ssl_broker(&pki, &[("ssl.client.auth", "required")]);
    support::java_produce_consume(
        broker.bootstrap_for(SSL),
        "tls-java",
        5000,
        &[
            "security.protocol=SSL".to_owned(),
            "ssl.truststore.type=PEM".to_owned(),
            format!("ssl.truststore.location={}", pki.ca().display()),
            "ssl.keystore.type=PEM".to_owned(),
            format!("ssl.keystore.location={}", pki.client().pem.display()),
        ],
    );
}

/// KafkaJS (Node's tls) with mutual TLS (`ssl.client.auth=required`):
/// admin-created 3-partition topic, 2,000 records with acks=-1, read back
/// by a consumer group (so FindCoordinator over SSL must name the SSL
/// port too). Options: `ssl: { ca: [ca.pem], cert: client.crt, key:
/// client.key }` (rejectUnauthorized true).
#[test]
fn kafkajs_round_trips_over_mutual_tls() {
    let pki = TestPki::new().expect("test PKI");
    let broker = start_ssl_broker(&pki, &[("ssl.client.auth", "required")]);
    let client = pki.client();
    support::script_round_trip(
        RoundTripScript::KafkaJs,
        broker.bootstrap_for(SSL),
        "tls-kafkajs",
        2000,
        &[
            format!("ssl.ca={}", pki.ca().display()),
            format!("ssl.cert={}", client.crt.display()),
            format!("ssl.key={}", client.key.display()),
        ],
    );
}

/// Server-authenticated TLS (no client certificate, `ssl.client.auth` at
/// its default, none) with every client library the tests drive, one after
/// another on one broker: confluent-kafka, kafka-python and KafkaJS each
/// create a 3-partition topic and round-trip 2,000 records, the Java
/// client 2,000 records of 512 bytes compared field by field. Each trusts
/// only the test CA (`ssl.ca.location`, `ssl_cafile`, `ssl.ca`, a PEM
/// truststore) and checks the broker's name.
#[test]
fn every_client_round_trips_over_tls_without_a_client_certificate() {
    let pki = TestPki::new().expect("test PKI");
    let broker = start_ssl_broker(&pki, &[]);
    let ca = pki.ca().display().to_string();
    support::script_round_trip(
        RoundTripScript::Confluent,
        broker.bootstrap_for(SSL),
        "tls1-confluent",
        2000,
        &[
            "security.protocol=SSL".to_owned(),
            format!("ssl.ca.location={ca}"),
        ],
    );
    support::script_round_trip(
        RoundTripScript::KafkaPython,
        broker.bootstrap_for(SSL),
        "tls1-kafka-python",
        2000,
        &[
            "security_protocol=SSL".to_owned(),
            format!("ssl_cafile={ca}"),
        ],
    );
    support::script_round_trip(
        RoundTripScript::KafkaJs,
        broker.bootstrap_for(SSL),
        "tls1-kafkajs",
        2000,
        &[format!("ssl.ca={ca}")],
    );
    support::java_produce_consume(
        broker.bootstrap_for(SSL),
        "tls1-java",
        2000,
        &[
            "security.protocol=SSL".to_owned(),
            "ssl.truststore.type=PEM".to_owned(),
            format!("ssl.truststore.location={ca}"),
        ],
    );
}

/// Certificate renewal without a restart (issue 19, KIP-226's keystore
/// update, by file): the SSL listener's keystore file is overwritten with
/// a certificate from another CA for the same names; within the broker's
/// store check (every 10 s) new connections get it (kcat trusting only the
/// new CA lists the broker, one trusting only the old CA is refused), and
/// the broker logs the reload.
#[test]
fn a_renewed_keystore_file_is_served_to_new_connections_without_a_restart() {
    let pki = TestPki::new().expect("test PKI");
    let broker = start_ssl_broker(&pki, &[]);
    support::assert_kcat_listed(&broker, SSL, &kcat_ssl(&pki, None));
    // The old CA, kept before its files are overwritten.
    let old = TestPki::new().expect("a second PKI");
    std::fs::copy(pki.ca(), old.ca()).expect("keeping the old CA");

    let renewed = TestPki::new().expect("the renewed PKI");
    // Written next to it, then renamed over it, as certificate tools do.
    let staged = pki.dir().join("server.pem.new");
    std::fs::copy(renewed.server().pem, &staged).expect("staging the renewed keystore");
    std::fs::rename(&staged, pki.server().pem).expect("replacing the keystore");
    support::poll_until(
        Duration::from_secs(60),
        "kcat trusting only the renewed CA lists the broker",
        || {
            support::kcat_list(&broker, SSL, &kcat_ssl(&renewed, None))
                .status
                .success()
                .then_some(())
        },
    );
    support::assert_kcat_listed(&broker, SSL, &kcat_ssl(&renewed, None));
    assert_refused(
        &broker,
        &kcat_ssl(&old, None),
        "a client trusting only the old CA",
    );
    let log = std::fs::read_to_string(broker.log_path()).expect("the broker's log");
    assert!(
        log.contains("reloaded the listener's TLS keystore and truststore"),
        "{log}"
    );
}

/// KIP-226's keystore update as Kafka users run it: `kafka-configs
/// --entity-type brokers --entity-name 1 --alter --add-config
/// listener.name.ssl.ssl.keystore.location=<the same path>` after the file
/// was replaced makes the listener serve the new certificate when the
/// command returns; a file that does not load is refused with Kafka's
/// "Validation of dynamic config update of SSLFactory failed" and the
/// served certificate stays; another path is refused.
#[test]
fn kafka_configs_setting_the_same_keystore_path_reloads_it_now() {
    let pki = TestPki::new().expect("test PKI");
    let broker = start_ssl_broker(&pki, &[]);
    let keystore = pki.server().pem.display().to_string();
    let alter = |value: &str| {
        support::kafka_configs(
            &broker.bootstrap(),
            &[
                "--entity-type",
                "brokers",
                "--entity-name",
                "1",
                "--alter",
                "--add-config",
                &format!("listener.name.ssl.ssl.keystore.location={value}"),
            ],
        )
    };

    // Not loadable: refused, the listener keeps serving the first one.
    let original = std::fs::read(&keystore).expect("the keystore");
    std::fs::write(&keystore, "-----BEGIN PRIVATE KEY-----\n").expect("breaking the keystore");
    let refused = alter(&keystore);
    assert!(!refused.status.success(), "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("Validation of dynamic config update of SSLFactory failed"),
        "{}",
        refused.stderr
    );
    support::assert_kcat_listed(&broker, SSL, &kcat_ssl(&pki, None));
    std::fs::write(&keystore, &original).expect("restoring the keystore");

    let old = TestPki::new().expect("a second PKI");
    std::fs::copy(pki.ca(), old.ca()).expect("keeping the old CA");
    let renewed = TestPki::new().expect("the renewed PKI");
    std::fs::copy(renewed.server().pem, &keystore).expect("replacing the keystore");
    let reloaded = alter(&keystore);
    reloaded.assert_success();
    assert!(
        reloaded
            .stdout_text()
            .contains("Completed updating config for broker 1."),
        "{}",
        reloaded.stdout_text()
    );
    support::assert_kcat_listed(&broker, SSL, &kcat_ssl(&renewed, None));
    assert_refused(
        &broker,
        &kcat_ssl(&old, None),
        "a client trusting only the old CA",
    );

    let moved = alter(&renewed.server().pem.display().to_string());
    assert!(!moved.status.success(), "{moved:?}");
    assert!(
        moved.stderr.contains(
            "Cannot update listener.name.ssl.ssl.keystore.location dynamically to another value"
        ),
        "{}",
        moved.stderr
    );
}
