//! Unit-test operators natively, with plain `cargo test` and no Wasm build,
//! against the in-memory host ([`MemoryHost`]) for state and emit: the
//! [`Harness`] drives one operator instance through the same hook code as
//! the component's exports.
//!
//! ```
//! use weir_sdk::{testing::Harness, Context, OpenContext, Operator, OperatorInfo, Record, Result};
//!
//! struct Count;
//! impl Operator for Count {
//!     fn describe() -> OperatorInfo { OperatorInfo::new("count", "1.0.0").input("in").output("out") }
//!     fn open(_: &OpenContext) -> Result<Self> { Ok(Count) }
//!     fn process(&mut self, ctx: &mut Context, _: u32, batch: Vec<Record>) -> Result<()> {
//!         let n = batch.len() as u64 + ctx.get(b"n").map(|b| b[0] as u64).unwrap_or(0);
//!         ctx.put(b"n", &[n as u8]);
//!         ctx.emit(0, Record::new(n.to_string()));
//!         Ok(())
//!     }
//! }
//!
//! let mut h = Harness::<Count>::open("{}").unwrap();
//! h.process("in", vec![Record::new("a"), Record::new("b")]).unwrap();
//! let out = h.process("in", vec![Record::new("c")]).unwrap();
//! assert_eq!(out[0].value_str().unwrap(), "3");
//! assert_eq!(h.state()[&b"n".to_vec()], vec![3]);
//! ```

use std::collections::BTreeMap;

use crate::adapter::hooks;
use crate::batch::BatchBuf;
pub use crate::cache::CacheUsage;
use crate::cache::{Registry, swap_registry};
use crate::error::{Error, Result};
use crate::host::LogLevel;
pub use crate::host::StateLimits;
use crate::host::memory::replace_host;
pub use crate::host::memory::{HostCalls, MemoryHost};
use crate::info::{OpenContext, OperatorInfo};
use crate::operator::Operator;
use crate::record::{Change, Record};
use crate::timer::TimeDomain;

/// Runs `f` with `host` and the typed-state caches `registry` of one
/// operator instance installed on this thread, and gives them back.
fn install<R>(host: &mut MemoryHost, registry: &mut Registry, f: impl FnOnce() -> R) -> R {
    let previous = replace_host(Some(std::mem::take(host)));
    swap_registry(registry);
    let out = f();
    swap_registry(registry);
    *host = replace_host(previous).expect("the installed host is still there");
    out
}

/// Each record's value as text, for comparing a hook's output.
///
/// # Panics
/// When a value is not UTF-8: a test failure.
///
/// ```
/// use weir_sdk::{Record, testing::values};
/// assert_eq!(values(&[Record::new("a"), Record::new("b")]), ["a", "b"]);
/// ```
pub fn values(records: &[Record]) -> Vec<String> {
    let text = |r: &Record| r.value_str().unwrap_or_else(|e| panic!("{e}")).to_owned();
    records.iter().map(text).collect()
}

/// Runs `f` with a fresh in-memory host installed on this thread, so that a
/// [`Context`](crate::Context) built inside it works.
///
/// ```
/// let v = weir_sdk::testing::with_memory_host(|| {
///     let mut ctx = weir_sdk::Context::new();
///     ctx.put(b"k", b"v");
///     ctx.get(b"k")
/// });
/// assert_eq!(v.unwrap(), b"v");
/// ```
pub fn with_memory_host<R>(f: impl FnOnce() -> R) -> R {
    install(&mut MemoryHost::default(), &mut Registry::default(), f)
}

/// Drives one operator instance through its lifecycle against an in-memory
/// host, as the real host would, through the same code as the component's
/// exports: batches reach [`Operator::process_batch`] in flat form, emitted
/// records are collected from flat emits, and the caches of
/// [`MapState`](crate::MapState) and [`ValueState`](crate::ValueState) are
/// written back to [`state`](Harness::state) when `on_checkpoint` and
/// `finish` return (and when full), not before.
///
/// ```
/// # use weir_sdk::*;
/// # struct Echo;
/// # impl Operator for Echo {
/// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
/// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
/// # fn process(&mut self, ctx: &mut Context, _: u32, b: Vec<Record>) -> Result<()> { ctx.emit_all(0, b); Ok(()) }
/// # }
/// let mut h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
/// assert_eq!(h.process("in", vec![Record::new("x")]).unwrap().len(), 1);
/// h.finish().unwrap();
/// ```
pub struct Harness<O: Operator> {
    op: O,
    open_ctx: OpenContext,
    info: OperatorInfo,
    host: MemoryHost,
    /// The typed-state caches of this instance (its guest memory).
    registry: Registry,
}

impl<O: Operator> Harness<O> {
    /// Opens an instance with the JSON configuration `config`.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(ctx: &OpenContext) -> Result<Self> { ctx.config_as::<serde_json::Value>()?; Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// # }
    /// assert!(weir_sdk::testing::Harness::<Echo>::open("not json").is_err());
    /// ```
    pub fn open(config: &str) -> Result<Self> {
        Self::open_with(OpenContext::with_config(config))
    }

    /// Opens an instance with a full [`OpenContext`].
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// # }
    /// let ctx = OpenContext { operator_id: "e".into(), instance: 1, parallelism: 2, config: "{}".into() };
    /// weir_sdk::testing::Harness::<Echo>::open_with(ctx).unwrap();
    /// ```
    pub fn open_with(ctx: OpenContext) -> Result<Self> {
        let mut host = MemoryHost::default();
        let mut registry = Registry::default();
        let op = install(&mut host, &mut registry, || O::open(&ctx))?;
        Ok(Harness {
            op,
            open_ctx: ctx,
            info: O::describe(),
            host,
            registry,
        })
    }

    /// Runs hook `f` on the operator with this instance installed; returns
    /// what it emitted.
    fn call(&mut self, f: impl FnOnce(&mut O) -> Result<()>) -> Result<Vec<(u32, Record)>> {
        let op = &mut self.op;
        install(&mut self.host, &mut self.registry, || f(op))?;
        self.host.emitted_changes.clear();
        Ok(std::mem::take(&mut self.host.emitted))
    }

    /// Feeds the records of `batch`, each saying its change kind, to the
    /// input port called `port` (through [`Operator::process_batch`], as
    /// the host does for a plugin of world `operator-changes`) and returns
    /// the records emitted during the call, on any output port, with
    /// their change kinds.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { unreachable!() }
    /// # fn process_batch(&mut self, ctx: &mut Context, _: u32, b: &Batch<'_>) -> Result<()> { b.iter().for_each(|r| ctx.emit_ref(0, r)); Ok(()) }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// let gone = (Change::Delete, Record::new("x").with_key("k"));
    /// assert_eq!(h.process_changes("in", vec![gone.clone()]).unwrap(), [gone]);
    /// ```
    pub fn process_changes(
        &mut self,
        port: &str,
        batch: Vec<(Change, Record)>,
    ) -> Result<Vec<(Change, Record)>> {
        let port = self.input_port(port)?;
        let mut flat = BatchBuf::new();
        for (change, r) in &batch {
            flat.push_change(*change, r.key.as_deref(), &r.value, r.timestamp);
        }
        let (data, spans) = flat.parts();
        self.host.default_timestamp = batch.iter().filter_map(|(_, r)| r.timestamp).max();
        let op = &mut self.op;
        let out = install(&mut self.host, &mut self.registry, || {
            hooks::process_flat(op, port, data, spans)
        });
        self.host.default_timestamp = None;
        let changes = std::mem::take(&mut self.host.emitted_changes);
        let emitted = std::mem::take(&mut self.host.emitted);
        out?;
        Ok(changes
            .into_iter()
            .zip(emitted.into_iter().map(|(_, r)| r))
            .collect())
    }

    /// The number of the input port called `port`, or an error naming the
    /// ports the operator has.
    fn input_port(&self, port: &str) -> Result<u32> {
        self.info.input_port(port).ok_or_else(|| {
            Error::Other(format!(
                "operator `{}` has no input port `{port}` (it has {:?})",
                self.info.name, self.info.inputs
            ))
        })
    }

    /// Feeds `batch`, in flat form, to the input port called `port` (through
    /// [`Operator::process_batch`]) and returns the records emitted during
    /// the call, on any output port.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, ctx: &mut Context, _: u32, b: Vec<Record>) -> Result<()> { ctx.emit_all(0, b); Ok(()) }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// assert!(h.process("nope", vec![]).is_err());
    /// ```
    pub fn process(&mut self, port: &str, batch: Vec<Record>) -> Result<Vec<Record>> {
        Ok(self
            .process_ports(port, batch)?
            .into_iter()
            .map(|(_, r)| r)
            .collect())
    }

    /// The records the operator refused ([`Context::reject`](crate::Context::reject)) since the
    /// last call of this, each one's index in the batch of its call and
    /// the message.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Picky;
    /// # impl Operator for Picky {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("picky", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Picky) }
    /// # fn process(&mut self, ctx: &mut Context, _: u32, b: Vec<Record>) -> Result<()> { ctx.reject(b.len() - 1, "the last"); Ok(()) }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Picky>::open("{}").unwrap();
    /// h.process("in", vec![Record::new("a"), Record::new("b")]).unwrap();
    /// assert_eq!(h.take_rejected(), [(1, "the last".to_owned())]);
    /// ```
    pub fn take_rejected(&mut self) -> Vec<(usize, String)> {
        let rejected = std::mem::take(&mut self.host.rejected);
        (rejected.into_iter())
            .map(|(i, why)| (i as usize, why))
            .collect()
    }

    /// Like [`process`](Self::process), with each record's output port number.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, ctx: &mut Context, _: u32, b: Vec<Record>) -> Result<()> { ctx.emit_all(0, b); Ok(()) }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// assert_eq!(h.process_ports("in", vec![Record::new("x")]).unwrap()[0].0, 0);
    /// ```
    pub fn process_ports(&mut self, port: &str, batch: Vec<Record>) -> Result<Vec<(u32, Record)>> {
        let port = self.input_port(port)?;
        self.feed(port, &BatchBuf::from_records(&batch))
    }

    /// Calls `process_flat` with `flat` on input `port`, as the host does:
    /// the largest timestamp of its records is the current one.
    fn feed(&mut self, port: u32, flat: &BatchBuf) -> Result<Vec<(u32, Record)>> {
        let (data, spans) = flat.parts();
        let latest = flat.as_batch().iter().filter_map(|r| r.timestamp).max();
        self.host.default_timestamp = latest;
        let out = self.call(|op| hooks::process_flat(op, port, data, spans));
        self.host.default_timestamp = None;
        out
    }

    /// Feeds a batch in flat form, rows as built with
    /// [`BatchBuf::push_row_with`], to the input port called `port`, as the
    /// host does: rows checked and kept for an operator that reads rows
    /// ([`Operator::READS_ROWS`]), written as JSON text for the others;
    /// returns the records emitted on any output port (rows as JSON).
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Kind;
    /// # impl Operator for Kind {
    /// # const READS_ROWS: bool = true;
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("kind", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Kind) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { unreachable!() }
    /// # fn process_batch(&mut self, ctx: &mut Context, _: u32, b: &Batch<'_>) -> Result<()> {
    /// #     for r in b { ctx.emit(0, Record::new(if r.row().is_some() { "row" } else { "text" })); }
    /// #     Ok(())
    /// # }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Kind>::open("{}").unwrap();
    /// let mut batch = BatchBuf::new();
    /// batch.push_row_with(None, None, |row| { row.u64("n", 1); });
    /// batch.push(None, br#"{"n":1}"#, None);
    /// let out = h.process_flat("in", &batch).unwrap();
    /// assert_eq!(out, [Record::new("row"), Record::new("text")]);
    /// ```
    pub fn process_flat(&mut self, port: &str, batch: &BatchBuf) -> Result<Vec<Record>> {
        let port = self.input_port(port)?;
        let mut given = BatchBuf::new();
        for r in batch.as_batch().iter() {
            if r.row().is_some() {
                crate::row::Row::new(r.value)?;
            }
            match O::READS_ROWS {
                true => given.push_ref(r),
                false => given.push_change(r.change, r.key, &r.to_record().value, r.timestamp),
            }
        }
        Ok(self
            .feed(port, &given)?
            .into_iter()
            .map(|(_, r)| r)
            .collect())
    }

    /// Advances the instance's watermark to `watermark` (it never goes
    /// back) and fires, in order, every event-time timer at or before it,
    /// as the host does when the watermark of the inputs advances; returns
    /// what the timers emitted.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// h.advance_watermark(100).unwrap();
    /// h.advance_watermark(50).unwrap();
    /// assert_eq!(h.watermark(), Some(100));
    /// ```
    pub fn advance_watermark(&mut self, watermark: i64) -> Result<Vec<Record>> {
        Ok(self
            .advance_watermark_ports(watermark)?
            .into_iter()
            .map(|(_, r)| r)
            .collect())
    }

    /// Like [`advance_watermark`](Self::advance_watermark), with each
    /// record's output port number.
    pub fn advance_watermark_ports(&mut self, watermark: i64) -> Result<Vec<(u32, Record)>> {
        let w = self.host.watermark.map_or(watermark, |c| c.max(watermark));
        self.host.watermark = Some(w);
        self.fire(TimeDomain::EventTime, w)
    }

    /// Sets the host's clock to `now` (milliseconds) and fires, in order,
    /// every processing-time timer at or before it; returns what they
    /// emitted.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// assert!(h.advance_processing_time(1_000).unwrap().is_empty());
    /// ```
    pub fn advance_processing_time(&mut self, now: i64) -> Result<Vec<Record>> {
        self.host.processing_time = now;
        let out = self.fire(TimeDomain::ProcessingTime, now)?;
        Ok(out.into_iter().map(|(_, r)| r).collect())
    }

    /// Fires the timers of `domain` due at `upto` the way the host does:
    /// in order, batched per call, until none is due (timers registered
    /// meanwhile that are due fire too).
    fn fire(&mut self, domain: TimeDomain, upto: i64) -> Result<Vec<(u32, Record)>> {
        let mut out = Vec::new();
        loop {
            let timers = self.host.timers_mut(domain);
            let mut due = BatchBuf::new();
            while let Some((t, _)) = timers.first()
                && *t <= upto
            {
                let (time, key) = timers.pop_first().expect("just seen");
                due.push(Some(&key), b"", Some(time));
            }
            if due.is_empty() {
                return Ok(out);
            }
            let last = due.as_batch().iter().last().and_then(|r| r.timestamp);
            crate::timer::set_current(None);
            self.host.default_timestamp = last;
            let (data, spans) = due.parts();
            let emitted = self.call(|op| hooks::on_timers(op, domain, data, spans));
            self.host.default_timestamp = None;
            out.extend(emitted?);
        }
    }

    /// The instance's watermark.
    pub fn watermark(&self) -> Option<i64> {
        self.host.watermark
    }

    /// The pending timers of `domain` as (time, key), in firing order.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// # }
    /// let h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// assert!(h.pending_timers(TimeDomain::EventTime).is_empty());
    /// ```
    pub fn pending_timers(&self, domain: TimeDomain) -> Vec<(i64, Vec<u8>)> {
        match domain {
            TimeDomain::EventTime => self.host.event_timers.iter().cloned().collect(),
            TimeDomain::ProcessingTime => self.host.processing_timers.iter().cloned().collect(),
        }
    }

    /// Calls `on_checkpoint`, after which the SDK writes typed state back to
    /// host state, and returns what it emitted.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// assert!(h.checkpoint(1).unwrap().is_empty());
    /// ```
    pub fn checkpoint(&mut self, checkpoint_id: u64) -> Result<Vec<Record>> {
        let out = self.call(|op| hooks::on_checkpoint(op, checkpoint_id))?;
        Ok(out.into_iter().map(|(_, r)| r).collect())
    }

    /// Ends the input as the host does: advances the watermark to the end
    /// of time (firing every event-time timer), then calls `finish`, after
    /// which the SDK writes typed state back to host state; returns what
    /// the timers and `finish` emitted.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// assert!(h.finish().unwrap().is_empty());
    /// ```
    pub fn finish(&mut self) -> Result<Vec<Record>> {
        // The end of input is the end of time: every event-time timer fires.
        let mut out = self.advance_watermark_ports(i64::MAX)?;
        out.extend(self.call(hooks::finish)?);
        Ok(out.into_iter().map(|(_, r)| r).collect())
    }

    /// The operator's snapshot bytes.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// assert!(h.snapshot().is_empty());
    /// ```
    pub fn snapshot(&mut self) -> Vec<u8> {
        let op = &mut self.op;
        install(&mut self.host, &mut self.registry, || op.snapshot())
    }

    /// Simulates a restart from a checkpoint taken now: checkpoints (which
    /// writes typed state back), snapshots, then, as the real host does after
    /// a failure, opens a new instance with empty memory (no typed-state
    /// cache) and restores it from the snapshot bytes and this host state.
    /// Returns what `on_checkpoint` emitted.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// h.restart().unwrap();
    /// ```
    pub fn restart(&mut self) -> Result<Vec<Record>> {
        let out = self.checkpoint(0)?;
        let bytes = self.snapshot();
        let ctx = self.open_ctx.clone();
        let version = self.info.state_version;
        self.registry = Registry::default();
        let mut op = install(&mut self.host, &mut self.registry, || O::open(&ctx))?;
        install(&mut self.host, &mut self.registry, || {
            hooks::restore(&mut op, version, &bytes)
        })?;
        self.op = op;
        Ok(out)
    }

    /// Restores this instance from snapshot bytes written by a plugin with
    /// state version `state_version`, over the current host state (to test
    /// migrations: put old-format entries with [`Harness::state_mut`] first).
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// assert!(h.restore(1, b"junk").is_err());
    /// ```
    pub fn restore(&mut self, state_version: u32, bytes: &[u8]) -> Result<()> {
        let op = &mut self.op;
        install(&mut self.host, &mut self.registry, || {
            hooks::restore(op, state_version, bytes)
        })
    }

    /// The host-owned state, as the host holds it now. Writes through
    /// [`MapState`](crate::MapState) and [`ValueState`](crate::ValueState)
    /// reach it when they are written back: call [`checkpoint`](Self::checkpoint)
    /// (or [`finish`](Self::finish)) first to see the state a checkpoint
    /// would hold.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// # }
    /// let h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// assert!(h.state().is_empty());
    /// ```
    pub fn state(&self) -> &BTreeMap<Vec<u8>, Vec<u8>> {
        &self.host.state
    }

    /// How many times the operator called each host function so far.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, ctx: &mut Context, _: u32, b: Vec<Record>) -> Result<()> { ctx.emit_all(0, b); Ok(()) }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// h.process("in", vec![Record::new("a"), Record::new("b")]).unwrap();
    /// assert_eq!(h.host_calls().emit, 1); // one flat emit for the batch
    /// ```
    pub fn host_calls(&self) -> &HostCalls {
        &self.host.calls
    }

    /// What the typed-state caches of this instance hold now, as the SDK
    /// estimates it (see [`MapState`](crate::MapState#the-cache)).
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Count(MapState<String, u64>);
    /// # impl Operator for Count {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("count", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Count(MapState::new("count"))) }
    /// fn process(&mut self, ctx: &mut Context, _: u32, batch: Vec<Record>) -> Result<()> {
    ///     for r in batch { self.0.update(ctx, r.value_str()?, |n| n.unwrap_or(0) + 1)?; }
    ///     Ok(())
    /// }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Count>::open("{}").unwrap();
    /// h.process("in", vec![Record::new("a"), Record::new("b")]).unwrap();
    /// assert_eq!((h.cache_usage().entries, h.cache_usage().dirty_entries), (2, 2));
    /// h.checkpoint(1).unwrap();
    /// assert_eq!(h.cache_usage().dirty_bytes, 0);
    /// ```
    pub fn cache_usage(&self) -> CacheUsage {
        self.registry.usage()
    }

    /// The host's limits as `flat-state.limits` reports them, mutable: the
    /// SDK sizes its caches from `memory` when it first uses them.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// h.limits_mut().memory = 64 << 20;
    /// ```
    pub fn limits_mut(&mut self) -> &mut StateLimits {
        &mut self.host.limits
    }

    /// Log lines the operator wrote so far.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// # }
    /// let h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// assert!(h.logs().is_empty());
    /// ```
    pub fn logs(&self) -> &[(LogLevel, String)] {
        &self.host.logs
    }

    /// The host-owned state, mutable (to set up old-format state in tests).
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// # }
    /// let mut h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// h.state_mut().insert(b"k".to_vec(), b"v".to_vec());
    /// assert_eq!(h.state().len(), 1);
    /// ```
    pub fn state_mut(&mut self) -> &mut BTreeMap<Vec<u8>, Vec<u8>> {
        &mut self.host.state
    }

    /// The operator itself, to inspect its fields.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Echo;
    /// # impl Operator for Echo {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("echo", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Echo) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// # }
    /// let h = weir_sdk::testing::Harness::<Echo>::open("{}").unwrap();
    /// let _op: &Echo = h.operator();
    /// ```
    pub fn operator(&self) -> &O {
        &self.op
    }
}
