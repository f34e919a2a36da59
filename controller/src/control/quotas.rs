//! Client quotas: Kafka's `ClientQuotaControlManager.alterClientQuotas`.

use std::collections::BTreeMap;

use crate::error::ControllerError;
use crate::image::MetadataImage;
use crate::quota::{keys_for_entity, validate_value, QuotaEntity, QuotaValue};
use crate::records::{ClientQuotaRecord, MetadataRecord};

use super::ControllerResult;

/// One entity's alteration of an AlterClientQuotas request: each key set
/// to a value, or removed (`None`), in request order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QuotaAlteration {
    /// The entity.
    pub entity: QuotaEntity,
    /// (key, value or `None` to remove).
    pub ops: Vec<(String, Option<f64>)>,
}

/// The outcome for one entity of an AlterClientQuotas request.
pub type QuotaAlterResult = (QuotaEntity, Result<(), ControllerError>);

/// Validates the alterations and returns the records of the accepted ones
/// and one result per entity (first occurrence order), as Kafka's
/// `ClientQuotaControlManager.alterClientQuotas`: a key named twice
/// ("Duplicate quota key <k> not updating quota for this entity <e>") or
/// an entity named twice ("Ignoring duplicate entity <e>") gets
/// INVALID_REQUEST, as do entity combinations and values Kafka refuses
/// ([`keys_for_entity`], [`validate_value`]); an entity's alterations are
/// all or nothing; a value equal to the current one and the removal of a
/// key not set write no record. The records of one request commit as one
/// batch.
pub fn alter_client_quotas(
    image: &MetadataImage,
    alterations: &[QuotaAlteration],
) -> ControllerResult<Vec<QuotaAlterResult>> {
    let invalid = |reason: String| Err(ControllerError::InvalidRequest { reason });
    let mut order: Vec<QuotaEntity> = Vec::new();
    let mut results: BTreeMap<QuotaEntity, Result<(), ControllerError>> = BTreeMap::new();
    let mut records_by_entity: BTreeMap<QuotaEntity, Vec<MetadataRecord>> = BTreeMap::new();
    for alteration in alterations {
        let entity = &alteration.entity;
        if !order.contains(entity) {
            order.push(entity.clone());
        }
        let mut ops: BTreeMap<&str, Option<f64>> = BTreeMap::new();
        let mut duplicate_key = None;
        for (key, value) in &alteration.ops {
            if ops.insert(key.as_str(), *value).is_some() {
                duplicate_key = Some(key.clone());
            }
        }
        if let Some(key) = duplicate_key {
            records_by_entity.remove(entity);
            results.insert(
                entity.clone(),
                invalid(format!(
                    "Duplicate quota key {key} not updating quota for this entity {entity}"
                )),
            );
            continue;
        }
        if results.contains_key(entity) {
            records_by_entity.remove(entity);
            results.insert(
                entity.clone(),
                invalid(format!("Ignoring duplicate entity {entity}")),
            );
            continue;
        }
        let keys = match keys_for_entity(entity) {
            Ok(keys) => keys,
            Err(reason) => {
                results.insert(entity.clone(), invalid(reason));
                continue;
            }
        };
        let current = image.client_quotas.0.get(entity);
        let mut records = Vec::new();
        let mut refused = None;
        for (key, value) in ops {
            let now = current.and_then(|c| c.get(key));
            match value {
                None if now.is_some() => records.push(record(entity, key, 0.0, true)),
                None => {}
                Some(value) => match validate_value(keys, key, value) {
                    Err(reason) => {
                        refused = Some(reason);
                        break;
                    }
                    Ok(()) if now == Some(&QuotaValue(value)) => {}
                    Ok(()) => records.push(record(entity, key, value, false)),
                },
            }
        }
        match refused {
            Some(reason) => {
                results.insert(entity.clone(), invalid(reason));
            }
            None => {
                results.insert(entity.clone(), Ok(()));
                records_by_entity.insert(entity.clone(), records);
            }
        }
    }
    let records = order
        .iter()
        .filter_map(|e| records_by_entity.remove(e))
        .flatten()
        .collect();
    let response = order
        .into_iter()
        .map(|e| {
            let result = results.remove(&e).unwrap_or(Ok(()));
            (e, result)
        })
        .collect();
    ControllerResult { records, response }
}

fn record(entity: &QuotaEntity, key: &str, value: f64, remove: bool) -> MetadataRecord {
    MetadataRecord::ClientQuota(ClientQuotaRecord {
        entity: entity.clone(),
        key: key.to_string(),
        value: QuotaValue(value),
        remove,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::{EntityName, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE};

    fn client(name: &str) -> QuotaEntity {
        QuotaEntity {
            client_id: Some(EntityName::Named(name.into())),
            ..QuotaEntity::default()
        }
    }

    fn apply(image: &MetadataImage, records: &[MetadataRecord]) -> MetadataImage {
        let mut next = image.clone();
        for r in records {
            next.apply(r).unwrap();
        }
        next
    }

    #[test]
    fn set_change_and_remove() {
        let image = MetadataImage::default();
        let set = QuotaAlteration {
            entity: client("slow"),
            ops: vec![(PRODUCER_BYTE_RATE.into(), Some(1024.0))],
        };
        let r = alter_client_quotas(&image, std::slice::from_ref(&set));
        assert_eq!(r.response, vec![(client("slow"), Ok(()))]);
        let image = apply(&image, &r.records);
        assert_eq!(
            image.client_quotas.get(&client("slow"), PRODUCER_BYTE_RATE),
            Some(1024.0)
        );
        // The same value again writes nothing.
        assert!(alter_client_quotas(&image, &[set]).records.is_empty());
        let remove = QuotaAlteration {
            entity: client("slow"),
            ops: vec![(PRODUCER_BYTE_RATE.into(), None)],
        };
        let r = alter_client_quotas(&image, &[remove]);
        assert!(apply(&image, &r.records).client_quotas.is_empty());
    }

    #[test]
    fn refusals_are_per_entity_and_all_or_nothing() {
        let image = MetadataImage::default();
        let bad = QuotaAlteration {
            entity: client("a"),
            ops: vec![
                (REQUEST_PERCENTAGE.into(), Some(50.0)),
                (PRODUCER_BYTE_RATE.into(), Some(1.5)),
            ],
        };
        let dup_key = QuotaAlteration {
            entity: client("b"),
            ops: vec![
                (PRODUCER_BYTE_RATE.into(), Some(1.0)),
                (PRODUCER_BYTE_RATE.into(), Some(2.0)),
            ],
        };
        let good = QuotaAlteration {
            entity: client("c"),
            ops: vec![(PRODUCER_BYTE_RATE.into(), Some(2048.0))],
        };
        let r = alter_client_quotas(&image, &[bad, dup_key, good.clone(), good]);
        assert_eq!(r.response.len(), 3);
        assert!(r.response[0].1.is_err() && r.response[1].1.is_err());
        assert_eq!(
            r.response[2].1,
            Err(ControllerError::InvalidRequest {
                reason: "Ignoring duplicate entity ClientQuotaEntity(client-id=c)".into()
            })
        );
        assert!(r.records.is_empty());
    }
}
