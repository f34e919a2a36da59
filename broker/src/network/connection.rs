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
//! Bounds: at most [`MAX_IN_FLIGHT_REQUESTS`] requests are processed or
//! waiting to be written per connection, and a new request is taken only
//! while the frames of those in flight total less than
//! `socket.request.max.bytes` (one request is always allowed). Reading
//! pauses otherwise, so a connection holds at most about two maximum-size
//! frames of request memory; TCP back-pressure stops the client.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use futures::stream::{FuturesOrdered, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};
use weir_protocol_compat::fetch::FetchChunk;
use weir_protocol_compat::frame::decode_frame;

use crate::context::BrokerContext;
use crate::dispatch::{self, Response};
use crate::handlers::fetch::FetchRecords;
use weir_storage::FileSlice;

/// Requests per connection that may be in processing or waiting to be
/// written at once. Clients pipeline up to 5 by default; Kafka itself
/// processes one at a time per connection.
pub const MAX_IN_FLIGHT_REQUESTS: usize = 64;

/// Initial read buffer capacity, bytes.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Serves one accepted connection until the client closes it, it idles past
/// `connections.max.idle.ms`, a protocol error closes it, or `shutdown` is
/// cancelled.
pub async fn run(
    stream: TcpStream,
    peer: SocketAddr,
    ctx: Arc<BrokerContext>,
    shutdown: CancellationToken,
) {
    if let Err(e) = stream.set_nodelay(true) {
        debug!(%peer, error = %e, "set_nodelay failed");
    }
    metrics::gauge!("weir_connections").increment(1.0);
    metrics::counter!("weir_connections_accepted_total").increment(1);
    let (mut reader, writer) = stream.into_split();
    let (tx, rx) = mpsc::channel::<Response>(MAX_IN_FLIGHT_REQUESTS);
    let writer_task = tokio::spawn(write_loop(writer, rx, peer));

    let max_frame = ctx.config.socket_request_max_bytes;
    let idle = Duration::from_millis(ctx.config.connections_max_idle_ms);
    let mut buf = BytesMut::with_capacity(READ_BUFFER_BYTES);
    let mut pending = FuturesOrdered::new();
    let append_order = Arc::new(crate::handlers::produce::AppendOrder::default());
    // Frame sizes of the requests in `pending`, in the same order.
    let mut in_flight_sizes: VecDeque<usize> = VecDeque::new();
    let mut in_flight_bytes = 0usize;
    let mut eof = false;
    let may_take = |pending: usize, bytes: usize| {
        pending == 0 || (pending < MAX_IN_FLIGHT_REQUESTS && bytes < max_frame)
    };
    // One timer per connection, pushed back on every read and response.
    let idle_timer = tokio::time::sleep(idle);
    tokio::pin!(idle_timer);
    let bytes_in = metrics::counter!("weir_network_bytes_in_total");
    let reason: &str = loop {
        while may_take(pending.len(), in_flight_bytes) {
            match decode_frame(&mut buf, max_frame) {
                Ok(Some(frame)) => {
                    in_flight_bytes += frame.len();
                    in_flight_sizes.push_back(frame.len());
                    pending.push_back(dispatch::handle_frame(
                        ctx.clone(),
                        frame.freeze(),
                        peer,
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
                    metrics::gauge!("weir_connections").decrement(1.0);
                    return;
                }
            }
        }
        if eof && pending.is_empty() {
            break "client closed";
        }
        let can_read = !eof && may_take(pending.len(), in_flight_bytes);
        tokio::select! {
            _ = shutdown.cancelled() => break "broker shutting down",
            Some(response) = pending.next(), if !pending.is_empty() => {
                in_flight_bytes -= in_flight_sizes.pop_front().unwrap_or(0);
                idle_timer.as_mut().reset(tokio::time::Instant::now() + idle);
                let close = matches!(response, Response::Close(_));
                if tx.send(response).await.is_err() || close {
                    break "closed by a response";
                }
            }
            read = reader.read_buf(&mut buf), if can_read => match read {
                Ok(0) => eof = true,
                Ok(n) => {
                    bytes_in.increment(n as u64);
                    idle_timer.as_mut().reset(tokio::time::Instant::now() + idle);
                }
                Err(e) => {
                    debug!(%peer, error = %e, "read failed");
                    break "read error";
                }
            },
            _ = &mut idle_timer, if pending.is_empty() && !eof => {
                info!(%peer, idle_ms = idle.as_millis() as u64, "closing idle connection (connections.max.idle.ms)");
                break "idle";
            }
        }
    };
    debug!(%peer, reason, "connection closing");
    drop(tx);
    let _ = writer_task.await;
    metrics::gauge!("weir_connections").decrement(1.0);
}

/// Writes responses in order until the channel closes or a write fails.
async fn write_loop(
    mut writer: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Response>,
    peer: SocketAddr,
) {
    let bytes_out = metrics::counter!("weir_network_bytes_out_total");
    while let Some(response) = rx.recv().await {
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
        };
        if let Err(e) = result {
            debug!(%peer, error = %e, "write failed; closing");
            return;
        }
    }
    let _ = writer.shutdown().await;
}

/// Writes a Fetch response: byte chunks with `write_all`, record regions
/// with `sendfile` straight from the segment file (zero-copy).
async fn write_fetch(
    writer: &mut OwnedWriteHalf,
    chunks: Vec<FetchChunk<FetchRecords>>,
    bytes_out: &metrics::Counter,
) -> std::io::Result<()> {
    for chunk in chunks {
        match chunk {
            FetchChunk::Bytes(bytes) => {
                bytes_out.increment(bytes.len() as u64);
                writer.write_all(&bytes).await?;
            }
            FetchChunk::Records(FetchRecords::File(slice)) => {
                send_file_region(writer.as_ref(), &slice).await?;
                bytes_out.increment(slice.len() as u64);
            }
            FetchChunk::Records(FetchRecords::Empty) => {}
        }
    }
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
