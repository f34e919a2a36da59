//! DescribeGroups (key 15), v0-5: state, protocol and members of each
//! group; member metadata and assignments only for Stable groups (as
//! Kafka). Unknown groups are reported with state `Dead` and no error.

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};

use super::describe_cluster::AUTHORIZED_OPERATIONS_OMITTED;
use super::str_bytes;
use crate::context::BrokerContext;

/// Describes the requested groups, in request order.
pub fn handle(
    ctx: &BrokerContext,
    _version: i16,
    request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let mut response = DescribeGroupsResponse::default();
    for group_id in request.groups {
        let mut g = DescribedGroup::default();
        g.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
        match ctx.group_coordinator.describe_group(&group_id) {
            Ok(d) => {
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
            Err(e) => g.error_code = e.code(),
        }
        g.group_id = group_id;
        response.groups.push(g);
    }
    response
}
