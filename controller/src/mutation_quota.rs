//! Controller mutation quotas (KIP-599, `controller_mutation_rate`):
//! Kafka's `ControllerMutationQuotaManager` with its `TokenBucket`, and
//! its `StrictControllerMutationQuota` / `PermissiveControllerMutationQuota`.
//!
//! The active controller holds one [`TokenBucket`] per quota sensor (the
//! (user, client id) tags of [`ClientQuotas::applied`]). A bucket refills
//! at the quota (partition mutations per second) up to a burst of `quota *
//! controller.quota.window.num * controller.quota.window.size.seconds`
//! tokens and starts full; every partition a CreateTopics, CreatePartitions
//! or DeleteTopics creates or deletes takes one token, and the bucket may
//! go below zero. A [`ClientMutationQuota`] applies it to one request:
//!
//! - strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+,
//!   Kafka's `StrictControllerMutationQuota`): a topic whose mutation comes
//!   while the bucket is below zero is refused with
//!   [`ControllerError::ThrottlingQuotaExceeded`] and takes no token; one
//!   that comes while it is at or above zero passes whatever its size;
//! - permissive (older versions, `PermissiveControllerMutationQuota`):
//!   every mutation passes and takes its tokens.
//!
//! Either way, when the bucket was found (strict) or left (permissive)
//! below zero the request's throttle time is the time it takes to refill
//! to zero, `-tokens / quota` (Kafka's
//! `ControllerMutationQuotaManager.throttleTimeMs`), less the time since
//! (`AbstractControllerMutationQuota.throttleTime`).
//!
//! Buckets live only in the memory of the controller that counted them,
//! as Kafka's sensors: a node that becomes the active controller starts
//! with none (every client's bucket full). A bucket no request touched for
//! an hour is dropped (Kafka's sensor expiry).
//! The pure controller functions ([`crate::control`]) see a quota only as
//! [`PartitionMutationQuota`] (Kafka's
//! `ControllerRequestContext.applyPartitionChangeQuota`).

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::error::ControllerError;
use crate::quota::{ClientQuotas, CONTROLLER_MUTATION_RATE};

/// How a request's partition mutations are counted (Kafka's
/// `ControllerRequestContext.applyPartitionChangeQuota`, called once per
/// topic just before its records are made).
pub trait PartitionMutationQuota {
    /// Counts `partitions` mutations of one topic.
    ///
    /// # Errors
    ///
    /// [`ControllerError::ThrottlingQuotaExceeded`] when a strict quota is
    /// already exhausted: the topic must not be changed.
    fn record(&mut self, partitions: usize) -> Result<(), ControllerError>;
}

/// No quota: every mutation passes (Kafka's
/// `UnboundedControllerMutationQuota`).
#[derive(Debug, Clone, Copy, Default)]
pub struct UnboundedMutationQuota;

impl PartitionMutationQuota for UnboundedMutationQuota {
    fn record(&mut self, _partitions: usize) -> Result<(), ControllerError> {
        Ok(())
    }
}

/// Who asks for a mutation, as the controller mutation quota sees it
/// (Kafka's request principal and client id), and whether the request's
/// version makes the quota strict (Kafka's `newQuotaFor(request,
/// strictSinceVersion)`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutatingClient {
    /// The principal, `User:<name>` (the user part is the quota's user).
    pub principal: String,
    /// The request header's client id.
    pub client_id: String,
    /// Strict (refuse over the quota) or permissive (only throttle).
    pub strict: bool,
}

impl MutatingClient {
    /// The user a quota entity names: the principal without `User:`.
    fn user(&self) -> &str {
        self.principal
            .strip_prefix("User:")
            .unwrap_or(&self.principal)
    }
}

/// `controller.quota.window.num` and `controller.quota.window.size.seconds`:
/// a bucket's burst is the quota times `samples * window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MutationQuotaConfig {
    /// `controller.quota.window.num`. Default: 11 (Kafka's).
    pub samples: u32,
    /// `controller.quota.window.size.seconds`. Default: 1 s (Kafka's).
    pub window: Duration,
}

impl Default for MutationQuotaConfig {
    fn default() -> Self {
        MutationQuotaConfig {
            samples: 11,
            window: Duration::from_secs(1),
        }
    }
}

impl MutationQuotaConfig {
    /// The most tokens a bucket of `quota` holds (Kafka's
    /// `TokenBucket.burst`: samples × window × quota).
    pub fn burst(&self, quota: f64) -> f64 {
        f64::from(self.samples.max(1)) * self.window.as_secs_f64() * quota
    }
}

/// Kafka's `org.apache.kafka.common.metrics.stats.TokenBucket`: `tokens`
/// refill continuously at `quota` per second up to `burst`; a record takes
/// its value even below zero. A new bucket is full (Kafka's starts at its
/// epoch, so its first refill fills it).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    tokens: f64,
    last_update: Option<Instant>,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new() -> Self {
        TokenBucket {
            tokens: 0.0,
            last_update: None,
        }
    }

    fn refill(&mut self, quota: f64, burst: f64, now: Instant) {
        self.tokens = match self.last_update {
            None => burst,
            Some(last) => {
                let elapsed = now.saturating_duration_since(last).as_secs_f64();
                burst.min(self.tokens + quota * elapsed)
            }
        };
        // Time never goes back for a bucket.
        self.last_update = Some(self.last_update.map_or(now, |last| last.max(now)));
    }

    /// The tokens at `now` (Kafka's `measure`).
    pub fn measure(&mut self, quota: f64, burst: f64, now: Instant) -> f64 {
        self.refill(quota, burst, now);
        self.tokens
    }

    /// Takes `value` tokens at `now` (Kafka's `record`).
    pub fn record(&mut self, quota: f64, burst: f64, value: f64, now: Instant) {
        self.refill(quota, burst, now);
        self.tokens = burst.min(self.tokens - value);
    }
}

impl Default for TokenBucket {
    fn default() -> Self {
        Self::new()
    }
}

/// The time a bucket at `tokens` (below zero) needs to refill to zero at
/// `quota` per second (Kafka's `ControllerMutationQuotaManager.throttleTimeMs`,
/// rounded to the millisecond as Kafka's `Math.round`).
pub fn throttle_time(tokens: f64, quota: f64) -> Duration {
    if tokens >= 0.0 || quota <= 0.0 {
        return Duration::ZERO;
    }
    Duration::from_millis((-tokens / quota * 1000.0).round() as u64)
}

/// A bucket nobody recorded into for this long is dropped (Kafka's
/// `ClientQuotaManager.InactiveSensorExpirationTimeSeconds`, one hour).
const BUCKET_EXPIRY: Duration = Duration::from_secs(3600);

/// How often idle buckets are looked for.
const EXPIRY_CHECK: Duration = Duration::from_secs(60);

/// A bucket and when a request last used it.
#[derive(Debug)]
struct Sensor {
    bucket: TokenBucket,
    last_used: Instant,
}

/// The active controller's buckets (Kafka's `ControllerMutationQuotaManager`).
#[derive(Debug, Default)]
pub struct ControllerMutationQuotaManager {
    config: MutationQuotaConfig,
    /// By (user tag, client id tag).
    sensors: HashMap<(String, String), Sensor>,
    last_expiry: Option<Instant>,
}

impl ControllerMutationQuotaManager {
    /// Buckets sized by `config`.
    pub fn new(config: MutationQuotaConfig) -> Self {
        ControllerMutationQuotaManager {
            config,
            sensors: HashMap::new(),
            last_expiry: None,
        }
    }

    /// The quota of one request from `client` (`None`: not counted, e.g.
    /// a broker's own creations) under `quotas` at `now`: unbounded when no
    /// `controller_mutation_rate` applies to the client.
    pub fn quota_for(
        &mut self,
        quotas: &ClientQuotas,
        client: Option<&MutatingClient>,
        now: Instant,
    ) -> ClientMutationQuota<'_> {
        if self
            .last_expiry
            .is_none_or(|at| now.saturating_duration_since(at) >= EXPIRY_CHECK)
        {
            self.last_expiry = Some(now);
            self.sensors
                .retain(|_, s| now.saturating_duration_since(s.last_used) < BUCKET_EXPIRY);
        }
        let applied = client.and_then(|c| {
            let applied = quotas.applied(CONTROLLER_MUTATION_RATE, c.user(), &c.client_id)?;
            Some((c.strict, applied))
        });
        let Some((strict, applied)) = applied else {
            return ClientMutationQuota {
                bucket: None,
                strict: false,
                now,
                throttle: Duration::ZERO,
            };
        };
        let sensor = self
            .sensors
            .entry((applied.user_tag, applied.client_id_tag))
            .or_insert_with(|| Sensor {
                bucket: TokenBucket::new(),
                last_used: now,
            });
        sensor.last_used = now;
        ClientMutationQuota {
            bucket: Some(LimitedBucket {
                bucket: &mut sensor.bucket,
                quota: applied.limit,
                burst: self.config.burst(applied.limit),
            }),
            strict,
            now,
            throttle: Duration::ZERO,
        }
    }
}

/// A bucket with the quota it refills at.
#[derive(Debug)]
struct LimitedBucket<'a> {
    bucket: &'a mut TokenBucket,
    quota: f64,
    burst: f64,
}

/// The controller mutation quota of one request (Kafka's
/// `StrictControllerMutationQuota` or `PermissiveControllerMutationQuota`,
/// or unbounded), kept for the request's processing only.
#[derive(Debug)]
pub struct ClientMutationQuota<'a> {
    bucket: Option<LimitedBucket<'a>>,
    strict: bool,
    now: Instant,
    /// The throttle time of the last violation, at `now`.
    throttle: Duration,
}

impl ClientMutationQuota<'_> {
    /// The request's throttle time as of `now` (Kafka's
    /// `AbstractControllerMutationQuota.throttleTime`: the last violation's,
    /// less the time since it was recorded); zero without a violation.
    pub fn throttle_time(&self, now: Instant) -> Duration {
        self.throttle
            .saturating_sub(now.saturating_duration_since(self.now))
    }
}

impl PartitionMutationQuota for ClientMutationQuota<'_> {
    fn record(&mut self, partitions: usize) -> Result<(), ControllerError> {
        let Some(b) = self.bucket.as_mut() else {
            return Ok(());
        };
        let value = partitions as f64;
        if self.strict {
            // checkQuotas, then record without a check.
            let tokens = b.bucket.measure(b.quota, b.burst, self.now);
            if tokens < 0.0 {
                self.throttle = throttle_time(tokens, b.quota);
                return Err(ControllerError::ThrottlingQuotaExceeded {
                    throttle_time_ms: self.throttle.as_millis() as u64,
                });
            }
            b.bucket.record(b.quota, b.burst, value, self.now);
        } else {
            // record, then checkQuotas: a violation only throttles.
            b.bucket.record(b.quota, b.burst, value, self.now);
            let tokens = b.bucket.measure(b.quota, b.burst, self.now);
            if tokens < 0.0 {
                self.throttle = throttle_time(tokens, b.quota);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::{EntityName, QuotaEntity, QuotaValue};

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_token_bucket_starts_full_refills_at_the_quota_and_goes_below_zero() {
        let t0 = Instant::now();
        let (quota, burst) = (2.0, 10.0);
        let mut bucket = TokenBucket::new();
        assert_eq!(
            bucket.measure(quota, burst, t0),
            burst,
            "a new bucket is full"
        );
        bucket.record(quota, burst, 16.0, t0);
        assert_eq!(
            bucket.measure(quota, burst, t0),
            -6.0,
            "a record may overdraw it"
        );
        assert_eq!(
            bucket.measure(quota, burst, t0 + SECOND),
            -4.0,
            "2 tokens a second"
        );
        assert_eq!(
            bucket.measure(quota, burst, t0 + 3 * SECOND),
            0.0,
            "back to zero after -6 / 2 s"
        );
        assert_eq!(
            bucket.measure(quota, burst, t0 + 60 * SECOND),
            burst,
            "never above the burst"
        );
        // Kafka's record clips to the burst too (a negative record).
        bucket.record(quota, burst, -5.0, t0 + 60 * SECOND);
        assert_eq!(bucket.measure(quota, burst, t0 + 60 * SECOND), burst);
        // An earlier instant does not refill backwards.
        bucket.record(quota, burst, 4.0, t0 + 60 * SECOND);
        assert_eq!(bucket.measure(quota, burst, t0), 6.0);
    }

    #[test]
    fn throttle_time_is_the_refill_time_to_zero() {
        assert_eq!(throttle_time(-6.0, 2.0), 3 * SECOND);
        assert_eq!(throttle_time(-1.99, 0.01), Duration::from_millis(199_000));
        assert_eq!(throttle_time(0.0, 2.0), Duration::ZERO);
        assert_eq!(throttle_time(5.0, 2.0), Duration::ZERO);
    }

    #[test]
    fn the_burst_is_samples_times_window_times_quota() {
        let kafka_default = MutationQuotaConfig::default();
        assert_eq!(kafka_default.burst(5.0), 55.0);
        let small = MutationQuotaConfig {
            samples: 2,
            window: Duration::from_millis(500),
        };
        assert_eq!(small.burst(4.0), 4.0);
    }

    fn quotas(entity: QuotaEntity, rate: f64) -> ClientQuotas {
        let mut quotas = ClientQuotas::default();
        quotas
            .0
            .entry(entity)
            .or_default()
            .insert(CONTROLLER_MUTATION_RATE.into(), QuotaValue(rate));
        quotas
    }

    fn client(client_id: &str, strict: bool) -> MutatingClient {
        MutatingClient {
            principal: "User:alice".into(),
            client_id: client_id.into(),
            strict,
        }
    }

    fn client_id_entity(client_id: &str) -> QuotaEntity {
        QuotaEntity {
            client_id: Some(EntityName::Named(client_id.into())),
            ..QuotaEntity::default()
        }
    }

    #[test]
    fn a_strict_quota_refuses_once_exhausted_and_passes_any_size_before() {
        // 1 mutation/s, burst 2 (2 samples of 1 s).
        let mut manager = ControllerMutationQuotaManager::new(MutationQuotaConfig {
            samples: 2,
            window: SECOND,
        });
        let image = quotas(client_id_entity("app"), 1.0);
        let t0 = Instant::now();
        let strict = client("app", true);
        let mut quota = manager.quota_for(&image, Some(&strict), t0);
        assert_eq!(quota.record(5), Ok(()), "not exhausted: any size passes");
        assert_eq!(
            quota.throttle_time(t0),
            Duration::ZERO,
            "a strict quota throttles only when it refuses"
        );
        // 2 - 5 = -3 tokens: the next topic is refused, 3 s to refill.
        assert_eq!(
            quota.record(1),
            Err(ControllerError::ThrottlingQuotaExceeded {
                throttle_time_ms: 3000
            })
        );
        assert_eq!(quota.throttle_time(t0), 3 * SECOND);
        assert_eq!(
            quota.throttle_time(t0 + SECOND),
            2 * SECOND,
            "the time since the violation is deducted"
        );
        // A refused topic took nothing: still -3 a moment later, and
        // back at zero 3 s later, when any size passes again.
        let mut quota = manager.quota_for(&image, Some(&strict), t0);
        assert!(quota.record(1).is_err());
        let mut quota = manager.quota_for(&image, Some(&strict), t0 + 3 * SECOND);
        assert_eq!(quota.record(10), Ok(()));

        // Another client id shares nothing with `app`: no quota at all.
        let other = client("other", true);
        let mut quota = manager.quota_for(&image, Some(&other), t0 + 3 * SECOND);
        assert_eq!(quota.record(1000), Ok(()));
        assert_eq!(quota.record(1000), Ok(()));
        // Nor does a request the broker makes for itself.
        let mut quota = manager.quota_for(&image, None, t0 + 3 * SECOND);
        assert_eq!(quota.record(1000), Ok(()));
    }

    #[test]
    fn a_permissive_quota_accepts_everything_and_throttles_below_zero() {
        let mut manager = ControllerMutationQuotaManager::new(MutationQuotaConfig {
            samples: 2,
            window: SECOND,
        });
        let image = quotas(client_id_entity("app"), 1.0);
        let t0 = Instant::now();
        let permissive = client("app", false);
        let mut quota = manager.quota_for(&image, Some(&permissive), t0);
        assert_eq!(quota.record(2), Ok(()));
        assert_eq!(quota.throttle_time(t0), Duration::ZERO, "exactly at zero");
        assert_eq!(quota.record(3), Ok(()), "permissive: never refused");
        assert_eq!(quota.record(1), Ok(()));
        assert_eq!(
            quota.throttle_time(t0),
            4 * SECOND,
            "the last violation's throttle: -4 tokens at 1/s"
        );
        // The same bucket is strict for a newer request version.
        let strict = client("app", true);
        let mut quota = manager.quota_for(&image, Some(&strict), t0 + SECOND);
        assert_eq!(
            quota.record(1),
            Err(ControllerError::ThrottlingQuotaExceeded {
                throttle_time_ms: 3000
            })
        );
    }

    #[test]
    fn idle_buckets_are_dropped_after_an_hour() {
        let mut manager = ControllerMutationQuotaManager::new(MutationQuotaConfig::default());
        let image = quotas(client_id_entity("app"), 1.0);
        let t0 = Instant::now();
        let strict = client("app", true);
        let mut quota = manager.quota_for(&image, Some(&strict), t0);
        quota.record(10_000).expect("a full bucket passes");
        assert_eq!(manager.sensors.len(), 1);
        let later = t0 + BUCKET_EXPIRY + SECOND;
        let mut quota = manager.quota_for(&image, Some(&strict), later);
        assert_eq!(
            quota.record(1),
            Ok(()),
            "a new, full bucket (Kafka's expired sensor is created again)"
        );
    }
}
