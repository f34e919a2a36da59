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
//! channel, so an idle observer costs one long poll per [`FETCH_MAX_WAIT`]
//! plus one immediate check with another voter (which finds a new active
//! controller when the one it polls was cut off from the quorum).
//!
//! The voter answers with the committed record batches after
//! `after_offset` when it still holds them (`RecentBatches`: the entries it
//! applied last since it started or installed a snapshot, as many as its
//! log keeps between snapshots, at most [`MAX_RECENT_BATCHES`]),
//! and otherwise with its whole [`MetadataImage`] (the snapshot path), in
//! parts of about [`MAX_ANSWER_IMAGE_BYTES`] of topics each when it is
//! larger: the voter pins the image it started sending (at most
//! [`PINNED_IMAGES`] of them) and the observer asks for the topics after the
//! last one it holds until it has them all, so an image of any size fits the
//! transport's 16 MiB frames. The
//! observer replays batches with the same all-or-nothing
//! [`MetadataImage::apply`] the voters' state machine uses, or takes the
//! image. It keeps the image in memory only (nothing is written under
//! `__cluster_metadata-0`); a restart fetches it again. It ignores answers
//! older than what it has (a lagging voter) and publishes each newer image
//! on a watch channel, as a voter publishes what it applied.
//!
//! Must not depend on Kafka request types; openraft is not used here.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::ControllerError;
use crate::image::MetadataImage;
use crate::quorum::{
    forward_connection_lost, CommandOutcome, ControllerCommand, ControllerConfig, QuorumOptions,
};
use crate::records::MetadataRecord;
use crate::transport::{
    PeerClient, QuorumRequest, QuorumResponse, QuorumTransport, Route, TransportError, UNKNOWN_NODE,
};
use crate::voters::QuorumVoter;

/// How long a voter holds a `FetchMetadata` with nothing new before
/// answering empty (Kafka's `controller.quorum.fetch.timeout.ms` default).
pub const FETCH_MAX_WAIT: Duration = Duration::from_millis(2000);

/// Longest `max_wait_ms` a voter honours, ms.
const MAX_FETCH_WAIT_MS: u64 = 30_000;

/// Most JSON bytes of entries in one answer to an observer (the
/// transport's frames are at most 16 MiB).
const MAX_ANSWER_RECORD_BYTES: usize = 1024 * 1024;

/// Most JSON bytes of topics in one part of an image sent in parts (a
/// topic larger than this goes whole in its own part).
pub const MAX_ANSWER_IMAGE_BYTES: usize = 4 * 1024 * 1024;

/// Images a voter keeps while observers fetch them in parts (the newest
/// ones it started sending); an observer whose image was dropped starts
/// over from the first part.
pub const PINNED_IMAGES: usize = 4;

/// Pause before asking another voter after a failed fetch.
const FETCH_RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// How long past its `max_wait_ms` a fetch may go unanswered before the
/// observer gives up on the voter and asks another (Kafka's
/// `controller.quorum.request.timeout.ms` default): a paused or cut-off
/// active controller keeps its connections open and answers nothing, and
/// its successor must be found well within a broker session.
const FETCH_ANSWER_GRACE: Duration = Duration::from_millis(2000);

/// Pause after a voter of another cluster answered (a configuration
/// mistake that retrying soon will not mend).
const OTHER_CLUSTER_BACKOFF: Duration = Duration::from_secs(1);

/// Failed fetches in a row (about 5 s of retries) before each warning.
const FAILURES_BEFORE_WARNING: u64 = 50;

/// Most applied entries a voter keeps in memory for observers.
pub const MAX_RECENT_BATCHES: usize = 1000;

/// One applied metadata log entry: its offset and the records it applied
/// (none for raft's blank and membership entries, and for a batch that did
/// not replay).
pub(crate) type AppliedEntry = (u64, Vec<MetadataRecord>);

/// The entries a voter applied last, contiguous, oldest first, so that an
/// observer a little behind gets records instead of the whole image. Filled
/// by the state machine; emptied when it installs a snapshot. Also holds the
/// images the voter is sending in parts.
#[derive(Debug)]
pub(crate) struct RecentBatches {
    capacity: usize,
    entries: Mutex<VecDeque<AppliedEntry>>,
    /// Images being sent in parts, newest last, at most [`PINNED_IMAGES`].
    pinned: Mutex<VecDeque<Arc<MetadataImage>>>,
}

impl RecentBatches {
    /// Keeps at most `capacity` entries (0: none).
    pub(crate) fn new(capacity: usize) -> RecentBatches {
        RecentBatches {
            capacity,
            entries: Mutex::new(VecDeque::new()),
            pinned: Mutex::new(VecDeque::new()),
        }
    }

    /// Keeps `image` for the observers that fetch it in parts.
    fn pin(&self, image: &Arc<MetadataImage>) {
        let mut pinned = self.pinned.lock().unwrap_or_else(|p| p.into_inner());
        if pinned.iter().any(|p| Arc::ptr_eq(p, image)) {
            return;
        }
        pinned.push_back(image.clone());
        while pinned.len() > PINNED_IMAGES {
            pinned.pop_front();
        }
    }

    /// The pinned image at `offset`, if still kept.
    fn pinned(&self, offset: u64) -> Option<Arc<MetadataImage>> {
        self.pinned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .rev()
            .find(|p| p.last_applied_offset == offset)
            .cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<AppliedEntry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes the entry applied at `offset`; a gap forgets everything before.
    pub(crate) fn push(&self, offset: u64, records: Vec<MetadataRecord>) {
        if self.capacity == 0 {
            return;
        }
        let mut entries = self.lock();
        if entries.back().is_some_and(|(last, _)| last + 1 != offset) {
            entries.clear();
        }
        entries.push_back((offset, records));
        while entries.len() > self.capacity {
            entries.pop_front();
        }
    }

    /// Forgets every entry (a snapshot replaced the image).
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    /// The entries at offsets `after + 1 ..= up_to`, when all are held.
    pub(crate) fn between(&self, after: u64, up_to: u64) -> Option<Vec<AppliedEntry>> {
        let entries = self.lock();
        let (first, _) = entries.front()?;
        let (last, _) = entries.back()?;
        if *first > after + 1 || *last < up_to {
            return None;
        }
        Some(
            entries
                .iter()
                .filter(|(offset, _)| *offset > after && *offset <= up_to)
                .cloned()
                .collect(),
        )
    }
}

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
    /// Answer with the whole image even when the records are held (the
    /// observer could not replay them).
    pub(crate) full_image: bool,
    /// The next part of an image being fetched in parts: the image's offset
    /// and the name of the last topic received (none: not fetching one).
    #[serde(default)]
    pub(crate) image_after: Option<(u64, String)>,
}

/// A voter's answer to [`FetchMetadataRequest`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct FetchMetadataResponse {
    /// The voter's cluster id: an observer of another cluster takes
    /// nothing from it (Kafka's INCONSISTENT_CLUSTER_ID).
    #[serde(default)]
    pub(crate) cluster_id: String,
    /// The offset the voter's image had applied when it answered.
    pub(crate) offset: u64,
    /// The active controller in the voter's image.
    pub(crate) controller_id: Option<i32>,
    /// The entries after `after_offset` up to `offset`, when the voter
    /// holds them all (empty when nothing changed or `image` is set).
    pub(crate) batches: Vec<AppliedEntry>,
    /// The voter's whole image when it is newer than `after_offset` and the
    /// entries are not held (or the observer asked for it); when sent in
    /// parts, everything but the topics, with the topics of this part.
    pub(crate) image: Option<MetadataImage>,
    /// For a part of an image after the first: the name of the topic it
    /// continues after.
    #[serde(default)]
    pub(crate) image_continues_after: Option<String>,
    /// More parts of `image` follow (asked for with `image_after`).
    #[serde(default)]
    pub(crate) image_incomplete: bool,
    /// The active controller as the voter knows it: its id and the address
    /// of its controller listener.
    pub(crate) leader: Option<(u64, String)>,
}

/// Waits (at most `request.max_wait_ms`, capped at 30 s) until `images`
/// holds an image newer than the observer's, and answers with what the
/// observer lacks (see [`answer`]); nothing new when nothing changed in
/// time. Served by any voter from its applied state; `leader` is left for
/// the caller.
pub(crate) async fn fetch_newer(
    mut images: watch::Receiver<Arc<MetadataImage>>,
    recent: &RecentBatches,
    request: &FetchMetadataRequest,
) -> FetchMetadataResponse {
    let newer = |image: &Arc<MetadataImage>| {
        image.last_applied_offset > request.after_offset
            || (image.last_applied_offset == request.after_offset
                && image.controller_id != request.known_controller)
    };
    // The rest of an image in parts is answered at once.
    let max_wait_ms = if request.image_after.is_some() {
        0
    } else {
        request.max_wait_ms.min(MAX_FETCH_WAIT_MS)
    };
    let wait = Duration::from_millis(max_wait_ms);
    let found = tokio::time::timeout(wait, images.wait_for(newer))
        .await
        .ok()
        .and_then(Result::ok)
        .map(|image| image.clone());
    let image = found.unwrap_or_else(|| images.borrow().clone());
    answer(&image, recent, request)
}

/// What `request` gets from a voter whose image is `image`: the next part
/// of a pinned image it is fetching in parts, else the entries after
/// `after_offset` when `recent` holds them all, else the whole image (in
/// parts when large) when it is newer, else only the offset and controller.
pub(crate) fn answer(
    image: &Arc<MetadataImage>,
    recent: &RecentBatches,
    request: &FetchMetadataRequest,
) -> FetchMetadataResponse {
    answer_within(
        image,
        recent,
        request,
        MAX_ANSWER_RECORD_BYTES,
        MAX_ANSWER_IMAGE_BYTES,
    )
}

/// [`answer`] with the entries capped at about `max_bytes` of JSON (at
/// least one entry): the answer then stops at the last entry included and
/// the observer asks again at once for the rest; and an image's topics cut
/// in parts of about `max_image_bytes`. Keeps an answer well under the
/// transport's frame limit when an observer is far behind.
fn answer_within(
    image: &Arc<MetadataImage>,
    recent: &RecentBatches,
    request: &FetchMetadataRequest,
    max_bytes: usize,
    max_image_bytes: usize,
) -> FetchMetadataResponse {
    let mut response = FetchMetadataResponse {
        cluster_id: image.cluster_id.clone(),
        offset: image.last_applied_offset,
        controller_id: image.controller_id,
        ..FetchMetadataResponse::default()
    };
    if let Some((offset, after)) = &request.image_after {
        if let Some(pinned) = recent.pinned(*offset) {
            let (part, incomplete) = image_part(&pinned, Some(after), max_image_bytes);
            response.offset = pinned.last_applied_offset;
            response.image = Some(part);
            response.image_continues_after = Some(after.clone());
            response.image_incomplete = incomplete;
            return response;
        }
        // Dropped (or another voter's): start over with the current image.
        return whole_image(image, recent, response, max_image_bytes);
    }
    if image.last_applied_offset <= request.after_offset {
        return response;
    }
    let batches = (!request.full_image)
        .then(|| recent.between(request.after_offset, image.last_applied_offset))
        .flatten();
    match batches {
        Some(batches) => {
            let mut bytes = 0usize;
            for entry in batches {
                let size = serde_json::to_vec(&entry.1).map_or(usize::MAX, |v| v.len());
                if !response.batches.is_empty() && bytes.saturating_add(size) > max_bytes {
                    break;
                }
                bytes = bytes.saturating_add(size);
                response.offset = entry.0;
                response.batches.push(entry);
            }
        }
        None => return whole_image(image, recent, response, max_image_bytes),
    }
    response
}

/// `response` with the first part of `image` (all of it when it fits in
/// `max_image_bytes`, else pinned for the parts after).
fn whole_image(
    image: &Arc<MetadataImage>,
    recent: &RecentBatches,
    mut response: FetchMetadataResponse,
    max_image_bytes: usize,
) -> FetchMetadataResponse {
    let (part, incomplete) = image_part(image, None, max_image_bytes);
    if incomplete {
        recent.pin(image);
    }
    response.offset = image.last_applied_offset;
    response.image = Some(part);
    response.image_incomplete = incomplete;
    response
}

/// `image` with only the topics after `after` (all from the first without
/// it) that fit in about `max_bytes` of JSON (at least one), and whether
/// topics remain after them.
fn image_part(
    image: &MetadataImage,
    after: Option<&str>,
    max_bytes: usize,
) -> (MetadataImage, bool) {
    let mut part = MetadataImage {
        cluster_id: image.cluster_id.clone(),
        controller_id: image.controller_id,
        brokers: image.brokers.clone(),
        topics: BTreeMap::new(),
        topic_names_by_id: HashMap::new(),
        broker_configs: image.broker_configs.clone(),
        features: image.features.clone(),
        next_producer_id: image.next_producer_id,
        scram_credentials: image.scram_credentials.clone(),
        acls: image.acls.clone(),
        client_quotas: image.client_quotas.clone(),
        last_applied_offset: image.last_applied_offset,
    };
    let start = after.map_or(Bound::Unbounded, Bound::Excluded);
    let mut bytes = 0usize;
    for (name, topic) in image.topics.range::<str, _>((start, Bound::Unbounded)) {
        let size = json_len(topic);
        if !part.topics.is_empty() && bytes.saturating_add(size) > max_bytes {
            return (part, true);
        }
        bytes = bytes.saturating_add(size);
        part.topics.insert(name.clone(), topic.clone());
        part.topic_names_by_id.insert(topic.topic_id, name.clone());
    }
    (part, false)
}

/// The length of `value` in JSON, counted without keeping the bytes.
pub(crate) fn json_len(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
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
    /// The active controller as last reported by a voter (a command in
    /// flight to another one watches it, see [`ObserverInner::forward`]).
    leader: watch::Sender<Option<VoterAddress>>,
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
                    id: UNKNOWN_NODE,
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
                leader: watch::Sender::new(None),
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
            let sent = Instant::now();
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
                Err(
                    TransportError::Unreachable { reason, .. }
                    | TransportError::Refused { reason, .. },
                ) => {
                    tracing::debug!(target = %target.address, %reason, "voter unreachable; trying another");
                    inner.forget_leader(&target);
                }
                Err(TransportError::TooLarge { bytes, .. }) => {
                    return Err(crate::quorum::forward_too_large(bytes));
                }
                Err(TransportError::Network { reason, .. }) if command.is_read_only() => {
                    // Nothing to run twice: ask again.
                    tracing::debug!(target = %target.address, %reason, "read-only command lost; retrying");
                    inner.forget_leader(&target);
                }
                Err(TransportError::Network { reason, .. }) => {
                    inner.forget_leader(&target);
                    return Err(forward_connection_lost(
                        &format!("the active controller at {}", target.address),
                        &reason,
                        sent.elapsed(),
                    ));
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
        self.leader.borrow().clone()
    }

    fn set_leader(&self, leader: Option<VoterAddress>) {
        self.leader.send_if_modified(|known| {
            let changed = *known != leader;
            *known = leader;
            changed
        });
    }

    /// Forgets the active controller if it is `target` (it failed).
    fn forget_leader(&self, target: &VoterAddress) {
        self.leader.send_if_modified(|known| {
            let forget = known.as_ref() == Some(target);
            if forget {
                *known = None;
            }
            forget
        });
    }

    fn voter_by_id(&self, id: i32) -> Option<VoterAddress> {
        self.bootstrap
            .iter()
            .find(|v| v.id == id as u64 && v.id != UNKNOWN_NODE)
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

    /// The next configured voter (in turn) other than `leader`; `leader`
    /// itself when it is the only one.
    fn other_voter(&self, leader: &VoterAddress, next: &mut usize) -> VoterAddress {
        for _ in 0..self.bootstrap.len() {
            let candidate = &self.bootstrap[*next % self.bootstrap.len()];
            *next = next.wrapping_add(1);
            if candidate.address != leader.address {
                return candidate.clone();
            }
        }
        leader.clone()
    }

    /// Sends `command` to `target` on the command client. Gives up (a
    /// lost connection: the command may or may not have run) as soon as a
    /// voter names another active controller, as the voter's forward does
    /// (Kafka's `NodeToControllerRequestThread` disconnects from a
    /// replaced controller): a paused one would hold it for the whole
    /// forward timeout, past this broker's session.
    async fn forward(
        &self,
        target: &VoterAddress,
        command: &ControllerCommand,
    ) -> Result<Result<CommandOutcome, ControllerError>, TransportError> {
        let mut slot = self.command_client.lock().await;
        let client = client_for(self, &mut slot, target);
        let mut known = self.leader.subscribe();
        // Another voter, by id and by address (a bootstrap server's id is
        // not known).
        let replaced = known.wait_for(|leader| {
            leader
                .as_ref()
                .is_some_and(|l| l.id != target.id && l.address != target.address)
        });
        let answer = tokio::select! {
            answer = client.call(
                QuorumRequest::Command(command.clone()),
                self.options.forward_timeout,
            ) => Some(answer),
            _ = replaced => None,
        };
        let Some(answer) = answer else {
            // Its answer may still come on this connection: not reused.
            *slot = None;
            return Err(TransportError::Network {
                target: target.id,
                reason: "another active controller was named while the command was in flight"
                    .to_owned(),
            });
        };
        match answer? {
            QuorumResponse::Command(result) => Ok(result),
            other => Err(TransportError::Network {
                target: target.id,
                reason: format!("response of the wrong kind: {other:?}"),
            }),
        }
    }

    /// Takes what a voter answered (see [`next_image`]), holding the parts
    /// of an image in `pending`; false when its entries did not replay here
    /// (the next fetch asks for the image).
    fn take(&self, pending: &mut PendingImage, response: FetchMetadataResponse) -> bool {
        let current = self.images.borrow().clone();
        match next_image(&current, pending, response) {
            Next::Unchanged | Next::MoreParts => true,
            Next::Image(image) => {
                self.offer(*image);
                true
            }
            Next::NeedImage => false,
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

/// What an observer does with a voter's answer.
#[derive(Debug, PartialEq)]
pub(crate) enum Next {
    /// Nothing newer (or older than what it has: a lagging voter).
    Unchanged,
    /// Publish this image.
    Image(Box<MetadataImage>),
    /// The entries did not replay or left a gap, or a part of an image
    /// does not continue the parts held: ask for the whole image.
    NeedImage,
    /// A part of an image is held: ask for the next one.
    MoreParts,
}

/// An image being received in parts: what the observer holds so far.
pub(crate) type PendingImage = Option<MetadataImage>;

/// What the observer asks for to continue `pending`: its offset and the
/// last topic held.
fn continuation(pending: &PendingImage) -> Option<(u64, String)> {
    pending.as_ref().map(|image| {
        (
            image.last_applied_offset,
            image.topics.keys().next_back().cloned().unwrap_or_default(),
        )
    })
}

/// The observer's image after `response`, from `current`: the voter's image
/// as is (once `pending` holds all its parts), or `current` with the voter's
/// entries replayed all or nothing per entry with [`MetadataImage::apply`]
/// (as the voters' state machine does), with the voter's controller.
pub(crate) fn next_image(
    current: &MetadataImage,
    pending: &mut PendingImage,
    response: FetchMetadataResponse,
) -> Next {
    let held = pending.take();
    if let Some(mut image) = response.image {
        if let Some(after) = &response.image_continues_after {
            match held {
                Some(mut whole)
                    if whole.last_applied_offset == image.last_applied_offset
                        && whole.topics.keys().next_back() == Some(after) =>
                {
                    whole.topics.append(&mut image.topics);
                    whole.topic_names_by_id.extend(image.topic_names_by_id);
                    image.topics = whole.topics;
                    image.topic_names_by_id = whole.topic_names_by_id;
                }
                _ => {
                    tracing::debug!(
                        offset = image.last_applied_offset,
                        "a part of an image does not continue the parts held; starting over"
                    );
                    return Next::NeedImage;
                }
            }
        }
        image.controller_id = response.controller_id;
        if response.image_incomplete {
            *pending = Some(image);
            return Next::MoreParts;
        }
        return Next::Image(Box::new(image));
    }
    if response.offset < current.last_applied_offset {
        return Next::Unchanged;
    }
    let mut next = current.clone();
    for (offset, records) in &response.batches {
        if *offset <= next.last_applied_offset {
            continue;
        }
        if *offset != next.last_applied_offset + 1 {
            tracing::warn!(
                expected = next.last_applied_offset + 1,
                offset,
                "metadata entries from a voter skip an offset; fetching its image"
            );
            return Next::NeedImage;
        }
        let mut replayed = next.clone();
        if let Some(error) = records.iter().find_map(|r| replayed.apply(r).err()) {
            tracing::warn!(offset, %error, "metadata entry does not replay; fetching the image");
            return Next::NeedImage;
        }
        next = replayed;
        next.last_applied_offset = *offset;
    }
    if next.last_applied_offset != response.offset {
        return Next::NeedImage;
    }
    next.controller_id = response.controller_id;
    if next == *current {
        return Next::Unchanged;
    }
    Next::Image(Box::new(next))
}

/// The client in `slot` when it talks to `target`, else a new one.
fn client_for<'a>(
    inner: &ObserverInner,
    slot: &'a mut Option<(VoterAddress, PeerClient)>,
    target: &VoterAddress,
) -> &'a mut PeerClient {
    if slot.as_ref().is_none_or(|(t, _)| t != target) {
        let route = Route::new(&inner.cluster_id, inner.node_id as u64, target.id);
        let client = inner.transport.client(route, &target.address);
        *slot = Some((target.clone(), client));
    }
    match slot {
        Some((_, client)) => client,
        None => unreachable!("set above"),
    }
}

/// The observer's fetch loop: long-polls the active controller (or, while
/// none is known, the configured voters in turn) and publishes every newer
/// image. After a long poll that brought nothing, it asks another voter once
/// without waiting: a leader cut off from the other voters still answers
/// (openraft leaders do not step down on their own), and a voter with a
/// newer log names the new active controller. Ends when aborted.
async fn follow(inner: Arc<ObserverInner>) {
    // One connection per voter address, kept across calls: the probes
    // alternate between the voters that are not the leader, and a single
    // slot dialled (and, over TLS, handshook and authenticated) anew at
    // each switch, closing the previous connection every few hundred ms.
    let mut slots: BTreeMap<String, Option<(VoterAddress, PeerClient)>> = BTreeMap::new();
    let mut next_bootstrap = 0usize;
    let mut next_probe = 0usize;
    let mut full_image = false;
    let mut pending: PendingImage = None;
    let mut probe = false;
    let mut failures = 0u64;
    loop {
        let (after_offset, known_controller) = {
            let image = inner.images.borrow();
            (image.last_applied_offset, image.controller_id)
        };
        let leader_target = inner.leader();
        let probing = probe && leader_target.is_some();
        probe = false;
        let (target, max_wait) = match (&leader_target, probing) {
            (Some(leader), true) => (inner.other_voter(leader, &mut next_probe), Duration::ZERO),
            _ => (
                inner.leader_or_bootstrap(&mut next_bootstrap),
                FETCH_MAX_WAIT,
            ),
        };
        let slot = slots.entry(target.address.clone()).or_default();
        let request = FetchMetadataRequest {
            observer_id: inner.node_id,
            after_offset,
            known_controller,
            max_wait_ms: max_wait.as_millis() as u64,
            full_image,
            image_after: continuation(&pending),
        };
        let client = client_for(&inner, slot, &target);
        let answer = client
            .call(
                QuorumRequest::FetchMetadata(request),
                max_wait + FETCH_ANSWER_GRACE.min(inner.options.forward_timeout),
            )
            .await;
        if answer.is_ok() {
            failures = 0;
        }
        match answer {
            Ok(QuorumResponse::FetchMetadata(Ok(response)))
                if response.cluster_id != inner.cluster_id =>
            {
                tracing::error!(
                    target = %target.address,
                    ours = %inner.cluster_id,
                    theirs = %response.cluster_id,
                    "a voter of another cluster answered; ignoring it (check \
                     controller.quorum.voters and the cluster id this node was formatted with)"
                );
                if !probing {
                    inner.forget_leader(&target);
                }
                *slot = None;
                tokio::time::sleep(OTHER_CLUSTER_BACKOFF).await;
            }
            Ok(QuorumResponse::FetchMetadata(Ok(mut response))) => {
                let leader = response
                    .leader
                    .take()
                    .map(|(id, address)| VoterAddress { id, address });
                let newer = response.offset > after_offset;
                let nothing_new =
                    response.offset == after_offset && response.controller_id == known_controller;
                if probing {
                    // Only a voter ahead of this node knows better.
                    if newer {
                        full_image = !inner.take(&mut pending, response);
                        if leader.is_some() {
                            inner.set_leader(leader);
                        }
                    }
                    continue;
                }
                if response.offset < after_offset {
                    // A voter behind this node (a lagging follower, or a
                    // deposed leader cut off from the quorum that still
                    // names itself) knows less than it: ignore its word on
                    // who leads and ask the others.
                    tracing::debug!(
                        target = %target.address,
                        its_offset = response.offset,
                        ours = after_offset,
                        "voter behind this node; asking another"
                    );
                    inner.forget_leader(&target);
                    *slot = None;
                    tokio::time::sleep(FETCH_RETRY_BACKOFF).await;
                    continue;
                }
                full_image = !inner.take(&mut pending, response);
                if leader.is_none() {
                    // The voter knows no leader: ask the next one.
                    inner.forget_leader(&target);
                    *slot = None;
                    tokio::time::sleep(FETCH_RETRY_BACKOFF).await;
                } else {
                    inner.set_leader(leader);
                    probe = nothing_new;
                }
            }
            Ok(other) => {
                tracing::debug!(target = %target.address, answer = ?other, "unexpected fetch answer");
                if !probing {
                    inner.forget_leader(&target);
                }
                *slot = None;
                tokio::time::sleep(FETCH_RETRY_BACKOFF).await;
            }
            Err(TransportError::Refused { reason, .. }) => {
                // The node at that address is of another cluster (or
                // another node): as an answer of another cluster, above.
                // The client warned; its connection stays (a new one would
                // be refused the same).
                tracing::debug!(target = %target.address, %reason, "metadata fetch refused; trying another voter");
                if !probing {
                    inner.forget_leader(&target);
                }
                tokio::time::sleep(OTHER_CLUSTER_BACKOFF).await;
            }
            Err(e) => {
                failures += 1;
                if failures % FAILURES_BEFORE_WARNING == 0 {
                    // A voter list that reaches no voter (wrong addresses,
                    // a single voter without a CONTROLLER listener) shows
                    // up here instead of only at debug level.
                    tracing::warn!(
                        target = %target.address,
                        error = %e,
                        failures,
                        "metadata fetches keep failing; is controller.quorum.voters (or \
                         controller.quorum.bootstrap.servers) right?"
                    );
                }
                tracing::debug!(target = %target.address, error = %e, "metadata fetch failed; trying another voter");
                if !probing {
                    inner.forget_leader(&target);
                }
                *slot = None;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::TopicRecord;

    fn topic(name: &str, id: u128) -> Vec<MetadataRecord> {
        vec![MetadataRecord::Topic(TopicRecord {
            name: name.into(),
            topic_id: uuid::Uuid::from_u128(id),
        })]
    }

    fn request(after_offset: u64) -> FetchMetadataRequest {
        FetchMetadataRequest {
            observer_id: 4,
            after_offset,
            known_controller: Some(1),
            max_wait_ms: 0,
            full_image: false,
            image_after: None,
        }
    }

    /// A voter that applied a blank entry at 1 and topics t2..=t`last` at
    /// 2..=`last`, keeping the last `capacity` entries.
    fn voter_at(last: u64, capacity: usize) -> (Arc<MetadataImage>, RecentBatches) {
        let recent = RecentBatches::new(capacity);
        let mut image = MetadataImage::new("c");
        image.controller_id = Some(1);
        recent.push(1, vec![]);
        image.last_applied_offset = 1;
        for offset in 2..=last {
            let records = topic(&format!("t{offset}"), offset as u128);
            for r in &records {
                image.apply(r).unwrap();
            }
            image.last_applied_offset = offset;
            recent.push(offset, records);
        }
        (Arc::new(image), recent)
    }

    fn voter(capacity: usize) -> (Arc<MetadataImage>, RecentBatches) {
        voter_at(5, capacity)
    }

    /// Far behind, an observer gets the entries in pieces that stay under
    /// the byte budget, each ending at the last entry it holds, and it can
    /// replay them in turn up to the voter's image.
    #[test]
    fn a_long_answer_is_cut_at_the_byte_budget_and_ends_at_its_last_entry() {
        let (image, recent) = voter_at(9, 20);
        let one_entry = serde_json::to_vec(&topic("t2", 2)).unwrap().len();
        let mut observer = MetadataImage::new("c");
        observer.last_applied_offset = 1;
        let mut answers = 0;
        while observer.last_applied_offset < image.last_applied_offset {
            let answered = answer_within(
                &image,
                &recent,
                &request(observer.last_applied_offset),
                2 * one_entry + 2,
                MAX_ANSWER_IMAGE_BYTES,
            );
            assert!(answered.batches.len() <= 2, "{answered:?}");
            assert_eq!(answered.offset, answered.batches.last().unwrap().0);
            match next_image(&observer, &mut None, answered) {
                Next::Image(next) => observer = *next,
                other => panic!("{other:?}"),
            }
            answers += 1;
        }
        assert_eq!(answers, 4);
        observer.cluster_id = image.cluster_id.clone();
        assert_eq!(observer, *image);
    }

    /// An image larger than the part budget goes in parts, each under the
    /// budget and each continuing after the last topic held, all from the
    /// image the voter pinned with the first part even when its own image
    /// moved on meanwhile; the observer publishes it only once it holds
    /// every part, equal to the voter's.
    #[test]
    fn an_image_larger_than_an_answer_is_sent_in_parts() {
        let (image, recent) = voter_at(40, 0);
        let (moved_on, _) = voter_at(41, 0);
        let one_topic = json_len(&image.topics["t2"]);
        // Five topics of names one character longer than "t2".
        let budget = 5 * one_topic + 5;
        assert!(json_len(&*image) > 4 * budget, "several parts");
        let observer = MetadataImage::new("c");
        let mut pending = None;
        let mut parts = 0;
        let whole = loop {
            let ask = FetchMetadataRequest {
                image_after: continuation(&pending),
                ..request(0)
            };
            // After the first part the voter applies another entry.
            let current = if parts == 0 { &image } else { &moved_on };
            let answered = answer_within(current, &recent, &ask, usize::MAX, budget);
            let part = answered.image.as_ref().expect("an image part");
            let bytes: usize = part.topics.values().map(json_len).sum();
            assert!(bytes <= budget, "{bytes} bytes of topics");
            assert!(part.topics.len() <= 5, "{} topics", part.topics.len());
            assert_eq!(answered.offset, 40);
            assert_eq!(
                answered.image_continues_after,
                ask.image_after.map(|(_, name)| name)
            );
            parts += 1;
            match next_image(&observer, &mut pending, answered) {
                Next::MoreParts => assert!(pending.is_some()),
                Next::Image(whole) => break *whole,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(parts, 8, "39 topics in parts of at most 5");
        assert!(pending.is_none());
        assert_eq!(whole, *image);
    }

    /// A continuation of an image the voter no longer pins gets the first
    /// part of its current image, which the observer takes as a new start;
    /// a part that does not continue the parts held (another topic, another
    /// image) drops them and asks for the whole image.
    #[test]
    fn parts_that_do_not_continue_start_over() {
        let (image, recent) = voter_at(40, 0);
        let budget = 5 * json_len(&image.topics["t2"]) + 5;
        let observer = MetadataImage::new("c");
        let mut pending = None;
        let first = answer_within(&image, &recent, &request(0), usize::MAX, budget);
        assert!(first.image_incomplete);
        assert_eq!(next_image(&observer, &mut pending, first), Next::MoreParts);
        let held = continuation(&pending).expect("a part held");

        // The voter starts sending PINNED_IMAGES newer images in parts:
        // the one at 40 is dropped.
        let mut newest = image.clone();
        for last in 41..41 + PINNED_IMAGES as u64 {
            newest = voter_at(last, 0).0;
            assert!(
                answer_within(&newest, &recent, &request(0), usize::MAX, budget).image_incomplete
            );
        }
        let ask = FetchMetadataRequest {
            image_after: Some(held.clone()),
            ..request(0)
        };
        let restart = answer_within(&newest, &recent, &ask, usize::MAX, budget);
        assert_eq!(restart.image_continues_after, None);
        assert_eq!(restart.offset, newest.last_applied_offset);
        assert_eq!(
            next_image(&observer, &mut pending, restart),
            Next::MoreParts
        );
        assert_eq!(
            pending.as_ref().map(|p| p.last_applied_offset),
            Some(newest.last_applied_offset),
            "the new image replaces the parts held"
        );

        // A part after a topic the observer does not hold last.
        let stray = FetchMetadataResponse {
            offset: newest.last_applied_offset,
            image: Some(image_part(&newest, Some("t99"), budget).0),
            image_continues_after: Some("t99".into()),
            image_incomplete: true,
            ..FetchMetadataResponse::default()
        };
        assert_eq!(next_image(&observer, &mut pending, stray), Next::NeedImage);
        assert!(pending.is_none());

        // A part of another image after the right topic.
        let mut pending = None;
        let first = answer_within(&image, &recent, &request(0), usize::MAX, budget);
        assert_eq!(next_image(&observer, &mut pending, first), Next::MoreParts);
        let (_, after) = continuation(&pending).unwrap();
        let other = FetchMetadataResponse {
            offset: newest.last_applied_offset,
            image: Some(image_part(&newest, Some(&after), budget).0),
            image_continues_after: Some(after),
            image_incomplete: false,
            ..FetchMetadataResponse::default()
        };
        assert_eq!(next_image(&observer, &mut pending, other), Next::NeedImage);
        assert!(pending.is_none());
    }

    #[test]
    fn a_voter_answers_records_it_holds_and_its_image_otherwise() {
        let (image, recent) = voter(10);
        let answered = answer(&image, &recent, &request(2));
        assert!(answered.image.is_none());
        assert_eq!(
            answered.batches.iter().map(|(o, _)| *o).collect::<Vec<_>>(),
            vec![3, 4, 5]
        );
        assert_eq!((answered.offset, answered.controller_id), (5, Some(1)));
        // Nothing newer: neither.
        let answered = answer(&image, &recent, &request(5));
        assert!(answered.image.is_none() && answered.batches.is_empty());
        // Asked for the image: the image.
        let full = FetchMetadataRequest {
            full_image: true,
            ..request(2)
        };
        assert_eq!(answer(&image, &recent, &full).image.as_ref(), Some(&*image));

        // Entries before the last 2 are gone (as a compacted log): the
        // snapshot path.
        let (image, recent) = voter(2);
        let answered = answer(&image, &recent, &request(2));
        assert!(answered.batches.is_empty());
        assert_eq!(answered.image.as_ref(), Some(&*image));
        assert_eq!(answer(&image, &recent, &request(3)).batches.len(), 2);
        // A snapshot installed on the voter forgets them all.
        recent.clear();
        assert!(answer(&image, &recent, &request(4)).image.is_some());
    }

    #[test]
    fn an_observer_replays_records_to_the_voters_image_and_ignores_older_answers() {
        let (voter_image, recent) = voter(10);
        // From nothing, and from offset 3 (the image a voter had there).
        for mine in [MetadataImage::new("c"), (*voter_at(3, 0).0).clone()] {
            let after = mine.last_applied_offset;
            let response = answer(&voter_image, &recent, &request(after));
            assert!(response.image.is_none(), "records, not the image");
            match next_image(&mine, &mut None, response) {
                Next::Image(image) => assert_eq!(*image, *voter_image, "after {after}"),
                other => panic!("after {after}: {other:?}"),
            }
        }
        // An answer older than what the observer has changes nothing.
        let stale = FetchMetadataResponse {
            offset: 2,
            controller_id: Some(2),
            ..FetchMetadataResponse::default()
        };
        assert_eq!(next_image(&voter_image, &mut None, stale), Next::Unchanged);
        // A gap, or a record that does not replay: ask for the image.
        let gap = FetchMetadataResponse {
            offset: 7,
            batches: vec![(7, vec![])],
            ..FetchMetadataResponse::default()
        };
        assert_eq!(next_image(&voter_image, &mut None, gap), Next::NeedImage);
        let duplicate = FetchMetadataResponse {
            offset: 6,
            batches: vec![(6, topic("t2", 2))],
            ..FetchMetadataResponse::default()
        };
        assert_eq!(
            next_image(&voter_image, &mut None, duplicate),
            Next::NeedImage
        );
    }
}
