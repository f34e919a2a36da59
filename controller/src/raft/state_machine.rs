//! The metadata state machine (openraft's `RaftStateMachine`): replays
//! committed batches into the `MetadataImage`, publishes each new image, and
//! builds and installs snapshots.
//!
//! The image itself is not persisted on every apply: on restart it is rebuilt
//! from the latest snapshot plus replay of the committed log after it.
//! Snapshots are stored in `metadata.snapshot` in the metadata directory as
//! JSON `{ meta, image }` (openraft's snapshot meta: last included log id and
//! membership; and the serialized `MetadataImage`), replaced atomically. The
//! bytes openraft transfers between voters are the JSON `MetadataImage`.

use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{AnyError, EntryPayload, RaftSnapshotBuilder, StorageIOError};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::fs::{parse_json, read_optional, write_atomically};
use super::{
    AppliedBatch, Entry, LogId, MetadataTypeConfig, Snapshot, SnapshotMeta, StorageError,
    StoredMembership,
};
use crate::image::MetadataImage;
use crate::observer::RecentBatches;

/// Name of the snapshot file.
pub(crate) const SNAPSHOT_FILE: &str = "metadata.snapshot";

/// Contents of [`SNAPSHOT_FILE`].
#[derive(Serialize, Deserialize)]
pub(crate) struct StoredSnapshot {
    meta: SnapshotMeta,
    image: MetadataImage,
}

/// Replays committed entries into the image and owns the snapshot file.
pub(crate) struct MetadataStateMachine {
    dir: PathBuf,
    /// The image as of `last_applied`; shared with the last published value.
    image: Arc<MetadataImage>,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    /// Where new images are published; the quorum hands out receivers.
    publisher: watch::Sender<Arc<MetadataImage>>,
    /// Applied entries kept for observers, when the quorum asks for them.
    recent: Option<Arc<RecentBatches>>,
}

fn snapshot_err(e: impl std::error::Error + 'static, reading: bool) -> StorageError {
    let source = if reading {
        StorageIOError::read_snapshot(None, AnyError::new(&e))
    } else {
        StorageIOError::write_snapshot(None, AnyError::new(&e))
    };
    StorageError::IO { source }
}

impl MetadataStateMachine {
    /// Opens the state machine in `dir`, starting from the stored snapshot if
    /// there is one. `cluster_id` (from `meta.properties`) is stamped on the
    /// image. Blocking.
    ///
    /// # Errors
    ///
    /// I/O errors, or a snapshot file that is not valid JSON.
    pub(crate) fn open(dir: &Path, cluster_id: &str) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let (mut image, last_applied, membership) = match read_optional(dir, SNAPSHOT_FILE)? {
            Some(bytes) => {
                let stored: StoredSnapshot = parse_json(SNAPSHOT_FILE, &bytes)?;
                (
                    stored.image,
                    stored.meta.last_log_id,
                    stored.meta.last_membership,
                )
            }
            None => (MetadataImage::default(), None, StoredMembership::default()),
        };
        image.cluster_id = cluster_id.to_string();
        image.controller_id = None;
        let image = Arc::new(image);
        let (publisher, _) = watch::channel(image.clone());
        Ok(MetadataStateMachine {
            dir: dir.to_path_buf(),
            image,
            last_applied,
            membership,
            publisher,
            recent: None,
        })
    }

    /// Notes every entry applied from now on in `recent` (emptied when a
    /// snapshot is installed).
    pub(crate) fn keep_recent(&mut self, recent: Arc<RecentBatches>) {
        self.recent = Some(recent);
    }

    /// True when no snapshot was loaded and nothing was applied.
    pub(crate) fn is_pristine(&self) -> bool {
        self.last_applied.is_none()
    }

    /// The sender new images are published on.
    pub(crate) fn publisher(&self) -> watch::Sender<Arc<MetadataImage>> {
        self.publisher.clone()
    }

    /// Publishes `self.image`, keeping the controller id the quorum set.
    fn publish(&mut self) {
        let image = &mut self.image;
        self.publisher.send_modify(|published| {
            if image.controller_id != published.controller_id {
                Arc::make_mut(image).controller_id = published.controller_id;
            }
            *published = image.clone();
        });
        metrics::gauge!("weir_controller_last_applied_offset")
            .set(self.image.last_applied_offset as f64);
    }
}

impl RaftStateMachine<MetadataTypeConfig> for MetadataStateMachine {
    type SnapshotBuilder = MetadataSnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<AppliedBatch>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut replies = Vec::new();
        for entry in entries {
            let log_id = entry.log_id;
            let mut applied = true;
            let mut replayed = Vec::new();
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(batch) => {
                    // All or nothing: replay onto a copy, keep it only if
                    // every record replays.
                    let mut next = (*self.image).clone();
                    let failed = batch.records.iter().find_map(|r| next.apply(r).err());
                    match failed {
                        None => {
                            self.image = Arc::new(next);
                            replayed = batch.records;
                        }
                        Some(error) => {
                            applied = false;
                            tracing::error!(
                                offset = log_id.index,
                                %error,
                                "metadata batch does not replay; skipping it"
                            );
                        }
                    }
                }
                EntryPayload::Membership(membership) => {
                    self.membership = StoredMembership::new(Some(log_id), membership);
                }
            }
            Arc::make_mut(&mut self.image).last_applied_offset = log_id.index;
            self.last_applied = Some(log_id);
            if let Some(recent) = &self.recent {
                recent.push(log_id.index, replayed);
            }
            replies.push(AppliedBatch {
                offset: log_id.index,
                applied,
            });
        }
        if !replies.is_empty() {
            self.publish();
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        MetadataSnapshotBuilder {
            dir: self.dir.clone(),
            image: self.image.clone(),
            last_applied: self.last_applied,
            membership: self.membership.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let mut image: MetadataImage =
            serde_json::from_slice(snapshot.get_ref()).map_err(|e| snapshot_err(e, true))?;
        image.cluster_id = self.image.cluster_id.clone();
        image.last_applied_offset = meta.last_log_id.map_or(0, |l| l.index);
        let stored = StoredSnapshot {
            meta: meta.clone(),
            image,
        };
        let bytes = serde_json::to_vec(&stored).map_err(|e| snapshot_err(e, false))?;
        let dir = self.dir.clone();
        crate::determinism::blocking(move || write_atomically(&dir, SNAPSHOT_FILE, &bytes))
            .await
            .map_err(|e| snapshot_err(e, false))?;
        self.image = Arc::new(stored.image);
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        if let Some(recent) = &self.recent {
            recent.clear();
        }
        self.publish();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let dir = self.dir.clone();
        let bytes = crate::determinism::blocking(move || read_optional(&dir, SNAPSHOT_FILE))
            .await
            .map_err(|e| snapshot_err(e, true))?;
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        let stored: StoredSnapshot =
            serde_json::from_slice(&bytes).map_err(|e| snapshot_err(e, true))?;
        let data = serde_json::to_vec(&stored.image).map_err(|e| snapshot_err(e, true))?;
        Ok(Some(Snapshot {
            meta: stored.meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}

/// Builds a snapshot from the image as it was when the builder was taken.
pub(crate) struct MetadataSnapshotBuilder {
    dir: PathBuf,
    image: Arc<MetadataImage>,
    last_applied: Option<LogId>,
    membership: StoredMembership,
}

impl RaftSnapshotBuilder<MetadataTypeConfig> for MetadataSnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let snapshot_id = match self.last_applied {
            Some(l) => format!(
                "{}-{}-{}",
                l.leader_id.term,
                l.index,
                crate::determinism::uuid_v4()
            ),
            None => format!("0-0-{}", crate::determinism::uuid_v4()),
        };
        let meta = SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
            snapshot_id,
        };
        let data = serde_json::to_vec(&*self.image).map_err(|e| snapshot_err(e, false))?;
        let stored = serde_json::to_vec(&StoredSnapshot {
            meta: meta.clone(),
            image: (*self.image).clone(),
        })
        .map_err(|e| snapshot_err(e, false))?;
        let dir = self.dir.clone();
        crate::determinism::blocking(move || write_atomically(&dir, SNAPSHOT_FILE, &stored))
            .await
            .map_err(|e| snapshot_err(e, false))?;
        tracing::info!(
            offset = self.image.last_applied_offset,
            "wrote metadata snapshot"
        );
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, Membership};

    use super::*;
    use crate::raft::MetadataBatch;
    use crate::records::{MetadataRecord, TopicRecord};

    fn normal(index: u64, name: &str) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 0), index),
            payload: EntryPayload::Normal(MetadataBatch {
                records: vec![MetadataRecord::Topic(TopicRecord {
                    name: name.into(),
                    topic_id: uuid::Uuid::from_u128(index as u128),
                })],
            }),
        }
    }

    #[tokio::test]
    async fn snapshot_build_and_install_round_trip() {
        let leader_dir = tempfile::tempdir().unwrap();
        let follower_dir = tempfile::tempdir().unwrap();
        let mut leader = MetadataStateMachine::open(leader_dir.path(), "c1").unwrap();
        let membership = Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 0), 1),
            payload: EntryPayload::Membership(Membership::new(
                vec![[0u64].into_iter().collect()],
                None,
            )),
        };
        leader
            .apply(vec![membership, normal(2, "a"), normal(3, "b")])
            .await
            .unwrap();
        let built = leader
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
        assert_eq!(built.meta.last_log_id.map(|l| l.index), Some(3));

        let mut follower = MetadataStateMachine::open(follower_dir.path(), "c1").unwrap();
        let mut images = follower.publisher().subscribe();
        follower
            .install_snapshot(&built.meta, built.snapshot)
            .await
            .unwrap();
        let installed = images.borrow_and_update().clone();
        assert_eq!(installed.topics.keys().collect::<Vec<_>>(), vec!["a", "b"]);
        assert_eq!(installed.last_applied_offset, 3);
        assert_eq!(*installed, *leader.image);

        // A reopened state machine starts from the installed snapshot.
        drop(follower);
        let mut reopened = MetadataStateMachine::open(follower_dir.path(), "c1").unwrap();
        assert_eq!(*reopened.image, *leader.image);
        let (applied, membership) = reopened.applied_state().await.unwrap();
        assert_eq!(applied.map(|l| l.index), Some(3));
        assert_eq!(membership.log_id().map(|l| l.index), Some(1));
    }

    #[tokio::test]
    async fn a_batch_that_does_not_replay_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut sm = MetadataStateMachine::open(dir.path(), "c1").unwrap();
        let mut bad = normal(2, "x");
        if let EntryPayload::Normal(batch) = &mut bad.payload {
            // The same topic twice: the second TopicRecord does not replay.
            batch.records.push(batch.records[0].clone());
        }
        let replies = sm.apply(vec![normal(1, "a"), bad]).await.unwrap();
        assert_eq!(
            replies.iter().map(|r| r.applied).collect::<Vec<_>>(),
            vec![true, false]
        );
        assert!(sm.image.topic("x").is_none());
        assert!(sm.image.topic("a").is_some());
        assert_eq!(sm.image.last_applied_offset, 2);
    }
}
