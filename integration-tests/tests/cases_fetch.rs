//! Fetch cases: offsets inside batches (C02), compressed batches served as
//! produced (C03), batches larger than max_bytes (C04, KIP-74) and max_wait
//! (C08), and the parked Fetch (purgatory) metrics.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, ProduceRequest};
use kafka_protocol::records::Compression;
use weir_integration_tests::clients;
use weir_integration_tests::records::{self, NewRecord};

use crate::support::{self, error_code, FetchSpec, CLIENT_TIMEOUT};

fn values(records: &[kafka_protocol::records::Record]) -> Vec<String> {
    records.iter().map(records::value_text).collect()
}

/// The value of the first sample of metric `name` whose labels contain
/// `label` (e.g. `operation="fetch"`) on the broker's Prometheus endpoint
/// at `addr`; `None` while the metric has no such sample.
fn metric(addr: std::net::SocketAddr, name: &str, label: &str) -> Option<f64> {
    let body = weir_integration_tests::metrics::http_get(addr, "/metrics")
        .expect("GET /metrics")
        .body;
    String::from_utf8(body)
        .expect("UTF-8")
        .lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
}

/// C02: batch A holds offsets 0-1, batch B 2-3. Fetch at 1 returns A (base
/// offset 0) then B; fetch at 3 returns B; kcat from 1 and 3 sees exactly
/// 1,2,3 and 3.
#[test]
fn c02_fetch_offset_inside_batch() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let topic = support::ensure_topic(&mut client, &versions, "c02-inside-batch");

    assert_eq!(
        support::produce_ok(
            &mut client,
            produce_version,
            &topic,
            0,
            records::plain_batch(&["0", "1"], 1_000)
        ),
        0
    );
    assert_eq!(
        support::produce_ok(
            &mut client,
            produce_version,
            &topic,
            0,
            records::plain_batch(&["2", "3"], 2_000)
        ),
        2
    );

    let at_1 = support::fetch_records(&mut client, fetch_version, &topic, 0, 1);
    let (batches, _) = records::split_batches(&at_1).expect("batches");
    let bases: Vec<i64> = batches
        .iter()
        .map(|b| records::batch_header(b).expect("header").base_offset)
        .collect();
    assert_eq!(
        bases,
        vec![0, 2],
        "fetch at 1 returns batch A (base 0) then B (base 2)"
    );
    let decoded = records::decode_records(&at_1).expect("decode");
    assert_eq!(
        decoded.iter().map(|r| r.offset).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    assert_eq!(values(&decoded), vec!["0", "1", "2", "3"]);

    let at_3 = support::fetch_records(&mut client, fetch_version, &topic, 0, 3);
    let (batches, _) = records::split_batches(&at_3).expect("batches");
    assert_eq!(batches.len(), 1, "fetch at 3 returns only batch B");
    assert_eq!(
        records::batch_header(&batches[0])
            .expect("header")
            .base_offset,
        2
    );

    let bootstrap = broker.bootstrap();
    assert_eq!(
        support::kcat_consume(&bootstrap, &topic.name, 0, "1"),
        vec!["1", "2", "3"]
    );
    assert_eq!(
        support::kcat_consume(&bootstrap, &topic.name, 0, "3"),
        vec!["3"]
    );
}

/// C03: for every codec one batch of 10 records is stored and served byte
/// for byte as produced (only the base offset and leader epoch stamped),
/// fetch at base+5 returns the whole batch, kcat and the Java consumer
/// deliver exactly records 5-9; zstd on Produce v6 is refused with
/// UNSUPPORTED_COMPRESSION_TYPE.
#[test]
fn c03_compressed_batches_served_as_produced() {
    let broker = support::start_broker();
    let bootstrap = broker.bootstrap();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    assert!(
        produce_version >= 7,
        "zstd needs Produce v7+, broker offers v{produce_version}"
    );
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);

    for (name, compression) in [
        ("gzip", Compression::Gzip),
        ("snappy", Compression::Snappy),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ] {
        let topic = support::ensure_topic(&mut client, &versions, &format!("c03-{name}"));
        let records: Vec<NewRecord> = (0..10)
            .map(|i| NewRecord::value(format!("{name}-record-{i}"), 1_700_000_000_000 + i))
            .collect();
        let produced = records::encode_batch(&records, compression).expect("encode");
        let base = support::produce_ok(&mut client, produce_version, &topic, 0, produced.clone());
        assert_eq!(base, 0, "{name}: first batch of the topic");

        let stored = support::fetch_records(&mut client, fetch_version, &topic, 0, 0);
        let from_5 = support::fetch_records(&mut client, fetch_version, &topic, 0, base + 5);
        assert_eq!(
            from_5, stored,
            "{name}: fetch at base+5 returns the whole stored batch"
        );
        let (batches, partial) = records::split_batches(&from_5).expect("batches");
        assert!(partial.is_none(), "{name}: no partial batch");
        assert_eq!(batches.len(), 1, "{name}: one batch");
        let header = records::batch_header(&batches[0]).expect("header");
        assert_eq!(header.base_offset, 0, "{name}: original base offset");
        assert_eq!(
            header.codec(),
            records::codec_id(compression),
            "{name}: codec preserved"
        );
        assert!(records::crc_is_valid(&batches[0]), "{name}: CRC valid");
        assert_eq!(
            records::without_broker_stamps(&batches[0]),
            records::without_broker_stamps(&produced),
            "{name}: served bytes equal produced bytes except base offset and leader epoch"
        );
        let decoded = records::decode_records(&from_5).expect("decode");
        assert_eq!(
            decoded.iter().map(|r| r.offset).collect::<Vec<_>>(),
            (0..10).collect::<Vec<i64>>()
        );

        let expected: Vec<String> = (5..10).map(|i| format!("{name}-record-{i}")).collect();
        assert_eq!(
            support::kcat_consume(&bootstrap, &topic.name, 0, "5"),
            expected,
            "{name}: kcat -o 5"
        );
        let mut java = clients::java_client_tool().expect("Java client harness");
        java.args(["consume-from", &bootstrap, &topic.name, "0", "5"]);
        let output = clients::run(java, None, CLIENT_TIMEOUT).expect("java consume-from");
        output.assert_success();
        let java_lines: Vec<String> = output
            .stdout_text()
            .lines()
            .filter(|l| l.starts_with("record "))
            .map(str::to_owned)
            .collect();
        let java_expected: Vec<String> = (5..10)
            .map(|i| format!("record {i} {name}-record-{i}"))
            .collect();
        assert_eq!(java_lines, java_expected, "{name}: Java consumer seek(5)");
    }

    // zstd is only allowed from Produce v7 (KIP-110).
    let topic = support::ensure_topic(&mut client, &versions, "c03-zstd-v6");
    let batch = records::encode_batch(&[NewRecord::value("zstd-on-v6", 1)], Compression::Zstd)
        .expect("encode");
    let response = support::produce(&mut client, 6, &topic, 0, batch);
    assert_eq!(
        response.error_code,
        error_code::UNSUPPORTED_COMPRESSION_TYPE
    );
    let end = support::list_offset(&mut client, 7, &topic, 0, -1);
    assert_eq!(end.offset, 0, "the refused zstd batch was not appended");
}

/// C04 (KIP-74): a 200 KB record is returned whole by a Fetch with
/// max_bytes=1 and partition_max_bytes=1; with several partitions only the
/// first non-empty one may exceed the limits; librdkafka with tiny fetch
/// limits still makes progress.
#[test]
fn c04_batch_larger_than_max_bytes() {
    let broker = support::start_broker_with_partitions(3);
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let topic = support::ensure_topic(&mut client, &versions, "c04-large");
    assert_eq!(
        topic.partitions, 3,
        "num.partitions=3 applies to auto-created topics"
    );

    let big = |fill: u8| -> Bytes { Bytes::from(vec![fill; 200 * 1024]) };
    for (partition, fill) in [(1, b'a'), (2, b'b')] {
        let batch = records::encode_batch(&[NewRecord::value(big(fill), 5)], Compression::None)
            .expect("encode");
        support::produce_ok(&mut client, produce_version, &topic, partition, batch);
    }

    // One partition: the oversized batch still comes back whole.
    let mut spec = FetchSpec::one(fetch_version, 1, 0);
    spec.max_bytes = 1;
    spec.partitions = vec![(1, 0, 1)];
    let partitions = support::fetch(&mut client, &topic, &spec);
    let data = partitions[&1].records.clone().unwrap_or_default();
    let decoded = records::decode_records(&data).expect("whole batch");
    assert_eq!(decoded.len(), 1);
    assert_eq!(decoded[0].value.as_ref().map(Bytes::len), Some(200 * 1024));

    // Three partitions, 0 empty: only partition 1 (the first non-empty) is
    // returned; partition 2 must respect the exhausted max_bytes.
    spec.partitions = vec![(0, 0, 1), (1, 0, 1), (2, 0, 1)];
    let partitions = support::fetch(&mut client, &topic, &spec);
    let sizes: Vec<(i32, usize)> = partitions
        .iter()
        .map(|(p, d)| (*p, d.records.as_ref().map(Bytes::len).unwrap_or(0)))
        .collect();
    for (partition, data) in &partitions {
        assert_eq!(
            data.error_code,
            error_code::NONE,
            "partition {partition} error"
        );
    }
    let non_empty: Vec<i32> = sizes
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(p, _)| *p)
        .collect();
    assert_eq!(
        non_empty,
        vec![1],
        "only the first non-empty partition exceeds max_bytes: {sizes:?}"
    );
    let (batches, partial) =
        records::split_batches(&partitions[&1].records.clone().unwrap_or_default())
            .expect("batches");
    assert_eq!(
        (batches.len(), partial.is_none()),
        (1, true),
        "exactly one whole batch"
    );

    // librdkafka with the smallest fetch limits it accepts makes progress.
    let output = support::kcat(
        &broker.bootstrap(),
        &[
            "-C",
            "-t",
            &topic.name,
            "-p",
            "1",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-X",
            "fetch.max.bytes=1000",
            "-X",
            "message.max.bytes=1000",
            "-X",
            "max.partition.fetch.bytes=1",
            "-f",
            "%S\\n",
        ],
        None,
    );
    assert_eq!(
        output.stdout_text().lines().collect::<Vec<_>>(),
        vec!["204800"]
    );
}

/// C08: for every advertised Fetch version, a fetch of available data
/// returns it without waiting for max_wait_ms, a fetch at the log end
/// returns an empty success no later than max_wait_ms + 1 s, and pipelined
/// fetches are all answered in order.
#[test]
fn c08_fetch_answered_within_max_wait() {
    let broker = support::start_broker();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let fetch_versions = support::common_versions::<FetchRequest>(&versions, ApiKey::Fetch);
    let advertised = support::advertised(&versions, ApiKey::Fetch).expect("Fetch advertised");
    assert!(
        !fetch_versions.is_empty(),
        "no Fetch version in common: {advertised:?}"
    );
    assert_eq!(
        (
            fetch_versions[0],
            *fetch_versions.last().expect("non-empty")
        ),
        (advertised.min_version.max(4), advertised.max_version),
        "every advertised Fetch version from v4 is testable"
    );
    let topic = support::ensure_topic(&mut client, &versions, "c08-max-wait");
    support::produce_ok(
        &mut client,
        produce_version,
        &topic,
        0,
        records::plain_batch(&["a", "b", "c"], 10),
    );
    let log_end = 3;

    for &version in &fetch_versions {
        // Data available: answered at once, long before a 20 s max_wait.
        let mut spec = FetchSpec::one(version, 0, 0);
        spec.max_wait_ms = 20_000;
        let started = Instant::now();
        let partitions = support::fetch(&mut client, &topic, &spec);
        let elapsed = started.elapsed();
        let data = &partitions[&0];
        assert_eq!(data.error_code, error_code::NONE, "Fetch v{version}");
        assert_eq!(
            data.high_watermark, log_end,
            "Fetch v{version} high watermark"
        );
        let decoded =
            records::decode_records(&data.records.clone().unwrap_or_default()).expect("decode");
        assert_eq!(
            values(&decoded),
            vec!["a", "b", "c"],
            "Fetch v{version} data"
        );
        assert!(
            elapsed < Duration::from_secs(20),
            "Fetch v{version} with data waited {elapsed:?}"
        );

        // At the log end: empty success within max_wait_ms + 1 s.
        let mut spec = FetchSpec::one(version, 0, log_end);
        spec.max_wait_ms = 300;
        let started = Instant::now();
        let partitions = support::fetch(&mut client, &topic, &spec);
        let elapsed = started.elapsed();
        let data = &partitions[&0];
        assert_eq!(
            data.error_code,
            error_code::NONE,
            "Fetch v{version} at log end"
        );
        assert!(
            data.records.as_ref().is_none_or(Bytes::is_empty),
            "Fetch v{version} at log end returned records"
        );
        assert!(
            elapsed <= Duration::from_millis(300 + 1_000),
            "Fetch v{version} at log end answered after {elapsed:?} (max_wait_ms 300)"
        );
    }

    // Pipelined: five long-polls at the log end plus one with data, written
    // back to back, are all answered in request order.
    let version = *fetch_versions.last().expect("non-empty");
    let mut pending = Vec::new();
    for i in 0..6 {
        let offset = if i == 3 { 0 } else { log_end };
        let mut spec = FetchSpec::one(version, 0, offset);
        spec.max_wait_ms = 200;
        let header = client.header::<FetchRequest>(version);
        pending.push(
            client
                .write_request(header, &support::fetch_request(&topic, &spec))
                .expect("write pipelined Fetch"),
        );
    }
    for (i, request) in pending.into_iter().enumerate() {
        let response = client
            .read_response::<FetchResponse>(request)
            .unwrap_or_else(|e| panic!("pipelined Fetch {i}: {e}"));
        let partitions = support::fetched_partitions(&response.body, version);
        let records = partitions[&0].records.clone().unwrap_or_default();
        assert_eq!(records.is_empty(), i != 3, "pipelined Fetch {i} records");
    }
}

/// A long poll of four partitions whose `min_bytes` needs two batches on
/// two of them: it parks (counted in `weir_purgatory_size{operation="fetch"}`),
/// and once both batches are appended it is answered with both, well
/// before its `max_wait_ms`, and leaves the purgatory (Kafka's
/// `DelayedFetch`: bytes counted across partitions by their positions).
#[test]
fn a_long_poll_parks_until_min_bytes_arrive_across_partitions() {
    let broker = weir_integration_tests::TestBroker::builder()
        .metrics(true)
        .override_config("num.partitions", "4")
        .start()
        .expect("starting weir");
    let addr = broker.metrics_addr().expect("metrics enabled");
    let mut producer = support::connect(&broker);
    let versions = support::api_versions(&mut producer);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let topic = support::ensure_topic(&mut producer, &versions, "long-poll-min-bytes");
    let parked = || metric(addr, "weir_purgatory_size", "operation=\"fetch\"");
    let first = records::plain_batch(&["first"], 1_000);
    let second = records::plain_batch(&["second"], 2_000);

    let mut consumer = support::connect(&broker);
    let spec = FetchSpec {
        version: fetch_version,
        max_wait_ms: 120_000,
        min_bytes: (first.len() + second.len()) as i32,
        max_bytes: 1 << 20,
        partitions: (0..4).map(|p| (p, 0, 1 << 20)).collect(),
    };
    let header = consumer.header::<FetchRequest>(fetch_version);
    let pending = consumer
        .write_request(header, &support::fetch_request(&topic, &spec))
        .expect("write the long poll");
    support::poll_until(Duration::from_secs(30), "the fetch parked", || {
        (parked() == Some(1.0)).then_some(())
    });

    support::produce_ok(&mut producer, produce_version, &topic, 1, first);
    support::produce_ok(&mut producer, produce_version, &topic, 3, second);
    let response = consumer
        .read_response::<FetchResponse>(pending)
        .expect("the long poll answered");
    let partitions = support::fetched_partitions(&response.body, fetch_version);
    let fetched = |p: i32| {
        let data = &partitions[&p];
        assert_eq!(data.error_code, error_code::NONE, "partition {p}");
        values(&records::decode_records(&data.records.clone().unwrap_or_default()).expect("decode"))
    };
    assert_eq!(
        (0..4).map(fetched).collect::<Vec<_>>(),
        vec![vec![], vec!["first"], vec![], vec!["second"]]
    );
    support::poll_until(
        Duration::from_secs(30),
        "the fetch left the purgatory",
        || (parked() == Some(0.0)).then_some(()),
    );
}

/// A parked Fetch answered at its `max_wait_ms` counts in
/// `weir_delayed_fetch_expires_total{fetcher_type="consumer"}` (Kafka's
/// `DelayedFetchMetrics` `ExpiresPerSec`); one that a record completes
/// does not.
#[test]
fn a_long_poll_answered_at_max_wait_counts_as_an_expiry() {
    let broker = weir_integration_tests::TestBroker::builder()
        .metrics(true)
        .start()
        .expect("starting weir");
    let addr = broker.metrics_addr().expect("metrics enabled");
    let mut producer = support::connect(&broker);
    let versions = support::api_versions(&mut producer);
    let produce_version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let topic = support::ensure_topic(&mut producer, &versions, "long-poll-expiry");
    let expires = || {
        metric(
            addr,
            "weir_delayed_fetch_expires_total",
            "fetcher_type=\"consumer\"",
        )
        .unwrap_or(0.0)
    };
    assert_eq!(expires(), 0.0, "no Fetch has parked yet");

    // Nothing to read: it parks and is answered, empty, at max_wait_ms
    // (long enough that a slow first read still finds time left to park).
    let mut spec = FetchSpec::one(fetch_version, 0, 0);
    spec.max_wait_ms = 1_000;
    let mut consumer = support::connect(&broker);
    let partitions = support::fetch(&mut consumer, &topic, &spec);
    assert_eq!(partitions[&0].error_code, error_code::NONE);
    assert!(
        partitions[&0].records.as_ref().is_none_or(|r| r.is_empty()),
        "an empty log answered records"
    );
    assert_eq!(expires(), 1.0, "the empty long poll expired");

    // A record completes the next one before its max_wait_ms.
    spec.max_wait_ms = 120_000;
    let header = consumer.header::<FetchRequest>(fetch_version);
    let pending = consumer
        .write_request(header, &support::fetch_request(&topic, &spec))
        .expect("write the long poll");
    support::poll_until(Duration::from_secs(30), "the fetch parked", || {
        (metric(addr, "weir_purgatory_size", "operation=\"fetch\"") == Some(1.0)).then_some(())
    });
    support::produce_ok(
        &mut producer,
        produce_version,
        &topic,
        0,
        records::plain_batch(&["woken"], 1_000),
    );
    let response = consumer
        .read_response::<FetchResponse>(pending)
        .expect("the long poll answered");
    let partitions = support::fetched_partitions(&response.body, fetch_version);
    let records = partitions[&0].records.clone().unwrap_or_default();
    assert_eq!(
        values(&records::decode_records(&records).expect("decode")),
        vec!["woken"]
    );
    assert_eq!(expires(), 1.0, "a woken long poll is no expiry");
}
