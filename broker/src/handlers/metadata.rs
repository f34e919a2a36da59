//! Metadata (key 3), v0-12: brokers, cluster id, controller and topic
//! partitions from the metadata image, with auto-creation when allowed.
//!
//! Topic list semantics (case C09): v0 empty list = all topics; v1+ null =
//! all topics, empty = none. v10+ topics may be named by id only (name null):
//! answered with name and id, or UNKNOWN_TOPIC_ID with the id echoed. The
//! all-zero id means "no id". Auto-creation happens only when both the
//! request (v4+ `allow_auto_topic_creation`; always for v0-3) and
//! `auto.create.topics.enable` allow it. Out of file descriptors (issue 15),
//! auto-creation creates nothing and the missing topics answer
//! KAFKA_STORAGE_ERROR; topics created whose logs then could not be created
//! here answer it too (see [`crate::descriptors`]).
//!
//! A topic named (or, by id, identified) more than once is answered once, at
//! its first place: Kafka's `KafkaApis.handleTopicMetadataRequest` collects
//! the requested names and ids into sets.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::ResponseError;
use uuid::Uuid;
use weir_controller::{CreatableTopic, MetadataImage, TopicImage};

use weir_controller::acl::{AclOperation, AclResourceType, CLUSTER_NAME};

use super::str_bytes;
use crate::authorizer::{RequestAuth, AUTHORIZED_OPERATIONS_OMITTED};
use crate::context::BrokerContext;
use crate::error::controller_error_code;

/// Answers a Metadata request, creating missing topics when allowed.
///
/// Brokers are listed with their endpoint of `listener`, the listener the
/// request arrived on; a broker without that listener is left out (Kafka's
/// `KRaftMetadataCache.getAliveBrokerNodes(listenerName)`).
///
/// With an authorizer (Kafka's `KafkaApis.handleTopicMetadataRequest`):
/// all-topics requests list only the topics the client may Describe; a
/// named topic it may not Describe gets TOPIC_AUTHORIZATION_FAILED without
/// its id, existing or not; a missing topic is auto-created only with
/// Create on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED.
pub async fn handle(
    ctx: &BrokerContext,
    listener: &str,
    version: i16,
    request: MetadataRequest,
    auth: &RequestAuth<'_>,
) -> MetadataResponse {
    let mut image = ctx.metadata();
    let all_topics = match &request.topics {
        None => true,
        Some(t) => version == 0 && t.is_empty(),
    };
    let requested = super::first_occurrences(request.topics.unwrap_or_default(), |t| {
        (t.name.clone(), t.name.is_none().then_some(t.topic_id))
    });

    let auto_create =
        ctx.config.auto_create_topics_enable && (version < 4 || request.allow_auto_topic_creation);
    // Named topics the client may not Describe, answered without a look.
    let undescribable: std::collections::HashSet<String> = requested
        .iter()
        .filter_map(|t| t.name.as_ref())
        .filter(|n| !auth.topic(AclOperation::Describe, n))
        .map(|n| n.to_string())
        .collect();
    let mut create_errors = std::collections::HashMap::new();
    if auto_create {
        let mut missing: Vec<String> = requested
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
            .filter(|n| !undescribable.contains(n) && image.topic(n).is_none())
            .collect();
        if !auth.allowed_quietly(AclOperation::Create, AclResourceType::Cluster, CLUSTER_NAME) {
            missing.retain(|name| {
                let allowed = auth.topic(AclOperation::Create, name);
                if !allowed {
                    create_errors
                        .insert(name.clone(), ResponseError::TopicAuthorizationFailed.code());
                }
                allowed
            });
        }
        let refused = match missing.is_empty() {
            true => None,
            false => crate::descriptors::check_headroom_for_creation().err(),
        };
        if let Some((code, _)) = refused {
            for name in &missing {
                create_errors.insert(name.clone(), code.code());
            }
        } else if !missing.is_empty() {
            let creatable = missing
                .iter()
                .map(|name| CreatableTopic {
                    name: name.clone(),
                    num_partitions: ctx.config.num_partitions,
                    replication_factor: ctx.config.default_replication_factor,
                    assignments: Vec::new(),
                    configs: Vec::new(),
                })
                .collect();
            let results = ctx.controller.create_topics(creatable, false).await;
            let mut created = Vec::new();
            for (name, result) in missing.into_iter().zip(results) {
                match result {
                    Ok(_) => created.push(name),
                    Err(e) => {
                        let code = controller_error_code(&e);
                        if code != ResponseError::TopicAlreadyExists.code() {
                            create_errors.insert(name, code);
                        }
                    }
                }
            }
            image = ctx.metadata();
            if let Err(e) = ctx
                .replica_manager
                .apply_image_off_runtime(image.clone())
                .await
            {
                tracing::error!(error = %e, "creating logs for auto-created topics failed");
                let (code, _) = crate::descriptors::log_creation_failed(&e);
                for name in created {
                    create_errors.insert(name, code.code());
                }
            }
        }
    }

    let mut response = MetadataResponse::default();
    response.brokers = brokers(&image, listener);
    response.cluster_id = Some(str_bytes(image.cluster_id.clone()));
    response.controller_id = BrokerId(image.controller_id.unwrap_or(-1));
    // v8-10 only; later versions have no such field (KIP-700).
    // Without Describe on the cluster the bits are 0 (Kafka).
    let cluster_ops_requested =
        (8..=10).contains(&version) && request.include_cluster_authorized_operations;
    response.cluster_authorized_operations =
        if !cluster_ops_requested || auth.cluster(AclOperation::Describe) {
            auth.authorized_operations(
                AclResourceType::Cluster,
                CLUSTER_NAME,
                cluster_ops_requested,
            )
        } else {
            0
        };
    let include_ops = request.include_topic_authorized_operations;
    let topic_ops =
        |name: &str| auth.authorized_operations(AclResourceType::Topic, name, include_ops);

    if all_topics {
        response.topics = image
            .topics
            .values()
            .filter(|t| {
                auth.allowed_quietly(AclOperation::Describe, AclResourceType::Topic, &t.name)
            })
            .map(|t| topic_metadata(&image, t, listener, version, topic_ops(&t.name)))
            .collect();
        return response;
    }
    for t in requested {
        let entry = match &t.name {
            Some(name) if undescribable.contains(name.as_str()) => error_topic(
                Some(name.clone()),
                Uuid::nil(),
                ResponseError::TopicAuthorizationFailed.code(),
                AUTHORIZED_OPERATIONS_OMITTED,
            ),
            Some(name) => match image.topic(name) {
                // Auto-created, but its logs could not be created here.
                Some(topic) => {
                    let mut entry =
                        topic_metadata(&image, topic, listener, version, topic_ops(name));
                    if let Some(&code) = create_errors.get(name.as_str()) {
                        entry.error_code = code;
                    }
                    entry
                }
                None => {
                    let refused = create_errors.get(name.as_str())
                        == Some(&ResponseError::TopicAuthorizationFailed.code());
                    let code = create_errors
                        .get(name.as_str())
                        .copied()
                        .unwrap_or_else(|| {
                            if weir_controller::control::validate_topic_name(name).is_err() {
                                ResponseError::InvalidTopicException.code()
                            } else {
                                ResponseError::UnknownTopicOrPartition.code()
                            }
                        });
                    // Kafka sets the requested bit field on every topic
                    // looked up by name, existing or not (KafkaApis
                    // handleTopicMetadataRequest); only unknown topic ids
                    // keep Int.MIN.
                    error_topic(
                        Some(name.clone()),
                        t.topic_id,
                        code,
                        match refused {
                            true => AUTHORIZED_OPERATIONS_OMITTED,
                            false => topic_ops(name),
                        },
                    )
                }
            },
            None => match image.topic_by_id(&t.topic_id) {
                // Topic ids are not secret: the id is echoed (Kafka).
                Some(topic)
                    if !t.topic_id.is_nil() && !auth.topic(AclOperation::Describe, &topic.name) =>
                {
                    error_topic(
                        None,
                        t.topic_id,
                        ResponseError::TopicAuthorizationFailed.code(),
                        AUTHORIZED_OPERATIONS_OMITTED,
                    )
                }
                Some(topic) if !t.topic_id.is_nil() => {
                    topic_metadata(&image, topic, listener, version, topic_ops(&topic.name))
                }
                _ => error_topic(
                    None,
                    t.topic_id,
                    ResponseError::UnknownTopicId.code(),
                    AUTHORIZED_OPERATIONS_OMITTED,
                ),
            },
        };
        response.topics.push(entry);
    }
    response
}

fn brokers(image: &MetadataImage, listener: &str) -> Vec<MetadataResponseBroker> {
    image
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .filter_map(|b| {
            let ep = b.endpoint(listener)?;
            let mut broker = MetadataResponseBroker::default();
            broker.node_id = BrokerId(b.broker_id);
            broker.host = str_bytes(ep.host.clone());
            broker.port = i32::from(ep.port);
            broker.rack = b.rack.clone().map(str_bytes);
            Some(broker)
        })
        .collect()
}

fn error_topic(
    name: Option<TopicName>,
    topic_id: Uuid,
    code: i16,
    authorized_operations: i32,
) -> MetadataResponseTopic {
    let mut t = MetadataResponseTopic::default();
    t.error_code = code;
    t.name = name;
    t.topic_id = topic_id;
    t.topic_authorized_operations = authorized_operations;
    t
}

/// Whether a topic is one of Kafka's internal topics.
pub fn is_internal(name: &str) -> bool {
    name == "__consumer_offsets" || name == "__transaction_state"
}

/// A topic's partitions as Kafka's `KRaftMetadataCache.partitionMetadata`
/// gives them to a request on `listener`: a leader that is registered,
/// unfenced and has that listener is named; otherwise the leader is -1
/// with LEADER_NOT_AVAILABLE when it is not registered (or there is none),
/// else (fenced, or without the listener) LISTENER_NOT_FOUND from v6 on
/// (`errorUnavailableListeners`) and LEADER_NOT_AVAILABLE before.
fn topic_metadata(
    image: &MetadataImage,
    topic: &TopicImage,
    listener: &str,
    version: i16,
    authorized_operations: i32,
) -> MetadataResponseTopic {
    let mut t = MetadataResponseTopic::default();
    t.name = Some(TopicName(str_bytes(topic.name.clone())));
    t.topic_id = topic.topic_id;
    t.is_internal = is_internal(&topic.name);
    t.topic_authorized_operations = authorized_operations;
    for (&index, p) in &topic.partitions {
        let live = |id: &i32| image.brokers.get(id).map(|b| !b.fenced).unwrap_or(false);
        let mut part = MetadataResponsePartition::default();
        part.partition_index = index;
        let leader = image.brokers.get(&p.leader);
        match leader {
            Some(b) if !b.fenced && b.endpoint(listener).is_some() => {
                part.leader_id = BrokerId(p.leader);
            }
            Some(_) => {
                part.leader_id = BrokerId(-1);
                part.error_code = if version >= 6 {
                    ResponseError::ListenerNotFound.code()
                } else {
                    ResponseError::LeaderNotAvailable.code()
                };
            }
            None => {
                part.leader_id = BrokerId(-1);
                part.error_code = ResponseError::LeaderNotAvailable.code();
            }
        }
        part.leader_epoch = p.leader_epoch;
        part.replica_nodes = p.replicas.iter().copied().map(BrokerId).collect();
        part.isr_nodes = p.isr.iter().copied().map(BrokerId).collect();
        part.offline_replicas = p
            .replicas
            .iter()
            .filter(|r| !live(r))
            .copied()
            .map(BrokerId)
            .collect();
        t.partitions.push(part);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_controller::{
        BrokerEndpoint, MetadataRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord,
    };

    /// Brokers 1 (PLAINTEXT and SSL), 2 (PLAINTEXT only) and 3 (fenced),
    /// and a topic whose partitions 0-3 are led by 1, 2, 3 and 9 (not
    /// registered).
    fn image() -> MetadataImage {
        let mut image = MetadataImage::new("c");
        let endpoint = |name: &str, port| BrokerEndpoint {
            name: name.into(),
            host: "127.0.0.1".into(),
            port,
            security_protocol: 0,
        };
        let topic_id = Uuid::from_u128(7);
        let mut records = vec![];
        for (id, endpoints, fenced) in [
            (1, vec![endpoint("PLAINTEXT", 1), endpoint("SSL", 2)], false),
            (2, vec![endpoint("PLAINTEXT", 3)], false),
            (3, vec![endpoint("PLAINTEXT", 4), endpoint("SSL", 5)], true),
        ] {
            records.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                broker_id: id,
                incarnation_id: Uuid::from_u128(id as u128),
                broker_epoch: 1,
                end_points: endpoints,
                rack: None,
                fenced,
            }));
        }
        records.push(MetadataRecord::Topic(TopicRecord {
            name: "t".into(),
            topic_id,
        }));
        for (index, leader) in [1, 2, 3, 9].into_iter().enumerate() {
            let mut p = PartitionRecord::new(index as i32, topic_id, vec![leader], vec![leader]);
            p.leader = leader;
            records.push(MetadataRecord::Partition(p));
        }
        for record in &records {
            image.apply(record).unwrap();
        }
        image
    }

    fn leaders(listener: &str, version: i16) -> Vec<(i32, i16)> {
        let image = image();
        topic_metadata(
            &image,
            &image.topics["t"],
            listener,
            version,
            AUTHORIZED_OPERATIONS_OMITTED,
        )
        .partitions
        .iter()
        .map(|p| (p.leader_id.0, p.error_code))
        .collect()
    }

    /// Kafka's `KRaftMetadataCache.partitionMetadata`: a leader is named
    /// only when it is registered, unfenced and has the request's listener.
    #[test]
    fn a_leader_without_the_listener_is_listener_not_found_from_v6() {
        const LEADER_NOT_AVAILABLE: i16 = 5;
        const LISTENER_NOT_FOUND: i16 = 72;
        assert_eq!(
            leaders("SSL", 12),
            [
                (1, 0),
                (-1, LISTENER_NOT_FOUND),
                (-1, LISTENER_NOT_FOUND),
                (-1, LEADER_NOT_AVAILABLE)
            ]
        );
        assert_eq!(
            leaders("SSL", 5),
            [
                (1, 0),
                (-1, LEADER_NOT_AVAILABLE),
                (-1, LEADER_NOT_AVAILABLE),
                (-1, LEADER_NOT_AVAILABLE)
            ]
        );
        assert_eq!(
            leaders("PLAINTEXT", 12),
            [
                (1, 0),
                (2, 0),
                (-1, LISTENER_NOT_FOUND),
                (-1, LEADER_NOT_AVAILABLE)
            ]
        );
    }
}
