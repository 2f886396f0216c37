//! The operator-instance thread: drives one [`OperatorInstance`] through
//! the aligned-input loop, sending what it emits downstream.
//!
//! Invariants:
//! - **Snapshot at the cut.** At checkpoint `n` the instance calls
//!   `on-checkpoint(n)`, sends what it emitted, takes its state changes and
//!   snapshot, acknowledges `n`, and only then forwards `Barrier(n)`; the
//!   batches the alignment released are processed after that.
//! - **Unaligned** (an overtaken checkpoint `n`): at the snapshot the
//!   instance calls `on-checkpoint(n)`, sends what it emitted, takes its
//!   state changes and snapshot and forwards `Barrier(n)` (announced
//!   first) at once; it acknowledges `n` only when every channel delivered
//!   barrier `n`, with the in-flight data recorded meanwhile in its delta.
//!   The pause is then the time of the snapshot alone.
//! - **Replay first.** The in-flight data of the restored checkpoint is
//!   processed, in its order, before anything is read from the inputs.
//! - The pause of checkpoint `n` in its acknowledgement is the time from
//!   the aligned barrier (the start of `on-checkpoint(n)`) to the
//!   acknowledgement, measured on this thread.
//! - The delta of checkpoint `n` holds every state change since the
//!   instance's previous acknowledged snapshot; snapshot bytes are sent only
//!   when they differ from the previous ones.
//! - What a call emitted on output port `p` goes to the consumers wired to
//!   `p`, ports in order; a port nothing consumes drops it
//!   (`run::warn_unconsumed_outputs` warns about each such port).
//! - A plugin reads text: the rows of a batch it receives (another
//!   plugin's [`Encoding::Row`](crate::dataflow::batch::Encoding) values)
//!   are written as JSON on this thread first ([`Batch::rows_as_text`]),
//!   or only checked for a plugin that reads rows ([`Batch::check_rows`]).
//! - A batch a replay found bad records in ([`BadInputs`]) goes to the
//!   plugin without them, as its `on_error` says ([`BadRecords`]); the
//!   others in one call, or one call each while the replay looks for the
//!   next.
//! - **Timers before the watermark.** When the inputs' watermark advances
//!   to `w`, the instance fires every event-time timer at or before `w`,
//!   sends what they emitted, and only then forwards `Watermark(w)`: what
//!   a window emits for `w` is never late downstream.
//! - At the end of input the watermark becomes the end of time: every
//!   event-time timer fires before `finish`. Processing-time timers still
//!   pending then do not fire.
//! - **Recording.** An instance whose operator records its input
//!   (`record_inputs`) records every call into its plugin (after the
//!   conversions and bad-record removal above: what the plugin was given)
//!   and what each call emitted, with the call's processing time, which
//!   `processing-time` returns throughout the call; the recording goes
//!   with the snapshot that ends its epoch ([`InstanceDelta::recorded`]),
//!   or is `None` for an epoch whose recording outgrew `record_max_bytes`.
//! - The instance's watermark and pending timer counts in `metrics` are
//!   those of its last call (and of its start, after a restore): they are
//!   published after every call that can change them.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Batch;
use crate::dataflow::cancel::Cancelled;
use crate::dataflow::inflight::InFlight;
use crate::dataflow::input::{self, InputChannels, InputHandler};
use crate::dataflow::output::Output;
use crate::dataflow::protocol::{Ack, AlignStats, Event, InstanceDelta, Msg};
use crate::dataflow::recording::Recorder;
use crate::dataflow::watermark::END_OF_TIME;
use crate::keyed::timers::Domain;
use crate::metrics::{BadKind, NodeMetrics};
use crate::threads::bad_records::{BadInputs, BadRecords, Letter};
use crate::threads::{FailedBatch, Shared, TaskError, receive_batch};
use crate::wasm::OperatorInstance;
use crate::wasm::host::timers::now_millis;

/// A cheap fingerprint of snapshot bytes, to skip storing unchanged ones.
pub(crate) fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    b.hash(&mut h);
    h.finish()
}

/// An operator instance thread.
pub(crate) struct InstanceTask {
    /// The attempt's cancel flag and events.
    pub shared: Shared,
    /// Operator id.
    pub operator: String,
    /// Instance index.
    pub index: u32,
    /// The instantiated (and restored) plugin.
    pub instance: OperatorInstance,
    /// The operator's counters (records in, batch latency).
    pub metrics: Arc<NodeMetrics>,
    /// Its outgoing edges.
    pub out: Output,
    /// Hash of the snapshot bytes in the last checkpoint (to skip unchanged).
    pub last_snapshot: Option<u64>,
    /// The restored checkpoint's in-flight data, replayed first.
    pub replay: Vec<(u32, Batch)>,
    /// The overtaken checkpoint whose snapshot waits for its in-flight data.
    pub overtaken: Option<Overtaken>,
    /// The records replays found its plugin fails on.
    pub bad_inputs: Arc<BadInputs>,
    /// What becomes of them (`on_error`).
    pub bad: BadRecords,
    /// The recording of the current epoch, when its operator records.
    pub recording: Option<Recording>,
}

/// An epoch being recorded ([`Recorder`]) and its bound.
pub(crate) struct Recording {
    recorder: Recorder,
    /// Most bytes of one epoch (`record_max_bytes`): past it the epoch is
    /// not recorded.
    max_bytes: u64,
    /// The epoch outgrew `max_bytes`.
    overflowed: bool,
}

impl Recording {
    /// Recording epochs of at most `max_bytes`.
    pub(crate) fn new(max_bytes: u64) -> Self {
        Recording {
            recorder: Recorder::default(),
            max_bytes,
            overflowed: false,
        }
    }

    /// Ends the epoch: its recording, `None` if it overflowed.
    fn take(&mut self) -> Option<Vec<u8>> {
        let bytes = self.recorder.take();
        (!std::mem::take(&mut self.overflowed)).then_some(bytes)
    }

    /// Stops recording the epoch once it is over its bound.
    fn check_bound(&mut self, operator: &str, index: u32) {
        if !self.overflowed && self.recorder.len() as u64 > self.max_bytes {
            tracing::warn!(
                "instance {index} of operator `{operator}` records more than record_max_bytes ({} bytes) in one checkpoint epoch: this epoch is not recorded",
                self.max_bytes
            );
            self.overflowed = true;
        }
        if self.overflowed {
            self.recorder.clear();
        }
    }
}

/// A snapshot taken for an overtaken checkpoint, not yet acknowledged.
pub(crate) struct Overtaken {
    id: u64,
    delta: InstanceDelta,
    pause: Duration,
}

impl InstanceTask {
    /// The thread body: processes `inputs` until they end or the job is
    /// cancelled.
    pub(crate) fn process_inputs(mut self, inputs: InputChannels) -> Result<(), Cancelled> {
        let cancel = self.shared.cancel.clone();
        self.publish_event_time();
        for (port, batch) in std::mem::take(&mut self.replay) {
            self.on_batch(port, batch)?;
        }
        input::drive(&inputs, &cancel, &mut self)
    }

    /// Publishes the watermark and pending timer counts (O(1)).
    fn publish_event_time(&self) {
        let timers = self.instance.timers();
        self.metrics.set_event_time(
            self.index,
            timers.watermark(),
            timers.len(Domain::EventTime),
            timers.len(Domain::ProcessingTime),
        );
    }

    /// Before a call into the plugin: an instance that records pins the
    /// plugin's clock to the time now, records the call with `step` and
    /// returns that time (`None` when it does not record).
    fn begin_call(&mut self, step: impl FnOnce(&mut Recorder, i64)) -> Option<i64> {
        let r = self.recording.as_mut()?;
        let now = now_millis();
        step(&mut r.recorder, now);
        self.instance.pin_clock(Some(now));
        Some(now)
    }

    /// Sends what the last call emitted downstream, port by port. Every
    /// call into the plugin (and every watermark advance, which fires
    /// timers) ends here, so this is where the event-time gauges are
    /// published too.
    ///
    /// What a call emits has the origin and provenance of its input batch
    /// (`from`), or, emitted by a timer or a checkpoint hook, the time of
    /// the call and no provenance.
    fn emit(&mut self, from: Option<&Batch>) -> Result<(), Cancelled> {
        self.publish_event_time();
        let origin = from.and_then(Batch::origin).unwrap_or_else(Instant::now);
        let provenance = from.and_then(Batch::provenance);
        for port in 0..self.instance.output_ports() as u32 {
            let mut records = self.instance.take_output_batch(port);
            if !records.is_empty() {
                records.set_origin(origin);
                records.set_provenance(provenance.cloned());
                if let Some(r) = &mut self.recording {
                    r.recorder.output(port, &records);
                }
            }
            self.out.send(&self.shared.cancel, port, records)?;
        }
        if let Some(r) = &mut self.recording {
            r.check_bound(&self.operator, self.index);
        }
        Ok(())
    }

    /// Takes checkpoint `id` once its barrier aligned: snapshots and
    /// acknowledges it with this thread's pause (from now to the
    /// acknowledgement).
    fn checkpoint(&mut self, id: u64, align: AlignStats) -> Result<(), Cancelled> {
        let paused = Instant::now();
        let delta = self.snapshot(id)?;
        self.acknowledge(id, delta, align, paused.elapsed());
        Ok(())
    }

    /// Calls `on-checkpoint(id)`, sends what it emitted, and takes the state
    /// changes and snapshot (the bytes only when they changed).
    fn snapshot(&mut self, id: u64) -> Result<InstanceDelta, Cancelled> {
        self.begin_call(|r, now| r.checkpoint(now, id));
        self.instance
            .on_checkpoint(id)
            .map_err(|e| self.shared.fail(e))?;
        self.emit(None)?;
        let changes = self.instance.state_mut().take_changes();
        let timers = self.instance.timers_mut().take_changes();
        let bytes = self.instance.snapshot().map_err(|e| self.shared.fail(e))?;
        let h = hash_bytes(&bytes);
        let snapshot = (self.last_snapshot != Some(h)).then_some(bytes);
        self.last_snapshot = Some(h);
        Ok(InstanceDelta {
            operator: self.operator.clone(),
            instance: self.index,
            changes,
            snapshot,
            timers,
            inflight: None,
            recorded: self.recording.as_mut().and_then(Recording::take),
        })
    }

    fn acknowledge(&self, id: u64, delta: InstanceDelta, align: AlignStats, pause: Duration) {
        self.shared.event(Event::Ack(
            id,
            Ack::Instance {
                delta,
                align,
                pause,
            },
        ));
    }

    /// Calls `process` with `batch` on input `port`, then sends what it
    /// emitted; `record` is the index of its one record in the batch it
    /// came in, when it goes alone to find the one the plugin fails on.
    fn process(
        &mut self,
        port: u32,
        batch: &Batch,
        record: Option<usize>,
    ) -> Result<(), Cancelled> {
        self.begin_call(|r, now| r.process(now, port, batch));
        let (instance, shared, operator) = (&mut self.instance, &self.shared, &self.operator);
        let failed = |instance: &OperatorInstance, error| {
            let batch = Box::new(failed_batch(operator, instance, port, batch, record));
            shared.fail(TaskError::Process { error, batch })
        };
        receive_batch(&self.metrics, batch, |batch| {
            (instance.process_batch(port, batch)).map_err(|error| failed(instance, error))
        })?;
        let mut rejected = instance.take_rejected(batch);
        if self.bad.fails() && !rejected.is_empty() {
            // A record the plugin refused fails the attempt as if the
            // plugin had returned `invalid-input` for the batch.
            let (_, first) = rejected.swap_remove(0);
            return Err(failed(instance, first));
        }
        if !rejected.is_empty() {
            let input = input_name(instance, port);
            let letters: Vec<Letter> = (rejected.iter())
                .map(|(i, error)| {
                    let mut letter =
                        Letter::of(batch, *i, (BadKind::InvalidInput, &error.to_string()));
                    letter.port = Some(input.clone());
                    letter
                })
                .collect();
            let handled = self.bad.went_past(&letters, &self.metrics);
            self.bad.send(handled, &mut self.out, &self.shared)?;
        }
        self.emit(Some(batch))
    }

    /// Fires the timers of `domain` due at `upto` and sends what they
    /// emitted.
    fn fire(&mut self, domain: Domain, upto: i64) -> Result<(), Cancelled> {
        // Recorded by the caller: a watermark's advance or a timer round.
        self.instance
            .fire_timers(domain, upto)
            .map_err(|e| self.shared.fail(e))?;
        self.emit(None)
    }

    /// The instance's watermark is `w`: fires the event-time timers it
    /// covers, then forwards it.
    fn advance(&mut self, w: i64) -> Result<(), Cancelled> {
        self.begin_call(|r, now| r.watermark(now, w));
        self.instance.set_watermark(w);
        self.fire(Domain::EventTime, w)?;
        self.out
            .broadcast(&self.shared.cancel, || Msg::Watermark(w))
    }
}

impl InputHandler for InstanceTask {
    fn on_watermark(&mut self, watermark: i64) -> Result<(), Cancelled> {
        self.advance(watermark)
    }

    fn on_idle(&mut self) -> Result<(), Cancelled> {
        self.out.broadcast(&self.shared.cancel, || Msg::Idle)
    }

    fn watermark_floor(&self) -> Option<i64> {
        self.instance.timers().watermark()
    }

    fn next_timer(&self) -> Option<Instant> {
        let due = self.instance.timers().next(Domain::ProcessingTime)?;
        let wait = due.saturating_sub(now_millis()).max(0) as u64;
        Some(Instant::now() + Duration::from_millis(wait))
    }

    fn on_time(&mut self) -> Result<(), Cancelled> {
        let now = self
            .begin_call(|r, now| r.timers(now))
            .unwrap_or_else(now_millis);
        self.fire(Domain::ProcessingTime, now)
    }

    fn on_batch(&mut self, port: u32, batch: Batch) -> Result<(), Cancelled> {
        // A plugin that reads rows gets them checked, others as JSON text.
        let batch = match self.instance.reads_rows() {
            true => batch.check_rows().map(|()| batch),
            false => batch.rows_as_text(),
        };
        let batch = batch.map_err(|error| {
            self.shared.fail(TaskError::BadRow {
                reader: format!(
                    "input `{}` of operator `{}`",
                    input_name(&self.instance, port),
                    self.operator
                ),
                error,
            })
        })?;
        let inputs = self.bad_inputs.clone();
        let found = (batch.provenance()).and_then(|from| inputs.of(&self.operator, from));
        let Some(found) = found else {
            return self.process(port, &batch, None);
        };
        // A batch a replay found bad records in: past them, the others in
        // one call, or one call each to find the next.
        let mut letters = Vec::new();
        let mut rest = Vec::new();
        for i in 0..batch.len() {
            match found.bad.get(&i) {
                Some(record) => {
                    let mut letter = Letter::of(&batch, i, (record.kind, &record.error));
                    letter.first_time = record.first_time();
                    letter.port = Some(input_name(&self.instance, port));
                    letters.push(letter);
                }
                None => rest.push(i),
            }
        }
        let handled = self.bad.went_past(&letters, &self.metrics);
        self.bad.send(handled, &mut self.out, &self.shared)?;
        if found.one_by_one || rest.len() == 1 {
            for i in rest {
                self.process(port, &batch.select(&[i]), Some(i))?;
            }
            return Ok(());
        }
        self.process(port, &batch.select(&rest), None)
    }

    fn on_checkpoint(&mut self, id: u64, align: AlignStats) -> Result<(), Cancelled> {
        self.checkpoint(id, align)?;
        self.bad.barrier(id);
        self.out.broadcast_barrier(&self.shared.cancel, id)
    }

    fn on_snapshot(&mut self, id: u64) -> Result<(), Cancelled> {
        let paused = Instant::now();
        let delta = self.snapshot(id)?;
        let pause = paused.elapsed();
        self.overtaken = Some(Overtaken { id, delta, pause });
        self.out.broadcast_barrier(&self.shared.cancel, id)
    }

    fn on_complete(&mut self, id: u64, align: AlignStats, held: InFlight) -> Result<(), Cancelled> {
        let taken = self.overtaken.take().filter(|o| o.id == id);
        let Overtaken {
            mut delta, pause, ..
        } = taken.expect("a snapshot before its completion");
        delta.inflight = Some(held.encode());
        self.acknowledge(id, delta, align, pause);
        Ok(())
    }

    fn on_abort(&mut self, id: u64, newer: u64) {
        tracing::debug!(operator = %self.operator, "checkpoint {id} abandoned for {newer}");
        // An overtaken checkpoint is skipped only by an upstream that
        // abandoned it, so this acknowledgement is stale: the coordinator
        // keeps its delta (and drops any in-flight data) for the next one.
        if let Some(o) = self.overtaken.take() {
            self.acknowledge(o.id, o.delta, AlignStats::default(), o.pause);
        }
    }

    fn on_finished(&mut self, final_id: u64) -> Result<(), Cancelled> {
        if self.instance.timers().watermark() != Some(END_OF_TIME) {
            self.advance(END_OF_TIME)?;
        }
        self.begin_call(|r, now| r.finish(now));
        self.instance.finish().map_err(|e| self.shared.fail(e))?;
        self.emit(None)?;
        // The final checkpoint is a checkpoint like any other.
        self.checkpoint(final_id, AlignStats::default())?;
        self.out
            .broadcast(&self.shared.cancel, || Msg::End(final_id))
    }
}

/// What the failure of operator `operator`'s `process` on `batch` (input
/// `port`; `record` as for [`InstanceTask::process`]) reports of it.
fn failed_batch(
    operator: &str,
    instance: &OperatorInstance,
    port: u32,
    batch: &Batch,
    record: Option<usize>,
) -> FailedBatch {
    FailedBatch {
        operator: operator.to_owned(),
        port: input_name(instance, port),
        records: batch.len(),
        from: batch.provenance().cloned(),
        record,
    }
}

/// The name of `instance`'s input port `port`.
fn input_name(instance: &OperatorInstance, port: u32) -> String {
    let inputs = &instance.info().inputs;
    inputs.get(port as usize).cloned().unwrap_or_default()
}
