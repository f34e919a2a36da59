//! DescribeGroups (key 15), v0-5: state, protocol and members of each
//! group; member metadata and assignments only for Stable groups (as
//! Kafka). Unknown groups are reported with state `Dead` and no error.
//! A group named more than once is described once, at its first place
//! (Kafka describes every occurrence; Weir bounds the answer by the groups
//! that exist, issue 15).

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};

use super::authorized_operations::{authorized_operations, AclResourceType};
use super::str_bytes;
use crate::context::BrokerContext;

/// Describes the requested groups, in request order.
pub fn handle(
    ctx: &BrokerContext,
    _version: i16,
    request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let mut response = DescribeGroupsResponse::default();
    for group_id in super::first_occurrences(request.groups, |g| g.clone()) {
        let mut g = DescribedGroup::default();
        match ctx.group_coordinator.describe_group(&group_id) {
            Ok(d) => {
                // v3+ (KIP-430); the request field is false below v3.
                g.authorized_operations = authorized_operations(
                    AclResourceType::Group,
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
                g.authorized_operations = authorized_operations(AclResourceType::Group, false);
                g.error_code = e.code();
            }
        }
        g.group_id = group_id;
        response.groups.push(g);
    }
    response
}
