//! Secured connections between nodes (issue 19): a follower's replica
//! fetcher dialing its leader's inter-broker listener, and the metadata
//! quorum transport dialing and accepting on a controller listener.
//!
//! The client side is Kafka's client-mode channel builder on the broker
//! (`ChannelBuilders.clientChannelBuilder` with the listener's configs):
//! TLS with the listener's `ssl.*` keys (`tls::client_config`), then a SASL
//! exchange in Kafka's own frames (SaslHandshake v1, SaslAuthenticate v2)
//! with the mechanism `sasl.mechanism.inter.broker.protocol` or
//! `sasl.mechanism.controller.protocol` names and the `username` /
//! `password` options of the listener's JAAS entry for it
//! (`listener.name.<listener>.<mechanism>.sasl.jaas.config`), as a Kafka
//! broker logs in to another.
//!
//! The server side of a controller listener ([`ControllerChannel`]) runs
//! the same TLS handshake and SASL exchange as a client listener
//! (`network::connection`), then requires ClusterAction on the cluster for
//! the principal when an authorizer is configured, as Kafka's
//! `ControllerApis` require it of every controller request. Until the
//! node's metadata (its ACLs) is loaded only `super.users` pass, as Kafka's
//! `StandardAuthorizer` refuses others before its initial load.
//!
//! SCRAM as `sasl.mechanism.controller.protocol` is refused at start: SCRAM
//! credentials live in the metadata log, which the quorum's own
//! connections must exist to replicate.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::FutureExt;
use kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use weir_controller::acl::{AclOperation, AclResourceType};
use weir_controller::{MetadataController, ScramMechanism, SecuredStream};

use super::sasl::{jaas_key, single_entry, SaslListener};
use super::scram::ScramClient;
use super::tls::TlsListener;
use crate::authorizer::{Authorizer, RequestAuth};
use crate::config::{BrokerConfig, SecurityProtocol};

/// Largest SASL response a node reads from another (bytes): a
/// SaslAuthenticate answer holds a SCRAM message or an error text.
const MAX_SASL_RESPONSE_BYTES: usize = 64 * 1024;

/// Why a node cannot secure its connections to other nodes with the
/// configuration it was given; names the key, never a secret's value.
#[derive(Debug, thiserror::Error)]
pub enum ChannelConfigError {
    /// A key is missing or has a value Weir does not serve.
    #[error("listener {listener}: {key}: {reason}")]
    Invalid {
        /// The listener the connections go to.
        listener: String,
        /// The key to change.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// The listener's TLS client configuration.
    #[error(transparent)]
    Tls(#[from] super::tls::TlsConfigError),
}

/// The SASL side of a node's own connections: the mechanism and its login.
#[derive(Clone)]
struct SaslLogin {
    /// Upper case: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    mechanism: String,
    username: String,
    password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// How this node dials one listener of other nodes: TLS when its protocol
/// is SSL or SASL_SSL, SASL when SASL_PLAINTEXT or SASL_SSL.
#[derive(Clone, Debug, Default)]
pub struct ClientChannel {
    listener: String,
    tls: Option<TlsClient>,
    sasl: Option<SaslLogin>,
}

#[derive(Clone)]
struct TlsClient(tokio_rustls::TlsConnector);

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsClient")
    }
}

impl ClientChannel {
    /// PLAINTEXT: the TCP connection as it is.
    pub fn plaintext() -> ClientChannel {
        ClientChannel::default()
    }

    /// The channel to listener `listener` of other nodes, whose security
    /// protocol is `protocol`; SASL logs in with the mechanism
    /// `mechanism_key` names (`sasl.mechanism.inter.broker.protocol` or
    /// `sasl.mechanism.controller.protocol`, default GSSAPI as Kafka's).
    ///
    /// # Errors
    /// A mechanism Weir does not serve, a JAAS entry without `username` and
    /// `password`, or a TLS client configuration error.
    pub fn for_listener(
        config: &BrokerConfig,
        listener: &str,
        protocol: SecurityProtocol,
        mechanism_key: &'static str,
    ) -> Result<ClientChannel, ChannelConfigError> {
        let invalid = |key: &str, reason: String| ChannelConfigError::Invalid {
            listener: listener.to_string(),
            key: key.to_string(),
            reason,
        };
        let tls = if protocol.uses_tls() {
            let client = super::tls::client_config(config, listener)?;
            Some(TlsClient(tokio_rustls::TlsConnector::from(client)))
        } else {
            None
        };
        let sasl = match protocol {
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => {
                let mechanism = config
                    .explicit
                    .get(mechanism_key)
                    .map(|m| m.trim().to_string())
                    .unwrap_or_else(|| "GSSAPI".into());
                if mechanism != "PLAIN" && ScramMechanism::from_name(&mechanism).is_none() {
                    return Err(invalid(
                        mechanism_key,
                        format!("{mechanism} is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"),
                    ));
                }
                let key = jaas_key(listener, &mechanism);
                let text = config.explicit.get(&key).ok_or_else(|| {
                    invalid(
                        &key,
                        format!("a node logs in to {mechanism} with this entry's username and password, and it is not set"),
                    )
                })?;
                let entry = single_entry(text).map_err(|reason| invalid(&key, reason))?;
                let option = |name: &str| {
                    entry.options.get(name).cloned().ok_or_else(|| {
                        invalid(
                            &key,
                            format!("has no {name} option for this node's own connections"),
                        )
                    })
                };
                Some(SaslLogin {
                    username: option("username")?,
                    password: option("password")?,
                    mechanism,
                })
            }
            SecurityProtocol::Plaintext | SecurityProtocol::Ssl => None,
        };
        Ok(ClientChannel {
            listener: listener.to_string(),
            tls,
            sasl,
        })
    }

    /// The SASL mechanism this channel logs in with, if any.
    pub fn sasl_mechanism(&self) -> Option<&str> {
        self.sasl.as_ref().map(|s| s.mechanism.as_str())
    }

    /// Secures `stream`, a connection to `addr` (`host:port`; the host is
    /// checked against the other node's certificate): the TLS handshake,
    /// then the SASL exchange.
    ///
    /// # Errors
    /// Why the connection cannot be used: the handshake failed, the other
    /// node refused the mechanism or the credentials.
    pub async fn secure(
        &self,
        stream: TcpStream,
        addr: &str,
    ) -> Result<Box<dyn SecuredStream>, String> {
        let _ = stream.set_nodelay(true);
        match &self.tls {
            None => {
                let mut stream = stream;
                self.login(&mut stream).await?;
                Ok(Box::new(stream))
            }
            Some(TlsClient(connector)) => {
                let host = addr
                    .rsplit_once(':')
                    .map_or(addr, |(host, _)| host)
                    .trim_start_matches('[')
                    .trim_end_matches(']');
                let name = rustls_pki_types::ServerName::try_from(host.to_string())
                    .map_err(|e| format!("{host} is not a TLS server name: {e}"))?;
                let mut stream = connector
                    .connect(name, stream)
                    .await
                    .map_err(|e| format!("SSL handshake with {addr} failed: {e}"))?;
                self.login(&mut stream).await?;
                Ok(Box::new(stream))
            }
        }
    }

    /// The SASL exchange, when this channel has one.
    async fn login<S: AsyncRead + AsyncWrite + Unpin>(&self, stream: &mut S) -> Result<(), String> {
        let Some(login) = &self.sasl else {
            return Ok(());
        };
        let mut exchange = FrameExchange {
            stream,
            next_correlation_id: 0,
        };
        let handshake: SaslHandshakeResponse = exchange
            .round_trip(
                &SaslHandshakeRequest::default()
                    .with_mechanism(StrBytes::from_string(login.mechanism.clone())),
                1,
            )
            .await?;
        if handshake.error_code != 0 {
            let enabled: Vec<&str> = handshake.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(format!(
                "listener {} refused SASL mechanism {} (error {}; enabled: {})",
                self.listener,
                login.mechanism,
                handshake.error_code,
                enabled.join(",")
            ));
        }
        match ScramMechanism::from_name(&login.mechanism) {
            None => {
                let token = format!("\0{}\0{}", login.username, login.password);
                exchange.authenticate(token.into_bytes()).await?;
            }
            Some(mechanism) => {
                let mut client = ScramClient::new(mechanism, &login.username, &login.password)
                    .map_err(|e| format!("{e:?}"))?;
                let server_first = exchange.authenticate(client.client_first()).await?;
                let client_final = client.client_final(&server_first)?;
                let server_final = exchange.authenticate(client_final).await?;
                client.verify_server_final(&server_final)?;
            }
        }
        Ok(())
    }
}

/// Kafka request frames on a stream not yet handed to its codec.
struct FrameExchange<'s, S> {
    stream: &'s mut S,
    next_correlation_id: i32,
}

impl<S: AsyncRead + AsyncWrite + Unpin> FrameExchange<'_, S> {
    /// One SaslAuthenticate v2 with `token`; the server's token back.
    async fn authenticate(&mut self, token: Vec<u8>) -> Result<Vec<u8>, String> {
        let response: SaslAuthenticateResponse = self
            .round_trip(
                &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
                2,
            )
            .await?;
        if response.error_code != 0 {
            return Err(format!(
                "SASL authentication failed (error {}): {}",
                response.error_code,
                response.error_message.as_deref().unwrap_or_default()
            ));
        }
        Ok(response.auth_bytes.to_vec())
    }

    async fn round_trip<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, String> {
        let api = ApiKey::try_from(R::KEY).map_err(|_| format!("API key {}", R::KEY))?;
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("weir-node")))
            .encode(&mut frame, api.request_header_version(version))
            .map_err(|e| format!("{api:?} header: {e}"))?;
        request
            .encode(&mut frame, version)
            .map_err(|e| format!("{api:?}: {e}"))?;
        let len = i32::try_from(frame.len() - 4).map_err(|_| format!("{api:?}: too large"))?;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        let io = |e: std::io::Error| format!("{api:?}: {e}");
        self.stream.write_all(&frame).await.map_err(io)?;
        self.stream.flush().await.map_err(io)?;
        let len = self.stream.read_u32().await.map_err(io)? as usize;
        if len > MAX_SASL_RESPONSE_BYTES {
            return Err(format!("{api:?} response of {len} bytes"));
        }
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body).await.map_err(io)?;
        let mut body = Bytes::from(body);
        let header = ResponseHeader::decode(&mut body, api.response_header_version(version))
            .map_err(|e| format!("{api:?} response header: {e}"))?;
        if header.correlation_id != correlation_id {
            return Err(format!(
                "{api:?} response correlation id {} (expected {correlation_id})",
                header.correlation_id
            ));
        }
        let response =
            R::Response::decode(&mut body, version).map_err(|e| format!("{api:?}: {e}"))?;
        if body.has_remaining() {
            return Err(format!(
                "{api:?} response has {} bytes left",
                body.remaining()
            ));
        }
        Ok(response)
    }
}

/// The security of the metadata quorum's connections
/// ([`weir_controller::ChannelSecurity`]): [`ClientChannel`] for those this
/// node dials, and for those its controller listener accepts the
/// listener's TLS and SASL, then ClusterAction.
pub struct ControllerChannel {
    client: ClientChannel,
    server: Option<ControllerListener>,
}

/// What a controller listener checks of the connections it accepts.
struct ControllerListener {
    name: Arc<str>,
    protocol: SecurityProtocol,
    tls: Option<TlsListener>,
    sasl: Option<Arc<SaslListener>>,
    authorizer: Option<Authorizer>,
    /// The node's metadata, once it is loaded (ACLs, SCRAM credentials).
    metadata: Arc<OnceLock<MetadataController>>,
    /// `connections.max.idle.ms`: the longest a handshake may take.
    idle: Duration,
}

impl ControllerChannel {
    /// The quorum's channel: `client` to dial the controllers; with
    /// `listener` (a voter's own controller listener: its name, TLS and
    /// SASL settings) the side that accepts. `metadata` is filled once the
    /// node has its metadata; until then only `super.users` pass the
    /// authorizer.
    pub fn new(
        config: &BrokerConfig,
        client: ClientChannel,
        listener: Option<super::AcceptedOn>,
        metadata: Arc<OnceLock<MetadataController>>,
    ) -> ControllerChannel {
        let idle = u64::try_from(config.connections_max_idle_ms)
            .map_or(Duration::from_secs(600), Duration::from_millis);
        ControllerChannel {
            client,
            server: listener.map(|l| ControllerListener {
                name: l.name,
                protocol: l.protocol,
                tls: l.tls,
                sasl: l.sasl,
                authorizer: Authorizer::from_config(config),
                metadata,
                idle,
            }),
        }
    }
}

impl weir_controller::ChannelSecurity for ControllerChannel {
    fn connect(
        &self,
        stream: TcpStream,
        addr: String,
    ) -> BoxFuture<'static, Result<Box<dyn SecuredStream>, String>> {
        let client = self.client.clone();
        async move { client.secure(stream, &addr).await }.boxed()
    }

    fn accept(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> BoxFuture<'static, Result<Box<dyn SecuredStream>, String>> {
        let Some(server) = &self.server else {
            return futures::future::ready(Err("this node serves no controller listener".into()))
                .boxed();
        };
        let listener = ControllerListener {
            name: server.name.clone(),
            protocol: server.protocol,
            tls: server.tls.clone(),
            sasl: server.sasl.clone(),
            authorizer: server.authorizer.clone(),
            metadata: server.metadata.clone(),
            idle: server.idle,
        };
        async move {
            let idle = listener.idle;
            tokio::time::timeout(idle, listener.accept(stream, peer))
                .await
                .map_err(|_| "not secured within connections.max.idle.ms".to_string())?
        }
        .boxed()
    }
}

impl ControllerListener {
    async fn accept(
        self,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> Result<Box<dyn SecuredStream>, String> {
        let info = Arc::new(super::ConnectionInfo {
            peer,
            listener: self.name.clone(),
            security_protocol: self.protocol,
            principal: super::ANONYMOUS.into(),
            session: None,
            muted: Default::default(),
        });
        match &self.tls {
            None => {
                let mut stream = stream;
                let principal = self.authenticate(&mut stream, info).await?;
                self.authorize(&principal, peer)?;
                Ok(Box::new(stream))
            }
            Some(tls) => {
                let mut stream = tls.acceptor().accept(stream).await.map_err(|e| {
                    format!("Failed authentication with {peer} (SSL handshake failed): {e}")
                })?;
                let info = super::connection::certificate_principal(&stream, tls, info)
                    .ok_or_else(|| "no principal for the client certificate".to_string())?;
                let principal = self.authenticate(&mut stream, info).await?;
                self.authorize(&principal, peer)?;
                Ok(Box::new(stream))
            }
        }
    }

    /// The principal after the SASL exchange (the certificate's or
    /// ANONYMOUS without SASL).
    async fn authenticate<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        stream: &mut S,
        info: Arc<super::ConnectionInfo>,
    ) -> Result<Arc<str>, String> {
        let Some(sasl) = &self.sasl else {
            return Ok(info.principal.clone());
        };
        let credentials = |user: &str, mechanism| {
            let image = self.metadata.get()?.image();
            image.scram_credentials.get(user)?.get(&mechanism).cloned()
        };
        let session =
            super::sasl::authenticate(stream, sasl, &credentials, info.peer, self.idle).await?;
        Ok(session.principal().into())
    }

    /// ClusterAction on the cluster for `principal`, with an authorizer.
    fn authorize(&self, principal: &str, peer: SocketAddr) -> Result<(), String> {
        let Some(authorizer) = &self.authorizer else {
            return Ok(());
        };
        if authorizer.is_super_user(principal) {
            return Ok(());
        }
        let Some(metadata) = self.metadata.get() else {
            return Err(format!(
                "{principal} is not a super user and the authorizer has not loaded the metadata yet"
            ));
        };
        let auth = RequestAuth::new(
            Some(authorizer),
            || metadata.image(),
            principal,
            peer.ip(),
            "controller listener",
        );
        if auth.cluster(AclOperation::ClusterAction) {
            Ok(())
        } else {
            Err(format!(
                "{principal} may not {} on the {} (controller listener)",
                AclOperation::ClusterAction.name(),
                AclResourceType::Cluster.name()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;
    use weir_controller::ChannelSecurity as _;

    const PLAIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

    /// A node whose controller listener `CONTROLLER` is SASL_PLAINTEXT with
    /// PLAIN, logging in as `user`/`password`, accepting `admin` and
    /// `alice`; `extra` keys on top.
    fn config(user: &str, password: &str, extra: &[(&str, &str)]) -> BrokerConfig {
        let mut pairs: Vec<(String, String)> = vec![
            (
                "listener.security.protocol.map".into(),
                "CONTROLLER:SASL_PLAINTEXT".into(),
            ),
            ("listeners".into(), "CONTROLLER://127.0.0.1:0".into()),
            ("sasl.mechanism.controller.protocol".into(), "PLAIN".into()),
            (
                "listener.name.controller.sasl.enabled.mechanisms".into(),
                "PLAIN".into(),
            ),
            (
                "listener.name.controller.plain.sasl.jaas.config".into(),
                format!(
                    "{PLAIN_MODULE} required username=\"{user}\" password=\"{password}\" \
                     user_admin=\"admin-secret\" user_alice=\"alice-secret\";"
                ),
            ),
        ];
        pairs.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        BrokerConfig::from_pairs(pairs).unwrap()
    }

    fn channel(config: &BrokerConfig) -> ControllerChannel {
        let client = ClientChannel::for_listener(
            config,
            "CONTROLLER",
            SecurityProtocol::SaslPlaintext,
            "sasl.mechanism.controller.protocol",
        )
        .unwrap();
        let sasl = Arc::new(SaslListener::from_config(config, "CONTROLLER").unwrap());
        ControllerChannel::new(
            config,
            client,
            Some(super::super::AcceptedOn {
                name: "CONTROLLER".into(),
                protocol: SecurityProtocol::SaslPlaintext,
                tls: None,
                sasl: Some(sasl),
            }),
            Arc::new(OnceLock::new()),
        )
    }

    /// Dials `server` with `client`: both sides' outcomes, and on success
    /// one byte sent each way over the secured streams.
    async fn dial(
        server: &ControllerChannel,
        client: &ControllerChannel,
    ) -> (Result<(), String>, Result<(), String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepting = async {
            let (stream, peer) = listener.accept().await.unwrap();
            let mut secured = server.accept(stream, peer).await?;
            secured.write_all(b"s").await.map_err(|e| e.to_string())?;
            let mut byte = [0u8];
            secured
                .read_exact(&mut byte)
                .await
                .map_err(|e| e.to_string())?;
            (byte == *b"c")
                .then_some(())
                .ok_or("wrong byte".to_string())
        };
        let dialing = async {
            let stream = TcpStream::connect(addr).await.unwrap();
            let mut secured = client.connect(stream, addr.to_string()).await?;
            secured.write_all(b"c").await.map_err(|e| e.to_string())?;
            let mut byte = [0u8];
            secured
                .read_exact(&mut byte)
                .await
                .map_err(|e| e.to_string())?;
            (byte == *b"s")
                .then_some(())
                .ok_or("wrong byte".to_string())
        };
        tokio::join!(accepting, dialing)
    }

    #[tokio::test]
    async fn controllers_log_in_with_plain_and_a_wrong_password_is_refused() {
        let server = channel(&config("admin", "admin-secret", &[]));
        let (accepted, dialed) =
            dial(&server, &channel(&config("admin", "admin-secret", &[]))).await;
        assert_eq!((accepted, dialed), (Ok(()), Ok(())));

        let (accepted, dialed) = dial(&server, &channel(&config("admin", "guess", &[]))).await;
        assert!(accepted.is_err(), "{accepted:?}");
        let dialed = dialed.unwrap_err();
        assert!(
            dialed.contains("SASL authentication failed (error 58)") && !dialed.contains("guess"),
            "{dialed}"
        );
    }

    #[tokio::test]
    async fn with_an_authorizer_only_super_users_pass_before_the_metadata_is_loaded() {
        let authorizer = [
            (
                "authorizer.class.name",
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            ),
            ("super.users", "User:admin"),
            ("allow.everyone.if.no.acl.found", "true"),
        ];
        let server = channel(&config("admin", "admin-secret", &authorizer));
        let (accepted, _) = dial(&server, &channel(&config("admin", "admin-secret", &[]))).await;
        assert_eq!(accepted, Ok(()));
        let (accepted, dialed) =
            dial(&server, &channel(&config("alice", "alice-secret", &[]))).await;
        let accepted = accepted.unwrap_err();
        assert!(
            accepted.contains("User:alice is not a super user"),
            "{accepted}"
        );
        assert!(dialed.is_err());
    }

    #[test]
    fn a_login_needs_a_served_mechanism_and_the_entrys_username_and_password() {
        let refused = |extra: &[(&str, &str)]| {
            let mut pairs: Vec<(String, String)> = vec![(
                "listener.security.protocol.map".into(),
                "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT".into(),
            )];
            pairs.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            let config = BrokerConfig::from_pairs(pairs).unwrap();
            ClientChannel::for_listener(
                &config,
                "CONTROLLER",
                SecurityProtocol::SaslPlaintext,
                "sasl.mechanism.controller.protocol",
            )
            .unwrap_err()
            .to_string()
        };
        // Kafka's default mechanism, GSSAPI, is not served.
        assert!(refused(&[]).contains("sasl.mechanism.controller.protocol: GSSAPI is not served"));
        let no_entry = refused(&[("sasl.mechanism.controller.protocol", "PLAIN")]);
        assert!(
            no_entry.contains("listener.name.controller.plain.sasl.jaas.config"),
            "{no_entry}"
        );
        let no_password = refused(&[
            ("sasl.mechanism.controller.protocol", "PLAIN"),
            (
                "listener.name.controller.plain.sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" user_admin=\"s3cret\";",
            ),
        ]);
        assert!(
            no_password.contains("has no password option"),
            "{no_password}"
        );
        assert!(!no_password.contains("s3cret"));
    }
}
