//! The Kafka source (`type = "kafka"` in `[[source]]`): the messages of
//! one or more topics, all their partitions, each message's value one
//! record in the format `lines` or `jsonl`.
//!
//! The source assigns itself every partition (no consumer-group
//! rebalancing: Weir's checkpoints own the offsets, as in Flink) and reads
//! them with `isolation.level = read_committed`, so records of aborted or
//! open transactions never enter the job. A record's key is the message's
//! key (or a `key` field of a jsonl value), its event time the message's
//! timestamp (or a `timestamp` field).
//!
//! Invariants:
//! - The offset lists every partition with the next offset to read
//!   (`{"partitions": [{"topic", "partition", "next", ...}]}`), set past
//!   each message as the reader returns it; reopening at it reads exactly
//!   the messages after those returned, partition by partition.
//! - A bounded source stops at each partition's high-water mark as of the
//!   job's first start (`end`, kept in the offset, so a restored run ends
//!   at the same messages).
//! - The watermark follows the least, over the partitions that are neither
//!   finished nor idle, of each partition's highest timestamp
//!   ([`SourceReader::watermark_timestamp`]): a partition behind in event
//!   time holds it back, one without messages for `idle_timeout` does not.
//! - With a `group`, the offsets of each checkpoint taken are committed to
//!   that consumer group for monitoring (lag); they are never read back.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use serde::Deserialize;
use serde_json::Value;
use toml::Table;

use super::client::{ClientSettings, Context, TIMEOUT, partitions};
use super::purge::Purger;
use super::reader::{KafkaReader, Partition};
use super::repartition::Upstreams;
use weir::connectors::format::{Format, LineParser, Parsing};
use weir::connectors::from_table;
use weir::connectors::metadata::{Fields, Item};
use weir::connectors::source::{SourceError, SourceReader};
use weir::connectors::{BuildSource, SourceConnector, SourceType};
use weir::time::parse_rfc3339;

/// The registry entry of `type = "kafka"` sources.
pub const SOURCE: SourceType = SourceType {
    name: "kafka",
    keys: &[
        "brokers",
        "topic",
        "group",
        "start",
        "bounded",
        "partitions",
        "format",
        "key",
        "timestamp",
        "on_bad_timestamp",
        "schema",
        "message",
        "schema_registry",
        "key_format",
        "key_schema",
        "key_message",
        "upstream_tasks",
        "metadata",
        "properties",
    ],
    read: KafkaSourceConfig::read,
};

/// Where a fresh job starts reading each partition (`start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The oldest message kept (`"earliest"`, the default).
    Earliest,
    /// Only messages written after the job started (`"latest"`).
    Latest,
    /// The first message whose timestamp is at or after this time,
    /// milliseconds since the Unix epoch (`{ timestamp = "RFC 3339" }` or
    /// `{ timestamp = MILLIS }`).
    Timestamp(i64),
}

/// The settings of a Kafka source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaSourceConfig {
    /// The cluster and client properties.
    pub client: ClientSettings,
    /// The topics read (`topic`, comma-separated for several).
    pub topics: Vec<String>,
    /// The consumer group the checkpointed offsets are committed to for
    /// monitoring (`group`).
    pub group: Option<String>,
    /// Where a fresh job starts (`start`).
    pub start: Start,
    /// Whether the source ends at the high-water marks as of the job's
    /// start (`bounded`, default false).
    pub bounded: bool,
    /// The partition numbers read of every topic (`partitions`); all
    /// when absent. Worker mode gives each task its own.
    pub partitions: Option<Vec<i32>>,
    /// The number of upstream tasks writing the repartition topic read
    /// (`upstream_tasks`, set by worker mode): their control records set
    /// the watermark and end the input ([`super::repartition`]).
    pub upstream_tasks: Option<u32>,
    /// How a message's value is read (`lines` or `jsonl`); with `jsonl`,
    /// `key` and `timestamp` name fields that replace the message's key and
    /// timestamp.
    pub parsing: Parsing,
    /// The fields each record gets of its message's metadata (`metadata`).
    pub metadata: Fields,
}

/// The metadata of a Kafka message, by its name in `metadata`.
const METADATA: [(&str, Item); 6] = [
    ("topic", Item::Topic),
    ("partition", Item::Partition),
    ("offset", Item::Offset),
    ("timestamp", Item::Timestamp),
    ("key", Item::Key),
    ("headers", Item::Headers),
];

impl KafkaSourceConfig {
    fn read(mut table: Table) -> Result<BuildSource, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            brokers: Option<String>,
            topic: Option<String>,
            group: Option<String>,
            start: Option<toml::Value>,
            bounded: Option<bool>,
            partitions: Option<Vec<i32>>,
            upstream_tasks: Option<u32>,
            metadata: Option<BTreeMap<String, String>>,
            properties: Option<Table>,
        }
        let parsing = Parsing::take(&mut table)?;
        parsing.refuse_csv("kafka")?;
        let raw: Raw = from_table(table)?;
        let start = start_setting(raw.start)?;
        let partitions = match raw.partitions {
            Some(list) if list.is_empty() || list.iter().any(|&p| p < 0) => {
                return Err(format!(
                    "`partitions` = {list:?} must list partition numbers (0 and up); remove it to read every partition"
                ));
            }
            Some(mut list) => {
                list.sort_unstable();
                list.dedup();
                Some(list)
            }
            None => None,
        };
        if raw.upstream_tasks == Some(0) {
            return Err("`upstream_tasks` must be 1 or more".into());
        }
        if raw.upstream_tasks.is_some() && raw.bounded.is_some() {
            return Err(
                "`upstream_tasks` reads a repartition topic, which ends when every upstream task's input ended: remove `bounded`".into(),
            );
        }
        let metadata = Fields::read(raw.metadata, &METADATA)?;
        if !metadata.is_empty() && raw.upstream_tasks.is_some() {
            return Err("`upstream_tasks` reads a repartition topic, whose records cross as they are: remove `metadata`".into());
        }
        Ok(Box::new(move |dir: &Path| {
            let parsing = parsing.check(dir)?;
            metadata.check_format(parsing.format)?;
            let fields = matches!(
                parsing.format,
                Format::Jsonl | Format::Avro | Format::Protobuf | Format::Json
            );
            if parsing.key.is_some() && !fields {
                return Err(
                    "`key` names a field of a jsonl, avro, protobuf or json value; set the format or remove `key` (the message key is the record key)".into(),
                );
            }
            let client = ClientSettings::read(raw.brokers, raw.properties)?;
            let Some(topic) = raw.topic else {
                return Err("`topic` is missing; name the topic to read (several: \"a,b\")".into());
            };
            let topics: Vec<String> = topic.split(',').map(|t| t.trim().to_owned()).collect();
            for t in &topics {
                check_topic(t).map_err(|m| format!("`topic` = {topic:?}: {m}"))?;
            }
            Ok(Arc::new(KafkaSourceConfig {
                client,
                topics,
                group: raw.group.filter(|g| !g.is_empty()),
                start,
                bounded: raw.bounded.unwrap_or(false),
                partitions: partitions.clone(),
                upstream_tasks: raw.upstream_tasks,
                parsing,
                metadata: metadata.clone(),
            }))
        }))
    }
}

/// Checks a topic name as Kafka does: 1 to 249 of `[a-zA-Z0-9._-]`.
pub(super) fn check_topic(topic: &str) -> Result<(), String> {
    if topic.is_empty() || topic.len() > 249 || topic == "." || topic == ".." {
        return Err(format!(
            "{topic:?} is not a topic name (1 to 249 characters)"
        ));
    }
    match topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        Some(c) => Err(format!(
            "{topic:?} holds {c:?}; a topic name has only letters, digits, `.`, `_` and `-`"
        )),
        None => Ok(()),
    }
}

/// The `start` setting: `"earliest"`, `"latest"` or `{ timestamp = … }`.
fn start_setting(value: Option<toml::Value>) -> Result<Start, String> {
    let hint = "use start = \"earliest\" | \"latest\" | { timestamp = \"2026-12-01T15:30:00Z\" }";
    let Some(value) = value else {
        return Ok(Start::Earliest);
    };
    match value {
        toml::Value::String(s) => match s.as_str() {
            "earliest" => Ok(Start::Earliest),
            "latest" => Ok(Start::Latest),
            _ => Err(format!("`start` = {s:?} is not a start position; {hint}")),
        },
        toml::Value::Table(t) if t.len() == 1 && t.contains_key("timestamp") => {
            match &t["timestamp"] {
                toml::Value::Integer(ms) => Ok(Start::Timestamp(*ms)),
                v => {
                    let text = match v {
                        toml::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    parse_rfc3339(&text).map(Start::Timestamp).ok_or_else(|| {
                        format!("`start.timestamp` = {text:?} is not an RFC 3339 time or milliseconds; {hint}")
                    })
                }
            }
        }
        toml::Value::Table(t) => Err(format!("`start` = {t} is not a start position; {hint}")),
        other => Err(format!(
            "invalid type: {}, expected a start position; {hint}",
            other.type_str()
        )),
    }
}

/// A partition as an offset lists it: where to resume and what the
/// partition's [`Partition`] keeps across a restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Saved {
    pub(super) topic: String,
    pub(super) partition: i32,
    pub(super) next: i64,
    end: Option<i64>,
    max_timestamp: Option<i64>,
    skip_before: Option<i64>,
}

impl Saved {
    fn fresh(
        topic: &str,
        partition: i32,
        next: i64,
        end: Option<i64>,
        skip_before: Option<i64>,
    ) -> Saved {
        Saved {
            topic: topic.to_owned(),
            partition,
            next,
            end,
            max_timestamp: None,
            skip_before,
        }
    }
}

/// The partitions an offset lists; `None` when it is not a Kafka source's.
pub(super) fn from_offset(offset: &Value) -> Option<Vec<Saved>> {
    offset
        .get("partitions")?
        .as_array()?
        .iter()
        .map(|p| {
            Some(Saved {
                topic: p.get("topic")?.as_str()?.to_owned(),
                partition: i32::try_from(p.get("partition")?.as_i64()?).ok()?,
                next: p.get("next")?.as_i64()?,
                end: p.get("end").and_then(Value::as_i64),
                max_timestamp: p.get("max_timestamp").and_then(Value::as_i64),
                skip_before: p.get("skip_before").and_then(Value::as_i64),
            })
        })
        .collect()
}

impl SourceConnector for KafkaSourceConfig {
    fn ends(&self) -> bool {
        self.bounded || self.upstream_tasks.is_some()
    }

    fn open(&self, id: &str, offset: Option<&Value>) -> Result<Box<dyn SourceReader>, SourceError> {
        let remote = |message: String| SourceError::Remote {
            source_id: id.to_owned(),
            target: format!(
                "topic `{}` at {}",
                self.topics.join(","),
                self.client.brokers
            ),
            message,
        };
        let consumer = self.consumer(id).map_err(remote)?;
        let checkpointed = match offset {
            None => None,
            Some(offset) => Some(from_offset(offset).ok_or_else(|| SourceError::BadOffset {
                source_id: id.to_owned(),
                offset: offset.to_string(),
                message: "it lists no partitions with their next offsets".into(),
            })?),
        };
        let read = self
            .positions(&consumer, checkpointed.as_deref())
            .map_err(remote)?;
        if let Some(c) = &checkpointed
            && let Some(gone) = c.iter().find(|s| {
                !read
                    .iter()
                    .any(|r| r.topic == s.topic && r.id == s.partition)
            })
        {
            return Err(SourceError::BadOffset {
                source_id: id.to_owned(),
                offset: format!("partition {} of topic `{}`", gone.partition, gone.topic),
                message: "the topic no longer has that partition".into(),
            });
        }
        let upstreams = match (self.upstream_tasks, offset) {
            (None, _) => None,
            (Some(count), None) => Some(Upstreams::new(count)),
            (Some(count), Some(offset)) => {
                let kept = offset
                    .get("upstreams")
                    .cloned()
                    .unwrap_or(Value::Array(vec![]));
                Some(
                    Upstreams::from_json(count, &kept).ok_or_else(|| SourceError::BadOffset {
                        source_id: id.to_owned(),
                        offset: kept.to_string(),
                        message: format!("it is not what {count} upstream tasks sent"),
                    })?,
                )
            }
        };
        let purger = match upstreams {
            Some(_) => Some(Purger::start(&self.client, id).map_err(remote)?),
            None => None,
        };
        assign(&consumer, &read).map_err(remote)?;
        consumer.context().opened();
        let mut parser = LineParser::new(
            id.to_owned(),
            format!("topic {}", self.topics.join(",")),
            &self.parsing,
        );
        parser.key_member = self.metadata.field(Item::Key).map(str::to_owned);
        Ok(Box::new(KafkaReader {
            parser,
            consumer,
            partitions: read,
            group: self.group.is_some(),
            brokers: self.client.brokers.clone(),
            batch_bytes: 0,
            upstreams,
            signalled: false,
            purger,
            metadata: self.metadata.clone(),
        }))
    }
}

/// Assigns the consumer the partitions of `read` it has left to read, each
/// at its next offset.
fn assign(consumer: &BaseConsumer<Context>, read: &[Partition]) -> Result<(), String> {
    let mut assignment = TopicPartitionList::new();
    for p in read.iter().filter(|p| !p.done) {
        assignment
            .add_partition_offset(&p.topic, p.id, Offset::Offset(p.next))
            .map_err(|e| format!("cannot assign partition {}: {e}", p.id))?;
    }
    consumer
        .assign(&assignment)
        .map_err(|e| format!("cannot assign the partitions: {e}"))
}

impl KafkaSourceConfig {
    /// The consumer of source `id`: offsets are the checkpoints' to keep,
    /// never committed by the client, and only committed transactions read.
    fn consumer(&self, id: &str) -> Result<BaseConsumer<Context>, String> {
        let mut own = vec![
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
            ("enable.partition.eof", "true"),
            ("isolation.level", "read_committed"),
            ("auto.offset.reset", "error"),
            // librdkafka waits this long (1 s by default) before fetching
            // again once its queue is full; the source drains the queue
            // every few milliseconds, so a short wait keeps fetches going.
            ("fetch.queue.backoff.ms", "10"),
        ];
        // librdkafka wants a group even to assign partitions by hand; one
        // of the source's own is never joined, and nothing is committed to it.
        let private = format!("weir-source-{id}");
        own.push(("group.id", self.group.as_deref().unwrap_or(&private)));
        self.client
            .config(id, &own)
            .create_with_context(Context::new(format!("source `{id}`")))
            .map_err(|e| format!("cannot create the Kafka client: {e}"))
    }

    /// Where to read every partition of the topics: where `checkpointed`
    /// left it, or (a fresh start, or a partition added since) where
    /// `start` says.
    fn positions(
        &self,
        consumer: &BaseConsumer<Context>,
        checkpointed: Option<&[Saved]>,
    ) -> Result<Vec<Partition>, String> {
        let now = Instant::now();
        let mut read = Vec::new();
        for topic in &self.topics {
            let all = partitions(consumer, &self.client.brokers, topic)?;
            let read_here: Vec<i32> = match &self.partitions {
                None => all,
                Some(wanted) => {
                    if let Some(missing) = wanted.iter().find(|p| !all.contains(p)) {
                        return Err(format!(
                            "topic `{topic}` has {} partition(s), 0 to {}; `partitions` names {missing}",
                            all.len(),
                            all.len().saturating_sub(1)
                        ));
                    }
                    wanted.clone()
                }
            };
            for pid in read_here {
                let saved = checkpointed.map(|c| {
                    c.iter()
                        .find(|s| s.topic == *topic && s.partition == pid)
                        .cloned()
                });
                let saved = match saved {
                    Some(Some(saved)) => saved,
                    // A partition added since the job started: all of it
                    // is new (a bounded source reads none of it).
                    Some(None) => {
                        let (low, _) = self.watermarks(consumer, topic, pid)?;
                        Saved::fresh(topic, pid, low, self.bounded.then_some(low), None)
                    }
                    None => self.start_of(consumer, topic, pid)?,
                };
                read.push(Partition {
                    topic: topic.clone(),
                    id: pid,
                    next: saved.next,
                    end: saved.end,
                    max_timestamp: saved.max_timestamp,
                    last_message_at: now,
                    done: saved.end.is_some_and(|end| saved.next >= end),
                    skip_before: saved.skip_before,
                    in_batch: Default::default(),
                });
            }
        }
        Ok(read)
    }

    /// Where a fresh start reads partition `pid` of `topic`: as `start`
    /// says, up to the high-water mark of now for a bounded source.
    fn start_of(
        &self,
        consumer: &BaseConsumer<Context>,
        topic: &str,
        pid: i32,
    ) -> Result<Saved, String> {
        let (low, high) = self.watermarks(consumer, topic, pid)?;
        let end = self.bounded.then_some(high);
        Ok(match self.start {
            Start::Earliest => Saved::fresh(topic, pid, low, end, None),
            Start::Latest => Saved::fresh(topic, pid, high, end, None),
            Start::Timestamp(ms) => match self.offset_at(consumer, topic, pid, ms)? {
                Some(next) => Saved::fresh(topic, pid, next, end, None),
                None => Saved::fresh(topic, pid, low, end, Some(ms)),
            },
        })
    }

    /// The low and high offsets of a partition.
    fn watermarks(
        &self,
        consumer: &BaseConsumer<Context>,
        topic: &str,
        partition: i32,
    ) -> Result<(i64, i64), String> {
        consumer
            .fetch_watermarks(topic, partition, TIMEOUT)
            .map_err(|e| format!("cannot read the offsets of partition {partition}: {e}"))
    }

    /// The first offset of a partition whose timestamp is at least `ms`,
    /// as the broker finds it; `None` when it finds none (no such message
    /// yet, or a broker that cannot look timestamps up, such as
    /// librdkafka's mock): the reader then starts at the partition's
    /// beginning and skips the older messages itself, which picks the
    /// same first message.
    fn offset_at(
        &self,
        consumer: &BaseConsumer<Context>,
        topic: &str,
        partition: i32,
        ms: i64,
    ) -> Result<Option<i64>, String> {
        let mut query = TopicPartitionList::new();
        query
            .add_partition_offset(topic, partition, Offset::Offset(ms))
            .map_err(|e| e.to_string())?;
        let found = consumer
            .offsets_for_times(query, TIMEOUT)
            .map_err(|e| format!("cannot look up the offset at time {ms} ms: {e}"))?;
        Ok(
            match found.find_partition(topic, partition).map(|e| e.offset()) {
                Some(Offset::Offset(n)) if n >= 0 => Some(n),
                _ => None,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::reader::least_active;
    use serde_json::json;
    use std::time::Duration;

    fn parse(text: &str) -> Result<KafkaSourceConfig, String> {
        SOURCE.settings(text)
    }

    #[test]
    fn partitions_are_numbers_listed_once() {
        let c = parse("brokers = \"h:9092\"\ntopic = \"a\"\npartitions = [2, 0, 2]").unwrap();
        assert_eq!(c.partitions, Some(vec![0, 2]));
        assert_eq!(
            parse("brokers = \"h:9092\"\ntopic = \"a\"")
                .unwrap()
                .partitions,
            None
        );
        for bad in ["[]", "[-1]"] {
            let err = parse(&format!(
                "brokers = \"h:9092\"\ntopic = \"a\"\npartitions = {bad}"
            ))
            .unwrap_err();
            assert!(err.contains("must list partition numbers"), "{err}");
        }
    }

    #[test]
    fn settings_have_defaults_and_start_positions() {
        let c = parse("brokers = \"h:9092\"\ntopic = \"a, b\"").unwrap();
        assert_eq!(c.topics, ["a", "b"]);
        assert_eq!(
            (c.start, c.bounded, c.parsing.format, c.group),
            (Start::Earliest, false, Format::Lines, None)
        );
        let start = |s: &str| {
            parse(&format!("brokers = \"h:1\"\ntopic = \"t\"\nstart = {s}")).map(|c| c.start)
        };
        assert_eq!(start("\"latest\""), Ok(Start::Latest));
        assert_eq!(start("{ timestamp = 1500 }"), Ok(Start::Timestamp(1500)));
        assert_eq!(
            start("{ timestamp = \"1970-01-01T00:00:02Z\" }"),
            Ok(Start::Timestamp(2000))
        );
        assert_eq!(
            start("{ timestamp = 1970-01-01T00:00:03Z }"),
            Ok(Start::Timestamp(3000))
        );
        for bad in ["\"first\"", "{ time = 5 }", "{ timestamp = \"soon\" }", "3"] {
            let err = start(bad).unwrap_err();
            assert!(err.contains("start"), "{bad}: {err}");
        }
    }

    #[test]
    fn bad_settings_say_what_to_fix() {
        let cases = [
            ("topic = \"t\"", "`brokers` is missing"),
            ("brokers = \"h:1\"", "`topic` is missing"),
            ("brokers = \"h:1\"\ntopic = \"a b\"", "holds ' '"),
            ("brokers = \"h:1\"\ntopic = \"a,\"", "not a topic name"),
            ("brokers = \"h:1\"\ntopic = \"t\"\nformat = \"csv\"", "csv"),
            ("brokers = \"h:1\"\ntopic = \"t\"\nkey = \"k\"", "jsonl"),
            (
                "brokers = \"h:1\"\ntopic = \"t\"\ntimestamp = \"t\"",
                "needs format",
            ),
            (
                "brokers = \"h:1\"\ntopic = \"t\"\nupstream_tasks = 0",
                "`upstream_tasks` must be 1 or more",
            ),
            (
                "brokers = \"h:1\"\ntopic = \"t\"\nupstream_tasks = 2\nbounded = true",
                "remove `bounded`",
            ),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    fn partition(max_timestamp: Option<i64>, idle_for: Duration, done: bool) -> Partition {
        Partition {
            topic: "t".into(),
            id: 0,
            next: 0,
            end: None,
            max_timestamp,
            last_message_at: Instant::now() - idle_for,
            done,
            skip_before: None,
            in_batch: Default::default(),
        }
    }

    #[test]
    fn the_watermark_follows_the_slowest_active_partition() {
        let (now, busy, quiet) = (Instant::now(), Duration::ZERO, Duration::from_secs(5));
        let idle = Some(Duration::from_secs(1));
        let parts = [
            partition(Some(100), busy, false),
            partition(Some(40), busy, false),
        ];
        assert_eq!(least_active(&parts, now, idle), Some(Some(40)));
        // A partition without messages for `idle_timeout` is left out...
        let parts = [
            partition(Some(100), busy, false),
            partition(Some(40), quiet, false),
        ];
        assert_eq!(least_active(&parts, now, idle), Some(Some(100)));
        // ...but only with an `idle_timeout`.
        assert_eq!(least_active(&parts, now, None), Some(Some(40)));
        // One that has given no timestamp yet holds the watermark back.
        let parts = [
            partition(Some(100), busy, false),
            partition(None, busy, false),
        ];
        assert_eq!(least_active(&parts, now, idle), Some(None));
        // A finished partition does not; with none active, the caller
        // uses the batch.
        let parts = [
            partition(Some(100), busy, false),
            partition(None, busy, true),
        ];
        assert_eq!(least_active(&parts, now, idle), Some(Some(100)));
        assert_eq!(least_active(&parts[1..], now, idle), None);
    }

    #[test]
    fn offsets_round_trip() {
        let p = Partition {
            topic: "t".into(),
            id: 3,
            next: 17,
            end: Some(20),
            max_timestamp: Some(-4),
            last_message_at: Instant::now(),
            done: false,
            skip_before: Some(9),
            in_batch: Default::default(),
        };
        let offset = json!({ "partitions": [p.to_json()] });
        let saved = Saved {
            max_timestamp: Some(-4),
            ..Saved::fresh("t", 3, 17, Some(20), Some(9))
        };
        assert_eq!(from_offset(&offset), Some(vec![saved]));
        assert_eq!(from_offset(&json!({ "next": 3 })), None);
        assert_eq!(
            from_offset(&json!({ "partitions": [{ "topic": "t" }] })),
            None
        );
    }
}
