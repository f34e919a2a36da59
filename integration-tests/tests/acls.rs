//! ACL authorization (issue 19, fourth part): a broker configured as
//! Kafka's KRaft `StandardAuthorizer` is,
//!
//! ```text
//! listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0
//! sasl.enabled.mechanisms=PLAIN
//! listener.name.sasl_plaintext.plain.sasl.jaas.config=<PlainLoginModule, users admin, alice and bob>
//! authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
//! super.users=User:admin
//! group.initial.rebalance.delay.ms=0
//! ```
//!
//! driven by Kafka's own `kafka-acls` (`org.apache.kafka.tools.AclCommand`,
//! the Java Admin client's DescribeAcls, CreateAcls and DeleteAcls), by
//! kcat (librdkafka) producing and consuming in a group as alice and bob,
//! and by raw requests. A SASL client's principal is `User:<name>`; a
//! PLAINTEXT client's is `User:ANONYMOUS`, which `super.users` does not
//! name.
//!
//! The ACLs the tests need besides the one under test are created with a
//! raw CreateAcls as admin (a super user), which is faster than a JVM.

use std::path::{Path, PathBuf};

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, CreateAclsRequest, CreateAclsResponse, DescribeAclsRequest,
    DescribeAclsResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::clients::{self, CommandOutput};
use weir_integration_tests::sasl::{self, ADMIN, ALICE};
use weir_integration_tests::{records, RawClient, TestBroker};

use crate::support::{self, error_code, CLIENT_TIMEOUT};

/// The listener of SASL over plain TCP.
const SASL_PLAINTEXT: &str = "SASL_PLAINTEXT";
/// A client user with no ACL unless a test gives it one.
const BOB: (&str, &str) = ("bob", "bob-secret");
/// Kafka's KRaft authorizer, the `authorizer.class.name` that turns ACLs on.
const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
/// The main class of Kafka's `bin/kafka-acls.sh` (in `kafka-tools` since
/// Kafka 4.0; `kafka.admin.AclCommand` before).
const ACL_COMMAND: &str = "org.apache.kafka.tools.AclCommand";

/// Kafka's TOPIC_AUTHORIZATION_FAILED.
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
/// Kafka's CLUSTER_AUTHORIZATION_FAILED.
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

/// Kafka's `ResourceType` codes.
mod resource {
    pub const ANY: i8 = 1;
    pub const TOPIC: i8 = 2;
    pub const GROUP: i8 = 3;
    pub const CLUSTER: i8 = 4;
}

/// Kafka's `PatternType` codes.
mod pattern {
    pub const ANY: i8 = 1;
    pub const LITERAL: i8 = 3;
    pub const PREFIXED: i8 = 4;
}

/// Kafka's `AclOperation` codes (also the bit numbers of
/// `*_authorized_operations`, KIP-430).
mod operation {
    pub const ANY: i8 = 1;
    pub const READ: i8 = 3;
    pub const WRITE: i8 = 4;
    pub const CREATE: i8 = 5;
    pub const DELETE: i8 = 6;
    pub const ALTER: i8 = 7;
    pub const DESCRIBE: i8 = 8;
    pub const DESCRIBE_CONFIGS: i8 = 10;
    pub const ALTER_CONFIGS: i8 = 11;
}

/// Kafka's `AclPermissionType` codes.
mod permission {
    pub const ANY: i8 = 1;
    pub const DENY: i8 = 2;
    pub const ALLOW: i8 = 3;
}

/// One ACL as DescribeAcls lists it: resource type, resource name,
/// pattern type, principal, host, operation, permission type.
type AclRow = (i8, String, i8, String, String, i8, i8);

/// Starts a broker with `PLAINTEXT` and `SASL_PLAINTEXT` listeners (PLAIN
/// users admin, alice and bob), `authorizer.class.name` the
/// `StandardAuthorizer`, `super.users=User:admin`,
/// `group.initial.rebalance.delay.ms=0` (a lone group member need not wait
/// Kafka's 3 s) and the `extra` keys.
#[track_caller]
fn start_acl_broker(extra: &[(&str, &str)]) -> TestBroker {
    let mut builder = TestBroker::builder()
        .sasl_plaintext_listener(&[ADMIN, ALICE, BOB])
        .config("authorizer.class.name", STANDARD_AUTHORIZER)
        .config("super.users", "User:admin")
        .config("group.initial.rebalance.delay.ms", "0");
    for (key, value) in extra {
        builder = builder.config(key, value);
    }
    builder
        .start()
        .expect("starting weir with the StandardAuthorizer")
}

/// A raw client logged in over SASL_PLAINTEXT, with the broker's
/// ApiVersions table.
struct Session {
    client: RawClient,
    versions: ApiVersionsResponse,
}

impl Session {
    /// The newest version of `key` both sides speak.
    fn newest<R: kafka_protocol::protocol::Message>(&self, key: ApiKey) -> i16 {
        support::newest::<R>(&self.versions, key)
    }
}

/// A raw connection to the SASL_PLAINTEXT listener that has logged in as
/// `user` with PLAIN (ApiVersions v3, SaslHandshake v1, SaslAuthenticate
/// v2), which must succeed.
#[track_caller]
fn log_in(broker: &TestBroker, (user, password): (&str, &str)) -> Session {
    let mut client = RawClient::connect(&broker.bootstrap_for(SASL_PLAINTEXT))
        .expect("connecting to SASL_PLAINTEXT");
    let versions = support::api_versions(&mut client);
    let handshake: SaslHandshakeResponse = client
        .send(
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
            1,
        )
        .expect("SaslHandshake v1");
    assert_eq!(
        handshake.error_code,
        error_code::NONE,
        "SaslHandshake PLAIN"
    );
    let answer: SaslAuthenticateResponse = client
        .send(
            &SaslAuthenticateRequest::default()
                .with_auth_bytes(sasl::plain_auth_bytes("", user, password)),
            2,
        )
        .expect("SaslAuthenticate v2");
    assert_eq!(
        answer.error_code,
        error_code::NONE,
        "{user} logs in: {:?}",
        answer.error_message
    );
    Session { client, versions }
}

/// A raw connection to the PLAINTEXT listener (principal
/// `User:ANONYMOUS`) with the broker's ApiVersions table.
#[track_caller]
fn anonymous(broker: &TestBroker) -> Session {
    let mut client = support::connect(broker);
    let versions = support::api_versions(&mut client);
    Session { client, versions }
}

/// An ACL entry for any host: `permission` of `principal` to do
/// `operation` on the resource `resource_type`/`name` matched as
/// `pattern_type`.
fn acl(
    resource_type: i8,
    name: &str,
    pattern_type: i8,
    principal: &str,
    operation: i8,
    permission: i8,
) -> AclCreation {
    AclCreation::default()
        .with_resource_type(resource_type)
        .with_resource_name(StrBytes::from_string(name.to_owned()))
        .with_resource_pattern_type(pattern_type)
        .with_principal(StrBytes::from_string(principal.to_owned()))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(operation)
        .with_permission_type(permission)
}

/// An ALLOW ACL of `principal` for `operation` on the literal topic
/// `topic`.
fn allow_topic(topic: &str, principal: &str, operation: i8) -> AclCreation {
    acl(
        resource::TOPIC,
        topic,
        pattern::LITERAL,
        principal,
        operation,
        permission::ALLOW,
    )
}

/// An ALLOW ACL of `principal` for `operation` on the literal group
/// `group`.
fn allow_group(group: &str, principal: &str, operation: i8) -> AclCreation {
    acl(
        resource::GROUP,
        group,
        pattern::LITERAL,
        principal,
        operation,
        permission::ALLOW,
    )
}

/// CreateAcls (newest version) of `creations` through `session`; returns
/// the response.
#[track_caller]
fn send_create_acls(session: &mut Session, creations: Vec<AclCreation>) -> CreateAclsResponse {
    let version = session.newest::<CreateAclsRequest>(ApiKey::CreateAcls);
    session
        .client
        .send(
            &CreateAclsRequest::default().with_creations(creations),
            version,
        )
        .unwrap_or_else(|e| panic!("CreateAcls v{version}: {e}"))
}

/// CreateAcls of `creations` through `session`, each of which must be
/// created.
#[track_caller]
fn create_acls(session: &mut Session, creations: Vec<AclCreation>) {
    let count = creations.len();
    let response = send_create_acls(session, creations);
    assert_eq!(response.results.len(), count, "one result per creation");
    for result in &response.results {
        assert_eq!(
            result.error_code,
            error_code::NONE,
            "CreateAcls: {:?}",
            result.error_message
        );
    }
}

/// DescribeAcls (newest version) of every ACL through `session`: the ACLs
/// sorted, or the top-level error code.
#[track_caller]
fn describe_all_acls(session: &mut Session) -> Result<Vec<AclRow>, i16> {
    let version = session.newest::<DescribeAclsRequest>(ApiKey::DescribeAcls);
    let response: DescribeAclsResponse = session
        .client
        .send(
            &DescribeAclsRequest::default()
                .with_resource_type_filter(resource::ANY)
                .with_resource_name_filter(None)
                .with_pattern_type_filter(pattern::ANY)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(operation::ANY)
                .with_permission_type(permission::ANY),
            version,
        )
        .unwrap_or_else(|e| panic!("DescribeAcls v{version}: {e}"));
    if response.error_code != error_code::NONE {
        assert!(
            response.resources.is_empty(),
            "no resources with error {}",
            response.error_code
        );
        return Err(response.error_code);
    }
    let mut rows: Vec<AclRow> = response
        .resources
        .iter()
        .flat_map(|resource| {
            resource.acls.iter().map(|acl| {
                (
                    resource.resource_type,
                    resource.resource_name.to_string(),
                    resource.pattern_type,
                    acl.principal.to_string(),
                    acl.host.to_string(),
                    acl.operation,
                    acl.permission_type,
                )
            })
        })
        .collect();
    rows.sort();
    Ok(rows)
}

/// The [`AclRow`] of an ALLOW ACL for any host.
fn allowed_row(
    resource_type: i8,
    name: &str,
    pattern_type: i8,
    principal: &str,
    operation: i8,
) -> AclRow {
    (
        resource_type,
        name.to_owned(),
        pattern_type,
        principal.to_owned(),
        "*".to_owned(),
        operation,
        permission::ALLOW,
    )
}

/// Creates the one-partition topics `names` through `session` (a super
/// user's) and waits until they are ready.
#[track_caller]
fn create_topics(session: &mut Session, names: &[&str]) -> Vec<support::TopicInfo> {
    names
        .iter()
        .map(|name| support::create_topic(&mut session.client, &session.versions, name, &[]))
        .collect()
}

/// Metadata (newest version) through `session` for `topics` (`None`: all
/// topics), without auto-creation unless `auto_create`, asking for the
/// topics' authorized operations.
#[track_caller]
fn metadata(session: &mut Session, topics: Option<&[&str]>, auto_create: bool) -> MetadataResponse {
    let version = session.newest::<MetadataRequest>(ApiKey::Metadata);
    assert!(
        version >= 8,
        "Metadata v{version} has no topic_authorized_operations"
    );
    let topics = topics.map(|names| {
        names
            .iter()
            .map(|name| {
                MetadataRequestTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_string((*name).to_owned()))))
            })
            .collect()
    });
    session
        .client
        .send(
            &MetadataRequest::default()
                .with_topics(topics)
                .with_allow_auto_topic_creation(auto_create)
                .with_include_topic_authorized_operations(true),
            version,
        )
        .unwrap_or_else(|e| panic!("Metadata v{version}: {e}"))
}

/// The names of a Metadata response's topics, sorted.
fn topic_names(response: &MetadataResponse) -> Vec<String> {
    let mut names: Vec<String> = response
        .topics
        .iter()
        .map(|t| t.name.as_ref().map(|n| n.to_string()).unwrap_or_default())
        .collect();
    names.sort();
    names
}

/// The `*_authorized_operations` bit field of `operations`.
fn bits(operations: &[i8]) -> i32 {
    operations.iter().fold(0, |acc, op| acc | (1 << op))
}

/// kcat's (librdkafka's) options for SASL/PLAIN over SASL_PLAINTEXT as
/// `user` with `password`.
fn kcat_as((user, password): (&str, &str)) -> Vec<String> {
    [
        "security.protocol=sasl_plaintext".to_owned(),
        "sasl.mechanisms=PLAIN".to_owned(),
        format!("sasl.username={user}"),
        format!("sasl.password={password}"),
    ]
    .into_iter()
    .flat_map(|option| ["-X".to_owned(), option])
    .collect()
}

/// `kcat -P -X acks=all` of `lines` to partition 0 of `topic` through
/// SASL_PLAINTEXT as `user`, whatever its exit status.
#[track_caller]
fn kcat_produce_as(
    broker: &TestBroker,
    user: (&str, &str),
    topic: &str,
    lines: &[String],
) -> CommandOutput {
    let options = kcat_as(user);
    let mut args = vec!["-P", "-t", topic, "-p", "0", "-X", "acks=all"];
    args.extend(support::strs(&options));
    let mut stdin = lines.join("\n").into_bytes();
    stdin.push(b'\n');
    support::kcat_output(&broker.bootstrap_for(SASL_PLAINTEXT), &args, Some(stdin))
}

/// [`kcat_produce_as`], which must succeed.
#[track_caller]
fn kcat_produce_ok(broker: &TestBroker, user: (&str, &str), topic: &str, lines: &[String]) {
    kcat_produce_as(broker, user, topic, lines).assert_success();
}

/// Requires that `output` (a kcat run) failed with librdkafka's "Topic
/// authorization failed" (TOPIC_AUTHORIZATION_FAILED).
#[track_caller]
fn assert_topic_authorization_failed(output: &CommandOutput, who: &str) {
    assert!(
        !output.status.success(),
        "{who}: kcat must fail\n--- stderr ---\n{}",
        output.stderr
    );
    assert!(
        output.stderr.contains("Topic authorization failed"),
        "{who}: librdkafka reports TOPIC_AUTHORIZATION_FAILED\n--- stderr ---\n{}",
        output.stderr
    );
}

/// Every value of partition 0 of `topic`, from the beginning to the end,
/// read with `kcat -C` through SASL_PLAINTEXT as `user`.
#[track_caller]
fn kcat_consume_as(broker: &TestBroker, user: (&str, &str), topic: &str) -> Vec<String> {
    let options = kcat_as(user);
    support::kcat_consume_with(
        &broker.bootstrap_for(SASL_PLAINTEXT),
        topic,
        0,
        "beginning",
        &support::strs(&options),
    )
}

/// kcat as a member of `group` (librdkafka's KafkaConsumer, `-G`)
/// subscribed to `topic` through SASL_PLAINTEXT as `user`, reading from
/// the beginning and exiting at the end of the partitions (`-e`), whatever
/// its exit status. Its stdout holds one value per line.
#[track_caller]
fn kcat_group_consume_as(
    broker: &TestBroker,
    user: (&str, &str),
    group: &str,
    topic: &str,
) -> CommandOutput {
    let options = kcat_as(user);
    let mut args = vec!["-G", group, "-o", "beginning", "-e", "-f", "%s\\n"];
    args.extend(support::strs(&options));
    args.push(topic);
    support::kcat_output(&broker.bootstrap_for(SASL_PLAINTEXT), &args, None)
}

/// Requires that `output` (a kcat group member) failed with librdkafka's
/// GROUP_AUTHORIZATION_FAILED ("GroupAuthorizationFailed", "Group
/// authorization failed") and read nothing.
#[track_caller]
fn assert_group_authorization_failed(output: &CommandOutput, who: &str) {
    let stderr = output.stderr.to_ascii_lowercase();
    assert!(
        !output.status.success()
            && (stderr.contains("groupauthorizationfailed")
                || stderr.contains("group authorization failed")),
        "{who}: kcat must fail with GROUP_AUTHORIZATION_FAILED, exited {}\n--- stderr ---\n{}",
        output.status,
        output.stderr
    );
    assert!(
        output.stdout_text().trim().is_empty(),
        "{who}: no record read\n{}",
        output.stdout_text()
    );
}

/// Writes a client properties file for Kafka's CLI tools
/// (`--command-config`) with SASL/PLAIN over SASL_PLAINTEXT as `user`.
#[track_caller]
fn client_properties(dir: &Path, (user, password): (&str, &str)) -> PathBuf {
    let path = dir.join(format!("{user}.properties"));
    let text = format!(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={}\n",
        sasl::plain_client_jaas_config(user, password)
    );
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path
}

/// Runs Kafka's `kafka-acls` with `--bootstrap-server <SASL_PLAINTEXT>
/// --command-config <command_config>` and `args`, whatever its exit
/// status.
#[track_caller]
fn kafka_acls(broker: &TestBroker, command_config: &Path, args: &[&str]) -> CommandOutput {
    let mut command = clients::kafka_tool(ACL_COMMAND).expect("Kafka tools");
    command
        .arg("--bootstrap-server")
        .arg(broker.bootstrap_for(SASL_PLAINTEXT))
        .arg("--command-config")
        .arg(command_config)
        .args(args);
    clients::run(command, None, CLIENT_TIMEOUT).expect("kafka-acls")
}

/// [`kafka_acls`], which must exit 0; returns its stdout lines, trimmed,
/// without empty ones.
#[track_caller]
fn kafka_acls_ok(broker: &TestBroker, command_config: &Path, args: &[&str]) -> Vec<String> {
    let output = kafka_acls(broker, command_config, args);
    output.assert_success();
    output
        .stdout_text()
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The line `kafka-acls` prints for an ALLOW entry of `principal` for
/// `operation` (Kafka's names, such as `READ`) from any host.
fn acl_line(principal: &str, operation: &str) -> String {
    format!("(principal={principal}, host=*, operation={operation}, permissionType=ALLOW)")
}

/// The `--list` heading `kafka-acls` prints for a resource.
fn listing_heading(resource_type: &str, name: &str, pattern_type: &str) -> String {
    format!(
        "Current ACLs for resource `ResourcePattern(resourceType={resource_type}, \
         name={name}, patternType={pattern_type})`:"
    )
}

/// Kafka's `kafka-acls` as admin (`--command-config` with admin's PLAIN
/// JAAS): `--add` of alice's Read and Write on topic `orders` and of her
/// Read on the groups prefixed `app` prints Kafka's "Adding ACLs for
/// resource" lines; `--list --topic orders` prints the topic's heading and
/// both entries, `--list` both resources, and a raw DescribeAcls holds
/// exactly those three ACLs. Alice, not a super user, is refused `--list`
/// (ClusterAuthorizationException). `--remove --force` of the topic's ACLs
/// leaves only the group's, and removing that leaves none.
#[test]
fn kafka_acls_adds_lists_and_removes_acls() {
    let broker = start_acl_broker(&[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let admin = client_properties(dir.path(), ADMIN);
    let alice_config = client_properties(dir.path(), ALICE);
    let read = acl_line("User:alice", "READ");
    let write = acl_line("User:alice", "WRITE");
    let topic_heading = listing_heading("TOPIC", "orders", "LITERAL");
    let group_heading = listing_heading("GROUP", "app", "PREFIXED");
    let topic_acl = [
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "Write",
        "--topic",
        "orders",
    ];
    let group_acl = [
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--group",
        "app",
        "--resource-pattern-type",
        "prefixed",
    ];

    let added = kafka_acls_ok(&broker, &admin, &[&["--add"], &topic_acl[..]].concat());
    assert_eq!(
        added[0],
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, \
         patternType=LITERAL)`:",
        "{added:?}"
    );
    let mut entries = added[1..].to_vec();
    entries.sort();
    assert_eq!(entries, [read.clone(), write.clone()], "{added:?}");
    let added = kafka_acls_ok(&broker, &admin, &[&["--add"], &group_acl[..]].concat());
    assert_eq!(
        added,
        [
            "Adding ACLs for resource `ResourcePattern(resourceType=GROUP, name=app, \
             patternType=PREFIXED)`:"
                .to_owned(),
            read.clone()
        ]
    );

    let listed = kafka_acls_ok(&broker, &admin, &["--list", "--topic", "orders"]);
    assert_eq!(listed.first(), Some(&topic_heading), "{listed:?}");
    let mut entries = listed[1..].to_vec();
    entries.sort();
    assert_eq!(
        entries,
        [read.clone(), write.clone()],
        "--list --topic orders"
    );
    let everything = kafka_acls_ok(&broker, &admin, &["--list"]);
    assert_eq!(
        everything.len(),
        5,
        "two headings, three entries: {everything:?}"
    );
    assert!(everything.contains(&topic_heading), "{everything:?}");
    let group_at = everything
        .iter()
        .position(|l| *l == group_heading)
        .unwrap_or_else(|| panic!("--list shows the group's heading: {everything:?}"));
    assert_eq!(everything.get(group_at + 1), Some(&read), "{everything:?}");

    let mut session = log_in(&broker, ADMIN);
    assert_eq!(
        describe_all_acls(&mut session),
        Ok(vec![
            allowed_row(
                resource::TOPIC,
                "orders",
                pattern::LITERAL,
                "User:alice",
                operation::READ
            ),
            allowed_row(
                resource::TOPIC,
                "orders",
                pattern::LITERAL,
                "User:alice",
                operation::WRITE
            ),
            allowed_row(
                resource::GROUP,
                "app",
                pattern::PREFIXED,
                "User:alice",
                operation::READ
            ),
        ]),
        "the broker's ACLs after --add"
    );

    let refused = kafka_acls(&broker, &alice_config, &["--list"]);
    assert!(
        !refused.status.success()
            && refused
                .stdout_text()
                .contains("ClusterAuthorizationException: Cluster authorization failed."),
        "alice may not list ACLs (no Describe on the cluster): exit {}\n{}\n{}",
        refused.status,
        refused.stdout_text(),
        refused.stderr
    );

    kafka_acls_ok(
        &broker,
        &admin,
        &[&["--remove", "--force"], &topic_acl[..]].concat(),
    );
    assert_eq!(
        kafka_acls_ok(&broker, &admin, &["--list", "--topic", "orders"]),
        Vec::<String>::new(),
        "no ACL left on topic orders"
    );
    assert_eq!(
        kafka_acls_ok(&broker, &admin, &["--list"]),
        [group_heading, read],
        "only the group's ACL is left"
    );
    kafka_acls_ok(
        &broker,
        &admin,
        &[&["--remove", "--force"], &group_acl[..]].concat(),
    );
    assert_eq!(
        kafka_acls_ok(&broker, &admin, &["--list"]),
        Vec::<String>::new(),
        "no ACL left"
    );
    assert_eq!(describe_all_acls(&mut session), Ok(vec![]));
}

/// Admin creates topic `orders` and grants alice Write and Describe on it.
/// Bob (no ACL) producing with kcat gets "Topic authorization failed"
/// (TOPIC_AUTHORIZATION_FAILED) before and after alice's records; alice's
/// produce succeeds; read back as admin the partition holds exactly
/// alice's records, none of bob's.
#[test]
fn a_client_denied_write_gets_topic_authorization_failed_and_nothing_is_appended() {
    let broker = start_acl_broker(&[]);
    let mut admin = log_in(&broker, ADMIN);
    create_topics(&mut admin, &["orders"]);
    create_acls(
        &mut admin,
        vec![
            allow_topic("orders", "User:alice", operation::WRITE),
            allow_topic("orders", "User:alice", operation::DESCRIBE),
        ],
    );

    let bob_lines = support::lines("bob", 5);
    assert_topic_authorization_failed(
        &kcat_produce_as(&broker, BOB, "orders", &bob_lines),
        "bob before alice",
    );
    let alice_lines = support::lines("alice", 20);
    kcat_produce_ok(&broker, ALICE, "orders", &alice_lines);
    assert_topic_authorization_failed(
        &kcat_produce_as(&broker, BOB, "orders", &bob_lines),
        "bob after alice",
    );

    assert_eq!(
        kcat_consume_as(&broker, ADMIN, "orders"),
        alice_lines,
        "the log holds exactly alice's records"
    );
}

/// Alice has Read on topic `orders` (holding admin's records) but no ACL
/// on group `app`: kcat as a member of `app` fails with librdkafka's
/// GROUP_AUTHORIZATION_FAILED and reads nothing. After admin grants her
/// Read on group `app`, the same consumer reads every record.
#[test]
fn a_consumer_denied_its_group_gets_group_authorization_failed() {
    let broker = start_acl_broker(&[]);
    let mut admin = log_in(&broker, ADMIN);
    create_topics(&mut admin, &["orders"]);
    let produced = support::lines("order", 10);
    kcat_produce_ok(&broker, ADMIN, "orders", &produced);
    create_acls(
        &mut admin,
        vec![allow_topic("orders", "User:alice", operation::READ)],
    );

    assert_group_authorization_failed(
        &kcat_group_consume_as(&broker, ALICE, "app", "orders"),
        "alice in group app without a group ACL",
    );

    create_acls(
        &mut admin,
        vec![allow_group("app", "User:alice", operation::READ)],
    );
    let output = kcat_group_consume_as(&broker, ALICE, "app", "orders");
    output.assert_success();
    let consumed: Vec<String> = output.stdout_text().lines().map(str::to_owned).collect();
    assert_eq!(consumed, produced, "alice reads in group app once allowed");
}

/// With `allow.everyone.if.no.acl.found=true`: bob produces to and reads
/// topic `open`, which has no ACL, but is refused Write on `guarded`,
/// whose ACL names only alice (TOPIC_AUTHORIZATION_FAILED), and a place in
/// group `guarded-app`, whose ACL names only alice
/// (GROUP_AUTHORIZATION_FAILED). Admin, a super user, has no ACL at all
/// and even a DENY of its Write on `guarded`, yet creates topics and ACLs,
/// produces to `guarded` and reads it in group `guarded-app`. Alice
/// produces to `guarded` too.
#[test]
fn super_users_and_allow_everyone_if_no_acl_found() {
    let broker = start_acl_broker(&[("allow.everyone.if.no.acl.found", "true")]);
    let mut admin = log_in(&broker, ADMIN);
    create_topics(&mut admin, &["open", "guarded"]);
    create_acls(
        &mut admin,
        vec![
            allow_topic("guarded", "User:alice", operation::WRITE),
            allow_group("guarded-app", "User:alice", operation::READ),
            acl(
                resource::TOPIC,
                "guarded",
                pattern::LITERAL,
                "User:admin",
                operation::WRITE,
                permission::DENY,
            ),
        ],
    );

    let bob_open = support::lines("bob open", 5);
    kcat_produce_ok(&broker, BOB, "open", &bob_open);
    assert_eq!(
        kcat_consume_as(&broker, BOB, "open"),
        bob_open,
        "bob reads the topic without ACLs"
    );
    assert_topic_authorization_failed(
        &kcat_produce_as(&broker, BOB, "guarded", &support::lines("bob guarded", 3)),
        "bob to a topic whose ACL names only alice",
    );
    assert_group_authorization_failed(
        &kcat_group_consume_as(&broker, BOB, "guarded-app", "open"),
        "bob in a group whose ACL names only alice",
    );

    let admin_lines = support::lines("admin guarded", 4);
    kcat_produce_ok(&broker, ADMIN, "guarded", &admin_lines);
    let alice_lines = support::lines("alice guarded", 4);
    kcat_produce_ok(&broker, ALICE, "guarded", &alice_lines);
    let output = kcat_group_consume_as(&broker, ADMIN, "guarded-app", "guarded");
    output.assert_success();
    let consumed: Vec<String> = output.stdout_text().lines().map(str::to_owned).collect();
    assert_eq!(
        consumed,
        [admin_lines, alice_lines].concat(),
        "admin reads guarded in guarded-app: its and alice's records, none of bob's"
    );
    assert_eq!(
        describe_all_acls(&mut admin).map(|rows| rows.len()),
        Ok(3),
        "admin describes the ACLs"
    );
}

/// Raw requests from a PLAINTEXT client, whose principal `User:ANONYMOUS`
/// is not a super user: DescribeAcls without Describe on the cluster gets
/// CLUSTER_AUTHORIZATION_FAILED (31), as does CreateAcls (Alter on the
/// cluster), which creates nothing; with Describe on the cluster
/// DescribeAcls lists the ACLs but CreateAcls is still refused. Of topics
/// `readable` (Read ACL), `described` (Describe ACL) and `hidden` (none),
/// Metadata for all topics lists only the first two, with
/// topic_authorized_operations Read|Describe (1<<3 | 1<<8) and Describe
/// (1<<8); `hidden` and a topic that does not exist, asked by name, get
/// TOPIC_AUTHORIZATION_FAILED (29) with no id and no partitions, and the
/// latter is not auto-created. Produce to `readable` gets 29 and appends
/// nothing. Admin (a super user) sees every topic with every topic
/// operation.
#[test]
fn raw_requests_get_kafkas_authorization_errors_and_operation_bits() {
    let broker = start_acl_broker(&[]);
    let mut admin = log_in(&broker, ADMIN);
    let mut anonymous = anonymous(&broker);

    assert_eq!(
        describe_all_acls(&mut anonymous),
        Err(CLUSTER_AUTHORIZATION_FAILED),
        "DescribeAcls without Describe on the cluster"
    );
    let refused = send_create_acls(
        &mut anonymous,
        vec![allow_topic("hidden", "User:ANONYMOUS", operation::READ)],
    );
    let codes: Vec<i16> = refused.results.iter().map(|r| r.error_code).collect();
    assert_eq!(
        codes,
        [CLUSTER_AUTHORIZATION_FAILED],
        "CreateAcls without Alter on the cluster"
    );
    assert_eq!(
        describe_all_acls(&mut admin),
        Ok(vec![]),
        "the refused CreateAcls created nothing"
    );

    let topics = create_topics(&mut admin, &["readable", "described", "hidden"]);
    let cluster_describe = acl(
        resource::CLUSTER,
        "kafka-cluster",
        pattern::LITERAL,
        "User:ANONYMOUS",
        operation::DESCRIBE,
        permission::ALLOW,
    );
    create_acls(
        &mut admin,
        vec![
            allow_topic("readable", "User:ANONYMOUS", operation::READ),
            allow_topic("described", "User:ANONYMOUS", operation::DESCRIBE),
            cluster_describe,
        ],
    );
    assert_eq!(
        describe_all_acls(&mut anonymous).map(|rows| rows.len()),
        Ok(3),
        "DescribeAcls with Describe on the cluster"
    );
    let refused = send_create_acls(
        &mut anonymous,
        vec![allow_topic("hidden", "User:ANONYMOUS", operation::READ)],
    );
    assert_eq!(
        refused.results.first().map(|r| r.error_code),
        Some(CLUSTER_AUTHORIZATION_FAILED),
        "CreateAcls needs Alter, not Describe, on the cluster"
    );

    let all = metadata(&mut anonymous, None, false);
    assert_eq!(
        topic_names(&all),
        ["described", "readable"],
        "Metadata for all topics lists only the topics ANONYMOUS may describe"
    );
    for topic in &all.topics {
        let name = topic
            .name
            .as_ref()
            .map(|n| n.to_string())
            .unwrap_or_default();
        let expected = match name.as_str() {
            "readable" => bits(&[operation::READ, operation::DESCRIBE]),
            _ => bits(&[operation::DESCRIBE]),
        };
        assert_eq!(topic.error_code, error_code::NONE, "{name}");
        assert_eq!(
            topic.topic_authorized_operations, expected,
            "{name}: topic_authorized_operations {:#b}",
            topic.topic_authorized_operations
        );
    }
    assert_eq!(
        bits(&[operation::READ, operation::DESCRIBE]),
        (1 << 3) | (1 << 8)
    );

    let named = metadata(&mut anonymous, Some(&["hidden", "ghost", "readable"]), true);
    let outcome: Vec<(String, i16, bool, usize)> = named
        .topics
        .iter()
        .map(|t| {
            (
                t.name.as_ref().map(|n| n.to_string()).unwrap_or_default(),
                t.error_code,
                t.topic_id.is_nil(),
                t.partitions.len(),
            )
        })
        .collect();
    let mut outcome_sorted = outcome.clone();
    outcome_sorted.sort();
    assert_eq!(
        outcome_sorted,
        [
            ("ghost".to_owned(), TOPIC_AUTHORIZATION_FAILED, true, 0),
            ("hidden".to_owned(), TOPIC_AUTHORIZATION_FAILED, true, 0),
            ("readable".to_owned(), error_code::NONE, false, 1),
        ],
        "Metadata by name: {outcome:?}"
    );

    let everything = metadata(&mut admin, None, false);
    assert_eq!(
        topic_names(&everything),
        ["described", "hidden", "readable"],
        "a super user sees every topic (and ghost was not created)"
    );
    let every_topic_operation = bits(&[
        operation::READ,
        operation::WRITE,
        operation::CREATE,
        operation::DELETE,
        operation::ALTER,
        operation::DESCRIBE,
        operation::DESCRIBE_CONFIGS,
        operation::ALTER_CONFIGS,
    ]);
    for topic in &everything.topics {
        assert_eq!(
            topic.topic_authorized_operations, every_topic_operation,
            "admin's operations on {:?}",
            topic.name
        );
    }

    let readable = &topics[0];
    let produce_version = anonymous.newest::<ProduceRequest>(ApiKey::Produce);
    let denied = support::produce(
        &mut anonymous.client,
        produce_version,
        readable,
        0,
        records::plain_batch(&["not allowed"], 1_700_000_000_000),
    );
    assert_eq!(
        denied.error_code, TOPIC_AUTHORIZATION_FAILED,
        "Produce v{produce_version} without Write"
    );
    assert_eq!(
        kcat_consume_as(&broker, ADMIN, "readable"),
        Vec::<String>::new(),
        "the refused Produce appended nothing"
    );
}
