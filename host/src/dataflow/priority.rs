//! The priority path of checkpoint barriers: next to each data channel, an
//! [`Announce`], the newest barrier id its sender has announced. A sender
//! announces barrier `n` on every outgoing channel before it sends the
//! in-band `Barrier(n)` on any of them ([`crate::dataflow::output`]), so a
//! receiver in unaligned mode learns of `n` while the barrier still waits
//! behind queued records (or behind a full channel), takes its snapshot at
//! once and drains that channel up to the in-band barrier, which stays the
//! end marker of the channel's in-flight data.
//!
//! Invariants:
//! - An announced id never decreases, and once a channel announces `n`,
//!   its sender sends nothing on it but barriers before `Barrier(n)` (it
//!   announces after its snapshot's records were sent, and then only
//!   broadcasts the barrier). So a receiver that keeps reading an announced
//!   channel gets its `Barrier(n)` within the channel's capacity plus one
//!   message.
//! - An announcement is a hint: a receiver that ignores it (aligned mode, a
//!   sink) still gets the in-band barrier.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The announced barrier of one channel, shared by its sender and receiver.
#[derive(Debug, Clone, Default)]
pub(crate) struct Announce(Arc<AtomicU64>);

impl Announce {
    /// The sender is about to send `Barrier(id)` on the channel.
    pub(crate) fn announce(&self, id: u64) {
        self.0.fetch_max(id, Ordering::Release);
    }

    /// The newest barrier announced, 0 if none.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_never_go_back_and_are_shared() {
        let a = Announce::default();
        let b = a.clone();
        assert_eq!(b.get(), 0);
        a.announce(3);
        a.announce(2);
        assert_eq!(b.get(), 3);
    }
}
