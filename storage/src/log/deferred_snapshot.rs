//! The producer snapshot a segment roll takes (Kafka's
//! `ProducerStateManager.takeSnapshot(sync = false)` in `UnifiedLog.roll`),
//! written later off the append path: by the next flush
//! ([`crate::PendingFlush::sync`], on a blocking thread, before its
//! directory fsync; Kafka's `flushProducerStateSnapshot` in the roll's
//! scheduled `flush-log`), or by retention before it deletes a segment the
//! snapshot makes unnecessary to replay.
//!
//! Crash safety: until the file is durable, recovery replays the producer
//! state from an older snapshot or the log start, which is correct as long
//! as the segments holding those batches still exist; retention therefore
//! writes a deferred snapshot before deleting segments. A truncation below
//! the snapshot's offset invalidates it (a bumped generation, checked under
//! the same mutex as the write), so a flush already under way never
//! publishes a snapshot of batches the truncation removed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::StorageError;
use crate::fs::FileSystem;
use crate::producer_state::snapshot_file_name;

/// Tells concurrent writers' temporary files apart.
static NEXT_TMP: AtomicU64 = AtomicU64::new(0);

/// A producer snapshot encoded under the log's lock and not yet durable.
#[derive(Clone, Debug)]
pub(crate) struct DeferredSnapshot {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    /// The log end offset the snapshot describes (its file name).
    offset: i64,
    bytes: Arc<[u8]>,
    /// The log's truncation generation when the snapshot was taken.
    generation: u64,
    /// The log's current truncation generation; locked for the whole
    /// write so that a truncation waits for a write under way.
    current: Arc<Mutex<u64>>,
}

impl DeferredSnapshot {
    /// A snapshot of `offset` in the partition directory `dir`, taken at
    /// truncation generation `*current`.
    pub(crate) fn new(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        offset: i64,
        bytes: Vec<u8>,
        current: Arc<Mutex<u64>>,
    ) -> Self {
        let generation = *lock(&current);
        DeferredSnapshot {
            fs,
            dir: dir.to_path_buf(),
            offset,
            bytes: bytes.into(),
            generation,
            current,
        }
    }

    /// The log end offset the snapshot describes.
    pub(crate) fn offset(&self) -> i64 {
        self.offset
    }

    /// The file system the snapshot is written through.
    pub(crate) fn fs(&self) -> Arc<dyn FileSystem> {
        self.fs.clone()
    }

    /// The partition directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether `other` is this same snapshot (offset and generation).
    pub(crate) fn same_as(&self, other: &DeferredSnapshot) -> bool {
        self.offset == other.offset && self.generation == other.generation
    }

    /// Writes `<offset>.snapshot` through a temporary file of its own,
    /// fdatasyncs it and renames it into place; the caller fsyncs the
    /// partition directory afterwards. Blocking. Writes nothing (and
    /// returns `Ok(false)`) when a truncation invalidated the snapshot.
    ///
    /// # Errors
    /// [`StorageError::Io`] naming the file that could not be written,
    /// synced or renamed.
    pub(crate) fn write(&self) -> Result<bool, StorageError> {
        let current = lock(&self.current);
        if *current != self.generation {
            return Ok(false);
        }
        let path = self.dir.join(snapshot_file_name(self.offset));
        let tmp = self.dir.join(format!(
            "{}.{}.tmp",
            snapshot_file_name(self.offset),
            NEXT_TMP.fetch_add(1, Ordering::Relaxed)
        ));
        let fs = &*self.fs;
        let file = fs
            .open_file(&tmp, true)
            .map_err(|e| StorageError::io("create", &tmp, e))?;
        let written = fs
            .write_all_at(&file, &tmp, &self.bytes, 0)
            .map_err(|e| StorageError::io("write", &tmp, e))
            .and_then(|()| {
                fs.sync_data(&file, &tmp)
                    .map_err(|e| StorageError::io("fsync", &tmp, e))
            })
            .and_then(|()| {
                fs.rename(&tmp, &path)
                    .map_err(|e| StorageError::io("rename", &path, e))
            });
        if written.is_err() {
            let _ = fs.remove_file(&tmp);
        }
        written.map(|()| true)
    }

    /// Invalidates every snapshot taken before: a truncation removed (or
    /// may have removed) the batches they describe. Waits for a write
    /// under way.
    pub(crate) fn invalidate_all(current: &Mutex<u64>) {
        *lock(current) += 1;
    }
}

fn lock(m: &Mutex<u64>) -> std::sync::MutexGuard<'_, u64> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
