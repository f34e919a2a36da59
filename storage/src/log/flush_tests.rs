//! Unit tests of the flush policy: `flush.messages`, `flush.ms` and the
//! recovery point they move.

use super::*;
use crate::testutil::simple_batch;

fn open_with(dir: &Path, config: LogConfig) -> Log {
    Log::open(
        dir.to_path_buf(),
        TopicPartition::new("flush", 0),
        config,
        0,
        0,
    )
    .unwrap()
}

#[test]
fn flush_messages_is_due_once_that_many_offsets_are_unflushed() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_messages: 5,
        ..LogConfig::default()
    };
    let mut log = open_with(dir.path(), config);
    assert!(!log.flush_messages_due());
    log.append_as_leader(&Bytes::from(simple_batch(3, 8, 0)), 0, 0)
        .unwrap();
    assert_eq!(log.unflushed_messages(), 3);
    assert!(!log.flush_messages_due());
    log.append_as_leader(&Bytes::from(simple_batch(2, 8, 0)), 0, 0)
        .unwrap();
    assert!(log.flush_messages_due());
    assert_eq!(log.flush().unwrap(), 5);
    assert_eq!(log.unflushed_messages(), 0);
    assert!(!log.flush_messages_due());
}

#[test]
fn default_flush_messages_never_asks_for_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_with(dir.path(), LogConfig::default());
    log.append_as_leader(&Bytes::from(simple_batch(100, 8, 0)), 0, 0)
        .unwrap();
    assert!(!log.flush_messages_due());
    assert!(!log.flush_ms_due(i64::MAX));
}

#[test]
fn flush_ms_is_due_only_with_unflushed_data_and_an_old_enough_flush() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_ms: 1_000,
        ..LogConfig::default()
    };
    let mut log = open_with(dir.path(), config);
    let opened = crate::segment::wall_clock_ms();
    // Nothing unflushed: never due.
    assert!(!log.flush_ms_due(opened + 10_000));
    log.append_as_leader(&Bytes::from(simple_batch(1, 8, 0)), 0, 0)
        .unwrap();
    assert!(log.flush_ms_due(opened + 10_000));
    log.flush().unwrap();
    let flushed = crate::segment::wall_clock_ms();
    log.append_as_leader(&Bytes::from(simple_batch(1, 8, 0)), 0, 0)
        .unwrap();
    // The clock restarted at the flush.
    assert!(!log.flush_ms_due(flushed - 1));
    assert!(log.flush_ms_due(flushed + 1_000));
}
