//! Test fixture (unaligned checkpoints, backpressure): passes records
//! through unchanged, sleeping `delay_ms` (config, default 5) per batch,
//! so that a fast input fills its channels and a checkpoint barrier waits
//! behind them. The sleep needs the `clocks` grant (without it a sleep
//! returns at once). The number of records passed is kept in host state
//! under `records`, checkpointed and restored.

use weir_guests::{count, pass, set_count};
use weir_sdk::{Context, Record, Result};

/// The fixture.
pub struct SlowPass {
    delay: std::time::Duration,
}

weir_guests::configured_guest! {
    SlowPass "slow-pass",
    config Config { delay_ms: u64 = 5 },
    open |c| SlowPass {
        delay: std::time::Duration::from_millis(c.delay_ms),
    };

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        std::thread::sleep(self.delay);
        let done = count(ctx, b"records");
        set_count(ctx, b"records", done + batch.len() as u64);
        pass(ctx, batch)
    }
}
