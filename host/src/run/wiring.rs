//! The wiring phase of an attempt: every channel of the dataflow, built
//! before anything starts ([`Wiring::new`]).
//!
//! Invariants:
//! - For every consumer instance there is one bounded channel (capacity
//!   [`CHANNEL_CAPACITY`]) per input port, upstream of that port and
//!   upstream instance: no edge queue is unbounded, and a full channel
//!   blocks its sender. A union port has the channels of all its upstreams,
//!   so one aligner aligns them all.
//! - An instance's input channels are numbered in job order: by input port
//!   (as the job resolves them), then by upstream in the port's list, then
//!   by upstream instance. The same order gives the edges out of each output
//!   port of a node.
//! - Each edge leaves the output port its consumer names (port 0 for a bare
//!   id; a source has only port 0).
//! - Every data channel has its [`Announce`] (the barriers' priority path),
//!   shared by the edge that sends on it and the input that reads it.
//! - Operator instances take checkpoints as the job's `[checkpoint] mode`
//!   and `alignment_timeout` say; sinks always align.
//! - Control channels (source commands, sink commits, events) are unbounded:
//!   they carry a few messages per checkpoint.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

use crate::config::{CheckpointConfig, CheckpointMode, Job, Upstream};
use crate::dataflow::input::{Alignment, InputChannel, InputChannels};
use crate::dataflow::output::Edge;
use crate::dataflow::partition::Partitioner;
use crate::dataflow::priority::Announce;
use crate::dataflow::protocol::{Event, SourceCtl};
use crate::run::plugins::LoadedOperator;
use crate::threads::{Shared, TaskError};

/// Messages a channel holds before its sender blocks (backpressure).
const CHANNEL_CAPACITY: usize = 16;

/// The input channels of one instance, one per upstream instance.
type ChannelInputs = Vec<InputChannel>;

/// How operator instances of a job with `checkpoint` take checkpoints.
fn alignment(checkpoint: &CheckpointConfig) -> Alignment {
    match (checkpoint.mode, checkpoint.alignment_timeout) {
        (CheckpointMode::Unaligned, _) => Alignment::Unaligned,
        (CheckpointMode::Aligned, Some(timeout)) => Alignment::Timeout(timeout),
        (CheckpointMode::Aligned, None) => Alignment::Aligned,
    }
}

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
    /// Per node id, per instance: its outgoing edges per output port.
    edges: HashMap<String, Vec<PortEdges>>,
}

/// The outgoing edges of one instance, per output port.
type PortEdges = Vec<Vec<Edge>>;

/// The ports of every node: parallelism and, per operator, its output port
/// names (a source has one unnamed port).
struct Nodes<'a> {
    parallelism: HashMap<&'a str, u32>,
    outputs: HashMap<&'a str, &'a [String]>,
}

impl Nodes<'_> {
    /// The index of the output port `up` names (validated by the job).
    fn port(&self, up: &Upstream) -> usize {
        match self.outputs.get(up.node.as_str()) {
            Some(outputs) => up.port_index(outputs).expect("resolved output port") as usize,
            None => 0,
        }
    }
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
        let parallelism = job.sources.iter().map(|s| (s.id.as_str(), 1));
        let parallelism =
            parallelism.chain(job.operators.iter().map(|o| (o.id.as_str(), o.parallelism)));
        let outputs = job.operators.iter().zip(plugins);
        let outputs = outputs.map(|(op, (plugin, _))| (op.id.as_str(), &plugin.info().outputs[..]));
        let nodes = Nodes {
            parallelism: parallelism.collect(),
            outputs: outputs.collect(),
        };
        let mut edges: HashMap<String, Vec<PortEdges>> = nodes
            .parallelism
            .iter()
            .map(|(&id, &p)| {
                let ports = nodes.outputs.get(id).map_or(1, |outputs| outputs.len());
                let instance = || (0..ports).map(|_| Vec::new()).collect();
                (id.to_owned(), (0..p).map(|_| instance()).collect())
            })
            .collect();

        let mut operator_inputs = Vec::new();
        for (op, (_, ports)) in job.operators.iter().zip(plugins) {
            let mut per_instance: Vec<ChannelInputs> =
                (0..op.parallelism).map(|_| Vec::new()).collect();
            for (port, upstream) in ports {
                let from_upstream = connect(&mut edges, &nodes, upstream, *port, op.parallelism);
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
                        alignment: alignment(&job.checkpoint),
                    })
                    .collect(),
            );
        }

        let mut sink_inputs = Vec::new();
        let mut commits = Vec::new();
        for s in &job.sinks {
            let mut channels = Vec::new();
            for upstream in &s.input {
                let from_upstream = connect(&mut edges, &nodes, upstream, 0, 1).pop();
                channels.extend(from_upstream.expect("one sink instance"));
            }
            let (tx, rx) = unbounded();
            commits.push(tx);
            sink_inputs.push(InputChannels {
                channels,
                commits: Some(rx),
                alignment: Alignment::Aligned,
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
    /// Takes the outgoing edges, per output port, of instance `instance` of
    /// node `id`.
    pub(crate) fn outgoing(&mut self, id: &str, instance: usize) -> PortEdges {
        std::mem::take(&mut self.edges.get_mut(id).expect("node")[instance])
    }
}

/// Connects every instance of `upstream` (on the output port it names) to
/// `consumers` instances on input `port`: adds one edge per upstream
/// instance to `edges` and returns, per consumer instance, its receivers
/// from `upstream`.
fn connect(
    edges: &mut HashMap<String, Vec<PortEdges>>,
    nodes: &Nodes,
    upstream: &Upstream,
    port: u32,
    consumers: u32,
) -> Vec<ChannelInputs> {
    let out_port = nodes.port(upstream);
    let mut per_consumer: Vec<ChannelInputs> = (0..consumers).map(|_| Vec::new()).collect();
    let instances = edges.get_mut(&upstream.node).expect("validated upstream");
    for instance in instances.iter_mut() {
        let mut senders = Vec::with_capacity(consumers as usize);
        let mut announces = Vec::with_capacity(consumers as usize);
        for rxs in per_consumer.iter_mut() {
            let (tx, rx) = bounded(CHANNEL_CAPACITY);
            let announced = Announce::default();
            senders.push(tx);
            announces.push(announced.clone());
            rxs.push(InputChannel {
                port,
                rx,
                announced,
            });
        }
        instance[out_port].push(Edge {
            senders,
            announces,
            partitioner: Partitioner::new(consumers),
        });
    }
    per_consumer
}
