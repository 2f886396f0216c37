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

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::Batch;
use crate::connectors::sink::{Done, Sink};
use crate::dataflow::cancel::Cancelled;
use crate::dataflow::input::{self, InputChannels, InputHandler};
use crate::dataflow::protocol::{Ack, Event};
use crate::metrics::NodeMetrics;
use crate::tasks::{Shared, TaskError, receive_batch};

/// A sink thread.
pub(crate) struct SinkTask {
    /// The attempt's cancel flag and events.
    pub shared: Shared,
    /// Sink id.
    pub id: String,
    /// The opened sink.
    pub sink: Box<dyn Sink>,
    /// The sink's counters (records in, batch latency).
    pub metrics: Arc<NodeMetrics>,
}

impl SinkTask {
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

    fn precommit(&mut self, id: u64) -> Result<(), Cancelled> {
        let sink = self.id.clone();
        let done = self.report(move |info| Event::Ack(id, Ack::Sink { sink, info }));
        self.sink
            .precommit(id, done)
            .map_err(|e| self.shared.fail(e))
    }
}

impl InputHandler for SinkTask {
    fn on_batch(&mut self, _port: u32, batch: Batch) -> Result<(), Cancelled> {
        let (sink, shared) = (&mut self.sink, &self.shared);
        receive_batch(&self.metrics, &batch, |batch| {
            sink.write(batch).map_err(|e| shared.fail(e))
        })
    }

    fn on_checkpoint(&mut self, id: u64, _: Duration, _: u64) -> Result<(), Cancelled> {
        self.precommit(id)
    }

    fn on_finished(&mut self, final_id: u64) -> Result<(), Cancelled> {
        self.precommit(final_id)
    }

    fn on_commit(&mut self, id: u64, last: bool) -> Result<(), Cancelled> {
        let sink = self.id.clone();
        let done = self.report(move |_| Event::SinkCommitted(sink, id));
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
