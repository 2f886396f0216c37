//! The typed ids of a [`Plan`](super::Plan): a node, an instance of a node,
//! an output or input port of a node, an edge, a stage and a task.
//!
//! Invariants:
//! - Only a plan hands out [`NodeId`]s, [`EdgeId`]s and [`StageId`]s: each
//!   is an index into that plan's list, so looking one up in the plan that
//!   made it never fails.
//! - Node ids number the job's sources, then its operators, then its sinks,
//!   each in job-file order; edge ids number the edges by consumer node,
//!   then by input port, then in the order of the port's upstream list. A
//!   plan compiled again from the same job (after a plugin swap) gives every
//!   node the same id.
//! - Ids order as they number, so a `BTreeMap` keyed by them iterates in
//!   plan order.

use std::fmt;

/// A node of the plan: a source, an operator or a sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub(super) u32);

impl NodeId {
    /// The node's index in its plan's list of nodes.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// Instance `index` of this node.
    pub fn instance(self, index: u32) -> InstanceId {
        InstanceId { node: self, index }
    }

    /// Output port `port` of this node.
    pub fn output(self, port: u32) -> OutputId {
        OutputId { node: self, port }
    }

    /// Input port `port` of this node.
    pub fn input(self, port: u32) -> InputId {
        InputId { node: self, port }
    }
}

/// One of a node's `parallelism` instances, each run by its own thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InstanceId {
    /// The node.
    pub node: NodeId,
    /// The instance index, `0..parallelism`.
    pub index: u32,
}

/// An output port of a node: an operator's declared output (by index in
/// the plugin's list), a source's only port 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OutputId {
    /// The node.
    pub node: NodeId,
    /// The port index.
    pub port: u32,
}

/// An input port of a node: an operator's declared input (by index in the
/// plugin's list), a sink's only port 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InputId {
    /// The node.
    pub node: NodeId,
    /// The port index.
    pub port: u32,
}

/// An edge of the plan, from an output port to an input port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EdgeId(pub(super) u32);

impl EdgeId {
    /// The edge's index in its plan's list of edges.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A stage of the plan (see [`Stage`](super::Stage)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StageId(pub(super) u32);

impl StageId {
    /// The stage's index in the list [`Plan::stages`](super::Plan::stages)
    /// returns.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A task: one unit of a stage that runs on its own (see
/// [`Task`](super::Task)), `(stage, p)` in docs/scale-out.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId {
    /// The stage.
    pub stage: StageId,
    /// The task's index in its stage, `p`.
    pub index: u32,
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", self.node, self.index)
    }
}

impl fmt::Display for EdgeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}", self.0)
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s{}-{}", self.stage.0, self.index)
    }
}
