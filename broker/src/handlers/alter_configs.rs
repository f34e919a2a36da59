//! AlterConfigs (key 33), v0-2 (v2+ flexible): the legacy, non-incremental
//! config change. For a topic it REPLACES the whole set of dynamic configs
//! with the given one: keys not listed go back to their defaults. Committed
//! through the metadata quorum (`ConfigRecord`s computed by the controller
//! against the image at commit time), then applied to the hosted logs
//! before answering.
//!
//! Per resource, in request order, as Kafka 4's `ConfigAdminManager.preprocess`
//! and `ConfigurationControlManager.legacyAlterConfigs` answer:
//! - the same (type, name) twice: INVALID_REQUEST "Each resource must appear
//!   at most once." for each occurrence (Kafka 4.1.2 itself never answers
//!   such a request);
//! - a key twice: INVALID_REQUEST "Error due to duplicate config keys";
//!   a null value: INVALID_REQUEST "Null value not supported for : `<keys>`";
//! - TOPIC (2): an unknown topic gets UNKNOWN_TOPIC_OR_PARTITION; an unknown
//!   key or a bad value INVALID_CONFIG (the checks IncrementalAlterConfigs
//!   uses); `validate_only` checks without changing anything.
//! - BROKER (4): a non-empty name must be this node's id (else
//!   INVALID_REQUEST, as Kafka); a TLS listener's store keys set to their
//!   value reload its stores, any other key gets INVALID_CONFIG
//!   (`broker_configs`, as IncrementalAlterConfigs); an empty set changes
//!   nothing.
//! - any other type (BROKER_LOGGER, CLIENT_METRICS, GROUP, unknown):
//!   INVALID_REQUEST.

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::messages::alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::ResponseError;

use super::incremental_alter_configs::{
    apply_changed_configs, check_topic_config, controller_failure, resource_counts, result_fields,
    Failure,
};
use crate::context::BrokerContext;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;

/// Applies the requested replacements; one result per resource, in request order.
pub async fn handle(
    ctx: &BrokerContext,
    _version: i16,
    request: AlterConfigsRequest,
    auth: &crate::authorizer::RequestAuth<'_>,
) -> AlterConfigsResponse {
    let seen = resource_counts(
        request
            .resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str())),
    );
    let mut response = AlterConfigsResponse::default();
    let mut changed = false;
    for resource in &request.resources {
        let outcome = if seen[&(resource.resource_type, resource.resource_name.as_str())] > 1 {
            Err((
                ResponseError::InvalidRequest,
                "Each resource must appear at most once.".to_string(),
            ))
        } else if let Some(error) = crate::authorizer::config_resource_refused(
            auth,
            weir_controller::acl::AclOperation::AlterConfigs,
            resource.resource_type,
            &resource.resource_name,
        ) {
            // Kafka's handleAlterConfigsRequest.
            Err((
                error,
                weir_protocol_compat::error_response::kafka_default_message(error.code())
                    .unwrap_or_default()
                    .to_string(),
            ))
        } else {
            alter_resource(ctx, resource, request.validate_only).await
        };
        let mut result = AlterConfigsResourceResponse::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        (result.error_code, result.error_message) = result_fields(outcome, &mut changed);
        response.responses.push(result);
    }
    apply_changed_configs(ctx, changed);
    response
}

/// Checks and (unless `validate_only`) applies one resource; `Ok(true)` when
/// configs were committed.
async fn alter_resource(
    ctx: &BrokerContext,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<bool, Failure> {
    let invalid_request = |message: String| (ResponseError::InvalidRequest, message);
    let mut keys = HashSet::new();
    if !resource
        .configs
        .iter()
        .all(|c| keys.insert(c.name.as_str()))
    {
        return Err(invalid_request(
            "Error due to duplicate config keys".to_string(),
        ));
    }
    let null_keys: Vec<&str> = resource
        .configs
        .iter()
        .filter(|c| c.value.is_none())
        .map(|c| c.name.as_str())
        .collect();
    if !null_keys.is_empty() {
        return Err(invalid_request(format!(
            "Null value not supported for : {}",
            null_keys.join(", ")
        )));
    }
    match resource.resource_type {
        TOPIC => replace_topic_configs(ctx, resource, validate_only).await,
        BROKER => {
            let name = resource.resource_name.as_str();
            if !name.is_empty() {
                let id: i32 = name.parse().map_err(|_| {
                    invalid_request(format!("Node id must be an integer, but it is: {name}"))
                })?;
                if id != ctx.node_id {
                    return Err(invalid_request(format!(
                        "Unexpected broker id, expected {}, but received {name}",
                        ctx.node_id
                    )));
                }
            }
            let changes: Vec<(&str, Option<&str>)> = resource
                .configs
                .iter()
                .map(|c| (c.name.as_str(), c.value.as_deref()))
                .collect();
            super::broker_configs::alter(ctx, &changes, validate_only).await
        }
        other => Err(invalid_request(format!("Unknown resource type {other}"))),
    }
}

/// Validates a topic's new config set and (unless `validate_only`) has the
/// controller replace the current one with it.
async fn replace_topic_configs(
    ctx: &BrokerContext,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<bool, Failure> {
    let name = resource.resource_name.as_str();
    if ctx.metadata().topic(name).is_none() {
        return Err((
            ResponseError::UnknownTopicOrPartition,
            format!("The topic '{name}' does not exist."),
        ));
    }
    let mut configs = BTreeMap::new();
    for config in &resource.configs {
        let value = config.value.as_ref().map_or("", |v| v.as_str());
        check_topic_config(config.name.as_str(), value)?;
        configs.insert(config.name.to_string(), value.to_string());
    }
    if validate_only {
        return Ok(false);
    }
    ctx.controller
        .replace_topic_configs(name, configs)
        .await
        .map_err(|e| controller_failure(&e))?;
    Ok(true)
}
