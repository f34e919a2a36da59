//! DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31),
//! v1-3: the ACLs of the metadata log (KIP-140, KIP-290 for pattern types,
//! KIP-373 for the USER resource type), as Kafka's `AclApis` over its
//! `StandardAuthorizer`.
//!
//! The caller's Describe (DescribeAcls) or Alter (Create/DeleteAcls) on the
//! cluster is checked before, in dispatch (`authorizer::request_refused`).
//! Without an authorizer every answer is SECURITY_DISABLED, as Kafka's. A
//! request holding a code Kafka does not know (resource type, pattern
//! type, operation or permission 0, or beyond the known ones) cannot be
//! parsed by Kafka and closes the connection; so it does here.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_controller::acl::{
    AclBindingFilter, AclOperation, AclPermissionType, AclResourceType, PatternType, StandardAcl,
    CLUSTER_NAME,
};
use weir_controller::{ControllerError, MetadataImage};

use super::str_bytes;
use crate::context::BrokerContext;
use crate::error::controller_error_code;

/// Why a request is not served: the connection is closed with this
/// reason (Kafka cannot parse a request with UNKNOWN elements).
pub type Unparsable = String;

/// Answers DescribeAcls from `image` (`authorizer_configured` false:
/// SECURITY_DISABLED "No Authorizer is configured on the broker").
///
/// # Errors
///
/// [`Unparsable`] when the filter holds an UNKNOWN element.
pub fn describe(
    image: &MetadataImage,
    authorizer_configured: bool,
    request: &DescribeAclsRequest,
) -> Result<DescribeAclsResponse, Unparsable> {
    let filter = binding_filter(
        request.resource_type_filter,
        request.resource_name_filter.as_deref(),
        request.pattern_type_filter,
        request.principal_filter.as_deref(),
        request.host_filter.as_deref(),
        request.operation,
        request.permission_type,
    );
    if filter.is_unknown() {
        return Err(format!(
            "DescribeAclsRequest contains UNKNOWN elements: {filter:?}"
        ));
    }
    let mut response = DescribeAclsResponse::default();
    if !authorizer_configured {
        response.error_code = ResponseError::SecurityDisabled.code();
        response.error_message = Some(str_bytes("No Authorizer is configured on the broker"));
        return Ok(response);
    }
    // Kafka's DescribeAclsResponse.aclsResources: grouped by resource pattern.
    let mut by_resource: BTreeMap<(i8, &str, i8), Vec<AclDescription>> = BTreeMap::new();
    for (_, acl) in image.acls.iter().filter(|(_, acl)| filter.matches(acl)) {
        let mut description = AclDescription::default();
        description.principal = str_bytes(acl.principal.clone());
        description.host = str_bytes(acl.host.clone());
        description.operation = acl.operation.code();
        description.permission_type = acl.permission_type.code();
        by_resource
            .entry((
                acl.resource_type.code(),
                acl.resource_name.as_str(),
                acl.pattern_type.code(),
            ))
            .or_default()
            .push(description);
    }
    response.resources = by_resource
        .into_iter()
        .map(|((resource_type, name, pattern_type), acls)| {
            let mut resource = DescribeAclsResource::default();
            resource.resource_type = resource_type;
            resource.resource_name = str_bytes(name.to_string());
            resource.pattern_type = pattern_type;
            resource.acls = acls;
            resource
        })
        .collect();
    Ok(response)
}

/// Creates the requested ACLs; one result per creation, in request order.
///
/// # Errors
///
/// [`Unparsable`] when a creation holds an UNKNOWN element.
pub async fn create(
    ctx: &BrokerContext,
    request: CreateAclsRequest,
) -> Result<CreateAclsResponse, Unparsable> {
    let acls: Vec<StandardAcl> = request
        .creations
        .into_iter()
        .map(|c| StandardAcl {
            resource_type: AclResourceType::from_code(c.resource_type),
            resource_name: c.resource_name.to_string(),
            pattern_type: PatternType::from_code(c.resource_pattern_type),
            principal: c.principal.to_string(),
            host: c.host.to_string(),
            operation: AclOperation::from_code(c.operation),
            permission_type: AclPermissionType::from_code(c.permission_type),
        })
        .collect();
    if let Some(acl) = acls.iter().find(|a| {
        a.resource_type == AclResourceType::Unknown
            || a.pattern_type == PatternType::Unknown
            || a.operation == AclOperation::Unknown
            || a.permission_type == AclPermissionType::Unknown
    }) {
        return Err(format!("CreatableAcls contain unknown elements: {acl:?}"));
    }
    let mut response = CreateAclsResponse::default();
    if ctx.authorizer.is_none() {
        response.results = acls
            .iter()
            .map(|_| {
                creation_result(Some((
                    ResponseError::SecurityDisabled.code(),
                    "No Authorizer is configured.".into(),
                )))
            })
            .collect();
        return Ok(response);
    }
    // Kafka's AclApis.handleCreateAcls checks these before the controller.
    let mut results: Vec<Option<AclCreationResult>> = Vec::with_capacity(acls.len());
    let mut valid = Vec::new();
    for acl in acls {
        let refused =
            if acl.resource_type == AclResourceType::Cluster && acl.resource_name != CLUSTER_NAME {
                Some(format!(
                    "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
                ))
            } else if acl.resource_name.is_empty() {
                Some("Invalid empty resource name".to_string())
            } else {
                None
            };
        match refused {
            Some(message) => results.push(Some(creation_result(Some((
                ResponseError::InvalidRequest.code(),
                message,
            ))))),
            None => {
                results.push(None);
                valid.push(acl);
            }
        }
    }
    let mut outcomes = match valid.is_empty() {
        true => Vec::new(),
        false => ctx.controller.create_acls(valid).await,
    }
    .into_iter();
    response.results = results
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| match outcomes.next() {
                Some(Ok(())) => creation_result(None),
                Some(Err(e)) => creation_result(Some(error_fields(&e))),
                None => creation_result(Some((
                    ResponseError::UnknownServerError.code(),
                    "no result from the controller".into(),
                ))),
            })
        })
        .collect();
    Ok(response)
}

/// Deletes the ACLs the request's filters select; one result per filter.
///
/// # Errors
///
/// [`Unparsable`] when a filter holds an UNKNOWN element.
pub async fn delete(
    ctx: &BrokerContext,
    request: DeleteAclsRequest,
) -> Result<DeleteAclsResponse, Unparsable> {
    let filters: Vec<AclBindingFilter> = request
        .filters
        .iter()
        .map(|f| {
            binding_filter(
                f.resource_type_filter,
                f.resource_name_filter.as_deref(),
                f.pattern_type_filter,
                f.principal_filter.as_deref(),
                f.host_filter.as_deref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    if let Some(filter) = filters.iter().find(|f| f.is_unknown()) {
        return Err(format!(
            "Filters contain UNKNOWN elements, filter: {filter:?}"
        ));
    }
    let mut response = DeleteAclsResponse::default();
    if ctx.authorizer.is_none() {
        response.filter_results = filters
            .iter()
            .map(|_| {
                let mut r = DeleteAclsFilterResult::default();
                r.error_code = ResponseError::SecurityDisabled.code();
                r.error_message = Some(str_bytes("No Authorizer is configured."));
                r
            })
            .collect();
        return Ok(response);
    }
    let outcomes = match filters.is_empty() {
        true => Vec::new(),
        false => ctx.controller.delete_acls(filters).await,
    };
    response.filter_results = outcomes
        .into_iter()
        .map(|outcome| {
            let mut r = DeleteAclsFilterResult::default();
            match outcome {
                Ok(acls) => r.matching_acls = acls.iter().map(matching_acl).collect(),
                Err(e) => {
                    let (code, message) = error_fields(&e);
                    r.error_code = code;
                    r.error_message = Some(str_bytes(message));
                }
            }
            r
        })
        .collect();
    Ok(response)
}

#[allow(clippy::too_many_arguments)]
fn binding_filter(
    resource_type: i8,
    resource_name: Option<&str>,
    pattern_type: i8,
    principal: Option<&str>,
    host: Option<&str>,
    operation: i8,
    permission_type: i8,
) -> AclBindingFilter {
    AclBindingFilter {
        resource_type: AclResourceType::from_code(resource_type),
        resource_name: resource_name.map(str::to_string),
        pattern_type: PatternType::from_code(pattern_type),
        principal: principal.map(str::to_string),
        host: host.map(str::to_string),
        operation: AclOperation::from_code(operation),
        permission_type: AclPermissionType::from_code(permission_type),
    }
}

fn creation_result(error: Option<(i16, String)>) -> AclCreationResult {
    let mut r = AclCreationResult::default();
    if let Some((code, message)) = error {
        r.error_code = code;
        r.error_message = Some(str_bytes(message));
    }
    r
}

/// The code and message of a controller error; an invalid ACL keeps
/// Kafka's bare message.
fn error_fields(e: &ControllerError) -> (i16, String) {
    match e {
        ControllerError::InvalidRequest { reason } => {
            (ResponseError::InvalidRequest.code(), reason.clone())
        }
        other => (controller_error_code(other), other.to_string()),
    }
}

fn matching_acl(acl: &StandardAcl) -> DeleteAclsMatchingAcl {
    let s = |v: &str| StrBytes::from_string(v.to_string());
    let mut m = DeleteAclsMatchingAcl::default();
    m.resource_type = acl.resource_type.code();
    m.resource_name = s(&acl.resource_name);
    m.pattern_type = acl.pattern_type.code();
    m.principal = s(&acl.principal);
    m.host = s(&acl.host);
    m.operation = acl.operation.code();
    m.permission_type = acl.permission_type.code();
    m
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn image() -> MetadataImage {
        let mut image = MetadataImage::default();
        let acls = Arc::make_mut(&mut image.acls);
        for (i, (name, pattern, principal)) in [
            ("orders", PatternType::Literal, "User:alice"),
            ("orders", PatternType::Literal, "User:bob"),
            ("ord", PatternType::Prefixed, "User:carol"),
            ("other", PatternType::Literal, "User:alice"),
        ]
        .into_iter()
        .enumerate()
        {
            acls.insert(
                uuid::Uuid::from_u128(i as u128 + 1),
                StandardAcl {
                    resource_type: AclResourceType::Topic,
                    resource_name: name.into(),
                    pattern_type: pattern,
                    principal: principal.into(),
                    host: "*".into(),
                    operation: AclOperation::Read,
                    permission_type: AclPermissionType::Allow,
                },
            );
        }
        image
    }

    fn request(name: Option<&str>, pattern_type: PatternType) -> DescribeAclsRequest {
        let mut r = DescribeAclsRequest::default();
        r.resource_type_filter = AclResourceType::Topic.code();
        r.resource_name_filter = name.map(|n| str_bytes(n.to_string()));
        r.pattern_type_filter = pattern_type.code();
        r.operation = AclOperation::Any.code();
        r.permission_type = AclPermissionType::Any.code();
        r.principal_filter = None;
        r.host_filter = None;
        r
    }

    #[test]
    fn describe_groups_matching_acls_by_resource() {
        let r = describe(&image(), true, &request(Some("orders"), PatternType::Match)).unwrap();
        let summary: Vec<(String, i8, usize)> = r
            .resources
            .iter()
            .map(|res| {
                (
                    res.resource_name.to_string(),
                    res.pattern_type,
                    res.acls.len(),
                )
            })
            .collect();
        assert_eq!(summary, vec![("ord".into(), 4, 1), ("orders".into(), 3, 2)]);
        let all = describe(&image(), true, &request(None, PatternType::Any)).unwrap();
        assert_eq!(all.resources.len(), 3);
    }

    #[test]
    fn describe_without_authorizer_or_with_unknown_codes() {
        let r = describe(&image(), false, &request(None, PatternType::Any)).unwrap();
        assert_eq!(r.error_code, ResponseError::SecurityDisabled.code());
        assert!(r.resources.is_empty());
        let mut unknown = request(None, PatternType::Any);
        unknown.operation = 0;
        assert!(describe(&image(), true, &unknown).is_err());
        unknown.operation = 99;
        assert!(describe(&image(), true, &unknown).is_err());
    }
}
