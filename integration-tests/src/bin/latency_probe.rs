//! `weir-latency-probe`: a fixed-rate latency load generator that adds no
//! client-side batching, garbage collection or throttling of its own, so the
//! latencies it reports are the broker's plus loopback TCP (issue 6).
//!
//! One producer connection sends a Produce request (acks=1 by default, one
//! batch of `rate / 1000` records) every millisecond on a fixed schedule,
//! round-robin over the topic's partitions, and waits for each answer.
//! Latency counts from the *scheduled* send time, so a slow answer that
//! delays the next send is charged to every record it delayed (no
//! coordinated omission). One consumer connection long-polls Fetch
//! (`max_wait_ms` 500, `min_bytes` 1) for every partition; each record's
//! value starts with its scheduled send time, so end-to-end latency is the
//! time from scheduled send to the Fetch answer that carried it.
//!
//! Prints one line:
//! `send_to_ack_ms p50=.. p99=.. p999=.. max=.. end_to_end_ms p50=.. p99=.. p999=.. max=.. rate=..`
//! (records per second actually sent). The first second is left out as
//! warm-up. Works against any Kafka broker that serves Produce v9 and Fetch
//! v11 (Kafka 2.7+ and Weir).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::records::{decode_records, encode_batch, NewRecord};
use weir_integration_tests::requests::produce_request;
use weir_integration_tests::RawClient;

/// Produce v9: the last version before topic ids, served by Kafka 2.4+.
const PRODUCE_VERSION: i16 = 9;
/// Fetch v11: rack-aware fetch, before topic ids (v13); served by Kafka 2.3+.
const FETCH_VERSION: i16 = 11;
/// Requests per second: one every millisecond.
const REQUESTS_PER_SECOND: u64 = 1000;
/// Error codes retried (a broker that has not yet applied a new topic's
/// leaders): UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
/// NOT_LEADER_OR_FOLLOWER. Latency still counts from the scheduled send.
const RETRIABLE: [i16; 3] = [3, 5, 6];
/// How long a retriable error may last before the probe gives up.
const RETRY_FOR: Duration = Duration::from_secs(10);

#[derive(Debug, Parser)]
#[command(about = "Fixed-rate produce and end-to-end latency probe (no client batching)")]
struct Args {
    /// host:port of the broker (it must lead every partition of the topic).
    #[arg(long)]
    bootstrap: String,
    /// An existing topic; use a fresh one (the consumer reads from offset 1,
    /// after the record the readiness check writes to each partition).
    #[arg(long)]
    topic: String,
    /// Partitions of the topic, written round-robin one request at a time.
    #[arg(long, default_value_t = 1)]
    partitions: i32,
    /// Records per second (a multiple of 1000 sends the same count per request).
    #[arg(long, default_value_t = 20_000)]
    rate: u64,
    /// Value size of each record in bytes (at least 8).
    #[arg(long, default_value_t = 1024)]
    record_size: usize,
    /// How long to send, in seconds (the first is warm-up).
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// acks of the Produce requests (1 or -1).
    #[arg(long, default_value_t = 1)]
    acks: i16,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("weir-latency-probe: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), String> {
    if args.record_size < 8 || args.partitions < 1 || args.rate < REQUESTS_PER_SECOND {
        return Err("need --record-size >= 8, --partitions >= 1, --rate >= 1000".into());
    }
    ready(args)?;
    let origin = Instant::now();
    let warm_up_ns = Duration::from_secs(1).as_nanos() as u64;
    let done = Arc::new(AtomicBool::new(false));
    let total = args.rate * args.seconds;
    let consumer = {
        let (bootstrap, topic, partitions) =
            (args.bootstrap.clone(), args.topic.clone(), args.partitions);
        let done = done.clone();
        std::thread::spawn(move || {
            consume(
                &bootstrap, &topic, partitions, total, origin, &done, warm_up_ns,
            )
        })
    };
    let produced = produce(args, origin, warm_up_ns);
    // The consumer stops once it has seen every record, or 10 s after the
    // producer finished if records are missing.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !consumer.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10)); // polling the consumer thread
    }
    done.store(true, Ordering::Release);
    let consumed = consumer
        .join()
        .map_err(|_| "consumer thread panicked".to_string())??;
    let (mut acks, sent, elapsed) = produced?;
    let mut ends = consumed;
    println!(
        "send_to_ack_ms {} end_to_end_ms {} rate={:.0}",
        summary(&mut acks),
        summary(&mut ends),
        sent as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}

/// Writes one record to every partition, retrying retriable errors, so
/// the measured run starts once the broker serves them all (Kafka answers
/// CreateTopics before its replica manager leads the new partitions). The
/// consumer starts after these records, at offset 1.
fn ready(args: &Args) -> Result<(), String> {
    let mut client = RawClient::connect(&args.bootstrap).map_err(|e| e.to_string())?;
    let began = Instant::now();
    for partition in 0..args.partitions {
        let batch = encode_batch(
            &[NewRecord::value(vec![0u8; 8], 0)],
            kafka_protocol::records::Compression::None,
        )?;
        let request = produce_request(&args.topic, partition, args.acks, batch);
        send_until_acked(&mut client, &request, began + RETRY_FOR)?;
    }
    Ok(())
}

/// Sends `request` (to one partition) and waits for its answer, sending it
/// again after a retriable error until `give_up_at`; returns when the
/// successful answer arrived.
fn send_until_acked(
    client: &mut RawClient,
    request: &ProduceRequest,
    give_up_at: Instant,
) -> Result<Instant, String> {
    loop {
        let header = client.header::<ProduceRequest>(PRODUCE_VERSION);
        let pending = client
            .write_request(header, request)
            .map_err(|e| e.to_string())?;
        let response = client
            .read_response::<ProduceResponse>(pending)
            .map_err(|e| e.to_string())?;
        let answered = Instant::now();
        let partition = &response.body.responses[0].partition_responses[0];
        match partition.error_code {
            0 => return Ok(answered),
            code if RETRIABLE.contains(&code) && answered < give_up_at => {
                std::thread::sleep(Duration::from_millis(10)); // retry backoff
            }
            code => {
                return Err(format!(
                    "Produce to partition {}: error code {code}",
                    partition.index
                ))
            }
        }
    }
}

/// Sends on the schedule; returns (send-to-ack latencies in ns after
/// warm-up, records sent, time spent sending).
fn produce(
    args: &Args,
    origin: Instant,
    warm_up_ns: u64,
) -> Result<(Vec<u64>, u64, Duration), String> {
    let mut client = RawClient::connect(&args.bootstrap).map_err(|e| e.to_string())?;
    let per_request = (args.rate / REQUESTS_PER_SECOND) as usize;
    let requests = args.seconds * REQUESTS_PER_SECOND;
    let interval = Duration::from_nanos(1_000_000_000 / REQUESTS_PER_SECOND);
    let start = Instant::now();
    let mut latencies = Vec::with_capacity(requests as usize);
    let padding = vec![b'x'; args.record_size - 8];
    for i in 0..requests {
        let scheduled = start + interval * i as u32;
        if let Some(wait) = scheduled.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait); // the fixed send schedule
        }
        let stamp = scheduled.duration_since(origin).as_nanos() as u64;
        let records: Vec<NewRecord> = (0..per_request)
            .map(|_| {
                let mut value = Vec::with_capacity(args.record_size);
                value.extend_from_slice(&stamp.to_le_bytes());
                value.extend_from_slice(&padding);
                NewRecord::value(value, 0)
            })
            .collect();
        let batch = encode_batch(&records, kafka_protocol::records::Compression::None)?;
        let partition = (i % args.partitions as u64) as i32;
        let request = produce_request(&args.topic, partition, args.acks, batch);
        let acked = send_until_acked(&mut client, &request, scheduled + RETRY_FOR)?;
        if stamp >= warm_up_ns {
            latencies.push(acked.duration_since(scheduled).as_nanos() as u64);
        }
    }
    Ok((latencies, requests * per_request as u64, start.elapsed()))
}

/// Long-polls every partition from offset 1 until `total` records arrived
/// or `done` is set; returns end-to-end latencies in ns after warm-up.
fn consume(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    total: u64,
    origin: Instant,
    done: &AtomicBool,
    warm_up_ns: u64,
) -> Result<Vec<u64>, String> {
    let mut client = RawClient::connect(bootstrap).map_err(|e| e.to_string())?;
    // After the record `ready` wrote to each partition.
    let mut offsets = vec![1i64; partitions as usize];
    let mut seen = 0u64;
    let mut latencies = Vec::with_capacity(total as usize);
    while seen < total && !done.load(Ordering::Acquire) {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(500)
            .with_min_bytes(1)
            .with_max_bytes(64 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(
                    offsets
                        .iter()
                        .enumerate()
                        .map(|(p, &offset)| {
                            FetchPartition::default()
                                .with_partition(p as i32)
                                .with_fetch_offset(offset)
                                .with_partition_max_bytes(4 << 20)
                        })
                        .collect(),
                )]);
        let header = client.header::<FetchRequest>(FETCH_VERSION);
        let pending = client
            .write_request(header, &request)
            .map_err(|e| e.to_string())?;
        let response = client
            .read_response::<FetchResponse>(pending)
            .map_err(|e| e.to_string())?;
        let arrived = Instant::now().duration_since(origin).as_nanos() as u64;
        for topic in &response.body.responses {
            for partition in &topic.partitions {
                let code = partition.error_code;
                if RETRIABLE.contains(&code) && arrived < RETRY_FOR.as_nanos() as u64 {
                    std::thread::sleep(Duration::from_millis(10)); // retry backoff
                    continue;
                }
                if code != 0 {
                    return Err(format!(
                        "Fetch partition {}: error code {code}",
                        partition.partition_index
                    ));
                }
                let Some(records) = partition.records.as_ref().filter(|r| !r.is_empty()) else {
                    continue;
                };
                for record in decode_records(&Bytes::clone(records))? {
                    let slot = &mut offsets[partition.partition_index as usize];
                    if record.offset < *slot {
                        continue; // a batch that starts before the fetch offset
                    }
                    *slot = record.offset + 1;
                    seen += 1;
                    let stamp = record
                        .value
                        .as_ref()
                        .and_then(|v| v.get(..8))
                        .and_then(|b| <[u8; 8]>::try_from(b).ok())
                        .map(u64::from_le_bytes)
                        .ok_or("a record without the probe's timestamp")?;
                    if stamp >= warm_up_ns {
                        latencies.push(arrived.saturating_sub(stamp));
                    }
                }
            }
        }
    }
    if seen < total {
        return Err(format!("consumed {seen} of {total} records"));
    }
    Ok(latencies)
}

/// `p50=.. p99=.. p999=.. max=..` in milliseconds of `ns` (sorted in place).
fn summary(ns: &mut [u64]) -> String {
    ns.sort_unstable();
    let at = |q: f64| {
        if ns.is_empty() {
            return f64::NAN;
        }
        let i = ((ns.len() as f64 * q).ceil() as usize).clamp(1, ns.len()) - 1;
        ns[i] as f64 / 1e6
    };
    format!(
        "p50={:.3} p99={:.3} p999={:.3} max={:.3}",
        at(0.5),
        at(0.99),
        at(0.999),
        at(1.0)
    )
}
