//! The host functions an operator calls, dispatched to the real host (the
//! WIT imports) when compiled to Wasm and to the in-memory host of
//! [`memory`] (which [`crate::testing`] installs) when compiled natively.

pub(crate) mod memory;

/// Severity of a log message sent to the host.
///
/// ```
/// weir_sdk::testing::with_memory_host(|| {
///     weir_sdk::Context::new().log(weir_sdk::LogLevel::Info, "hello");
/// });
/// ```
pub use crate::bindings::weir::operator::log::Level as LogLevel;
use crate::bindings::weir::operator::state::Entry;
use crate::bindings::weir::operator::timers::TimeDomain;

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::*;
    use crate::bindings::weir::operator::{flat, log, state, timers};

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
    pub fn watermark() -> Option<i64> {
        timers::current_watermark()
    }
    pub fn processing_time() -> i64 {
        timers::processing_time()
    }
    pub fn register_timer(key: &[u8], domain: TimeDomain, time: i64) {
        timers::register_timer(key, domain, time)
    }
    pub fn delete_timer(key: &[u8], domain: TimeDomain, time: i64) {
        timers::delete_timer(key, domain, time)
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::*;
    use crate::host::memory::with_host;

    pub fn get(key: &[u8]) -> Option<Vec<u8>> {
        with_host(|h| h.get(key))
    }
    pub fn get_many(keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
        with_host(|h| h.get_many(keys))
    }
    pub fn put(key: &[u8], value: &[u8]) {
        with_host(|h| h.put(key, value))
    }
    pub fn put_many(entries: &[Entry]) {
        with_host(|h| h.put_many(entries))
    }
    pub fn delete(key: &[u8]) {
        with_host(|h| h.delete(key))
    }
    pub fn scan(prefix: &[u8], after: Option<&[u8]>, limit: u32) -> Vec<Entry> {
        with_host(|h| h.scan(prefix, after, limit))
    }
    pub fn emit_flat(port: u32, data: &[u8], spans: &[u8]) {
        with_host(|h| h.emit_flat(port, data, spans))
    }
    pub fn log(level: LogLevel, message: &str) {
        with_host(|h| h.log(level, message))
    }
    pub fn watermark() -> Option<i64> {
        with_host(|h| h.watermark)
    }
    pub fn processing_time() -> i64 {
        with_host(|h| h.processing_time)
    }
    pub fn register_timer(key: &[u8], domain: TimeDomain, time: i64) {
        with_host(|h| h.register_timer(key, domain, time))
    }
    pub fn delete_timer(key: &[u8], domain: TimeDomain, time: i64) {
        with_host(|h| h.delete_timer(key, domain, time))
    }
}

pub(crate) use imp::*;
