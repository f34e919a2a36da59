//! The request-time quota (KIP-124, `request_percentage`): the share of
//! request-handling time a (user, client id) may use, in percent of one
//! thread, measured as Kafka's `ClientRequestQuotaManager` measures it
//! (a sampled `Rate` over `quota.window.num` samples of
//! `quota.window.size.seconds`). Weir's measure is the time its handler
//! futures spend being polled. Over the quota a response carries
//! `throttle_time_ms`, at most one window (Kafka's bound), and the broker
//! reads nothing more from the connection for that long (KIP-219).
//!
//! The quota'd client gets 0.00001 percent, 100 ns of handling per second:
//! any request's handling exceeds it, so every response to that client is
//! throttled, whatever the machine's speed.

use std::time::Duration;

use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, FetchRequest, MetadataRequest, MetadataResponse,
};
use weir_integration_tests::{clients, HarnessError, RawClient, TestBroker};

use super::{quota_counter, set_client_quota};
use crate::support::{self, CLIENT_TIMEOUT};

/// `request_percentage` of the quota'd clients (percent of one thread).
const PERCENTAGE: f64 = 0.00001;

/// A broker whose quota rates are measured over 2 samples of
/// `window_seconds` (the longest throttle of the request quota is one
/// window), with metrics on; returns it with a raw client (client id
/// `weir-itest`, no quota) and its ApiVersions table.
#[track_caller]
fn start_request_quota_broker(window_seconds: u32) -> (TestBroker, RawClient, ApiVersionsResponse) {
    let broker = TestBroker::builder()
        .config("quota.window.num", "2")
        .config("quota.window.size.seconds", &window_seconds.to_string())
        .metrics(true)
        .start()
        .expect("starting weir with 2 quota samples");
    let mut admin = support::connect(&broker);
    let versions = support::api_versions(&mut admin);
    (broker, admin, versions)
}

/// A Metadata request for no topic (cheap, and the same on every call).
fn metadata_request() -> MetadataRequest {
    MetadataRequest::default().with_topics(Some(vec![]))
}

/// Sends [`metadata_request`] at `version` and returns the response's
/// `throttle_time_ms`.
#[track_caller]
fn metadata_throttle(client: &mut RawClient, version: i16) -> i32 {
    let response: MetadataResponse = client
        .send(&metadata_request(), version)
        .unwrap_or_else(|e| panic!("Metadata v{version}: {e}"));
    response.throttle_time_ms
}

/// Client id `busy` (request_percentage 0.00001) gets a throttle time of
/// at most one window (5 s) on its first request; its next request is not
/// read while that lasts, during which client id `calm` (no quota) is
/// served 20 times without a throttle time; then `busy`'s request is
/// answered, throttled again. The broker counts the throttled responses.
#[test]
fn a_client_over_its_request_percentage_is_throttled_and_muted_while_another_is_not() {
    const WINDOW_SECONDS: u32 = 5;
    let (broker, mut admin, versions) = start_request_quota_broker(WINDOW_SECONDS);
    set_client_quota(
        &mut admin,
        &versions,
        "busy",
        "request_percentage",
        PERCENTAGE,
    );
    let version = support::newest::<MetadataRequest>(&versions, ApiKey::Metadata);

    let mut busy = support::connect(&broker);
    busy.set_client_id(Some("busy"));
    let throttle = metadata_throttle(&mut busy, version);
    assert!(
        throttle > 0 && throttle <= (WINDOW_SECONDS * 1000) as i32,
        "busy's first request is over its quota and throttled for at most one window \
         (Kafka's ClientRequestQuotaManager bound), got {throttle} ms"
    );

    // KIP-219: nothing is read from busy's connection while it is
    // throttled, so this request waits.
    let header = busy.header::<MetadataRequest>(version);
    let pending = busy
        .write_request(header, &metadata_request())
        .expect("writing busy's second Metadata request");

    let mut calm = support::connect(&broker);
    calm.set_client_id(Some("calm"));
    for i in 0..20 {
        assert_eq!(
            metadata_throttle(&mut calm, version),
            0,
            "calm's request {i} (no quota) is not throttled"
        );
    }

    // busy's request has not been answered while calm was served: a read
    // finds nothing.
    busy.set_read_timeout(Duration::from_millis(1))
        .expect("a short read timeout");
    match busy.read_response::<MetadataResponse>(pending) {
        Err(HarnessError::Io { .. }) => {}
        other => panic!("busy's request was answered while it was throttled: {other:?}"),
    }
    busy.set_read_timeout(Duration::from_secs(60))
        .expect("a long read timeout");
    let answer = busy
        .read_response::<MetadataResponse>(pending)
        .expect("busy's request is answered once its throttle time is over");
    assert!(
        answer.body.throttle_time_ms > 0,
        "busy is still over its quota"
    );

    assert!(
        quota_counter(&broker, "weir_quota_throttled_total", "request") >= 2.0,
        "both of busy's responses were counted as throttled"
    );
    assert!(quota_counter(&broker, "weir_quota_throttle_time_ms_total", "request") > 0.0);
}

/// `python/throttled_producer.py` (confluent-kafka) producing `count`
/// records as `client_id`; returns its throttle events, requiring every
/// record delivered.
#[track_caller]
fn throttled_producer(broker: &TestBroker, topic: &str, client_id: &str, count: usize) -> usize {
    let mut command = clients::python_script("throttled_producer.py").expect("the venv");
    command
        .arg(broker.bootstrap())
        .arg(topic)
        .arg(client_id)
        .arg(count.to_string());
    let output = clients::run(command, None, CLIENT_TIMEOUT).expect("throttled_producer.py");
    output.assert_success();
    let stdout = output.stdout_text();
    assert!(
        stdout.lines().any(|l| l == format!("delivered {count}")),
        "{client_id}: every record delivered\n{stdout}"
    );
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("throttled ")?.parse().ok())
        .unwrap_or_else(|| panic!("{client_id}: no `throttled` line\n{stdout}"))
}

/// A real client: confluent-kafka (librdkafka) as `busy-producer`
/// (request_percentage 0.00001) is told by the broker that it is throttled
/// (its throttle callback sees throttle times above zero), and all its
/// records are stored; the same program as `calm-producer` (no quota) is
/// never throttled.
#[test]
fn librdkafka_over_its_request_percentage_sees_throttle_times_and_another_does_not() {
    const RECORDS: usize = 3;
    let (broker, mut admin, versions) = start_request_quota_broker(1);
    let topic = support::create_topic(&mut admin, &versions, "requests", &[]);
    set_client_quota(
        &mut admin,
        &versions,
        "busy-producer",
        "request_percentage",
        PERCENTAGE,
    );

    let busy = throttled_producer(&broker, &topic.name, "busy-producer", RECORDS);
    assert!(
        busy >= 1,
        "busy-producer over its request_percentage sees throttle times"
    );
    let calm = throttled_producer(&broker, &topic.name, "calm-producer", RECORDS);
    assert_eq!(calm, 0, "calm-producer has no quota");

    let fetch = support::newest::<FetchRequest>(&versions, ApiKey::Fetch);
    let stored = support::read_partition(&mut admin, fetch, &topic, 0);
    assert_eq!(stored.len(), 2 * RECORDS, "every record of both is stored");
}
