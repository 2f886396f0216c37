//! What the Kafka source and sink share: the `brokers` and
//! `[properties]` settings, the librdkafka client configuration built from
//! them, the client context that sends librdkafka's log lines and errors
//! to Weir's log under the connector's id, and the lookups of a topic's
//! partitions and offsets.
//!
//! Invariant: every call that waits on a broker has a deadline
//! ([`TIMEOUT`]), so an unreachable cluster is an error a person can act
//! on, not a job that hangs.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::producer::{DeliveryResult, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;

/// How long a request to the cluster may take before the connector gives
/// up: an offset lookup, a transaction step.
pub(super) const TIMEOUT: Duration = Duration::from_secs(10);

/// How long the first request (a topic's metadata) may wait for a broker:
/// an unreachable cluster fails the connector this soon.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The settings both connectors have: the cluster and the client
/// properties passed through to librdkafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSettings {
    /// The bootstrap brokers (`brokers`, `host:port[,host:port...]`).
    pub brokers: String,
    /// librdkafka properties set on the client as they are
    /// (`[source.properties]`, `[sink.properties]`), after Weir's own, so
    /// they can override them; a property Weir needs for its guarantees
    /// cannot be set here (`RESERVED`).
    pub properties: BTreeMap<String, String>,
}

/// Properties the connectors set themselves, because their guarantees
/// depend on them.
const RESERVED: &[&str] = &[
    "bootstrap.servers",
    "metadata.broker.list",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "enable.partition.eof",
    "isolation.level",
    "transactional.id",
    "enable.idempotence",
    "group.id",
];

impl ClientSettings {
    /// Reads `brokers` and `properties` from a connector's table.
    pub(super) fn read(
        brokers: Option<String>,
        properties: Option<toml::Table>,
    ) -> Result<ClientSettings, String> {
        let Some(brokers) = brokers else {
            return Err("`brokers` is missing; add brokers = \"127.0.0.1:9092\"".into());
        };
        check_brokers(&brokers)?;
        let mut props = BTreeMap::new();
        for (key, value) in properties.unwrap_or_default() {
            if RESERVED.contains(&key.as_str()) {
                return Err(format!(
                    "`properties.{key}` is set by Weir itself (its delivery guarantee depends on it); remove it{}",
                    match key.as_str() {
                        "group.id" => " and use `group`",
                        "transactional.id" => " and use `transactional_id`",
                        "bootstrap.servers" | "metadata.broker.list" => " and use `brokers`",
                        _ => "",
                    }
                ));
            }
            let text = match value {
                toml::Value::String(s) => s,
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Float(x) => x.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(format!(
                        "`properties.{key}` must be a string, number or boolean, not {}",
                        other.type_str()
                    ));
                }
            };
            props.insert(key, text);
        }
        Ok(ClientSettings {
            brokers,
            properties: props,
        })
    }

    /// A client configuration for connector `id`, with Weir's `own`
    /// properties and then the user's.
    pub(super) fn config(&self, id: &str, own: &[(&str, &str)]) -> ClientConfig {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &self.brokers)
            .set("client.id", format!("weir-{id}"))
            .set_log_level(RDKafkaLogLevel::Warning);
        for (key, value) in own {
            config.set(*key, *value);
        }
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        config
    }
}

/// Checks that `brokers` lists `host:port` entries.
fn check_brokers(brokers: &str) -> Result<(), String> {
    let hint = "use e.g. brokers = \"127.0.0.1:9092\" or \"a:9092,b:9092\"";
    if brokers.trim().is_empty() {
        return Err(format!("`brokers` is empty; {hint}"));
    }
    for entry in brokers.split(',').map(str::trim) {
        let address = entry
            .strip_prefix("PLAINTEXT://")
            .or_else(|| entry.strip_prefix("SSL://"))
            .unwrap_or(entry);
        let valid = address
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !valid {
            return Err(format!(
                "`brokers` entry {entry:?} is not host:port; {hint}"
            ));
        }
    }
    Ok(())
}

/// The client context of every connector: librdkafka's log lines and
/// errors go to Weir's log, prefixed with the connector, and the first
/// failed delivery of a producer is kept for the sink to report.
///
/// Until the connector is open ([`Context::opened`]) librdkafka's lines go
/// to the debug log only: a failure to reach the cluster is then the
/// connector's own one-line error, which names the cause.
pub(super) struct Context {
    /// `source `id`` or `sink `id``, for log lines.
    pub(super) name: String,
    /// The first delivery that failed since [`Context::take_failure`].
    failure: Mutex<Option<String>>,
    opened: AtomicBool,
}

impl Context {
    pub(super) fn new(name: String) -> Context {
        Context {
            name,
            failure: Mutex::new(None),
            opened: AtomicBool::new(false),
        }
    }

    /// The connector is open: from now on librdkafka's warnings and errors
    /// are logged as such.
    pub(super) fn opened(&self) {
        self.opened.store(true, Ordering::Relaxed);
    }

    /// The first delivery error since the last call, if any.
    pub(super) fn take_failure(&self) -> Option<String> {
        self.failure.lock().expect("not poisoned").take()
    }
}

impl ClientContext for Context {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        let name = &self.name;
        if !self.opened.load(Ordering::Relaxed) {
            return tracing::debug!("{name}: kafka: {facility}: {message}");
        }
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => tracing::error!("{name}: kafka: {facility}: {message}"),
            RDKafkaLogLevel::Warning => tracing::warn!("{name}: kafka: {facility}: {message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!("{name}: kafka: {facility}: {message}")
            }
            RDKafkaLogLevel::Debug => tracing::debug!("{name}: kafka: {facility}: {message}"),
        }
    }

    /// librdkafka also logs what it reports here, and retries on its own:
    /// the debug log is enough.
    fn error(&self, error: KafkaError, reason: &str) {
        tracing::debug!("{}: kafka: {error}: {reason}", self.name);
    }
}

impl ConsumerContext for Context {}

impl ProducerContext for Context {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((error, _)) = result {
            let mut failure = self.failure.lock().expect("not poisoned");
            failure.get_or_insert_with(|| error.to_string());
        }
    }
}

/// The partitions of `topic`, ascending; an error names the topic and the
/// brokers and says what to do.
pub(super) fn partitions(
    consumer: &BaseConsumer<Context>,
    brokers: &str,
    topic: &str,
) -> Result<Vec<i32>, String> {
    let metadata = consumer
        .fetch_metadata(Some(topic), CONNECT_TIMEOUT)
        .map_err(|e| unreachable(brokers, &e))?;
    let Some(found) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Err(missing(topic, brokers));
    };
    match found.error() {
        None => {}
        Some(code) if RDKafkaErrorCode::from(code) == RDKafkaErrorCode::UnknownTopicOrPartition => {
            return Err(missing(topic, brokers));
        }
        Some(code) => {
            return Err(format!(
                "cannot read topic `{topic}` at {brokers}: {}",
                RDKafkaErrorCode::from(code)
            ));
        }
    }
    let mut ids: Vec<i32> = found.partitions().iter().map(|p| p.id()).collect();
    if ids.is_empty() {
        return Err(missing(topic, brokers));
    }
    ids.sort_unstable();
    Ok(ids)
}

fn missing(topic: &str, brokers: &str) -> String {
    format!(
        "topic `{topic}` does not exist at {brokers}; create it (e.g. `kafka-topics.sh --create --topic {topic}`) or fix `topic`"
    )
}

/// The message of a request that found no broker: the usual cause is a
/// wrong address or a cluster that is down.
fn unreachable(brokers: &str, error: &KafkaError) -> String {
    format!(
        "no broker of {brokers} answered within {}s ({error}); check `brokers` and that the cluster is up",
        CONNECT_TIMEOUT.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brokers_and_properties_are_checked() {
        let props = |text: &str| -> Option<toml::Table> { Some(text.parse().unwrap()) };
        let ok = ClientSettings::read(
            Some("a:1,b:2".into()),
            props("\"linger.ms\" = 5\n\"compression.type\" = \"lz4\"\n\"x\" = true"),
        )
        .unwrap();
        assert_eq!(ok.properties["linger.ms"], "5");
        assert_eq!(ok.properties["x"], "true");
        for (brokers, properties, expected) in [
            (None, None, "`brokers` is missing"),
            (Some(""), None, "empty"),
            (Some("localhost"), None, "not host:port"),
            (Some("a:1,:2"), None, "not host:port"),
            (Some("a:1"), props("\"group.id\" = \"g\""), "use `group`"),
            (
                Some("a:1"),
                props("\"isolation.level\" = \"read_uncommitted\""),
                "set by Weir",
            ),
            (Some("a:1"), props("\"x\" = [1]"), "not array"),
        ] {
            let err = ClientSettings::read(brokers.map(Into::into), properties).unwrap_err();
            assert!(err.contains(expected), "{brokers:?}: {err}");
        }
    }
}
