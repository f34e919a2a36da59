//! Heartbeat (key 12), v0-4: keeps a member's session alive and tells it
//! when a rebalance is in progress (REBALANCE_IN_PROGRESS).

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use crate::context::BrokerContext;

/// Answers a heartbeat.
pub fn handle(ctx: &BrokerContext, _version: i16, request: HeartbeatRequest) -> HeartbeatResponse {
    let error = ctx.group_coordinator.heartbeat(
        &request.group_id,
        request.generation_id,
        &request.member_id,
        request.group_instance_id.as_deref(),
    );
    let mut response = HeartbeatResponse::default();
    response.error_code = error.map(|e| e.code()).unwrap_or(0);
    response
}
