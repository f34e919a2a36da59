//! Weir's decoders under a coverage-guided fuzzer (issue 17).
//!
//! Each target is a `fuzz_<target>(data: &[u8])` function in the crate that
//! owns the decoder, compiled with that crate's `fuzzing` feature:
//!
//! | target | function | what it decodes |
//! |---|---|---|
//! | `request` | `weir_protocol_compat::fuzz::fuzz_request` | a request frame: API table, header, request guard, every request decoder, error answers |
//! | `record_batch` | `weir_storage::fuzz::fuzz_record_batch` | produced or replicated batches: `RecordBatchHeader`, record validation (`ValidatedRecords`), decompression |
//! | `consumer_offsets` | `weir_broker::fuzz::fuzz_consumer_offsets` | `__consumer_offsets` keys and values and the group loader's replay |
//! | `quorum_frame` | `weir_controller::fuzz::fuzz_quorum_frame` | the quorum transport's frames, both directions, and an observer's replay |
//! | `metadata_log` | `weir_controller::fuzz::fuzz_metadata_log` | `metadata.log` frames and their records' replay, the snapshot and vote files |
//!
//! The property of every target: no input panics, and memory stays
//! bounded. `scripts/fuzz` runs each target under AFL++ (cargo-afl, on
//! stable Rust) from the committed corpus in `fuzz/corpus/<target>/`; this
//! crate's tests replay that corpus, the regression inputs in
//! `fuzz/regressions/<target>/` and the freshly generated seeds through the
//! same functions on every `cargo test`, with a heap bound
//! ([`MAX_HEAP_BYTES_PER_INPUT`]). `weir-fuzz seeds` rewrites the
//! generated part of the corpus; `weir-fuzz replay <target> <file>...`
//! runs inputs (an AFL crash, say) without AFL.

use std::path::{Path, PathBuf};

/// One fuzz target.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// The target's name: its corpus directory and its binary `fuzz_<name>`.
    pub name: &'static str,
    /// The function under test.
    pub run: fn(&[u8]),
    /// Valid inputs made by Weir's own encoders, named by file.
    pub seeds: fn() -> Vec<(String, Vec<u8>)>,
}

/// Every target, in the order `scripts/fuzz` runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "request",
        run: weir_protocol_compat::fuzz::fuzz_request,
        seeds: request_seeds,
    },
    Target {
        name: "record_batch",
        run: weir_storage::fuzz::fuzz_record_batch,
        seeds: weir_storage::fuzz::record_batch_seeds,
    },
    Target {
        name: "consumer_offsets",
        run: weir_broker::fuzz::fuzz_consumer_offsets,
        seeds: weir_broker::fuzz::consumer_offsets_seeds,
    },
    Target {
        name: "quorum_frame",
        run: weir_controller::fuzz::fuzz_quorum_frame,
        seeds: weir_controller::fuzz::quorum_frame_seeds,
    },
    Target {
        name: "metadata_log",
        run: weir_controller::fuzz::fuzz_metadata_log,
        seeds: weir_controller::fuzz::metadata_log_seeds,
    },
];

/// The most heap one input may hold at once, in bytes (512 MiB), checked by
/// the corpus replay tests. The largest legitimate use is decompression:
/// at most 128 MiB per batch (`MAX_DECOMPRESSED_BATCH_BYTES`), which a
/// growing `Vec` may hold in twice that capacity. `scripts/fuzz` gives
/// AFL++ a 1 GiB address-space limit (`-m 1024`) for the same bound.
pub const MAX_HEAP_BYTES_PER_INPUT: usize = 512 << 20;

/// The target named `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// `fuzz/corpus/<target>`: the committed seeds AFL++ starts from.
pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

/// `fuzz/regressions/<target>`: inputs that once crashed a target, kept
/// with the fix.
pub fn regressions_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("regressions")
        .join(target)
}

/// Every file of `dir` with its bytes, sorted by name; empty when `dir`
/// does not exist.
///
/// # Errors
/// An I/O error reading an existing directory or file.
pub fn read_inputs(dir: &Path) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut inputs = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.is_file() {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            inputs.push((name, std::fs::read(&path)?));
        }
    }
    inputs.sort();
    Ok(inputs)
}

/// Seeds of the `request` target: a frame for every served version of every
/// API (`weir_protocol_compat::fuzz::request_seeds`) plus the captured and
/// hand-built request frames of `protocol-compat/tests/vectors/` (real
/// clients' frames, and Produce v0, which the table advertises but does
/// not serve).
pub fn request_seeds() -> Vec<(String, Vec<u8>)> {
    use weir_protocol_compat::test_vectors::{parse_hex, Direction, VectorName};
    let mut seeds = weir_protocol_compat::fuzz::request_seeds();
    let vectors = Path::new(env!("CARGO_MANIFEST_DIR")).join("../protocol-compat/tests/vectors");
    for (name, bytes) in read_inputs(&vectors).unwrap_or_default() {
        let Ok(vector) = VectorName::parse(&name) else {
            continue;
        };
        if vector.direction != Direction::Request {
            continue;
        }
        let frame = if vector.is_hex {
            match std::str::from_utf8(&bytes).ok().map(parse_hex) {
                Some(Ok(frame)) => frame,
                _ => continue,
            }
        } else {
            bytes
        };
        let stem = name.rsplit_once('.').map_or(name.as_str(), |(s, _)| s);
        seeds.push((format!("vector_{stem}.bin"), frame));
    }
    seeds
}
