//! Reading a Kafka source's partitions ([`KafkaReader`]): batches of
//! messages from each assigned partition, the offset that lists where each
//! one stands, and the watermark of the slowest active partition.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{Value, json};
use weir::connectors::format::LineParser;
use weir::connectors::metadata::{Fields, Item, Members};
use weir::connectors::source::{BadRecord, MAX_BATCH_BYTES, SourceError, SourceReader};
use weir::dataflow::Batch;
use weir::dataflow::batch::Change;
use weir::dataflow::provenance::NumberRange;

use super::client::Context;
use super::purge::Purger;
use super::repartition::{CHANGE_HEADER, HEADER, Upstreams};
use super::source::from_offset;

/// One partition the reader reads.
#[derive(Debug)]
pub(super) struct Partition {
    pub(super) topic: String,
    pub(super) id: i32,
    /// The next offset to read.
    pub(super) next: i64,
    /// A bounded source reads up to this offset (exclusive).
    pub(super) end: Option<i64>,
    /// Highest event time of the records read from the partition (the
    /// messages' timestamps, or the `timestamp` field's).
    pub(super) max_timestamp: Option<i64>,
    /// When the partition last gave a message (or was opened).
    pub(super) last_message_at: Instant,
    /// A bounded partition read to its end.
    pub(super) done: bool,
    /// A fresh start at a timestamp: messages older than this are skipped
    /// until the first that is not (then `None`).
    pub(super) skip_before: Option<i64>,
    /// The offsets of the partition's records in the last batch.
    pub(super) in_batch: NumberRange,
}

impl Partition {
    pub(super) fn to_json(&self) -> Value {
        let mut p = json!({ "topic": self.topic, "partition": self.id, "next": self.next });
        if let Some(end) = self.end {
            p["end"] = end.into();
        }
        if let Some(t) = self.max_timestamp {
            p["max_timestamp"] = t.into();
        }
        if let Some(t) = self.skip_before {
            p["skip_before"] = t.into();
        }
        p
    }
}

/// A reader of a Kafka topic's partitions.
pub(super) struct KafkaReader {
    pub(super) parser: LineParser,
    pub(super) consumer: BaseConsumer<Context>,
    pub(super) partitions: Vec<Partition>,
    pub(super) group: bool,
    pub(super) brokers: String,
    /// Starting capacity of the next batch's data.
    pub(super) batch_bytes: usize,
    /// For a repartition topic: what its upstream tasks' control records
    /// said (kept in the offset).
    pub(super) upstreams: Option<Upstreams>,
    /// Whether the last read met a control record.
    pub(super) signalled: bool,
    /// For a repartition topic: deletes what no restore will read again.
    pub(super) purger: Option<Purger>,
    /// The fields each record gets of its message's metadata.
    pub(super) metadata: Fields,
}

impl KafkaReader {
    pub(super) fn error(&self, message: String) -> SourceError {
        SourceError::Remote {
            source_id: self.parser.id.clone(),
            target: format!("{} at {}", self.parser.path, self.brokers),
            message,
        }
    }

    /// Marks the bounded partitions whose fetch position reached their end
    /// as done (after an end-of-partition event: the position is past any
    /// transaction markers there, which no message reports).
    ///
    /// A repartition topic whose upstream tasks all ended is read to that
    /// position, past the commit markers of their last transactions.
    pub(super) fn check_ends(&mut self) -> Result<(), SourceError> {
        let position = self
            .consumer
            .position()
            .map_err(|e| self.error(format!("cannot read the positions: {e}")))?;
        let mut finished = TopicPartitionList::new();
        let ended = self.upstreams.as_ref().is_some_and(Upstreams::ended);
        for p in self.partitions.iter_mut().filter(|p| !p.done && ended) {
            if let Some(Offset::Offset(at)) =
                position.find_partition(&p.topic, p.id).map(|e| e.offset())
            {
                p.next = p.next.max(at);
                p.done = true;
                finished.add_partition(&p.topic, p.id);
            }
        }
        for p in self.partitions.iter_mut().filter(|p| !p.done) {
            let (Some(end), Some(Offset::Offset(at))) = (
                p.end,
                position.find_partition(&p.topic, p.id).map(|e| e.offset()),
            ) else {
                continue;
            };
            if at >= end {
                p.done = true;
                finished.add_partition(&p.topic, p.id);
            }
        }
        if finished.count() > 0 {
            // Fetching stops; nothing past the end is read.
            let _ = self.consumer.pause(&finished);
        }
        Ok(())
    }

    /// Whether the input ended: every partition of a bounded source read
    /// to its end, or, of a repartition topic, every upstream task ended
    /// and its partition read past their last commit markers.
    pub(super) fn finished(&self) -> bool {
        let read = self.partitions.iter().all(|p| p.done);
        match &self.upstreams {
            Some(upstreams) => upstreams.ended() && read,
            None => read,
        }
    }
}

impl SourceReader for KafkaReader {
    /// Returns what has arrived, up to `max` records (an empty batch when
    /// nothing has: the source thread asks again shortly).
    fn read_batch(&mut self, max: usize) -> Result<Option<Batch>, SourceError> {
        let mut batch = Batch::with_capacity(max.min(4096), self.batch_bytes);
        // One clock reading per batch: a batch is read in microseconds.
        let now = Instant::now();
        for p in &mut self.partitions {
            p.in_batch.clear();
        }
        self.signalled = false;
        while !self.finished() && batch.len() < max && batch.data_bytes() < MAX_BATCH_BYTES {
            let message = match self.consumer.poll(Duration::ZERO) {
                None => break,
                Some(Ok(message)) => message,
                Some(Err(KafkaError::PartitionEOF(_))) => {
                    self.check_ends()?;
                    continue;
                }
                Some(Err(e)) if matches!(e.rdkafka_error_code(), Some(c) if is_transient(c)) => {
                    tracing::warn!("source `{}`: kafka: {e}; retrying", self.parser.id);
                    break;
                }
                Some(Err(e)) => return Err(self.error(format!("reading failed: {e}"))),
            };
            let offset = message.offset();
            let (topic, id) = (message.topic(), message.partition());
            let found = self
                .partitions
                .iter_mut()
                .find(|p| p.id == id && p.topic == topic);
            let Some(partition) = found else {
                continue;
            };
            if partition.done || partition.end.is_some_and(|end| offset >= end) {
                continue;
            }
            partition.next = offset + 1;
            partition.last_message_at = now;
            if let Some(upstreams) = &mut self.upstreams
                && is_control(&message)
            {
                let value = message.payload().unwrap_or_default();
                upstreams.hear(value).map_err(|m| SourceError::Remote {
                    source_id: self.parser.id.clone(),
                    target: format!("{} at {}", self.parser.path, self.brokers),
                    message: format!("partition {id} offset {offset}: {m}"),
                })?;
                self.signalled = true;
                continue;
            }
            let time = message.timestamp().to_millis();
            if let Some(before) = partition.skip_before {
                if time.is_some_and(|t| t < before) {
                    continue;
                }
                partition.skip_before = None;
            }
            let done = partition.end.is_some_and(|end| partition.next >= end);
            partition.done = done;
            let value = message.payload().unwrap_or_default();
            let added = match self.upstreams {
                // A stage's records cross exactly as they were: key, value,
                // time, change kind.
                Some(_) => {
                    batch.push_change(change_of(&message), message.key(), value, time);
                    true
                }
                None => {
                    let (number, key) = (offset as u64, message.key());
                    if !self.metadata.is_empty() {
                        add_metadata(&mut self.parser.members, &self.metadata, &message);
                    }
                    let added = (self.parser).add_keyed(&mut batch, value, number, time, key);
                    if let Some(failure) = self.parser.take_failure() {
                        return Err(failure);
                    }
                    if let Some(bad) = self.parser.bad.last_mut().filter(|_| !added) {
                        bad.origin = format!(
                            "topic {} partition {} offset {offset}",
                            message.topic(),
                            message.partition()
                        );
                    }
                    added
                }
            };
            if added {
                partition.in_batch.add(offset as u64, false);
                // The record's event time: the message's, or its field's.
                if let Some(t) = batch.get(batch.len() - 1).timestamp {
                    partition.max_timestamp = Some(partition.max_timestamp.map_or(t, |m| m.max(t)));
                }
            }
            if done {
                let mut finished = TopicPartitionList::new();
                finished.add_partition(message.topic(), message.partition());
                let _ = self.consumer.pause(&finished);
            }
        }
        self.batch_bytes = batch.data_bytes() + batch.data_bytes() / 8;
        Ok(if batch.is_empty() && self.finished() {
            None
        } else {
            Some(batch)
        })
    }

    fn offset(&self) -> Value {
        if self.group {
            let mut committed = TopicPartitionList::new();
            for p in &self.partitions {
                let _ = committed.add_partition_offset(&p.topic, p.id, Offset::Offset(p.next));
            }
            if let Err(e) = self.consumer.commit(&committed, CommitMode::Async) {
                tracing::debug!("source `{}`: committing to the group: {e}", self.parser.id);
            }
        }
        let mut offset = json!({ "partitions": self.partitions.iter().map(Partition::to_json).collect::<Vec<_>>() });
        if let Some(upstreams) = &self.upstreams {
            offset["upstreams"] = upstreams.to_json();
        }
        offset
    }

    fn take_bad(&mut self) -> Vec<BadRecord> {
        std::mem::take(&mut self.parser.bad)
    }

    fn signalled(&self) -> bool {
        self.signalled
    }

    /// A repartition topic's records before `offset` are deleted.
    fn release(&mut self, offset: &Value) {
        let (Some(purger), Some(saved)) = (&self.purger, from_offset(offset)) else {
            return;
        };
        let mut below = TopicPartitionList::new();
        for s in saved {
            let _ = below.add_partition_offset(&s.topic, s.partition, Offset::Offset(s.next));
        }
        purger.below(below);
    }

    fn skipped(&self) -> u64 {
        self.parser.skipped
    }

    /// `topic t partition 2 offsets 5–9, topic t partition 3 offset 7`.
    fn place(&self) -> Option<String> {
        let places: Vec<String> = (self.partitions.iter())
            .filter_map(|p| {
                let what = format!("topic {} partition {}", p.topic, p.id);
                p.in_batch.describe(&what, "offset")
            })
            .collect();
        (!places.is_empty()).then(|| places.join(", "))
    }

    /// The least highest timestamp over the partitions still read and not
    /// idle; the batch's own when every partition is finished.
    /// For a repartition topic, the upstream tasks' combined watermark
    /// (plus 1 ms: a source's watermark is that less 1 ms, and its
    /// `max_out_of_orderness` is 0).
    fn watermark_timestamp(&self, batch: &Batch, idle_after: Option<Duration>) -> Option<i64> {
        if let Some(upstreams) = &self.upstreams {
            return upstreams.watermark().map(|w| w.saturating_add(1));
        }
        least_active(&self.partitions, Instant::now(), idle_after)
            .unwrap_or_else(|| batch.max_timestamp())
    }
}

/// The least highest timestamp of the partitions neither done nor idle at
/// `now` (one without any timestamp yet makes it `Some(None)`: it holds
/// the watermark back); `None` when no partition is active.
pub(super) fn least_active(
    partitions: &[Partition],
    now: Instant,
    idle_after: Option<Duration>,
) -> Option<Option<i64>> {
    let mut active = partitions
        .iter()
        .filter(|p| !p.done && idle_after.is_none_or(|d| now - p.last_message_at < d))
        .peekable();
    active.peek()?;
    Some(active.map(|p| p.max_timestamp).min().flatten())
}

/// The change kind a repartition topic's record carries
/// ([`CHANGE_HEADER`]; none: an insert).
fn change_of(message: &rdkafka::message::BorrowedMessage<'_>) -> Change {
    use rdkafka::message::Headers;
    let Some(headers) = message.headers() else {
        return Change::Insert;
    };
    (headers.iter())
        .find(|h| h.key == CHANGE_HEADER)
        .and_then(|h| std::str::from_utf8(h.value?).ok())
        .and_then(Change::from_name)
        .unwrap_or_default()
}

/// Renders the metadata of `message` that `fields` asks for into
/// `members`, for the record the parser makes of it next.
fn add_metadata(
    members: &mut Members,
    fields: &Fields,
    message: &rdkafka::message::BorrowedMessage<'_>,
) {
    use rdkafka::message::Headers;
    for (item, field) in fields.iter() {
        match item {
            Item::Topic => members.text(field, Some(message.topic().as_bytes())),
            Item::Partition => members.int(field, Some(i64::from(message.partition()))),
            Item::Offset => members.int(field, Some(message.offset())),
            Item::Timestamp => members.int(field, message.timestamp().to_millis()),
            // The parser adds it, decoded with `key_format` when set.
            Item::Key => {}
            Item::Headers => {
                let headers = message.headers().into_iter().flat_map(|h| h.iter());
                members.headers(field, headers.map(|h| (h.key, h.value)));
            }
        }
    }
}

/// Whether `message` is a repartition topic's control record.
fn is_control(message: &rdkafka::message::BorrowedMessage<'_>) -> bool {
    use rdkafka::message::Headers;
    (message.headers()).is_some_and(|h| h.iter().any(|h| h.key == HEADER))
}

/// Errors a consumer reports while librdkafka retries on its own.
pub(super) fn is_transient(code: rdkafka::types::RDKafkaErrorCode) -> bool {
    use rdkafka::types::RDKafkaErrorCode as C;
    matches!(
        code,
        C::BrokerTransportFailure
            | C::AllBrokersDown
            | C::NotLeaderForPartition
            | C::LeaderNotAvailable
            | C::RequestTimedOut
            | C::NetworkException
            | C::OperationTimedOut
    )
}
