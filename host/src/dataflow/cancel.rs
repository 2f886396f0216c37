//! Cancellation of a job's threads: the [`Cancelled`] outcome and the
//! [`POLL`] interval.
//!
//! Invariant: every blocking send or receive of a job thread wakes up at
//! least every [`POLL`] to check the job's cancel flag, so a failed or
//! stopped job never hangs on a full or empty channel.

use std::time::Duration;

/// How often blocked threads check for cancellation.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// The job was cancelled (another thread failed, or the job stopped), or a
/// channel the thread needs is gone; the thread ends without reporting.
#[derive(Debug)]
pub(crate) struct Cancelled;
