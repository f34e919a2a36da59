//! The leader epoch cache (KIP-101, KIP-279, KIP-320): for each leader epoch,
//! the first offset the leader of that epoch appended, persisted as Kafka's
//! `leader-epoch-checkpoint` text file in the partition directory:
//!
//! ```text
//! 0
//! <number of entries>
//! <epoch> <start offset>
//! ...
//! ```
//!
//! Semantics follow Kafka's `LeaderEpochFileCache`. Every change is written
//! to the checkpoint atomically before the call returns.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::checkpoint;
use crate::error::StorageError;
use crate::fs::{FileSystem, RealFileSystem};

/// Kafka's `UNDEFINED_EPOCH`.
pub const UNDEFINED_EPOCH: i32 = -1;
/// Kafka's `UNDEFINED_EPOCH_OFFSET`.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;
/// File name of the checkpoint inside a partition directory.
pub const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";

/// One `(epoch, start offset)` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: i32,
    /// The first offset appended in that epoch.
    pub start_offset: i64,
}

/// Epoch entries of one partition, ordered by epoch and by start offset.
#[derive(Debug)]
pub struct LeaderEpochCache {
    fs: Arc<dyn FileSystem>,
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// Loads `<partition_dir>/leader-epoch-checkpoint` (an empty cache when
    /// the file is missing).
    ///
    /// # Errors
    /// [`StorageError::MalformedFile`] if the file is not a valid checkpoint;
    /// [`StorageError::Io`] if it cannot be read.
    pub fn load(partition_dir: &Path) -> Result<Self, StorageError> {
        Self::load_with_file_system(RealFileSystem::shared(), partition_dir)
    }

    /// [`LeaderEpochCache::load`] writing its checkpoint through `fs` (see
    /// [`crate::fs`]).
    ///
    /// # Errors
    /// As [`LeaderEpochCache::load`].
    pub fn load_with_file_system(
        fs: Arc<dyn FileSystem>,
        partition_dir: &Path,
    ) -> Result<Self, StorageError> {
        let path = partition_dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
        let mut entries = Vec::new();
        for line in checkpoint::read(&path)?.unwrap_or_default() {
            let mut parts = line.split_whitespace();
            let parsed = (|| {
                let epoch = parts.next()?.parse::<i32>().ok()?;
                let start_offset = parts.next()?.parse::<i64>().ok()?;
                parts.next().is_none().then_some(EpochEntry {
                    epoch,
                    start_offset,
                })
            })();
            let entry = parsed.ok_or_else(|| StorageError::MalformedFile {
                path: path.clone(),
                reason: format!("bad epoch entry {line:?}"),
            })?;
            entries.push(entry);
        }
        let mut cache = LeaderEpochCache {
            fs,
            path,
            entries: Vec::new(),
        };
        for e in entries {
            cache.insert(e);
        }
        Ok(cache)
    }

    /// The empty cache of a partition directory just created: nothing to
    /// read, and nothing written until the first epoch is assigned.
    pub fn empty(fs: Arc<dyn FileSystem>, partition_dir: &Path) -> Self {
        LeaderEpochCache {
            fs,
            path: partition_dir.join(LEADER_EPOCH_CHECKPOINT_FILE),
            entries: Vec::new(),
        }
    }

    /// The entries, ascending.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The largest epoch, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// The entry of the largest epoch, if any.
    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// The epoch of the leader that appended `offset`: the largest entry whose
    /// start offset is `<= offset`.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.start_offset <= offset)
            .map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset` (Kafka's
    /// `LeaderEpochFileCache.assign`): nothing happens when the latest entry
    /// already has this epoch at a start offset `<= start_offset`; otherwise
    /// entries with an epoch `>= epoch` or a start offset `>= start_offset`
    /// are removed first, keeping the cache monotonic. Negative values are
    /// ignored. Returns whether the cache changed (then the checkpoint was
    /// rewritten).
    ///
    /// # Errors
    /// [`StorageError::Io`] if the checkpoint cannot be written; the cache
    /// is then left as it was.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<bool, StorageError> {
        if epoch < 0 || start_offset < 0 {
            return Ok(false);
        }
        let before = self.entries.clone();
        if !self.insert(EpochEntry {
            epoch,
            start_offset,
        }) {
            return Ok(false);
        }
        if let Err(e) = self.write() {
            self.entries = before;
            return Err(e);
        }
        Ok(true)
    }

    fn insert(&mut self, entry: EpochEntry) -> bool {
        let needed = self
            .entries
            .last()
            .is_none_or(|l| l.epoch != entry.epoch || entry.start_offset < l.start_offset);
        if !needed {
            return false;
        }
        while self
            .entries
            .last()
            .is_some_and(|l| l.epoch >= entry.epoch || l.start_offset >= entry.start_offset)
        {
            self.entries.pop();
        }
        self.entries.push(entry);
        true
    }

    /// `(epoch, end offset)` for an OffsetForLeaderEpoch request (Kafka's
    /// `LeaderEpochFileCache.endOffsetFor`, KIP-101/KIP-279):
    /// * `requested == -1` or larger than every known epoch: `(-1, -1)`;
    /// * `requested` is the latest epoch: `(requested, log_end_offset)`;
    /// * otherwise: the largest epoch `<= requested` (or `requested` itself
    ///   when there is none) and the start offset of the first epoch above
    ///   `requested`.
    ///
    /// An empty cache answers `(-1, -1)`.
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end_offset);
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > requested) else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        match self.entries.iter().rev().find(|e| e.epoch <= requested) {
            Some(floor) => (floor.epoch, higher.start_offset),
            None => (requested, higher.start_offset),
        }
    }

    /// Removes entries whose start offset is `>= end_offset` (the log was
    /// truncated to `end_offset`; Kafka's `truncateFromEnd`).
    ///
    /// # Errors
    /// [`StorageError::Io`] if the checkpoint cannot be written.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<(), StorageError> {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        if self.entries.len() != before {
            self.write()?;
        }
        Ok(())
    }

    /// Puts back `entries` (taken from [`LeaderEpochCache::entries`] before an
    /// [`LeaderEpochCache::assign`] whose append then failed) and rewrites the
    /// checkpoint.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the checkpoint cannot be written; the entries
    /// in memory are restored anyway.
    pub(crate) fn restore(&mut self, entries: Vec<EpochEntry>) -> Result<(), StorageError> {
        if self.entries == entries {
            return Ok(());
        }
        self.entries = entries;
        self.write()
    }

    /// Drops entries wholly below `start_offset`, moving the start of the
    /// epoch that covers `start_offset` up to it (the log start moved;
    /// Kafka's `truncateFromStart`).
    ///
    /// # Errors
    /// [`StorageError::Io`] if the checkpoint cannot be written.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<(), StorageError> {
        let below = self
            .entries
            .iter()
            .take_while(|e| e.start_offset <= start_offset)
            .count();
        if below == 0 || (below == 1 && self.entries[0].start_offset == start_offset) {
            return Ok(());
        }
        let mut kept = self.entries[below - 1];
        kept.start_offset = start_offset;
        self.entries.drain(..below);
        self.entries.insert(0, kept);
        self.write()
    }

    fn write(&self) -> Result<(), StorageError> {
        let text = checkpoint::encode(
            self.entries
                .iter()
                .map(|e| format!("{} {}", e.epoch, e.start_offset))
                .collect::<Vec<_>>(),
        );
        checkpoint::write_atomically(&*self.fs, &self.path, text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_with(dir: &Path, entries: &[(i32, i64)]) -> LeaderEpochCache {
        let mut c = LeaderEpochCache::load(dir).unwrap();
        for &(e, o) in entries {
            assert!(c.assign(e, o).unwrap());
        }
        c
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        let dir = tempfile::tempdir().unwrap();
        let empty = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(empty.end_offset_for(0, 10), (-1, -1));

        let c = cache_with(dir.path(), &[(2, 10), (4, 20), (7, 35)]);
        assert_eq!(c.end_offset_for(-1, 50), (-1, -1));
        assert_eq!(c.end_offset_for(7, 50), (7, 50)); // latest: log end
        assert_eq!(c.end_offset_for(8, 50), (-1, -1)); // unknown future epoch
        assert_eq!(c.end_offset_for(4, 50), (4, 35));
        assert_eq!(c.end_offset_for(5, 50), (4, 35)); // gap: floor epoch
        assert_eq!(c.end_offset_for(3, 50), (2, 20));
        assert_eq!(c.end_offset_for(1, 50), (1, 10)); // below first epoch
        assert_eq!(c.epoch_for_offset(9), None);
        assert_eq!(c.epoch_for_offset(20), Some(4));
    }

    #[test]
    fn checkpoint_round_trip_in_kafka_format() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache_with(dir.path(), &[(0, 0), (3, 100)]);
        let text = std::fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE)).unwrap();
        assert_eq!(text, "0\n2\n0 0\n3 100\n");
        let reloaded = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(reloaded.entries(), c.entries());
    }

    #[test]
    fn assign_keeps_entries_monotonic() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache_with(dir.path(), &[(1, 0), (2, 10), (3, 20)]);
        assert!(!c.assign(3, 25).unwrap()); // same epoch, later offset: no-op
        assert!(c.assign(2, 15).unwrap()); // older epoch: drops 2 and 3
        assert_eq!(
            c.entries(),
            &[
                EpochEntry {
                    epoch: 1,
                    start_offset: 0
                },
                EpochEntry {
                    epoch: 2,
                    start_offset: 15
                }
            ]
        );
        assert!(!c.assign(-1, 5).unwrap());
    }

    #[test]
    fn truncation_from_both_ends() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache_with(dir.path(), &[(1, 0), (2, 10), (3, 20)]);
        c.truncate_from_end(20).unwrap();
        assert_eq!(c.latest_epoch(), Some(2));
        c.truncate_from_start(12).unwrap();
        assert_eq!(
            c.entries(),
            &[EpochEntry {
                epoch: 2,
                start_offset: 12
            }]
        );
        let reloaded = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(reloaded.entries(), c.entries());
    }
}
