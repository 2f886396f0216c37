//! [`Writer`]: a Kafka sink's records as messages of its topic. In
//! `append` mode every record is a message, its change kind (when not an
//! insert) in the field `op` of its value, or the record as a Debezium
//! change event; in `upsert` mode a delete is a
//! tombstone and what a keyed table cannot hold is skipped; on a
//! repartition topic a record crosses as it is, its kind in the header
//! [`CHANGE_HEADER`], a truncate to every partition.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::OwnedHeaders;
use rdkafka::producer::{BaseProducer, BaseRecord};

use super::client::Context;
use super::repartition::CHANGE_HEADER;
use super::sink::{KeyFrom, Mode};
use weir::connectors::changelog::with_op;
use weir::connectors::debezium;
use weir::connectors::metadata::{self, Header};
use weir::connectors::schema_format::SchemaEncoder;
use weir::connectors::sink::RecordCheck;
use weir::dataflow::Batch;
use weir::dataflow::batch::{Change, Encoding, RecordRef};

/// Turns records into messages of the sink's topic.
#[derive(Clone)]
pub(super) struct Writer {
    pub(super) sink: String,
    pub(super) topic: String,
    pub(super) key: KeyFrom,
    pub(super) mode: Mode,
    /// For a repartition topic, its partition count (once known): change
    /// kinds cross in a header ([`CHANGE_HEADER`]), values as they are, a
    /// truncate to every partition.
    pub(super) repartition: Option<i32>,
    pub(super) headers: Vec<(String, String)>,
    /// The field whose object gives each message's own headers.
    pub(super) header_field: Option<String>,
    /// The encoder of keys written with a schema (`key_format`).
    pub(super) key_encoder: Option<Arc<SchemaEncoder>>,
    /// Whether values are written as Debezium change events.
    pub(super) debezium: bool,
    /// The encoder of values written with a schema (`format = "avro"` or
    /// `"protobuf"`).
    pub(super) encoder: Option<Arc<SchemaEncoder>>,
    /// Whether the log said that an upsert topic skipped a truncate.
    pub(super) told_truncate: Arc<AtomicBool>,
}

impl Writer {
    /// What record `r` becomes: `None` to skip it, else its message's
    /// payload (`None` inside: a tombstone). Append topics get the change
    /// kind in the value ([`with_op`]); repartition topics the value as it
    /// is (the kind goes in a header).
    /// With a header field, its headers are then taken out of the value
    /// (and returned); with `format = "avro"`, `"protobuf"` or `"json"`,
    /// the value is then encoded with the schema.
    fn payload<'r>(
        &self,
        r: &RecordRef<'r>,
        before: Option<&[u8]>,
    ) -> Result<Option<Payload<'r>>, ProduceError> {
        if r.encoding == Encoding::Row {
            return self.row_payload(r, before);
        }
        let Some(payload) = self.json_payload(r, before)? else {
            return Ok(None);
        };
        let refused = ProduceError::Refused;
        let (payload, headers) = match (&self.header_field, payload) {
            (Some(field), Some(json)) => {
                let (rest, headers) = metadata::take_headers(&json, field).map_err(refused)?;
                (Some(Cow::Owned(rest)), headers)
            }
            (_, payload) => (payload, Vec::new()),
        };
        let payload = match (&self.encoder, payload) {
            (Some(encoder), Some(json)) => {
                Some(Cow::Owned(encoder.encode(&json).map_err(refused)?))
            }
            (_, payload) => payload,
        };
        Ok(Some((payload, headers)))
    }

    /// Whether rows reach it as rows ([`Sink::reads_rows`](weir::connectors::sink::Sink::reads_rows)):
    /// with a value schema to encode them and nothing else reading the
    /// value (no Debezium envelope, header field or repartition topic).
    pub(super) fn reads_rows(&self) -> bool {
        self.encoder.is_some()
            && !self.debezium
            && self.header_field.is_none()
            && self.repartition.is_none()
    }

    /// [`payload`](Self::payload) of a row ([`reads_rows`](Self::reads_rows)):
    /// an insert (or an upsert topic's keyed update) encoded from the row
    /// itself, any other change as its JSON record.
    fn row_payload<'r>(
        &self,
        r: &RecordRef<'r>,
        before: Option<&[u8]>,
    ) -> Result<Option<Payload<'r>>, ProduceError> {
        let refused = ProduceError::Refused;
        let as_it_is = match (self.mode, r.change) {
            (Mode::Append, Change::Insert) => true,
            (Mode::Upsert, Change::Insert | Change::UpdateAfter) => r.key.is_some(),
            _ => false,
        };
        if let (Some(encoder), true) = (&self.encoder, as_it_is) {
            let value = encoder.encode_row(r.value).map_err(refused)?;
            return Ok(Some((Some(Cow::Owned(value)), Vec::new())));
        }
        r.with_text_value(|text| {
            let payload = self.payload(text, before)?;
            Ok(
                payload
                    .map(|(value, headers)| (value.map(|v| Cow::Owned(v.into_owned())), headers)),
            )
        })
    }

    /// [`payload`](Self::payload) before a schema's encoding.
    #[allow(clippy::type_complexity)]
    fn json_payload<'r>(
        &self,
        r: &RecordRef<'r>,
        before: Option<&[u8]>,
    ) -> Result<Option<Option<Cow<'r, [u8]>>>, ProduceError> {
        let refused = ProduceError::Refused;
        Ok(match (self.mode, r.change) {
            _ if self.repartition.is_some() => Some(Some(Cow::Borrowed(r.value))),
            (Mode::Append, Change::UpdateBefore) if self.debezium => None,
            (Mode::Append, change) if self.debezium => {
                let mut event = Vec::with_capacity(r.value.len() + 64);
                debezium::envelope(change, r.value, before, r.timestamp, &mut event)
                    .map_err(refused)?;
                Some(Some(Cow::Owned(event)))
            }
            (Mode::Append, change) => Some(Some(with_op(r.value, change).map_err(refused)?)),
            (Mode::Upsert, Change::UpdateBefore) => None,
            (Mode::Upsert, Change::Truncate) => {
                if !self.told_truncate.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "sink `{}`: a truncate reached upsert topic `{}`, which cannot drop every key at once; it is skipped (delete the keys, or recreate the topic)",
                        self.sink,
                        self.topic
                    );
                }
                None
            }
            (Mode::Upsert, _) if r.key.is_none() => {
                return Err(refused(format!(
                    "a record without a key reached upsert topic `{}`; key the records (an upsert topic is a table by key)",
                    self.topic
                )));
            }
            (Mode::Upsert, Change::Delete) => Some(None),
            (Mode::Upsert, _) => Some(Some(Cow::Borrowed(r.value))),
        })
    }

    /// The records of `batch` that cannot be messages of the topic (a
    /// value or key that does not fit its schema, a change kind an append
    /// topic cannot carry), by index, with why: what
    /// [`produce`](Self::produce) would refuse.
    pub(super) fn refused(&self, batch: &Batch) -> Vec<(usize, String)> {
        let mut refused = Vec::new();
        for (i, (_, message)) in self.messages(batch).enumerate() {
            if let Err(ProduceError::Refused(why)) = message {
                refused.push((i, why));
            }
        }
        refused
    }

    /// Each record of `batch` with the message it becomes (`None`: it is
    /// skipped), a Debezium update's before image carried to its after.
    #[allow(clippy::type_complexity)]
    fn messages<'b>(
        &'b self,
        batch: &'b Batch,
    ) -> impl Iterator<Item = (RecordRef<'b>, Result<Option<Parts<'b>>, ProduceError>)> + 'b {
        let mut before = None;
        batch.iter().map(move |r| {
            let held = std::mem::take(&mut before);
            if r.change == Change::UpdateBefore {
                before = Some(r.value);
            }
            let message = self.message(&r, held.filter(|_| r.change == Change::UpdateAfter));
            (r, message)
        })
    }

    /// Record `r`'s message ([`payload`](Self::payload)) with its key as
    /// written (encoded with `key_format`).
    fn message<'r>(
        &self,
        r: &RecordRef<'r>,
        before: Option<&[u8]>,
    ) -> Result<Option<Parts<'r>>, ProduceError> {
        let Some((payload, headers)) = self.payload(r, before)? else {
            return Ok(None);
        };
        let key = match (self.key, r.key, &self.key_encoder) {
            (KeyFrom::Record, Some(key), None) => Some(Cow::Borrowed(key)),
            (KeyFrom::Record, Some(key), Some(encoder)) => Some(Cow::Owned(
                encode_key(encoder, key).map_err(ProduceError::Refused)?,
            )),
            _ => None,
        };
        Ok(Some(Parts {
            payload,
            headers,
            key,
        }))
    }

    /// Queues every record of `batch` on `producer`, waiting for room when
    /// its queue is full.
    pub(super) fn produce(
        &self,
        producer: &BaseProducer<Context>,
        batch: &Batch,
    ) -> Result<(), ProduceError> {
        for (r, message) in self.messages(batch) {
            let Some(parts) = message? else {
                continue;
            };
            // A truncate concerns every key: on a repartition topic it goes
            // to every partition, so every downstream task gets it.
            let everywhere = self.repartition.filter(|_| r.change == Change::Truncate);
            match everywhere {
                None => self.send(producer, &r, &parts, None)?,
                Some(n) => {
                    for p in 0..n {
                        self.send(producer, &r, &parts, Some(p))?;
                    }
                }
            }
        }
        producer.poll(Duration::ZERO);
        Ok(())
    }

    /// Queues record `r` as a message of `parts` into `partition` (`None`:
    /// where its key hashes to).
    fn send(
        &self,
        producer: &BaseProducer<Context>,
        r: &RecordRef<'_>,
        parts: &Parts<'_>,
        partition: Option<i32>,
    ) -> Result<(), ProduceError> {
        let own = &parts.headers;
        {
            let mut message = BaseRecord::<[u8], [u8]>::to(&self.topic);
            if let Some(payload) = parts.payload.as_deref() {
                message = message.payload(payload);
            }
            if let Some(partition) = partition {
                message = message.partition(partition);
            }
            if let Some(key) = parts.key.as_deref() {
                message = message.key(key);
            }
            if let Some(t) = r.timestamp {
                message = message.timestamp(t);
            }
            let change =
                (self.repartition.is_some() && r.change != Change::Insert).then(|| r.change.name());
            if !self.headers.is_empty() || change.is_some() || !own.is_empty() {
                let count = self.headers.len() + own.len() + 1;
                let mut headers = OwnedHeaders::new_with_capacity(count);
                for (name, value) in &self.headers {
                    headers = headers.insert(rdkafka::message::Header {
                        key: name,
                        value: Some(value),
                    });
                }
                for (name, value) in own.iter() {
                    headers = headers.insert(rdkafka::message::Header {
                        key: name,
                        value: value.as_deref(),
                    });
                }
                if let Some(change) = change {
                    headers = headers.insert(rdkafka::message::Header {
                        key: CHANGE_HEADER,
                        value: Some(change),
                    });
                }
                message = message.headers(headers);
            }
            loop {
                match producer.send(message) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        message = back;
                        producer.poll(Duration::from_millis(10));
                    }
                    Err((e, _)) => return Err(ProduceError::Kafka(e)),
                }
            }
        }
        Ok(())
    }
}

/// Record key `key` encoded by `encoder` (`key_format`): a key that is
/// JSON as it is (as a `key_format` source or a field holding an object
/// gives it), any other as a JSON string of its text.
fn encode_key(encoder: &SchemaEncoder, key: &[u8]) -> Result<Vec<u8>, String> {
    let is_json = serde_json::from_slice::<serde::de::IgnoredAny>(key).is_ok();
    let encoded = match is_json {
        true => encoder.encode(key),
        false => {
            let text = String::from_utf8_lossy(key);
            encoder.encode(&serde_json::to_vec(&text).expect("a string serializes"))
        }
    };
    encoded.map_err(|e| format!("a record's key does not fit key_schema: {e}"))
}

/// A message's payload (`None`: a tombstone) and its own headers.
type Payload<'r> = (Option<Cow<'r, [u8]>>, Vec<Header>);

/// What a record's message is made of.
struct Parts<'r> {
    /// The payload (`None`: a tombstone).
    payload: Option<Cow<'r, [u8]>>,
    /// Its own headers.
    headers: Vec<Header>,
    /// Its key as written (`key_format`'s encoding), if it has one.
    key: Option<Cow<'r, [u8]>>,
}

/// Why records could not be produced.
#[derive(Debug, thiserror::Error)]
pub(super) enum ProduceError {
    /// The client refused a message.
    #[error("{0}")]
    Kafka(KafkaError),
    /// A record cannot be a message of the topic (the message says why).
    #[error("{0}")]
    Refused(String),
}

impl RecordCheck for Writer {
    fn refuse(&mut self, batch: &Batch) -> Vec<(usize, String)> {
        self.refused(batch)
    }
}
