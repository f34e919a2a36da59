//! Committed offsets (Kafka's `OffsetMetadataManager`): OffsetCommit and
//! its validation, OffsetFetch, OffsetDelete, DeleteGroups, the expiry of
//! offsets after `offsets.retention.ms` (KIP-211), and dropping the
//! offsets of deleted topics. Commits planned but not yet stored are
//! counted per group so that expiry spares them and DeleteGroups
//! tombstones them.

use std::collections::HashMap;

use kafka_protocol::ResponseError;
use tracing::{info, warn};
use weir_storage::TopicPartition;

use crate::error::{group_metadata_store_error, offset_commit_store_error};
use crate::group::classic_group::{ClassicGroup, ClassicGroupState};
use crate::group::store::{GroupStore, GroupStoreError, GroupWrite, OffsetAndMetadata};
use crate::group::OFFSETS_TOPIC;
use crate::log_value::bounded;

use super::ownership::Ownership;
use super::writes::WriteTurn;
use super::{Ctx, GroupCoordinator, OffsetCommitParams, State};

impl State {
    fn add_pending_commits<'a>(
        &mut self,
        group_id: &str,
        partitions: impl Iterator<Item = &'a TopicPartition>,
    ) {
        let pending = self
            .pending_commits
            .entry(group_id.to_string())
            .or_default();
        for p in partitions {
            *pending.entry(p.clone()).or_default() += 1;
        }
    }

    fn remove_pending_commits<'a>(
        &mut self,
        group_id: &str,
        partitions: impl Iterator<Item = &'a TopicPartition>,
    ) {
        if let Some(pending) = self.pending_commits.get_mut(group_id) {
            for p in partitions {
                if let Some(n) = pending.get_mut(p) {
                    *n -= 1;
                    if *n == 0 {
                        pending.remove(p);
                    }
                }
            }
            if pending.is_empty() {
                self.pending_commits.remove(group_id);
            }
        }
    }

    fn has_pending_commit(&self, group_id: &str, partition: &TopicPartition) -> bool {
        self.pending_commits
            .get(group_id)
            .is_some_and(|p| p.contains_key(partition))
    }
}

impl<S: GroupStore> GroupCoordinator<S> {
    /// OffsetCommit (Kafka's `commitOffset`): validates the member, stores
    /// the offsets and answers once the store resolved. Per-partition
    /// outcomes in request order. The empty group id is accepted, as Kafka's
    /// `GroupCoordinatorService.commitOffsets` accepts it for backwards
    /// compatibility (a generation -1 commit founds a simple group "").
    ///
    /// # Errors
    /// A request-level error applied to every partition by the handler.
    pub async fn commit_offsets(
        &self,
        params: OffsetCommitParams,
    ) -> Result<Vec<(TopicPartition, Option<ResponseError>)>, ResponseError> {
        let (results, write, turn) = {
            let mut ctx = self.inner.ctx();
            ctx.check_loaded_any(&params.group_id)?;
            ctx.validate_commit(&params)?;
            let now_ms = ctx.now_ms;
            let max = self.inner.config.offset_metadata_max_bytes;
            let expire = (params.retention_time_ms != -1)
                .then(|| now_ms.saturating_add(params.retention_time_ms));
            let mut results = Vec::new();
            let mut write = GroupWrite::default();
            for entry in &params.offsets {
                let metadata = entry.metadata.clone().unwrap_or_default();
                if metadata.encode_utf16().count() > max {
                    results.push((
                        entry.partition.clone(),
                        Some(ResponseError::OffsetMetadataTooLarge),
                    ));
                    continue;
                }
                results.push((entry.partition.clone(), None));
                write.offsets.push((
                    entry.partition.clone(),
                    Some(OffsetAndMetadata {
                        committed_offset: entry.committed_offset,
                        committed_leader_epoch: entry.committed_leader_epoch,
                        metadata,
                        commit_timestamp_ms: now_ms,
                        expire_timestamp_ms: expire,
                    }),
                ));
            }
            if write.offsets.is_empty() {
                return Ok(results);
            }
            ctx.state
                .add_pending_commits(&params.group_id, write.offsets.iter().map(|(p, _)| p));
            let turn = ctx.state.write_turn(&params.group_id);
            (results, write, turn)
        };
        let inner = self.inner.clone();
        let group_id = params.group_id.clone();
        let task = tokio::spawn(async move {
            let done = turn.wait().await;
            let offsets = write.offsets.clone();
            let result = inner.store.append(&group_id, write).await;
            let mut ctx = inner.ctx();
            ctx.state.end_turn(&group_id, done);
            ctx.state
                .remove_pending_commits(&group_id, offsets.iter().map(|(p, _)| p));
            result?;
            if !ctx.owns(&group_id) {
                // The partition moved away meanwhile: whether the new
                // leader has the commit is not known here. NOT_COORDINATOR
                // sends the client to commit there again, as Kafka.
                return Ok(false);
            }
            let now_ms = ctx.now_ms;
            let group = ctx
                .state
                .groups
                .entry(group_id.clone())
                .or_insert_with(|| ClassicGroup::new(&group_id, now_ms));
            for (partition, offset) in offsets {
                if let Some(offset) = offset {
                    group.offsets.insert(partition, offset);
                }
            }
            Ok::<bool, GroupStoreError>(true)
        });
        match task.await {
            Ok(Ok(true)) => Ok(results),
            Ok(Ok(false)) => Err(ResponseError::NotCoordinator),
            Ok(Err(e)) => {
                warn!(
                    group = %bounded(&params.group_id),
                    error = %e,
                    "storing committed offsets failed"
                );
                Err(offset_commit_store_error(&e))
            }
            Err(_) => Err(ResponseError::UnknownServerError),
        }
    }

    /// OffsetFetch for one group: each requested partition with its
    /// committed offset (`None`: no commit), or with `partitions == None`
    /// every committed partition (Kafka's `fetchOffsets` /
    /// `fetchAllOffsets`). An unknown group has no commits.
    ///
    /// # Errors
    /// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID.
    #[allow(clippy::type_complexity)]
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Result<Vec<(TopicPartition, Option<OffsetAndMetadata>)>, ResponseError> {
        let ctx = self.inner.ctx();
        ctx.check_loaded_any(group_id)?;
        let group = ctx
            .state
            .groups
            .get(group_id)
            .filter(|g| g.state != ClassicGroupState::Dead);
        Ok(match partitions {
            Some(partitions) => partitions
                .into_iter()
                .map(|p| {
                    let offset = group.and_then(|g| g.offsets.get(&p).cloned());
                    (p, offset)
                })
                .collect(),
            None => group
                .map(|g| {
                    g.offsets
                        .iter()
                        .map(|(p, o)| (p.clone(), Some(o.clone())))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// OffsetDelete (Kafka's `deleteOffsets`): tombstones the partitions of
    /// topics no consumer-protocol member subscribes to; subscribed topics
    /// get GROUP_SUBSCRIBED_TO_TOPIC.
    ///
    /// # Errors
    /// GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (a non-consumer group with
    /// members), store failures, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    /// INVALID_GROUP_ID.
    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: Vec<TopicPartition>,
    ) -> Result<Vec<(TopicPartition, Option<ResponseError>)>, ResponseError> {
        let (results, write, turn) = {
            let mut ctx = self.inner.ctx();
            ctx.check_loaded(group_id)?;
            let group = ctx
                .state
                .groups
                .get(group_id)
                .ok_or(ResponseError::GroupIdNotFound)?;
            match group.state {
                ClassicGroupState::Dead => return Err(ResponseError::GroupIdNotFound),
                ClassicGroupState::Empty => {}
                _ if group.protocol_type.as_deref()
                    != Some(crate::group::classic_group::CONSUMER_PROTOCOL_TYPE) =>
                {
                    return Err(ResponseError::NonEmptyGroup)
                }
                _ => {}
            }
            let mut results = Vec::new();
            let mut write = GroupWrite::default();
            let mut subscribed: HashMap<String, bool> = HashMap::new();
            for p in partitions {
                let is_subscribed = *subscribed
                    .entry(p.topic.clone())
                    .or_insert_with(|| group.is_subscribed_to_topic(&p.topic));
                if is_subscribed {
                    results.push((p, Some(ResponseError::GroupSubscribedToTopic)));
                } else {
                    if group.offsets.contains_key(&p) {
                        write.offsets.push((p.clone(), None));
                    }
                    results.push((p, None));
                }
            }
            let turn = (!write.offsets.is_empty()).then(|| ctx.state.write_turn(group_id));
            (results, write, turn)
        };
        if let Some(turn) = turn {
            let deleted: Vec<TopicPartition> =
                write.offsets.iter().map(|(p, _)| p.clone()).collect();
            self.apply_write(group_id, write, turn, move |group| {
                for p in &deleted {
                    group.offsets.remove(p);
                }
            })
            .await
            .map_err(|e| offset_commit_store_error(&e))?;
        }
        Ok(results)
    }

    /// DeleteGroups (Kafka's `deleteGroups`): writes tombstones for the
    /// group's metadata and offsets, then forgets it.
    pub async fn delete_groups(
        &self,
        group_ids: Vec<String>,
    ) -> Vec<(String, Option<ResponseError>)> {
        let mut results = Vec::new();
        for group_id in group_ids {
            let outcome = self.delete_group(&group_id).await;
            results.push((group_id, outcome.err()));
        }
        results
    }

    async fn delete_group(&self, group_id: &str) -> Result<(), ResponseError> {
        let write = {
            let mut ctx = self.inner.ctx();
            ctx.check_loaded_any(group_id)?;
            let now_ms = ctx.now_ms;
            let group = ctx
                .state
                .groups
                .get_mut(group_id)
                .ok_or(ResponseError::GroupIdNotFound)?;
            match group.state {
                ClassicGroupState::Dead => return Err(ResponseError::GroupIdNotFound),
                ClassicGroupState::Empty => {}
                _ => return Err(ResponseError::NonEmptyGroup),
            }
            // Dead while the tombstones are written: joins and commits are
            // refused meanwhile; a failed write makes it Empty again.
            group.transition_to(ClassicGroupState::Dead, now_ms);
            let mut doomed: std::collections::BTreeSet<TopicPartition> =
                group.offsets.keys().cloned().collect();
            // Commits still being written land before these tombstones.
            if let Some(pending) = ctx.state.pending_commits.get(group_id) {
                doomed.extend(pending.keys().cloned());
            }
            let write = GroupWrite {
                metadata: Some(None),
                offsets: doomed.into_iter().map(|p| (p, None)).collect(),
            };
            (write, ctx.state.write_turn(group_id))
        };
        let (write, turn) = write;
        let inner = self.inner.clone();
        let group_id = group_id.to_string();
        // Spawned so that a dropped connection cannot leave the group Dead.
        let task = tokio::spawn(async move {
            let done = turn.wait().await;
            let result = inner.store.append(&group_id, write).await;
            let mut ctx = inner.ctx();
            let now_ms = ctx.now_ms;
            ctx.state.end_turn(&group_id, done);
            match result {
                Ok(()) => {
                    ctx.state.groups.remove(&group_id);
                    Ok(())
                }
                Err(e) => {
                    warn!(
                        group = %bounded(&group_id),
                        error = %e,
                        "writing group tombstones failed"
                    );
                    if let Some(group) = ctx.state.groups.get_mut(&group_id) {
                        group.transition_to(ClassicGroupState::Empty, now_ms);
                    }
                    Err(group_metadata_store_error(&e))
                }
            }
        });
        task.await.unwrap_or(Err(ResponseError::UnknownServerError))
    }

    /// Expires committed offsets as KIP-211 describes (Kafka's
    /// `cleanupExpiredOffsets`): offsets of Empty groups once the retention
    /// passed since the group became Empty (or since the commit, for groups
    /// without a protocol type, and always for an explicit v1 expiry); a
    /// group left with no offsets and no members is deleted with its
    /// metadata tombstone.
    pub async fn expire_offsets(&self) {
        let plans: Vec<(String, GroupWrite, WriteTurn)> = {
            let mut ctx = self.inner.ctx();
            if matches!(ctx.state.ownership, Ownership::Starting) {
                return;
            }
            let now_ms = ctx.now_ms;
            let retention = self.inner.config.offsets_retention_ms;
            let mut plans = Vec::new();
            for group in ctx.state.groups.values() {
                // What retention counts from: the commit (simple groups),
                // or the moment the group became Empty (KIP-211).
                let since_empty = match (&group.protocol_type, group.state) {
                    (None, _) => None,
                    (Some(_), ClassicGroupState::Empty) => Some(group.current_state_timestamp_ms),
                    _ => continue,
                };
                let mut write = GroupWrite::default();
                let mut all_expired = !ctx.state.pending_commits.contains_key(&group.group_id);
                for (p, o) in &group.offsets {
                    if ctx.state.has_pending_commit(&group.group_id, p) {
                        // A newer commit is being written: it decides.
                        all_expired = false;
                        continue;
                    }
                    let expired = match o.expire_timestamp_ms {
                        Some(at) => now_ms >= at,
                        None => {
                            let base = since_empty.unwrap_or(o.commit_timestamp_ms);
                            now_ms.saturating_sub(base) >= retention
                        }
                    };
                    if expired {
                        write.offsets.push((p.clone(), None));
                    } else {
                        all_expired = false;
                    }
                }
                if all_expired && group.state == ClassicGroupState::Empty {
                    write.metadata = Some(None);
                }
                if !write.offsets.is_empty() || write.metadata.is_some() {
                    plans.push((group.group_id.clone(), write));
                }
            }
            plans
                .into_iter()
                .map(|(group_id, write)| {
                    let turn = ctx.state.write_turn(&group_id);
                    (group_id, write, turn)
                })
                .collect()
        };
        for (group_id, write, turn) in plans {
            let expired: Vec<TopicPartition> =
                write.offsets.iter().map(|(p, _)| p.clone()).collect();
            let delete_group = write.metadata.is_some();
            let count = expired.len();
            let outcome = self
                .apply_write(&group_id, write, turn, move |group| {
                    for p in &expired {
                        group.offsets.remove(p);
                    }
                })
                .await;
            match outcome {
                Ok(()) => {
                    info!(
                        group = %bounded(&group_id),
                        partitions = count,
                        "expired committed offsets"
                    );
                    if delete_group {
                        let mut state = self.inner.lock();
                        let remove = state.groups.get(&group_id).is_some_and(|g| {
                            g.state == ClassicGroupState::Empty && g.offsets.is_empty()
                        });
                        if remove {
                            state.groups.remove(&group_id);
                        }
                    }
                }
                Err(e) => warn!(group = %bounded(&group_id), error = %e, "expiring offsets failed"),
            }
        }
    }

    /// Deletes the committed offsets of deleted topics, writing their
    /// tombstones (Kafka's `onPartitionsDeleted`), so that a topic created
    /// again under the same name starts without stale offsets. Failures are
    /// logged; the offsets then stay until their retention passes.
    ///
    /// When `topics` holds `__consumer_offsets` itself, every group's
    /// records are gone with it and the coordinator forgets every group
    /// instead (see `unload_all_groups`).
    pub async fn on_topics_deleted(&self, topics: &[String]) {
        if topics.iter().any(|t| t == OFFSETS_TOPIC) {
            self.unload_all_groups();
            return;
        }
        let plans: Vec<(String, Vec<TopicPartition>, WriteTurn)> = {
            let mut state = self.inner.lock();
            let plans: Vec<(String, Vec<TopicPartition>)> = state
                .groups
                .values()
                .filter_map(|g| {
                    let doomed: Vec<TopicPartition> = g
                        .offsets
                        .keys()
                        .filter(|p| topics.contains(&p.topic))
                        .cloned()
                        .collect();
                    (!doomed.is_empty()).then(|| (g.group_id.clone(), doomed))
                })
                .collect();
            plans
                .into_iter()
                .map(|(group_id, doomed)| {
                    let turn = state.write_turn(&group_id);
                    (group_id, doomed, turn)
                })
                .collect()
        };
        for (group_id, doomed, turn) in plans {
            let write = GroupWrite {
                metadata: None,
                offsets: doomed.iter().map(|p| (p.clone(), None)).collect(),
            };
            let outcome = self
                .apply_write(&group_id, write, turn, move |group| {
                    for p in &doomed {
                        group.offsets.remove(p);
                    }
                })
                .await;
            if let Err(e) = outcome {
                warn!(
                    group = %bounded(&group_id),
                    error = %e,
                    "deleting offsets of deleted topics failed"
                );
            }
        }
    }
}

impl<S: GroupStore> Ctx<'_, S> {
    /// Kafka's `validateOffsetCommit` for classic groups.
    fn validate_commit(&mut self, params: &OffsetCommitParams) -> Result<(), ResponseError> {
        let Some(group) = self.state.groups.get(&params.group_id) else {
            if params.generation_id < 0 {
                return Ok(());
            }
            return Err(if params.api_version >= 9 {
                ResponseError::GroupIdNotFound
            } else {
                ResponseError::IllegalGeneration
            });
        };
        if group.state == ClassicGroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        if params.generation_id < 0 && group.state == ClassicGroupState::Empty {
            return Ok(());
        }
        if params.generation_id >= 0
            || !params.member_id.is_empty()
            || params.group_instance_id.is_some()
        {
            group.validate_member(&params.member_id, params.group_instance_id.as_deref())?;
            if params.generation_id != group.generation_id {
                return Err(ResponseError::IllegalGeneration);
            }
        } else if group.state != ClassicGroupState::Empty {
            return Err(ResponseError::UnknownMemberId);
        }
        if group.state == ClassicGroupState::CompletingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        // A commit keeps the session alive in Stable and PreparingRebalance.
        if matches!(
            group.state,
            ClassicGroupState::Stable | ClassicGroupState::PreparingRebalance
        ) {
            if let Some(member) = group.members.get(&params.member_id) {
                let session = member.session_timeout_ms.max(0) as u64;
                let (group_id, member_id) = (params.group_id.clone(), params.member_id.clone());
                self.schedule_heartbeat(&group_id, &member_id, session);
            }
        }
        Ok(())
    }
}
