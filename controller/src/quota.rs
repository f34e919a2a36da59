//! Client quotas as Kafka's KRaft mode keeps them (KIP-546): an entity
//! (user, client id, user and client id, or ip; each named or the default)
//! and its quota values by key, from `ClientQuotaRecord`s.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Kafka's entity type names (`ClientQuotaEntity.USER`, `CLIENT_ID`, `IP`).
pub const USER: &str = "user";
/// See [`USER`].
pub const CLIENT_ID: &str = "client-id";
/// See [`USER`].
pub const IP: &str = "ip";

/// `producer_byte_rate` (KIP-13): bytes/s a user or client id may produce.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// `consumer_byte_rate` (KIP-13): bytes/s a user or client id may fetch.
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// `request_percentage` (KIP-124): percent of a request thread's time.
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
/// `controller_mutation_rate` (KIP-599): partition mutations/s.
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
/// `connection_creation_rate` (KIP-612): connections/s of an ip.
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// A quota value. Kafka stores a double; equality compares bits so that
/// records and images stay `Eq`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for QuotaValue {}

/// The name of one part of a quota entity: a user or client id, or the
/// default for all (Kafka's null entity name, `<default>` in its tools).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EntityName {
    /// The default entity of its type.
    Default,
    /// A named entity.
    Named(String),
}

impl EntityName {
    /// `None` (Kafka's null) for the default, else the name.
    pub fn as_option(&self) -> Option<&str> {
        match self {
            EntityName::Default => None,
            EntityName::Named(name) => Some(name),
        }
    }

    /// The name from Kafka's nullable entity name.
    pub fn from_option(name: Option<&str>) -> EntityName {
        match name {
            None => EntityName::Default,
            Some(name) => EntityName::Named(name.to_string()),
        }
    }
}

/// A quota entity (Kafka's `ClientQuotaEntity`): which of the types it
/// names, each with its name or the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct QuotaEntity {
    /// The `user` part.
    pub user: Option<EntityName>,
    /// The `client-id` part.
    pub client_id: Option<EntityName>,
    /// The `ip` part.
    pub ip: Option<EntityName>,
}

impl QuotaEntity {
    /// The parts as (entity type, name) pairs, in Kafka's type names.
    pub fn parts(&self) -> Vec<(&'static str, &EntityName)> {
        [
            (USER, &self.user),
            (CLIENT_ID, &self.client_id),
            (IP, &self.ip),
        ]
        .into_iter()
        .filter_map(|(t, n)| n.as_ref().map(|n| (t, n)))
        .collect()
    }

    /// The part of entity type `entity_type`.
    pub fn part(&self, entity_type: &str) -> Option<&EntityName> {
        match entity_type {
            USER => self.user.as_ref(),
            CLIENT_ID => self.client_id.as_ref(),
            IP => self.ip.as_ref(),
            _ => None,
        }
    }
}

impl std::fmt::Display for QuotaEntity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .parts()
            .into_iter()
            .map(|(t, n)| format!("{t}={}", n.as_option().unwrap_or("<default>")))
            .collect();
        write!(f, "ClientQuotaEntity({})", parts.join(", "))
    }
}

/// The client quotas of a metadata image (Kafka's `ClientQuotasImage`):
/// each entity with at least one value, its values by key. Serialized as
/// a list of (entity, values) pairs (JSON object keys must be strings).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientQuotas(pub BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>);

impl Serialize for ClientQuotas {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter())
    }
}

impl<'de> Deserialize<'de> for ClientQuotas {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let pairs = Vec::<(QuotaEntity, BTreeMap<String, QuotaValue>)>::deserialize(deserializer)?;
        Ok(ClientQuotas(pairs.into_iter().collect()))
    }
}

impl ClientQuotas {
    /// The value of `key` for exactly `entity`.
    pub fn get(&self, entity: &QuotaEntity, key: &str) -> Option<f64> {
        self.0.get(entity)?.get(key).map(|v| v.0)
    }

    /// Whether no quota is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The quota of `key` that applies to `user` (a principal's name,
    /// without `User:`) with `client_id`, and the entity whose sensor it
    /// shares, in Kafka's precedence (`DefaultQuotaCallback.quotaLimit` and
    /// `quotaMetricTags`): user and client id, user and default client id,
    /// user alone, default user and client id, default user and default
    /// client id, default user alone, client id alone, default client id.
    /// `None` when none applies (the client is not limited).
    pub fn applied(&self, key: &str, user: &str, client_id: &str) -> Option<AppliedQuota> {
        if self.is_empty() {
            return None;
        }
        let named = |s: &str| Some(EntityName::Named(s.to_string()));
        let default = || Some(EntityName::Default);
        let entity = |user: Option<EntityName>, client_id: Option<EntityName>| QuotaEntity {
            user,
            client_id,
            ip: None,
        };
        // (entity, whether its sensor is per user, per client id)
        let order = [
            (entity(named(user), named(client_id)), true, true),
            (entity(named(user), default()), true, true),
            (entity(named(user), None), true, false),
            (entity(default(), named(client_id)), true, true),
            (entity(default(), default()), true, true),
            (entity(default(), None), true, false),
            (entity(None, named(client_id)), false, true),
            (entity(None, default()), false, true),
        ];
        order
            .into_iter()
            .find_map(|(entity, per_user, per_client)| {
                self.get(&entity, key).map(|limit| AppliedQuota {
                    limit,
                    user_tag: if per_user { user } else { "" }.to_string(),
                    client_id_tag: if per_client { client_id } else { "" }.to_string(),
                })
            })
    }
}

/// The quota that applies to a client (see [`ClientQuotas::applied`]) and
/// the sensor it is measured in: Kafka's quota metric tags, which clients
/// share when the quota is set on their user alone or on a default.
#[derive(Debug, Clone, PartialEq)]
pub struct AppliedQuota {
    /// The quota's value (bytes/s, percent, partition mutations/s).
    pub limit: f64,
    /// The `user` tag: the user's name, or empty when the quota is per
    /// client id only.
    pub user_tag: String,
    /// The `client-id` tag: the client id, or empty when the quota is per
    /// user only.
    pub client_id_tag: String,
}

/// The type of a quota key's value (Kafka's `QuotaConfig` definitions):
/// integral keys refuse fractions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaKeyType {
    /// A LONG (byte rates).
    Long,
    /// An INT (connection creation rate).
    Int,
    /// A DOUBLE.
    Double,
}

/// The keys an entity of these types may set (Kafka's
/// `QuotaConfig.userAndClientQuotaConfigs` / `ipConfigs`), or Kafka's
/// INVALID_REQUEST message (`ClientQuotaControlManager.configKeysForEntityType`).
pub fn keys_for_entity(
    entity: &QuotaEntity,
) -> Result<&'static [(&'static str, QuotaKeyType)], String> {
    const USER_AND_CLIENT: &[(&str, QuotaKeyType)] = &[
        (PRODUCER_BYTE_RATE, QuotaKeyType::Long),
        (CONSUMER_BYTE_RATE, QuotaKeyType::Long),
        (REQUEST_PERCENTAGE, QuotaKeyType::Double),
        (CONTROLLER_MUTATION_RATE, QuotaKeyType::Double),
    ];
    const IP_KEYS: &[(&str, QuotaKeyType)] = &[(CONNECTION_CREATION_RATE, QuotaKeyType::Int)];
    match (&entity.ip, entity.user.is_some() || entity.client_id.is_some()) {
        (Some(_), true) => Err("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId".into()),
        (Some(EntityName::Named(ip)), false) if ip.parse::<std::net::IpAddr>().is_err() => {
            Err(format!("{ip} is not a valid IP or resolvable host."))
        }
        (Some(_), false) => Ok(IP_KEYS),
        (None, true) => Ok(USER_AND_CLIENT),
        (None, false) => Err("Invalid empty client quota entity".into()),
    }
}

/// Kafka's `ClientQuotaControlManager.validateQuotaKeyValue`: the message
/// of the INVALID_REQUEST a value gets, if any.
pub fn validate_value(keys: &[(&str, QuotaKeyType)], key: &str, value: f64) -> Result<(), String> {
    let Some((_, key_type)) = keys.iter().find(|(k, _)| *k == key) else {
        return Err(format!("Invalid configuration key {key}"));
    };
    if value <= 0.0 || value.is_nan() {
        return Err(format!("Quota {key} must be greater than 0"));
    }
    let limit = match key_type {
        QuotaKeyType::Double => return Ok(()),
        QuotaKeyType::Int => (i32::MAX as f64, "an INT"),
        QuotaKeyType::Long => (i64::MAX as f64, "a LONG"),
    };
    if value > limit.0 {
        return Err(format!(
            "Proposed value for {key} is too large for {}.",
            limit.1
        ));
    }
    if (value % 1.0).abs() > 1e-6 {
        return Err(format!("{key} cannot be a fractional value."));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: Option<&str>) -> QuotaEntity {
        QuotaEntity {
            user: Some(EntityName::from_option(name)),
            ..QuotaEntity::default()
        }
    }

    #[test]
    fn keys_and_values_are_checked_as_kafka() {
        let keys = keys_for_entity(&user(Some("alice"))).unwrap();
        assert_eq!(validate_value(keys, PRODUCER_BYTE_RATE, 1024.0), Ok(()));
        assert_eq!(
            validate_value(keys, PRODUCER_BYTE_RATE, 10.5).unwrap_err(),
            "producer_byte_rate cannot be a fractional value."
        );
        assert_eq!(validate_value(keys, REQUEST_PERCENTAGE, 12.5), Ok(()));
        assert_eq!(
            validate_value(keys, CONSUMER_BYTE_RATE, 0.0).unwrap_err(),
            "Quota consumer_byte_rate must be greater than 0"
        );
        assert_eq!(
            validate_value(keys, "bogus", 1.0).unwrap_err(),
            "Invalid configuration key bogus"
        );
        assert!(validate_value(keys, CONNECTION_CREATION_RATE, 1.0).is_err());
        assert!(keys_for_entity(&QuotaEntity::default()).is_err());
        let mixed = QuotaEntity {
            ip: Some(EntityName::Default),
            ..user(None)
        };
        assert!(keys_for_entity(&mixed).is_err());
    }

    #[test]
    fn precedence_follows_kafka() {
        let named = |s: &str| Some(EntityName::Named(s.into()));
        let quotas = |entries: &[(Option<EntityName>, Option<EntityName>, f64)]| {
            let mut quotas = ClientQuotas::default();
            for (user, client_id, limit) in entries {
                quotas
                    .0
                    .entry(QuotaEntity {
                        user: user.clone(),
                        client_id: client_id.clone(),
                        ip: None,
                    })
                    .or_default()
                    .insert(PRODUCER_BYTE_RATE.into(), QuotaValue(*limit));
            }
            quotas
        };
        let q = quotas(&[
            (named("alice"), None, 100.0),
            (None, named("app"), 200.0),
            (Some(EntityName::Default), None, 300.0),
            (named("alice"), named("app"), 400.0),
        ]);
        let limit = |u, c| q.applied(PRODUCER_BYTE_RATE, u, c).map(|a| a.limit);
        assert_eq!(limit("alice", "app"), Some(400.0));
        assert_eq!(limit("alice", "other"), Some(100.0));
        assert_eq!(
            limit("bob", "app"),
            Some(300.0),
            "a default user comes before client ids"
        );
        assert_eq!(
            q.applied(PRODUCER_BYTE_RATE, "alice", "other"),
            Some(AppliedQuota {
                limit: 100.0,
                user_tag: "alice".into(),
                client_id_tag: String::new(),
            }),
            "a user's quota is shared by all its client ids"
        );
        let only_clients = quotas(&[(None, named("app"), 200.0)]);
        assert_eq!(
            only_clients.applied(PRODUCER_BYTE_RATE, "bob", "app"),
            Some(AppliedQuota {
                limit: 200.0,
                user_tag: String::new(),
                client_id_tag: "app".into(),
            })
        );
        assert_eq!(only_clients.applied(PRODUCER_BYTE_RATE, "bob", "x"), None);
        assert_eq!(only_clients.applied(CONSUMER_BYTE_RATE, "bob", "app"), None);
    }

    #[test]
    fn serde_round_trip() {
        let mut quotas = ClientQuotas::default();
        quotas
            .0
            .entry(user(None))
            .or_default()
            .insert(PRODUCER_BYTE_RATE.into(), QuotaValue(1024.0));
        let json = serde_json::to_string(&quotas).unwrap();
        let back: ClientQuotas = serde_json::from_str(&json).unwrap();
        assert_eq!(back, quotas);
        assert_eq!(back.get(&user(None), PRODUCER_BYTE_RATE), Some(1024.0));
    }
}
