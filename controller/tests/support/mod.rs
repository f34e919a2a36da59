//! Helpers shared by the controller's multi-voter integration tests.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

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
