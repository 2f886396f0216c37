//! [`OperatorInstance`]: one instantiated plugin with its own wasmtime
//! `Store` (whose data, [`InstanceState`], holds its host-owned keyed state
//! and output buffers), and its call lifecycle: `open` on creation, then
//! `restore`, `process`, `on-checkpoint`, `finish` and `snapshot`, each
//! call prepared by [`begin_call`] and its failure mapped by
//! [`trap_error`].
//!
//! Invariants:
//! - Emits are buffered per call (`host/emit.rs`): the output buffers are
//!   handed out by [`OperatorInstance::take_output_batch`] only between
//!   calls, after the call that emitted them returned.
//! - Every call into the plugin, instantiation included, runs with a
//!   deadline and, when the operator sets one, a fresh fuel budget
//!   (`instance_state.rs`); an operator with a fuel budget runs a
//!   fuel-metered compilation of its plugin ([`Plugin::metered`]).
//! - Calls on one instance are never concurrent: it lives on one thread and
//!   every call takes `&mut self`.

use wasmtime::Store;

use super::error::{InstanceError, PluginReturned, ReturnedKind, trap_error};
use super::guest_output::sanitize;
use super::hook::Hook;
use super::instance_state::{InstanceState, begin_call};
use super::plugin::{OperatorInfo, Plugin};
use crate::Record;
use crate::config::{Grants, Limits, OperatorConfig};
use crate::dataflow::batch::Batch;
use crate::keyed::state::KeyedState;
use crate::keyed::timers::{Domain, Timers};
use crate::wit::{Operator, types};

/// Most timers passed to one `on-timers` call.
pub const TIMERS_PER_CALL: usize = 4096;
/// Most `on-timers` calls in one round of firing (see
/// [`OperatorInstance::fire_timers`]): a plugin past it keeps registering
/// timers that are due already.
pub const MAX_TIMER_CALLS_PER_ROUND: usize = 100_000;

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
    /// Whether the log said that change kinds reach this plugin as inserts.
    told_changes_forgotten: bool,
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
            Err(e) => return Err(trap_error(store.data(), Hook::Instantiate, e)),
        };
        let mut inst = OperatorInstance {
            store,
            bindings,
            plugin: plugin.clone(),
            told_changes_forgotten: false,
        };
        let ctx = types::OpenContext {
            operator_id: operator_id.to_string(),
            instance,
            parallelism,
            config: config.to_string(),
        };
        inst.call(Hook::Open, |b, s| {
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
        hook: Hook,
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

    /// Whether its plugin reads rows ([`Plugin::reads_rows`]).
    pub fn reads_rows(&self) -> bool {
        self.plugin.reads_rows()
    }

    /// Processes `batch` from input port `port`; emitted records wait in the
    /// output buffers. A plugin that exports `flat-lifecycle` gets the batch
    /// in flat form, others as a list of records.
    ///
    /// A record emitted without a timestamp gets the batch's largest.
    ///
    /// A plugin that exports `change-lifecycle` gets each record's change
    /// kind; others see every record as an insert (the first batch with
    /// other kinds is logged).
    pub fn process_batch(&mut self, port: u32, batch: &Batch) -> Result<(), InstanceError> {
        let latest = batch.max_timestamp();
        let (data, spans) = batch.parts();
        let sees_changes = self.bindings.weir_operator_change_lifecycle().is_some();
        let mut inserts = Vec::new();
        // A plugin taking lists of records gets no change kinds anyway.
        let spans = if !sees_changes && batch.has_changes() {
            inserts.extend_from_slice(spans);
            weir_flat::forget_changes(&mut inserts);
            if !std::mem::replace(&mut self.told_changes_forgotten, true) {
                tracing::warn!(
                    "operator {}: updates, deletes and truncates reach this plugin as inserts: it does not export `change-lifecycle` (world `operator-changes`); rebuild it with a newer SDK",
                    self.store.data().label
                );
            }
            &inserts[..]
        } else {
            spans
        };
        self.call(Hook::Process, |b, s| {
            s.data_mut().default_timestamp = latest;
            s.data_mut().batch_len = batch.len();
            if let Some(changes) = b.weir_operator_change_lifecycle() {
                return changes.call_process(s, port, data, spans);
            }
            match b.weir_operator_flat_lifecycle() {
                Some(flat) => flat.call_process(s, port, data, spans),
                None => b
                    .weir_operator_lifecycle()
                    .call_process(s, port, &batch.to_records()),
            }
        })
    }

    /// The records of `batch` the last [`process_batch`](Self::process_batch)
    /// call (with `batch`) refused (`reject`), in the order refused: each
    /// one's index in the batch and the `invalid-input` error it is,
    /// naming the record's key when it has a textual one.
    pub fn take_rejected(&mut self, batch: &Batch) -> Vec<(usize, InstanceError)> {
        let data = self.store.data_mut();
        let rejected = std::mem::take(&mut data.rejected);
        (rejected.into_iter())
            .map(|(index, message)| {
                let index = index as usize;
                let key = (index < batch.len())
                    .then(|| batch.get(index).key)
                    .flatten();
                let record = match key.and_then(|k| std::str::from_utf8(k).ok()) {
                    Some(k) => format!("record {index} of the batch (key `{}`)", sanitize(k, 64)),
                    None => format!("record {index} of the batch"),
                };
                let error = InstanceError::Returned {
                    operator: data.label.clone(),
                    hook: Hook::Process,
                    error: PluginReturned {
                        kind: ReturnedKind::InvalidInput,
                        message: format!("{record} refused: {message}"),
                    },
                };
                (index, error)
            })
            .collect()
    }

    /// Whether the plugin exports `timer-lifecycle`.
    pub fn has_timers(&self) -> bool {
        self.plugin.pre().has_timers()
    }

    /// Fires, in order, the timers of `domain` due at `upto`, at most
    /// `TIMERS_PER_CALL` per `on-timers` call, until none is due (timers
    /// the calls register that are due already fire in this round too).
    /// Returns how many fired. Records emitted without a timestamp get the
    /// time of the last timer of their call.
    pub fn fire_timers(&mut self, domain: Domain, upto: i64) -> Result<usize, InstanceError> {
        let mut fired = 0;
        for _ in 0..MAX_TIMER_CALLS_PER_ROUND {
            let due = self
                .store
                .data_mut()
                .timers
                .pop_due(domain, upto, TIMERS_PER_CALL);
            let Some(&(last, _)) = due.last() else {
                return Ok(fired);
            };
            fired += due.len();
            let mut batch = Batch::with_capacity(due.len(), due.iter().map(|t| t.1.len()).sum());
            for (time, key) in &due {
                batch.push(Some(key), &[], Some(*time));
            }
            let (data, spans) = batch.parts();
            let label = &self.store.data().label;
            if self.bindings.weir_operator_timer_lifecycle().is_none() {
                return Err(InstanceError::Config {
                    operator: label.clone(),
                    message: "the plugin registered timers but does not export `timer-lifecycle` (world `operator-timers`); rebuild it against that world".into(),
                });
            }
            self.call(Hook::OnTimers, |b, s| {
                s.data_mut().default_timestamp = Some(last);
                let timers = b.weir_operator_timer_lifecycle().expect("checked above");
                timers.call_on_timers(s, domain.into(), data, spans)
            })?;
        }
        Err(InstanceError::Config {
            operator: self.store.data().label.clone(),
            message: format!(
                "the plugin keeps registering {} timers that are already due ({} calls of `on-timers` in one round); register timers after the current {}",
                domain.name(),
                MAX_TIMER_CALLS_PER_ROUND,
                match domain {
                    Domain::EventTime => "watermark",
                    Domain::ProcessingTime => "processing time",
                }
            ),
        })
    }

    /// Sets the instance's watermark (what `current-watermark` returns).
    pub fn set_watermark(&mut self, watermark: i64) {
        self.store.data_mut().timers.set_watermark(watermark);
    }

    /// Makes `processing-time` return `time` until the next call of this
    /// (the host's clock again with `None`): a recorded call and its replay
    /// see the same time.
    pub fn pin_clock(&mut self, time: Option<i64>) {
        self.store.data_mut().clock = time;
    }

    /// Starts (or stops) noting every host call the plugin makes, one line
    /// each, until [`take_host_calls`](Self::take_host_calls).
    pub fn trace_host_calls(&mut self, on: bool) {
        self.store.data_mut().trace = on.then(Vec::new);
    }

    /// The host calls noted since the last time, in order.
    pub fn take_host_calls(&mut self) -> Vec<String> {
        let trace = self.store.data_mut().trace.as_mut();
        trace.map(std::mem::take).unwrap_or_default()
    }

    /// The host-owned timers and watermark.
    pub fn timers(&self) -> &Timers {
        &self.store.data().timers
    }

    /// The host-owned timers, mutable (to take changes at a checkpoint).
    pub fn timers_mut(&mut self) -> &mut Timers {
        &mut self.store.data_mut().timers
    }

    /// [`process_batch`](Self::process_batch) for owned records (tests and
    /// tools).
    pub fn process(&mut self, port: u32, batch: &[Record]) -> Result<(), InstanceError> {
        self.process_batch(port, &Batch::from(batch))
    }

    /// Calls `on-checkpoint`.
    pub fn on_checkpoint(&mut self, checkpoint_id: u64) -> Result<(), InstanceError> {
        self.call(Hook::OnCheckpoint, |b, s| {
            b.weir_operator_lifecycle()
                .call_on_checkpoint(s, checkpoint_id)
        })
    }

    /// Calls `finish`.
    pub fn finish(&mut self) -> Result<(), InstanceError> {
        self.call(Hook::Finish, |b, s| {
            b.weir_operator_lifecycle().call_finish(s)
        })
    }

    /// The plugin's in-memory state as bytes (`snapshot.snapshot`).
    pub fn snapshot(&mut self) -> Result<Vec<u8>, InstanceError> {
        self.call(Hook::Snapshot, |b, s| {
            b.weir_operator_snapshot().call_snapshot(s).map(Ok)
        })
    }

    /// Replaces the host-owned timers and watermark with restored ones;
    /// call it before [`restore`](Self::restore).
    pub fn restore_timers(&mut self, timers: Timers) {
        self.store.data_mut().timers = timers;
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
        self.call(Hook::Restore, |b, s| {
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

    /// [`take_output_batch`](Self::take_output_batch) as owned records, as
    /// a reader sees them: rows written as JSON text
    /// ([`Batch::rows_as_text`]) (tests and tools).
    ///
    /// # Panics
    ///
    /// When the plugin emitted a value marked a row that is none (the
    /// threads of a job fail its reader instead).
    pub fn take_output(&mut self, port: u32) -> Vec<Record> {
        let batch = self.take_output_batch(port).rows_as_text();
        batch
            .unwrap_or_else(|e| panic!("the plugin emitted a malformed row on port {port}: {e}"))
            .to_records()
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
