//! The Kafka connectors: a replayable source that reads every partition of
//! its topics at offsets kept in Weir's checkpoints ([`source`]), and a
//! sink that writes each checkpoint's output in one Kafka transaction
//! (or, at-least-once, as it arrives) ([`sink`]), worker mode's group
//! membership ([`group`]; what `weir workers` shows of it, [`group_view`]) and the control records of its repartition
//! topics ([`repartition`]), reading a topic back whole ([`read_back`]),
//! over one client module
//! (`client`: brokers, pass-through properties, librdkafka's log).
//!
//! Delivery guarantees:
//! - Source: the checkpoint records the next offset of every partition,
//!   so a restore reads exactly the messages after those the checkpoint
//!   saw; only committed transactions are read (`read_committed`).
//! - Sink: exactly-once for `read_committed` readers; see [`sink`].

mod client;
mod direct;
pub mod group;
pub mod group_view;
mod purge;
pub mod read_back;
mod reader;
pub mod repartition;
pub mod sink;
pub mod source;
mod writer;

pub use client::ClientSettings;
pub use sink::SINK;
pub use source::SOURCE;
