//! The record batch compression codecs (attributes bits 0-2): bounded
//! decompression of a batch's records section, used to validate produced
//! compressed batches and by the [`LogCleaner`](crate::log::cleaner) to read
//! them, and compression with the same codec, used by the cleaner to write a
//! compacted batch back (Kafka's `Compression` / `CompressionType`).
//!
//! Decompression is bounded by [`MAX_DECOMPRESSED_BATCH_BYTES`] so a small
//! "decompression bomb" cannot exhaust memory. Snappy reads both xerial
//! framing (what the Java client and librdkafka write) and one raw block, and
//! writes xerial framing as snappy-java's `SnappyOutputStream` does. LZ4 uses
//! the standard LZ4 frame with independent blocks (Kafka's
//! `Lz4BlockOutputStream`). This module knows nothing of records.

use std::io::{Read, Write};

use crate::batch::{records_section, validate_records, RecordBatchHeader};
use crate::error::StorageError;

/// Largest decompressed records section accepted, bytes (128 MiB). Kafka has
/// no such limit but streams the records; Weir holds them in memory.
pub const MAX_DECOMPRESSED_BATCH_BYTES: usize = 128 << 20;

/// Codec id: no compression.
pub const NONE: u8 = 0;
/// Codec id: gzip.
pub const GZIP: u8 = 1;
/// Codec id: snappy.
pub const SNAPPY: u8 = 2;
/// Codec id: lz4.
pub const LZ4: u8 = 3;
/// Codec id: zstd (KIP-110).
pub const ZSTD: u8 = 4;

/// The 8-byte magic of xerial snappy-java streams.
const XERIAL_SNAPPY_MAGIC: &[u8] = b"\x82SNAPPY\x00";
/// The whole xerial header: magic, version 1, compatible version 1.
const XERIAL_HEADER: &[u8] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
/// Uncompressed bytes per xerial block (snappy-java's default, 32 KiB).
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;

fn invalid(reason: impl Into<String>) -> StorageError {
    StorageError::InvalidRecord {
        reason: reason.into(),
    }
}

/// Checks the records of one produced batch whose header is `header`
/// (`batch` is the whole batch). Uncompressed batches are left to storage,
/// which validates them on append. When `require_keys` (the topic's
/// `cleanup.policy` includes `compact`) every record must have a key.
///
/// # Errors
/// [`StorageError::InvalidRecord`] for an unknown codec, a payload that does
/// not decompress, one larger than [`MAX_DECOMPRESSED_BATCH_BYTES`], or
/// records that fail [`validate_records`];
/// [`StorageError::RecordWithoutKey`] for a keyless record when
/// `require_keys`, naming `topic_partition`.
pub fn validate_compressed_batch(
    header: &RecordBatchHeader,
    batch: &[u8],
    require_keys: Option<&crate::TopicPartition>,
) -> Result<(), StorageError> {
    if header.compression_codec() == NONE {
        return Ok(());
    }
    let records = decompress(header.compression_codec(), records_section(batch))?;
    validate_records(header, &records)?;
    if let Some(tp) = require_keys {
        crate::batch::ensure_record_keys(&records, tp)?;
    }
    Ok(())
}

/// Decompresses a records section compressed with `codec` (1-4), at most
/// [`MAX_DECOMPRESSED_BATCH_BYTES`] bytes. Codec 0 returns a copy.
///
/// # Errors
/// [`StorageError::InvalidRecord`] for an unknown codec, a payload that does
/// not decompress or one that decompresses to more than the limit.
pub fn decompress(codec: u8, payload: &[u8]) -> Result<Vec<u8>, StorageError> {
    match codec {
        NONE => Ok(payload.to_vec()),
        GZIP => read_bounded(flate2::read::GzDecoder::new(payload), "gzip"),
        SNAPPY => snappy_decompress(payload),
        LZ4 => {
            let decoder =
                lz4::Decoder::new(payload).map_err(|e| invalid(format!("lz4 frame: {e}")))?;
            read_bounded(decoder, "lz4")
        }
        ZSTD => {
            let decoder = zstd::stream::read::Decoder::new(payload)
                .map_err(|e| invalid(format!("zstd frame: {e}")))?;
            read_bounded(decoder, "zstd")
        }
        other => Err(invalid(format!("unknown compression codec {other}"))),
    }
}

/// Compresses a records section with `codec` (0-4; 0 returns a copy) at the
/// codec's default level.
///
/// # Errors
/// [`StorageError::InvalidRecord`] for an unknown codec; the encoders
/// writing to memory do not otherwise fail, but any error they report is
/// returned as [`StorageError::InvalidRecord`] too.
pub fn compress(codec: u8, records: &[u8]) -> Result<Vec<u8>, StorageError> {
    let failed = |name: &str, e: std::io::Error| invalid(format!("{name} compression: {e}"));
    match codec {
        NONE => Ok(records.to_vec()),
        GZIP => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(records).map_err(|e| failed("gzip", e))?;
            encoder.finish().map_err(|e| failed("gzip", e))
        }
        SNAPPY => {
            let mut out = XERIAL_HEADER.to_vec();
            let mut encoder = snap::raw::Encoder::new();
            for chunk in records.chunks(XERIAL_BLOCK_BYTES) {
                let block = encoder
                    .compress_vec(chunk)
                    .map_err(|e| failed("snappy", std::io::Error::other(e)))?;
                out.extend_from_slice(&(block.len() as u32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            Ok(out)
        }
        LZ4 => {
            let mut encoder = lz4::EncoderBuilder::new()
                .block_mode(lz4::BlockMode::Independent)
                .build(Vec::new())
                .map_err(|e| failed("lz4", e))?;
            encoder.write_all(records).map_err(|e| failed("lz4", e))?;
            let (out, result) = encoder.finish();
            result.map_err(|e| failed("lz4", e))?;
            Ok(out)
        }
        ZSTD => zstd::encode_all(records, 0).map_err(|e| failed("zstd", e)),
        other => Err(invalid(format!("unknown compression codec {other}"))),
    }
}

fn read_bounded(reader: impl Read, codec: &str) -> Result<Vec<u8>, StorageError> {
    let mut out = Vec::new();
    reader
        .take(MAX_DECOMPRESSED_BATCH_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| invalid(format!("{codec} payload does not decompress: {e}")))?;
    if out.len() > MAX_DECOMPRESSED_BATCH_BYTES {
        return Err(too_large());
    }
    Ok(out)
}

fn too_large() -> StorageError {
    invalid(format!(
        "decompressed records exceed {MAX_DECOMPRESSED_BATCH_BYTES} bytes"
    ))
}

/// Decompresses xerial-framed snappy (16-byte header, then blocks of a
/// 4-byte big-endian length and a raw snappy block), or one raw snappy block.
fn snappy_decompress(payload: &[u8]) -> Result<Vec<u8>, StorageError> {
    let mut decoder = snap::raw::Decoder::new();
    let mut out = Vec::new();
    let mut decompress_block = |block: &[u8], out: &mut Vec<u8>| -> Result<(), StorageError> {
        let len =
            snap::raw::decompress_len(block).map_err(|e| invalid(format!("snappy block: {e}")))?;
        if out.len() + len > MAX_DECOMPRESSED_BATCH_BYTES {
            return Err(too_large());
        }
        let start = out.len();
        out.resize(start + len, 0);
        let written = decoder
            .decompress(block, &mut out[start..])
            .map_err(|e| invalid(format!("snappy block: {e}")))?;
        out.truncate(start + written);
        Ok(())
    };
    if !payload.starts_with(XERIAL_SNAPPY_MAGIC) {
        decompress_block(payload, &mut out)?;
        return Ok(out);
    }
    let mut rest = payload
        .get(XERIAL_HEADER.len()..)
        .ok_or_else(|| invalid("truncated snappy stream header"))?;
    while !rest.is_empty() {
        let len_bytes: [u8; 4] = rest
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| invalid("truncated snappy block length"))?;
        let len = u32::from_be_bytes(len_bytes) as usize;
        let block = rest
            .get(4..4 + len)
            .ok_or_else(|| invalid("snappy block longer than the batch"))?;
        decompress_block(block, &mut out)?;
        rest = &rest[4 + len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_bomb_is_refused_without_decompressing_it_all() {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..(MAX_DECOMPRESSED_BATCH_BYTES >> 20) + 1 {
            encoder.write_all(&zeros).unwrap();
        }
        let compressed = encoder.finish().unwrap();
        let err = decompress(GZIP, &compressed).unwrap_err();
        assert!(err.to_string().contains("exceed"), "{err}");
    }

    #[test]
    fn snappy_xerial_and_raw_round_trip() {
        let data = b"hello snappy hello snappy hello snappy".repeat(100);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(snappy_decompress(&raw).unwrap(), data);
        let xerial = compress(SNAPPY, &data).unwrap();
        assert!(xerial.starts_with(XERIAL_HEADER));
        assert_eq!(snappy_decompress(&xerial).unwrap(), data);
        assert!(snappy_decompress(&xerial[..xerial.len() - 3]).is_err());
        assert!(snappy_decompress(b"\x82SNAPPY\x00").is_err());
    }

    #[test]
    fn every_codec_round_trips_and_really_compresses() {
        let data = b"key-0001 value value value value ".repeat(4000);
        for codec in [GZIP, SNAPPY, LZ4, ZSTD] {
            let compressed = compress(codec, &data).unwrap();
            assert!(compressed.len() < data.len() / 4, "codec {codec}");
            assert_eq!(
                decompress(codec, &compressed).unwrap(),
                data,
                "codec {codec}"
            );
        }
        assert!(compress(5, &data).is_err());
        assert!(decompress(7, &data).is_err());
    }
}
