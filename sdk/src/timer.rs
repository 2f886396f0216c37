//! Event time in the SDK: [`Timer`]s as the host fires them, the
//! [`TimeDomain`] they follow, and the *current timestamp*, which records
//! emitted without a timestamp of their own get.
//!
//! Invariant: while a hook reads its input batch through [`Batch`]'s
//! iterator, the current timestamp is that of the record last yielded;
//! while `on_timer` runs, the timer's time; otherwise none (and the host
//! gives such records the latest timestamp of its input).
//!
//! [`Batch`]: crate::Batch

use std::cell::Cell;

/// The clock a timer follows: the watermark (event time) or the host's
/// wall clock (processing time).
///
/// ```
/// use weir_sdk::TimeDomain;
/// assert_ne!(TimeDomain::EventTime, TimeDomain::ProcessingTime);
/// ```
pub use crate::bindings::weir::operator::timers::TimeDomain;

/// A timer that fired, passed to
/// [`Operator::on_timer`](crate::Operator::on_timer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timer<'a> {
    /// The key it was registered for.
    pub key: &'a [u8],
    /// Its clock.
    pub domain: TimeDomain,
    /// Its time, milliseconds since the Unix epoch.
    pub time: i64,
}

impl Timer<'_> {
    /// The key as UTF-8, if it is.
    ///
    /// ```
    /// let t = weir_sdk::Timer { key: b"k", domain: weir_sdk::TimeDomain::EventTime, time: 1 };
    /// assert_eq!(t.key_str(), Some("k"));
    /// ```
    pub fn key_str(&self) -> Option<&str> {
        std::str::from_utf8(self.key).ok()
    }
}

thread_local! {
    static CURRENT: Cell<Option<i64>> = const { Cell::new(None) };
}

/// Sets the current timestamp.
#[inline]
pub(crate) fn set_current(timestamp: Option<i64>) {
    CURRENT.with(|c| c.set(timestamp));
}

/// The current timestamp (see the [module docs](self)).
#[inline]
pub(crate) fn current() -> Option<i64> {
    CURRENT.with(Cell::get)
}
