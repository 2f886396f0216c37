//! The Wasm layer: the [`Runtime`] that compiles [`Plugin`]s (with the
//! on-disk [`compile_cache`]), the [`OperatorInstance`] that runs one, the
//! host side of the WIT interfaces, and the sandbox around it.
//!
//! The modules, from the bottom up:
//!
//! | module | owns |
//! |---|---|
//! | `compile_cache` | the on-disk cache of compiled components |
//! | `limiter` | [`LimitExceeded`], the `ResourceLimiter`, wasmtime's count limits, the wasm stack size, the per-call [`copy_budget`] |
//! | `guest_output` | a plugin's stdout and stderr to the log; sanitizing every text from a plugin |
//! | `wasi` | the WASI context (empty sandbox, fixed clocks, deterministic randomness) and sleeps cut at the call deadline |
//! | `instance_state` | the store data `InstanceState` and the preparation of each call (deadline, fuel) |
//! | `host/` | one `impl Host` per WIT interface: `state`, `emit` and `flat`, `log` |
//! | `hook` | [`Hook`], the calls of the operator contract and what each may do |
//! | `error` | [`PluginError`], [`InstanceError`], [`PluginReturned`]; traps sorted into limits and plain traps |
//! | `runtime` | [`Runtime`]: the engine (epoch ticker, fuel, profiler) and the linker |
//! | `plugin` | [`Plugin`]: loading, the world check, `describe` |
//! | `instance` | [`OperatorInstance`] and its call lifecycle |
//!
//! Nothing a plugin does makes the host allocate more than a bounded amount
//! per call: what it passes in lives in its capped linear memory, state
//! reads are capped by `limits.memory` (`host/state.rs`), emits by the
//! per-call emit limits (`host/emit.rs`), and its stdout and stderr by
//! `guest_output`.

pub mod compile_cache;
mod error;
mod guest_output;
mod hook;
pub(crate) mod host;
mod instance;
mod instance_state;
mod limiter;
mod plugin;
mod runtime;
mod wasi;

pub use error::{InstanceError, PluginError, PluginReturned, ReturnedKind};
pub use hook::Hook;
pub use instance::OperatorInstance;
pub use limiter::{LimitExceeded, WASM_STACK, copy_budget};
pub use plugin::{MAX_NAME, MAX_PORTS, OperatorInfo, Plugin, sha256_hex};
pub use runtime::{EPOCH_TICK, Runtime, RuntimeOptions};
pub use wasmtime::Engine;
