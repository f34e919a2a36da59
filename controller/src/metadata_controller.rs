//! What the broker talks to for metadata, whichever role its node has: a
//! voter's [`QuorumController`] (`process.roles=broker,controller`) or a
//! broker-only node's [`MetadataObserver`] (`process.roles=broker`). Both
//! publish images on a watch channel and run commands on the active
//! controller; the broker does not care which it has.
//!
//! The typed controller API (one method per command) is written once, here,
//! over one `execute(ControllerCommand)`: a voter's runs the command itself
//! when active and forwards it to the active controller otherwise; an
//! observer's always forwards. Either returns once this node's image has
//! applied the command's result. Neither role carries typed commands of its
//! own.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::control::{
    AlterPartitionRequest, AlterPartitionResponse, BrokerHeartbeat, BrokerRegistrationRequest,
    CreatableTopic, CreatedTopic, ElectionType, HeartbeatReply, NewPartitions, TopicElections,
    TopicRef,
};
use crate::error::ControllerError;
use crate::image::{MetadataImage, TopicId};
use crate::mutation_quota::MutatingClient;
use crate::observer::MetadataObserver;
use crate::quorum::{CommandOutcome, CommandResponse, ControllerCommand, QuorumController};
use crate::quorum_state::QuorumDescription;

/// This node's metadata: a voter of the quorum or an observer of it. Cheap
/// to clone. Every command runs on the active controller (forwarded from a
/// voter that is not active, and always from an observer) and returns once
/// this node's image has applied its result, so the caller sees its effect
/// in [`MetadataController::image`].
#[derive(Debug, Clone)]
pub enum MetadataController {
    /// A voter (combined node, or the single node).
    Voter(QuorumController),
    /// A broker-only node following the quorum.
    Observer(MetadataObserver),
}

impl From<QuorumController> for MetadataController {
    fn from(controller: QuorumController) -> Self {
        MetadataController::Voter(controller)
    }
}

impl From<MetadataObserver> for MetadataController {
    fn from(observer: MetadataObserver) -> Self {
        MetadataController::Observer(observer)
    }
}

/// The per-topic results of a command that creates or deletes partitions,
/// and the throttle time its controller mutation quota gave (KIP-599): the
/// client is to wait that long before mutating again (Kafka's
/// `throttle_time_ms`). Zero when no quota applies or it was not exceeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutationOutcome<T> {
    /// One result per topic, in request order.
    pub results: Vec<Result<T, ControllerError>>,
    /// How long the client should be throttled, as of the answer.
    pub throttle: Duration,
}

fn unexpected(response: CommandResponse) -> ControllerError {
    ControllerError::Raft {
        reason: format!("unexpected response from the active controller: {response:?}"),
    }
}

impl MetadataController {
    /// True while this node is the active controller (never for an
    /// observer).
    pub fn is_active(&self) -> bool {
        match self {
            MetadataController::Voter(c) => c.is_active(),
            MetadataController::Observer(_) => false,
        }
    }

    /// True for a voter of the metadata quorum, false for a broker-only
    /// node.
    pub fn is_voter(&self) -> bool {
        matches!(self, MetadataController::Voter(_))
    }

    /// The latest published image.
    pub fn image(&self) -> Arc<MetadataImage> {
        match self {
            MetadataController::Voter(c) => c.image(),
            MetadataController::Observer(o) => o.image(),
        }
    }

    /// A receiver that sees every newly published image.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        match self {
            MetadataController::Voter(c) => c.subscribe(),
            MetadataController::Observer(o) => o.subscribe(),
        }
    }

    /// Runs `command` on the active controller (the one place the two roles
    /// differ) and returns its outcome once this node's image has applied
    /// it.
    async fn execute(&self, command: ControllerCommand) -> Result<CommandOutcome, ControllerError> {
        match self {
            MetadataController::Voter(c) => c.execute(command).await,
            MetadataController::Observer(o) => o.execute(command).await,
        }
    }

    /// [`MetadataController::execute`] for a command answered with one
    /// result; `pick` takes the expected [`CommandResponse`] variant apart.
    async fn execute_one<T>(
        &self,
        command: ControllerCommand,
        pick: impl FnOnce(CommandResponse) -> Result<T, CommandResponse>,
    ) -> Result<T, ControllerError> {
        pick(self.execute(command).await?.response).map_err(unexpected)
    }

    /// [`MetadataController::execute`] for a command that creates or
    /// deletes partitions, answered per topic of a request of `n` topics (a
    /// request-level failure, or an unexpected answer, becomes every
    /// topic's error), with the throttle time of its controller mutation
    /// quota.
    async fn execute_mutation<T>(
        &self,
        command: ControllerCommand,
        n: usize,
        pick: impl FnOnce(CommandResponse) -> Result<Vec<Result<T, ControllerError>>, CommandResponse>,
    ) -> MutationOutcome<T> {
        let outcome = match self.execute(command).await {
            Ok(outcome) => outcome,
            Err(e) => {
                return MutationOutcome {
                    results: (0..n).map(|_| Err(e.clone())).collect(),
                    throttle: Duration::ZERO,
                }
            }
        };
        let throttle = Duration::from_millis(outcome.throttle_time_ms);
        let results = pick(outcome.response).unwrap_or_else(|other| {
            let e = unexpected(other);
            (0..n).map(|_| Err(e.clone())).collect()
        });
        MutationOutcome { results, throttle }
    }

    /// Registers (or re-registers with a new incarnation) a broker with its
    /// endpoints, rack (`broker.rack`) and the broker epoch of its last
    /// clean shutdown; returns the new broker epoch. With several voters the
    /// broker starts fenced and a heartbeat
    /// ([`MetadataController::broker_heartbeat`]) unfences it, as in Kafka,
    /// and an unclean restart takes it out of every ELR (KIP-966); a single
    /// voter registers its own broker unfenced (see
    /// [`control::register_broker`](crate::control::register_broker)).
    ///
    /// # Errors
    ///
    /// [`ControllerError::NotController`], [`ControllerError::Raft`] or
    /// [`ControllerError::Storage`] when the record cannot be committed.
    pub async fn register_broker(
        &self,
        request: BrokerRegistrationRequest,
    ) -> Result<i64, ControllerError> {
        let command = ControllerCommand::RegisterBroker(request);
        self.execute_one(command, |r| match r {
            CommandResponse::BrokerEpoch(epoch) => Ok(epoch),
            other => Err(other),
        })
        .await
    }

    /// One broker heartbeat (Kafka's `BrokerHeartbeat`, KIP-631), sent every
    /// `broker.heartbeat.interval.ms` through the active controller with
    /// the metadata offset the broker has applied. It refreshes the
    /// broker's session and writes records only when the broker's state
    /// changes: unfencing once caught up with its registration; with
    /// `want_shut_down`, entering controlled shutdown (its leaderships move
    /// while it stays unfenced) and, once every active broker has seen
    /// that, fencing it with `should_shut_down`; see
    /// [`control::broker_heartbeat`](crate::control::broker_heartbeat).
    ///
    /// # Errors
    ///
    /// [`ControllerError::StaleBrokerEpoch`] unless the heartbeat's epoch is
    /// the broker's current registration; [`ControllerError::NotController`]
    /// or a commit error.
    pub async fn broker_heartbeat(
        &self,
        heartbeat: BrokerHeartbeat,
    ) -> Result<HeartbeatReply, ControllerError> {
        let command = ControllerCommand::BrokerHeartbeat(heartbeat);
        self.execute_one(command, |r| match r {
            CommandResponse::Heartbeat(reply) => Ok(reply),
            other => Err(other),
        })
        .await
    }

    /// Creates topics; per-topic results in request order. Validation and
    /// records as [`control::create_topics`](crate::control::create_topics);
    /// all successful topics of one call are committed as ONE atomic batch
    /// and the call returns once it is applied to this node's image.
    /// `validate_only` writes nothing. A request that would generate more
    /// than [`MAX_RECORDS_PER_USER_OP`](crate::MAX_RECORDS_PER_USER_OP)
    /// records fails whole with [`ControllerError::PolicyViolation`],
    /// validate-only too; `__cluster_metadata` and duplicate names give
    /// [`ControllerError::InvalidRequest`]. A commit failure turns every
    /// would-be success into that error.
    ///
    /// No controller mutation quota applies (the broker's own creations);
    /// a client's request goes through [`MetadataController::create_topics_for`].
    pub async fn create_topics(
        &self,
        topics: Vec<CreatableTopic>,
        validate_only: bool,
    ) -> Vec<Result<CreatedTopic, ControllerError>> {
        self.create_topics_for(None, topics, validate_only)
            .await
            .results
    }

    /// [`MetadataController::create_topics`] for `client`, whose controller
    /// mutation quota the active controller applies to each topic (see
    /// [`control::create_topics_under_quota`](crate::control::create_topics_under_quota)
    /// and [`crate::mutation_quota`]).
    pub async fn create_topics_for(
        &self,
        client: Option<MutatingClient>,
        topics: Vec<CreatableTopic>,
        validate_only: bool,
    ) -> MutationOutcome<CreatedTopic> {
        let n = topics.len();
        let command = ControllerCommand::CreateTopics {
            topics,
            validate_only,
            client,
        };
        self.execute_mutation(command, n, |r| match r {
            CommandResponse::CreatedTopics(results) => Ok(results),
            other => Err(other),
        })
        .await
    }

    /// Deletes topics by name or id; per-topic `(name, id)` results in
    /// request order, as [`control::delete_topics`](crate::control::delete_topics):
    /// unknown names give [`ControllerError::UnknownTopic`], unknown ids
    /// [`ControllerError::UnknownTopicId`], duplicates and
    /// `__cluster_metadata` [`ControllerError::InvalidRequest`], and more
    /// than [`MAX_RECORDS_PER_USER_OP`](crate::MAX_RECORDS_PER_USER_OP)
    /// removals fail whole with [`ControllerError::PolicyViolation`].
    ///
    /// No controller mutation quota applies; a client's request goes
    /// through [`MetadataController::delete_topics_for`].
    pub async fn delete_topics(
        &self,
        topics: Vec<TopicRef>,
    ) -> Vec<Result<(String, TopicId), ControllerError>> {
        self.delete_topics_for(None, topics).await.results
    }

    /// [`MetadataController::delete_topics`] for `client`, whose controller
    /// mutation quota the active controller applies to each topic (see
    /// [`control::delete_topics_under_quota`](crate::control::delete_topics_under_quota)).
    pub async fn delete_topics_for(
        &self,
        client: Option<MutatingClient>,
        topics: Vec<TopicRef>,
    ) -> MutationOutcome<(String, TopicId)> {
        let n = topics.len();
        let command = ControllerCommand::DeleteTopics { topics, client };
        self.execute_mutation(command, n, |r| match r {
            CommandResponse::DeletedTopics(results) => Ok(results),
            other => Err(other),
        })
        .await
    }

    /// Allocates a block of [`PRODUCER_ID_BLOCK_SIZE`](crate::PRODUCER_ID_BLOCK_SIZE)
    /// producer ids (Kafka's `AllocateProducerIds`, KIP-730). Blocks are
    /// committed before they are returned, so they are never reused, across
    /// restarts too.
    ///
    /// # Errors
    ///
    /// [`ControllerError::StaleBrokerEpoch`] unless `broker_epoch` is the
    /// broker's current registration, [`ControllerError::ProducerIdsExhausted`],
    /// or a commit error.
    pub async fn allocate_producer_ids(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<Range<i64>, ControllerError> {
        let command = ControllerCommand::AllocateProducerIds {
            broker_id,
            broker_epoch,
        };
        self.execute_one(command, |r| match r {
            CommandResponse::ProducerIds(ids) => Ok(ids),
            other => Err(other),
        })
        .await
    }

    /// Sets (`Some`) or deletes (`None`) topic configs.
    ///
    /// # Errors
    ///
    /// [`ControllerError::UnknownTopic`], or a commit error.
    pub async fn alter_topic_configs(
        &self,
        topic: &str,
        configs: Vec<(String, Option<String>)>,
    ) -> Result<(), ControllerError> {
        let command = ControllerCommand::AlterTopicConfigs {
            topic: topic.to_string(),
            configs,
        };
        self.execute_one(command, done).await
    }

    /// Adds partitions to existing topics (CreatePartitions); per-topic
    /// results in request order. Validation and records as
    /// [`control::create_partitions`](crate::control::create_partitions):
    /// all added partitions of one call are committed as ONE atomic batch
    /// and the call returns once it is applied to this node's image.
    /// `validate_only` writes nothing. A commit failure turns every would-be
    /// success into that error.
    ///
    /// No controller mutation quota applies; a client's request goes
    /// through [`MetadataController::create_partitions_for`].
    pub async fn create_partitions(
        &self,
        topics: Vec<NewPartitions>,
        validate_only: bool,
    ) -> Vec<Result<(), ControllerError>> {
        self.create_partitions_for(None, topics, validate_only)
            .await
            .results
    }

    /// [`MetadataController::create_partitions`] for `client`, whose
    /// controller mutation quota the active controller applies to each
    /// topic (see
    /// [`control::create_partitions_under_quota`](crate::control::create_partitions_under_quota)).
    pub async fn create_partitions_for(
        &self,
        client: Option<MutatingClient>,
        topics: Vec<NewPartitions>,
        validate_only: bool,
    ) -> MutationOutcome<()> {
        let n = topics.len();
        let command = ControllerCommand::CreatePartitions {
            topics,
            validate_only,
            client,
        };
        self.execute_mutation(command, n, |r| match r {
            CommandResponse::CreatedPartitions(results) => Ok(results),
            other => Err(other),
        })
        .await
    }

    /// Replaces all of a topic's dynamic configs with `configs` (legacy
    /// AlterConfigs), as
    /// [`control::replace_topic_configs`](crate::control::replace_topic_configs):
    /// keys not listed go back to their defaults.
    ///
    /// # Errors
    ///
    /// [`ControllerError::UnknownTopic`], or a commit error.
    pub async fn replace_topic_configs(
        &self,
        topic: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), ControllerError> {
        let command = ControllerCommand::ReplaceTopicConfigs {
            topic: topic.to_string(),
            configs,
        };
        self.execute_one(command, done).await
    }

    /// Deletes and sets SCRAM credentials (AlterUserScramCredentials,
    /// KIP-554) as
    /// [`control::alter_scram_credentials`](crate::control::alter_scram_credentials):
    /// one result per user named, the accepted alterations committed as one
    /// batch; returns once this node's image has applied them. A commit
    /// failure turns every user's result into that error.
    pub async fn alter_scram_credentials(
        &self,
        deletions: Vec<crate::control::ScramDeletion>,
        upsertions: Vec<crate::control::ScramUpsertion>,
    ) -> Vec<crate::control::ScramAlterResult> {
        let mut users: Vec<String> = deletions
            .iter()
            .map(|d| d.name.clone())
            .chain(upsertions.iter().map(|u| u.name.clone()))
            .collect();
        users.sort();
        users.dedup();
        let command = ControllerCommand::AlterScramCredentials {
            deletions,
            upsertions,
        };
        match self
            .execute_one(command, |r| match r {
                CommandResponse::AlteredScramCredentials(results) => Ok(results),
                other => Err(other),
            })
            .await
        {
            Ok(results) => results,
            Err(e) => users.into_iter().map(|u| (u, Err(e.clone()))).collect(),
        }
    }

    /// Sets and removes client quotas (AlterClientQuotas, KIP-546) as
    /// [`control::alter_client_quotas`](crate::control::alter_client_quotas):
    /// one result per entity; returns once this node's image has applied
    /// them. A commit failure turns every result into that error.
    pub async fn alter_client_quotas(
        &self,
        alterations: Vec<crate::control::QuotaAlteration>,
    ) -> Vec<crate::control::QuotaAlterResult> {
        let mut entities: Vec<crate::quota::QuotaEntity> = Vec::new();
        for a in &alterations {
            if !entities.contains(&a.entity) {
                entities.push(a.entity.clone());
            }
        }
        match self
            .execute_one(
                ControllerCommand::AlterClientQuotas(alterations),
                |r| match r {
                    CommandResponse::AlteredClientQuotas(results) => Ok(results),
                    other => Err(other),
                },
            )
            .await
        {
            Ok(results) => results,
            Err(e) => entities
                .into_iter()
                .map(|en| (en, Err(e.clone())))
                .collect(),
        }
    }

    /// Creates ACLs (CreateAcls) as
    /// [`control::create_acls`](crate::control::create_acls): one result
    /// per ACL in request order; returns once this node's image has applied
    /// them. A refused batch or a commit failure turns every result into
    /// that error.
    pub async fn create_acls(
        &self,
        acls: Vec<crate::acl::StandardAcl>,
    ) -> Vec<Result<(), ControllerError>> {
        let count = acls.len();
        match self
            .execute_one(ControllerCommand::CreateAcls(acls), |r| match r {
                CommandResponse::CreatedAcls(results) => Ok(results),
                other => Err(other),
            })
            .await
        {
            Ok(results) => results,
            Err(e) => vec![Err(e); count],
        }
    }

    /// Deletes the ACLs each filter selects (DeleteAcls) as
    /// [`control::delete_acls`](crate::control::delete_acls): one result per
    /// filter; returns once this node's image has applied the removals. A
    /// refused batch or a commit failure turns every result into that error.
    pub async fn delete_acls(
        &self,
        filters: Vec<crate::acl::AclBindingFilter>,
    ) -> Vec<crate::control::AclDeleteResult> {
        let count = filters.len();
        match self
            .execute_one(ControllerCommand::DeleteAcls(filters), |r| match r {
                CommandResponse::DeletedAcls(results) => Ok(results),
                other => Err(other),
            })
            .await
        {
            Ok(results) => results,
            Err(e) => vec![Err(e); count],
        }
    }

    /// Elects partition leaders on request (ElectLeaders, KIP-183 and
    /// KIP-460) on the active controller, as
    /// [`control::elect_leaders_on_request`](crate::control::elect_leaders_on_request):
    /// `partitions` lists `(topic, partition indexes)`, `None` means every
    /// partition. All elections of one call are committed as one batch; the
    /// call returns once this node's image has applied them.
    ///
    /// # Errors
    ///
    /// [`ControllerError::NotController`] when no active controller answers
    /// within `leader_wait`
    /// ([`QuorumOptions`](crate::QuorumOptions)), or a commit error.
    pub async fn elect_leaders(
        &self,
        election: ElectionType,
        partitions: Option<Vec<(String, Vec<i32>)>>,
    ) -> Result<Vec<TopicElections>, ControllerError> {
        let command = ControllerCommand::ElectLeaders {
            election,
            partitions,
        };
        self.execute_one(command, |r| match r {
            CommandResponse::Elections(results) => Ok(results),
            other => Err(other),
        })
        .await
    }

    /// Applies a partition leader's ISR change (Kafka's `AlterPartition`,
    /// KIP-497, with KIP-841 and KIP-903's broker epochs) on the active
    /// controller, as [`control::alter_partition`](crate::control::alter_partition):
    /// per-partition results in request order, each the partition as it is
    /// once the call returns (this node's image has applied every change of
    /// the request, committed as one batch), or why it was refused.
    ///
    /// # Errors
    ///
    /// Request-level failures only: [`ControllerError::StaleBrokerEpoch`]
    /// unless `request.broker_epoch` is the sender's current registration;
    /// [`ControllerError::NotController`] when no active controller answers
    /// within `leader_wait`; a commit error.
    pub async fn alter_partition(
        &self,
        request: AlterPartitionRequest,
    ) -> Result<AlterPartitionResponse, ControllerError> {
        self.execute_one(ControllerCommand::AlterPartition(request), |r| match r {
            CommandResponse::AlteredPartitions(response) => Ok(response),
            other => Err(other),
        })
        .await
    }

    /// The quorum as the active controller sees it (DescribeQuorum, KIP-595),
    /// asked of the active controller wherever this node is; the active
    /// controller lists the broker-only nodes that fetch from it as
    /// observers.
    ///
    /// # Errors
    ///
    /// [`ControllerError::NotController`] when no active controller answers
    /// within `leader_wait`; transport or raft errors.
    pub async fn describe_quorum(&self) -> Result<QuorumDescription, ControllerError> {
        self.execute_one(ControllerCommand::DescribeQuorum, |r| match r {
            CommandResponse::Quorum(description) => Ok(description),
            other => Err(other),
        })
        .await
    }

    /// Stops following or voting.
    ///
    /// # Errors
    ///
    /// As [`QuorumController::shutdown`].
    pub async fn shutdown(&self) -> Result<(), ControllerError> {
        match self {
            MetadataController::Voter(c) => c.shutdown().await,
            MetadataController::Observer(o) => {
                o.shutdown();
                Ok(())
            }
        }
    }
}

/// The answer of a command that returns nothing.
fn done(response: CommandResponse) -> Result<(), CommandResponse> {
    match response {
        CommandResponse::Done => Ok(()),
        other => Err(other),
    }
}
