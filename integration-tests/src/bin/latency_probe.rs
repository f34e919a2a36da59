//! `weir-latency-probe`: a fixed-rate latency load generator that adds no
//! client-side batching, garbage collection or throttling of its own, so the
//! latencies it reports are the broker's plus loopback TCP (issue 6).
//!
//! The producer sends a Produce request (acks=1 by default, one batch of
//! `rate / 1000` records) every millisecond on a fixed schedule, round-robin
//! over the topic's partitions, each to the partition's leader over one
//! connection per leader, with at most `--max-in-flight` requests awaiting
//! their answers on a connection (default 1: it waits for each answer before
//! it sends the next request there; a Kafka producer's
//! `max.in.flight.requests.per.connection` is 5). Latency counts from the
//! *scheduled* send time, so a slow answer that delays the next send is
//! charged to every record it delayed (no coordinated omission). One consumer connection per leader
//! long-polls Fetch (`max_wait_ms` 500, `min_bytes` 1) for the partitions it
//! leads; each record's value starts with its scheduled send time, so
//! end-to-end latency is the time from scheduled send to the Fetch answer
//! that carried it.
//!
//! The leaders come from one Metadata v4 request to the first bootstrap
//! address that answers. Against a single broker this is one connection
//! carrying a request every millisecond; against a cluster whose leaders
//! are spread over N brokers each connection carries about one request every
//! N ms, in parallel with the others. With one request in flight the probe
//! keeps its rate only while a round trip is shorter than the interval
//! between a connection's requests (an acks=all round trip on a replicated
//! cluster includes the followers' fetch and, on Weir, their fsync); more
//! in flight lift that bound as a Kafka producer's pipelining does. A
//! leader that moves during the run fails it (NOT_LEADER_OR_FOLLOWER past
//! `RETRY_FOR` with one in flight; any error with more, as a retry would
//! reorder the pipelined requests).
//!
//! Prints one line:
//! `send_to_ack_ms p50=.. p99=.. p999=.. max=.. end_to_end_ms p50=.. p99=.. p999=.. max=.. rate=..`
//! (records per second actually sent). The first second is left out as
//! warm-up. Works against any Kafka broker that serves Produce v9 and Fetch
//! v11 (Kafka 2.7+ and Weir).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::messages::{
    FetchRequest, FetchResponse, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
};
use kafka_protocol::protocol::StrBytes;
use weir_integration_tests::records::{decode_records, encode_batch, NewRecord};
use weir_integration_tests::requests::produce_request;
use weir_integration_tests::{Pending, RawClient};

/// Produce v9: the last version before topic ids, served by Kafka 2.4+.
const PRODUCE_VERSION: i16 = 9;
/// Fetch v11: rack-aware fetch, before topic ids (v13); served by Kafka 2.3+.
const FETCH_VERSION: i16 = 11;
/// Metadata v4: the first with `allow_auto_topic_creation`; served by Kafka 1.0+.
const METADATA_VERSION: i16 = 4;
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
    /// host:port of a broker, or a comma-separated list of a cluster's
    /// brokers (the first that answers gives the partitions' leaders).
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
    /// Produce requests awaiting their answers per leader connection, at
    /// most (as a Kafka producer's `max.in.flight.requests.per.connection`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    max_in_flight: u32,
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
    let leaders = leaders(args)?;
    let mut producer = Producer::connect(&leaders)?;
    ready(args, &mut producer)?;
    let origin = Instant::now();
    let warm_up_ns = Duration::from_secs(1).as_nanos() as u64;
    let done = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(AtomicU64::new(0));
    let total = args.rate * args.seconds;
    // One consumer per leader, fetching the partitions it leads.
    let mut by_leader: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (partition, leader) in leaders.iter().enumerate() {
        by_leader.entry(leader).or_default().push(partition as i32);
    }
    let consumers: Vec<_> = by_leader
        .into_iter()
        .map(|(leader, partitions)| {
            let (leader, topic) = (leader.to_owned(), args.topic.clone());
            let (done, seen) = (done.clone(), seen.clone());
            std::thread::spawn(move || {
                consume(
                    &leader,
                    &topic,
                    &partitions,
                    Progress {
                        total,
                        seen: &seen,
                        done: &done,
                    },
                    origin,
                    warm_up_ns,
                )
            })
        })
        .collect();
    let produced = produce(args, &mut producer, origin, warm_up_ns);
    // The consumers stop once they have seen every record, or 10 s after the
    // producer finished if records are missing.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !consumers.iter().all(|c| c.is_finished()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10)); // polling the consumer threads
    }
    done.store(true, Ordering::Release);
    let mut ends = Vec::with_capacity(total as usize);
    for consumer in consumers {
        ends.extend(
            consumer
                .join()
                .map_err(|_| "consumer thread panicked".to_string())??,
        );
    }
    let (mut acks, sent, elapsed) = produced?;
    let consumed = seen.load(Ordering::Acquire);
    if consumed < total {
        return Err(format!("consumed {consumed} of {total} records"));
    }
    println!(
        "send_to_ack_ms {} end_to_end_ms {} rate={:.0}",
        summary(&mut acks),
        summary(&mut ends),
        sent as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}

/// The leader (`host:port`) of each partition of the topic, indexed by
/// partition: Metadata v4 for the topic from the first bootstrap address
/// that answers, asked again until every partition has a leader among the
/// brokers listed (a broker's metadata learns a new topic's leaders a
/// moment after CreateTopics answers), for at most `RETRY_FOR`.
fn leaders(args: &Args) -> Result<Vec<String>, String> {
    let mut client = args
        .bootstrap
        .split(',')
        .find_map(|address| RawClient::connect(address.trim()).ok())
        .ok_or_else(|| format!("no broker of {} answers", args.bootstrap))?;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
            TopicName(StrBytes::from_string(args.topic.clone())),
        ))]))
        .with_allow_auto_topic_creation(false);
    let began = Instant::now();
    loop {
        let response = client
            .send(&request, METADATA_VERSION)
            .map_err(|e| e.to_string())?;
        match partition_leaders(&response, args.partitions) {
            Some(leaders) => return Ok(leaders),
            None if began.elapsed() < RETRY_FOR => {
                std::thread::sleep(Duration::from_millis(10)); // retry backoff
            }
            None => {
                return Err(format!(
                    "{}: not every one of {} partitions has a leader after {RETRY_FOR:?}",
                    args.topic, args.partitions
                ))
            }
        }
    }
}

/// `host:port` of the leader of partitions `0..partitions` of the one topic
/// in `response`, or `None` while one of them has none (or an unlisted one).
fn partition_leaders(response: &MetadataResponse, partitions: i32) -> Option<Vec<String>> {
    let topic = response.topics.first().filter(|t| t.error_code == 0)?;
    (0..partitions)
        .map(|index| {
            let partition = topic
                .partitions
                .iter()
                .find(|p| p.partition_index == index && p.error_code == 0)?;
            let broker = response
                .brokers
                .iter()
                .find(|b| b.node_id == partition.leader_id)?;
            Some(format!("{}:{}", broker.host, broker.port))
        })
        .collect()
}

/// One connection per distinct leader and, per partition, the index of its
/// leader's connection.
struct Producer {
    clients: Vec<RawClient>,
    route: Vec<usize>,
}

impl Producer {
    /// Connects to every distinct address in `leaders` (one per partition).
    fn connect(leaders: &[String]) -> Result<Self, String> {
        let mut addresses: Vec<&str> = Vec::new();
        let mut route = Vec::with_capacity(leaders.len());
        for leader in leaders {
            let index = match addresses.iter().position(|a| a == leader) {
                Some(index) => index,
                None => {
                    addresses.push(leader);
                    addresses.len() - 1
                }
            };
            route.push(index);
        }
        let clients = addresses
            .iter()
            .map(|a| RawClient::connect(a).map_err(|e| format!("{a}: {e}")))
            .collect::<Result<_, _>>()?;
        Ok(Self { clients, route })
    }

    /// The connection to `partition`'s leader.
    fn connection(&mut self, partition: i32) -> &mut RawClient {
        &mut self.clients[self.route[partition as usize]]
    }
}

/// Writes one record to every partition, retrying retriable errors, so
/// the measured run starts once the broker serves them all (Kafka answers
/// CreateTopics before its replica manager leads the new partitions). The
/// consumer starts after these records, at offset 1.
fn ready(args: &Args, producer: &mut Producer) -> Result<(), String> {
    let began = Instant::now();
    for partition in 0..args.partitions {
        let batch = encode_batch(
            &[NewRecord::value(vec![0u8; 8], 0)],
            kafka_protocol::records::Compression::None,
        )?;
        let request = produce_request(&args.topic, partition, args.acks, batch);
        send_until_acked(producer.connection(partition), &request, began + RETRY_FOR)?;
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

/// Sends on the schedule: request `i` (to partition `i % partitions`) at
/// `start + i` ms, from one thread per leader connection, each waiting for
/// the answer to its previous request before it sends the next (requests to
/// different leaders are in flight together, as a Kafka producer's are).
/// Returns (send-to-ack latencies in ns after warm-up, records sent, time
/// spent sending).
fn produce(
    args: &Args,
    producer: &mut Producer,
    origin: Instant,
    warm_up_ns: u64,
) -> Result<(Vec<u64>, u64, Duration), String> {
    let requests = args.seconds * REQUESTS_PER_SECOND;
    let start = Instant::now();
    let route = &producer.route;
    let per_leader: Vec<Result<Vec<u64>, String>> = std::thread::scope(|scope| {
        let senders: Vec<_> = producer
            .clients
            .iter_mut()
            .enumerate()
            .map(|(leader, client)| {
                scope.spawn(move || {
                    let mine = (0..requests)
                        .filter(|i| route[(i % args.partitions as u64) as usize] == leader);
                    send_on_schedule(args, client, mine, start, origin, warm_up_ns)
                })
            })
            .collect();
        senders
            .into_iter()
            .map(|s| {
                s.join()
                    .unwrap_or_else(|_| Err("a producer thread panicked".into()))
            })
            .collect()
    });
    let elapsed = start.elapsed();
    let mut latencies = Vec::with_capacity(requests as usize);
    for leader in per_leader {
        latencies.extend(leader?);
    }
    let per_request = args.rate / REQUESTS_PER_SECOND;
    Ok((latencies, requests * per_request, elapsed))
}

/// Sends requests `indices` (ascending) over `client`, each at its scheduled
/// time `start + i` ms or as soon as an answer frees a place among the
/// `--max-in-flight`; returns their send-to-ack latencies in ns after
/// warm-up, counted from the scheduled time.
fn send_on_schedule(
    args: &Args,
    client: &mut RawClient,
    indices: impl Iterator<Item = u64>,
    start: Instant,
    origin: Instant,
    warm_up_ns: u64,
) -> Result<Vec<u64>, String> {
    if args.max_in_flight > 1 {
        return send_pipelined(args, client, indices, start, origin, warm_up_ns);
    }
    let mut latencies = Vec::new();
    for i in indices {
        let (scheduled, stamp, request) = scheduled_request(args, i, start, origin)?;
        let acked = send_until_acked(client, &request, scheduled + RETRY_FOR)?;
        if stamp >= warm_up_ns {
            latencies.push(acked.duration_since(scheduled).as_nanos() as u64);
        }
    }
    Ok(latencies)
}

/// Waits for request `i`'s scheduled time `start + i` ms and builds it:
/// (scheduled time, its stamp in ns since `origin`, the Produce request of
/// `rate / 1000` records to partition `i % partitions`, each value starting
/// with the stamp).
fn scheduled_request(
    args: &Args,
    i: u64,
    start: Instant,
    origin: Instant,
) -> Result<(Instant, u64, ProduceRequest), String> {
    let per_request = (args.rate / REQUESTS_PER_SECOND) as usize;
    let interval = Duration::from_nanos(1_000_000_000 / REQUESTS_PER_SECOND);
    let scheduled = start + interval * i as u32;
    if let Some(wait) = scheduled.checked_duration_since(Instant::now()) {
        std::thread::sleep(wait); // the fixed send schedule
    }
    let stamp = scheduled.duration_since(origin).as_nanos() as u64;
    let mut value = Vec::with_capacity(args.record_size);
    value.extend_from_slice(&stamp.to_le_bytes());
    value.resize(args.record_size, b'x');
    let records = vec![NewRecord::value(value, 0); per_request];
    let batch = encode_batch(&records, kafka_protocol::records::Compression::None)?;
    let partition = (i % args.partitions as u64) as i32;
    Ok((
        scheduled,
        stamp,
        produce_request(&args.topic, partition, args.acks, batch),
    ))
}

/// [`send_on_schedule`] with up to `--max-in-flight` requests awaiting
/// answers: this thread writes each request at its scheduled time once a
/// place is free, a second thread reads the answers in order on a clone of
/// the connection and frees a place for each. Any error code fails the run;
/// a failed reader shuts the connection down so that a write blocked on a
/// broker that stopped reading fails too, and its error is the one reported.
fn send_pipelined(
    args: &Args,
    client: &mut RawClient,
    indices: impl Iterator<Item = u64>,
    start: Instant,
    origin: Instant,
    warm_up_ns: u64,
) -> Result<Vec<u64>, String> {
    let mut reader = client.try_clone().map_err(|e| e.to_string())?;
    // Places in flight: the writer takes one before each write, the reader
    // returns it after each answer (a counting semaphore of std channels).
    let (free_tx, free_rx) = std::sync::mpsc::sync_channel::<()>(args.max_in_flight as usize);
    for _ in 0..args.max_in_flight {
        free_tx.send(()).map_err(|e| e.to_string())?;
    }
    let (sent_tx, sent_rx) = std::sync::mpsc::channel::<(Pending, Instant, u64)>();
    std::thread::scope(|scope| {
        let answers = scope.spawn(move || -> Result<Vec<u64>, String> {
            let read = read_answers(&mut reader, sent_rx, &free_tx, warm_up_ns);
            if read.is_err() {
                reader.shutdown();
            }
            read
        });
        let written = (|| -> Result<(), String> {
            for i in indices {
                // A closed channel: the reader failed; its error is reported below.
                if free_rx.recv().is_err() {
                    return Ok(());
                }
                let (scheduled, stamp, request) = scheduled_request(args, i, start, origin)?;
                let header = client.header::<ProduceRequest>(PRODUCE_VERSION);
                let pending = client
                    .write_request(header, &request)
                    .map_err(|e| e.to_string())?;
                if sent_tx.send((pending, scheduled, stamp)).is_err() {
                    return Ok(());
                }
            }
            Ok(())
        })();
        drop(sent_tx);
        let latencies = answers
            .join()
            .unwrap_or_else(|_| Err("a reader thread panicked".into()))?;
        written.map(|()| latencies)
    })
}

/// The reader of [`send_pipelined`]: reads the answer to each request the
/// writer reports on `sent` (until the writer is done and every answer is
/// read), frees its place on `free`, and returns the send-to-ack latencies
/// in ns after warm-up.
fn read_answers(
    reader: &mut RawClient,
    sent: std::sync::mpsc::Receiver<(Pending, Instant, u64)>,
    free: &std::sync::mpsc::SyncSender<()>,
    warm_up_ns: u64,
) -> Result<Vec<u64>, String> {
    let mut latencies = Vec::new();
    for (pending, scheduled, stamp) in sent {
        let response = reader
            .read_response::<ProduceResponse>(pending)
            .map_err(|e| e.to_string())?;
        let acked = Instant::now();
        let partition = &response.body.responses[0].partition_responses[0];
        if partition.error_code != 0 {
            return Err(format!(
                "Produce to partition {}: error code {}",
                partition.index, partition.error_code
            ));
        }
        if stamp >= warm_up_ns {
            latencies.push(acked.duration_since(scheduled).as_nanos() as u64);
        }
        // The writer may have stopped after its last request.
        let _ = free.send(());
    }
    Ok(latencies)
}

/// What the consumers share: the records expected in all, the records
/// seen so far by any of them, and the main thread's signal to stop.
struct Progress<'a> {
    total: u64,
    seen: &'a AtomicU64,
    done: &'a AtomicBool,
}

/// Long-polls `partitions` (all led by `leader`) from offset 1 until every
/// consumer together has seen `total` records or `done` is set; returns
/// end-to-end latencies in ns after warm-up.
fn consume(
    leader: &str,
    topic: &str,
    partitions: &[i32],
    progress: Progress<'_>,
    origin: Instant,
    warm_up_ns: u64,
) -> Result<Vec<u64>, String> {
    let mut client = RawClient::connect(leader).map_err(|e| format!("{leader}: {e}"))?;
    // After the record `ready` wrote to each partition.
    let mut offsets: BTreeMap<i32, i64> = partitions.iter().map(|&p| (p, 1)).collect();
    let mut latencies = Vec::new();
    while progress.seen.load(Ordering::Acquire) < progress.total
        && !progress.done.load(Ordering::Acquire)
    {
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
                        .map(|(&p, &offset)| {
                            FetchPartition::default()
                                .with_partition(p)
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
                    let slot = offsets
                        .get_mut(&partition.partition_index)
                        .ok_or("a Fetch answer for a partition not asked for")?;
                    if record.offset < *slot {
                        continue; // a batch that starts before the fetch offset
                    }
                    *slot = record.offset + 1;
                    progress.seen.fetch_add(1, Ordering::AcqRel);
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
