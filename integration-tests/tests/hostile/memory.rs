//! Issue 15 scope 2 and 4: memory is bounded by configuration, not by what a
//! client sends, and connections by `max.connections*`.
//!
//! Findings replayed: DescribeConfigs naming the broker 300,000 times, 25
//! connections pipelining requests and never reading, 100 MiB size prefixes
//! with no body, a long-poll Fetch whose client closes, a Fetch naming one
//! partition 1,000 times; plus the keys `queued.max.request.bytes`,
//! `queued.max.response.bytes.per.connection`, `fetch.max.bytes`,
//! `max.connections`, `max.connections.per.ip(.overrides)`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, DeleteGroupsRequest, DeleteGroupsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    DescribeGroupsRequest, DescribeGroupsResponse, FetchRequest, FetchResponse, GroupId,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, OffsetFetchRequest,
    OffsetFetchResponse, ProduceRequest, ProduceResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Encodable, Request, StrBytes};
use weir_integration_tests::raw::request_header_version;
use weir_integration_tests::records::{self, NewRecord};
use weir_integration_tests::requests::produce_request;
use weir_integration_tests::{RawClient, TestBroker};

use super::{report_rss, Bystander};
use crate::support::{self, error_code, poll_until, TopicInfo};

/// `ConfigResource.Type` of a broker and of a topic.
const BROKER: i8 = 4;
const TOPIC: i8 = 2;

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// One request frame, size prefix included, as a client would write it.
fn frame<R: Request + Encodable>(request: &R, version: i16, correlation_id: i32) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(name("hostile")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, request_header_version(R::KEY, version))
        .expect("header encodes");
    request.encode(&mut body, version).expect("request encodes");
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

/// A raw socket to the broker with bounded reads and writes.
fn raw_socket(broker: &TestBroker) -> TcpStream {
    let stream = TcpStream::connect(broker.bootstrap()).expect("connecting");
    stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// Reads one response frame (without its prefix) from `stream`.
fn read_frame(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let mut body = vec![0u8; u32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body)?;
    Ok(body)
}

/// Virtual memory size of process `pid`, bytes (`VmSize`): what a size
/// prefix reserves shows here before any page is touched.
fn vm_size(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// A socket of the broker's (in any TCP state, CLOSE_WAIT included) and
/// the bytes in its receive queue (not yet read by its owner).
#[derive(Debug)]
struct SocketState {
    unread: u64,
}

/// Sockets in the whole network namespace whose local port is `port` and
/// remote port `remote` (`/proc/net/tcp{,6}`): the broker's side of a
/// client connection.
fn sockets_between(port: u16, remote: u16) -> Vec<SocketState> {
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port_of = |f: &str| {
                f.rsplit(':')
                    .next()
                    .and_then(|p| u16::from_str_radix(p, 16).ok())
            };
            if fields.len() > 3
                && port_of(fields[1]) == Some(port)
                && port_of(fields[2]) == Some(remote)
            {
                let unread = fields[4]
                    .split(':')
                    .nth(1)
                    .and_then(|q| u64::from_str_radix(q, 16).ok())
                    .unwrap_or(0);
                out.push(SocketState { unread });
            }
        }
    }
    out
}

/// A broker started with `overrides` (key, value).
fn broker_with(overrides: &[(&str, &str)]) -> TestBroker {
    overrides
        .iter()
        .fold(TestBroker::builder(), |b, (k, v)| b.override_config(k, v))
        .start()
        .expect("starting weir")
}

/// Asserts that the broker closed `stream`: a read ends (EOF or reset)
/// rather than timing out.
#[track_caller]
fn assert_closed(stream: &mut TcpStream, what: &str) {
    let read = stream.read(&mut [0u8; 1]);
    assert!(
        matches!(&read, Ok(0))
            || matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "{what}: not closed: {read:?}"
    );
}

/// One uncompressed batch of one record of `value_bytes` bytes.
fn batch_of(value_bytes: usize) -> Bytes {
    records::encode_batch(
        &[NewRecord::value(Bytes::from(vec![b'x'; value_bytes]), 1)],
        kafka_protocol::records::Compression::None,
    )
    .expect("an uncompressed batch encodes")
}

fn versions_and_topic(
    broker: &TestBroker,
    topic: &str,
) -> (RawClient, ApiVersionsResponse, TopicInfo) {
    let mut client = support::connect(broker);
    let versions = support::api_versions(&mut client);
    let info = support::ensure_topic(&mut client, &versions, topic);
    (client, versions, info)
}

fn broker_resource(id: i32) -> DescribeConfigsResource {
    DescribeConfigsResource::default()
        .with_resource_type(BROKER)
        .with_resource_name(name(&id.to_string()))
}

/// DescribeConfigs naming this broker 300,000 times (2.4 MB): answered once
/// (Kafka would answer every occurrence: 4.6 GB RSS before the fix).
#[test]
fn describe_configs_naming_the_broker_300000_times_is_answered_once() {
    let broker = support::start_broker();
    let bystander = Bystander::start(&broker, "bystander");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let version = support::newest::<DescribeConfigsRequest>(&versions, ApiKey::DescribeConfigs);
    let request = DescribeConfigsRequest::default()
        .with_include_documentation(true)
        .with_include_synonyms(true)
        .with_resources(vec![broker_resource(broker.node_id()); 300_000]);
    let response: DescribeConfigsResponse = client.send(&request, version).expect("answered");
    assert_eq!(response.results.len(), 1, "one answer for one resource");
    assert_eq!(response.results[0].error_code, error_code::NONE);
    assert!(!response.results[0].configs.is_empty());
    report_rss(&broker, "DescribeConfigs x300000");
    bystander.finish("DescribeConfigs x300000");
    // Still up: a round trip, not just a process handle.
    support::api_versions(&mut client);
}

/// One row per list-taking API: an entry repeated many times is answered
/// once (or, for ListOffsets, once with INVALID_REQUEST, as Kafka).
#[test]
fn repeated_entries_in_lists_are_answered_once() {
    let broker = support::start_broker();
    let bystander = Bystander::start(&broker, "bystander");
    let (mut client, versions, info) = versions_and_topic(&broker, "repeated");
    let produce = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    support::produce_ok(
        &mut client,
        produce,
        &info,
        0,
        records::plain_batch(&["a", "b"], 1),
    );
    let topic = TopicName(name("repeated"));

    // DescribeConfigs: the topic 10,000 times, with different key filters
    // (joined), and an unknown topic 10,000 times.
    let v = support::newest::<DescribeConfigsRequest>(&versions, ApiKey::DescribeConfigs);
    let mut resources = Vec::new();
    for i in 0..10_000 {
        let keys = ["retention.ms", "cleanup.policy"][i % 2];
        resources.push(
            DescribeConfigsResource::default()
                .with_resource_type(TOPIC)
                .with_resource_name(name("repeated"))
                .with_configuration_keys(Some(vec![name(keys)])),
        );
        resources.push(
            DescribeConfigsResource::default()
                .with_resource_type(TOPIC)
                .with_resource_name(name("no-such-topic")),
        );
    }
    let r: DescribeConfigsResponse = client
        .send(
            &DescribeConfigsRequest::default().with_resources(resources),
            v,
        )
        .unwrap();
    assert_eq!(
        r.results.len(),
        2,
        "DescribeConfigs: one result per resource"
    );
    let mut keys: Vec<String> = r.results[0]
        .configs
        .iter()
        .map(|c| c.name.to_string())
        .collect();
    keys.sort();
    assert_eq!(keys, ["cleanup.policy", "retention.ms"], "filters joined");
    assert_eq!(
        r.results[1].error_code,
        error_code::UNKNOWN_TOPIC_OR_PARTITION
    );

    // Metadata: the topic 10,000 times.
    let v = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
    let topics = vec![MetadataRequestTopic::default().with_name(Some(topic.clone())); 10_000];
    let r: MetadataResponse = client
        .send(&MetadataRequest::default().with_topics(Some(topics)), v)
        .unwrap();
    assert_eq!(r.topics.len(), 1, "Metadata: the topic once");
    assert_eq!(r.topics[0].error_code, error_code::NONE);

    // Fetch: partition 0 named 1,000 times (the 278 MB finding).
    let v = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let partitions = vec![
        FetchPartition::default()
            .with_partition(0)
            .with_fetch_offset(0)
            .with_partition_max_bytes(i32::MAX);
        1_000
    ];
    let fetch = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(0)
        .with_max_bytes(i32::MAX)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic.clone())
            .with_topic_id(info.id)
            .with_partitions(partitions)]);
    let r: FetchResponse = client.send(&fetch, v).unwrap();
    let answered: usize = r.responses.iter().map(|t| t.partitions.len()).sum();
    assert_eq!(answered, 1, "Fetch: the partition once");
    assert_eq!(r.responses[0].partitions[0].error_code, error_code::NONE);
    assert!(r.responses[0].partitions[0]
        .records
        .as_ref()
        .is_some_and(|b| !b.is_empty()));

    // ListOffsets: partition 0 twice: INVALID_REQUEST, once (Kafka's
    // duplicatePartitions); partition 1 does not exist, named once.
    let v = support::newest::<ListOffsetsRequest>(&versions, ApiKey::ListOffsets);
    let partition = |p: i32| {
        ListOffsetsPartition::default()
            .with_partition_index(p)
            .with_timestamp(-1)
    };
    let list = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic.clone())
            .with_partitions(vec![partition(0), partition(1), partition(0)])]);
    let r: ListOffsetsResponse = client.send(&list, v).unwrap();
    let codes: Vec<(i32, i16)> = r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect();
    assert_eq!(
        codes,
        [
            (0, error_code::INVALID_REQUEST),
            (1, error_code::UNKNOWN_TOPIC_OR_PARTITION)
        ],
        "ListOffsets"
    );

    // DescribeGroups: one group 10,000 times.
    let v = support::newest::<DescribeGroupsRequest>(&versions, ApiKey::DescribeGroups);
    let r: DescribeGroupsResponse = client
        .send(
            &DescribeGroupsRequest::default().with_groups(vec![GroupId(name("g")); 10_000]),
            v,
        )
        .unwrap();
    assert_eq!(r.groups.len(), 1, "DescribeGroups: the group once");

    // OffsetFetch (v1-7 shape): partition 0 named 10,000 times.
    let v = support::newest::<OffsetFetchRequest>(&versions, ApiKey::OffsetFetch).min(7);
    let r: OffsetFetchResponse = client
        .send(
            &OffsetFetchRequest::default()
                .with_group_id(GroupId(name("g")))
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(topic.clone())
                    .with_partition_indexes(vec![0; 10_000])])),
            v,
        )
        .unwrap();
    assert_eq!(
        r.topics[0].partitions.len(),
        1,
        "OffsetFetch: the partition once"
    );

    // DeleteTopics: a topic named twice is refused once, and kept.
    let doomed = support::ensure_topic(&mut client, &versions, "doomed");
    let r: DeleteTopicsResponse = client
        .send(
            &DeleteTopicsRequest::default()
                .with_topic_names(vec![TopicName(name("doomed")); 2])
                .with_timeout_ms(30_000),
            5,
        )
        .unwrap();
    let codes: Vec<i16> = r.responses.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, [error_code::INVALID_REQUEST], "DeleteTopics");
    // Auto-creation would bring back a deleted topic under a new id.
    assert_eq!(
        support::ensure_topic(&mut client, &versions, "doomed").id,
        doomed.id,
        "doomed was deleted"
    );

    // DeleteGroups: one group 10,000 times.
    let v = support::newest::<DeleteGroupsRequest>(&versions, ApiKey::DeleteGroups);
    let r: DeleteGroupsResponse = client
        .send(
            &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(name("g")); 10_000]),
            v,
        )
        .unwrap();
    assert_eq!(r.results.len(), 1, "DeleteGroups: the group once");

    report_rss(&broker, "repeated entries");
    bystander.finish("repeated entries");
}

/// Encodes a DescribeConfigs naming `topics` distinct unknown topics of 100
/// bytes: an answer of about 2.5 times its size, every result distinct.
fn describe_many_unknown_topics(topics: usize, version: i16, seed: usize) -> Vec<u8> {
    let resources = (0..topics)
        .map(|i| {
            DescribeConfigsResource::default()
                .with_resource_type(TOPIC)
                .with_resource_name(name(&format!("{seed:08}-{i:091}")))
        })
        .collect();
    frame(
        &DescribeConfigsRequest::default().with_resources(resources),
        version,
        1,
    )
}

/// Opens 25 connections that pipeline DescribeConfigs requests with
/// answers of about 500 KB and never read, until the broker stops reading
/// them (their writes time out); returns how much the broker's RSS grew,
/// with the bystander served throughout.
fn never_reading(broker: &TestBroker, what: &str) -> u64 {
    let bystander = Bystander::start(broker, "bystander");
    let (mut client, versions, _info) = versions_and_topic(broker, "unused");
    let v = support::newest::<DescribeConfigsRequest>(&versions, ApiKey::DescribeConfigs);
    let before = report_rss(broker, "before the non-readers");
    // About 200 KB per request, about 500 KB per answer.
    let request = describe_many_unknown_topics(2_000, v, 0);
    let writers: Vec<_> = (0..25)
        .map(|_| {
            let mut stream = raw_socket(broker);
            let request = request.clone();
            std::thread::spawn(move || {
                let mut written = 0usize;
                // Until the broker stops reading (the write times out).
                while written < 2_000 && stream.write_all(&request).is_ok() {
                    written += 1;
                }
                (stream, written)
            })
        })
        .collect();
    let held: Vec<(TcpStream, usize)> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let counts: Vec<usize> = held.iter().map(|(_, n)| *n).collect();
    println!(
        "{what}: requests written per connection before the broker stopped reading: {counts:?}"
    );
    assert!(
        counts.iter().all(|&n| n < 2_000),
        "the broker kept reading a connection that never reads: {counts:?}"
    );
    let during = report_rss(broker, what);
    bystander.finish(what);
    drop(held);
    // Still up: a round trip, not just a process handle.
    support::api_versions(&mut client);
    during.saturating_sub(before)
}

/// 25 connections pipelining requests and never reading: each stops being
/// read once `queued.max.response.bytes.per.connection` (1 MiB) of its
/// answers are unsent (4.5 GB RSS before the fix; unbounded, 25
/// connections hold 128 answers of 500 KB each, 1.6 GB).
#[test]
fn connections_that_never_read_stop_being_read() {
    let broker = support::start_broker();
    let grown = never_reading(&broker, "25 connections never reading");
    assert!(grown < 400 << 20, "RSS grew by {} MiB", grown >> 20);
}

/// `queued.max.response.bytes` bounds the unsent answers of all
/// connections together (here with no per-connection bound to speak of):
/// each non-reader holds one answer, and a client that reads (the
/// bystander, with nothing unsent) is still answered.
#[test]
fn queued_max_response_bytes_bounds_unsent_answers_in_all() {
    let broker = broker_with(&[
        ("queued.max.response.bytes", "1"),
        ("queued.max.response.bytes.per.connection", "1073741824"),
    ]);
    let grown = never_reading(&broker, "queued.max.response.bytes=1");
    assert!(grown < 200 << 20, "RSS grew by {} MiB", grown >> 20);
}

/// 29 connections each sending a size prefix of 100 MiB (the maximum) and a
/// few bytes: nothing is reserved from the prefix (each reserved 100 MiB
/// before the fix; 29 aborted the broker under a 3 GB address-space limit).
/// One then completes its request and is answered.
#[test]
fn large_size_prefixes_reserve_nothing() {
    let broker = support::start_broker();
    let pid = broker.pid().unwrap();
    let bystander = Bystander::start(&broker, "bystander");
    let before = vm_size(pid);
    let prefix = (100u32 << 20).to_be_bytes();
    let mut streams: Vec<TcpStream> = (0..29)
        .map(|_| {
            let mut s = raw_socket(&broker);
            s.write_all(&prefix).unwrap();
            s.write_all(&[0u8; 10]).unwrap();
            s
        })
        .collect();
    let ports: Vec<u16> = streams
        .iter()
        .map(|s| s.local_addr().unwrap().port())
        .collect();
    poll_until(
        Duration::from_secs(10),
        "the broker to read every prefix",
        || {
            ports
                .iter()
                .all(|&p| {
                    sockets_between(broker.port(), p)
                        .iter()
                        .all(|s| s.unread == 0)
                })
                .then_some(())
        },
    );
    let grown = vm_size(pid).saturating_sub(before);
    println!(
        "virtual size grew by {} MiB after 29 prefixes of 100 MiB",
        grown >> 20
    );
    report_rss(&broker, "29 prefixes of 100 MiB");
    // Reserved from the prefixes: 2.9 GB.
    assert!(grown < 512 << 20, "{} MiB reserved", grown >> 20);
    // A bad size is still refused from the prefix alone.
    let mut too_big = raw_socket(&broker);
    too_big
        .write_all(&((100u32 << 20) + 1).to_be_bytes())
        .unwrap();
    assert_closed(&mut too_big, "a prefix over socket.request.max.bytes");
    drop(streams.drain(1..));
    bystander.finish("29 prefixes of 100 MiB");
    assert!(
        broker
            .stderr_tail()
            .contains("exceeds the limit of 104857600 bytes"),
        "the close is logged"
    );
}

/// A Produce request of about `value_bytes` for partition 0 of `topic`.
fn big_produce(topic: &str, value_bytes: usize, version: i16, correlation_id: i32) -> Vec<u8> {
    let batch = batch_of(value_bytes);
    frame(
        &produce_request(topic, 0, -1, batch),
        version,
        correlation_id,
    )
}

/// `queued.max.request.bytes` of 64 KiB and 20 connections each sending
/// 900 KB Produce requests, all half-sent at once: connections without
/// budget are muted, not closed; the rescue lets one at a time finish, so
/// every request (each larger than the whole budget) is answered. Rescues
/// that stall pass the permit on while the debt stays under one
/// `socket.request.max.bytes` (1 MiB here), so at most two halves are read
/// however long the clients take (before that bound, every half was read
/// once the machine was slow enough for the rescue to rotate).
#[test]
fn queued_max_request_bytes_mutes_readers_and_serves_requests_larger_than_itself() {
    let broker = broker_with(&[
        ("queued.max.request.bytes", "65536"),
        ("socket.request.max.bytes", "1048576"),
    ]);
    let bystander = Bystander::start(&broker, "bystander");
    let (_client, versions, _info) = versions_and_topic(&broker, "big");
    let v = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let before = report_rss(&broker, "before the large produces");
    let request = big_produce("big", 900_000, v, 7);
    let half = request.len() / 2;
    let mut streams: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = raw_socket(&broker);
            s.write_all(&request[..half]).unwrap();
            s
        })
        .collect();
    // The broker reads what its budget allows (and the one rescued
    // connection its half), then stops reading the others: their halves
    // stay in the kernel's receive queues while it serves other clients.
    let ports: Vec<u16> = streams
        .iter()
        .map(|s| s.local_addr().unwrap().port())
        .collect();
    let unread = || -> Vec<u64> {
        ports
            .iter()
            .map(|&p| {
                sockets_between(broker.port(), p)
                    .iter()
                    .map(|s| s.unread)
                    .sum()
            })
            .collect()
    };
    poll_until(Duration::from_secs(10), "the first half read", || {
        unread().contains(&0).then_some(())
    });
    let mut probe = support::connect(&broker);
    for _ in 0..20 {
        support::api_versions(&mut probe);
    }
    let muted = unread().iter().filter(|&&n| n > 0).count();
    println!(
        "connections muted with unread bytes: {muted} of 20: {:?}",
        unread()
    );
    assert!(
        muted >= 10,
        "the broker read past queued.max.request.bytes: {:?}",
        unread()
    );
    if std::env::var_os("WEIR_DEBUG_COPY_LOG").is_some() {
        std::fs::copy(broker.log_path(), "/tmp/hm-broker.log").unwrap();
    }
    let during = report_rss(&broker, "20 half-sent requests of 900 KB");
    for s in &mut streams {
        s.write_all(&request[half..]).unwrap();
    }
    for (i, s) in streams.iter_mut().enumerate() {
        let body = read_frame(s).unwrap_or_else(|e| panic!("connection {i} not answered: {e}"));
        let (r, _) = decode_produce(&body, v);
        assert_eq!(
            r.responses[0].partition_responses[0].error_code,
            error_code::NONE,
            "connection {i}"
        );
    }
    println!(
        "RSS grew by {} MiB with 20 half-sent requests",
        during.saturating_sub(before) >> 20
    );
    bystander.finish("queued.max.request.bytes=65536");
}

fn decode_produce(body: &[u8], version: i16) -> (ProduceResponse, i32) {
    use kafka_protocol::messages::ResponseHeader;
    use kafka_protocol::protocol::Decodable;
    let mut buf = Bytes::copy_from_slice(body);
    let header = ResponseHeader::decode(
        &mut buf,
        weir_integration_tests::raw::response_header_version(ApiKey::Produce as i16, version),
    )
    .unwrap();
    (
        ProduceResponse::decode(&mut buf, version).unwrap(),
        header.correlation_id,
    )
}

/// `fetch.max.bytes` caps a Fetch asking for everything; the first batch is
/// still returned whole when larger (KIP-74, case C04).
#[test]
fn fetch_max_bytes_caps_a_fetch_response() {
    let broker = broker_with(&[("fetch.max.bytes", "300000")]);
    let bystander = Bystander::start(&broker, "bystander");
    let (mut client, versions, info) = versions_and_topic(&broker, "capped");
    let produce = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    support::produce_ok(&mut client, produce, &info, 0, batch_of(500_000));
    for _ in 0..10 {
        support::produce_ok(&mut client, produce, &info, 0, batch_of(100_000));
    }
    let v = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let fetch_from = |offset: i64| {
        let mut spec = support::FetchSpec::one(v, 0, offset);
        spec.max_bytes = i32::MAX;
        spec.partitions = vec![(0, offset, i32::MAX)];
        spec
    };
    let first = support::fetch(&mut client, &info, &fetch_from(0));
    let records = first[&0].records.clone().unwrap_or_default();
    assert!(
        records.len() > 500_000 && records.len() < 600_000,
        "the first batch alone, whole: {} bytes",
        records.len()
    );
    let rest = support::fetch(&mut client, &info, &fetch_from(1));
    let records = rest[&0].records.clone().unwrap_or_default();
    assert!(
        records.len() > 200_000 && records.len() <= 300_000,
        "capped at fetch.max.bytes: {} bytes",
        records.len()
    );
    bystander.finish("fetch.max.bytes=300000");
}

/// A long-poll Fetch (max_wait 24 days) whose client closes: the broker
/// closes its socket at once (it stayed in CLOSE-WAIT until max_wait before
/// the fix) and the bystander is served.
#[test]
fn a_closed_client_cancels_its_parked_fetch_and_frees_its_socket() {
    let broker = support::start_broker();
    let pid = broker.pid().unwrap();
    let bystander = Bystander::start(&broker, "bystander");
    let (_client, versions, info) = versions_and_topic(&broker, "parked");
    let v = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let mut spec = support::FetchSpec::one(v, 0, 0);
    spec.max_wait_ms = i32::MAX;
    let fds_before = super::open_fds(pid);
    let mut streams = Vec::new();
    for i in 0..10 {
        let mut s = raw_socket(&broker);
        s.write_all(&frame(&support::fetch_request(&info, &spec), v, i))
            .unwrap();
        streams.push(s);
    }
    // Every fetch is parked: the broker's side of each socket exists and
    // has read the whole Fetch (nothing left unread in its queue).
    let ports: Vec<u16> = streams
        .iter()
        .map(|s| s.local_addr().unwrap().port())
        .collect();
    poll_until(
        Duration::from_secs(5),
        "the broker to read every Fetch",
        || {
            ports
                .iter()
                .all(|&p| {
                    let sockets = sockets_between(broker.port(), p);
                    !sockets.is_empty() && sockets.iter().all(|s| s.unread == 0)
                })
                .then_some(())
        },
    );
    let fds_parked = super::open_fds(pid);
    drop(streams);
    poll_until(
        Duration::from_secs(5),
        "the broker's sockets to close",
        || {
            let left: Vec<SocketState> = ports
                .iter()
                .flat_map(|&p| sockets_between(broker.port(), p))
                .collect();
            left.is_empty().then_some(())
        },
    );
    let fds_after = poll_until(Duration::from_secs(5), "descriptors back", || {
        let n = super::open_fds(pid);
        (n <= fds_before).then_some(n)
    });
    println!("broker descriptors: {fds_before} before, {fds_parked} with 10 parked fetches, {fds_after} after");
    bystander.finish("closed long-poll fetches");
}

/// `max.connections.per.ip.overrides` (and `max.connections.per.ip`): a
/// connection over its address's limit is closed at once and logged; one
/// closing makes room. `max.connections`: the acceptor waits for a slot.
#[test]
fn connection_limits_close_or_wait_as_kafka() {
    let broker = broker_with(&[
        ("max.connections.per.ip", "1000"),
        ("max.connections.per.ip.overrides", "127.0.0.1:4"),
    ]);
    let bystander = Bystander::start(&broker, "bystander");
    // The bystander holds one; three more are allowed.
    let mut open: Vec<RawClient> = (0..3).map(|_| support::connect(&broker)).collect();
    for c in &mut open {
        support::api_versions(c);
    }
    let mut refused = raw_socket(&broker);
    assert_closed(&mut refused, "a connection over max.connections.per.ip");
    poll_until(Duration::from_secs(5), "the rejection logged", || {
        broker
            .stderr_tail()
            .contains("Rejected connection")
            .then_some(())
    });
    drop(open.pop());
    poll_until(Duration::from_secs(5), "room for a new connection", || {
        let mut c = RawClient::connect(&broker.bootstrap()).ok()?;
        c.send(&ApiVersionsRequest::default(), 0)
            .ok()
            .map(|_: ApiVersionsResponse| ())
    });
    bystander.finish("max.connections.per.ip.overrides");

    let mut limited = broker_with(&[("max.connections", "2")]);
    let bystander = Bystander::start(&limited, "bystander");
    let mut second = support::connect(&limited);
    support::api_versions(&mut second);
    // The third waits in the listen backlog, unanswered.
    let mut waiting = raw_socket(&limited);
    waiting
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    waiting
        .write_all(&frame(&ApiVersionsRequest::default(), 0, 1))
        .unwrap();
    assert!(
        read_frame(&mut waiting).is_err(),
        "served past max.connections"
    );
    drop(second);
    waiting
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    read_frame(&mut waiting).expect("answered once a slot was free");
    bystander.finish("max.connections=2");
    limited.shutdown().unwrap();
}

/// Review finding (issue 15): with `queued.max.request.bytes` used up by
/// three connections that each announce a 3 MB request, send 2.5 MB of it
/// and go silent, the one holding the rescue permit (which lets a
/// connection read past the empty pool to finish its request) kept it
/// while waiting for bytes that never came, so every request larger than a
/// connection's own 16 KiB waited until the silent ones idled out. Now a
/// rescued connection gives the permit up after 250 ms without a byte (or
/// 1 s in all), and the bystander's 100 KB produce is served.
#[test]
fn silent_half_sent_requests_do_not_keep_the_rescue() {
    let broker = broker_with(&[("queued.max.request.bytes", "4194304")]);
    let bystander = Bystander::start(&broker, "bystander");
    let mut client = support::connect(&broker);
    client
        .set_read_timeout(super::BYSTANDER_BOUND)
        .expect("read timeout");
    let versions = support::api_versions(&mut client);
    let version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let topic = support::ensure_topic(&mut client, &versions, "large");

    let pid = broker.pid().expect("running");
    let before = super::rss_bytes(pid).0;
    let body = vec![0u8; 2_500_000];
    let silent: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut s = TcpStream::connect(broker.bootstrap()).expect("connect");
            s.write_all(&3_000_000i32.to_be_bytes())
                .expect("size prefix");
            s.write_all(&body).expect("part of the body");
            s
        })
        .collect();
    // Until the broker has read past its pool into the silent requests,
    // the large produce below would not need the rescue at all.
    poll_until(
        Duration::from_secs(10),
        "the broker to buffer the silent requests",
        || (super::rss_bytes(pid).0 > before + (7 << 19)).then_some(()),
    );
    let value = "v".repeat(100_000);
    for _ in 0..3 {
        support::produce_ok(
            &mut client,
            version,
            &topic,
            0,
            records::plain_batch(&[&value], 1),
        );
    }
    drop(silent);
    bystander.finish("silent half-sent requests");
    report_rss(&broker, "silent half-sent requests");
}
