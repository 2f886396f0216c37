//! # Weir
//!
//! A stream-processing host whose operators are WebAssembly components.
//! See `ARCHITECTURE.md` in the repository for the code map and invariants.
//!
//! The main entry points: [`config::Job::load`] reads a job file,
//! [`Runtime`] compiles plugins, [`run::run`] runs a job with aligned
//! checkpoint barriers and exactly-once restore.
//!
//! The folders, from the bottom up: [`config`] (the job file), [`dataflow`]
//! (batches, the messages on edges, alignment, the thread bodies),
//! [`wasm`] (plugins and their sandbox), [`connectors`] (sources and sinks),
//! [`checkpoint`] (the coordinator and keyed state), [`store`] (the redb
//! checkpoint file) and [`run`] (one job: attempts, wiring, the driver).
#![warn(missing_docs)]

pub mod checkpoint;
pub mod config;
pub mod connectors;
pub mod dataflow;
mod fields;
pub mod metrics;
pub mod run;
pub mod store;
mod tasks;
pub mod wasm;
mod wit;

pub use dataflow::{Batch, Record};
pub use tasks::TaskError;
pub use wasm::{InstanceError, OperatorInfo, OperatorInstance, Plugin, PluginError, Runtime};
