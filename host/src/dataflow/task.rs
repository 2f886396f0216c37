//! The threads of a running job: one per source, per operator instance and
//! per sink, connected by bounded channels that carry batches and, in-band,
//! checkpoint barriers and the end of the stream.
//!
//! Invariants:
//! - Every channel is FIFO; a barrier is sent on every outgoing channel after
//!   all records that precede it and before any that follow it.
//! - An instance snapshots exactly at the consistent cut its [`Aligner`]
//!   reports, then forwards the barrier, then processes released records.
//! - Blocking sends and receives wake up every [`POLL`] to honour
//!   cancellation, so a failed job never hangs.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{
    Receiver, RecvTimeoutError, Select, SendTimeoutError, Sender, TrySendError,
};
use serde_json::Value;

use crate::Batch;
use crate::checkpoint::coordinator::Ack;
use crate::connectors::sink::{Sink, SinkError};
use crate::connectors::source::{SourceError, SourceReader};
use crate::dataflow::align::{Action, Aligner, Event as AlignEvent};
use crate::dataflow::partition::Partitioner;
use crate::metrics::NodeMetrics;
use crate::store::InstanceDelta;
use crate::wasm::{InstanceError, OperatorInstance};

/// How often blocked threads check for cancellation.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// Bytes an instance may buffer during an alignment before it stops reading
/// its blocked channels (which then apply backpressure upstream).
const MAX_ALIGNMENT_BUFFER: usize = 64 << 20;

/// What travels on an edge.
#[derive(Debug)]
pub(crate) enum Msg {
    Batch(Batch),
    Barrier(u64),
    /// End of stream; the id is the final checkpoint's.
    End(u64),
}

/// What threads tell the coordinator.
#[derive(Debug)]
pub(crate) enum Event {
    Ack(u64, Ack),
    SourceAtEnd(String),
    SinkCommitted(String, u64),
    Failed(TaskError),
}

/// Commands to a source.
#[derive(Debug)]
pub(crate) enum SourceCtl {
    Trigger(u64),
    Finish(u64),
}

/// Why a task failed.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// A plugin call failed.
    #[error(transparent)]
    Instance(#[from] InstanceError),
    /// `process` failed on a batch.
    #[error("{error} (input port `{port}`, batch of {records} records)")]
    Process {
        /// The failure.
        error: InstanceError,
        /// The input port's name.
        port: String,
        /// Records in the batch.
        records: usize,
    },
    /// A source failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A sink failed.
    #[error(transparent)]
    Sink(#[from] SinkError),
}

/// The job was cancelled (another task failed, or the job stopped).
#[derive(Debug)]
pub(crate) struct Cancelled;

/// Shared by every task of one run.
#[derive(Clone)]
pub(crate) struct Shared {
    pub cancel: Arc<AtomicBool>,
    pub events: Sender<Event>,
}

impl Shared {
    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    fn event(&self, e: Event) {
        // The coordinator outlives every task; a send error means it is gone
        // because the run is over.
        let _ = self.events.send(e);
    }
}

fn send(
    shared: &Shared,
    metrics: &NodeMetrics,
    tx: &Sender<Msg>,
    msg: Msg,
) -> Result<(), Cancelled> {
    let mut msg = match tx.try_send(msg) {
        Ok(()) => return Ok(()),
        Err(TrySendError::Disconnected(_)) => return Err(Cancelled),
        Err(TrySendError::Full(m)) => m,
    };
    // Backpressure: the downstream channel is full.
    let blocked = Instant::now();
    let _account = Defer(|| {
        metrics
            .blocked_ns
            .fetch_add(blocked.elapsed().as_nanos() as u64, Ordering::Relaxed);
    });
    loop {
        match tx.send_timeout(msg, POLL) {
            Ok(()) => return Ok(()),
            Err(SendTimeoutError::Timeout(m)) => {
                if shared.cancelled() {
                    return Err(Cancelled);
                }
                msg = m;
            }
            Err(SendTimeoutError::Disconnected(_)) => return Err(Cancelled),
        }
    }
}

/// Runs a closure when dropped.
struct Defer<F: FnMut()>(F);

impl<F: FnMut()> Drop for Defer<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

fn count_in(m: &NodeMetrics, batch: &Batch) {
    m.records_in
        .fetch_add(batch.len() as u64, Ordering::Relaxed);
    m.bytes_in
        .fetch_add(batch.data_bytes() as u64, Ordering::Relaxed);
}

/// One outgoing connection to every instance of a downstream node.
pub(crate) struct Edge {
    pub senders: Vec<Sender<Msg>>,
    pub partitioner: Partitioner,
}

/// All outgoing edges of a node.
pub(crate) struct Output {
    pub edges: Vec<Edge>,
    pub metrics: Arc<NodeMetrics>,
}

impl Output {
    fn send(&mut self, shared: &Shared, batch: Batch) -> Result<(), Cancelled> {
        if batch.is_empty() {
            return Ok(());
        }
        self.metrics
            .records_out
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        self.metrics
            .bytes_out
            .fetch_add(batch.data_bytes() as u64, Ordering::Relaxed);
        let last = self.edges.len().saturating_sub(1);
        let mut batch = Some(batch);
        for (i, edge) in self.edges.iter_mut().enumerate() {
            let b = if i == last {
                batch.take().expect("last edge")
            } else {
                batch.clone().expect("not taken yet")
            };
            if edge.senders.len() == 1 {
                send(shared, &self.metrics, &edge.senders[0], Msg::Batch(b))?;
                continue;
            }
            let partitioner = &mut edge.partitioner;
            let parts = b.partition(edge.senders.len(), |key| partitioner.route(key));
            for (tx, part) in edge.senders.iter().zip(parts) {
                if !part.is_empty() {
                    send(shared, &self.metrics, tx, Msg::Batch(part))?;
                }
            }
        }
        Ok(())
    }

    fn broadcast(&self, shared: &Shared, make: impl Fn() -> Msg) -> Result<(), Cancelled> {
        for edge in &self.edges {
            for tx in &edge.senders {
                send(shared, &self.metrics, tx, make())?;
            }
        }
        Ok(())
    }
}

/// A source thread: reads batches, injects barriers when triggered, ends the
/// stream when told to finish.
pub(crate) fn run_source(
    shared: Shared,
    id: String,
    mut reader: Box<dyn SourceReader>,
    batch_size: usize,
    rate: Option<u64>,
    ctl: Receiver<SourceCtl>,
    mut out: Output,
) -> Result<(), Cancelled> {
    let mut at_end = false;
    // With a rate limit, small batches (about 20 per second) keep it smooth.
    let batch_size = rate.map_or(batch_size, |r| batch_size.min((r / 20).max(1) as usize));
    let started = Instant::now();
    let mut sent: u64 = 0;
    // A live source had nothing on the last read.
    let mut idle = false;
    loop {
        if shared.cancelled() {
            return Err(Cancelled);
        }
        let throttled = rate
            .is_some_and(|r| started.elapsed() < Duration::from_secs_f64(sent as f64 / r as f64));
        let wait = if at_end {
            Some(POLL)
        } else if throttled || idle {
            Some(Duration::from_millis(5))
        } else {
            None
        };
        let cmd = match wait {
            Some(wait) => match ctl.recv_timeout(wait) {
                Ok(c) => Some(c),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return Err(Cancelled),
            },
            None => ctl.try_recv().ok(),
        };
        match cmd {
            Some(SourceCtl::Trigger(n)) => {
                shared.event(Event::Ack(
                    n,
                    Ack::Source {
                        source: id.clone(),
                        offset: reader.offset(),
                    },
                ));
                out.broadcast(&shared, || Msg::Barrier(n))?;
                continue;
            }
            Some(SourceCtl::Finish(n)) => {
                shared.event(Event::Ack(
                    n,
                    Ack::Source {
                        source: id.clone(),
                        offset: reader.offset(),
                    },
                ));
                return out.broadcast(&shared, || Msg::End(n));
            }
            None => {}
        }
        if at_end || throttled {
            continue;
        }
        idle = false;
        match reader.read_batch(batch_size) {
            Ok(Some(batch)) if batch.is_empty() => idle = true,
            Ok(Some(batch)) => {
                sent += batch.len() as u64;
                out.send(&shared, batch)?
            }
            Ok(None) => {
                at_end = true;
                shared.event(Event::SourceAtEnd(id.clone()));
            }
            Err(e) => {
                shared.event(Event::Failed(e.into()));
                return Err(Cancelled);
            }
        }
    }
}

/// The inputs of an instance or sink: one receiver per upstream instance,
/// with the input port it feeds.
pub(crate) struct Inputs {
    pub channels: Vec<(u32, Receiver<Msg>)>,
    pub metrics: Arc<NodeMetrics>,
}

/// Receives the next message from a channel the aligner lets us read, or
/// `None` on timeout.
fn receive(inputs: &Inputs, aligner: &Aligner<Batch>, extra: Option<&Receiver<u64>>) -> Received {
    let mut sel = Select::new();
    let mut index = Vec::with_capacity(inputs.channels.len());
    let over = aligner.buffered_bytes() > MAX_ALIGNMENT_BUFFER;
    for (i, (_, rx)) in inputs.channels.iter().enumerate() {
        if aligner.is_closed(i) || (over && aligner.is_blocked(i)) {
            continue;
        }
        sel.recv(rx);
        index.push(i);
    }
    let extra_at = extra.map(|rx| sel.recv(rx));
    let Ok(op) = sel.select_timeout(POLL) else {
        return Received::Timeout;
    };
    if Some(op.index()) == extra_at {
        return match op.recv(extra.expect("registered")) {
            Ok(id) => Received::Commit(id),
            Err(_) => Received::Disconnected,
        };
    }
    let channel = index[op.index()];
    match op.recv(&inputs.channels[channel].1) {
        Ok(msg) => Received::Msg(channel, msg),
        Err(_) => Received::Disconnected,
    }
}

enum Received {
    Msg(usize, Msg),
    Commit(u64),
    Timeout,
    Disconnected,
}

/// Tracks one alignment's duration and peak buffering.
#[derive(Default)]
struct AlignmentClock {
    started: Option<Instant>,
    peak_bytes: usize,
}

impl AlignmentClock {
    fn observe(&mut self, aligner: &Aligner<Batch>, msg: &Msg) {
        if aligner.aligning().is_none() && matches!(msg, Msg::Barrier(_)) {
            self.started = Some(Instant::now());
            self.peak_bytes = 0;
        }
    }

    fn after(&mut self, aligner: &Aligner<Batch>) {
        self.peak_bytes = self.peak_bytes.max(aligner.buffered_bytes());
    }

    fn finish(&mut self) -> (Duration, u64) {
        let d = self.started.take().map_or(Duration::ZERO, |s| s.elapsed());
        (d, std::mem::take(&mut self.peak_bytes) as u64)
    }
}

/// Feeds `msg` from `channel` to the aligner; remembers the final
/// checkpoint id carried by `End`.
fn feed(
    aligner: &mut Aligner<Batch>,
    clock: &mut AlignmentClock,
    final_id: &mut Option<u64>,
    channel: usize,
    msg: Msg,
    actions: &mut Vec<Action<Batch>>,
) {
    clock.observe(aligner, &msg);
    let (event, bytes) = match msg {
        Msg::Batch(b) => {
            let bytes = if aligner.is_blocked(channel) {
                b.size()
            } else {
                0
            };
            (AlignEvent::Batch(b), bytes)
        }
        Msg::Barrier(n) => (AlignEvent::Barrier(n), 0),
        Msg::End(n) => {
            *final_id = Some(n);
            (AlignEvent::End, 0)
        }
    };
    aligner.on_event(channel, event, bytes, actions);
    clock.after(aligner);
}

/// A cheap fingerprint of snapshot bytes, to skip storing unchanged ones.
pub(crate) fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    b.hash(&mut h);
    h.finish()
}

/// An operator instance thread.
pub(crate) struct InstanceTask {
    pub shared: Shared,
    pub operator: String,
    pub index: u32,
    pub instance: OperatorInstance,
    pub inputs: Inputs,
    pub out: Output,
    /// Hash of the snapshot bytes in the last checkpoint (to skip unchanged).
    pub last_snapshot: Option<u64>,
}

impl InstanceTask {
    fn emit(&mut self) -> Result<(), Cancelled> {
        // Consumers read the operator's first output port.
        for port in 0..self.instance.output_ports() {
            let records = self.instance.take_output_batch(port as u32);
            if port == 0 {
                self.out.send(&self.shared, records)?;
            }
        }
        Ok(())
    }

    fn fail(&self, e: InstanceError) -> Cancelled {
        self.shared.event(Event::Failed(e.into()));
        Cancelled
    }

    fn snapshot(
        &mut self,
        id: u64,
        alignment: Duration,
        buffered_bytes: u64,
    ) -> Result<(), Cancelled> {
        let changes = self.instance.state_mut().take_changes();
        let bytes = self.instance.snapshot().map_err(|e| self.fail(e))?;
        let h = hash_bytes(&bytes);
        let snapshot = (self.last_snapshot != Some(h)).then_some(bytes);
        self.last_snapshot = Some(h);
        let delta = InstanceDelta {
            operator: self.operator.clone(),
            instance: self.index,
            changes,
            snapshot,
        };
        self.shared.event(Event::Ack(
            id,
            Ack::Instance {
                delta,
                alignment,
                buffered_bytes,
            },
        ));
        Ok(())
    }

    pub(crate) fn run(mut self) -> Result<(), Cancelled> {
        let mut aligner = Aligner::new(self.inputs.channels.len());
        let mut clock = AlignmentClock::default();
        let mut actions = Vec::new();
        let mut final_id = None;
        loop {
            if self.shared.cancelled() {
                return Err(Cancelled);
            }
            let (channel, msg) = match receive(&self.inputs, &aligner, None) {
                Received::Msg(c, m) => (c, m),
                Received::Timeout | Received::Commit(_) => continue,
                Received::Disconnected => return Err(Cancelled),
            };
            feed(
                &mut aligner,
                &mut clock,
                &mut final_id,
                channel,
                msg,
                &mut actions,
            );
            for action in actions.drain(..) {
                match action {
                    Action::Process { channel, batch } => {
                        let port = self.inputs.channels[channel].0;
                        count_in(&self.inputs.metrics, &batch);
                        let started = Instant::now();
                        if let Err(error) = self.instance.process_batch(port, &batch) {
                            let port = self
                                .instance
                                .info()
                                .inputs
                                .get(port as usize)
                                .cloned()
                                .unwrap_or_default();
                            let records = batch.len();
                            self.shared.event(Event::Failed(TaskError::Process {
                                error,
                                port,
                                records,
                            }));
                            return Err(Cancelled);
                        }
                        self.inputs.metrics.batch_latency.observe(started.elapsed());
                        self.emit()?;
                    }
                    Action::Checkpoint { id } => {
                        self.instance.on_checkpoint(id).map_err(|e| self.fail(e))?;
                        self.emit()?;
                        let (alignment, buffered) = clock.finish();
                        self.snapshot(id, alignment, buffered)?;
                        self.out.broadcast(&self.shared, || Msg::Barrier(id))?;
                    }
                    Action::Abort { id, newer } => {
                        tracing::debug!(operator = %self.operator, "checkpoint {id} abandoned for {newer}");
                    }
                    Action::Finished => {
                        let id = final_id.expect("every channel ended with End");
                        self.instance.finish().map_err(|e| self.fail(e))?;
                        self.emit()?;
                        // The final checkpoint is a checkpoint like any other.
                        self.instance.on_checkpoint(id).map_err(|e| self.fail(e))?;
                        self.emit()?;
                        self.snapshot(id, Duration::ZERO, 0)?;
                        return self.out.broadcast(&self.shared, || Msg::End(id));
                    }
                }
            }
        }
    }
}

/// A sink thread: stages records, precommits at barriers, commits when the
/// coordinator says the checkpoint is complete.
pub(crate) struct SinkTask {
    pub shared: Shared,
    pub id: String,
    pub sink: Box<dyn Sink>,
    pub inputs: Inputs,
    pub commits: Receiver<u64>,
}

impl SinkTask {
    fn fail(&self, e: SinkError) -> Cancelled {
        self.shared.event(Event::Failed(e.into()));
        Cancelled
    }

    /// Reports the outcome of a sink step to the coordinator: `ok` on
    /// success, the failure otherwise.
    fn report(
        &self,
        ok: impl FnOnce(Value) -> Event + Send + 'static,
    ) -> crate::connectors::sink::Done {
        let shared = self.shared.clone();
        Box::new(move |result| match result {
            Ok(info) => shared.event(ok(info)),
            Err(e) => shared.event(Event::Failed(e.into())),
        })
    }

    fn precommit(&mut self, id: u64) -> Result<(), Cancelled> {
        let sink = self.id.clone();
        let done = self.report(move |info| Event::Ack(id, Ack::Sink { sink, info }));
        self.sink.precommit(id, done).map_err(|e| self.fail(e))
    }

    fn commit(&mut self, id: u64) -> Result<(), Cancelled> {
        let sink = self.id.clone();
        let done = self.report(move |_| Event::SinkCommitted(sink, id));
        self.sink.commit(id, done).map_err(|e| self.fail(e))
    }

    pub(crate) fn run(mut self) -> Result<(), Cancelled> {
        let mut aligner = Aligner::new(self.inputs.channels.len());
        let mut clock = AlignmentClock::default();
        let mut actions = Vec::new();
        let mut final_id = None;
        let mut finished = false;
        loop {
            if self.shared.cancelled() {
                return Err(Cancelled);
            }
            if finished {
                // Wait for the final checkpoint's commit.
                match self.commits.recv_timeout(POLL) {
                    Ok(id) => {
                        self.commit(id)?;
                        if Some(id) == final_id {
                            // The final commit is done when this returns.
                            return self.sink.close().map_err(|e| self.fail(e));
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return Err(Cancelled),
                }
                continue;
            }
            let (channel, msg) = match receive(&self.inputs, &aligner, Some(&self.commits)) {
                Received::Msg(c, m) => (c, m),
                Received::Commit(id) => {
                    self.commit(id)?;
                    continue;
                }
                Received::Timeout => continue,
                Received::Disconnected => return Err(Cancelled),
            };
            feed(
                &mut aligner,
                &mut clock,
                &mut final_id,
                channel,
                msg,
                &mut actions,
            );
            for action in actions.drain(..) {
                match action {
                    Action::Process { batch, .. } => {
                        count_in(&self.inputs.metrics, &batch);
                        let started = Instant::now();
                        self.sink.write(&batch).map_err(|e| self.fail(e))?;
                        self.inputs.metrics.batch_latency.observe(started.elapsed());
                    }
                    Action::Checkpoint { id } => {
                        clock.finish();
                        self.precommit(id)?;
                    }
                    Action::Abort { .. } => {}
                    Action::Finished => {
                        let id = final_id.expect("every channel ended with End");
                        self.precommit(id)?;
                        finished = true;
                    }
                }
            }
        }
    }
}
