//! One classic consumer group's in-memory state: its members, generation,
//! selected protocol, the state of Kafka's classic rebalance protocol and
//! its committed offsets (Kafka's `ClassicGroup` and `ClassicGroupMember`).
//!
//! This module only holds state and answers questions about it (protocol
//! vote, member validation, subscribed topics); the transitions, timers and
//! writes live in [`super::coordinator`]. It must not depend on the network
//! or on the store.

use std::collections::{BTreeMap, HashMap, HashSet};

use bytes::{Buf, Bytes};
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;
use weir_storage::TopicPartition;

use super::store::{GroupMetadataRecord, MemberMetadataRecord, OffsetAndMetadata};

/// The protocol type of Kafka's consumers (`ConsumerProtocol.PROTOCOL_TYPE`).
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The states of a classic group (Kafka's `ClassicGroupState`; the names are
/// what DescribeGroups and ListGroups report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClassicGroupState {
    /// No members; the group may still hold committed offsets.
    Empty,
    /// A rebalance started: members must rejoin within the rebalance timeout.
    PreparingRebalance,
    /// Every member rejoined; waiting for the leader's assignment (SyncGroup).
    CompletingRebalance,
    /// The leader's assignment was stored and handed out.
    Stable,
    /// The group is being or was deleted.
    Dead,
}

impl ClassicGroupState {
    /// Kafka's name of the state (`Empty`, `PreparingRebalance`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ClassicGroupState::Empty => "Empty",
            ClassicGroupState::PreparingRebalance => "PreparingRebalance",
            ClassicGroupState::CompletingRebalance => "CompletingRebalance",
            ClassicGroupState::Stable => "Stable",
            ClassicGroupState::Dead => "Dead",
        }
    }
}

/// The answer to one JoinGroup request (JoinGroupResponse fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResult {
    /// `None` for success, else the Kafka error.
    pub error: Option<ResponseError>,
    /// The generation the member joined, -1 on error.
    pub generation_id: i32,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The selected protocol (assignor).
    pub protocol_name: Option<String>,
    /// The leader's member id (empty on error).
    pub leader: String,
    /// The member id assigned to the requester (empty when unknown).
    pub member_id: String,
    /// Every member with its metadata for the selected protocol: only in the
    /// leader's response.
    pub members: Vec<JoinGroupMember>,
    /// KIP-814: the static leader rejoined and must not compute a new
    /// assignment (v9+ only).
    pub skip_assignment: bool,
}

impl JoinGroupResult {
    /// An error answer carrying `member_id`.
    pub fn error(error: ResponseError, member_id: impl Into<String>) -> Self {
        JoinGroupResult {
            error: Some(error),
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.into(),
            members: Vec::new(),
            skip_assignment: false,
        }
    }
}

/// One member as listed in the leader's JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupMember {
    /// Member id.
    pub member_id: String,
    /// Static instance id (KIP-345).
    pub group_instance_id: Option<String>,
    /// The member's metadata for the selected protocol.
    pub metadata: Bytes,
}

/// The answer to one SyncGroup request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupResult {
    /// `None` for success, else the Kafka error.
    pub error: Option<ResponseError>,
    /// The group's protocol type (success only).
    pub protocol_type: Option<String>,
    /// The selected protocol (success only).
    pub protocol_name: Option<String>,
    /// This member's assignment from the leader (opaque bytes).
    pub assignment: Bytes,
}

impl SyncGroupResult {
    /// An error answer.
    pub fn error(error: ResponseError) -> Self {
        SyncGroupResult {
            error: Some(error),
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// One member of a classic group (Kafka's `ClassicGroupMember`).
#[derive(Debug)]
pub struct ClassicGroupMember {
    /// Broker-assigned member id (`clientId-uuid`, or `instanceId-uuid`).
    pub member_id: String,
    /// Static instance id (KIP-345).
    pub group_instance_id: Option<String>,
    /// Client id from the JoinGroup header.
    pub client_id: String,
    /// The client's host as Kafka prints it (`/127.0.0.1`).
    pub client_host: String,
    /// Rebalance timeout, ms.
    pub rebalance_timeout_ms: i32,
    /// Session timeout, ms.
    pub session_timeout_ms: i32,
    /// Protocol type (`consumer`, ...).
    pub protocol_type: String,
    /// Supported protocols in the member's order of preference, with metadata.
    pub protocols: Vec<(String, Bytes)>,
    /// The assignment of the current generation.
    pub assignment: Bytes,
    /// The parked JoinGroup response while the member awaits a join.
    pub awaiting_join: Option<oneshot::Sender<JoinGroupResult>>,
    /// The parked SyncGroup response while the member awaits its assignment.
    pub awaiting_sync: Option<oneshot::Sender<SyncGroupResult>>,
    /// Joined but not yet part of a completed generation (KIP-394).
    pub is_new: bool,
}

impl ClassicGroupMember {
    /// Whether the member's protocols are exactly `protocols` (names,
    /// order and metadata), Kafka's `ClassicGroupMember.matches`.
    pub fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    /// The member's metadata for `protocol`.
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    /// The member's first choice among `candidates`.
    fn vote(&self, candidates: &HashSet<&str>) -> Option<&str> {
        self.protocols
            .iter()
            .map(|(name, _)| name.as_str())
            .find(|name| candidates.contains(name))
    }
}

/// One classic group with its committed offsets.
#[derive(Debug)]
pub struct ClassicGroup {
    /// The group id.
    pub group_id: String,
    /// Current state.
    pub state: ClassicGroupState,
    /// The state before the last transition.
    pub previous_state: ClassicGroupState,
    /// When the state last changed, ms since the epoch.
    pub current_state_timestamp_ms: i64,
    /// Generation id, 0 for a new group.
    pub generation_id: i32,
    /// Protocol type of the group; `None` for a group that only commits
    /// offsets (a "simple" group).
    pub protocol_type: Option<String>,
    /// Selected protocol of the current generation.
    pub protocol_name: Option<String>,
    /// Leader's member id.
    pub leader_id: Option<String>,
    /// Members by id.
    pub members: BTreeMap<String, ClassicGroupMember>,
    /// The order members were added in (Kafka keeps a `LinkedHashMap`).
    pub member_order: Vec<String>,
    /// Static members: instance id -> member id.
    pub static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED that have not rejoined.
    pub pending_members: HashSet<String>,
    /// Members of the generation that have not sent SyncGroup yet.
    pub pending_sync_members: HashSet<String>,
    /// A member joined during the initial rebalance delay.
    pub new_member_added: bool,
    /// Committed offsets.
    pub offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
}

impl ClassicGroup {
    /// A new Empty group at generation 0.
    pub fn new(group_id: &str, now_ms: i64) -> Self {
        ClassicGroup {
            group_id: group_id.to_string(),
            state: ClassicGroupState::Empty,
            previous_state: ClassicGroupState::Empty,
            current_state_timestamp_ms: now_ms,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: BTreeMap::new(),
            member_order: Vec::new(),
            static_members: HashMap::new(),
            pending_members: HashSet::new(),
            pending_sync_members: HashSet::new(),
            new_member_added: false,
            offsets: BTreeMap::new(),
        }
    }

    /// Moves to `state`, remembering the previous one and the time.
    pub fn transition_to(&mut self, state: ClassicGroupState, now_ms: i64) {
        self.previous_state = self.state;
        self.state = state;
        self.current_state_timestamp_ms = now_ms;
    }

    /// Whether a rebalance may start (Stable, CompletingRebalance, Empty).
    pub fn can_rebalance(&self) -> bool {
        matches!(
            self.state,
            ClassicGroupState::Stable
                | ClassicGroupState::CompletingRebalance
                | ClassicGroupState::Empty
        )
    }

    /// Whether `member_id` is the leader.
    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    /// Members in the order they were added.
    pub fn ordered_members(&self) -> impl Iterator<Item = &ClassicGroupMember> {
        self.member_order
            .iter()
            .filter_map(|id| self.members.get(id))
    }

    /// How many members have a parked JoinGroup response.
    pub fn num_awaiting_join(&self) -> usize {
        self.members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .count()
    }

    /// Every member rejoined and no MEMBER_ID_REQUIRED member is pending.
    pub fn has_all_members_joined(&self) -> bool {
        self.members.len() == self.num_awaiting_join() && self.pending_members.is_empty()
    }

    /// The largest rebalance timeout among the members, ms.
    pub fn rebalance_timeout_ms(&self) -> i32 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    /// Adds `member`; the first member becomes the leader.
    pub fn add(&mut self, member: ClassicGroupMember) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), member.member_id.clone());
        }
        self.pending_members.remove(&member.member_id);
        self.member_order.push(member.member_id.clone());
        self.members.insert(member.member_id.clone(), member);
    }

    /// Removes a member or pending member; a new leader is picked among the
    /// remaining members when the leader leaves. Returns the removed member.
    pub fn remove(&mut self, member_id: &str) -> Option<ClassicGroupMember> {
        self.pending_members.remove(member_id);
        self.pending_sync_members.remove(member_id);
        let member = self.members.remove(member_id)?;
        self.member_order.retain(|id| id != member_id);
        if let Some(instance) = &member.group_instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        if self.is_leader(member_id) {
            self.leader_id = self.member_order.first().cloned();
        }
        Some(member)
    }

    /// Gives the member `old` the id `new` (a static member's new
    /// incarnation, KIP-345): membership, order, leadership, the static
    /// mapping and a pending sync follow. Returns whether `old` existed.
    pub fn replace_member_id(&mut self, old: &str, new: &str) -> bool {
        let Some(mut member) = self.members.remove(old) else {
            return false;
        };
        member.member_id = new.to_string();
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), new.to_string());
        }
        self.members.insert(new.to_string(), member);
        for id in self.member_order.iter_mut() {
            if id == old {
                *id = new.to_string();
            }
        }
        if self.is_leader(old) {
            self.leader_id = Some(new.to_string());
        }
        if self.pending_sync_members.remove(old) {
            self.pending_sync_members.insert(new.to_string());
        }
        true
    }

    /// Kafka's `validateMember`: FENCED_INSTANCE_ID when a static member's
    /// instance id maps to another member id, UNKNOWN_MEMBER_ID when the
    /// member is not in the group.
    pub fn validate_member(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), ResponseError> {
        if let Some(instance) = group_instance_id {
            match self.static_members.get(instance) {
                None => return Err(ResponseError::UnknownMemberId),
                Some(existing) if existing != member_id => {
                    return Err(ResponseError::FencedInstanceId)
                }
                Some(_) => {}
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(ResponseError::UnknownMemberId);
        }
        Ok(())
    }

    /// Protocols every member supports.
    fn candidate_protocols(&self) -> HashSet<&str> {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for member in self.members.values() {
            for (name, _) in &member.protocols {
                *counts.entry(name.as_str()).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .filter(|(_, n)| *n == self.members.len())
            .map(|(name, _)| name)
            .collect()
    }

    /// Kafka's `supportsProtocols`: an Empty group accepts any non-empty
    /// protocol type and protocol list; otherwise the type must match and
    /// one of the protocols must be supported by every current member.
    ///
    /// A list naming one protocol twice is never supported. Kafka counts
    /// each listed name once per listing, so with such a member no protocol
    /// is supported by "all" members and its `selectProtocol` throws: Kafka
    /// 4.1.2 leaves that join unanswered and refuses every later join of
    /// the group with INCONSISTENT_GROUP_PROTOCOL. Refusing the member up
    /// front gives the same answer without wedging the group.
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        let mut names = HashSet::with_capacity(protocols.len());
        if !protocols
            .iter()
            .all(|(name, _)| names.insert(name.as_str()))
        {
            return false;
        }
        if self.state == ClassicGroupState::Empty {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        let candidates = self.candidate_protocols();
        protocols
            .iter()
            .any(|(name, _)| candidates.contains(name.as_str()))
    }

    /// Kafka's `selectProtocol`: every member votes for its first choice
    /// among the protocols all members support; the most votes win (ties go
    /// to the protocol first voted for, in member order).
    pub fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: Vec<(&str, usize)> = Vec::new();
        for member in self.ordered_members() {
            if let Some(choice) = member.vote(&candidates) {
                match votes.iter_mut().find(|(name, _)| *name == choice) {
                    Some((_, n)) => *n += 1,
                    None => votes.push((choice, 1)),
                }
            }
        }
        let best = votes.iter().map(|(_, n)| *n).max()?;
        votes
            .into_iter()
            .find(|(_, n)| *n == best)
            .map(|(name, _)| name.to_string())
    }

    /// Every member with its metadata for the selected protocol (the
    /// leader's JoinGroup `members`).
    pub fn join_members(&self) -> Vec<JoinGroupMember> {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        self.ordered_members()
            .map(|m| JoinGroupMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(&protocol),
            })
            .collect()
    }

    /// The group's `GroupMetadataValue` with the members' current
    /// assignments (`assignment` overrides them when given).
    pub fn metadata_record(
        &self,
        assignment: Option<&HashMap<String, Bytes>>,
    ) -> GroupMetadataRecord {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        GroupMetadataRecord {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation_id,
            protocol: self.protocol_name.clone(),
            leader: self.leader_id.clone(),
            current_state_timestamp_ms: self.current_state_timestamp_ms,
            members: self
                .ordered_members()
                .map(|m| MemberMetadataRecord {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata(&protocol),
                    assignment: assignment
                        .and_then(|a| a.get(&m.member_id).cloned())
                        .unwrap_or_else(|| m.assignment.clone()),
                })
                .collect(),
        }
    }

    /// The topics the consumer-protocol members subscribe to, parsed from
    /// their metadata for the selected protocol with the consumer protocol's
    /// version-0 prefix (Kafka's `computeSubscribedTopics`). `None` when the
    /// group does not use the consumer protocol or a subscription does not
    /// parse.
    pub fn subscribed_topics(&self) -> Option<HashSet<String>> {
        if self.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return None;
        }
        if self.members.is_empty() {
            return Some(HashSet::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = HashSet::new();
        for member in self.members.values() {
            topics.extend(parse_subscription_topics(member.metadata(protocol))?);
        }
        Some(topics)
    }

    /// Kafka's `isSubscribedToTopic`: known subscriptions decide; unknown
    /// ones count as subscribed for consumer-protocol groups.
    pub fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        match self.subscribed_topics() {
            Some(topics) => topics.contains(topic),
            None => self.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE),
        }
    }
}

/// The topics of a `ConsumerProtocolSubscription` (KIP-429 layout: int16
/// version, then the v0 prefix `topics: [string]`, always non-flexible).
/// `None` when it does not parse.
pub fn parse_subscription_topics(mut metadata: Bytes) -> Option<Vec<String>> {
    if metadata.remaining() < 6 {
        return None;
    }
    let _version = metadata.get_i16();
    let count = metadata.get_i32();
    if count < 0 {
        return None;
    }
    let mut topics = Vec::new();
    for _ in 0..count {
        if metadata.remaining() < 2 {
            return None;
        }
        let len = metadata.get_i16();
        if len < 0 || metadata.remaining() < len as usize {
            return None;
        }
        let name = metadata.split_to(len as usize);
        topics.push(String::from_utf8(name.to_vec()).ok()?);
    }
    Some(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, protocols: &[&str]) -> ClassicGroupMember {
        ClassicGroupMember {
            member_id: id.to_string(),
            group_instance_id: None,
            client_id: "c".to_string(),
            client_host: "/127.0.0.1".to_string(),
            rebalance_timeout_ms: 1000,
            session_timeout_ms: 1000,
            protocol_type: "consumer".to_string(),
            protocols: protocols
                .iter()
                .map(|p| (p.to_string(), Bytes::new()))
                .collect(),
            assignment: Bytes::new(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
        }
    }

    #[test]
    fn protocol_vote_picks_the_common_protocol_most_members_prefer() {
        let mut group = ClassicGroup::new("g", 0);
        group.add(member("a", &["range", "roundrobin"]));
        group.add(member("b", &["roundrobin", "range"]));
        group.add(member("c", &["roundrobin", "sticky", "range"]));
        group.state = ClassicGroupState::Stable;
        assert_eq!(group.select_protocol().as_deref(), Some("roundrobin"));
        // sticky is not supported by every member.
        assert!(!group.supports_protocols("consumer", &[("sticky".into(), Bytes::new())]));
        assert!(group.supports_protocols("consumer", &[("range".into(), Bytes::new())]));
        assert!(!group.supports_protocols("connect", &[("range".into(), Bytes::new())]));
    }

    #[test]
    fn consumer_subscription_topics_parse_from_the_v0_prefix() {
        // version 3, topics ["a", "bc"], then fields of later versions.
        let mut raw = vec![0, 3, 0, 0, 0, 2, 0, 1, b'a', 0, 2, b'b', b'c'];
        raw.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]); // user_data null
        assert_eq!(
            parse_subscription_topics(Bytes::from(raw)),
            Some(vec!["a".to_string(), "bc".to_string()])
        );
        assert_eq!(
            parse_subscription_topics(Bytes::from_static(&[0, 1, 0])),
            None
        );
    }

    #[test]
    fn leader_moves_to_the_next_member_when_it_leaves() {
        let mut group = ClassicGroup::new("g", 0);
        group.add(member("a", &["range"]));
        group.add(member("b", &["range"]));
        assert!(group.is_leader("a"));
        group.remove("a");
        assert!(group.is_leader("b"));
        group.remove("b");
        assert_eq!(group.leader_id, None);
    }
}
