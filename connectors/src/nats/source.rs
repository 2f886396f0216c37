//! The NATS JetStream source (`type = "nats"` in `[[source]]`): the
//! messages of a stream (optionally those of one `subject` filter), in
//! stream order, each message's payload one record in the format `lines`
//! or `jsonl`.
//!
//! The stream is read by an ordered consumer: an ephemeral consumer that
//! the client recreates at the next sequence after a gap, a missed
//! heartbeat or a server restart, so messages arrive once each, in order.
//! It runs on the connection's runtime and hands messages to the source
//! thread over a bounded channel.
//!
//! Invariants:
//! - The offset is the next stream sequence to read (`{"next": N}`), set
//!   past each message as the reader returns it; reopening at it reads
//!   exactly the messages after those returned. Before the first message
//!   of a start position that is not a sequence (`last` with a subject
//!   filter, a `time`), the offset is that start position.
//! - A bounded source stops after the stream's last sequence as of the
//!   job's first start (`end`, kept in the offset, so a restored run ends
//!   at the same message).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_nats::jetstream::consumer::DeliverPolicy;
use async_nats::jetstream::consumer::pull::OrderedConfig;
use bytes::Bytes;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use toml::Table;

use super::connection::{Connection, TESTED_VERSION, check_url, slow_filtered_start};
use weir::connectors::format::{LineParser, Parsing};
use weir::connectors::from_table;
use weir::connectors::metadata::{Fields, Item as MetaItem};
use weir::connectors::source::{BadRecord, MAX_BATCH_BYTES, SourceError, SourceReader};
use weir::connectors::{BuildSource, SourceConnector, SourceType};
use weir::dataflow::Batch;
use weir::time::parse_rfc3339;

/// The registry entry of `type = "nats"` sources.
pub const SOURCE: SourceType = SourceType {
    name: "nats",
    keys: &[
        "url",
        "stream",
        "subject",
        "format",
        "key",
        "timestamp",
        "on_bad_timestamp",
        "schema",
        "message",
        "schema_registry",
        "message_time",
        "start",
        "bounded",
        "metadata",
    ],
    read: NatsSourceConfig::read,
};

/// Where a fresh job starts reading (`start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The first message in the stream (`"first"`, the default).
    First,
    /// The last message in the stream, then what follows (`"last"`).
    Last,
    /// Only messages published after the job started (`"new"`).
    New,
    /// The message with this stream sequence, then what follows
    /// (`{ sequence = N }`).
    Sequence(u64),
    /// The first message stored at or after this time, milliseconds since
    /// the Unix epoch (`{ time = "RFC 3339" }`).
    Time(i64),
}

/// The settings of a NATS JetStream source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsSourceConfig {
    /// The server (`url`, e.g. `nats://127.0.0.1:4222`).
    pub url: String,
    /// The stream read (`stream`).
    pub stream: String,
    /// Only messages on subjects matching this filter (`subject`).
    pub subject: Option<String>,
    /// How a message's payload is read (`lines` or `jsonl`, with its `key`
    /// and `timestamp` fields).
    pub parsing: Parsing,
    /// Each record's event time is the time the stream stored its message
    /// (`message_time = true`).
    pub message_time: bool,
    /// Where a fresh job starts (`start`).
    pub start: Start,
    /// Whether the source ends after the stream's last message as of the
    /// job's start (`bounded`, default false: it keeps running).
    pub bounded: bool,
    /// The fields each record gets of its message's metadata (`metadata`).
    pub metadata: Fields,
}

/// The metadata of a JetStream message, by its name in `metadata`.
const METADATA: [(&str, MetaItem); 4] = [
    ("subject", MetaItem::Topic),
    ("sequence", MetaItem::Offset),
    ("timestamp", MetaItem::Timestamp),
    ("headers", MetaItem::Headers),
];

impl NatsSourceConfig {
    fn read(mut table: Table) -> Result<BuildSource, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            url: Option<String>,
            stream: Option<String>,
            subject: Option<String>,
            message_time: Option<bool>,
            start: Option<toml::Value>,
            bounded: Option<bool>,
            metadata: Option<BTreeMap<String, String>>,
        }
        let parsing = Parsing::take(&mut table)?;
        parsing.refuse_csv("nats")?;
        let raw: Raw = from_table(table)?;
        let start = start_setting(raw.start)?;
        let metadata = Fields::read(raw.metadata, &METADATA)?;
        Ok(Box::new(move |dir: &Path| {
            let Some(url) = raw.url else {
                return Err("`url` is missing; add url = \"nats://127.0.0.1:4222\"".into());
            };
            check_url(&url)?;
            let stream = match raw.stream {
                Some(s) if !s.is_empty() && !s.contains(['.', '*', '>', ' ']) => s,
                Some(s) => {
                    return Err(format!(
                        "`stream` = {s:?} is not a stream name (no dots, spaces, `*` or `>`)"
                    ));
                }
                None => return Err("`stream` is missing; name the JetStream stream to read".into()),
            };
            let parsing = parsing.check(dir)?;
            metadata.check_format(parsing.format)?;
            let message_time = raw.message_time.unwrap_or(false);
            if message_time && parsing.timestamp.is_some() {
                return Err(
                    "`timestamp` and `message_time = true` both set the event time; keep one"
                        .into(),
                );
            }
            Ok(Arc::new(NatsSourceConfig {
                url,
                stream,
                subject: raw.subject.filter(|s| !s.is_empty()),
                parsing,
                message_time,
                start,
                bounded: raw.bounded.unwrap_or(false),
                metadata: metadata.clone(),
            }))
        }))
    }
}

/// The `start` setting: `"first"`, `"last"`, `"new"`, `{ sequence = N }` or
/// `{ time = "RFC 3339" }`.
fn start_setting(value: Option<toml::Value>) -> Result<Start, String> {
    let hint = "use start = \"first\" | \"last\" | \"new\" | { sequence = N } | { time = \"2026-12-01T15:30:00Z\" }";
    let Some(value) = value else {
        return Ok(Start::First);
    };
    match value {
        toml::Value::String(s) => match s.as_str() {
            "first" => Ok(Start::First),
            "last" => Ok(Start::Last),
            "new" => Ok(Start::New),
            _ => Err(format!("`start` = {s:?} is not a start position; {hint}")),
        },
        toml::Value::Table(t) if t.len() == 1 => match t.iter().next().expect("one entry") {
            (k, toml::Value::Integer(n)) if k == "sequence" && *n >= 1 => {
                Ok(Start::Sequence(*n as u64))
            }
            (k, v) if k == "time" => {
                let text = match v {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Datetime(d) => d.to_string(),
                    other => other.to_string(),
                };
                parse_rfc3339(&text).map(Start::Time).ok_or_else(|| {
                    format!("`start.time` = {text:?} is not an RFC 3339 time; {hint}")
                })
            }
            (k, v) => Err(format!(
                "`start` = {{ {k} = {v} }} is not a start position (a sequence is at least 1); {hint}"
            )),
        },
        other => Err(format!(
            "invalid type: {}, expected a start position; {hint}",
            other.type_str()
        )),
    }
}

/// Where the reader resumes: a stream sequence, or a start position that
/// only the server can turn into one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Position {
    Next(u64),
    Last,
    Time(i64),
}

impl Position {
    fn to_json(self, end: Option<u64>) -> Value {
        let mut offset = match self {
            Position::Next(n) => json!({ "next": n }),
            Position::Last => json!({ "start": "last" }),
            Position::Time(ms) => json!({ "start_time": ms }),
        };
        if let Some(end) = end {
            offset["end"] = end.into();
        }
        offset
    }

    fn from_json(offset: &Value) -> Option<(Position, Option<u64>)> {
        let end = offset.get("end").and_then(Value::as_u64);
        let position = if let Some(n) = offset.get("next").and_then(Value::as_u64) {
            Position::Next(n.max(1))
        } else if let Some(ms) = offset.get("start_time").and_then(Value::as_i64) {
            Position::Time(ms)
        } else if offset.get("start").and_then(Value::as_str) == Some("last") {
            Position::Last
        } else {
            return None;
        };
        Some((position, end))
    }

    fn deliver_policy(self) -> Result<DeliverPolicy, String> {
        Ok(match self {
            Position::Next(n) => DeliverPolicy::ByStartSequence { start_sequence: n },
            Position::Last => DeliverPolicy::Last,
            Position::Time(ms) => {
                let at = async_nats::datetime::from_nanos(i128::from(ms) * 1_000_000)
                    .map_err(|e| format!("start time {ms} ms is out of range: {e}"))?;
                DeliverPolicy::ByStartTime { start_time: at }
            }
        })
    }
}

/// What the consumer task hands the reader.
enum Item {
    /// A message: its stream sequence, the time it was stored (ms), its
    /// payload, subject and headers.
    Message {
        seq: u64,
        time: i64,
        payload: Bytes,
        subject: async_nats::Subject,
        headers: Option<async_nats::HeaderMap>,
    },
    /// A bounded source is past its last message.
    End,
}

/// Messages that may wait between the consumer task and the reader.
const CHANNEL_MESSAGES: usize = 8192;

impl SourceConnector for NatsSourceConfig {
    fn ends(&self) -> bool {
        self.bounded
    }

    fn open(&self, id: &str, offset: Option<&Value>) -> Result<Box<dyn SourceReader>, SourceError> {
        let remote = |target: String| {
            let source_id = id.to_owned();
            move |message: String| SourceError::Remote {
                source_id: source_id.clone(),
                target: target.clone(),
                message,
            }
        };
        let connection = Connection::open(&self.url, id).map_err(remote(self.url.clone()))?;
        if let Some(subject) = &self.subject
            && slow_filtered_start(&connection.version)
        {
            tracing::warn!(
                "source `{id}`: nats-server {} at {} reads a stream filtered by a subject (`subject` = {subject:?}) \
                 from a given sequence at a few hundred messages per second, so a restore of this source will crawl; \
                 use nats-server 2.10 or newer (Weir is tested with {TESTED_VERSION})",
                connection.version,
                connection.server,
            );
        }
        let target = format!("stream `{}` at {}", self.stream, connection.server);
        let fail = remote(target.clone());
        let mut stream = connection
            .block_on(connection.jetstream.get_stream(&self.stream))
            .map_err(|e| {
                fail(format!(
                    "cannot open the stream ({e}); create it (e.g. `nats stream add {}`) or fix `stream`",
                    self.stream
                ))
            })?;
        let info = connection
            .block_on(stream.info())
            .map_err(|e| fail(format!("cannot read the stream's state: {e}")))?;
        let last = info.state.last_sequence;
        let (position, end) = match offset {
            Some(offset) => Position::from_json(offset).ok_or_else(|| SourceError::BadOffset {
                source_id: id.to_owned(),
                offset: offset.to_string(),
                message: "it has no `next` sequence or start position".into(),
            })?,
            None => {
                let position = match self.start {
                    Start::First => Position::Next(1),
                    Start::New => Position::Next(last + 1),
                    Start::Sequence(n) => Position::Next(n),
                    Start::Last if self.subject.is_none() => Position::Next(last.max(1)),
                    Start::Last => Position::Last,
                    Start::Time(ms) => Position::Time(ms),
                };
                (position, self.bounded.then_some(last))
            }
        };
        let end = if self.bounded {
            end.or(Some(last))
        } else {
            None
        };
        let mut reader = NatsReader {
            parser: LineParser::new(
                id.to_owned(),
                format!("stream {}", self.stream),
                &self.parsing,
            )
            .counting("sequence"),
            message_time: self.message_time,
            position,
            end,
            finished: false,
            messages: None,
            task: None,
            connection,
            batch_bytes: 0,
            metadata: self.metadata.clone(),
        };
        if let (Some(end), Position::Next(next)) = (end, position)
            && next > end
        {
            reader.finished = true;
            return Ok(Box::new(reader));
        }
        let config = OrderedConfig {
            filter_subject: self.subject.clone().unwrap_or_default(),
            deliver_policy: position.deliver_policy().map_err(&fail)?,
            ..OrderedConfig::default()
        };
        let consumer = reader
            .connection
            .block_on(stream.create_consumer(config))
            .map_err(|e| fail(format!("cannot create a consumer: {e}")))?;
        if end.is_some() && consumer.cached_info().num_pending == 0 {
            reader.finished = true;
            return Ok(Box::new(reader));
        }
        let (tx, rx) = mpsc::channel(CHANNEL_MESSAGES);
        let (source_id, shown) = (id.to_owned(), target);
        let consumed = consume(consumer, end, tx, move |what: &str| {
            format!("source `{source_id}`: {shown}: {what}")
        });
        reader.task = Some(reader.connection.spawn(consumed));
        reader.messages = Some(rx);
        Ok(Box::new(reader))
    }
}

/// Hands the messages of `consumer` to the reader over `tx`, in stream
/// order, until a bounded source passes `end` (then [`Item::End`]) or the
/// reader is gone; `say` prefixes a log line with the source and stream.
async fn consume(
    consumer: async_nats::jetstream::consumer::Consumer<OrderedConfig>,
    end: Option<u64>,
    tx: mpsc::Sender<Item>,
    say: impl Fn(&str) -> String,
) {
    let mut messages = match consumer.messages().await {
        Ok(messages) => messages,
        Err(e) => return tracing::error!("{}", say(&format!("cannot read messages: {e}"))),
    };
    while let Some(message) = messages.next().await {
        let message = match message {
            Ok(message) => message,
            Err(e) => {
                tracing::warn!("{}", say(&format!("{e}; retrying")));
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                continue;
            }
        };
        let (seq, pending, time) = match message.info() {
            Ok(info) => (
                info.stream_sequence,
                info.pending,
                (info.published.unix_timestamp_nanos() / 1_000_000) as i64,
            ),
            Err(e) => {
                tracing::warn!(
                    "{}",
                    say(&format!("a message without JetStream metadata: {e}"))
                );
                continue;
            }
        };
        if end.is_some_and(|end| seq > end) {
            let _ = tx.send(Item::End).await;
            return;
        }
        let message = message.message;
        let (payload, subject, headers) = (message.payload, message.subject, message.headers);
        let item = Item::Message {
            seq,
            time,
            payload,
            subject,
            headers,
        };
        if tx.send(item).await.is_err() {
            return;
        }
        if end.is_some_and(|end| seq >= end || pending == 0) {
            let _ = tx.send(Item::End).await;
            return;
        }
    }
}

/// A reader of a JetStream stream.
struct NatsReader {
    parser: LineParser,
    message_time: bool,
    position: Position,
    end: Option<u64>,
    /// A bounded source returned its last message.
    finished: bool,
    messages: Option<mpsc::Receiver<Item>>,
    task: Option<tokio::task::JoinHandle<()>>,
    connection: Connection,
    /// Starting capacity of the next batch's data (the last one's size and
    /// an eighth).
    batch_bytes: usize,
    /// The fields each record gets of its message's metadata.
    metadata: Fields,
}

/// The headers of a message, by name (each name's values in order).
fn sorted(headers: Option<&async_nats::HeaderMap>) -> Vec<(&str, Option<&[u8]>)> {
    let mut all: Vec<(&str, &Vec<async_nats::HeaderValue>)> = (headers.into_iter())
        .flat_map(|h| h.iter())
        .map(|(name, values)| (name.as_ref(), values))
        .collect();
    all.sort_by_key(|(name, _)| *name);
    (all.into_iter())
        .flat_map(|(name, values)| values.iter().map(move |v| (name, Some(v.as_ref()))))
        .collect()
}

impl SourceReader for NatsReader {
    /// Returns what has arrived, up to `max` records (an empty batch when
    /// nothing has: the source thread asks again shortly).
    fn read_batch(&mut self, max: usize) -> Result<Option<Batch>, SourceError> {
        let mut batch = Batch::with_capacity(max.min(4096), self.batch_bytes);
        while let Some(messages) = self.messages.as_mut()
            && !self.finished
            && batch.len() < max
            && batch.data_bytes() < MAX_BATCH_BYTES
        {
            match messages.try_recv() {
                Ok(Item::Message {
                    seq,
                    time,
                    payload,
                    subject,
                    headers,
                }) => {
                    let payload = payload.strip_suffix(b"\n").unwrap_or(&payload);
                    let members = &mut self.parser.members;
                    for (item, field) in self.metadata.iter() {
                        match item {
                            MetaItem::Topic => members.text(field, Some(subject.as_bytes())),
                            MetaItem::Offset => members.int(field, i64::try_from(seq).ok()),
                            MetaItem::Timestamp => members.int(field, Some(time)),
                            _ => members.headers(field, sorted(headers.as_ref())),
                        }
                    }
                    let time = self.message_time.then_some(time);
                    self.parser.add(&mut batch, payload, seq, time);
                    if let Some(failure) = self.parser.take_failure() {
                        return Err(failure);
                    }
                    self.position = Position::Next(seq + 1);
                }
                Ok(Item::End) => self.finished = true,
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    return Err(SourceError::Remote {
                        source_id: self.parser.id.clone(),
                        target: format!("{} at {}", self.parser.path, self.connection.server),
                        message: "the consumer stopped (see the error logged before)".into(),
                    });
                }
            }
        }
        self.batch_bytes = batch.data_bytes() + batch.data_bytes() / 8;
        Ok(if batch.is_empty() && self.finished {
            None
        } else {
            Some(batch)
        })
    }

    fn offset(&self) -> Value {
        self.position.to_json(self.end)
    }

    fn place(&self) -> Option<String> {
        self.parser.place()
    }

    fn skipped(&self) -> u64 {
        self.parser.skipped
    }

    fn take_bad(&mut self) -> Vec<BadRecord> {
        std::mem::take(&mut self.parser.bad)
    }
}

impl Drop for NatsReader {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir::connectors::format::Format;

    fn parse(text: &str) -> Result<NatsSourceConfig, String> {
        SOURCE.settings(text)
    }

    #[test]
    fn settings_have_defaults_and_start_positions() {
        let c = parse("url = \"nats://127.0.0.1:4222\"\nstream = \"W\"").unwrap();
        assert_eq!(
            (c.start, c.bounded, c.parsing.format),
            (Start::First, false, Format::Lines)
        );
        let start = |s: &str| {
            parse(&format!("url = \"h:1\"\nstream = \"W\"\nstart = {s}")).map(|c| c.start)
        };
        assert_eq!(start("\"last\""), Ok(Start::Last));
        assert_eq!(start("\"new\""), Ok(Start::New));
        assert_eq!(start("{ sequence = 5 }"), Ok(Start::Sequence(5)));
        assert_eq!(
            start("{ time = \"1970-01-01T00:00:01Z\" }"),
            Ok(Start::Time(1000))
        );
        assert_eq!(
            start("{ time = 1970-01-01T00:00:02Z }"),
            Ok(Start::Time(2000))
        );
        for bad in [
            "\"middle\"",
            "{ sequence = 0 }",
            "{ time = \"yesterday\" }",
            "3",
        ] {
            let err = start(bad).unwrap_err();
            assert!(err.contains("start"), "{bad}: {err}");
        }
    }

    #[test]
    fn bad_settings_say_what_to_fix() {
        let cases = [
            ("stream = \"W\"", "`url` is missing"),
            ("url = \"h:1\"", "`stream` is missing"),
            ("url = \"h:1\"\nstream = \"a.b\"", "not a stream name"),
            ("url = \"http://h:1\"\nstream = \"W\"", "url"),
            ("url = \"h:1\"\nstream = \"W\"\nformat = \"csv\"", "csv"),
            (
                "url = \"h:1\"\nstream = \"W\"\nformat = \"jsonl\"\ntimestamp = \"t\"\nmessage_time = true",
                "keep one",
            ),
            (
                "url = \"h:1\"\nstream = \"W\"\ntimestamp = \"t\"",
                "needs format",
            ),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn offsets_round_trip() {
        for (p, end) in [
            (Position::Next(7), None),
            (Position::Next(1), Some(9)),
            (Position::Last, Some(3)),
            (Position::Time(-5), None),
        ] {
            assert_eq!(Position::from_json(&p.to_json(end)), Some((p, end)));
        }
        assert_eq!(Position::from_json(&json!({"byte": 3})), None);
    }
}
