//! SCRAM credentials (KIP-554): Kafka's `ScramControlManager.alterCredentials`.

use std::collections::BTreeMap;

use crate::error::ControllerError;
use crate::image::MetadataImage;
use crate::records::{
    MetadataRecord, RemoveUserScramCredentialRecord, ScramCredential, ScramMechanism,
    UserScramCredentialRecord,
};

use super::ControllerResult;

/// One deletion of an AlterUserScramCredentials request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScramDeletion {
    /// The user name.
    pub name: String,
    /// The mechanism's type id as the client sent it (1 SCRAM-SHA-256,
    /// 2 SCRAM-SHA-512; anything else is refused).
    pub mechanism: i8,
}

/// One upsertion of an AlterUserScramCredentials request, with the
/// client's salted password already turned into the stored and server keys
/// by the broker (Kafka's controller does that step in `finishUpsertion`;
/// here the salted password never enters the metadata quorum).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScramUpsertion {
    /// The user name.
    pub name: String,
    /// The mechanism's type id as the client sent it.
    pub mechanism: i8,
    /// The credential (its `iterations` as the client sent them); `None`
    /// when the mechanism is unknown, so no keys could be derived.
    pub credential: Option<ScramCredential>,
}

/// The outcome for one user of an AlterUserScramCredentials request.
pub type ScramAlterResult = (String, Result<(), ControllerError>);

/// Validates an AlterUserScramCredentials request and returns the records
/// of its accepted parts and one result per user, as Kafka's
/// `ScramControlManager.alterCredentials`:
/// - a user named by more than one deletion or upsertion (whatever the
///   mechanisms) gets DUPLICATE_RESOURCE "A user credential cannot be
///   altered twice in the same request", and none of its alterations is
///   made;
/// - an empty name gets UNACCEPTABLE_CREDENTIAL "Username must not be
///   empty", an unknown mechanism UNSUPPORTED_SASL_MECHANISM "Unknown SCRAM
///   mechanism";
/// - upsertions need 4096 to 16384 iterations (UNACCEPTABLE_CREDENTIAL "Too
///   few iterations" / "Too many iterations");
/// - a deletion of a credential that does not exist gets RESOURCE_NOT_FOUND
///   "Attempt to delete a user credential that does not exist".
///
/// Results list deletions, then upsertions, then errors (Kafka's order);
/// the records of one request are committed atomically.
pub fn alter_scram_credentials(
    image: &MetadataImage,
    deletions: &[ScramDeletion],
    upsertions: &[ScramUpsertion],
) -> ControllerResult<Vec<ScramAlterResult>> {
    let mut errors: BTreeMap<String, ControllerError> = BTreeMap::new();
    let mut deleted: BTreeMap<String, ScramMechanism> = BTreeMap::new();
    let mut upserted: BTreeMap<String, (ScramMechanism, ScramCredential)> = BTreeMap::new();
    let duplicate = || ControllerError::DuplicateResource {
        reason: "A user credential cannot be altered twice in the same request".into(),
    };
    for deletion in deletions {
        if errors.contains_key(&deletion.name) {
            continue;
        }
        if deleted.remove(&deletion.name).is_some() {
            errors.insert(deletion.name.clone(), duplicate());
            continue;
        }
        match validate_name_and_mechanism(&deletion.name, deletion.mechanism) {
            Err(e) => {
                errors.insert(deletion.name.clone(), e);
            }
            Ok(mechanism) => {
                let exists = image
                    .scram_credentials
                    .get(&deletion.name)
                    .is_some_and(|m| m.contains_key(&mechanism));
                if exists {
                    deleted.insert(deletion.name.clone(), mechanism);
                } else {
                    errors.insert(
                        deletion.name.clone(),
                        ControllerError::ResourceNotFound {
                            reason: "Attempt to delete a user credential that does not exist"
                                .into(),
                        },
                    );
                }
            }
        }
    }
    for upsertion in upsertions {
        if errors.contains_key(&upsertion.name) {
            continue;
        }
        if deleted.remove(&upsertion.name).is_some() || upserted.remove(&upsertion.name).is_some() {
            errors.insert(upsertion.name.clone(), duplicate());
            continue;
        }
        let valid = validate_name_and_mechanism(&upsertion.name, upsertion.mechanism).and_then(
            |mechanism| {
                let credential = upsertion.credential.clone().ok_or_else(|| {
                    ControllerError::UnsupportedSaslMechanism {
                        reason: "Unknown SCRAM mechanism".into(),
                    }
                })?;
                if credential.iterations < ScramMechanism::MIN_ITERATIONS {
                    Err(unacceptable("Too few iterations"))
                } else if credential.iterations > ScramMechanism::MAX_ITERATIONS {
                    Err(unacceptable("Too many iterations"))
                } else {
                    Ok((mechanism, credential))
                }
            },
        );
        match valid {
            Ok(credential) => {
                upserted.insert(upsertion.name.clone(), credential);
            }
            Err(e) => {
                errors.insert(upsertion.name.clone(), e);
            }
        }
    }
    let mut records = Vec::new();
    let mut results = Vec::new();
    for (name, mechanism) in deleted {
        records.push(MetadataRecord::RemoveUserScramCredential(
            RemoveUserScramCredentialRecord {
                name: name.clone(),
                mechanism,
            },
        ));
        results.push((name, Ok(())));
    }
    for (name, (mechanism, credential)) in upserted {
        records.push(MetadataRecord::UserScramCredential(
            UserScramCredentialRecord {
                name: name.clone(),
                mechanism,
                credential,
            },
        ));
        results.push((name, Ok(())));
    }
    results.extend(errors.into_iter().map(|(name, e)| (name, Err(e))));
    ControllerResult {
        records,
        response: results,
    }
}

fn unacceptable(reason: &str) -> ControllerError {
    ControllerError::UnacceptableCredential {
        reason: reason.into(),
    }
}

/// Kafka's `validateScramUsernameAndMechanism`.
fn validate_name_and_mechanism(
    name: &str,
    mechanism: i8,
) -> Result<ScramMechanism, ControllerError> {
    if name.is_empty() {
        return Err(unacceptable("Username must not be empty"));
    }
    ScramMechanism::from_type_id(mechanism).ok_or_else(|| {
        ControllerError::UnsupportedSaslMechanism {
            reason: "Unknown SCRAM mechanism".into(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(iterations: i32) -> Option<ScramCredential> {
        Some(ScramCredential {
            salt: vec![1; 16],
            stored_key: vec![2; 32],
            server_key: vec![3; 32],
            iterations,
        })
    }

    fn upsert(name: &str, mechanism: i8, iterations: i32) -> ScramUpsertion {
        ScramUpsertion {
            name: name.into(),
            mechanism,
            credential: credential(iterations),
        }
    }

    fn codes(results: &[ScramAlterResult]) -> Vec<(String, Option<String>)> {
        results
            .iter()
            .map(|(n, r)| (n.clone(), r.as_ref().err().map(|e| e.to_string())))
            .collect()
    }

    fn applied(
        image: &MetadataImage,
        result: &ControllerResult<Vec<ScramAlterResult>>,
    ) -> MetadataImage {
        let mut next = image.clone();
        for record in &result.records {
            next.apply(record).unwrap();
        }
        next
    }

    #[test]
    fn upsertions_and_deletions_become_records_that_replay_into_the_image() {
        let image = MetadataImage::new("c");
        let result = alter_scram_credentials(
            &image,
            &[],
            &[upsert("alice", 1, 4096), upsert("bob", 2, 8192)],
        );
        assert_eq!(
            codes(&result.response),
            [("alice".into(), None), ("bob".into(), None)]
        );
        let image = applied(&image, &result);
        assert_eq!(
            image.scram_credentials["alice"][&ScramMechanism::ScramSha256],
            credential(4096).unwrap()
        );
        assert_eq!(
            image.scram_credentials["bob"][&ScramMechanism::ScramSha512].iterations,
            8192
        );
        let deletion = ScramDeletion {
            name: "alice".into(),
            mechanism: 1,
        };
        let result = alter_scram_credentials(&image, &[deletion], &[]);
        assert_eq!(codes(&result.response), [("alice".into(), None)]);
        let image = applied(&image, &result);
        assert!(!image.scram_credentials.contains_key("alice"));
        assert!(image.scram_credentials.contains_key("bob"));
    }

    #[test]
    fn refusals_use_kafkas_errors_and_write_nothing_for_that_user() {
        let image = MetadataImage::new("c");
        let result = alter_scram_credentials(
            &image,
            &[
                ScramDeletion {
                    name: "ghost".into(),
                    mechanism: 1,
                },
                // A failed deletion's user is not looked at again.
                ScramDeletion {
                    name: "gone".into(),
                    mechanism: 1,
                },
            ],
            &[
                upsert("gone", 1, 4096),
                upsert("twice", 1, 4096),
                upsert("twice", 2, 4096),
                upsert("", 1, 4096),
                upsert("md5", 9, 4096),
                upsert("few", 1, 4095),
                upsert("many", 2, 16385),
                ScramUpsertion {
                    name: "nokeys".into(),
                    mechanism: 1,
                    credential: None,
                },
                upsert("ok", 1, 16384),
            ],
        );
        let got: BTreeMap<String, Option<String>> = codes(&result.response).into_iter().collect();
        let message = |s: &str| Some(s.to_string());
        assert_eq!(got[""], message("Username must not be empty"));
        assert_eq!(
            got["ghost"],
            message("Attempt to delete a user credential that does not exist")
        );
        assert_eq!(
            got["twice"],
            message("A user credential cannot be altered twice in the same request")
        );
        assert_eq!(got["md5"], message("Unknown SCRAM mechanism"));
        assert_eq!(got["nokeys"], message("Unknown SCRAM mechanism"));
        assert_eq!(got["few"], message("Too few iterations"));
        assert_eq!(got["many"], message("Too many iterations"));
        assert_eq!(got["ok"], None);
        assert_eq!(result.records.len(), 1, "only ok's credential is written");
    }
}
