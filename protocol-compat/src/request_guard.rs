//! Pre-decode walk of request bodies that bounds every array count by the
//! bytes left in the frame.
//!
//! `kafka-protocol` 0.18 calls `Vec::with_capacity(count)` with the count
//! read off the wire before decoding any element, so an 8-byte body that
//! claims 2^31 topics makes the allocator abort the whole process
//! (kafka-protocol-rs PRs #152, #161, #200, still open). Until that is fixed
//! upstream, [`check_request_body`] walks the body of every API in the
//! supported-API table with the layout from the request JSON schemas and
//! rejects any array whose count times its element's minimum wire size
//! exceeds the remaining bytes. Allocation is then bounded by a small
//! multiple of the frame size. Strings and byte fields need no check: the
//! codec checks their lengths before copying.
//!
//! The walk also refuses null in the fields that the request schemas make
//! nullable only from some version on (`nullableVersions`): kafka-protocol
//! reads them as nullable in every version, where Kafka's parser fails.
//!
//! The walk only reads; a body it accepts is then decoded by `kafka-protocol`.

use kafka_protocol::messages::ApiKey;

/// Why a body was rejected before decoding; becomes the `reason` of
/// [`crate::codec::DecodeError::Malformed`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GuardError {
    /// The body ends inside a field.
    #[error("body ends inside a field at byte {position}")]
    Truncated {
        /// Offset into the body.
        position: usize,
    },
    /// An array claims more elements than the remaining bytes can hold.
    #[error("array at byte {position} claims {count} elements but only {remaining} bytes remain")]
    ArrayTooLong {
        /// Offset of the count into the body.
        position: usize,
        /// Claimed element count.
        count: u64,
        /// Bytes left after the count.
        remaining: usize,
    },
    /// A length that is negative other than -1 (null), or a varint over 5 bytes.
    #[error("invalid length at byte {position}")]
    InvalidLength {
        /// Offset into the body.
        position: usize,
    },
    /// Null (-1, or 0 when flexible) in a field that the request schema
    /// makes nullable only in later versions (`nullableVersions`): Kafka's
    /// generated parser refuses it.
    #[error("null at byte {position} in a field that is not nullable in this version")]
    NullNotAllowed {
        /// Offset of the length into the body.
        position: usize,
    },
    /// The API has no walk; add one before adding it to the table.
    #[error("no pre-decode check for {api_key:?}")]
    NoGuard {
        /// The API.
        api_key: ApiKey,
    },
}

struct Cursor<'a> {
    body: &'a [u8],
    position: usize,
    flexible: bool,
}

impl Cursor<'_> {
    fn remaining(&self) -> usize {
        self.body.len() - self.position
    }

    fn skip(&mut self, n: usize) -> Result<(), GuardError> {
        if self.remaining() < n {
            return Err(GuardError::Truncated {
                position: self.position,
            });
        }
        self.position += n;
        Ok(())
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], GuardError> {
        let start = self.position;
        self.skip(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&self.body[start..start + N]);
        Ok(out)
    }

    fn unsigned_varint(&mut self) -> Result<u32, GuardError> {
        let start = self.position;
        let mut value = 0u32;
        for shift in [0, 7, 14, 21, 28] {
            let [byte] = self.fixed::<1>()?;
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(GuardError::InvalidLength { position: start })
    }

    /// A length or count: int16/int32 classic (-1 null), unsigned varint
    /// minus one when flexible (0 null). `None` for null.
    fn length(&mut self, classic_int16: bool) -> Result<Option<u64>, GuardError> {
        let start = self.position;
        let raw = if self.flexible {
            i64::from(self.unsigned_varint()?) - 1
        } else if classic_int16 {
            i64::from(i16::from_be_bytes(self.fixed::<2>()?))
        } else {
            i64::from(i32::from_be_bytes(self.fixed::<4>()?))
        };
        match raw {
            -1 => Ok(None),
            n if n >= 0 => Ok(Some(n as u64)),
            _ => Err(GuardError::InvalidLength { position: start }),
        }
    }

    fn int8(&mut self) -> Result<(), GuardError> {
        self.skip(1)
    }
    fn int16(&mut self) -> Result<(), GuardError> {
        self.skip(2)
    }
    fn int32(&mut self) -> Result<(), GuardError> {
        self.skip(4)
    }
    fn int64(&mut self) -> Result<(), GuardError> {
        self.skip(8)
    }
    fn uuid(&mut self) -> Result<(), GuardError> {
        self.skip(16)
    }

    /// A (nullable) string.
    fn string(&mut self) -> Result<(), GuardError> {
        self.string_nullable(true)
    }

    /// A string that may be null only when `nullable` (the schema's
    /// `nullableVersions` include this version): kafka-protocol reads such
    /// fields as nullable in every version.
    fn string_nullable(&mut self, nullable: bool) -> Result<(), GuardError> {
        let position = self.position;
        let len = match self.length(true)? {
            Some(len) => len,
            None if nullable => 0,
            None => return Err(GuardError::NullNotAllowed { position }),
        };
        self.skip(usize::try_from(len).unwrap_or(usize::MAX))
    }

    /// A (nullable) byte string or records field.
    fn bytes(&mut self) -> Result<(), GuardError> {
        let len = self.length(false)?.unwrap_or(0);
        self.skip(usize::try_from(len).unwrap_or(usize::MAX))
    }

    /// A (nullable) array whose elements are each at least `min_element`
    /// bytes on the wire; `element` walks one element.
    fn array(
        &mut self,
        min_element: usize,
        element: impl FnMut(&mut Self) -> Result<(), GuardError>,
    ) -> Result<(), GuardError> {
        self.array_nullable(true, min_element, element)
    }

    /// [`Self::array`] for an array that may be null only when `nullable`
    /// (see [`Self::string_nullable`]).
    fn array_nullable(
        &mut self,
        nullable: bool,
        min_element: usize,
        mut element: impl FnMut(&mut Self) -> Result<(), GuardError>,
    ) -> Result<(), GuardError> {
        let position = self.position;
        let Some(count) = self.length(false)? else {
            if nullable {
                return Ok(());
            }
            return Err(GuardError::NullNotAllowed { position });
        };
        let remaining = self.remaining();
        if count.saturating_mul(min_element.max(1) as u64) > remaining as u64 {
            return Err(GuardError::ArrayTooLong {
                position,
                count,
                remaining,
            });
        }
        for _ in 0..count {
            element(self)?;
        }
        Ok(())
    }

    /// The tagged-field section ending every structure in flexible versions.
    /// An ACL binding or binding filter as the ACL APIs (v1+) lay it out:
    /// resource type, resource name (nullable in filters), pattern type,
    /// principal, host (both nullable in filters), operation, permission.
    fn acl_binding(&mut self) -> Result<(), GuardError> {
        self.int8()?;
        self.string()?;
        self.int8()?;
        self.string()?;
        self.string()?;
        self.int8()?;
        self.int8()
    }

    fn tagged_fields(&mut self) -> Result<(), GuardError> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.unsigned_varint()?;
        for _ in 0..count {
            self.unsigned_varint()?; // tag
            let size = self.unsigned_varint()?;
            self.skip(size as usize)?;
        }
        Ok(())
    }
}

/// First flexible version of each request the walk covers (the request
/// schemas' `flexibleVersions`), `None` for APIs without a walk.
fn first_flexible_version(api_key: ApiKey) -> Option<i16> {
    Some(match api_key {
        ApiKey::Produce => 9,
        ApiKey::Fetch => 12,
        ApiKey::ListOffsets => 6,
        ApiKey::Metadata => 9,
        ApiKey::ApiVersions => 3,
        // SaslHandshake has no flexible version.
        ApiKey::SaslHandshake => i16::MAX,
        ApiKey::SaslAuthenticate => 2,
        ApiKey::CreateTopics => 5,
        ApiKey::DeleteTopics => 4,
        ApiKey::DeleteRecords => 2,
        ApiKey::InitProducerId => 2,
        ApiKey::OffsetForLeaderEpoch => 4,
        ApiKey::DescribeConfigs => 4,
        ApiKey::DescribeCluster => 0,
        ApiKey::OffsetCommit => 8,
        ApiKey::OffsetFetch => 6,
        ApiKey::FindCoordinator => 3,
        ApiKey::JoinGroup => 6,
        ApiKey::Heartbeat => 4,
        ApiKey::LeaveGroup => 4,
        ApiKey::SyncGroup => 4,
        ApiKey::DescribeGroups => 5,
        ApiKey::ListGroups => 3,
        ApiKey::DeleteGroups => 2,
        ApiKey::IncrementalAlterConfigs => 1,
        ApiKey::AlterConfigs => 2,
        ApiKey::CreatePartitions => 2,
        // OffsetDelete has no flexible version.
        ApiKey::OffsetDelete => i16::MAX,
        ApiKey::DescribeClientQuotas => 1,
        ApiKey::AlterClientQuotas => 1,
        ApiKey::DescribeAcls => 2,
        ApiKey::CreateAcls => 2,
        ApiKey::DeleteAcls => 2,
        ApiKey::DescribeUserScramCredentials => 0,
        ApiKey::AlterUserScramCredentials => 0,
        ApiKey::DescribeQuorum => 0,
        ApiKey::ElectLeaders => 2,
        ApiKey::DescribeTopicPartitions => 0,
        _ => return None,
    })
}

/// Walks `body` (the bytes after the request header) of `api_key` at
/// `api_version` and returns how many bytes the walk consumed.
///
/// # Errors
///
/// [`GuardError::ArrayTooLong`] when an array count cannot fit the remaining
/// bytes, [`GuardError::Truncated`] / [`GuardError::InvalidLength`] for
/// bodies that end early or carry invalid lengths,
/// [`GuardError::NullNotAllowed`] for null in a field not nullable at
/// `api_version`, and
/// [`GuardError::NoGuard`] for APIs this module does not know.
pub(crate) fn check_request_body(
    api_key: ApiKey,
    api_version: i16,
    body: &[u8],
) -> Result<usize, GuardError> {
    let Some(first_flexible) = first_flexible_version(api_key) else {
        return Err(GuardError::NoGuard { api_key });
    };
    let v = api_version;
    let mut c = Cursor {
        body,
        position: 0,
        flexible: v >= first_flexible,
    };
    match api_key {
        ApiKey::Produce => {
            c.string()?; // transactional_id (v3+; the table serves v3+)
            c.int16()?; // acks
            c.int32()?; // timeout_ms
            c.array(2, |c| {
                if v <= 12 {
                    c.string()?; // name
                }
                if v >= 13 {
                    c.uuid()?; // topic_id
                }
                c.array(5, |c| {
                    c.int32()?; // index
                    c.bytes()?; // records
                    c.tagged_fields()
                })?;
                c.tagged_fields()
            })?;
        }
        ApiKey::Fetch => {
            if v <= 14 {
                c.int32()?; // replica_id
            }
            c.int32()?; // max_wait_ms
            c.int32()?; // min_bytes
            c.int32()?; // max_bytes
            c.int8()?; // isolation_level
            if v >= 7 {
                c.int32()?; // session_id
                c.int32()?; // session_epoch
            }
            c.array(2, |c| {
                if v <= 12 {
                    c.string()?; // topic
                }
                if v >= 13 {
                    c.uuid()?; // topic_id
                }
                c.array(16, |c| {
                    c.int32()?; // partition
                    if v >= 9 {
                        c.int32()?; // current_leader_epoch
                    }
                    c.int64()?; // fetch_offset
                    if v >= 12 {
                        c.int32()?; // last_fetched_epoch
                    }
                    if v >= 5 {
                        c.int64()?; // log_start_offset
                    }
                    c.int32()?; // partition_max_bytes
                    c.tagged_fields()
                })?;
                c.tagged_fields()
            })?;
            if v >= 7 {
                c.array(2, |c| {
                    if v <= 12 {
                        c.string()?; // topic
                    }
                    if v >= 13 {
                        c.uuid()?; // topic_id
                    }
                    c.array(4, Cursor::int32)?; // partitions
                    c.tagged_fields()
                })?;
            }
            if v >= 11 {
                c.string()?; // rack_id
            }
        }
        ApiKey::ListOffsets => {
            c.int32()?; // replica_id
            if v >= 2 {
                c.int8()?; // isolation_level
            }
            c.array(2, |c| {
                c.string()?; // name
                c.array(12, |c| {
                    c.int32()?; // partition_index
                    if v >= 4 {
                        c.int32()?; // current_leader_epoch
                    }
                    c.int64()?; // timestamp
                    c.tagged_fields()
                })?;
                c.tagged_fields()
            })?;
            if v >= 10 {
                c.int32()?; // timeout_ms
            }
        }
        ApiKey::Metadata => {
            // topics: nullable 1+; name: nullable 10+.
            c.array_nullable(v >= 1, 1, |c| {
                if v >= 10 {
                    c.uuid()?; // topic_id
                }
                c.string_nullable(v >= 10)?; // name
                c.tagged_fields()
            })?;
            if v >= 4 {
                c.int8()?; // allow_auto_topic_creation
            }
            if (8..=10).contains(&v) {
                c.int8()?; // include_cluster_authorized_operations
            }
            if v >= 8 {
                c.int8()?; // include_topic_authorized_operations
            }
        }
        ApiKey::ApiVersions => {
            if v >= 3 {
                c.string()?; // client_software_name
                c.string()?; // client_software_version
            }
        }
        ApiKey::CreateTopics => {
            c.array(8, |c| {
                c.string()?; // name
                c.int32()?; // num_partitions
                c.int16()?; // replication_factor
                c.array(5, |c| {
                    c.int32()?; // partition_index
                    c.array(4, Cursor::int32)?; // broker_ids
                    c.tagged_fields()
                })?;
                c.array(2, |c| {
                    c.string()?; // name
                    c.string()?; // value
                    c.tagged_fields()
                })?;
                c.tagged_fields()
            })?;
            c.int32()?; // timeout_ms
            c.int8()?; // validate_only
        }
        ApiKey::DeleteTopics => {
            if v >= 6 {
                c.array(18, |c| {
                    c.string()?; // name
                    c.uuid()?; // topic_id
                    c.tagged_fields()
                })?;
            } else {
                c.array(1, Cursor::string)?; // topic_names
            }
            c.int32()?; // timeout_ms
        }
        ApiKey::DeleteRecords => {
            c.array(2, |c| {
                c.string()?; // name
                c.array(12, |c| {
                    c.int32()?; // partition_index
                    c.int64()?; // offset
                    c.tagged_fields()
                })?;
                c.tagged_fields()
            })?;
            c.int32()?; // timeout_ms
        }
        ApiKey::InitProducerId => {
            c.string()?; // transactional_id
            c.int32()?; // transaction_timeout_ms
            if v >= 3 {
                c.int64()?; // producer_id
                c.int16()?; // producer_epoch
            }
        }
        ApiKey::OffsetForLeaderEpoch => {
            if v >= 3 {
                c.int32()?; // replica_id
            }
            c.array(2, |c| {
                c.string()?; // topic
                c.array(12, |c| {
                    c.int32()?; // partition
                    c.int32()?; // current_leader_epoch
                    c.int32()?; // leader_epoch
                    c.tagged_fields()
                })?;
                c.tagged_fields()
            })?;
        }
        ApiKey::DescribeConfigs => {
            c.array(2, |c| {
                c.int8()?; // resource_type
                c.string()?; // resource_name
                c.array(1, Cursor::string)?; // configuration_keys
                c.tagged_fields()
            })?;
            c.int8()?; // include_synonyms
            if v >= 3 {
                c.int8()?; // include_documentation
            }
        }
        ApiKey::SaslHandshake => {
            c.string()?; // mechanism
        }
        ApiKey::SaslAuthenticate => {
            c.bytes()?; // auth_bytes
        }
        ApiKey::DescribeCluster => {
            c.int8()?; // include_cluster_authorized_operations
            if v >= 1 {
                c.int8()?; // endpoint_type
            }
            if v >= 2 {
                c.int8()?; // include_fenced_brokers
            }
        }
        ApiKey::OffsetCommit => {
            c.string()?; // group_id
            if v >= 1 {
                c.int32()?; // generation_id_or_member_epoch
                c.string()?; // member_id
            }
            if v >= 7 {
                c.string()?; // group_instance_id
            }
            if (2..=4).contains(&v) {
                c.int64()?; // retention_time_ms
            }
            c.array(2, |c| {
                if v <= 9 {
                    c.string()?; // name
                } else {
                    c.uuid()?; // topic_id
                }
                c.array(14, |c| {
                    c.int32()?; // partition_index
                    c.int64()?; // committed_offset
                    if v >= 6 {
                        c.int32()?; // committed_leader_epoch
                    }
                    if v == 1 {
                        c.int64()?; // commit_timestamp
                    }
                    c.string()?; // committed_metadata
                    c.tagged_fields()
                })?;
                c.tagged_fields()
            })?;
        }
        ApiKey::OffsetFetch => {
            if v <= 7 {
                c.string()?; // group_id
                             // topics: nullable 2-7.
                c.array_nullable(v >= 2, 2, |c| {
                    c.string()?; // name
                    c.array(4, Cursor::int32)?; // partition_indexes
                    c.tagged_fields()
                })?;
            } else {
                c.array(2, |c| {
                    c.string()?; // group_id
                    if v >= 9 {
                        c.string()?; // member_id
                        c.int32()?; // member_epoch
                    }
                    c.array(2, |c| {
                        if v <= 9 {
                            c.string()?; // name
                        } else {
                            c.uuid()?; // topic_id
                        }
                        c.array(4, Cursor::int32)?; // partition_indexes
                        c.tagged_fields()
                    })?;
                    c.tagged_fields()
                })?;
            }
            if v >= 7 {
                c.int8()?; // require_stable
            }
        }
        ApiKey::FindCoordinator => {
            if v <= 3 {
                c.string()?; // key
            }
            if v >= 1 {
                c.int8()?; // key_type
            }
            if v >= 4 {
                c.array(1, Cursor::string)?; // coordinator_keys
            }
        }
        ApiKey::JoinGroup => {
            c.string()?; // group_id
            c.int32()?; // session_timeout_ms
            if v >= 1 {
                c.int32()?; // rebalance_timeout_ms
            }
            c.string()?; // member_id
            if v >= 5 {
                c.string()?; // group_instance_id
            }
            c.string()?; // protocol_type
            c.array(2, |c| {
                c.string()?; // name
                c.bytes()?; // metadata
                c.tagged_fields()
            })?;
            if v >= 8 {
                c.string()?; // reason
            }
        }
        ApiKey::Heartbeat => {
            c.string()?; // group_id
            c.int32()?; // generation_id
            c.string()?; // member_id
            if v >= 3 {
                c.string()?; // group_instance_id
            }
        }
        ApiKey::LeaveGroup => {
            c.string()?; // group_id
            if v <= 2 {
                c.string()?; // member_id
            } else {
                c.array(2, |c| {
                    c.string()?; // member_id
                    c.string()?; // group_instance_id
                    if v >= 5 {
                        c.string()?; // reason
                    }
                    c.tagged_fields()
                })?;
            }
        }
        ApiKey::SyncGroup => {
            c.string()?; // group_id
            c.int32()?; // generation_id
            c.string()?; // member_id
            if v >= 3 {
                c.string()?; // group_instance_id
            }
            if v >= 5 {
                c.string()?; // protocol_type
                c.string()?; // protocol_name
            }
            c.array(2, |c| {
                c.string()?; // member_id
                c.bytes()?; // assignment
                c.tagged_fields()
            })?;
        }
        ApiKey::DescribeGroups => {
            c.array(1, Cursor::string)?; // groups
            if v >= 3 {
                c.int8()?; // include_authorized_operations
            }
        }
        ApiKey::ListGroups => {
            if v >= 4 {
                c.array(1, Cursor::string)?; // states_filter
            }
            if v >= 5 {
                c.array(1, Cursor::string)?; // types_filter
            }
        }
        ApiKey::DeleteGroups => {
            c.array(1, Cursor::string)?; // groups_names
        }
        ApiKey::IncrementalAlterConfigs => {
            c.array(2, |c| {
                c.int8()?; // resource_type
                c.string()?; // resource_name
                c.array(3, |c| {
                    c.string()?; // name
                    c.int8()?; // config_operation
                    c.string()?; // value
                    c.tagged_fields()
                })?;
                c.tagged_fields()
            })?;
            c.int8()?; // validate_only
        }
        ApiKey::AlterConfigs => {
            c.array(3, |c| {
                c.int8()?; // resource_type
                c.string()?; // resource_name
                c.array(2, |c| {
                    c.string()?; // name
                    c.string()?; // value
                    c.tagged_fields()
                })?;
                c.tagged_fields()
            })?;
            c.int8()?; // validate_only
        }
        ApiKey::CreatePartitions => {
            c.array(6, |c| {
                c.string()?; // name
                c.int32()?; // count
                c.array(2, |c| {
                    c.array(4, Cursor::int32)?; // broker_ids
                    c.tagged_fields()
                })?; // assignments (nullable)
                c.tagged_fields()
            })?;
            c.int32()?; // timeout_ms
            c.int8()?; // validate_only
        }
        ApiKey::OffsetDelete => {
            c.string()?; // group_id
            c.array(2, |c| {
                c.string()?; // name
                c.array(4, Cursor::int32)?; // partitions
                c.tagged_fields()
            })?;
        }
        ApiKey::DescribeClientQuotas => {
            c.array_nullable(false, 3, |c| {
                c.string()?; // entity_type
                c.int8()?; // match_type
                c.string_nullable(true)?; // match
                c.tagged_fields()
            })?; // components
            c.int8()?; // strict
        }
        ApiKey::DescribeAcls => c.acl_binding()?, // the filter
        ApiKey::CreateAcls => c.array_nullable(false, 7, |c| {
            c.acl_binding()?;
            c.tagged_fields()
        })?, // creations
        ApiKey::DeleteAcls => c.array_nullable(false, 7, |c| {
            c.acl_binding()?;
            c.tagged_fields()
        })?, // filters
        ApiKey::AlterClientQuotas => {
            c.array_nullable(false, 2, |c| {
                c.array_nullable(false, 2, |c| {
                    c.string()?; // entity_type
                    c.string_nullable(true)?; // entity_name
                    c.tagged_fields()
                })?; // entity
                c.array_nullable(false, 10, |c| {
                    c.string()?; // key
                    c.int64()?; // value (float64)
                    c.int8()?; // remove
                    c.tagged_fields()
                })?; // ops
                c.tagged_fields()
            })?; // entries
            c.int8()?; // validate_only
        }
        ApiKey::DescribeUserScramCredentials => {
            c.array(2, |c| {
                c.string()?; // name
                c.tagged_fields()
            })?; // users (nullable)
        }
        ApiKey::AlterUserScramCredentials => {
            c.array_nullable(false, 3, |c| {
                c.string()?; // name
                c.int8()?; // mechanism
                c.tagged_fields()
            })?; // deletions
            c.array_nullable(false, 9, |c| {
                c.string()?; // name
                c.int8()?; // mechanism
                c.int32()?; // iterations
                c.bytes()?; // salt
                c.bytes()?; // salted_password
                c.tagged_fields()
            })?; // upsertions
        }
        ApiKey::DescribeQuorum => {
            c.array(2, |c| {
                c.string()?; // topic_name
                c.array(5, |c| {
                    c.int32()?; // partition_index
                    c.tagged_fields()
                })?;
                c.tagged_fields()
            })?;
        }
        ApiKey::ElectLeaders => {
            if v >= 1 {
                c.int8()?; // election_type
            }
            c.array(2, |c| {
                c.string()?; // topic
                c.array(4, Cursor::int32)?; // partitions
                c.tagged_fields()
            })?; // topic_partitions (nullable)
            c.int32()?; // timeout_ms
        }
        ApiKey::DescribeTopicPartitions => {
            c.array_nullable(false, 2, |c| {
                c.string_nullable(false)?; // name
                c.tagged_fields()
            })?; // topics
            c.int32()?; // response_partition_limit
                        // cursor: a nullable struct, a presence byte first (1: present).
            if i8::from_be_bytes(c.fixed::<1>()?) == 1 {
                c.string_nullable(false)?; // topic_name
                c.int32()?; // partition_index
                c.tagged_fields()?;
            }
        }
        _ => return Err(GuardError::NoGuard { api_key }),
    }
    c.tagged_fields()?;
    Ok(c.position)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api_table::SUPPORTED_APIS;
    use crate::test_support::populated_request;
    use bytes::BytesMut;

    /// The walk must follow kafka-protocol's layout exactly: for every API
    /// and served version it consumes precisely the encoded body.
    #[test]
    fn walk_consumes_exactly_every_table_request_body() {
        for entry in SUPPORTED_APIS {
            for v in entry.min_served_version..=entry.max_version {
                let request = populated_request(entry.api_key, v);
                let mut body = BytesMut::new();
                request.encode(&mut body, v).unwrap();
                assert_eq!(
                    check_request_body(entry.api_key, v, &body),
                    Ok(body.len()),
                    "{:?} v{v}",
                    entry.api_key
                );
            }
        }
    }

    #[test]
    fn huge_array_count_is_rejected_before_decoding() {
        // Metadata v0 claiming i32::MAX topics in a 4-byte body: without the
        // walk kafka-protocol would try to allocate ~150 GiB and abort.
        assert_eq!(
            check_request_body(ApiKey::Metadata, 0, &[0x7f, 0xff, 0xff, 0xff]),
            Err(GuardError::ArrayTooLong {
                position: 0,
                count: i32::MAX as u64,
                remaining: 0
            })
        );
        // Flexible: compact count varint 0xffffffff - 1.
        let body = [0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0];
        assert!(matches!(
            check_request_body(ApiKey::Metadata, 12, &body),
            Err(GuardError::ArrayTooLong { .. })
        ));
        // Element minimum sizes count: 2 Fetch partitions need 32 bytes.
        let mut fetch = vec![0u8; 4 * 4 + 1]; // replica_id .. isolation_level (v4)
        fetch.extend_from_slice(&1i32.to_be_bytes()); // 1 topic
        fetch.extend_from_slice(&[0, 1, b't']); // name "t"
        fetch.extend_from_slice(&2i32.to_be_bytes()); // 2 partitions
        fetch.extend_from_slice(&[0u8; 31]);
        assert!(matches!(
            check_request_body(ApiKey::Fetch, 4, &fetch),
            Err(GuardError::ArrayTooLong {
                count: 2,
                remaining: 31,
                ..
            })
        ));
    }

    /// Null where the request schema's `nullableVersions` does not allow
    /// it: Kafka cannot decode the request (and closes the connection), but
    /// kafka-protocol reads every sometimes-nullable field as nullable.
    #[test]
    fn null_before_a_fields_nullable_versions_is_refused() {
        // OffsetFetch topics: nullable 2-7. group_id "g", topics null.
        let body = [0, 1, b'g', 0xff, 0xff, 0xff, 0xff];
        assert_eq!(
            check_request_body(ApiKey::OffsetFetch, 1, &body),
            Err(GuardError::NullNotAllowed { position: 3 })
        );
        assert_eq!(check_request_body(ApiKey::OffsetFetch, 2, &body), Ok(7));
        // Metadata topics: nullable 1+.
        let body = [0xff, 0xff, 0xff, 0xff];
        assert_eq!(
            check_request_body(ApiKey::Metadata, 0, &body),
            Err(GuardError::NullNotAllowed { position: 0 })
        );
        assert_eq!(check_request_body(ApiKey::Metadata, 1, &body), Ok(4));
        // Metadata topic name: nullable 10+ (v10 adds the topic id).
        let v9 = [2, 0, 0, 1, 0, 0, 0];
        assert_eq!(
            check_request_body(ApiKey::Metadata, 9, &v9),
            Err(GuardError::NullNotAllowed { position: 1 })
        );
        let mut v10 = vec![2];
        v10.extend_from_slice(&[0u8; 16]);
        v10.extend_from_slice(&[0, 0, 1, 0, 0, 0]);
        assert_eq!(
            check_request_body(ApiKey::Metadata, 10, &v10),
            Ok(v10.len())
        );
    }

    #[test]
    fn every_table_api_has_a_walk_and_others_are_refused() {
        for entry in SUPPORTED_APIS {
            assert!(
                first_flexible_version(entry.api_key).is_some(),
                "{:?}",
                entry.api_key
            );
        }
        assert_eq!(
            check_request_body(ApiKey::DescribeLogDirs, 0, &[]),
            Err(GuardError::NoGuard {
                api_key: ApiKey::DescribeLogDirs
            })
        );
    }
}
