//! DescribeGroups (key 15), v0-5: state, protocol and members of each
//! group; member metadata and assignments only for Stable groups (as
//! Kafka). Unknown groups are reported with state `Dead` and no error.
//! A group named more than once is described once, at its first place
//! (Kafka describes every occurrence; Weir bounds the answer by the groups
//! that exist, issue 15).

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};

use weir_controller::acl::{AclOperation, AclResourceType};

use super::str_bytes;
use crate::authorizer::{RequestAuth, AUTHORIZED_OPERATIONS_OMITTED};
use crate::context::BrokerContext;

/// Describes the requested groups, in request order; a group the client
/// may not Describe gets GROUP_AUTHORIZATION_FAILED (Kafka's
/// `handleDescribeGroupsRequest`).
pub fn handle(
    ctx: &BrokerContext,
    _version: i16,
    request: DescribeGroupsRequest,
    auth: &RequestAuth<'_>,
) -> DescribeGroupsResponse {
    let mut response = DescribeGroupsResponse::default();
    for group_id in super::first_occurrences(request.groups, |g| g.clone()) {
        let mut g = DescribedGroup::default();
        if !auth.group(AclOperation::Describe, &group_id) {
            g.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
            g.error_code = kafka_protocol::ResponseError::GroupAuthorizationFailed.code();
            g.group_id = group_id;
            response.groups.push(g);
            continue;
        }
        match ctx.group_coordinator.describe_group(&group_id) {
            Ok(d) => {
                // v3+ (KIP-430); the request field is false below v3.
                g.authorized_operations = auth.authorized_operations(
                    AclResourceType::Group,
                    &group_id,
                    request.include_authorized_operations,
                );
                g.group_state = str_bytes(d.state);
                g.protocol_type = str_bytes(d.protocol_type);
                g.protocol_data = str_bytes(d.protocol_data);
                g.members = d
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut member = DescribedGroupMember::default();
                        member.member_id = str_bytes(m.member_id);
                        member.group_instance_id = m.group_instance_id.map(str_bytes);
                        member.client_id = str_bytes(m.client_id);
                        member.client_host = str_bytes(m.client_host);
                        member.member_metadata = m.metadata;
                        member.member_assignment = m.assignment;
                        member
                    })
                    .collect();
            }
            Err(e) => {
                g.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
                g.error_code = e.code();
            }
        }
        g.group_id = group_id;
        response.groups.push(g);
    }
    response
}
