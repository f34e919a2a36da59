//! The file-system seam: [`FileSystem`] is every operation storage performs
//! that writes to disk or can lose data (open/create, positioned writes,
//! truncation, `fdatasync`, directory `fsync`, rename, removal), so that tests
//! can inject faults (ENOSPC, EIO, torn writes, power loss) under a real
//! [`Log`](crate::Log). [`RealFileSystem`] forwards each call to the operating
//! system and is the default; the test double lives in `fs::faulty` (compiled
//! for tests and with the `fault-injection` feature). For real broker
//! processes under test, [`SyncJournalFileSystem`] journals what each sync
//! made durable so that a harness can apply a power loss after SIGKILL.
//!
//! Reads are not part of the seam: segments, indexes and
//! [`FileSlice`](crate::FileSlice)s read the real descriptor returned by
//! [`FileSystem::open_file`] (`pread`, `sendfile`), so the read path costs
//! nothing extra. Directory creation is in the seam only so that a fault can
//! be injected there; the power-loss model treats directories as durable.
//!
//! Modelled after the `FileSystem` seam of raft-engine/TiKV. This module must
//! not depend on the rest of the crate.

use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

#[cfg(any(test, feature = "fault-injection"))]
pub mod faulty;
pub mod log_dir_failure;
pub mod sync_journal;

pub use log_dir_failure::{LogDirFailureChannel, LogDirFileSystem};
pub use sync_journal::SyncJournalFileSystem;

/// The write side of a file system as storage uses it. Every method is
/// blocking; `path` arguments name the file a descriptor was opened from, for
/// fault targeting and error messages (implementations must not reopen it).
///
/// # Errors
/// Every method returns the operating system's [`io::Error`] (or an injected
/// one); callers wrap it in [`StorageError::Io`](crate::StorageError::Io).
pub trait FileSystem: Send + Sync + std::fmt::Debug {
    /// Opens `path` for reading and writing, creating it when missing, and
    /// truncating it to 0 bytes when `truncate` is set.
    fn open_file(&self, path: &Path, truncate: bool) -> io::Result<File>;

    /// Opens an existing file for reading and writing; `NotFound` when it
    /// is missing (a segment file reopened by the
    /// [`FileCache`](crate::file_cache::FileCache) must not be recreated
    /// after its log was deleted).
    fn open_existing(&self, path: &Path) -> io::Result<File>;

    /// One positioned vectored write (`pwritev`) of `bufs` at byte `offset`;
    /// returns the bytes written, which may be fewer than asked for.
    fn write_vectored_at(
        &self,
        file: &File,
        path: &Path,
        bufs: &[IoSlice<'_>],
        offset: u64,
    ) -> io::Result<usize>;

    /// Writes all of `buf` at byte `offset` (`pwrite` until done).
    fn write_all_at(&self, file: &File, path: &Path, buf: &[u8], offset: u64) -> io::Result<()>;

    /// Sets the file's length in bytes (`ftruncate`).
    fn set_len(&self, file: &File, path: &Path, len: u64) -> io::Result<()>;

    /// `fdatasync`: the file's data (and the metadata needed to read it, such
    /// as its length) becomes durable. Its name does not: see
    /// [`FileSystem::sync_dir`].
    fn sync_data(&self, file: &File, path: &Path) -> io::Result<()>;

    /// Starts writing back the dirty pages of `len` bytes at `offset`
    /// without waiting for them (`sync_file_range(2)` with
    /// `SYNC_FILE_RANGE_WRITE`; see [`crate::write_behind`]). Makes nothing
    /// durable: a power loss may still lose the range until an
    /// [`FileSystem::sync_data`]. May block while the device's queue is
    /// full.
    fn start_writeback(&self, file: &File, path: &Path, offset: u64, len: u64) -> io::Result<()>;

    /// `fsync` of a directory: creations, renames and removals of its
    /// entries become durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;

    /// Creates a directory and its missing parents (`mkdir -p`).
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;

    /// Renames `from` to `to`, replacing `to` if it exists (`rename(2)`).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Removes a file (`unlink`).
    fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// Removes a directory and everything in it.
    fn remove_dir_all(&self, dir: &Path) -> io::Result<()>;
}

/// The operating system's file system: every call goes straight to the
/// matching syscall. Zero-sized; its only cost is the dynamic call.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFileSystem;

impl RealFileSystem {
    /// A shared handle to the real file system, the default of
    /// [`Log::open`](crate::Log::open) and
    /// [`LogManager::open`](crate::LogManager::open).
    pub fn shared() -> Arc<dyn FileSystem> {
        Arc::new(RealFileSystem)
    }
}

impl FileSystem for RealFileSystem {
    fn open_file(&self, path: &Path, truncate: bool) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(truncate)
            .open(path)
    }

    fn open_existing(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new().read(true).write(true).open(path)
    }

    fn write_vectored_at(
        &self,
        file: &File,
        _path: &Path,
        bufs: &[IoSlice<'_>],
        offset: u64,
    ) -> io::Result<usize> {
        Ok(rustix::io::pwritev(file, bufs, offset)?)
    }

    fn write_all_at(&self, file: &File, _path: &Path, buf: &[u8], offset: u64) -> io::Result<()> {
        file.write_all_at(buf, offset)
    }

    fn set_len(&self, file: &File, _path: &Path, len: u64) -> io::Result<()> {
        file.set_len(len)
    }

    fn sync_data(&self, file: &File, _path: &Path) -> io::Result<()> {
        Ok(rustix::fs::fdatasync(file)?)
    }

    fn start_writeback(&self, file: &File, _path: &Path, offset: u64, len: u64) -> io::Result<()> {
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        // SAFETY: `sync_file_range` only reads its arguments: a descriptor
        // that `file` keeps open for the duration of the call, two integers
        // and a flag. rustix has no binding for it.
        let rc = unsafe {
            libc::sync_file_range(
                std::os::fd::AsRawFd::as_raw_fd(file),
                offset,
                len,
                libc::SYNC_FILE_RANGE_WRITE,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(dir)
    }
}

/// Removes `path` through `fs`; a file that is already gone counts as
/// removed (deletions are retried after crashes).
///
/// # Errors
/// [`crate::StorageError::Io`] naming the path for any other failure.
pub(crate) fn remove_if_exists(
    fs: &dyn FileSystem,
    path: &Path,
) -> Result<(), crate::StorageError> {
    match fs.remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(crate::StorageError::io("remove", path, e))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sync_file_range` is accepted for a written range of a real file,
    /// and an offset past `i64::MAX` is refused rather than wrapped.
    #[test]
    fn the_real_file_system_starts_writeback_of_a_written_range() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        let fs = RealFileSystem;
        let file = fs.open_file(&path, true).unwrap();
        fs.write_all_at(&file, &path, &vec![7u8; 1 << 20], 0)
            .unwrap();
        fs.start_writeback(&file, &path, 0, 1 << 20).unwrap();
        let refused = fs.start_writeback(&file, &path, u64::MAX, 1).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::InvalidInput);
    }
}
