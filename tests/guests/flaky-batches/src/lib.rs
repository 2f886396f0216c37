//! Test fixture (sandbox, restarts): passes records through and traps (a
//! panic) on the `every`-th batch (config, default 10) that an instance
//! processes after it was opened, i.e. at most once per `every` batches and
//! once per attempt. The number of batches the job has processed is kept in
//! host state under `batches` (so it is checkpointed and restored).
//!
//! A job with restarts therefore completes as long as every attempt
//! completes a checkpoint within its first `every - 1` batches: each attempt
//! then resumes past the previous one's progress. Output stays exactly-once
//! because a failed attempt's output is never committed.

use serde::Deserialize;
use weir_sdk::{Context, OpenContext, Operator, OperatorInfo, Record, Result};

/// The fixture.
pub struct FlakyBatches {
    every: u64,
    since_open: u64,
}

#[derive(Deserialize)]
struct Config {
    #[serde(default = "ten")]
    every: u64,
}

fn ten() -> u64 {
    10
}

impl Operator for FlakyBatches {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("flaky-batches", "1.0.0")
            .input("in")
            .output("out")
    }

    fn open(ctx: &OpenContext) -> Result<Self> {
        let c: Config = ctx.config_as()?;
        Ok(FlakyBatches {
            every: c.every.max(1),
            since_open: 0,
        })
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        self.since_open += 1;
        let done = ctx
            .get(b"batches")
            .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap_or_default()));
        if self.since_open.is_multiple_of(self.every) {
            panic!(
                "flaky-batches: deliberate panic on batch {} of this attempt ({} batches done before it)",
                self.since_open, done
            );
        }
        ctx.put(b"batches", &(done + 1).to_le_bytes());
        ctx.emit_all(0, batch);
        Ok(())
    }
}

weir_sdk::export!(FlakyBatches);
