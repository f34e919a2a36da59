//! Bounds what log lines show of client-supplied strings (group ids,
//! member ids, client ids, instance ids). A client may send such a string
//! as long as its frame (`socket.request.max.bytes`), so one request could
//! otherwise write a log line of megabytes; control characters could forge
//! further lines. Every log field of a client-supplied string at info level
//! or above goes through [`bounded`].
//!
//! Depends on nothing else in the broker.

use std::fmt;

/// Most bytes of a client-supplied string a log field shows: 256.
pub const MAX_LOGGED_BYTES: usize = 256;

/// `value` as a log field: whole when at most [`MAX_LOGGED_BYTES`] bytes,
/// else its first bytes (cut at a character boundary) followed by
/// `...(<n> more bytes)`. Control characters (newlines, escapes) are
/// written escaped (`\n`, `\u{1b}`) so a value cannot start a log line of
/// its own. Formats lazily: nothing is allocated unless the line is
/// written.
pub fn bounded(value: &str) -> Bounded<'_> {
    Bounded(value)
}

/// A client-supplied string bounded for a log line (see [`bounded`]).
#[derive(Clone, Copy)]
pub struct Bounded<'a>(&'a str);

impl fmt::Display for Bounded<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = self.0;
        let mut end = value.len().min(MAX_LOGGED_BYTES);
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        for c in value[..end].chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                fmt::Write::write_char(f, c)?;
            }
        }
        if end < value.len() {
            write!(f, "...({} more bytes)", value.len() - end)?;
        }
        Ok(())
    }
}

impl fmt::Debug for Bounded<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_shown_whole() {
        assert_eq!(bounded("group-1").to_string(), "group-1");
        assert_eq!(bounded("").to_string(), "");
        let exact = "x".repeat(MAX_LOGGED_BYTES);
        assert_eq!(bounded(&exact).to_string(), exact);
    }

    #[test]
    fn long_values_are_cut_with_a_marker() {
        let huge = "g".repeat(70_000);
        let shown = bounded(&huge).to_string();
        assert_eq!(
            shown,
            format!(
                "{}...({} more bytes)",
                "g".repeat(MAX_LOGGED_BYTES),
                70_000 - MAX_LOGGED_BYTES
            )
        );
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        // 'é' is two bytes: 255 bytes of 'a' then 'é' straddles the limit.
        let value = format!("{}é", "a".repeat(MAX_LOGGED_BYTES - 1));
        assert_eq!(
            bounded(&value).to_string(),
            format!("{}...(2 more bytes)", "a".repeat(MAX_LOGGED_BYTES - 1))
        );
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(
            bounded("a\nWARN forged\u{1b}[0m").to_string(),
            "a\\nWARN forged\\u{1b}[0m"
        );
        assert_eq!(format!("{:?}", bounded("g")), "\"g\"");
    }
}
