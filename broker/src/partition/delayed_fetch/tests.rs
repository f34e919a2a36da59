//! The completion rule as a table (one row per Kafka rule), the end each
//! isolation compares, and the wait itself under paused time.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::partition::tests::batch;
use crate::partition::Registration;
use crate::replication::leader::FollowerFetch;

const EPOCH: i32 = 5;

fn at(offset: i64, segment_base: i64, position: u32) -> LogOffsetMetadata {
    LogOffsetMetadata::new(offset, segment_base, position)
}

fn only(offset: i64) -> LogOffsetMetadata {
    LogOffsetMetadata::message_offset_only(offset)
}

/// Led here in `EPOCH`, ending at `end`.
fn led(end: LogOffsetMetadata) -> FetchOffsetSnapshot {
    FetchOffsetSnapshot {
        serving: true,
        leader_epoch: EPOCH,
        end,
    }
}

/// One partition of a row: what the first read recorded, and now.
struct Part {
    fetch_offset: LogOffsetMetadata,
    max_bytes: usize,
    now: FetchOffsetSnapshot,
}

fn part(fetch_offset: LogOffsetMetadata, now: FetchOffsetSnapshot) -> Part {
    Part {
        fetch_offset,
        max_bytes: usize::MAX,
        now,
    }
}

/// Kafka's `DelayedFetch.tryComplete`, one row per rule.
#[test]
fn completion_rules() {
    let rows: Vec<(&str, Vec<Part>, usize, bool)> = vec![
        (
            "nothing new",
            vec![part(at(10, 0, 1000), led(at(10, 0, 1000)))],
            1,
            false,
        ),
        (
            "case G: min_bytes reached by one partition",
            vec![part(at(10, 0, 1000), led(at(12, 0, 1300)))],
            300,
            true,
        ),
        (
            "case G: one byte short",
            vec![part(at(10, 0, 1000), led(at(12, 0, 1300)))],
            301,
            false,
        ),
        (
            "case G: min_bytes reached by several partitions together",
            vec![
                part(at(10, 0, 1000), led(at(12, 0, 1150))),
                part(at(40, 30, 0), led(at(41, 30, 150))),
                part(at(7, 0, 70), led(at(7, 0, 70))),
            ],
            300,
            true,
        ),
        (
            "case G: each partition counts at most partition_max_bytes",
            vec![Part {
                fetch_offset: at(10, 0, 1000),
                max_bytes: 100,
                now: led(at(20, 0, 5000)),
            }],
            101,
            false,
        ),
        (
            "case F: the end is on a newer segment (a roll)",
            vec![part(at(10, 0, 1000), led(at(11, 10, 80)))],
            1 << 20,
            true,
        ),
        (
            "a roll at the same offset is not a newer segment",
            vec![part(at(10, 0, 1000), led(at(10, 10, 0)))],
            1,
            false,
        ),
        (
            "case F: the log was truncated below the fetch offset",
            vec![part(at(10, 0, 1000), led(at(8, 0, 800)))],
            1 << 20,
            true,
        ),
        (
            "case F: a consumer above the high watermark",
            vec![part(only(12), led(at(10, 0, 1000)))],
            1 << 20,
            true,
        ),
        (
            "cases A-C: no longer led here (or removed)",
            vec![part(
                at(10, 0, 1000),
                FetchOffsetSnapshot {
                    serving: false,
                    ..led(at(10, 0, 1000))
                },
            )],
            1 << 20,
            true,
        ),
        (
            "case E: the leader epoch changed",
            vec![part(
                at(10, 0, 1000),
                FetchOffsetSnapshot {
                    leader_epoch: EPOCH + 1,
                    ..led(at(10, 0, 1000))
                },
            )],
            1 << 20,
            true,
        ),
        (
            "one partition completing completes the fetch",
            vec![
                part(at(10, 0, 1000), led(at(10, 0, 1000))),
                part(at(3, 0, 300), led(at(2, 0, 200))),
            ],
            1 << 20,
            true,
        ),
        (
            "positions unknown: no bytes counted",
            vec![
                part(only(10), led(at(12, 0, 1300))),
                part(at(10, 0, 1000), led(only(12))),
            ],
            1,
            false,
        ),
    ];
    for (name, parts, min_bytes, expected) in rows {
        let checks = parts
            .iter()
            .map(|p| check_partition(&p.fetch_offset, EPOCH, p.max_bytes, &p.now));
        assert_eq!(completes(checks, min_bytes), expected, "{name}");
    }
}

/// A partition led by broker 0 with broker 1 as an in-sync follower: an
/// append moves the log end offset, and the high watermark only once the
/// follower has fetched it.
fn replicated_partition(dir: &std::path::Path) -> Arc<Partition> {
    let log = Log::open(
        dir.to_path_buf(),
        weir_storage::TopicPartition::new("delayed", 0),
        weir_storage::LogConfig::default(),
        0,
        0,
    )
    .unwrap();
    let partition = Arc::new(Partition::new(
        weir_storage::TopicPartition::new("delayed", 0),
        uuid::Uuid::new_v4(),
        Arc::new(std::sync::Mutex::new(log)),
        EPOCH,
    ));
    lead(&partition, EPOCH);
    partition
}

/// Broker 0 leads `partition` in `leader_epoch`, broker 1 in sync.
fn lead(partition: &Partition, leader_epoch: i32) {
    let alive = BTreeMap::from([(0, 1), (1, 1)]);
    partition
        .become_leader(
            &Registration {
                local_broker_id: 0,
                replicas: &[0, 1],
                isr: &[0, 1],
                leader_epoch,
                partition_epoch: leader_epoch,
                min_insync_replicas: 1,
                alive: &alive,
                max_lag_ms: 30_000,
            },
            0,
        )
        .unwrap();
}

/// Follower 1 fetches at `offset`.
fn follower_fetches(partition: &Partition, offset: i64) {
    partition
        .record_follower_fetch(&FollowerFetch {
            replica_id: 1,
            broker_epoch: 1,
            fetch_offset: offset,
            log_start_offset: 0,
            leader_end_offset: partition.log_end_offset(),
            now_ms: 0,
        })
        .unwrap();
}

/// A fetch parked where `partition`'s first read for `isolation` at
/// `offset` began, waiting for one byte.
fn parked(partition: &Arc<Partition>, isolation: FetchIsolation, offset: i64) -> DelayedFetch {
    let info = match isolation {
        FetchIsolation::LogEnd => partition.read_to_log_end(offset, 1 << 20, true),
        _ => partition.read(offset, 1 << 20, true),
    }
    .unwrap();
    assert!(info.records.is_none(), "nothing to read yet at {offset}");
    DelayedFetch::new(
        vec![FetchPartitionStatus {
            partition: partition.clone(),
            fetch_offset: info.fetch_offset_metadata,
            leader_epoch: partition.leader_epoch(),
            max_bytes: 1 << 20,
        }],
        isolation,
        1,
    )
}

/// Consumers compare the high watermark, followers the log end offset: an
/// append alone answers a follower but not a consumer; the high watermark
/// rising answers the consumer but not a follower already at the log end.
#[test]
fn consumers_compare_the_high_watermark_and_followers_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    let partition = replicated_partition(dir.path());
    partition.append_records_as_leader(&batch("a"), 0).unwrap();
    follower_fetches(&partition, 1);
    assert_eq!(partition.high_watermark(), 1);

    let consumer = parked(&partition, FetchIsolation::HighWatermark, 1);
    let committed = parked(&partition, FetchIsolation::TxnCommitted, 1);
    let follower = parked(&partition, FetchIsolation::LogEnd, 1);
    assert!(!consumer.try_complete() && !committed.try_complete() && !follower.try_complete());

    partition.append_records_as_leader(&batch("b"), 0).unwrap();
    assert_eq!(
        (partition.log_end_offset(), partition.high_watermark()),
        (2, 1)
    );
    assert!(
        !consumer.try_complete(),
        "log end moved, high watermark not"
    );
    assert!(
        !committed.try_complete(),
        "log end moved, high watermark not"
    );
    assert!(follower.try_complete(), "the log end moved");

    let caught_up_follower = parked(&partition, FetchIsolation::LogEnd, 2);
    follower_fetches(&partition, 2);
    assert_eq!(partition.high_watermark(), 2);
    assert!(consumer.try_complete(), "the high watermark moved");
    assert!(committed.try_complete(), "the high watermark moved");
    assert!(
        !caught_up_follower.try_complete(),
        "a high watermark rise alone does not answer a follower"
    );
}

/// A new leader epoch, or the partition leaving the image, answers a
/// parked fetch and wakes it.
#[tokio::test]
async fn leadership_changes_and_removal_wake_and_complete_a_parked_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let partition = replicated_partition(dir.path());
    let far = tokio::time::Instant::now() + Duration::from_secs(3600);

    let fetch = parked(&partition, FetchIsolation::HighWatermark, 0);
    let waiting = fetch.wait(far, None);
    tokio::pin!(waiting);
    assert!(futures::poll!(waiting.as_mut()).is_pending());
    lead(&partition, EPOCH + 1);
    assert_eq!(
        futures::poll!(waiting.as_mut()),
        std::task::Poll::Ready(true)
    );

    let fetch = parked(&partition, FetchIsolation::HighWatermark, 0);
    let waiting = fetch.wait(far, None);
    tokio::pin!(waiting);
    assert!(futures::poll!(waiting.as_mut()).is_pending());
    partition.mark_removed();
    assert_eq!(
        futures::poll!(waiting.as_mut()),
        std::task::Poll::Ready(true)
    );
}

/// With nothing arriving the fetch expires at its deadline (Kafka's
/// `onExpiration`); an append that does not reach `min_bytes` wakes it
/// without completing it.
#[tokio::test(start_paused = true)]
async fn a_parked_fetch_expires_at_max_wait() {
    let dir = tempfile::tempdir().unwrap();
    let partition = replicated_partition(dir.path());
    let fetch = parked(&partition, FetchIsolation::LogEnd, 0);
    let fetch = DelayedFetch {
        min_bytes: 1 << 20,
        ..fetch
    };
    let start = tokio::time::Instant::now();
    let deadline = start + Duration::from_millis(500);
    let waiting = fetch.wait(deadline, None);
    tokio::pin!(waiting);
    assert!(futures::poll!(waiting.as_mut()).is_pending());
    partition
        .append_records_as_leader(&batch("small"), 0)
        .unwrap();
    assert!(futures::poll!(waiting.as_mut()).is_pending());
    assert!(!waiting.await, "expired");
    assert_eq!(tokio::time::Instant::now(), deadline);
}
