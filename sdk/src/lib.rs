//! # weir-sdk: write Weir stream operators in Rust
//!
//! A Weir operator is a WebAssembly component that implements the
//! `weir:operator/operator-flat` WIT world (see `wit/` in the Weir
//! repository). This crate hides the generated bindings behind an idiomatic
//! API:
//!
//! - [`Operator`]: the lifecycle as a trait with default methods;
//! - [`Batch`] and [`RecordRef`]: input batches in flat form, read in place
//!   ([`Operator::process_batch`]);
//! - [`Context`]: host-owned keyed state and emitting records, batched across
//!   the Wasm boundary in flat form;
//! - [`ValueState`] and [`MapState`]: typed state over byte state, encoded as
//!   JSON, with a guest-side write-back cache;
//! - [`export!`]: one macro that exports your operator as the component's
//!   implementation;
//! - [`testing::Harness`]: unit-test an operator natively with plain
//!   `cargo test`, against an in-memory host.
//!
//! ```
//! use weir_sdk::{Context, OpenContext, Operator, OperatorInfo, Record, Result};
//!
//! /// Upper-cases every line.
//! struct Upper;
//!
//! impl Operator for Upper {
//!     fn describe() -> OperatorInfo {
//!         OperatorInfo::new("upper", "0.1.0").input("in").output("out")
//!     }
//!     fn open(_ctx: &OpenContext) -> Result<Self> {
//!         Ok(Upper)
//!     }
//!     fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
//!         for rec in batch {
//!             let upper = rec.value_str()?.to_uppercase();
//!             ctx.emit(0, Record::new(upper).with_key_opt(rec.key));
//!         }
//!         Ok(())
//!     }
//! }
//!
//! // In a plugin crate (crate-type = ["cdylib"]), export it:
//! // weir_sdk::export!(Upper);
//!
//! // And test it natively:
//! let mut h = weir_sdk::testing::Harness::<Upper>::open("{}").unwrap();
//! let out = h.process("in", vec![Record::new("hi")]).unwrap();
//! assert_eq!(out[0].value_str().unwrap(), "HI");
//! ```
#![warn(missing_docs)]

mod adapter;
mod batch;
mod cache;
mod context;
mod error;
mod hash;
mod host;
mod info;
mod record;
mod typed;
mod writer;

pub mod testing;

#[doc(hidden)]
pub mod bindings {
    //! Bindings generated from the `weir:operator` world. Not a stable API.
    wit_bindgen::generate!({
        world: "operator-flat",
        path: "../wit",
        pub_export_macro: true,
        export_macro_name: "__export_operator_world",
        default_bindings_module: "weir_sdk::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

pub use batch::{Batch, BatchBuf, BatchIter, RecordRef};
pub use context::Context;
pub use error::{Error, Result};
pub use host::LogLevel;
pub use info::{OpenContext, OperatorInfo};
pub use record::Record;
pub use typed::{DEFAULT_CACHE_CAPACITY, MapState, ValueState};
pub use writer::ValueWriter;

#[doc(hidden)]
pub mod __private {
    pub use crate::adapter::{Adapter, OperatorSlot};
}

/// Exports an [`Operator`] as the implementation of the component.
///
/// Use it once, at the root of a plugin crate built with
/// `crate-type = ["cdylib"]` for `wasm32-wasip2`:
///
/// ```ignore
/// struct MyOp;
/// impl weir_sdk::Operator for MyOp { /* ... */ }
/// weir_sdk::export!(MyOp);
/// ```
#[macro_export]
macro_rules! export {
    ($op:ty) => {
        // Native builds (unit tests with `testing::Harness`) export nothing.
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            ::std::thread_local! {
                static __WEIR_SLOT: ::std::cell::RefCell<::std::option::Option<$op>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }
            impl $crate::__private::OperatorSlot for $op {
                fn with_slot<R>(f: impl FnOnce(&mut Option<Self>) -> R) -> R {
                    __WEIR_SLOT.with(|s| f(&mut s.borrow_mut()))
                }
            }
            type __WeirAdapter = $crate::__private::Adapter<$op>;
            $crate::bindings::__export_operator_world!(__WeirAdapter with_types_in $crate::bindings);
        };
    };
}

/// A stream operator. Implement it, then [`export!`] it.
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

    /// Creates the operator instance from its context; parse `ctx.config` here
    /// (see [`OpenContext::config_as`]).
    fn open(ctx: &OpenContext) -> Result<Self>;

    /// Processes a batch of records that arrived on input port `port` (an index
    /// into [`OperatorInfo`]'s inputs), in arrival order.
    fn process(&mut self, ctx: &mut Context, port: u32, batch: Vec<Record>) -> Result<()>;

    /// Processes a batch in flat form, read in place: what the host calls
    /// (through `flat-lifecycle.process`) for every batch. Override it to
    /// avoid an allocation per record; the default copies the records into a
    /// `Vec<Record>` and calls [`process`](Operator::process). A host that
    /// passes batches as lists of records calls `process` instead, so an
    /// operator that overrides this should make `process` call it (see
    /// [`BatchBuf::from_records`]).
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
        self.process(ctx, port, batch.to_records())
    }

    /// Called right before the instance's state is snapshotted for checkpoint
    /// `checkpoint_id`. Flush buffered work here. Does nothing by default.
    /// When it returns, the SDK writes the caches of [`MapState`] and
    /// [`ValueState`] back to host state, before the host takes it.
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

    /// End of input: every input is closed. Emit final results here. Does
    /// nothing by default. When it returns, the SDK writes the caches of
    /// [`MapState`] and [`ValueState`] back to host state; the host then calls
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
