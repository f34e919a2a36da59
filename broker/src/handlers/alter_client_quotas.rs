//! AlterClientQuotas (key 49), v0-1 (KIP-546): sets and removes client
//! quotas in the metadata log, as `kafka-configs --alter --entity-type
//! users|clients --add-config producer_byte_rate=...` sends them.
//!
//! Each entry's entity is checked as Kafka's
//! `ClientQuotaControlManager.validateEntity` (an empty entity, a type
//! named twice, a type other than `user`, `client-id` and `ip` get
//! INVALID_REQUEST); the rest is the controller's
//! ([`weir_controller::control::alter_client_quotas`]). `validate_only`
//! checks against the current image and writes nothing. One answer per
//! entity, in request order; the cluster AlterConfigs permission is
//! checked before, in dispatch.

use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use kafka_protocol::ResponseError;
use weir_controller::control::QuotaAlteration;
use weir_controller::quota::{EntityName, QuotaEntity, CLIENT_ID, IP, USER};
use weir_controller::ControllerError;

use super::str_bytes;
use crate::context::BrokerContext;
use crate::error::controller_error_code;

/// One entity's answer: the entity, its parts as sent, and its result
/// when known before the controller (an entity that does not parse).
type Answer = (
    QuotaEntity,
    Vec<EntityData>,
    Option<Result<(), ControllerError>>,
);

/// Applies (or, with `validate_only`, checks) the request's alterations.
pub async fn handle(
    ctx: &BrokerContext,
    request: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let mut answers: Vec<Answer> = Vec::new();
    let mut alterations = Vec::new();
    for entry in &request.entries {
        let wire: Vec<EntityData> = entry
            .entity
            .iter()
            .map(|part| {
                let mut d = EntityData::default();
                d.entity_type = part.entity_type.clone();
                d.entity_name = part.entity_name.clone();
                d
            })
            .collect();
        let parsed = parse_entity(
            entry
                .entity
                .iter()
                .map(|p| (p.entity_type.as_str(), p.entity_name.as_deref())),
        );
        match parsed {
            Err(reason) => answers.push((
                QuotaEntity::default(),
                wire,
                Some(Err(ControllerError::InvalidRequest { reason })),
            )),
            Ok(entity) => {
                if !answers.iter().any(|(e, _, r)| r.is_none() && *e == entity) {
                    answers.push((entity.clone(), wire, None));
                }
                alterations.push(QuotaAlteration {
                    entity,
                    ops: entry
                        .ops
                        .iter()
                        .map(|op| (op.key.to_string(), (!op.remove).then_some(op.value)))
                        .collect(),
                });
            }
        }
    }
    let results = if alterations.is_empty() {
        Vec::new()
    } else if request.validate_only {
        weir_controller::control::alter_client_quotas(&ctx.metadata(), &alterations).response
    } else {
        ctx.controller.alter_client_quotas(alterations).await
    };
    let mut response = AlterClientQuotasResponse::default();
    response.entries = answers
        .into_iter()
        .map(|(entity, wire, result)| {
            let result = result.unwrap_or_else(|| {
                results
                    .iter()
                    .find(|(e, _)| *e == entity)
                    .map_or(Ok(()), |(_, r)| r.clone())
            });
            let mut e = EntryData::default();
            e.entity = wire;
            e.error_message = None;
            if let Err(error) = result {
                let (code, message) = match error {
                    ControllerError::InvalidRequest { reason } => {
                        (ResponseError::InvalidRequest.code(), reason)
                    }
                    other => (controller_error_code(&other), other.to_string()),
                };
                e.error_code = code;
                e.error_message = Some(str_bytes(message));
            }
            e
        })
        .collect();
    response
}

/// The entity of (type, nullable name) parts, or Kafka's INVALID_REQUEST
/// message (`ClientQuotaControlManager.validateEntity`).
pub fn parse_entity<'a>(
    parts: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> Result<QuotaEntity, String> {
    let mut entity = QuotaEntity::default();
    let mut any = false;
    for (entity_type, name) in parts {
        any = true;
        let slot = match entity_type {
            USER => &mut entity.user,
            CLIENT_ID => &mut entity.client_id,
            IP => &mut entity.ip,
            other => return Err(format!("Unhandled client quota entity type: {other}")),
        };
        if slot.is_some() {
            return Err(format!(
                "Invalid client quota entity, duplicate entity entry {entity_type}"
            ));
        }
        *slot = Some(EntityName::from_option(name));
    }
    if !any {
        return Err("Invalid empty client quota entity".into());
    }
    Ok(entity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_are_parsed_as_kafka() {
        let e = parse_entity([("user", Some("alice")), ("client-id", None)].into_iter()).unwrap();
        assert_eq!(e.user, Some(EntityName::Named("alice".into())));
        assert_eq!(e.client_id, Some(EntityName::Default));
        assert_eq!(
            parse_entity([("user", None), ("user", Some("a"))].into_iter()).unwrap_err(),
            "Invalid client quota entity, duplicate entity entry user"
        );
        assert_eq!(
            parse_entity([("group", Some("g"))].into_iter()).unwrap_err(),
            "Unhandled client quota entity type: group"
        );
        assert_eq!(
            parse_entity(std::iter::empty()).unwrap_err(),
            "Invalid empty client quota entity"
        );
    }
}
