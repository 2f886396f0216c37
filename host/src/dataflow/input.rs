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
//! - **Unaligned checkpoints** ([`Alignment::Unaligned`], or
//!   [`Alignment::Timeout`] once an alignment has lasted longer than the
//!   timeout, counted from the first barrier or announcement of the
//!   checkpoint): the loop reads every channel's announcement (the
//!   barriers' priority path, `dataflow/priority.rs`) before each read,
//!   [`InputHandler::on_snapshot`] runs at once when the aligner overtakes
//!   a checkpoint, every batch the aligner records is kept as the
//!   checkpoint's [`InFlight`] data (watermarks and `Idle` are not: a
//!   restore replays records under the restored watermark, and the
//!   upstreams send theirs again), and [`InputHandler::on_complete`] gets
//!   it once every channel delivered the barrier.
//! - **Drain.** While a channel drains (its sender announced the barrier
//!   the instance overtook), the loop reads only draining channels and
//!   fires no timer: their barriers are at most a channel's capacity away
//!   (`dataflow/priority.rs`), so the acknowledgement does not wait for
//!   the records queued ahead of them to be processed.
//! - Sinks always align ([`Alignment::Aligned`]): the epoch of checkpoint
//!   `n` is exactly the records before the cut (ARCHITECTURE.md, "Unaligned
//!   checkpoints").

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Select};

use crate::dataflow::align::{Action, Aligner, Input};
use crate::dataflow::batch::Batch;
use crate::dataflow::cancel::{Cancelled, POLL};
use crate::dataflow::inflight::InFlight;
use crate::dataflow::priority::Announce;
use crate::dataflow::protocol::{AlignStats, Msg};
use crate::dataflow::watermark::InputWatermarks;

/// Bytes an instance may buffer during an alignment before it stops reading
/// its blocked channels (which then apply backpressure upstream).
const MAX_ALIGNMENT_BUFFER: usize = 64 << 20;

/// How an input loop takes checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Alignment {
    /// Align every checkpoint (Flink's aligned checkpoints).
    Aligned,
    /// Overtake every checkpoint at its first barrier or announcement.
    Unaligned,
    /// Align, and overtake a checkpoint whose alignment lasted longer than
    /// this (never zero).
    Timeout(Duration),
}

/// One input channel of an instance or sink.
pub(crate) struct InputChannel {
    /// The input port it feeds.
    pub port: u32,
    /// Its data.
    pub rx: Receiver<Msg>,
    /// The barrier its sender announced.
    pub announced: Announce,
}

/// The inputs of an operator instance or sink.
pub(crate) struct InputChannels {
    /// One channel per upstream instance and input port. The index in this
    /// list is the aligner's channel number.
    pub channels: Vec<InputChannel>,
    /// Ids of complete checkpoints to commit (sinks only). With it, the loop
    /// goes on after `on_finished` until the final checkpoint is committed.
    pub commits: Option<Receiver<u64>>,
    /// How checkpoints are taken.
    pub alignment: Alignment,
}

/// What goes through the aligner: everything on a channel but barriers
/// and `End`, in channel order.
#[derive(Debug, Clone)]
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
    /// now; `align` says how its alignment went.
    fn on_checkpoint(&mut self, id: u64, align: AlignStats) -> Result<(), Cancelled>;

    /// Checkpoint `id` is overtaken (unaligned): snapshot now and forward
    /// barrier `id`; acknowledge it only in
    /// [`on_complete`](Self::on_complete). Called only when the inputs'
    /// [`Alignment`] is not `Aligned`.
    fn on_snapshot(&mut self, id: u64) -> Result<(), Cancelled> {
        unreachable!("checkpoint {id} overtaken by an input loop that only aligns")
    }

    /// Every channel delivered barrier `id` of the overtaken checkpoint:
    /// acknowledge it with `held`, the batches received after the snapshot
    /// and before each channel's barrier; `align` says how the alignment
    /// went.
    fn on_complete(&mut self, id: u64, align: AlignStats, held: InFlight) -> Result<(), Cancelled> {
        let _ = (align, held);
        unreachable!("checkpoint {id} completed overtaken by an input loop that only aligns")
    }

    /// The alignment of checkpoint `id` was abandoned for barrier `newer`
    /// (after [`on_snapshot`](Self::on_snapshot), if it was overtaken).
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
    let n = inputs.channels.len();
    let mut reader = Reader {
        inputs,
        aligner: match inputs.alignment {
            Alignment::Unaligned => Aligner::unaligned(n),
            Alignment::Aligned | Alignment::Timeout(_) => Aligner::new(n),
        },
        watermarks: InputWatermarks::new(n, handler.watermark_floor()),
        clock: AlignmentClock::default(),
        actions: Vec::new(),
        final_id: None,
        inflight: InFlight::default(),
        announced: vec![0; n],
        handler,
    };
    let final_id = reader.run(cancel)?;
    match &inputs.commits {
        Some(commits) => await_final_commit(commits, final_id, cancel, reader.handler),
        None => Ok(()),
    }
}

/// The loop's state.
struct Reader<'a, H> {
    inputs: &'a InputChannels,
    handler: &'a mut H,
    aligner: Aligner<Flow>,
    watermarks: InputWatermarks,
    clock: AlignmentClock,
    /// The aligner's actions not yet carried out (empty between steps).
    actions: Vec<Action<Flow>>,
    final_id: Option<u64>,
    /// In-flight data of the overtaken checkpoint, recorded so far.
    inflight: InFlight,
    /// Per channel, the newest announcement fed to the aligner.
    announced: Vec<u64>,
}

impl<H: InputHandler> Reader<'_, H> {
    /// Reads until every channel ended; returns the final checkpoint id.
    fn run(&mut self, cancel: &AtomicBool) -> Result<u64, Cancelled> {
        loop {
            if cancel.load(Ordering::Relaxed) {
                return Err(Cancelled);
            }
            self.check_priority();
            if let Some(id) = self.act()? {
                return Ok(id);
            }
            let draining = self.aligner.draining();
            let timer = (!draining).then(|| self.handler.next_timer()).flatten();
            if timer.is_some_and(|t| t <= Instant::now()) {
                self.handler.on_time()?;
                continue;
            }
            let wake = [timer, self.timeout_at()].into_iter().flatten().min();
            let (channel, msg) = match receive(self.inputs, &self.aligner, wake) {
                Received::Msg(c, m) => (c, m),
                Received::Commit(id) => {
                    self.handler.on_commit(id, false)?;
                    continue;
                }
                Received::Timeout => continue,
                Received::Disconnected => return Err(Cancelled),
            };
            self.feed(channel, msg);
            if let Some(id) = self.act()? {
                return Ok(id);
            }
        }
    }

    /// When the alignment timeout of the checkpoint being aligned is due.
    fn timeout_at(&self) -> Option<Instant> {
        match self.inputs.alignment {
            Alignment::Timeout(timeout) => self.clock.due(timeout),
            _ => None,
        }
    }

    /// Feeds new announcements to the aligner, and overtakes the
    /// checkpoint whose alignment timeout passed.
    fn check_priority(&mut self) {
        if self.inputs.alignment == Alignment::Aligned {
            return;
        }
        for (i, channel) in self.inputs.channels.iter().enumerate() {
            let id = channel.announced.get();
            if id > self.announced[i] {
                self.announced[i] = id;
                self.clock.saw(id);
                self.aligner.on_announce(i, id, &mut self.actions);
            }
        }
        if self.timeout_at().is_some_and(|t| t <= Instant::now()) {
            let id = self.clock.timed_out();
            self.aligner.overtake(id, &mut self.actions);
        }
    }

    /// Feeds `msg` from `channel` to the aligner; remembers the final
    /// checkpoint id carried by `End`.
    fn feed(&mut self, channel: usize, msg: Msg) {
        let (input, bytes) = match msg {
            Msg::Batch(b) => {
                let bytes = if self.aligner.holds(channel) {
                    b.size()
                } else {
                    0
                };
                (Input::Batch(Flow::Records(b)), bytes)
            }
            Msg::Watermark(t) => (Input::Batch(Flow::Watermark(t)), 0),
            Msg::Idle => (Input::Batch(Flow::Idle), 0),
            Msg::Barrier(n) => {
                self.clock.saw(n);
                (Input::Barrier(n), 0)
            }
            Msg::End(n) => {
                self.final_id = Some(n);
                (Input::End, 0)
            }
        };
        self.aligner
            .on_event(channel, input, bytes, &mut self.actions);
        self.clock.after(&self.aligner);
    }

    /// Carries out the aligner's actions, in order; returns the final
    /// checkpoint id once every channel ended.
    fn act(&mut self) -> Result<Option<u64>, Cancelled> {
        let ports = &self.inputs.channels;
        // Taken and given back, so that the list's allocation is reused.
        let mut actions = std::mem::take(&mut self.actions);
        for action in actions.drain(..) {
            match action {
                Action::Process { channel, batch } => match batch {
                    Flow::Records(batch) => {
                        self.watermarks.on_records(channel);
                        self.handler.on_batch(ports[channel].port, batch)?;
                    }
                    Flow::Watermark(t) => {
                        if let Some(w) = self.watermarks.on_watermark(channel, t) {
                            self.handler.on_watermark(w)?;
                        }
                    }
                    Flow::Idle => {
                        if let Some(w) = self.watermarks.on_idle(channel) {
                            self.handler.on_watermark(w)?;
                        }
                        if self.watermarks.all_idle() {
                            self.handler.on_idle()?;
                        }
                    }
                },
                Action::Record { channel, batch } => {
                    if let Flow::Records(batch) = batch {
                        self.inflight.push(ports[channel].port, batch);
                    }
                }
                Action::Checkpoint { id } => {
                    let align = self.clock.finish();
                    self.handler.on_checkpoint(id, align)?;
                }
                Action::Snapshot { id } => {
                    self.inflight = InFlight::default();
                    self.handler.on_snapshot(id)?;
                }
                Action::Complete { id } => {
                    let align = self.clock.finish();
                    let inflight = std::mem::take(&mut self.inflight);
                    self.handler.on_complete(id, align, inflight)?;
                }
                Action::Abort { id, newer } => {
                    self.inflight = InFlight::default();
                    self.handler.on_abort(id, newer);
                }
                Action::Finished => {
                    let id = self.final_id.expect("every channel ended with End");
                    self.handler.on_finished(id)?;
                    return Ok(Some(id));
                }
            }
        }
        self.actions = actions;
        Ok(None)
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

/// Receives the next message from a channel the aligner lets us read (only
/// draining ones while some drain), or a commit id, waiting at most
/// [`POLL`] and not past `wake`.
fn receive(inputs: &InputChannels, aligner: &Aligner<Flow>, wake: Option<Instant>) -> Received {
    let mut sel = Select::new();
    let mut index = Vec::with_capacity(inputs.channels.len());
    let over = aligner.buffered_bytes() > MAX_ALIGNMENT_BUFFER;
    let draining = aligner.draining();
    for (i, channel) in inputs.channels.iter().enumerate() {
        if aligner.is_closed(i)
            || (draining && !aligner.is_draining(i))
            || (over && aligner.is_blocked(i))
        {
            continue;
        }
        sel.recv(&channel.rx);
        index.push(i);
    }
    let commits_at = inputs.commits.as_ref().map(|rx| sel.recv(rx));
    let wait = wake.map_or(POLL, |t| {
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
    match op.recv(&inputs.channels[channel].rx) {
        Ok(msg) => Received::Msg(channel, msg),
        Err(_) => Received::Disconnected,
    }
}

/// Tracks one checkpoint's alignment at this instance: from the first
/// barrier or announcement of a checkpoint newer than every one seen, its
/// duration, peak buffering and timeout.
#[derive(Default)]
struct AlignmentClock {
    /// The newest checkpoint seen.
    id: u64,
    /// When it was first seen; `None` once it completed.
    started: Option<Instant>,
    /// Its alignment timeout has been acted on.
    timed_out: bool,
    peak_bytes: usize,
}

impl AlignmentClock {
    fn saw(&mut self, id: u64) {
        if id > self.id {
            *self = AlignmentClock {
                id,
                started: Some(Instant::now()),
                timed_out: false,
                peak_bytes: 0,
            };
        }
    }

    fn after(&mut self, aligner: &Aligner<Flow>) {
        self.peak_bytes = self.peak_bytes.max(aligner.buffered_bytes());
    }

    /// When checkpoint `id`'s alignment times out, unless it completed or
    /// timed out already.
    fn due(&self, timeout: Duration) -> Option<Instant> {
        self.started
            .filter(|_| !self.timed_out)
            .map(|s| s + timeout)
    }

    /// The timeout is acted on; returns the checkpoint to overtake.
    fn timed_out(&mut self) -> u64 {
        self.timed_out = true;
        self.id
    }

    fn finish(&mut self) -> AlignStats {
        AlignStats {
            duration: self.started.take().map_or(Duration::ZERO, |s| s.elapsed()),
            peak_bytes: std::mem::take(&mut self.peak_bytes) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use crossbeam_channel::{Sender, bounded};

    use super::*;

    /// What the loop called, in order.
    #[derive(Default)]
    struct Log(Vec<String>);

    fn value(b: &Batch) -> String {
        let values: Vec<String> = b
            .iter()
            .map(|r| String::from_utf8_lossy(r.value).into_owned())
            .collect();
        values.join(",")
    }

    impl InputHandler for Log {
        fn on_batch(&mut self, port: u32, batch: Batch) -> Result<(), Cancelled> {
            self.0.push(format!("batch {port}:{}", value(&batch)));
            Ok(())
        }

        fn on_checkpoint(&mut self, id: u64, _: AlignStats) -> Result<(), Cancelled> {
            self.0.push(format!("checkpoint {id}"));
            Ok(())
        }

        fn on_snapshot(&mut self, id: u64) -> Result<(), Cancelled> {
            self.0.push(format!("snapshot {id}"));
            Ok(())
        }

        fn on_complete(
            &mut self,
            id: u64,
            _: AlignStats,
            inflight: InFlight,
        ) -> Result<(), Cancelled> {
            let frames: Vec<String> = inflight
                .frames()
                .iter()
                .map(|(p, b)| format!("{p}:{}", value(b)))
                .collect();
            self.0.push(format!("complete {id} [{}]", frames.join(" ")));
            Ok(())
        }

        fn on_finished(&mut self, final_id: u64) -> Result<(), Cancelled> {
            self.0.push(format!("finished {final_id}"));
            Ok(())
        }
    }

    fn batch(v: &str) -> Msg {
        let mut b = Batch::new();
        b.push(None, v.as_bytes(), None);
        Msg::Batch(b)
    }

    /// Two channels (ports 0 and 1) with room for `capacity` messages.
    fn inputs(alignment: Alignment, capacity: usize) -> (InputChannels, Vec<Sender<Msg>>) {
        let (mut channels, mut senders) = (Vec::new(), Vec::new());
        for port in 0..2 {
            let (tx, rx) = bounded(capacity);
            senders.push(tx);
            channels.push(InputChannel {
                port,
                rx,
                announced: Announce::default(),
            });
        }
        let inputs = InputChannels {
            channels,
            commits: None,
            alignment,
        };
        (inputs, senders)
    }

    fn position(log: &[String], event: &str) -> usize {
        log.iter()
            .position(|e| e == event)
            .unwrap_or_else(|| panic!("no `{event}` in {log:?}"))
    }

    /// The announcement overtakes the queued batches: the snapshot comes
    /// before any of them is processed, and they, with the batch of the
    /// channel that was not announced, are the in-flight data, each
    /// channel's in order.
    #[test]
    fn an_announced_barrier_overtakes_the_queued_batches() {
        let (inputs, tx) = inputs(Alignment::Unaligned, 16);
        for m in [
            batch("a0"),
            batch("a1"),
            Msg::Barrier(1),
            batch("a2"),
            Msg::End(2),
        ] {
            tx[0].send(m).unwrap();
        }
        inputs.channels[0].announced.announce(1);
        for m in [batch("b0"), Msg::Barrier(1), Msg::End(2)] {
            tx[1].send(m).unwrap();
        }
        let mut log = Log::default();
        drive(&inputs, &AtomicBool::new(false), &mut log).unwrap();
        let log = log.0;
        assert_eq!(log[0], "snapshot 1", "{log:?}");
        let complete = log.iter().find(|e| e.starts_with("complete")).unwrap();
        let mut frames: Vec<&str> = complete
            .trim_start_matches("complete 1 [")
            .trim_end_matches(']')
            .split(' ')
            .collect();
        frames.sort();
        assert_eq!(frames, ["0:a0", "0:a1", "1:b0"], "{log:?}");
        // Channel 1 was not announced: it is read (and its batch recorded)
        // once the drain of channel 0 ended, and the acknowledgement waits
        // for its barrier.
        assert!(position(&log, "batch 0:a0") < position(&log, "batch 0:a1"));
        assert!(position(&log, "batch 0:a1") < position(&log, "batch 0:a2"));
        assert_eq!(log.last().unwrap(), "finished 2");
        assert_eq!(log.len(), 1 + 4 + 1 + 1, "{log:?}");
    }

    /// With every channel announced, the drain reads both up to their
    /// barriers and acknowledges before processing anything it drained.
    #[test]
    fn a_drain_acknowledges_before_processing_what_it_drained() {
        let (inputs, tx) = inputs(Alignment::Unaligned, 16);
        for (c, v) in [(0, "a"), (1, "b")] {
            let (first, second) = (format!("{v}0"), format!("{v}1"));
            for m in [batch(&first), batch(&second), Msg::Barrier(1), Msg::End(2)] {
                tx[c].send(m).unwrap();
            }
            inputs.channels[c].announced.announce(1);
        }
        let mut log = Log::default();
        drive(&inputs, &AtomicBool::new(false), &mut log).unwrap();
        let log = log.0;
        assert_eq!(log[0], "snapshot 1", "{log:?}");
        assert!(log[1].starts_with("complete 1 ["), "{log:?}");
        for v in ["0:a0", "0:a1", "1:b0", "1:b1"] {
            assert!(log[1].contains(v), "{log:?}");
        }
        assert!(position(&log, "batch 0:a0") < position(&log, "batch 0:a1"));
        assert!(position(&log, "batch 1:b0") < position(&log, "batch 1:b1"));
        assert_eq!(log.len(), 7, "{log:?}");
    }

    /// Aligned with a timeout: the alignment of 1 waits, times out, and the
    /// checkpoint goes unaligned; only the batch that arrives afterwards on
    /// the late channel is in flight, not the one after the early barrier.
    #[test]
    fn the_alignment_timeout_switches_a_waiting_checkpoint_to_unaligned() {
        let (inputs, tx) = inputs(Alignment::Timeout(Duration::from_millis(20)), 16);
        tx[0].send(Msg::Barrier(1)).unwrap();
        tx[0].send(batch("after")).unwrap();
        let late = tx[1].clone();
        let feeder = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            for m in [batch("late"), Msg::Barrier(1), Msg::End(2)] {
                late.send(m).unwrap();
            }
        });
        tx[0].send(Msg::End(2)).unwrap();
        let mut log = Log::default();
        drive(&inputs, &AtomicBool::new(false), &mut log).unwrap();
        feeder.join().unwrap();
        let log = log.0;
        assert_eq!(
            log,
            [
                "snapshot 1",
                "batch 0:after",
                "batch 1:late",
                "complete 1 [1:late]",
                "finished 2"
            ]
        );
    }

    /// Without a timeout an aligned loop waits for the late barrier.
    #[test]
    fn aligned_checkpoints_hold_back_the_early_channel() {
        let (inputs, tx) = inputs(Alignment::Aligned, 16);
        tx[0].send(Msg::Barrier(1)).unwrap();
        tx[0].send(batch("after")).unwrap();
        tx[0].send(Msg::End(2)).unwrap();
        inputs.channels[1].announced.announce(1);
        for m in [batch("late"), Msg::Barrier(1), Msg::End(2)] {
            tx[1].send(m).unwrap();
        }
        let mut log = Log::default();
        drive(&inputs, &AtomicBool::new(false), &mut log).unwrap();
        assert_eq!(
            log.0,
            [
                "batch 1:late",
                "checkpoint 1",
                "batch 0:after",
                "finished 2"
            ]
        );
    }
}
