//! Glue between the generated export traits and an [`Operator`]: one instance
//! per component instance, created by `open`.

use std::marker::PhantomData;

use crate::bindings::exports::weir::operator::{lifecycle, snapshot};
use crate::bindings::weir::operator::types::{
    Error as WitError, OpenContext, OperatorInfo, Record,
};
use crate::{Context, Error, Operator};

/// Storage for the one operator instance of a component instance. Implemented
/// by [`export!`](crate::export).
pub trait OperatorSlot: Sized {
    /// Runs `f` with the slot.
    fn with_slot<R>(f: impl FnOnce(&mut Option<Self>) -> R) -> R;
}

/// Implements the generated export traits for `T`.
pub struct Adapter<T>(PhantomData<T>);

fn not_open(hook: &str) -> WitError {
    WitError::Other(format!(
        "host bug: `{hook}` called before a successful `open`"
    ))
}

/// Runs a hook with the operator and a fresh [`Context`], flushing emitted
/// records when the hook returns (also when it fails: the host discards
/// output of a failed attempt anyway).
fn with_op<T: Operator + OperatorSlot, R>(
    hook: &str,
    f: impl FnOnce(&mut T, &mut Context) -> Result<R, Error>,
) -> Result<R, WitError> {
    T::with_slot(|slot| {
        let op = slot.as_mut().ok_or_else(|| not_open(hook))?;
        let mut ctx = Context::new();
        let out = f(op, &mut ctx);
        ctx.flush();
        out.map_err(Into::into)
    })
}

impl<T: Operator + OperatorSlot> lifecycle::Guest for Adapter<T> {
    fn describe() -> OperatorInfo {
        T::describe()
    }

    fn open(ctx: OpenContext) -> Result<(), WitError> {
        let op = T::open(&ctx)?;
        T::with_slot(|slot| *slot = Some(op));
        Ok(())
    }

    fn process(port: u32, batch: Vec<Record>) -> Result<(), WitError> {
        with_op::<T, _>("process", |op, ctx| op.process(ctx, port, batch))
    }

    fn on_checkpoint(checkpoint_id: u64) -> Result<(), WitError> {
        with_op::<T, _>("on-checkpoint", |op, ctx| {
            op.on_checkpoint(ctx, checkpoint_id)
        })
    }

    fn finish() -> Result<(), WitError> {
        with_op::<T, _>("finish", |op, ctx| op.finish(ctx))
    }
}

impl<T: Operator + OperatorSlot> snapshot::Guest for Adapter<T> {
    fn snapshot() -> Vec<u8> {
        T::with_slot(|slot| slot.as_mut().map(|op| op.snapshot()).unwrap_or_default())
    }

    fn restore(state_version: u32, bytes: Vec<u8>) -> Result<(), WitError> {
        with_op::<T, _>("restore", |op, ctx| op.restore(ctx, state_version, &bytes))
    }
}
