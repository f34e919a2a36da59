//! Client quotas enforced by the broker (KIP-13 byte rates, KIP-55 for
//! users, KIP-124 request time, KIP-219 for the throttle protocol):
//! Kafka's `ClientQuotaManager` (and `ClientRequestQuotaManager`) with its
//! `DefaultQuotaCallback`, over the quotas of the metadata image
//! (`weir_controller::quota`, set with AlterClientQuotas).
//!
//! A Produce records its request's size against `producer_byte_rate`, a
//! consumer's Fetch its response's size against `consumer_byte_rate`, and
//! every request that is not exempt its handling time against
//! `request_percentage` (see `dispatch`), each in the sensor of the (user,
//! client id) the quota applies to; the rate is Kafka's sampled `Rate`
//! (`quota.window.num` samples of `quota.window.size.seconds`, at least
//! `num - 1` windows long). A rate over the quota gives a throttle time of
//! `(rate - quota) / quota * window` ms (Kafka's `QuotaUtils.throttleTime`;
//! for the request quota at most one window, Kafka's
//! `ClientRequestQuotaManager.throttleTime`): the response carries it in
//! `throttle_time_ms` and the connection reads nothing more for that long
//! (the channel muting of KIP-219). A throttled Fetch answers no records
//! (Kafka's `getThrottledResponse`) and its bytes are not counted.
//!
//! The request quota's measure is Weir's, as Weir has no request-handler
//! thread pool: the time the request's handler future spends being polled
//! (`dispatch::PollTimed`), in percent of one thread's second (Kafka's
//! `ClientRequestQuotaManager.nanosToPercentage`), so a handler waiting
//! (for a disk flush, the quorum, a long poll) costs nothing while it
//! waits, as a Kafka request parked in purgatory frees its thread.
//!
//! `controller_mutation_rate` (KIP-599) is counted by the active
//! controller (`weir_controller::mutation_quota`); the broker applies the
//! throttle time it answers with.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weir_controller::quota::{
    AppliedQuota, ClientQuotas, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE,
};
use weir_controller::{MetadataImage, MutatingClient};

/// Which quota a request counts against (Kafka's `QuotaType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaType {
    /// `producer_byte_rate`: Produce request bytes.
    Produce,
    /// `consumer_byte_rate`: consumer Fetch response bytes.
    Fetch,
    /// `request_percentage`: request handling time, in percent of one
    /// thread (KIP-124).
    Request,
    /// `controller_mutation_rate`: partitions created or deleted per
    /// second (KIP-599), counted by the active controller; the broker only
    /// applies and counts its throttle ([`count_throttle`]).
    ControllerMutation,
}

impl QuotaType {
    fn key(self) -> &'static str {
        match self {
            QuotaType::Produce => PRODUCER_BYTE_RATE,
            QuotaType::Fetch => CONSUMER_BYTE_RATE,
            QuotaType::Request => REQUEST_PERCENTAGE,
            QuotaType::ControllerMutation => weir_controller::quota::CONTROLLER_MUTATION_RATE,
        }
    }

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            QuotaType::Produce => "produce",
            QuotaType::Fetch => "fetch",
            QuotaType::Request => "request",
            QuotaType::ControllerMutation => "controller_mutation",
        }
    }
}

/// Who sent a request, as quotas see it: its principal (`User:<name>`)
/// and its header's client id (empty when null).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaClient<'a> {
    /// The connection's principal.
    pub principal: &'a str,
    /// The request's client id.
    pub client_id: &'a str,
}

impl QuotaClient<'_> {
    /// The user quota entities name: the principal without `User:`.
    fn user(&self) -> &str {
        self.principal
            .strip_prefix("User:")
            .unwrap_or(self.principal)
    }

    /// This client as the controller mutation quota sees it, strict or
    /// permissive by the request's version (Kafka's
    /// `ControllerMutationQuotaManager.newQuotaFor(request,
    /// strictSinceVersion)`).
    pub fn mutating(&self, strict: bool) -> MutatingClient {
        MutatingClient {
            principal: self.principal.to_string(),
            client_id: self.client_id.to_string(),
            strict,
        }
    }
}

/// Counts a throttled response in `weir_quota_throttled_total` and its
/// throttle time in `weir_quota_throttle_time_ms_total`, labelled by the
/// quota (Kafka's per-quota `throttle-time` sensors); nothing for a zero
/// throttle.
pub fn count_throttle(quota_type: QuotaType, throttle: Duration) {
    if throttle.is_zero() {
        return;
    }
    metrics::counter!("weir_quota_throttled_total", "quota" => quota_type.label()).increment(1);
    metrics::counter!("weir_quota_throttle_time_ms_total", "quota" => quota_type.label())
        .increment(throttle.as_millis() as u64);
}

/// Kafka's `ClientRequestQuotaManager.nanosToPercentage`: handling time as
/// the percent of one thread's second it takes.
pub fn request_time_percentage(time: Duration) -> f64 {
    time.as_nanos() as f64 * 100.0 / 1e9
}

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
    resolved: HashMap<(QuotaType, String, String), Option<AppliedQuota>>,
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

    /// Records `value` (bytes, or for [`QuotaType::Request`] percent) for
    /// `client` against `quota_type` at `now`, counts a throttle in the
    /// metrics ([`count_throttle`]) and returns the throttle time; zero
    /// when no quota applies (then nothing is recorded, as Kafka's
    /// `quotasEnabled`) or the rate is within it. The request quota's
    /// throttle is at most one window (Kafka's
    /// `ClientRequestQuotaManager.maxThrottleTimeMs`).
    pub fn record(
        &self,
        image: &MetadataImage,
        quota_type: QuotaType,
        client: QuotaClient<'_>,
        value: f64,
        now: Instant,
    ) -> Duration {
        if image.client_quotas.is_empty() {
            return Duration::ZERO;
        }
        let (user, client_id) = (client.user(), client.client_id);
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
                let applied = state.quotas.applied(quota_type.key(), user, client_id);
                state.resolved.insert(key, applied.clone());
                applied
            }
        };
        let Some(AppliedQuota {
            limit,
            user_tag,
            client_id_tag,
        }) = applied
        else {
            return Duration::ZERO;
        };
        let (samples, window) = (self.samples, self.window);
        let rate = state
            .sensors
            .entry((quota_type, user_tag, client_id_tag))
            .or_insert_with(|| Rate::new(samples, window));
        rate.record(value, now);
        let (measured, window_size) = rate.measure(now);
        if measured <= limit {
            return Duration::ZERO;
        }
        let throttle_ms = ((measured - limit) / limit * window_size.as_millis() as f64).round();
        let mut throttle = Duration::from_millis(throttle_ms.max(0.0) as u64);
        if quota_type == QuotaType::Request {
            throttle = throttle.min(self.window);
        }
        count_throttle(quota_type, throttle);
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
        client: QuotaClient<'_>,
    ) -> Option<usize> {
        let applied =
            image
                .client_quotas
                .applied(quota_type.key(), client.user(), client.client_id)?;
        let windows = self.samples.saturating_sub(1) as f64 * self.window.as_secs_f64();
        Some((applied.limit * windows).min(usize::MAX as f64) as usize)
    }

    /// Takes back `bytes` recorded at `now` (Kafka's
    /// `unrecordQuotaSensor`: a throttled Fetch sends no records).
    pub fn unrecord(
        &self,
        quota_type: QuotaType,
        client: QuotaClient<'_>,
        value: f64,
        now: Instant,
    ) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(Some(applied)) = state
            .resolved
            .get(&(
                quota_type,
                client.user().to_string(),
                client.client_id.to_string(),
            ))
            .cloned()
        else {
            return;
        };
        let sensor = (quota_type, applied.user_tag, applied.client_id_tag);
        if let Some(rate) = state.sensors.get_mut(&sensor) {
            rate.record(-value, now);
        }
    }
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
    use weir_controller::quota::{EntityName, QuotaEntity, QuotaValue};

    use super::*;

    /// An image where each client id of `entries` has quota `key` = value.
    fn quotas(key: &str, entries: &[(&str, f64)]) -> MetadataImage {
        let mut image = MetadataImage::default();
        for (client_id, limit) in entries {
            image
                .client_quotas
                .0
                .entry(QuotaEntity {
                    client_id: Some(EntityName::Named((*client_id).into())),
                    ..QuotaEntity::default()
                })
                .or_default()
                .insert(key.into(), QuotaValue(*limit));
        }
        image
    }

    fn client(client_id: &str) -> QuotaClient<'_> {
        QuotaClient {
            principal: "User:ANONYMOUS",
            client_id,
        }
    }

    #[test]
    fn throttle_time_is_kafkas() {
        // 2 samples of 1 s: the rate is measured over at least 1 s.
        let manager = ClientQuotaManager::new(2, Duration::from_secs(1));
        let image = quotas(PRODUCER_BYTE_RATE, &[("slow", 1000.0), ("idle", 1000.0)]);
        let t0 = Instant::now();
        let record = |client_id: &str, bytes: f64, at| {
            manager.record(&image, QuotaType::Produce, client(client_id), bytes, at)
        };
        assert_eq!(record("slow", 1000.0, t0), Duration::ZERO);
        // 3000 bytes over a 1 s window: (3000 - 1000) / 1000 * 1000 ms.
        assert_eq!(record("slow", 2000.0, t0), Duration::from_millis(2000));
        assert_eq!(record("fast", 1_000_000.0, t0), Duration::ZERO);
        assert_eq!(
            manager.max_value_in_window(&image, QuotaType::Produce, client("slow")),
            Some(1000)
        );
        assert_eq!(
            manager.max_value_in_window(&image, QuotaType::Fetch, client("slow")),
            None
        );
        // Two windows later the samples are gone.
        assert_eq!(
            record("slow", 500.0, t0 + Duration::from_secs(2)),
            Duration::ZERO
        );
        // An hour without records drops the sensor (and its history).
        assert_eq!(record("idle", 10.0, t0), Duration::ZERO);
        assert_eq!(manager.state.lock().unwrap().sensors.len(), 2);
        let later = t0 + SENSOR_EXPIRY + Duration::from_secs(1);
        assert_eq!(record("slow", 1000.0, later), Duration::ZERO);
        assert_eq!(
            manager.state.lock().unwrap().sensors.len(),
            1,
            "the sensor of `idle` is gone"
        );
    }

    #[test]
    fn request_time_is_a_percentage_of_one_thread_and_its_throttle_is_at_most_one_window() {
        assert_eq!(request_time_percentage(Duration::from_secs(1)), 100.0);
        assert_eq!(request_time_percentage(Duration::from_millis(5)), 0.5);
        // 2 samples of 1 s; 10 percent of one thread.
        let manager = ClientQuotaManager::new(2, Duration::from_secs(1));
        let image = quotas(REQUEST_PERCENTAGE, &[("busy", 10.0)]);
        let t0 = Instant::now();
        let record = |client_id: &str, time: Duration| {
            let percent = request_time_percentage(time);
            manager.record(&image, QuotaType::Request, client(client_id), percent, t0)
        };
        // 50 ms of handling in a second: 5 percent, within the quota.
        assert_eq!(record("busy", Duration::from_millis(50)), Duration::ZERO);
        // 150 ms: 15 percent, (15 - 10) / 10 * 1 s.
        assert_eq!(
            record("busy", Duration::from_millis(100)),
            Duration::from_millis(500)
        );
        // A whole second: 115 percent would be 10.5 s, bounded to one window.
        assert_eq!(
            record("busy", Duration::from_secs(1)),
            Duration::from_secs(1)
        );
        assert_eq!(
            record("other", Duration::from_secs(10)),
            Duration::ZERO,
            "no request_percentage for another client id"
        );
        // The byte rates are not bounded that way.
        let bytes = quotas(PRODUCER_BYTE_RATE, &[("busy", 10.0)]);
        assert_eq!(
            manager.record(&bytes, QuotaType::Produce, client("busy"), 1000.0, t0),
            Duration::from_millis(99_000)
        );
    }
}
