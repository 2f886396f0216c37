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
//! - [`Output::broadcast`] sends a barrier or `End` on every outgoing channel,
//!   after everything sent before it: with FIFO channels, this is the
//!   "barriers in order" invariant of [`crate::dataflow::protocol`].
//! - A full channel blocks the sender (backpressure); while blocked it checks
//!   the cancel flag every [`POLL`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{SendTimeoutError, Sender, TrySendError};

use crate::dataflow::batch::Batch;
use crate::dataflow::cancel::{Cancelled, POLL};
use crate::dataflow::partition::Partitioner;
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
        let edges = match self.ports.get_mut(port as usize) {
            Some(edges) if !edges.is_empty() && !batch.is_empty() => edges,
            _ => return Ok(()),
        };
        self.counters.sent(&batch);
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

    /// Sends `make()` (a barrier or `End`) on every outgoing channel.
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
        // A barrier goes on every port's edges.
        out.broadcast(&cancel, || Msg::Barrier(7)).unwrap();
        for rx in [&rx_a, &rx_b, &rx_c] {
            assert_eq!(values(rx), [["Barrier(7)"]]);
        }
    }
}
