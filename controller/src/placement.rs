//! Replica placement: choosing brokers for the partitions of a new topic.
//!
//! [`ReplicaPlacer`] is the seam (Kafka's `ReplicaPlacer` interface);
//! [`StripedReplicaPlacer`] is the default, Kafka's striping
//! (`AdminUtils.assignReplicasToBrokersRackUnaware`): replicas are spread
//! evenly over the unfenced brokers, leaders rotate, and the distance between
//! a leader and its followers shifts every time the partitions wrap around the
//! broker list. When every unfenced broker has a rack (`broker.rack`), it is
//! rack-aware as `AdminUtils.assignReplicasToBrokersRackAware`: the brokers
//! are ordered alternating between racks and each partition's replicas go to
//! as many different racks as there are. Pure: reads the image, writes
//! nothing.

use std::collections::BTreeMap;
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
        let racks: Option<BTreeMap<i32, &str>> = brokers
            .iter()
            .map(|id| Some((*id, image.brokers.get(id)?.rack.as_deref()?)))
            .collect();
        Ok(match racks {
            Some(racks) => stripe_rack_aware(
                &racks,
                num_partitions as usize,
                replication_factor as usize,
                start,
            ),
            None => stripe(
                &brokers,
                num_partitions as usize,
                replication_factor as usize,
                start,
            ),
        })
    }
}

/// Kafka's rack-alternated broker order: racks sorted by name, brokers
/// within a rack by id, then one broker from each rack in turn.
fn rack_alternated(racks: &BTreeMap<i32, &str>) -> Vec<i32> {
    let mut by_rack: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (&id, &rack) in racks {
        by_rack.entry(rack).or_default().push(id);
    }
    let mut queues: Vec<std::vec::IntoIter<i32>> =
        by_rack.into_values().map(Vec::into_iter).collect();
    let mut order = Vec::with_capacity(racks.len());
    while order.len() < racks.len() {
        for queue in &mut queues {
            order.extend(queue.next());
        }
    }
    order
}

/// Rack-aware striping over the rack-alternated order of `racks` (broker id
/// to rack): the leader as in [`stripe`]; each follower is the next broker
/// (at the shifted distance) whose rack holds no replica of the partition
/// yet, or, once every rack has one, whose broker holds none.
fn stripe_rack_aware(
    racks: &BTreeMap<i32, &str>,
    partitions: usize,
    replication_factor: usize,
    start: usize,
) -> Vec<Vec<i32>> {
    let brokers = rack_alternated(racks);
    let n = brokers.len();
    let rack_count = racks
        .values()
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let mut shift = start;
    (0..partitions)
        .map(|p| {
            if p > 0 && p % n == 0 {
                shift += 1;
            }
            let first = (p + start) % n;
            let mut replicas = Vec::with_capacity(replication_factor);
            replicas.push(brokers[first]);
            let mut used_racks = vec![racks[&brokers[first]]];
            let mut k = 0;
            while replicas.len() < replication_factor {
                let offset = 1 + (shift * rack_count + k) % (n - 1);
                let broker = brokers[(first + offset) % n];
                let rack = racks[&broker];
                k += 1;
                let rack_ok = !used_racks.contains(&rack) || used_racks.len() == rack_count;
                if rack_ok && !replicas.contains(&broker) {
                    replicas.push(broker);
                    if !used_racks.contains(&rack) {
                        used_racks.push(rack);
                    }
                }
            }
            replicas
        })
        .collect()
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
    fn stripes_like_kafka_rack_aware_assignment() {
        // Kafka's AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
        let racks = BTreeMap::from([
            (0, "rack1"),
            (1, "rack3"),
            (2, "rack3"),
            (3, "rack2"),
            (4, "rack2"),
            (5, "rack1"),
        ]);
        assert_eq!(rack_alternated(&racks), vec![0, 3, 1, 5, 4, 2]);
        let mut without_5 = racks.clone();
        without_5.remove(&5);
        assert_eq!(rack_alternated(&without_5), vec![0, 3, 1, 4, 2]);
        let expected = vec![
            vec![0, 3, 1],
            vec![3, 1, 5],
            vec![1, 5, 4],
            vec![5, 4, 2],
            vec![4, 2, 0],
            vec![2, 0, 3],
            vec![0, 4, 2],
        ];
        assert_eq!(stripe_rack_aware(&racks, 7, 3, 0), expected);
    }

    #[test]
    fn racked_unfenced_brokers_get_replicas_in_every_rack() {
        let mut image = MetadataImage::new("c");
        for (id, rack, fenced) in [
            (1, "a", false),
            (2, "a", false),
            (3, "b", false),
            (4, "b", true),
            (5, "c", false),
        ] {
            image
                .apply(&MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                    broker_id: id,
                    incarnation_id: uuid::Uuid::from_u128(id as u128),
                    broker_epoch: 1,
                    end_points: vec![],
                    rack: Some(rack.into()),
                    fenced,
                }))
                .unwrap();
        }
        let placer = StripedReplicaPlacer::with_start_index(0);
        for replicas in placer.place(&image, 8, 3).unwrap() {
            let racks: BTreeSet<_> = replicas
                .iter()
                .map(|id| image.brokers[id].rack.clone().unwrap())
                .collect();
            assert_eq!(racks.len(), 3, "one replica per rack: {replicas:?}");
            assert!(!replicas.contains(&4), "fenced broker placed: {replicas:?}");
        }
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

    #[test]
    fn invalid_replication_factor_messages_are_kafkas() {
        let placer = StripedReplicaPlacer::default();
        let message =
            |image: &MetadataImage, rf| placer.place(image, 1, rf).unwrap_err().to_string();
        let two_of_three = image_with_brokers(&[1, 2, 3], &[3]);
        assert_eq!(
            message(&two_of_three, 3),
            "Unable to replicate the partition 3 time(s): The target replication factor of 3 \
             cannot be reached because only 2 broker(s) are registered."
        );
        assert_eq!(
            message(&two_of_three, 0),
            "Unable to replicate the partition 0 time(s): Invalid replication factor 0: the \
             replication factor must be positive."
        );
        assert_eq!(
            message(&image_with_brokers(&[1], &[1]), 1),
            "Unable to replicate the partition 1 time(s): All brokers are currently fenced."
        );
    }
}
