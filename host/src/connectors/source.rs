//! The source contract: a [`SourceReader`] reads records in batches, with
//! an offset that a checkpoint records and a restore seeks back to; the
//! connectors ([`super::file`], [`super::stdin`], [`super::generator`],
//! and the NATS and Kafka sources of the crate `weir-connectors`)
//! implement it.
//!
//! Invariant of every reader: [`SourceReader::offset`] is the position
//! right after the last record returned, so reopening at that offset
//! ([`super::SourceConnector::open`]) yields exactly the records not yet
//! returned (for a replayable source; stdin cannot seek).

use std::time::Duration;

use serde_json::Value;

use crate::dataflow::Batch;
use crate::dataflow::bad_kind::BadKind;

/// Why a source failed. Messages name the source and, for files, the path
/// and line.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The input could not be opened or read.
    #[error("source `{source_id}`: cannot read {path}: {error}")]
    Io {
        /// The source's id.
        source_id: String,
        /// What was read.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A record is malformed.
    #[error("source `{source_id}`: {path}:{line}: {message}")]
    Malformed {
        /// The source's id.
        source_id: String,
        /// The file.
        path: String,
        /// 1-based line (or record) number.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// A server the source reads from refused or failed a step (a bad URL,
    /// a missing stream, a lost connection).
    #[error("source `{source_id}`: {target}: {message}")]
    Remote {
        /// The source's id.
        source_id: String,
        /// What was read: a stream, with the server.
        target: String,
        /// What went wrong and what to do.
        message: String,
    },
    /// The checkpointed offset does not fit the input.
    #[error("source `{source_id}`: cannot resume at checkpointed offset {offset}: {message}")]
    BadOffset {
        /// The source's id.
        source_id: String,
        /// The offset.
        offset: String,
        /// What is wrong.
        message: String,
    },
}

/// A record a source read but could not make a record of (malformed, or
/// without a valid timestamp): what the source's `on_error` decides about.
/// The source's offset is past it all the same.
#[derive(Debug)]
pub struct BadRecord {
    /// What is wrong, in a word.
    pub kind: BadKind,
    /// Why, naming the source and where the record is
    /// ([`SourceError::Malformed`]): what `on_error = "fail"` fails with.
    pub error: SourceError,
    /// Where the record is in the input, in words (`in.jsonl line 17`,
    /// `topic orders partition 2 offset 4471`).
    pub origin: String,
    /// The record's key, if it came with one of its own (a message's).
    pub key: Option<Vec<u8>>,
    /// Its bytes as read: a line, a CSV row, a message's value.
    pub value: Vec<u8>,
    /// Its own timestamp, if it came with one (a message's).
    pub timestamp: Option<i64>,
}

impl BadRecord {
    /// What is wrong with the record, without the source and place its
    /// error names too.
    pub fn reason(&self) -> String {
        match &self.error {
            SourceError::Malformed { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }
}

/// A source cuts a batch once it holds this many bytes, whatever its
/// `batch_size` (so a batch stays far below the 4 GiB a [`Batch`] can address).
pub const MAX_BATCH_BYTES: usize = 4 << 20;

/// A source of records, read in batches.
pub trait SourceReader: Send {
    /// Up to `max` records, or `None` at end of input. A live source
    /// (stdin) returns what has arrived rather than wait for `max` records,
    /// and an empty batch when nothing has: the caller asks again shortly,
    /// and meanwhile can inject barriers.
    fn read_batch(&mut self, max: usize) -> Result<Option<Batch>, SourceError>;
    /// Where to resume to read everything after the records returned so far.
    fn offset(&self) -> Value;
    /// Where the records of the batch [`read_batch`](Self::read_batch)
    /// returned last are in the input, for messages (`in.txt lines
    /// 3–258`); `None` when the reader cannot say.
    fn place(&self) -> Option<String> {
        None
    }
    /// Whether reopening at an offset replays the same records (stdin: no).
    fn replayable(&self) -> bool {
        true
    }
    /// Records dropped so far since this reader was opened (a bad
    /// timestamp with `on_bad_timestamp = "skip"`). A dropped record is
    /// read all the same: [`offset`](Self::offset) is past it.
    fn skipped(&self) -> u64 {
        0
    }
    /// The records read since the last call that could not be made
    /// records ([`BadRecord`]), in input order; the caller's `on_error`
    /// decides what becomes of them. [`offset`](Self::offset) is past
    /// them.
    fn take_bad(&mut self) -> Vec<BadRecord> {
        Vec::new()
    }
    /// The oldest checkpoint a restore may still pick recorded `offset`
    /// (as [`offset`](Self::offset) gave it, with the source's own fields
    /// added): the input before it is never read again, and a source whose
    /// input is the job's own may drop it (a repartition topic's records).
    fn release(&mut self, offset: &Value) {
        let _ = offset;
    }
    /// The output port of the batch [`read_batch`](Self::read_batch)
    /// returned last: 0, but for a source feeding several ports (a replay
    /// into an operator's input ports, [`super::replay`]).
    fn output_port(&self) -> u32 {
        0
    }
    /// Whether the records' timestamps move event time. A source whose
    /// records are old ones again (replayed dead letters) says no: it
    /// sends no watermark and is idle whenever it has sent what it read,
    /// so it never holds a watermark back.
    fn moves_event_time(&self) -> bool {
        true
    }
    /// Whether the last read brought news of event time without records
    /// (a repartition topic's control records): the source then takes
    /// [`watermark_timestamp`](Self::watermark_timestamp) of the empty
    /// batch as it would after records.
    fn signalled(&self) -> bool {
        false
    }
    /// The timestamp the source's watermark may follow once `batch` was
    /// read (it never goes back: the source keeps the highest so far). By
    /// default the batch's highest. A reader of several partitions, each in
    /// timestamp order but not with one another (Kafka), returns the least
    /// of its partitions' highest timestamps, leaving out those without
    /// records for `idle_after`.
    fn watermark_timestamp(&self, batch: &Batch, idle_after: Option<Duration>) -> Option<i64> {
        let _ = idle_after;
        batch.max_timestamp()
    }
}
