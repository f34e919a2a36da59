//! Record-level validation of compressed batches on produce (the part of
//! Kafka's `LogValidator` that needs the codecs, which the storage crate
//! does not carry).
//!
//! Storage validates headers, CRCs and uncompressed records itself. A
//! compressed batch is decompressed here, bounded by
//! [`MAX_DECOMPRESSED_BATCH_BYTES`] so a small "decompression bomb" cannot
//! exhaust memory, and its records are checked with
//! [`weir_storage::batch::validate_records`]. The stored batch stays exactly
//! as produced: the decompressed bytes are only read and dropped.

use std::io::Read;

use weir_storage::batch::{records_section, validate_records};
use weir_storage::{RecordBatchHeader, StorageError};

/// Largest decompressed records section accepted, bytes (128 MiB). Kafka has
/// no such limit but streams the records; Weir checks them in memory.
pub const MAX_DECOMPRESSED_BATCH_BYTES: usize = 128 << 20;

/// Compression codec ids in batch attributes (KIP-110 for zstd).
const NONE: u8 = 0;
const GZIP: u8 = 1;
const SNAPPY: u8 = 2;
const LZ4: u8 = 3;
const ZSTD: u8 = 4;

/// The 16-byte header of xerial snappy-java streams, which the Java client
/// and librdkafka produce.
const XERIAL_SNAPPY_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_BYTES: usize = 16;

fn invalid(reason: impl Into<String>) -> StorageError {
    StorageError::InvalidRecord {
        reason: reason.into(),
    }
}

/// Checks the records of one batch whose header is `header`. Uncompressed
/// batches are left to storage (which validates them on append).
///
/// # Errors
/// [`StorageError::InvalidRecord`] for an unknown codec, a payload that does
/// not decompress, one larger than [`MAX_DECOMPRESSED_BATCH_BYTES`], or
/// records that fail [`validate_records`].
pub fn validate_compressed_batch(
    header: &RecordBatchHeader,
    batch: &[u8],
) -> Result<(), StorageError> {
    let payload = records_section(batch);
    let records = match header.compression_codec() {
        NONE => return Ok(()),
        GZIP => read_bounded(flate2::read::GzDecoder::new(payload), "gzip")?,
        SNAPPY => snappy(payload)?,
        LZ4 => {
            let decoder =
                lz4::Decoder::new(payload).map_err(|e| invalid(format!("lz4 frame: {e}")))?;
            read_bounded(decoder, "lz4")?
        }
        ZSTD => {
            let decoder = zstd::stream::read::Decoder::new(payload)
                .map_err(|e| invalid(format!("zstd frame: {e}")))?;
            read_bounded(decoder, "zstd")?
        }
        other => return Err(invalid(format!("unknown compression codec {other}"))),
    };
    validate_records(header, &records)
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
fn snappy(payload: &[u8]) -> Result<Vec<u8>, StorageError> {
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
        .get(XERIAL_HEADER_BYTES..)
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
    use std::io::Write;

    use super::*;

    #[test]
    fn gzip_bomb_is_refused_without_decompressing_it_all() {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..(MAX_DECOMPRESSED_BATCH_BYTES >> 20) + 1 {
            encoder.write_all(&zeros).unwrap();
        }
        let compressed = encoder.finish().unwrap();
        let err = read_bounded(flate2::read::GzDecoder::new(&compressed[..]), "gzip").unwrap_err();
        assert!(err.to_string().contains("exceed"), "{err}");
    }

    #[test]
    fn snappy_xerial_and_raw_round_trip() {
        let data = b"hello snappy hello snappy hello snappy".repeat(100);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(snappy(&raw).unwrap(), data);
        let mut xerial = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
        for chunk in data.chunks(1000) {
            let block = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
            xerial.extend_from_slice(&(block.len() as u32).to_be_bytes());
            xerial.extend_from_slice(&block);
        }
        assert_eq!(snappy(&xerial).unwrap(), data);
        assert!(snappy(&xerial[..xerial.len() - 3]).is_err());
        assert!(snappy(b"\x82SNAPPY\x00").is_err());
    }
}
