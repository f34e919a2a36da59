//! IncrementalAlterConfigs (key 44), v0-1 (KIP-339): changes topic configs
//! key by key through the metadata quorum (`ConfigRecord`s), then applies
//! them to the hosted logs before answering.
//!
//! Per resource, as Kafka's `ConfigAdminManager` and controller answer:
//! - TOPIC (2): an unknown topic gets UNKNOWN_TOPIC_OR_PARTITION; an unknown
//!   key or a bad value INVALID_CONFIG; SET (0) sets, DELETE (1) removes the
//!   topic's own value (back to the broker default), APPEND (2) and SUBTRACT
//!   (3) add or remove items of a list config (`cleanup.policy`; other keys
//!   get INVALID_CONFIG), starting from the current value or the default;
//!   another operation, a null SET value, or the same key twice is
//!   INVALID_REQUEST. `validate_only` checks without changing anything.
//! - BROKER (4): a SET of a TLS listener's store key to its value reloads
//!   its stores (KIP-226's keystore update, `broker_configs`); any other
//!   change gets INVALID_CONFIG naming the keys, as Kafka answers for a
//!   static key.
//! - anything else (BROKER_LOGGER, CLIENT_METRICS, GROUP, ...):
//!   INVALID_REQUEST.
//!
//! The same resource twice in one request: INVALID_REQUEST for each.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::ResponseError;

use super::str_bytes;
use crate::context::BrokerContext;
use crate::error::controller_error_code;
use crate::topic_config::{self, ConfigType};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// An error code and message for one resource.
pub(crate) type Failure = (ResponseError, String);

/// The answer to a change of broker configs (`keys`, non-empty) that are
/// not dynamic here (see `broker_configs`): INVALID_CONFIG naming them.
pub(crate) fn broker_change_refused<'a>(keys: impl Iterator<Item = &'a str>) -> Failure {
    (
        ResponseError::InvalidConfig,
        format!(
            "Cannot update these configs dynamically: {}",
            keys.collect::<Vec<_>>().join(", ")
        ),
    )
}

/// Checks a topic config key and value: INVALID_CONFIG with Kafka's
/// "Unknown topic config name: <key>" or the value's problem. Shared with
/// legacy AlterConfigs.
pub(crate) fn check_topic_config(key: &str, value: &str) -> Result<(), Failure> {
    if topic_config::topic_config_def(key).is_none() {
        return Err((
            ResponseError::InvalidConfig,
            format!("Unknown topic config name: {key}"),
        ));
    }
    topic_config::validate(key, value).map_err(|e| (ResponseError::InvalidConfig, e.to_string()))
}

/// A controller failure as a resource's answer.
pub(crate) fn controller_failure(e: &weir_controller::ControllerError) -> Failure {
    let code = controller_error_code(e);
    (
        ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError),
        e.to_string(),
    )
}

/// How many times each `(resource type, resource name)` appears in a request
/// (both AlterConfigs APIs refuse a resource named more than once).
pub(crate) fn resource_counts<'a>(
    resources: impl Iterator<Item = (i8, &'a str)>,
) -> HashMap<(i8, &'a str), usize> {
    let mut counts = HashMap::new();
    for key in resources {
        *counts.entry(key).or_default() += 1;
    }
    counts
}

/// A resource's `(error_code, error_message)` from its outcome: a success
/// carries a null message, as Kafka's, and sets `changed` when configs were
/// committed.
pub(crate) fn result_fields(
    outcome: Result<bool, Failure>,
    changed: &mut bool,
) -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    match outcome {
        Ok(committed) => {
            *changed |= committed;
            (0, None)
        }
        Err((error, message)) => (error.code(), Some(str_bytes(message))),
    }
}

/// After committed config changes: pushes them to the hosted logs.
pub(crate) fn apply_changed_configs(ctx: &BrokerContext, changed: bool) {
    if changed {
        if let Err(e) = ctx.replica_manager.apply_image(&ctx.metadata()) {
            tracing::error!(error = %e, "applying changed topic configs failed");
        }
    }
}

/// Applies the requested changes; one result per resource, in request order.
pub async fn handle(
    ctx: &BrokerContext,
    _version: i16,
    request: IncrementalAlterConfigsRequest,
    auth: &crate::authorizer::RequestAuth<'_>,
) -> IncrementalAlterConfigsResponse {
    let seen = resource_counts(
        request
            .resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str())),
    );
    let mut response = IncrementalAlterConfigsResponse::default();
    let mut changed = false;
    for resource in &request.resources {
        let name = resource.resource_name.as_str();
        let refused = crate::authorizer::config_resource_refused(
            auth,
            weir_controller::acl::AclOperation::AlterConfigs,
            resource.resource_type,
            name,
        );
        let outcome = if seen[&(resource.resource_type, name)] > 1 {
            Err((
                ResponseError::InvalidRequest,
                format!("resource {name} appears more than once"),
            ))
        } else if let Some(error) = refused {
            // Kafka's handleIncrementalAlterConfigsRequest.
            Err((
                error,
                weir_protocol_compat::error_response::kafka_default_message(error.code())
                    .unwrap_or_default()
                    .to_string(),
            ))
        } else {
            match resource.resource_type {
                TOPIC => alter_topic(ctx, resource, request.validate_only).await,
                BROKER => {
                    let changes: Vec<(&str, Option<&str>)> = resource
                        .configs
                        .iter()
                        .map(|c| {
                            let set = c.config_operation == SET;
                            (c.name.as_str(), c.value.as_deref().filter(|_| set))
                        })
                        .collect();
                    super::broker_configs::alter(ctx, &changes, request.validate_only).await
                }
                other => Err((
                    ResponseError::InvalidRequest,
                    format!("unsupported resource type {other}"),
                )),
            }
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

/// Validates and (unless `validate_only`) commits one topic's changes;
/// `Ok(true)` when configs were committed.
async fn alter_topic(
    ctx: &BrokerContext,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<bool, Failure> {
    let name = resource.resource_name.to_string();
    let image = ctx.metadata();
    let Some(topic) = image.topic(&name) else {
        return Err((
            ResponseError::UnknownTopicOrPartition,
            format!("topic {name} does not exist"),
        ));
    };
    let changes = plan_changes(ctx, &topic.configs, resource)?;
    if validate_only || changes.is_empty() {
        return Ok(false);
    }
    ctx.controller
        .alter_topic_configs(&name, changes)
        .await
        .map_err(|e| controller_failure(&e))?;
    Ok(true)
}

/// The `(key, new value or None to delete)` list a resource's operations
/// amount to, given the topic's current configs.
fn plan_changes(
    ctx: &BrokerContext,
    current: &BTreeMap<String, String>,
    resource: &AlterConfigsResource,
) -> Result<Vec<(String, Option<String>)>, Failure> {
    let invalid_config = |message: String| (ResponseError::InvalidConfig, message);
    let mut keys = Vec::new();
    let mut changes = Vec::new();
    for op in &resource.configs {
        let key = op.name.to_string();
        if keys.contains(&key) {
            return Err((
                ResponseError::InvalidRequest,
                format!("Error due to duplicate config keys: {key}"),
            ));
        }
        keys.push(key.clone());
        let def = topic_config::topic_config_def(&key)
            .ok_or_else(|| invalid_config(format!("Unknown topic config name: {key}")))?;
        let value = op.value.as_ref().map(|v| v.to_string());
        let new_value = match op.config_operation {
            SET => Some(value.ok_or_else(|| {
                (
                    ResponseError::InvalidRequest,
                    format!("Null value not supported for SET of {key}"),
                )
            })?),
            DELETE => None,
            APPEND | SUBTRACT => {
                if def.config_type != ConfigType::List {
                    return Err(invalid_config(format!(
                        "Config value append or subtract is not allowed for config key {key}"
                    )));
                }
                let base = current
                    .get(&key)
                    .cloned()
                    .unwrap_or_else(|| topic_config::default_value(&ctx.config, &key));
                let mut items: Vec<String> = split_list(&base);
                let operand = split_list(value.as_deref().unwrap_or(""));
                if op.config_operation == APPEND {
                    for item in operand {
                        if !items.contains(&item) {
                            items.push(item);
                        }
                    }
                } else {
                    items.retain(|item| !operand.contains(item));
                }
                Some(items.join(","))
            }
            other => {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("unknown config operation {other} for {key}"),
                ))
            }
        };
        if let Some(v) = &new_value {
            check_topic_config(&key, v)?;
        }
        changes.push((key, new_value));
    }
    Ok(changes)
}

fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}
