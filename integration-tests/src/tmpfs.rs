//! [`Tmpfs`]: a small tmpfs mounted on a directory for the life of a value,
//! so that a test can fill a broker's `log.dirs` ([`Tmpfs::fill`]) and make
//! its writes fail with ENOSPC, then free the space ([`Tmpfs::free`]).
//! Mounting needs root (`CAP_SYS_ADMIN`); it runs `mount -t tmpfs` and
//! `umount` from util-linux.
//!
//! The mount is removed when the value is dropped, on unwinding too (a lazy
//! `umount -l`, so a process that still has files open there does not keep
//! it; what was in it is gone). A harness killed with SIGKILL leaves the
//! mount behind: `findmnt -t tmpfs | grep weir-test-tmpfs` lists them.

use std::fs::OpenOptions;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The source name of every mount this module makes (shown by `findmnt`).
pub const TMPFS_SOURCE: &str = "weir-test-tmpfs";
/// The filler's name in the mounted directory.
pub const FILLER_FILE: &str = "weir-test-filler";
/// Bytes per write of [`Tmpfs::fill`].
const FILL_CHUNK: usize = 1 << 20;

/// A tmpfs mounted on one directory until dropped.
#[derive(Debug)]
pub struct Tmpfs {
    dir: PathBuf,
    size_bytes: u64,
}

impl Tmpfs {
    /// Mounts a tmpfs of at most `size_bytes` bytes on `dir` (which must
    /// exist; what it holds is hidden until the mount is removed).
    ///
    /// # Errors
    ///
    /// A message with `mount`'s output when the mount fails (not root,
    /// no tmpfs support, `mount` missing).
    pub fn mount(dir: &Path, size_bytes: u64) -> Result<Self, String> {
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={size_bytes},mode=0755"))
            .arg(TMPFS_SOURCE)
            .arg(dir)
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "mount -t tmpfs on {} exited with {}: {}",
                dir.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            size_bytes,
        })
    }

    /// The mounted directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The mount's size limit in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// Writes zeros to [`FILLER_FILE`] in the mount until a write fails
    /// with ENOSPC (appending to a filler already there); returns the
    /// filler's length in bytes. Whatever writes next to the mount gets
    /// ENOSPC, except into a page it already holds.
    ///
    /// # Errors
    ///
    /// A message when the filler cannot be opened or a write fails with
    /// anything but ENOSPC.
    pub fn fill(&self) -> Result<u64, String> {
        let path = self.dir.join(FILLER_FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("opening {}: {e}", path.display()))?;
        let zeros = vec![0u8; FILL_CHUNK];
        loop {
            match file.write_all(&zeros) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::StorageFull => break,
                Err(e) => return Err(format!("filling {}: {e}", path.display())),
            }
        }
        file.metadata()
            .map(|m| m.len())
            .map_err(|e| format!("reading the length of {}: {e}", path.display()))
    }

    /// Removes the filler of [`Self::fill`] (nothing when there is none).
    ///
    /// # Errors
    ///
    /// A message when it exists and cannot be removed.
    pub fn free(&self) -> Result<(), String> {
        let path = self.dir.join(FILLER_FILE);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != ErrorKind::NotFound => {
                Err(format!("removing {}: {e}", path.display()))
            }
            _ => Ok(()),
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let result = Command::new("umount").arg("-l").arg(&self.dir).output();
        match result {
            Ok(output) if output.status.success() => {}
            Ok(output) => eprintln!(
                "umount -l {} exited with {}: {}",
                self.dir.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
            Err(e) => eprintln!("running umount -l {}: {e}", self.dir.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads /proc/self/mountinfo: whether `dir` is a mount point.
    fn is_mounted(dir: &Path) -> bool {
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let dir = dir.to_str().unwrap();
        info.lines().any(|line| line.split(' ').nth(4) == Some(dir))
    }

    #[test]
    fn a_filled_tmpfs_refuses_writes_until_freed_and_is_unmounted_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let tmpfs = match Tmpfs::mount(dir.path(), 4 << 20) {
            Ok(t) => t,
            // Not root: nothing to test here (the chaos run reports it as
            // fault-not-injected).
            Err(e) => return eprintln!("skipped: {e}"),
        };
        assert!(is_mounted(dir.path()));
        let filled = tmpfs.fill().unwrap();
        assert!(filled > 0 && filled <= 4 << 20, "{filled}");
        let other = dir.path().join("segment");
        let error = std::fs::write(&other, vec![1u8; 8192]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::StorageFull);
        tmpfs.free().unwrap();
        std::fs::write(&other, vec![1u8; 8192]).unwrap();
        drop(tmpfs);
        assert!(!is_mounted(dir.path()));
        assert!(!other.exists(), "the tmpfs's files went with it");
    }
}
