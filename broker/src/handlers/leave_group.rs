//! LeaveGroup (key 13), v0-5: members leave at once, triggering a
//! rebalance. v0-2 name one member (its error is the top-level error);
//! v3+ batch members with per-member errors (KIP-345).

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use super::str_bytes;
use crate::context::BrokerContext;

/// Removes the members.
pub fn handle(ctx: &BrokerContext, version: i16, request: LeaveGroupRequest) -> LeaveGroupResponse {
    let members: Vec<(String, Option<String>)> = if version <= 2 {
        vec![(request.member_id.to_string(), None)]
    } else {
        request
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    };
    let mut response = LeaveGroupResponse::default();
    match ctx
        .group_coordinator
        .leave_group(&request.group_id, members)
    {
        Err(e) => response.error_code = e.code(),
        Ok(outcomes) if version <= 2 => {
            response.error_code = outcomes
                .first()
                .and_then(|(_, _, e)| *e)
                .map(|e| e.code())
                .unwrap_or(0);
        }
        Ok(outcomes) => {
            response.members = outcomes
                .into_iter()
                .map(|(member_id, instance, error)| {
                    let mut m = MemberResponse::default();
                    m.member_id = str_bytes(member_id);
                    m.group_instance_id = instance.map(str_bytes);
                    m.error_code = error.map(|e| e.code()).unwrap_or(0);
                    m
                })
                .collect();
        }
    }
    response
}
