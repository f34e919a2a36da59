//! SASL authentication on SASL_PLAINTEXT and SASL_SSL listeners (issue 19;
//! Kafka's `SaslServerAuthenticator`: the KIP-43 handshake and KIP-152's
//! SaslAuthenticate), before a connection serves any other request.
//!
//! The exchange, as Kafka's server runs it:
//! - ApiVersions may come first (any number of times) and is answered;
//! - SaslHandshake (v0-1) names the mechanism: one of `sasl.enabled.mechanisms`
//!   gets error 0 and the enabled list, another UNSUPPORTED_SASL_MECHANISM
//!   (33) with the list, and the connection closes;
//! - after a v0 handshake the client's token comes bare (size-prefixed)
//!   and a success is answered with an empty one, a failure closes;
//! - after v1, SaslAuthenticate (v0-2) carries the mechanism's tokens: success gets
//!   error 0 (`session_lifetime_ms`: `connections.max.reauth.ms`, 0 for
//!   sessions that do not expire; see [`SaslSession`] for KIP-368's
//!   re-authentication), a failure SASL_AUTHENTICATION_FAILED (58) with Kafka's
//!   message, sent after `connection.failed.authentication.delay.ms`, and
//!   the connection closes;
//! - any other request before authentication closes the connection
//!   without an answer (Kafka's `IllegalSaslStateException`).
//!
//! Requests are read one at a time with exact reads (nothing past the
//! current request is taken from the socket), each at most
//! `sasl.server.max.receive.size` bytes held as they arrive (not reserved
//! from the size prefix), each read bounded by `connections.max.idle.ms`.
//!
//! Mechanisms: PLAIN (RFC 4616; Kafka's `PlainSaslServer`), with the users
//! of the listener's JAAS entry (`listener.name.<listener>.plain.sasl.jaas.config`,
//! `user_<name>="<password>"` options, as Kafka's
//! `PlainServerCallbackHandler`); SCRAM-SHA-256 and SCRAM-SHA-512
//! (`network::scram`, KIP-84) with the credentials of the metadata log
//! (`UserScramCredentialRecord`, set with AlterUserScramCredentials or
//! `weir format --add-scram`), looked up when a client authenticates, so
//! a credential change applies to the next authentication. Passwords are
//! compared in constant time and never logged.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{
    RequestKind, ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tracing::info;
use weir_protocol_compat::codec;

use weir_controller::{ScramCredential, ScramMechanism};

use super::scram::{ScramServer, ScramStep};
use crate::config::BrokerConfig;

/// Kafka's UNSUPPORTED_SASL_MECHANISM.
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
/// Kafka's ILLEGAL_SASL_STATE.
pub const ILLEGAL_SASL_STATE: i16 = 34;
/// Kafka's SASL_AUTHENTICATION_FAILED.
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// The mechanisms Weir serves.
pub const SERVED_MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// Kafka's PLAIN login module, the one a PLAIN JAAS entry must name.
const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

/// Kafka's SCRAM login module, the one a SCRAM JAAS entry must name.
const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

/// Why a client's SASL token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    /// A failure the client learns only as invalid credentials (Kafka's
    /// `SaslException`, answered "Authentication failed during
    /// authentication due to invalid credentials with SASL mechanism
    /// <m>"); the reason is for the broker's log.
    #[error("{0}")]
    Invalid(String),
    /// A failure whose message the client is given (Kafka's
    /// `SaslAuthenticationException`).
    #[error("{0}")]
    Visible(&'static str),
}

/// Why a listener's SASL configuration cannot be used; names the key.
#[derive(Debug, thiserror::Error)]
#[error("listener {listener}: {key}: {reason}")]
pub struct SaslConfigError {
    /// The listener.
    pub listener: String,
    /// The key to change.
    pub key: String,
    /// What is wrong (never a secret).
    pub reason: String,
}

/// One login module of a JAAS configuration (`sasl.jaas.config`):
/// `<class> <flag> key="value" ... ;`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JaasEntry {
    /// The login module's class name.
    pub login_module: String,
    /// `required`, `requisite`, `sufficient` or `optional`.
    pub flag: String,
    /// The options, in order of their names.
    pub options: BTreeMap<String, String>,
}

/// Parses a `sasl.jaas.config` value: login modules, each
/// `<class> <flag> (<name>=<value>)* ;`, a value bare, double-quoted or
/// single-quoted (backslash escapes the next character), as Kafka's
/// `JaasConfig` reads it with `java.io.StreamTokenizer`, whose quote
/// characters are `"` and `'`.
///
/// # Errors
/// A description of the first malformed part; it never quotes an option's
/// value (they hold passwords).
pub fn parse_jaas(text: &str) -> Result<Vec<JaasEntry>, String> {
    let mut chars = text.chars().peekable();
    let mut entries = Vec::new();
    let skip_space = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
    };
    let word = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        let mut out = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() || c == ';' || c == '=' || c == '"' || c == '\'' {
                break;
            }
            out.push(c);
            chars.next();
        }
        out
    };
    loop {
        skip_space(&mut chars);
        if chars.peek().is_none() {
            break;
        }
        let login_module = word(&mut chars);
        if login_module.is_empty() {
            return Err("expected a login module class".into());
        }
        skip_space(&mut chars);
        let flag = word(&mut chars).to_ascii_lowercase();
        if !["required", "requisite", "sufficient", "optional"].contains(&flag.as_str()) {
            return Err(format!(
                "login module {login_module}: expected a control flag (required, requisite, sufficient or optional)"
            ));
        }
        let mut options = BTreeMap::new();
        loop {
            skip_space(&mut chars);
            match chars.peek() {
                Some(';') => {
                    chars.next();
                    break;
                }
                None => {
                    return Err(format!(
                        "login module {login_module}: expected ';' at the end"
                    ))
                }
                _ => {}
            }
            let name = word(&mut chars);
            skip_space(&mut chars);
            if name.is_empty() || chars.next() != Some('=') {
                return Err(format!("login module {login_module}: expected name=value"));
            }
            skip_space(&mut chars);
            let value = if let Some(quote) = chars.next_if(|&c| c == '"' || c == '\'') {
                let mut value = String::new();
                loop {
                    match chars.next() {
                        Some(c) if c == quote => break,
                        Some('\\') => match chars.next() {
                            Some(c) => value.push(c),
                            None => {
                                return Err(format!("option {name}: unterminated quoted value"))
                            }
                        },
                        Some(c) => value.push(c),
                        None => return Err(format!("option {name}: unterminated quoted value")),
                    }
                }
                value
            } else {
                word(&mut chars)
            };
            options.insert(name, value);
        }
        entries.push(JaasEntry {
            login_module,
            flag,
            options,
        });
    }
    Ok(entries)
}

/// What a SASL listener accepts, built once at start from its keys.
#[derive(Debug)]
pub struct SaslListener {
    /// `sasl.enabled.mechanisms` (upper case).
    mechanisms: Vec<String>,
    /// PLAIN's users and passwords, when PLAIN is enabled.
    plain_users: BTreeMap<String, String>,
    /// `connection.failed.authentication.delay.ms`.
    failed_delay: Duration,
    /// `sasl.server.max.receive.size`, bytes.
    max_receive: usize,
    /// By mechanism (upper case), `connections.max.reauth.ms` when
    /// positive: how long a session lasts before the client must
    /// re-authenticate (KIP-368); see [`SaslListener::session_lifetime`].
    session_lifetimes: BTreeMap<String, Duration>,
}

impl SaslListener {
    /// The SASL settings of listener `listener`.
    ///
    /// # Errors
    /// A mechanism Weir does not serve, an enabled PLAIN without a JAAS
    /// entry of the PLAIN login module, or a SCRAM JAAS entry of another
    /// login module; the error names the key.
    pub fn from_config(config: &BrokerConfig, listener: &str) -> Result<Self, SaslConfigError> {
        let error = |key: &str, reason: String| SaslConfigError {
            listener: listener.to_string(),
            key: key.to_string(),
            reason,
        };
        let mechanisms: Vec<String> = config
            .listener_value(listener, "sasl.enabled.mechanisms")
            .unwrap_or("GSSAPI")
            .split(',')
            .map(|m| m.trim().to_ascii_uppercase())
            .filter(|m| !m.is_empty())
            .collect();
        if mechanisms.is_empty() {
            return Err(error(
                "sasl.enabled.mechanisms",
                "no mechanism enabled".into(),
            ));
        }
        if let Some(m) = mechanisms
            .iter()
            .find(|m| !SERVED_MECHANISMS.contains(&m.as_str()))
        {
            return Err(error(
                "sasl.enabled.mechanisms",
                format!(
                    "{m} is not served (served: {})",
                    SERVED_MECHANISMS.join(", ")
                ),
            ));
        }
        let mut plain_users = BTreeMap::new();
        if mechanisms.iter().any(|m| m == "PLAIN") {
            let key = jaas_key(listener, "PLAIN");
            let text = config.explicit.get(&key).ok_or_else(|| {
                error(
                    &key,
                    "PLAIN is enabled but the listener has no JAAS entry".into(),
                )
            })?;
            let entry = single_entry(text).map_err(|reason| error(&key, reason))?;
            if entry.login_module != PLAIN_LOGIN_MODULE {
                return Err(error(&key, format!("expected {PLAIN_LOGIN_MODULE}")));
            }
            for (name, password) in &entry.options {
                if let Some(user) = name.strip_prefix("user_") {
                    plain_users.insert(user.to_string(), password.clone());
                }
            }
        }
        // A SCRAM mechanism's JAAS entry (Kafka needs one per enabled
        // mechanism, usually `ScramLoginModule required;`) is optional here:
        // the users are the metadata log's; one that is given must name
        // Kafka's SCRAM login module.
        for mechanism in mechanisms.iter().filter(|m| m.starts_with("SCRAM-")) {
            let key = jaas_key(listener, mechanism);
            if let Some(text) = config.explicit.get(&key) {
                let entry = single_entry(text).map_err(|reason| error(&key, reason))?;
                if entry.login_module != SCRAM_LOGIN_MODULE {
                    return Err(error(&key, format!("expected {SCRAM_LOGIN_MODULE}")));
                }
            }
        }
        let session_lifetimes = session_lifetimes(config, listener, &mechanisms)
            .map_err(|(key, reason)| error(&key, reason))?;
        Ok(SaslListener {
            mechanisms,
            plain_users,
            failed_delay: Duration::from_millis(
                u64::try_from(config.connection_failed_authentication_delay_ms).unwrap_or(0),
            ),
            max_receive: usize::try_from(config.sasl_server_max_receive_size).unwrap_or(0),
            session_lifetimes,
        })
    }

    /// Checks PLAIN's client message `authzid \0 authcid \0 passwd`
    /// (RFC 4616) and returns the user name, as Kafka's `PlainSaslServer`:
    /// the message is read as UTF-8 (invalid bytes replaced) and cut at
    /// its first two NULs (a missing part is empty; the password keeps any
    /// further NUL); an empty user name or password is
    /// [`AuthFailure::Invalid`], a wrong password and an authorization id
    /// other than the user are [`AuthFailure::Visible`] with Kafka's
    /// messages.
    pub fn check_plain(&self, message: &[u8]) -> Result<String, AuthFailure> {
        let text = String::from_utf8_lossy(message);
        let mut tokens = text.splitn(3, '\0');
        let authzid = tokens.next().unwrap_or_default();
        let username = tokens.next().unwrap_or_default();
        let password = tokens.next().unwrap_or_default();
        if username.is_empty() {
            return Err(AuthFailure::Invalid(
                "Authentication failed: username not specified".into(),
            ));
        }
        if password.is_empty() {
            return Err(AuthFailure::Invalid(
                "Authentication failed: password not specified".into(),
            ));
        }
        let known = self
            .plain_users
            .get(username)
            .is_some_and(|expected| constant_time_eq(expected.as_bytes(), password.as_bytes()));
        if !known {
            return Err(AuthFailure::Visible(
                "Authentication failed: Invalid username or password",
            ));
        }
        if !authzid.is_empty() && authzid != username {
            return Err(AuthFailure::Visible(
                "Authentication failed: Client requested an authorization id that is different from username",
            ));
        }
        Ok(username.to_string())
    }
}

/// The key of listener `listener`'s JAAS entry for `mechanism`:
/// `listener.name.<listener>.<mechanism>.sasl.jaas.config`, lower case.
pub fn jaas_key(listener: &str, mechanism: &str) -> String {
    mechanism_key(listener, mechanism, "sasl.jaas.config")
}

/// The one login module of a listener's JAAS entry (Kafka's
/// `JaasContext`: "should be 1 module").
pub(crate) fn single_entry(text: &str) -> Result<JaasEntry, String> {
    let mut entries = parse_jaas(text)?;
    match entries.len() {
        1 => Ok(entries.remove(0)),
        n => Err(format!(
            "JAAS config contains {n} login modules, should be 1 module"
        )),
    }
}

/// Checks a `listener.name.<l>.<mechanism>.sasl.jaas.config` value when the
/// configuration is read.
///
/// # Errors
/// The parse error, without the value.
pub fn check_jaas(text: &str) -> Result<(), String> {
    single_entry(text).map(drop)
}

/// Whether `a` and `b` are equal, in time that does not depend on where
/// they differ.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Looks a user's SCRAM credential for a mechanism up (the broker's
/// metadata image).
pub type ScramCredentials<'a> =
    &'a (dyn Fn(&str, ScramMechanism) -> Option<ScramCredential> + Sync);

/// One connection's exchange for the mechanism its handshake chose.
enum Exchange {
    Plain,
    Scram(ScramServer),
}

/// What one client token leads to.
enum Step {
    /// Send this token and wait for the next one.
    Challenge(Vec<u8>),
    /// Authenticated as `user`; send `token` (empty for PLAIN).
    Authenticated { user: String, token: Vec<u8> },
    /// Refused: `logged` goes to the broker's log, `told` to the client.
    Failed { logged: String, told: String },
}

impl Exchange {
    /// The exchange of an enabled mechanism (upper case).
    fn new(mechanism: &str) -> Exchange {
        match ScramMechanism::from_name(mechanism) {
            Some(m) => Exchange::Scram(ScramServer::new(m)),
            None => Exchange::Plain,
        }
    }

    fn step(
        &mut self,
        sasl: &SaslListener,
        token: &[u8],
        credentials: ScramCredentials<'_>,
    ) -> Step {
        let (mechanism, outcome) = match self {
            Exchange::Plain => (
                "PLAIN",
                sasl.check_plain(token).map(|user| Step::Authenticated {
                    user,
                    token: Vec::new(),
                }),
            ),
            Exchange::Scram(server) => {
                let mechanism = server.mechanism();
                let outcome = server
                    .step(token, |user| credentials(user, mechanism))
                    .map(|step| match step {
                        ScramStep::Challenge(challenge) => Step::Challenge(challenge),
                        ScramStep::Authenticated { user, server_final } => Step::Authenticated {
                            user,
                            token: server_final,
                        },
                    });
                (mechanism.name(), outcome)
            }
        };
        match outcome {
            Ok(step) => step,
            // Kafka's SaslServerAuthenticator tells the client only this
            // for a SaslException.
            Err(AuthFailure::Invalid(reason)) => Step::Failed {
                logged: reason,
                told: format!(
                    "Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
                ),
            },
            Err(AuthFailure::Visible(message)) => Step::Failed {
                logged: message.into(),
                told: message.into(),
            },
        }
    }
}

/// Runs the SASL exchange on `stream` until the client is authenticated
/// (returns its principal, `User:<name>`) or the connection must close
/// (returns the logged reason). SCRAM credentials come from `credentials`.
pub async fn authenticate<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    sasl: &Arc<SaslListener>,
    credentials: ScramCredentials<'_>,
    peer: SocketAddr,
    idle: Duration,
) -> Result<Arc<SaslSession>, String> {
    let mut exchange: Option<(String, Exchange)> = None;
    // The handshake was v0: the tokens that follow are bare.
    let mut raw_tokens = false;
    loop {
        let frame = tokio::time::timeout(idle, read_request(stream, sasl.max_receive))
            .await
            .map_err(|_| "no SASL request within connections.max.idle.ms".to_string())??;
        if let (Some((mechanism, state)), true) = (exchange.as_mut(), raw_tokens) {
            // After a SaslHandshake v0 the tokens come bare (size-prefixed,
            // no request header) and so do the answers; a failure closes
            // the connection without one (Kafka's pre-KIP-152 exchange).
            match state.step(sasl, &frame, credentials) {
                Step::Challenge(token) => write(stream, &size_prefixed(&token)).await?,
                Step::Authenticated { user, token } => {
                    write(stream, &size_prefixed(&token)).await?;
                    return Ok(SaslSession::new(sasl, mechanism, &user));
                }
                Step::Failed { logged, .. } => {
                    info!(%peer, %mechanism, "Failed authentication with {peer} ({logged})");
                    metrics::counter!("weir_sasl_authentication_failures_total").increment(1);
                    return Err("SASL authentication failed".into());
                }
            }
            continue;
        }
        let request = match codec::decode_request(frame.clone()) {
            Ok(request) => request,
            Err(e) => {
                // ApiVersions of an unknown version gets its KIP-511 answer.
                return match crate::dispatch::decode_failure(&frame, e) {
                    crate::dispatch::Response::Frame(bytes) => {
                        write(stream, &bytes).await?;
                        continue;
                    }
                    _ => Err("undecodable request before authentication".into()),
                };
            }
        };
        let (api_key, version) = (request.api_key, request.api_version);
        let correlation_id = request.header.correlation_id;
        let respond = |body: ResponseKind| {
            codec::encode_response(api_key, version, correlation_id, &body)
                .map_err(|e| format!("cannot encode {api_key:?}: {e}"))
        };
        match request.body {
            RequestKind::ApiVersions(r) => {
                let body =
                    ResponseKind::ApiVersions(crate::handlers::api_versions::handle(version, r));
                write(stream, &respond(body)?).await?;
            }
            RequestKind::SaslHandshake(r) if exchange.is_none() => {
                let wanted = r.mechanism.to_ascii_uppercase();
                let mut response = SaslHandshakeResponse::default();
                response.mechanisms = sasl
                    .mechanisms
                    .iter()
                    .map(|m| crate::handlers::str_bytes(m.clone()))
                    .collect();
                let enabled = sasl.mechanisms.contains(&wanted);
                if !enabled {
                    response.error_code = UNSUPPORTED_SASL_MECHANISM;
                }
                write(stream, &respond(ResponseKind::SaslHandshake(response))?).await?;
                if !enabled {
                    return Err(format!(
                        "unsupported SASL mechanism {}",
                        r.mechanism.as_str()
                    ));
                }
                exchange = Some((wanted.clone(), Exchange::new(&wanted)));
                raw_tokens = version == 0;
            }
            RequestKind::SaslAuthenticate(r) if exchange.is_some() => {
                let Some((mechanism, state)) = exchange.as_mut() else {
                    unreachable!("guarded");
                };
                let mut response = SaslAuthenticateResponse::default();
                match state.step(sasl, &r.auth_bytes, credentials) {
                    Step::Challenge(token) => {
                        response.auth_bytes = token.into();
                        write(stream, &respond(ResponseKind::SaslAuthenticate(response))?).await?;
                    }
                    Step::Authenticated { user, token } => {
                        response.auth_bytes = token.into();
                        if version >= 1 {
                            response.session_lifetime_ms = sasl.session_lifetime_ms(mechanism);
                        }
                        write(stream, &respond(ResponseKind::SaslAuthenticate(response))?).await?;
                        return Ok(SaslSession::new(sasl, mechanism, &user));
                    }
                    Step::Failed { logged, told } => {
                        info!(%peer, %mechanism, "Failed authentication with {peer} ({logged})");
                        metrics::counter!("weir_sasl_authentication_failures_total").increment(1);
                        response.error_code = SASL_AUTHENTICATION_FAILED;
                        response.error_message = Some(crate::handlers::str_bytes(told));
                        // Kafka delays the answer to a failed authentication
                        // (connection.failed.authentication.delay.ms) to slow
                        // password guessing.
                        tokio::time::sleep(sasl.failed_delay).await;
                        write(stream, &respond(ResponseKind::SaslAuthenticate(response))?).await?;
                        return Err("SASL authentication failed".into());
                    }
                }
            }
            body => {
                // Kafka's SaslServerAuthenticator: before the handshake such
                // a request closes the connection; after it, it is answered
                // ILLEGAL_SASL_STATE first.
                if exchange.is_some() {
                    if let Some(answer) = weir_protocol_compat::error_response::error_response(
                        &body,
                        version,
                        ILLEGAL_SASL_STATE,
                    ) {
                        write(stream, &respond(answer)?).await?;
                    }
                }
                return Err(format!(
                    "unexpected {api_key:?} request during SASL authentication"
                ));
            }
        }
    }
}

/// `token` with its 4-byte big-endian size in front (a bare token of the
/// v0 exchange).
fn size_prefixed(token: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + token.len());
    out.extend_from_slice(&(token.len() as i32).to_be_bytes());
    out.extend_from_slice(token);
    out
}

/// Each mechanism's session lifetime (KIP-368): the first of
/// `listener.name.<listener>.<mechanism>.connections.max.reauth.ms`,
/// `listener.name.<listener>.connections.max.reauth.ms` and
/// `connections.max.reauth.ms` that is set, as Kafka's
/// `ListenerName.saslMechanismConfigPrefix` lookup; mechanisms whose value
/// is not positive are left out (their sessions do not expire).
///
/// # Errors
/// `(key, reason)` for a mechanism-prefixed value that is not a number.
fn session_lifetimes(
    config: &BrokerConfig,
    listener: &str,
    mechanisms: &[String],
) -> Result<BTreeMap<String, Duration>, (String, String)> {
    let mut lifetimes = BTreeMap::new();
    for mechanism in mechanisms {
        let key = mechanism_key(listener, mechanism, "connections.max.reauth.ms");
        let ms = match config.explicit.get(&key) {
            Some(value) => value
                .trim()
                .parse::<i64>()
                .map_err(|e| (key.clone(), format!("not a number of ms: {e}")))?,
            None => match config.listener_value(listener, "connections.max.reauth.ms") {
                Some(value) => value.parse::<i64>().unwrap_or(0),
                None => config.connections_max_reauth_ms,
            },
        };
        if let Ok(ms) = u64::try_from(ms) {
            if ms > 0 {
                lifetimes.insert(mechanism.clone(), Duration::from_millis(ms));
            }
        }
    }
    Ok(lifetimes)
}

/// `listener.name.<listener>.<mechanism>.<key>` (both lower case), Kafka's
/// per-mechanism form of a SASL key.
pub fn mechanism_key(listener: &str, mechanism: &str, key: &str) -> String {
    format!(
        "{}{}.{}.{key}",
        crate::config::LISTENER_PREFIX,
        listener.to_ascii_lowercase(),
        mechanism.to_ascii_lowercase()
    )
}

impl SaslListener {
    /// How long a session authenticated with `mechanism` lasts, `None`
    /// when it does not expire (KIP-368).
    fn session_lifetime(&self, mechanism: &str) -> Option<Duration> {
        self.session_lifetimes.get(mechanism).copied()
    }

    /// `session_lifetime_ms` of a successful SaslAuthenticate (v1+): the
    /// session's lifetime, 0 without re-authentication (KIP-368).
    fn session_lifetime_ms(&self, mechanism: &str) -> i64 {
        self.session_lifetime(mechanism)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}

/// Kafka's shortest time between two re-authentications of a connection
/// (`KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS`); a handshake
/// sooner than this is answered as one after authentication
/// (ILLEGAL_SASL_STATE).
const MIN_REAUTH_INTERVAL: Duration = Duration::from_secs(1);

/// An authenticated SASL connection (Kafka's `SaslServerAuthenticator`
/// after its exchange): who it is, with which mechanism, and, with
/// `connections.max.reauth.ms`, until when (KIP-368). A connection whose
/// session expired may send only a SaslHandshake, which begins
/// re-authentication with the same mechanism; any other request closes it
/// (Kafka's "Disconnecting expired channel").
#[derive(Debug)]
pub struct SaslSession {
    listener: Arc<SaslListener>,
    mechanism: String,
    principal: String,
    /// The mechanism's session lifetime on this listener, looked up once
    /// (checked before every request).
    lifetime: Option<Duration>,
    state: std::sync::Mutex<SessionState>,
}

#[derive(Debug, Default)]
struct SessionState {
    expires_at: Option<Instant>,
    /// A re-authentication in progress (after its SaslHandshake).
    reauthenticating: Option<Exchange>,
    last_reauth_start: Option<Instant>,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Exchange::Plain => "Plain",
            Exchange::Scram(_) => "Scram",
        })
    }
}

/// What a SaslHandshake or SaslAuthenticate on an authenticated connection
/// leads to.
#[derive(Debug)]
pub enum Reauthentication {
    /// Re-authentication is not under way (or not allowed now): answer as
    /// after authentication ([`illegal_state`]).
    NotServed,
    /// Answer this and go on.
    Answer(ResponseKind),
    /// Answer this after `delay`, then close the connection (the reason is
    /// logged).
    Refuse {
        /// The answer.
        answer: ResponseKind,
        /// `connection.failed.authentication.delay.ms` for a failed
        /// authentication, else zero.
        delay: Duration,
        /// Why, for the log.
        reason: String,
    },
}

impl SaslSession {
    fn new(listener: &Arc<SaslListener>, mechanism: &str, user: &str) -> Arc<SaslSession> {
        let lifetime = listener.session_lifetime(mechanism);
        Arc::new(SaslSession {
            listener: listener.clone(),
            mechanism: mechanism.to_string(),
            principal: format!("User:{user}"),
            lifetime,
            state: std::sync::Mutex::new(SessionState {
                expires_at: lifetime.map(|d| Instant::now() + d),
                ..SessionState::default()
            }),
        })
    }

    /// The principal, `User:<name>`.
    pub fn principal(&self) -> &str {
        &self.principal
    }

    fn state(&self) -> std::sync::MutexGuard<'_, SessionState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the session expires (`connections.max.reauth.ms` > 0); a
    /// session that does not is never checked per request.
    pub fn expires(&self) -> bool {
        self.lifetime.is_some()
    }

    /// Whether a request with API key `api_key` may be served at `now`:
    /// before the session expires any may; after, only a SaslHandshake, or
    /// a SaslAuthenticate of a re-authentication under way.
    pub fn admits(&self, api_key: i16, now: Instant) -> bool {
        let state = self.state();
        let expired = state.expires_at.is_some_and(|at| now >= at);
        !expired
            || api_key == kafka_protocol::messages::ApiKey::SaslHandshake as i16
            || (api_key == kafka_protocol::messages::ApiKey::SaslAuthenticate as i16
                && state.reauthenticating.is_some())
    }

    /// Serves a SaslHandshake or SaslAuthenticate of version `version` on
    /// this authenticated connection (KIP-368), as Kafka's
    /// `KafkaChannel.maybeBeginServerReauthentication` and
    /// `SaslServerAuthenticator`: a handshake begins a re-authentication
    /// when the listener has a session lifetime and the last one began at
    /// least a second ago; it must name the session's mechanism. The
    /// exchange then runs as the first one did; at its end the principal
    /// must be the same ("Cannot change principals during
    /// re-authentication"), and the session gets a new lifetime.
    pub fn reauthenticate(
        &self,
        body: &RequestKind,
        version: i16,
        credentials: ScramCredentials<'_>,
    ) -> Reauthentication {
        let mut state = self.state();
        match body {
            RequestKind::SaslHandshake(r) => {
                let now = Instant::now();
                let too_soon = state
                    .last_reauth_start
                    .is_some_and(|at| now.duration_since(at) < MIN_REAUTH_INTERVAL);
                if self.lifetime.is_none() || too_soon {
                    return Reauthentication::NotServed;
                }
                state.last_reauth_start = Some(now);
                let wanted = r.mechanism.to_ascii_uppercase();
                let mut response = SaslHandshakeResponse::default();
                response.mechanisms = self
                    .listener
                    .mechanisms
                    .iter()
                    .map(|m| crate::handlers::str_bytes(m.clone()))
                    .collect();
                if wanted != self.mechanism {
                    response.error_code = UNSUPPORTED_SASL_MECHANISM;
                    return Reauthentication::Refuse {
                        answer: ResponseKind::SaslHandshake(response),
                        delay: Duration::ZERO,
                        reason: format!(
                            "re-authentication with {} after {}: the mechanism may not change",
                            r.mechanism.as_str(),
                            self.mechanism
                        ),
                    };
                }
                state.reauthenticating = Some(Exchange::new(&wanted));
                Reauthentication::Answer(ResponseKind::SaslHandshake(response))
            }
            RequestKind::SaslAuthenticate(r) => {
                let Some(exchange) = state.reauthenticating.as_mut() else {
                    return Reauthentication::NotServed;
                };
                let mut response = SaslAuthenticateResponse::default();
                let refuse =
                    |mut response: SaslAuthenticateResponse, told: String, logged: String| {
                        metrics::counter!("weir_sasl_authentication_failures_total").increment(1);
                        response.error_code = SASL_AUTHENTICATION_FAILED;
                        response.error_message = Some(crate::handlers::str_bytes(told));
                        Reauthentication::Refuse {
                            answer: ResponseKind::SaslAuthenticate(response),
                            delay: self.listener.failed_delay,
                            reason: format!("re-authentication failed: {logged}"),
                        }
                    };
                match exchange.step(&self.listener, &r.auth_bytes, credentials) {
                    Step::Challenge(token) => {
                        response.auth_bytes = token.into();
                        Reauthentication::Answer(ResponseKind::SaslAuthenticate(response))
                    }
                    Step::Failed { logged, told } => {
                        state.reauthenticating = None;
                        refuse(response, told, logged)
                    }
                    Step::Authenticated { user, token } => {
                        state.reauthenticating = None;
                        let principal = format!("User:{user}");
                        if principal != self.principal {
                            let message = format!(
                                "Cannot change principals during re-authentication from {}: {principal}",
                                self.principal
                            );
                            return refuse(response, message.clone(), message);
                        }
                        state.expires_at = self.lifetime.map(|d| Instant::now() + d);
                        metrics::counter!("weir_sasl_reauthentications_total").increment(1);
                        response.auth_bytes = token.into();
                        if version >= 1 {
                            response.session_lifetime_ms =
                                self.listener.session_lifetime_ms(&self.mechanism);
                        }
                        Reauthentication::Answer(ResponseKind::SaslAuthenticate(response))
                    }
                }
            }
            _ => Reauthentication::NotServed,
        }
    }
}

/// Reads one size-prefixed request, exactly (nothing after it).
async fn read_request<S: AsyncRead + Unpin>(stream: &mut S, max: usize) -> Result<Bytes, String> {
    let size = stream
        .read_i32()
        .await
        .map_err(|e| format!("read failed: {e}"))?;
    let size = usize::try_from(size).map_err(|_| format!("invalid request size {size}"))?;
    if size > max {
        return Err(format!(
            "request of {size} bytes during SASL authentication exceeds sasl.server.max.receive.size ({max})"
        ));
    }
    // The buffer grows with the bytes that arrive, never from the size
    // prefix alone: a client that sends only prefixes must not make each
    // of its connections hold `sasl.server.max.receive.size` bytes.
    let mut frame = Vec::new();
    let read = (&mut *stream)
        .take(size as u64)
        .read_to_end(&mut frame)
        .await
        .map_err(|e| format!("read failed: {e}"))?;
    if read < size {
        return Err("client closed during a request".into());
    }
    Ok(Bytes::from(frame))
}

async fn write<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8]) -> Result<(), String> {
    stream
        .write_all(bytes)
        .await
        .map_err(|e| format!("write failed: {e}"))?;
    stream
        .flush()
        .await
        .map_err(|e| format!("write failed: {e}"))
}

/// The answer to a SaslHandshake or SaslAuthenticate that arrives after
/// authentication, or on a listener without SASL: ILLEGAL_SASL_STATE, as
/// Kafka's `KafkaApis` (re-authentication is not served).
pub fn illegal_state(body: &RequestKind) -> Option<ResponseKind> {
    match body {
        RequestKind::SaslHandshake(_) => {
            let mut response = SaslHandshakeResponse::default();
            response.error_code = ILLEGAL_SASL_STATE;
            Some(ResponseKind::SaslHandshake(response))
        }
        RequestKind::SaslAuthenticate(_) => {
            let mut response = SaslAuthenticateResponse::default();
            response.error_code = ILLEGAL_SASL_STATE;
            response.error_message = Some(crate::handlers::str_bytes(
                "SaslAuthenticate request received after successful authentication",
            ));
            Some(ResponseKind::SaslAuthenticate(response))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::{
        ApiKey, ApiVersionsRequest, MetadataRequest, RequestHeader, SaslAuthenticateRequest,
        SaslHandshakeRequest,
    };
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret"
        user_admin="admin-secret" user_alice="alice \"quoted\" secret";"#;

    fn listener(extra: &[(&str, &str)]) -> Result<SaslListener, SaslConfigError> {
        let mut pairs = vec![
            ("listeners", "SASL_PLAINTEXT://127.0.0.1:0"),
            ("sasl.enabled.mechanisms", "PLAIN"),
            ("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS),
        ];
        for (k, v) in extra {
            pairs.retain(|(key, _)| key != k);
            pairs.push((k, v));
        }
        let config = BrokerConfig::from_pairs(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
        .unwrap();
        SaslListener::from_config(&config, "SASL_PLAINTEXT")
    }

    #[test]
    fn jaas_entries_parse_as_kafkas_tokenizer_reads_them() {
        let entries = parse_jaas(JAAS).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].login_module, PLAIN_LOGIN_MODULE);
        assert_eq!(entries[0].flag, "required");
        assert_eq!(entries[0].options["user_alice"], r#"alice "quoted" secret"#);
        assert_eq!(entries[0].options["username"], "admin");
        let bare = parse_jaas("a.B optional k=v; c.D Required;").unwrap();
        assert_eq!(bare.len(), 2);
        assert_eq!(bare[0].options["k"], "v");
        assert_eq!(bare[1].flag, "required");
        for bad in [
            "a.B required k=\"v\"",
            "a.B always;",
            "a.B required k;",
            "a.B required k=\"v;",
        ] {
            let err = parse_jaas(bad).unwrap_err();
            assert!(!err.contains("v\""), "{bad}: {err} quotes a value");
        }
    }

    /// Kafka's `JaasConfig` reads with `java.io.StreamTokenizer`, whose
    /// quote characters are `"` and `'`: a value in single quotes is the
    /// text between them (a user's `password='s3cret'` logged in with the
    /// quotes as part of the password before).
    #[test]
    fn jaas_values_in_single_quotes_are_read_as_kafka_reads_them() {
        let entries = parse_jaas(
            "org.apache.kafka.common.security.plain.PlainLoginModule required \
             username='admin' password='a \\'quoted\\' secret' user_bob=\"b'c\";",
        )
        .unwrap();
        assert_eq!(entries[0].options["username"], "admin");
        assert_eq!(entries[0].options["password"], "a 'quoted' secret");
        assert_eq!(entries[0].options["user_bob"], "b'c");
        assert!(parse_jaas("a.B required k='v;").is_err());
    }

    #[test]
    fn plain_checks_users_of_the_jaas_entry_with_kafkas_messages() {
        let sasl = listener(&[]).unwrap();
        assert_eq!(sasl.check_plain(b"\0admin\0admin-secret").unwrap(), "admin");
        assert_eq!(
            sasl.check_plain(b"alice\0alice\0alice \"quoted\" secret")
                .unwrap(),
            "alice"
        );
        let visible = AuthFailure::Visible;
        let invalid = |m: &str| AuthFailure::Invalid(m.to_string());
        let refused = [
            (&b"\0admin\0wrong"[..], visible("Authentication failed: Invalid username or password")),
            (b"\0mallory\0admin-secret", visible("Authentication failed: Invalid username or password")),
            // The password keeps a third NUL, as Kafka's split.
            (b"\0admin\0admin-secret\0", visible("Authentication failed: Invalid username or password")),
            (b"\0\0x", invalid("Authentication failed: username not specified")),
            (b"\0admin\0", invalid("Authentication failed: password not specified")),
            // One token: Kafka reads it as the authorization id.
            (b"admin-secret", invalid("Authentication failed: username not specified")),
            (
                b"bob\0admin\0admin-secret",
                visible("Authentication failed: Client requested an authorization id that is different from username"),
            ),
        ];
        for (message, expected) in refused {
            assert_eq!(sasl.check_plain(message), Err(expected), "{message:?}");
        }
    }

    #[test]
    fn sasl_settings_that_cannot_be_served_are_refused_naming_the_key() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[("sasl.enabled.mechanisms", "GSSAPI")],
                "sasl.enabled.mechanisms",
            ),
            (
                &[("sasl.enabled.mechanisms", "PLAIN,OAUTHBEARER")],
                "sasl.enabled.mechanisms",
            ),
            (
                &[(
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                    "a.B required;",
                )],
                "plain.sasl.jaas.config",
            ),
        ];
        for (extra, key) in cases {
            let err = listener(extra).unwrap_err().to_string();
            assert!(err.contains(key), "{extra:?}: {err}");
        }
        let config = BrokerConfig::from_pairs(vec![
            ("listeners".into(), "SASL_PLAINTEXT://127.0.0.1:0".into()),
            ("sasl.enabled.mechanisms".into(), "PLAIN".into()),
        ])
        .unwrap();
        let err = SaslListener::from_config(&config, "SASL_PLAINTEXT").unwrap_err();
        assert!(err.to_string().contains("no JAAS entry"), "{err}");
        let err = BrokerConfig::from_pairs(vec![(
            "listener.name.sasl_plaintext.plain.sasl.jaas.config".into(),
            "a.B required password=\"hunter2\"".into(),
        )])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("[hidden]") && !err.contains("hunter2"),
            "{err}"
        );
    }

    /// Encodes a request frame (size prefix included).
    fn frame<R: Encodable>(
        api_key: ApiKey,
        version: i16,
        correlation_id: i32,
        body: &R,
    ) -> Vec<u8> {
        let mut header = RequestHeader::default();
        header.request_api_key = api_key as i16;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, api_key.request_header_version(version))
            .unwrap();
        body.encode(&mut buf, version).unwrap();
        let mut out = (buf.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&buf);
        out
    }

    /// Reads one response frame's body (after the v0 response header).
    async fn response<S: AsyncRead + Unpin>(client: &mut S) -> Option<Bytes> {
        let size = client.read_i32().await.ok()?;
        let mut body = vec![0u8; size as usize];
        client.read_exact(&mut body).await.ok()?;
        Some(Bytes::from(body).split_off(4))
    }

    /// Runs `authenticate` against what `client` does; returns its outcome.
    async fn exchange<F, Fut>(client: F) -> Result<String, String>
    where
        F: FnOnce(tokio::io::DuplexStream) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let sasl =
            Arc::new(listener(&[("connection.failed.authentication.delay.ms", "0")]).unwrap());
        let (server, client_side) = tokio::io::duplex(64 * 1024);
        let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
        // The server's end is dropped once it returns, as the connection
        // closes, so a client waiting for an answer sees the end.
        let server = async move {
            let mut server = server;
            authenticate(
                &mut server,
                &sasl,
                &|_, _| None,
                peer,
                Duration::from_secs(5),
            )
            .await
            .map(|session| session.principal().to_string())
        };
        let (outcome, ()) = tokio::join!(server, client(client_side));
        outcome
    }

    fn handshake(mechanism: &'static str) -> Vec<u8> {
        let mut request = SaslHandshakeRequest::default();
        request.mechanism = StrBytes::from_static_str(mechanism);
        frame(ApiKey::SaslHandshake, 1, 2, &request)
    }

    fn plain(message: &'static [u8], version: i16) -> Vec<u8> {
        let mut request = SaslAuthenticateRequest::default();
        request.auth_bytes = Bytes::from_static(message);
        frame(ApiKey::SaslAuthenticate, version, 3, &request)
    }

    #[tokio::test]
    async fn api_versions_then_plain_authenticates_the_user() {
        let outcome = exchange(|mut client| async move {
            client
                .write_all(&frame(
                    ApiKey::ApiVersions,
                    3,
                    1,
                    &ApiVersionsRequest::default(),
                ))
                .await
                .unwrap();
            response(&mut client).await.expect("ApiVersions answered");
            client.write_all(&handshake("PLAIN")).await.unwrap();
            let mut body = response(&mut client).await.unwrap();
            let answer = SaslHandshakeResponse::decode(&mut body, 1).unwrap();
            assert_eq!(answer.error_code, 0);
            assert_eq!(answer.mechanisms, [StrBytes::from_static_str("PLAIN")]);
            client
                .write_all(&plain(b"\0alice\0alice \"quoted\" secret", 2))
                .await
                .unwrap();
            let mut body = response(&mut client).await.unwrap();
            // v2 is flexible: a tagged-field section follows the header.
            let _tags = body.split_to(1);
            let answer = SaslAuthenticateResponse::decode(&mut body, 2).unwrap();
            assert_eq!(answer.error_code, 0);
        })
        .await;
        assert_eq!(outcome.unwrap(), "User:alice");
    }

    #[tokio::test]
    async fn after_a_v0_handshake_the_plain_token_comes_bare() {
        let outcome = exchange(|mut client| async move {
            let mut request = SaslHandshakeRequest::default();
            request.mechanism = StrBytes::from_static_str("PLAIN");
            client
                .write_all(&frame(ApiKey::SaslHandshake, 0, 2, &request))
                .await
                .unwrap();
            let mut body = response(&mut client).await.unwrap();
            assert_eq!(
                SaslHandshakeResponse::decode(&mut body, 0)
                    .unwrap()
                    .error_code,
                0
            );
            let token = b"\0admin\0admin-secret";
            client
                .write_all(&(token.len() as i32).to_be_bytes())
                .await
                .unwrap();
            client.write_all(token).await.unwrap();
            assert_eq!(client.read_i32().await.unwrap(), 0, "an empty token back");
        })
        .await;
        assert_eq!(outcome.unwrap(), "User:admin");
    }

    #[tokio::test]
    async fn a_wrong_password_is_answered_58_and_closes() {
        let outcome = exchange(|mut client| async move {
            client.write_all(&handshake("PLAIN")).await.unwrap();
            response(&mut client).await.unwrap();
            client
                .write_all(&plain(b"\0alice\0guess", 1))
                .await
                .unwrap();
            let mut body = response(&mut client).await.unwrap();
            let answer = SaslAuthenticateResponse::decode(&mut body, 1).unwrap();
            assert_eq!(answer.error_code, SASL_AUTHENTICATION_FAILED);
            assert_eq!(
                answer.error_message.as_deref(),
                Some("Authentication failed: Invalid username or password")
            );
        })
        .await;
        assert!(outcome.is_err());
    }

    #[tokio::test]
    async fn an_unsupported_mechanism_gets_33_with_the_enabled_list_and_closes() {
        let outcome = exchange(|mut client| async move {
            client.write_all(&handshake("SCRAM-SHA-256")).await.unwrap();
            let mut body = response(&mut client).await.unwrap();
            let answer = SaslHandshakeResponse::decode(&mut body, 1).unwrap();
            assert_eq!(answer.error_code, UNSUPPORTED_SASL_MECHANISM);
            assert_eq!(answer.mechanisms, [StrBytes::from_static_str("PLAIN")]);
        })
        .await;
        assert!(outcome.unwrap_err().contains("SCRAM-SHA-256"));
    }

    #[tokio::test]
    async fn another_request_after_the_handshake_is_answered_34_and_closes() {
        let outcome = exchange(|mut client| async move {
            client.write_all(&handshake("PLAIN")).await.unwrap();
            response(&mut client).await.unwrap();
            client
                .write_all(&frame(ApiKey::Metadata, 4, 5, &MetadataRequest::default()))
                .await
                .unwrap();
            let mut body = response(&mut client).await.expect("an error answer");
            let answer = kafka_protocol::messages::MetadataResponse::decode(&mut body, 4).unwrap();
            assert!(answer.brokers.is_empty());
            assert!(response(&mut client).await.is_none(), "then closed");
        })
        .await;
        assert!(outcome.is_err());
    }

    #[tokio::test]
    async fn a_request_cut_short_closes_the_connection() {
        let outcome = exchange(|mut client| async move {
            let request = handshake("PLAIN");
            client
                .write_all(&request[..request.len() - 1])
                .await
                .unwrap();
            client.shutdown().await.unwrap();
        })
        .await;
        assert_eq!(outcome.unwrap_err(), "client closed during a request");
    }

    #[tokio::test]
    async fn other_requests_before_authentication_close_without_an_answer() {
        for first in [
            frame(ApiKey::Metadata, 12, 1, &MetadataRequest::default()),
            plain(b"\0alice\0x", 1),
        ] {
            let outcome = exchange(|mut client| async move {
                client.write_all(&first).await.unwrap();
                assert!(response(&mut client).await.is_none(), "no answer");
            })
            .await;
            assert!(outcome.unwrap_err().contains("during SASL authentication"));
        }
        let oversized = exchange(|mut client| async move {
            client
                .write_all(&(1_000_000i32).to_be_bytes())
                .await
                .unwrap();
            assert!(response(&mut client).await.is_none());
        })
        .await;
        assert!(oversized
            .unwrap_err()
            .contains("sasl.server.max.receive.size"));
    }

    fn reauth_listener(ms: &str) -> Arc<SaslListener> {
        Arc::new(
            listener(&[
                ("connections.max.reauth.ms", ms),
                ("connection.failed.authentication.delay.ms", "0"),
            ])
            .unwrap(),
        )
    }

    fn handshake_body(mechanism: &'static str) -> RequestKind {
        RequestKind::SaslHandshake(
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism)),
        )
    }

    fn authenticate_body(token: &'static [u8]) -> RequestKind {
        RequestKind::SaslAuthenticate(
            SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(token)),
        )
    }

    fn answer_code(reauth: &Reauthentication) -> Option<i16> {
        let kind = match reauth {
            Reauthentication::Answer(kind) | Reauthentication::Refuse { answer: kind, .. } => kind,
            Reauthentication::NotServed => return None,
        };
        Some(match kind {
            ResponseKind::SaslHandshake(r) => r.error_code,
            ResponseKind::SaslAuthenticate(r) => r.error_code,
            other => panic!("{other:?}"),
        })
    }

    /// KIP-368's per-listener and per-mechanism forms, as Kafka reads them
    /// (`listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms` in
    /// its docs): the mechanism-prefixed key wins over the
    /// listener-prefixed one, which wins over the broker-wide one (both
    /// prefixed forms stopped the start as unknown keys before).
    #[test]
    fn connections_max_reauth_ms_is_read_per_listener_and_mechanism() {
        let sasl = listener(&[
            (
                "sasl.enabled.mechanisms",
                "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            ),
            ("connections.max.reauth.ms", "1000"),
            (
                "listener.name.sasl_plaintext.connections.max.reauth.ms",
                "30000",
            ),
            (
                "listener.name.sasl_plaintext.plain.connections.max.reauth.ms",
                "60000",
            ),
            (
                "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms",
                "0",
            ),
        ])
        .unwrap();
        assert_eq!(sasl.session_lifetime_ms("PLAIN"), 60000);
        assert_eq!(sasl.session_lifetime_ms("SCRAM-SHA-256"), 30000);
        assert_eq!(sasl.session_lifetime_ms("SCRAM-SHA-512"), 0);
        let session = SaslSession::new(&Arc::new(sasl), "SCRAM-SHA-512", "alice");
        assert!(!session.expires());
    }

    /// KIP-368: a session with `connections.max.reauth.ms` re-authenticates
    /// with its mechanism and principal and gets a new lifetime; too soon
    /// after the last one, or without a lifetime, the handshake is not
    /// served (ILLEGAL_SASL_STATE in dispatch).
    #[test]
    fn a_session_re_authenticates_with_the_same_mechanism_and_principal() {
        let no_creds = |_: &str, _| None;
        let sasl = reauth_listener("60000");
        assert_eq!(sasl.session_lifetime_ms("PLAIN"), 60000);
        let session = SaslSession::new(&sasl, "PLAIN", "alice");
        let begun = session.reauthenticate(&handshake_body("PLAIN"), 1, &no_creds);
        assert!(matches!(begun, Reauthentication::Answer(_)));
        assert_eq!(answer_code(&begun), Some(0));
        let done = session.reauthenticate(
            &authenticate_body(b"\0alice\0alice \"quoted\" secret"),
            2,
            &no_creds,
        );
        match done {
            Reauthentication::Answer(ResponseKind::SaslAuthenticate(r)) => {
                assert_eq!((r.error_code, r.session_lifetime_ms), (0, 60000));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(
                session.reauthenticate(&handshake_body("PLAIN"), 1, &no_creds),
                Reauthentication::NotServed
            ),
            "within a second of the last re-authentication"
        );
        assert!(matches!(
            session.reauthenticate(&authenticate_body(b"x"), 2, &no_creds),
            Reauthentication::NotServed
        ));

        let without = Arc::new(listener(&[]).unwrap());
        let plain_session = SaslSession::new(&without, "PLAIN", "alice");
        assert!(matches!(
            plain_session.reauthenticate(&handshake_body("PLAIN"), 1, &no_creds),
            Reauthentication::NotServed
        ));
    }

    #[test]
    fn another_mechanism_or_principal_is_refused_and_closes() {
        let no_creds = |_: &str, _| None;
        let sasl = reauth_listener("60000");
        let session = SaslSession::new(&sasl, "PLAIN", "alice");
        let other = session.reauthenticate(&handshake_body("SCRAM-SHA-256"), 1, &no_creds);
        assert!(matches!(other, Reauthentication::Refuse { .. }));
        assert_eq!(answer_code(&other), Some(UNSUPPORTED_SASL_MECHANISM));

        let session = SaslSession::new(&sasl, "PLAIN", "alice");
        session.reauthenticate(&handshake_body("PLAIN"), 1, &no_creds);
        let as_admin =
            session.reauthenticate(&authenticate_body(b"\0admin\0admin-secret"), 2, &no_creds);
        match as_admin {
            Reauthentication::Refuse {
                answer: ResponseKind::SaslAuthenticate(r),
                ..
            } => {
                assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
                assert_eq!(
                    r.error_message.as_deref(),
                    Some("Cannot change principals during re-authentication from User:alice: User:admin")
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_expired_session_admits_only_re_authentication() {
        let no_creds = |_: &str, _| None;
        let sasl = reauth_listener("1000");
        let session = SaslSession::new(&sasl, "PLAIN", "alice");
        let now = Instant::now();
        let later = now + Duration::from_secs(2);
        let (metadata, handshake, authenticate) = (3, 17, 36);
        assert!(session.admits(metadata, now));
        assert!(!session.admits(metadata, later));
        assert!(session.admits(handshake, later));
        assert!(
            !session.admits(authenticate, later),
            "no re-authentication under way"
        );
        session.reauthenticate(&handshake_body("PLAIN"), 1, &no_creds);
        assert!(session.admits(authenticate, later));
        let without = Arc::new(listener(&[]).unwrap());
        assert!(SaslSession::new(&without, "PLAIN", "a")
            .admits(metadata, later + Duration::from_secs(1 << 20)));
    }
}
