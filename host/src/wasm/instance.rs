//! [`OperatorInstance`]: one instantiated plugin with its own wasmtime
//! `Store`, host-owned keyed state and output buffers; and the host side of
//! the `state`, `emit` and `log` interfaces.
//!
//! Invariants:
//! - Records emitted during a call are buffered per output port and only
//!   handed out by [`OperatorInstance::take_output`] after the call returned.
//! - A host function, the resource limiter or the call deadline that hits a
//!   limit traps with a [`LimitExceeded`]; the call then fails with
//!   [`InstanceError::Limit`], never a panic.
//! - Every call into the plugin (instantiation included) runs with a
//!   deadline (`Limits::call_timeout`) and, when set, a fresh fuel budget.
//! - Records are accepted only in `process`, `on-checkpoint` and `finish`;
//!   state writes are refused in `describe` and `snapshot`.

use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store, Trap, UpdateDeadline, WasmBacktrace};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::Record;
use crate::checkpoint::state::KeyedState;
use crate::config::OperatorConfig;
use crate::dataflow::batch::{Batch, SPAN_BYTES};
use crate::wasm::plugin::{OperatorInfo, Plugin};
use crate::wasm::sandbox::{GuestOutput, Limiter, MAX_MESSAGE};
use crate::wit::{Operator, emit, flat, log, state, types};

use crate::config::{Grants, LimitValue, Limits};
pub use crate::wasm::sandbox::{LimitExceeded, sanitize};

/// The stack a wasm call may use, bytes (wasmtime's default, set
/// explicitly so errors can name it). Not configurable per operator.
pub const WASM_STACK: usize = 512 << 10;

/// The data of an instance's `Store`.
pub struct InstanceState {
    label: String,
    wasi: WasiCtx,
    table: ResourceTable,
    state: KeyedState,
    outputs: Vec<Batch>,
    emitted_records: usize,
    emitted_bytes: usize,
    limits: Limits,
    grants: Grants,
    limiter: Limiter,
    output: GuestOutput,
    /// The hook being called (`describe`, `open`, `process`, ...).
    hook: &'static str,
    /// When the current call must have returned.
    deadline: Option<Instant>,
}

impl InstanceState {
    pub(crate) fn new(label: &str, limits: Limits, grants: Grants) -> Self {
        let output = GuestOutput::new(label);
        InstanceState {
            label: label.to_string(),
            // An empty sandbox: no preopened directories, environment,
            // arguments, network; stdio to the host log; fixed clocks and
            // deterministic randomness unless granted.
            wasi: crate::wasm::sandbox::wasi_ctx(grants, &output),
            table: ResourceTable::new(),
            state: KeyedState::default(),
            outputs: Vec::new(),
            emitted_records: 0,
            emitted_bytes: 0,
            limiter: Limiter::new(&limits),
            limits,
            grants,
            output,
            hook: "instantiate",
            deadline: None,
        }
    }

    /// A `Store` holding `self`, with its resource limiter and call deadline
    /// installed.
    pub(crate) fn into_store(self, engine: &Engine) -> Store<InstanceState> {
        let mut store = Store::new(engine, self);
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_callback(|ctx| {
            let data = ctx.data();
            match data.deadline {
                Some(deadline) if Instant::now() >= deadline => {
                    Err(wasmtime::Error::new(LimitExceeded::new(
                        "call time",
                        "call_timeout",
                        LimitValue::Time(data.limits.call_timeout),
                        None,
                    )))
                }
                _ => Ok(UpdateDeadline::Continue(1)),
            }
        });
        // Instantiation runs start functions: bound it like a call.
        begin_call(&mut store, "instantiate");
        store
    }

    /// Whether the clocks grant is set, and the current call's deadline.
    pub(crate) fn clock_grant(&self) -> (bool, Option<Instant>) {
        (self.grants.clocks, self.deadline)
    }

    /// The resource table (for WASI resources).
    pub(crate) fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }

    fn check_key(&self, key: &[u8]) -> wasmtime::Result<()> {
        LimitExceeded::check_bytes(
            "state key size",
            "max_key_bytes",
            self.limits.max_key_bytes,
            key.len(),
        )
    }

    fn check_entry(&self, key: &[u8], value: &[u8]) -> wasmtime::Result<()> {
        self.check_key(key)?;
        LimitExceeded::check_bytes(
            "state value size",
            "max_value_bytes",
            self.limits.max_value_bytes,
            value.len(),
        )
    }

    /// Traps unless the current hook may write state. `snapshot` runs after
    /// the state was cut for the checkpoint; `describe` has no state.
    fn check_write(&self) -> wasmtime::Result<()> {
        if matches!(self.hook, "describe" | "snapshot" | "instantiate") {
            wasmtime::bail!(
                "the plugin wrote state during `{}`; state may be written in `open`, `restore`, `process`, `on-checkpoint` and `finish`",
                self.hook
            );
        }
        Ok(())
    }

    fn put_checked(&mut self, key: Vec<u8>, value: Vec<u8>) -> wasmtime::Result<()> {
        self.check_entry(&key, &value)?;
        match self
            .state
            .put_within(key, value, self.limits.max_state_bytes)
        {
            Ok(()) => Ok(()),
            Err(after) => LimitExceeded::check_bytes(
                "host state size",
                "max_state_bytes",
                self.limits.max_state_bytes,
                after,
            ),
        }
    }

    /// Counts `bytes` more of a state read towards the reply's cap: a reply
    /// must fit in the plugin's memory, so it is capped at `limits.memory`.
    fn check_read(total: &mut usize, bytes: usize, cap: usize) -> wasmtime::Result<()> {
        *total = total.saturating_add(bytes);
        LimitExceeded::check_bytes("bytes returned by one state read", "memory", cap, *total)
    }

    /// The output buffer of `port`, if the current hook may emit to it.
    fn output(&mut self, port: u32) -> wasmtime::Result<&mut Batch> {
        if !matches!(self.hook, "process" | "on-checkpoint" | "finish") {
            wasmtime::bail!(
                "the plugin emitted records during `{}`; records may only be emitted in `process`, `on-checkpoint` and `finish` (records emitted while opening or restoring would be repeated on every restart)",
                self.hook
            );
        }
        let ports = self.outputs.len();
        match self.outputs.get_mut(port as usize) {
            Some(buf) => Ok(buf),
            None => wasmtime::bail!(
                "emit to output port {port}, but the plugin declares {ports} output ports"
            ),
        }
    }

    /// Counts `records` records of `bytes` bytes more towards the per-call
    /// emit limits, and checks that output `port` stays addressable.
    fn count_emitted(&mut self, port: u32, records: usize, bytes: usize) -> wasmtime::Result<()> {
        self.output(port)?;
        self.emitted_records += records;
        LimitExceeded::check_count(
            "records emitted in one call",
            "max_emit_records",
            self.limits.max_emit_records_per_call,
            self.emitted_records,
        )?;
        self.emitted_bytes += bytes;
        LimitExceeded::check_bytes(
            "bytes emitted in one call",
            "max_emit_bytes",
            self.limits.max_emit_bytes_per_call,
            self.emitted_bytes,
        )?;
        let buffered = self.outputs[port as usize].data_bytes();
        if buffered + bytes > u32::MAX as usize {
            wasmtime::bail!("the plugin emitted more than 4 GiB on output port {port} in one call");
        }
        Ok(())
    }

    fn push_records(&mut self, port: u32, records: &[Record]) -> wasmtime::Result<()> {
        let bytes = records
            .iter()
            .map(|r| r.value.len() + r.key.as_ref().map_or(0, Vec::len))
            .sum();
        self.count_emitted(port, records.len(), bytes)?;
        let buf = &mut self.outputs[port as usize];
        for r in records {
            buf.push(r.key.as_deref(), &r.value, r.timestamp);
        }
        Ok(())
    }
}

/// Prepares `store` for a call into the plugin: sets the hook, resets the
/// per-call counters, arms the deadline and refills the fuel.
pub(crate) fn begin_call(store: &mut Store<InstanceState>, hook: &'static str) {
    let data = store.data_mut();
    data.hook = hook;
    data.emitted_records = 0;
    data.emitted_bytes = 0;
    data.deadline = Some(Instant::now() + data.limits.call_timeout);
    data.output.begin_call();
    let fuel = data.limits.fuel.unwrap_or(u64::MAX);
    // The epoch callback checks the deadline at every tick of the runtime's
    // epoch thread.
    store.set_epoch_deadline(1);
    // Fails only when the engine does not meter fuel (then there is none to
    // set); `with_limits` refuses a fuel budget on such an engine.
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

impl types::Host for InstanceState {}

impl state::Host for InstanceState {
    fn get(&mut self, key: Vec<u8>) -> wasmtime::Result<Option<Vec<u8>>> {
        Ok(self.state.get(&key).map(<[u8]>::to_vec))
    }

    fn get_many(&mut self, keys: Vec<Vec<u8>>) -> wasmtime::Result<Vec<Option<Vec<u8>>>> {
        let mut total = 0;
        let mut out = Vec::with_capacity(keys.len());
        for k in &keys {
            let v = self.state.get(k);
            Self::check_read(&mut total, v.map_or(0, <[u8]>::len), self.limits.memory)?;
            out.push(v.map(<[u8]>::to_vec));
        }
        Ok(out)
    }

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> wasmtime::Result<()> {
        self.check_write()?;
        self.put_checked(key, value)
    }

    fn put_many(&mut self, entries: Vec<state::Entry>) -> wasmtime::Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        self.check_write()?;
        for e in entries {
            self.put_checked(e.key, e.value)?;
        }
        Ok(())
    }

    fn delete(&mut self, key: Vec<u8>) -> wasmtime::Result<()> {
        self.check_write()?;
        self.state.delete(&key);
        Ok(())
    }

    fn scan(
        &mut self,
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: u32,
    ) -> wasmtime::Result<Vec<state::Entry>> {
        let mut total = 0;
        let mut out = Vec::new();
        for (k, v) in self.state.scan(&prefix, after.as_deref(), limit as usize) {
            Self::check_read(&mut total, k.len() + v.len(), self.limits.memory)?;
            out.push(state::Entry {
                key: k.to_vec(),
                value: v.to_vec(),
            });
        }
        Ok(out)
    }
}

impl emit::Host for InstanceState {
    fn emit(&mut self, port: u32, rec: Record) -> wasmtime::Result<()> {
        self.push_records(port, std::slice::from_ref(&rec))
    }

    fn emit_batch(&mut self, port: u32, records: Vec<Record>) -> wasmtime::Result<()> {
        self.push_records(port, &records)
    }
}

impl flat::Host for InstanceState {
    fn emit(&mut self, port: u32, data: Vec<u8>, spans: Vec<u8>) -> wasmtime::Result<()> {
        self.count_emitted(port, spans.len() / SPAN_BYTES, data.len())?;
        let batch = Batch::from_parts(data, spans)
            .map_err(|e| wasmtime::format_err!("flat emit to output port {port}: {e}"))?;
        let buf = &mut self.outputs[port as usize];
        if buf.is_empty() {
            *buf = batch;
        } else {
            buf.append(&batch);
        }
        Ok(())
    }
}

impl log::Host for InstanceState {
    fn log(&mut self, level: log::Level, message: String) -> wasmtime::Result<()> {
        let op = &self.label;
        // The plugin's text: no forged log lines, no terminal escapes.
        let message = crate::wasm::sandbox::sanitize(&message, MAX_MESSAGE);
        match level {
            log::Level::Trace => tracing::trace!(operator = %op, "{message}"),
            log::Level::Debug => tracing::debug!(operator = %op, "{message}"),
            log::Level::Info => tracing::info!(operator = %op, "{message}"),
            log::Level::Warn => tracing::warn!(operator = %op, "{message}"),
            log::Level::Error => tracing::error!(operator = %op, "{message}"),
        }
        Ok(())
    }
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
        hook: &'static str,
        /// What went wrong, on one line: the trap, and the plugin's last
        /// stderr line (a Rust guest's panic message) when there is one.
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
        hook: &'static str,
        /// The limit (boxed: it is large and errors are passed around a lot).
        limit: Box<LimitExceeded>,
    },
    /// The plugin returned an error.
    #[error("operator `{operator}`: `{hook}` returned an error: {error}")]
    Returned {
        /// `id[instance]`.
        operator: String,
        /// The hook that was called.
        hook: &'static str,
        /// The plugin's error.
        error: PluginReturned,
    },
}

/// An error a plugin returned (the WIT `error` variant).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginReturned {
    /// Bad configuration.
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    /// A record could not be processed.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// Snapshot bytes could not be restored.
    #[error("incompatible state: {0}")]
    IncompatibleState(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl From<types::Error> for PluginReturned {
    /// Keeps the plugin's message on one line (control characters escaped)
    /// and at most a few KiB.
    fn from(e: types::Error) -> Self {
        let clean = |m: String| crate::wasm::sandbox::sanitize(&m, MAX_MESSAGE);
        match e {
            types::Error::InvalidConfig(m) => PluginReturned::InvalidConfig(clean(m)),
            types::Error::InvalidInput(m) => PluginReturned::InvalidInput(clean(m)),
            types::Error::IncompatibleState(m) => PluginReturned::IncompatibleState(clean(m)),
            types::Error::Other(m) => PluginReturned::Other(clean(m)),
        }
    }
}

/// One running instance of an operator's plugin.
///
/// ```no_run
/// use weir::{Record, Runtime, OperatorInstance};
/// let rt = Runtime::new().unwrap();
/// let plugin = rt.load("plugins/target/word-count.wasm").unwrap();
/// let mut inst = OperatorInstance::new(&plugin, "wc", 0, 1, "{}").unwrap();
/// inst.process(0, &[Record::new(b"hello".to_vec())]).unwrap();
/// let out = inst.take_output(0);
/// assert_eq!(out.len(), 1);
/// ```
pub struct OperatorInstance {
    store: Store<InstanceState>,
    bindings: Operator,
    plugin: Plugin,
}

impl std::fmt::Debug for OperatorInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorInstance")
            .field("operator", &self.store.data().label)
            .finish_non_exhaustive()
    }
}

impl OperatorInstance {
    /// Instantiates `plugin` as instance `instance` of `parallelism` of the
    /// operator `operator_id`, with default [`Limits`] and no [`Grants`], and
    /// calls `open` with the JSON `config`.
    pub fn new(
        plugin: &Plugin,
        operator_id: &str,
        instance: u32,
        parallelism: u32,
        config: &str,
    ) -> Result<Self, InstanceError> {
        Self::with_limits(
            plugin,
            operator_id,
            instance,
            parallelism,
            config,
            &Limits::default(),
            Grants::default(),
        )
    }

    /// Instance `instance` of the job's operator `op`, with its config,
    /// limits and grants.
    pub fn for_operator(
        plugin: &Plugin,
        op: &OperatorConfig,
        instance: u32,
    ) -> Result<Self, InstanceError> {
        Self::with_limits(
            plugin,
            &op.id,
            instance,
            op.parallelism,
            &op.config,
            &op.limits,
            op.grants,
        )
    }

    /// Like [`new`](Self::new), with explicit limits and grants.
    ///
    /// A fuel budget (`limits.fuel`) needs code compiled with fuel metering:
    /// on a runtime without it ([`Runtime::new`](crate::Runtime::new)) the
    /// plugin is compiled again, once, by a metering twin of the runtime
    /// ([`Plugin::metered`]).
    pub fn with_limits(
        plugin: &Plugin,
        operator_id: &str,
        instance: u32,
        parallelism: u32,
        config: &str,
        limits: &Limits,
        grants: Grants,
    ) -> Result<Self, InstanceError> {
        let label = format!("{operator_id}[{instance}]");
        // A fuel budget needs code compiled with fuel metering.
        let plugin = match limits.fuel {
            Some(_) => plugin.metered().map_err(|message| InstanceError::Config {
                operator: label.clone(),
                message: format!(
                    "limits.fuel: cannot compile the plugin with fuel metering: {message}"
                ),
            })?,
            None => plugin.clone(),
        };
        let plugin = &plugin;
        let mut data = InstanceState::new(&label, limits.clone(), grants);
        data.outputs = vec![Batch::new(); plugin.info().outputs.len()];
        let mut store = data.into_store(plugin.pre().engine());
        let bindings = match plugin.pre().instantiate(&mut store) {
            Ok(b) => b,
            Err(e) => return Err(trap_error(store.data(), "instantiate", e)),
        };
        let mut inst = OperatorInstance {
            store,
            bindings,
            plugin: plugin.clone(),
        };
        let ctx = types::OpenContext {
            operator_id: operator_id.to_string(),
            instance,
            parallelism,
            config: config.to_string(),
        };
        inst.call("open", |b, s| {
            b.weir_operator_lifecycle().call_open(s, &ctx)
        })?;
        Ok(inst)
    }

    /// The plugin this instance runs.
    pub fn plugin(&self) -> &Plugin {
        &self.plugin
    }

    /// What the plugin says about itself.
    pub fn info(&self) -> &OperatorInfo {
        self.plugin.info()
    }

    fn call<T>(
        &mut self,
        hook: &'static str,
        f: impl FnOnce(
            &Operator,
            &mut Store<InstanceState>,
        ) -> wasmtime::Result<Result<T, types::Error>>,
    ) -> Result<T, InstanceError> {
        begin_call(&mut self.store, hook);
        let result = f(&self.bindings, &mut self.store);
        self.store.data_mut().deadline = None;
        match result {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(InstanceError::Returned {
                operator: self.store.data().label.clone(),
                hook,
                error: e.into(),
            }),
            Err(e) => Err(trap_error(self.store.data(), hook, e)),
        }
    }

    /// Processes `batch` from input port `port`; emitted records wait in the
    /// output buffers. A plugin that exports `flat-lifecycle` gets the batch
    /// in flat form, others as a list of records.
    pub fn process_batch(&mut self, port: u32, batch: &Batch) -> Result<(), InstanceError> {
        self.call("process", |b, s| match b.weir_operator_flat_lifecycle() {
            Some(flat) => {
                let (data, spans) = batch.parts();
                flat.call_process(s, port, data, spans)
            }
            None => b
                .weir_operator_lifecycle()
                .call_process(s, port, &batch.to_records()),
        })
    }

    /// [`process_batch`](Self::process_batch) for owned records (tests and
    /// tools).
    pub fn process(&mut self, port: u32, batch: &[Record]) -> Result<(), InstanceError> {
        self.process_batch(port, &Batch::from(batch))
    }

    /// Calls `on-checkpoint`.
    pub fn on_checkpoint(&mut self, checkpoint_id: u64) -> Result<(), InstanceError> {
        self.call("on-checkpoint", |b, s| {
            b.weir_operator_lifecycle()
                .call_on_checkpoint(s, checkpoint_id)
        })
    }

    /// Calls `finish`.
    pub fn finish(&mut self) -> Result<(), InstanceError> {
        self.call("finish", |b, s| b.weir_operator_lifecycle().call_finish(s))
    }

    /// The plugin's in-memory state as bytes (`snapshot.snapshot`).
    pub fn snapshot(&mut self) -> Result<Vec<u8>, InstanceError> {
        self.call("snapshot", |b, s| {
            b.weir_operator_snapshot().call_snapshot(s).map(Ok)
        })
    }

    /// Restores host state and the plugin's in-memory state written by a
    /// plugin with `state_version`.
    pub fn restore(
        &mut self,
        state: KeyedState,
        state_version: u32,
        snapshot: &[u8],
    ) -> Result<(), InstanceError> {
        self.store.data_mut().state = state;
        self.call("restore", |b, s| {
            b.weir_operator_snapshot()
                .call_restore(s, state_version, snapshot)
        })
    }

    /// Takes the records emitted on output `port` so far.
    pub fn take_output_batch(&mut self, port: u32) -> Batch {
        self.store
            .data_mut()
            .outputs
            .get_mut(port as usize)
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// [`take_output_batch`](Self::take_output_batch) as owned records
    /// (tests and tools).
    pub fn take_output(&mut self, port: u32) -> Vec<Record> {
        self.take_output_batch(port).to_records()
    }

    /// Number of output ports.
    pub fn output_ports(&self) -> usize {
        self.store.data().outputs.len()
    }

    /// The host-owned keyed state.
    pub fn state(&self) -> &KeyedState {
        &self.store.data().state
    }

    /// The host-owned keyed state, mutable (to take changes at a checkpoint).
    pub fn state_mut(&mut self) -> &mut KeyedState {
        &mut self.store.data_mut().state
    }
}

impl OperatorInstance {
    /// The limits this instance runs under.
    pub fn limits(&self) -> &Limits {
        &self.store.data().limits
    }

    /// Bytes of linear memory the instance has allocated.
    pub fn memory_used(&self) -> usize {
        self.store.data().limiter.memory_used()
    }
}

/// Turns a failed call into an [`InstanceError`]: limits (host limits, the
/// memory and table limiter, the deadline, fuel, the wasm stack, wasmtime's
/// instance counts) become [`InstanceError::Limit`], anything else a one-line
/// [`InstanceError::Trap`].
pub(crate) fn trap_error(
    data: &InstanceState,
    hook: &'static str,
    e: wasmtime::Error,
) -> InstanceError {
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
        Some(Trap::Interrupt) => {
            return limit(LimitExceeded::new(
                "call time",
                "call_timeout",
                LimitValue::Time(limits.call_timeout),
                None,
            ));
        }
        _ => {}
    }
    if let Some(l) = e
        .chain()
        .find_map(|c| crate::wasm::sandbox::count_limit(&c.to_string(), limits))
    {
        return limit(l);
    }
    let backtrace = e.downcast_ref::<WasmBacktrace>().map(|b| b.to_string());
    if let Some(b) = &backtrace {
        tracing::debug!(operator = %operator, hook, "plugin trapped; {b}");
    }
    // The root cause is the trap or the host's refusal; the outer layers are
    // the backtrace and wasmtime's context.
    let mut message = crate::wasm::sandbox::sanitize(&e.root_cause().to_string(), MAX_MESSAGE);
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
