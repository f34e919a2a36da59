//! The bounds of numeric configuration values: the type and validator of a
//! key ([`ConfigKeyDef`]), the check that holds a value to them, and the
//! rows of the topic keys (CreateTopics, AlterConfigs,
//! IncrementalAlterConfigs). Broker keys carry their bound in their row of
//! [`crate::broker_keys::BROKER_KEYS`].
//!
//! Each row carries the type and validator of the key's `define(...)` in
//! Kafka 4.1's `ConfigDef`s (`LogConfig` and its `SERVER_CONFIG_DEF`,
//! `ServerConfigs`, `ReplicationConfigs`, `SocketServerConfigs`,
//! `KRaftConfigs`, `CleanerConfig`, `GroupCoordinatorConfig`,
//! `TransactionLogConfig`), including KIP-1030's (Kafka 4.0) minimum of
//! 1 MiB for `segment.bytes` / `log.segment.bytes`. A refused value is
//! reported in the words of Kafka's `ConfigException`:
//! `Invalid value 102400 for configuration segment.bytes: Value must be at
//! least 1048576`. Where Weir is stricter than Kafka, the row says why.
//!
//! This module owns the rules only; it must not depend on the rest of the
//! broker.

/// The type a value must parse as (Kafka's `ConfigDef.Type`); a value
/// outside the type's range is refused as Kafka refuses it ("Not a number
/// of type INT").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumType {
    /// 16-bit integer (`SHORT`).
    Short,
    /// 32-bit integer (`INT`).
    Int,
    /// 64-bit integer (`LONG`).
    Long,
    /// Floating point (`DOUBLE`).
    Double,
}

impl NumType {
    fn kafka_name(self) -> &'static str {
        match self {
            NumType::Short => "SHORT",
            NumType::Int => "INT",
            NumType::Long => "LONG",
            NumType::Double => "DOUBLE",
        }
    }
}

/// A key's validator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    /// Any value of the type (Kafka defines no validator).
    Any,
    /// `ConfigDef.Range.atLeast(min)`.
    AtLeast(i64),
    /// `ConfigDef.Range.between(min, max)`, both inclusive.
    Between(f64, f64),
    /// -1 (unlimited) or at least `min`: the rule Kafka's
    /// `KafkaConfig.validateValues` states for `log.retention.ms`
    /// ("must be unlimited (-1) or, greater than or equal to 1") and
    /// `LogConfig`'s `atLeast(-1)` for `retention.ms`.
    UnlimitedOrAtLeast(i64),
}

/// One configuration key's type and bound (a topic key's row here, or a
/// broker key's as [`crate::broker_keys::BrokerKey::bounds`] gives it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConfigKeyDef {
    /// The key, e.g. `segment.bytes` or `log.segment.bytes`.
    pub name: &'static str,
    /// The type its value must parse as.
    pub num_type: NumType,
    /// Its validator.
    pub bound: Bound,
}

/// A parsed, in-bounds value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    /// A `SHORT`, `INT` or `LONG` value.
    Integer(i64),
    /// A `DOUBLE` value.
    Double(f64),
}

/// A refused value, displayed as Kafka's `ConfigException(name, value,
/// message)`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Invalid value {value} for configuration {name}: {reason}")]
pub struct InvalidValue {
    /// The key.
    pub name: String,
    /// The value: as parsed when it parsed, else as written.
    pub value: String,
    /// Kafka's reason, e.g. `Value must be at least 1048576`.
    pub reason: String,
}

impl ConfigKeyDef {
    /// Parses `value` (surrounding whitespace ignored, as Kafka's
    /// `ConfigDef.parseType`) as this key's type and checks its bound.
    ///
    /// # Errors
    /// [`InvalidValue`] naming the key, with "Not a number of type T" or
    /// the bound it breaks.
    pub fn check(&self, value: &str) -> Result<Number, InvalidValue> {
        let trimmed = value.trim();
        let refuse = |shown: String, reason: String| InvalidValue {
            name: self.name.to_string(),
            value: shown,
            reason,
        };
        let not_a_number = || {
            refuse(
                value.to_string(),
                format!("Not a number of type {}", self.num_type.kafka_name()),
            )
        };
        let number = match self.num_type {
            NumType::Short => {
                Number::Integer(trimmed.parse::<i16>().map_err(|_| not_a_number())?.into())
            }
            NumType::Int => {
                Number::Integer(trimmed.parse::<i32>().map_err(|_| not_a_number())?.into())
            }
            NumType::Long => Number::Integer(trimmed.parse::<i64>().map_err(|_| not_a_number())?),
            // NaN is no number (Kafka's Range lets it through).
            NumType::Double => Number::Double(
                trimmed
                    .parse::<f64>()
                    .ok()
                    .filter(|d| !d.is_nan())
                    .ok_or_else(not_a_number)?,
            ),
        };
        let (as_f64, shown) = match number {
            Number::Integer(n) => (n as f64, n.to_string()),
            Number::Double(d) => (d, trimmed.to_string()),
        };
        let reason = match self.bound {
            Bound::Any => None,
            // Compared as doubles, as Kafka's Range does.
            Bound::AtLeast(min) => {
                (as_f64 < min as f64).then(|| format!("Value must be at least {min}"))
            }
            Bound::Between(min, max) => {
                if as_f64 < min {
                    Some(format!("Value must be at least {min}"))
                } else if as_f64 > max {
                    Some(format!("Value must be no more than {max}"))
                } else {
                    None
                }
            }
            Bound::UnlimitedOrAtLeast(min) => (as_f64 != -1.0 && as_f64 < min as f64)
                .then(|| format!("Value must be unlimited (-1) or at least {min}")),
        };
        match reason {
            Some(reason) => Err(refuse(shown, reason)),
            None => Ok(number),
        }
    }
}

/// The row of the topic key `name`, if it is a numeric key with one.
pub fn key_def(name: &str) -> Option<&'static ConfigKeyDef> {
    TOPIC_KEY_BOUNDS.iter().find(|d| d.name == name)
}

const fn key(name: &'static str, num_type: NumType, bound: Bound) -> ConfigKeyDef {
    ConfigKeyDef {
        name,
        num_type,
        bound,
    }
}

/// KIP-1030's minimum of `segment.bytes` and `log.segment.bytes`: 1 MiB.
pub const MIN_SEGMENT_BYTES: i64 = 1024 * 1024;

/// Every numeric topic key Weir accepts (Kafka's `LogConfig`). A new
/// numeric topic key gets its bound by adding its row here (Kafka's type
/// and validator); `topic_config::validate` applies it.
pub static TOPIC_KEY_BOUNDS: &[ConfigKeyDef] = {
    use Bound::{Any, AtLeast, Between, UnlimitedOrAtLeast};
    use NumType::{Double, Int, Long};
    &[
        key("segment.bytes", Int, AtLeast(MIN_SEGMENT_BYTES)),
        key("segment.ms", Long, AtLeast(1)),
        key("segment.index.bytes", Int, AtLeast(4)),
        key("flush.messages", Long, AtLeast(1)),
        key("flush.ms", Long, AtLeast(0)),
        key("retention.bytes", Long, Any),
        key("retention.ms", Long, UnlimitedOrAtLeast(-1)),
        key("max.message.bytes", Int, AtLeast(0)),
        key("index.interval.bytes", Int, AtLeast(0)),
        key("delete.retention.ms", Long, AtLeast(0)),
        key("min.compaction.lag.ms", Long, AtLeast(0)),
        key("max.compaction.lag.ms", Long, AtLeast(1)),
        key("file.delete.delay.ms", Long, AtLeast(0)),
        key("min.cleanable.dirty.ratio", Double, Between(0.0, 1.0)),
        key("message.timestamp.before.max.ms", Long, AtLeast(0)),
        key("message.timestamp.after.max.ms", Long, AtLeast(0)),
        // A topic key and a broker key of one name, both atLeast(1) in Kafka
        // (LogConfig and ServerLogConfigs); the broker row is in BROKER_KEYS.
        key("min.insync.replicas", Int, AtLeast(1)),
        // LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG: "for testing only", it
        // overrides segment.bytes without KIP-1030's minimum. Kafka defines no
        // validator; Weir keeps the old minimum of 14 bytes (a batch header).
        key("internal.segment.bytes", Int, AtLeast(14)),
    ]
};

#[cfg(test)]
mod tests {
    use super::*;

    fn message(name: &str, value: &str) -> String {
        key_def(name)
            .copied()
            .or_else(|| crate::broker_keys::broker_key(name).and_then(|k| k.bounds()))
            .unwrap_or_else(|| panic!("{name} has no row"))
            .check(value)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn refusals_read_as_kafkas_config_exception() {
        assert_eq!(
            message("segment.bytes", "102400"),
            "Invalid value 102400 for configuration segment.bytes: Value must be at least 1048576"
        );
        assert_eq!(
            message("segment.bytes", "2147483648"),
            "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"
        );
        assert_eq!(
            message("retention.ms", "soon"),
            "Invalid value soon for configuration retention.ms: Not a number of type LONG"
        );
        assert_eq!(
            message("min.cleanable.dirty.ratio", "1.5"),
            "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"
        );
        assert_eq!(
            message("log.retention.ms", "-2"),
            "Invalid value -2 for configuration log.retention.ms: Value must be unlimited (-1) or at least 1"
        );
        assert_eq!(
            message("socket.request.max.bytes", " 0 "),
            "Invalid value 0 for configuration socket.request.max.bytes: Value must be at least 1"
        );
    }
}
