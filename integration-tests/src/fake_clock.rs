//! A wall clock the harness can move for one `weir` process: libfaketime
//! (Debian's `libfaketime` package) preloaded into the broker, reading its
//! offset from a per-broker file that [`write_offset`] rewrites while the
//! broker runs.
//!
//! What the broker sees: `CLOCK_REALTIME` (Rust's `SystemTime`, hence
//! record timestamps, the time index, retention, ISR lag, producer expiry)
//! is real time plus the offset in the file; `CLOCK_MONOTONIC` (`Instant`,
//! tokio's timers, sessions and elections) stays real, as when an operator
//! or NTP steps a real machine's clock. libfaketime reads the file on every
//! clock call (`FAKETIME_NO_CACHE=1`), so a new offset applies at the next
//! call. File times are not faked (`NO_FAKE_STAT=1`): as after a real clock
//! step, files written before it keep their times, so a skewed node sees
//! them older or newer by the offset; unlike a real step, the kernel
//! stamps files written while skewed with the real time.
//!
//! The library is found at run time ([`libfaketime`]); without it nothing
//! is faked and callers report the fault as not injected.

use std::path::{Path, PathBuf};

/// Environment variable that names the preload library explicitly (a path
/// to `libfaketime*.so.1`); without it the library comes from
/// `dpkg -L libfaketime`.
pub const LIBFAKETIME_ENV: &str = "WEIR_LIBFAKETIME";

/// The file names of the preload library, preferred first: the
/// multi-threaded build serialises libfaketime's own state across threads.
const LIBRARY_NAMES: [&str; 2] = ["libfaketimeMT.so.1", "libfaketime.so.1"];

/// The environment a broker with a fake clock runs with: the preload, the
/// offset file, no caching of the file, a real `CLOCK_MONOTONIC` and real
/// file times.
///
/// `library` is the preload ([`libfaketime`]); `offset_file` the file
/// [`write_offset`] rewrites.
pub fn environment(library: &Path, offset_file: &Path) -> Vec<(&'static str, PathBuf)> {
    vec![
        ("LD_PRELOAD", library.to_path_buf()),
        ("FAKETIME_TIMESTAMP_FILE", offset_file.to_path_buf()),
        ("FAKETIME_NO_CACHE", PathBuf::from("1")),
        ("FAKETIME_DONT_FAKE_MONOTONIC", PathBuf::from("1")),
        ("NO_FAKE_STAT", PathBuf::from("1")),
    ]
}

/// The preload library: `WEIR_LIBFAKETIME` when set, else the file that
/// Debian's `libfaketime` package installed ([`pick_library`] over
/// `dpkg -L libfaketime`).
///
/// # Errors
///
/// A message saying what is missing (the package, or the named file).
pub fn libfaketime() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(LIBFAKETIME_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "{LIBFAKETIME_ENV}={} is not a file",
                path.display()
            ))
        };
    }
    let output = std::process::Command::new("dpkg")
        .args(["-L", "libfaketime"])
        .output()
        .map_err(|e| format!("running dpkg -L libfaketime: {e}"))?;
    let missing = || {
        "libfaketime is not installed (apt-get install libfaketime, as scripts/test does, \
         or set WEIR_LIBFAKETIME)"
            .to_owned()
    };
    if !output.status.success() {
        return Err(missing());
    }
    pick_library(&String::from_utf8_lossy(&output.stdout))
        .filter(|p| p.is_file())
        .ok_or_else(missing)
}

/// The preload library among the paths of a package listing (one path a
/// line, as `dpkg -L` prints): the multi-threaded build if listed, else
/// the plain one; `None` when neither is.
pub fn pick_library(listing: &str) -> Option<PathBuf> {
    LIBRARY_NAMES.iter().find_map(|name| {
        listing
            .lines()
            .map(str::trim)
            .find(|line| Path::new(line).file_name().is_some_and(|f| f == *name))
            .map(PathBuf::from)
    })
}

/// libfaketime's spelling of a relative offset of `seconds`: `+120`,
/// `-30`, `+0` (a sign is required; the unit is seconds).
pub fn offset_spec(seconds: i64) -> String {
    if seconds < 0 {
        format!("{seconds}")
    } else {
        format!("+{seconds}")
    }
}

/// Sets the offset in `file` to `seconds`: written to a temporary file
/// beside it and renamed into place, so the broker never reads a partial
/// line.
///
/// # Errors
///
/// The I/O error of the write or the rename, with the path.
pub fn write_offset(file: &Path, seconds: i64) -> Result<(), String> {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, format!("{}\n", offset_spec(seconds)))
        .map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, file).map_err(|e| format!("renaming to {}: {e}", file.display()))
}

/// Whether the process `pid` has `library` mapped (read from
/// `/proc/<pid>/maps`): the preload took effect.
///
/// # Errors
///
/// A message when the map cannot be read (the process is gone).
pub fn is_loaded(pid: u32, library: &Path) -> Result<bool, String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| format!("reading /proc/{pid}/maps: {e}"))?;
    let library = std::fs::canonicalize(library).unwrap_or_else(|_| library.to_path_buf());
    let name = library.to_string_lossy();
    Ok(maps.lines().any(|line| line.ends_with(name.as_ref())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_signed_seconds() {
        assert_eq!(offset_spec(120), "+120");
        assert_eq!(offset_spec(0), "+0");
        assert_eq!(offset_spec(-45), "-45");
    }

    #[test]
    fn the_multithreaded_library_is_preferred() {
        let listing = "/.\n/usr/lib/x86_64-linux-gnu/faketime\n\
                       /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1\n\
                       /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1\n\
                       /usr/share/doc/libfaketime/README.gz\n";
        assert_eq!(
            pick_library(listing),
            Some(PathBuf::from(
                "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
            ))
        );
        let plain = "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1\n";
        assert_eq!(
            pick_library(plain),
            Some(PathBuf::from(
                "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1"
            ))
        );
        assert_eq!(pick_library("/usr/share/doc/libfaketime\n"), None);
        assert_eq!(pick_library(""), None);
    }

    #[test]
    fn an_offset_replaces_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("faketime.rc");
        write_offset(&file, 300).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "+300\n");
        write_offset(&file, -7).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "-7\n");
        assert!(!file.with_extension("tmp").exists());
    }

    #[test]
    fn this_process_does_not_have_the_library() {
        let library = Path::new("/nonexistent/libfaketime.so.1");
        assert_eq!(is_loaded(std::process::id(), library), Ok(false));
    }
}
