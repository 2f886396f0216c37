//! The plan's graph ([`Plan`]): its nodes and edges, compiled from a job
//! and its operators' plugins ([`Plan::compile`]), and the look-ups the
//! runtime wires and runs a job by.
//!
//! Invariants:
//! - Compiling is the only place where a node is found by its job-file id
//!   or an edge by its position in a list: afterwards everything is
//!   reached through ids.
//! - The edges are exactly the `(port, upstream)` pairs of the operators
//!   (as resolved against their plugins) and the sinks' inputs, one edge
//!   each; an output port no input names has no edge.
//! - Replacing an operator's plugin ([`Plan::replace_operator`]) relinks
//!   every edge and keeps every node id.
//! - A replay source's output ports are its operator's input ports, by
//!   name, then its dead-letter port.

use std::collections::HashMap;

use crate::config::{DEAD_LETTER_PORT, Job, OperatorConfig, Upstream};
use crate::wasm::Plugin;

use super::edge::{Edge, Exchange, Partitioning};
use super::ids::{EdgeId, InstanceId, NodeId, OutputId};
use super::node::{Entry, Node, NodeKind, Ports};

/// An operator's plugin with its input ports resolved against the job:
/// `(input port, upstream)` pairs, several per port for a union (what
/// [`Job::resolve_ports`] returns).
pub type Resolved<P> = (P, Vec<(u32, Upstream)>);

/// A job compiled into a graph of typed ids, with `P` the plugin each
/// operator runs (a [`Plugin`] when running a job).
#[derive(Debug, Clone)]
pub struct Plan<'j, P = Plugin> {
    job: &'j Job,
    nodes: Vec<Node<'j, P>>,
    edges: Vec<Edge>,
    by_name: HashMap<&'j str, NodeId>,
}

impl<'j, P: Ports> Plan<'j, P> {
    /// Compiles `job`, with `load` giving each operator's plugin and
    /// resolved input ports (called once per operator, in job order).
    ///
    /// Panics if an upstream names no source or operator of the job, or an
    /// output port its operator's plugin does not declare: a job [`Job::parse`]
    /// accepted, with ports from [`Job::resolve_ports`], has neither.
    pub fn compile<E>(
        job: &'j Job,
        mut load: impl FnMut(&'j OperatorConfig) -> Result<Resolved<P>, E>,
    ) -> Result<Self, E> {
        let mut nodes: Vec<Node<'j, P>> = Vec::new();
        let mut push = |entry, plugin, wired| {
            let id = NodeId(nodes.len() as u32);
            nodes.push(Node::new(id, entry, plugin, wired));
        };
        for s in &job.sources {
            push(Entry::Source(s), None, Vec::new());
        }
        for op in &job.operators {
            let (plugin, wired) = load(op)?;
            push(Entry::Operator(op), Some(plugin), wired);
        }
        for s in &job.sinks {
            push(
                Entry::Sink(s),
                None,
                (s.input.iter()).map(|up| (0, up.clone())).collect(),
            );
        }
        let by_name = nodes.iter().map(|n| (n.name(), n.id)).collect();
        let mut plan = Plan {
            job,
            nodes,
            edges: Vec::new(),
            by_name,
        };
        plan.link();
        Ok(plan)
    }

    /// Puts `plugin` with its resolved ports `wired` in operator `id`
    /// (after a swap, or to roll one back), relinks the edges, and returns
    /// what the operator ran before.
    ///
    /// Panics if `id` is not an operator; see [`Plan::compile`] for the ports.
    pub fn replace_operator(
        &mut self,
        id: NodeId,
        plugin: P,
        wired: Vec<(u32, Upstream)>,
    ) -> Resolved<P> {
        let node = &mut self.nodes[id.index()];
        let op = node.operator().expect("an operator");
        let old = std::mem::replace(
            node,
            Node::new(id, Entry::Operator(op), Some(plugin), wired),
        );
        self.link();
        (old.plugin.expect("an operator's plugin"), old.wired)
    }

    /// Builds every edge from the nodes' `wired` pairs, in id order.
    fn link(&mut self) {
        self.name_replay_ports();
        self.edges.clear();
        for node in &mut self.nodes {
            node.inputs.clear();
            node.outputs.iter_mut().for_each(Vec::clear);
        }
        for to in 0..self.nodes.len() {
            for (port, up) in self.nodes[to].wired.clone() {
                let from = self.output(&up);
                let id = EdgeId(self.edges.len() as u32);
                let exchange = (self.nodes[to].operator()).map_or(Exchange::Local, |o| o.exchange);
                self.edges.push(Edge {
                    id,
                    from,
                    to: self.nodes[to].id.input(port),
                    partitioning: Partitioning::Hash,
                    exchange,
                });
                self.nodes[to].inputs.push(id);
                self.nodes[from.node.index()].outputs[from.port as usize].push(id);
            }
        }
    }

    /// Gives each replay source the output ports its operator's plugin
    /// has as inputs (then its dead-letter port).
    fn name_replay_ports(&mut self) {
        for i in 0..self.nodes.len() {
            let Some(source) = self.nodes[i].source() else {
                continue;
            };
            let Some(operator) = source.replays() else {
                continue;
            };
            let operator = self.find(operator).expect("the operator a replay feeds");
            let mut ports = self.node(operator).input_ports().to_vec();
            if source.on_error.dead_letter_sink().is_some() {
                ports.push(DEAD_LETTER_PORT.to_owned());
            }
            let node = &mut self.nodes[i];
            node.outputs = ports.iter().map(|_| Vec::new()).collect();
            node.output_ports = ports;
        }
    }

    /// The output port `up` names.
    fn output(&self, up: &Upstream) -> OutputId {
        let node = self.find(&up.node).expect("an upstream of the job");
        let outputs = self.node(node).output_ports();
        let port = up.port_index(outputs).expect("a resolved output port");
        node.output(port)
    }
}

impl<'j, P> Plan<'j, P> {
    /// The job the plan was compiled from.
    pub fn job(&self) -> &'j Job {
        self.job
    }

    /// Every node, by id: sources, operators, sinks.
    pub fn nodes(&self) -> &[Node<'j, P>] {
        &self.nodes
    }

    /// Node `id`.
    pub fn node(&self, id: NodeId) -> &Node<'j, P> {
        &self.nodes[id.index()]
    }

    /// The node whose job-file id is `name`.
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    /// The nodes of `kind`, by id.
    pub fn of_kind(&self, kind: NodeKind) -> impl Iterator<Item = &Node<'j, P>> {
        self.nodes.iter().filter(move |n| n.kind() == kind)
    }

    /// The sources, by id (job-file order).
    pub fn sources(&self) -> impl Iterator<Item = &Node<'j, P>> {
        self.of_kind(NodeKind::Source)
    }

    /// The operators, by id (job-file order).
    pub fn operators(&self) -> impl Iterator<Item = &Node<'j, P>> {
        self.of_kind(NodeKind::Operator)
    }

    /// The sinks, by id (job-file order).
    pub fn sinks(&self) -> impl Iterator<Item = &Node<'j, P>> {
        self.of_kind(NodeKind::Sink)
    }

    /// Every edge, by id.
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// Edge `id`.
    pub fn edge(&self, id: EdgeId) -> &Edge {
        &self.edges[id.index()]
    }

    /// Every instance of every node, by node id, then index.
    pub fn instances(&self) -> impl Iterator<Item = InstanceId> + '_ {
        self.nodes.iter().flat_map(Node::instances)
    }

    /// Every operator with its job-file entry and its plugin, by id.
    pub fn operator_plugins(&self) -> impl Iterator<Item = (&Node<'j, P>, &'j OperatorConfig, &P)> {
        (self.nodes.iter()).filter_map(|n| Some((n, n.operator()?, n.plugin()?)))
    }

    /// The plugin operator `id` runs; `None` if `id` is not an operator.
    pub fn plugin(&self, id: NodeId) -> Option<&P> {
        self.node(id).plugin()
    }
}
