//! Access control lists as Kafka's KRaft mode keeps and evaluates them.
//!
//! The types mirror Kafka's `org.apache.kafka.common.acl` and
//! `org.apache.kafka.common.resource` enums with their wire codes;
//! [`StandardAcl`] is one ACL as `AccessControlEntryRecord` stores it;
//! [`AclCache`] is the set of ACLs in a [`MetadataImage`](crate::MetadataImage),
//! indexed for [`AclCache::authorize`], which follows Kafka's
//! `StandardAuthorizerData.authorize` rule for rule. No I/O, no config: the
//! broker's authorizer (`broker/src/authorizer.rs`) adds `super.users` and
//! `allow.everyone.if.no.acl.found`.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// The id of one ACL (`AccessControlEntryRecord.Id`).
pub type AclId = uuid::Uuid;

/// The resource name of a literal ACL that matches every resource of its
/// type (Kafka's `ResourcePattern.WILDCARD_RESOURCE`).
pub const WILDCARD_RESOURCE: &str = "*";

/// The principal of an ACL that matches every principal (Kafka's
/// `Acl.WILDCARD_PRINCIPAL_STRING`).
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// The host of an ACL that matches every client address.
pub const WILDCARD_HOST: &str = "*";

/// The only name of the cluster resource (Kafka's `CLUSTER_NAME`).
pub const CLUSTER_NAME: &str = "kafka-cluster";

macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $code:literal => $text:literal ),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// The value for a wire code; codes Kafka does not know are
            /// `Unknown` (as Kafka's `fromCode`).
            pub fn from_code(code: i8) -> Self {
                match code {
                    $( $code => $name::$variant, )+
                    _ => $name::Unknown,
                }
            }

            /// The wire code.
            pub fn code(self) -> i8 {
                match self {
                    $( $name::$variant => $code, )+
                }
            }

            /// Kafka's upper-case name (`toString()` of its enum).
            pub fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

wire_enum! {
    /// Kafka's `ResourceType`.
    AclResourceType {
        /// A code this version does not know.
        Unknown = 0 => "UNKNOWN",
        /// Any type (filters only).
        Any = 1 => "ANY",
        /// A topic.
        Topic = 2 => "TOPIC",
        /// A consumer group.
        Group = 3 => "GROUP",
        /// The cluster (named `kafka-cluster`).
        Cluster = 4 => "CLUSTER",
        /// A transactional id.
        TransactionalId = 5 => "TRANSACTIONAL_ID",
        /// A delegation token.
        DelegationToken = 6 => "DELEGATION_TOKEN",
        /// A user (KIP-373).
        User = 7 => "USER",
    }
}

wire_enum! {
    /// Kafka's `PatternType` (KIP-290).
    PatternType {
        /// A code this version does not know.
        Unknown = 0 => "UNKNOWN",
        /// Any pattern type (filters only).
        Any = 1 => "ANY",
        /// Every ACL that applies to the named resource (filters only).
        Match = 2 => "MATCH",
        /// The name is the resource's exact name, or `*` for all.
        Literal = 3 => "LITERAL",
        /// The name is a prefix of the resources' names.
        Prefixed = 4 => "PREFIXED",
    }
}

wire_enum! {
    /// Kafka's `AclOperation`.
    AclOperation {
        /// A code this version does not know.
        Unknown = 0 => "UNKNOWN",
        /// Any operation (filters only).
        Any = 1 => "ANY",
        /// Every operation.
        All = 2 => "ALL",
        /// Read.
        Read = 3 => "READ",
        /// Write.
        Write = 4 => "WRITE",
        /// Create.
        Create = 5 => "CREATE",
        /// Delete.
        Delete = 6 => "DELETE",
        /// Alter.
        Alter = 7 => "ALTER",
        /// Describe.
        Describe = 8 => "DESCRIBE",
        /// Cluster action (inter-broker requests).
        ClusterAction = 9 => "CLUSTER_ACTION",
        /// Describe configs.
        DescribeConfigs = 10 => "DESCRIBE_CONFIGS",
        /// Alter configs.
        AlterConfigs = 11 => "ALTER_CONFIGS",
        /// Idempotent write (KIP-679 lets Write on any topic imply it).
        IdempotentWrite = 12 => "IDEMPOTENT_WRITE",
        /// Create delegation tokens.
        CreateTokens = 13 => "CREATE_TOKENS",
        /// Describe delegation tokens.
        DescribeTokens = 14 => "DESCRIBE_TOKENS",
        /// Two-phase commit (KIP-939).
        TwoPhaseCommit = 15 => "TWO_PHASE_COMMIT",
    }
}

wire_enum! {
    /// Kafka's `AclPermissionType`.
    AclPermissionType {
        /// A code this version does not know.
        Unknown = 0 => "UNKNOWN",
        /// Any permission (filters only).
        Any = 1 => "ANY",
        /// Deny: wins over every allow.
        Deny = 2 => "DENY",
        /// Allow.
        Allow = 3 => "ALLOW",
    }
}

/// One ACL (Kafka's `StandardAcl`, an `AclBinding` flattened): whether
/// `principal` from `host` may do `operation` on the resources `pattern_type`
/// and `resource_name` name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StandardAcl {
    /// The resource type (never `Any` or `Unknown`).
    pub resource_type: AclResourceType,
    /// The resource name, prefix, or `*`.
    pub resource_name: String,
    /// `Literal` or `Prefixed`.
    pub pattern_type: PatternType,
    /// `<type>:<name>`, e.g. `User:alice` or `User:*`.
    pub principal: String,
    /// A client address, or `*`.
    pub host: String,
    /// The operation (never `Any` or `Unknown`).
    pub operation: AclOperation,
    /// `Allow` or `Deny`.
    pub permission_type: AclPermissionType,
}

/// What selects ACLs in DescribeAcls and DeleteAcls (Kafka's
/// `AclBindingFilter`: a `ResourcePatternFilter` and an
/// `AccessControlEntryFilter`). `None` strings match anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclBindingFilter {
    /// A type, or `Any`.
    pub resource_type: AclResourceType,
    /// A name, or `None` for any.
    pub resource_name: Option<String>,
    /// `Any`, `Match`, `Literal` or `Prefixed`.
    pub pattern_type: PatternType,
    /// A principal, or `None` for any.
    pub principal: Option<String>,
    /// A host, or `None` for any.
    pub host: Option<String>,
    /// An operation, or `Any`.
    pub operation: AclOperation,
    /// A permission, or `Any`.
    pub permission_type: AclPermissionType,
}

impl AclBindingFilter {
    /// Whether any element is `Unknown` (Kafka's `isUnknown` of the pattern
    /// and entry filters, refused by `AclControlManager.validateFilter`).
    pub fn is_unknown(&self) -> bool {
        self.resource_type == AclResourceType::Unknown
            || self.pattern_type == PatternType::Unknown
            || self.operation == AclOperation::Unknown
            || self.permission_type == AclPermissionType::Unknown
    }

    /// Whether `acl` is selected (Kafka's `ResourcePatternFilter.matches`
    /// and `AccessControlEntryFilter.matches`). A `Match` filter with a
    /// name selects the literal ACLs of that name and of `*`, and the
    /// prefixed ACLs whose prefix starts the name.
    pub fn matches(&self, acl: &StandardAcl) -> bool {
        self.matches_pattern(acl) && self.matches_entry(acl)
    }

    fn matches_pattern(&self, acl: &StandardAcl) -> bool {
        if self.resource_type != AclResourceType::Any && self.resource_type != acl.resource_type {
            return false;
        }
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            && self.pattern_type != acl.pattern_type
        {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == acl.pattern_type {
            return *name == acl.resource_name;
        }
        match acl.pattern_type {
            PatternType::Literal => {
                *name == acl.resource_name || acl.resource_name == WILDCARD_RESOURCE
            }
            PatternType::Prefixed => name.starts_with(&acl.resource_name),
            _ => false,
        }
    }

    fn matches_entry(&self, acl: &StandardAcl) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == AclOperation::Any || self.operation == acl.operation)
            && (self.permission_type == AclPermissionType::Any
                || self.permission_type == acl.permission_type)
    }
}

/// Why a new ACL is refused (Kafka's `AclControlManager.validateNewAcl`,
/// and the principal's form, which Kafka's `SecurityUtils.parseKafkaPrincipal`
/// checks): the message Kafka's `InvalidRequestException` carries.
pub fn validate_new_acl(acl: &StandardAcl) -> Result<(), String> {
    if matches!(
        acl.resource_type,
        AclResourceType::Unknown | AclResourceType::Any
    ) {
        return Err(format!("Invalid resourceType {}", acl.resource_type));
    }
    if !matches!(
        acl.pattern_type,
        PatternType::Literal | PatternType::Prefixed
    ) {
        return Err(format!("Invalid patternType {}", acl.pattern_type));
    }
    if matches!(acl.operation, AclOperation::Unknown | AclOperation::Any) {
        return Err(format!("Invalid operation {}", acl.operation));
    }
    if !matches!(
        acl.permission_type,
        AclPermissionType::Allow | AclPermissionType::Deny
    ) {
        return Err(format!("Invalid permissionType {}", acl.permission_type));
    }
    if acl.resource_name.is_empty() {
        return Err("Resource name should not be empty".into());
    }
    match acl.principal.split_once(':') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(()),
        _ => Err(format!(
            "Could not parse principal from `{}` (no colon is present separating the principal \
             type from the principal name)",
            acl.principal
        )),
    }
}

/// A request to authorize: may `principal` from `host` do `operation` on
/// the resource `resource_type`/`resource_name` (a literal name)?
#[derive(Debug, Clone, Copy)]
pub struct Action<'a> {
    /// `<type>:<name>` of the client.
    pub principal: &'a str,
    /// The client's address.
    pub host: IpAddr,
    /// The operation.
    pub operation: AclOperation,
    /// The resource type.
    pub resource_type: AclResourceType,
    /// The resource's name.
    pub resource_name: &'a str,
}

/// The ACLs of a metadata image, by id, with an index for authorization.
///
/// Equality and serialization look at the ACLs by id only; the index is
/// rebuilt on deserialization.
#[derive(Debug, Clone, Default)]
pub struct AclCache {
    by_id: BTreeMap<AclId, StandardAcl>,
    /// Literal ACLs by (type, name); `*` is a name here too.
    literal: HashMap<(AclResourceType, String), Vec<StandardAcl>>,
    /// Prefixed ACLs by type, then prefix.
    prefixed: HashMap<AclResourceType, BTreeMap<String, Vec<StandardAcl>>>,
}

impl PartialEq for AclCache {
    fn eq(&self, other: &Self) -> bool {
        self.by_id == other.by_id
    }
}

impl Eq for AclCache {}

impl Serialize for AclCache {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.by_id.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for AclCache {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let by_id = BTreeMap::<AclId, StandardAcl>::deserialize(deserializer)?;
        let mut cache = AclCache::default();
        for (id, acl) in by_id {
            cache.insert(id, acl);
        }
        Ok(cache)
    }
}

impl AclCache {
    /// The number of ACLs.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether there is no ACL.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The ACL with this id.
    pub fn get(&self, id: &AclId) -> Option<&StandardAcl> {
        self.by_id.get(id)
    }

    /// Every ACL with its id, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&AclId, &StandardAcl)> {
        self.by_id.iter()
    }

    /// Whether an ACL equal to `acl` exists.
    pub fn contains(&self, acl: &StandardAcl) -> bool {
        self.section(acl.resource_type, acl.pattern_type, &acl.resource_name)
            .is_some_and(|acls| acls.contains(acl))
    }

    /// Adds `acl` under `id` (replay of an `AccessControlEntryRecord`).
    pub fn insert(&mut self, id: AclId, acl: StandardAcl) {
        if let Some(old) = self.by_id.insert(id, acl.clone()) {
            self.unindex(&old);
        }
        let section = match acl.pattern_type {
            PatternType::Prefixed => self
                .prefixed
                .entry(acl.resource_type)
                .or_default()
                .entry(acl.resource_name.clone())
                .or_default(),
            _ => self
                .literal
                .entry((acl.resource_type, acl.resource_name.clone()))
                .or_default(),
        };
        section.push(acl);
    }

    /// Removes the ACL `id` (replay of a `RemoveAccessControlEntryRecord`);
    /// `None` when there is none.
    pub fn remove(&mut self, id: &AclId) -> Option<StandardAcl> {
        let acl = self.by_id.remove(id)?;
        self.unindex(&acl);
        Some(acl)
    }

    fn unindex(&mut self, acl: &StandardAcl) {
        let remove_one = |acls: &mut Vec<StandardAcl>| {
            if let Some(i) = acls.iter().position(|a| a == acl) {
                acls.swap_remove(i);
            }
            acls.is_empty()
        };
        match acl.pattern_type {
            PatternType::Prefixed => {
                if let Some(by_prefix) = self.prefixed.get_mut(&acl.resource_type) {
                    if by_prefix
                        .get_mut(&acl.resource_name)
                        .is_some_and(remove_one)
                    {
                        by_prefix.remove(&acl.resource_name);
                    }
                    if by_prefix.is_empty() {
                        self.prefixed.remove(&acl.resource_type);
                    }
                }
            }
            _ => {
                let key = (acl.resource_type, acl.resource_name.clone());
                if self.literal.get_mut(&key).is_some_and(remove_one) {
                    self.literal.remove(&key);
                }
            }
        }
    }

    fn section(
        &self,
        resource_type: AclResourceType,
        pattern_type: PatternType,
        name: &str,
    ) -> Option<&Vec<StandardAcl>> {
        match pattern_type {
            PatternType::Prefixed => self.prefixed.get(&resource_type)?.get(name),
            _ => self.literal.get(&(resource_type, name.to_string())),
        }
    }

    /// Every ACL whose pattern applies to the resource `resource_type`/`name`:
    /// literal ACLs of that name and of `*`, and prefixed ACLs whose prefix
    /// starts the name.
    fn applicable<'a>(
        &'a self,
        resource_type: AclResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a StandardAcl> + 'a {
        let literal = self
            .literal
            .get(&(resource_type, name.to_string()))
            .into_iter()
            .flatten();
        let wildcard = (name != WILDCARD_RESOURCE)
            .then(|| {
                self.literal
                    .get(&(resource_type, WILDCARD_RESOURCE.to_string()))
            })
            .flatten()
            .into_iter()
            .flatten();
        let prefixed = self
            .prefixed
            .get(&resource_type)
            .into_iter()
            .flat_map(move |by_prefix| {
                name.char_indices()
                    .map(|(i, c)| &name[..i + c.len_utf8()])
                    .filter_map(|prefix| by_prefix.get(prefix))
                    .flatten()
            });
        literal.chain(wildcard).chain(prefixed)
    }

    /// Whether `action` is allowed by the ACLs, as Kafka's
    /// `StandardAuthorizerData.findAclRule`: a matching DENY wins; else a
    /// matching ALLOW allows; else, when no ACL at all applies to the
    /// resource (whoever it names), `no_acl_found`
    /// (`allow.everyone.if.no.acl.found`) decides; else denied. Super users
    /// are the caller's business.
    ///
    /// An ACL matches when its principal is the client's or `User:*`, its
    /// host the client's address or `*`, and its operation `ALL` or the
    /// action's; an ALLOW of READ, WRITE, DELETE or ALTER also allows
    /// DESCRIBE, and an ALLOW of ALTER_CONFIGS also DESCRIBE_CONFIGS (never
    /// so for DENY).
    pub fn authorize(&self, action: &Action<'_>, no_acl_found: bool) -> bool {
        let mut has_resource_acls = false;
        let mut allowed = false;
        for acl in self.applicable(action.resource_type, action.resource_name) {
            has_resource_acls = true;
            match acl_result(acl, action) {
                Some(AclPermissionType::Deny) => return false,
                Some(_) => allowed = true,
                None => {}
            }
        }
        allowed || (!has_resource_acls && no_acl_found)
    }

    /// Whether the client may do `operation` on at least one resource of
    /// `resource_type` (Kafka's default `Authorizer.authorizeByResourceType`,
    /// used for IdempotentWrite through Write on any topic, KIP-679): an
    /// allow on some literal name or prefix not covered by a matching deny,
    /// or a wildcard allow without a wildcard deny. Kafka first tries
    /// [`authorize`](Self::authorize) on a resource named `hardcode` (which
    /// lets super users and the no-ACL default through); that is the
    /// caller's part.
    pub fn authorize_by_resource_type(
        &self,
        principal: &str,
        host: IpAddr,
        operation: AclOperation,
        resource_type: AclResourceType,
    ) -> bool {
        let mut deny_literal: Vec<&str> = Vec::new();
        let mut deny_prefixed: Vec<&str> = Vec::new();
        let mut allow: Vec<(&StandardAcl, bool)> = Vec::new();
        let mut wildcard_allow = false;
        for acl in self.by_id.values() {
            if acl.resource_type != resource_type
                || !host_matches(&acl.host, host)
                || !(acl.principal == principal || acl.principal == WILDCARD_PRINCIPAL)
                || !(acl.operation == operation || acl.operation == AclOperation::All)
            {
                continue;
            }
            let literal = acl.pattern_type == PatternType::Literal;
            match acl.permission_type {
                AclPermissionType::Deny if literal && acl.resource_name == WILDCARD_RESOURCE => {
                    return false;
                }
                AclPermissionType::Deny if literal => deny_literal.push(&acl.resource_name),
                AclPermissionType::Deny => deny_prefixed.push(&acl.resource_name),
                AclPermissionType::Allow if literal && acl.resource_name == WILDCARD_RESOURCE => {
                    wildcard_allow = true;
                }
                AclPermissionType::Allow => allow.push((acl, literal)),
                _ => {}
            }
        }
        if wildcard_allow {
            return true;
        }
        allow.iter().any(|(acl, literal)| {
            let name = acl.resource_name.as_str();
            let denied_literally = *literal && deny_literal.contains(&name);
            let denied_by_prefix = deny_prefixed.iter().any(|prefix| name.starts_with(prefix));
            !denied_literally && !denied_by_prefix
        })
    }
}

/// Kafka's `StandardAuthorizerData.findResult`: `Some(permission)` when
/// `acl` applies to the client and operation of `action`.
fn acl_result(acl: &StandardAcl, action: &Action<'_>) -> Option<AclPermissionType> {
    if acl.principal != action.principal && acl.principal != WILDCARD_PRINCIPAL {
        return None;
    }
    if !host_matches(&acl.host, action.host) {
        return None;
    }
    if acl.operation != AclOperation::All {
        let applies = if acl.permission_type == AclPermissionType::Allow {
            match action.operation {
                AclOperation::Describe => matches!(
                    acl.operation,
                    AclOperation::Describe
                        | AclOperation::Read
                        | AclOperation::Write
                        | AclOperation::Delete
                        | AclOperation::Alter
                ),
                AclOperation::DescribeConfigs => matches!(
                    acl.operation,
                    AclOperation::DescribeConfigs | AclOperation::AlterConfigs
                ),
                op => op == acl.operation,
            }
        } else {
            action.operation == acl.operation
        };
        if !applies {
            return None;
        }
    }
    Some(acl.permission_type)
}

/// Whether an ACL's host names the client address `host`: `*`, or the
/// same address (compared as addresses, so `::1` and Java's
/// `0:0:0:0:0:0:0:1` are one).
fn host_matches(acl_host: &str, host: IpAddr) -> bool {
    acl_host == WILDCARD_HOST
        || acl_host
            .parse::<IpAddr>()
            .is_ok_and(|parsed| parsed == host || parsed.to_canonical() == host.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        resource_type: AclResourceType,
        name: &str,
        pattern_type: PatternType,
        principal: &str,
        operation: AclOperation,
        permission_type: AclPermissionType,
    ) -> StandardAcl {
        StandardAcl {
            resource_type,
            resource_name: name.into(),
            pattern_type,
            principal: principal.into(),
            host: WILDCARD_HOST.into(),
            operation,
            permission_type,
        }
    }

    fn topic_allow(
        name: &str,
        pattern: PatternType,
        principal: &str,
        op: AclOperation,
    ) -> StandardAcl {
        acl(
            AclResourceType::Topic,
            name,
            pattern,
            principal,
            op,
            AclPermissionType::Allow,
        )
    }

    fn cache(acls: Vec<StandardAcl>) -> AclCache {
        let mut cache = AclCache::default();
        for (i, acl) in acls.into_iter().enumerate() {
            cache.insert(uuid::Uuid::from_u128(i as u128 + 1), acl);
        }
        cache
    }

    fn action<'a>(principal: &'a str, op: AclOperation, topic: &'a str) -> Action<'a> {
        Action {
            principal,
            host: "127.0.0.1".parse().unwrap(),
            operation: op,
            resource_type: AclResourceType::Topic,
            resource_name: topic,
        }
    }

    use AclOperation::*;
    use PatternType::{Literal, Prefixed};

    #[test]
    fn no_acl_on_the_resource_falls_back_to_the_default() {
        let cache = cache(vec![topic_allow("other", Literal, "User:alice", Read)]);
        assert!(!cache.authorize(&action("User:alice", Read, "foo"), false));
        assert!(cache.authorize(&action("User:alice", Read, "foo"), true));
        // An ACL on the resource for someone else: denied, whatever the default.
        let cache = self::cache(vec![topic_allow("foo", Literal, "User:bob", Read)]);
        assert!(!cache.authorize(&action("User:alice", Read, "foo"), true));
    }

    #[test]
    fn literal_wildcard_and_prefixed_patterns_apply() {
        let cache = cache(vec![
            topic_allow("foo", Literal, "User:alice", Read),
            topic_allow("*", Literal, "User:bob", Write),
            topic_allow("pre", Prefixed, "User:carol", Read),
        ]);
        assert!(cache.authorize(&action("User:alice", Read, "foo"), false));
        assert!(!cache.authorize(&action("User:alice", Read, "foobar"), false));
        assert!(cache.authorize(&action("User:bob", Write, "anything"), false));
        assert!(cache.authorize(&action("User:carol", Read, "prefix"), false));
        assert!(cache.authorize(&action("User:carol", Read, "pre"), false));
        assert!(!cache.authorize(&action("User:carol", Read, "pr"), false));
        assert!(!cache.authorize(&action("User:carol", Write, "prefix"), false));
    }

    #[test]
    fn deny_wins_and_does_not_imply() {
        let mut acls = vec![
            topic_allow("foo", Literal, "User:*", All),
            acl(
                AclResourceType::Topic,
                "fo",
                Prefixed,
                "User:alice",
                Write,
                AclPermissionType::Deny,
            ),
        ];
        let c = cache(acls.clone());
        assert!(!c.authorize(&action("User:alice", Write, "foo"), false));
        assert!(c.authorize(&action("User:alice", Read, "foo"), false));
        // A DENY of Write does not deny Describe.
        assert!(c.authorize(&action("User:alice", Describe, "foo"), false));
        assert!(c.authorize(&action("User:bob", Write, "foo"), false));
        acls.push(acl(
            AclResourceType::Topic,
            "*",
            Literal,
            "User:*",
            All,
            AclPermissionType::Deny,
        ));
        assert!(!cache(acls).authorize(&action("User:bob", Read, "foo"), true));
    }

    #[test]
    fn allows_imply_describe_and_describe_configs() {
        for op in [Read, Write, Delete, Alter, Describe] {
            let c = cache(vec![topic_allow("t", Literal, "User:a", op)]);
            assert!(c.authorize(&action("User:a", Describe, "t"), false), "{op}");
        }
        for op in [Create, ClusterAction, DescribeConfigs, AlterConfigs] {
            let c = cache(vec![topic_allow("t", Literal, "User:a", op)]);
            assert!(
                !c.authorize(&action("User:a", Describe, "t"), false),
                "{op}"
            );
        }
        let c = cache(vec![topic_allow("t", Literal, "User:a", AlterConfigs)]);
        assert!(c.authorize(&action("User:a", DescribeConfigs, "t"), false));
        let c = cache(vec![topic_allow("t", Literal, "User:a", Read)]);
        assert!(!c.authorize(&action("User:a", Write, "t"), false));
    }

    #[test]
    fn hosts_match_as_addresses() {
        let mut a = topic_allow("t", Literal, "User:a", Read);
        a.host = "0:0:0:0:0:0:0:1".into();
        let c = cache(vec![a]);
        let mut act = action("User:a", Read, "t");
        act.host = "::1".parse().unwrap();
        assert!(c.authorize(&act, false));
        act.host = "127.0.0.1".parse().unwrap();
        assert!(!c.authorize(&act, false));
    }

    #[test]
    fn removal_updates_the_index() {
        let mut c = cache(vec![
            topic_allow("t", Literal, "User:a", Read),
            topic_allow("t", Prefixed, "User:b", Read),
        ]);
        assert_eq!(c.len(), 2);
        let removed = c.remove(&uuid::Uuid::from_u128(2)).unwrap();
        assert_eq!(removed.pattern_type, Prefixed);
        // Before, the prefixed ACL applied to "tt" (allowing b); now none does.
        assert!(!c.authorize(&action("User:b", Read, "tt"), false));
        assert!(c.authorize(&action("User:b", Read, "tt"), true));
        c.remove(&uuid::Uuid::from_u128(1));
        assert!(c.authorize(&action("User:a", Read, "t"), true));
        assert!(c.literal.is_empty() && c.prefixed.is_empty());
    }

    #[test]
    fn by_resource_type_follows_kafka_default() {
        let host: IpAddr = "127.0.0.1".parse().unwrap();
        let by_type = |acls: Vec<StandardAcl>| {
            cache(acls).authorize_by_resource_type("User:a", host, Write, AclResourceType::Topic)
        };
        assert!(!by_type(vec![]));
        assert!(by_type(vec![topic_allow("t", Literal, "User:a", Write)]));
        assert!(by_type(vec![topic_allow("*", Literal, "User:*", All)]));
        assert!(!by_type(vec![topic_allow("t", Literal, "User:a", Read)]));
        let deny_prefix = acl(
            AclResourceType::Topic,
            "t",
            Prefixed,
            "User:a",
            Write,
            AclPermissionType::Deny,
        );
        assert!(!by_type(vec![
            topic_allow("tx", Literal, "User:a", Write),
            deny_prefix.clone()
        ]));
        assert!(by_type(vec![
            topic_allow("ux", Literal, "User:a", Write),
            deny_prefix
        ]));
    }

    #[test]
    fn filters_match_as_kafka() {
        let literal = topic_allow("foo", Literal, "User:a", Read);
        let wildcard = topic_allow("*", Literal, "User:a", Read);
        let prefixed = topic_allow("fo", Prefixed, "User:a", Read);
        let filter = |pattern_type, name: Option<&str>| AclBindingFilter {
            resource_type: AclResourceType::Topic,
            resource_name: name.map(str::to_string),
            pattern_type,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission_type: AclPermissionType::Any,
        };
        let m = filter(PatternType::Match, Some("foo"));
        assert!(m.matches(&literal) && m.matches(&wildcard) && m.matches(&prefixed));
        let any = filter(PatternType::Any, Some("foo"));
        assert!(any.matches(&literal) && !any.matches(&wildcard) && !any.matches(&prefixed));
        let lit = filter(Literal, None);
        assert!(lit.matches(&literal) && lit.matches(&wildcard) && !lit.matches(&prefixed));
        let mut by_principal = filter(PatternType::Any, None);
        by_principal.principal = Some("User:b".into());
        assert!(!by_principal.matches(&literal));
        by_principal.principal = Some("User:a".into());
        by_principal.operation = Write;
        assert!(!by_principal.matches(&literal));
    }

    #[test]
    fn new_acls_are_validated_as_kafka() {
        let good = topic_allow("t", Literal, "User:a", Read);
        assert_eq!(validate_new_acl(&good), Ok(()));
        let mut bad = good.clone();
        bad.resource_name = String::new();
        assert_eq!(
            validate_new_acl(&bad).unwrap_err(),
            "Resource name should not be empty"
        );
        let mut bad = good.clone();
        bad.pattern_type = PatternType::Match;
        assert_eq!(
            validate_new_acl(&bad).unwrap_err(),
            "Invalid patternType MATCH"
        );
        let mut bad = good.clone();
        bad.operation = AclOperation::Any;
        assert_eq!(validate_new_acl(&bad).unwrap_err(), "Invalid operation ANY");
        let mut bad = good;
        bad.principal = "alice".into();
        assert!(validate_new_acl(&bad)
            .unwrap_err()
            .starts_with("Could not parse principal"));
    }

    #[test]
    fn serde_round_trip_rebuilds_the_index() {
        let c = cache(vec![
            topic_allow("t", Literal, "User:a", Read),
            topic_allow("p", Prefixed, "User:a", Read),
        ]);
        let json = serde_json::to_string(&c).unwrap();
        let back: AclCache = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        assert!(back.authorize(&action("User:a", Read, "pq"), false));
        assert!(back.contains(&topic_allow("t", Literal, "User:a", Read)));
    }
}
