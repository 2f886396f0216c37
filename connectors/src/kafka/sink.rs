//! The Kafka sink (`type = "kafka"` in `[[sink]]`): each record's value
//! written to `topic`, keyed by the record's key (partitioned as the Java
//! client does, murmur2), with the record's event time as the message
//! timestamp and the configured `headers`.
//!
//! `delivery = "exactly-once"` (the default): an epoch is staged durably
//! before its checkpoint completes (`StagedSink`), then written in one
//! Kafka transaction by a transactional producer whose `transactional.id`
//! is the sink's (`weir-<job>-<sink>` unless `transactional_id` is set).
//! The same transaction commits, as offsets of the consumer group named
//! after that id, the checkpoint it delivers (offset = checkpoint id on
//! the topic's partition 0), so the records and the record of their
//! delivery become visible together. Invariants:
//! - Opening the sink fences every earlier producer of the same id
//!   (`init_transactions`): a transaction such a producer left open is
//!   aborted, one it was committing is finished, and a zombie of a killed
//!   run can no longer write.
//! - Restoring checkpoint *n* delivers, each in its own transaction, the
//!   staged epochs after the checkpoint the group's offset names, up to
//!   *n*; what later checkpoints staged is dropped. A `read_committed`
//!   reader therefore sees every epoch once, in checkpoint order.
//!
//! Failpoints (test-only, `weir::failpoint`): `sink.mid-delivery` before
//! each batch of an epoch after the first is produced into the open
//! transaction (`EpochReader::next_batch`), `sink.after-delivery` once the
//! transaction is committed, before the marker is committed again outside
//! it.
//!
//! `delivery = "at-least-once"`: records are produced as they arrive by an
//! idempotent producer, and a checkpoint completes only once everything
//! before its barrier is acknowledged (a flush at precommit); after a
//! crash the records since the restored checkpoint are written again.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use serde::Deserialize;
use serde_json::{Value, json};
use toml::Table;

use super::client::{ClientSettings, Context, TIMEOUT, partitions};
use super::direct::{DirectSink, TaskTransactions};
use super::repartition::{Control, HEADER};
use super::source::check_topic;
use super::writer::{ProduceError, Writer};
use weir::connectors::from_table;
use weir::connectors::metadata::{Fields, Item};
use weir::connectors::schema_format::{SchemaEncoder, SchemaKeys, SchemaKind, SchemaSettings};
use weir::connectors::sink::{Delivery, Done, RecordCheck, Sink, SinkContext, SinkError};
use weir::connectors::staged::{Destination, EpochReader};
use weir::connectors::{BuildSink, SinkConnector, SinkType};
use weir::dataflow::Batch;
use weir::failpoint::{self, Failpoint};
use weir::schemas::registry::SubjectStrategy;

/// The registry entry of `type = "kafka"` sinks.
pub const SINK: SinkType = SinkType {
    name: "kafka",
    keys: &[
        "brokers",
        "topic",
        "key",
        "mode",
        "format",
        "schema",
        "message",
        "schema_registry",
        "subject_strategy",
        "headers",
        "metadata",
        "key_format",
        "key_schema",
        "key_message",
        "transactional_id",
        "upstream_task",
        "write",
        "properties",
    ],
    delivery: Delivery::ExactlyOnce,
    read: KafkaSinkConfig::read,
};

/// How long committing one epoch's transaction may take: it waits for
/// every message of the epoch to be acknowledged.
pub(super) const COMMIT_TIMEOUT: Duration = Duration::from_secs(60);

/// What a message's key is (`key`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyFrom {
    /// The record's key (the default).
    Record,
    /// No key: messages spread over the partitions.
    None,
}

/// What a message is (`mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every record is a message; one that is not an insert carries its
    /// kind in the field `op` of its value (the default).
    Append,
    /// The topic is a table by key (compacted): a record replaces its
    /// key's value, a delete is a tombstone (the key with no value), an
    /// update's before image is skipped, a truncate is skipped with a
    /// warning (a topic cannot drop every key at once).
    Upsert,
}

/// Why `write = "direct"` runs only in worker mode.
const NEEDS_WORKER: &str = "write = \"direct\" produces into the transactions of a worker-mode task, which its group commits with each checkpoint; run the job with `weir run --worker`, or use write = \"staged\"";

/// How an exactly-once sink carries an epoch to its transaction
/// (`write`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Write {
    /// Staged on disk (and in the object store) with the checkpoint, then
    /// produced in one transaction once the checkpoint is committed (the
    /// default).
    Staged,
    /// Produced as it arrives into the worker-mode task's transaction,
    /// which the task's commit point commits (`kafka/direct.rs`).
    Direct,
}

/// The settings of a Kafka sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaSinkConfig {
    /// The cluster and client properties.
    pub client: ClientSettings,
    /// The topic written (`topic`).
    pub topic: String,
    /// The message key (`key`).
    pub key: KeyFrom,
    /// What a message is (`mode`).
    pub mode: Mode,
    /// Whether values are written as Debezium change events (`format =
    /// "debezium-json"`; default: as they are).
    pub debezium: bool,
    /// Of `format = "avro"` or `"protobuf"`: the schema values are
    /// written with, and the registry it is registered in (`schema`,
    /// `message`, `schema_registry`, `subject_strategy`).
    pub schema: Option<SchemaSettings>,
    /// Headers every message carries (`[sink.headers]`).
    pub headers: Vec<(String, String)>,
    /// The field of each record whose object gives its message's own
    /// headers, taken out of the value (`metadata = { headers = "..." }`).
    pub header_field: Option<String>,
    /// Of `key_format`: the schema keys are encoded with.
    pub key_schema: Option<SchemaSettings>,
    /// The producer's `transactional.id`, if not the derived one
    /// (`transactional_id`).
    pub transactional_id: Option<String>,
    /// The upstream task this sink writes a repartition topic as
    /// (`upstream_task`, set by worker mode): each epoch then carries a
    /// control record to every partition ([`super::repartition`]).
    pub upstream_task: Option<u32>,
    /// How an exactly-once epoch reaches its transaction (`write`).
    pub write: Write,
}

impl KafkaSinkConfig {
    fn read(table: Table) -> Result<BuildSink, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            brokers: Option<String>,
            topic: Option<String>,
            key: Option<KeyFrom>,
            mode: Option<Mode>,
            format: Option<String>,
            schema: Option<String>,
            message: Option<String>,
            schema_registry: Option<String>,
            subject_strategy: Option<SubjectStrategy>,
            headers: Option<Table>,
            metadata: Option<BTreeMap<String, String>>,
            key_format: Option<String>,
            key_schema: Option<String>,
            key_message: Option<String>,
            transactional_id: Option<String>,
            upstream_task: Option<u32>,
            write: Option<Write>,
            properties: Option<Table>,
        }
        let raw: Raw = from_table(table)?;
        Ok(Box::new(move |dir: &Path, delivery| {
            let client = ClientSettings::read(raw.brokers, raw.properties)?;
            let Some(topic) = raw.topic else {
                return Err("`topic` is missing; name the topic to write".into());
            };
            check_topic(&topic).map_err(|m| format!("`topic`: {m}"))?;
            let mut headers = Vec::new();
            for (name, value) in raw.headers.unwrap_or_default() {
                match value {
                    toml::Value::String(s) => headers.push((name, s)),
                    other => {
                        return Err(format!(
                            "`headers.{name}` must be a string, not {}",
                            other.type_str()
                        ));
                    }
                }
            }
            if raw.transactional_id.is_some() && delivery == Delivery::AtLeastOnce {
                return Err(
                    "`transactional_id` is for delivery = \"exactly-once\"; an at-least-once sink uses no transactions"
                        .into(),
                );
            }
            if raw.upstream_task.is_some() && delivery == Delivery::AtLeastOnce {
                return Err(
                    "`upstream_task` writes a repartition topic, whose epochs and control records go in transactions: remove delivery = \"at-least-once\"".into(),
                );
            }
            let write = raw.write.unwrap_or(Write::Staged);
            if write == Write::Direct {
                let conflict = match delivery {
                    Delivery::AtLeastOnce => {
                        Some("delivery = \"at-least-once\" (which uses no transactions)")
                    }
                    Delivery::ExactlyOnce if raw.transactional_id.is_some() => Some(
                        "`transactional_id` (the direct sinks of a task share the task's two ids)",
                    ),
                    Delivery::ExactlyOnce if raw.upstream_task.is_some() => {
                        Some("`upstream_task` (a repartition topic is staged)")
                    }
                    Delivery::ExactlyOnce => None,
                };
                if let Some(conflict) = conflict {
                    return Err(format!(
                        "write = \"direct\" cannot go with {conflict}; remove one of them"
                    ));
                }
            }
            let metadata = Fields::read(raw.metadata.clone(), &[("headers", Item::Headers)])?;
            let header_field = metadata.field(Item::Headers).map(str::to_owned);
            if header_field.is_some() && raw.format.as_deref() == Some("debezium-json") {
                return Err("format = \"debezium-json\" writes change events, whose records have no headers field: remove `metadata`".into());
            }
            if header_field.is_some() && raw.upstream_task.is_some() {
                return Err("`upstream_task` writes a repartition topic, whose records cross as they are: remove `metadata`".into());
            }
            let mode = raw.mode.unwrap_or(Mode::Append);
            let debezium = match raw.format.as_deref() {
                None | Some("lines" | "jsonl") => false,
                Some(format) if SchemaKind::of_format(format).is_some() => false,
                Some("debezium-json") => true,
                Some(other) => {
                    return Err(format!(
                        "`format` = {other:?} is not a Kafka sink format; write \"debezium-json\", \"avro\", \"protobuf\" or \"json\", or remove it to write values as they are"
                    ));
                }
            };
            let keys = SchemaKeys {
                schema: raw.schema.as_deref(),
                message: raw.message.as_deref(),
                registry: raw.schema_registry,
                strategy: raw.subject_strategy,
                key_format: raw.key_format.as_deref(),
                key_schema: raw.key_schema.as_deref(),
                key_message: raw.key_message.as_deref(),
            };
            let kind = raw.format.as_deref().and_then(SchemaKind::of_format);
            let (schema, key_schema) = SchemaSettings::read(kind, keys, dir, true)?;
            if let (Some(schema), Some(_)) = (&schema, raw.upstream_task) {
                return Err(format!(
                    "`upstream_task` writes a repartition topic, whose records cross as they are: remove format = \"{}\"",
                    schema.kind.format()
                ));
            }
            if key_schema.is_some()
                && (raw.upstream_task.is_some() || raw.key == Some(KeyFrom::None))
            {
                return Err("`key_format` encodes the records' keys: remove it (with `upstream_task` records cross as they are; with key = \"none\" there are no keys)".into());
            }
            if debezium && (mode == Mode::Upsert || raw.upstream_task.is_some()) {
                return Err(
                    "format = \"debezium-json\" writes every change as an event: use mode = \"append\" (and no `upstream_task`)".into(),
                );
            }
            if mode == Mode::Upsert && raw.key == Some(KeyFrom::None) {
                return Err(
                    "mode = \"upsert\" keys each message by its record's key; remove key = \"none\"".into(),
                );
            }
            if mode == Mode::Upsert && raw.upstream_task.is_some() {
                return Err(
                    "`upstream_task` writes a repartition topic, whose records cross as they are: remove mode = \"upsert\"".into(),
                );
            }
            if raw.transactional_id.as_deref() == Some("") {
                return Err(
                    "`transactional_id` is empty; remove it to use weir-<job>-<sink>".into(),
                );
            }
            Ok(Arc::new(KafkaSinkConfig {
                client,
                topic,
                key: raw.key.unwrap_or(KeyFrom::Record),
                mode,
                debezium,
                schema,
                headers,
                header_field,
                key_schema,
                transactional_id: raw.transactional_id,
                upstream_task: raw.upstream_task,
                write,
            }))
        }))
    }

    fn producer(
        &self,
        id: &str,
        own: &[(&str, &str)],
        fail: &impl Fn(String) -> SinkError,
    ) -> Result<BaseProducer<Context>, SinkError> {
        let mut settings = vec![("partitioner", "murmur2_random"), ("linger.ms", "5")];
        settings.extend_from_slice(own);
        self.client
            .config(id, &settings)
            .create_with_context(Context::new(format!("sink `{id}`")))
            .map_err(|e| fail(format!("cannot create the Kafka producer: {e}")))
    }
}

impl SinkConnector for KafkaSinkConfig {
    fn needs_transactions(&self) -> Option<&'static str> {
        (self.write == Write::Direct).then_some(NEEDS_WORKER)
    }

    fn open(&self, at: &SinkContext) -> Result<Box<dyn Sink>, SinkError> {
        let id = at.id;
        let target = format!("topic `{}` at {}", self.topic, self.client.brokers);
        let fail = |message: String| SinkError::Remote {
            sink: id.to_owned(),
            target: target.clone(),
            message,
        };
        let key_encoder = (self.key_schema.as_ref())
            .map(|settings| SchemaEncoder::open(settings, &self.topic))
            .transpose()
            .map_err(&fail)?;
        let encoder = (self.schema.as_ref())
            .map(|settings| SchemaEncoder::open(settings, &self.topic))
            .transpose()
            .map_err(&fail)?;
        let writer = Writer {
            sink: id.to_owned(),
            topic: self.topic.clone(),
            key: self.key,
            mode: self.mode,
            repartition: None,
            debezium: self.debezium,
            encoder: encoder.map(Arc::new),
            headers: self.headers.clone(),
            header_field: self.header_field.clone(),
            key_encoder: key_encoder.map(Arc::new),
            told_truncate: Arc::new(AtomicBool::new(false)),
        };
        let probe = || -> Result<BaseConsumer<Context>, SinkError> {
            let probe: BaseConsumer<Context> = (self.client.config(id, &[]))
                .create_with_context(Context::new(format!("sink `{id}`")))
                .map_err(|e| fail(format!("cannot create the Kafka client: {e}")))?;
            partitions(&probe, &self.client.brokers, &self.topic).map_err(&fail)?;
            Ok(probe)
        };
        if at.delivery == Delivery::AtLeastOnce {
            let producer = self.producer(id, &[("enable.idempotence", "true")], &fail)?;
            probe()?;
            producer.context().opened();
            return Ok(Box::new(AtLeastOnceSink {
                sink: id.to_owned(),
                target,
                producer,
                writer,
            }));
        }
        if self.write == Write::Staged {
            return self.staged(at, writer, &target, &fail);
        }
        let Some(transactions) =
            (at.transactions.cloned()).and_then(|t| t.downcast::<TaskTransactions>().ok())
        else {
            return Err(fail(NEEDS_WORKER.into()));
        };
        probe()?;
        if let Some(info) = at.restore.filter(|info| !DirectSink::wrote(info)) {
            // The checkpoint restored was taken with write = "staged":
            // what it staged and Kafka lacks is delivered first.
            tracing::info!("sink `{id}`: delivering the output staged before write = \"direct\"");
            let at = SinkContext {
                restore: Some(info),
                ..*at
            };
            drop(self.staged(&at, writer.clone(), &target, &fail)?);
        }
        Ok(Box::new(DirectSink {
            sink: id.to_owned(),
            target,
            transactions,
            writer,
            epoch: 0,
        }))
    }
}

impl KafkaSinkConfig {
    /// The staged exactly-once sink `at` opens, delivering through a
    /// transactional producer of the sink's own id.
    fn staged(
        &self,
        at: &SinkContext,
        writer: Writer,
        target: &str,
        fail: &impl Fn(String) -> SinkError,
    ) -> Result<Box<dyn Sink>, SinkError> {
        let (job, id) = (at.job, at.id);
        let transactional_id = self
            .transactional_id
            .clone()
            .unwrap_or_else(|| format!("weir-{job}-{id}"));
        let marker: BaseConsumer<Context> = self
            .client
            .config(
                id,
                &[
                    ("group.id", &transactional_id),
                    ("enable.auto.commit", "false"),
                    ("isolation.level", "read_committed"),
                ],
            )
            .create_with_context(Context::new(format!("sink `{id}`")))
            .map_err(|e| fail(format!("cannot create the Kafka client: {e}")))?;
        let count = partitions(&marker, &self.client.brokers, &self.topic).map_err(fail)?;
        let control = self.upstream_task.map(|from| (from, count.len() as i32));
        let mut writer = writer;
        writer.repartition = control.map(|(_, partitions)| partitions);
        let producer = self.producer(id, &[("transactional.id", &transactional_id)], fail)?;
        producer.init_transactions(TIMEOUT).map_err(|e| {
            fail(format!(
                "cannot start transactions as `{transactional_id}` ({e}); the cluster must support transactions (Kafka 0.11+, a transaction state log with enough replicas)"
            ))
        })?;
        producer.context().opened();
        marker.context().opened();
        let mut destination = KafkaDestination {
            sink: id.to_owned(),
            target: target.to_owned(),
            producer,
            marker,
            writer,
            control,
        };
        if let Some(info) = at.restore.filter(|info| DirectSink::wrote(info)) {
            // The checkpoint restored was taken with write = "direct": its
            // output is in Kafka, committed with it.
            let n = info.get("checkpoint").and_then(Value::as_u64).unwrap_or(0);
            destination.mark(n)?;
        }
        at.staged(destination)
    }
}

/// Delivers staged epochs, each in one transaction.
struct KafkaDestination {
    sink: String,
    target: String,
    producer: BaseProducer<Context>,
    /// A client of the consumer group that records the last delivered
    /// checkpoint.
    marker: BaseConsumer<Context>,
    writer: Writer,
    /// For a repartition topic: the upstream task written as, and the
    /// topic's partition count (each gets every control record).
    control: Option<(u32, i32)>,
}

impl KafkaDestination {
    fn error(&self, message: String) -> SinkError {
        SinkError::Remote {
            sink: self.sink.clone(),
            target: self.target.clone(),
            message,
        }
    }

    /// The marker: partition 0 of the topic, at offset `checkpoint`.
    fn marker_at(&self, checkpoint: u64) -> Result<TopicPartitionList, SinkError> {
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(&self.writer.topic, 0, Offset::Offset(checkpoint as i64))
            .map_err(|e| self.error(format!("cannot name the delivery marker: {e}")))?;
        Ok(list)
    }

    /// Sets the marker to `checkpoint`, outside any transaction: the
    /// output up to it is in the topic (0: none is).
    fn mark(&mut self, checkpoint: u64) -> Result<(), SinkError> {
        let marker = self.marker_at(checkpoint)?;
        self.marker
            .commit(&marker, CommitMode::Sync)
            .map_err(|e| self.error(format!("cannot set the delivery marker: {e}")))
    }

    /// Writes epoch `id` and its marker in the open transaction and commits it.
    fn transact(&mut self, id: u64, epoch: &mut EpochReader) -> Result<u64, SinkError> {
        let failed = |what: &str, e: KafkaError| format!("{what}: {e}");
        let mut records = 0;
        while let Some(batch) = epoch.next_batch()? {
            self.writer
                .produce(&self.producer, &batch)
                .map_err(|e| self.error(format!("producing failed: {e}")))?;
            records += batch.len() as u64;
        }
        if let (Some((from, count)), Some(signals)) = (self.control, epoch.signals()) {
            let value = Control { from, signals }.encode();
            for p in 0..count {
                let headers = OwnedHeaders::new().insert(Header {
                    key: HEADER,
                    value: None::<&[u8]>,
                });
                let message = BaseRecord::<[u8], [u8]>::to(&self.writer.topic)
                    .partition(p)
                    .payload(&value)
                    .headers(headers);
                self.producer
                    .send(message)
                    .map_err(|(e, _)| self.error(failed("producing a control record failed", e)))?;
            }
        }
        let group = self
            .marker
            .group_metadata()
            .ok_or_else(|| self.error("the marker client has no group".into()))?;
        let marker = self.marker_at(id)?;
        self.producer
            .send_offsets_to_transaction(&marker, &group, TIMEOUT)
            .map_err(|e| {
                self.error(failed(
                    "recording the checkpoint in the transaction failed",
                    e,
                ))
            })?;
        self.producer
            .commit_transaction(COMMIT_TIMEOUT)
            .map_err(|e| self.error(failed("committing the transaction failed", e)))?;
        failpoint::hit(Failpoint::SinkAfterDelivery);
        Ok(records)
    }
}

impl Destination for KafkaDestination {
    fn reads_rows(&self) -> bool {
        self.writer.reads_rows()
    }

    fn check(&self) -> Option<Box<dyn RecordCheck>> {
        Some(Box::new(self.writer.clone()))
    }

    fn carries_signals(&self) -> bool {
        self.control.is_some()
    }

    fn delivered(&mut self) -> Result<Option<u64>, SinkError> {
        let asked = self.marker_at(0)?;
        let committed = self
            .marker
            .committed_offsets(asked, TIMEOUT)
            .map_err(|e| self.error(format!("cannot read the last delivered checkpoint: {e}")))?;
        let at = committed
            .find_partition(&self.writer.topic, 0)
            .map(|e| e.offset());
        Ok(Some(match at {
            Some(Offset::Offset(n)) if n > 0 => n as u64,
            _ => 0,
        }))
    }

    fn start_over(&mut self) -> Result<(), SinkError> {
        self.mark(0)
    }

    fn deliver(&mut self, id: u64, epoch: &mut EpochReader) -> Result<(), SinkError> {
        self.producer
            .begin_transaction()
            .map_err(|e| self.error(format!("cannot begin a transaction: {e}")))?;
        match self.transact(id, epoch) {
            Ok(records) => {
                tracing::debug!(
                    "sink `{}`: committed {records} records of checkpoint {id}",
                    self.sink
                );
                Ok(())
            }
            Err(e) => {
                // Best effort: a fenced or fatal producer cannot abort, and
                // the next producer of the id aborts what is left open.
                let _ = self.producer.abort_transaction(TIMEOUT);
                Err(e)
            }
        }
    }
}

/// An at-least-once sink: produces as it writes, flushes at precommit.
struct AtLeastOnceSink {
    sink: String,
    target: String,
    producer: BaseProducer<Context>,
    writer: Writer,
}

impl AtLeastOnceSink {
    fn check(&self, result: Result<(), KafkaError>) -> Result<(), SinkError> {
        let failure = result
            .err()
            .map(|e| e.to_string())
            .or_else(|| self.producer.context().take_failure());
        match failure {
            None => Ok(()),
            Some(message) => Err(SinkError::Remote {
                sink: self.sink.clone(),
                target: self.target.clone(),
                message: format!("delivery failed: {message}"),
            }),
        }
    }
}

impl Sink for AtLeastOnceSink {
    fn reads_rows(&self) -> bool {
        self.writer.reads_rows()
    }

    fn refuse(&mut self, batch: &Batch) -> Vec<(usize, String)> {
        self.writer.refused(batch)
    }

    fn out_on_write(&self) -> bool {
        true
    }

    fn write(&mut self, batch: &Batch) -> Result<(), SinkError> {
        match self.writer.produce(&self.producer, batch) {
            Ok(()) => self.check(Ok(())),
            Err(ProduceError::Kafka(e)) => self.check(Err(e)),
            Err(ProduceError::Refused(message)) => Err(SinkError::Remote {
                sink: self.sink.clone(),
                target: self.target.clone(),
                message,
            }),
        }
    }

    fn precommit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        let flushed = self.producer.flush(COMMIT_TIMEOUT);
        self.check(flushed)?;
        done(Ok(json!({ "checkpoint": id })));
        Ok(())
    }

    fn commit(&mut self, _: u64, done: Done) -> Result<(), SinkError> {
        done(Ok(Value::Null));
        Ok(())
    }

    fn close(&mut self) -> Result<(), SinkError> {
        let flushed = self.producer.flush(COMMIT_TIMEOUT);
        self.check(flushed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, delivery: Delivery) -> Result<KafkaSinkConfig, String> {
        SINK.settings(text, delivery)
    }

    /// The registry serves keys alone when values are plain: keys and
    /// values share `schema_registry` (a sink of `jsonl` values and Avro
    /// keys was refused as if the registry were the values' only).
    #[test]
    fn keys_and_values_share_the_registry() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.avsc");
        std::fs::write(
            &key,
            r#"{"type": "record", "name": "K", "fields": [{"name": "id", "type": "long"}]}"#,
        )
        .unwrap();
        let text = format!(
            "brokers = \"h:1\"\ntopic = \"o\"\nformat = \"jsonl\"\nkey_format = \"avro\"\nkey_schema = {:?}\nschema_registry = \"http://r\"",
            key.display().to_string()
        );
        let c = parse(&text, Delivery::ExactlyOnce).unwrap();
        assert!(c.schema.is_none());
        assert_eq!(c.key_schema.unwrap().registry.as_deref(), Some("http://r"));
        let err = parse(
            "brokers = \"h:1\"\ntopic = \"o\"\nschema_registry = \"http://r\"",
            Delivery::ExactlyOnce,
        )
        .unwrap_err();
        assert!(err.contains("settings of format"), "{err}");
    }

    #[test]
    fn settings_have_defaults_and_are_checked() {
        let exactly = Delivery::ExactlyOnce;
        let c = parse("brokers = \"h:1\"\ntopic = \"out\"", exactly).unwrap();
        assert_eq!(
            (c.key, c.headers.len(), c.transactional_id, c.write),
            (KeyFrom::Record, 0, None, Write::Staged)
        );
        let c = parse(
            "brokers = \"h:1\"\ntopic = \"o\"\nwrite = \"direct\"",
            exactly,
        )
        .unwrap();
        assert_eq!(c.write, Write::Direct);
        assert!(SinkConnector::needs_transactions(&c).is_some_and(|m| m.contains("--worker")));
        let c = parse(
            "brokers = \"h:1\"\ntopic = \"out\"\nkey = \"none\"\nheaders = { origin = \"weir\" }",
            Delivery::AtLeastOnce,
        )
        .unwrap();
        assert_eq!(c.key, KeyFrom::None);
        assert_eq!(c.headers, [("origin".to_owned(), "weir".to_owned())]);
        for (text, delivery, expected) in [
            ("topic = \"out\"", exactly, "`brokers` is missing"),
            ("brokers = \"h:1\"", exactly, "`topic` is missing"),
            ("brokers = \"h:1\"\ntopic = \"o/t\"", exactly, "holds '/'"),
            (
                "brokers = \"h:1\"\ntopic = \"o\"\nheaders = { n = 1 }",
                exactly,
                "must be a string",
            ),
            (
                "brokers = \"h:1\"\ntopic = \"o\"\ntransactional_id = \"x\"",
                Delivery::AtLeastOnce,
                "exactly-once",
            ),
            (
                "brokers = \"h:1\"\ntopic = \"o\"\nupstream_task = 1",
                Delivery::AtLeastOnce,
                "writes a repartition topic",
            ),
            (
                "brokers = \"h:1\"\ntopic = \"o\"\nwrite = \"direct\"",
                Delivery::AtLeastOnce,
                "cannot go with delivery = \"at-least-once\"",
            ),
            (
                "brokers = \"h:1\"\ntopic = \"o\"\nwrite = \"direct\"\ntransactional_id = \"x\"",
                exactly,
                "cannot go with `transactional_id`",
            ),
            (
                "brokers = \"h:1\"\ntopic = \"o\"\nwrite = \"direct\"\nupstream_task = 1",
                exactly,
                "cannot go with `upstream_task`",
            ),
            (
                "brokers = \"h:1\"\ntopic = \"o\"\nwrite = \"now\"",
                exactly,
                "unknown variant",
            ),
        ] {
            let err = parse(text, delivery).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }
}
