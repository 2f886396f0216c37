//! # Weir
//!
//! A stream-processing host whose operators are WebAssembly components.
//! See `ARCHITECTURE.md` in the repository for the code map and invariants.
//!
//! The main entry points: [`job::Job::load`] reads a job file,
//! [`Runtime`] compiles plugins, [`runner::run`] runs a job with aligned
//! checkpoint barriers and exactly-once restore.
#![warn(missing_docs)]

pub mod align;
pub mod batch;
mod bindings;
pub mod compile_cache;
pub mod coordinator;
pub mod inspect;
pub mod instance;
pub mod job;
pub mod metrics;
pub mod partition;
pub mod plugin;
pub mod progress;
pub mod record;
pub mod runner;
mod sandbox;
pub mod scaffold;
pub mod sink;
pub mod source;
pub mod state;
pub mod store;
pub mod supervisor;
mod task;

pub use batch::Batch;
pub use instance::{InstanceError, OperatorInstance};
pub use plugin::{OperatorInfo, Plugin, PluginError, Runtime};
pub use record::Record;
pub use task::TaskError;
