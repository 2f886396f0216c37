//! [`BadCounts`]: the records a node went past by [`BadKind`]
//! (`records_bad`, the `reason` label of `weir_bad_records_total`).

use std::sync::atomic::{AtomicU64, Ordering};

pub use crate::dataflow::bad_kind::BadKind;

/// Bad records a node went past, by kind.
#[derive(Debug, Default)]
pub struct BadCounts([AtomicU64; 7]);

impl BadCounts {
    /// Counts `n` more of `kind`.
    pub fn add(&self, kind: BadKind, n: u64) {
        self.0[kind as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// How many of `kind`.
    pub fn get(&self, kind: BadKind) -> u64 {
        self.0[kind as usize].load(Ordering::Relaxed)
    }

    /// How many of every kind.
    ///
    /// ```
    /// use weir::metrics::{BadCounts, BadKind};
    /// let c = BadCounts::default();
    /// c.add(BadKind::Trap, 2);
    /// c.add(BadKind::InvalidInput, 1);
    /// assert_eq!((c.get(BadKind::Trap), c.total()), (2, 3));
    /// ```
    pub fn total(&self) -> u64 {
        BadKind::ALL.iter().map(|&k| self.get(k)).sum()
    }
}
