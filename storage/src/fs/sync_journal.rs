//! [`SyncJournalFileSystem`]: a power-loss model for a real broker process.
//! It forwards every call to the inner [`FileSystem`] and appends one text
//! line per durability-relevant event to a journal file, so that a test
//! harness can SIGKILL the process and then cut every file back to what a
//! power failure would have left (the harness side is
//! `weir_integration_tests::power_loss`). SIGKILL alone keeps the page
//! cache, so without this a killed broker loses nothing it wrote and a test
//! cannot tell whether it fsynced. Test-only: the broker turns it on when
//! `WEIR_TEST_SYNC_JOURNAL` is set.
//!
//! # The journal format (version 1)
//!
//! One line per event, each ending with `\n`, appended with one `write(2)`
//! on a descriptor opened `O_APPEND` and never fsynced (the journal only has
//! to survive SIGKILL, which keeps the page cache; a write(2) is never cut
//! short by a signal that kills the process). Fields are separated by one
//! space; a path is written as `<n>:<bytes>`, where `<n>` is the decimal
//! number of bytes of the absolute path as the OS sees it (any byte may
//! follow, newlines included); lengths are decimal byte counts.
//!
//! ```text
//! create <path>           opened with truncation: durable length 0
//! open <path> <len>       opened without truncation, `len` bytes long: its
//!                         durable length if the journal knows nothing of it
//!                         yet (the file was on disk when the journal began)
//! sync <path> <len>       fdatasync succeeded: `len` bytes are durable (the
//!                         length before the call: writes that raced the sync
//!                         are not counted)
//! set_len <path> <len>    ftruncate: durable length min(durable, len)
//! rename <from> <to>      the state of `from` (and of every path under it)
//!                         replaces that of `to`
//! remove <path>           the file's state is dropped
//! remove_dir <path>       the state of every path under it is dropped
//! ```
//!
//! A line is written after its operation succeeded. Replaying the journal
//! gives each known file a durable length; a file longer than that lost its
//! tail in a power failure. What was on disk when the journal was empty is
//! the baseline: the harness truncates the journal after applying a power
//! loss.
//!
//! # Limits
//!
//! Only lengths are modelled: bytes overwritten in place below a file's
//! durable length count as durable (storage only appends to data it has
//! synced, and rewrites indexes and checkpoints whole through new files).
//! Directories and their entries are durable at once (creations, renames
//! and removals survive without a directory `fsync`; a file created and
//! never synced comes back empty, not missing), as in
//! [`faulty`](super::faulty)'s model. A SIGKILL between an operation and its
//! journal line loses the line: an unjournalled sync understates what is
//! durable (the harness then cuts more than a power failure would), an
//! unjournalled rename leaves its state on the old path. Files written
//! outside this seam are not modelled: the `.lock` file, `weir format`'s
//! `meta.properties` (written before the broker runs, so part of the
//! baseline) and the controller's Raft log (`__cluster_metadata-0`, which
//! writes through its own files, not the seam).
//!
//! # Injected failures
//!
//! While a file named `<journal>.fail-fsync` exists, every `fdatasync`
//! through this seam fails with `EIO` without syncing (a disk that failed).
//! While a file named `<journal>.fail-write` exists, every write
//! (`pwrite`/`pwritev`) through this seam fails with `EIO` without writing.
//! Either way the [`LogDirFileSystem`](super::LogDirFileSystem) above
//! reports it and the broker halts.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::FileSystem;

/// The suffix of the trigger file that makes every `fdatasync` fail (see the
/// module docs): `<journal>.fail-fsync`.
pub const FAIL_FSYNC_SUFFIX: &str = ".fail-fsync";

/// The suffix of the trigger file that makes every write fail (see the
/// module docs): `<journal>.fail-write`.
pub const FAIL_WRITE_SUFFIX: &str = ".fail-write";

/// The inner [`FileSystem`] with every durability-relevant event journalled
/// (see the module docs for the format and the model's limits).
#[derive(Debug)]
pub struct SyncJournalFileSystem {
    inner: Arc<dyn FileSystem>,
    /// The journal, opened `O_APPEND`.
    journal: File,
    journal_path: PathBuf,
    /// `<journal>.fail-fsync`.
    fail_fsync: PathBuf,
    /// `<journal>.fail-write`.
    fail_write: PathBuf,
}

impl SyncJournalFileSystem {
    /// `inner` journalled to `journal`, which is created if missing and
    /// appended to otherwise (a restarted broker continues the journal of
    /// the killed one).
    ///
    /// # Errors
    /// The error of opening the journal.
    pub fn open(inner: Arc<dyn FileSystem>, journal: &Path) -> io::Result<Self> {
        let journal_path = std::path::absolute(journal)?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&journal_path)?;
        let trigger = |suffix: &str| {
            let mut name = OsString::from(journal_path.as_os_str());
            name.push(suffix);
            PathBuf::from(name)
        };
        Ok(SyncJournalFileSystem {
            inner,
            journal: file,
            fail_fsync: trigger(FAIL_FSYNC_SUFFIX),
            fail_write: trigger(FAIL_WRITE_SUFFIX),
            journal_path,
        })
    }

    /// The journal's absolute path.
    pub fn journal_path(&self) -> &Path {
        &self.journal_path
    }

    /// Appends one event: `op`, then each path, then `len` if given.
    fn record(&self, op: &str, paths: &[&Path], len: Option<u64>) -> io::Result<()> {
        let mut line = Vec::with_capacity(64);
        line.extend_from_slice(op.as_bytes());
        for path in paths {
            let path = std::path::absolute(path)?;
            let bytes = path.as_os_str().as_bytes();
            line.push(b' ');
            line.extend_from_slice(bytes.len().to_string().as_bytes());
            line.push(b':');
            line.extend_from_slice(bytes);
        }
        if let Some(len) = len {
            line.push(b' ');
            line.extend_from_slice(len.to_string().as_bytes());
        }
        line.push(b'\n');
        // One write(2): O_APPEND places it whole at the end even with
        // concurrent writers.
        let written = (&self.journal).write(&line)?;
        if written != line.len() {
            return Err(io::Error::other(format!(
                "short write to the sync journal {}: {written} of {} bytes",
                self.journal_path.display(),
                line.len()
            )));
        }
        Ok(())
    }
}

impl FileSystem for SyncJournalFileSystem {
    fn open_file(&self, path: &Path, truncate: bool) -> io::Result<File> {
        let file = self.inner.open_file(path, truncate)?;
        if truncate {
            self.record("create", &[path], None)?;
        } else {
            self.record("open", &[path], Some(file.metadata()?.len()))?;
        }
        Ok(file)
    }

    fn open_existing(&self, path: &Path) -> io::Result<File> {
        let file = self.inner.open_existing(path)?;
        self.record("open", &[path], Some(file.metadata()?.len()))?;
        Ok(file)
    }

    fn write_vectored_at(
        &self,
        file: &File,
        path: &Path,
        bufs: &[IoSlice<'_>],
        offset: u64,
    ) -> io::Result<usize> {
        if self.fail_write.exists() {
            return Err(rustix::io::Errno::IO.into());
        }
        self.inner.write_vectored_at(file, path, bufs, offset)
    }

    fn write_all_at(&self, file: &File, path: &Path, buf: &[u8], offset: u64) -> io::Result<()> {
        if self.fail_write.exists() {
            return Err(rustix::io::Errno::IO.into());
        }
        self.inner.write_all_at(file, path, buf, offset)
    }

    fn set_len(&self, file: &File, path: &Path, len: u64) -> io::Result<()> {
        self.inner.set_len(file, path, len)?;
        self.record("set_len", &[path], Some(len))
    }

    fn sync_data(&self, file: &File, path: &Path) -> io::Result<()> {
        if self.fail_fsync.exists() {
            return Err(rustix::io::Errno::IO.into());
        }
        // Taken before the sync: everything written before the call is
        // durable after it; a write that raced it may not be.
        let len = file.metadata()?.len();
        self.inner.sync_data(file, path)?;
        self.record("sync", &[path], Some(len))
    }

    fn start_writeback(&self, file: &File, path: &Path, offset: u64, len: u64) -> io::Result<()> {
        // Makes nothing durable: nothing to journal.
        self.inner.start_writeback(file, path, offset, len)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)?;
        self.record("rename", &[from, to], None)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)?;
        self.record("remove", &[path], None)
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.remove_dir_all(dir)?;
        self.record("remove_dir", &[dir], None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{LogDirFailureChannel, LogDirFileSystem, RealFileSystem};

    fn journal_of(dir: &Path) -> (SyncJournalFileSystem, PathBuf) {
        let journal = dir.join("sync-journal");
        let fs = SyncJournalFileSystem::open(RealFileSystem::shared(), &journal).unwrap();
        (fs, journal)
    }

    fn entry(path: &Path) -> String {
        format!("{}:{}", path.as_os_str().len(), path.display())
    }

    #[test]
    fn every_durability_event_is_one_journal_line() {
        let dir = tempfile::tempdir().unwrap();
        let (fs, journal) = journal_of(dir.path());
        let a = dir.path().join("a.log");
        let b = dir.path().join("b.log");
        let file = fs.open_file(&a, true).unwrap();
        fs.write_all_at(&file, &a, b"hello world", 0).unwrap();
        fs.sync_data(&file, &a).unwrap();
        fs.write_all_at(&file, &a, b"!!", 11).unwrap();
        fs.set_len(&file, &a, 5).unwrap();
        fs.rename(&a, &b).unwrap();
        drop(file);
        let reopened = fs.open_existing(&b).unwrap();
        drop(reopened);
        fs.remove_file(&b).unwrap();
        let sub = dir.path().join("t-0");
        fs.create_dir_all(&sub).unwrap();
        fs.remove_dir_all(&sub).unwrap();
        let text = std::fs::read_to_string(&journal).unwrap();
        let expected = [
            format!("create {}", entry(&a)),
            format!("sync {} 11", entry(&a)),
            format!("set_len {} 5", entry(&a)),
            format!("rename {} {}", entry(&a), entry(&b)),
            format!("open {} 5", entry(&b)),
            format!("remove {}", entry(&b)),
            format!("remove_dir {}", entry(&sub)),
        ];
        assert_eq!(text.lines().collect::<Vec<_>>(), expected);
    }

    #[test]
    fn a_path_with_a_newline_is_length_prefixed() {
        let dir = tempfile::tempdir().unwrap();
        let (fs, journal) = journal_of(dir.path());
        let odd = dir.path().join("x\ny 7");
        drop(fs.open_file(&odd, false).unwrap());
        let text = std::fs::read(&journal).unwrap();
        // The count covers the newline and the space: a reader takes the
        // path by its length, not up to the next separator.
        assert_eq!(text, format!("open {} 0\n", entry(&odd)).into_bytes());
        assert_eq!(text.iter().filter(|b| **b == b'\n').count(), 2);
    }

    #[test]
    fn a_failed_operation_writes_no_line() {
        let dir = tempfile::tempdir().unwrap();
        let (fs, journal) = journal_of(dir.path());
        assert!(fs.remove_file(&dir.path().join("nope")).is_err());
        assert!(fs
            .rename(&dir.path().join("nope"), &dir.path().join("nope2"))
            .is_err());
        assert!(fs.open_existing(&dir.path().join("nope")).is_err());
        assert_eq!(std::fs::read(&journal).unwrap(), b"");
    }

    #[test]
    fn the_trigger_file_fails_fdatasync_and_takes_the_directory_offline() {
        let dir = tempfile::tempdir().unwrap();
        let (journalled, journal) = journal_of(dir.path());
        let channel = LogDirFailureChannel::new();
        let fs = LogDirFileSystem::wrap(Arc::new(journalled), channel.clone());
        let path = dir.path().join("00000000000000000000.log");
        let file = fs.open_file(&path, true).unwrap();
        fs.write_all_at(&file, &path, b"abc", 0).unwrap();
        fs.sync_data(&file, &path).unwrap();
        let mut trigger = journal.clone().into_os_string();
        trigger.push(FAIL_FSYNC_SUFFIX);
        std::fs::write(&trigger, b"").unwrap();
        let error = fs.sync_data(&file, &path).unwrap_err();
        assert_eq!(
            error.raw_os_error(),
            Some(rustix::io::Errno::IO.raw_os_error())
        );
        let reason = channel.failure().expect("the directory failed");
        assert!(reason.contains("fdatasync"), "{reason}");
        // The failed sync is not journalled as durable.
        let text = std::fs::read_to_string(&journal).unwrap();
        assert_eq!(text.lines().filter(|l| l.starts_with("sync ")).count(), 1);
    }

    #[test]
    fn the_write_trigger_fails_writes_and_takes_the_directory_offline() {
        let dir = tempfile::tempdir().unwrap();
        let (journalled, journal) = journal_of(dir.path());
        let channel = LogDirFailureChannel::new();
        let fs = LogDirFileSystem::wrap(Arc::new(journalled), channel.clone());
        let path = dir.path().join("00000000000000000000.log");
        let file = fs.open_file(&path, true).unwrap();
        fs.write_all_at(&file, &path, b"abc", 0).unwrap();
        let mut trigger = journal.clone().into_os_string();
        trigger.push(FAIL_WRITE_SUFFIX);
        std::fs::write(&trigger, b"").unwrap();
        let bufs = [IoSlice::new(b"def")];
        let error = fs.write_vectored_at(&file, &path, &bufs, 3).unwrap_err();
        assert_eq!(
            error.raw_os_error(),
            Some(rustix::io::Errno::IO.raw_os_error())
        );
        assert!(channel
            .failure()
            .expect("the directory failed")
            .contains("write"));
        std::fs::remove_file(&trigger).unwrap();
        // Nothing reached the file, and the directory stays offline.
        assert_eq!(std::fs::read(&path).unwrap(), b"abc");
        assert!(fs.write_all_at(&file, &path, b"def", 3).is_err());
    }
}
