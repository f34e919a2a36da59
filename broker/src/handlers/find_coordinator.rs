//! FindCoordinator (key 10), v0-6. Key type 0 (group) is answered with the
//! leader of the group's `__consumer_offsets` partition
//! (`abs(String.hashCode(group.id)) % partitions`, Kafka's
//! `GroupCoordinatorService.partitionFor`) and that broker's endpoint as
//! Metadata lists it. As Kafka, the first FindCoordinator creates
//! `__consumer_offsets`; while it cannot be created (fewer unfenced brokers
//! than `offsets.topic.replication.factor` on a multi-voter cluster) or the
//! group's partition has no leader, the answer is
//! COORDINATOR_NOT_AVAILABLE and clients retry. Key type 1 (transaction)
//! gets COORDINATOR_NOT_AVAILABLE because transactions are not served yet;
//! other key types get INVALID_REQUEST. v4+ batch `coordinator_keys`
//! (KIP-699) and answer each in `coordinators`.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::ResponseError;
use tracing::debug;
use weir_controller::acl::{AclOperation, AclResourceType};
use weir_controller::MetadataImage;

use super::str_bytes;
use crate::context::BrokerContext;
use crate::group::{offsets_partition_for, OFFSETS_TOPIC};

/// Kafka's `CoordinatorType.GROUP`.
const KEY_TYPE_GROUP: i8 = 0;
/// Kafka's `CoordinatorType.TRANSACTION`.
const KEY_TYPE_TRANSACTION: i8 = 1;

/// Answers a FindCoordinator request.
///
/// Coordinators are given by their endpoint of `listener`, the listener the
/// request arrived on.
pub async fn handle(
    ctx: &BrokerContext,
    listener: &str,
    version: i16,
    request: FindCoordinatorRequest,
    auth: &crate::authorizer::RequestAuth<'_>,
) -> FindCoordinatorResponse {
    let keys: Vec<String> = if version >= 4 {
        request
            .coordinator_keys
            .iter()
            .map(|k| k.to_string())
            .collect()
    } else {
        vec![request.key.to_string()]
    };
    // Kafka creates the offsets topic for the first group lookup.
    let partitions = if request.key_type == KEY_TYPE_GROUP && !keys.is_empty() {
        match ctx.group_coordinator.store().ensure_topic().await {
            Ok(partitions) => Some(partitions),
            Err(e) => {
                debug!(error = %e, "{OFFSETS_TOPIC} is not available");
                None
            }
        }
    } else {
        None
    };
    let image = ctx.metadata();
    let mut coordinators: Vec<Coordinator> = keys
        .into_iter()
        .map(|key| {
            // Kafka's handleFindCoordinatorRequest: Describe on the group or
            // transactional id.
            let refused = match request.key_type {
                KEY_TYPE_GROUP => (!auth.group(AclOperation::Describe, &key))
                    .then_some(ResponseError::GroupAuthorizationFailed),
                KEY_TYPE_TRANSACTION => (!auth.allowed(
                    AclOperation::Describe,
                    AclResourceType::TransactionalId,
                    &key,
                ))
                .then_some(ResponseError::TransactionalIdAuthorizationFailed),
                _ => None,
            };
            match refused {
                Some(error) => refused_coordinator(key, error),
                None => coordinator(ctx, &image, listener, key, request.key_type, partitions),
            }
        })
        .collect();
    let mut response = FindCoordinatorResponse::default();
    if version >= 4 {
        response.coordinators = coordinators;
        return response;
    }
    let c = coordinators.pop().unwrap_or_default();
    response.error_code = c.error_code;
    response.error_message = if version >= 1 { c.error_message } else { None };
    response.node_id = c.node_id;
    response.host = c.host;
    response.port = c.port;
    response
}

/// The advertised host and port of broker `node_id` on `listener`: its
/// registration in the metadata image (the endpoint Metadata lists) unless
/// it is fenced; for this broker, else its advertised listener of that name.
fn endpoint(
    ctx: &BrokerContext,
    image: &MetadataImage,
    listener: &str,
    node_id: i32,
) -> Option<(String, i32)> {
    if let Some(ep) = image
        .brokers
        .get(&node_id)
        .filter(|b| !b.fenced || node_id == ctx.node_id)
        .and_then(|b| b.endpoint(listener))
    {
        return Some((ep.host.clone(), i32::from(ep.port)));
    }
    if node_id != ctx.node_id {
        return None;
    }
    ctx.advertised_listeners
        .iter()
        .find(|l| l.name.eq_ignore_ascii_case(listener))
        .map(|l| (l.host.clone(), i32::from(l.port)))
}

/// The leader of `group_id`'s offsets partition, `None` when it has none.
fn group_coordinator_id(image: &MetadataImage, group_id: &str, partitions: i32) -> Option<i32> {
    let partition = offsets_partition_for(group_id, partitions);
    image
        .topic(OFFSETS_TOPIC)
        .and_then(|t| t.partitions.get(&partition))
        .map(|p| p.leader)
        .filter(|&leader| leader >= 0)
}

/// The answer for a key the client may not look up.
fn refused_coordinator(key: String, error: ResponseError) -> Coordinator {
    let mut c = Coordinator::default();
    c.key = str_bytes(key);
    c.node_id = BrokerId(-1);
    c.host = str_bytes("");
    c.port = -1;
    c.error_code = error.code();
    c.error_message = Some(str_bytes(
        weir_protocol_compat::error_response::kafka_default_message(error.code())
            .unwrap_or_default(),
    ));
    c
}

fn coordinator(
    ctx: &BrokerContext,
    image: &MetadataImage,
    listener: &str,
    key: String,
    key_type: i8,
    partitions: Option<i32>,
) -> Coordinator {
    let mut c = Coordinator::default();
    c.node_id = BrokerId(-1);
    c.host = str_bytes("");
    c.port = -1;
    let error = match key_type {
        KEY_TYPE_GROUP => {
            let found = partitions
                .and_then(|n| group_coordinator_id(image, &key, n))
                .and_then(|id| Some((id, endpoint(ctx, image, listener, id)?)));
            match found {
                Some((id, (host, port))) => {
                    c.key = str_bytes(key);
                    c.node_id = BrokerId(id);
                    c.host = str_bytes(host);
                    c.port = port;
                    return c;
                }
                None => ResponseError::CoordinatorNotAvailable,
            }
        }
        KEY_TYPE_TRANSACTION => ResponseError::CoordinatorNotAvailable,
        _ => ResponseError::InvalidRequest,
    };
    c.key = str_bytes(key);
    c.error_code = error.code();
    c.error_message = Some(str_bytes(match error {
        ResponseError::InvalidRequest => format!("Unknown coordinator type {key_type}"),
        _ => "The coordinator is not available.".to_string(),
    }));
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_controller::{PartitionRegistration, TopicImage};

    fn image_with_leaders(leaders: &[i32]) -> MetadataImage {
        let partitions = leaders
            .iter()
            .enumerate()
            .map(|(index, &leader)| {
                let registration = PartitionRegistration {
                    replicas: vec![1, 2, 3],
                    isr: vec![leader],
                    leader,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    leader_recovery_state: Default::default(),
                    elr: vec![],
                    last_known_elr: vec![],
                };
                (index as i32, registration)
            })
            .collect();
        let topic = TopicImage {
            name: OFFSETS_TOPIC.to_string(),
            topic_id: Default::default(),
            partitions,
            configs: Default::default(),
        };
        let mut image = MetadataImage::default();
        image
            .topics
            .insert(OFFSETS_TOPIC.to_string(), std::sync::Arc::new(topic));
        image
    }

    #[test]
    fn the_coordinator_is_the_leader_of_the_groups_offsets_partition() {
        let image = image_with_leaders(&[1, 2, 3, -1]);
        // "group" hashes to 98629247: partition 3 of 4 (offline), 2 of 3.
        assert_eq!(group_coordinator_id(&image, "group", 4), None);
        assert_eq!(group_coordinator_id(&image, "group", 3), Some(3));
        // "polygenelubricants" hashes to i32::MIN: partition 0.
        assert_eq!(
            group_coordinator_id(&image, "polygenelubricants", 4),
            Some(1)
        );
        assert_eq!(
            group_coordinator_id(&MetadataImage::default(), "group", 4),
            None
        );
    }
}
