//! A log directory goes offline at its first failed write or sync, and
//! nothing in it is written or synced again: Kafka's `LogDirFailureChannel`
//! (`LocalLog.maybeHandleIOException` reports every `IOException` of an
//! append, a flush or a checkpoint, `LogManager.handleLogDirFailure` takes
//! the directory offline, and `ReplicaManager.handleLogDirFailure` halts a
//! broker left without a live log directory).
//!
//! Why a failed write is not answered and written again: the bytes of a
//! failed `pwrite` (ENOSPC, EIO) may have partly reached the page cache, and
//! a disk that failed one write is not trusted with the next; the append is
//! answered KAFKA_STORAGE_ERROR (never acknowledged) and the broker halts,
//! and the next start recovers the log above its recovery point.
//!
//! Why a sync is never retried: after a failed `fdatasync` Linux may have
//! dropped the dirty pages (marked clean, kept readable) and reports
//! success to the next `fdatasync` of the file ("fsyncgate", 2018), so a
//! retried flush would acknowledge records a power loss then takes.
//! [`LogDirFileSystem`] wraps the [`FileSystem`] a `LogManager` gives every
//! log, checkpoint and snapshot of its directory: the first failed write,
//! `ftruncate`, `fdatasync` or directory `fsync` (other than `NotFound`, a
//! directory deleted under it) reports the failure on the
//! [`LogDirFailureChannel`], and from then on every sync and write fails at
//! once (appends answer KAFKA_STORAGE_ERROR; no flush advances a recovery
//! point or acknowledges anything). The broker halts on the channel.

use std::fs::File;
use std::io::{self, IoSlice};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use super::FileSystem;

/// The failure of one log directory, reported once: the first reason wins.
/// Shared by the directory's [`LogDirFileSystem`] and whoever must stop
/// when it fails (the broker's halt).
#[derive(Debug)]
pub struct LogDirFailureChannel {
    failure: watch::Sender<Option<String>>,
    /// Set with `failure`: the check every write makes without taking the
    /// watch's lock.
    failed: AtomicBool,
}

impl LogDirFailureChannel {
    /// A channel whose directory has not failed.
    pub fn new() -> Arc<Self> {
        Arc::new(LogDirFailureChannel {
            failure: watch::Sender::new(None),
            failed: AtomicBool::new(false),
        })
    }

    /// Reports the directory failed because of `reason` (a failed sync with
    /// its path and error); later reports are ignored.
    pub fn fail(&self, reason: String) {
        self.failure.send_if_modified(|failure| {
            if failure.is_some() {
                return false;
            }
            tracing::error!(%reason, "log directory failed: nothing in it is written or synced again");
            *failure = Some(reason);
            self.failed.store(true, Ordering::Release);
            true
        });
    }

    /// Whether the directory has failed.
    pub fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The reason the directory failed, if it has.
    pub fn failure(&self) -> Option<String> {
        self.failure.borrow().clone()
    }

    /// Returns the reason once the directory has failed (at once if it
    /// already has). Cancel-safe.
    pub async fn failed(&self) -> String {
        let mut receiver = self.failure.subscribe();
        let reason = receiver
            .wait_for(Option::is_some)
            .await
            .map(|failure| failure.clone().unwrap_or_default());
        // The sender lives in `self`, so the wait cannot see it closed.
        reason.unwrap_or_default()
    }
}

/// The [`FileSystem`] of one log directory: forwards to `inner` until a
/// write or sync fails, then fails every sync and write (see the module
/// docs).
#[derive(Debug)]
pub struct LogDirFileSystem {
    inner: Arc<dyn FileSystem>,
    channel: Arc<LogDirFailureChannel>,
}

impl LogDirFileSystem {
    /// `inner` guarded by `channel`.
    pub fn wrap(
        inner: Arc<dyn FileSystem>,
        channel: Arc<LogDirFailureChannel>,
    ) -> Arc<dyn FileSystem> {
        Arc::new(LogDirFileSystem { inner, channel })
    }

    fn check(&self, path: &Path) -> io::Result<()> {
        if !self.channel.is_failed() {
            return Ok(());
        }
        match self.channel.failure() {
            None => Ok(()),
            Some(reason) => Err(io::Error::other(format!(
                "{} not written: its log directory is offline ({reason})",
                path.display()
            ))),
        }
    }

    /// Reports a failed write or sync; `NotFound` is not a disk failure (a
    /// topic's directory deleted while its flush ran: nothing is left to
    /// make durable, and the flush answers as for a deleted log).
    fn report<T>(&self, op: &str, path: &Path, result: io::Result<T>) -> io::Result<T> {
        if let Err(e) = &result {
            if e.kind() != io::ErrorKind::NotFound {
                self.channel.fail(format!("{op} {}: {e}", path.display()));
            }
        }
        result
    }
}

impl FileSystem for LogDirFileSystem {
    fn open_file(&self, path: &Path, truncate: bool) -> io::Result<File> {
        self.inner.open_file(path, truncate)
    }

    fn open_existing(&self, path: &Path) -> io::Result<File> {
        self.inner.open_existing(path)
    }

    fn write_vectored_at(
        &self,
        file: &File,
        path: &Path,
        bufs: &[IoSlice<'_>],
        offset: u64,
    ) -> io::Result<usize> {
        self.check(path)?;
        let result = self.inner.write_vectored_at(file, path, bufs, offset);
        self.report("write", path, result)
    }

    fn write_all_at(&self, file: &File, path: &Path, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check(path)?;
        let result = self.inner.write_all_at(file, path, buf, offset);
        self.report("write", path, result)
    }

    fn set_len(&self, file: &File, path: &Path, len: u64) -> io::Result<()> {
        self.check(path)?;
        let result = self.inner.set_len(file, path, len);
        self.report("ftruncate", path, result)
    }

    fn sync_data(&self, file: &File, path: &Path) -> io::Result<()> {
        self.check(path)?;
        let result = self.inner.sync_data(file, path);
        self.report("fdatasync", path, result)
    }

    fn start_writeback(&self, file: &File, path: &Path, offset: u64, len: u64) -> io::Result<()> {
        // A hint: its failure is the next fdatasync's to report.
        self.check(path)?;
        self.inner.start_writeback(file, path, offset, len)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.check(dir)?;
        let result = self.inner.sync_dir(dir);
        self.report("fsync", dir, result)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.check(from)?;
        self.inner.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.remove_dir_all(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::faulty::{Fault, FaultKind, FaultyFileSystem};

    /// Polls `future` once.
    fn now_or_never<F: std::future::Future>(future: F) -> Option<F::Output> {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match std::pin::pin!(future).poll(&mut cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        }
    }

    #[test]
    fn the_first_failed_sync_takes_the_directory_offline_for_good() {
        let dir = tempfile::tempdir().unwrap();
        let faulty = Arc::new(FaultyFileSystem::new(dir.path()).unwrap());
        let channel = LogDirFailureChannel::new();
        let fs = LogDirFileSystem::wrap(faulty.clone(), channel.clone());
        let path = dir.path().join("00000000000000000000.log");
        let file = fs.open_file(&path, true).unwrap();
        fs.write_all_at(&file, &path, b"abc", 0).unwrap();
        fs.sync_data(&file, &path).unwrap();
        assert!(now_or_never(channel.failed()).is_none(), "not failed yet");
        faulty.fail_syncs(Fault::new(FaultKind::Io).times(1));
        assert!(fs.sync_data(&file, &path).is_err());
        let reason = channel.failure().expect("reported");
        assert!(reason.contains("fdatasync"), "{reason}");
        // The fault fired once; the sync is still never retried.
        assert!(fs.sync_data(&file, &path).is_err(), "a retried sync");
        assert!(fs.write_all_at(&file, &path, b"d", 3).is_err(), "a write");
        assert!(fs.sync_dir(dir.path()).is_err());
        assert_eq!(now_or_never(channel.failed()), Some(reason));
    }

    /// Kafka's rule (`LogDirFailureChannel`, `LocalLog.maybeHandleIOException`):
    /// an `IOException` on append takes the directory offline, so the
    /// broker halts instead of answering and writing on. Before: a failed
    /// write was answered and the next append wrote again.
    #[test]
    fn a_failed_write_takes_the_directory_offline_for_good() {
        for kind in [FaultKind::NoSpace, FaultKind::Io] {
            let dir = tempfile::tempdir().unwrap();
            let faulty = Arc::new(FaultyFileSystem::new(dir.path()).unwrap());
            let channel = LogDirFailureChannel::new();
            let fs = LogDirFileSystem::wrap(faulty.clone(), channel.clone());
            let path = dir.path().join("00000000000000000000.log");
            let file = fs.open_file(&path, true).unwrap();
            fs.write_all_at(&file, &path, b"abc", 0).unwrap();
            faulty.fail_writes(Fault::new(kind).times(1).torn_after(1));
            assert!(fs.write_all_at(&file, &path, b"def", 3).is_err());
            let reason = channel.failure().expect("a failed write is reported");
            assert!(reason.contains("write"), "{reason}");
            // The fault fired once; nothing is written, cut or synced again.
            let bufs = [IoSlice::new(b"g")];
            assert!(fs.write_vectored_at(&file, &path, &bufs, 3).is_err());
            assert!(fs.set_len(&file, &path, 3).is_err(), "{kind:?}");
            assert!(fs.sync_data(&file, &path).is_err(), "{kind:?}");
            assert_eq!(now_or_never(channel.failed()), Some(reason));
        }
    }

    #[test]
    fn a_directory_deleted_under_its_sync_is_not_a_disk_failure() {
        let dir = tempfile::tempdir().unwrap();
        let faulty = Arc::new(FaultyFileSystem::new(dir.path()).unwrap());
        let channel = LogDirFailureChannel::new();
        let fs = LogDirFileSystem::wrap(faulty, channel.clone());
        let gone = dir.path().join("topic-0");
        assert!(fs.sync_dir(&gone).is_err());
        assert_eq!(channel.failure(), None);
    }
}
