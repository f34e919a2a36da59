//! Request dispatch: decodes a frame, routes it to its handler
//! (`handlers/<api>.rs`) and encodes the response.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use tracing::{debug, warn};
use weir_protocol_compat::codec::{self, DecodeError};
use weir_protocol_compat::fetch::FetchChunk;

use crate::client_quotas::{QuotaClient, QuotaType};
use crate::context::BrokerContext;
use crate::handlers;
use crate::handlers::fetch::FetchRecords;
use crate::network::ConnectionInfo;

/// What a connection writes back for one request.
pub enum Response {
    /// Nothing (Produce with acks=0).
    None,
    /// One encoded frame, size prefix included.
    Frame(BytesMut),
    /// A Fetch response: encoded bytes interleaved with file regions sent
    /// with `sendfile`.
    Fetch(Vec<FetchChunk<FetchRecords>>),
    /// Close the connection after earlier responses; the reason is logged.
    Close(String),
    /// Send this frame, then close the connection (a failed
    /// re-authentication); the reason is logged.
    FrameThenClose(BytesMut, String),
}

/// Decodes and serves one request frame (size prefix already removed).
///
/// A Produce takes its turn in the connection's `append_order` before the
/// returned future's first await, so requests of one connection append in
/// arrival order (see `network::connection`).
///
/// The time the request's handling spends being polled (routing and the
/// handler, not decoding nor encoding, which Kafka's network threads do)
/// is recorded against the client's `request_percentage` (KIP-124) unless
/// Kafka exempts the request ([`request_quota_exempt`]); over the quota
/// the response carries the throttle time (the largest of the request
/// quota's and the API's own: byte rates, controller mutations) and the
/// connection is muted for it, as Kafka's `RequestHandlerHelper` does.
pub async fn handle_frame(
    ctx: Arc<BrokerContext>,
    frame: Bytes,
    info: Arc<ConnectionInfo>,
    append_order: Arc<handlers::produce::AppendOrder>,
) -> Response {
    let started = Instant::now();
    let request = match codec::decode_request(frame.clone()) {
        Ok(r) => r,
        Err(e) => return decode_failure(&frame, e),
    };
    let api_key = request.api_key;
    let version = request.api_version;
    let correlation_id = request.header.correlation_id;
    let client_id = request.header.client_id.clone();
    let exempt = request_quota_exempt(&request.body, version);
    let mut handler_time = Duration::ZERO;
    let routed = PollTimed {
        inner: std::pin::pin!(route(&ctx, &frame, &info, &append_order, request, started)),
        spent: &mut handler_time,
    }
    .await;
    let client = QuotaClient {
        principal: &info.principal,
        client_id: client_id.as_deref().unwrap_or(""),
    };
    // Kafka's ClientRequestQuotaManager.maybeRecordAndGetThrottleTimeMs.
    let request_throttle = if exempt {
        Duration::ZERO
    } else {
        ctx.client_quotas.record(
            &ctx.metadata(),
            QuotaType::Request,
            client,
            crate::client_quotas::request_time_percentage(handler_time),
            Instant::now(),
        )
    };
    match routed {
        Routed::Done(response) => response,
        Routed::Body { mut body, throttle } => {
            let throttle = throttle.max(request_throttle);
            if let Some(field) = throttle_time_field(&mut body) {
                *field = (*field).max(throttle_ms(throttle));
            }
            info.muted.mute_for(throttle);
            encode(api_key, version, correlation_id, &body, started)
        }
        Routed::Fetch(response) => {
            let response = throttle_fetch(
                &ctx,
                &info,
                client,
                version,
                correlation_id,
                response,
                request_throttle,
            );
            crate::metrics::record_request(
                api_name(api_key),
                started.elapsed().as_secs_f64(),
                None,
            );
            response
        }
    }
}

/// What routing a request to its handler gave.
// Moved once, out of `route`'s future; boxing the body would cost every
// request an allocation.
#[allow(clippy::large_enum_variant)]
enum Routed {
    /// The answer as it is: no throttle applies (closing answers, acks=0
    /// Produce, a follower's Fetch are exempt or cannot carry one).
    Done(Response),
    /// A response to encode once the throttle time is known; `throttle` is
    /// what the API's own quota asked (Produce's byte rate, controller
    /// mutations), already applied to the connection.
    Body {
        body: ResponseKind,
        throttle: Duration,
    },
    /// A consumer's Fetch, before `consumer_byte_rate` and the request
    /// quota ([`throttle_fetch`]).
    Fetch(Response),
}

/// Whether Kafka exempts a request from the request quota
/// (`RequestHandlerHelper.sendResponseExemptThrottle` and friends): a
/// follower's Fetch (inter-broker replication, a ClusterAction request;
/// `KafkaApis.handleFetchRequest`), a Produce with acks=0
/// (`handleProduceRequest`: "the request quota is not enforced if acks ==
/// 0"), and SaslHandshake / SaslAuthenticate (re-authentication, which
/// Kafka's authenticator serves on the network thread). Weir serves none
/// of Kafka's other ClusterAction APIs on client listeners (its quorum has
/// its own transport).
fn request_quota_exempt(body: &RequestKind, version: i16) -> bool {
    match body {
        RequestKind::Fetch(r) => fetch_from_follower(r, version),
        RequestKind::Produce(r) => r.acks == 0,
        RequestKind::SaslHandshake(_) | RequestKind::SaslAuthenticate(_) => true,
        _ => false,
    }
}

/// Whether a Fetch comes from a follower (a replica id, from v15 in the
/// replica state).
fn fetch_from_follower(r: &kafka_protocol::messages::FetchRequest, version: i16) -> bool {
    if version >= 15 {
        r.replica_state.replica_id.0 >= 0
    } else {
        r.replica_id.0 >= 0
    }
}

/// A throttle time as the protocol's `throttle_time_ms`.
fn throttle_ms(throttle: Duration) -> i32 {
    throttle.as_millis().min(i32::MAX as u128) as i32
}

/// Time spent inside `inner`'s polls, added to `spent`: Weir's measure of
/// a request's handling time (Kafka's request-handler thread time,
/// `RequestChannel.Request.requestThreadTimeNanos`), which excludes the
/// time a handler waits for I/O, the quorum or a timer.
struct PollTimed<'a, 'b, F: Future> {
    inner: Pin<&'a mut F>,
    spent: &'b mut Duration,
}

impl<F: Future> Future for PollTimed<'_, '_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let polled = Instant::now();
        let result = this.inner.as_mut().poll(cx);
        *this.spent += polled.elapsed();
        result
    }
}

/// The `throttle_time_ms` field of a response, for the APIs that have one
/// (an older version that lacks it leaves it out when encoding).
fn throttle_time_field(body: &mut ResponseKind) -> Option<&mut i32> {
    macro_rules! field {
        ($($api:ident),* $(,)?) => {
            match body {
                $(ResponseKind::$api(r) => Some(&mut r.throttle_time_ms),)*
                _ => None,
            }
        };
    }
    field!(
        ApiVersions,
        Metadata,
        Produce,
        Fetch,
        ListOffsets,
        CreateTopics,
        DeleteTopics,
        DeleteRecords,
        AlterConfigs,
        CreatePartitions,
        IncrementalAlterConfigs,
        DescribeConfigs,
        DescribeCluster,
        DescribeTopicPartitions,
        OffsetForLeaderEpoch,
        InitProducerId,
        FindCoordinator,
        JoinGroup,
        SyncGroup,
        Heartbeat,
        LeaveGroup,
        OffsetCommit,
        OffsetFetch,
        DescribeGroups,
        ListGroups,
        DeleteGroups,
        OffsetDelete,
        DescribeClientQuotas,
        AlterClientQuotas,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        ElectLeaders,
    )
}

/// Routes a decoded request to its handler (authorization first) and
/// returns what it answered; `started` is when the frame arrived.
async fn route(
    ctx: &Arc<BrokerContext>,
    frame: &Bytes,
    info: &Arc<ConnectionInfo>,
    append_order: &Arc<handlers::produce::AppendOrder>,
    request: codec::DecodedRequest,
    started: Instant,
) -> Routed {
    let ctx = ctx.clone();
    let api_key = request.api_key;
    let version = request.api_version;
    let correlation_id = request.header.correlation_id;
    let api = api_name(api_key);
    let auth = ctx.auth(info, api);
    let client = QuotaClient {
        principal: &info.principal,
        client_id: request.header.client_id.as_deref().unwrap_or(""),
    };
    if let Some(error) = crate::authorizer::request_refused(&auth, &request.body) {
        if matches!(&request.body, RequestKind::Produce(r) if r.acks == 0) {
            return Routed::Done(Response::Close(format!("acks=0 produce refused: {error}")));
        }
        let code = error.code();
        return match weir_protocol_compat::error_response::error_response(
            &request.body,
            version,
            code,
        ) {
            Some(body) => Routed::Body {
                body,
                throttle: Duration::ZERO,
            },
            None => Routed::Done(Response::Close(format!("{api} refused: {error}"))),
        };
    }
    // The throttle time the API's own quota asked for (KIP-599's controller
    // mutations; Produce's byte rate sets its response's field itself).
    let mut throttle = Duration::ZERO;
    let body: ResponseKind = match request.body {
        RequestKind::ApiVersions(r) => {
            ResponseKind::ApiVersions(handlers::api_versions::handle(version, r))
        }
        RequestKind::Metadata(r) => ResponseKind::Metadata(
            handlers::metadata::handle(&ctx, &info.listener, version, r, &auth).await,
        ),
        RequestKind::Produce(r) => {
            let acks = r.acks;
            // Kafka's KafkaApis: only the admin client id may append to
            // internal topics.
            let internal_topics_allowed =
                request.header.client_id.as_deref() == Some(handlers::produce::ADMIN_CLIENT_ID);
            let mut response = handlers::produce::handle(
                &ctx,
                version,
                internal_topics_allowed,
                r,
                append_order,
                &auth,
            )
            .await;
            // Kafka's KafkaApis.handleProduceRequest: the request's size
            // against producer_byte_rate (KIP-13), throttle in the
            // response and the channel muted (KIP-219).
            let bandwidth_throttle = ctx.client_quotas.record(
                &ctx.metadata(),
                QuotaType::Produce,
                client,
                frame.len() as f64,
                Instant::now(),
            );
            info.muted.mute_for(bandwidth_throttle);
            response.throttle_time_ms = throttle_ms(bandwidth_throttle);
            if acks == 0 {
                let body = ResponseKind::Produce(response);
                crate::metrics::record_request(api, started.elapsed().as_secs_f64(), Some(&body));
                // The client reads no response, so an error can only be
                // signalled by closing the connection (as Kafka does).
                return Routed::Done(match failed_partition(&body) {
                    Some(code) => {
                        Response::Close(format!("acks=0 produce failed with error {code}"))
                    }
                    None => Response::None,
                });
            }
            ResponseKind::Produce(response)
        }
        RequestKind::Fetch(mut r) => {
            let from_follower = fetch_from_follower(&r, version);
            // Kafka's handleFetchRequest: a consumer's response is capped to
            // what its consumer_byte_rate allows in a quota window.
            if !from_follower {
                if let Some(cap) =
                    ctx.client_quotas
                        .max_value_in_window(&ctx.metadata(), QuotaType::Fetch, client)
                {
                    let cap = cap.min(i32::MAX as usize) as i32;
                    r.max_bytes = r.max_bytes.min(cap);
                    r.min_bytes = r.min_bytes.min(r.max_bytes);
                }
            }
            let response = handlers::fetch::handle(&ctx, version, correlation_id, r, &auth).await;
            if from_follower {
                crate::metrics::record_request(api, started.elapsed().as_secs_f64(), None);
                return Routed::Done(response);
            }
            return Routed::Fetch(response);
        }
        RequestKind::ListOffsets(r) => {
            handlers::list_offsets::wait_for_leadership(&ctx, &r).await;
            ResponseKind::ListOffsets(handlers::list_offsets::handle(&ctx, version, r, &auth))
        }
        RequestKind::CreateTopics(r) => {
            let (response, mutation_throttle) =
                handlers::create_topics::handle(&ctx, version, r, &auth, client).await;
            throttle = mutation_throttle;
            ResponseKind::CreateTopics(response)
        }
        RequestKind::DeleteTopics(r) => {
            let (response, mutation_throttle) =
                handlers::delete_topics::handle(&ctx, version, r, &auth, client).await;
            throttle = mutation_throttle;
            ResponseKind::DeleteTopics(response)
        }
        RequestKind::DeleteRecords(r) => ResponseKind::DeleteRecords(
            handlers::delete_records::handle(&ctx, version, r, &auth).await,
        ),
        RequestKind::AlterConfigs(r) => ResponseKind::AlterConfigs(
            handlers::alter_configs::handle(&ctx, version, r, &auth).await,
        ),
        RequestKind::CreatePartitions(r) => {
            let (response, mutation_throttle) =
                handlers::create_partitions::handle(&ctx, version, r, &auth, client).await;
            throttle = mutation_throttle;
            ResponseKind::CreatePartitions(response)
        }
        RequestKind::IncrementalAlterConfigs(r) => ResponseKind::IncrementalAlterConfigs(
            handlers::incremental_alter_configs::handle(&ctx, version, r, &auth).await,
        ),
        RequestKind::DescribeConfigs(r) => ResponseKind::DescribeConfigs(
            handlers::describe_configs::handle(&ctx, version, r, &auth),
        ),
        RequestKind::DescribeCluster(r) => ResponseKind::DescribeCluster(
            handlers::describe_cluster::handle(&ctx, &info.listener, version, r, &auth),
        ),
        RequestKind::DescribeTopicPartitions(r) => ResponseKind::DescribeTopicPartitions(
            handlers::describe_topic_partitions::handle(&ctx, version, r, &auth),
        ),
        RequestKind::OffsetForLeaderEpoch(r) => ResponseKind::OffsetForLeaderEpoch(
            handlers::offset_for_leader_epoch::handle(&ctx, version, r, &auth),
        ),
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(handlers::init_producer_id::handle(&ctx, version, r).await)
        }
        RequestKind::FindCoordinator(r) => ResponseKind::FindCoordinator(
            handlers::find_coordinator::handle(&ctx, &info.listener, version, r, &auth).await,
        ),
        RequestKind::JoinGroup(r) => {
            let client_id = request.header.client_id.as_deref();
            ResponseKind::JoinGroup(
                handlers::join_group::handle(&ctx, version, client_id, info.peer, r).await,
            )
        }
        RequestKind::SyncGroup(r) => {
            ResponseKind::SyncGroup(handlers::sync_group::handle(&ctx, version, r).await)
        }
        RequestKind::Heartbeat(r) => {
            ResponseKind::Heartbeat(handlers::heartbeat::handle(&ctx, version, r))
        }
        RequestKind::LeaveGroup(r) => {
            ResponseKind::LeaveGroup(handlers::leave_group::handle(&ctx, version, r))
        }
        RequestKind::OffsetCommit(r) => ResponseKind::OffsetCommit(
            handlers::offset_commit::handle(&ctx, version, r, &auth).await,
        ),
        RequestKind::OffsetFetch(r) => {
            ResponseKind::OffsetFetch(handlers::offset_fetch::handle(&ctx, version, r, &auth))
        }
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(handlers::describe_groups::handle(&ctx, version, r, &auth))
        }
        RequestKind::ListGroups(r) => {
            ResponseKind::ListGroups(handlers::list_groups::handle(&ctx, version, r, &auth))
        }
        RequestKind::DeleteGroups(r) => ResponseKind::DeleteGroups(
            handlers::delete_groups::handle(&ctx, version, r, &auth).await,
        ),
        RequestKind::OffsetDelete(r) => ResponseKind::OffsetDelete(
            handlers::offset_delete::handle(&ctx, version, r, &auth).await,
        ),
        RequestKind::DescribeQuorum(r) => {
            ResponseKind::DescribeQuorum(handlers::describe_quorum::handle(&ctx, version, r).await)
        }
        RequestKind::DescribeClientQuotas(r) => ResponseKind::DescribeClientQuotas(
            handlers::describe_client_quotas::handle(&ctx.metadata(), &r),
        ),
        RequestKind::AlterClientQuotas(r) => {
            ResponseKind::AlterClientQuotas(handlers::alter_client_quotas::handle(&ctx, r).await)
        }
        RequestKind::DescribeUserScramCredentials(r) => ResponseKind::DescribeUserScramCredentials(
            handlers::user_scram_credentials::describe(&ctx.metadata(), &r),
        ),
        RequestKind::AlterUserScramCredentials(r) => ResponseKind::AlterUserScramCredentials(
            handlers::user_scram_credentials::alter(&ctx, r).await,
        ),
        // On a SASL listener these are served before authentication
        // (network::sasl); here they come after it, or on a listener
        // without SASL: ILLEGAL_SASL_STATE, as Kafka's KafkaApis.
        // With connections.max.reauth.ms a SASL connection may
        // re-authenticate (KIP-368, network::sasl::SaslSession).
        body @ (RequestKind::SaslHandshake(_) | RequestKind::SaslAuthenticate(_)) => {
            let credentials = |user: &str, mechanism| {
                crate::network::connection::scram_credential(&ctx, user, mechanism)
            };
            let reauth = match info.session.as_ref() {
                Some(session) => session.reauthenticate(&body, version, &credentials),
                None => crate::network::sasl::Reauthentication::NotServed,
            };
            match reauth {
                crate::network::sasl::Reauthentication::Answer(answer) => answer,
                crate::network::sasl::Reauthentication::Refuse {
                    answer,
                    delay,
                    reason,
                } => {
                    // Kafka delays the answer to a failed authentication.
                    tokio::time::sleep(delay).await;
                    return Routed::Done(
                        match encode(api_key, version, correlation_id, &answer, started) {
                            Response::Frame(bytes) => Response::FrameThenClose(bytes, reason),
                            other => other,
                        },
                    );
                }
                crate::network::sasl::Reauthentication::NotServed => {
                    match crate::network::sasl::illegal_state(&body) {
                        Some(response) => response,
                        None => {
                            return Routed::Done(Response::Close("unreachable SASL state".into()))
                        }
                    }
                }
            }
        }
        RequestKind::DescribeAcls(r) => {
            let image = ctx.metadata();
            match handlers::acls::describe(&image, ctx.authorizer.is_some(), &r) {
                Ok(response) => ResponseKind::DescribeAcls(response),
                Err(reason) => return Routed::Done(Response::Close(reason)),
            }
        }
        RequestKind::CreateAcls(r) => match handlers::acls::create(&ctx, r).await {
            Ok(response) => ResponseKind::CreateAcls(response),
            Err(reason) => return Routed::Done(Response::Close(reason)),
        },
        RequestKind::DeleteAcls(r) => match handlers::acls::delete(&ctx, r).await {
            Ok(response) => ResponseKind::DeleteAcls(response),
            Err(reason) => return Routed::Done(Response::Close(reason)),
        },
        RequestKind::ElectLeaders(r) => {
            ResponseKind::ElectLeaders(handlers::elect_leaders::handle(&ctx, version, r).await)
        }
        other => {
            // The supported-API table and this match must agree; a unit test
            // checks it, so this is only reachable through a bug.
            warn!(?api_key, version, "no handler for a supported API");
            return match weir_protocol_compat::error_response::error_response(&other, version, 35) {
                Some(body) => Routed::Body {
                    body,
                    throttle: Duration::ZERO,
                },
                None => Routed::Done(Response::Close(format!("no handler for {api_key:?}"))),
            };
        }
    };
    if !throttle.is_zero() {
        // KIP-599: the controller's throttle time, applied here as Kafka's
        // broker applies a forwarded response's
        // (`RequestHandlerHelper.sendForwardedResponse`).
        crate::client_quotas::count_throttle(QuotaType::ControllerMutation, throttle);
        info.muted.mute_for(throttle);
    }
    Routed::Body { body, throttle }
}

/// A consumer's Fetch response counted against `consumer_byte_rate`
/// (Kafka's `KafkaApis.handleFetchRequest`): with neither it nor the
/// request quota (`request_throttle`) exceeded it is sent as it is; else
/// the client gets the larger throttle time and no records (Kafka's
/// `getThrottledResponse`), the bytes are taken back from the sensor, and
/// the connection is muted for the throttle time (KIP-219).
fn throttle_fetch(
    ctx: &BrokerContext,
    info: &ConnectionInfo,
    client: QuotaClient<'_>,
    version: i16,
    correlation_id: i32,
    response: Response,
    request_throttle: Duration,
) -> Response {
    use weir_protocol_compat::fetch::RecordsSource;
    let Response::Fetch(chunks) = &response else {
        return response;
    };
    let image = ctx.metadata();
    if image.client_quotas.is_empty() {
        return response;
    }
    let bytes: usize = chunks
        .iter()
        .map(|c| match c {
            FetchChunk::Bytes(b) => b.len(),
            FetchChunk::Records(r) => r.len(),
        })
        .sum();
    let now = Instant::now();
    let quota = QuotaType::Fetch;
    let bandwidth_throttle = ctx
        .client_quotas
        .record(&image, quota, client, bytes as f64, now);
    let throttle = bandwidth_throttle.max(request_throttle);
    if throttle.is_zero() {
        return response;
    }
    ctx.client_quotas.unrecord(quota, client, bytes as f64, now);
    info.muted.mute_for(throttle);
    let mut empty = kafka_protocol::messages::FetchResponse::default();
    empty.throttle_time_ms = throttle_ms(throttle);
    match codec::encode_response(
        ApiKey::Fetch,
        version,
        correlation_id,
        &ResponseKind::Fetch(empty),
    ) {
        Ok(bytes) => Response::Frame(bytes),
        Err(e) => Response::Close(format!("cannot encode a throttled Fetch response: {e}")),
    }
}

/// The first non-zero partition error code of a Produce response.
fn failed_partition(body: &ResponseKind) -> Option<i16> {
    let ResponseKind::Produce(response) = body else {
        return None;
    };
    response
        .responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .map(|p| p.error_code)
        .find(|code| *code != 0)
}

fn encode(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
    started: Instant,
) -> Response {
    crate::metrics::record_request(
        api_name(api_key),
        started.elapsed().as_secs_f64(),
        Some(body),
    );
    match codec::encode_response(api_key, version, correlation_id, body) {
        Ok(bytes) => Response::Frame(bytes),
        Err(e) => Response::Close(format!(
            "cannot encode {api_key:?} v{version} response: {e}"
        )),
    }
}

/// Answers what could not be decoded: ApiVersions of an unknown version gets
/// the KIP-511 v0 response; other unsupported versions get an error response
/// where one can be encoded; everything else closes the connection with a
/// logged reason (as Kafka does).
pub(crate) fn decode_failure(frame: &[u8], error: DecodeError) -> Response {
    match &error {
        DecodeError::UnsupportedVersion {
            api_key: ApiKey::ApiVersions,
            correlation_id,
            ..
        } => Response::Frame(codec::unsupported_api_versions_response(*correlation_id)),
        DecodeError::UnsupportedVersion {
            api_key,
            api_version,
            ..
        } => {
            crate::metrics::record_error(api_name(*api_key), 35);
            match codec::unsupported_version_response(frame) {
                Some(bytes) => Response::Frame(bytes),
                None => {
                    Response::Close(format!("unsupported version {api_version} of {api_key:?}"))
                }
            }
        }
        _ => {
            debug!(error = %error, "undecodable request");
            Response::Close(error.to_string())
        }
    }
}

/// The metric label for an API.
pub fn api_name(api_key: ApiKey) -> &'static str {
    match api_key {
        ApiKey::Produce => "Produce",
        ApiKey::Fetch => "Fetch",
        ApiKey::ListOffsets => "ListOffsets",
        ApiKey::Metadata => "Metadata",
        ApiKey::ApiVersions => "ApiVersions",
        ApiKey::CreateTopics => "CreateTopics",
        ApiKey::DeleteTopics => "DeleteTopics",
        ApiKey::DeleteRecords => "DeleteRecords",
        ApiKey::DescribeConfigs => "DescribeConfigs",
        ApiKey::IncrementalAlterConfigs => "IncrementalAlterConfigs",
        ApiKey::AlterConfigs => "AlterConfigs",
        ApiKey::CreatePartitions => "CreatePartitions",
        ApiKey::DescribeCluster => "DescribeCluster",
        ApiKey::SaslHandshake => "SaslHandshake",
        ApiKey::SaslAuthenticate => "SaslAuthenticate",
        ApiKey::DescribeTopicPartitions => "DescribeTopicPartitions",
        ApiKey::OffsetForLeaderEpoch => "OffsetForLeaderEpoch",
        ApiKey::InitProducerId => "InitProducerId",
        ApiKey::FindCoordinator => "FindCoordinator",
        ApiKey::JoinGroup => "JoinGroup",
        ApiKey::SyncGroup => "SyncGroup",
        ApiKey::Heartbeat => "Heartbeat",
        ApiKey::LeaveGroup => "LeaveGroup",
        ApiKey::OffsetCommit => "OffsetCommit",
        ApiKey::OffsetFetch => "OffsetFetch",
        ApiKey::DescribeGroups => "DescribeGroups",
        ApiKey::ListGroups => "ListGroups",
        ApiKey::DeleteGroups => "DeleteGroups",
        ApiKey::OffsetDelete => "OffsetDelete",
        ApiKey::DescribeQuorum => "DescribeQuorum",
        ApiKey::DescribeClientQuotas => "DescribeClientQuotas",
        ApiKey::AlterClientQuotas => "AlterClientQuotas",
        ApiKey::DescribeUserScramCredentials => "DescribeUserScramCredentials",
        ApiKey::AlterUserScramCredentials => "AlterUserScramCredentials",
        ApiKey::DescribeAcls => "DescribeAcls",
        ApiKey::CreateAcls => "CreateAcls",
        ApiKey::DeleteAcls => "DeleteAcls",
        ApiKey::ElectLeaders => "ElectLeaders",
        _ => "Other",
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::{
        BrokerId, FetchRequest, MetadataRequest, ProduceRequest, SaslHandshakeRequest,
    };
    use weir_protocol_compat::api_table::SUPPORTED_APIS;

    use super::*;

    #[test]
    fn the_request_quota_exempts_what_kafka_exempts() {
        let consumer = FetchRequest::default().with_replica_id(BrokerId(-1));
        let mut follower = FetchRequest::default();
        follower.replica_state.replica_id = BrokerId(2);
        let old_follower = FetchRequest::default().with_replica_id(BrokerId(2));
        let exempt = |body: RequestKind, version| request_quota_exempt(&body, version);
        assert!(!exempt(RequestKind::Fetch(consumer.clone()), 17));
        assert!(!exempt(RequestKind::Fetch(consumer), 12));
        assert!(exempt(RequestKind::Fetch(follower), 17));
        assert!(exempt(RequestKind::Fetch(old_follower), 12));
        assert!(exempt(
            RequestKind::Produce(ProduceRequest::default().with_acks(0)),
            11
        ));
        assert!(!exempt(
            RequestKind::Produce(ProduceRequest::default().with_acks(1)),
            11
        ));
        assert!(exempt(
            RequestKind::SaslHandshake(SaslHandshakeRequest::default()),
            1
        ));
        assert!(!exempt(
            RequestKind::Metadata(MetadataRequest::default()),
            12
        ));
    }

    #[test]
    fn poll_timed_counts_the_time_spent_in_polls_only() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let mut spent = Duration::ZERO;
            let work = async {
                // A minute of waiting costs nothing...
                tokio::time::sleep(Duration::from_secs(60)).await;
                // ...but busy work in a poll does.
                std::thread::sleep(Duration::from_millis(20));
                7
            };
            let out = PollTimed {
                inner: std::pin::pin!(work),
                spent: &mut spent,
            }
            .await;
            assert_eq!(out, 7);
            assert!(spent >= Duration::from_millis(20), "{spent:?}");
            assert!(spent < Duration::from_secs(60), "{spent:?}");
        });
    }

    /// Every API in the supported table (`weir_protocol_compat::api_table`,
    /// which ApiVersions is derived from) has a handler arm and a metric name.
    #[test]
    fn dispatch_covers_the_supported_table() {
        for api in SUPPORTED_APIS {
            assert_ne!(
                api_name(api.api_key),
                "Other",
                "{:?} has no handler",
                api.api_key
            );
        }
    }
}
