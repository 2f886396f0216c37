//! Records a node cannot handle, and what becomes of them: its `on_error`
//! ([`OnError`]) within its budget `max_bad` ([`BadRecords`]).
//!
//! - A **source** reads records it cannot make records of
//!   ([`BadRecord`]: malformed, no key field, a bad timestamp).
//! - An **operator**'s plugin fails on a record (a trap, or `invalid-input`
//!   returned). Which one is found by replaying from the last checkpoint
//!   ([`BadInputs`], kept by the supervisor): one source record per batch,
//!   then, when a source record became several records, one call each;
//!   the plugin is deterministic, so it fails again on the same one. The
//!   replay then hands the instance the record to go past, and the other
//!   records of the batch take effect once, as every replayed record does.
//!
//! With a dead-letter sink, each bad record becomes a dead letter
//! ([`Letter`]) sent on the node's dead-letter port before the next
//! checkpoint barrier, so it reaches the sink exactly once, as any record.
//!
//! Invariants:
//! - With `fail`, the first bad record fails the node with its own error.
//! - Every bad record gone past is counted (`records_bad`), and the log
//!   names the first and then at most one line per [`LOG_EVERY`].
//! - More than `max_bad` bad records between two checkpoint barriers fail
//!   the node, naming the budget and the last bad record.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::Batch;
use crate::config::OnError;
use crate::connectors::source::BadRecord;
use crate::dataflow::cancel::Cancelled;
use crate::dataflow::output::Output;
use crate::dataflow::provenance::Provenance;
use crate::metrics::{BadKind, NodeKind, NodeMetrics};
use crate::threads::{Shared, TaskError};
use crate::wasm::{InstanceError, ReturnedKind};

/// How often at most the log tells of bad records after the first.
pub(crate) const LOG_EVERY: Duration = Duration::from_secs(10);

/// Where bad records are met: the node (and instance) their dead letters name.
#[derive(Debug, Clone)]
pub(crate) struct BadAt {
    /// A source or an operator.
    pub kind: NodeKind,
    /// Its id.
    pub id: String,
    /// The job's name.
    pub job: String,
    /// An operator's instance and its plugin (`{name, version, sha256}`).
    pub instance: Option<(u32, Value)>,
}

/// A bad record as its dead letter tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Letter {
    /// What is wrong, in a word.
    pub kind: BadKind,
    /// Whether this run counts it: not when a replay goes past a record
    /// an earlier attempt of the run went past already.
    pub first_time: bool,
    /// What is wrong.
    pub error: String,
    /// Where it came from, in words.
    pub origin: String,
    /// The input port an operator got it on.
    pub port: Option<String>,
    /// The record as it was met.
    pub key: Option<Vec<u8>>,
    /// Its value.
    pub value: Vec<u8>,
    /// Its timestamp.
    pub timestamp: Option<i64>,
}

impl Letter {
    /// The dead letter of record `i` of `batch`, bad because of `error`,
    /// of kind `kind`. Its origin is the batch's: exactly the record's when
    /// the batch holds one source record's, else the range, with the
    /// record's place in it when the batch is the source's as read.
    pub(crate) fn of(batch: &Batch, i: usize, (kind, error): (BadKind, &str)) -> Letter {
        let record = batch.get(i);
        let origin = match batch.provenance() {
            // Record i of the source's batch as read.
            Some(p) if p.records > 1 && p.records == batch.len() => {
                format!("record {i} of the batch from {p}")
            }
            // Part of it (what one instance got), or what an upstream made
            // of it: the record's index says nothing of its place.
            Some(p) if p.records > 1 => format!("a record of the batch from {p}"),
            Some(p) => p.to_string(),
            None => String::new(),
        };
        Letter {
            kind,
            first_time: true,
            error: error.to_owned(),
            origin,
            port: None,
            key: record.key.map(<[u8]>::to_vec),
            value: record.text_value(),
            timestamp: record.timestamp,
        }
    }
}

impl From<BadRecord> for Letter {
    fn from(bad: BadRecord) -> Letter {
        Letter {
            kind: bad.kind,
            first_time: true,
            error: bad.reason(),
            origin: bad.origin,
            port: None,
            key: bad.key,
            value: bad.value,
            timestamp: bad.timestamp,
        }
    }
}

/// A node's handling of its bad records.
pub(crate) struct BadRecords {
    policy: OnError,
    max_bad: Option<u64>,
    node: BadAt,
    /// The node's output port of dead letters, if its `on_error` sends
    /// them to a sink.
    port: Option<u32>,
    /// The checkpoint the records met now belong to: the next one whose
    /// barrier the node sends.
    checkpoint: u64,
    /// Bad records since the last barrier.
    since_barrier: u64,
    /// When the log last told of bad records, and how many it has not
    /// told of since.
    logged: Option<Instant>,
    untold: u64,
}

impl BadRecords {
    /// The handling of `node` with `policy` and budget `max_bad`, whose
    /// next checkpoint is `checkpoint`, sending dead letters on output
    /// `port` (the plan's dead-letter port of the node, when `policy` has
    /// a dead-letter sink).
    pub(crate) fn new(
        node: BadAt,
        (policy, max_bad): (OnError, Option<u64>),
        port: Option<u32>,
        checkpoint: u64,
    ) -> Self {
        debug_assert_eq!(port.is_some(), policy.dead_letter_sink().is_some());
        BadRecords {
            policy,
            max_bad,
            node,
            port,
            checkpoint,
            since_barrier: 0,
            logged: None,
            untold: 0,
        }
    }

    /// Whether the first bad record fails the node (`on_error = "fail"`).
    pub(crate) fn fails(&self) -> bool {
        self.policy == OnError::Fail
    }

    /// The barrier of checkpoint `n` was sent: later records belong to
    /// the next, and the budget starts over.
    pub(crate) fn barrier(&mut self, n: u64) {
        self.checkpoint = n + 1;
        self.since_barrier = 0;
    }

    /// Decides about the records a source could not read, in input order:
    /// the dead letters to send (with a dead-letter sink), or the error
    /// that fails the source (`fail`: the first one's own).
    pub(crate) fn read(
        &mut self,
        bad: Vec<BadRecord>,
        metrics: &NodeMetrics,
    ) -> Result<Option<Batch>, TaskError> {
        if self.policy == OnError::Fail {
            return match bad.into_iter().next() {
                Some(first) => Err(first.error.into()),
                None => Ok(None),
            };
        }
        let letters: Vec<Letter> = bad.into_iter().map(Letter::from).collect();
        self.went_past(&letters, metrics)
    }

    /// Sends on `out` the dead letters `handled` made ([`read`](Self::read),
    /// [`went_past`](Self::went_past)), or fails the task with its error.
    pub(crate) fn send(
        &self,
        handled: Result<Option<Batch>, TaskError>,
        out: &mut Output,
        shared: &Shared,
    ) -> Result<(), Cancelled> {
        match (handled, self.port) {
            (Ok(Some(letters)), Some(port)) => out.send_uncounted(&shared.cancel, port, letters),
            (Ok(_), _) => Ok(()),
            (Err(e), _) => Err(shared.fail(e)),
        }
    }

    /// Counts the bad records `letters` the node goes past (by kind, those
    /// this run had not counted), and makes their dead letters (with a
    /// dead-letter sink); more than `max_bad` since the last barrier is
    /// the error that fails the node.
    pub(crate) fn went_past(
        &mut self,
        letters: &[Letter],
        metrics: &NodeMetrics,
    ) -> Result<Option<Batch>, TaskError> {
        let Some(last) = letters.last() else {
            return Ok(None);
        };
        let count = letters.len() as u64;
        for letter in letters.iter().filter(|l| l.first_time) {
            metrics.records_bad.add(letter.kind, 1);
        }
        self.since_barrier += count;
        if let Some(max) = self.max_bad.filter(|&max| self.since_barrier > max) {
            return Err(TaskError::TooManyBad {
                kind: self.node.kind,
                node: self.node.id.clone(),
                count: self.since_barrier,
                max_bad: max,
                last: format!("{}: {}", last.origin, last.error),
            });
        }
        self.log(last, count);
        let OnError::DeadLetter(_) = self.policy else {
            return Ok(None);
        };
        let mut batch = Batch::with_capacity(letters.len(), 0);
        for letter in letters {
            let value = dead_letter(letter, &self.node, self.checkpoint);
            batch.push(letter.key.as_deref(), &value, letter.timestamp);
        }
        Ok(Some(batch))
    }

    /// Logs the first bad record, then at most one line per [`LOG_EVERY`]
    /// for those since.
    fn log(&mut self, last: &Letter, count: u64) {
        let what = match self.policy {
            OnError::DeadLetter(ref sink) => format!("sent to sink `{sink}`"),
            _ => "skipped".to_owned(),
        };
        let (kind, id) = (self.node.kind.name(), &self.node.id);
        let now = Instant::now();
        self.untold += count;
        match self.logged {
            Some(at) if now.duration_since(at) < LOG_EVERY => return,
            None => tracing::warn!(
                "{kind} `{id}`: bad record {what}: {}: {}",
                last.origin,
                last.error
            ),
            Some(_) => tracing::warn!(
                "{kind} `{id}`: {} more bad record(s) {what}; the last: {}: {}",
                self.untold,
                last.origin,
                last.error
            ),
        }
        self.logged = Some(now);
        self.untold = 0;
    }
}

/// The dead letter of `letter`, met by `node` for checkpoint `checkpoint`:
/// a JSON object with what went wrong (`error`), where (`job`, `node`,
/// `kind`, an operator's `instance` and `plugin`, `origin`, `checkpoint`)
/// and the record itself (`key`, `value`, `timestamp`; bytes that are not
/// UTF-8 as `key_base64` / `value_base64`).
pub(crate) fn dead_letter(letter: &Letter, node: &BadAt, checkpoint: u64) -> Vec<u8> {
    let mut out = json!({
        "error": letter.error,
        "job": node.job,
        "node": node.id,
        "kind": node.kind.name(),
        "error_kind": letter.kind.name(),
        "origin": letter.origin,
        "checkpoint": checkpoint,
        "timestamp": letter.timestamp,
    });
    let fields = out.as_object_mut().expect("an object");
    if let Some((instance, plugin)) = &node.instance {
        fields.insert("instance".into(), (*instance).into());
        fields.insert("plugin".into(), plugin.clone());
    }
    if let Some(port) = &letter.port {
        fields.insert("port".into(), port.as_str().into());
    }
    let bytes = [
        ("key", letter.key.as_deref()),
        ("value", Some(&letter.value[..])),
    ];
    for (name, bytes) in bytes {
        let Some(bytes) = bytes else {
            fields.insert(name.to_owned(), Value::Null);
            continue;
        };
        match std::str::from_utf8(bytes) {
            Ok(text) => fields.insert(name.to_owned(), text.into()),
            Err(_) => {
                let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
                fields.insert(format!("{name}_base64"), encoded.into())
            }
        };
    }
    out.to_string().into_bytes()
}

/// What replays found about the records operators fail on, by operator
/// and source record (a batch's provenance in a narrowed replay, which
/// sends one source record per batch).
#[derive(Debug, Clone, Default)]
pub(crate) struct BadInputs(BTreeMap<(String, String, String), Found>);

/// What is known of the records an operator got from one source record.
#[derive(Debug, Clone, Default)]
pub(crate) struct Found {
    /// The records the plugin fails on, by index in their batch.
    pub bad: BTreeMap<usize, FoundRecord>,
    /// Whether the plugin gets the others one call each, to find the one
    /// it fails on among several.
    pub one_by_one: bool,
}

/// What a failure taught [`BadInputs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Learnt {
    /// The record the plugin fails on: a replay goes past it.
    Record,
    /// That the plugin fails on one of several records made from one
    /// source record: a replay gives them one call each, to find it.
    OneByOne,
}

/// A record a plugin fails on.
#[derive(Debug, Clone)]
pub(crate) struct FoundRecord {
    /// The failure's kind.
    pub kind: BadKind,
    /// The failure's message.
    pub error: String,
    /// Whether a replay went past it already in this run (it is counted
    /// once, every replay after the one that found it going past it).
    pub counted: Arc<AtomicBool>,
}

impl FoundRecord {
    /// Whether this is the first time it is gone past (and it now is).
    pub(crate) fn first_time(&self) -> bool {
        !self.counted.swap(true, Ordering::Relaxed)
    }
}

impl BadInputs {
    /// What is known of the batch `operator` gets from `from`.
    pub(crate) fn of(&self, operator: &str, from: &Provenance) -> Option<&Found> {
        if self.0.is_empty() {
            // No replay found any: every batch's case, without a key made.
            return None;
        }
        let key = (operator.to_owned(), from.source.clone(), from.place.clone());
        self.0.get(&key)
    }

    /// Learns that `operator`'s plugin failed with `error` (its kind and
    /// message) on a batch of
    /// `records` records made from the one source record `from`: on
    /// record `index` of them, when it had them one call each. What is
    /// news, if anything (a replay can then go on).
    pub(crate) fn learn(
        &mut self,
        operator: &str,
        from: &Provenance,
        (records, index): (usize, Option<usize>),
        (kind, error): (BadKind, String),
    ) -> Option<Learnt> {
        let key = (operator.to_owned(), from.source.clone(), from.place.clone());
        let found = self.0.entry(key).or_default();
        match index.or((records == 1).then_some(0)) {
            Some(i) => {
                let record = FoundRecord {
                    kind,
                    error,
                    counted: Arc::default(),
                };
                found
                    .bad
                    .insert(i, record)
                    .is_none()
                    .then_some(Learnt::Record)
            }
            None => (!std::mem::replace(&mut found.one_by_one, true)).then_some(Learnt::OneByOne),
        }
    }
}

/// The kind of bad record a plugin's failure `error` on it makes.
pub(crate) fn kind_of(error: &InstanceError) -> BadKind {
    match error {
        InstanceError::Trap { .. } | InstanceError::Limit { .. } => BadKind::Trap,
        InstanceError::Returned { error, .. } if error.kind == ReturnedKind::InvalidInput => {
            BadKind::InvalidInput
        }
        InstanceError::Returned { .. } | InstanceError::Config { .. } => BadKind::Failed,
    }
}

#[cfg(test)]
mod tests;
