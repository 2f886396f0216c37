//! The host functions an operator calls, dispatched to the real host when
//! compiled to Wasm and to the in-memory test host ([`crate::testing`]) when
//! compiled natively.

use crate::Record;
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
    use crate::bindings::weir::operator::{emit, log, state};

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
    pub fn emit_batch(port: u32, records: &[Record]) {
        emit::emit_batch(port, records)
    }
    pub fn log(level: LogLevel, message: &str) {
        log::log(level, message)
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::*;
    use crate::testing::with_host;

    pub fn get(key: &[u8]) -> Option<Vec<u8>> {
        with_host(|h| h.state.get(key).cloned())
    }
    pub fn get_many(keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
        with_host(|h| keys.iter().map(|k| h.state.get(k).cloned()).collect())
    }
    pub fn put(key: &[u8], value: &[u8]) {
        with_host(|h| h.state.insert(key.to_vec(), value.to_vec()));
    }
    pub fn put_many(entries: &[Entry]) {
        with_host(|h| {
            for e in entries {
                h.state.insert(e.key.clone(), e.value.clone());
            }
        })
    }
    pub fn delete(key: &[u8]) {
        with_host(|h| h.state.remove(key));
    }
    pub fn scan(prefix: &[u8], after: Option<&[u8]>, limit: u32) -> Vec<Entry> {
        with_host(|h| {
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
    pub fn emit_batch(port: u32, records: &[Record]) {
        with_host(|h| h.emitted.extend(records.iter().map(|r| (port, r.clone()))))
    }
    pub fn log(level: LogLevel, message: &str) {
        with_host(|h| h.logs.push((level, message.to_string())))
    }
}

pub(crate) use imp::*;
