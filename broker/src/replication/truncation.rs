//! Where a follower truncates when the leader answers its Fetch with a
//! diverging epoch (KIP-320; Kafka 4.1's
//! `AbstractFetcherThread.getOffsetTruncationState`, which also covers the
//! KIP-101 and KIP-279 shapes). Pure: the caller reads its own log's
//! epoch cache and truncates.

/// "Unknown" epoch or offset in an epoch end offset (Kafka's
/// `UNDEFINED_EPOCH` / `UNDEFINED_EPOCH_OFFSET`).
pub const UNDEFINED: i64 = -1;

/// Where to truncate and whether that ends the truncation (Kafka's
/// `OffsetTruncationState`). When not complete, the next Fetch carries the
/// new last epoch and the leader may answer another diverging epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncation {
    /// Truncate the log to this offset (exclusive end).
    pub offset: i64,
    /// Whether the follower's log now agrees with the leader's.
    pub completed: bool,
}

/// The truncation for the leader's diverging epoch `(leader_epoch,
/// leader_end_offset)`.
///
/// - `local_end_for_epoch`: the follower's `(epoch, end_offset)` for the
///   largest epoch at most `leader_epoch` in its own epoch cache (Kafka's
///   `endOffsetForEpoch`), `None` when it has none;
/// - `fetch_offset`: the offset the follower fetched from (its log end);
/// - `log_end_offset`: its log end offset.
///
/// Rules, in Kafka's order: an unknown leader end offset truncates to the
/// fetch offset (nothing); an unknown leader epoch to the smaller of the
/// leader's end and the local end; a local epoch other than the leader's
/// to the local end of that smaller epoch (not complete: ask again); the
/// same epoch to the smaller of both ends; no local epoch to the leader's
/// end. Never above the fetch offset.
pub fn truncation_for_diverging_epoch(
    leader_epoch: i32,
    leader_end_offset: i64,
    local_end_for_epoch: Option<(i32, i64)>,
    fetch_offset: i64,
    log_end_offset: i64,
) -> Truncation {
    if leader_end_offset == UNDEFINED {
        return Truncation {
            offset: fetch_offset,
            completed: true,
        };
    }
    if i64::from(leader_epoch) == UNDEFINED {
        return Truncation {
            offset: leader_end_offset.min(log_end_offset),
            completed: true,
        };
    }
    match local_end_for_epoch {
        Some((epoch, end)) if epoch != leader_epoch => Truncation {
            offset: end.min(fetch_offset),
            completed: false,
        },
        Some((_, end)) => Truncation {
            offset: end.min(leader_end_offset).min(fetch_offset),
            completed: true,
        },
        None => Truncation {
            offset: leader_end_offset.min(fetch_offset),
            completed: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per shape: KIP-101 (a follower with records the leader never
    /// had), KIP-279 (the follower has an epoch the leader skipped), the
    /// KIP-320 fetch path, and Kafka's fallbacks.
    #[test]
    fn truncation_shapes() {
        /// (name, leader's diverging epoch, follower's end for it, fetch
        /// offset, log end, expected).
        type Row = (
            &'static str,
            (i32, i64),
            Option<(i32, i64)>,
            i64,
            i64,
            Truncation,
        );
        #[rustfmt::skip]
        let rows: &[Row] = &[
            // Leader epochs 0 [0,100) 2 [100,..); follower 0 [0,100) 1 [100,120):
            // the leader answers (0, 100) for last fetched epoch 1; the
            // follower knows epoch 0 ending at 100: truncate to 100.
            ("KIP-279: the follower's epoch 1 was never the leader's",
                (0, 100), Some((0, 100)), 120, 120, Truncation { offset: 100, completed: true }),
            // Same epoch, the follower has more of it than the leader kept
            // (it was appended by an old leader and never committed).
            ("KIP-101: more of the same epoch than the leader has",
                (3, 50), Some((3, 80)), 80, 80, Truncation { offset: 50, completed: true }),
            // The leader has more of the epoch than the follower: truncate
            // nothing beyond the follower's own end.
            ("the leader's end of the epoch is past the follower's",
                (3, 90), Some((3, 80)), 80, 80, Truncation { offset: 80, completed: true }),
            // The follower's largest epoch below the leader's is older: cut
            // to its end and ask again with the new last epoch.
            ("the follower does not know the leader's epoch",
                (4, 200), Some((2, 150)), 180, 180, Truncation { offset: 150, completed: false }),
            ("the follower has no epoch at or below the leader's",
                (1, 30), None, 70, 70, Truncation { offset: 30, completed: true }),
            ("an unknown leader end truncates nothing",
                (-1, -1), Some((0, 10)), 70, 70, Truncation { offset: 70, completed: true }),
            ("an unknown leader epoch uses the leader's end",
                (-1, 40), Some((0, 10)), 70, 60, Truncation { offset: 40, completed: true }),
            ("never above the fetch offset",
                (5, 500), Some((5, 400)), 300, 400, Truncation { offset: 300, completed: true }),
        ];
        for (name, (epoch, end), local, fetch_offset, log_end, expected) in rows {
            assert_eq!(
                truncation_for_diverging_epoch(*epoch, *end, *local, *fetch_offset, *log_end),
                *expected,
                "{name}"
            );
        }
    }
}
