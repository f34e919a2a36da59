//! Consumer groups: Kafka's classic group protocol (JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup) and committed offsets, kept durable as records in
//! the internal compacted topic `__consumer_offsets` (issue 4).
//!
//! The pieces:
//! - [`coordinator`]: [`GroupCoordinator`], Kafka's classic group state
//!   machine and committed offsets, answering the group APIs.
//! - [`classic_group`]: one group's state ([`ClassicGroup`]).
//! - [`store`]: what the coordinator persists and loads. [`GroupStore`] is
//!   the seam between the coordinator's state machine and the log; the
//!   production store writes Kafka's own `__consumer_offsets` key and value
//!   schemas, so Kafka's tools decode Weir's offsets topic.
//! - [`records`]: the codec of those keys and values (no I/O).
//! - [`offsets_topic`]: the production store, [`BrokerGroupStore`], over
//!   `__consumer_offsets`.
//!
//! Group ids map to a partition of `__consumer_offsets` as in Kafka:
//! `abs(java_string_hash(group_id)) % offsets.topic.num.partitions`
//! ([`offsets_partition_for`]).

pub mod classic_group;
pub mod coordinator;
pub mod offsets_topic;
pub mod records;
pub mod store;

pub use classic_group::{ClassicGroup, ClassicGroupState, JoinGroupResult, SyncGroupResult};
pub use coordinator::{GroupCoordinator, GroupCoordinatorConfig};
pub use store::{
    GroupMetadataRecord, GroupStore, GroupStoreError, GroupWrite, LoadedGroup,
    MemberMetadataRecord, MemoryGroupStore, OffsetAndMetadata, OffsetsLeadership,
};

/// The [`GroupStore`] the broker's group coordinator runs on:
/// `__consumer_offsets` ([`offsets_topic::OffsetsTopicStore`]).
pub type BrokerGroupStore = offsets_topic::OffsetsTopicStore;

/// The broker's group coordinator.
pub type BrokerGroupCoordinator = GroupCoordinator<BrokerGroupStore>;

/// The internal topic that holds group metadata and committed offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Java's `String.hashCode` of `s` (UTF-16 code units, wrapping `i32`).
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The `__consumer_offsets` partition that holds `group_id`, as Kafka's
/// `GroupCoordinator.partitionFor`: `Utils.abs(groupId.hashCode) % partitions`,
/// where `Utils.abs(i32::MIN)` is 0.
///
/// `partitions` is `offsets.topic.num.partitions` (at least 1).
pub fn offsets_partition_for(group_id: &str, partitions: i32) -> i32 {
    let hash = java_string_hash(group_id);
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_string_hash_matches_java() {
        // Values from Java's "...".hashCode().
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("group"), 98_629_247);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
    }

    /// Kafka's `Utils.abs(groupId.hashCode()) % partitions`, worked out
    /// with Java's `String.hashCode` (`s[0]*31^(n-1) + ... + s[n-1]`,
    /// wrapping at 32 bits, over UTF-16 code units) for the default 50
    /// partitions and for 3, and checked against Java 17's
    /// `String.hashCode` and kafka-clients 4.1.2's `Utils.abs`.
    #[test]
    fn group_ids_map_to_kafkas_offsets_partitions() {
        let table: &[(&str, i32, i32, i32)] = &[
            // (group id, hashCode, partition of 50, partition of 3)
            ("", 0, 0, 0),
            ("a", 97, 47, 1),
            ("g", 103, 3, 1),
            ("group", 98_629_247, 47, 2),
            ("weir", 3_645_559, 9, 1),
            ("my-group", -1_906_497_762, 12, 0),
            ("test-group-negative", -1_662_195_106, 6, 1),
            ("c07-group", -2_133_779_300, 0, 2),
            ("zzzzzzzzzz", -1_580_979_136, 36, 1),
            ("polygenelubricants", i32::MIN, 0, 0),
            // U+1F600 is the surrogate pair D83D DE00: 55357 * 31 + 56832.
            ("\u{1F600}", 1_772_899, 49, 1),
        ];
        for &(group, hash, of_50, of_3) in table {
            assert_eq!(java_string_hash(group), hash, "hashCode of {group:?}");
            assert_eq!(offsets_partition_for(group, 50), of_50, "{group:?} of 50");
            assert_eq!(offsets_partition_for(group, 3), of_3, "{group:?} of 3");
        }
    }

    #[test]
    fn the_minimum_hash_maps_to_partition_zero() {
        assert_eq!(offsets_partition_for("polygenelubricants", 50), 0);
        assert_eq!(offsets_partition_for("group", 50), 98_629_247 % 50);
    }
}
