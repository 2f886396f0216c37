//! Test fixture (sandbox, restarts): passes records through and traps (a
//! panic) on the `every`-th batch (config, default 10) that an instance
//! processes after it was opened, i.e. at most once per `every` batches and
//! once per attempt. The number of batches the job has processed is kept in
//! host state under `batches` (so it is checkpointed and restored).
//!
//! A job with restarts therefore completes as long as every attempt
//! completes a checkpoint within its first `every - 1` batches: each attempt
//! then resumes past the previous one's progress. Output stays exactly-once
//! because a failed attempt's output is never committed. Each panic's
//! message has the time in it, so no two failures read alike.

use weir_guests::{count, pass, set_count};
use weir_sdk::{Context, Record, Result};

/// The fixture.
pub struct FlakyBatches {
    every: u64,
    since_open: u64,
}

weir_guests::configured_guest! {
    FlakyBatches "flaky-batches",
    config Config { every: u64 = 10 },
    open |c| FlakyBatches {
        every: c.every.max(1),
        since_open: 0,
    };

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        self.since_open += 1;
        let done = count(ctx, b"batches");
        if self.since_open.is_multiple_of(self.every) {
            // The time makes every failure's message its own, as a flaky
            // fault's is: the host does not take it for one that recurs.
            panic!(
                "flaky-batches: deliberate panic on batch {} of this attempt ({} batches done before it) at {} ms",
                self.since_open,
                done,
                ctx.processing_time()
            );
        }
        set_count(ctx, b"batches", done + 1);
        pass(ctx, batch)
    }
}
