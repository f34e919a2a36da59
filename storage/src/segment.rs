//! [`LogSegment`]: one `.log` file of record batches with its `.index` and
//! `.timeindex` (Kafka's `LogSegment`). The file name is the segment's base
//! offset, zero-padded to 20 digits (`00000000000000000000.log`). The segment
//! appends already-validated batches, answers reads by byte region, rebuilds
//! its indexes on recovery and truncates a torn tail. It knows nothing about
//! the Kafka protocol beyond the batch header.
//!
//! Descriptors: a segment keeps none at rest. Its `.log` file is opened on
//! demand through the process-wide [`FileCache`] (closed again when the
//! cache needs room, never while writes through it await an fdatasync), and
//! its index files are opened only from a write to the sync covering it
//! (see [`crate::index`]). So a partition costs at most one descriptor,
//! and the broker as a whole at most the cache's capacity plus the pinned
//! files and those in use.

use std::collections::VecDeque;
use std::fs::File;
use std::io::IoSlice;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::batch::{RecordBatchHeader, RECORD_BATCH_OVERHEAD};
use crate::error::StorageError;
use crate::file_cache::{CachedFile, FileCache, SyncMark};
use crate::fs::{remove_if_exists, FileSystem};
use crate::index::{OffsetIndex, TimeIndex};
use crate::leader_epoch::LeaderEpochCache;
use crate::write_behind;

/// Suffix of segment data files.
pub const LOG_FILE_SUFFIX: &str = ".log";
/// Suffix of offset index files.
pub const INDEX_FILE_SUFFIX: &str = ".index";
/// Suffix of time index files.
pub const TIME_INDEX_FILE_SUFFIX: &str = ".timeindex";
/// Suffix a segment's files get when the segment is deleted (Kafka's
/// `LogFileUtils.DELETED_FILE_SUFFIX`); such files are removed right after
/// the rename, and any left by a crash are removed when the log is opened.
pub const DELETED_FILE_SUFFIX: &str = ".deleted";
/// Suffix of the files of a segment the
/// [`LogCleaner`](crate::log::cleaner) is writing (Kafka's
/// `LogFileUtils.CLEANED_FILE_SUFFIX`); leftovers are removed on open.
pub const CLEANED_FILE_SUFFIX: &str = ".cleaned";
/// Suffix of a cleaned segment's files while it replaces the old segments
/// (Kafka's `LogFileUtils.SWAP_FILE_SUFFIX`); [`crate::Log::open`] finishes
/// an interrupted swap.
pub const SWAP_FILE_SUFFIX: &str = ".swap";
/// Bytes read per `pread` when scanning batch headers.
const SCAN_CHUNK: usize = 16 * 1024;

/// Bytes read and written back at a time when recovery rewrites the tail of
/// a segment (`LogSegment::rewrite_tail`).
const REWRITE_CHUNK: usize = 1 << 20;
/// Most iovecs passed to one `pwritev` (Linux `IOV_MAX`).
const IOV_MAX: usize = 1024;
/// How many batch ends the active segment remembers (see
/// [`LogSegment::cached_position_of`]): 8 bytes each, allocated with the
/// first append. A partition's high watermark trails its log end offset by
/// the batches its followers have not fetched yet, usually a few.
pub(crate) const RECENT_BATCH_ENDS: usize = 32;

/// The file name stem of a segment: its base offset on 20 digits.
pub fn file_stem(base_offset: i64) -> String {
    format!("{base_offset:020}")
}

/// What a batch appended to a segment contributes to its indexes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AppendedBatch {
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub size: u32,
}

/// A file a flush fdatasyncs: the descriptor, its path, and for a `.log`
/// file the [`SyncMark`] that unpins it in the [`FileCache`] after a
/// successful sync.
#[derive(Debug)]
pub(crate) struct FlushFile {
    pub file: Arc<File>,
    pub path: PathBuf,
    pub mark: Option<SyncMark>,
}

impl FlushFile {
    /// fdatasyncs the file, then unpins a `.log` file up to the writes that
    /// had returned when the sync started.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the sync fails (the file stays pinned).
    pub(crate) fn sync(&self, fs: &dyn FileSystem) -> Result<(), StorageError> {
        let written = self.mark.as_ref().map(SyncMark::written);
        fs.sync_data(&self.file, &self.path)
            .map_err(|e| StorageError::io("fdatasync", &self.path, e))?;
        if let (Some(mark), Some(written)) = (&self.mark, written) {
            mark.synced(written);
        }
        Ok(())
    }
}

/// Tells segment objects apart (the cleaner checks that a segment it read is
/// still the same one).
static NEXT_SEGMENT_ID: AtomicU64 = AtomicU64::new(0);

/// One segment of a partition log. See the module docs.
#[derive(Debug)]
pub struct LogSegment {
    fs: Arc<dyn FileSystem>,
    id: u64,
    base_offset: i64,
    log_path: PathBuf,
    /// The `.log` file, open while the [`FileCache`] lets it be.
    log: CachedFile,
    /// Bytes of valid batches in the `.log` file. Reads never go past it.
    size: u64,
    /// A failed append could not cut the file back to `size`: bytes of a torn
    /// write may follow the valid ones until the next cut-back succeeds.
    torn_tail: bool,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    index_interval_bytes: u64,
    bytes_since_last_index_entry: u64,
    /// Largest batch max timestamp (ms) in the segment, -1 if none.
    max_timestamp: i64,
    /// Last offset of the first batch holding `max_timestamp`, -1 if none.
    offset_of_max_timestamp: i64,
    /// The `.log` file changed since the last flush.
    dirty: bool,
    /// The offset after the last batch whose bytes this process has written
    /// to the `.log` file (the segment's base offset before any append). A
    /// [`crate::PendingFlush`] reads it just before its fdatasync, which
    /// then covers every offset below it (see [`LogSegment::written_end`]).
    written_end: Arc<AtomicI64>,
    /// The byte position up to which writeback of the `.log` file was
    /// started or is not owed (see [`crate::write_behind`]).
    writeback_started: u64,
    /// The indexes changed since they were last synced (lags `dirty` for
    /// the active segment, whose indexes are synced once it is inactive).
    indexes_dirty: bool,
    /// Wall-clock time (ms) this segment object was created: the roll clock
    /// of a segment whose batches carry no timestamp (Kafka's
    /// `LogSegment.created`).
    created_ms: i64,
    /// Max timestamp of the first batch (Kafka's `rollingBasedTimestamp`):
    /// `None` until loaded, `Some(-1)` when the segment is empty.
    first_batch_timestamp: Option<i64>,
    /// The ends of the last [`RECENT_BATCH_ENDS`] batches appended through
    /// this object while it is the active segment, ascending: the next
    /// offset relative to the base offset, and the byte position after the
    /// batch. Dropped when the segment becomes inactive.
    recent_batch_ends: VecDeque<(u32, u32)>,
}

/// Milliseconds since the Unix epoch by the system clock.
pub(crate) fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The byte region a segment read returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentRead {
    pub position: u64,
    pub len: usize,
}

impl LogSegment {
    /// Opens the segment `base_offset` in `dir` through `fs` (see
    /// [`crate::fs`]), creating empty files when `create` is true
    /// (truncating any existing ones). Returns the segment and whether both
    /// index files were present and well formed.
    ///
    /// # Errors
    /// [`StorageError::Io`] if a file cannot be opened or created.
    pub fn open(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        base_offset: i64,
        index_interval_bytes: u64,
        max_index_bytes: u64,
        create: bool,
    ) -> Result<(Self, bool), StorageError> {
        Self::open_with_suffix(
            fs,
            dir,
            base_offset,
            index_interval_bytes,
            max_index_bytes,
            create,
            "",
        )
    }

    /// [`LogSegment::open`] for files whose names end in `suffix` after the
    /// usual one (`00000000000000000000.log.cleaned` for
    /// [`CLEANED_FILE_SUFFIX`]).
    pub(crate) fn open_with_suffix(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        base_offset: i64,
        index_interval_bytes: u64,
        max_index_bytes: u64,
        create: bool,
        suffix: &str,
    ) -> Result<(Self, bool), StorageError> {
        let stem = file_stem(base_offset);
        let log_path = dir.join(format!("{stem}{LOG_FILE_SUFFIX}{suffix}"));
        let index_path = dir.join(format!("{stem}{INDEX_FILE_SUFFIX}{suffix}"));
        let time_index_path = dir.join(format!("{stem}{TIME_INDEX_FILE_SUFFIX}{suffix}"));
        if create {
            for p in [&index_path, &time_index_path] {
                remove_if_exists(&*fs, p)?;
            }
        }
        let log = FileCache::global().file();
        let size = if create {
            log.get_or_create(&*fs, &log_path, true)?;
            0
        } else {
            match std::fs::metadata(&log_path) {
                Ok(meta) => meta.len(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    log.get_or_create(&*fs, &log_path, true)?;
                    0
                }
                Err(e) => return Err(StorageError::io("stat", &log_path, e)),
            }
        };
        let (offset_index, offset_ok) = OffsetIndex::open_with_file_system(
            fs.clone(),
            index_path,
            base_offset,
            max_index_bytes,
            size,
            |e| Some(e.position),
        )?;
        let (time_index, time_ok) = TimeIndex::open_with_file_system(
            fs.clone(),
            time_index_path,
            base_offset,
            max_index_bytes,
            size,
            |_| None,
        )?;
        let (max_timestamp, offset_of_max_timestamp) = time_index.last_entry().unwrap_or((-1, -1));
        let segment = LogSegment {
            fs,
            id: NEXT_SEGMENT_ID.fetch_add(1, Ordering::Relaxed),
            base_offset,
            log_path,
            log,
            size,
            torn_tail: false,
            offset_index,
            time_index,
            index_interval_bytes,
            bytes_since_last_index_entry: 0,
            max_timestamp,
            offset_of_max_timestamp,
            dirty: create,
            written_end: Arc::new(AtomicI64::new(base_offset)),
            writeback_started: size,
            indexes_dirty: create,
            created_ms: wall_clock_ms(),
            first_batch_timestamp: (size == 0).then_some(-1),
            recent_batch_ends: VecDeque::new(),
        };
        Ok((segment, offset_ok && time_ok))
    }

    /// Tells this segment object apart from every other one of the process
    /// (a segment replaced by one with the same base offset gets a new id).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The first offset this segment may hold.
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// Bytes of batches in the `.log` file.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Largest batch max timestamp in the segment (ms), -1 if unknown.
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    /// Path of the `.log` file.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The offset index.
    pub fn offset_index(&self) -> &OffsetIndex {
        &self.offset_index
    }

    /// The time index.
    pub fn time_index(&self) -> &TimeIndex {
        &self.time_index
    }

    pub(crate) fn indexes_full(&self) -> bool {
        self.offset_index.is_full() || self.time_index.is_full()
    }

    pub(crate) fn offset_of_max_timestamp(&self) -> i64 {
        self.offset_of_max_timestamp
    }

    /// The timestamp retention compares with `retention.ms` (Kafka's
    /// `LogSegment.largestTimestamp`): the largest batch max timestamp in the
    /// segment (ms), or the `.log` file's modification time when no batch
    /// carries a timestamp.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the file's metadata cannot be read.
    pub fn largest_timestamp(&self) -> Result<i64, StorageError> {
        if self.max_timestamp >= 0 {
            return Ok(self.max_timestamp);
        }
        let modified = std::fs::metadata(&self.log_path)
            .and_then(|m| m.modified())
            .map_err(|e| StorageError::io("stat", &self.log_path, e))?;
        Ok(modified
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0))
    }

    /// How long (ms) the segment has been open for `segment.ms` rolling
    /// (Kafka's `LogSegment.timeWaitedForRoll`): `message_timestamp` (the
    /// largest timestamp of the batches about to be appended) minus the
    /// first batch's max timestamp, or `now_ms` minus the segment's creation
    /// time when the first batch has no timestamp.
    ///
    /// # Errors
    /// [`StorageError::Io`] / [`StorageError::CorruptRecord`] if the first
    /// batch header cannot be read.
    pub(crate) fn time_waited_for_roll(
        &mut self,
        now_ms: i64,
        message_timestamp: i64,
    ) -> Result<i64, StorageError> {
        let first = match self.first_batch_timestamp {
            Some(ts) => ts,
            None => {
                let ts = self.headers().header_at(0)?.map_or(-1, |h| h.max_timestamp);
                self.first_batch_timestamp = Some(ts);
                ts
            }
        };
        Ok(if first >= 0 {
            message_timestamp.saturating_sub(first)
        } else {
            now_ms.saturating_sub(self.created_ms)
        })
    }

    /// Writes `bufs` (whole batches, already stamped; `total` bytes) at the end
    /// of the `.log` file with `pwritev`, then updates the indexes for each
    /// batch in `batches` as Kafka's `LogSegment.append` does. On a failed
    /// (possibly partial) write nothing in memory changes and the file is cut
    /// back to its previous size; if that cut fails too, the next append
    /// (or roll) retries it before writing, and reads never see the torn
    /// bytes because they stop at [`LogSegment::size`].
    pub(crate) fn append(
        &mut self,
        bufs: &mut [IoSlice<'_>],
        total: usize,
        batches: &[AppendedBatch],
    ) -> Result<(), StorageError> {
        let start = self.size;
        self.write_batches(bufs, total, batches)?;
        self.maybe_write_behind();
        let remembered = batches.len().saturating_sub(RECENT_BATCH_ENDS);
        let mut end = start;
        for (i, b) in batches.iter().enumerate() {
            end += u64::from(b.size);
            if i < remembered {
                continue;
            }
            if self.recent_batch_ends.len() == RECENT_BATCH_ENDS {
                self.recent_batch_ends.pop_front();
            }
            // Both fit: offsets are within 32-bit relative range of the base,
            // and segment.bytes is capped below 2 GiB.
            let next = (b.last_offset + 1 - self.base_offset) as u32;
            self.recent_batch_ends.push_back((next, end as u32));
        }
        Ok(())
    }

    /// Hands the pages written since the last write-behind to the
    /// write-behind thread once [`write_behind::WRITE_BEHIND_BYTES`] of them
    /// have accumulated.
    fn maybe_write_behind(&mut self) {
        let Some((offset, len)) = write_behind::due_range(self.writeback_started, self.size) else {
            return;
        };
        // Open: a write just pinned it in the file cache.
        let Ok(file) = self.file() else {
            return;
        };
        self.writeback_started = offset + len;
        write_behind::submit(write_behind::Writeback {
            fs: self.fs.clone(),
            file,
            path: self.log_path.clone(),
            offset,
            len,
        });
    }

    /// Where `offset` begins in this segment when known without reading the
    /// file: 0 for the base offset, or the end of one of the last
    /// [`RECENT_BATCH_ENDS`] batches appended (the start of the batch after
    /// it).
    pub(crate) fn cached_position_of(&self, offset: i64) -> Option<u32> {
        if offset == self.base_offset {
            return Some(0);
        }
        let relative = u32::try_from(offset - self.base_offset).ok()?;
        let i = self
            .recent_batch_ends
            .binary_search_by_key(&relative, |&(next, _)| next)
            .ok()?;
        Some(self.recent_batch_ends[i].1)
    }

    /// [`LogSegment::append`] without remembering batch ends (the cleaner's
    /// segments are never active).
    fn write_batches(
        &mut self,
        bufs: &mut [IoSlice<'_>],
        total: usize,
        batches: &[AppendedBatch],
    ) -> Result<(), StorageError> {
        self.cut_back_torn_tail()?;
        let start = self.size;
        if let Err(e) = self.write_all_vectored(bufs, start) {
            self.torn_tail = true;
            let _ = self.cut_back_torn_tail();
            return Err(e);
        }
        if start == 0 {
            self.first_batch_timestamp = batches.first().map(|b| b.max_timestamp);
        }
        self.dirty = true;
        let mut position = start;
        for b in batches {
            self.index_batch(b, position);
            position += b.size as u64;
        }
        debug_assert_eq!(position, start + total as u64);
        self.size = start + total as u64;
        if let Some(last) = batches.last() {
            // After the write: a flush that reads this value and then
            // fdatasyncs the file covers these batches.
            self.written_end
                .fetch_max(last.last_offset + 1, Ordering::Release);
        }
        Ok(())
    }

    /// Cuts the file back to [`LogSegment::size`] after a failed append left
    /// bytes past it; a no-op otherwise.
    fn cut_back_torn_tail(&mut self) -> Result<(), StorageError> {
        if self.torn_tail {
            self.set_len(self.size)?;
            self.torn_tail = false;
            self.dirty = true;
        }
        Ok(())
    }

    /// Cuts the `.log` file to `len` bytes (a write: it pins the file until
    /// the next flush).
    fn set_len(&self, len: u64) -> Result<(), StorageError> {
        self.log.begin_write();
        let result = self.file().and_then(|file| {
            self.fs
                .set_len(&file, &self.log_path, len)
                .map_err(|e| StorageError::io("truncate", &self.log_path, e))
        });
        self.log.end_write();
        result
    }

    /// The open `.log` file (opened again if the [`FileCache`] closed it).
    ///
    /// # Errors
    /// [`StorageError::Io`] if it cannot be opened.
    pub(crate) fn file(&self) -> Result<Arc<File>, StorageError> {
        self.log.get(&*self.fs, &self.log_path)
    }

    /// Which descriptors the segment holds now: its `.log` file (open in the
    /// [`FileCache`]), and an index file awaiting its sync.
    pub fn holds_descriptors(&self) -> (bool, bool) {
        (
            self.log.is_open(),
            self.offset_index.is_open() || self.time_index.is_open(),
        )
    }

    fn index_batch(&mut self, b: &AppendedBatch, position: u64) {
        if b.max_timestamp > self.max_timestamp {
            self.max_timestamp = b.max_timestamp;
            self.offset_of_max_timestamp = b.last_offset;
        }
        if self.bytes_since_last_index_entry > self.index_interval_bytes {
            // Positions fit: segment.bytes is capped below 2 GiB.
            self.offset_index.append(b.last_offset, position as u32);
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp, false);
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += b.size as u64;
    }

    fn write_all_vectored(&self, bufs: &mut [IoSlice<'_>], at: u64) -> Result<(), StorageError> {
        self.log.begin_write();
        let result = self
            .file()
            .and_then(|file| self.write_all_vectored_to(&file, bufs, at));
        self.log.end_write();
        result
    }

    fn write_all_vectored_to(
        &self,
        file: &File,
        bufs: &mut [IoSlice<'_>],
        mut at: u64,
    ) -> Result<(), StorageError> {
        let mut bufs = bufs;
        while !bufs.is_empty() {
            let n = bufs.len().min(IOV_MAX);
            let written = self
                .fs
                .write_vectored_at(file, &self.log_path, &bufs[..n], at)
                .map_err(|e| StorageError::io("pwritev", &self.log_path, e))?;
            if written == 0 {
                return Err(StorageError::io(
                    "pwritev",
                    &self.log_path,
                    std::io::ErrorKind::WriteZero.into(),
                ));
            }
            at += written as u64;
            IoSlice::advance_slices(&mut bufs, written);
        }
        Ok(())
    }

    /// A [`Scanner`] over the segment's valid bytes.
    fn scanner(&self) -> Result<Scanner<'_>, StorageError> {
        Ok(Scanner {
            file: self.file()?,
            path: &self.log_path,
            end: self.size,
            buf: Vec::new(),
            buf_start: 0,
        })
    }

    /// Calls `f` with the header of every batch in the segment, in order
    /// (headers only; records are not read).
    ///
    /// # Errors
    /// [`StorageError::Io`] on read errors; [`StorageError::CorruptRecord`]
    /// if a stored header does not parse.
    pub(crate) fn for_each_batch_header(
        &self,
        mut f: impl FnMut(&RecordBatchHeader),
    ) -> Result<(), StorageError> {
        let mut scanner = self.scanner()?;
        let mut position = 0u64;
        while let Some(header) = scanner.header_at(position)? {
            f(&header);
            position += header.size_in_bytes() as u64;
        }
        Ok(())
    }

    /// The offset after the segment's last batch (Kafka's
    /// `LogSegment.readNextOffset`), for a segment loaded without recovery:
    /// batch headers are read from the offset index's last entry to the end
    /// of the file. The base offset when the segment holds no batch.
    ///
    /// `Ok(None)` when the headers do not end exactly at the end of the file
    /// or one does not parse (the file is not as a clean shutdown left it;
    /// the caller recovers the segment instead).
    ///
    /// # Errors
    /// [`StorageError::Io`] on read errors.
    pub(crate) fn read_next_offset(&self) -> Result<Option<i64>, StorageError> {
        let (_, start) = self.offset_index.lookup(i64::MAX);
        let mut scanner = self.scanner()?;
        let mut position = u64::from(start);
        let mut next_offset = self.base_offset;
        loop {
            match scanner.header_at(position) {
                Ok(Some(header)) => {
                    next_offset = header.next_offset();
                    position += header.size_in_bytes() as u64;
                }
                Ok(None) => break,
                Err(StorageError::CorruptRecord { .. }) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Ok((position == self.size).then_some(next_offset))
    }

    /// A [`HeaderReader`] over the segment's valid bytes.
    fn headers(&self) -> HeaderReader<'_> {
        HeaderReader {
            segment: self,
            file: std::cell::OnceCell::new(),
        }
    }

    /// The furthest batch boundary at or below `max_position` known without
    /// reading the `.log` file such that every batch before it has a last
    /// offset `< offset`: from the offset index (an entry `(o, p)` is a batch
    /// at `p` whose last offset is `o`, so the batches before `p` end below
    /// `o`), from the recent batch ends of the active segment, or the start
    /// of the segment. Reading forward from it finds the batch holding
    /// `offset`; every batch before it has a base offset `< offset` and ends
    /// within `max_position`.
    fn boundary_before(&self, offset: i64, max_position: u64) -> Boundary {
        let (indexed, position) = self.offset_index.lookup_within(offset, max_position);
        let mut best = Boundary {
            position: u64::from(position),
            base_at_least: self.base_offset,
            last_at_least: indexed,
        };
        let base = self.base_offset;
        let recent = self.recent_batch_ends.partition_point(|&(next, end)| {
            base + i64::from(next) <= offset && u64::from(end) <= max_position
        });
        if let Some(&(next, end)) = recent
            .checked_sub(1)
            .and_then(|i| self.recent_batch_ends.get(i))
        {
            // The batch after an end starts at or above that end's next
            // offset.
            let next = base + i64::from(next);
            let end = u64::from(end);
            if end > best.position {
                best = Boundary {
                    position: end,
                    base_at_least: next,
                    last_at_least: next,
                };
            } else if end == best.position {
                best.base_at_least = best.base_at_least.max(next);
                best.last_at_least = best.last_at_least.max(next);
            }
        }
        best
    }

    /// Where the batch holding `offset` (the first batch whose last offset
    /// is `>= offset`) starts: from [`LogSegment::boundary_before`], then
    /// batch headers only. `None` if the segment ends first.
    fn find_start(
        &self,
        headers: &HeaderReader<'_>,
        offset: i64,
    ) -> Result<Option<Start>, StorageError> {
        let known = self.boundary_before(offset, self.size);
        if known.position >= self.size {
            return Ok(None);
        }
        if known.last_at_least >= offset {
            return Ok(Some(Start {
                position: known.position,
                header: None,
                base_at_least: known.base_at_least,
            }));
        }
        let mut position = known.position;
        while let Some(header) = headers.header_at(position)? {
            if header.last_offset() >= offset {
                return Ok(Some(Start {
                    position,
                    base_at_least: header.base_offset,
                    header: Some(header),
                }));
            }
            position += header.size_in_bytes() as u64;
        }
        Ok(None)
    }

    /// Finds the batch holding `offset` (the first batch whose last offset is
    /// `>= offset`), starting from the offset index and reading batch headers
    /// only. Returns its position and header, or `None` if the segment ends
    /// first.
    fn find_batch(&self, offset: i64) -> Result<Option<(u64, RecordBatchHeader)>, StorageError> {
        let headers = self.headers();
        let Some(start) = self.find_start(&headers, offset)? else {
            return Ok(None);
        };
        let header = match start.header {
            Some(header) => header,
            None => headers.require(start.position)?,
        };
        Ok(Some((start.position, header)))
    }

    /// The region of whole batches to return for a fetch at `fetch_offset`
    /// (see [`crate::Log::read`]): `None` when the segment holds no batch
    /// with a last offset `>= fetch_offset`.
    ///
    /// Record bytes are never read: the region's start comes from
    /// [`LogSegment::find_start`], its end from the furthest known boundary
    /// within `max_bytes` whose batches all lie below `max_offset`
    /// ([`LogSegment::boundary_before`]), then from the 61-byte headers of
    /// the batches after it, one `pread` each, jumping by batch length (at
    /// most about `index.interval.bytes` of batches). A tailing fetch whose
    /// offset and high watermark are recent batch ends reads nothing.
    pub(crate) fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Option<SegmentRead>, StorageError> {
        let headers = self.headers();
        let Some(start) = self.find_start(&headers, fetch_offset)? else {
            return Ok(None);
        };
        let position = start.position;
        let mut first = start.header;
        let limit = position
            .saturating_add(u64::try_from(max_bytes).unwrap_or(u64::MAX))
            .min(self.size);
        let known = self.boundary_before(max_offset, limit);
        // `at` is a batch boundary: the batches in [position, at) are
        // returned; the batch at `at` has a base offset >= `base_at_least`.
        let (mut at, mut base_at_least) = match known.position.cmp(&position) {
            std::cmp::Ordering::Greater => (known.position, known.base_at_least),
            std::cmp::Ordering::Equal => (position, start.base_at_least.max(known.base_at_least)),
            std::cmp::Ordering::Less => (position, start.base_at_least),
        };
        let mut below_max_offset = true;
        loop {
            if base_at_least >= max_offset {
                below_max_offset = false;
                break;
            }
            if at >= self.size || at + RECORD_BATCH_OVERHEAD as u64 > limit {
                break;
            }
            let header = if at == position {
                match first {
                    Some(h) => h,
                    None => *first.insert(headers.require(at)?),
                }
            } else {
                match headers.header_at(at)? {
                    Some(h) => h,
                    None => break,
                }
            };
            if header.base_offset >= max_offset {
                below_max_offset = false;
                break;
            }
            let end = at + header.size_in_bytes() as u64;
            if end > limit {
                break;
            }
            at = end;
            base_at_least = header.next_offset();
        }
        let mut len = (at - position) as usize;
        if len == 0 && min_one_batch && below_max_offset {
            // KIP-74: the first batch goes whole even when over max_bytes.
            let first = match first {
                Some(h) => h,
                None => headers.require(position)?,
            };
            if first.base_offset < max_offset {
                len = first.size_in_bytes();
            }
        }
        Ok(Some(SegmentRead { position, len }))
    }

    /// The region of the first batch whose max timestamp is `>= timestamp`
    /// and whose last offset is `>= min_offset` (the log start offset),
    /// found through the time index and offset index then a scan (Kafka's
    /// `LogSegment.findOffsetByTimestamp`).
    pub(crate) fn find_batch_for_timestamp(
        &self,
        timestamp: i64,
        min_offset: i64,
    ) -> Result<Option<SegmentRead>, StorageError> {
        let (_, indexed_offset) = self.time_index.lookup(timestamp);
        let headers = self.headers();
        let mut position = self
            .boundary_before(indexed_offset.max(min_offset), self.size)
            .position;
        while let Some(h) = headers.header_at(position)? {
            if h.max_timestamp >= timestamp && h.last_offset() >= min_offset {
                return Ok(Some(SegmentRead {
                    position,
                    len: h.size_in_bytes(),
                }));
            }
            position += h.size_in_bytes() as u64;
        }
        Ok(None)
    }

    /// The region of the batch holding `offset`.
    pub(crate) fn batch_containing(
        &self,
        offset: i64,
    ) -> Result<Option<SegmentRead>, StorageError> {
        Ok(self.find_batch(offset)?.map(|(position, h)| SegmentRead {
            position,
            len: h.size_in_bytes(),
        }))
    }

    /// Reads a region of the `.log` file into memory.
    pub(crate) fn read_bytes(&self, region: SegmentRead) -> Result<Bytes, StorageError> {
        let mut buf = vec![0u8; region.len];
        pread(&*self.file()?, &mut buf, region.position)
            .map_err(|e| StorageError::io("pread", &self.log_path, e))?;
        Ok(Bytes::from(buf))
    }

    /// Validates every batch from the start of the file, rebuilding both
    /// indexes and the max timestamp, assigning leader epochs newer than the
    /// cache's latest, and truncating the file at the first invalid batch
    /// (short header, bad magic or length, a batch running past the end of
    /// the file, CRC mismatch, offsets going backwards or beyond 32-bit
    /// relative range), and ending the time index with the largest timestamp
    /// as [`LogSegment::on_become_inactive`] does. Returns
    /// `(truncated bytes, next offset)`, the next
    /// offset being `None` when the segment holds no batch. Kafka's
    /// `LogSegment.recover`.
    ///
    /// With `rewrite_from` (recovery after an unclean shutdown, from the
    /// recovery point), the valid bytes of every batch whose last offset is
    /// at or above it are written again in place, so that the next flush
    /// syncs them (departs from Kafka, which does not rewrite): the process
    /// may have stopped after a failed `fdatasync`, after which Linux may
    /// keep those bytes readable in the page cache but marked clean, never
    /// to reach the disk, and no later `fdatasync` would write them.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the file cannot be read, written, truncated or
    /// the index files rewritten.
    pub(crate) fn recover(
        &mut self,
        epoch_cache: &mut LeaderEpochCache,
        rewrite_from: Option<i64>,
    ) -> Result<(u64, Option<i64>), StorageError> {
        self.offset_index.reset()?;
        self.time_index.reset()?;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = -1;
        self.first_batch_timestamp = None;
        self.bytes_since_last_index_entry = 0;
        let file_size = self.size;
        let mut scanner = self.scanner()?;
        let mut valid = 0u64;
        let mut next_offset: Option<i64> = None;
        let mut appended = Vec::new();
        while let Some(bytes) = scanner.bytes_at(valid, RECORD_BATCH_OVERHEAD)? {
            let Ok(header) = RecordBatchHeader::parse(bytes) else {
                break;
            };
            let size = header.size_in_bytes();
            let Some(batch) = scanner.bytes_at(valid, size)? else {
                break;
            };
            let in_order = header.base_offset >= next_offset.unwrap_or(self.base_offset)
                && header.last_offset_delta >= 0
                && header.last_offset() - self.base_offset <= u32::MAX as i64;
            if !in_order || !header.crc_is_valid(batch) {
                break;
            }
            if header.partition_leader_epoch >= 0
                && epoch_cache
                    .latest_epoch()
                    .is_none_or(|latest| header.partition_leader_epoch > latest)
            {
                epoch_cache.assign(header.partition_leader_epoch, header.base_offset)?;
            }
            appended.push(AppendedBatch {
                last_offset: header.last_offset(),
                max_timestamp: header.max_timestamp,
                size: size as u32,
            });
            next_offset = Some(header.next_offset());
            valid += size as u64;
        }
        drop(scanner);
        let mut position = 0u64;
        for b in &appended {
            self.index_batch(b, position);
            position += b.size as u64;
        }
        // As a normally closed segment, the time index ends with the largest
        // timestamp seen (Kafka's `LogSegment.recover`): a segment loaded
        // later without recovery takes its max timestamp from that entry.
        if self.offset_of_max_timestamp >= 0 {
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp, true);
        }
        let truncated = file_size - valid;
        if truncated > 0 {
            tracing::warn!(
                segment = %self.log_path.display(),
                valid_bytes = valid,
                truncated_bytes = truncated,
                "truncating invalid bytes at the end of the segment"
            );
            self.set_len(valid)?;
        }
        self.size = valid;
        self.torn_tail = false;
        if let Some(from) = rewrite_from {
            let mut position = 0u64;
            for b in &appended {
                if b.last_offset >= from {
                    self.rewrite_tail(position)?;
                    break;
                }
                position += b.size as u64;
            }
        }
        // The rebuilt indexes reach their files at the next flush that
        // syncs them (or the roll), not here: a file written now would have
        // to stay open until then (see `crate::index`).
        self.dirty = true;
        self.indexes_dirty = true;
        Ok((truncated, next_offset))
    }

    /// Writes the bytes of the `.log` file from `position` to its end again,
    /// unchanged, in chunks of [`REWRITE_CHUNK`] (see [`LogSegment::recover`]).
    fn rewrite_tail(&mut self, position: u64) -> Result<(), StorageError> {
        let file = self.file()?;
        let mut chunk = vec![0u8; REWRITE_CHUNK.min((self.size - position) as usize)];
        let mut at = position;
        while at < self.size {
            let n = chunk.len().min((self.size - at) as usize);
            pread(&file, &mut chunk[..n], at)
                .map_err(|e| StorageError::io("pread", &self.log_path, e))?;
            self.write_all_vectored(&mut [IoSlice::new(&chunk[..n])], at)?;
            at += n as u64;
        }
        tracing::info!(segment = %self.log_path.display(), from_position = position,
            rewritten_bytes = self.size - position,
            "rewrote the bytes above the recovery point so that the next flush syncs them");
        Ok(())
    }

    /// Removes every batch whose last offset is `>= offset` (Kafka's
    /// `LogSegment.truncateTo`): the first such batch is found through the
    /// offset index and a scan (`translateOffset`), the `.log` file is cut at
    /// its position, so a batch holding `offset` goes whole, and index
    /// entries at or above `offset` are dropped (cut from the index files at
    /// the next [`IndexFile::persist`](crate::index::IndexFile::persist)).
    /// The segment's max timestamp is recomputed from the last remaining time
    /// index entry and the batches after it (`loadLargestTimestamp`); an
    /// emptied segment restarts its `segment.ms` clock. Returns the offset
    /// after the last remaining batch (the base offset when none remains),
    /// also when no batch reached `offset` and nothing changed.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the file cannot be read or cut;
    /// [`StorageError::CorruptRecord`] if a stored header does not parse.
    pub(crate) fn truncate_to(&mut self, offset: i64) -> Result<i64, StorageError> {
        self.cut_back_torn_tail()?;
        let removed = match self.find_batch(offset)? {
            Some((position, _)) => {
                self.set_len(position)?;
                self.size = position;
                self.writeback_started = self.writeback_started.min(position);
                self.dirty = true;
                self.indexes_dirty = true;
                self.offset_index.truncate_to(offset);
                self.time_index.truncate_to(offset);
                self.bytes_since_last_index_entry = 0;
                self.recent_batch_ends
                    .retain(|&(_, end)| u64::from(end) <= position);
                true
            }
            None => false,
        };
        let (mut max_timestamp, mut offset_of_max) =
            self.time_index.last_entry().unwrap_or((-1, -1));
        let (_, from) = self
            .offset_index
            .lookup(offset_of_max.max(self.base_offset));
        let mut scanner = self.scanner()?;
        let mut at = u64::from(from);
        let mut next_offset = self.base_offset;
        while let Some(header) = scanner.header_at(at)? {
            if header.max_timestamp > max_timestamp {
                max_timestamp = header.max_timestamp;
                offset_of_max = header.last_offset();
            }
            next_offset = header.next_offset();
            at += header.size_in_bytes() as u64;
        }
        drop(scanner);
        if !removed {
            return Ok(next_offset);
        }
        self.max_timestamp = max_timestamp;
        self.offset_of_max_timestamp = offset_of_max;
        if self.size == 0 {
            self.created_ms = wall_clock_ms();
            self.first_batch_timestamp = Some(-1);
        }
        // A flush must not count the removed batches as written.
        self.written_end.store(next_offset, Ordering::Release);
        Ok(next_offset)
    }

    /// Finishes a segment that stops being the active one (Kafka's
    /// `onBecomeInactiveSegment`): records the final max timestamp in the
    /// time index and writes pending index entries, which the next flush
    /// then syncs; forgets the recent batch ends.
    pub(crate) fn on_become_inactive(&mut self) -> Result<(), StorageError> {
        self.cut_back_torn_tail()?;
        self.recent_batch_ends = VecDeque::new();
        if self.offset_of_max_timestamp >= 0 {
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp, true);
        }
        let offsets_written = self.offset_index.persist()?;
        let times_written = self.time_index.persist()?;
        if offsets_written || times_written {
            self.indexes_dirty = true;
        }
        Ok(())
    }

    /// The shared end of the batches written to the `.log` file so far: an
    /// fdatasync of the file that starts after a load of this value makes
    /// every offset below it durable. Group commit reads it as late as
    /// possible, so that one fdatasync also covers the appends that landed
    /// between preparing the flush and starting the sync.
    pub(crate) fn written_end(&self) -> Arc<AtomicI64> {
        self.written_end.clone()
    }

    /// Marks the segment (and its indexes) as changed since the last
    /// flush, so that the next [`LogSegment::take_dirty_files`] returns its
    /// files again (after a failed flush).
    pub(crate) fn mark_dirty(&mut self) {
        self.dirty = true;
        self.indexes_dirty = true;
    }

    /// fdatasyncs the `.log` file now (a roll, see `Log::roll_at`), as
    /// [`LogSegment::take_dirty_files`] with the sync done: the next flush
    /// then owes only the indexes.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the sync fails (the segment stays dirty).
    pub(crate) fn sync_log_file(&mut self) -> Result<(), StorageError> {
        if !self.dirty {
            return Ok(());
        }
        FlushFile {
            file: self.file()?,
            path: self.log_path.clone(),
            mark: Some(self.log.sync_mark()),
        }
        .sync(&*self.fs)?;
        self.dirty = false;
        self.indexes_dirty = true;
        Ok(())
    }

    /// If changed since the last call: the files to fdatasync. With
    /// `with_indexes` false only the `.log` file is returned (and the index
    /// files stay owed to a later call): enough for the active segment,
    /// whose indexes recovery rebuilds because it holds the recovery point.
    /// With `with_indexes` pending index entries are written first and the
    /// index files are returned too.
    pub(crate) fn take_dirty_files(
        &mut self,
        with_indexes: bool,
    ) -> Result<Vec<FlushFile>, StorageError> {
        let mut files = Vec::new();
        if self.dirty {
            files.push(FlushFile {
                file: self.file()?,
                path: self.log_path.clone(),
                mark: Some(self.log.sync_mark()),
            });
            self.indexes_dirty = true;
        }
        if with_indexes && self.indexes_dirty {
            for (file, path) in [
                self.offset_index.take_for_sync()?,
                self.time_index.take_for_sync()?,
            ] {
                files.push(FlushFile {
                    file,
                    path,
                    mark: None,
                });
            }
            self.indexes_dirty = false;
        }
        self.dirty = false;
        Ok(files)
    }

    /// Renames the segment's three files to `<name>.deleted` (Kafka's
    /// `LogSegment.changeFileSuffixes("", ".deleted")`) and returns the new
    /// paths; a missing index file is skipped. Reads already handed out keep
    /// working: they hold the open file.
    ///
    /// # Errors
    /// [`StorageError::Io`] if a rename fails.
    pub(crate) fn rename_to_deleted(&self) -> Result<Vec<PathBuf>, StorageError> {
        let mut renamed = Vec::with_capacity(3);
        for p in [
            self.log_path.as_path(),
            self.offset_index.path(),
            self.time_index.path(),
        ] {
            let mut name = p.as_os_str().to_owned();
            name.push(DELETED_FILE_SUFFIX);
            let target = PathBuf::from(name);
            match self.fs.rename(p, &target) {
                Ok(()) => renamed.push(target),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StorageError::io("rename", p, e)),
            }
        }
        Ok(renamed)
    }

    /// Renames the segment's three files from ending in `old_suffix` to
    /// ending in `new_suffix` (Kafka's `LogSegment.changeFileSuffixes`); the
    /// index files first, the `.log` file last, so a `.log` file with the new
    /// suffix means every file was renamed. Open handles stay valid.
    ///
    /// # Errors
    /// [`StorageError::Io`] if a rename fails.
    pub(crate) fn change_file_suffixes(
        &mut self,
        old_suffix: &str,
        new_suffix: &str,
    ) -> Result<(), StorageError> {
        let renamed = |p: &Path| -> PathBuf {
            let name = p.to_string_lossy();
            let stem = name.strip_suffix(old_suffix).unwrap_or(&name);
            PathBuf::from(format!("{stem}{new_suffix}"))
        };
        let index = renamed(self.offset_index.path());
        self.fs
            .rename(self.offset_index.path(), &index)
            .map_err(|e| StorageError::io("rename", self.offset_index.path(), e))?;
        self.offset_index.set_path(index);
        let time_index = renamed(self.time_index.path());
        self.fs
            .rename(self.time_index.path(), &time_index)
            .map_err(|e| StorageError::io("rename", self.time_index.path(), e))?;
        self.time_index.set_path(time_index);
        let log = renamed(&self.log_path);
        self.fs
            .rename(&self.log_path, &log)
            .map_err(|e| StorageError::io("rename", &self.log_path, e))?;
        self.log_path = log;
        Ok(())
    }

    /// Appends one whole, already-stamped batch (the
    /// [`LogCleaner`](crate::log::cleaner) writing a cleaned segment).
    pub(crate) fn append_batch(
        &mut self,
        header: &RecordBatchHeader,
        bytes: &[u8],
    ) -> Result<(), StorageError> {
        let appended = AppendedBatch {
            last_offset: header.last_offset(),
            max_timestamp: header.max_timestamp,
            size: bytes.len() as u32,
        };
        self.write_batches(&mut [IoSlice::new(bytes)], bytes.len(), &[appended])
    }

    /// fdatasyncs the `.log` file and both index files (pending index
    /// entries written first).
    ///
    /// # Errors
    /// [`StorageError::Io`] if a write or sync fails.
    pub(crate) fn sync(&mut self) -> Result<(), StorageError> {
        self.mark_dirty();
        for f in self.take_dirty_files(true)? {
            f.sync(&*self.fs)?;
        }
        Ok(())
    }

    /// What the cleaner needs to read this segment without the log's lock:
    /// its open file (segments stop changing once inactive) and size.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the largest timestamp needs a stat that fails.
    pub(crate) fn snapshot(&self) -> Result<SegmentSnapshot, StorageError> {
        Ok(SegmentSnapshot {
            base_offset: self.base_offset,
            segment_id: self.id,
            file: self.file()?,
            path: self.log_path.clone(),
            size: self.size,
            largest_timestamp: self.largest_timestamp()?,
        })
    }

    /// Removes the segment's three files.
    pub(crate) fn delete_files(&self) -> Result<(), StorageError> {
        for p in [
            self.log_path.as_path(),
            self.offset_index.path(),
            self.time_index.path(),
        ] {
            remove_if_exists(&*self.fs, p)?;
        }
        Ok(())
    }
}

/// An inactive segment as the [`LogCleaner`](crate::log::cleaner) reads it
/// without holding the log's lock. See [`LogSegment::snapshot`].
#[derive(Clone, Debug)]
pub(crate) struct SegmentSnapshot {
    pub base_offset: i64,
    /// [`LogSegment::id`] of the segment read.
    pub segment_id: u64,
    pub file: Arc<File>,
    pub path: PathBuf,
    /// Bytes of valid batches when the snapshot was taken.
    pub size: u64,
    /// [`LogSegment::largest_timestamp`], ms.
    pub largest_timestamp: i64,
}

impl SegmentSnapshot {
    /// Calls `f` with every whole batch (header and bytes) in order until it
    /// returns `Ok(false)`.
    ///
    /// # Errors
    /// [`StorageError::Io`] on read errors, [`StorageError::CorruptRecord`]
    /// for an unparsable header, and whatever `f` returns.
    pub(crate) fn for_each_batch(
        &self,
        mut f: impl FnMut(&RecordBatchHeader, &[u8]) -> Result<bool, StorageError>,
    ) -> Result<(), StorageError> {
        let mut scanner = Scanner {
            file: self.file.clone(),
            path: &self.path,
            end: self.size,
            buf: Vec::new(),
            buf_start: 0,
        };
        let mut position = 0u64;
        while let Some(header) = scanner.header_at(position)? {
            let size = header.size_in_bytes();
            let Some(bytes) = scanner.bytes_at(position, size)? else {
                return Err(StorageError::corrupt(format!(
                    "{}: batch at position {position} runs past the end of the segment",
                    self.path.display()
                )));
            };
            if !f(&header, bytes)? {
                break;
            }
            position += size as u64;
        }
        Ok(())
    }
}

/// Reads batch headers (and whole batches) of a segment file through a
/// reusable buffer filled with `pread`, so a scan over small batches costs one
/// syscall per 16 KiB rather than one per batch. For scans that need the
/// record bytes or walk a whole segment (recovery, the cleaner, loading);
/// reads for clients use [`HeaderReader`], which reads headers only.
struct Scanner<'a> {
    file: Arc<File>,
    path: &'a Path,
    /// End of the valid bytes of the file.
    end: u64,
    buf: Vec<u8>,
    /// File position of `buf[0]`.
    buf_start: u64,
}

impl Scanner<'_> {
    /// The `len` bytes at `position`, or `None` if they run past `end`.
    fn bytes_at(&mut self, position: u64, len: usize) -> Result<Option<&[u8]>, StorageError> {
        let Some(stop) = position.checked_add(len as u64) else {
            return Ok(None);
        };
        if stop > self.end {
            return Ok(None);
        }
        let buffered = position >= self.buf_start && stop <= self.buf_start + self.buf.len() as u64;
        if !buffered {
            let want = (self.end - position).min(len.max(SCAN_CHUNK) as u64) as usize;
            self.buf.resize(want, 0);
            pread(&self.file, &mut self.buf, position)
                .map_err(|e| StorageError::io("pread", self.path, e))?;
            self.buf_start = position;
        }
        let from = (position - self.buf_start) as usize;
        Ok(Some(&self.buf[from..from + len]))
    }

    /// The batch header at `position`; `None` at the end of the segment.
    fn header_at(&mut self, position: u64) -> Result<Option<RecordBatchHeader>, StorageError> {
        match self.bytes_at(position, RECORD_BATCH_OVERHEAD)? {
            None => Ok(None),
            Some(bytes) => parse_stored_header(bytes, position).map(Some),
        }
    }
}

/// Parses the header of a stored batch at `position`: one that does not
/// parse is damage on disk ([`StorageError::CorruptRecord`]), not a bad
/// produce request.
fn parse_stored_header(bytes: &[u8], position: u64) -> Result<RecordBatchHeader, StorageError> {
    RecordBatchHeader::parse(bytes).map_err(|e| match e {
        StorageError::InvalidRecord { reason } => StorageError::CorruptRecord {
            reason: format!("stored batch at position {position}: {reason}"),
        },
        other => other,
    })
}

/// A batch boundary of a segment known without reading its `.log` file
/// (see [`LogSegment::boundary_before`]).
#[derive(Clone, Copy, Debug)]
struct Boundary {
    /// Byte position: the start of a batch, or the end of the segment.
    position: u64,
    /// No more than the base offset of the batch at `position`.
    base_at_least: i64,
    /// No more than the last offset of the batch at `position`.
    last_at_least: i64,
}

/// Where a read begins (see [`LogSegment::find_start`]).
#[derive(Clone, Copy, Debug)]
struct Start {
    /// Position of the batch holding the offset asked for.
    position: u64,
    /// Its header, when it had to be read to find the batch.
    header: Option<RecordBatchHeader>,
    /// No more than its base offset.
    base_at_least: i64,
}

/// Reads single batch headers of a segment's valid bytes with one `pread`
/// of [`RECORD_BATCH_OVERHEAD`] bytes each (Kafka's `FileLogInputStream`
/// reads headers the same way): how the read path finds batch boundaries
/// without reading record bytes into memory. The file is taken from the
/// [`FileCache`] at the first read, so a read that needs no header opens
/// nothing.
struct HeaderReader<'a> {
    segment: &'a LogSegment,
    file: std::cell::OnceCell<Arc<File>>,
}

impl HeaderReader<'_> {
    /// The batch header at `position`; `None` when fewer than 61 bytes
    /// remain before the end of the segment's valid bytes.
    ///
    /// # Errors
    /// [`StorageError::Io`] if the file cannot be opened or read;
    /// [`StorageError::CorruptRecord`] if the header does not parse.
    fn header_at(&self, position: u64) -> Result<Option<RecordBatchHeader>, StorageError> {
        let segment = self.segment;
        let fits = position
            .checked_add(RECORD_BATCH_OVERHEAD as u64)
            .is_some_and(|stop| stop <= segment.size);
        if !fits {
            return Ok(None);
        }
        let file = match self.file.get() {
            Some(file) => file,
            None => {
                let file = segment.file()?;
                self.file.get_or_init(|| file)
            }
        };
        let mut buf = [0u8; RECORD_BATCH_OVERHEAD];
        pread(file, &mut buf, position)
            .map_err(|e| StorageError::io("pread", &segment.log_path, e))?;
        parse_stored_header(&buf, position).map(Some)
    }

    /// The header of the batch known to start at `position`.
    ///
    /// # Errors
    /// As [`HeaderReader::header_at`], and [`StorageError::CorruptRecord`]
    /// when no header fits there.
    fn require(&self, position: u64) -> Result<RecordBatchHeader, StorageError> {
        self.header_at(position)?.ok_or_else(|| {
            StorageError::corrupt(format!(
                "{}: no batch header at position {position} (size {})",
                self.segment.log_path.display(),
                self.segment.size
            ))
        })
    }
}

/// `pread` of exactly `buf.len()` bytes of a segment `.log` file at `at`;
/// every read of a segment file goes through it (tests count the bytes).
fn pread(file: &File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    #[cfg(test)]
    BYTES_PREAD.with(|n| n.set(n.get() + buf.len() as u64));
    file.read_exact_at(buf, at)
}

#[cfg(test)]
thread_local! {
    /// Bytes of segment `.log` files read on this thread (see [`pread`]).
    static BYTES_PREAD: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Bytes of segment `.log` files this thread has read with `pread` so far
/// (tests: the read path must read headers only).
#[cfg(test)]
pub(crate) fn bytes_pread() -> u64 {
    BYTES_PREAD.with(std::cell::Cell::get)
}
