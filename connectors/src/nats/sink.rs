//! The NATS JetStream sink (`type = "nats"` in `[[sink]]`): each record's
//! value published to `subject` (or to a subject built from the record's
//! key), into whichever stream captures it, once the checkpoint that
//! covers the record is complete.
//!
//! With `delivery = "at-least-once"` records are published as they arrive,
//! without message ids, and a checkpoint completes only once every publish
//! before its barrier is acknowledged; after a crash those since the
//! restored checkpoint are published again.
//!
//! Invariant (exactly-once within the stream's duplicate window): record
//! *i* of checkpoint *n*'s epoch is always published with the message id
//! `<job>/<sink>/<n>/<i>`. An epoch is staged durably before its checkpoint
//! completes (`StagedSink`); a restore republishes every staged epoch up
//! to the restored checkpoint that was not fully acknowledged, with the
//! same ids, and JetStream drops the ones it already stored. What the
//! stream stores of an epoch is always a prefix of it, in order
//! (`OrderedEpoch`), so a republished epoch continues where the stream
//! stopped.
//!
//! With `format = "avro"` or `"protobuf"` each value is encoded with
//! `schema` (and, with `schema_registry`, registered under a subject named
//! after `subject` and framed in the registry's wire format) as it is
//! published; the staged epochs keep the records as they came.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::message::PublishMessage;
use async_nats::{HeaderMap, HeaderName, HeaderValue};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;
use toml::Table;

use super::connection::{Connection, check_url};
use super::ordered::{IN_FLIGHT, OrderedEpoch};
use weir::connectors::changelog::with_op;
use weir::connectors::from_table;
use weir::connectors::metadata::{self, Fields, Item};
use weir::connectors::schema_format::{SchemaEncoder, SchemaKeys, SchemaKind, SchemaSettings};
use weir::connectors::sink::{Delivery, Done, RecordCheck, Sink, SinkContext, SinkError};
use weir::connectors::staged::{Destination, EpochReader};
use weir::connectors::{BuildSink, SinkConnector, SinkType};
use weir::dataflow::Batch;
use weir::dataflow::batch::{Change, Encoding, RecordRef};
use weir::failpoint::{self, Failpoint};
use weir::schemas::registry::SubjectStrategy;

/// The registry entry of `type = "nats"` sinks.
pub const SINK: SinkType = SinkType {
    name: "nats",
    keys: &[
        "url",
        "subject",
        "format",
        "schema",
        "message",
        "schema_registry",
        "subject_strategy",
        "metadata",
    ],
    delivery: Delivery::ExactlyOnce,
    read: NatsSinkConfig::read,
};

/// The placeholder of `subject` that each record's key replaces.
pub(super) const KEY: &str = "{key}";

/// The settings of a NATS JetStream sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsSinkConfig {
    /// The server (`url`).
    pub url: String,
    /// The subject each record is published to (`subject`); `{key}` in it
    /// stands for the record's key.
    pub subject: String,
    /// Of `format = "avro"` or `"protobuf"`: the schema values are
    /// encoded with.
    pub schema: Option<SchemaSettings>,
    /// The field of each record whose object gives its message's headers,
    /// taken out of the value (`metadata = { headers = "..." }`).
    pub header_field: Option<String>,
}

impl NatsSinkConfig {
    fn read(table: Table) -> Result<BuildSink, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            url: Option<String>,
            subject: Option<String>,
            format: Option<String>,
            schema: Option<String>,
            message: Option<String>,
            schema_registry: Option<String>,
            subject_strategy: Option<SubjectStrategy>,
            metadata: Option<BTreeMap<String, String>>,
        }
        let raw: Raw = from_table(table)?;
        Ok(Box::new(move |dir: &Path, _| {
            let Some(url) = raw.url else {
                return Err("`url` is missing; add url = \"nats://127.0.0.1:4222\"".into());
            };
            check_url(&url)?;
            let Some(subject) = raw.subject else {
                return Err("`subject` is missing; add subject = \"<subject>\" (`{key}` in it stands for the record's key)".into());
            };
            check_subject(&subject.replace(KEY, "k"))
                .map_err(|m| format!("`subject` = {subject:?} {m}"))?;
            if let Some(other) = raw
                .format
                .as_deref()
                .filter(|f| SchemaKind::of_format(f).is_none())
            {
                return Err(format!(
                    "`format` = {other:?} is not a NATS sink format; write \"avro\", \"protobuf\" or \"json\", or remove it to publish values as they are"
                ));
            }
            let keys = SchemaKeys {
                schema: raw.schema.as_deref(),
                message: raw.message.as_deref(),
                registry: raw.schema_registry,
                strategy: raw.subject_strategy,
                ..SchemaKeys::default()
            };
            let kind = raw.format.as_deref().and_then(SchemaKind::of_format);
            let (schema, _) = SchemaSettings::read(kind, keys, dir, true)?;
            let metadata = Fields::read(raw.metadata.clone(), &[("headers", Item::Headers)])?;
            Ok(Arc::new(NatsSinkConfig {
                url,
                subject,
                schema,
                header_field: metadata.field(Item::Headers).map(str::to_owned),
            }))
        }))
    }
}

/// Checks that `subject` is a subject one can publish to.
fn check_subject(subject: &str) -> Result<(), String> {
    if subject.is_empty() || subject.split('.').any(str::is_empty) {
        return Err("has an empty token; subjects are dot-separated non-empty tokens".into());
    }
    if let Some(c) = subject
        .chars()
        .find(|c| c.is_whitespace() || matches!(c, '*' | '>'))
    {
        return Err(format!(
            "holds {c:?}; a published subject has no whitespace or wildcards"
        ));
    }
    Ok(())
}

impl SinkConnector for NatsSinkConfig {
    fn open(&self, at: &SinkContext) -> Result<Box<dyn Sink>, SinkError> {
        let (job, id) = (at.job, at.id);
        let remote = |target: String| {
            let sink = id.to_owned();
            move |message: String| SinkError::Remote {
                sink: sink.clone(),
                target: target.clone(),
                message,
            }
        };
        let connection = Connection::open(&self.url, id).map_err(remote(self.url.clone()))?;
        let target = format!("subject `{}` at {}", self.subject, connection.server);
        let sample = self.subject.replace(KEY, "key");
        connection
            .block_on(connection.jetstream.stream_by_subject(sample.clone()))
            .map_err(|e| {
                remote(target.clone())(format!(
                    "no JetStream stream captures subject `{sample}` ({e}); create one whose subjects include it"
                ))
            })?;
        let encoder = (self.schema.as_ref())
            .map(|settings| SchemaEncoder::open(settings, &self.subject))
            .transpose()
            .map_err(remote(target.clone()))?;
        let destination = NatsDestination {
            sink: id.to_owned(),
            prefix: format!("{job}/{id}"),
            target,
            messages: Messages {
                subject: self.subject.clone(),
                encoder: encoder.map(Arc::new),
                header_field: self.header_field.clone(),
            },
            connection,
        };
        if at.delivery == Delivery::AtLeastOnce {
            return Ok(Box::new(PublishingSink {
                destination,
                pending: VecDeque::new(),
            }));
        }
        at.staged(destination)
    }
}

/// `headers` as NATS headers, whose names and values are text (a header
/// without a value gets an empty one).
fn header_map(headers: Vec<metadata::Header>) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let header = HeaderName::from_str(&name)
            .map_err(|e| format!("header {name:?} is no NATS header name: {e}"))?;
        let text = String::from_utf8(value.unwrap_or_default()).map_err(|_| {
            format!("header {name:?} has a value that is not UTF-8; NATS header values are text")
        })?;
        let text = HeaderValue::from_str(&text)
            .map_err(|e| format!("header {name:?} has a value NATS refuses: {e}"))?;
        map.append(header, text);
    }
    Ok(map)
}

/// Publishes staged epochs.
struct NatsDestination {
    sink: String,
    /// `<job>/<sink>`, the start of every message id.
    prefix: String,
    /// The subject and server, for messages.
    target: String,
    messages: Messages,
    connection: Connection,
}

impl NatsDestination {
    fn error(&self, message: String) -> SinkError {
        SinkError::Remote {
            sink: self.sink.clone(),
            target: self.target.clone(),
            message,
        }
    }

    /// Record `r`'s message ([`Messages::message`]).
    fn message(&self, r: &weir::dataflow::batch::RecordRef<'_>) -> Result<Message, SinkError> {
        self.messages.message(r).map_err(|m| self.error(m))
    }
}

/// A record's subject, payload and headers.
type Message = (String, Bytes, Option<HeaderMap>);

/// How records become messages: a subject (with the key in it) and a
/// payload with headers.
#[derive(Clone)]
struct Messages {
    subject: String,
    /// With `format = "avro"`, `"protobuf"` or `"json"`: the values'
    /// encoder.
    encoder: Option<Arc<SchemaEncoder>>,
    /// The field whose object gives each message's headers.
    header_field: Option<String>,
}

impl RecordCheck for Messages {
    /// Records without a subject or payload: a key that cannot be part of
    /// the subject, a value that does not fit the schema.
    fn refuse(&mut self, batch: &Batch) -> Vec<(usize, String)> {
        let refused = (batch.iter().enumerate())
            .filter_map(|(i, r)| self.message(&r).err().map(|why| (i, why)));
        refused.collect()
    }
}

impl Messages {
    /// Record `r`'s subject ([`subject_for`](Self::subject_for)),
    /// payload and headers ([`payload`](Self::payload)).
    fn message(&self, r: &RecordRef<'_>) -> Result<Message, String> {
        let subject = self.subject_for(r.key)?;
        let (payload, headers) = self.payload(r)?;
        Ok((subject, payload, headers))
    }

    /// Whether rows reach it as rows ([`Sink::reads_rows`]): with a
    /// schema to encode them and no header field to take out of them.
    fn reads_rows(&self) -> bool {
        self.encoder.is_some() && self.header_field.is_none()
    }

    /// The payload of record `r` and its headers: its value, with its
    /// change kind when not an insert ([`with_op`]), its headers taken out
    /// of the header field, encoded with the schema if there is one. A
    /// row ([`reads_rows`](Self::reads_rows)) that is an insert is
    /// encoded from the row itself, any other as its JSON record.
    fn payload(&self, r: &RecordRef<'_>) -> Result<(Bytes, Option<HeaderMap>), String> {
        if r.encoding == Encoding::Row {
            if let (Some(encoder), Change::Insert) = (&self.encoder, r.change) {
                return Ok((Bytes::from(encoder.encode_row(r.value)?), None));
            }
            return r.with_text_value(|text| self.payload(text));
        }
        let value = with_op(r.value, r.change)?;
        let (value, headers) = match &self.header_field {
            Some(field) => {
                let (rest, headers) = metadata::take_headers(&value, field)?;
                (Cow::Owned(rest), Some(header_map(headers)?))
            }
            None => (value, None),
        };
        let payload = match &self.encoder {
            Some(encoder) => Bytes::from(encoder.encode(&value)?),
            None => Bytes::copy_from_slice(&value),
        };
        Ok((payload, headers))
    }

    /// The subject of a record with key `key`.
    fn subject_for(&self, key: Option<&[u8]>) -> Result<String, String> {
        if !self.subject.contains(KEY) {
            return Ok(self.subject.clone());
        }
        let Some(key) = key else {
            return Err("a record has no key, and `subject` needs one for `{key}`".into());
        };
        let key = std::str::from_utf8(key).map_err(|_| {
            "a record's key is not UTF-8, so it cannot be part of a subject".to_string()
        })?;
        let subject = self.subject.replace(KEY, key);
        check_subject(&subject)
            .map_err(|m| format!("the subject {subject:?} of key {key:?} {m}"))?;
        Ok(subject)
    }
}

impl Destination for NatsDestination {
    fn reads_rows(&self) -> bool {
        self.messages.reads_rows()
    }

    fn check(&self) -> Option<Box<dyn RecordCheck>> {
        Some(Box::new(self.messages.clone()))
    }

    /// A stream does not say which epochs it holds: every staged epoch is
    /// republished and the duplicates dropped by id.
    fn delivered(&mut self) -> Result<Option<u64>, SinkError> {
        Ok(None)
    }

    fn start_over(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    fn deliver(&mut self, id: u64, epoch: &mut EpochReader) -> Result<(), SinkError> {
        let mut ordered = OrderedEpoch::new(
            self.connection.jetstream.clone(),
            &self.sink,
            &self.prefix,
            id,
        );
        let published = self.connection.block_on(async {
            while let Some(batch) = epoch.next_batch()? {
                for r in batch.iter() {
                    let (subject, payload, headers) = self.message(&r)?;
                    ordered
                        .publish(subject, payload, headers)
                        .await
                        .map_err(|m| self.error(m))?;
                }
            }
            ordered.finish().await.map_err(|m| self.error(m))
        })?;
        tracing::debug!(
            "sink `{}`: published {published} records of checkpoint {id}",
            self.sink
        );
        // Every message of the epoch is acknowledged (stored).
        failpoint::hit(Failpoint::SinkAfterDelivery);
        Ok(())
    }
}

/// Publishes records as they arrive (at-least-once), without message ids:
/// the records of an epoch cut short by a crash are not the restored run's
/// records at the same positions, so ids could drop the wrong ones.
struct PublishingSink {
    destination: NatsDestination,
    /// Publishes awaiting their acknowledgement, oldest first.
    pending: VecDeque<PublishAckFuture>,
}

impl PublishingSink {
    /// Waits for acknowledgements until at most `left` are pending.
    fn settle(&mut self, left: usize) -> Result<(), SinkError> {
        let PublishingSink {
            destination,
            pending,
        } = self;
        destination.connection.block_on(async {
            while pending.len() > left {
                let ack = pending.pop_front().expect("not empty");
                ack.await
                    .map_err(|e| destination.error(format!("no acknowledgement: {e}")))?;
            }
            Ok(())
        })
    }
}

impl Sink for PublishingSink {
    fn reads_rows(&self) -> bool {
        self.destination.messages.reads_rows()
    }

    fn refuse(&mut self, batch: &Batch) -> Vec<(usize, String)> {
        self.destination.messages.refuse(batch)
    }

    fn out_on_write(&self) -> bool {
        true
    }

    fn write(&mut self, batch: &Batch) -> Result<(), SinkError> {
        let PublishingSink {
            destination,
            pending,
        } = self;
        let jetstream = destination.connection.jetstream.clone();
        destination.connection.block_on(async {
            for r in batch.iter() {
                let (subject, payload, headers) = destination.message(&r)?;
                let mut message = PublishMessage::build().payload(payload);
                if let Some(headers) = headers {
                    message = message.headers(headers);
                }
                let ack = jetstream
                    .send_publish(subject, message)
                    .await
                    .map_err(|e| destination.error(format!("publishing failed: {e}")))?;
                pending.push_back(ack);
                if pending.len() >= IN_FLIGHT {
                    let ack = pending.pop_front().expect("not empty");
                    ack.await
                        .map_err(|e| destination.error(format!("no acknowledgement: {e}")))?;
                }
            }
            Ok(())
        })
    }

    /// Every record before the barrier is stored once this reports.
    fn precommit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        self.settle(0)?;
        done(Ok(serde_json::json!({ "checkpoint": id })));
        Ok(())
    }

    fn commit(&mut self, _: u64, done: Done) -> Result<(), SinkError> {
        done(Ok(Value::Null));
        Ok(())
    }

    fn close(&mut self) -> Result<(), SinkError> {
        self.settle(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<(), String> {
        NatsSinkConfig::read(text.parse().unwrap())?(Path::new("."), Delivery::ExactlyOnce)
            .map(drop)
    }

    #[test]
    fn headers_are_text_with_names_nats_takes() {
        let map = header_map(vec![
            ("a".into(), Some(b"1".to_vec())),
            ("a".into(), Some(b"2".to_vec())),
            ("b".into(), None),
        ])
        .unwrap();
        let a: Vec<&str> = map.get_all("a").map(|v| v.as_str()).collect();
        assert_eq!(a, ["1", "2"]);
        assert_eq!(map.get("b").map(|v| v.as_str()), Some(""));
        let err = header_map(vec![("bin".into(), Some(vec![0xff]))]).unwrap_err();
        assert!(err.contains("not UTF-8"), "{err}");
        let err = header_map(vec![("a:b".into(), None)]).unwrap_err();
        assert!(err.contains("no NATS header name"), "{err}");
    }

    #[test]
    fn settings_are_checked() {
        parse("url = \"h:1\"\nsubject = \"out\"").unwrap();
        parse("url = \"h:1\"\nsubject = \"out.{key}\"").unwrap();
        for (text, expected) in [
            ("subject = \"out\"", "`url` is missing"),
            ("url = \"h:1\"", "`subject` is missing"),
            ("url = \"h:1\"\nsubject = \"out.*\"", "wildcards"),
            ("url = \"h:1\"\nsubject = \"out..x\"", "empty token"),
            (
                "url = \"h:1\"\nsubject = \"o\"\nformat = \"csv\"",
                "not a NATS sink format",
            ),
            (
                "url = \"h:1\"\nsubject = \"o\"\nschema = \"a.avsc\"",
                "settings of format = \"avro\", \"protobuf\" or \"json\"",
            ),
            (
                "url = \"h:1\"\nsubject = \"o\"\nformat = \"avro\"",
                "add schema = \"<file>.avsc\"",
            ),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }
}
