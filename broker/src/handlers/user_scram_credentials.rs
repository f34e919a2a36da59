//! DescribeUserScramCredentials (key 50) and AlterUserScramCredentials
//! (key 51), v0 (KIP-554): the SCRAM users of the metadata log, as
//! `kafka-configs --entity-type users --describe` and `--alter
//! --add-config 'SCRAM-SHA-256=[password=...]'` use them.
//!
//! Describe answers from this broker's metadata image (Kafka's
//! `ScramImage.describe`: no users named means every user; a user named
//! twice gets DUPLICATE_RESOURCE, one without credentials
//! RESOURCE_NOT_FOUND, each with Kafka's message naming the user).
//! Alter turns each upsertion's salted password into the stored and server
//! keys here, so the salted password never enters the metadata log, and
//! hands the rest to the controller
//! ([`MetadataController::alter_scram_credentials`](weir_controller::MetadataController::alter_scram_credentials),
//! Kafka's `ScramControlManager` rules). Neither checks authorization yet
//! (Kafka: Describe and Alter on the cluster), as no API does.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::ResponseError;
use weir_controller::{MetadataImage, ScramDeletion, ScramMechanism, ScramUpsertion};

use super::str_bytes;
use crate::context::BrokerContext;
use crate::error::controller_error_code;
use crate::network::scram;

/// Describes the SCRAM credentials (mechanism and iterations, never keys)
/// of the users named, or of every user.
pub fn describe(
    image: &MetadataImage,
    request: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    // User name to whether it was named more than once.
    let mut users: BTreeMap<String, bool> = BTreeMap::new();
    match request.users.as_deref() {
        None | Some([]) => {
            users.extend(image.scram_credentials.keys().map(|u| (u.clone(), false)));
        }
        Some(named) => {
            for user in named {
                *users.entry(user.name.to_string()).or_default() |=
                    users.contains_key(user.name.as_str());
            }
        }
    }
    let mut response = DescribeUserScramCredentialsResponse::default();
    for (user, duplicate) in users {
        let mut result = DescribeUserScramCredentialsResult::default();
        result.user = str_bytes(user.clone());
        if duplicate {
            result.error_code = ResponseError::DuplicateResource.code();
            result.error_message = Some(str_bytes(format!(
                "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
            )));
        } else if let Some(credentials) = image.scram_credentials.get(&user) {
            result.credential_infos = credentials
                .iter()
                .map(|(mechanism, credential)| {
                    let mut info = CredentialInfo::default();
                    info.mechanism = mechanism.type_id();
                    info.iterations = credential.iterations;
                    info
                })
                .collect();
        } else {
            result.error_code = ResponseError::ResourceNotFound.code();
            result.error_message = Some(str_bytes(format!(
                "Attempt to describe a user credential that does not exist: {user}"
            )));
        }
        response.results.push(result);
    }
    response
}

/// Deletes and sets SCRAM credentials through the controller; one result
/// per user named.
pub async fn alter(
    ctx: &BrokerContext,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let deletions = request
        .deletions
        .iter()
        .map(|d| ScramDeletion {
            name: d.name.to_string(),
            mechanism: d.mechanism,
        })
        .collect();
    let upsertions = request
        .upsertions
        .iter()
        .map(|u| ScramUpsertion {
            name: u.name.to_string(),
            mechanism: u.mechanism,
            credential: ScramMechanism::from_type_id(u.mechanism).map(|mechanism| {
                scram::credential(mechanism, &u.salted_password, &u.salt, u.iterations)
            }),
        })
        .collect();
    let results = ctx
        .controller
        .alter_scram_credentials(deletions, upsertions)
        .await;
    let mut response = AlterUserScramCredentialsResponse::default();
    response.results = results
        .into_iter()
        .map(|(user, outcome)| {
            let mut result = AlterUserScramCredentialsResult::default();
            result.user = str_bytes(user);
            if let Err(e) = outcome {
                result.error_code = controller_error_code(&e);
                result.error_message = Some(str_bytes(e.to_string()));
            }
            result
        })
        .collect();
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use weir_controller::{ScramCredential, UserScramCredentialRecord};

    fn image_with(users: &[(&str, ScramMechanism, i32)]) -> MetadataImage {
        let mut image = MetadataImage::new("c");
        for (name, mechanism, iterations) in users {
            image
                .apply(&weir_controller::MetadataRecord::UserScramCredential(
                    UserScramCredentialRecord {
                        name: name.to_string(),
                        mechanism: *mechanism,
                        credential: ScramCredential {
                            salt: vec![1],
                            stored_key: vec![2],
                            server_key: vec![3],
                            iterations: *iterations,
                        },
                    },
                ))
                .unwrap();
        }
        image
    }

    fn request(users: Option<&[&str]>) -> DescribeUserScramCredentialsRequest {
        let mut request = DescribeUserScramCredentialsRequest::default();
        request.users = users.map(|names| {
            names
                .iter()
                .map(|n| {
                    let mut u = UserName::default();
                    u.name = str_bytes(*n);
                    u
                })
                .collect()
        });
        request
    }

    #[test]
    fn describe_lists_mechanisms_and_iterations_and_kafkas_errors() {
        let image = image_with(&[
            ("alice", ScramMechanism::ScramSha256, 4096),
            ("alice", ScramMechanism::ScramSha512, 8192),
            ("bob", ScramMechanism::ScramSha512, 4096),
        ]);
        let all = describe(&image, &request(None));
        let users: Vec<&str> = all.results.iter().map(|r| r.user.as_str()).collect();
        assert_eq!(users, ["alice", "bob"]);
        let alice: Vec<(i8, i32)> = all.results[0]
            .credential_infos
            .iter()
            .map(|c| (c.mechanism, c.iterations))
            .collect();
        assert_eq!(alice, [(1, 4096), (2, 8192)]);

        let named = describe(&image, &request(Some(&["bob", "carol", "bob"])));
        let got: Vec<(&str, i16, Option<&str>)> = named
            .results
            .iter()
            .map(|r| (r.user.as_str(), r.error_code, r.error_message.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "bob",
                    92,
                    Some("Cannot describe SCRAM credentials for the same user twice in a single request: bob")
                ),
                (
                    "carol",
                    91,
                    Some("Attempt to describe a user credential that does not exist: carol")
                ),
            ]
        );
    }
}
