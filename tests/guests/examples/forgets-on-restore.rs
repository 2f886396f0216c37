//! Test fixture (determinism checks): numbers the records it passes in the
//! order it saw them since it was opened, `<n> <value>`, and keeps that
//! count only in memory (no snapshot): run again from a checkpoint it
//! numbers from 0, so `weir replay` of any epoch but the first must find
//! that it emits other bytes.

use weir_sdk::{Context, Record, Result};

/// The fixture.
pub struct ForgetsOnRestore {
    seen: u64,
}

weir_guests::configured_guest! {
    ForgetsOnRestore "forgets-on-restore",
    config Config {},
    open |_c| ForgetsOnRestore { seen: 0 };

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        for rec in batch {
            let mut value = format!("{} ", self.seen).into_bytes();
            value.extend_from_slice(&rec.value);
            self.seen += 1;
            ctx.emit(0, Record { value, ..rec });
        }
        Ok(())
    }
}
