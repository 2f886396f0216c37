//! Overtaking: the unaligned checkpoints of an [`Aligner`] (see the
//! [module documentation](super), "Overtaking"): starting one at the first
//! barrier or announcement, or when the executor's alignment timeout
//! switches an alignment; the channels that owe its barrier, their
//! recorded in-flight batches and the drain of announced channels.

use super::{Action, Aligner, Channel, Held, Input};

impl<T: Clone> Aligner<T> {
    /// An aligner for `channels` input channels that overtakes every
    /// checkpoint at its first barrier or announcement (unaligned mode).
    ///
    /// # Panics
    /// If `channels` is 0.
    #[track_caller]
    pub fn unaligned(channels: usize) -> Self {
        let mut a = Self::new(channels);
        a.unaligned = true;
        a
    }

    /// The sender of `channel` announced barrier `id` (the priority path,
    /// `dataflow/priority.rs`). Appends the resulting actions to `out`:
    /// in unaligned mode, the first announcement of a checkpoint overtakes
    /// it; a channel that owes the overtaken checkpoint starts draining.
    /// Otherwise the announcement is only remembered, for a later
    /// [`overtake`](Self::overtake).
    ///
    /// # Panics
    /// If `channel` is out of range.
    #[track_caller]
    pub fn on_announce(&mut self, channel: usize, id: u64, out: &mut Vec<Action<T>>) {
        self.check_channel(channel);
        if self.ended[channel] || id <= self.announced[channel] {
            return;
        }
        self.announced[channel] = id;
        match self.aligning {
            Some(current)
                if self.overtaken && current == id && self.channels[channel] == Channel::Owing =>
            {
                self.channels[channel] = Channel::Draining;
                self.draining += 1;
            }
            None if self.unaligned && self.max_seen.is_none_or(|seen| id > seen) => {
                self.start_overtaken(id, None, out);
                self.run(out);
            }
            _ => {}
        }
    }

    /// Overtakes checkpoint `id` now (the alignment timeout): the current
    /// alignment of `id`, or, when none is running, a checkpoint `id` newer
    /// than every barrier seen (one only announced so far). Channels that
    /// delivered barrier `id` keep their held events until the drain ends.
    /// Returns whether it overtook; appends the actions to `out`.
    pub fn overtake(&mut self, id: u64, out: &mut Vec<Action<T>>) -> bool {
        let can = match self.aligning {
            Some(current) => current == id && !self.overtaken,
            None => self.max_seen.is_none_or(|seen| id > seen),
        };
        if can {
            self.start_overtaken(id, None, out);
            self.run(out);
        }
        can
    }

    /// Whether the current checkpoint was overtaken.
    pub fn overtaken(&self) -> bool {
        self.overtaken
    }

    /// Whether some channel is draining: the executor should then read
    /// only the draining channels ([`is_draining`](Self::is_draining)),
    /// whose barriers are on their way.
    pub fn draining(&self) -> bool {
        self.draining > 0
    }

    /// Whether `channel` drains (owes the overtaken barrier, which its
    /// sender announced).
    ///
    /// # Panics
    /// If `channel` is out of range.
    #[track_caller]
    pub fn is_draining(&self, channel: usize) -> bool {
        self.check_channel(channel);
        self.channels[channel] == Channel::Draining
    }

    /// Whether events fed on `channel` now are held in the buffer (it is
    /// blocked or draining), for the executor's byte accounting.
    ///
    /// # Panics
    /// If `channel` is out of range.
    #[track_caller]
    pub fn holds(&self, channel: usize) -> bool {
        self.check_channel(channel);
        matches!(self.channels[channel], Channel::Blocked | Channel::Draining)
    }

    /// Overtakes checkpoint `id`: `Snapshot` now; every channel not closed,
    /// not blocked (it delivered `id` during an alignment) and not `passed`
    /// (it just delivered `id`) owes it, draining if its sender announced it.
    pub(super) fn start_overtaken(
        &mut self,
        id: u64,
        passed: Option<usize>,
        out: &mut Vec<Action<T>>,
    ) {
        self.aligning = Some(id);
        self.max_seen = Some(id);
        self.overtaken = true;
        out.push(Action::Snapshot { id });
        for c in 0..self.channels.len() {
            if self.channels[c] != Channel::Open || Some(c) == passed {
                continue;
            }
            self.owing += 1;
            if self.announced[c] >= id {
                self.channels[c] = Channel::Draining;
                self.draining += 1;
            } else {
                self.channels[c] = Channel::Owing;
            }
        }
        self.progress(out);
    }

    /// A batch on an owing channel: in-flight data, recorded, then acted on
    /// (or held, while the channel drains).
    pub(super) fn record(&mut self, held: Held<T>, out: &mut Vec<Action<T>>) {
        let Input::Batch(batch) = &held.event else {
            unreachable!("record is called for batches")
        };
        let channel = held.channel;
        out.push(Action::Record {
            channel,
            batch: batch.clone(),
        });
        if self.channels[channel] == Channel::Draining {
            self.hold(held);
        } else if let Input::Batch(batch) = held.event {
            out.push(Action::Process { channel, batch });
        }
    }

    /// Barrier `id` (in `held`) on a channel that owes the overtaken one.
    pub(super) fn owed_barrier(&mut self, held: Held<T>, id: u64, out: &mut Vec<Action<T>>) {
        let current = self.aligning.expect("a channel owes only while overtaken");
        let channel = held.channel;
        if id < current {
            // Stale: a barrier the channel carries late, of an abandoned
            // checkpoint.
            return;
        }
        if id > current {
            // The channel skipped `current`, which can never complete here.
            out.push(Action::Abort {
                id: current,
                newer: id,
            });
            self.hold(held);
            return self.end_alignment();
        }
        self.owing -= 1;
        if self.channels[channel] == Channel::Draining {
            // Its later events wait for the drain to end.
            self.draining -= 1;
            self.block(channel);
        } else {
            self.channels[channel] = Channel::Open;
        }
        self.progress(out);
    }

    /// End on a channel that owes the overtaken barrier: it counts as
    /// delivered (nothing follows on it; its held batches stay in order in
    /// the buffer).
    pub(super) fn owed_end(&mut self, channel: usize, out: &mut Vec<Action<T>>) {
        self.owing -= 1;
        if self.channels[channel] == Channel::Draining {
            self.draining -= 1;
        }
        self.channels[channel] = Channel::Closed;
        self.closed += 1;
        self.progress(out);
    }
}

#[cfg(test)]
mod tests;
