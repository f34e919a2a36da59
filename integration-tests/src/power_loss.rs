//! Power loss for a killed `weir` process: [`apply_power_loss`] replays the
//! sync journal a broker writes when `WEIR_TEST_SYNC_JOURNAL` is set (the
//! broker's `SyncJournalFileSystem`, whose module docs specify the format)
//! and cuts every file back to what its last `fdatasync` made durable.
//! SIGKILL keeps the page cache, so a killed broker otherwise loses nothing
//! it wrote, fsynced or not.
//!
//! The model: each file the journal knows has a durable length (0 when
//! created with truncation, the length before its last successful
//! `fdatasync`, never more than its shortest `ftruncate` since; a file first
//! seen opened keeps the length it had then). A file longer than its durable
//! length loses the tail ([`PowerLoss::Lose`]) or keeps a random part of it
//! followed by zeros up to the next 4 KiB page ([`PowerLoss::Torn`]).
//! Directories are durable (a file created and never synced comes back
//! empty, not missing); bytes overwritten below the durable length, and
//! files the journal does not know (the controller's Raft log among them),
//! are left as they are.
//!
//! Like the rest of this crate it depends on no Weir crate: the format is
//! parsed here from its documentation.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use rand::{Rng, RngCore};

/// Bytes per page of the model's torn write: a power cut leaves whole pages
/// of zeros after the last byte that reached the disk.
pub const PAGE_SIZE: u64 = 4096;

/// The suffix of the file whose presence makes the broker's every
/// `fdatasync` fail with EIO: `<journal>.fail-fsync`.
pub const FAIL_FSYNC_SUFFIX: &str = ".fail-fsync";

/// The suffix of the file whose presence makes the broker's every write
/// through its storage seam fail with EIO: `<journal>.fail-write`.
pub const FAIL_WRITE_SUFFIX: &str = ".fail-write";

/// What a power failure does to the bytes written since a file's last
/// `fdatasync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerLoss {
    /// Every unsynced byte is lost: the file is cut to its durable length.
    Lose,
    /// Writeback was under way: a random prefix of the unsynced tail (cut
    /// at any byte, not at a batch boundary) reached the disk, and the rest
    /// of its last page reads as zeros.
    Torn,
}

/// What [`apply_power_loss`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PowerLossReport {
    /// How many files were shortened (or zero-filled).
    pub files_cut: usize,
    /// Unsynced bytes that are gone or zeroed, summed over the files.
    pub bytes_lost: u64,
    /// How many files the journal knew.
    pub files_known: usize,
}

/// The path of the trigger file of `journal` (see [`FAIL_FSYNC_SUFFIX`]).
pub fn fail_fsync_trigger(journal: &Path) -> PathBuf {
    let mut name = journal.as_os_str().to_owned();
    name.push(FAIL_FSYNC_SUFFIX);
    PathBuf::from(name)
}

/// The path of the write trigger file of `journal` (see
/// [`FAIL_WRITE_SUFFIX`]).
pub fn fail_write_trigger(journal: &Path) -> PathBuf {
    let mut name = journal.as_os_str().to_owned();
    name.push(FAIL_WRITE_SUFFIX);
    PathBuf::from(name)
}

/// Applies a power loss of `mode` to every file `journal` knows, then
/// empties the journal (what is on disk now is the next baseline). The
/// process that wrote the journal must not be running. A missing journal
/// is an empty one.
///
/// # Errors
/// A message naming the line of a malformed journal (nothing is changed
/// then) or the file that could not be cut.
pub fn apply_power_loss(
    journal: &Path,
    mode: PowerLoss,
    rng: &mut dyn RngCore,
) -> Result<PowerLossReport, String> {
    let bytes = match std::fs::read(journal) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(format!("reading {}: {e}", journal.display())),
    };
    let durable = replay(&bytes).map_err(|e| format!("{}: {e}", journal.display()))?;
    let mut report = PowerLossReport {
        files_known: durable.len(),
        ..PowerLossReport::default()
    };
    for (path, durable_len) in &durable {
        let len = match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.is_file() => meta.len(),
            // Gone (removed behind the journal's back) or not a file.
            _ => continue,
        };
        if len <= *durable_len {
            continue;
        }
        let tail = len - durable_len;
        let (kept, new_len) = match mode {
            PowerLoss::Lose => (*durable_len, *durable_len),
            PowerLoss::Torn => {
                let kept = durable_len + rng.gen_range(0..=tail);
                (kept, kept.next_multiple_of(PAGE_SIZE).min(len))
            }
        };
        if kept == len {
            continue;
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| format!("opening {}: {e}", path.display()))?;
        // Cutting then extending leaves zeros between `kept` and `new_len`.
        file.set_len(kept)
            .and_then(|()| file.set_len(new_len))
            .map_err(|e| format!("truncating {}: {e}", path.display()))?;
        report.files_cut += 1;
        report.bytes_lost += len - kept;
    }
    std::fs::write(journal, b"").map_err(|e| format!("emptying {}: {e}", journal.display()))?;
    Ok(report)
}

/// Replays a journal: the durable length of every file it knows.
fn replay(bytes: &[u8]) -> Result<BTreeMap<PathBuf, u64>, String> {
    let mut durable: BTreeMap<PathBuf, u64> = BTreeMap::new();
    let mut reader = Reader { bytes, at: 0 };
    let mut line = 0usize;
    while !reader.done() {
        line += 1;
        let event = reader.event().map_err(|e| format!("line {line}: {e}"))?;
        match event {
            Event::Create(path) => {
                durable.insert(path, 0);
            }
            Event::Open(path, len) => {
                durable.entry(path).or_insert(len);
            }
            Event::Sync(path, len) => {
                durable.insert(path, len);
            }
            Event::SetLen(path, len) => {
                if let Some(d) = durable.get_mut(&path) {
                    *d = (*d).min(len);
                }
            }
            Event::Rename(from, to) => {
                let moved: Vec<(PathBuf, u64)> = take_tree(&mut durable, &from)
                    .into_iter()
                    .map(|(path, len)| {
                        let rest = path.strip_prefix(&from).unwrap_or(Path::new(""));
                        let target = if rest.as_os_str().is_empty() {
                            to.clone()
                        } else {
                            to.join(rest)
                        };
                        (target, len)
                    })
                    .collect();
                take_tree(&mut durable, &to);
                durable.extend(moved);
            }
            Event::Remove(path) => {
                durable.remove(&path);
            }
            Event::RemoveDir(path) => {
                take_tree(&mut durable, &path);
            }
        }
    }
    Ok(durable)
}

/// Removes and returns the state of `root` and of every path under it.
fn take_tree(durable: &mut BTreeMap<PathBuf, u64>, root: &Path) -> Vec<(PathBuf, u64)> {
    let under: Vec<PathBuf> = durable
        .range(root.to_path_buf()..)
        .map(|(path, _)| path)
        .take_while(|path| path.starts_with(root))
        .cloned()
        .collect();
    under
        .into_iter()
        .filter_map(|path| durable.remove(&path).map(|len| (path, len)))
        .collect()
}

/// One journal line.
#[derive(Debug, PartialEq, Eq)]
enum Event {
    Create(PathBuf),
    Open(PathBuf, u64),
    Sync(PathBuf, u64),
    SetLen(PathBuf, u64),
    Rename(PathBuf, PathBuf),
    Remove(PathBuf),
    RemoveDir(PathBuf),
}

/// Reads journal lines from bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn event(&mut self) -> Result<Event, String> {
        let op = self.word()?;
        let event = match op.as_slice() {
            b"create" => Event::Create(self.path()?),
            b"open" => Event::Open(self.path()?, self.number()?),
            b"sync" => Event::Sync(self.path()?, self.number()?),
            b"set_len" => Event::SetLen(self.path()?, self.number()?),
            b"rename" => Event::Rename(self.path()?, self.path()?),
            b"remove" => Event::Remove(self.path()?),
            b"remove_dir" => Event::RemoveDir(self.path()?),
            other => {
                return Err(format!(
                    "unknown event {:?}",
                    String::from_utf8_lossy(other)
                ))
            }
        };
        match self.bytes.get(self.at) {
            Some(b'\n') => {
                self.at += 1;
                Ok(event)
            }
            _ => Err("the line does not end after its fields".into()),
        }
    }

    /// The bytes up to the next space or newline (not consumed).
    fn word(&mut self) -> Result<Vec<u8>, String> {
        let rest = &self.bytes[self.at..];
        let end = rest
            .iter()
            .position(|b| *b == b' ' || *b == b'\n')
            .ok_or("the line has no end")?;
        self.at += end;
        Ok(rest[..end].to_vec())
    }

    /// ` <n>:<n bytes>`.
    fn path(&mut self) -> Result<PathBuf, String> {
        self.space()?;
        let rest = &self.bytes[self.at..];
        let colon = rest
            .iter()
            .take(20)
            .position(|b| *b == b':')
            .ok_or("a path has no length prefix")?;
        let n: usize = std::str::from_utf8(&rest[..colon])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or("a path's length is not a number")?;
        let path = rest
            .get(colon + 1..colon + 1 + n)
            .ok_or("a path is cut short")?;
        if n == 0 {
            return Err("an empty path".into());
        }
        self.at += colon + 1 + n;
        Ok(PathBuf::from(OsString::from_vec(path.to_vec())))
    }

    /// ` <decimal>`.
    fn number(&mut self) -> Result<u64, String> {
        self.space()?;
        let word = self.word()?;
        std::str::from_utf8(&word)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("{:?} is not a length", String::from_utf8_lossy(&word)))
    }

    fn space(&mut self) -> Result<(), String> {
        if self.bytes.get(self.at) != Some(&b' ') {
            return Err("a field is missing".into());
        }
        self.at += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use std::os::unix::ffi::OsStrExt;

    /// Journal lines as the broker writes them.
    struct Journal(Vec<u8>);

    impl Journal {
        fn line(&mut self, op: &str, paths: &[&Path], len: Option<u64>) -> &mut Self {
            self.0.extend_from_slice(op.as_bytes());
            for path in paths {
                let bytes = path.as_os_str().as_bytes();
                self.0
                    .extend_from_slice(format!(" {}:", bytes.len()).as_bytes());
                self.0.extend_from_slice(bytes);
            }
            if let Some(len) = len {
                self.0.extend_from_slice(format!(" {len}").as_bytes());
            }
            self.0.push(b'\n');
            self
        }
    }

    fn write(path: &Path, len: usize) {
        std::fs::write(path, vec![b'x'; len]).unwrap();
    }

    fn len(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().len()
    }

    fn rng() -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(7)
    }

    #[test]
    fn lose_cuts_every_file_to_its_last_sync() {
        let dir = tempfile::tempdir().unwrap();
        let (synced, fresh, shrunk, old, untouched) = (
            dir.path().join("synced.log"),
            dir.path().join("fresh.log"),
            dir.path().join("shrunk.log"),
            dir.path().join("old.log"),
            dir.path().join("untouched.log"),
        );
        for (path, n) in [
            (&synced, 300),
            (&fresh, 50),
            (&shrunk, 90),
            (&old, 500),
            (&untouched, 70),
        ] {
            write(path, n);
        }
        let journal = dir.path().join("sync-journal");
        let mut j = Journal(Vec::new());
        j.line("create", &[&synced], None)
            .line("sync", &[&synced], Some(100))
            .line("sync", &[&synced], Some(200))
            .line("create", &[&fresh], None)
            .line("create", &[&shrunk], None)
            .line("sync", &[&shrunk], Some(80))
            .line("set_len", &[&shrunk], Some(40))
            // First seen at 400 bytes, then again at 450 (a reopen): the
            // first sighting is the baseline.
            .line("open", &[&old], Some(400))
            .line("open", &[&old], Some(450));
        std::fs::write(&journal, &j.0).unwrap();

        let report = apply_power_loss(&journal, PowerLoss::Lose, &mut rng()).unwrap();
        assert_eq!(len(&synced), 200);
        assert_eq!(len(&fresh), 0);
        assert_eq!(len(&shrunk), 40);
        assert_eq!(len(&old), 400);
        assert_eq!(len(&untouched), 70, "a file the journal does not know");
        assert_eq!(
            report,
            PowerLossReport {
                files_cut: 4,
                bytes_lost: 100 + 50 + 50 + 100,
                files_known: 4,
            }
        );
        assert_eq!(std::fs::read(&journal).unwrap(), b"", "a new baseline");
        // Applying it again changes nothing.
        let again = apply_power_loss(&journal, PowerLoss::Lose, &mut rng()).unwrap();
        assert_eq!(again, PowerLossReport::default());
    }

    #[test]
    fn renames_move_state_and_removals_drop_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("t-0")).unwrap();
        let (tmp, cp, seg, gone) = (
            root.join("cp.tmp"),
            root.join("cp"),
            root.join("t-0/0.log"),
            root.join("gone"),
        );
        write(&tmp, 10);
        write(&seg, 60);
        write(&gone, 5);
        let mut j = Journal(Vec::new());
        // A checkpoint replaced by rename: the old file's state goes away
        // with its name, the new one's follows it.
        j.line("create", &[&cp], None)
            .line("create", &[&tmp], None)
            .line("sync", &[&tmp], Some(10))
            .line("rename", &[&tmp, &cp], None)
            // A partition directory renamed for deletion, then re-created.
            .line("create", &[&seg], None)
            .line("sync", &[&seg], Some(20))
            .line(
                "rename",
                &[&root.join("t-0"), &root.join("t-0.x-delete")],
                None,
            )
            .line("create", &[&gone], None)
            .line("remove", &[&gone], None);
        std::fs::rename(&tmp, &cp).unwrap();
        std::fs::rename(root.join("t-0"), root.join("t-0.x-delete")).unwrap();
        let moved = root.join("t-0.x-delete/0.log");
        // A new file at the old path: the journal knows nothing of it.
        std::fs::create_dir(root.join("t-0")).unwrap();
        write(&seg, 30);
        let durable = replay(&j.0).unwrap();
        assert_eq!(
            durable,
            BTreeMap::from([(cp.clone(), 10), (moved.clone(), 20)])
        );
        let journal = root.join("journal");
        std::fs::write(&journal, &j.0).unwrap();
        let report = apply_power_loss(&journal, PowerLoss::Lose, &mut rng()).unwrap();
        assert_eq!(
            (len(&cp), len(&moved), len(&seg), len(&gone)),
            (10, 20, 30, 5)
        );
        assert_eq!(report.files_cut, 1);

        // remove_dir drops everything under the directory, and only that.
        let mut j = Journal(Vec::new());
        let sibling = root.join("t-00/0.log");
        j.line("create", &[&moved], None)
            .line("create", &[&sibling], None)
            .line("remove_dir", &[&root.join("t-0.x-delete")], None);
        assert_eq!(replay(&j.0).unwrap(), BTreeMap::from([(sibling, 0)]));
    }

    #[test]
    fn torn_keeps_a_random_prefix_then_zeros_to_the_page() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        let journal = dir.path().join("journal");
        let mut outcomes = std::collections::BTreeSet::new();
        let mut rng = rng();
        for _ in 0..64 {
            std::fs::write(&path, vec![0xAB; 20_000]).unwrap();
            let mut j = Journal(Vec::new());
            j.line("create", &[&path], None)
                .line("sync", &[&path], Some(5_000));
            std::fs::write(&journal, &j.0).unwrap();
            let report = apply_power_loss(&journal, PowerLoss::Torn, &mut rng).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert!(bytes.len() >= 5_000 && bytes.len() <= 20_000);
            assert!(bytes[..5_000].iter().all(|b| *b == 0xAB), "the synced part");
            let kept = bytes.iter().position(|b| *b != 0xAB).unwrap_or(bytes.len());
            assert!(bytes[kept..].iter().all(|b| *b == 0), "zeros after the cut");
            assert!(
                bytes.len() as u64 == 20_000 || bytes.len() as u64 % PAGE_SIZE == 0,
                "zeros up to a page boundary: {}",
                bytes.len()
            );
            assert!(bytes.len() - kept < PAGE_SIZE as usize);
            assert_eq!(report.bytes_lost, 20_000 - kept as u64);
            outcomes.insert(kept);
        }
        assert!(outcomes.len() > 32, "cuts at arbitrary bytes: {outcomes:?}");
        assert!(
            outcomes.iter().any(|k| *k as u64 % PAGE_SIZE != 0),
            "not page aligned"
        );
    }

    #[test]
    fn paths_are_read_by_their_length_whatever_they_hold() {
        let odd = Path::new("/tmp/a b\nsync 3:/x 0\n");
        let mut j = Journal(Vec::new());
        j.line("create", &[odd], None).line("sync", &[odd], Some(4));
        assert_eq!(
            replay(&j.0).unwrap(),
            BTreeMap::from([(odd.to_path_buf(), 4)])
        );
    }

    #[test]
    fn a_malformed_journal_is_refused_and_nothing_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        write(&path, 10);
        let p = path.as_os_str().len();
        let shown = path.display();
        for (bad, why) in [
            (format!("create {p}:{shown}"), "no newline"),
            (format!("sync {p}:{shown}\n"), "no length"),
            (format!("sync {p}:{shown} x\n"), "length not a number"),
            (format!("create {}:{shown}\n", p + 50), "path cut short"),
            (format!("create {shown}\n"), "no length prefix"),
            (format!("chmod {p}:{shown}\n"), "unknown event"),
            (format!("create {p}:{shown} 3\n"), "extra field"),
        ] {
            let journal = dir.path().join("journal");
            let text = format!("create {p}:{shown}\n{bad}");
            std::fs::write(&journal, &text).unwrap();
            let error = apply_power_loss(&journal, PowerLoss::Lose, &mut rng()).expect_err(why);
            assert!(error.contains("line 2"), "{why}: {error}");
            assert_eq!(len(&path), 10, "{why}");
            assert_eq!(std::fs::read_to_string(&journal).unwrap(), text, "{why}");
        }
    }

    #[test]
    fn a_missing_journal_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let report =
            apply_power_loss(&dir.path().join("none"), PowerLoss::Lose, &mut rng()).unwrap();
        assert_eq!(report, PowerLossReport::default());
    }
}
