//! The sending side of a node: per output port its outgoing [`Edge`]s, one
//! per downstream input wired to that port, each with one bounded channel
//! per downstream instance, and partitioned sends that honour cancellation
//! ([`Output`]).
//!
//! Invariants:
//! - A batch emitted on output port `p` goes on the edges of `p` only; a
//!   port without edges (nothing consumes it) drops it.
//! - A batch goes, per edge, either whole to the only downstream instance or
//!   split by key group (`Partitioner`) into one batch per instance; the
//!   records of one key always reach the same instance.
//! - [`Output::broadcast`] sends `End` (or a watermark, `Idle`) on every
//!   outgoing channel, and [`Output::broadcast_barrier`] a barrier, after
//!   everything sent before it: with FIFO channels, this is the "barriers
//!   in order" invariant of [`crate::dataflow::protocol`].
//! - **Priority barriers.** `broadcast_barrier(n)` first announces `n` on
//!   every outgoing channel ([`Announce`]), then sends `Barrier(n)` on each
//!   as soon as it has room, in whatever order they get room: one full
//!   channel never holds the barrier back from the others, so a receiver
//!   that drains an announced channel gets its barrier however slow the
//!   sender's other receivers are (the deadlock freedom of unaligned
//!   checkpoints, ARCHITECTURE.md).
//! - A full channel blocks the sender (backpressure); while blocked it checks
//!   the cancel flag every [`POLL`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Select, SendTimeoutError, Sender, TrySendError};

use crate::dataflow::batch::Batch;
use crate::dataflow::cancel::{Cancelled, POLL};
use crate::dataflow::partition::Partitioner;
use crate::dataflow::priority::Announce;
use crate::dataflow::protocol::Msg;

/// What an [`Output`] counts (the node's live metrics).
pub(crate) trait OutputCounters: Send + Sync {
    /// `batch` is about to be sent downstream.
    fn sent(&self, batch: &Batch);
    /// The sender waited `waited` for a full channel.
    fn blocked(&self, waited: Duration);
}

/// One outgoing connection to every instance of a downstream node (on one
/// of its input ports).
pub(crate) struct Edge {
    /// One channel per downstream instance, by instance index.
    pub senders: Vec<Sender<Msg>>,
    /// Each channel's announced barrier, by instance index.
    pub announces: Vec<Announce>,
    /// Routes keys to downstream instances.
    pub partitioner: Partitioner,
}

/// All outgoing edges of one instance of a node.
pub(crate) struct Output {
    /// Per output port (a source has one), its edges: one per downstream
    /// input wired to it.
    pub ports: Vec<Vec<Edge>>,
    /// The node's counters.
    pub counters: Arc<dyn OutputCounters>,
}

impl Output {
    /// Sends `batch`, emitted on output `port`, on every edge of that port,
    /// partitioned by key where the downstream node has several instances.
    /// An empty batch, or one on a port without edges, sends nothing.
    pub(crate) fn send(
        &mut self,
        cancel: &AtomicBool,
        port: u32,
        batch: Batch,
    ) -> Result<(), Cancelled> {
        self.send_counted(cancel, port, batch, true)
    }

    /// [`send`](Self::send), not counting the records as the node's output
    /// (a source's dead letters).
    pub(crate) fn send_uncounted(
        &mut self,
        cancel: &AtomicBool,
        port: u32,
        batch: Batch,
    ) -> Result<(), Cancelled> {
        self.send_counted(cancel, port, batch, false)
    }

    fn send_counted(
        &mut self,
        cancel: &AtomicBool,
        port: u32,
        batch: Batch,
        count: bool,
    ) -> Result<(), Cancelled> {
        let edges = match self.ports.get_mut(port as usize) {
            Some(edges) if !edges.is_empty() && !batch.is_empty() => edges,
            _ => return Ok(()),
        };
        if count {
            self.counters.sent(&batch);
        }
        let last = edges.len() - 1;
        let mut batch = Some(batch);
        for (i, edge) in edges.iter_mut().enumerate() {
            let b = if i == last {
                batch.take().expect("last edge")
            } else {
                batch.clone().expect("not taken yet")
            };
            if edge.senders.len() == 1 {
                send(cancel, &*self.counters, &edge.senders[0], Msg::Batch(b))?;
                continue;
            }
            let partitioner = &mut edge.partitioner;
            let parts = b.partition(edge.senders.len(), |key| partitioner.route(key));
            for (tx, part) in edge.senders.iter().zip(parts) {
                if !part.is_empty() {
                    send(cancel, &*self.counters, tx, Msg::Batch(part))?;
                }
            }
        }
        Ok(())
    }

    /// Announces barrier `id` on every outgoing channel, then sends it on
    /// each as soon as it has room (see the module's invariants).
    pub(crate) fn broadcast_barrier(&self, cancel: &AtomicBool, id: u64) -> Result<(), Cancelled> {
        let edges = || self.ports.iter().flatten();
        edges()
            .flat_map(|e| &e.announces)
            .for_each(|a| a.announce(id));
        let mut waiting = Vec::new();
        for tx in edges().flat_map(|e| &e.senders) {
            match tx.try_send(Msg::Barrier(id)) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => waiting.push(tx),
                Err(TrySendError::Disconnected(_)) => return Err(Cancelled),
            }
        }
        if waiting.is_empty() {
            return Ok(());
        }
        let blocked = Instant::now();
        let _account = Defer(|| self.counters.blocked(blocked.elapsed()));
        while !waiting.is_empty() {
            let mut sel = Select::new();
            waiting.iter().for_each(|tx| {
                sel.send(tx);
            });
            match sel.select_timeout(POLL) {
                Ok(op) => {
                    let i = op.index();
                    op.send(waiting[i], Msg::Barrier(id))
                        .map_err(|_| Cancelled)?;
                    waiting.swap_remove(i);
                }
                Err(_) if cancel.load(Ordering::Relaxed) => return Err(Cancelled),
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// Sends `make()` (`End`, a watermark or `Idle`) on every outgoing
    /// channel.
    pub(crate) fn broadcast(
        &self,
        cancel: &AtomicBool,
        make: impl Fn() -> Msg,
    ) -> Result<(), Cancelled> {
        for edge in self.ports.iter().flatten() {
            for tx in &edge.senders {
                send(cancel, &*self.counters, tx, make())?;
            }
        }
        Ok(())
    }
}

/// Sends `msg` on `tx`, waiting while the channel is full (and counting the
/// wait), until it is sent or the job is cancelled.
fn send(
    cancel: &AtomicBool,
    counters: &dyn OutputCounters,
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
    let _account = Defer(|| counters.blocked(blocked.elapsed()));
    loop {
        match tx.send_timeout(msg, POLL) {
            Ok(()) => return Ok(()),
            Err(SendTimeoutError::Timeout(m)) => {
                if cancel.load(Ordering::Relaxed) {
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use crossbeam_channel::{Receiver, unbounded};

    use super::*;
    use crate::dataflow::record::Record;

    #[derive(Default)]
    struct Sent(Mutex<usize>);

    impl OutputCounters for Sent {
        fn sent(&self, batch: &Batch) {
            *self.0.lock().unwrap() += batch.len();
        }

        fn blocked(&self, _: Duration) {}
    }

    fn edge() -> (Edge, Receiver<Msg>) {
        let (tx, rx) = unbounded();
        let edge = Edge {
            senders: vec![tx],
            announces: vec![Announce::default()],
            partitioner: Partitioner::new(1),
        };
        (edge, rx)
    }

    fn batch(values: &[&str]) -> Batch {
        let mut batch = Batch::new();
        values
            .iter()
            .for_each(|v| batch.push(None, v.as_bytes(), None));
        batch
    }

    fn values(rx: &Receiver<Msg>) -> Vec<Vec<String>> {
        let value = |r: Record| String::from_utf8(r.value).unwrap();
        let msgs = rx.try_iter().map(|msg| match msg {
            Msg::Batch(b) => b.to_records().into_iter().map(value).collect(),
            other => vec![format!("{other:?}")],
        });
        msgs.collect()
    }

    /// Port 0 has two consumers, port 1 one, port 2 none.
    #[test]
    fn a_batch_goes_to_the_edges_of_its_port_only() {
        let ((a, rx_a), (b, rx_b), (c, rx_c)) = (edge(), edge(), edge());
        let counters = Arc::new(Sent::default());
        let mut out = Output {
            ports: vec![vec![a, b], vec![c], vec![]],
            counters: counters.clone(),
        };
        let cancel = AtomicBool::new(false);
        out.send(&cancel, 0, batch(&["x"])).unwrap();
        out.send(&cancel, 1, batch(&["y", "z"])).unwrap();
        out.send(&cancel, 2, batch(&["dropped"])).unwrap();
        out.send(&cancel, 3, batch(&["no such port"])).unwrap();
        assert_eq!(values(&rx_a), [["x"]]);
        assert_eq!(values(&rx_b), [["x"]]);
        assert_eq!(values(&rx_c), [["y", "z"]]);
        // Dropped records are not counted as sent.
        assert_eq!(*counters.0.lock().unwrap(), 3);
        // A barrier is announced, and goes, on every port's edges.
        out.broadcast_barrier(&cancel, 7).unwrap();
        for (rx, edge) in [&rx_a, &rx_b, &rx_c]
            .into_iter()
            .zip(out.ports.iter().flatten())
        {
            assert_eq!(values(rx), [["Barrier(7)"]]);
            assert_eq!(edge.announces[0].get(), 7);
        }
    }

    /// A full channel does not hold the barrier back from the others: it is
    /// announced on both at once, sent on the free one, and on the full one
    /// once its receiver reads.
    #[test]
    fn a_full_channel_does_not_hold_the_barrier_back_from_the_others() {
        let (full_tx, full_rx) = crossbeam_channel::bounded(1);
        let (free_tx, free_rx) = crossbeam_channel::bounded(1);
        full_tx.send(Msg::Idle).unwrap();
        let edge = Edge {
            senders: vec![full_tx, free_tx],
            announces: vec![Announce::default(), Announce::default()],
            partitioner: Partitioner::new(2),
        };
        let announced = edge.announces.clone();
        let out = Output {
            ports: vec![vec![edge]],
            counters: Arc::new(Sent::default()),
        };
        let sender = std::thread::spawn(move || {
            out.broadcast_barrier(&AtomicBool::new(false), 3).unwrap();
        });
        let got = free_rx.recv().unwrap();
        assert!(matches!(got, Msg::Barrier(3)), "{got:?}");
        assert_eq!((announced[0].get(), announced[1].get()), (3, 3));
        assert!(matches!(full_rx.recv().unwrap(), Msg::Idle));
        assert!(matches!(full_rx.recv().unwrap(), Msg::Barrier(3)));
        sender.join().unwrap();
    }
}
