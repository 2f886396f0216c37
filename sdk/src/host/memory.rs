//! The in-memory host that native builds call instead of the real imports:
//! [`MemoryHost`] (state, emitted records, log lines and a count of every
//! call) installed per thread. [`crate::testing`] installs one per simulated
//! instance.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use weir_flat::state::{Entries, Keys, push_entry, push_value};

use crate::batch::Batch;
use crate::bindings::weir::operator::log::Level as LogLevel;
use crate::bindings::weir::operator::timers::TimeDomain;
use crate::host::StateLimits;
use crate::record::{Change, Record};

/// The in-memory host: state, timers, emitted records and log lines.
#[derive(Debug, Clone)]
pub struct MemoryHost {
    /// Keyed state, as the real host holds it.
    pub state: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Pending event-time timers, as (time, key), in firing order.
    pub event_timers: BTreeSet<(i64, Vec<u8>)>,
    /// Pending processing-time timers, as (time, key), in firing order.
    pub processing_timers: BTreeSet<(i64, Vec<u8>)>,
    /// The instance's watermark (`current-watermark`).
    pub watermark: Option<i64>,
    /// The host's clock (`processing-time`), milliseconds.
    pub processing_time: i64,
    /// The timestamp records emitted without one get in the current call,
    /// as the real host gives them.
    pub default_timestamp: Option<i64>,
    /// Records emitted and not yet taken, with their output port.
    pub emitted: Vec<(u32, Record)>,
    /// The change kind of each record of `emitted`, in step with it.
    pub emitted_changes: Vec<Change>,
    /// Log lines.
    pub logs: Vec<(LogLevel, String)>,
    /// Records the operator refused (`reject`) and not yet taken: each
    /// one's index in the batch of its call, and the message.
    pub rejected: Vec<(u32, String)>,
    /// Calls made to the host so far.
    pub calls: HostCalls,
    /// What `flat-state.limits` answers: the real host's defaults unless
    /// changed. Only `memory` is used here (the SDK sizes its cache from
    /// it); the memory host enforces no limit.
    pub limits: StateLimits,
}

impl Default for MemoryHost {
    fn default() -> Self {
        MemoryHost {
            state: BTreeMap::new(),
            event_timers: BTreeSet::new(),
            processing_timers: BTreeSet::new(),
            watermark: None,
            processing_time: 0,
            default_timestamp: None,
            emitted: Vec::new(),
            emitted_changes: Vec::new(),
            logs: Vec::new(),
            rejected: Vec::new(),
            calls: HostCalls::default(),
            limits: StateLimits {
                memory: 256 << 20,
                max_key_bytes: 64 << 10,
                max_value_bytes: 16 << 20,
                max_state_bytes: 1 << 30,
            },
        }
    }
}

/// How many times the operator called each host function, to check that an
/// operator crosses the Wasm boundary per batch rather than per record.
///
/// The SDK reads and writes state in batches through `flat-state` (its
/// write-backs, `get_many`, `prefetch`, the raw `Context::get_many`,
/// `put_many` and `scan`) and single keys through `state.get`, `state.put`
/// and `state.delete`; it never calls `state.get-many`, `state.put-many`
/// or `state.scan`, whose counts stay for plugins that call the bindings.
///
/// ```
/// let calls = weir_sdk::testing::HostCalls::default();
/// assert_eq!(calls.get + calls.flat_put_many + calls.emit, 0);
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HostCalls {
    /// `state.get`.
    pub get: usize,
    /// `state.get-many` (not called by the SDK).
    pub get_many: usize,
    /// `state.put`.
    pub put: usize,
    /// `state.put-many` (not called by the SDK).
    pub put_many: usize,
    /// `state.delete`.
    pub delete: usize,
    /// `state.scan` (not called by the SDK).
    pub scan: usize,
    /// `flat-state.get-many`.
    pub flat_get_many: usize,
    /// `flat-state.put-many`.
    pub flat_put_many: usize,
    /// Entries stored or deleted by `flat-state.put-many`, over all calls.
    pub flat_put_entries: usize,
    /// `flat-state.scan`.
    pub flat_scan: usize,
    /// `flat-state.limits`.
    pub limits: usize,
    /// `flat.emit`.
    pub emit: usize,
    /// `timers.register-timer`.
    pub register_timer: usize,
    /// `timers.delete-timer`.
    pub delete_timer: usize,
}

thread_local! {
    static HOST: RefCell<Option<MemoryHost>> = const { RefCell::new(None) };
}

/// Runs `f` with the host installed on this thread.
///
/// # Panics
///
/// When none is installed: a native build calls the host only inside
/// `testing::Harness` or `testing::with_memory_host`.
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
pub(crate) fn with_host<R>(f: impl FnOnce(&mut MemoryHost) -> R) -> R {
    HOST.with(|h| {
        let mut h = h.borrow_mut();
        let host = h.as_mut().expect(
            "no in-memory Weir host on this thread: use weir_sdk::testing::Harness or with_memory_host",
        );
        f(host)
    })
}

/// Installs `host` (or none) on this thread and returns the one installed
/// before.
pub(crate) fn replace_host(host: Option<MemoryHost>) -> Option<MemoryHost> {
    HOST.with(|h| h.replace(host))
}

/// The host functions, answered from memory.
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
impl MemoryHost {
    pub(crate) fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        self.calls.get += 1;
        self.state.get(key).cloned()
    }

    pub(crate) fn put(&mut self, key: &[u8], value: &[u8]) {
        self.calls.put += 1;
        self.state.insert(key.to_vec(), value.to_vec());
    }

    pub(crate) fn delete(&mut self, key: &[u8]) {
        self.calls.delete += 1;
        self.state.remove(key);
    }

    /// Answers like the real host, which traps where this panics.
    pub(crate) fn flat_get_many(&mut self, keys: &[u8]) -> Vec<u8> {
        self.calls.flat_get_many += 1;
        let keys = Keys::parse(keys)
            .unwrap_or_else(|e| panic!("flat-state.get-many: malformed packed keys: {e}"));
        let mut out = Vec::new();
        for key in keys {
            push_value(&mut out, self.state.get(key).map(Vec::as_slice));
        }
        out
    }

    pub(crate) fn flat_put_many(&mut self, entries: &[u8]) {
        self.calls.flat_put_many += 1;
        let entries = Entries::parse(entries)
            .unwrap_or_else(|e| panic!("flat-state.put-many: malformed packed entries: {e}"));
        self.calls.flat_put_entries += entries.len();
        for (key, value) in entries {
            match value {
                Some(v) => self.state.insert(key.to_vec(), v.to_vec()),
                None => self.state.remove(key),
            };
        }
    }

    pub(crate) fn flat_scan(&mut self, prefix: &[u8], after: Option<&[u8]>, limit: u32) -> Vec<u8> {
        self.calls.flat_scan += 1;
        let mut out = Vec::new();
        let entries = self
            .state
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter(|(k, _)| after.is_none_or(|a| k.as_slice() > a))
            .take(limit as usize);
        for (k, v) in entries {
            push_entry(&mut out, k, Some(v));
        }
        out
    }

    pub(crate) fn limits(&mut self) -> StateLimits {
        self.calls.limits += 1;
        self.limits
    }

    pub(crate) fn emit_flat(&mut self, port: u32, data: &[u8], spans: &[u8]) {
        // The real host checks the spans too, and traps on a bad one.
        let batch = Batch::new(data, spans).expect("the SDK emits valid spans");
        self.calls.emit += 1;
        // Reading the batch must not move the operator's current timestamp.
        let current = crate::timer::current();
        let default = self.default_timestamp;
        self.emitted_changes.extend(batch.iter().map(|r| r.change));
        // A row reaches sinks and operators as its JSON text (`to_record`).
        self.emitted.extend(batch.iter().map(|r| {
            let mut rec = r.to_record();
            rec.timestamp = rec.timestamp.or(default);
            (port, rec)
        }));
        crate::timer::set_current(current);
    }

    /// The pending timers of `domain`.
    pub fn timers_mut(&mut self, domain: TimeDomain) -> &mut BTreeSet<(i64, Vec<u8>)> {
        match domain {
            TimeDomain::EventTime => &mut self.event_timers,
            TimeDomain::ProcessingTime => &mut self.processing_timers,
        }
    }

    pub(crate) fn register_timer(&mut self, key: &[u8], domain: TimeDomain, time: i64) {
        self.calls.register_timer += 1;
        self.timers_mut(domain).insert((time, key.to_vec()));
    }

    pub(crate) fn delete_timer(&mut self, key: &[u8], domain: TimeDomain, time: i64) {
        self.calls.delete_timer += 1;
        self.timers_mut(domain).remove(&(time, key.to_vec()));
    }

    pub(crate) fn log(&mut self, level: LogLevel, message: &str) {
        self.logs.push((level, message.to_string()));
    }

    pub(crate) fn reject(&mut self, index: u32, message: &str) {
        self.rejected.push((index, message.to_string()));
    }
}
