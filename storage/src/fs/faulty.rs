//! [`FaultyFileSystem`]: a [`FileSystem`] test double that wraps the real
//! one under a root directory and injects faults: ENOSPC or EIO on writes
//! (optionally after writing only the first bytes: a torn write), EIO on
//! `fdatasync`/directory `fsync`, a process crash (every later change fails
//! until [`FaultyFileSystem::restart`]) and power loss
//! ([`FaultyFileSystem::simulate_power_loss`]). It also counts successful
//! `fdatasync`s per file ([`FaultyFileSystem::data_syncs`]), records
//! started writebacks ([`FaultyFileSystem::writebacks`]), and can hold
//! them at a gate, like a slow disk ([`FaultyFileSystem::hold_syncs`]).
//! Compiled for this crate's tests and with the `fault-injection` feature;
//! never used in production.
//!
//! # The durability model
//!
//! The double keeps a shadow of what would survive a power failure:
//!
//! * each file's content as of its last successful `fdatasync` (a new file's
//!   is empty); a file is identified by its inode as seen through `fstat`,
//!   and a fresh identity is given to every file created through the seam,
//!   so inode reuse does not mix files up;
//! * each directory's entries (name -> file) as of the last successful
//!   `fsync` of that directory, and its subdirectory entries likewise: a
//!   directory created since its parent's last `fsync` is not durable.
//!
//! [`FaultyFileSystem::simulate_power_loss`] rewrites the tree under the root
//! to that shadow: a file whose name is durable gets its synced content back
//! (unsynced writes and truncations are lost), a file whose name is not
//! durable (created or renamed since the last `fsync` of its directory)
//! disappears, and a durable name removed or renamed away since comes back;
//! a directory whose entry is not durable disappears with all it holds.
//! Everything under the root at construction time counts as durable.
//!
//! A failed `fdatasync` syncs nothing and, by default, loses nothing. With
//! [`Fault::dropping_dirty_pages`] it behaves as Linux does after a
//! writeback error (the "fsyncgate" of 2018): the file's dirty pages are
//! marked clean without reaching the disk, the error is reported once, and
//! later `fdatasync`s of the file succeed; the bytes written since the last
//! successful sync never become durable (a power loss leaves zeros there)
//! unless they are written again.
//!
//! Limits: a directory removed or renamed away does not come back (only
//! the creation of directories is undone); power loss is all-or-nothing per
//! file, so it never leaves a partially synced file (torn writes are injected
//! explicitly instead); files changed behind the seam's back after
//! construction are not modelled faithfully. Drop every [`crate::Log`] using
//! the double before simulating power loss.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::{self, IoSlice};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};

use super::{FileSystem, RealFileSystem};

/// The error an injected fault returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// `ENOSPC`: no space left on the device.
    NoSpace,
    /// `EIO`: an input/output error.
    Io,
}

impl FaultKind {
    fn error(self) -> io::Error {
        match self {
            FaultKind::NoSpace => rustix::io::Errno::NOSPC.into(),
            FaultKind::Io => rustix::io::Errno::IO.into(),
        }
    }
}

/// A fault armed on writes ([`FileSystem::write_vectored_at`] and
/// [`FileSystem::write_all_at`]), on syncs ([`FileSystem::sync_data`] and
/// [`FileSystem::sync_dir`]) or on renames ([`FileSystem::rename`], matched
/// on the source path).
#[derive(Clone, Debug)]
pub struct Fault {
    /// The error returned.
    pub kind: FaultKind,
    /// How many matching calls fail; `None`: every one until
    /// [`FaultyFileSystem::disarm`].
    pub times: Option<usize>,
    /// How many matching calls succeed before the first failure.
    pub after: usize,
    /// Only calls on paths whose file name ends with this fail (`".log"`,
    /// `".index"`, ...); `None`: every path.
    pub path_suffix: Option<String>,
    /// Writes only: a failing write first writes this many bytes of its
    /// buffers for real (a torn write). `None` writes nothing.
    pub torn_after: Option<usize>,
    /// After failing, the process "crashes": every later change through the
    /// seam fails with EIO until [`FaultyFileSystem::restart`] or
    /// [`FaultyFileSystem::simulate_power_loss`].
    pub then_crash: bool,
    /// Syncs only: the failed `fdatasync` drops the file's dirty pages, as
    /// Linux does (see the module docs).
    pub drops_dirty_pages: bool,
}

impl Fault {
    /// A fault of `kind` on every matching call until disarmed, on every
    /// path, writing nothing, without a crash.
    pub fn new(kind: FaultKind) -> Self {
        Fault {
            kind,
            times: None,
            after: 0,
            path_suffix: None,
            torn_after: None,
            then_crash: false,
            drops_dirty_pages: false,
        }
    }

    /// Fails only the next `n` matching calls (`0`: none).
    pub fn times(mut self, n: usize) -> Self {
        self.times = Some(n);
        self
    }

    /// Lets the next `n` matching calls succeed first (fails the `n+1`-th).
    pub fn after(mut self, n: usize) -> Self {
        self.after = n;
        self
    }

    /// Fails only calls on paths whose file name ends with `suffix`.
    pub fn on_suffix(mut self, suffix: &str) -> Self {
        self.path_suffix = Some(suffix.to_string());
        self
    }

    /// Writes the first `bytes` bytes before failing (a torn write).
    pub fn torn_after(mut self, bytes: usize) -> Self {
        self.torn_after = Some(bytes);
        self
    }

    /// Crashes the process after the fault fires.
    pub fn then_crash(mut self) -> Self {
        self.then_crash = true;
        self
    }

    /// A failing sync drops the file's dirty pages (Linux's behaviour after
    /// a writeback error): what was written since its last successful sync
    /// never reaches the disk, and later syncs of the file succeed.
    pub fn dropping_dirty_pages(mut self) -> Self {
        self.drops_dirty_pages = true;
        self
    }

    fn matches(&self, path: &Path) -> bool {
        self.path_suffix.as_deref().is_none_or(|suffix| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(suffix))
        })
    }
}

/// A file's identity in the shadow (not an inode number: see the module docs).
type FileId = u64;

#[derive(Debug, Default)]
struct State {
    write_fault: Option<Fault>,
    sync_fault: Option<Fault>,
    rename_fault: Option<Fault>,
    crashed: bool,
    faults_fired: usize,
    next_id: FileId,
    /// `(dev, ino)` -> identity of the file currently holding that inode.
    ids: HashMap<(u64, u64), FileId>,
    /// Content as of the last successful `fdatasync`.
    synced: HashMap<FileId, Vec<u8>>,
    /// Byte ranges of each file whose dirty pages a failed `fdatasync`
    /// dropped ([`Fault::dropping_dirty_pages`]): never durable until
    /// written again.
    dropped: HashMap<FileId, Vec<std::ops::Range<u64>>>,
    /// Durable directory entries: path -> file.
    durable: BTreeMap<PathBuf, FileId>,
    /// Directories whose entry in their parent is durable: those present
    /// at the last snapshot and those a `sync_dir` of their parent saw. A
    /// power loss removes every other directory under the root, with what
    /// it holds (a `mkdir` is as volatile as a file creation until the
    /// parent directory is synced).
    durable_dirs: BTreeSet<PathBuf>,
    /// Successful `fdatasync`s per path (never reset).
    data_syncs: HashMap<PathBuf, usize>,
    /// Whether `fdatasync` waits at the gate ([`FaultyFileSystem::hold_syncs`]).
    syncs_held: bool,
    /// How many `fdatasync`s wait at the gate now.
    syncs_waiting: usize,
    /// Ranges whose writeback was started, per path, in call order.
    writebacks: HashMap<PathBuf, Vec<(u64, u64)>>,
}

impl State {
    fn fresh_id(&mut self, meta: &std::fs::Metadata, synced: Vec<u8>) -> FileId {
        let id = self.next_id;
        self.next_id += 1;
        self.ids.insert((meta.dev(), meta.ino()), id);
        self.synced.insert(id, synced);
        id
    }

    /// The identity of an open file, created (with its current content as
    /// synced content) for a file the seam has not seen.
    fn id_of(&mut self, file: &File) -> io::Result<FileId> {
        let meta = file.metadata()?;
        match self.ids.get(&(meta.dev(), meta.ino())) {
            Some(id) => Ok(*id),
            None => {
                let content = read_whole(file)?;
                Ok(self.fresh_id(&meta, content))
            }
        }
    }

    /// A failed sync of `file` dropped its dirty pages: from the first byte
    /// that differs from its synced content to its end.
    fn drop_dirty_pages(&mut self, file: &File) -> io::Result<()> {
        let id = self.id_of(file)?;
        let content = read_whole(file)?;
        let synced = self.synced.get(&id).map(Vec::as_slice).unwrap_or(&[]);
        let first = content
            .iter()
            .zip(synced)
            .position(|(a, b)| a != b)
            .unwrap_or(content.len().min(synced.len()));
        if first < content.len() {
            self.dropped
                .entry(id)
                .or_default()
                .push(first as u64..content.len() as u64);
        }
        Ok(())
    }

    /// Bytes `range` of `file` were written (dirty again): no longer
    /// dropped.
    fn rewritten(&mut self, file: &File, range: std::ops::Range<u64>) -> io::Result<()> {
        let id = self.id_of(file)?;
        if let Some(ranges) = self.dropped.get_mut(&id) {
            *ranges = ranges
                .iter()
                .flat_map(|r| {
                    let before = r.start..r.end.min(range.start);
                    let after = r.start.max(range.end)..r.end;
                    [before, after]
                })
                .filter(|r| !r.is_empty())
                .collect();
        }
        Ok(())
    }

    /// Checks the crash flag, then fires `fault` if it is armed for `path`.
    fn check(&mut self, which: Which, path: &Path) -> Result<(), Fired> {
        if self.crashed {
            return Err(Fired {
                error: FaultKind::Io.error(),
                torn_after: None,
                drops_dirty_pages: false,
            });
        }
        let slot = match which {
            Which::Write => &mut self.write_fault,
            Which::Sync => &mut self.sync_fault,
            Which::Rename => &mut self.rename_fault,
            Which::None => return Ok(()),
        };
        if slot.as_ref().is_some_and(|f| f.times == Some(0)) {
            *slot = None;
        }
        let Some(fault) = slot.as_mut().filter(|f| f.matches(path)) else {
            return Ok(());
        };
        if fault.after > 0 {
            fault.after -= 1;
            return Ok(());
        }
        let fired = Fired {
            error: fault.kind.error(),
            torn_after: fault.torn_after,
            drops_dirty_pages: fault.drops_dirty_pages,
        };
        if fault.then_crash {
            self.crashed = true;
        }
        if let Some(n) = fault.times.as_mut() {
            *n -= 1;
            if *n == 0 {
                *slot = None;
            }
        }
        self.faults_fired += 1;
        Err(fired)
    }

    /// Forgets everything and takes the tree under `root` as durable.
    fn snapshot(&mut self, root: &Path) -> io::Result<()> {
        *self = State {
            faults_fired: self.faults_fired,
            next_id: self.next_id,
            data_syncs: std::mem::take(&mut self.data_syncs),
            syncs_held: self.syncs_held,
            syncs_waiting: self.syncs_waiting,
            ..State::default()
        };
        for path in walk_files(root)? {
            let content = std::fs::read(&path)?;
            let meta = std::fs::symlink_metadata(&path)?;
            let id = self.fresh_id(&meta, content);
            self.durable.insert(path, id);
        }
        self.durable_dirs = walk_dirs(root)?.into_iter().collect();
        Ok(())
    }
}

#[derive(Clone, Copy)]
enum Which {
    Write,
    Sync,
    Rename,
    None,
}

/// A fault that fired: the error, for writes how many bytes to write
/// first, for syncs whether the dirty pages are dropped.
struct Fired {
    error: io::Error,
    torn_after: Option<usize>,
    drops_dirty_pages: bool,
}

fn read_whole(file: &File) -> io::Result<Vec<u8>> {
    let len = file.metadata()?.len() as usize;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, 0)?;
    Ok(buf)
}

/// Every directory under `root` (not `root` itself), recursively, parents
/// before their children.
fn walk_dirs(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                stack.push(entry.path());
                out.push(entry.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Every regular file under `root`, recursively.
fn walk_files(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The closed sync gate of [`FaultyFileSystem::hold_syncs_until_dropped`];
/// dropping it calls [`FaultyFileSystem::release_syncs`].
#[derive(Debug)]
pub struct HeldSyncs<'a>(&'a FaultyFileSystem);

impl Drop for HeldSyncs<'_> {
    fn drop(&mut self) {
        self.0.release_syncs();
    }
}

/// The fault-injecting file system. See the module docs.
#[derive(Debug)]
pub struct FaultyFileSystem {
    real: RealFileSystem,
    root: PathBuf,
    state: Mutex<State>,
    /// Wakes `fdatasync`s waiting at the gate.
    gate: Condvar,
}

impl FaultyFileSystem {
    /// Wraps the real file system for the tree under `root` (which must
    /// exist), taking everything under it as durable.
    ///
    /// # Errors
    /// The error of reading the tree.
    pub fn new(root: &Path) -> io::Result<Self> {
        let mut state = State::default();
        state.snapshot(root)?;
        Ok(FaultyFileSystem {
            real: RealFileSystem,
            root: root.to_path_buf(),
            state: Mutex::new(state),
            gate: Condvar::new(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Arms `fault` on writes, replacing any armed write fault.
    pub fn fail_writes(&self, fault: Fault) {
        self.state().write_fault = Some(fault);
    }

    /// Arms `fault` on `fdatasync` and directory `fsync`, replacing any armed
    /// sync fault (`torn_after` is ignored).
    pub fn fail_syncs(&self, fault: Fault) {
        self.state().sync_fault = Some(fault);
    }

    /// Arms `fault` on renames (matched on the source path), replacing any
    /// armed rename fault (`torn_after` is ignored).
    pub fn fail_renames(&self, fault: Fault) {
        self.state().rename_fault = Some(fault);
    }

    /// Disarms every fault (space came back, the disk recovered). Does not
    /// undo a crash: see [`FaultyFileSystem::restart`].
    pub fn disarm(&self) {
        let mut state = self.state();
        state.write_fault = None;
        state.sync_fault = None;
        state.rename_fault = None;
    }

    /// How many injected faults have fired so far (crash-mode failures not
    /// counted).
    pub fn faults_fired(&self) -> usize {
        self.state().faults_fired
    }

    /// How many `fdatasync`s of files whose name ends with `suffix` have
    /// succeeded since construction (power losses and restarts included).
    pub fn data_syncs(&self, suffix: &str) -> usize {
        self.state()
            .data_syncs
            .iter()
            .filter(|(path, _)| {
                path.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(suffix))
            })
            .map(|(_, n)| n)
            .sum()
    }

    /// The `(offset, len)` ranges of files whose name ends with `suffix`
    /// whose writeback was started ([`FileSystem::start_writeback`]), in
    /// call order.
    pub fn writebacks(&self, suffix: &str) -> Vec<(u64, u64)> {
        let state = self.state();
        let mut paths: Vec<_> = state
            .writebacks
            .iter()
            .filter(|(path, _)| {
                path.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(suffix))
            })
            .collect();
        paths.sort();
        paths
            .into_iter()
            .flat_map(|(_, r)| r.iter().copied())
            .collect()
    }

    /// Closes the gate: every `fdatasync` from now on blocks its thread
    /// before syncing until [`FaultyFileSystem::release_syncs`] (a slow
    /// disk, so that a test can act while a sync is known to run).
    pub fn hold_syncs(&self) {
        self.state().syncs_held = true;
    }

    /// [`FaultyFileSystem::hold_syncs`], with the gate opened again when
    /// the returned guard drops: a test that fails while the gate is closed
    /// still lets the runtime's blocking threads finish.
    #[must_use = "the gate opens again when the guard drops"]
    pub fn hold_syncs_until_dropped(&self) -> HeldSyncs<'_> {
        self.hold_syncs();
        HeldSyncs(self)
    }

    /// Opens the gate and wakes every `fdatasync` waiting at it.
    pub fn release_syncs(&self) {
        self.state().syncs_held = false;
        self.gate.notify_all();
    }

    /// How many `fdatasync`s wait at the closed gate now.
    pub fn syncs_waiting(&self) -> usize {
        self.state().syncs_waiting
    }

    /// Whether a fault with `then_crash` fired and no restart followed.
    pub fn crashed(&self) -> bool {
        self.state().crashed
    }

    /// The process restarts after a crash without losing power: everything
    /// written so far stays (it is in the page cache), faults are disarmed.
    pub fn restart(&self) {
        self.state().crashed = false;
        self.disarm();
    }

    /// Power fails and the machine restarts: the tree under the root is
    /// rewritten to its durable shadow (see the module docs), faults are
    /// disarmed and the crash flag is cleared.
    ///
    /// # Errors
    /// The error of rewriting the tree.
    pub fn simulate_power_loss(&self) -> io::Result<()> {
        let mut state = self.state();
        for dir in walk_dirs(&self.root)? {
            if !state.durable_dirs.contains(&dir) && dir.is_dir() {
                std::fs::remove_dir_all(&dir)?;
            }
        }
        for path in walk_files(&self.root)? {
            if !state.durable.contains_key(&path) {
                std::fs::remove_file(&path)?;
            }
        }
        for (path, id) in &state.durable {
            let parent_exists = path.parent().is_some_and(Path::is_dir);
            if parent_exists {
                let content = state.synced.get(id).map(Vec::as_slice).unwrap_or(&[]);
                std::fs::write(path, content)?;
            }
        }
        state.snapshot(&self.root)?;
        Ok(())
    }

    fn fail_write(&self, file: &File, fired: Fired, torn: &[u8], offset: u64) -> io::Error {
        if let Some(k) = fired.torn_after {
            let k = k.min(torn.len());
            if let Err(e) = file.write_all_at(&torn[..k], offset) {
                return e;
            }
            if let Err(e) = self.state().rewritten(file, offset..offset + k as u64) {
                return e;
            }
        }
        fired.error
    }
}

impl FileSystem for FaultyFileSystem {
    fn open_file(&self, path: &Path, truncate: bool) -> io::Result<File> {
        let mut state = self.state();
        state.check(Which::None, path).map_err(|f| f.error)?;
        let existed = std::fs::symlink_metadata(path).is_ok();
        let file = self.real.open_file(path, truncate)?;
        let meta = file.metadata()?;
        if !existed {
            state.fresh_id(&meta, Vec::new());
        } else {
            state.id_of(&file)?;
        }
        Ok(file)
    }

    fn open_existing(&self, path: &Path) -> io::Result<File> {
        let mut state = self.state();
        state.check(Which::None, path).map_err(|f| f.error)?;
        let file = self.real.open_existing(path)?;
        state.id_of(&file)?;
        Ok(file)
    }

    fn write_vectored_at(
        &self,
        file: &File,
        path: &Path,
        bufs: &[IoSlice<'_>],
        offset: u64,
    ) -> io::Result<usize> {
        let fired = self.state().check(Which::Write, path);
        match fired {
            Ok(()) => {
                let written = self.real.write_vectored_at(file, path, bufs, offset)?;
                self.state()
                    .rewritten(file, offset..offset + written as u64)?;
                Ok(written)
            }
            Err(fired) => {
                let flat: Vec<u8> = match fired.torn_after {
                    Some(_) => bufs.iter().flat_map(|b| b.iter().copied()).collect(),
                    None => Vec::new(),
                };
                Err(self.fail_write(file, fired, &flat, offset))
            }
        }
    }

    fn write_all_at(&self, file: &File, path: &Path, buf: &[u8], offset: u64) -> io::Result<()> {
        let fired = self.state().check(Which::Write, path);
        match fired {
            Ok(()) => {
                self.real.write_all_at(file, path, buf, offset)?;
                self.state()
                    .rewritten(file, offset..offset + buf.len() as u64)
            }
            Err(fired) => Err(self.fail_write(file, fired, buf, offset)),
        }
    }

    fn set_len(&self, file: &File, path: &Path, len: u64) -> io::Result<()> {
        self.state().check(Which::None, path).map_err(|f| f.error)?;
        self.real.set_len(file, path, len)
    }

    fn sync_data(&self, file: &File, path: &Path) -> io::Result<()> {
        let mut state = self.state();
        while state.syncs_held {
            state.syncs_waiting += 1;
            state = self.gate.wait(state).unwrap_or_else(|p| p.into_inner());
            state.syncs_waiting -= 1;
        }
        if let Err(fired) = state.check(Which::Sync, path) {
            if fired.drops_dirty_pages {
                state.drop_dirty_pages(file)?;
            }
            return Err(fired.error);
        }
        self.real.sync_data(file, path)?;
        let id = state.id_of(file)?;
        let mut content = read_whole(file)?;
        let old = state.synced.get(&id).cloned().unwrap_or_default();
        for range in state.dropped.get(&id).into_iter().flatten() {
            let end = (range.end as usize).min(content.len());
            let start = (range.start as usize).min(end);
            for (i, byte) in content[start..end].iter_mut().enumerate() {
                *byte = old.get(start + i).copied().unwrap_or(0);
            }
        }
        state.synced.insert(id, content);
        *state.data_syncs.entry(path.to_path_buf()).or_default() += 1;
        Ok(())
    }

    fn start_writeback(&self, file: &File, path: &Path, offset: u64, len: u64) -> io::Result<()> {
        // Recorded only: writeback makes nothing durable in the model (a
        // power loss before the next fdatasync may still lose the range).
        let mut state = self.state();
        if state.crashed {
            return Err(FaultKind::Io.error());
        }
        self.real.start_writeback(file, path, offset, len)?;
        state
            .writebacks
            .entry(path.to_path_buf())
            .or_default()
            .push((offset, len));
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.check(Which::Sync, dir).map_err(|f| f.error)?;
        self.real.sync_dir(dir)?;
        state.durable.retain(|p, _| p.parent() != Some(dir));
        state.durable_dirs.retain(|p| p.parent() != Some(dir));
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                state.durable_dirs.insert(entry.path());
                continue;
            }
            if !entry.file_type()?.is_file() {
                continue;
            }
            let path = entry.path();
            let id = state.id_of(&File::open(&path)?)?;
            state.durable.insert(path, id);
        }
        Ok(())
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.state().check(Which::None, dir).map_err(|f| f.error)?;
        self.real.create_dir_all(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.state()
            .check(Which::Rename, from)
            .map_err(|f| f.error)?;
        self.real.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.state().check(Which::None, path).map_err(|f| f.error)?;
        self.real.remove_file(path)
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.state().check(Which::None, dir).map_err(|f| f.error)?;
        self.real.remove_dir_all(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(fs: &FaultyFileSystem, path: &Path, data: &[u8]) -> File {
        let f = fs.open_file(path, true).unwrap();
        fs.write_all_at(&f, path, data, 0).unwrap();
        f
    }

    #[test]
    fn power_loss_keeps_only_synced_data_under_synced_names() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("old"), b"before").unwrap();
        let fs = FaultyFileSystem::new(root).unwrap();

        // Synced data and name: survives.
        let a = write(&fs, &root.join("a"), b"aaaa");
        fs.sync_data(&a, &root.join("a")).unwrap();
        fs.sync_dir(root).unwrap();
        // Unsynced append to a durable file: lost.
        fs.write_all_at(&a, &root.join("a"), b"XX", 4).unwrap();
        // Synced data but the name never synced: the file disappears.
        let b = write(&fs, &root.join("b"), b"bbbb");
        fs.sync_data(&b, &root.join("b")).unwrap();
        // A durable file removed without a directory sync: comes back.
        fs.remove_file(&root.join("old")).unwrap();
        drop((a, b));

        fs.simulate_power_loss().unwrap();
        assert_eq!(std::fs::read(root.join("a")).unwrap(), b"aaaa");
        assert!(!root.join("b").exists());
        assert_eq!(std::fs::read(root.join("old")).unwrap(), b"before");
    }

    #[test]
    fn a_sync_failure_dropping_dirty_pages_loses_them_for_good_unless_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let fs = FaultyFileSystem::new(root).unwrap();
        let path = root.join("x.log");
        let f = write(&fs, &path, b"aaaa");
        fs.sync_data(&f, &path).unwrap();
        fs.sync_dir(root).unwrap();
        fs.write_all_at(&f, &path, b"bbbb", 4).unwrap();
        fs.fail_syncs(Fault::new(FaultKind::Io).times(1).dropping_dirty_pages());
        assert!(fs.sync_data(&f, &path).is_err());
        // The retry reports success and what follows is synced, but the
        // dropped pages never reach the disk.
        fs.write_all_at(&f, &path, b"cc", 8).unwrap();
        fs.sync_data(&f, &path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"aaaabbbbcc");
        drop(f);
        fs.simulate_power_loss().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"aaaa\0\0\0\0cc");

        // Written again, they are dirty again and the next sync covers them.
        let f = fs.open_file(&path, false).unwrap();
        fs.write_all_at(&f, &path, b"bbbb", 4).unwrap();
        fs.fail_syncs(Fault::new(FaultKind::Io).times(1).dropping_dirty_pages());
        assert!(fs.sync_data(&f, &path).is_err());
        fs.write_all_at(&f, &path, b"bb", 4).unwrap();
        fs.sync_data(&f, &path).unwrap();
        drop(f);
        fs.simulate_power_loss().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"aaaabb\0\0cc");
    }

    #[test]
    fn atomic_replace_is_durable_only_after_the_directory_sync() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("cp"), b"v1").unwrap();
        let fs = FaultyFileSystem::new(root).unwrap();
        let tmp = root.join("cp.tmp");
        let f = write(&fs, &tmp, b"v2");
        fs.sync_data(&f, &tmp).unwrap();
        fs.rename(&tmp, &root.join("cp")).unwrap();
        drop(f);
        fs.simulate_power_loss().unwrap();
        assert_eq!(std::fs::read(root.join("cp")).unwrap(), b"v1");
        assert!(!tmp.exists());

        let f = write(&fs, &tmp, b"v3");
        fs.sync_data(&f, &tmp).unwrap();
        fs.rename(&tmp, &root.join("cp")).unwrap();
        fs.sync_dir(root).unwrap();
        drop(f);
        fs.simulate_power_loss().unwrap();
        assert_eq!(std::fs::read(root.join("cp")).unwrap(), b"v3");
    }

    #[test]
    fn armed_faults_fire_the_requested_number_of_times_and_tear_writes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let fs = FaultyFileSystem::new(root).unwrap();
        let path = root.join("x.log");
        let f = fs.open_file(&path, true).unwrap();
        fs.fail_writes(Fault::new(FaultKind::NoSpace).times(1).torn_after(3));
        let bufs = [IoSlice::new(b"ab"), IoSlice::new(b"cdef")];
        let err = fs.write_vectored_at(&f, &path, &bufs, 0).unwrap_err();
        assert_eq!(
            err.raw_os_error(),
            Some(rustix::io::Errno::NOSPC.raw_os_error())
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"abc");
        // Fired once: the next write goes through.
        assert_eq!(fs.write_vectored_at(&f, &path, &bufs, 0).unwrap(), 6);
        assert_eq!(fs.faults_fired(), 1);

        fs.fail_writes(Fault::new(FaultKind::Io).on_suffix(".index"));
        fs.write_all_at(&f, &path, b"z", 0).unwrap();
        let idx = root.join("x.index");
        let g = fs.open_file(&idx, true).unwrap();
        assert!(fs.write_all_at(&g, &idx, b"z", 0).is_err());
        assert!(fs.write_all_at(&g, &idx, b"z", 0).is_err());
        fs.disarm();
        fs.write_all_at(&g, &idx, b"z", 0).unwrap();

        fs.fail_syncs(Fault::new(FaultKind::Io).times(1).then_crash());
        assert!(fs.sync_data(&f, &path).is_err());
        assert!(fs.crashed());
        assert!(fs.write_all_at(&f, &path, b"q", 0).is_err());
        assert!(fs.set_len(&f, &path, 0).is_err());
        fs.restart();
        fs.write_all_at(&f, &path, b"q", 0).unwrap();
    }
}
