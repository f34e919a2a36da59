//! One handler per Kafka API (STYLE.md: handler files stay small; shared
//! logic lives in `ReplicaManager`, `Partition` and the controller).

pub mod acls;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod api_versions;
pub(crate) mod broker_configs;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod elect_leaders;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sync_group;
pub mod user_scram_credentials;

use kafka_protocol::protocol::StrBytes;

/// A `StrBytes` from an owned string.
pub(crate) fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Whether a topic-changing request (CreateTopics, CreatePartitions) has no
/// time left: Kafka 4's controller queues it with a deadline `timeout_ms`
/// after arrival (`ControllerApis`), so with 0 or less every topic gets
/// REQUEST_TIMED_OUT and nothing changes; but a request naming nothing more
/// than once is not queued (its duplicates get INVALID_REQUEST). `names` are
/// the request's topic names in order.
pub(crate) fn controller_deadline_passed<'a>(
    timeout_ms: i32,
    names: impl Iterator<Item = &'a str>,
) -> bool {
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for name in names {
        *counts.entry(name).or_default() += 1;
    }
    timeout_ms <= 0 && counts.values().any(|&n| n == 1)
}

/// `items` without repeats: each key once, at its first place. Lists in
/// requests go through this (or answer repeats with INVALID_REQUEST where
/// Kafka does) so that a repeated entry cannot multiply an answer (issue 15).
pub(crate) fn first_occurrences<T, K: std::hash::Hash + Eq>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(&T) -> K,
) -> Vec<T> {
    let mut seen = std::collections::HashSet::new();
    items.into_iter().filter(|t| seen.insert(key(t))).collect()
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
