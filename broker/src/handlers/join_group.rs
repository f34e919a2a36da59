//! JoinGroup (key 11), v0-9: the first phase of a classic rebalance,
//! answered by the group coordinator when the join phase completes. v0 has
//! no rebalance timeout (the session timeout is used, as Kafka does); v4+
//! first joins get MEMBER_ID_REQUIRED (KIP-394); v5+ carry static
//! membership (KIP-345); v9 may skip the assignment (KIP-814).

use std::net::SocketAddr;

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};

use super::str_bytes;
use crate::context::BrokerContext;
use crate::group::coordinator::JoinGroupParams;

/// Kafka's rendering of a client address (`InetAddress.toString`):
/// `/127.0.0.1`.
pub fn client_host(peer: SocketAddr) -> String {
    format!("/{}", peer.ip())
}

/// Joins the member and waits for the join phase to complete.
pub async fn handle(
    ctx: &BrokerContext,
    version: i16,
    client_id: Option<&str>,
    peer: SocketAddr,
    request: JoinGroupRequest,
) -> JoinGroupResponse {
    let params = JoinGroupParams {
        group_id: request.group_id.to_string(),
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        client_id: client_id.unwrap_or_default().to_string(),
        client_host: client_host(peer),
        session_timeout_ms: request.session_timeout_ms,
        rebalance_timeout_ms: if version == 0 {
            request.session_timeout_ms
        } else {
            request.rebalance_timeout_ms
        },
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .into_iter()
            .map(|p| (p.name.to_string(), p.metadata))
            .collect(),
        require_known_member_id: version >= 4,
        supports_skip_assignment: version >= 9,
    };
    let result = ctx.group_coordinator.join_group(params).await;
    let mut response = JoinGroupResponse::default();
    response.error_code = result.error.map(|e| e.code()).unwrap_or(0);
    response.generation_id = result.generation_id;
    response.protocol_type = result.protocol_type.map(str_bytes);
    // protocol_name is nullable only from v7.
    response.protocol_name = match result.protocol_name {
        Some(name) => Some(str_bytes(name)),
        None if version < 7 => Some(str_bytes("")),
        None => None,
    };
    response.leader = str_bytes(result.leader);
    response.skip_assignment = result.skip_assignment;
    response.member_id = str_bytes(result.member_id);
    response.members = result
        .members
        .into_iter()
        .map(|m| {
            let mut member = JoinGroupResponseMember::default();
            member.member_id = str_bytes(m.member_id);
            member.group_instance_id = m.group_instance_id.map(str_bytes);
            member.metadata = m.metadata;
            member
        })
        .collect();
    response
}
