//! File primitives for the metadata log directory: CRC-checked frames and
//! atomic whole-file replacement.
//!
//! Frame layout (all integers big-endian):
//!
//! ```text
//! length: u32   number of payload bytes
//! crc:    u32   CRC-32C (Castagnoli) of the payload
//! payload: [u8; length]
//! ```
//!
//! A frame whose header or payload is cut short, or whose CRC does not match,
//! ends the valid prefix of a file: everything from it on is a torn tail
//! (a write interrupted by a crash) and is truncated on open.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Bytes of frame header before the payload.
pub(crate) const FRAME_HEADER_BYTES: usize = 8;

/// Largest payload accepted when reading (a larger length is treated as a
/// torn or corrupt frame): 64 MiB.
pub(crate) const MAX_FRAME_PAYLOAD_BYTES: usize = 64 * 1024 * 1024;

/// Appends one frame holding `payload` to `out`.
pub(crate) fn encode_frame(payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    out.extend_from_slice(payload);
}

/// Splits `bytes` into frame payloads with their start positions, stopping
/// at the first torn or corrupt frame. Returns the payloads and the length
/// of the valid prefix in bytes.
pub(crate) fn decode_frames(bytes: &[u8]) -> (Vec<(u64, &[u8])>, u64) {
    let mut frames = Vec::new();
    let mut pos = 0usize;
    while let Some(header) = bytes.get(pos..pos + FRAME_HEADER_BYTES) {
        let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
        if len > MAX_FRAME_PAYLOAD_BYTES {
            break;
        }
        let start = pos + FRAME_HEADER_BYTES;
        let Some(payload) = bytes.get(start..start + len) else {
            break;
        };
        if crc32c::crc32c(payload) != crc {
            break;
        }
        frames.push((pos as u64, payload));
        pos = start + len;
    }
    (frames, pos as u64)
}

/// Fsyncs a directory so a rename or file creation in it is durable.
///
/// # Errors
///
/// The underlying open or fsync error.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replaces `dir/name` with `bytes` atomically: writes `dir/name.tmp`,
/// fsyncs it, renames it over `dir/name` and fsyncs `dir`. After a crash the
/// file holds either the old or the new contents, never a mix.
///
/// # Errors
///
/// The underlying I/O error; the old file is then untouched.
pub(crate) fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)
}

/// Reads `dir/name`, or `None` if it does not exist.
///
/// # Errors
///
/// Any I/O error other than "not found".
pub(crate) fn read_optional(dir: &Path, name: &str) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(dir.join(name)) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_stop_at_damage() {
        let mut bytes = Vec::new();
        encode_frame(b"first", &mut bytes);
        let second_at = bytes.len() as u64;
        encode_frame(b"second", &mut bytes);
        let full = bytes.len() as u64;

        let (frames, valid) = decode_frames(&bytes);
        assert_eq!(valid, full);
        assert_eq!(
            frames,
            vec![(0, &b"first"[..]), (second_at, &b"second"[..])]
        );

        // Cut inside the second payload, then inside its header.
        for cut in [full as usize - 2, second_at as usize + 3] {
            let (frames, valid) = decode_frames(&bytes[..cut]);
            assert_eq!(valid, second_at);
            assert_eq!(frames.len(), 1);
        }

        // Flip a payload byte of the second frame: CRC mismatch.
        let mut corrupt = bytes.clone();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        assert_eq!(decode_frames(&corrupt).1, second_at);
    }

    #[test]
    fn atomic_write_replaces_contents() {
        let dir = tempfile::tempdir().unwrap();
        write_atomically(dir.path(), "f", b"one").unwrap();
        write_atomically(dir.path(), "f", b"two").unwrap();
        assert_eq!(read_optional(dir.path(), "f").unwrap().unwrap(), b"two");
        assert!(!dir.path().join("f.tmp").exists());
        assert_eq!(read_optional(dir.path(), "missing").unwrap(), None);
    }
}

/// Parses one JSON document of the metadata directory (`what` names it in
/// errors).
///
/// # Errors
///
/// `InvalidData` when `bytes` is not the expected JSON. Metadata written
/// before Weir built openraft with `single-term-leader` (one leader per
/// term, as KRaft's one leader per epoch) holds leader ids of the form
/// `{"term":T,"node_id":N}`; those are refused with a message that says so
/// rather than read with the voted-for node dropped (a vote that forgot
/// whom it voted for could vote twice in one term).
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    what: &str,
    bytes: &[u8],
) -> io::Result<T> {
    if is_legacy_leader_id(bytes) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{what}: written by an older Weir whose metadata quorum allowed several leaders \
                 per term (leader ids with a node_id); this version keeps one leader per term and \
                 has no upgrade path for it yet: run the Weir that wrote it (the directory is left \
                 as it is)"
            ),
        ));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{what}: {e}")))
}

/// True when `bytes` holds a leader id of openraft's default mode,
/// `"leader_id":{"term":T,"node_id":N}`.
fn is_legacy_leader_id(bytes: &[u8]) -> bool {
    const MARK: &[u8] = b"\"leader_id\":{\"term\":";
    bytes.windows(MARK.len()).enumerate().any(|(at, w)| {
        w == MARK && {
            let rest = &bytes[at + MARK.len()..];
            let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            rest[digits..].starts_with(b",\"node_id\":")
        }
    })
}

#[cfg(test)]
mod legacy_tests {
    use super::*;

    #[test]
    fn leader_ids_of_the_default_openraft_mode_are_refused_by_name() {
        let old_vote = br#"{"leader_id":{"term":3,"node_id":2},"committed":true}"#;
        let err = parse_json::<serde_json::Value>("vote.json", old_vote).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("one leader per term"), "{err}");
        let old_entry = br#"{"Entry":{"log_id":{"leader_id":{"term":12,"node_id":1},"index":4}}}"#;
        assert!(parse_json::<serde_json::Value>("metadata.log", old_entry).is_err());

        let new_vote = br#"{"leader_id":{"term":3,"voted_for":2},"committed":true}"#;
        assert!(parse_json::<serde_json::Value>("vote.json", new_vote).is_ok());
        let new_entry = br#"{"Entry":{"log_id":{"leader_id":12,"index":4}}}"#;
        assert!(parse_json::<serde_json::Value>("metadata.log", new_entry).is_ok());
    }
}
