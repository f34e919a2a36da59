//! One client connection: framing, pipelined request processing with
//! responses in request order, and the writer that interleaves encoded bytes
//! with `sendfile` of log file regions.
//!
//! Ordering: requests are turned into futures in arrival order and kept in a
//! `FuturesOrdered`, so their first polls happen in arrival order on this
//! connection's task. A Produce takes its turn in the connection's
//! `AppendOrder` in that first poll and appends only after the Produce
//! before it, so pipelined Produce requests append in the order sent (as
//! Kafka's one-request-at-a-time channel muting guarantees) even when the
//! validation of compressed batches awaits, while waits (validation, acks=all
//! fsync, Fetch long polls) overlap. Completed responses leave in request
//! order.
//!
//! Bounds (issue 15; `network::NetworkLimits`):
//! - at most [`MAX_IN_FLIGHT_REQUESTS`] requests are processed or waiting
//!   to be written per connection, and a new request is taken only while
//!   the frames of those in flight total less than
//!   `socket.request.max.bytes` (one request is always allowed);
//! - request bytes are counted as they arrive, never reserved from the size
//!   prefix (which is still checked against `socket.request.max.bytes` at
//!   once). Each read first takes budget for the bytes it may read: from
//!   the connection's own [`CONNECTION_REQUEST_BYTES`], else from
//!   `queued.max.request.bytes` (Kafka's non-strict `SimpleMemoryPool`).
//!   Without budget the connection is not read (as Kafka mutes a channel
//!   under memory pressure), not closed. A request holds its bytes until
//!   its handler has answered. One connection at a time with a partly read
//!   request may read past an exhausted pool until that request is
//!   complete (the rescue permit), so that partly read requests cannot wait
//!   for each other. A rescued connection whose bytes stall passes the
//!   permit on but keeps what it read, so a new request is rescued only
//!   while the pool's debt is under one `socket.request.max.bytes`
//!   (`may_start_rescue`); requests already rescued may always finish.
//!   Request bytes in memory are thus at most `queued.max.request.bytes`
//!   plus two `socket.request.max.bytes`, however slowly clients send;
//! - responses are counted from the moment their handler finishes until
//!   they are written: once a connection's unsent bytes reach
//!   `queued.max.response.bytes.per.connection`, or all connections' reach
//!   `queued.max.response.bytes` while this one has some, the connection
//!   is neither read nor are its requests processed until its client reads.
//!   Records sent with `sendfile` are not counted (they are not in memory).
//!
//! Memory held by request bytes may reach about twice the count at worst
//! (the read buffer grows by doubling).
//!
//! Closing: when the client closes its socket (or reading fails) the
//! connection closes at once, as Kafka's selector closes a channel whose
//! read returns -1: its handler futures are dropped (a parked Fetch or
//! JoinGroup is cancelled; Produce appends before its first await and the
//! flush it waits for is not abandoned, see `Partition::wait_durable`;
//! group writes run in their own tasks) and unsent responses are discarded.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::stream::{FuturesOrdered, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest, WriteHalf};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};
use weir_protocol_compat::fetch::FetchChunk;
use weir_protocol_compat::frame::{decode_frame, SIZE_PREFIX_BYTES};

use super::memory_pool::{wait_until, Lease, MemoryPool};
use super::sasl::SaslListener;
use super::{ConnectionInfo, NetworkLimits, CONNECTION_REQUEST_BYTES};
use crate::context::BrokerContext;
use crate::dispatch::{self, Response};
use crate::handlers::fetch::FetchRecords;
use weir_storage::FileSlice;

/// Requests per connection that may be in processing or waiting to be
/// written at once. Clients pipeline up to 5 by default; Kafka itself
/// processes one at a time per connection.
pub const MAX_IN_FLIGHT_REQUESTS: usize = 64;

/// A connection holding the rescue permit (reading past an exhausted
/// `queued.max.request.bytes` to finish its request) gives it up when no
/// byte arrived for this long, so that a client that stops sending midway
/// (a slow-loris) cannot keep every other large request waiting.
const RESCUE_STALL: Duration = Duration::from_millis(250);

/// Whether a connection whose partly read request was never rescued may
/// queue for the rescue permit: while the shared pool's debt (bytes leased
/// past its size, by earlier rescues) is below one `max_frame`. A rescued
/// connection that stalls keeps its bytes when it passes the permit on, so
/// without this rule every slow client in turn would read a whole request
/// past `queued.max.request.bytes` (seen as `hostile::memory` reading all
/// 20 half-sent requests once the machine was loaded). Requests already
/// rescued always may queue again, so they can finish and pay the debt back.
fn may_start_rescue(shared_available: i64, max_frame: usize) -> bool {
    shared_available.saturating_neg() < i64::try_from(max_frame).unwrap_or(i64::MAX)
}

/// Longest a connection holds the rescue permit at a time, however its
/// bytes trickle in; it keeps what it read and queues for the permit again
/// (the semaphore is fair), so the wait of any other request for it is
/// bounded by this times the connections ahead of it.
const RESCUE_MAX_HOLD: Duration = Duration::from_secs(1);

/// The idle timeout standing for "never" (`connections.max.idle.ms=-1`).
const NEVER_IDLE: Duration = Duration::from_secs(30 * 365 * 86_400);

/// Most bytes read from the socket at once.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Request bytes held by a connection: from its own allowance and from
/// `queued.max.request.bytes`.
#[derive(Debug, Default)]
struct RequestBytes {
    own: Lease,
    shared: Lease,
}

impl RequestBytes {
    fn bytes(&self) -> usize {
        self.own.bytes() + self.shared.bytes()
    }

    /// Splits off `bytes` (shared bytes first, so they go back sooner).
    fn split(&mut self, bytes: usize) -> RequestBytes {
        let shared = self.shared.split(bytes);
        let own = self.own.split(bytes - shared.bytes());
        RequestBytes { own, shared }
    }

    fn merge(&mut self, other: RequestBytes) {
        self.own.merge(other.own);
        self.shared.merge(other.shared);
    }

    /// Gives back all but `keep` bytes (shared bytes first).
    fn shrink_to(&mut self, keep: usize) {
        let own = self.own.bytes();
        self.shared.shrink_to(keep.saturating_sub(own));
        self.own.shrink_to(keep);
    }
}

/// Unsent response bytes, counted per connection and in all.
#[derive(Debug)]
struct ResponseBytes {
    _connection: Lease,
    _all: Lease,
}

/// Bytes of `response` held in memory (not file regions).
fn response_bytes(response: &Response) -> usize {
    match response {
        Response::Frame(bytes) | Response::FrameThenClose(bytes, _) => bytes.len(),
        Response::Fetch(chunks) => chunks
            .iter()
            .map(|c| match c {
                FetchChunk::Bytes(b) => b.len(),
                FetchChunk::Records(_) => 0,
            })
            .sum(),
        Response::None | Response::Close(_) => 0,
    }
}

/// Budget for reading up to `want` bytes: from the connection's own
/// allowance while it lasts, then from the shared pool (forced while this
/// connection holds the rescue permit). `None` when there is none.
fn take_budget(
    own: &Arc<MemoryPool>,
    shared: &Arc<MemoryPool>,
    want: usize,
    rescued: bool,
) -> Option<RequestBytes> {
    let own_free = own.available().max(0) as usize;
    if own_free > 0 {
        return own
            .try_allocate_strict(want.min(own_free))
            .map(|own| RequestBytes {
                own,
                shared: Lease::default(),
            });
    }
    let shared = if rescued {
        Some(shared.allocate_forced(want))
    } else {
        shared.try_allocate(want)
    };
    shared.map(|shared| RequestBytes {
        own: Lease::default(),
        shared,
    })
}

/// What a connection short of request budget waits for besides budget.
#[derive(Clone, Copy)]
enum RescueWait<'a> {
    /// Nothing else: it has no partly read request.
    Budget,
    /// The rescue permit, for its partly read request.
    Permit(&'a Arc<Semaphore>),
    /// The shared pool's debt to fall under one `max_frame`, after which it
    /// may queue for the permit (`may_start_rescue`). Without this wake-up
    /// a connection muted by the debt rule slept until the pool had budget
    /// again, which the muted connections' own chunks could prevent for
    /// ever.
    AfterDebt { max_frame: usize },
}

/// Waits until request budget may be available again, or as `rescue` says;
/// returns the rescue permit when it got it.
async fn wait_for_budget(
    own: &MemoryPool,
    shared: &MemoryPool,
    rescue: RescueWait<'_>,
) -> Option<OwnedSemaphorePermit> {
    let freed = wait_until([own, shared], || {
        own.available() > 0
            || shared.available() > 0
            || matches!(rescue, RescueWait::AfterDebt { max_frame }
                if may_start_rescue(shared.available(), max_frame))
    });
    match rescue {
        RescueWait::Budget | RescueWait::AfterDebt { .. } => {
            freed.await;
            None
        }
        RescueWait::Permit(semaphore) => tokio::select! {
            _ = freed => None,
            permit = semaphore.clone().acquire_owned() => permit.ok(),
        },
    }
}

/// Bytes the next read should ask for: what the request at the front of
/// `buf` still misses, at most [`READ_CHUNK_BYTES`].
fn next_read_bytes(buf: &BytesMut) -> usize {
    match buf.get(..SIZE_PREFIX_BYTES) {
        Some(prefix) => {
            let size = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
            let total = SIZE_PREFIX_BYTES + size.max(0) as usize;
            total.saturating_sub(buf.len()).clamp(1, READ_CHUNK_BYTES)
        }
        None => READ_CHUNK_BYTES,
    }
}

/// How long a connection may idle: `connections.max.idle.ms`, where -1
/// (never, as Kafka) is a timer 30 years out (timer arithmetic must not
/// overflow).
fn idle_timeout(ctx: &BrokerContext) -> Duration {
    u64::try_from(ctx.config.connections_max_idle_ms).map_or(NEVER_IDLE, Duration::from_millis)
}

/// Serves one accepted connection until the client closes it, it idles past
/// `connections.max.idle.ms`, a protocol error closes it, or `shutdown` is
/// cancelled. With `tls` (an SSL or SASL_SSL listener) the TLS handshake
/// comes first, bounded by `connections.max.idle.ms`; a failed handshake
/// closes the connection with a logged reason, as Kafka's "Failed
/// authentication with <peer> (SSL handshake failed)". With `sasl` (a
/// SASL_PLAINTEXT or SASL_SSL listener) the SASL exchange comes next
/// (`network::sasl::authenticate`) and gives the connection its principal.
pub async fn run(
    stream: TcpStream,
    tls: Option<super::tls::TlsListener>,
    sasl: Option<Arc<SaslListener>>,
    info: Arc<ConnectionInfo>,
    ctx: Arc<BrokerContext>,
    limits: Arc<NetworkLimits>,
    shutdown: CancellationToken,
) {
    let peer = info.peer;
    if let Err(e) = stream.set_nodelay(true) {
        debug!(%peer, error = %e, "set_nodelay failed");
    }
    metrics::gauge!("weir_connections").increment(1.0);
    metrics::counter!("weir_connections_accepted_total").increment(1);
    let sasl = sasl.as_ref();
    match tls {
        None => {
            let mut stream = stream;
            if let Some(info) = authenticated(&mut stream, sasl, info, &ctx, &shutdown).await {
                let (reader, writer) = stream.into_split();
                let writer = ConnectionWriter::Plain(writer);
                serve(reader, writer, info, ctx, limits, shutdown).await;
            }
        }
        Some(tls) => {
            let handshake = tokio::select! {
                _ = shutdown.cancelled() => None,
                done = tokio::time::timeout(idle_timeout(&ctx), tls.acceptor().accept(stream)) => Some(done),
            };
            match handshake {
                None => {}
                Some(Ok(Ok(mut stream))) => match certificate_principal(&stream, &tls, info) {
                    None => {
                        metrics::counter!("weir_connections_closed_total", "reason" => "ssl_principal")
                                .increment(1);
                    }
                    Some(info) => {
                        if let Some(info) =
                            authenticated(&mut stream, sasl, info, &ctx, &shutdown).await
                        {
                            let (reader, writer) = tokio::io::split(stream);
                            let writer = ConnectionWriter::Tls(Box::new(writer));
                            serve(reader, writer, info, ctx, limits, shutdown).await;
                        }
                    }
                },
                Some(Ok(Err(e))) => {
                    info!(%peer, listener = %info.listener, error = %e,
                        "Failed authentication with {peer} (SSL handshake failed)");
                    metrics::counter!("weir_connections_closed_total", "reason" => "tls_handshake")
                        .increment(1);
                }
                Some(Err(_)) => {
                    info!(%peer, listener = %info.listener,
                        "closing connection: no TLS handshake within connections.max.idle.ms");
                    metrics::counter!("weir_connections_closed_total", "reason" => "tls_handshake")
                        .increment(1);
                }
            }
        }
    }
    metrics::gauge!("weir_connections").decrement(1.0);
}

/// `user`'s SCRAM credential for `mechanism` in the broker's current
/// metadata image.
pub(crate) fn scram_credential(
    ctx: &BrokerContext,
    user: &str,
    mechanism: weir_controller::ScramMechanism,
) -> Option<weir_controller::ScramCredential> {
    ctx.metadata()
        .scram_credentials
        .get(user)?
        .get(&mechanism)
        .cloned()
}

/// On an SSL listener, `info` with the principal of the client's
/// certificate (its subject mapped by `ssl.principal.mapping.rules`;
/// `User:ANONYMOUS` without a certificate), as Kafka's
/// `DefaultKafkaPrincipalBuilder`; `info` itself on SASL_SSL, where SASL
/// names the principal. `None` (logged) when the certificate does not
/// parse or no rule applies: the connection closes, as Kafka fails it.
pub(crate) fn certificate_principal(
    stream: &TlsStream<TcpStream>,
    tls: &super::tls::TlsListener,
    info: Arc<ConnectionInfo>,
) -> Option<Arc<ConnectionInfo>> {
    if info.security_protocol != crate::config::SecurityProtocol::Ssl {
        return Some(info);
    }
    let Some(certificate) = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(<[_]>::first)
    else {
        return Some(info);
    };
    let mapped = super::principal::subject_dn(certificate).and_then(|dn| {
        tls.principal_mapper.name(&dn).map_err(|e| {
            format!("Failed to map name for '{dn}' based on SSL principal mapping rules: {e}")
        })
    });
    match mapped {
        Ok(name) => {
            debug!(peer = %info.peer, listener = %info.listener, principal = %name, "TLS client");
            let mut info = (*info).clone();
            info.principal = format!("User:{name}").into();
            Some(Arc::new(info))
        }
        Err(reason) => {
            info!(peer = %info.peer, listener = %info.listener, %reason, "closing connection");
            None
        }
    }
}

/// The connection's `info` with the principal its SASL exchange gave it
/// (`info` itself without `sasl`); `None` when the connection must close
/// (the reason is logged).
async fn authenticated<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    sasl: Option<&Arc<SaslListener>>,
    info: Arc<ConnectionInfo>,
    ctx: &BrokerContext,
    shutdown: &CancellationToken,
) -> Option<Arc<ConnectionInfo>> {
    let Some(sasl) = sasl else {
        return Some(info);
    };
    let peer = info.peer;
    let credentials = |user: &str, mechanism| scram_credential(ctx, user, mechanism);
    let exchange = super::sasl::authenticate(stream, sasl, &credentials, peer, idle_timeout(ctx));
    let outcome = tokio::select! {
        _ = shutdown.cancelled() => Err("broker shutting down".to_string()),
        outcome = exchange => outcome,
    };
    match outcome {
        Ok(session) => {
            debug!(%peer, listener = %info.listener, principal = session.principal(), "authenticated");
            let mut info = (*info).clone();
            info.principal = session.principal().into();
            info.session = Some(session);
            Some(Arc::new(info))
        }
        Err(reason) => {
            info!(%peer, listener = %info.listener, %reason, "closing connection before authentication");
            metrics::counter!("weir_connections_closed_total", "reason" => "sasl").increment(1);
            None
        }
    }
}

/// Serves the requests of a connection (after its TLS handshake and SASL
/// exchange, if any).
async fn serve(
    mut reader: impl AsyncRead + Unpin,
    writer: ConnectionWriter,
    info: Arc<ConnectionInfo>,
    ctx: Arc<BrokerContext>,
    limits: Arc<NetworkLimits>,
    shutdown: CancellationToken,
) {
    let peer = info.peer;
    let (tx, rx) = mpsc::channel::<(Response, ResponseBytes)>(MAX_IN_FLIGHT_REQUESTS);
    let writer_task = tokio::spawn(write_loop(writer, rx, peer));

    let max_frame = ctx.config.socket_request_max_bytes;
    let idle = idle_timeout(&ctx);
    let own_requests = MemoryPool::new(CONNECTION_REQUEST_BYTES);
    let unsent = MemoryPool::new(limits.response_bytes_per_connection);
    let mut buf = BytesMut::new();
    // The bytes in `buf`.
    let mut buffered = RequestBytes::default();
    let mut rescue: Option<OwnedSemaphorePermit> = None;
    // The request being read was rescued at least once: it may always be
    // rescued again (see `may_start_rescue`).
    let mut rescued_request = false;
    // When the rescue was taken, and when the rescued connection last read.
    let mut rescued_at = tokio::time::Instant::now();
    let mut last_rescued_read = rescued_at;
    let mut pending = FuturesOrdered::new();
    let append_order = Arc::new(crate::handlers::produce::AppendOrder::default());
    // The bytes of the requests in `pending`, in the same order.
    let mut in_flight: VecDeque<RequestBytes> = VecDeque::new();
    let mut in_flight_bytes = 0usize;
    let may_take = |pending: usize, bytes: usize| {
        pending == 0 || (pending < MAX_IN_FLIGHT_REQUESTS && bytes < max_frame)
    };
    // One timer per connection, pushed back on every read and response.
    let idle_timer = tokio::time::sleep(idle);
    tokio::pin!(idle_timer);
    let bytes_in = metrics::counter!("weir_network_bytes_in_total");
    let reason: &str = loop {
        // A client over its quota is not read until its throttle time
        // ends (KIP-219's channel muting, `crate::client_quotas`).
        let muted_until = info.muted.until();
        while muted_until.is_none() && may_take(pending.len(), in_flight_bytes) {
            match decode_frame(&mut buf, max_frame) {
                Ok(Some(frame)) => {
                    // An expired SASL session may only re-authenticate
                    // (KIP-368; Kafka's "Disconnecting expired channel").
                    if let Some(session) = info.session.as_ref().filter(|s| s.expires()) {
                        let api_key = frame
                            .get(..2)
                            .map_or(-1, |k| i16::from_be_bytes([k[0], k[1]]));
                        if !session.admits(api_key, std::time::Instant::now()) {
                            info!(%peer, principal = session.principal(),
                                "closing connection: the SASL session expired (connections.max.reauth.ms) without re-authentication");
                            metrics::counter!("weir_connections_closed_total", "reason" => "session_expired")
                                .increment(1);
                            drop(tx);
                            let _ = writer_task.await;
                            return;
                        }
                    }
                    let bytes = buffered.split(SIZE_PREFIX_BYTES + frame.len());
                    in_flight_bytes += bytes.bytes();
                    in_flight.push_back(bytes);
                    // A complete request: the rescue has done its work.
                    rescue = None;
                    rescued_request = false;
                    pending.push_back(dispatch::handle_frame(
                        ctx.clone(),
                        frame.freeze(),
                        info.clone(),
                        append_order.clone(),
                    ));
                }
                Ok(None) => break,
                Err(e) => {
                    warn!(%peer, error = %e, "closing connection: bad frame");
                    metrics::counter!("weir_connections_closed_total", "reason" => "bad_frame")
                        .increment(1);
                    drop(tx);
                    let _ = writer_task.await;
                    return;
                }
            }
        }
        // A connection whose client does not read its responses is neither
        // read nor processed.
        let flows =
            || unsent.available() > 0 && (limits.responses.available() > 0 || unsent.used() == 0);
        let responses_flow = flows();
        let wants_read =
            responses_flow && muted_until.is_none() && may_take(pending.len(), in_flight_bytes);
        let mut budget = if wants_read {
            take_budget(
                &own_requests,
                &limits.requests,
                next_read_bytes(&buf),
                rescue.is_some(),
            )
        } else {
            None
        };
        let read_limit = budget.as_ref().map_or(0, RequestBytes::bytes);
        if read_limit > 0 {
            buf.reserve(read_limit);
        }
        let starved = wants_read && budget.is_none();
        // Only a connection with a partly read request needs rescuing; a
        // new one only while earlier rescues' debt is bounded.
        let may_rescue = if !starved || buf.is_empty() {
            RescueWait::Budget
        } else if rescued_request || may_start_rescue(limits.requests.available(), max_frame) {
            RescueWait::Permit(&limits.rescue)
        } else {
            RescueWait::AfterDebt { max_frame }
        };
        let mut into = (&mut buf).limit(read_limit);
        tokio::select! {
            _ = shutdown.cancelled() => break "broker shutting down",
            // Responses are taken only while the writer's channel has room,
            // so this loop never awaits a send: a client that does not read
            // must not stop the loop from polling its other requests, the
            // idle timer or shutdown (issue 15 review).
            Some(response) = pending.next(), if !pending.is_empty() && responses_flow && tx.capacity() > 0 => {
                let done = in_flight.pop_front().unwrap_or_default();
                in_flight_bytes -= done.bytes();
                drop(done);
                idle_timer.as_mut().reset(tokio::time::Instant::now() + idle);
                let close = matches!(response, Response::Close(_) | Response::FrameThenClose(..));
                let n = response_bytes(&response);
                let counted = ResponseBytes {
                    _connection: unsent.allocate_forced(n),
                    _all: limits.responses.allocate_forced(n),
                };
                // Room was checked above and this loop is the only sender.
                if tx.try_send((response, counted)).is_err() || close {
                    break "closed by a response";
                }
            }
            // The writer is behind by a whole channel: wait for room.
            room = tx.reserve(), if !pending.is_empty() && tx.capacity() == 0 => {
                if room.is_err() {
                    break "closed by a response";
                }
            }
            read = reader.read_buf(&mut into), if read_limit > 0 => match read {
                Ok(0) => break "client closed",
                Ok(n) => {
                    if let Some(mut got) = budget.take() {
                        got.shrink_to(n);
                        buffered.merge(got);
                    }
                    bytes_in.increment(n as u64);
                    last_rescued_read = tokio::time::Instant::now();
                    idle_timer.as_mut().reset(last_rescued_read + idle);
                }
                Err(e) => {
                    debug!(%peer, error = %e, "read failed");
                    break "read error";
                }
            },
            permit = wait_for_budget(&own_requests, &limits.requests, may_rescue), if starved => {
                // The debt is checked again when the permit comes: it may
                // have grown while this connection queued for it. A permit
                // it may not use is passed on at once.
                let usable = rescued_request
                    || may_start_rescue(limits.requests.available(), max_frame);
                if let Some(permit) = permit.filter(|_| usable) {
                    debug!(%peer, "reading past queued.max.request.bytes to finish a request");
                    rescue = Some(permit);
                    rescued_request = true;
                    rescued_at = tokio::time::Instant::now();
                    last_rescued_read = rescued_at;
                }
            }
            _ = tokio::time::sleep_until((last_rescued_read + RESCUE_STALL).min(rescued_at + RESCUE_MAX_HOLD)), if rescue.is_some() => {
                debug!(%peer, "giving up the rescue permit: the request's bytes stalled or it held it too long");
                rescue = None;
            }
            _ = wait_until([&unsent, &limits.responses], flows), if !responses_flow => {}
            _ = tokio::time::sleep_until(muted_until.unwrap_or_else(tokio::time::Instant::now)), if muted_until.is_some() => {}
            _ = &mut idle_timer, if pending.is_empty() || !responses_flow || tx.capacity() == 0 => {
                info!(%peer, idle_ms = idle.as_millis() as u64, "closing idle connection (connections.max.idle.ms)");
                break "idle";
            }
        }
    };
    debug!(%peer, reason, "connection closing");
    // Cancels handlers still running (a parked Fetch) and frees their bytes.
    drop(pending);
    drop(tx);
    if matches!(reason, "client closed" | "read error") {
        // Nobody reads what is left to write (Kafka closes the channel).
        writer_task.abort();
    }
    let _ = writer_task.await;
}

/// The write side of a connection. Plain TCP sends record regions with
/// `sendfile`; TLS reads them into memory and encrypts them in user space
/// (Kafka's `SslTransportLayer.transferFrom` does the same; kernel TLS,
/// which would keep `sendfile`, is not used yet).
enum ConnectionWriter {
    Plain(OwnedWriteHalf),
    Tls(Box<WriteHalf<TlsStream<TcpStream>>>),
}

impl ConnectionWriter {
    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            ConnectionWriter::Plain(w) => w.write_all(bytes).await,
            ConnectionWriter::Tls(w) => w.write_all(bytes).await,
        }
    }

    /// Pushes out what TLS buffered (nothing to do on plain TCP).
    async fn flush(&mut self) -> std::io::Result<()> {
        match self {
            ConnectionWriter::Plain(_) => Ok(()),
            ConnectionWriter::Tls(w) => w.flush().await,
        }
    }

    async fn shutdown(&mut self) -> std::io::Result<()> {
        match self {
            ConnectionWriter::Plain(w) => w.shutdown().await,
            ConnectionWriter::Tls(w) => w.shutdown().await,
        }
    }
}

/// Bytes of a record region read into memory at a time on a TLS
/// connection (each read is one `pread` on a blocking thread, so a read
/// that misses the page cache stalls no runtime worker).
const TLS_RECORD_READ_BYTES: usize = 256 * 1024;

impl FetchSink for ConnectionWriter {
    async fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        match self {
            ConnectionWriter::Plain(w) => AsyncWriteExt::write_vectored(w, bufs).await,
            ConnectionWriter::Tls(w) => AsyncWriteExt::write_vectored(w, bufs).await,
        }
    }

    async fn send_file(&mut self, slice: &FileSlice) -> std::io::Result<()> {
        match self {
            ConnectionWriter::Plain(w) => send_file_region(w.as_ref(), slice).await,
            ConnectionWriter::Tls(w) => {
                let mut start = 0;
                while start < slice.len() {
                    let len = TLS_RECORD_READ_BYTES.min(slice.len() - start);
                    let region = slice.clone();
                    let bytes = tokio::task::spawn_blocking(move || region.read_range(start, len))
                        .await
                        .map_err(std::io::Error::other)??;
                    w.write_all(&bytes).await?;
                    start += len;
                }
                Ok(())
            }
        }
    }
}

/// Writes responses in order until the channel closes or a write fails;
/// each response's bytes are counted until it is written.
async fn write_loop(
    mut writer: ConnectionWriter,
    mut rx: mpsc::Receiver<(Response, ResponseBytes)>,
    peer: SocketAddr,
) {
    let bytes_out = metrics::counter!("weir_network_bytes_out_total");
    // The count of each response is given back once it is written.
    while let Some((response, _counted)) = rx.recv().await {
        let result = match response {
            Response::None => Ok(()),
            Response::Frame(bytes) => {
                bytes_out.increment(bytes.len() as u64);
                writer.write_all(&bytes).await
            }
            Response::Fetch(chunks) => write_fetch(&mut writer, chunks, &bytes_out).await,
            Response::Close(reason) => {
                warn!(%peer, %reason, "closing connection");
                let _ = writer.shutdown().await;
                return;
            }
            Response::FrameThenClose(bytes, reason) => {
                bytes_out.increment(bytes.len() as u64);
                let _ = writer.write_all(&bytes).await;
                info!(%peer, %reason, "closing connection");
                let _ = writer.shutdown().await;
                return;
            }
        };
        // TLS: records are pushed out once no further response is queued,
        // so pipelined responses share TLS records and socket writes.
        let result = match result {
            Ok(()) if rx.is_empty() => writer.flush().await,
            other => other,
        };
        if let Err(e) = result {
            debug!(%peer, error = %e, "write failed; closing");
            return;
        }
    }
    let _ = writer.shutdown().await;
}

/// Most buffers passed to one `writev` (Linux `IOV_MAX`); a gap of more
/// protocol chunks than this is copied into one buffer first.
const IOV_MAX: usize = 1024;

/// Where a Fetch response is written: vectored writes of protocol bytes and
/// `sendfile` of record regions (a seam: the tests count the calls).
trait FetchSink {
    /// One vectored write (one `writev(2)` on a socket) of a prefix of
    /// `bufs`, waiting for writability; returns the bytes written.
    async fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize>;

    /// Sends the whole region with `sendfile(2)`.
    async fn send_file(&mut self, slice: &FileSlice) -> std::io::Result<()>;
}

/// Writes a Fetch response: the protocol bytes between two record regions
/// (the response header, then each partition's fields and length prefixes)
/// with one vectored write per gap, however many partitions it spans, and
/// each record region with `sendfile` straight from the segment file
/// (zero-copy). A partition without records adds no syscall.
async fn write_fetch(
    sink: &mut impl FetchSink,
    chunks: Vec<FetchChunk<FetchRecords>>,
    bytes_out: &metrics::Counter,
) -> std::io::Result<()> {
    let mut gap: Vec<Bytes> = Vec::new();
    for chunk in chunks {
        match chunk {
            FetchChunk::Bytes(bytes) => {
                if !bytes.is_empty() {
                    gap.push(bytes);
                }
            }
            FetchChunk::Records(FetchRecords::File(slice)) if !slice.is_empty() => {
                write_gap(sink, &mut gap, bytes_out).await?;
                sink.send_file(&slice).await?;
                bytes_out.increment(slice.len() as u64);
            }
            FetchChunk::Records(FetchRecords::File(_) | FetchRecords::Empty) => {}
        }
    }
    write_gap(sink, &mut gap, bytes_out).await
}

/// Writes and empties `gap` with vectored writes: one unless the socket
/// takes only part of it. More than [`IOV_MAX`] buffers are first copied
/// into one (protocol bytes only, a few dozen per partition).
async fn write_gap(
    sink: &mut impl FetchSink,
    gap: &mut Vec<Bytes>,
    bytes_out: &metrics::Counter,
) -> std::io::Result<()> {
    if gap.is_empty() {
        return Ok(());
    }
    if gap.len() > IOV_MAX {
        let mut joined = BytesMut::with_capacity(gap.iter().map(Bytes::len).sum());
        for bytes in gap.drain(..) {
            joined.extend_from_slice(&bytes);
        }
        gap.push(joined.freeze());
    }
    let total: usize = gap.iter().map(Bytes::len).sum();
    let mut slices: Vec<IoSlice<'_>> = gap.iter().map(|b| IoSlice::new(b)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let n = sink.write_vectored(rest).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut rest, n);
    }
    bytes_out.increment(total as u64);
    drop(slices);
    gap.clear();
    Ok(())
}

/// Sends a whole file region with `sendfile`, waiting for writability when
/// the socket buffer is full.
///
/// # Errors
/// Socket errors, or `UnexpectedEof` if the file is shorter than the region
/// (the response would otherwise be corrupt, so the connection closes).
async fn send_file_region(stream: &TcpStream, slice: &FileSlice) -> std::io::Result<()> {
    let mut sent = 0;
    while sent < slice.len() {
        stream.writable().await?;
        match stream.try_io(Interest::WRITABLE, || slice.send_to(stream.as_fd(), sent)) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "segment file shorter than the fetched region",
                ))
            }
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_use_the_connections_own_bytes_first_then_the_shared_pool() {
        let own = MemoryPool::new(CONNECTION_REQUEST_BYTES);
        let shared = MemoryPool::new(100_000);
        // The connection's own allowance first, at most what is left of it.
        let mut held = take_budget(&own, &shared, READ_CHUNK_BYTES, false).unwrap();
        assert_eq!(held.bytes(), CONNECTION_REQUEST_BYTES as usize);
        assert_eq!(shared.used(), 0);
        // Then the shared pool, non-strict: granted while any is left.
        held.merge(take_budget(&own, &shared, 60_000, false).unwrap());
        held.merge(take_budget(&own, &shared, 60_000, false).unwrap());
        assert_eq!(shared.available(), -20_000);
        assert!(take_budget(&own, &shared, 1, false).is_none(), "muted");
        // The rescued connection reads past the exhausted pool.
        held.merge(take_budget(&own, &shared, 1_000, true).unwrap());
        assert_eq!(shared.used(), 121_000);
        // A frame takes shared bytes first; what is left goes back on drop.
        let frame = held.split(130_000);
        assert_eq!(frame.shared.bytes(), 121_000);
        assert_eq!(
            held.bytes(),
            CONNECTION_REQUEST_BYTES as usize + 121_000 - 130_000
        );
        drop(frame);
        assert_eq!(shared.used(), 0);
        held.shrink_to(0);
        assert_eq!(own.used(), 0);
    }

    #[test]
    fn a_new_request_is_rescued_only_while_the_debt_is_under_one_frame() {
        assert!(may_start_rescue(1_000, 1_048_576), "budget left");
        assert!(may_start_rescue(0, 1_048_576));
        assert!(may_start_rescue(-1_048_575, 1_048_576));
        assert!(!may_start_rescue(-1_048_576, 1_048_576), "a frame of debt");
        assert!(!may_start_rescue(i64::MIN, 1_048_576));
    }

    /// CI failure (stop 22): connections muted by the debt rule waited only
    /// for the pool to have budget again; once earlier rescues were paid
    /// back to a debt under one frame but the pool was still exhausted by
    /// the muted connections' own chunks, nothing woke them to queue for
    /// the rescue permit, and every half-read request waited for ever.
    #[test]
    fn a_connection_muted_by_debt_wakes_when_the_debt_falls_under_one_frame() {
        use futures::FutureExt;
        let own = MemoryPool::new(0);
        let shared = MemoryPool::new(65_536);
        let max_frame = 1_048_576;
        let muted_chunks = shared.allocate_forced(65_536);
        let rescued = shared.allocate_forced(max_frame);
        assert!(!may_start_rescue(shared.available(), max_frame));
        let mut wait = Box::pin(wait_for_budget(
            &own,
            &shared,
            RescueWait::AfterDebt { max_frame },
        ));
        assert!(
            (&mut wait).now_or_never().is_none(),
            "no budget, debt too high"
        );
        drop(rescued);
        assert_eq!(shared.available(), 0, "still exhausted");
        assert!(
            (&mut wait).now_or_never().is_some(),
            "the debt is under one frame: it may queue for the rescue now"
        );
        drop(muted_chunks);
    }

    #[test]
    fn the_next_read_asks_for_what_the_front_request_misses() {
        let mut buf = BytesMut::new();
        assert_eq!(next_read_bytes(&buf), READ_CHUNK_BYTES);
        buf.extend_from_slice(&10i32.to_be_bytes());
        buf.extend_from_slice(&[0; 3]);
        assert_eq!(next_read_bytes(&buf), 7);
        let mut big = BytesMut::new();
        big.extend_from_slice(&(100i32 << 20).to_be_bytes());
        assert_eq!(
            next_read_bytes(&big),
            READ_CHUNK_BYTES,
            "never more than a chunk"
        );
    }

    /// A [`FetchSink`] that takes at most `max_per_write` bytes per
    /// vectored write and records every call.
    struct RecordingSink {
        max_per_write: usize,
        written: Vec<u8>,
        writes: usize,
        files: usize,
    }

    impl FetchSink for RecordingSink {
        async fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
            self.writes += 1;
            let mut n = 0;
            for buf in bufs {
                let take = buf.len().min(self.max_per_write - n);
                self.written.extend_from_slice(&buf[..take]);
                n += take;
                if n == self.max_per_write {
                    break;
                }
            }
            Ok(n)
        }

        async fn send_file(&mut self, _slice: &FileSlice) -> std::io::Result<()> {
            self.files += 1;
            Ok(())
        }
    }

    /// Issue 18 scope 4: a Fetch answer over many partitions without
    /// records is one vectored write, not a write per partition, and a
    /// socket that takes part of it gets the rest in order.
    #[test]
    fn a_fetch_of_empty_partitions_is_one_vectored_write() {
        use futures::FutureExt;
        let mut expected = Vec::new();
        for partition in 0u8..200 {
            expected.extend(std::iter::repeat_n(
                partition,
                1 + usize::from(partition % 7),
            ));
        }
        let chunks = || {
            (0u8..200)
                .flat_map(|partition| {
                    let fields = vec![partition; 1 + usize::from(partition % 7)];
                    [
                        FetchChunk::Bytes(bytes::Bytes::from(fields)),
                        FetchChunk::Records(FetchRecords::Empty),
                    ]
                })
                .collect::<Vec<_>>()
        };
        let bytes_out = metrics::Counter::noop();
        let mut sink = RecordingSink {
            max_per_write: usize::MAX,
            written: Vec::new(),
            writes: 0,
            files: 0,
        };
        write_fetch(&mut sink, chunks(), &bytes_out)
            .now_or_never()
            .expect("the sink never waits")
            .unwrap();
        assert_eq!((sink.writes, sink.files), (1, 0));
        assert_eq!(sink.written, expected);

        let mut partial = RecordingSink {
            max_per_write: 100,
            written: Vec::new(),
            writes: 0,
            files: 0,
        };
        write_fetch(&mut partial, chunks(), &bytes_out)
            .now_or_never()
            .expect("the sink never waits")
            .unwrap();
        assert_eq!(partial.written, expected);
        assert_eq!(partial.writes, expected.len().div_ceil(100));
    }

    #[test]
    fn only_bytes_in_memory_count_as_unsent() {
        assert_eq!(
            response_bytes(&Response::Frame(BytesMut::from(&[0u8; 10][..]))),
            10
        );
        assert_eq!(response_bytes(&Response::None), 0);
        let fetch = Response::Fetch(vec![
            FetchChunk::Bytes(bytes::Bytes::from_static(&[0; 7])),
            FetchChunk::Records(FetchRecords::Empty),
        ]);
        assert_eq!(response_bytes(&fetch), 7);
    }
}
