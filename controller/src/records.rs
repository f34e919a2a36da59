//! Metadata records: the entries of the cluster metadata log.
//!
//! Each type mirrors a KRaft record schema from Kafka's
//! `metadata/src/main/resources/common/metadata/*.json` (same names, same
//! fields where the concept exists here). Records are serialized with serde
//! (JSON inside the raft log) and are replayed into a
//! [`MetadataImage`](crate::image::MetadataImage); replay is the only way
//! metadata state changes. This module holds data only: no I/O, no raft, no
//! Kafka request types.

use serde::{Deserialize, Serialize};

use crate::image::TopicId;

/// One metadata record, as appended to the metadata log.
///
/// Source: KIP-631 (the quorum-based Kafka controller) and the record schemas
/// in Kafka's `metadata/src/main/resources/common/metadata/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataRecord {
    /// `RegisterBrokerRecord` (api key 0): a broker (re-)registered.
    RegisterBroker(RegisterBrokerRecord),
    /// `TopicRecord` (api key 2): a topic was created.
    Topic(TopicRecord),
    /// `PartitionRecord` (api key 3): a partition was created.
    Partition(PartitionRecord),
    /// `PartitionChangeRecord` (api key 5): leader, ISR or replicas changed.
    PartitionChange(PartitionChangeRecord),
    /// `RemoveTopicRecord` (api key 9): a topic was deleted.
    RemoveTopic(RemoveTopicRecord),
    /// `ConfigRecord` (api key 4): a dynamic config was set or deleted.
    Config(ConfigRecord),
    /// `ProducerIdsRecord` (api key 15): a block of producer ids was handed out.
    ProducerIds(ProducerIdsRecord),
    /// `FenceBrokerRecord` (api key 7): a broker was fenced.
    FenceBroker(FenceBrokerRecord),
    /// `UnfenceBrokerRecord` (api key 8): a broker was unfenced.
    UnfenceBroker(UnfenceBrokerRecord),
    /// `FeatureLevelRecord` (api key 12): a feature's finalized level changed.
    FeatureLevel(FeatureLevelRecord),
    /// `BrokerRegistrationChangeRecord` (api key 17): a broker entered
    /// controlled shutdown.
    BrokerRegistrationChange(BrokerRegistrationChangeRecord),
    /// `UserScramCredentialRecord` (api key 11): a user's SCRAM credential
    /// for one mechanism was set (KIP-554).
    UserScramCredential(UserScramCredentialRecord),
    /// `RemoveUserScramCredentialRecord` (api key 22): a user's SCRAM
    /// credential for one mechanism was deleted (KIP-554).
    RemoveUserScramCredential(RemoveUserScramCredentialRecord),
    /// `AccessControlEntryRecord` (api key 6): an ACL was created.
    AccessControlEntry(AccessControlEntryRecord),
    /// `RemoveAccessControlEntryRecord` (api key 14): an ACL was deleted.
    RemoveAccessControlEntry(RemoveAccessControlEntryRecord),
    /// `ClientQuotaRecord` (api key 14): a client quota was set or removed
    /// (KIP-546).
    ClientQuota(ClientQuotaRecord),
}

/// `ClientQuotaRecord`: `entity`'s quota `key` is set to `value`, or
/// removed when `remove`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientQuotaRecord {
    /// The entity.
    pub entity: crate::quota::QuotaEntity,
    /// The quota key, e.g. `producer_byte_rate`.
    pub key: String,
    /// The value (ignored when `remove`).
    pub value: crate::quota::QuotaValue,
    /// Whether the key is removed.
    pub remove: bool,
}

/// `AccessControlEntryRecord`: the ACL `acl` exists under `id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessControlEntryRecord {
    /// The ACL's id (a random UUID).
    pub id: crate::acl::AclId,
    /// The ACL.
    pub acl: crate::acl::StandardAcl,
}

/// `RemoveAccessControlEntryRecord`: the ACL `id` is deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveAccessControlEntryRecord {
    /// The ACL's id.
    pub id: crate::acl::AclId,
}

/// A SCRAM mechanism (KIP-84), with Kafka's type ids (`ScramMechanism` in
/// `org.apache.kafka.clients.admin`): 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ScramMechanism {
    /// `SCRAM-SHA-256` (RFC 7677), type 1.
    ScramSha256,
    /// `SCRAM-SHA-512`, type 2.
    ScramSha512,
}

impl ScramMechanism {
    /// Both mechanisms, in type order.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::ScramSha256, ScramMechanism::ScramSha512];

    /// The fewest PBKDF2 iterations a credential may have (Kafka's
    /// `ScramMechanism.minIterations`: 4096 for both).
    pub const MIN_ITERATIONS: i32 = 4096;

    /// The most iterations Kafka's controller accepts
    /// (`ScramControlManager.MAX_ITERATIONS`).
    pub const MAX_ITERATIONS: i32 = 16384;

    /// The SASL mechanism name, e.g. `SCRAM-SHA-256`.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::ScramSha256 => "SCRAM-SHA-256",
            ScramMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism named `name` (exact, upper case), if it is one.
    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's type id (the `Mechanism` field of the records and of
    /// Describe/AlterUserScramCredentials).
    pub fn type_id(self) -> i8 {
        match self {
            ScramMechanism::ScramSha256 => 1,
            ScramMechanism::ScramSha512 => 2,
        }
    }

    /// The mechanism of a type id; `None` for 0 (Kafka's `UNKNOWN`) and
    /// any other value.
    pub fn from_type_id(id: i8) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.type_id() == id)
    }
}

/// What the broker keeps of a SCRAM credential (RFC 5802 section 3): never
/// the password, only what verifies a client proof and signs the server's
/// answer. `Debug` hides every field but the iterations.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    /// The random salt.
    pub salt: Vec<u8>,
    /// `H(HMAC(SaltedPassword, "Client Key"))`.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: Vec<u8>,
    /// PBKDF2 iterations of the salted password.
    pub iterations: i32,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential")
            .field("salt", &"[hidden]")
            .field("stored_key", &"[hidden]")
            .field("server_key", &"[hidden]")
            .field("iterations", &self.iterations)
            .finish()
    }
}

/// `UserScramCredentialRecord`: user `name`'s credential for `mechanism`
/// (replaces any earlier one for the same user and mechanism).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserScramCredentialRecord {
    /// The user name (the principal is `User:<name>`).
    pub name: String,
    /// The mechanism.
    pub mechanism: ScramMechanism,
    /// The credential.
    pub credential: ScramCredential,
}

/// `RemoveUserScramCredentialRecord`: user `name`'s credential for
/// `mechanism` is deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveUserScramCredentialRecord {
    /// The user name.
    pub name: String,
    /// The mechanism.
    pub mechanism: ScramMechanism,
}

/// A listener a broker can be reached on (`BrokerEndpoint` in `RegisterBrokerRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerEndpoint {
    /// Listener name, e.g. `PLAINTEXT`.
    pub name: String,
    /// Advertised host name or address.
    pub host: String,
    /// Advertised TCP port.
    pub port: u16,
    /// Kafka's `SecurityProtocol` id: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL.
    pub security_protocol: i16,
}

/// `RegisterBrokerRecord`: a broker registration (replaces any previous one
/// for the same `broker_id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterBrokerRecord {
    /// The broker id (`node.id`).
    pub broker_id: i32,
    /// Random id of this broker process incarnation.
    pub incarnation_id: uuid::Uuid,
    /// The broker epoch assigned by the controller; grows with each registration.
    pub broker_epoch: i64,
    /// Listeners the broker advertises.
    pub end_points: Vec<BrokerEndpoint>,
    /// Rack (`broker.rack`), if configured.
    pub rack: Option<String>,
    /// True if the broker starts fenced (Kafka's default); a single-node
    /// controller registers brokers unfenced.
    pub fenced: bool,
}

/// `TopicRecord`: a topic with its name and id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    /// Topic name.
    pub name: String,
    /// Topic id (KIP-516).
    pub topic_id: TopicId,
}

/// `PartitionRecord`: one partition of a topic created by a [`TopicRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    /// Partition index, from 0.
    pub partition_id: i32,
    /// Id of the owning topic.
    pub topic_id: TopicId,
    /// Replica broker ids, preferred leader first.
    pub replicas: Vec<i32>,
    /// In-sync replica broker ids.
    pub isr: Vec<i32>,
    /// Leader broker id, or -1 for none.
    pub leader: i32,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// Partition epoch: bumped on every change of the partition.
    pub partition_epoch: i32,
    /// Whether the leader is still recovering from an unclean election
    /// (KIP-704); absent in records written before it existed.
    #[serde(default)]
    pub leader_recovery_state: LeaderRecoveryState,
    /// Eligible leader replicas (KIP-966): replicas outside the ISR that
    /// hold every record up to the high watermark; empty at creation.
    #[serde(default)]
    pub eligible_leader_replicas: Vec<i32>,
    /// The last known leader once the ISR and ELR are empty (KIP-966,
    /// Kafka's `LastKnownElr`); empty at creation.
    #[serde(default)]
    pub last_known_elr: Vec<i32>,
}

impl PartitionRecord {
    /// Partition `partition_id` of `topic_id` as a creation registers it
    /// (Kafka's `ReplicationControlManager.createPartitions`): ISR `isr`,
    /// led by its first broker (-1 when empty), epochs 0, recovered, no ELR.
    pub fn new(partition_id: i32, topic_id: TopicId, replicas: Vec<i32>, isr: Vec<i32>) -> Self {
        PartitionRecord {
            partition_id,
            topic_id,
            replicas,
            leader: isr.first().copied().unwrap_or(-1),
            isr,
            leader_epoch: 0,
            partition_epoch: 0,
            leader_recovery_state: LeaderRecoveryState::Recovered,
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
        }
    }
}

/// `PartitionChangeRecord`: a change to an existing partition. `None` fields
/// are unchanged, and left out of the encoded record (with them, fencing a
/// broker in 100,000 ISRs wrote 20.4 MiB, over one AppendEntries frame;
/// records written with the nulls still decode). Replay bumps the
/// partition epoch, and the leader epoch when the leader changes.
/// [`Default`] is a change of nothing to partition 0 of the nil topic id,
/// to be filled in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionChangeRecord {
    /// Partition index.
    pub partition_id: i32,
    /// Id of the owning topic.
    pub topic_id: TopicId,
    /// New ISR, if it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isr: Option<Vec<i32>>,
    /// New leader (-1 for none), if it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<i32>,
    /// New replica set, if it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<Vec<i32>>,
    /// New leader recovery state (KIP-704), if it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_recovery_state: Option<LeaderRecoveryState>,
    /// New eligible leader replicas (KIP-966), if they changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eligible_leader_replicas: Option<Vec<i32>>,
    /// New last known ELR (KIP-966), if it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_known_elr: Option<Vec<i32>>,
}

/// Kafka's `LeaderRecoveryState` (KIP-704) of a partition: an unclean
/// election (a leader from outside the ISR) leaves the partition
/// `Recovering` until its leader reports `Recovered` through AlterPartition;
/// while recovering the ISR stays the leader alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LeaderRecoveryState {
    /// Wire value 0: the leader was elected cleanly or has recovered.
    #[default]
    Recovered,
    /// Wire value 1: the leader was elected uncleanly and has not yet
    /// reported that it recovered.
    Recovering,
}

impl LeaderRecoveryState {
    /// The state for a wire value (`AlterPartitionRequest`'s
    /// `LeaderRecoveryState`, `PartitionRecord`'s); `None` for values Kafka
    /// does not know (its `LeaderRecoveryState.of` throws).
    pub fn from_wire(value: i8) -> Option<LeaderRecoveryState> {
        match value {
            0 => Some(LeaderRecoveryState::Recovered),
            1 => Some(LeaderRecoveryState::Recovering),
            _ => None,
        }
    }

    /// The wire value: 0 `Recovered`, 1 `Recovering`.
    pub fn value(self) -> i8 {
        match self {
            LeaderRecoveryState::Recovered => 0,
            LeaderRecoveryState::Recovering => 1,
        }
    }
}

/// `RemoveTopicRecord`: a topic and all its partitions and configs are deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveTopicRecord {
    /// Id of the deleted topic.
    pub topic_id: TopicId,
}

/// Kafka's `ConfigResource.Type` for the resources a [`ConfigRecord`] can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(i8)]
pub enum ConfigResourceType {
    /// `TOPIC` (2): resource name is the topic name.
    Topic = 2,
    /// `BROKER` (4): resource name is the broker id, or empty for the cluster default.
    Broker = 4,
}

impl ConfigResourceType {
    /// The wire id of this type (Kafka's `ConfigResource.Type.id()`).
    pub fn id(self) -> i8 {
        self as i8
    }
}

/// `ConfigRecord`: sets (`value: Some`) or deletes (`value: None`) one config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigRecord {
    /// What kind of resource the config belongs to.
    pub resource_type: ConfigResourceType,
    /// The topic name or broker id.
    pub resource_name: String,
    /// Config key, e.g. `retention.ms`.
    pub name: String,
    /// New value; `None` deletes the key (back to the default).
    pub value: Option<String>,
}

/// `ProducerIdsRecord`: the controller handed `broker_id` the producer-id block
/// ending just before `next_producer_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdsRecord {
    /// Broker that requested the block.
    pub broker_id: i32,
    /// That broker's epoch at the time.
    pub broker_epoch: i64,
    /// The first producer id not yet handed out.
    pub next_producer_id: i64,
}

/// `FenceBrokerRecord`: the broker may no longer lead or be in an ISR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceBrokerRecord {
    /// Broker id.
    pub id: i32,
    /// Broker epoch of the registration being fenced.
    pub epoch: i64,
}

/// `UnfenceBrokerRecord`: the broker may lead and join ISRs again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnfenceBrokerRecord {
    /// Broker id.
    pub id: i32,
    /// Broker epoch of the registration being unfenced.
    pub epoch: i64,
}

/// `BrokerRegistrationChangeRecord`: a change to a broker's registration
/// other than fencing (Weir keeps [`FenceBrokerRecord`] and
/// [`UnfenceBrokerRecord`] for that).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistrationChangeRecord {
    /// Broker id.
    pub broker_id: i32,
    /// Broker epoch of the registration changed.
    pub broker_epoch: i64,
    /// True: the broker entered controlled shutdown (Kafka's
    /// `BrokerRegistrationInControlledShutdownChange.IN_CONTROLLED_SHUTDOWN`);
    /// it may no longer lead nor join ISRs, and stays so until it
    /// registers again. False changes nothing.
    pub in_controlled_shutdown: bool,
}

/// The feature (KIP-584) whose level 1 turns on Eligible Leader Replicas
/// (KIP-966), as Kafka's `EligibleLeaderReplicasVersion`: on for clusters
/// created by this version (Kafka 4.1's default for new clusters), off for
/// metadata written before it existed.
pub const ELIGIBLE_LEADER_REPLICAS_VERSION: &str = "eligible.leader.replicas.version";

/// `FeatureLevelRecord`: the finalized level of a feature (KIP-584), e.g.
/// `metadata.version`. Level 0 removes the feature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureLevelRecord {
    /// Feature name.
    pub name: String,
    /// Finalized level.
    pub feature_level: i16,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unchanged fields are left out of an encoded PartitionChangeRecord;
    /// a record written with them as nulls (before) decodes to the same.
    #[test]
    fn a_partition_change_leaves_out_unchanged_fields_and_decodes_the_older_nulls() {
        let change = MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 7,
            topic_id: uuid::Uuid::from_u128(42),
            isr: Some(vec![1, 2]),
            leader: Some(1),
            ..PartitionChangeRecord::default()
        });
        let encoded = serde_json::to_string(&change).unwrap();
        assert!(!encoded.contains("null"), "{encoded}");
        let older = r#"{"PartitionChange":{"partition_id":7,"topic_id":"00000000-0000-0000-0000-00000000002a","isr":[1,2],"leader":1,"replicas":null,"leader_recovery_state":null,"eligible_leader_replicas":null,"last_known_elr":null}}"#;
        for json in [encoded.as_str(), older] {
            let decoded: MetadataRecord = serde_json::from_str(json).unwrap();
            assert_eq!(decoded, change, "{json}");
        }
    }
}
