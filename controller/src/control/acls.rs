//! ACLs: Kafka's `AclControlManager.createAcls` and `deleteAcls`.

use std::collections::BTreeSet;

use crate::acl::{validate_new_acl, AclBindingFilter, AclId, StandardAcl};
use crate::error::ControllerError;
use crate::image::MetadataImage;
use crate::records::{AccessControlEntryRecord, MetadataRecord, RemoveAccessControlEntryRecord};

use super::{ControllerResult, MAX_RECORDS_PER_USER_OP};

/// Creates `acls`, as Kafka's `AclControlManager.createAcls`: one result
/// per ACL in request order; an invalid ACL gets INVALID_REQUEST with
/// Kafka's message ([`validate_new_acl`]); an ACL that exists already, or
/// twice in the request, succeeds without a second record. Each new ACL
/// gets a fresh random id.
///
/// # Errors
///
/// [`ControllerError::PolicyViolation`] when the request would write more
/// than [`MAX_RECORDS_PER_USER_OP`] records (Kafka's bounded list).
pub fn create_acls(
    image: &MetadataImage,
    acls: &[StandardAcl],
) -> Result<ControllerResult<Vec<Result<(), ControllerError>>>, ControllerError> {
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(acls.len());
    let mut added: BTreeSet<&StandardAcl> = BTreeSet::new();
    let mut used_ids: BTreeSet<AclId> = BTreeSet::new();
    for acl in acls {
        if let Err(reason) = validate_new_acl(acl) {
            results.push(Err(ControllerError::InvalidRequest { reason }));
            continue;
        }
        if !image.acls.contains(acl) && added.insert(acl) {
            let id = loop {
                let id = crate::determinism::uuid_v4();
                if image.acls.get(&id).is_none() && used_ids.insert(id) {
                    break id;
                }
            };
            records.push(MetadataRecord::AccessControlEntry(
                AccessControlEntryRecord {
                    id,
                    acl: acl.clone(),
                },
            ));
            if records.len() > MAX_RECORDS_PER_USER_OP {
                return Err(too_many());
            }
        }
        results.push(Ok(()));
    }
    Ok(ControllerResult {
        records,
        response: results,
    })
}

/// The ACLs one DeleteAcls filter removed, or why the filter was refused.
pub type AclDeleteResult = Result<Vec<StandardAcl>, ControllerError>;

/// Deletes the ACLs `filters` select, as Kafka's
/// `AclControlManager.deleteAcls`: one result per filter (the ACLs it
/// matched, which may overlap another filter's); a filter with an unknown
/// element gets INVALID_REQUEST ("Unknown patternFilter." / "Unknown
/// entryFilter."). The removals of all filters commit as one batch.
///
/// # Errors
///
/// [`ControllerError::PolicyViolation`] when more than
/// [`MAX_RECORDS_PER_USER_OP`] ACLs would be removed ("Cannot remove more
/// than 10000 acls in a single delete operation.").
pub fn delete_acls(
    image: &MetadataImage,
    filters: &[AclBindingFilter],
) -> Result<ControllerResult<Vec<AclDeleteResult>>, ControllerError> {
    let mut removed: BTreeSet<AclId> = BTreeSet::new();
    let mut results = Vec::with_capacity(filters.len());
    for filter in filters {
        if filter.resource_type == crate::acl::AclResourceType::Unknown
            || filter.pattern_type == crate::acl::PatternType::Unknown
        {
            results.push(Err(ControllerError::InvalidRequest {
                reason: "Unknown patternFilter.".into(),
            }));
            continue;
        }
        if filter.is_unknown() {
            results.push(Err(ControllerError::InvalidRequest {
                reason: "Unknown entryFilter.".into(),
            }));
            continue;
        }
        let mut matched = Vec::new();
        for (id, acl) in image.acls.iter() {
            if filter.matches(acl) {
                matched.push(acl.clone());
                removed.insert(*id);
                if removed.len() > MAX_RECORDS_PER_USER_OP {
                    return Err(ControllerError::PolicyViolation {
                        reason: format!(
                            "Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single \
                             delete operation."
                        ),
                    });
                }
            }
        }
        results.push(Ok(matched));
    }
    let records = removed
        .into_iter()
        .map(|id| MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord { id }))
        .collect();
    Ok(ControllerResult {
        records,
        response: results,
    })
}

fn too_many() -> ControllerError {
    ControllerError::PolicyViolation {
        reason: "Unable to perform excessively large batch operation.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::{AclOperation, AclPermissionType, AclResourceType, PatternType};

    fn acl(name: &str, principal: &str) -> StandardAcl {
        StandardAcl {
            resource_type: AclResourceType::Topic,
            resource_name: name.into(),
            pattern_type: PatternType::Literal,
            principal: principal.into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission_type: AclPermissionType::Allow,
        }
    }

    fn replayed(image: &MetadataImage, records: &[MetadataRecord]) -> MetadataImage {
        let mut next = image.clone();
        for record in records {
            next.apply(record).unwrap();
        }
        next
    }

    #[test]
    fn creation_is_idempotent_and_validates() {
        let image = MetadataImage::default();
        let mut bad = acl("t", "User:a");
        bad.operation = AclOperation::Any;
        let request = [acl("t", "User:a"), acl("t", "User:a"), bad];
        let created = create_acls(&image, &request).unwrap();
        assert_eq!(created.records.len(), 1);
        assert_eq!(created.response[0], Ok(()));
        assert_eq!(created.response[1], Ok(()));
        assert_eq!(
            created.response[2],
            Err(ControllerError::InvalidRequest {
                reason: "Invalid operation ANY".into()
            })
        );
        let image = replayed(&image, &created.records);
        assert_eq!(image.acls.len(), 1);
        let again = create_acls(&image, &request[..1]).unwrap();
        assert!(again.records.is_empty());
        assert_eq!(again.response, vec![Ok(())]);
    }

    #[test]
    fn deletion_removes_what_each_filter_matches_once() {
        let image = MetadataImage::default();
        let created = create_acls(&image, &[acl("t", "User:a"), acl("u", "User:b")]).unwrap();
        let image = replayed(&image, &created.records);
        let all = AclBindingFilter {
            resource_type: AclResourceType::Any,
            resource_name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission_type: AclPermissionType::Any,
        };
        let only_a = AclBindingFilter {
            principal: Some("User:a".into()),
            ..all.clone()
        };
        let mut unknown = all.clone();
        unknown.operation = AclOperation::Unknown;
        let deleted = delete_acls(&image, &[only_a, all, unknown]).unwrap();
        assert_eq!(deleted.records.len(), 2);
        assert_eq!(deleted.response[0].as_ref().unwrap().len(), 1);
        assert_eq!(deleted.response[1].as_ref().unwrap().len(), 2);
        assert_eq!(
            deleted.response[2],
            Err(ControllerError::InvalidRequest {
                reason: "Unknown entryFilter.".into()
            })
        );
        assert!(replayed(&image, &deleted.records).acls.is_empty());
    }
}
