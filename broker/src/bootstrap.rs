//! The records a new cluster starts with (Kafka's `bootstrap.checkpoint`):
//! `weir format --add-scram` writes them to the log directory's
//! [`BOOTSTRAP_FILE`](weir_storage::BOOTSTRAP_FILE) as JSON, and the
//! controller commits them with the cluster's first broker registration
//! ([`QuorumOptions::bootstrap_records`](weir_controller::QuorumOptions::bootstrap_records)),
//! so SCRAM users can log in from the first start.

use std::path::Path;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use weir_controller::{MetadataRecord, ScramMechanism, UserScramCredentialRecord};

use crate::network::scram;

/// Parses one `--add-scram` value as `kafka-storage format` takes it:
/// `<MECHANISM>=[name=<user>,password=<password>]`, with optional
/// `iterations=<n>` (default 4096, 4096 to 16384), `salt=<base64>` (default
/// 32 random bytes) and, instead of `password`, `saltedpassword=<base64>`;
/// a value may be double-quoted (then it may hold `,` and `]`).
///
/// # Errors
/// What is wrong, naming the key; never a password.
pub fn parse_add_scram(spec: &str) -> Result<MetadataRecord, String> {
    let (mechanism, body) = spec.split_once('=').ok_or_else(|| {
        format!("expected <mechanism>=[name=...,password=...], got no '=' in {spec:?}")
    })?;
    let mechanism = ScramMechanism::from_name(mechanism.trim()).ok_or_else(|| {
        format!("unknown SCRAM mechanism {mechanism:?} (SCRAM-SHA-256 or SCRAM-SHA-512)")
    })?;
    let body = body
        .trim()
        .strip_prefix('[')
        .and_then(|b| b.strip_suffix(']'))
        .ok_or_else(|| "the credential must be written in [...]".to_string())?;
    let mut name = None;
    let mut password = None;
    let mut salted_password = None;
    let mut salt = None;
    let mut iterations = ScramMechanism::MIN_ITERATIONS;
    for (key, value) in fields(body)? {
        match key.as_str() {
            "name" => name = Some(value),
            "password" => password = Some(value),
            "saltedpassword" => {
                salted_password = Some(
                    BASE64
                        .decode(&value)
                        .map_err(|_| "saltedpassword is not base64".to_string())?,
                )
            }
            "salt" => {
                salt = Some(
                    BASE64
                        .decode(&value)
                        .map_err(|_| "salt is not base64".to_string())?,
                )
            }
            "iterations" => {
                iterations = value
                    .parse()
                    .map_err(|_| format!("iterations {value:?} is not a number"))?;
            }
            other => {
                return Err(format!(
                    "unknown key {other:?} (name, password, saltedpassword, salt, iterations)"
                ))
            }
        }
    }
    let name = name.filter(|n| !n.is_empty()).ok_or("name must be given")?;
    if !(ScramMechanism::MIN_ITERATIONS..=ScramMechanism::MAX_ITERATIONS).contains(&iterations) {
        return Err(format!(
            "iterations must be {} to {}",
            ScramMechanism::MIN_ITERATIONS,
            ScramMechanism::MAX_ITERATIONS
        ));
    }
    let salt = match salt {
        Some(salt) => salt,
        None => scram::random_bytes(32).map_err(|e| e.to_string())?,
    };
    let salted = match (password, salted_password) {
        (Some(password), None) => {
            scram::salted_password(mechanism, password.as_bytes(), &salt, iterations as u32)
        }
        (None, Some(salted)) => salted,
        (Some(_), Some(_)) => return Err("give password or saltedpassword, not both".into()),
        (None, None) => return Err("password must be given".into()),
    };
    Ok(MetadataRecord::UserScramCredential(
        UserScramCredentialRecord {
            name,
            mechanism,
            credential: scram::credential(mechanism, &salted, &salt, iterations),
        },
    ))
}

/// `key=value` pairs separated by commas; a value may be double-quoted.
fn fields(body: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut chars = body.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some(c) => value.push(c),
                    None => return Err(format!("unterminated quoted value of {:?}", key.trim())),
                }
            }
            if chars.next().is_some_and(|c| c != ',') {
                return Err(format!(
                    "expected ',' after the quoted value of {:?}",
                    key.trim()
                ));
            }
        } else {
            value = chars.by_ref().take_while(|&c| c != ',').collect();
            // `name=a password=b`: a missing comma, not a name with "="
            // (base64's trailing padding is fine).
            if value.trim_end().trim_end_matches('=').contains('=') {
                return Err(format!(
                    "the value of {:?} holds '=': separate key=value pairs with ',' (quote a value that holds '=')",
                    key.trim()
                ));
            }
        }
        out.push((key.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
}

/// Writes `records` as the log directory's bootstrap file.
///
/// # Errors
/// The I/O error, naming the file.
pub fn write(log_dir: &Path, records: &[MetadataRecord]) -> anyhow::Result<()> {
    let json = serde_json::to_vec(records)?;
    weir_storage::write_bootstrap(log_dir, &json)?;
    Ok(())
}

/// The log directory's bootstrap records (none without a file).
///
/// # Errors
/// The file cannot be read, or is not a JSON list of records.
pub fn read(log_dir: &Path) -> anyhow::Result<Vec<MetadataRecord>> {
    match weir_storage::read_bootstrap(log_dir)? {
        None => Ok(Vec::new()),
        Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            anyhow::anyhow!(
                "{}: not a list of metadata records: {e}",
                log_dir.join(weir_storage::BOOTSTRAP_FILE).display()
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(record: &MetadataRecord) -> &UserScramCredentialRecord {
        match record {
            MetadataRecord::UserScramCredential(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn kafkas_add_scram_values_parse() {
        let r = parse_add_scram("SCRAM-SHA-256=[name=alice,password=alice-secret]").unwrap();
        let r = credential(&r);
        assert_eq!(r.name, "alice");
        assert_eq!(r.mechanism, ScramMechanism::ScramSha256);
        assert_eq!(r.credential.iterations, 4096);
        assert_eq!(r.credential.salt.len(), 32);
        let salted = scram::salted_password(
            ScramMechanism::ScramSha256,
            b"alice-secret",
            &r.credential.salt,
            4096,
        );
        assert_eq!(
            r.credential,
            scram::credential(
                ScramMechanism::ScramSha256,
                &salted,
                &r.credential.salt,
                4096
            )
        );

        let r = parse_add_scram(
            r#"SCRAM-SHA-512=[name="bob",password="a,b]c",iterations=8192,salt="c2FsdA=="]"#,
        )
        .unwrap();
        let r = credential(&r);
        assert_eq!((r.name.as_str(), r.credential.iterations), ("bob", 8192));
        // Unquoted base64 keeps its padding.
        let unquoted =
            parse_add_scram("SCRAM-SHA-512=[name=bob,password=x,salt=c2FsdA==]").unwrap();
        assert_eq!(credential(&unquoted).credential.salt, b"salt");
        assert_eq!(r.credential.salt, b"salt");
        let salted = scram::salted_password(ScramMechanism::ScramSha512, b"a,b]c", b"salt", 8192);
        assert_eq!(
            r.credential.stored_key,
            scram::credential(ScramMechanism::ScramSha512, &salted, b"salt", 8192).stored_key
        );
    }

    #[test]
    fn bad_values_are_refused_without_the_password() {
        for (spec, expected) in [
            ("SCRAM-SHA-1=[name=a,password=p]", "unknown SCRAM mechanism"),
            ("SCRAM-SHA-256=name=a,password=p", "[...]"),
            ("SCRAM-SHA-256=[password=p]", "name must be given"),
            ("SCRAM-SHA-256=[name=a]", "password must be given"),
            (
                "SCRAM-SHA-256=[name=a,password=p,iterations=10]",
                "4096 to 16384",
            ),
            (
                "SCRAM-SHA-256=[name=a,password=p,colour=red]",
                "unknown key",
            ),
            ("SCRAM-SHA-256=[name=a,password=\"p]", "unterminated"),
            (
                "SCRAM-SHA-256=[name=a password=p]",
                "separate key=value pairs with ','",
            ),
        ] {
            let e = parse_add_scram(spec).unwrap_err();
            assert!(e.contains(expected), "{spec}: {e}");
            assert!(!e.contains("p\"") && !e.contains("=p"), "{spec}: {e}");
        }
    }

    #[test]
    fn the_file_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).unwrap().is_empty());
        let records = vec![parse_add_scram("SCRAM-SHA-512=[name=alice,password=x]").unwrap()];
        write(dir.path(), &records).unwrap();
        assert_eq!(read(dir.path()).unwrap(), records);
        std::fs::write(dir.path().join(weir_storage::BOOTSTRAP_FILE), b"{").unwrap();
        assert!(read(dir.path()).is_err());
    }
}
