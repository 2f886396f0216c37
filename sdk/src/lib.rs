//! # weir-sdk: write Weir stream operators in Rust
//!
//! A Weir operator is a WebAssembly component that implements the
//! `weir:operator/operator-rows` WIT world (see `wit/` in the Weir
//! repository). This crate hides the generated bindings behind an idiomatic
//! API:
//!
//! - [`Operator`]: the lifecycle as a trait with default methods;
//! - [`Batch`] and [`RecordRef`]: input batches in flat form, read in place
//!   ([`Operator::process_batch`]), each record with its [`Change`] kind
//!   (insert, update, delete, truncate) in a changelog;
//! - [`Context`]: host-owned keyed state and emitting records, batched across
//!   the Wasm boundary in flat form (`flat` and `flat-state`); the watermark
//!   and timers
//!   ([`Operator::on_timer`]);
//! - [`window`]: tumbling, sliding and session event-time windows;
//! - [`ValueState`] and [`MapState`]: typed state over byte state, encoded as
//!   JSON, with a guest-side write-back cache sized in bytes
//!   ([`set_cache_budget`]);
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
mod declined;
mod error;
mod hash;
mod host;
mod info;
mod operator;
mod record;
mod state_value;
mod timer;
mod typed;
mod writer;

pub mod row;
pub mod testing;
pub mod window;

#[doc(hidden)]
pub mod bindings;

pub use batch::{Batch, BatchBuf, BatchIter};
#[allow(deprecated)]
pub use cache::DEFAULT_CACHE_CAPACITY;
pub use cache::{DEFAULT_CACHE_DIRTY_LIMIT, cache_budget, set_cache_budget, set_cache_dirty_limit};
pub use context::Context;
pub use error::{Error, Result};
pub use host::LogLevel;
pub use info::{OpenContext, OperatorInfo};
pub use operator::Operator;
pub use record::{Change, Encoding, Record, RecordRef};
pub use timer::{TimeDomain, Timer};
pub use typed::{MapState, ValueState};
pub use weir_flat::row::RowWriter;
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
