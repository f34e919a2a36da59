//! The error type of the test harness: starting and stopping brokers, running
//! client subprocesses and talking to the broker over raw sockets.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

/// Everything that can go wrong in the harness. Tests usually `expect()` these;
/// the variants carry enough context (paths, exit statuses, log tails) for the
/// panic message alone to explain the failure.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// An I/O error while `action` was being done.
    #[error("{action}: {source}")]
    Io {
        /// What the harness was doing, e.g. "spawning /path/to/weir".
        action: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The broker process exited before printing its `weir started` line.
    #[error("weir exited with {status} before it was ready; last stderr lines:\n{stderr_tail}")]
    ExitedBeforeReady {
        /// The broker's exit status.
        status: ExitStatus,
        /// The last lines the broker wrote to stderr.
        stderr_tail: String,
    },
    /// The broker did not print its `weir started` line within `timeout`.
    #[error(
        "weir printed no `weir started` line within {timeout:?}; last stderr lines:\n{stderr_tail}"
    )]
    NotReady {
        /// How long the harness waited.
        timeout: Duration,
        /// The last lines the broker wrote to stderr.
        stderr_tail: String,
    },
    /// The `weir started` line did not have the documented shape
    /// `weir started node.id=<id> cluster.id=<id> listeners=PLAINTEXT://127.0.0.1:<port>[,<NAME>://<host>:<port>...]`.
    #[error("malformed ready line from weir: {line:?}")]
    MalformedReadyLine {
        /// The line as printed.
        line: String,
    },
    /// A process did not exit within `timeout` (it has been killed).
    #[error("{what} did not exit within {timeout:?}")]
    Timeout {
        /// The process, e.g. "weir after SIGTERM" or "kcat -C".
        what: String,
        /// How long the harness waited.
        timeout: Duration,
    },
    /// A signal could not be delivered to the broker process.
    #[error("sending {signal} to pid {pid}: {source}")]
    Signal {
        /// The signal's name, e.g. "SIGTERM".
        signal: &'static str,
        /// The target process id.
        pid: u32,
        /// The error from `kill(2)`.
        #[source]
        source: rustix::io::Errno,
    },
    /// The broker is not running (it was stopped or killed) but the
    /// operation needs it.
    #[error("the broker is not running")]
    NotRunning,
    /// A required external program or file is missing.
    #[error("{what} not found at {path}: {hint}")]
    Missing {
        /// What is missing, e.g. "kcat".
        what: &'static str,
        /// Where the harness looked.
        path: PathBuf,
        /// How to get it (usually: run scripts/test).
        hint: &'static str,
    },
    /// A request could not be encoded by the `kafka-protocol` crate (for
    /// example a version outside the range the crate implements).
    #[error("encoding {api} v{version}: {message}")]
    Encode {
        /// The API name, e.g. "Fetch".
        api: String,
        /// The requested API version.
        version: i16,
        /// The crate's message.
        message: String,
    },
    /// A response could not be decoded at the expected version, or it had
    /// bytes left over after the body.
    #[error("decoding {api} v{version} response: {message}")]
    Decode {
        /// The API name, e.g. "Fetch".
        api: String,
        /// The version the response was decoded at.
        version: i16,
        /// What went wrong.
        message: String,
    },
    /// The response's correlation id is not the one of the request it answers
    /// (responses must come back in request order on a connection).
    #[error("expected correlation id {expected}, got {actual}")]
    CorrelationMismatch {
        /// The correlation id of the oldest outstanding request.
        expected: i32,
        /// The correlation id in the response header.
        actual: i32,
    },
    /// The broker closed the connection instead of answering.
    #[error("the broker closed the connection")]
    ConnectionClosed,
    /// A response frame announced a size that cannot be right.
    #[error("response frame size {size} is invalid")]
    BadFrameSize {
        /// The size prefix as read, in bytes.
        size: i32,
    },
    /// An HTTP response could not be parsed.
    #[error("malformed HTTP response: {reason}")]
    Http {
        /// What was wrong.
        reason: String,
    },
}

impl HarnessError {
    /// Builds an [`HarnessError::Io`] for `action`.
    pub fn io(action: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            action: action.into(),
            source,
        }
    }
}
