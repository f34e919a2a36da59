//! The bounds of numeric configuration values: one declarative row per key
//! ([`ConfigKeyDef`]), broker keys (`server.properties`, checked at start)
//! and topic keys (CreateTopics, AlterConfigs, IncrementalAlterConfigs)
//! alike.
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

/// One configuration key's type and bound. Issue 16 grows this row into
/// the single declarative definition of a key (default, documentation,
/// DescribeConfigs type); today it holds what validation needs.
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

/// The row of `name`, if it is a numeric key with one.
pub fn key_def(name: &str) -> Option<&'static ConfigKeyDef> {
    CONFIG_KEY_BOUNDS.iter().find(|d| d.name == name)
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

/// Every numeric key Weir accepts, broker keys then topic keys. A new
/// numeric key gets its bound by adding its row here (Kafka's type and
/// validator); `BrokerConfig`'s `parse_num` and `topic_config::validate`
/// apply it.
pub static CONFIG_KEY_BOUNDS: &[ConfigKeyDef] = {
    use Bound::{Any, AtLeast, Between, UnlimitedOrAtLeast};
    use NumType::{Double, Int, Long, Short};
    &[
        // ---- Broker keys (server.properties), by Kafka's defining class.
        // KRaftConfigs / ServerConfigs. broker.id has no validator in Kafka but
        // must equal node.id, which is atLeast(0).
        key("node.id", Int, AtLeast(0)),
        key("broker.id", Int, AtLeast(0)),
        // Kafka defines no validator for these two; 0 would fence every broker
        // at once (session) or heartbeat without pause, so Weir wants 1 ms.
        key("broker.heartbeat.interval.ms", Int, AtLeast(1)),
        key("broker.session.timeout.ms", Int, AtLeast(1)),
        key("message.max.bytes", Int, AtLeast(0)),
        key("num.io.threads", Int, AtLeast(1)),
        // ReplicationConfigs. Kafka 4.1 defines no validator for
        // default.replication.factor (a 0 makes every auto-created topic fail
        // with INVALID_REPLICATION_FACTOR); Weir refuses it at start (issue 15).
        key("default.replication.factor", Short, AtLeast(1)),
        key("leader.imbalance.check.interval.seconds", Long, AtLeast(1)),
        // Removed from Kafka 4; accepted and unused.
        key("leader.imbalance.per.broker.percentage", Int, Any),
        // LogConfig.SERVER_CONFIG_DEF and KafkaConfig.validateValues.
        key("num.partitions", Int, AtLeast(1)),
        key("log.segment.bytes", Int, AtLeast(MIN_SEGMENT_BYTES)),
        key("log.roll.ms", Long, AtLeast(1)),
        key("log.roll.hours", Int, AtLeast(1)),
        // Kafka turns any negative retention into -1 before checking "-1 or at
        // least 1", so -2 slips through as unlimited there; Weir holds every
        // form of the key to the rule as stated.
        key("log.retention.ms", Long, UnlimitedOrAtLeast(1)),
        key("log.retention.minutes", Int, UnlimitedOrAtLeast(1)),
        key("log.retention.hours", Int, UnlimitedOrAtLeast(1)),
        key("log.retention.bytes", Long, Any),
        key("log.retention.check.interval.ms", Long, AtLeast(1)),
        // KIP-937 (ServerLogConfigs): the accepted window around the broker's
        // clock for CreateTime records.
        key("log.message.timestamp.before.max.ms", Long, AtLeast(0)),
        key("log.message.timestamp.after.max.ms", Long, AtLeast(0)),
        key("log.index.size.max.bytes", Int, AtLeast(4)),
        key("log.index.interval.bytes", Int, AtLeast(0)),
        key("log.flush.interval.messages", Long, AtLeast(1)),
        // Kafka: no validator; a negative interval means nothing here.
        key("log.flush.interval.ms", Long, AtLeast(0)),
        // Kafka: no validator; Weir's flusher wants a period of 1 ms or more.
        key("log.flush.scheduler.interval.ms", Long, AtLeast(1)),
        key("log.flush.offset.checkpoint.interval.ms", Int, AtLeast(0)),
        key("num.recovery.threads.per.data.dir", Int, AtLeast(1)),
        key("min.insync.replicas", Int, AtLeast(1)),
        // CleanerConfig (and KafkaConfig's "at least 1MB per cleaner thread",
        // checked across keys by BrokerConfig).
        key("log.cleaner.threads", Int, AtLeast(0)),
        key("log.cleaner.dedupe.buffer.size", Long, Any),
        key("log.cleaner.backoff.ms", Long, AtLeast(0)),
        key("log.cleaner.min.cleanable.ratio", Double, Between(0.0, 1.0)),
        key("log.cleaner.delete.retention.ms", Long, AtLeast(0)),
        key("log.cleaner.min.compaction.lag.ms", Long, AtLeast(0)),
        key("log.cleaner.max.compaction.lag.ms", Long, AtLeast(1)),
        // TransactionLogConfig.
        key("producer.id.expiration.ms", Int, AtLeast(1)),
        key(
            "transaction.state.log.replication.factor",
            Short,
            AtLeast(1),
        ),
        key("transaction.state.log.min.isr", Int, AtLeast(1)),
        // SocketServerConfigs. Kafka's connections.max.idle.ms has no
        // validator; -1 turns idle closing off, as in Kafka's Selector.
        key("socket.request.max.bytes", Int, AtLeast(1)),
        key("socket.send.buffer.bytes", Int, Any),
        key("socket.receive.buffer.bytes", Int, Any),
        key("num.network.threads", Int, AtLeast(1)),
        key("connections.max.idle.ms", Long, UnlimitedOrAtLeast(0)),
        // Kafka's queued.max.request.bytes has no validator (0 or less, its
        // default -1 included, is unbounded); Weir's response budget alike.
        key("queued.max.request.bytes", Long, Any),
        key("queued.max.response.bytes", Long, Any),
        key("queued.max.response.bytes.per.connection", Long, AtLeast(1)),
        // ServerConfigs' fetch.max.bytes: atLeast(1024); SocketServerConfigs'
        // max.connections*: atLeast(0).
        key("fetch.max.bytes", Int, AtLeast(1024)),
        key("max.connections", Int, AtLeast(0)),
        key("max.connections.per.ip", Int, AtLeast(0)),
        // GroupCoordinatorConfig. Kafka's offsets.topic.segment.bytes is
        // atLeast(1), but the topic is created with it as its segment.bytes,
        // which KIP-1030 holds to 1 MiB: a smaller value could never create it.
        key("offsets.topic.num.partitions", Int, AtLeast(1)),
        key("offsets.topic.replication.factor", Short, AtLeast(1)),
        key(
            "offsets.topic.segment.bytes",
            Int,
            AtLeast(MIN_SEGMENT_BYTES),
        ),
        key("offsets.retention.minutes", Int, AtLeast(1)),
        key("offsets.retention.check.interval.ms", Long, AtLeast(1)),
        // Kafka defines no validator for these four; negative values mean
        // nothing, so Weir wants 0 or more.
        key("group.initial.rebalance.delay.ms", Int, AtLeast(0)),
        key("group.min.session.timeout.ms", Int, AtLeast(0)),
        key("group.max.session.timeout.ms", Int, AtLeast(0)),
        key("offset.metadata.max.bytes", Int, AtLeast(0)),
        key("group.max.size", Int, AtLeast(1)),
        // ReplicationConfigs. Kafka defines no validator for these but
        // num.replica.fetchers (atLeast 1) and the fetch sizes (atLeast 0);
        // Weir wants positive sizes and intervals (0 means nothing useful).
        key("num.replica.fetchers", Int, AtLeast(1)),
        key("replica.fetch.max.bytes", Int, AtLeast(0)),
        key("replica.fetch.response.max.bytes", Int, AtLeast(0)),
        key("replica.fetch.wait.max.ms", Int, AtLeast(0)),
        key("replica.fetch.min.bytes", Int, AtLeast(1)),
        key("replica.fetch.backoff.ms", Int, AtLeast(0)),
        key("replica.lag.time.max.ms", Long, AtLeast(1)),
        key(
            "replica.high.watermark.checkpoint.interval.ms",
            Long,
            AtLeast(1),
        ),
        // ---- Topic keys (LogConfig's CONFIG).
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
        // min.insync.replicas is a broker and a topic key of one name (above).
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

    #[test]
    fn keys_are_unique() {
        for (i, d) in CONFIG_KEY_BOUNDS.iter().enumerate() {
            assert!(
                CONFIG_KEY_BOUNDS[..i].iter().all(|e| e.name != d.name),
                "{} has two rows",
                d.name
            );
        }
    }
}
