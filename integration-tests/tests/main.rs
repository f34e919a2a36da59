//! Weir's end-to-end suite: ONE test binary; every test starts its own
//! `weir` process (ephemeral ports, temp `log.dirs`, stderr shown only on
//! failure) and talks to it with the raw client or with real Kafka clients
//! run as subprocesses. Case ids (cNN) refer to `shared/cases/README.md`.
//!
//! Needs the `weir` binary (`cargo build -p weir-broker`, or `WEIR_BIN`) and
//! the clients installed by `scripts/test`.

mod support;

mod acls;
mod admin;
mod alter_configs;
mod api_coverage;
mod bad_input;
mod broker_only;
mod cases_fetch;
mod cases_handshake;
mod cases_metadata;
mod cases_produce;
mod client_confluent;
mod client_java;
mod client_kcat;
mod cluster;
mod cluster_faults;
mod cluster_groups;
mod cluster_script;
mod cluster_security;
mod compaction;
mod create_partitions;
mod describe_quorum;
mod dump_log;
mod durability;
mod elect_leaders;
mod elr;
mod groups_clients;
mod groups_durability;
mod groups_offsets_topic;
mod groups_raw;
mod hostile;
mod idempotence;
mod kafka_compat;
mod lifecycle;
mod log_config;
mod metrics;
mod quotas;
mod replication;
mod replication_matrix;
mod replication_operators;
mod retention;
mod sasl;
mod scram;
mod tls;
