//! Test fixture: a would-be successor of `word-count` that restores fine
//! and then panics (a trap) on its first batch. Swapping to it must be
//! rolled back without losing or duplicating output.

use weir_sdk::{Context, OpenContext, Operator, OperatorInfo, Record, Result};

/// The fixture.
pub struct TrapFirstBatch;

impl Operator for TrapFirstBatch {
    fn describe() -> OperatorInfo {
        weir_guests::info("word-count", "9.0.0-trap")
    }

    fn open(_ctx: &OpenContext) -> Result<Self> {
        Ok(TrapFirstBatch)
    }

    fn process(&mut self, _ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        panic!(
            "deliberate trap on the first batch of {} records",
            batch.len()
        );
    }
}

weir_sdk::export!(TrapFirstBatch);
