//! [`Context`]: what an operator hook can do with the host.

use crate::Record;
use crate::bindings::weir::operator::state::Entry;
use crate::host::{self, LogLevel};

/// Records buffered per port before they are handed to the host in one call.
const EMIT_FLUSH_THRESHOLD: usize = 1024;

/// Access to host-owned keyed state, emitting, and logging, passed to every
/// [`Operator`](crate::Operator) hook.
///
/// Emitted records are buffered and handed to the host in batches (one call
/// per port at the end of the hook, or every 1024 records), never one call per
/// record.
///
/// ```
/// use weir_sdk::{testing::with_memory_host, Context, Record};
/// with_memory_host(|| {
///     let mut ctx = Context::new();
///     ctx.put(b"k", b"v");
///     assert_eq!(ctx.get(b"k").as_deref(), Some(&b"v"[..]));
///     ctx.emit(0, Record::new("out"));
/// });
/// ```
#[derive(Debug, Default)]
pub struct Context {
    pending: Vec<Vec<Record>>,
}

impl Context {
    /// A context with nothing pending. The SDK creates one per hook call;
    /// create your own only in tests, inside
    /// [`testing::with_memory_host`](crate::testing::with_memory_host).
    ///
    /// ```
    /// let ctx = weir_sdk::Context::new();
    /// # drop(ctx);
    /// ```
    pub fn new() -> Self {
        Context::default()
    }

    /// The value stored under `key`.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     assert_eq!(weir_sdk::Context::new().get(b"missing"), None);
    /// });
    /// ```
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        host::get(key)
    }

    /// The values stored under each key, in order, in one host call.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     ctx.put(b"a", b"1");
    ///     assert_eq!(ctx.get_many(&[b"a".to_vec(), b"b".to_vec()]), vec![Some(b"1".to_vec()), None]);
    /// });
    /// ```
    pub fn get_many(&self, keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
        if keys.is_empty() {
            return Vec::new();
        }
        host::get_many(keys)
    }

    /// Stores `value` under `key`.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     ctx.put(b"k", b"v");
    ///     assert!(ctx.get(b"k").is_some());
    /// });
    /// ```
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        host::put(key, value)
    }

    /// Stores every `(key, value)` pair in one host call; a later pair for the
    /// same key wins.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     ctx.put_many(vec![(b"a".to_vec(), b"1".to_vec()), (b"a".to_vec(), b"2".to_vec())]);
    ///     assert_eq!(ctx.get(b"a").unwrap(), b"2");
    /// });
    /// ```
    pub fn put_many(&mut self, entries: Vec<(Vec<u8>, Vec<u8>)>) {
        if entries.is_empty() {
            return;
        }
        let entries: Vec<Entry> = entries
            .into_iter()
            .map(|(key, value)| Entry { key, value })
            .collect();
        host::put_many(&entries)
    }

    /// Removes `key`.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     ctx.put(b"k", b"v");
    ///     ctx.delete(b"k");
    ///     assert!(ctx.get(b"k").is_none());
    /// });
    /// ```
    pub fn delete(&mut self, key: &[u8]) {
        host::delete(key)
    }

    /// Up to `limit` entries whose key starts with `prefix`, in key order,
    /// after key `after` when given.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     for k in ["a/1", "a/2", "b/1"] { ctx.put(k.as_bytes(), b""); }
    ///     let page = ctx.scan(b"a/", None, 10);
    ///     assert_eq!(page.len(), 2);
    ///     assert_eq!(ctx.scan(b"a/", Some(b"a/1"), 10)[0].0, b"a/2");
    /// });
    /// ```
    pub fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limit: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
        host::scan(prefix, after, limit)
            .into_iter()
            .map(|e| (e.key, e.value))
            .collect()
    }

    /// Every entry whose key starts with `prefix`, fetched page by page.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     for i in 0..2500u32 { ctx.put(format!("k{i:05}").as_bytes(), b""); }
    ///     assert_eq!(ctx.scan_all(b"k").len(), 2500);
    /// });
    /// ```
    pub fn scan_all(&self, prefix: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        const PAGE: u32 = 1000;
        let mut out = Vec::new();
        loop {
            let after = out.last().map(|(k, _): &(Vec<u8>, Vec<u8>)| k.clone());
            let page = self.scan(prefix, after.as_deref(), PAGE);
            let done = page.len() < PAGE as usize;
            out.extend(page);
            if done {
                return out;
            }
        }
    }

    /// Emits `record` on output port `port`.
    ///
    /// ```
    /// use weir_sdk::{testing::Harness, Record};
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
    ///     for r in batch { ctx.emit(0, r); }
    ///     Ok(())
    /// }
    /// # }
    /// let mut h = Harness::<Echo>::open("{}").unwrap();
    /// assert_eq!(h.process("in", vec![Record::new("x")]).unwrap().len(), 1);
    /// ```
    pub fn emit(&mut self, port: u32, record: Record) {
        let port_idx = port as usize;
        if self.pending.len() <= port_idx {
            self.pending.resize_with(port_idx + 1, Vec::new);
        }
        let buf = &mut self.pending[port_idx];
        buf.push(record);
        if buf.len() >= EMIT_FLUSH_THRESHOLD {
            host::emit_batch(port, buf);
            buf.clear();
        }
    }

    /// Emits every record on output port `port`, in order.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     ctx.emit_all(0, vec![weir_sdk::Record::new("a"), weir_sdk::Record::new("b")]);
    ///     ctx.flush();
    /// });
    /// ```
    pub fn emit_all(&mut self, port: u32, records: impl IntoIterator<Item = Record>) {
        for r in records {
            self.emit(port, r);
        }
    }

    /// Hands buffered records to the host now. The SDK calls it when a hook
    /// returns; call it yourself only in tests that build a [`Context`].
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     ctx.emit(0, weir_sdk::Record::new("a"));
    ///     ctx.flush();
    /// });
    /// ```
    pub fn flush(&mut self) {
        for (port, buf) in self.pending.iter_mut().enumerate() {
            if !buf.is_empty() {
                host::emit_batch(port as u32, buf);
                buf.clear();
            }
        }
    }

    /// Logs `message` through the host, tagged with the operator's id.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     weir_sdk::Context::new().log(weir_sdk::LogLevel::Warn, "odd record");
    /// });
    /// ```
    pub fn log(&self, level: LogLevel, message: &str) {
        host::log(level, message)
    }
}
