//! [`InstanceState`], the data of an instance's wasmtime `Store`: what the
//! host functions of `host/` work on (the operator's host-owned keyed state,
//! the per-port output buffers, the limits and per-call counters), the WASI
//! context and resource table, the resource limiter and the guest output;
//! and [`begin_call`], which prepares a store for each call into the plugin.
//!
//! Invariant: every call into the plugin (instantiation included) runs with
//! a deadline (`Limits::call_timeout`) and, when set, a fresh fuel budget:
//! each call starts with [`begin_call`], and the store's epoch callback
//! traps once the deadline has passed.

use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::guest_output::GuestOutput;
use super::hook::Hook;
use super::limiter::{LimitExceeded, Limiter};
use super::wasi::{SleepBounds, wasi_ctx};
use crate::config::{Grants, Limits};
use crate::dataflow::batch::Batch;
use crate::keyed::state::KeyedState;
use crate::keyed::timers::Timers;

/// The data of an instance's `Store`.
pub(super) struct InstanceState {
    /// `operator[instance]`, in logs and errors.
    pub(super) label: String,
    wasi: WasiCtx,
    table: ResourceTable,
    /// The host-owned keyed state (`state` interface).
    pub(super) state: KeyedState,
    /// The host-owned timers and the instance's watermark (`timers`).
    pub(super) timers: Timers,
    /// The timestamp a record emitted without one gets in the current call.
    pub(super) default_timestamp: Option<i64>,
    /// One buffer per output port: what the current call emitted.
    pub(super) outputs: Vec<Batch>,
    /// Records emitted in the current call.
    pub(super) emitted_records: usize,
    /// Bytes emitted in the current call.
    pub(super) emitted_bytes: usize,
    pub(super) limits: Limits,
    grants: Grants,
    pub(super) limiter: Limiter,
    pub(super) output: GuestOutput,
    /// Records in the batch `process` is called with; 0 in other hooks.
    pub(super) batch_len: usize,
    /// The records of that batch the plugin refused (`reject`), by index,
    /// with its message, in the order refused.
    pub(super) rejected: Vec<(u32, String)>,
    /// The hook being called (`describe`, `open`, `process`, ...).
    pub(super) hook: Hook,
    /// When the current call must have returned.
    pub(super) deadline: Option<Instant>,
    /// What `processing-time` returns while set (an instance that records
    /// its input, or a replay of one); the host's clock when `None`.
    pub(super) clock: Option<i64>,
    /// A line per host call since it was last taken, while set (`weir
    /// replay --log`).
    pub(super) trace: Option<Vec<String>>,
}

impl InstanceState {
    /// The data of a store for the instance `label`, with no output ports.
    pub(super) fn new(label: &str, limits: Limits, grants: Grants) -> Self {
        let output = GuestOutput::new(label);
        InstanceState {
            label: label.to_string(),
            // An empty sandbox: no preopened directories, environment,
            // arguments, network; stdio to the host log; fixed clocks and
            // deterministic randomness unless granted.
            wasi: wasi_ctx(grants, &output),
            table: ResourceTable::new(),
            state: KeyedState::default(),
            timers: Timers::default(),
            default_timestamp: None,
            outputs: Vec::new(),
            emitted_records: 0,
            emitted_bytes: 0,
            limiter: Limiter::new(&limits),
            limits,
            grants,
            output,
            batch_len: 0,
            rejected: Vec::new(),
            hook: Hook::Instantiate,
            deadline: None,
            clock: None,
            trace: None,
        }
    }

    /// Notes a host call in the trace, when tracing (`line` is built only
    /// then).
    pub(super) fn trace(&mut self, line: impl FnOnce() -> String) {
        if let Some(trace) = &mut self.trace {
            trace.push(line());
        }
    }

    /// A `Store` holding `self`, with its resource limiter, copy budget and
    /// call deadline installed.
    pub(super) fn into_store(self, engine: &Engine) -> Store<InstanceState> {
        let copy_budget = super::limiter::copy_budget(&self.limits);
        let mut store = Store::new(engine, self);
        store.limiter(|s| &mut s.limiter);
        store.set_hostcall_fuel(copy_budget);
        store.epoch_deadline_callback(|ctx| {
            let data = ctx.data();
            match data.deadline {
                Some(deadline) if Instant::now() >= deadline => {
                    Err(wasmtime::Error::new(LimitExceeded::call_time(&data.limits)))
                }
                _ => Ok(UpdateDeadline::Continue(1)),
            }
        });
        // Instantiation runs start functions: bound it like a call.
        begin_call(&mut store, Hook::Instantiate);
        store
    }
}

/// Prepares `store` for a call into the plugin: sets the hook, resets the
/// per-call counters, arms the deadline and refills the fuel.
pub(super) fn begin_call(store: &mut Store<InstanceState>, hook: Hook) {
    let data = store.data_mut();
    data.hook = hook;
    data.default_timestamp = None;
    data.batch_len = 0;
    data.rejected.clear();
    data.emitted_records = 0;
    data.emitted_bytes = 0;
    data.deadline = Some(Instant::now() + data.limits.call_timeout);
    data.output.begin_call();
    let fuel = data.limits.fuel.unwrap_or(u64::MAX);
    // The epoch callback checks the deadline at every tick of the runtime's
    // epoch thread.
    store.set_epoch_deadline(1);
    // Fails only when the engine does not meter fuel (then there is none to
    // set); an operator with a fuel budget runs on a metering engine
    // (`OperatorInstance::with_limits`).
    let _ = store.set_fuel(fuel);
}

impl WasiView for InstanceState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl SleepBounds for InstanceState {
    fn sleep_bounds(&self) -> (bool, Option<Instant>) {
        (self.grants.clocks, self.deadline)
    }
}
