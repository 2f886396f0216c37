//! The thread bodies of a running job: one thread per source
//! ([`source::SourceTask`]), per operator instance
//! ([`instance::InstanceTask`]) and per sink ([`sink::SinkTask`]), connected
//! by the data path of [`crate::dataflow`]. Instances and sinks are
//! [`InputHandler`](crate::dataflow::input::InputHandler)s of the shared
//! aligned-input loop; this folder adds what needs Wasm and connectors.
//!
//! Invariant: a task that fails reports [`Event::Failed`] and ends with
//! `Cancelled`; one that ends because the job was cancelled (or a channel it
//! needs is gone) reports nothing.

pub(crate) mod bad_records;
pub(crate) mod instance;
pub(crate) mod sink;
pub(crate) mod source;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use crate::Batch;
use crate::connectors::sink::SinkError;
use crate::connectors::source::SourceError;
use crate::dataflow::cancel::Cancelled;
use crate::dataflow::output::OutputCounters;
use crate::dataflow::protocol::Event;
use crate::dataflow::provenance::Provenance;
use crate::metrics::NodeMetrics;
use crate::wasm::InstanceError;

/// Why a task failed.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// A plugin call failed.
    #[error(transparent)]
    Instance(#[from] InstanceError),
    /// `process` failed on a batch.
    #[error("{error} ({batch})")]
    Process {
        /// The failure.
        error: InstanceError,
        /// The batch.
        batch: Box<FailedBatch>,
    },
    /// A source or an operator met more bad records between two
    /// checkpoints than its `max_bad` allows.
    #[error(
        "{} `{node}`: {count} bad records since its last checkpoint, more than max_bad = {max_bad} (the last: {last}); fix the input, or raise max_bad",
        kind.name()
    )]
    TooManyBad {
        /// A source or an operator.
        kind: crate::metrics::NodeKind,
        /// Its id.
        node: String,
        /// Bad records since the last checkpoint.
        count: u64,
        /// The budget.
        max_bad: u64,
        /// The last bad record: where, and what is wrong.
        last: String,
    },
    /// A batch that `reader` received holds a value marked a row that is
    /// none.
    #[error(
        "{reader} received a malformed row, a bug in the plugin that emitted it (the operator upstream): {error}"
    )]
    BadRow {
        /// The sink or operator input that read it: ``sink `out` `` or
        /// ``input `in` of operator `count` ``.
        reader: String,
        /// What is wrong, and with which record of the batch.
        error: crate::dataflow::batch::BadSpans,
    },
    /// A source failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A sink failed.
    #[error(transparent)]
    Sink(#[from] SinkError),
}

/// The batch a `process` call failed on.
#[derive(Debug, Clone)]
pub struct FailedBatch {
    /// The operator's id.
    pub operator: String,
    /// The input port's name.
    pub port: String,
    /// Records in the batch.
    pub records: usize,
    /// Where they came from, if known.
    pub from: Option<Arc<Provenance>>,
    /// The record's index in the batch it came in, when the plugin was
    /// given it alone to find the one it fails on
    /// ([`bad_records::BadInputs`]).
    pub record: Option<usize>,
}

impl std::fmt::Display for FailedBatch {
    /// `input port `in`, batch of 3 records from in.txt line 7 of source `lines``.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "input port `{}`, ", self.port)?;
        match self.records {
            1 => write!(f, "batch of 1 record")?,
            n => write!(f, "batch of {n} records")?,
        }
        match &self.from {
            Some(from) => write!(f, " from {from}"),
            None => Ok(()),
        }
    }
}

/// Shared by every task of one attempt.
#[derive(Clone)]
pub(crate) struct Shared {
    /// Set when the attempt ends; every task then stops.
    pub cancel: Arc<AtomicBool>,
    /// To the driver.
    pub events: Sender<Event<TaskError>>,
}

impl Shared {
    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    fn event(&self, e: Event<TaskError>) {
        // The driver outlives every task; a send error means it is gone
        // because the attempt is over.
        let _ = self.events.send(e);
    }

    /// Reports `error` and returns the outcome of a failed task.
    fn fail(&self, error: impl Into<TaskError>) -> Cancelled {
        self.event(Event::Failed(error.into()));
        Cancelled
    }
}

impl OutputCounters for NodeMetrics {
    fn sent(&self, batch: &Batch) {
        self.records_out
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        self.bytes_out
            .fetch_add(batch.data_bytes() as u64, Ordering::Relaxed);
    }

    fn blocked(&self, waited: Duration) {
        self.blocked_ns
            .fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
    }
}

/// Counts `batch` in and calls `act` on it; on success, records the call's
/// time as the node's batch latency.
fn receive_batch(
    metrics: &NodeMetrics,
    batch: &Batch,
    act: impl FnOnce(&Batch) -> Result<(), Cancelled>,
) -> Result<(), Cancelled> {
    metrics
        .records_in
        .fetch_add(batch.len() as u64, Ordering::Relaxed);
    metrics
        .bytes_in
        .fetch_add(batch.data_bytes() as u64, Ordering::Relaxed);
    let started = Instant::now();
    act(batch)?;
    metrics.batch_latency.observe(started.elapsed());
    Ok(())
}
