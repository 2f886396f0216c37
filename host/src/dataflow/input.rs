//! The aligned-input loop shared by operator instances and sinks: receive
//! from the input channels (polling for cancellation), feed the [`Aligner`],
//! and carry out its actions through an [`InputHandler`]'s hooks.
//!
//! Invariants:
//! - **Snapshot at the cut.** [`InputHandler::on_checkpoint`] runs exactly at
//!   the consistent cut the aligner reports: after every batch that preceded
//!   barrier `n` on each channel, before any that followed it (those are
//!   handed to [`InputHandler::on_batch`] after the hook returns).
//! - Hooks run in the aligner's action order; [`InputHandler::on_finished`]
//!   runs once, last, with the final checkpoint id carried by the `End`s.
//! - **Watermarks stay in band.** Watermarks and `Idle` go through the
//!   aligner like batches, so they are acted on in channel order and never
//!   overtake a batch held back by an alignment. The combined watermark
//!   ([`InputWatermarks`]) reaches [`InputHandler::on_watermark`] each time
//!   it advances, after every batch before it.
//! - [`InputHandler::on_time`] runs at the latest [`POLL`] after
//!   [`InputHandler::next_timer`] is due (processing-time timers).
//! - While more than [`MAX_ALIGNMENT_BUFFER`] bytes are buffered, blocked
//!   channels are not read, so backpressure reaches upstream instead of the
//!   buffer growing.
//! - Every wait lasts at most [`POLL`] before the cancel flag is checked.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Select};

use crate::dataflow::align::{Action, Aligner, Input};
use crate::dataflow::batch::Batch;
use crate::dataflow::cancel::{Cancelled, POLL};
use crate::dataflow::protocol::Msg;
use crate::dataflow::watermark::InputWatermarks;

/// Bytes an instance may buffer during an alignment before it stops reading
/// its blocked channels (which then apply backpressure upstream).
const MAX_ALIGNMENT_BUFFER: usize = 64 << 20;

/// The inputs of an operator instance or sink.
pub(crate) struct InputChannels {
    /// One receiver per upstream instance and input port, with the port it
    /// feeds. The index in this list is the aligner's channel number.
    pub channels: Vec<(u32, Receiver<Msg>)>,
    /// Ids of complete checkpoints to commit (sinks only). With it, the loop
    /// goes on after `on_finished` until the final checkpoint is committed.
    pub commits: Option<Receiver<u64>>,
}

/// What goes through the aligner: everything on a channel but barriers
/// and `End`, in channel order.
#[derive(Debug)]
pub(crate) enum Flow {
    /// Records.
    Records(Batch),
    /// The channel's watermark.
    Watermark(i64),
    /// The channel is idle.
    Idle,
}

/// What the aligned-input loop drives: an operator instance or a sink.
pub(crate) trait InputHandler {
    /// Acts on `batch`, which arrived on input port `port`.
    fn on_batch(&mut self, port: u32, batch: Batch) -> Result<(), Cancelled>;

    /// The combined watermark of the inputs advanced to `watermark`.
    fn on_watermark(&mut self, watermark: i64) -> Result<(), Cancelled> {
        let _ = watermark;
        Ok(())
    }

    /// Every input is idle (until one sends again).
    fn on_idle(&mut self) -> Result<(), Cancelled> {
        Ok(())
    }

    /// The watermark restored from the checkpoint the handler resumes
    /// from: the combined watermark never goes below it.
    fn watermark_floor(&self) -> Option<i64> {
        None
    }

    /// When [`on_time`](Self::on_time) is next due, if ever.
    fn next_timer(&self) -> Option<Instant> {
        None
    }

    /// Called when [`next_timer`](Self::next_timer) is due.
    fn on_time(&mut self) -> Result<(), Cancelled> {
        Ok(())
    }

    /// Every channel delivered barrier `id` or ended: take checkpoint `id`
    /// now. `alignment` is the time since the first barrier `id`,
    /// `buffered_bytes` the most bytes buffered meanwhile.
    fn on_checkpoint(
        &mut self,
        id: u64,
        alignment: Duration,
        buffered_bytes: u64,
    ) -> Result<(), Cancelled>;

    /// The alignment of checkpoint `id` was abandoned for barrier `newer`.
    fn on_abort(&mut self, id: u64, newer: u64) {
        let _ = (id, newer);
    }

    /// Every channel ended; `final_id` is the final checkpoint.
    fn on_finished(&mut self, final_id: u64) -> Result<(), Cancelled>;

    /// Checkpoint `id` is complete: make it visible. `last` is set for the
    /// final checkpoint, after which the loop ends.
    fn on_commit(&mut self, id: u64, last: bool) -> Result<(), Cancelled> {
        let _ = (id, last);
        Ok(())
    }
}

/// Runs the loop until the handler finished (and, with a commit channel,
/// committed the final checkpoint), or the job is cancelled.
pub(crate) fn drive(
    inputs: &InputChannels,
    cancel: &AtomicBool,
    handler: &mut impl InputHandler,
) -> Result<(), Cancelled> {
    let mut aligner = Aligner::new(inputs.channels.len());
    let mut watermarks = InputWatermarks::new(inputs.channels.len(), handler.watermark_floor());
    let mut clock = AlignmentClock::default();
    let mut actions = Vec::new();
    let mut final_id = None;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(Cancelled);
        }
        let timer = handler.next_timer();
        if timer.is_some_and(|t| t <= Instant::now()) {
            handler.on_time()?;
            continue;
        }
        let (channel, msg) = match receive(inputs, &aligner, timer) {
            Received::Msg(c, m) => (c, m),
            Received::Commit(id) => {
                handler.on_commit(id, false)?;
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
                Action::Process { channel, batch } => match batch {
                    Flow::Records(batch) => {
                        watermarks.on_records(channel);
                        handler.on_batch(inputs.channels[channel].0, batch)?;
                    }
                    Flow::Watermark(t) => {
                        if let Some(w) = watermarks.on_watermark(channel, t) {
                            handler.on_watermark(w)?;
                        }
                    }
                    Flow::Idle => {
                        if let Some(w) = watermarks.on_idle(channel) {
                            handler.on_watermark(w)?;
                        }
                        if watermarks.all_idle() {
                            handler.on_idle()?;
                        }
                    }
                },
                Action::Checkpoint { id } => {
                    let (alignment, buffered) = clock.finish();
                    handler.on_checkpoint(id, alignment, buffered)?;
                }
                Action::Abort { id, newer } => handler.on_abort(id, newer),
                Action::Finished => {
                    let id = final_id.expect("every channel ended with End");
                    handler.on_finished(id)?;
                    return match &inputs.commits {
                        Some(commits) => await_final_commit(commits, id, cancel, handler),
                        None => Ok(()),
                    };
                }
            }
        }
    }
}

/// After the end of input: commits what the driver says until the final
/// checkpoint `final_id` is committed.
fn await_final_commit(
    commits: &Receiver<u64>,
    final_id: u64,
    cancel: &AtomicBool,
    handler: &mut impl InputHandler,
) -> Result<(), Cancelled> {
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(Cancelled);
        }
        match commits.recv_timeout(POLL) {
            Ok(id) => {
                let last = id == final_id;
                handler.on_commit(id, last)?;
                if last {
                    return Ok(());
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Err(Cancelled),
        }
    }
}

enum Received {
    Msg(usize, Msg),
    Commit(u64),
    Timeout,
    Disconnected,
}

/// Receives the next message from a channel the aligner lets us read (or a
/// commit id), waiting at most [`POLL`] and not past `timer`.
fn receive(inputs: &InputChannels, aligner: &Aligner<Flow>, timer: Option<Instant>) -> Received {
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
    let commits_at = inputs.commits.as_ref().map(|rx| sel.recv(rx));
    let wait = timer.map_or(POLL, |t| {
        t.saturating_duration_since(Instant::now()).min(POLL)
    });
    let Ok(op) = sel.select_timeout(wait) else {
        return Received::Timeout;
    };
    if Some(op.index()) == commits_at {
        return match op.recv(inputs.commits.as_ref().expect("registered")) {
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

/// Tracks one alignment's duration and peak buffering.
#[derive(Default)]
struct AlignmentClock {
    started: Option<Instant>,
    peak_bytes: usize,
}

impl AlignmentClock {
    fn observe(&mut self, aligner: &Aligner<Flow>, msg: &Msg) {
        if aligner.aligning().is_none() && matches!(msg, Msg::Barrier(_)) {
            self.started = Some(Instant::now());
            self.peak_bytes = 0;
        }
    }

    fn after(&mut self, aligner: &Aligner<Flow>) {
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
    aligner: &mut Aligner<Flow>,
    clock: &mut AlignmentClock,
    final_id: &mut Option<u64>,
    channel: usize,
    msg: Msg,
    actions: &mut Vec<Action<Flow>>,
) {
    clock.observe(aligner, &msg);
    let (input, bytes) = match msg {
        Msg::Batch(b) => {
            let bytes = if aligner.is_blocked(channel) {
                b.size()
            } else {
                0
            };
            (Input::Batch(Flow::Records(b)), bytes)
        }
        Msg::Watermark(t) => (Input::Batch(Flow::Watermark(t)), 0),
        Msg::Idle => (Input::Batch(Flow::Idle), 0),
        Msg::Barrier(n) => (Input::Barrier(n), 0),
        Msg::End(n) => {
            *final_id = Some(n);
            (Input::End, 0)
        }
    };
    aligner.on_event(channel, input, bytes, actions);
    clock.after(aligner);
}
