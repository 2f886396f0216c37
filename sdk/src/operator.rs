//! [`Operator`]: the lifecycle of a stream operator as a trait with default
//! methods, what a plugin implements and [`export!`](crate::export)s.

use crate::batch::Batch;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::info::{OpenContext, OperatorInfo};
use crate::record::Record;
use crate::timer::Timer;

/// A stream operator. Implement it, then [`export!`](crate::export) it.
///
/// Lifecycle on one instance: [`open`](Operator::open) once, then
/// [`restore`](Operator::restore) when resuming from a checkpoint, then any
/// number of [`process`](Operator::process) and
/// [`on_checkpoint`](Operator::on_checkpoint) calls, then
/// [`finish`](Operator::finish) at end of input, followed by `on_checkpoint`
/// for the final checkpoint. Calls are never concurrent.
///
/// ```
/// use weir_sdk::{Context, OpenContext, Operator, OperatorInfo, Record, Result};
///
/// struct Passthrough;
/// impl Operator for Passthrough {
///     fn describe() -> OperatorInfo {
///         OperatorInfo::new("passthrough", "1.0.0").input("in").output("out")
///     }
///     fn open(_ctx: &OpenContext) -> Result<Self> { Ok(Passthrough) }
///     fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
///         ctx.emit_all(0, batch);
///         Ok(())
///     }
/// }
/// ```
pub trait Operator: Sized + 'static {
    /// Name, version, ports and state version. Must not depend on configuration.
    fn describe() -> OperatorInfo;

    /// Whether the operator reads rows: records whose value is a row (typed
    /// fields, as `csv` sources and plugins emitting with
    /// [`Context::emit_row`] write them) reach
    /// [`process_batch`](Operator::process_batch) as rows, read with
    /// [`RecordRef::row`](crate::RecordRef::row) without parsing text; other
    /// records stay text, so such an operator reads both. When false (the
    /// default) every row arrives as the JSON text of its fields.
    ///
    /// ```
    /// use weir_sdk::*;
    /// struct Total(f64);
    /// impl Operator for Total {
    ///     const READS_ROWS: bool = true;
    ///     fn describe() -> OperatorInfo { OperatorInfo::new("total", "1.0.0").input("in").output("out") }
    ///     fn open(_: &OpenContext) -> Result<Self> { Ok(Total(0.0)) }
    ///     fn process(&mut self, ctx: &mut Context, port: u32, batch: Vec<Record>) -> Result<()> {
    ///         self.process_batch(ctx, port, &BatchBuf::from_records(&batch).as_batch())
    ///     }
    ///     fn process_batch(&mut self, _: &mut Context, _: u32, batch: &Batch<'_>) -> Result<()> {
    ///         for r in batch {
    ///             self.0 += match r.row() {
    ///                 Some(row) => row.f64("amount"),
    ///                 None => r.parse_json::<serde_json::Value>()?["amount"].as_f64(),
    ///             }
    ///             .unwrap_or(0.0);
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    const READS_ROWS: bool = false;

    /// Creates the operator instance from its context; parse `ctx.config` here
    /// (see [`OpenContext::config_as`]).
    fn open(ctx: &OpenContext) -> Result<Self>;

    /// Processes a batch of records that arrived on input port `port` (an index
    /// into [`OperatorInfo`]'s inputs), in arrival order.
    fn process(&mut self, ctx: &mut Context, port: u32, batch: Vec<Record>) -> Result<()>;

    /// Processes a batch in flat form, read in place: what the host calls
    /// (through `change-lifecycle.process`) for every batch. Override it to
    /// avoid an allocation per record, and to see each record's change kind
    /// ([`RecordRef::change`](crate::RecordRef::change)); the default copies
    /// the records into a `Vec<Record>` (which has no change kind) and calls
    /// [`process`](Operator::process). A host that
    /// passes batches as lists of records calls `process` instead, so an
    /// operator that overrides this should make `process` call it (see
    /// [`BatchBuf::from_records`](crate::BatchBuf::from_records)).
    ///
    /// ```
    /// use weir_sdk::*;
    ///
    /// /// Keeps the non-empty lines.
    /// struct NonEmpty;
    /// impl Operator for NonEmpty {
    ///     fn describe() -> OperatorInfo {
    ///         OperatorInfo::new("non-empty", "1.0.0").input("in").output("out")
    ///     }
    ///     fn open(_: &OpenContext) -> Result<Self> {
    ///         Ok(NonEmpty)
    ///     }
    ///     fn process(&mut self, ctx: &mut Context, port: u32, batch: Vec<Record>) -> Result<()> {
    ///         self.process_batch(ctx, port, &BatchBuf::from_records(&batch).as_batch())
    ///     }
    ///     fn process_batch(&mut self, ctx: &mut Context, _port: u32, batch: &Batch<'_>) -> Result<()> {
    ///         for rec in batch {
    ///             if !rec.value_str()?.trim().is_empty() {
    ///                 ctx.emit_ref(0, rec);
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let mut h = testing::Harness::<NonEmpty>::open("{}").unwrap();
    /// let out = h.process("in", vec![Record::new(" "), Record::new("x")]).unwrap();
    /// assert_eq!(out, [Record::new("x")]);
    /// ```
    fn process_batch(&mut self, ctx: &mut Context, port: u32, batch: &Batch<'_>) -> Result<()> {
        let records = batch.to_records();
        // `process` reads a list, not the batch: no current timestamp.
        crate::timer::set_current(None);
        self.process(ctx, port, records)
    }

    /// Called right before the instance's state is snapshotted for checkpoint
    /// `checkpoint_id`. Flush buffered work here. Does nothing by default.
    /// When it returns, the SDK writes the caches of
    /// [`MapState`](crate::MapState) and [`ValueState`](crate::ValueState)
    /// back to host state, before the host takes it.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Op { pending: Vec<Record> }
    /// # impl Operator for Op {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("op", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Op { pending: vec![] }) }
    /// # fn process(&mut self, _: &mut Context, _: u32, b: Vec<Record>) -> Result<()> { self.pending.extend(b); Ok(()) }
    /// fn on_checkpoint(&mut self, ctx: &mut Context, _checkpoint_id: u64) -> Result<()> {
    ///     ctx.emit_all(0, std::mem::take(&mut self.pending));
    ///     Ok(())
    /// }
    /// # }
    /// ```
    fn on_checkpoint(&mut self, ctx: &mut Context, checkpoint_id: u64) -> Result<()> {
        let _ = (ctx, checkpoint_id);
        Ok(())
    }

    /// A timer registered with [`Context::register_timer`] (or its
    /// shorthands) fired: the watermark (event time) or the host's clock
    /// (processing time) reached `timer.time`. Timers fire in time order,
    /// after every record that came before the watermark that made them
    /// due. May read and write state, register timers and emit; emitted
    /// records get the timer's time unless they carry their own. Does
    /// nothing by default.
    ///
    /// ```
    /// use weir_sdk::*;
    ///
    /// /// Emits each key once, when event time passes its first record + 10.
    /// struct Later;
    /// impl Operator for Later {
    ///     fn describe() -> OperatorInfo { OperatorInfo::new("later", "1.0.0").input("in").output("out") }
    ///     fn open(_: &OpenContext) -> Result<Self> { Ok(Later) }
    ///     fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { unreachable!() }
    ///     fn process_batch(&mut self, ctx: &mut Context, _: u32, batch: &Batch<'_>) -> Result<()> {
    ///         for rec in batch {
    ///             if let (Some(key), Some(ts)) = (rec.key, rec.timestamp) {
    ///                 ctx.register_event_timer(key, ts + 10);
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    ///     fn on_timer(&mut self, ctx: &mut Context, timer: Timer<'_>) -> Result<()> {
    ///         ctx.emit(0, Record::new(timer.key));
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let mut h = testing::Harness::<Later>::open("{}").unwrap();
    /// h.process("in", vec![Record::new("x").with_key("a").with_timestamp(5)]).unwrap();
    /// assert!(h.advance_watermark(14).unwrap().is_empty());
    /// let out = h.advance_watermark(15).unwrap();
    /// assert_eq!(out, [Record::new("a").with_timestamp(15)]);
    /// ```
    fn on_timer(&mut self, ctx: &mut Context, timer: Timer<'_>) -> Result<()> {
        let _ = (ctx, timer);
        Ok(())
    }

    /// End of input: every input is closed. Emit final results here. Does
    /// nothing by default. When it returns, the SDK writes the caches of
    /// [`MapState`](crate::MapState) and [`ValueState`](crate::ValueState)
    /// back to host state; the host then calls
    /// [`on_checkpoint`](Operator::on_checkpoint) for the final checkpoint.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Count(u64);
    /// # impl Operator for Count {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("count", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Count(0)) }
    /// # fn process(&mut self, _: &mut Context, _: u32, b: Vec<Record>) -> Result<()> { self.0 += b.len() as u64; Ok(()) }
    /// fn finish(&mut self, ctx: &mut Context) -> Result<()> {
    ///     ctx.emit(0, Record::new(self.0.to_string()));
    ///     Ok(())
    /// }
    /// # }
    /// ```
    fn finish(&mut self, ctx: &mut Context) -> Result<()> {
        let _ = ctx;
        Ok(())
    }

    /// Serializes state kept in the plugin's own memory. Operators that keep
    /// all state in [`Context`] state keep the default, which returns no bytes.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Seen(std::collections::BTreeSet<String>);
    /// # impl Operator for Seen {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("seen", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Seen(Default::default())) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// fn snapshot(&mut self) -> Vec<u8> {
    ///     serde_json::to_vec(&self.0).expect("a set of strings serializes")
    /// }
    /// # }
    /// ```
    fn snapshot(&mut self) -> Vec<u8> {
        Vec::new()
    }

    /// Replaces in-memory state with `bytes` written by [`snapshot`](Operator::snapshot)
    /// of a plugin whose state version was `state_version`: migrate when it is
    /// older than yours. Host state is already restored when this is called,
    /// so a migration can also rewrite host state through `ctx` (e.g. scan
    /// every entry with [`Context::scan_all`] and put it in the new encoding).
    /// The default accepts only empty bytes.
    ///
    /// ```
    /// # use weir_sdk::*;
    /// # struct Seen(std::collections::BTreeSet<String>);
    /// # impl Operator for Seen {
    /// # fn describe() -> OperatorInfo { OperatorInfo::new("seen", "1.0.0").input("in").output("out") }
    /// # fn open(_: &OpenContext) -> Result<Self> { Ok(Seen(Default::default())) }
    /// # fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> { Ok(()) }
    /// fn restore(&mut self, _ctx: &mut Context, state_version: u32, bytes: &[u8]) -> Result<()> {
    ///     if state_version != 1 {
    ///         return Err(Error::IncompatibleState(format!("unknown state version {state_version}")));
    ///     }
    ///     self.0 = serde_json::from_slice(bytes)
    ///         .map_err(|e| Error::IncompatibleState(e.to_string()))?;
    ///     Ok(())
    /// }
    /// # }
    /// ```
    fn restore(&mut self, ctx: &mut Context, state_version: u32, bytes: &[u8]) -> Result<()> {
        let _ = ctx;
        if bytes.is_empty() {
            Ok(())
        } else {
            Err(Error::IncompatibleState(format!(
                "this operator keeps no in-memory state but got {} snapshot bytes (state version {state_version}); implement Operator::restore",
                bytes.len()
            )))
        }
    }
}
