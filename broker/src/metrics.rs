//! Prometheus metrics: the `/metrics` endpoint (metrics-exporter-prometheus)
//! and the names Weir records.
//!
//! | name | type | labels |
//! |---|---|---|
//! | `weir_requests_total` | counter | `api` |
//! | `weir_request_errors_total` | counter | `api`, `error` (Kafka error name) |
//! | `weir_request_duration_seconds` | summary | `api` |
//! | `weir_network_bytes_in_total` / `_out_total` | counter | |
//! | `weir_connections` | gauge | |
//! | `weir_connections_accepted_total` | counter | |
//! | `weir_connections_closed_total` | counter | `reason` |
//! | `weir_log_end_offset` | gauge | `topic`, `partition` |
//! | `weir_produced_bytes_total` | counter | |
//!
//! Storage and controller metrics are described by their crates.

use std::net::SocketAddr;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ResponseKind;
use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
use metrics_exporter_prometheus::PrometheusBuilder;

/// Installs the global recorder and serves `http://<addr>/metrics`.
///
/// # Errors
/// A recorder is already installed, or the address cannot be bound.
pub fn install(addr: SocketAddr) -> Result<(), metrics_exporter_prometheus::BuildError> {
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .install()?;
    describe();
    Ok(())
}

fn describe() {
    weir_storage::describe_metrics();
    weir_controller::describe_metrics();
    describe_counter!(
        "weir_produced_bytes_total",
        Unit::Bytes,
        "Record batch bytes accepted by Produce."
    );
    describe_counter!("weir_requests_total", "Requests handled, by API.");
    describe_counter!(
        "weir_request_errors_total",
        "Error codes returned in responses (one per erroring topic partition or request), by API and error."
    );
    describe_histogram!(
        "weir_request_duration_seconds",
        Unit::Seconds,
        "Time from a request's decode to its response being ready, by API."
    );
    describe_counter!(
        "weir_network_bytes_in_total",
        Unit::Bytes,
        "Bytes read from client connections."
    );
    describe_counter!(
        "weir_network_bytes_out_total",
        Unit::Bytes,
        "Bytes written to client connections."
    );
    describe_gauge!("weir_connections", "Open client connections.");
    describe_counter!(
        "weir_connections_accepted_total",
        "Client connections accepted."
    );
    describe_counter!(
        "weir_connections_closed_total",
        "Connections closed by the broker, by reason."
    );
    describe_gauge!("weir_log_end_offset", "Log end offset per topic partition.");
    describe_counter!(
        "weir_delayed_fetch_expires_total",
        "Parked Fetches answered at max_wait_ms rather than woken by data, by fetcher_type (follower, consumer): Kafka's DelayedFetchMetrics ExpiresPerSec."
    );
    describe_counter!(
        "weir_metadata_partition_updates_total",
        "Hosted partitions whose state a metadata image set (only those of the topics it changed, or all when the brokers changed)."
    );
}

/// Records one handled request: its count, duration and every non-zero
/// error code in the response.
pub fn record_request(api: &'static str, seconds: f64, response: Option<&ResponseKind>) {
    metrics::counter!("weir_requests_total", "api" => api).increment(1);
    metrics::histogram!("weir_request_duration_seconds", "api" => api).record(seconds);
    if let Some(response) = response {
        for code in error_codes(response) {
            record_error(api, code);
        }
    }
}

/// Counts one error code for an API.
pub fn record_error(api: &'static str, code: i16) {
    if code == 0 {
        return;
    }
    let name = match ResponseError::try_from_code(code) {
        Some(ResponseError::Unknown(_)) | None => format!("UNKNOWN_{code}"),
        Some(e) => format!("{e:?}"),
    };
    metrics::counter!("weir_request_errors_total", "api" => api, "error" => name).increment(1);
}

/// Every error code a response carries (top level and per partition).
fn error_codes(response: &ResponseKind) -> Vec<i16> {
    match response {
        ResponseKind::ApiVersions(r) => vec![r.error_code],
        ResponseKind::Metadata(r) => r
            .topics
            .iter()
            .flat_map(|t| {
                std::iter::once(t.error_code).chain(t.partitions.iter().map(|p| p.error_code))
            })
            .collect(),
        ResponseKind::Produce(r) => r
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code))
            .collect(),
        ResponseKind::ListOffsets(r) => r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect(),
        ResponseKind::CreateTopics(r) => r.topics.iter().map(|t| t.error_code).collect(),
        ResponseKind::DeleteTopics(r) => r.responses.iter().map(|t| t.error_code).collect(),
        ResponseKind::DeleteRecords(r) => r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect(),
        ResponseKind::DescribeConfigs(r) => r.results.iter().map(|t| t.error_code).collect(),
        ResponseKind::IncrementalAlterConfigs(r) => {
            r.responses.iter().map(|t| t.error_code).collect()
        }
        ResponseKind::AlterConfigs(r) => r.responses.iter().map(|t| t.error_code).collect(),
        ResponseKind::CreatePartitions(r) => r.results.iter().map(|t| t.error_code).collect(),
        ResponseKind::DescribeCluster(r) => vec![r.error_code],
        ResponseKind::SaslHandshake(r) => vec![r.error_code],
        ResponseKind::SaslAuthenticate(r) => vec![r.error_code],
        ResponseKind::DescribeTopicPartitions(r) => r.topics.iter().map(|t| t.error_code).collect(),
        ResponseKind::ElectLeaders(r) => std::iter::once(r.error_code)
            .chain(
                r.replica_election_results
                    .iter()
                    .flat_map(|t| t.partition_result.iter().map(|p| p.error_code)),
            )
            .collect(),
        ResponseKind::DescribeClientQuotas(r) => vec![r.error_code],
        ResponseKind::AlterClientQuotas(r) => r.entries.iter().map(|e| e.error_code).collect(),
        ResponseKind::DescribeAcls(r) => vec![r.error_code],
        ResponseKind::CreateAcls(r) => r.results.iter().map(|c| c.error_code).collect(),
        ResponseKind::DeleteAcls(r) => r
            .filter_results
            .iter()
            .flat_map(|f| {
                std::iter::once(f.error_code).chain(f.matching_acls.iter().map(|m| m.error_code))
            })
            .collect(),
        ResponseKind::DescribeUserScramCredentials(r) => std::iter::once(r.error_code)
            .chain(r.results.iter().map(|u| u.error_code))
            .collect(),
        ResponseKind::AlterUserScramCredentials(r) => {
            r.results.iter().map(|u| u.error_code).collect()
        }
        ResponseKind::DescribeQuorum(r) => std::iter::once(r.error_code)
            .chain(
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            )
            .collect(),
        ResponseKind::OffsetForLeaderEpoch(r) => r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect(),
        ResponseKind::InitProducerId(r) => vec![r.error_code],
        ResponseKind::FindCoordinator(r) => std::iter::once(r.error_code)
            .chain(r.coordinators.iter().map(|c| c.error_code))
            .collect(),
        ResponseKind::JoinGroup(r) => vec![r.error_code],
        ResponseKind::SyncGroup(r) => vec![r.error_code],
        ResponseKind::Heartbeat(r) => vec![r.error_code],
        ResponseKind::LeaveGroup(r) => std::iter::once(r.error_code)
            .chain(r.members.iter().map(|m| m.error_code))
            .collect(),
        ResponseKind::OffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect(),
        ResponseKind::OffsetFetch(r) => std::iter::once(r.error_code)
            .chain(
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            )
            .chain(r.groups.iter().flat_map(|g| {
                std::iter::once(g.error_code).chain(
                    g.topics
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
                )
            }))
            .collect(),
        ResponseKind::DescribeGroups(r) => r.groups.iter().map(|g| g.error_code).collect(),
        ResponseKind::ListGroups(r) => vec![r.error_code],
        ResponseKind::DeleteGroups(r) => r.results.iter().map(|g| g.error_code).collect(),
        ResponseKind::OffsetDelete(r) => std::iter::once(r.error_code)
            .chain(
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            )
            .collect(),
        _ => Vec::new(),
    }
    .into_iter()
    .filter(|c| *c != 0)
    .collect()
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::leave_group_response::MemberResponse;
    use kafka_protocol::messages::{HeartbeatResponse, LeaveGroupResponse, ResponseKind};

    use super::error_codes;

    #[test]
    fn group_responses_report_their_error_codes() {
        let mut heartbeat = HeartbeatResponse::default();
        heartbeat.error_code = 27;
        assert_eq!(error_codes(&ResponseKind::Heartbeat(heartbeat)), vec![27]);
        let mut leave = LeaveGroupResponse::default();
        let mut member = MemberResponse::default();
        member.error_code = 25;
        leave.members = vec![member, MemberResponse::default()];
        assert_eq!(error_codes(&ResponseKind::LeaveGroup(leave)), vec![25]);
    }
}
