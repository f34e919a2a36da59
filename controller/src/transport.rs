//! The transport between metadata quorum voters: raft RPCs (AppendEntries,
//! Vote, InstallSnapshot) and controller commands forwarded to the active
//! controller.
//!
//! Owns the frame format, the TCP transport the broker runs on its
//! `CONTROLLER` listener (`controller.listener.names`), and an in-memory
//! router for tests (partitions, healing, message loss). Must not depend on
//! Kafka request types; openraft types stay inside the crate (the public
//! items here name none).
//!
//! # Frame format
//!
//! Every message is one length-delimited frame (tokio-util's
//! `LengthDelimitedCodec`: a 4-byte big-endian length, then that many bytes;
//! at most [`MAX_FRAME_BYTES`]). The frame body is an 8-byte header followed
//! by a JSON body:
//!
//! ```text
//! magic          u16 BE  0x5751 ("WQ")
//! version        u8      2
//! kind           u8      1 AppendEntries, 2 Vote, 3 InstallSnapshot,
//!                        4 ControllerCommand, 5 FetchMetadata (a
//!                        broker-only node pulling the metadata, see
//!                        `crate::observer`); a response sets bit 0x80;
//!                        0x86 is the response of a refused request
//! correlation id u32 BE  echoed by the response
//! body           JSON    a request: {"route": Route, "request": ...};
//!                        a response: the `Result` the receiver returned,
//!                        or the reason it refused the request
//! ```
//!
//! A connection carries one request at a time. A frame that does not parse
//! closes the connection with a logged reason; nothing panics.
//!
//! # Routes
//!
//! Every request names its sender's cluster id, the sender's node id and
//! the node it is for ([`Route`]). A node refuses, without handling it, a
//! request of another cluster (Kafka's `INCONSISTENT_CLUSTER_ID`,
//! `KafkaRaftClient.hasValidClusterId`) or one for another node id
//! (`INVALID_VOTER_KEY`, KIP-853 `KafkaRaftClient.isValidVoterKey`). Raft
//! messages carry no cluster of their own: a voter whose
//! `controller.quorum.voters` named a node of another cluster (or a test
//! whose released port another test's node took) had its votes granted and
//! its AppendEntries taken there as its own leader's: that node could
//! append the other cluster's log, and openraft's engine panicked
//! (`assertion failed: self.leader.is_none()`; found by CI, two
//! integration tests' clusters talking to each other). A route guards
//! against misconfiguration, not an attacker: it is what the sender
//! declares (a CONTROLLER listener is secured with TLS and SASL, see
//! below). A version 1 frame (no route) closes its connection as an
//! unsupported version: every voter and broker-only node of a cluster runs
//! the same frame version.
//!
//! # Security
//!
//! The frames run over whatever [`ChannelSecurity`] makes of each TCP
//! connection: the connection itself by default (PLAINTEXT), or TLS and a
//! SASL exchange set up by the broker, which owns both (the CONTROLLER
//! listener's `listener.security.protocol.map` entry, as Kafka secures its
//! controller listener). This crate knows neither TLS nor SASL.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::FutureExt;
use futures::{SinkExt, StreamExt};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use tokio_util::sync::CancellationToken;

use crate::error::ControllerError;
use crate::observer::{FetchMetadataRequest, FetchMetadataResponse};
use crate::quorum::{CommandOutcome, ControllerCommand};
use crate::raft::pre_vote::{PreVoteRequest, PreVoteResponse};
use crate::raft::MetadataTypeConfig;

mod reachability;
use reachability::{Change, Reachability};

/// Largest frame accepted or sent, in bytes (16 MiB). openraft sends
/// snapshots in chunks well below this.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

const MAGIC: u16 = 0x5751;
const VERSION: u8 = 2;
const HEADER_BYTES: usize = 8;
const RESPONSE_BIT: u8 = 0x80;
/// Longest reason logged for a closed connection, in bytes.
const MAX_LOGGED_REASON: usize = 256;

/// A byte stream the transport's frames run over: a TCP connection, or
/// what a [`ChannelSecurity`] made of one (TLS, after SASL).
pub trait SecuredStream: AsyncRead + AsyncWrite + Unpin + Send + Sync {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> SecuredStream for T {}

/// How the TCP transport secures its connections, both those this node
/// dials and those its CONTROLLER listener accepts: Kafka's security
/// protocols (SSL, SASL_PLAINTEXT, SASL_SSL) as the broker implements them.
/// Without one the transport speaks on the bare TCP connection
/// (PLAINTEXT).
pub trait ChannelSecurity: Send + Sync + 'static {
    /// Secures a connection this node dialed to `addr` (`host:port`): the
    /// TLS handshake and the SASL exchange of the client side.
    ///
    /// # Errors
    /// Why the connection cannot be used (it is dropped, the request
    /// reports the voter unreachable); never a secret.
    fn connect(
        &self,
        stream: TcpStream,
        addr: String,
    ) -> BoxFuture<'static, Result<Box<dyn SecuredStream>, String>>;

    /// Secures a connection accepted from `peer`: handshake,
    /// authentication and the authorization of its principal.
    ///
    /// # Errors
    /// Why the connection closes (logged by the transport).
    fn accept(
        &self,
        stream: TcpStream,
        peer: std::net::SocketAddr,
    ) -> BoxFuture<'static, Result<Box<dyn SecuredStream>, String>>;
}

/// Who sent a quorum request and which node it is for; every request frame
/// carries one (see "Routes" above).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Route {
    /// The sender's cluster id (`cluster.id` of its `meta.properties`).
    pub(crate) cluster_id: String,
    /// The sender's node id (`node.id`).
    pub(crate) source: u64,
    /// The node id the request is for; `None` when the sender does not know
    /// it (a `controller.quorum.bootstrap.servers` address): any node of
    /// the cluster serves it.
    pub(crate) destination: Option<u64>,
}

impl Route {
    /// A route from node `source` of cluster `cluster_id` to node
    /// `destination` ([`UNKNOWN_NODE`]: any node of the cluster).
    pub(crate) fn new(cluster_id: &str, source: u64, destination: u64) -> Route {
        Route {
            cluster_id: cluster_id.to_owned(),
            source,
            destination: (destination != UNKNOWN_NODE).then_some(destination),
        }
    }

    /// Why node `node_id` of cluster `cluster_id` refuses a request on this
    /// route, or `None` when the request is for it: another cluster's
    /// (Kafka's `INCONSISTENT_CLUSTER_ID`) or another node's
    /// (`INVALID_VOTER_KEY`, KIP-853).
    pub(crate) fn refusal(&self, cluster_id: &str, node_id: u64) -> Option<String> {
        if self.cluster_id != cluster_id {
            return Some(format!(
                "inconsistent cluster id: a request from node {} of cluster {} reached node \
                 {node_id} of cluster {cluster_id} (check controller.quorum.voters on node {})",
                self.source, self.cluster_id, self.source
            ));
        }
        match self.destination {
            Some(destination) if destination != node_id => Some(format!(
                "invalid voter: a request from node {} for node {destination} reached node \
                 {node_id} (node {}'s controller.quorum.voters gives node {destination} this \
                 node's address)",
                self.source, self.source
            )),
            _ => None,
        }
    }
}

/// The node id of a target whose id is not known (a
/// `controller.quorum.bootstrap.servers` address); used in error messages,
/// and its requests name no destination ([`Route::destination`]).
pub(crate) const UNKNOWN_NODE: u64 = u64::MAX;

/// A request from one voter to another.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum QuorumRequest {
    AppendEntries(AppendEntriesRequest<MetadataTypeConfig>),
    Vote(VoteRequest<u64>),
    InstallSnapshot(InstallSnapshotRequest<MetadataTypeConfig>),
    /// A controller command forwarded to the active controller.
    Command(ControllerCommand),
    /// A broker-only node (observer) asking a voter for metadata newer than
    /// what it has; a long poll.
    FetchMetadata(FetchMetadataRequest),
    /// Would the voter vote for the asking one (Pre-Vote, see
    /// [`crate::raft::pre_vote`])? Changes nothing on the voter.
    PreVote(PreVoteRequest),
}

/// The answer to a [`QuorumRequest`] of the same kind.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum QuorumResponse {
    AppendEntries(Result<AppendEntriesResponse<u64>, RaftError<u64>>),
    Vote(Result<VoteResponse<u64>, RaftError<u64>>),
    InstallSnapshot(Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>>),
    Command(Result<CommandOutcome, ControllerError>),
    FetchMetadata(Result<FetchMetadataResponse, ControllerError>),
    /// The request was not for the node that received it (see
    /// [`Route::refusal`]); it was not handled. The reason.
    Refused(String),
    /// The voter's answer to [`QuorumRequest::PreVote`].
    PreVote(PreVoteResponse),
}

impl QuorumRequest {
    fn kind(&self) -> u8 {
        match self {
            QuorumRequest::AppendEntries(_) => 1,
            QuorumRequest::Vote(_) => 2,
            QuorumRequest::InstallSnapshot(_) => 3,
            QuorumRequest::Command(_) => 4,
            QuorumRequest::FetchMetadata(_) => 5,
            // 6 is taken: its response kind would be `Refused`'s.
            QuorumRequest::PreVote(_) => 7,
        }
    }
}

impl QuorumResponse {
    fn kind(&self) -> u8 {
        RESPONSE_BIT
            | match self {
                QuorumResponse::AppendEntries(_) => 1,
                QuorumResponse::Vote(_) => 2,
                QuorumResponse::InstallSnapshot(_) => 3,
                QuorumResponse::Command(_) => 4,
                QuorumResponse::FetchMetadata(_) => 5,
                QuorumResponse::Refused(_) => 6,
                QuorumResponse::PreVote(_) => 7,
            }
    }
}

/// Why a frame could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum FrameError {
    #[error("frame of {len} bytes is shorter than the {HEADER_BYTES}-byte header")]
    TooShort { len: usize },
    #[error("bad magic {found:#06x}, expected {MAGIC:#06x}")]
    BadMagic { found: u16 },
    #[error("unsupported frame version {found}, this node speaks {VERSION}")]
    UnsupportedVersion { found: u8 },
    #[error("unknown {direction} kind {kind}")]
    UnknownKind { direction: &'static str, kind: u8 },
    #[error("kind {kind} body does not decode: {reason}")]
    Body { kind: u8, reason: String },
    #[error("body does not encode: {reason}")]
    Encode { reason: String },
}

fn put_header(buf: &mut BytesMut, kind: u8, correlation_id: u32) {
    buf.put_u16(MAGIC);
    buf.put_u8(VERSION);
    buf.put_u8(kind);
    buf.put_u32(correlation_id);
}

fn encode_body<T: Serialize>(kind: u8, correlation_id: u32, body: &T) -> Result<Bytes, FrameError> {
    let mut buf = BytesMut::with_capacity(256);
    put_header(&mut buf, kind, correlation_id);
    let mut writer = buf.writer();
    serde_json::to_writer(&mut writer, body).map_err(|e| FrameError::Encode {
        reason: e.to_string(),
    })?;
    Ok(writer.into_inner().freeze())
}

/// Splits a frame into `(kind, correlation id, body)`.
fn split_header(frame: &[u8]) -> Result<(u8, u32, &[u8]), FrameError> {
    if frame.len() < HEADER_BYTES {
        return Err(FrameError::TooShort { len: frame.len() });
    }
    let magic = u16::from_be_bytes([frame[0], frame[1]]);
    if magic != MAGIC {
        return Err(FrameError::BadMagic { found: magic });
    }
    if frame[2] != VERSION {
        return Err(FrameError::UnsupportedVersion { found: frame[2] });
    }
    let correlation_id = u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    Ok((frame[3], correlation_id, &frame[HEADER_BYTES..]))
}

fn decode_json<T: for<'de> Deserialize<'de>>(kind: u8, body: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(body).map_err(|e| FrameError::Body {
        kind,
        reason: e.to_string(),
    })
}

/// A request frame's body as sent.
#[derive(Serialize)]
struct RoutedRef<'a, T> {
    route: &'a Route,
    request: &'a T,
}

/// A request frame's body as received.
#[derive(Deserialize)]
struct Routed<T> {
    route: Route,
    request: T,
}

pub(crate) fn encode_request(
    correlation_id: u32,
    route: &Route,
    request: &QuorumRequest,
) -> Result<Bytes, FrameError> {
    let kind = request.kind();
    match request {
        QuorumRequest::AppendEntries(r) => {
            encode_body(kind, correlation_id, &RoutedRef { route, request: r })
        }
        QuorumRequest::Vote(r) => {
            encode_body(kind, correlation_id, &RoutedRef { route, request: r })
        }
        QuorumRequest::InstallSnapshot(r) => {
            encode_body(kind, correlation_id, &RoutedRef { route, request: r })
        }
        QuorumRequest::Command(r) => {
            encode_body(kind, correlation_id, &RoutedRef { route, request: r })
        }
        QuorumRequest::FetchMetadata(r) => {
            encode_body(kind, correlation_id, &RoutedRef { route, request: r })
        }
        QuorumRequest::PreVote(r) => {
            encode_body(kind, correlation_id, &RoutedRef { route, request: r })
        }
    }
}

/// Splits a request frame into `(correlation id, route, request)`.
pub(crate) fn decode_request(frame: &[u8]) -> Result<(u32, Route, QuorumRequest), FrameError> {
    fn routed<T: for<'de> Deserialize<'de>>(
        kind: u8,
        body: &[u8],
        wrap: fn(T) -> QuorumRequest,
    ) -> Result<(Route, QuorumRequest), FrameError> {
        let Routed { route, request } = decode_json(kind, body)?;
        Ok((route, wrap(request)))
    }
    let (kind, correlation_id, body) = split_header(frame)?;
    let (route, request) = match kind {
        1 => routed(kind, body, QuorumRequest::AppendEntries)?,
        2 => routed(kind, body, QuorumRequest::Vote)?,
        3 => routed(kind, body, QuorumRequest::InstallSnapshot)?,
        4 => routed(kind, body, QuorumRequest::Command)?,
        5 => routed(kind, body, QuorumRequest::FetchMetadata)?,
        7 => routed(kind, body, QuorumRequest::PreVote)?,
        _ => {
            return Err(FrameError::UnknownKind {
                direction: "request",
                kind,
            })
        }
    };
    Ok((correlation_id, route, request))
}

pub(crate) fn encode_response(
    correlation_id: u32,
    response: &QuorumResponse,
) -> Result<Bytes, FrameError> {
    let kind = response.kind();
    match response {
        QuorumResponse::AppendEntries(r) => encode_body(kind, correlation_id, r),
        QuorumResponse::Vote(r) => encode_body(kind, correlation_id, r),
        QuorumResponse::InstallSnapshot(r) => encode_body(kind, correlation_id, r),
        QuorumResponse::Command(r) => encode_body(kind, correlation_id, r),
        QuorumResponse::FetchMetadata(r) => encode_body(kind, correlation_id, r),
        QuorumResponse::Refused(r) => encode_body(kind, correlation_id, r),
        QuorumResponse::PreVote(r) => encode_body(kind, correlation_id, r),
    }
}

pub(crate) fn decode_response(frame: &[u8]) -> Result<(u32, QuorumResponse), FrameError> {
    let (kind, correlation_id, body) = split_header(frame)?;
    let response = match kind {
        0x81 => QuorumResponse::AppendEntries(decode_json(kind, body)?),
        0x82 => QuorumResponse::Vote(decode_json(kind, body)?),
        0x83 => QuorumResponse::InstallSnapshot(decode_json(kind, body)?),
        0x84 => QuorumResponse::Command(decode_json(kind, body)?),
        0x85 => QuorumResponse::FetchMetadata(decode_json(kind, body)?),
        0x86 => QuorumResponse::Refused(decode_json(kind, body)?),
        0x87 => QuorumResponse::PreVote(decode_json(kind, body)?),
        _ => {
            return Err(FrameError::UnknownKind {
                direction: "response",
                kind,
            })
        }
    };
    Ok((correlation_id, response))
}

pub(crate) fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .max_frame_length(MAX_FRAME_BYTES)
        .new_codec()
}

/// Why a request got no response.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub(crate) enum TransportError {
    /// The request was not sent (no connection, partitioned away); it had
    /// no effect on the target.
    #[error("voter {target} is unreachable: {reason}")]
    Unreachable { target: u64, reason: String },
    /// The request may have been delivered but no valid response came back.
    #[error("request to voter {target} failed: {reason}")]
    Network { target: u64, reason: String },
    /// The node at the target's address refused the request unhandled: it
    /// is of another cluster or another node ([`Route::refusal`]; a
    /// misconfigured voter list). No effect on it, as `Unreachable`.
    #[error("the node at voter {target}'s address refused the request: {reason}")]
    Refused { target: u64, reason: String },
    /// The request was not sent: its frame of `bytes` bytes is over
    /// [`MAX_FRAME_BYTES`]. No effect on the target, which is not booked as
    /// not answering (the frame is at fault, not the peer).
    #[error("request to voter {target} not sent: its frame of {bytes} bytes is over the {MAX_FRAME_BYTES}-byte limit")]
    TooLarge { target: u64, bytes: usize },
}

/// [`TransportError::Network`]'s reason when the target closed the
/// connection without answering.
const CLOSED_UNANSWERED: &str = "connection closed";

impl TransportError {
    /// True when the target read the request and closed the connection
    /// without answering: what a node does with a frame it cannot decode,
    /// such as a request of a kind it does not know (an older Weir; see
    /// `serve_connection`), and what a node that crashed mid-request looks
    /// like.
    pub(crate) fn closed_unanswered(&self) -> bool {
        matches!(self, TransportError::Network { reason, .. } if reason == CLOSED_UNANSWERED)
    }
}

/// [`TransportError::TooLarge`] when `frame` (its body, without the 4-byte
/// length) is over [`MAX_FRAME_BYTES`]: the codec would refuse to send it,
/// and the receiver to read it.
fn check_frame_size(target: u64, frame: &[u8]) -> Result<(), TransportError> {
    if frame.len() > MAX_FRAME_BYTES {
        return Err(TransportError::TooLarge {
            target,
            bytes: frame.len(),
        });
    }
    Ok(())
}

/// What serves requests that arrive for this node (the local quorum).
pub(crate) trait QuorumRequestHandler: Send + Sync + 'static {
    /// Answers one request; never panics on bad input.
    fn handle(
        self: Arc<Self>,
        request: QuorumRequest,
    ) -> Pin<Box<dyn Future<Output = QuorumResponse> + Send + 'static>>;
}

/// How this node reaches the other metadata quorum voters, and how they
/// reach it.
///
/// - [`QuorumTransport::single_voter`]: no transport (a one-voter quorum
///   never sends anything); the default.
/// - [`QuorumTransport::tcp`]: the frame format of this module over TCP;
///   this node serves on the given listener (the broker's `CONTROLLER`
///   listener) and dials the other voters at their
///   `controller.quorum.voters` addresses.
/// - [`QuorumTransport::memory`]: an in-process [`MemoryRouter`] (tests,
///   simulation).
#[derive(Clone, Default)]
pub struct QuorumTransport {
    kind: TransportKind,
    /// Which voters do not answer, shared by every client of this
    /// transport (and its clones) so that an outage is logged once.
    reachability: Arc<Reachability>,
}

impl std::fmt::Debug for QuorumTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            TransportKind::None => "single-voter",
            TransportKind::Tcp { .. } => "tcp",
            TransportKind::Memory(_) => "memory",
        };
        f.debug_struct("QuorumTransport")
            .field("kind", &kind)
            .finish()
    }
}

#[derive(Clone, Default)]
enum TransportKind {
    #[default]
    None,
    Tcp {
        /// Taken by the first `serve`.
        listener: Arc<Mutex<Option<TcpListener>>>,
        /// `None`: PLAINTEXT.
        security: Option<Arc<dyn ChannelSecurity>>,
    },
    Memory(MemoryRouter),
}

/// Stops serving this node when dropped (or on [`ServeGuard::stop`]).
pub(crate) struct ServeGuard {
    stop: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl ServeGuard {
    pub(crate) fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop();
        }
    }
}

impl Drop for ServeGuard {
    fn drop(&mut self) {
        self.stop();
    }
}

impl QuorumTransport {
    /// No transport: for a one-voter quorum.
    pub fn single_voter() -> QuorumTransport {
        QuorumTransport::default()
    }

    /// TCP: serve other voters on `listener` (the `CONTROLLER` listener,
    /// already bound) and dial them at their voter addresses.
    pub fn tcp(listener: TcpListener) -> QuorumTransport {
        QuorumTransport {
            kind: TransportKind::Tcp {
                listener: Arc::new(Mutex::new(Some(listener))),
                security: None,
            },
            reachability: Arc::default(),
        }
    }

    /// TCP for a broker-only node (an observer of the quorum): it dials the
    /// voters at their `controller.quorum.voters` or
    /// `controller.quorum.bootstrap.servers` addresses and serves nothing
    /// (a Kafka broker-only node has no controller listener).
    pub fn tcp_dial_only() -> QuorumTransport {
        QuorumTransport {
            kind: TransportKind::Tcp {
                listener: Arc::new(Mutex::new(None)),
                security: None,
            },
            reachability: Arc::default(),
        }
    }

    /// This TCP transport with its connections, dialed and accepted,
    /// secured by `security`; other kinds are returned unchanged.
    pub fn secured(self, security: Arc<dyn ChannelSecurity>) -> QuorumTransport {
        match self.kind {
            TransportKind::Tcp { listener, .. } => QuorumTransport {
                kind: TransportKind::Tcp {
                    listener,
                    security: Some(security),
                },
                reachability: self.reachability,
            },
            kind => QuorumTransport {
                kind,
                reachability: self.reachability,
            },
        }
    }

    /// In-process: messages go through `router`.
    pub fn memory(router: &MemoryRouter) -> QuorumTransport {
        QuorumTransport {
            kind: TransportKind::Memory(router.clone()),
            reachability: Arc::default(),
        }
    }

    /// True when there is no transport at all.
    pub(crate) fn is_single_voter(&self) -> bool {
        matches!(self.kind, TransportKind::None)
    }

    /// Starts delivering requests for node `node_id` of cluster
    /// `cluster_id` to `handler`; any other request is refused
    /// ([`Route::refusal`]).
    pub(crate) fn serve(
        &self,
        cluster_id: &str,
        node_id: u64,
        handler: Weak<dyn QuorumRequestHandler>,
    ) -> ServeGuard {
        let served = Served {
            cluster_id: cluster_id.to_owned(),
            node_id,
            refusal_warnings: WarningGate::default(),
            bad_frame_warnings: WarningGate::default(),
        };
        match &self.kind {
            TransportKind::None => ServeGuard { stop: None },
            TransportKind::Tcp { listener, security } => {
                let listener = listener.lock().unwrap_or_else(|p| p.into_inner()).take();
                let Some(listener) = listener else {
                    tracing::error!(node_id, "controller listener already served");
                    return ServeGuard { stop: None };
                };
                let token = CancellationToken::new();
                tokio::spawn(accept_loop(
                    listener,
                    security.clone(),
                    Arc::new(served),
                    handler,
                    token.clone(),
                ));
                ServeGuard {
                    stop: Some(Box::new(move || token.cancel())),
                }
            }
            TransportKind::Memory(router) => {
                router.register(served, handler);
                let router = router.clone();
                ServeGuard {
                    stop: Some(Box::new(move || router.unregister(node_id))),
                }
            }
        }
    }

    /// A client on `route` to the node at `addr` (`host:port`).
    pub(crate) fn client(&self, route: Route, addr: &str) -> PeerClient {
        let kind = match &self.kind {
            TransportKind::None => ClientKind::None,
            TransportKind::Tcp { security, .. } => ClientKind::Tcp {
                addr: addr.to_string(),
                security: security.clone(),
                connection: None,
                next_correlation_id: 0,
            },
            TransportKind::Memory(router) => ClientKind::Memory(router.clone()),
        };
        PeerClient {
            route,
            refusals: 0,
            kind,
            reachability: self.reachability.clone(),
        }
    }
}

/// The node a transport serves.
#[derive(Debug)]
struct Served {
    cluster_id: String,
    node_id: u64,
    /// Refused requests (a misconfigured voter or broker keeps retrying,
    /// on new connections too).
    refusal_warnings: WarningGate,
    /// Connections closed for a frame that does not decode (a Kafka client
    /// pointed at the CONTROLLER listener reconnects every 50 ms: thousands
    /// of warnings a minute before). Other closes (a failed write) warn
    /// each time.
    bad_frame_warnings: WarningGate,
}

/// Requests not sent for their size ([`TransportError::TooLarge`]), for
/// every transport of the process.
static TOO_LARGE_WARNINGS: WarningGate = WarningGate {
    state: Mutex::new(None),
};

/// Shortest time between two warnings of one [`WarningGate`].
const WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// Lets one warning of a kind through every [`WARNING_INTERVAL`]; the
/// others are logged at debug level and counted in the next warning.
#[derive(Debug, Default)]
struct WarningGate {
    /// When the last warning was logged, and the events since.
    state: Mutex<Option<(std::time::Instant, u64)>>,
}

impl WarningGate {
    /// `Some(events left at debug level since the last warning)` when this
    /// event is to be logged as a warning, else `None` (and counted).
    fn due(&self, now: std::time::Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &mut *state {
            Some((last, quiet)) if now.duration_since(*last) < WARNING_INTERVAL => {
                *quiet += 1;
                None
            }
            _ => {
                let quiet = state.map_or(0, |(_, quiet)| quiet);
                *state = Some((now, 0));
                Some(quiet)
            }
        }
    }
}

impl Served {
    /// The refusal this node answers a request on `route` from `peer` with
    /// (logged), or `None` when the request is for it.
    fn refusal(&self, route: &Route, peer: &dyn std::fmt::Display) -> Option<QuorumResponse> {
        let reason = route.refusal(&self.cluster_id, self.node_id)?;
        match self.refusal_warnings.due(std::time::Instant::now()) {
            Some(quiet) => tracing::warn!(
                %peer,
                %reason,
                refusals_since_last_warning = quiet,
                "refusing a metadata quorum request"
            ),
            None => tracing::debug!(%peer, %reason, "refusing a metadata quorum request"),
        }
        Some(QuorumResponse::Refused(reason))
    }
}

/// A client to one other voter. Requests on one client go one at a time.
pub(crate) struct PeerClient {
    route: Route,
    /// Requests the target refused, for logging the first and every
    /// [`REFUSALS_PER_WARNING`]th.
    refusals: u64,
    kind: ClientKind,
    /// The transport's book of voters that do not answer.
    reachability: Arc<Reachability>,
}

/// A client refused again and again (a misconfigured voter list) warns once
/// per this many refusals.
const REFUSALS_PER_WARNING: u64 = 100;

enum ClientKind {
    None,
    Tcp {
        addr: String,
        security: Option<Arc<dyn ChannelSecurity>>,
        /// Reconnected on the next call after any failure.
        connection: Option<Box<Framed<Box<dyn SecuredStream>, LengthDelimitedCodec>>>,
        next_correlation_id: u32,
    },
    Memory(MemoryRouter),
}

impl PeerClient {
    /// The node id this client sends to ([`UNKNOWN_NODE`] when not known).
    fn target(&self) -> u64 {
        self.route.destination.unwrap_or(UNKNOWN_NODE)
    }

    /// Sends `request` and waits at most `timeout` for the response. A
    /// request the target refused ([`Route::refusal`]) was not handled:
    /// [`TransportError::Refused`], with the target's reason.
    pub(crate) async fn call(
        &mut self,
        request: QuorumRequest,
        timeout: Duration,
    ) -> Result<QuorumResponse, TransportError> {
        let target = self.target();
        let mut watch = self.watch(timeout);
        let sent = self.send(request, timeout).await;
        if let Some(watch) = watch.as_mut() {
            watch.outcome(&sent);
        }
        match sent? {
            QuorumResponse::Refused(reason) => {
                if self.refusals % REFUSALS_PER_WARNING == 0 {
                    tracing::warn!(
                        target = %node_name(self.route.destination),
                        address = self.address().unwrap_or(""),
                        refusals = self.refusals + 1,
                        %reason,
                        "a node refused this node's metadata quorum request"
                    );
                }
                self.refusals += 1;
                Err(TransportError::Refused { target, reason })
            }
            response => Ok(response),
        }
    }

    /// The address this client dials (empty in memory); `None` without a
    /// transport.
    fn address(&self) -> Option<&str> {
        match &self.kind {
            ClientKind::None => None,
            ClientKind::Tcp { addr, .. } => Some(addr),
            ClientKind::Memory(_) => Some(""),
        }
    }

    /// A watch on one call's outcome for the transport's book of peers
    /// that do not answer ([`reachability`]); none without a transport.
    fn watch(&self, timeout: Duration) -> Option<CallWatch> {
        Some(CallWatch {
            book: self.reachability.clone(),
            peer: (self.target(), self.address()?.to_owned()),
            voter: self.route.destination,
            started: std::time::Instant::now(),
            timeout,
            settled: false,
        })
    }

    async fn send(
        &mut self,
        request: QuorumRequest,
        timeout: Duration,
    ) -> Result<QuorumResponse, TransportError> {
        let target = self.target();
        match &mut self.kind {
            ClientKind::None => Err(TransportError::Unreachable {
                target,
                reason: "no transport: this is a single-voter quorum".into(),
            }),
            ClientKind::Memory(router) => router.call(&self.route, request).await,
            ClientKind::Tcp {
                addr,
                security,
                connection,
                next_correlation_id,
            } => {
                if connection
                    .as_mut()
                    .is_some_and(|framed| !is_idle_open(framed, *next_correlation_id))
                {
                    // The peer closed it (e.g. restarted) since the last
                    // request: reconnect instead of failing this request.
                    *connection = None;
                }
                // Encoded before dialing: a frame too large fails at once,
                // reachable target or not.
                *next_correlation_id = next_correlation_id.wrapping_add(1);
                let correlation_id = *next_correlation_id;
                let frame = encode_request(correlation_id, &self.route, &request).map_err(|e| {
                    TransportError::Unreachable {
                        target,
                        reason: e.to_string(),
                    }
                })?;
                check_frame_size(target, &frame)?;
                if connection.is_none() {
                    let unreachable =
                        |reason: String| TransportError::Unreachable { target, reason };
                    let dial = async {
                        let stream = TcpStream::connect(addr.as_str())
                            .await
                            .map_err(|e| format!("connecting to {addr}: {e}"))?;
                        let _ = stream.set_nodelay(true);
                        match security {
                            None => Ok(Box::new(stream) as Box<dyn SecuredStream>),
                            Some(security) => security
                                .connect(stream, addr.clone())
                                .await
                                .map_err(|e| format!("securing the connection to {addr}: {e}")),
                        }
                    };
                    let stream = tokio::time::timeout(timeout, dial)
                        .await
                        .map_err(|_| unreachable(format!("connecting to {addr} timed out")))?
                        .map_err(unreachable)?;
                    *connection = Some(Box::new(Framed::new(stream, codec())));
                }
                let Some(framed) = connection.as_mut() else {
                    return Err(TransportError::Unreachable {
                        target,
                        reason: format!("no connection to {addr}"),
                    });
                };
                let exchange = async {
                    framed.send(frame).await.map_err(|e| e.to_string())?;
                    let (id, response) = loop {
                        let reply = framed
                            .next()
                            .await
                            .ok_or_else(|| CLOSED_UNANSWERED.to_string())?
                            .map_err(|e| e.to_string())?;
                        let (id, response) = decode_response(&reply).map_err(|e| e.to_string())?;
                        // The late answer to a call given up on.
                        if !is_stale(id, correlation_id) {
                            break (id, response);
                        }
                    };
                    if id != correlation_id {
                        return Err(format!(
                            "response correlation id {id}, expected {correlation_id}"
                        ));
                    }
                    if !matches!(response, QuorumResponse::Refused(_))
                        && response.kind() != request.kind() | RESPONSE_BIT
                    {
                        return Err(format!(
                            "response kind {} to a request of kind {}",
                            response.kind(),
                            request.kind()
                        ));
                    }
                    Ok(response)
                };
                match tokio::time::timeout(timeout, exchange).await {
                    Ok(Ok(response)) => Ok(response),
                    Ok(Err(reason)) => {
                        *connection = None;
                        Err(TransportError::Network { target, reason })
                    }
                    // The connection stays: the answer, if it comes, is
                    // skipped by its correlation id (as when openraft
                    // drops a call at its own timeout, which is this one).
                    Err(_) => Err(TransportError::Network {
                        target,
                        reason: format!("no response within {} ms", timeout.as_millis()),
                    }),
                }
            }
        }
    }
}

/// Records one call's outcome in the transport's book of peers that do
/// not answer and logs what changed: a peer going down, staying down or
/// answering again; openraft's own per-request reports of the same are
/// left out of the broker's log (`weir_broker::logging`).
///
/// A call dropped unfinished in the second half of its timeout counts as
/// unanswered: openraft gives up on an RPC at the same ttl it hands the
/// transport, and its timer, started first, usually fires first (a host
/// that is off answers neither a dial nor a request). One dropped earlier
/// was cancelled for another reason (an election won without this
/// voter's answer) and counts as nothing.
struct CallWatch {
    book: Arc<Reachability>,
    peer: reachability::Peer,
    voter: Option<u64>,
    started: std::time::Instant,
    timeout: Duration,
    settled: bool,
}

impl CallWatch {
    fn outcome(&mut self, sent: &Result<QuorumResponse, TransportError>) {
        self.settled = true;
        let now = std::time::Instant::now();
        match sent {
            Ok(_) => {
                let change = self.book.answered(&self.peer, now);
                self.log(change, &"");
            }
            // Not sent: says nothing of the peer. Raft retries such a
            // request for good (an entry written before entries were
            // bounded): logged, at most once an interval.
            Err(e @ TransportError::TooLarge { .. }) => {
                if let Some(quiet) = TOO_LARGE_WARNINGS.due(now) {
                    tracing::error!(error = %e, since_last = quiet,
                        "a metadata quorum request is over the frame limit and is not sent");
                }
            }
            Err(e) => {
                let change = self.book.failed(&self.peer, now);
                self.log(change, e);
            }
        }
    }

    fn log(&self, change: Change, error: &dyn std::fmt::Display) {
        let voter = node_name(self.voter);
        let address = self.peer.1.as_str();
        match change {
            Change::None => {}
            Change::WentDown { unlogged } => tracing::warn!(
                %voter,
                address,
                %error,
                unlogged_outages = unlogged,
                "a metadata quorum voter does not answer"
            ),
            Change::StillDown { failures, for_ } => tracing::warn!(
                %voter,
                address,
                failures,
                down_ms = for_.as_millis() as u64,
                %error,
                "a metadata quorum voter still does not answer"
            ),
            Change::CameBack {
                failures,
                failing_for,
            } => tracing::info!(
                %voter,
                address,
                failures,
                failing_ms = failing_for.as_millis() as u64,
                "a metadata quorum voter answers again"
            ),
        }
    }
}

impl Drop for CallWatch {
    fn drop(&mut self) {
        if self.settled || self.started.elapsed() < self.timeout / 2 {
            return;
        }
        let change = self.book.failed(&self.peer, std::time::Instant::now());
        let waited = self.timeout.as_millis();
        self.log(
            change,
            &format_args!("no answer within the caller's {waited} ms"),
        );
    }
}

/// A node id as logged: `unknown` for a `controller.quorum.bootstrap.servers`
/// address.
fn node_name(id: Option<u64>) -> String {
    match id {
        Some(id) => id.to_string(),
        None => "unknown".to_owned(),
    }
}

/// True when an idle client connection is still usable: the peer has not
/// closed it and sent nothing unasked. Reads what is ready without
/// waiting, skipping late answers to calls given up on (ids up to
/// `last_sent`): pending means open (a closed connection reads its end, a
/// TLS one its close_notify).
fn is_idle_open(
    framed: &mut Framed<Box<dyn SecuredStream>, LengthDelimitedCodec>,
    last_sent: u32,
) -> bool {
    loop {
        match framed.next().now_or_never() {
            None => return true,
            Some(Some(Ok(frame))) => match decode_response(&frame) {
                Ok((id, _)) if is_stale(id, last_sent.wrapping_add(1)) => continue,
                _ => return false,
            },
            Some(_) => return false,
        }
    }
}

/// Whether answer `id` belongs to a request sent before request `current`
/// on the same connection (correlation ids count up and wrap).
fn is_stale(id: u32, current: u32) -> bool {
    let behind = current.wrapping_sub(id);
    behind != 0 && behind < u32::MAX / 2
}

fn truncated(reason: &str) -> &str {
    if reason.len() <= MAX_LOGGED_REASON {
        return reason;
    }
    let mut end = MAX_LOGGED_REASON;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

async fn accept_loop(
    listener: TcpListener,
    security: Option<Arc<dyn ChannelSecurity>>,
    served: Arc<Served>,
    handler: Weak<dyn QuorumRequestHandler>,
    token: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            _ = token.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let (served, handler, token) = (served.clone(), handler.clone(), token.clone());
                let secured = match &security {
                    None => futures::future::ready(Ok(Box::new(stream) as Box<dyn SecuredStream>))
                        .boxed(),
                    Some(security) => security.accept(stream, peer),
                };
                tokio::spawn(async move {
                    let secured = tokio::select! {
                        _ = token.cancelled() => return,
                        secured = secured => secured,
                    };
                    match secured {
                        Ok(stream) => serve_connection(stream, peer, &served, handler, token).await,
                        Err(reason) => tracing::info!(%peer, reason = truncated(&reason),
                            "closing controller connection before it was secured"),
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "controller listener accept failed");
                // Back off on errors such as EMFILE so the loop does not spin.
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        }
    }
}

async fn serve_connection(
    stream: Box<dyn SecuredStream>,
    peer: std::net::SocketAddr,
    served: &Served,
    handler: Weak<dyn QuorumRequestHandler>,
    token: CancellationToken,
) {
    let mut framed = Framed::new(stream, codec());
    let reason = loop {
        let frame = tokio::select! {
            _ = token.cancelled() => return,
            frame = framed.next() => frame,
        };
        let frame = match frame {
            None => return,
            Some(Ok(frame)) => frame,
            // A peer that drops its end without TLS's close_notify (a
            // client replaced, a node stopped) is a close, not a fault.
            Some(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                tracing::debug!(%peer, reason = truncated(&e.to_string()),
                    "controller connection closed by its peer");
                return;
            }
            Some(Err(e)) => break e.to_string(),
        };
        let (correlation_id, route, request) = match decode_request(&frame) {
            Ok(decoded) => decoded,
            Err(e) => {
                // Not a quorum frame (a Kafka client at this listener
                // reconnects every 50 ms): warned at most once an interval.
                let reason = e.to_string();
                let reason = truncated(&reason);
                match served.bad_frame_warnings.due(std::time::Instant::now()) {
                    Some(quiet) => tracing::warn!(
                        %peer,
                        reason,
                        closed_since_last_warning = quiet,
                        "closing controller connection"
                    ),
                    None => tracing::debug!(%peer, reason, "closing controller connection"),
                }
                return;
            }
        };
        let response = if let Some(refused) = served.refusal(&route, &peer) {
            refused
        } else {
            let Some(handler) = handler.upgrade() else {
                return;
            };
            tokio::select! {
                _ = token.cancelled() => return,
                response = handler.handle(request) => response,
            }
        };
        let frame = match encode_response(correlation_id, &response) {
            Ok(frame) => frame,
            Err(e) => break e.to_string(),
        };
        if let Err(e) = framed.send(frame).await {
            break e.to_string();
        }
    };
    tracing::warn!(%peer, reason = truncated(&reason), "closing controller connection");
}

/// An in-process network between voters of one test or simulation.
///
/// Every message is encoded to a frame and decoded again, as over TCP.
/// Tests can isolate a voter (no message to or from it is delivered, as a
/// network partition), cut single links between two voters, heal them, and
/// make the router drop every n-th message. A router made with
/// [`MemoryRouter::seeded`] can also lose each message with a probability
/// ([`MemoryRouter::set_loss_per_mille`]) and delay it by a random time
/// ([`MemoryRouter::set_max_delay`]); those draws come from a generator
/// seeded once, so the same sequence of messages meets the same faults.
/// Cheap to clone; clones share the same network.
#[derive(Clone, Default)]
pub struct MemoryRouter {
    state: Arc<Mutex<RouterState>>,
}

impl std::fmt::Debug for MemoryRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("MemoryRouter")
            .field("nodes", &state.nodes.keys().collect::<Vec<_>>())
            .field("isolated", &state.isolated)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct RouterState {
    /// Each node as served, and its handler.
    nodes: BTreeMap<u64, (Arc<Served>, Weak<dyn QuorumRequestHandler>)>,
    isolated: BTreeSet<u64>,
    /// Cut links, each as `(lower id, higher id)`.
    cut_links: BTreeSet<(u64, u64)>,
    /// Drop every n-th message (request or response).
    drop_every: Option<u64>,
    messages: u64,
    /// Random faults; all zero unless the router was seeded.
    random: RandomFaults,
}

/// Seeded message loss and delay.
#[derive(Default)]
struct RandomFaults {
    /// splitmix64 state.
    state: u64,
    /// Probability of losing one message, in 1/1000.
    loss_per_mille: u32,
    /// Longest delay of one message, in milliseconds.
    max_delay_ms: u64,
}

impl RandomFaults {
    /// splitmix64 (Steele, Lea and Flood): one 64-bit draw.
    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Whether the next message is lost, and how long it is delayed.
    fn draw(&mut self) -> (bool, Duration) {
        if self.loss_per_mille == 0 && self.max_delay_ms == 0 {
            return (false, Duration::ZERO);
        }
        let lost = self.next() % 1000 < u64::from(self.loss_per_mille);
        let delay = match self.max_delay_ms {
            0 => 0,
            max => self.next() % (max + 1),
        };
        (lost, Duration::from_millis(delay))
    }
}

impl RouterState {
    fn cut(&self, from: u64, target: u64) -> Option<String> {
        if self.isolated.contains(&from) {
            return Some(format!("voter {from} is partitioned away"));
        }
        if self.isolated.contains(&target) {
            return Some(format!("voter {target} is partitioned away"));
        }
        if self.cut_links.contains(&link(from, target)) {
            return Some(format!(
                "the link between voters {from} and {target} is cut"
            ));
        }
        None
    }

    /// Whether the next message is lost, and how long it is delayed first.
    fn lose_message(&mut self) -> (bool, Duration) {
        self.messages += 1;
        let every = self.drop_every.is_some_and(|n| self.messages % n == 0);
        let (random, delay) = self.random.draw();
        (every || random, delay)
    }
}

fn link(a: u64, b: u64) -> (u64, u64) {
    (a.min(b), a.max(b))
}

impl MemoryRouter {
    /// An empty network.
    pub fn new() -> MemoryRouter {
        MemoryRouter::default()
    }

    /// An empty network whose random message loss and delay (off until
    /// [`MemoryRouter::set_loss_per_mille`] or
    /// [`MemoryRouter::set_max_delay`]) draw from a generator seeded with
    /// `seed`: the n-th message routed meets the same fault for the same
    /// seed.
    pub fn seeded(seed: u64) -> MemoryRouter {
        let router = MemoryRouter::default();
        router.lock().random.state = seed;
        router
    }

    /// Loses each message (request or response) with probability
    /// `per_mille` / 1000 from now on (0: none; values above 1000 lose
    /// everything). A lost request never reaches its target; a lost
    /// response was handled but its caller gets an error.
    pub fn set_loss_per_mille(&self, per_mille: u32) {
        self.lock().random.loss_per_mille = per_mille.min(1000);
    }

    /// Delays each message (request and response separately) by a time
    /// drawn uniformly from `0..=max` (whole milliseconds) from now on;
    /// `Duration::ZERO`: no delay. Messages on one client still go one at a
    /// time; messages between different pairs overtake each other.
    pub fn set_max_delay(&self, max: Duration) {
        self.lock().random.max_delay_ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    }

    /// Cuts the link between voters `a` and `b` in both directions until
    /// [`MemoryRouter::heal_link`] or [`MemoryRouter::heal_all`]; both still
    /// reach every other voter.
    pub fn cut_link(&self, a: i32, b: i32) {
        if let (Ok(a), Ok(b)) = (u64::try_from(a), u64::try_from(b)) {
            self.lock().cut_links.insert(link(a, b));
        }
    }

    /// Reconnects a link cut by [`MemoryRouter::cut_link`].
    pub fn heal_link(&self, a: i32, b: i32) {
        if let (Ok(a), Ok(b)) = (u64::try_from(a), u64::try_from(b)) {
            self.lock().cut_links.remove(&link(a, b));
        }
    }

    /// Reconnects every isolated voter and every cut link (message loss and
    /// delay stay as set).
    pub fn heal_all(&self) {
        let mut state = self.lock();
        state.isolated.clear();
        state.cut_links.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RouterState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Cuts voter `node_id` off from every other voter until
    /// [`MemoryRouter::heal`].
    pub fn isolate(&self, node_id: i32) {
        if let Ok(id) = u64::try_from(node_id) {
            self.lock().isolated.insert(id);
        }
    }

    /// Reconnects a voter cut off by [`MemoryRouter::isolate`].
    pub fn heal(&self, node_id: i32) {
        if let Ok(id) = u64::try_from(node_id) {
            self.lock().isolated.remove(&id);
        }
    }

    /// Drops every `n`-th message from now on (`None` or `Some(0)`: none).
    pub fn drop_every(&self, n: Option<u64>) {
        let mut state = self.lock();
        state.drop_every = n.filter(|&n| n > 0);
        state.messages = 0;
    }

    fn register(&self, served: Served, handler: Weak<dyn QuorumRequestHandler>) {
        self.lock()
            .nodes
            .insert(served.node_id, (Arc::new(served), handler));
    }

    fn unregister(&self, node_id: u64) {
        self.lock().nodes.remove(&node_id);
    }

    /// Delivers `request` to the node `route` names (refused as over TCP
    /// when the node is of another cluster).
    async fn call(
        &self,
        route: &Route,
        request: QuorumRequest,
    ) -> Result<QuorumResponse, TransportError> {
        let (from, target) = (route.source, route.destination.unwrap_or(UNKNOWN_NODE));
        let unreachable = |reason: String| TransportError::Unreachable { target, reason };
        let network = |reason: String| TransportError::Network { target, reason };
        let (lost, delay) = {
            let mut state = self.lock();
            if let Some(reason) = state.cut(from, target) {
                return Err(unreachable(reason));
            }
            state.lose_message()
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if lost {
            return Err(network("request lost".into()));
        }
        let (served, handler) = {
            let state = self.lock();
            if let Some(reason) = state.cut(from, target) {
                return Err(network(format!("request lost: {reason}")));
            }
            state
                .nodes
                .get(&target)
                .and_then(|(served, handler)| Some((served.clone(), handler.upgrade()?)))
                .ok_or_else(|| unreachable(format!("voter {target} is not running")))?
        };
        let frame = encode_request(0, route, &request).map_err(|e| unreachable(e.to_string()))?;
        check_frame_size(target, &frame)?;
        let (_, route, request) = decode_request(&frame).map_err(|e| network(e.to_string()))?;
        let response = match served.refusal(&route, &format!("voter {from}")) {
            Some(refused) => refused,
            None => handler.handle(request).await,
        };
        let (lost, delay) = self.lock().lose_message();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        {
            let state = self.lock();
            if let Some(reason) = state.cut(from, target) {
                return Err(network(format!("response lost: {reason}")));
            }
            if lost {
                return Err(network("response lost".into()));
            }
        }
        let frame = encode_response(0, &response).map_err(|e| network(e.to_string()))?;
        let (_, response) = decode_response(&frame).map_err(|e| network(e.to_string()))?;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A route in cluster "c".
    fn route(from: u64, to: u64) -> Route {
        Route::new("c", from, to)
    }

    fn vote_request() -> QuorumRequest {
        QuorumRequest::Vote(VoteRequest::new(openraft::Vote::new(3, 2), None))
    }

    #[test]
    fn frames_round_trip_with_header() {
        let frame = encode_request(7, &route(2, 3), &vote_request()).unwrap();
        assert_eq!(&frame[..4], &[0x57, 0x51, 2, 2]);
        assert_eq!(&frame[4..8], &7u32.to_be_bytes());
        let (id, routed, decoded) = decode_request(&frame).unwrap();
        assert_eq!(routed, route(2, 3));
        assert_eq!(id, 7);
        let QuorumRequest::Vote(vote) = decoded else {
            panic!("{decoded:?}")
        };
        assert_eq!(vote.vote, openraft::Vote::new(3, 2));

        let response =
            QuorumResponse::Command(Err(ControllerError::NotController { leader: Some(2) }));
        let frame = encode_response(9, &response).unwrap();
        let (id, decoded) = decode_response(&frame).unwrap();
        assert_eq!(id, 9);
        assert!(matches!(
            decoded,
            QuorumResponse::Command(Err(ControllerError::NotController { leader: Some(2) }))
        ));
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        let good = encode_request(1, &route(2, 3), &vote_request()).unwrap();
        assert_eq!(
            decode_request(&good[..3]).unwrap_err(),
            FrameError::TooShort { len: 3 }
        );
        let mut bad = good.to_vec();
        bad[0] = 0;
        assert!(matches!(
            decode_request(&bad).unwrap_err(),
            FrameError::BadMagic { .. }
        ));
        for version in [1, 9] {
            // 1: a frame without a route, from a node of an older Weir.
            let mut bad = good.to_vec();
            bad[2] = version;
            assert_eq!(
                decode_request(&bad).unwrap_err(),
                FrameError::UnsupportedVersion { found: version }
            );
        }
        let mut bad = good.to_vec();
        bad[3] = 0x42;
        assert!(matches!(
            decode_request(&bad).unwrap_err(),
            FrameError::UnknownKind { kind: 0x42, .. }
        ));
        // A request frame is not a response, and a truncated body fails.
        assert!(decode_response(&good).is_err());
        assert!(matches!(
            decode_request(&good[..good.len() - 1]).unwrap_err(),
            FrameError::Body { kind: 2, .. }
        ));
    }

    #[tokio::test]
    async fn tcp_client_to_nobody_is_unreachable_and_server_closes_bad_frames() {
        // Bind then drop: nothing listens on the port any more.
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            l.local_addr().unwrap().port()
        };
        let transport = QuorumTransport::tcp(TcpListener::bind("127.0.0.1:0").await.unwrap());
        let mut client = transport.client(route(1, 2), &format!("127.0.0.1:{port}"));
        let err = client
            .call(vote_request(), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(
            matches!(err, TransportError::Unreachable { target: 2, .. }),
            "{err}"
        );

        // A server whose handler is gone still reads frames; garbage closes
        // the connection.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let transport = QuorumTransport::tcp(listener);
        let handler: Weak<dyn QuorumRequestHandler> = Weak::<NeverHandler>::new();
        let _guard = transport.serve("c", 1, handler);
        send_and_expect_close(addr, b"not a quorum frame").await;
    }

    /// Sends `frame` to the server at `addr` on a new connection and waits
    /// until the server closes it.
    async fn send_and_expect_close(addr: std::net::SocketAddr, frame: &'static [u8]) {
        let stream = TcpStream::connect(addr).await.unwrap();
        let mut framed = Framed::new(stream, codec());
        framed.send(Bytes::from_static(frame)).await.unwrap();
        let next = tokio::time::timeout(Duration::from_secs(5), framed.next())
            .await
            .expect("server closes the connection");
        assert!(next.is_none() || next.is_some_and(|r| r.is_err()));
    }

    /// A Kafka client pointed at the CONTROLLER listener reconnects every
    /// 50 ms, and each connection closed on a frame that does not decode
    /// logged a warning: 4,600 in 4 minutes, seen by hand. One warning per
    /// interval now, the rest at debug level and counted in the next.
    #[tokio::test]
    async fn connections_closed_on_bad_frames_warn_once_per_interval() {
        let (warnings, _log) = capture_messages_up_to(tracing::Level::WARN);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let handler: Arc<dyn QuorumRequestHandler> = Arc::new(NotControllerHandler);
        let _guard = QuorumTransport::tcp(listener).serve("c", 1, Arc::downgrade(&handler));
        for _ in 0..5 {
            // A Kafka ApiVersions request header: bad magic.
            send_and_expect_close(addr, &[0, 18, 0, 3, 0, 0, 0, 1]).await;
        }
        assert_eq!(*warnings.lock().unwrap(), ["closing controller connection"]);
    }

    /// A request over the frame limit is refused before anything else,
    /// also when its target is not listening: a forwarded command that
    /// large fails at once instead of waiting for an unreachable leader.
    #[tokio::test]
    async fn a_request_over_the_frame_limit_is_refused_before_dialing() {
        let nobody = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = nobody.local_addr().unwrap();
        drop(nobody);
        let transport = QuorumTransport::tcp(TcpListener::bind("127.0.0.1:0").await.unwrap());
        let mut client = transport.client(route(1, 2), &addr.to_string());
        let huge = QuorumRequest::Command(ControllerCommand::AlterTopicConfigs {
            topic: "t".into(),
            configs: vec![("x".into(), Some("v".repeat(MAX_FRAME_BYTES)))],
        });
        let err = client.call(huge, Duration::from_secs(5)).await.unwrap_err();
        assert!(
            matches!(err, TransportError::TooLarge { target: 2, bytes } if bytes > MAX_FRAME_BYTES),
            "{err}"
        );
        let small = QuorumRequest::Command(ControllerCommand::ReadOffset);
        let err = client
            .call(small, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(
            matches!(err, TransportError::Unreachable { target: 2, .. }),
            "{err}"
        );
    }

    #[test]
    fn a_warning_gate_lets_one_warning_through_per_interval_and_counts_the_rest() {
        let gate = WarningGate::default();
        let start = std::time::Instant::now();
        assert_eq!(gate.due(start), Some(0));
        assert_eq!(gate.due(start + Duration::from_secs(1)), None);
        assert_eq!(gate.due(start + WARNING_INTERVAL / 2), None);
        assert_eq!(gate.due(start + WARNING_INTERVAL), Some(2));
        assert_eq!(gate.due(start + WARNING_INTERVAL * 3), Some(0));
    }

    #[tokio::test]
    async fn tcp_client_reconnects_after_the_server_restarts() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let handler: Arc<dyn QuorumRequestHandler> = Arc::new(NotControllerHandler);
        let mut guard = QuorumTransport::tcp(listener).serve("c", 1, Arc::downgrade(&handler));
        let client_transport =
            QuorumTransport::tcp(TcpListener::bind("127.0.0.1:0").await.unwrap());
        let mut client = client_transport.client(route(2, 1), &addr.to_string());
        let command = || QuorumRequest::Command(ControllerCommand::ReadOffset);
        let timeout = Duration::from_secs(5);
        assert!(matches!(
            client.call(command(), timeout).await.unwrap(),
            QuorumResponse::Command(Err(ControllerError::NotController { leader: None }))
        ));

        // The server goes away (closing its connections) and comes back on
        // the same address: the next call reconnects instead of failing.
        guard.stop();
        let restarted = loop {
            match TcpListener::bind(addr).await {
                Ok(listener) => break listener,
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                    tokio::task::yield_now().await
                }
                Err(e) => panic!("rebinding {addr}: {e}"),
            }
        };
        let _guard = QuorumTransport::tcp(restarted).serve("c", 1, Arc::downgrade(&handler));
        // Wait until the client side has seen the old connection close.
        let deadline = tokio::time::Instant::now() + timeout;
        while let ClientKind::Tcp {
            connection: Some(framed),
            next_correlation_id,
            ..
        } = &mut client.kind
        {
            if !is_idle_open(framed, *next_correlation_id) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "old connection never closed"
            );
            tokio::task::yield_now().await;
        }
        assert!(matches!(
            client.call(command(), timeout).await.unwrap(),
            QuorumResponse::Command(Err(ControllerError::NotController { leader: None }))
        ));
    }

    /// openraft gives up on a call by dropping its future (its timeout is
    /// the heartbeat interval, as this transport's own): the late answer
    /// is skipped by its correlation id and the next call is answered on
    /// the same connection. Each such call closed the connection and
    /// dialled (TLS, SASL) a new one before, several times a second on a
    /// busy node.
    #[tokio::test]
    async fn a_call_given_up_on_keeps_its_connection_and_its_late_answer_is_skipped() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client_transport =
            QuorumTransport::tcp(TcpListener::bind("127.0.0.1:0").await.unwrap());
        let mut client = client_transport.client(route(2, 1), &addr.to_string());
        let command = || QuorumRequest::Command(ControllerCommand::ReadOffset);
        let answer = |id: u32| {
            encode_response(
                id,
                &QuorumResponse::Command(Err(ControllerError::NotController {
                    leader: Some(id as i32),
                })),
            )
            .unwrap()
        };

        // Given up on before the server answers (dropped, as openraft's
        // timeout drops it), then by this transport's own timeout.
        let accepted = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            (listener, Framed::new(stream, codec()))
        });
        let dropped = tokio::time::timeout(
            Duration::from_millis(50),
            client.call(command(), Duration::from_secs(60)),
        )
        .await;
        assert!(dropped.is_err(), "the server has not answered");
        let (listener, mut server) = accepted.await.unwrap();
        let first = server.next().await.unwrap().unwrap();
        let (first_id, _, _) = decode_request(&first).unwrap();
        let timed_out = client
            .call(command(), Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(
            matches!(timed_out, TransportError::Network { .. }),
            "{timed_out}"
        );
        let second = server.next().await.unwrap().unwrap();
        let (second_id, _, _) = decode_request(&second).unwrap();

        // Both late answers arrive; one is already readable when the next
        // call starts, the other comes before its answer.
        server.send(answer(first_id)).await.unwrap();
        let third = tokio::spawn(async move {
            let answered = client.call(command(), Duration::from_secs(60)).await;
            (client, answered)
        });
        let request = server.next().await.unwrap().unwrap();
        let (third_id, _, _) = decode_request(&request).unwrap();
        server.send(answer(second_id)).await.unwrap();
        server.send(answer(third_id)).await.unwrap();
        let (_client, answered) = third.await.unwrap();
        assert!(
            matches!(
                answered.unwrap(),
                QuorumResponse::Command(Err(ControllerError::NotController { leader: Some(id) }))
                    if id == third_id as i32
            ),
            "the third call gets its own answer"
        );
        // One connection served all three calls.
        assert!(
            listener.accept().now_or_never().is_none(),
            "the client dialled again"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn memory_router_cuts_single_links_and_draws_faults_from_its_seed() {
        let handler: Arc<dyn QuorumRequestHandler> = Arc::new(NotControllerHandler);
        let command = || QuorumRequest::Command(ControllerCommand::ReadOffset);
        let timeout = Duration::from_secs(1);

        let router = MemoryRouter::seeded(1);
        let _served: Vec<ServeGuard> = (1..=3)
            .map(|id| QuorumTransport::memory(&router).serve("c", id, Arc::downgrade(&handler)))
            .collect();
        let transport = QuorumTransport::memory(&router);
        router.cut_link(2, 1);
        let err = transport
            .client(route(1, 2), "")
            .call(command(), timeout)
            .await
            .unwrap_err();
        assert!(
            matches!(err, TransportError::Unreachable { target: 2, .. }),
            "{err}"
        );
        // The other links still carry messages.
        assert!(transport
            .client(route(1, 3), "")
            .call(command(), timeout)
            .await
            .is_ok());
        assert!(transport
            .client(route(3, 2), "")
            .call(command(), timeout)
            .await
            .is_ok());
        router.heal_all();
        assert!(transport
            .client(route(2, 1), "")
            .call(command(), timeout)
            .await
            .is_ok());

        // Half the messages lost, each delayed up to 20 ms: which calls
        // fail and how long each takes depend only on the seed.
        let run = |seed: u64| {
            let handler = handler.clone();
            async move {
                let router = MemoryRouter::seeded(seed);
                let _served =
                    QuorumTransport::memory(&router).serve("c", 2, Arc::downgrade(&handler));
                router.set_loss_per_mille(500);
                router.set_max_delay(Duration::from_millis(20));
                let mut client = QuorumTransport::memory(&router).client(route(1, 2), "");
                let mut outcomes = Vec::new();
                for _ in 0..40 {
                    let before = tokio::time::Instant::now();
                    let ok = client.call(command(), timeout).await.is_ok();
                    outcomes.push((ok, before.elapsed()));
                }
                outcomes
            }
        };
        let first = run(7).await;
        assert_eq!(first, run(7).await);
        assert_ne!(first, run(8).await);
        let delivered = first.iter().filter(|(ok, _)| *ok).count();
        assert!((1..40).contains(&delivered), "{delivered} of 40 delivered");
        assert!(first.iter().any(|(_, took)| !took.is_zero()));
        assert!(first
            .iter()
            .all(|(_, took)| *took <= Duration::from_millis(40)));
    }

    /// Regression (CI, 2026-12-05): a voter whose voter list named a node of
    /// another cluster (there, a port one integration test released and
    /// another's node took) had its Vote and AppendEntries handled there:
    /// the other cluster's node 1 took the foreign leader's vote as its own
    /// and openraft's engine panicked ("assertion failed:
    /// self.leader.is_none()"). Such requests are refused unhandled, over
    /// TCP and through the in-memory router alike.
    #[tokio::test]
    async fn a_request_of_another_cluster_or_for_another_node_is_refused_unhandled() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let handled = Arc::new(CountingHandler::default());
        let handler: Arc<dyn QuorumRequestHandler> = handled.clone();
        let _tcp = QuorumTransport::tcp(listener).serve("c", 3, Arc::downgrade(&handler));
        let router = MemoryRouter::new();
        let _memory = QuorumTransport::memory(&router).serve("c", 3, Arc::downgrade(&handler));
        let dialer = QuorumTransport::tcp_dial_only();
        let timeout = Duration::from_secs(5);
        let command = || QuorumRequest::Command(ControllerCommand::ReadOffset);

        // Over TCP: another cluster's request, and one for node 2 that
        // reached node 3's address, are refused; its own cluster's requests
        // for node 3, or for any node (a bootstrap server's), are served.
        // The router delivers by node id: only the cluster can differ.
        let memory = QuorumTransport::memory(&router);
        let cases = [
            (
                &dialer,
                Route::new("another-cluster", 1, 3),
                Some("inconsistent cluster id"),
            ),
            (&dialer, route(1, 2), Some("invalid voter")),
            (&dialer, route(1, 3), None),
            (&dialer, Route::new("c", 1, UNKNOWN_NODE), None),
            (
                &memory,
                Route::new("another-cluster", 1, 3),
                Some("inconsistent cluster id"),
            ),
            (&memory, route(1, 3), None),
        ];
        for (transport, route, refused) in cases {
            let before = handled.count();
            let answer = transport
                .client(route.clone(), &addr)
                .call(command(), timeout)
                .await;
            match (refused, &answer) {
                (None, Ok(_)) => assert_eq!(handled.count(), before + 1, "{route:?}"),
                (Some(why), Err(TransportError::Refused { reason, .. }))
                    if reason.contains(why) =>
                {
                    assert_eq!(handled.count(), before, "{route:?} was handled");
                }
                _ => panic!("{route:?}: {answer:?}"),
            }
        }
    }

    /// The message of every event logged on this thread while the guard
    /// lives.
    fn capture_messages() -> (Arc<Mutex<Vec<String>>>, tracing::subscriber::DefaultGuard) {
        capture_messages_up_to(tracing::Level::TRACE)
    }

    /// [`capture_messages`] of events at `level` or more severe.
    fn capture_messages_up_to(
        level: tracing::Level,
    ) -> (Arc<Mutex<Vec<String>>>, tracing::subscriber::DefaultGuard) {
        use tracing_subscriber::layer::SubscriberExt;

        #[derive(Clone)]
        struct Messages(Arc<Mutex<Vec<String>>>, tracing::Level);
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Messages {
            fn on_event(
                &self,
                event: &tracing::Event<'_>,
                _: tracing_subscriber::layer::Context<'_, S>,
            ) {
                if *event.metadata().level() > self.1 {
                    return;
                }
                struct Message(String);
                impl tracing::field::Visit for Message {
                    fn record_debug(
                        &mut self,
                        field: &tracing::field::Field,
                        value: &dyn std::fmt::Debug,
                    ) {
                        if field.name() == "message" {
                            self.0 = format!("{value:?}");
                        }
                    }
                }
                let mut message = Message(String::new());
                event.record(&mut message);
                self.0.lock().unwrap().push(message.0);
            }
        }
        let messages = Messages(Arc::default(), level);
        let guard =
            tracing::subscriber::set_default(tracing_subscriber::registry().with(messages.clone()));
        (messages.0, guard)
    }

    /// openraft gives up on an RPC at the ttl it hands the transport, and
    /// its timer usually fires first (a host that is off answers nothing):
    /// the dropped call counts as unanswered. A call dropped early (an
    /// election won without this voter) counts as nothing.
    #[tokio::test]
    async fn a_call_dropped_at_its_deadline_counts_as_unanswered_and_one_dropped_early_does_not() {
        let (messages, _log) = capture_messages();
        let router = MemoryRouter::new();
        let handler: Arc<dyn QuorumRequestHandler> = Arc::new(NeverHandler);
        let _node_2 = QuorumTransport::memory(&router).serve("c", 2, Arc::downgrade(&handler));
        let transport = QuorumTransport::memory(&router);
        let command = || QuorumRequest::Command(ControllerCommand::ReadOffset);
        let mut client = transport.client(route(1, 2), "");
        let early = tokio::time::timeout(
            Duration::from_millis(10),
            client.call(command(), Duration::from_secs(60)),
        )
        .await;
        assert!(early.is_err(), "the handler never answers");
        assert!(messages.lock().unwrap().is_empty(), "{messages:?}");
        let at_deadline = tokio::time::timeout(
            Duration::from_millis(150),
            client.call(command(), Duration::from_millis(200)),
        )
        .await;
        assert!(at_deadline.is_err());
        assert_eq!(
            *messages.lock().unwrap(),
            ["a metadata quorum voter does not answer"]
        );
    }

    /// openraft makes a client per replication stream and per leadership
    /// check, and reports each failed request itself (the broker drops
    /// those reports): the transport logs the outage once for all its
    /// clients, and the voter's return.
    #[tokio::test]
    async fn a_voter_that_does_not_answer_is_logged_once_for_all_clients_and_again_when_back() {
        let (messages, _log) = capture_messages();
        let router = MemoryRouter::new();
        let transport = QuorumTransport::memory(&router);
        let timeout = Duration::from_secs(5);
        let command = || QuorumRequest::Command(ControllerCommand::ReadOffset);
        let mut clients = [
            transport.client(route(1, 2), ""),
            transport.client(route(1, 2), ""),
        ];
        for client in &mut clients {
            for _ in 0..3 {
                let err = client.call(command(), timeout).await.unwrap_err();
                assert!(
                    matches!(err, TransportError::Unreachable { target: 2, .. }),
                    "{err}"
                );
            }
        }
        let handler: Arc<dyn QuorumRequestHandler> = Arc::new(CountingHandler::default());
        let _node_2 = QuorumTransport::memory(&router).serve("c", 2, Arc::downgrade(&handler));
        clients[1].call(command(), timeout).await.unwrap();
        clients[0].call(command(), timeout).await.unwrap();
        assert_eq!(
            *messages.lock().unwrap(),
            [
                "a metadata quorum voter does not answer",
                "a metadata quorum voter answers again",
            ]
        );
    }

    #[derive(Default)]
    struct CountingHandler {
        handled: std::sync::atomic::AtomicU64,
    }

    impl CountingHandler {
        fn count(&self) -> u64 {
            self.handled.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    impl QuorumRequestHandler for CountingHandler {
        fn handle(
            self: Arc<Self>,
            _request: QuorumRequest,
        ) -> Pin<Box<dyn Future<Output = QuorumResponse> + Send + 'static>> {
            self.handled
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async {
                QuorumResponse::Command(Err(ControllerError::NotController { leader: None }))
            })
        }
    }

    struct NotControllerHandler;

    impl QuorumRequestHandler for NotControllerHandler {
        fn handle(
            self: Arc<Self>,
            _request: QuorumRequest,
        ) -> Pin<Box<dyn Future<Output = QuorumResponse> + Send + 'static>> {
            Box::pin(async {
                QuorumResponse::Command(Err(ControllerError::NotController { leader: None }))
            })
        }
    }

    struct NeverHandler;

    impl QuorumRequestHandler for NeverHandler {
        fn handle(
            self: Arc<Self>,
            _request: QuorumRequest,
        ) -> Pin<Box<dyn Future<Output = QuorumResponse> + Send + 'static>> {
            Box::pin(std::future::pending())
        }
    }
}
