//! One inter-broker connection from a follower to a leader's
//! inter-broker listener: length-prefixed Kafka frames (`tokio-util`'s
//! `LengthDelimitedCodec`) carrying requests encoded by `kafka-protocol`,
//! one request in flight at a time (Kafka's `BlockingSend` /
//! `NetworkClient` as a fetcher thread uses it).

use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use weir_controller::SecuredStream;

use crate::network::channel::ClientChannel;

/// Why an inter-broker request failed; the fetcher backs off and
/// reconnects on any of them.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting, writing or reading failed.
    #[error("I/O with broker at {address}: {source}")]
    Io {
        /// The leader's address.
        address: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The leader closed the connection.
    #[error("broker at {address} closed the connection")]
    Closed {
        /// The leader's address.
        address: String,
    },
    /// The TLS handshake or the SASL exchange failed.
    #[error("securing the connection to broker at {address}: {reason}")]
    Secure {
        /// The leader's address.
        address: String,
        /// What failed.
        reason: String,
    },
    /// A request could not be encoded or a response decoded.
    #[error("{api:?} v{version}: {message}")]
    Codec {
        /// The API.
        api: ApiKey,
        /// Its version.
        version: i16,
        /// What went wrong.
        message: String,
    },
}

/// A connection to one broker.
pub struct BrokerClient {
    address: String,
    framed: Framed<Box<dyn SecuredStream>, LengthDelimitedCodec>,
    client_id: StrBytes,
    next_correlation_id: i32,
}

impl BrokerClient {
    /// Connects to `address` (`host:port`) and secures the connection
    /// with `channel` (the inter-broker listener's TLS and SASL), naming
    /// itself `client_id` in request headers (Kafka's fetchers use
    /// `broker-<id>-fetcher-<n>`).
    ///
    /// # Errors
    /// [`ClientError::Io`], [`ClientError::Secure`].
    pub async fn connect(
        address: &str,
        client_id: String,
        channel: &ClientChannel,
    ) -> Result<Self, ClientError> {
        let stream = TcpStream::connect(address)
            .await
            .map_err(|source| ClientError::Io {
                address: address.to_string(),
                source,
            })?;
        let stream =
            channel
                .secure(stream, address)
                .await
                .map_err(|reason| ClientError::Secure {
                    address: address.to_string(),
                    reason,
                })?;
        let codec = LengthDelimitedCodec::builder()
            .length_field_length(4)
            .max_frame_length(i32::MAX as usize)
            .new_codec();
        Ok(BrokerClient {
            address: address.to_string(),
            framed: Framed::new(stream, codec),
            client_id: StrBytes::from_string(client_id),
            next_correlation_id: 0,
        })
    }

    /// Sends `request` at `version` and waits for its response.
    ///
    /// # Errors
    /// [`ClientError`]: I/O, a closed connection, a correlation id that is
    /// not the request's, or a body that does not decode.
    pub async fn send<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        let api = ApiKey::try_from(R::KEY).unwrap_or(ApiKey::ApiVersions);
        let codec_error = |message: String| ClientError::Codec {
            api,
            version,
            message,
        };
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, api.request_header_version(version))
            .map_err(|e| codec_error(e.to_string()))?;
        request
            .encode(&mut body, version)
            .map_err(|e| codec_error(e.to_string()))?;
        self.framed
            .send(body.freeze())
            .await
            .map_err(|source| ClientError::Io {
                address: self.address.clone(),
                source,
            })?;
        let frame = match self.framed.next().await {
            Some(Ok(frame)) => frame,
            Some(Err(source)) => {
                return Err(ClientError::Io {
                    address: self.address.clone(),
                    source,
                })
            }
            None => {
                return Err(ClientError::Closed {
                    address: self.address.clone(),
                })
            }
        };
        let mut buf: Bytes = frame.freeze();
        let response_header =
            ResponseHeader::decode(&mut buf, api.response_header_version(version))
                .map_err(|e| codec_error(format!("response header: {e}")))?;
        if response_header.correlation_id != correlation_id {
            return Err(codec_error(format!(
                "correlation id {} answers request {correlation_id}",
                response_header.correlation_id
            )));
        }
        R::Response::decode(&mut buf, version).map_err(|e| codec_error(e.to_string()))
    }
}
