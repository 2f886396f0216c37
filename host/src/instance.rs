//! [`OperatorInstance`]: one instantiated plugin with its own wasmtime
//! `Store`, host-owned keyed state and output buffers; and the host side of
//! the `state`, `emit` and `log` interfaces.
//!
//! Invariants:
//! - Records emitted during a call are buffered per output port and only
//!   handed out by [`OperatorInstance::take_output`] after the call returned.
//! - A host function that hits a limit traps with a [`LimitExceeded`]; the
//!   call then fails with [`InstanceError::Limit`], never a panic.

use wasmtime::Store;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::Record;
use crate::bindings::{Operator, emit, log, state, types};
use crate::plugin::{OperatorInfo, Plugin};
use crate::state::KeyedState;

/// Per-instance limits enforced by the host functions.
///
/// ```
/// let l = weir::instance::Limits::default();
/// assert!(l.max_value_bytes >= 1 << 20);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest state key, bytes.
    pub max_key_bytes: usize,
    /// Largest state value, bytes.
    pub max_value_bytes: usize,
    /// Most records emitted by one call into the plugin.
    pub max_emit_records_per_call: usize,
    /// Most bytes (keys plus values) emitted by one call into the plugin.
    pub max_emit_bytes_per_call: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_key_bytes: 64 << 10,
            max_value_bytes: 16 << 20,
            max_emit_records_per_call: 1_000_000,
            max_emit_bytes_per_call: 256 << 20,
        }
    }
}

/// A limit a plugin exceeded; raised as a trap by host functions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} is {actual}, over the limit of {limit}")]
pub struct LimitExceeded {
    /// Which limit, e.g. `state value size`.
    pub what: &'static str,
    /// The configured value.
    pub limit: usize,
    /// What the plugin tried.
    pub actual: usize,
}

/// The data of an instance's `Store`.
pub struct InstanceState {
    label: String,
    wasi: WasiCtx,
    table: ResourceTable,
    state: KeyedState,
    outputs: Vec<Vec<Record>>,
    emitted_records: usize,
    emitted_bytes: usize,
    limits: Limits,
}

impl InstanceState {
    pub(crate) fn new(operator_id: &str, instance: u32) -> Self {
        InstanceState {
            label: format!("{operator_id}[{instance}]"),
            // An empty sandbox: no preopened directories, environment,
            // arguments, network; stdio goes nowhere.
            wasi: WasiCtxBuilder::new().build(),
            table: ResourceTable::new(),
            state: KeyedState::default(),
            outputs: Vec::new(),
            emitted_records: 0,
            emitted_bytes: 0,
            limits: Limits::default(),
        }
    }

    fn check(what: &'static str, limit: usize, actual: usize) -> wasmtime::Result<()> {
        if actual > limit {
            return Err(wasmtime::Error::new(LimitExceeded {
                what,
                limit,
                actual,
            }));
        }
        Ok(())
    }

    fn check_key(&self, key: &[u8]) -> wasmtime::Result<()> {
        Self::check("state key size", self.limits.max_key_bytes, key.len())
    }

    fn check_entry(&self, key: &[u8], value: &[u8]) -> wasmtime::Result<()> {
        self.check_key(key)?;
        Self::check("state value size", self.limits.max_value_bytes, value.len())
    }

    fn push_output(
        &mut self,
        port: u32,
        records: impl ExactSizeIterator<Item = Record>,
    ) -> wasmtime::Result<()> {
        let Some(buf) = self.outputs.get_mut(port as usize) else {
            wasmtime::bail!(
                "emit to output port {port}, but the plugin declares {} output ports",
                self.outputs.len()
            );
        };
        self.emitted_records += records.len();
        Self::check(
            "records emitted in one call",
            self.limits.max_emit_records_per_call,
            self.emitted_records,
        )?;
        for r in records {
            self.emitted_bytes += r.value.len() + r.key.as_ref().map_or(0, Vec::len);
            buf.push(r);
        }
        Self::check(
            "bytes emitted in one call",
            self.limits.max_emit_bytes_per_call,
            self.emitted_bytes,
        )
    }
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
        Ok(keys
            .iter()
            .map(|k| self.state.get(k).map(<[u8]>::to_vec))
            .collect())
    }

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> wasmtime::Result<()> {
        self.check_entry(&key, &value)?;
        self.state.put(key, value);
        Ok(())
    }

    fn put_many(&mut self, entries: Vec<state::Entry>) -> wasmtime::Result<()> {
        for e in entries {
            self.check_entry(&e.key, &e.value)?;
            self.state.put(e.key, e.value);
        }
        Ok(())
    }

    fn delete(&mut self, key: Vec<u8>) -> wasmtime::Result<()> {
        self.state.delete(&key);
        Ok(())
    }

    fn scan(
        &mut self,
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: u32,
    ) -> wasmtime::Result<Vec<state::Entry>> {
        Ok(self
            .state
            .scan(&prefix, after.as_deref(), limit as usize)
            .map(|(k, v)| state::Entry {
                key: k.to_vec(),
                value: v.to_vec(),
            })
            .collect())
    }
}

impl emit::Host for InstanceState {
    fn emit(&mut self, port: u32, rec: Record) -> wasmtime::Result<()> {
        self.push_output(port, std::iter::once(rec))
    }

    fn emit_batch(&mut self, port: u32, records: Vec<Record>) -> wasmtime::Result<()> {
        self.push_output(port, records.into_iter())
    }
}

impl log::Host for InstanceState {
    fn log(&mut self, level: log::Level, message: String) -> wasmtime::Result<()> {
        let op = &self.label;
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
        /// wasmtime's description, with the guest backtrace when known.
        message: String,
    },
    /// The plugin exceeded a host limit.
    #[error("operator `{operator}`: in `{hook}`: {limit}")]
    Limit {
        /// `id[instance]`.
        operator: String,
        /// The hook that was called.
        hook: &'static str,
        /// The limit.
        limit: LimitExceeded,
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
    fn from(e: types::Error) -> Self {
        match e {
            types::Error::InvalidConfig(m) => PluginReturned::InvalidConfig(m),
            types::Error::InvalidInput(m) => PluginReturned::InvalidInput(m),
            types::Error::IncompatibleState(m) => PluginReturned::IncompatibleState(m),
            types::Error::Other(m) => PluginReturned::Other(m),
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
    /// operator `operator_id`, and calls `open` with the JSON `config`.
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
            Limits::default(),
        )
    }

    /// Like [`new`](Self::new), with explicit limits.
    pub fn with_limits(
        plugin: &Plugin,
        operator_id: &str,
        instance: u32,
        parallelism: u32,
        config: &str,
        limits: Limits,
    ) -> Result<Self, InstanceError> {
        let mut data = InstanceState::new(operator_id, instance);
        data.limits = limits;
        data.outputs = vec![Vec::new(); plugin.info().outputs.len()];
        let mut store = Store::new(plugin.pre().engine(), data);
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
        let data = self.store.data_mut();
        data.emitted_records = 0;
        data.emitted_bytes = 0;
        match f(&self.bindings, &mut self.store) {
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
    /// output buffers.
    pub fn process(&mut self, port: u32, batch: &[Record]) -> Result<(), InstanceError> {
        self.call("process", |b, s| {
            b.weir_operator_lifecycle().call_process(s, port, batch)
        })
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
    pub fn take_output(&mut self, port: u32) -> Vec<Record> {
        self.store
            .data_mut()
            .outputs
            .get_mut(port as usize)
            .map(std::mem::take)
            .unwrap_or_default()
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

fn trap_error(data: &InstanceState, hook: &'static str, e: wasmtime::Error) -> InstanceError {
    let operator = data.label.clone();
    if let Some(limit) = e.downcast_ref::<LimitExceeded>() {
        return InstanceError::Limit {
            operator,
            hook,
            limit: limit.clone(),
        };
    }
    InstanceError::Trap {
        operator,
        hook,
        message: format!("{e:#}"),
    }
}
