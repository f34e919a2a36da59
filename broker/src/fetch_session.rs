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
//! (and `forgotten_topics_data` those to drop); the leader reads every
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
//! This module owns the session rules only: it reads no log and resolves
//! no partition (`handlers/fetch.rs` does both and hands back what it read
//! as [`PartitionAnswer`]s).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// What a read found for one partition, as far as the session cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionAnswer {
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
    /// Its place in [`FetchSession::order`].
    position: u64,
}

impl CachedPartition {
    /// Kafka's `CachedPartition.maybeUpdateResponseData`: whether the
    /// answer must be sent (records, an error, a diverging epoch, or a high
    /// watermark, last stable offset or log start offset other than the
    /// one last sent), remembering what is sent.
    fn maybe_update_response_data(&mut self, answer: &PartitionAnswer) -> bool {
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
/// next request must carry and when it was last used.
#[derive(Debug)]
struct FetchSession {
    /// Whether the session names topics by id (v13+).
    uses_topic_ids: bool,
    partitions: HashMap<PartitionKey, CachedPartition>,
    /// Fetch order: position to partition.
    order: BTreeMap<u64, PartitionKey>,
    next_position: u64,
    /// The epoch the next incremental request must carry.
    epoch: i32,
    /// Wall-clock ms of the last request.
    last_used_ms: i64,
}

impl FetchSession {
    fn new(uses_topic_ids: bool, now_ms: i64) -> Self {
        FetchSession {
            uses_topic_ids,
            partitions: HashMap::new(),
            order: BTreeMap::new(),
            next_position: 0,
            epoch: next_epoch(INITIAL_EPOCH),
            last_used_ms: now_ms,
        }
    }

    /// Adds `key` at the end of the fetch order (or moves it there).
    fn push(&mut self, key: PartitionKey, mut cached: CachedPartition) {
        if let Some(old) = self.partitions.get(&key) {
            self.order.remove(&old.position);
        }
        cached.position = self.next_position;
        self.next_position += 1;
        self.order.insert(cached.position, key.clone());
        self.partitions.insert(key, cached);
    }

    /// Kafka's `FetchSession.update`: the request's partitions are added
    /// or replace their cached request; the forgotten ones are removed.
    fn update(
        &mut self,
        fetch_data: &[(PartitionKey, PartitionRequest)],
        forgotten: &[PartitionKey],
    ) {
        for (key, request) in fetch_data {
            match self.partitions.get_mut(key) {
                Some(cached) => cached.request = *request,
                None => self.push(
                    key.clone(),
                    CachedPartition {
                        request: *request,
                        high_watermark: -1,
                        last_stable_offset: -1,
                        local_log_start_offset: -1,
                        position: 0,
                    },
                ),
            }
        }
        for key in forgotten {
            if let Some(cached) = self.partitions.remove(key) {
                self.order.remove(&cached.position);
            }
        }
    }

    /// Every partition with its cached request, in fetch order.
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
    /// The request comes from a follower (a replica id): only such fetches
    /// create sessions.
    pub is_follower: bool,
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
        /// The request's partitions.
        partitions: Vec<(PartitionKey, PartitionRequest)>,
    },
    /// `IncrementalFetchContext`: every partition of the session (updated
    /// by the request) is read; only what changed is answered.
    Incremental {
        /// The session.
        session_id: i32,
        /// The epoch the request carried.
        request_epoch: i32,
        /// The session's partitions in fetch order.
        partitions: Vec<(PartitionKey, PartitionRequest)>,
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
pub struct FetchManager {
    cache: Mutex<FetchSessionCache>,
}

impl FetchManager {
    /// A manager whose cache holds at most `max_entries` sessions
    /// (`max.incremental.fetch.session.cache.slots`).
    pub fn new(max_entries: usize) -> Self {
        FetchManager {
            cache: Mutex::new(FetchSessionCache::new(max_entries)),
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
            is_follower,
            fetch_data,
            forgotten,
        } = request;
        let mut cache = self.cache();
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            if session_id != INVALID_SESSION_ID && cache.remove(session_id) {
                tracing::debug!(session_id, "fetch session closed by a full fetch");
            }
            return if epoch == FINAL_EPOCH || !is_follower {
                FetchContext::Sessionless(fetch_data)
            } else {
                FetchContext::Full {
                    uses_topic_ids,
                    partitions: fetch_data,
                }
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
        let partitions = session.requests();
        cache.touch(session_id, now_ms);
        FetchContext::Incremental {
            session_id,
            request_epoch: epoch,
            partitions,
        }
    }

    /// Kafka's `updateAndGenerateResponseData`: given one answer per
    /// partition of `context` (in its order), which to send, the session id
    /// and the top-level error. A full fetch from a follower creates its
    /// session here; an incremental one keeps what
    /// [`CachedPartition::maybe_update_response_data`] selects, and answers
    /// INVALID_FETCH_SESSION_EPOCH (nothing kept) if another request moved
    /// the session on meanwhile, or FETCH_SESSION_ID_NOT_FOUND if it was
    /// evicted or closed.
    pub fn update_and_generate(
        &self,
        context: &FetchContext,
        answers: &[PartitionAnswer],
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
                partitions,
            } => {
                let mut session = FetchSession::new(*uses_topic_ids, now_ms);
                for ((key, request), answer) in partitions.iter().zip(answers) {
                    session.push(
                        key.clone(),
                        CachedPartition {
                            request: *request,
                            high_watermark: if answer.error_code == 0 {
                                answer.high_watermark
                            } else {
                                -1
                            },
                            last_stable_offset: answer.last_stable_offset,
                            local_log_start_offset: answer.log_start_offset,
                            position: 0,
                        },
                    );
                }
                let session_id = self.cache().maybe_create_session(session);
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
            } => {
                let mut cache = self.cache();
                let Some(session) = cache.sessions.get_mut(session_id) else {
                    return SessionAnswer {
                        error_code: ResponseError::FetchSessionIdNotFound.code(),
                        session_id: INVALID_SESSION_ID,
                        keep: Vec::new(),
                    };
                };
                if session.epoch != next_epoch(*request_epoch) {
                    tracing::info!(
                        session_id,
                        expected = next_epoch(*request_epoch),
                        epoch = session.epoch,
                        "fetch session moved on during the fetch; possible duplicate request"
                    );
                    return SessionAnswer {
                        error_code: ResponseError::InvalidFetchSessionEpoch.code(),
                        session_id: *session_id,
                        keep: Vec::new(),
                    };
                }
                let mut keep = Vec::with_capacity(partitions.len());
                let mut to_end = Vec::new();
                for ((key, _), answer) in partitions.iter().zip(answers) {
                    let send = match session.partitions.get_mut(key) {
                        Some(cached) => {
                            let send = cached.maybe_update_response_data(answer);
                            if send && answer.record_bytes > 0 {
                                to_end.push(key);
                            }
                            send
                        }
                        None => false,
                    };
                    keep.push(send);
                }
                for key in to_end {
                    if let Some(cached) = session.partitions.get(key).cloned() {
                        session.push(key.clone(), cached);
                    }
                }
                SessionAnswer {
                    error_code: 0,
                    session_id: *session_id,
                    keep,
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

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
    fn idle(hw: i64) -> PartitionAnswer {
        PartitionAnswer {
            record_bytes: 0,
            error_code: 0,
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: 0,
            diverging_epoch: false,
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
            is_follower: true,
            fetch_data,
            forgotten,
        }
    }

    /// A follower's full fetch of partitions `0..n` at offset 0, answered
    /// idle at high watermark 0: the new session's id.
    fn create(manager: &FetchManager, n: i32, now_ms: i64) -> i32 {
        let data = (0..n).map(|p| (key(p), request(0))).collect();
        let context = manager.new_context(follower(0, 0, data, vec![]), now_ms);
        assert!(matches!(context, FetchContext::Full { .. }));
        let answers = vec![idle(0); n as usize];
        let answer = manager.update_and_generate(&context, &answers, now_ms);
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
        let manager = FetchManager::new(10);
        let context = manager.new_context(follower(0, -1, vec![(key(0), request(0))], vec![]), 0);
        assert!(matches!(context, FetchContext::Sessionless(_)));
        let answer = manager.update_and_generate(&context, &[idle(0)], 0);
        assert_eq!(answer.session_id, INVALID_SESSION_ID);
        assert_eq!(answer.keep, vec![true]);
        assert!(manager.is_empty());
    }

    /// A consumer's `(0, 0)` is answered with session id 0 (Weir creates
    /// sessions for followers only).
    #[test]
    fn a_consumers_full_fetch_gets_no_session() {
        let manager = FetchManager::new(10);
        let mut consumer = follower(0, 0, vec![(key(0), request(0))], vec![]);
        consumer.is_follower = false;
        let context = manager.new_context(consumer, 0);
        let answer = manager.update_and_generate(&context, &[idle(0)], 0);
        assert_eq!(answer.session_id, INVALID_SESSION_ID);
        assert_eq!(answer.keep, vec![true]);
        assert!(manager.is_empty());
    }

    /// A follower's `(0, 0)` creates a session; its incremental fetches
    /// read every partition with the cached requests updated by the ones
    /// named, and answer only partitions with records or changed offsets.
    #[test]
    fn incremental_fetches_answer_only_what_changed() {
        let manager = FetchManager::new(10);
        let id = create(&manager, 3, 0);
        assert_eq!(manager.len(), 1);

        // Epoch 1: partition 1 moved to offset 5; nothing else named.
        let context = manager.new_context(follower(id, 1, vec![(key(1), request(5))], vec![]), 1);
        assert_eq!(read_offsets(&context), vec![(0, 0), (1, 5), (2, 0)]);
        let mut answers = vec![idle(0); 3];
        answers[2].record_bytes = 100;
        let answer = manager.update_and_generate(&context, &answers, 1);
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
        let answer = manager.update_and_generate(&context, &answers, 2);
        assert_eq!(answer.keep, vec![true, true, false]);

        // Epoch 3: partition 1 returned records, so it moved to the end;
        // the same high watermark again is not news.
        let context = manager.new_context(follower(id, 3, vec![], vec![]), 3);
        assert_eq!(read_offsets(&context), vec![(0, 0), (2, 0), (1, 5)]);
        let mut answers = vec![idle(0); 3];
        answers[0].high_watermark = 4;
        answers[0].last_stable_offset = 4;
        let answer = manager.update_and_generate(&context, &answers, 3);
        assert_eq!(answer.keep, vec![false, false, false]);
    }

    /// An error is always answered and forces the next answer once it is
    /// gone; a log start offset change and a diverging epoch are answered.
    #[test]
    fn errors_log_start_and_divergence_are_answered() {
        let manager = FetchManager::new(10);
        let id = create(&manager, 2, 0);
        let context = manager.new_context(follower(id, 1, vec![], vec![]), 1);
        let mut answers = vec![idle(0); 2];
        answers[0].error_code = ResponseError::NotLeaderOrFollower.code();
        answers[1].log_start_offset = 3;
        let answer = manager.update_and_generate(&context, &answers, 1);
        assert_eq!(answer.keep, vec![true, true]);

        let context = manager.new_context(follower(id, 2, vec![], vec![]), 2);
        let mut answers = vec![idle(0); 2];
        answers[1].log_start_offset = 3;
        let answer = manager.update_and_generate(&context, &answers, 2);
        assert_eq!(answer.keep, vec![true, false], "the error went away");

        let context = manager.new_context(follower(id, 3, vec![], vec![]), 3);
        let mut answers = vec![idle(0); 2];
        answers[1].log_start_offset = 3;
        answers[1].diverging_epoch = true;
        let answer = manager.update_and_generate(&context, &answers, 3);
        assert_eq!(answer.keep, vec![false, true]);
    }

    /// An epoch other than the session's next is INVALID_FETCH_SESSION_EPOCH
    /// and leaves the session as it was; an unknown id is
    /// FETCH_SESSION_ID_NOT_FOUND; topic ids must not change.
    #[test]
    fn wrong_epochs_and_unknown_ids_are_session_errors() {
        let manager = FetchManager::new(10);
        let id = create(&manager, 1, 0);
        for epoch in [2, 5] {
            let context = manager.new_context(follower(id, epoch, vec![], vec![]), 1);
            let FetchContext::SessionError(code) = context else {
                panic!("epoch {epoch} accepted");
            };
            assert_eq!(code, ResponseError::InvalidFetchSessionEpoch.code());
            let answer = manager.update_and_generate(&context, &[], 1);
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
        let manager = FetchManager::new(10);
        let id = create(&manager, 1, 0);
        let first = manager.new_context(follower(id, 1, vec![], vec![]), 1);
        let second = manager.new_context(follower(id, 2, vec![], vec![]), 2);
        let answer = manager.update_and_generate(&first, &[idle(0)], 2);
        assert_eq!(
            (answer.error_code, answer.session_id),
            (ResponseError::InvalidFetchSessionEpoch.code(), id)
        );
        let answer = manager.update_and_generate(&second, &[idle(0)], 2);
        assert_eq!(answer.error_code, 0);
    }

    /// Forgotten partitions leave the session (and are read no more); a
    /// session left empty is closed and the fetch answered sessionless.
    #[test]
    fn forgotten_partitions_leave_the_session() {
        let manager = FetchManager::new(10);
        let id = create(&manager, 3, 0);
        let context = manager.new_context(follower(id, 1, vec![], vec![key(1)]), 1);
        assert_eq!(read_offsets(&context), vec![(0, 0), (2, 0)]);
        manager.update_and_generate(&context, &[idle(0), idle(0)], 1);
        // Re-added later: read again, answered as new (no answer cached).
        let context = manager.new_context(follower(id, 2, vec![(key(1), request(9))], vec![]), 2);
        assert_eq!(read_offsets(&context), vec![(0, 0), (2, 0), (1, 9)]);
        let answer = manager.update_and_generate(&context, &[idle(0); 3], 2);
        assert_eq!(answer.keep, vec![false, false, true]);

        let context = manager.new_context(follower(id, 3, vec![], vec![key(0), key(1), key(2)]), 3);
        assert!(matches!(context, FetchContext::Sessionless(ref p) if p.is_empty()));
        assert!(manager.is_empty(), "an empty session is closed");
    }

    /// `(id, -1)` closes the session and is answered sessionless; `(id, 0)`
    /// closes it and creates a new one.
    #[test]
    fn a_full_fetch_naming_a_session_closes_it() {
        let manager = FetchManager::new(10);
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
        let answer = manager.update_and_generate(&context, &[idle(0)], 3);
        assert_ne!(answer.session_id, id);
        assert_eq!(manager.len(), 1);
    }

    /// At the slot limit a new session evicts the least recently used one;
    /// with no slot no session is created.
    #[test]
    fn the_least_recently_used_session_is_evicted_at_the_limit() {
        let manager = FetchManager::new(2);
        let a = create(&manager, 1, 0);
        let b = create(&manager, 1, 1);
        // `a` used at 2: `b` is now the least recently used.
        let context = manager.new_context(follower(a, 1, vec![], vec![]), 2);
        manager.update_and_generate(&context, &[idle(0)], 2);
        let c = create(&manager, 1, 3);
        assert_eq!(manager.len(), 2);
        let cache = manager.cache();
        assert!(cache.contains(a) && cache.contains(c));
        assert!(
            !cache.contains(b),
            "the least recently used session was kept"
        );
        drop(cache);

        let none = FetchManager::new(0);
        let context = none.new_context(follower(0, 0, vec![(key(0), request(0))], vec![]), 0);
        let answer = none.update_and_generate(&context, &[idle(0)], 0);
        assert_eq!(answer.session_id, INVALID_SESSION_ID);
        assert!(none.is_empty());
    }
}
