//! The static voter set of the metadata quorum, `controller.quorum.voters`
//! (KIP-595): `id@host:port` entries separated by commas, e.g.
//! `1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095`.

/// One metadata quorum voter: its `node.id` and the address of its
/// `CONTROLLER` listener.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QuorumVoter {
    /// The voter's `node.id` (>= 0).
    pub id: i32,
    /// Host of its `CONTROLLER` listener (no brackets for IPv6).
    pub host: String,
    /// Port of its `CONTROLLER` listener.
    pub port: u16,
}

/// Why a `controller.quorum.voters` value does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid voter '{entry}': {reason}")]
pub struct InvalidVoters {
    /// The offending entry.
    pub entry: String,
    /// What is wrong with it.
    pub reason: String,
}

impl QuorumVoter {
    /// `host:port`, with brackets around an IPv6 host.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// Parses a `controller.quorum.voters` value. Empty (or only
    /// whitespace) is no voters.
    ///
    /// # Errors
    ///
    /// [`InvalidVoters`] for an entry without `@` or `:`, a non-numeric or
    /// negative id, an empty host, a port that is not a `u16`, or the same
    /// id twice (Kafka's `QuorumConfig.parseVoterConnections`).
    pub fn parse_list(value: &str) -> Result<Vec<QuorumVoter>, InvalidVoters> {
        let mut voters: Vec<QuorumVoter> = Vec::new();
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let invalid = |reason: &str| InvalidVoters {
                entry: entry.to_string(),
                reason: reason.to_string(),
            };
            let (id, address) = entry
                .split_once('@')
                .ok_or_else(|| invalid("expected id@host:port"))?;
            let id: i32 = id
                .trim()
                .parse()
                .map_err(|_| invalid("the id is not a number"))?;
            if id < 0 {
                return Err(invalid("the id must be >= 0"));
            }
            let (host, port) = address
                .rsplit_once(':')
                .ok_or_else(|| invalid("expected id@host:port"))?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            if host.is_empty() {
                return Err(invalid("the host is empty"));
            }
            let port: u16 = port
                .parse()
                .map_err(|_| invalid("the port is not a number in 0..=65535"))?;
            if voters.iter().any(|v| v.id == id) {
                return Err(invalid("the id is listed twice"));
            }
            voters.push(QuorumVoter {
                id,
                host: host.to_string(),
                port,
            });
        }
        Ok(voters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafka_voter_lists() {
        let voters =
            QuorumVoter::parse_list("1@127.0.0.1:9093, 2@[::1]:9094,3@kafka-3:9095").unwrap();
        assert_eq!(
            voters,
            vec![
                QuorumVoter {
                    id: 1,
                    host: "127.0.0.1".into(),
                    port: 9093
                },
                QuorumVoter {
                    id: 2,
                    host: "::1".into(),
                    port: 9094
                },
                QuorumVoter {
                    id: 3,
                    host: "kafka-3".into(),
                    port: 9095
                },
            ]
        );
        assert_eq!(voters[1].address(), "[::1]:9094");
        assert_eq!(QuorumVoter::parse_list(" ").unwrap(), vec![]);
    }

    #[test]
    fn rejects_malformed_entries() {
        for bad in [
            "1",
            "x@h:1",
            "-1@h:1",
            "1@h",
            "1@:9",
            "1@h:99999",
            "1@h:1,1@g:2",
        ] {
            let err = QuorumVoter::parse_list(bad).unwrap_err();
            assert!(bad.contains(err.entry.as_str()), "{bad}: {err}");
        }
    }
}
