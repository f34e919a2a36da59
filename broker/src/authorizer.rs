//! Authorization: Kafka's `StandardAuthorizer` over the ACLs of the
//! metadata image (`weir_controller::acl`), and the per-request view the
//! handlers ask (Kafka's `AuthHelper`).
//!
//! With `authorizer.class.name` empty (the default) there is no
//! authorizer and every client may do everything, as Kafka without one.
//! Set to Kafka's `org.apache.kafka.metadata.authorizer.StandardAuthorizer`
//! (or the ZooKeeper-era `kafka.security.authorizer.AclAuthorizer`, whose
//! rules are the same), a request is allowed when its principal is in
//! `super.users`, or the ACLs allow it
//! ([`AclCache::authorize`](weir_controller::acl::AclCache::authorize)), or
//! no ACL applies to the resource and `allow.everyone.if.no.acl.found` is
//! true.
//!
//! Denials of what a client asked for are logged at INFO under the
//! `weir::authorizer` target (Kafka's `kafka.authorizer.logger`); checks
//! that only filter (all-topics Metadata, authorized-operation bits) are
//! not, as Kafka's `logIfDenied = false`.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;

use weir_controller::acl::{AclOperation, AclResourceType, Action, CLUSTER_NAME};
use weir_controller::MetadataImage;

use crate::config::BrokerConfig;

/// The `authorizer.class.name` values that turn authorization on: Kafka's
/// KRaft `StandardAuthorizer` first.
pub const STANDARD_AUTHORIZER_CLASSES: &[&str] = &[
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
];

/// The field value of `*_authorized_operations` when the client did not
/// ask for it (Kafka: Int.MIN, KIP-430).
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// The configured authorizer: `super.users` and the no-ACL default.
#[derive(Debug, Clone)]
pub struct Authorizer {
    super_users: HashSet<String>,
    allow_everyone_if_no_acl_found: bool,
}

impl Authorizer {
    /// The authorizer `config` asks for, or `None` without
    /// `authorizer.class.name`.
    pub fn from_config(config: &BrokerConfig) -> Option<Authorizer> {
        (!config.authorizer_class_name.is_empty()).then(|| Authorizer {
            super_users: config.super_users.iter().cloned().collect(),
            allow_everyone_if_no_acl_found: config.allow_everyone_if_no_acl_found,
        })
    }

    /// Whether `principal` (`User:<name>`) is one of `super.users`.
    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.contains(principal)
    }
}

/// One request's view of authorization: who asks, from where, against the
/// ACLs of the image current when the request arrived.
pub struct RequestAuth<'a> {
    checker: Option<(&'a Authorizer, Arc<MetadataImage>)>,
    principal: &'a str,
    host: IpAddr,
    api: &'static str,
}

impl<'a> RequestAuth<'a> {
    /// The view of a request of `api` from `principal` at `host`;
    /// `authorizer` `None` allows everything.
    pub fn new(
        authorizer: Option<&'a Authorizer>,
        image: impl FnOnce() -> Arc<MetadataImage>,
        principal: &'a str,
        host: IpAddr,
        api: &'static str,
    ) -> Self {
        RequestAuth {
            checker: authorizer.map(|a| (a, image())),
            principal,
            host,
            api,
        }
    }

    /// A view that allows everything (no authorizer; tests).
    pub fn allow_all() -> RequestAuth<'static> {
        RequestAuth {
            checker: None,
            principal: crate::network::ANONYMOUS,
            host: IpAddr::from([127, 0, 0, 1]),
            api: "",
        }
    }

    /// Whether an authorizer is configured.
    pub fn enabled(&self) -> bool {
        self.checker.is_some()
    }

    fn decide(&self, operation: AclOperation, resource_type: AclResourceType, name: &str) -> bool {
        let Some((authorizer, image)) = &self.checker else {
            return true;
        };
        authorizer.super_users.contains(self.principal)
            || image.acls.authorize(
                &Action {
                    principal: self.principal,
                    host: self.host,
                    operation,
                    resource_type,
                    resource_name: name,
                },
                authorizer.allow_everyone_if_no_acl_found,
            )
    }

    /// Whether the client may do `operation` on the resource; a denial is
    /// logged and counted (the client asked for this resource).
    pub fn allowed(
        &self,
        operation: AclOperation,
        resource_type: AclResourceType,
        name: &str,
    ) -> bool {
        let allowed = self.decide(operation, resource_type, name);
        if !allowed {
            tracing::info!(
                target: "weir::authorizer",
                principal = self.principal,
                host = %self.host,
                operation = operation.name(),
                resource = %format_args!("{}:LITERAL:{}", resource_type.name(), name),
                request = self.api,
                "Denied"
            );
            metrics::counter!(
                "weir_authorization_denials_total",
                "operation" => operation.name(),
                "resource_type" => resource_type.name(),
            )
            .increment(1);
        }
        allowed
    }

    /// [`allowed`](Self::allowed) without logging a denial: for checks
    /// that filter what a client sees (Kafka's `logIfDenied = false`).
    pub fn allowed_quietly(
        &self,
        operation: AclOperation,
        resource_type: AclResourceType,
        name: &str,
    ) -> bool {
        self.decide(operation, resource_type, name)
    }

    /// [`allowed`](Self::allowed) on a topic.
    pub fn topic(&self, operation: AclOperation, name: &str) -> bool {
        self.allowed(operation, AclResourceType::Topic, name)
    }

    /// The topics among `names` the client may not do `operation` on
    /// (each checked once, denials logged).
    pub fn denied_topics<'n>(
        &self,
        operation: AclOperation,
        names: impl Iterator<Item = &'n str>,
    ) -> HashSet<String> {
        if !self.enabled() {
            return HashSet::new();
        }
        let mut checked = HashSet::new();
        names
            .filter(|name| checked.insert(*name))
            .filter(|name| !self.topic(operation, name))
            .map(str::to_string)
            .collect()
    }

    /// [`allowed`](Self::allowed) on a group.
    pub fn group(&self, operation: AclOperation, name: &str) -> bool {
        self.allowed(operation, AclResourceType::Group, name)
    }

    /// [`allowed`](Self::allowed) on the cluster.
    pub fn cluster(&self, operation: AclOperation) -> bool {
        self.allowed(operation, AclResourceType::Cluster, CLUSTER_NAME)
    }

    /// Whether the client may do `operation` on some resource of
    /// `resource_type` (Kafka's `authorizeByResourceType`, KIP-679: Write
    /// on any topic lets a producer be idempotent).
    pub fn on_any(&self, operation: AclOperation, resource_type: AclResourceType) -> bool {
        let Some((_, image)) = &self.checker else {
            return true;
        };
        self.decide(operation, resource_type, "hardcode")
            || image.acls.authorize_by_resource_type(
                self.principal,
                self.host,
                operation,
                resource_type,
            )
    }

    /// The `*_authorized_operations` bit field of a resource (KIP-430,
    /// Kafka's `AuthHelper.authorizedOperations`): bit `n` set when the
    /// operation of code `n` among those the resource type supports is
    /// allowed; [`AUTHORIZED_OPERATIONS_OMITTED`] when not `requested`.
    pub fn authorized_operations(
        &self,
        resource_type: AclResourceType,
        name: &str,
        requested: bool,
    ) -> i32 {
        if !requested {
            return AUTHORIZED_OPERATIONS_OMITTED;
        }
        supported_operations(resource_type)
            .iter()
            .filter(|op| self.decide(**op, resource_type, name))
            .fold(0, |bits, op| bits | 1 << op.code())
    }
}

/// The check that refuses a whole request, as Kafka's handlers that answer
/// `getErrorResponse` of one error: `Some(error)` when `request` is
/// refused. Per-resource checks are the handlers' (they answer per topic,
/// group or partition).
///
/// - ClusterAuthorizationFailed: DescribeAcls, DescribeQuorum,
///   DescribeUserScramCredentials (Describe on the cluster);
///   CreateAcls, DeleteAcls, AlterUserScramCredentials, ElectLeaders
///   (Alter); DescribeClientQuotas (DescribeConfigs); AlterClientQuotas
///   (AlterConfigs); InitProducerId without a
///   transactional id (IdempotentWrite on the cluster, or Write on some
///   topic, KIP-679).
/// - TransactionalIdAuthorizationFailed: Produce and InitProducerId with a
///   transactional id (Write on it).
/// - GroupAuthorizationFailed: JoinGroup, SyncGroup, Heartbeat,
///   LeaveGroup, OffsetCommit (Read on the group); OffsetDelete (Delete).
pub fn request_refused(
    auth: &RequestAuth<'_>,
    request: &kafka_protocol::messages::RequestKind,
) -> Option<kafka_protocol::ResponseError> {
    use kafka_protocol::messages::RequestKind as R;
    use kafka_protocol::ResponseError as E;
    use AclOperation::*;
    if !auth.enabled() {
        return None;
    }
    let cluster = |op| (!auth.cluster(op)).then_some(E::ClusterAuthorizationFailed);
    let group = |op, name: &str| (!auth.group(op, name)).then_some(E::GroupAuthorizationFailed);
    let transactional_id = |name: &str| {
        (!auth.allowed(Write, AclResourceType::TransactionalId, name))
            .then_some(E::TransactionalIdAuthorizationFailed)
    };
    match request {
        R::DescribeAcls(_) | R::DescribeQuorum(_) | R::DescribeUserScramCredentials(_) => {
            cluster(Describe)
        }
        R::CreateAcls(_)
        | R::DeleteAcls(_)
        | R::AlterUserScramCredentials(_)
        | R::ElectLeaders(_) => cluster(Alter),
        R::DescribeClientQuotas(_) => cluster(DescribeConfigs),
        R::AlterClientQuotas(_) => cluster(AlterConfigs),
        R::Produce(r) => r
            .transactional_id
            .as_deref()
            .and_then(|id| transactional_id(id)),
        R::InitProducerId(r) => match r.transactional_id.as_deref() {
            Some(id) => transactional_id(id),
            None => {
                (!(auth.allowed_quietly(IdempotentWrite, AclResourceType::Cluster, CLUSTER_NAME)
                    || auth.on_any(Write, AclResourceType::Topic)))
                .then(|| {
                    auth.cluster(IdempotentWrite);
                    E::ClusterAuthorizationFailed
                })
            }
        },
        R::JoinGroup(r) => group(Read, &r.group_id),
        R::SyncGroup(r) => group(Read, &r.group_id),
        R::Heartbeat(r) => group(Read, &r.group_id),
        R::LeaveGroup(r) => group(Read, &r.group_id),
        R::OffsetCommit(r) => group(Read, &r.group_id),
        R::OffsetDelete(r) => group(Delete, &r.group_id),
        _ => None,
    }
}

/// Kafka's authorization of a config resource of Describe/AlterConfigs
/// (`operation` DescribeConfigs or AlterConfigs): topics and groups by
/// name, brokers, broker loggers and client-metrics resources through the
/// cluster. `Some(error)` when refused: TOPIC_, GROUP_ or
/// CLUSTER_AUTHORIZATION_FAILED. Unknown resource types are left to the
/// handler.
pub fn config_resource_refused(
    auth: &RequestAuth<'_>,
    operation: AclOperation,
    resource_type: i8,
    name: &str,
) -> Option<kafka_protocol::ResponseError> {
    use kafka_protocol::ResponseError;
    // ConfigResource.Type ids: 2 TOPIC, 4 BROKER, 8 BROKER_LOGGER,
    // 16 CLIENT_METRICS, 32 GROUP.
    let (allowed, error) = match resource_type {
        2 => (
            auth.topic(operation, name),
            ResponseError::TopicAuthorizationFailed,
        ),
        32 => (
            auth.group(operation, name),
            ResponseError::GroupAuthorizationFailed,
        ),
        4 | 8 | 16 => (
            auth.cluster(operation),
            ResponseError::ClusterAuthorizationFailed,
        ),
        _ => return None,
    };
    (!allowed).then_some(error)
}

/// The operations a resource type supports (Kafka's
/// `AclEntry.supportedOperations`).
pub fn supported_operations(resource_type: AclResourceType) -> &'static [AclOperation] {
    use AclOperation::*;
    match resource_type {
        AclResourceType::Topic => &[
            Read,
            Write,
            Create,
            Describe,
            Delete,
            Alter,
            DescribeConfigs,
            AlterConfigs,
        ],
        AclResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
        AclResourceType::Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
        AclResourceType::TransactionalId => &[Describe, Write, TwoPhaseCommit],
        AclResourceType::DelegationToken => &[Describe],
        AclResourceType::User => &[CreateTokens, DescribeTokens],
        AclResourceType::Any | AclResourceType::Unknown => &[],
    }
}

#[cfg(test)]
mod tests {
    use weir_controller::acl::{AclPermissionType, PatternType, StandardAcl};

    use super::*;

    #[test]
    fn bits_match_kafka_without_an_authorizer() {
        // As Kafka 4.x answers with no authorizer configured.
        let auth = RequestAuth::allow_all();
        assert_eq!(
            auth.authorized_operations(AclResourceType::Topic, "t", true),
            3576
        );
        assert_eq!(
            auth.authorized_operations(AclResourceType::Group, "g", true),
            3400
        );
        assert_eq!(
            auth.authorized_operations(AclResourceType::Cluster, CLUSTER_NAME, true),
            8096
        );
        assert_eq!(
            auth.authorized_operations(AclResourceType::Topic, "t", false),
            i32::MIN
        );
    }

    fn image_with(acls: Vec<StandardAcl>) -> Arc<MetadataImage> {
        let mut image = MetadataImage::default();
        let cache = Arc::make_mut(&mut image.acls);
        for (i, acl) in acls.into_iter().enumerate() {
            cache.insert(uuid::Uuid::from_u128(i as u128 + 1), acl);
        }
        Arc::new(image)
    }

    fn allow(
        resource_type: AclResourceType,
        name: &str,
        principal: &str,
        op: AclOperation,
    ) -> StandardAcl {
        StandardAcl {
            resource_type,
            resource_name: name.into(),
            pattern_type: PatternType::Literal,
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission_type: AclPermissionType::Allow,
        }
    }

    fn authorizer(super_users: &[&str], allow_everyone: bool) -> Authorizer {
        let config = BrokerConfig {
            authorizer_class_name: STANDARD_AUTHORIZER_CLASSES[0].into(),
            super_users: super_users.iter().map(|s| s.to_string()).collect(),
            allow_everyone_if_no_acl_found: allow_everyone,
            ..BrokerConfig::default()
        };
        Authorizer::from_config(&config).unwrap()
    }

    #[test]
    fn super_users_and_the_default_decide_without_acls() {
        let host = IpAddr::from([127, 0, 0, 1]);
        let a = authorizer(&["User:admin"], false);
        let image = image_with(vec![]);
        let admin = RequestAuth::new(Some(&a), || image.clone(), "User:admin", host, "Produce");
        assert!(admin.topic(AclOperation::Write, "t"));
        let alice = RequestAuth::new(Some(&a), || image.clone(), "User:alice", host, "Produce");
        assert!(!alice.topic(AclOperation::Write, "t"));
        let open = authorizer(&[], true);
        let alice = RequestAuth::new(Some(&open), || image.clone(), "User:alice", host, "Produce");
        assert!(alice.topic(AclOperation::Write, "t"));
        assert!(BrokerConfig::default().authorizer_class_name.is_empty());
        assert!(Authorizer::from_config(&BrokerConfig::default()).is_none());
    }

    /// Kafka's handleOffsetForLeaderEpochRequest lets anyone through to
    /// its per-topic check (ClusterAction, or Describe on the topic),
    /// whatever the replica id: librdkafka sends -1 where the Java
    /// consumer sends -2.
    #[test]
    fn offset_for_leader_epoch_is_checked_per_topic_not_refused_whole() {
        let a = authorizer(&[], false);
        let image = image_with(vec![]);
        let host = IpAddr::from([127, 0, 0, 1]);
        let alice = RequestAuth::new(
            Some(&a),
            || image.clone(),
            "User:alice",
            host,
            "OffsetForLeaderEpoch",
        );
        for replica_id in [-2, -1, 3] {
            let mut request = kafka_protocol::messages::OffsetForLeaderEpochRequest::default();
            request.replica_id = kafka_protocol::messages::BrokerId(replica_id);
            let request = kafka_protocol::messages::RequestKind::OffsetForLeaderEpoch(request);
            assert_eq!(
                request_refused(&alice, &request),
                None,
                "replica id {replica_id}"
            );
        }
    }

    #[test]
    fn authorized_operations_and_write_on_any_topic() {
        let host = IpAddr::from([127, 0, 0, 1]);
        let a = authorizer(&[], false);
        let image = image_with(vec![allow(
            AclResourceType::Topic,
            "t",
            "User:alice",
            AclOperation::Write,
        )]);
        let alice = RequestAuth::new(Some(&a), || image.clone(), "User:alice", host, "Metadata");
        // Write, and the Describe it implies.
        assert_eq!(
            alice.authorized_operations(AclResourceType::Topic, "t", true),
            1 << 4 | 1 << 8
        );
        assert!(alice.on_any(AclOperation::Write, AclResourceType::Topic));
        assert!(!alice.cluster(AclOperation::IdempotentWrite));
        let bob = RequestAuth::new(Some(&a), || image.clone(), "User:bob", host, "Metadata");
        assert!(!bob.on_any(AclOperation::Write, AclResourceType::Topic));
    }
}
