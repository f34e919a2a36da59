//! DeleteGroups (key 42), v0-2: deletes Empty groups with their offsets
//! (tombstones written through the group store). Groups with members get
//! NON_EMPTY_GROUP, unknown groups GROUP_ID_NOT_FOUND. A group named more
//! than once is deleted and answered once (Kafka's `KafkaApis` takes the
//! distinct names).

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId};

use super::str_bytes;
use crate::context::BrokerContext;

/// Deletes the groups; results in request order.
pub async fn handle(
    ctx: &BrokerContext,
    _version: i16,
    request: DeleteGroupsRequest,
    auth: &crate::authorizer::RequestAuth<'_>,
) -> DeleteGroupsResponse {
    let ids = super::first_occurrences(request.groups_names.iter().map(|g| g.to_string()), |g| {
        g.clone()
    });
    // Kafka's handleDeleteGroupsRequest: Delete on each group.
    let (ids, denied): (Vec<String>, Vec<String>) = ids
        .into_iter()
        .partition(|g| auth.group(weir_controller::acl::AclOperation::Delete, g));
    let mut response = DeleteGroupsResponse::default();
    let refused = denied.into_iter().map(|g| {
        (
            g,
            Some(kafka_protocol::ResponseError::GroupAuthorizationFailed),
        )
    });
    let deleted = match ids.is_empty() {
        true => Vec::new(),
        false => ctx.group_coordinator.delete_groups(ids).await,
    };
    response.results = deleted
        .into_iter()
        .chain(refused)
        .map(|(group_id, error)| {
            let mut r = DeletableGroupResult::default();
            r.group_id = GroupId(str_bytes(group_id));
            r.error_code = error.map(|e| e.code()).unwrap_or(0);
            r
        })
        .collect();
    response
}
