//! Host bindings generated from `wit/`: a leaf module (it imports nothing of
//! the crate), so both the data path (`dataflow`, for the WIT record) and the
//! Wasm layer (`wasm`) can use it. Private to the crate, except the plain data
//! types re-exported elsewhere ([`crate::Record`], [`crate::OperatorInfo`]).
//!
//! The host links the imports of world `operator-rows` (a superset of
//! `operator-changes`, `operator-timers`, `operator-flat` and `operator`)
//! and accepts components of every world: [`OperatorPre`] finds the
//! `flat-lifecycle`, `timer-lifecycle`, `change-lifecycle` and `row-input`
//! exports when the component has them.

use wasmtime::component::{Instance, InstancePre};
use wasmtime::{AsContextMut, Engine};

/// The generated code. Every WIT item and field is documented in `wit/`; the
/// lint exemption covers helper items the macro derives for records.
#[allow(missing_docs)]
mod generated {
    wasmtime::component::bindgen!({
        world: "operator-rows",
        path: "../wit",
        imports: { default: trappable },
        additional_derives: [PartialEq, Eq, Hash],
    });
}

pub use self::generated::OperatorRows as Imports;
pub use self::generated::exports::weir::operator::{
    change_lifecycle, flat_lifecycle, lifecycle, row_input, snapshot, timer_lifecycle,
};
pub use self::generated::weir::operator::{
    emit, flat, flat_state, log, reject, state, timers, types,
};

/// A component checked against the world, with its exports looked up once.
pub(crate) struct OperatorPre<T: 'static> {
    pre: InstancePre<T>,
    lifecycle: lifecycle::GuestIndices,
    snapshot: snapshot::GuestIndices,
    flat: Option<flat_lifecycle::GuestIndices>,
    timers: Option<timer_lifecycle::GuestIndices>,
    changes: Option<change_lifecycle::GuestIndices>,
    rows: Option<row_input::GuestIndices>,
}

impl<T: 'static> Clone for OperatorPre<T> {
    fn clone(&self) -> Self {
        OperatorPre {
            pre: self.pre.clone(),
            lifecycle: self.lifecycle.clone(),
            snapshot: self.snapshot.clone(),
            flat: self.flat.clone(),
            timers: self.timers.clone(),
            changes: self.changes.clone(),
            rows: self.rows.clone(),
        }
    }
}

impl<T: 'static> OperatorPre<T> {
    /// Fails when the component lacks an export of world `operator`.
    pub(crate) fn new(pre: InstancePre<T>) -> wasmtime::Result<Self> {
        let lifecycle = lifecycle::GuestIndices::new(&pre)?;
        let snapshot = snapshot::GuestIndices::new(&pre)?;
        let flat = flat_lifecycle::GuestIndices::new(&pre).ok();
        let timers = timer_lifecycle::GuestIndices::new(&pre).ok();
        let changes = change_lifecycle::GuestIndices::new(&pre).ok();
        let rows = row_input::GuestIndices::new(&pre).ok();
        Ok(OperatorPre {
            pre,
            lifecycle,
            snapshot,
            flat,
            timers,
            changes,
            rows,
        })
    }

    pub(crate) fn engine(&self) -> &Engine {
        self.pre.engine()
    }

    /// Whether the component exports `flat-lifecycle`.
    pub(crate) fn has_flat(&self) -> bool {
        self.flat.is_some()
    }

    /// Whether the component exports `timer-lifecycle`.
    pub(crate) fn has_timers(&self) -> bool {
        self.timers.is_some()
    }

    pub(crate) fn instantiate(
        &self,
        mut store: impl AsContextMut<Data = T>,
    ) -> wasmtime::Result<Operator> {
        let mut store = store.as_context_mut();
        let instance: Instance = self.pre.instantiate(&mut store)?;
        Ok(Operator {
            lifecycle: self.lifecycle.load(&mut store, &instance)?,
            snapshot: self.snapshot.load(&mut store, &instance)?,
            flat: match &self.flat {
                Some(f) => Some(f.load(&mut store, &instance)?),
                None => None,
            },
            timers: match &self.timers {
                Some(t) => Some(t.load(&mut store, &instance)?),
                None => None,
            },
            changes: match &self.changes {
                Some(c) => Some(c.load(&mut store, &instance)?),
                None => None,
            },
            rows: match &self.rows {
                Some(r) => Some(r.load(&mut store, &instance)?),
                None => None,
            },
        })
    }
}

/// The exports of one instance.
pub(crate) struct Operator {
    lifecycle: lifecycle::Guest,
    snapshot: snapshot::Guest,
    flat: Option<flat_lifecycle::Guest>,
    timers: Option<timer_lifecycle::Guest>,
    changes: Option<change_lifecycle::Guest>,
    rows: Option<row_input::Guest>,
}

impl Operator {
    pub(crate) fn weir_operator_lifecycle(&self) -> &lifecycle::Guest {
        &self.lifecycle
    }

    pub(crate) fn weir_operator_snapshot(&self) -> &snapshot::Guest {
        &self.snapshot
    }

    pub(crate) fn weir_operator_flat_lifecycle(&self) -> Option<&flat_lifecycle::Guest> {
        self.flat.as_ref()
    }

    pub(crate) fn weir_operator_timer_lifecycle(&self) -> Option<&timer_lifecycle::Guest> {
        self.timers.as_ref()
    }

    pub(crate) fn weir_operator_change_lifecycle(&self) -> Option<&change_lifecycle::Guest> {
        self.changes.as_ref()
    }

    pub(crate) fn weir_operator_row_input(&self) -> Option<&row_input::Guest> {
        self.rows.as_ref()
    }
}
