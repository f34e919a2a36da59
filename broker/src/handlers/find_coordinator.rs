//! FindCoordinator (key 10), v0-6: every group is coordinated by this
//! broker. Key type 0 (group) is answered with this broker's advertised
//! endpoint (as the Metadata handler lists it); key type 1 (transaction)
//! gets COORDINATOR_NOT_AVAILABLE because transactions are not served yet;
//! other key types get INVALID_REQUEST. v4+ batch `coordinator_keys`
//! (KIP-699) and answer each in `coordinators`.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::ResponseError;

use super::str_bytes;
use crate::context::BrokerContext;

/// Kafka's `CoordinatorType.GROUP`.
const KEY_TYPE_GROUP: i8 = 0;
/// Kafka's `CoordinatorType.TRANSACTION`.
const KEY_TYPE_TRANSACTION: i8 = 1;

/// Answers a FindCoordinator request.
pub fn handle(
    ctx: &BrokerContext,
    version: i16,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let mut response = FindCoordinatorResponse::default();
    if version >= 4 {
        response.coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| coordinator(ctx, key.to_string(), request.key_type))
            .collect();
        return response;
    }
    let c = coordinator(ctx, request.key.to_string(), request.key_type);
    response.error_code = c.error_code;
    response.error_message = if version >= 1 { c.error_message } else { None };
    response.node_id = c.node_id;
    response.host = c.host;
    response.port = c.port;
    response
}

/// This broker's advertised host and port: its registration in the
/// metadata image (the endpoint Metadata lists), else the first advertised
/// listener.
fn endpoint(ctx: &BrokerContext) -> Option<(String, i32)> {
    let image = ctx.metadata();
    if let Some(ep) = image
        .brokers
        .get(&ctx.node_id)
        .and_then(|b| b.endpoints.first())
    {
        return Some((ep.host.clone(), i32::from(ep.port)));
    }
    ctx.advertised_listeners
        .first()
        .map(|l| (l.host.clone(), i32::from(l.port)))
}

fn coordinator(ctx: &BrokerContext, key: String, key_type: i8) -> Coordinator {
    let mut c = Coordinator::default();
    c.key = str_bytes(key);
    c.node_id = BrokerId(-1);
    c.host = str_bytes("");
    c.port = -1;
    let error = match key_type {
        KEY_TYPE_GROUP => match endpoint(ctx) {
            Some((host, port)) => {
                c.node_id = BrokerId(ctx.node_id);
                c.host = str_bytes(host);
                c.port = port;
                return c;
            }
            None => ResponseError::CoordinatorNotAvailable,
        },
        KEY_TYPE_TRANSACTION => ResponseError::CoordinatorNotAvailable,
        _ => ResponseError::InvalidRequest,
    };
    c.error_code = error.code();
    c.error_message = Some(str_bytes(match error {
        ResponseError::InvalidRequest => format!("Unknown coordinator type {key_type}"),
        _ => "The coordinator is not available.".to_string(),
    }));
    c
}
