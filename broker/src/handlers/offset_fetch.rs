//! OffsetFetch (key 9), v1-9: committed offsets of one group (v1-7) or of
//! several groups (v8+, KIP-709). Every requested partition is answered:
//! without a commit with offset -1, leader epoch -1, empty metadata and no
//! error (case C05). `topics` null (v2+) means every committed partition.
//! `require_stable` (v7+) is accepted: Weir has no pending transactional
//! offsets, so every offset is stable.
//!
//! Repeats are answered once, at their first place (issue 15): a partition
//! named twice in a group, and (v8+) a group named twice, whose partition
//! lists are joined (all committed partitions if either asks for all).

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_storage::TopicPartition;

use super::str_bytes;
use crate::authorizer::RequestAuth;
use crate::context::BrokerContext;
use crate::group::OffsetAndMetadata;
use weir_controller::acl::{AclOperation, AclResourceType};

/// One partition's answer: (offset, leader epoch, metadata).
fn values(offset: Option<OffsetAndMetadata>) -> (i64, i32, String) {
    match offset {
        Some(o) => (o.committed_offset, o.committed_leader_epoch, o.metadata),
        None => (-1, -1, String::new()),
    }
}

/// Groups `(partition, offset)` by topic in first-seen order.
/// A partition's committed offset (`None`: none), or its error code.
type Fetched = Result<Option<OffsetAndMetadata>, i16>;

type ByTopic = Vec<(String, Vec<(i32, Fetched)>)>;

/// The group's committed offsets as the client may see them (Kafka's
/// `handleOffsetFetchRequest`): GROUP_AUTHORIZATION_FAILED without
/// Describe on the group; of all topics only those it may Describe; a
/// requested topic it may not Describe gets TOPIC_AUTHORIZATION_FAILED per
/// partition.
fn fetch_authorized(
    ctx: &BrokerContext,
    auth: &RequestAuth<'_>,
    group: &str,
    partitions: Option<Vec<TopicPartition>>,
) -> Result<Vec<(TopicPartition, Fetched)>, ResponseError> {
    if !auth.group(AclOperation::Describe, group) {
        return Err(ResponseError::GroupAuthorizationFailed);
    }
    let all_topics = partitions.is_none();
    let entries = ctx.group_coordinator.fetch_offsets(group, partitions)?;
    if !auth.enabled() {
        return Ok(entries.into_iter().map(|(tp, o)| (tp, Ok(o))).collect());
    }
    let mut allowed: std::collections::HashMap<String, bool> = Default::default();
    let mut out = Vec::with_capacity(entries.len());
    for (tp, offset) in entries {
        let may = *allowed
            .entry(tp.topic.clone())
            .or_insert_with(|| match all_topics {
                true => {
                    auth.allowed_quietly(AclOperation::Describe, AclResourceType::Topic, &tp.topic)
                }
                false => auth.topic(AclOperation::Describe, &tp.topic),
            });
        match (may, all_topics) {
            (true, _) => out.push((tp, Ok(offset))),
            (false, true) => {}
            (false, false) => {
                out.push((tp, Err(ResponseError::TopicAuthorizationFailed.code())));
            }
        }
    }
    Ok(out)
}

fn by_topic(entries: Vec<(TopicPartition, Fetched)>) -> ByTopic {
    let mut topics: ByTopic = Vec::new();
    let mut index_of: std::collections::HashMap<String, usize> = Default::default();
    for (tp, offset) in entries {
        match index_of.get(&tp.topic) {
            Some(&i) => topics[i].1.push((tp.partition, offset)),
            None => {
                index_of.insert(tp.topic.clone(), topics.len());
                topics.push((tp.topic, vec![(tp.partition, offset)]));
            }
        }
    }
    topics
}

/// The partitions of `topics` (name, partition indexes), each once.
fn requested_partitions<T>(
    topics: Vec<T>,
    parts: impl Fn(T) -> (TopicName, Vec<i32>),
) -> Vec<TopicPartition> {
    let all = topics.into_iter().flat_map(|t| {
        let (name, indexes) = parts(t);
        let name = name.to_string();
        indexes
            .into_iter()
            .map(move |p| TopicPartition::new(name.clone(), p))
    });
    super::first_occurrences(all, |tp| tp.clone())
}

/// Answers an OffsetFetch request.
pub fn handle(
    ctx: &BrokerContext,
    version: i16,
    request: OffsetFetchRequest,
    auth: &RequestAuth<'_>,
) -> OffsetFetchResponse {
    let fetch = |group: &str, partitions: Option<Vec<TopicPartition>>| {
        fetch_authorized(ctx, auth, group, partitions)
    };
    let mut response = OffsetFetchResponse::default();
    if version >= 8 {
        // Each group once, its partition lists joined (None: all).
        let mut groups: Vec<(StrBytes, Option<Vec<TopicPartition>>)> = Vec::new();
        let mut index_of: std::collections::HashMap<StrBytes, usize> = Default::default();
        for group in request.groups {
            let partitions = group
                .topics
                .map(|topics| requested_partitions(topics, |t| (t.name, t.partition_indexes)));
            match index_of.get(&group.group_id.0) {
                Some(&i) => match (&mut groups[i].1, partitions) {
                    (Some(have), Some(more)) => have.extend(more),
                    (have, _) => *have = None,
                },
                None => {
                    index_of.insert(group.group_id.0.clone(), groups.len());
                    groups.push((group.group_id.0, partitions));
                }
            }
        }
        for (group_id, partitions) in groups {
            let partitions =
                partitions.map(|p| super::first_occurrences(p, |tp: &TopicPartition| tp.clone()));
            let group = kafka_protocol::messages::GroupId(group_id);
            let mut g = OffsetFetchResponseGroup::default();
            match fetch(&group, partitions) {
                Ok(entries) => {
                    for (topic, partitions) in by_topic(entries) {
                        let mut t = OffsetFetchResponseTopics::default();
                        t.name = TopicName(str_bytes(topic));
                        for (index, offset) in partitions {
                            let error = offset.as_ref().err().copied().unwrap_or(0);
                            let (offset, epoch, metadata) = values(offset.ok().flatten());
                            let mut p = OffsetFetchResponsePartitions::default();
                            p.error_code = error;
                            p.partition_index = index;
                            p.committed_offset = offset;
                            p.committed_leader_epoch = epoch;
                            p.metadata = Some(str_bytes(metadata));
                            t.partitions.push(p);
                        }
                        g.topics.push(t);
                    }
                }
                Err(e) => g.error_code = e.code(),
            }
            g.group_id = group;
            response.groups.push(g);
        }
        return response;
    }
    let requested: Option<Vec<TopicPartition>> = request
        .topics
        .map(|topics| requested_partitions(topics, |t| (t.name, t.partition_indexes)));
    let outcome = fetch(&request.group_id, requested.clone());
    let (entries, error) = match outcome {
        Ok(entries) => (entries, None),
        // v1 has no top-level error: each partition carries it.
        Err(e) => (
            requested
                .unwrap_or_default()
                .into_iter()
                .map(|tp| (tp, Ok(None)))
                .collect(),
            Some(e),
        ),
    };
    for (topic, partitions) in by_topic(entries) {
        let mut t = OffsetFetchResponseTopic::default();
        t.name = TopicName(str_bytes(topic));
        for (index, offset) in partitions {
            let denied = offset.as_ref().err().copied();
            let (offset, epoch, metadata) = values(offset.ok().flatten());
            let mut p = OffsetFetchResponsePartition::default();
            p.error_code = denied.unwrap_or(0);
            p.partition_index = index;
            p.committed_offset = offset;
            p.committed_leader_epoch = epoch;
            p.metadata = Some(str_bytes(metadata));
            if version < 2 && error.is_some() {
                p.error_code = error.map(|e: ResponseError| e.code()).unwrap_or(0);
            }
            t.partitions.push(p);
        }
        response.topics.push(t);
    }
    if version >= 2 {
        response.error_code = error.map(|e| e.code()).unwrap_or(0);
    }
    response
}
