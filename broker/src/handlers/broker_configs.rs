//! Changes of BROKER configs (AlterConfigs, IncrementalAlterConfigs) as
//! Weir serves them: KIP-226's keystore update only. Setting a TLS
//! listener's store key (`listener.name.<listener>.ssl.keystore.location`,
//! `...ssl.truststore.location`, the inline and type keys) to the value it
//! has makes the listener re-read its stores at once, as Kafka reloads a
//! keystore whose file changed when the same path is set again
//! (`DynamicBrokerConfig` / `SslFactory.reconfigure`); new connections get
//! the new certificate, open ones keep theirs. The listener also checks
//! its stores every 10 s without being asked (`server::reload_tls_stores`).
//!
//! Departure: Kafka also takes another path and keeps it as a dynamic
//! per-broker config in the metadata log; Weir re-reads the stores its
//! configuration names and answers INVALID_CONFIG for another value (write
//! the new store where the old one is). Any other broker key is not
//! dynamic: INVALID_CONFIG naming the keys, as Kafka answers for a static
//! key.

use kafka_protocol::ResponseError;

use super::incremental_alter_configs::{broker_change_refused, Failure};
use crate::config::LISTENER_PREFIX;
use crate::context::BrokerContext;
use crate::network::tls::Reload;

/// The keys of a listener's stores that a same-value change re-reads.
const STORE_KEYS: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
];

/// Applies `changes` (key, and the value of a SET; `None` for DELETE,
/// APPEND or SUBTRACT) to this broker; `validate_only` checks the stores
/// without serving them. `Ok(false)`: no topic config was committed.
///
/// # Errors
/// INVALID_CONFIG: a key that is not a listener's store key, another
/// value than the current one, a listener without TLS, or stores that do
/// not load ("Validation of dynamic config update of SSLFactory failed",
/// Kafka's words).
pub(crate) async fn alter(
    ctx: &BrokerContext,
    changes: &[(&str, Option<&str>)],
    validate_only: bool,
) -> Result<bool, Failure> {
    if changes.is_empty() {
        return Ok(false);
    }
    let mut listeners = Vec::new();
    for &(key, value) in changes {
        let store_key = key.strip_prefix(LISTENER_PREFIX).and_then(|rest| {
            let (listener, key) = rest.split_once('.')?;
            STORE_KEYS.contains(&key).then_some((listener, key))
        });
        let (Some((listener, store_key)), Some(value)) = (store_key, value) else {
            return Err(broker_change_refused(changes.iter().map(|(k, _)| *k)));
        };
        let current = ctx.config.listener_value(listener, store_key).unwrap_or("");
        if value.trim() != current {
            return Err((
                ResponseError::InvalidConfig,
                format!(
                    "Cannot update {key} dynamically to another value: Weir re-reads the stores \
                     its configuration names (write the new store there, or set the same value \
                     to reload it now); another value needs a restart"
                ),
            ));
        }
        let tls = ctx
            .tls_listeners
            .iter()
            .find(|l| l.name().eq_ignore_ascii_case(listener))
            .ok_or_else(|| {
                (
                    ResponseError::InvalidConfig,
                    format!("{key}: listener {listener} serves no TLS"),
                )
            })?;
        if !listeners
            .iter()
            .any(|l: &crate::network::tls::TlsListener| l.name() == tls.name())
        {
            listeners.push(tls.clone());
        }
    }
    for listener in listeners {
        let config = ctx.config.clone();
        let checked = {
            let listener = listener.clone();
            tokio::task::spawn_blocking(move || {
                let checked = listener.check_stores(&config)?;
                if checked == Reload::Reloaded && !validate_only {
                    return listener.reload_if_changed(&config);
                }
                Ok(checked)
            })
            .await
        };
        match checked {
            Ok(Ok(Reload::Reloaded)) if !validate_only => {
                tracing::info!(listener = listener.name(), "reloaded the listener's TLS keystore and truststore on request; new connections use them");
                metrics::counter!("weir_tls_store_reloads_total", "listener" => listener.name().to_string(), "outcome" => "reloaded")
                    .increment(1);
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err((
                    ResponseError::InvalidConfig,
                    format!("Validation of dynamic config update of SSLFactory failed: {e}"),
                ))
            }
            Err(e) => {
                return Err((
                    ResponseError::UnknownServerError,
                    format!("reloading the TLS stores failed: {e}"),
                ))
            }
        }
    }
    Ok(false)
}
