//! The sink contract: a [`Sink`] with two-phase commit, whose output of
//! checkpoint *n* is staged and made visible only once *n* is complete; the
//! connectors ([`super::file`], [`super::stdout`]) implement it. Also how a
//! sink writes records ([`SinkFormat`], one value per line).
//!
//! Invariants every transactional sink keeps (the file sink states how):
//! - Visible output grows by whole epochs (the output of one checkpoint),
//!   in checkpoint order, and only at [`Sink::commit`].
//! - Opened with the commit info of checkpoint *n*, the visible output ends
//!   exactly at *n*: what later checkpoints staged is dropped.

use std::io::Write;

use serde::Deserialize;
use serde_json::Value;

use super::changelog::with_op;
use crate::dataflow::Batch;
use crate::failpoint::{self, Failpoint};

/// Why a sink failed. Messages name the sink and the file, table or
/// subject.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// Writing or committing output failed.
    #[error("sink `{sink}`: {path}: {error}")]
    Io {
        /// The sink's id.
        sink: String,
        /// The file.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A server the sink writes to refused or failed a step (a missing
    /// table, a value of the wrong type, a lost connection).
    #[error("sink `{sink}`: {target}: {message}")]
    Remote {
        /// The sink's id.
        sink: String,
        /// What was written: a table, a subject, with the server.
        target: String,
        /// What went wrong and what to do.
        message: String,
    },
    /// The output file does not match the checkpoint being restored.
    #[error("sink `{sink}`: {path}: {message}")]
    Inconsistent {
        /// The sink's id.
        sink: String,
        /// The file.
        path: String,
        /// What is wrong and what to do.
        message: String,
    },
}

/// What a commit point carries its commits in, for sinks that write into
/// it (worker mode: a task's Kafka transactions, which a Kafka sink with
/// `write = "direct"` produces into and the commit point commits,
/// [`CommitPoint::transactions`](crate::run::CommitPoint::transactions)).
/// Its type is known only to the connector that made it.
pub type Transactions = std::sync::Arc<dyn std::any::Any + Send + Sync>;

/// What a sink is opened with besides its type's own settings.
#[derive(Debug, Clone, Copy)]
pub struct SinkContext<'a> {
    /// The job's name.
    pub job: &'a str,
    /// The sink's id.
    pub id: &'a str,
    /// Its guarantee (`delivery`, or its type's default).
    pub delivery: Delivery,
    /// A folder the sink owns, under the state dir.
    pub staging: &'a std::path::Path,
    /// The commit info of the checkpoint being restored (what its
    /// precommit reported), or `None` to start fresh.
    pub restore: Option<&'a Value>,
    /// The transactions the run's commit point commits checkpoints in, if
    /// it carries any ([`CommitPoint::transactions`]): a sink that writes
    /// into them needs no staging.
    ///
    /// [`CommitPoint::transactions`]: crate::run::CommitPoint::transactions
    pub transactions: Option<&'a Transactions>,
}

/// Receives the outcome of a sink step that may finish on another thread:
/// the commit info once a precommitted epoch is durable, `Value::Null` once
/// a commit is visible, or the error.
pub type Done = Box<dyn FnOnce(Result<Value, SinkError>) + Send>;

/// Event-time news a sink hears from its input besides batches: what a
/// sink that feeds another stage of the job passes on
/// ([`Destination::carries_signals`](super::staged::Destination::carries_signals)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// The combined watermark of the sink's inputs advanced to this.
    Watermark(i64),
    /// Every input of the sink is idle, until one sends again.
    Idle,
    /// The input ended: the epoch precommitted next is the last.
    End,
}

/// Checks records against what a destination accepts, on the sink's own
/// thread, before they are written ([`Sink::refuse`]).
pub trait RecordCheck: Send {
    /// The records of `batch` the destination would refuse (a value of the
    /// wrong type for its column, an unknown column), by index, with what
    /// is wrong, in a sentence that names the column.
    fn refuse(&mut self, batch: &Batch) -> Vec<(usize, String)>;
}

/// A transactional sink.
pub trait Sink: Send {
    /// Stages a batch into the current epoch.
    fn write(&mut self, batch: &Batch) -> Result<(), SinkError>;
    /// Closes the current epoch as checkpoint `id`'s output. `done` gets the
    /// commit info to record in the checkpoint once the epoch is durable,
    /// possibly from another thread after this returned.
    fn precommit(&mut self, id: u64, done: Done) -> Result<(), SinkError>;
    /// Makes the output of every precommitted checkpoint `<= id` visible;
    /// `done` is called once it is.
    fn commit(&mut self, id: u64, done: Done) -> Result<(), SinkError>;
    /// Takes `signal` into the current epoch; most sinks ignore it.
    fn signal(&mut self, signal: Signal) -> Result<(), SinkError> {
        let _ = signal;
        Ok(())
    }
    /// Waits until every step requested so far has called its `done`.
    fn close(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    /// The records of `batch` its destination would refuse, by index, with
    /// why ([`RecordCheck`]): called before `write` when the sink's
    /// `on_error` goes past bad records, and `write` then gets the batch
    /// without them. What only the destination can tell (a date it cannot
    /// parse, a constraint) still fails at delivery. None by default.
    fn refuse(&mut self, batch: &Batch) -> Vec<(usize, String)> {
        let _ = batch;
        Vec::new()
    }
    /// Whether `write` and `refuse` take rows as rows
    /// ([`Encoding::Row`](crate::dataflow::batch::Encoding::Row), checked)
    /// and encode them into the destination's format themselves, rather
    /// than as the JSON text of their fields. False by default.
    fn reads_rows(&self) -> bool {
        false
    }
    /// Whether a batch is out once `write` returns (at-least-once sinks),
    /// rather than once its checkpoint is committed: where the sink's
    /// record latency is measured.
    fn out_on_write(&self) -> bool {
        false
    }
}

/// An epoch written to `open`, to be made durable as `staged`: the first
/// phase of a two-phase commit, run on a sink's worker thread.
pub(crate) struct SealEpoch {
    /// The epoch's file, written and flushed.
    pub(crate) file: std::fs::File,
    /// Its path while it is written.
    pub(crate) open: std::path::PathBuf,
    /// Its path once sealed.
    pub(crate) staged: std::path::PathBuf,
    /// The commit info `done` gets once it is durable.
    pub(crate) info: Value,
    /// Gets the commit info or the error.
    pub(crate) done: Done,
}

impl SealEpoch {
    /// Syncs the epoch's data, renames it to `staged` and syncs the folder,
    /// so that the rename too survives a power loss; then reports to `done`
    /// for sink `sink`. Failpoint `sink.after-precommit` sits between the
    /// two: the epoch is durable, its checkpoint not yet stored.
    pub(crate) fn run(self, sink: &str) {
        let io = |path: &std::path::Path| {
            let (sink, path) = (sink.to_owned(), path.display().to_string());
            move |error| SinkError::Io { sink, path, error }
        };
        let dir = self.staged.parent().unwrap_or(std::path::Path::new("."));
        let sealed = self
            .file
            .sync_all()
            .map_err(io(&self.open))
            .and_then(|()| std::fs::rename(&self.open, &self.staged).map_err(io(&self.staged)))
            .and_then(|()| {
                std::fs::File::open(dir)
                    .and_then(|d| d.sync_all())
                    .map_err(io(dir))
            });
        if sealed.is_ok() {
            failpoint::hit(Failpoint::SinkAfterPrecommit);
        }
        (self.done)(sealed.map(|()| self.info))
    }
}

/// Runs a sink step and waits for its `done`.
fn blocking(step: impl FnOnce(Done) -> Result<(), SinkError>) -> Result<Value, SinkError> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    step(Box::new(move |r| drop(tx.send(r))))?;
    rx.recv().expect("a sink calls `done` exactly once")
}

/// [`Sink::precommit`], waiting for the epoch to be durable (tests, tools).
pub fn precommit_blocking(sink: &mut dyn Sink, id: u64) -> Result<Value, SinkError> {
    blocking(|done| sink.precommit(id, done))
}

/// [`Sink::commit`], waiting for the output to be visible (tests, tools).
pub fn commit_blocking(sink: &mut dyn Sink, id: u64) -> Result<(), SinkError> {
    blocking(|done| sink.commit(id, done)).map(drop)
}

/// A sink's guarantee (`delivery`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Delivery {
    /// Output of checkpoint *n* becomes visible once *n* is complete, once.
    ExactlyOnce,
    /// Records are written as they arrive; after a crash those since the
    /// restored checkpoint may be written again.
    AtLeastOnce,
}

/// How a sink writes record values: one value per line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkFormat {
    /// Values written as they are.
    Lines,
    /// Values written as they are; each value is expected to be JSON.
    Jsonl,
    /// Each record as a Debezium change event ([`super::debezium`]).
    #[serde(rename = "debezium-json")]
    DebeziumJson,
}

/// Writes each record in `format`, a line each: its value with its change
/// kind when it is not an insert ([`super::changelog`]), or a Debezium
/// event; returns the bytes written.
pub(crate) fn encode(
    batch: &Batch,
    format: SinkFormat,
    out: &mut impl Write,
) -> std::io::Result<u64> {
    if format == SinkFormat::DebeziumJson {
        return super::debezium::write(batch, out);
    }
    let mut bytes = 0;
    for r in batch.iter() {
        let value = with_op(r.value, r.change).map_err(std::io::Error::other)?;
        out.write_all(&value)?;
        out.write_all(b"\n")?;
        bytes += value.len() as u64 + 1;
    }
    Ok(bytes)
}
