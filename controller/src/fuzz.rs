//! Fuzz targets for the controller's inputs from outside the process
//! (issue 17), compiled only with the `fuzzing` feature: the quorum
//! transport's frames (what a peer on the `CONTROLLER` listener sends) and
//! the metadata log directory (what the disk holds). The `weir-fuzz` crate
//! (`fuzz/`) runs them under cargo-afl and replays their committed corpus
//! on every `cargo test`.
//!
//! The property: no input makes the decoders or the replay of decoded
//! records into a [`MetadataImage`] panic, and memory stays bounded (frames
//! are capped at
//! [`MAX_FRAME_BYTES`](crate::transport::MAX_FRAME_BYTES), metadata log payloads at 64 MiB).

use std::collections::BTreeSet;

use bytes::BytesMut;
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, VoteRequest, VoteResponse};
use openraft::{CommittedLeaderId, EntryPayload, Membership};
use tokio_util::codec::Decoder;

use crate::error::ControllerError;
use crate::image::MetadataImage;
use crate::observer::{next_image, FetchMetadataRequest, FetchMetadataResponse};
use crate::quorum::ControllerCommand;
use crate::raft::fs::{decode_frames, encode_frame, parse_json};
use crate::raft::log_store::LogFrame;
use crate::raft::pre_vote::{PreVoteRequest, PreVoteResponse};
use crate::raft::state_machine::StoredSnapshot;
use crate::raft::{Entry, LogId, MetadataBatch, Vote};
use crate::records::*;
use crate::transport::{
    codec, decode_request, decode_response, encode_request, encode_response, QuorumRequest,
    QuorumResponse, Route,
};

/// Runs `data` through what the quorum transport does with bytes from a
/// peer: split as a stream of length-delimited frames (the transport's
/// `LengthDelimitedCodec`), each frame decoded as a request (a voter
/// serving) and as a response (a client reading its answer); `data` itself
/// decoded as one frame both ways; and a decoded FetchMetadata answer
/// replayed as a broker-only node does (`observer::next_image`).
pub fn fuzz_quorum_frame(data: &[u8]) {
    let mut stream = BytesMut::from(data);
    let mut codec = codec();
    while let Ok(Some(frame)) = codec.decode(&mut stream) {
        decode_frame(&frame);
    }
    decode_frame(data);
}

fn decode_frame(frame: &[u8]) {
    let _ = decode_request(frame);
    if let Ok((_, QuorumResponse::FetchMetadata(Ok(response)))) = decode_response(frame) {
        let _ = next_image(&MetadataImage::new("fuzz"), &mut None, response);
    }
}

/// Runs `data` through what a voter does with its metadata directory on
/// start: `metadata.log` split into CRC-checked frames, each parsed as a
/// log frame whose entries' records replay into an image all or nothing
/// per entry (as the state machine applies them); `data` itself parsed as
/// one frame payload (so the fuzzer need not match a CRC), as the
/// `metadata.snapshot` file and as the `quorum-state` vote.
pub fn fuzz_metadata_log(data: &[u8]) {
    let mut image = MetadataImage::new("fuzz");
    let (frames, _) = decode_frames(data);
    for (_, payload) in frames {
        replay_frame(&mut image, payload);
    }
    replay_frame(&mut MetadataImage::new("fuzz"), data);
    let _ = parse_json::<StoredSnapshot>("fuzz", data);
    let _ = parse_json::<Vote>("fuzz", data);
}

fn replay_frame(image: &mut MetadataImage, payload: &[u8]) {
    let Ok(LogFrame::Entry(entry)) = parse_json::<LogFrame>("fuzz", payload) else {
        return;
    };
    if let EntryPayload::Normal(batch) = entry.payload {
        let mut next = image.clone();
        if batch.records.iter().all(|r| next.apply(r).is_ok()) {
            *image = next;
        }
    }
}

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

/// One record of every kind, in an order that replays onto an empty image.
fn sample_records() -> Vec<MetadataRecord> {
    let topic_id = uuid::Uuid::from_u128(0x0a);
    vec![
        MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: 1,
            incarnation_id: uuid::Uuid::from_u128(0x1c),
            broker_epoch: 10,
            end_points: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
                security_protocol: 0,
            }],
            rack: Some("rack-a".into()),
            fenced: true,
        }),
        MetadataRecord::UnfenceBroker(UnfenceBrokerRecord { id: 1, epoch: 10 }),
        MetadataRecord::Topic(TopicRecord {
            name: "orders".into(),
            topic_id,
        }),
        MetadataRecord::Partition(PartitionRecord::new(
            0,
            topic_id,
            vec![1, 2, 3],
            vec![1, 2, 3],
        )),
        MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 0,
            topic_id,
            isr: Some(vec![1, 2]),
            leader: Some(2),
            replicas: None,
            leader_recovery_state: Some(LeaderRecoveryState::Recovering),
            eligible_leader_replicas: Some(vec![3]),
            last_known_elr: Some(vec![]),
        }),
        MetadataRecord::Config(ConfigRecord {
            resource_type: ConfigResourceType::Topic,
            resource_name: "orders".into(),
            name: "cleanup.policy".into(),
            value: Some("compact".into()),
        }),
        MetadataRecord::Config(ConfigRecord {
            resource_type: ConfigResourceType::Broker,
            resource_name: String::new(),
            name: "min.insync.replicas".into(),
            value: Some("2".into()),
        }),
        MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: 1,
            broker_epoch: 10,
            next_producer_id: 1000,
        }),
        MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: "metadata.version".into(),
            feature_level: 7,
        }),
        MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
            broker_id: 1,
            broker_epoch: 10,
            in_controlled_shutdown: true,
        }),
        MetadataRecord::FenceBroker(FenceBrokerRecord { id: 1, epoch: 10 }),
        MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id }),
    ]
}

fn membership_entry(index: u64) -> Entry {
    Entry {
        log_id: log_id(1, index),
        payload: EntryPayload::Membership(Membership::new(vec![BTreeSet::from([1, 2, 3])], None)),
    }
}

fn records_entry(index: u64) -> Entry {
    Entry {
        log_id: log_id(1, index),
        payload: EntryPayload::Normal(MetadataBatch {
            records: sample_records(),
        }),
    }
}

/// Seeds for [`fuzz_quorum_frame`], named `<kind>.bin`: one request frame
/// of every kind and responses to Vote, AppendEntries, a command and a
/// FetchMetadata carrying records.
pub fn quorum_frame_seeds() -> Vec<(String, Vec<u8>)> {
    let vote = openraft::Vote::new(3, 2);
    let requests = [
        (
            "append_entries_request",
            QuorumRequest::AppendEntries(AppendEntriesRequest {
                vote,
                prev_log_id: Some(log_id(1, 1)),
                entries: vec![membership_entry(2), records_entry(3)],
                leader_commit: Some(log_id(1, 2)),
            }),
        ),
        (
            "vote_request",
            QuorumRequest::Vote(VoteRequest::new(vote, Some(log_id(1, 3)))),
        ),
        (
            "command_request",
            QuorumRequest::Command(ControllerCommand::AllocateProducerIds {
                broker_id: 1,
                broker_epoch: 10,
            }),
        ),
        (
            "fetch_metadata_request",
            QuorumRequest::FetchMetadata(FetchMetadataRequest {
                observer_id: 4,
                after_offset: 0,
                known_controller: Some(1),
                max_wait_ms: 500,
                full_image: false,
                image_after: None,
            }),
        ),
        (
            "pre_vote_request",
            QuorumRequest::PreVote(PreVoteRequest {
                candidate: 2,
                term: 4,
                last_log_id: Some(log_id(1, 3)),
            }),
        ),
    ];
    let responses = [
        (
            "append_entries_response",
            QuorumResponse::AppendEntries(Ok(AppendEntriesResponse::Success)),
        ),
        (
            "vote_response",
            QuorumResponse::Vote(Ok(VoteResponse {
                vote,
                vote_granted: true,
                last_log_id: Some(log_id(1, 3)),
            })),
        ),
        (
            "command_response",
            QuorumResponse::Command(Err(ControllerError::NotController { leader: Some(2) })),
        ),
        (
            "fetch_metadata_response",
            QuorumResponse::FetchMetadata(Ok(FetchMetadataResponse {
                cluster_id: "fuzz".into(),
                offset: 1,
                controller_id: Some(1),
                batches: vec![(1, sample_records())],
                image: None,
                image_continues_after: None,
                image_incomplete: false,
                leader: Some((1, "127.0.0.1:9093".into())),
            })),
        ),
        (
            "refused_response",
            QuorumResponse::Refused("inconsistent cluster id".into()),
        ),
        (
            "pre_vote_response",
            QuorumResponse::PreVote(PreVoteResponse {
                granted: false,
                term: 3,
            }),
        ),
    ];
    let route = Route::new("fuzz", 1, 2);
    let mut seeds = Vec::new();
    for (name, request) in &requests {
        if let Ok(frame) = encode_request(7, &route, request) {
            seeds.push((format!("{name}.bin"), frame.to_vec()));
        }
    }
    for (name, response) in &responses {
        if let Ok(frame) = encode_response(7, response) {
            seeds.push((format!("{name}.bin"), frame.to_vec()));
        }
    }
    // The last request as it travels: with its 4-byte length prefix.
    if let Some((_, frame)) = seeds.first() {
        let mut prefixed = (frame.len() as u32).to_be_bytes().to_vec();
        prefixed.extend_from_slice(frame);
        seeds.push((
            "length_prefixed_append_entries_request.bin".into(),
            prefixed,
        ));
    }
    seeds
}

/// Seeds for [`fuzz_metadata_log`]: a `metadata.log` of a membership
/// entry, an entry holding one record of every kind and a purge marker, and
/// one bare frame payload of records.
pub fn metadata_log_seeds() -> Vec<(String, Vec<u8>)> {
    let frames = [
        LogFrame::Entry(membership_entry(1)),
        LogFrame::Entry(records_entry(2)),
        LogFrame::Purged(log_id(1, 1)),
    ];
    let mut log = Vec::new();
    for frame in &frames {
        if let Ok(payload) = serde_json::to_vec(frame) {
            encode_frame(&payload, &mut log);
        }
    }
    let mut seeds = vec![("metadata_log.bin".to_string(), log)];
    if let Ok(payload) = serde_json::to_vec(&LogFrame::Entry(records_entry(2))) {
        seeds.push(("records_entry_payload.json".to_string(), payload));
    }
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample records replay onto an empty image (so the seeds reach
    /// every arm of `MetadataImage::apply`), and the seed log decodes into
    /// an image that holds them.
    #[test]
    fn the_seeds_decode_and_replay() {
        let mut image = MetadataImage::new("fuzz");
        for record in sample_records() {
            image.apply(&record).unwrap();
        }
        let (_, log) = &metadata_log_seeds()[0];
        let (frames, valid) = decode_frames(log);
        assert_eq!((frames.len(), valid), (3, log.len() as u64));
        let mut replayed = MetadataImage::new("fuzz");
        for (_, payload) in frames {
            replay_frame(&mut replayed, payload);
        }
        assert_eq!(replayed.next_producer_id, 1000);
        for (name, seed) in quorum_frame_seeds() {
            if name.starts_with("length_prefixed") {
                continue;
            }
            let decoded = if name.ends_with("_request.bin") {
                decode_request(&seed).map(drop)
            } else {
                decode_response(&seed).map(drop)
            };
            assert!(decoded.is_ok(), "{name}");
        }
        assert_eq!(quorum_frame_seeds().len(), 12);
        for (_, seed) in quorum_frame_seeds().iter().chain(&metadata_log_seeds()) {
            fuzz_quorum_frame(seed);
            fuzz_metadata_log(seed);
        }
    }
}
