//! # Weir
//!
//! A stream-processing host whose operators are WebAssembly components.
//! See `ARCHITECTURE.md` in the repository for the code map and invariants.
//!
//! The main entry points: [`config::Job::load`] reads a job file,
//! [`Runtime`] compiles plugins, [`run::run`] runs a job with aligned
//! checkpoint barriers and exactly-once restore.
//!
//! The folders, from the bottom up (each imports only those before it):
//! [`keyed`] (an instance's live keyed state, timers and the changes a
//! checkpoint takes), [`dataflow`] (batches, every message of a running job, partitioning,
//! barrier alignment and the aligned-input loop), [`connectors`] (sources
//! and sinks, and the registry of their types), [`config`] (the job file),
//! [`metrics`], [`checkpoint`] (the coordinator),
//! [`store`] (the redb checkpoint file), [`wasm`] (plugins and their
//! sandbox), [`plan`] (the job compiled into a graph of typed ids),
//! `threads` (the thread bodies), [`run`] (a job: attempts and
//! their phases, the driver, the supervisor) and [`cluster`] (worker
//! mode: a job's tasks shared by processes through a Kafka group). Below them all, `wit` (the
//! generated WIT bindings), `fields` (reading TOML fields) and
//! [`failpoint`] (test-only crashes at named protocol steps).
#![warn(missing_docs)]

pub mod checkpoint;
pub mod cluster;
pub mod config;
pub mod connectors;
pub mod dataflow;
pub mod failpoint;
mod fields;
pub mod keyed;
pub mod metrics;
pub mod plan;
pub mod remote;
pub mod run;
pub mod schemas;
pub mod shadow;
pub mod store;
mod threads;
pub mod time;
pub mod wasm;
mod wit;

pub use dataflow::{Batch, Record};

/// The `tracing` target of notices: info-level events that a person
/// running a job should see even without asking for info logs, such as a
/// large plugin being compiled. The CLI shows them at its default
/// verbosity.
pub const NOTICE: &str = "weir::notice";
pub use threads::TaskError;
pub use wasm::{InstanceError, OperatorInfo, OperatorInstance, Plugin, PluginError, Runtime};
