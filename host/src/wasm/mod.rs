//! The Wasm layer: the [`Runtime`] that compiles [`Plugin`]s (with the
//! on-disk [`compile_cache`]), the [`OperatorInstance`] that runs one, the
//! host side of the WIT interfaces, and the sandbox around it.

pub mod compile_cache;
pub mod instance;
pub mod plugin;
mod sandbox;

pub use instance::{InstanceError, LimitExceeded, OperatorInstance, PluginReturned};
pub use plugin::{OperatorInfo, Plugin, PluginError, Runtime, RuntimeOptions};
pub use wasmtime::Engine;
