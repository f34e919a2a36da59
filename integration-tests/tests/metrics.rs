//! The Prometheus endpoint: per-API request counters, and the exposition
//! passes `promtool check metrics`.

use std::time::Duration;

use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
use weir_integration_tests::clients;
use weir_integration_tests::metrics::http_get;
use weir_integration_tests::TestBroker;

use crate::support::{self, CLIENT_TIMEOUT};

/// The largest value among sample lines whose metric name mentions
/// "request" and whose labels name the API in one of the usual spellings
/// (`ApiVersions`, `api_versions`, or the numeric api key).
fn request_count(exposition: &str, spellings: &[&str]) -> Option<f64> {
    exposition
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (name, labels) = series.split_once('{')?;
            let matches = name.to_lowercase().contains("request")
                && !name.ends_with("_bucket")
                && !name.ends_with("_sum")
                && spellings
                    .iter()
                    .any(|s| labels.contains(&format!("\"{s}\"")));
            if matches {
                value.parse::<f64>().ok()
            } else {
                None
            }
        })
        .reduce(f64::max)
}

/// After 3 ApiVersions and 2 Metadata requests the exposition counts them
/// per API; `promtool check metrics` accepts it (required in CI).
#[test]
fn metrics_count_requests_per_api() {
    let broker = TestBroker::builder()
        .metrics(true)
        .start()
        .expect("starting weir");
    let addr = broker.metrics_addr().expect("metrics enabled");
    let mut client = support::connect(&broker);
    for _ in 0..3 {
        support::api_versions(&mut client);
    }
    for _ in 0..2 {
        let _: MetadataResponse = client
            .send(&MetadataRequest::default().with_topics(Some(vec![])), 12)
            .expect("Metadata v12");
    }

    let exposition = support::poll_until(
        Duration::from_secs(10),
        "request counters in /metrics",
        || {
            let response = http_get(addr, "/metrics").expect("GET /metrics");
            assert_eq!(
                response.status,
                200,
                "GET {}",
                broker.metrics_url().unwrap_or_default()
            );
            let text = String::from_utf8(response.body).expect("UTF-8 exposition");
            let api_versions = request_count(&text, &["ApiVersions", "api_versions", "18"]);
            let metadata = request_count(&text, &["Metadata", "metadata", "3"]);
            (api_versions >= Some(3.0) && metadata >= Some(2.0)).then_some(text)
        },
    );

    match clients::promtool() {
        Some(promtool) => {
            let mut command = std::process::Command::new(promtool);
            command.args(["check", "metrics"]);
            let output = clients::run(command, Some(exposition.into_bytes()), CLIENT_TIMEOUT)
                .expect("promtool");
            output.assert_success();
        }
        None => assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "promtool is missing in CI (scripts/test installs the prometheus package)"
        ),
    }
}

#[test]
fn request_count_reads_labelled_counters() {
    let text = "# TYPE weir_requests_total counter\n\
                weir_requests_total{api=\"ApiVersions\"} 3\n\
                weir_requests_total{api=\"Metadata\"} 2\n\
                weir_request_duration_seconds_bucket{api=\"Metadata\",le=\"+Inf\"} 9\n";
    assert_eq!(request_count(text, &["ApiVersions"]), Some(3.0));
    assert_eq!(request_count(text, &["Metadata"]), Some(2.0));
    assert_eq!(request_count(text, &["Produce"]), None);
}

/// `weir_log_end_offset{topic, partition}` follows appends: 0 when the
/// partition is created, the log end offset after producing.
#[test]
fn metrics_report_log_end_offset_per_partition() {
    use kafka_protocol::messages::{ApiKey, ProduceRequest};
    use kafka_protocol::records::Compression;
    use weir_integration_tests::records::{self, NewRecord};

    let broker = TestBroker::builder()
        .metrics(true)
        .start()
        .expect("starting weir");
    let addr = broker.metrics_addr().expect("metrics enabled");
    let mut client = support::connect(&broker);
    let versions = support::api_versions(&mut client);
    let version = support::newest::<ProduceRequest>(&versions, ApiKey::Produce);
    let topic = support::ensure_topic(&mut client, &versions, "leo-gauge");
    let gauge = |text: &str| {
        text.lines()
            .find(|l| {
                l.starts_with("weir_log_end_offset{")
                    && l.contains("topic=\"leo-gauge\"")
                    && l.contains("partition=\"0\"")
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    let scrape = || {
        String::from_utf8(http_get(addr, "/metrics").expect("GET /metrics").body).expect("UTF-8")
    };
    assert_eq!(gauge(&scrape()), Some(0.0), "a new partition reports 0");
    let batch = records::encode_batch(
        &[
            NewRecord::value("a", 1),
            NewRecord::value("b", 2),
            NewRecord::value("c", 3),
        ],
        Compression::None,
    )
    .expect("batch");
    support::produce_ok(&mut client, version, &topic, 0, batch);
    assert_eq!(gauge(&scrape()), Some(3.0));
}
