//! The simulation's invariants, each a pure function over what the driver
//! observed: raft states sampled from every voter, every image each voter
//! published, the commands clients sent with their outcomes, and the final
//! images once the network healed. A function returns the first
//! [`Violation`] it finds. The unit tests at the bottom feed each one a
//! hand-made bad history, so each is shown able to fail.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use weir_controller::{MetadataImage, RaftStatus, TopicId};

/// One sample of a voter's raft state. `incarnation` counts the voter's
/// starts (1 for the first process, 2 after one restart, ...).
#[derive(Debug, Clone)]
pub struct RaftObservation {
    pub node: i32,
    pub incarnation: u32,
    pub status: RaftStatus,
}

/// One image a voter published, in the order that voter published them.
#[derive(Debug, Clone)]
pub struct ImageObservation {
    pub node: i32,
    pub incarnation: u32,
    pub image: Arc<MetadataImage>,
}

/// A metadata change a client asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    CreateTopic {
        name: String,
    },
    DeleteTopic {
        name: String,
    },
    /// Grow the topic to `count` partitions in total.
    CreatePartitions {
        name: String,
        count: i32,
    },
}

impl Command {
    fn topic(&self) -> &str {
        match self {
            Command::CreateTopic { name }
            | Command::DeleteTopic { name }
            | Command::CreatePartitions { name, .. } => name,
        }
    }
}

/// What the client was told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Created(TopicId),
    Deleted(TopicId),
    PartitionsCreated,
    /// The topic was not there (`ControllerError::UnknownTopic`).
    UnknownTopic,
    /// The name was taken (`ControllerError::TopicAlreadyExists`).
    TopicAlreadyExists,
    /// Any other error: the change may or may not have happened (a timed-out
    /// commit can still commit later; a lost response hides a success).
    Failed(String),
}

/// One command with its outcome. `started` and `ended` are positions on
/// one logical clock shared by every command of a run, so `a.ended <
/// b.started` means `a` returned before `b` was sent.
#[derive(Debug, Clone)]
pub struct CommandRecord {
    pub via: i32,
    pub started: u64,
    pub ended: u64,
    pub command: Command,
    pub outcome: Outcome,
}

/// A broken invariant: its name and what was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: &'static str,
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invariant '{}' violated: {}",
            self.invariant, self.detail
        )
    }
}

fn violation(invariant: &'static str, detail: String) -> Result<(), Violation> {
    Err(Violation { invariant, detail })
}

/// Raft's election safety, as KRaft's one leader per epoch (openraft is
/// built with its `single-term-leader` feature for this).
///
/// No two voters are leader of the same term. A voter that claims
/// leadership of a term and a voter that names a leader for a term both
/// count, so followers that disagree about a term's leader fail too. And
/// each voter process's `(term, leader)` never goes back (a later sample
/// never names an older term), and a voter that leads names itself.
pub fn at_most_one_leader_per_term(history: &[RaftObservation]) -> Result<(), Violation> {
    one_leader_per_term(history)?;
    leader_ids_never_go_backwards(history)
}

fn leader_ids_never_go_backwards(history: &[RaftObservation]) -> Result<(), Violation> {
    const NAME: &str = "a voter's (term, leader) never goes backwards";
    let mut last: BTreeMap<(i32, u32), (u64, i32)> = BTreeMap::new();
    for o in history {
        if o.status.is_leader && o.status.leader.is_some_and(|l| l != o.node) {
            return violation(
                NAME,
                format!(
                    "voter {} leads term {} but names leader {:?}",
                    o.node, o.status.term, o.status.leader
                ),
            );
        }
        let leader = if o.status.is_leader {
            Some(o.node)
        } else {
            o.status.leader
        };
        let Some(leader) = leader else { continue };
        let now = (o.status.term, leader);
        let process = (o.node, o.incarnation);
        if let Some(&before) = last.get(&process) {
            if now < before {
                return violation(
                    NAME,
                    format!(
                        "voter {} (incarnation {}) went from leader {} of term {} to leader {} \
                         of term {}",
                        o.node, o.incarnation, before.1, before.0, now.1, now.0
                    ),
                );
            }
        }
        last.insert(process, now);
    }
    Ok(())
}

fn one_leader_per_term(history: &[RaftObservation]) -> Result<(), Violation> {
    const NAME: &str = "at most one leader per raft term";
    // term -> (leader, the observation that named it)
    let mut leaders: BTreeMap<u64, (i32, &RaftObservation)> = BTreeMap::new();
    for o in history {
        let claimed = o.status.is_leader.then_some(o.node);
        for leader in claimed.into_iter().chain(o.status.leader) {
            match leaders.entry(o.status.term) {
                Entry::Vacant(e) => {
                    e.insert((leader, o));
                }
                Entry::Occupied(e) if e.get().0 != leader => {
                    let (first, seen) = e.get();
                    return violation(
                        NAME,
                        format!(
                            "term {}: voter {} (incarnation {}) saw leader {first}, \
                             voter {} (incarnation {}) saw leader {leader}",
                            o.status.term, seen.node, seen.incarnation, o.node, o.incarnation
                        ),
                    );
                }
                Entry::Occupied(_) => {}
            }
        }
    }
    Ok(())
}

/// In every published image: each partition's leader is -1 or in its ISR,
/// the ISR is a subset of the replicas, and no replica is listed twice.
pub fn partition_leader_in_isr_and_isr_in_replicas(
    history: &[ImageObservation],
) -> Result<(), Violation> {
    const NAME: &str = "partition leader in ISR, ISR a subset of replicas";
    for o in history {
        for (name, topic) in &o.image.topics {
            for (index, p) in &topic.partitions {
                let at = || {
                    format!(
                        "voter {} (incarnation {}) at offset {}: {name}-{index} \
                         replicas {:?} isr {:?} leader {}",
                        o.node,
                        o.incarnation,
                        o.image.last_applied_offset,
                        p.replicas,
                        p.isr,
                        p.leader
                    )
                };
                if p.leader != -1 && !p.isr.contains(&p.leader) {
                    return violation(NAME, format!("leader not in ISR: {}", at()));
                }
                if let Some(r) = p.isr.iter().find(|r| !p.replicas.contains(r)) {
                    return violation(NAME, format!("ISR member {r} is no replica: {}", at()));
                }
                let distinct: BTreeSet<_> = p.replicas.iter().collect();
                if distinct.len() != p.replicas.len() {
                    return violation(NAME, format!("a replica is listed twice: {}", at()));
                }
            }
        }
    }
    Ok(())
}

/// On each voter process, in publishing order: every partition's leader
/// epoch and partition epoch never decrease, and the image's applied offset
/// never decreases. Partitions are keyed by topic id, so a deleted and
/// re-created topic starts afresh. A restarted voter (new incarnation)
/// replays its log from the start and may show older images again.
pub fn epochs_never_go_backwards(history: &[ImageObservation]) -> Result<(), Violation> {
    const NAME: &str = "leader and partition epochs never go backwards";
    // (node, incarnation) -> applied offset
    let mut offsets: BTreeMap<(i32, u32), u64> = BTreeMap::new();
    // (node, incarnation, topic id, partition) -> (leader epoch, partition epoch)
    let mut epochs: BTreeMap<(i32, u32, TopicId, i32), (i32, i32)> = BTreeMap::new();
    for o in history {
        let process = (o.node, o.incarnation);
        let offset = o.image.last_applied_offset;
        if let Some(&before) = offsets.get(&process) {
            if offset < before {
                return violation(
                    NAME,
                    format!(
                        "voter {} (incarnation {}) applied offset went from {before} to {offset}",
                        o.node, o.incarnation
                    ),
                );
            }
        }
        offsets.insert(process, offset);
        for (name, topic) in &o.image.topics {
            for (&index, p) in &topic.partitions {
                let key = (o.node, o.incarnation, topic.topic_id, index);
                let now = (p.leader_epoch, p.partition_epoch);
                if let Some(&(leader_epoch, partition_epoch)) = epochs.get(&key) {
                    if now.0 < leader_epoch || now.1 < partition_epoch {
                        return violation(
                            NAME,
                            format!(
                                "voter {} (incarnation {}) {name}-{index}: leader epoch \
                                 {leader_epoch} -> {}, partition epoch {partition_epoch} -> {} \
                                 (offset {offset})",
                                o.node, o.incarnation, now.0, now.1
                            ),
                        );
                    }
                }
                epochs.insert(key, now);
            }
        }
    }
    Ok(())
}

/// After healing: every voter's image is the same (all of it: topics,
/// brokers, configs, producer ids, applied offset and active controller),
/// and an active controller is known.
pub fn images_converged(images: &[(i32, Arc<MetadataImage>)]) -> Result<(), Violation> {
    const NAME: &str = "every voter's image converges";
    let Some((first_node, first)) = images.first() else {
        return Ok(());
    };
    if first.controller_id.is_none() {
        return violation(
            NAME,
            format!("voter {first_node} knows no active controller"),
        );
    }
    for (node, image) in &images[1..] {
        if image == first {
            continue;
        }
        let field = if image.last_applied_offset != first.last_applied_offset {
            format!(
                "applied offset {} vs {}",
                first.last_applied_offset, image.last_applied_offset
            )
        } else if image.controller_id != first.controller_id {
            format!(
                "active controller {:?} vs {:?}",
                first.controller_id, image.controller_id
            )
        } else if image.topics != first.topics {
            format!(
                "topics {:?} vs {:?}",
                first.topics.keys().collect::<Vec<_>>(),
                image.topics.keys().collect::<Vec<_>>()
            )
        } else {
            "brokers, configs, features or producer ids".to_string()
        };
        return violation(
            NAME,
            format!("voter {first_node} and voter {node} differ: {field}"),
        );
    }
    Ok(())
}

/// No acknowledged command is lost, judged on the converged `image`:
/// - a topic whose creation was acknowledged (with its topic id) is there
///   with that id, unless a delete of that name overlapped or followed the
///   create;
/// - a topic whose deletion was acknowledged is gone (its id);
/// - a topic grown by an acknowledged CreatePartitions has at least that
///   many partitions, unless a create or delete of that name overlapped or
///   followed it;
/// - every topic in the image was asked for by some create.
pub fn no_acknowledged_command_lost(
    image: &MetadataImage,
    commands: &[CommandRecord],
) -> Result<(), Violation> {
    const NAME: &str = "no acknowledged command lost";
    // Another command on the same topic that may have run after `c`.
    let touched_later = |c: &CommandRecord, kinds: &dyn Fn(&Command) -> bool| {
        commands.iter().any(|o| {
            o.command.topic() == c.command.topic() && kinds(&o.command) && o.ended > c.started
        })
    };
    let is_delete = |c: &Command| matches!(c, Command::DeleteTopic { .. });
    let is_create_or_delete =
        |c: &Command| matches!(c, Command::DeleteTopic { .. } | Command::CreateTopic { .. });
    for c in commands {
        let name = c.command.topic();
        match (&c.command, &c.outcome) {
            (Command::CreateTopic { .. }, Outcome::Created(id)) => {
                if touched_later(c, &is_delete) {
                    continue;
                }
                if image.topic_names_by_id.get(id).map(String::as_str) != Some(name) {
                    return violation(
                        NAME,
                        format!(
                            "create of '{name}' via voter {} was acknowledged with id {id} \
                             but the final image has {:?}",
                            c.via,
                            image.topic(name).map(|t| t.topic_id)
                        ),
                    );
                }
            }
            (Command::DeleteTopic { .. }, Outcome::Deleted(id))
                if image.topic_names_by_id.contains_key(id) =>
            {
                return violation(
                    NAME,
                    format!(
                        "delete of '{name}' ({id}) via voter {} was acknowledged but the \
                         topic is in the final image",
                        c.via
                    ),
                );
            }
            (Command::CreatePartitions { count, .. }, Outcome::PartitionsCreated) => {
                if touched_later(c, &is_create_or_delete) {
                    continue;
                }
                let now = image.topic(name).map_or(0, |t| t.partitions.len());
                if now < *count as usize {
                    return violation(
                        NAME,
                        format!(
                            "'{name}' was grown to {count} partitions via voter {} but the \
                             final image has {now}",
                            c.via
                        ),
                    );
                }
            }
            _ => {}
        }
    }
    let asked: BTreeSet<&str> = commands
        .iter()
        .filter(|c| matches!(c.command, Command::CreateTopic { .. }))
        .map(|c| c.command.topic())
        .collect();
    if let Some(name) = image.topics.keys().find(|n| !asked.contains(n.as_str())) {
        return violation(
            NAME,
            format!("topic '{name}' is in the image but nobody created it"),
        );
    }
    Ok(())
}

/// Answers are not stale (linearizability of the metadata log as clients
/// see it): a command sent after a create of a topic was acknowledged is
/// not told the topic is unknown, and a create sent after a delete of that
/// name was acknowledged is not told the name is taken, unless another
/// delete or create of that name overlapped.
pub fn answers_reflect_earlier_acknowledged_commands(
    commands: &[CommandRecord],
) -> Result<(), Violation> {
    const NAME: &str = "answers reflect every earlier acknowledged command";
    for c in commands {
        // What an earlier acknowledged command must be for `c`'s answer to
        // be stale, and what kind of command may have undone it meanwhile.
        type Acknowledged = fn(&CommandRecord) -> bool;
        type UndoneBy = fn(&Command) -> bool;
        let (acknowledged, undone_by): (Acknowledged, UndoneBy) = match (&c.command, &c.outcome) {
            (_, Outcome::UnknownTopic) => (
                |a| {
                    matches!(
                        (&a.command, &a.outcome),
                        (Command::CreateTopic { .. }, Outcome::Created(_))
                    )
                },
                |o| matches!(o, Command::DeleteTopic { .. }),
            ),
            (Command::CreateTopic { .. }, Outcome::TopicAlreadyExists) => (
                |a| {
                    matches!(
                        (&a.command, &a.outcome),
                        (Command::DeleteTopic { .. }, Outcome::Deleted(_))
                    )
                },
                |o| matches!(o, Command::CreateTopic { .. }),
            ),
            _ => continue,
        };
        let same_topic = |o: &CommandRecord| o.command.topic() == c.command.topic();
        let stale = commands.iter().find(|a| {
            same_topic(a)
                && acknowledged(a)
                && a.ended < c.started
                && !commands.iter().any(|o| {
                    !std::ptr::eq(o, c)
                        && same_topic(o)
                        && undone_by(&o.command)
                        && o.ended > a.started
                        && o.started < c.ended
                })
        });
        if let Some(a) = stale {
            return violation(
                NAME,
                format!(
                    "{:?} via voter {} (sent at {}) was answered {:?}, but {:?} via voter {} \
                     was acknowledged {:?} at {} and nothing else touched '{}' in between",
                    c.command,
                    c.via,
                    c.started,
                    c.outcome,
                    a.command,
                    a.via,
                    a.outcome,
                    a.ended,
                    c.command.topic()
                ),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use weir_controller::{PartitionRegistration, TopicImage};

    use super::*;

    fn status(term: u64, leader: Option<i32>, is_leader: bool) -> RaftStatus {
        RaftStatus {
            term,
            leader,
            is_leader,
            last_applied_offset: None,
        }
    }

    fn raft(node: i32, status: RaftStatus) -> RaftObservation {
        RaftObservation {
            node,
            incarnation: 1,
            status,
        }
    }

    fn partition(
        replicas: &[i32],
        isr: &[i32],
        leader: i32,
        epochs: (i32, i32),
    ) -> PartitionRegistration {
        PartitionRegistration {
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            leader,
            leader_epoch: epochs.0,
            partition_epoch: epochs.1,
            leader_recovery_state: Default::default(),
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        }
    }

    fn image(
        offset: u64,
        topics: &[(&str, TopicId, Vec<PartitionRegistration>)],
    ) -> Arc<MetadataImage> {
        let mut image = MetadataImage::new("sim");
        image.controller_id = Some(1);
        image.last_applied_offset = offset;
        for (name, id, partitions) in topics {
            image.topic_names_by_id.insert(*id, name.to_string());
            image.topics.insert(
                name.to_string(),
                Arc::new(TopicImage {
                    name: name.to_string(),
                    topic_id: *id,
                    partitions: partitions
                        .iter()
                        .enumerate()
                        .map(|(i, p)| (i as i32, p.clone()))
                        .collect(),
                    configs: BTreeMap::new(),
                }),
            );
        }
        Arc::new(image)
    }

    fn seen(node: i32, incarnation: u32, image: Arc<MetadataImage>) -> ImageObservation {
        ImageObservation {
            node,
            incarnation,
            image,
        }
    }

    fn id(n: u128) -> TopicId {
        uuid::Uuid::from_u128(n)
    }

    #[test]
    fn two_leaders_in_one_term_fail() {
        let good = [
            raft(1, status(1, Some(1), true)),
            raft(2, status(1, Some(1), false)),
            raft(2, status(2, None, false)),
            raft(3, status(2, Some(2), false)),
            raft(2, status(2, Some(2), true)),
        ];
        assert_eq!(at_most_one_leader_per_term(&good), Ok(()));

        let two_claims = [
            raft(1, status(3, Some(1), true)),
            raft(2, status(3, Some(2), true)),
        ];
        let err = at_most_one_leader_per_term(&two_claims).unwrap_err();
        assert_eq!(err.invariant, "at most one leader per raft term");
        assert!(err.detail.contains("term 3"), "{err}");

        // Followers that name different leaders for one term fail too.
        let disagree = [
            raft(1, status(4, Some(2), false)),
            raft(3, status(4, Some(3), false)),
        ];
        assert!(at_most_one_leader_per_term(&disagree).is_err());

        // A voter never goes back to an older leader, and a leader names
        // itself.
        let backwards = [
            raft(2, status(4, Some(3), false)),
            raft(2, status(4, Some(1), false)),
        ];
        let err = at_most_one_leader_per_term(&backwards).unwrap_err();
        assert!(err.detail.contains("voter 2"), "{err}");
        let older_term = [
            raft(2, status(5, Some(1), false)),
            raft(2, status(4, Some(3), false)),
        ];
        assert!(at_most_one_leader_per_term(&older_term).is_err());
        let confused = [raft(2, status(5, Some(1), true))];
        assert!(at_most_one_leader_per_term(&confused).is_err());
    }

    #[test]
    fn leader_outside_isr_or_isr_outside_replicas_fails() {
        let good = [seen(
            1,
            1,
            image(
                3,
                &[(
                    "a",
                    id(1),
                    vec![
                        partition(&[1, 2], &[1, 2], 1, (0, 0)),
                        partition(&[2, 3], &[3], -1, (1, 1)),
                    ],
                )],
            ),
        )];
        assert_eq!(partition_leader_in_isr_and_isr_in_replicas(&good), Ok(()));

        for bad in [
            partition(&[1, 2], &[2], 1, (0, 0)),
            partition(&[1, 2], &[1, 3], 1, (0, 0)),
            partition(&[1, 1], &[1], 1, (0, 0)),
        ] {
            let history = [seen(2, 1, image(4, &[("a", id(1), vec![bad.clone()])]))];
            let err = partition_leader_in_isr_and_isr_in_replicas(&history).unwrap_err();
            assert!(err.detail.contains("voter 2"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn epochs_going_backwards_on_one_voter_fail() {
        let at = |offset, epochs| {
            image(
                offset,
                &[("a", id(1), vec![partition(&[1], &[1], 1, epochs)])],
            )
        };
        let good = [
            seen(1, 1, at(1, (0, 0))),
            seen(1, 1, at(2, (1, 2))),
            // Another voter and a restarted voter replay from the start.
            seen(2, 1, at(1, (0, 0))),
            seen(1, 2, at(1, (0, 0))),
            // A re-created topic (new id) starts afresh.
            seen(
                1,
                2,
                image(3, &[("a", id(2), vec![partition(&[1], &[1], 1, (0, 0))])]),
            ),
        ];
        assert_eq!(epochs_never_go_backwards(&good), Ok(()));

        let leader_epoch_back = [seen(1, 1, at(1, (2, 2))), seen(1, 1, at(2, (1, 3)))];
        assert!(epochs_never_go_backwards(&leader_epoch_back).is_err());
        let partition_epoch_back = [seen(1, 1, at(1, (2, 2))), seen(1, 1, at(2, (2, 1)))];
        assert!(epochs_never_go_backwards(&partition_epoch_back).is_err());
        let offset_back = [seen(3, 1, at(5, (0, 0))), seen(3, 1, at(4, (0, 0)))];
        let err = epochs_never_go_backwards(&offset_back).unwrap_err();
        assert!(err.detail.contains("from 5 to 4"), "{err}");
    }

    #[test]
    fn diverged_images_fail() {
        let a = image(2, &[("a", id(1), vec![partition(&[1], &[1], 1, (0, 0))])]);
        assert_eq!(
            images_converged(&[(1, a.clone()), (2, a.clone()), (3, a.clone())]),
            Ok(())
        );

        let behind = image(1, &[]);
        assert!(images_converged(&[(1, a.clone()), (2, behind)]).is_err());
        let mut other_controller = (*a).clone();
        other_controller.controller_id = Some(2);
        assert!(images_converged(&[(1, a.clone()), (2, Arc::new(other_controller))]).is_err());
        let other_topic = image(2, &[("b", id(1), vec![partition(&[1], &[1], 1, (0, 0))])]);
        let err = images_converged(&[(1, a.clone()), (3, other_topic)]).unwrap_err();
        assert!(err.detail.contains("topics"), "{err}");
        let mut no_controller = (*a).clone();
        no_controller.controller_id = None;
        assert!(images_converged(&[(1, Arc::new(no_controller))]).is_err());
    }

    fn record(started: u64, ended: u64, command: Command, outcome: Outcome) -> CommandRecord {
        CommandRecord {
            via: 1,
            started,
            ended,
            command,
            outcome,
        }
    }

    fn create(name: &str) -> Command {
        Command::CreateTopic { name: name.into() }
    }

    fn delete(name: &str) -> Command {
        Command::DeleteTopic { name: name.into() }
    }

    #[test]
    fn a_lost_acknowledged_command_fails() {
        let one = vec![partition(&[1], &[1], 1, (0, 0))];
        let two = vec![one[0].clone(), one[0].clone()];
        let final_image = image(9, &[("a", id(1), two.clone())]);
        let grow = Command::CreatePartitions {
            name: "a".into(),
            count: 2,
        };
        let good = [
            record(0, 1, create("a"), Outcome::Created(id(1))),
            record(2, 3, grow.clone(), Outcome::PartitionsCreated),
            // A failed create may or may not have happened.
            record(4, 5, create("b"), Outcome::Failed("timeout".into())),
            // Deleted then (maybe) re-created.
            record(6, 7, create("c"), Outcome::Created(id(3))),
            record(8, 9, delete("c"), Outcome::Failed("lost".into())),
            record(10, 11, delete("b"), Outcome::Deleted(id(2))),
        ];
        assert_eq!(no_acknowledged_command_lost(&final_image, &good), Ok(()));

        // An acknowledged create whose topic is gone, with no delete after it.
        let lost_create = [
            record(0, 1, delete("a"), Outcome::Failed("x".into())),
            record(2, 3, create("a"), Outcome::Created(id(1))),
            record(4, 5, create("c"), Outcome::Created(id(3))),
        ];
        let err = no_acknowledged_command_lost(&final_image, &lost_create).unwrap_err();
        assert!(err.detail.contains("'c'"), "{err}");
        // An acknowledged create answered with another id than the image's.
        let wrong_id = [record(0, 1, create("a"), Outcome::Created(id(7)))];
        assert!(no_acknowledged_command_lost(&final_image, &wrong_id).is_err());
        // An acknowledged delete whose topic is still there.
        let undeleted = [
            record(0, 1, create("a"), Outcome::Created(id(1))),
            record(2, 3, delete("a"), Outcome::Deleted(id(1))),
        ];
        assert!(no_acknowledged_command_lost(&final_image, &undeleted).is_err());
        // Acknowledged partitions that are missing.
        let shrunk = image(9, &[("a", id(1), one)]);
        let grown = [
            record(0, 1, create("a"), Outcome::Created(id(1))),
            record(2, 3, grow, Outcome::PartitionsCreated),
        ];
        let err = no_acknowledged_command_lost(&shrunk, &grown).unwrap_err();
        assert!(err.detail.contains("2 partitions"), "{err}");
        // A topic nobody asked for (checked last).
        let err = no_acknowledged_command_lost(&final_image, &[]).unwrap_err();
        assert!(err.detail.contains("nobody created"), "{err}");
    }

    #[test]
    fn a_stale_answer_fails() {
        let good = [
            record(0, 1, create("a"), Outcome::Created(id(1))),
            record(2, 3, create("a"), Outcome::TopicAlreadyExists),
            // A delete overlapping the next command may have run first.
            record(4, 7, delete("a"), Outcome::Failed("lost".into())),
            record(5, 6, delete("a"), Outcome::UnknownTopic),
            record(8, 9, create("b"), Outcome::Created(id(2))),
            record(10, 11, delete("b"), Outcome::Deleted(id(2))),
            record(12, 13, delete("b"), Outcome::UnknownTopic),
            record(14, 15, create("b"), Outcome::Created(id(3))),
        ];
        assert_eq!(answers_reflect_earlier_acknowledged_commands(&good), Ok(()));

        let unknown_after_create = [
            record(0, 1, create("a"), Outcome::Created(id(1))),
            record(2, 3, delete("a"), Outcome::UnknownTopic),
        ];
        let err = answers_reflect_earlier_acknowledged_commands(&unknown_after_create).unwrap_err();
        assert!(err.detail.contains("UnknownTopic"), "{err}");
        let grow_unknown = [
            record(0, 1, create("a"), Outcome::Created(id(1))),
            record(
                2,
                3,
                Command::CreatePartitions {
                    name: "a".into(),
                    count: 3,
                },
                Outcome::UnknownTopic,
            ),
        ];
        assert!(answers_reflect_earlier_acknowledged_commands(&grow_unknown).is_err());
        let exists_after_delete = [
            record(0, 1, create("a"), Outcome::Created(id(1))),
            record(2, 3, delete("a"), Outcome::Deleted(id(1))),
            record(4, 5, create("a"), Outcome::TopicAlreadyExists),
        ];
        assert!(answers_reflect_earlier_acknowledged_commands(&exists_after_delete).is_err());
    }
}
