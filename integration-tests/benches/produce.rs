//! End-to-end produce throughput of the `weir` binary: 8 concurrent
//! producers, each on its own connection, send acks=all batches of 16 × 1 KiB
//! records to one partition each, against two topics of the SAME broker run
//! side by side: `durable` (the default: each response waits for the
//! group-committed fdatasync that covers it) and `write-caching`
//! (`write.caching=true`: answered from the page cache, as Apache Kafka
//! does). The ratio of the two throughputs is what the storage issue's
//! acceptance point asks for (durable >= 70% of fsync off); `scripts/bench`
//! prints it.
//!
//! Each case writes to a topic of its own, created before it and deleted
//! after it, with no retention limit during the case: everything written
//! stays on disk while the case runs, so the fsync-off case also pays for
//! the kernel writing its data back once the page cache holds more dirty
//! data than `vm.dirty_background_ratio` allows (a few GB), as a broker
//! running with fsync off does. (With a small `retention.bytes` the
//! fsync-off case deleted its segments before writeback began and never
//! wrote to the disk at all, which no production broker can do.) A case
//! writes at most about 15 GB; the disk needs that much free space.
//!
//! Run: `cargo build --release -p weir-broker && cargo bench -p
//! weir-integration-tests --bench produce` (or `scripts/bench`). The broker's
//! `log.dirs` is a temporary directory: put `TMPDIR` on the disk to measure.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{
    CreateTopicsRequest, DeleteTopicsRequest, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use weir_integration_tests::records::{encode_batch, NewRecord};
use weir_integration_tests::requests::produce_request;
use weir_integration_tests::{RawClient, TestBroker};

/// Concurrent producers (connections), one partition each.
const PRODUCERS: usize = 8;
/// Records per batch and bytes per record value.
const RECORDS: usize = 16;
const VALUE_BYTES: usize = 1024;
/// Produce, CreateTopics and DeleteTopics versions every Weir build serves.
const PRODUCE_VERSION: i16 = 9;
const CREATE_TOPICS_VERSION: i16 = 5;
const DELETE_TOPICS_VERSION: i16 = 4;

fn batch() -> Bytes {
    let records: Vec<NewRecord> = (0..RECORDS)
        .map(|i| NewRecord::value(vec![b'a' + (i % 26) as u8; VALUE_BYTES], 1_000))
        .collect();
    encode_batch(&records, Compression::None).expect("encode batch")
}

fn create_topic(client: &mut RawClient, name: &str, configs: &[(&str, &str)]) {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
            .with_num_partitions(PRODUCERS as i32)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string((*k).to_owned()))
                            .with_value(Some(StrBytes::from_string((*v).to_owned())))
                    })
                    .collect(),
            )]);
    let response = client
        .send(&request, CREATE_TOPICS_VERSION)
        .expect("CreateTopics");
    assert_eq!(response.topics[0].error_code, 0, "creating {name}");
}

fn delete_topic(client: &mut RawClient, name: &str) {
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topic_names(vec![TopicName(StrBytes::from_string(name.to_owned()))]);
    let response = client
        .send(&request, DELETE_TOPICS_VERSION)
        .expect("DeleteTopics");
    assert_eq!(response.responses[0].error_code, 0, "deleting {name}");
}

/// Runs `iters` acks=all produces on each of the 8 connections at once and
/// returns the time from the common start to the last response. Producer
/// `p` writes to partition `p % partitions` and keeps up to `in_flight`
/// requests outstanding on its connection (1: send and wait; 5: the Java
/// client's `max.in.flight.requests.per.connection` default).
fn run(bootstrap: &str, topic: &str, partitions: usize, in_flight: u64, iters: u64) -> Duration {
    let start = Arc::new(Barrier::new(PRODUCERS + 1));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (bootstrap, start) = (bootstrap.to_owned(), start.clone());
            let topic = topic.to_owned();
            std::thread::spawn(move || {
                let mut client = RawClient::connect(&bootstrap).expect("connect");
                let request = produce_request(&topic, (p % partitions) as i32, -1, batch());
                let mut outstanding = std::collections::VecDeque::new();
                start.wait();
                for sent in 0..iters + in_flight {
                    if sent >= in_flight {
                        let Some(pending) = outstanding.pop_front() else {
                            break;
                        };
                        let response = client
                            .read_response::<ProduceResponse>(pending)
                            .expect("Produce");
                        let partition = &response.body.responses[0].partition_responses[0];
                        assert_eq!(partition.error_code, 0, "{:?}", partition.error_message);
                    }
                    if sent < iters {
                        let header = client.header::<ProduceRequest>(PRODUCE_VERSION);
                        outstanding
                            .push_back(client.write_request(header, &request).expect("Produce"));
                    }
                }
            })
        })
        .collect();
    start.wait();
    let began = Instant::now();
    for producer in producers {
        producer.join().expect("producer thread");
    }
    began.elapsed()
}

fn bench_produce(c: &mut Criterion) {
    let broker = TestBroker::builder().start().expect("starting weir");
    let bootstrap = broker.bootstrap();
    let mut admin = RawClient::connect(&bootstrap).expect("connect");

    let mut group = c.benchmark_group("produce_acks_all_8_producers");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    // One iteration = one batch from each of the 8 producers.
    group.throughput(Throughput::Bytes((PRODUCERS * batch().len()) as u64));
    for (partitions, in_flight) in [(1, 1), (PRODUCERS, 1), (1, 5), (PRODUCERS, 5)] {
        for (mode, configs) in [
            ("durable", &[][..]),
            ("write-caching", &[("write.caching", "true")][..]),
        ] {
            let case = format!("{partitions}-partitions-{in_flight}-in-flight");
            let topic = format!("{mode}-{case}");
            create_topic(&mut admin, &topic, configs);
            group.bench_function(BenchmarkId::new(mode, case), |b| {
                b.iter_custom(|iters| run(&bootstrap, &topic, partitions, in_flight, iters))
            });
            delete_topic(&mut admin, &topic);
        }
    }
    group.finish();
}

criterion_group!(benches, bench_produce);
criterion_main!(benches);
