//! A broker-only node's view of the metadata quorum (`process.roles=broker`):
//! a [`MetadataObserver`] that pulls the metadata from the voters and
//! forwards controller commands to the active controller, as a KRaft broker
//! observes `__cluster_metadata` without voting.
//!
//! openraft replicates by pushing from the leader, so an openraft learner
//! would need a listener the leader dials; a Kafka broker-only node has no
//! controller listener. So the observer pulls instead: it sends
//! `FetchMetadata { after_offset, max_wait_ms }` (frame kind 5 of
//! [`crate::transport`]) to a voter, preferring the active controller, and
//! the voter answers from its own applied state as soon as its image is
//! newer than `after_offset` (or the active controller changed), or with
//! nothing after `max_wait_ms`: a long poll on the voter's image watch
//! channel, so an idle observer costs one request per
//! [`FETCH_MAX_WAIT`].
//!
//! This first version always answers with the voter's whole
//! [`MetadataImage`] (a snapshot), never with the record batches after
//! `after_offset`: simple, and correct after log compaction, at the cost of
//! sending the whole image on every change. The observer keeps the image in
//! memory only (nothing is written under `__cluster_metadata-0`); a restart
//! fetches it again. It ignores an image older than the one it has (a
//! lagging voter) and publishes each newer one on a watch channel, as a
//! voter publishes what it applied.
//!
//! Must not depend on Kafka request types; openraft is not used here.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::ControllerError;
use crate::image::MetadataImage;
use crate::quorum::{CommandOutcome, ControllerCommand, ControllerConfig, QuorumOptions};
use crate::transport::{
    PeerClient, QuorumRequest, QuorumResponse, QuorumTransport, TransportError,
};
use crate::voters::QuorumVoter;

/// How long a voter holds a `FetchMetadata` with nothing new before
/// answering empty (Kafka's `controller.quorum.fetch.timeout.ms` default).
pub const FETCH_MAX_WAIT: Duration = Duration::from_millis(2000);

/// Longest `max_wait_ms` a voter honours, ms.
const MAX_FETCH_WAIT_MS: u64 = 30_000;

/// Pause before asking another voter after a failed fetch.
const FETCH_RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// Voter id used for a `controller.quorum.bootstrap.servers` address whose
/// node id is not known (TCP only uses it in error messages).
const UNKNOWN_VOTER: u64 = u64::MAX;

/// An observer's pull request to a voter.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FetchMetadataRequest {
    /// The observer's `node.id`.
    pub(crate) observer_id: i32,
    /// The last offset the observer applied (0: nothing yet).
    pub(crate) after_offset: u64,
    /// The active controller the observer knows of.
    pub(crate) known_controller: Option<i32>,
    /// How long the voter may wait for something newer, ms.
    pub(crate) max_wait_ms: u64,
}

/// A voter's answer to [`FetchMetadataRequest`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FetchMetadataResponse {
    /// The voter's image when it is newer than `after_offset` or names
    /// another controller; `None` when nothing changed within the wait.
    pub(crate) image: Option<MetadataImage>,
    /// The active controller as the voter knows it: its id and the address
    /// of its controller listener.
    pub(crate) leader: Option<(u64, String)>,
}

/// Waits (at most `request.max_wait_ms`, capped at 30 s) until `images`
/// holds an image newer than the observer's, and returns it; `None` when
/// nothing changed in time. Served by any voter from its applied state.
pub(crate) async fn newer_image(
    mut images: watch::Receiver<Arc<MetadataImage>>,
    request: &FetchMetadataRequest,
) -> Option<MetadataImage> {
    let newer = |image: &Arc<MetadataImage>| {
        image.last_applied_offset > request.after_offset
            || (image.last_applied_offset == request.after_offset
                && image.controller_id != request.known_controller)
    };
    let wait = Duration::from_millis(request.max_wait_ms.min(MAX_FETCH_WAIT_MS));
    let found = tokio::time::timeout(wait, images.wait_for(newer)).await;
    match found {
        Ok(Ok(image)) => Some((**image).clone()),
        _ => None,
    }
}

/// Where the observer reaches a voter.
#[derive(Debug, Clone, PartialEq, Eq)]
struct VoterAddress {
    id: u64,
    address: String,
}

struct ObserverInner {
    node_id: i32,
    cluster_id: String,
    options: QuorumOptions,
    transport: QuorumTransport,
    /// `controller.quorum.voters`, or the bootstrap servers.
    bootstrap: Vec<VoterAddress>,
    /// The active controller as last reported by a voter.
    leader: Mutex<Option<VoterAddress>>,
    images: watch::Sender<Arc<MetadataImage>>,
    /// The client commands go through, with the voter it talks to.
    command_client: tokio::sync::Mutex<Option<(VoterAddress, PeerClient)>>,
    follower: Mutex<Option<JoinHandle<()>>>,
}

/// A broker-only node's metadata: follows the quorum by pulling and
/// forwards commands to the active controller. Cheap to clone.
#[derive(Clone)]
pub struct MetadataObserver {
    inner: Arc<ObserverInner>,
}

impl std::fmt::Debug for MetadataObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetadataObserver")
            .field("node_id", &self.inner.node_id)
            .finish_non_exhaustive()
    }
}

impl MetadataObserver {
    /// Starts following the quorum whose voters are `voters`
    /// (`controller.quorum.voters`) or, when that is empty, reachable at
    /// `bootstrap_servers` (`controller.quorum.bootstrap.servers`, `host:port`
    /// each), and waits (at most `options.startup_timeout`) until this node
    /// has the image the active controller had committed when asked.
    /// `config.metadata_dir` is not used: the image is kept in memory.
    ///
    /// # Errors
    ///
    /// - [`ControllerError::InvalidNodeId`] for a negative `node_id` or one
    ///   that is among `voters` (a voter is not an observer).
    /// - [`ControllerError::Raft`] with no voter address at all, or with
    ///   [`QuorumTransport::single_voter`].
    /// - [`ControllerError::Timeout`] when it did not catch up in time.
    pub async fn start(
        config: ControllerConfig,
        options: QuorumOptions,
        voters: Vec<QuorumVoter>,
        bootstrap_servers: Vec<String>,
        transport: QuorumTransport,
    ) -> Result<MetadataObserver, ControllerError> {
        if config.node_id < 0 || voters.iter().any(|v| v.id == config.node_id) {
            return Err(ControllerError::InvalidNodeId {
                node_id: config.node_id,
            });
        }
        let bootstrap: Vec<VoterAddress> = if voters.is_empty() {
            bootstrap_servers
                .into_iter()
                .map(|address| VoterAddress {
                    id: UNKNOWN_VOTER,
                    address,
                })
                .collect()
        } else {
            voters
                .iter()
                .map(|v| VoterAddress {
                    id: v.id as u64,
                    address: v.address(),
                })
                .collect()
        };
        if bootstrap.is_empty() || transport.is_single_voter() {
            return Err(ControllerError::Raft {
                reason: "a broker-only node needs controller.quorum.voters or \
                         controller.quorum.bootstrap.servers and a transport to them"
                    .into(),
            });
        }
        let (images, _) = watch::channel(Arc::new(MetadataImage::new(config.cluster_id.clone())));
        let observer = MetadataObserver {
            inner: Arc::new(ObserverInner {
                node_id: config.node_id,
                cluster_id: config.cluster_id,
                options: options.clone(),
                transport,
                bootstrap,
                leader: Mutex::new(None),
                images,
                command_client: tokio::sync::Mutex::new(None),
                follower: Mutex::new(None),
            }),
        };
        *observer
            .inner
            .follower
            .lock()
            .unwrap_or_else(|p| p.into_inner()) =
            Some(tokio::spawn(follow(observer.inner.clone())));
        let deadline = Instant::now() + options.startup_timeout;
        match observer
            .execute_until(ControllerCommand::ReadOffset, deadline)
            .await
        {
            Ok(_) => {}
            Err(e) => {
                observer.shutdown();
                return Err(match e {
                    ControllerError::NotController { .. } | ControllerError::Timeout { .. } => {
                        ControllerError::Timeout {
                            operation: "a metadata quorum leader and the metadata image".into(),
                            waited_ms: options.startup_timeout.as_millis() as u64,
                        }
                    }
                    other => other,
                });
            }
        }
        tracing::info!(
            node_id = config.node_id,
            offset = observer.image().last_applied_offset,
            controller = ?observer.image().controller_id,
            "following the metadata quorum as an observer (broker-only node)"
        );
        Ok(observer)
    }

    /// The latest image fetched from the quorum.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.inner.images.borrow().clone()
    }

    /// A receiver that sees every newer image fetched.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.inner.images.subscribe()
    }

    /// Stops following. Commands after this still forward. Calling it twice
    /// is harmless.
    pub fn shutdown(&self) {
        let follower = self
            .inner
            .follower
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(follower) = follower {
            follower.abort();
        }
        self.inner
            .images
            .send_if_modified(|image| set_controller(image, None));
    }

    /// Runs `command` on the active controller within
    /// `options.leader_wait`, then waits until this node's image has
    /// applied its result.
    pub(crate) async fn execute(
        &self,
        command: ControllerCommand,
    ) -> Result<CommandOutcome, ControllerError> {
        let deadline = Instant::now() + self.inner.options.leader_wait;
        self.execute_until(command, deadline).await
    }

    /// As the voter's `execute_until`: sends `command` to the active
    /// controller (the last one a voter reported, else the configured voters
    /// in turn), retrying a command that was not delivered or met a voter
    /// that is not the active controller until `deadline`.
    async fn execute_until(
        &self,
        command: ControllerCommand,
        deadline: Instant,
    ) -> Result<CommandOutcome, ControllerError> {
        let inner = &self.inner;
        let mut images = inner.images.subscribe();
        let mut next_bootstrap = 0usize;
        let mut last_leader = None;
        loop {
            let target = inner.leader_or_bootstrap(&mut next_bootstrap);
            match inner.forward(&target, &command).await {
                Ok(Ok(outcome)) => {
                    self.wait_applied(outcome.offset).await?;
                    return Ok(outcome);
                }
                Ok(Err(ControllerError::NotController { leader })) => {
                    last_leader = leader.or(last_leader);
                    inner.forget_leader(&target);
                    if let Some(known) = leader.and_then(|l| inner.voter_by_id(l)) {
                        inner.set_leader(Some(known));
                    }
                }
                Ok(Err(e)) => return Err(e),
                Err(TransportError::Unreachable { reason, .. }) => {
                    tracing::debug!(target = %target.address, %reason, "voter unreachable; trying another");
                    inner.forget_leader(&target);
                }
                Err(TransportError::Network { reason, .. }) => {
                    inner.forget_leader(&target);
                    return Err(ControllerError::Timeout {
                        operation: format!(
                            "the active controller at {} to answer a forwarded command \
                             (connection lost: {reason}; it may or may not have run)",
                            target.address
                        ),
                        waited_ms: inner.options.forward_timeout.as_millis() as u64,
                    });
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ControllerError::NotController {
                    leader: last_leader,
                });
            }
            // Wake when a fetch brings news (a new controller), and retry at
            // least every 100 ms.
            let wake = deadline.min(now + Duration::from_millis(100));
            let _ = tokio::time::timeout_at(wake, images.changed()).await;
        }
    }

    /// Waits until this node's image has applied `offset`.
    async fn wait_applied(&self, offset: u64) -> Result<(), ControllerError> {
        let timeout = self.inner.options.forward_timeout;
        let mut images = self.inner.images.subscribe();
        let applied = async {
            images
                .wait_for(|image| image.last_applied_offset >= offset)
                .await
                .map(|_| ())
        };
        match tokio::time::timeout(timeout, applied).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ControllerError::Raft {
                reason: e.to_string(),
            }),
            Err(_) => Err(ControllerError::Timeout {
                operation: format!("the metadata image to reach offset {offset}"),
                waited_ms: timeout.as_millis() as u64,
            }),
        }
    }
}

impl ObserverInner {
    fn leader(&self) -> Option<VoterAddress> {
        self.leader
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set_leader(&self, leader: Option<VoterAddress>) {
        *self.leader.lock().unwrap_or_else(|p| p.into_inner()) = leader;
    }

    /// Forgets the active controller if it is `target` (it failed).
    fn forget_leader(&self, target: &VoterAddress) {
        let mut leader = self.leader.lock().unwrap_or_else(|p| p.into_inner());
        if leader.as_ref() == Some(target) {
            *leader = None;
        }
    }

    fn voter_by_id(&self, id: i32) -> Option<VoterAddress> {
        self.bootstrap
            .iter()
            .find(|v| v.id == id as u64 && v.id != UNKNOWN_VOTER)
            .cloned()
    }

    /// The active controller if known, else the next configured voter.
    fn leader_or_bootstrap(&self, next: &mut usize) -> VoterAddress {
        if let Some(leader) = self.leader() {
            return leader;
        }
        let target = self.bootstrap[*next % self.bootstrap.len()].clone();
        *next = next.wrapping_add(1);
        target
    }

    /// Sends `command` to `target` on the command client.
    async fn forward(
        &self,
        target: &VoterAddress,
        command: &ControllerCommand,
    ) -> Result<Result<CommandOutcome, ControllerError>, TransportError> {
        let mut client = self.command_client.lock().await;
        let client = client_for(&self.transport, self.node_id, &mut client, target);
        match client
            .call(
                QuorumRequest::Command(command.clone()),
                self.options.forward_timeout,
            )
            .await?
        {
            QuorumResponse::Command(result) => Ok(result),
            other => Err(TransportError::Network {
                target: target.id,
                reason: format!("response of the wrong kind: {other:?}"),
            }),
        }
    }

    /// Publishes `image` unless it is older than the current one; true if
    /// it was published.
    fn offer(&self, mut image: MetadataImage) -> bool {
        if image.cluster_id != self.cluster_id {
            tracing::error!(
                ours = %self.cluster_id,
                theirs = %image.cluster_id,
                "a voter of another cluster answered; ignoring its metadata"
            );
            return false;
        }
        image.cluster_id = self.cluster_id.clone();
        let published = self.images.send_if_modified(|current| {
            let newer = image.last_applied_offset > current.last_applied_offset
                || (image.last_applied_offset == current.last_applied_offset
                    && image.controller_id != current.controller_id);
            if newer {
                *current = Arc::new(image);
            }
            newer
        });
        if published {
            metrics::gauge!("weir_controller_last_applied_offset")
                .set(self.images.borrow().last_applied_offset as f64);
        }
        published
    }
}

/// The client in `slot` when it talks to `target`, else a new one.
fn client_for<'a>(
    transport: &QuorumTransport,
    node_id: i32,
    slot: &'a mut Option<(VoterAddress, PeerClient)>,
    target: &VoterAddress,
) -> &'a mut PeerClient {
    if slot.as_ref().is_none_or(|(t, _)| t != target) {
        let client = transport.client(node_id as u64, target.id, &target.address);
        *slot = Some((target.clone(), client));
    }
    match slot {
        Some((_, client)) => client,
        None => unreachable!("set above"),
    }
}

/// The observer's fetch loop: long-polls the active controller (or, while
/// none is known, the configured voters in turn) and publishes every newer
/// image. Ends when aborted.
async fn follow(inner: Arc<ObserverInner>) {
    let mut slot: Option<(VoterAddress, PeerClient)> = None;
    let mut next_bootstrap = 0usize;
    loop {
        let target = inner.leader_or_bootstrap(&mut next_bootstrap);
        let (after_offset, known_controller) = {
            let image = inner.images.borrow();
            (image.last_applied_offset, image.controller_id)
        };
        let request = FetchMetadataRequest {
            observer_id: inner.node_id,
            after_offset,
            known_controller,
            max_wait_ms: FETCH_MAX_WAIT.as_millis() as u64,
        };
        let client = client_for(&inner.transport, inner.node_id, &mut slot, &target);
        let answer = client
            .call(
                QuorumRequest::FetchMetadata(request),
                FETCH_MAX_WAIT + inner.options.forward_timeout,
            )
            .await;
        match answer {
            Ok(QuorumResponse::FetchMetadata(Ok(response))) => {
                let leader = response
                    .leader
                    .map(|(id, address)| VoterAddress { id, address });
                if let Some(image) = response.image {
                    inner.offer(image);
                }
                if leader.is_none() {
                    // The voter knows no leader: ask the next one.
                    inner.forget_leader(&target);
                    slot = None;
                    tokio::time::sleep(FETCH_RETRY_BACKOFF).await;
                } else {
                    inner.set_leader(leader);
                }
            }
            Ok(other) => {
                tracing::debug!(target = %target.address, answer = ?other, "unexpected fetch answer");
                inner.forget_leader(&target);
                slot = None;
                tokio::time::sleep(FETCH_RETRY_BACKOFF).await;
            }
            Err(e) => {
                tracing::debug!(target = %target.address, error = %e, "metadata fetch failed; trying another voter");
                inner.forget_leader(&target);
                slot = None;
                tokio::time::sleep(FETCH_RETRY_BACKOFF).await;
            }
        }
    }
}

fn set_controller(image: &mut Arc<MetadataImage>, controller_id: Option<i32>) -> bool {
    if image.controller_id == controller_id {
        return false;
    }
    Arc::make_mut(image).controller_id = controller_id;
    true
}
