//! Replica placement: choosing brokers for the partitions of a new topic.
//!
//! [`ReplicaPlacer`] is the seam (Kafka's `ReplicaPlacer` interface);
//! [`StripedReplicaPlacer`] is the default, Kafka's rack-unaware striping
//! (`AdminUtils.assignReplicasToBrokersRackUnaware`): replicas are spread
//! evenly over the unfenced brokers, leaders rotate, and the distance between
//! a leader and its followers shifts every time the partitions wrap around the
//! broker list. Pure: reads the image, writes nothing.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::control::MAX_RECORDS_PER_USER_OP;
use crate::error::ControllerError;
use crate::image::MetadataImage;

/// Chooses the replicas of each partition of a new topic.
pub trait ReplicaPlacer: Send + Sync {
    /// Checks, without allocating anything per partition, that
    /// [`ReplicaPlacer::place`] would succeed for these arguments, except for
    /// the size bound: the controller enforces [`MAX_RECORDS_PER_USER_OP`]
    /// on the whole request itself. It calls this before counting the
    /// topic's records, so a topic the placer rejects fails with its own
    /// error and does not count (as in Kafka, where it adds no records).
    ///
    /// # Errors
    ///
    /// The errors [`ReplicaPlacer::place`] would return, other than
    /// [`ControllerError::PolicyViolation`].
    fn check(
        &self,
        image: &MetadataImage,
        num_partitions: i32,
        replication_factor: i16,
    ) -> Result<(), ControllerError>;

    /// Returns `num_partitions` replica lists (index = partition id), each of
    /// `replication_factor` distinct broker ids, preferred leader first.
    ///
    /// # Errors
    ///
    /// [`ControllerError::InvalidReplicationFactor`] when `replication_factor`
    /// is below 1 or above the number of unfenced brokers;
    /// [`ControllerError::InvalidReplicaAssignment`] when `num_partitions` is
    /// below 1; [`ControllerError::PolicyViolation`] when it is above
    /// [`MAX_RECORDS_PER_USER_OP`] (the placement could never be committed,
    /// and would allocate in proportion to an unchecked request value).
    fn place(
        &self,
        image: &MetadataImage,
        num_partitions: i32,
        replication_factor: i16,
    ) -> Result<Vec<Vec<i32>>, ControllerError>;
}

/// Kafka's rack-unaware striping over the unfenced brokers sorted by id,
/// starting at an index that advances with every call so consecutive topics
/// get different leaders for partition 0.
#[derive(Debug, Default)]
pub struct StripedReplicaPlacer {
    next_start_index: AtomicUsize,
}

impl StripedReplicaPlacer {
    /// A placer whose first call starts at broker index `start_index`
    /// (modulo the broker count).
    pub fn with_start_index(start_index: usize) -> Self {
        StripedReplicaPlacer {
            next_start_index: AtomicUsize::new(start_index),
        }
    }
}

impl ReplicaPlacer for StripedReplicaPlacer {
    fn check(
        &self,
        image: &MetadataImage,
        num_partitions: i32,
        replication_factor: i16,
    ) -> Result<(), ControllerError> {
        let available = image.unfenced_broker_ids().len();
        if replication_factor < 1 || replication_factor as usize > available {
            return Err(ControllerError::InvalidReplicationFactor {
                requested: replication_factor,
                available,
            });
        }
        if num_partitions < 1 {
            return Err(ControllerError::InvalidReplicaAssignment {
                reason: format!("cannot place {num_partitions} partitions"),
            });
        }
        Ok(())
    }

    fn place(
        &self,
        image: &MetadataImage,
        num_partitions: i32,
        replication_factor: i16,
    ) -> Result<Vec<Vec<i32>>, ControllerError> {
        self.check(image, num_partitions, replication_factor)?;
        if num_partitions as usize > MAX_RECORDS_PER_USER_OP {
            return Err(ControllerError::PolicyViolation {
                reason: format!(
                    "cannot place {num_partitions} partitions: one operation may create at \
                     most {MAX_RECORDS_PER_USER_OP} metadata records"
                ),
            });
        }
        let brokers = image.unfenced_broker_ids();
        let start = self.next_start_index.fetch_add(1, Ordering::Relaxed) % brokers.len();
        Ok(stripe(
            &brokers,
            num_partitions as usize,
            replication_factor as usize,
            start,
        ))
    }
}

/// The striping itself: partition `p` leads on `brokers[(start + p) % n]`;
/// follower `j` sits `1 + (shift + j) % (n - 1)` places after the leader,
/// where `shift` starts at `start` and grows by one each time `p` wraps `n`.
fn stripe(
    brokers: &[i32],
    partitions: usize,
    replication_factor: usize,
    start: usize,
) -> Vec<Vec<i32>> {
    let n = brokers.len();
    let mut shift = start;
    (0..partitions)
        .map(|p| {
            if p > 0 && p % n == 0 {
                shift += 1;
            }
            let first = (p + start) % n;
            let mut replicas = Vec::with_capacity(replication_factor);
            replicas.push(brokers[first]);
            for j in 0..replication_factor - 1 {
                let offset = 1 + (shift + j) % (n - 1);
                replicas.push(brokers[(first + offset) % n]);
            }
            replicas
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::records::{MetadataRecord, RegisterBrokerRecord};

    fn image_with_brokers(ids: &[i32], fenced: &[i32]) -> MetadataImage {
        let mut image = MetadataImage::new("c");
        for &id in ids {
            image
                .apply(&MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                    broker_id: id,
                    incarnation_id: uuid::Uuid::from_u128(id as u128),
                    broker_epoch: 1,
                    end_points: vec![],
                    rack: None,
                    fenced: fenced.contains(&id),
                }))
                .unwrap();
        }
        image
    }

    #[test]
    fn stripes_like_kafka_rack_unaware_assignment() {
        // Kafka's AdminRackAwareTest/ReplicaAssignment example: 5 brokers,
        // 10 partitions, RF 3, fixed start index 0.
        let got = stripe(&[0, 1, 2, 3, 4], 10, 3, 0);
        let expected = vec![
            vec![0, 1, 2],
            vec![1, 2, 3],
            vec![2, 3, 4],
            vec![3, 4, 0],
            vec![4, 0, 1],
            vec![0, 2, 3],
            vec![1, 3, 4],
            vec![2, 4, 0],
            vec![3, 0, 1],
            vec![4, 1, 2],
        ];
        assert_eq!(got, expected);
    }

    #[test]
    fn placement_skips_fenced_brokers_and_balances_leaders() {
        let image = image_with_brokers(&[5, 1, 3, 9], &[9]);
        let placer = StripedReplicaPlacer::with_start_index(0);
        let placed = placer.place(&image, 6, 2).unwrap();
        assert_eq!(placed.len(), 6);
        let mut leaders: BTreeMap<i32, usize> = BTreeMap::new();
        for replicas in &placed {
            assert_eq!(replicas.len(), 2);
            let distinct: BTreeSet<_> = replicas.iter().collect();
            assert_eq!(distinct.len(), 2, "replicas must be distinct: {replicas:?}");
            assert!(!replicas.contains(&9), "fenced broker placed: {replicas:?}");
            *leaders.entry(replicas[0]).or_default() += 1;
        }
        assert_eq!(leaders, BTreeMap::from([(1, 2), (3, 2), (5, 2)]));
        assert_eq!(
            placed[0][0], 1,
            "start index 0 leads on the lowest broker id"
        );
    }

    #[test]
    fn start_index_rotates_between_calls() {
        let image = image_with_brokers(&[1, 2, 3], &[]);
        let placer = StripedReplicaPlacer::default();
        let first_leaders: Vec<i32> = (0..3)
            .map(|_| placer.place(&image, 1, 1).unwrap()[0][0])
            .collect();
        assert_eq!(first_leaders, vec![1, 2, 3]);
    }

    #[test]
    fn refuses_to_place_more_partitions_than_one_operation_may_create() {
        let image = image_with_brokers(&[1], &[]);
        let placer = StripedReplicaPlacer::default();
        assert!(matches!(
            placer.place(&image, i32::MAX, 1),
            Err(ControllerError::PolicyViolation { .. })
        ));
        let cap = crate::control::MAX_RECORDS_PER_USER_OP as i32;
        assert_eq!(placer.place(&image, cap, 1).unwrap().len(), cap as usize);
    }

    #[test]
    fn rejects_impossible_replication_factor() {
        let image = image_with_brokers(&[1, 2], &[2]);
        let placer = StripedReplicaPlacer::default();
        assert_eq!(
            placer.place(&image, 1, 2),
            Err(ControllerError::InvalidReplicationFactor {
                requested: 2,
                available: 1
            })
        );
        assert!(matches!(
            placer.place(&image, 1, 0),
            Err(ControllerError::InvalidReplicationFactor { requested: 0, .. })
        ));
        assert!(matches!(
            placer.place(&image, 0, 1),
            Err(ControllerError::InvalidReplicaAssignment { .. })
        ));
    }
}
