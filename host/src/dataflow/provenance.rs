//! [`Provenance`]: where the records of a batch came from, the source and
//! the place in its input (`in.txt lines 3–258`, `stream words sequence
//! 1001`, `topic orders partition 2 offset 77`), so that an operator's
//! failure names the input it failed on.
//!
//! Invariants:
//! - A source's batch carries the place of exactly its records; what an
//!   operator emits while processing a batch carries that batch's
//!   provenance (timers and checkpoint hooks emit without one). A batch of
//!   a source's single record therefore names that record at every
//!   operator downstream.
//! - Provenance is for messages only: it is not part of a batch's value,
//!   is never persisted, and costs one allocation per source batch.

use std::fmt;

/// Where a batch's records came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// The source's id.
    pub source: String,
    /// The place in the source's input, as its reader names it.
    pub place: String,
    /// How many of the source's records the place covers.
    pub records: usize,
}

impl fmt::Display for Provenance {
    /// `in.txt line 7 of source `lines``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of source `{}`", self.place, self.source)
    }
}

/// `what` followed by one numbered unit or a range of them: `in.txt line
/// 7`, `in.txt lines 3–258`.
///
/// ```
/// use weir::dataflow::provenance::numbered;
/// assert_eq!(numbered("in.txt", "line", 7, 7), "in.txt line 7");
/// assert_eq!(numbered("in.txt", "line", 3, 258), "in.txt lines 3–258");
/// ```
pub fn numbered(what: &str, unit: &str, first: u64, last: u64) -> String {
    if first == last {
        format!("{what} {unit} {first}")
    } else {
        format!("{what} {unit}s {first}–{last}")
    }
}

/// The first and last number of the records added to a batch being built
/// (line numbers, sequences, offsets): one comparison per record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NumberRange {
    first: Option<u64>,
    last: u64,
}

impl NumberRange {
    /// A record numbered `n` was added; `fresh` when it is the batch's
    /// first (the range then starts over).
    ///
    /// ```
    /// use weir::dataflow::provenance::NumberRange;
    /// let mut r = NumberRange::default();
    /// r.add(4, true);
    /// r.add(9, false);
    /// assert_eq!(r.describe("in.txt", "line"), Some("in.txt lines 4–9".to_string()));
    /// r.add(12, true);
    /// assert_eq!(r.describe("in.txt", "line"), Some("in.txt line 12".to_string()));
    /// ```
    pub fn add(&mut self, n: u64, fresh: bool) {
        if fresh || self.first.is_none() {
            self.first = Some(n);
        }
        self.last = n;
    }

    /// Forgets the range (a new batch without records yet).
    pub fn clear(&mut self) {
        self.first = None;
    }

    /// The range as [`numbered`] says it, if any record was added.
    pub fn describe(&self, what: &str, unit: &str) -> Option<String> {
        self.first
            .map(|first| numbered(what, unit, first, self.last))
    }
}
