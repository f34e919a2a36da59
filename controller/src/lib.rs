//! Weir's cluster metadata controller, KRaft-style.
//!
//! Owns: the metadata records ([`records`]), the immutable
//! [`MetadataImage`] they replay into ([`image`]), the pure controller logic
//! that turns commands into records ([`control`], [`placement`]), the
//! openraft-backed metadata log on disk (the private `raft` module), the
//! voter set ([`voters`]) and the transport between voters ([`transport`]),
//! the running [`QuorumController`] ([`quorum`]) of a voter, the
//! [`MetadataObserver`] ([`observer`]) of a broker-only node, and the
//! [`MetadataController`] over both that the broker talks to, and the
//! active controller's mutation quotas ([`mutation_quota`], KIP-599). The quorum's
//! randomness and blocking file I/O go through [`determinism`], whose
//! [`DeterministicScope`] makes a simulated run a function of its seed.
//!
//! With the `fuzzing` feature, `fuzz` holds the fuzz targets of the quorum
//! transport frames and the metadata log, with their seeds (issue 17; run
//! by `fuzz/`).
//!
//! Must not depend on Kafka request types (`kafka-protocol`): the broker
//! translates between the wire and these types. openraft stays behind our own
//! types; nothing public here exposes an openraft type.

pub mod acl;
pub mod control;
pub mod determinism;
pub mod error;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
pub mod image;
pub mod metadata_controller;
pub mod mutation_quota;
pub mod observer;
pub mod placement;
pub mod quorum;
pub mod quorum_state;
pub mod quota;
mod raft;
pub mod records;
pub mod transport;
pub mod voters;

pub use control::{
    validate_topic_name, AlterPartitionData, AlterPartitionRequest, AlterPartitionResponse,
    AlterPartitionResult, AlterPartitionTopic, BrokerHeartbeat, BrokerRegistrationRequest,
    ControllerResult, CreatableTopic, CreatedTopic, ElectionOutcome, ElectionType,
    HeartbeatProgress, HeartbeatReply, NewPartitions, ScramAlterResult, ScramDeletion,
    ScramUpsertion, StaticConfig, TopicElections, TopicRef, CLUSTER_METADATA_TOPIC_NAME,
    MAX_RECORDS_PER_USER_OP, MAX_TOPIC_NAME_LENGTH, PRODUCER_ID_BLOCK_SIZE,
};
pub use determinism::DeterministicScope;
pub use error::ControllerError;
pub use image::{
    BrokerRegistration, MetadataImage, PartitionRegistration, ReplayError, TopicChanges, TopicId,
    TopicImage,
};
pub use metadata_controller::{MetadataController, MutationOutcome};
pub use mutation_quota::{MutatingClient, MutationQuotaConfig};
pub use observer::MetadataObserver;
pub use placement::{ReplicaPlacer, StripedReplicaPlacer};
pub use quorum::{
    ControllerConfig, QuorumController, QuorumOptions, RaftStatus, MAX_USER_BATCH_BYTES,
};
pub use quorum_state::{QuorumDescription, ReplicaProgress};
pub use records::*;
pub use transport::{ChannelSecurity, MemoryRouter, QuorumTransport, SecuredStream};
pub use voters::{InvalidVoters, QuorumVoter};

/// Registers help text for the metrics this crate records (Prometheus
/// `# HELP` lines): `weir_controller_records_committed_total`,
/// `weir_controller_last_applied_offset`.
pub fn describe_metrics() {
    metrics::describe_counter!(
        "weir_controller_records_committed_total",
        "Metadata records committed through the quorum."
    );
    metrics::describe_gauge!(
        "weir_controller_last_applied_offset",
        "Offset of the last metadata log entry applied to the image."
    );
}
