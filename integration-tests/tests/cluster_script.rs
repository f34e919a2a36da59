//! `scripts/cluster up|status|down`: a local 3-node cluster on 127.0.0.1-3
//! (state in a temp `WEIR_CLUSTER_DIR`, the debug binary via `WEIR_BIN`).
//! `up` prints the bootstrap addresses of three nodes that answer Metadata
//! with the same three brokers; `status` prints
//! `node <id> <host:port> pid <pid> <role>` with one active controller and two
//! voters; `down` stops every process and keeps the data, so a second `up`
//! restarts the same cluster (every voter restarting at once); `down --clean`
//! removes the directory.

use std::path::Path;
use std::process::Command;

use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};
use weir_integration_tests::{clients, weir_binary, RawClient};

use crate::support;

/// Runs `scripts/cluster <args>` and returns its stdout; panics with its
/// stderr when it fails.
fn cluster(dir: &Path, args: &[&str]) -> String {
    let output = Command::new(clients::repo_root().join("scripts/cluster"))
        .args(args)
        .env("WEIR_CLUSTER_DIR", dir)
        .env("WEIR_BIN", weir_binary())
        .output()
        .expect("running scripts/cluster");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "scripts/cluster {args:?} exited with {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    stdout
}

/// Stops the cluster when the test ends, also on failure (showing node logs).
struct Down<'a>(&'a Path);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for id in 1..=4 {
                let log = self.0.join(format!("node-{id}/weir.log"));
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                eprintln!("---- node {id} ({}) ----", log.display());
                for line in tail.iter().rev() {
                    eprintln!("{line}");
                }
            }
        }
        let _ = Command::new(clients::repo_root().join("scripts/cluster"))
            .arg("down")
            .env("WEIR_CLUSTER_DIR", self.0)
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Checks `status` lines against the bootstrap addresses; returns the pids.
fn check_status(status: &str, addresses: &[&str]) -> Vec<u32> {
    let lines: Vec<&str> = status.lines().collect();
    assert_eq!(lines.len(), 3, "{status}");
    let mut pids = Vec::new();
    let mut active = 0;
    for (i, line) in lines.iter().enumerate() {
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(fields.len(), 6, "{line}");
        assert_eq!(fields[0], "node", "{line}");
        assert_eq!(fields[1], (i + 1).to_string(), "{line}");
        assert_eq!(fields[2], addresses[i], "{line}");
        assert!(
            fields[2].starts_with(&format!("127.0.0.{}:", i + 1)),
            "{line}"
        );
        assert_eq!(fields[3], "pid", "{line}");
        let pid: u32 = fields[4]
            .parse()
            .unwrap_or_else(|_| panic!("pid in {line}"));
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "{line}: no such process"
        );
        match fields[5] {
            "active-controller" => active += 1,
            "voter" => {}
            other => panic!("role {other} in {line}"),
        }
        pids.push(pid);
    }
    assert_eq!(active, 1, "one active controller:\n{status}");
    pids
}

#[test]
fn cluster_script_starts_reports_restarts_and_stops_three_nodes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("cluster");
    let _down = Down(&state);

    let bootstrap = cluster(&state, &["up"]);
    let bootstrap = bootstrap.trim();
    let addresses: Vec<&str> = bootstrap.split(',').collect();
    assert_eq!(addresses.len(), 3, "bootstrap {bootstrap:?}");
    for address in &addresses {
        let mut client = RawClient::connect(address).expect("connecting to a node");
        let versions = support::api_versions(&mut client);
        let version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);
        let response: MetadataResponse = client
            .send(
                &MetadataRequest::default().with_topics(Some(vec![])),
                version,
            )
            .expect("Metadata");
        let mut listed: Vec<String> = response
            .brokers
            .iter()
            .map(|b| format!("{}:{}", b.host.as_str(), b.port))
            .collect();
        listed.sort();
        assert_eq!(listed, addresses, "{address}'s Metadata brokers");
    }
    let pids = check_status(&cluster(&state, &["status"]), &addresses);
    assert!(cluster(&state, &["up"]).contains(bootstrap), "up when up");

    cluster(&state, &["down"]);
    for pid in &pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "pid {pid} still runs after down"
        );
    }
    let status = cluster(&state, &["status"]);
    for (i, line) in status.lines().enumerate() {
        assert_eq!(line, format!("node {} {} pid - down", i + 1, addresses[i]));
    }
    assert!(
        state.join("node-1/data/meta.properties").exists(),
        "down keeps the data"
    );

    // All three voters restart on their data at once.
    assert_eq!(cluster(&state, &["up"]).trim(), bootstrap);
    check_status(&cluster(&state, &["status"]), &addresses);

    cluster(&state, &["down", "--clean"]);
    assert!(!state.exists(), "down --clean removes {}", state.display());
}

#[test]
fn cluster_script_up_with_broker_adds_a_broker_only_fourth_node() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("cluster");
    let _down = Down(&state);

    let bootstrap = cluster(&state, &["up", "--with-broker"]);
    let addresses: Vec<&str> = bootstrap.trim().split(',').collect();
    assert_eq!(addresses.len(), 4, "bootstrap {bootstrap:?}");
    assert!(addresses[3].starts_with("127.0.0.4:"), "{bootstrap}");
    let config = std::fs::read_to_string(state.join("node-4/server.properties")).unwrap();
    assert!(config.contains("process.roles=broker\n"), "{config}");
    assert!(!config.contains("CONTROLLER://"), "{config}");

    let status = cluster(&state, &["status"]);
    let lines: Vec<&str> = status.lines().collect();
    assert_eq!(lines.len(), 4, "{status}");
    assert!(
        lines[3].starts_with(&format!("node 4 {} pid ", addresses[3]))
            && lines[3].ends_with(" broker"),
        "{status}"
    );
    let roles: Vec<&str> = lines[..3]
        .iter()
        .map(|l| l.rsplit(' ').next().unwrap())
        .collect();
    assert_eq!(
        roles.iter().filter(|r| **r == "active-controller").count(),
        1,
        "{status}"
    );
    assert!(
        roles
            .iter()
            .all(|r| *r == "active-controller" || *r == "voter"),
        "{status}"
    );
    cluster(&state, &["down", "--clean"]);
}

/// `kafka-topics` with `args`, required to succeed; its stdout.
fn kafka_topics(bootstrap: &str, args: &[&str]) -> String {
    let output = support::kafka_topics(bootstrap, args);
    output.assert_success();
    output.stdout_text()
}

/// `(leader, isr)` of partition 0 in `kafka-topics --describe` output
/// (`... Leader: 2 Replicas: 2,3,1 Isr: 2,3,1 ...`).
fn described_leader_and_isr(describe: &str) -> (i32, Vec<i32>) {
    let line = describe
        .lines()
        .find(|l| l.contains("Partition: 0"))
        .unwrap_or_else(|| panic!("no partition line in:\n{describe}"));
    let field = |name: &str| -> String {
        let rest = &line[line
            .find(name)
            .unwrap_or_else(|| panic!("{name} in {line}"))
            + name.len()..];
        rest.split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let isr = field("Isr:")
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("ISR member"))
        .collect();
    (field("Leader:").parse().expect("leader"), isr)
}

/// Issue 16's acceptance on `scripts/cluster`: an RF=3 topic with
/// `min.insync.replicas=2` and an idempotent acks=all producer (kcat); the
/// partition's leader is killed (`kill N`) and restarted (`start N`),
/// twice. Every acknowledged record is read back exactly once,
/// `kafka-topics --describe` shows the ISR back at 3 each time
/// (`--under-replicated-partitions` lists the partition in between), and
/// the three replicas end byte-identical.
#[test]
fn killing_and_restarting_the_leader_loses_no_acknowledged_record() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("cluster");
    let _down = Down(&state);
    let bootstrap = cluster(&state, &["up"]).trim().to_owned();
    let addresses: Vec<String> = bootstrap.split(',').map(str::to_owned).collect();
    let topic = "acceptance";
    kafka_topics(
        &bootstrap,
        &[
            "--create",
            "--topic",
            topic,
            "--partitions",
            "1",
            "--replication-factor",
            "3",
            "--config",
            "min.insync.replicas=2",
        ],
    );
    let describe = |bootstrap: &str| kafka_topics(bootstrap, &["--describe", "--topic", topic]);
    let isr_of_three = |bootstrap: &str| {
        support::poll_until(std::time::Duration::from_secs(60), "an ISR of 3", || {
            let (leader, isr) = described_leader_and_isr(&describe(bootstrap));
            (leader >= 1 && isr.len() == 3).then_some(leader)
        })
    };
    let mut acknowledged: Vec<String> = Vec::new();
    for round in 0..3 {
        let lines: Vec<String> = (0..200).map(|i| format!("round-{round}-{i}")).collect();
        support::kcat_produce(
            &bootstrap,
            topic,
            &lines,
            &["-X", "enable.idempotence=true"],
        );
        acknowledged.extend(lines);
        if round == 2 {
            break;
        }
        let leader = isr_of_three(&bootstrap);
        cluster(&state, &["kill", &leader.to_string()]);
        let survivor = addresses
            .iter()
            .enumerate()
            .find(|(i, _)| *i as i32 + 1 != leader)
            .map(|(_, a)| a.clone())
            .unwrap();
        support::poll_until(std::time::Duration::from_secs(60), "a new leader", || {
            let (now, isr) = described_leader_and_isr(&describe(&survivor));
            (now >= 1 && now != leader && !isr.contains(&leader)).then_some(())
        });
        let under = |bootstrap: &str| {
            kafka_topics(
                bootstrap,
                &[
                    "--describe",
                    "--under-replicated-partitions",
                    "--topic",
                    topic,
                ],
            )
        };
        assert!(
            under(&survivor).contains("Partition: 0"),
            "--under-replicated-partitions lists the partition while its ISR is 2"
        );
        cluster(&state, &["start", &leader.to_string()]);
        isr_of_three(&bootstrap);
        assert!(
            !under(&bootstrap).contains("Partition: 0"),
            "--under-replicated-partitions is empty once the ISR is back to 3"
        );
    }
    let consumed = support::kcat_consume(&bootstrap, topic, 0, "beginning");
    assert_eq!(
        consumed, acknowledged,
        "every acknowledged record, once, in order"
    );
    let data_dirs: Vec<_> = (1..=3)
        .map(|id| state.join(format!("node-{id}/data")))
        .collect();
    support::assert_segments_identical(&data_dirs, topic, 0);
}
