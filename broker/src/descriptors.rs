//! File descriptors (issue 15, scope 1): the broker raises its soft
//! `RLIMIT_NOFILE` to the hard limit at start (as Kafka's documentation asks
//! operators to, and as many servers do themselves), sizes the segment file
//! cache ([`weir_storage::file_cache`]) from it, and refuses to create
//! partitions when the process is about to run out.
//!
//! What a partition costs: no descriptor at rest for its indexes (they are
//! open only from a write to its sync), and at most one for its `.log`
//! files, held in a broker-wide cache of
//! [`capacity_for_limit`](weir_storage::file_cache::capacity_for_limit)
//! files (three quarters of the limit, 15,000 of this machine's 20,000).
//! Partitions past that share the cache: their files are opened again on
//! demand. The rest of the limit is kept for connections, the metadata log,
//! checkpoint and snapshot files while written, and index files during a
//! flush.

use kafka_protocol::ResponseError;
use tracing::{info, warn};
use weir_storage::file_cache::{self, FileCache};

/// Free descriptors below which a request that creates partitions is
/// refused: creating one partition's files takes up to four at once (the
/// directory sync, the `.log`, an index file, `partition.metadata`), and
/// the request's own answer and the broker's timers need a few more. Kept
/// well above that so that a burst of concurrent creations does not reach
/// the limit between the check and the files.
pub const CREATION_HEADROOM: u64 = 64;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, sizes the segment
/// file cache from the result and logs both. Never fails: a limit that
/// cannot be raised is logged and used as it is.
pub fn raise_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    let before = limit.current;
    if limit.current != limit.maximum {
        limit.current = limit.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, limit) {
            warn!(error = %e, ?before, "cannot raise the open files limit");
        }
    }
    let soft = file_cache::descriptor_limit();
    let capacity = file_cache::capacity_for_limit(soft);
    FileCache::global().set_capacity(capacity);
    info!(
        open_files_limit = soft,
        raised_from = ?before,
        segment_file_cache = capacity,
        "open files limit: at most one descriptor per partition, shared by a cache of \
         segment files; the rest is kept for connections and other files"
    );
}

/// Logs how many descriptors the hosted partitions need: one each at rest,
/// capped by the segment file cache.
pub fn log_needs(partitions: usize) {
    let cache = FileCache::global();
    let limit = file_cache::descriptor_limit();
    let needed = partitions.min(cache.capacity());
    info!(
        partitions,
        descriptors_for_partitions = needed,
        open_files_limit = limit,
        segment_file_cache = cache.capacity(),
        "descriptors needed for partitions: one per partition, at most the segment file cache"
    );
    if partitions > cache.capacity() {
        info!(
            partitions,
            segment_file_cache = cache.capacity(),
            "more partitions than the segment file cache holds: segment files are reopened on \
             demand (raise the hard open files limit to keep them all open)"
        );
    }
}

/// Descriptors the process has open now (entries of `/proc/self/fd`).
/// Returns 0 when `/proc/self/fd` cannot be read (not Linux);
/// [`check_headroom_for_creation`] then never refuses.
pub fn open_descriptors() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count() as u64)
}

/// Checks that the process has [`CREATION_HEADROOM`] descriptors to spare
/// before a request creates partitions (CreateTopics, CreatePartitions,
/// Metadata auto-creation).
///
/// # Errors
/// [`ResponseError::KafkaStorageError`] with a message naming the numbers:
/// the error Kafka answers when a partition's log cannot be created on its
/// log directory (`KafkaStorageException`, retriable), which is what running
/// out of descriptors is; nothing is created, so a retry after connections
/// closed (or the limit was raised) succeeds.
pub fn check_headroom_for_creation() -> Result<(), (ResponseError, String)> {
    let limit = file_cache::descriptor_limit();
    let open = open_descriptors();
    if open.saturating_add(CREATION_HEADROOM) <= limit {
        return Ok(());
    }
    warn!(
        open_descriptors = open,
        open_files_limit = limit,
        "refusing to create partitions: the broker is out of file descriptors"
    );
    Err((
        ResponseError::KafkaStorageError,
        format!(
            "The broker has {open} of its {limit} file descriptors open and keeps \
             {CREATION_HEADROOM} free; no partition was created. Close connections or raise \
             the open files limit."
        ),
    ))
}

/// The answer for topics created while their logs could not be created here
/// (an `EMFILE` past [`check_headroom_for_creation`]): KAFKA_STORAGE_ERROR,
/// as Kafka answers for a partition whose log directory failed.
pub fn log_creation_failed(e: &weir_storage::StorageError) -> (ResponseError, String) {
    (
        ResponseError::KafkaStorageError,
        format!("The topic was created but its logs could not be created on this broker: {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_with_descriptors_to_spare_may_create_partitions() {
        assert!(check_headroom_for_creation().is_ok());
    }
}
