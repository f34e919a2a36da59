//! The raft log and vote on disk (openraft's `RaftLogStorage`).
//!
//! Files in the metadata directory (`<log.dirs>/__cluster_metadata-0/`):
//!
//! - `metadata.log`: append-only sequence of CRC-checked frames (layout in
//!   [`super::fs`]), each a JSON [`LogFrame`]: a raft entry, or a purge
//!   marker recording the last purged log id. Appends are fsynced before
//!   openraft is told they are durable (`LogFlushed`). Truncation cuts the
//!   file at the first removed entry. Purging (after a snapshot) rewrites the
//!   file atomically as `[Purged(id), remaining entries...]`. On open, the
//!   file is read up to the first torn or corrupt frame and cut there.
//! - `quorum-state`: the last vote as JSON, replaced atomically (temp file,
//!   fsync, rename, directory fsync) before `save_vote` returns.
//!
//! The whole log is also kept in memory: cluster metadata is small, and a
//! snapshot bounds it. All file I/O runs on tokio's blocking pool (inline
//! on the runtime thread inside a [`crate::DeterministicScope`]).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{AnyError, LogState, RaftLogReader, StorageIOError};
use serde::{Deserialize, Serialize};

use super::fs::{
    decode_frames, encode_frame, parse_json, read_optional, sync_dir, write_atomically,
};
use super::{Entry, LogId, MetadataTypeConfig, StorageError, Vote};

/// Name of the raft log file.
pub(crate) const LOG_FILE: &str = "metadata.log";
/// Name of the vote file (as Kafka's KRaft `quorum-state`).
pub(crate) const VOTE_FILE: &str = "quorum-state";

/// One frame of `metadata.log`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum LogFrame {
    /// A raft log entry.
    Entry(Entry),
    /// Every entry up to and including this log id was purged.
    Purged(LogId),
}

/// The in-memory state behind the log store and its readers.
struct LogInner {
    dir: PathBuf,
    /// Append handle on `metadata.log`.
    file: File,
    /// Bytes of valid frames in `metadata.log`.
    file_len: u64,
    /// Entries by index, with the file position of their frame.
    entries: BTreeMap<u64, (Entry, u64)>,
    last_purged: Option<LogId>,
    vote: Option<Vote>,
}

/// The file-backed raft log store. Cloning shares the same log.
#[derive(Clone)]
pub(crate) struct MetadataLogStore {
    inner: Arc<Mutex<LogInner>>,
}

fn io_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageError::IO {
        source: StorageIOError::write_logs(AnyError::new(&e)),
    }
}

impl MetadataLogStore {
    /// Opens (creating if needed) the log and vote in `dir`, truncating a
    /// torn tail of `metadata.log`. Blocking.
    ///
    /// # Errors
    ///
    /// I/O errors, or a vote file / frame that passes its CRC but is not
    /// valid JSON (corruption the CRC did not catch).
    pub(crate) fn open(dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(LOG_FILE);
        let bytes = read_optional(dir, LOG_FILE)?.unwrap_or_default();
        let (frames, valid_len) = decode_frames(&bytes);
        let mut entries = BTreeMap::new();
        let mut last_purged: Option<LogId> = None;
        for (pos, payload) in frames {
            let frame: LogFrame = parse_json(&format!("{LOG_FILE} frame at byte {pos}"), payload)?;
            match frame {
                LogFrame::Entry(entry) => {
                    entries.insert(entry.log_id.index, (entry, pos));
                }
                LogFrame::Purged(id) => {
                    entries.retain(|&index, _| index > id.index);
                    last_purged = Some(id);
                }
            }
        }
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        if valid_len < bytes.len() as u64 {
            tracing::warn!(
                path = %path.display(),
                valid_bytes = valid_len,
                file_bytes = bytes.len(),
                "truncating torn tail of the metadata log"
            );
            file.set_len(valid_len)?;
            file.sync_all()?;
        } else if bytes.is_empty() {
            sync_dir(dir)?;
        }
        let vote = match read_optional(dir, VOTE_FILE)? {
            Some(bytes) => Some(parse_json(VOTE_FILE, &bytes)?),
            None => None,
        };
        Ok(MetadataLogStore {
            inner: Arc::new(Mutex::new(LogInner {
                dir: dir.to_path_buf(),
                file,
                file_len: valid_len,
                entries,
                last_purged,
                vote,
            })),
        })
    }

    /// True when nothing was ever stored: no vote, no entries, nothing purged.
    pub(crate) fn is_pristine(&self) -> bool {
        let inner = lock(&self.inner);
        inner.vote.is_none() && inner.entries.is_empty() && inner.last_purged.is_none()
    }

    /// True when the stored vote is committed: this voter followed (or
    /// was) an elected leader when it stopped.
    pub(crate) fn has_committed_vote(&self) -> bool {
        lock(&self.inner).vote.is_some_and(|v| v.is_committed())
    }

    /// Runs `f` on the inner state on the blocking pool (inline inside a
    /// [`crate::DeterministicScope`]).
    async fn blocking<T, F>(&self, f: F) -> io::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut LogInner) -> io::Result<T> + Send + 'static,
    {
        let inner = self.inner.clone();
        crate::determinism::blocking(move || f(&mut lock(&inner))).await
    }
}

/// Locks the inner state; a poisoned lock (a panic while holding it) still
/// yields the state, which is only ever changed after the I/O succeeded.
fn lock(inner: &Mutex<LogInner>) -> MutexGuard<'_, LogInner> {
    inner
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl LogInner {
    fn rewrite_after_purge(&mut self) -> io::Result<()> {
        let mut bytes = Vec::new();
        let frame_bytes = |frame: &LogFrame, out: &mut Vec<u8>| -> io::Result<u64> {
            let pos = out.len() as u64;
            let payload = serde_json::to_vec(frame).map_err(io::Error::other)?;
            encode_frame(&payload, out);
            Ok(pos)
        };
        if let Some(id) = self.last_purged {
            frame_bytes(&LogFrame::Purged(id), &mut bytes)?;
        }
        let mut entries = std::mem::take(&mut self.entries);
        for (entry, pos) in entries.values_mut() {
            let frame = LogFrame::Entry(entry.clone());
            *pos = frame_bytes(&frame, &mut bytes)?;
        }
        self.entries = entries;
        write_atomically(&self.dir, LOG_FILE, &bytes)?;
        self.file = OpenOptions::new()
            .append(true)
            .open(self.dir.join(LOG_FILE))?;
        self.file_len = bytes.len() as u64;
        Ok(())
    }
}

fn read_range<RB: RangeBounds<u64>>(inner: &Mutex<LogInner>, range: RB) -> Vec<Entry> {
    lock(inner)
        .entries
        .range(range)
        .map(|(_, (entry, _))| entry.clone())
        .collect()
}

impl RaftLogReader<MetadataTypeConfig> for MetadataLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(read_range(&self.inner, range))
    }
}

impl RaftLogStorage<MetadataTypeConfig> for MetadataLogStore {
    type LogReader = MetadataLogStore;

    async fn get_log_state(&mut self) -> Result<LogState<MetadataTypeConfig>, StorageError> {
        let inner = lock(&self.inner);
        let last_purged_log_id = inner.last_purged;
        let last_log_id = inner
            .entries
            .values()
            .next_back()
            .map(|(e, _)| e.log_id)
            .or(last_purged_log_id);
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let vote = *vote;
        let bytes = serde_json::to_vec(&vote).map_err(|e| StorageError::IO {
            source: StorageIOError::write_vote(AnyError::new(&e)),
        })?;
        self.blocking(move |inner| {
            write_atomically(&inner.dir, VOTE_FILE, &bytes)?;
            inner.vote = Some(vote);
            Ok(())
        })
        .await
        .map_err(|e| StorageError::IO {
            source: StorageIOError::write_vote(AnyError::new(&e)),
        })
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(lock(&self.inner).vote)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<MetadataTypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let mut bytes = Vec::new();
        let mut positions = Vec::with_capacity(entries.len());
        for entry in &entries {
            positions.push(bytes.len() as u64);
            let payload = serde_json::to_vec(&LogFrame::Entry(entry.clone())).map_err(io_err)?;
            encode_frame(&payload, &mut bytes);
        }
        let result = self
            .blocking(move |inner| {
                let base = inner.file_len;
                let write = inner
                    .file
                    .write_all(&bytes)
                    .and_then(|()| inner.file.sync_data());
                if let Err(e) = write {
                    // Drop whatever part of the write reached the file.
                    let _ = inner.file.set_len(base);
                    return Err(e);
                }
                inner.file_len = base + bytes.len() as u64;
                for (entry, pos) in entries.into_iter().zip(positions) {
                    inner
                        .entries
                        .insert(entry.log_id.index, (entry, base + pos));
                }
                Ok(())
            })
            .await;
        match result {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let storage_error = io_err(io::Error::new(e.kind(), e.to_string()));
                callback.log_io_completed(Err(e));
                Err(storage_error)
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.blocking(move |inner| {
            let Some(&(_, pos)) = inner.entries.range(log_id.index..).next().map(|(_, v)| v) else {
                return Ok(());
            };
            inner.file.set_len(pos)?;
            inner.file.sync_all()?;
            inner.file_len = pos;
            inner.entries.retain(|&index, _| index < log_id.index);
            Ok(())
        })
        .await
        .map_err(io_err)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.blocking(move |inner| {
            if inner.last_purged.is_some_and(|p| p.index >= log_id.index) {
                return Ok(());
            }
            inner.last_purged = Some(log_id);
            inner.entries.retain(|&index, _| index > log_id.index);
            inner.rewrite_after_purge()
        })
        .await
        .map_err(io_err)
    }
}

#[cfg(test)]
mod tests {
    use openraft::storage::RaftLogStorageExt;
    use openraft::testing::{StoreBuilder, Suite};
    use openraft::{CommittedLeaderId, EntryPayload, RaftLogReader};

    use super::super::state_machine::MetadataStateMachine;
    use super::*;

    fn entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 0), index),
            payload: EntryPayload::Blank,
        }
    }

    async fn append(store: &mut MetadataLogStore, entries: Vec<Entry>) {
        store.blocking_append(entries).await.unwrap();
    }

    #[tokio::test]
    async fn torn_tail_is_truncated_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let len_after_two = {
            let mut store = MetadataLogStore::open(dir.path()).unwrap();
            append(&mut store, vec![entry(1, 1), entry(1, 2)]).await;
            let len = std::fs::metadata(dir.path().join(LOG_FILE)).unwrap().len();
            append(&mut store, vec![entry(1, 3)]).await;
            len
        };
        // Simulate a crash in the middle of writing entry 3.
        let path = dir.path().join(LOG_FILE);
        let full = std::fs::metadata(&path).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(full - 3)
            .unwrap();

        let mut store = MetadataLogStore::open(dir.path()).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), len_after_two);
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id.map(|l| l.index), Some(2));
        // Appending after the cut continues a clean log.
        append(&mut store, vec![entry(2, 3)]).await;
        drop(store);
        let mut store = MetadataLogStore::open(dir.path()).unwrap();
        let all = store.try_get_log_entries(0..).await.unwrap();
        let ids: Vec<_> = all
            .iter()
            .map(|e| (e.log_id.leader_id.term, e.log_id.index))
            .collect();
        assert_eq!(ids, vec![(1, 1), (1, 2), (2, 3)]);
    }

    #[tokio::test]
    async fn vote_truncate_and_purge_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut store = MetadataLogStore::open(dir.path()).unwrap();
            assert!(store.is_pristine());
            store.save_vote(&Vote::new(3, 7)).await.unwrap();
            append(&mut store, (1..=6).map(|i| entry(1, i)).collect()).await;
            store.truncate(entry(1, 5).log_id).await.unwrap();
            store.purge(entry(1, 2).log_id).await.unwrap();
        }
        let mut store = MetadataLogStore::open(dir.path()).unwrap();
        assert!(!store.is_pristine());
        assert_eq!(store.read_vote().await.unwrap(), Some(Vote::new(3, 7)));
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(2));
        assert_eq!(state.last_log_id.map(|l| l.index), Some(4));
        let indexes: Vec<u64> = store
            .try_get_log_entries(0..)
            .await
            .unwrap()
            .iter()
            .map(|e| e.log_id.index)
            .collect();
        assert_eq!(indexes, vec![3, 4]);
    }

    struct Builder {
        dirs: Mutex<Vec<tempfile::TempDir>>,
    }

    impl StoreBuilder<MetadataTypeConfig, MetadataLogStore, MetadataStateMachine> for Builder {
        async fn build(
            &self,
        ) -> Result<((), MetadataLogStore, MetadataStateMachine), StorageError> {
            let dir = tempfile::tempdir().map_err(io_err)?;
            let log = MetadataLogStore::open(dir.path()).map_err(io_err)?;
            let sm = MetadataStateMachine::open(dir.path(), "suite").map_err(io_err)?;
            self.dirs.lock().unwrap().push(dir);
            Ok(((), log, sm))
        }
    }

    #[test]
    fn openraft_storage_conformance_suite() {
        Suite::test_all(Builder {
            dirs: Mutex::new(Vec::new()),
        })
        .unwrap();
    }
}
