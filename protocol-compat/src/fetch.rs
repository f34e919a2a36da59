//! Hand-written Fetch response encoder that leaves a slot for each
//! partition's record bytes.
//!
//! The broker answers Fetch with record batches read from log segments. To
//! send those with `sendfile`, the response is produced as a list of chunks:
//! every byte except record bytes is in [`FetchChunk::Bytes`], and each
//! partition's records are a [`FetchChunk::Records`] holding whatever the
//! caller uses to describe them (a file region in the broker, [`Bytes`] in
//! tests). The size prefix and each records length field already count the
//! source's [`RecordsSource::len`], so the connection just writes the chunks
//! in order. The layout follows FetchResponse.json v4-17 and is checked byte
//! for byte against `kafka-protocol`'s encoder in the tests. This module does
//! no I/O and knows nothing about storage.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::frame::SIZE_PREFIX_BYTES;

/// Lowest Fetch version this encoder writes.
pub const MIN_FETCH_VERSION: i16 = 4;
/// Highest Fetch version this encoder writes.
pub const MAX_FETCH_VERSION: i16 = 17;
/// First flexible Fetch version (compact encodings, tagged fields, response
/// header v1).
const FIRST_FLEXIBLE_VERSION: i16 = 12;
/// First Fetch version that identifies topics by id instead of name (KIP-516).
const FIRST_TOPIC_ID_VERSION: i16 = 13;

/// One piece of an encoded Fetch response, written to the socket in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchChunk<R, B = Bytes> {
    /// Encoded protocol bytes (size prefix, header, fields, length prefixes).
    Bytes(B),
    /// One partition's record bytes, exactly `R::len()` of them.
    Records(R),
}

/// The record bytes of one partition in a Fetch response: whole record
/// batches, as stored (never re-based, split or recompressed).
pub trait RecordsSource {
    /// Exact number of bytes this source will write.
    fn len(&self) -> usize;

    /// Whether the source writes no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl RecordsSource for Bytes {
    fn len(&self) -> usize {
        Bytes::len(self)
    }
}

/// A Fetch response body (FetchResponse.json) with records left abstract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponseData<R> {
    /// Throttle time in milliseconds (0 when not throttled).
    pub throttle_time_ms: i32,
    /// Top-level error code; written from v7.
    pub error_code: i16,
    /// Fetch session id (KIP-227), 0 outside a session; written from v7.
    pub session_id: i32,
    /// One entry per topic.
    pub responses: Vec<FetchTopicData<R>>,
}

/// One topic of a Fetch response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchTopicData<R> {
    /// Topic name; written below v13.
    pub topic: StrBytes,
    /// Topic id; written from v13 (KIP-516).
    pub topic_id: Uuid,
    /// One entry per partition.
    pub partitions: Vec<FetchPartitionData<R>>,
}

/// One partition of a Fetch response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartitionData<R> {
    /// Partition index.
    pub partition_index: i32,
    /// Partition error code, 0 for none.
    pub error_code: i16,
    /// High watermark (offset), -1 when unknown.
    pub high_watermark: i64,
    /// Last stable offset, -1 when unknown.
    pub last_stable_offset: i64,
    /// Log start offset, -1 when unknown; written from v5.
    pub log_start_offset: i64,
    /// Aborted transactions overlapping the returned records as
    /// `(producer_id, first_offset)`, for read_committed consumers; `None`
    /// is encoded as a null array.
    pub aborted_transactions: Option<Vec<(i64, i64)>>,
    /// Preferred read replica (KIP-392), -1 for none; written from v11 and
    /// ignored below.
    pub preferred_read_replica: i32,
    /// Record bytes; `None` is encoded as null records.
    pub records: Option<R>,
    /// The leader's `(epoch, end_offset)` when the follower's last fetched
    /// epoch diverges from its log (KIP-320's `DivergingEpoch`, tagged
    /// field 0); written from v12, `None` leaves it out.
    pub diverging_epoch: Option<(i32, i64)>,
}

/// Why a Fetch response could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchEncodeError {
    /// The version is outside what this encoder writes.
    #[error("Fetch v{api_version} is outside the encoder's range {MIN_FETCH_VERSION}..={MAX_FETCH_VERSION}")]
    UnsupportedVersion {
        /// The requested version.
        api_version: i16,
    },
    /// A topic name longer than an int16 string allows.
    #[error("topic name of {len} bytes is too long to encode")]
    TopicNameTooLong {
        /// Name length in bytes.
        len: usize,
    },
    /// An array, records source or the whole response exceeds the i32
    /// lengths of the wire format.
    #[error("{what} of {len} does not fit the Fetch wire format")]
    TooLarge {
        /// Which length overflowed.
        what: &'static str,
        /// The length (elements or bytes).
        len: usize,
    },
}

/// Encodes `size prefix + response header + Fetch response body` at
/// `api_version` (4-17) as chunks.
///
/// Every byte except record bytes lands in [`FetchChunk::Bytes`] chunks;
/// each partition with `records: Some(r)` yields exactly one
/// [`FetchChunk::Records`]`(r)` at its place (even when `r` is empty).
/// Consecutive protocol bytes are merged, so the chunk list alternates
/// Bytes / Records and starts with Bytes. Concatenating the chunks yields
/// the same bytes `kafka-protocol` would encode for the same response
/// (response header v0 below v12, v1 from v12). Of the partition-level
/// tagged fields only `diverging_epoch` is written (current_leader,
/// snapshot_id and node_endpoints default to absent).
///
/// # Errors
///
/// [`FetchEncodeError::UnsupportedVersion`] outside 4-17,
/// [`FetchEncodeError::TopicNameTooLong`] for names over 32767 bytes and
/// [`FetchEncodeError::TooLarge`] when a count, records length or the total
/// exceeds `i32::MAX`.
pub fn encode_fetch_response<R: RecordsSource>(
    api_version: i16,
    correlation_id: i32,
    response: FetchResponseData<R>,
) -> Result<Vec<FetchChunk<R>>, FetchEncodeError> {
    if !(MIN_FETCH_VERSION..=MAX_FETCH_VERSION).contains(&api_version) {
        return Err(FetchEncodeError::UnsupportedVersion { api_version });
    }
    let mut writer = ChunkWriter::new(api_version >= FIRST_FLEXIBLE_VERSION);
    let buf = &mut writer.current;
    buf.put_i32(0); // size prefix, patched below
    buf.put_i32(correlation_id);
    writer.tagged_fields();

    let buf = &mut writer.current;
    buf.put_i32(response.throttle_time_ms);
    if api_version >= 7 {
        buf.put_i16(response.error_code);
        buf.put_i32(response.session_id);
    }
    writer.array_len(response.responses.len(), "topic count")?;
    for topic in response.responses {
        if api_version >= FIRST_TOPIC_ID_VERSION {
            writer.current.put_slice(topic.topic_id.as_bytes());
        } else {
            writer.string(topic.topic.as_bytes())?;
        }
        writer.array_len(topic.partitions.len(), "partition count")?;
        for partition in topic.partitions {
            let buf = &mut writer.current;
            buf.put_i32(partition.partition_index);
            buf.put_i16(partition.error_code);
            buf.put_i64(partition.high_watermark);
            buf.put_i64(partition.last_stable_offset);
            if api_version >= 5 {
                buf.put_i64(partition.log_start_offset);
            }
            match &partition.aborted_transactions {
                None => writer.null_array(),
                Some(aborted) => {
                    writer.array_len(aborted.len(), "aborted transaction count")?;
                    for &(producer_id, first_offset) in aborted {
                        writer.current.put_i64(producer_id);
                        writer.current.put_i64(first_offset);
                        writer.tagged_fields();
                    }
                }
            }
            if api_version >= 11 {
                writer.current.put_i32(partition.preferred_read_replica);
            }
            match partition.records {
                None => writer.null_bytes(),
                Some(records) => {
                    writer.bytes_len(records.len(), "records length")?;
                    writer.records(records);
                }
            }
            match partition.diverging_epoch {
                Some((epoch, end_offset)) if writer.flexible => {
                    // One tagged field: tag 0, its size, then the
                    // EpochEndOffset struct (epoch, end_offset, no tags).
                    let buf = &mut writer.current;
                    put_unsigned_varint(buf, 1);
                    put_unsigned_varint(buf, 0);
                    put_unsigned_varint(buf, 4 + 8 + 1);
                    buf.put_i32(epoch);
                    buf.put_i64(end_offset);
                    put_unsigned_varint(buf, 0);
                }
                _ => writer.tagged_fields(),
            }
        }
        writer.tagged_fields();
    }
    writer.tagged_fields();
    writer.finish()
}

/// Accumulates protocol bytes and records slots, tracking the total size.
struct ChunkWriter<R> {
    flexible: bool,
    current: BytesMut,
    /// Finished pieces; protocol bytes stay mutable so the size prefix at
    /// the start of the first one can be patched without copying.
    pieces: Vec<FetchChunk<R, BytesMut>>,
    /// Bytes in `chunks` (protocol bytes and record bytes).
    emitted: usize,
}

impl<R: RecordsSource> ChunkWriter<R> {
    fn new(flexible: bool) -> Self {
        Self {
            flexible,
            current: BytesMut::with_capacity(256),
            pieces: Vec::new(),
            emitted: 0,
        }
    }

    /// An empty tagged-field section, in flexible versions only.
    fn tagged_fields(&mut self) {
        if self.flexible {
            put_unsigned_varint(&mut self.current, 0);
        }
    }

    fn array_len(&mut self, len: usize, what: &'static str) -> Result<(), FetchEncodeError> {
        self.length_field(len, what)
    }

    fn bytes_len(&mut self, len: usize, what: &'static str) -> Result<(), FetchEncodeError> {
        self.length_field(len, what)
    }

    /// A non-null length: int32 in classic versions, unsigned varint of
    /// `len + 1` in flexible ones.
    fn length_field(&mut self, len: usize, what: &'static str) -> Result<(), FetchEncodeError> {
        let too_large = || FetchEncodeError::TooLarge { what, len };
        let classic = i32::try_from(len).map_err(|_| too_large())?;
        if self.flexible {
            let compact = u32::try_from(len + 1).map_err(|_| too_large())?;
            put_unsigned_varint(&mut self.current, compact);
        } else {
            self.current.put_i32(classic);
        }
        Ok(())
    }

    /// Null array or null bytes: -1 classic, 0 compact.
    fn null_array(&mut self) {
        if self.flexible {
            put_unsigned_varint(&mut self.current, 0);
        } else {
            self.current.put_i32(-1);
        }
    }

    fn null_bytes(&mut self) {
        self.null_array();
    }

    /// A non-null string: int16 length classic, compact in flexible versions.
    fn string(&mut self, raw: &[u8]) -> Result<(), FetchEncodeError> {
        let len = i16::try_from(raw.len())
            .map_err(|_| FetchEncodeError::TopicNameTooLong { len: raw.len() })?;
        if self.flexible {
            // len <= i16::MAX, so len + 1 fits u32.
            put_unsigned_varint(&mut self.current, len as u32 + 1);
        } else {
            self.current.put_i16(len);
        }
        self.current.put_slice(raw);
        Ok(())
    }

    fn records(&mut self, records: R) {
        let bytes = self.current.split();
        self.emitted += bytes.len() + records.len();
        self.pieces.push(FetchChunk::Bytes(bytes));
        self.pieces.push(FetchChunk::Records(records));
    }

    fn finish(mut self) -> Result<Vec<FetchChunk<R>>, FetchEncodeError> {
        let total = self.emitted + self.current.len();
        let size = total - SIZE_PREFIX_BYTES;
        let prefix = i32::try_from(size).map_err(|_| FetchEncodeError::TooLarge {
            what: "response size",
            len: size,
        })?;
        if !self.current.is_empty() {
            let tail = self.current.split();
            self.pieces.push(FetchChunk::Bytes(tail));
        }
        // The first piece is always protocol bytes starting with the prefix.
        if let Some(FetchChunk::Bytes(first)) = self.pieces.first_mut() {
            first[..SIZE_PREFIX_BYTES].copy_from_slice(&prefix.to_be_bytes());
        }
        Ok(self
            .pieces
            .into_iter()
            .map(|piece| match piece {
                FetchChunk::Bytes(bytes) => FetchChunk::Bytes(bytes.freeze()),
                FetchChunk::Records(records) => FetchChunk::Records(records),
            })
            .collect())
    }
}

fn put_unsigned_varint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::encode_response;
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::messages::{ApiKey, FetchResponse, ResponseKind, TopicName};
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    use proptest::prelude::*;

    /// A real magic-2 record batch of `count` records with `value_len`-byte values.
    fn record_batch(base_offset: i64, count: usize, value_len: usize) -> Bytes {
        let records: Vec<Record> = (0..count)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 3,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: base_offset + i as i64,
                sequence: -1,
                timestamp: 1_700_000_000_000 + i as i64,
                key: Some(Bytes::from(format!("key-{i}"))),
                value: Some(Bytes::from(vec![b'v'; value_len])),
                headers: IndexMap::new(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .unwrap();
        buf.freeze()
    }

    /// The same response as `kafka-protocol`'s FetchResponse.
    fn to_kafka_protocol(data: &FetchResponseData<Bytes>, api_version: i16) -> FetchResponse {
        let mut response = FetchResponse::default();
        response.throttle_time_ms = data.throttle_time_ms;
        if api_version >= 7 {
            response.error_code = data.error_code;
            response.session_id = data.session_id;
        }
        response.responses = data
            .responses
            .iter()
            .map(|topic| {
                let mut out = FetchableTopicResponse::default();
                out.topic = TopicName(topic.topic.clone());
                out.topic_id = topic.topic_id;
                out.partitions = topic
                    .partitions
                    .iter()
                    .map(|partition| {
                        let mut out = PartitionData::default();
                        out.partition_index = partition.partition_index;
                        out.error_code = partition.error_code;
                        out.high_watermark = partition.high_watermark;
                        out.last_stable_offset = partition.last_stable_offset;
                        out.log_start_offset = partition.log_start_offset;
                        out.aborted_transactions =
                            partition.aborted_transactions.as_ref().map(|list| {
                                list.iter()
                                    .map(|&(producer_id, first_offset)| {
                                        let mut aborted = AbortedTransaction::default();
                                        aborted.producer_id = producer_id.into();
                                        aborted.first_offset = first_offset;
                                        aborted
                                    })
                                    .collect()
                            });
                        out.preferred_read_replica = if api_version >= 11 {
                            partition.preferred_read_replica.into()
                        } else {
                            (-1).into()
                        };
                        out.records = partition.records.clone();
                        if let (Some((epoch, end_offset)), true) =
                            (partition.diverging_epoch, api_version >= 12)
                        {
                            out.diverging_epoch.epoch = epoch;
                            out.diverging_epoch.end_offset = end_offset;
                        }
                        out
                    })
                    .collect();
                out
            })
            .collect();
        response
    }

    fn concat(chunks: &[FetchChunk<Bytes>]) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in chunks {
            match chunk {
                FetchChunk::Bytes(bytes) | FetchChunk::Records(bytes) => {
                    out.extend_from_slice(bytes)
                }
            }
        }
        out
    }

    fn assert_same_as_kafka_protocol(api_version: i16, data: FetchResponseData<Bytes>) {
        let expected = encode_response(
            ApiKey::Fetch,
            api_version,
            0x1234_5678,
            &ResponseKind::Fetch(to_kafka_protocol(&data, api_version)),
        )
        .unwrap();
        let record_slots: Vec<Bytes> = data
            .responses
            .iter()
            .flat_map(|topic| topic.partitions.iter().filter_map(|p| p.records.clone()))
            .collect();
        let chunks = encode_fetch_response(api_version, 0x1234_5678, data).unwrap();
        assert_eq!(concat(&chunks), &expected[..], "Fetch v{api_version}");
        // Every partition's records are one Records chunk, in order, and no
        // Bytes chunk is empty or adjacent to another Bytes chunk.
        let slots: Vec<Bytes> = chunks
            .iter()
            .filter_map(|chunk| match chunk {
                FetchChunk::Records(records) => Some(records.clone()),
                FetchChunk::Bytes(_) => None,
            })
            .collect();
        assert_eq!(slots, record_slots);
        assert!(matches!(chunks.first(), Some(FetchChunk::Bytes(_))));
        for pair in chunks.windows(2) {
            assert!(!matches!(
                pair,
                [FetchChunk::Bytes(_), FetchChunk::Bytes(_)]
            ));
        }
    }

    fn partition(
        partition_index: i32,
        records: Option<Bytes>,
        aborted_transactions: Option<Vec<(i64, i64)>>,
    ) -> FetchPartitionData<Bytes> {
        FetchPartitionData {
            partition_index,
            error_code: 0,
            high_watermark: 1_000 + i64::from(partition_index),
            last_stable_offset: 990,
            log_start_offset: 7,
            aborted_transactions,
            preferred_read_replica: -1,
            records,
            diverging_epoch: None,
        }
    }

    fn sample(api_version: i16) -> FetchResponseData<Bytes> {
        let topic_id = |n: u8| Uuid::from_bytes([n; 16]);
        FetchResponseData {
            throttle_time_ms: 25,
            error_code: 0,
            session_id: if api_version >= 7 { 77 } else { 0 },
            responses: vec![
                FetchTopicData {
                    topic: StrBytes::from_static_str("orders"),
                    topic_id: topic_id(1),
                    partitions: vec![
                        partition(0, Some(record_batch(0, 3, 10)), Some(vec![(4000, 2)])),
                        FetchPartitionData {
                            diverging_epoch: Some((3, 500)),
                            ..partition(1, None, None)
                        },
                        partition(2, Some(Bytes::new()), Some(vec![])),
                        FetchPartitionData {
                            error_code: 1, // OFFSET_OUT_OF_RANGE
                            high_watermark: -1,
                            last_stable_offset: -1,
                            log_start_offset: -1,
                            preferred_read_replica: if api_version >= 11 { 2 } else { -1 },
                            ..partition(3, Some(Bytes::new()), None)
                        },
                    ],
                },
                FetchTopicData {
                    // An empty name is legal on the wire below v13.
                    topic: StrBytes::from_static_str(""),
                    topic_id: topic_id(2),
                    partitions: vec![partition(
                        5,
                        Some(record_batch(100, 2, 300)),
                        Some(vec![(1, 100), (2, 101)]),
                    )],
                },
                FetchTopicData {
                    topic: StrBytes::from_static_str("no-partitions"),
                    topic_id: topic_id(3),
                    partitions: vec![],
                },
            ],
        }
    }

    /// Acceptance point: for every Fetch version in the table the chunked
    /// encoding equals kafka-protocol's encoding of the same response.
    #[test]
    fn every_table_fetch_version_matches_kafka_protocol_bytes() {
        let fetch = crate::api_table::supported_api(ApiKey::Fetch as i16).unwrap();
        for api_version in fetch.min_version..=fetch.max_version {
            assert_same_as_kafka_protocol(api_version, sample(api_version));
            assert_same_as_kafka_protocol(
                api_version,
                FetchResponseData {
                    throttle_time_ms: 0,
                    error_code: if api_version >= 7 { 71 } else { 0 },
                    session_id: 0,
                    responses: vec![],
                },
            );
        }
    }

    #[test]
    fn size_prefix_counts_record_bytes_that_are_not_in_the_buffers() {
        let records = record_batch(0, 1, 1000);
        let chunks = encode_fetch_response(
            12,
            1,
            FetchResponseData {
                throttle_time_ms: 0,
                error_code: 0,
                session_id: 0,
                responses: vec![FetchTopicData {
                    topic: StrBytes::from_static_str("t"),
                    topic_id: Uuid::nil(),
                    partitions: vec![partition(0, Some(records.clone()), None)],
                }],
            },
        )
        .unwrap();
        let FetchChunk::Bytes(first) = &chunks[0] else {
            panic!("first chunk must be protocol bytes");
        };
        let total: usize = chunks
            .iter()
            .map(|c| match c {
                FetchChunk::Bytes(b) | FetchChunk::Records(b) => b.len(),
            })
            .sum();
        let prefix = i32::from_be_bytes([first[0], first[1], first[2], first[3]]);
        assert_eq!(prefix as usize, total - 4);
        assert_eq!(chunks[1], FetchChunk::Records(records));
    }

    #[test]
    fn versions_outside_4_to_17_are_rejected() {
        for api_version in [-1, 0, 3, 18, i16::MAX] {
            let result = encode_fetch_response::<Bytes>(
                api_version,
                1,
                FetchResponseData {
                    throttle_time_ms: 0,
                    error_code: 0,
                    session_id: 0,
                    responses: vec![],
                },
            );
            assert_eq!(
                result,
                Err(FetchEncodeError::UnsupportedVersion { api_version })
            );
        }
    }

    #[test]
    fn oversized_topic_name_is_an_error_not_a_panic() {
        let long = StrBytes::from_string("x".repeat(40_000));
        let result = encode_fetch_response::<Bytes>(
            5,
            1,
            FetchResponseData {
                throttle_time_ms: 0,
                error_code: 0,
                session_id: 0,
                responses: vec![FetchTopicData {
                    topic: long,
                    topic_id: Uuid::nil(),
                    partitions: vec![],
                }],
            },
        );
        assert_eq!(
            result,
            Err(FetchEncodeError::TopicNameTooLong { len: 40_000 })
        );
    }

    fn arb_partition() -> impl Strategy<Value = FetchPartitionData<Bytes>> {
        (
            0..1000i32,
            any::<i16>(),
            prop::option::of(prop::collection::vec((any::<i64>(), any::<i64>()), 0..3)),
            prop_oneof![
                Just(None),
                Just(Some(Bytes::new())),
                (0usize..200).prop_map(|len| Some(Bytes::from(vec![0xab; len]))),
                (1usize..5, 0usize..300).prop_map(|(n, len)| Some(record_batch(9, n, len))),
            ],
            any::<i64>(),
        )
            .prop_map(
                |(index, error_code, aborted, records, offset)| FetchPartitionData {
                    partition_index: index,
                    error_code,
                    high_watermark: offset,
                    last_stable_offset: offset / 2,
                    log_start_offset: offset / 3,
                    aborted_transactions: aborted,
                    preferred_read_replica: -1,
                    records,
                    diverging_epoch: None,
                },
            )
    }

    proptest! {
        #[test]
        fn random_responses_match_kafka_protocol_bytes(
            api_version in 4i16..=17,
            throttle_time_ms in 0..10_000i32,
            topics in prop::collection::vec(
                ("[a-z._-]{0,20}", any::<[u8; 16]>(), prop::collection::vec(arb_partition(), 0..6)),
                0..4,
            ),
        ) {
            let data = FetchResponseData {
                throttle_time_ms,
                error_code: 0,
                session_id: 0,
                responses: topics
                    .into_iter()
                    .map(|(name, id, partitions)| FetchTopicData {
                        topic: StrBytes::from_string(name),
                        topic_id: Uuid::from_bytes(id),
                        partitions,
                    })
                    .collect(),
            };
            assert_same_as_kafka_protocol(api_version, data);
        }
    }
}
