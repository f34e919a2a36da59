//! Client byte-rate quotas (KIP-13, KIP-55 for users, KIP-219 for the
//! throttle protocol): Kafka's `ClientQuotaManager` with its
//! `DefaultQuotaCallback`, over the quotas of the metadata image
//! (`weir_controller::quota`, set with AlterClientQuotas).
//!
//! A Produce records its request's size against `producer_byte_rate`, a
//! consumer's Fetch its response's size against `consumer_byte_rate`, each
//! in the sensor of the (user, client id) the quota applies to; the rate is
//! Kafka's sampled `Rate` (`quota.window.num` samples of
//! `quota.window.size.seconds`, at least `num - 1` windows long). A rate
//! over the quota gives a throttle time of `(rate - quota) / quota *
//! window` ms (Kafka's `QuotaUtils.throttleTime`): the response carries it
//! in `throttle_time_ms` and the connection reads nothing more for that
//! long (the channel muting of KIP-219). A throttled Fetch answers no
//! records (Kafka's `getThrottledResponse`) and its bytes are not counted.
//! `request_percentage` and `controller_mutation_rate` are stored and
//! described but not enforced yet.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weir_controller::quota::{
    ClientQuotas, EntityName, QuotaEntity, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE,
};
use weir_controller::MetadataImage;

/// Which byte rate a request counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaType {
    /// `producer_byte_rate`: Produce request bytes.
    Produce,
    /// `consumer_byte_rate`: consumer Fetch response bytes.
    Fetch,
}

impl QuotaType {
    fn key(self) -> &'static str {
        match self {
            QuotaType::Produce => PRODUCER_BYTE_RATE,
            QuotaType::Fetch => CONSUMER_BYTE_RATE,
        }
    }

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            QuotaType::Produce => "produce",
            QuotaType::Fetch => "fetch",
        }
    }
}

/// The quota that applies to a (user, client id) and the sensor it shares
/// (Kafka's metric tags): `(limit in bytes/s, user tag, client id tag)`.
type Applied = (f64, String, String);

/// The broker's byte-rate quotas and their sensors.
#[derive(Debug)]
pub struct ClientQuotaManager {
    window: Duration,
    samples: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The quotas the cache below was resolved against.
    quotas: Arc<ClientQuotas>,
    resolved: HashMap<(QuotaType, String, String), Option<Applied>>,
    sensors: HashMap<(QuotaType, String, String), Rate>,
    /// When sensors idle for [`SENSOR_EXPIRY`] were last dropped.
    last_expiry: Option<Instant>,
}

/// A sensor nobody recorded into for this long is dropped (Kafka's
/// `ClientQuotaManager.InactiveSensorExpirationTimeSeconds`, one hour), so
/// clients with ever new ids do not grow the broker's memory.
const SENSOR_EXPIRY: Duration = Duration::from_secs(3600);

/// How often idle sensors are looked for.
const EXPIRY_CHECK: Duration = Duration::from_secs(60);

impl ClientQuotaManager {
    /// Sensors of `samples` windows of `window` each
    /// (`quota.window.num`, `quota.window.size.seconds`).
    pub fn new(samples: usize, window: Duration) -> Self {
        ClientQuotaManager {
            window: window.max(Duration::from_millis(1)),
            samples: samples.max(1),
            state: Mutex::default(),
        }
    }

    /// Records `bytes` for the client (`principal`, e.g. `User:alice`,
    /// and `client_id`) against `quota_type` at `now` and returns the
    /// throttle time; zero when no quota applies (then nothing is
    /// recorded, as Kafka's `quotasEnabled`) or the rate is within it.
    pub fn record(
        &self,
        image: &MetadataImage,
        quota_type: QuotaType,
        principal: &str,
        client_id: &str,
        bytes: usize,
        now: Instant,
    ) -> Duration {
        if image.client_quotas.is_empty() {
            return Duration::ZERO;
        }
        let user = principal.strip_prefix("User:").unwrap_or(principal);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if *state.quotas != image.client_quotas {
            state.quotas = Arc::new(image.client_quotas.clone());
            state.resolved.clear();
        }
        if state
            .last_expiry
            .is_none_or(|at| now.saturating_duration_since(at) >= EXPIRY_CHECK)
        {
            state.last_expiry = Some(now);
            state
                .sensors
                .retain(|_, rate| now.saturating_duration_since(rate.last_record) < SENSOR_EXPIRY);
            // Rebuilt on demand; it holds one entry per client seen.
            state.resolved.clear();
        }
        let key = (quota_type, user.to_string(), client_id.to_string());
        let applied = match state.resolved.get(&key) {
            Some(applied) => applied.clone(),
            None => {
                let applied = resolve(&state.quotas, quota_type.key(), user, client_id);
                state.resolved.insert(key, applied.clone());
                applied
            }
        };
        let Some((limit, user_tag, client_tag)) = applied else {
            return Duration::ZERO;
        };
        let (samples, window) = (self.samples, self.window);
        let rate = state
            .sensors
            .entry((quota_type, user_tag, client_tag))
            .or_insert_with(|| Rate::new(samples, window));
        rate.record(bytes as f64, now);
        let (value, window_size) = rate.measure(now);
        if value <= limit {
            return Duration::ZERO;
        }
        let throttle_ms = ((value - limit) / limit * window_size.as_millis() as f64).round();
        let throttle = Duration::from_millis(throttle_ms.max(0.0) as u64);
        metrics::counter!("weir_quota_throttled_total", "quota" => quota_type.label()).increment(1);
        metrics::counter!("weir_quota_throttle_time_ms_total", "quota" => quota_type.label())
            .increment(throttle.as_millis() as u64);
        throttle
    }

    /// The most bytes one response may carry for this client (Kafka's
    /// `getMaxValueInQuotaWindow`: the quota times `quota.window.num - 1`
    /// windows), or `None` when no quota applies. A Fetch is capped to it,
    /// so that one response never exceeds what the quota allows in a
    /// window (else every answer would be throttled and empty).
    pub fn max_value_in_window(
        &self,
        image: &MetadataImage,
        quota_type: QuotaType,
        principal: &str,
        client_id: &str,
    ) -> Option<usize> {
        if image.client_quotas.is_empty() {
            return None;
        }
        let user = principal.strip_prefix("User:").unwrap_or(principal);
        let (limit, _, _) = resolve(&image.client_quotas, quota_type.key(), user, client_id)?;
        let windows = self.samples.saturating_sub(1) as f64 * self.window.as_secs_f64();
        Some((limit * windows).min(usize::MAX as f64) as usize)
    }

    /// Takes back `bytes` recorded at `now` (Kafka's
    /// `unrecordQuotaSensor`: a throttled Fetch sends no records).
    pub fn unrecord(
        &self,
        quota_type: QuotaType,
        principal: &str,
        client_id: &str,
        bytes: usize,
        now: Instant,
    ) {
        let user = principal.strip_prefix("User:").unwrap_or(principal);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(Some((_, user_tag, client_tag))) = state
            .resolved
            .get(&(quota_type, user.to_string(), client_id.to_string()))
            .cloned()
        else {
            return;
        };
        if let Some(rate) = state.sensors.get_mut(&(quota_type, user_tag, client_tag)) {
            rate.record(-(bytes as f64), now);
        }
    }
}

/// The quota of `key` for (`user`, `client_id`) and its sensor's tags, in
/// Kafka's precedence (`DefaultQuotaCallback.quotaLimit` and
/// `quotaMetricTags`): user and client id, user and default client id,
/// user alone, default user and client id, default user and default
/// client id, default user alone, client id alone, default client id.
fn resolve(quotas: &ClientQuotas, key: &str, user: &str, client_id: &str) -> Option<Applied> {
    let named = |s: &str| Some(EntityName::Named(s.to_string()));
    let default = || Some(EntityName::Default);
    let entity = |user: Option<EntityName>, client_id: Option<EntityName>| QuotaEntity {
        user,
        client_id,
        ip: None,
    };
    let both = (user.to_string(), client_id.to_string());
    let user_only = (user.to_string(), String::new());
    let client_only = (String::new(), client_id.to_string());
    let order = [
        (entity(named(user), named(client_id)), both.clone()),
        (entity(named(user), default()), both.clone()),
        (entity(named(user), None), user_only.clone()),
        (entity(default(), named(client_id)), both.clone()),
        (entity(default(), default()), both.clone()),
        (entity(default(), None), user_only.clone()),
        (entity(None, named(client_id)), client_only.clone()),
        (entity(None, default()), client_only.clone()),
    ];
    order
        .into_iter()
        .find_map(|(entity, (u, c))| quotas.get(&entity, key).map(|limit| (limit, u, c)))
}

/// Kafka's `Rate` over a `SampledStat` of sums: `samples` windows of
/// `window`, the oldest dropped once `samples * window` old.
#[derive(Debug)]
struct Rate {
    samples: usize,
    window: Duration,
    /// (window start, sum), oldest first.
    windows: std::collections::VecDeque<(Instant, f64)>,
    /// The last record's time.
    last_record: Instant,
}

impl Rate {
    fn new(samples: usize, window: Duration) -> Self {
        Rate {
            samples,
            window,
            windows: std::collections::VecDeque::new(),
            last_record: Instant::now(),
        }
    }

    fn purge(&mut self, now: Instant) {
        let span = self.window * self.samples as u32;
        while self
            .windows
            .front()
            .is_some_and(|(start, _)| now.saturating_duration_since(*start) >= span)
        {
            self.windows.pop_front();
        }
    }

    fn record(&mut self, value: f64, now: Instant) {
        self.purge(now);
        self.last_record = self.last_record.max(now);
        match self.windows.back_mut() {
            Some((start, sum)) if now.saturating_duration_since(*start) < self.window => {
                *sum += value;
            }
            _ => {
                self.windows.push_back((now, value));
                while self.windows.len() > self.samples {
                    self.windows.pop_front();
                }
            }
        }
    }

    /// The rate in units per second and the window it was measured over
    /// (Kafka's `Rate.windowSize`: at least `samples - 1` full windows).
    fn measure(&mut self, now: Instant) -> (f64, Duration) {
        self.purge(now);
        let total: f64 = self.windows.iter().map(|(_, sum)| sum).sum();
        let elapsed = self.windows.front().map_or(Duration::ZERO, |(start, _)| {
            now.saturating_duration_since(*start)
        });
        let full = (elapsed.as_nanos() / self.window.as_nanos().max(1)) as usize;
        let min_full = self.samples.saturating_sub(1);
        let mut size = elapsed;
        if full < min_full {
            size += self.window * (min_full - full) as u32;
        }
        let size = size.max(Duration::from_millis(1));
        (total / size.as_secs_f64(), size)
    }
}

#[cfg(test)]
mod tests {
    use weir_controller::quota::QuotaValue;

    use super::*;

    fn quotas(entries: &[(Option<EntityName>, Option<EntityName>, f64)]) -> MetadataImage {
        let mut image = MetadataImage::default();
        for (user, client_id, limit) in entries {
            image
                .client_quotas
                .0
                .entry(QuotaEntity {
                    user: user.clone(),
                    client_id: client_id.clone(),
                    ip: None,
                })
                .or_default()
                .insert(PRODUCER_BYTE_RATE.into(), QuotaValue(*limit));
        }
        image
    }

    fn named(s: &str) -> Option<EntityName> {
        Some(EntityName::Named(s.into()))
    }

    #[test]
    fn precedence_follows_kafka() {
        let image = quotas(&[
            (named("alice"), None, 100.0),
            (None, named("app"), 200.0),
            (Some(EntityName::Default), None, 300.0),
            (named("alice"), named("app"), 400.0),
        ]);
        let q = &image.client_quotas;
        let limit = |u, c| resolve(q, PRODUCER_BYTE_RATE, u, c).map(|a| a.0);
        assert_eq!(limit("alice", "app"), Some(400.0));
        assert_eq!(limit("alice", "other"), Some(100.0));
        assert_eq!(
            limit("bob", "app"),
            Some(300.0),
            "a default user comes before client ids"
        );
        let only_clients = quotas(&[(None, named("app"), 200.0)]);
        let q = &only_clients.client_quotas;
        assert_eq!(
            resolve(q, PRODUCER_BYTE_RATE, "bob", "app").map(|a| a.0),
            Some(200.0)
        );
        assert_eq!(resolve(q, PRODUCER_BYTE_RATE, "bob", "x"), None);
        assert_eq!(resolve(q, CONSUMER_BYTE_RATE, "bob", "app"), None);
    }

    #[test]
    fn throttle_time_is_kafkas() {
        // 2 samples of 1 s: the rate is measured over at least 1 s.
        let manager = ClientQuotaManager::new(2, Duration::from_secs(1));
        let image = quotas(&[(None, named("slow"), 1000.0), (None, named("idle"), 1000.0)]);
        let t0 = Instant::now();
        let record = |client: &str, bytes, at| {
            manager.record(
                &image,
                QuotaType::Produce,
                "User:ANONYMOUS",
                client,
                bytes,
                at,
            )
        };
        assert_eq!(record("slow", 1000, t0), Duration::ZERO);
        // 3000 bytes over a 1 s window: (3000 - 1000) / 1000 * 1000 ms.
        assert_eq!(record("slow", 2000, t0), Duration::from_millis(2000));
        assert_eq!(record("fast", 1_000_000, t0), Duration::ZERO);
        assert_eq!(
            manager.max_value_in_window(&image, QuotaType::Produce, "User:ANONYMOUS", "slow"),
            Some(1000)
        );
        assert_eq!(
            manager.max_value_in_window(&image, QuotaType::Fetch, "User:ANONYMOUS", "slow"),
            None
        );
        // Two windows later the samples are gone.
        assert_eq!(
            record("slow", 500, t0 + Duration::from_secs(2)),
            Duration::ZERO
        );
        // An hour without records drops the sensor (and its history).
        assert_eq!(record("idle", 10, t0), Duration::ZERO);
        assert_eq!(manager.state.lock().unwrap().sensors.len(), 2);
        let later = t0 + SENSOR_EXPIRY + Duration::from_secs(1);
        assert_eq!(record("slow", 1000, later), Duration::ZERO);
        assert_eq!(
            manager.state.lock().unwrap().sensors.len(),
            1,
            "the sensor of `idle` is gone"
        );
    }
}
