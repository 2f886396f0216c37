//! The sink thread: drives one [`Sink`] through the aligned-input loop.
//! It writes batches into the current epoch, precommits the epoch at each
//! aligned checkpoint, and commits when the driver says the checkpoint is
//! complete.
//!
//! Invariants:
//! - The epoch of checkpoint `n` holds exactly the records before the cut
//!   of `n`: the precommit runs at the aligned checkpoint, before any
//!   released batch is written.
//! - A checkpoint is committed only after the driver stored it; after the
//!   end of input the sink waits for the final checkpoint's commit, then
//!   closes.
//! - Record latency ([`NodeMetrics::record_latency`]) is observed once a
//!   batch is out: after `write` for a sink that is out on write, else
//!   when the commit of the batch's checkpoint is done. Until then an
//!   exactly-once sink keeps one origin per millisecond of arrival (at
//!   most [`ORIGINS_KEPT`] per epoch), so the bookkeeping stays small
//!   however long an epoch runs.
//! - A sink reads text: the rows of a batch (a plugin's
//!   [`Encoding::Row`](crate::dataflow::batch::Encoding) values) are
//!   written as JSON on this thread before the sink sees the batch.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Batch;
use crate::connectors::sink::{Done, Signal, Sink};
use crate::dataflow::cancel::Cancelled;
use crate::dataflow::input::{self, InputChannels, InputHandler};
use crate::dataflow::output::Output;
use crate::dataflow::protocol::{Ack, AlignStats, Event, Msg};
use crate::metrics::{BadKind, NodeMetrics};
use crate::threads::bad_records::{BadRecords, Letter};
use crate::threads::{Shared, TaskError, receive_batch};

/// Origins an exactly-once sink keeps per epoch; later batches count with
/// the last one kept.
const ORIGINS_KEPT: usize = 16_384;

/// Batches of one epoch by origin: (origin, records), oldest first.
type Origins = Vec<(Instant, u64)>;

/// What an exactly-once sink wrote in one epoch: its records, counted as
/// the sink's output once the epoch is delivered, and their origins.
#[derive(Default)]
struct Written {
    records: u64,
    origins: Origins,
}

/// A sink thread.
pub(crate) struct SinkTask {
    /// Where its dead letters go, if its `on_error` sends them to a sink
    /// (no port otherwise); checkpoint barriers, event time and the end of
    /// input follow them there.
    out: Output,
    /// What becomes of the records its destination would refuse.
    bad: BadRecords,
    /// The attempt's cancel flag and events.
    shared: Shared,
    /// Sink id.
    id: String,
    /// The opened sink.
    sink: Box<dyn Sink>,
    /// The sink's counters (records in, batch and record latency).
    metrics: Arc<NodeMetrics>,
    /// Whether the sink is out on write ([`Sink::out_on_write`]).
    out_on_write: bool,
    /// The epoch being written.
    writing: Written,
    /// Precommitted epochs, by checkpoint id, oldest first.
    precommitted: Vec<(u64, Written)>,
}

impl SinkTask {
    /// The thread of sink `id`, its dead letters on `out` as `bad` says.
    pub(crate) fn new(
        (shared, id): (Shared, String),
        sink: Box<dyn Sink>,
        metrics: Arc<NodeMetrics>,
        (out, bad): (Output, BadRecords),
    ) -> Self {
        SinkTask {
            out,
            bad,
            out_on_write: sink.out_on_write(),
            shared,
            id,
            sink,
            metrics,
            writing: Written::default(),
            precommitted: Vec::new(),
        }
    }

    /// Counts `batch` in the epoch being written and remembers its origin,
    /// until its checkpoint commits.
    fn keep(&mut self, batch: &Batch) {
        let n = batch.len() as u64;
        self.writing.records += n;
        let Some(origin) = batch.origin() else {
            return;
        };
        let origins = &mut self.writing.origins;
        let full = origins.len() >= ORIGINS_KEPT;
        match origins.last_mut() {
            Some((last, records))
                if full || origin.saturating_duration_since(*last) < Duration::from_millis(1) =>
            {
                *records += n;
            }
            _ => origins.push((origin, n)),
        }
    }

    /// The thread body: writes `inputs` until they end and the final
    /// checkpoint is committed, or the job is cancelled. `inputs` carries the
    /// commit channel.
    pub(crate) fn stage_and_commit(mut self, inputs: InputChannels) -> Result<(), Cancelled> {
        let cancel = self.shared.cancel.clone();
        input::drive(&inputs, &cancel, &mut self)
    }

    /// Reports the outcome of a sink step to the driver: `ok` on success,
    /// the failure otherwise.
    fn report(&self, ok: impl FnOnce(Value) -> Event<TaskError> + Send + 'static) -> Done {
        let shared = self.shared.clone();
        Box::new(move |result| match result {
            Ok(info) => shared.event(ok(info)),
            Err(e) => shared.event(Event::Failed(e.into())),
        })
    }

    /// Tells the sink of `signal`, and passes it on to its dead letters.
    fn signal(&mut self, signal: Signal) -> Result<(), Cancelled> {
        self.sink.signal(signal).map_err(|e| self.shared.fail(e))?;
        let cancel = &self.shared.cancel;
        match signal {
            Signal::Watermark(w) => self.out.broadcast(cancel, || Msg::Watermark(w)),
            Signal::Idle => self.out.broadcast(cancel, || Msg::Idle),
            Signal::End => Ok(()),
        }
    }

    /// `batch` without the records its destination would refuse, which go
    /// past as the sink's `on_error` says; `batch` as it is when that is
    /// `"fail"` (the destination then refuses them at delivery).
    fn pass(&mut self, batch: Batch) -> Result<Batch, Cancelled> {
        if self.bad.fails() {
            return Ok(batch);
        }
        let refused = self.sink.refuse(&batch);
        if refused.is_empty() {
            return Ok(batch);
        }
        let letters: Vec<Letter> = (refused.iter())
            .map(|(i, why)| Letter::of(&batch, *i, (BadKind::Refused, why)))
            .collect();
        let handled = self.bad.went_past(&letters, &self.metrics);
        self.bad.send(handled, &mut self.out, &self.shared)?;
        let keep: Vec<usize> = (0..batch.len())
            .filter(|i| !refused.iter().any(|(r, _)| r == i))
            .collect();
        Ok(batch.select(&keep))
    }

    fn precommit(&mut self, id: u64) -> Result<(), Cancelled> {
        if self.writing.records > 0 {
            self.precommitted
                .push((id, std::mem::take(&mut self.writing)));
        }
        let sink = self.id.clone();
        let done = self.report(move |info| Event::Ack(id, Ack::Sink { sink, info }));
        self.sink
            .precommit(id, done)
            .map_err(|e| self.shared.fail(e))
    }
}

impl InputHandler for SinkTask {
    fn on_batch(&mut self, _port: u32, batch: Batch) -> Result<(), Cancelled> {
        // A sink that encodes rows itself gets them checked, others as
        // JSON text.
        let batch = match self.sink.reads_rows() {
            true => batch.check_rows().map(|()| batch),
            false => batch.rows_as_text(),
        };
        let batch = batch.map_err(|error| {
            self.shared.fail(TaskError::BadRow {
                reader: format!("sink `{}`", self.id),
                error,
            })
        })?;
        let (n, bytes) = (batch.len() as u64, batch.data_bytes() as u64);
        let batch = self.pass(batch)?;
        let (sink, shared) = (&mut self.sink, &self.shared);
        receive_batch(&self.metrics, &batch, |batch| {
            sink.write(batch).map_err(|e| shared.fail(e))
        })?;
        // The refused records came in too.
        let refused = n - batch.len() as u64;
        self.metrics
            .records_in
            .fetch_add(refused, Ordering::Relaxed);
        let written = batch.data_bytes() as u64;
        (self.metrics.bytes_in).fetch_add(bytes - written, Ordering::Relaxed);
        if self.out_on_write {
            let n = batch.len() as u64;
            self.metrics.records_out.fetch_add(n, Ordering::Relaxed);
            if let Some(origin) = batch.origin() {
                self.metrics.record_latency.observe_n(origin.elapsed(), n);
            }
        } else {
            self.keep(&batch);
        }
        Ok(())
    }

    fn on_watermark(&mut self, watermark: i64) -> Result<(), Cancelled> {
        self.signal(Signal::Watermark(watermark))
    }

    fn on_idle(&mut self) -> Result<(), Cancelled> {
        self.signal(Signal::Idle)
    }

    fn on_checkpoint(&mut self, id: u64, _: AlignStats) -> Result<(), Cancelled> {
        self.precommit(id)?;
        self.bad.barrier(id);
        self.out.broadcast_barrier(&self.shared.cancel, id)
    }

    fn on_finished(&mut self, final_id: u64) -> Result<(), Cancelled> {
        self.signal(Signal::End)?;
        self.precommit(final_id)?;
        self.bad.barrier(final_id);
        (self.out).broadcast(&self.shared.cancel, || Msg::End(final_id))
    }

    fn on_commit(&mut self, id: u64, last: bool) -> Result<(), Cancelled> {
        let sink = self.id.clone();
        let report = self.report(move |_| Event::SinkCommitted(sink, id));
        let upto = self.precommitted.partition_point(|(e, _)| *e <= id);
        let out: Vec<(u64, Written)> = self.precommitted.drain(..upto).collect();
        let metrics = Arc::clone(&self.metrics);
        let done: Done = Box::new(move |result| {
            if result.is_ok() {
                let now = Instant::now();
                for (_, written) in &out {
                    metrics
                        .records_out
                        .fetch_add(written.records, Ordering::Relaxed);
                    for (origin, n) in &written.origins {
                        let latency = now.saturating_duration_since(*origin);
                        metrics.record_latency.observe_n(latency, *n);
                    }
                }
            }
            report(result)
        });
        self.sink
            .commit(id, done)
            .map_err(|e| self.shared.fail(e))?;
        if last {
            // The final commit is done when this returns.
            self.sink.close().map_err(|e| self.shared.fail(e))?;
        }
        Ok(())
    }
}
