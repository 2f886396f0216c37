//! Every message of a running job, on data edges and on control channels:
//!
//! ```text
//!   source ──Msg──► instance ──Msg──► sink          (bounded data edges)
//!   coordinator ──Command──► driver ──SourceCtl──► source
//!   driver ──commit id (u64)──► sink
//!   source, instance, sink ──Event(Ack, ...)──► driver ──Ack──► coordinator
//! ```
//!
//! Invariants:
//! - **FIFO edges, barriers in order.** Every edge is a FIFO channel. A
//!   sender sends `Barrier(n)` (or `End(F)`) on every outgoing channel after
//!   all batches that precede it and before any that follow it, and barrier
//!   ids on one channel strictly increase.
//! - `End(F)` is the last message on its channel; `F` is the id of the final
//!   checkpoint, the same on every channel of a job.
//! - A source or instance acknowledges checkpoint `n` ([`Ack`]) before it
//!   sends `Barrier(n)` (or `End(n)`) downstream, except an instance that
//!   overtook `n` (an unaligned checkpoint): it forwards `Barrier(n)` at its
//!   snapshot and acknowledges once every input channel delivered it, with
//!   the in-flight data in its [`InstanceDelta`].
//! - **Watermarks in band.** `Watermark(t)` promises that no record with a
//!   timestamp at or below `t` follows on its channel (records that do are
//!   *late*); the values a sender sends on one channel strictly increase.
//!   Senders broadcast watermarks and `Idle` on every outgoing channel, after
//!   the batches before them. `Idle` holds until the next batch or watermark
//!   on that channel (see [`crate::dataflow::watermark`]).

use std::time::Duration;

use serde_json::Value;

use crate::dataflow::batch::Batch;
use crate::keyed::changes::StateChanges;

/// What travels on a data edge, from one instance (or source) to one
/// instance (or sink) downstream.
#[derive(Debug)]
pub(crate) enum Msg {
    /// Records, in flat form.
    Batch(Batch),
    /// Checkpoint barrier `n`: every batch before it belongs to checkpoint
    /// `n`, every batch after it to a later one.
    Barrier(u64),
    /// Event time on this channel reached `.0` (milliseconds since the
    /// Unix epoch; `i64::MAX` once the sender's input has ended).
    Watermark(i64),
    /// The sender has no input for now: leave this channel out of the
    /// watermark until it sends a batch or a watermark again.
    Idle,
    /// End of stream; the id is the final checkpoint's. Nothing follows.
    End(u64),
}

/// What the job's threads tell the driver (and through it the
/// coordinator). `F` is the failure type of a thread.
#[derive(Debug)]
pub(crate) enum Event<F> {
    /// A participant acknowledged checkpoint `.0`.
    Ack(u64, Ack),
    /// The source reached the end of its input and waits to be finished.
    SourceAtEnd(String),
    /// The sink made checkpoint `.1` visible.
    SinkCommitted(String, u64),
    /// A thread failed; the job's attempt ends.
    Failed(F),
}

/// Commands from the driver to a source.
#[derive(Debug)]
pub(crate) enum SourceCtl {
    /// Acknowledge checkpoint `n` with the current offset, then send
    /// `Barrier(n)` downstream.
    Trigger(u64),
    /// Acknowledge the final checkpoint `n`, then send `End(n)` downstream
    /// and stop.
    Finish(u64),
    /// The oldest checkpoint a restore may still pick read from this
    /// offset on: what is before it may be dropped.
    Release(serde_json::Value),
}

/// An acknowledgement of a checkpoint by one participant.
#[derive(Debug)]
pub enum Ack {
    /// A source injected the barrier at `offset`.
    Source {
        /// Source id.
        source: String,
        /// Read offset at the barrier.
        offset: Value,
    },
    /// An operator instance snapshotted its state.
    Instance {
        /// Its state changes and snapshot bytes.
        delta: InstanceDelta,
        /// How the barrier's alignment went.
        align: AlignStats,
        /// Time the instance's thread spent on the checkpoint once aligned
        /// (`on-checkpoint`, taking the state changes, timers and snapshot),
        /// until this acknowledgement: its pause in processing records.
        pause: Duration,
    },
    /// A sink precommitted its output.
    Sink {
        /// Sink id.
        sink: String,
        /// Commit info to record.
        info: Value,
    },
}

/// How one input loop's alignment of a barrier went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AlignStats {
    /// Time from the first barrier (or announcement) to the last.
    pub duration: Duration,
    /// The most bytes buffered meanwhile.
    pub peak_bytes: u64,
}

impl AlignStats {
    /// The longer duration and the larger peak of the two.
    pub fn worst(self, other: AlignStats) -> AlignStats {
        AlignStats {
            duration: self.duration.max(other.duration),
            peak_bytes: self.peak_bytes.max(other.peak_bytes),
        }
    }
}

/// What the coordinator tells the driver to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    /// Tell every source to inject barrier `id`.
    Trigger(u64),
    /// Every source is at its end: tell them to end their streams with the
    /// final checkpoint `id`.
    Finish(u64),
}

/// What one operator instance changed since its previous checkpoint: the
/// payload of [`Ack::Instance`], which the checkpoint store writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceDelta {
    /// Operator id (a key of the checkpoint's `operators`).
    pub operator: String,
    /// Instance index, below the operator's parallelism.
    pub instance: u32,
    /// Changed keys, in no order (the store sorts them): `Some(value)` =
    /// put, `None` = deleted.
    pub changes: StateChanges,
    /// Plugin snapshot bytes; `None` = unchanged since the previous checkpoint.
    pub snapshot: Option<Vec<u8>>,
    /// Changed timer entries (and the instance's watermark), encoded by
    /// [`crate::keyed::timers`]: `Some` = put, `None` = deleted.
    pub timers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// `Some` when the checkpoint was taken unaligned at this instance: its
    /// in-flight data, encoded by [`crate::dataflow::inflight`] (possibly
    /// empty). It belongs to the checkpoint acknowledged, never to a later
    /// one: a delta kept for the next checkpoint loses it.
    pub inflight: Option<Vec<u8>>,
    /// `Some` when its operator records its input: the calls of the epoch
    /// since the instance's previous snapshot, encoded by
    /// [`crate::dataflow::recording`]. A delta kept for the next
    /// checkpoint keeps it: the store writes the recordings of one
    /// instance's deltas one after the other.
    pub recorded: Option<Vec<u8>>,
}
