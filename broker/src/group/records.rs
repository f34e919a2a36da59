//! The record keys and values of `__consumer_offsets` in Kafka's own
//! schemas, byte for byte (Kafka's `group-coordinator/src/main/resources/
//! common/message/{OffsetCommitKey,OffsetCommitValue,GroupMetadataKey,
//! GroupMetadataValue}.json`), so that Kafka's tools (`kafka-dump-log
//! --offsets-decoder`) decode Weir's offsets topic and Weir reads one
//! written by Kafka. A pure codec: no I/O, no storage.
//!
//! Every key and value starts with its schema version as a big-endian
//! `i16`; the key's version also says which record it is:
//!
//! ```text
//! key version 0, 1   OffsetCommitKey    group string, topic string, partition int32
//! key version 2      GroupMetadataKey   group string
//! key version 3+     records of the consumer/share group protocols (KIP-848), not read here
//!
//! OffsetCommitValue  v0-4 (v4 flexible)
//!   offset            int64
//!   leaderEpoch       int32   v3+ (default -1)
//!   metadata          string
//!   commitTimestamp   int64
//!   expireTimestamp   int64   v1 only (default -1)
//!   topicId           uuid    v4+ tagged field 0 (Kafka 4.1, KIP-848 commits by topic id; skipped)
//!
//! GroupMetadataValue v0-4 (v4 flexible)
//!   protocolType           string
//!   generation             int32
//!   protocol               nullable string
//!   leader                 nullable string
//!   currentStateTimestamp  int64   v2+ (default -1)
//!   members                array of:
//!     memberId           string
//!     groupInstanceId    nullable string  v3+ (default null)
//!     clientId           string
//!     clientHost         string
//!     rebalanceTimeout   int32   v1+ (default -1)
//!     sessionTimeout     int32
//!     subscription       bytes
//!     assignment         bytes
//! ```
//!
//! Non-flexible versions use `int16` string lengths (-1 = null), `int32`
//! bytes lengths and array counts. The flexible version 4 uses unsigned
//! varint lengths plus one (0 = null), and every struct ends with tagged
//! fields (read and skipped; none are written). A deleted key's value is
//! null (a tombstone), which is not a value this module encodes.
//!
//! What Kafka 4.1 writes, and so what Weir writes
//! (`GroupCoordinatorRecordHelpers.offsetCommitValueVersion` and
//! `newGroupMetadataRecord` in `kafka-group-coordinator` 4.1): OffsetCommitKey
//! v1; OffsetCommitValue v4, or v1 when the commit carries an explicit expire
//! timestamp (OffsetCommit v1); GroupMetadataKey v2; GroupMetadataValue v3.
//! (Before 4.1 Kafka wrote OffsetCommitValue v3, which Weir reads too.)

use bytes::Bytes;
use weir_storage::TopicPartition;

use super::store::{GroupMetadataRecord, MemberMetadataRecord, OffsetAndMetadata};

/// The OffsetCommitKey version Kafka 4.1 writes.
pub const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
/// The GroupMetadataKey version (its only version).
pub const GROUP_METADATA_KEY_VERSION: i16 = 2;
/// The OffsetCommitValue version Kafka 4.1 writes for a commit without an
/// explicit expire timestamp (flexible, no tagged fields for a commit by
/// topic name).
pub const OFFSET_COMMIT_VALUE_VERSION: i16 = 4;
/// The OffsetCommitValue version that carries `expireTimestamp`
/// (OffsetCommit v1 commits, KIP-211).
pub const OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY: i16 = 1;
/// The GroupMetadataValue version Kafka 4.1 writes.
pub const GROUP_METADATA_VALUE_VERSION: i16 = 3;
/// Highest value version this module reads (both value schemas).
pub const MAX_VALUE_VERSION: i16 = 4;
/// First flexible value version (both value schemas).
const FIRST_FLEXIBLE_VERSION: i16 = 4;
/// Kafka's `OffsetCommitRequest.DEFAULT_TIMESTAMP`: "no expire timestamp".
const NO_EXPIRE_TIMESTAMP: i64 = -1;

/// The key of one `__consumer_offsets` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupRecordKey {
    /// `OffsetCommitKey`: a group's committed offset of one partition.
    OffsetCommit {
        /// Group id.
        group: String,
        /// The committed topic partition.
        topic_partition: TopicPartition,
    },
    /// `GroupMetadataKey`: a group's metadata.
    GroupMetadata {
        /// Group id.
        group: String,
    },
}

impl GroupRecordKey {
    /// The group id the record belongs to.
    pub fn group(&self) -> &str {
        match self {
            GroupRecordKey::OffsetCommit { group, .. }
            | GroupRecordKey::GroupMetadata { group } => group,
        }
    }
}

/// Why a key or value could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordEncodeError {
    /// A string longer than a non-flexible schema can hold (32767 bytes).
    #[error("{field} is {len} bytes, longer than the schema allows")]
    StringTooLong {
        /// The schema field.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// A schema version this module does not write.
    #[error("{schema} has no version {version}")]
    UnknownVersion {
        /// The schema name.
        schema: &'static str,
        /// The version asked for.
        version: i16,
    },
}

/// Why a key or value could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordDecodeError {
    /// A version the schema does not define (for a key: a record type this
    /// module does not read, such as the KIP-848 consumer group records).
    #[error("{schema} version {version} is not one this broker reads")]
    UnknownVersion {
        /// The schema name (`key` for an unknown key version).
        schema: &'static str,
        /// The version found.
        version: i16,
    },
    /// The bytes end inside a field.
    #[error("{field} runs past the end of the record")]
    Truncated {
        /// The field being read.
        field: &'static str,
    },
    /// A field's content is not valid (negative length, null in a
    /// non-nullable field, invalid UTF-8, an over-long varint).
    #[error("{field}: {reason}")]
    Invalid {
        /// The field being read.
        field: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
}

// ---------------------------------------------------------------- writing

/// A writer of one schema version's primitive types.
struct Writer {
    out: Vec<u8>,
    flexible: bool,
}

impl Writer {
    fn new(version: i16, flexible: bool) -> Self {
        Writer {
            out: version.to_be_bytes().to_vec(),
            flexible,
        }
    }

    fn i32(&mut self, v: i32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn i64(&mut self, v: i64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn uvarint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    /// A length (or count) `len`, or null for `None`.
    fn length(&mut self, len: Option<usize>, wide: bool) {
        match (self.flexible, len, wide) {
            (true, Some(n), _) => self.uvarint(n as u64 + 1),
            (true, None, _) => self.uvarint(0),
            (false, Some(n), false) => self.out.extend_from_slice(&(n as i16).to_be_bytes()),
            (false, None, false) => self.out.extend_from_slice(&(-1i16).to_be_bytes()),
            (false, Some(n), true) => self.i32(n as i32),
            (false, None, true) => self.i32(-1),
        }
    }

    fn nullable_string(
        &mut self,
        field: &'static str,
        s: Option<&str>,
    ) -> Result<(), RecordEncodeError> {
        let Some(s) = s else {
            self.length(None, false);
            return Ok(());
        };
        let limit = if self.flexible {
            i32::MAX as usize - 1
        } else {
            i16::MAX as usize
        };
        if s.len() > limit {
            return Err(RecordEncodeError::StringTooLong {
                field,
                len: s.len(),
            });
        }
        self.length(Some(s.len()), false);
        self.out.extend_from_slice(s.as_bytes());
        Ok(())
    }

    fn string(&mut self, field: &'static str, s: &str) -> Result<(), RecordEncodeError> {
        self.nullable_string(field, Some(s))
    }

    fn bytes(&mut self, field: &'static str, b: &[u8]) -> Result<(), RecordEncodeError> {
        if b.len() >= i32::MAX as usize {
            return Err(RecordEncodeError::StringTooLong {
                field,
                len: b.len(),
            });
        }
        self.length(Some(b.len()), true);
        self.out.extend_from_slice(b);
        Ok(())
    }

    fn array_len(&mut self, n: usize) {
        self.length(Some(n), true);
    }

    /// The end of a struct: no tagged fields (flexible versions only).
    fn end_struct(&mut self) {
        if self.flexible {
            self.uvarint(0);
        }
    }
}

/// Encodes an `OffsetCommitKey` (version 1, as Kafka 4.1 writes it).
///
/// # Errors
/// [`RecordEncodeError::StringTooLong`] for a group id or topic longer than
/// 32767 bytes.
pub fn encode_offset_commit_key(
    group: &str,
    topic_partition: &TopicPartition,
) -> Result<Vec<u8>, RecordEncodeError> {
    let mut w = Writer::new(OFFSET_COMMIT_KEY_VERSION, false);
    w.string("group", group)?;
    w.string("topic", &topic_partition.topic)?;
    w.i32(topic_partition.partition);
    Ok(w.out)
}

/// Encodes a `GroupMetadataKey` (version 2).
///
/// # Errors
/// [`RecordEncodeError::StringTooLong`] for a group id longer than 32767
/// bytes.
pub fn encode_group_metadata_key(group: &str) -> Result<Vec<u8>, RecordEncodeError> {
    let mut w = Writer::new(GROUP_METADATA_KEY_VERSION, false);
    w.string("group", group)?;
    Ok(w.out)
}

/// The OffsetCommitValue version Kafka 4.1 writes for `offset`: 1 when it
/// has an explicit expire timestamp, else 4
/// (`GroupCoordinatorRecordHelpers.offsetCommitValueVersion`).
pub fn offset_commit_value_version(offset: &OffsetAndMetadata) -> i16 {
    if offset.expire_timestamp_ms.is_some() {
        OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    } else {
        OFFSET_COMMIT_VALUE_VERSION
    }
}

/// Encodes an `OffsetCommitValue` at `version` (0-4). Fields the version
/// lacks are left out, as Kafka does for its ignorable fields.
///
/// # Errors
/// [`RecordEncodeError::UnknownVersion`] outside 0-4;
/// [`RecordEncodeError::StringTooLong`] for metadata longer than 32767
/// bytes in versions 0-3.
pub fn encode_offset_commit_value(
    offset: &OffsetAndMetadata,
    version: i16,
) -> Result<Vec<u8>, RecordEncodeError> {
    if !(0..=MAX_VALUE_VERSION).contains(&version) {
        return Err(RecordEncodeError::UnknownVersion {
            schema: "OffsetCommitValue",
            version,
        });
    }
    let mut w = Writer::new(version, version >= FIRST_FLEXIBLE_VERSION);
    w.i64(offset.committed_offset);
    if version >= 3 {
        w.i32(offset.committed_leader_epoch);
    }
    w.string("metadata", &offset.metadata)?;
    w.i64(offset.commit_timestamp_ms);
    if version == 1 {
        w.i64(offset.expire_timestamp_ms.unwrap_or(NO_EXPIRE_TIMESTAMP));
    }
    w.end_struct();
    Ok(w.out)
}

/// Encodes a `GroupMetadataValue` at `version` (0-4). Fields the version
/// lacks are left out, as Kafka does for its ignorable fields.
///
/// # Errors
/// [`RecordEncodeError::UnknownVersion`] outside 0-4;
/// [`RecordEncodeError::StringTooLong`] for a string longer than 32767
/// bytes in versions 0-3.
pub fn encode_group_metadata_value(
    group: &GroupMetadataRecord,
    version: i16,
) -> Result<Vec<u8>, RecordEncodeError> {
    if !(0..=MAX_VALUE_VERSION).contains(&version) {
        return Err(RecordEncodeError::UnknownVersion {
            schema: "GroupMetadataValue",
            version,
        });
    }
    let mut w = Writer::new(version, version >= FIRST_FLEXIBLE_VERSION);
    w.string("protocolType", &group.protocol_type)?;
    w.i32(group.generation);
    w.nullable_string("protocol", group.protocol.as_deref())?;
    w.nullable_string("leader", group.leader.as_deref())?;
    if version >= 2 {
        w.i64(group.current_state_timestamp_ms);
    }
    w.array_len(group.members.len());
    for m in &group.members {
        w.string("memberId", &m.member_id)?;
        if version >= 3 {
            w.nullable_string("groupInstanceId", m.group_instance_id.as_deref())?;
        }
        w.string("clientId", &m.client_id)?;
        w.string("clientHost", &m.client_host)?;
        if version >= 1 {
            w.i32(m.rebalance_timeout_ms);
        }
        w.i32(m.session_timeout_ms);
        w.bytes("subscription", &m.subscription)?;
        w.bytes("assignment", &m.assignment)?;
        w.end_struct();
    }
    w.end_struct();
    Ok(w.out)
}

// ---------------------------------------------------------------- reading

/// A reader of one schema version's primitive types.
struct Reader<'a> {
    buf: &'a [u8],
    flexible: bool,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], RecordDecodeError> {
        if n > self.buf.len() {
            return Err(RecordDecodeError::Truncated { field });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], RecordDecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, field)?);
        Ok(a)
    }

    fn i16(&mut self, field: &'static str) -> Result<i16, RecordDecodeError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }

    fn i32(&mut self, field: &'static str) -> Result<i32, RecordDecodeError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }

    fn i64(&mut self, field: &'static str) -> Result<i64, RecordDecodeError> {
        Ok(i64::from_be_bytes(self.array(field)?))
    }

    /// An unsigned varint of at most 5 bytes (`ByteUtils.readUnsignedVarint`).
    fn uvarint(&mut self, field: &'static str) -> Result<u32, RecordDecodeError> {
        let mut value = 0u32;
        for i in 0..5 {
            let b = self.take(1, field)?[0];
            value |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordDecodeError::Invalid {
            field,
            reason: "varint longer than 5 bytes",
        })
    }

    /// A length or count: `None` for null.
    fn length(
        &mut self,
        field: &'static str,
        wide: bool,
    ) -> Result<Option<usize>, RecordDecodeError> {
        let n: i64 = if self.flexible {
            i64::from(self.uvarint(field)?) - 1
        } else if wide {
            i64::from(self.i32(field)?)
        } else {
            i64::from(self.i16(field)?)
        };
        match n {
            -1 => Ok(None),
            n if n < -1 => Err(RecordDecodeError::Invalid {
                field,
                reason: "negative length",
            }),
            n => Ok(Some(n as usize)),
        }
    }

    fn nullable_string(
        &mut self,
        field: &'static str,
    ) -> Result<Option<String>, RecordDecodeError> {
        let Some(n) = self.length(field, false)? else {
            return Ok(None);
        };
        let bytes = self.take(n, field)?;
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|_| RecordDecodeError::Invalid {
                field,
                reason: "not valid UTF-8",
            })
    }

    fn string(&mut self, field: &'static str) -> Result<String, RecordDecodeError> {
        self.nullable_string(field)?
            .ok_or(RecordDecodeError::Invalid {
                field,
                reason: "null in a non-nullable field",
            })
    }

    fn bytes(&mut self, field: &'static str) -> Result<Bytes, RecordDecodeError> {
        let n = self
            .length(field, true)?
            .ok_or(RecordDecodeError::Invalid {
                field,
                reason: "null in a non-nullable field",
            })?;
        Ok(Bytes::copy_from_slice(self.take(n, field)?))
    }

    fn array_len(&mut self, field: &'static str) -> Result<usize, RecordDecodeError> {
        let n = self
            .length(field, true)?
            .ok_or(RecordDecodeError::Invalid {
                field,
                reason: "null in a non-nullable field",
            })?;
        // Each element takes at least one byte: a count above the bytes
        // left is corrupt, and must not size an allocation.
        if n > self.buf.len() {
            return Err(RecordDecodeError::Truncated { field });
        }
        Ok(n)
    }

    /// Skips a struct's tagged fields (flexible versions only).
    fn end_struct(&mut self) -> Result<(), RecordDecodeError> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.uvarint("tagged fields")?;
        for _ in 0..count {
            self.uvarint("tag")?;
            let size = self.uvarint("tagged field size")? as usize;
            self.take(size, "tagged field")?;
        }
        Ok(())
    }
}

/// Splits the leading `i16` version off a key or value.
fn version_of(buf: &[u8]) -> Result<(i16, &[u8]), RecordDecodeError> {
    let mut r = Reader {
        buf,
        flexible: false,
    };
    let version = r.i16("version")?;
    Ok((version, r.buf))
}

/// Decodes a record key: OffsetCommitKey (versions 0 and 1) or
/// GroupMetadataKey (version 2).
///
/// # Errors
/// [`RecordDecodeError::UnknownVersion`] with schema `key` for any other
/// version (records of other group types, which this broker does not
/// read); the other variants for malformed bytes.
pub fn decode_key(buf: &[u8]) -> Result<GroupRecordKey, RecordDecodeError> {
    let (version, rest) = version_of(buf)?;
    let mut r = Reader {
        buf: rest,
        flexible: false,
    };
    match version {
        0 | 1 => Ok(GroupRecordKey::OffsetCommit {
            group: r.string("group")?,
            topic_partition: TopicPartition {
                topic: r.string("topic")?,
                partition: r.i32("partition")?,
            },
        }),
        2 => Ok(GroupRecordKey::GroupMetadata {
            group: r.string("group")?,
        }),
        version => Err(RecordDecodeError::UnknownVersion {
            schema: "key",
            version,
        }),
    }
}

/// The version of a value record (0-4) and a reader over the fields after
/// it, flexible from [`FIRST_FLEXIBLE_VERSION`].
fn value_reader<'a>(
    buf: &'a [u8],
    schema: &'static str,
) -> Result<(i16, Reader<'a>), RecordDecodeError> {
    let (version, rest) = version_of(buf)?;
    if !(0..=MAX_VALUE_VERSION).contains(&version) {
        return Err(RecordDecodeError::UnknownVersion { schema, version });
    }
    let reader = Reader {
        buf: rest,
        flexible: version >= FIRST_FLEXIBLE_VERSION,
    };
    Ok((version, reader))
}

/// Decodes an `OffsetCommitValue` of any version 0-4. Versions before 3
/// have no leader epoch (-1); only version 1 has an expire timestamp, and
/// -1 there means none.
///
/// # Errors
/// [`RecordDecodeError::UnknownVersion`] outside 0-4; the other variants
/// for malformed bytes.
pub fn decode_offset_commit_value(buf: &[u8]) -> Result<OffsetAndMetadata, RecordDecodeError> {
    let (version, mut r) = value_reader(buf, "OffsetCommitValue")?;
    let committed_offset = r.i64("offset")?;
    let committed_leader_epoch = if version >= 3 {
        r.i32("leaderEpoch")?
    } else {
        -1
    };
    let metadata = r.string("metadata")?;
    let commit_timestamp_ms = r.i64("commitTimestamp")?;
    let expire_timestamp_ms = if version == 1 {
        Some(r.i64("expireTimestamp")?).filter(|&t| t != NO_EXPIRE_TIMESTAMP)
    } else {
        None
    };
    r.end_struct()?;
    Ok(OffsetAndMetadata {
        committed_offset,
        committed_leader_epoch,
        metadata,
        commit_timestamp_ms,
        expire_timestamp_ms,
    })
}

/// Decodes a `GroupMetadataValue` of any version 0-4. Fields a version
/// lacks take the schema's defaults: `currentStateTimestamp` -1 (v0-1),
/// `rebalanceTimeout` -1 (v0; Kafka's loader then uses the session
/// timeout), `groupInstanceId` null (v0-2).
///
/// # Errors
/// [`RecordDecodeError::UnknownVersion`] outside 0-4; the other variants
/// for malformed bytes.
pub fn decode_group_metadata_value(buf: &[u8]) -> Result<GroupMetadataRecord, RecordDecodeError> {
    let (version, mut r) = value_reader(buf, "GroupMetadataValue")?;
    let protocol_type = r.string("protocolType")?;
    let generation = r.i32("generation")?;
    let protocol = r.nullable_string("protocol")?;
    let leader = r.nullable_string("leader")?;
    let current_state_timestamp_ms = if version >= 2 {
        r.i64("currentStateTimestamp")?
    } else {
        -1
    };
    let count = r.array_len("members")?;
    let mut members = Vec::with_capacity(count);
    for _ in 0..count {
        let member_id = r.string("memberId")?;
        let group_instance_id = if version >= 3 {
            r.nullable_string("groupInstanceId")?
        } else {
            None
        };
        let client_id = r.string("clientId")?;
        let client_host = r.string("clientHost")?;
        let rebalance_timeout_ms = if version >= 1 {
            r.i32("rebalanceTimeout")?
        } else {
            -1
        };
        let session_timeout_ms = r.i32("sessionTimeout")?;
        let subscription = r.bytes("subscription")?;
        let assignment = r.bytes("assignment")?;
        r.end_struct()?;
        members.push(MemberMetadataRecord {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    r.end_struct()?;
    Ok(GroupMetadataRecord {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp_ms,
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(expire: Option<i64>) -> OffsetAndMetadata {
        OffsetAndMetadata {
            committed_offset: 42,
            committed_leader_epoch: 7,
            metadata: "meta".into(),
            commit_timestamp_ms: 1_700_000_000_000,
            expire_timestamp_ms: expire,
        }
    }

    fn member(instance: Option<&str>) -> MemberMetadataRecord {
        MemberMetadataRecord {
            member_id: "consumer-1-abc".into(),
            group_instance_id: instance.map(str::to_string),
            client_id: "consumer-1".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 300_000,
            session_timeout_ms: 45_000,
            subscription: Bytes::from_static(&[0, 1, 2]),
            assignment: Bytes::from_static(&[9, 8]),
        }
    }

    fn group(instance: Option<&str>) -> GroupMetadataRecord {
        GroupMetadataRecord {
            protocol_type: "consumer".into(),
            generation: 3,
            protocol: Some("range".into()),
            leader: Some("consumer-1-abc".into()),
            current_state_timestamp_ms: 1_700_000_000_500,
            members: vec![member(instance), member(None)],
        }
    }

    /// Big-endian i16 length + bytes: a non-flexible string.
    fn s(v: &str) -> Vec<u8> {
        let mut out = (v.len() as i16).to_be_bytes().to_vec();
        out.extend_from_slice(v.as_bytes());
        out
    }

    #[test]
    fn keys_round_trip_every_version() {
        let tp = TopicPartition::new("orders", 5);
        let key = encode_offset_commit_key("g1", &tp).unwrap();
        assert_eq!(
            decode_key(&key).unwrap(),
            GroupRecordKey::OffsetCommit {
                group: "g1".into(),
                topic_partition: tp.clone()
            }
        );
        // Version 0 has the same fields as version 1.
        let mut v0 = key.clone();
        v0[..2].copy_from_slice(&0i16.to_be_bytes());
        assert_eq!(decode_key(&v0).unwrap(), decode_key(&key).unwrap());
        let key = encode_group_metadata_key("g1").unwrap();
        assert_eq!(
            decode_key(&key).unwrap(),
            GroupRecordKey::GroupMetadata { group: "g1".into() }
        );
        assert_eq!(
            decode_key(&[0, 3, 0, 1, b'x']),
            Err(RecordDecodeError::UnknownVersion {
                schema: "key",
                version: 3
            })
        );
    }

    /// Every version keeps the fields it has and reads the defaults of the
    /// others.
    #[test]
    fn offset_commit_values_round_trip_every_version() {
        for version in 0..=4 {
            for expire in [None, Some(1_700_000_900_000)] {
                let written = offset(expire);
                let bytes = encode_offset_commit_value(&written, version).unwrap();
                let read = decode_offset_commit_value(&bytes).unwrap();
                let expected = OffsetAndMetadata {
                    committed_leader_epoch: if version >= 3 { 7 } else { -1 },
                    expire_timestamp_ms: if version == 1 { expire } else { None },
                    ..written
                };
                assert_eq!(read, expected, "version {version}");
            }
        }
        assert!(encode_offset_commit_value(&offset(None), 5).is_err());
    }

    #[test]
    fn group_metadata_values_round_trip_every_version() {
        let empty = GroupMetadataRecord {
            protocol_type: String::new(),
            generation: 0,
            protocol: None,
            leader: None,
            current_state_timestamp_ms: 5,
            members: Vec::new(),
        };
        for version in 0..=4 {
            for written in [group(Some("static-1")), empty.clone()] {
                let bytes = encode_group_metadata_value(&written, version).unwrap();
                let read = decode_group_metadata_value(&bytes).unwrap();
                let mut expected = written.clone();
                if version < 2 {
                    expected.current_state_timestamp_ms = -1;
                }
                for m in &mut expected.members {
                    if version < 3 {
                        m.group_instance_id = None;
                    }
                    if version < 1 {
                        m.rebalance_timeout_ms = -1;
                    }
                }
                assert_eq!(read, expected, "version {version}");
            }
        }
    }

    /// The versions Kafka 4.1 writes.
    #[test]
    fn written_versions_are_kafkas() {
        assert_eq!(offset_commit_value_version(&offset(None)), 4);
        assert_eq!(offset_commit_value_version(&offset(Some(1))), 1);
        assert_eq!(GROUP_METADATA_VALUE_VERSION, 3);
    }

    /// OffsetCommitKey v1 and OffsetCommitValue v3, field by field against
    /// the JSON schemas.
    #[test]
    fn offset_commit_record_bytes_follow_the_schema() {
        let key = encode_offset_commit_key("g1", &TopicPartition::new("orders", 5)).unwrap();
        let mut expected = vec![0, 1]; // key version 1
        expected.extend(s("g1")); // group: string
        expected.extend(s("orders")); // topic: string
        expected.extend(5i32.to_be_bytes()); // partition: int32
        assert_eq!(key, expected);

        let value = encode_offset_commit_value(&offset(None), 3).unwrap();
        let mut expected = vec![0, 3]; // value version 3
        expected.extend(42i64.to_be_bytes()); // offset: int64
        expected.extend(7i32.to_be_bytes()); // leaderEpoch: int32 (v3+)
        expected.extend(s("meta")); // metadata: string
        expected.extend(1_700_000_000_000i64.to_be_bytes()); // commitTimestamp
        assert_eq!(value, expected);

        // v1 carries expireTimestamp after commitTimestamp, no leader epoch.
        let value = encode_offset_commit_value(&offset(Some(99)), 1).unwrap();
        let mut expected = vec![0, 1];
        expected.extend(42i64.to_be_bytes());
        expected.extend(s("meta"));
        expected.extend(1_700_000_000_000i64.to_be_bytes());
        expected.extend(99i64.to_be_bytes());
        assert_eq!(value, expected);
    }

    /// GroupMetadataKey v2 and GroupMetadataValue v3, field by field
    /// against the JSON schemas.
    #[test]
    fn group_metadata_record_bytes_follow_the_schema() {
        assert_eq!(encode_group_metadata_key("g1").unwrap(), {
            let mut e = vec![0, 2];
            e.extend(s("g1"));
            e
        });
        let mut one = group(Some("static-1"));
        one.members.truncate(1);
        let value = encode_group_metadata_value(&one, 3).unwrap();
        let mut e = vec![0, 3]; // value version 3
        e.extend(s("consumer")); // protocolType
        e.extend(3i32.to_be_bytes()); // generation
        e.extend(s("range")); // protocol: nullable string
        e.extend(s("consumer-1-abc")); // leader: nullable string
        e.extend(1_700_000_000_500i64.to_be_bytes()); // currentStateTimestamp
        e.extend(1i32.to_be_bytes()); // members: array count
        e.extend(s("consumer-1-abc")); // memberId
        e.extend(s("static-1")); // groupInstanceId (v3+)
        e.extend(s("consumer-1")); // clientId
        e.extend(s("/127.0.0.1")); // clientHost
        e.extend(300_000i32.to_be_bytes()); // rebalanceTimeout (v1+)
        e.extend(45_000i32.to_be_bytes()); // sessionTimeout
        e.extend(3i32.to_be_bytes()); // subscription: bytes
        e.extend([0, 1, 2]);
        e.extend(2i32.to_be_bytes()); // assignment: bytes
        e.extend([9, 8]);
        assert_eq!(value, e);

        // An empty group: null protocol and leader are length -1.
        let empty = GroupMetadataRecord {
            protocol_type: String::new(),
            generation: 0,
            protocol: None,
            leader: None,
            current_state_timestamp_ms: -1,
            members: Vec::new(),
        };
        let value = encode_group_metadata_value(&empty, 3).unwrap();
        let mut e = vec![0, 3, 0, 0];
        e.extend(0i32.to_be_bytes());
        e.extend((-1i16).to_be_bytes());
        e.extend((-1i16).to_be_bytes());
        e.extend((-1i64).to_be_bytes());
        e.extend(0i32.to_be_bytes());
        assert_eq!(value, e);
    }

    /// Version 4 (flexible): compact lengths plus one, and tagged fields
    /// after each struct, which readers skip.
    #[test]
    fn flexible_values_use_compact_lengths_and_skip_tagged_fields() {
        let value = encode_offset_commit_value(&offset(None), 4).unwrap();
        let mut e = vec![0, 4];
        e.extend(42i64.to_be_bytes());
        e.extend(7i32.to_be_bytes());
        e.push(5); // "meta": length 4 + 1
        e.extend(b"meta");
        e.extend(1_700_000_000_000i64.to_be_bytes());
        e.push(0); // no tagged fields
        assert_eq!(value, e);
        // One unknown tagged field (tag 9, 2 bytes) is skipped.
        let mut tagged = e[..e.len() - 1].to_vec();
        tagged.extend([1, 9, 2, 0xaa, 0xbb]);
        assert_eq!(decode_offset_commit_value(&tagged).unwrap(), offset(None));
    }

    /// Malformed bytes are errors, never panics.
    #[test]
    fn malformed_bytes_are_errors() {
        let value = encode_group_metadata_value(&group(Some("x")), 3).unwrap();
        for end in 0..value.len() {
            assert!(decode_group_metadata_value(&value[..end]).is_err(), "{end}");
        }
        let value = encode_offset_commit_value(&offset(None), 4).unwrap();
        for end in 0..value.len() {
            assert!(decode_offset_commit_value(&value[..end]).is_err(), "{end}");
        }
        // A member count far above the bytes left.
        let mut huge = vec![0, 3, 0, 0];
        huge.extend(0i32.to_be_bytes());
        huge.extend((-1i16).to_be_bytes());
        huge.extend((-1i16).to_be_bytes());
        huge.extend((-1i64).to_be_bytes());
        huge.extend(i32::MAX.to_be_bytes());
        assert!(decode_group_metadata_value(&huge).is_err());
        // A null non-nullable string.
        let mut null_metadata = vec![0, 3];
        null_metadata.extend(1i64.to_be_bytes());
        null_metadata.extend((-1i32).to_be_bytes());
        null_metadata.extend((-1i16).to_be_bytes());
        null_metadata.extend(1i64.to_be_bytes());
        assert!(decode_offset_commit_value(&null_metadata).is_err());
        assert!(decode_offset_commit_value(&[0, 9]).is_err());
        assert!(decode_key(&[0]).is_err());
    }

    #[test]
    fn over_long_strings_are_encode_errors() {
        let long = "x".repeat(40_000);
        assert!(matches!(
            encode_group_metadata_key(&long),
            Err(RecordEncodeError::StringTooLong { field: "group", .. })
        ));
    }
}
