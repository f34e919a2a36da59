//! SASL for the SASL listener tests (issue 19): the users a test broker
//! knows, the JAAS values that declare them as Kafka spells them (PLAIN's
//! `PlainLoginModule`, SCRAM's `ScramLoginModule`, KIP-84), and the PLAIN
//! message a raw client sends (RFC 4616).
//!
//! The broker side is configured exactly as Kafka is
//! (`sasl.enabled.mechanisms=PLAIN[,SCRAM-SHA-256,SCRAM-SHA-512]` and
//! `listener.name.<listener>.plain.sasl.jaas.config`, see
//! [`crate::TestBrokerBuilder::sasl_plaintext_listener`] and
//! [`crate::TestBrokerBuilder::sasl_mechanisms`]); SCRAM users live in the
//! metadata log, added with `kafka-configs`. Nothing here depends on the
//! broker.

use bytes::Bytes;

/// The broker's own PLAIN identity, the `username`/`password` of its JAAS
/// entry (what Kafka would use for inter-broker SASL). It is also a user
/// (`user_admin`), so a client may log in as it.
pub const ADMIN: (&str, &str) = ("admin", "admin-secret");

/// A client user that the SASL tests declare next to [`ADMIN`].
pub const ALICE: (&str, &str) = ("alice", "alice-secret");

/// The login module of Kafka's PLAIN mechanism.
const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

/// The login module of Kafka's SCRAM mechanisms (KIP-84).
const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

/// The broker's JAAS value for PLAIN with `users` as `(username,
/// password)`, as Kafka's `PlainLoginModule` reads it:
///
/// ```text
/// org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";
/// ```
///
/// [`ADMIN`] is always the broker's `username`/`password` and the first
/// `user_` entry; `users` follow in order (an entry for `admin` among them
/// replaces its password).
///
/// # Panics
///
/// When a name or password holds `"`, `\`, a line break or a space in a
/// name: the tests never need them, and JAAS would want them quoted or
/// escaped.
pub fn plain_jaas_config(users: &[(&str, &str)]) -> String {
    let mut entries: Vec<(&str, &str)> = vec![ADMIN];
    for &(user, password) in users {
        match entries.iter_mut().find(|(name, _)| *name == user) {
            Some(entry) => entry.1 = password,
            None => entries.push((user, password)),
        }
    }
    let (admin, admin_password) = entries[0];
    let mut value = format!(
        "{PLAIN_LOGIN_MODULE} required username={} password={}",
        quoted(admin),
        quoted(admin_password)
    );
    for (user, password) in entries {
        assert!(
            !user.is_empty() && !user.contains(char::is_whitespace),
            "a PLAIN user name for JAAS must be one word: {user:?}"
        );
        value.push_str(&format!(" user_{user}={}", quoted(password)));
    }
    value.push(';');
    value
}

/// A client's JAAS value for PLAIN (`sasl.jaas.config` of the Java
/// client and Kafka's CLI tools):
/// `org.apache.kafka.common.security.plain.PlainLoginModule required
/// username="<user>" password="<password>";`.
///
/// # Panics
///
/// As [`plain_jaas_config`].
pub fn plain_client_jaas_config(user: &str, password: &str) -> String {
    format!(
        "{PLAIN_LOGIN_MODULE} required username={} password={};",
        quoted(user),
        quoted(password)
    )
}

/// The broker's JAAS value for a SCRAM mechanism,
/// `org.apache.kafka.common.security.scram.ScramLoginModule required;`
/// (Kafka's `listener.name.<listener>.scram-sha-512.sasl.jaas.config`
/// without inter-broker credentials: the users are the metadata log's).
pub fn scram_jaas_config() -> String {
    format!("{SCRAM_LOGIN_MODULE} required;")
}

/// A client's JAAS value for SCRAM-SHA-256 or SCRAM-SHA-512
/// (`sasl.jaas.config` of the Java client and Kafka's CLI tools):
/// `org.apache.kafka.common.security.scram.ScramLoginModule required
/// username="<user>" password="<password>";`.
///
/// # Panics
///
/// As [`plain_jaas_config`].
pub fn scram_client_jaas_config(user: &str, password: &str) -> String {
    format!(
        "{SCRAM_LOGIN_MODULE} required username={} password={};",
        quoted(user),
        quoted(password)
    )
}

/// The PLAIN message of RFC 4616 section 2, what a client sends as
/// `auth_bytes` of SaslAuthenticate: `authzid NUL authcid NUL passwd`
/// (UTF-8; `authzid` empty when the client acts as itself).
pub fn plain_auth_bytes(authzid: &str, user: &str, password: &str) -> Bytes {
    let mut bytes = Vec::with_capacity(authzid.len() + user.len() + password.len() + 2);
    bytes.extend_from_slice(authzid.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(user.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(password.as_bytes());
    Bytes::from(bytes)
}

/// `"text"`, for a JAAS option value.
fn quoted(text: &str) -> String {
    assert!(
        !text.contains(['"', '\\', '\n', '\r']),
        "a JAAS value in the tests holds no quote, backslash or line break: {text:?}"
    );
    format!("\"{text}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_broker_jaas_value_is_kafkas_with_admin_first() {
        assert_eq!(
            plain_jaas_config(&[ALICE]),
            "org.apache.kafka.common.security.plain.PlainLoginModule required \
             username=\"admin\" password=\"admin-secret\" \
             user_admin=\"admin-secret\" user_alice=\"alice-secret\";"
        );
        assert_eq!(
            plain_jaas_config(&[("bob", "b"), ("admin", "other")]),
            "org.apache.kafka.common.security.plain.PlainLoginModule required \
             username=\"admin\" password=\"other\" \
             user_admin=\"other\" user_bob=\"b\";"
        );
    }

    #[test]
    fn the_client_jaas_value_names_one_user() {
        assert_eq!(
            plain_client_jaas_config("alice", "alice-secret"),
            "org.apache.kafka.common.security.plain.PlainLoginModule required \
             username=\"alice\" password=\"alice-secret\";"
        );
    }

    #[test]
    fn the_scram_jaas_values_name_kafkas_scram_login_module() {
        assert_eq!(
            scram_jaas_config(),
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        );
        assert_eq!(
            scram_client_jaas_config("alice", "alice-secret"),
            "org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"alice\" password=\"alice-secret\";"
        );
    }

    #[test]
    fn plain_bytes_are_three_nul_separated_fields() {
        assert_eq!(&plain_auth_bytes("", "alice", "pw")[..], b"\0alice\0pw");
        assert_eq!(&plain_auth_bytes("z", "u", "")[..], b"z\0u\0");
    }

    #[test]
    #[should_panic(expected = "no quote")]
    fn a_quote_in_a_password_is_refused() {
        plain_client_jaas_config("alice", "a\"b");
    }
}
