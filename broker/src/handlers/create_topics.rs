//! CreateTopics (key 19), v2-7: validated here (configs) and in the
//! controller (names, partitions, replication factor), committed through the
//! metadata quorum, and answered once this node's image holds the topics,
//! as Kafka's `ControllerApis.createTopics` answers at commit. This node's
//! logs are created after the answer, by a task started at commit (other
//! replicas: their metadata follower, `server::follow_metadata`); a Produce
//! or Fetch that reaches this node's new partitions first waits for them
//! ([`crate::replica_manager::ReplicaManager::pending_leadership`]).
//! A CreateTopics first waits (within its `timeout_ms`) until this node has
//! applied the images before it, so that back-to-back creations go at the
//! pace of the log creation: at 100,000 partitions on a 2-core machine,
//! 100 CreateTopics of 1,000 answered at commit in 3.9 s left every node
//! creating 75,000 logs at once, the quorum missed heartbeats (20 terms)
//! and two nodes listed the partitions 31-40 s after the last answer.
//!
//! -1 partitions / replication factor mean the broker defaults
//! (`num.partitions`, `default.replication.factor`, KIP-464). v5+ answers
//! carry the topic's configs, partitions and replication factor; v7 the
//! topic id (KIP-516).
//!
//! `timeout_ms` is the controller's deadline, as in Kafka 4's
//! `ControllerApis.createTopics`: the request is queued with a deadline
//! `timeout_ms` after arrival, so 0 or less answers every topic
//! REQUEST_TIMED_OUT and creates nothing (checked against Kafka 4.1.2),
//! unless the request names nothing but duplicates (not queued; they get
//! INVALID_REQUEST). A success carries a null error message, as Kafka's.
//!
//! The controller mutation quota (KIP-599): the topics' partitions count
//! against the client's `controller_mutation_rate` on the active
//! controller (`weir_controller::mutation_quota`), strictly from v6 (a
//! topic over it gets THROTTLING_QUOTA_EXCEEDED) and permissively before
//! (Kafka's `ControllerApis.handleCreateTopics`, `strictSinceVersion = 6`);
//! the handler returns the throttle time the controller gave.
//!
//! Out of file descriptors (issue 15): a request that would leave fewer
//! than [`crate::descriptors::CREATION_HEADROOM`] free creates nothing and
//! answers KAFKA_STORAGE_ERROR (see [`crate::descriptors`]). A log that
//! still cannot be created after the commit is logged (error "creating
//! logs for new topics failed") and its partition is not served here
//! (Produce answers NOT_LEADER_OR_FOLLOWER), as a Kafka broker's partition
//! whose log creation failed.

use std::time::Duration;

use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::ResponseError;
use weir_controller::acl::{AclOperation, AclResourceType};
use weir_controller::CreatableTopic;

use super::describe_configs::topic_config_entries;
use super::{controller_deadline_passed, str_bytes};
use crate::client_quotas::QuotaClient;
use crate::context::BrokerContext;
use crate::error::controller_error_code;
use crate::topic_config;

/// The first CreateTopics version whose controller mutation quota is strict
/// (Kafka's `strictSinceVersion`).
const STRICT_QUOTA_SINCE_VERSION: i16 = 6;

/// Creates the requested topics; per-topic results in request order, and
/// the throttle time of `client`'s controller mutation quota.
pub async fn handle(
    ctx: &BrokerContext,
    version: i16,
    request: CreateTopicsRequest,
    auth: &crate::authorizer::RequestAuth<'_>,
    client: QuotaClient<'_>,
) -> (CreateTopicsResponse, Duration) {
    let mut response = CreateTopicsResponse::default();
    if controller_deadline_passed(
        request.timeout_ms,
        request.topics.iter().map(|t| t.name.0.as_str()),
    ) {
        response.topics = request
            .topics
            .iter()
            .map(|topic| {
                let mut result = CreatableTopicResult::default();
                result.name = topic.name.clone();
                result.num_partitions = -1;
                result.replication_factor = -1;
                result.error_code = ResponseError::RequestTimedOut.code();
                result.error_message = None;
                result
            })
            .collect();
        return (response, Duration::ZERO);
    }
    let mut results: Vec<Option<CreatableTopicResult>> = Vec::with_capacity(request.topics.len());
    let mut to_create = Vec::new();
    // Kafka's ControllerApis.createTopics: Create on the cluster, or else
    // on each topic; the configs are returned only with DescribeConfigs.
    let cluster_create = auth.allowed_quietly(
        AclOperation::Create,
        AclResourceType::Cluster,
        weir_controller::acl::CLUSTER_NAME,
    );
    let mut describable = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.name.to_string();
        let mut result = CreatableTopicResult::default();
        result.name = topic.name.clone();
        result.num_partitions = -1;
        result.replication_factor = -1;
        if !cluster_create && !auth.topic(AclOperation::Create, &name) {
            result.error_code = ResponseError::TopicAuthorizationFailed.code();
            result.error_message = Some(str_bytes("Authorization failed."));
            results.push(Some(result));
            continue;
        }
        let mut configs = Vec::new();
        let mut config_error = None;
        for c in &topic.configs {
            let Some(value) = c.value.as_ref() else {
                continue;
            };
            match topic_config::validate(&c.name, value) {
                Ok(()) => configs.push((c.name.to_string(), value.to_string())),
                Err(e) => {
                    config_error = Some(e.to_string());
                    break;
                }
            }
        }
        if let Some(message) = config_error {
            result.error_code = ResponseError::InvalidConfig.code();
            result.error_message = Some(str_bytes(message));
            results.push(Some(result));
            continue;
        }
        // With manual assignments the controller wants -1 as sent.
        let manual = !topic.assignments.is_empty();
        let num_partitions = if topic.num_partitions == -1 && !manual {
            ctx.config.num_partitions
        } else {
            topic.num_partitions
        };
        let replication_factor = if topic.replication_factor == -1 && !manual {
            ctx.config.default_replication_factor
        } else {
            topic.replication_factor
        };
        describable.push(auth.allowed_quietly(
            AclOperation::DescribeConfigs,
            AclResourceType::Topic,
            &name,
        ));
        to_create.push((
            results.len(),
            CreatableTopic {
                name,
                num_partitions,
                replication_factor,
                assignments: topic
                    .assignments
                    .iter()
                    .map(|a| {
                        (
                            a.partition_index,
                            a.broker_ids.iter().map(|b| b.0).collect(),
                        )
                    })
                    .collect(),
                configs,
            },
        ));
        results.push(None);
    }

    let (slots, creatable): (Vec<usize>, Vec<CreatableTopic>) = to_create.into_iter().unzip();
    let configs_by_slot: Vec<(Vec<(String, String)>, bool)> = creatable
        .iter()
        .map(|c| c.configs.clone())
        .zip(describable)
        .collect();
    let refused = match creatable.is_empty() || request.validate_only {
        true => None,
        false => crate::descriptors::check_headroom_for_creation().err(),
    };
    if let Some((code, message)) = refused {
        for slot in slots {
            let mut result = CreatableTopicResult::default();
            result.name = request.topics[slot].name.clone();
            result.num_partitions = -1;
            result.replication_factor = -1;
            result.error_code = code.code();
            result.error_message = Some(str_bytes(message.clone()));
            results[slot] = Some(result);
        }
        response.topics = results.into_iter().flatten().collect();
        return (response, Duration::ZERO);
    }
    if !creatable.is_empty() && !request.validate_only {
        // Backpressure: the logs of earlier creations first, so that
        // creations one after another go at the pace of this node's log
        // creation instead of piling up work on every replica.
        let wait = Duration::from_millis(request.timeout_ms.max(0) as u64);
        let earlier = ctx.metadata().last_applied_offset;
        ctx.replica_manager.wait_for_applied(earlier, wait).await;
    }
    let (outcomes, throttle) = if creatable.is_empty() {
        (Vec::new(), Duration::ZERO)
    } else {
        let strict = version >= STRICT_QUOTA_SINCE_VERSION;
        let outcome = ctx
            .controller
            .create_topics_for(
                Some(client.mutating(strict)),
                creatable,
                request.validate_only,
            )
            .await;
        (outcome.results, outcome.throttle)
    };
    if !request.validate_only && outcomes.iter().any(Result::is_ok) {
        // The logs are created from now on, not once the metadata follower
        // (which also updates the replica fetchers and the group
        // coordinator per image) reaches this image: the next CreateTopics
        // waits for them.
        let replica_manager = ctx.replica_manager.clone();
        let image = ctx.metadata();
        tokio::spawn(async move {
            if let Err(e) = replica_manager.apply_image_off_runtime(image).await {
                tracing::error!(error = %e, "creating logs for new topics failed");
            }
        });
    }
    for ((slot, outcome), (explicit, describable)) in
        slots.into_iter().zip(outcomes).zip(configs_by_slot)
    {
        let mut result = CreatableTopicResult::default();
        result.name = request.topics[slot].name.clone();
        result.num_partitions = -1;
        result.replication_factor = -1;
        match outcome {
            Ok(created) => {
                result.error_message = None;
                result.topic_id = created.topic_id;
                if version >= 5 && !describable {
                    result.topic_config_error_code = ResponseError::TopicAuthorizationFailed.code();
                } else if version >= 5 {
                    result.num_partitions = created.num_partitions;
                    result.replication_factor = created.replication_factor;
                    let explicit = explicit.into_iter().collect();
                    result.configs = Some(
                        topic_config_entries(&ctx.config, &explicit, None)
                            .into_iter()
                            .map(|e| {
                                let mut c = CreatableTopicConfigs::default();
                                c.name = e.name;
                                c.value = e.value;
                                c.read_only = e.read_only;
                                c.config_source = e.config_source;
                                c.is_sensitive = e.is_sensitive;
                                c
                            })
                            .collect(),
                    );
                }
            }
            Err(e) => {
                result.error_code = controller_error_code(&e);
                result.error_message = Some(str_bytes(e.to_string()));
            }
        }
        results[slot] = Some(result);
    }
    response.topics = results.into_iter().flatten().collect();
    (response, throttle)
}
