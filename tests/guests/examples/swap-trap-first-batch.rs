//! Test fixture: a would-be successor of `word-count` that restores fine
//! and then panics (a trap) on its first batch. Swapping to it must be
//! rolled back without losing or duplicating output.

use weir_sdk::{Context, Record, Result};

fn process(_ctx: &mut Context, batch: Vec<Record>) -> Result<()> {
    panic!(
        "deliberate trap on the first batch of {} records",
        batch.len()
    );
}

weir_guests::unit_guest!(
    TrapFirstBatch,
    weir_guests::info("word-count", "9.0.0-trap"),
    process = process,
);
