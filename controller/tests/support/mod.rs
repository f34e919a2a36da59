//! Helpers shared by the controller's multi-voter integration tests.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;
use weir_controller::{ControllerConfig, MetadataController, QuorumController, QuorumOptions};

/// How long a test waits for a quorum to reach a state it polls for.
pub const DEADLINE: Duration = Duration::from_secs(15);

/// Polls `check` every 10 ms until it returns `Some`, failing the test
/// after [`DEADLINE`] with a message naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await; // polling interval
    }
}

/// Quorum options for tests: fast heartbeats and elections, DEADLINE to
/// start, and brokers fenced after `broker_session_timeout` without a
/// heartbeat.
pub fn quorum_options(broker_session_timeout: Duration) -> QuorumOptions {
    QuorumOptions {
        heartbeat_interval_ms: 50,
        election_timeout_min_ms: 200,
        election_timeout_max_ms: 400,
        startup_timeout: DEADLINE,
        leader_wait: Duration::from_secs(5),
        forward_timeout: Duration::from_secs(5),
        broker_session_timeout,
        ..QuorumOptions::default()
    }
}

/// Node `id`'s controller config with its metadata under `root`.
#[allow(dead_code)] // not every test file starts nodes by config
pub fn controller_config(root: &Path, id: i32, cluster_id: &str) -> ControllerConfig {
    ControllerConfig {
        node_id: id,
        metadata_dir: root.join(format!("node-{id}")).join("__cluster_metadata-0"),
        cluster_id: cluster_id.into(),
    }
}

/// Wall-clock milliseconds since the Unix epoch (DescribeQuorum's
/// timestamps use the same clock).
#[allow(dead_code)] // not every test file reads DescribeQuorum timestamps
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// `voter`'s typed controller API (the commands live on
/// [`MetadataController`], over the voter's `execute`).
pub fn api(voter: &QuorumController) -> MetadataController {
    voter.clone().into()
}
