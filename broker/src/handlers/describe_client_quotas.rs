//! DescribeClientQuotas (key 48), v0-1 (KIP-546): the client quotas that
//! match a filter, as `kafka-configs --describe --entity-type
//! users|clients` asks them (it asks before it describes SCRAM users).
//!
//! The quotas are the metadata image's (set with AlterClientQuotas); the
//! entities a filter selects are answered with all their values, as
//! Kafka's `ClientQuotasImage.describe`: an exact component (match type 0)
//! wants that name, a default one (1) the default entity, a specified one
//! (2) any entity with that type; `strict` wants no other types. A filter
//! Kafka refuses gets INVALID_REQUEST as in
//! Kafka's `ClientQuotaCache.describeClientQuotas`: a match type other
//! than 0 (exact, with a name), 1 (default, without one) or 2 (any), an
//! entity type other than `user`, `client-id` and `ip`, an entity type
//! named twice, or `ip` together with `user` or `client-id`.

use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::ResponseError;
use weir_controller::quota::{EntityName, QuotaEntity};
use weir_controller::MetadataImage;

use super::str_bytes;

/// Kafka's entity types (`ClientQuotaEntity.USER`, `CLIENT_ID`, `IP`).
const ENTITY_TYPES: [&str; 3] = ["user", "client-id", "ip"];

/// Answers the filter from `image`, or INVALID_REQUEST for a filter Kafka
/// refuses.
pub fn handle(
    image: &MetadataImage,
    request: &DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let mut response = DescribeClientQuotasResponse::default();
    match check_filter(request) {
        Ok(()) => {
            response.error_message = None;
            response.entries = Some(
                image
                    .client_quotas
                    .0
                    .iter()
                    .filter(|(entity, _)| matches(entity, request))
                    .map(|(entity, values)| {
                        let mut e = EntryData::default();
                        e.entity = entity
                            .parts()
                            .into_iter()
                            .map(|(entity_type, name)| {
                                let mut d = EntityData::default();
                                d.entity_type = str_bytes(entity_type);
                                d.entity_name = name.as_option().map(str_bytes);
                                d
                            })
                            .collect();
                        e.values = values
                            .iter()
                            .map(|(key, value)| {
                                let mut v = ValueData::default();
                                v.key = str_bytes(key.clone());
                                v.value = value.0;
                                v
                            })
                            .collect();
                        e
                    })
                    .collect(),
            );
        }
        Err(message) => {
            response.entries = None;
            response.error_code = ResponseError::InvalidRequest.code();
            response.error_message = Some(str_bytes(message));
        }
    }
    response
}

/// Kafka's `ClientQuotasImage.matches` for a checked filter.
fn matches(entity: &QuotaEntity, request: &DescribeClientQuotasRequest) -> bool {
    if request.strict && entity.parts().len() != request.components.len() {
        return false;
    }
    request.components.iter().all(
        |c| match (entity.part(c.entity_type.as_str()), c.match_type) {
            (None, _) => false,
            (Some(name), 0) => name.as_option() == c._match.as_deref(),
            (Some(name), 1) => *name == EntityName::Default,
            (Some(_), _) => true,
        },
    )
}

fn check_filter(request: &DescribeClientQuotasRequest) -> Result<(), String> {
    let mut seen: Vec<&str> = Vec::new();
    for component in &request.components {
        let entity_type = component.entity_type.as_str();
        if entity_type.is_empty() {
            return Err("Unexpected empty filter component entity type".into());
        }
        if !ENTITY_TYPES.contains(&entity_type) {
            return Err(format!("Custom entity type {entity_type} not supported"));
        }
        if seen.contains(&entity_type) {
            return Err(format!(
                "Duplicate {entity_type} filter component entity type"
            ));
        }
        seen.push(entity_type);
        match (component.match_type, &component._match) {
            (0, Some(_)) | (1, None) | (2, None) => {}
            (0..=2, _) => {
                return Err(format!(
                    "Invalid match for match type {} of entity type {entity_type}",
                    component.match_type
                ))
            }
            (other, _) => return Err(format!("Invalid match type {other}")),
        }
    }
    if seen.contains(&"ip") && seen.len() > 1 {
        return Err(
            "Invalid entity filter component combination, IP filter component should \
                    not be used with user or clientId filter component."
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
    use kafka_protocol::protocol::StrBytes;

    fn component(
        entity_type: &'static str,
        match_type: i8,
        name: Option<&'static str>,
    ) -> ComponentData {
        let mut c = ComponentData::default();
        c.entity_type = StrBytes::from_static_str(entity_type);
        c.match_type = match_type;
        c._match = name.map(StrBytes::from_static_str);
        c
    }

    fn answer(components: Vec<ComponentData>) -> DescribeClientQuotasResponse {
        let mut request = DescribeClientQuotasRequest::default();
        request.components = components;
        handle(&MetadataImage::default(), &request)
    }

    #[test]
    fn filters_select_entities_as_kafka() {
        use weir_controller::quota::QuotaValue;
        let mut image = MetadataImage::default();
        let named = |s: &str| Some(EntityName::Named(s.into()));
        for (user, client_id) in [
            (named("alice"), None),
            (Some(EntityName::Default), None),
            (named("alice"), named("app")),
            (None, named("app")),
        ] {
            image
                .client_quotas
                .0
                .entry(QuotaEntity {
                    user,
                    client_id,
                    ip: None,
                })
                .or_default()
                .insert("producer_byte_rate".into(), QuotaValue(1024.0));
        }
        let count = |components: Vec<ComponentData>, strict: bool| {
            let mut request = DescribeClientQuotasRequest::default();
            request.components = components;
            request.strict = strict;
            handle(&image, &request).entries.map(|e| e.len())
        };
        assert_eq!(
            count(vec![component("user", 0, Some("alice"))], false),
            Some(2)
        );
        assert_eq!(
            count(vec![component("user", 0, Some("alice"))], true),
            Some(1)
        );
        assert_eq!(count(vec![component("user", 1, None)], false), Some(1));
        assert_eq!(count(vec![component("user", 2, None)], true), Some(2));
        assert_eq!(count(vec![component("client-id", 2, None)], false), Some(2));
        assert_eq!(count(vec![], false), Some(4));
    }

    #[test]
    fn valid_filters_match_nothing_and_bad_ones_are_invalid_requests() {
        for ok in [
            vec![],
            vec![component("user", 0, Some("alice"))],
            vec![component("user", 1, None), component("client-id", 2, None)],
            vec![component("ip", 0, Some("127.0.0.1"))],
        ] {
            let r = answer(ok);
            assert_eq!((r.error_code, r.entries), (0, Some(Vec::new())));
        }
        for bad in [
            vec![component("group", 2, None)],
            vec![component("", 2, None)],
            vec![component("user", 0, None)],
            vec![component("user", 1, Some("alice"))],
            vec![component("user", 7, None)],
            vec![component("user", 2, None), component("user", 2, None)],
            vec![component("ip", 2, None), component("user", 2, None)],
        ] {
            let r = answer(bad);
            assert_eq!(r.error_code, 42, "{r:?}");
            assert!(r.entries.is_none());
        }
    }
}
