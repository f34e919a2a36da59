//! SyncGroup (key 14), v0-5: the leader hands in the assignment, which the
//! coordinator stores with the group's metadata before every member gets
//! its part. v5 adds the protocol type and name (checked when given).

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};

use super::str_bytes;
use crate::context::BrokerContext;
use crate::group::coordinator::SyncGroupParams;

/// Waits for this member's assignment.
pub async fn handle(
    ctx: &BrokerContext,
    version: i16,
    request: SyncGroupRequest,
) -> SyncGroupResponse {
    let params = SyncGroupParams {
        group_id: request.group_id.to_string(),
        generation_id: request.generation_id,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        protocol_type: request.protocol_type.map(|s| s.to_string()),
        protocol_name: request.protocol_name.map(|s| s.to_string()),
        assignments: request
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect(),
    };
    let result = ctx.group_coordinator.sync_group(params).await;
    let mut response = SyncGroupResponse::default();
    response.error_code = result.error.map(|e| e.code()).unwrap_or(0);
    if version >= 5 {
        response.protocol_type = result.protocol_type.map(str_bytes);
        response.protocol_name = result.protocol_name.map(str_bytes);
    }
    response.assignment = result.assignment;
    response
}
