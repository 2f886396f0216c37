//! The wiring phase of an attempt: every channel of the dataflow, built
//! before anything starts ([`Wiring::new`]).
//!
//! Invariants:
//! - For every consumer instance there is one bounded channel (capacity
//!   [`CHANNEL_CAPACITY`]) per input port, upstream of that port and
//!   upstream instance: no edge queue is unbounded, and a full channel
//!   blocks its sender. A union port has the channels of all its upstreams,
//!   so one aligner aligns them all.
//! - Channels are built by walking the plan's edges by id: an instance's
//!   input channels are numbered by its node's input edges (by input port,
//!   then by upstream in the port's list), then by upstream instance; each
//!   output port of an instance sends on its edges in id order.
//! - Every channel end is handed out by the id of the instance (or, for a
//!   control channel, the node) that owns it, never by position.
//! - Every data channel has its [`Announce`] (the barriers' priority path),
//!   shared by the edge that sends on it and the input that reads it.
//! - Operator instances take checkpoints as the job's `[checkpoint] mode`
//!   and `alignment_timeout` say; sinks always align.
//! - Control channels (source commands, sink commits, events) are unbounded:
//!   they carry a few messages per checkpoint.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

use crate::config::{CheckpointConfig, CheckpointMode};
use crate::dataflow::input::{Alignment, InputChannel, InputChannels};
use crate::dataflow::output::Edge;
use crate::dataflow::partition::Partitioner;
use crate::dataflow::priority::Announce;
use crate::dataflow::protocol::{Event, SourceCtl};
use crate::plan::{self, InstanceId, NodeId, NodeKind, Partitioning, Plan};
use crate::threads::{Shared, TaskError};

/// Messages a channel holds before its sender blocks (backpressure).
const CHANNEL_CAPACITY: usize = 16;

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

/// The threads' ends of every channel, each taken once by its owner's id.
pub(crate) struct TaskEnds {
    /// The cancel flag and the events' sender.
    pub shared: Shared,
    /// Per operator instance and sink: its inputs (a sink's with its commit
    /// channel).
    inputs: BTreeMap<InstanceId, InputChannels>,
    /// Per source: where it reads commands.
    source_ctls: BTreeMap<NodeId, Receiver<SourceCtl>>,
    /// Per source and operator instance: its outgoing edges per output port.
    outputs: BTreeMap<InstanceId, PortEdges>,
}

/// The outgoing edges of one instance, per output port.
type PortEdges = Vec<Vec<Edge>>;

/// The driver's ends of the control channels.
pub(crate) struct DriverEnds {
    /// What the threads report.
    pub events: Receiver<Event<TaskError>>,
    /// Per source: where commands go.
    pub source_ctls: BTreeMap<NodeId, Sender<SourceCtl>>,
    /// Per sink: where commits go.
    pub commits: BTreeMap<NodeId, Sender<u64>>,
}

impl Wiring {
    /// Builds every channel of `plan`.
    pub(crate) fn new(plan: &Plan<'_>) -> Wiring {
        let (events_tx, events) = unbounded();
        let shared = Shared {
            cancel: Arc::new(AtomicBool::new(false)),
            events: events_tx,
        };
        let mut channels: BTreeMap<InstanceId, Vec<InputChannel>> = BTreeMap::new();
        let mut outputs: BTreeMap<InstanceId, PortEdges> = BTreeMap::new();
        for node in plan.nodes() {
            let ports =
                || -> PortEdges { node.output_ports().iter().map(|_| Vec::new()).collect() };
            outputs.extend(node.instances().map(|i| (i, ports())));
        }
        for edge in plan.edges() {
            connect(plan, edge, &mut channels, &mut outputs);
        }

        let operator_alignment = alignment(&plan.job().checkpoint);
        let mut inputs = BTreeMap::new();
        let mut commits = BTreeMap::new();
        let mut source_ctls = BTreeMap::new();
        let mut source_ctl_rxs = BTreeMap::new();
        for node in plan.nodes() {
            let (alignment, commit) = match node.kind() {
                NodeKind::Source => {
                    let (tx, rx) = unbounded();
                    source_ctls.insert(node.id(), tx);
                    source_ctl_rxs.insert(node.id(), rx);
                    continue;
                }
                NodeKind::Operator => (operator_alignment, None),
                NodeKind::Sink => {
                    let (tx, rx) = unbounded();
                    commits.insert(node.id(), tx);
                    (Alignment::Aligned, Some(rx))
                }
            };
            for instance in node.instances() {
                let input = InputChannels {
                    channels: channels.remove(&instance).unwrap_or_default(),
                    commits: commit.clone(),
                    alignment,
                };
                inputs.insert(instance, input);
            }
        }
        Wiring {
            tasks: TaskEnds {
                shared,
                inputs,
                source_ctls: source_ctl_rxs,
                outputs,
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
    /// Takes the inputs of operator instance or sink `instance`.
    pub(crate) fn inputs(&mut self, instance: InstanceId) -> InputChannels {
        self.inputs
            .remove(&instance)
            .expect("an instance with inputs")
    }

    /// Takes the outgoing edges, per output port, of `instance`.
    pub(crate) fn outgoing(&mut self, instance: InstanceId) -> PortEdges {
        self.outputs
            .remove(&instance)
            .expect("an instance of the plan")
    }

    /// Takes the command channel of source `source`.
    pub(crate) fn source_ctl(&mut self, source: NodeId) -> Receiver<SourceCtl> {
        self.source_ctls.remove(&source).expect("a source")
    }
}

/// Builds the channels of `edge`: for every producer instance, one channel
/// to every consumer instance its partitioning connects it to; the
/// receivers go to the consumers' `channels`, the senders, as one
/// [`Edge`], to the producer's output port in `outputs`.
fn connect(
    plan: &Plan<'_>,
    edge: &plan::Edge,
    channels: &mut BTreeMap<InstanceId, Vec<InputChannel>>,
    outputs: &mut BTreeMap<InstanceId, PortEdges>,
) {
    let (from, to) = (plan.node(edge.from().node), plan.node(edge.to().node));
    let consumers = to.parallelism();
    for producer in from.instances() {
        let mut senders = Vec::with_capacity(consumers as usize);
        let mut announces = Vec::with_capacity(consumers as usize);
        let connected = |c: &InstanceId| edge.partitioning().connects(producer.index, c.index);
        for consumer in to.instances().filter(connected) {
            let (tx, rx) = bounded(CHANNEL_CAPACITY);
            let announced = Announce::default();
            senders.push(tx);
            announces.push(announced.clone());
            channels.entry(consumer).or_default().push(InputChannel {
                port: edge.to().port,
                rx,
                announced,
            });
        }
        let partitioner = match edge.partitioning() {
            Partitioning::Hash => Partitioner::new(consumers),
        };
        let ports = outputs.get_mut(&producer).expect("an instance of the plan");
        ports[edge.from().port as usize].push(Edge {
            senders,
            announces,
            partitioner,
        });
    }
}
