//! Waiting on observable state instead of on time: [`wait_until`] polls a
//! condition (a file, the store, a process's output) until it holds, and
//! fails the test, naming what it waited for, after a generous timeout.

use std::time::{Duration, Instant};

/// How long a test waits for something that takes well under a second on
/// an idle machine: generous, so that a loaded machine only slows a test
/// down, never fails it.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// How often [`wait_until`] polls.
const POLL: Duration = Duration::from_millis(10);

/// Polls `cond` until it returns `Some`, and returns that value; panics
/// with `what` (what was awaited) when `timeout` passes first.
pub fn wait_until<T>(what: &str, timeout: Duration, mut cond: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = cond() {
            return v;
        }
        assert!(
            start.elapsed() < timeout,
            "waited {timeout:?} for {what}; it never happened"
        );
        std::thread::sleep(POLL);
    }
}
