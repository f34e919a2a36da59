//! The `*_authorized_operations` fields of Metadata (v8+), DescribeCluster
//! and DescribeGroups (KIP-430): a bit field of ACL operation codes, bit `n`
//! set when operation `n` is allowed, or Int.MIN when the client did not ask.
//!
//! Weir has no authorizer, so, as Kafka's `AuthHelper.authorizedOperations`
//! without one, every operation the resource type supports is allowed
//! (`AclEntry.supportedOperations`).

/// The field's value when the client did not ask for it (Kafka: Int.MIN).
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// Kafka's `AclOperation` codes.
mod operation {
    pub const READ: u8 = 3;
    pub const WRITE: u8 = 4;
    pub const CREATE: u8 = 5;
    pub const DELETE: u8 = 6;
    pub const ALTER: u8 = 7;
    pub const DESCRIBE: u8 = 8;
    pub const CLUSTER_ACTION: u8 = 9;
    pub const DESCRIBE_CONFIGS: u8 = 10;
    pub const ALTER_CONFIGS: u8 = 11;
    pub const IDEMPOTENT_WRITE: u8 = 12;
}

/// The resource types whose operations Weir reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AclResourceType {
    /// A topic (Metadata).
    Topic,
    /// A consumer group (DescribeGroups).
    Group,
    /// The cluster (Metadata v8-10, DescribeCluster).
    Cluster,
}

/// The authorized operations of a resource of `resource_type` when the client
/// asked (`requested`), else [`AUTHORIZED_OPERATIONS_OMITTED`].
pub fn authorized_operations(resource_type: AclResourceType, requested: bool) -> i32 {
    use operation::*;
    if !requested {
        return AUTHORIZED_OPERATIONS_OMITTED;
    }
    let supported: &[u8] = match resource_type {
        AclResourceType::Topic => &[
            READ,
            WRITE,
            CREATE,
            DESCRIBE,
            DELETE,
            ALTER,
            DESCRIBE_CONFIGS,
            ALTER_CONFIGS,
        ],
        AclResourceType::Group => &[READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS],
        AclResourceType::Cluster => &[
            CREATE,
            CLUSTER_ACTION,
            DESCRIBE_CONFIGS,
            ALTER_CONFIGS,
            IDEMPOTENT_WRITE,
            ALTER,
            DESCRIBE,
        ],
    };
    supported.iter().fold(0, |bits, op| bits | 1 << op)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_kafka_without_an_authorizer() {
        // As Kafka 4.x answers with no authorizer configured.
        assert_eq!(authorized_operations(AclResourceType::Topic, true), 3576);
        assert_eq!(authorized_operations(AclResourceType::Group, true), 3400);
        assert_eq!(authorized_operations(AclResourceType::Cluster, true), 8096);
        assert_eq!(
            authorized_operations(AclResourceType::Topic, false),
            i32::MIN
        );
    }
}
