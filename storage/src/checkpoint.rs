//! Kafka's text checkpoint files (`CheckpointFile`): a version line (`0`), a
//! count line, then one entry per line, replaced atomically on every write
//! (write `<name>.tmp`, fsync, rename over the old file, fsync the directory).
//! Used for `leader-epoch-checkpoint`, `recovery-point-offset-checkpoint` and
//! `log-start-offset-checkpoint`; [`write_atomically`] also writes producer
//! snapshots and `meta.properties`. [`write_unsynced_tmp`] and
//! [`publish_tmp`] split that write for `partition.metadata`: the
//! temporary file is written at once, and the log's first flush syncs it
//! and only then renames it into place.
//! Every write goes through the [`FileSystem`] seam.

use std::path::Path;

use crate::error::StorageError;
use crate::fs::FileSystem;

/// The only checkpoint file version Kafka writes.
pub(crate) const CHECKPOINT_VERSION: i32 = 0;

/// Replaces `path` with `contents` atomically and durably: writes
/// `<path>.tmp`, fdatasyncs it, renames it over `path` and fsyncs the
/// directory. A failure leaves the old file in place (and possibly a `.tmp`
/// file, which the next write replaces).
pub(crate) fn write_atomically(
    fs: &dyn FileSystem,
    path: &Path,
    contents: &[u8],
) -> Result<(), StorageError> {
    let (file, tmp) = write_tmp(fs, path, contents)?;
    fs.sync_data(&file, &tmp)
        .map_err(|e| StorageError::io("fsync", &tmp, e))?;
    drop(file);
    fs.rename(&tmp, path)
        .map_err(|e| StorageError::io("rename", path, e))?;
    if let Some(dir) = path.parent() {
        sync_dir(fs, dir)?;
    }
    Ok(())
}

/// `<path>.tmp`: where a checkpoint of `path` is written before the rename.
pub(crate) fn tmp_path(path: &Path) -> std::path::PathBuf {
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    std::path::PathBuf::from(tmp_name)
}

/// Writes `contents` to a new `<path>.tmp`; returns it open, and its path.
fn write_tmp(
    fs: &dyn FileSystem,
    path: &Path,
    contents: &[u8],
) -> Result<(std::fs::File, std::path::PathBuf), StorageError> {
    let tmp = tmp_path(path);
    let file = fs
        .open_file(&tmp, true)
        .map_err(|e| StorageError::io("create", &tmp, e))?;
    fs.write_all_at(&file, &tmp, contents, 0)
        .map_err(|e| StorageError::io("write", &tmp, e))?;
    Ok((file, tmp))
}

/// Writes `contents` to a new [`tmp_path`] of `path` without syncing it:
/// the caller fdatasyncs it and then renames it over `path`
/// ([`publish_tmp`]), so `path` is whole or absent after a power loss
/// (Kafka's `PartitionMetadataFile.maybeFlush`: write, sync, atomic move),
/// while the sync itself can wait for a later flush.
///
/// # Errors
/// [`StorageError::Io`] naming the temporary file that could not be
/// created or written.
pub(crate) fn write_unsynced_tmp(
    fs: &dyn FileSystem,
    path: &Path,
    contents: &[u8],
) -> Result<(), StorageError> {
    write_tmp(fs, path, contents).map(drop)
}

/// Renames the synced `<path>.tmp` of [`write_unsynced_tmp`] over `path`.
/// A temporary file already gone while `path` exists was published by an
/// earlier flush. The directory is synced by the caller.
///
/// # Errors
/// [`StorageError::Io`] when the rename fails otherwise.
pub(crate) fn publish_tmp(
    fs: &dyn FileSystem,
    tmp: &Path,
    path: &Path,
) -> Result<(), StorageError> {
    match fs.rename(tmp, path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && path.exists() => Ok(()),
        Err(e) => Err(StorageError::io("rename", path, e)),
        Ok(()) => Ok(()),
    }
}

/// fsyncs a directory so that renames and new files in it are durable.
pub(crate) fn sync_dir(fs: &dyn FileSystem, dir: &Path) -> Result<(), StorageError> {
    fs.sync_dir(dir)
        .map_err(|e| StorageError::io("fsync", dir, e))
}

/// Encodes entries (already formatted as lines without newline) in the
/// checkpoint layout.
pub(crate) fn encode<I: IntoIterator<Item = String>>(lines: I) -> String
where
    I::IntoIter: ExactSizeIterator,
{
    let lines = lines.into_iter();
    let mut out = format!("{CHECKPOINT_VERSION}\n{}\n", lines.len());
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Reads a checkpoint file into its entry lines; `Ok(None)` if it does not
/// exist.
pub(crate) fn read(path: &Path) -> Result<Option<Vec<String>>, StorageError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StorageError::io("read", path, e)),
    };
    let malformed = |reason: String| StorageError::MalformedFile {
        path: path.to_path_buf(),
        reason,
    };
    let mut lines = text.lines();
    let version = lines.next().unwrap_or("").trim();
    if version.parse::<i32>() != Ok(CHECKPOINT_VERSION) {
        return Err(malformed(format!("unrecognized version line {version:?}")));
    }
    let count_line = lines.next().unwrap_or("").trim();
    let count: usize = count_line
        .parse()
        .map_err(|_| malformed(format!("bad entry count {count_line:?}")))?;
    let entries: Vec<String> = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
        .collect();
    if entries.len() != count {
        return Err(malformed(format!(
            "expected {count} entries, found {}",
            entries.len()
        )));
    }
    Ok(Some(entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cp");
        let text = encode(vec!["a 0 5".to_string(), "b-c 3 7".to_string()]);
        assert_eq!(text, "0\n2\na 0 5\nb-c 3 7\n");
        write_atomically(&crate::fs::RealFileSystem, &path, text.as_bytes()).unwrap();
        assert_eq!(read(&path).unwrap().unwrap(), vec!["a 0 5", "b-c 3 7"]);
        assert!(!dir.path().join("cp.tmp").exists());
        assert_eq!(read(&dir.path().join("missing")).unwrap(), None);
        std::fs::write(&path, "0\n3\na 0 5\n").unwrap();
        assert!(matches!(
            read(&path),
            Err(StorageError::MalformedFile { .. })
        ));
        std::fs::write(&path, "1\n0\n").unwrap();
        assert!(matches!(
            read(&path),
            Err(StorageError::MalformedFile { .. })
        ));
    }
}
