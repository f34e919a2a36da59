//! ListGroups (key 16), v0-5: every group this broker coordinates. v4 adds
//! a states filter (KIP-518), v5 a types filter (KIP-848); both compare
//! case-insensitively. Every group here is a classic group (type
//! `classic`).

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::str_bytes;
use crate::context::BrokerContext;

/// Kafka's `Group.GroupType.CLASSIC` name.
pub const CLASSIC_GROUP_TYPE: &str = "classic";

/// Lists the groups that pass the filters.
/// Kafka's handleListGroupsRequest: Describe on the cluster lists every
/// group, else only the groups the client may Describe.
pub fn handle(
    ctx: &BrokerContext,
    version: i16,
    request: ListGroupsRequest,
    auth: &crate::authorizer::RequestAuth<'_>,
) -> ListGroupsResponse {
    let mut response = ListGroupsResponse::default();
    let groups = match ctx.group_coordinator.list_groups() {
        Ok(groups) => groups,
        Err(e) => {
            response.error_code = e.code();
            return response;
        }
    };
    let states: Vec<String> = if version >= 4 {
        request
            .states_filter
            .iter()
            .map(|s| s.to_lowercase())
            .collect()
    } else {
        Vec::new()
    };
    let types: Vec<String> = if version >= 5 {
        request
            .types_filter
            .iter()
            .map(|s| s.to_lowercase())
            .collect()
    } else {
        Vec::new()
    };
    if !types.is_empty() && !types.iter().any(|t| t == CLASSIC_GROUP_TYPE) {
        return response;
    }
    let all_visible = !auth.enabled()
        || auth.allowed_quietly(
            weir_controller::acl::AclOperation::Describe,
            weir_controller::acl::AclResourceType::Cluster,
            weir_controller::acl::CLUSTER_NAME,
        );
    response.groups = groups
        .into_iter()
        .filter(|g| states.is_empty() || states.contains(&g.state.to_lowercase()))
        .filter(|g| {
            all_visible
                || auth.allowed_quietly(
                    weir_controller::acl::AclOperation::Describe,
                    weir_controller::acl::AclResourceType::Group,
                    &g.group_id,
                )
        })
        .map(|g| {
            let mut listed = ListedGroup::default();
            listed.group_id = GroupId(str_bytes(g.group_id));
            listed.protocol_type = str_bytes(g.protocol_type);
            listed.group_state = str_bytes(g.state);
            listed.group_type = str_bytes(CLASSIC_GROUP_TYPE);
            listed
        })
        .collect();
    response
}
