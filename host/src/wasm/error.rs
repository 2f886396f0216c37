//! The errors of the Wasm layer: why a plugin could not be loaded
//! ([`PluginError`]), and why a call into a plugin failed: the plugin
//! returned an error (a WIT `result`: [`PluginReturned`], for conditions the
//! plugin author anticipated), or the call trapped (a guest panic or
//! `unreachable`, a host function's refusal, a limit). [`trap_error`] sorts
//! traps: every limit (the host's, the resource limiter's, the deadline,
//! fuel, the wasm stack, wasmtime's instance counts) becomes
//! [`InstanceError::Limit`], anything else a one-line
//! [`InstanceError::Trap`].
//!
//! Messages name `operator[instance]` and the hook; the plugin's text in
//! them is sanitized (`guest_output.rs`).

use std::path::PathBuf;

use wasmtime::{Trap, WasmBacktrace};

use super::guest_output::{MAX_MESSAGE, sanitize};
use super::hook::Hook;
use super::instance_state::InstanceState;
use super::limiter::{LimitExceeded, WASM_STACK, count_limit};
use crate::config::LimitValue;
use crate::wit::types;

/// Why a plugin could not be loaded. Each message names the file.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The file could not be read.
    #[error("{path}: cannot read plugin: {error}")]
    Read {
        /// The plugin file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The file is not WebAssembly at all.
    #[error(
        "{path}: not a WebAssembly file (it does not start with the `\\0asm` magic bytes); build the plugin for wasm32-wasip2"
    )]
    NotWasm {
        /// The plugin file.
        path: PathBuf,
    },
    /// The file is a core module, not a component.
    #[error(
        "{path}: is a core WebAssembly module, not a component; build it for wasm32-wasip2 or wrap it with `wasm-tools component new`"
    )]
    CoreModule {
        /// The plugin file.
        path: PathBuf,
    },
    /// wasmtime rejected the component.
    #[error("{path}: invalid component: {message}")]
    Compile {
        /// The plugin file.
        path: PathBuf,
        /// wasmtime's explanation.
        message: String,
    },
    /// The component does not fit the `weir:operator` world.
    #[error("{path}: does not implement the weir:operator@0.1.0 world: {message}")]
    World {
        /// The plugin file.
        path: PathBuf,
        /// What is missing or mismatched.
        message: String,
    },
    /// `describe` trapped or returned nonsense.
    #[error("{path}: `describe` failed: {message}")]
    Describe {
        /// The plugin file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// Why a call into an operator instance failed. Messages name the operator,
/// its instance and the hook.
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    /// The plugin trapped (a panic in the guest, an unreachable, a host
    /// function refusing a call).
    #[error("operator `{operator}`: plugin trapped in `{hook}`: {message}")]
    Trap {
        /// `id[instance]`.
        operator: String,
        /// The hook that was called.
        hook: Hook,
        /// What went wrong, on one line: the trap, and what the call's
        /// stderr says when it says something (a Rust guest's panic
        /// message, a Python exception, else its last line).
        message: String,
        /// The guest backtrace, when wasmtime recorded one (several lines).
        backtrace: Option<String>,
    },
    /// The instance cannot be created with these settings (not the
    /// plugin's fault).
    #[error("operator `{operator}`: {message}")]
    Config {
        /// `id[instance]`.
        operator: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The plugin exceeded a host limit.
    #[error("operator `{operator}`: in `{hook}`: {limit}")]
    Limit {
        /// `id[instance]`.
        operator: String,
        /// The hook that was called.
        hook: Hook,
        /// The limit (boxed: it is large and errors are passed around a lot).
        limit: Box<LimitExceeded>,
    },
    /// The plugin returned an error.
    #[error("operator `{operator}`: `{hook}` returned an error: {error}")]
    Returned {
        /// `id[instance]`.
        operator: String,
        /// The hook that was called.
        hook: Hook,
        /// The plugin's error.
        error: PluginReturned,
    },
}

impl InstanceError {
    /// Whether the plugin itself failed in a way its input decides: a
    /// returned error, a trap, a limit other than the call timeout (which a
    /// slow machine can hit). Plugins are deterministic, so such a failure
    /// happens again when the same records reach the same state.
    pub fn repeats_on_replay(&self) -> bool {
        match self {
            InstanceError::Trap { .. } | InstanceError::Returned { .. } => true,
            InstanceError::Limit { limit, .. } => limit.key != "call_timeout",
            InstanceError::Config { .. } => false,
        }
    }
}

/// An error a plugin returned (the WIT `error` variant): its kind and its
/// message, kept on one line and at most a few KiB.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", kind.prefix())]
pub struct PluginReturned {
    /// Which WIT case the plugin returned.
    pub kind: ReturnedKind,
    /// The plugin's message.
    pub message: String,
}

/// The case of the WIT `error` variant a plugin returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReturnedKind {
    /// Bad configuration.
    InvalidConfig,
    /// A record could not be processed.
    InvalidInput,
    /// Snapshot bytes could not be restored.
    IncompatibleState,
    /// Anything else.
    Other,
}

impl ReturnedKind {
    /// The WIT case's name, as plugins and `weir` messages spell it.
    pub fn name(self) -> &'static str {
        match self {
            ReturnedKind::InvalidConfig => "invalid-config",
            ReturnedKind::InvalidInput => "invalid-input",
            ReturnedKind::IncompatibleState => "incompatible-state",
            ReturnedKind::Other => "other",
        }
    }

    /// What the message is shown after ("invalid config: …").
    fn prefix(self) -> &'static str {
        match self {
            ReturnedKind::InvalidConfig => "invalid config: ",
            ReturnedKind::InvalidInput => "invalid input: ",
            ReturnedKind::IncompatibleState => "incompatible state: ",
            ReturnedKind::Other => "",
        }
    }
}

impl From<types::Error> for PluginReturned {
    fn from(e: types::Error) -> Self {
        let (kind, message) = match e {
            types::Error::InvalidConfig(m) => (ReturnedKind::InvalidConfig, m),
            types::Error::InvalidInput(m) => (ReturnedKind::InvalidInput, m),
            types::Error::IncompatibleState(m) => (ReturnedKind::IncompatibleState, m),
            types::Error::Other(m) => (ReturnedKind::Other, m),
        };
        PluginReturned {
            kind,
            message: sanitize(&message, MAX_MESSAGE),
        }
    }
}

/// wasmtime's message when one call copies more than the store's hostcall
/// fuel ([`copy_budget`](super::limiter::copy_budget)) out of the guest; its
/// error type is private.
const HOSTCALL_FUEL_EXHAUSTED: &str = "fuel allocated for hostcalls has been exhausted";

/// Turns a failed call into an [`InstanceError`]: limits (host limits, the
/// memory and table limiter, the deadline, fuel, the wasm stack, wasmtime's
/// instance counts) become [`InstanceError::Limit`], anything else a one-line
/// [`InstanceError::Trap`].
pub(super) fn trap_error(data: &InstanceState, hook: Hook, e: wasmtime::Error) -> InstanceError {
    let operator = data.label.clone();
    let stderr = data.output.end_call();
    let limit = |limit| InstanceError::Limit {
        operator: operator.clone(),
        hook,
        limit: Box::new(limit),
    };
    if let Some(l) = e.chain().find_map(|c| c.downcast_ref::<LimitExceeded>()) {
        return limit(l.clone());
    }
    let limits = &data.limits;
    match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => {
            return limit(LimitExceeded::new(
                "fuel",
                "fuel",
                LimitValue::Count(limits.fuel.unwrap_or(u64::MAX)),
                None,
            ));
        }
        Some(Trap::StackOverflow) => {
            return limit(LimitExceeded::new(
                "wasm call stack",
                "the runtime's wasm stack size",
                LimitValue::Bytes(WASM_STACK as u64),
                None,
            ));
        }
        Some(Trap::Interrupt) => return limit(LimitExceeded::call_time(limits)),
        _ => {}
    }
    if let Some(l) = e.chain().find_map(|c| count_limit(&c.to_string(), limits)) {
        return limit(l);
    }
    if e.chain()
        .any(|c| c.to_string().contains(HOSTCALL_FUEL_EXHAUSTED))
    {
        return limit(LimitExceeded::copy_budget(limits));
    }
    let backtrace = e.downcast_ref::<WasmBacktrace>().map(|b| b.to_string());
    if let Some(b) = &backtrace {
        tracing::debug!(operator = %operator, hook = %hook, "plugin trapped; {b}");
    }
    // The root cause is the trap or the host's refusal; the outer layers are
    // the backtrace and wasmtime's context.
    let mut message = sanitize(&e.root_cause().to_string(), MAX_MESSAGE);
    if let Some(line) = stderr {
        message.push_str(&format!(" (plugin stderr: {line})"));
    }
    InstanceError::Trap {
        operator,
        hook,
        message,
        backtrace,
    }
}

#[cfg(test)]
mod tests {
    use wasmtime::component::{Component, Linker};

    use super::*;
    use crate::config::{Grants, Limits};

    /// A component whose `f` returns a list of 1000 lists that all alias the
    /// same 4 KiB of its memory: 4000 KiB to copy from 64 KiB of memory.
    const ALIASED_LISTS: &str = r#"
        (component
          (core module $m
            (memory (export "memory") 1)
            (func (export "f") (result i32)
              (local $i i32)
              (i32.store (i32.const 0) (i32.const 16))
              (i32.store (i32.const 4) (i32.const 1000))
              (loop $fill
                (i32.store (i32.add (i32.const 16) (i32.mul (local.get $i) (i32.const 8)))
                           (i32.const 0))
                (i32.store (i32.add (i32.const 20) (i32.mul (local.get $i) (i32.const 8)))
                           (i32.const 4096))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))
                (br_if $fill (i32.lt_u (local.get $i) (i32.const 1000))))
              (i32.const 0)))
          (core instance $i (instantiate $m))
          (func (export "f") (result (list (list u8)))
            (canon lift (core func $i "f") (memory (core memory $i "memory")))))
    "#;

    /// Calls `f` of [`ALIASED_LISTS`] in a store with `memory` bytes of
    /// memory; returns how many bytes it got or the error.
    fn call_aliased(memory: usize) -> Result<usize, InstanceError> {
        let runtime = crate::Runtime::new().unwrap();
        let engine = runtime.engine();
        let bytes = wat::parse_str(ALIASED_LISTS).unwrap();
        let component = Component::new(engine, bytes).unwrap();
        let limits = Limits {
            memory,
            ..Limits::default()
        };
        let mut store = InstanceState::new("op[0]", limits, Grants::default()).into_store(engine);
        let instance = Linker::new(engine)
            .instantiate(&mut store, &component)
            .unwrap();
        let f = instance
            .get_typed_func::<(), (Vec<Vec<u8>>,)>(&mut store, "f")
            .unwrap();
        match f.call(&mut store, ()) {
            Ok((lists,)) => Ok(lists.iter().map(Vec::len).sum()),
            Err(e) => Err(trap_error(store.data(), Hook::Snapshot, e)),
        }
    }

    #[test]
    fn a_copy_over_the_budget_is_a_limit_naming_the_key_to_raise() {
        // 1 MiB of memory: a 2 MiB copy budget, less than the 4000 KiB.
        let e = call_aliased(1 << 20).unwrap_err();
        assert_eq!(
            e.to_string(),
            "operator `op[0]`: in `snapshot`: data copied out of the plugin in one call \
             exceeds twice limits.memory = 2MiB"
        );
        // 4 MiB of memory: an 8 MiB budget, and the same copy succeeds.
        assert_eq!(call_aliased(4 << 20).unwrap(), 1000 * 4096);
    }
}
