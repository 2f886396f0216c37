//! A node of the plan ([`Node`]): what the job file says of it, its kind,
//! parallelism and port names, the edges into and out of it, and for an
//! operator its plugin and resolved input ports.
//!
//! Invariants:
//! - A source has no input port and one unnamed output port (0), or the
//!   named ports its connector declares (a table each of a CDC source;
//!   a replay source: the input ports of its operator), then
//!   [`DEAD_LETTER_PORT`] when its `on_error` sends bad records to a sink;
//!   an operator whose `on_error` does has that port after its plugin's; a
//!   sink
//!   one unnamed input port (0) and no output port; an operator the ports
//!   its plugin declares ([`Ports`]).
//! - A source and a sink run one instance; an operator its `parallelism`.
//! - [`Node::inputs`] lists the edges into the node in the order its
//!   instances number their input channels (by input port, then in the
//!   order of the port's upstream list); [`Node::outputs`] the edges out of
//!   one output port, in edge id order.

use crate::config::{DEAD_LETTER_PORT, OperatorConfig, SinkConfig, SourceConfig, Upstream};
use crate::wasm::Plugin;

use super::ids::{EdgeId, InstanceId, NodeId};

pub use crate::metrics::NodeKind;

/// The port names an operator's plugin declares, which the plan numbers
/// its ports by.
pub trait Ports {
    /// The declared input port names, in order.
    fn input_ports(&self) -> &[String];
    /// The declared output port names, in order.
    fn output_ports(&self) -> &[String];
}

impl Ports for Plugin {
    fn input_ports(&self) -> &[String] {
        &self.info().inputs
    }

    fn output_ports(&self) -> &[String] {
        &self.info().outputs
    }
}

/// The job-file entry of a node.
#[derive(Debug, Clone, Copy)]
pub(super) enum Entry<'j> {
    Source(&'j SourceConfig),
    Operator(&'j OperatorConfig),
    Sink(&'j SinkConfig),
}

/// A node of the plan, with `P` the plugin an operator runs.
#[derive(Debug, Clone)]
pub struct Node<'j, P> {
    pub(super) id: NodeId,
    pub(super) entry: Entry<'j>,
    /// An operator's plugin; `None` for a source or a sink.
    pub(super) plugin: Option<P>,
    /// `(input port, upstream)` pairs: an operator's as resolved against
    /// its plugin, a sink's input list on port 0; none for a source.
    pub(super) wired: Vec<(u32, Upstream)>,
    pub(super) input_ports: Vec<String>,
    pub(super) output_ports: Vec<String>,
    /// The edges into the node, in channel order.
    pub(super) inputs: Vec<EdgeId>,
    /// Per output port, the edges out of it.
    pub(super) outputs: Vec<Vec<EdgeId>>,
}

impl<'j, P: Ports> Node<'j, P> {
    /// A node with no edges yet; `plugin` and `wired` only for an operator.
    pub(super) fn new(
        id: NodeId,
        entry: Entry<'j>,
        plugin: Option<P>,
        wired: Vec<(u32, Upstream)>,
    ) -> Self {
        let unnamed = || vec![String::new()];
        let (input_ports, output_ports) = match (&entry, &plugin) {
            (Entry::Source(s), _) => {
                let mut outputs = s.connector.output_ports();
                if outputs.is_empty() {
                    outputs = unnamed();
                }
                if s.on_error.dead_letter_sink().is_some() {
                    outputs.push(DEAD_LETTER_PORT.to_owned());
                }
                (Vec::new(), outputs)
            }
            (Entry::Sink(s), _) => {
                let outputs = match s.on_error.dead_letter_sink() {
                    Some(_) => vec![DEAD_LETTER_PORT.to_owned()],
                    None => Vec::new(),
                };
                (unnamed(), outputs)
            }
            (Entry::Operator(o), Some(p)) => {
                let mut outputs = p.output_ports().to_vec();
                if o.on_error.dead_letter_sink().is_some() {
                    outputs.push(DEAD_LETTER_PORT.to_owned());
                }
                (p.input_ports().to_vec(), outputs)
            }
            (Entry::Operator(_), None) => (Vec::new(), Vec::new()),
        };
        let outputs = output_ports.iter().map(|_| Vec::new()).collect();
        Node {
            id,
            entry,
            plugin,
            wired,
            input_ports,
            output_ports,
            inputs: Vec::new(),
            outputs,
        }
    }
}

impl<'j, P> Node<'j, P> {
    /// The node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The node's id in the job file (`id = "..."`).
    pub fn name(&self) -> &'j str {
        match self.entry {
            Entry::Source(s) => &s.id,
            Entry::Operator(o) => &o.id,
            Entry::Sink(s) => &s.id,
        }
    }

    /// What the node is.
    pub fn kind(&self) -> NodeKind {
        match self.entry {
            Entry::Source(_) => NodeKind::Source,
            Entry::Operator(_) => NodeKind::Operator,
            Entry::Sink(_) => NodeKind::Sink,
        }
    }

    /// How many instances the node runs.
    pub fn parallelism(&self) -> u32 {
        match self.entry {
            Entry::Operator(o) => o.parallelism,
            Entry::Source(_) | Entry::Sink(_) => 1,
        }
    }

    /// The node's instances, by index.
    pub fn instances(&self) -> impl Iterator<Item = InstanceId> + use<P> {
        let id = self.id;
        (0..self.parallelism()).map(move |i| id.instance(i))
    }

    /// The names of the input ports (a sink's only port is unnamed).
    pub fn input_ports(&self) -> &[String] {
        &self.input_ports
    }

    /// The names of the output ports (a source's only port is unnamed).
    pub fn output_ports(&self) -> &[String] {
        &self.output_ports
    }

    /// The `[[source]]` entry, if the node is a source.
    pub fn source(&self) -> Option<&'j SourceConfig> {
        match self.entry {
            Entry::Source(s) => Some(s),
            _ => None,
        }
    }

    /// The `[[operator]]` entry, if the node is an operator.
    pub fn operator(&self) -> Option<&'j OperatorConfig> {
        match self.entry {
            Entry::Operator(o) => Some(o),
            _ => None,
        }
    }

    /// The `[[sink]]` entry, if the node is a sink.
    pub fn sink(&self) -> Option<&'j SinkConfig> {
        match self.entry {
            Entry::Sink(s) => Some(s),
            _ => None,
        }
    }

    /// The plugin an operator runs; `None` for a source or a sink.
    pub fn plugin(&self) -> Option<&P> {
        self.plugin.as_ref()
    }

    /// What feeds each input port: `(port, upstream)` pairs, ordered by
    /// port, then as the port's list gives them (a union).
    pub fn wired(&self) -> &[(u32, Upstream)] {
        &self.wired
    }

    /// The edges into the node, in the order its instances number their
    /// input channels.
    pub fn inputs(&self) -> &[EdgeId] {
        &self.inputs
    }

    /// The edges out of output port `port` (none for a port no input reads).
    pub fn outputs(&self, port: u32) -> &[EdgeId] {
        self.outputs.get(port as usize).map_or(&[], Vec::as_slice)
    }
}
