//! [`BadKind`]: why a node could not handle a record, the word its dead
//! letter, the run's summary and `weir_bad_records_total` say it with.

/// Why a node could not handle a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BadKind {
    /// A source's record is not in its format: not UTF-8, not JSON, a CSV
    /// row that does not fit the header.
    Unreadable,
    /// A source's record lacks its `key` field.
    NoKey,
    /// A source's record has no timestamp, or one that is not a time.
    BadTimestamp,
    /// An operator's plugin trapped on it (or hit a limit).
    Trap,
    /// An operator's plugin called it invalid: `invalid-input` returned for
    /// it, or the record refused (`reject`).
    InvalidInput,
    /// An operator's plugin returned another error for it.
    Failed,
    /// A sink's destination would refuse it: a value of the wrong type for
    /// its column, an unknown column.
    Refused,
}

impl BadKind {
    /// Every kind, in the order of [`BadCounts`](crate::metrics::BadCounts).
    pub const ALL: [BadKind; 7] = [
        BadKind::Unreadable,
        BadKind::NoKey,
        BadKind::BadTimestamp,
        BadKind::Trap,
        BadKind::InvalidInput,
        BadKind::Failed,
        BadKind::Refused,
    ];

    /// Its name in dead letters, summaries and metrics: `unreadable`,
    /// `no-key`, `bad-timestamp`, `trap`, `invalid-input`, `failed`,
    /// `refused`.
    pub fn name(self) -> &'static str {
        match self {
            BadKind::Unreadable => "unreadable",
            BadKind::NoKey => "no-key",
            BadKind::BadTimestamp => "bad-timestamp",
            BadKind::Trap => "trap",
            BadKind::InvalidInput => "invalid-input",
            BadKind::Failed => "failed",
            BadKind::Refused => "refused",
        }
    }
}
