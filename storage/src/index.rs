//! Kafka's sparse segment indexes, `.index` ([`OffsetIndex`]) and
//! `.timeindex` ([`TimeIndex`]), byte-compatible with Kafka's files.
//!
//! * `.index`: 8-byte entries, `relative_offset: u32 BE` then
//!   `position: u32 BE`. The relative offset is `offset - segment base
//!   offset`; the position is the byte position in the `.log` file of the batch
//!   whose last offset is `offset`. Entries strictly increase.
//! * `.timeindex`: 12-byte entries, `timestamp: i64 BE` (ms) then
//!   `relative_offset: u32 BE`. An entry says "the largest timestamp among
//!   batches up to and including this offset is `timestamp`". Entries strictly
//!   increase in timestamp.
//!
//! Unlike Kafka, the files are not memory-mapped or preallocated: entries live
//! in memory and their unwritten tail is written with `pwrite` when the log is
//! flushed or the segment rolls, so that an append costs one syscall.
//!
//! Nor are the files kept open (a partition costs no descriptor for its
//! indexes at rest; issue 15): [`IndexFile::open`] reads the file and closes
//! it. A write opens it again and keeps that descriptor only until the
//! fdatasync that covers the write (`IndexFile::take_for_sync`), since
//! Linux reports a writeback error only to descriptors open when it
//! happened. [`IndexFile::reset`] defers its truncation to the next write
//! for the same reason. Indexes
//! of segments past the recovery point are rebuilt on recovery (as in Kafka),
//! so entries that never reached the file are not lost. Crash behaviour: a
//! torn or inconsistent index file is detected by [`IndexFile::open`] and the
//! caller rebuilds it from the log.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::StorageError;
use crate::fs::{FileSystem, RealFileSystem};

/// One entry of an index file.
pub trait IndexEntry: Copy + std::fmt::Debug {
    /// Bytes per entry on disk.
    const SIZE: usize;
    /// Encodes into `out` (exactly `SIZE` bytes).
    fn encode(&self, out: &mut [u8]);
    /// Decodes from `buf` (exactly `SIZE` bytes).
    fn decode(buf: &[u8]) -> Self;
    /// Whether `next` may follow `self` in a well-formed file.
    fn precedes(&self, next: &Self) -> bool;
    /// The entry's offset minus the segment's base offset.
    fn relative_offset(&self) -> u32;
}

/// An `.index` entry: `(relative_offset u32 BE, position u32 BE)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetPosition {
    /// Offset minus the segment's base offset.
    pub relative_offset: u32,
    /// Byte position of the batch in the segment's `.log` file.
    pub position: u32,
}

impl IndexEntry for OffsetPosition {
    const SIZE: usize = 8;
    fn encode(&self, out: &mut [u8]) {
        out[..4].copy_from_slice(&self.relative_offset.to_be_bytes());
        out[4..8].copy_from_slice(&self.position.to_be_bytes());
    }
    fn decode(buf: &[u8]) -> Self {
        OffsetPosition {
            relative_offset: u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]),
            position: u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]),
        }
    }
    fn precedes(&self, next: &Self) -> bool {
        self.relative_offset < next.relative_offset && self.position <= next.position
    }
    fn relative_offset(&self) -> u32 {
        self.relative_offset
    }
}

/// A `.timeindex` entry: `(timestamp i64 BE, relative_offset u32 BE)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampOffset {
    /// Largest timestamp (ms) of the batches up to this offset.
    pub timestamp: i64,
    /// Offset minus the segment's base offset.
    pub relative_offset: u32,
}

impl IndexEntry for TimestampOffset {
    const SIZE: usize = 12;
    fn encode(&self, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.timestamp.to_be_bytes());
        out[8..12].copy_from_slice(&self.relative_offset.to_be_bytes());
    }
    fn decode(buf: &[u8]) -> Self {
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&buf[..8]);
        TimestampOffset {
            timestamp: i64::from_be_bytes(ts),
            relative_offset: u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]),
        }
    }
    fn precedes(&self, next: &Self) -> bool {
        self.timestamp < next.timestamp && self.relative_offset <= next.relative_offset
    }
    fn relative_offset(&self) -> u32 {
        self.relative_offset
    }
}

/// An index file of one segment: in-memory entries plus the file they are
/// persisted to. See the module docs for the layout.
#[derive(Debug)]
pub struct IndexFile<E: IndexEntry> {
    fs: Arc<dyn FileSystem>,
    path: PathBuf,
    /// The descriptor of writes (or a truncation) not yet fdatasynced; `None`
    /// at rest.
    unsynced: Option<Arc<File>>,
    base_offset: i64,
    entries: Vec<E>,
    /// Entries already written to the file.
    persisted: usize,
    /// [`IndexFile::reset`] or [`IndexFile::truncate_to`] removed entries
    /// already in the file: it is cut to this many entries at the next
    /// [`IndexFile::persist`].
    truncate_pending: Option<usize>,
    max_entries: usize,
}

/// The `.index` file of a segment.
pub type OffsetIndex = IndexFile<OffsetPosition>;
/// The `.timeindex` file of a segment.
pub type TimeIndex = IndexFile<TimestampOffset>;

impl<E: IndexEntry> IndexFile<E> {
    /// Opens (creating if missing) the index at `path` for a segment starting
    /// at `base_offset`, holding at most `max_index_bytes / E::SIZE` entries
    /// (`segment.index.bytes`). Returns the index and whether the existing
    /// file was well formed; an ill-formed file (length not a multiple of the
    /// entry size, non-increasing entries, or a position past
    /// `log_size_bytes`) is reset to empty and `false` is returned so that the
    /// caller rebuilds it. A missing file also yields `false` when
    /// `log_size_bytes > 0`.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the file cannot be opened or read.
    pub fn open(
        path: PathBuf,
        base_offset: i64,
        max_index_bytes: u64,
        log_size_bytes: u64,
        position_of: impl Fn(&E) -> Option<u32>,
    ) -> Result<(Self, bool), StorageError> {
        Self::open_with_file_system(
            RealFileSystem::shared(),
            path,
            base_offset,
            max_index_bytes,
            log_size_bytes,
            position_of,
        )
    }

    /// [`IndexFile::open`] writing through `fs` (see [`crate::fs`]).
    ///
    /// # Errors
    /// As [`IndexFile::open`].
    pub fn open_with_file_system(
        fs: Arc<dyn FileSystem>,
        path: PathBuf,
        base_offset: i64,
        max_index_bytes: u64,
        log_size_bytes: u64,
        position_of: impl Fn(&E) -> Option<u32>,
    ) -> Result<(Self, bool), StorageError> {
        let existed = path.exists();
        let mut bytes = Vec::new();
        fs.open_file(&path, false)
            .and_then(|mut file| file.read_to_end(&mut bytes))
            .map_err(|e| StorageError::io("read", &path, e))?;
        let mut index = IndexFile {
            fs,
            path,
            unsynced: None,
            base_offset,
            entries: Vec::new(),
            persisted: 0,
            truncate_pending: None,
            max_entries: ((max_index_bytes as usize) / E::SIZE).max(1),
        };
        let mut valid = bytes.len() % E::SIZE == 0;
        if valid {
            index.entries.reserve(bytes.len() / E::SIZE);
            for chunk in bytes.chunks_exact(E::SIZE) {
                let entry = E::decode(chunk);
                let in_order = index
                    .entries
                    .last()
                    .is_none_or(|last: &E| last.precedes(&entry));
                let in_file = position_of(&entry).is_none_or(|p| (p as u64) < log_size_bytes);
                if !in_order || !in_file {
                    valid = false;
                    break;
                }
                index.entries.push(entry);
            }
        }
        if !valid {
            tracing::warn!(path = %index.path.display(), "index file is corrupt; it will be rebuilt");
            index.reset()?;
            return Ok((index, false));
        }
        index.persisted = index.entries.len();
        Ok((index, existed || log_size_bytes == 0))
    }

    /// Entries currently in the index.
    pub fn entries(&self) -> &[E] {
        &self.entries
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the index has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether no more entries fit in `segment.index.bytes`.
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    /// The segment base offset the relative offsets are based on.
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// Path of the index file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The descriptor to write through: the one of unsynced writes, or the
    /// file opened again (and kept until [`IndexFile::take_for_sync`]).
    fn writable(&mut self) -> Result<Arc<File>, StorageError> {
        if let Some(file) = &self.unsynced {
            return Ok(file.clone());
        }
        let file = Arc::new(
            self.fs
                .open_existing(&self.path)
                .map_err(|e| StorageError::io("open", &self.path, e))?,
        );
        self.unsynced = Some(file.clone());
        Ok(file)
    }

    /// Writes pending entries and returns the descriptor to fdatasync, which
    /// the index no longer keeps: the caller's sync is the one that covers
    /// the writes (see the module docs).
    ///
    /// # Errors
    /// [`StorageError::Io`] if the file cannot be opened or written.
    pub(crate) fn take_for_sync(&mut self) -> Result<(Arc<File>, PathBuf), StorageError> {
        self.persist()?;
        let file = self.writable()?;
        self.unsynced = None;
        Ok((file, self.path.clone()))
    }

    /// Whether the index holds a descriptor now.
    pub fn is_open(&self) -> bool {
        self.unsynced.is_some()
    }

    /// Records that the file was renamed to `path`.
    pub(crate) fn set_path(&mut self, path: PathBuf) {
        self.path = path;
    }

    /// Removes every entry; the file is truncated to zero bytes (and
    /// rewritten) at the next [`IndexFile::persist`], so that it is opened
    /// only for a write that a sync then covers.
    ///
    /// # Errors
    /// None today; kept fallible for callers.
    pub fn reset(&mut self) -> Result<(), StorageError> {
        self.entries.clear();
        self.persisted = 0;
        self.truncate_pending = Some(0);
        Ok(())
    }

    /// Removes every entry whose offset is `>= offset` (Kafka's
    /// `OffsetIndex.truncateTo` / `TimeIndex.truncateTo`, for a log
    /// truncated to `offset`). Entries already in the file are cut from it
    /// at the next [`IndexFile::persist`], as [`IndexFile::reset`] does.
    pub fn truncate_to(&mut self, offset: i64) {
        let base = self.base_offset;
        let keep = self
            .entries
            .partition_point(|e| base + i64::from(e.relative_offset()) < offset);
        if keep == self.entries.len() {
            return;
        }
        self.entries.truncate(keep);
        if self.persisted > keep {
            self.persisted = keep;
            let cut = self
                .truncate_pending
                .map_or(keep, |pending| pending.min(keep));
            self.truncate_pending = Some(cut);
        }
    }

    fn push(&mut self, entry: E) {
        self.entries.push(entry);
    }

    /// Writes entries not yet in the file with one `pwrite` (after cutting
    /// the file back if [`IndexFile::reset`] or [`IndexFile::truncate_to`]
    /// removed entries it holds). Returns
    /// whether entries were written. The descriptor written through stays
    /// open until `IndexFile::take_for_sync`.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the write fails; the entries stay pending and
    /// the next call writes them again at the same position (overwriting any
    /// torn part).
    pub fn persist(&mut self) -> Result<bool, StorageError> {
        if let Some(entries) = self.truncate_pending {
            let file = self.writable()?;
            self.fs
                .set_len(&file, &self.path, (entries * E::SIZE) as u64)
                .map_err(|e| StorageError::io("truncate", &self.path, e))?;
            self.truncate_pending = None;
        }
        if self.persisted == self.entries.len() {
            return Ok(false);
        }
        let pending = &self.entries[self.persisted..];
        let mut buf = vec![0u8; pending.len() * E::SIZE];
        for (entry, out) in pending.iter().zip(buf.chunks_exact_mut(E::SIZE)) {
            entry.encode(out);
        }
        let file = self.writable()?;
        self.fs
            .write_all_at(&file, &self.path, &buf, (self.persisted * E::SIZE) as u64)
            .map_err(|e| StorageError::io("pwrite", &self.path, e))?;
        self.persisted = self.entries.len();
        Ok(true)
    }
}

impl OffsetIndex {
    /// Records that the batch whose last offset is `offset` starts at byte
    /// `position` of the log file. Ignored unless `offset` is above the last
    /// entry (Kafka throws in that case; the callers here never do it) or when
    /// the index is full.
    pub fn append(&mut self, offset: i64, position: u32) {
        let Some(relative_offset) = relative(offset, self.base_offset) else {
            return;
        };
        let entry = OffsetPosition {
            relative_offset,
            position,
        };
        if !self.is_full() && self.entries.last().is_none_or(|last| last.precedes(&entry)) {
            self.push(entry);
        }
    }

    /// The largest entry whose offset is `<= target`, as
    /// `(absolute offset, position)`; `(base_offset, 0)` when there is none.
    /// Reading from the returned position finds the batch holding `target`
    /// (Kafka's `OffsetIndex.lookup`).
    pub fn lookup(&self, target: i64) -> (i64, u32) {
        let base = self.base_offset;
        let idx = self
            .entries
            .partition_point(|e| base + e.relative_offset as i64 <= target);
        match idx.checked_sub(1).map(|i| self.entries[i]) {
            Some(e) => (base + e.relative_offset as i64, e.position),
            None => (base, 0),
        }
    }

    /// [`OffsetIndex::lookup`] among the entries whose position is also
    /// `<= max_position` (bytes): the largest entry with offset `<= target`
    /// and position `<= max_position`, as `(absolute offset, position)`;
    /// `(base_offset, 0)` when there is none. Both columns increase, so this
    /// is one binary search (Kafka's `largestLowerBoundSlotFor` over keys
    /// and values, as `OffsetIndex.fetchUpperBoundOffset` uses it). A fetch
    /// uses it to jump to the last batch boundary within its byte limit.
    pub fn lookup_within(&self, target: i64, max_position: u64) -> (i64, u32) {
        let base = self.base_offset;
        let idx = self.entries.partition_point(|e| {
            base + e.relative_offset as i64 <= target && u64::from(e.position) <= max_position
        });
        match idx.checked_sub(1).map(|i| self.entries[i]) {
            Some(e) => (base + e.relative_offset as i64, e.position),
            None => (base, 0),
        }
    }
}

impl TimeIndex {
    /// Appends `(timestamp, offset)` if `timestamp` is larger than the last
    /// entry's (Kafka's `TimeIndex.maybeAppend`) and the index is not full
    /// (unless `skip_full_check`, used for the final entry of a segment).
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64, skip_full_check: bool) {
        let Some(relative_offset) = relative(offset, self.base_offset) else {
            return;
        };
        let entry = TimestampOffset {
            timestamp,
            relative_offset,
        };
        if (skip_full_check || !self.is_full())
            && self.entries.last().is_none_or(|last| last.precedes(&entry))
        {
            self.push(entry);
        }
    }

    /// The largest entry whose timestamp is `<= target`, as
    /// `(timestamp ms, absolute offset)`; `(-1, base_offset)` when there is
    /// none (Kafka's `TimeIndex.lookup`).
    pub fn lookup(&self, target: i64) -> (i64, i64) {
        let idx = self.entries.partition_point(|e| e.timestamp <= target);
        match idx.checked_sub(1).map(|i| self.entries[i]) {
            Some(e) => (e.timestamp, self.base_offset + e.relative_offset as i64),
            None => (-1, self.base_offset),
        }
    }

    /// The last entry as `(timestamp ms, absolute offset)`, if any.
    pub fn last_entry(&self) -> Option<(i64, i64)> {
        self.entries
            .last()
            .map(|e| (e.timestamp, self.base_offset + e.relative_offset as i64))
    }
}

fn relative(offset: i64, base: i64) -> Option<u32> {
    u32::try_from(offset.checked_sub(base)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_offset(dir: &Path, max: u64, log_size: u64) -> (OffsetIndex, bool) {
        OffsetIndex::open(
            dir.join("00000000000000000100.index"),
            100,
            max,
            log_size,
            |e| Some(e.position),
        )
        .unwrap()
    }

    #[test]
    fn offset_index_bytes_match_kafka_layout() {
        let dir = tempfile::tempdir().unwrap();
        let (mut idx, _) = open_offset(dir.path(), 1024, 0);
        idx.append(105, 4096);
        idx.append(0x0102_0304 + 100, 0x0a0b_0c0d);
        assert!(idx.persist().unwrap());
        let bytes = std::fs::read(idx.path()).unwrap();
        assert_eq!(
            bytes,
            [0, 0, 0, 5, 0, 0, 0x10, 0, 1, 2, 3, 4, 0x0a, 0x0b, 0x0c, 0x0d]
        );
    }

    #[test]
    fn time_index_bytes_match_kafka_layout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.timeindex");
        let (mut idx, _) = TimeIndex::open(path.clone(), 100, 1200, 0, |_| None).unwrap();
        idx.maybe_append(0x0102_0304_0506_0708, 107, false);
        idx.maybe_append(5, 110, false); // not larger: skipped
        idx.persist().unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 7]
        );
        assert_eq!(
            idx.lookup(0x0102_0304_0506_0708),
            (0x0102_0304_0506_0708, 107)
        );
        assert_eq!(idx.lookup(3), (-1, 100));
    }

    #[test]
    fn lookup_finds_largest_entry_not_above_target() {
        let dir = tempfile::tempdir().unwrap();
        let (mut idx, _) = open_offset(dir.path(), 1 << 20, 0);
        for i in 1..=1000u32 {
            idx.append(100 + 10 * i as i64, i * 100);
        }
        assert_eq!(idx.lookup(50), (100, 0));
        assert_eq!(idx.lookup(109), (100, 0));
        assert_eq!(idx.lookup(110), (110, 100));
        assert_eq!(idx.lookup(119), (110, 100));
        assert_eq!(idx.lookup(5555), (5550, 54_500));
        assert_eq!(idx.lookup(1_000_000), (10_100, 100_000));
        // Persist and reopen: same answers from the file.
        idx.persist().unwrap();
        let (reopened, valid) = open_offset(dir.path(), 1 << 20, 200_000);
        assert!(valid);
        assert_eq!(reopened.entries(), idx.entries());
    }

    #[test]
    fn lookup_within_also_bounds_the_position() {
        let dir = tempfile::tempdir().unwrap();
        let (mut idx, _) = open_offset(dir.path(), 1 << 20, 0);
        for i in 1..=1000u32 {
            idx.append(100 + 10 * i as i64, i * 100);
        }
        assert_eq!(idx.lookup_within(5555, u64::MAX), idx.lookup(5555));
        // The position bound wins: entry 550 (offset 5600) is too far.
        assert_eq!(idx.lookup_within(5555, 3_050), (400, 3_000));
        assert_eq!(idx.lookup_within(5555, 3_000), (400, 3_000));
        // The offset bound wins.
        assert_eq!(idx.lookup_within(419, 3_000), (400, 3_000));
        assert_eq!(idx.lookup_within(410, 10_000), (410, 3_100));
        assert_eq!(idx.lookup_within(109, 10_000), (100, 0));
        assert_eq!(idx.lookup_within(5555, 99), (100, 0));
    }

    #[test]
    fn full_index_rejects_entries() {
        let dir = tempfile::tempdir().unwrap();
        let (mut idx, _) = open_offset(dir.path(), 16, 0);
        idx.append(101, 10);
        assert!(!idx.is_full());
        idx.append(102, 20);
        assert!(idx.is_full());
        idx.append(103, 30);
        assert_eq!(idx.len(), 2);
    }

    /// Kafka's `OffsetIndex.truncateTo`: entries at or above the offset go,
    /// from memory at once and from the file at the next persist, also
    /// when new entries were appended in between.
    #[test]
    fn truncate_to_cuts_written_entries_at_the_next_persist() {
        let dir = tempfile::tempdir().unwrap();
        let (mut idx, _) = open_offset(dir.path(), 1024, 1000);
        for (offset, position) in [(110, 10), (120, 20), (130, 30), (140, 40)] {
            idx.append(offset, position);
        }
        idx.persist().unwrap();
        idx.truncate_to(130);
        assert_eq!(idx.lookup(i64::MAX), (120, 20));
        idx.truncate_to(125);
        idx.append(126, 25);
        idx.persist().unwrap();
        drop(idx.take_for_sync().unwrap());
        let (reopened, ok) = open_offset(dir.path(), 1024, 1000);
        assert!(ok);
        let offsets: Vec<i64> = reopened
            .entries()
            .iter()
            .map(|e| 100 + i64::from(e.relative_offset))
            .collect();
        assert_eq!(offsets, vec![110, 120, 126]);
    }

    #[test]
    fn corrupt_files_are_reported_and_reset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.index");
        std::fs::write(&path, [0u8; 7]).unwrap();
        let (mut idx, valid) = open_offset(dir.path(), 1024, 100);
        assert!(!valid);
        assert!(idx.is_empty());
        assert!(!idx.is_open(), "an index keeps no descriptor at rest");
        idx.persist().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);

        // Decreasing entries.
        std::fs::write(&path, [0, 0, 0, 5, 0, 0, 0, 9, 0, 0, 0, 4, 0, 0, 0, 10]).unwrap();
        assert!(!open_offset(dir.path(), 1024, 100).1);
        // Position past the end of the log.
        std::fs::write(&path, [0, 0, 0, 5, 0, 0, 0, 200]).unwrap();
        assert!(!open_offset(dir.path(), 1024, 100).1);
        // Missing file with a non-empty log.
        std::fs::remove_file(&path).unwrap();
        assert!(!open_offset(dir.path(), 1024, 100).1);
    }
}
