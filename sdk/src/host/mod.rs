//! The host functions an operator calls, dispatched to the real host when
//! compiled to Wasm and to the in-memory test host ([`crate::testing`]) when
//! compiled natively.

/// Severity of a log message sent to the host.
///
/// ```
/// weir_sdk::testing::with_memory_host(|| {
///     weir_sdk::Context::new().log(weir_sdk::LogLevel::Info, "hello");
/// });
/// ```
pub use crate::bindings::weir::operator::log::Level as LogLevel;
use crate::bindings::weir::operator::state::Entry;

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::*;
    use crate::bindings::weir::operator::{flat, log, state};

    pub fn get(key: &[u8]) -> Option<Vec<u8>> {
        state::get(key)
    }
    pub fn get_many(keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
        state::get_many(keys)
    }
    pub fn put(key: &[u8], value: &[u8]) {
        state::put(key, value)
    }
    pub fn put_many(entries: &[Entry]) {
        state::put_many(entries)
    }
    pub fn delete(key: &[u8]) {
        state::delete(key)
    }
    pub fn scan(prefix: &[u8], after: Option<&[u8]>, limit: u32) -> Vec<Entry> {
        state::scan(prefix, after, limit)
    }
    pub fn emit_flat(port: u32, data: &[u8], spans: &[u8]) {
        flat::emit(port, data, spans)
    }
    pub fn log(level: LogLevel, message: &str) {
        log::log(level, message)
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::*;
    use crate::batch::Batch;
    use crate::testing::with_host;

    pub fn get(key: &[u8]) -> Option<Vec<u8>> {
        with_host(|h| {
            h.calls.get += 1;
            h.state.get(key).cloned()
        })
    }
    pub fn get_many(keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
        with_host(|h| {
            h.calls.get_many += 1;
            keys.iter().map(|k| h.state.get(k).cloned()).collect()
        })
    }
    pub fn put(key: &[u8], value: &[u8]) {
        with_host(|h| {
            h.calls.put += 1;
            h.state.insert(key.to_vec(), value.to_vec())
        });
    }
    pub fn put_many(entries: &[Entry]) {
        with_host(|h| {
            h.calls.put_many += 1;
            for e in entries {
                h.state.insert(e.key.clone(), e.value.clone());
            }
        })
    }
    pub fn delete(key: &[u8]) {
        with_host(|h| {
            h.calls.delete += 1;
            h.state.remove(key)
        });
    }
    pub fn scan(prefix: &[u8], after: Option<&[u8]>, limit: u32) -> Vec<Entry> {
        with_host(|h| {
            h.calls.scan += 1;
            h.state
                .range(prefix.to_vec()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .filter(|(k, _)| after.is_none_or(|a| k.as_slice() > a))
                .take(limit as usize)
                .map(|(k, v)| Entry {
                    key: k.clone(),
                    value: v.clone(),
                })
                .collect()
        })
    }
    pub fn emit_flat(port: u32, data: &[u8], spans: &[u8]) {
        // The real host checks the spans too, and traps on a bad one.
        let batch = Batch::new(data, spans).expect("the SDK emits valid spans");
        with_host(|h| {
            h.calls.emit += 1;
            h.emitted
                .extend(batch.iter().map(|r| (port, r.to_record())))
        })
    }
    pub fn log(level: LogLevel, message: &str) {
        with_host(|h| h.logs.push((level, message.to_string())))
    }
}

pub(crate) use imp::*;
