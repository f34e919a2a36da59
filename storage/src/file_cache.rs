//! [`FileCache`]: a bounded, process-wide set of open segment `.log` files,
//! so that a partition costs no file descriptor at rest (issue 15: a broker
//! with 100,000 partitions starts within a descriptor limit of 20,000).
//!
//! Each [`LogSegment`](crate::segment::LogSegment) owns a [`CachedFile`]: the
//! path it reads and appends to, and a slot that holds the open descriptor
//! while the cache lets it. [`CachedFile::get`] returns the open file,
//! opening it through the [`FileSystem`] seam when the slot is empty; when
//! more than [`FileCache::capacity`] files are then open, the cache closes
//! others, least recently used first (the CLOCK approximation of LRU: a
//! file used since the hand last passed it gets a second chance).
//!
//! Correctness rules:
//! * A file with writes not yet fdatasynced is never closed by the cache
//!   ("pinned"). Linux reports a writeback error only to descriptors open
//!   when it happened (and may forget it once the inode leaves memory), so
//!   the fdatasync that a durable flush relies on must run on the
//!   descriptor the writes went through. A writer calls
//!   [`CachedFile::begin_write`] before it takes the file and
//!   [`CachedFile::end_write`] after; a flush reads [`CachedFile::written`]
//!   before its fdatasync and passes it to [`CachedFile::mark_synced`]
//!   after a successful one. Pinned files may take the cache past its
//!   capacity; they become closable at their next flush.
//! * Closing only drops the cache's reference: a reader, a
//!   [`FileSlice`](crate::FileSlice) on its way to `sendfile` or a flush
//!   holding the `Arc<File>` keeps the descriptor open until it is done.
//! * The cache holds no path: a segment renamed (`.deleted`, `.swap`,
//!   `.cleaned`) while its file is closed is reopened under its new name.
//!
//! Capacity: the broker sets it at start from the descriptor limit
//! ([`capacity_for_limit`]); until then it is derived from the process's
//! current soft `RLIMIT_NOFILE` in the same way.

use std::collections::VecDeque;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::error::StorageError;
use crate::fs::FileSystem;

/// Descriptors [`capacity_for_limit`] keeps out of the cache for everything
/// else the broker opens: client and inter-broker connections, listeners,
/// index files during a flush, checkpoint and snapshot files while they are
/// written, the metadata log, and `.log` files held by in-flight fetches.
/// A quarter of the limit, and at least this many.
pub const MIN_RESERVED_DESCRIPTORS: u64 = 1024;

/// Fewest files the cache keeps open whatever the limit.
pub const MIN_CAPACITY: usize = 64;

/// How many segment files may stay open for a descriptor limit of `limit`
/// (the soft `RLIMIT_NOFILE`): the limit minus a reserve of a quarter of
/// it, at least [`MIN_RESERVED_DESCRIPTORS`], and never below
/// [`MIN_CAPACITY`]. For this machine's 20,000: 15,000 files.
pub fn capacity_for_limit(limit: u64) -> usize {
    let reserve = (limit / 4).max(MIN_RESERVED_DESCRIPTORS);
    usize::try_from(limit.saturating_sub(reserve))
        .unwrap_or(usize::MAX)
        .max(MIN_CAPACITY)
}

/// The process's soft `RLIMIT_NOFILE` (`u64::MAX` when unlimited).
pub fn descriptor_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX)
}

/// A bounded set of open files; see the module docs.
#[derive(Debug)]
pub struct FileCache {
    capacity: AtomicUsize,
    /// Files open in slots (not counting descriptors held elsewhere).
    open: AtomicUsize,
    ring: Mutex<Ring>,
}

#[derive(Debug, Default)]
struct Ring {
    /// Slots with an open file, in CLOCK order (front: next to examine).
    slots: VecDeque<Weak<Slot>>,
    /// Entries of `slots` whose [`CachedFile`] was dropped.
    dead: usize,
}

#[derive(Debug, Default)]
struct Slot {
    file: Mutex<Option<Arc<File>>>,
    /// Writes begun / ended through this file, and the count of ended
    /// writes the last successful fdatasync covered.
    writes_begun: AtomicU64,
    writes_ended: AtomicU64,
    synced: AtomicU64,
    /// Used since the CLOCK hand last passed.
    referenced: AtomicBool,
    /// In the ring (guarded by the ring's lock).
    in_ring: AtomicBool,
}

impl Slot {
    fn pinned(&self) -> bool {
        self.writes_begun.load(Ordering::Acquire) > self.synced.load(Ordering::Acquire)
    }
}

impl FileCache {
    /// A cache keeping at most `capacity` unpinned files open.
    pub fn new(capacity: usize) -> Arc<FileCache> {
        Arc::new(FileCache {
            capacity: AtomicUsize::new(capacity.max(1)),
            open: AtomicUsize::new(0),
            ring: Mutex::new(Ring::default()),
        })
    }

    /// The process-wide cache every [`LogSegment`](crate::segment::LogSegment)
    /// uses, sized from the current descriptor limit until
    /// [`FileCache::set_capacity`] is called.
    pub fn global() -> &'static Arc<FileCache> {
        static GLOBAL: OnceLock<Arc<FileCache>> = OnceLock::new();
        GLOBAL.get_or_init(|| FileCache::new(capacity_for_limit(descriptor_limit())))
    }

    /// Most files kept open (pinned files aside).
    pub fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed)
    }

    /// Changes the capacity; files over it are closed at the next open.
    pub fn set_capacity(&self, capacity: usize) {
        self.capacity.store(capacity.max(1), Ordering::Relaxed);
    }

    /// Files the cache holds open now.
    pub fn open_files(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// A handle for one file, not opened until first used.
    pub fn file(self: &Arc<Self>) -> CachedFile {
        CachedFile {
            cache: self.clone(),
            slot: Arc::new(Slot::default()),
        }
    }

    /// Registers a slot that just got its file, then closes unpinned files,
    /// least recently used first, until at most `capacity` are open.
    fn opened(&self, slot: &Arc<Slot>) {
        self.open.fetch_add(1, Ordering::AcqRel);
        let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        if !slot.in_ring.swap(true, Ordering::AcqRel) {
            ring.slots.push_back(Arc::downgrade(slot));
        }
        if ring.dead > ring.slots.len() / 2 {
            ring.slots.retain(|w| w.strong_count() > 0);
            ring.dead = 0;
        }
        // Two passes: the first clears reference bits, the second can close.
        let mut budget = 2 * ring.slots.len();
        while self.open.load(Ordering::Acquire) > self.capacity() && budget > 0 {
            budget -= 1;
            let Some(weak) = ring.slots.pop_front() else {
                break;
            };
            let Some(candidate) = weak.upgrade() else {
                ring.dead = ring.dead.saturating_sub(1);
                continue;
            };
            // A slot in use (its lock held, the new one included) or
            // pinned stays; so does one used since the last pass, once.
            let closable = !Arc::ptr_eq(&candidate, slot)
                && !candidate.referenced.swap(false, Ordering::AcqRel)
                && !candidate.pinned();
            let guard = if closable {
                candidate.file.try_lock().ok()
            } else {
                None
            };
            match guard {
                // Pinned is checked again under the slot's lock: a writer
                // begins its write before it locks the slot.
                Some(mut file) if !candidate.pinned() => {
                    if file.take().is_some() {
                        self.open.fetch_sub(1, Ordering::AcqRel);
                    }
                    candidate.in_ring.store(false, Ordering::Release);
                }
                _ => ring.slots.push_back(weak),
            }
        }
        if self.open.load(Ordering::Acquire) > self.capacity() {
            tracing::debug!(
                open = self.open.load(Ordering::Relaxed),
                capacity = self.capacity(),
                "segment file cache over capacity: every other file is in use or not yet synced"
            );
        }
    }
}

/// One segment file's place in a [`FileCache`]; see the module docs.
#[derive(Debug)]
pub struct CachedFile {
    cache: Arc<FileCache>,
    slot: Arc<Slot>,
}

impl CachedFile {
    /// The open file at `path` (the file's current name), opening it through
    /// `fs` if the cache closed it or it was never opened. `create` creates
    /// it when missing and truncates it to zero bytes, for a new segment.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the file cannot be opened (`EMFILE` when the
    /// process is out of descriptors).
    pub fn get_or_create(
        &self,
        fs: &dyn FileSystem,
        path: &Path,
        create: bool,
    ) -> Result<Arc<File>, StorageError> {
        self.slot.referenced.store(true, Ordering::Release);
        let mut file = self.slot.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(open) = file.as_ref() {
            return Ok(open.clone());
        }
        let opened = Arc::new(
            if create {
                fs.open_file(path, true)
            } else {
                fs.open_existing(path)
            }
            .map_err(|e| StorageError::io("open", path, e))?,
        );
        *file = Some(opened.clone());
        drop(file);
        self.cache.opened(&self.slot);
        Ok(opened)
    }

    /// [`CachedFile::get_or_create`] of an existing file.
    ///
    /// # Errors
    /// As [`CachedFile::get_or_create`].
    pub fn get(&self, fs: &dyn FileSystem, path: &Path) -> Result<Arc<File>, StorageError> {
        self.get_or_create(fs, path, false)
    }

    /// Whether the file is open in the cache now.
    pub fn is_open(&self) -> bool {
        self.slot
            .file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Pins the file before a write (or truncation) through it: the cache
    /// keeps it open until a flush covering the write succeeds. Call before
    /// [`CachedFile::get`] for that write.
    pub fn begin_write(&self) {
        self.slot.writes_begun.fetch_add(1, Ordering::AcqRel);
    }

    /// Records that a write begun with [`CachedFile::begin_write`] returned
    /// (successfully or not: a failed write may still have changed the file).
    pub fn end_write(&self) {
        self.slot.writes_ended.fetch_add(1, Ordering::AcqRel);
    }

    /// The count of ended writes, for [`CachedFile::mark_synced`]: read it
    /// just before the fdatasync.
    pub fn written(&self) -> u64 {
        self.sync_mark().written()
    }

    /// Records that an fdatasync, started after [`CachedFile::written`]
    /// returned `written`, succeeded: writes up to there no longer pin the file.
    pub fn mark_synced(&self, written: u64) {
        self.sync_mark().synced(written);
    }

    /// Whether writes through the file await an fdatasync.
    pub fn is_pinned(&self) -> bool {
        self.slot.pinned()
    }

    /// A handle sharing this file's slot, for a flush to mark it synced.
    pub(crate) fn sync_mark(&self) -> SyncMark {
        SyncMark {
            slot: self.slot.clone(),
        }
    }
}

impl Drop for CachedFile {
    fn drop(&mut self) {
        let closed = self
            .slot
            .file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if closed.is_some() {
            self.cache.open.fetch_sub(1, Ordering::AcqRel);
        }
        if self.slot.in_ring.load(Ordering::Acquire) {
            let mut ring = self.cache.ring.lock().unwrap_or_else(|p| p.into_inner());
            ring.dead += 1;
        }
    }
}

/// What a flush keeps of a [`CachedFile`] to unpin it after its fdatasync:
/// [`SyncMark::written`] before, [`SyncMark::synced`] after success.
#[derive(Debug, Clone)]
pub(crate) struct SyncMark {
    slot: Arc<Slot>,
}

impl SyncMark {
    pub(crate) fn written(&self) -> u64 {
        self.slot.writes_ended.load(Ordering::Acquire)
    }

    pub(crate) fn synced(&self, written: u64) {
        self.slot.synced.fetch_max(written, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFileSystem;

    fn fds() -> usize {
        std::fs::read_dir("/proc/self/fd").unwrap().count()
    }

    fn files(dir: &Path, n: usize) -> Vec<std::path::PathBuf> {
        (0..n)
            .map(|i| {
                let p = dir.join(format!("{i}.log"));
                std::fs::write(&p, format!("file {i}")).unwrap();
                p
            })
            .collect()
    }

    #[test]
    fn capacity_leaves_a_reserve_of_the_descriptor_limit() {
        assert_eq!(capacity_for_limit(20_000), 15_000);
        assert_eq!(capacity_for_limit(1_048_576), 786_432);
        assert_eq!(capacity_for_limit(2_048), 1_024);
        assert_eq!(capacity_for_limit(100), MIN_CAPACITY);
    }

    #[test]
    fn opening_past_capacity_closes_a_file_not_used_since_the_hand_passed() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RealFileSystem;
        let paths = files(dir.path(), 5);
        let cache = FileCache::new(3);
        let handles: Vec<_> = paths.iter().map(|_| cache.file()).collect();
        for (h, p) in handles.iter().zip(&paths).take(4) {
            h.get(&fs, p).unwrap();
        }
        // The hand cleared every mark, then closed the oldest.
        assert_eq!(cache.open_files(), 3);
        assert!(!handles[0].is_open());
        // File 1 is used again; file 2 is not: opening file 4 closes 2.
        handles[1].get(&fs, &paths[1]).unwrap();
        handles[4].get(&fs, &paths[4]).unwrap();
        assert_eq!(cache.open_files(), 3);
        let open: Vec<bool> = handles.iter().map(CachedFile::is_open).collect();
        assert_eq!(open, [false, true, false, true, true]);
        // A closed file reopens on demand and reads the same bytes.
        let file = handles[0].get(&fs, &paths[0]).unwrap();
        let mut buf = [0u8; 6];
        std::os::unix::fs::FileExt::read_exact_at(&*file, &mut buf, 0).unwrap();
        assert_eq!(&buf, b"file 0");
        assert_eq!(cache.open_files(), 3);
    }

    #[test]
    fn the_cache_bounds_the_process_descriptors() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RealFileSystem;
        let paths = files(dir.path(), 200);
        let cache = FileCache::new(10);
        let before = fds();
        let handles: Vec<_> = paths.iter().map(|_| cache.file()).collect();
        for (h, p) in handles.iter().zip(&paths) {
            h.get(&fs, p).unwrap();
        }
        let during = fds();
        assert_eq!(cache.open_files(), 10);
        // Other tests of this binary open files too: allow some slack.
        assert!(
            during < before + 60,
            "{before} descriptors before, {during} after"
        );
        drop(handles);
        assert_eq!(cache.open_files(), 0);
    }

    #[test]
    fn a_file_with_unsynced_writes_stays_open_until_synced() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RealFileSystem;
        let paths = files(dir.path(), 4);
        let cache = FileCache::new(1);
        let dirty = cache.file();
        dirty.begin_write();
        let file = dirty.get(&fs, &paths[0]).unwrap();
        fs.write_all_at(&file, &paths[0], b"more", 6).unwrap();
        dirty.end_write();
        drop(file);
        let others: Vec<_> = (1..4).map(|_| cache.file()).collect();
        for (h, p) in others.iter().zip(&paths[1..]) {
            h.get(&fs, p).unwrap();
        }
        assert!(dirty.is_open(), "a pinned file was closed");
        assert!(dirty.is_pinned());
        // A flush: read the count, fdatasync, mark.
        let mark = dirty.sync_mark();
        let written = mark.written();
        fs.sync_data(&dirty.get(&fs, &paths[0]).unwrap(), &paths[0])
            .unwrap();
        mark.synced(written);
        assert!(!dirty.is_pinned());
        others[0].get(&fs, &paths[1]).unwrap();
        others[1].get(&fs, &paths[2]).unwrap();
        assert!(!dirty.is_open(), "a synced file was kept past capacity");
    }

    #[test]
    fn a_write_in_progress_during_a_sync_keeps_the_file_pinned() {
        let cache = FileCache::new(1);
        let f = cache.file();
        f.begin_write();
        f.end_write();
        let written = f.written();
        f.begin_write(); // lands while the fdatasync runs
        f.mark_synced(written);
        assert!(f.is_pinned());
        f.end_write();
        f.mark_synced(f.written());
        assert!(!f.is_pinned());
    }

    #[test]
    fn a_closed_file_reopens_under_its_new_name_after_a_rename() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RealFileSystem;
        let paths = files(dir.path(), 2);
        let cache = FileCache::new(1);
        let a = cache.file();
        let b = cache.file();
        a.get(&fs, &paths[0]).unwrap();
        b.get(&fs, &paths[1]).unwrap();
        assert!(!a.is_open());
        let renamed = dir.path().join("0.log.deleted");
        fs.rename(&paths[0], &renamed).unwrap();
        let file = a.get(&fs, &renamed).unwrap();
        let mut buf = [0u8; 6];
        std::os::unix::fs::FileExt::read_exact_at(&*file, &mut buf, 0).unwrap();
        assert_eq!(&buf, b"file 0");
        // The old name is gone: opening it fails rather than creating it.
        let c = cache.file();
        assert!(c.get(&fs, &paths[0]).is_err());
        assert!(!paths[0].exists());
    }

    #[test]
    fn a_reader_keeps_its_descriptor_after_the_cache_closes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RealFileSystem;
        let paths = files(dir.path(), 2);
        let cache = FileCache::new(1);
        let a = cache.file();
        let held = a.get(&fs, &paths[0]).unwrap();
        cache.file().get(&fs, &paths[1]).unwrap();
        cache.file().get(&fs, &paths[1]).unwrap();
        assert!(!a.is_open());
        let mut buf = [0u8; 6];
        std::os::unix::fs::FileExt::read_exact_at(&*held, &mut buf, 0).unwrap();
        assert_eq!(&buf, b"file 0");
    }
}
