//! [`Context`]: what an operator hook can do with the host.

use std::cell::RefCell;
use std::convert::Infallible;

use weir_flat::state::{push_entry, push_key};

use crate::batch::BatchBuf;
use crate::cache;
use crate::host::{self, LogLevel, PutMany};
use crate::record::{Change, Record, RecordRef};
use crate::timer::{self, TimeDomain};
use crate::writer::ValueWriter;
use weir_flat::row::RowWriter;

/// Emitted records buffered per port before they are handed to the host in
/// one `flat.emit` call.
const EMIT_FLUSH_RECORDS: usize = 4096;
/// Emitted bytes (keys and values) buffered per port before they are handed
/// to the host.
const EMIT_FLUSH_BYTES: usize = 1 << 20;

/// Access to host-owned keyed state, emitting, and logging, passed to every
/// [`Operator`](crate::Operator) hook.
///
/// Emitted records are buffered per port in flat form and handed to the host
/// with one `flat.emit` call per port when the hook returns, or earlier when
/// a port's buffer holds 4096 records or 1 MiB. The emit forms, from most to
/// least convenient: [`emit`](Self::emit) (an owned [`Record`]),
/// [`emit_ref`](Self::emit_ref) (forward an input record),
/// [`emit_bytes`](Self::emit_bytes) (borrowed key and value) and
/// [`emit_with`](Self::emit_with) (write the value in place); the last three
/// allocate nothing per record.
///
/// **Timestamps.** [`emit_ref`](Self::emit_ref) forwards the input
/// record's timestamp. The other forms give the emitted record its own
/// timestamp if it has one ([`Record::with_timestamp`]), else the *current
/// timestamp* ([`timestamp`](Self::timestamp)): that of the input record
/// last read from the batch, or the timer's time in `on_timer`. So a record
/// emitted for an input record carries that record's event time.
///
/// **Timers** are host-owned, like state, and fire through
/// [`Operator::on_timer`](crate::Operator::on_timer):
/// [`register_event_timer`](Self::register_event_timer) fires once the
/// [`watermark`](Self::watermark) reaches its time,
/// [`register_processing_timer`](Self::register_processing_timer) once the
/// host's clock does.
///
/// **Raw state and typed state.** The state methods here (`get`, `put`,
/// `scan`, ...) call the host directly. [`MapState`](crate::MapState) and
/// [`ValueState`](crate::ValueState) cache values in the guest, so to keep
/// both views coherent every raw read first writes every typed cache back,
/// and every raw write also empties those caches. Mixing both on a hot path
/// therefore costs a write-back per raw call: prefer one or the other.
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
    /// Output port and its buffered records, in order of first emit.
    outboxes: Vec<(u32, BatchBuf)>,
}

thread_local! {
    /// The emptied emit buffers of the last dropped [`Context`], so that the
    /// next hook does not grow its buffers from nothing again.
    static SPARE_OUTBOXES: RefCell<Vec<(u32, BatchBuf)>> = const { RefCell::new(Vec::new()) };
}

impl Drop for Context {
    fn drop(&mut self) {
        for (_, buf) in &mut self.outboxes {
            buf.clear();
        }
        let outboxes = std::mem::take(&mut self.outboxes);
        SPARE_OUTBOXES.with(|spare| *spare.borrow_mut() = outboxes);
    }
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
        Context {
            outboxes: SPARE_OUTBOXES.with(|spare| std::mem::take(&mut *spare.borrow_mut())),
        }
    }

    /// The value stored under `key`. Like every raw read, it first writes
    /// the typed-state caches back, so it sees their writes.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     assert_eq!(weir_sdk::Context::new().get(b"missing"), None);
    /// });
    /// ```
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        cache::write_back_all();
        host::get(key)
    }

    /// The values stored under each key, in order, in one host call
    /// (`flat-state.get-many`).
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
        cache::write_back_all();
        let mut out = Vec::with_capacity(keys.len());
        let Ok(()) = host::get_many_with(
            |buf| {
                for key in keys {
                    push_key(buf, key);
                }
            },
            |_, value| {
                out.push(value.map(<[u8]>::to_vec));
                Ok::<_, Infallible>(())
            },
        );
        out
    }

    /// Stores `value` under `key`. Like every raw write, it first writes the
    /// typed-state caches back and empties them, so their later reads see it.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     ctx.put(b"k", b"v");
    ///     assert!(ctx.get(b"k").is_some());
    /// });
    /// ```
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        cache::write_back_and_evict_all();
        host::put(key, value)
    }

    /// Stores every `(key, value)` pair, in order, with one host call
    /// (`flat-state.put-many`) per 4 MiB; a later pair for the same key
    /// wins.
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
        cache::write_back_and_evict_all();
        PutMany::run(|writes| {
            for (key, value) in &entries {
                push_entry(writes.buf(), key, Some(value));
                writes.packed();
            }
        });
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
        cache::write_back_and_evict_all();
        host::delete(key)
    }

    /// Up to `limit` entries whose key starts with `prefix`, in key order,
    /// after key `after` when given, in one host call (`flat-state.scan`).
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
        cache::write_back_all();
        let mut out = Vec::new();
        let Ok(_) = host::scan_with(prefix, after, limit, |key, value| {
            out.push((key.to_vec(), value.to_vec()));
            Ok::<_, Infallible>(())
        });
        out
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
        let mut out = Vec::new();
        let Ok(()) = scan_pages(prefix, |key, value| {
            out.push((key.to_vec(), value.to_vec()));
            Ok::<_, Infallible>(())
        });
        out
    }

    /// The buffer of `port`, with its records not yet handed to the host.
    #[inline]
    fn outbox(&mut self, port: u32) -> &mut BatchBuf {
        let i = match self.outboxes.iter().position(|(p, _)| *p == port) {
            Some(i) => i,
            None => {
                self.outboxes.push((port, BatchBuf::new()));
                self.outboxes.len() - 1
            }
        };
        &mut self.outboxes[i].1
    }

    /// Appends one record to the buffer of `port`, handing the buffer to
    /// the host when it is full.
    #[inline]
    fn push(
        &mut self,
        port: u32,
        change: Change,
        key: Option<&[u8]>,
        timestamp: Option<i64>,
        write: impl FnOnce(&mut ValueWriter<'_>),
    ) {
        self.append(port, |buf| {
            buf.push_change_with(change, key, timestamp, write)
        });
    }

    /// Appends to the buffer of `port` with `append`, handing the buffer to
    /// the host when it is full.
    #[inline]
    fn append(&mut self, port: u32, append: impl FnOnce(&mut BatchBuf)) {
        let buf = self.outbox(port);
        append(buf);
        if buf.len() >= EMIT_FLUSH_RECORDS || buf.data_len() >= EMIT_FLUSH_BYTES {
            flush_port(port, buf);
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
        let timestamp = record.timestamp.or_else(timer::current);
        self.push(
            port,
            Change::Insert,
            record.key.as_deref(),
            timestamp,
            |out| out.push_bytes(&record.value),
        );
    }

    /// Emits a copy of `record` (key, value, timestamp and change kind) on
    /// output port `port`: forwards an input record without allocating (a
    /// forwarded delete stays a delete).
    ///
    /// ```
    /// use weir_sdk::{testing::Harness, Record};
    /// # use weir_sdk::*;
    /// # struct NonEmpty;
    /// # impl Operator for NonEmpty {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("non-empty", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(NonEmpty) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { unreachable!() }
    /// fn process_batch(&mut self, ctx: &mut Context, _port: u32, batch: &Batch<'_>) -> Result<()> {
    ///     for rec in batch.iter().filter(|r| !r.value.is_empty()) {
    ///         ctx.emit_ref(0, rec);
    ///     }
    ///     Ok(())
    /// }
    /// # }
    /// let mut h = Harness::<NonEmpty>::open("{}").unwrap();
    /// let out = h.process("in", vec![Record::new(""), Record::new("x").with_timestamp(5)]).unwrap();
    /// assert_eq!(out, [Record::new("x").with_timestamp(5)]);
    /// ```
    #[inline]
    pub fn emit_ref(&mut self, port: u32, record: RecordRef<'_>) {
        self.append(port, |buf| buf.push_ref(record));
    }

    /// Emits a record saying `change` of its row, with `key` and `value`
    /// (and the current timestamp), on output port `port`: how a plugin
    /// writes a changelog (an upsert sink deletes a `delete`'s row).
    ///
    /// ```
    /// use weir_sdk::{testing::Harness, Change, Record};
    /// # use weir_sdk::*;
    /// # struct Forget;
    /// # impl Operator for Forget {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("forget", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Forget) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { unreachable!() }
    /// fn process_batch(&mut self, ctx: &mut Context, _port: u32, batch: &Batch<'_>) -> Result<()> {
    ///     for rec in batch {
    ///         ctx.emit_change(0, Change::Delete, rec.key, rec.value);
    ///     }
    ///     Ok(())
    /// }
    /// # }
    /// let mut h = Harness::<Forget>::open("{}").unwrap();
    /// let out = h.process_changes("in", vec![(Change::Insert, Record::new("x").with_key("k"))]).unwrap();
    /// assert_eq!(out, [(Change::Delete, Record::new("x").with_key("k"))]);
    /// ```
    #[inline]
    pub fn emit_change(&mut self, port: u32, change: Change, key: Option<&[u8]>, value: &[u8]) {
        self.push(port, change, key, timer::current(), |out| {
            out.push_bytes(value)
        });
    }

    /// Emits a record with `key` and `value` (and the current timestamp) on
    /// output port `port`, copying the bytes straight into the emit buffer.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     let line = "ada,login";
    ///     let (user, _) = line.split_once(',').unwrap();
    ///     ctx.emit_bytes(0, Some(user.as_bytes()), line.as_bytes());
    ///     ctx.flush();
    /// });
    /// ```
    #[inline]
    pub fn emit_bytes(&mut self, port: u32, key: Option<&[u8]>, value: &[u8]) {
        self.push(port, Change::Insert, key, timer::current(), |out| {
            out.push_bytes(value)
        });
    }

    /// Emits a record with `key` (and the current timestamp) on output port
    /// `port`, whose value `write` writes straight into the emit buffer:
    /// formatting output costs no allocation per record.
    ///
    /// ```
    /// use weir_sdk::{testing::Harness, Record};
    /// # use weir_sdk::*;
    /// # struct Len;
    /// # impl Operator for Len {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("len", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Len) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { unreachable!() }
    /// fn process_batch(&mut self, ctx: &mut Context, _port: u32, batch: &Batch<'_>) -> Result<()> {
    ///     for rec in batch {
    ///         let text = rec.value_str()?;
    ///         ctx.emit_with(0, Some(rec.value), |out| {
    ///             out.push_str("{\"text\":");
    ///             out.push_json_str(text);
    ///             out.push_str(",\"len\":");
    ///             out.push_decimal(text.len() as u64);
    ///             out.push(b'}');
    ///         });
    ///     }
    ///     Ok(())
    /// }
    /// # }
    /// let mut h = Harness::<Len>::open("{}").unwrap();
    /// let out = h.process("in", vec![Record::new("hi")]).unwrap();
    /// assert_eq!(out, [Record::new(r#"{"text":"hi","len":2}"#).with_key("hi")]);
    /// ```
    #[inline]
    pub fn emit_with(
        &mut self,
        port: u32,
        key: Option<&[u8]>,
        write: impl FnOnce(&mut ValueWriter<'_>),
    ) {
        self.push(port, Change::Insert, key, timer::current(), write);
    }

    /// Emits a record on output port `port` whose value is a row of typed
    /// fields that `write` appends ([`RowWriter`]): no text is formatted in
    /// the plugin; sinks and operators that read the record get it as a
    /// JSON object of the fields in order, encoded by the host on their own
    /// thread. The cheapest way to emit JSON objects of scalar fields.
    ///
    /// ```
    /// use weir_sdk::{testing::Harness, Record};
    /// # use weir_sdk::*;
    /// # struct Len;
    /// # impl Operator for Len {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("len", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Len) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { unreachable!() }
    /// fn process_batch(&mut self, ctx: &mut Context, _port: u32, batch: &Batch<'_>) -> Result<()> {
    ///     for rec in batch.iter() {
    ///         let text = rec.value_str()?;
    ///         ctx.emit_row(0, Some(text.as_bytes()), |row| {
    ///             row.str("text", text).u64("len", text.len() as u64);
    ///         });
    ///     }
    ///     Ok(())
    /// }
    /// # }
    /// let mut h = Harness::<Len>::open("{}").unwrap();
    /// let out = h.process("in", vec![Record::new("hi")]).unwrap();
    /// assert_eq!(out, [Record::new(r#"{"text":"hi","len":2}"#).with_key("hi")]);
    /// ```
    #[inline]
    pub fn emit_row(
        &mut self,
        port: u32,
        key: Option<&[u8]>,
        write: impl FnOnce(&mut RowWriter<'_>),
    ) {
        let timestamp = timer::current();
        self.append(port, |buf| buf.push_row_with(key, timestamp, write));
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

    /// Hands buffered records to the host now, one `flat.emit` call per
    /// port. The SDK calls it when a hook returns; call it yourself only in
    /// tests that build a [`Context`].
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     ctx.emit(0, weir_sdk::Record::new("a"));
    ///     ctx.flush();
    /// });
    /// ```
    pub fn flush(&mut self) {
        for (port, buf) in &mut self.outboxes {
            flush_port(*port, buf);
        }
    }

    /// Refuses record `index` of the batch being processed (its position
    /// in the batch `process` or `process_batch` got) as invalid input,
    /// because of `error`, while the rest of the batch takes effect: the
    /// host handles that one record as the operator's `on_error` says
    /// (the attempt fails naming it, the default; or it is skipped, or
    /// sent to a dead-letter sink). Refuse a record before writing state
    /// or emitting for it: whatever the call did for it stands. Only in
    /// `process` and `process_batch`; another hook, an index past the
    /// batch or a record refused twice makes the host trap the call.
    /// [`each`](Self::each) refuses for you the records a closure returns
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for.
    pub fn reject(&mut self, index: usize, error: &str) {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        host::reject(index, error)
    }

    /// Calls `f` for each of `records` in order (a [`Batch`](crate::Batch)
    /// or the records `process` got); a record `f` returns
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for is refused
    /// ([`reject`](Self::reject)) and the others go on; any other error
    /// ends the call with it.
    ///
    /// ```
    /// use weir_sdk::*;
    ///
    /// /// Sums the numbers of its input, refusing what is not a number.
    /// struct Sum(i64);
    /// impl Operator for Sum {
    ///     fn describe() -> OperatorInfo { OperatorInfo::new("sum", "1.0.0").input("in").output("out") }
    ///     fn open(_: &OpenContext) -> Result<Self> { Ok(Sum(0)) }
    ///     fn process(&mut self, ctx: &mut Context, _: u32, batch: Vec<Record>) -> Result<()> {
    ///         ctx.each(&batch, |ctx, rec| {
    ///             let text = rec.value_str()?;
    ///             let n: i64 = text.trim().parse().map_err(|e| {
    ///                 Error::InvalidInput(format!("{text:?} is not a number: {e}"))
    ///             })?;
    ///             self.0 += n;
    ///             ctx.emit(0, Record::new(self.0.to_string()));
    ///             Ok(())
    ///         })
    ///     }
    /// }
    ///
    /// let mut h = testing::Harness::<Sum>::open("{}").unwrap();
    /// let out = h.process("in", vec![Record::new("1"), Record::new("x"), Record::new("2")]).unwrap();
    /// assert_eq!(out, [Record::new("1"), Record::new("3")]);
    /// let refused = h.take_rejected();
    /// assert_eq!(refused.len(), 1);
    /// assert_eq!(refused[0].0, 1);
    /// ```
    pub fn each<R>(
        &mut self,
        records: impl IntoIterator<Item = R>,
        mut f: impl FnMut(&mut Context, R) -> crate::Result<()>,
    ) -> crate::Result<()> {
        for (i, record) in records.into_iter().enumerate() {
            match f(self, record) {
                Err(crate::Error::InvalidInput(why)) => self.reject(i, &why),
                other => other?,
            }
        }
        Ok(())
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

    /// The instance's watermark, milliseconds since the Unix epoch: no
    /// record with a timestamp at or below it is expected any more (one
    /// that comes is late). `None` before the first watermark; `i64::MAX`
    /// after the end of input.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     assert_eq!(weir_sdk::Context::new().watermark(), None);
    /// });
    /// ```
    pub fn watermark(&self) -> Option<i64> {
        host::watermark()
    }

    /// The host's wall clock, milliseconds since the Unix epoch.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     assert_eq!(weir_sdk::Context::new().processing_time(), 0);
    /// });
    /// ```
    pub fn processing_time(&self) -> i64 {
        host::processing_time()
    }

    /// The current timestamp: that of the input record last read from the
    /// batch, or the timer's time in `on_timer`; what records emitted
    /// without a timestamp get.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let buf = weir_sdk::BatchBuf::from_records(&[weir_sdk::Record::new("a").with_timestamp(7)]);
    ///     for _ in &buf.as_batch() {}
    ///     assert_eq!(weir_sdk::Context::new().timestamp(), Some(7));
    /// });
    /// ```
    pub fn timestamp(&self) -> Option<i64> {
        timer::current()
    }

    /// Registers a timer for `key` at `time` in `domain`, once: registering
    /// the same timer again does nothing. It fires through
    /// [`Operator::on_timer`](crate::Operator::on_timer). Use a record key
    /// (the timer lives on the instance that owns the key).
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     ctx.register_timer(b"k", weir_sdk::TimeDomain::EventTime, 10);
    ///     ctx.delete_timer(b"k", weir_sdk::TimeDomain::EventTime, 10);
    /// });
    /// ```
    pub fn register_timer(&mut self, key: &[u8], domain: TimeDomain, time: i64) {
        host::register_timer(key, domain, time)
    }

    /// Deletes the timer for `key` at `time` in `domain`, if there is one.
    pub fn delete_timer(&mut self, key: &[u8], domain: TimeDomain, time: i64) {
        host::delete_timer(key, domain, time)
    }

    /// Registers an event-time timer: it fires once the watermark reaches
    /// `time`.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     weir_sdk::Context::new().register_event_timer(b"k", 10);
    /// });
    /// ```
    pub fn register_event_timer(&mut self, key: &[u8], time: i64) {
        self.register_timer(key, TimeDomain::EventTime, time)
    }

    /// Registers a processing-time timer: it fires once the host's clock
    /// reaches `time`.
    pub fn register_processing_timer(&mut self, key: &[u8], time: i64) {
        self.register_timer(key, TimeDomain::ProcessingTime, time)
    }
}

/// Hands the records of `buf` to the host, if any, and empties it.
fn flush_port(port: u32, buf: &mut BatchBuf) {
    if !buf.is_empty() {
        let (data, spans) = buf.parts();
        host::emit_flat(port, data, spans);
        buf.clear();
    }
}

/// Entries of host state one page of [`scan_pages`] reads: the most it
/// holds at once.
const SCAN_PAGE: u32 = 1000;

/// Calls `each` with every entry whose key starts with `prefix`, in key
/// order, a page at a time, borrowed from the page's reply; stops at the
/// first error. Every typed-state cache is written back before each page
/// (as before any raw read), so a page holds every write made so far,
/// `each`'s included.
pub(crate) fn scan_pages<E>(
    prefix: &[u8],
    mut each: impl FnMut(&[u8], &[u8]) -> Result<(), E>,
) -> Result<(), E> {
    // The last key of the page before (`None` before the first page; the
    // empty key is a key), and of this page.
    let mut after: Option<Vec<u8>> = None;
    let mut last = Vec::new();
    loop {
        cache::write_back_all();
        let n = host::scan_with(prefix, after.as_deref(), SCAN_PAGE, |key, value| {
            last.clear();
            last.extend_from_slice(key);
            each(key, value)
        })?;
        if n < SCAN_PAGE as usize {
            return Ok(());
        }
        let mut page_last = after.take().unwrap_or_default();
        std::mem::swap(&mut page_last, &mut last);
        after = Some(page_last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::memory::with_host;

    /// Raw batched state calls cross the boundary through `flat-state`,
    /// one call each, and see what typed state wrote.
    #[test]
    fn raw_batched_calls_use_flat_state() {
        crate::testing::with_memory_host(|| {
            let mut ctx = Context::new();
            ctx.put_many(vec![
                (b"k1".to_vec(), b"1".to_vec()),
                (b"k2".to_vec(), b"".to_vec()),
            ]);
            assert_eq!(
                ctx.get_many(&[b"k2".to_vec(), b"k3".to_vec(), b"k1".to_vec()]),
                [Some(Vec::new()), None, Some(b"1".to_vec())]
            );
            assert_eq!(
                ctx.scan(b"k", Some(b"k1"), 10),
                [(b"k2".to_vec(), Vec::new())]
            );
            let m = crate::MapState::<String, u64>::new("m");
            m.put(&mut ctx, &"x".to_string(), &1);
            assert_eq!(m.entries(&ctx).unwrap(), [("x".to_string(), 1)]);
            // The empty key is a key: paging never skips it.
            ctx.put(b"", b"e");
            assert_eq!(ctx.scan_all(b"")[0], (Vec::new(), b"e".to_vec()));
            let calls = with_host(|h| h.calls.clone());
            // put_many, and the write-back of `m` before `entries`.
            assert_eq!(calls.flat_put_many, 2);
            assert_eq!((calls.flat_get_many, calls.flat_scan), (1, 3));
            assert_eq!((calls.get_many, calls.put_many, calls.scan), (0, 0, 0));
        });
    }

    #[test]
    fn scan_all_pages_through_more_than_a_page() {
        crate::testing::with_memory_host(|| {
            let mut ctx = Context::new();
            let entries = (0..2001u32)
                .map(|i| (format!("k{i:05}").into_bytes(), i.to_le_bytes().to_vec()))
                .collect::<Vec<_>>();
            ctx.put_many(entries.clone());
            assert_eq!(ctx.scan_all(b"k"), entries);
            assert_eq!(with_host(|h| h.calls.flat_scan), 3);
        });
    }
}
