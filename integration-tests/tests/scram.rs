//! SASL/SCRAM (KIP-84, issue 19): a broker configured as Kafka is,
//!
//! ```text
//! listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0
//! sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
//! listener.name.sasl_plaintext.plain.sasl.jaas.config=<PlainLoginModule, users admin and alice>
//! listener.name.sasl_ssl.plain.sasl.jaas.config=<the same>
//! listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
//! ssl.keystore.*, ssl.truststore.* of a TestPki (SASL_SSL)
//! ```
//!
//! (SASL_SSL has the optional SCRAM JAAS entry, SASL_PLAINTEXT has none),
//! whose SCRAM users live in the metadata log: Kafka's own `kafka-configs`
//! (DescribeUserScramCredentials and AlterUserScramCredentials through
//! PLAINTEXT) adds, describes and deletes them, and kcat,
//! confluent-kafka, kafka-python, the Java client and KafkaJS then log in
//! as alice with SCRAM-SHA-512. A wrong password, a user without a
//! credential and a deleted credential are refused with Kafka's message.
//!
//! kcat is the distribution's (Debian 12: librdkafka 2.0.2), whose SCRAM
//! client-final message repeats the client nonce (librdkafka#4895, fixed
//! in 2.6.1): Weir accepts that form as Kafka 3.8.1 to 3.9 do, so these
//! tests also show that such clients log in.

use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    ApiKey, DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::sasl::{self, ALICE};
use weir_integration_tests::tls::TestPki;
use weir_integration_tests::TestBroker;

use crate::support::{self, error_code, RoundTripScript};

/// The listener of SASL over plain TCP.
const SASL_PLAINTEXT: &str = "SASL_PLAINTEXT";
/// The listener of SASL over TLS.
const SASL_SSL: &str = "SASL_SSL";

/// Kafka's RESOURCE_NOT_FOUND (a user without SCRAM credentials).
const RESOURCE_NOT_FOUND: i16 = 91;

/// A broker with `PLAINTEXT`, `SASL_PLAINTEXT` and `SASL_SSL` listeners
/// (in that order), `sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512`,
/// PLAIN users [`sasl::ADMIN`] and [`ALICE`], the optional SCRAM-SHA-512
/// JAAS entry on SASL_SSL only, and no SCRAM user yet; with the PKI whose
/// `ca.pem` SASL_SSL clients trust. Declare the PKI first so it outlives
/// the broker.
#[track_caller]
fn start_scram_broker() -> (TestPki, TestBroker) {
    let pki = TestPki::new().expect("test PKI");
    let broker = TestBroker::builder()
        .sasl_mechanisms(&["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
        .sasl_plaintext_listener(&[ALICE])
        .sasl_ssl_listener(&pki, &[ALICE])
        .config(
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config",
            &sasl::scram_jaas_config(),
        )
        .start()
        .expect("starting weir with SCRAM on its SASL listeners");
    (pki, broker)
}

/// `kafka-configs --alter --add-config <config> --entity-type users
/// --entity-name <user>` through PLAINTEXT, which must print that it
/// updated the user. `config` as Kafka spells it, such as
/// `SCRAM-SHA-512=[iterations=8192,password=alice-secret]`.
#[track_caller]
fn add_scram(broker: &TestBroker, user: &str, config: &str) {
    alter_user(broker, user, "--add-config", config);
}

/// `kafka-configs --alter --delete-config <mechanism> --entity-type users
/// --entity-name <user>` through PLAINTEXT, which must print that it
/// updated the user.
#[track_caller]
fn delete_scram(broker: &TestBroker, user: &str, mechanism: &str) {
    alter_user(broker, user, "--delete-config", mechanism);
}

/// `kafka-configs --alter <action> <value> --entity-type users
/// --entity-name <user>` through PLAINTEXT; requires exit 0 and Kafka's
/// "Completed updating config for user <user>." line.
#[track_caller]
fn alter_user(broker: &TestBroker, user: &str, action: &str, value: &str) {
    let output = support::kafka_configs(
        &broker.bootstrap(),
        &[
            "--alter",
            action,
            value,
            "--entity-type",
            "users",
            "--entity-name",
            user,
        ],
    );
    output.assert_success();
    let printed = output.stdout_text();
    let expected = format!("Completed updating config for user {user}.");
    assert!(
        printed.lines().any(|l| l == expected),
        "kafka-configs {action} {value} for {user}:\n{printed}"
    );
}

/// Alice's SCRAM-SHA-512 credential with 8,192 iterations and her password
/// [`ALICE`], added with `kafka-configs`.
#[track_caller]
fn add_alice_scram_sha_512(broker: &TestBroker) {
    add_scram(
        broker,
        ALICE.0,
        &format!("SCRAM-SHA-512=[iterations=8192,password={}]", ALICE.1),
    );
}

/// `kafka-configs --describe --entity-type users [--entity-name <user>]`
/// through PLAINTEXT; requires exit 0 and returns its stdout lines.
#[track_caller]
fn describe_users(broker: &TestBroker, user: Option<&str>) -> Vec<String> {
    let mut args = vec!["--describe", "--entity-type", "users"];
    if let Some(user) = user {
        args.extend(["--entity-name", user]);
    }
    let output = support::kafka_configs(&broker.bootstrap(), &args);
    output.assert_success();
    output.stdout_text().lines().map(str::to_owned).collect()
}

/// A user's SCRAM credentials as `(mechanism, iterations)`, or the error
/// code and message of the user's result.
type ScramDescription = Result<Vec<(&'static str, i32)>, (i16, Option<String>)>;

/// `user`'s SCRAM credentials as a raw DescribeUserScramCredentials (the
/// newest version both sides speak) through PLAINTEXT answers them:
/// `(mechanism, iterations)` with Kafka's mechanism names, or the error
/// code and message of the user's result.
#[track_caller]
fn scram_credentials(broker: &TestBroker, user: &str) -> ScramDescription {
    let mut client = support::connect(broker);
    let versions = support::api_versions(&mut client);
    let version = support::newest::<DescribeUserScramCredentialsRequest>(
        &versions,
        ApiKey::DescribeUserScramCredentials,
    );
    let response: DescribeUserScramCredentialsResponse = client
        .send(
            &DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                UserName::default().with_name(StrBytes::from_string(user.to_owned())),
            ])),
            version,
        )
        .unwrap_or_else(|e| panic!("DescribeUserScramCredentials v{version}: {e}"));
    assert_eq!(
        response.error_code,
        error_code::NONE,
        "DescribeUserScramCredentials v{version}: {:?}",
        response.error_message
    );
    let [result] = &response.results[..] else {
        panic!("one result for {user}, got {:?}", response.results);
    };
    assert_eq!(result.user.as_str(), user, "the result names the user");
    if result.error_code != error_code::NONE {
        return Err((
            result.error_code,
            result.error_message.as_ref().map(|m| m.to_string()),
        ));
    }
    Ok(result
        .credential_infos
        .iter()
        .map(|info| {
            let mechanism = match info.mechanism {
                1 => "SCRAM-SHA-256",
                2 => "SCRAM-SHA-512",
                other => panic!("unknown SCRAM mechanism id {other}"),
            };
            (mechanism, info.iterations)
        })
        .collect())
}

/// kcat's (librdkafka's) options for SASL with `mechanism` as `user` with
/// `password`: `-X security.protocol=sasl_plaintext -X
/// sasl.mechanisms=<mechanism> -X sasl.username=<user> -X
/// sasl.password=<password>`; with `ca` (SASL_SSL)
/// `security.protocol=sasl_ssl` and `-X ssl.ca.location=<ca.pem>`.
fn kcat_sasl(mechanism: &str, user: &str, password: &str, ca: Option<&TestPki>) -> Vec<String> {
    let protocol = if ca.is_some() {
        "sasl_ssl"
    } else {
        "sasl_plaintext"
    };
    let mut options = vec![
        format!("security.protocol={protocol}"),
        format!("sasl.mechanisms={mechanism}"),
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

/// Requires that `kcat -L` over SASL_PLAINTEXT with `mechanism` as `user`
/// with `password` gets no metadata and that librdkafka reports the
/// broker's message for a failed SCRAM authentication (Kafka's
/// `SaslServerAuthenticator`: "Authentication failed during
/// authentication due to invalid credentials with SASL mechanism
/// <mechanism>").
#[track_caller]
fn assert_scram_refused(
    broker: &TestBroker,
    mechanism: &str,
    (user, password): (&str, &str),
    who: &str,
) {
    let message = format!(
        "authentication failed during authentication due to invalid credentials \
         with sasl mechanism {}",
        mechanism.to_ascii_lowercase()
    );
    support::assert_kcat_refused(
        broker,
        SASL_PLAINTEXT,
        &kcat_sasl(mechanism, user, password, None),
        who,
        &format!("the broker's message {message:?}"),
        |stderr| stderr.contains(&message),
    );
}

/// `kafka-configs --alter --add-config` adds alice's SCRAM-SHA-512
/// credential with 8,192 iterations and her SCRAM-SHA-256 one with
/// Kafka's default 4,096 (each run prints "Completed updating config for
/// user alice."), and DescribeUserScramCredentials then lists both;
/// `--delete-config SCRAM-SHA-512` leaves SCRAM-SHA-256 alone, and
/// deleting that too leaves alice without credentials (RESOURCE_NOT_FOUND
/// with Kafka's message).
#[test]
fn kafka_configs_adds_and_deletes_scram_credentials() {
    let (_pki, broker) = start_scram_broker();
    assert_eq!(
        scram_credentials(&broker, ALICE.0),
        Err((
            RESOURCE_NOT_FOUND,
            Some("Attempt to describe a user credential that does not exist: alice".to_owned())
        )),
        "no SCRAM credential before kafka-configs"
    );
    add_alice_scram_sha_512(&broker);
    add_scram(
        &broker,
        ALICE.0,
        &format!("SCRAM-SHA-256=[password={}]", ALICE.1),
    );
    assert_eq!(
        scram_credentials(&broker, ALICE.0),
        Ok(vec![("SCRAM-SHA-256", 4096), ("SCRAM-SHA-512", 8192)]),
        "both credentials after --add-config"
    );

    delete_scram(&broker, ALICE.0, "SCRAM-SHA-512");
    assert_eq!(
        scram_credentials(&broker, ALICE.0),
        Ok(vec![("SCRAM-SHA-256", 4096)]),
        "SCRAM-SHA-256 is left after --delete-config SCRAM-SHA-512"
    );
    delete_scram(&broker, ALICE.0, "SCRAM-SHA-256");
    assert_eq!(
        scram_credentials(&broker, ALICE.0).map_err(|(code, _)| code),
        Err(RESOURCE_NOT_FOUND),
        "no credential left after deleting both"
    );
}

/// `kafka-configs --describe --entity-type users` prints Kafka's lines,
/// with `--entity-name alice` and for every user: "SCRAM credential
/// configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096,
/// SCRAM-SHA-512=iterations=8192" (and bob's line for all users); after
/// `--delete-config SCRAM-SHA-512` alice's line names SCRAM-SHA-256 only.
/// (The tool asks DescribeClientQuotas before DescribeUserScramCredentials
/// and prints a "Quota configs" line only for users with quotas.)
#[test]
fn kafka_configs_describe_prints_kafkas_scram_credential_lines() {
    let (_pki, broker) = start_scram_broker();
    add_alice_scram_sha_512(&broker);
    add_scram(
        &broker,
        ALICE.0,
        &format!("SCRAM-SHA-256=[password={}]", ALICE.1),
    );
    add_scram(
        &broker,
        "bob",
        "SCRAM-SHA-512=[iterations=4096,password=bob-secret]",
    );
    let alice_both = "SCRAM credential configs for user-principal 'alice' are \
                      SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192";
    let bob = "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096";
    assert_eq!(
        describe_users(&broker, Some(ALICE.0)),
        [alice_both],
        "--describe --entity-name alice"
    );
    let mut everyone = describe_users(&broker, None);
    everyone.sort();
    assert_eq!(everyone, [alice_both, bob], "--describe of every user");

    delete_scram(&broker, ALICE.0, "SCRAM-SHA-512");
    assert_eq!(
        describe_users(&broker, Some(ALICE.0)),
        ["SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096"],
        "--describe --entity-name alice after --delete-config SCRAM-SHA-512"
    );
}

/// kcat with SCRAM-SHA-512 as alice over SASL_SSL (the listener with the
/// optional `ScramLoginModule` JAAS entry; the broker's certificate
/// checked against `ca.pem`), her credential added with `kafka-configs`:
/// 1,000 lines produced and read back, and broker 1 listed at the
/// SASL_SSL port.
#[test]
fn kcat_round_trips_1000_lines_over_sasl_ssl_with_scram_sha_512() {
    let (pki, broker) = start_scram_broker();
    add_alice_scram_sha_512(&broker);
    let options = kcat_sasl("SCRAM-SHA-512", ALICE.0, ALICE.1, Some(&pki));
    support::kcat_round_trip(&broker, SASL_SSL, "scram-ssl-kcat", &options, 1_000);
    support::assert_kcat_listed(&broker, SASL_SSL, &options);
}

/// confluent-kafka (librdkafka) with SCRAM-SHA-512 as alice over
/// SASL_SSL: the admin client creates a 3-partition topic, an idempotent
/// producer writes 2,000 records and an assign() consumer reads them all
/// back. Options: `security.protocol=SASL_SSL`,
/// `sasl.mechanism=SCRAM-SHA-512`, `sasl.username`, `sasl.password`,
/// `ssl.ca.location`.
#[test]
fn confluent_kafka_round_trips_over_sasl_ssl_with_scram_sha_512() {
    let (pki, broker) = start_scram_broker();
    add_alice_scram_sha_512(&broker);
    support::script_round_trip(
        RoundTripScript::Confluent,
        broker.bootstrap_for(SASL_SSL),
        "scram-confluent",
        2000,
        &[
            "security.protocol=SASL_SSL".to_owned(),
            "sasl.mechanism=SCRAM-SHA-512".to_owned(),
            format!("sasl.username={}", ALICE.0),
            format!("sasl.password={}", ALICE.1),
            format!("ssl.ca.location={}", pki.ca().display()),
        ],
    );
}

/// The Java client with SCRAM-SHA-512 as alice over SASL_SSL, with the
/// PEM truststore: 2,000 records of 512 bytes with keys, headers and
/// timestamps, compared field by field when read back. Properties:
/// `security.protocol=SASL_SSL`, `sasl.mechanism=SCRAM-SHA-512`,
/// `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule
/// required username="alice" password="alice-secret";`,
/// `ssl.truststore.type=PEM`, `ssl.truststore.location=<ca.pem>`.
#[test]
fn java_client_round_trips_over_sasl_ssl_with_scram_sha_512() {
    let (pki, broker) = start_scram_broker();
    add_alice_scram_sha_512(&broker);
    support::java_produce_consume(
        broker.bootstrap_for(SASL_SSL),
        "scram-java",
        2000,
        &[
            "security.protocol=SASL_SSL".to_owned(),
            "sasl.mechanism=SCRAM-SHA-512".to_owned(),
            format!(
                "sasl.jaas.config={}",
                sasl::scram_client_jaas_config(ALICE.0, ALICE.1)
            ),
            "ssl.truststore.type=PEM".to_owned(),
            format!("ssl.truststore.location={}", pki.ca().display()),
        ],
    );
}

/// kafka-python with SCRAM-SHA-512 as alice over SASL_PLAINTEXT (the
/// listener without a SCRAM JAAS entry): admin-created 3-partition topic,
/// 2,000 records with acks=all, read back with assign(). Options:
/// `security_protocol=SASL_PLAINTEXT`, `sasl_mechanism=SCRAM-SHA-512`,
/// `sasl_plain_username`, `sasl_plain_password`.
#[test]
fn kafka_python_round_trips_over_sasl_plaintext_with_scram_sha_512() {
    let (_pki, broker) = start_scram_broker();
    add_alice_scram_sha_512(&broker);
    support::script_round_trip(
        RoundTripScript::KafkaPython,
        broker.bootstrap_for(SASL_PLAINTEXT),
        "scram-kafka-python",
        2000,
        &[
            "security_protocol=SASL_PLAINTEXT".to_owned(),
            "sasl_mechanism=SCRAM-SHA-512".to_owned(),
            format!("sasl_plain_username={}", ALICE.0),
            format!("sasl_plain_password={}", ALICE.1),
        ],
    );
}

/// KafkaJS with SCRAM-SHA-512 as alice over SASL_PLAINTEXT:
/// admin-created 3-partition topic, 2,000 records with acks=-1, read back
/// by a consumer group. Options: `sasl: { mechanism: 'scram-sha-512',
/// username, password }`, no TLS.
#[test]
fn kafkajs_round_trips_over_sasl_plaintext_with_scram_sha_512() {
    let (_pki, broker) = start_scram_broker();
    add_alice_scram_sha_512(&broker);
    support::script_round_trip(
        RoundTripScript::KafkaJs,
        broker.bootstrap_for(SASL_PLAINTEXT),
        "scram-kafkajs",
        2000,
        &[
            "sasl.mechanism=scram-sha-512".to_owned(),
            format!("sasl.username={}", ALICE.0),
            format!("sasl.password={}", ALICE.1),
        ],
    );
}

/// kafka-python with SCRAM-SHA-512 as alice over SASL_SSL: admin-created
/// 3-partition topic, 2,000 records with acks=all, read back with
/// assign(). Options: `security_protocol=SASL_SSL`,
/// `sasl_mechanism=SCRAM-SHA-512`, `sasl_plain_username`,
/// `sasl_plain_password`, `ssl_cafile`.
#[test]
fn kafka_python_round_trips_over_sasl_ssl_with_scram_sha_512() {
    let (pki, broker) = start_scram_broker();
    add_alice_scram_sha_512(&broker);
    support::script_round_trip(
        RoundTripScript::KafkaPython,
        broker.bootstrap_for(SASL_SSL),
        "scram-ssl-kafka-python",
        2000,
        &[
            "security_protocol=SASL_SSL".to_owned(),
            "sasl_mechanism=SCRAM-SHA-512".to_owned(),
            format!("sasl_plain_username={}", ALICE.0),
            format!("sasl_plain_password={}", ALICE.1),
            format!("ssl_cafile={}", pki.ca().display()),
        ],
    );
}

/// KafkaJS with SCRAM-SHA-512 as alice over SASL_SSL: admin-created
/// 3-partition topic, 2,000 records with acks=-1, read back by a consumer
/// group. Options: `sasl: { mechanism: 'scram-sha-512', username,
/// password }`, `ssl: { ca: [ca.pem] }`.
#[test]
fn kafkajs_round_trips_over_sasl_ssl_with_scram_sha_512() {
    let (pki, broker) = start_scram_broker();
    add_alice_scram_sha_512(&broker);
    support::script_round_trip(
        RoundTripScript::KafkaJs,
        broker.bootstrap_for(SASL_SSL),
        "scram-ssl-kafkajs",
        2000,
        &[
            "sasl.mechanism=scram-sha-512".to_owned(),
            format!("sasl.username={}", ALICE.0),
            format!("sasl.password={}", ALICE.1),
            format!("ssl.ca={}", pki.ca().display()),
        ],
    );
}

/// kcat with SCRAM-SHA-512 as alice with a wrong password gets no
/// metadata and librdkafka reports the broker's message for SCRAM
/// ("Authentication failed during authentication due to invalid
/// credentials with SASL mechanism SCRAM-SHA-512"); the broker keeps
/// running and alice's right password then lists broker 1.
#[test]
fn kcat_with_a_wrong_scram_password_is_refused_with_kafkas_message() {
    let (_pki, mut broker) = start_scram_broker();
    add_alice_scram_sha_512(&broker);
    assert_scram_refused(
        &broker,
        "SCRAM-SHA-512",
        (ALICE.0, "not-alice-secret"),
        "alice with a wrong password",
    );
    support::assert_running(&mut broker);
    support::assert_kcat_listed(
        &broker,
        SASL_PLAINTEXT,
        &kcat_sasl("SCRAM-SHA-512", ALICE.0, ALICE.1, None),
    );
}

/// Users without a SCRAM credential are refused with the same message as
/// a wrong password: mallory (no user at all) and admin, a PLAIN user of
/// the listener's JAAS entry with its PLAIN password (PLAIN's users are
/// not SCRAM's). Alice, with a SCRAM-SHA-512 credential only, is refused
/// SCRAM-SHA-256.
#[test]
fn kcat_as_a_user_without_a_scram_credential_is_refused() {
    let (_pki, broker) = start_scram_broker();
    add_alice_scram_sha_512(&broker);
    assert_scram_refused(
        &broker,
        "SCRAM-SHA-512",
        ("mallory", ALICE.1),
        "an unknown user",
    );
    assert_scram_refused(
        &broker,
        "SCRAM-SHA-512",
        sasl::ADMIN,
        "admin, a PLAIN user only",
    );
    assert_scram_refused(
        &broker,
        "SCRAM-SHA-256",
        ALICE,
        "alice with SCRAM-SHA-256, for which she has no credential",
    );
}

/// A credential change applies to the next authentication: alice logs in
/// with SCRAM-SHA-512 and SCRAM-SHA-256 (kcat -L over SASL_PLAINTEXT);
/// after `kafka-configs --delete-config SCRAM-SHA-512` a new
/// SCRAM-SHA-512 connection is refused with Kafka's message, while
/// SCRAM-SHA-256 and PLAIN (the listener's JAAS user) still work.
#[test]
fn after_delete_config_scram_sha_512_alice_is_refused_it_while_sha_256_and_plain_still_work() {
    let (_pki, broker) = start_scram_broker();
    add_alice_scram_sha_512(&broker);
    add_scram(
        &broker,
        ALICE.0,
        &format!("SCRAM-SHA-256=[password={}]", ALICE.1),
    );
    let sha_512 = kcat_sasl("SCRAM-SHA-512", ALICE.0, ALICE.1, None);
    let sha_256 = kcat_sasl("SCRAM-SHA-256", ALICE.0, ALICE.1, None);
    let plain = kcat_sasl("PLAIN", ALICE.0, ALICE.1, None);
    support::assert_kcat_listed(&broker, SASL_PLAINTEXT, &sha_512);
    support::assert_kcat_listed(&broker, SASL_PLAINTEXT, &sha_256);

    delete_scram(&broker, ALICE.0, "SCRAM-SHA-512");
    assert_scram_refused(
        &broker,
        "SCRAM-SHA-512",
        ALICE,
        "alice with SCRAM-SHA-512 after --delete-config SCRAM-SHA-512",
    );
    support::assert_kcat_listed(&broker, SASL_PLAINTEXT, &sha_256);
    support::assert_kcat_listed(&broker, SASL_PLAINTEXT, &plain);
}

/// `weir format --add-scram` seeds SCRAM users as `kafka-storage format
/// --add-scram` does: alice (SCRAM-SHA-512, 8,192 iterations) and bob
/// (SCRAM-SHA-256, the default 4,096) log in with kcat at the cluster's
/// first start and DescribeUserScramCredentials lists them. The bootstrap
/// records are a new cluster's only: after `kafka-configs --delete-config`
/// and a restart, alice stays deleted while bob still logs in.
#[test]
fn format_add_scram_seeds_users_for_the_first_start_only() {
    let mut broker = TestBroker::builder()
        .sasl_mechanisms(&["SCRAM-SHA-256", "SCRAM-SHA-512"])
        .sasl_plaintext_listener(&[])
        .format_cluster_id(&weir_storage::random_kafka_uuid())
        .format_add_scram(&format!(
            "SCRAM-SHA-512=[name={},password={},iterations=8192]",
            ALICE.0, ALICE.1
        ))
        .format_add_scram("SCRAM-SHA-256=[name=bob,password=bob-secret]")
        .start()
        .expect("starting weir formatted with --add-scram");
    let alice = kcat_sasl("SCRAM-SHA-512", ALICE.0, ALICE.1, None);
    let bob = kcat_sasl("SCRAM-SHA-256", "bob", "bob-secret", None);
    support::assert_kcat_listed(&broker, SASL_PLAINTEXT, &alice);
    support::assert_kcat_listed(&broker, SASL_PLAINTEXT, &bob);
    assert_eq!(
        scram_credentials(&broker, ALICE.0),
        Ok(vec![("SCRAM-SHA-512", 8192)])
    );
    assert_eq!(
        scram_credentials(&broker, "bob"),
        Ok(vec![("SCRAM-SHA-256", 4096)])
    );

    delete_scram(&broker, ALICE.0, "SCRAM-SHA-512");
    broker.restart().expect("restarting weir");
    assert_eq!(
        scram_credentials(&broker, ALICE.0).map_err(|(code, _)| code),
        Err(RESOURCE_NOT_FOUND),
        "the bootstrap records are not applied again"
    );
    assert_scram_refused(
        &broker,
        "SCRAM-SHA-512",
        ALICE,
        "alice after her deletion and a restart",
    );
    support::assert_kcat_listed(&broker, SASL_PLAINTEXT, &bob);
}
