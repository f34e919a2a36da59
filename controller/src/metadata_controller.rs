//! What the broker talks to for metadata, whichever role its node has: a
//! voter's [`QuorumController`] (`process.roles=broker,controller`) or a
//! broker-only node's [`MetadataObserver`] (`process.roles=broker`). Both
//! publish images on a watch channel and run commands on the active
//! controller; the broker does not care which it has.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use tokio::sync::watch;

use crate::control::{
    CreatableTopic, CreatedTopic, ElectionType, HeartbeatReply, NewPartitions, TopicElections,
    TopicRef,
};
use crate::error::ControllerError;
use crate::image::{MetadataImage, TopicId};
use crate::observer::MetadataObserver;
use crate::quorum::{CommandResponse, ControllerCommand, QuorumController};
use crate::quorum_state::QuorumDescription;
use crate::records::BrokerEndpoint;

/// This node's metadata: a voter of the quorum or an observer of it. Cheap
/// to clone. The methods behave as [`QuorumController`]'s of the same name;
/// on an observer every command is forwarded to the active controller and
/// returns once the observer's image has applied its result.
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

    /// As [`QuorumController::register_broker`].
    ///
    /// # Errors
    ///
    /// As [`QuorumController::register_broker`].
    pub async fn register_broker(
        &self,
        broker_id: i32,
        incarnation_id: uuid::Uuid,
        endpoints: Vec<BrokerEndpoint>,
        rack: Option<String>,
    ) -> Result<i64, ControllerError> {
        match self {
            MetadataController::Voter(c) => {
                c.register_broker(broker_id, incarnation_id, endpoints, rack)
                    .await
            }
            MetadataController::Observer(o) => {
                let command = ControllerCommand::RegisterBroker {
                    broker_id,
                    incarnation_id,
                    endpoints,
                    rack,
                };
                match o.execute(command).await?.response {
                    CommandResponse::BrokerEpoch(epoch) => Ok(epoch),
                    other => Err(unexpected(other)),
                }
            }
        }
    }

    /// As [`QuorumController::broker_heartbeat`], with this node's applied
    /// offset.
    ///
    /// # Errors
    ///
    /// As [`QuorumController::broker_heartbeat`].
    pub async fn broker_heartbeat(
        &self,
        broker_id: i32,
        broker_epoch: i64,
        want_shut_down: bool,
    ) -> Result<HeartbeatReply, ControllerError> {
        match self {
            MetadataController::Voter(c) => {
                c.broker_heartbeat(broker_id, broker_epoch, want_shut_down)
                    .await
            }
            MetadataController::Observer(o) => {
                let command = ControllerCommand::BrokerHeartbeat {
                    broker_id,
                    broker_epoch,
                    metadata_offset: o.image().last_applied_offset,
                    want_shut_down,
                };
                match o.execute(command).await?.response {
                    CommandResponse::Heartbeat(reply) => Ok(reply),
                    other => Err(unexpected(other)),
                }
            }
        }
    }

    /// As [`QuorumController::create_topics`].
    pub async fn create_topics(
        &self,
        topics: Vec<CreatableTopic>,
        validate_only: bool,
    ) -> Vec<Result<CreatedTopic, ControllerError>> {
        let o = match self {
            MetadataController::Voter(c) => return c.create_topics(topics, validate_only).await,
            MetadataController::Observer(o) => o,
        };
        let n = topics.len();
        let command = ControllerCommand::CreateTopics {
            topics,
            validate_only,
        };
        match o.execute(command).await.map(|o| o.response) {
            Ok(CommandResponse::CreatedTopics(results)) => results,
            Ok(other) => vec![Err(unexpected(other)); n],
            Err(e) => vec![Err(e); n],
        }
    }

    /// As [`QuorumController::delete_topics`].
    pub async fn delete_topics(
        &self,
        topics: Vec<TopicRef>,
    ) -> Vec<Result<(String, TopicId), ControllerError>> {
        let o = match self {
            MetadataController::Voter(c) => return c.delete_topics(topics).await,
            MetadataController::Observer(o) => o,
        };
        let n = topics.len();
        match o
            .execute(ControllerCommand::DeleteTopics { topics })
            .await
            .map(|o| o.response)
        {
            Ok(CommandResponse::DeletedTopics(results)) => results,
            Ok(other) => vec![Err(unexpected(other)); n],
            Err(e) => vec![Err(e); n],
        }
    }

    /// As [`QuorumController::allocate_producer_ids`].
    ///
    /// # Errors
    ///
    /// As [`QuorumController::allocate_producer_ids`].
    pub async fn allocate_producer_ids(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<Range<i64>, ControllerError> {
        let o = match self {
            MetadataController::Voter(c) => {
                return c.allocate_producer_ids(broker_id, broker_epoch).await
            }
            MetadataController::Observer(o) => o,
        };
        let command = ControllerCommand::AllocateProducerIds {
            broker_id,
            broker_epoch,
        };
        match o.execute(command).await?.response {
            CommandResponse::ProducerIds(ids) => Ok(ids),
            other => Err(unexpected(other)),
        }
    }

    /// As [`QuorumController::alter_topic_configs`].
    ///
    /// # Errors
    ///
    /// As [`QuorumController::alter_topic_configs`].
    pub async fn alter_topic_configs(
        &self,
        topic: &str,
        configs: Vec<(String, Option<String>)>,
    ) -> Result<(), ControllerError> {
        let o = match self {
            MetadataController::Voter(c) => return c.alter_topic_configs(topic, configs).await,
            MetadataController::Observer(o) => o,
        };
        let command = ControllerCommand::AlterTopicConfigs {
            topic: topic.to_string(),
            configs,
        };
        match o.execute(command).await?.response {
            CommandResponse::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// As [`QuorumController::create_partitions`].
    pub async fn create_partitions(
        &self,
        topics: Vec<NewPartitions>,
        validate_only: bool,
    ) -> Vec<Result<(), ControllerError>> {
        let o = match self {
            MetadataController::Voter(c) => {
                return c.create_partitions(topics, validate_only).await
            }
            MetadataController::Observer(o) => o,
        };
        let n = topics.len();
        let command = ControllerCommand::CreatePartitions {
            topics,
            validate_only,
        };
        match o.execute(command).await.map(|o| o.response) {
            Ok(CommandResponse::CreatedPartitions(results)) => results,
            Ok(other) => vec![Err(unexpected(other)); n],
            Err(e) => vec![Err(e); n],
        }
    }

    /// As [`QuorumController::replace_topic_configs`].
    ///
    /// # Errors
    ///
    /// As [`QuorumController::replace_topic_configs`].
    pub async fn replace_topic_configs(
        &self,
        topic: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), ControllerError> {
        let o = match self {
            MetadataController::Voter(c) => return c.replace_topic_configs(topic, configs).await,
            MetadataController::Observer(o) => o,
        };
        let command = ControllerCommand::ReplaceTopicConfigs {
            topic: topic.to_string(),
            configs,
        };
        match o.execute(command).await?.response {
            CommandResponse::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// As [`QuorumController::elect_leaders`].
    ///
    /// # Errors
    ///
    /// As [`QuorumController::elect_leaders`].
    pub async fn elect_leaders(
        &self,
        election: ElectionType,
        partitions: Option<Vec<(String, Vec<i32>)>>,
    ) -> Result<Vec<TopicElections>, ControllerError> {
        let o = match self {
            MetadataController::Voter(c) => return c.elect_leaders(election, partitions).await,
            MetadataController::Observer(o) => o,
        };
        let command = ControllerCommand::ElectLeaders {
            election,
            partitions,
        };
        match o.execute(command).await?.response {
            CommandResponse::Elections(results) => Ok(results),
            other => Err(unexpected(other)),
        }
    }

    /// As [`QuorumController::describe_quorum`]; the active controller
    /// lists the broker-only nodes that fetch from it as observers.
    ///
    /// # Errors
    ///
    /// As [`QuorumController::describe_quorum`].
    pub async fn describe_quorum(&self) -> Result<QuorumDescription, ControllerError> {
        let o = match self {
            MetadataController::Voter(c) => return c.describe_quorum().await,
            MetadataController::Observer(o) => o,
        };
        match o.execute(ControllerCommand::DescribeQuorum).await?.response {
            CommandResponse::Quorum(description) => Ok(description),
            other => Err(unexpected(other)),
        }
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
