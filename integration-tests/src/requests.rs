//! Builders of the requests many tests send, so each test names only what
//! it varies.

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

/// A Produce request carrying `records` (one or more encoded record batches,
/// or deliberately bad bytes) for `topic`/`partition`, by topic name, with
/// `acks` (-1, 0 or 1; anything else for error tests) and a 30 s timeout.
pub fn produce_request(topic: &str, partition: i32, acks: i16, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}
