//! [`RawClient`]: a blocking TCP client that sends Kafka requests at an exact
//! API version with an exact request header, so tests control every field a
//! real client would choose for them.
//!
//! Framing follows the Kafka protocol guide
//! (<https://kafka.apache.org/protocol#protocol_common>): a 4-byte big-endian
//! size, then the request header and body. The response header version comes
//! from `ApiKey::response_header_version`, except that ApiVersions responses
//! always use header v0 (KIP-511) so that clients can read them whatever
//! version they sent.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};

use crate::error::HarnessError;

/// How long a read may block before the connection counts as hung.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The client id [`RawClient::send`] puts in request headers.
pub const DEFAULT_CLIENT_ID: &str = "weir-itest";
/// The largest response frame the client accepts, in bytes.
const MAX_RESPONSE_BYTES: i32 = 256 * 1024 * 1024;

/// A decoded response with its header and the exact bytes it came from.
#[derive(Debug, Clone)]
pub struct RawResponse<T> {
    /// The response header (v0 or v1 as the API and version require).
    pub header: ResponseHeader,
    /// The decoded body.
    pub body: T,
    /// The whole frame after the size prefix: header and body bytes.
    pub frame: Bytes,
}

/// A request written with [`RawClient::write_request`] whose response has not
/// been read yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    /// The correlation id in the request header.
    pub correlation_id: i32,
    /// The API key of the request.
    pub api_key: i16,
    /// The API version of the request.
    pub api_version: i16,
}

/// A blocking connection to one broker.
///
/// Requests may be pipelined with [`Self::write_request`] and
/// [`Self::read_response`]; responses are checked to come back in request
/// order.
#[derive(Debug)]
pub struct RawClient {
    stream: TcpStream,
    next_correlation_id: i32,
    client_id: Option<String>,
    in_flight: VecDeque<Pending>,
}

impl RawClient {
    /// Connects to `addr` (`host:port`) with [`DEFAULT_READ_TIMEOUT`].
    ///
    /// # Errors
    ///
    /// [`HarnessError::Io`] when the connection fails.
    pub fn connect(addr: &str) -> Result<Self, HarnessError> {
        let stream = TcpStream::connect(addr)
            .map_err(|e| HarnessError::io(format!("connecting to {addr}"), e))?;
        stream
            .set_nodelay(true)
            .map_err(|e| HarnessError::io("setting TCP_NODELAY", e))?;
        stream
            .set_read_timeout(Some(DEFAULT_READ_TIMEOUT))
            .map_err(|e| HarnessError::io("setting the read timeout", e))?;
        Ok(Self {
            stream,
            next_correlation_id: 1,
            client_id: Some(DEFAULT_CLIENT_ID.to_owned()),
            in_flight: VecDeque::new(),
        })
    }

    /// A second handle on the same connection (`TcpStream::try_clone`), so
    /// one thread can write pipelined requests with [`Self::write_request`]
    /// while another reads their answers, in order, with
    /// [`Self::read_response`] and the [`Pending`] each write returned. The
    /// clone has its own correlation ids and an empty in-flight list; the
    /// read timeout is the socket's, shared by both.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Io`] when the socket cannot be duplicated.
    pub fn try_clone(&self) -> Result<Self, HarnessError> {
        Ok(Self {
            stream: self
                .stream
                .try_clone()
                .map_err(|e| HarnessError::io("duplicating the socket", e))?,
            next_correlation_id: 1,
            client_id: self.client_id.clone(),
            in_flight: VecDeque::new(),
        })
    }

    /// Shuts the connection down both ways (`shutdown(2)`), for every handle
    /// on it ([`Self::try_clone`]): a write or read blocked on another
    /// thread then fails at once. Errors (already closed) are ignored.
    pub fn shutdown(&self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }

    /// Sets the client id used by [`Self::send`] and
    /// [`Self::write_request`]: `None` is encoded as a null string (length -1),
    /// `Some("")` as an empty one.
    pub fn set_client_id(&mut self, client_id: Option<&str>) {
        self.client_id = client_id.map(str::to_owned);
    }

    /// Changes how long a read may block before failing with
    /// [`HarnessError::Io`] (`TimedOut`/`WouldBlock`).
    ///
    /// # Errors
    ///
    /// [`HarnessError::Io`] when the socket option cannot be set.
    pub fn set_read_timeout(&mut self, timeout: Duration) -> Result<(), HarnessError> {
        self.stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| HarnessError::io("setting the read timeout", e))
    }

    /// Shrinks the socket's receive buffer to about `bytes` (`SO_RCVBUF`; the
    /// kernel doubles it and keeps a minimum), so that a client that does
    /// not read stops the broker's writes to it sooner.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Io`] when the socket option cannot be set.
    pub fn set_receive_buffer(&mut self, bytes: usize) -> Result<(), HarnessError> {
        rustix::net::sockopt::set_socket_recv_buffer_size(&self.stream, bytes)
            .map_err(|e| HarnessError::io("setting SO_RCVBUF", e.into()))
    }

    /// A request header for `R` at `version` with the next correlation id and
    /// the current client id.
    pub fn header<R: Request>(&mut self, version: i16) -> RequestHeader {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(self.client_id.clone().map(StrBytes::from_string))
    }

    /// Sends `request` at `version` and returns the decoded response body.
    ///
    /// # Errors
    ///
    /// See [`Self::send_with_header`].
    pub fn send<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, HarnessError> {
        let header = self.header::<R>(version);
        Ok(self.send_with_header(header, request)?.body)
    }

    /// Sends `request` with exactly `header` (its api key must be `R::KEY`;
    /// its version selects the body encoding) and returns the response with
    /// its header and raw bytes.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Encode`] when the `kafka-protocol` crate cannot encode
    /// that version, I/O errors, [`HarnessError::ConnectionClosed`],
    /// [`HarnessError::CorrelationMismatch`], or [`HarnessError::Decode`] when
    /// the response does not decode at the version or leaves bytes over.
    pub fn send_with_header<R: Request>(
        &mut self,
        header: RequestHeader,
        request: &R,
    ) -> Result<RawResponse<R::Response>, HarnessError> {
        let pending = self.write_request(header, request)?;
        self.read_response::<R::Response>(pending)
    }

    /// Writes one request without waiting for its response (pipelining).
    ///
    /// # Errors
    ///
    /// [`HarnessError::Encode`] or [`HarnessError::Io`].
    pub fn write_request<R: Request>(
        &mut self,
        header: RequestHeader,
        request: &R,
    ) -> Result<Pending, HarnessError> {
        let api = api_name(R::KEY);
        let version = header.request_api_version;
        let header_version = request_header_version(R::KEY, version);
        let mut body = BytesMut::new();
        let encode_error = |message: String| HarnessError::Encode {
            api: api.clone(),
            version,
            message,
        };
        header
            .encode(&mut body, header_version)
            .map_err(|e| encode_error(format!("header v{header_version}: {e}")))?;
        request
            .encode(&mut body, version)
            .map_err(|e| encode_error(e.to_string()))?;
        let pending = Pending {
            correlation_id: header.correlation_id,
            api_key: R::KEY,
            api_version: version,
        };
        self.write_frame(&body)?;
        self.in_flight.push_back(pending);
        Ok(pending)
    }

    /// Reads the response to `pending`, which must be the oldest request in
    /// flight, and decodes it as `T` at the request's version.
    ///
    /// # Errors
    ///
    /// As [`Self::send_with_header`].
    pub fn read_response<T: Decodable>(
        &mut self,
        pending: Pending,
    ) -> Result<RawResponse<T>, HarnessError> {
        if self.in_flight.front() == Some(&pending) {
            self.in_flight.pop_front();
        }
        let frame = self.read_frame()?;
        let api = api_name(pending.api_key);
        let decode_error = |message: String| HarnessError::Decode {
            api: api.clone(),
            version: pending.api_version,
            message,
        };
        let mut buf = frame.clone();
        let header = ResponseHeader::decode(
            &mut buf,
            response_header_version(pending.api_key, pending.api_version),
        )
        .map_err(|e| decode_error(format!("header: {e}")))?;
        if header.correlation_id != pending.correlation_id {
            return Err(HarnessError::CorrelationMismatch {
                expected: pending.correlation_id,
                actual: header.correlation_id,
            });
        }
        let body =
            T::decode(&mut buf, pending.api_version).map_err(|e| decode_error(e.to_string()))?;
        if buf.has_remaining() {
            return Err(decode_error(format!(
                "{} bytes left after the body",
                buf.remaining()
            )));
        }
        Ok(RawResponse {
            header,
            body,
            frame,
        })
    }

    /// Sends a request whose header and body bytes the caller built
    /// (`api_key`, `api_version` and `correlation_id` are written here as a
    /// request header v1 prefix when `header_version` is 1, or v2 with an
    /// empty tag section when it is 2), and returns the whole response frame
    /// (header included) without decoding it.
    ///
    /// For versions the `kafka-protocol` crate cannot encode (Produce v0,
    /// ApiVersions v5).
    ///
    /// # Errors
    ///
    /// I/O errors and [`HarnessError::ConnectionClosed`].
    pub fn send_raw_request(
        &mut self,
        api_key: i16,
        api_version: i16,
        header_version: i16,
        body: &[u8],
    ) -> Result<(i32, Bytes), HarnessError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let mut frame = BytesMut::new();
        frame.put_i16(api_key);
        frame.put_i16(api_version);
        frame.put_i32(correlation_id);
        match self.client_id.as_deref() {
            None => frame.put_i16(-1),
            Some(id) => {
                frame.put_i16(i16::try_from(id.len()).unwrap_or(i16::MAX));
                frame.put_slice(id.as_bytes());
            }
        }
        if header_version >= 2 {
            frame.put_u8(0); // empty tagged-field section
        }
        frame.put_slice(body);
        Ok((correlation_id, self.send_raw(&frame)?))
    }

    /// Writes `frame` (everything after the size prefix, which is added here)
    /// and returns the next response frame (after its size prefix).
    ///
    /// # Errors
    ///
    /// I/O errors, [`HarnessError::ConnectionClosed`] and
    /// [`HarnessError::BadFrameSize`].
    pub fn send_raw(&mut self, frame: &[u8]) -> Result<Bytes, HarnessError> {
        self.write_frame(frame)?;
        self.read_frame()
    }

    /// Writes `frame` with a 4-byte size prefix.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Io`].
    pub fn write_frame(&mut self, frame: &[u8]) -> Result<(), HarnessError> {
        let size = u32::try_from(frame.len())
            .map_err(|_| HarnessError::BadFrameSize { size: i32::MAX })?;
        let mut out = Vec::with_capacity(frame.len() + 4);
        out.extend_from_slice(&size.to_be_bytes());
        out.extend_from_slice(frame);
        self.stream
            .write_all(&out)
            .map_err(|e| HarnessError::io("writing a request", e))
    }

    /// Reads until the broker closes the connection and returns every byte
    /// that came before the close: empty when the broker closed without
    /// answering. An end of stream and a reset (`ECONNRESET`, which a
    /// close with unread request bytes in the broker's buffer sends) both
    /// count as closed. For requests that must close the connection
    /// (Kafka's SASL authenticator closes after a refusal), after their
    /// answer, if any, was read.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Io`] when the connection is still open after the
    /// read timeout (`WouldBlock`/`TimedOut`, see
    /// [`Self::set_read_timeout`]) or another read fails.
    pub fn read_until_closed(&mut self) -> Result<Bytes, HarnessError> {
        let mut received = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Ok(Bytes::from(received)),
                Ok(n) => received.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return Ok(Bytes::from(received))
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(HarnessError::io(
                        format!(
                            "waiting for the broker to close the connection \
                             ({} bytes received)",
                            received.len()
                        ),
                        e,
                    ))
                }
            }
        }
    }

    /// Reads one response frame and returns it without the size prefix.
    ///
    /// # Errors
    ///
    /// [`HarnessError::ConnectionClosed`] on EOF, [`HarnessError::Io`] (also
    /// for the read timeout), [`HarnessError::BadFrameSize`].
    pub fn read_frame(&mut self) -> Result<Bytes, HarnessError> {
        let mut size = [0u8; 4];
        read_exact(&mut self.stream, &mut size)?;
        let size = i32::from_be_bytes(size);
        if !(4..=MAX_RESPONSE_BYTES).contains(&size) {
            return Err(HarnessError::BadFrameSize { size });
        }
        let mut frame = vec![0u8; size as usize];
        read_exact(&mut self.stream, &mut frame)?;
        Ok(Bytes::from(frame))
    }
}

fn read_exact(stream: &mut TcpStream, buf: &mut [u8]) -> Result<(), HarnessError> {
    stream.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            HarnessError::ConnectionClosed
        } else {
            HarnessError::io("reading a response", e)
        }
    })
}

/// The request header version for `api_key` at `version` (0/1 before an
/// API's first flexible version, 2 from it), as the protocol guide defines.
pub fn request_header_version(api_key: i16, version: i16) -> i16 {
    ApiKey::try_from(api_key)
        .map(|k| k.request_header_version(version))
        .unwrap_or(1)
}

/// The response header version for `api_key` at `version`: 1 for flexible
/// versions, 0 before, and always 0 for ApiVersions (KIP-511).
pub fn response_header_version(api_key: i16, version: i16) -> i16 {
    match ApiKey::try_from(api_key) {
        Ok(ApiKey::ApiVersions) => 0,
        Ok(key) => key.response_header_version(version),
        Err(()) => 0,
    }
}

fn api_name(api_key: i16) -> String {
    ApiKey::try_from(api_key)
        .map(|k| format!("{k:?}"))
        .unwrap_or_else(|()| format!("api key {api_key}"))
}
