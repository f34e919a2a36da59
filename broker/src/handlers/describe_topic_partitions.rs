//! DescribeTopicPartitions (key 75), v0 (KIP-966): topics with their
//! partitions' leader, replicas, ISR, eligible leader replicas (ELR) and
//! last known ELR, paged by a cursor. Kafka 4's `kafka-topics --describe`
//! uses it (through the admin client's `describeTopics`) and prints the ELR
//! from it; Metadata has no ELR fields.
//!
//! As Kafka's `DescribeTopicPartitionsRequestHandler` and
//! `KRaftMetadataCache.describeTopicResponse`: requested topics (every topic
//! when none is named) from the cursor's topic on, sorted by name; at most
//! min(`response_partition_limit`, `max.request.partition.size.limit`)
//! partitions (at least 1), the next cursor pointing where the answer
//! stopped. A named topic that does not exist gets UNKNOWN_TOPIC_OR_PARTITION
//! (INVALID_TOPIC_EXCEPTION for an illegal name); a cursor whose topic is
//! not among the named ones, or whose partition is negative, makes the whole
//! request INVALID_REQUEST.

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, RequestKind,
    ResponseKind, TopicName,
};
use kafka_protocol::ResponseError;
use uuid::Uuid;
use weir_controller::{MetadataImage, PartitionRegistration};
use weir_protocol_compat::error_response::error_response;

use weir_controller::acl::{AclOperation, AclResourceType};

use super::metadata::is_internal;
use super::str_bytes;
use crate::authorizer::RequestAuth;
use crate::context::BrokerContext;

/// Answers from the current image; see the module documentation. An
/// invalid cursor is answered as Kafka's `getErrorResponse` for an
/// `InvalidRequestException`: every requested topic with INVALID_REQUEST.
pub fn handle(
    ctx: &BrokerContext,
    version: i16,
    request: DescribeTopicPartitionsRequest,
    auth: &RequestAuth<'_>,
) -> DescribeTopicPartitionsResponse {
    let image = ctx.metadata();
    let limit = request
        .response_partition_limit
        .min(ctx.config.max_request_partition_size_limit)
        .max(1) as usize;
    match describe(&image, &request, limit, auth) {
        Ok(response) => response,
        Err(reason) => {
            tracing::debug!(%reason, "DescribeTopicPartitions refused");
            let request = RequestKind::DescribeTopicPartitions(request);
            match error_response(&request, version, ResponseError::InvalidRequest.code()) {
                Some(ResponseKind::DescribeTopicPartitions(response)) => response,
                _ => DescribeTopicPartitionsResponse::default(),
            }
        }
    }
}

/// The response, or why the whole request is invalid. Topics the client
/// may not Describe are left out of an all-topics answer and named with
/// TOPIC_AUTHORIZATION_FAILED otherwise (Kafka's
/// `DescribeTopicPartitionsRequestHandler`).
fn describe(
    image: &MetadataImage,
    request: &DescribeTopicPartitionsRequest,
    limit: usize,
    auth: &RequestAuth<'_>,
) -> Result<DescribeTopicPartitionsResponse, String> {
    let cursor = request.cursor.as_ref();
    let cursor_topic = cursor.map_or("", |c| c.topic_name.0.as_str());
    let all_topics = request.topics.is_empty();
    let mut names: Vec<&str> = if all_topics {
        image.topics.keys().map(String::as_str).collect()
    } else {
        request.topics.iter().map(|t| t.name.0.as_str()).collect()
    };
    names.retain(|name| *name >= cursor_topic);
    names.sort_unstable();
    names.dedup();
    if let Some(cursor) = cursor {
        if !all_topics && !names.contains(&cursor_topic) {
            return Err(format!(
                "DescribeTopicPartitionsRequest topic list should contain the cursor topic: {cursor_topic}"
            ));
        }
        if cursor.partition_index < 0 {
            return Err(format!(
                "DescribeTopicPartitionsRequest cursor partition must be valid: {}",
                cursor.partition_index
            ));
        }
    }
    let mut response = DescribeTopicPartitionsResponse::default();
    let mut remaining = limit;
    for name in names {
        if remaining == 0 {
            // Every partition of the topics before is answered; the next
            // page starts at this topic.
            response.next_cursor = Some(cursor_at(name, 0));
            break;
        }
        if all_topics && !auth.allowed_quietly(AclOperation::Describe, AclResourceType::Topic, name)
        {
            continue;
        }
        if !all_topics && !auth.topic(AclOperation::Describe, name) {
            let code = ResponseError::TopicAuthorizationFailed.code();
            response.topics.push(topic_entry(name, Uuid::nil(), code));
            continue;
        }
        let Some(topic) = image.topic(name) else {
            if !all_topics {
                let code = match weir_controller::validate_topic_name(name) {
                    Ok(()) => ResponseError::UnknownTopicOrPartition.code(),
                    Err(_) => ResponseError::InvalidTopicException.code(),
                };
                response.topics.push(topic_entry(name, Uuid::nil(), code));
            }
            continue;
        };
        let start = match cursor {
            Some(c) if name == cursor_topic => c.partition_index,
            _ => 0,
        };
        let mut entry = topic_entry(name, topic.topic_id, 0);
        entry.topic_authorized_operations =
            auth.authorized_operations(AclResourceType::Topic, name, true);
        let upper = topic.partitions.len().min(
            usize::try_from(start)
                .unwrap_or(0)
                .saturating_add(remaining),
        );
        for index in start..upper as i32 {
            if let Some(p) = topic.partitions.get(&index) {
                entry.partitions.push(partition_entry(image, index, p));
            }
        }
        remaining = remaining.saturating_sub(entry.partitions.len());
        response.topics.push(entry);
        if upper < topic.partitions.len() {
            response.next_cursor = Some(cursor_at(name, upper as i32));
            break;
        }
    }
    Ok(response)
}

fn cursor_at(topic: &str, partition_index: i32) -> Cursor {
    let mut cursor = Cursor::default();
    cursor.topic_name = TopicName(str_bytes(topic.to_string()));
    cursor.partition_index = partition_index;
    cursor
}

fn topic_entry(
    name: &str,
    topic_id: Uuid,
    error_code: i16,
) -> DescribeTopicPartitionsResponseTopic {
    let mut entry = DescribeTopicPartitionsResponseTopic::default();
    entry.error_code = error_code;
    entry.name = Some(TopicName(str_bytes(name.to_string())));
    entry.topic_id = topic_id;
    entry.is_internal = is_internal(name);
    entry
}

/// One partition as Kafka's `getPartitionMetadataForDescribeTopicResponse`:
/// the leader when registered (else -1), replicas and ISR unfiltered, the
/// ELR and last known ELR, and as offline the replicas that are not
/// registered or are fenced.
fn partition_entry(
    image: &MetadataImage,
    index: i32,
    p: &PartitionRegistration,
) -> DescribeTopicPartitionsResponsePartition {
    let ids = |ids: &[i32]| ids.iter().copied().map(BrokerId).collect::<Vec<_>>();
    let mut entry = DescribeTopicPartitionsResponsePartition::default();
    entry.partition_index = index;
    entry.leader_id = BrokerId(if image.brokers.contains_key(&p.leader) {
        p.leader
    } else {
        -1
    });
    entry.leader_epoch = p.leader_epoch;
    entry.replica_nodes = ids(&p.replicas);
    entry.isr_nodes = ids(&p.isr);
    entry.eligible_leader_replicas = Some(ids(&p.elr));
    entry.last_known_elr = Some(ids(&p.last_known_elr));
    entry.offline_replicas = p
        .replicas
        .iter()
        .copied()
        .filter(|r| image.brokers.get(r).is_none_or(|b| b.fenced))
        .map(BrokerId)
        .collect();
    entry
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::describe_topic_partitions_request::{self, TopicRequest};
    use weir_controller::{
        BrokerEndpoint, MetadataRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord,
    };

    use super::*;

    /// Topics "a" (3 partitions, replicas 1-3, ELR set on partition 2) and
    /// "b" (2 partitions) on brokers 1 and 2 (3 never registered).
    fn image() -> MetadataImage {
        let mut image = MetadataImage::new("c");
        let mut records = Vec::new();
        for id in [1, 2] {
            records.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                broker_id: id,
                incarnation_id: Uuid::from_u128(id as u128),
                broker_epoch: 1,
                end_points: vec![BrokerEndpoint {
                    name: "PLAINTEXT".into(),
                    host: "h".into(),
                    port: 1,
                    security_protocol: 0,
                }],
                rack: None,
                fenced: false,
            }));
        }
        for (t, name, partitions) in [(1u128, "a", 3), (2, "b", 2)] {
            let topic_id = Uuid::from_u128(t);
            records.push(MetadataRecord::Topic(TopicRecord {
                name: name.into(),
                topic_id,
            }));
            for partition_id in 0..partitions {
                let elr = if partition_id == 2 { vec![2] } else { vec![] };
                records.push(MetadataRecord::Partition(PartitionRecord {
                    partition_id,
                    topic_id,
                    replicas: vec![1, 2, 3],
                    isr: vec![1],
                    leader: 1,
                    leader_epoch: 4,
                    partition_epoch: 5,
                    leader_recovery_state: Default::default(),
                    eligible_leader_replicas: elr,
                    last_known_elr: vec![],
                }));
            }
        }
        for r in &records {
            image.apply(r).unwrap();
        }
        image
    }

    fn request(topics: &[&str], cursor: Option<(&str, i32)>) -> DescribeTopicPartitionsRequest {
        let mut request = DescribeTopicPartitionsRequest::default();
        request.topics = topics
            .iter()
            .map(|t| {
                let mut topic = TopicRequest::default();
                topic.name = TopicName(str_bytes(t.to_string()));
                topic
            })
            .collect();
        request.cursor = cursor.map(|(t, p)| {
            let mut c = describe_topic_partitions_request::Cursor::default();
            c.topic_name = TopicName(str_bytes(t.to_string()));
            c.partition_index = p;
            c
        });
        request
    }

    /// `(topic, partition indexes, error)` of one answered topic.
    type TopicSummary = (String, Vec<i32>, i16);

    /// Every answered topic's summary, and the next cursor.
    fn summary(r: &DescribeTopicPartitionsResponse) -> (Vec<TopicSummary>, Option<(String, i32)>) {
        (
            r.topics
                .iter()
                .map(|t| {
                    (
                        t.name.as_ref().unwrap().0.to_string(),
                        t.partitions.iter().map(|p| p.partition_index).collect(),
                        t.error_code,
                    )
                })
                .collect(),
            r.next_cursor
                .as_ref()
                .map(|c| (c.topic_name.0.to_string(), c.partition_index)),
        )
    }

    #[test]
    fn describes_elr_leader_replicas_and_offline_replicas() {
        let r = describe(
            &image(),
            &request(&["a"], None),
            2000,
            &RequestAuth::allow_all(),
        )
        .unwrap();
        let p = &r.topics[0].partitions[2];
        assert_eq!(p.leader_id, BrokerId(1));
        assert_eq!(p.leader_epoch, 4);
        assert_eq!(p.isr_nodes, vec![BrokerId(1)]);
        assert_eq!(p.eligible_leader_replicas, Some(vec![BrokerId(2)]));
        assert_eq!(p.last_known_elr, Some(vec![]));
        assert_eq!(p.offline_replicas, vec![BrokerId(3)], "never registered");
        assert_eq!(r.topics[0].topic_id, Uuid::from_u128(1));
    }

    #[test]
    fn pages_by_cursor_in_topic_order() {
        let image = image();
        let all = |limit, cursor| {
            summary(
                &describe(
                    &image,
                    &request(&[], cursor),
                    limit,
                    &RequestAuth::allow_all(),
                )
                .unwrap(),
            )
        };
        assert_eq!(
            all(2000, None),
            (
                vec![("a".into(), vec![0, 1, 2], 0), ("b".into(), vec![0, 1], 0)],
                None
            )
        );
        // Stops inside a topic, then resumes there.
        assert_eq!(
            all(2, None),
            (vec![("a".into(), vec![0, 1], 0)], Some(("a".into(), 2)))
        );
        assert_eq!(
            all(2, Some(("a", 2))),
            (
                vec![("a".into(), vec![2], 0), ("b".into(), vec![0], 0)],
                Some(("b".into(), 1))
            )
        );
        // A limit reached exactly at a topic's end points at the next topic.
        assert_eq!(
            all(3, None),
            (vec![("a".into(), vec![0, 1, 2], 0)], Some(("b".into(), 0)))
        );
    }

    #[test]
    fn named_topics_that_do_not_exist_get_kafkas_errors() {
        let r = describe(
            &image(),
            &request(&["b", "nope", "bad/name"], None),
            2000,
            &RequestAuth::allow_all(),
        )
        .unwrap();
        let (topics, _) = summary(&r);
        assert_eq!(
            topics,
            vec![
                ("b".into(), vec![0, 1], 0),
                (
                    "bad/name".into(),
                    vec![],
                    ResponseError::InvalidTopicException.code()
                ),
                (
                    "nope".into(),
                    vec![],
                    ResponseError::UnknownTopicOrPartition.code()
                ),
            ]
        );
    }

    #[test]
    fn a_cursor_outside_the_named_topics_or_negative_is_an_invalid_request() {
        let image = image();
        assert!(describe(
            &image,
            &request(&["b"], Some(("a", 0))),
            10,
            &RequestAuth::allow_all()
        )
        .is_err());
        assert!(describe(
            &image,
            &request(&["a"], Some(("a", -1))),
            10,
            &RequestAuth::allow_all()
        )
        .is_err());
    }
}
