//! Glue between the generated export traits and an [`Operator`]: one instance
//! per component instance, created by `open`. The hook bodies ([`hooks`]) are
//! shared with [`testing::Harness`](crate::testing::Harness), so that native
//! tests run exactly what the component runs.

use std::marker::PhantomData;

use crate::bindings::exports::weir::operator::{
    change_lifecycle, flat_lifecycle, lifecycle, row_input, snapshot, timer_lifecycle,
};
use crate::bindings::weir::operator::timers::TimeDomain;
use crate::bindings::weir::operator::types::{
    Error as WitError, OpenContext, OperatorInfo, Record,
};
use crate::operator::Operator;

/// Storage for the one operator instance of a component instance. Implemented
/// by [`export!`](crate::export).
pub trait OperatorSlot: Sized {
    /// Runs `f` with the slot.
    fn with_slot<R>(f: impl FnOnce(&mut Option<Self>) -> R) -> R;
}

/// Implements the generated export traits for `T`.
pub struct Adapter<T>(PhantomData<T>);

pub(crate) mod hooks {
    //! What each hook does around the operator's own method.

    use crate::batch::Batch;
    use crate::bindings::weir::operator::timers::TimeDomain;
    use crate::cache;
    use crate::context::Context;
    use crate::error::Result;
    use crate::operator::Operator;
    use crate::record::Record;
    use crate::timer::{self, Timer};

    /// Runs `f` with a fresh [`Context`]; when it returns, even with an
    /// error (the host then discards the attempt's output and state):
    /// writes typed state back when `write_back` (checkpoint and finish; see
    /// `cache.rs` for why that suffices), then hands emitted records to the
    /// host.
    fn run<T, R>(
        op: &mut T,
        write_back: bool,
        f: impl FnOnce(&mut T, &mut Context) -> Result<R>,
    ) -> Result<R> {
        let mut ctx = Context::new();
        let out = f(op, &mut ctx);
        timer::set_current(None);
        if write_back {
            cache::write_back_all();
        }
        cache::trim_all();
        ctx.flush();
        out
    }

    pub(crate) fn process<T: Operator>(op: &mut T, port: u32, batch: Vec<Record>) -> Result<()> {
        // Records in a list are not read through the SDK: no current
        // timestamp (the host gives emits the batch's latest).
        timer::set_current(None);
        run(op, false, |op, ctx| op.process(ctx, port, batch))
    }

    /// Fires the timers of a flat timer batch (key = the timer's key,
    /// timestamp = its time) one by one, in order.
    pub(crate) fn on_timers<T: Operator>(
        op: &mut T,
        domain: TimeDomain,
        data: &[u8],
        spans: &[u8],
    ) -> Result<()> {
        run(op, false, |op, ctx| {
            for rec in &Batch::new(data, spans)? {
                let time = rec.timestamp.ok_or_else(|| {
                    crate::error::Error::Other("host bug: a timer without a time".into())
                })?;
                let key = rec.key.unwrap_or_default();
                op.on_timer(ctx, Timer { key, domain, time })?;
            }
            Ok(())
        })
    }

    pub(crate) fn process_flat<T: Operator>(
        op: &mut T,
        port: u32,
        data: &[u8],
        spans: &[u8],
    ) -> Result<()> {
        run(op, false, |op, ctx| {
            op.process_batch(ctx, port, &Batch::new(data, spans)?)
        })
    }

    pub(crate) fn on_checkpoint<T: Operator>(op: &mut T, checkpoint_id: u64) -> Result<()> {
        run(op, true, |op, ctx| op.on_checkpoint(ctx, checkpoint_id))
    }

    pub(crate) fn finish<T: Operator>(op: &mut T) -> Result<()> {
        run(op, true, |op, ctx| op.finish(ctx))
    }

    pub(crate) fn restore<T: Operator>(op: &mut T, state_version: u32, bytes: &[u8]) -> Result<()> {
        run(op, false, |op, ctx| op.restore(ctx, state_version, bytes))
    }
}

/// Runs `f` on the open operator.
fn with_op<T: Operator + OperatorSlot>(
    hook: &str,
    f: impl FnOnce(&mut T) -> crate::error::Result<()>,
) -> Result<(), WitError> {
    T::with_slot(|slot| {
        let op = slot.as_mut().ok_or_else(|| {
            WitError::Other(format!(
                "host bug: `{hook}` called before a successful `open`"
            ))
        })?;
        f(op).map_err(Into::into)
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
        with_op::<T>("process", |op| hooks::process(op, port, batch))
    }

    fn on_checkpoint(checkpoint_id: u64) -> Result<(), WitError> {
        with_op::<T>("on-checkpoint", |op| {
            hooks::on_checkpoint(op, checkpoint_id)
        })
    }

    fn finish() -> Result<(), WitError> {
        with_op::<T>("finish", hooks::finish)
    }
}

impl<T: Operator + OperatorSlot> flat_lifecycle::Guest for Adapter<T> {
    fn process(port: u32, data: Vec<u8>, spans: Vec<u8>) -> Result<(), WitError> {
        with_op::<T>("process", |op| hooks::process_flat(op, port, &data, &spans))
    }
}

/// The same hook as `flat-lifecycle.process`: the spans carry change kinds
/// (read into [`RecordRef::change`](crate::RecordRef::change)).
impl<T: Operator + OperatorSlot> change_lifecycle::Guest for Adapter<T> {
    fn process(port: u32, data: Vec<u8>, spans: Vec<u8>) -> Result<(), WitError> {
        with_op::<T>("process", |op| hooks::process_flat(op, port, &data, &spans))
    }
}

impl<T: Operator + OperatorSlot> row_input::Guest for Adapter<T> {
    fn reads_rows() -> bool {
        T::READS_ROWS
    }
}

impl<T: Operator + OperatorSlot> timer_lifecycle::Guest for Adapter<T> {
    fn on_timers(domain: TimeDomain, data: Vec<u8>, spans: Vec<u8>) -> Result<(), WitError> {
        with_op::<T>("on-timers", |op| {
            hooks::on_timers(op, domain, &data, &spans)
        })
    }
}

impl<T: Operator + OperatorSlot> snapshot::Guest for Adapter<T> {
    fn snapshot() -> Vec<u8> {
        T::with_slot(|slot| slot.as_mut().map(|op| op.snapshot()).unwrap_or_default())
    }

    fn restore(state_version: u32, bytes: Vec<u8>) -> Result<(), WitError> {
        with_op::<T>("restore", |op| hooks::restore(op, state_version, &bytes))
    }
}
