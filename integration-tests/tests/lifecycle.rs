//! Process lifecycle: graceful restart keeps every record and log end
//! offset, kill -9 loses no acknowledged record, and configuration errors
//! stop the broker with a message.

use std::collections::BTreeMap;
use std::fs::File;
use std::process::{Command, Stdio};
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, FetchRequest, ListOffsetsRequest};
use weir_integration_tests::broker::weir_binary;
use weir_integration_tests::clients;
use weir_integration_tests::RawClient;

use crate::support::{self, error_code, TopicInfo, CLIENT_TIMEOUT};

fn log_end_offsets(client: &mut RawClient, topics: &[TopicInfo]) -> BTreeMap<(String, i32), i64> {
    let versions = support::api_versions(client);
    let version = support::newest::<ListOffsetsRequest>(&versions, ApiKey::ListOffsets);
    let mut out = BTreeMap::new();
    for topic in topics {
        for partition in 0..topic.partitions as i32 {
            let response = support::list_offset(client, version, topic, partition, -1);
            assert_eq!(response.error_code, error_code::NONE);
            out.insert((topic.name.clone(), partition), response.offset);
        }
    }
    out
}

/// Records produced with kcat survive SIGTERM (exit 0) and a restart on the
/// same log.dirs: log end offsets and contents are unchanged.
#[test]
fn restart_keeps_records_and_offsets() {
    let mut broker = support::start_broker();
    let bootstrap = broker.bootstrap();
    let a: Vec<String> = (0..500).map(|i| format!("restart-a-{i}")).collect();
    let b: Vec<String> = (0..300).map(|i| format!("restart-b-{i}")).collect();
    support::kcat_produce(&bootstrap, "restart-a", &a, &["-z", "gzip"]);
    support::kcat_produce(&bootstrap, "restart-b", &b, &[]);
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let topics = vec![
        support::ensure_topic(&mut client, &versions, "restart-a"),
        support::ensure_topic(&mut client, &versions, "restart-b"),
    ];
    let before = log_end_offsets(&mut client, &topics);
    assert_eq!(before[&("restart-a".to_owned(), 0)], 500);
    assert_eq!(before[&("restart-b".to_owned(), 0)], 300);
    let cluster_id = broker.cluster_id().to_owned();
    drop(client);

    broker.restart().expect("graceful restart with exit 0");
    assert_eq!(
        broker.cluster_id(),
        cluster_id,
        "cluster id survives the restart"
    );
    let bootstrap = broker.bootstrap();
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let after_topics = vec![
        support::ensure_topic(&mut client, &versions, "restart-a"),
        support::ensure_topic(&mut client, &versions, "restart-b"),
    ];
    for (old, new) in topics.iter().zip(&after_topics) {
        assert_eq!(old.id, new.id, "{} keeps its topic id", old.name);
    }
    assert_eq!(log_end_offsets(&mut client, &after_topics), before);
    assert_eq!(
        support::kcat_consume(&bootstrap, "restart-a", 0, "beginning"),
        a
    );
    assert_eq!(
        support::kcat_consume(&bootstrap, "restart-b", 0, "beginning"),
        b
    );
}

/// Complete "<partition> <offset> <value>" lines of the ack file; a last
/// line without newline was cut by the kill and is ignored.
fn read_acks(path: &std::path::Path) -> Vec<(i32, i64, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    complete
        .lines()
        .map(|line| {
            let mut parts = line.splitn(3, ' ');
            let partition = parts.next().and_then(|p| p.parse().ok());
            let offset = parts.next().and_then(|o| o.parse().ok());
            let value = parts.next().map(str::to_owned);
            match (partition, offset, value) {
                (Some(p), Some(o), Some(v)) => (p, o, v),
                _ => panic!("malformed ack line {line:?}"),
            }
        })
        .collect()
}

/// kill -9 while an acks=all producer runs: after restart every
/// acknowledged record is at its offset, and every partition decodes from
/// 0 to the high watermark with valid CRCs and contiguous offsets.
#[test]
fn crash_loses_no_acknowledged_record() {
    let mut broker = support::start_broker_with_partitions(3);
    let work = tempfile::tempdir().expect("temp dir");
    let ack_path = work.path().join("acks.txt");
    let producer_log = work.path().join("producer.stderr");
    let mut command = clients::python_script("acked_producer.py").expect("venv");
    command
        .arg(broker.bootstrap())
        .arg("crash-acks")
        .arg(&ack_path)
        .arg("1000000")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(&producer_log).expect("producer log"));
    let mut producer = command.spawn().expect("spawning acked_producer.py");
    let producer_stderr = || std::fs::read_to_string(&producer_log).unwrap_or_default();

    support::poll_until(
        Duration::from_secs(120),
        "5,000 acknowledged records",
        || {
            if let Ok(Some(status)) = producer.try_wait() {
                panic!(
                    "acked_producer.py exited early with {status}:\n{}",
                    producer_stderr()
                );
            }
            (read_acks(&ack_path).len() >= 5_000).then_some(())
        },
    );
    broker.kill9().expect("kill -9");
    let _ = producer.kill();
    let _ = producer.wait();
    let acks = read_acks(&ack_path);
    assert!(acks.len() >= 5_000);

    broker.start_again().expect("start after kill -9");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let fetch_version = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let topic = support::ensure_topic(&mut client, &versions, "crash-acks");
    assert_eq!(topic.partitions, 3);

    let mut stored: BTreeMap<(i32, i64), String> = BTreeMap::new();
    for partition in 0..3 {
        for (offset, value) in
            support::read_partition(&mut client, fetch_version, &topic, partition)
        {
            stored.insert((partition, offset), value);
        }
    }
    for (partition, offset, value) in &acks {
        assert_eq!(
            stored.get(&(*partition, *offset)),
            Some(value),
            "acknowledged record {value} at {partition}/{offset} after the crash ({} acks, {} stored)",
            acks.len(),
            stored.len()
        );
    }
}

/// An unknown configuration key, on the command line or in the config file,
/// stops the broker with a non-zero exit and a message naming the key.
#[test]
fn config_unknown_key_is_rejected() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("server.properties");
    std::fs::write(
        &config,
        format!(
            "listeners=PLAINTEXT://127.0.0.1:0\nmetrics.listener=\nlog.dirs={}\n",
            dir.path().join("data").display()
        ),
    )
    .expect("write config");

    let mut command = Command::new(weir_binary());
    command
        .arg("--config")
        .arg(&config)
        .arg("--override")
        .arg("weir.itest.no.such.key=1");
    let output =
        clients::run(command, None, CLIENT_TIMEOUT).expect("weir with an unknown override");
    assert!(
        !output.status.success(),
        "unknown --override key must fail; stderr:\n{}",
        output.stderr
    );
    assert!(
        output.stderr.contains("weir.itest.no.such.key"),
        "stderr names the key:\n{}",
        output.stderr
    );

    let mut text = std::fs::read_to_string(&config).expect("read config");
    text.push_str("weir.itest.unknown.file.key=5\n");
    std::fs::write(&config, text).expect("write config");
    let mut command = Command::new(weir_binary());
    command.arg("--config").arg(&config);
    let output =
        clients::run(command, None, CLIENT_TIMEOUT).expect("weir with an unknown file key");
    assert!(
        !output.status.success(),
        "unknown file key must fail; stderr:\n{}",
        output.stderr
    );
    assert!(
        output.stderr.contains("weir.itest.unknown.file.key"),
        "stderr names the key:\n{}",
        output.stderr
    );
}
