//! Checkpoint barrier alignment (Flink's `BarrierBuffer`) for operators and
//! sinks with several input channels.
//!
//! The executor feeds every event it reads from an input channel to an
//! [`Aligner`], which answers with [`Action`]s that must be carried out *in
//! list order*. The aligner does no I/O and knows nothing of time or records:
//! it is generic over the batch type `T`.
//!
//! # Semantics
//!
//! The first barrier `n` newer than every barrier seen so far starts an
//! alignment for checkpoint `n`. A channel that has delivered barrier `n` is
//! *blocked*: its events are buffered instead of acted on. When every channel
//! is blocked or closed (a closed channel counts as aligned), the aligner
//! emits [`Action::Checkpoint`], unblocks everything and releases the buffer
//! in arrival order. A newer barrier on a channel that is not blocked aborts
//! the alignment ([`Action::Abort`]), releases the buffer and starts a new
//! alignment. A barrier not newer than the largest one that started an
//! alignment (completed, aborted or current) is stale and ignored.
//!
//! # Everything behind a blocked channel waits
//!
//! Flink does not read a blocked channel; Weir's executor may already hold,
//! and feed, its later events. So *every* event fed on a blocked channel is
//! buffered, not only batches, and when the alignment ends the buffer is
//! replayed through the aligner in arrival order. For batches this is the
//! plain release. A newer barrier found there starts the next alignment
//! instead of aborting the current one (aborting would lose every checkpoint
//! whose barriers arrive skewed across channels), and the batches after it
//! on its channel are buffered again. An End found there closes its channel
//! only after that channel's buffered batches have been released, so that no
//! later alignment can count the channel as aligned ahead of them. For the
//! executor, [`Aligner::is_closed`] reports End as soon as it is fed. An
//! executor that stops reading blocked channels ([`Aligner::is_blocked`])
//! only ever replays batches.
//!
//! # Guarantees
//!
//! * Per channel, batches are processed in the order they were fed; buffered
//!   batches are released in arrival order across channels.
//! * Every batch fed before barrier `n` on a channel is processed before
//!   `Checkpoint { id: n }`, every batch fed after it, after (the consistent
//!   cut). A channel without barrier `n` must have ended (and all its batches
//!   been processed) for `n` to complete.
//! * Checkpoint ids strictly increase; [`Action::Finished`] comes once, last.
//!
//! # Overtaking (unaligned checkpoints)
//!
//! An aligner made by [`Aligner::unaligned`] *overtakes* every checkpoint at
//! its first barrier or announcement ([`Aligner::on_announce`]); an aligned
//! one overtakes the current alignment when the executor says so
//! ([`Aligner::overtake`], the alignment timeout). Overtaking checkpoint `n`
//! emits [`Action::Snapshot`] at once: every batch acted on before it is in
//! the snapshot. Every channel that has not delivered barrier `n` then
//! *owes* it, and each batch stepped on an owing channel, up to its barrier
//! `n`, is announced by [`Action::Record`] (the checkpoint's in-flight data)
//! before it is processed. An owing channel whose sender announced `n` is
//! *draining*: its batches are recorded and held, not processed, until no
//! channel drains any more, so the executor (which then reads only draining
//! channels) reaches their barriers without processing anything. Channels
//! that delivered `n` are never blocked, except that during a drain their
//! later events wait behind it, as does a newer barrier behind `n`. When no
//! channel owes `n`, [`Action::Complete`] follows.
//!
//! Guarantees of an overtaken checkpoint `n`, per channel `c`: the batches
//! of `c` before its barrier `n` are exactly those processed before
//! `Snapshot { id: n }` followed by those recorded for `n`, in order; no
//! batch after its barrier `n` is recorded; `Complete { id: n }` follows
//! the last `Record` of `n`.

use std::collections::VecDeque;

mod overtake;

/// One event read from an input channel, in that channel's FIFO order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input<T> {
    /// A batch of records.
    Batch(T),
    /// A checkpoint barrier; ids increase over time.
    Barrier(u64),
    /// The channel is closed for ever: nothing follows on it.
    End,
}

/// What the executor must do. Actions are appended to the caller's list by
/// [`Aligner::on_event`] and must be carried out in list order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<T> {
    /// Process this batch (from `channel`) now, in this order.
    Process {
        /// Input channel the batch arrived on.
        channel: usize,
        /// The batch itself.
        batch: T,
    },
    /// Every channel has delivered barrier `id` or is closed: snapshot state
    /// now, then forward barrier `id` downstream. Any `Process` actions after
    /// it in the same list are batches that were buffered during the
    /// alignment, released in their arrival order; they must be processed
    /// after the snapshot.
    Checkpoint {
        /// The checkpoint to snapshot.
        id: u64,
    },
    /// The alignment for `id` was abandoned because barrier `newer` arrived
    /// first on some channel (the checkpoint `id` will never complete here).
    /// Buffered batches are released (as `Process` actions following this
    /// one) before the new alignment starts.
    Abort {
        /// The abandoned checkpoint.
        id: u64,
        /// The barrier that superseded it.
        newer: u64,
    },
    /// Every channel has ended. Emitted exactly once, after any pending
    /// `Checkpoint` action (and the batches it released).
    Finished,
    /// Checkpoint `id` is overtaken (unaligned): snapshot state now and
    /// forward barrier `id` downstream, without acknowledging it yet. Until
    /// `Complete { id }` (or `Abort`), `Record` actions give its in-flight
    /// data.
    Snapshot {
        /// The checkpoint to snapshot.
        id: u64,
    },
    /// Store a copy of this batch with the overtaken checkpoint as
    /// in-flight data (it is also processed, by a `Process` action now or
    /// after the drain).
    Record {
        /// Input channel the batch arrived on.
        channel: usize,
        /// A copy of the batch.
        batch: T,
    },
    /// Every channel delivered barrier `id` of the overtaken checkpoint (or
    /// ended): its in-flight data is complete; acknowledge it.
    Complete {
        /// The completed checkpoint.
        id: u64,
    },
}

/// Alignment state of one input channel, as of the events acted on so far
/// (an event waiting in the buffer has not been acted on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Channel {
    /// Not blocked: its events are acted on as they come.
    Open,
    /// Delivered the barrier of the current alignment: its events wait in
    /// the buffer.
    Blocked,
    /// Its End has been acted on: counts as aligned for ever.
    Closed,
    /// Owes the barrier of the overtaken checkpoint: its events are acted
    /// on, and its batches recorded first (in-flight data).
    Owing,
    /// Owes it, and its sender announced it: its batches are recorded and
    /// held until the drain ends.
    Draining,
}

/// An event held inside the aligner (buffered, or queued for replay).
#[derive(Debug)]
struct Held<T> {
    channel: usize,
    event: Input<T>,
    bytes: usize,
}

/// Barrier aligner for one operator instance (or sink) with a fixed number of
/// input channels. See the [module documentation](self) for the semantics.
#[derive(Debug)]
pub struct Aligner<T> {
    /// State of each channel.
    channels: Vec<Channel>,
    /// Channels `Blocked`. Nonzero only while aligning.
    blocked: usize,
    /// Channels `Closed`.
    closed: usize,
    /// Channels `Owing` or `Draining`. Nonzero only while `overtaken`.
    owing: usize,
    /// Channels `Draining`.
    draining: usize,
    /// Every checkpoint is overtaken at its first barrier or announcement.
    unaligned: bool,
    /// The checkpoint `aligning` is overtaken (its `Snapshot` was emitted).
    /// Invariant: `overtaken` implies `aligning.is_some()`; while set, no
    /// channel is blocked by the alignment itself: `Blocked` channels
    /// delivered the barrier and wait for the drain (or hold a newer
    /// barrier).
    overtaken: bool,
    /// Per channel, the newest barrier announced on it (0: none).
    announced: Vec<u64>,
    /// End was fed on the channel (it may still wait in the buffer): the
    /// host's view, and the guard against events after End.
    ended: Vec<bool>,
    /// Channels without a fed End.
    open: usize,
    /// Checkpoint being aligned. Invariant: `Some(id)` implies
    /// `max_seen == Some(id)`.
    aligning: Option<u64>,
    /// Largest barrier id that started an alignment (completed, aborted or
    /// current); barriers up to it are stale.
    max_seen: Option<u64>,
    /// Last id that produced `Checkpoint`.
    last_checkpoint: Option<u64>,
    /// Events fed on (or replayed to) blocked or draining channels during
    /// the current alignment, in arrival order. Invariant: empty unless
    /// aligning.
    buffer: VecDeque<Held<T>>,
    /// Sum of the `bytes` of the events in `buffer`.
    buffered_bytes: usize,
    /// Number of `Batch` events in `buffer`.
    buffered_batches: usize,
    /// Events released by the end of an alignment and not yet acted on, in
    /// arrival order. Empty between calls to `on_event`.
    replay: VecDeque<Held<T>>,
    /// `Finished` was emitted.
    finished: bool,
}

impl<T: Clone> Aligner<T> {
    /// Creates an aligner for `channels` input channels, numbered
    /// `0..channels`, none blocked or closed, that aligns every checkpoint
    /// (unless told to [`overtake`](Self::overtake) one).
    ///
    /// # Panics
    /// If `channels` is 0 (a host bug: every operator has an input).
    #[track_caller]
    pub fn new(channels: usize) -> Self {
        assert!(
            channels >= 1,
            "Aligner::new: an operator needs at least one input channel (got 0)"
        );
        Self {
            channels: vec![Channel::Open; channels],
            blocked: 0,
            closed: 0,
            owing: 0,
            draining: 0,
            unaligned: false,
            overtaken: false,
            announced: vec![0; channels],
            ended: vec![false; channels],
            open: channels,
            aligning: None,
            max_seen: None,
            last_checkpoint: None,
            buffer: VecDeque::new(),
            buffered_bytes: 0,
            buffered_batches: 0,
            replay: VecDeque::new(),
            finished: false,
        }
    }

    /// Feeds one event from `channel` with its size in bytes (used only for
    /// [`buffered_bytes`](Self::buffered_bytes) accounting; pass 0 for
    /// barriers and End). Appends the resulting actions to `out`, which is
    /// not cleared (the caller reuses it, to avoid allocation).
    ///
    /// An event after End on the same channel, or a barrier not newer than
    /// the current alignment's on a channel it blocks, is a host bug: it
    /// trips a debug assertion and is otherwise ignored.
    ///
    /// # Panics
    /// If `channel` is out of range (a host bug).
    #[track_caller]
    pub fn on_event(
        &mut self,
        channel: usize,
        event: Input<T>,
        bytes: usize,
        out: &mut Vec<Action<T>>,
    ) {
        self.check_channel(channel);
        debug_assert!(
            !self.ended[channel],
            "Aligner: event on channel {channel} after its End"
        );
        if self.ended[channel] {
            return;
        }
        if matches!(event, Input::End) {
            self.ended[channel] = true;
            self.open -= 1;
        }
        debug_assert!(self.replay.is_empty());
        self.replay.push_back(Held {
            channel,
            event,
            bytes,
        });
        self.run(out);
    }

    /// Acts on `replay` until it is empty, then emits `Finished` once every
    /// channel is closed.
    fn run(&mut self, out: &mut Vec<Action<T>>) {
        // Ending an alignment puts the buffer in front of `replay`, so this
        // loop acts on released events, in arrival order, until none is left
        // (each is either acted on or buffered again).
        while let Some(held) = self.replay.pop_front() {
            self.step(held, out);
        }
        // After the loop, so that Finished follows the released batches.
        if self.closed == self.channels.len() && !self.finished {
            self.finished = true;
            out.push(Action::Finished);
        }
    }

    /// Whether `channel` has delivered the barrier of the current alignment
    /// and not ended: its events are being buffered, so the executor may
    /// stop reading it until the alignment ends.
    ///
    /// # Panics
    /// If `channel` is out of range.
    #[track_caller]
    pub fn is_blocked(&self, channel: usize) -> bool {
        self.check_channel(channel);
        self.channels[channel] == Channel::Blocked && !self.ended[channel]
    }

    /// Whether End has been fed on `channel`. (If the channel was blocked,
    /// its End takes effect for alignment once its buffered batches are
    /// released; a blocked channel counts as aligned meanwhile anyway.)
    ///
    /// # Panics
    /// If `channel` is out of range.
    #[track_caller]
    pub fn is_closed(&self, channel: usize) -> bool {
        self.check_channel(channel);
        self.ended[channel]
    }

    /// The checkpoint id currently being aligned (or overtaken and not yet
    /// complete), if any.
    pub fn aligning(&self) -> Option<u64> {
        self.aligning
    }

    /// Total size, in the bytes given to [`on_event`](Self::on_event), of
    /// the events held back by the current alignment.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered_bytes
    }

    /// Number of batches held back by the current alignment.
    pub fn buffered_batches(&self) -> usize {
        self.buffered_batches
    }

    /// The last checkpoint id that produced [`Action::Checkpoint`].
    pub fn last_checkpoint(&self) -> Option<u64> {
        self.last_checkpoint
    }

    /// Number of channels on which End has not been fed.
    pub fn open_channels(&self) -> usize {
        self.open
    }

    #[track_caller]
    fn check_channel(&self, channel: usize) {
        assert!(
            channel < self.channels.len(),
            "Aligner: channel {channel} out of range (this operator has {} input channels)",
            self.channels.len()
        );
    }

    /// Acts on one event, fed or replayed.
    fn step(&mut self, held: Held<T>, out: &mut Vec<Action<T>>) {
        let channel = held.channel;
        match (self.channels[channel], &held.event) {
            // A blocked channel's stream waits, in order, for the alignment
            // (or the drain) to end. It already delivered the current
            // barrier, so a barrier not newer than that one is a host bug:
            // drop it.
            (Channel::Blocked, Input::Barrier(id)) => {
                let misordered = self.aligning.is_some_and(|current| *id <= current);
                debug_assert!(
                    !misordered,
                    "Aligner: second barrier {id} on blocked channel {channel} (ids must increase)"
                );
                if !misordered {
                    self.hold(held);
                }
            }
            (Channel::Blocked, _) => self.hold(held),
            (Channel::Owing | Channel::Draining, Input::Batch(_)) => self.record(held, out),
            (Channel::Owing | Channel::Draining, &Input::Barrier(id)) => {
                self.owed_barrier(held, id, out)
            }
            (Channel::Owing | Channel::Draining, Input::End) => self.owed_end(channel, out),
            // From here on the channel is Open or Closed (only its held
            // batches are replayed after its End): `on_event` rejects events
            // after End, and a blocked channel's End is replayed after all
            // of its batches.
            _ => match held.event {
                Input::Batch(batch) => out.push(Action::Process { channel, batch }),
                Input::Barrier(id) => self.on_barrier(held.channel, held.bytes, id, out),
                Input::End => {
                    self.channels[channel] = Channel::Closed;
                    self.closed += 1;
                    self.progress(out);
                }
            },
        }
    }

    /// Barrier `id` (of `bytes`) on open channel `channel`.
    fn on_barrier(&mut self, channel: usize, bytes: usize, id: u64, out: &mut Vec<Action<T>>) {
        let held = Held {
            channel,
            event: Input::Barrier(id),
            bytes,
        };
        match self.aligning {
            // The channel delivered the overtaken barrier: a newer one waits
            // until that checkpoint completes (ids on a channel increase, so
            // an older one is a host bug, ignored).
            Some(current) if self.overtaken => {
                if id > current {
                    self.block(channel);
                    self.hold(held);
                }
            }
            Some(current) if id == current => {
                self.block(channel);
                self.progress(out);
            }
            // Stale: older than the current alignment, or not newer than a
            // completed or aborted one.
            _ if self.max_seen.is_some_and(|seen| id <= seen) => {}
            // Newer barrier: abort. Queue the barrier behind the buffer, so
            // that the buffered batches are released before it starts the
            // new alignment (`max_seen` is still the aborted id, so it is not
            // stale when replayed).
            Some(current) => {
                out.push(Action::Abort {
                    id: current,
                    newer: id,
                });
                self.hold(held);
                self.end_alignment();
            }
            None if self.unaligned => self.start_overtaken(id, Some(channel), out),
            None => {
                self.aligning = Some(id);
                self.max_seen = Some(id);
                self.block(channel);
                self.progress(out);
            }
        }
    }

    fn block(&mut self, channel: usize) {
        self.channels[channel] = Channel::Blocked;
        self.blocked += 1;
    }

    fn hold(&mut self, held: Held<T>) {
        if matches!(held.event, Input::Batch(_)) {
            self.buffered_batches += 1;
        }
        self.buffered_bytes += held.bytes;
        self.buffer.push_back(held);
    }

    /// Completes the checkpoint when nothing more is owed: an alignment
    /// when every channel is blocked or closed; an overtaken checkpoint
    /// when no channel owes it (and, short of that, ends the drain when no
    /// channel drains any more).
    fn progress(&mut self, out: &mut Vec<Action<T>>) {
        let Some(id) = self.aligning else { return };
        if self.overtaken {
            if self.owing == 0 {
                out.push(Action::Complete { id });
                self.last_checkpoint = Some(id);
                self.end_alignment();
            } else if self.draining == 0 && (self.blocked > 0 || !self.buffer.is_empty()) {
                self.release();
            }
        } else if self.blocked + self.closed == self.channels.len() {
            out.push(Action::Checkpoint { id });
            self.last_checkpoint = Some(id);
            self.end_alignment();
        }
    }

    /// Ends the current alignment (completed or aborted): unblocks every
    /// channel and queues the buffer for replay.
    fn end_alignment(&mut self) {
        for state in &mut self.channels {
            if matches!(*state, Channel::Owing | Channel::Draining) {
                *state = Channel::Open;
            }
        }
        (self.owing, self.draining) = (0, 0);
        self.overtaken = false;
        self.aligning = None;
        self.release();
    }

    /// Unblocks every blocked channel and queues the buffer for replay
    /// ahead of what `replay` already holds (the buffer arrived earlier).
    fn release(&mut self) {
        for state in &mut self.channels {
            if *state == Channel::Blocked {
                *state = Channel::Open;
            }
        }
        self.blocked = 0;
        self.buffered_bytes = 0;
        self.buffered_batches = 0;
        self.buffer.append(&mut self.replay);
        std::mem::swap(&mut self.buffer, &mut self.replay);
    }
}

#[cfg(test)]
mod tests {
    use super::Action::{Abort, Checkpoint, Finished, Process};
    use super::Input::{Barrier, Batch, End};
    use super::*;

    type A = Aligner<&'static str>;

    /// Feeds one event (a batch weighs its string length) and returns the
    /// actions it produced.
    fn feed(a: &mut A, channel: usize, event: Input<&'static str>) -> Vec<Action<&'static str>> {
        let bytes = match event {
            Batch(s) => s.len(),
            _ => 0,
        };
        let mut out = Vec::new();
        a.on_event(channel, event, bytes, &mut out);
        out
    }

    fn p(channel: usize, batch: &'static str) -> Action<&'static str> {
        Process { channel, batch }
    }

    #[test]
    fn one_channel_checkpoints_at_every_barrier() {
        let mut a = A::new(1);
        assert_eq!(feed(&mut a, 0, Batch("a")), [p(0, "a")]);
        assert_eq!(feed(&mut a, 0, Barrier(1)), [Checkpoint { id: 1 }]);
        assert_eq!(a.aligning(), None);
        assert!(!a.is_blocked(0));
        assert_eq!(feed(&mut a, 0, Batch("b")), [p(0, "b")]);
        assert_eq!(feed(&mut a, 0, Barrier(2)), [Checkpoint { id: 2 }]);
        assert_eq!(a.last_checkpoint(), Some(2));
        assert_eq!(feed(&mut a, 0, End), [Finished]);
        assert_eq!(a.open_channels(), 0);
    }

    #[test]
    fn two_channels_in_both_barrier_orders() {
        for (first, second) in [(0, 1), (1, 0)] {
            let mut a = A::new(2);
            assert_eq!(feed(&mut a, first, Barrier(1)), []);
            assert_eq!(a.aligning(), Some(1));
            assert!(a.is_blocked(first));
            assert!(!a.is_blocked(second));
            assert_eq!(feed(&mut a, first, Batch("after")), []);
            assert_eq!(feed(&mut a, second, Batch("before")), [p(second, "before")]);
            assert_eq!(
                feed(&mut a, second, Barrier(1)),
                [Checkpoint { id: 1 }, p(first, "after")]
            );
            assert_eq!(a.aligning(), None);
            assert!(!a.is_blocked(first) && !a.is_blocked(second));
            assert_eq!(a.last_checkpoint(), Some(1));
        }
    }

    #[test]
    fn buffered_batches_are_released_after_the_checkpoint_in_arrival_order() {
        let mut a = A::new(3);
        assert_eq!(feed(&mut a, 0, Barrier(1)), []);
        assert_eq!(feed(&mut a, 0, Batch("a0")), []);
        assert_eq!(feed(&mut a, 1, Barrier(1)), []);
        assert_eq!(feed(&mut a, 1, Batch("b0")), []);
        assert_eq!(feed(&mut a, 0, Batch("a1")), []);
        assert_eq!(feed(&mut a, 2, Batch("c0")), [p(2, "c0")]);
        assert_eq!(feed(&mut a, 1, Batch("b1")), []);
        assert_eq!(a.buffered_batches(), 4);
        assert_eq!(
            feed(&mut a, 2, Barrier(1)),
            [
                Checkpoint { id: 1 },
                p(0, "a0"),
                p(1, "b0"),
                p(0, "a1"),
                p(1, "b1"),
            ]
        );
        assert_eq!(a.buffered_batches(), 0);
        // Unblocked again: batches flow straight through.
        assert_eq!(feed(&mut a, 0, Batch("a2")), [p(0, "a2")]);
    }

    #[test]
    fn channel_closed_before_the_barrier_counts_as_aligned() {
        let mut a = A::new(3);
        assert_eq!(feed(&mut a, 2, Batch("c")), [p(2, "c")]);
        assert_eq!(feed(&mut a, 2, End), []);
        assert!(a.is_closed(2));
        assert_eq!(a.open_channels(), 2);
        assert_eq!(feed(&mut a, 0, Barrier(1)), []);
        assert_eq!(feed(&mut a, 1, Barrier(1)), [Checkpoint { id: 1 }]);
    }

    #[test]
    fn barrier_on_the_only_open_channel_checkpoints_at_once() {
        let mut a = A::new(3);
        assert_eq!(feed(&mut a, 1, End), []);
        assert_eq!(feed(&mut a, 2, End), []);
        assert_eq!(feed(&mut a, 0, Barrier(7)), [Checkpoint { id: 7 }]);
        assert_eq!(feed(&mut a, 0, End), [Finished]);
    }

    #[test]
    fn closing_the_last_unaligned_channel_completes_the_alignment() {
        let mut a = A::new(2);
        assert_eq!(feed(&mut a, 0, Barrier(1)), []);
        assert_eq!(feed(&mut a, 0, Batch("a")), []);
        assert_eq!(feed(&mut a, 1, Batch("x")), [p(1, "x")]);
        assert_eq!(feed(&mut a, 1, End), [Checkpoint { id: 1 }, p(0, "a")]);
        assert!(a.is_closed(1));
        assert_eq!(feed(&mut a, 0, End), [Finished]);
    }

    #[test]
    fn end_on_a_blocked_channel_keeps_its_buffered_batches() {
        let mut a = A::new(3);
        assert_eq!(feed(&mut a, 0, Barrier(1)), []);
        assert_eq!(feed(&mut a, 0, Batch("a")), []);
        assert_eq!(feed(&mut a, 0, End), []);
        assert!(a.is_closed(0));
        assert!(!a.is_blocked(0));
        assert_eq!(a.buffered_batches(), 1);
        assert_eq!(a.aligning(), Some(1));
        assert_eq!(feed(&mut a, 1, Barrier(1)), []);
        // Completion triggered by an End on another channel.
        assert_eq!(feed(&mut a, 2, End), [Checkpoint { id: 1 }, p(0, "a")]);
    }

    #[test]
    fn finished_comes_once_after_the_pending_checkpoint_and_its_batches() {
        let mut a = A::new(2);
        assert_eq!(feed(&mut a, 0, Barrier(1)), []);
        assert_eq!(feed(&mut a, 0, Batch("a")), []);
        assert_eq!(feed(&mut a, 0, End), []);
        assert_eq!(
            feed(&mut a, 1, End),
            [Checkpoint { id: 1 }, p(0, "a"), Finished]
        );
        assert_eq!(a.open_channels(), 0);
        assert_eq!(a.aligning(), None);
    }

    #[test]
    fn finished_without_any_checkpoint() {
        let mut a = A::new(2);
        assert_eq!(feed(&mut a, 1, End), []);
        assert_eq!(feed(&mut a, 0, Batch("a")), [p(0, "a")]);
        assert_eq!(feed(&mut a, 0, End), [Finished]);
        assert_eq!(a.last_checkpoint(), None);
    }

    #[test]
    fn newer_barrier_aborts_and_releases_the_buffer_before_the_new_alignment() {
        let mut a = A::new(3);
        assert_eq!(feed(&mut a, 0, Barrier(1)), []);
        assert_eq!(feed(&mut a, 0, Batch("a")), []);
        assert_eq!(feed(&mut a, 1, Barrier(1)), []);
        assert_eq!(feed(&mut a, 1, Batch("b")), []);
        // Channel 2 skipped barrier 1.
        assert_eq!(
            feed(&mut a, 2, Barrier(2)),
            [Abort { id: 1, newer: 2 }, p(0, "a"), p(1, "b")]
        );
        assert_eq!(a.aligning(), Some(2));
        assert!(a.is_blocked(2));
        assert!(!a.is_blocked(0) && !a.is_blocked(1));
        assert_eq!((a.buffered_batches(), a.buffered_bytes()), (0, 0));
        assert_eq!(feed(&mut a, 2, Batch("c")), []);
        assert_eq!(feed(&mut a, 0, Batch("a2")), [p(0, "a2")]);
        assert_eq!(feed(&mut a, 0, Barrier(2)), []);
        assert_eq!(
            feed(&mut a, 1, Barrier(2)),
            [Checkpoint { id: 2 }, p(2, "c")]
        );
        assert_eq!(a.last_checkpoint(), Some(2));
    }

    #[test]
    fn abort_whose_new_alignment_completes_at_once_releases_first() {
        let mut a = A::new(2);
        assert_eq!(feed(&mut a, 0, Barrier(1)), []);
        assert_eq!(feed(&mut a, 0, Batch("a")), []);
        assert_eq!(feed(&mut a, 0, End), []);
        // "a" precedes channel 0's End, so it belongs before checkpoint 2.
        assert_eq!(
            feed(&mut a, 1, Barrier(2)),
            [Abort { id: 1, newer: 2 }, p(0, "a"), Checkpoint { id: 2 }]
        );
    }

    #[test]
    fn stale_barrier_older_than_the_current_alignment_is_ignored() {
        let mut a = A::new(2);
        assert_eq!(feed(&mut a, 0, Barrier(2)), []);
        assert_eq!(feed(&mut a, 1, Barrier(1)), []);
        assert_eq!(a.aligning(), Some(2));
        assert!(!a.is_blocked(1));
        assert_eq!(feed(&mut a, 1, Batch("x")), [p(1, "x")]);
        assert_eq!(feed(&mut a, 1, Barrier(2)), [Checkpoint { id: 2 }]);
    }

    #[test]
    fn stale_barrier_not_newer_than_a_completed_one_is_ignored() {
        let mut a = A::new(2);
        feed(&mut a, 0, Barrier(3));
        assert_eq!(feed(&mut a, 1, Barrier(3)), [Checkpoint { id: 3 }]);
        for (channel, id) in [(0, 3), (1, 2), (0, 1)] {
            assert_eq!(feed(&mut a, channel, Barrier(id)), []);
            assert_eq!(a.aligning(), None);
            assert!(!a.is_blocked(channel));
        }
        assert_eq!(feed(&mut a, 0, Batch("a")), [p(0, "a")]);
        assert_eq!(a.last_checkpoint(), Some(3));
    }

    #[test]
    fn stale_barrier_of_an_aborted_alignment_is_ignored() {
        let mut a = A::new(3);
        feed(&mut a, 0, Barrier(1));
        assert_eq!(feed(&mut a, 1, Barrier(2)), [Abort { id: 1, newer: 2 }]);
        assert_eq!(feed(&mut a, 2, Barrier(1)), []);
        assert!(!a.is_blocked(2));
        assert_eq!(a.aligning(), Some(2));
    }

    #[test]
    fn buffer_accounting_returns_to_zero() {
        let mut a = A::new(2);
        feed(&mut a, 0, Barrier(1));
        feed(&mut a, 0, Batch("aaa"));
        feed(&mut a, 0, Batch("bb"));
        assert_eq!(feed(&mut a, 1, Batch("unbuffered")).len(), 1);
        assert_eq!((a.buffered_batches(), a.buffered_bytes()), (2, 5));
        assert_eq!(feed(&mut a, 1, Barrier(1)).len(), 3);
        assert_eq!((a.buffered_batches(), a.buffered_bytes()), (0, 0));
        // And after an abort.
        feed(&mut a, 0, Barrier(2));
        feed(&mut a, 0, Batch("cccc"));
        assert_eq!((a.buffered_batches(), a.buffered_bytes()), (1, 4));
        assert_eq!(feed(&mut a, 1, Barrier(3)).len(), 2);
        assert_eq!((a.buffered_batches(), a.buffered_bytes()), (0, 0));
    }

    #[test]
    fn newer_barrier_on_a_blocked_channel_waits_instead_of_aborting() {
        let mut a = A::new(2);
        assert_eq!(feed(&mut a, 0, Barrier(1)), []);
        assert_eq!(feed(&mut a, 0, Batch("a")), []);
        assert_eq!(feed(&mut a, 0, Barrier(2)), []);
        assert_eq!(feed(&mut a, 0, Batch("b")), []);
        assert_eq!(feed(&mut a, 0, End), []);
        assert_eq!(a.aligning(), Some(1));
        assert!(a.is_closed(0) && !a.is_blocked(0));
        assert_eq!(a.buffered_batches(), 2);
        assert_eq!(feed(&mut a, 1, Batch("x")), [p(1, "x")]);
        // "b" follows barrier 2 on channel 0: it is buffered again by the
        // alignment of 2 that the replayed barrier starts.
        assert_eq!(
            feed(&mut a, 1, Barrier(1)),
            [Checkpoint { id: 1 }, p(0, "a")]
        );
        assert_eq!(a.aligning(), Some(2));
        assert_eq!(a.buffered_batches(), 1);
        assert_eq!(feed(&mut a, 1, Batch("y")), [p(1, "y")]);
        assert_eq!(
            feed(&mut a, 1, Barrier(2)),
            [Checkpoint { id: 2 }, p(0, "b")]
        );
        assert_eq!(feed(&mut a, 1, End), [Finished]);
    }

    /// Regression: the End of a blocked channel must not overtake the
    /// channel's buffered batches when a replayed barrier starts an
    /// alignment that the End would complete.
    #[test]
    fn end_of_a_blocked_channel_waits_for_its_buffered_batches() {
        let mut a = A::new(3);
        assert_eq!(feed(&mut a, 0, Barrier(1)), []);
        assert_eq!(feed(&mut a, 0, Barrier(2)), []);
        assert_eq!(feed(&mut a, 1, Barrier(1)), []);
        assert_eq!(feed(&mut a, 1, Batch("x")), []);
        assert_eq!(feed(&mut a, 1, End), []);
        assert!(a.is_closed(1));
        assert_eq!(a.open_channels(), 2);
        // Channel 1 carries no barrier 2, so "x" belongs before checkpoint 2.
        assert_eq!(
            feed(&mut a, 2, End),
            [Checkpoint { id: 1 }, p(1, "x"), Checkpoint { id: 2 }]
        );
        assert_eq!(feed(&mut a, 0, End), [Finished]);
    }

    #[test]
    fn actions_are_appended_to_the_callers_list() {
        let mut a = A::new(1);
        let mut out = vec![p(0, "earlier")];
        a.on_event(0, Batch("a"), 1, &mut out);
        a.on_event(0, Barrier(1), 0, &mut out);
        assert_eq!(out, [p(0, "earlier"), p(0, "a"), Checkpoint { id: 1 }]);
    }

    #[test]
    #[should_panic(expected = "at least one input channel")]
    fn zero_channels_panics() {
        A::new(0);
    }

    #[test]
    #[should_panic(expected = "channel 2 out of range")]
    fn event_on_unknown_channel_panics() {
        feed(&mut A::new(2), 2, Batch("a"));
    }

    #[test]
    #[should_panic(expected = "channel 5 out of range")]
    fn query_on_unknown_channel_panics() {
        A::new(2).is_blocked(5);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "after its End")]
    fn event_after_end_trips_a_debug_assertion() {
        let mut a = A::new(2);
        feed(&mut a, 0, End);
        feed(&mut a, 0, Batch("a"));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "second barrier")]
    fn second_barrier_on_a_blocked_channel_trips_a_debug_assertion() {
        let mut a = A::new(2);
        feed(&mut a, 0, Barrier(1));
        feed(&mut a, 0, Barrier(1));
    }

    #[test]
    #[cfg(not(debug_assertions))]
    fn host_bugs_are_ignored_in_release_builds() {
        let mut a = A::new(2);
        feed(&mut a, 0, Barrier(1));
        assert_eq!(feed(&mut a, 0, Barrier(1)), []);
        assert_eq!(a.aligning(), Some(1));
        assert_eq!(feed(&mut a, 1, End), [Checkpoint { id: 1 }]);
        assert_eq!(feed(&mut a, 1, Batch("late")), []);
        assert_eq!(feed(&mut a, 0, End), [Finished]);
        assert_eq!(feed(&mut a, 0, End), []);
    }

    // ---- Randomized property test -------------------------------------

    /// xorshift64: tiny, deterministic, good enough for test interleavings
    /// (also those of `overtake`'s tests).
    pub(super) struct Rng(pub(super) u64);

    impl Rng {
        pub(super) fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        pub(super) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn chance(&mut self, num: u64, den: u64) -> bool {
            self.next() % den < num
        }
    }

    /// A batch is tagged (channel, sequence number on that channel).
    type Tag = (usize, usize);

    fn size((channel, seq): Tag) -> usize {
        1 + (channel * 31 + seq * 7) % 13
    }

    /// One random scenario: per-channel FIFO streams and the consistent cut.
    struct Scenario {
        streams: Vec<Vec<Input<Tag>>>,
        /// `cut[c][n]`: batches on channel `c` before barrier `n`, or all of
        /// them if `c` does not carry barrier `n` (it must end first).
        cut: Vec<Vec<usize>>,
        totals: Vec<usize>,
        barriers: u64,
    }

    /// `every_barrier`: each channel carries barriers 1..=k; otherwise each
    /// barrier is skipped on a channel with probability 1/4 (a declined
    /// checkpoint upstream), which exercises aborts.
    fn scenario(rng: &mut Rng, every_barrier: bool) -> Scenario {
        let channels = 1 + rng.below(4);
        let barriers = rng.below(5) as u64;
        let mut s = Scenario {
            streams: Vec::new(),
            cut: Vec::new(),
            totals: Vec::new(),
            barriers,
        };
        for c in 0..channels {
            let mut stream = Vec::new();
            let mut seq = 0;
            // Index 0 unused: barrier ids start at 1.
            let mut cut = vec![None; barriers as usize + 1];
            for id in 1..=barriers + 1 {
                for _ in 0..rng.below(4) {
                    stream.push(Batch((c, seq)));
                    seq += 1;
                }
                if id <= barriers && (every_barrier || rng.chance(3, 4)) {
                    stream.push(Barrier(id));
                    cut[id as usize] = Some(seq);
                }
            }
            stream.push(End);
            s.streams.push(stream);
            s.cut
                .push(cut.into_iter().map(|at| at.unwrap_or(seq)).collect());
            s.totals.push(seq);
        }
        s
    }

    /// Feeds a scenario in a random interleaving and checks every invariant.
    /// `respect_blocking`: the executor does not read blocked channels.
    fn simulate(rng: &mut Rng, s: &Scenario, every_barrier: bool, respect_blocking: bool) {
        let channels = s.streams.len();
        let mut a = Aligner::<Tag>::new(channels);
        let mut next = vec![0; channels];
        let mut processed = vec![0; channels];
        let (mut fed_batches, mut fed_bytes, mut done_batches, mut done_bytes) = (0, 0, 0, 0);
        let mut checkpoints = Vec::new();
        let mut aborted = Vec::new();
        let mut finished = false;
        let mut out = Vec::new();
        loop {
            let ready: Vec<usize> = (0..channels)
                .filter(|&c| next[c] < s.streams[c].len())
                .filter(|&c| !respect_blocking || !a.is_blocked(c))
                .collect();
            if ready.is_empty() {
                // Nothing readable must mean everything was fed (no deadlock).
                assert!((0..channels).all(|c| next[c] == s.streams[c].len()));
                break;
            }
            let c = ready[rng.below(ready.len())];
            let event = s.streams[c][next[c]].clone();
            next[c] += 1;
            let bytes = match event {
                Batch(tag) => {
                    fed_batches += 1;
                    fed_bytes += size(tag);
                    size(tag)
                }
                _ => 0,
            };
            out.clear();
            a.on_event(c, event, bytes, &mut out);
            let count = out.len();
            for (i, action) in out.drain(..).enumerate() {
                assert!(!finished, "action after Finished");
                match action {
                    Process { channel, batch } => {
                        // (1) + (2): exactly once, in per-channel order.
                        assert_eq!(batch, (channel, processed[channel]));
                        processed[channel] += 1;
                        done_batches += 1;
                        done_bytes += size(batch);
                    }
                    Checkpoint { id } => {
                        // (4) strictly increasing; never after its abort.
                        assert!(checkpoints.last().is_none_or(|&last| id > last));
                        assert!(!aborted.contains(&id));
                        // (3) the consistent cut.
                        let cut: Vec<usize> = s.cut.iter().map(|cut| cut[id as usize]).collect();
                        assert_eq!(processed, cut, "consistent cut of checkpoint {id}");
                        checkpoints.push(id);
                    }
                    Abort { id, newer } => {
                        assert!(
                            !every_barrier,
                            "no abort when every channel carries every barrier"
                        );
                        assert!(newer > id);
                        assert!(checkpoints.last().is_none_or(|&last| id > last));
                        aborted.push(id);
                    }
                    Finished => {
                        // (5) last, once.
                        assert_eq!(i + 1, count, "Finished is last");
                        finished = true;
                    }
                    other => panic!("an aligned aligner never overtakes: {other:?}"),
                }
            }
            assert_eq!(a.buffered_batches(), fed_batches - done_batches);
            assert_eq!(a.buffered_bytes(), fed_bytes - done_bytes);
            assert_eq!(a.last_checkpoint(), checkpoints.last().copied());
        }
        assert!(finished);
        assert_eq!(processed, s.totals);
        if every_barrier {
            assert_eq!(checkpoints, (1..=s.barriers).collect::<Vec<_>>());
        }
        assert_eq!(a.aligning(), None);
        assert_eq!(a.open_channels(), 0);
        assert_eq!((a.buffered_batches(), a.buffered_bytes()), (0, 0));
    }

    #[test]
    fn random_interleavings_keep_every_invariant() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..4000 {
            let every_barrier = rng.chance(1, 2);
            let respect_blocking = rng.chance(1, 2);
            let s = scenario(&mut rng, every_barrier);
            simulate(&mut rng, &s, every_barrier, respect_blocking);
        }
    }
}
