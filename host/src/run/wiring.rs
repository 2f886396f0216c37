//! The wiring phase of an attempt: every channel of the dataflow, built
//! before anything starts ([`Wiring::new`]).
//!
//! Invariants:
//! - For every consumer instance there is one bounded channel (capacity
//!   [`CHANNEL_CAPACITY`]) per upstream instance and input port: no edge
//!   queue is unbounded, and a full channel blocks its sender.
//! - An instance's input channels are numbered in job order: by input port
//!   (as the job resolves them), then by upstream instance. The same order
//!   gives the edges out of a node.
//! - Control channels (source commands, sink commits, events) are unbounded:
//!   they carry a few messages per checkpoint.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

use crate::config::Job;
use crate::dataflow::input::InputChannels;
use crate::dataflow::output::Edge;
use crate::dataflow::partition::Partitioner;
use crate::dataflow::protocol::{Event, Msg, SourceCtl};
use crate::run::plugins::LoadedOperator;
use crate::tasks::{Shared, TaskError};

/// Messages a channel holds before its sender blocks (backpressure).
const CHANNEL_CAPACITY: usize = 16;

/// The receivers of one instance: `(input port, channel)` per upstream instance.
type ChannelInputs = Vec<(u32, Receiver<Msg>)>;

/// Every channel of one attempt, split into the ends the threads take and
/// the ends the driver keeps.
pub(crate) struct Wiring {
    /// For the threads.
    pub tasks: TaskEnds,
    /// For the driver.
    pub driver: DriverEnds,
}

/// The threads' ends of every channel.
pub(crate) struct TaskEnds {
    /// The cancel flag and the events' sender.
    pub shared: Shared,
    /// Per operator (job order), per instance: its inputs.
    pub operator_inputs: Vec<Vec<InputChannels>>,
    /// Per sink (job order): its inputs, with its commit channel.
    pub sink_inputs: Vec<InputChannels>,
    /// Per source (job order): where it reads commands.
    pub source_ctls: Vec<Receiver<SourceCtl>>,
    /// Per node id, per instance: its outgoing edges.
    edges: HashMap<String, Vec<Vec<Edge>>>,
}

/// The driver's ends of the control channels.
pub(crate) struct DriverEnds {
    /// What the threads report.
    pub events: Receiver<Event<TaskError>>,
    /// Per source (job order): where commands go.
    pub source_ctls: Vec<Sender<SourceCtl>>,
    /// Per sink (job order): where commits go.
    pub commits: Vec<Sender<u64>>,
}

impl Wiring {
    /// Builds every channel of `job`, whose operators run `plugins`.
    pub(crate) fn new(job: &Job, plugins: &[LoadedOperator]) -> Wiring {
        let (events_tx, events) = unbounded();
        let shared = Shared {
            cancel: Arc::new(AtomicBool::new(false)),
            events: events_tx,
        };
        let parallelism: HashMap<&str, u32> = job
            .sources
            .iter()
            .map(|s| (s.id.as_str(), 1))
            .chain(job.operators.iter().map(|o| (o.id.as_str(), o.parallelism)))
            .collect();
        let mut edges: HashMap<String, Vec<Vec<Edge>>> = parallelism
            .iter()
            .map(|(id, p)| (id.to_string(), (0..*p).map(|_| Vec::new()).collect()))
            .collect();

        let mut operator_inputs = Vec::new();
        for (op, (_, ports)) in job.operators.iter().zip(plugins) {
            let mut per_instance: Vec<ChannelInputs> =
                (0..op.parallelism).map(|_| Vec::new()).collect();
            for (port, upstream) in ports {
                let from_upstream =
                    connect(&mut edges, &parallelism, upstream, *port, op.parallelism);
                for (i, rxs) in from_upstream.into_iter().enumerate() {
                    per_instance[i].extend(rxs);
                }
            }
            operator_inputs.push(
                per_instance
                    .into_iter()
                    .map(|channels| InputChannels {
                        channels,
                        commits: None,
                    })
                    .collect(),
            );
        }

        let mut sink_inputs = Vec::new();
        let mut commits = Vec::new();
        for s in &job.sinks {
            let channels = connect(&mut edges, &parallelism, &s.input, 0, 1)
                .pop()
                .expect("one sink instance");
            let (tx, rx) = unbounded();
            commits.push(tx);
            sink_inputs.push(InputChannels {
                channels,
                commits: Some(rx),
            });
        }

        let (source_ctls, source_ctl_rxs) = job.sources.iter().map(|_| unbounded()).unzip();
        Wiring {
            tasks: TaskEnds {
                shared,
                operator_inputs,
                sink_inputs,
                source_ctls: source_ctl_rxs,
                edges,
            },
            driver: DriverEnds {
                events,
                source_ctls,
                commits,
            },
        }
    }
}

impl TaskEnds {
    /// Takes the outgoing edges of instance `instance` of node `id`.
    pub(crate) fn outgoing(&mut self, id: &str, instance: usize) -> Vec<Edge> {
        std::mem::take(&mut self.edges.get_mut(id).expect("node")[instance])
    }
}

/// Connects every instance of `upstream` to `consumers` instances on input
/// `port`: adds one edge per upstream instance to `edges` and returns, per
/// consumer instance, its receivers from `upstream`.
fn connect(
    edges: &mut HashMap<String, Vec<Vec<Edge>>>,
    parallelism: &HashMap<&str, u32>,
    upstream: &str,
    port: u32,
    consumers: u32,
) -> Vec<ChannelInputs> {
    let up = parallelism[upstream];
    let mut per_consumer: Vec<ChannelInputs> = (0..consumers).map(|_| Vec::new()).collect();
    for u in 0..up {
        let mut senders = Vec::with_capacity(consumers as usize);
        for rxs in per_consumer.iter_mut() {
            let (tx, rx) = bounded(CHANNEL_CAPACITY);
            senders.push(tx);
            rxs.push((port, rx));
        }
        edges.get_mut(upstream).expect("validated upstream")[u as usize].push(Edge {
            senders,
            partitioner: Partitioner::new(consumers),
        });
    }
    per_consumer
}
