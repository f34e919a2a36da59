//! Write-behind: the active segment's filled bytes start their way to the
//! disk soon after they are written, so that the dirty backlog of each log
//! stays under [`WRITE_BEHIND_BYTES`] and an fdatasync waits for its own
//! bytes, not for gigabytes the kernel's flusher would otherwise write at
//! once (issue 18 scope 1).
//!
//! Without it, the kernel starts writeback only past
//! `vm.dirty_background_ratio` (10% of RAM) or after
//! `vm.dirty_expire_centisecs` (30 s); on ext4 (data=ordered) an fdatasync
//! then commits a journal transaction that waits for every block allocated
//! by that writeback, so a durable acks=all produce after a burst of acks=1
//! traffic waited hundreds of milliseconds (`bench/results/latest.md` of
//! 2026-11-30: p99 190-841 ms at 20,000 records/s).
//!
//! [`LogSegment::append`](crate::segment::LogSegment) hands each
//! [`WRITE_BEHIND_BYTES`] of newly written pages (page-aligned, so a page is
//! not started twice) to one background thread, `weir-write-behind`, which
//! calls [`FileSystem::start_writeback`] (`sync_file_range(2)` with
//! `SYNC_FILE_RANGE_WRITE`: start writing dirty pages of the range, wait for
//! nothing). That call blocks when the device's queue is full, so it never
//! runs on the append path; when the thread falls behind by
//! [`QUEUE_CAPACITY`] ranges, further ranges are dropped (counted in
//! `weir_storage_write_behind_dropped_total`) and left to the kernel's own
//! writeback. Write-behind makes nothing durable: durability is still the
//! fdatasync of a flush (`Log::prepare_flush`), which also reports any
//! writeback error (the kernel keeps it for the next fsync of the file).
//!
//! Kafka has nothing like it (it leaves writeback to the kernel and fsyncs
//! nothing on the produce path); ScyllaDB and Redpanda keep dirty data
//! bounded the same way.

use std::fs::File;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock};

use crate::fs::FileSystem;

/// Bytes of a segment written since its last write-behind after which the
/// next append starts writeback of them: 1 MiB.
pub const WRITE_BEHIND_BYTES: u64 = 1 << 20;

/// Page size the ranges are aligned down to (the kernel writes whole pages;
/// a partial last page would be written again once filled).
const PAGE: u64 = 4096;

/// Ranges waiting for the background thread at most (at 1 MiB each, 1 GiB
/// of writeback asked for and not yet started).
const QUEUE_CAPACITY: usize = 1024;

/// One range of one file to start writing back.
#[derive(Debug)]
pub(crate) struct Writeback {
    pub fs: Arc<dyn FileSystem>,
    pub file: Arc<File>,
    pub path: PathBuf,
    /// First byte of the range.
    pub offset: u64,
    /// Bytes in the range.
    pub len: u64,
}

/// The range to start writing back after an append that left `size` bytes
/// in a segment whose writeback was last started up to `started`: `None`
/// until [`WRITE_BEHIND_BYTES`] have accumulated, else `(offset, len)` up to
/// the last whole page.
pub(crate) fn due_range(started: u64, size: u64) -> Option<(u64, u64)> {
    let end = size / PAGE * PAGE;
    (end >= started.saturating_add(WRITE_BEHIND_BYTES)).then(|| (started, end - started))
}

/// Queues `writeback` for the background thread; never blocks. Dropped
/// (and counted) when the queue is full or the thread could not start.
pub(crate) fn submit(writeback: Writeback) {
    static QUEUE: OnceLock<Option<SyncSender<Writeback>>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = sync_channel::<Writeback>(QUEUE_CAPACITY);
        let spawned = std::thread::Builder::new()
            .name("weir-write-behind".into())
            .spawn(move || {
                for w in rx {
                    run(&w);
                }
            });
        match spawned {
            Ok(_) => Some(tx),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the write-behind thread; writeback is left to the kernel");
                None
            }
        }
    });
    let dropped = match queue {
        Some(tx) => match tx.try_send(writeback) {
            Ok(()) => false,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => true,
        },
        None => true,
    };
    if dropped {
        metrics::counter!("weir_storage_write_behind_dropped_total").increment(1);
    }
}

/// Starts the writeback of one range. A failure is logged and otherwise
/// ignored: the kernel reports a failed writeback to the next fdatasync of
/// the file, which owns durability.
fn run(w: &Writeback) {
    match w.fs.start_writeback(&w.file, &w.path, w.offset, w.len) {
        Ok(()) => metrics::counter!("weir_storage_write_behind_bytes_total").increment(w.len),
        Err(e) => tracing::debug!(path = %w.path.display(), offset = w.offset, len = w.len,
            error = %e, "starting writeback failed; the next fdatasync reports any write error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_due_after_a_mebibyte_of_whole_pages() {
        assert_eq!(due_range(0, WRITE_BEHIND_BYTES - 1), None);
        assert_eq!(
            due_range(0, WRITE_BEHIND_BYTES + 100),
            Some((0, WRITE_BEHIND_BYTES))
        );
        // Aligned down to the last whole page.
        let size = 3 * WRITE_BEHIND_BYTES / 2 + 5000;
        assert_eq!(
            due_range(4096, size),
            Some((4096, (size / PAGE * PAGE) - 4096))
        );
        assert_eq!(
            due_range(WRITE_BEHIND_BYTES, WRITE_BEHIND_BYTES + 4096),
            None
        );
    }
}
