//! The physical plan: a job ([`Job`](crate::config::Job)) and its
//! operators' plugins compiled once into a graph of typed ids
//! ([`Plan::compile`]), which the runtime builds threads and channels from
//! by looking ids up, and which worker mode will cut into stages and tasks
//! ([`Plan::stages`]).
//!
//! - `ids`: [`NodeId`], [`InstanceId`], [`OutputId`], [`InputId`],
//!   [`EdgeId`], [`StageId`], [`TaskId`];
//! - `node`: a [`Node`] (kind, name, parallelism, port names, edges, an
//!   operator's plugin) and the [`Ports`] a plugin declares;
//! - `edge`: an [`Edge`] with its [`Partitioning`] and [`Exchange`];
//! - `graph`: the [`Plan`] itself, compiling and look-ups;
//! - `stage`: the cut into [`Stage`]s and [`Task`]s.
//!
//! Invariants (each module's rustdoc has its own):
//! - A plan is compiled from a job `Job::parse` accepted, with ports
//!   `Job::resolve_ports` resolved: every edge joins ports that exist.
//! - Node ids follow the job file (sources, operators, sinks), so they are
//!   the same in every plan of one job, across swaps and attempts.
//! - Channel order is a function of the plan: an instance's input channels
//!   are its node's [`Node::inputs`] edges in order, each with one channel
//!   per connected producer instance by index.

mod edge;
mod graph;
mod ids;
mod node;
mod stage;

pub use edge::{Edge, Exchange, Partitioning};
pub use graph::{Plan, Resolved};
pub use ids::{EdgeId, InputId, InstanceId, NodeId, OutputId, StageId, TaskId};
pub use node::{Node, NodeKind, Ports};
pub use stage::{Stage, Task, stage_members};

#[cfg(test)]
mod tests;
