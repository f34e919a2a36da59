//! TLS for listeners whose security protocol is SSL (issue 19): the rustls
//! server configuration a listener's `ssl.*` keys describe, read as Kafka
//! reads them (`listener.name.<listener>.ssl.*` first, then `ssl.*`;
//! Kafka's `SslFactory` / `DefaultSslEngineFactory`).
//!
//! What Kafka users' configurations map to:
//! - keystore: `ssl.keystore.type=PEM` with `ssl.keystore.location` (one
//!   PEM file holding the private key and the certificate chain) or inline
//!   `ssl.keystore.key` + `ssl.keystore.certificate.chain` (KIP-651); an
//!   encrypted PKCS#8 key (`ENCRYPTED PRIVATE KEY`, PBES2 with AES or
//!   PKCS#12's PBE-SHA1-3DES) is
//!   decrypted with `ssl.key.password`. JKS and PKCS12 stores are refused
//!   with an error naming the key;
//! - truststore (verifies client certificates): `ssl.truststore.type=PEM`
//!   with `ssl.truststore.location` or inline `ssl.truststore.certificates`;
//! - `ssl.client.auth`: `none`, `requested` (a certificate, when sent, must
//!   verify), `required` (mTLS: no certificate, no connection);
//! - `ssl.enabled.protocols` (TLSv1.2, TLSv1.3) and `ssl.cipher.suites` by
//!   IANA name, as the JDK names them (`TLS_AES_128_GCM_SHA256`,
//!   `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`).
//!
//! Errors name the key, never a secret's value. This module builds
//! configurations only; the handshake runs in `network::connection`.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::{BrokerConfig, SecurityProtocol, LISTENER_PREFIX};

/// Why a listener's TLS configuration cannot be built; the message names
/// the key to change.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// A key is missing, has a value Weir does not serve, or its PEM does
    /// not hold what it must.
    #[error("listener {listener}: {key}: {reason}")]
    Invalid {
        /// The listener.
        listener: String,
        /// The key (as written without the listener prefix).
        key: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A file named by a key cannot be read.
    #[error("listener {listener}: {key}: cannot read {path}: {source}")]
    Io {
        /// The listener.
        listener: String,
        /// The key naming the file.
        key: &'static str,
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// rustls refused the combination (for example a key that does not
    /// match the certificate, or no cipher suite left for a protocol).
    #[error("listener {listener}: {reason}")]
    Rustls {
        /// The listener.
        listener: String,
        /// rustls's words.
        reason: String,
    },
}

/// What an SSL or SASL_SSL listener accepts connections with: its rustls
/// configuration, replaced when its stores change
/// ([`TlsListener::reload_if_changed`], KIP-226's keystore update), and,
/// for SSL, how a client certificate names the principal. Clones share
/// the current configuration.
#[derive(Clone)]
pub struct TlsListener {
    name: Arc<str>,
    current: Arc<std::sync::RwLock<Current>>,
    /// `ssl.principal.mapping.rules` of the listener.
    pub principal_mapper: Arc<super::principal::SslPrincipalMapper>,
}

/// The configuration a listener serves now and what it was built from.
struct Current {
    acceptor: tokio_rustls::TlsAcceptor,
    /// SHA-256 over the stores' PEM text (files or inline values).
    fingerprint: Vec<u8>,
    /// The subject and alternative names of the served certificate.
    identity: CertificateIdentity,
    /// The fingerprint of stores that failed to load, so a broken file is
    /// reported once rather than at every check.
    refused: Option<Vec<u8>>,
}

/// Who the served certificate says the broker is: what Kafka's
/// `SslFactory` requires a new keystore to keep (`ssl.allow.dn.changes`,
/// `ssl.allow.san.changes`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct CertificateIdentity {
    subject: String,
    alternative_names: std::collections::BTreeSet<String>,
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener")
            .field("name", &self.name)
            .field("principal_mapper", &self.principal_mapper)
            .finish_non_exhaustive()
    }
}

/// The outcome of [`TlsListener::reload_if_changed`].
#[derive(Debug, PartialEq, Eq)]
pub enum Reload {
    /// The stores hold what the served configuration was built from.
    Unchanged,
    /// New connections get the configuration built from the new stores.
    Reloaded,
    /// The stores changed but were refused before (not reported again).
    StillRefused,
}

/// The TLS side of listener `listener`: [`server_config`] and its
/// `ssl.principal.mapping.rules`.
///
/// # Errors
/// As [`server_config`]; rules that do not parse, naming the key.
pub fn listener(config: &BrokerConfig, listener: &str) -> Result<TlsListener, TlsConfigError> {
    let keys = ListenerKeys { config, listener };
    let rules = keys.get_or("ssl.principal.mapping.rules", "DEFAULT");
    let principal_mapper = super::principal::SslPrincipalMapper::from_rules(rules)
        .map_err(|reason| keys.invalid("ssl.principal.mapping.rules", reason))?;
    let fingerprint = store_fingerprint(&keys)?;
    let (server, identity) = server_config_and_identity(config, listener)?;
    Ok(TlsListener {
        name: listener.into(),
        current: Arc::new(std::sync::RwLock::new(Current {
            acceptor: tokio_rustls::TlsAcceptor::from(server),
            fingerprint,
            identity,
            refused: None,
        })),
        principal_mapper: Arc::new(principal_mapper),
    })
}

impl TlsListener {
    /// The handshake new connections get.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .acceptor
            .clone()
    }

    /// Reads the listener's stores again (`ssl.keystore.*`,
    /// `ssl.truststore.*`, the files as they are now) and, when they
    /// changed, serves new connections with the configuration they give;
    /// connections already open keep theirs. The new certificate must
    /// keep the served one's subject and alternative names unless
    /// `ssl.allow.dn.changes` / `ssl.allow.san.changes` are true (Kafka's
    /// `SslFactory.validateReconfiguration`). Blocking file reads: call it
    /// off the runtime's workers.
    ///
    /// # Errors
    /// The new stores do not load or change the identity: the served
    /// configuration stays (the error is returned once per content).
    pub fn reload_if_changed(&self, config: &BrokerConfig) -> Result<Reload, TlsConfigError> {
        self.reload(config, false)
    }

    /// What [`reload_if_changed`](Self::reload_if_changed) would do,
    /// without serving anything new: whether the stores changed and load
    /// (AlterConfigs with `validate_only`).
    ///
    /// # Errors
    /// As [`reload_if_changed`](Self::reload_if_changed); nothing is
    /// remembered.
    pub fn check_stores(&self, config: &BrokerConfig) -> Result<Reload, TlsConfigError> {
        self.reload(config, true)
    }

    fn reload(&self, config: &BrokerConfig, dry_run: bool) -> Result<Reload, TlsConfigError> {
        let keys = ListenerKeys {
            config,
            listener: &self.name,
        };
        // The fingerprint first: stores that change while the
        // configuration is built are seen changed at the next check.
        let fingerprint = store_fingerprint(&keys)?;
        {
            let current = self.current.read().unwrap_or_else(|e| e.into_inner());
            if current.fingerprint == fingerprint {
                return Ok(Reload::Unchanged);
            }
            if current.refused.as_ref() == Some(&fingerprint) && !dry_run {
                return Ok(Reload::StillRefused);
            }
        }
        let refuse = |error: TlsConfigError| {
            if !dry_run {
                self.current
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .refused = Some(fingerprint.clone());
            }
            Err(error)
        };
        let (server, identity) = match server_config_and_identity(config, &self.name) {
            Ok(built) => built,
            Err(e) => return refuse(e),
        };
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        let allow = |key: &str| keys.get_or(key, "false").eq_ignore_ascii_case("true");
        if identity.subject != current.identity.subject && !allow("ssl.allow.dn.changes") {
            let reason = format!(
                "Keystore DistinguishedName does not match: existing={{{}}}, new={{{}}}",
                current.identity.subject, identity.subject
            );
            drop(current);
            return refuse(keys.invalid("ssl.keystore.location", reason));
        }
        if identity.alternative_names != current.identity.alternative_names
            && !allow("ssl.allow.san.changes")
        {
            let reason = format!(
                "Keystore SubjectAltNames do not match: existing={:?}, new={:?}",
                current.identity.alternative_names, identity.alternative_names
            );
            drop(current);
            return refuse(keys.invalid("ssl.keystore.location", reason));
        }
        if !dry_run {
            *current = Current {
                acceptor: tokio_rustls::TlsAcceptor::from(server),
                fingerprint,
                identity,
                refused: None,
            };
        }
        Ok(Reload::Reloaded)
    }

    /// The listener's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// SHA-256 over the PEM text of the listener's keystore and truststore
/// (files or inline values) and the key password, as they are now.
fn store_fingerprint(keys: &ListenerKeys<'_>) -> Result<Vec<u8>, TlsConfigError> {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [
        keys.pem("ssl.keystore.location", "ssl.keystore.key")?,
        keys.get("ssl.keystore.certificate.chain")
            .map(|c| c.as_bytes().to_vec()),
        keys.pem("ssl.truststore.location", "ssl.truststore.certificates")?,
        keys.get("ssl.key.password").map(|p| p.as_bytes().to_vec()),
    ] {
        let part = part.unwrap_or_default();
        context.update(&(part.len() as u64).to_be_bytes());
        context.update(&part);
    }
    Ok(context.finish().as_ref().to_vec())
}

/// The subject (RFC 2253) and alternative names of certificate `der`.
fn certificate_identity(der: &[u8]) -> Result<CertificateIdentity, String> {
    use x509_parser::prelude::FromDer as _;
    let subject = super::principal::subject_dn(der)?;
    let (_, cert) = x509_parser::certificate::X509Certificate::from_der(der)
        .map_err(|e| format!("the certificate does not parse: {e}"))?;
    let alternative_names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|ext| {
            ext.value
                .general_names
                .iter()
                .map(|name| format!("{name:?}"))
                .collect()
        })
        .unwrap_or_default();
    Ok(CertificateIdentity {
        subject,
        alternative_names,
    })
}

/// `ssl.client.auth` (Kafka's `SslClientAuth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    None,
    /// A client certificate is asked for and verified when sent.
    Requested,
    /// A verified client certificate is required (mTLS).
    Required,
}

/// The rustls server configuration of listener `listener` from its
/// `ssl.*` keys (see the module doc).
///
/// # Errors
/// [`TlsConfigError`] naming the key that is missing or wrong.
pub fn server_config(
    config: &BrokerConfig,
    listener: &str,
) -> Result<Arc<ServerConfig>, TlsConfigError> {
    server_config_and_identity(config, listener).map(|(server, _)| server)
}

/// [`server_config`] and the identity of the certificate it serves.
fn server_config_and_identity(
    config: &BrokerConfig,
    listener: &str,
) -> Result<(Arc<ServerConfig>, CertificateIdentity), TlsConfigError> {
    let keys = ListenerKeys { config, listener };
    let provider = Arc::new(provider(&keys)?);
    let versions = protocol_versions(&keys)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| keys.rustls(e))?;
    let builder = match client_auth(&keys)? {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let mut roots = RootCertStore::empty();
            let missing = "ssl.client.auth asks for client certificates but no truststore is given";
            for cert in trusted_certificates(&keys, missing)? {
                roots
                    .add(cert)
                    .map_err(|e| keys.invalid("ssl.truststore.location", e.to_string()))?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| keys.rustls(e))?)
        }
    };
    let (chain, key) = key_and_chain(&keys)?;
    let identity =
        certificate_identity(&chain[0]).map_err(|e| keys.invalid("ssl.keystore.location", e))?;
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| keys.rustls(e))?;
    // No TLS 1.3 session tickets right after the handshake (rustls sends
    // two by default): kafka-python closes a connection that turns
    // readable while it has no request in flight, so every connection but
    // its first failed. The JDK, under Kafka, sends its ticket only after
    // the first response. Resumption still works through the session cache.
    config.send_tls13_tickets = 0;
    Ok((Arc::new(config), identity))
}

/// The rustls client configuration this broker connects with to another
/// node's listener `listener` (the inter-broker or a controller listener),
/// from the same `ssl.*` keys as that listener (Kafka's client-mode
/// `SslFactory` on the inter-broker listener): the truststore verifies the
/// other node's certificate, the keystore, when set, is presented to a
/// listener that asks for client certificates, and the host name is
/// checked against the certificate unless
/// `ssl.endpoint.identification.algorithm` is empty.
///
/// # Errors
/// [`TlsConfigError`] naming the key that is missing or wrong; a
/// truststore is required.
pub fn client_config(
    config: &BrokerConfig,
    listener: &str,
) -> Result<Arc<rustls::ClientConfig>, TlsConfigError> {
    let keys = ListenerKeys { config, listener };
    let provider = Arc::new(provider(&keys)?);
    let versions = protocol_versions(&keys)?;
    let mut roots = RootCertStore::empty();
    let missing = "a broker verifies the brokers and controllers it connects to with the truststore, and none is given";
    for cert in trusted_certificates(&keys, missing)? {
        roots
            .add(cert)
            .map_err(|e| keys.invalid("ssl.truststore.location", e.to_string()))?;
    }
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| keys.rustls(e))?;
    let verifier: Arc<dyn rustls::client::danger::ServerCertVerifier> =
        match config.listener_value(listener, "ssl.endpoint.identification.algorithm") {
            Some("") => Arc::new(NoHostnameVerification(verifier)),
            _ => verifier,
        };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| keys.rustls(e))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let has_keystore = ["ssl.keystore.location", "ssl.keystore.key"]
        .iter()
        .any(|k| keys.get(k).is_some());
    let config = if has_keystore {
        let (chain, key) = key_and_chain(&keys)?;
        builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| keys.rustls(e))?
    } else {
        builder.with_no_client_auth()
    };
    Ok(Arc::new(config))
}

/// Verifies a server's certificate chain as webpki does but accepts it
/// for any host name: `ssl.endpoint.identification.algorithm=` (empty),
/// Kafka's way to turn host name verification off.
#[derive(Debug)]
struct NoHostnameVerification(Arc<rustls::client::WebPkiServerVerifier>);

impl rustls::client::danger::ServerCertVerifier for NoHostnameVerification {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &rustls_pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        use rustls::CertificateError::{NotValidForName, NotValidForNameContext};
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                NotValidForName | NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// One listener's view of the `ssl.*` keys.
struct ListenerKeys<'a> {
    config: &'a BrokerConfig,
    listener: &'a str,
}

impl ListenerKeys<'_> {
    /// The key's value for this listener, `None` when unset or empty.
    fn get(&self, key: &str) -> Option<&str> {
        self.config
            .listener_value(self.listener, key)
            .filter(|v| !v.is_empty())
    }

    /// The key's value, or its default.
    fn get_or<'b>(&'b self, key: &str, default: &'b str) -> &'b str {
        self.get(key).unwrap_or(default)
    }

    fn invalid(&self, key: &'static str, reason: impl Into<String>) -> TlsConfigError {
        TlsConfigError::Invalid {
            listener: self.listener.to_string(),
            key,
            reason: reason.into(),
        }
    }

    fn rustls(&self, e: impl std::fmt::Display) -> TlsConfigError {
        TlsConfigError::Rustls {
            listener: self.listener.to_string(),
            reason: e.to_string(),
        }
    }

    /// The PEM text of a file key, or of its inline twin.
    fn pem(
        &self,
        file_key: &'static str,
        inline_key: &'static str,
    ) -> Result<Option<Vec<u8>>, TlsConfigError> {
        if let Some(inline) = self.get(inline_key) {
            return Ok(Some(inline.as_bytes().to_vec()));
        }
        let Some(path) = self.get(file_key) else {
            return Ok(None);
        };
        std::fs::read(path)
            .map(Some)
            .map_err(|source| TlsConfigError::Io {
                listener: self.listener.to_string(),
                key: file_key,
                path: path.to_string(),
                source,
            })
    }

    /// Refuses a store type other than PEM for a store that is given.
    fn require_pem(&self, type_key: &'static str) -> Result<(), TlsConfigError> {
        let store_type = self.get_or(type_key, "JKS");
        if store_type.eq_ignore_ascii_case("PEM") {
            Ok(())
        } else {
            Err(self.invalid(
                type_key,
                format!("{store_type} stores are not read by Weir: convert the store to PEM and set {type_key}=PEM"),
            ))
        }
    }
}

/// The listener's `ssl.client.auth`. As Kafka's `ChannelBuilders`, the
/// broker-wide key applies only to SSL listeners: a SASL_SSL listener uses
/// its listener-prefixed key or `none` (with Kafka's warning when the
/// broker-wide key asks for more).
fn client_auth(keys: &ListenerKeys<'_>) -> Result<ClientAuth, TlsConfigError> {
    let value = if keys.config.security_protocol(keys.listener) == Some(SecurityProtocol::SaslSsl) {
        let prefixed = format!(
            "{LISTENER_PREFIX}{}.ssl.client.auth",
            keys.listener.to_ascii_lowercase()
        );
        match keys
            .config
            .explicit
            .get(&prefixed)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
        {
            Some(value) => value,
            None => {
                if keys
                    .get("ssl.client.auth")
                    .is_some_and(|v| !v.eq_ignore_ascii_case("none"))
                {
                    tracing::warn!(
                        listener = keys.listener,
                        "Broker configuration 'ssl.client.auth' is applied only to SSL listeners. \
                         Listener-prefixed configuration can be used to enable SSL client \
                         authentication for SASL_SSL listeners."
                    );
                }
                "none"
            }
        }
    } else {
        keys.get_or("ssl.client.auth", "none")
    };
    match value.to_ascii_lowercase().as_str() {
        "none" => Ok(ClientAuth::None),
        "requested" => Ok(ClientAuth::Requested),
        "required" => Ok(ClientAuth::Required),
        other => Err(keys.invalid(
            "ssl.client.auth",
            format!("'{other}' is not none, requested or required"),
        )),
    }
}

fn protocol_versions(
    keys: &ListenerKeys<'_>,
) -> Result<Vec<&'static SupportedProtocolVersion>, TlsConfigError> {
    let mut versions = Vec::new();
    for name in keys
        .get_or("ssl.enabled.protocols", "TLSv1.2,TLSv1.3")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        versions.push(match name {
            "TLSv1.3" => &rustls::version::TLS13,
            "TLSv1.2" => &rustls::version::TLS12,
            // The JDK names them and Kafka starts with them, but its
            // jdk.tls.disabledAlgorithms turns them off: skipped.
            "TLSv1" | "TLSv1.1" => {
                tracing::warn!(
                    listener = keys.listener,
                    "ssl.enabled.protocols: {name} is not served (TLSv1.2 and TLSv1.3 are)"
                );
                continue;
            }
            other => {
                return Err(keys.invalid(
                    "ssl.enabled.protocols",
                    format!("{other} is not served (TLSv1.2, TLSv1.3)"),
                ))
            }
        });
    }
    if versions.is_empty() {
        return Err(keys.invalid(
            "ssl.enabled.protocols",
            "no protocol Weir serves is enabled (TLSv1.2, TLSv1.3)",
        ));
    }
    Ok(versions)
}

/// The name of a rustls cipher suite as the JDK and Kafka's
/// `ssl.cipher.suites` spell it (IANA): rustls calls the TLS 1.3 suites
/// `TLS13_*`.
pub fn iana_suite_name(suite: rustls::CipherSuite) -> String {
    let name = format!("{suite:?}");
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name,
    }
}

/// The ring provider, cut to `ssl.cipher.suites` when set.
fn provider(keys: &ListenerKeys<'_>) -> Result<CryptoProvider, TlsConfigError> {
    let mut provider = rustls::crypto::ring::default_provider();
    let Some(wanted) = keys.get("ssl.cipher.suites") else {
        return Ok(provider);
    };
    let wanted: Vec<&str> = wanted
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let served = |name: &str| {
        provider
            .cipher_suites
            .iter()
            .any(|s| iana_suite_name(s.suite()) == name)
    };
    let skipped: Vec<&str> = wanted.iter().copied().filter(|n| !served(n)).collect();
    if skipped.len() == wanted.len() {
        return Err(keys.invalid(
            "ssl.cipher.suites",
            format!(
                "none of {} is a cipher suite Weir serves ({})",
                wanted.join(","),
                provider
                    .cipher_suites
                    .iter()
                    .map(|s| iana_suite_name(s.suite()))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        ));
    }
    if !skipped.is_empty() {
        tracing::warn!(
            listener = keys.listener,
            skipped = skipped.join(","),
            "ssl.cipher.suites names suites Weir does not serve (rustls offers no CBC or RSA key exchange suites); serving the others"
        );
    }
    provider
        .cipher_suites
        .retain(|s| wanted.contains(&iana_suite_name(s.suite()).as_str()));
    Ok(provider)
}

fn key_and_chain(
    keys: &ListenerKeys<'_>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsConfigError> {
    let (key_pem, key_key, chain_pem, chain_key) = if keys.get("ssl.keystore.key").is_some() {
        let chain = keys.get("ssl.keystore.certificate.chain").ok_or_else(|| {
            keys.invalid(
                "ssl.keystore.certificate.chain",
                "must be set with ssl.keystore.key",
            )
        })?;
        let key = keys.get("ssl.keystore.key").unwrap_or_default();
        (
            key.as_bytes().to_vec(),
            "ssl.keystore.key",
            chain.as_bytes().to_vec(),
            "ssl.keystore.certificate.chain",
        )
    } else {
        let pem = keys.pem("ssl.keystore.location", "ssl.keystore.key")?.ok_or_else(|| {
            keys.invalid(
                "ssl.keystore.location",
                "an SSL listener needs a keystore (or ssl.keystore.key and ssl.keystore.certificate.chain)",
            )
        })?;
        (
            pem.clone(),
            "ssl.keystore.location",
            pem,
            "ssl.keystore.location",
        )
    };
    keys.require_pem("ssl.keystore.type")?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&chain_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| keys.invalid(chain_key, format!("bad PEM: {e}")))?;
    if chain.is_empty() {
        return Err(keys.invalid(chain_key, "holds no certificate"));
    }
    let key = match (encrypted_key_der(&key_pem), keys.get("ssl.key.password")) {
        (Some(der), Some(password)) => decrypt_key(&der, password)
            .map_err(|reason| keys.invalid("ssl.key.password", reason))?,
        (Some(_), None) => {
            return Err(keys.invalid(
                "ssl.key.password",
                format!("{key_key} holds an encrypted private key: its password is needed"),
            ))
        }
        (None, Some(_)) => {
            return Err(keys.invalid(
                "ssl.key.password",
                format!("is set but {key_key} holds no encrypted private key"),
            ))
        }
        (None, None) => PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| keys.invalid(key_key, format!("holds no private key ({e})")))?,
    };
    Ok((chain, key))
}

/// The DER of the first `ENCRYPTED PRIVATE KEY` block of `pem`, if any.
fn encrypted_key_der(pem: &[u8]) -> Option<Vec<u8>> {
    const BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    let text = std::str::from_utf8(pem).ok()?;
    let start = text.find(BEGIN)?;
    let end = start + text[start..].find(END)? + END.len();
    pkcs8::der::pem::decode_vec(&text.as_bytes()[start..end])
        .ok()
        .map(|(_, der)| der)
}

/// Decrypts an encrypted PKCS#8 key with `password`: PBES2 (PBKDF2 with
/// AES-CBC, what `openssl pkcs8 -topk8` writes by default) or PKCS#12's
/// `pbeWithSHAAnd3-KeyTripleDES-CBC` (`-v1 PBE-SHA1-3DES`, which the JDK
/// under Kafka's PEM keystores reads, KIP-651). The error never holds the
/// password.
fn decrypt_key(der: &[u8], password: &str) -> Result<PrivateKeyDer<'static>, String> {
    const CANNOT: &str = "cannot decrypt the private key with this password (or its cipher is \
                          neither PBES2 with AES nor PBE-SHA1-3DES)";
    if let Some(plaintext) = decrypt_pkcs12_3des(der, password) {
        let plaintext = plaintext.map_err(|()| CANNOT.to_string())?;
        return Ok(PrivateKeyDer::Pkcs8(plaintext.into()));
    }
    let encrypted = pkcs8::EncryptedPrivateKeyInfo::try_from(der)
        .map_err(|e| format!("the encrypted private key is malformed ({e})"))?;
    let document = encrypted
        .decrypt(password)
        .map_err(|_| CANNOT.to_string())?;
    Ok(PrivateKeyDer::Pkcs8(document.as_bytes().to_vec().into()))
}

/// `EncryptedPrivateKeyInfo` under PKCS#12's
/// `pbeWithSHAAnd3-KeyTripleDES-CBC` (RFC 7292 Appendix C): `None` when
/// `der` uses another algorithm, else the decrypted PKCS#8 DER, or `Err`
/// when it does not decrypt (a wrong password, as the JDK's
/// `BadPaddingException`). Key and IV come from the PKCS#12 KDF with SHA-1
/// over the password as a BMPString (Appendix B).
fn decrypt_pkcs12_3des(der: &[u8], password: &str) -> Option<Result<Vec<u8>, ()>> {
    use cbc::cipher::{block_padding::Pkcs7, BlockDecryptMut, KeyIvInit};
    use der::{Decode, Reader};
    use pkcs12::kdf::{derive_key_utf8, Pkcs12KeyType};
    let mut reader = der::SliceReader::new(der).ok()?;
    let (algorithm, data) = reader
        .sequence(|r| {
            Ok((
                spki::AlgorithmIdentifierOwned::decode(r)?,
                der::asn1::OctetString::decode(r)?,
            ))
        })
        .ok()?;
    if algorithm.oid != pkcs12::PKCS_12_PBE_WITH_SHAAND3_KEY_TRIPLE_DES_CBC {
        return None;
    }
    let decrypt = || -> Result<Vec<u8>, ()> {
        let params: pkcs12::pbe_params::Pkcs12PbeParams = algorithm
            .parameters
            .as_ref()
            .ok_or(())?
            .decode_as()
            .map_err(|_| ())?;
        let salt = params.salt.as_bytes();
        let derive = |kind, len| {
            derive_key_utf8::<sha1::Sha1>(password, salt, kind, params.iterations, len)
                .map_err(|_| ())
        };
        let key = derive(Pkcs12KeyType::EncryptionKey, 24)?;
        let iv = derive(Pkcs12KeyType::Iv, 8)?;
        cbc::Decryptor::<des::TdesEde3>::new_from_slices(&key, &iv)
            .map_err(|_| ())?
            .decrypt_padded_vec_mut::<Pkcs7>(data.as_bytes())
            .map_err(|_| ())
            // A wrong password can leave valid padding by chance.
            .and_then(
                |plain| match pkcs8::PrivateKeyInfo::try_from(plain.as_slice()) {
                    Ok(_) => Ok(plain),
                    Err(_) => Err(()),
                },
            )
    };
    Some(decrypt())
}

/// The truststore's certificates; `missing` says why one is needed.
fn trusted_certificates(
    keys: &ListenerKeys<'_>,
    missing: &str,
) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let pem = keys
        .pem("ssl.truststore.location", "ssl.truststore.certificates")?
        .ok_or_else(|| keys.invalid("ssl.truststore.location", missing))?;
    keys.require_pem("ssl.truststore.type")?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| keys.invalid("ssl.truststore.location", format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(keys.invalid("ssl.truststore.location", "holds no certificate"));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::{TlsAcceptor, TlsConnector};

    /// A CA, a server certificate for 127.0.0.1 and a client certificate,
    /// written as PEM files into a temp dir.
    struct Pki {
        dir: tempfile::TempDir,
        ca: CertificateDer<'static>,
        client_chain: Vec<CertificateDer<'static>>,
        client_key: PrivateKeyDer<'static>,
    }

    impl Pki {
        fn new() -> Pki {
            Pki::for_names(&["127.0.0.1"])
        }

        /// A PKI whose server certificate names `names`.
        fn for_names(names: &[&str]) -> Pki {
            let dir = tempfile::tempdir().unwrap();
            let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
            ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
            let server_key = KeyPair::generate().unwrap();
            let server =
                CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                    .unwrap()
                    .signed_by(&server_key, &ca)
                    .unwrap();
            let client_key = KeyPair::generate().unwrap();
            let client = CertificateParams::new(Vec::<String>::new())
                .unwrap()
                .signed_by(&client_key, &ca)
                .unwrap();
            std::fs::write(
                dir.path().join("server.pem"),
                format!("{}{}", server_key.serialize_pem(), server.pem()),
            )
            .unwrap();
            std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
            Pki {
                ca: ca.der().clone(),
                client_chain: vec![client.der().clone()],
                client_key: PrivateKeyDer::from_pem_slice(client_key.serialize_pem().as_bytes())
                    .unwrap(),
                dir,
            }
        }

        fn path(&self, name: &str) -> String {
            self.dir.path().join(name).display().to_string()
        }

        /// A configuration with an SSL listener and `extra` keys.
        fn config(&self, extra: &[(&str, &str)]) -> BrokerConfig {
            let mut pairs = vec![
                (
                    "listeners".to_string(),
                    "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0".to_string(),
                ),
                ("ssl.keystore.type".to_string(), "PEM".to_string()),
                ("ssl.keystore.location".to_string(), self.path("server.pem")),
                ("ssl.truststore.type".to_string(), "PEM".to_string()),
                ("ssl.truststore.location".to_string(), self.path("ca.pem")),
            ];
            for (k, v) in extra {
                pairs.retain(|(key, _)| key != k);
                pairs.push((k.to_string(), v.to_string()));
            }
            BrokerConfig::from_pairs(pairs).unwrap()
        }

        /// A client trusting the CA, with the client certificate or not.
        fn connector(&self, with_certificate: bool) -> TlsConnector {
            let mut roots = RootCertStore::empty();
            roots.add(self.ca.clone()).unwrap();
            let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
            let config = if with_certificate {
                builder
                    .with_client_auth_cert(self.client_chain.clone(), self.client_key.clone_key())
                    .unwrap()
            } else {
                builder.with_no_client_auth()
            };
            TlsConnector::from(Arc::new(config))
        }
    }

    /// Runs one TLS exchange: the client sends "ping", the server answers
    /// "pong". Returns whether the client read "pong".
    async fn exchange(server: Arc<ServerConfig>, client: TlsConnector) -> bool {
        exchange_with(TlsAcceptor::from(server), client).await
    }

    /// [`exchange`] with a listener's acceptor.
    async fn exchange_with(acceptor: TlsAcceptor, client: TlsConnector) -> bool {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let served = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = acceptor.accept(tcp).await.ok()?;
            let mut ping = [0u8; 4];
            tls.read_exact(&mut ping).await.ok()?;
            tls.write_all(b"pong").await.ok()?;
            tls.flush().await.ok()
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let read = async {
            let mut tls = client.connect(name, tcp).await.ok()?;
            tls.write_all(b"ping").await.ok()?;
            let mut pong = [0u8; 4];
            tls.read_exact(&mut pong).await.ok()?;
            Some(pong == *b"pong")
        }
        .await;
        let _ = served.await;
        read == Some(true)
    }

    #[tokio::test]
    async fn a_pem_keystore_serves_tls_and_client_auth_is_enforced_as_configured() {
        let pki = Pki::new();
        let none = server_config(&pki.config(&[]), "SSL").unwrap();
        assert_eq!(
            none.send_tls13_tickets, 0,
            "no tickets before the first request"
        );
        assert!(
            exchange(none.clone(), pki.connector(false)).await,
            "no client auth"
        );
        let required =
            server_config(&pki.config(&[("ssl.client.auth", "required")]), "SSL").unwrap();
        assert!(
            !exchange(required.clone(), pki.connector(false)).await,
            "required: a client without a certificate is refused"
        );
        assert!(
            exchange(required, pki.connector(true)).await,
            "required: mTLS"
        );
        let requested =
            server_config(&pki.config(&[("ssl.client.auth", "requested")]), "SSL").unwrap();
        assert!(
            exchange(requested.clone(), pki.connector(false)).await,
            "requested, none sent"
        );
        assert!(
            exchange(requested, pki.connector(true)).await,
            "requested, sent"
        );
    }

    #[tokio::test]
    async fn a_listener_prefixed_key_overrides_the_plain_one() {
        let pki = Pki::new();
        let config = pki.config(&[
            ("ssl.client.auth", "none"),
            ("listener.name.ssl.ssl.client.auth", "required"),
        ]);
        let server = server_config(&config, "SSL").unwrap();
        assert!(!exchange(server, pki.connector(false)).await);
        let other = server_config(&config, "OTHER").unwrap();
        assert!(
            exchange(other, pki.connector(false)).await,
            "another listener: the plain key"
        );
    }

    /// Kafka's `ChannelBuilders` applies the broker-wide `ssl.client.auth`
    /// only to SSL listeners: a SASL_SSL listener asks for a client
    /// certificate only by its listener-prefixed key (a SASL_SSL listener
    /// refused every SASL client without a certificate before).
    #[tokio::test]
    async fn broker_wide_ssl_client_auth_applies_only_to_ssl_listeners() {
        let pki = Pki::new();
        let config = pki.config(&[("ssl.client.auth", "required")]);
        let sasl_ssl = server_config(&config, "SASL_SSL").unwrap();
        assert!(
            exchange(sasl_ssl, pki.connector(false)).await,
            "SASL_SSL: the broker-wide key does not apply"
        );
        let ssl = server_config(&config, "SSL").unwrap();
        assert!(!exchange(ssl, pki.connector(false)).await, "SSL: it does");
        let prefixed = pki.config(&[("listener.name.sasl_ssl.ssl.client.auth", "required")]);
        let sasl_ssl = server_config(&prefixed, "SASL_SSL").unwrap();
        assert!(
            !exchange(sasl_ssl.clone(), pki.connector(false)).await,
            "SASL_SSL: the listener-prefixed key applies"
        );
        assert!(exchange(sasl_ssl, pki.connector(true)).await);
    }

    #[test]
    fn inline_pem_keys_serve_as_the_keystore_file() {
        let pki = Pki::new();
        let pem = std::fs::read_to_string(pki.path("server.pem")).unwrap();
        let (key, chain) = pem.split_at(pem.find("-----BEGIN CERTIFICATE").unwrap());
        let config = pki.config(&[
            ("ssl.keystore.location", ""),
            ("ssl.keystore.key", key),
            ("ssl.keystore.certificate.chain", chain),
        ]);
        server_config(&config, "SSL").unwrap();
    }

    /// A key encrypted with PKCS#12's `pbeWithSHAAnd3-KeyTripleDES-CBC`
    /// (`openssl pkcs8 -topk8 -v1 PBE-SHA1-3DES`), the form the JDK 17
    /// that runs Kafka reads (it does not read every PBES2 key), so Kafka
    /// users' encrypted keys take it; refused before. A throwaway P-256
    /// key made for this test with that command, password
    /// `weir-test-only`; its public key (from `openssl pkey -pubout`) is
    /// below.
    #[test]
    fn a_pkcs12_pbe_sha1_3des_key_is_read_as_the_jdk_reads_it() {
        use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
        const KEY: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----
MIGxMBwGCiqGSIb3DQEMAQMwDgQIoi12ssdvTVsCAggABIGQbFWCoGKpPZtkSv6n
EJsvTDT++6hMyJrKioqPKHZ6Uzo/gn8sHnqnFLqlikVlmFqsqdoU8vKg935BUZVP
+6ia70AJBUcVmkUdNXGeJwKIj+DdgcR3sjDBq4WT0ld7gDEY0WD9z07rda3p14/i
FkZY1uYya0Y8G1A05qNrR0GfX8EbOxxPi5BmpKFyOICFZjdw
-----END ENCRYPTED PRIVATE KEY-----
";
        const PUBLIC_KEY: &str = "046295438034781870bccc3671115b08bba9399051132dd145aa359f\
                                  7371f2f91e46e612573da3df71f49a46fe29d81b5f82c6dd199f6f03\
                                  d155d8f234af1dc36a";
        let der = encrypted_key_der(KEY.as_bytes()).unwrap();
        let key = decrypt_key(&der, "weir-test-only").unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_ASN1_SIGNING,
            key.secret_der(),
            &ring::rand::SystemRandom::new(),
        )
        .unwrap();
        let hex: String = pair
            .public_key()
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, PUBLIC_KEY);
        let err = decrypt_key(&der, "wrong").unwrap_err();
        assert!(!err.contains("wrong"), "{err}");
    }

    /// An encrypted PKCS#8 key (PBES2: PBKDF2-SHA256, AES-256-CBC, as
    /// `openssl pkcs8 -topk8 -v2 aes-256-cbc` writes it) is read with
    /// `ssl.key.password`; without it, or with a wrong one, the listener is
    /// refused naming `ssl.key.password` and never printing the password.
    #[tokio::test]
    async fn an_encrypted_pem_key_is_read_with_ssl_key_password() {
        use pkcs8::der::pem::LineEnding;
        use pkcs8::pkcs5::pbes2;
        let pki = Pki::new();
        let pem = std::fs::read_to_string(pki.path("server.pem")).unwrap();
        let (key, chain) = pem.split_at(pem.find("-----BEGIN CERTIFICATE").unwrap());
        let (_, der) = pkcs8::der::pem::decode_vec(key.trim().as_bytes()).unwrap();
        let params =
            pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, b"0123456789abcdef", &[7u8; 16])
                .unwrap();
        let encrypted = pkcs8::PrivateKeyInfo::try_from(der.as_slice())
            .unwrap()
            .encrypt_with_params(params, "s3cret-key-pw")
            .unwrap()
            .to_pem("ENCRYPTED PRIVATE KEY", LineEnding::LF)
            .unwrap();
        assert!(encrypted.contains("BEGIN ENCRYPTED PRIVATE KEY"));
        std::fs::write(
            pki.path("server-enc.pem"),
            format!("{}{chain}", &*encrypted),
        )
        .unwrap();
        let keystore = pki.path("server-enc.pem");
        let with = |password: Option<&str>| {
            let mut extra = vec![("ssl.keystore.location", keystore.as_str())];
            extra.extend(password.map(|p| ("ssl.key.password", p)));
            server_config(&pki.config(&extra), "SSL")
        };
        let server = with(Some("s3cret-key-pw")).unwrap();
        assert!(exchange(server, pki.connector(false)).await);
        for password in [None, Some("wrong-pw")] {
            let err = with(password).unwrap_err().to_string();
            assert!(err.contains("ssl.key.password"), "{password:?}: {err}");
            assert!(
                !err.contains("wrong-pw") && !err.contains("s3cret"),
                "{err}"
            );
        }
    }

    /// Each refusal names the key to change and never prints a secret.
    #[test]
    fn bad_tls_settings_are_refused_naming_the_key() {
        let pki = Pki::new();
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("ssl.keystore.type", "JKS")], "ssl.keystore.type"),
            (&[("ssl.keystore.location", "")], "ssl.keystore.location"),
            (
                &[("ssl.keystore.location", "/nonexistent/server.pem")],
                "ssl.keystore.location",
            ),
            (&[("ssl.key.password", "hunter2")], "ssl.key.password"),
            (
                &[
                    ("ssl.client.auth", "required"),
                    ("ssl.truststore.location", ""),
                ],
                "ssl.truststore.location",
            ),
            (
                &[
                    ("ssl.client.auth", "required"),
                    ("ssl.truststore.type", "PKCS12"),
                ],
                "ssl.truststore.type",
            ),
            (
                &[("ssl.cipher.suites", "TLS_RSA_WITH_RC4_128_MD5")],
                "ssl.cipher.suites",
            ),
            (
                &[("ssl.keystore.location", "/dev/null")],
                "ssl.keystore.location",
            ),
        ];
        for (extra, key) in cases {
            let err = server_config(&pki.config(extra), "SSL")
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{extra:?}: {err}");
            assert!(!err.contains("hunter2"), "{extra:?}: a secret in {err}");
        }
    }

    /// The IANA names of the suites `server` offers.
    fn served_suites(server: &ServerConfig) -> Vec<String> {
        server
            .crypto_provider()
            .cipher_suites
            .iter()
            .map(|s| iana_suite_name(s.suite()))
            .collect()
    }

    #[tokio::test]
    async fn cipher_suites_and_protocols_restrict_the_handshake() {
        let pki = Pki::new();
        let tls12_only = pki.config(&[
            ("ssl.enabled.protocols", "TLSv1.2"),
            (
                "ssl.cipher.suites",
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            ),
        ]);
        let server = server_config(&tls12_only, "SSL").unwrap();
        assert_eq!(
            served_suites(&server),
            ["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]
        );
        assert!(
            exchange(server, pki.connector(false)).await,
            "TLS 1.2 with the one suite"
        );
        let tls13 = pki.config(&[("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256")]);
        let server = server_config(&tls13, "SSL").unwrap();
        assert!(
            exchange(server, pki.connector(false)).await,
            "TLS 1.3 by its JDK name"
        );
    }

    /// A Kafka configuration names what the JDK serves: CBC suites and
    /// TLSv1/TLSv1.1 (which the JDK's `jdk.tls.disabledAlgorithms` turns
    /// off anyway). Weir serves the rest of the list, warning about what it
    /// skips, and refuses only a list of which it serves nothing (Kafka's
    /// configurations with such entries stopped Weir's start before).
    #[tokio::test]
    async fn suites_and_versions_rustls_lacks_are_skipped_when_others_remain() {
        let pki = Pki::new();
        let config = pki.config(&[
            ("ssl.enabled.protocols", "TLSv1,TLSv1.1,TLSv1.2"),
            (
                "ssl.cipher.suites",
                "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            ),
        ]);
        let server = server_config(&config, "SSL").unwrap();
        assert_eq!(
            served_suites(&server),
            ["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]
        );
        assert!(exchange(server, pki.connector(false)).await);
        for (key, value) in [
            ("ssl.enabled.protocols", "TLSv1,TLSv1.1"),
            ("ssl.cipher.suites", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256"),
        ] {
            let err = server_config(&pki.config(&[(key, value)]), "SSL").unwrap_err();
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    /// KIP-226 by file: new store content is served to new connections;
    /// a certificate with other alternative names is refused (once) and
    /// the previous one kept, unless `ssl.allow.san.changes=true`.
    #[tokio::test]
    async fn changed_stores_are_reloaded_and_a_new_identity_is_refused() {
        let pki = Pki::new();
        let config = pki.config(&[]);
        let listener = listener(&config, "SSL").unwrap();
        assert_eq!(
            listener.reload_if_changed(&config).unwrap(),
            Reload::Unchanged
        );
        assert!(exchange_with(listener.acceptor(), pki.connector(false)).await);

        // A new CA and server certificate for the same name, written over
        // the files the listener was started with.
        let renewed = Pki::new();
        for file in ["server.pem", "ca.pem"] {
            std::fs::copy(renewed.path(file), pki.path(file)).unwrap();
        }
        assert_eq!(
            listener.reload_if_changed(&config).unwrap(),
            Reload::Reloaded
        );
        assert!(exchange_with(listener.acceptor(), renewed.connector(false)).await);
        assert!(!exchange_with(listener.acceptor(), pki.connector(false)).await);

        // Another name: refused, reported once, the renewed one still served.
        let other = Pki::for_names(&["localhost"]);
        std::fs::copy(other.path("server.pem"), pki.path("server.pem")).unwrap();
        let refused = listener.reload_if_changed(&config).unwrap_err().to_string();
        assert!(
            refused.contains("SubjectAltNames do not match"),
            "{refused}"
        );
        assert_eq!(
            listener.reload_if_changed(&config).unwrap(),
            Reload::StillRefused
        );
        assert!(exchange_with(listener.acceptor(), renewed.connector(false)).await);
        // A listener started with ssl.allow.san.changes=true takes it.
        std::fs::copy(renewed.path("server.pem"), pki.path("server.pem")).unwrap();
        let allowing = pki.config(&[("ssl.allow.san.changes", "true")]);
        let lenient = super::listener(&allowing, "SSL").unwrap();
        std::fs::copy(other.path("server.pem"), pki.path("server.pem")).unwrap();
        assert_eq!(
            lenient.reload_if_changed(&allowing).unwrap(),
            Reload::Reloaded
        );

        // A file that does not load yet (half written) keeps the served one.
        std::fs::write(pki.path("server.pem"), "-----BEGIN PRIVATE KEY-----\n").unwrap();
        assert!(listener.reload_if_changed(&config).is_err());
        assert!(exchange_with(listener.acceptor(), renewed.connector(false)).await);
    }
}
