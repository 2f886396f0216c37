//! An edge of the plan ([`Edge`]): from an output port of one node to an
//! input port of another, with how its records are spread over the
//! consumer's instances ([`Partitioning`]) and how they travel
//! ([`Exchange`]).
//!
//! Invariants:
//! - An edge runs, for every instance of its producer, one channel to every
//!   consumer instance that [`Partitioning::connects`] it to; its records
//!   go to the one instance the partitioning picks.
//! - An edge whose exchange [`cuts_stages`](Exchange::cuts_stages) is a
//!   stage boundary; every other edge joins its two nodes into one stage.

use super::ids::{EdgeId, InputId, OutputId};

/// How an edge spreads records over the consumer's instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partitioning {
    /// Each record goes to the consumer instance that owns its key's key
    /// group (`dataflow::partition::Partitioner`); barriers, watermarks
    /// and the end go to every instance. Every edge today.
    Hash,
}

impl Partitioning {
    /// Whether producer instance `from` sends anything to consumer instance
    /// `to` (instance indices): for a hash edge, every pair (a forward edge
    /// would connect only equal indices).
    pub fn connects(self, from: u32, to: u32) -> bool {
        match self {
            Partitioning::Hash => {
                let _ = (from, to);
                true
            }
        }
    }
}

pub use crate::config::Exchange;

impl Exchange {
    /// Whether an edge of this exchange is a stage boundary: its two ends
    /// checkpoint apart and may run in different processes. In one
    /// process a repartition edge runs as a local one (a channel per pair
    /// of instances, barriers in band).
    pub fn cuts_stages(self) -> bool {
        match self {
            Exchange::Local => false,
            Exchange::Repartition => true,
        }
    }
}

/// An edge from an output port to an input port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub(super) id: EdgeId,
    pub(super) from: OutputId,
    pub(super) to: InputId,
    pub(super) partitioning: Partitioning,
    pub(super) exchange: Exchange,
}

impl Edge {
    /// The edge's id.
    pub fn id(&self) -> EdgeId {
        self.id
    }

    /// The output port it leaves.
    pub fn from(&self) -> OutputId {
        self.from
    }

    /// The input port it enters.
    pub fn to(&self) -> InputId {
        self.to
    }

    /// How it spreads records over the consumer's instances.
    pub fn partitioning(&self) -> Partitioning {
        self.partitioning
    }

    /// How its records travel.
    pub fn exchange(&self) -> Exchange {
        self.exchange
    }
}
