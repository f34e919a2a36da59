//! Incremental fetch sessions on the leader (KIP-227): Kafka's
//! `FetchSession`, `CachedPartition`, `FetchSessionCache`, `FetchManager`
//! and the `FetchContext`s (`SessionlessFetchContext`, `FullFetchContext`,
//! `IncrementalFetchContext`, `SessionErrorContext`), Kafka 4.1's
//! `org.apache.kafka.server` package.
//!
//! A session remembers, per partition, what the fetcher last asked for
//! (fetch offset, log start offset, leader epochs, max bytes) and what it
//! was last told (high watermark, last stable offset, log start offset).
//! An incremental Fetch names only the partitions whose request changed
//! (and `forgotten_topics_data` those to drop); the leader reads every active
//! partition of the session and answers only those with records, an
//! error, a diverging epoch or a changed offset
//! ([`CachedPartition::maybe_update_response_data`]).
//!
//! Request metadata `(session_id, epoch)`, as Kafka's `FetchMetadata`:
//! - `(0, -1)`: sessionless full fetch, answered with session id 0;
//! - `(0, 0)`: full fetch that creates a session: the answer carries its
//!   id and every partition. **Weir creates sessions for followers only**
//!   (a Fetch with a replica id): a consumer's full fetch is answered with
//!   session id 0, as Kafka answers when it declines to cache a session, so
//!   consumer clients keep sending full fetches;
//! - `(id, 0)` / `(id, -1)`: session `id` is closed, then as `(0, 0)` /
//!   `(0, -1)`;
//! - `(id, epoch > 0)`: incremental; `epoch` must be the session's next
//!   epoch (INVALID_FETCH_SESSION_EPOCH), `id` must be cached
//!   (FETCH_SESSION_ID_NOT_FOUND), and the session must use topic ids iff
//!   the request does (v13+, FETCH_SESSION_TOPIC_ID_ERROR). A session left
//!   with no partition is closed and the fetch is answered sessionless.
//!
//! The cache holds at most `max.incremental.fetch.session.cache.slots`
//! sessions; at the limit a new session evicts the least recently used
//! one. Kafka first evicts a session unused for 120 s, else one with fewer
//! partitions created more than 120 s ago, and lets a follower's
//! (privileged) session evict a consumer's; here every session is a
//! follower's, so the least recently used one goes.
//!
//! **Quiet partitions (past Kafka).** Kafka reads every partition of an
//! incremental session on every Fetch, so an idle follower session of N
//! partitions costs N reads twice per `replica.fetch.wait.max.ms`. Weir
//! skips a partition the read found *quiet* for its follower: nothing to
//! send, the follower at the leader's log end offset and in the ISR
//! ([`PartitionAnswer::quiet`]). A quiet partition leaves the fetch order
//! and registers a one-shot [`QuietWatch`] with the partition
//! ([`QuietPartition::watch_quiet`]); the partition's next change (append,
//! truncation, high watermark, log start offset, leadership, ISR, removal)
//! puts it back through the session's [`SessionWaker`], which also
//! completes a parked Fetch of the session (on any change: a follower thus
//! learns a moved high watermark or log start offset of a quiet partition
//! at once, where Kafka answers it at `replica.fetch.wait.max.ms`). The
//! watches of sessions that are gone (evicted, closed) are dropped when
//! the partition takes its next watch, so an idle partition's watches are
//! bounded by the sessions alive when it took its last one (a live session
//! may hold an older watch beside its current one, superseded when the
//! partition was active again). A partition named again by the
//! follower (its request changed) is active again too. What is skipped
//! would have been answered with nothing: its request and its state are
//! those of the read that found it quiet. The one thing the skipped reads
//! did in Kafka is refresh the follower's fetch state on the leader
//! (`Replica.updateFetchStateOrThrow`): every Fetch of the session counts
//! as a fetch of each of its partitions at the offset it last asked for.
//! A quiet partition keeps that without a read: its watch carries a
//! [`QuietLink`] that the partition attaches to the follower's state on
//! the leader, through which the follower's fetch time is the session's
//! last Fetch (the follower was at the leader's log end offset when the
//! read found it quiet, and nothing changed since). The partition's next
//! change freezes the link at the session's last Fetch before it, as do
//! the partition becoming active again or being forgotten; the follower's
//! next recorded Fetch replaces it. So the follower's last fetch and
//! caught-up times are Kafka's, with no periodic work (one departure: a
//! session Fetch that lands between a change and the freeze right after it
//! still counts, as one read just before the change would have). An idle
//! session then costs O(changed partitions) per Fetch.
//!
//! This module owns the session rules only: it reads no log and resolves
//! no partition (`handlers/fetch.rs` does both and hands back what it read
//! as [`PartitionAnswer`]s); partitions are seen only through
//! [`QuietPartition`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::sync::Notify;
use uuid::Uuid;

/// Kafka's `FetchMetadata.INVALID_SESSION_ID`: no session.
pub const INVALID_SESSION_ID: i32 = 0;
/// Kafka's `FetchMetadata.INITIAL_EPOCH`: a full fetch that asks for a
/// session.
pub const INITIAL_EPOCH: i32 = 0;
/// Kafka's `FetchMetadata.FINAL_EPOCH`: a full fetch without a session.
pub const FINAL_EPOCH: i32 = -1;

/// Kafka's `FetchMetadata.nextEpoch`: the epoch after `epoch` (1 after
/// `i32::MAX`; [`FINAL_EPOCH`] stays final).
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        FINAL_EPOCH
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// A partition as a Fetch names it: by topic id from v13 (`topic` empty),
/// by topic name before (`topic_id` nil).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PartitionKey {
    /// The topic id (v13+), else nil.
    pub topic_id: Uuid,
    /// The topic name (before v13), else empty.
    pub topic: StrBytes,
    /// The partition index.
    pub partition: i32,
}

/// What a Fetch asks of one partition (Kafka's `FetchRequest.PartitionData`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartitionRequest {
    /// First offset wanted.
    pub fetch_offset: i64,
    /// The fetcher's log start offset (v5+; -1 for consumers).
    pub log_start_offset: i64,
    /// Bytes wanted from this partition.
    pub partition_max_bytes: i32,
    /// KIP-320 current leader epoch, -1 when absent.
    pub current_leader_epoch: i32,
    /// KIP-320 `LastFetchedEpoch` (v12+), -1 when absent.
    pub last_fetched_epoch: i32,
}

/// What a read found for one partition, as far as the session cares;
/// `H` is the partition's handle (see [`QuietPartition`]).
#[derive(Clone, Debug)]
pub struct PartitionAnswer<H> {
    /// Record bytes returned.
    pub record_bytes: usize,
    /// The partition's error code (0: none).
    pub error_code: i16,
    /// The high watermark answered.
    pub high_watermark: i64,
    /// The last stable offset answered.
    pub last_stable_offset: i64,
    /// The leader's log start offset answered.
    pub log_start_offset: i64,
    /// A diverging epoch was answered (KIP-320).
    pub diverging_epoch: bool,
    /// The read found the partition quiet for a follower (see the module
    /// docs): its handle and its [`QuietPartition::fetch_state_version`]
    /// taken before the read.
    pub quiet: Option<(H, u64)>,
}

/// A partition as a session sees it, to skip it while it is quiet.
pub trait QuietPartition: Clone {
    /// A number that changes (before the change is visible) whenever a
    /// follower's Fetch of the partition could be answered differently.
    fn fetch_state_version(&self) -> u64;

    /// Registers `watch` to be woken once, at the partition's next change.
    /// Returns false when the version is no longer `version` (the
    /// partition changed since the read that found it quiet); `watch` may
    /// then still fire, harmlessly.
    fn watch_quiet(&self, version: u64, watch: QuietWatch) -> bool;

    /// Attaches the [`QuietLink`] of a follower session's watch that
    /// [`QuietPartition::watch_quiet`] accepted: the follower's state on
    /// the leader counts the session's Fetches through it (see the module
    /// docs). Called after the watch is set and without the session cache
    /// lock; a change in between has frozen the link already.
    fn link_quiet(&self, link: Arc<QuietLink>);
}

/// What a quiet partition wakes at its next change: a session's
/// [`SessionWaker`] (weakly: a closed session is not kept alive) and the
/// key under which the session holds the partition; for a follower's
/// session, the [`QuietLink`] that stands for the follower's fetches of
/// the partition while it is quiet.
#[derive(Debug)]
pub struct QuietWatch {
    waker: Weak<SessionWaker>,
    key: PartitionKey,
    link: Option<Arc<QuietLink>>,
}

impl QuietWatch {
    /// A watch that wakes `waker` with `key`.
    pub fn new(waker: &Arc<SessionWaker>, key: PartitionKey) -> Self {
        QuietWatch {
            waker: Arc::downgrade(waker),
            key,
            link: None,
        }
    }

    /// A follower session's watch: wakes `waker` with `key` and carries
    /// `link`.
    pub(crate) fn with_link(
        waker: &Arc<SessionWaker>,
        key: PartitionKey,
        link: Arc<QuietLink>,
    ) -> Self {
        QuietWatch {
            waker: Arc::downgrade(waker),
            key,
            link: Some(link),
        }
    }

    /// The follower session's link.
    #[cfg(test)]
    pub(crate) fn link(&self) -> Option<&Arc<QuietLink>> {
        self.link.as_ref()
    }

    /// Tells the session the partition changed (freezing the link first);
    /// nothing more when the session is gone.
    pub fn wake(self) {
        self.freeze_link();
        if let Some(waker) = self.waker.upgrade() {
            waker.wake(self.key);
        }
    }

    /// Whether the session is gone (evicted or closed, its waker dropped);
    /// if so, freezes the link, which no Fetch of the session will stamp
    /// again, and the watch can be dropped without waiting for the
    /// partition's next change.
    pub(crate) fn retire_if_session_closed(&self) -> bool {
        let closed = self.waker.strong_count() == 0;
        if closed {
            self.freeze_link();
        }
        closed
    }

    fn freeze_link(&self) {
        if let Some(link) = &self.link {
            link.freeze();
        }
    }
}

/// `frozen_ms` of a [`QuietLink`] that still follows its session.
const LINK_LIVE: i64 = i64::MIN;

/// The follower's fetches of one quiet partition of its session: each
/// Fetch of the session (stamped in [`FetchManager::new_context`]) counts
/// as a fetch of the partition at the leader's log end offset, until the
/// link is frozen (at the partition's first change, or when the session
/// reads it again or forgets it) at the session's last Fetch before that.
/// Atomics only: the leader reads it under the partition's replication
/// lock; the session stamps it under its cache lock.
#[derive(Debug)]
pub struct QuietLink {
    follower: i32,
    /// The session's last Fetch, ms since the epoch (shared by the
    /// session's links).
    session_fetch_ms: Arc<AtomicI64>,
    /// The fetch time once frozen, [`LINK_LIVE`] before.
    frozen_ms: AtomicI64,
}

impl QuietLink {
    /// A live link of `follower`'s session, whose last Fetch is
    /// `session_fetch_ms`.
    pub(crate) fn new(follower: i32, session_fetch_ms: Arc<AtomicI64>) -> Self {
        QuietLink {
            follower,
            session_fetch_ms,
            frozen_ms: AtomicI64::new(LINK_LIVE),
        }
    }

    /// The follower broker whose session this is.
    pub fn follower(&self) -> i32 {
        self.follower
    }

    /// When the follower last fetched the partition at the log end offset
    /// the link stands for, ms since the epoch.
    pub fn fetch_ms(&self) -> i64 {
        match self.frozen_ms.load(Ordering::SeqCst) {
            LINK_LIVE => self.session_fetch_ms.load(Ordering::SeqCst),
            frozen => frozen,
        }
    }

    /// Stops following the session: later Fetches of it do not count.
    pub fn freeze(&self) {
        let last = self.session_fetch_ms.load(Ordering::SeqCst);
        let _ =
            self.frozen_ms
                .compare_exchange(LINK_LIVE, last, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Whether the link was frozen.
    #[cfg(test)]
    pub(crate) fn is_frozen(&self) -> bool {
        self.frozen_ms.load(Ordering::SeqCst) != LINK_LIVE
    }
}

/// The partitions of one session that changed since they were found quiet,
/// and a notifier a parked Fetch of the session waits on. A follower's
/// fetcher keeps one too, to learn which of its partitions changed since
/// it computed their requests (`replication::fetcher`).
#[derive(Debug, Default)]
pub struct SessionWaker {
    woken: Mutex<Vec<PartitionKey>>,
    notify: Notify,
}

impl SessionWaker {
    fn wake(&self, key: PartitionKey) {
        self.woken
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(key);
        self.notify.notify_waiters();
    }

    /// The keys woken since the last call (a key may repeat).
    pub fn take_woken(&self) -> Vec<PartitionKey> {
        std::mem::take(&mut *self.woken.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Whether a quiet partition changed since the session last looked.
    pub fn any_woken(&self) -> bool {
        !self
            .woken
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// A future resolved by the next wake; enable it before checking
    /// [`SessionWaker::any_woken`] so that no wake is lost.
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }
}

/// Kafka's `CachedPartition`: one partition of a session.
#[derive(Clone, Debug)]
struct CachedPartition {
    /// The fetcher's last request for it.
    request: PartitionRequest,
    /// The high watermark last answered; -1 after an error so the
    /// partition is answered again once the error is gone.
    high_watermark: i64,
    /// The last stable offset last answered.
    last_stable_offset: i64,
    /// The leader's log start offset last answered.
    local_log_start_offset: i64,
    /// Its place in the fetch order ([`FetchSession::order`] while active).
    position: u64,
    /// Set while the partition is quiet (out of [`FetchSession::order`]):
    /// the link its watch carries.
    quiet: Option<Arc<QuietLink>>,
}

impl CachedPartition {
    fn new(request: PartitionRequest) -> Self {
        CachedPartition {
            request,
            high_watermark: -1,
            last_stable_offset: -1,
            local_log_start_offset: -1,
            position: 0,
            quiet: None,
        }
    }

    /// Kafka's `CachedPartition.maybeUpdateResponseData`: whether the
    /// answer must be sent (records, an error, a diverging epoch, or a high
    /// watermark, last stable offset or log start offset other than the
    /// one last sent), remembering what is sent.
    fn maybe_update_response_data<H>(&mut self, answer: &PartitionAnswer<H>) -> bool {
        let mut must_respond = answer.record_bytes > 0 || answer.diverging_epoch;
        if self.high_watermark != answer.high_watermark {
            must_respond = true;
            self.high_watermark = answer.high_watermark;
        }
        if self.last_stable_offset != answer.last_stable_offset {
            must_respond = true;
            self.last_stable_offset = answer.last_stable_offset;
        }
        if self.local_log_start_offset != answer.log_start_offset {
            must_respond = true;
            self.local_log_start_offset = answer.log_start_offset;
        }
        if answer.error_code != 0 {
            self.high_watermark = -1;
            must_respond = true;
        }
        must_respond
    }
}

/// Kafka's `FetchSession`: the partitions of one session in fetch order
/// (a partition that returned records moves to the end, so that
/// `max_bytes` does not always favour the same partitions), the epoch the
/// next request must carry and when it was last used; and, past Kafka,
/// its quiet partitions (see the module docs).
#[derive(Debug)]
struct FetchSession {
    /// Whether the session names topics by id (v13+).
    uses_topic_ids: bool,
    partitions: HashMap<PartitionKey, CachedPartition>,
    /// Fetch order of the active (not quiet) partitions: position to
    /// partition.
    order: BTreeMap<u64, PartitionKey>,
    next_position: u64,
    /// The epoch the next incremental request must carry.
    epoch: i32,
    /// Wall-clock ms of the last request.
    last_used_ms: i64,
    /// Woken by quiet partitions that changed.
    waker: Arc<SessionWaker>,
    /// The follower broker whose session this is.
    follower: i32,
    /// When the follower last fetched (the session's Fetch was accepted),
    /// ms since the epoch; what its [`QuietLink`]s follow.
    fetched_ms: Arc<AtomicI64>,
}

impl FetchSession {
    fn new(uses_topic_ids: bool, follower: i32, now_ms: i64) -> Self {
        FetchSession {
            uses_topic_ids,
            partitions: HashMap::new(),
            order: BTreeMap::new(),
            next_position: 0,
            epoch: next_epoch(INITIAL_EPOCH),
            last_used_ms: now_ms,
            waker: Arc::new(SessionWaker::default()),
            follower,
            fetched_ms: Arc::new(AtomicI64::new(now_ms)),
        }
    }

    /// Adds `key` at the end of the fetch order (or moves it there); it is
    /// active.
    fn push(&mut self, key: PartitionKey, mut cached: CachedPartition) {
        if let Some(old) = self.partitions.get(&key) {
            self.order.remove(&old.position);
        }
        cached.position = self.next_position;
        cached.quiet = None;
        self.next_position += 1;
        self.order.insert(cached.position, key.clone());
        self.partitions.insert(key, cached);
    }

    /// Puts a quiet partition back in the fetch order at its place; its
    /// link stops following the session (the partition is read again).
    fn activate(&mut self, key: &PartitionKey) {
        if let Some(cached) = self.partitions.get_mut(key) {
            if let Some(link) = cached.quiet.take() {
                link.freeze();
                self.order.insert(cached.position, key.clone());
            }
        }
    }

    /// Takes `key` out of the fetch order while it stays at `version`, if
    /// the partition accepts the watch, which carries a [`QuietLink`] to
    /// this session's Fetches: returned with the handle, for the caller
    /// to attach ([`QuietPartition::link_quiet`]) once it has released the
    /// session cache lock.
    fn quiet<H: QuietPartition>(
        &mut self,
        key: &PartitionKey,
        handle: H,
        version: u64,
    ) -> Option<(H, Arc<QuietLink>)> {
        let cached = self.partitions.get_mut(key)?;
        if cached.quiet.is_some() {
            return None;
        }
        let link = Arc::new(QuietLink::new(self.follower, self.fetched_ms.clone()));
        let watch = QuietWatch::with_link(&self.waker, key.clone(), link.clone());
        if !handle.watch_quiet(version, watch) {
            return None;
        }
        cached.quiet = Some(link.clone());
        self.order.remove(&cached.position);
        Some((handle, link))
    }

    /// Kafka's `FetchSession.update`: the request's partitions are added
    /// or replace their cached request (and are active); the forgotten
    /// ones are removed.
    fn update(
        &mut self,
        fetch_data: &[(PartitionKey, PartitionRequest)],
        forgotten: &[PartitionKey],
    ) {
        for (key, request) in fetch_data {
            match self.partitions.get_mut(key) {
                Some(cached) => {
                    cached.request = *request;
                    self.activate(key);
                }
                None => self.push(key.clone(), CachedPartition::new(*request)),
            }
        }
        for key in forgotten {
            if let Some(cached) = self.partitions.remove(key) {
                self.order.remove(&cached.position);
                if let Some(link) = cached.quiet {
                    link.freeze();
                }
            }
        }
    }

    /// Puts back the quiet partitions that changed.
    fn wake(&mut self) {
        for key in self.waker.take_woken() {
            self.activate(&key);
        }
    }

    /// Every active partition with its cached request, in fetch order.
    fn requests(&self) -> Vec<(PartitionKey, PartitionRequest)> {
        self.order
            .values()
            .filter_map(|key| Some((key.clone(), self.partitions.get(key)?.request)))
            .collect()
    }
}

/// Kafka's `FetchSessionCache`: sessions by id, and by last use for
/// eviction.
#[derive(Debug)]
pub struct FetchSessionCache {
    max_entries: usize,
    sessions: HashMap<i32, FetchSession>,
    /// `(last_used_ms, id)` of every session: the first is evicted.
    last_used: BTreeSet<(i64, i32)>,
}

impl FetchSessionCache {
    /// An empty cache of at most `max_entries` sessions
    /// (`max.incremental.fetch.session.cache.slots`; 0: no session is
    /// ever created).
    pub fn new(max_entries: usize) -> Self {
        FetchSessionCache {
            max_entries,
            sessions: HashMap::new(),
            last_used: BTreeSet::new(),
        }
    }

    /// Sessions cached.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether no session is cached.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Whether session `id` is cached.
    pub fn contains(&self, id: i32) -> bool {
        self.sessions.contains_key(&id)
    }

    /// Kafka's `newSessionId`: a random positive id not in use.
    fn new_session_id(&self) -> i32 {
        loop {
            let id = (Uuid::new_v4().as_u128() as u32 & 0x7fff_ffff) as i32;
            if id != INVALID_SESSION_ID && !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }

    /// Kafka's `maybeCreateSession`: caches `session` (evicting the least
    /// recently used one at the limit) and returns its id, or
    /// [`INVALID_SESSION_ID`] when the cache holds no slot.
    fn maybe_create_session(&mut self, session: FetchSession) -> i32 {
        if self.max_entries == 0 {
            return INVALID_SESSION_ID;
        }
        while self.sessions.len() >= self.max_entries {
            let Some(&(_, lru)) = self.last_used.first() else {
                break;
            };
            tracing::debug!(
                session_id = lru,
                "evicting the least recently used fetch session"
            );
            metrics::counter!("weir_fetch_session_evictions_total").increment(1);
            self.remove(lru);
        }
        let id = self.new_session_id();
        self.last_used.insert((session.last_used_ms, id));
        self.sessions.insert(id, session);
        id
    }

    /// Removes session `id`; true when it was cached.
    fn remove(&mut self, id: i32) -> bool {
        match self.sessions.remove(&id) {
            Some(session) => {
                self.last_used.remove(&(session.last_used_ms, id));
                true
            }
            None => false,
        }
    }

    /// Kafka's `touch`: records a use of session `id` at `now_ms`.
    fn touch(&mut self, id: i32, now_ms: i64) {
        if let Some(session) = self.sessions.get_mut(&id) {
            self.last_used.remove(&(session.last_used_ms, id));
            session.last_used_ms = now_ms;
            self.last_used.insert((now_ms, id));
        }
    }
}

/// A Fetch's session metadata and partitions, as decoded.
#[derive(Clone, Debug)]
pub struct SessionRequest {
    /// `session_id` (0: none).
    pub session_id: i32,
    /// `session_epoch`.
    pub epoch: i32,
    /// The request names topics by id (v13+).
    pub uses_topic_ids: bool,
    /// The follower's broker id when the request comes from a follower (a
    /// replica id): only such fetches create sessions.
    pub follower: Option<i32>,
    /// The request's partitions, each once, in request order.
    pub fetch_data: Vec<(PartitionKey, PartitionRequest)>,
    /// `forgotten_topics_data` (v7+).
    pub forgotten: Vec<PartitionKey>,
}

/// Kafka's `FetchContext`: how a Fetch is read and answered.
#[derive(Debug)]
pub enum FetchContext {
    /// `SessionErrorContext`: answered with this top-level error, session id
    /// 0 and no partition; nothing is read.
    SessionError(i16),
    /// `SessionlessFetchContext`: the request's partitions, answered all,
    /// with session id 0.
    Sessionless(Vec<(PartitionKey, PartitionRequest)>),
    /// `FullFetchContext`: the request's partitions, answered all; a
    /// session of them is created.
    Full {
        /// The request names topics by id (v13+).
        uses_topic_ids: bool,
        /// The follower whose session it creates.
        follower: i32,
        /// The request's partitions.
        partitions: Vec<(PartitionKey, PartitionRequest)>,
    },
    /// `IncrementalFetchContext`: every active partition of the session
    /// (updated by the request) is read; only what changed is answered.
    /// Quiet partitions are not read (see the module docs).
    Incremental {
        /// The session.
        session_id: i32,
        /// The epoch the request carried.
        request_epoch: i32,
        /// The session's active partitions in fetch order.
        partitions: Vec<(PartitionKey, PartitionRequest)>,
        /// The session's waker when it has quiet partitions: a parked
        /// Fetch also completes when one of them changes, and then reads
        /// them ([`FetchManager::take_woken`]).
        waker: Option<Arc<SessionWaker>>,
    },
}

impl FetchContext {
    /// The partitions to read, in order.
    pub fn partitions(&self) -> &[(PartitionKey, PartitionRequest)] {
        match self {
            FetchContext::SessionError(_) => &[],
            FetchContext::Sessionless(p)
            | FetchContext::Full { partitions: p, .. }
            | FetchContext::Incremental { partitions: p, .. } => p,
        }
    }
}

/// How a Fetch is answered once read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionAnswer {
    /// Top-level error code (0: none).
    pub error_code: i16,
    /// The session id to answer (0: no session).
    pub session_id: i32,
    /// Per partition of [`FetchContext::partitions`]: whether it is in the
    /// response.
    pub keep: Vec<bool>,
}

/// Kafka's `FetchManager`: the session cache behind one lock, which is
/// never held while a log is read or a fetch is parked.
#[derive(Debug)]
pub struct FetchManager<H> {
    cache: Mutex<FetchSessionCache>,
    handles: std::marker::PhantomData<fn() -> H>,
}

impl<H: QuietPartition> FetchManager<H> {
    /// A manager whose cache holds at most `max_entries` sessions
    /// (`max.incremental.fetch.session.cache.slots`).
    pub fn new(max_entries: usize) -> Self {
        FetchManager {
            cache: Mutex::new(FetchSessionCache::new(max_entries)),
            handles: std::marker::PhantomData,
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, FetchSessionCache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sessions cached.
    pub fn len(&self) -> usize {
        self.cache().len()
    }

    /// Whether no session is cached.
    pub fn is_empty(&self) -> bool {
        self.cache().is_empty()
    }

    /// Kafka's `FetchManager.newContext`: applies the request's session
    /// metadata (see the module doc) and returns what to read. An
    /// incremental request updates its session and advances its epoch
    /// here, before the read.
    pub fn new_context(&self, request: SessionRequest, now_ms: i64) -> FetchContext {
        let SessionRequest {
            session_id,
            epoch,
            uses_topic_ids,
            follower,
            fetch_data,
            forgotten,
        } = request;
        let mut cache = self.cache();
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            if session_id != INVALID_SESSION_ID && cache.remove(session_id) {
                tracing::debug!(session_id, "fetch session closed by a full fetch");
            }
            return match follower {
                Some(follower) if epoch != FINAL_EPOCH => FetchContext::Full {
                    uses_topic_ids,
                    follower,
                    partitions: fetch_data,
                },
                _ => FetchContext::Sessionless(fetch_data),
            };
        }
        let Some(session) = cache.sessions.get_mut(&session_id) else {
            return FetchContext::SessionError(ResponseError::FetchSessionIdNotFound.code());
        };
        if session.epoch != epoch {
            tracing::debug!(
                session_id,
                expected = session.epoch,
                epoch,
                "fetch session epoch mismatch"
            );
            return FetchContext::SessionError(ResponseError::InvalidFetchSessionEpoch.code());
        }
        if session.uses_topic_ids != uses_topic_ids {
            return FetchContext::SessionError(ResponseError::FetchSessionTopicIdError.code());
        }
        session.update(&fetch_data, &forgotten);
        if session.partitions.is_empty() {
            cache.remove(session_id);
            return FetchContext::Sessionless(fetch_data);
        }
        session.epoch = next_epoch(session.epoch);
        session.wake();
        // After the partitions this request activates froze their links:
        // this Fetch counts for the quiet ones only (and only a Fetch from
        // the session's follower counts).
        if follower == Some(session.follower) {
            session.fetched_ms.fetch_max(now_ms, Ordering::SeqCst);
        }
        let partitions = session.requests();
        let waker = (partitions.len() < session.partitions.len()).then(|| session.waker.clone());
        cache.touch(session_id, now_ms);
        FetchContext::Incremental {
            session_id,
            request_epoch: epoch,
            partitions,
            waker,
        }
    }

    /// The quiet partitions of an incremental `context`'s session that
    /// changed since the fetch began, now active again, with their cached
    /// requests: a completed parked Fetch reads them too. Empty for other
    /// contexts or when the session is gone.
    pub fn take_woken(&self, context: &FetchContext) -> Vec<(PartitionKey, PartitionRequest)> {
        let FetchContext::Incremental { session_id, .. } = context else {
            return Vec::new();
        };
        let mut cache = self.cache();
        let Some(session) = cache.sessions.get_mut(session_id) else {
            return Vec::new();
        };
        let mut woken = Vec::new();
        for key in session.waker.take_woken() {
            if let Some(cached) = session.partitions.get(&key) {
                if cached.quiet.is_some() {
                    woken.push((key.clone(), cached.request));
                    session.activate(&key);
                }
            }
        }
        woken
    }

    /// Kafka's `updateAndGenerateResponseData`: given one answer per
    /// partition read (those of `context` in its order, then `woken`, the
    /// partitions [`FetchManager::take_woken`] returned), which to send,
    /// the session id and the top-level error. A full fetch from a
    /// follower creates its session here; an incremental one keeps what
    /// [`CachedPartition::maybe_update_response_data`] selects, and answers
    /// INVALID_FETCH_SESSION_EPOCH (nothing kept) if another request moved
    /// the session on meanwhile, or FETCH_SESSION_ID_NOT_FOUND if it was
    /// evicted or closed. Partitions answered quiet leave the fetch order
    /// (see the module docs).
    pub fn update_and_generate(
        &self,
        context: &FetchContext,
        woken: &[(PartitionKey, PartitionRequest)],
        answers: Vec<PartitionAnswer<H>>,
        now_ms: i64,
    ) -> SessionAnswer {
        match context {
            FetchContext::SessionError(code) => SessionAnswer {
                error_code: *code,
                session_id: INVALID_SESSION_ID,
                keep: Vec::new(),
            },
            FetchContext::Sessionless(partitions) => SessionAnswer {
                error_code: 0,
                session_id: INVALID_SESSION_ID,
                keep: vec![true; partitions.len()],
            },
            FetchContext::Full {
                uses_topic_ids,
                follower,
                partitions,
            } => {
                let mut session = FetchSession::new(*uses_topic_ids, *follower, now_ms);
                let mut links = Vec::new();
                for ((key, request), answer) in partitions.iter().zip(answers) {
                    let mut cached = CachedPartition::new(*request);
                    cached.maybe_update_response_data(&answer);
                    session.push(key.clone(), cached);
                    if let Some((handle, version)) = answer.quiet {
                        links.extend(session.quiet(key, handle, version));
                    }
                }
                let session_id = self.cache().maybe_create_session(session);
                if session_id != INVALID_SESSION_ID {
                    for (handle, link) in links {
                        handle.link_quiet(link);
                    }
                }
                SessionAnswer {
                    error_code: 0,
                    session_id,
                    keep: vec![true; partitions.len()],
                }
            }
            FetchContext::Incremental {
                session_id,
                request_epoch,
                partitions,
                ..
            } => {
                let mut links = Vec::new();
                let answer = self.update_incremental(
                    *session_id,
                    *request_epoch,
                    partitions.iter().chain(woken),
                    answers,
                    &mut links,
                );
                for (handle, link) in links {
                    handle.link_quiet(link);
                }
                answer
            }
        }
    }

    /// [`FetchManager::update_and_generate`] of an incremental context
    /// (its `partitions` then the woken ones, with their `answers`), under
    /// the cache lock; the links of partitions that went quiet are pushed
    /// to `links`, to be attached after the lock is released.
    fn update_incremental<'a>(
        &self,
        session_id: i32,
        request_epoch: i32,
        partitions: impl Iterator<Item = &'a (PartitionKey, PartitionRequest)>,
        answers: Vec<PartitionAnswer<H>>,
        links: &mut Vec<(H, Arc<QuietLink>)>,
    ) -> SessionAnswer {
        let mut cache = self.cache();
        let Some(session) = cache.sessions.get_mut(&session_id) else {
            return SessionAnswer {
                error_code: ResponseError::FetchSessionIdNotFound.code(),
                session_id: INVALID_SESSION_ID,
                keep: Vec::new(),
            };
        };
        if session.epoch != next_epoch(request_epoch) {
            tracing::info!(
                session_id,
                expected = next_epoch(request_epoch),
                epoch = session.epoch,
                "fetch session moved on during the fetch; possible duplicate request"
            );
            return SessionAnswer {
                error_code: ResponseError::InvalidFetchSessionEpoch.code(),
                session_id,
                keep: Vec::new(),
            };
        }
        let mut keep = Vec::with_capacity(answers.len());
        let mut to_end = Vec::new();
        for ((key, _), answer) in partitions.zip(answers) {
            let send = match session.partitions.get_mut(key) {
                Some(cached) => {
                    let send = cached.maybe_update_response_data(&answer);
                    if send && answer.record_bytes > 0 {
                        to_end.push(key);
                    }
                    send
                }
                None => false,
            };
            keep.push(send);
            if let Some((handle, version)) = answer.quiet {
                links.extend(session.quiet(key, handle, version));
            }
        }
        for key in to_end {
            if let Some(cached) = session.partitions.get(key).cloned() {
                session.push(key.clone(), cached);
            }
        }
        SessionAnswer {
            error_code: 0,
            session_id,
            keep,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    use std::sync::atomic::{AtomicU64, Ordering};

    /// The broker id of the tests' follower.
    const FOLLOWER: i32 = 2;

    /// A partition as the session sees it: a version and its watches.
    #[derive(Debug, Default)]
    pub(crate) struct TestPartition {
        version: AtomicU64,
        watches: Mutex<Vec<QuietWatch>>,
        /// The links attached, in order.
        links: Mutex<Vec<Arc<QuietLink>>>,
    }

    impl TestPartition {
        /// The newest link attached, which is the newest watch's.
        fn link(&self) -> Arc<QuietLink> {
            let link = self.links.lock().unwrap().last().cloned().expect("a link");
            let watches = self.watches.lock().unwrap();
            let watched = watches.last().and_then(QuietWatch::link).expect("a watch");
            assert!(Arc::ptr_eq(&link, watched));
            link
        }

        /// A change: the version moves and the watches fire.
        fn change(&self) {
            self.version.fetch_add(1, Ordering::SeqCst);
            for watch in std::mem::take(&mut *self.watches.lock().unwrap()) {
                watch.wake();
            }
        }
    }

    type Handle = Arc<TestPartition>;
    type Manager = FetchManager<Handle>;

    impl QuietPartition for Handle {
        fn fetch_state_version(&self) -> u64 {
            self.version.load(Ordering::SeqCst)
        }

        fn watch_quiet(&self, version: u64, watch: QuietWatch) -> bool {
            self.watches.lock().unwrap().push(watch);
            self.version.load(Ordering::SeqCst) == version
        }

        fn link_quiet(&self, link: Arc<QuietLink>) {
            self.links.lock().unwrap().push(link);
        }
    }

    fn key(partition: i32) -> PartitionKey {
        PartitionKey {
            topic_id: Uuid::from_u128(7),
            topic: StrBytes::default(),
            partition,
        }
    }

    /// A follower's partition request at `fetch_offset`, leader epoch 1.
    pub(crate) fn request(fetch_offset: i64) -> PartitionRequest {
        PartitionRequest {
            fetch_offset,
            log_start_offset: 0,
            partition_max_bytes: 1 << 20,
            current_leader_epoch: 1,
            last_fetched_epoch: -1,
        }
    }

    /// An answer without records or error at high watermark `hw`.
    fn idle(hw: i64) -> PartitionAnswer<Handle> {
        PartitionAnswer {
            record_bytes: 0,
            error_code: 0,
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: 0,
            diverging_epoch: false,
            quiet: None,
        }
    }

    fn follower(
        session_id: i32,
        epoch: i32,
        fetch_data: Vec<(PartitionKey, PartitionRequest)>,
        forgotten: Vec<PartitionKey>,
    ) -> SessionRequest {
        SessionRequest {
            session_id,
            epoch,
            uses_topic_ids: true,
            follower: Some(FOLLOWER),
            fetch_data,
            forgotten,
        }
    }

    /// A follower's full fetch of partitions `0..n` at offset 0, answered
    /// idle at high watermark 0: the new session's id.
    fn create(manager: &Manager, n: i32, now_ms: i64) -> i32 {
        let data = (0..n).map(|p| (key(p), request(0))).collect();
        let context = manager.new_context(follower(0, 0, data, vec![]), now_ms);
        assert!(matches!(context, FetchContext::Full { .. }));
        let answers = vec![idle(0); n as usize];
        let answer = manager.update_and_generate(&context, &[], answers.clone(), now_ms);
        assert_eq!(answer.error_code, 0);
        assert_eq!(
            answer.keep,
            vec![true; n as usize],
            "a full fetch answers all"
        );
        assert_ne!(answer.session_id, INVALID_SESSION_ID);
        answer.session_id
    }

    fn read_offsets(context: &FetchContext) -> Vec<(i32, i64)> {
        context
            .partitions()
            .iter()
            .map(|(k, r)| (k.partition, r.fetch_offset))
            .collect()
    }

    #[test]
    fn epochs_advance_as_kafkas_fetch_metadata() {
        assert_eq!(next_epoch(INITIAL_EPOCH), 1);
        assert_eq!(next_epoch(5), 6);
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(FINAL_EPOCH), FINAL_EPOCH);
    }

    /// `(0, -1)` is sessionless: everything answered, session id 0, nothing
    /// cached.
    #[test]
    fn a_sessionless_fetch_caches_nothing() {
        let manager = Manager::new(10);
        let context = manager.new_context(follower(0, -1, vec![(key(0), request(0))], vec![]), 0);
        assert!(matches!(context, FetchContext::Sessionless(_)));
        let answer = manager.update_and_generate(&context, &[], vec![idle(0)], 0);
        assert_eq!(answer.session_id, INVALID_SESSION_ID);
        assert_eq!(answer.keep, vec![true]);
        assert!(manager.is_empty());
    }

    /// A consumer's `(0, 0)` is answered with session id 0 (Weir creates
    /// sessions for followers only).
    #[test]
    fn a_consumers_full_fetch_gets_no_session() {
        let manager = Manager::new(10);
        let mut consumer = follower(0, 0, vec![(key(0), request(0))], vec![]);
        consumer.follower = None;
        let context = manager.new_context(consumer, 0);
        let answer = manager.update_and_generate(&context, &[], vec![idle(0)], 0);
        assert_eq!(answer.session_id, INVALID_SESSION_ID);
        assert_eq!(answer.keep, vec![true]);
        assert!(manager.is_empty());
    }

    /// A follower's `(0, 0)` creates a session; its incremental fetches
    /// read every partition with the cached requests updated by the ones
    /// named, and answer only partitions with records or changed offsets.
    #[test]
    fn incremental_fetches_answer_only_what_changed() {
        let manager = Manager::new(10);
        let id = create(&manager, 3, 0);
        assert_eq!(manager.len(), 1);

        // Epoch 1: partition 1 moved to offset 5; nothing else named.
        let context = manager.new_context(follower(id, 1, vec![(key(1), request(5))], vec![]), 1);
        assert_eq!(read_offsets(&context), vec![(0, 0), (1, 5), (2, 0)]);
        let mut answers = vec![idle(0); 3];
        answers[2].record_bytes = 100;
        let answer = manager.update_and_generate(&context, &[], answers.clone(), 1);
        assert_eq!((answer.error_code, answer.session_id), (0, id));
        assert_eq!(answer.keep, vec![false, false, true], "only the records");

        // Epoch 2: the high watermark of 0 moved, 1 has records; partition
        // 2 returned records last time, so it is now read last.
        let context = manager.new_context(follower(id, 2, vec![], vec![]), 2);
        assert_eq!(read_offsets(&context), vec![(0, 0), (1, 5), (2, 0)]);
        let mut answers = vec![idle(0); 3];
        answers[0].high_watermark = 4;
        answers[0].last_stable_offset = 4;
        answers[1].record_bytes = 10;
        let answer = manager.update_and_generate(&context, &[], answers.clone(), 2);
        assert_eq!(answer.keep, vec![true, true, false]);

        // Epoch 3: partition 1 returned records, so it moved to the end;
        // the same high watermark again is not news.
        let context = manager.new_context(follower(id, 3, vec![], vec![]), 3);
        assert_eq!(read_offsets(&context), vec![(0, 0), (2, 0), (1, 5)]);
        let mut answers = vec![idle(0); 3];
        answers[0].high_watermark = 4;
        answers[0].last_stable_offset = 4;
        let answer = manager.update_and_generate(&context, &[], answers.clone(), 3);
        assert_eq!(answer.keep, vec![false, false, false]);
    }

    /// An answer marked quiet (past Kafka, see the module docs) takes the
    /// partition out of the reads until it changes or is named again; a
    /// change during a parked fetch is handed back by `take_woken`; each
    /// Fetch of the session counts for its quiet partitions through their
    /// links until they change, are named again or forgotten; a partition
    /// that changed before its watch was set stays active.
    #[test]
    fn quiet_partitions_are_skipped_until_they_change_or_are_named() {
        let manager = Manager::new(10);
        let id = create(&manager, 4, 0);
        let parts: Vec<Handle> = (0..4).map(|_| Handle::default()).collect();
        let quiet_answer = |p: usize| {
            let mut answer = idle(0);
            answer.quiet = Some((parts[p].clone(), parts[p].fetch_state_version()));
            answer
        };

        // Epoch 1: all four read; 0, 1 and 2 are quiet. Partition 2 then
        // changes before the session sets its watch: it stays active.
        let context = manager.new_context(follower(id, 1, vec![], vec![]), 10);
        assert_eq!(read_offsets(&context), vec![(0, 0), (1, 0), (2, 0), (3, 0)]);
        let mut answers = vec![quiet_answer(0), quiet_answer(1), quiet_answer(2), idle(0)];
        answers[2].quiet = Some((parts[2].clone(), 7));
        manager.update_and_generate(&context, &[], answers, 10);

        // Epoch 2: only 2 and 3 are read; the session has a waker.
        let context = manager.new_context(follower(id, 2, vec![], vec![]), 20);
        assert_eq!(read_offsets(&context), vec![(2, 0), (3, 0)]);
        let FetchContext::Incremental { waker, .. } = &context else {
            panic!("not incremental");
        };
        let waker = waker.clone().expect("quiet partitions: a waker");
        assert!(!waker.any_woken());
        // Partition 1 changes while the fetch is parked: the waker knows,
        // and the fetch reads it after the others.
        parts[1].change();
        assert!(waker.any_woken());
        let woken = manager.take_woken(&context);
        assert_eq!(woken, vec![(key(1), request(0))]);
        let mut answers = vec![idle(0), idle(0), idle(0)];
        answers[2].record_bytes = 10;
        let answer = manager.update_and_generate(&context, &woken, answers, 20);
        assert_eq!(answer.keep, vec![false, false, true]);

        // Epoch 3: 1 (records, moved to the end), 2 and 3 active; partition
        // 0 is named at a new offset: active again, at its place.
        let context = manager.new_context(follower(id, 3, vec![(key(0), request(4))], vec![]), 30);
        assert_eq!(read_offsets(&context), vec![(0, 4), (2, 0), (3, 0), (1, 0)]);
        let answers = vec![
            quiet_answer(0),
            quiet_answer(2),
            quiet_answer(3),
            quiet_answer(1),
        ];
        manager.update_and_generate(&context, &[], answers, 30);

        // All quiet: nothing is read. Their links follow the session's
        // Fetches, from the last one before they went quiet.
        let links: Vec<Arc<QuietLink>> = parts.iter().map(|p| p.link()).collect();
        assert!(links
            .iter()
            .all(|l| l.follower() == FOLLOWER && l.fetch_ms() == 30));
        let context = manager.new_context(follower(id, 4, vec![], vec![]), 40);
        assert!(read_offsets(&context).is_empty());
        manager.update_and_generate(&context, &[], Vec::new(), 40);
        assert!(links.iter().all(|l| l.fetch_ms() == 40 && !l.is_frozen()));
        // A request in the session from another broker is not a Fetch of
        // the session's follower.
        let mut stranger = follower(id, 5, vec![], vec![]);
        stranger.follower = Some(FOLLOWER + 1);
        let context = manager.new_context(stranger, 45);
        manager.update_and_generate(&context, &[], Vec::new(), 45);
        assert!(links.iter().all(|l| l.fetch_ms() == 40));
        // Partition 3 changes, 2 is named again and 1 forgotten: their
        // links keep the last Fetch before that; 0's counts the next one.
        parts[3].change();
        let context = manager.new_context(
            follower(id, 6, vec![(key(2), request(0))], vec![key(1)]),
            50,
        );
        assert_eq!(read_offsets(&context), vec![(2, 0), (3, 0)]);
        assert_eq!(links[0].fetch_ms(), 50);
        for (p, link) in links.iter().enumerate().skip(1) {
            assert!(link.is_frozen(), "partition {p}");
            assert_eq!(link.fetch_ms(), 40, "partition {p}");
        }
    }

    /// A closed session's watches fire into nothing.
    #[test]
    fn a_closed_sessions_quiet_watch_fires_harmlessly() {
        let manager = Manager::new(10);
        let id = create(&manager, 1, 0);
        let part = Handle::default();
        let context = manager.new_context(follower(id, 1, vec![], vec![]), 1);
        let mut answer = idle(0);
        answer.quiet = Some((part.clone(), 0));
        manager.update_and_generate(&context, &[], vec![answer], 1);
        manager.new_context(follower(id, -1, vec![(key(0), request(0))], vec![]), 2);
        assert!(manager.is_empty());
        part.change();
    }

    /// An error is always answered and forces the next answer once it is
    /// gone; a log start offset change and a diverging epoch are answered.
    #[test]
    fn errors_log_start_and_divergence_are_answered() {
        let manager = Manager::new(10);
        let id = create(&manager, 2, 0);
        let context = manager.new_context(follower(id, 1, vec![], vec![]), 1);
        let mut answers = vec![idle(0); 2];
        answers[0].error_code = ResponseError::NotLeaderOrFollower.code();
        answers[1].log_start_offset = 3;
        let answer = manager.update_and_generate(&context, &[], answers.clone(), 1);
        assert_eq!(answer.keep, vec![true, true]);

        let context = manager.new_context(follower(id, 2, vec![], vec![]), 2);
        let mut answers = vec![idle(0); 2];
        answers[1].log_start_offset = 3;
        let answer = manager.update_and_generate(&context, &[], answers.clone(), 2);
        assert_eq!(answer.keep, vec![true, false], "the error went away");

        let context = manager.new_context(follower(id, 3, vec![], vec![]), 3);
        let mut answers = vec![idle(0); 2];
        answers[1].log_start_offset = 3;
        answers[1].diverging_epoch = true;
        let answer = manager.update_and_generate(&context, &[], answers.clone(), 3);
        assert_eq!(answer.keep, vec![false, true]);
    }

    /// An epoch other than the session's next is INVALID_FETCH_SESSION_EPOCH
    /// and leaves the session as it was; an unknown id is
    /// FETCH_SESSION_ID_NOT_FOUND; topic ids must not change.
    #[test]
    fn wrong_epochs_and_unknown_ids_are_session_errors() {
        let manager = Manager::new(10);
        let id = create(&manager, 1, 0);
        for epoch in [2, 5] {
            let context = manager.new_context(follower(id, epoch, vec![], vec![]), 1);
            let FetchContext::SessionError(code) = context else {
                panic!("epoch {epoch} accepted");
            };
            assert_eq!(code, ResponseError::InvalidFetchSessionEpoch.code());
            let answer = manager.update_and_generate(&context, &[], Vec::new(), 1);
            assert_eq!((answer.error_code, answer.session_id), (code, 0));
            assert!(answer.keep.is_empty());
        }
        let context = manager.new_context(follower(id.wrapping_add(1), 1, vec![], vec![]), 1);
        assert!(matches!(
            context,
            FetchContext::SessionError(c) if c == ResponseError::FetchSessionIdNotFound.code()
        ));
        let mut by_name = follower(id, 1, vec![], vec![]);
        by_name.uses_topic_ids = false;
        assert!(matches!(
            manager.new_context(by_name, 1),
            FetchContext::SessionError(c) if c == ResponseError::FetchSessionTopicIdError.code()
        ));
        // The session still expects epoch 1.
        let context = manager.new_context(follower(id, 1, vec![], vec![]), 1);
        assert!(matches!(context, FetchContext::Incremental { .. }));
        // Replaying epoch 1 now fails.
        assert!(matches!(
            manager.new_context(follower(id, 1, vec![], vec![]), 1),
            FetchContext::SessionError(_)
        ));
    }

    /// Two requests of one epoch in flight: the one that answers second
    /// finds the session moved on and answers INVALID_FETCH_SESSION_EPOCH.
    #[test]
    fn a_session_moved_on_during_the_read_answers_invalid_epoch() {
        let manager = Manager::new(10);
        let id = create(&manager, 1, 0);
        let first = manager.new_context(follower(id, 1, vec![], vec![]), 1);
        let second = manager.new_context(follower(id, 2, vec![], vec![]), 2);
        let answer = manager.update_and_generate(&first, &[], vec![idle(0)], 2);
        assert_eq!(
            (answer.error_code, answer.session_id),
            (ResponseError::InvalidFetchSessionEpoch.code(), id)
        );
        let answer = manager.update_and_generate(&second, &[], vec![idle(0)], 2);
        assert_eq!(answer.error_code, 0);
    }

    /// Forgotten partitions leave the session (and are read no more); a
    /// session left empty is closed and the fetch answered sessionless.
    #[test]
    fn forgotten_partitions_leave_the_session() {
        let manager = Manager::new(10);
        let id = create(&manager, 3, 0);
        let context = manager.new_context(follower(id, 1, vec![], vec![key(1)]), 1);
        assert_eq!(read_offsets(&context), vec![(0, 0), (2, 0)]);
        manager.update_and_generate(&context, &[], vec![idle(0), idle(0)], 1);
        // Re-added later: read again, answered as new (no answer cached).
        let context = manager.new_context(follower(id, 2, vec![(key(1), request(9))], vec![]), 2);
        assert_eq!(read_offsets(&context), vec![(0, 0), (2, 0), (1, 9)]);
        let answer = manager.update_and_generate(&context, &[], vec![idle(0); 3], 2);
        assert_eq!(answer.keep, vec![false, false, true]);

        let context = manager.new_context(follower(id, 3, vec![], vec![key(0), key(1), key(2)]), 3);
        assert!(matches!(context, FetchContext::Sessionless(ref p) if p.is_empty()));
        assert!(manager.is_empty(), "an empty session is closed");
    }

    /// `(id, -1)` closes the session and is answered sessionless; `(id, 0)`
    /// closes it and creates a new one.
    #[test]
    fn a_full_fetch_naming_a_session_closes_it() {
        let manager = Manager::new(10);
        let id = create(&manager, 1, 0);
        let context = manager.new_context(follower(id, -1, vec![(key(0), request(0))], vec![]), 1);
        assert!(matches!(context, FetchContext::Sessionless(_)));
        assert!(manager.is_empty());
        assert!(matches!(
            manager.new_context(follower(id, 1, vec![], vec![]), 1),
            FetchContext::SessionError(c) if c == ResponseError::FetchSessionIdNotFound.code()
        ));

        let id = create(&manager, 1, 2);
        let context = manager.new_context(follower(id, 0, vec![(key(0), request(0))], vec![]), 3);
        assert!(matches!(context, FetchContext::Full { .. }));
        assert!(manager.is_empty(), "the old session is closed");
        let answer = manager.update_and_generate(&context, &[], vec![idle(0)], 3);
        assert_ne!(answer.session_id, id);
        assert_eq!(manager.len(), 1);
    }

    /// At the slot limit a new session evicts the least recently used one;
    /// with no slot no session is created.
    #[test]
    fn the_least_recently_used_session_is_evicted_at_the_limit() {
        let manager = Manager::new(2);
        let a = create(&manager, 1, 0);
        let b = create(&manager, 1, 1);
        // `a` used at 2: `b` is now the least recently used.
        let context = manager.new_context(follower(a, 1, vec![], vec![]), 2);
        manager.update_and_generate(&context, &[], vec![idle(0)], 2);
        let c = create(&manager, 1, 3);
        assert_eq!(manager.len(), 2);
        let cache = manager.cache();
        assert!(cache.contains(a) && cache.contains(c));
        assert!(
            !cache.contains(b),
            "the least recently used session was kept"
        );
        drop(cache);

        let none = Manager::new(0);
        let context = none.new_context(follower(0, 0, vec![(key(0), request(0))], vec![]), 0);
        let answer = none.update_and_generate(&context, &[], vec![idle(0)], 0);
        assert_eq!(answer.session_id, INVALID_SESSION_ID);
        assert!(none.is_empty());
    }
}
