//! The `MetadataImage`: an immutable view of cluster metadata built by
//! replaying [`MetadataRecord`]s in log order.
//!
//! As in Kafka's `org.apache.kafka.image.MetadataImage`, replay is the only
//! way state changes: the state machine clones the current image, applies a
//! committed batch with [`MetadataImage::apply`] and publishes the result as
//! a new `Arc<MetadataImage>`. Readers never see a half-applied batch. This
//! module holds no I/O and knows nothing about raft.
//!
//! Each topic sits behind its own `Arc` (as Kafka's images share unchanged
//! `TopicImage`s between versions): cloning an image copies one pointer per
//! topic, replay copies only the topics a record changes
//! (`Arc::make_mut`), and a reader finds what changed between two images
//! by comparing pointers ([`MetadataImage::changed_topics`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::records::{
    BrokerEndpoint, ConfigResourceType, LeaderRecoveryState, MetadataRecord, PartitionChangeRecord,
    ScramCredential, ScramMechanism, ELIGIBLE_LEADER_REPLICAS_VERSION,
};

/// A topic id (KIP-516): a random, never-zero UUID.
pub type TopicId = uuid::Uuid;

/// A record that cannot be replayed onto the current image. Records are
/// computed by the controller from the same image, so this means a bug or a
/// corrupt log; the state machine logs it and skips the record.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ReplayError {
    /// A record names a topic id that is not in the image.
    #[error("{record} names unknown topic id {topic_id}")]
    UnknownTopicId {
        /// The record type, e.g. `PartitionRecord`.
        record: &'static str,
        /// The topic id it names.
        topic_id: TopicId,
    },
    /// A `ConfigRecord` names a topic that is not in the image.
    #[error("ConfigRecord names unknown topic '{name}'")]
    UnknownTopicName {
        /// The topic name.
        name: String,
    },
    /// A `PartitionChangeRecord` names a partition that does not exist.
    #[error("PartitionChangeRecord names unknown partition {partition_id} of topic id {topic_id}")]
    UnknownPartition {
        /// The topic id.
        topic_id: TopicId,
        /// The partition index.
        partition_id: i32,
    },
    /// A `TopicRecord` reuses an existing name or id.
    #[error("TopicRecord for '{name}' ({topic_id}) collides with an existing topic")]
    TopicExists {
        /// The topic name.
        name: String,
        /// The topic id.
        topic_id: TopicId,
    },
    /// A fence/unfence record names a broker registration that does not exist.
    #[error("{record} names broker {broker_id} epoch {epoch}, which is not registered")]
    UnknownBrokerEpoch {
        /// The record type.
        record: &'static str,
        /// The broker id.
        broker_id: i32,
        /// The broker epoch named by the record.
        epoch: i64,
    },
    /// A `RemoveUserScramCredentialRecord` names a credential that does not
    /// exist (Kafka's `ScramControlManager.replay`: "Unable to find
    /// credential to delete").
    #[error("RemoveUserScramCredentialRecord: no {mechanism} credential of user {name}")]
    UnknownScramCredential {
        /// The user name.
        name: String,
        /// The mechanism.
        mechanism: &'static str,
    },
    /// An `AccessControlEntryRecord` reuses the id of an existing ACL
    /// (Kafka's `AclControlManager.replay`: "Found duplicate ACL ID").
    #[error("AccessControlEntryRecord: ACL id {id} already exists")]
    DuplicateAclId {
        /// The ACL id.
        id: crate::acl::AclId,
    },
    /// A `RemoveAccessControlEntryRecord` names an ACL that does not exist
    /// (Kafka's `AclControlManager.replay`: "Attempt to remove non-existent
    /// ACL").
    #[error("RemoveAccessControlEntryRecord: no ACL with id {id}")]
    UnknownAclId {
        /// The ACL id.
        id: crate::acl::AclId,
    },
    /// A `ProducerIdsRecord` would move the next producer id backwards.
    #[error("ProducerIdsRecord moves next producer id back from {current} to {requested}")]
    ProducerIdsBackwards {
        /// Next producer id in the image.
        current: i64,
        /// Next producer id in the record.
        requested: i64,
    },
}

/// Cluster metadata at one offset of the metadata log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataImage {
    /// The cluster id from `meta.properties`.
    pub cluster_id: String,
    /// The active controller (current raft leader), if known.
    pub controller_id: Option<i32>,
    /// Registered brokers by id.
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    /// Topics by name, each shared with the images before it until a
    /// record changes it.
    pub topics: BTreeMap<String, Arc<TopicImage>>,
    /// Topic names by topic id (the same topics as `topics`).
    pub topic_names_by_id: HashMap<TopicId, String>,
    /// Dynamic broker configs: resource name (broker id, or empty for the
    /// cluster default) to explicitly set keys.
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Finalized feature levels (KIP-584) by feature name.
    pub features: BTreeMap<String, i16>,
    /// The first producer id not yet handed out (Kafka's `ProducerIdsImage`).
    pub next_producer_id: i64,
    /// SCRAM credentials (Kafka's `ScramImage`): user name to its
    /// credential per mechanism; a user has at least one. Absent in
    /// snapshots written before SCRAM was served.
    #[serde(default)]
    pub scram_credentials: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
    /// ACLs (Kafka's `AclsImage`), indexed for authorization and shared
    /// with the images before it until an ACL record changes them. Absent
    /// in snapshots written before ACLs were served.
    #[serde(default)]
    pub acls: Arc<crate::acl::AclCache>,
    /// Client quotas (Kafka's `ClientQuotasImage`). Absent in snapshots
    /// written before quotas were stored.
    #[serde(default)]
    pub client_quotas: crate::quota::ClientQuotas,
    /// Raft log index of the last entry applied to this image (0 before any).
    pub last_applied_offset: u64,
}

/// What [`MetadataImage::changed_topics`] found between two images.
#[derive(Debug, Default)]
pub struct TopicChanges<'a> {
    /// Topics added or changed, in name order.
    pub changed: Vec<&'a TopicImage>,
    /// Names of topics removed, in name order.
    pub removed: Vec<String>,
}

/// One topic in the image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicImage {
    /// Topic name.
    pub name: String,
    /// Topic id.
    pub topic_id: TopicId,
    /// Partitions by index.
    pub partitions: BTreeMap<i32, PartitionRegistration>,
    /// Only the explicitly set topic configs (defaults are the broker's).
    pub configs: BTreeMap<String, String>,
}

/// The replicas, ISR and leader of one partition (Kafka's
/// `PartitionRegistration`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRegistration {
    /// Replica broker ids, preferred leader first.
    pub replicas: Vec<i32>,
    /// In-sync replica broker ids.
    pub isr: Vec<i32>,
    /// Leader broker id, or -1 for none.
    pub leader: i32,
    /// Leader epoch: bumped when the leader changes.
    pub leader_epoch: i32,
    /// Partition epoch: bumped on every change.
    pub partition_epoch: i32,
    /// Whether the leader is still recovering from an unclean election
    /// (KIP-704); `Recovered` in images written before it existed.
    #[serde(default)]
    pub leader_recovery_state: LeaderRecoveryState,
    /// Eligible leader replicas (KIP-966): replicas outside the ISR known
    /// to hold every record up to the high watermark, which may be elected
    /// cleanly when the ISR is empty. Non-empty only while the ISR is below
    /// the topic's effective `min.insync.replicas` with ELR enabled.
    #[serde(default)]
    pub elr: Vec<i32>,
    /// The last known leader (KIP-966's `LastKnownElr` as Kafka 4.1 uses
    /// it): set when the partition loses its leader with an empty ISR,
    /// cleared when it has a leader again.
    #[serde(default)]
    pub last_known_elr: Vec<i32>,
}

impl PartitionRegistration {
    /// This partition with `change` applied (Kafka's
    /// `PartitionRegistration.merge`): the fields it sets replace the
    /// current ones, the leader epoch is bumped when the leader changes and
    /// the partition epoch always. Replay of a `PartitionChangeRecord` is
    /// exactly this.
    pub fn merged(&self, change: &PartitionChangeRecord) -> PartitionRegistration {
        let mut p = self.clone();
        if let Some(isr) = &change.isr {
            p.isr = isr.clone();
        }
        if let Some(replicas) = &change.replicas {
            p.replicas = replicas.clone();
        }
        if let Some(state) = change.leader_recovery_state {
            p.leader_recovery_state = state;
        }
        if let Some(elr) = &change.eligible_leader_replicas {
            p.elr = elr.clone();
        }
        if let Some(last_known_elr) = &change.last_known_elr {
            p.last_known_elr = last_known_elr.clone();
        }
        if let Some(leader) = change.leader {
            if leader != p.leader {
                p.leader = leader;
                p.leader_epoch = p.leader_epoch.saturating_add(1);
            }
        }
        p.partition_epoch = p.partition_epoch.saturating_add(1);
        p
    }
}

/// One registered broker (Kafka's `BrokerRegistration`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    /// Broker id.
    pub broker_id: i32,
    /// Incarnation id of the registering process.
    pub incarnation_id: uuid::Uuid,
    /// Broker epoch of this registration.
    pub broker_epoch: i64,
    /// Advertised listeners.
    pub endpoints: Vec<BrokerEndpoint>,
    /// Rack, if configured.
    pub rack: Option<String>,
    /// Fenced brokers may not lead partitions or be in ISRs.
    pub fenced: bool,
    /// The broker asked to shut down (Kafka's `inControlledShutdown`): it
    /// may no longer lead nor join ISRs, while it is still unfenced until
    /// the controller lets it go. Reset by a new registration.
    #[serde(default)]
    pub in_controlled_shutdown: bool,
}

impl BrokerRegistration {
    /// True for a broker that may lead and be in an ISR: unfenced and not in
    /// controlled shutdown (Kafka's `ClusterControlManager.isActive`).
    pub fn is_active(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }

    /// The endpoint of listener `listener` (names compare without case, as
    /// Kafka's `ListenerName.normalised`), `None` when the broker has no
    /// such listener (Kafka's `BrokerRegistration.node(listenerName)`).
    pub fn endpoint(&self, listener: &str) -> Option<&BrokerEndpoint> {
        self.endpoints
            .iter()
            .find(|e| e.name.eq_ignore_ascii_case(listener))
    }
}

impl MetadataImage {
    /// An empty image for the given cluster.
    pub fn new(cluster_id: impl Into<String>) -> Self {
        MetadataImage {
            cluster_id: cluster_id.into(),
            ..MetadataImage::default()
        }
    }

    /// The topic called `name`, if it exists.
    pub fn topic(&self, name: &str) -> Option<&TopicImage> {
        self.topics.get(name).map(|t| &**t)
    }

    /// The topic with id `id`, if it exists.
    pub fn topic_by_id(&self, id: &TopicId) -> Option<&TopicImage> {
        self.topic_names_by_id
            .get(id)
            .and_then(|name| self.topics.get(name))
            .map(|t| &**t)
    }

    /// The topics that differ from `previous`: those added or changed (a
    /// `TopicImage` that is not the one `previous` shares, so possibly equal
    /// in value when the two images were not replayed from one another) and
    /// the names of those removed. O(topics), never O(partitions).
    pub fn changed_topics<'a>(&'a self, previous: &MetadataImage) -> TopicChanges<'a> {
        let changed = self
            .topics
            .iter()
            .filter(|(name, topic)| {
                previous
                    .topics
                    .get(*name)
                    .is_none_or(|old| !Arc::ptr_eq(old, topic))
            })
            .map(|(_, topic)| &**topic)
            .collect();
        let removed = previous
            .topics
            .keys()
            .filter(|name| !self.topics.contains_key(*name))
            .cloned()
            .collect();
        TopicChanges { changed, removed }
    }

    /// True when Eligible Leader Replicas (KIP-966) are on: the
    /// [`ELIGIBLE_LEADER_REPLICAS_VERSION`] feature is at level 1 or more
    /// (Kafka's `FeatureControlManager.isElrFeatureEnabled`).
    pub fn elr_enabled(&self) -> bool {
        self.features
            .get(ELIGIBLE_LEADER_REPLICAS_VERSION)
            .is_some_and(|&level| level >= 1)
    }

    /// Unfenced broker ids in ascending order.
    pub fn unfenced_broker_ids(&self) -> Vec<i32> {
        self.brokers
            .values()
            .filter(|b| !b.fenced)
            .map(|b| b.broker_id)
            .collect()
    }

    /// Replays one record onto this image.
    ///
    /// # Errors
    ///
    /// [`ReplayError`] when the record contradicts the image (unknown topic,
    /// partition or broker epoch; duplicate topic; producer ids going
    /// backwards). The image is unchanged in that case.
    pub fn apply(&mut self, record: &MetadataRecord) -> Result<(), ReplayError> {
        match record {
            MetadataRecord::RegisterBroker(r) => {
                self.brokers.insert(
                    r.broker_id,
                    BrokerRegistration {
                        broker_id: r.broker_id,
                        incarnation_id: r.incarnation_id,
                        broker_epoch: r.broker_epoch,
                        endpoints: r.end_points.clone(),
                        rack: r.rack.clone(),
                        fenced: r.fenced,
                        in_controlled_shutdown: false,
                    },
                );
            }
            MetadataRecord::Topic(r) => {
                if self.topics.contains_key(&r.name)
                    || self.topic_names_by_id.contains_key(&r.topic_id)
                {
                    return Err(ReplayError::TopicExists {
                        name: r.name.clone(),
                        topic_id: r.topic_id,
                    });
                }
                self.topic_names_by_id.insert(r.topic_id, r.name.clone());
                self.topics.insert(
                    r.name.clone(),
                    Arc::new(TopicImage {
                        name: r.name.clone(),
                        topic_id: r.topic_id,
                        partitions: BTreeMap::new(),
                        configs: BTreeMap::new(),
                    }),
                );
            }
            MetadataRecord::Partition(r) => {
                let topic = self.topic_by_id_mut("PartitionRecord", &r.topic_id)?;
                topic.partitions.insert(
                    r.partition_id,
                    PartitionRegistration {
                        replicas: r.replicas.clone(),
                        isr: r.isr.clone(),
                        leader: r.leader,
                        leader_epoch: r.leader_epoch,
                        partition_epoch: r.partition_epoch,
                        leader_recovery_state: r.leader_recovery_state,
                        elr: r.eligible_leader_replicas.clone(),
                        last_known_elr: r.last_known_elr.clone(),
                    },
                );
            }
            MetadataRecord::PartitionChange(r) => {
                let topic = self.topic_by_id_mut("PartitionChangeRecord", &r.topic_id)?;
                let partition = topic.partitions.get_mut(&r.partition_id).ok_or(
                    ReplayError::UnknownPartition {
                        topic_id: r.topic_id,
                        partition_id: r.partition_id,
                    },
                )?;
                *partition = partition.merged(r);
            }
            MetadataRecord::RemoveTopic(r) => {
                let name = self.topic_names_by_id.remove(&r.topic_id).ok_or(
                    ReplayError::UnknownTopicId {
                        record: "RemoveTopicRecord",
                        topic_id: r.topic_id,
                    },
                )?;
                self.topics.remove(&name);
            }
            MetadataRecord::Config(r) => {
                let configs = match r.resource_type {
                    ConfigResourceType::Topic => {
                        &mut Arc::make_mut(self.topics.get_mut(&r.resource_name).ok_or_else(
                            || ReplayError::UnknownTopicName {
                                name: r.resource_name.clone(),
                            },
                        )?)
                        .configs
                    }
                    ConfigResourceType::Broker => self
                        .broker_configs
                        .entry(r.resource_name.clone())
                        .or_default(),
                };
                match &r.value {
                    Some(value) => {
                        configs.insert(r.name.clone(), value.clone());
                    }
                    None => {
                        configs.remove(&r.name);
                    }
                }
                if r.resource_type == ConfigResourceType::Broker {
                    self.broker_configs.retain(|_, c| !c.is_empty());
                }
            }
            MetadataRecord::ProducerIds(r) => {
                if r.next_producer_id < self.next_producer_id {
                    return Err(ReplayError::ProducerIdsBackwards {
                        current: self.next_producer_id,
                        requested: r.next_producer_id,
                    });
                }
                self.next_producer_id = r.next_producer_id;
            }
            MetadataRecord::FenceBroker(r) => {
                self.broker_with_epoch_mut("FenceBrokerRecord", r.id, r.epoch)?
                    .fenced = true;
            }
            MetadataRecord::UnfenceBroker(r) => {
                self.broker_with_epoch_mut("UnfenceBrokerRecord", r.id, r.epoch)?
                    .fenced = false;
            }
            MetadataRecord::BrokerRegistrationChange(r) => {
                let broker = self.broker_with_epoch_mut(
                    "BrokerRegistrationChangeRecord",
                    r.broker_id,
                    r.broker_epoch,
                )?;
                if r.in_controlled_shutdown {
                    broker.in_controlled_shutdown = true;
                }
            }
            MetadataRecord::UserScramCredential(r) => {
                self.scram_credentials
                    .entry(r.name.clone())
                    .or_default()
                    .insert(r.mechanism, r.credential.clone());
            }
            MetadataRecord::RemoveUserScramCredential(r) => {
                let user = self.scram_credentials.get_mut(&r.name);
                if user.and_then(|u| u.remove(&r.mechanism)).is_none() {
                    return Err(ReplayError::UnknownScramCredential {
                        name: r.name.clone(),
                        mechanism: r.mechanism.name(),
                    });
                }
                self.scram_credentials
                    .retain(|_, by_mechanism| !by_mechanism.is_empty());
            }
            MetadataRecord::AccessControlEntry(r) => {
                if self.acls.get(&r.id).is_some() {
                    return Err(ReplayError::DuplicateAclId { id: r.id });
                }
                Arc::make_mut(&mut self.acls).insert(r.id, r.acl.clone());
            }
            MetadataRecord::RemoveAccessControlEntry(r) => {
                if self.acls.get(&r.id).is_none() {
                    return Err(ReplayError::UnknownAclId { id: r.id });
                }
                Arc::make_mut(&mut self.acls).remove(&r.id);
            }
            MetadataRecord::ClientQuota(r) => {
                // Kafka's ClientQuotaControlManager.replay: removing a key
                // that is not set changes nothing.
                let quotas = &mut self.client_quotas.0;
                if r.remove {
                    if let Some(values) = quotas.get_mut(&r.entity) {
                        values.remove(&r.key);
                        if values.is_empty() {
                            quotas.remove(&r.entity);
                        }
                    }
                } else {
                    quotas
                        .entry(r.entity.clone())
                        .or_default()
                        .insert(r.key.clone(), r.value);
                }
            }
            MetadataRecord::FeatureLevel(r) => {
                if r.feature_level == 0 {
                    self.features.remove(&r.name);
                } else {
                    self.features.insert(r.name.clone(), r.feature_level);
                }
            }
        }
        Ok(())
    }

    fn topic_by_id_mut(
        &mut self,
        record: &'static str,
        topic_id: &TopicId,
    ) -> Result<&mut TopicImage, ReplayError> {
        self.topic_names_by_id
            .get(topic_id)
            .and_then(|name| self.topics.get_mut(name))
            .map(Arc::make_mut)
            .ok_or(ReplayError::UnknownTopicId {
                record,
                topic_id: *topic_id,
            })
    }

    fn broker_with_epoch_mut(
        &mut self,
        record: &'static str,
        broker_id: i32,
        epoch: i64,
    ) -> Result<&mut BrokerRegistration, ReplayError> {
        self.brokers
            .get_mut(&broker_id)
            .filter(|b| b.broker_epoch == epoch)
            .ok_or(ReplayError::UnknownBrokerEpoch {
                record,
                broker_id,
                epoch,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::*;

    fn broker(id: i32, epoch: i64) -> MetadataRecord {
        MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: id,
            incarnation_id: uuid::Uuid::from_u128(id as u128 + 1),
            broker_epoch: epoch,
            end_points: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: "localhost".into(),
                port: 9092 + id as u16,
                security_protocol: 0,
            }],
            rack: None,
            fenced: false,
        })
    }

    #[test]
    fn replay_builds_expected_image() {
        let t1 = uuid::Uuid::from_u128(0xa);
        let t2 = uuid::Uuid::from_u128(0xb);
        let records = vec![
            broker(1, 10),
            broker(2, 11),
            MetadataRecord::Topic(TopicRecord {
                name: "orders".into(),
                topic_id: t1,
            }),
            MetadataRecord::Partition(PartitionRecord::new(0, t1, vec![1, 2], vec![1, 2])),
            MetadataRecord::Config(ConfigRecord {
                resource_type: ConfigResourceType::Topic,
                resource_name: "orders".into(),
                name: "retention.ms".into(),
                value: Some("1000".into()),
            }),
            MetadataRecord::Config(ConfigRecord {
                resource_type: ConfigResourceType::Topic,
                resource_name: "orders".into(),
                name: "cleanup.policy".into(),
                value: Some("compact".into()),
            }),
            MetadataRecord::Config(ConfigRecord {
                resource_type: ConfigResourceType::Topic,
                resource_name: "orders".into(),
                name: "retention.ms".into(),
                value: None,
            }),
            MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id: 0,
                topic_id: t1,
                isr: Some(vec![2]),
                leader: Some(2),
                replicas: None,
                leader_recovery_state: None,
                eligible_leader_replicas: None,
                last_known_elr: None,
            }),
            MetadataRecord::Topic(TopicRecord {
                name: "gone".into(),
                topic_id: t2,
            }),
            MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id: t2 }),
            MetadataRecord::ProducerIds(ProducerIdsRecord {
                broker_id: 1,
                broker_epoch: 10,
                next_producer_id: 1000,
            }),
            MetadataRecord::FenceBroker(FenceBrokerRecord { id: 2, epoch: 11 }),
            MetadataRecord::FeatureLevel(FeatureLevelRecord {
                name: "metadata.version".into(),
                feature_level: 7,
            }),
        ];
        let mut image = MetadataImage::new("c1");
        for r in &records {
            image.apply(r).unwrap();
        }

        assert_eq!(image.brokers.len(), 2);
        assert!(image.brokers[&2].fenced);
        assert_eq!(image.unfenced_broker_ids(), vec![1]);
        assert_eq!(image.next_producer_id, 1000);
        assert_eq!(image.features["metadata.version"], 7);
        assert!(image.topic("gone").is_none());
        assert!(image.topic_by_id(&t2).is_none());
        let orders = image.topic_by_id(&t1).unwrap();
        assert_eq!(orders.name, "orders");
        assert_eq!(
            orders.configs,
            BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())])
        );
        assert_eq!(
            orders.partitions[&0],
            PartitionRegistration {
                replicas: vec![1, 2],
                isr: vec![2],
                leader: 2,
                leader_epoch: 1,
                partition_epoch: 1,
                leader_recovery_state: LeaderRecoveryState::Recovered,
                elr: vec![],
                last_known_elr: vec![],
            }
        );
        assert_eq!(image.topics.len(), image.topic_names_by_id.len());
    }

    #[test]
    fn replay_rejects_contradicting_records_without_change() {
        let mut image = MetadataImage::new("c1");
        image.apply(&broker(1, 5)).unwrap();
        let before = image.clone();
        let unknown = uuid::Uuid::from_u128(7);
        let bad = [
            MetadataRecord::Partition(PartitionRecord::new(0, unknown, vec![1], vec![1])),
            MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id: unknown }),
            MetadataRecord::FenceBroker(FenceBrokerRecord { id: 1, epoch: 4 }),
            MetadataRecord::Config(ConfigRecord {
                resource_type: ConfigResourceType::Topic,
                resource_name: "nope".into(),
                name: "x".into(),
                value: Some("y".into()),
            }),
        ];
        for r in &bad {
            assert!(image.apply(r).is_err(), "{r:?} should not replay");
        }
        assert_eq!(image, before);
    }

    /// Replay copies only the topic a record touches: the image cloned
    /// before it still shares every other topic, and `changed_topics`
    /// names exactly the topics changed, added and removed.
    #[test]
    fn replay_shares_untouched_topics_and_changed_topics_names_the_rest() {
        let id = |n: u128| uuid::Uuid::from_u128(n);
        let partition = |topic_id, partition_id| {
            MetadataRecord::Partition(PartitionRecord::new(
                partition_id,
                topic_id,
                vec![1],
                vec![1],
            ))
        };
        let mut before = MetadataImage::new("c1");
        before.apply(&broker(1, 1)).unwrap();
        for (n, name) in [(1, "a"), (2, "b"), (3, "c"), (4, "d")] {
            before
                .apply(&MetadataRecord::Topic(TopicRecord {
                    name: name.into(),
                    topic_id: id(n),
                }))
                .unwrap();
            before.apply(&partition(id(n), 0)).unwrap();
        }
        assert!(before.changed_topics(&before).changed.is_empty());

        let mut after = before.clone();
        for name in ["a", "b", "c", "d"] {
            assert!(Arc::ptr_eq(&before.topics[name], &after.topics[name]));
        }
        // b changes by a partition, c by a config, d goes, e comes.
        after.apply(&partition(id(2), 1)).unwrap();
        after
            .apply(&MetadataRecord::Config(ConfigRecord {
                resource_type: ConfigResourceType::Topic,
                resource_name: "c".into(),
                name: "retention.ms".into(),
                value: Some("1000".into()),
            }))
            .unwrap();
        after
            .apply(&MetadataRecord::RemoveTopic(RemoveTopicRecord {
                topic_id: id(4),
            }))
            .unwrap();
        after
            .apply(&MetadataRecord::Topic(TopicRecord {
                name: "e".into(),
                topic_id: id(5),
            }))
            .unwrap();
        // A broker record touches no topic.
        after.apply(&broker(2, 1)).unwrap();

        assert!(Arc::ptr_eq(&before.topics["a"], &after.topics["a"]));
        assert!(!Arc::ptr_eq(&before.topics["b"], &after.topics["b"]));
        assert!(!Arc::ptr_eq(&before.topics["c"], &after.topics["c"]));
        // The image before is untouched by replay on its clone.
        assert_eq!(before.topics["b"].partitions.len(), 1);
        assert!(before.topics["c"].configs.is_empty());
        assert_eq!(after.topics["b"].partitions.len(), 2);

        let changes = after.changed_topics(&before);
        let changed: Vec<&str> = changes.changed.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(changed, ["b", "c", "e"]);
        assert_eq!(changes.removed, ["d"]);
        // And the other way round: d added back, e removed.
        let back = before.changed_topics(&after);
        let changed: Vec<&str> = back.changed.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(changed, ["b", "c", "d"]);
        assert_eq!(back.removed, ["e"]);
    }

    #[test]
    fn image_survives_json_round_trip() {
        let mut image = MetadataImage::new("c1");
        image.apply(&broker(3, 1)).unwrap();
        let id = uuid::Uuid::from_u128(99);
        image
            .apply(&MetadataRecord::Topic(TopicRecord {
                name: "t".into(),
                topic_id: id,
            }))
            .unwrap();
        let json = serde_json::to_vec(&image).unwrap();
        let back: MetadataImage = serde_json::from_slice(&json).unwrap();
        assert_eq!(back, image);
    }
}
