//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677; Kafka's KIP-84):
//! the server side of the exchange, as Kafka's `ScramSaslServer` runs it,
//! and the credential arithmetic of Kafka's `ScramFormatter`.
//!
//! The exchange is two client messages:
//! 1. client-first `n,[a=<authzid>],n=<user>,r=<client nonce>[,<ext>=<v>]*`
//!    (only the `n` channel-binding flag: Kafka offers no channel binding);
//!    the server looks the user's credential up and answers server-first
//!    `r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>`;
//! 2. client-final `c=<base64 gs2 header>,r=<nonce>,p=<base64 proof>`; the
//!    server checks the proof against the stored key and answers
//!    server-final `v=<base64 server signature>`.
//!
//! Failures are [`AuthFailure`]s: what is logged, and what the client is
//! told (Kafka tells it only "invalid credentials", except for an
//! authorization id that differs from the user name).
//!
//! Nothing here logs, and no secret appears in an error.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use ring::rand::{SecureRandom, SystemRandom};
use ring::{digest, hmac, pbkdf2};
use weir_controller::{ScramCredential, ScramMechanism};

use super::sasl::AuthFailure;

fn invalid(reason: impl Into<String>) -> AuthFailure {
    AuthFailure::Invalid(reason.into())
}

fn hmac_algorithm(mechanism: ScramMechanism) -> hmac::Algorithm {
    match mechanism {
        ScramMechanism::ScramSha256 => hmac::HMAC_SHA256,
        ScramMechanism::ScramSha512 => hmac::HMAC_SHA512,
    }
}

fn hmac(mechanism: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    let key = hmac::Key::new(hmac_algorithm(mechanism), key);
    hmac::sign(&key, data).as_ref().to_vec()
}

fn hash(mechanism: ScramMechanism, data: &[u8]) -> Vec<u8> {
    let algorithm = match mechanism {
        ScramMechanism::ScramSha256 => &digest::SHA256,
        ScramMechanism::ScramSha512 => &digest::SHA512,
    };
    digest::digest(algorithm, data).as_ref().to_vec()
}

/// `Hi(password, salt, iterations)` (RFC 5802 section 2.2: PBKDF2 with
/// the mechanism's HMAC): the salted password a client derives, and what
/// `weir format --add-scram` derives from a password. `iterations` below 1
/// counts as 1.
pub fn salted_password(
    mechanism: ScramMechanism,
    password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    let (algorithm, len) = match mechanism {
        ScramMechanism::ScramSha256 => (pbkdf2::PBKDF2_HMAC_SHA256, 32),
        ScramMechanism::ScramSha512 => (pbkdf2::PBKDF2_HMAC_SHA512, 64),
    };
    let mut out = vec![0u8; len];
    let iterations = std::num::NonZeroU32::new(iterations).unwrap_or(std::num::NonZeroU32::MIN);
    pbkdf2::derive(algorithm, iterations, salt, password, &mut out);
    out
}

/// The credential a broker keeps for a salted password (Kafka's
/// `ScramFormatter.generateCredential`): `StoredKey = H(HMAC(SaltedPassword,
/// "Client Key"))`, `ServerKey = HMAC(SaltedPassword, "Server Key")`.
pub fn credential(
    mechanism: ScramMechanism,
    salted_password: &[u8],
    salt: &[u8],
    iterations: i32,
) -> ScramCredential {
    let client_key = hmac(mechanism, salted_password, b"Client Key");
    ScramCredential {
        salt: salt.to_vec(),
        stored_key: hash(mechanism, &client_key),
        server_key: hmac(mechanism, salted_password, b"Server Key"),
        iterations,
    }
}

/// `n` random bytes from the system's secure generator.
///
/// # Errors
/// The generator failed (no entropy source).
pub fn random_bytes(n: usize) -> Result<Vec<u8>, AuthFailure> {
    let mut bytes = vec![0u8; n];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| invalid("no secure random bytes for the server nonce"))?;
    Ok(bytes)
}

/// A fresh server nonce: 24 random bytes, base64 (printable, no comma).
fn server_nonce() -> Result<String, AuthFailure> {
    Ok(BASE64.encode(random_bytes(24)?))
}

/// The user name a `saslname` stands for (RFC 5802: `=2C` is `,`, `=3D`
/// is `=`, and no other `=` may appear).
fn username(saslname: &str) -> Result<String, AuthFailure> {
    let mut out = String::with_capacity(saslname.len());
    let mut rest = saslname;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3);
        match escape {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(invalid("invalid saslname escape in client-first message")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(invalid("empty user name in client-first message"));
    }
    Ok(out)
}

/// Whether `value` is RFC 5802's `printable`: `%x21-2B / %x2D-7E`.
fn printable(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// What the first client message gave.
struct ClientFirst {
    gs2_header: String,
    bare: String,
    user: String,
    nonce: String,
}

/// Parses client-first (Kafka's `ScramMessages.ClientFirstMessage`).
fn parse_client_first(message: &str) -> Result<ClientFirst, AuthFailure> {
    let rest = message.strip_prefix("n,").ok_or_else(|| {
        invalid("client-first message must start with gs2 flag 'n,' (no channel binding)")
    })?;
    let (authzid, bare) = rest
        .split_once(',')
        .ok_or_else(|| invalid("client-first message has no gs2 header end"))?;
    let authzid = match authzid {
        "" => None,
        a => Some(username(a.strip_prefix("a=").ok_or_else(|| {
            invalid("invalid authzid in client-first message")
        })?)?),
    };
    let gs2_header = format!("n,{},", &rest[..rest.len() - bare.len() - 1]);
    let mut fields = bare.split(',');
    let mut field = fields.next().unwrap_or_default();
    if field.starts_with("m=") {
        // RFC 5802 reserves m= for mandatory extensions this server does
        // not know: such a message must be refused.
        return Err(invalid("mandatory extension (m=) in client-first message"));
    }
    let user = username(
        field
            .strip_prefix("n=")
            .ok_or_else(|| invalid("client-first message has no n= user name"))?,
    )?;
    field = fields.next().unwrap_or_default();
    let nonce = field
        .strip_prefix("r=")
        .filter(|n| printable(n))
        .ok_or_else(|| invalid("client-first message has no valid r= nonce"))?
        .to_string();
    for extension in fields {
        let (key, value) = extension
            .split_once('=')
            .ok_or_else(|| invalid("malformed extension in client-first message"))?;
        // Delegation tokens (Kafka's tokenauth extension) are not served.
        if key == "tokenauth" && value.eq_ignore_ascii_case("true") {
            return Err(invalid("delegation token authentication is not served"));
        }
    }
    if let Some(authzid) = authzid {
        if authzid != user {
            return Err(AuthFailure::Visible(
                "Authentication failed: Client requested an authorization id that is different from username",
            ));
        }
    }
    Ok(ClientFirst {
        gs2_header,
        bare: bare.to_string(),
        user,
        nonce,
    })
}

/// The state of one connection's SCRAM exchange on the server.
#[derive(Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: State,
}

enum State {
    ClientFirst,
    ClientFinal(Box<AfterClientFirst>),
    Done,
}

/// What client-final is checked against.
struct AfterClientFirst {
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    client_nonce: String,
    nonce: String,
    user: String,
    credential: ScramCredential,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            State::ClientFirst => f.write_str("ClientFirst"),
            State::ClientFinal(after) => write!(f, "ClientFinal({})", after.user),
            State::Done => f.write_str("Done"),
        }
    }
}

/// What a client message leads to.
#[derive(Debug, PartialEq, Eq)]
pub enum ScramStep {
    /// Send this challenge (server-first) and wait for client-final.
    Challenge(Vec<u8>),
    /// Authenticated as `user`; send `server_final`.
    Authenticated {
        /// The user name (the principal is `User:<user>`).
        user: String,
        /// server-final: `v=<base64 server signature>`.
        server_final: Vec<u8>,
    },
}

impl ScramServer {
    /// A new exchange for `mechanism`, waiting for client-first.
    pub fn new(mechanism: ScramMechanism) -> Self {
        ScramServer {
            mechanism,
            state: State::ClientFirst,
        }
    }

    /// The exchange's mechanism.
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// Takes the next client message. `credentials` looks a user's
    /// credential for this mechanism up (called once, on client-first).
    ///
    /// # Errors
    /// [`AuthFailure`] for a malformed message, an unknown user, a
    /// credential with fewer than 4096 iterations, a wrong nonce, channel
    /// binding or proof, or a message after the exchange ended; the
    /// exchange cannot go on after an error.
    pub fn step(
        &mut self,
        message: &[u8],
        credentials: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<ScramStep, AuthFailure> {
        let state = std::mem::replace(&mut self.state, State::Done);
        let message =
            std::str::from_utf8(message).map_err(|_| invalid("SCRAM message is not UTF-8"))?;
        match state {
            State::ClientFirst => self.client_first(message, credentials, server_nonce()?),
            State::ClientFinal(after) => {
                let AfterClientFirst {
                    gs2_header,
                    client_first_bare,
                    server_first,
                    client_nonce,
                    nonce,
                    user,
                    credential,
                } = *after;
                let (without_proof, proof) = message
                    .rsplit_once(",p=")
                    .ok_or_else(|| invalid("client-final message has no p= proof"))?;
                let mut fields = without_proof.split(',');
                let channel = fields
                    .next()
                    .and_then(|f| f.strip_prefix("c="))
                    .ok_or_else(|| invalid("client-final message has no c= channel binding"))?;
                let final_nonce = fields
                    .next()
                    .and_then(|f| f.strip_prefix("r="))
                    .ok_or_else(|| invalid("client-final message has no r= nonce"))?;
                if BASE64.decode(channel).ok().as_deref() != Some(gs2_header.as_bytes()) {
                    return Err(invalid(
                        "client-final channel binding differs from the gs2 header",
                    ));
                }
                // RFC 5802 wants the server-first nonce back. librdkafka
                // before 2.6.1 (Debian's kcat among them) sends its own
                // nonce in front of it once more (librdkafka#4895); Kafka
                // 3.8.1 to 3.9 accept that (`endsWith`), Kafka 4 refuses
                // it. Weir accepts exactly that form too: it still holds
                // this exchange's fresh server nonce, so nothing replays.
                let doubled = final_nonce
                    .strip_prefix(client_nonce.as_str())
                    .is_some_and(|rest| rest == nonce);
                if final_nonce != nonce && !doubled {
                    return Err(invalid("Invalid client nonce in the final client message."));
                }
                let proof = BASE64
                    .decode(proof)
                    .map_err(|_| invalid("client-final proof is not base64"))?;
                let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
                let signature = hmac(
                    self.mechanism,
                    &credential.stored_key,
                    auth_message.as_bytes(),
                );
                if proof.len() != signature.len() {
                    return Err(invalid("Invalid client credentials"));
                }
                let client_key: Vec<u8> =
                    proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
                let stored_key = hash(self.mechanism, &client_key);
                if !super::sasl::constant_time_eq(&stored_key, &credential.stored_key) {
                    return Err(invalid("Invalid client credentials"));
                }
                let server_signature = hmac(
                    self.mechanism,
                    &credential.server_key,
                    auth_message.as_bytes(),
                );
                Ok(ScramStep::Authenticated {
                    user,
                    server_final: format!("v={}", BASE64.encode(server_signature)).into_bytes(),
                })
            }
            State::Done => Err(invalid("SCRAM message after the exchange ended")),
        }
    }

    fn client_first(
        &mut self,
        message: &str,
        credentials: impl FnOnce(&str) -> Option<ScramCredential>,
        server_nonce: String,
    ) -> Result<ScramStep, AuthFailure> {
        let first = parse_client_first(message)?;
        let credential = credentials(&first.user)
            .ok_or_else(|| invalid("Authentication failed: Invalid user credentials"))?;
        if credential.iterations < ScramMechanism::MIN_ITERATIONS {
            return Err(invalid(format!(
                "Iterations {} is less than the minimum {} for {}",
                credential.iterations,
                ScramMechanism::MIN_ITERATIONS,
                self.mechanism.name()
            )));
        }
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            BASE64.encode(&credential.salt),
            credential.iterations
        );
        let challenge = server_first.clone().into_bytes();
        self.state = State::ClientFinal(Box::new(AfterClientFirst {
            gs2_header: first.gs2_header,
            client_first_bare: first.bare,
            server_first,
            client_nonce: first.nonce,
            nonce,
            user: first.user,
            credential,
        }));
        Ok(ScramStep::Challenge(challenge))
    }
}

/// The client side of a SCRAM exchange (Kafka's `ScramSaslClient`): what
/// a broker sends when it authenticates to another broker's SCRAM
/// listener (inter-broker replication, `sasl.mechanism.inter.broker.protocol`).
///
/// [`client_first`](Self::client_first), then
/// [`client_final`](Self::client_final) with the server-first message, then
/// [`verify_server_final`](Self::verify_server_final) with server-final.
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_first_bare: String,
    nonce: String,
    /// The server signature server-final must carry, once client-final is
    /// made.
    expected_server_signature: Option<Vec<u8>>,
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramClient")
            .field("mechanism", &self.mechanism)
            .field("client_first_bare", &self.client_first_bare)
            .finish_non_exhaustive()
    }
}

/// The fewest iterations a client accepts from a server (Kafka's
/// `ScramMechanism.minIterations`).
pub const MIN_ITERATIONS: i32 = 4096;

impl ScramClient {
    /// A client of `user` with `password`, with a fresh 24-byte nonce.
    ///
    /// # Errors
    /// The system's random generator failed.
    pub fn new(mechanism: ScramMechanism, user: &str, password: &str) -> Result<Self, AuthFailure> {
        Ok(Self::with_nonce(
            mechanism,
            user,
            password,
            BASE64.encode(random_bytes(24)?),
        ))
    }

    fn with_nonce(mechanism: ScramMechanism, user: &str, password: &str, nonce: String) -> Self {
        let saslname = user.replace('=', "=3D").replace(',', "=2C");
        ScramClient {
            mechanism,
            password: password.to_string(),
            client_first_bare: format!("n={saslname},r={nonce}"),
            nonce,
            expected_server_signature: None,
        }
    }

    /// client-first: `n,,n=<user>,r=<nonce>` (no channel binding, no
    /// authorization id).
    pub fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// client-final for the server-first message `server_first`
    /// (`r=<nonce>,s=<salt>,i=<iterations>`).
    ///
    /// # Errors
    /// A server-first message that does not parse, whose nonce does not
    /// extend the client's, or with fewer than [`MIN_ITERATIONS`].
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, String> {
        let server_first = std::str::from_utf8(server_first)
            .map_err(|_| "server-first message is not UTF-8".to_string())?;
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for field in server_first.split(',') {
            match field.split_at_checked(2) {
                Some(("r=", v)) => nonce = Some(v),
                Some(("s=", v)) => salt = Some(v),
                Some(("i=", v)) => iterations = Some(v),
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err("server-first message lacks r, s or i".into());
        };
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("server-first nonce does not extend the client nonce".into());
        }
        let salt = BASE64
            .decode(salt)
            .map_err(|_| "server-first salt is not base64".to_string())?;
        let iterations: i32 = iterations
            .parse()
            .map_err(|_| "server-first iteration count is not a number".to_string())?;
        if iterations < MIN_ITERATIONS {
            return Err(format!(
                "requested iterations {iterations} is less than the minimum {MIN_ITERATIONS}"
            ));
        }
        let m = self.mechanism;
        // The iteration count is positive here.
        let salted = salted_password(m, self.password.as_bytes(), &salt, iterations as u32);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_key = hmac(m, &salted, b"Client Key");
        let signature = hmac(m, &hash(m, &client_key), auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hmac(m, &salted, b"Server Key");
        self.expected_server_signature = Some(hmac(m, &server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// Checks server-final (`v=<server signature>`): the server knew the
    /// credential.
    ///
    /// # Errors
    /// An error from the server (`e=...`), or a signature that is not the
    /// expected one.
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), String> {
        let text = String::from_utf8_lossy(server_final);
        if let Some(error) = text.strip_prefix("e=") {
            return Err(format!("server refused: {error}"));
        }
        let signature = text
            .strip_prefix("v=")
            .and_then(|v| BASE64.decode(v.split(',').next().unwrap_or_default()).ok())
            .ok_or_else(|| "server-final message has no signature".to_string())?;
        match &self.expected_server_signature {
            Some(expected) if super::sasl::constant_time_eq(expected, &signature) => Ok(()),
            _ => Err("invalid server signature in server-final message".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SCRAM client's final message for `password` (RFC 5802 section 3).
    fn client_final(
        mechanism: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
        channel: &str,
    ) -> String {
        client_final_with_nonce_prefix(
            mechanism,
            password,
            client_first_bare,
            server_first,
            channel,
            "",
        )
    }

    /// [`client_final`] sending `prefix` before the server-first nonce.
    fn client_final_with_nonce_prefix(
        mechanism: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
        channel: &str,
        prefix: &str,
    ) -> String {
        let fields: Vec<&str> = server_first.split(',').collect();
        let nonce = fields[0].strip_prefix("r=").unwrap();
        let salt = BASE64
            .decode(fields[1].strip_prefix("s=").unwrap())
            .unwrap();
        let iterations: u32 = fields[2].strip_prefix("i=").unwrap().parse().unwrap();
        let salted = salted_password(mechanism, password.as_bytes(), &salt, iterations);
        let client_key = hmac(mechanism, &salted, b"Client Key");
        let stored_key = hash(mechanism, &client_key);
        let without_proof = format!("c={channel},r={prefix}{nonce}");
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let signature = hmac(mechanism, &stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        format!("{without_proof},p={}", BASE64.encode(proof))
    }

    fn credential_for(
        mechanism: ScramMechanism,
        password: &str,
        iterations: i32,
    ) -> ScramCredential {
        let salt = b"0123456789abcdef";
        let salted = salted_password(mechanism, password.as_bytes(), salt, iterations as u32);
        credential(mechanism, &salted, salt, iterations)
    }

    /// RFC 7677 section 3's example exchange, byte for byte (the server
    /// nonce is the example's).
    #[test]
    fn rfc_7677_example_exchange() {
        let mechanism = ScramMechanism::ScramSha256;
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let salted = salted_password(mechanism, b"pencil", &salt, 4096);
        let stored = credential(mechanism, &salted, &salt, 4096);
        let mut server = ScramServer::new(mechanism);
        let first = server
            .client_first(
                "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                |user| (user == "user").then(|| stored.clone()),
                "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into(),
            )
            .unwrap();
        assert_eq!(
            first,
            ScramStep::Challenge(
                b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
                    .to_vec()
            )
        );
        let done = server
            .step(
                b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                |_| unreachable!("looked up once"),
            )
            .unwrap();
        assert_eq!(
            done,
            ScramStep::Authenticated {
                user: "user".into(),
                server_final: b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_vec(),
            }
        );
    }

    fn run(
        mechanism: ScramMechanism,
        stored: &ScramCredential,
        client_first: &str,
        password: &str,
        channel: &str,
    ) -> Result<ScramStep, AuthFailure> {
        let mut server = ScramServer::new(mechanism);
        let ScramStep::Challenge(challenge) = server.step(client_first.as_bytes(), |user| {
            (user == "alice,=").then(|| stored.clone())
        })?
        else {
            panic!("a challenge first");
        };
        let bare = client_first.splitn(3, ',').nth(2).unwrap();
        let server_first = String::from_utf8(challenge).unwrap();
        let last = client_final(mechanism, password, bare, &server_first, channel);
        server.step(last.as_bytes(), |_| None)
    }

    #[test]
    fn both_mechanisms_authenticate_an_escaped_user_and_refuse_a_wrong_password() {
        for mechanism in ScramMechanism::ALL {
            let stored = credential_for(mechanism, "s3cret", 4096);
            let first = "n,,n=alice=2C=3D,r=abcdefghijklmnop";
            match run(mechanism, &stored, first, "s3cret", "biws").unwrap() {
                ScramStep::Authenticated { user, .. } => assert_eq!(user, "alice,="),
                other => panic!("{other:?}"),
            }
            assert_eq!(
                run(mechanism, &stored, first, "guess", "biws"),
                Err(invalid("Invalid client credentials"))
            );
        }
    }

    #[test]
    fn refusals() {
        let mechanism = ScramMechanism::ScramSha512;
        let stored = credential_for(mechanism, "pw", 4096);
        let unknown = ScramServer::new(mechanism).step(b"n,,n=bob,r=abc", |_| None);
        assert_eq!(
            unknown,
            Err(invalid("Authentication failed: Invalid user credentials"))
        );
        let other_authzid = ScramServer::new(mechanism).step(b"n,a=root,n=bob,r=abc", |_| None);
        assert!(matches!(other_authzid, Err(AuthFailure::Visible(_))));
        for bad in [
            "y,,n=bob,r=abc",
            "p=tls-unique,,n=bob,r=abc",
            "n,,m=x,n=bob,r=abc",
            "n,,n=b=ob,r=abc",
            "n,,n=,r=abc",
            "n,,n=bob",
            "n,,n=bob,r=a,tokenauth=true",
            "garbage",
        ] {
            let got = ScramServer::new(mechanism).step(bad.as_bytes(), |_| Some(stored.clone()));
            assert!(
                matches!(got, Err(AuthFailure::Invalid(_))),
                "{bad}: {got:?}"
            );
        }
        // A channel binding that is not the gs2 header ("n,,") fails.
        let first = "n,,n=alice=2C=3D,r=abc";
        assert!(run(mechanism, &stored, first, "pw", "eSws").is_err());
        // Too few iterations in the stored credential.
        let weak = credential_for(mechanism, "pw", 100);
        let got = ScramServer::new(mechanism).step(b"n,,n=bob,r=abc", |_| Some(weak.clone()));
        assert!(matches!(got, Err(AuthFailure::Invalid(m)) if m.contains("less than the minimum")));
    }

    /// librdkafka before 2.6.1 sends its nonce twice in client-final
    /// (librdkafka#4895): accepted, as Kafka 3.8.1 to 3.9 accept it; any
    /// other prefix is not.
    #[test]
    fn librdkafkas_doubled_client_nonce_is_accepted() {
        let mechanism = ScramMechanism::ScramSha512;
        let stored = credential_for(mechanism, "pw", 4096);
        for (prefix, accepted) in [("cnonce", true), ("other", false)] {
            let mut server = ScramServer::new(mechanism);
            let ScramStep::Challenge(first) = server
                .step(b"n,,n=bob,r=cnonce", |_| Some(stored.clone()))
                .unwrap()
            else {
                panic!("a challenge");
            };
            let server_first = String::from_utf8(first).unwrap();
            let last = client_final_with_nonce_prefix(
                mechanism,
                "pw",
                "n=bob,r=cnonce",
                &server_first,
                "biws",
                prefix,
            );
            let outcome = server.step(last.as_bytes(), |_| None);
            assert_eq!(
                matches!(outcome, Ok(ScramStep::Authenticated { .. })),
                accepted,
                "{prefix}: {outcome:?}"
            );
        }
    }

    #[test]
    fn a_wrong_nonce_in_client_final_fails() {
        let mechanism = ScramMechanism::ScramSha256;
        let stored = credential_for(mechanism, "pw", 4096);
        let mut server = ScramServer::new(mechanism);
        server
            .step(b"n,,n=bob,r=abc", |_| Some(stored.clone()))
            .unwrap();
        assert_eq!(
            server.step(b"c=biws,r=abcXYZ,p=AAAA", |_| None),
            Err(invalid("Invalid client nonce in the final client message."))
        );
        assert!(
            server.step(b"anything", |_| None).is_err(),
            "no step after a failure"
        );
    }

    /// RFC 7677 section 3's example from the client's side: the same
    /// client-final and server signature.
    #[test]
    fn client_makes_rfc_7677s_example() {
        let mut client = ScramClient::with_nonce(
            ScramMechanism::ScramSha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO".into(),
        );
        assert_eq!(client.client_first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let last = client
            .client_final(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .unwrap();
        assert_eq!(
            String::from_utf8(last).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert_eq!(
            client.verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
            Ok(())
        );
        assert!(client
            .verify_server_final(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .is_err());
        assert!(client.verify_server_final(b"e=invalid-proof").is_err());
    }

    #[test]
    fn client_and_server_agree_and_the_client_refuses_weak_or_foreign_challenges() {
        for mechanism in ScramMechanism::ALL {
            let stored = credential_for(mechanism, "s3cret", 4096);
            let mut client = ScramClient::new(mechanism, "alice,=", "s3cret").unwrap();
            let mut server = ScramServer::new(mechanism);
            let ScramStep::Challenge(first) = server
                .step(&client.client_first(), |user| {
                    (user == "alice,=").then(|| stored.clone())
                })
                .unwrap()
            else {
                panic!("a challenge first");
            };
            let last = client.client_final(&first).unwrap();
            let ScramStep::Authenticated { user, server_final } =
                server.step(&last, |_| None).unwrap()
            else {
                panic!("authenticated");
            };
            assert_eq!(user, "alice,=");
            client.verify_server_final(&server_final).unwrap();
        }
        let mut client =
            ScramClient::with_nonce(ScramMechanism::ScramSha512, "a", "pw", "abc".into());
        assert!(client
            .client_final(b"r=abcdef,s=AAAA,i=100")
            .unwrap_err()
            .contains("minimum"));
        assert!(client.client_final(b"r=xyzdef,s=AAAA,i=4096").is_err());
        assert!(client.client_final(b"r=abc,s=AAAA,i=4096").is_err());
        assert!(client.client_final(b"r=abcdef,i=4096").is_err());
    }

    #[test]
    fn debug_hides_the_credential() {
        let stored = credential_for(ScramMechanism::ScramSha256, "pw", 4096);
        let shown = format!("{stored:?}");
        assert!(
            shown.contains("[hidden]") && shown.contains("4096"),
            "{shown}"
        );
        assert!(!shown.contains(&format!("{:?}", stored.stored_key)));
    }
}
