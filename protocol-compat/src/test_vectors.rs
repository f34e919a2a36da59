//! Reading protocol test vectors: captured or hand-assembled frames stored
//! under `protocol-compat/tests/vectors/`.
//!
//! A vector file is named `<api>_<request|response>_v<N>_<client>.<hex|bin>`
//! (STYLE.md), where `<api>` is the Kafka API name in snake case
//! (`api_versions`, `metadata`, `produce`), `<N>` the API version and
//! `<client>` who produced the bytes (`librdkafka-2.3.0`, `handbuilt-...`;
//! dashes, no underscores). The content is one frame **without** the 4-byte
//! size prefix: request header + body, or response header + body. `.bin`
//! files hold raw bytes; `.hex` files hold hex digits with optional
//! whitespace and `#` comments to end of line. Used by tests only, but kept
//! public so other crates' tests (integration tests) can read the same files.

use kafka_protocol::messages::ApiKey;

/// Why a vector file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VectorError {
    /// A character that is not a hex digit, whitespace or comment.
    #[error("invalid hex character {character:?} on line {line}")]
    InvalidHex {
        /// The offending character.
        character: char,
        /// 1-based line number.
        line: usize,
    },
    /// An odd number of hex digits.
    #[error("odd number of hex digits ({digits})")]
    OddDigits {
        /// Digits found.
        digits: usize,
    },
    /// A file name that does not follow `<api>_<request|response>_v<N>_<client>.<hex|bin>`.
    #[error("vector file name {name:?} does not follow <api>_<request|response>_v<N>_<client>.<hex|bin>")]
    BadName {
        /// The file name.
        name: String,
    },
}

/// Whether a vector holds a request or a response frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A request frame (request header + body).
    Request,
    /// A response frame (response header + body).
    Response,
}

/// What a vector's file name says about its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorName {
    /// The API.
    pub api_key: ApiKey,
    /// Request or response.
    pub direction: Direction,
    /// The API version.
    pub api_version: i16,
    /// Who produced the bytes.
    pub client: String,
    /// Whether the file is hex text (`.hex`) rather than raw bytes (`.bin`).
    pub is_hex: bool,
}

/// `ApiVersions` -> `api_versions`.
fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

impl VectorName {
    /// Parses a file name such as `metadata_request_v12_librdkafka-2.3.0.bin`.
    ///
    /// # Errors
    ///
    /// [`VectorError::BadName`] if the name does not follow the pattern or
    /// names an API Kafka does not define.
    pub fn parse(file_name: &str) -> Result<Self, VectorError> {
        let bad = || VectorError::BadName {
            name: file_name.to_owned(),
        };
        let (stem, is_hex) = if let Some(stem) = file_name.strip_suffix(".hex") {
            (stem, true)
        } else if let Some(stem) = file_name.strip_suffix(".bin") {
            (stem, false)
        } else {
            return Err(bad());
        };
        let (direction, api, rest) = if let Some((api, rest)) = stem.split_once("_request_v") {
            (Direction::Request, api, rest)
        } else if let Some((api, rest)) = stem.split_once("_response_v") {
            (Direction::Response, api, rest)
        } else {
            return Err(bad());
        };
        let (version, client) = rest.split_once('_').ok_or_else(bad)?;
        let api_version = version.parse::<i16>().map_err(|_| bad())?;
        let api_key = ApiKey::iter()
            .find(|key| snake_case(&format!("{key:?}")) == api)
            .ok_or_else(bad)?;
        if client.is_empty() {
            return Err(bad());
        }
        Ok(Self {
            api_key,
            direction,
            api_version,
            client: client.to_owned(),
            is_hex,
        })
    }
}

/// Parses hex text: digits in pairs, whitespace ignored, `#` starts a
/// comment running to the end of the line.
///
/// # Errors
///
/// [`VectorError::InvalidHex`] for any other character and
/// [`VectorError::OddDigits`] if the digits do not pair up.
pub fn parse_hex(text: &str) -> Result<Vec<u8>, VectorError> {
    let mut digits = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let content = line.split('#').next().unwrap_or("");
        for character in content.chars() {
            if character.is_whitespace() {
                continue;
            }
            let digit = character.to_digit(16).ok_or(VectorError::InvalidHex {
                character,
                line: index + 1,
            })?;
            digits.push(digit as u8);
        }
    }
    if digits.len() % 2 != 0 {
        return Err(VectorError::OddDigits {
            digits: digits.len(),
        });
    }
    Ok(digits
        .chunks(2)
        .map(|pair| pair[0] << 4 | pair[1])
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_with_comments_and_whitespace() {
        assert_eq!(
            parse_hex("00 12 # api key\n\tff ff\n# only a comment\nA0").unwrap(),
            vec![0x00, 0x12, 0xff, 0xff, 0xa0]
        );
        assert_eq!(parse_hex("0"), Err(VectorError::OddDigits { digits: 1 }));
        assert_eq!(
            parse_hex("00\nzz"),
            Err(VectorError::InvalidHex {
                character: 'z',
                line: 2
            })
        );
    }

    #[test]
    fn names_follow_the_style_pattern() {
        let name = VectorName::parse("api_versions_request_v3_librdkafka-2.3.0.bin").unwrap();
        assert_eq!(name.api_key, ApiKey::ApiVersions);
        assert_eq!(name.direction, Direction::Request);
        assert_eq!(name.api_version, 3);
        assert_eq!(name.client, "librdkafka-2.3.0");
        assert!(!name.is_hex);
        let name = VectorName::parse("offset_for_leader_epoch_response_v4_franz-go.hex").unwrap();
        assert_eq!(name.api_key, ApiKey::OffsetForLeaderEpoch);
        assert_eq!(name.direction, Direction::Response);
        for bad in [
            "metadata_request_v12.hex",
            "metadata_v12_x.hex",
            "nosuchapi_request_v1_x.hex",
            "metadata_request_vX_x.hex",
            "metadata_request_v1_x.txt",
        ] {
            assert!(VectorName::parse(bad).is_err(), "{bad}");
        }
    }
}
