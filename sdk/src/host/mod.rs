//! The host functions an operator calls, dispatched to the real host (the
//! WIT imports) when compiled to Wasm and to the in-memory host of
//! [`memory`] (which [`crate::testing`] installs) when compiled natively.
//!
//! State is read and written in batches through `flat-state`, packed
//! (`weir_flat::state`): [`get_many_with`], [`PutMany`] and [`scan_with`]
//! pack into one reusable buffer and read replies in place. Single keys use
//! `state.get`, `state.put` and `state.delete`.

pub(crate) mod memory;

use std::cell::RefCell;

use weir_flat::state::{Entries, Keys, Values};

/// The limits `flat-state.limits` reports (see `crate::testing::MemoryHost::limits`).
pub use crate::bindings::weir::operator::flat_state::StateLimits;
/// Severity of a log message sent to the host.
///
/// ```
/// weir_sdk::testing::with_memory_host(|| {
///     weir_sdk::Context::new().log(weir_sdk::LogLevel::Info, "hello");
/// });
/// ```
pub use crate::bindings::weir::operator::log::Level as LogLevel;
use crate::bindings::weir::operator::timers::TimeDomain;

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::*;
    use crate::bindings::weir::operator::{flat, flat_state, log, reject as refuse, state, timers};

    pub fn get(key: &[u8]) -> Option<Vec<u8>> {
        state::get(key)
    }
    pub fn put(key: &[u8], value: &[u8]) {
        state::put(key, value)
    }
    pub fn delete(key: &[u8]) {
        state::delete(key)
    }
    pub fn flat_get_many(keys: &[u8]) -> Vec<u8> {
        flat_state::get_many(keys)
    }
    pub fn flat_put_many(entries: &[u8]) {
        flat_state::put_many(entries)
    }
    pub fn flat_scan(prefix: &[u8], after: Option<&[u8]>, limit: u32) -> Vec<u8> {
        flat_state::scan(prefix, after, limit)
    }
    pub fn limits() -> StateLimits {
        flat_state::limits()
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
    pub fn reject(index: u32, error: &str) {
        refuse::reject(index, error)
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::*;
    use crate::host::memory::with_host;

    pub fn get(key: &[u8]) -> Option<Vec<u8>> {
        with_host(|h| h.get(key))
    }
    pub fn put(key: &[u8], value: &[u8]) {
        with_host(|h| h.put(key, value))
    }
    pub fn delete(key: &[u8]) {
        with_host(|h| h.delete(key))
    }
    pub fn flat_get_many(keys: &[u8]) -> Vec<u8> {
        with_host(|h| h.flat_get_many(keys))
    }
    pub fn flat_put_many(entries: &[u8]) {
        with_host(|h| h.flat_put_many(entries))
    }
    pub fn flat_scan(prefix: &[u8], after: Option<&[u8]>, limit: u32) -> Vec<u8> {
        with_host(|h| h.flat_scan(prefix, after, limit))
    }
    pub fn limits() -> StateLimits {
        with_host(|h| h.limits())
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
    pub fn reject(index: u32, error: &str) {
        with_host(|h| h.reject(index, error))
    }
}

pub(crate) use imp::{
    delete, delete_timer, emit_flat, get, limits, log, processing_time, put, register_timer,
    reject, watermark,
};

/// Packed entries handed to the host in one `put-many` once they reach
/// this many bytes, so that writing back a large cache never holds more
/// than about this much packed in guest memory.
pub(crate) const PUT_MANY_CHUNK: usize = 4 << 20;

/// Capacity of the packing buffer kept between calls; a larger one (after
/// a large write-back) is freed.
const KEPT_BUFFER: usize = 1 << 20;

thread_local! {
    /// The packing buffer of this instance, empty between uses.
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with the reusable packing buffer, empty. Reentrant: a nested
/// use gets a buffer of its own.
pub(crate) fn with_buffer<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    let mut buf = BUFFER.with(|b| std::mem::take(&mut *b.borrow_mut()));
    let out = f(&mut buf);
    buf.clear();
    if buf.capacity() <= KEPT_BUFFER {
        BUFFER.with(|b| *b.borrow_mut() = buf);
    }
    out
}

/// A reply of the host that does not parse: a bug of the host.
fn host_bug(function: &str, e: impl std::fmt::Display) -> ! {
    panic!("host bug: flat-state.{function} replied with a malformed buffer: {e}")
}

/// Looks up, in one `flat-state.get-many`, the keys that `pack` appends to
/// a packed keys buffer (`weir_flat::state::push_key_with`); calls `each`
/// with each key and its value (`None`: absent), in order, stopping at the
/// first error. Nothing is called for no keys.
pub(crate) fn get_many_with<E>(
    pack: impl FnOnce(&mut Vec<u8>),
    mut each: impl FnMut(&[u8], Option<&[u8]>) -> Result<(), E>,
) -> Result<(), E> {
    with_buffer(|buf| {
        pack(buf);
        if buf.is_empty() {
            return Ok(());
        }
        let keys = Keys::parse(buf).expect("the SDK packs whole keys");
        let reply = imp::flat_get_many(buf);
        let values = Values::parse(&reply).unwrap_or_else(|e| host_bug("get-many", e));
        if values.len() != keys.len() {
            host_bug(
                "get-many",
                format_args!("{} values for {} keys", values.len(), keys.len()),
            );
        }
        for (key, value) in keys.zip(values) {
            each(key, value)?;
        }
        Ok(())
    })
}

/// Up to `limit` entries whose key starts with `prefix`, after `after`,
/// with one `flat-state.scan`: calls `each` with each key and value, in
/// key order, stopping at the first error; returns how many there were.
pub(crate) fn scan_with<E>(
    prefix: &[u8],
    after: Option<&[u8]>,
    limit: u32,
    mut each: impl FnMut(&[u8], &[u8]) -> Result<(), E>,
) -> Result<usize, E> {
    let reply = imp::flat_scan(prefix, after, limit);
    let entries = Entries::parse(&reply).unwrap_or_else(|e| host_bug("scan", e));
    let n = entries.len();
    for (key, value) in entries {
        let value = value.unwrap_or_else(|| host_bug("scan", "an absent value"));
        each(key, value)?;
    }
    Ok(n)
}

/// Writes to host state, packed into the reusable buffer and handed over
/// with `flat-state.put-many`: once [`PUT_MANY_CHUNK`] bytes are packed,
/// and when the closure of [`run`](Self::run) returns.
///
/// Pack with `weir_flat::state::push_entry_with` (or `push_deletion_with`)
/// into [`buf`](Self::buf), then call [`packed`](Self::packed).
pub(crate) struct PutMany {
    buf: Vec<u8>,
}

impl PutMany {
    /// Runs `f` with an empty `PutMany`, then hands over what is left.
    pub(crate) fn run<R>(f: impl FnOnce(&mut PutMany) -> R) -> R {
        with_buffer(|buf| {
            let mut writes = PutMany {
                buf: std::mem::take(buf),
            };
            let out = f(&mut writes);
            writes.flush();
            *buf = writes.buf;
            out
        })
    }

    /// The packed entries not handed over yet.
    pub(crate) fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Called after each packed entry: hands the buffer over when full.
    pub(crate) fn packed(&mut self) {
        if self.buf.len() >= PUT_MANY_CHUNK {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if !self.buf.is_empty() {
            imp::flat_put_many(&self.buf);
            self.buf.clear();
        }
    }
}
