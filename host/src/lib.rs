//! # Weir
//!
//! A stream-processing host whose operators are WebAssembly components.
//! See `ARCHITECTURE.md` in the repository for the code map and invariants.
#![warn(missing_docs)]

mod bindings;
pub mod inspect;
pub mod instance;
pub mod plugin;
pub mod record;
pub mod state;

pub use instance::{InstanceError, OperatorInstance};
pub use plugin::{OperatorInfo, Plugin, PluginError, Runtime};
pub use record::Record;
