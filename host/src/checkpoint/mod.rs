//! Checkpoint coordination: the [`coordinator`] decides when to trigger a
//! checkpoint and when one is complete. What a checkpoint captures of an
//! instance is its live keyed state and timers ([`crate::keyed`]) and its
//! in-flight data ([`crate::dataflow::inflight`]); the durable side is the
//! checkpoint store ([`crate::store`]).

pub mod coordinator;
