//! OffsetFetch (key 9), v1-9: committed offsets of one group (v1-7) or of
//! several groups (v8+, KIP-709). Every requested partition is answered:
//! without a commit with offset -1, leader epoch -1, empty metadata and no
//! error (case C05). `topics` null (v2+) means every committed partition.
//! `require_stable` (v7+) is accepted: Weir has no pending transactional
//! offsets, so every offset is stable.

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::ResponseError;
use weir_storage::TopicPartition;

use super::str_bytes;
use crate::context::BrokerContext;
use crate::group::OffsetAndMetadata;

/// One partition's answer: (offset, leader epoch, metadata).
fn values(offset: Option<OffsetAndMetadata>) -> (i64, i32, String) {
    match offset {
        Some(o) => (o.committed_offset, o.committed_leader_epoch, o.metadata),
        None => (-1, -1, String::new()),
    }
}

/// Groups `(partition, offset)` by topic in first-seen order.
type ByTopic = Vec<(String, Vec<(i32, Option<OffsetAndMetadata>)>)>;

fn by_topic(entries: Vec<(TopicPartition, Option<OffsetAndMetadata>)>) -> ByTopic {
    let mut topics: ByTopic = Vec::new();
    for (tp, offset) in entries {
        match topics.iter_mut().find(|(t, _)| *t == tp.topic) {
            Some((_, partitions)) => partitions.push((tp.partition, offset)),
            None => topics.push((tp.topic, vec![(tp.partition, offset)])),
        }
    }
    topics
}

/// Answers an OffsetFetch request.
pub fn handle(
    ctx: &BrokerContext,
    version: i16,
    request: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let mut response = OffsetFetchResponse::default();
    if version >= 8 {
        for group in request.groups {
            let partitions = group.topics.map(|topics| {
                topics
                    .into_iter()
                    .flat_map(|t| {
                        let name = t.name.to_string();
                        t.partition_indexes
                            .into_iter()
                            .map(move |p| TopicPartition::new(name.clone(), p))
                    })
                    .collect::<Vec<_>>()
            });
            let mut g = OffsetFetchResponseGroup::default();
            match ctx
                .group_coordinator
                .fetch_offsets(&group.group_id, partitions)
            {
                Ok(entries) => {
                    for (topic, partitions) in by_topic(entries) {
                        let mut t = OffsetFetchResponseTopics::default();
                        t.name = TopicName(str_bytes(topic));
                        for (index, offset) in partitions {
                            let (offset, epoch, metadata) = values(offset);
                            let mut p = OffsetFetchResponsePartitions::default();
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
            g.group_id = group.group_id;
            response.groups.push(g);
        }
        return response;
    }
    let requested: Option<Vec<TopicPartition>> = request.topics.map(|topics| {
        topics
            .into_iter()
            .flat_map(|t| {
                let name = t.name.to_string();
                t.partition_indexes
                    .into_iter()
                    .map(move |p| TopicPartition::new(name.clone(), p))
            })
            .collect()
    });
    let outcome = ctx
        .group_coordinator
        .fetch_offsets(&request.group_id, requested.clone());
    let (entries, error) = match outcome {
        Ok(entries) => (entries, None),
        // v1 has no top-level error: each partition carries it.
        Err(e) => (
            requested
                .unwrap_or_default()
                .into_iter()
                .map(|tp| (tp, None))
                .collect(),
            Some(e),
        ),
    };
    for (topic, partitions) in by_topic(entries) {
        let mut t = OffsetFetchResponseTopic::default();
        t.name = TopicName(str_bytes(topic));
        for (index, offset) in partitions {
            let (offset, epoch, metadata) = values(offset);
            let mut p = OffsetFetchResponsePartition::default();
            p.partition_index = index;
            p.committed_offset = offset;
            p.committed_leader_epoch = epoch;
            p.metadata = Some(str_bytes(metadata));
            if version < 2 {
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
