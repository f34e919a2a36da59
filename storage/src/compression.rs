//! The record batch compression codecs (attributes bits 0-2): streaming
//! validation of produced compressed batches, bounded decompression of a
//! batch's records section for the [`LogCleaner`](crate::log::cleaner) and
//! the group coordinator, and compression with the same codec, used by the
//! cleaner to write a compacted batch back (Kafka's `Compression` /
//! `CompressionType`).
//!
//! Validation streams, as Kafka's `LogValidator` does with
//! `DefaultRecordBatch.skipKeyValueIterator`: records are decompressed and
//! checked one at a time and the scan stops at the first broken record, so
//! a "decompression bomb" of zeros fails at its first record instead of
//! after inflating. What a whole Produce request may decompress is bounded
//! by a [`DecompressionBudget`] ([`MAX_DECOMPRESSED_REQUEST_BYTES`], a Weir
//! limit Kafka does not have), so a bomb of well-formed records costs its
//! sender a bounded amount of work. Memory is one record at a time.
//!
//! Whole-section decompression ([`decompress`]) is bounded by
//! [`MAX_DECOMPRESSED_BATCH_BYTES`]. Snappy reads both xerial framing (what
//! the Java client and librdkafka write) and one raw block, and writes
//! xerial framing as snappy-java's `SnappyOutputStream` does. LZ4 uses the
//! standard LZ4 frame with independent blocks (Kafka's
//! `Lz4BlockOutputStream`).

use std::io::{BufRead, BufReader, Read, Write};

use crate::batch::{
    records_section, validate_record_source, RecordBatchHeader, RecordFault, RecordRules,
    RecordSource, ValidatedRecords,
};
use crate::error::StorageError;

/// Largest decompressed records section [`decompress`] returns, bytes
/// (128 MiB). Kafka has no such limit but streams the records; the readers
/// of whole sections (the cleaner, the group coordinator) hold them in
/// memory.
pub const MAX_DECOMPRESSED_BATCH_BYTES: usize = 128 << 20;

/// Most bytes the compressed batches of one Produce request may decompress
/// to in total during validation, bytes (128 MiB). A Weir limit (Kafka
/// streams without one): beyond it the batch being validated is refused
/// with INVALID_RECORD, so a request of bombs costs at most this much
/// decompression, on a validation thread. Legitimate requests are far
/// below it: a request is at most `socket.request.max.bytes` and a batch at
/// most `max.message.bytes` (1 MiB) compressed.
pub const MAX_DECOMPRESSED_REQUEST_BYTES: u64 = 128 << 20;

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
/// A snappy block can expand at most about 21 times (a 3-byte copy tag
/// yields 64 bytes); a block claiming more than this ratio of its size is
/// refused before anything is allocated for it.
const SNAPPY_MAX_EXPANSION: usize = 32;
/// Decompressed bytes read ahead of the record parser, bytes.
const STREAM_BUFFER_BYTES: usize = 32 * 1024;

fn invalid(reason: impl Into<String>) -> StorageError {
    StorageError::InvalidRecord {
        reason: reason.into(),
    }
}

/// What the compressed batches of one request may still decompress to, in
/// bytes (see [`MAX_DECOMPRESSED_REQUEST_BYTES`]).
#[derive(Debug)]
pub struct DecompressionBudget {
    limit: u64,
    remaining: u64,
}

impl DecompressionBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Self {
        DecompressionBudget {
            limit,
            remaining: limit,
        }
    }

    /// Bytes still allowed.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    fn take(&mut self, bytes: usize) -> Result<(), RecordFault> {
        match self.remaining.checked_sub(bytes as u64) {
            Some(left) => {
                self.remaining = left;
                Ok(())
            }
            None => Err(RecordFault::OverBudget { limit: self.limit }),
        }
    }
}

/// Validates the records of one produced batch whose header is `header`
/// (`batch` is the whole batch) by streaming them out of its codec, as
/// Kafka's `LogValidator.validateMessagesAndAssignOffsetsCompressed` does:
/// the structure rules of [`crate::batch::validate_records`] and the record
/// rules of `rules` ([`crate::batch::validate_records_with`]), stopping at
/// the first broken record, then that nothing follows the last declared
/// record (`DefaultRecordBatch`: "records still remaining"). Every
/// decompressed byte is taken from `budget`. Returns the batch's real max
/// timestamp, which the append writes into the header (Kafka's in-place
/// path, `setMaxTimestamp`: the payload is never recompressed). Codec 0 is
/// validated in place.
///
/// CPU-heavy: callers on an async runtime run it off the threads that serve
/// connections.
///
/// # Errors
/// [`StorageError::InvalidRecord`] for an unknown codec, a payload that does
/// not decompress, a broken record or more than the budget;
/// [`StorageError::InvalidTimestamp`] and [`StorageError::RecordWithoutKey`]
/// as [`crate::batch::validate_records_with`].
pub fn validate_compressed_batch(
    header: &RecordBatchHeader,
    batch: &[u8],
    rules: &RecordRules<'_>,
    budget: &mut DecompressionBudget,
) -> Result<ValidatedRecords, StorageError> {
    let codec = header.compression_codec();
    let mut source = StreamSource {
        reader: BufReader::with_capacity(
            STREAM_BUFFER_BYTES,
            decoder(codec, records_section(batch))?,
        ),
        codec: codec_name(codec),
        body: Vec::new(),
        budget,
    };
    validate_record_source(header, &mut source, rules)
}

/// Decompresses a records section compressed with `codec` (1-4), at most
/// [`MAX_DECOMPRESSED_BATCH_BYTES`] bytes. Codec 0 returns a copy.
///
/// # Errors
/// [`StorageError::InvalidRecord`] for an unknown codec, a payload that does
/// not decompress or one that decompresses to more than the limit.
pub fn decompress(codec: u8, payload: &[u8]) -> Result<Vec<u8>, StorageError> {
    let name = codec_name(codec);
    let mut out = Vec::new();
    decoder(codec, payload)?
        .take(MAX_DECOMPRESSED_BATCH_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| invalid(format!("{name} payload does not decompress: {e}")))?;
    if out.len() > MAX_DECOMPRESSED_BATCH_BYTES {
        return Err(invalid(format!(
            "decompressed records exceed {MAX_DECOMPRESSED_BATCH_BYTES} bytes"
        )));
    }
    Ok(out)
}

/// The codec's name as Kafka's tools print it (`none`, `gzip`, ...), or
/// `unknown` for an id that is not a codec.
pub(crate) fn codec_name(codec: u8) -> &'static str {
    match codec {
        NONE => "none",
        GZIP => "gzip",
        SNAPPY => "snappy",
        LZ4 => "lz4",
        ZSTD => "zstd",
        _ => "unknown",
    }
}

/// A reader of the decompressed bytes of `payload`.
fn decoder<'a>(codec: u8, payload: &'a [u8]) -> Result<Box<dyn Read + Send + 'a>, StorageError> {
    Ok(match codec {
        NONE => Box::new(payload),
        GZIP => Box::new(flate2::read::GzDecoder::new(payload)),
        SNAPPY => Box::new(SnappyReader::new(payload)),
        LZ4 => {
            Box::new(lz4::Decoder::new(payload).map_err(|e| invalid(format!("lz4 frame: {e}")))?)
        }
        ZSTD => Box::new(
            zstd::stream::read::Decoder::with_buffer(payload)
                .map_err(|e| invalid(format!("zstd frame: {e}")))?,
        ),
        other => return Err(invalid(format!("unknown compression codec {other}"))),
    })
}

/// Records read out of a decompressing stream, one at a time, each
/// decompressed byte charged to the request's budget.
struct StreamSource<'b, R> {
    reader: BufReader<R>,
    codec: &'static str,
    /// The current record's body (reused).
    body: Vec<u8>,
    budget: &'b mut DecompressionBudget,
}

impl<R: Read> StreamSource<'_, R> {
    fn fault(&self, e: std::io::Error) -> RecordFault {
        RecordFault::Decompress {
            codec: self.codec,
            reason: e.to_string(),
        }
    }

    fn byte(&mut self) -> Result<Option<u8>, RecordFault> {
        let buf = match self.reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) => return Err(self.fault(e)),
        };
        let Some(&b) = buf.first() else {
            return Ok(None);
        };
        self.reader.consume(1);
        self.budget.take(1)?;
        Ok(Some(b))
    }
}

impl<R: Read> RecordSource for StreamSource<'_, R> {
    fn record_length(&mut self) -> Result<Option<i32>, RecordFault> {
        // `ByteUtils.readVarint`: at most 5 bytes, zigzag.
        let mut raw = 0u32;
        for i in 0..5 {
            let Some(b) = self.byte()? else {
                return match i {
                    0 => Ok(None),
                    _ => Err(RecordFault::Truncated("records section")),
                };
            };
            raw |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(Some((raw >> 1) as i32 ^ -((raw & 1) as i32)));
            }
        }
        Err(RecordFault::VarintTooLong("record length"))
    }

    fn record_body(&mut self, declared: i32, length: usize) -> Result<&[u8], RecordFault> {
        if length as u64 > self.budget.remaining() {
            return Err(RecordFault::OverBudget {
                limit: self.budget.limit,
            });
        }
        self.body.clear();
        let read = (&mut self.reader)
            .take(length as u64)
            .read_to_end(&mut self.body);
        if let Err(e) = read {
            return Err(self.fault(e));
        }
        self.budget.take(self.body.len())?;
        if self.body.len() < length {
            return Err(RecordFault::LengthPastEnd {
                declared,
                available: self.body.len(),
            });
        }
        Ok(&self.body)
    }

    fn remaining(&mut self) -> Result<Option<Option<usize>>, RecordFault> {
        match self.reader.fill_buf() {
            Ok(buf) => Ok((!buf.is_empty()).then_some(None)),
            Err(e) => Err(self.fault(e)),
        }
    }
}

/// Decompresses xerial-framed snappy (16-byte header, then blocks of a
/// 4-byte big-endian length and a raw snappy block), or one raw snappy
/// block, one block at a time.
struct SnappyReader<'a> {
    rest: &'a [u8],
    framed: bool,
    header_read: bool,
    decoder: snap::raw::Decoder,
    block: Vec<u8>,
    at: usize,
}

impl<'a> SnappyReader<'a> {
    fn new(payload: &'a [u8]) -> Self {
        SnappyReader {
            rest: payload,
            framed: payload.starts_with(XERIAL_SNAPPY_MAGIC),
            header_read: false,
            decoder: snap::raw::Decoder::new(),
            block: Vec::new(),
            at: 0,
        }
    }

    /// The next compressed block, `None` at the end.
    fn next_block(&mut self) -> std::io::Result<Option<&'a [u8]>> {
        let broken = |what: &str| std::io::Error::other(what.to_string());
        if !self.framed {
            if self.header_read || self.rest.is_empty() {
                return Ok(None);
            }
            self.header_read = true;
            return Ok(Some(self.rest));
        }
        if !self.header_read {
            self.rest = self
                .rest
                .get(XERIAL_HEADER.len()..)
                .ok_or_else(|| broken("truncated snappy stream header"))?;
            self.header_read = true;
        }
        if self.rest.is_empty() {
            return Ok(None);
        }
        let len_bytes: [u8; 4] = self
            .rest
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| broken("truncated snappy block length"))?;
        let len = u32::from_be_bytes(len_bytes) as usize;
        let block = self
            .rest
            .get(4..4 + len)
            .ok_or_else(|| broken("snappy block longer than the batch"))?;
        self.rest = &self.rest[4 + len..];
        Ok(Some(block))
    }
}

impl Read for SnappyReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.block.len() {
            let Some(block) = self.next_block()? else {
                return Ok(0);
            };
            let len = snap::raw::decompress_len(block)
                .map_err(|e| std::io::Error::other(format!("snappy block: {e}")))?;
            if len > block.len().saturating_mul(SNAPPY_MAX_EXPANSION) + 64
                || len > MAX_DECOMPRESSED_BATCH_BYTES
            {
                return Err(std::io::Error::other(format!(
                    "snappy block of {} bytes claims {len} decompressed bytes",
                    block.len()
                )));
            }
            self.block.resize(len, 0);
            let written = self
                .decoder
                .decompress(block, &mut self.block)
                .map_err(|e| std::io::Error::other(format!("snappy block: {e}")))?;
            self.block.truncate(written);
            self.at = 0;
        }
        let n = out.len().min(self.block.len() - self.at);
        out[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::RecordRules;
    use crate::testutil::{batch_with_records, RawRecord};
    use crate::StorageError;

    const CODECS: [u8; 4] = [GZIP, SNAPPY, LZ4, ZSTD];

    /// A batch of `section` compressed with `codec`, declaring `count`
    /// records, base timestamp 1000 and a lying max timestamp 2^62.
    fn compressed_batch(codec: u8, section: &[u8], count: i32) -> (RecordBatchHeader, Vec<u8>) {
        let payload = compress(codec, section).unwrap();
        let mut batch = batch_with_records(&payload, count, count - 1, codec as i16);
        batch[27..35].copy_from_slice(&1000i64.to_be_bytes());
        batch[35..43].copy_from_slice(&(1i64 << 62).to_be_bytes());
        let crc = crc32c::crc32c(&batch[21..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
        (RecordBatchHeader::validate(&batch).unwrap(), batch)
    }

    fn section(records: &[RawRecord<'_>]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in records {
            r.encode(&mut out);
        }
        out
    }

    fn validate(
        codec: u8,
        section: &[u8],
        count: i32,
        budget: &mut DecompressionBudget,
    ) -> Result<ValidatedRecords, StorageError> {
        let (header, batch) = compressed_batch(codec, section, count);
        validate_compressed_batch(&header, &batch, &RecordRules::STRUCTURE_ONLY, budget)
    }

    fn invalid_reason(result: Result<ValidatedRecords, StorageError>) -> String {
        match result {
            Err(StorageError::InvalidRecord { reason }) => reason,
            other => panic!("expected InvalidRecord, got {other:?}"),
        }
    }

    /// Issue 15: a bomb of zeros (64 MiB) fails at its first record, having
    /// decompressed a few KiB, not the whole bomb, in every codec.
    #[test]
    fn a_bomb_of_zeros_fails_at_its_first_record_in_every_codec() {
        let zeros = vec![0u8; 64 << 20];
        for codec in CODECS {
            let mut budget = DecompressionBudget::new(MAX_DECOMPRESSED_REQUEST_BYTES);
            let reason = invalid_reason(validate(codec, &zeros, 1, &mut budget));
            assert!(reason.starts_with("record 0:"), "codec {codec}: {reason}");
            let used = MAX_DECOMPRESSED_REQUEST_BYTES - budget.remaining();
            assert!(used < 1024, "codec {codec} decompressed {used} bytes");
        }
    }

    /// Well-formed records beyond the request budget are refused once the
    /// budget runs out, and the budget is shared by the request's batches.
    #[test]
    fn the_request_budget_bounds_well_formed_records_across_batches() {
        let value = vec![7u8; 300 << 10];
        let records: Vec<RawRecord<'_>> = (0..4).map(|i| RawRecord::new(i, &value)).collect();
        let section = section(&records);
        for codec in CODECS {
            let mut budget = DecompressionBudget::new(2 << 20);
            // 1.2 MiB each: the first passes, the second runs out.
            validate(codec, &section, 4, &mut budget).unwrap();
            let reason = invalid_reason(validate(codec, &section, 4, &mut budget));
            assert!(
                reason.contains("one produce request may decompress"),
                "{reason}"
            );
            // Nothing left: the next batch fails at once.
            let reason = invalid_reason(validate(codec, &section, 4, &mut budget));
            assert!(reason.starts_with("record 0:"), "{reason}");
        }
    }

    /// Each invalid shape of a compressed records section is refused with
    /// INVALID_RECORD naming the fault, in every codec.
    #[test]
    fn every_invalid_shape_is_refused_while_streaming() {
        let two = section(&[RawRecord::new(0, b"a"), RawRecord::new(1, b"b")]);
        let mut long = RawRecord::new(0, b"abc");
        long.length = Some(1 << 20);
        let mut gap = section(&[RawRecord::new(0, b"a")]);
        gap.extend(section(&[RawRecord::new(5, b"b")]));
        let cases: Vec<(&str, Vec<u8>, i32, &str)> = vec![
            (
                "fewer records than declared",
                two.clone(),
                3,
                "ends after 2",
            ),
            ("data after the last record", two.clone(), 1, "data remains"),
            (
                "a record longer than the data",
                section(&[long]),
                1,
                "exceeds",
            ),
            ("offsets not contiguous", gap, 2, "contiguous"),
            ("a 6-byte length varint", vec![0x80; 6], 1, "varint"),
            ("empty", Vec::new(), 1, "ends after 0"),
        ];
        for codec in CODECS {
            for (what, section, count, expected) in &cases {
                let mut budget = DecompressionBudget::new(MAX_DECOMPRESSED_REQUEST_BYTES);
                let reason = invalid_reason(validate(codec, section, *count, &mut budget));
                assert!(reason.contains(expected), "codec {codec}, {what}: {reason}");
            }
            // A payload that is not the codec's format at all.
            let batch = batch_with_records(b"not compressed at all", 1, 0, codec as i16);
            let header = RecordBatchHeader::validate(&batch).unwrap();
            let mut budget = DecompressionBudget::new(MAX_DECOMPRESSED_REQUEST_BYTES);
            assert!(matches!(
                validate_compressed_batch(
                    &header,
                    &batch,
                    &RecordRules::STRUCTURE_ONLY,
                    &mut budget
                ),
                Err(StorageError::InvalidRecord { .. })
            ));
        }
    }

    /// The real max timestamp comes from the records, whatever the header
    /// says (here 2^62), and the timestamp window applies to compressed
    /// records (INVALID_TIMESTAMP naming the record).
    #[test]
    fn the_max_timestamp_is_the_records_and_the_window_applies() {
        let mut late = RawRecord::new(1, b"b");
        late.timestamp_delta = 4000;
        let mut early = RawRecord::new(2, b"c");
        early.timestamp_delta = -500;
        let section = section(&[RawRecord::new(0, b"a"), late, early]);
        for codec in CODECS {
            let (header, batch) = compressed_batch(codec, &section, 3);
            assert_eq!(header.max_timestamp, 1 << 62);
            let mut budget = DecompressionBudget::new(MAX_DECOMPRESSED_REQUEST_BYTES);
            let rules = RecordRules {
                now_ms: 5000,
                timestamp_before_max_ms: 10_000,
                timestamp_after_max_ms: 0,
                ..RecordRules::STRUCTURE_ONLY
            };
            let validated = validate_compressed_batch(&header, &batch, &rules, &mut budget);
            assert_eq!(validated.unwrap().max_timestamp, 5000, "codec {codec}");
            let rules = RecordRules {
                now_ms: 1000,
                timestamp_after_max_ms: 3999,
                ..rules
            };
            match validate_compressed_batch(&header, &batch, &rules, &mut budget) {
                Err(StorageError::InvalidTimestamp {
                    record_index: 1,
                    reason,
                }) => assert!(reason.contains("5000"), "{reason}"),
                other => panic!("codec {codec}: {other:?}"),
            }
        }
    }

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
        assert_eq!(decompress(SNAPPY, &raw).unwrap(), data);
        let xerial = compress(SNAPPY, &data).unwrap();
        assert!(xerial.starts_with(XERIAL_HEADER));
        assert_eq!(decompress(SNAPPY, &xerial).unwrap(), data);
        assert!(decompress(SNAPPY, &xerial[..xerial.len() - 3]).is_err());
        assert!(decompress(SNAPPY, b"\x82SNAPPY\x00").is_err());
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
